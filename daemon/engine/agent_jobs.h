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

/* engine_free: every step on an agent ends as killed. */
void agent_jobs_quit(struct engine *e);
void agent_jobs_free(struct engine *e);

#endif
