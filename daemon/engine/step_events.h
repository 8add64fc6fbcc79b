/* step_events.h — the events the engine publishes (step_events.c; e->mu
 * held). */
#ifndef KILND_STEP_EVENTS_H
#define KILND_STEP_EVENTS_H

#include "engine_int.h"

/* Publish a StepEvent for n. */
void publish_step(struct engine *e, struct graph *g, struct node *n);

/* Publish a StepStarted for n, whose tool starts (here or on an agent),
 * and count its recorded duration into its builds' time left if they
 * did not know it yet. */
void publish_step_started(struct engine *e, struct graph *g, struct node *n);

/* Fill bf with b's summary (its BuildFinished). */
void summary_fill(const struct build *b, Kiln__BuildFinished *bf);

#endif
