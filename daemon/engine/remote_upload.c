/* remote_upload.c — uploading what this machine ran to the shared cache
 * (remote.h; docs/cache.md, "Writing"), in the background.
 *
 * The worker finishing a step only copies its result into a job on a
 * bounded queue (a full queue drops the job, counted). The uploader
 * thread takes the jobs in batches: for each, the SHA-256 of every
 * discovered file (read now, and checked against the hash the run's
 * verification took: a file edited since makes the job worthless, so it
 * is dropped), every output and log blob to cas/ through the handle's
 * own queue, then the result entry; once all of the batch's transfers are
 * done and none failed, each index entry: fetched, merged with the new
 * candidate, written. The index comes last so that a reader never finds a
 * candidate whose result or blobs are not there yet.
 *
 * Threads: remote_upload on the worker finishing a node; everything else
 * on the uploader thread; r->mu guards the queue. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_int.h"
#include "cache_entries.h"
#include "discover.h"
#include "remote.h"
#include "step.h"

#define UP_QUEUE_MAX 32768  /* results waiting (a few hundred bytes each, more
                               with many discovered files): a 10,000-step
                               full build of quick tools outruns the uploads,
                               and at 1,024 dropped 2,890 of its 11,001
                               results (bench/cache); past this many, drop
                               rather than grow without end */
#define UP_BATCH 32         /* results per round of transfers */
#define UP_FLUSH_MS 600000  /* a round's transfers: each has its own
                               timeout; this only bounds a wedged server */

void
up_job_free(struct up_job *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; j->outs != NULL && i < j->nout; i++)
		free(j->outs[i].name);
	for (size_t i = 0; j->paths != NULL && i < j->nfiles; i++)
		free(j->paths[i]);
	for (size_t i = 0; j->warnings != NULL && i < j->nwarn; i++)
		free(j->warnings[i]);
	for (size_t i = 0; j->needs != NULL && i < j->nneeds; i++) {
		free(j->needs[i].url);
		free(j->needs[i].output);
	}
	free(j->needs);
	free(j->outs);
	free(j->paths);
	free(j->seen);
	free(j->warnings);
	free(j);
}

/* A copy of what n's recorded run produced, or NULL (no memory). */
static struct up_job *
job_of(const struct node *n)
{
	struct up_job *j = calloc(1, sizeof *j);
	size_t nw = step_nwarnings(n);

	if (j == NULL)
		return NULL;
	memcpy(j->action, n->w->new_key.b, 16);
	j->nout = n->ks->noutputs;
	j->nfiles = n->ndisc;
	j->nwarn = nw;
	j->has_log = n->w->has_log;
	j->log = n->w->log_id;
	j->traced = n->traced;
	j->duration_ns = n->duration_ns;
	if ((j->outs = calloc(j->nout ? j->nout : 1, sizeof *j->outs)) == NULL ||
	    (j->paths = calloc(j->nfiles ? j->nfiles : 1, sizeof *j->paths)) == NULL ||
	    (j->seen = calloc(j->nfiles ? j->nfiles : 1, sizeof *j->seen)) == NULL ||
	    (j->warnings = calloc(nw ? nw : 1, sizeof *j->warnings)) == NULL)
		goto fail;
	for (size_t i = 0; i < j->nout; i++) {
		j->outs[i].id = n->outs[i].id;
		if ((j->outs[i].name = strdup(n->ks->outputs[i].name)) == NULL)
			goto fail;
	}
	for (size_t i = 0; i < j->nfiles; i++) {
		j->seen[i] = n->w->disc_seen[i];
		if ((j->paths[i] = strdup(n->disc[i])) == NULL)
			goto fail;
	}
	for (size_t i = 0; i < nw; i++)
		if ((j->warnings[i] = strdup(n->warnings[i])) == NULL)
			goto fail;
	/* its kiln needs: stated like discovered files (remote_need.c) */
	if ((j->needs = calloc(n->nneeds ? n->nneeds : 1, sizeof *j->needs)) == NULL)
		goto fail;
	j->nneeds = n->nneeds;
	for (size_t i = 0; i < n->nneeds; i++) {
		j->needs[i].hash = n->needs[i].hash;
		if ((j->needs[i].url = strdup(n->needs[i].url)) == NULL ||
		    (j->needs[i].output = strdup(n->needs[i].output)) == NULL)
			goto fail;
	}
	return j;
fail:
	up_job_free(j);
	return NULL;
}

void
remote_upload(struct engine *e, const struct node *n)
{
	struct remote *r = e->remote;
	struct up_job *j;
	int rw;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	rw = r->conn != NULL && r->conn->mode == KILN_CACHE_MODE_READWRITE;
	pthread_mutex_unlock(&r->mu);
	/* not those whose files were not hashed after the run (nothing to
	 * state their conditions with) */
	if (!rw || (n->ndisc > 0 && n->w->disc_seen == NULL))
		return;
	/* nor a step writing or reading a folder output: the cache's
	 * ActionResult would carry its tree record as a plain file */
	if (n->folders)
		return;
	for (size_t i = 0; i < n->ndisc; i++) {
		size_t len = strlen(n->disc[i]);
		if (len == 0 || n->disc[i][len - 1] == '/')
			return;   /* folder listings are not shared (remote.c) */
	}
	if ((j = job_of(n)) == NULL) {
		atomic_fetch_add(&r->dropped, 1);
		return;
	}
	pthread_mutex_lock(&r->mu);
	if (r->nq >= UP_QUEUE_MAX || r->quit) {
		pthread_mutex_unlock(&r->mu);
		atomic_fetch_add(&r->dropped, 1);
		up_job_free(j);
		return;
	}
	if (r->tail != NULL)
		r->tail->next = j;
	else
		r->head = j;
	r->tail = j;
	r->nq++;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* A job's candidate and result as the codec takes them (prep). */
struct up_work {
	struct kiln_cache_file *files;
	struct kiln_cache_need *needs;
	struct kiln_cache_output *outs;
	struct kiln_cache_candidate cand;
	int ok;
};

/* Queue one blob for cas/, asked for first (HEAD): CI and artists
 * building the same outputs would otherwise send the same bytes again
 * and again. One a lookup found corrupt there goes up plainly, over the
 * bad bytes. 0 or the transport's code. */
static int
blob_send(struct engine *e, kiln_cache *c, const kiln_id *id,
          struct kiln_cache_digest *d)
{
	char hex[KILN_CACHE_HEX_LEN + 1];
	uint64_t size = 0;
	int fd = -1, rv;

	if ((rv = kiln_store_blob_sha256(e->s, id, d->sha)) != 0 ||
	    (rv = kiln_store_has(e->s, id, &size)) != 0 ||
	    (rv = kiln_store_open_blob(e->s, id, &fd)) != 0)
		return rv;
	d->size = size;
	kiln_cache_hex(d->sha, hex);
	rv = remote_take_bad_blob(e->remote, d->sha)
	     ? kiln_cache_put_async_fd(c, KILN_CACHE_CAS, hex, fd)
	     : kiln_cache_put_missing_async_fd(c, KILN_CACHE_CAS, hex, fd);
	close(fd);
	return rv;
}

int
remote_blob_offer(struct engine *e, const kiln_id *id, uint8_t sha[32])
{
	struct remote_conn *rc = e->remote != NULL ? remote_conn_get(e->remote) : NULL;
	struct kiln_cache_digest d;
	int rv;

	if (rc == NULL)
		return KILN_ENOTFOUND;
	if (rc->mode == KILN_CACHE_MODE_READWRITE)
		rv = blob_send(e, rc->c, id, &d);   /* asked first: usually there */
	else
		rv = kiln_store_blob_sha256(e->s, id, d.sha);
	if (rv == 0)
		memcpy(sha, d.sha, 32);
	remote_conn_put(e->remote, rc);
	return rv;
}

/* Hash j's discovered files, queue its blobs and result entry. 0 when
 * all of it is queued; w->cand then states its conditions. */
static int
job_send(struct engine *e, kiln_cache *c, const struct up_job *j, struct up_work *w)
{
	struct kiln_cache_result res = {0};
	struct kiln_cache_digest logd;
	uint8_t key[32], *buf = NULL;
	char hex[KILN_CACHE_HEX_LEN + 1];
	size_t len;
	int rv = KILN_ENOMEM;

	if ((w->files = calloc(j->nfiles ? j->nfiles : 1, sizeof *w->files)) == NULL ||
	    (w->needs = calloc(j->nneeds ? j->nneeds : 1, sizeof *w->needs)) == NULL ||
	    (w->outs = calloc(j->nout ? j->nout : 1, sizeof *w->outs)) == NULL)
		return KILN_ENOMEM;
	if ((rv = remote_need_shas(e, j, w->needs)) != 0)
		return rv;
	for (size_t i = 0; i < j->nfiles; i++) {
		kiln_id xx;
		int hrv = remote_file_hash(e, j->paths[i], w->files[i].sha, &xx);
		w->files[i].path = j->paths[i];
		w->files[i].present = hrv == 0;
		/* as the run's check saw it, or the result is not what the
		 * conditions would say */
		if (j->seen[i].missing ? hrv != KILN_ENOTFOUND
		                       : hrv != 0 || !id_eq(&xx, &j->seen[i].h))
			return KILN_EBUSY;
	}
	w->cand = (struct kiln_cache_candidate){
		.files = w->files, .nfiles = j->nfiles, .traced = j->traced,
		.needs = w->needs, .nneeds = j->nneeds,
		.duration_ns = j->duration_ns,
		.warnings = (const char *const *)j->warnings, .nwarnings = j->nwarn,
	};
	for (size_t i = 0; i < j->nout; i++) {
		w->outs[i].name = j->outs[i].name;
		if ((rv = blob_send(e, c, &j->outs[i].id, &w->outs[i].blob)) != 0)
			return rv;
	}
	res.outputs = w->outs;
	res.noutputs = j->nout;
	if (j->has_log && (rv = blob_send(e, c, &j->log, &logd)) == 0) {
		res.has_log = 1;
		res.log = logd;
	}
	/* the result after its blobs: the transport starts an AC upload only
	 * once the CAS uploads queued before it are done */
	if ((rv = kiln_cache_result_key(j->action, 16, &w->cand, key)) != 0 ||
	    (rv = kiln_cache_result_encode(&res, &buf, &len)) != 0)
		return rv;
	if ((rv = kiln_cache_sign(c, key, &buf, &len)) != 0) {
		free(buf);
		return rv;
	}
	kiln_cache_hex(key, hex);
	rv = kiln_cache_put_async(c, KILN_CACHE_AC, hex, buf, len);
	free(buf);
	return rv;
}

/* Add j's candidate to its action's index: fetch, merge, write. */
static int
index_send(kiln_cache *c, const struct up_job *j, const struct up_work *w)
{
	struct kiln_cache_index *old = NULL;
	uint8_t key[32], *buf = NULL, *nb = NULL;
	char hex[KILN_CACHE_HEX_LEN + 1];
	size_t len = 0, nlen = 0;
	int rv;

	if ((rv = kiln_cache_index_key(j->action, 16, key)) != 0)
		return rv;
	rv = remote_get_entry(c, key, &buf, &len);
	/* a failed fetch is no empty index: writing one would drop the
	 * candidates others put there; one not signed with our key is
	 * nobody's we may vouch for: replaced */
	if (rv != 0 && rv != KILN_ENOTFOUND && rv != KILN_ECORRUPT)
		return rv;
	if (rv == 0 && kiln_cache_index_decode(buf, len, &old) != 0)
		old = NULL;   /* corrupt: replaced by one that reads */
	free(buf);
	rv = kiln_cache_index_merge(old, &w->cand, &nb, &nlen);
	kiln_cache_index_free(old);
	if (rv == 0 && (rv = kiln_cache_sign(c, key, &nb, &nlen)) != 0)
		free(nb);
	if (rv != 0)
		return rv;
	kiln_cache_hex(key, hex);
	rv = kiln_cache_put(c, KILN_CACHE_AC, hex, nb, nlen);
	free(nb);
	return rv;
}

/* Wait for the round's transfers, a little at a time: a daemon stopping
 * must not wait for a slow server's timeouts (what is left is dropped). */
static int
round_wait(struct remote *r, kiln_cache *c)
{
	for (long waited = 0; waited < UP_FLUSH_MS; waited += 200) {
		if (kiln_cache_flush(c, 200) == 0)
			return 0;
		if (__atomic_load_n(&r->quit, __ATOMIC_RELAXED))
			return KILN_ECANCELLED;
	}
	return KILN_ETIMEDOUT;
}

/* What became of one result of a round: uploaded; failed (a transfer of
 * its round, or of its index entry, failed); or dropped (its files were
 * edited since the run, or the daemon stopping cut it). */
static void
job_count(struct remote *r, int sent, int round_rc, int index_rc)
{
	if (sent && round_rc == 0 && index_rc == 0)
		atomic_fetch_add(&r->uploaded, 1);
	else if (sent && round_rc != KILN_ECANCELLED && index_rc != KILN_ECANCELLED)
		atomic_fetch_add(&r->failed, 1);
	else
		atomic_fetch_add(&r->dropped, 1);
}

static void
batch_send(struct engine *e, kiln_cache *c, struct up_job **jobs, size_t n)
{
	struct remote *r = e->remote;
	struct up_work w[UP_BATCH];
	kiln_cache_stats before, after;
	int round_rc;

	memset(w, 0, sizeof w);
	kiln_cache_stats_get(c, &before);
	for (size_t i = 0; i < n; i++)
		w[i].ok = job_send(e, c, jobs[i], &w[i]) == 0;
	/* every blob and result there before any index names them; one
	 * transfer of the round that failed (or was dropped) could be one
	 * of them: no index is written then (the results wait unlisted
	 * until their steps run again) */
	round_rc = round_wait(r, c);
	kiln_cache_stats_get(c, &after);
	if (round_rc == 0 && (after.errors != before.errors || after.dropped != before.dropped))
		round_rc = KILN_EIO;
	for (size_t i = 0; i < n; i++) {
		int index_rc = KILN_ECANCELLED;

		if (w[i].ok && round_rc == 0 && !__atomic_load_n(&r->quit, __ATOMIC_RELAXED))
			index_rc = index_send(c, jobs[i], &w[i]);
		job_count(r, w[i].ok, round_rc, index_rc);
		free(w[i].files);
		free(w[i].needs);
		free(w[i].outs);
	}
}

void *
remote_uploader_main(void *arg)
{
	struct engine *e = arg;
	struct remote *r = e->remote;
	struct up_job *jobs[UP_BATCH];

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct remote_conn *rc;
		size_t n = 0;
		while (!r->quit && r->head == NULL)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit)
			break;
		while (r->head != NULL && n < UP_BATCH) {
			jobs[n++] = r->head;
			if ((r->head = r->head->next) == NULL)
				r->tail = NULL;
			r->nq--;
		}
		r->busy = (unsigned)n;
		if ((rc = r->conn) != NULL)
			rc->refs++;
		pthread_mutex_unlock(&r->mu);
		if (rc != NULL && rc->mode == KILN_CACHE_MODE_READWRITE)
			batch_send(e, rc->c, jobs, n);
		else
			atomic_fetch_add(&r->dropped, n);
		for (size_t i = 0; i < n; i++)
			up_job_free(jobs[i]);
		remote_conn_put(r, rc);
		pthread_mutex_lock(&r->mu);
		r->busy = 0;
		pthread_cond_broadcast(&r->idle_cv);
	}
	/* what is still queued is dropped: counted */
	atomic_fetch_add(&r->dropped, r->nq);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}
