/* estimate.h — how long each step's tool is expected to take, and the
 * longest remaining path in those times (node.cp_ns) that orders the
 * ready and runnable heaps after priority (estimate.c). Every function
 * with e->mu held. */
#ifndef KILND_ESTIMATE_H
#define KILND_ESTIMATE_H

#include "engine_int.h"

/* What a step nothing is known of is expected to take: longer than most
 * small tools, so that a tool not seen yet starts (and is learnt) early. */
#define EST_DEFAULT_NS (100ULL * 1000000)

/* n's expected tool time in ns: its own last duration (this daemon's
 * runs, or .kiln/durations); else what this daemon has learnt of its
 * tool (time per input byte when n's input size is known, else the mean
 * time); else EST_DEFAULT_NS. Never 0. */
uint64_t step_estimate_ns(const struct engine *e, const struct node *n);

/* The same from what is known only: 0 where step_estimate_ns would give
 * EST_DEFAULT_NS (a guess that orders the heaps, not a time to show). */
uint64_t step_estimate_known_ns(const struct engine *e, const struct node *n);

/* Read .kiln/durations (engine_new). 0 or KILN_ENOMEM. */
int est_open(struct engine *e);

/* Write .kiln/durations when it changed (a wave's end, engine_free); a
 * failure is logged, never fatal. */
void est_save(struct engine *e);

void est_close(struct engine *e);

/* A new graph: each node's recorded duration. */
void est_graph_init(struct engine *e, struct graph *g);

/* The descriptions were loaded again: the tools learnt are other
 * objects now (learnt again by name: the first run of each). */
void est_tools_forget(struct engine *e);

/* Every node's cp_ns: its estimate plus the largest cp_ns among the
 * steps that need it. */
void est_paths(struct engine *e, struct graph *g);

/* n was decided to run (its node_work holds what its inputs were): its
 * input size, and its cp_ns again. */
void est_decided(struct engine *e, struct graph *g, struct node *n);

/* n's tool succeeded after ns of wall time: keep ns as n's own
 * duration, learn its tool's cost, and when that moved much, compute the
 * active graphs' paths again and reorder the heaps. */
void est_learn(struct engine *e, struct graph *g, struct node *n, uint64_t ns);

#endif
