/* engine_run.c — running one step's tool and publishing what it made
 * (see engine_int.h; engine_step.c decides whether it must run).
 *
 * The tool gets its own scratch folder (.kiln/scratch/<run>/<n>/,
 * scratch.c) for its outputs,
 * a log file beside it for stdout and stderr, and the project root as its
 * working folder. Finishing: each output is moved into the store (a rename:
 * the scratch folder is on the project's filesystem), hard-linked into
 * build/<profile>/, and only then are the index, action and decision
 * records queued for the next batch commit.
 *
 * Threads: called by engine workers on nodes they hold. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "orphans.h"

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
	struct argvec in;   /* sources, then prerequisites' outputs */
	char scratch[PATH_MAX];   /* relative to the root */
	char depfile[PATH_MAX];
};

static int
paths_make(struct engine *e, const struct graph *g, const struct node *n,
           struct paths *p)
{
	memset(&p->in, 0, sizeof p->in);
	if (scratch_path(e, n->w->scratch, "", 0, p->scratch, sizeof p->scratch) != 0 ||
	    scratch_path(e, n->w->scratch, ".d", 0, p->depfile, sizeof p->depfile) != 0)
		return KILN_ERANGE;
	for (size_t i = 0; i < n->ks->ninputs; i++)
		av_push(&p->in, strdup(n->ks->inputs[i]));
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			av_push(&p->in, strdup(d->outpaths[i]));
	}
	return p->in.oom ? KILN_ENOMEM : 0;
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
			sb_str(&b, p->in.n ? p->in.v[0] : "");
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
		sh_refs(l, (const char *const *)p->in.v, p->in.n);
		return 1;
	}
	if (len == 2 && strncmp(name, "in", 2) == 0)
		one = p->in.n ? p->in.v[0] : "";
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
			for (size_t k = 0; k < p->in.n; k++)
				av_push(av, strdup(p->in.v[k]));
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
	/* kiln need: $KILN, $KILN_SOCKET, $KILN_STEP_TOKEN (engine_need.c) */
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

int
step_start(struct engine *e, struct graph *g, struct node *n)
{
	struct paths p;
	struct argvec av = {0}, env = {0};
	struct spawn_req rq;
	char exe[PATH_MAX];
	int rv;

	n->w->log_fd = -1;
	n->w->scratch = 0;
	if ((rv = scratch_take(e, &n->w->scratch, &n->w->log_fd, &n->w->trace_off)) != 0) {
		set_error(n, "%s: cannot make its scratch folder in .kiln/scratch: %s",
		          n->ks->url, kiln_strerror(rv));
		return rv;
	}
	if ((rv = paths_make(e, g, n, &p)) != 0 || (rv = argv_make(e, n, &p, &av)) != 0 ||
	    (rv = env_make(e, g, n, &p, &env)) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		goto out;
	}
	if ((rv = step_program(e, n, exe, sizeof exe, NULL, NULL)) != 0)
		goto out;
	rq.path = exe;
	rq.argv = (const char *const *)av.v;
	rq.envp = (const char *const *)env.v;
	rq.cwd = e->root;
	rq.log_fd = n->w->log_fd;
	/* e->desc is only replaced while no build runs: the pointer holds */
	n->w->timeout = kiln_desc_tool_timeout(e->desc, n->ks->tool);
	rq.timeout_ms = n->w->timeout ? n->w->timeout->s * 1000u : 0;
	n->w->start_ns = kiln_mono_ns();
	n->w->start_wall_ns = kiln_coarse_wall_ns();
	if ((rv = spawner_start(e->sp, &rq, engine_tool_done, &n->w->run, &n->w->pid)) != 0)
		set_error(n, "cannot start '%s' for %s: %s", exe, n->ks->url, kiln_strerror(rv));
out:
	av_free(&av);
	av_free(&env);
	av_free(&p.in);
	if (rv != 0) {   /* nothing ran: the log is still empty */
		scratch_give(e, n->w->scratch, n->w->log_fd);
		n->w->log_fd = -1;
	}
	return rv;
}

/* What a step's log keeps of a longer one: this much of its head and
 * of its tail. A tool printing a gigabyte must not put a gigabyte into
 * the store with every run; what matters is how it began and ended. */
#define LOG_KEEP ((off_t)1 << 20)

/* Cut the log in fd (size bytes, the tool gone) to its first and last
 * LOG_KEEP bytes around a line saying so. Best effort: a log that cannot
 * be cut is kept whole. */
static void
log_cut(int fd, off_t size)
{
	char mark[160];
	char *tail = malloc((size_t)LOG_KEEP);
	int len;

	if (tail == NULL || pread(fd, tail, (size_t)LOG_KEEP, size - LOG_KEEP) != LOG_KEEP) {
		free(tail);
		return;
	}
	len = snprintf(mark, sizeof mark, "\n[kiln: %lld bytes of the tool's output cut "
	               "here; the log keeps its first and last %lld bytes]\n",
	               (long long)(size - 2 * LOG_KEEP), (long long)LOG_KEEP);
	if (ftruncate(fd, LOG_KEEP) == 0 &&
	    pwrite(fd, mark, (size_t)len, LOG_KEEP) == len &&
	    pwrite(fd, tail, (size_t)LOG_KEEP, LOG_KEEP + len) == LOG_KEEP) {
		/* cut: the file holds head, mark, tail */
	}
	free(tail);
}

/* Move the log into the store (kept for failures too: `kiln log`), cut
 * to its head and tail when long; an empty one stays open for the
 * folder's next run. */
static void
log_publish(struct engine *e, struct node *n, const char *logp)
{
	struct stat st;

	n->w->has_log = 0;
	if (n->w->log_fd >= 0 && fstat(n->w->log_fd, &st) == 0 && st.st_size > 2 * LOG_KEEP)
		log_cut(n->w->log_fd, st.st_size);
	if (n->w->log_fd >= 0 && (fstat(n->w->log_fd, &st) != 0 || st.st_size > 0)) {
		if (kiln_store_put_move(e->s, logp, &n->w->log_id) == 0)
			n->w->has_log = 1;
		close(n->w->log_fd);
		n->w->log_fd = -1;
	}
}

static const char *
signal_name(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

/* Queue n's action result (its outputs, the files it discovered with what
 * they held after the run, the steps it needed, its log) under
 * n->w->new_key, beside the key's other results (action_results.c).
 * 0 or KILN_ENOMEM. */
static int
action_result_put(struct engine *e, struct node *n)
{
	Kiln__ActionResult ar = KILN__ACTION_RESULT__INIT;
	size_t no = n->ks->noutputs, nd = n->ndisc;
	struct pb_outputs *po = step_outputs_pb(n, 0);
	/* most steps discover nothing: no allocations for them */
	Kiln__FileDep *fdv = nd ? calloc(nd, sizeof *fdv) : NULL;
	Kiln__FileDep **fdp = nd ? calloc(nd, sizeof *fdp) : NULL;
	kiln_id *fdh = nd ? calloc(nd, sizeof *fdh) : NULL;
	Kiln__UrlDep **udp = NULL;
	int rv = KILN_ENOMEM;

	if (po == NULL ||
	    (nd > 0 && (fdv == NULL || fdp == NULL || fdh == NULL)) ||
	    need_result_pb(n, &udp, &ar.n_needs) != 0)
		goto out;
	ar.outputs = po->p;
	ar.n_outputs = no;
	for (size_t i = 0; i < nd; i++) {
		kiln__file_dep__init(&fdv[i]);
		fdv[i].path = n->disc[i];
		fdv[i].source = i < n->ndisc_depfile ? KILN__FILE_DEP__SOURCE__DEPFILE
		                : KILN__FILE_DEP__SOURCE__TRACE;
		/* a missing file keeps an empty hash: "must still be missing".
		 * The hash is the one run_verify took after the run. */
		if (n->w->disc_seen != NULL && !n->w->disc_seen[i].missing) {
			fdh[i] = n->w->disc_seen[i].h;
			fdv[i].hash.data = fdh[i].b;
			fdv[i].hash.len = 16;
		}
		fdp[i] = &fdv[i];
	}
	ar.files = fdp;
	ar.n_files = nd;
	ar.needs = udp;
	ar.traced = n->traced;
	ar.warnings = n->warnings;
	ar.n_warnings = step_nwarnings(n);
	if (n->w->has_log) {
		ar.log.data = n->w->log_id.b;
		ar.log.len = 16;
	}
	ar.duration_ns = n->duration_ns;
	rv = results_put(e, &n->w->new_key, &ar);
out:
	free(udp);
	free(fdv);
	free(fdp);
	free(fdh);
	free(po);
	return rv;
}

int
step_finish(struct engine *e, struct graph *g, struct node *n)
{
	char dir[PATH_MAX], logp[PATH_MAX + 16], tail[2048] = "";
	pid_t pid = n->w->pid;
	int rv = 0;

	/* the lengths were checked when the run started (paths_make) */
	scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir);
	scratch_path(e, n->w->scratch, ".log", 1, logp, sizeof logp);
	n->duration_ns = (uint64_t)n->w->res.wall_ns;
	__atomic_store_n(&n->w->pid, 0, __ATOMIC_RELEASE);   /* engine_cancel reads it */
	/* the last lines are for the error message: only a failure reads them */
	if (n->w->log_fd >= 0 && (!n->w->res.exited || n->w->res.status != 0))
		spawn_log_tail(n->w->log_fd, 8, tail, sizeof tail);
	log_publish(e, n, logp);
	if (!n->w->res.exited || n->w->res.status != 0) {
		if (n->w->res.timed_out && n->w->timeout != NULL)
			set_error(n, "%s: the tool ran longer than its timeout of %s (tool "
			          "'%s', %s:%d)%s%s", n->ks->url, n->w->timeout->text,
			          n->ks->tool->name, n->w->timeout->loc.file,
			          n->w->timeout->loc.line,
			          tail[0] ? "; its last lines:\n" : "", tail);
		else if (n->w->res.exited)
			set_error(n, "%s: the tool exited with status %d%s%s", n->ks->url,
			          n->w->res.status, tail[0] ? "; its last lines:\n" : "", tail);
		else
			set_error(n, "%s: the tool was killed by signal %d (SIG%s)%s%s",
			          n->ks->url, n->w->res.status, signal_name(n->w->res.status),
			          tail[0] ? "; its last lines:\n" : "", tail);
		rv = -1;
		goto out;
	}
	/* what it read and wrote, before anything it made is published */
	if (step_deps_read(e, g, n, pid, dir) != 0) {
		rv = -1;
		goto out;
	}
	/* and that it read what its key says (verify.c) */
	if (e->cfg.hold_finish_ms > 0) {
		struct timespec hold = {e->cfg.hold_finish_ms / 1000,
		                        (long)(e->cfg.hold_finish_ms % 1000) * 1000000};
		nanosleep(&hold, NULL);
	}
	if ((rv = run_verify(e, g, n, tail, sizeof tail)) != 1) {
		if (rv == 0) {
			free(n->reason);
			n->reason = strdup(tail);
			rv = STEP_AGAIN;
		} else {
			set_error(n, "%s: checking its inputs after the run: %s", n->ks->url,
			          kiln_strerror(rv));
			rv = -1;
		}
		goto out;
	}
	rv = 0;
	for (size_t i = 0; i < n->ks->noutputs && rv == 0; i++) {
		char out[PATH_MAX * 3];
		struct stat st;
		snprintf(out, sizeof out, "%s/%s", dir, n->ks->outputs[i].file);
		if (lstat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
			set_error(n, "%s: the tool did not write its output '%s' "
			          "(%s, expected at %s)", n->ks->url, n->ks->outputs[i].name,
			          n->ks->outputs[i].file, out + strlen(e->root) + 1);
			rv = -1;
			break;
		}
		n->outs[i].size = (uint64_t)st.st_size;
		if ((rv = kiln_store_put_move(e->s, out, &n->outs[i].id)) != 0) {
			set_error(n, "%s: cannot store output '%s': %s", n->ks->url,
			          n->ks->outputs[i].name, kiln_strerror(rv));
			rv = -1;
		}
	}
	if (rv == 0 && (rv = materialize_all(e, n)) != 0)
		rv = -1;
	if (rv == 0 && action_result_put(e, n) != 0) {
		set_error(n, "%s: out of memory", n->ks->url);
		rv = -1;
	}
	if (rv == 0) {
		n->key = n->w->new_key;
		n->have = 1;
		n->outcome = O_RAN;
		int qrv = outputs_record(e, g, n);
		/* its needs become the result's before the record lists them */
		need_run_commit(n, 1);
		if (qrv == 0)
			qrv = record_put(e, g, n, KILN__STEP_RECORD__DECISION__RAN);
		n->rec_failed = qrv != 0;   /* unrecorded: node_finish loses it */
		n->send_event = 1;
	}
out:
	if (rv != 0)
		need_run_commit(n, 0);
	if (n->ks->tool->depfile) {
		char dep[PATH_MAX + 16];
		scratch_path(e, n->w->scratch, ".d", 1, dep, sizeof dep);
		unlink(dep);
	}
	/* outputs were moved out: the folder is usually empty and is reused */
	scratch_give(e, n->w->scratch, n->w->log_fd);
	n->w->log_fd = -1;
	if (rv == 0) {   /* a failure keeps them for step_record_failure */
		prev_drop(n);
		key_parts_free(&n->w->parts);
	}
	return rv;
}

void
step_record_failure(struct engine *e, struct graph *g, struct node *n)
{
	n->have = 0;
	n->outcome = O_FAILED;
	if (n->w == NULL)   /* failed before deciding (no memory for it) */
		return;
	if (n->w->parts.n > 0) {
		if (n->w->prev == NULL)
			prev_load(e, g, n);
		record_put(e, g, n, KILN__STEP_RECORD__DECISION__FAILED);
	}
	prev_drop(n);
	key_parts_free(&n->w->parts);
}

void
step_forget(struct node *n)
{
	n->have = 0;
	node_work_free(n);
}

