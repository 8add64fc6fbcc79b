/* need_wait.c — kiln need's waiting: the steps a suspended run or a
 * dynamic prerequisite waits on, scheduled for the builds of the waiter
 * (need_schedule_closure, need_join_flush), the waits released when they
 * finish (need_finished), and the cycle check before a run waits
 * (need_cycle_find: A needs B while B, or anything B waits on, waits on
 * A). need.c has the tokens, the requests and the cached result's needs;
 * its opening comment tells the whole story.
 *
 * Threads: everything here runs with e->mu held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "graph.h"
#include "builds.h"
#include "need.h"
#include "schedule.h"

/* ---- waiting and cycles --------------------------------------------------- */

/* A fresh walk over g: the scratch arrays made, a new mark generation.
 * 0 or KILN_ENOMEM. */
static int
walk_start(struct graph *g)
{
	size_t sz = ((size_t)g->n + 1) * sizeof(uint32_t);

	if (g->nmark == NULL) {
		g->nmark = calloc(1, sz);
		g->nparent = malloc(sz);
		g->nstack = malloc(sz);
		g->nsk = malloc(sz);
		if (g->nmark == NULL || g->nparent == NULL || g->nstack == NULL ||
		    g->nsk == NULL) {
			free(g->nmark);
			free(g->nparent);
			free(g->nstack);
			free(g->nsk);
			g->nmark = g->nparent = g->nstack = g->nsk = NULL;
			return KILN_ENOMEM;
		}
		g->ngen = 0;
	}
	if (++g->ngen == 0) {   /* wrapped: forget every old mark */
		memset(g->nmark, 0, sz);
		g->ngen = 1;
	}
	return 0;
}

/* Whether node `to` is reachable from `from` over what keeps a step from
 * finishing: its prerequisites, a suspended run's need, a dynamic
 * prerequisite. g->nparent leads back from `to` to `from`. 1 reachable,
 * 0 not, KILN_ENOMEM. */
static int
reaches(struct engine *e, struct graph *g, uint32_t from, uint32_t to)
{
	uint32_t *mark, *parent, *stack, gen, depth = 0;
	int found = 0;

	if (walk_start(g) != 0)
		return KILN_ENOMEM;
	mark = g->nmark;
	parent = g->nparent;
	stack = g->nstack;
	gen = g->ngen;
	mark[from] = gen;
	parent[from] = from;
	stack[depth++] = from;
	while (depth > 0 && !found) {
		uint32_t x = stack[--depth];
		const struct node *xn = &g->nodes[x];
		if (x != from && need_done(e, xn))
			continue;
		/* the edges out of x: deps, then what its suspended run asked
		 * for, then dynamic waits */
		size_t nd = xn->ndeps;
		size_t no = xn->need_state == NEED_SUSPENDED ? e->nons : 0;
		/* only a node waiting on its needs has dynamic waits */
		size_t nw = xn->st == N_WAITING && xn->nneeds > 0 &&
		            xn->needs_wave == e->wave ? e->ndwait : 0;
		for (size_t k = 0; k < nd + no + nw && !found; k++) {
			uint32_t y;
			if (k < nd)
				y = xn->deps[k];
			else if (k < nd + no && e->ons[k - nd].n == xn &&
			         e->ons[k - nd].err == NULL)
				y = e->ons[k - nd].target;
			else if (k < nd + no)
				continue;
			else if (e->dwait[k - nd - no].g == g &&
			         e->dwait[k - nd - no].waiter == x)
				y = e->dwait[k - nd - no].target;
			else
				continue;
			if (mark[y] == gen)
				continue;
			mark[y] = gen;
			parent[y] = x;
			if (y == to)
				found = 1;
			else
				stack[depth++] = y;
		}
	}
	return found;
}

/* Whether x waits on y for certain: y is its prerequisite or what its
 * suspended run asked for (not merely a need of its last result). */
static int
hard_edge(const struct engine *e, const struct node *x, uint32_t y)
{
	long i;

	for (uint32_t k = 0; k < x->ndeps; k++)
		if (x->deps[k] == y)
			return 1;
	return x->need_state == NEED_SUSPENDED &&
	       (i = need_on_find(e, x, y)) >= 0 && e->ons[i].err == NULL;
}

/* Stop r waiting on its last result's needs and decide it now: what it
 * needs this time may differ (need_prereqs will not wait on what waits on
 * it, and need_check_result then calls the old needs not up to date). */
static void
dwait_release(struct engine *e, struct graph *g, struct node *r)
{
	for (size_t i = 0; i < e->ndwait;) {
		struct need_wait w = e->dwait[i];
		if (w.g != g || w.waiter != r->idx) {
			i++;
			continue;
		}
		e->dwait[i] = e->dwait[--e->ndwait];
		if (g->nodes[w.target].ndwaited > 0)
			g->nodes[w.target].ndwaited--;
	}
	if (r->st == N_WAITING && r->waiting > 0) {
		r->waiting = 0;
		node_make_ready(e, g, r);
	}
}

/* The cycle n -> t -> ... -> n as text, when t reaches n over hard edges.
 * A path through a dynamic prerequisite is no cycle: that waiter's old
 * needs are stale (the descriptions or inputs changed), so it stops
 * waiting on them and is decided again. 1 a cycle (msg set; suspended
 * runs on it get the error too), 0 none, KILN_ENOMEM. */
int
need_cycle_find(struct engine *e, struct graph *g, struct node *n, struct node *t,
                char *msg, size_t len)
{
	uint32_t *path;
	size_t np = 0, at;
	int rv, soft;

	if (t == n) {
		snprintf(msg, len, "need cycle: %s -> %s (a step cannot need itself)",
		         n->ks->url, n->ks->url);
		return 1;
	}
	do {
		if ((rv = reaches(e, g, t->idx, n->idx)) != 1)
			return rv;
		soft = 0;
		for (uint32_t y = n->idx; y != t->idx && !soft; y = g->nparent[y]) {
			struct node *x = &g->nodes[g->nparent[y]];
			if (!hard_edge(e, x, y)) {
				dwait_release(e, g, x);
				soft = 1;
			}
		}
	} while (soft);
	path = g->nsk;   /* reaches leaves it free */
	for (uint32_t x = n->idx; x != t->idx; x = g->nparent[x])
		path[np++] = x;
	path[np++] = t->idx;
	at = (size_t)snprintf(msg, len, "need cycle: %s", n->ks->url);
	for (size_t i = np; i-- > 0 && at < len;)
		at += (size_t)snprintf(msg + at, len - at, " -> %s", g->nodes[path[i]].ks->url);
	if (at < len)
		snprintf(msg + at, len - at, " (each waits on the next: kiln need or "
		         "a declared need)");
	/* path[i] waits on path[i - 1]: the suspended runs' asks get the
	 * error as their answer */
	for (size_t i = 1; i < np; i++) {
		struct node *x = &g->nodes[path[i]];
		long k;
		if (x->need_state == NEED_SUSPENDED &&
		    (k = need_on_find(e, x, path[i - 1])) >= 0 && e->ons[k].err == NULL)
			e->ons[k].err = strdup(msg);  /* NULL: it waits on */
	}
	return 1;
}

/* Whether x is part of build slot s's work already (its closure too). */
static int
in_build(const struct engine *e, const struct node *x, int s)
{
	return x->wave == e->wave && (x->builds >> s & 1) && x->st != N_IDLE &&
	       x->st != N_CANCELLED && x->st != N_SKIPPED;
}

/* Schedule t and everything it needs for every build in bits that does not
 * have it yet. 0 or KILN_ENOMEM. */
int
need_schedule_closure(struct engine *e, struct graph *g, struct node *t, uint64_t bits)
{
	uint32_t *sidx, *sk, *order, *mark, gen;
	size_t depth = 0, no = 0;
	uint64_t want = 0;

	if (walk_start(g) != 0)
		return KILN_ENOMEM;
	sidx = g->nstack;
	sk = g->nsk;
	order = g->nparent;
	mark = g->nmark;
	gen = g->ngen;
	for (int s = 0; s < ENGINE_MAX_BUILDS; s++)
		if ((bits >> s & 1) && e->active[s] != NULL)
			want |= 1ULL << s;
	/* post-order: prerequisites before the steps that need them; a step
	 * every wanted build has already brings its closure along */
	mark[t->idx] = gen;
	sidx[depth] = t->idx;
	sk[depth++] = 0;
	while (depth > 0) {
		const struct node *x = &g->nodes[sidx[depth - 1]];
		if (sk[depth - 1] < x->ndeps) {
			uint32_t y = x->deps[sk[depth - 1]++];
			int have_all = 1;
			for (int s = 0; s < ENGINE_MAX_BUILDS && have_all; s++)
				if (want >> s & 1)
					have_all = in_build(e, &g->nodes[y], s);
			if (mark[y] != gen && !have_all) {
				mark[y] = gen;
				sidx[depth] = y;
				sk[depth++] = 0;
			}
			continue;
		}
		order[no++] = x->idx;
		depth--;
	}
	for (int s = 0; s < ENGINE_MAX_BUILDS; s++) {
		struct build *b = e->active[s];
		if (!(want >> s & 1))
			continue;
		for (size_t i = 0; i < no; i++) {
			struct node *x = &g->nodes[order[i]];
			if (in_build(e, x, s))
				continue;
			b->total++;
			node_schedule(e, g, x, b);
		}
	}
	need_join_flush(e);
	pthread_cond_broadcast(&e->cv);
	return 0;
}

void
need_join(struct engine *e, const struct node *n)
{
	if (n->need_state == NEED_SUSPENDED ||
	    (n->st == N_WAITING && n->nneeds > 0 && n->needs_wave == e->wave))
		e->need_joined = 1;
}

void
need_join_flush(struct engine *e)
{
	struct need_wait *snap = NULL;
	size_t nsnap, capsnap = 0;

	if (e->need_flushing)
		return;   /* need_schedule_closure below: the loop goes on */
	e->need_flushing = 1;
	while (e->need_joined) {
		e->need_joined = 0;
		/* need_schedule_closure adds only what a build lacks: a step every
		 * build of its waiter has already costs one look */
		for (size_t i = 0; i < e->nons; i++) {
			struct need_on *o = &e->ons[i];
			if (o->n->need_state == NEED_SUSPENDED && o->err == NULL &&
			    o->n->builds != 0)
				need_schedule_closure(e, o->g, &o->g->nodes[o->target], o->n->builds);
		}
		/* what need_schedule_closure finishes leaves e->dwait: walk a copy */
		if (e->ndwait == 0)
			continue;
		if (e->ndwait > capsnap) {
			struct need_wait *nv = realloc(snap, e->ndwait * sizeof *nv);
			if (nv == NULL)
				break;   /* the waiters' builds do not get them: the
				          * waiters are decided after a cancel */
			snap = nv;
			capsnap = e->ndwait;
		}
		nsnap = e->ndwait;
		memcpy(snap, e->dwait, nsnap * sizeof *snap);
		for (size_t i = 0; i < nsnap; i++) {
			struct node *w = &snap[i].g->nodes[snap[i].waiter];
			if (w->st == N_WAITING && w->builds != 0)
				need_schedule_closure(e, snap[i].g, &snap[i].g->nodes[snap[i].target],
				                 w->builds);
		}
	}
	free(snap);
	e->need_flushing = 0;
}

int
need_dep_resolve(const struct graph *g, struct need_dep *d)
{
	uint32_t at;

	d->out = -1;
	if (!step_index(g->plan, d->url, &at))
		return 0;
	for (size_t k = 0; k < g->nodes[at].ks->noutputs; k++)
		if (strcmp(g->nodes[at].ks->outputs[k].name, d->output) == 0) {
			d->idx = at;
			d->out = (int)k;
			return 1;
		}
	return 0;
}

int
need_prereqs(struct engine *e, struct graph *g, struct node *n)
{
	uint32_t waits = 0;

	n->needs_wave = e->wave;
	for (size_t i = 0; i < n->nneeds; i++) {
		struct need_dep *d = &n->needs[i];
		struct node *t;
		int dup = 0;
		memset(&d->cur, 0, sizeof d->cur);
		if (d->out < 0 && !need_dep_resolve(g, d))
			continue;  /* gone: the cache check says so */
		if ((t = &g->nodes[d->idx]) == n)
			continue;
		if (need_done(e, t)) {
			if (t->st == N_DONE)
				d->cur = t->outs[d->out].id;
			continue;
		}
		for (size_t k = 0; k < e->ndwait && !dup; k++)
			dup = e->dwait[k].g == g && e->dwait[k].waiter == n->idx &&
			      e->dwait[k].target == t->idx;
		if (dup)
			continue;
		/* waiting on something that waits on n (the descriptions
		 * changed since): decide n now; its run meets the cycle */
		if (reaches(e, g, t->idx, n->idx) != 0)
			continue;
		if (e->ndwait == e->capdwait) {
			size_t ncap = e->capdwait ? e->capdwait * 2 : 16;
			struct need_wait *nv = realloc(e->dwait, ncap * sizeof *nv);
			if (nv == NULL)
				continue;
			e->dwait = nv;
			e->capdwait = ncap;
		}
		if (need_schedule_closure(e, g, t, n->builds) != 0)
			continue;
		if (need_done(e, t)) {  /* settled at once (skipped) */
			if (t->st == N_DONE)
				d->cur = t->outs[d->out].id;
			continue;
		}
		e->dwait[e->ndwait++] = (struct need_wait){g, n->idx, t->idx};
		t->ndwaited++;
		waits++;
	}
	if (waits > 0) {
		n->st = N_WAITING;
		n->waiting = waits;
	}
	return waits > 0;
}

void
need_finished(struct engine *e, struct graph *g, struct node *n)
{
	/* most nodes are in no entry: no walk */
	if (n->ndwaited == 0 && (n->nneeds == 0 || n->needs_wave != e->wave))
		return;
	for (size_t i = 0; i < e->ndwait;) {
		struct need_wait w = e->dwait[i];
		if (w.g != g || (w.target != n->idx && w.waiter != n->idx)) {
			i++;
			continue;
		}
		e->dwait[i] = e->dwait[--e->ndwait];
		if (g->nodes[w.target].ndwaited > 0)
			g->nodes[w.target].ndwaited--;
		if (w.target == n->idx && w.waiter != n->idx) {
			struct node *r = &g->nodes[w.waiter];
			if (r->wave == e->wave && r->st == N_WAITING && r->waiting > 0 &&
			    --r->waiting == 0)
				node_make_ready(e, g, r);
		}
	}
}
