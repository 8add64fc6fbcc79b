/* server.c — the nng rep0 socket, its listeners, and the request workers.
 *
 * Each worker owns an nng context and two aios (one to receive and send,
 * one to sleep while a poll is parked) and runs a three-state machine
 * driven by their callbacks, as in nng's async demo server:
 *
 *   RECV --request--> handle --> SEND --sent--> RECV
 *                        \--> PARK (a poll waiting for events) --> SEND
 *
 * cfg.workers + cfg.max_subscribers workers exist, so polls parked by every
 * possible subscriber still leave cfg.workers free for other requests.
 * Handling (decoding, the handler, reading a chunk, encoding, sending) runs
 * on a pool of cfg.workers threads (jobs.c), never on nng's own threads:
 * those stay free to move bytes while a handler reads, writes or fsyncs.
 *
 * One connection must not be able to hold every worker: rep0 queues a
 * connection's replies one behind the other, so a client that sends
 * requests and never reads the replies would park each worker that took
 * one of them in a send that never ends. Hence a connection may have at
 * most PEER_MAX_IN_PROGRESS requests in progress (received, and not yet
 * sent or given up); past that its requests are dropped unanswered; and
 * a send that cannot leave within SEND_TIMEOUT_MS is given up.
 *
 * The peer table holds the connections admitted (at most cfg.max_clients:
 * a slot is taken when a connection is admitted, and given back when
 * that connection closes, or handed to a newer connection when every slot
 * is taken and it is the one idle longest) and their requests in
 * progress. It also tells a
 * handler whether its request's connection is still open, so that a
 * subscription or upload made for one that closed meanwhile is dropped.
 *
 * Threads: worker callbacks and pipe notifications run on nng's threads,
 * several at once; a callback either finishes its work at once (a send
 * completed) or queues the worker as a job. A worker is touched by one
 * thread at a time — its callback or the job it queued — except `waiter`,
 * which events.c owns while parked. peers_mu guards the peer table (any
 * thread; never held while calling out). server_start/stop run on the
 * main thread, before any callback and after the last. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>

#include "handlers.h"
#include "jobs.h"
#include "owners.h"
#include "server.h"

/* Requests one connection may have in progress: libkiln uses at most 6
 * (a call, a poll, four chunks), and a reply handed to nng is counted
 * until its send callback runs, after the client may have sent again. */
#define PEER_MAX_IN_PROGRESS 16
/* How long a reply may wait behind the connection's earlier replies: long
 * enough for five 2 MiB chunks ahead of it at 1 MB/s. */
#define SEND_TIMEOUT_MS 10000

enum wstate { W_RECV, W_SEND, W_PARK };
enum wjob { JOB_REQUEST, JOB_WAKE }; /* what a queued worker does next */

struct worker {
	struct kilnd *d;
	nng_aio *aio;          /* receive and send */
	nng_aio *sleep;        /* a parked poll's wait, apart: cancelling it
	                          can never hit a send */
	nng_ctx ctx;
	enum wstate state;
	nng_msg *msg;          /* the request being handled or parked */
	Kiln__Request *req;    /* decoded from msg */
	struct kilnd_call call;
	struct ev_waiter waiter;
	int after_stop;
	struct job job;        /* queued on the handler pool */
	enum wjob next;
	uint32_t peer;         /* the connection msg came on */
	int counted;           /* msg is one of peer's requests in progress */
};

/* An admitted connection. */
struct peer {
	uint32_t id;           /* nng's pipe id; 0: free slot */
	uint32_t in_progress;  /* requests received and not yet done with */
	uint64_t last;         /* s->tick when it last sent or was answered */
};

struct kilnd_server {
	nng_socket sock;
	nng_listener ipc, remote;
	nng_tls_config *tls;
	struct worker *workers;
	uint32_t nworkers;
	struct kilnd_jobs *jobs; /* the handler threads */
	atomic_int closing;    /* workers send nothing more */
	const char *urls[2];
	size_t nurls;
	pthread_mutex_t peers_mu;
	struct peer *peers;    /* maxpeers (cfg.max_clients) slots */
	uint32_t maxpeers, npeers;
	uint64_t tick;         /* counts admissions and requests: an age */
	struct kilnd_ratelimit conn_log, drop_log, send_log, evict_log;
};

/* The KILN_E* code for an nng error. */
static int
err_of_nng(int rv)
{
	switch (rv) {
	case 0: return 0;
	case NNG_ENOMEM: return KILN_ENOMEM;
	case NNG_EADDRINUSE: return KILN_EBUSY;
	case NNG_EADDRINVAL:
	case NNG_EINVAL:
	case NNG_ENOTSUP: return KILN_EINVAL;
	case NNG_EPERM: return KILN_EACCES;
	default: return KILN_EIO;
	}
}

static void worker_cb(void *arg);

/* ---- the peer table ------------------------------------------------------ */

/* The slot holding id (0: a free slot), looked for from where id's own
 * slot would be, so that a connection is usually found at once. Lock
 * held. */
static struct peer *
peer_slot(struct kilnd_server *s, uint32_t id, uint32_t want)
{
	uint32_t n = s->maxpeers;

	for (uint32_t i = 0, j = id % n; i < n; i++, j = j + 1 < n ? j + 1 : 0)
		if (s->peers[j].id == want)
			return &s->peers[j];
	return NULL;
}

/* The admitted connection idle longest (no request in progress), or NULL
 * when every one is busy. Lock held. */
static struct peer *
peer_idlest(struct kilnd_server *s)
{
	struct peer *old = NULL;

	for (uint32_t i = 0; i < s->maxpeers; i++) {
		struct peer *p = &s->peers[i];
		if (p->id != 0 && p->in_progress == 0 &&
		    (old == NULL || p->last < old->last))
			old = p;
	}
	return old;
}

/* Admit connection id. When every slot is taken, the connection idle
 * longest gives up its slot (*evicted: its id, for the caller to close;
 * else 0): idle connections, however many, must not lock out the
 * project's own `kiln status`, and an idle client loses nothing but its
 * connection (nng's dialer reconnects). Returns 0, or KILN_EBUSY when
 * every connection has a request in progress. */
static int
peer_add(struct kilnd *d, uint32_t id, uint32_t *evicted)
{
	struct kilnd_server *s = d->server;
	struct peer *p;

	*evicted = 0;
	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, id, 0)) != NULL)
		atomic_store(&d->clients, ++s->npeers);
	else if ((p = peer_idlest(s)) != NULL)
		*evicted = p->id;
	if (p != NULL)
		*p = (struct peer){.id = id, .last = ++s->tick};
	pthread_mutex_unlock(&s->peers_mu);
	return p != NULL ? 0 : KILN_EBUSY;
}

/* Give back the slot of connection id. Returns 0, or KILN_ENOTFOUND when
 * it was never admitted. */
static int
peer_remove(struct kilnd *d, uint32_t id)
{
	struct kilnd_server *s = d->server;
	struct peer *p;

	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, id, id)) != NULL) {
		*p = (struct peer){0};
		atomic_store(&d->clients, --s->npeers);
	}
	pthread_mutex_unlock(&s->peers_mu);
	return p != NULL ? 0 : KILN_ENOTFOUND;
}

/* Count w's request in its connection's requests in progress. Returns 0,
 * KILN_ECLOSED (the connection is gone) or KILN_EBUSY (it has
 * PEER_MAX_IN_PROGRESS already). */
static int
peer_take(struct kilnd_server *s, struct worker *w)
{
	struct peer *p;
	int rv = 0;

	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, w->peer, w->peer)) == NULL)
		rv = KILN_ECLOSED;
	else if (p->in_progress >= PEER_MAX_IN_PROGRESS)
		rv = KILN_EBUSY;
	else {
		p->in_progress++;
		p->last = ++s->tick;
	}
	pthread_mutex_unlock(&s->peers_mu);
	w->counted = rv == 0;
	return rv;
}

/* w is done with its request (answered, given up or dropped). */
static void
peer_done(struct kilnd_server *s, struct worker *w)
{
	struct peer *p;

	if (!w->counted)
		return;
	w->counted = 0;
	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, w->peer, w->peer)) != NULL && p->in_progress > 0) {
		p->in_progress--;
		p->last = ++s->tick;
	}
	pthread_mutex_unlock(&s->peers_mu);
}

int
server_pipe_open(struct kilnd *d, uint32_t pipe)
{
	struct kilnd_server *s = d->server;
	int open;

	pthread_mutex_lock(&s->peers_mu);
	open = peer_slot(s, pipe, pipe) != NULL;
	pthread_mutex_unlock(&s->peers_mu);
	return open;
}

/* ---- sending ------------------------------------------------------------- */

static void
recv_next(struct worker *w)
{
	peer_done(w->d->server, w);
	w->state = W_RECV;
	nng_aio_set_timeout(w->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(w->ctx, w->aio);
}

/* pread exactly len bytes at off. */
static int
read_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return KILN_EIO;
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Encode the answer's Reply, then its blob bytes straight from the file
 * into the message (no copy in between). */
static int
reply_encode(const struct kilnd_answer *a, nng_msg **out)
{
	uint8_t hdr[KILN_DATA_HEADER_MAX];
	size_t head = kiln_proto_size(&a->reply.base), nhdr = 0;
	uint8_t *body;
	int rv;

	if (a->fd_len > 0)
		nhdr = kiln_proto_data_header(hdr, a->fd_len);
	if ((rv = nng_msg_alloc(out, head + nhdr + a->fd_len)) != 0)
		return err_of_nng(rv);
	body = nng_msg_body(*out);
	kiln_proto_pack(&a->reply.base, body);
	if (a->fd_len == 0)
		return 0;
	memcpy(body + head, hdr, nhdr);
	if ((rv = read_full(a->fd, body + head + nhdr, a->fd_len, a->fd_off)) != 0)
		nng_msg_free(*out);
	return rv;
}

/* An error reply made here (the handler's answer could not be encoded). */
static int
reply_error(int code, nng_msg **out)
{
	Kiln__Reply rep;
	int rv;

	kiln_proto_reply_init(&rep);
	rep.status = kiln_proto_status_of(code);
	rep.error = (char *)kiln_strerror(code);
	if ((rv = nng_msg_alloc(out, kiln_proto_size(&rep.base))) != 0)
		return err_of_nng(rv);
	kiln_proto_pack(&rep.base, nng_msg_body(*out));
	return 0;
}

/* Let go of the request the worker holds. */
static void
request_drop(struct worker *w)
{
	kiln_proto_request_free(w->req);
	w->req = NULL;
	if (w->msg != NULL)
		nng_msg_free(w->msg);
	w->msg = NULL;
}

/* Do what the answer says: park, or encode and send. */
static void
answer_send(struct worker *w, struct kilnd_answer *a)
{
	nng_msg *out = NULL;
	int rv = 0;

	if (atomic_load(&w->d->server->closing)) { /* no park, no send */
		answer_release(a);
		request_drop(w);
		return;
	}
	if (a->kind == ANSWER_PARK) {
		w->state = W_PARK;
		nng_sleep_aio((nng_duration)a->wait_ms, w->sleep);
		/* An event published before the sleep began found nothing to
		 * cancel; cancel now. (Cancelling a sleep that already ended is
		 * harmless: only w->sleep is touched.) */
		events_rewake(w->d->events, &w->waiter);
		return;
	}
	if (a->kind == ANSWER_BYTES) {
		if ((rv = err_of_nng(nng_msg_alloc(&out, a->nbytes))) == 0)
			memcpy(nng_msg_body(out), a->bytes, a->nbytes);
	} else {
		rv = reply_encode(a, &out);
	}
	if (rv != 0 && reply_error(rv, &out) != 0)
		out = NULL;
	w->after_stop = a->after_stop && rv == 0;
	answer_release(a);
	request_drop(w);
	if (out == NULL || atomic_load(&w->d->server->closing)) {
		if (out != NULL)
			nng_msg_free(out);
		recv_next(w);
		return;
	}
	w->state = W_SEND;
	nng_aio_set_msg(w->aio, out);
	nng_aio_set_timeout(w->aio, SEND_TIMEOUT_MS);
	nng_ctx_send(w->ctx, w->aio);
}

/* ---- receiving ----------------------------------------------------------- */

/* Whether the request must prove itself with the token. Fail closed: only
 * a pipe positively known to come from the ipc listener is local. A pipe
 * that closed before its request is handled reports listener id 0 (nng
 * 1.5.2), and comparing against the remote listener instead let such a
 * request from tcp:// skip the token (found in review: stop and blob put
 * got through). */
static int
pipe_is_remote(const struct kilnd_server *s, nng_pipe p)
{
	return nng_listener_id(nng_pipe_listener(p)) != nng_listener_id(s->ipc);
}

/* The answer to a message that is not a Request at all. */
static void
answer_malformed(struct worker *w, struct kilnd_answer *a)
{
	struct kilnd *d = w->d;

	atomic_fetch_add(&d->requests, 1);
	atomic_fetch_add(&d->bad_requests, 1);
	kilnd_log_limited(d, &d->refused_log, KILND_WARNING, "refused a "
	                  "malformed request of %zu bytes from client %u",
	                  nng_msg_len(w->msg), w->call.pipe);
	a->fd = -1;
	a->kind = ANSWER_REPLY;
	kiln_proto_reply_init(&a->reply);
	a->reply.status = KILN__STATUS__STATUS_BAD_REQUEST;
	snprintf(a->error, sizeof(a->error), "not a kiln.proto Request "
	         "(malformed or truncated protobuf)");
	a->reply.error = a->error;
}

/* A request arrived (a job on the pool): decode, handle, answer. */
static void
on_request(struct worker *w)
{
	struct kilnd_answer a = {0};
	nng_pipe p = nng_msg_get_pipe(w->msg);

	w->call = (struct kilnd_call){.pipe = (uint32_t)nng_pipe_id(p),
	                              .remote = pipe_is_remote(w->d->server, p)};
	if (kiln_proto_request_unpack(nng_msg_body(w->msg), nng_msg_len(w->msg),
	                              &w->req, &w->call.data,
	                              &w->call.ndata) != 0) {
		answer_malformed(w, &a);
	} else {
		w->call.req = w->req;
		handle_request(w->d, &w->call, &a, &w->waiter);
	}
	answer_send(w, &a);
}

/* Queue the worker to do `next` on the handler pool, or, when the server
 * is closing, let go of its request. */
static void
job_queue(struct worker *w, enum wjob next)
{
	w->next = next;
	if (atomic_load(&w->d->server->closing) ||
	    jobs_push(w->d->server->jobs, &w->job) != 0)
		request_drop(w);
}

/* Let go of a request unanswered (an nng callback): its connection is
 * gone (no one to answer), or has too many requests in progress (an
 * answer would only queue behind theirs). */
static void
request_refuse(struct worker *w, int why)
{
	struct kilnd *d = w->d;

	if (why == KILN_EBUSY) {
		atomic_fetch_add(&d->bad_requests, 1);
		kilnd_log_limited(d, &d->server->drop_log, KILND_WARNING,
		                  "dropped a request from client %u: %d of its "
		                  "requests are in progress already (does it read "
		                  "the replies?)", w->peer, PEER_MAX_IN_PROGRESS);
	}
	request_drop(w);
	recv_next(w);
}

/* A receive ended (an nng callback). */
static void
on_recv(struct worker *w, int rv)
{
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return; /* shutting down */
	if (rv != 0) {
		recv_next(w);
		return;
	}
	w->msg = nng_aio_get_msg(w->aio);
	w->peer = (uint32_t)nng_pipe_id(nng_msg_get_pipe(w->msg));
	if ((rv = peer_take(w->d->server, w)) != 0) {
		request_refuse(w, rv);
		return;
	}
	job_queue(w, JOB_REQUEST);
}

static void
on_sent(struct worker *w, int rv)
{
	if (rv != 0)
		nng_msg_free(nng_aio_get_msg(w->aio));
	if (rv == NNG_ETIMEDOUT)
		kilnd_log_limited(w->d, &w->d->server->send_log, KILND_WARNING,
		                  "gave up a reply to client %u after %d s: its "
		                  "earlier replies are still not read", w->peer,
		                  SEND_TIMEOUT_MS / 1000);
	if (w->after_stop)
		kilnd_request_stop(w->d, "stop request");
	w->after_stop = 0;
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	recv_next(w);
}

/* A parked poll's wait ended: by time, by an event, or by shutdown (a job
 * on the pool). */
static void
on_wake(struct worker *w)
{
	struct kilnd_answer a = {0};

	events_unpark(w->d->events, &w->waiter);
	if (atomic_load(&w->d->server->closing)) {
		request_drop(w);
		return;
	}
	handle_poll_again(w->d, &w->call, &a);
	answer_send(w, &a);
}

static void
worker_cb(void *arg)
{
	struct worker *w = arg;
	int rv = nng_aio_result(w->aio);

	if (w->state == W_RECV)
		on_recv(w, rv);
	else
		on_sent(w, rv);
}

/* The sleep of a parked poll ended. */
static void
sleep_cb(void *arg)
{
	job_queue(arg, JOB_WAKE);
}

/* A queued worker's turn on the handler pool. */
static void
job_run(struct job *j)
{
	struct worker *w = (struct worker *)((char *)j -
	                                     offsetof(struct worker, job));

	if (w->next == JOB_REQUEST)
		on_request(w);
	else
		on_wake(w);
}

/* events.c wakes a parked poll by cancelling its sleep. */
static void
waiter_wake(struct ev_waiter *ew)
{
	struct worker *w = (struct worker *)((char *)ew -
	                                     offsetof(struct worker, waiter));

	nng_aio_cancel(w->sleep);
}

/* ---- connections --------------------------------------------------------- */

/* Admit a connection before it is used, taking one of cfg.max_clients
 * slots; refuse an ipc peer of another user (defence in depth behind the
 * socket's mode 0600), or one connection too many. */
static void
pipe_admit(struct kilnd *d, nng_pipe p)
{
	struct kilnd_server *s = d->server;
	uint64_t uid = UINT64_MAX;
	uint32_t evicted;

	if (nng_listener_id(nng_pipe_listener(p)) == nng_listener_id(s->ipc) &&
	    (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0 ||
	     uid != (uint64_t)geteuid())) {
		kilnd_log_limited(d, &s->conn_log, KILND_WARNING, "refused a "
		                  "connection from uid %lld (the daemon's uid is "
		                  "%u)", (long long)uid, geteuid());
		nng_pipe_close(p);
		return;
	}
	if (peer_add(d, (uint32_t)nng_pipe_id(p), &evicted) != 0) {
		kilnd_log_limited(d, &s->conn_log, KILND_WARNING, "refused a "
		                  "connection: %u clients connected already, "
		                  "none idle (--max-clients)", d->cfg.max_clients);
		nng_pipe_close(p);
	} else if (evicted != 0) {
		nng_pipe old = NNG_PIPE_INITIALIZER;
		old.id = evicted;
		kilnd_log_limited(d, &s->evict_log, KILND_WARNING, "closed idle "
		                  "client %u to admit a new one: %u clients "
		                  "connected (--max-clients)", evicted,
		                  d->cfg.max_clients);
		nng_pipe_close(old); /* its REM_POST drops what it held */
	}
}

/* Connections come and go (nng's pipe notifications). A refused one is
 * notified of its removal too, but never held a slot; an evicted one no
 * longer holds one. */
static void
pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct kilnd *d = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);

	switch (ev) {
	case NNG_PIPE_EV_ADD_PRE:
		pipe_admit(d, p);
		break;
	case NNG_PIPE_EV_ADD_POST:
		kilnd_log(d, KILND_DEBUG, "client %u connected (%u now)", id,
		          atomic_load(&d->clients));
		break;
	case NNG_PIPE_EV_REM_POST:
		/* After the slot is gone: a handler that registers something
		 * for this connection later sees it closed (server_pipe_open).
		 * An evicted connection's slot went to another already, so
		 * this runs whether or not one was found; for a refused
		 * connection there is nothing to drop. */
		if (peer_remove(d, id) == 0)
			kilnd_log(d, KILND_DEBUG, "client %u disconnected", id);
		uploads_pipe_closed(d->uploads, id);
		events_pipe_closed(d->events, id);
		owners_pipe_closed(d->owners, id);
		break;
	default:
		break;
	}
}

/* ---- listeners ----------------------------------------------------------- */

/* Read a whole (small) text file into a malloc'd string. */
static int
file_slurp(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n;
	long size;

	*out = NULL;
	if (f == NULL)
		return kiln_err_from_errno(errno);
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    size > (1 << 20) || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t)size + 1)) == NULL) {
		fclose(f);
		return buf == NULL ? KILN_ENOMEM : KILN_EIO;
	}
	n = fread(buf, 1, (size_t)size, f);
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* A server TLS configuration from the PEM certificate and key files. */
static int
tls_setup(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	char *cert = NULL, *key = NULL;
	int rv;

	if ((rv = file_slurp(d->cfg.tls_cert, &cert)) != 0 ||
	    (rv = file_slurp(d->cfg.tls_key, &key)) != 0) {
		snprintf(err, len, "reading %s: %s", cert ? d->cfg.tls_key :
		         d->cfg.tls_cert, kiln_strerror(rv));
		goto done;
	}
	if ((rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER)) != 0 ||
	    (rv = nng_tls_config_own_cert(s->tls, cert, key, NULL)) != 0 ||
	    (rv = nng_listener_set_ptr(s->remote, NNG_OPT_TLS_CONFIG,
	                               s->tls)) != 0) {
		snprintf(err, len, "TLS certificate %s / key %s: %s",
		         d->cfg.tls_cert, d->cfg.tls_key, nng_strerror(rv));
		rv = KILN_EINVAL;
	}
done:
	free(cert);
	free(key);
	return rv;
}

/* Create, bound and start one listener on url into *l. */
static int
listen_on(struct kilnd *d, const char *url, nng_listener *l, int ipc,
          char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	int rv;

	if ((rv = nng_listener_create(l, s->sock, url)) != 0 ||
	    (rv = nng_listener_set_size(*l, NNG_OPT_RECVMAXSZ,
	                                d->cfg.max_message)) != 0 ||
	    (ipc && (rv = nng_listener_set_int(*l, NNG_OPT_IPC_PERMISSIONS,
	                                       0600)) != 0)) {
		snprintf(err, len, "%s: %s", url, nng_strerror(rv));
		return err_of_nng(rv);
	}
	if (!ipc) { /* known as remote before its first connection */
		s->remote = *l;
		if (strncmp(url, "tls+tcp://", 10) == 0 &&
		    (rv = tls_setup(d, err, len)) != 0)
			return rv;
	}
	if ((rv = nng_listener_start(*l, 0)) != 0) {
		snprintf(err, len, "listening on %s: %s", url, nng_strerror(rv));
		return err_of_nng(rv);
	}
	s->urls[s->nurls++] = url;
	return 0;
}

size_t
server_listen_urls(struct kilnd *d, const char **urls, size_t max)
{
	size_t n = d->server->nurls < max ? d->server->nurls : max;

	memcpy(urls, d->server->urls, n * sizeof(*urls));
	return n;
}

/* ---- start and stop ------------------------------------------------------ */

static int
workers_make(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	int rv;

	s->nworkers = d->cfg.workers + d->cfg.max_subscribers;
	if ((s->workers = calloc(s->nworkers, sizeof(*s->workers))) == NULL)
		return KILN_ENOMEM;
	for (uint32_t i = 0; i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];
		w->d = d;
		w->waiter.wake = waiter_wake;
		w->job.run = job_run;
		if ((rv = nng_aio_alloc(&w->aio, worker_cb, w)) != 0 ||
		    (rv = nng_aio_alloc(&w->sleep, sleep_cb, w)) != 0 ||
		    (rv = nng_ctx_open(&w->ctx, s->sock)) != 0) {
			snprintf(err, len, "making workers: %s", nng_strerror(rv));
			return err_of_nng(rv);
		}
	}
	return 0;
}

int
server_start(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s;
	int rv;

	if ((s = d->server = calloc(1, sizeof(*s))) == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&s->peers_mu, NULL);
	s->maxpeers = d->cfg.max_clients ? d->cfg.max_clients : 1;
	if ((s->peers = calloc(s->maxpeers, sizeof(*s->peers))) == NULL)
		return KILN_ENOMEM;
	if ((rv = nng_rep0_open(&s->sock)) != 0 ||
	    (rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ,
	                              d->cfg.max_message)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, d)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, d)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, d)) != 0) {
		snprintf(err, len, "opening the socket: %s", nng_strerror(rv));
		return err_of_nng(rv);
	}
	if ((rv = jobs_new(d->cfg.workers, &s->jobs)) != 0) {
		snprintf(err, len, "starting %u handler threads: %s", d->cfg.workers,
		         kiln_strerror(rv));
		return rv;
	}
	if ((rv = workers_make(d, err, len)) != 0)
		return rv;
	for (uint32_t i = 0; i < s->nworkers; i++)
		recv_next(&s->workers[i]);
	if ((rv = listen_on(d, d->paths.url, &s->ipc, 1, err, len)) != 0)
		return rv;
	if (d->cfg.listen != NULL) {
		nng_listener l;
		if ((rv = listen_on(d, d->cfg.listen, &l, 0, err, len)) != 0)
			return rv;
	}
	return 0;
}

void
server_stop(struct kilnd *d)
{
	struct kilnd_server *s = d->server;

	if (s == NULL)
		return;
	/* Parked polls answer now, with the Stopping event; give the replies
	 * a moment to leave before the connections close. */
	events_wake_all(d->events);
	usleep(50 * 1000);
	/* From here on nothing is parked, queued or sent: the handlers finish
	 * what they hold, then the socket closes and the aios stop (their
	 * last callbacks only let go of what they hold). */
	atomic_store(&s->closing, 1);
	if (s->jobs != NULL)
		jobs_stop(s->jobs);
	/* Take back the replies still queued behind another on their
	 * connection (on_sent frees them). Left queued, nng 1.5.2 may hand
	 * one to a connection nng_close is closing, which then never frees
	 * it: rep0's send callback starts the next reply while rep0's pipe
	 * close has already closed the pipe's send aio. */
	for (uint32_t i = 0; s->workers != NULL && i < s->nworkers; i++)
		if (s->workers[i].aio != NULL)
			nng_aio_cancel(s->workers[i].aio);
	nng_close(s->sock);
	for (uint32_t i = 0; s->workers != NULL && i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];
		if (w->sleep != NULL)
			nng_aio_free(w->sleep); /* stops it, waiting for its callback */
		if (w->aio != NULL)
			nng_aio_free(w->aio);
		events_unpark(d->events, &w->waiter);
		request_drop(w);
	}
	jobs_free(s->jobs);
	free(s->workers);
	if (s->tls != NULL)
		nng_tls_config_free(s->tls);
	pthread_mutex_destroy(&s->peers_mu);
	free(s->peers);
	free(s);
	d->server = NULL;
}
