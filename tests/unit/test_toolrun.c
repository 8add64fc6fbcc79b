/* test_toolrun — running build tools: exit codes and signals, the log,
 * the cwd and environment a tool gets, what it must not inherit (fds,
 * blocked or ignored signals), many children at once, killing process
 * groups, dying with the process (or thread) that started them, and
 * finding programs. Done callbacks run on the reaper thread;
 * they only record, and the main thread asserts. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_error.h"
#include "testutil.h"
#include "tool_spawn.h"

/* What the done callbacks of one test saw. */
struct seen {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ncalls;
	struct spawn_result last;
};

/* The arg of a done callback: which child, and where to count. */
struct slot {
	struct seen *seen;
	unsigned ncalls;
	struct spawn_result r;
};

static const char *const no_env[] = {NULL};

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until cond(arg) holds, looking every 5 ms, for at most ms
 * milliseconds of the monotonic clock; returns whether it held. For what
 * gives no event to wait on (a log line, a process's comm). */
static int
wait_until(int (*cond)(void *), void *arg, int64_t ms)
{
	int64_t end = mono_ms() + ms;

	while (!cond(arg)) {
		if (mono_ms() >= end)
			return cond(arg);
		tu_sleep_ms(5);
	}
	return 1;
}

static void
on_done(void *arg, const struct spawn_result *r)
{
	struct slot *sl = arg;

	pthread_mutex_lock(&sl->seen->mu);
	sl->ncalls++;
	sl->r = *r;
	sl->seen->ncalls++;
	sl->seen->last = *r;
	pthread_cond_broadcast(&sl->seen->cv);
	pthread_mutex_unlock(&sl->seen->mu);
}

static void
seen_init(struct seen *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
}

/* Wait until n done calls were seen in all, or ms pass; returns the count. */
static unsigned
seen_wait(struct seen *s, unsigned n, int64_t ms)
{
	int64_t end = mono_ms() + ms;
	unsigned got;

	pthread_mutex_lock(&s->mu);
	while (s->ncalls < n && mono_ms() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	got = s->ncalls;
	pthread_mutex_unlock(&s->mu);
	return got;
}

/* A log file in the case dir, opened for appending. */
static int
open_log(void **state, const char *name)
{
	int fd = open(tu_path(state, "%s", name),
	              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	return fd;
}

/* The whole log file name, NUL-terminated, in a static buffer. */
static const char *
read_log(void **state, const char *name)
{
	static char buf[65536];
	int fd = open(tu_path(state, "%s", name), O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return buf;
}

/* Run argv (program path argv[0]) to its end with env and cwd, its output
 * into log file "log"; returns what done saw. */
static struct spawn_result
run_tool(void **state, const char *const *argv, const char *const *envp,
         const char *cwd)
{
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	struct spawn_req rq = {argv[0], argv, envp, cwd, open_log(state, "log"), 0};
	pid_t pid = 0;

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	assert_kiln(0, spawner_start(sp, &rq, on_done, &sl, &pid));
	assert_true(pid > 0);
	if (seen_wait(&seen, 1, 10000) != 1)
		fail_msg("%s: done not called within 10 s", argv[0]);
	spawner_free(sp);
	close(rq.log_fd);
	assert_int_equal(sl.ncalls, 1);
	return sl.r;
}

static struct spawn_result
run_sh(void **state, const char *script)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};

	return run_tool(state, argv, no_env, NULL);
}

static void
assert_signalled(const struct spawn_result *r, int sig, const char *what)
{
	if (r->exited || r->status != sig)
		fail_msg("%s: expected death by signal %d, got %s %d", what, sig,
		         r->exited ? "exit" : "signal", r->status);
}

/* ---- results ------------------------------------------------------------ */

static void
exit_codes_are_reported(void **state)
{
	static const struct {
		const char *script;
		int code;
	} cases[] = {
		{"exit 0", 0}, {"exit 1", 1}, {"exit 3", 3}, {"exit 255", 255},
		{"true", 0}, {"false", 1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct spawn_result r = run_sh(state, cases[i].script);

		if (!r.exited || r.status != cases[i].code)
			fail_msg("'%s': expected exit %d, got %s %d", cases[i].script,
			         cases[i].code, r.exited ? "exit" : "signal", r.status);
		assert_true(r.wall_ns > 0);
	}
}

static void
death_by_signal_is_reported(void **state)
{
	struct spawn_result r = run_sh(state, "kill -9 $$");

	assert_signalled(&r, SIGKILL, "kill -9 $$");
}

static void
cpu_time_and_memory_are_accounted(void **state)
{
	struct spawn_result r =
		run_sh(state, "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done");

	assert_true(r.exited && r.status == 0);
	if (r.cpu_ns <= 0 || r.maxrss_kb <= 0 || r.wall_ns < r.cpu_ns / 2)
		fail_msg("cpu_ns %lld, maxrss_kb %lld, wall_ns %lld",
		         (long long)r.cpu_ns, (long long)r.maxrss_kb,
		         (long long)r.wall_ns);
}

/* ---- what a tool gets --------------------------------------------------- */

static void
stdout_and_stderr_both_go_to_the_log(void **state)
{
	struct spawn_result r =
		run_sh(state, "echo out; echo err >&2; echo out2; read x || echo eof");

	assert_true(r.exited && r.status == 0);
	assert_string_equal(read_log(state, "log"), "out\nerr\nout2\neof\n");
}

static void
the_tool_runs_in_its_cwd(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "pwd -P", NULL};
	char want[4200];
	struct spawn_result r;

	assert_int_equal(mkdir(tu_path(state, "sub"), 0755), 0);
	assert_non_null(realpath(tu_path(state, "sub"), want));
	strcat(want, "\n");
	r = run_tool(state, argv, no_env, tu_path(state, "sub"));
	assert_true(r.exited && r.status == 0);
	assert_string_equal(read_log(state, "log"), want);
}

/* One spawner keeps each log fd number's and cwd's settings for its
 * life: a later tool with the same fd number but another cwd must run in
 * its own cwd, and one whose fd number now holds another file must write
 * to that file. */
static void
kept_spawn_settings_follow_each_cwd_and_log(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "pwd -P", NULL};
	const char *dirs[3] = {"a", "b", "a"};
	char want[3][4200];
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	int fd = open_log(state, "log"), fd2;

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	for (int i = 0; i < 3; i++) {
		struct spawn_req rq = {argv[0], argv, no_env, tu_path(state, "%s", dirs[i]), fd, 0};
		if (i < 2)
			assert_int_equal(mkdir(tu_path(state, "%s", dirs[i]), 0755), 0);
		assert_non_null(realpath(tu_path(state, "%s", dirs[i]), want[i]));
		strcat(want[i], "\n");
		if (i == 2) {   /* the same number, another file */
			close(fd);
			fd2 = open_log(state, "log2");
			assert_int_equal(fd2, fd);
		}
		assert_kiln(0, spawner_start(sp, &rq, on_done, &sl, NULL));
		if (seen_wait(&seen, (unsigned)i + 1, 10000) != (unsigned)i + 1)
			fail_msg("tool %d: done not called within 10 s", i);
		assert_true(seen.last.exited && seen.last.status == 0);
	}
	spawner_free(sp);
	close(fd);
	{
		char both[8500];
		snprintf(both, sizeof both, "%s%s", want[0], want[1]);
		assert_string_equal(read_log(state, "log"), both);
	}
	assert_string_equal(read_log(state, "log2"), want[2]);
}

static void
the_tool_gets_exactly_its_environment(void **state)
{
	const char *argv[] = {"/usr/bin/env", NULL};
	const char *env[] = {"A=1", "B=two words", NULL};
	struct spawn_result r;

	setenv("KILN_TEST_LEAK", "parent", 1);
	r = run_tool(state, argv, env, NULL);
	unsetenv("KILN_TEST_LEAK");
	assert_true(r.exited && r.status == 0);
	assert_string_equal(read_log(state, "log"), "A=1\nB=two words\n");
}

static void
no_descriptor_of_the_parent_leaks_into_the_tool(void **state)
{
	const char *argv[] = {"/bin/ls", "/proc/self/fd", NULL};
	struct spawn_result r;
	char *line, *save = NULL, buf[4096];
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int leak = fcntl(null, F_DUPFD, 40); /* no close-on-exec */

	close(null);
	assert_true(leak >= 40);
	r = run_tool(state, argv, no_env, NULL);
	close(leak);
	assert_true(r.exited && r.status == 0);
	snprintf(buf, sizeof(buf), "%s", read_log(state, "log"));
	/* 0..2, and the folder ls itself reads as 3. */
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save))
		if (atoi(line) > 3)
			fail_msg("fd %s is open in the tool (leaked fd was %d); "
			         "ls said:\n%s", line, leak, read_log(state, "log"));
}

static void
signals_blocked_in_the_parent_are_unblocked_in_the_tool(void **state)
{
	sigset_t term, old;
	struct spawn_result r;

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, &old);
	r = run_sh(state, "kill -TERM $$; exit 7");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	assert_signalled(&r, SIGTERM, "blocked SIGTERM");
}

/* The policy (field 41 of /proc/<pid>/stat) a tool started by a
 * SCHED_BATCH thread runs under, from a spawner made with sched_normal. */
static int
tool_policy_from_batch_thread(void **state, int sched_normal)
{
	const char *argv[] = {"/bin/sh", "-c", "cut -d' ' -f41 /proc/$$/stat", NULL};
	struct sched_param prio0 = {0};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	struct spawn_req rq = {argv[0], argv, no_env, NULL, open_log(state, "log"), 0};
	int policy, rv;

	assert_int_equal(0, pthread_setschedparam(pthread_self(), SCHED_BATCH, &prio0));
	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, sched_normal));
	rv = spawner_start(sp, &rq, on_done, &sl, NULL);
	if (rv == 0 && seen_wait(&seen, 1, 10000) != 1)
		fail_msg("done not called within 10 s");
	spawner_free(sp);
	close(rq.log_fd);
	assert_int_equal(0, pthread_setschedparam(pthread_self(), SCHED_OTHER, &prio0));
	assert_kiln(0, rv);
	assert_true(sl.r.exited && sl.r.status == 0);
	if (sscanf(read_log(state, "log"), "%d", &policy) != 1)
		fail_msg("no policy in the log: '%s'", read_log(state, "log"));
	unlink(tu_path(state, "log"));
	return policy;
}

static void
tools_start_under_the_normal_policy_when_asked(void **state)
{
	assert_int_equal(SCHED_OTHER, tool_policy_from_batch_thread(state, 1));
	/* and inherit the starting thread's otherwise */
	assert_int_equal(SCHED_BATCH, tool_policy_from_batch_thread(state, 0));
}

static void
signals_ignored_in_the_parent_are_default_in_the_tool(void **state)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	struct spawn_result r;

	sigaction(SIGPIPE, &ign, &old);
	r = run_sh(state, "kill -PIPE $$; exit 7");
	sigaction(SIGPIPE, &old, NULL);
	assert_signalled(&r, SIGPIPE, "ignored SIGPIPE");
	/* any other signal ignored when the spawner is made (nohup's SIGHUP) */
	sigaction(SIGHUP, &ign, &old);
	r = run_sh(state, "kill -HUP $$; exit 7");
	sigaction(SIGHUP, &old, NULL);
	assert_signalled(&r, SIGHUP, "ignored SIGHUP");
}

/* ---- many, killed, freed ------------------------------------------------ */

/* wait_until: the spawner at arg runs no child. */
static int
none_running(void *sp)
{
	return spawner_running(sp) == 0;
}

static void
fifty_children_at_once_each_done_exactly_once(void **state)
{
	enum { N = 50 };
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl[N];
	char script[N][64];
	int log_fd = open_log(state, "log");

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	for (int i = 0; i < N; i++) {
		const char *argv[] = {"/bin/sh", "-c", script[i], NULL};
		struct spawn_req rq = {"/bin/sh", argv, no_env, NULL, log_fd, 0};

		snprintf(script[i], sizeof(script[i]), "sleep 0.%d; exit %d",
		         i % 3, i);
		sl[i] = (struct slot){.seen = &seen};
		assert_kiln(0, spawner_start(sp, &rq, on_done, &sl[i], NULL));
	}
	if (seen_wait(&seen, N, 20000) != N)
		fail_msg("%u of %d children reported in 20 s", seen.ncalls, N);
	if (!wait_until(none_running, sp, 5000))
		fail_msg("%u children still counted running 5 s after the last "
		         "was reported", spawner_running(sp));
	/* Kept on purpose: no event marks "no second done call is coming",
	 * so give a wrong, late one 100 ms to show before free stops the
	 * reaper. */
	tu_sleep_ms(100);
	spawner_free(sp);
	close(log_fd);
	assert_int_equal(seen.ncalls, N);
	for (int i = 0; i < N; i++) {
		if (sl[i].ncalls != 1)
			fail_msg("child %d: done called %u times", i, sl[i].ncalls);
		if (!sl[i].r.exited || sl[i].r.status != i)
			fail_msg("child %d: got %s %d", i,
			         sl[i].r.exited ? "exit" : "signal", sl[i].r.status);
	}
}

/* Two threads each start short tools one after another while the reaper
 * reaps the other's: a tool being spawned holds a copy of the descriptor
 * table, so a reaped child's pidfd outlives its close for a moment. Every
 * child must be reported once, with its own exit code (under ASan a stale
 * reference to a freed child is an error). */
struct starter {
	struct kilnd_spawner *sp;
	int log_fd, base, bad;
};

static void *
starter_main(void *arg)
{
	struct starter *st = arg;

	for (int i = 0; i < 150 && !st->bad; i++) {
		char script[32];
		const char *argv[] = {"/bin/sh", "-c", script, NULL};
		struct spawn_req rq = {"/bin/sh", argv, no_env, NULL, st->log_fd, 0};
		struct seen seen;
		struct slot sl = {.seen = &seen};
		int code = (st->base + i) % 100;

		snprintf(script, sizeof script, "exit %d", code);
		seen_init(&seen);
		if (spawner_start(st->sp, &rq, on_done, &sl, NULL) != 0 ||
		    seen_wait(&seen, 1, 10000) != 1)
			st->bad = 1;
		/* the reaper may still be inside on_done's wake-up */
		pthread_mutex_lock(&seen.mu);
		if (sl.ncalls != 1 || !sl.r.exited || sl.r.status != code)
			st->bad = 2;
		pthread_mutex_unlock(&seen.mu);
	}
	return NULL;
}

static void
spawning_beside_reaping_reports_each_child_once(void **state)
{
	struct kilnd_spawner *sp;
	struct starter st[2];
	pthread_t t[2];
	int log_fd = open_log(state, "log");

	assert_kiln(0, spawner_new(&sp, 0));
	for (int k = 0; k < 2; k++) {
		st[k] = (struct starter){sp, log_fd, 37 * k, 0};
		assert_int_equal(0, pthread_create(&t[k], NULL, starter_main, &st[k]));
	}
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	spawner_free(sp);
	close(log_fd);
	for (int k = 0; k < 2; k++)
		if (st[k].bad)
			fail_msg("starter %d: %s", k, st[k].bad == 1
			         ? "a child was not started or not reported in 10 s"
			         : "a child was reported more than once or with another's status");
}

/* Whether pid is gone or a zombie (its parent may be slow to reap). */
static int
pid_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	return p == NULL || ((p = strrchr(buf, ')')) != NULL && p[2] == 'Z');
}

/* Wait up to ms for pid to end (exit, or be a zombie): on its pidfd,
 * which turns readable when it exits; by looking every 5 ms where there is
 * no pidfd. Returns whether it ended. */
static int
wait_pid_gone(pid_t pid, int ms)
{
	int64_t end = mono_ms() + ms;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd pfd = {fd, POLLIN, 0};
	int rv;

	if (fd < 0 && errno == ESRCH)
		return 1;
	if (fd < 0) {
		while (!pid_gone(pid) && mono_ms() < end)
			tu_sleep_ms(5);
		return pid_gone(pid);
	}
	do
		rv = poll(&pfd, 1, (int)(end - mono_ms() > 0 ? end - mono_ms() : 0));
	while (rv < 0 && errno == EINTR);
	close(fd);
	return rv == 1;
}

/* Whether pid runs sleep now. */
static int
is_sleep(pid_t pid)
{
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(comm, sizeof(comm), f) == NULL)
		comm[0] = '\0';
	fclose(f);
	return strcmp(comm, "sleep\n") == 0;
}

/* wait_until: the log of the case at arg holds a line. */
static int
log_has_line(void *state)
{
	return strchr(read_log(state, "log"), '\n') != NULL;
}

/* wait_until: the log's first line is not a pid, or that process runs
 * sleep (it is no longer a shell between fork and exec). */
static int
log_pid_runs_sleep(void *state)
{
	pid_t bg = atoi(read_log(state, "log"));

	return bg <= 0 || is_sleep(bg);
}

/* Start script; once its log holds a line (and, when that is a pid, once
 * that process runs sleep), kill it with grace_ms and return the result
 * and how long the kill took. */
static struct spawn_result
kill_tool(void **state, const char *script, unsigned grace_ms, int64_t *took_ms)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	struct spawn_req rq = {"/bin/sh", argv, no_env, NULL, open_log(state, "log"), 0};
	int64_t t0;
	pid_t pid;

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	assert_kiln(0, spawner_start(sp, &rq, on_done, &sl, &pid));
	if (!wait_until(log_has_line, state, 10000))
		fail_msg("'%s' wrote no line in 10 s", script);
	/* A background pid first: kill once it is sleep, not a shell still
	 * between fork and exec with the parent's trap. */
	if (!wait_until(log_pid_runs_sleep, state, 10000))
		fail_msg("'%s': process %s does not run sleep after 10 s", script,
		         read_log(state, "log"));
	assert_int_equal(spawner_running(sp), 1);
	t0 = mono_ms();
	assert_kiln(0, spawner_kill(sp, pid, grace_ms));
	if (seen_wait(&seen, 1, 10000) != 1)
		fail_msg("'%s' not done 10 s after the kill", script);
	*took_ms = mono_ms() - t0;
	assert_kiln(KILN_ENOTFOUND, spawner_kill(sp, pid, grace_ms));
	spawner_free(sp);
	close(rq.log_fd);
	assert_int_equal(sl.ncalls, 1);
	return sl.r;
}

static void
kill_ends_the_whole_process_group_with_sigterm(void **state)
{
	int64_t took;
	struct spawn_result r =
		kill_tool(state, "sleep 100 & echo $!; sleep 100", 5000, &took);
	pid_t bg = atoi(read_log(state, "log"));

	assert_signalled(&r, SIGTERM, "killed sh");
	if (took > 2000)
		fail_msg("the kill took %lld ms", (long long)took);
	assert_true(bg > 0);
	if (!wait_pid_gone(bg, 2000))
		fail_msg("the background sleep %d survived its group", (int)bg);
}

/* The tool survives SIGTERM and waits for its child: only a SIGTERM to the
 * whole group lets it finish before the grace ends. */
static void
sigterm_reaches_the_tools_children(void **state)
{
	int64_t took;
	struct spawn_result r = kill_tool(
		state, "trap 'echo term' TERM; sleep 100 & echo $!; wait; wait; echo after",
		5000, &took);

	if (!r.exited || r.status != 0 || took > 2000)
		fail_msg("expected exit 0 soon after the kill, got %s %d after "
		         "%lld ms; log:\n%s", r.exited ? "exit" : "signal",
		         r.status, (long long)took, read_log(state, "log"));
	if (strstr(read_log(state, "log"), "\nterm\nafter\n") == NULL)
		fail_msg("log:\n%s", read_log(state, "log"));
}

static void
a_tool_ignoring_sigterm_gets_sigkill_after_the_grace(void **state)
{
	int64_t took;
	struct spawn_result r = kill_tool(
		state, "trap '' TERM; echo up; while :; do sleep 0.05; done", 300,
		&took);

	assert_signalled(&r, SIGKILL, "sh ignoring TERM");
	if (took < 250 || took > 3000)
		fail_msg("SIGKILL came %lld ms after the kill (grace 300)",
		         (long long)took);
}

static void
what_a_tool_leaves_running_is_killed_when_it_exits(void **state)
{
	pid_t bg;
	struct spawn_result r = run_sh(state, "sleep 100 & echo $!; exit 0");

	assert_true(r.exited && r.status == 0);
	bg = atoi(read_log(state, "log"));
	assert_true(bg > 0);
	if (!wait_pid_gone(bg, 2000))
		fail_msg("the background sleep %d outlived the tool", (int)bg);
}

static void
free_with_running_children_kills_them_and_returns_promptly(void **state)
{
	enum { N = 5 };
	const char *argv[] = {"/bin/sleep", "100", NULL};
	struct spawn_req rq = {"/bin/sleep", argv, no_env, NULL, open_log(state, "log"), 0};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl[N];
	int64_t t0, took;

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	for (int i = 0; i < N; i++) {
		sl[i] = (struct slot){.seen = &seen};
		assert_kiln(0, spawner_start(sp, &rq, on_done, &sl[i], NULL));
	}
	assert_int_equal(spawner_running(sp), N);
	t0 = mono_ms();
	spawner_free(sp);
	took = mono_ms() - t0;
	close(rq.log_fd);
	if (took > 2000)
		fail_msg("spawner_free took %lld ms", (long long)took);
	for (int i = 0; i < N; i++) {
		assert_int_equal(sl[i].ncalls, 1);
		assert_signalled(&sl[i].r, SIGKILL, "sleep at free");
	}
	spawner_free(NULL);
}

/* With no descriptor free, pidfd_open fails (EMFILE) while posix_spawn still
 * works: such children are looked at by timer, and killing them works. */
static void
children_without_a_pidfd_are_reaped_and_killed_too(void **state)
{
	const char *exit5[] = {"/bin/sh", "-c", "exit 5", NULL};
	const char *sleep100[] = {"/bin/sleep", "100", NULL};
	struct spawn_req rq5 = {"/bin/sh", exit5, no_env, NULL, open_log(state, "log"), 0};
	struct spawn_req rqs = {"/bin/sleep", sleep100, no_env, NULL, rq5.log_fd, 0};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl[3];
	struct rlimit old, tight;
	pid_t pid;
	int lowest, rv[3];

	seen_init(&seen);
	for (int i = 0; i < 3; i++)
		sl[i] = (struct slot){.seen = &seen};
	assert_kiln(0, spawner_new(&sp, 0));
	assert_true((lowest = dup(0)) >= 0);
	close(lowest);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	tight = old;
	tight.rlim_cur = (rlim_t)lowest;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
	rv[0] = spawner_start(sp, &rq5, on_done, &sl[0], NULL);
	rv[1] = spawner_start(sp, &rq5, on_done, &sl[1], NULL);
	rv[2] = spawner_start(sp, &rqs, on_done, &sl[2], &pid);
	setrlimit(RLIMIT_NOFILE, &old);
	for (int i = 0; i < 3; i++)
		assert_kiln(0, rv[i]);
	if (seen_wait(&seen, 2, 10000) != 2)
		fail_msg("%u of 2 exited children reported", seen.ncalls);
	assert_kiln(0, spawner_kill(sp, pid, 1000));
	if (seen_wait(&seen, 3, 10000) != 3)
		fail_msg("the killed sleep was not reported");
	spawner_free(sp);
	close(rq5.log_fd);
	for (int i = 0; i < 2; i++)
		assert_true(sl[i].ncalls == 1 && sl[i].r.exited && sl[i].r.status == 5);
	assert_int_equal(sl[2].ncalls, 1);
	assert_signalled(&sl[2].r, SIGTERM, "sleep without a pidfd");
}

static void
start_errors_call_no_done(void **state)
{
	static const struct {
		const char *path;
		int err;
	} cases[] = {
		{"nope/missing", KILN_ENOTFOUND},
		{"data.txt", KILN_EACCES},
		/* these fail in the child's exec, after every check before */
		{"noformat", KILN_EACCES},
		{"nointerp", KILN_ENOTFOUND},
	};
	enum { N = sizeof(cases) / sizeof(cases[0]) };
	/* valgrind makes the clone a fork that shares no memory, and dies
	 * itself when the child's exec fails: only the cases decided before
	 * the clone can be asked there (make valgrind sets KILN_VALGRIND) */
	const char *vg = getenv("KILN_VALGRIND");
#ifdef __SANITIZE_THREAD__
	/* make tsan: the child is a fork too (tool_spawn.c spawn_one) */
	const size_t n = 2;
	(void)vg;
#else
	const size_t n = vg != NULL && strcmp(vg, "1") == 0 ? 2 : N;
#endif
	const char *sh[] = {"/bin/sh", "-c", "exit 0", NULL};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	int rv[N + 1], log_fd = open_log(state, "log");
	struct spawn_req nocwd = {"/bin/sh", sh, no_env, tu_path(state, "nx"), log_fd, 0};

	seen_init(&seen);
	tu_write_file(tu_path(state, "data.txt"), "x\n", 2);
	tu_write_file(tu_path(state, "noformat"), "\x01\x02\x03\x04", 4);
	assert_int_equal(chmod(tu_path(state, "noformat"), 0755), 0);
	tu_write_file(tu_path(state, "nointerp"), "#!/nonexistent/sh\n", 18);
	assert_int_equal(chmod(tu_path(state, "nointerp"), 0755), 0);
	assert_kiln(0, spawner_new(&sp, 0));
	for (size_t i = 0; i < n; i++) {
		const char *path = tu_path(state, "%s", cases[i].path);
		const char *argv[] = {path, NULL};
		struct spawn_req rq = {path, argv, no_env, NULL, log_fd, 0};

		rv[i] = spawner_start(sp, &rq, on_done, &sl, NULL);
	}
	rv[N] = spawner_start(sp, &nocwd, on_done, &sl, NULL);
	/* Freed before any assertion: a child started by mistake must not
	 * call back into this frame once it is gone. */
	spawner_free(sp);
	close(log_fd);
	for (size_t i = 0; i < n; i++)
		assert_kiln(cases[i].err, rv[i]);
	assert_kiln(KILN_ENOTFOUND, rv[N]);
	assert_int_equal(seen.ncalls, 0);
	/* a child whose exec failed was reaped, not left a zombie */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* ---- dying with the daemon ---------------------------------------------- */

/* In a forked helper: start `sleep 30`, write its pid to fd, wait to be
 * killed. Never returns. */
static void
helper_spawn_and_wait(void **state, int fd)
{
	const char *argv[] = {"/bin/sleep", "30", NULL};
	struct spawn_req rq = {"/bin/sleep", argv, no_env, NULL, open_log(state, "log"), 0};
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	pid_t pid = 0;

	seen_init(&seen);
	if (spawner_new(&sp, 0) != 0 || spawner_start(sp, &rq, on_done, &sl, &pid) != 0)
		_exit(1);
	if (write(fd, &pid, sizeof pid) != (ssize_t)sizeof pid)
		_exit(1);
	for (;;)
		pause();
}

static void
a_tool_dies_when_the_process_that_started_it_is_killed(void **state)
{
	int p[2];
	pid_t helper, tool = 0;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_true((helper = fork()) >= 0);
	if (helper == 0) {
		close(p[0]);
		helper_spawn_and_wait(state, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &tool, sizeof tool), (ssize_t)sizeof tool);
	close(p[0]);
	assert_true(tool > 0);
	assert_false(pid_gone(tool));
	assert_int_equal(kill(helper, SIGKILL), 0);
	assert_int_equal(waitpid(helper, NULL, 0), helper);
	if (!wait_pid_gone(tool, 5000)) {
		kill(tool, SIGKILL);
		fail_msg("the tool %d outlived the killed process that started it",
		         (int)tool);
	}
}

/* The signal follows the thread that started the tool, not the process
 * (why the engine starts tools from its long-lived workers only). */
struct short_thread {
	struct kilnd_spawner *sp;
	struct slot *sl;
	int log_fd, rv;
};

static void *
short_thread_main(void *arg)
{
	struct short_thread *st = arg;
	const char *argv[] = {"/bin/sleep", "30", NULL};
	struct spawn_req rq = {"/bin/sleep", argv, no_env, NULL, st->log_fd, 0};

	st->rv = spawner_start(st->sp, &rq, on_done, st->sl, NULL);
	return NULL;
}

static void
a_tool_dies_when_the_thread_that_started_it_ends(void **state)
{
	struct kilnd_spawner *sp;
	struct seen seen;
	struct slot sl = {.seen = &seen};
	struct short_thread st = {.sl = &sl, .log_fd = open_log(state, "log")};
	pthread_t t;

	seen_init(&seen);
	assert_kiln(0, spawner_new(&sp, 0));
	st.sp = sp;
	assert_int_equal(0, pthread_create(&t, NULL, short_thread_main, &st));
	pthread_join(t, NULL);
	assert_kiln(0, st.rv);
	if (seen_wait(&seen, 1, 10000) != 1)
		fail_msg("the tool still ran 10 s after its thread ended");
	spawner_free(sp);
	close(st.log_fd);
	assert_signalled(&sl.r, SIGKILL, "sleep whose thread ended");
}

/* ---- finding programs and reading logs ---------------------------------- */

static void
make_file(void **state, const char *rel, mode_t mode)
{
	tu_write_file(tu_path(state, "%s", rel), "#!/bin/sh\n", 10);
	assert_int_equal(chmod(tu_path(state, "%s", rel), mode), 0);
}

static void
spawn_find_cases(void **state)
{
	static const struct {
		const char *name;
		const char *path; /* "@" stands for the case dir */
		int err;
		const char *want; /* "@" stands for the case dir */
	} cases[] = {
		{"tool", "@/a:@/b", 0, "@/b/tool"},
		{"tool", "@/nx:relative::@/b", 0, "@/b/tool"},
		{"mixed", "@/a:@/b", 0, "@/b/mixed"},
		{"plain", "@/a:@/b", KILN_EACCES, NULL},
		{"missing", "@/a:@/b", KILN_ENOTFOUND, NULL},
		{"b", "@", KILN_ENOTFOUND, NULL},
		{"sh", NULL, 0, NULL},
		{"b/tool", NULL, 0, "@/b/tool"},
		{"./b/tool", "/nowhere", 0, "@/./b/tool"},
		{"a/plain", NULL, KILN_EACCES, NULL},
		{"a/missing", NULL, KILN_ENOTFOUND, NULL},
		{"a/", NULL, KILN_ENOTFOUND, NULL},
		{"/bin/sh", NULL, 0, "/bin/sh"},
		{"", NULL, KILN_ENOTFOUND, NULL},
	};
	const char *dir = tu_dir(state);
	char out[4096], path[4096], want[4096];

	assert_int_equal(mkdir(tu_path(state, "a"), 0755), 0);
	assert_int_equal(mkdir(tu_path(state, "b"), 0755), 0);
	make_file(state, "b/tool", 0755);
	make_file(state, "a/mixed", 0644);
	make_file(state, "b/mixed", 0755);
	make_file(state, "a/plain", 0644);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = cases[i].path;
		size_t n = 0;
		int rv;

		for (; p != NULL && *p != '\0' && n + strlen(dir) < sizeof(path); p++)
			n += (size_t)(*p == '@' ? sprintf(path + n, "%s", dir)
			                        : sprintf(path + n, "%c", *p));
		path[n] = '\0';
		rv = spawn_find(cases[i].name, cases[i].path ? path : NULL, dir,
		                out, sizeof(out));
		if (rv != cases[i].err)
			fail_msg("spawn_find('%s', '%s'): expected %s, got %s",
			         cases[i].name, cases[i].path ? path : "(default)",
			         kiln_strerror(cases[i].err), kiln_strerror(rv));
		if (rv != 0)
			continue;
		if (cases[i].want == NULL) {
			assert_true(out[0] == '/' && access(out, X_OK) == 0);
			continue;
		}
		snprintf(want, sizeof(want), "%s%s",
		         cases[i].want[0] == '@' ? dir : "",
		         cases[i].want + (cases[i].want[0] == '@'));
		if (strcmp(out, want) != 0)
			fail_msg("spawn_find('%s'): got %s, expected %s",
			         cases[i].name, out, want);
	}
	assert_kiln(KILN_ERANGE, spawn_find("/bin/sh", NULL, dir, out, 7));
	assert_kiln(0, spawn_find("/bin/sh", NULL, dir, out, 8));
}

static void
log_tail_cases(void **state)
{
	static const struct {
		const char *content;
		unsigned lines;
		size_t outlen;
		const char *want;
	} cases[] = {
		{"one\ntwo\nthree\nfour\n", 2, 100, "three\nfour\n"},
		{"one\ntwo\nthree\nfour", 2, 100, "three\nfour"},
		{"one\ntwo\n", 5, 100, "one\ntwo\n"},
		{"one\ntwo\nthree\n", 1, 100, "three\n"},
		{"one\ntwo\nthree\n", 3, 9, "o\nthree\n"},
		{"one\n\n\n", 2, 100, "\n\n"},
		{"", 3, 100, ""},
		{"abc\n", 0, 100, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[100];
		size_t n;
		int fd;

		tu_write_file(tu_path(state, "log"), cases[i].content,
		              strlen(cases[i].content));
		fd = open(tu_path(state, "log"), O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		memset(out, 'X', sizeof(out));
		n = spawn_log_tail(fd, cases[i].lines, out, cases[i].outlen);
		close(fd);
		if (n != strlen(cases[i].want) || strcmp(out, cases[i].want) != 0)
			fail_msg("case %zu: tail %u of '%s' gave '%s' (%zu)", i,
			         cases[i].lines, cases[i].content, out, n);
	}
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(exit_codes_are_reported),
		T(death_by_signal_is_reported),
		T(cpu_time_and_memory_are_accounted),
		T(stdout_and_stderr_both_go_to_the_log),
		T(the_tool_runs_in_its_cwd),
		T(kept_spawn_settings_follow_each_cwd_and_log),
		T(the_tool_gets_exactly_its_environment),
		T(no_descriptor_of_the_parent_leaks_into_the_tool),
		T(signals_blocked_in_the_parent_are_unblocked_in_the_tool),
		T(signals_ignored_in_the_parent_are_default_in_the_tool),
		T(tools_start_under_the_normal_policy_when_asked),
		T(fifty_children_at_once_each_done_exactly_once),
		T(spawning_beside_reaping_reports_each_child_once),
		T(kill_ends_the_whole_process_group_with_sigterm),
		T(sigterm_reaches_the_tools_children),
		T(a_tool_ignoring_sigterm_gets_sigkill_after_the_grace),
		T(what_a_tool_leaves_running_is_killed_when_it_exits),
		T(free_with_running_children_kills_them_and_returns_promptly),
		T(children_without_a_pidfd_are_reaped_and_killed_too),
		T(start_errors_call_no_done),
		T(a_tool_dies_when_the_process_that_started_it_is_killed),
		T(a_tool_dies_when_the_thread_that_started_it_ends),
		T(spawn_find_cases),
		T(log_tail_cases),
	};
	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
