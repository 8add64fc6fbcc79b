/* plan_graph.c — the prerequisite graph of a plan: its steps are sorted by
 * URL and link to others through needs; a cycle would deadlock the build,
 * so every one is reported with its path. And where the plan's outputs
 * land in build/<profile>/: two on one file, a file where another's
 * folder goes, or one on the index map's own name would overwrite each
 * other, so `kiln check` says so as the build would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desc_int.h"

/* The step with this URL in the URL-sorted array; 0 when there is none. */
int
step_find(const kiln_step *steps, size_t n, const char *url, size_t *at)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(steps[mid].url, url);
		if (c == 0) {
			*at = mid;
			return 1;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

void
plan_cycles(diags *dg, const kiln_step *steps, size_t n)
{
	unsigned char *color = calloc(n ? n : 1, 1);
	size_t *stack = malloc((n ? n : 1) * sizeof *stack);
	size_t *next = calloc(n ? n : 1, sizeof *next);

	if (color == NULL || stack == NULL || next == NULL)
		goto fail;
	for (size_t root = 0; root < n; root++) {
		size_t sp = 0;
		if (color[root])
			continue;
		stack[sp++] = root;
		color[root] = 1;
		while (sp > 0) {
			size_t v = stack[sp - 1], w;
			if (next[v] == steps[v].nneeds) {
				color[v] = 2;
				sp--;
				continue;
			}
			if (!step_find(steps, n, steps[v].needs[next[v]++], &w))
				continue;
			if (color[w] == 0) {
				color[w] = 1;
				stack[sp++] = w;
			} else if (color[w] == 1) {
				char buf[900] = "";
				size_t from = sp;
				while (from > 0 && stack[from - 1] != w)
					from--;
				for (size_t k = from - 1; k < sp && strlen(buf) < 700; k++)
					snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s -> ",
					         steps[stack[k]].url);
				snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s",
				         steps[w].url);
				diag_add(dg, KILN_DIAG_ERROR, steps[w].loc, "",
				         "cycle between assets: %s", buf);
				color[w] = 2; /* report each cycle once */
			}
		}
	}
fail:
	free(color);
	free(stack);
	free(next);
}


/* One output's place under build/<profile>/: <folder of the URL>/<file>. */
struct outplace {
	char *path;
	const kiln_step *st;
};

static int
outplace_cmp(const void *a, const void *b)
{
	return strcmp(((const struct outplace *)a)->path, ((const struct outplace *)b)->path);
}

static char *
outplace_path(const kiln_step *st, size_t k)
{
	const char *slash = strrchr(st->url, '/');
	char *p = NULL;

	if (slash == NULL)
		return strdup(st->outputs[k].file);
	if (asprintf(&p, "%.*s/%s", (int)(slash - st->url), st->url, st->outputs[k].file) < 0)
		return NULL;
	return p;
}

void
plan_outputs(diags *dg, const kiln_step *steps, size_t n)
{
	struct outplace *v;
	size_t nv = 0, cap = 0;

	for (size_t i = 0; i < n; i++)
		cap += steps[i].noutputs;
	if ((v = calloc(cap + 1, sizeof *v)) == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < steps[i].noutputs; k++)
			if ((v[nv].path = outplace_path(&steps[i], k)) != NULL)
				v[nv++].st = &steps[i];
	qsort(v, nv, sizeof *v, outplace_cmp);
	for (size_t i = 0; i < nv; i++) {
		const struct outplace *a = &v[i], *b = i + 1 < nv ? &v[i + 1] : NULL;
		size_t la = strlen(a->path);
		if (strcmp(a->path, "kiln-index.txt") == 0)
			diag_add(dg, KILN_DIAG_ERROR, a->st->loc, "",
			         "%s: its output would be build/<profile>/kiln-index.txt, "
			         "the index map's own file", a->st->url);
		else if (b != NULL && (strcmp(a->path, b->path) == 0 ||
		         (strncmp(a->path, b->path, la) == 0 && b->path[la] == '/')))
			diag_add(dg, KILN_DIAG_ERROR, a->st->loc, "",
			         "%s and %s (%s:%d): outputs collide in build/ (%s and %s); "
			         "rename an output or a URL", a->st->url, b->st->url,
			         b->st->loc.file ? b->st->loc.file : "?", b->st->loc.line,
			         a->path, b->path);
	}
	for (size_t i = 0; i < nv; i++)
		free(v[i].path);
	free(v);
}
