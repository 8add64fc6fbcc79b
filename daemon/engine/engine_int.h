/* engine_int.h — the engine's core structs, which every file of
 * daemon/engine/ shares: a graph's nodes (steps), a build, the engine.
 * What each file offers the others is in its own header: schedule.h (the
 * ready heaps, workers), builds.h, decide.h, run.h, publish.h, need.h, ...
 *
 * Locking: e->mu guards every node's scheduling fields (st, wave, waiting,
 * prio, builds, the queues) and every build. A node's result fields (have,
 * key, outs, reason, run fields) belong to whichever worker holds the node
 * in state N_EVAL, N_RUNNING (the reaper, then the completing worker) or
 * N_DONE's transition; nobody else reads them until the node is done, and
 * the publish of done happens under e->mu. e->batch_mu guards the record
 * batch. */
#ifndef KILND_ENGINE_INT_H
#define KILND_ENGINE_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine.h"
#include "action_key.h"
#include "filestate.h"
#include "kiln_desc.h"
#include "materialize.h"
#include "probe_words.h"
#include "tool_spawn.h"
#include "kiln_clock.h"

#define ENGINE_MAX_BUILDS 64   /* at once; one bit each in node.builds */
/* distinct PATHs in use at once (search_path.c): a build's and those of
 * cancelled builds' steps still running */
#define ENGINE_MAX_PATHS 256
#define ENGINE_KEEP_FINISHED 64 /* finished builds remembered for status */
#define ENGINE_MAX_WAIT_SPANS 8 /* `kiln need` waits a run's timeline shows */

enum node_state {
	N_IDLE,       /* not part of the current wave */
	N_WAITING,    /* prerequisites unfinished */
	N_READY,      /* on the ready heap, to be decided */
	N_EVAL,       /* a worker is deciding it */
	N_RUNNABLE,   /* out of date, waiting for a -j slot */
	N_RUNNING,    /* its tool runs */
	N_DONE,       /* finished in this wave: up to date, reused or ran */
	N_FAILED,
	N_SKIPPED,    /* a prerequisite failed */
	N_CANCELLED,
	N_WOULD_RUN,  /* dry run: out of date */
};

/* How the last decision went (StepEvent.Result where it maps). */
enum node_outcome {
	O_UP_TO_DATE,  /* same key as this daemon's last build, files intact */
	O_REUSED,      /* a cached result */
	O_RAN,
	O_FAILED,
};

struct node_out {
	kiln_id id;
	uint64_t size;
	kiln_file_rec mat;   /* the materialized file, as last seen */
	uint64_t mat_gen;    /* the watch's generation when mat was seen (0: none) */
	uint64_t blob_gen;   /* the store watch's generation when its blob was
	                        last found in the store (0: none) */
	uint8_t folder;      /* a folder output: id is its tree record
	                        (folder_out.c) */
};

struct engine;
struct graph;
struct node;

/* A step `kiln need`ed (need.c): by URL, one output of it. */
struct need_dep {
	char *url;
	char *output;            /* the output's name */
	kiln_id hash;            /* its blob when it was handed over */
	kiln_id cur;             /* its blob now (need_prereqs), for quick_key */
	uint32_t idx;            /* the node, valid when out >= 0 */
	int out;                 /* output index in that node; -1 unresolved */
};

enum need_state {
	NEED_NONE,               /* the run holds its -j slot */
	NEED_SUSPENDED,          /* waits on its needs; its slot is lent out */
};

/* What the reaper hands back when a node's tool ends. */
struct run_ctx {
	struct engine *e;
	struct graph *g;
	struct node *n;
};

/* A free scratch folder (scratch.c). */
struct scratch_slot {
	unsigned id;
	int log_fd;              /* its empty log, open; or -1 */
};

/* A discovered file as hashed after its run (verify.c). */
struct disc_seen {
	kiln_id h;
	uint8_t missing;
};

/* A node's decision and run in progress (node.w). */
struct node_work {
	struct key_parts parts;
	struct fs_seen *seen_in; /* each declared input as its key part saw it */
	struct disc_seen *disc_seen; /* n->disc hashed after the run (ndisc) */
	kiln_id new_key;
	Kiln__StepRecord *prev;  /* the previous decision record, if read */
	unsigned scratch;        /* its folder's number (scratch_path) */
	int log_fd;
	off_t trace_off;         /* where this run's records start in <n>.trace */
	pid_t pid;
	struct spawn_result res;
	const kiln_timeout *timeout; /* its tool's limit (in e->desc); NULL: none */
	int64_t start_ns;
	int64_t end_ns;          /* its tool ended, its slot free (mono; 0:
	                            not yet): publishing comes after */
	int64_t start_wall_ns;   /* CLOCK_REALTIME_COARSE when it started: the
	                            clock file times come from */
	kiln_id log_id;
	int has_log;
	struct run_ctx run;
	char token[33];          /* the run's KILN_STEP_TOKEN (need.c) */
	char program[PATH_MAX];  /* the program found for its key ("": not
	                            found), for its record */
	struct probe_words words; /* the run's command line, to tell its
	                            probes of it from lookups (trace.c) */
	/* a run on a build agent (agent_jobs.c; e->mu) */
	uint64_t lease;          /* its lease while an agent has it; 0: local */
	char **extra;            /* project files an earlier try on an agent
	                            looked for and lacked: sent with the next */
	size_t nextra;
	int32_t agent_pid;       /* the tool's root process there (its trace) */
	/* per output, what an agent's answer named (agent_jobs.c): its blob
	 * is in the store, nothing is in scratch; publish takes it as the
	 * output (NULL: a local run) */
	struct landed_out { kiln_id id; uint64_t size; uint8_t ok; } *landed;
	uint8_t agent_tries;     /* tries on agents in this run */
	uint8_t local_only;      /* an agent refused it: run it here */
	char machine[64];        /* the agent that ran it ("": this machine) */
	/* its `kiln need` waits, for the build's timeline (need.c; e->mu) */
	int64_t need_since;      /* suspended since (mono; 0: not suspended) */
	struct wait_span { int64_t t0, t1; } waits[ENGINE_MAX_WAIT_SPANS];
	uint8_t nwaits;
};

/* A step of a graph. 100,000-step projects keep one each for the daemon's
 * life, so the members are ordered by size (no padding) and counts are
 * 32-bit (docs/build.md, "Figures behind the engine's code"). What a
 * decision or a run
 * needs only while it lasts is in node_work. */
struct node {
	const kiln_step *ks;
	uint32_t *deps;          /* prerequisite nodes (ndeps) */
	uint32_t *rdeps;         /* nodes that need this one (nrdeps) */

	/* the last result (see the header comment) */
	char **outpaths;         /* build/<profile>/..., per output (g->outpaths) */
	char **disc;             /* files the last result discovered (its
	                            depfile, then its trace; "dir/" is a
	                            folder's listing): checked like inputs */
	struct node_out *outs;   /* ks->noutputs */
	char **warnings;         /* the last result's warnings (paths its run
	                            used that could not be recorded),
	                            NULL-terminated; NULL: none */
	char *execs;             /* the program its tool's program exec'd in
	                            its place, as its last run showed (a
	                            shim's interpreter, decide_key.c):
	                            "FOUND\0RAN\0" malloc'd; NULL: none */
	char *reason;            /* malloc'd; why it ran or was reused */
	char *restored;          /* malloc'd; NULL, or the output its last
	                            full decision found edited in build/ and
	                            put back (`kiln why`; decide.c) */
	char *error;             /* malloc'd; why it failed */

	/* a decision or run in progress: NULL but from step_eval's full
	 * decision to the node's final state (node_finish), so that a
	 * 100,000-step graph does not carry it for every node */
	struct node_work *w;

	/* kiln need (need.c). needs belongs to the result like disc
	 * (what the last result needed: dynamic prerequisites, `kiln deps`);
	 * the rest is e->mu's while the run is in progress. */
	struct need_dep *needs;
	struct need_dep *rneeds; /* needed by the run in progress */

	kiln_id key;
	kiln_id quick;           /* quick_key() when key was last computed */
	uint64_t wave;           /* (e->mu) */
	uint64_t builds;         /* (e->mu) bit per build slot that wants it */
	uint64_t duration_ns;
	uint64_t needs_wave;     /* wave its needs were last scheduled in */
	uint64_t event_wave;     /* (e->mu) wave of its last StepEvent (0: none) */
	/* the scheduler's estimates (estimate.c; e->mu) */
	uint64_t hist_ns;        /* its tool's last duration (0: none known) */
	uint64_t in_bytes;       /* its inputs' size when last decided to run */
	uint64_t cp_ns;          /* its estimate plus the longest chain of
	                            estimates after it: the heaps' order */
	uint64_t est_ns;         /* the estimate its running tool started
	                            with (0: its tool did not run in this
	                            decision), for its StepEvent */

	uint32_t idx;
	uint32_t ndeps, nrdeps;
	uint32_t cp;             /* steps on the longest path to an end */
	uint32_t waiting;        /* (e->mu) unfinished prerequisites */
	uint32_t prio;           /* (e->mu) */
	uint32_t heap_prio;      /* (e->mu) prio when last pushed (stale entries) */
	uint32_t decided_pass;   /* (e->mu) e->pass_seq when last decided */
	uint32_t ndisc;
	uint32_t ndisc_depfile;  /* disc[0..ndisc_depfile) came from the
	                            depfile (set when the tool ran) */
	uint32_t nneeds, nrneeds;
	uint32_t ndwaited;       /* e->dwait entries waiting on this node */
	/* the record batches (e->batch_gen) this decision's records may be
	 * in: rec_lo when its full decision began (0: it queued nothing, the
	 * fast path), rec_hi when it finished (lost.c) */
	uint32_t rec_lo, rec_hi;
	uint16_t pathi;          /* (e->mu to set) its programs' PATH: the
	                            e->paths entry of the build that first
	                            asked for it in its wave (search_path.c) */

	/* one byte each (separate bytes, not bit-fields: threads write
	 * neighbouring ones under different locks) */
	uint8_t st;              /* enum node_state (e->mu) */
	uint8_t outcome;         /* enum node_outcome */
	uint8_t event_outcome;   /* (e->mu) its outcome when its last StepEvent
	                            went out (O_FAILED: not N_DONE) */
	uint8_t need_state;      /* enum need_state: its needs asked (e->ons) */
	uint8_t have;            /* key and outs hold a complete result */
	uint8_t traced;          /* the last result's run was traced */
	uint8_t execs_known;     /* execs is set from a run or a record */
	uint8_t send_event;      /* publish a StepEvent when done */
	uint8_t reruns;          /* decided again in this wave because its
	                            inputs changed while its tool ran */
	uint8_t rec_failed;      /* queueing one of its records failed (its
	                            worker sets it; node_finish loses it) */
	uint8_t lost;            /* its records were lost: counted into its
	                            builds (e->mu) */
	uint8_t unrecorded;      /* forgotten because gc took a blob its
	                            records named (lost.c): build/ still holds
	                            outs, and the map lists them (set under
	                            e->mu; cleared by its worker when a full
	                            decision begins) */
	/* edits while builds run (edits.c; e->mu) */
	uint8_t stale;           /* decided from files edited since: its
	                            builds decide it again (build_repass) */
	uint8_t superseded;      /* its tool was cancelled for an edit */
	uint8_t cancels;         /* runs cancelled for edits in this wave */
	uint8_t finishing;       /* N_RUNNING, its tool ended: a worker is
	                            finishing it (its disc is being replaced) */
	uint8_t folders;         /* it writes or reads a folder output: runs
	                            here, never on an agent, and never through
	                            the shared cache (folder_out.c) */
	/* its last run wrote a project file (selfwrite.c; its worker) */
	uint8_t selfw_have;      /* selfw_quick is set */
	char *selfw_path;        /* that file (NULL: its last run wrote none) */
	kiln_id selfw_quick;     /* its quick key as that run left the files */
};

struct graph {
	char *profile;
	const kiln_plan *plan;
	struct node *nodes;
	uint32_t n;
	/* the nodes' deps and rdeps, outs, outpaths and those paths' text, each
	 * one block for the whole graph (graph.c) */
	uint32_t *edges;
	struct node_out *outs;
	char **outpaths;
	char *outpath_text;
	uint32_t *topo;          /* prerequisites before dependents */
	int index_dirty;         /* an output changed since kiln-index.txt */
	/* the index map's entries (node, output) in the map's order, sorted
	 * once per graph (output_index.c, e->mu); NULL until the first map */
	struct index_slot { uint32_t node, out; } *iorder;
	size_t niorder;
	int prune_due;           /* build/<profile>/ not pruned since loaded */
	/* kiln need's walks (need.c, e->mu): n + 1 entries each, made
	 * on first use; mark[i] == gen means visited in the current walk, so
	 * a walk costs what it visits, not the graph's size */
	uint32_t *nmark, *nparent, *nstack, *nsk;
	uint32_t ngen;
	struct graph *next;
};

struct build {
	uint64_t id;
	int slot;                /* bit in node.builds; -1 once finished */
	struct graph *g;
	uint32_t prio, jobs;
	uint16_t pathi;          /* e->paths entry its tools are found on */
	int keep_going, dry_run;
	int full;                /* every step of the profile (no targets) */
	int stopped;             /* a failure without -k, or a cancel */
	int cancelled;
	int done;
	uint32_t total, finished, ran, reused, failed, skipped, ncancelled, would_run;
	int64_t start_ns;
	uint64_t nstat0;         /* filestate's stat count when it began */
	uint64_t files_statted;  /* stats while it ran (set at its end) */
	uint64_t duration_ns;
	uint32_t nlost;          /* its steps whose records a commit lost */
	int lost_rv;             /* why (the first failed commit's code) */
	char error[256];
	char index[64];
	char profile[65];        /* b->g is NULL once the build ended */
	struct build *next;      /* e->finished list */
	int repass;              /* edits made steps it has stale (edits.c) */
	uint32_t repasses;       /* times it decided stale steps again */
	/* per node of g, the recorded tool time it is expected to take (ms;
	 * 0: none known, or finished), and their sum: what is left
	 * (StepEvent.left_ns). NULL: out of memory, no estimate. */
	uint32_t *expect_ms;
	uint64_t left_ms;
	struct timeline *tl;     /* its steps' runs, written at its end
	                            (timeline.h; NULL: none, or a dry run) */
	/* per node of g (both NULL once it ended): what it counted the node
	 * as (enum count_kind, builds.c; 0: not counted), and the Result its
	 * last StepEvent of the node said, plus 1 (0: none) — a step decided
	 * again is taken out of the counts it was put in, and its summary
	 * counts what its events said (step_events.h) */
	uint8_t *counted;
	uint8_t *told;
	uint32_t *targets;       /* nodes wanted (closure), until started */
	uint32_t ntargets;
};

/* A heap of node indices of one graph ordered by (prio, cp_ns, cp). */
struct heap {
	struct heap_item { uint64_t cp_ns; uint32_t prio, cp, idx; struct graph *g; } *v;
	size_t n, cap;
};

struct engine {
	struct engine_config cfg;
	char *root;
	char *tool_path;
	unsigned jobs_default;
	kiln_store *s;
	struct filestate *fs;
	struct watch *watch;     /* NULL: no inotify (--no-watch, or none) */
	struct watch *blobs;     /* the store's objects/ (NULL: none): a blob
	                            deleted under a warm daemon is noticed */
	struct kilnd_spawner *sp;

	pthread_mutex_t mu;
	pthread_cond_t cv;       /* workers: work arrived, or quit */
	pthread_cond_t idle_cv;  /* a wave ended */
	int quit;
	pthread_t *threads;
	unsigned nthreads;
	int workers_batch;       /* workers run SCHED_BATCH (see worker_main) */

	kiln_desc *desc;         /* NULL until the first build */
	struct dirstamp {
		char *path;
		int64_t mtime_ns, ctime_ns;
		uint64_t ino;
		int is_dir;
		kiln_id names;   /* dir_names() of a folder */
	} *stamps;
	size_t nstamps;
	int stamps_suspect;      /* something changed during the last load */
	struct graph *graphs;

	uint64_t wave;           /* the current wave's number */
	int wave_dry;            /* the current wave is a dry run */
	/* Files changed during a wave (builds.c): the watch counts project
	 * changes; a build joining a wave after some starts a new file-state
	 * pass, and steps decided in an older pass are decided again. */
	_Atomic uint64_t changes; /* project changes the watch reported */
	uint64_t pass_changes;   /* (e->mu) changes when this pass began */
	int64_t overflow_said_ns; /* (the watch's reader thread) when the log
	                             last said the watch's queue overflowed */
	uint32_t pass_seq;       /* (e->mu) this pass's number */
	struct edits *edits;     /* edits.c: files edited while builds run */
	struct selfwrites *selfw; /* selfwrite.c: files the build changed */
	int edits_all;           /* (e->mu) an edit no path named: the next
	                            repass begins a new file-state pass */
	struct build *active[ENGINE_MAX_BUILDS];
	unsigned nactive;
	struct build *finished;  /* newest first, at most ENGINE_KEEP_FINISHED */
	unsigned nfinished;
	uint64_t next_build;
	struct heap ready, runnable;
	struct heap runnable_local; /* runnable steps an agent refused: run here */
	struct run_ctx **completed; /* tools that ended, to be finished */
	size_t ncompleted, capcompleted;
	unsigned running;        /* tools running here */
	struct agents *agents;   /* build agents and their leases
	                            (agent_jobs.c; e->mu) */
	unsigned urgent_work;    /* steps above priority 0 being decided or
	                            finished by a worker (schedule.c) */
	unsigned starting;       /* workers inside step_start */
	uint32_t queued;         /* nodes waiting, ready or running */
	unsigned next_scratch;
	char scratch_run[64];    /* this daemon run's area in .kiln/scratch */
	/* scratch folders free for the next run (scratch.c) */
	pthread_mutex_t scratch_mu;
	struct scratch_slot *scratch_free;
	size_t nscratch_free, capscratch_free;

	int rootfd;              /* the project folder (O_PATH) */
	char trace_shim[PATH_MAX]; /* libkilntrace.so; "": steps run untraced */
	/* the PATHs of the builds (search_path.c; e->mu): [0] is tool_path,
	 * NULL a free entry */
	char *paths[ENGINE_MAX_PATHS];
	unsigned npaths;
	/* Each tool's program found and hashed once per wave and PATH
	 * (tools_mu). */
	pthread_mutex_t tools_mu;
	struct tool_seen {
		const kiln_tool *t;
		uint16_t pathi;        /* the e->paths entry it was found on */
		uint64_t wave;
		int rv;
		char exe[PATH_MAX];
		kiln_id hash;
		struct fs_seen seen;   /* the program when hashed in this wave */
	} *tools;
	size_t ntools, captools;

	/* kiln need (need.c; e->mu) */
	struct need_tok { char tok[33]; struct graph *g; struct node *n; } *toks;
	size_t ntoks, captoks;   /* one per run in progress */
	struct need_wait { struct graph *g; uint32_t waiter, target; } *dwait;
	size_t ndwait, capdwait; /* nodes waiting on their last needs */
	unsigned nsusp;          /* runs in NEED_SUSPENDED */
	/* the needs runs asked that are not answered yet, several per run
	 * when a tool asks in parallel: its slot is lent while any waits */
	struct need_on {
		struct graph *g;
		struct node *n;      /* the run that asked */
		uint32_t target;     /* the step it asked for */
		char *err;           /* its answer is this error (a cycle) */
	} *ons;
	size_t nons, capons;
	int auditing;            /* (e->mu) kiln audit runs steps: no build
	                            starts, and no other audit (audit.c) */
	int need_joined;         /* a build joined a step waiting on needs */
	int need_flushing;       /* need_join_flush is on the stack */
	char *kiln_cli;          /* $KILN: kiln beside kilnd (NULL: unknown) */
	char *ipc_url;           /* $KILN_SOCKET (NULL: none) */
	struct remote *remote;   /* the shared cache (remote.h) */
	/* estimates (estimate.c; e->mu): the steps' last durations
	 * (.kiln/durations) and what runs taught of each tool */
	struct durations *durs;
	struct tool_cost *costs;
	size_t ncosts, capcosts;

	pthread_mutex_t batch_mu;
	kiln_batch *batch;
	int64_t batch_since_ns;  /* (batch_mu) when its oldest record came; 0: empty */
	int64_t last_unmap_ns;   /* pages_tick (atomic) */
	pthread_mutex_t commit_mu;
	uint32_t batch_gen;      /* e->batch's number, from 1 (batch_mu to
	                            change, read atomically) */
	/* failed commits (lost.c): the batches [lost_lo, lost_hi] not
	 * yet applied to the nodes (batch_mu; lost_hi read atomically, 0:
	 * none), the newest failed batch ever (atomic) and the first
	 * failure's code */
	uint32_t lost_lo, lost_hi, lost_max;
	int lost_rv;
	/* the same for commits that skipped records whose blob gc had
	 * removed (lost_note_skipped): those steps are forgotten, their
	 * builds do not fail */
	uint32_t skip_lo, skip_hi, skip_max;
};

/* Whether a worker holds n's result fields (have, outs, duration_ns, ...):
 * in N_EVAL or N_RUNNING nobody else may read them, even under e->mu
 * (ThreadSanitizer caught a build's start and a cancelled build's end
 * reading the have a deciding worker wrote). e->mu held. */
static inline int
node_result_held(const struct node *n)
{
	return n->st == N_EVAL || n->st == N_RUNNING;
}

#endif
