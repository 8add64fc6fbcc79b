/* engine_run.c — running one step's tool and publishing what it made
 * (see engine_int.h; engine_step.c decides whether it must run).
 *
 * The tool gets its own scratch folder (.kiln/scratch/<run>/<n>/,
 * engine_scratch.c) for its outputs,
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

/* Single-quote s for /bin/sh. */
static void
sh_quote(struct sbuf *b, const char *s)
{
	sb_str(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			sb_str(b, "'\\''");
		else
			sb_add(b, s, 1);
	}
	sb_str(b, "'");
}

/* A path into a command: as it is in an argv item; single-quoted in a
 * shell command, so that a file named "x'$(rm -rf ~)'.png" stays a name
 * (quotes the description adds around it still work for ordinary names:
 * '' is empty). */
static void
put_path(struct sbuf *b, const char *path, int shell)
{
	if (shell)
		sh_quote(b, path);
	else
		sb_str(b, path);
}

/* Expand ${in}, ${out}, ${out.NAME}, ${depfile} (and, in a shell command,
 * ${in...} as quoted words) in one template item. */
static char *
expand(const struct node *n, const struct paths *p, const char *s, int shell)
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
			put_path(&b, p->in.n ? p->in.v[0] : "", shell);
		} else if (len == 5 && strncmp(name, "in...", 5) == 0 && shell) {
			for (size_t i = 0; i < p->in.n; i++) {
				if (i)
					sb_str(&b, " ");
				sh_quote(&b, p->in.v[i]);
			}
		} else if (len == 7 && strncmp(name, "depfile", 7) == 0) {
			put_path(&b, p->depfile, shell);
		} else if ((len == 3 && strncmp(name, "out", 3) == 0) ||
		           (len > 4 && strncmp(name, "out.", 4) == 0)) {
			const char *want = len == 3 ? NULL : name + 4;
			size_t wl = len == 3 ? 0 : len - 4;
			const char *file = n->ks->noutputs ? n->ks->outputs[0].file : "";
			for (size_t i = 0; want && i < n->ks->noutputs; i++)
				if (strlen(n->ks->outputs[i].name) == wl &&
				    strncmp(n->ks->outputs[i].name, want, wl) == 0)
					file = n->ks->outputs[i].file;
			snprintf(path, sizeof path, "%s/%s", p->scratch, file);
			put_path(&b, path, shell);
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

static int
argv_make(struct engine *e, const struct node *n, const struct paths *p,
          struct argvec *av)
{
	const kiln_step *ks = n->ks;

	memset(av, 0, sizeof *av);
	if (ks->tool->shell) {
		av_push(av, strdup("/bin/sh"));
		av_push(av, strdup("-c"));
		av_push(av, expand(n, p, ks->nargv ? ks->argv[0] : "", 1));
	} else {
		for (size_t i = 0; i < ks->nargv; i++) {
			if (strcmp(ks->argv[i], "${in...}") == 0) {
				for (size_t k = 0; k < p->in.n; k++)
					av_push(av, strdup(p->in.v[k]));
				continue;
			}
			av_push(av, expand(n, p, ks->argv[i], 0));
		}
	}
	(void)e;
	return av->oom || av->n == 0 ? KILN_ENOMEM : 0;
}

static int
env_make(struct engine *e, const struct graph *g, const struct node *n,
         const struct paths *p, struct argvec *env)
{
	const char *home = getenv("HOME");
	char buf[PATH_MAX * 2];

	memset(env, 0, sizeof *env);
	snprintf(buf, sizeof buf, "PATH=%s", e->tool_path);
	av_push(env, strdup(buf));
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
	{   /* file-access tracing (engine_trace.c) */
		char *tr[8];
		size_t ntr = 0;
		if (!n->ks->tool->notrace && trace_env(e, n->w->scratch, tr, &ntr) != 0)
			env->oom = 1;
		for (size_t i = 0; i < ntr; i++)
			av_push(env, tr[i]);
	}
	for (size_t i = 0; i < n->ks->nenv; i++) {
		char *v = expand(n, p, n->ks->env[i].value, 0);
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
	n->w->start_ns = engine_now_ns();
	n->w->start_wall_ns = engine_coarse_ns();
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

/* Move the log into the store (kept for failures too: `kiln log`); an
 * empty one stays open for the folder's next run. */
static void
log_publish(struct engine *e, struct node *n, const char *logp)
{
	struct stat st;

	n->w->has_log = 0;
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
 * n->w->new_key, beside the key's other results (engine_results.c).
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
		if (n->w->res.exited)
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
	/* and that it read what its key says (engine_verify.c) */
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

