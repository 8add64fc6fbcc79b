/* schedule.c — the scheduler: the ready and runnable heaps, finishing a
 * node (and releasing or skipping its dependents), and the worker threads
 * that decide ready steps, start runnable ones and finish those whose tool
 * ended (see schedule.h; decide.c, run.c and publish.c do the work of one
 * step, builds.c asks for the steps).
 *
 * A wave is the time from a build starting on an idle engine to the last
 * active build ending. Within a wave each step is decided at most once:
 * a build arriving while others run joins the steps they already have
 * (running, queued or done) and schedules only the rest, so overlapping
 * builds share work. Between waves every step is decided afresh (each file
 * stat'ed once per wave).
 *
 * Scheduling is samurai's: a step waits on a count of unfinished
 * prerequisites and goes onto the ready heap when the last one finishes;
 * workers decide ready steps (key, cache), and those out of date wait on
 * the runnable heap for one of the -j slots. Both heaps order by the
 * build's priority, then the longest path from the step to an end in
 * estimated seconds (critical path first; estimate.c), then in steps.
 * A running tool holds no worker: the spawner's reaper hands its end back
 * as a completion (engine_tool_done, on the reaper thread).
 *
 * Threads: e->mu guards the heaps, the completions and every node's
 * scheduling fields (engine_int.h); a worker drops it while it decides,
 * starts or finishes a step it holds. Events are published with e->mu
 * held, which keeps a build's step events before its end. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "timeline.h"
#include "builds.h"
#include "decide.h"
#include "edits.h"
#include "estimate.h"
#include "lost.h"
#include "need.h"
#include "publish.h"
#include "record_batch.h"
#include "run.h"
#include "schedule.h"
#include "selfwrite.h"
#include "agent_jobs.h"
#include "step.h"
#include "step_events.h"

/* ---- heaps ---------------------------------------------------------------- */

static int
item_before(const struct heap_item *a, const struct heap_item *b)
{
	if (a->prio != b->prio)
		return a->prio > b->prio;
	if (a->cp_ns != b->cp_ns)
		return a->cp_ns > b->cp_ns;
	if (a->cp != b->cp)
		return a->cp > b->cp;
	return a->idx < b->idx;
}

int
heap_push(struct heap *h, struct graph *g, struct node *n)
{
	size_t i;

	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 256;
		struct heap_item *nv = realloc(h->v, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		h->v = nv;
		h->cap = ncap;
	}
	n->heap_prio = n->prio;
	i = h->n++;
	h->v[i] = (struct heap_item){n->cp_ns, n->prio, n->cp, n->idx, g};
	while (i > 0 && item_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct heap_item t = h->v[i];
		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static void
sift_down(struct heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && item_before(&h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && item_before(&h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			break;
		struct heap_item t = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = t;
		i = m;
	}
}

static int
heap_pop(struct heap *h, struct heap_item *out)
{
	if (h->n == 0)
		return 0;
	*out = h->v[0];
	h->v[0] = h->v[--h->n];
	sift_down(h, 0);
	return 1;
}

void
heap_reorder(struct heap *h)
{
	for (size_t i = 0; i < h->n; i++)
		h->v[i].cp_ns = h->v[i].g->nodes[h->v[i].idx].cp_ns;
	for (size_t i = h->n / 2; i-- > 0;)
		sift_down(h, i);
}

/* ---- finishing nodes ------------------------------------------------------ */

/* Finish n with state st (e->mu held): count it into its builds, publish
 * its event, and release or skip its dependents (iteratively: a failure
 * can skip a long chain). */
void
node_finish(struct engine *e, struct graph *g, struct node *n, enum node_state st)
{
	uint32_t *stack = NULL;
	size_t depth = 0, cap = 0;

	for (;;) {
		int was_queued = !node_done_state(n->st) && n->st != N_IDLE;
		int fresh = n->send_event || st == N_FAILED || st == N_WOULD_RUN ||
		            (st == N_DONE && n->outcome != O_UP_TO_DATE);
		lost_node_finished(e, g, n, st);
		n->st = st;
		n->reruns = 0;
		n->finishing = 0;
		if (st != N_DONE || n->outcome != O_UP_TO_DATE)
			g->index_dirty = 1;
		/* found up to date after its run (or reuse) in this wave was
		 * told: the result of that run stands, and its builds count
		 * what they were told (decided again at a build's repass,
		 * say, for an edit of a file it does not read) */
		if (st == N_DONE && n->outcome == O_UP_TO_DATE && n->event_wave == e->wave &&
		    (n->event_outcome == O_RAN || n->event_outcome == O_REUSED))
			n->outcome = n->event_outcome;
		if (was_queued && e->queued > 0)
			e->queued--;
		for (uint64_t m = n->builds; m != 0; m &= m - 1) {
			struct build *b = e->active[__builtin_ctzll(m)];
			if (b == NULL)
				continue;
			build_count(b, n);
			if (b->tl != NULL)
				timeline_step(b->tl, n, kiln_mono_ns());
		}
		publish_step(e, g, n, fresh);
		n->send_event = 0;
		/* published and recorded: what deciding and running it used,
		 * and why it ran (`kiln why` reads the record), can go */
		node_work_free(n);
		free(n->reason);
		n->reason = NULL;
		for (uint32_t k = 0; k < n->nrdeps; k++) {
			struct node *r = &g->nodes[n->rdeps[k]];
			if (r->wave != e->wave || r->st != N_WAITING)
				continue;
			if (st == N_DONE || st == N_WOULD_RUN) {
				if (--r->waiting == 0)
					node_make_ready(e, g, r);
				continue;
			}
			/* failed, skipped or cancelled: so is r */
			if (depth == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				uint32_t *ns = realloc(stack, ncap * sizeof *ns);
				if (ns == NULL)
					continue; /* r stays waiting; its build ends at cancel */
				stack = ns;
				cap = ncap;
			}
			r->st = N_EVAL; /* claimed: not pushed twice */
			free(r->reason);
			r->reason = NULL;
			stack[depth++] = r->idx;
		}
		if (e->ndwait > 0)   /* kiln need's dynamic prerequisites */
			need_finished(e, g, n);
		if (depth == 0)
			break;
		n = &g->nodes[stack[--depth]];
		st = st == N_CANCELLED ? N_CANCELLED : N_SKIPPED;
		n->send_event = 1;
	}
	free(stack);
}

void
node_make_ready(struct engine *e, struct graph *g, struct node *n)
{
	n->st = N_READY;
	n->finishing = 0;
	if (heap_push(&e->ready, g, n) != 0) {
		free(n->error);
		n->error = strdup("out of memory scheduling the step");
		node_finish(e, g, n, N_FAILED);
		return;
	}
	pthread_cond_signal(&e->cv);
}

int
node_done_state(enum node_state st)
{
	return st == N_DONE || st == N_FAILED || st == N_SKIPPED ||
	       st == N_CANCELLED || st == N_WOULD_RUN;
}

/* Whether a build that is not stopped still wants n (e->mu held). */
int
node_wanted(const struct engine *e, const struct node *n)
{
	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		const struct build *b = e->active[__builtin_ctzll(m)];
		if (b != NULL && !b->stopped)
			return 1;
	}
	return 0;
}

unsigned
jobs_limit(const struct engine *e)
{
	unsigned j = 0;

	for (unsigned i = 0, seen = 0; i < ENGINE_MAX_BUILDS && seen < e->nactive; i++)
		if (e->active[i] != NULL) {
			unsigned bj = e->active[i]->jobs ? e->active[i]->jobs : e->jobs_default;
			seen++;
			if (bj > j)
				j = bj;
		}
	return j ? j : 1;
}

/* ---- workers -------------------------------------------------------------- */

void
completed_push(struct engine *e, struct run_ctx *rc, const struct spawn_result *r)
{
	struct node *n = rc->n;

	n->w->res = *r;
	n->w->end_ns = kiln_mono_ns();   /* its slot's end, for the timeline */
	/* learnt before its slot is given again (a worker fills a free slot
	 * before it finishes the step that freed it) */
	if (r->exited && r->status == 0 && r->wall_ns > 0)
		est_learn(e, rc->g, n, (uint64_t)r->wall_ns);
	if (e->ncompleted == e->capcompleted) {
		size_t ncap = e->capcompleted ? e->capcompleted * 2 : 64;
		struct run_ctx **nv = realloc(e->completed, ncap * sizeof *nv);
		if (nv == NULL) {
			/* cannot queue it: finish it here as failed, which at
			 * least ends its build */
			free(n->error);
			n->error = strdup("out of memory after the tool ended");
			node_finish(e, rc->g, n, N_FAILED);
			builds_check(e);
			return;
		}
		e->completed = nv;
		e->capcompleted = ncap;
	}
	e->completed[e->ncompleted++] = rc;
	pthread_cond_signal(&e->cv);
}

void
engine_tool_done(void *arg, const struct spawn_result *r)
{
	struct run_ctx *rc = arg;
	struct engine *e = rc->e;

	pthread_mutex_lock(&e->mu);
	/* the tool's slot is free now (a run suspended on kiln need had
	 * lent it out already): finishing the step is our work */
	if (need_run_end(e, rc->n))
		e->running--;
	completed_push(e, rc, r);
	pthread_mutex_unlock(&e->mu);
}

int
run_kill(struct engine *e, struct node *n, unsigned grace_ms)
{
	pid_t pid;

	if (n->w == NULL)
		return KILN_ENOTFOUND;
	if (n->w->lease != 0)
		return agent_lease_cancel(e, n);
	pid = __atomic_load_n(&n->w->pid, __ATOMIC_ACQUIRE);
	return pid > 0 ? spawner_kill(e->sp, pid, grace_ms) : KILN_ENOTFOUND;
}

static void
node_fail(struct engine *e, struct graph *g, struct node *n)
{
	n->outcome = O_FAILED;
	node_finish(e, g, n, N_FAILED);
}

/* Whether every build that wanted n was cancelled (not merely stopped by
 * a failure: a step failing then is a failure, e.g. the other side of a
 * kiln need cycle). */
static int
node_cancelled(const struct engine *e, const struct node *n)
{
	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		const struct build *b = e->active[__builtin_ctzll(m)];
		if (b != NULL && !b->cancelled)
			return 0;
	}
	return 1;
}

/* Runs of one step in a wave that may be thrown away because their
 * inputs changed while the tool ran, before the step fails: a file
 * rewritten without pause would otherwise keep it running for ever. */
#define MAX_RERUNS 3

/* n's run read inputs that changed under it (step_finish said FINISH_AGAIN,
 * nothing recorded; e->mu not held, taken): decide it again, unless it was
 * cancelled or has been thrown away too often already. */
static void
run_again(struct engine *e, struct graph *g, struct node *n, int cancelled)
{
	char msg[1400];
	int give_up = n->reruns + 1 >= MAX_RERUNS;

	snprintf(msg, sizeof msg, "%s (%s): %s; %s", n->ks->url, g->profile,
	         n->reason ? n->reason : "an input changed while its tool ran",
	         cancelled ? "cancelled" : give_up ? "giving up" : "deciding it again");
	if (e->cfg.log)
		e->cfg.log(e->cfg.arg, 0, msg);
	if (give_up && !cancelled) {
		set_error(n, "%s: its inputs kept changing while its tool ran (%d runs "
		          "thrown away; the last: %s)", n->ks->url, n->reruns + 1,
		          n->reason ? n->reason : "?");
		step_record_failure(e, g, n);
	} else if (cancelled) {
		step_forget(n);
	}
	if (!cancelled && !give_up) {
		/* a change in the clock tick the tool started in is taken for
		 * one during the run: start again in the next tick */
		struct timespec tick = {0, 0};
		clock_getres(CLOCK_REALTIME_COARSE, &tick);
		tick.tv_nsec += 1000000;
		nanosleep(&tick, NULL);
	}
	pthread_mutex_lock(&e->mu);
	if (cancelled) {
		node_finish(e, g, n, N_CANCELLED);
	} else if (give_up) {
		node_fail(e, g, n);
	} else {
		n->reruns++;
		node_make_ready(e, g, n);
	}
}

/* n's tool was cancelled because a file it reads was edited (edits.c)
 * and its run did not hold: nothing of it is kept, and the step is
 * decided again once the edits have settled (a burst of writes gives one
 * more run, not one per write). Not a failure, not one of the reruns
 * that make a step give up. e->mu not held, taken. */
static void
run_superseded(struct engine *e, struct graph *g, struct node *n)
{
	step_forget(n);
	free(n->error);
	n->error = NULL;
	edits_settle(e);
	pthread_mutex_lock(&e->mu);
	if (node_wanted(e, n))
		node_make_ready(e, g, n);
	else
		node_finish(e, g, n, N_CANCELLED);
}

/* A tool ended: finish its step (e->mu held, dropped for the work). */
static void
work_finish(struct engine *e, struct run_ctx *rc)
{
	struct node *n = rc->n;
	struct graph *g = rc->g;  /* rc lives in n->w, which may go below */
	int cancelled = !node_wanted(e, n) && node_cancelled(e, n);
	int superseded = n->superseded, selfw;
	enum finish_result r;

	n->superseded = 0;
	n->finishing = 1;   /* edits.c: its disc is ours now */
	pthread_mutex_unlock(&e->mu);
	r = step_finish(e, g, n);
	/* it wrote a project file: the edit that cancelled it, or made it
	 * stale, was (as far as anyone can tell) its own write; its failure
	 * stands (selfwrite.h) */
	if ((selfw = r != FINISH_DONE && n->selfw_path != NULL))
		selfwrite_settle(e, g, n);
	selfwrite_run_end(e, n);   /* its trace was read: its own writes known */
	if (superseded && r != FINISH_DONE && !cancelled && !selfw) {
		run_superseded(e, g, n);
		return;
	}
	if (r == FINISH_AGAIN) {
		run_again(e, g, n, cancelled);
		return;
	}
	if (r != FINISH_DONE && !cancelled)
		step_record_failure(e, g, n);
	else if (r != FINISH_DONE)
		step_forget(n);  /* cancelled is not failed: no record */
	pages_tick(e);
	pthread_mutex_lock(&e->mu);
	if (selfw)
		n->stale = 0;
	if (r != FINISH_DONE && cancelled)
		node_finish(e, g, n, N_CANCELLED);
	else if (r != FINISH_DONE)
		node_fail(e, g, n);
	else
		node_finish(e, g, n, N_DONE);
}

/* Start a runnable step's tool (e->mu held, dropped for the work). */
static void
work_start(struct engine *e, struct graph *g, struct node *n)
{
	int rv;

	n->st = N_RUNNING;
	n->est_ns = step_estimate_ns(e, n);
	e->running++;
	e->starting++;
	n->w->run = (struct run_ctx){e, g, n};
	if ((rv = need_token_add(e, g, n)) != 0)
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	else
		publish_step_started(e, g, n);
	pthread_mutex_unlock(&e->mu);
	if (rv == 0) {
		selfwrite_run_begin(e, n);
		rv = step_start(e, g, n);
	}
	if (rv != 0) {
		step_record_failure(e, g, n);
		selfwrite_run_end(e, n);
	}
	pthread_mutex_lock(&e->mu);
	if (--e->starting == 0)
		pthread_cond_broadcast(&e->idle_cv);
	/* cancelled while it started, before engine_cancel could see its
	 * pid: it would run to its end for nobody. (Its tool may have ended
	 * and its step be finishing already: pid 0, or finished: no w.) */
	if (rv == 0 && n->st == N_RUNNING && n->w != NULL && !node_wanted(e, n))
		run_kill(e, n, 2000);
	if (rv != 0) {
		need_run_end(e, n);
		e->running--;
		node_fail(e, g, n);
	}
}

/* Start a runnable step on a build agent (e->mu held, dropped for the
 * work): its job is made here, then waits for an agent to take it
 * (agent_jobs.c). Its run holds no -j slot of this machine. */
static void
work_start_remote(struct engine *e, struct graph *g, struct node *n)
{
	Kiln__AgentJob *job = NULL;
	int rv;

	n->st = N_RUNNING;
	n->est_ns = step_estimate_ns(e, n);
	e->starting++;
	n->w->run = (struct run_ctx){e, g, n};
	if ((rv = agent_lease_new(e, g, n)) != 0 || (rv = need_token_add(e, g, n)) != 0)
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	else
		publish_step_started(e, g, n);
	pthread_mutex_unlock(&e->mu);
	if (rv == 0 && (rv = step_job(e, g, n, n->w->extra, n->w->nextra, &job)) != 0)
		step_record_failure(e, g, n);
	else if (rv != 0)
		step_record_failure(e, g, n);
	pthread_mutex_lock(&e->mu);
	if (--e->starting == 0)
		pthread_cond_broadcast(&e->idle_cv);
	if (rv != 0) {
		agent_lease_failed(e, n);
		need_run_end(e, n);
		node_fail(e, g, n);
		return;
	}
	agent_lease_ready(e, n, job);
	if (!node_wanted(e, n) || e->quit)
		run_kill(e, n, 0);
}

/* Pop the next live entry of h (stale duplicates skipped). */
static struct node *
pop_live(struct heap *h, enum node_state want, struct graph **gp)
{
	struct heap_item it;

	while (heap_pop(h, &it)) {
		struct node *n = &it.g->nodes[it.idx];
		if (n->st == want && it.prio == n->heap_prio) {
			*gp = it.g;
			return n;
		}
	}
	return NULL;
}

/* Whether a worker may decide another ready step (e->mu held). Deciding
 * runs ahead of the tools by a bounded number of steps: a step decided to
 * run holds its key's parts (labels and values) until its tool
 * starts, and a 100,000-step clean build would otherwise decide every step
 * up front and hold them all. A step more urgent than every waiting one (an
 * editor's) is decided at once. */
static int
eval_room(const struct engine *e)
{
	/* agents' slots are filled from the same runnable heap */
	if (e->runnable.n < 16 + 4 * ((size_t)jobs_limit(e) + agent_jobs_slots(e)))
		return 1;
	return e->ready.n > 0 && e->ready.v[0].prio > e->runnable.v[0].prio;
}

/* Deciding a ready step, in three parts: before (e->mu held; 0 when it
 * was settled without looking at files), the work (unlocked), after
 * (e->mu held). */
static int
eval_before(struct engine *e, struct graph *g, struct node *n)
{
	int dep_would = 0;

	n->st = N_EVAL;
	n->est_ns = 0;
	n->decided_pass = e->pass_seq;
	for (uint32_t k = 0; k < n->ndeps; k++)
		if (g->nodes[n->deps[k]].st == N_WOULD_RUN)
			dep_would = k + 1;
	if (dep_would) {
		char why[600];
		snprintf(why, sizeof why, "prerequisite %s would run",
		         g->nodes[n->deps[dep_would - 1]].ks->url);
		free(n->reason);
		n->reason = strdup(why);
		node_finish(e, g, n, N_WOULD_RUN);
		return 0;
	}
	if (n->nneeds > 0 && need_prereqs(e, g, n))
		return 0;  /* waits on what its last result needed */
	return 1;
}

static enum eval_result
eval_work(struct engine *e, struct graph *g, struct node *n, int dry)
{
	enum eval_result r = step_eval(e, g, n, dry);

	if (r == EVAL_FAIL)
		step_record_failure(e, g, n);
	pages_tick(e);
	return r;
}

static void
eval_after(struct engine *e, struct graph *g, struct node *n, enum eval_result r,
           int dry)
{
	if (r == EVAL_DONE) {
		node_finish(e, g, n, N_DONE);
	} else if (r == EVAL_FAIL) {
		node_fail(e, g, n);
	} else if (r == EVAL_NEEDS) {
		if (!need_prereqs(e, g, n))
			node_make_ready(e, g, n);
	} else if (dry) {
		node_finish(e, g, n, N_WOULD_RUN);
	} else {
		n->st = N_RUNNABLE;
		est_decided(e, g, n);
		/* a step with folder outputs, or given one, runs on this
		 * machine: an agent would get its tree record as a file */
		if (heap_push(n->folders ? &e->runnable_local : &e->runnable, g, n) != 0)
			node_fail(e, g, n);
	}
}

/* Steps a worker takes from the ready heap at once, at most. */
#define EVAL_BATCH 8

/* Decide ready steps, first the popped n, then more while many are
 * waiting (e->mu held, dropped for the work). Up to EVAL_BATCH at once,
 * and no more than a share of the ready heap, so that the other workers
 * have theirs: a warm build's pass over many up-to-date steps, little
 * work each, spent more time taking and waiting for the lock (twice a
 * step) than deciding. Waking one worker per step made ready stays: a
 * chain in which a worker that took work woke the next while more was
 * left made the full build's slots wait (more of the CPU idle). The
 * figures: docs/build.md, "Figures behind the engine's code". */
/* n units of urgent work (slot_held) are over (e->mu held). */
static void
urgent_done(struct engine *e, unsigned n)
{
	e->urgent_work -= n;
	if (n > 0 && e->urgent_work == 0)
		pthread_cond_broadcast(&e->cv);  /* slots held for it: fill */
}

static void
work_eval(struct engine *e, struct graph *g, struct node *n)
{
	struct graph *bg[EVAL_BATCH];
	struct node *bn[EVAL_BATCH];
	enum eval_result r[EVAL_BATCH];
	size_t want = e->ready.n / (2 * (size_t)e->nthreads) + 1, k = 0;
	unsigned urgent = 0;
	int dry = e->wave_dry;

	if (want > EVAL_BATCH)
		want = EVAL_BATCH;
	for (;;) {
		/* a build stopped by a failure still decides what it has (a
		 * warm build's other steps are up to date, not "cancelled");
		 * only their tools do not start (work_take) */
		if ((!node_wanted(e, n) && node_cancelled(e, n)) || e->quit)
			node_finish(e, g, n, N_CANCELLED);
		else if (eval_before(e, g, n)) {
			bg[k] = g;
			bn[k++] = n;
		}
		if (k >= want || !eval_room(e) ||
		    (n = pop_live(&e->ready, N_READY, &g)) == NULL)
			break;
	}
	if (k == 0)
		return;
	for (size_t i = 0; i < k; i++)
		urgent += bn[i]->prio > 0;
	e->urgent_work += urgent;
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; i < k; i++)
		r[i] = eval_work(e, bg[i], bn[i], dry);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < k; i++)
		eval_after(e, bg[i], bn[i], r[i], dry);
	urgent_done(e, urgent);
}

/* Finish a tool's step, counted as urgent work while it is finished when
 * its build has a priority (slot_held). e->mu held, dropped. */
static void
work_complete(struct engine *e, struct run_ctx *rc)
{
	unsigned urgent = rc->n->prio > 0;

	e->urgent_work += urgent;
	work_finish(e, rc);
	urgent_done(e, urgent);
}

/* Whether a free -j slot waits for work of a build with a priority
 * (above 0) that is on its way, rather than go to the batch step on top
 * of the runnable heap: a finished run of an interactive step not yet
 * processed or being processed (its dependents come next), an
 * interactive step ready or being decided. Without this, each link of an
 * interactive chain gave its slot to a batch step (the slot fills before
 * a finished step is processed) and the chain waited a whole batch
 * tool's run per link. Only as many slots are held as such pieces of
 * work are on their way (a long decision of one interactive step keeps
 * one slot free, not all), and batch-only builds (every priority 0) never
 * wait here. e->mu held. */
static int
slot_held(const struct engine *e)
{
	unsigned coming = e->urgent_work, limit = jobs_limit(e);

	if (e->runnable.n == 0 || e->runnable.v[0].prio > 0)
		return 0;
	if (e->ready.n > 0 && e->ready.v[0].prio > 0)
		coming++;
	for (size_t i = 0; i < e->ncompleted; i++)
		coming += e->completed[i]->n->prio > 0;
	return coming > 0 && limit - (e->running < limit ? e->running : limit) <= coming;
}

/* The finished run to process next: one of a build with a priority
 * first (its dependents wait on it). */
static struct run_ctx *
completed_take(struct engine *e)
{
	size_t best = e->ncompleted - 1;
	struct run_ctx *rc;

	for (size_t i = 0; i + 1 < e->ncompleted; i++)
		if (e->completed[i]->n->prio > e->completed[best]->n->prio)
			best = i;
	rc = e->completed[best];
	e->completed[best] = e->completed[--e->ncompleted];
	return rc;
}

/* The tools this machine may run at once: the builds' -j, capped by
 * the daemon's local_jobs. */
static unsigned
local_limit(const struct engine *e)
{
	unsigned limit = jobs_limit(e);

	if (e->cfg.local_jobs < 0)
		limit = 0;
	else if (e->cfg.local_jobs > 0 && (unsigned)e->cfg.local_jobs < limit)
		limit = (unsigned)e->cfg.local_jobs;
	return limit;
}

/* Whether a ready step, not decided yet, is far more critical than every
 * runnable one (a path in estimated time more than twice as long, at the
 * same priority): deciding it first (microseconds) lets it have the free
 * slot, which would otherwise go to a short step because the long one was
 * still on the ready heap when the slot came free. Only far: between
 * paths of about the same length (most of a build of many small steps,
 * estimated per input byte once decided and by their tool's mean before)
 * it would hold slots empty for nothing. e->mu held. */
static int
ready_first(const struct engine *e)
{
	const struct heap_item *r, *q;

	if (e->ready.n == 0 || e->runnable.n == 0 || !eval_room(e))
		return 0;
	r = &e->ready.v[0];
	q = &e->runnable.v[0];
	return r->prio == q->prio && r->cp_ns / 2 > q->cp_ns;
}

/* Start the most urgent runnable step that has somewhere to run (e->mu
 * held, dropped for the work); 0 when none can start now. Steps an agent
 * refused (runnable_local) run here, on one slot even when local_jobs is
 * 0: they must run somewhere. */
static int
runnable_start(struct engine *e)
{
	unsigned limit = local_limit(e);
	int local = e->running < limit, remote = agent_jobs_room(e);
	int forced = e->running < (limit ? limit : 1);
	struct heap *h = NULL;
	struct graph *g;
	struct node *n;

	if (e->quit || slot_held(e) || ready_first(e))
		return 0;
	if ((local || remote) && e->runnable.n > 0)
		h = &e->runnable;
	if (forced && e->runnable_local.n > 0 &&
	    (h == NULL || item_before(&e->runnable_local.v[0], &h->v[0])))
		h = &e->runnable_local;
	if (h == NULL || (n = pop_live(h, N_RUNNABLE, &g)) == NULL)
		return 0;
	if (!node_wanted(e, n))
		node_finish(e, g, n, N_CANCELLED);
	else if (local || h == &e->runnable_local || n->ks->tool->builtin)
		work_start(e, g, n);   /* a built-in (a bundle) never goes to an agent */
	else
		work_start_remote(e, g, n);
	return 1;
}

void *
worker_main(void *arg)
{
	struct engine *e = arg;
	struct graph *g;
	struct node *n;

	/* A worker blocked in its tool's spawn (a vfork, tool_spawn.c) is woken
	 * by its child's exec and, as a normal task, preempts that child on
	 * its core to go on with its bookkeeping (finishing the previous
	 * step): every tool's exec waited behind the daemon (docs/build.md,
	 * "Figures behind the engine's code"). SCHED_BATCH wakes
	 * without preempting; the tools themselves start under SCHED_OTHER
	 * (spawner_new). */
	if (e->workers_batch) {
		struct sched_param prio0 = {0};
		pthread_setschedparam(pthread_self(), SCHED_BATCH, &prio0);
	}
	pthread_mutex_lock(&e->mu);
	for (;;) {
		if (e->nsusp > 0)   /* resumed runs go before new ones */
			need_grant(e);
		/* a free -j slot is filled before a finished step is
		 * published: the tools are what the build waits on */
		if (runnable_start(e)) {
			/* started (or dropped) one */
		} else if (e->ncompleted > 0) {
			work_complete(e, completed_take(e));
		} else if (eval_room(e) && (n = pop_live(&e->ready, N_READY, &g)) != NULL) {
			work_eval(e, g, n);
		} else if (e->quit && e->running == 0 && e->nsusp == 0) {
			pthread_cond_broadcast(&e->cv); /* the others leave too */
			break;
		} else {
			pthread_cond_wait(&e->cv, &e->mu);
			continue;
		}
		builds_check(e);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

