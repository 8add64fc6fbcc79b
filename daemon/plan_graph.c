/* plan_graph.c — the prerequisite graph of a plan: its steps are sorted by
 * URL and link to others through needs; a cycle would deadlock the build,
 * so every one is reported with its path. */
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
		goto out;
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
out:
	free(color);
	free(stack);
	free(next);
}

