/* schedule.h — the ready and runnable heaps, finishing nodes, the worker
 * threads (schedule.c). Everything but worker_main and engine_tool_done
 * with e->mu held. */
#ifndef KILND_SCHEDULE_H
#define KILND_SCHEDULE_H

#include "engine_int.h"

/* Push n onto heap h (the ready or the runnable one) at its prio. 0 or
 * KILN_ENOMEM. */
int heap_push(struct heap *h, struct graph *g, struct node *n);

/* h's entries in their order again after the nodes' cp_ns changed. */
void heap_reorder(struct heap *h);

/* Finish n with state st: count it into its builds, publish its event,
 * and release or skip its dependents. */
void node_finish(struct engine *e, struct graph *g, struct node *n, enum node_state st);

/* n's prerequisites are done: onto the ready heap (a failure to push
 * fails it). */
void node_make_ready(struct engine *e, struct graph *g, struct node *n);

/* Whether st is a finished state (done, failed, skipped, cancelled, would
 * run). */
int node_done_state(enum node_state st);

/* Whether a build that is not stopped still wants n. */
int node_wanted(const struct engine *e, const struct node *n);

/* The -j limit now: the largest of the active builds'. */
unsigned jobs_limit(const struct engine *e);

/* Queue the end of rc's run (result r) for a worker to finish. */
void completed_push(struct engine *e, struct run_ctx *rc, const struct spawn_result *r);

/* Stop n's run: its tool here (SIGTERM, SIGKILL after grace_ms), or its
 * lease on an agent (agent_lease_cancel). 0 when it was told to stop. */
int run_kill(struct engine *e, struct node *n, unsigned grace_ms);

/* A worker thread (engine_new starts them; unlocked). */
void *worker_main(void *arg);

/* The reaper thread's callback for a node's tool (unlocked; takes
 * e->mu). */
void engine_tool_done(void *arg, const struct spawn_result *r);

#endif
