/* desc_resolve.c — from loaded description files to one plan per profile.
 *
 * For each profile: its variables (following inherits); one step per
 * source file each applicable rule matches; explicit assets, each replacing
 * a rule's step of the same URL (make's override) and clashing with
 * another asset's; then, per step, its inputs (resolve_inputs.c) and its
 * tool's command line (resolve_tools.c); cycles between steps refused with
 * the cycle printed (plan_graph.c); bundles resolved to URLs, each one
 * more step (resolve_bundles.c). Also the checks that do not depend on the profile:
 * tools defined twice, rules' globs, unknown profile names.
 *
 * Cost: one pass over the source list per rule (skipping files outside the
 * glob's fixed prefix), hash lookups for URLs, no quadratic steps
 * (figures: docs/build.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_int.h"
#include "kiln_store.h"

/* ---- building steps ---- */

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
		out[0] = (kiln_output){"out", slash ? slash + 1 : s->st.url, 0};
		n = 1;
	}
	for (size_t i = 0; i < s->decl_outputs->n; i++) {
		out[i].name = decl[i].name;
		out[i].folder = decl[i].folder;
		out[i].file = resolve_expand(r, NULL, s->has_match ? &s->m : NULL, 0,
		                             decl[i].file, &bad);
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
	vec_init(&s.order, sizeof(kiln_input));
	return vec_push(r->tmp, &r->steps, &s);
}

static void
rule_steps(struct rs *r, const struct desc_rule *ru, kiln_glob *g)
{
	const char *const *files = r->src->files.items;
	const char *prefix = glob_prefix(g);
	const char *where = arena_printf(r->tmp, "rules[%d]", ru->index);
	size_t pl = strlen(prefix), nmatched = 0, idx;

	for (size_t i = resolve_file_range(r->src, prefix); i < r->src->files.n; i++) {
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
		if ((url = resolve_expand(r, NULL, &m, 0, ru->url, &bad)) == NULL) {
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
		s->st.intermediate = ru->intermediate;
		s->where = where;
		s->st.params = ru->params;
		s->toolname = ru->tool;
		s->tool_loc = ru->tool_loc;
		s->decl_inputs = &ru->inputs;
		s->decl_outputs = &ru->outputs;
		s->source = files[i];
		s->m = m;
		s->has_match = 1;
		/* the matched file is ${in}: first, before any of inputs: */
		vec_push(r->tmp, &s->inputs, &files[i]);
		vec_push(r->tmp, &s->order, &(kiln_input){files[i], NULL, NULL});
		if (strmap_put(&r->urls, url, r->steps.n - 1) != 0)
			return; /* r->tmp is marked failed */
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
	s->st.intermediate = as->intermediate;
	s->where = arena_printf(r->tmp, "assets[%d]", as->index);
	s->toolname = as->tool;
	s->tool_loc = as->tool_loc;
	s->decl_inputs = &as->inputs;
	s->decl_outputs = &as->outputs;
	if (strmap_put(&r->urls, as->url, r->steps.n - 1) != 0)
		return; /* r->tmp is marked failed */
	step_outputs(r, s, as->outputs_loc.line ? as->outputs_loc : as->loc, "outputs");
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

/* Variables of a profile, nearest definition first. 0, or KILN_EINVAL
 * after an error (unknown parent, inheritance cycle; reported in r->dg,
 * but for a chain deeper than 32). */
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
				return KILN_EINVAL;
			}
		if (n == 32)
			return KILN_EINVAL;
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
			return KILN_EINVAL;
		}
		q = parent;
	}
	return 0;
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
			resolve_input(r, s, (const struct desc_input *)s->decl_inputs->items + j);
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
			resolve_tool_expand(r, s, &reported[t], &memo);
		}
		s->st.inputs = resolve_sorted_unique(r, &s->inputs, &s->st.ninputs);
		s->st.needs = resolve_sorted_unique(r, &s->needs, &s->st.nneeds);
		s->st.order = resolve_order(r, s, &s->st.norder);
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
	/* bundles match the steps above (never each other) and add theirs */
	if (resolve_bundles(r, plan, &steps, &n) != 0)
		return KILN_ENOMEM;
	plan_cycles(r->dg, steps, n);
	plan_outputs(r->dg, steps, n);
	plan->profile = r->profile;
	plan->steps = steps;
	plan->nsteps = n;
	plan->vars = r->vars.items;
	plan->nvars = r->vars.n;
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
	/* a hint: each rule may make a step of every file; the map grows */
	if (strmap_init(r->tmp, &r->urls, r->src->files.n + r->nassets) != 0 ||
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
			if (strmap_put(&r->tools, t[i].name, r->toolv.n) != 0)
				return KILN_ENOMEM;
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
		goto fail;
	r.tool_reported = arena_alloc(r.a, (r.toolv.n + 1) * sizeof(int));
	r.tool_match = arena_alloc(r.a, (r.toolv.n + 1) * sizeof(int));
	if (r.tool_reported == NULL || r.tool_match == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < r.toolv.n; i++)
		r.tool_match[i] = resolve_tool_uses_match(((const kiln_tool *const *)r.toolv.items)[i]);
	profile_refs(&r);
	for (size_t i = 0; i < rootf->profiles.n && rv == 0; i++) {
		kiln_plan plan = {0};
		if ((rv = resolve_profile(&r, rootf, &profiles[i], &plan)) == 0 && tmp.failed)
			rv = KILN_ENOMEM;
		if (rv == 0 && plan.profile)
			vec_push(r.a, &ps->plans, &plan);
		arena_free(&tmp);
	}
fail:
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
