/* kilnd.h — the daemon's one state object and the modules that share it.
 *
 * main.c makes a struct kilnd from the command line, runs it and tears it
 * down; nothing in the daemon is global, so a test could run two in one
 * process. The modules:
 *
 *   runtime.c   detaching, the lock and pid file, stale state, signals
 *   log.c       the log file, mirrored as LogLine events
 *   server.c    nng: the socket, listeners, TLS, pipe notifications
 *   workers.c   the request workers (receive, hand to jobs.c, send)
 *   peers.c     the connections admitted and their requests in progress
 *   jobs.c      the handler threads the workers hand requests to
 *   handlers.c  one function per request type, and the dispatch table
 *   uploads.c   blob puts in progress
 *   verified.c  blobs re-hashed lately (served without re-hashing again)
 *   events.c    the event ring, subscriptions and parked polls
 *   handlers_build.c  build, cancel, build status and why, on engine.h
 *   roles.c     which role a token grants, and what each role may send
 *   ui*.c       the web dashboard: HTTP, its JSON API, events over a
 *               websocket (ui.h)
 *
 * Threads: the main thread runs main.c and runtime.c (start, wait, stop).
 * Requests are handled on cfg.workers handler threads (jobs.c), fed by
 * workers.c's nng callbacks, several at once; whatever they share is either
 * immutable after start (cfg, paths, store handle, tokens) or guarded as
 * noted at each field. */
#ifndef KILND_H
#define KILND_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiln_proto.h"
#include "kiln_store.h"
#include "kiln_clock.h"
#include "roles.h"

#define KILND_VERSION "0.1.0"
/* The largest blob the agent role may upload unless --agent-upload-max
 * says: an agent's outputs, logs and traces, far above any one asset. */
#define KILND_AGENT_UPLOAD_MAX_DEFAULT (4ull << 30)

/* kilnd's exit statuses. */
enum kilnd_exit {
	KILND_CONTINUE = -1,    /* not an exit: main.c's option parsers say
	                         * "the options are fine, go on and run" */
	KILND_EXIT_OK = 0,
	KILND_EXIT_FAIL = 1,    /* could not start or serve */
	KILND_EXIT_USAGE = 2,   /* bad command line */
	KILND_EXIT_RUNNING = 3, /* a daemon already serves this project */
};

/* What the command line sets; read-only once the daemon runs. */
struct kilnd_config {
	const char *project;        /* NULL: found from the current folder */
	const char *store;          /* NULL: <project>/.kiln/store */
	int foreground;             /* do not detach; log to stderr */
	const char *listen;         /* tcp:// or tls+tcp:// address, or NULL */
	const char *token_file;     /* the client role's token (roles.h) */
	const char *agent_token_file; /* the agent role's */
	const char *admin_token_file; /* the admin role's; listen needs one of
	                               * the three */
	const char *tls_cert;       /* PEM certificate (chain) for tls+tcp:// */
	const char *tls_key;        /* PEM private key for tls+tcp:// */
	const char *tls_client_ca;  /* PEM CA: tls+tcp:// clients must present
	                               a certificate it signed; NULL: none asked */
	size_t max_message;         /* largest request accepted, bytes */
	uint32_t event_buffer;      /* events held at most */
	uint64_t event_buffer_bytes; /* bytes of events held at most */
	uint32_t max_subscribers;
	uint32_t max_uploads;
	uint32_t workers;           /* handler threads: requests handled at once */
	uint32_t max_clients;       /* connections at once */
	uint32_t upload_idle_s;     /* an upload idle this long is dropped */
	uint64_t agent_upload_max;  /* the largest blob the agent role may
	                               upload (--agent-upload-max) */
	uint32_t verify_ttl_s;      /* a blob re-hashed this recently and
	                               unchanged is not re-hashed to be served */
	uint32_t build_workers;     /* engine threads deciding steps; 0: cores */
	int no_watch;               /* --no-watch: stat every file every build */
	uint32_t settle_ms;         /* --settle: quiet time before a change that
	                               is not a finished save is reported */
	int local_jobs;             /* --local-jobs: tools run here at most
	                               (0: no cap; -1: every tool on an agent) */
	uint32_t lease_ms;          /* --agent-lease */
	int materialize;            /* --materialize: a kiln_mat_mode; UNSET:
	                               KILN_MATERIALIZE, else the project's */
};

/* Fill c with the defaults. */
void kilnd_config_defaults(struct kilnd_config *c);

struct kilnd_events;
struct kilnd_uploads;
struct kilnd_server;
struct kilnd_verified;
struct kilnd_changes;

/* A budget of one log line per second for a line a client can cause at
 * will (a refused request or connection): without it, a remote peer
 * could fill the disk and the event ring. All zero is ready to use;
 * guarded by log_mu. */
struct kilnd_ratelimit {
	int64_t next_ns;      /* CLOCK_MONOTONIC: lines before it are counted */
	uint64_t suppressed;  /* counted since the last line written */
};

struct kilnd {
	struct kilnd_config cfg;
	/* The umask kilnd was started with (the user's: kiln passes its own
	 * on): build/ follows it; kilnd itself runs under 077. */
	mode_t user_umask;
	struct kiln_paths paths;
	char store_dir[PATH_MAX];
	kiln_store *store;          /* thread-safe by itself */
	uint32_t chunk_size;        /* from cfg.max_message */
	struct role_token tokens[ROLE_COUNT]; /* by role, from the token
	                                         files; len 0 without */
	int64_t start_ns;           /* CLOCK_MONOTONIC at serving */
	int lock_fd;                /* holds flock on paths.lock */
	long stale_pid;             /* a dead daemon's pid found at start */
	int stale_sock;             /* its socket was left behind */
	int ready_fd;               /* to the waiting parent, until ready */
	int wake_fd;                /* eventfd: a stop request for main */
	int sig_fd;                 /* signalfd: SIGTERM, SIGINT */
	int verbose;                /* log DEBUG lines too */

	pthread_mutex_t log_mu;     /* guards log_fd writes, the limiters */
	int log_fd;
	struct kilnd_ratelimit refused_log; /* refused requests */

	struct kilnd_events *events;   /* own lock inside */
	struct kilnd_uploads *uploads; /* own lock inside */
	struct kilnd_server *server;   /* own lock inside */
	struct kilnd_verified *verified; /* own lock inside */
	struct engine *engine;         /* own locks inside (engine.h) */
	struct kilnd_owners *owners;   /* own lock inside (owners.h) */
	struct kilnd_changes *changes; /* own lock inside (changes.h) */
	struct kilnd_agents *agents;   /* own lock inside (agents.h) */
	struct kilnd_ui *ui;           /* the dashboard, own lock (ui.h) */

	atomic_uint_fast64_t requests;     /* answered */
	atomic_uint_fast64_t bad_requests; /* malformed, unknown, refused,
	                                      dropped unanswered */
	atomic_uint clients;               /* pipes admitted and open now */
	atomic_int stopping;               /* set once shutdown begins */
	atomic_int stop_asked;             /* 1: a stop request is on its way; 2: its reason is written */
	atomic_int damage_logged;          /* the store's database was found
	                                      cut short, and the log says so */
	char stop_reason[64];              /* written by the first asker */
};

/* ---- runtime.c ----------------------------------------------------------- */

/* Which process kilnd_detach returned in (besides a negative KILN_E*). */
enum kilnd_detach_side {
	KILND_DETACH_CHILD = 0,  /* the daemon (or cfg.foreground): go on */
	KILND_DETACH_PARENT = 1, /* the command: exit with *parent_exit */
};

/* Detach from the terminal unless cfg.foreground: fork; the parent waits
 * until the child reports ready (kilnd_ready) or failed, then returns
 * KILND_DETACH_PARENT with that exit status in *parent_exit. The child
 * returns KILND_DETACH_CHILD with *parent_exit untouched. A failed pipe or
 * fork returns its KILN_E* code. Call before any nng or thread is made. */
int kilnd_detach(struct kilnd *d, int *parent_exit);

/* Take the project's daemon lock, clear a dead daemon's socket and pid
 * file, write ours. Returns 0, KILN_EBUSY (another daemon holds the lock;
 * its pid in *other) or an error. */
int kilnd_lock(struct kilnd *d, long *other);

/* Tell the waiting parent that the daemon serves (status 0) or failed, with
 * a message for its stderr. No-op in the foreground. */
void kilnd_ready(struct kilnd *d, int status, const char *msg);

/* Block the stop signals in every thread made after this call, and make
 * the eventfd a stop request writes to. Returns 0 or an error. */
int kilnd_signals_init(struct kilnd *d);

/* Wait for SIGTERM, SIGINT or a stop request; fill d->stop_reason. */
void kilnd_wait(struct kilnd *d);

/* Ask the main thread to stop (any thread). */
void kilnd_request_stop(struct kilnd *d, const char *reason);

/* Remove the pid file and the socket, release the lock. */
void kilnd_unlock(struct kilnd *d);


/* ---- log.c --------------------------------------------------------------- */

enum kilnd_level { KILND_INFO, KILND_WARNING, KILND_ERROR, KILND_DEBUG };

/* Open the log: stderr in the foreground, else paths.log (appended). */
int kilnd_log_open(struct kilnd *d);
void kilnd_log_close(struct kilnd *d);

/* Write a line to the log ("<time> kilnd[<pid>] <level>: <text>") and,
 * once the event ring exists and the level is not DEBUG, publish it as a
 * LogLine event. Any thread. */
void kilnd_log(struct kilnd *d, enum kilnd_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* kilnd_log, at most once a second per rl: a line within a second of the
 * last one rl let through is only counted, and the next line written says
 * how many were left out. Any thread. */
void kilnd_log_limited(struct kilnd *d, struct kilnd_ratelimit *rl,
                       enum kilnd_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
