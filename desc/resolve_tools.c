/* resolve_tools.c — template scopes and tools' command lines.
 *
 * The scope a ${...} is expanded in: match fields (${match.path}, ...),
 * the step's params (${param.a.b}), the profile's variables, profile and
 * project; the names the engine fills in later (in, out, depfile) kept as
 * written. A tool's argv and env are expanded per step, a list param
 * spread into one argv item per value ("${param.NAME...}"), a shell tool's
 * values passed as positional parameters, never spliced into the script;
 * a tool that uses no match field is expanded once per rule or asset. */
#include <string.h>

#include "resolve_int.h"

/* ---- template scopes ---- */

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

char *
resolve_expand(struct rs *r, const struct sb *s, const struct match *m,
               int tool_stage, const char *text, const char **bad)
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
int
resolve_tool_uses_match(const kiln_tool *t)
{
	for (size_t i = 0; i < t->nrun; i++)
		if (strstr(t->run[i], "${match.") != NULL)
			return 1;
	for (size_t i = 0; i < t->nenv; i++)
		if (strstr(t->env[i].value, "${match.") != NULL)
			return 1;
	return 0;
}

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
			argv[(*nargv)++] = resolve_expand(r, s, m, 1, t->run[i], bad);
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

void
resolve_tool_expand(struct rs *r, struct sb *s, int *reported,
                    struct tool_memo *memo)
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
		env[i].value = resolve_expand(r, s, m, 1, t->env[i].value, &bad);
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
