/* autostart.c — starting the project's daemon when none answers, so that
 * any number of clients starting at once end with exactly one daemon.
 *
 * A client that cannot connect takes <project>/.kiln/start.lock (flock),
 * tries once more (another client may have started the daemon meanwhile),
 * and only then runs kilnd, which returns once it serves. kilnd itself
 * holds <project>/.kiln/kilnd.lock for its whole life, so even a kilnd
 * started by hand cannot make a second daemon. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_clock.h"
#include "libkiln_int.h"

extern char **environ;

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Take the start lock, waiting at most timeout_ms. Returns 0 (*fd holds
 * it), KILN_ETIMEDOUT or an error. */
static int
start_lock(const struct kiln_paths *p, int timeout_ms, int *fd)
{
	if (mkdir(p->dir, 0777) != 0 && errno != EEXIST)
		return kiln_err_from_errno(errno);
	if ((*fd = open(p->start_lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return kiln_err_from_errno(errno);
	for (int waited = 0; flock(*fd, LOCK_EX | LOCK_NB) != 0; waited += 10) {
		if (errno != EWOULDBLOCK || waited >= timeout_ms) {
			int rv = errno == EWOULDBLOCK ? KILN_ETIMEDOUT :
			                                kiln_err_from_errno(errno);
			close(*fd);
			return rv;
		}
		sleep_ms(10);
	}
	return 0;
}

/* Which kilnd to run: the given one, $KILND, the kilnd next to the
 * running program, or "kilnd" from $PATH (*search set). */
static void
kilnd_path(const char *given, char *buf, size_t len, int *search)
{
	char self[4096];
	ssize_t n;

	*search = 0;
	if (given == NULL)
		given = getenv("KILND");
	if (given != NULL && given[0] != '\0') {
		snprintf(buf, len, "%s", given);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		snprintf(buf, len, "%s/kilnd", dirname(self));
		if (access(buf, X_OK) == 0)
			return;
	}
	snprintf(buf, len, "kilnd");
	*search = 1;
}

/* Run kilnd for the project and wait until it serves (it detaches and
 * returns then). Its stderr is ours, so its complaints reach the user;
 * its stdout is /dev/null, so a client's own output stays clean. Returns
 * 0 (it serves, or another daemon does) or KILN_ENODAEMON. */
static int
daemon_spawn(const struct kiln_paths *p, const char *kilnd)
{
	char path[4096], project[sizeof(p->project)];
	char *argv[] = {"kilnd", "--project", project, NULL};
	posix_spawn_file_actions_t fa;
	char **env;
	size_t n;
	int search, status, rv;
	pid_t pid;

	kilnd_path(kilnd, path, sizeof(path), &search);
	snprintf(project, sizeof(project), "%s", p->project);
	/* A kiln run by a step's tool (kiln need) carries the mark kilnd's
	 * sweep finds a dead daemon's tools by (daemon/engine/orphans.c): a daemon
	 * it starts must not carry it, or the next daemon of the first
	 * project would take it for one of its tools. */
	for (n = 0; environ[n] != NULL; n++)
		;
	if ((env = calloc(n + 1, sizeof *env)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0, k = 0; i < n; i++)
		if (strncmp(environ[i], "KILN_TOOL_OF=", 13) != 0)
			env[k++] = environ[i];
	if (posix_spawn_file_actions_init(&fa) != 0) {
		free(env);
		return KILN_ENOMEM;
	}
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	rv = (search ? posix_spawnp : posix_spawn)(&pid, path, &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	if (rv != 0)
		return KILN_ENODAEMON;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return KILN_ENODAEMON;
	/* 0: it serves; 3: another daemon holds the project's lock. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		return KILN_EBUSY;
	return KILN_ENODAEMON;
}

/* Dial, retrying while the daemon that holds the project is still on its
 * way to listening. */
static int
dial_retry(const struct kiln_paths *p, const struct conn_opts *o,
           int timeout_ms, struct conn **conn)
{
	int rv, waited = 0;

	while ((rv = conn_open(p->url, o, conn)) == KILN_ENODAEMON &&
	       waited < timeout_ms) {
		sleep_ms(20);
		waited += 20;
	}
	return rv;
}

/* Start kilnd and dial it. A kilnd that finds the project's lock taken
 * (exit 3) leaves it to the holder, which may be a daemon still starting
 * (dial it) or one killed a moment ago that the kernel has not finished
 * tearing down: it holds the lock without ever answering, so after a
 * short dial, start kilnd again, until timeout_ms. */
static int
spawn_and_dial(const struct kiln_paths *p, const char *kilnd,
               const struct conn_opts *o, int timeout_ms, struct conn **conn)
{
	int64_t end = kiln_mono_ns() + (int64_t)timeout_ms * 1000000;
	int rv;

	for (;;) {
		if ((rv = daemon_spawn(p, kilnd)) == 0)
			return dial_retry(p, o, timeout_ms, conn);
		if (rv != KILN_EBUSY)
			return rv;
		if ((rv = dial_retry(p, o, 200, conn)) != KILN_ENODAEMON ||
		    kiln_mono_ns() >= end)
			return rv;
	}
}

int
lk_autostart(const struct kiln_paths *p, const char *kilnd, int no_start,
             const struct conn_opts *o, int timeout_ms, struct conn **conn)
{
	int rv, fd = -1;

	if ((rv = conn_open(p->url, o, conn)) != KILN_ENODAEMON || no_start)
		return rv;
	if ((rv = start_lock(p, timeout_ms, &fd)) != 0)
		return rv == KILN_ETIMEDOUT ? KILN_ENODAEMON : rv;
	if ((rv = conn_open(p->url, o, conn)) == KILN_ENODAEMON)
		rv = spawn_and_dial(p, kilnd, o, timeout_ms, conn);
	close(fd); /* releases the lock */
	return rv;
}
