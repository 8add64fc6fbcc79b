/* test_events.c — the daemon's event ring and parked polls (events.c):
 * a poll that gathers (gather_ms) holds step events back until its gather
 * time ends, but a build's end wakes it at once; and subscriptions'
 * filters (evfilter.c): which events pass, that a filtered cursor moves
 * over what it left out, wakes only for what passes, and is never told it
 * lost events its filter would have left out; and a snapshot's pages
 * (evsnap.c): bounded, whole, in order, kept with the subscription until
 * its client polls for events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "engine.h"
#include "events.h"
#include "evfilter.h"
#include "evsnap.h"
#include "glob.h"

struct waiter_box {
	struct ev_waiter w;
	int wakes;
};

static void
on_wake(struct ev_waiter *w)
{
	((struct waiter_box *)w)->wakes++;
}

static void
publish_step(struct kilnd_events *ev, const char *url)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__StepEvent se = KILN__STEP_EVENT__INIT;

	se.url = (char *)url;
	se.profile = (char *)"pc";
	e.kind_case = KILN__EVENT__KIND_STEP;
	e.step = &se;
	assert_int_equal(events_publish(ev, &e), 0);
}

static void
publish_finished(struct kilnd_events *ev)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__BuildFinished bf = KILN__BUILD_FINISHED__INIT;

	bf.build = 1;
	bf.done = 1;
	e.kind_case = KILN__EVENT__KIND_BUILD_FINISHED;
	e.build_finished = &bf;
	assert_int_equal(events_publish(ev, &e), 0);
}

/* Poll after *after (at most max events, 0: the default); on a reply,
 * check it holds want events and move *after to the last. Returns
 * events_poll's result. */
static int
poll_max(struct kilnd_events *ev, uint64_t sub, uint64_t epoch, uint64_t *after,
         uint32_t gather_ms, uint32_t max, struct waiter_box *b, uint32_t *park_ms,
         size_t want)
{
	Kiln__PollRequest q = KILN__POLL_REQUEST__INIT;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rv;

	q.subscription = sub;
	q.epoch = epoch;
	q.after_seq = *after;
	q.wait_ms = 5000;
	q.gather_ms = gather_ms;
	q.max_events = max;
	rv = events_poll(ev, 7, &q, 1 << 20, &b->w, park_ms, &buf, &len);
	if (rv == 0) {
		Kiln__Reply *rep = kiln__reply__unpack(NULL, len, buf);
		assert_non_null(rep);
		assert_int_equal(rep->body_case, KILN__REPLY__BODY_POLL_REPLY);
		if (rep->poll_reply->n_events != want)
			fail_msg("%zu events in the reply, expected %zu",
			         rep->poll_reply->n_events, want);
		if (want > 0)
			*after = rep->poll_reply->events[want - 1]->seq;
		kiln__reply__free_unpacked(rep, NULL);
		free(buf);
	}
	return rv;
}

static int
poll_after(struct kilnd_events *ev, uint64_t sub, uint64_t epoch, uint64_t *after,
           uint32_t gather_ms, struct waiter_box *b, uint32_t *park_ms, size_t want)
{
	return poll_max(ev, sub, epoch, after, gather_ms, 0, b, park_ms, want);
}

static struct kilnd_events *
subscribed(uint64_t *sub, uint64_t *epoch, uint64_t *after)
{
	struct kilnd_events *ev;
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	Kiln__SubscribeReply rep = KILN__SUBSCRIBE_REPLY__INIT;

	assert_int_equal(events_new(64, 1 << 20, 4, &ev), 0);
	assert_int_equal(events_subscribe(ev, 7, &rq, NULL, &rep), 0);
	*sub = rep.subscription;
	*epoch = rep.epoch;
	*after = rep.after_seq;
	return ev;
}

static void
gathering_holds_steps_and_a_build_end_wakes_it(void **state)
{
	struct waiter_box b = {.w.wake = on_wake};
	uint64_t sub, epoch, after;
	uint32_t park = 0;
	struct kilnd_events *ev = subscribed(&sub, &epoch, &after);

	(void)state;
	/* quiet until now: the first event is answered at once */
	publish_step(ev, "a");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 100, &b, &park, 1), 0);
	/* just answered: the next steps are gathered (the poll parks with a
	 * sleep no longer than the gather time) */
	publish_step(ev, "b");
	publish_step(ev, "c");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 100, &b, &park, 0),
	                 EVENTS_PARKED);
	assert_true(park >= 1 && park <= 100);
	/* another step does not wake the gathering poll ... */
	publish_step(ev, "d");
	assert_int_equal(b.wakes, 0);
	/* ... the build's end does, and comes with the steps gathered */
	publish_finished(ev);
	assert_int_equal(b.wakes, 1);
	events_unpark(ev, &b.w);
	assert_int_equal(poll_after(ev, sub, epoch, &after, 100, &b, &park, 4), 0);
	events_free(ev);
}

static void
without_gathering_every_poll_is_answered_at_once(void **state)
{
	struct waiter_box b = {.w.wake = on_wake};
	uint64_t sub, epoch, after;
	uint32_t park = 0;
	struct kilnd_events *ev = subscribed(&sub, &epoch, &after);

	(void)state;
	publish_step(ev, "a");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	publish_step(ev, "b");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	/* nothing new: parked for the whole wait, and a step wakes it */
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 0),
	                 EVENTS_PARKED);
	assert_int_equal(park, 5000);
	publish_step(ev, "c");
	assert_int_equal(b.wakes, 1);
	events_unpark(ev, &b.w);
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	events_free(ev);
}

static void
a_full_reply_is_not_held_back(void **state)
{
	struct waiter_box b = {.w.wake = on_wake};
	uint64_t sub, epoch, after;
	uint32_t park = 0;
	struct kilnd_events *ev = subscribed(&sub, &epoch, &after);

	(void)state;
	publish_step(ev, "a");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 100, &b, &park, 1), 0);
	for (int i = 0; i < 8; i++)
		publish_step(ev, "x");
	/* a poll that takes at most 8 events has a whole reply waiting */
	assert_int_equal(poll_max(ev, sub, epoch, &after, 100, 8, &b, &park, 8), 0);
	events_free(ev);
}

/* ---- filters ------------------------------------------------------------ */

/* One event of each kind that a filter may judge. */
enum ev_kind { K_STEP, K_BUILD, K_BLOB, K_LOG, K_CHANGED, K_OVERFLOW, K_STOPPING };

/* Publish (or only build, into e and its parts, when ev is NULL) an event
 * of kind naming profile and url. */
struct ev_parts {
	Kiln__Event e;
	Kiln__StepEvent step;
	Kiln__BuildFinished build;
	Kiln__BlobStored blob;
	Kiln__LogLine log;
	Kiln__SourcesChanged changed;
	Kiln__Overflow over;
	Kiln__Stopping stopping;
};

static Kiln__Event *
event_make(struct ev_parts *p, enum ev_kind kind, const char *profile,
           const char *url)
{
	kiln__event__init(&p->e);
	switch (kind) {
	case K_STEP:
		kiln__step_event__init(&p->step);
		p->step.profile = (char *)profile;
		p->step.url = (char *)url;
		p->e.kind_case = KILN__EVENT__KIND_STEP;
		p->e.step = &p->step;
		break;
	case K_BUILD:
		kiln__build_finished__init(&p->build);
		p->build.profile = (char *)profile;
		p->e.kind_case = KILN__EVENT__KIND_BUILD_FINISHED;
		p->e.build_finished = &p->build;
		break;
	case K_BLOB:
		kiln__blob_stored__init(&p->blob);
		p->blob.profile = (char *)profile;
		p->blob.url = (char *)url;
		p->e.kind_case = KILN__EVENT__KIND_BLOB_STORED;
		p->e.blob_stored = &p->blob;
		break;
	case K_LOG:
		kiln__log_line__init(&p->log);
		p->log.text = (char *)url;
		p->e.kind_case = KILN__EVENT__KIND_LOG;
		p->e.log = &p->log;
		break;
	case K_CHANGED:
		kiln__sources_changed__init(&p->changed);
		p->e.kind_case = KILN__EVENT__KIND_SOURCES_CHANGED;
		p->e.sources_changed = &p->changed;
		break;
	case K_OVERFLOW:
		kiln__overflow__init(&p->over);
		p->e.kind_case = KILN__EVENT__KIND_OVERFLOW;
		p->e.overflow = &p->over;
		break;
	case K_STOPPING:
		kiln__stopping__init(&p->stopping);
		p->e.kind_case = KILN__EVENT__KIND_STOPPING;
		p->e.stopping = &p->stopping;
		break;
	}
	return &p->e;
}

/* The filter of urls (NULL-terminated) and profile; fails the test if it
 * is refused. */
static struct ev_filter *
filter_of(const char *const *urls, const char *profile)
{
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	struct ev_filter *f = NULL;
	char why[256] = "";

	while (urls != NULL && urls[rq.n_urls] != NULL)
		rq.n_urls++;
	rq.urls = (char **)urls;
	rq.profile = (char *)profile;
	if (evfilter_new(&rq, &f, why, sizeof why) != 0)
		fail_msg("filter refused: %s", why);
	return f;
}

static void
a_filter_passes_what_names_its_assets_and_everything_else(void **state)
{
	static const char *const urls[] = {"art/**", "ui/*.png", NULL};
	static const struct {
		const char *name;
		enum ev_kind kind;
		const char *profile, *url;
		int pass;
	} cases[] = {
		{"a step under art/ in pc", K_STEP, "pc", "art/hero/idle", 1},
		{"a step matching the second glob", K_STEP, "pc", "ui/button.png", 1},
		{"a step matching no glob", K_STEP, "pc", "audio/boom", 0},
		{"a glob is not a prefix", K_STEP, "pc", "ui/x/button.png", 0},
		{"a matching step of another profile", K_STEP, "ps5", "art/hero", 0},
		{"a build of pc (no URL to match)", K_BUILD, "pc", NULL, 1},
		{"a build of another profile", K_BUILD, "ps5", NULL, 0},
		{"a put naming a matching entry", K_BLOB, "pc", "art/a", 1},
		{"a put naming another entry", K_BLOB, "pc", "audio/a", 0},
		{"a put naming another profile's entry", K_BLOB, "ps5", "art/a", 0},
		{"a put naming no entry", K_BLOB, "", "", 1},
		{"a log line", K_LOG, NULL, "x", 1},
		{"a change report", K_CHANGED, NULL, NULL, 1},
		{"an overflow", K_OVERFLOW, NULL, NULL, 1},
		{"the daemon stopping", K_STOPPING, NULL, NULL, 1},
	};
	struct ev_filter *f = filter_of(urls, "pc"), *globs_only = filter_of(urls, "");
	struct ev_filter *profile_only = filter_of(NULL, "pc");
	struct ev_parts p;

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		Kiln__Event *e = event_make(&p, cases[i].kind, cases[i].profile
		                            ? cases[i].profile : "", cases[i].url
		                            ? cases[i].url : "");
		if (evfilter_pass(f, e) != cases[i].pass)
			fail_msg("%s: %s by art/** ui/*.png -p pc, expected %s",
			         cases[i].name, cases[i].pass ? "left out" : "passed",
			         cases[i].pass ? "passed" : "left out");
		assert_int_equal(evfilter_pass(NULL, e), 1);
	}
	/* each half alone */
	assert_int_equal(evfilter_pass(globs_only, event_make(&p, K_STEP, "ps5", "art/a")), 1);
	assert_int_equal(evfilter_pass(globs_only, event_make(&p, K_STEP, "pc", "b")), 0);
	assert_int_equal(evfilter_pass(profile_only, event_make(&p, K_STEP, "pc", "b")), 1);
	assert_int_equal(evfilter_pass(profile_only, event_make(&p, K_STEP, "pcx", "b")), 0);
	evfilter_free(f);
	evfilter_free(globs_only);
	evfilter_free(profile_only);
}

static void
no_filter_is_made_for_an_empty_one(void **state)
{
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	struct ev_filter *f = (struct ev_filter *)&rq;
	char why[64] = "";

	(void)state;
	assert_int_equal(evfilter_new(&rq, &f, why, sizeof why), 0);
	assert_null(f);
}

static void
an_oversized_or_malformed_filter_is_refused_with_the_reason(void **state)
{
	char *many[KILN_FILTER_MAX_URLS + 1], big[KILN_GLOB_MAX + 2];
	char longprof[KILN_FILTER_MAX_PROFILE + 2];
	static char bad[] = "art/[ab", ok[] = "art/**";
	static const struct {
		const char *name;
		size_t nurls;
		int big_glob, bad_glob, long_profile;
		const char *says;
	} cases[] = {
		{"one glob too many", KILN_FILTER_MAX_URLS + 1, 0, 0, 0, "17 URL globs; at most 16"},
		{"a glob one byte too long", 1, 1, 0, 0, "1025 bytes long; at most 1024"},
		{"a malformed glob", 1, 0, 1, 0, "URL glob 'art/[ab'"},
		{"a profile one byte too long", 0, 0, 0, 1, "profile is 256 bytes long; at most 255"},
	};

	(void)state;
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memset(longprof, 'p', sizeof longprof - 1);
	longprof[sizeof longprof - 1] = '\0';
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
		struct ev_filter *f = NULL;
		char why[256] = "";
		for (size_t k = 0; k < cases[i].nurls; k++)
			many[k] = cases[i].big_glob ? big : cases[i].bad_glob ? bad : ok;
		rq.n_urls = cases[i].nurls;
		rq.urls = many;
		if (cases[i].long_profile)
			rq.profile = longprof;
		if (evfilter_new(&rq, &f, why, sizeof why) != KILN_EINVAL)
			fail_msg("%s: not refused", cases[i].name);
		assert_null(f);
		if (strstr(why, cases[i].says) == NULL)
			fail_msg("%s: says '%s', expected '%s' in it", cases[i].name,
			         why, cases[i].says);
	}
	/* exactly at the limits: accepted */
	big[KILN_GLOB_MAX] = '\0';
	longprof[KILN_FILTER_MAX_PROFILE] = '\0';
	for (size_t k = 0; k < KILN_FILTER_MAX_URLS; k++)
		many[k] = k == 0 ? big : ok;
	{
		Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
		struct ev_filter *f = NULL;
		char why[256] = "";
		rq.n_urls = KILN_FILTER_MAX_URLS;
		rq.urls = many;
		rq.profile = longprof;
		if (evfilter_new(&rq, &f, why, sizeof why) != 0)
			fail_msg("at the limits: refused: %s", why);
		evfilter_free(f);
	}
}

/* A ring of ring_events events with a subscription filtered by url glob
 * glob (NULL: none) on pipe 7. */
static struct kilnd_events *
subscribed_filtered(uint32_t ring_events, const char *glob, uint64_t *sub,
                    uint64_t *epoch, uint64_t *after)
{
	struct kilnd_events *ev;
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	Kiln__SubscribeReply rep = KILN__SUBSCRIBE_REPLY__INIT;
	const char *urls[] = {glob, NULL};

	assert_int_equal(events_new(ring_events, 1 << 20, 4, &ev), 0);
	assert_int_equal(events_subscribe(ev, 7, &rq, glob ? filter_of(urls, "") : NULL,
	                                  &rep), 0);
	*sub = rep.subscription;
	*epoch = rep.epoch;
	*after = rep.after_seq;
	return ev;
}

/* Poll at once after *after and describe the reply in out: each event as
 * "SEQ:URL" (a step), "SEQ:lost:FIRST-LAST" (an overflow) or "SEQ:done"
 * (a build's end), then "through:N"; move *after to through. */
static void
poll_words(struct kilnd_events *ev, uint64_t sub, uint64_t epoch,
           uint64_t *after, char *out, size_t outlen)
{
	Kiln__PollRequest q = KILN__POLL_REQUEST__INIT;
	uint8_t *buf = NULL;
	size_t len = 0, used = 0;
	uint32_t park;
	Kiln__Reply *rep;

	q.subscription = sub;
	q.epoch = epoch;
	q.after_seq = *after;
	assert_int_equal(events_poll(ev, 7, &q, 1 << 20, NULL, &park, &buf, &len), 0);
	rep = kiln__reply__unpack(NULL, len, buf);
	assert_non_null(rep);
	out[0] = '\0';
	for (size_t i = 0; i < rep->poll_reply->n_events; i++) {
		const Kiln__Event *e = rep->poll_reply->events[i];
		if (e->kind_case == KILN__EVENT__KIND_STEP)
			used += (size_t)snprintf(out + used, outlen - used, "%" PRIu64 ":%s ",
			                         e->seq, e->step->url);
		else if (e->kind_case == KILN__EVENT__KIND_OVERFLOW)
			used += (size_t)snprintf(out + used, outlen - used,
			                         "%" PRIu64 ":lost:%" PRIu64 "-%" PRIu64 " ",
			                         e->seq, e->overflow->first_lost,
			                         e->overflow->last_lost);
		else
			used += (size_t)snprintf(out + used, outlen - used, "%" PRIu64 ":done ",
			                         e->seq);
	}
	snprintf(out + used, outlen - used, "through:%" PRIu64, rep->poll_reply->through);
	*after = rep->poll_reply->through;
	kiln__reply__free_unpacked(rep, NULL);
	free(buf);
}

static void
a_filtered_poll_gets_the_matching_steps_and_moves_past_the_rest(void **state)
{
	uint64_t sub, epoch, after;
	char got[512];
	struct kilnd_events *ev = subscribed_filtered(64, "a*", &sub, &epoch, &after);

	(void)state;
	publish_step(ev, "a1");
	publish_step(ev, "b1");
	publish_step(ev, "b2");
	publish_step(ev, "a2");
	publish_step(ev, "b3");
	publish_finished(ev);
	publish_step(ev, "b4");
	poll_words(ev, sub, epoch, &after, got, sizeof got);
	assert_string_equal(got, "1:a1 4:a2 6:done through:7");
	/* nothing more passes: an empty reply, the cursor where it was */
	publish_step(ev, "b5");
	poll_words(ev, sub, epoch, &after, got, sizeof got);
	assert_string_equal(got, "through:8");
	events_free(ev);
}

static void
a_filtered_parked_poll_wakes_only_for_an_event_it_passes(void **state)
{
	struct waiter_box b = {.w.wake = on_wake};
	uint64_t sub, epoch, after;
	uint32_t park = 0;
	struct kilnd_events *ev = subscribed_filtered(64, "a*", &sub, &epoch, &after);

	(void)state;
	publish_step(ev, "b1"); /* already there when it polls: not ready */
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 0),
	                 EVENTS_PARKED);
	publish_step(ev, "b2");
	assert_int_equal(b.wakes, 0);
	publish_step(ev, "a1");
	assert_int_equal(b.wakes, 1);
	events_unpark(ev, &b.w);
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	assert_int_equal(after, 3);
	events_free(ev);
}

static void
events_a_filter_left_out_are_never_reported_lost(void **state)
{
	uint64_t sub, epoch, after, usub, uepoch, uafter;
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	Kiln__SubscribeReply rep = KILN__SUBSCRIBE_REPLY__INIT;
	char got[512];
	struct kilnd_events *ev = subscribed_filtered(4, "a*", &sub, &epoch, &after);

	(void)state;
	assert_int_equal(events_subscribe(ev, 7, &rq, NULL, &rep), 0);
	usub = rep.subscription, uepoch = rep.epoch, uafter = rep.after_seq;
	publish_step(ev, "a1");
	poll_words(ev, sub, epoch, &after, got, sizeof got);
	assert_string_equal(got, "1:a1 through:1");
	/* ten it leaves out, while the ring holds four: the unfiltered
	 * subscriber lost some, the filtered one nothing */
	for (int i = 0; i < 10; i++)
		publish_step(ev, "b");
	poll_words(ev, usub, uepoch, &uafter, got, sizeof got);
	assert_string_equal(got, "7:lost:1-7 8:b 9:b 10:b 11:b through:11");
	poll_words(ev, sub, epoch, &after, got, sizeof got);
	assert_string_equal(got, "through:11");
	/* one it passes goes, then is pushed out: that one is lost */
	publish_step(ev, "a2");
	for (int i = 0; i < 4; i++)
		publish_step(ev, "b");
	poll_words(ev, sub, epoch, &after, got, sizeof got);
	assert_string_equal(got, "12:lost:12-12 through:16");
	events_free(ev);
}


/* ---- snapshots ---------------------------------------------------------- */

/* A snapshot of n steps "pc" "<long>/<i>", each with one output. */
static struct engine_snap *
snap_made(size_t n)
{
	struct engine_snap *s = calloc(1, sizeof *s);
	size_t cap = 64 + n * 400;

	assert_non_null(s);
	assert_non_null(s->strs = calloc(1, cap));
	assert_non_null(s->steps = calloc(n, sizeof *s->steps));
	assert_non_null(s->outs = calloc(n, sizeof *s->outs));
	s->len = 1; /* offset 0: "" */
	s->len += (size_t)sprintf(s->strs + s->len, "pc") + 1;
	s->len += (size_t)sprintf(s->strs + s->len, "out") + 1;
	for (size_t i = 0; i < n; i++) {
		struct engine_snap_step *st = &s->steps[s->n++];
		struct engine_snap_out *o = &s->outs[s->nouts++];
		st->profile = 1;
		st->url = (uint32_t)s->len;
		s->len += (size_t)sprintf(s->strs + s->len, "%0200zu", i) + 1;
		o->name = 4;
		o->path = (uint32_t)s->len;
		s->len += (size_t)sprintf(s->strs + s->len, "build/pc/%0100zu", i) + 1;
		o->size = i;
		o->id.b[0] = (uint8_t)i;
		st->out0 = (uint32_t)i;
		st->nouts = 1;
		st->state = i % 2 ? SNAP_BUILT : SNAP_FAILED;
		st->building = i % 3 == 0;
	}
	return s;
}

static void
a_snapshot_is_paged_within_the_bounds_each_step_once_in_order(void **state)
{
	size_t max = kiln_proto_chunk_max(KILN_MAX_MESSAGE_MIN), seen = 0;
	struct engine_snap *s = snap_made(700);
	struct ev_pages *p;

	(void)state;
	assert_int_equal(evsnap_pages(s, NULL, 5, 9, max, KILN_POLL_MAX_EVENTS, &p), 0);
	assert_non_null(p);
	/* 700 steps of some 330 bytes: the bytes bound them, not the 256 */
	if (p->n < 4)
		fail_msg("%u pages for 700 steps of 330 bytes in %zu", p->n, max);
	assert_int_equal(p->steps, 700);
	for (uint32_t k = 0; k < p->n; k++) {
		Kiln__Reply *rep = kiln__reply__unpack(NULL, p->page[k].len, p->page[k].buf);
		const Kiln__PollReply *pr;
		assert_non_null(rep);
		if (p->page[k].len > max)
			fail_msg("page %u is %zu bytes; at most %zu", k + 1, p->page[k].len, max);
		pr = rep->poll_reply;
		assert_int_equal(pr->epoch, 5);
		assert_int_equal(pr->through, 9);
		assert_int_equal(pr->n_events, 0);
		assert_int_equal(pr->snapshot_more, k + 1 < p->n);
		for (size_t i = 0; i < pr->n_snapshot; i++, seen++) {
			char want[256];
			snprintf(want, sizeof want, "%0200zu", seen);
			assert_string_equal(pr->snapshot[i]->url, want);
			assert_string_equal(pr->snapshot[i]->profile, "pc");
			assert_int_equal(pr->snapshot[i]->n_outputs, 1);
			assert_int_equal(pr->snapshot[i]->outputs[0]->size, seen);
			assert_int_equal(pr->snapshot[i]->state, seen % 2 ? 0 : 1);
			assert_int_equal(pr->snapshot[i]->building, seen % 3 == 0);
		}
		kiln__reply__free_unpacked(rep, NULL);
	}
	assert_int_equal(seen, 700);
	evsnap_free(p);
	/* at most 256 steps a page, whatever their size */
	s->n = 600;
	for (size_t i = 0; i < s->n; i++)
		s->steps[i].nouts = 0;
	assert_int_equal(evsnap_pages(s, NULL, 5, 9, 1 << 30, KILN_POLL_MAX_EVENTS, &p), 0);
	assert_int_equal(p->n, 3);
	evsnap_free(p);
	/* none: no pages */
	s->n = 0;
	assert_int_equal(evsnap_pages(s, NULL, 5, 9, max, KILN_POLL_MAX_EVENTS, &p), 0);
	assert_null(p);
	engine_snap_free(s);
}

/* Poll page `page` of sub's snapshot: its step count, or the error. */
static int
page_steps(struct kilnd_events *ev, uint64_t sub, uint64_t epoch, uint64_t after,
           uint32_t page)
{
	Kiln__PollRequest q = KILN__POLL_REQUEST__INIT;
	uint8_t *buf = NULL;
	size_t len = 0;
	uint32_t park;
	int rv;

	q.subscription = sub;
	q.epoch = epoch;
	q.after_seq = after;
	q.wait_ms = 5000; /* a page never waits */
	q.snapshot_page = page;
	if ((rv = events_poll(ev, 7, &q, 1 << 20, NULL, &park, &buf, &len)) == 0) {
		Kiln__Reply *rep = kiln__reply__unpack(NULL, len, buf);
		assert_non_null(rep);
		rv = (int)rep->poll_reply->n_snapshot;
		assert_int_equal(rep->poll_reply->n_events, 0);
		kiln__reply__free_unpacked(rep, NULL);
		free(buf);
	}
	return rv;
}

static void
a_subscriptions_pages_are_kept_until_it_polls_for_events(void **state)
{
	uint64_t sub, epoch, after;
	struct kilnd_events *ev = subscribed(&sub, &epoch, &after);
	struct engine_snap *s = snap_made(300);
	struct ev_pages *p;
	struct waiter_box b = {.w.wake = on_wake};
	uint32_t park;

	(void)state;
	assert_int_equal(evsnap_pages(s, NULL, epoch, after, 1 << 30, 256, &p), 0);
	engine_snap_free(s);
	assert_int_equal(events_snapshot_attach(ev, 7, sub + 1, p), KILN_ENOTFOUND);
	assert_int_equal(events_snapshot_attach(ev, 7, sub, p), 0);
	publish_step(ev, "a"); /* events wait meanwhile */
	assert_int_equal(page_steps(ev, sub, epoch, after, 2), 44);
	assert_int_equal(page_steps(ev, sub, epoch, after, 1), 256);
	assert_int_equal(page_steps(ev, sub, epoch, after, 1), 256); /* again */
	assert_int_equal(page_steps(ev, sub, epoch, after, 3), KILN_ERANGE);
	/* the first poll for events: the step published after the cursor */
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	assert_int_equal(page_steps(ev, sub, epoch, after, 1), KILN_ERANGE);
	events_free(ev);
}

static void
the_snapshots_held_at_once_are_capped(void **state)
{
	uint64_t sub, epoch, after, sub2;
	struct kilnd_events *ev = subscribed(&sub, &epoch, &after);
	Kiln__SubscribeRequest rq = KILN__SUBSCRIBE_REQUEST__INIT;
	Kiln__SubscribeReply rep = KILN__SUBSCRIBE_REPLY__INIT;
	struct engine_snap *s = snap_made(100);
	struct ev_pages *p1, *p2;
	struct waiter_box b = {.w.wake = on_wake};
	uint32_t park;

	(void)state;
	assert_int_equal(events_subscribe(ev, 7, &rq, NULL, &rep), 0);
	sub2 = rep.subscription;
	assert_int_equal(evsnap_pages(s, NULL, epoch, after, 1 << 30, 256, &p1), 0);
	assert_int_equal(evsnap_pages(s, NULL, epoch, after, 1 << 30, 256, &p2), 0);
	engine_snap_free(s);
	/* room for one */
	events_snapshot_max(ev, p1->bytes + p1->bytes / 2);
	assert_int_equal(events_snapshot_attach(ev, 7, sub, p1), 0);
	assert_int_equal(events_snapshot_attach(ev, 7, sub2, p2), KILN_EBUSY);
	/* read: its room is free again */
	publish_step(ev, "a");
	assert_int_equal(poll_after(ev, sub, epoch, &after, 0, &b, &park, 1), 0);
	assert_int_equal(events_snapshot_attach(ev, 7, sub2, p2), 0);
	assert_int_equal(page_steps(ev, sub2, epoch, 0, 1), 100);
	/* a closed subscription's room too */
	assert_int_equal(events_unsubscribe(ev, 7, sub2), 0);
	assert_int_equal(evsnap_pages(s = snap_made(100), NULL, epoch, after, 1 << 30,
	                              256, &p1), 0);
	engine_snap_free(s);
	assert_int_equal(events_snapshot_attach(ev, 7, sub, p1), 0);
	events_free(ev);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gathering_holds_steps_and_a_build_end_wakes_it),
		cmocka_unit_test(without_gathering_every_poll_is_answered_at_once),
		cmocka_unit_test(a_full_reply_is_not_held_back),
		cmocka_unit_test(a_filter_passes_what_names_its_assets_and_everything_else),
		cmocka_unit_test(no_filter_is_made_for_an_empty_one),
		cmocka_unit_test(an_oversized_or_malformed_filter_is_refused_with_the_reason),
		cmocka_unit_test(a_filtered_poll_gets_the_matching_steps_and_moves_past_the_rest),
		cmocka_unit_test(a_filtered_parked_poll_wakes_only_for_an_event_it_passes),
		cmocka_unit_test(events_a_filter_left_out_are_never_reported_lost),
		cmocka_unit_test(a_snapshot_is_paged_within_the_bounds_each_step_once_in_order),
		cmocka_unit_test(a_subscriptions_pages_are_kept_until_it_polls_for_events),
		cmocka_unit_test(the_snapshots_held_at_once_are_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
