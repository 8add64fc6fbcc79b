/* engine.c — graphs, builds, waves and the worker threads (see engine.h,
 * engine_int.h; engine_step.c does the work of one step).
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
 * build's priority, then the longest path from the step to an end
 * (critical path first). A running tool holds no worker: the spawner's
 * reaper hands its end back as a completion.
 *
 * Threads: see engine_int.h for what e->mu guards. Events are published
 * with e->mu held, which keeps a build's step events before its end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "watch.h"
#include "glob.h"
#include "kiln_clock.h"

/* ---- heaps ---------------------------------------------------------------- */

static int
item_before(const struct heap_item *a, const struct heap_item *b)
{
	if (a->prio != b->prio)
		return a->prio > b->prio;
	if (a->cp != b->cp)
		return a->cp > b->cp;
	return a->idx < b->idx;
}

static int
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
	h->v[i] = (struct heap_item){n->prio, n->cp, n->idx, g};
	while (i > 0 && item_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct heap_item t = h->v[i];
		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static int
heap_pop(struct heap *h, struct heap_item *out)
{
	size_t i = 0;

	if (h->n == 0)
		return 0;
	*out = h->v[0];
	h->v[0] = h->v[--h->n];
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
	return 1;
}

/* ---- events --------------------------------------------------------------- */

static enum node_state
done_state(enum node_state st)
{
	return st == N_DONE || st == N_FAILED || st == N_SKIPPED ||
	       st == N_CANCELLED || st == N_WOULD_RUN;
}

/* Publish a StepEvent for n (e->mu held). */
static void
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
	se.duration_ns = n->duration_ns;
	if (first != NULL) {
		se.done = first->finished;
		se.total = first->total;
	}
	ev.kind_case = KILN__EVENT__KIND_STEP;
	ev.step = &se;
	e->cfg.publish(e->cfg.arg, &ev);
	free(po);
}

static void
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

/* ---- finishing nodes ------------------------------------------------------ */

/* Count a finished node into build b. */
static void
build_count(struct build *b, const struct node *n)
{
	b->finished++;
	switch ((enum node_state)n->st) {
	case N_DONE:
		if (n->outcome == O_RAN)
			b->ran++;
		else
			b->reused++;
		break;
	case N_FAILED: b->failed++; break;
	case N_SKIPPED: b->skipped++; break;
	case N_CANCELLED: b->ncancelled++; break;
	case N_WOULD_RUN: b->would_run++; break;
	default: break;
	}
	if (n->st == N_FAILED && !b->keep_going)
		b->stopped = 1;
}

static void make_ready(struct engine *e, struct graph *g, struct node *n);

/* Finish n with state st (e->mu held): count it into its builds, publish
 * its event, and release or skip its dependents (iteratively: a failure
 * can skip a long chain). */
static void
node_finish(struct engine *e, struct graph *g, struct node *n, enum node_state st)
{
	uint32_t *stack = NULL;
	size_t depth = 0, cap = 0;

	for (;;) {
		int was_queued = !done_state(n->st) && n->st != N_IDLE;
		lost_node_finished(e, g, n, st);
		n->st = st;
		n->reruns = 0;
		if (st != N_DONE || n->outcome != O_UP_TO_DATE)
			g->index_dirty = 1;
		if (was_queued && e->queued > 0)
			e->queued--;
		for (uint64_t m = n->builds; m != 0; m &= m - 1)
			if (e->active[__builtin_ctzll(m)] != NULL)
				build_count(e->active[__builtin_ctzll(m)], n);
		if (n->send_event || st == N_FAILED || st == N_WOULD_RUN ||
		    (st == N_DONE && n->outcome != O_UP_TO_DATE))
			publish_step(e, g, n);
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
					make_ready(e, g, r);
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

static void
make_ready(struct engine *e, struct graph *g, struct node *n)
{
	n->st = N_READY;
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
	return done_state(st);
}

void
node_make_ready(struct engine *e, struct graph *g, struct node *n)
{
	make_ready(e, g, n);
}

/* Whether a build that is not stopped still wants n (e->mu held). */
static int
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

/* ---- builds --------------------------------------------------------------- */

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every 2 ms of work, hand the store's mapped database pages back if
 * more than 8 MiB of them are mapped (kiln_store_trim_pages): a build
 * reads or writes most of the database, and its pages would stay in the
 * daemon's resident set. Random reads map fast (the kernel maps 16
 * neighbouring pages a fault): deciding a 100,000-step project afresh
 * maps ~80 MB of its ~100 MB database in 100 ms, and ~25 MB at times
 * between two ticks 5 ms apart. Unmapping whatever was mapped every few
 * ms cost a small project's full build dearly: each madvise flushes the
 * other core's TLB (an interrupt, slow in a VM), ~16 % of kilnd's CPU in
 * a 10k full build by perf; with the allowance a 10k full build takes
 * 12 % less of kilnd's CPU (bench/engine/ab.sh). Unlocked. */
static void
pages_tick(struct engine *e)
{
	int64_t now = kiln_mono_ns();
	int64_t last = __atomic_load_n(&e->last_unmap_ns, __ATOMIC_RELAXED);

	if (now - last < 2 * 1000000LL ||
	    !__atomic_compare_exchange_n(&e->last_unmap_ns, &last, now, 0,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	kiln_store_trim_pages(e->s);
}

/* Commit what waits in the batch. 0, or the failed commit's code: its
 * records are gone, and lost_note says which batch they were in. */
int
batch_commit(struct engine *e)
{
	kiln_batch *b, *fresh;
	size_t skipped = 0;
	uint32_t gen;
	int rv;

	pthread_mutex_lock(&e->commit_mu);
	pthread_mutex_lock(&e->batch_mu);
	filestate_flush(e->fs, e->batch);
	b = e->batch;
	if (kiln_batch_len(b) == 0 || kiln_batch_new(&fresh) != 0) {
		pthread_mutex_unlock(&e->batch_mu);
		pthread_mutex_unlock(&e->commit_mu);
		return 0;
	}
	e->batch = fresh;
	e->batch_since_ns = 0;
	gen = e->batch_gen;
	__atomic_store_n(&e->batch_gen, gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->batch_mu);
	if ((rv = kiln_store_commit(e->s, b, &skipped)) != 0) {
		/* before commit_mu goes: a build ending next must see it */
		lost_note(e, gen, rv);
		if (e->cfg.log) {
			char msg[160];
			snprintf(msg, sizeof msg, "committing build records: %s",
			         kiln_strerror(rv));
			e->cfg.log(e->cfg.arg, 1, msg);
		}
	} else if (skipped > 0) {
		/* gc removed a blob between its put (or the lookup that
		 * reused it) and this commit: those records are not in the
		 * store, so their steps must not be believed up to date */
		lost_note_skipped(e, gen);
	}
	kiln_batch_free(b);
	pthread_mutex_unlock(&e->commit_mu);
	pages_tick(e);
	return rv;
}

int
engine_batch_lock(struct engine *e, kiln_batch **b)
{
	pthread_mutex_lock(&e->batch_mu);
	*b = e->batch;
	return 0;
}

/* When queued records are committed: when the oldest has waited 100 ms,
 * or at this many records. (Timed from the oldest record, not from the
 * last commit: a small build after a pause would otherwise commit, with a
 * syncfs and an fdatasync, in the middle of its chain of steps, as well as
 * at its end.) Each commit rewrites every database page its records land on,
 * and the use records of blobs and actions, keyed by hash, land on random
 * ones: a first build after a restart at 100k (records for 20,000 steps a
 * second) wrote 1.09 GB at 512 a commit, 0.87 GB at 2048 (7.7-8.4 s ->
 * 6.5-6.7 s). Past that, the commit's copies of those pages raise the
 * daemon's peak (4096: +9 MiB at 100k). */
#define COMMIT_OPS 2048

void
engine_batch_unlock(struct engine *e)
{
	size_t len = kiln_batch_len(e->batch);
	int64_t now = kiln_mono_ns();
	int due;

	if (len > 0 && e->batch_since_ns == 0)
		e->batch_since_ns = now;
	due = len >= COMMIT_OPS ||
	      (len > 0 && now - e->batch_since_ns > 100 * 1000000LL);

	pthread_mutex_unlock(&e->batch_mu);
	if (due)
		batch_commit(e);
}

/* The index map to write when a build ends: gathered with e->mu held (other
 * builds of the wave may be finishing nodes of this graph), written
 * without it. */
struct index_job {
	struct index_entry *v;
	size_t n;
	char *strs;              /* "url#name" of steps with named outputs
	                            (!url_plain); other urls and the files
	                            point into the plan and the graph, which
	                            outlive the build */
	char profile[65];
	int prune;               /* a clean whole-profile build: prune build/ */
};

static void
index_job_free(struct index_job *j)
{
	free(j->v);
	free(j->strs);
	memset(j, 0, sizeof *j);
}

/* Whether a node's index entry is its bare url: its one output is the
 * unnamed "out" (else each entry is "url#name"). */
static int
url_plain(const struct node *nd)
{
	return nd->ks->noutputs == 1 && strcmp(nd->ks->outputs[0].name, "out") == 0;
}

/* Entry (node, k)'s url into buf ("url" or "url#name"): its length. buf
 * has room for the url, '#', the name and a NUL. */
static size_t
index_url(const struct node *nd, size_t k, char *buf)
{
	const char *name = nd->ks->outputs[k].name;
	size_t lu = strlen(nd->ks->url), ln;

	memcpy(buf, nd->ks->url, lu);
	if (url_plain(nd)) {
		buf[lu] = '\0';
		return lu;
	}
	ln = strlen(name);
	buf[lu] = '#';
	memcpy(buf + lu + 1, name, ln + 1);
	return lu + 1 + ln;
}

struct iorder_sort {
	struct index_slot slot;
	char *url;
};

static int
iorder_cmp(const void *a, const void *b)
{
	return strcmp(((const struct iorder_sort *)a)->url,
	              ((const struct iorder_sort *)b)->url);
}

/* g's index entries in the map's order: every output of every node,
 * sorted by url once per graph (the map is rewritten on every build that
 * changed something, and sorting 100,000 names each time cost more than
 * the rest of writing it). 0 or KILN_ENOMEM. */
static int
iorder_make(struct graph *g)
{
	struct iorder_sort *v;
	size_t n = 0, at = 0, slen = 0;
	char *strs;

	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		n += nd->ks->noutputs;
		for (size_t k = 0; k < nd->ks->noutputs; k++)
			slen += strlen(nd->ks->url) + strlen(nd->ks->outputs[k].name) + 2;
	}
	v = calloc(n + 1, sizeof *v);
	strs = malloc(slen + 1);
	if ((g->iorder = calloc(n + 1, sizeof *g->iorder)) == NULL || v == NULL || strs == NULL) {
		free(g->iorder);
		g->iorder = NULL;
		free(v);
		free(strs);
		return KILN_ENOMEM;
	}
	n = 0;
	for (uint32_t i = 0; i < g->n; i++)
		for (size_t k = 0; k < g->nodes[i].ks->noutputs; k++) {
			v[n].slot = (struct index_slot){i, (uint32_t)k};
			v[n].url = strs + at;
			at += index_url(&g->nodes[i], k, strs + at) + 1;
			n++;
		}
	qsort(v, n, sizeof *v, iorder_cmp);
	for (size_t i = 0; i < n; i++)
		g->iorder[i] = v[i].slot;
	g->niorder = n;
	free(v);
	free(strs);
	return 0;
}

/* 1: there is a map to write (j filled); 0: nothing changed, or no memory
 * (the map stays as it is and is written by a later build). */
static int
index_gather(struct engine *e, struct build *b, struct index_job *j)
{
	struct graph *g = b->g;
	size_t cap = 0, slen = 0, at = 0, skip = strlen("build/") + strlen(g->profile) + 1;
	char path[PATH_MAX];
	struct stat st;

	memset(j, 0, sizeof *j);
	snprintf(path, sizeof path, "build/%s/kiln-index.txt", g->profile);
	if (!g->index_dirty && fstatat(e->rootfd, path, &st, 0) == 0)
		return 0;
	if (g->iorder == NULL && iorder_make(g) != 0)
		return 0;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		if (!nd->have)
			continue;
		cap += nd->ks->noutputs;
		for (size_t k = 0; !url_plain(nd) && k < nd->ks->noutputs; k++)
			slen += strlen(nd->ks->url) + strlen(nd->ks->outputs[k].name) + 2;
	}
	if ((j->v = calloc(cap + 1, sizeof *j->v)) == NULL ||
	    (j->strs = malloc(slen + 1)) == NULL) {
		index_job_free(j);
		return 0;
	}
	for (size_t i = 0; i < g->niorder; i++) {
		const struct node *nd = &g->nodes[g->iorder[i].node];
		size_t k = g->iorder[i].out;
		struct index_entry *x;
		if (!nd->have)
			continue;
		x = &j->v[j->n++];
		if (!url_plain(nd)) {
			x->url = j->strs + at;
			at += index_url(nd, k, j->strs + at) + 1;
		} else {
			x->url = nd->ks->url;
		}
		/* relative to build/<profile>/ */
		x->file = nd->outpaths[k] + skip;
		x->id = nd->outs[k].id;
		x->size = nd->outs[k].size;
	}
	g->index_dirty = 0;
	snprintf(j->profile, sizeof j->profile, "%s", g->profile);
	/* steps only disappear with a new description (a new graph): walking
	 * all of build/ once after each load is enough */
	j->prune = g->prune_due && b->full && b->failed == 0 && b->skipped == 0 &&
	           !b->cancelled && b->nlost == 0;
	if (j->prune)
		g->prune_due = 0;
	return 1;
}

/* After a clean whole-profile build, build/<profile>/ holds exactly the
 * profile's outputs: files of steps no longer described go. */
static void
index_prune(struct engine *e, const struct index_job *j)
{
	const char **keep;

	if (!j->prune || (keep = calloc(j->n + 1, sizeof *keep)) == NULL)
		return;
	for (size_t i = 0; i < j->n; i++)
		keep[i] = j->v[i].file;
	qsort(keep, j->n, sizeof *keep, str_cmp);
	materialize_prune(e->root, j->profile, keep, j->n);
	free(keep);
}

/* The index map, written beside its place on a thread of its own while
 * the build's records are committed. */
struct index_writer {
	struct engine *e;
	struct index_job *job;
	struct index_tmp tmp;
	int rv;
};

static void *
index_writer_main(void *arg)
{
	struct index_writer *w = arg;

	/* in the map's order already (iorder) */
	w->rv = materialize_index_write_tmp(w->e->root, w->job->profile,
	                                    w->job->v, w->job->n, &w->tmp);
	return NULL;
}

/* Commit the build's records and write its index map (e->mu not held):
 * the map is written while the commit waits on the disk (its fdatasyncs
 * and fsyncs: a 10k one-change build's 3 ms), and put in its place only
 * once the commit has returned, so it never goes ahead of it. A failed
 * commit keeps the old map: the new one would name outputs the store has
 * no record of (build_end marks the graph's map dirty: the next build
 * writes it). *commit_rv is the commit's result. Returns 0 or the
 * error writing the map. */
static int
commit_and_index(struct engine *e, struct index_job *job, int *commit_rv)
{
	struct index_writer w = {e, job, {-1, ""}, 0};
	pthread_t th;
	int threaded = 0, rv;

	if (job != NULL)
		threaded = pthread_create(&th, NULL, index_writer_main, &w) == 0;
	*commit_rv = batch_commit(e);
	if (job == NULL)
		return 0;
	if (threaded)
		pthread_join(th, NULL);
	else
		index_writer_main(&w);   /* no thread: one after the other */
	if (*commit_rv != 0) {
		materialize_index_discard(&w.tmp);
		return 0;
	}
	if ((rv = w.rv) == 0 && (rv = materialize_index_put(&w.tmp)) == 0)
		index_prune(e, job);
	return rv;
}

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

/* The build's last step finished (e->mu held, dropped and retaken). */
static void
build_end(struct engine *e, struct build *b)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__BuildFinished bf;

	struct index_job job;
	int have_job, index_rv = 0, commit_rv = 0;

	b->done = -1; /* ending: nobody ends it twice */
	have_job = !b->dry_run && index_gather(e, b, &job);
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
	if (index_rv != 0 || (commit_rv != 0 && have_job)) {
		b->index[0] = '\0';
		if (index_rv != 0)
			snprintf(b->error, sizeof b->error, "writing build/%s/kiln-index.txt: %s",
			         b->profile, kiln_strerror(index_rv));
	}
	build_lost_error(b);
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
	}
}

/* End every build whose steps are all finished (e->mu held). */
static void
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
			if (b != NULL && b->done == 0 && b->finished >= b->total) {
				build_end(e, b);
				again = 1;
				break;
			}
		}
	}
}

/* Schedule node n for build b (e->mu held). Prerequisites come first
 * (topological order), so each of n's is already part of the wave. */
void
node_schedule(struct engine *e, struct graph *g, struct node *n, struct build *b)
{
	uint64_t bit = 1ULL << b->slot;
	int failed = 0, cancelled = 0;

	if (n->wave == e->wave && n->st != N_IDLE && n->st != N_CANCELLED &&
	    n->st != N_SKIPPED) {
		if (!(n->builds & bit) && e->nsusp + e->ndwait > 0)
			need_join(e, n);  /* what it waits on: b's too */
		n->builds |= bit;
		if (b->prio > n->prio) {
			n->prio = b->prio;
			if (n->st == N_READY)
				heap_push(&e->ready, g, n);
			else if (n->st == N_RUNNABLE)
				heap_push(&e->runnable, g, n);
		}
		if (done_state(n->st))
			build_count(b, n);
		return;
	}
	n->wave = e->wave;
	n->builds = bit;
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
		make_ready(e, g, n);
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

static int
free_slot(struct engine *e)
{
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] == NULL)
			return i;
	return -1;
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
		goto out;
	}
	if (e->nactive > 0 && e->wave_dry != rq->dry_run) {
		snprintf(err, errlen, "a %s is in progress; try again when it ends",
		         e->wave_dry ? "dry run" : "build");
		rv = KILN_EBUSY;
		goto out;
	}
	if ((slot = free_slot(e)) < 0) {
		snprintf(err, errlen, "%d builds are running already", ENGINE_MAX_BUILDS);
		rv = KILN_EBUSY;
		goto out;
	}
	if (e->nactive == 0 && (rv = project_fresh(e, err, errlen)) != 0)
		goto out;
	if (kiln_desc_profiles(e->desc, &profiles) == 0) {
		snprintf(err, errlen, "the project has no profiles");
		rv = KILN_EBADPROJECT;
		goto out;
	}
	profile = rq->profile && rq->profile[0] ? rq->profile : profiles[0];
	if ((rv = graph_get(e, profile, &g)) != 0) {
		if (rv == KILN_EINVAL)
			snprintf(err, errlen, "unknown profile '%s'", profile);
		goto out;
	}
	/* the index map's order, now: sorting needs ~50 bytes an output for a
	 * moment, which at a build's end would come on top of its peak */
	if ((g->iorder == NULL && (rv = iorder_make(g)) != 0) ||
	    (mark = calloc(g->n + 1, 1)) == NULL) {
		rv = KILN_ENOMEM;
		goto out;
	}
	if ((rv = targets_mark(g, rq->targets, rq->n_targets, mark, err, errlen)) != 0)
		goto out;
	if ((b = calloc(1, sizeof *b)) == NULL) {
		rv = KILN_ENOMEM;
		goto out;
	}
	if ((rv = build_path(e, rq, &b->pathi, err, errlen)) != 0) {
		free(b);
		goto out;
	}
	if (e->nactive == 0) {   /* a new wave */
		e->wave++;
		e->wave_dry = rq->dry_run;
		filestate_pass(e->fs);
		if (e->watch != NULL)
			watch_sync(e->watch);
		if (e->blobs != NULL)
			watch_sync(e->blobs);
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
	{
		uint64_t nhashed;
		filestate_counts(e->fs, &b->nstat0, &nhashed);
	}
	for (uint32_t i = 0; i < g->n; i++)
		b->total += mark[i];
	e->active[slot] = b;
	e->nactive++;
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
out:
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
		    done_state(n->st) || n->st == N_IDLE)
			continue;
		n->builds &= ~(1ULL << b->slot);
		b->finished++;
		b->ncancelled++;
		if (node_wanted(e, n))
			continue;
		if (n->st == N_RUNNING) {
			/* 0 while its tool is being started: work_start kills it */
			pid_t pid = n->w != NULL ? __atomic_load_n(&n->w->pid, __ATOMIC_ACQUIRE) : 0;
			if (pid > 0)
				spawner_kill(e->sp, pid, 2000);
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

/* ---- workers -------------------------------------------------------------- */

void
engine_tool_done(void *arg, const struct spawn_result *r)
{
	struct run_ctx *rc = arg;
	struct engine *e = rc->e;
	struct node *n = rc->n;

	pthread_mutex_lock(&e->mu);
	n->w->res = *r;
	/* the tool's slot is free now (a run suspended on kiln need had
	 * lent it out already): finishing the step is our work */
	if (need_run_end(e, n))
		e->running--;
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
			pthread_mutex_unlock(&e->mu);
			return;
		}
		e->completed = nv;
		e->capcompleted = ncap;
	}
	e->completed[e->ncompleted++] = rc;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
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

/* n's run read inputs that changed under it (step_finish said STEP_AGAIN,
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
		make_ready(e, g, n);
	}
}

/* A tool ended: finish its step (e->mu held, dropped for the work). */
static void
work_complete(struct engine *e, struct run_ctx *rc)
{
	struct node *n = rc->n;
	struct graph *g = rc->g;  /* rc lives in n->w, which may go below */
	int cancelled = !node_wanted(e, n) && node_cancelled(e, n), rv;

	pthread_mutex_unlock(&e->mu);
	rv = step_finish(e, g, n);
	if (rv == STEP_AGAIN) {
		run_again(e, g, n, cancelled);
		return;
	}
	if (rv != 0 && !cancelled)
		step_record_failure(e, g, n);
	else if (rv != 0)
		step_forget(n);  /* cancelled is not failed: no record */
	pages_tick(e);
	pthread_mutex_lock(&e->mu);
	if (rv != 0 && cancelled)
		node_finish(e, g, n, N_CANCELLED);
	else if (rv != 0)
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
	e->running++;
	e->starting++;
	n->w->run = (struct run_ctx){e, g, n};
	if ((rv = need_token_add(e, g, n)) != 0)
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	pthread_mutex_unlock(&e->mu);
	if (rv == 0)
		rv = step_start(e, g, n);
	if (rv != 0)
		step_record_failure(e, g, n);
	pthread_mutex_lock(&e->mu);
	if (--e->starting == 0)
		pthread_cond_broadcast(&e->idle_cv);
	/* cancelled while it started, before engine_cancel could see its
	 * pid: it would run to its end for nobody. (Its tool may have ended
	 * and its step be finishing already: pid 0, or finished: no w.) */
	if (rv == 0 && n->st == N_RUNNING && n->w != NULL && !node_wanted(e, n)) {
		pid_t pid = __atomic_load_n(&n->w->pid, __ATOMIC_ACQUIRE);
		if (pid > 0)
			spawner_kill(e->sp, pid, 2000);
	}
	if (rv != 0) {
		need_run_end(e, n);
		e->running--;
		node_fail(e, g, n);
	}
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
 * run holds its key's parts (~0.5 KB of labels and values) until its tool
 * starts, and a 100,000-step clean build would otherwise decide every step
 * up front and hold them all. A step more urgent than every waiting one (an
 * editor's) is decided at once. */
static int
eval_room(const struct engine *e)
{
	if (e->runnable.n < 16 + 4 * (size_t)jobs_limit(e))
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
			make_ready(e, g, n);
	} else if (dry) {
		node_finish(e, g, n, N_WOULD_RUN);
	} else {
		n->st = N_RUNNABLE;
		if (heap_push(&e->runnable, g, n) != 0)
			node_fail(e, g, n);
	}
}

/* Steps a worker takes from the ready heap at once, at most. */
#define EVAL_BATCH 8

/* Decide ready steps, first the popped n, then more while many are
 * waiting (e->mu held, dropped for the work). Up to EVAL_BATCH at once,
 * and no more than a share of the ready heap, so that the other workers
 * have theirs: a warm build's pass over 11,000 up-to-date steps, a few µs
 * of work each, spent more time taking and waiting for the lock (twice a
 * step) than deciding. Waking one worker per step made ready stays: a
 * chain in which a worker that took work woke the next while more was
 * left made the full build's slots wait (1k: 18 % of the CPU idle, not
 * 10 %). */
static void
work_eval(struct engine *e, struct graph *g, struct node *n)
{
	struct graph *bg[EVAL_BATCH];
	struct node *bn[EVAL_BATCH];
	enum eval_result r[EVAL_BATCH];
	size_t want = e->ready.n / (2 * (size_t)e->nthreads) + 1, k = 0;
	int dry = e->wave_dry;

	if (want > EVAL_BATCH)
		want = EVAL_BATCH;
	for (;;) {
		if (!node_wanted(e, n) || e->quit)
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
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; i < k; i++)
		r[i] = eval_work(e, bg[i], bn[i], dry);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < k; i++)
		eval_after(e, bg[i], bn[i], r[i], dry);
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
	 * step): every tool's exec waited ~0.1 ms behind the daemon (fork
	 * to exec 0.19 ms median in a 1k build, 0.07 ms in a plain spawn
	 * loop). SCHED_BATCH wakes
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
		if (e->running < jobs_limit(e) && !e->quit &&
		    (n = pop_live(&e->runnable, N_RUNNABLE, &g)) != NULL) {
			if (node_wanted(e, n))
				work_start(e, g, n);
			else
				node_finish(e, g, n, N_CANCELLED);
		} else if (e->ncompleted > 0) {
			work_complete(e, e->completed[--e->ncompleted]);
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

