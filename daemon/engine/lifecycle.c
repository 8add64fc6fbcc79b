/* lifecycle.c — starting and stopping the engine, and `kiln why`.
 *
 * Threads: engine_new and engine_free from the daemon's main thread;
 * engine_why from handler threads (it takes e->mu like everything else). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_jobs.h"
#include "kiln_rmtree.h"
#include "engine_int.h"
#include "timeline.h"
#include "kiln_clock.h"
#include "decide.h"
#include "discover.h"
#include "edits.h"
#include "estimate.h"
#include "graph.h"
#include "need.h"
#include "record_batch.h"
#include "remote.h"
#include "schedule.h"
#include "scratch.h"
#include "search_path.h"
#include "selfwrite.h"
#include "orphans.h"
#include "watch.h"

/* ---- life ----------------------------------------------------------------- */

static unsigned
ncores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

/* Kill what tools of a previous daemon of this project left running
 * (orphans.h), and say so in the daemon's log. How long it waits for them
 * to end is generous: a process SIGKILLed in uninterruptible sleep ends
 * when its I/O does. */
static void
orphans_sweep(struct engine *e)
{
	char msg[128];
	unsigned n = 0;
	int rv = orphans_kill(e->root, 2000, &n);

	if (e->cfg.log == NULL || (rv == 0 && n == 0))
		return;
	if (rv != 0)
		snprintf(msg, sizeof msg, "looking for processes a previous daemon "
		         "left running: %s (killed %u)", kiln_strerror(rv), n);
	else
		snprintf(msg, sizeof msg, "killed %u process%s a previous daemon of "
		         "this project left running", n, n == 1 ? "" : "es");
	e->cfg.log(e->cfg.arg, rv != 0, msg);
}

/* Whether this thread can switch to SCHED_BATCH and back to SCHED_OTHER
 * (it ends as it began when it can). */
static int
policy_round_trip_works(void)
{
	struct sched_param prio0 = {0};

	if (pthread_setschedparam(pthread_self(), SCHED_BATCH, &prio0) != 0)
		return 0;
	return pthread_setschedparam(pthread_self(), SCHED_OTHER, &prio0) == 0;
}

/* The engine's own writes (build/, .kiln/) are not the project's changes:
 * pass on the rest. */
static int
first_is(const char *rel, const char *name)
{
	size_t n = strlen(name);

	return strncmp(rel, name, n) == 0 && (rel[n] == '\0' || rel[n] == '/');
}

/* Say in the log that inotify dropped events, at most once a second: a
 * flood that outruns the reader for long overflows the queue once per
 * queueful. The rescan itself needs no word: the watch trusts nothing
 * looked at before, and the changes go out as "everything". */
static void
overflow_say(struct engine *e)
{
	int64_t now = kiln_mono_ns();

	if (e->cfg.log == NULL ||
	    (e->overflow_said_ns != 0 && now - e->overflow_said_ns < 1000000000))
		return;
	e->overflow_said_ns = now;
	e->cfg.log(e->cfg.arg, 0, "the watch's queue overflowed (inotify dropped "
	           "events): the next build stats every file again");
}

static void
watch_changed(void *arg, const char *relpath, enum watch_change kind)
{
	struct engine *e = arg;

	if (relpath != NULL && (first_is(relpath, "build") || first_is(relpath, ".kiln")))
		return;
	/* a step's own write, not an edit: it would start the build that
	 * runs the step that writes again (the watch's record of the change
	 * stays: the file is looked at again) */
	if (relpath != NULL && selfwrite_is(e, relpath))
		return;
	if (kind == WATCH_CHANGE_OVERFLOW)
		overflow_say(e);
	atomic_fetch_add(&e->changes, 1);
	edits_note(e, kind == WATCH_CHANGE_ALL || kind == WATCH_CHANGE_OVERFLOW ? NULL : relpath);
	if (e->cfg.changed != NULL &&
	    (relpath == NULL || !selfwrite_defer(e, relpath, kind == WATCH_CHANGE_COMPLETE)))
		e->cfg.changed(e->cfg.arg, relpath, kind == WATCH_CHANGE_COMPLETE);
}

void
engine_file_changed(struct engine *e, const char *relpath)
{
	atomic_fetch_add(&e->changes, 1);
	edits_note(e, relpath);
}

int
engine_new(const struct engine_config *cfg, struct engine **ep)
{
	struct engine *e = calloc(1, sizeof *e);
	int rv = KILN_ENOMEM;

	if (e == NULL)
		return KILN_ENOMEM;
	e->cfg = *cfg;
	e->s = cfg->store;
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->batch_mu, NULL);
	pthread_mutex_init(&e->commit_mu, NULL);
	pthread_mutex_init(&e->tools_mu, NULL);
	pthread_mutex_init(&e->scratch_mu, NULL);
	e->rootfd = -1;
	pthread_cond_init(&e->cv, NULL);
	pthread_cond_init(&e->idle_cv, NULL);
	e->jobs_default = cfg->default_jobs ? cfg->default_jobs : ncores();
	if ((e->root = strdup(cfg->root)) == NULL ||
	    (e->tool_path = strdup(cfg->tool_path ? cfg->tool_path
	                                          : "/usr/local/bin:/usr/bin:/bin")) == NULL ||
	    kiln_batch_new(&e->batch) != 0 ||
	    (e->rootfd = open(cfg->root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    filestate_new(e->s, e->root, &e->fs) != 0 || need_init(e) != 0 ||
	    engine_path_init(e) != 0 || est_open(e) != 0)
		goto fail;
	if ((rv = remote_new(e)) != 0)
		goto fail;
	rv = KILN_ENOMEM;
	e->batch_gen = 1;   /* a node's rec_lo of 0 means no batch */
	e->next_build = timeline_last_id(e->rootfd);   /* no trace replaced */
	if ((rv = selfwrite_new(&e->selfw)) != 0 || (rv = edits_start(e)) != 0)
		goto fail;
	rv = KILN_ENOMEM;
	/* without inotify (or with --no-watch) every file is stat'ed */
	if (!cfg->no_watch && watch_new(e->root, &e->watch) == 0) {
		filestate_set_watch(e->fs, e->watch);
		watch_test_stall(e->watch, cfg->watch_stall_ms);
		watch_on_change(e->watch, watch_changed, e);
	}
	blobs_watch_open(e);
	/* before the old scratch areas go: nothing of a previous daemon may
	 * still be running, there or anywhere */
	orphans_sweep(e);
	if ((rv = scratch_init(e)) != 0)
		goto fail;
	rv = KILN_ENOMEM;
	trace_setup(e);
	/* only from the normal policy: a daemon started under another one
	 * (chrt, a real-time or idle class) keeps it for its tools; and only
	 * where this thread can go to SCHED_BATCH and back (a sandbox that
	 * refuses the call would otherwise fail every tool's start) */
	e->workers_batch = sched_getscheduler(0) == SCHED_OTHER &&
	                   policy_round_trip_works();
	if ((rv = cfg->spawner != NULL ? spawner_new_ops(&e->sp, cfg->spawner)
	                               : spawner_new(&e->sp, e->workers_batch)) != 0)
		goto fail;
	/* deciding and finishing steps is file-system work that waits on the
	 * kernel more than it computes: twice the cores keeps -j slots fed */
	e->nthreads = cfg->workers ? cfg->workers : 2 * ncores() < 4 ? 4 : 2 * ncores();
	if ((e->threads = calloc(e->nthreads, sizeof *e->threads)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < e->nthreads; i++)
		if (pthread_create(&e->threads[i], NULL, worker_main, e) != 0) {
			e->nthreads = i;
			rv = KILN_EIO;
			goto fail;
		}
	*ep = e;
	return 0;
fail:
	engine_free(e);
	return rv;
}

void
engine_free(struct engine *e)
{
	if (e == NULL)
		return;
	/* no edit reaches the engine from here on */
	if (e->watch != NULL)
		watch_on_change(e->watch, NULL, NULL);
	edits_stop(e);
	pthread_mutex_lock(&e->mu);
	e->quit = 1;
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL)
			e->active[i]->cancelled = e->active[i]->stopped = 1;
	/* steps on agents end as killed, as local tools do below: now,
	 * before a worker can see nothing left to do and leave (a job being
	 * made is killed by its worker when it sees quit) */
	agent_jobs_quit(e);
	pthread_cond_broadcast(&e->cv);
	while (e->starting > 0)
		pthread_cond_wait(&e->idle_cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	/* kills what still runs; the completions finish those steps */
	spawner_free(e->sp);
	e->sp = NULL;
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	if (e->batch != NULL)
		batch_commit(e);
	/* no worker looks anything up or queues an upload any more */
	remote_free(e);
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++) {
		if (e->active[i] != NULL) {
			timeline_free(e->active[i]->tl);
			free(e->active[i]->expect_ms);
			free(e->active[i]->counted);
			free(e->active[i]->told);
		}
		free(e->active[i]);
	}
	while (e->finished != NULL) {
		struct build *b = e->finished;
		e->finished = b->next;
		free(b);
	}
	graphs_free(e);
	est_save(e);
	est_close(e);
	kiln_desc_free(e->desc);
	stamps_free(e);
	filestate_free(e->fs);
	selfwrite_free(e->selfw);
	watch_free(e->watch);
	watch_free(e->blobs);
	kiln_batch_free(e->batch);
	free(e->ready.v);
	free(e->runnable.v);
	free(e->runnable_local.v);
	free(e->completed);
	free(e->tools);
	engine_path_free(e);
	need_free(e);
	agent_jobs_free(e);
	if (e->rootfd >= 0)
		close(e->rootfd);
	pthread_mutex_destroy(&e->tools_mu);
	scratch_free_all(e);
	pthread_mutex_destroy(&e->scratch_mu);
	free(e->threads);
	free(e->root);
	free(e->tool_path);
	pthread_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->batch_mu);
	pthread_mutex_destroy(&e->commit_mu);
	pthread_cond_destroy(&e->cv);
	pthread_cond_destroy(&e->idle_cv);
	free(e);
}

/* ---- why ------------------------------------------------------------------ */

/* Whether the loaded project has that profile (e->mu held). */
static int
profile_known(const struct engine *e, const char *profile)
{
	const char *const *names;
	size_t n = kiln_desc_profiles(e->desc, &names);

	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], profile) == 0)
			return 1;
	return 0;
}

int
engine_why(struct engine *e, const char *profile, const char *url,
           Kiln__StepRecord **rec, int *this_daemon, char *err, size_t errlen)
{
	const char *const *profiles;
	struct graph *g = NULL;
	void *data = NULL;
	size_t len = 0;
	uint32_t at;
	int rv, decided = 0, up_to_date = 0;
	char *restored = NULL;   /* the output its decision put back, edited */
	kiln_id key;

	*rec = NULL;
	*this_daemon = 0;
	pthread_mutex_lock(&e->mu);
	if (e->desc == NULL && (rv = project_fresh(e, err, errlen)) != 0) {
		pthread_mutex_unlock(&e->mu);
		return rv;
	}
	if (profile == NULL || profile[0] == '\0') {
		if (kiln_desc_profiles(e->desc, &profiles) == 0) {
			pthread_mutex_unlock(&e->mu);
			return KILN_ENOTFOUND;
		}
		profile = profiles[0];
	} else if (!profile_known(e, profile)) {
		profile_unknown(e, profile, err, errlen);
		pthread_mutex_unlock(&e->mu);
		return KILN_EINVAL;
	}
	for (g = e->graphs; g != NULL && strcmp(g->profile, profile) != 0; g = g->next)
		;
	/* what this daemon knows, copied now: a reload may free g */
	if (g != NULL && step_index(g->plan, url, &at) && g->nodes[at].wave != 0) {
		decided = 1;
		up_to_date = g->nodes[at].outcome == O_UP_TO_DATE && g->nodes[at].have;
		key = g->nodes[at].key;
		if (up_to_date && !node_result_held(&g->nodes[at]) &&
		    g->nodes[at].restored != NULL)
			restored = strdup(g->nodes[at].restored);
	}
	pthread_mutex_unlock(&e->mu);
	if ((rv = kiln_store_step_get(e->s, profile, url, &data, &len)) != 0) {
		free(restored);
		return rv;
	}
	*rec = kiln__step_record__unpack(NULL, len, data);
	free(data);
	if (*rec == NULL) {
		free(restored);
		return KILN_ECORRUPT;
	}
	*this_daemon = decided;
	/* up to date since the record: say so, and keep the record's story
	 * of the decision before (its decision field stays what it was) */
	if (up_to_date && (*rec)->key.len == 16 && memcmp((*rec)->key.data, key.b, 16) == 0) {
		size_t lr = restored != NULL ? strlen(restored) : 0;
		char *why = malloc(strlen((*rec)->reason) + lr + 128);
		if (why != NULL) {
			/* its last decision put back an output edited in build/ */
			sprintf(why, "up to date%s%s%s (nothing changed since it %s: %s)",
			        restored ? "; " : "", restored ? restored : "",
			        restored ? " was edited in build/: restored from the store" : "",
			        (*rec)->decision == KILN__STEP_RECORD__DECISION__RAN ?
			        "ran" : "was decided", (*rec)->reason);
			/* unpack allocated the string with malloc: swap in ours */
			if ((*rec)->reason != protobuf_c_empty_string)
				free((*rec)->reason);
			(*rec)->reason = why;
		}
	}
	free(restored);
	return 0;
}

