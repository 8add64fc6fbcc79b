/* live.c — kiln_live: keeping some steps up to date as their files
 * change (kiln.h), for `kiln watch` and for editors.
 *
 * A live build is a loop on the client's own connection: build, follow
 * that build's events, and when the daemon reports changed files
 * (SourcesChanged) build again — at once if no build of ours runs, else
 * as soon as it ends, so an edit made while a build runs is never left
 * unbuilt. The engine shares work between builds, so many live builds of
 * overlapping steps cost one run of each step. The loop lives as long as
 * the connection: a client that dies leaves nothing behind in the daemon
 * (its running build is cancelled as any dead client's is).
 *
 * A filter set with kiln_events_filter narrows what fn gets (an editor
 * asks for the steps of the assets it loads, not their prerequisites');
 * the loop's own events, the changes and its builds' ends, pass any
 * filter whose profile is the one built, which kiln_live checks.
 *
 * kiln_changes_hold: a checkout's thousands of changes as one batch. */
#include <stdio.h>
#include <string.h>

#include "libkiln_int.h"

struct live {
	kiln_conn *c;
	const kiln_build_opts *o;
	kiln_event_fn fn;
	void *arg;
	uint64_t build;         /* ours, running; 0: none */
	int again;              /* files changed while it ran */
	char profile[256];      /* the profile built */
};

static int
live_start(struct live *l)
{
	uint32_t nsteps;
	int rv;

	l->again = 0;
	if ((rv = kiln_build_start(l->c, l->o, &l->build, &nsteps, l->profile,
	                           sizeof l->profile)) != 0)
		l->build = 0;
	return rv;
}

/* A filter for another profile would hide our builds' ends: the loop
 * would wait for them forever. 0, or KILN_EINVAL with c's error set. */
static int
live_filter_check(struct live *l)
{
	const char *want = l->c->sub.profile;

	if (want == NULL || strcmp(want, l->profile) == 0)
		return 0;
	snprintf(l->c->error, sizeof(l->c->error), "the event filter's profile "
	         "'%s' is not the profile built ('%s')", want, l->profile);
	return KILN_EINVAL;
}

static int
ours(const struct live *l, const kiln_step_event *s)
{
	for (size_t i = 0; i < s->nbuilds; i++)
		if (s->builds[i] == l->build)
			return 1;
	return 0;
}

/* Build again after a change. A build the daemon refuses (the
 * descriptions now have errors, a target matches nothing) does not end
 * the loop: fn gets the daemon's words as an error LOG event, and the next
 * change builds again. 0, 1 (fn asked to stop), or an error. */
static int
live_again(struct live *l)
{
	kiln_event ev;
	int rv = live_start(l);

	if (rv != KILN_EBADPROJECT && rv != KILN_EINVAL)
		return rv;
	memset(&ev, 0, sizeof ev);
	ev.type = KILN_EVENT_LOG;
	ev.level = 2;
	ev.text = kiln_conn_error(l->c);
	ev.profile = ev.url = "";
	kiln_events_cursor(l->c, &ev.at);
	return l->fn(&ev, l->arg) != 0;
}

/* Events were lost: fn hears so (an editor may reload everything), and
 * our build's end may have been among them — the loop would wait for it
 * for ever, never building again. Ask the daemon: a build that ended is
 * given to fn as its BUILD_DONE (from its summary), one the daemon forgot
 * as ended without one. Then build again, as the lost events may have
 * been changes. 0, 1 (fn asked to stop), or an error. */
static int
live_overflow(struct live *l, const kiln_event *ev)
{
	kiln_build_summary bs;
	kiln_event done;
	int rv;

	if (l->fn(ev, l->arg) != 0)
		return 1;
	if (ev->evicted) /* nothing lost: the next poll subscribes again */
		return 0;
	if (l->build != 0) {
		rv = kiln_build_status(l->c, l->build, &bs);
		if (rv != 0 && rv != KILN_ENOTFOUND)
			return rv;
		if (rv == 0 && !bs.done) {
			l->again = 1; /* it still runs: its end will come */
			return 0;
		}
		l->build = 0;
		if (rv == 0) {
			memset(&done, 0, sizeof done);
			done.type = KILN_EVENT_BUILD_DONE;
			done.at = ev->at;
			done.time_ns = ev->time_ns;
			done.profile = done.url = "";
			done.build = &bs;
			if (l->fn(&done, l->arg) != 0)
				return 1;
		}
	}
	return live_again(l);
}

/* One event. 0 to go on, 1 when fn asked to stop, or an error. */
static int
live_event(struct live *l, const kiln_event *ev)
{
	switch (ev->type) {
	case KILN_EVENT_STOPPING:
		return KILN_ECLOSED;
	case KILN_EVENT_OVERFLOW:
		return live_overflow(l, ev);
	case KILN_EVENT_SOURCES_CHANGED:
		if (l->fn(ev, l->arg) != 0)
			return 1;
		if (l->build != 0) {
			l->again = 1;
			return 0;
		}
		return live_again(l);
	case KILN_EVENT_STEP:
		if (l->build != 0 && ours(l, ev->step) && l->fn(ev, l->arg) != 0)
			return 1;
		return 0;
	case KILN_EVENT_SNAPSHOT:      /* kiln_events_snapshot: what was */
	case KILN_EVENT_SNAPSHOT_END:  /* there before the first build */
		return l->fn(ev, l->arg) != 0;
	case KILN_EVENT_BUILD_DONE:
		if (l->build == 0 || ev->build->build != l->build)
			return 0;
		l->build = 0;
		if (l->fn(ev, l->arg) != 0)
			return 1;
		return l->again ? live_again(l) : 0;
	default:
		return 0;
	}
}

int
kiln_live(kiln_conn *c, const kiln_build_opts *o, const volatile int *stop,
          kiln_event_fn fn, void *arg)
{
	struct live l = {.c = c, .o = o, .fn = fn, .arg = arg};
	kiln_event ev;
	int rv;

	if ((rv = kiln_subscribe(c, NULL)) != 0 || (rv = live_start(&l)) != 0)
		return rv;
	if ((rv = live_filter_check(&l)) != 0) {
		kiln_build_cancel(c, l.build);
		return rv;
	}
	while (stop == NULL || !*stop) {
		rv = kiln_events_poll(c, 200, &ev);
		if (rv == KILN_ETIMEDOUT)
			continue;
		if (rv != 0 || (rv = live_event(&l, &ev)) != 0)
			break;
	}
	if (l.build != 0)
		kiln_build_cancel(c, l.build);
	return rv == 1 ? 0 : rv == KILN_ETIMEDOUT ? 0 : rv;
}

int
kiln_changes_hold(kiln_conn *c, enum kiln_hold what)
{
	Kiln__Request req;
	Kiln__HoldRequest q = KILN__HOLD_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.release = what == KILN_RELEASE;
	q.release_all = what == KILN_RELEASE_ALL;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_HOLD;
	req.hold = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY__NOT_SET, &r)) != 0)
		return rv;
	conn_reply_free(&r);
	return 0;
}

int
kiln_changes_held(kiln_conn *c)
{
	Kiln__Request req;
	Kiln__HoldRequest q = KILN__HOLD_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.query = 1;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_HOLD;
	req.hold = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_HOLD_REPLY, &r)) != 0)
		return rv;
	rv = r.rep->hold_reply->held ? 1 : 0;
	conn_reply_free(&r);
	return rv;
}

int
kiln_ui_start(kiln_conn *c, unsigned port, const char *listen, char *url,
              size_t len)
{
	Kiln__Request req;
	Kiln__UiRequest q = KILN__UI_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.port = port;
	q.listen = (char *)(listen ? listen : "");
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_UI;
	req.ui = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_UI_REPLY, &r)) != 0)
		return rv;
	snprintf(url, len, "%s", r.rep->ui_reply->url);
	conn_reply_free(&r);
	return 0;
}
