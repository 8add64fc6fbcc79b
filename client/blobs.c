/* blobs.c — kiln.h's blob transfers over the daemon.
 *
 * A get asks for chunk 0 with verify set (the daemon re-hashes the blob
 * before sending a byte), then keeps CONN_GET_WINDOW chunk requests in
 * flight on the get slots, taking the replies in order, hashing them as
 * they pass, and checking the hash at the end. A put sends one chunk at a
 * time (the daemon writes them in order), hashing as it reads, and claims
 * the hash on the last. Neither holds more than a few chunks in memory.
 *
 * Threads: the caller's, on the connection's main and get slots. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libkiln_int.h"

/* ---- get ----------------------------------------------------------------- */

struct get {
	kiln_conn *c;
	kiln_id id;
	uint64_t size, done;  /* the blob's size, bytes handed to sink */
	uint32_t chunk;       /* bytes per reply */
	kiln_hasher *h;
	kiln_sink_fn sink;
	void *arg;
	uint64_t offs[CONN_GET_WINDOW]; /* the offset each get slot asked for */
};

/* Ask for the chunk at off on get slot k. The first request names the blob
 * by id or by name and has the daemon verify it. */
static int
get_send(struct get *g, unsigned k, uint64_t off, const kiln_name *name)
{
	Kiln__Request req;
	Kiln__BlobGetRequest q = KILN__BLOB_GET_REQUEST__INIT;

	if (name != NULL) {
		q.profile = (char *)name->profile;
		q.url = (char *)name->url;
	} else {
		q.id = kiln_proto_id_ref(&g->id);
	}
	q.offset = off;
	q.length = g->chunk;
	q.verify = off == 0;
	lk_request_init(g->c, &req);
	req.body_case = KILN__REQUEST__BODY_BLOB_GET;
	req.blob_get = &q;
	g->offs[k] = off;
	return conn_send(g->c->conn, CONN_SLOT_GET + k, &req, NULL, 0,
	                 g->c->timeout_ms);
}

/* Wait for get slot k's reply into r, checked. */
static int
get_wait(struct get *g, unsigned k, struct conn_reply *r)
{
	const Kiln__BlobGetReply *gr;
	uint64_t off = g->offs[k], want;
	int rv;

	if ((rv = conn_wait(g->c->conn, CONN_SLOT_GET + k, r)) != 0 ||
	    (rv = lk_reply_check(r, KILN__REPLY__BODY_BLOB_GET_REPLY,
	                         g->c->error, sizeof(g->c->error))) != 0)
		return rv;
	gr = r->rep->blob_get_reply;
	if (off == 0) { /* the first reply says what the blob is */
		g->size = gr->size;
		if (kiln_proto_id_get(gr->id, &g->id) != 0)
			rv = KILN_EPROTO;
		if (r->ndata < g->size)
			g->chunk = (uint32_t)r->ndata; /* the daemon's chunk size */
	}
	want = g->size - off < g->chunk ? g->size - off : g->chunk;
	if (rv == 0 && (gr->offset != off || gr->size != g->size ||
	                r->ndata != want || (want == 0 && g->size > off)))
		rv = KILN_EPROTO;
	if (rv != 0)
		conn_reply_free(r);
	return rv;
}

/* Hash a reply's bytes, pass them on, and free it. */
static int
get_deliver(struct get *g, struct conn_reply *r)
{
	int rv = 0;

	kiln_hasher_update(g->h, r->data, r->ndata);
	if (r->ndata > 0)
		rv = g->sink(r->data, r->ndata, g->arg);
	g->done += r->ndata;
	conn_reply_free(r);
	return rv;
}

/* The whole transfer, after the first chunk. A reply's slot is reused for
 * the next request before its bytes are hashed and handed on, so that the
 * window stays full meanwhile. */
static int
get_rest(struct get *g)
{
	uint64_t next = g->done, sent = 0, recvd = 0;
	struct conn_reply r;
	kiln_id got;
	unsigned k;
	int rv;

	while (g->done < g->size) {
		while (next < g->size && sent - recvd < CONN_GET_WINDOW) {
			if ((rv = get_send(g, sent % CONN_GET_WINDOW, next, NULL)) != 0)
				return rv;
			next += g->chunk;
			sent++;
		}
		k = recvd++ % CONN_GET_WINDOW;
		if ((rv = get_wait(g, k, &r)) != 0)
			return rv;
		if (next < g->size && (rv = get_send(g, k, next, NULL)) == 0) {
			next += g->chunk;
			sent++;
		}
		if (rv != 0 || (rv = get_deliver(g, &r)) != 0) {
			conn_reply_free(&r);
			return rv;
		}
	}
	kiln_hasher_digest(g->h, &got);
	return kiln_id_cmp(&got, &g->id) == 0 ? 0 : KILN_ECORRUPT;
}

static int
get_run(kiln_conn *c, const kiln_id *id, const kiln_name *name,
        kiln_sink_fn sink, void *arg, kiln_id *out)
{
	struct get g = {.c = c, .chunk = c->chunk, .sink = sink, .arg = arg};
	struct conn_reply r;
	int rv;

	if (id != NULL)
		g.id = *id;
	if ((rv = kiln_hasher_new(&g.h)) != 0)
		return rv;
	if ((rv = get_send(&g, 0, 0, name)) == 0 &&
	    (rv = get_wait(&g, 0, &r)) == 0 && (rv = get_deliver(&g, &r)) == 0)
		rv = get_rest(&g);
	kiln_hasher_free(g.h);
	if (rv == 0 && out != NULL)
		*out = g.id;
	return rv;
}

int
kiln_blob_get(kiln_conn *c, const kiln_id *id, kiln_sink_fn sink, void *arg)
{
	return get_run(c, id, NULL, sink, arg, NULL);
}

int
kiln_blob_get_name(kiln_conn *c, const kiln_name *name, kiln_sink_fn sink,
                   void *arg, kiln_id *id)
{
	if (name == NULL || name->profile == NULL || name->url == NULL)
		return KILN_EINVAL;
	return get_run(c, NULL, name, sink, arg, id);
}

/* kiln_sink_fn writing to the fd at arg. */
static int
fd_sink(const void *buf, size_t len, void *arg)
{
	return kiln_write_all(*(int *)arg, buf, len);
}

int
kiln_blob_get_fd(kiln_conn *c, const kiln_id *id, int fd)
{
	return kiln_blob_get(c, id, fd_sink, &fd);
}

/* ---- put ----------------------------------------------------------------- */

/* What a put reads from: a buffer, or a file descriptor through tmp. */
struct source {
	const uint8_t *buf;
	size_t len, pos;
	int fd;          /* -1: the buffer */
	uint8_t *tmp;
};

/* The next piece of at most max bytes into *out, *n; *eof when it is the
 * last. */
static int
source_read(struct source *s, size_t max, const uint8_t **out, size_t *n,
            int *eof)
{
	ssize_t r;

	*n = 0;
	*eof = 0;
	if (s->fd < 0) {
		*n = s->len - s->pos < max ? s->len - s->pos : max;
		*out = s->buf + s->pos;
		s->pos += *n;
		*eof = s->pos == s->len;
		return 0;
	}
	*out = s->tmp;
	while (*n < max) {
		if ((r = read(s->fd, s->tmp + *n, max - *n)) < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return kiln_err_from_errno(errno);
		if (r == 0) {
			*eof = 1;
			break;
		}
		*n += (size_t)r;
	}
	return 0;
}

/* The daemon's chunk limit, asked once per connection. */
static int
put_chunk(kiln_conn *c, uint32_t *chunk)
{
	kiln_status st;
	int rv;

	if (c->put_chunk == 0) {
		if ((rv = kiln_status_get(c, &st)) != 0)
			return rv;
		c->put_chunk = st.chunk_size && st.chunk_size < c->chunk ?
		                       st.chunk_size : c->chunk;
	}
	*chunk = c->put_chunk;
	return 0;
}

/* Send one piece of the upload; the last one claims the hash and name. */
static int
put_send(kiln_conn *c, Kiln__BlobPutRequest *q, const uint8_t *data, size_t n)
{
	Kiln__Request req;
	struct conn_reply r;
	int rv;

	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_BLOB_PUT;
	req.blob_put = q;
	if ((rv = lk_call(c, CONN_SLOT_MAIN, &req, data, n, c->timeout_ms,
	                  KILN__REPLY__BODY_BLOB_PUT_REPLY, &r, c->error,
	                  sizeof(c->error))) != 0)
		return rv;
	q->upload = r.rep->blob_put_reply->upload;
	conn_reply_free(&r);
	return 0;
}

static int
put_run(kiln_conn *c, struct source *s, const kiln_name *name, kiln_id *id)
{
	Kiln__BlobPutRequest q = KILN__BLOB_PUT_REQUEST__INIT;
	const uint8_t *data;
	kiln_hasher *h;
	uint32_t chunk;
	size_t n;
	int rv, eof = 0;

	if ((rv = put_chunk(c, &chunk)) != 0 || (rv = kiln_hasher_new(&h)) != 0)
		return rv;
	if (s->fd >= 0 && (s->tmp = malloc(chunk)) == NULL)
		rv = KILN_ENOMEM;
	while (rv == 0 && !eof && (rv = source_read(s, chunk, &data, &n,
	                                            &eof)) == 0) {
		kiln_hasher_update(h, data, n);
		if (eof) {
			kiln_hasher_digest(h, id);
			q.commit = 1;
			q.id = kiln_proto_id_ref(id);
			if (name != NULL) {
				q.profile = (char *)name->profile;
				q.url = (char *)name->url;
			}
		}
		rv = put_send(c, &q, data, n);
		q.offset += n;
	}
	free(s->tmp);
	kiln_hasher_free(h);
	return rv;
}

int
kiln_blob_put(kiln_conn *c, const void *buf, size_t len, const kiln_name *name,
              kiln_id *id)
{
	struct source s = {.buf = buf, .len = len, .fd = -1};

	return put_run(c, &s, name, id);
}

int
kiln_blob_put_fd(kiln_conn *c, int fd, const kiln_name *name, kiln_id *id)
{
	struct source s = {.fd = fd};

	return put_run(c, &s, name, id);
}
