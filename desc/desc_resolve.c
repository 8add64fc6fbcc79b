/* desc_resolve.c — from loaded description files to one plan per profile.
 *
 * For each profile: its variables (following inherits); one step per
 * source file each applicable rule matches; explicit assets, each replacing
 * a rule's step of the same URL (make's override) and clashing with
 * another asset's; every input resolved to source files or to prerequisite
 * steps ("@url", "@url/glob"); cycles between steps refused with the cycle
 * printed; the tools' command lines and env expanded with the step's
 * params, match fields and variables; bundles resolved to URLs.
 *
 * Cost: one pass over the source list per rule (skipping files outside the
 * glob's fixed prefix), hash lookups for URLs, no quadratic steps, so
 * 100,000 source files resolve well under a second (bench/load). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "desc_int.h"
#include "glob.h"
#include "strmap.h"
#include "kiln_store.h"

/* ---- building steps ---- */

struct match {
	const char *path, *dir, *name, *ext, *file;
};

struct sb {
	kiln_step st;
	const char *toolname;
	kiln_loc tool_loc;
	const vec *decl_inputs; /* struct desc_input */
	const vec *decl_outputs;
	const char *source;     /* the matched file of a rule step */
	struct match m;
	int has_match;
	int dead;               /* replaced by an asset */
	const char *where;      /* "rules[2]", "assets[0]": field prefix */
	vec inputs, needs;      /* const char * */
};

struct rs {
	const char *root;
	struct desc_file **files;
	size_t nfiles;
	const srcset *src;
	arena *a;   /* the plans: lives as long as the kiln_desc */
	arena *tmp; /* working data of resolving (steps in the making, the URL
	             * map, match fields): freed at the end, so the plans do
	             * not carry ~1 KB a step of scaffolding */
	diags *dg;
	const char *project;
	/* tools of every file, by name */
	struct strmap tools;
	vec toolv;     /* const kiln_tool * */
	vec toolnames; /* const char *, same order (for suggestions) */
	int *tool_reported; /* per tool: a template error was reported (once
	                     * for all profiles: the first profile is named) */
	int *tool_match;    /* per tool: tool_uses_match */
	size_t tool_index;  /* of the tool being expanded */
	/* rule globs, compiled once: globs[i] for the i-th rule over all files */
	kiln_glob **globs;
	/* per profile */
	const char *profile;
	vec vars; /* kiln_kv, nearest profile first */
	vec steps; /* struct sb */
	struct strmap urls;
	const char *const *profile_names;
	size_t nprofiles;
	size_t nassets; /* over all files */
	char realroot[PATH_MAX]; /* "" when it could not be resolved */
};

static const char *
var_lookup(const struct rs *r, const char *name, size_t len)
{
	const kiln_kv *kv = r->vars.items;

	if (len == 7 && strncmp(name, "profile", 7) == 0)
		return r->profile;
	if (len == 7 && strncmp(name, "project", 7) == 0)
		return r->project;
	for (size_t i = 0; i < r->vars.n; i++)
		if (strlen(kv[i].key) == len && strncmp(kv[i].key, name, len) == 0)
			return kv[i].value;
	return NULL;
}

struct scope_arg {
	const struct rs *r;
	const struct sb *s; /* NULL: no step (URL and output templates) */
	const struct match *m;
	int tool_stage;     /* expanding a tool: in/out/depfile deferred */
};

static const char *
match_lookup(const struct match *m, const char *name, size_t len)
{
	if (m == NULL || len < 6 || strncmp(name, "match.", 6) != 0)
		return NULL;
	name += 6;
	len -= 6;
#define F(k) if (len == sizeof #k - 1 && strncmp(name, #k, len) == 0) return m->k
	F(path); F(dir); F(name); F(ext); F(file);
#undef F
	return NULL;
}

/* ${param.a.b}: a scalar inside the step's params. */
static const char *
param_lookup(const kiln_val *p, const char *name, size_t len)
{
	if (p == NULL || len < 6 || strncmp(name, "param.", 6) != 0)
		return NULL;
	name += 6;
	len -= 6;
	while (p != NULL && p->type == KILN_VAL_MAP) {
		const char *dot = memchr(name, '.', len);
		size_t seg = dot ? (size_t)(dot - name) : len;
		const kiln_val *next = NULL;
		for (size_t i = 0; i < p->n && next == NULL; i++)
			if (strlen(p->keys[i]) == seg && strncmp(p->keys[i], name, seg) == 0)
				next = &p->items[i];
		p = next;
		if (dot == NULL)
			break;
		name = dot + 1;
		len -= seg + 1;
	}
	if (p == NULL || p->type == KILN_VAL_LIST || p->type == KILN_VAL_MAP)
		return NULL;
	return p->type == KILN_VAL_NULL ? "" : p->str;
}

static const char *
scope_lookup(const char *name, size_t len, void *arg)
{
	struct scope_arg *sa = arg;
	const char *v = match_lookup(sa->m, name, len);

	if (v == NULL && sa->s != NULL)
		v = param_lookup(sa->s->st.params, name, len);
	return v != NULL ? v : var_lookup(sa->r, name, len);
}

static int
scope_deferred(const char *name, size_t len, void *arg)
{
	struct scope_arg *sa = arg;
	const struct sb *s = sa->s;

	if (!sa->tool_stage)
		return 0;
	if ((len == 2 && strncmp(name, "in", 2) == 0) ||
	    (len == 5 && strncmp(name, "in...", 5) == 0))
		return 1;
	if (len == 7 && strncmp(name, "depfile", 7) == 0)
		return s->st.tool->depfile;
	if (len == 3 && strncmp(name, "out", 3) == 0)
		return s->st.noutputs == 1;
	if (len > 4 && strncmp(name, "out.", 4) == 0)
		for (size_t i = 0; i < s->st.noutputs; i++)
			if (strlen(s->st.outputs[i].name) == len - 4 &&
			    strncmp(s->st.outputs[i].name, name + 4, len - 4) == 0)
				return 1;
	return 0;
}

static char *
expand(struct rs *r, const struct sb *s, const struct match *m, int tool_stage,
       const char *text, const char **bad)
{
	struct scope_arg sa = {r, s, m, tool_stage};
	tmpl_scope sc = {scope_lookup, &sa, scope_deferred, NULL};

	return tmpl_expand(r->a, text, &sc, bad);
}

/* A shell tool's command line: argv[0] the script with a reference in
 * place of each value, argv[1..] the values (see tmpl_scope.vals). NULL
 * with *bad set as for expand, or NULL alone when out of memory. */
static const char **
expand_shell(struct rs *r, const struct sb *s, const struct match *m,
             const char *text, size_t *nargv, const char **bad)
{
	struct scope_arg sa = {r, s, m, 1};
	tmpl_vals vals = {0};
	tmpl_scope sc = {scope_lookup, &sa, scope_deferred, &vals};
	const char *script = tmpl_expand(r->a, text, &sc, bad);
	const char **argv;

	if (script == NULL ||
	    (argv = arena_alloc_raw(r->a, (vals.n + 1) * sizeof *argv)) == NULL)
		return NULL;
	argv[0] = script;
	if (vals.n > 0)
		memcpy(argv + 1, vals.v, vals.n * sizeof *argv);
	*nargv = vals.n + 1;
	return argv;
}

/* The match fields of a source path under a glob's fixed prefix. */
static void
match_fields(arena *a, const char *file, const char *prefix, struct match *m)
{
	const char *rel = file + strlen(prefix), *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel, *dot = strrchr(base, '.');
	size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);

	m->file = base;
	m->dir = slash ? arena_strndup(a, rel, (size_t)(slash - rel)) : "";
	m->name = arena_strndup(a, base, stem);
	m->ext = dot && dot != base ? dot + 1 : "";
	m->path = arena_strndup(a, rel, (size_t)(base - rel) + stem);
}

/* Outputs: the declared ones with their file templates expanded, or one
 * named "out" after the URL's last segment. */
static int
step_outputs(struct rs *r, struct sb *s, kiln_loc loc, const char *field)
{
	const kiln_output *decl = s->decl_outputs->items;
	size_t n = s->decl_outputs->n;
	kiln_output *out = arena_alloc(r->a, (n ? n : 1) * sizeof *out);
	const char *bad;

	if (out == NULL)
		return KILN_ENOMEM;
	if (n == 0) {
		const char *slash = strrchr(s->st.url, '/');
		out[0] = (kiln_output){"out", slash ? slash + 1 : s->st.url};
		n = 1;
	}
	for (size_t i = 0; i < s->decl_outputs->n; i++) {
		out[i].name = decl[i].name;
		out[i].file = expand(r, NULL, s->has_match ? &s->m : NULL, 0, decl[i].file, &bad);
		if (out[i].file == NULL) {
			diag_add(r->dg, KILN_DIAG_ERROR, loc, field, "output '%s': %s",
			         decl[i].name, bad ? bad : "out of memory");
			out[i].file = decl[i].file;
		}
	}
	s->st.outputs = out;
	s->st.noutputs = n;
	return 0;
}

static int
applies(const vec *profiles, const char *profile)
{
	const char *const *p = profiles->items;

	if (profiles->n == 0)
		return 1;
	for (size_t i = 0; i < profiles->n; i++)
		if (strcmp(p[i], profile) == 0)
			return 1;
	return 0;
}

static struct sb *
step_add(struct rs *r)
{
	struct sb s = {0};

	vec_init(&s.inputs, sizeof(const char *));
	vec_init(&s.needs, sizeof(const char *));
	return vec_push(r->tmp, &r->steps, &s);
}

/* The first of the sorted source files not before prefix. */
static size_t
file_range(const srcset *src, const char *prefix)
{
	const char *const *files = src->files.items;
	size_t lo = 0, hi = src->files.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(files[mid], prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
rule_steps(struct rs *r, const struct desc_rule *ru, kiln_glob *g)
{
	const char *const *files = r->src->files.items;
	const char *prefix = glob_prefix(g);
	const char *where = arena_printf(r->tmp, "rules[%d]", ru->index);
	size_t pl = strlen(prefix), nmatched = 0, idx;

	for (size_t i = file_range(r->src, prefix); i < r->src->files.n; i++) {
		const char *bad;
		struct sb *s, *old;
		struct match m;
		char *url;
		if (strncmp(files[i], prefix, pl) != 0)
			break; /* sorted: past the files under the prefix */
		if (!glob_match(g, files[i]))
			continue;
		nmatched++;
		match_fields(r->tmp, files[i], prefix, &m);
		if ((url = expand(r, NULL, &m, 0, ru->url, &bad)) == NULL) {
			diag_add(r->dg, KILN_DIAG_ERROR, ru->url_loc,
			         arena_printf(r->a, "rules[%d].url", ru->index), "%s%s",
			         bad ? bad : "out of memory", bad && strstr(bad, "${match.")
			         ? " (match fields are path, dir, name, ext, file)" : "");
			return;
		}
		if (kiln_url_check(url) != 0) {
			diag_add(r->dg, KILN_DIAG_ERROR, ru->url_loc,
			         arena_printf(r->a, "rules[%d].url", ru->index), "'%s' made "
			         "from '%s' is not a valid URL", url, files[i]);
			continue;
		}
		if (strmap_get(&r->urls, url, &idx)) {
			old = (struct sb *)r->steps.items + idx;
			diag_add(r->dg, KILN_DIAG_ERROR, ru->url_loc,
			         arena_printf(r->a, "rules[%d].url", ru->index), "URL '%s' is made "
			         "twice: from '%s' here and from '%s' by the rule at %s:%d",
			         url, files[i], old->source, old->st.loc.file, old->st.loc.line);
			continue;
		}
		if ((s = step_add(r)) == NULL)
			return;
		s->st.url = url;
		s->st.loc = ru->loc;
		s->st.from_rule = 1;
		s->where = where;
		s->st.params = ru->params;
		s->toolname = ru->tool;
		s->tool_loc = ru->tool_loc;
		s->decl_inputs = &ru->inputs;
		s->decl_outputs = &ru->outputs;
		s->source = files[i];
		s->m = m;
		s->has_match = 1;
		vec_push(r->tmp, &s->inputs, &files[i]);
		strmap_put(&r->urls, url, r->steps.n - 1);
		step_outputs(r, s, ru->outputs_loc.line ? ru->outputs_loc : ru->loc, "outputs");
	}
	if (nmatched == 0)
		diag_add(r->dg, KILN_DIAG_WARNING, ru->match_loc,
		         arena_printf(r->a, "rules[%d].match", ru->index), "'%s' matches "
		         "no source file", ru->match);
}

static void
asset_step(struct rs *r, const struct desc_asset *as)
{
	struct sb *s, *old;
	size_t idx;

	if (strmap_get(&r->urls, as->url, &idx)) {
		old = (struct sb *)r->steps.items + idx;
		if (!old->st.from_rule) {
			diag_add(r->dg, KILN_DIAG_ERROR, as->url_loc,
			         arena_printf(r->a, "assets[%d].url", as->index), "URL '%s' is "
			         "already defined by the asset at %s:%d", as->url,
			         old->st.loc.file, old->st.loc.line);
			return;
		}
		old->dead = 1;
	}
	if ((s = step_add(r)) == NULL)
		return;
	if (strmap_get(&r->urls, as->url, &idx))
		s->st.overrides = ((struct sb *)r->steps.items)[idx].st.loc;
	s->st.url = as->url;
	s->st.loc = as->loc;
	s->st.params = as->params;
	s->where = arena_printf(r->tmp, "assets[%d]", as->index);
	s->toolname = as->tool;
	s->tool_loc = as->tool_loc;
	s->decl_inputs = &as->inputs;
	s->decl_outputs = &as->outputs;
	strmap_put(&r->urls, as->url, r->steps.n - 1);
	step_outputs(r, s, as->outputs_loc.line ? as->outputs_loc : as->loc, "outputs");
}

/* ---- inputs and links ---- */

static int
str_order(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
file_known(const struct rs *r, const char *path)
{
	char abs[PATH_MAX * 2], real[PATH_MAX];
	size_t rl = strlen(r->realroot);
	struct stat st;

	if (r->src->files.n > 0 && bsearch(&path, r->src->files.items, r->src->files.n,
	                                   sizeof(char *), str_order) != NULL)
		return 1;
	snprintf(abs, sizeof abs, "%s/%s", r->root, path);
	if (rl == 0 || realpath(abs, real) == NULL || stat(real, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return strncmp(real, r->realroot, rl) == 0 && real[rl] == '/';
}

/* 1 when nothing at all is at path (no file, no symlink, no folder). */
static int
file_absent(const struct rs *r, const char *path)
{
	char abs[PATH_MAX * 2];
	struct stat st;

	snprintf(abs, sizeof abs, "%s/%s", r->root, path);
	return lstat(abs, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

/* A source file named by its path. One that does not exist yet stays an
 * input, with a warning: the build engine fails that step alone (naming
 * the file and the step's file:line) until the file appears, so one
 * missing file does not stop the whole project. What exists but is not a
 * regular file inside the project (a folder, a symlink leading out) is
 * still refused. */
static void
literal_input(struct rs *r, struct sb *s, const struct desc_input *in,
              const char *path)
{
	if (file_known(r, path))
		vec_push(r->tmp, &s->inputs, &path);
	else if (file_absent(r, path)) {
		vec_push(r->tmp, &s->inputs, &path);
		/* no URL in it: a rule's steps then share one warning */
		diag_add(r->dg, KILN_DIAG_WARNING, in->loc, in->field, "input file '%s' "
		         "does not exist: %s until it does", path, s->st.from_rule
		         ? "each step of this rule fails" : "this step fails");
	} else
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "input file '%s' "
		         "is not a regular file inside the project", path);
}

/* One declared input of step s: files, or prerequisite steps. */
static void
input_resolve(struct rs *r, struct sb *s, const struct desc_input *in)
{
	const char *field = in->field;
	const char *pattern = in->text[0] == '@' ? in->text + 1 : in->path;
	const char *why;
	kiln_glob *g;
	size_t n = 0, idx;

	if (glob_compile(pattern, &g, &why) != 0) {
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, field, "'%s': %s", in->text,
		         why ? why : "malformed pattern");
		return;
	}
	if (in->text[0] == '@' && glob_is_literal(g)) {
		if (strmap_get(&r->urls, pattern, &idx) && !((struct sb *)r->steps.items)[idx].dead)
			vec_push(r->tmp, &s->needs, &pattern);
		else
			diag_add(r->dg, KILN_DIAG_ERROR, in->loc, field, "'%s' names no "
			         "asset: unknown URL '%s' in profile '%s'", in->text, pattern,
			         r->profile);
		n = 1;
	} else if (in->text[0] == '@') {
		const struct sb *all = r->steps.items;
		for (size_t i = 0; i < r->steps.n; i++)
			if (!all[i].dead && &all[i] != s && glob_match(g, all[i].st.url)) {
				vec_push(r->tmp, &s->needs, &all[i].st.url);
				n++;
			}
	} else if (glob_is_literal(g)) {
		literal_input(r, s, in, pattern);
		n = 1;
	} else {
		const char *const *files = r->src->files.items;
		const char *prefix = glob_prefix(g);
		size_t pl = strlen(prefix);
		for (size_t i = file_range(r->src, prefix);
		     i < r->src->files.n && strncmp(files[i], prefix, pl) == 0; i++)
			if (glob_match(g, files[i])) {
				vec_push(r->tmp, &s->inputs, &files[i]);
				n++;
			}
	}
	if (n == 0)
		diag_add(r->dg, KILN_DIAG_WARNING, in->loc, field, "'%s' matches "
		         "nothing in profile '%s'", in->text, r->profile);
	glob_free(g);
}

/* Sort and de-duplicate a vec of strings (in r->tmp) into a plain array
 * of just their count in r->a. NULL only for none, or out of memory. */
static const char **
sorted_unique(struct rs *r, vec *v, size_t *n)
{
	const char **p, **out;
	size_t w;

	vec_sort_unique_str(v);
	p = v->items;
	w = v->n;
	*n = 0;
	if (w == 0 || (out = arena_alloc_raw(r->a, w * sizeof *out)) == NULL)
		return NULL;
	memcpy(out, p, w * sizeof *out);
	*n = w;
	return out;
}

/* ---- tools' command lines ---- */

/* Why a name the engine fills in was not available to this step. */
static const char *
tool_hint(struct rs *r, const struct sb *s, const char *bad, int has_match)
{
	if (strstr(bad, "'${out}'") != NULL)
		return arena_printf(r->a, ": the step has %zu outputs, name one with "
		                    "${out.NAME}", s->st.noutputs);
	if (strstr(bad, "'${out.") != NULL)
		return ": the step has no output of that name";
	if (strstr(bad, "'${depfile}'") != NULL)
		return ": the tool does not set 'depfile: true'";
	if (strstr(bad, "'${param.") != NULL)
		return ": the step has no such param (or it is a list or mapping)";
	if (strstr(bad, "'${match.") != NULL)
		return has_match ? ": match fields are path, dir, name, ext, file"
		                 : ": explicit assets have no ${match.*} fields";
	return "";
}

/* 1 when a tool's templates use ${match.*}: then each step of a rule
 * expands differently; otherwise every step of one rule or asset gets the
 * same command line, expanded once (see tool_expand). */
static int
tool_uses_match(const kiln_tool *t)
{
	for (size_t i = 0; i < t->nrun; i++)
		if (strstr(t->run[i], "${match.") != NULL)
			return 1;
	for (size_t i = 0; i < t->nenv; i++)
		if (strstr(t->env[i].value, "${match.") != NULL)
			return 1;
	return 0;
}

/* The last expansion, reusable by the next step of the same declaration. */
struct tool_memo {
	const kiln_tool *tool;
	const vec *decl; /* the rule's or asset's outputs: one per declaration */
	const char **argv;
	size_t nargv;
	kiln_kv *env;
};

/* A whole argv item "${param.NAME...}" naming a list param: the list,
 * whose items become one argv item each. NULL otherwise. */
static const kiln_val *
spread_param(const struct sb *s, const char *item)
{
	size_t len = strlen(item);
	const kiln_val *p = s->st.params;

	if (p == NULL || len < 14 || strncmp(item, "${param.", 8) != 0 ||
	    strcmp(item + len - 4, "...}") != 0)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		if (strlen(p->keys[i]) == len - 12 &&
		    strncmp(p->keys[i], item + 8, len - 12) == 0)
			return p->items[i].type == KILN_VAL_LIST ? &p->items[i] : NULL;
	return NULL;
}

/* A tool's argv with variables, params and match fields expanded (a
 * shell tool's: see expand_shell). NULL with *bad set as for expand, or
 * NULL alone when out of memory. */
static const char **
argv_expand(struct rs *r, const struct sb *s, const struct match *m,
            size_t *nargv, const char **bad)
{
	const kiln_tool *t = s->st.tool;
	const char **argv;
	size_t cap = t->nrun + 1;

	if (t->shell && t->nrun == 1)
		return expand_shell(r, s, m, t->run[0], nargv, bad);
	for (size_t i = 0; i < t->nrun; i++) {
		const kiln_val *list = spread_param(s, t->run[i]);
		cap += list ? list->n : 0;
	}
	if ((argv = arena_alloc_raw(r->a, cap * sizeof *argv)) == NULL)
		return NULL;
	*nargv = 0;
	for (size_t i = 0; i < t->nrun && *bad == NULL; i++) {
		const kiln_val *list = spread_param(s, t->run[i]);
		if (list == NULL) {
			argv[(*nargv)++] = expand(r, s, m, 1, t->run[i], bad);
			continue;
		}
		for (size_t k = 0; k < list->n && *bad == NULL; k++) {
			if (list->items[k].type == KILN_VAL_LIST || list->items[k].type == KILN_VAL_MAP)
				*bad = arena_printf(r->a, "'%s' spreads a list whose items must be "
				                    "single values", t->run[i]);
			else
				argv[(*nargv)++] = list->items[k].str;
		}
	}
	return *bad == NULL ? argv : NULL;
}

static void
tool_expand(struct rs *r, struct sb *s, int *reported, struct tool_memo *memo)
{
	const kiln_tool *t = s->st.tool;
	const struct match *m = s->has_match ? &s->m : NULL;
	const char **argv;
	kiln_kv *env;
	const char *bad = NULL;
	size_t nargv = 0;

	if (memo->tool == t && memo->decl == s->decl_outputs && memo->argv != NULL) {
		s->st.argv = memo->argv;
		s->st.nargv = memo->nargv;
		s->st.env = memo->env;
		s->st.nenv = t->nenv;
		return;
	}
	argv = argv_expand(r, s, m, &nargv, &bad);
	env = arena_alloc_raw(r->a, (t->nenv + 1) * sizeof *env);
	if ((argv == NULL && bad == NULL) || env == NULL)
		return;
	for (size_t i = 0; i < t->nenv && bad == NULL; i++) {
		env[i] = t->env[i];
		env[i].value = expand(r, s, m, 1, t->env[i].value, &bad);
	}
	if (bad != NULL) {
		if (!*reported)
			diag_add(r->dg, KILN_DIAG_ERROR, t->loc,
			         arena_printf(r->a, "tools.%s", t->name), "%s%s (step '%s', "
			         "profile '%s')", bad, tool_hint(r, s, bad, m != NULL),
			         s->st.url, r->profile);
		*reported = 1;
		return;
	}
	s->st.argv = argv;
	s->st.nargv = nargv;
	s->st.env = env;
	s->st.nenv = t->nenv;
	*memo = (struct tool_memo){NULL, NULL, NULL, 0, NULL};
	if (!r->tool_match[r->tool_index])
		*memo = (struct tool_memo){t, s->decl_outputs, argv, nargv, env};
}

/* ---- profiles ---- */

static const struct desc_profile *
profile_find(const struct desc_file *root, const char *name)
{
	const struct desc_profile *p = root->profiles.items;

	for (size_t i = 0; i < root->profiles.n; i++)
		if (strcmp(p[i].name, name) == 0)
			return &p[i];
	return NULL;
}

/* Variables of a profile, nearest definition first. 0, or -1 after an
 * error (unknown parent, inheritance cycle). */
static int
profile_vars(struct rs *r, const struct desc_file *root, const struct desc_profile *p)
{
	const struct desc_profile *chain[32];
	size_t n = 0;

	vec_init(&r->vars, sizeof(kiln_kv));
	for (const struct desc_profile *q = p; q != NULL; n++) {
		for (size_t i = 0; i < n; i++)
			if (chain[i] == q) {
				diag_add(r->dg, KILN_DIAG_ERROR, p->inherits_loc, "inherits",
				         "profile '%s' inherits from itself through '%s'",
				         p->name, q->name);
				return -1;
			}
		if (n == 32)
			return -1;
		chain[n] = q;
		for (size_t i = 0; i < q->vars.n; i++)
			vec_push(r->a, &r->vars, (kiln_kv *)q->vars.items + i);
		if (q->inherits == NULL)
			break;
		const struct desc_profile *parent = profile_find(root, q->inherits);
		if (parent == NULL) {
			const char *hint = diag_suggest(q->inherits, r->profile_names, r->nprofiles);
			diag_add(r->dg, KILN_DIAG_ERROR, q->inherits_loc, "inherits",
			         "unknown profile '%s'%s%s%s", q->inherits,
			         hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
			return -1;
		}
		q = parent;
	}
	return 0;
}

/* The first of the URL-sorted steps not before prefix. */
static size_t
first_with_prefix(const kiln_step *steps, size_t n, const char *prefix)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(steps[mid].url, prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
bundles_resolve(struct rs *r, kiln_plan *plan, const kiln_step *steps, size_t n)
{
	vec out;

	vec_init(&out, sizeof(kiln_bundle_plan));
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_bundle *b = r->files[f]->bundles.items;
		for (size_t i = 0; i < r->files[f]->bundles.n; i++) {
			kiln_bundle_plan bp = {b[i].name, NULL, 0, b[i].loc};
			vec urls;
			vec_init(&urls, sizeof(const char *));
			for (size_t j = 0; j < b[i].patterns.n; j++) {
				const struct desc_input *in = (const struct desc_input *)b[i].patterns.items + j;
				const char *why;
				kiln_glob *g;
				size_t before = urls.n;
				if (glob_compile(in->text, &g, &why) != 0) {
					diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': %s",
					         in->text, why ? why : "malformed pattern");
					continue;
				}
				for (size_t k = first_with_prefix(steps, n, glob_prefix(g));
				     k < n && strncmp(steps[k].url, glob_prefix(g),
				                      strlen(glob_prefix(g))) == 0; k++)
					if (glob_match(g, steps[k].url))
						vec_push(r->tmp, &urls, &steps[k].url);
				if (urls.n == before)
					diag_add(r->dg, glob_is_literal(g) ? KILN_DIAG_ERROR : KILN_DIAG_WARNING,
					         in->loc, in->field, glob_is_literal(g)
					         ? "bundle '%s' names unknown URL '%s' in profile '%s'"
					         : "bundle '%s': '%s' matches no URL in profile '%s'",
					         b[i].name, in->text, r->profile);
				glob_free(g);
			}
			bp.urls = sorted_unique(r, &urls, &bp.nurls);
			vec_push(r->a, &out, &bp);
		}
	}
	plan->bundles = out.items;
	plan->nbundles = out.n;
}

static int
step_order(const void *a, const void *b)
{
	return strcmp((*(const struct sb *const *)a)->st.url,
	              (*(const struct sb *const *)b)->st.url);
}

/* Steps of the profile, finished into a sorted kiln_step array. */
static int
plan_finish(struct rs *r, kiln_plan *plan)
{
	struct sb *all = r->steps.items;
	kiln_step *steps = arena_alloc(r->a, (r->steps.n ? r->steps.n : 1) * sizeof *steps);
	size_t n = 0;
	int *reported = r->tool_reported;
	struct tool_memo memo = {NULL, NULL, NULL, 0, NULL};
	const struct sb **order;

	if (steps == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < r->steps.n; i++) {
		struct sb *s = &all[i];
		size_t t;
		if (s->dead)
			continue;
		for (size_t j = 0; j < s->decl_inputs->n; j++)
			input_resolve(r, s, (const struct desc_input *)s->decl_inputs->items + j);
		if (!strmap_get(&r->tools, s->toolname, &t)) {
			const char *hint = diag_suggest(s->toolname, r->toolnames.items,
			                                r->toolnames.n);
			diag_add(r->dg, KILN_DIAG_ERROR, s->tool_loc,
			         arena_printf(r->a, "%s.tool", s->where), "unknown tool "
			         "'%s'%s%s%s", s->toolname, hint ? " (did you mean '" : "",
			         hint ? hint : "", hint ? "'?)" : "");
		} else {
			s->st.tool = ((const kiln_tool *const *)r->toolv.items)[t];
			r->tool_index = t;
			tool_expand(r, s, &reported[t], &memo);
		}
		s->st.inputs = sorted_unique(r, &s->inputs, &s->st.ninputs);
		s->st.needs = sorted_unique(r, &s->needs, &s->st.nneeds);
		n++;
	}
	/* Sort pointers, then copy each step once, in URL order. */
	if ((order = malloc((n ? n : 1) * sizeof *order)) == NULL)
		return KILN_ENOMEM;
	n = 0;
	for (size_t i = 0; i < r->steps.n; i++)
		if (!all[i].dead)
			order[n++] = &all[i];
	if (n > 1)
		qsort(order, n, sizeof *order, step_order);
	for (size_t i = 0; i < n; i++)
		steps[i] = order[i]->st;
	free(order);
	plan_cycles(r->dg, steps, n);
	plan_outputs(r->dg, steps, n);
	plan->profile = r->profile;
	plan->steps = steps;
	plan->nsteps = n;
	plan->vars = r->vars.items;
	plan->nvars = r->vars.n;
	bundles_resolve(r, plan, steps, n);
	return 0;
}

static int
resolve_profile(struct rs *r, const struct desc_file *root, const struct desc_profile *p,
                kiln_plan *plan)
{
	size_t g = 0;

	r->profile = p->name;
	if (profile_vars(r, root, p) != 0)
		return 0;
	vec_init(&r->steps, sizeof(struct sb));
	if (strmap_init(r->tmp, &r->urls, r->src->files.n + 1024) != 0 ||
	    vec_reserve(r->tmp, &r->steps, r->src->files.n + r->nassets + 16) != 0)
		return KILN_ENOMEM;
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_rule *ru = r->files[f]->rules.items;
		for (size_t i = 0; i < r->files[f]->rules.n; i++, g++)
			if (r->globs[g] != NULL && applies(&ru[i].profiles, p->name))
				rule_steps(r, &ru[i], r->globs[g]);
	}
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_asset *as = r->files[f]->assets.items;
		for (size_t i = 0; i < r->files[f]->assets.n; i++)
			if (applies(&as[i].profiles, p->name))
				asset_step(r, &as[i]);
	}
	return plan_finish(r, plan);
}

/* ---- checks that do not depend on the profile ---- */

static int
tools_index(struct rs *r)
{
	size_t total = 0, idx;

	vec_init(&r->toolv, sizeof(const char *));
	vec_init(&r->toolnames, sizeof(const char *));
	for (size_t f = 0; f < r->nfiles; f++)
		total += r->files[f]->tools.n;
	if (strmap_init(r->a, &r->tools, total + 1) != 0)
		return KILN_ENOMEM;
	for (size_t f = 0; f < r->nfiles; f++) {
		const kiln_tool *t = r->files[f]->tools.items;
		for (size_t i = 0; i < r->files[f]->tools.n; i++) {
			if (strmap_get(&r->tools, t[i].name, &idx)) {
				const kiln_tool *old = ((const kiln_tool *const *)r->toolv.items)[idx];
				diag_add(r->dg, KILN_DIAG_ERROR, t[i].loc, "tools", "tool '%s' is "
				         "already defined at %s:%d", t[i].name, old->loc.file,
				         old->loc.line);
				continue;
			}
			const kiln_tool *tp = &t[i];
			strmap_put(&r->tools, t[i].name, r->toolv.n);
			vec_push(r->a, &r->toolv, &tp);
			vec_push(r->a, &r->toolnames, &t[i].name);
		}
	}
	return 0;
}

static int
rule_globs(struct rs *r)
{
	size_t total = 0, g = 0;

	for (size_t f = 0; f < r->nfiles; f++)
		total += r->files[f]->rules.n;
	if ((r->globs = calloc(total ? total : 1, sizeof *r->globs)) == NULL)
		return KILN_ENOMEM;
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_rule *ru = r->files[f]->rules.items;
		for (size_t i = 0; i < r->files[f]->rules.n; i++, g++) {
			const char *why;
			if (glob_compile(ru[i].match, &r->globs[g], &why) != 0) {
				r->globs[g] = NULL;
				diag_add(r->dg, KILN_DIAG_ERROR, ru[i].match_loc,
				         arena_printf(r->a, "rules[%d].match", ru[i].index),
				         "'%s': %s", ru[i].match, why ? why : "malformed pattern");
			}
		}
	}
	return 0;
}

static void
profile_refs(struct rs *r)
{
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_rule *ru = r->files[f]->rules.items;
		const struct desc_asset *as = r->files[f]->assets.items;
		for (size_t i = 0; i < r->files[f]->rules.n + r->files[f]->assets.n; i++) {
			int rule = i < r->files[f]->rules.n;
			const vec *pv = rule ? &ru[i].profiles : &as[i - r->files[f]->rules.n].profiles;
			kiln_loc loc = rule ? ru[i].profiles_loc : as[i - r->files[f]->rules.n].profiles_loc;
			for (size_t j = 0; j < pv->n; j++) {
				const char *name = ((const char *const *)pv->items)[j];
				size_t k;
				for (k = 0; k < r->nprofiles && strcmp(r->profile_names[k], name) != 0; k++)
					;
				if (k == r->nprofiles)
					diag_add(r->dg, KILN_DIAG_ERROR, loc, "profiles", "unknown "
					         "profile '%s'", name);
			}
		}
	}
}

int
desc_resolve(const char *root, struct desc_file **files, size_t nfiles,
             const srcset *src, struct plan_set *ps)
{
	arena tmp = {0};
	struct rs r = {.root = root, .files = files, .nfiles = nfiles, .src = src,
	               .a = &ps->a, .tmp = &tmp, .dg = &ps->dg};
	const struct desc_file *rootf = files[0];
	const struct desc_profile *profiles = rootf->profiles.items;
	const char **names;
	int rv;

	r.project = rootf->project ? rootf->project : "";
	if (realpath(root, r.realroot) == NULL)
		r.realroot[0] = '\0';
	vec_init(&ps->plans, sizeof(kiln_plan));
	names = arena_alloc(r.a, (rootf->profiles.n + 1) * sizeof *names);
	if (names == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < rootf->profiles.n; i++)
		names[i] = profiles[i].name;
	r.profile_names = names;
	r.nprofiles = rootf->profiles.n;
	for (size_t f = 0; f < nfiles; f++)
		r.nassets += files[f]->assets.n;
	if ((rv = tools_index(&r)) != 0 || (rv = rule_globs(&r)) != 0)
		goto out;
	r.tool_reported = arena_alloc(r.a, (r.toolv.n + 1) * sizeof(int));
	r.tool_match = arena_alloc(r.a, (r.toolv.n + 1) * sizeof(int));
	if (r.tool_reported == NULL || r.tool_match == NULL) {
		rv = KILN_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r.toolv.n; i++)
		r.tool_match[i] = tool_uses_match(((const kiln_tool *const *)r.toolv.items)[i]);
	profile_refs(&r);
	for (size_t i = 0; i < rootf->profiles.n && rv == 0; i++) {
		kiln_plan plan = {0};
		if ((rv = resolve_profile(&r, rootf, &profiles[i], &plan)) == 0 && tmp.failed)
			rv = KILN_ENOMEM;
		if (rv == 0 && plan.profile)
			vec_push(r.a, &ps->plans, &plan);
		arena_free(&tmp);
	}
out:
	for (size_t g = 0, f = 0; f < nfiles; f++)
		for (size_t i = 0; i < files[f]->rules.n; i++, g++)
			if (r.globs != NULL)
				glob_free(r.globs[g]);
	free(r.globs);
	if (rv == 0 && tmp.failed)
		rv = KILN_ENOMEM;
	arena_free(&tmp); /* after an error before the profiles' loop */
	return rv != 0 ? rv : r.a->failed ? KILN_ENOMEM : 0;
}
