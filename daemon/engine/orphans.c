/* orphans.c — ending the tools a previous daemon left running (see
 * orphans.h).
 *
 * One pass reads /proc: for each process of this user, a pidfd is opened
 * first and the environment read second, so the signal sent through the
 * pidfd can only reach the process whose environment was read (a pid
 * reused in between makes the pidfd's process gone, and the signal a
 * no-op). A marked process's group is killed too when the group is a
 * tool's: its leader (a tool is one, tool_spawn.c) is marked as well, or
 * gone, as after its parent-death signal; never a group whose leader is
 * an unmarked live process (a shell that happens to hold a marked
 * child). A pass that killed something is followed by another (at most
 * three), for what the killed processes started while being looked at.
 *
 * Threads: called once, from the thread starting the engine. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kiln_error.h"
#include "orphans.h"
#include "kiln_clock.h"

#define PASSES_MAX 3

/* What one sweep is looking for, and the pidfds of what it killed. */
struct sweep {
	char *entry;        /* "KILN_TOOL_OF=<root>" */
	size_t lentry;
	pid_t self, parent, group;
	uid_t uid;
	int *fds;           /* pidfds to wait on */
	size_t nfds, capfds;
	unsigned nkilled;
	int oom;
};

/* Whether the NUL-separated environment buf (len bytes) holds entry
 * exactly. */
static int
env_has(const char *buf, size_t len, const char *entry, size_t lentry)
{
	size_t at = 0;

	while (at < len) {
		const char *end = memchr(buf + at, '\0', len - at);
		size_t n = end != NULL ? (size_t)(end - (buf + at)) : len - at;
		if (n == lentry && memcmp(buf + at, entry, n) == 0)
			return 1;
		at += n + 1;
	}
	return 0;
}

/* Whether process pid (of our user) was started with the marker. 0 when
 * it was not, is gone, or cannot be read. */
static int
pid_marked(struct sweep *sw, pid_t pid)
{
	char path[64], *buf = NULL, *nb;
	size_t len = 0, cap = 0;
	struct stat st;
	ssize_t n;
	int fd, hit;

	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	if (stat(path, &st) != 0 || st.st_uid != sw->uid)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? 2 * cap : 16384;
			if ((nb = realloc(buf, cap)) == NULL) {
				sw->oom = 1;
				break;
			}
			buf = nb;
		}
		if ((n = read(fd, buf + len, cap - len)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	hit = buf != NULL && env_has(buf, len, sw->entry, sw->lentry);
	free(buf);
	return hit;
}

/* Whether group pgid is a tool's that may be killed whole (see the top). */
static int
group_killable(struct sweep *sw, pid_t pgid)
{
	if (pgid <= 1 || pgid == sw->group || pgid == sw->self || pgid == sw->parent)
		return 0;
	if (kill(pgid, 0) != 0 && errno == ESRCH)
		return 1;   /* its leader is gone */
	return pid_marked(sw, pgid);
}

static void
fd_keep(struct sweep *sw, int fd)
{
	if (sw->nfds == sw->capfds) {
		size_t ncap = sw->capfds ? 2 * sw->capfds : 16;
		int *nv = realloc(sw->fds, ncap * sizeof *nv);
		if (nv == NULL) {
			close(fd);   /* not waited for; still killed */
			return;
		}
		sw->fds = nv;
		sw->capfds = ncap;
	}
	sw->fds[sw->nfds++] = fd;
}

/* Look at process pid; kill it and its group if it is marked. */
static void
sweep_pid(struct sweep *sw, pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	pid_t pgid;

	if (fd < 0)
		return;   /* gone, or no descriptor left: not ours to judge */
	if (!pid_marked(sw, pid)) {
		close(fd);
		return;
	}
	if ((pgid = getpgid(pid)) > 0 && group_killable(sw, pgid) &&
	    syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) == 0)
		kill(-pgid, SIGKILL);
	if (syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) == 0) {
		sw->nkilled++;
		fd_keep(sw, fd);
	} else {
		close(fd);
	}
}

/* One pass over /proc. Returns how many it killed, or KILN_ENOTFOUND
 * without /proc. */
static int
sweep_pass(struct sweep *sw)
{
	unsigned before = sw->nkilled;
	struct dirent *de;
	DIR *d;

	if ((d = opendir("/proc")) == NULL)
		return KILN_ENOTFOUND;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid > INT_MAX ||
		    pid == sw->self || pid == sw->parent)
			continue;
		sweep_pid(sw, (pid_t)pid);
	}
	closedir(d);
	return (int)(sw->nkilled - before);
}

/* Wait until every kept pidfd is readable (its process ended), at most
 * until deadline; close them. */
static void
sweep_wait(struct sweep *sw, int64_t deadline)
{
	for (size_t i = 0; i < sw->nfds; i++) {
		struct pollfd p = {sw->fds[i], POLLIN, 0};
		int64_t left = deadline - (kiln_mono_ns() / 1000000);
		while (left > 0 && poll(&p, 1, (int)left) < 0 && errno == EINTR)
			left = deadline - (kiln_mono_ns() / 1000000);
		close(sw->fds[i]);
	}
	sw->nfds = 0;
}

int
orphans_kill(const char *root, unsigned wait_ms, unsigned *nkilled)
{
	struct sweep sw = {0};
	int64_t deadline = (kiln_mono_ns() / 1000000) + wait_ms;
	int rv = 0, n = 1;

	*nkilled = 0;
	if (asprintf(&sw.entry, "%s=%s", ORPHANS_MARKER, root) < 0)
		return KILN_ENOMEM;
	sw.lentry = strlen(sw.entry);
	sw.self = getpid();
	sw.parent = getppid();
	sw.group = getpgrp();
	sw.uid = getuid();
	for (int pass = 0; pass < PASSES_MAX && n > 0; pass++) {
		if ((n = sweep_pass(&sw)) < 0)
			rv = KILN_EIO;
		sweep_wait(&sw, deadline);
	}
	if (rv == 0 && sw.oom)
		rv = KILN_ENOMEM;
	*nkilled = sw.nkilled;
	free(sw.fds);
	free(sw.entry);
	return rv;
}
