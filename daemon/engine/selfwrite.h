/* selfwrite.h — project files the build itself changed (issue 38).
 *
 * A tool that writes outside its scratch folder fails (trace.c), but its
 * write is a real change of a project file: the watch reports it like an
 * artist's save, and each report started another build that ran the tool
 * again, which wrote again — a loop. So the state such a write left a
 * file in is remembered (its size, times, inode: what the next edit of it
 * changes), and:
 *
 * - a change the watch reports of a file in exactly that state is the
 *   build's own, not an edit: no step is decided again for it, no
 *   SourcesChanged goes out (lifecycle.c, edits.c); the next edit of the
 *   file changes its state and is reported as ever;
 * - the step that wrote is failed and stays failed: its run is not
 *   cancelled-and-rerun nor decided again within its build (schedule.c,
 *   builds.c), and a later build does not run it again while nothing it
 *   reads differs from what its run left (decide.c, by its quick key
 *   after the run): it fails again at once, with the same words.
 *
 * Reports that came in before the tool ended are seen through: the step
 * is not decided again for them, and a change of a running tool's input
 * is reported to clients only once that tool ended (below).
 *
 * Threads: the table has a lock of its own (selfwrite_is runs on the
 * watch's reader thread, under the watch's lock, and on the edits
 * thread); a node's fields are its worker's. */
#ifndef KILN_ENGINE_SELFWRITE_H
#define KILN_ENGINE_SELFWRITE_H

#include "kiln_store.h"

struct engine;
struct graph;
struct node;
struct selfwrites;

/* Make and free the table (engine_new, engine_free). 0 or KILN_ENOMEM. */
int selfwrite_new(struct selfwrites **sp);
void selfwrite_free(struct selfwrites *s);

/* Node n's run wrote relpath (relative to the project root), outside its
 * scratch folder; NULL: a file outside the project (nothing watches it).
 * Remembers the file's state now and, on n, that its run wrote it. */
void selfwrite_note(struct engine *e, struct node *n, const char *relpath);

/* Whether relpath is in the state a step's write left it in. */
int selfwrite_is(struct engine *e, const char *relpath);

/* After a failed run that selfwrite_note named: n's quick key over the
 * files as the run left them (the written one looked at again), for
 * selfwrite_unchanged. Its worker, unlocked. */
void selfwrite_settle(struct engine *e, struct graph *g, struct node *n);

/* Whether n's last run wrote a project file and quick (what n reads now)
 * is what that run left: running it again would only write again. */
int selfwrite_unchanged(const struct node *n, const kiln_id *quick);

/* Forget n's last run's write (a new run starts, or the node goes). */
void selfwrite_forget(struct node *n);

/* A change of a file a running tool reads may be that tool's own write,
 * which is known only once it ends (the tracer's records are read then):
 * its report to clients (SourcesChanged: a build of kiln watch) waits
 * for that. The edits of a running build are not held (edits.c cancels
 * the tool as for any edit).
 *
 * selfwrite_run_begin: n's traced tool starts (its declared inputs are
 * held; not for a step of more than a few). selfwrite_defer: a change of
 * relpath (complete: a save that is over); 1 if it is held back, 0 if it
 * is to be reported now. selfwrite_run_end: n's tool ended and its trace
 * was read (or it never started): each change held back that no running
 * tool reads any more is reported (e->cfg.changed) unless it is the
 * state a step's write left. Unlocked; selfwrite_defer on the watch's
 * reader thread. */
void selfwrite_run_begin(struct engine *e, const struct node *n);
int selfwrite_defer(struct engine *e, const char *relpath, int complete);
void selfwrite_run_end(struct engine *e, const struct node *n);

#endif
