/* tool_spawn.c — running build tools (see tool_spawn.h).
 *
 * spawner_start starts the tool (spawn_one: a clone sharing our memory
 * until its exec, like posix_spawn, which cannot set the parent-death
 * signal a tool needs to die with the daemon) in a new process group,
 * and hands it to the spawner's reaper thread through a list and an
 * eventfd. The reaper polls the eventfd and one pidfd per child; when a pidfd turns readable
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_error.h"
#include "tool_spawn.h"
#include "kiln_clock.h"

/* How often a child without a pidfd in the poll array is looked at. */
#define POLL_SLOW_MS 20

/* Between the SIGTERM of a timed-out tool and its SIGKILL. */
#define TIMEOUT_GRACE_NS ((int64_t)2000 * 1000000)

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
	int64_t deadline_ns; /* its timeout: SIGTERM then; 0: none (or past) */
	int timed_out;
};

struct kilnd_spawner {
	/* signals reset to their default in every tool, fixed at spawner_new:
	 * the ones the daemon ignores (and SIGPIPE), as an ignored disposition
	 * survives exec; and the ones with a handler, as the child shares the
	 * daemon's memory until its exec and must never run one */
	sigset_t reset;
	int sched_normal;   /* tools start under SCHED_OTHER */
	pthread_mutex_t mu;
	struct child *children;
	unsigned nrunning;
	unsigned nstarting; /* between the closing check and joining the list */
	int closing;
	int efd;            /* eventfd: a child joined, a kill timer, closing */
	pthread_t thread;
	struct pollfd *pfd; /* reaper thread only */
	size_t npfd_max;
	/* spawner_new_ops: everything goes to these (nothing above is used) */
	struct spawner_ops ops;
	int has_ops;
};

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
	r.wall_ns = kiln_mono_ns() - c->start_ns;
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
	r.timed_out = c->timed_out;
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
	int64_t now = kiln_mono_ns(), soonest = -1;
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
		if (c->deadline_ns != 0 && (soonest < 0 || c->deadline_ns < soonest))
			soonest = c->deadline_ns;
	}
	if (soonest < 0)
		*timeout = -1;
	else if (soonest <= now)
		*timeout = 0;
	else
		*timeout = (int)((soonest - now + 999999) / 1000000);
	return n;
}

/* c ran past its timeout: ask its group to end as a cancel does (SIGTERM,
 * SIGKILL 2 s later), and remember why for its result. */
static void
child_time_out(struct child *c, int64_t now)
{
	kill(-c->pid, SIGTERM);
	c->deadline_ns = 0;
	c->timed_out = 1;
	if (c->kill_at_ns == 0 || c->kill_at_ns > now + TIMEOUT_GRACE_NS)
		c->kill_at_ns = now + TIMEOUT_GRACE_NS;
}

/* After a poll: fire due kill timers, and take every ended child out of the
 * list into *ended. */
static void
reaper_collect(struct kilnd_spawner *sp, nfds_t n, struct child **ended)
{
	struct child **cp = &sp->children, *c;
	int64_t now = kiln_mono_ns();
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
		if (c->deadline_ns != 0 && c->deadline_ns <= now)
			child_time_out(c, now);
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
	sp->sched_normal = sched_normal;
	sigemptyset(&sp->reset);
	sigaddset(&sp->reset, SIGPIPE);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 &&
		    ((sa.sa_flags & SA_SIGINFO) || sa.sa_handler != SIG_DFL))
			sigaddset(&sp->reset, sig);
	}
	if ((sp->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rv = kiln_err_from_errno(errno);
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

int
spawner_new_ops(struct kilnd_spawner **spp, const struct spawner_ops *ops)
{
	struct kilnd_spawner *sp;

	*spp = NULL;
	if ((sp = calloc(1, sizeof(*sp))) == NULL)
		return KILN_ENOMEM;
	sp->ops = *ops;
	sp->has_ops = 1;
	sp->efd = -1;
	*spp = sp;
	return 0;
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

/* What the child of spawn_one reads, and where it leaves the errno of a
 * failed exec: it shares the parent's memory until then. */
struct spawn_args {
	const struct kilnd_spawner *sp;
	const struct spawn_req *rq;
	int log_fd;          /* rq->log_fd, or a copy numbered 3 or above */
	pid_t parent;        /* the spawning process */
	volatile int err;    /* 0: the exec happened */
};

/* Stack of the child of spawn_one (on the spawning thread's stack: that
 * thread is suspended until the child execs or exits). What runs on it is
 * a few system-call wrappers, and glibc's closefrom fallback (1 KiB). */
#define SPAWN_STACK 32768

/* Set the child's stdin, stdout and stderr, close everything else, go to
 * cwd. 0, or an errno value. */
static int
child_fds(int log_fd, const char *cwd)
{
	int fd;

	/* 0 freed first: a daemon at its descriptor limit still gets it */
	close(0);
	if ((fd = open("/dev/null", O_RDONLY)) < 0)
		return errno;
	/* log_fd is 3 or above (spawn_one), so neither dup2 is a no-op that
	 * would keep close-on-exec, nor undone by another */
	if ((fd != 0 && (dup2(fd, 0) < 0 || close(fd) != 0)) ||
	    dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
		return errno;
	closefrom(3);
	if (cwd != NULL && chdir(cwd) != 0)
		return errno;
	return 0;
}

/* The child between clone and exec. It shares the parent's memory and
 * even its thread's TLS, with every signal blocked (spawn_one): only
 * async-signal-safe calls, no allocation, no lock, and no sanitizer
 * bookkeeping (an ASan frame would poison shadow memory that nothing
 * unpoisons, as this frame never returns). */
__attribute__((no_sanitize("address", "undefined"), noinline)) static int
child_main(void *arg)
{
	struct spawn_args *a = arg;
	const struct kilnd_spawner *sp = a->sp;
	struct sched_param prio0 = {0};
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int err;

	/* no handler of the daemon may run here, and an ignored signal
	 * would stay ignored in the tool */
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&sp->reset, sig) == 1)
			sigaction(sig, &dfl, NULL);
	if (setpgid(0, 0) != 0 ||
	    (sp->sched_normal && sched_setscheduler(0, SCHED_OTHER, &prio0) != 0)) {
		err = errno;
		goto fail;
	}
	/* Die with the daemon. The signal comes when the *thread* that
	 * cloned us ends, not the process: tools are started by the engine's
	 * workers (schedule.c work_start, from worker_main), which live until
	 * engine_free, and that kills every tool first. A daemon killed
	 * before this line has made us an orphan already: no signal will
	 * come, so go now. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
		err = errno;
		goto fail;
	}
	if (getppid() != a->parent)
		_exit(127);
	if ((err = child_fds(a->log_fd, a->rq->cwd)) != 0)
		goto fail;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(a->rq->path, (char *const *)a->rq->argv, (char *const *)a->rq->envp);
	err = errno;
fail:
	a->err = err != 0 ? err : EIO;
	_exit(127);
}

/* Start rq; *pid on 0. posix_spawn cannot set a parent-death signal, so
 * this is a clone(CLONE_VM | CLONE_VFORK) of its own, as glibc's: the
 * calling thread waits until the child has exec'd or exited, and an
 * exec's errno comes back through the memory they share. */
static int
spawn_one(struct kilnd_spawner *sp, const struct spawn_req *rq, pid_t *pid)
{
	_Alignas(16) char stack[SPAWN_STACK];
	struct spawn_args a = {sp, rq, rq->log_fd, getpid(), 0};
	struct stat st;
	sigset_t all, old;
	int tmp_fd = -1, rv = 0;
	pid_t p;

	/* Where the child does not share our memory (valgrind makes the clone
	 * a fork) an exec failure is only exit 127: checked first, a missing
	 * program is the same error everywhere. */
	if ((rv = find_check(rq->path)) != 0)
		return rv;
	if (rq->cwd != NULL && (stat(rq->cwd, &st) != 0 || !S_ISDIR(st.st_mode)))
		return KILN_ENOTFOUND;
	/* dup2 onto 1 and 2 would be undone by the open onto 0, or be a
	 * no-op that keeps close-on-exec: give the log a higher number. */
	if (a.log_fd >= 0 && a.log_fd <= 2) {
		if ((tmp_fd = fcntl(a.log_fd, F_DUPFD_CLOEXEC, 3)) < 0)
			return kiln_err_from_errno(errno);
		a.log_fd = tmp_fd;
	}
	/* The child starts with every signal blocked until its handlers are
	 * reset: none of ours may run in it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer (make tsan): a child sharing our memory runs TSan's
	 * interceptors (sigaction, close, execve) on this thread's own state
	 * and corrupts it: races were reported on a child's fields handed to
	 * the reaper under sp->mu (test_toolrun). A fork instead, as under
	 * valgrind; the stack above goes unused. */
	(void)stack;
	{
		/* the parent waits, as for a vfork, until the child has set
		 * its parent-death signal (its close of every fd, or its exec,
		 * ends this pipe): else a thread that ends at once would end
		 * before the child could ask to die with it */
		int gate[2], one;
		if (pipe2(gate, O_CLOEXEC) != 0)
			gate[0] = gate[1] = -1;
		if ((p = fork()) == 0)
			child_main(&a);
		/* its group now, as the child's own setpgid would make it
		 * (a kill of the group must not miss a child not yet there,
		 * when the gate could not be made) */
		if (p > 0)
			setpgid(p, p);
		if (gate[1] >= 0)
			close(gate[1]);
		while (gate[0] >= 0 && p > 0 && read(gate[0], &one, sizeof one) < 0 &&
		       errno == EINTR)
			;
		if (gate[0] >= 0)
			close(gate[0]);
	}
#else
	p = clone(child_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
#endif
	if (p < 0)
		rv = spawn_err(errno);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p > 0 && a.err != 0) {
		/* it never ran the tool: reap it here, nobody else knows it */
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		rv = spawn_err(a.err);
	} else if (p > 0) {
		*pid = p;
	}
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

	if (sp->has_ops)
		return sp->ops.start(sp->ops.arg, rq, done, arg, pidp);
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
	c->start_ns = kiln_mono_ns();
	if (rq->timeout_ms != 0)
		c->deadline_ns = c->start_ns + (int64_t)rq->timeout_ms * 1000000;
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

	if (sp->has_ops)
		return sp->ops.kill(sp->ops.arg, pid, grace_ms);
	pthread_mutex_lock(&sp->mu);
	for (c = sp->children; c != NULL; c = c->next) {
		if (c->pid != pid)
			continue;
		kill(-pid, grace_ms == 0 ? SIGKILL : SIGTERM);
		if (grace_ms != 0 && c->kill_at_ns == 0) {
			c->kill_at_ns = kiln_mono_ns() + (int64_t)grace_ms * 1000000;
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

	if (sp->has_ops)
		return 0;
	pthread_mutex_lock(&sp->mu);
	n = sp->nrunning;
	pthread_mutex_unlock(&sp->mu);
	return n;
}

void
spawner_free(struct kilnd_spawner *sp)
{
	struct child *c;

	if (sp == NULL)
		return;
	if (sp->has_ops) {
		if (sp->ops.stop != NULL)
			sp->ops.stop(sp->ops.arg);
		free(sp);
		return;
	}
	pthread_mutex_lock(&sp->mu);
	sp->closing = 1;
	for (c = sp->children; c != NULL; c = c->next)
		kill(-c->pid, SIGKILL);
	spawner_wake(sp);
	pthread_mutex_unlock(&sp->mu);
	pthread_join(sp->thread, NULL);
	pthread_mutex_destroy(&sp->mu);
	close(sp->efd);
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

/* Where spawn_find looked for prog, for a message that fits on a line: a
 * path as it is (a relative one in the project root), else PATH's folder count,
 * its first and last folder (a whole PATH is hundreds of characters). */
void
spawn_where_looked(const char *prog, const char *path, const char *root, char *buf,
                   size_t len)
{
	const char *last;
	size_t nfolders = 1, nfirst;

	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";   /* as spawn_find */
	last = strrchr(path, ':');
	nfirst = strcspn(path, ":");

	if (strchr(prog, '/') != NULL) {
		snprintf(buf, len, "at %.100s%s%.80s", prog[0] == '/' ? "" : root,
		         prog[0] == '/' ? "" : "/", prog);
		return;
	}
	for (const char *p = path; *p; p++)
		nfolders += *p == ':';
	if (last == NULL)
		snprintf(buf, len, "in PATH's one folder, %.80s", path);
	else
		snprintf(buf, len, "in PATH's %zu folders, %.*s ... %.60s", nfolders,
		         (int)(nfirst < 60 ? nfirst : 60), path, last + 1);
}
