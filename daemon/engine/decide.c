/* engine_step.c — one step: deciding whether it is up to date, running
 * its tool, and publishing what it made (see engine_int.h).
 *
 * Deciding: the step's key parts are gathered (tool identity, expanded
 * argv and env, params, the profile variables the tool uses, output names,
 * the hashes of its source inputs and of its prerequisites' outputs) and
 * hashed into the action key. The same key as this daemon's last decision,
 * with the materialized files untouched, is up to date without a database
 * read. Otherwise the actions database is asked; a result whose blobs are
 * all still in the store, whose discovered files hash as recorded and
 * whose kiln needs resolve to their recorded outputs (engine_need.c) is
 * reused (materialized again), anything else runs. Every decision that differs from the stored one is recorded with
 * the key's parts, so `kiln why` can say what changed.
 *
 * Running: the tool gets its own scratch folder .kiln/scratch/<n>/ for its
 * outputs, a log file beside it for stdout and stderr, and the project
 * root as its working folder. Finishing: each output is moved into the
 * store (a rename: the scratch folder is on the project's filesystem),
 * copied (or, with materialize: hardlink, hard-linked) into
 * build/<profile>/, and only then are the index, action and decision
 * records queued for the next batch commit.
 *
 * Threads: called by engine workers on nodes they hold (engine_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "watch.h"

/* ---- small helpers -------------------------------------------------------- */

void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t ncap = (b->n + n + 1) * 2;
		char *np = realloc(b->p, ncap);
		if (np == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

void
set_error(struct node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void
set_error(struct node *n, const char *fmt, ...)
{
	va_list ap;
	char buf[4096];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	free(n->error);
	n->error = strdup(buf);
}

int
node_work_get(struct node *n)
{
	if (n->w != NULL)
		return 0;
	if ((n->w = calloc(1, sizeof *n->w)) == NULL)
		return KILN_ENOMEM;
	key_parts_init(&n->w->parts);
	n->w->log_fd = -1;
	return 0;
}

void
node_work_free(struct node *n)
{
	if (n->w == NULL)
		return;
	key_parts_free(&n->w->parts);
	prev_drop(n);
	free(n->w->seen_in);
	free(n->w->disc_seen);
	free(n->w);
	n->w = NULL;
}

static void
set_reason(struct node *n, const char *reason)
{
	free(n->reason);
	n->reason = strdup(reason);
}

int
step_output_path(const struct graph *g, const struct node *n, size_t i,
                 char *out, size_t outlen)
{
	const char *url = n->ks->url, *slash = strrchr(url, '/');
	int w;

	if (slash != NULL)
		w = snprintf(out, outlen, "build/%s/%.*s/%s", g->profile,
		             (int)(slash - url), url, n->ks->outputs[i].file);
	else
		w = snprintf(out, outlen, "build/%s/%s", g->profile, n->ks->outputs[i].file);
	return w < 0 || (size_t)w >= outlen ? KILN_ERANGE : 0;
}

struct pb_outputs *
step_outputs_pb(const struct node *n, int with_paths)
{
	size_t no = n->ks->noutputs;
	struct pb_outputs *o = malloc(sizeof *o + no * (sizeof *o->v + sizeof *o->p));

	if (o == NULL)
		return NULL;
	o->v = (Kiln__StepOutput *)(o + 1);
	o->p = (Kiln__StepOutput **)(o->v + no);
	o->n = no;
	for (size_t i = 0; i < no; i++) {
		kiln__step_output__init(&o->v[i]);
		o->v[i].name = (char *)n->ks->outputs[i].name;
		o->v[i].id.data = (uint8_t *)n->outs[i].id.b;
		o->v[i].id.len = 16;
		o->v[i].size = n->outs[i].size;
		if (with_paths)
			o->v[i].path = n->outpaths[i];
		o->p[i] = &o->v[i];
	}
	return o;
}

/* The index URL of output i: the step's URL, or URL#name for a step with
 * named outputs. */
static void
output_url(const struct node *n, size_t i, char *out, size_t outlen)
{
	const char *name = n->ks->outputs[i].name;

	if (n->ks->noutputs == 1 && strcmp(name, "out") == 0)
		snprintf(out, outlen, "%s", n->ks->url);
	else
		snprintf(out, outlen, "%s#%s", n->ks->url, name);
}

static int
id_eq(const kiln_id *a, const kiln_id *b)
{
	return memcmp(a->b, b->b, 16) == 0;
}

/* ---- key parts ------------------------------------------------------------ */

static void
val_render(struct sbuf *b, const kiln_val *v)
{
	switch (v->type) {
	case KILN_VAL_LIST:
		sb_str(b, "[");
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				sb_str(b, ", ");
			val_render(b, &v->items[i]);
		}
		sb_str(b, "]");
		break;
	case KILN_VAL_MAP:
		sb_str(b, "{");
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				sb_str(b, ", ");
			sb_str(b, v->keys[i]);
			sb_str(b, ": ");
			val_render(b, &v->items[i]);
		}
		sb_str(b, "}");
		break;
	case KILN_VAL_NULL:
		sb_str(b, "null");
		break;
	default:
		sb_str(b, v->str ? v->str : "");
	}
}

/* Whether any of the tool's templates names ${name} (or ${name...}). */
static int
tool_uses(const kiln_tool *t, const char *name)
{
	size_t ln = strlen(name);

	for (size_t i = 0; i < t->nrun + t->nenv; i++) {
		const char *s = i < t->nrun ? t->run[i] : t->env[i - t->nrun].value;
		for (const char *p = s; (p = strstr(p, "${")) != NULL; p += 2)
			if (strncmp(p + 2, name, ln) == 0 &&
			    (p[2 + ln] == '}' || p[2 + ln] == '.'))
				return 1;
	}
	return 0;
}

/* The program the step runs, found on its build's PATH (absolute in exe),
 * and its content hash (h may be NULL): looked up once per tool, PATH
 * and wave, since a PATH search is several syscalls and a build has many
 * steps per tool. */
int
step_program(struct engine *e, struct node *n, char *exe, size_t len, kiln_id *h,
             struct fs_seen *seen)
{
	const kiln_tool *t = n->ks->tool;
	const char *prog = t->shell ? "/bin/sh" : n->ks->nargv ? n->ks->argv[0] : "";
	const char *path = engine_path_of(e, n);
	struct tool_seen *ts = NULL;
	struct fs_seen fss;
	kiln_id hash;
	int rv;

	/* argv[0] may hold variables: cache only tools whose program is the
	 * template's own first word. The lock is held through the lookup: two
	 * workers deciding steps of one tool at a wave's start would both
	 * find and stat it (and `files_statted` would count it twice). */
	int cacheable = t->shell || (t->nrun > 0 && strcmp(t->run[0], prog) == 0);
	pthread_mutex_lock(&e->tools_mu);
	for (size_t i = 0; cacheable && i < e->ntools; i++)
		if (e->tools[i].t == t && e->tools[i].pathi == n->pathi)
			ts = &e->tools[i];
	if (ts != NULL && ts->wave == n->wave) {
		rv = ts->rv;
		snprintf(exe, len, "%s", ts->exe);
		hash = ts->hash;
		fss = ts->seen;
		pthread_mutex_unlock(&e->tools_mu);
		goto done;
	}
	if (!cacheable)
		pthread_mutex_unlock(&e->tools_mu);
	rv = spawn_find(prog, path, e->root, exe, len);
	if (rv == 0)
		rv = filestate_hash_seen(e->fs, exe, &hash, &fss);
	if (cacheable) {
		if (ts == NULL && e->ntools == e->captools) {
			size_t ncap = e->captools ? e->captools * 2 : 16;
			struct tool_seen *nv = realloc(e->tools, ncap * sizeof *nv);
			if (nv != NULL) {
				e->tools = nv;
				e->captools = ncap;
			}
		}
		if (ts == NULL && e->ntools < e->captools)
			ts = &e->tools[e->ntools++];
		if (ts != NULL) {
			ts->t = t;
			ts->pathi = n->pathi;
			ts->wave = n->wave;
			ts->rv = rv;
			snprintf(ts->exe, sizeof ts->exe, "%s", exe);
			ts->hash = hash;
			ts->seen = fss;
		}
		pthread_mutex_unlock(&e->tools_mu);
	}
done:
	if (rv != 0)
		set_error(n, "tool '%s' (%s:%d): program '%s' %s (PATH=%s)", t->name,
		          t->loc.file ? t->loc.file : "?", t->loc.line, prog,
		          rv == KILN_ENOTFOUND ? "not found or not executable"
		                               : kiln_strerror(rv), path);
	else if (h != NULL)
		*h = hash;
	if (rv == 0 && seen != NULL)
		*seen = fss;
	return rv;
}

/* How outputs go into build/: the daemon's override (kilnd
 * --materialize, KILN_MATERIALIZE), else the project's 'materialize',
 * else copies. e->desc is only replaced with no build active. */
static kiln_mat_mode
mat_mode(const struct engine *e)
{
	kiln_mat_mode m = e->cfg.materialize;

	if (m == KILN_MAT_UNSET && e->desc != NULL)
		m = kiln_desc_materialize(e->desc);
	return m == KILN_MAT_HARDLINK ? KILN_MAT_HARDLINK : KILN_MAT_COPY;
}

static int64_t
stat_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Whether path (st: its lstat) still holds rec->hash, hashed again;
 * the inode must be the one st describes. */
static int
mat_same_bytes(struct engine *e, const char *path, const struct stat *st,
               const kiln_file_rec *rec)
{
	struct stat fst;
	kiln_id h;
	int fd, ok;

	fd = openat(e->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = fstat(fd, &fst) == 0 && fst.st_ino == st->st_ino &&
	     kiln_id_of_fd(fd, &h, NULL) == 0 && id_eq(&h, &rec->hash);
	close(fd);
	return ok;
}

/* Whether the file st describes (path) still is the one rec describes.
 * Copies: the whole stat, ctime too (a write that puts size and mtime
 * back still moves it), and one link (a hard link left by hardlink mode
 * is no copy: it is made one). Hard links: every link made to a blob (a
 * second output with the same bytes) moves the ctime of all its links,
 * so a ctime that moved alone has the file hashed again: the same bytes
 * and rec takes the new ctime (hashed once, not every build), other
 * bytes and it changed (an edit that put the mtime back). */
static int
mat_stat_same(struct engine *e, const char *path, const struct stat *st,
              kiln_file_rec *rec)
{
	int64_t ctime_ns = stat_ns(&st->st_ctim);

	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size != rec->size ||
	    (uint64_t)st->st_ino != rec->ino || stat_ns(&st->st_mtim) != rec->mtime_ns)
		return 0;
	if (mat_mode(e) == KILN_MAT_COPY)
		return ctime_ns == rec->ctime_ns && st->st_nlink == 1;
	if (ctime_ns == rec->ctime_ns)
		return 1;
	if (!mat_same_bytes(e, path, st, rec))
		return 0;
	rec->ctime_ns = ctime_ns;
	return 1;
}

/* Whether root/path is still the file rec describes (mat_stat_same). */
static int
mat_unchanged(struct engine *e, const char *path, kiln_file_rec *rec)
{
	struct stat st;

	return fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       mat_stat_same(e, path, &st, rec);
}

int
step_output_unchanged(struct engine *e, const char *path, const struct node_out *o)
{
	kiln_file_rec rec = o->mat;   /* o is another step's: read only */
	kiln_id h;
	int fd, rv;

	if (mat_unchanged(e, path, &rec))
		return 1;
	/* its stat moved: with hard links, another output putting the same
	 * blob does that (the store refreshes a blob's times); the content
	 * says whether it still is the blob the key names */
	if ((fd = openat(e->rootfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	rv = kiln_id_of_fd(fd, &h, NULL);
	close(fd);
	return rv == 0 && id_eq(&h, &o->id);
}

static int
parts_tool(struct engine *e, const struct graph *g, struct node *n,
           struct key_parts *kp)
{
	const kiln_step *ks = n->ks;
	const kiln_tool *t = ks->tool;
	char exe[PATH_MAX];
	kiln_id h;
	struct sbuf b = {0};
	int rv;

	n->w->program[0] = '\0';
	if ((rv = step_program(e, n, exe, sizeof exe, &h, NULL)) != 0)
		return rv;
	snprintf(n->w->program, sizeof n->w->program, "%s", exe);
	rv = key_parts_text(kp, "tool", t->name);
	if (rv == 0 && t->version && t->version[0])
		rv = key_parts_text(kp, "tool version", t->version);
	if (rv == 0)
		rv = key_parts_hash(kp, "tool exe", &h);
	for (size_t i = 0; i < ks->nargv; i++) {
		if (i)
			sb_add(&b, "\x1f", 1);
		sb_str(&b, ks->argv[i]);
	}
	if (rv == 0)
		rv = b.oom ? KILN_ENOMEM : key_parts_text(kp, "argv", b.p ? b.p : "");
	free(b.p);
	for (size_t i = 0; rv == 0 && i < ks->nenv; i++)
		rv = key_parts_text2(kp, "env ", ks->env[i].key, ks->env[i].value);
	if (rv == 0 && t->shell)
		rv = key_parts_text(kp, "shell", "1");
	if (rv == 0 && t->depfile)
		rv = key_parts_text(kp, "depfile", "1");
	for (size_t i = 0; rv == 0 && i < g->plan->nvars; i++) {
		const kiln_kv *v = &g->plan->vars[i];
		int first = 1;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(g->plan->vars[j].key, v->key) != 0;
		if (first && tool_uses(t, v->key))
			rv = key_parts_text2(kp, "var ", v->key, v->value);
	}
	return rv;
}

static int
parts_step(struct engine *e, const struct graph *g, struct node *n,
           struct key_parts *kp)
{
	const kiln_step *ks = n->ks;
	int rv = 0;

	for (size_t i = 0; ks->params && i < ks->params->n && rv == 0; i++) {
		struct sbuf b = {0};
		val_render(&b, &ks->params->items[i]);
		rv = b.oom ? KILN_ENOMEM
		           : key_parts_text2(kp, "param ", ks->params->keys[i], b.p ? b.p : "");
		free(b.p);
	}
	for (size_t i = 0; i < ks->noutputs && rv == 0; i++)
		rv = key_parts_text2(kp, "out ", ks->outputs[i].name, ks->outputs[i].file);
	free(n->w->seen_in);
	n->w->seen_in = NULL;
	/* what each input was when hashed: the run is checked against it */
	if (ks->ninputs > 0 &&
	    (n->w->seen_in = calloc(ks->ninputs, sizeof *n->w->seen_in)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < ks->ninputs && rv == 0; i++) {
		kiln_id h;
		if ((rv = filestate_hash_seen(e->fs, ks->inputs[i], &h,
		                              &n->w->seen_in[i])) == KILN_ENOTFOUND) {
			set_error(n, "missing source file '%s' (an input of %s, %s:%d)",
			          ks->inputs[i], ks->url, ks->loc.file ? ks->loc.file : "?",
			          ks->loc.line);
			return rv;
		}
		if (rv != 0) {
			set_error(n, "cannot read '%s': %s", ks->inputs[i], kiln_strerror(rv));
			return rv;
		}
		rv = key_parts_hash2(kp, "in ", ks->inputs[i], &h);
	}
	for (uint32_t k = 0; k < n->ndeps && rv == 0; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs && rv == 0; i++) {
			char url[600];
			output_url(d, i, url, sizeof url);
			rv = key_parts_hash2(kp, "need ", url, &d->outs[i].id);
		}
	}
	return rv;
}

/* ---- records -------------------------------------------------------------- */

void
prev_load(struct engine *e, const struct graph *g, struct node *n)
{
	void *data;
	size_t len;

	if (n->w->prev != NULL)
		return;
	if (kiln_store_step_get(e->s, g->profile, n->ks->url, &data, &len) != 0)
		return;
	n->w->prev = kiln__step_record__unpack(NULL, len, data);
	free(data);
}

void
prev_drop(struct node *n)
{
	if (n->w == NULL)
		return;
	if (n->w->prev != NULL)
		kiln__step_record__free_unpacked(n->w->prev, NULL);
	n->w->prev = NULL;
}

static int
prev_same_key(const struct node *n)
{
	return n->w->prev != NULL && n->w->prev->key.len == 16 &&
	       memcmp(n->w->prev->key.data, n->w->new_key.b, 16) == 0;
}

/* The changes since the previous record, as a one-line reason. */
static void
reason_of_changes(struct node *n, const char *lead, char *out, size_t outlen)
{
	Kiln__KeyChange **ch = NULL;
	size_t nch = 0;
	char what[900];
	int total;

	total = key_parts_diff(n->w->prev->parts, n->w->prev->n_parts, &n->w->parts, 0,
	                       &ch, &nch, what, sizeof what);
	key_changes_free(ch);
	if (total <= 0)
		snprintf(out, outlen, "%s", lead);
	else
		snprintf(out, outlen, "%s%s", lead, what);
}

/* Queue n's discovered dependencies for the store's deps records ("f:"
 * files, "u:" URLs it needed; `kiln rdeps` and the live recompile look
 * them up in reverse). */
static int
deps_queue(kiln_batch *b, const struct graph *g, const struct node *n)
{
	char **v = calloc((size_t)n->ndisc + n->nneeds + 1, sizeof *v);
	size_t nv = 0;
	int rv = 0;

	if (v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n->ndisc + n->nneeds && rv == 0; i++) {
		const char *what = i < n->ndisc ? n->disc[i] : n->needs[i - n->ndisc].url;
		size_t len = strlen(what) + 3;
		if ((v[nv] = malloc(len)) == NULL)
			rv = KILN_ENOMEM;
		else
			snprintf(v[nv++], len, "%s:%s", i < n->ndisc ? "f" : "u", what);
	}
	if (rv == 0)
		rv = kiln_batch_deps_set(b, g->profile, n->ks->url,
		                         (const char *const *)v, nv);
	for (size_t i = 0; i < nv; i++)
		free(v[i]);
	free(v);
	return rv;
}

/* Queue the decision record of n (outputs and log as they are now). */
int
record_put(struct engine *e, const struct graph *g, struct node *n,
           Kiln__StepRecord__Decision decision)
{
	Kiln__StepRecord r = KILN__STEP_RECORD__INIT;
	struct pb_outputs *po = NULL;
	char what[600];
	Kiln__KeyPart **parts = NULL;
	Kiln__KeyChange **ch = NULL;
	size_t nparts = 0, nch = 0, len;
	uint8_t *buf;
	kiln_batch *b;
	int rv;

	if ((rv = key_parts_to_pb(&n->w->parts, &parts, &nparts)) != 0)
		return rv;
	if (n->w->prev != NULL &&
	    key_parts_diff(n->w->prev->parts, n->w->prev->n_parts, &n->w->parts, 64,
	                   &ch, &nch, what, sizeof what) < 0) {
		key_parts_pb_free(parts);
		return KILN_ENOMEM;
	}
	r.key.data = n->w->new_key.b;
	r.key.len = 16;
	r.decision = decision;
	r.reason = n->reason ? n->reason : (char *)"";
	r.changes = ch;
	r.n_changes = nch;
	r.parts = parts;
	r.n_parts = nparts;
	if (decision != KILN__STEP_RECORD__DECISION__FAILED) {
		if ((po = step_outputs_pb(n, 1)) == NULL) {
			key_parts_pb_free(parts);
			key_changes_free(ch);
			return KILN_ENOMEM;
		}
		r.outputs = po->p;
		r.n_outputs = po->n;
	}
	if (n->w->has_log) {
		r.log.data = n->w->log_id.b;
		r.log.len = 16;
	}
	r.time_ns = kiln_wall_ns();
	r.duration_ns = n->duration_ns;
	r.traced = decision != KILN__STEP_RECORD__DECISION__FAILED && n->traced;
	r.program = n->w->program;
	if (decision != KILN__STEP_RECORD__DECISION__FAILED) {
		r.warnings = n->warnings;
		r.n_warnings = step_nwarnings(n);
	}
	if (decision == KILN__STEP_RECORD__DECISION__FAILED) {
		r.exit_code = n->w->res.exited ? n->w->res.status : 0;
		r.signal = n->w->res.exited ? 0 : n->w->res.status;
		r.error = n->error ? n->error : (char *)"";
	}
	len = kiln__step_record__get_packed_size(&r);
	if ((buf = malloc(len ? len : 1)) == NULL) {
		rv = KILN_ENOMEM;
	} else {
		kiln__step_record__pack(&r, buf);
		engine_batch_lock(e, &b);
		rv = kiln_batch_step_put(b, g->profile, n->ks->url, buf, len);
		/* a failure keeps the last success's dependencies: the files it
		 * read are still what the next attempt will likely read */
		if (rv == 0 && decision != KILN__STEP_RECORD__DECISION__FAILED)
			rv = deps_queue(b, g, n);
		engine_batch_unlock(e);
		free(buf);
	}
	key_parts_pb_free(parts);
	key_changes_free(ch);
	free(po);
	return rv;
}

/* Queue the index entries and materialized-file records of n's outputs. */
int
outputs_record(struct engine *e, const struct graph *g, struct node *n)
{
	kiln_batch *b;
	int rv = 0;

	engine_batch_lock(e, &b);
	for (size_t i = 0; i < n->ks->noutputs && rv == 0; i++) {
		char url[600];
		kiln_file_rec fr = n->outs[i].mat;
		output_url(n, i, url, sizeof url);
		rv = kiln_batch_index_set(b, g->profile, url, &n->outs[i].id);
		fr.hash = n->outs[i].id;
		if (rv == 0)
			rv = kiln_batch_file_put(b, n->outpaths[i], &fr);
	}
	engine_batch_unlock(e);
	return rv;
}

/* ---- deciding ------------------------------------------------------------- */

/* Whether every materialized output is as this daemon left it, and its
 * blob still in the store. */
static int
outputs_intact(struct engine *e, struct node *n)
{
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		struct node_out *o = &n->outs[i];
		uint64_t gen = 0;
		int watched;
		/* nothing touched it since it was last found intact */
		if (e->watch != NULL && watch_clean(e->watch, n->outpaths[i], o->mat_gen))
			continue;
		watched = e->watch != NULL && watch_prepare(e->watch, n->outpaths[i], &gen) == 0;
		o->mat_gen = 0;
		if (!mat_unchanged(e, n->outpaths[i], &o->mat))
			return 0;
		o->mat_gen = watched ? gen : 0;
	}
	/* and the store still has what the index names */
	for (size_t i = 0; i < n->ks->noutputs; i++)
		if (!blob_present(e, &n->outs[i]))
			return 0;
	return 1;
}

/* A blob edited through its hard link in build/ (hardlink mode), or
 * damaged any other way, no longer matches its name: find that (only for
 * outputs whose file moved: an intact one was not written through, and
 * a copy is checked again as it is made) and quarantine the blob, so it
 * is never served, the result is a miss and the step runs again. 1: the
 * blob is good. */
static int
blob_still_good(struct engine *e, const char *path, const kiln_id *id)
{
	kiln_file_rec rec;
	char msg[600], hex[KILN_ID_HEX_LEN + 1];
	int rv;

	if (kiln_store_file_get(e->s, path, &rec) == 0 && id_eq(&rec.hash, id) &&
	    mat_unchanged(e, path, &rec))
		return 1;
	if (kiln_store_verify(e->s, id) != KILN_ECORRUPT)
		return 1;
	/* KILN_ENOTFOUND: another worker moved it first (two outputs with
	 * the same bytes) */
	rv = kiln_store_quarantine(e->s, id);
	kiln_id_to_hex(id, hex);
	snprintf(msg, sizeof msg, "blob %s (output %s) does not match its name: %s",
	         hex, path, rv == 0 ? "moved to the store's corrupt/, the step runs again"
	         : rv == KILN_ENOTFOUND ? "already moved to corrupt/" : kiln_strerror(rv));
	if (e->cfg.log)
		e->cfg.log(e->cfg.arg, rv != 0 && rv != KILN_ENOTFOUND, msg);
	return 0;
}

/* Look the key up; on a usable result fill n->outs (not materialized). */
int
step_set_disc(struct node *n, char *const *paths, size_t count)
{
	char **v = count ? calloc(count, sizeof *v) : NULL;

	if (count && v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < count; i++)
		if ((v[i] = strdup(paths[i])) == NULL) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return KILN_ENOMEM;
		}
	for (size_t i = 0; i < n->ndisc; i++)
		free(n->disc[i]);
	free(n->disc);
	n->disc = v;
	n->ndisc = count;
	return 0;
}

/* Whether result res can serve n now: its blobs are in the store and
 * intact, its discovered files hash as recorded, its needs resolve to
 * their recorded outputs. 1 (n->outs filled, not materialized); 0 (why
 * says which discovered file changed, *missing_blob when a blob is gone);
 * 2: it needs steps not done in this wave yet (n->needs names them). */
static int
result_holds(struct engine *e, struct graph *g, struct node *n,
             const Kiln__ActionResult *res, int *missing_blob, char *why, size_t whylen)
{
	if (res->n_outputs != n->ks->noutputs)
		return 0;
	for (size_t i = 0; i < res->n_outputs; i++) {
		Kiln__StepOutput *o = res->outputs[i];
		if (o->id.len != 16 || strcmp(o->name, n->ks->outputs[i].name) != 0)
			return 0;
		memcpy(n->outs[i].id.b, o->id.data, 16);
		n->outs[i].size = o->size;
		if (kiln_store_has(e->s, &n->outs[i].id, NULL) != 0 ||
		    !blob_still_good(e, n->outpaths[i], &n->outs[i].id)) {
			*missing_blob = 1;
			return 0;
		}
	}
	/* discovered dependencies must still hold */
	for (size_t i = 0; i < res->n_files; i++) {
		const Kiln__FileDep *f = res->files[i];
		kiln_id h;
		int rv = trace_dep_hash(e, f->path, &h);
		if (f->hash.len == 0 ? rv != KILN_ENOTFOUND
		    : rv != 0 || memcmp(h.b, f->hash.data, 16) != 0) {
			char was[KILN_ID_HEX_LEN + 1] = "missing", now[KILN_ID_HEX_LEN + 1] = "missing";
			kiln_id old;
			if (f->hash.len == 16) {
				memcpy(old.b, f->hash.data, 16);
				kiln_id_to_hex(&old, was);
			}
			if (rv == 0)
				kiln_id_to_hex(&h, now);
			snprintf(why, whylen, "discovered dependency %s (%s) changed %.8s -> %.8s",
			         f->path, f->source == KILN__FILE_DEP__SOURCE__DEPFILE ?
			         "depfile" : "trace", was, now);
			return 0;
		}
	}
	/* kiln need: every needed URL must still resolve to its hash
	 * (engine_need.c) */
	if (res->n_needs > 0 || n->nneeds > 0) {
		int r = need_check_result(e, g, n, res->needs, res->n_needs, why, whylen);
		if (r != 1)
			return r == -1 ? 2 : 0;
	}
	return 1;
}

/* Serve n from result res (result_holds said 1): its discovered files,
 * warnings, tracing and log become n's. 0 or KILN_ENOMEM. */
static int
result_take(struct node *n, const Kiln__ActionResult *res)
{
	char **paths = calloc(res->n_files + 1, sizeof *paths);
	int rv;

	if (paths == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < res->n_files; i++)
		paths[i] = res->files[i]->path;
	rv = step_set_disc(n, paths, res->n_files);
	free(paths);
	/* the run's warnings hold for every reuse of its result */
	if (rv == 0)
		rv = step_set_warnings(n, res->warnings, res->n_warnings);
	if (rv != 0)
		return rv;
	n->traced = res->traced;
	n->w->has_log = res->log.len == 16;
	if (n->w->has_log)
		memcpy(n->w->log_id.b, res->log.data, 16);
	return 0;
}

/* Look the key up (action_results.c: several results per key) and take
 * the first result that holds (1; *hit is its place, 0 the newest). When none does, why says what the
 * newest one lacks (0). 2: a result needs steps not done in this wave yet
 * (n->needs names them). */
static int
cache_lookup(struct engine *e, struct graph *g, struct node *n,
             int *missing_blob, size_t *hit, char *why, size_t whylen)
{
	Kiln__ActionEntry *entry = results_get(e, &n->w->new_key);
	int ok = 0;

	*missing_blob = 0;
	*hit = 0;
	for (size_t i = 0; entry != NULL && i < entry->n_results && ok == 0; i++) {
		int gone = 0;
		char later[600];
		/* the newest result's story is the one worth telling */
		ok = result_holds(e, g, n, entry->results[i], &gone, i == 0 ? why : later,
		                  i == 0 ? whylen : sizeof later);
		if (i == 0)
			*missing_blob = gone;
		if (ok == 1 && result_take(n, entry->results[i]) != 0)
			ok = 0;
		if (ok == 1) {
			*hit = i;
			results_touch(e, &n->w->new_key, entry, i);
		}
	}
	if (entry != NULL)
		kiln__action_entry__free_unpacked(entry, NULL);
	return ok;
}

/* Copies: whether path already is a copy of o->id as recorded, by this
 * daemon (o->mat) or in the store's files records (a restarted daemon's
 * first build finds every output so), so it needs no copying again: a
 * copy costs a write where a hard link to the same blob cost nothing.
 * o->mat then describes it. */
static int
copy_intact(struct engine *e, const char *path, struct node_out *o)
{
	kiln_file_rec rec;
	struct stat st;

	if (fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;   /* a restore: nothing there */
	if (id_eq(&o->mat.hash, &o->id) && mat_stat_same(e, path, &st, &o->mat))
		return 1;
	if (kiln_store_file_get(e->s, path, &rec) != 0 || !id_eq(&rec.hash, &o->id) ||
	    !mat_stat_same(e, path, &st, &rec))
		return 0;
	o->mat = rec;
	return 1;
}

int
materialize_all(struct engine *e, struct node *n)
{
	kiln_mat_mode mode = mat_mode(e);

	for (size_t i = 0; i < n->ks->noutputs; i++) {
		int rv;
		n->outs[i].mat_gen = 0;   /* written again: looked at again */
		if (mode == KILN_MAT_COPY && copy_intact(e, n->outpaths[i], &n->outs[i]))
			continue;
		rv = materialize_output(e->s, e->root, e->rootfd, n->outpaths[i], &n->outs[i].id,
		                        mode, &n->outs[i].mat);
		if (rv != 0) {
			set_error(n, "cannot write %s: %s", n->outpaths[i], kiln_strerror(rv));
			return rv;
		}
	}
	return 0;
}

/* A cheap fingerprint of what can change between two builds of one loaded
 * description: the tool's program and the content of every input. The
 * rest of the key (argv, env, params, variables, outputs) comes from the
 * description, which a reload replaces together with the graph. Equal to
 * the last one, the full key needs no computing. 0, or an error (the slow
 * path then says which input is missing). */
static int
quick_key(struct engine *e, const struct graph *g, struct node *n, kiln_id *q)
{
	kiln_id small[64], *v = small;
	size_t nv = 1, cap = 1;   /* the program's */
	char exe[PATH_MAX];
	int rv;

	for (uint32_t k = 0; k < n->ndeps; k++)
		cap += g->nodes[n->deps[k]].ks->noutputs;
	cap += n->ks->ninputs + n->ndisc + n->nneeds;
	if (cap > 64 && (v = malloc(cap * sizeof *v)) == NULL)
		return KILN_ENOMEM;
	if ((rv = step_program(e, n, exe, sizeof exe, &v[0], NULL)) != 0)
		goto out;
	for (size_t i = 0; i < n->ks->ninputs; i++)
		if ((rv = filestate_hash(e->fs, n->ks->inputs[i], &v[nv++])) != 0)
			goto out;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			v[nv++] = d->outs[i].id;
	}
	/* discovered files: a missing one hashes as zeros, which no content
	 * has in practice */
	for (size_t i = 0; i < n->ndisc; i++) {
		int r = trace_dep_hash(e, n->disc[i], &v[nv++]);
		if (r != 0 && r != KILN_ENOTFOUND) {
			rv = r;
			goto out;
		}
	}
	/* needed outputs as need_prereqs found them done in this wave */
	for (size_t i = 0; i < n->nneeds; i++)
		v[nv++] = n->needs[i].cur;
	kiln_id_of_buf(v, nv * sizeof *v, q);
out:
	if (v != small)
		free(v);
	return rv;
}

enum eval_result
step_eval(struct engine *e, struct graph *g, struct node *n, int dry_run)
{
	kiln_id quick;
	char dep_why[600];
	int have_quick;
	char reason[1200];
	int missing_blob, rv, same;
	size_t hit;

	have_quick = quick_key(e, g, n, &quick) == 0;
	if (have_quick && n->have && id_eq(&quick, &n->quick) && outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		n->rec_lo = 0;   /* queues nothing */
		return EVAL_DONE;
	}
	lost_decision_begins(e, n);
	if (n->error != NULL) {  /* from quick_key's tool lookup */
		free(n->error);
		n->error = NULL;
	}
	if (node_work_get(n) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(KILN_ENOMEM));
		n->have = 0;
		return EVAL_FAIL;
	}
	key_parts_free(&n->w->parts);
	prev_drop(n);
	n->w->has_log = 0;
	n->duration_ns = 0;
	memset(&n->w->res, 0, sizeof n->w->res);
	if ((rv = parts_tool(e, g, n, &n->w->parts)) != 0 ||
	    (rv = parts_step(e, g, n, &n->w->parts)) != 0 ||
	    (rv = key_parts_key(&n->w->parts, &n->w->new_key)) != 0) {
		if (n->error == NULL || rv == KILN_ENOMEM)
			set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		n->have = 0;
		return EVAL_FAIL;
	}
	n->quick = quick;
	if (!have_quick)
		memset(&n->quick, 0, sizeof n->quick);
	/* the same key with files discovered last time (a depfile) still
	 * needs them checked: the cache lookup below does */
	if (n->ndisc == 0 && n->nneeds == 0 && n->have && id_eq(&n->key, &n->w->new_key) &&
	    outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		key_parts_free(&n->w->parts);
		return EVAL_DONE;
	}
	/* The same key as this daemon's last decision (build/ lost outputs: a
	 * restore): the record that decision left holds this key, so a cache
	 * hit needs no record read; a 100k restore reads ~40 MB of records
	 * less. (Had that record's commit failed, the stale one stays.) */
	same = n->have && id_eq(&n->key, &n->w->new_key);
	if (!same)
		prev_load(e, g, n);
	dep_why[0] = '\0';
	if ((rv = cache_lookup(e, g, n, &missing_blob, &hit, dep_why, sizeof dep_why)) == 2) {
		/* decided again once what it needs is done (engine_need.c) */
		n->have = 0;
		prev_drop(n);
		key_parts_free(&n->w->parts);
		return EVAL_NEEDS;
	}
	if (rv) {
		/* an older result of the same key (an undo) is not "up to date":
		 * build/ gets other bytes */
		int up = (same || prev_same_key(n)) && hit == 0;
		if (!dry_run && materialize_all(e, n) != 0)
			return EVAL_FAIL;
		if (!up && hit > 0)
			prev_load(e, g, n);
		if (up)
			snprintf(reason, sizeof reason, "%s", n->have ?
			         "up to date; restored its outputs in build/ from the store" :
			         "up to date");
		else if (hit > 0 && prev_same_key(n))
			snprintf(reason, sizeof reason, "reused an earlier result of the same "
			         "key: the files it discovered hold again (%s)", dep_why[0] ?
			         dep_why : "an undo");
		else if (n->w->prev != NULL)
			reason_of_changes(n, "reused a cached result: ", reason, sizeof reason);
		else
			snprintf(reason, sizeof reason, "reused a cached result (no earlier "
			         "build of this step for profile %s)", g->profile);
		set_reason(n, reason);
		n->key = n->w->new_key;
		n->outcome = up ? O_UP_TO_DATE : O_REUSED;
		/* a dry run materializes nothing: its dependents may use the
		 * output ids, but the next real build must not think build/
		 * holds them */
		n->have = !dry_run;
		if (dry_run)
			memset(&n->quick, 0, sizeof n->quick);
		if (!dry_run) {
			kiln_batch *b;
			int qrv = outputs_record(e, g, n);
			engine_batch_lock(e, &b);
			if (qrv == 0)
				qrv = kiln_batch_action_touch(b, &n->w->new_key);
			engine_batch_unlock(e);
			if (qrv == 0 && !up)
				qrv = record_put(e, g, n, KILN__STEP_RECORD__DECISION__REUSED);
			n->rec_failed = qrv != 0;   /* unrecorded: node_finish loses it */
		}
		if (n->outcome == O_REUSED)
			n->send_event = 1;
		prev_drop(n);
		key_parts_free(&n->w->parts);
		return EVAL_DONE;
	}
	if (same)   /* the reason and the run's record compare with it */
		prev_load(e, g, n);
	if (n->w->prev == NULL)
		snprintf(reason, sizeof reason, "never built for profile %s", g->profile);
	else if (prev_same_key(n) && dep_why[0])
		snprintf(reason, sizeof reason, "%s", dep_why);
	else if (prev_same_key(n))
		snprintf(reason, sizeof reason, "%s", missing_blob ?
		         "its cached outputs are gone from the store (or were edited in build/)" :
		         n->w->prev->decision == KILN__STEP_RECORD__DECISION__FAILED ?
		         "it failed last time" : "no cached result for its key");
	else
		reason_of_changes(n, "", reason, sizeof reason);
	set_reason(n, reason);
	n->have = 0;
	return EVAL_RUN;
}

