/* engine.c — graphs, builds, waves and the worker threads (see engine.h,
 * engine_int.h; engine_step.c does the work of one step).
 *
 * A wave is the time from a build starting on an idle engine to the last
 * active build ending. Within a wave each step is decided at most once:
 * a build arriving while others run joins the steps they already have
 * (running, queued or done) and schedules only the rest, so overlapping
 * builds share work. Between waves every step is decided afresh (each file
 * stat'ed once per wave).
 *
 * Scheduling is samurai's: a step waits on a count of unfinished
 * prerequisites and goes onto the ready heap when the last one finishes;
 * workers decide ready steps (key, cache), and those out of date wait on
 * the runnable heap for one of the -j slots. Both heaps order by the
 * build's priority, then the longest path from the step to an end
 * (critical path first). A running tool holds no worker: the spawner's
 * reaper hands its end back as a completion.
 *
 * Threads: see engine_int.h for what e->mu guards. Events are published
 * with e->mu held, which keeps a build's step events before its end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "glob.h"

int64_t
engine_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
engine_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- heaps ---------------------------------------------------------------- */

static int
item_before(const struct heap_item *a, const struct heap_item *b)
{
	if (a->prio != b->prio)
		return a->prio > b->prio;
	if (a->cp != b->cp)
		return a->cp > b->cp;
	return a->idx < b->idx;
}

static int
heap_push(struct heap *h, struct graph *g, struct node *n)
{
	size_t i;

	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 256;
		struct heap_item *nv = realloc(h->v, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		h->v = nv;
		h->cap = ncap;
	}
	n->heap_prio = n->prio;
	i = h->n++;
	h->v[i] = (struct heap_item){n->prio, n->cp, n->idx, g};
	while (i > 0 && item_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct heap_item t = h->v[i];
		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static int
heap_pop(struct heap *h, struct heap_item *out)
{
	size_t i = 0;

	if (h->n == 0)
		return 0;
	*out = h->v[0];
	h->v[0] = h->v[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && item_before(&h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && item_before(&h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			break;
		struct heap_item t = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = t;
		i = m;
	}
	return 1;
}

/* ---- graphs --------------------------------------------------------------- */

static void
graph_free(struct graph *g)
{
	if (g == NULL)
		return;
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		free(n->deps);
		free(n->rdeps);
		free(n->outs);
		for (size_t k = 0; n->outpaths && k < n->ks->noutputs; k++)
			free(n->outpaths[k]);
		free(n->outpaths);
		free(n->reason);
		free(n->error);
		key_parts_free(&n->parts);
		if (n->prev != NULL)
			kiln__step_record__free_unpacked(n->prev, NULL);
	}
	free(g->nodes);
	free(g->topo);
	free(g->profile);
	free(g);
}

static int
step_index(const kiln_plan *p, const char *url, uint32_t *at)
{
	size_t lo = 0, hi = p->nsteps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(p->steps[mid].url, url);
		if (c == 0) {
			*at = (uint32_t)mid;
			return 1;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Links, a topological order and critical-path lengths. The loader has
 * refused cycles, so Kahn's walk reaches every node. */
static int
graph_link(struct graph *g)
{
	uint32_t *indeg = calloc(g->n + 1, sizeof *indeg), head = 0, tail = 0;

	if (indeg == NULL)
		return KILN_ENOMEM;
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		const kiln_step *ks = n->ks;
		if ((n->deps = calloc(ks->nneeds + 1, sizeof *n->deps)) == NULL)
			goto nomem;
		for (size_t k = 0; k < ks->nneeds; k++) {
			uint32_t d;
			if (step_index(g->plan, ks->needs[k], &d))
				n->deps[n->ndeps++] = d;
		}
		for (uint32_t k = 0; k < n->ndeps; k++)
			g->nodes[n->deps[k]].nrdeps++;
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		if ((n->rdeps = calloc(n->nrdeps + 1, sizeof *n->rdeps)) == NULL)
			goto nomem;
		n->nrdeps = 0;
	}
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t k = 0; k < g->nodes[i].ndeps; k++) {
			struct node *d = &g->nodes[g->nodes[i].deps[k]];
			d->rdeps[d->nrdeps++] = i;
		}
	for (uint32_t i = 0; i < g->n; i++)
		if ((indeg[i] = g->nodes[i].ndeps) == 0)
			g->topo[tail++] = i;
	while (head < tail) {
		struct node *n = &g->nodes[g->topo[head++]];
		for (uint32_t k = 0; k < n->nrdeps; k++)
			if (--indeg[n->rdeps[k]] == 0)
				g->topo[tail++] = n->rdeps[k];
	}
	free(indeg);
	if (tail != g->n)
		return KILN_EINVAL;
	for (uint32_t i = g->n; i-- > 0;) {
		struct node *n = &g->nodes[g->topo[i]];
		n->cp = 1;
		for (uint32_t k = 0; k < n->nrdeps; k++)
			if (g->nodes[n->rdeps[k]].cp + 1 > n->cp)
				n->cp = g->nodes[n->rdeps[k]].cp + 1;
	}
	return 0;
nomem:
	free(indeg);
	return KILN_ENOMEM;
}

struct outref {
	const char *path;
	const struct node *n;
};

static int
outref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct outref *)a)->path, ((const struct outref *)b)->path);
}

/* Two outputs materialized at one path, or one where another needs a
 * folder, or one on the index map's name, would overwrite each other in
 * build/: a description error, found once per graph. */
static int
graph_collisions(const struct graph *g, char *err, size_t errlen)
{
	size_t n = 0, cap = 0;
	struct outref *v;
	char index[128];
	int rv = 0;

	for (uint32_t i = 0; i < g->n; i++)
		cap += g->nodes[i].ks->noutputs;
	if ((v = calloc(cap + 1, sizeof *v)) == NULL)
		return KILN_ENOMEM;
	for (uint32_t i = 0; i < g->n; i++)
		for (size_t k = 0; k < g->nodes[i].ks->noutputs; k++)
			v[n++] = (struct outref){g->nodes[i].outpaths[k], &g->nodes[i]};
	qsort(v, n, sizeof *v, outref_cmp);
	snprintf(index, sizeof index, "build/%s/kiln-index.txt", g->profile);
	for (size_t i = 0; i < n && rv == 0; i++) {
		const struct outref *a = &v[i], *b = i + 1 < n ? &v[i + 1] : NULL;
		size_t la = strlen(a->path);
		if (strcmp(a->path, index) == 0) {
			snprintf(err, errlen, "%s:%d: %s: its output would be %s, the "
			         "index map's own file", a->n->ks->loc.file, a->n->ks->loc.line,
			         a->n->ks->url, a->path);
			rv = KILN_EBADPROJECT;
		} else if (b != NULL && (strcmp(a->path, b->path) == 0 ||
		           (strncmp(a->path, b->path, la) == 0 && b->path[la] == '/'))) {
			snprintf(err, errlen, "%s:%d: %s and %s:%d: %s: outputs collide in "
			         "build/ (%s and %s); rename an output or a URL",
			         a->n->ks->loc.file, a->n->ks->loc.line, a->n->ks->url,
			         b->n->ks->loc.file, b->n->ks->loc.line, b->n->ks->url,
			         a->path, b->path);
			rv = KILN_EBADPROJECT;
		}
	}
	free(v);
	return rv;
}

static int
graph_new(const kiln_plan *plan, struct graph **gp)
{
	struct graph *g = calloc(1, sizeof *g);
	int rv;

	if (g == NULL)
		return KILN_ENOMEM;
	g->plan = plan;
	g->n = (uint32_t)plan->nsteps;
	g->index_dirty = 1;  /* a new description: the map may list old steps */
	g->prune_due = 1;
	g->profile = strdup(plan->profile);
	g->nodes = calloc(g->n + 1, sizeof *g->nodes);
	g->topo = calloc(g->n + 1, sizeof *g->topo);
	if (g->profile == NULL || g->nodes == NULL || g->topo == NULL) {
		graph_free(g);
		return KILN_ENOMEM;
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		n->ks = &plan->steps[i];
		n->idx = i;
		n->log_fd = -1;
		key_parts_init(&n->parts);
		if ((n->outs = calloc(n->ks->noutputs + 1, sizeof *n->outs)) == NULL ||
		    (n->outpaths = calloc(n->ks->noutputs + 1, sizeof *n->outpaths)) == NULL) {
			graph_free(g);
			return KILN_ENOMEM;
		}
		for (size_t k = 0; k < n->ks->noutputs; k++) {
			char path[PATH_MAX];
			if (step_output_path(g, n, k, path, sizeof path) != 0 ||
			    (n->outpaths[k] = strdup(path)) == NULL) {
				graph_free(g);
				return KILN_ENOMEM;
			}
		}
	}
	if ((rv = graph_link(g)) != 0) {
		graph_free(g);
		return rv;
	}
	*gp = g;
	return 0;
}

/* ---- the project ---------------------------------------------------------- */

static void
stamps_free(struct engine *e)
{
	for (size_t i = 0; i < e->nstamps; i++)
		free(e->stamps[i].path);
	free(e->stamps);
	e->stamps = NULL;
	e->nstamps = 0;
}

static int
stamp_of(const char *root, const char *rel, struct dirstamp *ds)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof path, "%s/%s", root, rel);
	if (stat(path, &st) != 0) {
		ds->mtime_ns = ds->ctime_ns = -1;
		ds->ino = 0;
		return 0;
	}
	ds->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	ds->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	ds->ino = st.st_ino;
	return 0;
}

/* Remember how every description file and source folder looks now. */
static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A hash of the names in folder rel (not those starting with '.', which
 * the source walk skips, nor the root's build/, which builds make): a
 * folder whose mtime moved but whose names did not (an editor saving by
 * rename, a build creating build/) needs no reload. */
static void
dir_names(const char *root, const char *rel, kiln_id *id)
{
	char path[PATH_MAX];
	char **v = NULL;
	size_t n = 0, cap = 0, len = 0;
	struct dirent *de;
	kiln_hasher *h = NULL;
	DIR *d;

	memset(id, 0, sizeof *id);
	snprintf(path, sizeof path, "%s/%s", root, rel);
	if ((d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    (strcmp(rel, ".") == 0 && strcmp(de->d_name, "build") == 0))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nv = realloc(v, ncap * sizeof *nv);
			if (nv == NULL)
				goto out;
			v = nv;
			cap = ncap;
		}
		if ((v[n] = strdup(de->d_name)) == NULL)
			goto out;
		len += strlen(v[n++]) + 1;
	}
	qsort(v, n, sizeof *v, name_cmp);
	if (kiln_hasher_new(&h) != 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		kiln_hasher_update(h, v[i], strlen(v[i]) + 1);
	kiln_hasher_digest(h, id);
	kiln_hasher_free(h);
out:
	(void)len;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	closedir(d);
}

/* Remember how every description file and source folder looks now (and
 * the project folder, where a source folder may yet appear). */
static int
stamps_take(struct engine *e)
{
	const char *const *files, *const *dirs;
	size_t nf = kiln_desc_files(e->desc, &files);
	size_t nd = kiln_desc_dirs(e->desc, &dirs);

	stamps_free(e);
	if ((e->stamps = calloc(nf + nd + 2, sizeof *e->stamps)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < nf + nd + 1; i++) {
		const char *rel = i < nf ? files[i] : i < nf + nd ? dirs[i - nf] : ".";
		struct dirstamp *ds = &e->stamps[e->nstamps];
		if ((ds->path = strdup(rel)) == NULL)
			return KILN_ENOMEM;
		stamp_of(e->root, rel, ds);
		if ((ds->is_dir = i >= nf))
			dir_names(e->root, rel, &ds->names);
		e->nstamps++;
	}
	return 0;
}

static int
stamps_changed(struct engine *e)
{
	if (e->stamps_suspect)
		return 1;
	for (size_t i = 0; i < e->nstamps; i++) {
		struct dirstamp *ds = &e->stamps[i], now;
		kiln_id names;
		stamp_of(e->root, ds->path, &now);
		if (now.mtime_ns == ds->mtime_ns && now.ctime_ns == ds->ctime_ns &&
		    now.ino == ds->ino)
			continue;
		if (!ds->is_dir || now.ino != ds->ino)
			return 1;
		dir_names(e->root, ds->path, &names);
		if (kiln_id_cmp(&names, &ds->names) != 0)
			return 1;
		ds->mtime_ns = now.mtime_ns;   /* same names: nothing to load */
		ds->ctime_ns = now.ctime_ns;
	}
	return 0;
}

static void
graphs_free(struct engine *e)
{
	while (e->graphs != NULL) {
		struct graph *g = e->graphs;
		e->graphs = g->next;
		graph_free(g);
	}
}

/* Write the project's errors into err, one per line. */
static void
diags_text(const kiln_desc *d, char *err, size_t errlen)
{
	const kiln_diag *dg;
	size_t n = kiln_desc_diags(d, &dg), used = 0;

	if (errlen > 0)
		err[0] = '\0';
	for (size_t i = 0; i < n && used + 1 < errlen; i++) {
		if (dg[i].level != KILN_DIAG_ERROR)
			continue;
		int w = snprintf(err + used, errlen - used, "%s:%d:%d: %s%s%s\n",
		                 dg[i].loc.file ? dg[i].loc.file : "?", dg[i].loc.line,
		                 dg[i].loc.col, dg[i].field && *dg[i].field ? dg[i].field : "",
		                 dg[i].field && *dg[i].field ? ": " : "", dg[i].msg);
		if (w < 0)
			break;
		used += (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
	}
}

/* Load the project, or load it again when a description file or a source
 * folder changed (e->mu held, no build active). */
static int
project_fresh(struct engine *e, char *err, size_t errlen)
{
	kiln_desc *d = NULL;
	int64_t load_ns;
	int rv;

	if (e->desc != NULL && !stamps_changed(e))
		return kiln_desc_nerrors(e->desc) ? (diags_text(e->desc, err, errlen),
		                                     KILN_EBADPROJECT) : 0;
	load_ns = engine_wall_ns();
	rv = kiln_desc_load(e->root, &d);
	if (rv == KILN_ENOTFOUND) {
		snprintf(err, errlen, "%s/kiln.yaml: no such file", e->root);
		return KILN_EBADPROJECT;
	}
	if (d == NULL)
		return rv;
	graphs_free(e);
	kiln_desc_free(e->desc);
	e->desc = d;
	if ((rv = stamps_take(e)) != 0)
		return rv;
	/* an edit saved while we were loading may be missing from what was
	 * read yet already in the stamps: load again next time */
	e->stamps_suspect = 0;
	for (size_t i = 0; i < e->nstamps; i++)
		if (e->stamps[i].ctime_ns >= load_ns || e->stamps[i].mtime_ns >= load_ns)
			e->stamps_suspect = 1;
	if (kiln_desc_nerrors(d)) {
		diags_text(d, err, errlen);
		return KILN_EBADPROJECT;
	}
	return 0;
}

static int
graph_get(struct engine *e, const char *profile, struct graph **gp, char *err,
          size_t errlen)
{
	const kiln_plan *plan;
	struct graph *g;
	int rv;

	for (g = e->graphs; g != NULL; g = g->next)
		if (strcmp(g->profile, profile) == 0) {
			*gp = g;
			return 0;
		}
	if ((plan = kiln_desc_plan(e->desc, profile)) == NULL)
		return KILN_EINVAL;
	if ((rv = graph_new(plan, &g)) != 0)
		return rv;
	if ((rv = graph_collisions(g, err, errlen)) != 0) {
		graph_free(g);
		return rv;
	}
	g->next = e->graphs;
	e->graphs = g;
	*gp = g;
	return 0;
}

/* ---- events --------------------------------------------------------------- */

static enum node_state
done_state(enum node_state st)
{
	return st == N_DONE || st == N_FAILED || st == N_SKIPPED ||
	       st == N_CANCELLED || st == N_WOULD_RUN;
}

/* Publish a StepEvent for n (e->mu held). */
static void
publish_step(struct engine *e, struct graph *g, struct node *n)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__StepEvent se = KILN__STEP_EVENT__INIT;
	uint64_t ids[ENGINE_MAX_BUILDS];
	struct pb_outputs *po = NULL;
	const struct build *first = NULL;
	size_t nids = 0;

	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if ((n->builds >> i & 1) && e->active[i] != NULL) {
			ids[nids++] = e->active[i]->id;
			if (first == NULL)
				first = e->active[i];
		}
	se.builds = ids;
	se.n_builds = nids;
	se.profile = g->profile;
	se.url = (char *)n->ks->url;
	switch (n->st) {
	case N_FAILED: se.result = KILN__STEP_EVENT__RESULT__FAILED; break;
	case N_SKIPPED: se.result = KILN__STEP_EVENT__RESULT__SKIPPED; break;
	case N_CANCELLED: se.result = KILN__STEP_EVENT__RESULT__CANCELLED; break;
	case N_WOULD_RUN: se.result = KILN__STEP_EVENT__RESULT__WOULD_RUN; break;
	default:
		se.result = n->outcome == O_RAN ? KILN__STEP_EVENT__RESULT__RAN
		                                : KILN__STEP_EVENT__RESULT__REUSED;
	}
	se.reason = n->reason ? n->reason : (char *)"";
	se.error = n->st == N_FAILED && n->error ? n->error : (char *)"";
	if (n->st == N_DONE && n->have && (po = step_outputs_pb(n, 1)) != NULL) {
		se.outputs = po->p;
		se.n_outputs = po->n;
	}
	if (n->has_log) {
		se.log.data = n->log_id.b;
		se.log.len = 16;
	}
	if (n->st == N_FAILED) {
		se.exit_code = n->res.exited ? n->res.status : 0;
		se.signal = n->res.exited ? 0 : n->res.status;
	}
	se.duration_ns = n->duration_ns;
	if (first != NULL) {
		se.done = first->finished;
		se.total = first->total;
	}
	ev.kind_case = KILN__EVENT__KIND_STEP;
	ev.step = &se;
	e->cfg.publish(e->cfg.arg, &ev);
	free(po);
}

static void
summary_fill(const struct build *b, Kiln__BuildFinished *bf)
{
	kiln__build_finished__init(bf);
	bf->build = b->id;
	bf->profile = (char *)b->profile;
	bf->done = b->done;
	bf->total = b->total;
	bf->ran = b->ran;
	bf->reused = b->reused;
	bf->failed = b->failed;
	bf->skipped = b->skipped;
	bf->cancelled = b->ncancelled;
	bf->would_run = b->would_run;
	bf->duration_ns = b->done ? b->duration_ns
	                          : (uint64_t)(engine_now_ns() - b->start_ns);
	bf->index = (char *)b->index;
	bf->error = (char *)b->error;
}

/* ---- finishing nodes ------------------------------------------------------ */

/* Count a finished node into build b. */
static void
build_count(struct build *b, const struct node *n)
{
	b->finished++;
	switch (n->st) {
	case N_DONE:
		if (n->outcome == O_RAN)
			b->ran++;
		else
			b->reused++;
		break;
	case N_FAILED: b->failed++; break;
	case N_SKIPPED: b->skipped++; break;
	case N_CANCELLED: b->ncancelled++; break;
	case N_WOULD_RUN: b->would_run++; break;
	default: break;
	}
	if (n->st == N_FAILED && !b->keep_going)
		b->stopped = 1;
}

static void make_ready(struct engine *e, struct graph *g, struct node *n);

/* Finish n with state st (e->mu held): count it into its builds, publish
 * its event, and release or skip its dependents (iteratively: a failure
 * can skip a long chain). */
static void
node_finish(struct engine *e, struct graph *g, struct node *n, enum node_state st)
{
	uint32_t *stack = NULL;
	size_t depth = 0, cap = 0;

	for (;;) {
		int was_queued = !done_state(n->st) && n->st != N_IDLE;
		n->st = st;
		if (st != N_DONE || n->outcome != O_UP_TO_DATE)
			g->index_dirty = 1;
		if (was_queued && e->queued > 0)
			e->queued--;
		for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
			if ((n->builds >> i & 1) && e->active[i] != NULL)
				build_count(e->active[i], n);
		if (n->send_event || st == N_FAILED || st == N_WOULD_RUN ||
		    (st == N_DONE && n->outcome != O_UP_TO_DATE))
			publish_step(e, g, n);
		n->send_event = 0;
		for (uint32_t k = 0; k < n->nrdeps; k++) {
			struct node *r = &g->nodes[n->rdeps[k]];
			if (r->wave != e->wave || r->st != N_WAITING)
				continue;
			if (st == N_DONE || st == N_WOULD_RUN) {
				if (--r->waiting == 0)
					make_ready(e, g, r);
				continue;
			}
			/* failed, skipped or cancelled: so is r */
			if (depth == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				uint32_t *ns = realloc(stack, ncap * sizeof *ns);
				if (ns == NULL)
					continue; /* r stays waiting; its build ends at cancel */
				stack = ns;
				cap = ncap;
			}
			r->st = N_EVAL; /* claimed: not pushed twice */
			free(r->reason);
			r->reason = NULL;
			stack[depth++] = r->idx;
		}
		if (depth == 0)
			break;
		n = &g->nodes[stack[--depth]];
		st = st == N_CANCELLED ? N_CANCELLED : N_SKIPPED;
		n->send_event = 1;
	}
	free(stack);
}

static void
make_ready(struct engine *e, struct graph *g, struct node *n)
{
	n->st = N_READY;
	if (heap_push(&e->ready, g, n) != 0) {
		free(n->error);
		n->error = strdup("out of memory scheduling the step");
		node_finish(e, g, n, N_FAILED);
		return;
	}
	pthread_cond_signal(&e->cv);
}

/* Whether a build that is not stopped still wants n (e->mu held). */
static int
node_wanted(const struct engine *e, const struct node *n)
{
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if ((n->builds >> i & 1) && e->active[i] != NULL && !e->active[i]->stopped)
			return 1;
	return 0;
}

static unsigned
jobs_limit(const struct engine *e)
{
	unsigned j = 0;

	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL) {
			unsigned bj = e->active[i]->jobs ? e->active[i]->jobs : e->jobs_default;
			if (bj > j)
				j = bj;
		}
	return j ? j : 1;
}

/* ---- builds --------------------------------------------------------------- */

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
index_entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct index_entry *)a)->url,
	              ((const struct index_entry *)b)->url);
}

/* Commit what waits in the batch. */
static void
batch_commit(struct engine *e)
{
	kiln_batch *b, *fresh;
	size_t skipped = 0;
	int rv;

	pthread_mutex_lock(&e->commit_mu);
	pthread_mutex_lock(&e->batch_mu);
	filestate_flush(e->fs, e->batch);
	b = e->batch;
	if (kiln_batch_len(b) == 0 || kiln_batch_new(&fresh) != 0) {
		pthread_mutex_unlock(&e->batch_mu);
		pthread_mutex_unlock(&e->commit_mu);
		return;
	}
	e->batch = fresh;
	e->last_commit_ns = engine_now_ns();
	pthread_mutex_unlock(&e->batch_mu);
	if ((rv = kiln_store_commit(e->s, b, &skipped)) != 0 && e->cfg.log) {
		char msg[160];
		snprintf(msg, sizeof msg, "committing build records: %s", kiln_strerror(rv));
		e->cfg.log(e->cfg.arg, 1, msg);
	}
	kiln_batch_free(b);
	pthread_mutex_unlock(&e->commit_mu);
}

int
engine_batch_lock(struct engine *e, kiln_batch **b)
{
	pthread_mutex_lock(&e->batch_mu);
	*b = e->batch;
	return 0;
}

void
engine_batch_unlock(struct engine *e)
{
	int due = kiln_batch_len(e->batch) >= 512 ||
	          engine_now_ns() - e->last_commit_ns > 100 * 1000000LL;

	pthread_mutex_unlock(&e->batch_mu);
	if (due)
		batch_commit(e);
}

/* The index map to write when a build ends: gathered with e->mu held (other
 * builds of the wave may be finishing nodes of this graph), written
 * without it. */
struct index_job {
	struct index_entry *v;
	size_t n;
	char *strs;              /* every url and file, NUL-separated */
	char profile[65];
	int prune;               /* a clean whole-profile build: prune build/ */
};

static void
index_job_free(struct index_job *j)
{
	free(j->v);
	free(j->strs);
	memset(j, 0, sizeof *j);
}

/* 1: there is a map to write (j filled); 0: nothing changed, or no memory
 * (the map stays as it is and is written by a later build). */
static int
index_gather(struct engine *e, struct build *b, struct index_job *j)
{
	struct graph *g = b->g;
	size_t cap = 0, slen = 0, at = 0;
	char path[PATH_MAX];
	struct stat st;

	memset(j, 0, sizeof *j);
	snprintf(path, sizeof path, "build/%s/kiln-index.txt", g->profile);
	if (!g->index_dirty && fstatat(e->rootfd, path, &st, 0) == 0)
		return 0;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		if (!nd->have)
			continue;
		cap += nd->ks->noutputs;
		for (size_t k = 0; k < nd->ks->noutputs; k++)
			slen += strlen(nd->ks->url) + strlen(nd->ks->outputs[k].name) +
			        strlen(nd->outpaths[k]) + 4;
	}
	if ((j->v = calloc(cap + 1, sizeof *j->v)) == NULL ||
	    (j->strs = malloc(slen + 1)) == NULL) {
		index_job_free(j);
		return 0;
	}
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		if (!nd->have)
			continue;
		for (size_t k = 0; k < nd->ks->noutputs; k++) {
			const char *name = nd->ks->outputs[k].name;
			int single = nd->ks->noutputs == 1 && strcmp(name, "out") == 0;
			struct index_entry *x = &j->v[j->n++];
			x->url = j->strs + at;
			at += (size_t)sprintf(j->strs + at, "%s%s%s", nd->ks->url,
			                      single ? "" : "#", single ? "" : name) + 1;
			/* relative to build/<profile>/ */
			x->file = j->strs + at;
			at += (size_t)sprintf(j->strs + at, "%s", nd->outpaths[k] +
			                      strlen("build/") + strlen(g->profile) + 1) + 1;
			x->id = nd->outs[k].id;
			x->size = nd->outs[k].size;
		}
	}
	g->index_dirty = 0;
	snprintf(j->profile, sizeof j->profile, "%s", g->profile);
	/* steps only disappear with a new description (a new graph): walking
	 * all of build/ once after each load is enough */
	j->prune = g->prune_due && b->full && b->failed == 0 && b->skipped == 0 &&
	           !b->cancelled;
	if (j->prune)
		g->prune_due = 0;
	return 1;
}

/* Returns 0 or the error writing the map. */
static int
index_write(struct engine *e, struct index_job *j)
{
	int rv;

	qsort(j->v, j->n, sizeof *j->v, index_entry_cmp);
	if ((rv = materialize_write_index(e->root, j->profile, j->v, j->n)) != 0)
		return rv;
	/* after a clean whole-profile build, build/<profile>/ holds exactly
	 * the profile's outputs: files of steps no longer described go */
	if (j->prune) {
		const char **keep = calloc(j->n + 1, sizeof *keep);
		if (keep != NULL) {
			for (size_t i = 0; i < j->n; i++)
				keep[i] = j->v[i].file;
			qsort(keep, j->n, sizeof *keep, str_cmp);
			materialize_prune(e->root, j->profile, keep, j->n);
			free(keep);
		}
	}
	return 0;
}

/* The build's last step finished (e->mu held, dropped and retaken). */
static void
build_end(struct engine *e, struct build *b)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__BuildFinished bf;

	struct index_job job;
	int have_job, index_rv = 0;

	b->done = -1; /* ending: nobody ends it twice */
	have_job = !b->dry_run && index_gather(e, b, &job);
	if (!b->dry_run)
		snprintf(b->index, sizeof b->index, "build/%.40s/kiln-index.txt", b->profile);
	pthread_mutex_unlock(&e->mu);
	batch_commit(e);
	if (have_job) {
		index_rv = index_write(e, &job);
		index_job_free(&job);
	}
	pthread_mutex_lock(&e->mu);
	if (index_rv != 0) {
		b->index[0] = '\0';
		snprintf(b->error, sizeof b->error, "writing build/%s/kiln-index.txt: %s",
		         b->profile, kiln_strerror(index_rv));
	}
	b->done = 1;
	b->duration_ns = (uint64_t)(engine_now_ns() - b->start_ns);
	if (b->cancelled && b->error[0] == '\0')
		snprintf(b->error, sizeof b->error, "cancelled");
	summary_fill(b, &bf);
	ev.kind_case = KILN__EVENT__KIND_BUILD_FINISHED;
	ev.build_finished = &bf;
	e->cfg.publish(e->cfg.arg, &ev);
	/* free the slot; clear it from every node of the graph */
	for (uint32_t i = 0; i < b->g->n; i++)
		b->g->nodes[i].builds &= ~(1ULL << b->slot);
	e->active[b->slot] = NULL;
	b->slot = -1;
	b->g = NULL;  /* graphs go when the project is loaded again */
	e->nactive--;
	b->next = e->finished;
	e->finished = b;
	if (++e->nfinished > ENGINE_KEEP_FINISHED) {
		struct build *p = e->finished;
		while (p->next != NULL && p->next->next != NULL)
			p = p->next;
		free(p->next);
		p->next = NULL;
		e->nfinished--;
	}
	if (e->nactive == 0) {
		pthread_cond_broadcast(&e->idle_cv);
		/* a wave's temporary records are freed: give the pages back */
		malloc_trim(0);
	}
}

/* End every build whose steps are all finished (e->mu held). */
static void
builds_check(struct engine *e)
{
	for (int again = 1; again;) {
		again = 0;
		for (int i = 0; i < ENGINE_MAX_BUILDS; i++) {
			struct build *b = e->active[i];
			if (b != NULL && b->done == 0 && b->finished >= b->total) {
				build_end(e, b);
				again = 1;
				break;
			}
		}
	}
}

/* Schedule node n for build b (e->mu held). Prerequisites come first
 * (topological order), so each of n's is already part of the wave. */
static void
node_schedule(struct engine *e, struct graph *g, struct node *n, struct build *b)
{
	uint64_t bit = 1ULL << b->slot;
	int failed = 0, cancelled = 0;

	if (n->wave == e->wave && n->st != N_IDLE && n->st != N_CANCELLED &&
	    n->st != N_SKIPPED) {
		n->builds |= bit;
		if (b->prio > n->prio) {
			n->prio = b->prio;
			if (n->st == N_READY)
				heap_push(&e->ready, g, n);
			else if (n->st == N_RUNNABLE)
				heap_push(&e->runnable, g, n);
		}
		if (done_state(n->st))
			build_count(b, n);
		return;
	}
	n->wave = e->wave;
	n->builds = bit;
	n->prio = b->prio;
	n->waiting = 0;
	n->send_event = 0;
	e->queued++;
	n->st = N_WAITING;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		struct node *d = &g->nodes[n->deps[k]];
		if (d->st == N_FAILED || d->st == N_SKIPPED)
			failed = 1;
		else if (d->st == N_CANCELLED)
			cancelled = 1;
		else if (d->st != N_DONE && d->st != N_WOULD_RUN)
			n->waiting++;
	}
	if (failed || cancelled) {
		free(n->reason);
		n->reason = NULL;
		n->send_event = 1;
		node_finish(e, g, n, cancelled && !failed ? N_CANCELLED : N_SKIPPED);
	} else if (n->waiting == 0) {
		make_ready(e, g, n);
	}
}

/* Mark the steps wanted by targets, and all they need, in mark[]. */
static int
targets_mark(struct graph *g, char *const *targets, size_t ntargets,
             uint8_t *mark, char *err, size_t errlen)
{
	uint32_t *stack = malloc((g->n + 1) * sizeof *stack), depth = 0;

	if (stack == NULL)
		return KILN_ENOMEM;
	for (size_t t = 0; t < ntargets || (ntargets == 0 && t == 0); t++) {
		kiln_glob *gl = NULL;
		const char *why = NULL;
		int matched = 0;
		if (ntargets > 0 && glob_compile(targets[t], &gl, &why) != 0) {
			snprintf(err, errlen, "target '%s': %s", targets[t], why ? why : "bad glob");
			free(stack);
			return KILN_EINVAL;
		}
		for (uint32_t i = 0; i < g->n; i++)
			if (gl == NULL || glob_match(gl, g->nodes[i].ks->url)) {
				matched = 1;
				if (!mark[i]) {
					mark[i] = 1;
					stack[depth++] = i;
				}
			}
		glob_free(gl);
		if (!matched && ntargets > 0) {
			snprintf(err, errlen, "no step of profile %s has the URL '%s' "
			         "(kiln ls -p %s lists them)", g->profile, targets[t], g->profile);
			free(stack);
			return KILN_EINVAL;
		}
	}
	while (depth > 0) {
		struct node *n = &g->nodes[stack[--depth]];
		for (uint32_t k = 0; k < n->ndeps; k++)
			if (!mark[n->deps[k]]) {
				mark[n->deps[k]] = 1;
				stack[depth++] = n->deps[k];
			}
	}
	free(stack);
	return 0;
}

static int
free_slot(struct engine *e)
{
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] == NULL)
			return i;
	return -1;
}

int
engine_build(struct engine *e, const Kiln__BuildRequest *rq,
             Kiln__BuildReply *rep, char *err, size_t errlen)
{
	const char *const *profiles;
	const char *profile;
	struct graph *g;
	struct build *b;
	uint8_t *mark = NULL;
	int rv, slot;

	err[0] = '\0';
	pthread_mutex_lock(&e->mu);
	if (e->quit) {
		rv = KILN_ECLOSED;
		goto out;
	}
	if (e->nactive > 0 && e->wave_dry != rq->dry_run) {
		snprintf(err, errlen, "a %s is in progress; try again when it ends",
		         e->wave_dry ? "dry run" : "build");
		rv = KILN_EBUSY;
		goto out;
	}
	if ((slot = free_slot(e)) < 0) {
		snprintf(err, errlen, "%d builds are running already", ENGINE_MAX_BUILDS);
		rv = KILN_EBUSY;
		goto out;
	}
	if (e->nactive == 0 && (rv = project_fresh(e, err, errlen)) != 0)
		goto out;
	if (kiln_desc_profiles(e->desc, &profiles) == 0) {
		snprintf(err, errlen, "the project has no profiles");
		rv = KILN_EBADPROJECT;
		goto out;
	}
	profile = rq->profile && rq->profile[0] ? rq->profile : profiles[0];
	if ((rv = graph_get(e, profile, &g, err, errlen)) != 0) {
		if (rv == KILN_EINVAL)
			snprintf(err, errlen, "unknown profile '%s'", profile);
		goto out;
	}
	if ((mark = calloc(g->n + 1, 1)) == NULL) {
		rv = KILN_ENOMEM;
		goto out;
	}
	if ((rv = targets_mark(g, rq->targets, rq->n_targets, mark, err, errlen)) != 0)
		goto out;
	if ((b = calloc(1, sizeof *b)) == NULL) {
		rv = KILN_ENOMEM;
		goto out;
	}
	if (e->nactive == 0) {   /* a new wave */
		e->wave++;
		e->wave_dry = rq->dry_run;
		filestate_pass(e->fs);
	}
	b->id = ++e->next_build;
	b->slot = slot;
	b->g = g;
	snprintf(b->profile, sizeof b->profile, "%s", g->profile);
	b->prio = rq->priority;
	b->jobs = rq->jobs;
	b->keep_going = rq->keep_going;
	b->dry_run = rq->dry_run;
	b->full = rq->n_targets == 0;
	b->start_ns = engine_now_ns();
	for (uint32_t i = 0; i < g->n; i++)
		b->total += mark[i];
	e->active[slot] = b;
	e->nactive++;
	for (uint32_t i = 0; i < g->n; i++)
		if (mark[g->topo[i]])
			node_schedule(e, g, &g->nodes[g->topo[i]], b);
	rep->build = b->id;
	rep->steps = b->total;
	rep->profile = g->profile;
	pthread_cond_broadcast(&e->cv);
	builds_check(e);
	rv = 0;
out:
	pthread_mutex_unlock(&e->mu);
	free(mark);
	return rv;
}

int
engine_cancel(struct engine *e, uint64_t id)
{
	struct build *b = NULL;

	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL && e->active[i]->id == id)
			b = e->active[i];
	if (b == NULL) {
		pthread_mutex_unlock(&e->mu);
		return KILN_ENOTFOUND;
	}
	b->cancelled = b->stopped = 1;
	/* The build ends now: each of its unfinished steps counts as
	 * cancelled for it and stops being its. What no other build wants is
	 * dropped (queued) or killed (running); a shared step goes on for the
	 * builds that still want it. */
	for (uint32_t i = 0; i < b->g->n; i++) {
		struct node *n = &b->g->nodes[i];
		if (!(n->builds >> b->slot & 1) || n->wave != e->wave ||
		    done_state(n->st) || n->st == N_IDLE)
			continue;
		n->builds &= ~(1ULL << b->slot);
		b->finished++;
		b->ncancelled++;
		if (node_wanted(e, n))
			continue;
		if (n->st == N_RUNNING) {
			if (n->pid > 0)
				spawner_kill(e->sp, n->pid, 2000);
		} else if (n->st == N_WAITING || n->st == N_READY || n->st == N_RUNNABLE) {
			n->send_event = 0;
			node_finish(e, b->g, n, N_CANCELLED);
		}
	}
	builds_check(e);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int
engine_build_status(struct engine *e, uint64_t id, Kiln__BuildFinished *out)
{
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < ENGINE_MAX_BUILDS && rv != 0; i++)
		if (e->active[i] != NULL && e->active[i]->id == id) {
			summary_fill(e->active[i], out);
			out->done = 0;
			rv = 0;
		}
	for (struct build *b = e->finished; b != NULL && rv != 0; b = b->next)
		if (b->id == id) {
			summary_fill(b, out);
			rv = 0;
		}
	pthread_mutex_unlock(&e->mu);
	return rv;
}

uint32_t
engine_queued(struct engine *e)
{
	uint32_t n;

	pthread_mutex_lock(&e->mu);
	n = e->queued;
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* ---- workers -------------------------------------------------------------- */

void
engine_tool_done(void *arg, const struct spawn_result *r)
{
	struct run_ctx *rc = arg;
	struct engine *e = rc->e;
	struct node *n = rc->n;

	pthread_mutex_lock(&e->mu);
	n->res = *r;
	/* the tool's slot is free now: finishing the step is our work */
	e->running--;
	pthread_cond_broadcast(&e->cv);
	if (e->ncompleted == e->capcompleted) {
		size_t ncap = e->capcompleted ? e->capcompleted * 2 : 64;
		struct run_ctx **nv = realloc(e->completed, ncap * sizeof *nv);
		if (nv == NULL) {
			/* cannot queue it: finish it here as failed, which at
			 * least ends its build */
			free(n->error);
			n->error = strdup("out of memory after the tool ended");
			node_finish(e, rc->g, n, N_FAILED);
			builds_check(e);
			pthread_mutex_unlock(&e->mu);
			return;
		}
		e->completed = nv;
		e->capcompleted = ncap;
	}
	e->completed[e->ncompleted++] = rc;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

static void
node_fail(struct engine *e, struct graph *g, struct node *n)
{
	n->outcome = O_FAILED;
	node_finish(e, g, n, N_FAILED);
}

/* A tool ended: finish its step (e->mu held, dropped for the work). */
static void
work_complete(struct engine *e, struct run_ctx *rc)
{
	struct node *n = rc->n;
	int cancelled = !node_wanted(e, n), rv;

	pthread_mutex_unlock(&e->mu);
	rv = step_finish(e, rc->g, n);
	if (rv != 0 && !cancelled)
		step_record_failure(e, rc->g, n);
	else if (rv != 0)
		step_forget(n);  /* cancelled is not failed: no record */
	pthread_mutex_lock(&e->mu);
	if (rv != 0 && cancelled)
		node_finish(e, rc->g, n, N_CANCELLED);
	else if (rv != 0)
		node_fail(e, rc->g, n);
	else
		node_finish(e, rc->g, n, N_DONE);
}

/* Start a runnable step's tool (e->mu held, dropped for the work). */
static void
work_start(struct engine *e, struct graph *g, struct node *n)
{
	int rv;

	n->st = N_RUNNING;
	e->running++;
	e->starting++;
	n->run = (struct run_ctx){e, g, n};
	pthread_mutex_unlock(&e->mu);
	rv = step_start(e, g, n);
	if (rv != 0)
		step_record_failure(e, g, n);
	pthread_mutex_lock(&e->mu);
	if (--e->starting == 0)
		pthread_cond_broadcast(&e->idle_cv);
	if (rv != 0) {
		e->running--;
		node_fail(e, g, n);
	}
}

/* Decide a ready step (e->mu held, dropped for the work). */
static void
work_eval(struct engine *e, struct graph *g, struct node *n)
{
	int dry = e->wave_dry, dep_would = 0;
	enum eval_result r;

	n->st = N_EVAL;
	for (uint32_t k = 0; k < n->ndeps; k++)
		if (g->nodes[n->deps[k]].st == N_WOULD_RUN)
			dep_would = k + 1;
	if (dep_would) {
		char why[600];
		snprintf(why, sizeof why, "prerequisite %s would run",
		         g->nodes[n->deps[dep_would - 1]].ks->url);
		free(n->reason);
		n->reason = strdup(why);
		node_finish(e, g, n, N_WOULD_RUN);
		return;
	}
	pthread_mutex_unlock(&e->mu);
	r = step_eval(e, g, n, dry);
	if (r == EVAL_FAIL)
		step_record_failure(e, g, n);
	pthread_mutex_lock(&e->mu);
	if (r == EVAL_DONE) {
		node_finish(e, g, n, N_DONE);
	} else if (r == EVAL_FAIL) {
		node_fail(e, g, n);
	} else if (dry) {
		node_finish(e, g, n, N_WOULD_RUN);
	} else {
		n->st = N_RUNNABLE;
		if (heap_push(&e->runnable, g, n) != 0)
			node_fail(e, g, n);
	}
}

/* Pop the next live entry of h (stale duplicates skipped). */
static struct node *
pop_live(struct heap *h, enum node_state want, struct graph **gp)
{
	struct heap_item it;

	while (heap_pop(h, &it)) {
		struct node *n = &it.g->nodes[it.idx];
		if (n->st == want && it.prio == n->heap_prio) {
			*gp = it.g;
			return n;
		}
	}
	return NULL;
}

static void *
worker_main(void *arg)
{
	struct engine *e = arg;
	struct graph *g;
	struct node *n;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		if (e->ncompleted > 0) {
			work_complete(e, e->completed[--e->ncompleted]);
		} else if (e->running < jobs_limit(e) && !e->quit &&
		           (n = pop_live(&e->runnable, N_RUNNABLE, &g)) != NULL) {
			if (node_wanted(e, n))
				work_start(e, g, n);
			else
				node_finish(e, g, n, N_CANCELLED);
		} else if ((n = pop_live(&e->ready, N_READY, &g)) != NULL) {
			if (node_wanted(e, n) && !e->quit)
				work_eval(e, g, n);
			else
				node_finish(e, g, n, N_CANCELLED);
		} else if (e->quit && e->running == 0) {
			pthread_cond_broadcast(&e->cv); /* the others leave too */
			break;
		} else {
			pthread_cond_wait(&e->cv, &e->mu);
			continue;
		}
		builds_check(e);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* ---- life ----------------------------------------------------------------- */

static unsigned
ncores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void
engine_rmtree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int
engine_new(const struct engine_config *cfg, struct engine **ep)
{
	struct engine *e = calloc(1, sizeof *e);
	char scratch[PATH_MAX];
	int rv = KILN_ENOMEM;

	if (e == NULL)
		return KILN_ENOMEM;
	e->cfg = *cfg;
	e->s = cfg->store;
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->batch_mu, NULL);
	pthread_mutex_init(&e->commit_mu, NULL);
	pthread_mutex_init(&e->tools_mu, NULL);
	e->rootfd = -1;
	pthread_cond_init(&e->cv, NULL);
	pthread_cond_init(&e->idle_cv, NULL);
	e->jobs_default = cfg->default_jobs ? cfg->default_jobs : ncores();
	if ((e->root = strdup(cfg->root)) == NULL ||
	    (e->tool_path = strdup(cfg->tool_path ? cfg->tool_path
	                                          : "/usr/local/bin:/usr/bin:/bin")) == NULL ||
	    kiln_batch_new(&e->batch) != 0 ||
	    (e->rootfd = open(cfg->root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    filestate_new(e->s, e->root, &e->fs) != 0)
		goto fail;
	snprintf(scratch, sizeof scratch, "%s/.kiln/scratch", e->root);
	engine_rmtree(scratch);
	if ((rv = spawner_new(&e->sp)) != 0)
		goto fail;
	/* deciding and finishing steps is file-system work that waits on the
	 * kernel more than it computes: twice the cores keeps -j slots fed */
	e->nthreads = cfg->workers ? cfg->workers : 2 * ncores() < 4 ? 4 : 2 * ncores();
	if ((e->threads = calloc(e->nthreads, sizeof *e->threads)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < e->nthreads; i++)
		if (pthread_create(&e->threads[i], NULL, worker_main, e) != 0) {
			e->nthreads = i;
			rv = KILN_EIO;
			goto fail;
		}
	e->last_commit_ns = engine_now_ns();
	*ep = e;
	return 0;
fail:
	engine_free(e);
	return rv;
}

void
engine_free(struct engine *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mu);
	e->quit = 1;
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL)
			e->active[i]->cancelled = e->active[i]->stopped = 1;
	pthread_cond_broadcast(&e->cv);
	while (e->starting > 0)
		pthread_cond_wait(&e->idle_cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	/* kills what still runs; the completions finish those steps */
	spawner_free(e->sp);
	e->sp = NULL;
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	if (e->batch != NULL)
		batch_commit(e);
	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		free(e->active[i]);
	while (e->finished != NULL) {
		struct build *b = e->finished;
		e->finished = b->next;
		free(b);
	}
	graphs_free(e);
	kiln_desc_free(e->desc);
	stamps_free(e);
	filestate_free(e->fs);
	kiln_batch_free(e->batch);
	free(e->ready.v);
	free(e->runnable.v);
	free(e->completed);
	free(e->tools);
	if (e->rootfd >= 0)
		close(e->rootfd);
	pthread_mutex_destroy(&e->tools_mu);
	free(e->threads);
	free(e->root);
	free(e->tool_path);
	pthread_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->batch_mu);
	pthread_mutex_destroy(&e->commit_mu);
	pthread_cond_destroy(&e->cv);
	pthread_cond_destroy(&e->idle_cv);
	free(e);
}

/* ---- why ------------------------------------------------------------------ */

int
engine_why(struct engine *e, const char *profile, const char *url,
           Kiln__StepRecord **rec, int *this_daemon)
{
	const char *const *profiles;
	struct graph *g = NULL;
	void *data = NULL;
	size_t len = 0;
	char err[256];
	uint32_t at;
	int rv, decided = 0, up_to_date = 0;
	kiln_id key;

	*rec = NULL;
	*this_daemon = 0;
	pthread_mutex_lock(&e->mu);
	if (e->desc == NULL && (rv = project_fresh(e, err, sizeof err)) != 0) {
		pthread_mutex_unlock(&e->mu);
		return rv;
	}
	if (profile == NULL || profile[0] == '\0') {
		if (kiln_desc_profiles(e->desc, &profiles) == 0) {
			pthread_mutex_unlock(&e->mu);
			return KILN_ENOTFOUND;
		}
		profile = profiles[0];
	}
	for (g = e->graphs; g != NULL && strcmp(g->profile, profile) != 0; g = g->next)
		;
	/* what this daemon knows, copied now: a reload may free g */
	if (g != NULL && step_index(g->plan, url, &at) && g->nodes[at].wave != 0) {
		decided = 1;
		up_to_date = g->nodes[at].outcome == O_UP_TO_DATE && g->nodes[at].have;
		key = g->nodes[at].key;
	}
	pthread_mutex_unlock(&e->mu);
	if ((rv = kiln_store_step_get(e->s, profile, url, &data, &len)) != 0)
		return rv;
	*rec = kiln__step_record__unpack(NULL, len, data);
	free(data);
	if (*rec == NULL)
		return KILN_ECORRUPT;
	*this_daemon = decided;
	/* up to date since the record: say so, and keep the record's story
	 * of the decision before (its decision field stays what it was) */
	if (up_to_date && (*rec)->key.len == 16 && memcmp((*rec)->key.data, key.b, 16) == 0) {
		char *why = malloc(strlen((*rec)->reason) + 64);
		if (why != NULL) {
			sprintf(why, "up to date (nothing changed since it %s: %s)",
			        (*rec)->decision == KILN__STEP_RECORD__DECISION__RAN ?
			        "ran" : "was decided", (*rec)->reason);
			/* unpack allocated the string with malloc: swap in ours */
			if ((*rec)->reason != protobuf_c_empty_string)
				free((*rec)->reason);
			(*rec)->reason = why;
		}
	}
	return 0;
}
