/* edits.h — project files edited while builds run (the live loop).
 *
 * The watch tells the engine of every change as it happens (lifecycle.c's
 * watch_changed, or engine_file_changed). A thread of edits.c takes the
 * changes in, a batch at a time:
 *
 * - the file table forgets each changed file, so that a step decided from
 *   now on in this pass looks at it again (a queued step uses the new
 *   state);
 * - a running tool whose step reads a changed file (a declared input, or
 *   a file its last result discovered) is cancelled: SIGTERM to its process
 *   group, SIGKILL after a grace period; its step is decided again once
 *   the edits have settled (schedule.c, work_complete), not failed;
 * - a step of the wave already decided (or being decided) from an older
 *   state is marked stale, and each active build wanting it is told to
 *   decide it and its dependents again before it ends (builds.c,
 *   build_repass): a build's final state reflects every edit made before
 *   it ended.
 *
 * A tool that reads a changed file nobody knew it reads is still caught
 * after its run (verify.c). A change the watch could not name (a queue
 * overflow) marks every step of the wave stale.
 *
 * Threads: edits_note on the watch's reader thread (under the watch's
 * lock: quick, takes only the edits' own lock); the edits thread takes
 * e->mu to cancel and mark. */
#ifndef KILN_ENGINE_EDITS_H
#define KILN_ENGINE_EDITS_H

#include <stdint.h>

struct engine;

/* Start and stop the edits thread (engine_new, engine_free). */
int edits_start(struct engine *e);
void edits_stop(struct engine *e);

/* A project file changed: relpath relative to the root; NULL: anything
 * may have changed. */
void edits_note(struct engine *e, const char *relpath);

/* Whether edits were noted that the edits thread has not applied yet
 * (e->mu held). A build does not end while they are on their way: an edit
 * noted before its last step finished may make a finished step stale
 * (the thread looks at the builds again after applying them). */
int edits_pending(struct engine *e);

/* Wait until no edit came for the settle time (at most a second), so that
 * a step cancelled by a burst of writes runs once, after the burst. */
void edits_settle(struct engine *e);

/* Runs of one step in a wave that edits may cancel; after that its tool
 * runs to its end and verify.c decides (a file rewritten without pause
 * would otherwise keep the step from ever finishing). */
#define EDITS_MAX_CANCELS 20

/* SIGTERM first; SIGKILL this long after, if the tool is still there. */
#define EDITS_KILL_GRACE_MS 2000

#endif
