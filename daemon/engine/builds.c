/* builds.c — build requests: starting a build (its targets, its PATH, a
 * new wave when the engine was idle), cancelling one, its status, and its
 * end (the index map and the records committed, BuildFinished published).
 * schedule.c runs the steps a build schedules here.
 *
 * Threads: handler threads call engine_build, engine_cancel,
 * engine_build_status and engine_queued; workers call builds_check after
 * every step. Everything here runs with e->mu held (taken by the public
 * functions); build_end drops it while the records commit. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "builds.h"
#include "glob.h"
#include "edits.h"
#include "estimate.h"
#include "graph.h"
#include "lost.h"
#include "need.h"
#include "output_index.h"
#include "schedule.h"
#include "search_path.h"
#include "step.h"
#include "step_events.h"
#include "timeline.h"
#include "watch.h"

/* What a build counted a finished node as (build.counted). */
enum count_kind {
	K_NONE, K_RAN, K_REUSED, K_FAILED, K_SKIPPED, K_CANCELLED, K_WOULD_RUN,
};

static enum count_kind
count_kind(const struct node *n)
{
	switch ((enum node_state)n->st) {
	case N_DONE: return n->outcome == O_RAN ? K_RAN : K_REUSED;
	case N_FAILED: return K_FAILED;
	case N_SKIPPED: return K_SKIPPED;
	case N_CANCELLED: return K_CANCELLED;
	case N_WOULD_RUN: return K_WOULD_RUN;
	default: return K_NONE;
	}
}

/* b's counter of kind k. */
static uint32_t *
count_slot(struct build *b, enum count_kind k)
{
	switch (k) {
	case K_RAN: return &b->ran;
	case K_REUSED: return &b->reused;
	case K_FAILED: return &b->failed;
	case K_SKIPPED: return &b->skipped;
	case K_CANCELLED: return &b->ncancelled;
	default: return &b->would_run;
	}
}

/* Take node n out of build b's counts, as b counted it (it is decided
 * again, or counted anew). */
static void
build_uncount(struct build *b, const struct node *n)
{
	enum count_kind k = (enum count_kind)b->counted[n->idx];

	if (k == K_NONE)
		return;
	b->finished--;
	(*count_slot(b, k))--;
	b->counted[n->idx] = K_NONE;
}

/* Count a finished node into build b (once: what b counted it as before
 * is taken out). */
void
build_count(struct build *b, const struct node *n)
{
	enum count_kind k = count_kind(n);

	if (k == K_NONE)
		return;
	build_uncount(b, n);
	b->finished++;
	(*count_slot(b, k))++;
	b->counted[n->idx] = (uint8_t)k;
	if (b->expect_ms != NULL) {
		b->left_ms -= b->expect_ms[n->idx];
		b->expect_ms[n->idx] = 0;
	}
	if (n->st == N_FAILED && !b->keep_going)
		b->stopped = 1;
}

static void pass_begin(struct engine *e);
static int redecide(const struct engine *e, const struct graph *g, const struct node *n);
static int dep_redeciding(const struct engine *e, const struct graph *g,
                          const struct node *n);

/* Say in b's summary that results of its steps could not be recorded
 * (e->mu held, after lost_apply). A failed commit at the build's end
 * that lost none of its steps' results (only file stats, say) is no
 * failure of the build. */
static void
build_lost_error(struct build *b)
{
	if (b->nlost == 0)
		return;
	snprintf(b->error, sizeof b->error, "the results of %u step%s could not "
	         "be recorded (committing build records: %s); the next build "
	         "runs %s again", b->nlost, b->nlost == 1 ? "" : "s",
	         kiln_strerror(b->lost_rv), b->nlost == 1 ? "it" : "them");
}

/* Each wanted step's expected tool time: its last result's, else its
 * estimate where one is known (estimate.h: .kiln/durations, its tool's
 * learnt cost), else none (0). */
static void
build_expect(struct engine *e, struct build *b, const struct graph *g, const uint8_t *mark)
{
	if ((b->expect_ms = calloc(g->n ? g->n : 1, sizeof *b->expect_ms)) == NULL)
		return;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *n = &g->nodes[i];
		if (!mark[i])
			continue;
		/* a step a worker holds: its estimate (its result is the
		 * worker's) */
		uint64_t ms = (!node_result_held(n) && n->have ? n->duration_ns
		               : step_estimate_known_ns(e, n)) / 1000000;
		b->expect_ms[i] = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
		b->left_ms += b->expect_ms[i];
	}
}

/* Write b's timeline (e->mu held, dropped while the file is written:
 * b->done is -1, so nobody else ends or frees b meanwhile). */
static void
build_trace(struct engine *e, struct build *b)
{
	struct timeline *tl = b->tl;
	Kiln__BuildFinished bf;
	int rv;

	b->tl = NULL;
	summary_fill(b, &bf);
	if (b->cancelled && bf.error[0] == '\0')
		bf.error = (char *)"cancelled";
	pthread_mutex_unlock(&e->mu);
	rv = timeline_write(e->rootfd, tl, &bf);
	pthread_mutex_lock(&e->mu);
	if (rv != 0)
		engine_logf(e, 1, "writing the trace of build %llu (.kiln/traces/): %s",
		            (unsigned long long)b->id, kiln_strerror(rv));
}

/* The build's last step finished (e->mu held, dropped and retaken). */
static void
build_end(struct engine *e, struct build *b)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__BuildFinished bf;

	struct index_job job;
	int have_job, index_rv = 0, commit_rv = 0, prune = 0;

	b->done = -1; /* ending: nobody ends it twice */
	have_job = !b->dry_run && index_gather(e, b, &job);
	prune = have_job && job.prune;
	if (!b->dry_run)
		snprintf(b->index, sizeof b->index, "build/%.40s/kiln-index.txt", b->profile);
	pthread_mutex_unlock(&e->mu);
	index_rv = commit_and_index(e, have_job ? &job : NULL, &commit_rv);
	if (have_job)
		index_job_free(&job);
	pthread_mutex_lock(&e->mu);
	lost_apply(e);   /* the steps whose records that commit lost */
	if (commit_rv != 0 && have_job)
		b->g->index_dirty = 1;   /* the old map stayed: write it next time */
	if (prune && (commit_rv != 0 || index_rv != 0))
		b->g->prune_due = 1;     /* not pruned: the next build does it */
	if (index_rv != 0 || (commit_rv != 0 && have_job)) {
		b->index[0] = '\0';
		if (index_rv != 0)
			snprintf(b->error, sizeof b->error, "writing build/%s/kiln-index.txt: %s",
			         b->profile, kiln_strerror(index_rv));
	}
	build_lost_error(b);
	if (b->tl != NULL)
		build_trace(e, b);
	b->done = 1;
	b->duration_ns = (uint64_t)(kiln_mono_ns() - b->start_ns);
	{
		uint64_t nstat, nhashed;
		filestate_counts(e->fs, &nstat, &nhashed);
		b->files_statted = nstat - b->nstat0;
	}
	if (b->cancelled && b->error[0] == '\0')
		snprintf(b->error, sizeof b->error, "cancelled");
	summary_fill(b, &bf);
	ev.kind_case = KILN__EVENT__KIND_BUILD_FINISHED;
	ev.build_finished = &bf;
	e->cfg.publish(e->cfg.arg, &ev);
	/* free the slot; clear it from every node of the graph */
	for (uint32_t i = 0; i < b->g->n; i++)
		b->g->nodes[i].builds &= ~(1ULL << b->slot);
	e->active[b->slot] = NULL;
	b->slot = -1;
	b->g = NULL;  /* graphs go when the project is loaded again */
	free(b->expect_ms);
	b->expect_ms = NULL;
	free(b->counted);
	b->counted = NULL;
	free(b->told);
	b->told = NULL;
	e->nactive--;
	b->next = e->finished;
	e->finished = b;
	if (++e->nfinished > ENGINE_KEEP_FINISHED) {
		struct build *p = e->finished;
		while (p->next != NULL && p->next->next != NULL)
			p = p->next;
		free(p->next);
		p->next = NULL;
		e->nfinished--;
	}
	if (e->nactive == 0) {
		pthread_cond_broadcast(&e->idle_cv);
		/* a wave's temporary records are freed: give the pages back,
		 * and the database's */
		malloc_trim(0);
		kiln_store_unmap_pages(e->s);
		est_save(e);
	}
}

/* Repasses of one build before it ends as it is (a file rewritten
 * without pause would otherwise keep it from ever ending): its summary
 * then says which steps were decided from files that kept changing. */
#define MAX_REPASSES 8

/* Every step of b is finished, but edits came in while it ran that made
 * some stale (edits.c): decide those again, and what depends on them,
 * within b, so that its end reflects every edit made before it. 1 if
 * steps were scheduled again (b goes on), 0 if b may end. e->mu held. */
static int
build_repass(struct engine *e, struct build *b)
{
	struct graph *g = b->g;
	uint64_t bit = 1ULL << b->slot;
	uint32_t again = 0;

	b->repass = 0;
	if (b->dry_run || b->cancelled || b->stopped || e->quit)
		return 0;
	if (b->repasses >= MAX_REPASSES) {
		snprintf(b->error, sizeof b->error, "files its steps read kept "
		         "changing while it ran (%u times decided again): the "
		         "next build decides them again", b->repasses);
		return 0;
	}
	b->repasses++;
	if (e->edits_all) {   /* edits no path named: everything */
		e->edits_all = 0;
		pass_begin(e);
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[g->topo[i]];
		int skipped = n->st == N_SKIPPED || n->st == N_CANCELLED;
		if (!(n->builds & bit) || !node_done_state(n->st) ||
		    !(redecide(e, g, n) || (skipped && dep_redeciding(e, g, n))))
			continue;
		node_schedule(e, g, n, b);
		again++;
	}
	if (again == 0)
		return 0;
	need_join_flush(e);
	pthread_cond_broadcast(&e->cv);
	if (e->cfg.log) {
		char msg[256];
		snprintf(msg, sizeof msg, "build %llu: files were edited while it ran; "
		         "deciding %u of its steps again", (unsigned long long)b->id, again);
		e->cfg.log(e->cfg.arg, 0, msg);
	}
	return 1;
}

/* End every build whose steps are all finished (e->mu held). */
void
builds_check(struct engine *e)
{
	lost_apply(e);   /* a commit since the last step may have failed */
	for (int again = 1; again;) {
		again = 0;
		/* called after every step: look at the active builds only */
		for (unsigned i = 0, seen = 0; i < ENGINE_MAX_BUILDS && seen < e->nactive; i++) {
			struct build *b = e->active[i];
			if (b != NULL)
				seen++;
			if (b != NULL && b->done == 0 && b->finished >= b->total &&
			    (b->dry_run || b->cancelled || b->stopped || e->quit ||
			     !edits_pending(e))) {
				if (!b->repass || !build_repass(e, b))
					build_end(e, b);
				again = 1;
				break;
			}
		}
	}
}

/* A new file-state pass: every file is looked at again (the watch's
 * record of what changed taken in first). e->mu held. */
static void
pass_begin(struct engine *e)
{
	e->pass_changes = atomic_load(&e->changes);
	e->pass_seq++;
	filestate_pass(e->fs);
	if (e->watch != NULL)
		watch_sync(e->watch);
}

/* Whether a prerequisite of n is being decided again in this wave. */
static int
dep_redeciding(const struct engine *e, const struct graph *g, const struct node *n)
{
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		if (d->wave == e->wave && d->st != N_IDLE && !node_done_state(d->st))
			return 1;
	}
	return 0;
}

/* Whether a step this wave already finished is decided again for a build
 * joining the wave, or at a build's repass: when files changed since it
 * was decided (a new pass, engine_build), an edit named one it reads
 * (n->stale, edits.c), or a prerequisite is being decided again — an
 * artist's save during a long batch build must reach the live build that
 * follows it, and the build itself, not be answered with what the wave
 * decided before the save. Only when no step of the wave still waits on
 * it or runs after it: those counted it finished, and running it again
 * would release them early (they keep what they were given, and their
 * own build's repass or the next build decides them again). e->mu held. */
static int
redecide(const struct engine *e, const struct graph *g, const struct node *n)
{
	if (e->wave_dry || (n->st != N_DONE && n->st != N_FAILED) ||
	    (n->decided_pass == e->pass_seq && !n->stale && !dep_redeciding(e, g, n)))
		return 0;
	for (uint32_t k = 0; k < n->nrdeps; k++) {
		const struct node *r = &g->nodes[n->rdeps[k]];
		if (r->wave == e->wave && r->st != N_IDLE && !node_done_state(r->st))
			return 0;
	}
	return 1;
}

/* Schedule node n for build b (e->mu held). Prerequisites come first
 * (topological order), so each of n's is already part of the wave. */
void
node_schedule(struct engine *e, struct graph *g, struct node *n, struct build *b)
{
	uint64_t bit = 1ULL << b->slot;
	int failed = 0, cancelled = 0;

	if (n->wave == e->wave && n->st != N_IDLE && n->st != N_CANCELLED &&
	    n->st != N_SKIPPED && !redecide(e, g, n)) {
		if (!(n->builds & bit) && e->nsusp + e->ndwait > 0)
			need_join(e, n);  /* what it waits on: b's too */
		n->builds |= bit;
		if (b->prio > n->prio) {
			n->prio = b->prio;
			if (n->st == N_READY)
				heap_push(&e->ready, g, n);
			else if (n->st == N_RUNNABLE)
				heap_push(n->folders ? &e->runnable_local : &e->runnable, g, n);
		}
		if (node_done_state(n->st) && b->counted[n->idx] == K_NONE) {
			build_count(b, n);
			publish_step_joined(e, g, n, b);
		}
		return;
	}
	if (n->wave == e->wave && node_done_state(n->st)) {
		/* decided again: every active build that counted it waits
		 * for it again */
		uint64_t keep = 0;
		for (uint64_t m = n->builds; m != 0; m &= m - 1) {
			struct build *o = e->active[__builtin_ctzll(m)];
			if (o != NULL) {
				build_uncount(o, n);
				keep |= m & -m;
			}
		}
		bit |= keep;
	} else if (n->wave != e->wave) {
		n->cancels = 0;
	}
	n->wave = e->wave;
	n->builds = bit;
	n->stale = 0;
	n->pathi = b->pathi;
	n->prio = b->prio;
	n->waiting = 0;
	n->send_event = 0;
	e->queued++;
	n->st = N_WAITING;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		struct node *d = &g->nodes[n->deps[k]];
		if (d->st == N_FAILED || d->st == N_SKIPPED)
			failed = 1;
		else if (d->st == N_CANCELLED)
			cancelled = 1;
		else if (d->st != N_DONE && d->st != N_WOULD_RUN)
			n->waiting++;
	}
	if (failed || cancelled) {
		free(n->reason);
		n->reason = NULL;
		n->send_event = 1;
		node_finish(e, g, n, cancelled && !failed ? N_CANCELLED : N_SKIPPED);
	} else if (n->waiting == 0) {
		node_make_ready(e, g, n);
	}
}

/* Mark the steps wanted by targets, and all they need, in mark[]. */
static int
targets_mark(struct graph *g, char *const *targets, size_t ntargets,
             uint8_t *mark, char *err, size_t errlen)
{
	uint32_t *stack = malloc((g->n + 1) * sizeof *stack), depth = 0;

	if (stack == NULL)
		return KILN_ENOMEM;
	for (size_t t = 0; t < ntargets || (ntargets == 0 && t == 0); t++) {
		kiln_glob *gl = NULL;
		const char *why = NULL;
		int matched = 0;
		if (ntargets > 0 && glob_compile(targets[t], &gl, &why) != 0) {
			snprintf(err, errlen, "target '%s': %s", targets[t], why ? why : "bad glob");
			free(stack);
			return KILN_EINVAL;
		}
		for (uint32_t i = 0; i < g->n; i++)
			if (gl == NULL || glob_match(gl, g->nodes[i].ks->url)) {
				matched = 1;
				if (!mark[i]) {
					mark[i] = 1;
					stack[depth++] = i;
				}
			}
		glob_free(gl);
		if (!matched && ntargets > 0) {
			snprintf(err, errlen, "no step of profile %s has the URL '%s' "
			         "(kiln ls -p %s lists them)", g->profile, targets[t], g->profile);
			free(stack);
			return KILN_EINVAL;
		}
	}
	while (depth > 0) {
		struct node *n = &g->nodes[stack[--depth]];
		for (uint32_t k = 0; k < n->ndeps; k++)
			if (!mark[n->deps[k]]) {
				mark[n->deps[k]] = 1;
				stack[depth++] = n->deps[k];
			}
	}
	free(stack);
	return 0;
}

/* A free build slot (0..ENGINE_MAX_BUILDS-1), or KILN_EBUSY. */
static int
free_slot(struct engine *e)
{
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] == NULL)
			return i;
	return KILN_EBUSY;
}

/* The PATH a build's tools are found on (e->mu held, the project
 * loaded): the project's `path:`, else the client's, else the daemon's. */
static int
build_path(struct engine *e, const Kiln__BuildRequest *rq, uint16_t *idx,
           char *err, size_t errlen)
{
	const char *pinned = kiln_desc_path(e->desc);
	int rv = engine_path_intern(e, pinned != NULL ? pinned : rq->path, idx);

	if (rv == KILN_EBUSY)
		snprintf(err, errlen, "builds with %d different PATHs are in progress; "
		         "try again when one ends", ENGINE_MAX_PATHS);
	return rv;
}

int
engine_build(struct engine *e, const Kiln__BuildRequest *rq,
             Kiln__BuildReply *rep, char *err, size_t errlen)
{
	const char *const *profiles;
	const char *profile;
	struct graph *g;
	struct build *b;
	uint8_t *mark = NULL;
	int rv, slot;

	err[0] = '\0';
	pthread_mutex_lock(&e->mu);
	if (e->quit) {
		rv = KILN_ECLOSED;
		goto fail;
	}
	if (e->auditing) {
		snprintf(err, errlen, "kiln audit is running steps; try again when it ends");
		rv = KILN_EBUSY;
		goto fail;
	}
	if (e->nactive > 0 && e->wave_dry != rq->dry_run) {
		snprintf(err, errlen, "a %s is in progress; try again when it ends",
		         e->wave_dry ? "dry run" : "build");
		rv = KILN_EBUSY;
		goto fail;
	}
	if ((slot = free_slot(e)) < 0) {
		snprintf(err, errlen, "%d builds are running already", ENGINE_MAX_BUILDS);
		rv = KILN_EBUSY;
		goto fail;
	}
	if (e->nactive == 0 && (rv = project_fresh(e, err, errlen)) != 0)
		goto fail;
	if (kiln_desc_profiles(e->desc, &profiles) == 0) {
		snprintf(err, errlen, "the project has no profiles");
		rv = KILN_EBADPROJECT;
		goto fail;
	}
	profile = rq->profile && rq->profile[0] ? rq->profile : profiles[0];
	if ((rv = graph_get(e, profile, &g)) != 0) {
		if (rv == KILN_EINVAL)
			profile_unknown(e, profile, err, errlen);
		goto fail;
	}
	/* the index map's order, now: sorting needs memory per output for a
	 * moment, which at a build's end would come on top of its peak */
	if ((g->iorder == NULL && (rv = iorder_make(g)) != 0) ||
	    (mark = calloc(g->n + 1, 1)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	if ((rv = targets_mark(g, rq->targets, rq->n_targets, mark, err, errlen)) != 0)
		goto fail;
	if ((b = calloc(1, sizeof *b)) == NULL ||
	    (b->counted = calloc(g->n + 1, 1)) == NULL ||
	    (b->told = calloc(g->n + 1, 1)) == NULL) {
		if (b != NULL) {
			free(b->counted);
			free(b);
		}
		rv = KILN_ENOMEM;
		goto fail;
	}
	if ((rv = build_path(e, rq, &b->pathi, err, errlen)) != 0) {
		free(b->counted);
		free(b->told);
		free(b);
		goto fail;
	}
	if (e->nactive == 0) {   /* a new wave */
		e->wave++;
		e->wave_dry = rq->dry_run;
		pass_begin(e);
		if (e->blobs != NULL)
			watch_sync(e->blobs);
	} else if (!e->wave_dry && atomic_load(&e->changes) != e->pass_changes) {
		/* files changed during the wave: what is decided from now on
		 * looks at them again (redecide) */
		pass_begin(e);
	}
	b->id = ++e->next_build;
	b->slot = slot;
	b->g = g;
	snprintf(b->profile, sizeof b->profile, "%s", g->profile);
	b->prio = rq->priority;
	b->jobs = rq->jobs;
	b->keep_going = rq->keep_going;
	b->dry_run = rq->dry_run;
	b->full = rq->n_targets == 0;
	b->start_ns = kiln_mono_ns();
	if (!b->dry_run)
		b->tl = timeline_new(b);   /* NULL (out of memory): no trace */
	{
		uint64_t nhashed;
		filestate_counts(e->fs, &b->nstat0, &nhashed);
	}
	for (uint32_t i = 0; i < g->n; i++)
		b->total += mark[i];
	build_expect(e, b, g, mark);
	e->active[slot] = b;
	e->nactive++;
	est_paths(e, g);   /* what was learnt since the graph's last build */
	for (uint32_t i = 0; i < g->n; i++)
		if (mark[g->topo[i]])
			node_schedule(e, g, &g->nodes[g->topo[i]], b);
	need_join_flush(e);
	rep->build = b->id;
	rep->steps = b->total;
	rep->profile = g->profile;
	pthread_cond_broadcast(&e->cv);
	builds_check(e);
	rv = 0;
fail:
	pthread_mutex_unlock(&e->mu);
	free(mark);
	return rv;
}

int
engine_cancel(struct engine *e, uint64_t id)
{
	struct build *b = NULL;

	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL && e->active[i]->id == id)
			b = e->active[i];
	if (b == NULL) {
		pthread_mutex_unlock(&e->mu);
		return KILN_ENOTFOUND;
	}
	b->cancelled = b->stopped = 1;
	/* The build ends now: each of its unfinished steps counts as
	 * cancelled for it and stops being its. What no other build wants is
	 * dropped (queued) or killed (running); a shared step goes on for the
	 * builds that still want it. */
	for (uint32_t i = 0; i < b->g->n; i++) {
		struct node *n = &b->g->nodes[i];
		if (!(n->builds >> b->slot & 1) || n->wave != e->wave ||
		    node_done_state(n->st) || n->st == N_IDLE)
			continue;
		n->builds &= ~(1ULL << b->slot);
		b->finished++;
		b->ncancelled++;
		if (node_wanted(e, n))
			continue;
		if (n->st == N_RUNNING) {
			/* no pid while its tool is being started: work_start
			 * kills it */
			run_kill(e, n, 2000);
		} else if (n->st == N_WAITING || n->st == N_READY || n->st == N_RUNNABLE) {
			n->send_event = 0;
			node_finish(e, b->g, n, N_CANCELLED);
		}
	}
	builds_check(e);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int
engine_build_status(struct engine *e, uint64_t id, Kiln__BuildFinished *out)
{
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < ENGINE_MAX_BUILDS && rv != 0; i++)
		if (e->active[i] != NULL && e->active[i]->id == id) {
			summary_fill(e->active[i], out);
			out->done = 0;
			rv = 0;
		}
	for (struct build *b = e->finished; b != NULL && rv != 0; b = b->next)
		if (b->id == id) {
			summary_fill(b, out);
			rv = 0;
		}
	pthread_mutex_unlock(&e->mu);
	return rv;
}

uint32_t
engine_queued(struct engine *e)
{
	uint32_t n;

	pthread_mutex_lock(&e->mu);
	n = e->queued;
	pthread_mutex_unlock(&e->mu);
	return n;
}
