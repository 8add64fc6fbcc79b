/* stepgraph.c — the step graph of `kiln graph` (stepgraph.h).
 *
 * Dependencies arrive as (step, name, kind) triples while the caller asks
 * the daemon about each step; the file nodes are only known once all have
 * arrived, so triples are kept as they come and turned into nodes and
 * edges by graph_finish: steps are the plan's (found by binary search on a
 * sorted index), files the distinct names left over, sorted. */
#include <stdlib.h>
#include <string.h>

#include "stepgraph.h"
#include "glob.h"
#include "kiln_error.h"

struct raw {
	size_t to;             /* step index */
	char *name;
	enum gedge_kind kind;
	int missing;
};

struct graph {
	const kiln_plan *plan;
	size_t *by_url;        /* step indexes sorted by URL */
	struct raw *raws;
	size_t nraws, rawcap;
	struct gnode *nodes;
	size_t nnodes;
	struct gedge *edges;
	size_t nedges;
};

static int
url_cmp(const void *a, const void *b, void *plan)
{
	const kiln_step *steps = ((const kiln_plan *)plan)->steps;

	return strcmp(steps[*(const size_t *)a].url, steps[*(const size_t *)b].url);
}

int
graph_new(const kiln_plan *plan, struct graph **gp)
{
	struct graph *g = calloc(1, sizeof(*g));

	*gp = NULL;
	if (g == NULL)
		return KILN_ENOMEM;
	g->plan = plan;
	g->nnodes = plan->nsteps;
	g->by_url = calloc(plan->nsteps + 1, sizeof(*g->by_url));
	g->nodes = calloc(plan->nsteps + 1, sizeof(*g->nodes));
	if (g->by_url == NULL || g->nodes == NULL) {
		graph_free(g);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < plan->nsteps; i++) {
		g->by_url[i] = i;
		g->nodes[i].name = plan->steps[i].url;
		g->nodes[i].kind = GN_STEP;
		g->nodes[i].step = &plan->steps[i];
	}
	qsort_r(g->by_url, plan->nsteps, sizeof(*g->by_url), url_cmp,
	        (void *)plan);
	*gp = g;
	return 0;
}

void
graph_free(struct graph *g)
{
	if (g == NULL)
		return;
	for (size_t i = 0; i < g->nraws; i++)
		free(g->raws[i].name);
	for (size_t i = g->plan->nsteps; i < g->nnodes; i++)
		free((char *)g->nodes[i].name);
	free(g->raws);
	free(g->by_url);
	free(g->nodes);
	free(g->edges);
	free(g);
}

/* The index of step url, or (size_t)-1. */
static size_t
gstep_find(const struct graph *g, const char *url)
{
	size_t lo = 0, hi = g->plan->nsteps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(url, g->plan->steps[g->by_url[mid]].url);
		if (c == 0)
			return g->by_url[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (size_t)-1;
}

static int
is_step_edge(enum gedge_kind k)
{
	return k == GE_PREREQ || k == GE_NEED;
}

int
graph_add(struct graph *g, const char *url, const char *name,
          enum gedge_kind kind, int missing)
{
	size_t to = gstep_find(g, url);
	struct raw *r;

	if (to == (size_t)-1 || (is_step_edge(kind) && gstep_find(g, name) == (size_t)-1))
		return KILN_ENOTFOUND;
	if (g->nraws == g->rawcap) {
		size_t cap = g->rawcap ? 2 * g->rawcap : 64;
		struct raw *v = realloc(g->raws, cap * sizeof(*v));
		if (v == NULL)
			return KILN_ENOMEM;
		g->raws = v;
		g->rawcap = cap;
	}
	r = &g->raws[g->nraws];
	if ((r->name = strdup(name)) == NULL)
		return KILN_ENOMEM;
	r->to = to;
	r->kind = kind;
	r->missing = missing;
	g->nraws++;
	return 0;
}

void
graph_state(struct graph *g, const char *url, enum gstate state)
{
	size_t i = gstep_find(g, url);

	if (i != (size_t)-1)
		g->nodes[i].state = state;
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct file names of the raw edges, sorted, into *files. */
static int
files_collect(const struct graph *g, char ***files, size_t *n)
{
	char **v = calloc(g->nraws + 1, sizeof(*v));
	size_t k = 0, m = 0;

	if (v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < g->nraws; i++)
		if (!is_step_edge(g->raws[i].kind))
			v[k++] = g->raws[i].name;
	qsort(v, k, sizeof(*v), str_cmp);
	for (size_t i = 0; i < k; i++)
		if (m == 0 || strcmp(v[m - 1], v[i]) != 0)
			v[m++] = v[i];
	*files = v;
	*n = m;
	return 0;
}

static size_t
gfile_find(char *const *files, size_t n, const char *name)
{
	char *const *p = bsearch(&name, files, n, sizeof(*files), str_cmp);

	return p == NULL ? (size_t)-1 : (size_t)(p - files);
}

static int
edge_cmp(const void *a, const void *b)
{
	const struct gedge *x = a, *y = b;

	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return (int)x->kind - (int)y->kind;
}

int
graph_finish(struct graph *g)
{
	size_t nsteps = g->plan->nsteps, nfiles, m = 0;
	struct gnode *nodes;
	char **files;
	int rv;

	if ((rv = files_collect(g, &files, &nfiles)) != 0)
		return rv;
	nodes = realloc(g->nodes, (nsteps + nfiles + 1) * sizeof(*nodes));
	g->edges = calloc(g->nraws + 1, sizeof(*g->edges));
	if (nodes != NULL)
		g->nodes = nodes;
	if (nodes == NULL || g->edges == NULL) {
		free(files);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < nfiles; i++) {
		/* the raw edges keep their names: each node takes its own */
		memset(&g->nodes[nsteps + i], 0, sizeof(*g->nodes));
		if ((g->nodes[nsteps + i].name = strdup(files[i])) == NULL) {
			free(files);
			return KILN_ENOMEM;
		}
		g->nodes[nsteps + i].kind = GN_FILE;
		g->nnodes++;
	}
	for (size_t i = 0; i < g->nraws; i++) {
		const struct raw *r = &g->raws[i];
		struct gedge *e = &g->edges[g->nedges++];
		e->to = r->to;
		e->kind = r->kind;
		e->from = is_step_edge(r->kind) ? gstep_find(g, r->name)
		          : nsteps + gfile_find(files, nfiles, r->name);
		if (r->missing && !is_step_edge(r->kind))
			g->nodes[e->from].missing = 1;
	}
	free(files);
	qsort(g->edges, g->nedges, sizeof(*g->edges), edge_cmp);
	for (size_t i = 0; i < g->nedges; i++)
		if (m == 0 || g->edges[m - 1].to != g->edges[i].to ||
		    g->edges[m - 1].from != g->edges[i].from)
			g->edges[m++] = g->edges[i]; /* the first: the declared kind */
	g->nedges = m;
	return 0;
}

/* Mark the nodes a pattern names; 1 when it named any. */
static int
seeds_mark(struct graph *g, const char *pattern)
{
	kiln_glob *glob = NULL;
	int found = 0;

	/* a name glob refuses (an absolute path) is still a name */
	if (glob_compile(pattern, &glob, NULL) != 0)
		glob = NULL;
	for (size_t i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].name, pattern) == 0 ||
		    (glob != NULL && glob_match(glob, g->nodes[i].name))) {
			g->nodes[i].keep = 1;
			found = 1;
		}
	glob_free(glob);
	return found;
}

int
graph_select(struct graph *g, char *const *patterns, size_t n, int rdeps,
             const char **bad)
{
	int changed = 1;

	*bad = NULL;
	for (size_t i = 0; i < g->nnodes; i++)
		g->nodes[i].keep = n == 0;
	for (size_t i = 0; i < n; i++)
		if (!seeds_mark(g, patterns[i])) {
			*bad = patterns[i];
			return KILN_ENOTFOUND;
		}
	/* spread along the edges until nothing changes: as many passes as
	 * the longest chain, each linear in the edges */
	while (changed) {
		changed = 0;
		for (size_t i = 0; i < g->nedges; i++) {
			size_t src = rdeps ? g->edges[i].from : g->edges[i].to;
			size_t dst = rdeps ? g->edges[i].to : g->edges[i].from;
			if (g->nodes[src].keep && !g->nodes[dst].keep)
				changed = g->nodes[dst].keep = 1;
		}
	}
	return 0;
}

const struct gnode *
graph_nodes(const struct graph *g, size_t *n)
{
	*n = g->nnodes;
	return g->nodes;
}

const struct gedge *
graph_edges(const struct graph *g, size_t *n)
{
	*n = g->nedges;
	return g->edges;
}
