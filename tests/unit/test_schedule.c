/* test_schedule.c — the engine's scheduling rules (engine.c's heaps, -j,
 * prerequisites, priorities, kiln need's lent slot, cancellation), through
 * engine.h's API with a fake spawner (tool_spawn.h's struct spawner_ops): no
 * process runs. The fake records which steps started, in which order and
 * how many ran at once, and each "tool" runs until the case ends it, with
 * success (writing its outputs where the real tool would: the ${out}
 * paths of its argv, relative to its cwd), an exit status, or a signal,
 * through the same done callback the real reaper calls
 * (engine_tool_done). Nothing sleeps: the case waits on the fake's and the
 * published events' condition variable, with a deadline that fails it.
 *
 * Each case writes a small project (one tool `true ${out}`, untraced; a
 * step per URL, declared prerequisites as "@url" inputs) and runs its
 * engine with one worker thread where start order is asserted: the order
 * of deciding then follows the ready heap alone, not which of several
 * workers finished deciding first.
 *
 * Threads: the engine's worker calls the fake's start, and its kill with
 * the engine's lock held; publish comes from the engine's threads with
 * that lock held. All of them take only sc->mu, which the case never holds
 * while it calls the engine. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "engine.h"
#include "kiln_error.h"
#include "tool_spawn.h"

#define MAX_RUNS 64
#define MAX_EVENTS 128
#define MAX_ENDS 8
#define WAIT_S 30          /* a deadline, never a pause: fails the case */

/* One "tool" the fake was asked to start. */
struct run {
	char url[128];
	char cwd[PATH_MAX];
	char token[40];        /* its KILN_STEP_TOKEN ("" without one) */
	char *outs[4];         /* argv[1..]: the ${out} paths, relative to cwd */
	size_t nouts;
	pid_t pid;
	spawn_done_fn done;
	void *done_arg;
	int running, killed;
	uint64_t wall_ns;      /* what its end reports (0: 1 ms) */
	unsigned at_start;     /* fake tools running when it started, itself too */
	unsigned seq_start, seq_end;  /* the order of starts and ends */
};

struct step_ev {
	char url[128];
	Kiln__StepEvent__Result result;
	uint64_t estimate_ns;
	unsigned seq;
};

struct build_end {
	uint64_t build;
	uint32_t ran, reused, failed, skipped, cancelled, total;
	char error[256];
};

struct sched {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct run runs[MAX_RUNS];
	size_t nruns;
	unsigned running, max_running, seq;
	struct step_ev steps[MAX_EVENTS];
	size_t nsteps;
	struct build_end ends[MAX_ENDS];
	size_t nends;
	struct spawner_ops ops;
	kiln_store *store;
	struct engine *e;
	struct engine_config cfg;
	char root[PATH_MAX];
	char logged[2048];     /* the engine's log lines naming durations */
};

/* ---- the fake spawner ---------------------------------------------------- */

static const char *
env_get(const char *const *envp, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
			return envp[i] + len + 1;
	return NULL;
}

static int
fake_start(void *arg, const struct spawn_req *rq, spawn_done_fn done, void *done_arg,
           pid_t *pid)
{
	struct sched *sc = arg;
	const char *url = env_get(rq->envp, "KILN_URL");
	const char *tok = env_get(rq->envp, "KILN_STEP_TOKEN");
	struct run *r;
	char line[200];
	int len;

	/* what a tool prints goes to its log */
	len = snprintf(line, sizeof line, "fake tool for %s\n", url ? url : "?");
	if (tu_write_all(rq->log_fd, line, (size_t)len) != 0)
		return KILN_EIO;
	pthread_mutex_lock(&sc->mu);
	if (sc->nruns == MAX_RUNS) {
		pthread_mutex_unlock(&sc->mu);
		return KILN_ENOMEM;
	}
	r = &sc->runs[sc->nruns];
	memset(r, 0, sizeof *r);
	snprintf(r->url, sizeof r->url, "%s", url ? url : "?");
	snprintf(r->cwd, sizeof r->cwd, "%s", rq->cwd ? rq->cwd : ".");
	snprintf(r->token, sizeof r->token, "%s", tok ? tok : "");
	for (size_t i = 1; rq->argv[i] != NULL && r->nouts < 4; i++)
		r->outs[r->nouts++] = strdup(rq->argv[i]);
	r->pid = (pid_t)(100000 + sc->nruns);   /* no process: only kill sees it */
	r->done = done;
	r->done_arg = done_arg;
	r->running = 1;
	r->seq_start = ++sc->seq;
	r->at_start = ++sc->running;
	if (sc->running > sc->max_running)
		sc->max_running = sc->running;
	sc->nruns++;
	__atomic_store_n(pid, r->pid, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

/* Called with the engine's lock held: only note it. */
static int
fake_kill(void *arg, pid_t pid, unsigned grace_ms)
{
	struct sched *sc = arg;
	int rv = KILN_ENOTFOUND;

	(void)grace_ms;
	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nruns; i++)
		if (sc->runs[i].pid == pid && sc->runs[i].running) {
			sc->runs[i].killed = 1;
			rv = 0;
		}
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
	return rv;
}

/* End run r (sc->mu held, dropped for the callback): how 0 succeeds and
 * writes its outputs first, > 0 exits with that status, < 0 dies of
 * signal -how. */
static void
run_end(struct sched *sc, struct run *r, int how)
{
	struct spawn_result res = {.exited = how >= 0, .status = how >= 0 ? how : -how,
	                           .wall_ns = r->wall_ns ? (int64_t)r->wall_ns : 1000000,
	                           .cpu_ns = 1000, .maxrss_kb = 1024};
	spawn_done_fn done = r->done;
	void *done_arg = r->done_arg;

	for (size_t i = 0; how == 0 && i < r->nouts; i++) {
		char path[PATH_MAX * 2];
		snprintf(path, sizeof path, "%s/%s", r->cwd, r->outs[i]);
		if (tu_try_write_file(path, r->url, strlen(r->url)) != 0)
			res.status = 99;   /* the step fails, naming no output */
	}
	r->running = 0;
	r->seq_end = ++sc->seq;
	sc->running--;
	pthread_mutex_unlock(&sc->mu);
	done(done_arg, &res);
	pthread_mutex_lock(&sc->mu);
}

/* engine_free: every tool still running dies of SIGKILL. */
static void
fake_stop(void *arg)
{
	struct sched *sc = arg;

	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nruns; i++)
		if (sc->runs[i].running)
			run_end(sc, &sc->runs[i], -SIGKILL);
	pthread_mutex_unlock(&sc->mu);
}

/* ---- events -------------------------------------------------------------- */

static void
on_publish(void *arg, Kiln__Event *ev)
{
	struct sched *sc = arg;

	pthread_mutex_lock(&sc->mu);
	if (ev->kind_case == KILN__EVENT__KIND_STEP && sc->nsteps < MAX_EVENTS) {
		struct step_ev *s = &sc->steps[sc->nsteps++];
		snprintf(s->url, sizeof s->url, "%s", ev->step->url);
		s->result = ev->step->result;
		s->estimate_ns = ev->step->estimate_ns;
		s->seq = ++sc->seq;
	} else if (ev->kind_case == KILN__EVENT__KIND_BUILD_FINISHED && sc->nends < MAX_ENDS) {
		const Kiln__BuildFinished *bf = ev->build_finished;
		struct build_end *b = &sc->ends[sc->nends++];
		*b = (struct build_end){bf->build, bf->ran, bf->reused, bf->failed,
		                        bf->skipped, bf->cancelled, bf->total, ""};
		snprintf(b->error, sizeof b->error, "%s", bf->error ? bf->error : "");
	}
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
}

static void
on_log(void *arg, int error, const char *msg)
{
	struct sched *sc = arg;

	if (strstr(msg, "durations") != NULL) {
		pthread_mutex_lock(&sc->mu);
		size_t at = strlen(sc->logged);
		snprintf(sc->logged + at, sizeof sc->logged - at, "%s\n", msg);
		pthread_mutex_unlock(&sc->mu);
	}
	/* the fake runs nothing: no tracer is expected */
	if (error && strstr(msg, "libkilntrace.so") == NULL)
		fprintf(stderr, "# engine: %s\n", msg);
}

/* ---- the case's project and engine --------------------------------------- */

/* Write the project: steps[] are "url" or "url:dep1,dep2" (prerequisites
 * by URL), each built by the fake tool t from src/in.txt or its deps; a
 * "long=" before the URL builds it with the tool long instead (the same
 * fake: the case says how long each run takes). */
static void
project_write(struct sched *sc, const char *const *steps, size_t nsteps)
{
	char path[PATH_MAX + 32], yaml[8192];
	size_t at = 0;

	at += (size_t)snprintf(yaml + at, sizeof yaml - at,
	                       "kiln: 1\nproject: t\nsources: [src]\n"
	                       "profiles:\n  default: {}\n"
	                       "tools:\n  t: { run: [true, \"${out}\"], trace: false }\n"
	                       "  long: { run: [true, \"${out}\"], trace: false }\n"
	                       "assets:\n");
	for (size_t i = 0; i < nsteps; i++) {
		int is_long = strncmp(steps[i], "long=", 5) == 0;
		const char *spec = steps[i] + (is_long ? 5 : 0);
		const char *colon = strchr(spec, ':');
		int ulen = colon ? (int)(colon - spec) : (int)strlen(spec);
		at += (size_t)snprintf(yaml + at, sizeof yaml - at,
		                       "  - url: %.*s\n    tool: %s\n    inputs: [", ulen, spec,
		                       is_long ? "long" : "t");
		if (colon == NULL) {
			at += (size_t)snprintf(yaml + at, sizeof yaml - at, "src/in.txt]\n");
			continue;
		}
		for (const char *d = colon + 1; *d != '\0';) {
			size_t dl = strcspn(d, ",");
			at += (size_t)snprintf(yaml + at, sizeof yaml - at, "\"@%.*s\"%s",
			                       (int)dl, d, d[dl] ? ", " : "]\n");
			d += dl + (d[dl] != '\0');
		}
	}
	assert_true(at < sizeof yaml);
	snprintf(path, sizeof path, "%s/src", sc->root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/src/in.txt", sc->root);
	tu_write_file(path, "input\n", 6);
	snprintf(path, sizeof path, "%s/kiln.yaml", sc->root);
	tu_write_file(path, yaml, at);
}

/* A project of steps[] in the case's dir, a store beside it, and an
 * engine with the fake spawner and `workers` threads. */
static struct sched *
sched_new(void **state, const char *const *steps, size_t nsteps, unsigned workers)
{
	struct sched *sc = calloc(1, sizeof *sc);
	struct engine_config *cfg;

	assert_non_null(sc);
	pthread_mutex_init(&sc->mu, NULL);
	pthread_cond_init(&sc->cv, NULL);
	snprintf(sc->root, sizeof sc->root, "%s/proj", tu_dir(state));
	assert_int_equal(mkdir(sc->root, 0755), 0);
	project_write(sc, steps, nsteps);
	tu_sh("mkdir '%s/.kiln'", sc->root);   /* kilnd makes it (kiln_paths) */
	sc->store = tu_open_store(state, KILN_DURABLE_NONE);
	sc->ops = (struct spawner_ops){fake_start, fake_kill, fake_stop, sc};
	cfg = &sc->cfg;
	cfg->root = sc->root;
	cfg->store = sc->store;
	cfg->workers = workers;
	cfg->default_jobs = 1;
	cfg->no_watch = 1;
	/* tools get a KILN_STEP_TOKEN (kiln need); nobody listens here */
	cfg->ipc_url = "ipc:///nonexistent/kiln-test.sock";
	cfg->publish = on_publish;
	cfg->log = on_log;
	cfg->arg = sc;
	cfg->spawner = &sc->ops;
	assert_kiln(0, engine_new(cfg, &sc->e));
	return sc;
}

/* A new engine on the same project and store, as a restarted daemon's
 * (nothing may be running). */
static void
sched_restart(struct sched *sc)
{
	engine_free(sc->e);
	sc->e = NULL;
	pthread_mutex_lock(&sc->mu);
	sc->nends = 0;   /* the new engine numbers its builds from 1 again */
	pthread_mutex_unlock(&sc->mu);
	assert_kiln(0, engine_new(&sc->cfg, &sc->e));
}

static void
sched_free(struct sched *sc)
{
	engine_free(sc->e);   /* the fake's stop ends what still runs */
	kiln_store_close(sc->store);
	for (size_t i = 0; i < sc->nruns; i++)
		for (size_t k = 0; k < sc->runs[i].nouts; k++)
			free(sc->runs[i].outs[k]);
	pthread_mutex_destroy(&sc->mu);
	pthread_cond_destroy(&sc->cv);
	free(sc);
}

/* Start a build of targets (NULL-terminated; NULL: every step). */
static uint64_t
build(struct sched *sc, const char *const *targets, uint32_t jobs, uint32_t prio,
      int keep_going)
{
	Kiln__BuildRequest rq = KILN__BUILD_REQUEST__INIT;
	Kiln__BuildReply rep = KILN__BUILD_REPLY__INIT;
	char err[512];
	size_t n = 0;
	int rv;

	while (targets != NULL && targets[n] != NULL)
		n++;
	rq.targets = (char **)targets;
	rq.n_targets = n;
	rq.jobs = jobs;
	rq.priority = prio;
	rq.keep_going = keep_going;
	if ((rv = engine_build(sc->e, &rq, &rep, err, sizeof err)) != 0)
		fail_msg("engine_build: %s: %s", kiln_strerror(rv), err);
	return rep.build;
}

/* ---- looking and waiting (sc->mu held) ----------------------------------- */

static struct run *
run_of(struct sched *sc, const char *url)
{
	for (size_t i = 0; i < sc->nruns; i++)
		if (strcmp(sc->runs[i].url, url) == 0)
			return &sc->runs[i];
	return NULL;
}

static const struct step_ev *
step_of(struct sched *sc, const char *url)
{
	for (size_t i = 0; i < sc->nsteps; i++)
		if (strcmp(sc->steps[i].url, url) == 0)
			return &sc->steps[i];
	return NULL;
}

static const struct build_end *
end_of(struct sched *sc, uint64_t build_id)
{
	for (size_t i = 0; i < sc->nends; i++)
		if (sc->ends[i].build == build_id)
			return &sc->ends[i];
	return NULL;
}

/* What the fake and the events saw, for failure messages (static; takes
 * sc->mu). */
static const char *
seen(struct sched *sc)
{
	static char buf[4096];
	size_t at = 0;

	pthread_mutex_lock(&sc->mu);
	at += (size_t)snprintf(buf + at, sizeof buf - at, "started:");
	for (size_t i = 0; i < sc->nruns && at < sizeof buf; i++)
		at += (size_t)snprintf(buf + at, sizeof buf - at, " %s%s", sc->runs[i].url,
		                       sc->runs[i].running ? "(running)" : "");
	at += (size_t)snprintf(buf + at, sizeof buf - at, "; events:");
	for (size_t i = 0; i < sc->nsteps && at < sizeof buf; i++)
		at += (size_t)snprintf(buf + at, sizeof buf - at, " %s=%d", sc->steps[i].url,
		                       (int)sc->steps[i].result);
	at += (size_t)snprintf(buf + at, sizeof buf - at, "; builds ended: %zu", sc->nends);
	pthread_mutex_unlock(&sc->mu);
	return buf;
}

enum wait_kind { W_STARTS, W_START_OF, W_STEP_EVENT, W_BUILD_END };

static int
wait_met(struct sched *sc, enum wait_kind k, const char *url, uint64_t n)
{
	switch (k) {
	case W_STARTS: return sc->nruns >= n;
	case W_START_OF: return run_of(sc, url) != NULL;
	case W_STEP_EVENT: return step_of(sc, url) != NULL;
	case W_BUILD_END: return end_of(sc, n) != NULL;
	}
	return 0;
}

/* Wait (sc->mu held) until the condition holds; fail the case, saying
 * what was seen, at the deadline. */
static void
wait_until(struct sched *sc, enum wait_kind k, const char *url, uint64_t n,
           const char *what)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_S;
	while (!wait_met(sc, k, url, n))
		if (pthread_cond_timedwait(&sc->cv, &sc->mu, &dl) == ETIMEDOUT &&
		    !wait_met(sc, k, url, n)) {
			pthread_mutex_unlock(&sc->mu);
			fail_msg("waited %d s for %s; %s", WAIT_S, what, seen(sc));
		}
}

static void
wait_starts(struct sched *sc, size_t n)
{
	char what[64];

	snprintf(what, sizeof what, "%zu tool starts", n);
	pthread_mutex_lock(&sc->mu);
	wait_until(sc, W_STARTS, NULL, n, what);
	pthread_mutex_unlock(&sc->mu);
}

static void
wait_start_of(struct sched *sc, const char *url)
{
	char what[200];

	snprintf(what, sizeof what, "%s to start", url);
	pthread_mutex_lock(&sc->mu);
	wait_until(sc, W_START_OF, url, 0, what);
	pthread_mutex_unlock(&sc->mu);
}

static Kiln__StepEvent__Result
wait_step_event(struct sched *sc, const char *url)
{
	char what[200];
	Kiln__StepEvent__Result r;

	snprintf(what, sizeof what, "the step event of %s", url);
	pthread_mutex_lock(&sc->mu);
	wait_until(sc, W_STEP_EVENT, url, 0, what);
	r = step_of(sc, url)->result;
	pthread_mutex_unlock(&sc->mu);
	return r;
}

static struct build_end
wait_build_end(struct sched *sc, uint64_t id)
{
	struct build_end b;

	pthread_mutex_lock(&sc->mu);
	wait_until(sc, W_BUILD_END, NULL, id, "the build's end");
	b = *end_of(sc, id);
	pthread_mutex_unlock(&sc->mu);
	return b;
}

/* Wait until no step is queued or running. A cancelled step's end
 * publishes nothing to wait on, so this polls engine_queued, yielding
 * (a bounded spin, not a pause). */
static void
wait_engine_idle(struct sched *sc)
{
	int64_t deadline = (int64_t)time(NULL) + WAIT_S;

	while (engine_queued(sc->e) > 0) {
		if ((int64_t)time(NULL) > deadline) {
			fail_msg("waited %d s for the engine to be idle (%u queued); %s",
			         WAIT_S, engine_queued(sc->e), seen(sc));
		}
		sched_yield();
	}
}

/* End url's running tool (see run_end for how). */
static void
tool_end(struct sched *sc, const char *url, int how)
{
	struct run *r = NULL;

	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nruns; i++)
		if (strcmp(sc->runs[i].url, url) == 0 && sc->runs[i].running)
			r = &sc->runs[i];
	if (r == NULL) {
		pthread_mutex_unlock(&sc->mu);
		fail_msg("no tool of %s is running to end; %s", url, seen(sc));
	}
	run_end(sc, r, how);
	pthread_mutex_unlock(&sc->mu);
}

/* The URL of the i-th start ("" past the last). */
static const char *
started(struct sched *sc, size_t i)
{
	static char url[128];

	pthread_mutex_lock(&sc->mu);
	snprintf(url, sizeof url, "%s", i < sc->nruns ? sc->runs[i].url : "");
	pthread_mutex_unlock(&sc->mu);
	return url;
}

static int
ever_started(struct sched *sc, const char *url)
{
	int yes;

	pthread_mutex_lock(&sc->mu);
	yes = run_of(sc, url) != NULL;
	pthread_mutex_unlock(&sc->mu);
	return yes;
}

#define assert_started(sc, i, want)                                             \
	do {                                                                    \
		const char *got_ = started((sc), (i));                          \
		if (strcmp(got_, (want)) != 0)                                  \
			fail_msg("start #%d was '%s', expected %s; %s", (int)(i) + 1, \
			         got_, (want), seen(sc));                       \
	} while (0)

#define assert_never_started(sc, url)                                           \
	do {                                                                    \
		if (ever_started((sc), (url)))                                  \
			fail_msg("%s started, and must not have; %s", (url), seen(sc)); \
	} while (0)

static void
assert_counts(const struct build_end *b, uint32_t ran, uint32_t failed,
              uint32_t skipped, uint32_t cancelled)
{
	if (b->ran != ran || b->failed != failed || b->skipped != skipped ||
	    b->cancelled != cancelled)
		fail_msg("build %" PRIu64 " ended ran %u failed %u skipped %u cancelled %u "
		         "(error '%s'), expected ran %u failed %u skipped %u cancelled %u",
		         b->build, b->ran, b->failed, b->skipped, b->cancelled, b->error,
		         ran, failed, skipped, cancelled);
}

/* ---- cases --------------------------------------------------------------- */

/* a.txt sorts first and would win a tie; z1 has two steps chained after
 * it (critical path 3 against 1). */
static void
longest_critical_path_starts_first(void **state)
{
	const char *steps[] = {"a.txt", "z1.txt", "z2.txt:z1.txt", "z3.txt:z2.txt"};
	struct sched *sc = sched_new(state, steps, 4, 1);
	uint64_t b = build(sc, NULL, 1, 0, 0);

	wait_starts(sc, 1);
	assert_started(sc, 0, "z1.txt");
	tool_end(sc, "z1.txt", 0);
	wait_starts(sc, 2);
	tool_end(sc, started(sc, 1), 0);
	wait_starts(sc, 3);
	tool_end(sc, started(sc, 2), 0);
	wait_starts(sc, 4);
	tool_end(sc, started(sc, 3), 0);
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 4, 0, 0, 0);
	pthread_mutex_lock(&sc->mu);
	/* a chain runs in its order whatever else runs between */
	assert_true(run_of(sc, "z2.txt")->seq_start > run_of(sc, "z1.txt")->seq_end);
	assert_true(run_of(sc, "z3.txt")->seq_start > run_of(sc, "z2.txt")->seq_end);
	pthread_mutex_unlock(&sc->mu);
	sched_free(sc);
}

/* A low-priority build holds the one slot with the gate g; l2 (critical
 * path 3) and s (2) both wait on g. A build of priority 10 for h arrives,
 * needing s: when g ends, both are ready at once, and s — a prerequisite
 * of the urgent build's target, not a target itself — must start first.
 * shared: s is also the low build's (queued at priority 0 before the
 * urgent build joins it and raises it); else only the urgent build's. */
static void
priority_case(void **state, int shared)
{
	const char *steps[] = {"g.txt", "l2.txt:g.txt", "l3.txt:l2.txt", "l4.txt:l3.txt",
	                       "s.txt:g.txt", "h.txt:s.txt"};
	const char *low_shared[] = {"l2.txt", "s.txt", NULL};
	const char *low_alone[] = {"l2.txt", NULL};
	const char *high[] = {"h.txt", NULL};
	struct sched *sc = sched_new(state, steps, 6, 1);
	uint64_t lo = build(sc, shared ? low_shared : low_alone, 1, 0, 0), hi;

	wait_starts(sc, 1);
	assert_started(sc, 0, "g.txt");
	hi = build(sc, high, 1, 10, 0);
	tool_end(sc, "g.txt", 0);
	wait_starts(sc, 2);
	assert_started(sc, 1, "s.txt");
	tool_end(sc, "s.txt", 0);
	/* then l2 and h, in an order that depends on whether l2 was decided
	 * before s ended (runnable steps take a free slot before ready ones
	 * are decided) */
	wait_starts(sc, 3);
	tool_end(sc, started(sc, 2), 0);
	wait_starts(sc, 4);
	tool_end(sc, started(sc, 3), 0);
	struct build_end eh = wait_build_end(sc, hi), el = wait_build_end(sc, lo);
	assert_int_equal(eh.failed + el.failed, 0);
	assert_int_equal(eh.total, 3);
	sched_free(sc);
}

static void
a_higher_priority_build_goes_first_with_its_prerequisites(void **state)
{
	priority_case(state, 0);
}

static void
joining_a_queued_step_raises_its_priority(void **state)
{
	priority_case(state, 1);
}

/* -j 3: p1 and p2 run; d needs both, x only p1, and d.txt sorts before
 * x.txt (on a tie d is decided first). When p1 ends, x is released and
 * starts; d must not be (it would start before x). When p2 then fails, d
 * is skipped without starting. */
static void
a_step_waits_for_all_prerequisites_and_is_skipped_when_one_fails(void **state)
{
	const char *steps[] = {"p1.txt", "p2.txt", "d.txt:p1.txt,p2.txt", "x.txt:p1.txt"};
	struct sched *sc = sched_new(state, steps, 4, 1);
	uint64_t b = build(sc, NULL, 3, 0, 0);

	wait_starts(sc, 2);
	assert_never_started(sc, "d.txt");
	assert_never_started(sc, "x.txt");
	tool_end(sc, "p1.txt", 0);
	wait_start_of(sc, "x.txt");
	assert_never_started(sc, "d.txt");
	tool_end(sc, "x.txt", 0);
	tool_end(sc, "p2.txt", 1);
	struct build_end e = wait_build_end(sc, b);
	assert_never_started(sc, "d.txt");
	assert_counts(&e, 2, 1, 1, 0);
	assert_int_equal(wait_step_event(sc, "p2.txt"), KILN__STEP_EVENT__RESULT__FAILED);
	assert_int_equal(wait_step_event(sc, "d.txt"), KILN__STEP_EVENT__RESULT__SKIPPED);
	sched_free(sc);
}

/* -j 2: f (its dependent fd after it) and p run. f fails and its failure
 * is published; then p ends, releasing i. Without -k the build stopped at
 * the failure: i is cancelled, never started. With -k it runs; fd is
 * skipped either way. */
static void
keep_going_case(void **state, int keep_going)
{
	const char *steps[] = {"f.txt", "fd.txt:f.txt", "p.txt", "i.txt:p.txt"};
	struct sched *sc = sched_new(state, steps, 4, 1);
	uint64_t b = build(sc, NULL, 2, 0, keep_going);

	wait_start_of(sc, "f.txt");
	wait_start_of(sc, "p.txt");
	tool_end(sc, "f.txt", 2);
	assert_int_equal(wait_step_event(sc, "f.txt"), KILN__STEP_EVENT__RESULT__FAILED);
	tool_end(sc, "p.txt", 0);
	if (keep_going) {
		wait_start_of(sc, "i.txt");
		tool_end(sc, "i.txt", 0);
	}
	struct build_end e = wait_build_end(sc, b);
	assert_never_started(sc, "fd.txt");
	if (keep_going)
		assert_counts(&e, 2, 1, 1, 0);
	else {
		assert_never_started(sc, "i.txt");
		assert_counts(&e, 1, 1, 1, 1);
	}
	sched_free(sc);
}

static void
without_keep_going_nothing_new_starts_after_a_failure(void **state)
{
	keep_going_case(state, 0);
}

static void
with_keep_going_what_does_not_depend_on_the_failure_runs(void **state)
{
	keep_going_case(state, 1);
}

/* -j 2 over eight independent steps, with the default number of workers
 * (deciding in parallel): never more than two fake tools at once, and
 * both slots used. Each tool is held until the test ends it, oldest
 * first, after the next has started. */
static void
never_more_tools_at_once_than_jobs(void **state)
{
	const char *steps[] = {"a.txt", "b.txt", "c.txt", "d.txt",
	                       "e.txt", "f.txt", "g.txt", "h.txt"};
	struct sched *sc = sched_new(state, steps, 8, 0);
	uint64_t b = build(sc, NULL, 2, 0, 0);

	for (size_t i = 0; i < 8; i++) {
		wait_starts(sc, i + 2 > 8 ? 8 : i + 2);
		tool_end(sc, started(sc, i), 0);
	}
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 8, 0, 0, 0);
	pthread_mutex_lock(&sc->mu);
	unsigned max = sc->max_running;
	pthread_mutex_unlock(&sc->mu);
	if (max != 2)
		fail_msg("%u fake tools ran at once at most under -j 2", max);
	sched_free(sc);
}

/* kiln need, through engine_need as the daemon's handler calls it with the
 * run's KILN_STEP_TOKEN: at -j 1, a asks for b (no declared edge) and is
 * answered "pending"; its slot is lent, so b starts while a still runs;
 * a's answer stays pending until b has finished, then gives b's output. */
static void
a_run_needing_a_step_lends_its_slot_until_it_is_done(void **state)
{
	const char *steps[] = {"a.txt", "b.txt"};
	const char *targets[] = {"a.txt", NULL};
	struct sched *sc = sched_new(state, steps, 2, 1);
	uint64_t id = build(sc, targets, 1, 0, 0);
	struct engine_need_answer ans;
	char token[40], err[512];
	int rv;

	wait_starts(sc, 1);
	assert_started(sc, 0, "a.txt");
	pthread_mutex_lock(&sc->mu);
	snprintf(token, sizeof token, "%s", run_of(sc, "a.txt")->token);
	pthread_mutex_unlock(&sc->mu);
	assert_int_equal(strlen(token), 32);
	if ((rv = engine_need(sc->e, token, "b.txt", NULL, &ans, err, sizeof err)) != 0)
		fail_msg("engine_need: %s: %s", kiln_strerror(rv), err);
	assert_true(ans.pending);
	engine_need_answer_free(&ans);
	wait_start_of(sc, "b.txt");
	pthread_mutex_lock(&sc->mu);
	assert_true(run_of(sc, "a.txt")->running);   /* b has a's lent slot */
	pthread_mutex_unlock(&sc->mu);
	assert_kiln(0, engine_need(sc->e, token, "b.txt", NULL, &ans, err, sizeof err));
	assert_true(ans.pending);
	engine_need_answer_free(&ans);
	tool_end(sc, "b.txt", 0);
	/* b is finished once its event is out (published under the engine's
	 * lock): a's next ask takes the free slot back and gets the answer */
	assert_int_equal(wait_step_event(sc, "b.txt"), KILN__STEP_EVENT__RESULT__RAN);
	assert_kiln(0, engine_need(sc->e, token, "b.txt", NULL, &ans, err, sizeof err));
	if (ans.pending || ans.n != 1 || strcmp(ans.paths[0], "build/default/b.txt") != 0)
		fail_msg("after b finished, a's need got pending %d, %zu paths (%s)",
		         ans.pending, ans.n, ans.n ? ans.paths[0] : "");
	engine_need_answer_free(&ans);
	tool_end(sc, "a.txt", 0);
	struct build_end e = wait_build_end(sc, id);
	assert_counts(&e, 2, 0, 0, 0);
	pthread_mutex_lock(&sc->mu);
	unsigned nruns = (unsigned)sc->nruns;
	pthread_mutex_unlock(&sc->mu);
	assert_int_equal(nruns, 2);
	sched_free(sc);
}

/* -j 2: r1 and r2 run (longest paths), q1..q3 wait. Cancelling the build
 * kills both tools (the fake sees the kills), drops the queued steps
 * unstarted, and ends the build as cancelled at once. */
static void
cancel_kills_running_tools_and_drops_queued_steps(void **state)
{
	const char *steps[] = {"r1.txt", "r1x.txt:r1.txt", "r2.txt", "r2x.txt:r2.txt",
	                       "q1.txt", "q2.txt", "q3.txt"};
	const char *targets[] = {"r1.txt", "r2.txt", "q1.txt", "q2.txt", "q3.txt", NULL};
	struct sched *sc = sched_new(state, steps, 7, 1);
	uint64_t b = build(sc, targets, 2, 0, 0);

	wait_starts(sc, 2);
	assert_kiln(0, engine_cancel(sc->e, b));
	/* (a tool whose start the cancel overtook is killed twice: by the
	 * cancel, and by its worker when it sees nobody wants it) */
	pthread_mutex_lock(&sc->mu);
	int k1 = run_of(sc, "r1.txt") && run_of(sc, "r1.txt")->killed;
	int k2 = run_of(sc, "r2.txt") && run_of(sc, "r2.txt")->killed;
	pthread_mutex_unlock(&sc->mu);
	if (!k1 || !k2)
		fail_msg("cancel killed r1 %d, r2 %d; %s", k1, k2, seen(sc));
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 0, 0, 0, 5);
	assert_string_equal(e.error, "cancelled");
	/* the killed tools end as a killed tool does */
	tool_end(sc, "r1.txt", -SIGTERM);
	tool_end(sc, "r2.txt", -SIGTERM);
	/* their slots are free now: nothing queued may take them (a worker
	 * fills a free slot before it finishes the step that freed it) */
	wait_engine_idle(sc);
	assert_kiln(KILN_ENOTFOUND, engine_cancel(sc->e, b));
	pthread_mutex_lock(&sc->mu);
	size_t nruns = sc->nruns;
	pthread_mutex_unlock(&sc->mu);
	if (nruns != 2)
		fail_msg("%zu tools started, expected only r1 and r2; %s", nruns, seen(sc));
	sched_free(sc);
}

/* ---- edits while a build runs (edits.c) -------------------------------- */

/* How many tools of url started. */
static size_t
starts_of(struct sched *sc, const char *url)
{
	size_t n = 0;

	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nruns; i++)
		n += strcmp(sc->runs[i].url, url) == 0;
	pthread_mutex_unlock(&sc->mu);
	return n;
}

/* Wait until url's k-th run (from 1) started, or was killed (killed). */
static void
wait_run(struct sched *sc, const char *url, size_t k, int killed)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_S;
	pthread_mutex_lock(&sc->mu);
	for (;;) {
		size_t seen_k = 0;
		for (size_t i = 0; i < sc->nruns; i++)
			if (strcmp(sc->runs[i].url, url) == 0 && ++seen_k == k &&
			    (!killed || sc->runs[i].killed)) {
				pthread_mutex_unlock(&sc->mu);
				return;
			}
		if (pthread_cond_timedwait(&sc->cv, &sc->mu, &dl) == ETIMEDOUT) {
			pthread_mutex_unlock(&sc->mu);
			fail_msg("waited %d s for run %zu of %s%s; %s", WAIT_S, k, url,
			         killed ? " to be killed" : "", seen(sc));
		}
	}
}

static void
edit_input(struct sched *sc, const char *text)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof path, "%s/src/in.txt", sc->root);
	tu_write_file(path, text, strlen(text));
	engine_file_changed(sc->e, "src/in.txt");
}

static void
an_edit_cancels_a_running_step_that_reads_it_and_runs_it_again(void **state)
{
	const char *steps[] = {"a.txt"};
	const char *targets[] = {"a.txt", NULL};
	struct sched *sc = sched_new(state, steps, 1, 1);
	uint64_t b = build(sc, targets, 1, 0, 0);

	wait_run(sc, "a.txt", 1, 0);
	/* a file it does not read: nothing happens to it */
	engine_file_changed(sc->e, "src/other.txt");
	edit_input(sc, "edited\n");
	wait_run(sc, "a.txt", 1, 1);
	tool_end(sc, "a.txt", -SIGTERM);   /* as a killed tool ends */
	wait_run(sc, "a.txt", 2, 0);
	tool_end(sc, "a.txt", 0);
	struct build_end e = wait_build_end(sc, b);
	/* the cancelled run is neither a failure nor a result */
	assert_counts(&e, 1, 0, 0, 0);
	assert_int_equal(starts_of(sc, "a.txt"), 2);
	assert_int_equal(wait_step_event(sc, "a.txt"), KILN__STEP_EVENT__RESULT__RAN);
	sched_free(sc);
}

static void
a_step_the_build_finished_is_decided_again_when_its_input_is_edited(void **state)
{
	/* b.txt waits on a.txt, c.txt on b.txt: a.txt and b.txt are done and
	 * c.txt runs when the input both read changes */
	const char *steps[] = {"a.txt", "b.txt:a.txt", "c.txt:b.txt"};
	const char *targets[] = {"c.txt", NULL};
	struct sched *sc = sched_new(state, steps, 3, 1);
	/* the edit is still on its way to the engine when c.txt ends (as
	 * under load): the build waits for it */
	sc->cfg.hold_edits_ms = 200;
	sched_restart(sc);
	uint64_t b = build(sc, targets, 1, 0, 0);

	wait_run(sc, "a.txt", 1, 0);
	tool_end(sc, "a.txt", 0);
	wait_run(sc, "b.txt", 1, 0);
	tool_end(sc, "b.txt", 0);
	wait_run(sc, "c.txt", 1, 0);
	edit_input(sc, "edited\n");
	/* c.txt does not read it (its input is b.txt's output): it runs on */
	tool_end(sc, "c.txt", 0);
	/* the build does not end: a.txt, then what follows it, again */
	wait_run(sc, "a.txt", 2, 0);
	pthread_mutex_lock(&sc->mu);
	int ended = end_of(sc, b) != NULL;
	pthread_mutex_unlock(&sc->mu);
	if (ended)
		fail_msg("the build ended before deciding a.txt again; %s", seen(sc));
	tool_end(sc, "a.txt", 0);
	/* the fake writes the same bytes (its URL): b.txt is up to date
	 * again and so is c.txt; the build ends with every step counted once */
	struct build_end e = wait_build_end(sc, b);
	assert_int_equal(e.total, 3);
	assert_int_equal(e.ran + e.reused, 3);
	assert_int_equal(e.failed + e.skipped + e.cancelled, 0);
	assert_int_equal(starts_of(sc, "a.txt"), 2);
	assert_int_equal(starts_of(sc, "b.txt"), 1);
	sched_free(sc);
}

/* ---- estimates: the critical path in time (estimate.c) ------------------ */

/* End url's running tool with success after a run of wall_ns. */
static void
tool_end_took(struct sched *sc, const char *url, uint64_t wall_ns)
{
	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nruns; i++)
		if (strcmp(sc->runs[i].url, url) == 0 && sc->runs[i].running)
			sc->runs[i].wall_ns = wall_ns;
	pthread_mutex_unlock(&sc->mu);
	tool_end(sc, url, 0);
}

/* The estimate of url's last StepEvent (its first is waited for). */
static uint64_t
last_estimate(struct sched *sc, const char *url)
{
	uint64_t ns = 0;

	wait_step_event(sc, url);
	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nsteps; i++)
		if (strcmp(sc->steps[i].url, url) == 0)
			ns = sc->steps[i].estimate_ns;
	pthread_mutex_unlock(&sc->mu);
	return ns;
}

#define SEC 1000000000ULL

/* -j 1, nothing known yet: l1 (tool long) sorts first and runs first,
 * taking 10 s. x (tool long too, nothing depends on it) sorts after the
 * six short steps of tool t; with its tool's cost known it must start
 * next, not be left to run alone at the end. */
static void
a_long_step_starts_before_short_ones_once_its_tools_cost_is_known(void **state)
{
	const char *steps[] = {"long=l1.txt", "s1.txt", "s2.txt", "s3.txt", "s4.txt",
	                       "s5.txt", "s6.txt", "long=x.txt"};
	struct sched *sc = sched_new(state, steps, 8, 1);
	uint64_t b = build(sc, NULL, 1, 0, 0);

	wait_starts(sc, 1);
	assert_started(sc, 0, "l1.txt");
	tool_end_took(sc, "l1.txt", 10 * SEC);
	wait_starts(sc, 2);
	assert_started(sc, 1, "x.txt");
	tool_end_took(sc, "x.txt", 10 * SEC);
	for (size_t i = 2; i < 8; i++) {
		wait_starts(sc, i + 1);
		tool_end(sc, started(sc, i), 0);
	}
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 8, 0, 0, 0);
	/* what it was expected to take when it started: l1's 10 s for the
	 * same input size */
	if (last_estimate(sc, "x.txt") != 10 * SEC)
		fail_msg("x.txt started with an estimate of %" PRIu64 " ns, expected 10 s",
		         last_estimate(sc, "x.txt"));
	sched_free(sc);
}

/* A build of a (1 ms) then b (10 s), same tool and input size; the
 * input is edited and both run again: b, its own last run the longer,
 * starts first though a sorts first. With restart, the second build is
 * a new engine's (what a restarted daemon reads from .kiln/durations). */
static void
recorded_duration_case(void **state, int restart)
{
	const char *steps[] = {"a.txt", "b.txt"};
	struct sched *sc = sched_new(state, steps, 2, 1);
	uint64_t b = build(sc, NULL, 1, 0, 0);

	wait_starts(sc, 1);
	assert_started(sc, 0, "a.txt");
	tool_end_took(sc, "a.txt", 1000000);
	wait_starts(sc, 2);
	tool_end_took(sc, "b.txt", 10 * SEC);
	wait_build_end(sc, b);
	if (restart)
		sched_restart(sc);
	edit_input(sc, "edited\n");
	b = build(sc, NULL, 1, 0, 0);
	wait_starts(sc, 3);
	assert_started(sc, 2, "b.txt");
	tool_end(sc, "b.txt", 0);
	wait_starts(sc, 4);
	tool_end(sc, "a.txt", 0);
	struct build_end e = wait_build_end(sc, b);
	/* (both ran: the fake writes the same bytes, which a build may
	 * count as reused) */
	assert_int_equal(e.ran + e.reused, 2);
	assert_int_equal(e.failed + e.skipped + e.cancelled, 0);
	if (last_estimate(sc, "b.txt") != 10 * SEC || last_estimate(sc, "a.txt") != 1000000)
		fail_msg("the second build's estimates: a %" PRIu64 " ns, b %" PRIu64
		         " ns; expected their first runs' 1 ms and 10 s",
		         last_estimate(sc, "a.txt"), last_estimate(sc, "b.txt"));
	sched_free(sc);
}

static void
a_recorded_duration_orders_the_next_build(void **state)
{
	recorded_duration_case(state, 0);
}

static void
a_new_engine_orders_its_first_build_by_the_history_file(void **state)
{
	recorded_duration_case(state, 1);
}

/* .kiln/durations with b's 10 s on line 2 and a damaged line 3: the
 * engine starts, says which line it ignored, and uses line 2 (b first). */
static void
a_damaged_history_line_is_ignored_with_a_log_line(void **state)
{
	const char *steps[] = {"a.txt", "b.txt"};
	const char *hist = "# kiln durations 1\n"
	                   "10000000000 3 default\tb.txt\n"
	                   "12x garbage\n";
	struct sched *sc = sched_new(state, steps, 2, 1);
	char path[PATH_MAX + 32];
	uint64_t b;

	snprintf(path, sizeof path, "%s/.kiln/durations", sc->root);
	tu_write_file(path, hist, strlen(hist));
	sched_restart(sc);
	b = build(sc, NULL, 1, 0, 0);
	wait_starts(sc, 1);
	assert_started(sc, 0, "b.txt");
	tool_end(sc, "b.txt", 0);
	wait_starts(sc, 2);
	tool_end(sc, "a.txt", 0);
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 2, 0, 0, 0);
	pthread_mutex_lock(&sc->mu);
	int said = strstr(sc->logged, "/.kiln/durations:3: damaged line ignored") != NULL;
	pthread_mutex_unlock(&sc->mu);
	if (!said)
		fail_msg("the engine's log did not name line 3: '%s'", sc->logged);
	sched_free(sc);
}

/* A file that is not a history at all: ignored, said, not fatal. */
static void
a_history_file_of_another_format_is_ignored_with_a_log_line(void **state)
{
	const char *steps[] = {"a.txt"};
	struct sched *sc = sched_new(state, steps, 1, 1);
	char path[PATH_MAX + 32];
	uint64_t b;

	snprintf(path, sizeof path, "%s/.kiln/durations", sc->root);
	tu_write_file(path, "\x7f" "ELF\1\1\n", 7);
	sched_restart(sc);
	b = build(sc, NULL, 1, 0, 0);
	wait_starts(sc, 1);
	tool_end(sc, "a.txt", 0);
	struct build_end e = wait_build_end(sc, b);
	assert_counts(&e, 1, 0, 0, 0);
	pthread_mutex_lock(&sc->mu);
	int said = strstr(sc->logged, "/.kiln/durations:1: not a kiln durations file") != NULL;
	pthread_mutex_unlock(&sc->mu);
	if (!said)
		fail_msg("the engine's log did not say the file was ignored: '%s'", sc->logged);
	sched_free(sc);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(longest_critical_path_starts_first),
		T(a_higher_priority_build_goes_first_with_its_prerequisites),
		T(joining_a_queued_step_raises_its_priority),
		T(a_step_waits_for_all_prerequisites_and_is_skipped_when_one_fails),
		T(without_keep_going_nothing_new_starts_after_a_failure),
		T(with_keep_going_what_does_not_depend_on_the_failure_runs),
		T(never_more_tools_at_once_than_jobs),
		T(a_run_needing_a_step_lends_its_slot_until_it_is_done),
		T(cancel_kills_running_tools_and_drops_queued_steps),
		T(an_edit_cancels_a_running_step_that_reads_it_and_runs_it_again),
		T(a_step_the_build_finished_is_decided_again_when_its_input_is_edited),
		T(a_long_step_starts_before_short_ones_once_its_tools_cost_is_known),
		T(a_recorded_duration_orders_the_next_build),
		T(a_new_engine_orders_its_first_build_by_the_history_file),
		T(a_damaged_history_line_is_ignored_with_a_log_line),
		T(a_history_file_of_another_format_is_ignored_with_a_log_line),
	};
	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
