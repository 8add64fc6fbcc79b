/* agent.h — `kiln agent`: run a daemon's steps on this machine
 * (docs/agents.md). agent.c is the loop (connect, hello, take, hand jobs
 * to the slots, heartbeat, reconnect); agent_job.c runs one job (fetch
 * its inputs into the local cache, lay them out, check the program, run
 * the tool traced, upload, answer). */
#ifndef KILN_AGENT_H
#define KILN_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiln.h"
#include "kiln_cache.h"
#include "kiln_proto.h"
#include "kiln_store.h"

struct agent_config {
	const char *url;        /* the daemon: tcp://, tls+tcp:// or ipc:// */
	const char *token;      /* its agent token (tcp, tls) */
	const char *tls_ca;
	const char *tls_cert, *tls_key; /* for a daemon that asks for one */
	const char *cache;      /* the local store and work folders */
	const char *name;       /* for people: the host name by default */
	unsigned slots;         /* jobs at once */
	uint64_t cache_max;     /* bytes the cache's blobs may take */
	/* the shared cache (KILN_CACHE_* in the agent's environment): inputs
	 * fetched there first, outputs put there when shared_rw */
	const char *shared_url, *shared_basic, *shared_bearer, *shared_ca;
	int shared_rw;
	volatile sig_atomic_t *stop;  /* set by a signal: leave */
};

/* Run until *stop: returns the process's exit status (0 stopped, 1 could
 * not start: the cache unusable, bad options found late). */
int agent_main(const struct agent_config *cfg);

/* ---- agent.c: the connection answers go on ---- */

/* The connection the agent said hello on. The daemon takes an answer to
 * a lease (AgentDone) only on the connection that took it, so the slots
 * answer here, each on one of its spare contexts, while the loop's takes
 * use the main one. */
struct agent_line {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	kiln_conn *conn;        /* NULL between sessions */
	unsigned busy;          /* bit k: spare context k answers now */
	unsigned users;         /* answers in flight on conn */
};

/* Send q on the line and wait for the daemon's reply: 0, the daemon's
 * code with its words in err, or KILN_ECLOSED when no session is on. */
int agent_line_answer(struct agent_line *l, const Kiln__AgentDoneRequest *q,
                      char *err, size_t len);

/* ---- agent_job.c ---- */

struct kilnd_spawner;

/* What one slot needs to run a job. */
struct agent_slot {
	const struct agent_config *cfg;
	kiln_store *store;      /* the local cache of blobs */
	struct kilnd_spawner *sp;
	char work[4096];        /* this slot's folder: the job's root */
	char shim[4096];        /* libkilntrace.so; "": run untraced */
	char root[4096];        /* the daemon's project folder */
	char need_url[4096 + 16]; /* the relay tools' kiln need talks to ("": none) */
	char kiln_exe[4096];    /* this program, the tools' $KILN */
	uint64_t agent;         /* its id at the daemon */
	kiln_conn *conn;        /* this slot's own connection (NULL: make one):
	                           fetches and uploads */
	struct agent_line *line; /* the agent's hello connection: answers */
	pid_t pid;              /* the tool running now (0: none; __atomic: the loop reads it) */
	struct agent_gc *gc;    /* shared by the slots */
	struct kiln_cache *shared; /* the shared cache (NULL: none) */
	_Atomic uint64_t *bytes_in, *bytes_out; /* the agent's, for its takes */
	atomic_int cancelled;   /* the daemon no longer wants this job (set by
	                           the loop while the slot's thread reads it:
	                           volatile was a data race, ThreadSanitizer) */
};

/* When the cache has grown by an eighth of its bound since the last
 * collection, collect (least recently used blobs first) down to it; one
 * slot at a time. */
struct agent_gc {
	pthread_mutex_t mu;
	uint64_t fetched;       /* bytes put into the cache since the last gc */
	int running;
};
void agent_gc_maybe(struct agent_slot *s, uint64_t fetched);

/* Lay the input f out at its relative path under root (fetched into the
 * cache first when it lacks it). 0, or a code with err saying why. */
int agent_input_place(struct agent_slot *s, const char *root, const Kiln__AgentFile *f,
                      char *err, size_t len);

/* ---- agent_need.c ---- */

/* The folder (into work) of the run whose need token is token: 0, or
 * KILN_ENOTFOUND when no running job has it. */
typedef int (*agent_find_fn)(void *arg, const char *token, char *work, size_t len);

struct agent_relay;

/* Listen for the tools' `kiln need` (its ipc:// address into url) and
 * relay them. 0 or KILN_E*. */
int agent_relay_start(const struct agent_config *cfg, kiln_store *store, agent_find_fn find,
                      void *arg, struct agent_relay **r, char *url, size_t urllen);
void agent_relay_stop(struct agent_relay *r);

/* Run job on slot s and answer it (nothing when cancelled). 0, or the
 * error of the connection (the caller reconnects). */
int agent_job_run(struct agent_slot *s, const Kiln__AgentJob *job);

/* Connect (never starting a daemon). */
int agent_connect(const struct agent_config *cfg, kiln_conn **c);

#endif
