/* changes.h — the project's file changes as the engine's watch reports
 * them, coalesced into SourcesChanged events (kiln.proto) for live builds.
 *
 * A change starts (or extends) a quiet period: once no change has come for
 * that long, one event lists what changed. A save that is over (a file
 * closed after writing, or renamed into place) waits only
 * CHANGES_COMPLETE_MS for more of the same burst; any other change (a
 * write in progress, a create, a delete) waits settle_ms, so that an
 * editor's delete-then-create or a tool's several writes give one event
 * once the file is whole. A stream of changes that never pauses still gives
 * an event every CHANGES_MAX_WAIT_MS. A client may hold the reports
 * (changes_hold: a checkout) and have them released as one batch.
 *
 * Threads: changes_note from the watch's reader thread; one thread of its
 * own publishes; one mutex. */
#ifndef KILND_CHANGES_H
#define KILND_CHANGES_H

#include <stdint.h>

#include "kiln_proto.h"

#define CHANGES_COMPLETE_MS 2
#define CHANGES_MAX_WAIT_MS 500
#define CHANGES_MAX_PATHS 64

struct kilnd_changes;

/* publish(arg, ev) is called on the changes thread with each event. 0,
 * KILN_ENOMEM, or the error of starting the thread. */
int changes_new(unsigned settle_ms, void (*publish)(void *arg, Kiln__Event *ev),
                void *arg, struct kilnd_changes **cp);

/* Stop the thread (what is pending is dropped) and free. NULL is allowed. */
void changes_free(struct kilnd_changes *c);

/* Hold reports for connection pipe (hold), or end its hold, or every hold
 * (pipe 0 with hold 0). While any hold is on, changes are gathered but not
 * reported; when the last ends, what gathered goes out at once as one
 * event. 0, or KILN_EBUSY (CHANGES_MAX_HOLDS connections hold already). */
#define CHANGES_MAX_HOLDS 64
int changes_hold(struct kilnd_changes *c, uint32_t pipe, int hold);

/* Whether connection pipe holds the reports now (1) or not (0): kiln hold
 * asks, to end when kiln release ended its hold. */
int changes_held(struct kilnd_changes *c, uint32_t pipe);

/* A change (engine_config.changed): relpath NULL means anything may have
 * changed. Never blocks for long; out of memory counts the path in
 * `more`. */
void changes_note(struct kilnd_changes *c, const char *relpath, int complete);

#endif
