/* watch.h — which project files may have changed since the daemon last
 * looked, from inotify, so that a warm build stats only those.
 *
 * Time is counted in generations: watch_sync (at the start of every build
 * wave) reads what inotify queued and starts a new generation. A caller
 * that looked at a file calls watch_prepare first (its folder and every
 * folder above it up to the project root get a watch, and the current
 * generation is returned), then stats the file and keeps that generation
 * with what it saw. Later, watch_clean says whether nothing touched the
 * file since: no event named it, no folder on its path was moved, removed
 * or replaced, and inotify lost nothing (a queue overflow, a watch
 * removed): any of those counts as "everything may have changed".
 *
 * What inotify cannot see is not covered: writes through a hard link in
 * an unwatched folder, files behind a symlink (callers do not trust the
 * watch for a symlink), changes on network file systems, and writes into
 * an mmap'ed file before it is closed. `kilnd --no-watch` turns it off.
 *
 * The same events can be passed on as they come (watch_on_change): the
 * daemon's live builds start from them.
 *
 * Threads: any; one mutex, never held while calling out (so callers may
 * hold their own locks around these calls), except around the change
 * listener. A reader thread drains the inotify queue as events come, so a
 * long build does not overflow it. */
#ifndef KILN_WATCH_H
#define KILN_WATCH_H

#include <stdint.h>

struct watch;

/* Watch files under root (absolute). 0, or a KILN_E* code (no inotify:
 * the caller stats everything, as without a watch). */
int watch_new(const char *root, struct watch **wp);
void watch_free(struct watch *w);

/* Take in what inotify has queued and begin a new generation. */
void watch_sync(struct watch *w);

/* Before looking at relpath (relative to the root): watch its folders.
 * 0 with *gen the current generation, or a KILN_E* code: not watchable (an
 * absolute path, a folder missing, out of inotify watches); then nothing
 * may be trusted. */
int watch_prepare(struct watch *w, const char *relpath, uint64_t *gen);

/* Watch folder reldir (relative to the root; "" the root) and every
 * folder above it, before anything in it was looked at: its changes are
 * then reported (watch_on_change) from now on. 0, or as watch_prepare. */
int watch_folder(struct watch *w, const char *reldir);

/* Whether relpath is as it was when looked at in generation gen (from
 * watch_prepare; 0 is never clean). */
int watch_clean(struct watch *w, const char *relpath, uint64_t gen);

/* What a change notification says of its path. */
enum watch_change {
	WATCH_CHANGE_PARTIAL,  /* written, created, removed: more may follow */
	WATCH_CHANGE_COMPLETE, /* closed after writing, or renamed into place:
	                          an editor's save is over */
	WATCH_CHANGE_ALL,      /* inotify lost track (a watch gone, a
	                          watched folder moved or replaced): anything
	                          may have changed */
	WATCH_CHANGE_OVERFLOW, /* the kernel's queue overflowed and dropped
	                          events: as WATCH_CHANGE_ALL, told apart so
	                          that the daemon can say why it rescans */
};

/* Tell fn of every change the reader thread takes in from now on:
 * relpath (relative to the root; NULL with WATCH_CHANGE_ALL and
 * WATCH_CHANGE_OVERFLOW) and what kind. fn runs on the reader thread with the watch's lock held: it must
 * be quick and must not call back into the watch. Set it before anything
 * is watched, or to NULL. */
typedef void (*watch_change_fn)(void *arg, const char *relpath,
                                enum watch_change kind);
void watch_on_change(struct watch *w, watch_change_fn fn, void *arg);

/* A testing aid: the reader thread waits ms each time inotify wakes it
 * before it reads the queue, holding the watch's lock (so watch_sync and
 * every other call wait too, and nothing reads the queue meanwhile), so
 * that a test can overflow the kernel's queue (max_queued_events) with a
 * flood of changes without lowering that machine-wide limit
 * (KILN_TEST_WATCH_STALL_MS in kilnd's environment). 0, the default, in
 * real use. */
void watch_test_stall(struct watch *w, unsigned ms);

#endif
