/* remote_need.c — the `kiln need`s of a result in the shared cache
 * (docs/cache.md, "Steps that use kiln need"): what an upload states of
 * them, and whether a candidate's hold on this machine.
 *
 * A need is stated as the needed step's URL, its output's name and the
 * SHA-256 of the blob the run was handed (the index entry's Need, already
 * part of the layout and of the result key). Another machine's candidate
 * holds when each needed step is done in this wave and its output has
 * that SHA-256; a needed step not done yet is scheduled first (the same
 * wait as for a local result's needs, need.c), and the lookup is made
 * again once it is done.
 *
 * Threads: the uploader (remote_need_shas) and the worker deciding a node
 * (remote_need_check, which takes e->mu briefly). */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "need.h"
#include "remote.h"

int
remote_need_shas(struct engine *e, const struct up_job *j, struct kiln_cache_need *out)
{
	int rv;

	for (size_t i = 0; i < j->nneeds; i++) {
		out[i].url = j->needs[i].url;
		out[i].output = j->needs[i].output;
		if ((rv = kiln_store_blob_sha256(e->s, &j->needs[i].hash, out[i].sha)) != 0)
			return rv;
	}
	return 0;
}

/* Where need d of candidate c stands here (e->mu held): 1 done, with
 * *id its output now; 0 it can never hold (no such step, n itself, it
 * failed, or it could not be brought up to date before); 2 not done yet. */
static int
need_state(struct engine *e, struct graph *g, struct node *n, struct need_dep *d, kiln_id *id)
{
	const struct node *t;

	if (!need_dep_resolve(g, d) || (t = &g->nodes[d->idx]) == n)
		return 0;
	if (!need_done(e, t))
		return n->needs_wave == e->wave ? 0 : 2;
	if (t->st != N_DONE)
		return 0;
	*id = t->outs[d->out].id;
	return 1;
}

/* Make n wait for c's needs: they become n->needs, as a local result's
 * would (need_check_result), so that the engine schedules the steps not
 * done yet and decides n again after them. CACHE_NEEDS, or CACHE_MISS
 * when out of memory or a need cannot hold after all. */
static enum cache_result
need_wait(struct engine *e, struct graph *g, struct node *n,
          const struct kiln_cache_candidate *c, const kiln_id *ids)
{
	Kiln__UrlDep *v = calloc(c->nneeds, sizeof *v);
	Kiln__UrlDep **p = calloc(c->nneeds, sizeof *p);
	enum cache_result cr = CACHE_MISS;
	char why[600];

	if (v != NULL && p != NULL) {
		for (size_t i = 0; i < c->nneeds; i++) {
			kiln__url_dep__init(&v[i]);
			v[i].url = (char *)c->needs[i].url;
			v[i].output = (char *)c->needs[i].output;
			v[i].hash.data = (uint8_t *)ids[i].b;   /* zeros while pending */
			v[i].hash.len = 16;
			p[i] = &v[i];
		}
		cr = need_check_result(e, g, n, p, c->nneeds, why, sizeof why);
	}
	free(v);
	free(p);
	return cr == CACHE_NEEDS ? CACHE_NEEDS : CACHE_MISS;
}

enum cache_result
remote_need_check(struct engine *e, struct graph *g, struct node *n,
                  const struct kiln_cache_candidate *c, kiln_id *ids)
{
	int pending = 0;

	for (size_t i = 0; i < c->nneeds; i++) {
		struct need_dep d = {.url = (char *)c->needs[i].url,
		                     .output = (char *)c->needs[i].output, .out = -1};
		uint8_t sha[32];
		int st;

		memset(&ids[i], 0, sizeof ids[i]);
		pthread_mutex_lock(&e->mu);
		st = need_state(e, g, n, &d, &ids[i]);
		pthread_mutex_unlock(&e->mu);
		if (st == 0)
			return CACHE_MISS;
		if (st == 2) {
			pending = 1;
			continue;
		}
		/* the bytes this machine made for it must be those the run had */
		if (kiln_store_blob_sha256(e->s, &ids[i], sha) != 0 ||
		    memcmp(sha, c->needs[i].sha, 32) != 0)
			return CACHE_MISS;
	}
	return pending ? need_wait(e, g, n, c, ids) : CACHE_HIT;
}
