/* decide_cache.c — deciding, part two: the cache lookup. A step's action
 * key may have several results (action_results.c); the first whose blobs
 * are all still in the store and intact, whose discovered files hash as
 * recorded and whose kiln needs resolve to their recorded outputs
 * (need.c) serves the step (decide.c then materializes it). A blob that no
 * longer matches its name (edited through a hard link in build/) is
 * quarantined here, so it is never served.
 *
 * Threads: the worker deciding the node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "folder_out.h"
#include "decide.h"
#include "discover.h"
#include "need.h"
#include "publish.h"
#include "remote.h"
#include "step.h"

/* A blob edited through its hard link in build/ (hardlink mode), or
 * damaged any other way, no longer matches its name: find that (only for
 * outputs whose file moved: an intact one was not written through, and
 * a copy is checked again as it is made) and quarantine the blob, so it
 * is never served, the result is a miss and the step runs again. 1: the
 * blob is good. */
static int
blob_still_good(struct engine *e, const char *path, const kiln_id *id)
{
	kiln_file_rec rec;
	char msg[600], hex[KILN_ID_HEX_LEN + 1];
	int rv;

	if (kiln_store_file_get(e->s, path, &rec) == 0 && id_eq(&rec.hash, id) &&
	    mat_unchanged(e, path, &rec))
		return 1;
	if (kiln_store_verify(e->s, id) != KILN_ECORRUPT)
		return 1;
	/* KILN_ENOTFOUND: another worker moved it first (two outputs with
	 * the same bytes) */
	rv = kiln_store_quarantine(e->s, id);
	kiln_id_to_hex(id, hex);
	snprintf(msg, sizeof msg, "blob %s (output %s) does not match its name: %s",
	         hex, path, rv == 0 ? "moved to the store's corrupt/, the step runs again"
	         : rv == KILN_ENOTFOUND ? "already moved to corrupt/" : kiln_strerror(rv));
	if (e->cfg.log)
		e->cfg.log(e->cfg.arg, rv != 0 && rv != KILN_ENOTFOUND, msg);
	return 0;
}

/* Whether result res can serve n now: its blobs are in the store and
 * intact, its discovered files hash as recorded, its needs resolve to
 * their recorded outputs. CACHE_HIT (n->outs filled, not materialized);
 * CACHE_MISS (why says which discovered file changed, *missing_blob when a
 * blob is gone); CACHE_NEEDS: it needs steps not done in this wave yet
 * (n->needs names them). */
static enum cache_result
result_holds(struct engine *e, struct graph *g, struct node *n,
             const Kiln__ActionResult *res, int *missing_blob, char *why, size_t whylen)
{
	if (res->n_outputs != n->ks->noutputs)
		return CACHE_MISS;
	for (size_t i = 0; i < res->n_outputs; i++) {
		Kiln__StepOutput *o = res->outputs[i];
		if (o->id.len != 16 || strcmp(o->name, n->ks->outputs[i].name) != 0)
			return CACHE_MISS;
		memcpy(n->outs[i].id.b, o->id.data, 16);
		n->outs[i].size = o->size;
		if (kiln_store_has(e->s, &n->outs[i].id, NULL) != 0 ||
		    (n->outs[i].folder ? !folder_blobs_present(e, &n->outs[i].id)
		     : !blob_still_good(e, n->outpaths[i], &n->outs[i].id))) {
			*missing_blob = 1;
			return CACHE_MISS;
		}
	}
	/* discovered dependencies must still hold */
	for (size_t i = 0; i < res->n_files; i++) {
		const Kiln__FileDep *f = res->files[i];
		kiln_id h;
		int rv = trace_dep_hash(e, f->path, &h);
		if (f->hash.len == 0 ? rv != KILN_ENOTFOUND
		    : rv != 0 || memcmp(h.b, f->hash.data, 16) != 0) {
			char was[KILN_ID_HEX_LEN + 1] = "missing", now[KILN_ID_HEX_LEN + 1] = "missing";
			kiln_id old;
			if (f->hash.len == 16) {
				memcpy(old.b, f->hash.data, 16);
				kiln_id_to_hex(&old, was);
			}
			if (rv == 0)
				kiln_id_to_hex(&h, now);
			snprintf(why, whylen, "discovered dependency %s (%s) changed %.8s -> %.8s",
			         f->path, f->source == KILN__FILE_DEP__SOURCE__DEPFILE ?
			         "depfile" : "trace", was, now);
			return CACHE_MISS;
		}
	}
	/* kiln need: every needed URL must still resolve to its hash
	 * (need.c) */
	if (res->n_needs > 0 || n->nneeds > 0) {
		enum cache_result r = need_check_result(e, g, n, res->needs, res->n_needs,
		                                        why, whylen);
		if (r != CACHE_HIT)
			return r;
	}
	return CACHE_HIT;
}

/* Serve n from result res (result_holds said CACHE_HIT): its discovered
 * files, warnings, tracing and log become n's. 0 or KILN_ENOMEM. */
static int
result_take(struct node *n, const Kiln__ActionResult *res)
{
	char **paths = calloc(res->n_files + 1, sizeof *paths);
	int rv;

	if (paths == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < res->n_files; i++)
		paths[i] = res->files[i]->path;
	rv = step_set_disc(n, paths, res->n_files);
	free(paths);
	/* the run's warnings hold for every reuse of its result */
	if (rv == 0)
		rv = step_set_warnings(n, res->warnings, res->n_warnings);
	if (rv != 0)
		return rv;
	n->traced = res->traced;
	n->w->has_log = res->log.len == 16;
	if (n->w->has_log)
		memcpy(n->w->log_id.b, res->log.data, 16);
	return 0;
}

enum cache_result
cache_lookup(struct engine *e, struct graph *g, struct node *n,
             int *missing_blob, size_t *hit, char *why, size_t whylen)
{
	Kiln__ActionEntry *entry = results_get(e, &n->w->new_key);
	enum cache_result ok = CACHE_MISS;

	*missing_blob = 0;
	*hit = 0;
	for (size_t i = 0; entry != NULL && i < entry->n_results && ok == CACHE_MISS; i++) {
		int gone = 0;
		char later[600];
		/* the newest result's story is the one worth telling */
		ok = result_holds(e, g, n, entry->results[i], &gone, i == 0 ? why : later,
		                  i == 0 ? whylen : sizeof later);
		if (i == 0)
			*missing_blob = gone;
		if (ok == CACHE_HIT && result_take(n, entry->results[i]) != 0)
			ok = CACHE_MISS;
		if (ok == CACHE_HIT) {
			*hit = i;
			results_touch(e, &n->w->new_key, entry, i);
		}
	}
	if (entry != NULL)
		kiln__action_entry__free_unpacked(entry, NULL);
	return ok;
}

enum cache_result
cache_lookup_remote(struct engine *e, struct graph *g, struct node *n)
{
	Kiln__ActionResult *res = NULL;
	enum cache_result ok;
	char why[600];
	int gone = 0, rv;

	/* a candidate that used `kiln need` waits for what it needs, then
	 * is looked up again (remote_need.c) */
	if ((rv = remote_fetch(e, g, n, &res)) != 0)
		return rv == KILN_EBUSY ? CACHE_NEEDS : CACHE_MISS;
	/* the same checks as a local result's: its blobs are in the store
	 * now, its files were just found to hold */
	ok = result_holds(e, g, n, res, &gone, why, sizeof why);
	if (ok == CACHE_HIT && result_take(n, res) != 0)
		ok = CACHE_MISS;
	/* this machine's result from now on (several per key, like a run's) */
	if (ok == CACHE_HIT && results_put(e, &n->w->new_key, res) != 0)
		ok = CACHE_MISS;
	kiln__action_result__free_unpacked(res, NULL);
	return ok == CACHE_HIT ? CACHE_HIT : CACHE_MISS;
}
