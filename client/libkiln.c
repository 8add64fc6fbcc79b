/* libkiln.c — kiln.h's connection, status, stop and blob calls, built on
 * conn.c's slots. Events are in events.c, auto-start in autostart.c.
 *
 * Threads: a kiln_conn is used by one thread at a time, except that a
 * callback subscription's thread owns the events slot and c->sub. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libkiln_int.h"

#define TIMEOUT_DEFAULT_MS 30000

/* ---- requests ------------------------------------------------------------ */

void
lk_request_init(const kiln_conn *c, Kiln__Request *req)
{
	kiln_proto_request_init(req);
	if (c->token[0] != '\0')
		req->token = (char *)c->token;
}

int
lk_reply_check(struct conn_reply *r, Kiln__Reply__BodyCase want, char *err,
               size_t errlen)
{
	const Kiln__Reply *rep = r->rep;
	int rv = 0;

	err[0] = '\0';
	if (rep->status != KILN__STATUS__STATUS_OK) {
		rv = kiln_proto_err_of(rep->status);
		snprintf(err, errlen, "%s", rep->error);
	} else if (want != KILN__REPLY__BODY__NOT_SET && rep->body_case != want) {
		rv = KILN_EPROTO;
		snprintf(err, errlen, "the daemon answered with another kind of "
		         "reply");
	}
	if (rv != 0)
		conn_reply_free(r);
	return rv;
}

int
lk_call(kiln_conn *c, unsigned slot, const Kiln__Request *req,
        const void *data, size_t ndata, int timeout_ms,
        Kiln__Reply__BodyCase want, struct conn_reply *r, char *err,
        size_t errlen)
{
	int rv;

	err[0] = '\0';
	if ((rv = conn_call(c->conn, slot, req, data, ndata, timeout_ms, r)) != 0)
		return rv;
	return lk_reply_check(r, want, err, errlen);
}

/* An ordinary request on the main slot. */
static int
call(kiln_conn *c, const Kiln__Request *req, const void *data, size_t ndata,
     Kiln__Reply__BodyCase want, struct conn_reply *r)
{
	return lk_call(c, CONN_SLOT_MAIN, req, data, ndata, c->timeout_ms, want, r,
	               c->error, sizeof(c->error));
}

int
lk_call_main(kiln_conn *c, const Kiln__Request *req, Kiln__Reply__BodyCase want,
             struct conn_reply *r)
{
	return call(c, req, NULL, 0, want, r);
}

/* ---- connecting ---------------------------------------------------------- */

int
kiln_connect(const kiln_connect_opts *o, kiln_conn **cp)
{
	static const kiln_connect_opts defaults = {0};
	struct conn_opts co = {0};
	struct kiln_paths paths;
	kiln_conn *c;
	int rv;

	*cp = NULL;
	if (o == NULL)
		o = &defaults;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KILN_ENOMEM;
	c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : TIMEOUT_DEFAULT_MS;
	c->max_message = o->max_message ? o->max_message : KILN_MAX_MESSAGE_DEFAULT;
	c->chunk = kiln_proto_chunk_max(c->max_message);
	if (o->token != NULL)
		snprintf(c->token, sizeof(c->token), "%s", o->token);
	co.max_message = c->max_message;
	co.tls_ca = o->tls_ca;
	co.tls_cert = o->tls_cert;
	co.tls_key = o->tls_key;
	if (c->max_message < KILN_MAX_MESSAGE_MIN)
		rv = KILN_EINVAL;
	else if (o->url != NULL)
		rv = conn_open(o->url, &co, &c->conn);
	else if ((rv = kiln_paths_init(&paths, o->project)) == 0)
		rv = lk_autostart(&paths, o->kilnd, o->flags & KILN_CONNECT_NO_START,
		                  &co, c->timeout_ms, &c->conn);
	if (rv != 0) {
		free(c);
		return rv;
	}
	*cp = c;
	return 0;
}

void
kiln_close(kiln_conn *c)
{
	if (c == NULL)
		return;
	lk_sub_end(c);
	lk_filter_free(&c->sub);
	if (c->held.rep != NULL) {
		struct conn_reply none = {0};
		lk_hold(c, &none);
	}
	conn_close(c->conn);
	free(c);
}

const char *
kiln_conn_error(const kiln_conn *c)
{
	return c->error;
}

/* ---- the daemon ---------------------------------------------------------- */

static void
status_copy_store(const Kiln__StoreStats *ss, kiln_status *st)
{
	if (ss == NULL)
		return;   /* a daemon from before these figures */
	if (ss->error != NULL && ss->error[0] != '\0') {
		snprintf(st->store_error, sizeof st->store_error, "%s", ss->error);
		return;
	}
	st->store_stats_known = 1;
	st->store_blobs = ss->blobs;
	st->store_bytes = ss->bytes;
	st->store_exact = ss->exact;
	st->gc_running = ss->gc_running;
	st->gc_started_ns = ss->gc_started_ns;
	st->last_gc_start_ns = ss->last_gc_start_ns;
	st->last_gc_end_ns = ss->last_gc_end_ns;
	st->last_gc_removed_blobs = ss->last_gc_removed_blobs;
	st->last_gc_removed_bytes = ss->last_gc_removed_bytes;
	st->last_gc_removed_actions = ss->last_gc_removed_actions;
	st->last_gc_max_size = ss->last_gc_max_size;
}

static void
status_copy(const Kiln__StatusReply *s, kiln_status *st)
{
	memset(st, 0, sizeof(*st));
	st->pid = s->pid;
	st->uptime_ms = s->uptime_ms;
	snprintf(st->version, sizeof(st->version), "%s", s->version);
	snprintf(st->project, sizeof(st->project), "%s", s->project);
	snprintf(st->store, sizeof(st->store), "%s", s->store);
	for (size_t i = 0; i < s->n_listen && i < 2; i++)
		snprintf(st->listen[i], sizeof(st->listen[i]), "%s", s->listen[i]);
	st->clients = s->clients;
	st->subscribers = s->subscribers;
	st->uploads = s->uploads;
	st->build_queue = s->build_queue;
	st->event_seq = s->event_seq;
	st->event_epoch = s->event_epoch;
	st->events_held = s->events_held;
	st->events_bytes = s->events_bytes;
	st->requests = s->requests;
	st->bad_requests = s->bad_requests;
	st->max_message = s->max_message;
	st->chunk_size = s->chunk_size;
	st->event_buffer = s->event_buffer;
	st->event_buffer_bytes = s->event_buffer_bytes;
	snprintf(st->cache_url, sizeof(st->cache_url), "%s", s->cache_url);
	snprintf(st->cache_mode, sizeof(st->cache_mode), "%s",
	         s->cache_mode[0] ? s->cache_mode : "off");
	st->cache_hits = s->cache_hits;
	st->cache_misses = s->cache_misses;
	st->cache_bytes_down = s->cache_bytes_down;
	st->cache_bytes_up = s->cache_bytes_up;
	st->cache_errors = s->cache_errors;
	st->cache_dropped = s->cache_dropped;
	st->cache_breaker_open = s->cache_breaker_open;
	st->cache_uploaded = s->cache_uploaded;
	st->cache_pending = s->cache_pending;
	st->cache_corrupt = s->cache_corrupt;
	st->cache_skipped_uploads = s->cache_skipped_uploads;
	st->nagents = (uint32_t)s->n_agents;
	for (size_t i = 0; i < s->n_agents && i < sizeof st->agents / sizeof st->agents[0]; i++) {
		const Kiln__AgentInfo *ai = s->agents[i];
		snprintf(st->agents[i].name, sizeof st->agents[i].name, "%s",
		         ai->name ? ai->name : "");
		st->agents[i].slots = ai->slots;
		st->agents[i].running = ai->running;
		st->agents[i].ran = ai->ran;
		st->agents[i].failed = ai->failed;
		st->agents[i].refused = ai->refused;
		st->agents[i].bytes_in = ai->bytes_in;
		st->agents[i].bytes_out = ai->bytes_out;
	}
	status_copy_store(s->store_stats, st);
}

int
kiln_status_get(kiln_conn *c, kiln_status *st)
{
	Kiln__Request req;
	Kiln__StatusRequest s = KILN__STATUS_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_STATUS;
	req.status = &s;
	if ((rv = call(c, &req, NULL, 0, KILN__REPLY__BODY_STATUS_REPLY, &r)) != 0)
		return rv;
	status_copy(r.rep->status_reply, st);
	conn_reply_free(&r);
	return 0;
}

int
kiln_stop(kiln_conn *c)
{
	Kiln__Request req;
	Kiln__StopRequest s = KILN__STOP_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_STOP;
	req.stop = &s;
	if ((rv = call(c, &req, NULL, 0, KILN__REPLY__BODY__NOT_SET, &r)) != 0)
		return rv;
	conn_reply_free(&r);
	return 0;
}

/* ---- blobs: has ---------------------------------------------------------- */

int
kiln_blob_has(kiln_conn *c, const kiln_id *ids, size_t n, int *present,
              uint64_t *sizes)
{
	Kiln__Request req;
	Kiln__BlobHasRequest h = KILN__BLOB_HAS_REQUEST__INIT;
	const Kiln__BlobHasReply *hr;
	struct conn_reply r;
	int rv;

	if (n > KILN_HAS_MAX)
		return KILN_ERANGE;
	if ((h.ids = calloc(n ? n : 1, sizeof(*h.ids))) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n; i++)
		h.ids[i] = kiln_proto_id_ref(&ids[i]);
	h.n_ids = n;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_BLOB_HAS;
	req.blob_has = &h;
	rv = call(c, &req, NULL, 0, KILN__REPLY__BODY_BLOB_HAS_REPLY, &r);
	free(h.ids);
	if (rv != 0)
		return rv;
	hr = r.rep->blob_has_reply;
	if (hr->n_present != n || hr->n_sizes != n) {
		conn_reply_free(&r);
		return KILN_EPROTO;
	}
	for (size_t i = 0; i < n; i++) {
		present[i] = hr->present[i];
		if (sizes != NULL)
			sizes[i] = hr->sizes[i];
	}
	conn_reply_free(&r);
	return 0;
}
