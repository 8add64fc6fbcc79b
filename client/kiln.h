/* kiln.h — libkiln, the C API that editors, tools and the kiln command use
 * to talk to kilnd, the daemon of a project.
 *
 *   kiln_conn *c;
 *   if (kiln_connect(NULL, &c) == 0) {          // starts kilnd if needed
 *           kiln_status st;
 *           kiln_status_get(c, &st);
 *           kiln_close(c);
 *   }
 *
 * Every function returns 0 or a negative KILN_E* code (kiln_error.h;
 * kiln_strerror() names it); kiln_conn_error() adds the daemon's own words
 * for the last failure. A kiln_conn may be used by one thread at a time;
 * a subscription with a callback runs on a thread of its own.
 *
 * Link with: libkiln.a libkilnproto.a libkilnstore.a, kiln's own nng
 * (PREFIX/lib/kiln/libnng.a: Debian's has a listener bug, see the README),
 * -lmbedtls -lmbedx509 -lmbedcrypto -lprotobuf-c -lxxhash -llmdb -lpthread. */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_error.h"
#include "kiln_store.h" /* kiln_id and its hex helpers */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_conn kiln_conn;

/* ---- connecting ---------------------------------------------------------- */

enum kiln_connect_flags {
	/* Fail with KILN_ENODAEMON instead of starting kilnd. */
	KILN_CONNECT_NO_START = 1 << 0,
};

typedef struct kiln_connect_opts {
	/* The project folder; NULL: the nearest folder upward from the
	 * current one holding kiln.yaml, else the current folder. */
	const char *project;
	/* Talk to this address instead of the project's socket:
	 * tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc://PATH. Never starts a
	 * daemon. */
	const char *url;
	const char *token;    /* the daemon's --token-file secret (tcp, tls) */
	const char *tls_ca;   /* PEM file of the CA that signed the daemon's
	                         certificate (tls+tcp://) */
	/* Our certificate and its private key (PEM files, both or neither),
	 * for a daemon that asks for one (kilnd --tls-client-ca). */
	const char *tls_cert;
	const char *tls_key;
	/* The kilnd program to start; NULL: $KILND, else kilnd next to the
	 * running program, else kilnd on $PATH. */
	const char *kilnd;
	unsigned flags;       /* kiln_connect_flags */
	int timeout_ms;       /* per request; 0: 30 s */
	size_t max_message;   /* largest message sent or accepted; 0: 2 MiB */
} kiln_connect_opts;

/* Connect to the project's daemon (o may be NULL: all defaults). When none
 * answers, start one — race-free: of many clients starting at once exactly
 * one daemon results — and wait until it serves. Returns 0, KILN_ENODAEMON
 * (none runs, none could be started), KILN_ERANGE (the project path is too
 * long for a unix socket), KILN_EINVAL, KILN_ETLS (tls+tcp://: a
 * certificate did not verify, the daemon's or ours), KILN_ENOMEM or
 * KILN_EIO. */
int kiln_connect(const kiln_connect_opts *o, kiln_conn **c);

/* Close the connection (ending its subscription). NULL is allowed. */
void kiln_close(kiln_conn *c);

/* The daemon's explanation of the last failed request on c ("" if none).
 * Valid until the next call on c. */
const char *kiln_conn_error(const kiln_conn *c);

/* ---- the daemon ---------------------------------------------------------- */

typedef struct kiln_status {
	uint32_t pid;
	uint64_t uptime_ms;
	char version[32];
	char project[4096];
	char store[4096];
	char listen[2][4096 + 16]; /* addresses, "" when unused */
	uint32_t clients;          /* connections open (this one included) */
	uint32_t subscribers;
	uint32_t uploads;          /* blob puts in progress */
	uint32_t build_queue;      /* build steps queued */
	uint64_t event_seq, event_epoch; /* the newest event's cursor */
	uint32_t events_held;
	uint64_t events_bytes;
	uint64_t requests, bad_requests;
	uint64_t max_message;
	uint32_t chunk_size;
	uint32_t event_buffer;
	uint64_t event_buffer_bytes;
	/* the shared cache (docs/cache.md): url "" when none is in use */
	char cache_url[512];
	char cache_mode[16];       /* "off", "read", "readwrite" */
	uint64_t cache_hits;       /* steps downloaded from it */
	uint64_t cache_misses;     /* steps looked up there in vain */
	uint64_t cache_bytes_down, cache_bytes_up;
	uint64_t cache_errors;     /* transfers that failed */
	uint64_t cache_dropped;    /* uploads dropped */
	int cache_breaker_open;    /* it is not asked for a while */
	uint64_t cache_uploaded;   /* results uploaded */
	uint32_t cache_pending;    /* results and transfers still to upload */
	uint64_t cache_corrupt;    /* blobs or entries refused as corrupt */
	uint64_t cache_skipped_uploads; /* blobs not sent: the server had them */
	/* build agents connected now (kiln agent): nagents of them, the
	 * first 64 listed */
	uint32_t nagents;
	struct kiln_agent_status {
		char name[64];
		uint32_t slots, running;  /* its slots, steps it holds now */
		uint64_t ran, failed, refused;
		uint64_t bytes_in, bytes_out; /* blob bytes fetched and sent */
	} agents[64];
	/* the store (docs/store.md, "Figures"); added after the fields
	 * above, which keep their offsets */
	uint64_t store_blobs, store_bytes;
	int store_exact;           /* 0: bytes misses an older kiln's puts */
	int store_stats_known;     /* 0: an older daemon, or store_error */
	char store_error[128];     /* why the daemon could not read them */
	int gc_running;            /* a gc (any process's) runs now */
	int64_t gc_started_ns;     /* its start, wall clock; 0 when none */
	int64_t last_gc_start_ns, last_gc_end_ns; /* 0: none finished yet */
	uint64_t last_gc_removed_blobs, last_gc_removed_bytes;
	uint64_t last_gc_removed_actions;
	uint64_t last_gc_max_size; /* its size budget (0: none) */
} kiln_status;

int kiln_status_get(kiln_conn *c, kiln_status *st);

/* Ask the daemon to stop. Returns once it has acknowledged; it then closes
 * its connections and exits. */
int kiln_stop(kiln_conn *c);

/* ---- blobs --------------------------------------------------------------- */

/* Where a blob is named in the index. */
typedef struct kiln_name {
	const char *profile;
	const char *url;
} kiln_name;

/* For each of n ids (at most 4096): present[i] is 1 when the daemon's
 * store holds it, and sizes[i] (sizes may be NULL) its size. */
int kiln_blob_has(kiln_conn *c, const kiln_id *ids, size_t n, int *present,
                  uint64_t *sizes);

/* Receives a blob's bytes in order; a non-zero return stops the transfer
 * and is returned by the get. */
typedef int (*kiln_sink_fn)(const void *buf, size_t len, void *arg);

/* Fetch the blob id in chunks, several in flight, and hand its bytes to
 * sink. The daemon re-hashes the blob before sending a byte (corrupt
 * content fails with KILN_ECORRUPT and nothing reaches sink) and libkiln
 * re-hashes what arrived (KILN_ECORRUPT at the end if it differs). Also
 * KILN_ENOTFOUND, KILN_ETIMEDOUT, KILN_ECLOSED, KILN_EIO. */
int kiln_blob_get(kiln_conn *c, const kiln_id *id, kiln_sink_fn sink,
                  void *arg);

/* The same for the blob the index names (profile, url); *id (may be NULL)
 * gets its id. */
int kiln_blob_get_name(kiln_conn *c, const kiln_name *name, kiln_sink_fn sink,
                       void *arg, kiln_id *id);

/* kiln_blob_get writing to a file descriptor. */
int kiln_blob_get_fd(kiln_conn *c, const kiln_id *id, int fd);

/* Store len bytes; *id gets their hash. The daemon checks the bytes it
 * received hash to it before publishing (KILN_ECORRUPT otherwise). With
 * name (may be NULL) the index then maps (profile, url) to the blob. */
int kiln_blob_put(kiln_conn *c, const void *buf, size_t len,
                  const kiln_name *name, kiln_id *id);

/* The same for everything readable from fd, streamed in chunks (a file, a
 * pipe: any size, never held whole in memory). */
int kiln_blob_put_fd(kiln_conn *c, int fd, const kiln_name *name, kiln_id *id);

/* ---- events -------------------------------------------------------------- */

/* A position in the daemon's event stream: its instance and the sequence
 * number of the last event seen. */
typedef struct kiln_cursor {
	uint64_t epoch;
	uint64_t seq;
} kiln_cursor;

typedef enum kiln_event_type {
	KILN_EVENT_OTHER = 0,   /* a kind this libkiln does not know */
	KILN_EVENT_OVERFLOW,    /* events were lost: resynchronize */
	KILN_EVENT_LOG,         /* a line of the daemon's log */
	KILN_EVENT_BLOB_STORED, /* a blob was put */
	KILN_EVENT_STOPPING,    /* the daemon is stopping */
	KILN_EVENT_STEP,        /* a build step finished (see step) */
	KILN_EVENT_BUILD_DONE,  /* a build ended (see build) */
	KILN_EVENT_SOURCES_CHANGED, /* project files changed (see paths) */
	KILN_EVENT_STEP_STARTED, /* a build step's tool started (see started) */
	KILN_EVENT_SNAPSHOT,    /* a step's state at the start (see state) */
	KILN_EVENT_SNAPSHOT_END, /* the snapshot is whole (see steps, text) */
} kiln_event_type;

typedef enum kiln_step_result {
	KILN_STEP_RAN,          /* its tool ran and succeeded */
	KILN_STEP_REUSED,       /* a cached result was used */
	KILN_STEP_FAILED,
	KILN_STEP_SKIPPED,      /* a prerequisite failed */
	KILN_STEP_CANCELLED,
	KILN_STEP_WOULD_RUN,    /* a dry run: out of date */
} kiln_step_result;

typedef struct kiln_step_output {
	const char *name;       /* "out", or the output's name */
	kiln_id id;
	uint64_t size;
	const char *path;       /* materialized, relative to the project */
} kiln_step_output;

typedef struct kiln_step_event {
	const uint64_t *builds; /* the builds that wanted the step */
	size_t nbuilds;
	const char *profile, *url;
	kiln_step_result result;
	const char *reason;     /* why it ran (or would run) */
	const char *error;      /* FAILED: what went wrong, the tool's last lines */
	const kiln_step_output *outputs;
	size_t noutputs;
	int exit_code, signal;
	int has_log;
	kiln_id log;            /* the tool's stdout and stderr, in the store */
	uint64_t duration_ns;
	uint32_t done, total;   /* progress of builds[0] */
	const char *const *warnings; /* RAN or REUSED: paths its run used that
	                           kiln could not record as dependencies, one
	                           sentence each (docs/build.md) */
	size_t nwarnings;
	const char *machine;    /* RAN or FAILED on a build agent: its name;
	                           "" on the daemon's machine */
	uint64_t left_ns;       /* builds[0]'s unfinished steps' recorded tool
	                           time (docs/build.md, "Progress") */
	uint64_t estimate_ns;   /* how long its tool was expected to take when
	                           it started (0: no tool ran; docs/build.md,
	                           "Scheduling") */
} kiln_step_event;

typedef struct kiln_step_started {
	const uint64_t *builds; /* the builds that want the step */
	size_t nbuilds;
	const char *profile, *url;
	uint64_t expected_ns;   /* its last recorded run's duration; 0: unknown */
	uint32_t done, total;   /* progress of builds[0] */
	uint64_t left_ns;       /* as kiln_step_event's */
} kiln_step_started;

/* A step's state in a subscription's snapshot (kiln_events_snapshot). */
typedef enum kiln_step_state_kind {
	KILN_STATE_BUILT,       /* outputs are its last successful build's */
	KILN_STATE_FAILED,      /* its last build failed; outputs: its last
	                           good ones, if the index has any */
	KILN_STATE_SKIPPED,     /* a prerequisite failed in its last build */
	KILN_STATE_CANCELLED,   /* its last build was cancelled */
	KILN_STATE_NOT_BUILT,   /* no output known: never built */
} kiln_step_state_kind;

typedef struct kiln_step_state {
	const char *profile, *url;
	kiln_step_state_kind state;
	const kiln_step_output *outputs; /* what is in build/ for it: the
	                           file to load (path), its hash (id) */
	size_t noutputs;
	int building;           /* a build has it queued or running: a STEP
	                           event follows (unless it is found up to
	                           date, which sends none) */
	const char *error;      /* FAILED: what went wrong, if the daemon still
	                           knows ("" if not) */
} kiln_step_state;

typedef struct kiln_build_summary {
	uint64_t build;
	const char *profile;
	int done;               /* 0: still running */
	uint32_t total, ran, reused, failed, skipped, cancelled, would_run;
	uint64_t duration_ns;
	uint64_t files_statted; /* files stat'ed to decide (the rest: inotify) */
	const char *index;      /* the index map, relative to the project */
	const char *error;      /* a build-wide problem ("" if none) */
} kiln_build_summary;

typedef struct kiln_event {
	kiln_cursor at;         /* its epoch and seq */
	int64_t time_ns;        /* CLOCK_REALTIME */
	kiln_event_type type;
	/* OVERFLOW: new_epoch (the daemon restarted) or lost events
	 * first_lost..last_lost; or evicted: the daemon closed this
	 * subscription to make room for a newer one (its --max-subscribers
	 * were all open). Nothing is lost yet: the next kiln_events_poll
	 * subscribes again from the cursor, evicting the oldest in turn, so
	 * a client that only watches should stop instead. */
	int new_epoch, evicted;
	uint64_t first_lost, last_lost;
	/* LOG: level 0 info, 1 warning, 2 error; text. STOPPING: text is the
	 * reason. */
	int level;
	const char *text;
	/* BLOB_STORED: id, size, and profile/url when named ("" if not). */
	kiln_id id;
	uint64_t size;
	const char *profile, *url;
	/* STEP and BUILD_DONE. */
	const kiln_step_event *step;
	const kiln_build_summary *build;
	/* STEP_STARTED */
	const kiln_step_started *started;
	/* SNAPSHOT: one step's state (kiln_events_snapshot). SNAPSHOT_END:
	 * steps, how many the snapshot held, and text, why it is empty when
	 * the daemon could not take it (the descriptions have errors, or it
	 * holds too many snapshots already; "" if it could). */
	const kiln_step_state *state;
	uint64_t steps;
	/* SOURCES_CHANGED: the daemon's watch saw these project files change
	 * (relative to the project; at most 64, and `more` further ones), or
	 * everything: it lost track, anything may have changed. A live build
	 * builds again when it sees one (kiln_live). */
	const char *const *paths;
	size_t npaths;
	uint32_t more;
	int everything;
} kiln_event;

/* Strings in a kiln_event are valid until the next events call on c. */

/* Subscribe c to the daemon's events, from now (since NULL) or resuming
 * after *since (then every later event the daemon still holds is
 * delivered, or an OVERFLOW event says which were lost), filtered as
 * kiln_events_filter set (if it did). One subscription per connection.
 * If the connection drops, polling resubscribes from the cursor
 * (kiln_events_cursor). KILN_EINVAL: the daemon refused the filter
 * (kiln_conn_error says why). */
int kiln_subscribe(kiln_conn *c, const kiln_cursor *since);

/* The next event, waiting at most timeout_ms (0: do not wait). Returns 0
 * with *ev filled, KILN_ETIMEDOUT when none came, or an error:
 * KILN_ECLOSED also when the daemon gave no answer at all within the
 * poll's wait plus the connection's timeout (it stopped without this
 * client seeing its STOPPING event, or it hangs). */
int kiln_events_poll(kiln_conn *c, int timeout_ms, kiln_event *ev);

/* Let the daemon gather events for up to gather_ms (0, the default: no
 * gathering; at most 100) after each poll reply that brought events,
 * before it answers the next poll with step or log events. A fast stream
 * (a full build's steps) then comes in a few large batches, which costs
 * the daemon and the client far less than a round trip per event; the
 * first event after a quiet spell and every other kind (a build finished,
 * the daemon stopping) still come at once. `kiln build` uses 100 ms. 0
 * or KILN_EINVAL. */
int kiln_events_gather(kiln_conn *c, int gather_ms);

/* The cursor to resume from later: the last event delivered, or past it
 * when the daemon said that the events after it were left out by the
 * subscription's filter (kiln_events_filter). */
int kiln_events_cursor(const kiln_conn *c, kiln_cursor *cur);

/* Which events the daemon sends a subscription (docs/protocol.md,
 * "Filters"): a STEP only when its URL matches one of urls (URL globs as
 * kiln build takes them; none: any URL) and its profile is profile (NULL
 * or "": any); a BUILD_DONE only when its profile is; a BLOB_STORED whose
 * put named an index entry as a STEP; every other kind always (OVERFLOW,
 * LOG, STOPPING, SOURCES_CHANGED). What a filter leaves out never leaves
 * the daemon. The sequence numbers delivered then have gaps, which lose
 * nothing: only an OVERFLOW says events were lost. */
#define KILN_EVENT_FILTER_MAX_URLS 16   /* globs, each at most 1024 bytes */
#define KILN_EVENT_FILTER_MAX_PROFILE 255
typedef struct kiln_event_filter {
	const char *const *urls;
	size_t nurls;
	const char *profile;
} kiln_event_filter;

/* Filter the subscriptions c opens from now on (kiln_subscribe,
 * kiln_subscribe_cb, kiln_live, and libkiln's own resubscriptions) by f;
 * NULL (or an empty filter) ends filtering. f and its strings are copied.
 * The daemon judges the filter when c subscribes: it refuses one over the
 * limits above or with a malformed glob (KILN_EINVAL, kiln_conn_error
 * says which). A daemon older than filters ignores them: it sends every
 * event. Returns 0, KILN_EBUSY (c is subscribed), KILN_EINVAL (f->urls
 * NULL with nurls > 0) or KILN_ENOMEM. */
int kiln_events_filter(kiln_conn *c, const kiln_event_filter *f);

/* Start the subscriptions c opens from now on from nothing (kiln_subscribe
 * with since NULL, kiln_subscribe_cb, kiln_live) with a snapshot (on 1;
 * 0 ends it): a SNAPSHOT event for every step the filter passes, with its
 * state and outputs at the moment the subscription starts (in which
 * profile, under which path, with which hash: what an editor starting up
 * loads), by profile then URL, then one SNAPSHOT_END, then the stream's
 * events from that very moment: a step that finishes meanwhile comes once,
 * in the snapshot or as a STEP event after it, never both and never
 * neither. Their cursor (ev->at) is the one the stream starts from. The
 * daemon sends the snapshot in pages (a project of 100,000 steps is
 * several hundred replies); if the connection drops while they are read,
 * libkiln subscribes again and the snapshot starts over (its steps may
 * then come twice before the SNAPSHOT_END). A subscription resuming after
 * a cursor gets none (it gets the events it missed). From a daemon older
 * than snapshots only the SNAPSHOT_END comes (steps 0). Returns 0 or
 * KILN_EBUSY (c is subscribed). */
int kiln_events_snapshot(kiln_conn *c, int on);

/* Called on libkiln's own thread for each event; a non-zero return ends
 * the subscription. */
typedef int (*kiln_event_fn)(const kiln_event *ev, void *arg);

/* Subscribe as kiln_subscribe, then deliver every event to fn on a thread
 * of libkiln's until kiln_unsubscribe, kiln_close or fn returns non-zero.
 * Meanwhile c serves other requests (not kiln_events_poll). */
int kiln_subscribe_cb(kiln_conn *c, const kiln_cursor *since, kiln_event_fn fn,
                      void *arg);

/* End the subscription (joining the callback thread, if any). */
int kiln_unsubscribe(kiln_conn *c);

/* ---- builds (docs/build.md) ---------------------------------------------- */

typedef struct kiln_build_opts {
	const char *const *targets; /* URLs or URL globs; none: every step */
	size_t ntargets;
	const char *profile;        /* NULL or "": the project's first */
	unsigned jobs;              /* tools at once; 0: the daemon's cores */
	int keep_going;             /* build what does not depend on a failure */
	int dry_run;                /* say what would run, run nothing */
	unsigned priority;          /* 0 batch; higher runs first */
	const char *path;           /* where the build looks its tools'
	                               programs up (PATH syntax), unless the
	                               project pins `path:`; the CLI passes its
	                               own $PATH. NULL or "": the daemon's */
} kiln_build_opts;

/* A live build: keep the steps of o up to date until *stop is set (checked
 * at least every 200 ms; NULL: never) or fn returns nonzero. Builds now,
 * then again after every SOURCES_CHANGED event (once the build running
 * then has ended). fn gets the live builds' STEP and BUILD_DONE events and
 * the SOURCES_CHANGED events (first, with kiln_events_snapshot, the
 * SNAPSHOT events of what was built before, and the SNAPSHOT_END); a
 * rebuild the daemon refuses (the
 * descriptions have errors) comes as an error LOG event whose text is the
 * daemon's, and the next change tries again. An OVERFLOW event (this
 * client fell behind the daemon's event buffer) reaches fn too: the lost
 * events are not replayed, but a live build whose end was among them is
 * given to fn as its BUILD_DONE from the build's summary, and everything
 * is built again, as lost events may have been changes (an editor may
 * reload all it shows). Subscribes c (from now) and
 * polls it: use no other events calls on c meanwhile. With a filter set by
 * kiln_events_filter, fn gets only the STEP events it passes (an editor
 * names the assets it reloads; their prerequisites' steps stay in the
 * daemon); its profile, if any, must be the one built (else KILN_EINVAL).
 * Returns 0 when stopped (a build still running is cancelled), the
 * initial build's refusal as kiln_build_start's, or a KILN_E* code
 * (KILN_ECLOSED: the daemon is stopping). */
int kiln_live(kiln_conn *c, const kiln_build_opts *o, const volatile int *stop,
              kiln_event_fn fn, void *arg);

/* Hold the daemon's change reports (SOURCES_CHANGED) while many files
 * change at once — a version-control checkout — and release them as one
 * batch afterwards (Watchman's state-enter/leave): KILN_HOLD, then
 * KILN_RELEASE. The hold is c's and ends when c closes; while any client
 * holds, nothing is reported, and the last release reports everything
 * that changed meanwhile at once. KILN_RELEASE_ALL ends every client's
 * hold. Returns 0, KILN_EBUSY (64 connections hold already), or a
 * connection error. */
enum kiln_hold { KILN_HOLD, KILN_RELEASE, KILN_RELEASE_ALL };
int kiln_changes_hold(kiln_conn *c, enum kiln_hold what);

/* Whether c's hold is on: 1, 0 (never taken, released by c, or ended by
 * another client's KILN_RELEASE_ALL), or a connection error (the daemon
 * stopped: every hold ended with it). */
int kiln_changes_held(kiln_conn *c);

/* Have the daemon serve its web dashboard (docs/ui.md) on port (0: any
 * free one) of listen (NULL or "": 127.0.0.1; another address needs the
 * daemon's client token); url gets its address, secret included. A daemon
 * serving it already answers with the URL it has. Over the ipc socket
 * only (admin). Returns 0, KILN_EINVAL (the reason in kiln_conn_error),
 * KILN_EBUSY (the port is taken), or a connection error. */
int kiln_ui_start(kiln_conn *c, unsigned port, const char *listen, char *url,
                  size_t len);

/* Start a build. Its progress comes as STEP events and its end as a
 * BUILD_DONE event naming *build: subscribe before starting it. On 0,
 * *build, *nsteps and profile (the profile built, profilelen bytes) are
 * set. KILN_EBADPROJECT: the descriptions have errors (kiln_conn_error
 * lists them); KILN_EINVAL: unknown profile or target; KILN_EBUSY. */
int kiln_build_start(kiln_conn *c, const kiln_build_opts *o, uint64_t *build,
                     uint32_t *nsteps, char *profile, size_t profilelen);

/* Cancel a build (the steps no other build needs). */
int kiln_build_cancel(kiln_conn *c, uint64_t build);

/* A build's summary, running or ended (strings valid until the next call
 * on c). KILN_ENOTFOUND once the daemon forgot it. */
int kiln_build_status(kiln_conn *c, uint64_t build, kiln_build_summary *s);

typedef struct kiln_why_change {
	const char *label;      /* "in art/a.png", "param padding", "tool exe" */
	char before[80], after[80]; /* shown values ("" when absent): a hash's
	                              first 8 hex digits, or the text */
} kiln_why_change;

typedef struct kiln_why_info {
	int decision;           /* 0 ran, 1 reused, 2 failed */
	const char *reason;
	const kiln_why_change *changes;
	size_t nchanges;
	int64_t time_ns;        /* when decided (CLOCK_REALTIME) */
	uint64_t duration_ns;   /* the tool's run */
	int has_log;
	kiln_id log;
	const kiln_step_output *outputs;
	size_t noutputs;
	const char *error;      /* failed: why */
	int this_daemon;        /* decided by the running daemon's builds */
	int traced;             /* ran or reused: its run was file-access
	                           traced (every process) */
	const char *const *warnings; /* ran or reused: the result's warnings
	                           (paths it could not record) */
	size_t nwarnings;
	const char *program;    /* the program the tool ran, absolute ("":
	                           unknown) */
	const char *machine;    /* the build agent that ran it ("": the
	                           daemon's machine) */
} kiln_why_info;

/* Why the last build of profile (NULL: the first) ran or reused url.
 * Strings valid until the next call on c. KILN_ENOTFOUND: never decided. */
int kiln_why(kiln_conn *c, const char *profile, const char *url, kiln_why_info *w);

/* ---- kiln audit: run recorded steps again, compare their outputs ---- */

typedef struct kiln_audit_opts {
	const char *profile;            /* NULL: the first */
	const char *const *targets;     /* URLs or globs; none: every step */
	size_t ntargets;
	uint32_t sample;                /* pick this many at random; 0: all */
	uint64_t seed;                  /* the pick's seed; 0: a random one */
	const char *path;               /* PATH to find tools on (NULL: the
	                                   daemon's), as kiln_build_opts.path */
} kiln_audit_opts;

typedef enum kiln_audit_verdict {
	KILN_AUDIT_SAME,                /* every output as recorded */
	KILN_AUDIT_DIFFERENT,           /* an output differs (see outputs) */
	KILN_AUDIT_FAILED,              /* the tool could not run or failed */
} kiln_audit_verdict;

typedef struct kiln_audit_output {
	const char *name;               /* "out", or the output's name */
	kiln_id recorded, got;          /* got: valid when has_got */
	int has_got;                    /* 0: the run made no such file */
	uint64_t recorded_size, got_size;
} kiln_audit_output;

typedef struct kiln_audit_step {
	const char *url;
	kiln_audit_verdict verdict;
	const kiln_audit_output *outputs; /* DIFFERENT: the differing ones */
	size_t noutputs;
	const char *error;              /* FAILED: why */
	uint64_t duration_ns;
} kiln_audit_step;

typedef struct kiln_audit_info {
	const char *profile;
	uint32_t cached;                /* matched steps with a result */
	uint32_t not_audited;           /* matched, left out (no result, or
	                                   they use kiln need) */
	uint64_t seed;                  /* the sample's seed */
	kiln_audit_step *steps;         /* every step run, in order */
	size_t nsteps;
} kiln_audit_info;

/* Ask the daemon to run the steps o names again in scratch folders and
 * compare their outputs with the recorded ones (docs/build.md, "kiln
 * audit"); nothing is published. Waits for every picked step (no
 * timeout). Strings valid until the next call on c; free a with
 * kiln_audit_free. KILN_EBUSY: a build or audit runs (kiln_conn_error
 * says); KILN_ENOTFOUND: nothing built; KILN_EINVAL: a target matched
 * nothing, or files changed since the last build. */
int kiln_audit(kiln_conn *c, const kiln_audit_opts *o, kiln_audit_info *a);
void kiln_audit_free(kiln_audit_info *a);

/* ---- dependencies ------------------------------------------------------ */

typedef struct kiln_dep_file {
	const char *path;       /* project-relative; absolute outside the
	                           project; "dir/" a folder's listing */
	int missing;            /* it did not exist when the step ran */
	int traced;             /* found by tracing (else: the depfile) */
	kiln_id hash;           /* zero when missing */
} kiln_dep_file;

typedef struct kiln_dep_need {
	const char *url;
	const char *output;     /* "" when the step has one output */
	kiln_id hash;
} kiln_dep_need;

typedef struct kiln_deps_info {
	const char *profile;
	char *const *inputs;    /* declared source files */
	size_t ninputs;
	char *const *prerequisites; /* declared steps (URLs) */
	size_t nprerequisites;
	int built;              /* a successful run is recorded (else the
	                           discovered lists are empty) */
	int traced;             /* that run's file accesses were traced */
	const kiln_dep_file *files; /* discovered files */
	size_t nfiles;
	const kiln_dep_need *needs; /* URLs it asked for (kiln need) */
	size_t nneeds;
} kiln_deps_info;

/* What step url of profile (NULL: the first) depends on. Strings and
 * arrays valid until the next call on c. KILN_ENOTFOUND: no such step. */
int kiln_deps(kiln_conn *c, const char *profile, const char *url,
              kiln_deps_info *d);

typedef struct kiln_rdep {
	const char *url;
	const char *via;        /* "input PATH", "discovered PATH",
	                           "prerequisite URL", "needs URL" */
	unsigned depth;         /* 1: directly */
} kiln_rdep;

/* The steps of profile (NULL: the first) that depend on target — a step
 * URL, else a project-relative path — directly, or with all through any
 * chain; sorted by depth, then URL. *is_step (may be NULL) says whether
 * target named a step. Valid until the next call on c. */
int kiln_rdeps(kiln_conn *c, const char *profile, const char *target, int all,
               const kiln_rdep **v, size_t *n, int *is_step);
/* ---- kiln need (from inside a step's tool) ------------------------------- */

/* On behalf of the running step whose $KILN_STEP_TOKEN is token (connect
 * to $KILN_SOCKET), get the output named output (NULL or "": every output,
 * in declared order) of the step url of the same profile: the daemon
 * builds it first when it is not up to date, meanwhile lending the step's
 * -j slot to others; this call waits for that, asking again 1 ms doubling
 * to 50 ms apart. On 0, *paths (*npaths of them, relative to the project
 * root) are valid until the next call on c, and the daemon has recorded
 * the dependency. Errors (kiln_conn_error says which): the token unknown
 * or expired, no such URL or output, a need cycle, the step failed. */
int kiln_need(kiln_conn *c, const char *token, const char *url,
              const char *output, const char *const **paths, size_t *npaths);

#ifdef __cplusplus
}
#endif

#endif
