/* run.h — starting a step's tool (run.c). */
#ifndef KILND_RUN_H
#define KILND_RUN_H

#include "engine_int.h"

/* Start n's tool (unlocked). 0: running, engine_tool_done will be called;
 * otherwise n->error is set and the step failed. */
int step_start(struct engine *e, struct graph *g, struct node *n);

/* The job an agent runs instead (agent_jobs.c), unlocked: n's scratch
 * folder and log taken (the agent's outputs come back into them), its
 * argv and environment as step_start would run them minus what only this
 * machine knows, and every input (declared, prerequisites' outputs, a
 * project-local program, and extra: project files an earlier try on an
 * agent looked for) put into the store so that agents can fetch it by
 * id. 0 with *out (free with step_job_free), or n->error set and nothing
 * held. */
int step_job(struct engine *e, struct graph *g, struct node *n, char *const *extra,
             size_t nextra, Kiln__AgentJob **out);
void step_job_free(Kiln__AgentJob *j);

/* Run n's tool as step_start would and wait for it (unlocked; kiln
 * audit, audit.c): its outputs are left in n's scratch folder
 * (n->w->scratch, log n->w->log_fd) for the caller, who gives the folder
 * back. 0 with *res, or n->error set and nothing held. */
int step_run_wait(struct engine *e, struct graph *g, struct node *n,
                  struct spawn_result *res);

#endif
