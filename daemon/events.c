/* events.c — the event ring, subscriptions and parked polls.
 *
 * Threads: every function may be called from any thread: the handler
 * threads (jobs.c), nng's threads (server.c's callbacks: a connection
 * closed, a parked poll's sleep ended) and the main thread; one mutex
 * (ev->mu) guards everything below,
 * including the waiters while they are parked. Waiters' wake callbacks run
 * under it and only cancel an nng timer (which never calls back in place).
 *
 * The ring holds decoded copies of the last events (seq head-count+1 ..
 * head), each with its encoded size; a poll reply is encoded under the lock
 * straight from them. Memory is bounded by max_events and max_bytes
 * whatever the number of clients: a client costs one subscription slot.
 *
 * Filters (evfilter.h). A filtered subscription is sent only the events its
 * filter passes; its cursor still moves over the others (PollReply.through)
 * and a parked poll wakes only for an event it passes. What a filter left
 * out is never reported lost: the ring judges each event it drops against
 * every filtered subscription (sub.lost_pass), so a poll whose cursor the
 * ring has moved past gets an Overflow only if an event it would have been
 * sent is gone. That judgement covers the events published while the
 * subscription was open; older ones (a resumed subscription's) count as
 * lost when dropped, as they do unfiltered. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "events.h"
#include "evfilter.h"
#include "evsnap.h"
#include "kiln_clock.h"

struct ring_entry {
	Kiln__Event *e; /* owned, from protobuf_c_message_unpack */
	size_t bytes;   /* its encoded size */
};

struct sub {
	uint64_t id;    /* 0: free slot */
	uint32_t pipe;
	int64_t last_reply_ns;    /* its last poll reply with events */
	struct ev_waiter *waiter; /* its parked poll, or NULL */
	struct ev_filter *filter; /* owned; NULL: every event */
	uint64_t opened_at;       /* the newest seq when it subscribed */
	uint64_t lost_pass;       /* the newest seq after opened_at that the
	                           * ring dropped and filter passes (0: none) */
	struct ev_pages *snap;    /* owned: its snapshot's pages, until its
	                           * client polls for events (NULL: none) */
	uint64_t sent_through;    /* its last reply accounted for events up to
	                           * this seq, of this epoch (events_all_sent) */
};

/* How many evicted subscriptions are remembered, so that their next poll
 * says "evicted" rather than a bare NOT_FOUND (after which libkiln would
 * quietly subscribe again and evict the next one). */
#define EVICTED_REMEMBER 64

struct evicted {
	uint64_t id;    /* 0: none */
	uint32_t pipe;
};

struct kilnd_events {
	pthread_mutex_t mu;
	uint64_t epoch;
	uint64_t head;               /* seq of the newest event, 0: none */
	uint32_t cap, count, first;  /* ring of cap entries from index first */
	uint64_t bytes, max_bytes;
	struct ring_entry *ring;
	struct sub *subs;
	uint32_t max_subs, nsubs;
	uint64_t next_sub;
	struct ev_waiter *parked;
	struct evicted evicted[EVICTED_REMEMBER]; /* a ring, newest at next */
	uint32_t next_evicted;
	uint64_t snap_bytes, snap_max; /* snapshots' pages held, and the cap */
};

static uint64_t
random64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint64_t)time(NULL) * 2654435761u; /* still unique enough */
	return v ? v : 1;
}

int
events_new(uint32_t max_events, uint64_t max_bytes, uint32_t max_subs,
           struct kilnd_events **evp)
{
	struct kilnd_events *ev = calloc(1, sizeof(*ev));

	*evp = NULL;
	if (ev == NULL)
		return KILN_ENOMEM;
	ev->cap = max_events ? max_events : 1;
	ev->max_bytes = max_bytes;
	ev->max_subs = max_subs;
	ev->snap_max = EVENTS_SNAP_MAX_BYTES;
	ev->ring = calloc(ev->cap, sizeof(*ev->ring));
	ev->subs = calloc(max_subs ? max_subs : 1, sizeof(*ev->subs));
	if (ev->ring == NULL || ev->subs == NULL) {
		free(ev->ring);
		free(ev->subs);
		free(ev);
		return KILN_ENOMEM;
	}
	pthread_mutex_init(&ev->mu, NULL);
	ev->epoch = random64();
	ev->next_sub = random64() & 0xffffffff00000000u;
	*evp = ev;
	return 0;
}

/* Drop the oldest event, noting it in each filtered subscription that
 * would have been sent it (see the top). */
static void
ring_pop(struct kilnd_events *ev)
{
	struct ring_entry *r = &ev->ring[ev->first];
	uint64_t seq = ev->head - ev->count + 1;

	for (uint32_t i = 0; i < ev->max_subs; i++) {
		struct sub *s = &ev->subs[i];
		if (s->id != 0 && s->filter != NULL && seq > s->opened_at &&
		    evfilter_pass(s->filter, r->e))
			s->lost_pass = seq;
	}
	ev->bytes -= r->bytes;
	kiln__event__free_unpacked(r->e, NULL);
	r->e = NULL;
	ev->first = (ev->first + 1) % ev->cap;
	ev->count--;
}

void
events_free(struct kilnd_events *ev)
{
	if (ev == NULL)
		return;
	while (ev->count > 0)
		ring_pop(ev);
	for (uint32_t i = 0; i < ev->max_subs; i++) {
		evfilter_free(ev->subs[i].filter);
		evsnap_free(ev->subs[i].snap);
	}
	pthread_mutex_destroy(&ev->mu);
	free(ev->ring);
	free(ev->subs);
	free(ev);
}

/* Free s's snapshot pages, if any. Lock held. */
static void
sub_snap_drop(struct kilnd_events *ev, struct sub *s)
{
	if (s->snap == NULL)
		return;
	ev->snap_bytes -= s->snap->bytes;
	evsnap_free(s->snap);
	s->snap = NULL;
}

/* Take w off the parked list and off its subscription. Lock held. */
static void
waiter_unlink(struct kilnd_events *ev, struct ev_waiter *w)
{
	struct ev_waiter **pp;

	for (pp = &ev->parked; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].waiter == w)
			ev->subs[i].waiter = NULL;
	w->next = NULL;
	w->parked = 0;
}

/* Unlink w and wake it: it must answer now. Lock held. */
static void
waiter_wake(struct kilnd_events *ev, struct ev_waiter *w)
{
	waiter_unlink(ev, w);
	w->woken = 1;
	w->wake(w);
}

static struct sub *sub_of(struct kilnd_events *ev, uint64_t id);

/* Wake every parked waiter whose subscription e passes (all of them when
 * e is NULL); a gathering one only when urgent. Lock held. */
static void
wake_all_locked(struct kilnd_events *ev, const Kiln__Event *e, int urgent)
{
	struct ev_waiter **pp = &ev->parked;
	struct sub *s;

	while (*pp != NULL)
		if ((urgent || !(*pp)->gathering) &&
		    (e == NULL || (s = sub_of(ev, (*pp)->sub)) == NULL ||
		     evfilter_pass(s->filter, e)))
			waiter_wake(ev, *pp);   /* unlinks it */
		else
			pp = &(*pp)->next;
}

/* Whether an event must reach gathering polls at once: anything but the
 * stream of step starts and results and log lines. */
static int
event_urgent(const Kiln__Event *e)
{
	return e->kind_case != KILN__EVENT__KIND_STEP &&
	       e->kind_case != KILN__EVENT__KIND_STEP_STARTED &&
	       e->kind_case != KILN__EVENT__KIND_LOG;
}

/* Encode e (seq and time set) and keep a decoded copy of it. */
static int
ring_push(struct kilnd_events *ev, const Kiln__Event *e)
{
	uint8_t *buf;
	size_t len;
	Kiln__Event *copy;
	int rv;

	if ((rv = kiln_proto_pack_alloc(&e->base, &buf, &len)) != 0)
		return rv;
	if (len > ev->max_bytes) {
		free(buf);
		return KILN_ERANGE;
	}
	copy = kiln__event__unpack(NULL, len, buf);
	free(buf);
	if (copy == NULL)
		return KILN_ENOMEM;
	while (ev->count > 0 && (ev->count == ev->cap ||
	                         ev->bytes + len > ev->max_bytes))
		ring_pop(ev);
	ev->ring[(ev->first + ev->count) % ev->cap] =
		(struct ring_entry){.e = copy, .bytes = len};
	ev->count++;
	ev->bytes += len;
	return 0;
}

int
events_publish(struct kilnd_events *ev, Kiln__Event *e)
{
	struct timespec ts;
	int rv;

	clock_gettime(CLOCK_REALTIME, &ts);
	e->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	pthread_mutex_lock(&ev->mu);
	e->seq = ev->head + 1;
	if ((rv = ring_push(ev, e)) == 0) {
		ev->head++;
		wake_all_locked(ev, e, event_urgent(e));
	}
	pthread_mutex_unlock(&ev->mu);
	return rv;
}

/* The slot of subscription id opened on pipe, or NULL. Lock held. */
static struct sub *
sub_find(struct kilnd_events *ev, uint32_t pipe, uint64_t id)
{
	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].id == id && id != 0 && ev->subs[i].pipe == pipe)
			return &ev->subs[i];
	return NULL;
}

/* The slot of subscription id, or NULL. Lock held. */
static struct sub *
sub_of(struct kilnd_events *ev, uint64_t id)
{
	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].id == id && id != 0)
			return &ev->subs[i];
	return NULL;
}

static void sub_close(struct kilnd_events *ev, struct sub *s);
static struct sub *sub_evict_oldest(struct kilnd_events *ev);

int
events_subscribe(struct kilnd_events *ev, uint32_t pipe,
                 const Kiln__SubscribeRequest *req, struct ev_filter *filter,
                 Kiln__SubscribeReply *rep)
{
	struct sub *s = NULL;
	int rv = KILN_EBUSY;

	pthread_mutex_lock(&ev->mu);
	for (uint32_t i = 0; i < ev->max_subs && s == NULL; i++)
		if (ev->subs[i].id == 0)
			s = &ev->subs[i];
	if (s == NULL)
		s = sub_evict_oldest(ev);
	if (s != NULL) {
		*s = (struct sub){.id = ++ev->next_sub, .pipe = pipe,
		                  .filter = filter, .opened_at = ev->head};
		filter = NULL;
		ev->nsubs++;
		rep->subscription = s->id;
		rep->epoch = ev->epoch;
		/* A fresh subscriber starts from now; a resuming one keeps its
		 * cursor (its first poll reports what was lost, if anything). */
		rep->after_seq = req->epoch == 0 ? ev->head : req->after_seq;
		rv = 0;
	}
	pthread_mutex_unlock(&ev->mu);
	evfilter_free(filter); /* not taken: no slot */
	return rv;
}

/* Free slot s, waking its parked poll. Lock held. */
static void
sub_close(struct kilnd_events *ev, struct sub *s)
{
	if (s->waiter != NULL)
		waiter_wake(ev, s->waiter);
	evfilter_free(s->filter);
	sub_snap_drop(ev, s);
	*s = (struct sub){0};
	ev->nsubs--;
}

/* Make room for a new subscription: close the oldest one (the smallest
 * id: ids only grow), remembering it so that its client learns why.
 * A crowd of idle watchers must not lock out `kiln build`, which
 * subscribes to follow its own build. Returns the freed slot, or NULL
 * when there is none at all (max_subs 0). Lock held. */
static struct sub *
sub_evict_oldest(struct kilnd_events *ev)
{
	struct sub *old = NULL;

	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].id != 0 && (old == NULL || ev->subs[i].id < old->id))
			old = &ev->subs[i];
	if (old == NULL)
		return NULL;
	ev->evicted[ev->next_evicted] = (struct evicted){old->id, old->pipe};
	ev->next_evicted = (ev->next_evicted + 1) % EVICTED_REMEMBER;
	sub_close(ev, old); /* its parked poll answers: "evicted" */
	return old;
}

/* Whether subscription id of pipe was evicted; forgets it (one client
 * hears it once). Lock held. */
static int
evicted_take(struct kilnd_events *ev, uint32_t pipe, uint64_t id)
{
	for (uint32_t i = 0; i < EVICTED_REMEMBER; i++)
		if (ev->evicted[i].id == id && id != 0 && ev->evicted[i].pipe == pipe) {
			ev->evicted[i] = (struct evicted){0};
			return 1;
		}
	return 0;
}

int
events_unsubscribe(struct kilnd_events *ev, uint32_t pipe, uint64_t id)
{
	struct sub *s;
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&ev->mu);
	if ((s = sub_find(ev, pipe, id)) != NULL) {
		sub_close(ev, s);
		rv = 0;
	}
	pthread_mutex_unlock(&ev->mu);
	return rv;
}

void
events_pipe_closed(struct kilnd_events *ev, uint32_t pipe)
{
	pthread_mutex_lock(&ev->mu);
	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].id != 0 && ev->subs[i].pipe == pipe)
			sub_close(ev, &ev->subs[i]);
	pthread_mutex_unlock(&ev->mu);
}

/* The Overflow event telling a client that events first..last are lost
 * (reason BEHIND) or that the daemon is a new instance (NEW_EPOCH). */
static void
overflow_fill(Kiln__Event *e, Kiln__Overflow *o, Kiln__Overflow__Reason why,
              uint64_t first, uint64_t last)
{
	kiln__event__init(e);
	kiln__overflow__init(o);
	o->reason = why;
	o->first_lost = first;
	o->last_lost = last;
	e->seq = last;
	e->kind_case = KILN__EVENT__KIND_OVERFLOW;
	e->overflow = o;
}

/* The held event seq (oldest <= seq <= head). Lock held. */
static const Kiln__Event *
ring_at(const struct kilnd_events *ev, uint64_t seq)
{
	uint64_t oldest = ev->head - ev->count + 1;

	return ev->ring[(ev->first + (seq - oldest)) % ev->cap].e;
}

/* Where a poll of s after seq `after` (this epoch) really stands: past
 * the events the ring dropped since, when s's filter would have passed
 * none of them (see the top), so that it is not told it lost them. Lock
 * held. */
static uint64_t
cursor_of(const struct kilnd_events *ev, const struct sub *s, uint64_t after)
{
	uint64_t oldest = ev->head - ev->count + 1;

	if (s->filter != NULL && after + 1 < oldest && after >= s->opened_at &&
	    s->lost_pass <= after)
		return oldest - 1;
	return after;
}

/* Encode the reply to a poll of s after cursor (epoch, after): an
 * Overflow first if events were lost, then the held events s's filter
 * passes, up to max / max_bytes, and how far that got (through). Lock
 * held. */
static int
reply_pack(struct kilnd_events *ev, struct sub *s,
           const Kiln__PollRequest *req, size_t max_bytes, uint8_t **buf,
           size_t *len)
{
	uint64_t oldest = ev->head - ev->count + 1, after = req->after_seq;
	uint32_t max = req->max_events ? req->max_events : KILN_POLL_MAX_EVENTS;
	Kiln__Event over, **list;
	Kiln__Overflow o;
	Kiln__PollReply pr = KILN__POLL_REPLY__INIT;
	Kiln__Reply rep;
	size_t size = 64;
	uint32_t n = 0;
	int rv;

	if (max > KILN_POLL_MAX_EVENTS)
		max = KILN_POLL_MAX_EVENTS;
	if ((list = calloc((size_t)max + 1, sizeof(*list))) == NULL)
		return KILN_ENOMEM;
	if (req->epoch != ev->epoch) {
		overflow_fill(&over, &o, KILN__OVERFLOW__REASON__NEW_EPOCH, 1,
		              oldest - 1);
		list[pr.n_events++] = &over;
		after = oldest - 1;
	} else if ((after = cursor_of(ev, s, after)) + 1 < oldest) {
		overflow_fill(&over, &o, KILN__OVERFLOW__REASON__BEHIND, after + 1,
		              oldest - 1);
		list[pr.n_events++] = &over;
		after = oldest - 1;
	}
	pr.through = after;
	for (uint64_t seq = after + 1; seq <= ev->head && n < max; seq++) {
		struct ring_entry *r =
			&ev->ring[(ev->first + (seq - oldest)) % ev->cap];
		if (!evfilter_pass(s->filter, r->e)) {
			pr.through = seq; /* accounted for: the cursor moves on */
			continue;
		}
		if (pr.n_events > 0 && size + r->bytes + 12 > max_bytes)
			break;
		size += r->bytes + 12;
		list[pr.n_events++] = r->e;
		pr.through = seq;
		n++;
	}
	pr.epoch = ev->epoch;
	pr.events = list;
	kiln_proto_reply_init(&rep);
	rep.body_case = KILN__REPLY__BODY_POLL_REPLY;
	rep.poll_reply = &pr;
	rv = kiln_proto_pack_alloc(&rep.base, buf, len);
	free(list);
	if (rv == 0 && pr.through > s->sent_through)
		s->sent_through = pr.through;
	return rv;
}

/* The reply to a poll of an evicted subscription: one Overflow EVICTED
 * whose seq is the poll's own cursor (nothing is lost yet: subscribing
 * again from there gets every event still held). Lock held. */
static int
evicted_pack(struct kilnd_events *ev, const Kiln__PollRequest *req,
             uint8_t **buf, size_t *len)
{
	Kiln__Event over, *list[1] = {&over};
	Kiln__Overflow o;
	Kiln__PollReply pr = KILN__POLL_REPLY__INIT;
	Kiln__Reply rep;

	overflow_fill(&over, &o, KILN__OVERFLOW__REASON__EVICTED, 0, 0);
	over.seq = req->after_seq;
	pr.epoch = req->epoch ? req->epoch : ev->epoch;
	pr.n_events = 1;
	pr.events = list;
	kiln_proto_reply_init(&rep);
	rep.body_case = KILN__REPLY__BODY_POLL_REPLY;
	rep.poll_reply = &pr;
	return kiln_proto_pack_alloc(&rep.base, buf, len);
}

/* Whether a poll of s after cursor (epoch, after) has anything to
 * return: an Overflow, or an event s's filter passes. Lock held. */
static int
poll_ready(const struct kilnd_events *ev, const struct sub *s,
           const Kiln__PollRequest *req)
{
	uint64_t oldest = ev->head - ev->count + 1, after;

	if (req->epoch != ev->epoch)
		return 1;
	if ((after = cursor_of(ev, s, req->after_seq)) + 1 < oldest)
		return 1;
	for (uint64_t seq = after + 1; seq <= ev->head; seq++)
		if (evfilter_pass(s->filter, ring_at(ev, seq)))
			return 1;
	return 0;
}

/* How long (ms, 0: not at all) a poll that has events to return should
 * still gather more, with req->gather_ms: until gather_ms after s's last
 * reply, unless an urgent event waits or a whole reply's worth does.
 * Lock held. */
static uint32_t
gather_left(const struct kilnd_events *ev, const struct sub *s,
            const Kiln__PollRequest *req)
{
	uint64_t oldest = ev->head - ev->count + 1, after;
	uint32_t max = req->max_events ? req->max_events : KILN_POLL_MAX_EVENTS;
	int64_t end, now;

	if (req->gather_ms == 0 || req->wait_ms == 0 || s->last_reply_ns == 0 ||
	    req->epoch != ev->epoch)
		return 0;
	after = cursor_of(ev, s, req->after_seq);
	if (after + 1 < oldest || ev->head - after >= max)
		return 0;
	now = kiln_mono_ns();
	end = s->last_reply_ns +
	      (int64_t)(req->gather_ms < 100 ? req->gather_ms : 100) * 1000000;
	if (end <= now)
		return 0;
	for (uint64_t seq = after + 1; seq <= ev->head; seq++)
		if (event_urgent(ring_at(ev, seq)) &&
		    evfilter_pass(s->filter, ring_at(ev, seq)))
			return 0;
	return (uint32_t)((end - now + 999999) / 1000000);
}

/* Park w on subscription s. One parked poll per subscription: an older
 * one is woken to answer (empty). Lock held. */
static void
park(struct kilnd_events *ev, struct sub *s, struct ev_waiter *w, int gathering)
{
	if (s->waiter != NULL)
		waiter_wake(ev, s->waiter);
	w->sub = s->id;
	w->woken = 0;
	w->gathering = gathering;
	w->parked = 1;
	w->next = ev->parked;
	ev->parked = w;
	s->waiter = w;
}

/* Page `page` (from 1) of s's snapshot, a copy: its client may ask again
 * for one whose reply was lost. Lock held. */
static int
snapshot_page(const struct sub *s, uint32_t page, uint8_t **buf, size_t *len)
{
	const struct ev_page *p;

	if (s->snap == NULL || page > s->snap->n)
		return KILN_ERANGE;
	p = &s->snap->page[page - 1];
	if ((*buf = malloc(p->len ? p->len : 1)) == NULL)
		return KILN_ENOMEM;
	memcpy(*buf, p->buf, p->len);
	*len = p->len;
	return 0;
}

int
events_snapshot_attach(struct kilnd_events *ev, uint32_t pipe, uint64_t sub,
                       struct ev_pages *pages)
{
	struct sub *s;
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&ev->mu);
	if ((s = sub_find(ev, pipe, sub)) != NULL) {
		sub_snap_drop(ev, s);
		rv = KILN_EBUSY;
		if (ev->snap_bytes + pages->bytes <= ev->snap_max) {
			s->snap = pages;
			ev->snap_bytes += pages->bytes;
			rv = 0;
		}
	}
	pthread_mutex_unlock(&ev->mu);
	return rv;
}

void
events_snapshot_max(struct kilnd_events *ev, uint64_t bytes)
{
	pthread_mutex_lock(&ev->mu);
	ev->snap_max = bytes;
	pthread_mutex_unlock(&ev->mu);
}

int
events_poll(struct kilnd_events *ev, uint32_t pipe,
            const Kiln__PollRequest *req, size_t max_bytes,
            struct ev_waiter *w, uint32_t *park_ms, uint8_t **buf, size_t *len)
{
	struct sub *s;
	uint32_t gather;
	int rv;

	*park_ms = req->wait_ms;
	pthread_mutex_lock(&ev->mu);
	if ((s = sub_find(ev, pipe, req->subscription)) != NULL &&
	    req->snapshot_page == 0 && s->snap != NULL)
		sub_snap_drop(ev, s); /* read: its client polls events now */
	if (s == NULL)
		rv = evicted_take(ev, pipe, req->subscription)
		     ? evicted_pack(ev, req, buf, len) : KILN_ENOTFOUND;
	else if (req->snapshot_page > 0)
		rv = snapshot_page(s, req->snapshot_page, buf, len);
	else if (req->epoch == ev->epoch && req->after_seq > ev->head)
		rv = KILN_EINVAL;
	else if (!poll_ready(ev, s, req) && req->wait_ms > 0 && w != NULL) {
		park(ev, s, w, 0);
		rv = EVENTS_PARKED;
	} else if (w != NULL && (gather = gather_left(ev, s, req)) > 0) {
		park(ev, s, w, 1);
		*park_ms = gather < req->wait_ms ? gather : req->wait_ms;
		rv = EVENTS_PARKED;
	} else if ((rv = reply_pack(ev, s, req, max_bytes, buf, len)) == 0 &&
	           poll_ready(ev, s, req))
		s->last_reply_ns = kiln_mono_ns();
	pthread_mutex_unlock(&ev->mu);
	return rv;
}

int
events_unpark(struct kilnd_events *ev, struct ev_waiter *w)
{
	int woken;

	pthread_mutex_lock(&ev->mu);
	if (w->parked)
		waiter_unlink(ev, w);
	woken = w->woken;
	pthread_mutex_unlock(&ev->mu);
	return woken;
}

void
events_rewake(struct kilnd_events *ev, struct ev_waiter *w)
{
	pthread_mutex_lock(&ev->mu);
	if (w->woken)
		w->wake(w);
	pthread_mutex_unlock(&ev->mu);
}

void
events_wake_all(struct kilnd_events *ev)
{
	pthread_mutex_lock(&ev->mu);
	wake_all_locked(ev, NULL, 1);
	pthread_mutex_unlock(&ev->mu);
}

int
events_all_sent(struct kilnd_events *ev, uint64_t seq)
{
	int all = 1;

	pthread_mutex_lock(&ev->mu);
	for (uint32_t i = 0; i < ev->max_subs && all; i++)
		all = ev->subs[i].id == 0 || ev->subs[i].sent_through >= seq;
	pthread_mutex_unlock(&ev->mu);
	return all;
}

void
events_stats(struct kilnd_events *ev, struct events_stats *st)
{
	pthread_mutex_lock(&ev->mu);
	st->epoch = ev->epoch;
	st->head = ev->head;
	st->held = ev->count;
	st->bytes = ev->bytes;
	st->subscribers = ev->nsubs;
	pthread_mutex_unlock(&ev->mu);
}

/* Add one subscription's share of the block events_subs_info makes: its
 * URL globs to *nurls, its strings' bytes to *bytes. */
static void
sub_info_size(const struct sub *sb, size_t *nurls, size_t *bytes)
{
	const char *profile;
	char *const *urls;
	size_t n;

	evfilter_describe(sb->filter, &profile, &urls, &n);
	*nurls += n;
	*bytes += strlen(profile) + 1;
	for (size_t i = 0; i < n; i++)
		*bytes += strlen(urls[i]) + 1;
}

/* Copy s into *at; the copy. */
static char *
sub_info_str(char **at, const char *s)
{
	char *copy = *at;
	size_t len = strlen(s) + 1;

	memcpy(copy, s, len);
	*at += len;
	return copy;
}

int
events_subs_info(struct kilnd_events *ev, Kiln__SubscriptionInfo ***out,
                 size_t *n)
{
	Kiln__SubscriptionInfo **v, *info;
	size_t nurls = 0, bytes = 0, k = 0;
	char **urlv, *strs;

	pthread_mutex_lock(&ev->mu);
	for (uint32_t i = 0; i < ev->max_subs; i++)
		if (ev->subs[i].id != 0)
			sub_info_size(&ev->subs[i], &nurls, &bytes);
	/* one block: the pointers, the structs, every URL array, the strings
	 * (the aligned parts first) */
	v = malloc(ev->nsubs * (sizeof *v + sizeof *info) + nurls * sizeof(char *) +
	           bytes + 1);
	if (v == NULL) {
		pthread_mutex_unlock(&ev->mu);
		return KILN_ENOMEM;
	}
	info = (Kiln__SubscriptionInfo *)(v + ev->nsubs);
	urlv = (char **)(info + ev->nsubs);
	strs = (char *)(urlv + nurls);
	for (uint32_t i = 0; i < ev->max_subs; i++) {
		const struct sub *sb = &ev->subs[i];
		const char *profile;
		char *const *urls;
		size_t nu;
		if (sb->id == 0)
			continue;
		evfilter_describe(sb->filter, &profile, &urls, &nu);
		kiln__subscription_info__init(&info[k]);
		info[k].client = sb->pipe;
		info[k].n_urls = nu;
		info[k].urls = urlv;
		for (size_t j = 0; j < nu; j++)
			*urlv++ = sub_info_str(&strs, urls[j]);
		info[k].profile = sub_info_str(&strs, profile);
		v[k] = &info[k];
		k++;
	}
	pthread_mutex_unlock(&ev->mu);
	*out = v;
	*n = k;
	return 0;
}
