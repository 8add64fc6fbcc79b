/* toolrun.c — running build tools (see toolrun.h).
 *
 * spawner_start posix_spawns the tool in a new process group and hands it
 * to the spawner's reaper thread through a list and an eventfd. The reaper
 * polls the eventfd and one pidfd per child; when a pidfd turns readable
 * the child is a zombie, so its pid (and with it the process group id) is
 * still reserved: the reaper SIGKILLs what is left of the group (a tool's
 * stray background processes must not outlive its step and write into the
 * build after it), then reaps exactly that child with waitid on its pidfd,
 * taking its rusage from the raw syscall, and calls done.
 *
 * A child whose pidfd could not be opened (EMFILE) or that does not fit in
 * the reaper's poll array (no memory to grow it) is looked at every
 * POLL_SLOW_MS instead. The daemon installs no SIGCHLD handler and nothing
 * else waits for these children; the reaper never waits for any pid but
 * its own.
 *
 * Threads: struct kilnd_spawner's list, counts and flags are guarded by mu;
 * a child is in the list from spawn until the reaper takes it out to reap
 * it, so spawner_kill (under mu) only ever signals a group whose leader is
 * not yet reaped. The poll array belongs to the reaper thread alone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_error.h"
#include "toolrun.h"

/* How often a child without a pidfd in the poll array is looked at. */
#define POLL_SLOW_MS 20

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

struct child {
	struct child *next;
	pid_t pid;         /* also its process group id */
	int pidfd;         /* -1: none, looked at every POLL_SLOW_MS */
	int polled;        /* in the reaper's poll array this round */
	spawn_done_fn done;
	void *arg;
	int64_t start_ns;
	int64_t kill_at_ns; /* SIGKILL the group then; 0: not asked */
};

/* A tool's file actions for one log fd number and cwd, kept for the
 * spawner's life: building them costs a getrlimit system call per action
 * (glibc checks each fd against the limit), six a tool. They name fd
 * numbers, not files, so an entry stays right whatever file the number
 * holds later. posix_spawn only reads them: shared by concurrent spawns. */
struct fa_entry {
	struct fa_entry *next;
	int log_fd;
	char *cwd;          /* NULL: the daemon's */
	posix_spawn_file_actions_t fa;
};

/* Kept entries at most (one per pooled scratch folder is the usual). */
#define FA_KEEP_MAX 256

struct kilnd_spawner {
	/* signals the daemon ignores (fixed at spawner_new, and SIGPIPE): an
	 * ignored disposition survives exec, handlers do not, so only these
	 * need resetting in the child (one sigaction each, where resetting all
	 * 62 was ~60 system calls in every tool before its exec) */
	sigset_t ignored;
	pthread_mutex_t mu;
	struct child *children;
	unsigned nrunning;
	unsigned nstarting; /* between the closing check and joining the list */
	int closing;
	int efd;            /* eventfd: a child joined, a kill timer, closing */
	pthread_t thread;
	struct pollfd *pfd; /* reaper thread only */
	size_t npfd_max;
	posix_spawnattr_t attr;  /* every tool's (spawn_attrs), read-only */
	struct fa_entry *fas;    /* under mu; entries are never changed */
	unsigned nfas;
};

static int spawn_attrs(const sigset_t *ignored, int sched_normal,
                       posix_spawnattr_t *at);

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
spawner_wake(struct kilnd_spawner *sp)
{
	uint64_t one = 1;

	/* Can only fail when the counter is about to overflow, and then the
	 * reaper is awake anyway. */
	if (write(sp->efd, &one, sizeof(one)) < 0)
		return;
}

/* waitid on exactly this child (by pidfd, or by pid when it has none),
 * with the rusage the raw syscall gives and glibc's wrapper does not. */
static int
child_waitid(struct child *c, siginfo_t *si, int options, struct rusage *ru)
{
	memset(si, 0, sizeof(*si));
	if (c->pidfd >= 0)
		return (int)syscall(SYS_waitid, P_PIDFD, c->pidfd, si, options, ru);
	return (int)syscall(SYS_waitid, P_PID, c->pid, si, options, ru);
}

/* Whether c has ended (it is a zombie now), without reaping it. */
static int
child_ended(struct child *c)
{
	siginfo_t si;

	if (child_waitid(c, &si, WEXITED | WNOHANG | WNOWAIT, NULL) != 0)
		return errno == ECHILD; /* someone else reaped it: report it gone */
	return si.si_pid != 0;
}

/* Reap c (taken out of the list already), and call its done function. */
static void
child_finish(struct child *c)
{
	struct spawn_result r = {0};
	struct rusage ru = {0};
	siginfo_t si;
	int rv;

	/* Stray members of its group; the zombie keeps the pgid reserved. */
	kill(-c->pid, SIGKILL);
	while ((rv = child_waitid(c, &si, WEXITED, &ru)) != 0 && errno == EINTR)
		;
	r.wall_ns = now_ns() - c->start_ns;
	if (rv != 0) {
		/* Not ours to reap any more (someone waited for it): a death
		 * we cannot name. */
		r.exited = 0;
		r.status = SIGKILL;
	} else if (si.si_code == CLD_EXITED) {
		r.exited = 1;
		r.status = si.si_status;
	} else {
		r.exited = 0;
		r.status = si.si_status;
	}
	r.cpu_ns = ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
	r.maxrss_kb = ru.ru_maxrss;
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->done(c->arg, &r);
	free(c);
}

/* Fill the poll array from the list; returns how many entries, and the
 * poll timeout (ms, -1 for none) from the kill timers and slow children. */
static nfds_t
reaper_fill(struct kilnd_spawner *sp, int *timeout)
{
	int64_t now = now_ns(), soonest = -1;
	size_t want = 1 + sp->nrunning;
	struct pollfd *p;
	struct child *c;
	nfds_t n = 1;

	if (want > sp->npfd_max &&
	    (p = realloc(sp->pfd, want * sizeof(*p))) != NULL) {
		sp->pfd = p;
		sp->npfd_max = want;
	}
	sp->pfd[0] = (struct pollfd){sp->efd, POLLIN, 0};
	for (c = sp->children; c != NULL; c = c->next) {
		c->polled = c->pidfd >= 0 && n < sp->npfd_max;
		if (c->polled)
			sp->pfd[n++] = (struct pollfd){c->pidfd, POLLIN, 0};
		else
			soonest = now + (int64_t)POLL_SLOW_MS * 1000000;
		if (c->kill_at_ns != 0 && (soonest < 0 || c->kill_at_ns < soonest))
			soonest = c->kill_at_ns;
	}
	if (soonest < 0)
		*timeout = -1;
	else if (soonest <= now)
		*timeout = 0;
	else
		*timeout = (int)((soonest - now + 999999) / 1000000);
	return n;
}

/* After a poll: fire due kill timers, and take every ended child out of the
 * list into *ended. */
static void
reaper_collect(struct kilnd_spawner *sp, nfds_t n, struct child **ended)
{
	struct child **cp = &sp->children, *c;
	int64_t now = now_ns();
	nfds_t i = 1;

	while ((c = *cp) != NULL) {
		int ready = 0;

		/* A readable pidfd means ended; checked anyway, as the
		 * reap that follows blocks. */
		if (c->polled && i < n)
			ready = sp->pfd[i++].revents != 0 && child_ended(c);
		else if (!c->polled)
			ready = child_ended(c);
		if (ready) {
			*cp = c->next;
			c->next = *ended;
			*ended = c;
			sp->nrunning--;
			continue;
		}
		if (c->kill_at_ns != 0 && c->kill_at_ns <= now) {
			kill(-c->pid, SIGKILL);
			c->kill_at_ns = 0;
		}
		cp = &c->next;
	}
}

static void *
reaper_main(void *arg)
{
	struct kilnd_spawner *sp = arg;
	struct child *ended, *c;
	uint64_t count;
	int timeout;
	nfds_t n;

	pthread_mutex_lock(&sp->mu);
	while (!sp->closing || sp->children != NULL || sp->nstarting != 0) {
		n = reaper_fill(sp, &timeout);
		pthread_mutex_unlock(&sp->mu);
		if (poll(sp->pfd, n, timeout) > 0 && (sp->pfd[0].revents & POLLIN))
			if (read(sp->efd, &count, sizeof(count)) < 0)
				count = 0; /* EAGAIN: someone else's wake, fine */
		pthread_mutex_lock(&sp->mu);
		ended = NULL;
		reaper_collect(sp, n, &ended);
		/* done may call spawner_start or spawner_kill: not under mu. */
		pthread_mutex_unlock(&sp->mu);
		while ((c = ended) != NULL) {
			ended = c->next;
			child_finish(c);
		}
		pthread_mutex_lock(&sp->mu);
	}
	pthread_mutex_unlock(&sp->mu);
	return NULL;
}

int
spawner_new(struct kilnd_spawner **spp, int sched_normal)
{
	struct kilnd_spawner *sp;
	sigset_t all, old;
	int rv;

	*spp = NULL;
	if ((sp = calloc(1, sizeof(*sp))) == NULL)
		return KILN_ENOMEM;
	if ((sp->pfd = malloc(16 * sizeof(*sp->pfd))) == NULL) {
		free(sp);
		return KILN_ENOMEM;
	}
	sp->npfd_max = 16;
	sigemptyset(&sp->ignored);
	sigaddset(&sp->ignored, SIGPIPE);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sigaddset(&sp->ignored, sig);
	}
	if ((rv = spawn_attrs(&sp->ignored, sched_normal, &sp->attr)) != 0)
		goto fail;
	if ((sp->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rv = kiln_err_from_errno(errno);
		posix_spawnattr_destroy(&sp->attr);
		goto fail;
	}
	pthread_mutex_init(&sp->mu, NULL);
	/* The reaper takes no signal meant for the daemon's other threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rv = pthread_create(&sp->thread, NULL, reaper_main, sp);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rv != 0) {
		pthread_mutex_destroy(&sp->mu);
		close(sp->efd);
		posix_spawnattr_destroy(&sp->attr);
		rv = rv == EAGAIN ? KILN_ENOMEM : KILN_EIO;
		goto fail;
	}
	*spp = sp;
	return 0;
fail:
	free(sp->pfd);
	free(sp);
	return rv;
}

/* The attributes every tool gets: its own process group, no blocked
 * signals, and default dispositions (the daemon ignores SIGPIPE, and an
 * ignored signal would stay ignored across exec; glibc resets the ones
 * with handlers itself); with sched_normal, the SCHED_OTHER policy (its
 * nice value kept), whatever policy the starting thread runs under. */
static int
spawn_attrs(const sigset_t *ignored, int sched_normal, posix_spawnattr_t *at)
{
	struct sched_param prio0 = {0};
	sigset_t none;

	sigemptyset(&none);
	if (posix_spawnattr_init(at) != 0)
		return KILN_ENOMEM;
	if (posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP |
	                             POSIX_SPAWN_SETSIGMASK |
	                             POSIX_SPAWN_SETSIGDEF |
	                             (sched_normal ? POSIX_SPAWN_SETSCHEDULER : 0)) != 0 ||
	    posix_spawnattr_setpgroup(at, 0) != 0 ||
	    posix_spawnattr_setsigmask(at, &none) != 0 ||
	    posix_spawnattr_setsigdefault(at, ignored) != 0 ||
	    posix_spawnattr_setschedpolicy(at, SCHED_OTHER) != 0 ||
	    posix_spawnattr_setschedparam(at, &prio0) != 0) {
		posix_spawnattr_destroy(at);
		return KILN_ENOMEM;
	}
	return 0;
}

/* stdin from /dev/null, stdout and stderr to log_fd (not 0..2, see
 * spawner_start), cwd, and nothing else open. */
static int
spawn_actions(posix_spawn_file_actions_t *fa, int log_fd, const char *cwd)
{
	if (posix_spawn_file_actions_init(fa) != 0)
		return KILN_ENOMEM;
	if (posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
	    posix_spawn_file_actions_adddup2(fa, log_fd, 1) != 0 ||
	    posix_spawn_file_actions_adddup2(fa, log_fd, 2) != 0 ||
	    posix_spawn_file_actions_addclosefrom_np(fa, 3) != 0 ||
	    (cwd != NULL && posix_spawn_file_actions_addchdir_np(fa, cwd) != 0)) {
		posix_spawn_file_actions_destroy(fa);
		return KILN_ENOMEM;
	}
	return 0;
}

/* The kept file actions for log_fd and cwd, made and kept on first use;
 * NULL when they cannot be kept (then spawn_one makes its own). */
static const posix_spawn_file_actions_t *
fa_kept(struct kilnd_spawner *sp, int log_fd, const char *cwd)
{
	struct fa_entry *f;

	pthread_mutex_lock(&sp->mu);
	for (f = sp->fas; f != NULL; f = f->next)
		if (f->log_fd == log_fd &&
		    (f->cwd == NULL ? cwd == NULL : cwd != NULL && strcmp(f->cwd, cwd) == 0))
			break;
	if (f == NULL && sp->nfas < FA_KEEP_MAX && (f = calloc(1, sizeof *f)) != NULL) {
		f->log_fd = log_fd;
		if ((cwd != NULL && (f->cwd = strdup(cwd)) == NULL) ||
		    spawn_actions(&f->fa, log_fd, cwd) != 0) {
			free(f->cwd);
			free(f);
			f = NULL;
		} else {
			f->next = sp->fas;
			sp->fas = f;
			sp->nfas++;
		}
	}
	pthread_mutex_unlock(&sp->mu);
	return f != NULL ? &f->fa : NULL;
}

static int
spawn_err(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return KILN_ENOTFOUND;
	case EACCES:
	case EPERM:
	case ENOEXEC:
		return KILN_EACCES;
	case ENOMEM:
	case EAGAIN:
		return KILN_ENOMEM;
	default:
		return KILN_EIO;
	}
}

static int find_check(const char *path);

/* posix_spawn rq; *pid on 0. */
static int
spawn_one(struct kilnd_spawner *sp, const struct spawn_req *rq, pid_t *pid)
{
	const posix_spawn_file_actions_t *kept = NULL;
	posix_spawn_file_actions_t fa;
	struct stat st;
	int log_fd = rq->log_fd, tmp_fd = -1, rv, err;

	/* posix_spawn reports these too, but only where the child shares our
	 * memory until exec (not under valgrind, where it would be exit 127
	 * instead); checked first, a missing program is the same error
	 * everywhere. */
	if ((rv = find_check(rq->path)) != 0)
		return rv;
	if (rq->cwd != NULL && (stat(rq->cwd, &st) != 0 || !S_ISDIR(st.st_mode)))
		return KILN_ENOTFOUND;

	/* dup2 onto 1 and 2 would be undone by the open onto 0, or be a
	 * no-op that keeps close-on-exec: give the log a higher number. */
	if (log_fd >= 0 && log_fd <= 2) {
		if ((tmp_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, 3)) < 0)
			return kiln_err_from_errno(errno);
		log_fd = tmp_fd;
	}
	/* a borrowed low fd's number is passing: not kept */
	if (tmp_fd < 0)
		kept = fa_kept(sp, log_fd, rq->cwd);
	if (kept == NULL && (rv = spawn_actions(&fa, log_fd, rq->cwd)) != 0)
		goto out;
	err = posix_spawn(pid, rq->path, kept != NULL ? kept : &fa, &sp->attr,
	                  (char *const *)rq->argv, (char *const *)rq->envp);
	rv = err == 0 ? 0 : spawn_err(err);
	if (kept == NULL)
		posix_spawn_file_actions_destroy(&fa);
out:
	if (tmp_fd >= 0)
		close(tmp_fd);
	return rv;
}

int
spawner_start(struct kilnd_spawner *sp, const struct spawn_req *rq,
              spawn_done_fn done, void *arg, pid_t *pidp)
{
	struct child *c;
	int rv;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KILN_ENOMEM;
	pthread_mutex_lock(&sp->mu);
	if (sp->closing) {
		pthread_mutex_unlock(&sp->mu);
		free(c);
		return KILN_ECLOSED;
	}
	sp->nstarting++;
	pthread_mutex_unlock(&sp->mu);

	c->done = done;
	c->arg = arg;
	c->start_ns = now_ns();
	rv = spawn_one(sp, rq, &c->pid);
	/* Until it is reaped the pid cannot be reused, so this is our child;
	 * without a pidfd (EMFILE) it is looked at by timer instead. A pidfd
	 * is always close-on-exec. */
	if (rv == 0)
		c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);

	pthread_mutex_lock(&sp->mu);
	sp->nstarting--;
	if (rv == 0) {
		if (sp->closing)
			kill(-c->pid, SIGKILL);
		c->next = sp->children;
		sp->children = c;
		sp->nrunning++;
		if (pidp != NULL)
			__atomic_store_n(pidp, c->pid, __ATOMIC_RELEASE);  /* read by other threads */
	}
	spawner_wake(sp);
	pthread_mutex_unlock(&sp->mu);
	if (rv != 0)
		free(c);
	return rv;
}

int
spawner_kill(struct kilnd_spawner *sp, pid_t pid, unsigned grace_ms)
{
	struct child *c;
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&sp->mu);
	for (c = sp->children; c != NULL; c = c->next) {
		if (c->pid != pid)
			continue;
		kill(-pid, grace_ms == 0 ? SIGKILL : SIGTERM);
		if (grace_ms != 0 && c->kill_at_ns == 0) {
			c->kill_at_ns = now_ns() + (int64_t)grace_ms * 1000000;
			spawner_wake(sp);
		}
		rv = 0;
		break;
	}
	pthread_mutex_unlock(&sp->mu);
	return rv;
}

unsigned
spawner_running(struct kilnd_spawner *sp)
{
	unsigned n;

	pthread_mutex_lock(&sp->mu);
	n = sp->nrunning;
	pthread_mutex_unlock(&sp->mu);
	return n;
}

void
spawner_free(struct kilnd_spawner *sp)
{
	struct fa_entry *f;
	struct child *c;

	if (sp == NULL)
		return;
	pthread_mutex_lock(&sp->mu);
	sp->closing = 1;
	for (c = sp->children; c != NULL; c = c->next)
		kill(-c->pid, SIGKILL);
	spawner_wake(sp);
	pthread_mutex_unlock(&sp->mu);
	pthread_join(sp->thread, NULL);
	pthread_mutex_destroy(&sp->mu);
	close(sp->efd);
	while ((f = sp->fas) != NULL) {
		sp->fas = f->next;
		posix_spawn_file_actions_destroy(&f->fa);
		free(f->cwd);
		free(f);
	}
	posix_spawnattr_destroy(&sp->attr);
	free(sp->pfd);
	free(sp);
}

/* ---- finding programs --------------------------------------------------- */

/* 0 when path is an executable regular file, else KILN_ENOTFOUND or
 * KILN_EACCES. */
static int
find_check(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return errno == EACCES ? KILN_EACCES : KILN_ENOTFOUND;
	if (!S_ISREG(st.st_mode))
		return KILN_ENOTFOUND;
	if (access(path, X_OK) != 0)
		return KILN_EACCES;
	return 0;
}

/* out = a + "/" + b (b alone when a is NULL). */
static int
find_join(char *out, size_t outlen, const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b), need = a == NULL ? blen : alen + 1 + blen;

	if (need + 1 > outlen)
		return KILN_ERANGE;
	if (a != NULL) {
		memcpy(out, a, alen);
		out[alen] = '/';
		memcpy(out + alen + 1, b, blen + 1);
	} else {
		memcpy(out, b, blen + 1);
	}
	return 0;
}

int
spawn_find(const char *name, const char *path, const char *root, char *out,
           size_t outlen)
{
	char buf[PATH_MAX];
	const char *p, *end;
	int rv, seen_eacces = 0;

	if (name == NULL || name[0] == '\0' ||
	    (name[0] != '/' && strchr(name, '/') != NULL && root == NULL))
		return KILN_ENOTFOUND;
	if (strchr(name, '/') != NULL) {
		rv = name[0] == '/' ? find_join(buf, sizeof(buf), NULL, 0, name)
		                    : find_join(buf, sizeof(buf), root, strlen(root), name);
		if (rv != 0 || (rv = find_check(buf)) != 0)
			return rv == KILN_ERANGE ? KILN_ENOTFOUND : rv;
		return find_join(out, outlen, NULL, 0, buf);
	}
	/* Like execvp: the first executable match wins, and when there is
	 * none but a match that may not be run, say so. Entries that are
	 * empty or relative mean the daemon's cwd, which means nothing to a
	 * project: skipped. */
	for (p = path != NULL ? path : DEFAULT_PATH; *p != '\0'; p = end) {
		end = strchrnul(p, ':');
		if (*p == '/' &&
		    find_join(buf, sizeof(buf), p, (size_t)(end - p), name) == 0) {
			if ((rv = find_check(buf)) == 0)
				return find_join(out, outlen, NULL, 0, buf);
			seen_eacces |= rv == KILN_EACCES;
		}
		if (*end == ':')
			end++;
	}
	return seen_eacces ? KILN_EACCES : KILN_ENOTFOUND;
}

/* ---- log tails ---------------------------------------------------------- */

size_t
spawn_log_tail(int fd, unsigned max_lines, char *out, size_t outlen)
{
	struct stat st;
	size_t want, got = 0, start;
	off_t from;
	ssize_t n;
	unsigned lines = 0;

	if (outlen == 0)
		return 0;
	out[0] = '\0';
	if (max_lines == 0 || fstat(fd, &st) != 0 || st.st_size <= 0)
		return 0;
	want = outlen - 1;
	if ((uint64_t)st.st_size < want)
		want = (size_t)st.st_size;
	from = st.st_size - (off_t)want;
	while (got < want) {
		n = pread(fd, out + got, want - got, from + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* The last line's own '\n' does not start another line. */
	start = got;
	if (start > 0 && out[start - 1] == '\n')
		start--;
	while (start > 0) {
		if (out[start - 1] == '\n' && ++lines == max_lines)
			break;
		start--;
	}
	memmove(out, out + start, got - start);
	out[got - start] = '\0';
	return got - start;
}
