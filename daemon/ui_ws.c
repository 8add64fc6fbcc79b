/* ui_ws.c — the dashboard's live events: a websocket on the dashboard's
 * HTTP server (ws://HOST:PORT/ws?secret=S[&since=EPOCH:SEQ]) carrying the
 * daemon's event stream as JSON text messages, one per poll answer:
 *
 *   {"epoch":"<16 hex>","through":N,"events":[Event as in kiln.proto...]}
 *   {"heartbeat":true}            nothing happened for a while
 *   {"error":"..."}               the stream ended (the daemon is stopping)
 *
 * Each page is a subscription of its own, polled through the daemon's
 * request handlers as a connection of the dashboard's (pipe UI_PIPE_BASE +
 * 1 + slot): the same subscribe and poll a `kiln events` sends, so
 * resuming with since= behaves as `kiln events --since` does (an Overflow
 * event when the ring moved past it or the daemon restarted).
 *
 * Threads: accepting runs in nng's callback; each connection on a thread
 * of its own that blocks on its sends and on its parked poll (woken by
 * events.c through the waiter, or by ui_ws_stop). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_error.h"
#include "ui_int.h"

/* nng 1.5.2's hook into its websocket listener's upgrade (its
 * supplemental/websocket/websocket.c; not in the public headers, "XXX:
 * consider replacing this with an option" there): called with the
 * upgrade request and the 101 answer made; an answer whose status the
 * hook changed is sent instead, and no websocket is made. The listener
 * behind an nng_stream_listener of a ws:// address is that file's
 * nni_ws_listener, whose first member is the nng_stream_listener: the
 * same pointer. third_party/nng/build.sh pins 1.5.2 by its checksum, and
 * its ws-hook-refusal.patch makes a refusal safe (nng freed the request
 * its HTTP server still owned). */
typedef int (*ws_hook_fn)(void *arg, nng_http_req *req, nng_http_res *res);
void nni_ws_listener_hook(nng_stream_listener *l, ws_hook_fn fn, void *arg);

#define WS_WAIT_MS 10000   /* a parked poll's wait; then a heartbeat */
#define WS_SEND_MS 10000   /* a page that reads nothing this long is dropped */

/* Send text as one websocket message. Returns 0 or an nng error. */
static int
ws_send(struct ui_conn *c, const char *text)
{
	nng_aio *aio;
	nng_iov iov = {.iov_buf = (void *)text, .iov_len = strlen(text)};
	int rv;

	if (iov.iov_len > UI_MAX_FRAME)
		return NNG_EMSGSIZE;
	if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0)
		return rv;
	nng_aio_set_timeout(aio, WS_SEND_MS);
	if ((rv = nng_aio_set_iov(aio, 1, &iov)) == 0) {
		nng_stream_send(c->s, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
	}
	nng_aio_free(aio);
	return rv;
}

static int
ws_send_json(struct ui_conn *c, json_t *o, int err)
{
	char *text = err ? NULL : kiln_json_dumps(o);
	int rv;

	if (err)
		json_decref(o);
	if (text == NULL)
		return NNG_ENOMEM;
	rv = ws_send(c, text);
	free(text);
	return rv;
}

/* events.c: a publisher woke the parked poll (events lock held). */
static void
conn_wake(struct ev_waiter *w)
{
	struct ui_conn *c = (struct ui_conn *)((char *)w - offsetof(struct ui_conn, waiter));

	pthread_mutex_lock(&c->mu);
	c->woken = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Wait until woken, closing, or ms passed. */
static void
conn_sleep(struct ui_conn *c, uint32_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->mu);
	while (!c->woken && !atomic_load(&c->u->closing))
		if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0)
			break;
	pthread_mutex_unlock(&c->mu);
}

/* One poll, waiting when the daemon parks it. *a holds the answer. */
static void
conn_poll(struct ui_conn *c, const struct kilnd_call *call, struct kilnd_answer *a)
{
	struct kilnd *d = c->u->d;

	pthread_mutex_lock(&c->mu);
	c->woken = 0;
	pthread_mutex_unlock(&c->mu);
	handle_request(d, call, a, &c->waiter);
	if (a->kind != ANSWER_PARK)
		return;
	conn_sleep(c, a->wait_ms);
	events_unpark(d->events, &c->waiter);
	memset(a, 0, sizeof *a);
	handle_poll_again(d, call, a);
}

/* The message for one poll answer; 0 or an nng error to end on. */
static int
conn_forward(struct ui_conn *c, struct kilnd_answer *a, uint64_t *epoch,
             uint64_t *after)
{
	Kiln__Reply *rep = NULL;
	const Kiln__PollReply *pr;
	json_t *o, *evs;
	char hex[17];
	int err = 0, rv;

	if (a->kind == ANSWER_BYTES)
		rep = kiln__reply__unpack(NULL, a->nbytes, a->bytes);
	if (rep == NULL || rep->status != KILN__STATUS__STATUS_OK ||
	    rep->body_case != KILN__REPLY__BODY_POLL_REPLY) {
		o = json_object();
		err |= kiln_json_text(o, "error", rep ? rep->error :
		                      a->reply.error ? a->reply.error : "poll failed");
		if (rep != NULL)
			kiln__reply__free_unpacked(rep, NULL);
		ws_send_json(c, o, err);
		return NNG_ECLOSED;
	}
	pr = rep->poll_reply;
	if (pr->n_events == 0) {
		kiln__reply__free_unpacked(rep, NULL);
		o = json_object();
		err |= kiln_json_bool(o, "heartbeat", 1);
		return ws_send_json(c, o, err);
	}
	*epoch = pr->epoch;
	*after = pr->through ? pr->through : pr->events[pr->n_events - 1]->seq;
	snprintf(hex, sizeof hex, "%016" PRIx64, pr->epoch);
	/* One message per run of events, halved while its JSON is over
	 * UI_MAX_FRAME (hashes in hex, names spelled out: JSON is larger than
	 * the poll's protobuf). Sent whole, a too large answer closed the
	 * page, which asked again from the same cursor, for ever. An event
	 * too large alone is passed over: its seq moves the cursor. */
	rv = 0;
	for (size_t at = 0, run = pr->n_events; at < pr->n_events && rv == 0;) {
		size_t end = at + run < pr->n_events ? at + run : pr->n_events;
		uint64_t through = end == pr->n_events ? *after : pr->events[end - 1]->seq;
		o = json_object();
		evs = json_array();
		err = kiln_json_text(o, "epoch", hex);
		err |= kiln_json_uint(o, "through", through);
		for (size_t i = at; i < end; i++)
			err |= kiln_json_push(evs, kiln_proto_json(&pr->events[i]->base, &err));
		err |= kiln_json_put(o, "events", evs);
		rv = ws_send_json(c, o, err);
		if (rv == NNG_EMSGSIZE && end - at > 1) {
			run = (end - at) / 2;
			rv = 0;
			continue;
		}
		if (rv == NNG_EMSGSIZE) {   /* one event over the limit */
			o = json_object();
			err = kiln_json_text(o, "epoch", hex);
			err |= kiln_json_uint(o, "through", through);
			err |= kiln_json_put(o, "events", json_array());
			err |= kiln_json_uint(o, "too_large", 1);
			rv = ws_send_json(c, o, err);
		}
		at = end;
	}
	kiln__reply__free_unpacked(rep, NULL);
	return rv;
}

/* since=EPOCH:SEQ from the request's URI (absent: from now). */
static void
conn_since(const char *query, uint64_t *epoch, uint64_t *after)
{
	char buf[64], *colon, *end;

	*epoch = *after = 0;
	if (query == NULL || ui_query_get(query, "since", buf, sizeof buf) != 0 ||
	    (colon = strchr(buf, ':')) == NULL)
		return;
	*colon = '\0';
	*epoch = strtoull(buf, &end, 16);
	if (*end != '\0')
		*epoch = 0;
	*after = strtoull(colon + 1, &end, 10);
	if (*end != '\0' || *epoch == 0)
		*epoch = *after = 0;
}

/* Subscribe as the connection; 0 with the subscription and cursor. */
static int
conn_subscribe(struct ui_conn *c, uint64_t *sub, uint64_t *epoch, uint64_t *after)
{
	Kiln__Request q = KILN__REQUEST__INIT;
	Kiln__SubscribeRequest s = KILN__SUBSCRIBE_REQUEST__INIT;
	struct kilnd_call call = {.req = &q, .pipe = c->pipe};
	struct kilnd_answer *a = calloc(1, sizeof *a);
	struct events_stats es;
	int rv = KILN_EIO;

	if (a == NULL)
		return KILN_ENOMEM;
	/* A cursor of another daemon (the page outlived a restart): all this
	 * daemon still holds, from its first event; the page sees the new
	 * epoch and starts over. */
	events_stats(c->u->d->events, &es);
	if (*epoch != 0 && *epoch != es.epoch) {
		*epoch = es.epoch;
		*after = 0;
	}
	s.epoch = *epoch;
	s.after_seq = *after;
	q.version = KILN_PROTO_VERSION;
	q.body_case = KILN__REQUEST__BODY_SUBSCRIBE;
	q.subscribe = &s;
	handle_request(c->u->d, &call, a, NULL);
	if (a->reply.status == KILN__STATUS__STATUS_OK &&
	    a->reply.body_case == KILN__REPLY__BODY_SUBSCRIBE_REPLY) {
		*sub = a->reply.subscribe_reply->subscription;
		*epoch = a->reply.subscribe_reply->epoch;
		*after = a->reply.subscribe_reply->after_seq;
		rv = 0;
	}
	answer_release(a);
	free(a);
	return rv;
}

/* The secret and cursor from the upgrade request's URI. */
static int
conn_admit(struct ui_conn *c, uint64_t *epoch, uint64_t *after)
{
	char *uri = NULL, secret[UI_SECRET_LEN + 2];
	const char *q;
	int ok;

	if (nng_stream_get_string(c->s, NNG_OPT_WS_REQUEST_URI, &uri) != 0)
		return 0;
	q = strchr(uri, '?');
	ok = q != NULL && ui_query_get(q + 1, "secret", secret, sizeof secret) == 0 &&
	     ui_secret_ok(c->u, secret, strlen(secret));
	if (ok)
		conn_since(q + 1, epoch, after);
	nng_strfree(uri);
	return ok;
}

static void *
conn_main(void *arg)
{
	struct ui_conn *c = arg;
	struct kilnd *d = c->u->d;
	Kiln__Request q = KILN__REQUEST__INIT;
	Kiln__PollRequest p = KILN__POLL_REQUEST__INIT;
	struct kilnd_call call = {.req = &q, .pipe = c->pipe};
	struct kilnd_answer *a = calloc(1, sizeof *a);
	uint64_t epoch, after;

	if (a != NULL && conn_admit(c, &epoch, &after) &&
	    conn_subscribe(c, &p.subscription, &epoch, &after) == 0) {
		q.version = KILN_PROTO_VERSION;
		q.body_case = KILN__REQUEST__BODY_POLL;
		q.poll = &p;
		p.wait_ms = WS_WAIT_MS;
		p.gather_ms = 50;  /* a page redraws per frame, not per event */
		while (!atomic_load(&c->u->closing)) {
			int rv;
			p.epoch = epoch;
			p.after_seq = after;
			memset(a, 0, sizeof *a);
			conn_poll(c, &call, a);
			rv = conn_forward(c, a, &epoch, &after);
			answer_release(a);
			if (rv != 0)
				break;
		}
	}
	free(a);
	atomic_store(&c->done, 1);
	events_pipe_closed(d->events, c->pipe);
	nng_stream_close(c->s); /* freed by whoever joins the thread */
	return NULL;
}

/* A free slot (joining the finished thread that held it), or NULL. */
static struct ui_conn *
conn_slot(struct kilnd_ui *u)
{
	for (size_t i = 0; i < UI_MAX_CONNS; i++) {
		struct ui_conn *c = &u->conns[i];
		if (c->started && !atomic_load(&c->done))
			continue;
		if (c->started) {
			pthread_join(c->thread, NULL);
			nng_stream_free(c->s);
			c->s = NULL;
			c->started = 0;
		}
		return c;
	}
	return NULL;
}

static void
accept_cb(void *arg)
{
	struct kilnd_ui *u = arg;
	nng_stream *s;
	struct ui_conn *c;

	if (nng_aio_result(u->accept) != 0)
		return; /* closed: ui_ws_stop */
	s = nng_aio_get_output(u->accept, 0);
	if (atomic_load(&u->closing) || (c = conn_slot(u)) == NULL) {
		nng_stream_close(s);
		nng_stream_free(s);
	} else {
		c->s = s;
		atomic_store(&c->done, 0);
		if (pthread_create(&c->thread, NULL, conn_main, c) == 0) {
			c->started = 1;
		} else {
			atomic_store(&c->done, 1);
			nng_stream_close(s);
			nng_stream_free(s);
			c->s = NULL;
		}
	}
	nng_stream_listener_accept(u->ws, u->accept);
}

/* The upgrade: another site's page (a cross-origin Origin header) gets
 * 403, as its POSTs do (ui.c); a client with no Origin (not a browser) is
 * let through, to the secret's check (conn_admit). nng's listener lock is
 * held: headers only. */
static int
ws_hook(void *arg, nng_http_req *req, nng_http_res *res)
{
	static const char msg[] = "cross-origin websocket refused\n";

	(void)arg;
	if (ui_origin_ok(nng_http_req_get_header(req, "Origin"),
	                 nng_http_req_get_header(req, "Host")))
		return 0;
	/* the 101's own headers go (absent ones: nothing to remove) */
	nng_http_res_del_header(res, "Upgrade");
	nng_http_res_del_header(res, "Sec-WebSocket-Accept");
	nng_http_res_del_header(res, "Sec-WebSocket-Protocol");
	if (nng_http_res_set_status(res, 403) != 0 ||
	    nng_http_res_set_header(res, "Connection", "close") != 0 ||
	    nng_http_res_set_header(res, "Content-Type", "text/plain") != 0 ||
	    nng_http_res_copy_data(res, msg, sizeof msg - 1) != 0)
		return NNG_ENOMEM;   /* nng ends the connection: no upgrade */
	return 0;
}

int
ui_ws_start(struct kilnd_ui *u, const char *host, int port)
{
	char addr[300];
	int rv;

	for (size_t i = 0; i < UI_MAX_CONNS; i++) {
		struct ui_conn *c = &u->conns[i];
		c->u = u;
		c->pipe = UI_PIPE_BASE + 1 + (uint32_t)i;
		atomic_store(&c->done, 1);
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		c->waiter.wake = conn_wake;
	}
	snprintf(addr, sizeof addr, strchr(host, ':') ? "ws://[%s]:%d/ws"
	         : "ws://%s:%d/ws", host, port);
	if ((rv = nng_stream_listener_alloc(&u->ws, addr)) != 0)
		return KILN_EIO;
	nni_ws_listener_hook(u->ws, ws_hook, u);
	if ((rv = nng_stream_listener_set_bool(u->ws, NNG_OPT_WS_SEND_TEXT, true)) != 0 ||
	    (rv = nng_stream_listener_set_bool(u->ws, NNG_OPT_WS_RECV_TEXT, true)) != 0 ||
	    (rv = nng_stream_listener_set_size(u->ws, NNG_OPT_WS_RECVMAXFRAME,
	                                       4096)) != 0 ||
	    (rv = nng_stream_listener_listen(u->ws)) != 0 ||
	    (rv = nng_aio_alloc(&u->accept, accept_cb, u)) != 0) {
		nng_stream_listener_free(u->ws);
		return KILN_EIO;
	}
	nng_stream_listener_accept(u->ws, u->accept);
	return 0;
}

void
ui_ws_stop(struct kilnd_ui *u)
{
	nng_stream_listener_close(u->ws);
	nng_aio_stop(u->accept);
	for (size_t i = 0; i < UI_MAX_CONNS; i++) {
		struct ui_conn *c = &u->conns[i];
		if (!c->started)
			continue;
		pthread_mutex_lock(&c->mu);
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		/* a send in progress ends with the stream */
		nng_stream_close(c->s);
		pthread_join(c->thread, NULL);
		nng_stream_free(c->s);
		c->s = NULL;
		c->started = 0;
	}
	nng_aio_free(u->accept);
	nng_stream_listener_free(u->ws);
}
