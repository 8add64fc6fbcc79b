/* engine_int.h — what engine.c (graphs, builds, scheduling, workers),
 * engine_step.c (deciding, running and finishing one step) and
 * engine_need.c (kiln need: tokens, suspended runs, dynamic
 * prerequisites) share.
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
#include "tool_spawn.h"
#include "kiln_clock.h"

#define ENGINE_MAX_BUILDS 64   /* at once; one bit each in node.builds */
/* distinct PATHs in use at once (search_path.c): a build's and those of
 * cancelled builds' steps still running */
#define ENGINE_MAX_PATHS 256
#define ENGINE_KEEP_FINISHED 64 /* finished builds remembered for status */

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
};

struct engine;
struct graph;
struct node;

/* A step `kiln need`ed (engine_need.c): by URL, one output of it. */
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
	int64_t start_wall_ns;   /* CLOCK_REALTIME_COARSE when it started: the
	                            clock file times come from */
	kiln_id log_id;
	int has_log;
	struct run_ctx run;
	char token[33];          /* the run's KILN_STEP_TOKEN (engine_need.c) */
	char program[PATH_MAX];  /* the program found for its key ("": not
	                            found), for its record */
};

/* A step of a graph. 100,000-step projects keep one each for the daemon's
 * life, so the members are ordered by size and counts are 32-bit: ~200
 * bytes where the natural order took 304. What a decision or a run
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
	char *reason;            /* malloc'd; why it ran or was reused */
	char *error;             /* malloc'd; why it failed */

	/* a decision or run in progress: NULL but from step_eval's full
	 * decision to the node's final state (node_finish), so that a
	 * 100,000-step graph does not carry ~150 bytes a node of it */
	struct node_work *w;

	/* kiln need (engine_need.c). needs belongs to the result like disc
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

	uint32_t idx;
	uint32_t ndeps, nrdeps;
	uint32_t cp;             /* steps on the longest path to an end */
	uint32_t waiting;        /* (e->mu) unfinished prerequisites */
	uint32_t prio;           /* (e->mu) */
	uint32_t heap_prio;      /* (e->mu) prio when last pushed (stale entries) */
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
	uint8_t need_state;      /* enum need_state: its needs asked (e->ons) */
	uint8_t have;            /* key and outs hold a complete result */
	uint8_t traced;          /* the last result's run was traced */
	uint8_t send_event;      /* publish a StepEvent when done */
	uint8_t reruns;          /* decided again in this wave because its
	                            inputs changed while its tool ran */
	uint8_t rec_failed;      /* queueing one of its records failed (its
	                            worker sets it; node_finish loses it) */
	uint8_t lost;            /* its records were lost: counted into its
	                            builds (e->mu) */
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
	 * once per graph (engine.c, e->mu); NULL until the first map */
	struct index_slot { uint32_t node, out; } *iorder;
	size_t niorder;
	int prune_due;           /* build/<profile>/ not pruned since loaded */
	/* kiln need's walks (engine_need.c, e->mu): n + 1 entries each, made
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
	uint32_t *targets;       /* nodes wanted (closure), until started */
	uint32_t ntargets;
};

/* A heap of node indices of one graph ordered by (prio, cp). */
struct heap {
	struct heap_item { uint32_t prio, cp, idx; struct graph *g; } *v;
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
	struct build *active[ENGINE_MAX_BUILDS];
	unsigned nactive;
	struct build *finished;  /* newest first, at most ENGINE_KEEP_FINISHED */
	unsigned nfinished;
	uint64_t next_build;
	struct heap ready, runnable;
	struct run_ctx **completed; /* tools that ended, to be finished */
	size_t ncompleted, capcompleted;
	unsigned running;        /* tools running */
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

	/* kiln need (engine_need.c; e->mu) */
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
	int need_joined;         /* a build joined a step waiting on needs */
	int need_flushing;       /* need_join_flush is on the stack */
	char *kiln_cli;          /* $KILN: kiln beside kilnd (NULL: unknown) */
	char *ipc_url;           /* $KILN_SOCKET (NULL: none) */

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

/* ---- search_path.c ---- */

/* Entry 0: the daemon's PATH (e->tool_path set). 0. */
int engine_path_init(struct engine *e);
void engine_path_free(struct engine *e);
/* The entry of path (NULL or "": the daemon's, 0), added if new (e->mu
 * held). 0, KILN_ENOMEM, KILN_EBUSY (ENGINE_MAX_PATHS in use). */
int engine_path_intern(struct engine *e, const char *path, uint16_t *idx);
/* The PATH n's program is found on and its tool runs with (n scheduled
 * in the current wave). Valid while n is in progress. */
const char *engine_path_of(const struct engine *e, const struct node *n);

/* ---- engine_step.c ---- */

enum eval_result { EVAL_DONE, EVAL_RUN, EVAL_FAIL, EVAL_NEEDS };

/* Decide node n of g (unlocked; the node is N_EVAL). EVAL_DONE: its
 * outputs are current and materialized; EVAL_RUN: its tool must run
 * (n->parts and n->new_key are set); EVAL_FAIL: n->error says why;
 * EVAL_NEEDS: a cached result needs steps not yet done in this wave
 * (n->needs names them): need_prereqs, then decide again. */
enum eval_result step_eval(struct engine *e, struct graph *g, struct node *n,
                           int dry_run);

/* Start n's tool (unlocked). 0: running, engine_tool_done will be called;
 * otherwise n->error is set and the step failed. */
int step_start(struct engine *e, struct graph *g, struct node *n);

/* Finish n after its tool ended (unlocked): outputs into the store,
 * records, materialization. 0; -1 with n->error set; or STEP_AGAIN: its
 * inputs changed while the tool ran (n->reason says which), nothing was
 * published or recorded, and the step must be decided again. */
#define STEP_AGAIN 1
int step_finish(struct engine *e, struct graph *g, struct node *n);

/* Record a failure (log kept, decision record) after step_* failed. */
void step_record_failure(struct engine *e, struct graph *g, struct node *n);

/* A node's outputs as protobuf messages (strings borrowed from the node);
 * one malloc'd block: free() it. NULL: out of memory. */
struct pb_outputs {
	Kiln__StepOutput *v;
	Kiln__StepOutput **p;
	size_t n;
};
struct pb_outputs *step_outputs_pb(const struct node *n, int with_paths);

/* Give n its node_work (n->w) unless it has one: 0 or KILN_ENOMEM. */
int node_work_get(struct node *n);
/* Free n->w (its key parts and previous record too); NULL is fine. */
void node_work_free(struct node *n);

/* Replace n->disc with a copy of paths (n of them). 0 or KILN_ENOMEM. */
int step_set_disc(struct node *n, char *const *paths, size_t count);

/* Drop what a run left (a cancelled step: no record). */
void step_forget(struct node *n);

/* The output path relative to the project: build/<profile>/<dir>/<file>. */
int step_output_path(const struct graph *g, const struct node *n, size_t i,
                     char *out, size_t outlen);

/* ---- engine_step.c, shared with engine_run.c ---- */

/* A growing string; oom set once an allocation failed. */
struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};
void sb_add(struct sbuf *b, const char *s, size_t n);
void sb_str(struct sbuf *b, const char *s);

/* Set n->error (malloc'd) from the format. */
void set_error(struct node *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The program n's tool runs (absolute, into exe) and its hash (h may be
 * NULL), looked up once per tool per wave. 0, or an error with n->error
 * set. */
int step_program(struct engine *e, struct node *n, char *exe, size_t len,
                 kiln_id *h, struct fs_seen *seen);

/* Whether the materialized output o at path still holds o's blob: its
 * stat as recorded, or else its content. */
int step_output_unchanged(struct engine *e, const char *path, const struct node_out *o);

/* ---- action_results.c: several results per action key ---- */

/* The results kept under key, newest use first (free with
 * kiln__action_entry__free_unpacked); NULL when none or unreadable. */
Kiln__ActionEntry *results_get(struct engine *e, const kiln_id *key);

/* Queue ar as key's newest result, after the key's other results that
 * discovered other files (or the same with other hashes), at most 8.
 * 0 or KILN_ENOMEM. */
int results_put(struct engine *e, const kiln_id *key, Kiln__ActionResult *ar);

/* entry's result at was used: queue the entry with it first. 0 or
 * KILN_ENOMEM. */
int results_touch(struct engine *e, const kiln_id *key, Kiln__ActionEntry *entry,
                  size_t at);

/* ---- blob_watch.c ---- */

/* Watch the store's objects/ folder (e->blobs; stays NULL without the
 * project's watch or inotify). */
void blobs_watch_open(struct engine *e);

/* Whether o's blob is in the store: from the store's watch when nothing
 * touched it since it was last found, else a stat. 1 yes, 0 no. */
int blob_present(struct engine *e, struct node_out *o);

/* ---- verify.c ---- */

/* After n's tool exited 0 (its depfile and trace read into n->disc):
 * whether everything it may have read is what its key was made from.
 * 1 yes (n->w->disc_seen holds the discovered files' hashes, for its
 * action result); 0 no, why says what changed (the step must be decided
 * again, nothing recorded); or a KILN_E* error. */
int run_verify(struct engine *e, struct graph *g, struct node *n, char *why,
               size_t whylen);

/* Put n's outputs into build/<profile>/ as the materialize mode says
 * (n->outs[].mat updated); a copy already intact is left. */
int materialize_all(struct engine *e, struct node *n);

/* Queue n's index entries and materialized-file records. */
int outputs_record(struct engine *e, const struct graph *g, struct node *n);

/* Queue n's decision record (against n->prev, with n->parts). */
int record_put(struct engine *e, const struct graph *g, struct node *n,
               Kiln__StepRecord__Decision decision);

/* Read (prev_load) or drop (prev_drop) n's previous decision record. */
void prev_load(struct engine *e, const struct graph *g, struct node *n);
void prev_drop(struct node *n);

/* ---- trace.c: file-access tracing ---- */

/* Find libkilntrace.so beside the daemon's executable, else in
 * $(PREFIX)/lib/kiln, into e->trace_shim ("" and one log line: none). */
void trace_setup(struct engine *e);

/* The environment entries that trace a run in scratch folder <scratch>
 * (LD_PRELOAD, KILN_TRACE_FILE, PYTHONDONTWRITEBYTECODE, sanitizer
 * options): malloc'd strings into out (room for 8), their count in *nout
 * (0 when untraced). 0 or KILN_ENOMEM. */
int trace_env(const struct engine *e, unsigned scratch, char **out, size_t *nout);

/* After n's tool (root process pid) exited 0 in scratch folder dir
 * (absolute), with n->disc holding its depfile's files if it has one:
 * read its trace, set n->traced, n->ndisc_depfile, and append the files it
 * looked at (step_dep_name) to n->disc, warnings to wl. 0, or -1 with
 * n->error set (it wrote outside its scratch folder, or no memory). */
struct warn_list;
int trace_finish(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
                 const char *dir, struct warn_list *wl);

/* The hash a discovered dependency is checked by: a file's content, or
 * for a path ending in '/' the folder's sorted names. 0, KILN_ENOTFOUND
 * (missing), or another error. */
int trace_dep_hash(struct engine *e, const char *path, kiln_id *h);

/* ---- discover.c: depfiles, the path policy, warnings ---- */

#define WARN_MAX 32              /* warnings kept per run, then "and N more" */

/* The warnings of one run, gathered while its depfile and trace are read. */
struct warn_list {
	char *v[WARN_MAX + 1];   /* kept (room for the "and N more" line) */
	size_t n;
	kiln_id *extra;          /* hashes of the ones past WARN_MAX */
	size_t nextra, capextra;
	int oom;
	/* the run's inputs under build/ (its prerequisites' and needs'
	 * outputs), sorted when the first build/ path is met: a bundle over
	 * 1,000 outputs reads each, and a scan per path cost ~1M compares */
	const char **inputs;
	size_t ninputs;
	int inputs_made;
};

/* After n's tool (root process pid) exited 0 in scratch folder dir
 * (absolute): read its depfile (if the tool has one) and its trace into
 * n->disc, n->traced, and n->warnings (replaced). 0, or -1 with n->error
 * set. */
int step_deps_read(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
                   const char *dir);

/* Put path (absolute, or relative to the root; listing: a folder whose
 * names were read; missing: looked for in vain) used by n's run through
 * dep_path.h's policy: 1 with its recorded name in out (project-relative,
 * or absolute outside the project, "dir/" for a listing); 0 not recorded
 * (the machine's, kiln's own, an input of n's under build/, a folder only
 * stat'ed), with a warning in wl for a use of build/ n does not declare
 * and for a path that cannot be recorded. */
int step_dep_name(struct engine *e, const struct graph *g, const struct node *n,
                  const char *path, int listing, int missing, struct warn_list *wl,
                  char *out, size_t outlen);

/* Warn in wl that path cannot be recorded, and why. */
void step_warn_unrecordable(struct warn_list *wl, const char *path, const char *why);

/* n's warnings: how many; replace them with a copy of v (0 or
 * KILN_ENOMEM); free them. */
size_t step_nwarnings(const struct node *n);
int step_set_warnings(struct node *n, char *const *v, size_t count);
void step_warnings_free(struct node *n);

/* ---- graph.c (e->mu held) ---- */

/* Load the project, or load it again when a description file or a source
 * folder changed; no build may be active. 0, KILN_EBADPROJECT (err lists
 * the errors) or another error. */
int project_fresh(struct engine *e, char *err, size_t errlen);
/* The graph of a profile, made on first use. KILN_EINVAL: no such
 * profile; KILN_ENOMEM. (Outputs that would collide in build/ never get
 * here: the loader refuses them.) */
int graph_get(struct engine *e, const char *profile, struct graph **gp);
void graph_free(struct graph *g);
void graphs_free(struct engine *e);
void stamps_free(struct engine *e);
/* The XXH3-128 of the sorted names in folder path (absolute), each with
 * its NUL; "." and ".." never count, nor names starting with '.' with
 * NAMES_SKIP_DOT, nor "build" with NAMES_SKIP_BUILD. 0, KILN_ENOTFOUND
 * (no such folder), KILN_EIO, KILN_ENOMEM (*id zeroed on error). */
#define NAMES_SKIP_DOT 1u
#define NAMES_SKIP_BUILD 2u
int folder_names_hash(const char *path, unsigned flags, kiln_id *id);
/* The index of the step with this URL in the URL-sorted plan: 1 found. */
int step_index(const kiln_plan *p, const char *url, uint32_t *at);

/* ---- engine_need.c ---- */

/* Give n's run a fresh token (e->mu held). 0 or KILN_ENOMEM. */
int need_token_add(struct engine *e, struct graph *g, struct node *n);

/* n's tool ended (e->mu held): its token goes. 1: it held a -j slot
 * (e->running counts it); 0: it was suspended without one. */
int need_run_end(struct engine *e, struct node *n);

/* Build slots are joining n, which is already scheduled (node_schedule,
 * e->mu held): when n is suspended on a need or waits on its dynamic
 * prerequisites, those are to be scheduled for them too, by the next
 * need_join_flush (not here: node_schedule runs inside walks). */
void need_join(struct engine *e, const struct node *n);

/* Schedule what suspended runs and dynamic-prerequisite waiters wait on
 * for every build they belong to now, after builds joined them (e->mu
 * held; after node_schedule's callers, engine_build and our own). Without
 * it a cancel of the build that first asked would cancel what the others
 * wait on. Best effort: out of memory, the waiter sees the cancel. */
void need_join_flush(struct engine *e);

/* Give resolved suspended runs their slot back, before new steps start
 * (e->mu held). */
void need_grant(struct engine *e);

/* n finished (e->mu held): release nodes waiting on it as a dynamic
 * prerequisite, drop n's own waits. */
void need_finished(struct engine *e, struct graph *g, struct node *n);

/* Before deciding n (e->mu held, n is N_EVAL): schedule the steps its
 * last result needed for n's builds and put n back to N_WAITING on those
 * not done yet (1), or fill n->needs[].cur (0). */
int need_prereqs(struct engine *e, struct graph *g, struct node *n);

/* The i-th (0..2) `NAME=value` of the tool's kiln need environment,
 * malloc'd; NULL when out of memory. Unlocked. */
char *need_env(const struct engine *e, const struct node *n, int i);

/* Whether the needs a cached result recorded still hold (unlocked; takes
 * e->mu): 1 all resolve to their hash (n->needs set), 0 not (why says
 * which), -1 some are not done in this wave yet (n->needs set: EVAL_NEEDS),
 * KILN_ENOMEM. */
int need_check_result(struct engine *e, struct graph *g, struct node *n,
                      Kiln__UrlDep *const *deps, size_t ndeps, char *why,
                      size_t whylen);

/* The run's needs as UrlDeps for its ActionResult (one malloc'd block in
 * *out, free() it; *np entries). 0 or KILN_ENOMEM. */
int need_result_pb(const struct node *n, Kiln__UrlDep ***out, size_t *np);

/* The run succeeded: its needs become n->needs. Failed: dropped. */
void need_run_commit(struct node *n, int ok);

/* Free a need list. */
void need_deps_free(struct need_dep *v, size_t n);

/* Set up and tear down the engine's need state (engine_new/free). */
int need_init(struct engine *e);
void need_free(struct engine *e);

/* ---- engine.c, for engine_need.c (e->mu held) ---- */

int node_done_state(enum node_state st);
void node_schedule(struct engine *e, struct graph *g, struct node *n, struct build *b);
void node_make_ready(struct engine *e, struct graph *g, struct node *n);
unsigned jobs_limit(const struct engine *e);

/* ---- engine.c, for engine_step.c ---- */

/* A worker thread (engine_new starts them). */
void *worker_main(void *arg);

/* Commit what waits in the record batch (e->mu not held). 0, or the
 * failed commit's code (lost_note has it). */
int batch_commit(struct engine *e);

/* ---- lost.c: records a failed commit lost ---- */

/* The batch numbered gen failed to commit with rv (commit_mu held). */
void lost_note(struct engine *e, uint32_t gen, int rv);
/* Batch gen committed but skipped records naming blobs gc had removed
 * (commit_mu held): its steps are forgotten as a lost batch's are, but
 * their builds do not fail. */
void lost_note_skipped(struct engine *e, uint32_t gen);

/* Forget the in-memory results of the steps whose records were in the
 * failed batches noted since the last call, and count them into their
 * builds (e->mu held). Cheap when nothing failed. */
void lost_apply(struct engine *e);

/* n's full decision begins (unlocked, its worker): note the batch its
 * records may go to first. */
void lost_decision_begins(struct engine *e, struct node *n);

/* n finished in state st (e->mu held, before it is counted into its
 * builds): note the batch its records went to last; lose its result if
 * a record could not be queued or a batch since its first failed. */
void lost_node_finished(struct engine *e, struct graph *g, struct node *n,
                        enum node_state st);

/* The reaper thread's callback for a node's tool. */
void engine_tool_done(void *arg, const struct spawn_result *r);

/* Queue records for the next commit; commit when enough have waited. */
int engine_batch_lock(struct engine *e, kiln_batch **b);
void engine_batch_unlock(struct engine *e);

/* rm -rf path, not following symlinks. */
void engine_rmtree(const char *path);

/* ---- scratch.c ---- */

/* Remove the scratch areas of earlier daemon runs and make this run's
 * (e->scratch_run), which no earlier run used. Call once, after the sweep
 * of orphans: nothing of an earlier run may still write there. 0 or a
 * KILN_E* code. */
int scratch_init(struct engine *e);

/* The path of scratch folder id (suffix "") or of its log, trace or
 * depfile beside it (suffix ".log", ".trace", ".d"), in this run's area:
 * relative to the project root, or absolute when absolute is set. id 0 is
 * the area itself. Every scratch path is built here. 0 or KILN_ERANGE
 * (out too small). */
int scratch_path(const struct engine *e, unsigned id, const char *suffix,
                 int absolute, char *out, size_t len);

/* A scratch folder for a run: a free one (empty, with its empty log) or a
 * new one. *id is its number; *log_fd the open log for the tool's stdout
 * and stderr; *trace_off where this run's records will start in its trace
 * file. 0 or a KILN_E* code (nothing held). */
int scratch_take(struct engine *e, unsigned *id, int *log_fd, off_t *trace_off);

/* The run in folder id is finished (its outputs moved out, its log
 * published or empty): reuse the folder when the run left it empty,
 * otherwise remove it with its files. log_fd: the run's log, open and
 * empty, kept for the next run (or closed), or -1. */
void scratch_give(struct engine *e, unsigned id, int log_fd);

/* Forget the free list (engine_free; the folders go with .kiln/scratch). */
void scratch_free_all(struct engine *e);


#endif
