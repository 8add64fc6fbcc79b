/* bundle_build.c — running a bundle's step (`bundles:` in kiln.yaml): the
 * built-in tool kiln-bundle, which packs the outputs the step's order
 * lists into a kpak, its C header and its manifest (kpak_write.c). It is
 * an ordinary step in every other way (decided, cached, published,
 * materialized and recorded as any), but no process is spawned and it is
 * never sent to a build agent: each entry's bytes are read from the
 * store, by the blob its prerequisite's result recorded, never from
 * build/ (which someone may have edited).
 *
 * Threads: the worker holding the node (N_RUNNING), unlocked; the end is
 * handed to engine_tool_done as a tool's would be. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "engine_int.h"
#include "bundle_build.h"
#include "kpak_write.h"
#include "schedule.h"
#include "scratch.h"
#include "step.h"

const char *
bundle_entry_name(const struct graph *g, const struct node *d, size_t k)
{
	size_t top = d->ks->intermediate ? strlen(".kiln/intermediate/") : strlen("build/");

	return d->outpaths[k] + top + strlen(g->profile) + 1;
}

int
bundle_key_parts(const struct graph *g, const struct node *n, struct key_parts *kp)
{
	char url[600], z[64];
	int rv = 0;

	for (size_t i = 0; rv == 0 && i < n->ks->norder; i++) {
		const struct node *d;
		size_t k;
		if (step_input_output(g, &n->ks->order[i], &d, &k) != 0)
			continue;
		step_output_url(d, k, url, sizeof url);
		rv = key_parts_text2(kp, "bundle entry ", url, bundle_entry_name(g, d, k));
	}
	if (rv == 0 && n->ks->bundle != NULL && n->ks->bundle->compress == KILN_COMPRESS_ZSTD) {
		snprintf(z, sizeof z, "%s level %d", ZSTD_versionString(), KPAK_ZSTD_LEVEL);
		rv = key_parts_text(kp, "bundle zstd", z);
	}
	return rv;
}

/* The entries of n: one per item of its order, in a malloc'd array whose
 * urls are in the same block. NULL when out of memory. */
static struct kpak_in *
bundle_entries(const struct graph *g, const struct node *n)
{
	size_t no = n->ks->norder;
	struct kpak_in *v = calloc(no ? no : 1, sizeof *v + 600);
	char *urls = (char *)(v + (no ? no : 1));

	for (size_t i = 0; v != NULL && i < no; i++) {
		const struct node *d;
		size_t k;
		if (step_input_output(g, &n->ks->order[i], &d, &k) != 0) {
			free(v);   /* the loader made the order from the plan: not reached */
			return NULL;
		}
		step_output_url(d, k, urls + 600 * i, 600);
		v[i] = (struct kpak_in){bundle_entry_name(g, d, k), urls + 600 * i,
		                        d->outs[k].id, d->outs[k].size, 0};
	}
	return v;
}

/* Pack into the scratch folder dir: 0 packed, else the reason in err. */
static int
bundle_pack(struct engine *e, const struct graph *g, const struct node *n,
            const char *dir, char *err, size_t errlen)
{
	const kiln_bundle_plan *bp = n->ks->bundle;
	struct kpak_opts o = {bp->name, bp->align, bp->compress == KILN_COMPRESS_ZSTD};
	char paths[3][PATH_MAX * 2];
	struct kpak_in *v = bundle_entries(g, n);
	int rv;

	if (v == NULL) {
		snprintf(err, errlen, "bundle '%s': out of memory", bp->name);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < 3 && i < n->ks->noutputs; i++)
		snprintf(paths[i], sizeof paths[i], "%s/%s", dir, n->ks->outputs[i].file);
	rv = kpak_write(e->s, &o, v, n->ks->norder, paths[0], paths[1],
	                n->ks->noutputs > 2 ? paths[2] : NULL, err, errlen);
	free(v);
	return rv;
}

int
bundle_start(struct engine *e, struct graph *g, struct node *n)
{
	struct spawn_result res = {.exited = 1};
	char dir[PATH_MAX], err[2048] = "";
	int rv;

	n->w->log_fd = -1;
	free(n->w->landed);
	n->w->landed = NULL;
	n->w->machine[0] = '\0';
	n->w->agent_pid = 0;
	n->w->timeout = NULL;
	if ((rv = scratch_take(e, &n->w->scratch, &n->w->log_fd, &n->w->trace_off)) != 0) {
		set_error(n, "%s: cannot make its scratch folder in .kiln/scratch: %s",
		          n->ks->url, kiln_strerror(rv));
		return rv;
	}
	n->w->start_ns = kiln_mono_ns();
	n->w->start_wall_ns = kiln_coarse_wall_ns();
	if ((rv = scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir)) == 0)
		rv = bundle_pack(e, g, n, dir, err, sizeof err);
	else
		snprintf(err, sizeof err, "%s: scratch path: %s", n->ks->url, kiln_strerror(rv));
	if (rv != 0) {
		/* the step's log says why, as a tool's stderr would */
		dprintf(n->w->log_fd, "kiln-bundle: %s\n", err);
		res.status = 1;
	}
	res.wall_ns = kiln_mono_ns() - n->w->start_ns;
	engine_tool_done(&n->w->run, &res);
	return 0;
}
