/* workers.c — the request workers of kilnd's rep0 socket.
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
 * sent or given up: counted in the peer table, peers.c); past that its
 * requests are dropped unanswered; and a send that cannot leave within
 * SEND_TIMEOUT_MS is given up.
 *
 * Threads: worker callbacks run on nng's threads, several at once; a
 * callback either finishes its work at once (a send completed) or queues
 * the worker as a job. A worker is touched by one thread at a time — its
 * callback or the job it queued — except `waiter`, which events.c owns
 * while parked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "agents.h"
#include "server_int.h"

/* How long a reply may wait behind the connection's earlier replies: long
 * enough for five 2 MiB chunks ahead of it at 1 MB/s. */
#define SEND_TIMEOUT_MS 10000


/* ---- sending ------------------------------------------------------------- */

void
worker_recv_next(struct worker *w)
{
	peer_done(w->d->server, w);
	__atomic_store_n(&w->state, W_RECV, __ATOMIC_RELEASE);
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
		return server_err_of_nng(rv);
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
		return server_err_of_nng(rv);
	kiln_proto_pack(&rep.base, nng_msg_body(*out));
	return 0;
}

/* Let go of the request the worker holds. */
void
worker_request_drop(struct worker *w)
{
	kiln_proto_request_free(w->req);
	w->req = NULL;
	if (w->msg != NULL)
		nng_msg_free(w->msg);
	w->msg = NULL;
}

/* Whether w's request is an agent's take (parked on agents.c's list, not
 * on the events'). */
static int
worker_parks_take(const struct worker *w)
{
	return w->call.req != NULL && w->call.req->body_case == KILN__REQUEST__BODY_AGENT_TAKE;
}

/* Do what the answer says: park, or encode and send. */
static void
answer_send(struct worker *w, struct kilnd_answer *a)
{
	nng_msg *out = NULL;
	int rv = 0;

	if (atomic_load(&w->d->server->closing)) { /* no park, no send */
		answer_release(a);
		worker_request_drop(w);
		return;
	}
	if (a->kind == ANSWER_PARK) {
		/* Read before the sleep starts: from then on the worker belongs
		 * to its wake job on another thread, which may answer and drop
		 * the request before this line runs (an ASan heap-use-after-free
		 * on a busy machine read w->call.req here). */
		int take = worker_parks_take(w);

		w->take_parked = take;
		__atomic_store_n(&w->state, W_PARK, __ATOMIC_RELEASE);
		nng_sleep_aio((nng_duration)a->wait_ms, w->sleep);
		/* An event published before the sleep began found nothing to
		 * cancel; cancel now. (Cancelling a sleep that already ended is
		 * harmless: only w->sleep is touched.) */
		if (take)
			agents_rewake(w->d->agents, &w->waiter);
		else
			events_rewake(w->d->events, &w->waiter);
		return;
	}
	if (a->kind == ANSWER_BYTES) {
		if ((rv = server_err_of_nng(nng_msg_alloc(&out, a->nbytes))) == 0)
			memcpy(nng_msg_body(out), a->bytes, a->nbytes);
	} else {
		rv = reply_encode(a, &out);
	}
	if (rv != 0 && reply_error(rv, &out) != 0)
		out = NULL;
	w->after_stop = a->after_stop && rv == 0;
	answer_release(a);
	worker_request_drop(w);
	if (out == NULL || atomic_load(&w->d->server->closing)) {
		if (out != NULL)
			nng_msg_free(out);
		worker_recv_next(w);
		return;
	}
	__atomic_store_n(&w->state, W_SEND, __ATOMIC_RELEASE);
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
		worker_request_drop(w);
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
	worker_request_drop(w);
	worker_recv_next(w);
}

/* A receive ended (an nng callback). */
static void
on_recv(struct worker *w, int rv)
{
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return; /* shutting down */
	if (rv != 0) {
		worker_recv_next(w);
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
	worker_recv_next(w);
}

/* A parked poll's wait ended: by time, by an event, or by shutdown (a job
 * on the pool). */
static void
on_wake(struct worker *w)
{
	struct kilnd_answer a = {0};

	if (worker_parks_take(w))
		agents_unpark(w->d->agents, &w->waiter);
	else
		events_unpark(w->d->events, &w->waiter);
	if (atomic_load(&w->d->server->closing)) {
		worker_request_drop(w);
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

/* ---- making the workers ------------------------------------------------ */

int
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
			return server_err_of_nng(rv);
		}
	}
	return 0;
}
