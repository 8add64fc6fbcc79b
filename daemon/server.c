/* server.c — kilnd's nng rep0 socket: opening it, its listeners (the
 * project's ipc:// socket, mode 0600, and cfg.listen on tcp:// or
 * tls+tcp:// with the TLS certificate and key, and with --tls-client-ca
 * the CA that must have signed each client's certificate), admitting
 * connections and noticing them go, and starting and stopping it all.
 *
 * The requests are received, handled and answered by the workers
 * (workers.c); the connections admitted are held in the peer table
 * (peers.c). A connection is admitted before it is used, taking one of
 * cfg.max_clients slots, or the slot of the one idle longest when every
 * slot is taken; an ipc peer of another user is refused.
 *
 * Threads: pipe notifications run on nng's threads, several at once; they
 * touch the peer table (peers.c, under its lock) and the uploads, events
 * and owners (each under its own). server_start/stop run on the main
 * thread, before any callback and after the last. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>

#include "agents.h"
#include "changes.h"
#include "engine.h"
#include "jobs.h"
#include "owners.h"
#include "kiln_clock.h"
#include "server_int.h"

/* The KILN_E* code for an nng error. */
int
server_err_of_nng(int rv)
{
	switch (rv) {
	case 0: return 0;
	case NNG_ENOMEM: return KILN_ENOMEM;
	case NNG_EADDRINUSE: return KILN_EBUSY;
	case NNG_EADDRINVAL:
	case NNG_EINVAL:
	case NNG_ENOTSUP: return KILN_EINVAL;
	case NNG_EPERM: return KILN_EACCES;
	default: return KILN_EIO;
	}
}

/* ---- connections --------------------------------------------------------- */

/* Admit a connection before it is used, taking one of cfg.max_clients
 * slots; refuse an ipc peer of another user (defence in depth behind the
 * socket's mode 0600), or one connection too many. */
static void
pipe_admit(struct kilnd *d, nng_pipe p)
{
	struct kilnd_server *s = d->server;
	uint64_t uid = UINT64_MAX;
	uint32_t evicted;

	if (nng_listener_id(nng_pipe_listener(p)) == nng_listener_id(s->ipc) &&
	    (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0 ||
	     uid != (uint64_t)geteuid())) {
		kilnd_log_limited(d, &s->conn_log, KILND_WARNING, "refused a "
		                  "connection from uid %lld (the daemon's uid is "
		                  "%u)", (long long)uid, geteuid());
		nng_pipe_close(p);
		return;
	}
	if (peer_add(d, (uint32_t)nng_pipe_id(p), &evicted) != 0) {
		kilnd_log_limited(d, &s->conn_log, KILND_WARNING, "refused a "
		                  "connection: %u clients connected already, "
		                  "none idle (--max-clients)", d->cfg.max_clients);
		nng_pipe_close(p);
	} else if (evicted != 0) {
		nng_pipe old = NNG_PIPE_INITIALIZER;
		old.id = evicted;
		kilnd_log_limited(d, &s->evict_log, KILND_WARNING, "closed idle "
		                  "client %u to admit a new one: %u clients "
		                  "connected (--max-clients)", evicted,
		                  d->cfg.max_clients);
		nng_pipe_close(old); /* its REM_POST drops what it held */
	}
}

/* Connections come and go (nng's pipe notifications). A refused one is
 * notified of its removal too, but never held a slot; an evicted one no
 * longer holds one. */
static void
pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct kilnd *d = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);

	switch (ev) {
	case NNG_PIPE_EV_ADD_PRE:
		pipe_admit(d, p);
		break;
	case NNG_PIPE_EV_ADD_POST:
		kilnd_log(d, KILND_DEBUG, "client %u connected (%u now)", id,
		          atomic_load(&d->clients));
		break;
	case NNG_PIPE_EV_REM_POST:
		/* After the slot is gone: a handler that registers something
		 * for this connection later sees it closed (server_pipe_open).
		 * An evicted connection's slot went to another already, so
		 * this runs whether or not one was found; for a refused
		 * connection there is nothing to drop. */
		if (peer_remove(d, id) == 0)
			kilnd_log(d, KILND_DEBUG, "client %u disconnected", id);
		uploads_pipe_closed(d->uploads, id);
		events_pipe_closed(d->events, id);
		owners_pipe_closed(d->owners, id);
		changes_hold(d->changes, id, 0);
		if (d->engine != NULL)
			engine_agent_pipe_closed(d->engine, id);
		break;
	default:
		break;
	}
}

/* ---- listeners ----------------------------------------------------------- */

/* Read a whole (small) text file into a malloc'd string. */
static int
file_slurp(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n;
	long size;

	*out = NULL;
	if (f == NULL)
		return kiln_err_from_errno(errno);
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    size > (1 << 20) || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t)size + 1)) == NULL) {
		fclose(f);
		return buf == NULL ? KILN_ENOMEM : KILN_EIO;
	}
	n = fread(buf, 1, (size_t)size, f);
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* With --tls-client-ca, mutual TLS: the handshake fails unless the client
 * presents a certificate that CA signed, so a peer without one never gets
 * as far as sending a token. */
static int
tls_client_auth(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	int rv;

	if (d->cfg.tls_client_ca == NULL)
		return 0;
	if ((rv = nng_tls_config_ca_file(s->tls, d->cfg.tls_client_ca)) != 0 ||
	    (rv = nng_tls_config_auth_mode(s->tls,
	                                   NNG_TLS_AUTH_MODE_REQUIRED)) != 0) {
		snprintf(err, len, "--tls-client-ca %s: %s", d->cfg.tls_client_ca,
		         nng_strerror(rv));
		return rv == NNG_ENOMEM ? KILN_ENOMEM : KILN_EINVAL;
	}
	return 0;
}

/* A server TLS configuration from the PEM certificate and key files. */
static int
tls_setup(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	char *cert = NULL, *key = NULL;
	int rv;

	if ((rv = file_slurp(d->cfg.tls_cert, &cert)) != 0 ||
	    (rv = file_slurp(d->cfg.tls_key, &key)) != 0) {
		snprintf(err, len, "reading %s: %s", cert ? d->cfg.tls_key :
		         d->cfg.tls_cert, kiln_strerror(rv));
		goto fail;
	}
	if ((rv = nng_tls_config_alloc(&s->tls, NNG_TLS_MODE_SERVER)) != 0 ||
	    (rv = nng_tls_config_own_cert(s->tls, cert, key, NULL)) != 0) {
		snprintf(err, len, "TLS certificate %s / key %s: %s",
		         d->cfg.tls_cert, d->cfg.tls_key, nng_strerror(rv));
		rv = KILN_EINVAL;
		goto fail;
	}
	if ((rv = tls_client_auth(d, err, len)) != 0)
		goto fail;
	if ((rv = nng_listener_set_ptr(s->remote, NNG_OPT_TLS_CONFIG,
	                               s->tls)) != 0) {
		snprintf(err, len, "TLS on %s: %s", d->cfg.listen, nng_strerror(rv));
		rv = server_err_of_nng(rv);
	}
fail:
	free(cert);
	free(key);
	return rv;
}

/* Create, bound and start one listener on url into *l. */
static int
listen_on(struct kilnd *d, const char *url, nng_listener *l, int ipc,
          char *err, size_t len)
{
	struct kilnd_server *s = d->server;
	int rv;

	if ((rv = nng_listener_create(l, s->sock, url)) != 0 ||
	    (rv = nng_listener_set_size(*l, NNG_OPT_RECVMAXSZ,
	                                d->cfg.max_message)) != 0 ||
	    (ipc && (rv = nng_listener_set_int(*l, NNG_OPT_IPC_PERMISSIONS,
	                                       0600)) != 0)) {
		snprintf(err, len, "%s: %s", url, nng_strerror(rv));
		return server_err_of_nng(rv);
	}
	if (!ipc) { /* known as remote before its first connection */
		s->remote = *l;
		if (strncmp(url, "tls+tcp://", 10) == 0 &&
		    (rv = tls_setup(d, err, len)) != 0)
			return rv;
	}
	if ((rv = nng_listener_start(*l, 0)) != 0) {
		snprintf(err, len, "listening on %s: %s", url, nng_strerror(rv));
		return server_err_of_nng(rv);
	}
	s->urls[s->nurls++] = url;
	return 0;
}

size_t
server_listen_urls(struct kilnd *d, const char **urls, size_t max)
{
	size_t n = d->server->nurls < max ? d->server->nurls : max;

	memcpy(urls, d->server->urls, n * sizeof(*urls));
	return n;
}

/* ---- start and stop ------------------------------------------------------ */

int
server_start(struct kilnd *d, char *err, size_t len)
{
	struct kilnd_server *s;
	int rv;

	if ((s = d->server = calloc(1, sizeof(*s))) == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&s->peers_mu, NULL);
	s->maxpeers = d->cfg.max_clients ? d->cfg.max_clients : 1;
	if ((s->peers = calloc(s->maxpeers, sizeof(*s->peers))) == NULL)
		return KILN_ENOMEM;
	if ((rv = nng_rep0_open(&s->sock)) != 0 ||
	    (rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ,
	                              d->cfg.max_message)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, d)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, d)) != 0 ||
	    (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, d)) != 0) {
		snprintf(err, len, "opening the socket: %s", nng_strerror(rv));
		return server_err_of_nng(rv);
	}
	if ((rv = jobs_new(d->cfg.workers, &s->jobs)) != 0) {
		snprintf(err, len, "starting %u handler threads: %s", d->cfg.workers,
		         kiln_strerror(rv));
		return rv;
	}
	if ((rv = workers_make(d, err, len)) != 0)
		return rv;
	for (uint32_t i = 0; i < s->nworkers; i++)
		worker_recv_next(&s->workers[i]);
	if ((rv = listen_on(d, d->paths.url, &s->ipc, 1, err, len)) != 0)
		return rv;
	if (d->cfg.listen != NULL) {
		nng_listener l;
		if ((rv = listen_on(d, d->cfg.listen, &l, 0, err, len)) != 0)
			return rv;
	}
	return 0;
}

/* At most this long waiting at stop for the answers to parked polls. */
#define STOP_SEND_WAIT_MS 3000

/* Whether a worker holds a parked request or a reply being sent. */
static int
workers_answering(struct kilnd_server *s)
{
	for (uint32_t i = 0; s->workers != NULL && i < s->nworkers; i++) {
		enum wstate st = __atomic_load_n(&s->workers[i].state, __ATOMIC_ACQUIRE);
		if (st == W_PARK || st == W_SEND)
			return 1;
	}
	return 0;
}

void
server_stop(struct kilnd *d)
{
	struct kilnd_server *s = d->server;
	struct events_stats evs;

	if (s == NULL)
		return;
	/* Parked polls answer now, with the Stopping event (a poll from now
	 * on is answered at once, never parked: poll_answer); wait for the
	 * replies to be handed to their connections, and give them a moment
	 * to leave, before the connections close. A fixed 50 ms alone lost
	 * the Stopping event on a busy machine. */
	events_stats(d->events, &evs);
	events_wake_all(d->events);
	agents_wake_all(d->agents);
	/* ... and for subscribers that were between two polls to come for
	 * it: one that missed it polled a closed socket until its timeout */
	for (int64_t until = kiln_mono_ns() + STOP_SEND_WAIT_MS * 1000000LL;
	     (workers_answering(s) || !events_all_sent(d->events, evs.head)) &&
	     kiln_mono_ns() < until;)
		usleep(2 * 1000);
	usleep(50 * 1000);
	/* From here on nothing is parked, queued or sent: the handlers finish
	 * what they hold, then the socket closes and the aios stop (their
	 * last callbacks only let go of what they hold). */
	atomic_store(&s->closing, 1);
	if (s->jobs != NULL)
		jobs_stop(s->jobs);
	/* Take back the replies still queued behind another on their
	 * connection (on_sent frees them). Left queued, nng 1.5.2 may hand
	 * one to a connection nng_close is closing, which then never frees
	 * it: rep0's send callback starts the next reply while rep0's pipe
	 * close has already closed the pipe's send aio. */
	for (uint32_t i = 0; s->workers != NULL && i < s->nworkers; i++)
		if (s->workers[i].aio != NULL)
			nng_aio_cancel(s->workers[i].aio);
	nng_close(s->sock);
	for (uint32_t i = 0; s->workers != NULL && i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];
		/* A poll or take parked after the wakes above is still on the
		 * events' or the agents' list, where the engine may wake it (a
		 * published event, a job for agents: until engine_free) by
		 * cancelling its sleep: taken off before that sleep is freed,
		 * and before the workers are. */
		if (w->take_parked && d->agents != NULL)
			agents_unpark(d->agents, &w->waiter);
		else
			events_unpark(d->events, &w->waiter);
		if (w->sleep != NULL)
			nng_aio_free(w->sleep); /* stops it, waiting for its callback */
		if (w->aio != NULL)
			nng_aio_free(w->aio);
		worker_request_drop(w);
	}
	jobs_free(s->jobs);
	free(s->workers);
	if (s->tls != NULL)
		nng_tls_config_free(s->tls);
	pthread_mutex_destroy(&s->peers_mu);
	free(s->peers);
	free(s);
	d->server = NULL;
}
