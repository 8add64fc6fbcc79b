/* engine.h — kiln's build engine (docs/build.md).
 *
 * The engine owns the project's loaded descriptions and, per profile, a
 * graph of its steps. A build asks for some steps (targets and everything
 * they need); the engine decides by content hashes which are out of date,
 * runs those tools (at most -j at once, critical path first, higher
 * priority builds first), publishes their outputs to the store, keeps the
 * index and the materialized build/<profile>/ folder up to date, and
 * reports every step and the build's end through the publish callback.
 * Builds running at once share their common steps: each runs once.
 *
 * The engine knows nothing of nng or the daemon: kilnd's handlers call it,
 * and its events go to whatever publish does (the daemon's event ring).
 *
 * Threads: every function may be called from any thread. The engine runs
 * its own worker threads; publish is called from them, a step's event with
 * the engine's lock held (see engine_config.publish). */
#ifndef KILND_ENGINE_H
#define KILND_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiln_desc.h"
#include "kiln_proto.h"
#include "kiln_store.h"

/* The tag every action key's encoding starts with. */
extern const char engine_key_format[];

struct engine;
struct spawner_ops;

/* This machine's shared-cache settings from kilnd's environment, each
 * NULL when not given (the daemon checks them before it starts the
 * engine). They win over the user's file, which wins over the project's
 * kiln.yaml, key by key (the two credential files count as one key). */
struct engine_cache_env {
	const char *url;               /* KILN_CACHE_URL: http:// or https:// */
	const char *mode;              /* KILN_CACHE_MODE: off, read, readwrite */
	const char *basic_auth_file;   /* KILN_CACHE_BASIC_AUTH_FILE (absolute) */
	const char *bearer_token_file; /* KILN_CACHE_BEARER_TOKEN_FILE (absolute) */
	const char *ca_file;           /* KILN_CACHE_CA_FILE (absolute) */
	const char *sign_key_file;     /* KILN_CACHE_SIGN_KEY_FILE (absolute) */
	const char *timeout;           /* KILN_CACHE_TIMEOUT: "30s" */
	const char *connect_timeout;   /* KILN_CACHE_CONNECT_TIMEOUT: "2s" */
	/* KILN_CACHE_STOP_WAIT: "60s"; how long a stopping daemon lets its
	 * pending uploads finish (0: drop them at once) */
	const char *stop_wait;
	/* Where the user's settings file is looked for: $XDG_CONFIG_HOME,
	 * $HOME (kiln_user_config_path; both NULL: no user file). */
	const char *config_home;
	const char *home;
};

struct engine_config {
	const char *root;        /* the project folder, absolute */
	kiln_store *store;
	unsigned workers;        /* threads deciding and publishing; 0: cores */
	unsigned default_jobs;   /* tools at once when a build says 0; 0: cores */
	const char *tool_path;   /* PATH for finding and running tools */
	int no_watch;            /* stat every file every build (no inotify) */
	/* How long edits must be quiet before a tool cancelled for one runs
	 * again (edits.h; 0: 30 ms, the daemon's --settle default). */
	unsigned settle_ms;
	/* A testing aid: wait this long between a tool's end and the check
	 * that its inputs held (verify.c), so that a test can change a
	 * file in that window (KILN_TEST_HOLD_FINISH_MS in kilnd's
	 * environment). 0 in real use. */
	unsigned hold_finish_ms;
	/* A testing aid: wait this long between putting a run's outputs
	 * into the store and copying them into build/, so that a test's gc
	 * can take a blob no record names yet (KILN_TEST_HOLD_PLACE_MS in
	 * kilnd's environment). 0 in real use. */
	unsigned hold_place_ms;
	/* A testing aid: the edits thread waits this long between taking a
	 * batch of edits and applying it (edits.c), so that a test's step can
	 * end while an edit is on its way (KILN_TEST_HOLD_EDITS_MS in kilnd's
	 * environment). 0 in real use. */
	unsigned hold_edits_ms;
	/* A testing aid: the watch's reader waits this long before reading
	 * what inotify queued, so that a test's flood of changes overflows
	 * the kernel's queue (KILN_TEST_WATCH_STALL_MS in kilnd's
	 * environment; watch_test_stall). 0 in real use. */
	unsigned watch_stall_ms;
	/* How outputs go into build/ for this daemon's life, whatever the
	 * project says (KILN_MAT_UNSET: as the project says). */
	kiln_mat_mode materialize;
	/* What build/'s folders and files leave out of 0777 and 0666: the
	 * umask of the user who started kilnd (kilnd's own is 077). */
	mode_t build_umask;
	/* The daemon's ipc:// address, given to tools as $KILN_SOCKET for
	 * `kiln need` (NULL: tools get no KILN_* need variables). */
	const char *ipc_url;
	/* The shared cache settings of kilnd's environment, over the user's
	 * file and the project's `cache:` (docs/cache.md, "Configuration"). */
	struct engine_cache_env cache;
	/* Called with each event to publish (kind set; seq and time are the
	 * callee's); the event and what it points to are valid only during
	 * the call. A StepEvent goes out with the engine's lock held, in the
	 * critical section that finishes its step (engine_snapshot relies
	 * on it): publish must not call the engine. */
	void (*publish)(void *arg, Kiln__Event *ev);
	/* A project file changed (inotify, as it happens): relpath relative
	 * to the root, never under build/ or .kiln/ (the engine's own
	 * writes); complete: a save that is over (closed after writing, or
	 * renamed into place) rather than a step of one; relpath NULL: the
	 * watch lost track, anything may have changed. Only folders the
	 * engine has looked into are watched (those of every file a build
	 * stat'ed, and the project folder). Called on the watch's reader
	 * thread: quick, and no engine calls. NULL: nobody is told. */
	void (*changed)(void *arg, const char *relpath, int complete);
	/* A line for the daemon's log. */
	void (*log)(void *arg, int error, const char *msg);
	void *arg;
	/* Build agents (agent_jobs.c, docs/agents.md). local_jobs caps the
	 * tools run on this machine (0: no cap beyond the builds' -j; -1:
	 * every tool runs on an agent, but one an agent refused). lease_ms: how long an agent keeps a
	 * step without a heartbeat (0: 5 s). agent_wake is called (e->mu
	 * held: quick, no engine calls) when n jobs wait for agents. */
	int local_jobs;
	unsigned lease_ms;
	void (*agent_wake)(void *arg, unsigned n);
	/* A testing aid: tools are "started" and "killed" by these instead
	 * of as processes (tool_spawn.h; borrowed for the engine's life). NULL:
	 * the real spawner. */
	const struct spawner_ops *spawner;
};

/* Start the engine (no project is read until the first build). Clears
 * scratch folders left by a previous daemon, after killing the processes
 * its tools left running (orphans.h). Returns 0, KILN_ENOMEM,
 * KILN_EIO. */
int engine_new(const struct engine_config *cfg, struct engine **ep);

/* Cancel every build, kill running tools, wait for the workers, commit
 * what finished, free. NULL is allowed. */
void engine_free(struct engine *e);

/* Start a build. On 0, rep is filled (its profile string stays valid for
 * the engine's life). Errors: KILN_EBADPROJECT (the descriptions have
 * errors: err holds them, one per line, file:line:col), KILN_EINVAL (an
 * unknown profile, a target matching no step; err says which), KILN_EBUSY
 * (too many builds at once), KILN_ENOMEM, KILN_ECLOSED (shutting down). */
int engine_build(struct engine *e, const Kiln__BuildRequest *rq,
                 Kiln__BuildReply *rep, char *err, size_t errlen);

/* A project file changed (relpath relative to the root; NULL: anything
 * may have changed), as the engine's own watch reports: running tools
 * that read it are cancelled and run again, and active builds decide
 * again what was decided from its old state (edits.h). For a change
 * source other than the engine's inotify watch, and tests. Any thread;
 * quick. */
void engine_file_changed(struct engine *e, const char *relpath);

/* ---- build agents (agent_jobs.c) ----
 *
 * An agent connected on pipe joins (its slots count from now on), takes
 * jobs (also its heartbeat: leases it lists in running are renewed, held
 * ones it does not list are run elsewhere) and answers each. An agent's
 * id is random (its secret): takes must come on the connection it joined
 * on (when that closes, the agent leaves), answers on any. */
int engine_agent_join(struct engine *e, uint32_t pipe, const Kiln__AgentHelloRequest *q,
                      uint64_t *id);
uint32_t engine_agent_lease_ms(const struct engine *e);
/* Up to nfree jobs into rep (free with engine_agent_take_free), and the
 * leases to cancel. 0, KILN_ENOTFOUND (no such agent: hello again),
 * KILN_ENOMEM. */
int engine_agent_take(struct engine *e, uint64_t id, uint32_t pipe,
                      const Kiln__AgentTakeRequest *q, Kiln__AgentTakeReply *rep);
void engine_agent_take_free(Kiln__AgentTakeReply *rep);
/* Jobs waiting for an agent. */
unsigned engine_agent_ready(struct engine *e);
/* An answer: its blobs must be in the store. 0 (accepted: a result, or the
 * step goes elsewhere), KILN_ENOTFOUND (not this agent's lease: expired,
 * cancelled), KILN_EINVAL (a blob missing or of another size: the step
 * runs again) with err saying why. */
int engine_agent_done(struct engine *e, uint64_t id, uint32_t pipe,
                      const Kiln__AgentDoneRequest *q, char *err, size_t len);
/* Whether id is an input of a step an agent holds now (what the agent
 * role may read). */
int engine_agent_blob_wanted(struct engine *e, const kiln_id *id);
/* The blobs the steps agents hold may upload at once: each its declared
 * outputs, log, depfile and trace (what bounds the agent role's uploads
 * in progress). */
unsigned engine_agent_upload_room(struct engine *e);
/* A connection closed: its agents leave, their steps run elsewhere. */
void engine_agent_pipe_closed(struct engine *e, uint32_t pipe);
/* Run elsewhere the steps of agents silent past their lease (call about
 * every lease_ms / 4). */
void engine_agents_expire(struct engine *e);
/* The agents joined now: *out is one malloc'd block (free(*out)), NULL
 * for none. 0 or KILN_ENOMEM. */
int engine_agents_status(struct engine *e, Kiln__AgentInfo ***out, size_t *n);

/* Cancel a build. Returns 0 or KILN_ENOTFOUND. */
int engine_cancel(struct engine *e, uint64_t build);

/* The summary of a running or recently finished build (strings valid for
 * the engine's life). Returns 0 or KILN_ENOTFOUND. */
int engine_build_status(struct engine *e, uint64_t build, Kiln__BuildFinished *out);

/* kiln audit (audit.c): run the recorded steps rq names (all, or a seeded
 * sample) again in scratch folders, one at a time, and compare their
 * outputs with the recorded ones; nothing is published. Blocks until
 * every picked step has run. *out (free with engine_audit_free) lists
 * each step run with its verdict. Returns 0, KILN_EBUSY (a build or an
 * audit runs: err says), KILN_ENOTFOUND (nothing built for the profile),
 * KILN_EINVAL (a target matches nothing, or files changed since the last
 * build: err says), KILN_ECLOSED or KILN_ENOMEM. */
int engine_audit(struct engine *e, const Kiln__AuditRequest *rq,
                 Kiln__AuditReply **out, char *err, size_t errlen);
void engine_audit_free(Kiln__AuditReply *rep);

/* Why the last build of profile ("" = first) ran or reused url: *rec is
 * malloc'd (free with kiln__step_record__free_unpacked(rec, NULL)) and
 * *this_daemon tells whether this daemon decided it. Returns 0,
 * KILN_ENOTFOUND (no such step, or never built), KILN_EBADPROJECT (err
 * lists the errors), KILN_EINVAL (no such profile: err lists the
 * project's), KILN_ENOMEM. */
int engine_why(struct engine *e, const char *profile, const char *url,
               Kiln__StepRecord **rec, int *this_daemon, char *err, size_t errlen);

/* What the step url of profile ("" = first) depends on: declared inputs
 * and prerequisites, and what its last successful run discovered. *out is
 * the engine's (free with engine_deps_free). Returns 0, KILN_ENOTFOUND (no
 * such step: err says so), KILN_EBADPROJECT (err lists the errors),
 * KILN_EINVAL (unknown profile), KILN_ENOMEM. */
int engine_deps(struct engine *e, const char *profile, const char *url,
                Kiln__DepsReply **out, char *err, size_t errlen);
void engine_deps_free(Kiln__DepsReply *r);

/* Every step that depends on target — a step URL, else a project-relative
 * path — directly, or with all through any chain of steps; sorted by
 * depth then URL. Same returns as engine_deps. */
int engine_rdeps(struct engine *e, const char *profile, const char *target,
                 int all, Kiln__RdepsReply **out, char *err, size_t errlen);
void engine_rdeps_free(Kiln__RdepsReply *r);
/* What `kiln need` gets: pending (ask again), or the needed outputs. */
struct engine_need_answer {
	int pending;
	char **paths;            /* n, malloc'd: relative to the project */
	kiln_id *ids;            /* n blob ids */
	size_t n;
};

/* kiln need: the run whose KILN_STEP_TOKEN is token asks for the output
 * named output (NULL or "": every output, in declared order) of the step
 * url of its profile. 0: ans filled (free with engine_need_answer_free);
 * ans->pending means the step is being built and the run's -j slot is
 * lent out: ask again. Errors (err says why): KILN_ENOTFOUND (no run has
 * that token), KILN_EINVAL (no such URL or output), KILN_EFAILED (a need
 * cycle, or the needed step failed), KILN_ECANCELLED, KILN_ECLOSED,
 * KILN_ENOMEM. */
int engine_need(struct engine *e, const char *token, const char *url,
                const char *output, struct engine_need_answer *ans, char *err,
                size_t errlen);
void engine_need_answer_free(struct engine_need_answer *ans);

/* ---- snapshots (snapshot.c): what is built, for a subscriber starting up
 *
 * Each step's state, copied (it outlives the graph): strings are offsets
 * into strs. */
enum engine_snap_state {
	SNAP_BUILT,              /* StepState.State's values */
	SNAP_FAILED,
	SNAP_SKIPPED,
	SNAP_CANCELLED,
	SNAP_NOT_BUILT,
};

struct engine_snap_out {
	kiln_id id;
	uint64_t size;           /* UINT64_MAX: not known (from the index) */
	uint32_t name, path;     /* offsets into strs */
};

struct engine_snap_step {
	uint32_t profile, url, error;   /* offsets into strs */
	uint32_t out0, nouts;    /* outs[out0 .. out0 + nouts) */
	uint8_t state;           /* enum engine_snap_state */
	uint8_t building;        /* a build has it queued or running */
};

struct engine_snap {
	struct engine_snap_step *steps;  /* by profile, then URL */
	size_t n, cap;
	struct engine_snap_out *outs;
	size_t nouts, capouts;
	char *strs;              /* offset 0 is "" */
	size_t len, caplen;
};

/* The state of every step of profile (NULL or "": of every profile of the
 * project) whose URL pass(pass_arg, profile, url) accepts, into *out
 * (free with engine_snap_free), loading the project when needed; then,
 * the engine's lock still held, at(at_arg) is called: no step finishes
 * (and publishes its event) between the two, so what at() does (take the
 * event stream's cursor) sees the snapshot's moment. Outputs come from
 * the graph for steps this daemon decided, else from the store's index.
 * at() is not called on an error: KILN_EBADPROJECT (err lists the
 * descriptions' errors), KILN_EINVAL (an unknown profile), KILN_ENOMEM. */
int engine_snapshot(struct engine *e, const char *profile,
                    int (*pass)(void *pass_arg, const char *profile, const char *url),
                    void *pass_arg, void (*at)(void *at_arg), void *at_arg,
                    struct engine_snap **out, char *err, size_t errlen);
void engine_snap_free(struct engine_snap *s);

/* The shared cache's state for `kiln status` (docs/cache.md). */
struct engine_cache_status {
	char url[512];            /* "" when no cache is in use */
	const char *mode;         /* "off", "read", "readwrite" */
	uint64_t steps_downloaded; /* steps served from the shared cache */
	uint64_t steps_missed;    /* steps looked up there in vain */
	uint64_t corrupt;         /* blobs or entries refused (bad SHA-256,
	                             undecodable) */
	uint64_t results_uploaded; /* results whose index entry was written */
	uint64_t hits, misses, errors, uploads, bytes_down, bytes_up;
	uint64_t dropped;         /* uploads dropped: the transport's and the
	                             engine's queue */
	uint64_t skipped_uploads; /* blobs not sent: the server had them */
	uint32_t pending;         /* results and transfers still to upload */
	int breaker_open;
};

/* Fill *st (any thread). */
void engine_cache_status(struct engine *e, struct engine_cache_status *st);

/* Steps queued or running now, over all builds. */
uint32_t engine_queued(struct engine *e);

#endif
