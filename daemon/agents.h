/* agents.h — the daemon's side of build agents (agents.c): AgentTake
 * requests parked until a job waits, and the timer that takes steps back
 * from agents silent past their lease. The engine keeps the agents and
 * their leases (engine.h, engine_agent_*). */
#ifndef KILND_AGENTS_H
#define KILND_AGENTS_H

#include "events.h"
#include "kilnd.h"

struct kilnd_agents;

/* Start the lease timer (it calls engine_agents_expire on d->engine).
 * 0 or KILN_ENOMEM/KILN_EIO. */
int agents_new(struct kilnd *d, struct kilnd_agents **ap);
/* Stop the timer: no lease expires after this. The parked list stays, for
 * the engine's wakes until the engine is freed. NULL allowed. */
void agents_stop(struct kilnd_agents *ag);
/* Stop the timer if it runs, and free; every waiter must have been
 * unparked, and nothing may wake after (free the engine first). NULL
 * allowed. */
void agents_free(struct kilnd_agents *ag);

/* Park w (an AgentTake with no job for it yet). */
void agents_park(struct kilnd_agents *ag, struct ev_waiter *w);
/* Take w off the parked list if it is still there. Returns w->woken. */
int agents_unpark(struct kilnd_agents *ag, struct ev_waiter *w);
/* After arming w's timer: a wake that came before it is done again. */
void agents_rewake(struct kilnd_agents *ag, struct ev_waiter *w);
/* Wake up to n parked takes (the engine's agent_wake: quick). */
void agents_wake(struct kilnd_agents *ag, unsigned n);
/* Wake w itself (a job came while it was parking). */
void agents_wake_one(struct kilnd_agents *ag, struct ev_waiter *w);
/* Wake every parked take (shutdown). */
void agents_wake_all(struct kilnd_agents *ag);

#endif
