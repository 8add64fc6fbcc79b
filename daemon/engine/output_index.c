/* output_index.c — kiln-index.txt, the map of a profile's outputs a game
 * loads (its format: materialize.h), written when a build ends: gathered
 * from the graph in the map's order (iorder, sorted once per graph),
 * written beside its place while the build's records commit, and put in
 * place only once the commit succeeded. It lists every step of the graph
 * with an output in build/: a step this daemon has no result of (not
 * decided yet, or failed) as the store's records say (its last good
 * output). After each load of the descriptions, the first build to end
 * (any: targeted, failed) prunes build/<profile>/ (and the intermediates'
 * folder) to the graph's output paths: docs/build.md, "Exactly what the
 * map lists".
 *
 * Threads: iorder_make and index_gather with e->mu held (other builds of
 * the wave may be finishing nodes of the graph); commit_and_index without
 * it, on the worker ending the build, and a thread of its own for the
 * map. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "engine_int.h"
#include "output_index.h"
#include "record_batch.h"
#include "step.h"

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
index_job_free(struct index_job *j)
{
	free(j->v);
	free(j->pending);
	free(j->paths);
	free(j->keep);
	free(j->ikeep);
	free(j->kstrs);
	free(j->strs);
	memset(j, 0, sizeof *j);
}

/* Whether a node's index entry is its bare url: its one output is the
 * unnamed "out" (else each entry is "url#name"). */
static int
url_plain(const struct node *nd)
{
	return nd->ks->noutputs == 1 && strcmp(nd->ks->outputs[0].name, "out") == 0;
}

/* Entry (node, k)'s url into buf ("url" or "url#name"): its length. buf
 * has room for the url, '#', the name and a NUL. */
static size_t
index_url(const struct node *nd, size_t k, char *buf)
{
	const char *name = nd->ks->outputs[k].name;
	size_t lu = strlen(nd->ks->url), ln;

	memcpy(buf, nd->ks->url, lu);
	if (url_plain(nd)) {
		buf[lu] = '\0';
		return lu;
	}
	ln = strlen(name);
	buf[lu] = '#';
	memcpy(buf + lu + 1, name, ln + 1);
	return lu + 1 + ln;
}

struct iorder_sort {
	struct index_slot slot;
	char *url;
};

static int
iorder_cmp(const void *a, const void *b)
{
	return strcmp(((const struct iorder_sort *)a)->url,
	              ((const struct iorder_sort *)b)->url);
}

/* g's index entries in the map's order: every output of every node,
 * sorted by url once per graph (the map is rewritten on every build that
 * changed something, and sorting 100,000 names each time cost more than
 * the rest of writing it). 0 or KILN_ENOMEM. */
int
iorder_make(struct graph *g)
{
	struct iorder_sort *v;
	size_t n = 0, at = 0, slen = 0;
	char *strs;

	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		n += nd->ks->noutputs;
		for (size_t k = 0; k < nd->ks->noutputs; k++)
			slen += strlen(nd->ks->url) + strlen(nd->ks->outputs[k].name) + 2;
	}
	v = calloc(n + 1, sizeof *v);
	strs = malloc(slen + 1);
	if ((g->iorder = calloc(n + 1, sizeof *g->iorder)) == NULL || v == NULL || strs == NULL) {
		free(g->iorder);
		g->iorder = NULL;
		free(v);
		free(strs);
		return KILN_ENOMEM;
	}
	n = 0;
	for (uint32_t i = 0; i < g->n; i++)
		for (size_t k = 0; k < g->nodes[i].ks->noutputs; k++) {
			v[n].slot = (struct index_slot){i, (uint32_t)k};
			v[n].url = strs + at;
			at += index_url(&g->nodes[i], k, strs + at) + 1;
			n++;
		}
	qsort(v, n, sizeof *v, iorder_cmp);
	for (size_t i = 0; i < n; i++)
		g->iorder[i] = v[i].slot;
	g->niorder = n;
	free(v);
	free(strs);
	return 0;
}

/* Whether nd's outputs are listed from what this daemon holds (asked only
 * when no worker holds its result, node_result_held: a build cancelled
 * while its steps are decided ends at once, and read the have a worker
 * was writing; ThreadSanitizer, test_schedule): when it holds a result,
 * or held one that gc made the daemon forget (lost.c, node_unrecord):
 * build/ holds its outputs all the same. Else the store says (pending). */
static int
index_has(const struct node *nd)
{
	return nd->have || nd->unrecorded;
}

/* The strings index_gather makes for nd: "url#name" entries and folder
 * paths ending in '/'. */
static size_t
gather_slen(const struct node *nd)
{
	size_t slen = 0;

	for (size_t k = 0; !url_plain(nd) && k < nd->ks->noutputs; k++)
		slen += strlen(nd->ks->url) + strlen(nd->ks->outputs[k].name) + 2;
	for (size_t k = 0; k < nd->ks->noutputs; k++)
		if (nd->outs[k].folder)
			slen += strlen(nd->outpaths[k]) + 2;
	return slen;
}

/* Every output path of g's steps, relative to build/<profile>/ (keep) or,
 * for intermediates, .kiln/intermediate/<profile>/ (ikeep), each sorted:
 * what the prune keeps. A folder output's path ends in '/', as its map
 * line has it. 0 or KILN_ENOMEM. */
static int
gather_keep(const struct graph *g, struct index_job *j)
{
	size_t cap = 0, slen = 0, at = 0;
	size_t skip = strlen(g->profile) + 1;   /* past "<top>/<profile>/" */

	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		cap += nd->ks->noutputs;
		for (size_t k = 0; k < nd->ks->noutputs; k++)
			if (nd->outs[k].folder)
				slen += strlen(nd->outpaths[k]) + 2;
	}
	if ((j->keep = calloc(cap + 1, sizeof *j->keep)) == NULL ||
	    (j->ikeep = calloc(cap + 1, sizeof *j->ikeep)) == NULL ||
	    (j->kstrs = malloc(slen + 1)) == NULL)
		return KILN_ENOMEM;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		int im = nd->ks->intermediate;
		const char **v = im ? j->ikeep : j->keep;
		size_t *n = im ? &j->nikeep : &j->nkeep;
		size_t top = strlen(im ? ".kiln/intermediate/" : "build/") + skip;
		for (size_t k = 0; k < nd->ks->noutputs; k++) {
			if (!nd->outs[k].folder) {
				v[(*n)++] = nd->outpaths[k] + top;
				continue;
			}
			v[(*n)++] = j->kstrs + at;
			at += (size_t)sprintf(j->kstrs + at, "%s/", nd->outpaths[k] + top) + 1;
		}
	}
	qsort(j->keep, j->nkeep, sizeof *j->keep, str_cmp);
	qsort(j->ikeep, j->nikeep, sizeof *j->ikeep, str_cmp);
	return 0;
}

/* 1: there is a map to write (j filled); 0: nothing changed, or no memory
 * (the map stays as it is and is written by a later build). A step a
 * worker holds is left out, and the map is written again next time; a
 * step without a result here is listed as the store's records say
 * (j->pending, index_fill): its last good outputs are still in build/. */
int
index_gather(struct engine *e, struct build *b, struct index_job *j)
{
	struct graph *g = b->g;
	size_t cap = 0, slen = 0, at = 0, skip = strlen("build/") + strlen(g->profile) + 1;
	char path[PATH_MAX];
	struct stat st;
	int held = 0;

	memset(j, 0, sizeof *j);
	snprintf(path, sizeof path, "build/%s/kiln-index.txt", g->profile);
	if (!g->index_dirty && !g->prune_due && fstatat(e->rootfd, path, &st, 0) == 0)
		return 0;
	if (g->iorder == NULL && iorder_make(g) != 0)
		return 0;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct node *nd = &g->nodes[i];
		if (nd->ks->intermediate)
			continue;
		cap += nd->ks->noutputs;
		slen += gather_slen(nd);
	}
	if ((j->v = calloc(cap + 1, sizeof *j->v)) == NULL ||
	    (j->pending = calloc(cap + 1, 1)) == NULL ||
	    (j->paths = calloc(cap + 1, sizeof *j->paths)) == NULL ||
	    (j->strs = malloc(slen + 1)) == NULL) {
		index_job_free(j);
		return 0;
	}
	for (size_t i = 0; i < g->niorder; i++) {
		const struct node *nd = &g->nodes[g->iorder[i].node];
		size_t k = g->iorder[i].out;
		struct index_entry *x;
		/* an intermediate is no one's to load: not in the map */
		if (nd->ks->intermediate)
			continue;
		if (node_result_held(nd)) {
			held = 1;
			continue;
		}
		x = &j->v[j->n];
		j->pending[j->n] = !index_has(nd);
		j->paths[j->n++] = nd->outpaths[k];
		if (!url_plain(nd)) {
			x->url = j->strs + at;
			at += index_url(nd, k, j->strs + at) + 1;
		} else {
			x->url = nd->ks->url;
		}
		/* relative to build/<profile>/; a folder's ends in '/' */
		x->file = nd->outpaths[k] + skip;
		if (nd->outs[k].folder) {
			int len = sprintf(j->strs + at, "%s/", x->file);
			x->file = j->strs + at;
			at += (size_t)len + 1;
		}
		if (!j->pending[j->n - 1]) {
			x->id = nd->outs[k].id;
			x->size = nd->outs[k].size;
		}
	}
	g->index_dirty = held;
	snprintf(j->profile, sizeof j->profile, "%s", g->profile);
	/* Steps only disappear with a new description (a new graph): one
	 * walk of build/ after each load, at the end of whatever build comes
	 * first (a targeted one, one with failures). It keeps the path of
	 * every step of the graph, whatever its state: another build may be
	 * putting any of them in place meanwhile. */
	j->prune = g->prune_due && gather_keep(g, j) == 0;
	if (j->prune)
		g->prune_due = 0;
	return 1;
}

/* The pending entry x (its file at path): what the store's records say
 * build/ holds for it, the output its step last made (its index record)
 * when the files record of path says that is what was put there. 1 with
 * x's id and size filled, or 0: nothing of it is in build/ (never built,
 * or built elsewhere, or its output named another file then). */
static int
index_fill_one(struct engine *e, const char *profile, const char *path,
               struct index_entry *x)
{
	kiln_file_rec rec;
	struct stat st;
	size_t len = strlen(x->file);

	if (kiln_store_index_get(e->s, profile, x->url, &x->id) != 0)
		return 0;
	if (x->file[len - 1] == '/')   /* a folder: checked by content, no stat record */
		return fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       S_ISDIR(st.st_mode) && kiln_store_has(e->s, &x->id, &x->size) == 0;
	if (kiln_store_file_get(e->s, path, &rec) != 0 || !id_eq(&rec.hash, &x->id))
		return 0;
	x->size = rec.size;
	return 1;
}

/* Fill j's pending entries from the store (e->mu not held), leaving out
 * those with nothing in build/. */
static void
index_fill(struct engine *e, struct index_job *j)
{
	size_t n = 0;

	for (size_t i = 0; i < j->n; i++) {
		if (j->pending[i] && !index_fill_one(e, j->profile, j->paths[i], &j->v[i]))
			continue;
		j->v[n++] = j->v[i];
	}
	j->n = n;
}

/* Make build/<profile>/ hold the graph's outputs and nothing else: the
 * files of steps no longer described, of outputs renamed, and whatever
 * else was left there go. */
static void
index_prune(struct engine *e, const struct index_job *j)
{
	int rv;

	if (!j->prune)
		return;
	if ((rv = materialize_prune(e->root, j->profile, j->keep, j->nkeep)) != 0)
		engine_logf(e, 1, "removing the files of steps no longer described from "
		            "build/%s/: %s", j->profile, kiln_strerror(rv));
	/* an intermediate's file is a hard link to its blob: left there, it
	 * would keep the bytes on disk after gc took the blob */
	if ((rv = materialize_prune_in(e->root, ".kiln/intermediate", j->profile,
	                               j->ikeep, j->nikeep)) != 0)
		engine_logf(e, 1, "removing the files of intermediates no longer described "
		            "from .kiln/intermediate/%s/: %s", j->profile, kiln_strerror(rv));
}

/* The index map, written beside its place on a thread of its own while
 * the build's records are committed. */
struct index_writer {
	struct engine *e;
	struct index_job *job;
	struct index_tmp tmp;
	int rv;
};

static void *
index_writer_main(void *arg)
{
	struct index_writer *w = arg;

	index_fill(w->e, w->job);
	/* in the map's order already (iorder) */
	w->rv = materialize_index_write_tmp(w->e->root, w->job->profile,
	                                    w->job->v, w->job->n,
	                                    w->e->cfg.build_umask, &w->tmp);
	return NULL;
}

/* Commit the build's records and write its index map (e->mu not held):
 * the map is written while the commit waits on the disk (its fdatasyncs
 * and fsyncs), and put in its place only
 * once the commit has returned, so it never goes ahead of it. A failed
 * commit keeps the old map: the new one would name outputs the store has
 * no record of (build_end marks the graph's map dirty: the next build
 * writes it). *commit_rv is the commit's result. Returns 0 or the
 * error writing the map. */
int
commit_and_index(struct engine *e, struct index_job *job, int *commit_rv)
{
	struct index_writer w = {e, job, {-1, ""}, 0};
	pthread_t th;
	int threaded = 0, rv;

	if (job != NULL)
		threaded = pthread_create(&th, NULL, index_writer_main, &w) == 0;
	*commit_rv = batch_commit(e);
	if (job == NULL)
		return 0;
	if (threaded)
		pthread_join(th, NULL);
	else
		index_writer_main(&w);   /* no thread: one after the other */
	if (*commit_rv != 0) {
		materialize_index_discard(&w.tmp);
		return 0;
	}
	if ((rv = w.rv) == 0 && (rv = materialize_index_put(&w.tmp)) == 0)
		index_prune(e, job);
	return rv;
}
