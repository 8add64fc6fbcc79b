/* deps_query.c — `kiln deps` and `kiln rdeps`: what a step depends on,
 * and which steps depend on a file or a step.
 *
 * Declared dependencies come from the loaded descriptions (a step's source
 * inputs, its prerequisite steps; the graph keeps both directions).
 * Discovered ones come from the store: a step's last successful result
 * (steps record -> action result: files from its depfile or trace, URLs it
 * needed) for `deps`, and the deps database's reverse records (one range
 * scan per file or URL, store/deps.c) for `rdeps`, which is also what the
 * live recompile will ask when a file changes.
 *
 * Threads: handler threads call these; they take e->mu while they read the
 * graph (and the store's reverse records, read-only) and build replies
 * that own their memory (free with engine_deps_free / engine_rdeps_free). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "graph.h"

/* ---- owned strings ------------------------------------------------------- */

/* Every string and array a reply points at, freed together. */
struct bag {
	void **v;
	size_t n, cap;
	int oom;
};

static void *
bag_keep(struct bag *b, void *p)
{
	if (p == NULL) {
		b->oom = 1;
		return NULL;
	}
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 16;
		void **nv = realloc(b->v, cap * sizeof *nv);
		if (nv == NULL) {
			free(p);
			b->oom = 1;
			return NULL;
		}
		b->v = nv;
		b->cap = cap;
	}
	b->v[b->n++] = p;
	return p;
}

static char *
bag_str(struct bag *b, const char *s)
{
	return bag_keep(b, strdup(s ? s : ""));
}

static void
bag_free(struct bag *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i]);
	free(b->v);
}

/* ---- finding the graph --------------------------------------------------- */

/* The graph of profile ("" = the first), with the project loaded (again
 * when its files changed and no build runs). e->mu held. */
static int
graph_for(struct engine *e, const char *profile, struct graph **gp,
          char *err, size_t errlen)
{
	const char *const *profiles;
	int rv;

	if ((e->desc == NULL || e->nactive == 0) &&
	    (rv = project_fresh(e, err, errlen)) != 0)
		return rv;
	if (profile == NULL || profile[0] == '\0') {
		if (kiln_desc_profiles(e->desc, &profiles) == 0)
			return KILN_ENOTFOUND;
		profile = profiles[0];
	}
	if ((rv = graph_get(e, profile, gp)) == KILN_EINVAL)
		profile_unknown(e, profile, err, errlen);
	return rv;
}

/* ---- deps ------------------------------------------------------------------ */

struct deps_reply {
	Kiln__DepsReply r;
	struct bag bag;
};

/* The result of an action entry that made rec's outputs (the newest when
 * none matches), unpacked on its own; NULL when none. */
static Kiln__ActionResult *
result_of_entry(const void *data, size_t len, const Kiln__StepRecord *rec)
{
	Kiln__ActionEntry *entry = kiln__action_entry__unpack(NULL, len, data);
	Kiln__ActionResult *res = NULL;
	size_t pick = 0;
	uint8_t *buf;

	if (entry == NULL || entry->n_results == 0)
		goto fail;
	for (size_t i = 0; i < entry->n_results; i++) {
		const Kiln__ActionResult *r = entry->results[i];
		int same = r->n_outputs == rec->n_outputs;
		for (size_t k = 0; same && k < r->n_outputs; k++)
			same = r->outputs[k]->id.len == rec->outputs[k]->id.len &&
			       memcmp(r->outputs[k]->id.data, rec->outputs[k]->id.data,
			              r->outputs[k]->id.len) == 0;
		if (same) {
			pick = i;
			break;
		}
	}
	/* a copy of its own, so the caller frees one message as before */
	len = kiln__action_result__get_packed_size(entry->results[pick]);
	if ((buf = malloc(len ? len : 1)) != NULL) {
		kiln__action_result__pack(entry->results[pick], buf);
		res = kiln__action_result__unpack(NULL, len, buf);
		free(buf);
	}
fail:
	if (entry != NULL)
		kiln__action_entry__free_unpacked(entry, NULL);
	return res;
}

/* The last successful result of (profile, url), unpacked; NULL when none
 * (never built, last attempt failed, record or result unreadable). */
static Kiln__ActionResult *
last_result(struct engine *e, const char *profile, const char *url)
{
	Kiln__StepRecord *rec;
	Kiln__ActionResult *res = NULL;
	kiln_action *a = NULL;
	void *data = NULL;
	size_t len = 0;
	kiln_id key;

	if (kiln_store_step_get(e->s, profile, url, &data, &len) != 0)
		return NULL;
	rec = kiln__step_record__unpack(NULL, len, data);
	free(data);
	if (rec == NULL)
		return NULL;
	if (rec->decision != KILN__STEP_RECORD__DECISION__FAILED && rec->key.len == 16) {
		memcpy(key.b, rec->key.data, 16);
		if (kiln_store_action_get(e->s, &key, &a) == 0)
			res = result_of_entry(a->data, a->len, rec);
		kiln_action_free(a);
	}
	kiln__step_record__free_unpacked(rec, NULL);
	return res;
}

int
engine_deps(struct engine *e, const char *profile, const char *url,
            Kiln__DepsReply **out, char *err, size_t errlen)
{
	struct deps_reply *d = calloc(1, sizeof *d);
	Kiln__ActionResult *res;
	const kiln_step *ks;
	struct graph *g;
	uint32_t at;
	int rv;

	*out = NULL;
	if (d == NULL)
		return KILN_ENOMEM;
	kiln__deps_reply__init(&d->r);
	pthread_mutex_lock(&e->mu);
	if ((rv = graph_for(e, profile, &g, err, errlen)) != 0)
		goto fail;
	if (!step_index(g->plan, url, &at)) {
		snprintf(err, errlen, "no step %s in profile %s", url, g->profile);
		rv = KILN_ENOTFOUND;
		goto fail;
	}
	ks = g->nodes[at].ks;
	d->r.profile = bag_str(&d->bag, g->profile);
	d->r.inputs = bag_keep(&d->bag, calloc(ks->ninputs + 1, sizeof(char *)));
	d->r.prerequisites = bag_keep(&d->bag, calloc(ks->nneeds + 1, sizeof(char *)));
	for (size_t i = 0; !d->bag.oom && i < ks->ninputs; i++)
		d->r.inputs[d->r.n_inputs++] = bag_str(&d->bag, ks->inputs[i]);
	for (size_t i = 0; !d->bag.oom && i < ks->nneeds; i++)
		d->r.prerequisites[d->r.n_prerequisites++] = bag_str(&d->bag, ks->needs[i]);
	profile = d->r.profile;
fail:
	pthread_mutex_unlock(&e->mu);
	if (rv == 0 && d->bag.oom)
		rv = KILN_ENOMEM;
	if (rv != 0) {
		engine_deps_free(&d->r);
		return rv;
	}
	/* the discovered lists, outside the lock: the result is the store's */
	if ((res = last_result(e, profile, url)) != NULL) {
		d->r.built = 1;
		d->r.traced = res->traced;
		d->r.files = bag_keep(&d->bag, calloc(res->n_files + 1, sizeof(Kiln__FileDep *)));
		for (size_t i = 0; !d->bag.oom && i < res->n_files; i++) {
			Kiln__FileDep *f = bag_keep(&d->bag, malloc(sizeof *f));
			if (f == NULL)
				break;
			kiln__file_dep__init(f);
			f->path = bag_str(&d->bag, res->files[i]->path);
			f->source = res->files[i]->source;
			if (res->files[i]->hash.len == 16 &&
			    (f->hash.data = bag_keep(&d->bag, malloc(16))) != NULL) {
				memcpy(f->hash.data, res->files[i]->hash.data, 16);
				f->hash.len = 16;
			}
			d->r.files[d->r.n_files++] = f;
		}
		d->r.needs = bag_keep(&d->bag, calloc(res->n_needs + 1, sizeof(Kiln__UrlDep *)));
		for (size_t i = 0; !d->bag.oom && i < res->n_needs; i++) {
			Kiln__UrlDep *u = bag_keep(&d->bag, malloc(sizeof *u));
			if (u == NULL)
				break;
			kiln__url_dep__init(u);
			u->url = bag_str(&d->bag, res->needs[i]->url);
			u->output = bag_str(&d->bag, res->needs[i]->output);
			if (res->needs[i]->hash.len == 16 &&
			    (u->hash.data = bag_keep(&d->bag, malloc(16))) != NULL) {
				memcpy(u->hash.data, res->needs[i]->hash.data, 16);
				u->hash.len = 16;
			}
			d->r.needs[d->r.n_needs++] = u;
		}
		kiln__action_result__free_unpacked(res, NULL);
		if (d->bag.oom) {
			engine_deps_free(&d->r);
			return KILN_ENOMEM;
		}
	}
	*out = &d->r;
	return 0;
}

void
engine_deps_free(Kiln__DepsReply *r)
{
	struct deps_reply *d = (struct deps_reply *)r;

	if (d == NULL)
		return;
	bag_free(&d->bag);
	free(d);
}

/* ---- rdeps ----------------------------------------------------------------- */

struct rdeps_walk {
	struct engine *e;
	struct graph *g;
	uint8_t *seen;            /* per node */
	uint32_t *queue;          /* nodes found, in the order found */
	uint32_t *depth;          /* per queue entry */
	char **via;               /* per queue entry (malloc'd) */
	size_t n;
	uint32_t cur_depth;
	const char *how;          /* "discovered", "needs" */
	const char *what;         /* the file or URL of the current lookup */
	int oom;
};

static void
walk_add(struct rdeps_walk *w, uint32_t idx, const char *how, const char *what)
{
	size_t len;

	if (w->seen[idx])
		return;
	len = strlen(how) + 1 + strlen(what) + 1;
	if ((w->via[w->n] = malloc(len)) == NULL) {
		w->oom = 1;
		return;
	}
	snprintf(w->via[w->n], len, "%s %s", how, what);
	w->seen[idx] = 1;
	w->queue[w->n] = idx;
	w->depth[w->n] = w->cur_depth;
	w->n++;
}

/* A URL from the deps records: only steps of the current plan count (a
 * record may name a step its descriptions no longer have). */
static int
walk_found(const char *url, void *arg)
{
	struct rdeps_walk *w = arg;
	uint32_t at;

	if (step_index(w->g->plan, url, &at))
		walk_add(w, at, w->how, w->what);
	return w->oom ? KILN_ENOMEM : 0;
}

static int
walk_store(struct rdeps_walk *w, const char *prefix, const char *what,
           const char *how)
{
	size_t len = strlen(prefix) + strlen(what) + 1;
	char *dep = malloc(len);
	int rv;

	if (dep == NULL)
		return KILN_ENOMEM;
	snprintf(dep, len, "%s%s", prefix, what);
	w->how = how;
	w->what = what;
	rv = kiln_store_rdeps(w->e->s, w->g->profile, dep, walk_found, w);
	free(dep);
	return rv;
}

/* Direct dependents of step idx: declared (the graph) and needed (store). */
static int
walk_step(struct rdeps_walk *w, uint32_t idx)
{
	const struct node *n = &w->g->nodes[idx];

	for (uint32_t k = 0; k < n->nrdeps && !w->oom; k++)
		walk_add(w, n->rdeps[k], "prerequisite", n->ks->url);
	return w->oom ? KILN_ENOMEM : walk_store(w, "u:", n->ks->url, "needs");
}

/* Direct dependents of a file: declared inputs, then discovered ones. */
static int
walk_file(struct rdeps_walk *w, const char *path)
{
	for (uint32_t i = 0; i < w->g->n && !w->oom; i++) {
		const kiln_step *ks = w->g->nodes[i].ks;
		for (size_t k = 0; k < ks->ninputs; k++)
			if (strcmp(ks->inputs[k], path) == 0) {
				walk_add(w, i, "input", path);
				break;
			}
	}
	return w->oom ? KILN_ENOMEM : walk_store(w, "f:", path, "discovered");
}

struct rdeps_reply {
	Kiln__RdepsReply r;
	struct bag bag;
};

static int
by_depth_url(const void *a, const void *b)
{
	const Kiln__RdepsReply__Dependent *x = *(Kiln__RdepsReply__Dependent *const *)a;
	const Kiln__RdepsReply__Dependent *y = *(Kiln__RdepsReply__Dependent *const *)b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return strcmp(x->url, y->url);
}

int
engine_rdeps(struct engine *e, const char *profile, const char *target, int all,
             Kiln__RdepsReply **out, char *err, size_t errlen)
{
	struct rdeps_reply *d = calloc(1, sizeof *d);
	struct rdeps_walk w = {0};
	struct graph *g;
	uint32_t at;
	int rv;

	*out = NULL;
	if (d == NULL)
		return KILN_ENOMEM;
	kiln__rdeps_reply__init(&d->r);
	pthread_mutex_lock(&e->mu);
	if ((rv = graph_for(e, profile, &g, err, errlen)) != 0)
		goto fail;
	w.e = e;
	w.g = g;
	if ((w.seen = calloc(g->n + 1, 1)) == NULL ||
	    (w.queue = calloc(g->n + 1, sizeof *w.queue)) == NULL ||
	    (w.depth = calloc(g->n + 1, sizeof *w.depth)) == NULL ||
	    (w.via = calloc(g->n + 1, sizeof *w.via)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	w.cur_depth = 1;
	d->r.is_step = step_index(g->plan, target, &at);
	if (d->r.is_step) {
		w.seen[at] = 1;   /* a step is not its own dependent */
		rv = walk_step(&w, at);
	} else {
		rv = walk_file(&w, target);
	}
	/* breadth first: each level's dependents, one level deeper */
	for (size_t next = 0; rv == 0 && all && next < w.n; next++) {
		w.cur_depth = w.depth[next] + 1;
		rv = walk_step(&w, w.queue[next]);
	}
	if (rv == 0 && w.oom)
		rv = KILN_ENOMEM;
	if (rv != 0)
		goto fail;
	d->r.profile = bag_str(&d->bag, g->profile);
	d->r.dependents = bag_keep(&d->bag, calloc(w.n + 1, sizeof(void *)));
	for (size_t i = 0; !d->bag.oom && i < w.n; i++) {
		Kiln__RdepsReply__Dependent *x = bag_keep(&d->bag, malloc(sizeof *x));
		if (x == NULL)
			break;
		kiln__rdeps_reply__dependent__init(x);
		x->url = bag_str(&d->bag, g->nodes[w.queue[i]].ks->url);
		x->via = bag_keep(&d->bag, w.via[i]);
		w.via[i] = NULL;
		x->depth = w.depth[i];
		d->r.dependents[d->r.n_dependents++] = x;
	}
	if (d->bag.oom)
		rv = KILN_ENOMEM;
	else if (d->r.n_dependents > 1)
		qsort(d->r.dependents, d->r.n_dependents, sizeof *d->r.dependents,
		      by_depth_url);
fail:
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; w.via != NULL && i < w.n; i++)
		free(w.via[i]);
	free(w.via);
	free(w.seen);
	free(w.queue);
	free(w.depth);
	if (rv != 0) {
		engine_rdeps_free(&d->r);
		return rv;
	}
	*out = &d->r;
	return 0;
}

void
engine_rdeps_free(Kiln__RdepsReply *r)
{
	struct rdeps_reply *d = (struct rdeps_reply *)r;

	if (d == NULL)
		return;
	bag_free(&d->bag);
	free(d);
}
