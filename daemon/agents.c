/* agents.c — parked AgentTake requests and the lease timer.
 *
 * An agent with a free slot asks for work with an AgentTake that waits
 * (parks, like an event poll: workers.c) until a job is ready or its
 * wait ends; the engine's agent_wake wakes as many parked takes as jobs
 * came, oldest first, and each answers with what it can take then (maybe
 * nothing: another agent was quicker; it asks again). The take is also
 * the agent's heartbeat; the timer thread here hands the steps of agents
 * that stopped sending it to others (engine_agents_expire).
 *
 * Threads: handlers park and unpark; the engine wakes (with its lock
 * held: only the waiters' sleeps are cancelled here, nothing calls back
 * into the engine); the timer. One mutex guards the list. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "agents.h"
#include "engine.h"
#include "kiln_error.h"

struct kilnd_agents {
	struct kilnd *d;
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* the timer's sleep */
	struct ev_waiter *head;  /* parked, oldest first */
	int quit;
	int timer_started;
	pthread_t timer;
};

static void *
timer_main(void *arg)
{
	struct kilnd_agents *ag = arg;
	unsigned every = engine_agent_lease_ms(ag->d->engine) / 4;

	if (every < 50)
		every = 50;
	pthread_mutex_lock(&ag->mu);
	while (!ag->quit) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += every / 1000;
		until.tv_nsec += (long)(every % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&ag->cv, &ag->mu, &until);
		if (ag->quit)
			break;
		pthread_mutex_unlock(&ag->mu);
		engine_agents_expire(ag->d->engine);
		pthread_mutex_lock(&ag->mu);
	}
	pthread_mutex_unlock(&ag->mu);
	return NULL;
}

int
agents_new(struct kilnd *d, struct kilnd_agents **ap)
{
	struct kilnd_agents *ag = calloc(1, sizeof *ag);
	pthread_condattr_t ca;

	*ap = NULL;
	if (ag == NULL)
		return KILN_ENOMEM;
	ag->d = d;
	pthread_mutex_init(&ag->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ag->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ag->timer, NULL, timer_main, ag) != 0) {
		agents_free(ag);
		return KILN_EIO;
	}
	ag->timer_started = 1;
	*ap = ag;
	return 0;
}

void
agents_stop(struct kilnd_agents *ag)
{
	if (ag == NULL)
		return;
	pthread_mutex_lock(&ag->mu);
	ag->quit = 1;
	pthread_cond_broadcast(&ag->cv);
	pthread_mutex_unlock(&ag->mu);
	if (ag->timer_started)
		pthread_join(ag->timer, NULL);
	ag->timer_started = 0;
}

void
agents_free(struct kilnd_agents *ag)
{
	if (ag == NULL)
		return;
	agents_stop(ag);
	pthread_cond_destroy(&ag->cv);
	pthread_mutex_destroy(&ag->mu);
	free(ag);
}

void
agents_park(struct kilnd_agents *ag, struct ev_waiter *w)
{
	struct ev_waiter **p;

	pthread_mutex_lock(&ag->mu);
	w->next = NULL;
	w->woken = 0;
	w->gathering = 0;
	w->parked = 1;
	for (p = &ag->head; *p != NULL; p = &(*p)->next)
		;
	*p = w;
	pthread_mutex_unlock(&ag->mu);
}

int
agents_unpark(struct kilnd_agents *ag, struct ev_waiter *w)
{
	int woken;

	pthread_mutex_lock(&ag->mu);
	if (w->parked) {
		for (struct ev_waiter **p = &ag->head; *p != NULL; p = &(*p)->next)
			if (*p == w) {
				*p = w->next;
				break;
			}
		w->parked = 0;
	}
	woken = w->woken;
	pthread_mutex_unlock(&ag->mu);
	return woken;
}

void
agents_rewake(struct kilnd_agents *ag, struct ev_waiter *w)
{
	pthread_mutex_lock(&ag->mu);
	if (w->woken && w->wake != NULL)
		w->wake(w);
	pthread_mutex_unlock(&ag->mu);
}

/* Wake the parked waiters for which pick says so (ag->mu held). */
static void
wake_some(struct kilnd_agents *ag, unsigned n, struct ev_waiter *only)
{
	for (struct ev_waiter *w = ag->head; w != NULL && n > 0; w = w->next) {
		if (w->woken || (only != NULL && w != only))
			continue;
		w->woken = 1;
		if (w->wake != NULL)
			w->wake(w);
		n--;
	}
}

void
agents_wake(struct kilnd_agents *ag, unsigned n)
{
	if (ag == NULL)
		return;
	pthread_mutex_lock(&ag->mu);
	wake_some(ag, n, NULL);
	pthread_mutex_unlock(&ag->mu);
}

void
agents_wake_one(struct kilnd_agents *ag, struct ev_waiter *w)
{
	pthread_mutex_lock(&ag->mu);
	wake_some(ag, 1, w);
	pthread_mutex_unlock(&ag->mu);
}

void
agents_wake_all(struct kilnd_agents *ag)
{
	if (ag == NULL)
		return;
	pthread_mutex_lock(&ag->mu);
	wake_some(ag, ~0u, NULL);
	pthread_mutex_unlock(&ag->mu);
}
