/* decide_key.c — deciding, part one: gathering a step's action key parts
 * (action_key.h): the tool's identity (its name, declared version and the
 * content hash of the program found on the build's PATH: step_program,
 * looked up once per tool, PATH and wave, and of the program it exec'd in
 * its place last time: tool_runs.c), the argv and env templates, the
 * profile variables the tool uses, each param, each output's name, the
 * content hash of each source input and of each prerequisite's output
 * the tool gets, and the order it gets its inputs in.
 *
 * Threads: the worker deciding the node; the tool lookups are shared
 * between workers under e->tools_mu. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "bundle_build.h"
#include "decide.h"
#include "search_path.h"
#include "step.h"
#include "tool_runs.h"

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

	if (t->builtin) {   /* the engine's own work: no program to find */
		snprintf(exe, len, "%s (built-in)", t->name);
		if (h != NULL)
			memset(h, 0, sizeof *h);
		if (seen != NULL)
			memset(seen, 0, sizeof *seen);
		return 0;
	}
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
		goto fail;
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
fail:
	if (rv != 0) {
		char where[200];
		spawn_where_looked(prog, path, e->root, where, sizeof where);
		set_error(n, "tool '%s' (%s:%d): program '%s' %s, looked for %s",
		          t->name, t->loc.file ? t->loc.file : "?", t->loc.line, prog,
		          rv == KILN_ENOTFOUND ? "not found or not executable"
		                               : kiln_strerror(rv), where);
	} else if (h != NULL)
		*h = hash;
	if (rv == 0 && seen != NULL)
		*seen = fss;
	return rv;
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
	if (rv == 0 && t->builtin)
		rv = bundle_key_parts(g, n, kp);
	else if (rv == 0)
		rv = key_parts_hash(kp, "tool exe", &h);
	/* and the program it exec'd in its place last time (a shim's) */
	if (rv == 0 && !t->builtin)
		rv = tool_runs_part(e, g, n, exe, kp);
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

/* The order the tool gets its inputs in: the parts above are sorted by
 * label, so they would not change when kiln.yaml reorders `inputs:`,
 * though a concatenating or packing tool's result does. One text part,
 * each source's path or output's URL in order. Only for two inputs or
 * more: with fewer there is no order, and such steps keep the keys (and
 * the cached results) they had before this part existed. */
static int
parts_order(const struct graph *g, const kiln_step *ks, struct key_parts *kp)
{
	struct sbuf b = {0};
	int rv;

	if (ks->norder < 2)
		return 0;
	for (size_t o = 0; o < ks->norder; o++) {
		const struct node *d;
		size_t i;
		char url[600];
		if (o)
			sb_add(&b, "\x1f", 1);
		if (ks->order[o].path != NULL) {
			sb_str(&b, ks->order[o].path);
			continue;
		}
		if (step_input_output(g, &ks->order[o], &d, &i) == 0)
			step_output_url(d, i, url, sizeof url);
		else
			snprintf(url, sizeof url, "%s#%s", ks->order[o].url, ks->order[o].output);
		sb_str(&b, url);
	}
	rv = b.oom ? KILN_ENOMEM : key_parts_text(kp, "inputs order", b.p ? b.p : "");
	free(b.p);
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
	/* the prerequisites' outputs the tool gets: with `@URL#name`, only
	 * that one (the order holds each once) */
	for (size_t o = 0; o < ks->norder && rv == 0; o++) {
		const struct node *d;
		size_t i;
		char url[600];
		if (step_input_output(g, &ks->order[o], &d, &i) != 0)
			continue;
		step_output_url(d, i, url, sizeof url);
		rv = key_parts_hash2(kp, "need ", url, &d->outs[i].id);
	}
	return rv == 0 ? parts_order(g, ks, kp) : rv;
}

int
step_key_parts(struct engine *e, const struct graph *g, struct node *n,
               struct key_parts *kp)
{
	int rv = parts_tool(e, g, n, kp);

	return rv != 0 ? rv : parts_step(e, g, n, kp);
}
