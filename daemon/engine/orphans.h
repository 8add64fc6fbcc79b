/* orphans.h — ending the tools a previous daemon of this project left
 * running.
 *
 * A daemon killed with kill -9 takes its tools with it (their parent-death
 * signal, tool_spawn.h), but not what those tools started: a shell tool's
 * `sleep`, a script's subprocess, a compiler driver's children. These
 * carry the environment every tool is given, and in it the marker
 * ORPHANS_MARKER=<project root>; a new daemon of the project kills every
 * process carrying its marker before it hands out any scratch folder.
 *
 * Only /proc/<pid>/environ is looked at: the environment a process was
 * started with. A process that exec'd with a cleaned environment
 * (env -i) carries no marker and is not found; it is still killed when
 * it stays in the process group of one that is. */
#ifndef KILND_ORPHANS_H
#define KILND_ORPHANS_H

/* The variable naming the project a tool runs for (run.c env_make). */
#define ORPHANS_MARKER "KILN_TOOL_OF"

/* SIGKILL every process of this user whose environment holds
 * ORPHANS_MARKER=root exactly (root is the absolute project folder as the
 * daemon names it), and the process group of each; then wait, at most
 * wait_ms, for them to end. Never signals this process, its parent, or
 * this process's own group. *nkilled is how many marked processes were
 * killed. Returns 0, KILN_ENOMEM, or KILN_EIO (no /proc). */
int orphans_kill(const char *root, unsigned wait_ms, unsigned *nkilled);

#endif
