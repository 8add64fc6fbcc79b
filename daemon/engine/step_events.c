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

/* Publish a StepEvent for n (e->mu held). */
void
publish_step(struct engine *e, struct graph *g, struct node *n)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__StepEvent se = KILN__STEP_EVENT__INIT;
	uint64_t ids[ENGINE_MAX_BUILDS];
	struct pb_outputs *po = NULL;
	const struct build *first = NULL;
	size_t nids = 0;

	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		int i = __builtin_ctzll(m);
		if (e->active[i] != NULL) {
			ids[nids++] = e->active[i]->id;
			if (first == NULL)
				first = e->active[i];
		}
	}
	se.builds = ids;
	se.n_builds = nids;
	se.profile = g->profile;
	se.url = (char *)n->ks->url;
	switch ((enum node_state)n->st) {
	case N_FAILED: se.result = KILN__STEP_EVENT__RESULT__FAILED; break;
	case N_SKIPPED: se.result = KILN__STEP_EVENT__RESULT__SKIPPED; break;
	case N_CANCELLED: se.result = KILN__STEP_EVENT__RESULT__CANCELLED; break;
	case N_WOULD_RUN: se.result = KILN__STEP_EVENT__RESULT__WOULD_RUN; break;
	default:
		se.result = n->outcome == O_RAN ? KILN__STEP_EVENT__RESULT__RAN
		                                : KILN__STEP_EVENT__RESULT__REUSED;
	}
	se.reason = n->reason ? n->reason : (char *)"";
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
