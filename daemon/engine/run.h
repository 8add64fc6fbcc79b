/* run.h — starting a step's tool (run.c). */
#ifndef KILND_RUN_H
#define KILND_RUN_H

#include "engine_int.h"

/* Start n's tool (unlocked). 0: running, engine_tool_done will be called;
 * otherwise n->error is set and the step failed. */
int step_start(struct engine *e, struct graph *g, struct node *n);

#endif
