/* remote.h — the engine's side of a shared cache (docs/cache.md, "Using a
 * shared cache"): the kiln_cache handle the project's `cache:` (or
 * KILN_CACHE_URL / KILN_CACHE_MODE) asks for (remote.c), the lookup of a
 * step the local cache missed (remote.c), and the background upload of
 * results this machine ran (remote_upload.c).
 *
 * Nothing here fails a step: every error of the cache is a miss, or an
 * upload counted and dropped. */
#ifndef KILND_REMOTE_H
#define KILND_REMOTE_H

#include <stdatomic.h>

#include "engine_int.h"
#include "cache_entries.h"
#include "decide.h"
#include "kiln_cache.h"

/* One opened handle and the configuration it was opened with. A lookup or
 * the uploader holds a reference while it uses the handle, so that a
 * project reloaded with another `cache:` never closes it under them. */
struct remote_conn {
	kiln_cache *c;
	unsigned refs;           /* (r->mu) */
	kiln_cache_mode mode;    /* READ or READWRITE */
	char *url, *basic, *bearer, *ca, *sign;
	uint32_t timeout_s, connect_timeout_s;   /* 0: the transport's default */
	_Atomic int error_said;  /* a failed transfer was logged once */
};

/* The user's settings file as last read (remote.c): read again when it
 * changed, and at every project load until it reads without errors. */
struct user_file {
	char path[4096];         /* "" when there is none to look for */
	int ok;                  /* the last read had no errors */
	int64_t mtime_ns, ctime_ns;
	uint64_t ino, dev, size;
	int exists;
};

/* Blobs a lookup found corrupt on the server (their SHA-256): uploaded
 * again without asking first, since a server that does not check what it
 * stores (nginx) would otherwise keep the bad bytes forever under a HEAD
 * that answers with the right size. A small ring: forgetting one only
 * loses that repair until the next time it is found. */
#define REMOTE_BAD_MAX 64

/* A result to upload, copied from its node (remote_upload.c). */
struct up_job {
	struct up_job *next;
	uint8_t action[16];      /* the action key */
	size_t nout;
	struct up_out { char *name; kiln_id id; } *outs;
	int has_log;
	kiln_id log;
	size_t nfiles;
	char **paths;            /* discovered files */
	struct disc_seen *seen;  /* as verify.c hashed them after the run */
	int traced;
	uint64_t duration_ns;
	size_t nwarn;
	char **warnings;
	size_t nneeds;           /* its kiln needs (remote_need.c) */
	struct up_need { char *url, *output; kiln_id hash; } *needs;
};

struct remote {
	pthread_mutex_t mu;      /* conn, the queue, busy, quit */
	pthread_cond_t cv;       /* the uploader: a job came, or quit */
	pthread_cond_t idle_cv;  /* remote_free: the uploader ended a batch */
	struct remote_conn *conn; /* NULL: no shared cache */
	struct up_job *head, *tail;
	unsigned nq, busy;       /* jobs queued; jobs the uploader holds */
	int quit, started;
	pthread_t thr;
	_Atomic uint64_t downloaded, missed, corrupt, uploaded, dropped;
	_Atomic uint64_t failed;  /* results not listed: a transfer of their
	                             round failed (counted in dropped too) */
	_Atomic int corrupt_said; /* a corrupt entry was logged once */
	struct user_file user;   /* (e->mu) */
	uint8_t bad[REMOTE_BAD_MAX][32]; /* (mu) */
	unsigned nbad;           /* (mu) entries written, ever */
};

/* ---- remote.c, for remote_upload.c and remote_config.c ---- */

/* Close rc's handle and free it (its last reference is gone). */
void remote_conn_free(struct remote_conn *rc);

/* The current handle with a reference (NULL: none); give it back with
 * remote_conn_put. */
struct remote_conn *remote_conn_get(struct remote *r);
void remote_conn_put(struct remote *r, struct remote_conn *rc);

/* The SHA-256 and XXH3-128 of the file at path (project-relative or
 * absolute), read once. 0, KILN_ENOTFOUND (missing), or another error. */
int remote_file_hash(struct engine *e, const char *path, uint8_t sha[32], kiln_id *xx);

/* Download the AC entry key into a malloc'd *buf (at most
 * KILN_CACHE_ENTRY_MAX bytes). The codes of kiln_cache_get. */
int remote_get_entry(kiln_cache *c, const uint8_t key[32], uint8_t **buf, size_t *len);

/* ---- remote_need.c, for remote.c and remote_upload.c ---- */

/* The needs of j as the index entry states them (out[0..j->nneeds)): the
 * SHA-256 of each needed blob; strings borrowed from j. 0 or the store's
 * code (the blob is gone: the result cannot be shared). */
int remote_need_shas(struct engine *e, const struct up_job *j, struct kiln_cache_need *out);

/* Whether candidate c's needs hold for n here (the worker deciding n,
 * without e->mu): CACHE_HIT each needed step is done in this wave with
 * an output of the SHA-256 stated (ids[0..c->nneeds) its local id);
 * CACHE_NEEDS some are not done yet, and n->needs now names them (the
 * engine schedules them and decides n again); CACHE_MISS otherwise. */
enum cache_result remote_need_check(struct engine *e, struct graph *g, struct node *n,
                                    const struct kiln_cache_candidate *c, kiln_id *ids);

/* ---- remote_upload.c, for remote.c ---- */

/* The uploader thread (remote_new starts it). */
void *remote_uploader_main(void *arg);
void up_job_free(struct up_job *j);

/* Make e->remote and start its uploader thread (no handle yet: nothing
 * is sent until a project asks for a cache). 0, KILN_ENOMEM, KILN_EIO. */
int remote_new(struct engine *e);

/* Let the uploader send what is queued for up to KILN_CACHE_STOP_WAIT
 * (60 s by default; `kiln build && kiln stop` in CI must not lose the
 * build's results), log what became of it, then stop it (what is still
 * queued is dropped and counted), close the handle, free e->remote.
 * NULL e->remote is fine. */
void remote_free(struct engine *e);

/* The project was loaded (e->mu held, no build running): read the user's
 * settings file, and open, reopen or close the handle so that it matches
 * the environment's settings over the user's over d's `cache:`. A cache
 * that cannot be opened (a bad credential file) is logged and left off:
 * 0. A user file with errors is KILN_EBADPROJECT with them in err (file,
 * line, field; one a line), logged too, and the handle is left as it
 * was; KILN_ENOMEM. */
int remote_configure(struct engine *e, const kiln_desc *d, char *err, size_t errlen);

/* The project is unchanged (e->mu held, no build running): configure
 * again if the user's file changed since it was read, or had errors.
 * The codes of remote_configure. */
int remote_refresh(struct engine *e, char *err, size_t errlen);

/* A lookup found the blob of this SHA-256 corrupt on the server: its next
 * upload sends it without asking whether the server has it. */
void remote_note_bad_blob(struct remote *r, const uint8_t sha[32]);
/* Whether sha was noted so (and forget it: one plain upload repairs it). */
int remote_take_bad_blob(struct remote *r, const uint8_t sha[32]);

/* Whether a cache is configured for lookups now (unlocked; a hint). */
int remote_enabled(struct engine *e);

/* Look n->w->new_key up in the shared cache (the worker deciding n,
 * without e->mu): the first candidate whose discovered files hold on this
 * machine, with every blob in the local store afterwards (downloaded and
 * verified by SHA-256 when missing). 0 with *res a result to serve n
 * (free with kiln__action_result__free_unpacked): outputs with local ids,
 * discovered files with their local hashes, kiln needs with the local
 * ids of the needed outputs; KILN_EBUSY when the candidate found needs
 * steps not done yet (n->needs names them: wait, then look up again);
 * KILN_ENOTFOUND for any miss, whatever the cause; KILN_ENOMEM. */
int remote_fetch(struct engine *e, struct graph *g, struct node *n, Kiln__ActionResult **res);

/* n's tool ran and its result was recorded (the worker finishing n):
 * queue its upload (mode readwrite).
 * Never blocks: a full queue drops it (counted). */
void remote_upload(struct engine *e, const struct node *n);

/* Build agents (agent_jobs.c) and the shared cache: a job's input id is
 * offered there (its SHA-256 into sha; queued for upload when the mode is
 * readwrite and the server lacks it), and an answer's output an agent put
 * there is fetched by its SHA-256 (checked) into the store (*id). Both
 * KILN_ENOTFOUND without a cache; a fetch the transport's codes or
 * KILN_ECORRUPT. */
int remote_blob_offer(struct engine *e, const kiln_id *id, uint8_t sha[32]);
int remote_blob_fetch(struct engine *e, const uint8_t sha[32], uint64_t size, kiln_id *id);

/* The counters for `kiln status`. */
void remote_status(struct engine *e, struct engine_cache_status *st);

#endif
