/* need.h — `kiln need` from inside a running step: tokens, suspended
 * runs, the cached result's needs (need.c), and the waits on needed steps
 * and dynamic prerequisites, with the cycle check (need_wait.c). */
#ifndef KILND_NEED_H
#define KILND_NEED_H

#include "engine_int.h"
#include "decide.h"

/* Give n's run a fresh token (e->mu held). 0 or KILN_ENOMEM. */
int need_token_add(struct engine *e, struct graph *g, struct node *n);

/* n's tool ended (e->mu held): its token goes. 1: it held a -j slot
 * (e->running counts it); 0: it was suspended without one. */
int need_run_end(struct engine *e, struct node *n);

/* Build slots are joining n, which is already scheduled (node_schedule,
 * e->mu held): when n is suspended on a need or waits on its dynamic
 * prerequisites, those are to be scheduled for them too, by the next
 * need_join_flush (not here: node_schedule runs inside walks). */
void need_join(struct engine *e, const struct node *n);

/* Schedule what suspended runs and dynamic-prerequisite waiters wait on
 * for every build they belong to now, after builds joined them (e->mu
 * held; after node_schedule's callers, engine_build and our own). Without
 * it a cancel of the build that first asked would cancel what the others
 * wait on. Best effort: out of memory, the waiter sees the cancel. */
void need_join_flush(struct engine *e);

/* Give resolved suspended runs their slot back, before new steps start
 * (e->mu held). */
void need_grant(struct engine *e);

/* n finished (e->mu held): release nodes waiting on it as a dynamic
 * prerequisite, drop n's own waits. */
void need_finished(struct engine *e, struct graph *g, struct node *n);

/* Before deciding n (e->mu held, n is N_EVAL): schedule the steps its
 * last result needed for n's builds and put n back to N_WAITING on those
 * not done yet (1), or fill n->needs[].cur (0). */
int need_prereqs(struct engine *e, struct graph *g, struct node *n);

/* The i-th (0..2) `NAME=value` of the tool's kiln need environment,
 * malloc'd; NULL when out of memory. Unlocked. */
char *need_env(const struct engine *e, const struct node *n, int i);

/* Whether the needs a cached result recorded still hold (unlocked; takes
 * e->mu): CACHE_HIT all resolve to their hash (n->needs set); CACHE_MISS
 * not (why says which), or no memory (why untouched); CACHE_NEEDS some are
 * not done in this wave yet (n->needs set: EVAL_NEEDS). */
enum cache_result need_check_result(struct engine *e, struct graph *g, struct node *n,
                                    Kiln__UrlDep *const *deps, size_t ndeps, char *why,
                                    size_t whylen);

/* The run's needs as UrlDeps for its ActionResult (one malloc'd block in
 * *out, free() it; *np entries). 0 or KILN_ENOMEM. */
int need_result_pb(const struct node *n, Kiln__UrlDep ***out, size_t *np);

/* The run succeeded: its needs become n->needs. Failed: dropped. */
void need_run_commit(struct node *n, int ok);

/* Free a need list. */
void need_deps_free(struct need_dep *v, size_t n);

/* Set up and tear down the engine's need state (engine_new/free). */
int need_init(struct engine *e);
void need_free(struct engine *e);

/* ---- shared by need.c and need_wait.c (e->mu held) ---- */

/* Whether t finished in the current wave. */
int need_done(const struct engine *e, const struct node *t);

/* Resolve d (url, output) in g: d->idx, d->out. 1 found, 0 not. */
int need_dep_resolve(const struct graph *g, struct need_dep *d);

/* The cycle n -> t -> ... -> n as text, when t reaches n over hard edges
 * (need_wait.c). A path through a dynamic prerequisite is no cycle: that
 * waiter stops waiting and is decided again. 1 a cycle (msg set;
 * suspended runs on it get the error too), 0 none, KILN_ENOMEM. */
int need_cycle_find(struct engine *e, struct graph *g, struct node *n, struct node *t,
                    char *msg, size_t len);

/* Schedule t and everything it needs for every build in bits that does not
 * have it yet. 0 or KILN_ENOMEM. */
int need_schedule_closure(struct engine *e, struct graph *g, struct node *t,
                          uint64_t bits);

/* The entry of e->ons for n's ask for target, or -1. */
long need_on_find(const struct engine *e, const struct node *n, uint32_t target);

#endif
