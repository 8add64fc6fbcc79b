/* handlers_agent.c — the requests of build agents (docs/agents.md):
 * hello, take (parked until a job waits; also the heartbeat) and done.
 * The engine keeps the agents and their leases (engine_agent_*); the
 * parked takes are agents.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"
#include "engine.h"
#include "handlers.h"
#include "server.h"

/* Leases one take may list (an agent runs at most 4096 jobs at once). */
#define TAKE_MAX_RUNNING 4096
/* The longest a take waits for a job: well inside any lease. */
#define TAKE_MAX_WAIT_MS 2000

int
h_agent_hello(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
              struct ev_waiter *w)
{
	const Kiln__AgentHelloRequest *q = c->req->agent_hello;
	Kiln__AgentHelloReply *r = &a->body.agent_hello;
	uint64_t id;
	int rv;

	(void)w;
	if (q->slots == 0 || q->slots > 4096) {
		snprintf(a->error, sizeof a->error, "an agent has 1 to 4096 slots, not %u",
		         q->slots);
		return KILN_EINVAL;
	}
	if ((rv = engine_agent_join(d->engine, c->pipe, q, &id)) != 0)
		return rv;
	/* a connection that closed before the join: its agent leaves now */
	if (!server_pipe_open(d, c->pipe))
		engine_agent_pipe_closed(d->engine, c->pipe);
	kiln__agent_hello_reply__init(r);
	r->agent = id;
	r->lease_ms = engine_agent_lease_ms(d->engine);
	r->root = d->paths.project;
	a->reply.body_case = KILN__REPLY__BODY_AGENT_HELLO_REPLY;
	a->reply.agent_hello_reply = r;
	return 0;
}

/* Answer a take: pack the reply here (its jobs are the engine's, freed at
 * once), or park w when there is nothing to say yet (w NULL: never). */
int
take_answer(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w)
{
	const Kiln__AgentTakeRequest *q = c->req->agent_take;
	Kiln__AgentTakeReply tr;
	Kiln__Reply rep;
	int rv;

	if (q->n_running > TAKE_MAX_RUNNING) {
		snprintf(a->error, sizeof a->error, "a take lists at most %d leases",
		         TAKE_MAX_RUNNING);
		return KILN_EINVAL;
	}
	rv = engine_agent_take(d->engine, q->agent, c->pipe, q, &tr);
	if (rv == KILN_ENOTFOUND) {
		snprintf(a->error, sizeof a->error, "no agent %llu on this connection "
		         "(say hello again)", (unsigned long long)q->agent);
		return rv;
	}
	if (rv != 0)
		return rv;
	if (tr.n_jobs == 0 && tr.n_cancel == 0 && w != NULL && q->free > 0 && q->wait_ms > 0) {
		engine_agent_take_free(&tr);
		agents_park(d->agents, w);
		/* a job made ready between the take and the park woke nobody */
		if (engine_agent_ready(d->engine) > 0)
			agents_wake_one(d->agents, w);
		a->kind = ANSWER_PARK;
		a->wait_ms = q->wait_ms < TAKE_MAX_WAIT_MS ? q->wait_ms : TAKE_MAX_WAIT_MS;
		return 0;
	}
	kiln_proto_reply_init(&rep);
	rep.body_case = KILN__REPLY__BODY_AGENT_TAKE_REPLY;
	rep.agent_take_reply = &tr;
	a->nbytes = kiln_proto_size(&rep.base);
	if ((a->bytes = malloc(a->nbytes ? a->nbytes : 1)) == NULL) {
		engine_agent_take_free(&tr);
		return KILN_ENOMEM;
	}
	kiln_proto_pack(&rep.base, a->bytes);
	engine_agent_take_free(&tr);
	a->kind = ANSWER_BYTES;
	return 0;
}

int
h_agent_take(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
             struct ev_waiter *w)
{
	return take_answer(d, c, a, w);
}

int
h_agent_done(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
             struct ev_waiter *w)
{
	const Kiln__AgentDoneRequest *q = c->req->agent_done;

	(void)w;
	if (q->n_outputs > 4096) {
		snprintf(a->error, sizeof a->error, "at most 4096 outputs");
		return KILN_EINVAL;
	}
	return engine_agent_done(d->engine, q->agent, c->pipe, q, a->error,
	                         sizeof a->error);
}
