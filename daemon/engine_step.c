/* engine_step.c — one step: deciding whether it is up to date, running
 * its tool, and publishing what it made (see engine_int.h).
 *
 * Deciding: the step's key parts are gathered (tool identity, expanded
 * argv and env, params, the profile variables the tool uses, output names,
 * the hashes of its source inputs and of its prerequisites' outputs) and
 * hashed into the action key. The same key as this daemon's last decision,
 * with the materialized files untouched, is up to date without a database
 * read. Otherwise the actions database is asked; a result whose blobs are
 * all still in the store is reused (materialized again), anything else
 * runs. Every decision that differs from the stored one is recorded with
 * the key's parts, so `kiln why` can say what changed.
 *
 * Running: the tool gets its own scratch folder .kiln/scratch/<n>/ for its
 * outputs, a log file beside it for stdout and stderr, and the project
 * root as its working folder. Finishing: each output is moved into the
 * store (a rename: the scratch folder is on the project's filesystem),
 * hard-linked into build/<profile>/, and only then are the index, action
 * and decision records queued for the next batch commit.
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

/* ---- small helpers -------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};

static void
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

static void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void
set_error(struct node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
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

/* The program the step runs, found on the tool path (absolute in exe),
 * and its content hash (h may be NULL): looked up once per tool per wave,
 * since a PATH search is several syscalls and a build has many steps per
 * tool. */
static int
step_program(struct engine *e, struct node *n, char *exe, size_t len, kiln_id *h)
{
	const kiln_tool *t = n->ks->tool;
	const char *prog = t->shell ? "/bin/sh" : n->ks->nargv ? n->ks->argv[0] : "";
	struct tool_seen *ts = NULL;
	kiln_id hash;
	int rv;

	/* argv[0] may hold variables: cache only tools whose program is the
	 * template's own first word */
	int cacheable = t->shell || (t->nrun > 0 && strcmp(t->run[0], prog) == 0);
	pthread_mutex_lock(&e->tools_mu);
	for (size_t i = 0; cacheable && i < e->ntools; i++)
		if (e->tools[i].t == t)
			ts = &e->tools[i];
	if (ts != NULL && ts->wave == n->wave) {
		rv = ts->rv;
		snprintf(exe, len, "%s", ts->exe);
		hash = ts->hash;
		pthread_mutex_unlock(&e->tools_mu);
		goto done;
	}
	pthread_mutex_unlock(&e->tools_mu);
	rv = spawn_find(prog, e->tool_path, e->root, exe, len);
	if (rv == 0)
		rv = filestate_hash(e->fs, exe, &hash);
	if (cacheable) {
		pthread_mutex_lock(&e->tools_mu);
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
			ts->wave = n->wave;
			ts->rv = rv;
			snprintf(ts->exe, sizeof ts->exe, "%s", exe);
			ts->hash = hash;
		}
		pthread_mutex_unlock(&e->tools_mu);
	}
done:
	if (rv != 0)
		set_error(n, "tool '%s' (%s:%d): program '%s' %s (PATH=%s)", t->name,
		          t->loc.file ? t->loc.file : "?", t->loc.line, prog,
		          rv == KILN_ENOTFOUND ? "not found or not executable"
		                               : kiln_strerror(rv), e->tool_path);
	else if (h != NULL)
		*h = hash;
	return rv;
}

/* Whether root/path is still the file rec describes. ctime is left out:
 * every hard link made to a blob (another output with the same bytes)
 * moves the ctime of all its links; an edit moves the mtime. */
static int
mat_unchanged(struct engine *e, const char *path, const kiln_file_rec *rec)
{
	struct stat st;

	return fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode) && (uint64_t)st.st_size == rec->size &&
	       (uint64_t)st.st_ino == rec->ino &&
	       (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == rec->mtime_ns;
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

	if ((rv = step_program(e, n, exe, sizeof exe, &h)) != 0)
		return rv;
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
	for (size_t i = 0; i < ks->ninputs && rv == 0; i++) {
		kiln_id h;
		if ((rv = filestate_hash(e->fs, ks->inputs[i], &h)) == KILN_ENOTFOUND) {
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

static void
prev_load(struct engine *e, const struct graph *g, struct node *n)
{
	void *data;
	size_t len;

	if (n->prev != NULL)
		return;
	if (kiln_store_step_get(e->s, g->profile, n->ks->url, &data, &len) != 0)
		return;
	n->prev = kiln__step_record__unpack(NULL, len, data);
	free(data);
}

static void
prev_drop(struct node *n)
{
	if (n->prev != NULL)
		kiln__step_record__free_unpacked(n->prev, NULL);
	n->prev = NULL;
}

static int
prev_same_key(const struct node *n)
{
	return n->prev != NULL && n->prev->key.len == 16 &&
	       memcmp(n->prev->key.data, n->new_key.b, 16) == 0;
}

/* The changes since the previous record, as a one-line reason. */
static void
reason_of_changes(struct node *n, const char *lead, char *out, size_t outlen)
{
	Kiln__KeyChange **ch = NULL;
	size_t nch = 0;
	char what[900];
	int total;

	total = key_parts_diff(n->prev->parts, n->prev->n_parts, &n->parts, 0,
	                       &ch, &nch, what, sizeof what);
	key_changes_free(ch);
	if (total <= 0)
		snprintf(out, outlen, "%s", lead);
	else
		snprintf(out, outlen, "%s%s", lead, what);
}

/* Queue the decision record of n (outputs and log as they are now). */
static int
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

	if ((rv = key_parts_to_pb(&n->parts, &parts, &nparts)) != 0)
		return rv;
	if (n->prev != NULL &&
	    key_parts_diff(n->prev->parts, n->prev->n_parts, &n->parts, 64,
	                   &ch, &nch, what, sizeof what) < 0) {
		key_parts_pb_free(parts);
		return KILN_ENOMEM;
	}
	r.key.data = n->new_key.b;
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
	if (n->has_log) {
		r.log.data = n->log_id.b;
		r.log.len = 16;
	}
	r.time_ns = engine_wall_ns();
	r.duration_ns = n->duration_ns;
	if (decision == KILN__STEP_RECORD__DECISION__FAILED) {
		r.exit_code = n->res.exited ? n->res.status : 0;
		r.signal = n->res.exited ? 0 : n->res.status;
		r.error = n->error ? n->error : (char *)"";
	}
	len = kiln__step_record__get_packed_size(&r);
	if ((buf = malloc(len ? len : 1)) == NULL) {
		rv = KILN_ENOMEM;
	} else {
		kiln__step_record__pack(&r, buf);
		engine_batch_lock(e, &b);
		rv = kiln_batch_step_put(b, g->profile, n->ks->url, buf, len);
		engine_batch_unlock(e);
		free(buf);
	}
	key_parts_pb_free(parts);
	key_changes_free(ch);
	free(po);
	return rv;
}

/* Queue the index entries and materialized-file records of n's outputs. */
static int
outputs_record(struct engine *e, const struct graph *g, struct node *n)
{
	kiln_batch *b;
	int rv = 0;

	engine_batch_lock(e, &b);
	for (size_t i = 0; i < n->ks->noutputs && rv == 0; i++) {
		char url[600], path[PATH_MAX];
		kiln_file_rec fr = n->outs[i].mat;
		output_url(n, i, url, sizeof url);
		rv = kiln_batch_index_set(b, g->profile, url, &n->outs[i].id);
		fr.hash = n->outs[i].id;
		if (rv == 0 && step_output_path(g, n, i, path, sizeof path) == 0)
			rv = kiln_batch_file_put(b, path, &fr);
	}
	engine_batch_unlock(e);
	return rv;
}

/* ---- deciding ------------------------------------------------------------- */

/* Whether every materialized output is as this daemon left it. */
static int
outputs_intact(struct engine *e, const struct node *n)
{
	for (size_t i = 0; i < n->ks->noutputs; i++)
		if (!mat_unchanged(e, n->outpaths[i], &n->outs[i].mat))
			return 0;
	return 1;
}

/* A blob edited through its hard link in build/ no longer matches its
 * name: find that (only for files whose stat moved) and drop the blob, so
 * the result is a miss and the step runs again. 1: blob is good. */
static int
blob_still_good(struct engine *e, const char *path, const kiln_id *id)
{
	kiln_file_rec rec;
	char blob[PATH_MAX];

	if (kiln_store_file_get(e->s, path, &rec) == 0 && id_eq(&rec.hash, id) &&
	    mat_unchanged(e, path, &rec))
		return 1;
	if (kiln_store_verify(e->s, id) != KILN_ECORRUPT)
		return 1;
	/* corrupt: remove it; records naming it become misses */
	if (kiln_store_blob_path(e->s, id, blob, sizeof blob) == 0)
		unlink(blob);
	return 0;
}

/* Look the key up; on a usable result fill n->outs (not materialized). */
static int
cache_lookup(struct engine *e, const struct graph *g, struct node *n, int *missing_blob)
{
	kiln_action *a = NULL;
	Kiln__ActionResult *res = NULL;
	int ok = 0;

	*missing_blob = 0;
	if (kiln_store_action_get(e->s, &n->new_key, &a) != 0)
		return 0;
	res = kiln__action_result__unpack(NULL, a->len, a->data);
	if (res == NULL || res->n_outputs != n->ks->noutputs)
		goto out;
	for (size_t i = 0; i < res->n_outputs; i++) {
		Kiln__StepOutput *o = res->outputs[i];
		char path[PATH_MAX];
		if (o->id.len != 16 || strcmp(o->name, n->ks->outputs[i].name) != 0)
			goto out;
		memcpy(n->outs[i].id.b, o->id.data, 16);
		n->outs[i].size = o->size;
		if (kiln_store_has(e->s, &n->outs[i].id, NULL) != 0) {
			*missing_blob = 1;
			goto out;
		}
		if (step_output_path(g, n, i, path, sizeof path) == 0 &&
		    !blob_still_good(e, path, &n->outs[i].id)) {
			*missing_blob = 1;
			goto out;
		}
	}
	/* discovered dependencies must still hold */
	for (size_t i = 0; i < res->n_files; i++) {
		kiln_id h;
		int rv = filestate_hash(e->fs, res->files[i]->path, &h);
		if (res->files[i]->hash.len == 0 ? rv != KILN_ENOTFOUND
		    : rv != 0 || memcmp(h.b, res->files[i]->hash.data, 16) != 0)
			goto out;
	}
	n->has_log = res->log.len == 16;
	if (n->has_log)
		memcpy(n->log_id.b, res->log.data, 16);
	ok = 1;
out:
	if (res != NULL)
		kiln__action_result__free_unpacked(res, NULL);
	kiln_action_free(a);
	return ok;
}

static int
materialize_all(struct engine *e, const struct graph *g, struct node *n)
{
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		char path[PATH_MAX];
		int rv = step_output_path(g, n, i, path, sizeof path);
		if (rv == 0)
			rv = materialize_output(e->s, e->root, path, &n->outs[i].id,
			                        &n->outs[i].mat);
		if (rv != 0) {
			set_error(n, "cannot write %s: %s", path, kiln_strerror(rv));
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
	size_t nv = 1, cap = 64;
	char exe[PATH_MAX];
	int rv;

	for (uint32_t k = 0; k < n->ndeps; k++)
		cap += g->nodes[n->deps[k]].ks->noutputs;
	cap += n->ks->ninputs;
	if (cap > 64 && (v = malloc(cap * sizeof *v)) == NULL)
		return KILN_ENOMEM;
	if ((rv = step_program(e, n, exe, sizeof exe, &v[0])) != 0)
		goto out;
	for (size_t i = 0; i < n->ks->ninputs; i++)
		if ((rv = filestate_hash(e->fs, n->ks->inputs[i], &v[nv++])) != 0)
			goto out;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			v[nv++] = d->outs[i].id;
	}
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
	int have_quick;
	char reason[1200];
	int missing_blob, rv;

	have_quick = quick_key(e, g, n, &quick) == 0;
	if (have_quick && n->have && id_eq(&quick, &n->quick) && outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		return EVAL_DONE;
	}
	if (n->error != NULL) {  /* from quick_key's tool lookup */
		free(n->error);
		n->error = NULL;
	}
	key_parts_free(&n->parts);
	prev_drop(n);
	n->has_log = 0;
	n->duration_ns = 0;
	memset(&n->res, 0, sizeof n->res);
	if ((rv = parts_tool(e, g, n, &n->parts)) != 0 ||
	    (rv = parts_step(e, g, n, &n->parts)) != 0 ||
	    (rv = key_parts_key(&n->parts, &n->new_key)) != 0) {
		if (n->error == NULL || rv == KILN_ENOMEM)
			set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		n->have = 0;
		return EVAL_FAIL;
	}
	n->quick = quick;
	if (!have_quick)
		memset(&n->quick, 0, sizeof n->quick);
	if (n->have && id_eq(&n->key, &n->new_key) && outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		key_parts_free(&n->parts);
		return EVAL_DONE;
	}
	prev_load(e, g, n);
	if (cache_lookup(e, g, n, &missing_blob)) {
		if (!dry_run && materialize_all(e, g, n) != 0)
			return EVAL_FAIL;
		if (prev_same_key(n))
			snprintf(reason, sizeof reason, "%s", n->have ?
			         "up to date; restored its outputs in build/ from the store" :
			         "up to date");
		else if (n->prev != NULL)
			reason_of_changes(n, "reused a cached result: ", reason, sizeof reason);
		else
			snprintf(reason, sizeof reason, "reused a cached result (no earlier "
			         "build of this step for profile %s)", g->profile);
		set_reason(n, reason);
		n->key = n->new_key;
		n->outcome = prev_same_key(n) ? O_UP_TO_DATE : O_REUSED;
		/* a dry run materializes nothing: its dependents may use the
		 * output ids, but the next real build must not think build/
		 * holds them */
		n->have = !dry_run;
		if (dry_run)
			memset(&n->quick, 0, sizeof n->quick);
		if (!dry_run) {
			kiln_batch *b;
			outputs_record(e, g, n);
			engine_batch_lock(e, &b);
			kiln_batch_action_touch(b, &n->new_key);
			engine_batch_unlock(e);
			if (!prev_same_key(n))
				record_put(e, g, n, KILN__STEP_RECORD__DECISION__REUSED);
		}
		if (n->outcome == O_REUSED)
			n->send_event = 1;
		prev_drop(n);
		key_parts_free(&n->parts);
		return EVAL_DONE;
	}
	if (n->prev == NULL)
		snprintf(reason, sizeof reason, "never built for profile %s", g->profile);
	else if (prev_same_key(n))
		snprintf(reason, sizeof reason, "%s", missing_blob ?
		         "its cached outputs are gone from the store (or were edited in build/)" :
		         n->prev->decision == KILN__STEP_RECORD__DECISION__FAILED ?
		         "it failed last time" : "no cached result for its key");
	else
		reason_of_changes(n, "", reason, sizeof reason);
	set_reason(n, reason);
	n->have = 0;
	return EVAL_RUN;
}

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
	snprintf(p->scratch, sizeof p->scratch, ".kiln/scratch/%u", n->scratch);
	snprintf(p->depfile, sizeof p->depfile, ".kiln/scratch/%u.d", n->scratch);
	for (size_t i = 0; i < n->ks->ninputs; i++)
		av_push(&p->in, strdup(n->ks->inputs[i]));
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++) {
			char path[PATH_MAX];
			step_output_path(g, d, i, path, sizeof path);
			av_push(&p->in, strdup(path));
		}
	}
	(void)e;
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
	snprintf(buf, sizeof buf, "KILN_URL=%s", n->ks->url);
	av_push(env, strdup(buf));
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
	char exe[PATH_MAX], dir[PATH_MAX], logp[PATH_MAX + 16];
	int rv;

	n->scratch = __atomic_add_fetch(&e->next_scratch, 1, __ATOMIC_RELAXED);
	n->log_fd = -1;
	if ((rv = paths_make(e, g, n, &p)) != 0 || (rv = argv_make(e, n, &p, &av)) != 0 ||
	    (rv = env_make(e, g, n, &p, &env)) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		goto out;
	}
	if ((rv = step_program(e, n, exe, sizeof exe, NULL)) != 0)
		goto out;
	snprintf(dir, sizeof dir, "%s/.kiln/scratch", e->root);
	mkdir(dir, 0755);
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", e->root, p.scratch) >= sizeof dir) {
		rv = KILN_ERANGE;
		set_error(n, "project path too long");
		goto out;
	}
	snprintf(logp, sizeof logp, "%s.log", dir);
	if (mkdir(dir, 0755) != 0 ||
	    (n->log_fd = open(logp, O_CREAT | O_TRUNC | O_RDWR | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		rv = kiln_err_from_errno(errno);
		set_error(n, "cannot make the scratch folder %s: %s", dir, kiln_strerror(rv));
		goto out;
	}
	rq.path = exe;
	rq.argv = (const char *const *)av.v;
	rq.envp = (const char *const *)env.v;
	rq.cwd = e->root;
	rq.log_fd = n->log_fd;
	n->start_ns = engine_now_ns();
	if ((rv = spawner_start(e->sp, &rq, engine_tool_done, &n->run, &n->pid)) != 0)
		set_error(n, "cannot start '%s' for %s: %s", exe, n->ks->url, kiln_strerror(rv));
out:
	av_free(&av);
	av_free(&env);
	av_free(&p.in);
	if (rv != 0 && n->log_fd >= 0) {
		close(n->log_fd);
		n->log_fd = -1;
	}
	return rv;
}

/* Move the log into the store (kept for failures too: `kiln log`). */
static void
log_publish(struct engine *e, struct node *n, const char *logp)
{
	struct stat st;

	n->has_log = 0;
	if (n->log_fd >= 0) {
		if (fstat(n->log_fd, &st) == 0 && st.st_size > 0 &&
		    kiln_store_put_move(e->s, logp, &n->log_id) == 0)
			n->has_log = 1;
		close(n->log_fd);
		n->log_fd = -1;
	}
	unlink(logp);
}

static const char *
signal_name(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

int
step_finish(struct engine *e, struct graph *g, struct node *n)
{
	char dir[PATH_MAX], logp[PATH_MAX + 16], tail[2048] = "";
	int rv = 0;

	snprintf(dir, sizeof dir, "%s/.kiln/scratch/%u", e->root, n->scratch);
	snprintf(logp, sizeof logp, "%s.log", dir);
	n->duration_ns = (uint64_t)n->res.wall_ns;
	n->pid = 0;
	if (n->log_fd >= 0)
		spawn_log_tail(n->log_fd, 8, tail, sizeof tail);
	log_publish(e, n, logp);
	if (!n->res.exited || n->res.status != 0) {
		if (n->res.exited)
			set_error(n, "%s: the tool exited with status %d%s%s", n->ks->url,
			          n->res.status, tail[0] ? "; its last lines:\n" : "", tail);
		else
			set_error(n, "%s: the tool was killed by signal %d (SIG%s)%s%s",
			          n->ks->url, n->res.status, signal_name(n->res.status),
			          tail[0] ? "; its last lines:\n" : "", tail);
		rv = -1;
		goto out;
	}
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
	if (rv == 0 && (rv = materialize_all(e, g, n)) != 0)
		rv = -1;
	if (rv == 0) {
		Kiln__ActionResult ar = KILN__ACTION_RESULT__INIT;
		struct pb_outputs *po = step_outputs_pb(n, 0);
		kiln_id *ids = calloc(n->ks->noutputs + 1, sizeof *ids);
		size_t len, no = n->ks->noutputs;
		uint8_t *buf = NULL;
		kiln_batch *b;
		if (po == NULL || ids == NULL) {
			free(po);
			free(ids);
			set_error(n, "%s: out of memory", n->ks->url);
			rv = -1;
			goto out;
		}
		for (size_t i = 0; i < no; i++)
			ids[i] = n->outs[i].id;
		ar.outputs = po->p;
		ar.n_outputs = no;
		if (n->has_log) {
			ar.log.data = n->log_id.b;
			ar.log.len = 16;
		}
		ar.duration_ns = n->duration_ns;
		len = kiln__action_result__get_packed_size(&ar);
		if ((buf = malloc(len ? len : 1)) == NULL) {
			free(po);
			free(ids);
			set_error(n, "%s: out of memory", n->ks->url);
			rv = -1;
			goto out;
		}
		kiln__action_result__pack(&ar, buf);
		engine_batch_lock(e, &b);
		kiln_batch_action_put(b, &n->new_key, ids, no, buf, len);
		engine_batch_unlock(e);
		free(buf);
		free(po);
		free(ids);
		n->key = n->new_key;
		n->have = 1;
		n->outcome = O_RAN;
		outputs_record(e, g, n);
		record_put(e, g, n, KILN__STEP_RECORD__DECISION__RAN);
		n->send_event = 1;
	}
out:
	engine_rmtree(dir);
	unlink(logp);
	{
		char dep[PATH_MAX + 16];
		snprintf(dep, sizeof dep, "%s.d", dir);
		unlink(dep);
	}
	if (rv == 0) {   /* a failure keeps them for step_record_failure */
		prev_drop(n);
		key_parts_free(&n->parts);
	}
	return rv;
}

void
step_record_failure(struct engine *e, struct graph *g, struct node *n)
{
	n->have = 0;
	n->outcome = O_FAILED;
	if (n->parts.n > 0) {
		if (n->prev == NULL)
			prev_load(e, g, n);
		record_put(e, g, n, KILN__STEP_RECORD__DECISION__FAILED);
	}
	prev_drop(n);
	key_parts_free(&n->parts);
}

void
step_forget(struct node *n)
{
	n->have = 0;
	prev_drop(n);
	key_parts_free(&n->parts);
}
