/* step_events.c — what the engine publishes through its publish callback:
 * a StepEvent for each finished step, and the summary of a build (its
 * BuildFinished event, and engine_build_status's answer).
 *
 * Threads: the caller holds e->mu (a build's step events go out before its
 * end). */
#include <stdlib.h>

#include "engine_int.h"
#include "discover.h"
#include "estimate.h"
#include "step.h"
#include "step_events.h"

/* n's result as a StepEvent says it; STEP_NONE for a step up to date,
 * which sends no event of its own. */
int
step_result(const struct node *n)
{
	switch ((enum node_state)n->st) {
	case N_FAILED: return KILN__STEP_EVENT__RESULT__FAILED;
	case N_SKIPPED: return KILN__STEP_EVENT__RESULT__SKIPPED;
	case N_CANCELLED: return KILN__STEP_EVENT__RESULT__CANCELLED;
	case N_WOULD_RUN: return KILN__STEP_EVENT__RESULT__WOULD_RUN;
	case N_DONE:
		return n->outcome == O_RAN ? KILN__STEP_EVENT__RESULT__RAN
		     : n->outcome == O_REUSED ? KILN__STEP_EVENT__RESULT__REUSED
		     : STEP_NONE;
	default: return STEP_NONE;
	}
}

/* Publish a StepEvent for n to the builds of mask, saying result (a step
 * up to date: REUSED), with reason when n has none (e->mu held). Each of
 * those builds notes what it was told (build.told). */
static void
step_event_send(struct engine *e, struct graph *g, struct node *n, uint64_t mask,
                int result, const char *reason)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__StepEvent se = KILN__STEP_EVENT__INIT;
	uint64_t ids[ENGINE_MAX_BUILDS];
	struct pb_outputs *po = NULL;
	const struct build *first = NULL;
	size_t nids = 0;

	if (result == STEP_NONE)
		result = KILN__STEP_EVENT__RESULT__REUSED;
	for (uint64_t m = mask; m != 0; m &= m - 1) {
		struct build *b = e->active[__builtin_ctzll(m)];
		if (b == NULL)
			continue;
		ids[nids++] = b->id;
		if (first == NULL)
			first = b;
		if (b->told != NULL)
			b->told[n->idx] = (uint8_t)(result + 1);
	}
	n->event_wave = e->wave;
	n->event_outcome = n->st == N_DONE ? n->outcome : O_FAILED;
	se.builds = ids;
	se.n_builds = nids;
	se.profile = g->profile;
	se.url = (char *)n->ks->url;
	se.result = (Kiln__StepEvent__Result)result;
	se.reason = n->reason ? n->reason : (char *)reason;
	se.error = n->st == N_FAILED && n->error ? n->error : (char *)"";
	if (n->st == N_DONE && n->have && (po = step_outputs_pb(n, 1)) != NULL) {
		se.outputs = po->p;
		se.n_outputs = po->n;
	}
	if (n->st == N_DONE && n->have) {
		se.warnings = n->warnings;
		se.n_warnings = step_nwarnings(n);
	}
	if (n->w != NULL && n->w->has_log) {
		se.log.data = n->w->log_id.b;
		se.log.len = 16;
	}
	if (n->st == N_FAILED && n->w != NULL) {
		se.exit_code = n->w->res.exited ? n->w->res.status : 0;
		se.signal = n->w->res.exited ? 0 : n->w->res.status;
	}
	if (n->w != NULL && n->w->machine[0] != '\0')
		se.machine = n->w->machine;
	se.duration_ns = n->duration_ns;
	se.estimate_ns = n->est_ns;
	if (first != NULL) {
		se.done = first->finished;
		se.total = first->total;
		se.left_ns = first->left_ms * 1000000;
	}
	ev.kind_case = KILN__EVENT__KIND_STEP;
	ev.step = &se;
	e->cfg.publish(e->cfg.arg, &ev);
	free(po);
}

void
publish_step(struct engine *e, struct graph *g, struct node *n, int fresh)
{
	int r = step_result(n), said = r == STEP_NONE ? KILN__STEP_EVENT__RESULT__REUSED : r;
	/* up to date, but an output edited in build/ was put back (decide.c):
	 * told, as a reuse, so the build and a game watching hear of it */
	int restored = fresh && r == STEP_NONE && n->restored != NULL;
	uint64_t mask = 0;

	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		const struct build *b = e->active[__builtin_ctzll(m)];
		int told = b != NULL && b->told != NULL ? b->told[n->idx] - 1 : STEP_NONE;
		if (b == NULL)
			continue;
		if ((fresh && r != STEP_NONE) || restored || (told != STEP_NONE && told != said) ||
		    (told == STEP_NONE && r != STEP_NONE &&
		     r != KILN__STEP_EVENT__RESULT__CANCELLED))
			mask |= m & -m;
	}
	/* with no build left (cancelled), subscribers still see the result */
	if (mask != 0 || (fresh && r != STEP_NONE))
		step_event_send(e, g, n, mask, r, r == STEP_NONE ? "up to date (decided "
		                "again in this build)" : "done already in this wave, for "
		                "a build running at the same time");
}

void
publish_step_joined(struct engine *e, struct graph *g, struct node *n, struct build *b)
{
	int r = step_result(n);

	if (r != STEP_NONE && r != KILN__STEP_EVENT__RESULT__CANCELLED)
		step_event_send(e, g, n, 1ULL << b->slot, r, "done already in this "
		                "wave, for a build running at the same time");
}

void
publish_step_started(struct engine *e, struct graph *g, struct node *n)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__StepStarted ss = KILN__STEP_STARTED__INIT;
	uint64_t ids[ENGINE_MAX_BUILDS];
	const struct build *first = NULL;
	/* its last recorded run's; else the scheduler's estimate when it is
	 * more than a default guess (estimate.h) */
	uint64_t expected = n->w != NULL && n->w->prev != NULL ? n->w->prev->duration_ns
	                  : n->have ? n->duration_ns : step_estimate_known_ns(e, n);
	uint64_t ms = expected / 1000000;

	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		struct build *b = e->active[__builtin_ctzll(m)];
		if (b == NULL)
			continue;
		ids[ss.n_builds++] = b->id;
		if (first == NULL)
			first = b;
		/* learnt only now (a daemon that had not built it): counted */
		if (b->expect_ms != NULL && b->expect_ms[n->idx] == 0 && ms > 0) {
			b->expect_ms[n->idx] = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
			b->left_ms += b->expect_ms[n->idx];
		}
	}
	ss.builds = ids;
	ss.profile = g->profile;
	ss.url = (char *)n->ks->url;
	ss.expected_ns = expected;
	if (first != NULL) {
		ss.done = first->finished;
		ss.total = first->total;
		ss.left_ns = first->left_ms * 1000000;
	}
	ev.kind_case = KILN__EVENT__KIND_STEP_STARTED;
	ev.step_started = &ss;
	e->cfg.publish(e->cfg.arg, &ev);
}

void
summary_fill(const struct build *b, Kiln__BuildFinished *bf)
{
	kiln__build_finished__init(bf);
	bf->build = b->id;
	bf->profile = (char *)b->profile;
	bf->done = b->done;
	bf->total = b->total;
	bf->ran = b->ran;
	bf->reused = b->reused;
	bf->failed = b->failed;
	bf->skipped = b->skipped;
	bf->cancelled = b->ncancelled;
	bf->would_run = b->would_run;
	bf->files_statted = b->files_statted;
	bf->duration_ns = b->done ? b->duration_ns
	                          : (uint64_t)(kiln_mono_ns() - b->start_ns);
	bf->index = (char *)b->index;
	bf->error = (char *)b->error;
}
