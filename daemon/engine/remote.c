/* remote.c — the shared cache's handle and lookups (remote.h; docs/cache.md
 * has the layout, "Using a shared cache" what the engine does with it;
 * remote_config.c what the handle is opened with).
 *
 * A step the local cache missed is looked up here: its index entry (one
 * per action key) lists candidate results by the SHA-256 of the files
 * their runs discovered; the first candidate whose files hold on this
 * machine names a result entry, whose blobs are taken from the local
 * store when it has them (by SHA-256) and downloaded otherwise, each
 * checked against its SHA-256 as it is written (nginx checks nothing).
 * The answer is an ordinary local ActionResult, which decide_cache.c
 * checks and serves like any cached result.
 *
 * Threads: remote_configure with e->mu held (no build running); lookups
 * from the worker deciding a node, without e->mu (they may block on the
 * network for the transfers' timeouts); r->mu guards the handle pointer
 * and its references, briefly. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "cache_entries.h"
#include "discover.h"
#include "remote.h"
#include "step.h"

/* ---- the handle ------------------------------------------------------------ */

void
remote_conn_free(struct remote_conn *rc)
{
	if (rc == NULL)
		return;
	kiln_cache_close(rc->c);
	free(rc->url);
	free(rc->basic);
	free(rc->bearer);
	free(rc->ca);
	free(rc->sign);
	free(rc);
}

struct remote_conn *
remote_conn_get(struct remote *r)
{
	struct remote_conn *rc;

	pthread_mutex_lock(&r->mu);
	if ((rc = r->conn) != NULL)
		rc->refs++;
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void
remote_conn_put(struct remote *r, struct remote_conn *rc)
{
	unsigned left;

	if (rc == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	left = --rc->refs;
	pthread_mutex_unlock(&r->mu);
	/* the last user closes it: a reload swapped it out meanwhile */
	if (left == 0)
		remote_conn_free(rc);
}

int
remote_new(struct engine *e)
{
	struct remote *r = calloc(1, sizeof *r);
	pthread_condattr_t ca;

	if (r == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	/* remote_free waits on it with a deadline on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->idle_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->remote = r;
	/* none to look for (no HOME) or a path too long: no user settings */
	if (kiln_user_config_path(e->cfg.cache.config_home, e->cfg.cache.home, r->user.path,
	                          sizeof r->user.path) != 0)
		r->user.path[0] = '\0';
	if (pthread_create(&r->thr, NULL, remote_uploader_main, e) != 0)
		return KILN_EIO;   /* engine_free frees r */
	r->started = 1;
	return 0;
}

/* How long a stopping daemon lets pending uploads finish: a CI job's
 * `kiln build && kiln stop` would otherwise lose most of its results. */
#define STOP_WAIT_S 60

/* Wait until the uploader has nothing queued or in hand, or wait_s
 * passed. The results pending when it began. */
static unsigned
uploads_wait_idle(struct remote *r, uint32_t wait_s)
{
	struct timespec until;
	unsigned pending;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_s;
	pthread_mutex_lock(&r->mu);
	pending = r->nq + r->busy;
	while (r->started && (r->nq > 0 || r->busy > 0) &&
	       pthread_cond_timedwait(&r->idle_cv, &r->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&r->mu);
	return pending;
}

/* Stop the uploader, after letting it finish what is pending (within the
 * bound), and log what became of it. */
static void
uploads_stop(struct engine *e)
{
	struct remote *r = e->remote;
	uint32_t wait_s = STOP_WAIT_S;
	uint64_t up0 = atomic_load(&r->uploaded), failed0 = atomic_load(&r->failed);
	uint64_t dropped0 = atomic_load(&r->dropped);
	unsigned pending;

	/* the daemon checked the value before the engine started */
	if (e->cfg.cache.stop_wait != NULL &&
	    kiln_duration_parse(e->cfg.cache.stop_wait, &wait_s) != 0)
		wait_s = STOP_WAIT_S;
	if ((pending = uploads_wait_idle(r, wait_s)) > 0)
		engine_logf(e, 0, "shared cache: stopping with %u results to upload "
		            "(waiting up to %" PRIu32 " s, KILN_CACHE_STOP_WAIT)", pending, wait_s);
	pthread_mutex_lock(&r->mu);
	__atomic_store_n(&r->quit, 1, __ATOMIC_RELAXED);   /* round_wait reads it */
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->thr, NULL);
	if (pending > 0) {
		uint64_t failed = atomic_load(&r->failed) - failed0;
		uint64_t dropped = atomic_load(&r->dropped) - dropped0;

		engine_logf(e, failed > 0 || dropped > 0,
		            "shared cache: at stop, of %u results pending: %" PRIu64
		            " uploaded, %" PRIu64 " failed, %" PRIu64 " dropped", pending,
		            atomic_load(&r->uploaded) - up0, failed, dropped);
	}
}

void
remote_free(struct engine *e)
{
	struct remote *r = e->remote;
	struct remote_conn *rc;

	if (r == NULL)
		return;
	uploads_stop(e);
	while (r->head != NULL) {
		struct up_job *j = r->head;
		r->head = j->next;
		up_job_free(j);
	}
	rc = r->conn;
	r->conn = NULL;
	if (rc != NULL && --rc->refs == 0)
		remote_conn_free(rc);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	pthread_cond_destroy(&r->idle_cv);
	free(r);
	e->remote = NULL;
}

/* ---- blobs found corrupt ------------------------------------------------------- */

void
remote_note_bad_blob(struct remote *r, const uint8_t sha[32])
{
	pthread_mutex_lock(&r->mu);
	memcpy(r->bad[r->nbad++ % REMOTE_BAD_MAX], sha, 32);
	pthread_mutex_unlock(&r->mu);
}

int
remote_take_bad_blob(struct remote *r, const uint8_t sha[32])
{
	unsigned n;
	int found = 0;

	pthread_mutex_lock(&r->mu);
	n = r->nbad < REMOTE_BAD_MAX ? r->nbad : REMOTE_BAD_MAX;
	for (unsigned i = 0; i < n && !found; i++)
		if (memcmp(r->bad[i], sha, 32) == 0) {
			memset(r->bad[i], 0, 32);   /* no blob's SHA-256 is all zero */
			found = 1;
		}
	pthread_mutex_unlock(&r->mu);
	return found;
}

int
remote_enabled(struct engine *e)
{
	struct remote *r = e->remote;

	return r != NULL && __atomic_load_n(&r->conn, __ATOMIC_RELAXED) != NULL;
}

/* ---- reading ---------------------------------------------------------------- */

int
remote_file_hash(struct engine *e, const char *path, uint8_t sha[32], kiln_id *xx)
{
	struct stat st;
	int fd, rv;

	/* a path named by another machine's result: never block on a FIFO
	 * or read a device (O_NONBLOCK only matters until the fstat) */
	fd = path[0] == '/' ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
	                    : openat(e->rootfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND : KILN_EIO;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		rv = KILN_EIO;
	else
		rv = kiln_id_sha256_of_fd(fd, xx, sha, NULL);
	close(fd);
	return rv;
}

struct membuf {
	uint8_t *p;
	size_t n, cap;
};

static int
mem_sink(void *arg, const void *data, size_t len)
{
	struct membuf *m = arg;

	if (m->n + len > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		uint8_t *p;
		while (cap < m->n + len)
			cap *= 2;
		if ((p = realloc(m->p, cap)) == NULL)
			return KILN_ENOMEM;
		m->p = p;
		m->cap = cap;
	}
	memcpy(m->p + m->n, data, len);
	m->n += len;
	return 0;
}

int
remote_get_entry(kiln_cache *c, const uint8_t key[32], uint8_t **buf, size_t *len)
{
	struct membuf m = {0};
	char hex[KILN_CACHE_HEX_LEN + 1];
	int rv;

	kiln_cache_hex(key, hex);
	rv = kiln_cache_get(c, KILN_CACHE_AC, hex, KILN_CACHE_ENTRY_MAX, mem_sink, &m, NULL);
	/* with a sign_key_file, an entry not signed with it is not kiln's */
	if (rv == 0)
		rv = kiln_cache_verify(c, key, m.p, m.n);
	if (rv != 0) {
		free(m.p);
		return rv;
	}
	*buf = m.p;
	*len = m.n;
	return 0;
}

/* A corrupt entry or blob on the server: a miss, counted, and said once
 * in the daemon's log (a server full of them would flood it). */
static void
corrupt_note(struct engine *e, kiln_cache *c, const char *what, const char *hex)
{
	struct remote *r = e->remote;

	atomic_fetch_add(&r->corrupt, 1);
	if (atomic_exchange(&r->corrupt_said, 1) == 0)
		engine_logf(e, 1, "shared cache: %s%s is corrupt%s (treated as a miss; "
		           "later ones are only counted in kiln status)", what, hex,
		           c != NULL && kiln_cache_signs(c) ? " or not signed with sign_key_file" : "");
}

/* A lookup's transfer failed (not a miss): said once per handle in the
 * daemon's log, so that a cache that cannot be reached (a wrong CA, bad
 * credentials, a dead server) is not only a counter in kiln status. */
static void
error_note(struct engine *e, struct remote_conn *rc, int rv)
{
	if (rv == 0 || rv == KILN_ENOTFOUND || rv == KILN_ECORRUPT || rv == KILN_ENOMEM)
		return;
	/* KILN_ETLS's own words are about kiln's --tls-ca */
	if (atomic_exchange(&rc->error_said, 1) == 0)
		engine_logf(e, 1, "shared cache %s: %s (steps are built here; later "
		           "errors are only counted in kiln status)", rc->url,
		           rv == KILN_ETLS ? "TLS failed: the server's certificate did not "
		           "verify against ca_file (or the system's CAs), or does not name "
		           "its host" : kiln_strerror(rv));
}

/* Whether candidate c's discovered files hold here: each that existed has
 * that SHA-256 now, each that did not still does not. xx[i] gets file
 * i's local hash (what result_holds checks). Folder listings are not
 * shared in this version: a candidate with one never holds. (Its kiln
 * needs are checked apart: remote_need.c.) */
static int
candidate_holds(struct engine *e, const struct kiln_cache_candidate *c, kiln_id *xx)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct kiln_cache_file *f = &c->files[i];
		size_t len = strlen(f->path);
		uint8_t sha[32];
		kiln_id local;
		int rv;
		if (len == 0 || f->path[len - 1] == '/')
			return 0;
		rv = trace_dep_hash(e, f->path, &local);
		if (!f->present) {
			if (rv != KILN_ENOTFOUND)
				return 0;
			memset(&xx[i], 0, sizeof xx[i]);
			continue;
		}
		/* the bytes hashed here must be those the local hash vouches
		 * for: a file changing between the two reads holds nothing */
		if (rv != 0 || remote_file_hash(e, f->path, sha, &xx[i]) != 0 ||
		    memcmp(sha, f->sha, 32) != 0 || !id_eq(&xx[i], &local))
			return 0;
	}
	return 1;
}

static int
writer_sink(void *arg, const void *data, size_t len)
{
	return kiln_blob_writer_write(arg, data, len);
}

/* Blob d into the local store (*id its name): found by SHA-256, else
 * downloaded and checked as it is written. 0, KILN_ECORRUPT (the server's
 * bytes are not d), or another code: a miss either way. */
static int
blob_fetch(struct engine *e, kiln_cache *c, const struct kiln_cache_digest *d, kiln_id *id)
{
	kiln_blob_writer *w = NULL;
	char hex[KILN_CACHE_HEX_LEN + 1];
	uint64_t size = 0;
	int rv;

	if (kiln_store_find_sha256(e->s, d->sha, id) == 0)
		return 0;
	kiln_cache_hex(d->sha, hex);
	if ((rv = kiln_blob_writer_open(e->s, &w)) != 0)
		return rv;
	kiln_blob_writer_expect_sha256(w, d->sha);
	rv = kiln_cache_get(c, KILN_CACHE_CAS, hex, d->size, writer_sink, w, &size);
	if (rv == 0 && size != d->size)
		rv = KILN_ECORRUPT;
	if (rv != 0) {
		kiln_blob_writer_abort(w);
		if (rv == KILN_ERANGE)   /* longer than its digest says */
			rv = KILN_ECORRUPT;
	} else {
		rv = kiln_blob_writer_commit(w, NULL, id);
	}
	if (rv == KILN_ECORRUPT) {
		corrupt_note(e, NULL, "blob cas/", hex);
		remote_note_bad_blob(e->remote, d->sha);
	}
	return rv;
}

int
remote_blob_fetch(struct engine *e, const uint8_t sha[32], uint64_t size, kiln_id *id)
{
	struct remote_conn *rc = e->remote != NULL ? remote_conn_get(e->remote) : NULL;
	struct kiln_cache_digest d;
	int rv;

	if (rc == NULL)
		return KILN_ENOTFOUND;
	memcpy(d.sha, sha, 32);
	d.size = size;
	rv = blob_fetch(e, rc->c, &d, id);
	if (rv != 0 && rv != KILN_ECORRUPT)
		error_note(e, rc, rv);
	remote_conn_put(e->remote, rc);
	return rv;
}

/* c's needs as the local result's UrlDeps, with the local ids of the
 * needed outputs (nids): one malloc'd block in *out. 0 or KILN_ENOMEM. */
static int
needs_local(const struct kiln_cache_candidate *c, const kiln_id *nids, Kiln__UrlDep ***out)
{
	Kiln__UrlDep **p = malloc((c->nneeds ? c->nneeds : 1) * (sizeof *p + sizeof **p));
	Kiln__UrlDep *v = (Kiln__UrlDep *)(p + (c->nneeds ? c->nneeds : 1));

	if ((*out = p) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < c->nneeds; i++) {
		kiln__url_dep__init(&v[i]);
		v[i].url = (char *)c->needs[i].url;
		v[i].output = (char *)c->needs[i].output;
		v[i].hash.data = (uint8_t *)nids[i].b;
		v[i].hash.len = 16;
		p[i] = &v[i];
	}
	return 0;
}

/* The local result serving n from remote result rr with candidate c's
 * files (their local hashes xx) and needs (the needed outputs' local ids
 * nids), packed and unpacked so that it frees like any other. */
static int
result_local(struct engine *e, struct node *n, const struct kiln_cache_candidate *c,
             const kiln_id *xx, const kiln_id *nids, const kiln_id *ids, const kiln_id *log,
             Kiln__ActionResult **res)
{
	Kiln__ActionResult ar = KILN__ACTION_RESULT__INIT;
	size_t no = n->ks->noutputs, nf = c->nfiles;
	Kiln__StepOutput *ov = calloc(no ? no : 1, sizeof *ov);
	Kiln__StepOutput **op = calloc(no ? no : 1, sizeof *op);
	Kiln__FileDep *fv = calloc(nf ? nf : 1, sizeof *fv);
	Kiln__FileDep **fp = calloc(nf ? nf : 1, sizeof *fp);
	Kiln__UrlDep **np = NULL;
	uint8_t *buf = NULL;
	size_t len;
	int rv = KILN_ENOMEM;

	(void)e;
	if (ov == NULL || op == NULL || fv == NULL || fp == NULL || needs_local(c, nids, &np) != 0)
		goto fail;
	for (size_t i = 0; i < no; i++) {
		uint64_t size = 0;
		kiln__step_output__init(&ov[i]);
		ov[i].name = (char *)n->ks->outputs[i].name;
		ov[i].id.data = (uint8_t *)ids[i].b;
		ov[i].id.len = 16;
		if (kiln_store_has(e->s, &ids[i], &size) == 0)
			ov[i].size = size;
		op[i] = &ov[i];
	}
	for (size_t i = 0; i < nf; i++) {
		kiln__file_dep__init(&fv[i]);
		fv[i].path = (char *)c->files[i].path;
		fv[i].source = n->ks->tool->depfile ? KILN__FILE_DEP__SOURCE__DEPFILE
		                                    : KILN__FILE_DEP__SOURCE__TRACE;
		if (c->files[i].present) {
			fv[i].hash.data = (uint8_t *)xx[i].b;
			fv[i].hash.len = 16;
		}
		fp[i] = &fv[i];
	}
	ar.outputs = op;
	ar.n_outputs = no;
	ar.files = fp;
	ar.n_files = nf;
	ar.needs = np;
	ar.n_needs = c->nneeds;
	ar.traced = c->traced;
	ar.duration_ns = c->duration_ns;
	ar.warnings = (char **)c->warnings;
	ar.n_warnings = c->nwarnings;
	if (log != NULL) {
		ar.log.data = (uint8_t *)log->b;
		ar.log.len = 16;
	}
	len = kiln__action_result__get_packed_size(&ar);
	if ((buf = malloc(len ? len : 1)) == NULL)
		goto fail;
	kiln__action_result__pack(&ar, buf);
	if ((*res = kiln__action_result__unpack(NULL, len, buf)) != NULL)
		rv = 0;
fail:
	free(buf);
	free(ov);
	free(op);
	free(fv);
	free(fp);
	free(np);
	return rv;
}

/* Candidate c of index key's action holds here: fetch its result entry
 * and every blob, and make the local result. */
static int
fetch_result(struct engine *e, kiln_cache *c, struct node *n,
             const struct kiln_cache_candidate *cand, const kiln_id *xx, const kiln_id *nids,
             Kiln__ActionResult **res)
{
	struct kiln_cache_result *rr = NULL;
	size_t no = n->ks->noutputs, len = 0;
	kiln_id *ids = calloc(no ? no : 1, sizeof *ids), log;
	uint8_t key[32], *buf = NULL;
	char hex[KILN_CACHE_HEX_LEN + 1];
	int rv = KILN_ENOMEM, has_log = 0;

	if (ids == NULL)
		goto fail;
	if ((rv = kiln_cache_result_key(n->w->new_key.b, 16, cand, key)) != 0)
		goto fail;
	if ((rv = remote_get_entry(c, key, &buf, &len)) == 0)
		rv = kiln_cache_result_decode(buf, len, &rr);
	if (rv == KILN_ECORRUPT) {
		kiln_cache_hex(key, hex);
		corrupt_note(e, c, "entry ac/", hex);
	}
	if (rv != 0)
		goto fail;
	rv = KILN_ENOTFOUND;
	if (rr->noutputs != no)
		goto fail;
	for (size_t i = 0; i < no; i++) {
		const struct kiln_cache_output *o = NULL;
		for (size_t k = 0; k < rr->noutputs && o == NULL; k++)
			if (strcmp(rr->outputs[k].name, n->ks->outputs[i].name) == 0)
				o = &rr->outputs[k];
		if (o == NULL || (rv = blob_fetch(e, c, &o->blob, &ids[i])) != 0)
			goto fail;
	}
	/* the log is for `kiln log`: without it the result still serves */
	has_log = rr->has_log && blob_fetch(e, c, &rr->log, &log) == 0;
	rv = result_local(e, n, cand, xx, nids, ids, has_log ? &log : NULL, res);
fail:
	kiln_cache_result_free(rr);
	free(buf);
	free(ids);
	return rv == 0 ? 0 : rv == KILN_ENOMEM ? KILN_ENOMEM : KILN_ENOTFOUND;
}

/* Candidate c of n's index holds here (files, then needs): fetch it
 * (*held set: the lookup ends here, whatever the fetch's outcome).
 * KILN_ENOTFOUND: a miss; KILN_EBUSY: its needs are not done yet. */
static int
candidate_fetch(struct engine *e, struct graph *g, kiln_cache *kc, struct node *n,
                const struct kiln_cache_candidate *c, Kiln__ActionResult **res, int *held)
{
	kiln_id *xx = calloc(c->nfiles ? c->nfiles : 1, sizeof *xx);
	kiln_id *nids = calloc(c->nneeds ? c->nneeds : 1, sizeof *nids);
	enum cache_result cr;
	int rv = KILN_ENOMEM;

	if (xx == NULL || nids == NULL)
		goto fail;
	rv = KILN_ENOTFOUND;
	if (!candidate_holds(e, c, xx))
		goto fail;
	cr = c->nneeds > 0 ? remote_need_check(e, g, n, c, nids) : CACHE_HIT;
	*held = cr != CACHE_MISS;
	if (cr == CACHE_HIT)
		rv = fetch_result(e, kc, n, c, xx, nids, res);
	else if (cr == CACHE_NEEDS)
		rv = KILN_EBUSY;
fail:
	free(xx);
	free(nids);
	return rv;
}

int
remote_fetch(struct engine *e, struct graph *g, struct node *n, Kiln__ActionResult **res)
{
	struct remote *r = e->remote;
	struct remote_conn *rc = remote_conn_get(r);
	struct kiln_cache_index *ix = NULL;
	uint8_t key[32], *buf = NULL;
	char hex[KILN_CACHE_HEX_LEN + 1];
	size_t len = 0;
	int rv = KILN_ENOTFOUND, held = 0;

	*res = NULL;
	if (rc == NULL)
		return KILN_ENOTFOUND;
	/* folder outputs are not shared (remote_upload): no lookup */
	if (n->folders) {
		remote_conn_put(r, rc);
		return KILN_ENOTFOUND;
	}
	if (kiln_cache_index_key(n->w->new_key.b, 16, key) != 0)
		goto fail;
	rv = remote_get_entry(rc->c, key, &buf, &len);
	error_note(e, rc, rv);
	if (rv != 0 && rv != KILN_ECORRUPT) {
		rv = KILN_ENOTFOUND;
		goto fail;
	}
	if (rv == KILN_ECORRUPT || kiln_cache_index_decode(buf, len, &ix) != 0) {
		rv = KILN_ENOTFOUND;
		kiln_cache_hex(key, hex);
		corrupt_note(e, rc->c, "index entry ac/", hex);
		goto fail;
	}
	rv = KILN_ENOTFOUND;   /* until a candidate holds */
	/* the first that holds is the one (docs/cache.md, "Reading"): a
	 * later one is an older variant. One whose needs are not done yet
	 * is looked up again once they are. */
	for (size_t i = 0; i < ix->ncandidates && !held; i++)
		rv = candidate_fetch(e, g, rc->c, n, &ix->candidates[i], res, &held);
fail:
	if (rv != KILN_EBUSY)
		atomic_fetch_add(rv == 0 ? &r->downloaded : &r->missed, 1);
	kiln_cache_index_free(ix);
	free(buf);
	remote_conn_put(r, rc);
	return rv;
}

void
remote_status(struct engine *e, struct engine_cache_status *st)
{
	struct remote *r = e->remote;
	struct remote_conn *rc;
	kiln_cache_stats cs = {0};

	memset(st, 0, sizeof *st);
	st->mode = "off";
	if (r == NULL)
		return;
	rc = remote_conn_get(r);
	if (rc != NULL) {
		kiln_cache_stats_get(rc->c, &cs);
		snprintf(st->url, sizeof st->url, "%s", rc->url);
		st->mode = rc->mode == KILN_CACHE_MODE_READWRITE ? "readwrite" : "read";
	}
	remote_conn_put(r, rc);
	st->steps_downloaded = atomic_load(&r->downloaded);
	st->steps_missed = atomic_load(&r->missed);
	st->corrupt = atomic_load(&r->corrupt);
	st->results_uploaded = atomic_load(&r->uploaded);
	st->hits = cs.hits;
	st->misses = cs.misses + cs.skipped;
	st->errors = cs.errors;
	st->uploads = cs.uploads;
	st->bytes_down = cs.bytes_down;
	st->bytes_up = cs.bytes_up;
	st->dropped = cs.dropped + atomic_load(&r->dropped) + atomic_load(&r->failed);
	st->skipped_uploads = cs.present;
	st->breaker_open = cs.breaker_open;
	pthread_mutex_lock(&r->mu);
	st->pending = r->nq + r->busy + cs.queued;
	pthread_mutex_unlock(&r->mu);
}

void
engine_cache_status(struct engine *e, struct engine_cache_status *st)
{
	remote_status(e, st);
}
