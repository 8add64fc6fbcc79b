/* peers.c — the peer table: the connections admitted and their requests
 * in progress.
 *
 * It holds at most cfg.max_clients connections: a slot is taken when a
 * connection is admitted, and given back when that connection closes, or
 * handed to a newer connection when every slot is taken and it is the one
 * idle longest (idle connections, however many, must not lock out the
 * project's own `kiln status`; an idle client loses nothing but its
 * connection, as nng's dialer reconnects). Each connection may have at
 * most PEER_MAX_IN_PROGRESS requests in progress (see workers.c for why).
 * It also tells a handler whether its request's connection is still open,
 * so that a subscription or upload made for one that closed meanwhile is
 * dropped.
 *
 * Threads: any; peers_mu guards the table, and is never held while
 * calling out. */
#include <pthread.h>

#include "server_int.h"
#include "ui.h"

/* ---- the peer table ------------------------------------------------------ */

/* The slot holding id (0: a free slot), looked for from where id's own
 * slot would be, so that a connection is usually found at once. Lock
 * held. */
static struct peer *
peer_slot(struct kilnd_server *s, uint32_t id, uint32_t want)
{
	uint32_t n = s->maxpeers;

	for (uint32_t i = 0, j = id % n; i < n; i++, j = j + 1 < n ? j + 1 : 0)
		if (s->peers[j].id == want)
			return &s->peers[j];
	return NULL;
}

/* The admitted connection idle longest (no request in progress), or NULL
 * when every one is busy. Lock held. */
static struct peer *
peer_idlest(struct kilnd_server *s)
{
	struct peer *old = NULL;

	for (uint32_t i = 0; i < s->maxpeers; i++) {
		struct peer *p = &s->peers[i];
		if (p->id != 0 && p->in_progress == 0 &&
		    (old == NULL || p->last < old->last))
			old = p;
	}
	return old;
}

/* Admit connection id. When every slot is taken, the connection idle
 * longest gives up its slot (*evicted: its id, for the caller to close;
 * else 0): idle connections, however many, must not lock out the
 * project's own `kiln status`, and an idle client loses nothing but its
 * connection (nng's dialer reconnects). Returns 0, or KILN_EBUSY when
 * every connection has a request in progress. */
int
peer_add(struct kilnd *d, uint32_t id, uint32_t *evicted)
{
	struct kilnd_server *s = d->server;
	struct peer *p;

	*evicted = 0;
	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, id, 0)) != NULL)
		atomic_store(&d->clients, ++s->npeers);
	else if ((p = peer_idlest(s)) != NULL)
		*evicted = p->id;
	if (p != NULL)
		*p = (struct peer){.id = id, .last = ++s->tick};
	pthread_mutex_unlock(&s->peers_mu);
	return p != NULL ? 0 : KILN_EBUSY;
}

/* Give back the slot of connection id. Returns 0, or KILN_ENOTFOUND when
 * it was never admitted. */
int
peer_remove(struct kilnd *d, uint32_t id)
{
	struct kilnd_server *s = d->server;
	struct peer *p;

	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, id, id)) != NULL) {
		*p = (struct peer){0};
		atomic_store(&d->clients, --s->npeers);
	}
	pthread_mutex_unlock(&s->peers_mu);
	return p != NULL ? 0 : KILN_ENOTFOUND;
}

/* Count w's request in its connection's requests in progress. Returns 0,
 * KILN_ECLOSED (the connection is gone) or KILN_EBUSY (it has
 * PEER_MAX_IN_PROGRESS already). */
int
peer_take(struct kilnd_server *s, struct worker *w)
{
	struct peer *p;
	int rv = 0;

	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, w->peer, w->peer)) == NULL)
		rv = KILN_ECLOSED;
	else if (p->in_progress >= PEER_MAX_IN_PROGRESS)
		rv = KILN_EBUSY;
	else {
		p->in_progress++;
		p->last = ++s->tick;
	}
	pthread_mutex_unlock(&s->peers_mu);
	w->counted = rv == 0;
	return rv;
}

/* w is done with its request (answered, given up or dropped). */
void
peer_done(struct kilnd_server *s, struct worker *w)
{
	struct peer *p;

	if (!w->counted)
		return;
	w->counted = 0;
	pthread_mutex_lock(&s->peers_mu);
	if ((p = peer_slot(s, w->peer, w->peer)) != NULL && p->in_progress > 0) {
		p->in_progress--;
		p->last = ++s->tick;
	}
	pthread_mutex_unlock(&s->peers_mu);
}

int
server_pipe_open(struct kilnd *d, uint32_t pipe)
{
	struct kilnd_server *s = d->server;
	int open;

	if (pipe >= UI_PIPE_BASE) /* the dashboard's (ui.h) */
		return ui_pipe_open(d->ui, pipe);
	pthread_mutex_lock(&s->peers_mu);
	open = peer_slot(s, pipe, pipe) != NULL;
	pthread_mutex_unlock(&s->peers_mu);
	return open;
}
