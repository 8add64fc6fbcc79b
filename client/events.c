/* events.c — kiln.h's subscriptions: long polls on the connection's events
 * slot, handed out one event at a time, and an optional thread calling
 * the user's function.
 *
 * The cursor (epoch, seq of the last event handed out, or the reply's
 * `through` once its events are all handed out: a filtered subscription's
 * cursor moves over what the daemon left out) is ours: every poll
 * sends it, so a lost reply or a dropped connection loses nothing. When the
 * daemon no longer knows the subscription (the connection dropped and came
 * back, or a new daemon answers) the next poll subscribes again from the
 * cursor, and the daemon reports what it could not keep as an OVERFLOW.
 *
 * Threads: with kiln_subscribe_cb, the thread it starts owns c->sub and
 * the events slot until kiln_unsubscribe joins it. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libkiln_int.h"
#include "kiln_clock.h"

#define THREAD_WAIT_MS 500 /* how long the thread's polls wait */

/* kiln.h states the daemon's limits to libkiln's users. */
_Static_assert(KILN_EVENT_FILTER_MAX_URLS == KILN_FILTER_MAX_URLS &&
               KILN_EVENT_FILTER_MAX_PROFILE == KILN_FILTER_MAX_PROFILE,
               "kiln.h's filter limits are the daemon's");

static int
subscribe_send(kiln_conn *c, const kiln_cursor *since)
{
	struct kiln_sub *s = &c->sub;
	Kiln__Request req;
	Kiln__SubscribeRequest q = KILN__SUBSCRIBE_REQUEST__INIT;
	const Kiln__SubscribeReply *sr;
	struct conn_reply r;
	int rv;

	if (since != NULL) {
		q.epoch = since->epoch;
		q.after_seq = since->seq;
	}
	q.urls = s->urls;
	q.n_urls = s->nurls;
	q.snapshot = s->snapshot && (since == NULL || since->epoch == 0);
	if (s->profile != NULL)
		q.profile = s->profile;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_SUBSCRIBE;
	req.subscribe = &q;
	if ((rv = lk_call(c, CONN_SLOT_EVENTS, &req, NULL, 0, c->timeout_ms,
	                  KILN__REPLY__BODY_SUBSCRIBE_REPLY, &r, s->error,
	                  sizeof(s->error))) != 0)
		return rv;
	sr = r.rep->subscribe_reply;
	s->id = sr->subscription;
	if (since != NULL && since->epoch != 0)
		s->cur = *since; /* the daemon judges it on the first poll */
	else
		s->cur = (kiln_cursor){sr->epoch, sr->after_seq};
	/* the snapshot's pages come first (a new one after a resubscribe
	 * while they were read) */
	s->snap_end = q.snapshot;
	s->snap_pages = q.snapshot ? sr->snapshot_pages : 0;
	s->snap_page = s->snap_pages > 0 ? 1 : 0;
	s->snap_steps = sr->snapshot_steps;
	snprintf(s->snap_error, sizeof s->snap_error, "%s",
	         q.snapshot ? sr->snapshot_error : "");
	conn_reply_free(&r);
	return 0;
}

int
kiln_subscribe(kiln_conn *c, const kiln_cursor *since)
{
	int rv;

	if (c->sub.active)
		return KILN_EBUSY;
	if ((rv = subscribe_send(c, since)) != 0) {
		/* on the caller's thread: kiln_conn_error may say why */
		snprintf(c->error, sizeof(c->error), "%s", c->sub.error);
		return rv;
	}
	c->sub.active = 1;
	c->sub.next = 0;
	c->sub.snext = 0;
	return 0;
}

int
kiln_events_snapshot(kiln_conn *c, int on)
{
	if (c->sub.active)
		return KILN_EBUSY;
	c->sub.snapshot = on != 0;
	return 0;
}

static void
step_take(struct kiln_sub *s, const Kiln__StepEvent *se)
{
	kiln_step_event *st = &s->step;

	memset(st, 0, sizeof(*st));
	st->builds = se->builds;
	st->nbuilds = se->n_builds;
	st->profile = se->profile;
	st->url = se->url;
	st->result = se->result <= KILN__STEP_EVENT__RESULT__WOULD_RUN
	             ? (kiln_step_result)se->result : KILN_STEP_FAILED;
	st->reason = se->reason;
	st->error = se->error;
	for (size_t i = 0; i < se->n_outputs && i < 16; i++) {
		const Kiln__StepOutput *o = se->outputs[i];
		s->outs[i].name = o->name;
		memset(&s->outs[i].id, 0, sizeof(s->outs[i].id));
		kiln_proto_id_get(o->id, &s->outs[i].id);
		s->outs[i].size = o->size;
		s->outs[i].path = o->path;
		st->noutputs++;
	}
	st->outputs = s->outs;
	st->exit_code = se->exit_code;
	st->signal = se->signal;
	st->has_log = se->log.len == 16;
	if (st->has_log)
		kiln_proto_id_get(se->log, &st->log);
	st->duration_ns = se->duration_ns;
	st->estimate_ns = se->estimate_ns;
	st->done = se->done;
	st->total = se->total;
	st->warnings = (const char *const *)se->warnings;
	st->nwarnings = se->n_warnings;
	st->machine = se->machine ? se->machine : "";
	st->left_ns = se->left_ns;
}

static void
started_take(struct kiln_sub *s, const Kiln__StepStarted *ss)
{
	kiln_step_started *st = &s->started;

	memset(st, 0, sizeof(*st));
	st->builds = ss->builds;
	st->nbuilds = ss->n_builds;
	st->profile = ss->profile;
	st->url = ss->url;
	st->expected_ns = ss->expected_ns;
	st->done = ss->done;
	st->total = ss->total;
	st->left_ns = ss->left_ns;
}

/* Fill ev from the batch's next event and move the cursor past it. */
static void
event_take(struct kiln_sub *s, kiln_event *ev)
{
	const Kiln__PollReply *pr = s->batch.rep->poll_reply;
	const Kiln__Event *e = pr->events[s->next++];

	memset(ev, 0, sizeof(*ev));
	ev->at = (kiln_cursor){pr->epoch, e->seq};
	ev->time_ns = e->time_ns;
	ev->text = ev->profile = ev->url = "";
	switch (e->kind_case) {
	case KILN__EVENT__KIND_OVERFLOW:
		ev->type = KILN_EVENT_OVERFLOW;
		ev->new_epoch = e->overflow->reason ==
		                KILN__OVERFLOW__REASON__NEW_EPOCH;
		ev->evicted = e->overflow->reason ==
		              KILN__OVERFLOW__REASON__EVICTED;
		ev->first_lost = e->overflow->first_lost;
		ev->last_lost = e->overflow->last_lost;
		break;
	case KILN__EVENT__KIND_LOG:
		ev->type = KILN_EVENT_LOG;
		ev->level = (int)e->log->level;
		ev->text = e->log->text;
		break;
	case KILN__EVENT__KIND_BLOB_STORED:
		ev->type = KILN_EVENT_BLOB_STORED;
		kiln_proto_id_get(e->blob_stored->id, &ev->id);
		ev->size = e->blob_stored->size;
		ev->profile = e->blob_stored->profile;
		ev->url = e->blob_stored->url;
		break;
	case KILN__EVENT__KIND_STOPPING:
		ev->type = KILN_EVENT_STOPPING;
		ev->text = e->stopping->reason;
		break;
	case KILN__EVENT__KIND_STEP:
		ev->type = KILN_EVENT_STEP;
		step_take(s, e->step);
		ev->step = &s->step;
		break;
	case KILN__EVENT__KIND_BUILD_FINISHED:
		ev->type = KILN_EVENT_BUILD_DONE;
		lk_summary_of(e->build_finished, &s->build);
		ev->build = &s->build;
		break;
	case KILN__EVENT__KIND_STEP_STARTED:
		ev->type = KILN_EVENT_STEP_STARTED;
		started_take(s, e->step_started);
		ev->started = &s->started;
		break;
	case KILN__EVENT__KIND_SOURCES_CHANGED:
		ev->type = KILN_EVENT_SOURCES_CHANGED;
		ev->paths = (const char *const *)e->sources_changed->paths;
		ev->npaths = e->sources_changed->n_paths;
		ev->more = e->sources_changed->more;
		ev->everything = e->sources_changed->everything;
		break;
	default:
		ev->type = KILN_EVENT_OTHER; /* newer daemon: skip, keep counting */
		break;
	}
	s->cur = ev->at;
	if (s->next == pr->n_events && pr->through > e->seq)
		s->cur.seq = pr->through; /* the rest the filter left out */
}

/* Fill ev from the batch's next snapshot step (its cursor: the stream's
 * start, which it does not move). */
static void
state_take(struct kiln_sub *s, kiln_event *ev)
{
	const Kiln__StepState *ss = s->batch.rep->poll_reply->snapshot[s->snext++];
	kiln_step_state *st = &s->state;

	memset(ev, 0, sizeof(*ev));
	memset(st, 0, sizeof(*st));
	ev->at = s->cur;
	ev->type = KILN_EVENT_SNAPSHOT;
	ev->text = ev->profile = ev->url = "";
	st->profile = ss->profile;
	st->url = ss->url;
	st->state = ss->state <= KILN__STEP_STATE__STATE__NOT_BUILT
	            ? (kiln_step_state_kind)ss->state : KILN_STATE_NOT_BUILT;
	st->building = ss->building;
	st->error = ss->error;
	for (size_t i = 0; i < ss->n_outputs && i < 16; i++) {
		const Kiln__StepOutput *o = ss->outputs[i];
		s->outs[i].name = o->name;
		memset(&s->outs[i].id, 0, sizeof(s->outs[i].id));
		kiln_proto_id_get(o->id, &s->outs[i].id);
		s->outs[i].size = o->size;
		s->outs[i].path = o->path;
		st->noutputs++;
	}
	st->outputs = s->outs;
	ev->state = st;
}

/* The SNAPSHOT_END: the snapshot is whole. */
static void
snap_end_take(struct kiln_sub *s, kiln_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->at = s->cur;
	ev->type = KILN_EVENT_SNAPSHOT_END;
	ev->profile = ev->url = "";
	ev->text = s->snap_error;
	ev->steps = s->snap_steps;
	s->snap_end = 0;
	s->snap_page = 0;
}

/* One long poll; on success the batch holds its reply (maybe empty). */
static int
poll_once(kiln_conn *c, int timeout_ms)
{
	struct kiln_sub *s = &c->sub;
	Kiln__Request req;
	Kiln__PollRequest q = KILN__POLL_REQUEST__INIT;

	q.subscription = s->id;
	q.epoch = s->cur.epoch;
	q.after_seq = s->cur.seq;
	q.wait_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
	if (q.wait_ms > KILN_POLL_MAX_WAIT_MS)
		q.wait_ms = KILN_POLL_MAX_WAIT_MS;
	q.gather_ms = (uint32_t)s->gather_ms;
	if (s->snap_page > 0) { /* a page of the snapshot, answered at once */
		q.snapshot_page = s->snap_page;
		q.wait_ms = 0;
		q.gather_ms = 0;
	}
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_POLL;
	req.poll = &q;
	return lk_call(c, CONN_SLOT_EVENTS, &req, NULL, 0,
	               (int)q.wait_ms + c->timeout_ms,
	               KILN__REPLY__BODY_POLL_REPLY, &s->batch, s->error,
	               sizeof(s->error));
}

/* An empty reply: the daemon's filter left out every event up to
 * through (0 from a daemon without filters). */
static void
through_take(struct kiln_sub *s, const Kiln__PollReply *pr)
{
	if (pr->epoch == s->cur.epoch && pr->through > s->cur.seq)
		s->cur.seq = pr->through;
}

/* Free kiln_events_filter's copies. */
void
lk_filter_free(struct kiln_sub *s)
{
	for (size_t i = 0; i < s->nurls; i++)
		free(s->urls[i]);
	free(s->urls);
	free(s->profile);
	s->urls = NULL;
	s->nurls = 0;
	s->profile = NULL;
}

int
kiln_events_filter(kiln_conn *c, const kiln_event_filter *f)
{
	struct kiln_sub *s = &c->sub, n = {0};

	if (s->active)
		return KILN_EBUSY;
	if (f != NULL && f->nurls > 0 && f->urls == NULL)
		return KILN_EINVAL;
	if (f != NULL && f->nurls > 0 &&
	    (n.urls = calloc(f->nurls, sizeof(*n.urls))) == NULL)
		return KILN_ENOMEM;
	for (; f != NULL && n.nurls < f->nurls; n.nurls++)
		if ((n.urls[n.nurls] = strdup(f->urls[n.nurls] ? f->urls[n.nurls]
		                                               : "")) == NULL)
			goto fail;
	if (f != NULL && f->profile != NULL && f->profile[0] != '\0' &&
	    (n.profile = strdup(f->profile)) == NULL)
		goto fail;
	lk_filter_free(s);
	s->urls = n.urls;
	s->nurls = n.nurls;
	s->profile = n.profile;
	return 0;
fail:
	lk_filter_free(&n);
	return KILN_ENOMEM;
}

int
kiln_events_gather(kiln_conn *c, int gather_ms)
{
	if (c == NULL || gather_ms < 0 || gather_ms > 100)
		return KILN_EINVAL;
	c->sub.gather_ms = gather_ms;
	return 0;
}

/* The snapshot's next step or its end, while one is handed out: 0 with
 * *ev filled, 1 when it is all handed out, or an error. */
static int
snapshot_next(kiln_conn *c, kiln_event *ev)
{
	struct kiln_sub *s = &c->sub;
	int rv;

	while (s->snap_end) {
		if (s->batch.rep != NULL &&
		    s->snext < s->batch.rep->poll_reply->n_snapshot) {
			state_take(s, ev);
			return 0;
		}
		if (s->snap_page == 0 || s->snap_page > s->snap_pages) {
			snap_end_take(s, ev);
			return 0;
		}
		conn_reply_free(&s->batch);
		s->next = s->snext = 0;
		rv = poll_once(c, 0);
		if (rv == KILN_ENOTFOUND) /* the daemon forgot us: start over */
			rv = subscribe_send(c, NULL);
		else if (rv == 0 && !s->batch.rep->poll_reply->snapshot_more)
			s->snap_page = s->snap_pages + 1;
		else if (rv == 0)
			s->snap_page++;
		if (rv != 0) {
			if (!s->threaded)
				snprintf(c->error, sizeof(c->error), "%s", s->error);
			return rv;
		}
	}
	return 1;
}

int
kiln_events_poll(kiln_conn *c, int timeout_ms, kiln_event *ev)
{
	struct kiln_sub *s = &c->sub;
	int rv;

	if (!s->active)
		return KILN_EINVAL;
	if ((rv = snapshot_next(c, ev)) != 1)
		return rv;
	if (s->batch.rep != NULL &&
	    s->next < s->batch.rep->poll_reply->n_events) {
		event_take(s, ev);
		return 0;
	}
	/* A daemon holds a poll for at most KILN_POLL_MAX_WAIT_MS: longer
	 * waits are several polls, until the caller's own deadline. */
	for (int64_t deadline = (kiln_mono_ns() / 1000000) + (timeout_ms > 0 ? timeout_ms : 0);;) {
		int64_t left = deadline - (kiln_mono_ns() / 1000000);
		int wait = left > 0 ? (left > INT32_MAX ? INT32_MAX : (int)left) : 0;
		conn_reply_free(&s->batch);
		s->next = s->snext = 0;
		rv = poll_once(c, wait);
		if (rv == KILN_ENOTFOUND) { /* the daemon forgot us: resume */
			kiln_cursor cur = s->cur;
			if ((rv = subscribe_send(c, &cur)) == 0)
				rv = poll_once(c, wait);
		}
		/* No answer at all, not even an empty one, a connection timeout
		 * after the daemon's longest hold: it stopped (its Stopping event
		 * missed) or hangs. A caller that waits for ever would poll a
		 * dead daemon for ever: kiln events did, after a missed stop. */
		if (rv == KILN_ETIMEDOUT) {
			rv = KILN_ECLOSED;
			snprintf(s->error, sizeof(s->error), "the daemon did not answer a "
			         "poll for %d s: it stopped or does not respond",
			         (wait > KILN_POLL_MAX_WAIT_MS ? KILN_POLL_MAX_WAIT_MS : wait) / 1000 +
			         c->timeout_ms / 1000);
		}
		if (rv != 0) {
			/* on the caller's thread: kiln_conn_error may say why */
			if (!s->threaded)
				snprintf(c->error, sizeof(c->error), "%s", s->error);
			return rv;
		}
		if (s->batch.rep->poll_reply->n_events > 0)
			break;
		through_take(s, s->batch.rep->poll_reply);
		if (wait <= KILN_POLL_MAX_WAIT_MS)
			return KILN_ETIMEDOUT;
	}
	event_take(s, ev);
	return 0;
}

int
kiln_events_cursor(const kiln_conn *c, kiln_cursor *cur)
{
	if (!c->sub.active)
		return KILN_EINVAL;
	*cur = c->sub.cur;
	return 0;
}

/* The callback thread: poll and deliver until told to quit. */
static void *
sub_thread(void *arg)
{
	kiln_conn *c = arg;
	struct kiln_sub *s = &c->sub;
	kiln_event ev;
	int rv;

	while (!atomic_load(&s->quit)) {
		rv = kiln_events_poll(c, THREAD_WAIT_MS, &ev);
		if (rv == 0 && s->fn(&ev, s->arg) != 0)
			break;
		if (rv != 0 && rv != KILN_ETIMEDOUT) {
			struct timespec ts = {0, 100 * 1000000}; /* daemon away */
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int
kiln_subscribe_cb(kiln_conn *c, const kiln_cursor *since, kiln_event_fn fn,
                  void *arg)
{
	int rv;

	if ((rv = kiln_subscribe(c, since)) != 0)
		return rv;
	c->sub.fn = fn;
	c->sub.arg = arg;
	atomic_store(&c->sub.quit, 0);
	if (pthread_create(&c->sub.thread, NULL, sub_thread, c) != 0) {
		kiln_unsubscribe(c);
		return KILN_ENOMEM;
	}
	c->sub.threaded = 1;
	return 0;
}

void
lk_sub_end(kiln_conn *c)
{
	struct kiln_sub *s = &c->sub;

	if (s->threaded) {
		atomic_store(&s->quit, 1);
		pthread_join(s->thread, NULL);
		s->threaded = 0;
	}
	conn_reply_free(&s->batch);
	s->active = 0;
}

int
kiln_unsubscribe(kiln_conn *c)
{
	Kiln__Request req;
	Kiln__UnsubscribeRequest q = KILN__UNSUBSCRIBE_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	if (!c->sub.active)
		return KILN_EINVAL;
	lk_sub_end(c);
	q.subscription = c->sub.id;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_UNSUBSCRIBE;
	req.unsubscribe = &q;
	if ((rv = lk_call(c, CONN_SLOT_MAIN, &req, NULL, 0, c->timeout_ms,
	                  KILN__REPLY__BODY__NOT_SET, &r, c->error,
	                  sizeof(c->error))) != 0)
		return rv;
	conn_reply_free(&r);
	return 0;
}
