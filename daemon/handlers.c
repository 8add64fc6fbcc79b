/* handlers.c — one function per request type, and the table that picks
 * one. The build engine's requests (build, cancel, query, need) will be
 * rows of the same table.
 *
 * Threads: called on the handler threads of jobs.c, several at once (never
 * on nng's own threads, so a handler may read, write and fsync). Handlers
 * touch the daemon only through thread-safe parts: the store, events.c and
 * uploads.c (each locked inside), the server's peer table, atomics, and
 * fields fixed at start. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ui.h"
#include "engine.h"
#include "changes.h"
#include "evfilter.h"
#include "evsnap.h"
#include "handlers.h"
#include "roles.h"
#include "server.h"
#include "verified.h"

/* Say why in a->error (shown to the client) and return code. */
static int
refuse(struct kilnd_answer *a, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
refuse(struct kilnd_answer *a, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->error, sizeof(a->error), fmt, ap);
	va_end(ap);
	return code;
}

static enum kilnd_role call_role(const struct kilnd *d, const struct kilnd_call *c);

static void *
heap_alloc(struct kilnd_answer *a, size_t n, size_t size)
{
	for (size_t i = 0; i < sizeof(a->heap) / sizeof(a->heap[0]); i++)
		if (a->heap[i] == NULL)
			return a->heap[i] = calloc(n ? n : 1, size);
	return NULL;
}

/* Keep p (one malloc'd block) for answer_release to free; when no slot is
 * left p is freed and KILN_ENOMEM returned. */
static int
heap_keep(struct kilnd_answer *a, void *p)
{
	for (size_t i = 0; i < sizeof(a->heap) / sizeof(a->heap[0]); i++)
		if (a->heap[i] == NULL) {
			a->heap[i] = p;
			return 0;
		}
	free(p);
	return KILN_ENOMEM;
}

/* ---- status and stop ----------------------------------------------------- */

/* Serve the dashboard (ui.c), or say where it is served already. */
static int
h_ui(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
     struct ev_waiter *w)
{
	char *url;
	int rv;

	(void)w;
	if ((url = heap_alloc(a, 1, 512)) == NULL)
		return KILN_ENOMEM;
	if ((rv = ui_start(d->ui, c->req->ui, url, 512, a->error,
	                   sizeof a->error)) != 0)
		return rv;
	kiln__ui_reply__init(&a->body.ui);
	a->body.ui.url = url;
	a->reply.body_case = KILN__REPLY__BODY_UI_REPLY;
	a->reply.ui_reply = &a->body.ui;
	return 0;
}

/* The store's figures (running totals the store keeps: one read
 * transaction, no scan, whatever the store's size). */
static int
status_store(struct kilnd *d, struct kilnd_answer *a, Kiln__StatusReply *s)
{
	Kiln__StoreStats *ss;
	kiln_store_stats st;
	int rv;

	if ((ss = heap_alloc(a, 1, sizeof *ss)) == NULL)
		return KILN_ENOMEM;
	kiln__store_stats__init(ss);
	if ((rv = kiln_store_stats_get(d->store, &st)) != 0) {
		ss->error = (char *)kiln_strerror(rv);
	} else {
		ss->blobs = st.blobs;
		ss->bytes = st.bytes;
		ss->exact = st.exact != 0;
		ss->gc_running = st.gc_running != 0;
		ss->gc_started_ns = st.gc_started_ns;
		ss->last_gc_start_ns = st.last_gc_start_ns;
		ss->last_gc_end_ns = st.last_gc_end_ns;
		ss->last_gc_removed_blobs = st.last_gc_removed_blobs;
		ss->last_gc_removed_bytes = st.last_gc_removed_bytes;
		ss->last_gc_removed_actions = st.last_gc_removed_actions;
		ss->last_gc_max_size = st.last_gc_max_size;
	}
	s->store_stats = ss;
	return 0;
}

static int
h_status(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
         struct ev_waiter *w)
{
	Kiln__StatusReply *s = &a->body.status;
	struct events_stats es;
	const char **urls;

	(void)c, (void)w;
	if ((urls = heap_alloc(a, 4, sizeof(*urls))) == NULL)
		return KILN_ENOMEM;
	events_stats(d->events, &es);
	kiln__status_reply__init(s);
	s->pid = (uint32_t)getpid();
	s->uptime_ms = (uint64_t)(kiln_mono_ns() - d->start_ns) / 1000000;
	s->version = (char *)KILND_VERSION;
	s->project = d->paths.project;
	s->store = d->store_dir;
	s->clients = atomic_load(&d->clients);
	s->subscribers = es.subscribers;
	s->uploads = uploads_count(d->uploads);
	s->build_queue = d->engine ? engine_queued(d->engine) : 0;
	s->event_seq = es.head;
	s->event_epoch = es.epoch;
	s->events_held = es.held;
	s->events_bytes = es.bytes;
	s->requests = atomic_load(&d->requests);
	s->bad_requests = atomic_load(&d->bad_requests);
	s->max_message = d->cfg.max_message;
	s->chunk_size = d->chunk_size;
	s->event_buffer = d->cfg.event_buffer;
	s->event_buffer_bytes = d->cfg.event_buffer_bytes;
	s->n_listen = server_listen_urls(d, urls, 4);
	if (d->engine != NULL) {
		struct engine_cache_status *cs = heap_alloc(a, 1, sizeof *cs);
		if (cs == NULL)
			return KILN_ENOMEM;
		engine_cache_status(d->engine, cs);
		s->cache_url = cs->url;
		s->cache_mode = (char *)cs->mode;
		s->cache_hits = cs->steps_downloaded;
		s->cache_misses = cs->steps_missed;
		s->cache_bytes_down = cs->bytes_down;
		s->cache_bytes_up = cs->bytes_up;
		s->cache_errors = cs->errors;
		s->cache_dropped = cs->dropped;
		s->cache_breaker_open = cs->breaker_open != 0;
		s->cache_uploaded = cs->results_uploaded;
		s->cache_pending = cs->pending;
		s->cache_corrupt = cs->corrupt;
		s->cache_skipped_uploads = cs->skipped_uploads;
	}
	if (d->engine != NULL) {
		Kiln__AgentInfo **ai;
		size_t nai;
		if (engine_agents_status(d->engine, &ai, &nai) != 0)
			return KILN_ENOMEM;
		/* an agent's id is its secret (it answers its leases with
		 * it): the agent role, which may ask for status, never sees
		 * one */
		for (size_t i = 0; call_role(d, c) == ROLE_AGENT && i < nai; i++)
			ai[i]->id = 0;
		for (size_t i = 0; ai != NULL && i < sizeof(a->heap) / sizeof(a->heap[0]); i++)
			if (a->heap[i] == NULL) {
				a->heap[i] = ai;   /* one block */
				s->agents = ai;
				s->n_agents = nai;
				ai = NULL;
			}
		free(ai);
	}
	{
		Kiln__SubscriptionInfo **si;
		size_t nsi;
		if (events_subs_info(d->events, &si, &nsi) != 0)
			return KILN_ENOMEM;
		for (size_t i = 0; i < nsi; i++)
			si[i]->dashboard = si[i]->client >= UI_PIPE_BASE;
		if (heap_keep(a, si) != 0)
			return KILN_ENOMEM;
		s->subscriptions = si;
		s->n_subscriptions = nsi;
	}
	if (status_store(d, a, s) != 0)
		return KILN_ENOMEM;
	s->listen = (char **)urls;
	a->reply.body_case = KILN__REPLY__BODY_STATUS_REPLY;
	a->reply.status_reply = s;
	return 0;
}

static int
h_stop(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
       struct ev_waiter *w)
{
	(void)w;
	kilnd_log(d, KILND_INFO, "stop requested by client %u", c->pipe);
	a->after_stop = 1;
	return 0;
}

/* Hold or release change reports for this connection (changes.h): a hold
 * ends with its connection too (server.c). */
static int
h_hold(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
       struct ev_waiter *w)
{
	const Kiln__HoldRequest *q = c->req->hold;
	int rv;

	(void)w;
	if (q->query) {
		kiln__hold_reply__init(&a->body.hold);
		a->body.hold.held = changes_held(d->changes, c->pipe);
		a->reply.body_case = KILN__REPLY__BODY_HOLD_REPLY;
		a->reply.hold_reply = &a->body.hold;
		return 0;
	}
	if (q->release_all) {
		changes_hold(d->changes, 0, 0);
		return 0;
	}
	if ((rv = changes_hold(d->changes, c->pipe, !q->release)) != 0)
		return refuse(a, rv, "%u connections hold change reports already",
		              CHANGES_MAX_HOLDS);
	/* a connection that closed meanwhile must not keep holding */
	if (!q->release && !server_pipe_open(d, c->pipe))
		changes_hold(d->changes, c->pipe, 0);
	return 0;
}

/* ---- blobs --------------------------------------------------------------- */

static int
h_blob_has(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
           struct ev_waiter *w)
{
	const Kiln__BlobHasRequest *q = c->req->blob_has;
	Kiln__BlobHasReply *r = &a->body.has;
	kiln_id id;
	int rv;

	(void)w;
	if (q->n_ids > KILN_HAS_MAX)
		return refuse(a, KILN_ERANGE, "%zu ids asked; at most %d per request",
		              q->n_ids, KILN_HAS_MAX);
	kiln__blob_has_reply__init(r);
	if ((r->present = heap_alloc(a, q->n_ids, sizeof(*r->present))) == NULL ||
	    (r->sizes = heap_alloc(a, q->n_ids, sizeof(*r->sizes))) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < q->n_ids; i++) {
		if (kiln_proto_id_get(q->ids[i], &id) != 0)
			return refuse(a, KILN_EINVAL, "id %zu is not 16 bytes", i);
		rv = kiln_store_has(d->store, &id, &r->sizes[i]);
		if (rv != 0 && rv != KILN_ENOTFOUND)
			return rv;
		r->present[i] = rv == 0;
	}
	r->n_present = r->n_sizes = q->n_ids;
	a->reply.body_case = KILN__REPLY__BODY_BLOB_HAS_REPLY;
	a->reply.blob_has_reply = r;
	return 0;
}

/* The blob a BlobGetRequest names: its id, or what the index maps
 * (profile, url) to. */
static int
get_resolve(struct kilnd *d, const Kiln__BlobGetRequest *q,
            struct kilnd_answer *a)
{
	int rv;

	if (q->id.len > 0) {
		if (kiln_proto_id_get(q->id, &a->id) != 0)
			return refuse(a, KILN_EINVAL, "the blob id is not 16 bytes");
		return 0;
	}
	if (kiln_profile_check(q->profile) != 0 || kiln_url_check(q->url) != 0)
		return refuse(a, KILN_EINVAL, "neither an id nor a valid profile "
		              "and URL");
	if ((rv = kiln_store_index_get(d->store, q->profile, q->url, &a->id)) != 0)
		return refuse(a, rv, "%s: no such URL in profile %s", q->url,
		              q->profile);
	return 0;
}

static int
h_blob_get(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
           struct ev_waiter *w)
{
	const Kiln__BlobGetRequest *q = c->req->blob_get;
	Kiln__BlobGetReply *r = &a->body.get;
	struct stat st;
	uint64_t size, len;
	int rv;

	(void)w;
	if ((rv = get_resolve(d, q, a)) != 0)
		return rv;
	/* an agent reads the inputs of steps agents hold, nothing else of
	 * the store (a name in the index is never an input: refused too) */
	if (call_role(d, c) == ROLE_AGENT &&
	    ((q->url != NULL && q->url[0] != '\0') || !engine_agent_blob_wanted(d->engine, &a->id)))
		return refuse(a, KILN_EAUTH, "the agent token may only read the inputs "
		              "of steps agents hold");
	if ((rv = kiln_store_open_blob(d->store, &a->id, &a->fd)) != 0)
		return rv;
	if (fstat(a->fd, &st) != 0)
		return KILN_EIO;
	size = (uint64_t)st.st_size;
	if (q->offset > size)
		return refuse(a, KILN_EINVAL, "offset %" PRIu64 " is past the end "
		              "of the blob (%" PRIu64 " bytes)", q->offset, size);
	if (q->verify && (rv = verified_check(d->verified, &a->id, a->fd, &st)) != 0)
		return rv;
	len = q->length > 0 && q->length < d->chunk_size ? q->length :
	                                                   d->chunk_size;
	if (len > size - q->offset)
		len = size - q->offset;
	a->fd_off = q->offset;
	a->fd_len = len;
	kiln__blob_get_reply__init(r);
	r->id = kiln_proto_id_ref(&a->id);
	r->size = size;
	r->offset = q->offset;
	a->reply.body_case = KILN__REPLY__BODY_BLOB_GET_REPLY;
	a->reply.blob_get_reply = r;
	return 0;
}

/* Tell subscribers about a published blob. */
static void
blob_stored(struct kilnd *d, const Kiln__BlobPutRequest *q,
            const struct upload_done *done)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__BlobStored b = KILN__BLOB_STORED__INIT;

	b.id = kiln_proto_id_ref(&done->id);
	b.size = done->size;
	b.profile = q->url[0] ? q->profile : "";
	b.url = q->url;
	e.kind_case = KILN__EVENT__KIND_BLOB_STORED;
	e.blob_stored = &b;
	events_publish(d->events, &e); /* nothing to do if it fails */
}

static int
h_blob_put(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
           struct ev_waiter *w)
{
	const Kiln__BlobPutRequest *q = c->req->blob_put;
	Kiln__BlobPutReply *r = &a->body.put;
	struct upload_from from;
	int rv;

	(void)w;
	if (c->ndata > d->chunk_size)
		return refuse(a, KILN_ERANGE, "a chunk of %zu bytes; at most %u",
		              c->ndata, d->chunk_size);
	kiln__blob_put_reply__init(r);
	from.pipe = c->pipe;
	from.remote = c->remote;
	from.max_bytes = 0;
	from.agent_max = 0;
	if (call_role(d, c) == ROLE_AGENT) {
		/* what the steps agents hold may upload, one at least */
		from.max_bytes = d->cfg.agent_upload_max;
		from.agent_max = d->engine ? engine_agent_upload_room(d->engine) : 0;
		if (from.agent_max == 0)
			from.agent_max = 1;
	}
	rv = uploads_put(d->uploads, &from, q, c->data, c->ndata, r, &a->done);
	if (a->done.committed)
		blob_stored(d, q, &a->done);
	if (rv == 0 && !q->commit && !server_pipe_open(d, c->pipe)) {
		/* The client left while we wrote: its upload would wait out
		 * --upload-idle otherwise (server_pipe_open says why here). */
		uploads_pipe_closed(d->uploads, c->pipe);
		return KILN_ECLOSED;
	}
	if (rv == KILN_ECORRUPT)
		return refuse(a, rv, "the uploaded bytes do not hash to the claimed "
		              "id; nothing was stored");
	if (rv == KILN_ERANGE)
		return refuse(a, rv, "an agent's upload may be at most %" PRIu64
		              " bytes (kilnd --agent-upload-max); nothing was stored",
		              from.max_bytes);
	if (rv == KILN_EBUSY && c->remote && q->upload == 0)
		return refuse(a, rv, "no upload slot free for this connection: a "
		              "remote connection may hold %u uploads at once, remote "
		              "ones %u in all (the rest are kept for local requests)%s",
		              uploads_pipe_max(d->cfg.max_uploads),
		              uploads_remote_max(d->cfg.max_uploads), from.agent_max
		              ? ", and the agent role as many as the steps agents "
		              "hold may upload" : "");
	if (rv != 0)
		return rv;
	a->reply.body_case = KILN__REPLY__BODY_BLOB_PUT_REPLY;
	a->reply.blob_put_reply = r;
	return 0;
}

/* ---- events -------------------------------------------------------------- */

/* A snapshot's subscription, taken under the engine's lock
 * (engine_snapshot's at): the stream's cursor is the snapshot's moment. */
struct snap_sub {
	struct kilnd *d;
	const struct kilnd_call *c;
	struct ev_filter *f;     /* NULL once events_subscribe took it */
	Kiln__SubscribeReply *rep;
	int rv;
};

static void
snap_subscribe(void *arg)
{
	struct snap_sub *ss = arg;

	ss->rv = events_subscribe(ss->d->events, ss->c->pipe, ss->c->req->subscribe,
	                          ss->f, ss->rep);
	ss->f = NULL;
}

static int
snap_pass(void *arg, const char *profile, const char *url)
{
	return evfilter_pass_step(((struct snap_sub *)arg)->f, profile, url);
}

/* Subscribe with a snapshot (SubscribeRequest.snapshot): the steps f
 * passes, taken at the cursor the subscription starts from, kept as
 * pages for its polls. A project that cannot be loaded gives an empty
 * snapshot saying why, and the subscription still opens. */
static int
subscribe_snapshot(struct kilnd *d, const struct kilnd_call *c,
                   struct kilnd_answer *a, struct ev_filter *f)
{
	struct snap_sub ss = {d, c, f, &a->body.sub, 0};
	struct engine_snap *snap = NULL;
	struct ev_pages *pages = NULL;
	const char *profile;
	char *const *urls;
	size_t nurls;
	char *why;
	int rv;

	if ((why = heap_alloc(a, 1, 4096)) == NULL) {
		evfilter_free(f);
		return KILN_ENOMEM;
	}
	evfilter_describe(f, &profile, &urls, &nurls);
	rv = engine_snapshot(d->engine, profile, snap_pass, &ss, snap_subscribe, &ss,
	                     &snap, why, 4096);
	if (rv == KILN_ENOMEM) {
		evfilter_free(ss.f);
		return rv;
	}
	if (rv != 0) { /* no snapshot: say why, subscribe all the same */
		if (why[0] == '\0')
			snprintf(why, 4096, "%s", kiln_strerror(rv));
		a->body.sub.snapshot_error = why;
		return events_subscribe(d->events, c->pipe, c->req->subscribe, ss.f,
		                        &a->body.sub);
	}
	if (ss.rv == 0 &&
	    (rv = evsnap_pages(snap, d->store, a->body.sub.epoch,
	                       a->body.sub.after_seq,
	                       kiln_proto_chunk_max(KILN_MAX_MESSAGE_MIN),
	                       KILN_POLL_MAX_EVENTS, &pages)) == 0 && pages != NULL) {
		int held = events_snapshot_attach(d->events, c->pipe,
		                                  a->body.sub.subscription, pages);
		if (held == 0) {
			a->body.sub.snapshot_pages = pages->n;
			a->body.sub.snapshot_steps = pages->steps;
		} else if (held == KILN_EBUSY) {
			snprintf(why, 4096, "the daemon holds as many snapshots as it "
			         "may (%u MiB) for clients still reading them; "
			         "subscribe again later", EVENTS_SNAP_MAX_BYTES >> 20);
			a->body.sub.snapshot_error = why;
		} /* else evicted already: its first poll says so */
		if (held != 0)
			evsnap_free(pages);
	}
	engine_snap_free(snap);
	if (rv != 0) { /* no memory for the pages: no subscription either */
		if (ss.rv == 0)
			events_unsubscribe(d->events, c->pipe, a->body.sub.subscription);
		return rv;
	}
	return ss.rv;
}

static int
h_subscribe(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w)
{
	struct ev_filter *f;
	int rv;

	(void)w;
	/* Compiled here, outside the events lock: globs cost more to compile
	 * than to match. */
	if ((rv = evfilter_new(c->req->subscribe, &f, a->error,
	                       sizeof(a->error))) != 0)
		return rv;
	kiln__subscribe_reply__init(&a->body.sub);
	/* a snapshot for a fresh subscription only: a resuming one gets the
	 * events it missed instead */
	if (c->req->subscribe->snapshot && c->req->subscribe->epoch == 0 &&
	    d->engine != NULL)
		rv = subscribe_snapshot(d, c, a, f);
	else
		rv = events_subscribe(d->events, c->pipe, c->req->subscribe, f,
		                      &a->body.sub);
	if (rv == KILN_EBUSY)
		return refuse(a, rv, "subscriptions are off (--max-subscribers "
		              "%u)", d->cfg.max_subscribers);
	if (rv != 0)
		return rv;
	if (!server_pipe_open(d, c->pipe)) { /* nobody would ever close it */
		events_pipe_closed(d->events, c->pipe);
		return KILN_ECLOSED;
	}
	a->reply.body_case = KILN__REPLY__BODY_SUBSCRIBE_REPLY;
	a->reply.subscribe_reply = &a->body.sub;
	return 0;
}

static int
h_unsubscribe(struct kilnd *d, const struct kilnd_call *c,
              struct kilnd_answer *a, struct ev_waiter *w)
{
	(void)a, (void)w;
	return events_unsubscribe(d->events, c->pipe,
	                          c->req->unsubscribe->subscription);
}

/* A poll, parking it on w when it has to wait (w may be NULL). */
static int
poll_answer(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w)
{
	Kiln__PollRequest q = *c->req->poll;
	uint32_t park_ms;
	int rv;

	if (q.wait_ms > KILN_POLL_MAX_WAIT_MS)
		q.wait_ms = KILN_POLL_MAX_WAIT_MS;
	/* stopping: answered at once, so that the stop's wait for parked
	 * polls (server_stop) ends */
	if (atomic_load(&d->stopping))
		w = NULL;
	/* Replies small enough for a client with the smallest message limit. */
	rv = events_poll(d->events, c->pipe, &q,
	                 kiln_proto_chunk_max(KILN_MAX_MESSAGE_MIN), w, &park_ms,
	                 &a->bytes, &a->nbytes);
	if (rv == EVENTS_PARKED) {
		a->kind = ANSWER_PARK;
		a->wait_ms = park_ms;
		return 0;
	}
	if (rv == KILN_ERANGE)
		return refuse(a, KILN_EINVAL, "no page %u in this subscription's "
		              "snapshot (read, or none asked)", q.snapshot_page);
	if (rv == KILN_EINVAL)
		return refuse(a, rv, "the cursor is ahead of the newest event");
	if (rv == KILN_ENOTFOUND)
		return refuse(a, rv, "no such subscription on this connection "
		              "(subscribe again, with the last seq to resume)");
	if (rv == 0)
		a->kind = ANSWER_BYTES;
	return rv;
}

static int
h_poll(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
       struct ev_waiter *w)
{
	return poll_answer(d, c, a, w);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef int (*handler_fn)(struct kilnd *d, const struct kilnd_call *c,
                          struct kilnd_answer *a, struct ev_waiter *w);

static const struct handler {
	Kiln__Request__BodyCase body;
	handler_fn fn;
} handlers[] = {
	{KILN__REQUEST__BODY_STATUS, h_status},
	{KILN__REQUEST__BODY_STOP, h_stop},
	{KILN__REQUEST__BODY_UI, h_ui},
	{KILN__REQUEST__BODY_HOLD, h_hold},
	{KILN__REQUEST__BODY_BLOB_HAS, h_blob_has},
	{KILN__REQUEST__BODY_BLOB_GET, h_blob_get},
	{KILN__REQUEST__BODY_BLOB_PUT, h_blob_put},
	{KILN__REQUEST__BODY_SUBSCRIBE, h_subscribe},
	{KILN__REQUEST__BODY_UNSUBSCRIBE, h_unsubscribe},
	{KILN__REQUEST__BODY_POLL, h_poll},
	{KILN__REQUEST__BODY_BUILD, h_build},
	{KILN__REQUEST__BODY_CANCEL, h_cancel},
	{KILN__REQUEST__BODY_BUILD_STATUS, h_build_status},
	{KILN__REQUEST__BODY_WHY, h_why},
	{KILN__REQUEST__BODY_AUDIT, h_audit},
	{KILN__REQUEST__BODY_DEPS, h_deps},
	{KILN__REQUEST__BODY_RDEPS, h_rdeps},
	{KILN__REQUEST__BODY_NEED, h_need},
	{KILN__REQUEST__BODY_AGENT_HELLO, h_agent_hello},
	{KILN__REQUEST__BODY_AGENT_TAKE, h_agent_take},
	{KILN__REQUEST__BODY_AGENT_DONE, h_agent_done},
};

/* The role a request acts in: admin over the ipc socket (private to the
 * daemon's user), else the one its token grants (roles.c). */
static enum kilnd_role
call_role(const struct kilnd *d, const struct kilnd_call *c)
{
	return c->remote ? role_of_token(d->tokens, c->req->token) : ROLE_ADMIN;
}

/* The request's type for the permission table: its body, or, for an
 * agent request this daemon does not know yet (an unknown field in the
 * agents' range), that field's number, so that the client role is told
 * it may not send one rather than that it is unsupported. Any other
 * unknown type runs nothing whoever sends it (UNSUPPORTED): NOT_SET. */
static Kiln__Request__BodyCase
request_type(const Kiln__Request *q)
{
	if (q->body_case != KILN__REQUEST__BODY__NOT_SET)
		return q->body_case;
	for (size_t i = 0; i < q->base.n_unknown_fields; i++)
		if (q->base.unknown_fields[i].tag >= ROLE_AGENT_FIRST &&
		    q->base.unknown_fields[i].tag <= ROLE_AGENT_LAST)
			return (Kiln__Request__BodyCase)q->base.unknown_fields[i].tag;
	return KILN__REQUEST__BODY__NOT_SET;
}

/* Refuse what role r may not send, naming both. */
static int
refuse_role(struct kilnd_answer *a, enum kilnd_role r,
            Kiln__Request__BodyCase body)
{
	const char *name = kiln_proto_request_name(body);

	if (strcmp(name, "unknown") == 0) /* an agent request named elsewhere */
		return refuse(a, KILN_EAUTH, "the %s token may not send request "
		              "type %d", role_name(r), (int)body);
	return refuse(a, KILN_EAUTH, "the %s token may not send '%s'",
	              role_name(r), name);
}

/* The handler for the request, or why there is none. */
static int
route(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
      handler_fn *fn)
{
	const Kiln__Request *q = c->req;
	enum kilnd_role role = call_role(d, c);
	Kiln__Request__BodyCase type;

	if (role == ROLE_NONE)
		return refuse(a, KILN_EAUTH, "this listener needs the token of a "
		              "role (kilnd's --token-file, --agent-token-file or "
		              "--admin-token-file)");
	if (q->version != KILN_PROTO_VERSION)
		return refuse(a, KILN_EVERSION, "protocol version %u; this daemon "
		              "speaks %d", q->version, KILN_PROTO_VERSION);
	if ((type = request_type(q)) != KILN__REQUEST__BODY__NOT_SET &&
	    !role_allows(role, type))
		return refuse_role(a, role, type);
	/* Polls still answer, so that subscribers hear the Stopping event. */
	if (atomic_load(&d->stopping) && q->body_case != KILN__REQUEST__BODY_POLL)
		return refuse(a, KILN_ECLOSED, "the daemon is stopping");
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].body == q->body_case) {
			*fn = handlers[i].fn;
			return 0;
		}
	if (q->base.n_unknown_fields > 0)
		return refuse(a, KILN_ENOTSUP, "unknown request type (field %u)",
		              q->base.unknown_fields[0].tag);
	return refuse(a, KILN_ENOTSUP, "no request in the envelope");
}

/* The store found its database file cut short under the daemon
 * (kiln_store_damaged: the file was truncated or copied over while open).
 * The store refuses every read and write of it from then on, so that
 * nothing more is read from a file that no longer holds the records nor
 * written into one whose tree now points past its end; the daemon stops
 * serving: every request but stop is answered with this (a build running
 * fails as its steps meet the store), the log says it once, and the
 * daemon goes on refusing until told to stop. Staying up rather than
 * exiting lets `kiln status` and every other command say what happened
 * (a daemon started on the file after this refuses to start, with the
 * same advice: main.c store_open). Returns 0, or KILN_EDBCHANGED with
 * a->error set. */
static int
store_damaged(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a)
{
	int expected = 0, rv = kiln_store_damaged(d->store);

	if (rv == 0 || c->req->body_case == KILN__REQUEST__BODY_STOP)
		return 0;
	snprintf(a->error, sizeof a->error, "%s/db/data.mdb was cut short while "
	         "kilnd had it open: the daemon stopped using it and refuses every "
	         "request; run 'kiln stop', then 'kiln fsck --repair' to set it "
	         "aside and start a new database", d->store_dir);
	if (atomic_compare_exchange_strong(&d->damage_logged, &expected, 1))
		kilnd_log(d, KILND_ERROR, "%s", a->error);
	return rv;
}

/* Fill the reply's status from rv (and a->error). */
static void
reply_status(struct kilnd *d, const struct kilnd_call *c,
             struct kilnd_answer *a, int rv)
{
	a->reply.status = kiln_proto_status_of(rv);
	if (rv == 0)
		return;
	if (a->error[0] == '\0')
		snprintf(a->error, sizeof(a->error), "%s", kiln_strerror(rv));
	a->reply.error = a->error;
	a->reply.body_case = KILN__REPLY__BODY__NOT_SET;
	if (rv == KILN_EAUTH || rv == KILN_EVERSION || rv == KILN_ENOTSUP) {
		atomic_fetch_add(&d->bad_requests, 1);
		/* Anyone who can connect can cause these: a line a second. */
		kilnd_log_limited(d, &d->refused_log, KILND_WARNING, "refused a "
		                  "%s request from client %u: %s",
		                  kiln_proto_request_name(c->req->body_case), c->pipe,
		                  a->error);
	}
}

void
handle_request(struct kilnd *d, const struct kilnd_call *c,
               struct kilnd_answer *a, struct ev_waiter *w)
{
	handler_fn fn = NULL;
	int rv;

	a->fd = -1;
	a->kind = ANSWER_REPLY;
	kiln_proto_reply_init(&a->reply);
	atomic_fetch_add(&d->requests, 1);
	/* routed first: a request without a role's token hears nothing of
	 * the store */
	if ((rv = route(d, c, a, &fn)) == 0 && (rv = store_damaged(d, c, a)) == 0) {
		rv = fn(d, c, a, w);
		/* found while this request was handled: its answer may rest on
		 * what the store could no longer read (a parked poll stays
		 * parked: its waiter is registered, and handle_poll_again
		 * refuses it) */
		if ((rv == 0 && a->kind != ANSWER_PARK) || rv == KILN_EDBCHANGED) {
			int dmg = store_damaged(d, c, a);
			rv = dmg != 0 ? dmg : rv;
		}
	}
	if (rv != 0) {
		answer_release(a);
		a->kind = ANSWER_REPLY;
	}
	reply_status(d, c, a, rv);
}

void
handle_poll_again(struct kilnd *d, const struct kilnd_call *c,
                  struct kilnd_answer *a)
{
	int rv;

	a->fd = -1;
	a->kind = ANSWER_REPLY;
	kiln_proto_reply_init(&a->reply);
	if ((rv = store_damaged(d, c, a)) == 0)
		rv = c->req->body_case == KILN__REQUEST__BODY_AGENT_TAKE ?
		     take_answer(d, c, a, NULL) : poll_answer(d, c, a, NULL);
	if (rv == 0 && (rv = store_damaged(d, c, a)) != 0) {
		answer_release(a);
		a->kind = ANSWER_REPLY;
	}
	reply_status(d, c, a, rv);
}

void
answer_release(struct kilnd_answer *a)
{
	for (size_t i = 0; i < sizeof(a->heap) / sizeof(a->heap[0]); i++) {
		free(a->heap[i]);
		a->heap[i] = NULL;
	}
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	a->fd_len = 0;
	free(a->bytes);
	a->bytes = NULL;
	a->nbytes = 0;
}
