/* tool_spawn.h — running build tools.
 *
 * A tool runs by argv (never a shell unless the argv itself is /bin/sh
 * -c ...), in its own process group, with stdin from /dev/null and stdout
 * and stderr both appended to one log file. The daemon's blocked signals
 * are unblocked and its signal dispositions reset in the child, and no
 * descriptor of the daemon leaks into it (closefrom). A tool gets SIGKILL
 * when the thread that started it ends (PR_SET_PDEATHSIG): a daemon killed
 * with kill -9 takes its tools with it (not what they started themselves:
 * see orphans.h). Start tools only from threads that outlive them.
 *
 * A running tool holds no thread: one reaper thread per spawner waits on
 * every child's pidfd and calls the caller's done function when the child
 * ends. That is what lets a step wait for its tool (or later suspend on
 * `kiln need`) without holding a worker. When the tool itself ends, what
 * is left of its process group (background processes it started) is
 * SIGKILLed before it is reaped: nothing of a step outlives it.
 *
 * Threads: every function may be called from any thread; done callbacks run
 * on the reaper thread, one at a time, and must not block for long. */
#ifndef KILND_TOOL_SPAWN_H
#define KILND_TOOL_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct spawn_req {
	const char *path;          /* the program, as found by spawn_find */
	const char *const *argv;   /* argv[0] is shown to the tool as is */
	const char *const *envp;   /* the tool's whole environment */
	const char *cwd;           /* the folder it runs in (NULL: the daemon's) */
	int log_fd;                /* stdout and stderr go here */
	/* After this long the group gets SIGTERM, then SIGKILL 2 s later
	 * (0: no limit); the result says timed_out. */
	uint32_t timeout_ms;
};

struct spawn_result {
	int exited;         /* 1: exited, status = exit code; 0: signalled */
	int status;         /* exit code, or the signal number */
	int64_t wall_ns;    /* from spawn to reaped */
	int64_t cpu_ns;     /* user + system time of the child and its waited-for
	                       children */
	int64_t maxrss_kb;
	int timed_out;      /* killed for running past rq->timeout_ms */
};

typedef void (*spawn_done_fn)(void *arg, const struct spawn_result *r);

struct kilnd_spawner;

/* Start the reaper thread. The signals the process ignores or handles now
 * (and SIGPIPE) are the ones reset to their defaults in every tool: ignore
 * or handle no other signal later (a handler must never run in a child
 * that shares the daemon's memory before its exec). With sched_normal every tool starts under
 * SCHED_OTHER (nice kept) whatever the policy of the thread starting it
 * (an unprivileged process can always go from SCHED_BATCH to it, not
 * from SCHED_IDLE or a real-time one). Returns 0, KILN_ENOMEM or
 * KILN_EIO. */
int spawner_new(struct kilnd_spawner **sp, int sched_normal);

/* Start a child. On 0, done(arg, result) will be called exactly once, on
 * the reaper thread, after the child has ended (and *pid, may be NULL, is
 * its pid). On error done is never called. Returns 0, KILN_ENOTFOUND
 * (program or cwd missing), KILN_EACCES (not executable), KILN_ENOMEM,
 * KILN_EIO, or KILN_ECLOSED after spawner_free began. */
int spawner_start(struct kilnd_spawner *sp, const struct spawn_req *rq,
                  spawn_done_fn done, void *arg, pid_t *pid);

/* Ask the child's whole process group to end: SIGTERM now, SIGKILL after
 * grace_ms if it is still running. Its done callback still runs. Returns 0
 * or KILN_ENOTFOUND (no such running child). */
int spawner_kill(struct kilnd_spawner *sp, pid_t pid, unsigned grace_ms);

/* Children running now (0 for a spawner made by spawner_new_ops). */
unsigned spawner_running(struct kilnd_spawner *sp);

/* Kill every child (SIGKILL to each group), wait for them, run their done
 * callbacks, end the reaper. NULL is allowed. */
void spawner_free(struct kilnd_spawner *sp);

/* A stand-in for the processes (tests: a fake spawner that runs nothing
 * and ends its "tools" when the test says). Each function has the contract
 * of the spawner_* function it stands in for; arg is given to each.
 * start must store *pid (> 0, not a real process: only kill sees it
 * again) atomically before it returns 0 (another thread may read it), and
 * call done(done_arg, result) exactly once later, from a thread holding no
 * lock of its caller's (kill is called with the engine's lock held: it
 * only notes the kill). stop, from spawner_free, ends every child still
 * running: each one's done has been called when it returns. */
struct spawner_ops {
	int (*start)(void *arg, const struct spawn_req *rq, spawn_done_fn done,
	             void *done_arg, pid_t *pid);
	int (*kill)(void *arg, pid_t pid, unsigned grace_ms);
	void (*stop)(void *arg);
	void *arg;
};

/* A spawner whose start, kill and free go to ops (copied; ops->arg must
 * outlive the spawner): no reaper thread, no process. Returns 0 or
 * KILN_ENOMEM. */
int spawner_new_ops(struct kilnd_spawner **sp, const struct spawner_ops *ops);

/* Find the program a tool names: a name with a '/' is relative to root
 * (the project folder) unless absolute; a bare name is searched on path
 * (a PATH-style list; NULL means the default "/usr/local/bin:/usr/bin:/bin").
 * Empty and relative entries of path are skipped. Writes the absolute path
 * (root/name when root is absolute) into out. Returns 0, KILN_ENOTFOUND (no
 * such regular file), KILN_EACCES (there is one, but it may not be run:
 * like execvp, the first executable match on path wins), KILN_ERANGE (out
 * too small). */
int spawn_find(const char *name, const char *path, const char *root,
               char *out, size_t outlen);

/* Where spawn_find looked for prog, one short phrase for a message ("at
 * ROOT/tools/x", "in PATH's 12 folders, /a ... /z"): a whole PATH is
 * hundreds of characters. path NULL: spawn_find's default. */
void spawn_where_looked(const char *prog, const char *path, const char *root, char *buf,
                        size_t len);

/* The last max_lines lines (at most outlen - 1 bytes, NUL-terminated, from
 * the end) of the file open at fd, for a failure message. Returns the
 * length written. */
size_t spawn_log_tail(int fd, unsigned max_lines, char *out, size_t outlen);

#endif
