/* snapshot.c — engine_snapshot: every step's state and outputs now, for a
 * subscriber starting up (an editor learning what is built and where).
 *
 * Taken under e->mu, the lock a step's end holds while it publishes its
 * StepEvent (schedule.c, node_finish): a step is either finished before
 * the snapshot (its state here, its event before the caller's cursor) or
 * after it (its event after the cursor), never both, never neither. The
 * caller takes its cursor in at(), under the same lock.
 *
 * Where a step's outputs come from: its result in the graph (n->have)
 * when this daemon decided it and no worker holds it; else the store's
 * index, read on one LMDB snapshot under the lock too (the index changes
 * only when a step's new result is committed, after its event): a step
 * this daemon has not decided yet, one whose last run failed (its last
 * good outputs), one being decided or run now (the result before).
 *
 * Threads: any; takes e->mu. */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "graph.h"
#include "step.h"

/* The index entries of one profile, sorted by URL ("url" or "url#name"). */
struct idx_map {
	/* url: an offset into strs while loading, then a pointer */
	struct idx_ent { union { size_t off; const char *p; } url; kiln_id id; } *v;
	size_t n, cap;
	char *strs;
	size_t len, caplen;
	int loaded, oom;
};

/* Append s (with its NUL) to *buf; its offset, or SIZE_MAX (no memory). */
static size_t
buf_str(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s) + 1, at = *len;

	if (*len + n > *cap) {
		size_t ncap = (*len + n) * 2;
		char *nb = realloc(*buf, ncap);
		if (nb == NULL)
			return SIZE_MAX;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + at, s, n);
	*len += n;
	return at;
}

/* Make room for one more element of size sz in *v (n used, cap). */
static int
grow(void **v, size_t n, size_t *cap, size_t sz)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 256;
	if ((nv = realloc(*v, ncap * sz)) == NULL)
		return KILN_ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

static int
idx_add(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	struct idx_map *m = arg;
	size_t at;

	(void)profile;
	if (grow((void **)&m->v, m->n, &m->cap, sizeof *m->v) != 0 ||
	    (at = buf_str(&m->strs, &m->len, &m->caplen, url)) == SIZE_MAX) {
		m->oom = 1;
		return KILN_ENOMEM;
	}
	m->v[m->n] = (struct idx_ent){.url.off = at, .id = *id};
	m->n++;
	return 0;
}

static int
idx_cmp(const void *a, const void *b)
{
	return strcmp(((const struct idx_ent *)a)->url.p,
	              ((const struct idx_ent *)b)->url.p);
}

/* Read profile's index entries into m, once. 0 or KILN_ENOMEM; a store
 * error leaves m empty (the steps show no outputs rather than none). */
static int
idx_load(struct engine *e, const char *profile, struct idx_map *m)
{
	if (m->loaded)
		return m->oom ? KILN_ENOMEM : 0;
	m->loaded = 1;
	kiln_store_index_list(e->s, profile, NULL, idx_add, m);
	if (m->oom)
		return KILN_ENOMEM;
	/* LMDB's key order is the URL's bytes' order already; sorted again
	 * so that the search below does not depend on the key layout */
	for (size_t i = 0; i < m->n; i++)
		m->v[i].url.p = m->strs + m->v[i].url.off;
	if (m->n > 1)
		qsort(m->v, m->n, sizeof *m->v, idx_cmp);
	return 0;
}

static void
idx_free(struct idx_map *m)
{
	free(m->v);
	free(m->strs);
	memset(m, 0, sizeof *m);
}

/* The index's blob for url, or NULL. */
static const kiln_id *
idx_find(const struct idx_map *m, const char *url)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(url, m->v[mid].url.p);
		if (c == 0)
			return &m->v[mid].id;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Whether a worker holds n's result fields now (engine_int.h): they are
 * not read then, the index stands for them. */
static int
node_in_flux(const struct node *n)
{
	return n->st == N_EVAL || n->st == N_RUNNABLE || n->st == N_RUNNING ||
	       n->finishing;
}

static int
node_building(const struct node *n)
{
	return n->st == N_WAITING || n->st == N_READY || node_in_flux(n);
}

/* A string into s->strs as a 32-bit offset; -1 when out of memory. */
static int64_t
snap_str(struct engine_snap *s, const char *str)
{
	size_t at = buf_str(&s->strs, &s->len, &s->caplen, str ? str : "");

	return at == SIZE_MAX || at > UINT32_MAX ? -1 : (int64_t)at;
}

/* n's outputs into s: its result's, or the index's (m). */
static int
snap_outputs(struct engine *e, struct engine_snap *s, const struct graph *g,
             const struct node *n, struct idx_map *m, struct engine_snap_step *st)
{
	/* in flux first: n->have is the worker's then, not to be read */
	int from_graph = !node_in_flux(n) && n->have;
	char url[600];
	int rv;

	st->out0 = (uint32_t)s->nouts;
	for (size_t k = 0; k < n->ks->noutputs; k++) {
		struct engine_snap_out o = {.size = UINT64_MAX};
		int64_t name, path;
		if (from_graph) {
			o.id = n->outs[k].id;
			o.size = n->outs[k].size;
		} else {
			const kiln_id *id;
			if ((rv = idx_load(e, g->profile, m)) != 0)
				return rv;
			step_output_url(n, k, url, sizeof url);
			if ((id = idx_find(m, url)) == NULL)
				continue;
			o.id = *id;
		}
		if ((name = snap_str(s, n->ks->outputs[k].name)) < 0 ||
		    (path = snap_str(s, n->outpaths[k])) < 0 ||
		    grow((void **)&s->outs, s->nouts, &s->capouts, sizeof *s->outs) != 0)
			return KILN_ENOMEM;
		o.name = (uint32_t)name;
		o.path = (uint32_t)path;
		s->outs[s->nouts++] = o;
	}
	st->nouts = (uint32_t)(s->nouts - st->out0);
	return 0;
}

/* The state a snapshot gives n with nouts outputs found. */
static uint8_t
snap_state(const struct node *n, uint32_t nouts)
{
	if (!node_in_flux(n)) {
		if (n->st == N_FAILED)
			return SNAP_FAILED;
		if (n->st == N_SKIPPED)
			return SNAP_SKIPPED;
		if (n->st == N_CANCELLED)
			return SNAP_CANCELLED;
	}
	return nouts > 0 ? SNAP_BUILT : SNAP_NOT_BUILT;
}

/* The steps of g that pass into s. */
static int
snap_graph(struct engine *e, struct graph *g, struct engine_snap *s,
           int (*pass)(void *, const char *, const char *), void *pass_arg)
{
	struct idx_map m = {0};
	int64_t prof = -1, url, error;
	int rv = 0;

	for (uint32_t i = 0; i < g->n && rv == 0; i++) {
		const struct node *n = &g->nodes[i];
		struct engine_snap_step st = {0};
		if (pass != NULL && !pass(pass_arg, g->profile, n->ks->url))
			continue;
		if ((prof < 0 && (prof = snap_str(s, g->profile)) < 0) ||
		    (url = snap_str(s, n->ks->url)) < 0 ||
		    grow((void **)&s->steps, s->n, &s->cap, sizeof *s->steps) != 0) {
			rv = KILN_ENOMEM;
			break;
		}
		st.profile = (uint32_t)prof;
		st.url = (uint32_t)url;
		if ((rv = snap_outputs(e, s, g, n, &m, &st)) != 0)
			break;
		st.state = snap_state(n, st.nouts);
		st.building = (uint8_t)node_building(n);
		/* an audit sets and frees the errors of the nodes it runs,
		 * unlocked: none is read meanwhile */
		if (st.state == SNAP_FAILED && n->error != NULL && !e->auditing) {
			if ((error = snap_str(s, n->error)) < 0) {
				rv = KILN_ENOMEM;
				break;
			}
			st.error = (uint32_t)error;
		}
		s->steps[s->n++] = st;
	}
	idx_free(&m);
	return rv;
}

void
engine_snap_free(struct engine_snap *s)
{
	if (s == NULL)
		return;
	free(s->steps);
	free(s->outs);
	free(s->strs);
	free(s);
}

/* The graphs to snapshot: profile's, or every profile's (e->mu held). */
static int
snap_profiles(struct engine *e, const char *profile, struct engine_snap *s,
              int (*pass)(void *, const char *, const char *), void *pass_arg)
{
	const char *const *profiles;
	size_t np;
	struct graph *g;
	int rv;

	if (profile != NULL && profile[0] != '\0') {
		if ((rv = graph_get(e, profile, &g)) != 0)
			return rv;
		return snap_graph(e, g, s, pass, pass_arg);
	}
	np = kiln_desc_profiles(e->desc, &profiles);
	for (size_t i = 0; i < np; i++)
		if ((rv = graph_get(e, profiles[i], &g)) != 0 ||
		    (rv = snap_graph(e, g, s, pass, pass_arg)) != 0)
			return rv;
	return 0;
}

int
engine_snapshot(struct engine *e, const char *profile,
                int (*pass)(void *, const char *, const char *), void *pass_arg,
                void (*at)(void *), void *at_arg, struct engine_snap **out,
                char *err, size_t errlen)
{
	struct engine_snap *s = calloc(1, sizeof *s);
	int rv;

	*out = NULL;
	if (s == NULL || snap_str(s, "") != 0) {
		engine_snap_free(s);
		return KILN_ENOMEM;
	}
	pthread_mutex_lock(&e->mu);
	/* as `kiln deps` does: loaded again when its files changed and no
	 * build runs (a running build's graph is the one it builds), nor an
	 * audit (it runs the graph's nodes unlocked) */
	if ((e->desc == NULL || (e->nactive == 0 && !e->auditing)) &&
	    (rv = project_fresh(e, err, errlen)) != 0)
		goto fail;
	if ((rv = snap_profiles(e, profile, s, pass, pass_arg)) != 0)
		goto fail;
	at(at_arg);
	pthread_mutex_unlock(&e->mu);
	*out = s;
	return 0;
fail:
	pthread_mutex_unlock(&e->mu);
	engine_snap_free(s);
	return rv;
}
