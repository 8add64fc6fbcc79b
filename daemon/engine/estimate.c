/* estimate.c — expected tool times and the critical path in time
 * (estimate.h). A step's estimate is, first, its own last duration (kept
 * in node.hist_ns and in .kiln/durations, durations.c); then what this
 * daemon has learnt of its tool from the runs that finished (per input
 * byte: a texture twice the size takes about twice as long), then a
 * default. cp_ns adds the longest chain of estimates after the step, so
 * that a 16 s compression starts before a hundred 10 ms copies, and a
 * long step that nothing needs is not left to run alone at the end.
 *
 * A tool's cost moves as its runs finish; the paths are computed again
 * (and the heaps reordered) only when it moved by more than a factor of
 * two, or on its first run: a handful of times a tool in a build, not
 * once a step.
 *
 * Threads: e->mu held for everything here (engine_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "durations.h"
#include "kiln_error.h"
#include "estimate.h"
#include "schedule.h"

/* What this daemon has learnt of one tool (e->costs). */
struct tool_cost {
	const kiln_tool *t;
	uint64_t ns, bytes;      /* summed over its finished runs */
	uint32_t n;
	uint64_t used_mean;      /* the mean when the paths were last made */
};

static void
est_log(void *arg, int error, const char *msg)
{
	struct engine *e = arg;

	if (e->cfg.log != NULL)
		e->cfg.log(e->cfg.arg, error, msg);
}

int
est_open(struct engine *e)
{
	return durations_load(e->root, est_log, e, &e->durs);
}

void
est_save(struct engine *e)
{
	int rv = durations_save(e->durs);

	if (rv != 0 && e->cfg.log != NULL) {
		char msg[600];
		snprintf(msg, sizeof msg, "%s/.kiln/durations: not written (%s); the "
		         "next daemon orders its first build by estimates", e->root,
		         kiln_strerror(rv));
		e->cfg.log(e->cfg.arg, 1, msg);
	}
}

void
est_close(struct engine *e)
{
	durations_free(e->durs);
	e->durs = NULL;
	free(e->costs);
	e->costs = NULL;
	e->ncosts = e->capcosts = 0;
}

void
est_graph_init(struct engine *e, struct graph *g)
{
	for (uint32_t i = 0; i < g->n; i++)
		g->nodes[i].hist_ns = durations_get(e->durs, g->profile, g->nodes[i].ks->url);
}

void
est_tools_forget(struct engine *e)
{
	e->ncosts = 0;
}

static struct tool_cost *
cost_of(const struct engine *e, const kiln_tool *t)
{
	for (size_t i = 0; i < e->ncosts; i++)
		if (e->costs[i].t == t)
			return &e->costs[i];
	return NULL;
}

uint64_t
step_estimate_ns(const struct engine *e, const struct node *n)
{
	uint64_t ns = step_estimate_known_ns(e, n);

	return ns > 0 ? ns : EST_DEFAULT_NS;
}

uint64_t
step_estimate_known_ns(const struct engine *e, const struct node *n)
{
	const struct tool_cost *c;
	uint64_t ns;

	if (n->hist_ns > 0)
		return n->hist_ns;
	if (e->ncosts == 0 || (c = cost_of(e, n->ks->tool)) == NULL || c->n == 0)
		return 0;
	if (n->in_bytes > 0 && c->bytes > 0)
		ns = (uint64_t)((unsigned __int128)c->ns * n->in_bytes / c->bytes);
	else
		ns = c->ns / c->n;
	return ns > 0 ? ns : 1;
}

/* n's cp_ns from its dependents' (already made). */
static void
node_path(const struct engine *e, const struct graph *g, struct node *n)
{
	uint64_t after = 0;

	for (uint32_t k = 0; k < n->nrdeps; k++)
		if (g->nodes[n->rdeps[k]].cp_ns > after)
			after = g->nodes[n->rdeps[k]].cp_ns;
	n->cp_ns = step_estimate_ns(e, n) + after;
}

void
est_paths(struct engine *e, struct graph *g)
{
	for (uint32_t i = g->n; i-- > 0;)
		node_path(e, g, &g->nodes[g->topo[i]]);
}

void
est_decided(struct engine *e, struct graph *g, struct node *n)
{
	uint64_t bytes = 0;

	for (size_t i = 0; n->w->seen_in != NULL && i < n->ks->ninputs; i++)
		if (!n->w->seen_in[i].missing)
			bytes += n->w->seen_in[i].rec.size;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t o = 0; o < d->ks->noutputs; o++)
			bytes += d->outs[o].size;
	}
	n->in_bytes = bytes;
	node_path(e, g, n);
}

/* The tool's cost moved: every active graph's paths again, the heaps in
 * their new order. */
static void
paths_again(struct engine *e)
{
	struct graph *done[ENGINE_MAX_BUILDS];
	unsigned ndone = 0;

	for (unsigned i = 0; i < ENGINE_MAX_BUILDS; i++) {
		struct graph *g = e->active[i] != NULL ? e->active[i]->g : NULL;
		unsigned k = 0;
		while (g != NULL && k < ndone && done[k] != g)
			k++;
		if (g == NULL || k < ndone)
			continue;
		done[ndone++] = g;
		est_paths(e, g);
	}
	heap_reorder(&e->ready);
	heap_reorder(&e->runnable);
	heap_reorder(&e->runnable_local);
}

void
est_learn(struct engine *e, struct graph *g, struct node *n, uint64_t ns)
{
	struct tool_cost *c = cost_of(e, n->ks->tool);
	uint64_t mean;

	n->hist_ns = ns;
	durations_set(e->durs, g->profile, n->ks->url, ns);
	if (c == NULL) {
		if (e->ncosts == e->capcosts) {
			size_t ncap = e->capcosts ? 2 * e->capcosts : 16;
			struct tool_cost *nv = realloc(e->costs, ncap * sizeof *nv);
			if (nv == NULL)
				return;   /* not learnt: the default stays */
			e->costs = nv;
			e->capcosts = ncap;
		}
		c = &e->costs[e->ncosts++];
		*c = (struct tool_cost){n->ks->tool, 0, 0, 0, 0};
	}
	c->ns += ns;
	c->bytes += n->in_bytes;
	c->n++;
	mean = c->ns / c->n;
	if (c->used_mean == 0 || mean > 2 * c->used_mean || 2 * mean < c->used_mean) {
		c->used_mean = mean ? mean : 1;
		paths_again(e);
	}
}
