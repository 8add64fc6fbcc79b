/* step_events.h — the events the engine publishes (step_events.c; e->mu
 * held). */
#ifndef KILND_STEP_EVENTS_H
#define KILND_STEP_EVENTS_H

#include "engine_int.h"

/* What each build counts is what its step events said (build.told):
 * every build that wants a finished step is sent a StepEvent when fresh
 * (a decision of this finish to tell: it ran, reused, failed, was
 * skipped, would run) or when the build was told another result of
 * the step before (a step decided again: one that ran and was then
 * found up to date, say), and never for a step up to date it was told
 * nothing of. A step up to date is sent as REUSED. */
void publish_step(struct engine *e, struct graph *g, struct node *n, int fresh);

/* Build b joins n, finished already in this wave: b is sent a StepEvent
 * of its result (none when it is up to date). */
void publish_step_joined(struct engine *e, struct graph *g, struct node *n,
                         struct build *b);

/* n's result as a StepEvent's Result, or STEP_NONE (up to date). */
#define STEP_NONE (-1)
int step_result(const struct node *n);

/* Publish a StepStarted for n, whose tool starts (here or on an agent),
 * and count its recorded duration into its builds' time left if they
 * did not know it yet. */
void publish_step_started(struct engine *e, struct graph *g, struct node *n);

/* Fill bf with b's summary (its BuildFinished). */
void summary_fill(const struct build *b, Kiln__BuildFinished *bf);

#endif
