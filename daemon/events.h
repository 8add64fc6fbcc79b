/* events.h — the daemon's event stream: one ring of recent events shared by
 * every subscriber, subscriptions, and polls parked until an event arrives.
 *
 * A subscriber is a cursor (epoch, seq) held by the client and a slot here;
 * the ring is the only buffer, bounded in events and bytes. A poll whose
 * cursor the ring has moved past gets an Overflow event first (unless its
 * filter would have left out every event it missed). Nothing here
 * ever waits for a client: publishing appends, evicts the oldest, and wakes
 * parked polls. docs/protocol.md explains the design. */
#ifndef KILND_EVENTS_H
#define KILND_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_proto.h"

struct kilnd_events;

/* A poll waiting for events; embedded in the server's worker. All fields
 * belong to events.c while the waiter is parked. */
struct ev_waiter {
	struct ev_waiter *next;
	uint64_t sub;   /* the subscription it polls */
	int parked;     /* on the parked list */
	int woken;      /* a publisher woke it (it must answer now) */
	int gathering;  /* has events, waits out its gather time: only an
	                 * urgent event wakes it early */
	/* Called with the events lock held when the waiter must answer; must
	 * neither block nor call into events.c. */
	void (*wake)(struct ev_waiter *w);
};

/* What events_poll returns besides 0 and a negative KILN_E* code. */
enum events_poll_result {
	EVENTS_PARKED = 1, /* the poll is parked: its waiter answers later */
};

struct events_stats {
	uint64_t epoch, head;  /* the newest seq (0: none yet) */
	uint32_t held, subscribers;
	uint64_t bytes;
};

/* A ring of at most max_events events and max_bytes encoded bytes, and at
 * most max_subs subscriptions. Returns 0 or KILN_ENOMEM. */
int events_new(uint32_t max_events, uint64_t max_bytes, uint32_t max_subs,
               struct kilnd_events **evp);
/* Every waiter must have been unparked. NULL is allowed. */
void events_free(struct kilnd_events *ev);

/* Give e (its kind set; seq and time are filled in) the next sequence
 * number and keep a copy. Wakes every parked poll. Returns 0, KILN_ENOMEM
 * or KILN_ERANGE (one event larger than the whole ring). */
int events_publish(struct kilnd_events *ev, Kiln__Event *e);

/* Open a subscription for the client on pipe, sent only the events filter
 * passes (evfilter.h; NULL: all). Takes filter, whatever the result. When
 * max_subs are open the oldest is closed to make room (its parked poll
 * answers, and its next poll gets an Overflow EVICTED). Returns 0 (reply
 * filled), or KILN_EBUSY only when max_subs is 0. */
struct ev_filter;
int events_subscribe(struct kilnd_events *ev, uint32_t pipe,
                     const Kiln__SubscribeRequest *req, struct ev_filter *filter,
                     Kiln__SubscribeReply *rep);

/* Keep pages (evsnap.h) as subscription sub's snapshot: a poll with
 * snapshot_page k (from 1) is answered with page k at once, as many times
 * as asked, until the first poll for events frees them (or the
 * subscription closes). Takes pages on 0; else the caller frees them:
 * KILN_ENOTFOUND (no such subscription on pipe: evicted meanwhile),
 * KILN_EBUSY (the snapshots held would pass their cap, below). */
struct ev_pages;
int events_snapshot_attach(struct kilnd_events *ev, uint32_t pipe, uint64_t sub,
                           struct ev_pages *pages);

/* The snapshots' pages held at once, all subscriptions together, are at
 * most this many bytes (a hundred editors starting on a 100,000-step
 * project would hold some 1.5 GiB otherwise). */
#define EVENTS_SNAP_MAX_BYTES (64u << 20)
/* Change that cap (tests). */
void events_snapshot_max(struct kilnd_events *ev, uint64_t bytes);

/* Returns 0 or KILN_ENOTFOUND (no such subscription on this pipe). */
int events_unsubscribe(struct kilnd_events *ev, uint32_t pipe, uint64_t sub);

/* Drop every subscription of a closed pipe (waking its parked poll). */
void events_pipe_closed(struct kilnd_events *ev, uint32_t pipe);

/* Answer a poll: 0 with *buf (malloc'd, *len bytes) a whole encoded Reply
 * holding at most max_bytes of the events the subscription's filter
 * passes, and in PollReply.through how far they go; or, when there are
 * none, wait_ms
 * is not 0 and w is not NULL, park w and return EVENTS_PARKED (also while
 * a poll with gather_ms gathers events: then only until its gather time
 * ends, or an urgent event comes). *park_ms: how long the parked poll
 * sleeps before asking again. A subscription evicted to make room answers
 * once with an Overflow EVICTED, then is unknown. With
 * req->snapshot_page, that page of its snapshot instead, at once
 * (events_snapshot_attach; KILN_ERANGE: no such page). Errors:
 * KILN_ENOTFOUND (subscription), KILN_EINVAL (cursor ahead of the newest
 * event), KILN_ENOMEM. */
int events_poll(struct kilnd_events *ev, uint32_t pipe,
                const Kiln__PollRequest *req, size_t max_bytes,
                struct ev_waiter *w, uint32_t *park_ms, uint8_t **buf, size_t *len);

/* Take w off the parked list if it is still there. Returns w->woken. */
int events_unpark(struct kilnd_events *ev, struct ev_waiter *w);

/* After arming w's timer: if a publisher woke w before that, wake it
 * again now (the first wake-up found nothing to cancel). */
void events_rewake(struct kilnd_events *ev, struct ev_waiter *w);

/* Wake every parked poll (shutdown). */
void events_wake_all(struct kilnd_events *ev);

/* Whether every open subscription has been sent a reply accounting for
 * the events up to seq (a stopping daemon waits, briefly, for its
 * subscribers to get its Stopping event: one between two polls when the
 * parked ones were woken would never see it). */
int events_all_sent(struct kilnd_events *ev, uint64_t seq);

void events_stats(struct kilnd_events *ev, struct events_stats *st);

/* The subscriptions open now, with their filters, as one malloc'd block
 * the caller frees with free(*out). Returns 0 or KILN_ENOMEM. */
int events_subs_info(struct kilnd_events *ev, Kiln__SubscriptionInfo ***out,
                     size_t *n);

#endif
