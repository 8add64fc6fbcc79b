/* tool_runs.h — the program a tool's program exec'd in its own place (a
 * shim script exec'ing the real interpreter), as part of the action key
 * (tool_runs.c; docs/build.md, "Programs a tool runs in its place"). */
#ifndef KILND_TOOL_RUNS_H
#define KILND_TOOL_RUNS_H

#include "engine_int.h"

/* Add the key part "tool runs" (the content hash of PATH, or "missing")
 * when n's last run showed its program exe (absolute, as found on the
 * build's PATH) exec'ing PATH in its place. What the last run showed is
 * read from n's decision record the first time (after a restart). 0 or
 * KILN_ENOMEM. */
int tool_runs_part(struct engine *e, const struct graph *g, struct node *n,
                   const char *exe, struct key_parts *kp);

/* For the quick fingerprint: 1 with *h the hash of the program exe
 * exec'd in its place last time (zeros: missing now), 0 when none is
 * known. */
int tool_runs_quick(struct engine *e, const struct node *n, const char *exe, kiln_id *h);

/* After n's traced local run: ran is the program its own process exec'd
 * last ("" none). When that is not what its key said, n's key is made
 * again (its "tool runs" part replaced) so the result is stored under the
 * key of what ran, and n remembers it for its next decision. 0 or a
 * KILN_E* code. */
int tool_runs_learn(struct engine *e, struct node *n, const char *ran);

/* The program n's decided program (n->w->program) exec'd in its place as
 * far as n knows, for its decision record; "" none. Borrowed from n. */
const char *tool_runs_ran(const struct node *n);

#endif
