/* uploads.c — blob puts in progress.
 *
 * Threads: the handler threads (jobs.c) put; nng's threads report closed
 * connections (server.c's pipe notification); the main thread frees. The
 * table is guarded by up->mu; a slot being written to is marked busy and
 * its writer is used outside the lock by the one handler that marked it,
 * so a slow disk never holds the lock. A pipe that closes meanwhile marks
 * the slot doomed; the busy handler then discards it.
 *
 * Remote peers (agents, remote kiln) share three quarters of the slots,
 * each connection an eighth at most: one that opens uploads and never
 * finishes them (they last upload_idle_s) leaves the others, and above
 * all the owner's local requests, room to work. The agent role's uploads
 * in progress are bounded, all together, by what the steps agents hold
 * may upload (engine_agent_upload_room; one when none is held): an
 * agent's slot has one upload in flight at a time. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "uploads.h"
#include "kiln_clock.h"

struct upload {
	uint64_t id;           /* 0: free */
	uint32_t pipe;
	int remote, agent;
	kiln_blob_writer *w;   /* NULL until opened */
	uint64_t received;
	int64_t last_ns;       /* CLOCK_MONOTONIC of the last chunk */
	int busy, doomed;
};

struct kilnd_uploads {
	pthread_mutex_t mu;
	kiln_store *store;
	struct upload *slots;
	uint32_t max, n, idle_s;
	uint64_t next_id;
};

uint32_t
uploads_remote_max(uint32_t max)
{
	return max - max / 4;
}

uint32_t
uploads_pipe_max(uint32_t max)
{
	return max / 8 > 0 ? max / 8 : 1;
}

int
uploads_new(kiln_store *store, uint32_t max, uint32_t idle_s,
            struct kilnd_uploads **upp)
{
	struct kilnd_uploads *up = calloc(1, sizeof(*up));
	uint64_t seed = 0;

	*upp = NULL;
	if (up == NULL || (up->slots = calloc(max ? max : 1,
	                                      sizeof(*up->slots))) == NULL) {
		free(up);
		return KILN_ENOMEM;
	}
	pthread_mutex_init(&up->mu, NULL);
	up->store = store;
	up->max = max;
	up->idle_s = idle_s;
	/* Hard to guess, though a guess would still need the same pipe. */
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)kiln_mono_ns();
	up->next_id = seed & 0xffffffff00000000u;
	*upp = up;
	return 0;
}

/* Discard slot u (not busy). Lock held. */
static void
slot_free(struct kilnd_uploads *up, struct upload *u)
{
	kiln_blob_writer_abort(u->w);
	*u = (struct upload){0};
	up->n--;
}

void
uploads_free(struct kilnd_uploads *up)
{
	if (up == NULL)
		return;
	for (uint32_t i = 0; i < up->max; i++)
		if (up->slots[i].id != 0)
			slot_free(up, &up->slots[i]);
	pthread_mutex_destroy(&up->mu);
	free(up->slots);
	free(up);
}

/* A free slot, after discarding idle uploads if none is; NULL when none
 * is free or from has its share (remote). Lock held. */
static struct upload *
slot_take(struct kilnd_uploads *up, const struct upload_from *from)
{
	int64_t now = kiln_mono_ns(), idle = (int64_t)up->idle_s * 1000000000;
	struct upload *u = NULL;
	uint32_t nremote = 0, npipe = 0, nagent = 0;

	for (uint32_t i = 0; i < up->max; i++) {
		struct upload *s = &up->slots[i];
		if (s->id != 0 && !s->busy && now - s->last_ns > idle)
			slot_free(up, s);
		if (s->id == 0 && u == NULL)
			u = s;
		nremote += s->id != 0 && s->remote;
		npipe += s->id != 0 && s->pipe == from->pipe;
		nagent += s->id != 0 && s->agent;
	}
	if (from->remote && (nremote >= uploads_remote_max(up->max) ||
	                     npipe >= uploads_pipe_max(up->max)))
		return NULL;
	if (from->agent_max > 0 && nagent >= from->agent_max)
		return NULL;
	if (u != NULL) {
		*u = (struct upload){.id = ++up->next_id, .pipe = from->pipe,
		                     .remote = from->remote,
		                     .agent = from->agent_max > 0, .last_ns = now,
		                     .busy = 1};
		up->n++;
	}
	return u;
}

/* Mark the upload the request names busy and return it, or say why not.
 * Lock taken and released. */
static int
slot_claim(struct kilnd_uploads *up, const struct upload_from *from,
           const Kiln__BlobPutRequest *req, struct upload **up_out)
{
	struct upload *u = NULL;
	int rv = 0;

	pthread_mutex_lock(&up->mu);
	if (req->upload == 0) {
		if ((u = slot_take(up, from)) == NULL)
			rv = KILN_EBUSY;
	} else {
		for (uint32_t i = 0; i < up->max && u == NULL; i++)
			if (up->slots[i].id == req->upload && up->slots[i].pipe == from->pipe)
				u = &up->slots[i];
		if (u == NULL)
			rv = KILN_ENOTFOUND;
		else if (u->busy)
			rv = KILN_EBUSY, u = NULL; /* two chunks at once */
		else if (req->offset != u->received)
			rv = KILN_EINVAL, slot_free(up, u), u = NULL;
		else
			u->busy = 1;
	}
	pthread_mutex_unlock(&up->mu);
	*up_out = u;
	return rv;
}

/* Publish u's content if it hashes to the claimed id, and name it in the
 * index when asked. The writer is consumed. */
static int
commit(struct kilnd_uploads *up, struct upload *u,
       const Kiln__BlobPutRequest *req, struct upload_done *done)
{
	kiln_blob_writer *w = u->w;
	kiln_id claimed;
	int rv;

	u->w = NULL;
	if ((rv = kiln_proto_id_get(req->id, &claimed)) != 0 ||
	    (req->url[0] && ((rv = kiln_url_check(req->url)) != 0 ||
	                     (rv = kiln_profile_check(req->profile)) != 0))) {
		kiln_blob_writer_abort(w);
		return rv;
	}
	if ((rv = kiln_blob_writer_commit(w, &claimed, &done->id)) != 0)
		return rv;
	done->committed = 1;
	done->size = u->received;
	if (req->url[0])
		rv = kiln_store_index_set(up->store, req->profile, req->url,
		                          &done->id);
	return rv;
}

/* Write the chunk (opening the writer on the first) and commit if asked.
 * Runs outside the lock: u is busy, so it is ours. */
static int
slot_work(struct kilnd_uploads *up, struct upload *u, const struct upload_from *from,
          const Kiln__BlobPutRequest *req, const uint8_t *data, size_t n,
          struct upload_done *done)
{
	int rv;

	if (from->max_bytes > 0 && n > from->max_bytes - u->received)
		return KILN_ERANGE;   /* refused before a byte past it is written */
	if (u->w == NULL && (rv = kiln_blob_writer_open(up->store, &u->w)) != 0)
		return rv;
	if (n > 0 && (rv = kiln_blob_writer_write(u->w, data, n)) != 0)
		return rv;
	u->received += n;
	if (req->commit)
		return commit(up, u, req, done);
	return 0;
}

int
uploads_put(struct kilnd_uploads *up, const struct upload_from *from,
            const Kiln__BlobPutRequest *req, const uint8_t *data, size_t n,
            Kiln__BlobPutReply *rep, struct upload_done *done)
{
	struct upload *u;
	int rv;

	done->committed = 0;
	if ((rv = slot_claim(up, from, req, &u)) != 0)
		return rv;
	rv = slot_work(up, u, from, req, data, n, done);
	rep->upload = u->id;
	rep->received = u->received;
	if (done->committed)
		rep->id = kiln_proto_id_ref(&done->id);
	pthread_mutex_lock(&up->mu);
	u->busy = 0;
	u->last_ns = kiln_mono_ns();
	if (rv != 0 || req->commit || u->doomed)
		slot_free(up, u);
	pthread_mutex_unlock(&up->mu);
	return rv;
}

void
uploads_pipe_closed(struct kilnd_uploads *up, uint32_t pipe)
{
	pthread_mutex_lock(&up->mu);
	for (uint32_t i = 0; i < up->max; i++) {
		struct upload *u = &up->slots[i];
		if (u->id == 0 || u->pipe != pipe)
			continue;
		if (u->busy)
			u->doomed = 1;
		else
			slot_free(up, u);
	}
	pthread_mutex_unlock(&up->mu);
}

uint32_t
uploads_count(struct kilnd_uploads *up)
{
	uint32_t n;

	pthread_mutex_lock(&up->mu);
	n = up->n;
	pthread_mutex_unlock(&up->mu);
	return n;
}
