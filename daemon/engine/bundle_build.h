/* bundle_build.h — the built-in tool of `bundles:` steps (bundle_build.c). */
#ifndef KILND_BUNDLE_BUILD_H
#define KILND_BUNDLE_BUILD_H

#include "engine_int.h"

/* Pack bundle step n (n->ks->bundle set) inside the engine, in place of
 * step_start's process: n gets a scratch folder and a log as a tool's
 * run would, its outputs are written there, and its end is reported
 * through engine_tool_done before this returns (exit status 0, or 1 with
 * the reason in its log). Unlocked, on the worker holding n. 0, or an
 * error with n->error set and nothing held (as step_start). */
int bundle_start(struct engine *e, struct graph *g, struct node *n);

/* What a bundle step's key has beyond any step's (decide_key.c): each
 * entry's name (its id's source, which the prerequisite's output URL and
 * hash do not fix) and, with zstd, the library's version and level (its
 * output may differ between versions). 0 or KILN_ENOMEM. */
int bundle_key_parts(const struct graph *g, const struct node *n, struct key_parts *kp);

/* The name of prerequisite d's output k as an entry of a bundle: its path
 * under build/<profile>/ (borrowed from d). */
const char *bundle_entry_name(const struct graph *g, const struct node *d, size_t k);

#endif
