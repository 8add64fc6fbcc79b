/* server_int.h — what the three files of kilnd's nng side share:
 *
 *   server.c   the rep0 socket, its listeners (TLS), admitting connections,
 *              starting and stopping it all
 *   workers.c  the workers: receive a request, have handlers.c answer it
 *              on the handler pool, send the reply
 *   peers.c    the peer table: the connections admitted and their
 *              requests in progress
 *
 * Private to those three; the rest of the daemon sees server.h. */
#ifndef KILND_SERVER_INT_H
#define KILND_SERVER_INT_H

#include <pthread.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "handlers.h"
#include "jobs.h"
#include "server.h"

/* Requests one connection may have in progress: libkiln uses at most 6
 * (a call, a poll, four chunks), and a reply handed to nng is counted
 * until its send callback runs, after the client may have sent again. */
#define PEER_MAX_IN_PROGRESS 16

enum wstate { W_RECV, W_SEND, W_PARK };
enum wjob { JOB_REQUEST, JOB_WAKE }; /* what a queued worker does next */

struct worker {
	struct kilnd *d;
	nng_aio *aio;          /* receive and send */
	nng_aio *sleep;        /* a parked poll's wait, apart: cancelling it
	                          can never hit a send */
	nng_ctx ctx;
	enum wstate state;
	nng_msg *msg;          /* the request being handled or parked */
	Kiln__Request *req;    /* decoded from msg */
	struct kilnd_call call;
	struct ev_waiter waiter;
	int take_parked;       /* the waiter was last parked on the agents'
	                          list (else on the events') */
	int after_stop;
	struct job job;        /* queued on the handler pool */
	enum wjob next;
	uint32_t peer;         /* the connection msg came on */
	int counted;           /* msg is one of peer's requests in progress */
};

/* An admitted connection. */
struct peer {
	uint32_t id;           /* nng's pipe id; 0: free slot */
	uint32_t in_progress;  /* requests received and not yet done with */
	uint64_t last;         /* s->tick when it last sent or was answered */
};

struct kilnd_server {
	nng_socket sock;
	nng_listener ipc, remote;
	nng_tls_config *tls;
	struct worker *workers;
	uint32_t nworkers;
	struct kilnd_jobs *jobs; /* the handler threads */
	atomic_int closing;    /* workers send nothing more */
	const char *urls[2];
	size_t nurls;
	pthread_mutex_t peers_mu;
	struct peer *peers;    /* maxpeers (cfg.max_clients) slots */
	uint32_t maxpeers, npeers;
	uint64_t tick;         /* counts admissions and requests: an age */
	struct kilnd_ratelimit conn_log, drop_log, send_log, evict_log;
};

/* ---- server.c ---- */

/* The KILN_E* code for an nng error. */
int server_err_of_nng(int rv);

/* ---- peers.c (peers_mu taken inside; call without it) ---- */

/* Admit connection id. When every slot is taken, the connection idle
 * longest gives up its slot (*evicted: its id, for the caller to close;
 * else 0). Returns 0, or KILN_EBUSY when every connection has a request
 * in progress. */
int peer_add(struct kilnd *d, uint32_t id, uint32_t *evicted);
/* Give back the slot of connection id. Returns 0, or KILN_ENOTFOUND when
 * it was never admitted. */
int peer_remove(struct kilnd *d, uint32_t id);
/* Count w's request in its connection's requests in progress. Returns 0,
 * KILN_ECLOSED (the connection is gone) or KILN_EBUSY (it has
 * PEER_MAX_IN_PROGRESS already). */
int peer_take(struct kilnd_server *s, struct worker *w);
/* w is done with its request (answered, given up or dropped). */
void peer_done(struct kilnd_server *s, struct worker *w);

/* ---- workers.c ---- */

/* Make cfg.workers + cfg.max_subscribers workers, each with its aios and
 * its context on s->sock. On failure err (len bytes) says why. Returns 0,
 * KILN_ENOMEM or the code of nng's error. */
int workers_make(struct kilnd *d, char *err, size_t len);
/* Done with the request in hand (if any): wait for the next one. */
void worker_recv_next(struct worker *w);
/* Let go of the request the worker holds. */
void worker_request_drop(struct worker *w);

#endif
