/* runtime.c — the daemon's life around serving: detaching, the project
 * lock and pid file, clearing what a killed daemon left, signals, and
 * waiting for the order to stop.
 *
 * Threads: everything here runs on the main thread, except
 * kilnd_request_stop (any thread: an atomic flag and an eventfd write). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kilnd.h"
#include "kiln_clock.h"

/* ---- detaching ----------------------------------------------------------- */

/* The parent's side: wait for the child's word ("<status><message>") and
 * pass its message on. Returns the exit status for the parent. */
static int
parent_wait(int fd, const struct kilnd *d)
{
	char buf[1024];
	size_t n = 0;
	ssize_t r;

	while (n < sizeof(buf) - 1 &&
	       ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0 ||
	        (r < 0 && errno == EINTR)))
		n += r > 0 ? (size_t)r : 0;
	buf[n] = '\0';
	close(fd);
	if (n == 0) {
		fprintf(stderr, "kilnd: the daemon died while starting; see %s\n",
		        d->paths.log);
		return KILND_EXIT_FAIL;
	}
	if (buf[1] != '\0')
		fprintf(stderr, "%s\n", buf + 1);
	return buf[0] - '0';
}

int
kilnd_detach(struct kilnd *d, int *parent_exit)
{
	int p[2], devnull;
	pid_t pid;

	d->ready_fd = -1;
	if (d->cfg.foreground)
		return KILND_DETACH_CHILD;
	if (pipe2(p, O_CLOEXEC) != 0)
		return kiln_err_from_errno(errno);
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return kiln_err_from_errno(errno);
	}
	if (pid > 0) {
		close(p[1]);
		*parent_exit = parent_wait(p[0], d);
		return KILND_DETACH_PARENT;
	}
	close(p[0]);
	d->ready_fd = p[1];
	setsid();
	if ((devnull = open("/dev/null", O_RDWR)) >= 0) {
		dup2(devnull, STDIN_FILENO);
		if (devnull > STDERR_FILENO)
			close(devnull);
	}
	return KILND_DETACH_CHILD;
}

void
kilnd_ready(struct kilnd *d, int status, const char *msg)
{
	char buf[1024];
	int n;

	if (d->ready_fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%c%s", '0' + status, msg ? msg : "");
	if (n > (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 1;
	if (write(d->ready_fd, buf, (size_t)n) < 0) {
		/* the parent is gone; nobody to tell */
	}
	close(d->ready_fd);
	d->ready_fd = -1;
}

/* ---- the lock and the pid file ------------------------------------------- */

/* The pid written in the pid file, or 0. */
static long
pid_read(const char *path)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

/* Write our pid to the pid file, atomically (temp file + rename). */
static int
pid_write(const struct kilnd *d)
{
	char tmp[PATH_MAX + 8], buf[32];
	int fd, n, rv = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->paths.pid);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return kiln_err_from_errno(errno);
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (write(fd, buf, (size_t)n) != n)
		rv = KILN_EIO;
	if (close(fd) != 0 && rv == 0)
		rv = KILN_EIO;
	if (rv == 0 && rename(tmp, d->paths.pid) != 0)
		rv = kiln_err_from_errno(errno);
	if (rv != 0)
		unlink(tmp);
	return rv;
}

int
kilnd_lock(struct kilnd *d, long *other)
{
	struct stat st;
	int fd;

	*other = 0;
	if (mkdir(d->paths.dir, 0777) != 0 && errno != EEXIST)
		return kiln_err_from_errno(errno);
	fd = open(d->paths.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return kiln_err_from_errno(errno);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;
		close(fd);
		if (err != EWOULDBLOCK)
			return kiln_err_from_errno(err);
		*other = pid_read(d->paths.pid);
		return KILN_EBUSY;
	}
	d->lock_fd = fd;
	/* The lock was free, so whoever left a socket or pid file is dead. */
	d->stale_pid = pid_read(d->paths.pid);
	if (lstat(d->paths.sock, &st) == 0) {
		d->stale_sock = 1;
		unlink(d->paths.sock);
	}
	return pid_write(d);
}

void
kilnd_unlock(struct kilnd *d)
{
	if (d->lock_fd < 0)
		return;
	if (pid_read(d->paths.pid) == (long)getpid())
		unlink(d->paths.pid);
	unlink(d->paths.sock); /* nng removes it too; either way it goes */
	close(d->lock_fd);     /* releases the lock: the next daemon may start */
	d->lock_fd = -1;
}

/* ---- signals and stopping ------------------------------------------------ */

int
kilnd_signals_init(struct kilnd *d)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	/* Blocked here, before nng makes its threads, so that they inherit
	 * the mask and only the signalfd sees these. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return KILN_EIO;
	if ((d->sig_fd = signalfd(-1, &set, SFD_CLOEXEC)) < 0)
		return kiln_err_from_errno(errno);
	if ((d->wake_fd = eventfd(0, EFD_CLOEXEC)) < 0)
		return kiln_err_from_errno(errno);
	return 0;
}

void
kilnd_request_stop(struct kilnd *d, const char *reason)
{
	uint64_t one = 1;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&d->stop_asked, &expected, 1))
		return;
	snprintf(d->stop_reason, sizeof(d->stop_reason), "%s", reason);
	atomic_store(&d->stop_asked, 2); /* the reason is written */
	if (write(d->wake_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write only fails on overflow: already woken */
	}
}

/* Read one signal off the signalfd; returns its number or 0. */
static int
signal_take(int fd)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

void
kilnd_wait(struct kilnd *d)
{
	struct pollfd fds[2] = {{d->sig_fd, POLLIN, 0}, {d->wake_fd, POLLIN, 0}};
	int sig;

	for (;;) {
		if (poll(fds, 2, -1) < 0)
			continue; /* EINTR */
		if (fds[1].revents & POLLIN)
			break; /* stop_reason set by the asker */
		if (!(fds[0].revents & POLLIN) || (sig = signal_take(d->sig_fd)) == 0)
			continue;
		if (sig == SIGHUP) {
			kilnd_log(d, KILND_INFO, "SIGHUP: nothing to reload yet");
			continue;
		}
		kilnd_request_stop(d, sig == SIGTERM ? "SIGTERM" : "SIGINT");
		break;
	}
	/* The asker may still be writing stop_reason (a signal came just
	 * after a stop request took the claim): wait for it, briefly. Seen
	 * by ThreadSanitizer: the log line read the reason being written. */
	while (atomic_load(&d->stop_asked) != 2)
		sched_yield();
}
