/* edits.c — project files edited while builds run (see edits.h).
 *
 * The reader thread of the watch only queues the paths (under a lock of
 * our own, never e->mu: the engine holds e->mu while it calls into the
 * watch, whose lock is held while it calls us). The edits thread does the
 * rest, a batch at a time, in this order: the file table forgets the
 * paths first, then the nodes are looked at under e->mu. A decision that
 * began before the forget is in N_EVAL (or finished) when they are looked
 * at, and is marked stale; one that begins after it sees the new file. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "builds.h"
#include "edits.h"
#include "schedule.h"
#include "selfwrite.h"
#include "kiln_clock.h"
#include "tool_spawn.h"

/* Paths queued before the batch is taken as "anything changed": a
 * checkout touching more files than this is looked at as a whole. */
#define EDITS_MAX_QUEUED 16384

/* At most this long waiting for edits to settle before a cancelled step
 * runs again. */
#define EDITS_SETTLE_MAX_MS 1000

struct edits {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int started, quit;
	char **paths;            /* queued, malloc'd each */
	size_t n, cap;
	int all;                 /* a change no path names */
	_Atomic int64_t last_ns; /* kiln_mono_ns of the last edit */
	/* Edits noted, and noted before the last batch the thread applied:
	 * a build whose steps are all finished ends only when they are
	 * equal (edits_pending). noted under mu; applied under e->mu. */
	_Atomic uint64_t noted, applied;
};

static void
paths_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
edits_note(struct engine *e, const char *relpath)
{
	struct edits *ed = e->edits;
	char *copy = NULL;

	if (ed == NULL)
		return;
	atomic_store(&ed->last_ns, kiln_mono_ns());
	pthread_mutex_lock(&ed->mu);
	atomic_fetch_add(&ed->noted, 1);
	if (relpath == NULL || ed->all || ed->n >= EDITS_MAX_QUEUED ||
	    (copy = strdup(relpath)) == NULL) {
		/* not named, too many, or no memory to name it: everything */
		paths_free(ed->paths, ed->n);
		ed->paths = NULL;
		ed->n = ed->cap = 0;
		ed->all = 1;
	} else {
		if (ed->n == ed->cap) {
			size_t ncap = ed->cap ? ed->cap * 2 : 16;
			char **nv = realloc(ed->paths, ncap * sizeof *nv);
			if (nv == NULL) {
				free(copy);
				paths_free(ed->paths, ed->n);
				ed->paths = NULL;
				ed->n = ed->cap = 0;
				ed->all = 1;
				goto wake;
			}
			ed->paths = nv;
			ed->cap = ncap;
		}
		ed->paths[ed->n++] = copy;
	}
wake:
	pthread_cond_signal(&ed->cv);
	pthread_mutex_unlock(&ed->mu);
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first of the sorted paths[] not before key. */
static size_t
lower_bound(char *const *paths, size_t n, const char *key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(paths[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether one of the sorted paths[] is file, or (file "dir/": a folder's
 * listing) a name directly in that folder. */
static int
path_edited(char *const *paths, size_t n, const char *file)
{
	size_t len = strlen(file), at = lower_bound(paths, n, file);

	if (len > 0 && file[len - 1] == '/') {
		for (; at < n && strncmp(paths[at], file, len) == 0; at++)
			if (strchr(paths[at] + len, '/') == NULL)
				return 1;
		return 0;
	}
	return at < n && strcmp(paths[at], file) == 0;
}

/* Whether n reads one of the edited paths: its declared inputs, and with
 * disc_stable the files its last result discovered (which a decision or
 * a run being finished may be replacing: e->mu does not guard them
 * then). */
static int
node_reads(const struct node *n, char *const *paths, size_t np, int disc_stable)
{
	for (size_t i = 0; i < n->ks->ninputs; i++)
		if (path_edited(paths, np, n->ks->inputs[i]))
			return 1;
	if (disc_stable)
		for (uint32_t i = 0; i < n->ndisc; i++)
			if (path_edited(paths, np, n->disc[i]))
				return 1;
	return 0;
}

/* Cancel n's running tool (e->mu held). 1 if a signal went to it. */
static int
run_cancel(struct engine *e, struct node *n)
{
	if (n->cancels >= EDITS_MAX_CANCELS || run_kill(e, n, EDITS_KILL_GRACE_MS) != 0)
		return 0;
	n->superseded = 1;
	n->cancels++;
	return 1;
}

/* Look at the nodes of the wave for one batch of edits (e->mu held). */
static void
nodes_edited(struct engine *e, char *const *paths, size_t np)
{
	uint64_t want = 0;
	char msg[1400];

	for (struct graph *g = e->graphs; g != NULL; g = g->next)
		for (uint32_t i = 0; i < g->n; i++) {
			struct node *n = &g->nodes[i];
			if (n->wave != e->wave)
				continue;
			switch ((enum node_state)n->st) {
			case N_RUNNING:
				/* its run is finished by a worker: verify.c sees
				 * what changed under it; decide it again after */
				if (n->finishing || n->w == NULL) {
					if (node_reads(n, paths, np, 0)) {
						n->stale = 1;
						want |= n->builds;
					}
					break;
				}
				if (!node_reads(n, paths, np, 1))
					break;
				if (run_cancel(e, n)) {
					snprintf(msg, sizeof msg, "%s (%s): an input changed "
					         "while its tool ran; cancelling it, it runs "
					         "again when the edits settle", n->ks->url,
					         g->profile);
					if (e->cfg.log)
						e->cfg.log(e->cfg.arg, 0, msg);
				} else {
					n->stale = 1;
					want |= n->builds;
				}
				break;
			case N_EVAL:
				/* deciding now, perhaps from what it read before
				 * the edit (its discovered files may be changing
				 * under the decision: not read here) */
				n->stale = 1;
				want |= n->builds;
				break;
			case N_RUNNABLE:
			case N_DONE:
			case N_FAILED:
				if (node_reads(n, paths, np, 1)) {
					n->stale = 1;
					want |= n->builds;
				}
				break;
			default:
				/* not decided yet: it will see the new state */
				break;
			}
		}
	for (unsigned s = 0; s < ENGINE_MAX_BUILDS; s++)
		if (e->active[s] != NULL && ((want >> s) & 1))
			e->active[s]->repass = 1;
}

/* Move to the end of paths[] those a step's own write left as they are
 * (selfwrite.h): they make no step stale. The number of the others, still
 * sorted. (The file table forgot them all: each is looked at again.) */
static size_t
edits_not_own(struct engine *e, char **paths, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++)
		if (!selfwrite_is(e, paths[i])) {
			char *p = paths[kept];
			paths[kept++] = paths[i];
			paths[i] = p;
		}
	return kept;
}

/* Apply one batch: the edits noted up to taken. A build that found all
 * its steps finished while the batch was on its way waited for it
 * (edits_pending): look at the builds again once it is applied. */
static void
batch_apply(struct engine *e, char **paths, size_t n, int all, uint64_t taken)
{
	if (n > 1)
		qsort(paths, n, sizeof *paths, str_cmp);
	for (size_t i = 0; i < n; i++)
		filestate_forget(e->fs, paths[i]);
	n = edits_not_own(e, paths, n);
	pthread_mutex_lock(&e->mu);
	if (e->nactive > 0 && !e->wave_dry && all) {
		/* no names: every build decides all it has again, in a new
		 * file-state pass (running tools are left to verify.c) */
		e->edits_all = 1;
		for (unsigned s = 0; s < ENGINE_MAX_BUILDS; s++)
			if (e->active[s] != NULL)
				e->active[s]->repass = 1;
	} else if (e->nactive > 0 && !e->wave_dry) {
		nodes_edited(e, paths, n);
	}
	atomic_store(&e->edits->applied, taken);
	if (e->nactive > 0)
		builds_check(e);
	pthread_mutex_unlock(&e->mu);
}

int
edits_pending(struct engine *e)
{
	struct edits *ed = e->edits;

	return ed != NULL && atomic_load(&ed->noted) != atomic_load(&ed->applied);
}

static void *
edits_main(void *arg)
{
	struct engine *e = arg;
	struct edits *ed = e->edits;

	pthread_mutex_lock(&ed->mu);
	for (;;) {
		char **paths;
		size_t n;
		int all;
		uint64_t taken;

		while (!ed->quit && ed->n == 0 && !ed->all)
			pthread_cond_wait(&ed->cv, &ed->mu);
		if (ed->quit)
			break;
		paths = ed->paths;
		n = ed->n;
		all = ed->all;
		taken = atomic_load(&ed->noted);
		ed->paths = NULL;
		ed->n = ed->cap = 0;
		ed->all = 0;
		pthread_mutex_unlock(&ed->mu);
		if (e->cfg.hold_edits_ms > 0)
			nanosleep(&(struct timespec){e->cfg.hold_edits_ms / 1000,
			                             (long)(e->cfg.hold_edits_ms % 1000) * 1000000},
			          NULL);
		batch_apply(e, paths, n, all, taken);
		paths_free(paths, n);
		pthread_mutex_lock(&ed->mu);
	}
	pthread_mutex_unlock(&ed->mu);
	return NULL;
}

int
edits_start(struct engine *e)
{
	struct edits *ed = calloc(1, sizeof *ed);

	if (ed == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&ed->mu, NULL);
	pthread_cond_init(&ed->cv, NULL);
	e->edits = ed;
	if (pthread_create(&ed->thread, NULL, edits_main, e) != 0) {
		e->edits = NULL;
		pthread_mutex_destroy(&ed->mu);
		pthread_cond_destroy(&ed->cv);
		free(ed);
		return KILN_EIO;
	}
	ed->started = 1;
	return 0;
}

void
edits_stop(struct engine *e)
{
	struct edits *ed = e->edits;

	if (ed == NULL)
		return;
	pthread_mutex_lock(&ed->mu);
	ed->quit = 1;
	pthread_cond_signal(&ed->cv);
	pthread_mutex_unlock(&ed->mu);
	if (ed->started)
		pthread_join(ed->thread, NULL);
	e->edits = NULL;
	paths_free(ed->paths, ed->n);
	pthread_mutex_destroy(&ed->mu);
	pthread_cond_destroy(&ed->cv);
	free(ed);
}

void
edits_settle(struct engine *e)
{
	struct edits *ed = e->edits;
	int64_t settle = (int64_t)(e->cfg.settle_ms ? e->cfg.settle_ms : 30) * 1000000;
	int64_t until = kiln_mono_ns() + (int64_t)EDITS_SETTLE_MAX_MS * 1000000;

	if (ed == NULL)
		return;
	for (;;) {
		int64_t now = kiln_mono_ns(), quiet = now - atomic_load(&ed->last_ns);
		int64_t wait = settle - quiet;
		struct timespec ts;
		if (wait <= 0 || now >= until)
			return;
		if (wait > until - now)
			wait = until - now;
		ts.tv_sec = wait / 1000000000;
		ts.tv_nsec = wait % 1000000000;
		nanosleep(&ts, NULL);
	}
}
