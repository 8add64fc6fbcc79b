/* graph.c — the project as the engine sees it: the loaded
 * descriptions (loaded again when a description file or a source folder
 * changed) and, per profile, the graph of its steps with prerequisite
 * links, a topological order and critical-path lengths.
 *
 * Threads: every function here runs with e->mu held (engine_int.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "watch.h"
#include "graph.h"
#include "remote.h"
#include "discover.h"
#include "estimate.h"
#include "need.h"
#include "selfwrite.h"
#include "step.h"

/* ---- graphs --------------------------------------------------------------- */

void
graph_free(struct graph *g)
{
	if (g == NULL)
		return;
	free(g->iorder);
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		for (size_t k = 0; k < n->ndisc; k++)
			free(n->disc[k]);
		free(n->disc);
		step_warnings_free(n);
		need_deps_free(n->needs, n->nneeds);
		need_deps_free(n->rneeds, n->nrneeds);
		free(n->reason);
		free(n->restored);
		free(n->error);
		free(n->execs);
		selfwrite_forget(n);
		node_work_free(n);
	}
	free(g->nodes);
	free(g->edges);
	free(g->outs);
	free(g->outpaths);
	free(g->outpath_text);
	free(g->topo);
	free(g->nmark);
	free(g->nparent);
	free(g->nstack);
	free(g->nsk);
	free(g->profile);
	free(g);
}

int
step_index(const kiln_plan *p, const char *url, uint32_t *at)
{
	size_t i;

	if (!step_find(p->steps, p->nsteps, url, &i))
		return 0;
	*at = (uint32_t)i;
	return 1;
}

/* Links, a topological order and critical-path lengths. The loader has
 * refused cycles, so Kahn's walk reaches every node. */
static int
graph_link(struct graph *g)
{
	uint32_t *indeg = calloc(g->n + 1, sizeof *indeg), head = 0, tail = 0, *at;
	size_t nedges = 0;

	if (indeg == NULL)
		return KILN_ENOMEM;
	/* every node's deps, then every node's rdeps, in one array */
	for (uint32_t i = 0; i < g->n; i++)
		nedges += g->nodes[i].ks->nneeds;
	if ((g->edges = calloc(2 * nedges + 1, sizeof *g->edges)) == NULL)
		goto fail;
	at = g->edges;
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		const kiln_step *ks = n->ks;
		n->deps = at;
		for (size_t k = 0; k < ks->nneeds; k++) {
			uint32_t d;
			if (step_index(g->plan, ks->needs[k], &d))
				n->deps[n->ndeps++] = d;
		}
		at += n->ndeps;
		for (uint32_t k = 0; k < n->ndeps; k++)
			g->nodes[n->deps[k]].nrdeps++;
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		n->rdeps = at;
		at += n->nrdeps;
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
fail:
	free(indeg);
	return KILN_ENOMEM;
}

/* Every node's output records and build/ paths, in three graph-wide
 * blocks (not three allocations a node: a 100,000-step graph is big). */
static int
graph_outputs(struct graph *g)
{
	size_t nouts = 0, len = 0, cap = 1 << 16, at = 0;
	size_t *offs; /* into the text, which moves while it grows */
	int rv = KILN_ENOMEM;

	for (uint32_t i = 0; i < g->n; i++)
		nouts += g->nodes[i].ks->noutputs;
	g->outs = calloc(nouts + 1, sizeof *g->outs);
	g->outpaths = calloc(nouts + 1, sizeof *g->outpaths);
	g->outpath_text = malloc(cap);
	offs = malloc((nouts + 1) * sizeof *offs);
	if (g->outs == NULL || g->outpaths == NULL || g->outpath_text == NULL ||
	    offs == NULL)
		goto fail;
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		n->outs = g->outs + at;
		for (size_t k = 0; k < n->ks->noutputs; k++) {
			char path[PATH_MAX];
			size_t pl;
			if (step_output_path(g, n, k, path, sizeof path) != 0)
				goto fail;
			pl = strlen(path) + 1;
			if (len + pl > cap) {
				char *t;
				while (len + pl > cap)
					cap *= 2;
				if ((t = realloc(g->outpath_text, cap)) == NULL)
					goto fail;
				g->outpath_text = t;
			}
			memcpy(g->outpath_text + len, path, pl);
			offs[at + k] = len;
			len += pl;
		}
		at += n->ks->noutputs;
	}
	at = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		n->outpaths = g->outpaths + at;
		for (size_t k = 0; k < n->ks->noutputs; k++) {
			n->outpaths[k] = g->outpath_text + offs[at + k];
			n->outs[k].folder = (uint8_t)n->ks->outputs[k].folder;
			n->folders |= n->outs[k].folder;
		}
		at += n->ks->noutputs;
	}
	/* a step given a folder output reads it from build/, by its path:
	 * only this machine has that path */
	for (uint32_t i = 0; i < g->n; i++) {
		struct node *n = &g->nodes[i];
		for (size_t o = 0; o < n->ks->norder; o++) {
			const struct node *d;
			size_t k;
			if (step_input_output(g, &n->ks->order[o], &d, &k) == 0 &&
			    d->ks->outputs[k].folder)
				n->folders = 1;
		}
	}
	rv = 0;
fail:
	free(offs);
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
	}
	if ((rv = graph_outputs(g)) != 0) {
		graph_free(g);
		return rv;
	}
	if ((rv = graph_link(g)) != 0) {
		graph_free(g);
		return rv;
	}
	*gp = g;
	return 0;
}

/* Whether step a (of the old descriptions) and b name the same outputs,
 * the same way. */
static int
same_outputs(const kiln_step *a, const kiln_step *b)
{
	if (a->noutputs != b->noutputs)
		return 0;
	for (size_t i = 0; i < a->noutputs; i++)
		if (strcmp(a->outputs[i].name, b->outputs[i].name) != 0 ||
		    strcmp(a->outputs[i].file, b->outputs[i].file) != 0)
			return 0;
	return 1;
}

/* The descriptions were loaded again (an edit to one of them): carry what
 * this daemon knew of each step's last result from the graph before (from,
 * same profile; its descriptions still loaded) into the new one, for
 * steps of the same URL and outputs. Without it every step of the project
 * was decided from the database again after any description edit (0.75 s
 * for a no-op build of 10,000 steps, against 0.02 s): the edit of one
 * asset's description reached the others. Safe for a step whose
 * description changed: the key is made from the new description and
 * compared with the carried one; the quick fingerprint is not carried, as
 * it leaves out what descriptions say (decide.c, quick_key). A step with
 * needs is left to its record (their node indices are the old graph's). */
static void
graph_carry(struct graph *to, struct graph *from)
{
	for (uint32_t i = 0; i < to->n; i++) {
		struct node *n = &to->nodes[i], *o;
		uint32_t at;

		if (!step_index(from->plan, n->ks->url, &at))
			continue;
		o = &from->nodes[at];
		if (!o->have || o->nneeds > 0 || o->nrneeds > 0 || o->w != NULL ||
		    !same_outputs(o->ks, n->ks))
			continue;
		n->key = o->key;
		n->have = 1;
		n->traced = o->traced;
		n->outcome = o->outcome;
		n->duration_ns = o->duration_ns;
		for (size_t k = 0; k < n->ks->noutputs; k++)
			n->outs[k] = o->outs[k];
		/* moved, not copied: the old graph is freed next */
		n->disc = o->disc;
		n->ndisc = o->ndisc;
		n->ndisc_depfile = o->ndisc_depfile;
		n->warnings = o->warnings;
		n->execs = o->execs;
		n->execs_known = o->execs_known;
		o->disc = NULL;
		o->ndisc = 0;
		o->warnings = NULL;
		o->execs = NULL;
	}
}

/* ---- the project ---------------------------------------------------------- */

void
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

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
folder_names_hash(const char *path, unsigned flags, kiln_id *id)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	kiln_hasher *h = NULL;
	DIR *d;
	int rv = 0;

	memset(id, 0, sizeof *id);
	if ((d = opendir(path)) == NULL)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND : KILN_EIO;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    ((flags & NAMES_SKIP_DOT) && de->d_name[0] == '.') ||
		    ((flags & NAMES_SKIP_BUILD) && strcmp(de->d_name, "build") == 0))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nv = realloc(v, ncap * sizeof *nv);
			if (nv == NULL) {
				rv = KILN_ENOMEM;
				goto fail;
			}
			v = nv;
			cap = ncap;
		}
		if ((v[n] = strdup(de->d_name)) == NULL) {
			rv = KILN_ENOMEM;
			goto fail;
		}
		n++;
	}
	if (n > 1)
		qsort(v, n, sizeof *v, name_cmp);
	if ((rv = kiln_hasher_new(&h)) != 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		kiln_hasher_update(h, v[i], strlen(v[i]) + 1);
	kiln_hasher_digest(h, id);
	kiln_hasher_free(h);
fail:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	closedir(d);
	return rv;
}

/* A hash of the names in folder rel (not those starting with '.', which
 * the source walk skips, nor the root's build/, which builds make): a
 * folder whose mtime moved but whose names did not (an editor saving by
 * rename, a build creating build/) needs no reload. */
static void
dir_names(const char *root, const char *rel, kiln_id *id)
{
	char path[PATH_MAX];

	snprintf(path, sizeof path, "%s/%s", root, rel);
	if (folder_names_hash(path, NAMES_SKIP_DOT |
	                      (strcmp(rel, ".") == 0 ? NAMES_SKIP_BUILD : 0), id) != 0)
		memset(id, 0, sizeof *id);
}

/* Watch every folder the source walk read (and so the project folder,
 * where the descriptions are), so that a live build hears of a save in
 * any of them before a build has looked at its files. Best effort: a
 * folder that cannot be watched (inotify's limit) is stat'ed as before,
 * and its saves reach live builds once a build has read them. */
static void
watch_sources(struct engine *e)
{
	const char *const *dirs;
	size_t nd = kiln_desc_dirs(e->desc, &dirs);

	if (e->watch == NULL)
		return;
	watch_folder(e->watch, "");
	for (size_t i = 0; i < nd; i++)
		watch_folder(e->watch, dirs[i]);
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

void
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

/* Log the warnings of a fresh load (a declared input that does not exist
 * yet, a source file whose name kiln cannot use...): `kiln build` shows
 * what fails, but a skipped file fails nothing, so the daemon's log and
 * `kiln check` are where a user sees it. At most 20, then a count. */
static void
diags_log(struct engine *e, const kiln_desc *d)
{
	const kiln_diag *dg;
	size_t n = kiln_desc_diags(d, &dg), nlogged = 0;
	char msg[1200];

	if (e->cfg.log == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		if (dg[i].level != KILN_DIAG_WARNING || nlogged++ >= 20)
			continue;
		snprintf(msg, sizeof msg, "%s:%d:%d: warning: %s%s%s",
		         dg[i].loc.file ? dg[i].loc.file : "?", dg[i].loc.line, dg[i].loc.col,
		         dg[i].field, *dg[i].field ? ": " : "", dg[i].msg);
		e->cfg.log(e->cfg.arg, 0, msg);
	}
	if (nlogged > 20) {
		snprintf(msg, sizeof msg, "and %zu more warnings (kiln check lists them)",
		         nlogged - 20);
		e->cfg.log(e->cfg.arg, 0, msg);
	}
}

/* Load the project, or load it again when a description file or a source
 * folder changed (e->mu held, no build active). */
int
project_fresh(struct engine *e, char *err, size_t errlen)
{
	kiln_desc *d = NULL;
	int64_t load_ns;
	int rv;

	if (e->desc != NULL && !stamps_changed(e)) {
		if (kiln_desc_nerrors(e->desc)) {
			diags_text(e->desc, err, errlen);
			return KILN_EBADPROJECT;
		}
		/* the user's settings file is not the project's: it has its
		 * own stamp (remote.c) */
		return remote_refresh(e, err, errlen);
	}
	/* the clock file times are stamped with: the fine one runs up to a
	 * tick ahead of it, and an edit made in that tick, after the load
	 * read the file, would look older than the load (kiln_clock.h) */
	load_ns = kiln_coarse_wall_ns();
	rv = kiln_desc_load(e->root, &d);
	if (rv == KILN_ENOTFOUND) {
		snprintf(err, errlen, "%s/kiln.yaml: no such file", e->root);
		return KILN_EBADPROJECT;
	}
	if (d == NULL)
		return rv;
	{
		kiln_desc *old_desc = e->desc;
		struct graph *old = e->graphs;

		e->desc = d;
		e->graphs = NULL;
		est_tools_forget(e);   /* kiln_tool objects of old_desc */
		/* each profile built before, built again now from the new
		 * descriptions, keeping what was known of its steps */
		if (!kiln_desc_nerrors(d))
			for (struct graph *g = old, *ng; g != NULL; g = g->next)
				if (graph_get(e, g->profile, &ng) == 0)
					graph_carry(ng, g);
		while (old != NULL) {
			struct graph *g = old;
			old = g->next;
			graph_free(g);
		}
		kiln_desc_free(old_desc);
	}
	if ((rv = stamps_take(e)) != 0)
		return rv;
	watch_sources(e);
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
	diags_log(e, d);
	return remote_configure(e, d, err, errlen);
}

int
graph_get(struct engine *e, const char *profile, struct graph **gp)
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
	/* outputs that would collide in build/ are refused by the loader
	 * (plan_graph.c's plan_outputs), as `kiln check` shows */
	if ((rv = graph_new(plan, &g)) != 0)
		return rv;
	est_graph_init(e, g);
	g->next = e->graphs;
	e->graphs = g;
	*gp = g;
	return 0;
}

void
profile_unknown(const struct engine *e, const char *profile, char *err, size_t errlen)
{
	const char *const *names;
	size_t n = e->desc != NULL ? kiln_desc_profiles(e->desc, &names) : 0;
	size_t used;

	snprintf(err, errlen, "unknown profile '%s'%s", profile, n ? " (profiles:" : "");
	for (size_t i = 0; i < n && (used = strlen(err)) + 1 < errlen; i++)
		snprintf(err + used, errlen - used, " %s%s", names[i], i + 1 < n ? "," : ")");
}
