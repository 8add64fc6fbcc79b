/* run.c — running one step's tool: its argv (the tool's template
 * expanded, or a shell line), its environment (PATH, the kiln need
 * variables, the file-access tracer), and its start through the spawner
 * (tool_spawn.h). decide.c decided it must run; publish.c finishes it
 * after its tool ended.
 *
 * The tool gets its own scratch folder (.kiln/scratch/<run>/<n>/,
 * scratch.c) for its outputs, a log file beside it for stdout and stderr,
 * and the project root as its working folder.
 *
 * Threads: the worker holding the node (N_RUNNING), unlocked; the tool's
 * end comes back on the reaper thread (engine_tool_done, schedule.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>

#include "engine_int.h"
#include "agent_jobs.h"
#include "bundle_build.h"
#include "decide.h"
#include "discover.h"
#include "need.h"
#include "remote.h"
#include "orphans.h"
#include "run.h"
#include "schedule.h"
#include "folder_out.h"
#include "scratch.h"
#include "search_path.h"
#include "step.h"

/* ---- running -------------------------------------------------------------- */

struct argvec {
	char **v;
	size_t n, cap;
	int oom;
};

static void
av_push(struct argvec *a, char *s)
{
	if (a->oom || s == NULL) {
		a->oom = 1;
		free(s);
		return;
	}
	if (a->n + 2 > a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 32;
		char **nv = realloc(a->v, ncap * sizeof *nv);
		if (nv == NULL) {
			a->oom = 1;
			free(s);
			return;
		}
		a->v = nv;
		a->cap = ncap;
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static void
av_free(struct argvec *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

/* Paths a step's templates can name: inputs, outputs, the depfile. */
struct paths {
	struct argvec in;   /* the step's inputs in written order (kiln_step.order) */
	struct argvec word; /* the same, as ${in} and ${in...} give them */
	char scratch[PATH_MAX];   /* relative to the root */
	char depfile[PATH_MAX];
};

/* Add input rel to p. A tool would read a word starting with '-' as an
 * option ("cat -n.txt"), so such a path is given as "./-n.txt": the same
 * file, never an option. */
static void
paths_in(struct paths *p, const char *rel)
{
	char *w = NULL;

	av_push(&p->in, strdup(rel));
	if (rel[0] == '-' && asprintf(&w, "./%s", rel) < 0)
		w = NULL;
	av_push(&p->word, rel[0] == '-' ? w : strdup(rel));
}

/* The inputs in the order the step's inputs: wrote them (sources and
 * prerequisites' outputs mixed): a tool that concatenates, packs or
 * includes its inputs depends on it. */
static int
paths_make(struct engine *e, const struct graph *g, const struct node *n,
           struct paths *p)
{
	memset(&p->in, 0, sizeof p->in);
	memset(&p->word, 0, sizeof p->word);
	if (scratch_path(e, n->w->scratch, "", 0, p->scratch, sizeof p->scratch) != 0 ||
	    scratch_path(e, n->w->scratch, ".d", 0, p->depfile, sizeof p->depfile) != 0)
		return KILN_ERANGE;
	for (size_t i = 0; i < n->ks->norder; i++) {
		const kiln_input *it = &n->ks->order[i];
		const struct node *d;
		size_t k;
		if (it->path != NULL)
			paths_in(p, it->path);
		else if (step_input_output(g, it, &d, &k) == 0)
			paths_in(p, d->outpaths[k]);
		else
			return KILN_ENOTFOUND;   /* the loader checked: not reached */
	}
	return p->in.oom || p->word.oom ? KILN_ENOMEM : 0;
}

/* The output file ${out} (name NULL) or ${out.NAME} names, in the
 * scratch folder. */
static void
out_path(const struct node *n, const struct paths *p, const char *name,
         size_t len, char *path, size_t size)
{
	const char *file = n->ks->noutputs ? n->ks->outputs[0].file : "";

	for (size_t i = 0; name && i < n->ks->noutputs; i++)
		if (strlen(n->ks->outputs[i].name) == len &&
		    strncmp(n->ks->outputs[i].name, name, len) == 0)
			file = n->ks->outputs[i].file;
	snprintf(path, size, "%s/%s", p->scratch, file);
}

/* Expand ${in}, ${out}, ${out.NAME} and ${depfile} in one argv item or
 * env value. */
static char *
expand(const struct node *n, const struct paths *p, const char *s)
{
	struct sbuf b = {0};

	sb_str(&b, "");
	while (*s) {
		const char *close;
		if (s[0] != '$' || s[1] != '{' || (close = strchr(s, '}')) == NULL) {
			sb_add(&b, s++, 1);
			continue;
		}
		size_t len = (size_t)(close - s - 2);
		const char *name = s + 2;
		char path[PATH_MAX * 2];
		if (len == 2 && strncmp(name, "in", 2) == 0) {
			sb_str(&b, p->word.n ? p->word.v[0] : "");
		} else if (len == 7 && strncmp(name, "depfile", 7) == 0) {
			sb_str(&b, p->depfile);
		} else if (len == 3 && strncmp(name, "out", 3) == 0) {
			out_path(n, p, NULL, 0, path, sizeof path);
			sb_str(&b, path);
		} else if (len > 4 && strncmp(name, "out.", 4) == 0) {
			out_path(n, p, name + 4, len - 4, path, sizeof path);
			sb_str(&b, path);
		} else {
			sb_add(&b, s, len + 3);  /* not ours: as written */
		}
		s = close + 1;
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- shell tools ----------------------------------------------------------
 *
 * A shell tool's command line never has a value written into it: the shell
 * would parse it, and a file named "$(touch x).png" would run a command
 * whatever quotes the description put around ${in}. Each value (the paths
 * here, and the loader's values: "${@K}" is kiln_step.argv[K], see
 * tmpl_scope.vals) becomes a positional parameter instead,
 * /bin/sh -c SCRIPT sh V1 V2 ..., and the script names it quoted for where
 * it stands: "${1}" outside quotes, ${1} inside double quotes, '"${1}"'
 * inside single quotes (the author's quotes closed around it), so '${in}',
 * "${in}" and ${in} all give one word. The scan that tells where a
 * reference stands knows quotes and backslashes only, not $(...) or
 * here-documents: where it guesses wrong, the command sees the reference's
 * text instead of the value, but the value itself is still never parsed. */

enum shq { SHQ_NONE, SHQ_SINGLE, SHQ_DOUBLE };

struct shline {
	struct sbuf script;
	struct argvec pos;   /* "sh" ($0), then the values: pos.v[k] is ${k} */
	enum shq q;          /* the quotes the script is in so far */
};

/* Make v[0..nv) positional parameters and write references to them as
 * that many words (none for none, like "$@"). */
static void
sh_refs(struct shline *l, const char *const *v, size_t nv)
{
	char ref[32];

	if (nv > 0 && l->q == SHQ_SINGLE)
		sb_str(&l->script, "'");
	for (size_t i = 0; i < nv; i++) {
		if (i > 0)
			sb_str(&l->script, l->q == SHQ_DOUBLE ? "\" \"" : " ");
		av_push(&l->pos, strdup(v[i]));
		snprintf(ref, sizeof ref, l->q == SHQ_DOUBLE ? "${%zu}" : "\"${%zu}\"",
		         l->pos.n - 1);
		sb_str(&l->script, ref);
	}
	if (nv > 0 && l->q == SHQ_SINGLE)
		sb_str(&l->script, "'");
}

/* K of a loader reference "@K", or 0. */
static size_t
loader_ref(const char *name, size_t len)
{
	size_t k = 0;

	if (len < 2 || len > 12 || name[0] != '@')
		return 0;
	for (size_t i = 1; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		k = k * 10 + (size_t)(name[i] - '0');
	}
	return k;
}

/* Replace ${name} by references to its values. 0 when the name is not
 * the engine's or the loader's (then the text stays as written). */
static int
sh_var(struct shline *l, const struct node *n, const struct paths *p,
       const char *name, size_t len)
{
	char path[PATH_MAX * 2];
	const char *one = path;
	size_t k;

	if (len == 5 && strncmp(name, "in...", 5) == 0) {
		sh_refs(l, (const char *const *)p->word.v, p->word.n);
		return 1;
	}
	if (len == 2 && strncmp(name, "in", 2) == 0)
		one = p->word.n ? p->word.v[0] : "";
	else if (len == 7 && strncmp(name, "depfile", 7) == 0)
		one = p->depfile;
	else if (len == 3 && strncmp(name, "out", 3) == 0)
		out_path(n, p, NULL, 0, path, sizeof path);
	else if (len > 4 && strncmp(name, "out.", 4) == 0)
		out_path(n, p, name + 4, len - 4, path, sizeof path);
	else if ((k = loader_ref(name, len)) != 0 && k < n->ks->nargv)
		one = n->ks->argv[k];
	else
		return 0;
	sh_refs(l, &one, 1);
	return 1;
}

/* Copy the script from s up to the next thing to look at, replacing a
 * reference; returns where to go on. */
static const char *
sh_step(struct shline *l, const struct node *n, const struct paths *p,
        const char *s)
{
	const char *close;

	if (s[0] == '\\' && l->q != SHQ_SINGLE && s[1] != '\0') {
		sb_add(&l->script, s, 2);
		return s + 2;
	}
	if (s[0] == '$' && s[1] == '$' && s[2] == '{') {   /* the loader kept "$${" */
		sb_str(&l->script, "${");
		return s + 3;
	}
	if (s[0] == '$' && s[1] == '{' && (close = strchr(s, '}')) != NULL &&
	    sh_var(l, n, p, s + 2, (size_t)(close - s - 2)))
		return close + 1;
	if (s[0] == '\'' && l->q != SHQ_DOUBLE)
		l->q = l->q == SHQ_SINGLE ? SHQ_NONE : SHQ_SINGLE;
	else if (s[0] == '"' && l->q != SHQ_SINGLE)
		l->q = l->q == SHQ_DOUBLE ? SHQ_NONE : SHQ_DOUBLE;
	sb_add(&l->script, s, 1);
	return s + 1;
}

/* /bin/sh -c SCRIPT sh V1 V2 ... for a shell tool. */
static int
sh_argv(const struct node *n, const struct paths *p, struct argvec *av)
{
	struct shline l = {.q = SHQ_NONE};
	const char *s = n->ks->nargv ? n->ks->argv[0] : "";

	sb_str(&l.script, "");
	av_push(&l.pos, strdup("sh"));
	while (*s != '\0')
		s = sh_step(&l, n, p, s);
	av_push(av, strdup("/bin/sh"));
	av_push(av, strdup("-c"));
	if (l.script.oom) {
		free(l.script.p);
		l.script.p = NULL;
	}
	av_push(av, l.script.p);   /* NULL: sets av->oom */
	for (size_t i = 0; i < l.pos.n; i++)
		av_push(av, l.pos.v[i]);   /* av owns each now */
	if (l.pos.oom)
		av->oom = 1;
	free(l.pos.v);
	return av->oom ? KILN_ENOMEM : 0;
}

static int
argv_make(struct engine *e, const struct node *n, const struct paths *p,
          struct argvec *av)
{
	const kiln_step *ks = n->ks;

	memset(av, 0, sizeof *av);
	(void)e;
	if (ks->tool->shell)
		return sh_argv(n, p, av);
	for (size_t i = 0; i < ks->nargv; i++) {
		if (strcmp(ks->argv[i], "${in...}") == 0) {
			for (size_t k = 0; k < p->word.n; k++)
				av_push(av, strdup(p->word.v[k]));
			continue;
		}
		av_push(av, expand(n, p, ks->argv[i]));
	}
	return av->oom || av->n == 0 ? KILN_ENOMEM : 0;
}

static int
env_make(struct engine *e, const struct graph *g, const struct node *n,
         const struct paths *p, struct argvec *env)
{
	const char *home = getenv("HOME");
	char buf[PATH_MAX * 2], *path;

	memset(env, 0, sizeof *env);
	/* the PATH its program was found on: what the tool's own lookups
	 * (a script's commands) see too */
	if (asprintf(&path, "PATH=%s", engine_path_of(e, n)) < 0)
		path = NULL;
	av_push(env, path);
	snprintf(buf, sizeof buf, "HOME=%s", home ? home : e->root);
	av_push(env, strdup(buf));
	av_push(env, strdup("LANG=C.UTF-8"));
	snprintf(buf, sizeof buf, "TMPDIR=%s/%s", e->root, p->scratch);
	av_push(env, strdup(buf));
	snprintf(buf, sizeof buf, "KILN_PROFILE=%s", g->profile);
	av_push(env, strdup(buf));
	snprintf(buf, sizeof buf, "KILN_PROJECT=%s", e->root);
	av_push(env, strdup(buf));
	/* what the next daemon's sweep finds this run's processes by: every
	 * process the tool starts inherits it (orphans.h) */
	snprintf(buf, sizeof buf, ORPHANS_MARKER "=%s", e->root);
	av_push(env, strdup(buf));
	snprintf(buf, sizeof buf, "KILN_URL=%s", n->ks->url);
	av_push(env, strdup(buf));
	/* kiln need: $KILN, $KILN_SOCKET, $KILN_STEP_TOKEN (need.c) */
	for (int i = 0; e->ipc_url != NULL && i < 3; i++)
		av_push(env, need_env(e, n, i));
	{   /* file-access tracing (trace.c) */
		char *tr[8];
		size_t ntr = 0;
		if (!n->ks->tool->notrace && trace_env(e, n->w->scratch, tr, &ntr) != 0)
			env->oom = 1;
		for (size_t i = 0; i < ntr; i++)
			av_push(env, tr[i]);
	}
	for (size_t i = 0; i < n->ks->nenv; i++) {
		char *v = expand(n, p, n->ks->env[i].value);
		if (v == NULL) {
			env->oom = 1;
			break;
		}
		snprintf(buf, sizeof buf, "%s=%s", n->ks->env[i].key, v);
		free(v);
		av_push(env, strdup(buf));
	}
	return env->oom ? KILN_ENOMEM : 0;
}

/* What step_start and step_job both need: the scratch folder, the
 * paths, the argv, the program. On failure n->error is set and nothing is
 * held. */
struct run_prep {
	struct paths p;
	struct argvec av;
	char exe[PATH_MAX];
	kiln_id exe_id;
};

static void
prep_free(struct run_prep *rp)
{
	av_free(&rp->av);
	av_free(&rp->p.in);
	av_free(&rp->p.word);
}

/* The empty folders of n's folder outputs, in its scratch folder. */
static int
folder_prepare_at(struct engine *e, struct node *n)
{
	char dir[PATH_MAX];

	if (scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir) != 0)
		return KILN_ERANGE;
	return folder_prepare(n, dir);
}

static int
prep_make(struct engine *e, struct graph *g, struct node *n, struct run_prep *rp)
{
	int rv;

	memset(rp, 0, sizeof *rp);
	n->w->log_fd = -1;
	n->w->scratch = 0;
	/* nothing of an earlier run on an agent (a run thrown away, decided
	 * again) may pass for this one's */
	free(n->w->landed);
	n->w->landed = NULL;
	n->w->machine[0] = '\0';
	n->w->agent_pid = 0;
	if ((rv = scratch_take(e, &n->w->scratch, &n->w->log_fd, &n->w->trace_off)) != 0) {
		set_error(n, "%s: cannot make its scratch folder in .kiln/scratch: %s",
		          n->ks->url, kiln_strerror(rv));
		return rv;
	}
	if ((rv = paths_make(e, g, n, &rp->p)) != 0 || (rv = argv_make(e, n, &rp->p, &rp->av)) != 0 ||
	    (rv = probe_words_make(&n->w->words, rp->av.v, rp->av.n, n->ks->tool->shell)) != 0)
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	else if (n->folders && (rv = folder_prepare_at(e, n)) != 0)
		set_error(n, "%s: cannot make its folder outputs in its scratch folder: %s",
		          n->ks->url, kiln_strerror(rv));
	else
		rv = step_program(e, n, rp->exe, sizeof rp->exe, &rp->exe_id, NULL);
	/* e->desc is only replaced while no build runs: the pointer holds */
	n->w->timeout = kiln_desc_tool_timeout(e->desc, n->ks->tool);
	if (rv != 0) {
		prep_free(rp);
		scratch_give(e, n->w->scratch, n->w->log_fd);
		n->w->log_fd = -1;
	}
	return rv;
}

/* Start n's tool with done(arg, result) called when it ends: the one
 * spawn of a build's step and an audit's. On failure nothing ran and the
 * scratch folder is given back. */
static int
spawn_step(struct engine *e, struct graph *g, struct node *n, spawn_done_fn done,
           void *arg, pid_t *pid)
{
	struct run_prep rp;
	struct argvec env = {0};
	struct spawn_req rq;
	int rv;

	if ((rv = prep_make(e, g, n, &rp)) != 0)
		return rv;
	if ((rv = env_make(e, g, n, &rp.p, &env)) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		goto fail;
	}
	rq.path = rp.exe;
	rq.argv = (const char *const *)rp.av.v;
	rq.envp = (const char *const *)env.v;
	rq.cwd = e->root;
	rq.log_fd = n->w->log_fd;
	rq.timeout_ms = n->w->timeout ? n->w->timeout->s * 1000u : 0;
	n->w->start_ns = kiln_mono_ns();
	n->w->start_wall_ns = kiln_coarse_wall_ns();
	if ((rv = spawner_start(e->sp, &rq, done, arg, pid)) != 0)
		set_error(n, "cannot start '%s' for %s: %s", rp.exe, n->ks->url, kiln_strerror(rv));
fail:
	prep_free(&rp);
	av_free(&env);
	if (rv != 0) {   /* nothing ran: the log is still empty */
		scratch_give(e, n->w->scratch, n->w->log_fd);
		n->w->log_fd = -1;
	}
	return rv;
}

int
step_start(struct engine *e, struct graph *g, struct node *n)
{
	if (n->ks->tool->builtin)   /* a bundle: packed here, no process */
		return bundle_start(e, g, n);
	return spawn_step(e, g, n, engine_tool_done, &n->w->run, &n->w->pid);
}

/* ---- a run waited for (kiln audit) ----------------------------------------- */

struct run_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	struct spawn_result r;
};

/* The reaper: the tool ended (must not block: it only signals). */
static void
run_wait_done(void *arg, const struct spawn_result *r)
{
	struct run_wait *w = arg;

	pthread_mutex_lock(&w->mu);
	w->r = *r;
	w->done = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int
step_run_wait(struct engine *e, struct graph *g, struct node *n,
              struct spawn_result *res)
{
	struct run_wait w = {.mu = PTHREAD_MUTEX_INITIALIZER,
	                     .cv = PTHREAD_COND_INITIALIZER};
	pid_t pid;
	int rv = spawn_step(e, g, n, run_wait_done, &w, &pid);

	if (rv == 0) {
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		*res = w.r;
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	return rv;
}

/* ---- a job for an agent --------------------------------------------------- */

/* Add rel (blob id, size bytes) to the job's inputs. */
static int
job_file(Kiln__AgentJob *j, const char *rel, const kiln_id *id, uint64_t size, int exec)
{
	Kiln__AgentFile *f;

	if ((f = calloc(1, sizeof *f + 16 + 32)) == NULL)   /* id, sha256 */
		return KILN_ENOMEM;
	kiln__agent_file__init(f);
	if ((f->path = strdup(rel)) == NULL) {
		free(f);
		return KILN_ENOMEM;
	}
	f->id.data = (uint8_t *)(f + 1);
	memcpy(f->id.data, id->b, 16);
	f->id.len = 16;
	f->size = size;
	f->exec = exec;
	j->inputs[j->n_inputs++] = f;
	return 0;
}

static int
job_has(const Kiln__AgentJob *j, const char *rel)
{
	for (size_t i = 0; i < j->n_inputs; i++)
		if (strcmp(j->inputs[i]->path, rel) == 0)
			return 1;
	return 0;
}

/* What n's key was made from for its declared input rel (NULL: not a
 * declared input, or missing then). */
static const kiln_file_rec *
keyed_input(const struct node *n, const char *rel)
{
	size_t lo = 0, hi = n->ks->ninputs;

	if (n->w->seen_in == NULL)
		return NULL;
	while (lo < hi) {   /* ks->inputs is sorted */
		size_t mid = (lo + hi) / 2;
		int c = strcmp(n->ks->inputs[mid], rel);
		if (c == 0)
			return n->w->seen_in[mid].missing ? NULL : &n->w->seen_in[mid].rec;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Put the project file rel into the store (agents fetch by id) and add it
 * to the job's inputs, once. keyed: the content the step's key was made
 * from (NULL: none): when the store has it, that blob is sent as it is,
 * the file not read again (the agent then runs on what the key says; an
 * edit since is caught after the run, verify.c). */
static int
job_input(struct engine *e, Kiln__AgentJob *j, const char *rel, int exec,
          const kiln_file_rec *keyed)
{
	char abs[PATH_MAX * 2];
	kiln_id id;
	struct stat st;
	int fd, rv;

	if (job_has(j, rel))
		return 0;
	snprintf(abs, sizeof abs, "%s/%s", e->root, rel);
	if (keyed != NULL && kiln_store_has(e->s, &keyed->hash, NULL) == 0) {
		if (lstat(abs, &st) != 0 || !S_ISREG(st.st_mode))
			memset(&st, 0, sizeof st);   /* gone: the run is thrown away */
		return job_file(j, rel, &keyed->hash, keyed->size,
		                exec || (st.st_mode & 0111) != 0);
	}
	if ((fd = open(abs, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return errno == ENOENT ? KILN_ENOTFOUND : KILN_EIO;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return KILN_EINVAL;
	}
	/* hashed first: a source the store has already costs a read, not a
	 * new file in the store */
	if ((rv = kiln_id_of_fd(fd, &id, NULL)) == 0 && kiln_store_has(e->s, &id, NULL) != 0 &&
	    (rv = lseek(fd, 0, SEEK_SET) == 0 ? 0 : KILN_EIO) == 0) {
		kiln_id put;
		if ((rv = kiln_store_put_fd(e->s, fd, &put)) == 0 && memcmp(put.b, id.b, 16) != 0)
			id = put;   /* it changed between the two reads: what was stored */
	}
	close(fd);
	if (rv != 0)
		return rv;
	return job_file(j, rel, &id, (uint64_t)st.st_size, exec || (st.st_mode & 0111) != 0);
}

/* Add the project file the argv word names, if it does, to the job's
 * inputs (agent_argv_file says which words do). One that cannot be read
 * now is left out: the agent's run lacks it and its trace says so
 * (agent_files.c). 0 or KILN_ENOMEM. */
static int
job_argv_file(struct engine *e, Kiln__AgentJob *j, const char *word)
{
	char rel[PATH_MAX];

	/* an input already (the usual word): no look at the file system */
	if (job_has(j, word) || !agent_argv_file(e, word, rel, sizeof rel) || job_has(j, rel))
		return 0;
	return job_input(e, j, rel, 0, NULL) == KILN_ENOMEM ? KILN_ENOMEM : 0;
}

/* The same for each word of a shell tool's script, split where the shell
 * would split a plain command (blanks, quotes, operators): `python3
 * tools/x.py "${1}"` names tools/x.py. Only a guess (no expansions):
 * what it misses the trace finds, at the cost of a try. */
static int
job_script_files(struct engine *e, Kiln__AgentJob *j, const char *script)
{
	char *copy = strdup(script), *save = NULL;
	int rv = 0;

	if (copy == NULL)
		return KILN_ENOMEM;
	for (char *w = strtok_r(copy, " \t\n;|&<>()'\"`", &save); w != NULL && rv == 0;
	     w = strtok_r(NULL, " \t\n;|&<>()'\"`", &save))
		rv = job_argv_file(e, j, w);
	free(copy);
	return rv;
}

static char **
strv_copy(char *const *v, size_t n)
{
	char **out = calloc(n + 1, sizeof *out);

	for (size_t i = 0; out != NULL && i < n; i++)
		if ((out[i] = strdup(v[i])) == NULL) {
			for (size_t k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
	return out;
}

void
step_job_free(Kiln__AgentJob *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; i < j->n_argv; i++)
		free(j->argv[i]);
	free(j->argv);
	for (size_t i = 0; i < j->n_env; i++)
		free(j->env[i]);
	free(j->env);
	for (size_t i = 0; i < j->n_inputs; i++) {
		free(j->inputs[i]->path);
		free(j->inputs[i]);
	}
	free(j->inputs);
	for (size_t i = 0; i < j->n_outputs; i++)
		free(j->outputs[i]);
	free(j->outputs);
	free(j->url);
	free(j->profile);
	free(j->program);
	free(j->program_id.data);
	free(j->scratch);
	free(j->depfile);
	free(j->need_token);
	free(j);
}

int
step_job(struct engine *e, struct graph *g, struct node *n, char *const *extra,
         size_t nextra, Kiln__AgentJob **out)
{
	struct run_prep rp;
	struct argvec env = {0};
	Kiln__AgentJob *j = calloc(1, sizeof *j);
	const char *prog = n->ks->tool->shell ? "/bin/sh" : n->ks->nargv ? n->ks->argv[0] : "";
	char buf[PATH_MAX * 2];
	size_t nin;
	int rv;

	*out = NULL;
	if (j == NULL) {
		set_error(n, "%s: out of memory", n->ks->url);
		return KILN_ENOMEM;
	}
	kiln__agent_job__init(j);
	if ((rv = prep_make(e, g, n, &rp)) != 0) {
		free(j);
		return rv;
	}
	n->w->start_ns = kiln_mono_ns();
	n->w->start_wall_ns = kiln_coarse_wall_ns();
	snprintf(buf, sizeof buf, "KILN_PROFILE=%s", g->profile);
	av_push(&env, strdup(buf));
	snprintf(buf, sizeof buf, "KILN_URL=%s", n->ks->url);
	av_push(&env, strdup(buf));
	for (size_t i = 0; i < n->ks->nenv; i++) {
		char *v = expand(n, &rp.p, n->ks->env[i].value);
		if (v == NULL) {
			env.oom = 1;
			break;
		}
		snprintf(buf, sizeof buf, "%s=%s", n->ks->env[i].key, v);
		free(v);
		av_push(&env, strdup(buf));
	}
	/* inputs, extras, argv's files (a shell script's words: at most one
	 * per two characters), the program */
	nin = rp.p.in.n + nextra + rp.av.n + 1;
	if (n->ks->tool->shell && rp.av.n > 2 && rp.av.v[2] != NULL)
		nin += strlen(rp.av.v[2]) / 2 + 1;
	j->url = strdup(n->ks->url);
	j->profile = strdup(g->profile);
	j->program = strdup(prog);
	j->program_id.data = malloc(16);
	j->scratch = strdup(rp.p.scratch);
	j->depfile = strdup(n->ks->tool->depfile ? rp.p.depfile : "");
	j->inputs = calloc(nin, sizeof *j->inputs);
	j->outputs = calloc(n->ks->noutputs + 1, sizeof *j->outputs);
	if (env.oom || rp.av.oom || j->url == NULL || j->profile == NULL ||
	    j->program == NULL || j->program_id.data == NULL || j->scratch == NULL ||
	    j->depfile == NULL || j->inputs == NULL || j->outputs == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	memcpy(j->program_id.data, rp.exe_id.b, 16);
	j->program_id.len = 16;
	if ((j->argv = strv_copy(rp.av.v, rp.av.n)) == NULL ||
	    (j->env = strv_copy(env.v, env.n)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	j->n_argv = rp.av.n;
	j->n_env = env.n;
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		if ((j->outputs[i] = strdup(n->ks->outputs[i].file)) == NULL) {
			rv = KILN_ENOMEM;
			goto fail;
		}
		j->n_outputs++;
	}
	j->timeout_ms = n->w->timeout ? n->w->timeout->s * 1000u : 0;
	/* kiln need, relayed by the agent (no token: tools get none) */
	if (e->ipc_url != NULL && (j->need_token = strdup(n->w->token)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	j->notrace = n->ks->tool->notrace || e->trace_shim[0] == '\0';
	/* a program inside the project travels as an input */
	if (strchr(prog, '/') != NULL && prog[0] != '/' &&
	    (rv = job_input(e, j, prog, 1, NULL)) != 0) {
		set_error(n, "%s: its program '%s': %s", n->ks->url, prog, kiln_strerror(rv));
		goto fail;
	}
	/* prerequisites' outputs by the blob their result recorded (not
	 * what build/ holds now: someone may have edited it) */
	for (size_t o = 0; o < n->ks->norder; o++) {
		const struct node *d;
		size_t i;
		if (step_input_output(g, &n->ks->order[o], &d, &i) == 0 &&
		    !job_has(j, d->outpaths[i]) &&
		    kiln_store_has(e->s, &d->outs[i].id, NULL) == 0 &&
		    (rv = job_file(j, d->outpaths[i], &d->outs[i].id, d->outs[i].size, 0)) != 0)
			goto fail;
	}
	for (size_t i = 0; i < rp.p.in.n + nextra; i++) {
		const char *rel = i < rp.p.in.n ? rp.p.in.v[i] : extra[i - rp.p.in.n];
		if (job_has(j, rel))
			continue;
		rv = job_input(e, j, rel, 0, keyed_input(n, rel));
		/* a file the run looked for that went away since: the agent
		 * finds it missing too, as the tool would have here */
		if (rv == KILN_ENOTFOUND && i >= rp.p.in.n)
			continue;
		if (rv != 0) {
			set_error(n, "%s: input %s: %s", n->ks->url, rel, kiln_strerror(rv));
			goto fail;
		}
	}
	/* project files its argv names (a script run by path: `python3
	 * tools/x.py`) travel as inputs, as the program does: the tool opens
	 * them as it would here, and its trace records them as here */
	for (size_t i = 1; i < rp.av.n; i++)
		if ((rv = n->ks->tool->shell && i == 2 ? job_script_files(e, j, rp.av.v[i])
		          : job_argv_file(e, j, rp.av.v[i])) != 0)
			goto fail;
	/* with a shared cache agents fetch their inputs there, by SHA-256
	 * (offered: uploaded when the server lacks them) */
	for (size_t i = 0; remote_enabled(e) && i < j->n_inputs; i++) {
		Kiln__AgentFile *f = j->inputs[i];
		kiln_id id;
		memcpy(id.b, f->id.data, 16);
		if (remote_blob_offer(e, &id, f->id.data + 16) == 0) {
			f->sha256.data = f->id.data + 16;
			f->sha256.len = 32;
		}
	}
	prep_free(&rp);
	av_free(&env);
	*out = j;
	return 0;
fail:
	if (n->error == NULL)
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	prep_free(&rp);
	av_free(&env);
	step_job_free(j);
	scratch_give(e, n->w->scratch, n->w->log_fd);
	n->w->log_fd = -1;
	return rv;
}
