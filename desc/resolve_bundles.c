/* resolve_bundles.c — a profile's bundles, and the step that packs each.
 *
 * A bundle's patterns (URLs or URL globs, each optionally with #output)
 * are matched against the profile's steps; each match brings every output
 * of the step, or the one #output names. The entries, in the order the
 * patterns are written (a glob's matches by URL, a step's outputs in their
 * declared order, each entry once), become one more step of the plan:
 * URL bundles/<name>, the built-in tool kiln_bundle_tool (the engine packs
 * it, bundle_build.c), the entries' steps as prerequisites and the entries
 * as its ordered inputs, outputs <name>.kpak, <name>.h and, with
 * manifest, <name>.json. A bundle never matches another bundle's step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolve_int.h"

/* The one built-in tool of bundles: no program, no command line. Its
 * version is the kpak format's (docs/bundles.md): a new layout rebuilds
 * every bundle. */
static const kiln_tool kiln_bundle_tool = {
	.name = "kiln-bundle",
	.version = "kpak 2",
	.notrace = 1,
	.builtin = KILN_BUILTIN_BUNDLE,
};

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

/* What a bundle is being made of. */
struct entries {
	vec order;          /* kiln_input */
	vec urls;           /* const char *: the entries' steps */
	struct strmap seen; /* "url#output" of each entry */
};

/* Add output k of step st, once. */
static void
entry_add(struct rs *r, struct entries *es, const kiln_step *st, size_t k)
{
	const char *key = arena_printf(r->tmp, "%s#%s", st->url, st->outputs[k].name);
	kiln_input in = {NULL, st->url, st->outputs[k].name};
	size_t v;

	if (key == NULL || strmap_get(&es->seen, key, &v) ||
	    strmap_put(&es->seen, key, es->order.n) != 0)
		return; /* out of memory: r->tmp is marked failed */
	vec_push(r->a, &es->order, &in);
	vec_push(r->tmp, &es->urls, &st->url);
}

/* Step st matched pattern in (whose #output is out, NULL: all). */
static void
entry_step(struct rs *r, const struct desc_bundle *b, const struct desc_input *in,
           const char *out, const kiln_step *st, struct entries *es)
{
	size_t k;

	for (k = 0; k < st->noutputs; k++) {
		if (out != NULL && strcmp(st->outputs[k].name, out) != 0)
			continue;
		/* a bundle's entry is one file's bytes; a folder's blob is its
		 * listing, which no game asks for */
		if (st->outputs[k].folder)
			diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "bundle '%s': '%s': "
			         "output '%s' of step '%s' is a folder; a bundle takes files",
			         b->name, in->text, st->outputs[k].name, st->url);
		else
			entry_add(r, es, st, k);
		if (out != NULL)
			return;
	}
	if (out == NULL)
		return;
	char have[300] = "";
	for (size_t i = 0; i < st->noutputs && strlen(have) < 200; i++)
		snprintf(have + strlen(have), sizeof have - strlen(have), "%s'%s'", i ? ", " : "",
		         st->outputs[i].name);
	diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "bundle '%s': '%s': step '%s' "
	         "has no output '%s' (its outputs: %s)", b->name, in->text, st->url, out, have);
}

/* One pattern of bundle b matched against the steps. */
static void
entry_pattern(struct rs *r, const struct desc_bundle *b, const struct desc_input *in,
              const kiln_step *steps, size_t n, struct entries *es)
{
	char *url = arena_strdup(r->tmp, in->text), *out;
	const char *why, *pre;
	kiln_glob *g;
	size_t matched = 0;

	if (url == NULL)
		return;
	if ((out = strchr(url, '#')) != NULL)
		*out++ = '\0';
	if (glob_compile(url, &g, &why) != 0) {
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': %s", in->text,
		         why ? why : "malformed pattern");
		return;
	}
	pre = glob_prefix(g);
	for (size_t k = first_with_prefix(steps, n, pre);
	     k < n && strncmp(steps[k].url, pre, strlen(pre)) == 0; k++)
		if (glob_match(g, steps[k].url)) {
			entry_step(r, b, in, out, &steps[k], es);
			matched++;
		}
	if (matched == 0)
		diag_add(r->dg, glob_is_literal(g) ? KILN_DIAG_ERROR : KILN_DIAG_WARNING,
		         in->loc, in->field, glob_is_literal(g)
		         ? "bundle '%s' names unknown URL '%s' in profile '%s'"
		         : "bundle '%s': '%s' matches no URL in profile '%s'",
		         b->name, url, r->profile);
	glob_free(g);
}

/* Bundle b's step, with its entries es, into *st. */
static int
bundle_step(struct rs *r, const kiln_bundle_plan *bp, struct entries *es, kiln_step *st)
{
	size_t nout = bp->manifest ? 3 : 2;
	kiln_output *outs = arena_alloc(r->a, nout * sizeof *outs);
	const char **argv = arena_alloc(r->a, 4 * sizeof *argv);

	memset(st, 0, sizeof *st);
	if (outs == NULL || argv == NULL)
		return KILN_ENOMEM;
	outs[0] = (kiln_output){.name = "bundle", .file = arena_printf(r->a, "%s.kpak", bp->name)};
	outs[1] = (kiln_output){.name = "header", .file = arena_printf(r->a, "%s.h", bp->name)};
	if (bp->manifest)
		outs[2] = (kiln_output){.name = "manifest",
		                        .file = arena_printf(r->a, "%s.json", bp->name)};
	/* what `kiln desc` shows; in the action key with the options too */
	argv[0] = "kiln-bundle";
	argv[1] = arena_printf(r->a, "--align=%u", bp->align);
	argv[2] = bp->compress == KILN_COMPRESS_ZSTD ? "--compress=zstd" : "--compress=none";
	argv[3] = bp->manifest ? "--manifest" : "--no-manifest";
	st->url = arena_printf(r->a, "bundles/%s", bp->name);
	st->tool = &kiln_bundle_tool;
	st->argv = argv;
	st->nargv = 4;
	st->needs = bp->urls;
	st->nneeds = bp->nurls;
	st->order = es->order.items;
	st->norder = es->order.n;
	st->outputs = outs;
	st->noutputs = nout;
	st->loc = bp->loc;
	st->bundle = bp;
	return r->a->failed || st->url == NULL ? KILN_ENOMEM : 0;
}

static int
step_cmp(const void *a, const void *b)
{
	return strcmp(((const kiln_step *)a)->url, ((const kiln_step *)b)->url);
}

/* Whether bundle b may be made: its name is new and its URL no step's
 * (else an error). */
static int
bundle_url_free(struct rs *r, const struct desc_bundle *b, const kiln_step *steps,
                size_t n, const vec *made)
{
	const char *url = arena_printf(r->tmp, "bundles/%s", b->name);
	const kiln_bundle_plan *bp = made->items;
	size_t at;

	for (size_t i = 0; url != NULL && i < made->n; i++)
		if (strcmp(bp[i].name, b->name) == 0) {
			diag_add(r->dg, KILN_DIAG_ERROR, b->loc, arena_printf(r->a, "bundles.%s",
			         b->name), "bundle '%s' is already defined at %s:%d", b->name,
			         bp[i].loc.file, bp[i].loc.line);
			return 0;
		}
	if (url != NULL && step_find(steps, n, url, &at)) {
		diag_add(r->dg, KILN_DIAG_ERROR, b->loc, arena_printf(r->a, "bundles.%s",
		         b->name), "bundle '%s' builds URL '%s', which the %s at %s:%d "
		         "builds too in profile '%s' (rename one)", b->name, url,
		         steps[at].from_rule ? "rule" : "asset", steps[at].loc.file,
		         steps[at].loc.line, r->profile);
		return 0;
	}
	return url != NULL;
}

int
resolve_bundles(struct rs *r, kiln_plan *plan, kiln_step **steps, size_t *n)
{
	size_t nall;
	vec made, ents;
	kiln_step *all;

	vec_init(&made, sizeof(kiln_bundle_plan));
	vec_init(&ents, sizeof(struct entries));
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_bundle *b = r->files[f]->bundles.items;
		for (size_t i = 0; i < r->files[f]->bundles.n; i++) {
			kiln_bundle_plan bp = {b[i].name, NULL, 0, b[i].align, b[i].compress,
			                       b[i].manifest, b[i].loc};
			struct entries es;
			if (!bundle_url_free(r, &b[i], *steps, *n, &made))
				continue;
			vec_init(&es.order, sizeof(kiln_input));
			vec_init(&es.urls, sizeof(const char *));
			/* starts small and grows with the entries (sized
			 * for all the plan's outputs, as it once was, n
			 * bundles cost n times the plan's outputs) */
			if (strmap_init(r->tmp, &es.seen, 64) != 0)
				return KILN_ENOMEM;
			for (size_t j = 0; j < b[i].patterns.n; j++)
				entry_pattern(r, &b[i], (const struct desc_input *)b[i].patterns.items + j,
				              *steps, *n, &es);
			bp.urls = resolve_sorted_unique(r, &es.urls, &bp.nurls);
			vec_push(r->a, &made, &bp);
			vec_push(r->tmp, &ents, &es);
		}
	}
	if (r->a->failed || r->tmp->failed)
		return KILN_ENOMEM;
	plan->bundles = made.items;
	plan->nbundles = made.n;
	if (made.n == 0)
		return 0;
	/* the plan's steps stay URL-sorted with the bundles' among them */
	nall = *n + made.n;
	if ((all = arena_alloc(r->a, nall * sizeof *all)) == NULL)
		return KILN_ENOMEM;
	memcpy(all, *steps, *n * sizeof *all);
	for (size_t i = 0; i < made.n; i++)
		if (bundle_step(r, &plan->bundles[i], (struct entries *)ents.items + i,
		                &all[*n + i]) != 0)
			return KILN_ENOMEM;
	qsort(all, nall, sizeof *all, step_cmp);
	*steps = all;
	*n = nall;
	return 0;
}
