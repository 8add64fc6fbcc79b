/* test_events.c — the daemon's event ring and parked polls (events.c):
 * a poll that gathers (gather_ms) holds step events back until its gather
 * time ends, but a build's end wakes it at once. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "events.h"

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
	assert_int_equal(events_subscribe(ev, 7, &rq, &rep), 0);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gathering_holds_steps_and_a_build_end_wakes_it),
		cmocka_unit_test(without_gathering_every_poll_is_answered_at_once),
		cmocka_unit_test(a_full_reply_is_not_held_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
