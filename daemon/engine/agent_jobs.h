/* agent_jobs.h — the engine's side of build agents (agent_jobs.c): the
 * leases the workers make and cancel. The daemon's side is engine.h's
 * engine_agent_*. Everything with e->mu held. */
#ifndef KILND_AGENT_JOBS_H
#define KILND_AGENT_JOBS_H

#include "engine_int.h"

/* Whether an agent has a free slot for another step. */
int agent_jobs_room(const struct engine *e);
/* The slots of every agent joined. */
unsigned agent_jobs_slots(const struct engine *e);

/* A lease for n (about to run on an agent; n->w->lease set). 0 or
 * KILN_ENOMEM. */
int agent_lease_new(struct engine *e, struct graph *g, struct node *n);
/* n's job is made: it waits for an agent (taken from the caller). */
void agent_lease_ready(struct engine *e, struct node *n, Kiln__AgentJob *job);
/* Making n's job failed: its lease is gone. */
void agent_lease_failed(struct engine *e, struct node *n);
/* Cancel n's remote run: its step finishes as killed now (the agent is
 * told to stop on its next take). 0, or KILN_EBUSY when its job is
 * being made or its answer landed (that ends it). */
int agent_lease_cancel(struct engine *e, struct node *n);

/* The run of n on an agent was handed these blobs (kiln need): its agent
 * may read them. 0 or KILN_ENOMEM. */
int agent_lease_allow(struct engine *e, struct node *n, const kiln_id *ids, size_t nids);

/* What the trace of n's run on an agent (landed in its scratch trace at
 * this run's offset) says it lacked, whatever the tool's exit status
 * (agent_files.c; e->mu not held). Project files it looked for (M) or
 * listed (D) in vain that this machine has join n->w->extra, sent with
 * the next try: AGENT_LACKED_SENT. AGENT_LACKED_HERE when it lacked one
 * that is never sent (outside the project): the step must run here. */
enum { AGENT_LACKED_NONE, AGENT_LACKED_SENT, AGENT_LACKED_HERE };
int agent_trace_lacked(struct engine *e, struct node *n);

/* Whether the argv word names a project file a job carries (a script run
 * by path: `sh tools/x.sh`): a plain relative path to a regular file of
 * the project, outside build/ and .kiln/, whose real path is inside it.
 * 1 with its project-relative name in rel (len bytes), else 0. */
int agent_argv_file(const struct engine *e, const char *word, char *rel, size_t len);

/* engine_free: every step on an agent ends as killed. */
void agent_jobs_quit(struct engine *e);
void agent_jobs_free(struct engine *e);

#endif
