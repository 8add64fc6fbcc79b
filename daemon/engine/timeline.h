/* timeline.h — a build's timeline (timeline.c; docs/build.md, "The
 * timeline of a build"): every step that ran, when, where and why, written
 * when the build ends as a Chrome trace-event file under .kiln/traces/.
 *
 * Threads: a build's timeline is touched with e->mu held, except
 * timeline_write, which its caller runs on a timeline it detached from
 * the build (nobody else holds it then). */
#ifndef KILND_TIMELINE_H
#define KILND_TIMELINE_H

#include <stdint.h>

#include "kiln_proto.h"

#define TIMELINE_DIR ".kiln/traces"
#define TIMELINE_KEEP 20          /* builds whose traces are kept */
#define TIMELINE_MAX_SLICES 100000 /* steps recorded per build; more are
                                     counted, not drawn (bounded size) */
#define TIMELINE_MAX_REASON 240   /* bytes of a reason or error kept */
#define TIMELINE_MAX_NEEDS 64     /* needed URLs listed per step */
#define TIMELINE_PUBLISH_TID 1000000 /* publishing's lanes' first tid: after
                                        every agent's (1000 * k + slot) */

struct timeline;
struct engine;
struct graph;
struct node;
struct build;

/* A new, empty timeline for build b (its id, profile and start taken
 * from it). NULL when out of memory: the build then leaves no trace. */
struct timeline *timeline_new(const struct build *b);

/* Record node n's run into t if its tool ran in this decision (nothing
 * for a step up to date or reused: those are only counted). now_ns is
 * kiln_mono_ns() at the step's end. Out of memory only loses the slice. */
void timeline_step(struct timeline *t, const struct node *n, int64_t now_ns);

/* Write t as <rootfd>/.kiln/traces/<id>.json (a temp file renamed into
 * place: never half a file under that name), point traces/last at it,
 * remove all but the newest TIMELINE_KEEP traces, and free t. bf is
 * the build's summary. Safe for builds ending at once (of one daemon or
 * several: an flock of the folder). Returns 0 or a KILN_E* code (t is
 * freed anyway). */
int timeline_write(int rootfd, struct timeline *t, const Kiln__BuildFinished *bf);

/* The highest build number of a trace in <rootfd>/.kiln/traces (0: none):
 * a daemon numbers its builds after it, so that no trace of an earlier
 * daemon's build is replaced. */
uint64_t timeline_last_id(int rootfd);

/* Free t without writing it (NULL is fine). */
void timeline_free(struct timeline *t);

#endif
