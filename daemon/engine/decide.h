/* decide.h — deciding a step: up to date, a cached result reused, or its
 * tool must run (decide.c, decide_key.c, decide_cache.c), with the results
 * kept per action key (action_results.c) and the store's blobs watched
 * (blob_watch.c). */
#ifndef KILND_DECIDE_H
#define KILND_DECIDE_H

#include "engine_int.h"

/* ---- decide.c ---- */

enum eval_result { EVAL_DONE, EVAL_RUN, EVAL_FAIL, EVAL_NEEDS };

/* Decide node n of g (unlocked; the node is N_EVAL). EVAL_DONE: its
 * outputs are current and materialized; EVAL_RUN: its tool must run
 * (n->parts and n->new_key are set); EVAL_FAIL: n->error says why;
 * EVAL_NEEDS: a cached result needs steps not yet done in this wave
 * (n->needs names them): need_prereqs, then decide again. */
enum eval_result step_eval(struct engine *e, struct graph *g, struct node *n,
                           int dry_run);

/* n's quick key into *q: a hash of its program and of everything it reads
 * (inputs, prerequisites' outputs, discovered files, needs), as the file
 * table sees them now. 0, or an error. Its worker, unlocked. */
int step_quick_key(struct engine *e, const struct graph *g, struct node *n, kiln_id *q);

/* ---- decide_key.c ---- */

/* Gather n's action key parts into kp (decide_key.c): the tool's, then the
 * step's (params, outputs, inputs, prerequisites' outputs); n->w->seen_in
 * and n->w->program set. 0, or an error (n->error set for a missing or
 * unreadable input and a tool not found). */
int step_key_parts(struct engine *e, const struct graph *g, struct node *n,
                   struct key_parts *kp);

/* The program n's tool runs (absolute, into exe) and its hash (h may be
 * NULL), looked up once per tool per wave. 0, or an error with n->error
 * set. */
int step_program(struct engine *e, struct node *n, char *exe, size_t len,
                 kiln_id *h, struct fs_seen *seen);

/* ---- decide_cache.c ---- */

/* How a cache lookup went. */
enum cache_result {
	CACHE_MISS,   /* no result can serve the step: why says what the
	                 newest lacks */
	CACHE_HIT,    /* a result serves it (n->outs filled, not materialized) */
	CACHE_NEEDS,  /* a result needs steps not done in this wave yet
	                 (n->needs names them) */
};

/* Look n->w->new_key up (several results per key) and take the first
 * result that holds: CACHE_HIT with *hit its place (0 the newest). On
 * CACHE_MISS why says what the newest lacks, *missing_blob whether its
 * blobs were gone. */
enum cache_result cache_lookup(struct engine *e, struct graph *g, struct node *n,
                               int *missing_blob, size_t *hit, char *why,
                               size_t whylen);

/* The shared cache's lookup of n->w->new_key after a local miss
 * (remote.c): CACHE_HIT when a result was downloaded (or found in the
 * store by SHA-256), holds here and was taken like a local one (n->outs
 * filled, not materialized; queued as n's local result); CACHE_NEEDS when
 * the result found used `kiln need` of steps not done yet (n->needs names
 * them: decide n again after them); else CACHE_MISS, whatever went wrong.
 * Blocks on the network: never with e->mu. */
enum cache_result cache_lookup_remote(struct engine *e, struct graph *g,
                                      struct node *n);

/* ---- action_results.c: several results per action key ---- */

/* The results kept under key, newest use first (free with
 * kiln__action_entry__free_unpacked); NULL when none or unreadable. */
Kiln__ActionEntry *results_get(struct engine *e, const kiln_id *key);

/* Queue ar as key's newest result, after the key's other results that
 * discovered other files (or the same with other hashes), at most 8.
 * 0 or KILN_ENOMEM. */
int results_put(struct engine *e, const kiln_id *key, Kiln__ActionResult *ar);

/* entry's result at was used: queue the entry with it first. 0 or
 * KILN_ENOMEM. */
int results_touch(struct engine *e, const kiln_id *key, Kiln__ActionEntry *entry,
                  size_t at);

/* ---- blob_watch.c ---- */

/* Watch the store's objects/ folder (e->blobs; stays NULL without the
 * project's watch or inotify). */
void blobs_watch_open(struct engine *e);

/* Whether o's blob is in the store: from the store's watch when nothing
 * touched it since it was last found, else a stat. 1 yes, 0 no. */
int blob_present(struct engine *e, struct node_out *o);

#endif
