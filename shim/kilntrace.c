/* kilntrace.c — libkilntrace.so, the file-access tracer kilnd preloads
 * (LD_PRELOAD) into every build tool and its child processes.
 *
 * It wraps the libc entry points tools use to look at files (open*,
 * fopen*, the stat family, access, opendir, readlink, realpath, exec*) and
 * to change them (creat, rename, unlink, mkdir, truncate, link, symlink),
 * calls the real function (dlsym RTLD_NEXT) and appends one record per call
 * to the file named by KILN_TRACE_FILE. Failed attempts count: a lookup
 * that ends in ENOENT or ENOTDIR is a "missing file" record, because
 * creating that file later may change what the tool does. The daemon reads
 * the file when the tool has exited (daemon/engine/trace.c).
 *
 * Record format (version 2): UTF-8 lines, one record each, a one-letter
 * kind, a space, the rest. Paths are absolute (relative ones resolved
 * against the working folder or the dirfd, via /proc/self/fd), not
 * canonicalized (`..` and symlinks stay), with `\` written `\\` and a
 * newline `\n`.
 *
 *   H <pid> <ppid> <exe>   a process image started with the shim loaded
 *                          (its constructor: a static binary never writes
 *                          one); exe as it was exec'd (AT_EXECFN, maybe
 *                          relative), for people: the daemon ignores it
 *   R <path>               opened for reading (open, fopen "r", exec'd)
 *   S <path>               stat'ed, access'ed, readlink'ed: it exists
 *   M <path>               looked up and missing (ENOENT, ENOTDIR)
 *   D <path>               opened as a directory to list (opendir,
 *                          fdopendir, scandir)
 *   W <path>               changed: opened for writing, created,
 *                          truncated, renamed (both names), unlinked,
 *                          mkdir'ed, rmdir'ed, linked (the new name)
 *   F <pid> <ppid>         a process started without a new image: a fork
 *                          child (its atfork handler), or a posix_spawn
 *                          child (written by the parent, then its X)
 *   X <pid> <path>         pid is about to exec path (posix_spawn: pid is
 *                          the child, written after it started)
 *   x <pid>                that exec failed
 *   E <pid>                the process image ended normally (destructor,
 *                          exit, _exit, _Exit): all its records are
 *                          written before this line
 *
 * Only calls that worked are recorded, except that failed lookups are M.
 * Every H and F is balanced by an E or a successful X of the same pid:
 * one that is not belongs to a process killed by a signal (SIGPIPE in
 * `grep -r x src | head -1`, SIGKILL, abort), whose buffered records are
 * lost, so the reader counts such a run as untraced. vfork is made a
 * fork (dash runs every command through vfork): its child writes its F,
 * and its records no longer go into the parent's buffer it shares.
 * To change the format, change trace.c's reader in the same commit
 * and bump the version here.
 *
 * Cost: records go into one per-process buffer (a mutex; no malloc) that
 * is written with one write(2) to the O_APPEND trace file when it fills,
 * at exit (the destructor, with the E line), at _exit, and before exec,
 * fork and posix_spawn (records made after the destructor, by other
 * libraries' destructors, are written one by one), so records of
 * different processes never interleave inside a line and a child's
 * records follow its parent's earlier ones.
 *
 * The trace fd is kept at FD_FLOOR (900) or above (lower when RLIMIT_NOFILE
 * is small), out of the way of the low fds tools reuse, and before each
 * write it is fstat'ed: when the tool closed it (closefrom, close_range)
 * or put another file there (dup2), the trace file is opened again, so no
 * record lands in a tool's file and none is dropped. close and dup2 are
 * not wrapped: the check costs one fstat per write(2), not per call.
 *
 * Threads: every wrapper may run on any thread; the buffer, the cached
 * working folder and the fd are guarded by mu. A wrapper entered again on
 * the same thread while it holds mu (a signal handler) calls the real
 * function without recording, and fork, exec and _exit there skip their
 * flush (taking mu again would deadlock): that process's buffered records
 * are lost and it writes no E, so its run counts as untraced.
 *
 * Not covered: libc's internal calls that do not go through the PLT
 * (glob(), ftw(), dlopen, system()'s own spawn — the shell it runs is
 * traced), raw syscalls, fexecve/execveat, static binaries.
 *
 * Built without sanitizers, -fPIC -shared: it is loaded into sanitized and
 * unsanitized programs alike. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define BUF_SIZE 65536
#define FD_FLOOR 900   /* the trace fd is moved to this one or above */

extern char **environ;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int trace_fd = -1;       /* -1: not opened yet; -2: cannot */
static dev_t trace_dev;         /* what trace_fd was opened on */
static ino_t trace_ino;
static char trace_path[PATH_MAX];
static int ended;               /* E written: records go out at once */
static char buf[BUF_SIZE];
static size_t buflen;
static char cwd[PATH_MAX];
static int cwd_ok;
/* The environment to give exec'd programs that dropped it. */
static char env_preload[PATH_MAX + 16];
static char env_file[PATH_MAX + 24];
static __thread int busy __attribute__((tls_model("initial-exec")));

/* ---- the real functions ------------------------------------------------ */

#define REAL(name) \
	static __typeof__(name) *real_##name; \
	if (real_##name == NULL) \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* ---- records ------------------------------------------------------------ */

/* Whether p is NULL, asked so that the compiler cannot answer "no" from
 * libc's nonnull declarations: tools do pass NULL (statx and fstatat with
 * AT_EMPTY_PATH, valid since Linux 6.11; EFAULT elsewhere). */
static inline int
is_null(const char *p)
{
	__asm__("" : "+r"(p));
	return p == NULL;
}

/* Open the trace file again, O_APPEND, and move the fd high (mu held).
 * A tool owns the low fds: it may close, dup2 onto or reopen any of them
 * (bash's `exec 3>out`, closefrom(3)), and a record written to an fd it
 * reused would land in its own file. Returns 0 or -1: not tracing. */
static int
fd_open(void)
{
	struct rlimit rl;
	struct stat st;
	int fd, hi, floor = FD_FLOOR;

	fd = (int)syscall(SYS_openat, AT_FDCWD, trace_path,
	                  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	/* FD_FLOOR is below the usual soft limit; when it is not (EINVAL:
	 * ulimit -n 256), 64 below the limit, or half of a tiny one */
	hi = fd < floor ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
	if (hi < 0 && fd < floor && errno == EINVAL &&
	    getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		floor = rl.rlim_cur > 128 ? (int)rl.rlim_cur - 64 : (int)rl.rlim_cur / 2;
		hi = fd < floor ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
	}
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	trace_fd = fd;
	trace_dev = st.st_dev;
	trace_ino = st.st_ino;
	return 0;
}

/* Open the trace file on first use (mu held). 0 or -1: not tracing. */
static int
fd_ready(void)
{
	const char *f;

	if (trace_fd >= 0)
		return 0;
	if (trace_fd == -2)
		return -1;
	if (trace_path[0] == '\0') {   /* a constructor before ours traced */
		if ((f = getenv("KILN_TRACE_FILE")) == NULL || f[0] == '\0' ||
		    strlen(f) >= sizeof trace_path) {
			trace_fd = -2;
			return -1;
		}
		strcpy(trace_path, f);
	}
	if (fd_open() != 0) {
		trace_fd = -2;
		return -1;
	}
	return 0;
}

/* Before a write (mu held): the fd must still be the trace file; the tool
 * may have closed it or put another file in its place. Then it is opened
 * again (the other file is the tool's: left alone). Not opened yet: it is
 * opened (and fstat'ed) now, for this write, with nothing to check. */
static int
fd_check(void)
{
	struct stat st;

	if (trace_fd < 0)
		return fd_ready();
	if (fstat(trace_fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino)
		return 0;
	if (fd_open() != 0) {
		trace_fd = -2;
		return -1;
	}
	return 0;
}

static void
raw_write(const char *p, size_t n)
{
	if (fd_check() != 0)
		return;
	while (n > 0) {
		ssize_t w = write(trace_fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void
flush_locked(void)
{
	if (buflen > 0 && trace_fd != -2)
		raw_write(buf, buflen);
	buflen = 0;
}

static void
flush(void)
{
	int saved = errno;

	if (busy)   /* a signal handler while this thread holds mu */
		return;
	busy++;
	pthread_mutex_lock(&mu);
	flush_locked();
	pthread_mutex_unlock(&mu);
	busy--;
	errno = saved;
}

/* Append s to the line being built, escaped. */
static size_t
put_escaped(char *line, size_t at, size_t cap, const char *s)
{
	for (; *s && at + 2 < cap; s++) {
		if (*s == '\\' || *s == '\n') {
			line[at++] = '\\';
			line[at++] = *s == '\\' ? '\\' : 'n';
		} else {
			line[at++] = *s;
		}
	}
	return at;
}

/* The absolute form of path as seen from dirfd (mu held), into out. */
static int
absolute(int dirfd, const char *path, char *out, size_t len)
{
	char base[PATH_MAX];
	size_t bl, pl;

	if (path[0] == '/') {
		if (strlen(path) + 1 > len)
			return -1;
		strcpy(out, path);
		return 0;
	}
	if (dirfd == AT_FDCWD) {
		if (!cwd_ok) {
			if (syscall(SYS_getcwd, cwd, sizeof cwd) < 0)
				return -1;
			cwd_ok = 1;
		}
		strcpy(base, cwd);
	} else {
		char link[64];
		ssize_t n;
		snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
		n = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
		if (n <= 0)
			return -1;
		base[n] = '\0';
	}
	bl = strlen(base);
	if (path[0] == '\0') {   /* AT_EMPTY_PATH: the dirfd itself */
		if (bl + 1 > len)
			return -1;
		memcpy(out, base, bl + 1);
		return 0;
	}
	pl = strlen(path);
	if (bl + 1 + pl + 1 > len)
		return -1;
	memcpy(out, base, bl);
	if (bl > 1)
		out[bl++] = '/';
	memcpy(out + bl, path, pl + 1);
	return 0;
}

/* Record kind and path (relative to dirfd); errno is kept. */
static void
rec_at(char kind, int dirfd, const char *path)
{
	char abs[PATH_MAX];
	size_t n, worst;
	int saved = errno;

	if (busy || is_null(path))
		return;
	busy++;
	pthread_mutex_lock(&mu);
	if (fd_ready() == 0 && absolute(dirfd, path, abs, sizeof abs) == 0) {
		n = strlen(abs);
		worst = 2 + 2 * n + 1;
		if (buflen + worst > sizeof buf)
			flush_locked();
		buf[buflen] = kind;
		buf[buflen + 1] = ' ';
		if (strpbrk(abs, "\\\n") == NULL) {   /* the usual case: as it is */
			memcpy(buf + buflen + 2, abs, n);
			n += buflen + 2;
		} else {
			n = put_escaped(buf, buflen + 2, sizeof buf, abs);
		}
		buf[n++] = '\n';
		buflen = n;
		if (ended)   /* a destructor after ours: no flush is coming */
			flush_locked();
	}
	pthread_mutex_unlock(&mu);
	busy--;
	errno = saved;
}

static void
rec(char kind, const char *path)
{
	rec_at(kind, AT_FDCWD, path);
}

/* A lookup's outcome: found as kind, or missing. */
static void
rec_result(char kind, int dirfd, const char *path, int failed)
{
	if (!failed)
		rec_at(kind, dirfd, path);
	else if (errno == ENOENT || errno == ENOTDIR)
		rec_at('M', dirfd, path);
}

/* The path an open fd names (for fdopendir). */
static void
rec_fd(char kind, int fd)
{
	rec_at(kind, fd, "");
}

/* H/F/X/x/E lines, written at once after the buffered records (one
 * write(2) when they fit). */
static void
rec_now(const char *line)
{
	size_t len = strlen(line);
	int saved = errno;

	if (busy)
		return;
	busy++;
	pthread_mutex_lock(&mu);
	if (trace_fd != -2) {   /* (the write opens the trace file) */
		if (buflen + len <= sizeof buf) {
			memcpy(buf + buflen, line, len);
			buflen += len;
			flush_locked();
		} else {
			flush_locked();
			raw_write(line, len);
		}
	}
	pthread_mutex_unlock(&mu);
	busy--;
	errno = saved;
}

/* pid is about to run path: this process exec'ing (X), or a child
 * posix_spawn started (spawned: F then X, the child's start and exec). */
static void
rec_exec(pid_t pid, const char *path, int spawned)
{
	char line[PATH_MAX * 2 + 80], abs[PATH_MAX];
	size_t n;

	if (busy || is_null(path))
		return;
	busy++;
	pthread_mutex_lock(&mu);
	if (absolute(AT_FDCWD, path, abs, sizeof abs) != 0)
		snprintf(abs, sizeof abs, "%s", path);
	pthread_mutex_unlock(&mu);
	busy--;
	if (spawned)
		n = (size_t)snprintf(line, 80, "F %ld %ld\nX %ld ", (long)pid,
		                     (long)getpid(), (long)pid);
	else
		n = (size_t)snprintf(line, 40, "X %ld ", (long)pid);
	n = put_escaped(line, n, sizeof line, abs);
	line[n++] = '\n';
	line[n] = '\0';
	rec_now(line);
}

static void
rec_exec_failed(pid_t pid)
{
	char line[40];

	snprintf(line, sizeof line, "x %ld\n", (long)pid);
	rec_now(line);
}

/* ---- process life ------------------------------------------------------ */

/* fork from a signal handler that interrupted this thread inside mu:
 * neither lock nor flush (the child's copy may be half a record). */
static __thread int fork_nolock __attribute__((tls_model("initial-exec")));

/* An H (exe given) or F line for this process. */
static void
rec_start(char kind, const char *exe)
{
	char line[PATH_MAX * 2 + 64];
	size_t at;

	at = (size_t)snprintf(line, 64, "%c %ld %ld%s", kind, (long)getpid(),
	                      (long)getppid(), exe ? " " : "");
	if (exe != NULL)
		at = put_escaped(line, at, sizeof line - 1, exe);
	line[at++] = '\n';
	line[at] = '\0';
	rec_now(line);
}

static void
atfork_prepare(void)
{
	if (busy) {
		fork_nolock = 1;
		return;
	}
	pthread_mutex_lock(&mu);
	flush_locked();
}

static void
atfork_parent(void)
{
	if (fork_nolock) {
		fork_nolock = 0;
		return;
	}
	pthread_mutex_unlock(&mu);
}

static void
atfork_child(void)
{
	if (fork_nolock) {
		fork_nolock = 0;
		return;
	}
	buflen = 0;
	ended = 0;
	pthread_mutex_unlock(&mu);
	rec_start('F', NULL);
}

/* The last record of a process image: every record it made is written. */
static void
rec_end(void)
{
	char line[40];

	snprintf(line, sizeof line, "E %ld\n", (long)getpid());
	rec_now(line);
	ended = 1;
}

__attribute__((constructor)) static void
trace_init(void)
{
	const char *p = getenv("LD_PRELOAD"), *f = getenv("KILN_TRACE_FILE");
	/* the path it was exec'd by: for people reading a trace (the daemon
	 * does not), so not worth /proc/self/exe's system call */
	const char *exe = (const char *)getauxval(AT_EXECFN);

	if (p != NULL)
		snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", p);
	if (f != NULL) {
		snprintf(env_file, sizeof env_file, "KILN_TRACE_FILE=%s", f);
		if (strlen(f) < sizeof trace_path)
			strcpy(trace_path, f);
	}
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	rec_start('H', exe != NULL ? exe : "");
}

__attribute__((destructor)) static void
trace_fini(void)
{
	rec_end();
}

EXPORT void
_exit(int status)
{
	REAL(_exit);
	rec_end();
	real__exit(status);
	__builtin_unreachable();
}

EXPORT void
_Exit(int status)
{
	REAL(_Exit);
	rec_end();
	real__Exit(status);
	__builtin_unreachable();
}

/* A vfork child shares the parent's memory (the buffer, mu) and runs no
 * atfork handler, so it could neither record safely nor say F: a fork
 * does what vfork promises, a little slower. */
EXPORT pid_t
vfork(void)
{
	return fork();
}

/* ---- open and friends -------------------------------------------------- */

/* The kind of record an open with these flags makes when it worked. */
static char
open_kind(int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)))
		return 'W';
	if ((flags & O_TMPFILE) == O_TMPFILE)
		return 'W';
	/* open(O_DIRECTORY) is more often a dirfd for openat than a listing:
	 * listings are recorded by opendir and fdopendir */
	return 'R';
}

static int
open_done(int dirfd, const char *path, int flags, int fd)
{
	char kind = open_kind(flags);

	if (fd >= 0)
		rec_at(kind, dirfd, path);
	else if (kind != 'W')
		rec_result('R', dirfd, path, 1);
	return fd;
}

#define OPEN_MODE(flags, mode) \
	do { \
		/* glibc's __OPEN_NEEDS_MODE: O_TMPFILE includes \
		 * O_DIRECTORY, which alone passes no mode */ \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
			va_list ap; \
			va_start(ap, flags); \
			mode = va_arg(ap, mode_t); \
			va_end(ap); \
		} \
	} while (0)

EXPORT int
open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	REAL(open);
	OPEN_MODE(flags, mode);
	return open_done(AT_FDCWD, path, flags, real_open(path, flags, mode));
}

EXPORT int
open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	REAL(open64);
	OPEN_MODE(flags, mode);
	return open_done(AT_FDCWD, path, flags, real_open64(path, flags, mode));
}

EXPORT int
openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	REAL(openat);
	OPEN_MODE(flags, mode);
	return open_done(dirfd, path, flags, real_openat(dirfd, path, flags, mode));
}

EXPORT int
openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	REAL(openat64);
	OPEN_MODE(flags, mode);
	return open_done(dirfd, path, flags, real_openat64(dirfd, path, flags, mode));
}

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int
__open_2(const char *path, int flags)
{
	REAL(__open_2);
	return open_done(AT_FDCWD, path, flags, real___open_2(path, flags));
}

EXPORT int
__open64_2(const char *path, int flags)
{
	REAL(__open64_2);
	return open_done(AT_FDCWD, path, flags, real___open64_2(path, flags));
}

EXPORT int
__openat_2(int dirfd, const char *path, int flags)
{
	REAL(__openat_2);
	return open_done(dirfd, path, flags, real___openat_2(dirfd, path, flags));
}

EXPORT int
__openat64_2(int dirfd, const char *path, int flags)
{
	REAL(__openat64_2);
	return open_done(dirfd, path, flags, real___openat64_2(dirfd, path, flags));
}

EXPORT int
creat(const char *path, mode_t mode)
{
	REAL(creat);
	return open_done(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, real_creat(path, mode));
}

EXPORT int
creat64(const char *path, mode_t mode)
{
	REAL(creat64);
	return open_done(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, real_creat64(path, mode));
}

static FILE *
fopen_done(const char *path, const char *mode, FILE *f)
{
	int w = mode != NULL && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));

	if (f != NULL)
		rec(w ? 'W' : 'R', path);
	else if (!w)
		rec_result('R', AT_FDCWD, path, 1);
	return f;
}

EXPORT FILE *
fopen(const char *path, const char *mode)
{
	REAL(fopen);
	return fopen_done(path, mode, real_fopen(path, mode));
}

EXPORT FILE *
fopen64(const char *path, const char *mode)
{
	REAL(fopen64);
	return fopen_done(path, mode, real_fopen64(path, mode));
}

EXPORT FILE *
freopen(const char *path, const char *mode, FILE *s)
{
	REAL(freopen);
	return fopen_done(path, mode, real_freopen(path, mode, s));
}

EXPORT FILE *
freopen64(const char *path, const char *mode, FILE *s)
{
	REAL(freopen64);
	return fopen_done(path, mode, real_freopen64(path, mode, s));
}

/* ---- the stat family, access, readlink, realpath ------------------------ */

#define LOOKUP(dirfd, path, call) \
	do { \
		int r_ = (call); \
		rec_result('S', (dirfd), (path), r_ != 0); \
		return r_; \
	} while (0)

EXPORT int
stat(const char *path, struct stat *st)
{
	REAL(stat);
	LOOKUP(AT_FDCWD, path, real_stat(path, st));
}

EXPORT int
lstat(const char *path, struct stat *st)
{
	REAL(lstat);
	LOOKUP(AT_FDCWD, path, real_lstat(path, st));
}

EXPORT int
stat64(const char *path, struct stat64 *st)
{
	REAL(stat64);
	LOOKUP(AT_FDCWD, path, real_stat64(path, st));
}

EXPORT int
lstat64(const char *path, struct stat64 *st)
{
	REAL(lstat64);
	LOOKUP(AT_FDCWD, path, real_lstat64(path, st));
}

/* fstatat with AT_EMPTY_PATH and "" is an fstat: no path looked up; a
 * NULL path is the same since Linux 6.11. */
EXPORT int
fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	REAL(fstatat);
	if (is_null(path) || path[0] == '\0')
		return real_fstatat(dirfd, path, st, flags);
	LOOKUP(dirfd, path, real_fstatat(dirfd, path, st, flags));
}

EXPORT int
fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	REAL(fstatat64);
	if (is_null(path) || path[0] == '\0')
		return real_fstatat64(dirfd, path, st, flags);
	LOOKUP(dirfd, path, real_fstatat64(dirfd, path, st, flags));
}

EXPORT int
statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	REAL(statx);
	if (is_null(path) || path[0] == '\0')
		return real_statx(dirfd, path, flags, mask, st);
	LOOKUP(dirfd, path, real_statx(dirfd, path, flags, mask, st));
}

/* The pre-2.33 glibc entry points older binaries still call. */
int __xstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

EXPORT int
__xstat(int ver, const char *path, struct stat *st)
{
	REAL(__xstat);
	if (real___xstat == NULL)
		return stat(path, st);
	LOOKUP(AT_FDCWD, path, real___xstat(ver, path, st));
}

EXPORT int
__lxstat(int ver, const char *path, struct stat *st)
{
	REAL(__lxstat);
	if (real___lxstat == NULL)
		return lstat(path, st);
	LOOKUP(AT_FDCWD, path, real___lxstat(ver, path, st));
}

EXPORT int
__xstat64(int ver, const char *path, struct stat64 *st)
{
	REAL(__xstat64);
	if (real___xstat64 == NULL)
		return stat64(path, st);
	LOOKUP(AT_FDCWD, path, real___xstat64(ver, path, st));
}

EXPORT int
__lxstat64(int ver, const char *path, struct stat64 *st)
{
	REAL(__lxstat64);
	if (real___lxstat64 == NULL)
		return lstat64(path, st);
	LOOKUP(AT_FDCWD, path, real___lxstat64(ver, path, st));
}

EXPORT int
__fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	REAL(__fxstatat);
	if (real___fxstatat == NULL)
		return fstatat(dirfd, path, st, flags);
	LOOKUP(dirfd, path, real___fxstatat(ver, dirfd, path, st, flags));
}

EXPORT int
__fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	REAL(__fxstatat64);
	if (real___fxstatat64 == NULL)
		return fstatat64(dirfd, path, st, flags);
	LOOKUP(dirfd, path, real___fxstatat64(ver, dirfd, path, st, flags));
}

EXPORT int
access(const char *path, int mode)
{
	REAL(access);
	LOOKUP(AT_FDCWD, path, real_access(path, mode));
}

EXPORT int
faccessat(int dirfd, const char *path, int mode, int flags)
{
	REAL(faccessat);
	LOOKUP(dirfd, path, real_faccessat(dirfd, path, mode, flags));
}

EXPORT int
euidaccess(const char *path, int mode)
{
	REAL(euidaccess);
	LOOKUP(AT_FDCWD, path, real_euidaccess(path, mode));
}

EXPORT int
eaccess(const char *path, int mode)
{
	REAL(eaccess);
	LOOKUP(AT_FDCWD, path, real_eaccess(path, mode));
}

EXPORT ssize_t
readlink(const char *path, char *out, size_t len)
{
	ssize_t r;
	REAL(readlink);
	r = real_readlink(path, out, len);
	rec_result('S', AT_FDCWD, path, r < 0);
	return r;
}

EXPORT ssize_t
readlinkat(int dirfd, const char *path, char *out, size_t len)
{
	ssize_t r;
	REAL(readlinkat);
	r = real_readlinkat(dirfd, path, out, len);
	rec_result('S', dirfd, path, r < 0);
	return r;
}

EXPORT char *
realpath(const char *path, char *out)
{
	char *r;
	REAL(realpath);
	r = real_realpath(path, out);
	rec_result('S', AT_FDCWD, path, r == NULL);
	return r;
}

EXPORT char *
canonicalize_file_name(const char *path)
{
	char *r;
	REAL(canonicalize_file_name);
	r = real_canonicalize_file_name(path);
	rec_result('S', AT_FDCWD, path, r == NULL);
	return r;
}

/* ---- directories -------------------------------------------------------- */

EXPORT DIR *
opendir(const char *path)
{
	DIR *d;
	REAL(opendir);
	d = real_opendir(path);
	rec_result('D', AT_FDCWD, path, d == NULL);
	return d;
}

EXPORT DIR *
fdopendir(int fd)
{
	DIR *d;
	REAL(fdopendir);
	d = real_fdopendir(fd);
	if (d != NULL)
		rec_fd('D', fd);
	return d;
}

EXPORT int
scandir(const char *path, struct dirent ***list,
        int (*sel)(const struct dirent *),
        int (*cmp)(const struct dirent **, const struct dirent **))
{
	int r;
	REAL(scandir);
	r = real_scandir(path, list, sel, cmp);
	rec_result('D', AT_FDCWD, path, r < 0);
	return r;
}

EXPORT int
chdir(const char *path)
{
	int r;
	REAL(chdir);
	if (busy) {   /* a signal handler inside mu: leave the cache stale */
		r = real_chdir(path);
		cwd_ok = 0;
		return r;
	}
	busy++;
	pthread_mutex_lock(&mu);
	r = real_chdir(path);
	cwd_ok = 0;
	pthread_mutex_unlock(&mu);
	busy--;
	return r;
}

EXPORT int
fchdir(int fd)
{
	int r;
	REAL(fchdir);
	if (busy) {   /* a signal handler inside mu: leave the cache stale */
		r = real_fchdir(fd);
		cwd_ok = 0;
		return r;
	}
	busy++;
	pthread_mutex_lock(&mu);
	r = real_fchdir(fd);
	cwd_ok = 0;
	pthread_mutex_unlock(&mu);
	busy--;
	return r;
}

/* ---- changes ------------------------------------------------------------ */

#define CHANGE(dirfd, path, call) \
	do { \
		int r_ = (call); \
		if (r_ == 0) \
			rec_at('W', (dirfd), (path)); \
		return r_; \
	} while (0)

EXPORT int
rename(const char *from, const char *to)
{
	int r;
	REAL(rename);
	if ((r = real_rename(from, to)) == 0) {
		rec('W', from);
		rec('W', to);
	}
	return r;
}

EXPORT int
renameat(int fromfd, const char *from, int tofd, const char *to)
{
	int r;
	REAL(renameat);
	if ((r = real_renameat(fromfd, from, tofd, to)) == 0) {
		rec_at('W', fromfd, from);
		rec_at('W', tofd, to);
	}
	return r;
}

EXPORT int
renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
	int r;
	REAL(renameat2);
	if ((r = real_renameat2(fromfd, from, tofd, to, flags)) == 0) {
		rec_at('W', fromfd, from);
		rec_at('W', tofd, to);
	}
	return r;
}

EXPORT int
unlink(const char *path)
{
	REAL(unlink);
	CHANGE(AT_FDCWD, path, real_unlink(path));
}

EXPORT int
unlinkat(int dirfd, const char *path, int flags)
{
	REAL(unlinkat);
	CHANGE(dirfd, path, real_unlinkat(dirfd, path, flags));
}

EXPORT int
remove(const char *path)
{
	REAL(remove);
	CHANGE(AT_FDCWD, path, real_remove(path));
}

EXPORT int
rmdir(const char *path)
{
	REAL(rmdir);
	CHANGE(AT_FDCWD, path, real_rmdir(path));
}

EXPORT int
mkdir(const char *path, mode_t mode)
{
	REAL(mkdir);
	CHANGE(AT_FDCWD, path, real_mkdir(path, mode));
}

EXPORT int
mkdirat(int dirfd, const char *path, mode_t mode)
{
	REAL(mkdirat);
	CHANGE(dirfd, path, real_mkdirat(dirfd, path, mode));
}

EXPORT int
truncate(const char *path, off_t len)
{
	REAL(truncate);
	CHANGE(AT_FDCWD, path, real_truncate(path, len));
}

EXPORT int
truncate64(const char *path, off64_t len)
{
	REAL(truncate64);
	CHANGE(AT_FDCWD, path, real_truncate64(path, len));
}

EXPORT int
link(const char *from, const char *to)
{
	REAL(link);
	CHANGE(AT_FDCWD, to, real_link(from, to));
}

EXPORT int
linkat(int fromfd, const char *from, int tofd, const char *to, int flags)
{
	REAL(linkat);
	CHANGE(tofd, to, real_linkat(fromfd, from, tofd, to, flags));
}

EXPORT int
symlink(const char *target, const char *path)
{
	REAL(symlink);
	CHANGE(AT_FDCWD, path, real_symlink(target, path));
}

EXPORT int
symlinkat(const char *target, int dirfd, const char *path)
{
	REAL(symlinkat);
	CHANGE(dirfd, path, real_symlinkat(target, dirfd, path));
}

/* ---- exec: children stay traced ------------------------------------------ */

/* envp with LD_PRELOAD and KILN_TRACE_FILE put back when a program
 * dropped them, into out (cap entries). Returns out, or envp unchanged. */
static char *const *
env_fixed(char *const *envp, char **out, size_t cap)
{
	int has_pre = 0, has_file = 0;
	size_t n = 0;

	if (envp == NULL || env_preload[0] == '\0' || env_file[0] == '\0')
		return envp;
	for (; envp[n] != NULL; n++) {
		if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
			has_pre = 1;
		else if (strncmp(envp[n], "KILN_TRACE_FILE=", 16) == 0)
			has_file = 1;
	}
	if ((has_pre && has_file) || n + 3 > cap)
		return envp;
	memcpy(out, envp, n * sizeof *out);
	if (!has_pre)
		out[n++] = env_preload;
	if (!has_file)
		out[n++] = env_file;
	out[n] = NULL;
	return out;
}

#define ENV_CAP 4096

EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	char *fixed[ENV_CAP];
	int r;
	REAL(execve);
	rec('R', path);
	rec_exec(getpid(), path, 0);
	r = real_execve(path, argv, env_fixed(envp, fixed, ENV_CAP));
	rec_exec_failed(getpid());
	return r;
}

EXPORT int
execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

/* A file execve refused as no program (ENOEXEC): run it with sh, as
 * execvp does. */
static void
exec_sh(const char *file, char *const argv[], char *const envp[])
{
	size_t na = 0;

	while (argv[na] != NULL)
		na++;
	char *sv[na + 2];
	sv[0] = (char *)"/bin/sh";
	sv[1] = (char *)file;
	for (size_t i = 1; i <= na; i++)
		sv[i + 1] = argv[i];
	execve("/bin/sh", sv, envp);
}

/* execvp's PATH search, so that each try goes through execve above, as
 * execvp(3) says: PATH unset is "/bin:/usr/bin", an empty entry is the
 * working folder, EACCES is remembered and returned when nothing else is
 * found, and errors other than a missing file end the search. */
EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	const char *p = getenv("PATH"), *e;
	char full[PATH_MAX];
	size_t fl;
	int eacces = 0;

	if (is_null(file))   /* the kernel's EFAULT */
		return execve(file, argv, envp);
	if (file[0] == '\0') {
		errno = ENOENT;
		return -1;
	}
	if (strchr(file, '/') != NULL) {
		if (execve(file, argv, envp) != 0 && errno == ENOEXEC)
			exec_sh(file, argv, envp);
		return -1;
	}
	if ((fl = strlen(file)) > NAME_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (p == NULL)
		p = "/bin:/usr/bin";
	for (;; p = e + 1) {
		size_t dl;
		e = strchrnul(p, ':');
		dl = (size_t)(e - p);
		if (dl + 1 + fl + 1 > sizeof full) {
			errno = ENAMETOOLONG;
		} else {
			memcpy(full, p, dl);
			full[dl] = '/';
			memcpy(full + (dl ? dl + 1 : 0), file, fl + 1);
			/* most folders on PATH have no such file: one cheap
			 * look, not an execve with its records */
			if (syscall(SYS_faccessat, AT_FDCWD, full, F_OK) == 0 &&
			    execve(full, argv, envp) != 0 && errno == ENOEXEC)
				exec_sh(full, argv, envp);
		}
		switch (errno) {
		case EACCES:
			eacces = 1;
			break;
		case ENOENT: case ENOTDIR: case ESTALE: case ENODEV:
		case ETIMEDOUT: case ENAMETOOLONG:
			break;
		default:
			return -1;
		}
		if (*e == '\0')
			break;
	}
	errno = eacces ? EACCES : ENOENT;
	return -1;
}

EXPORT int
execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* The execl family: count the arguments up to the NULL, gather them
 * into an array that size (as glibc does), then as above. */
static size_t
args_count(va_list *ap)
{
	size_t n = 1;   /* the first, a named parameter */

	while (va_arg(*ap, char *) != NULL)
		n++;
	return n;
}

static void
args_gather(const char *first, va_list *ap, char **av, size_t n)
{
	av[0] = (char *)first;
	for (size_t i = 1; i < n; i++)
		av[i] = va_arg(*ap, char *);
	(void)va_arg(*ap, char *);   /* the NULL: execle's envp follows */
	av[n] = NULL;
}

EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = args_count(&ap);
	va_end(ap);
	char *av[n + 1];
	va_start(ap, arg);
	args_gather(arg, &ap, av, n);
	va_end(ap);
	return execve(path, av, environ);
}

EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = args_count(&ap);
	va_end(ap);
	char *av[n + 1];
	va_start(ap, arg);
	args_gather(arg, &ap, av, n);
	va_end(ap);
	return execvpe(file, av, environ);
}

EXPORT int
execle(const char *path, const char *arg, ...)
{
	char **envp;
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = args_count(&ap);
	va_end(ap);
	char *av[n + 1];
	va_start(ap, arg);
	args_gather(arg, &ap, av, n);
	envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, av, envp);
}

static int
spawn_done(int r, pid_t *pid, const char *path)
{
	if (r == 0 && pid != NULL)
		rec_exec(*pid, path, 1);
	return r;
}

EXPORT int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	char *fixed[ENV_CAP];
	REAL(posix_spawn);
	rec('R', path);
	flush();
	return spawn_done(real_posix_spawn(pid, path, fa, attr, argv,
	                                   env_fixed(envp, fixed, ENV_CAP)), pid, path);
}

EXPORT int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
             const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	char *fixed[ENV_CAP];
	REAL(posix_spawnp);
	flush();
	return spawn_done(real_posix_spawnp(pid, file, fa, attr, argv,
	                                    env_fixed(envp, fixed, ENV_CAP)), pid, file);
}
