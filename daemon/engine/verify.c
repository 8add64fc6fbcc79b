/* verify.c — after a tool ran: did it read what its step's key
 * was made from? (see publish.h, run_verify)
 *
 * A result is recorded under the key computed before the tool started.
 * If anything the tool may have read changed in between (an editor saving
 * twice in a second), the outputs belong to no key we know, and storing
 * them under that one would serve them later as the build of the older
 * content. So before anything is published:
 *
 * - the inputs the key names — the tool's program, each declared source,
 *   each prerequisite output and each output `kiln need` handed over — are
 *   stat'ed again and compared with the record the key was made from (a
 *   record whose stat cannot vouch for its content, one changed in the
 *   clock tick it was stat'ed in, is compared by content). Any stat change
 *   counts: the content may have changed and changed back;
 * - the files found only while it ran (its depfile's, its trace's) are
 *   hashed now, and one changed after the tool started ("too new", ccache's
 *   rule) may not be what the tool read.
 *
 * Either way the step is decided again (schedule.c's work_complete), as
 * ninja and Bazel do with "file modified during build". The hashes taken
 * here for the discovered files are the ones its action result records:
 * asking the file table again later could give a newer answer that
 * another step's check just took in.
 *
 * Threads: a worker holding the node (N_RUNNING, finishing). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine_int.h"
#include "decide.h"
#include "discover.h"
#include "publish.h"

static int64_t
ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Whether a stat shows a change at or after since_ns, a reading of the
 * coarse clock the kernel stamps file changes from: a change after that
 * reading carries at least that time. (A change in the same tick just
 * before it does too: the step is decided again, one tick later.) Only
 * ctime: mtime can be set to anything by anyone. */
static int
changed_since(const struct stat *st, int64_t since_ns)
{
	return ts_ns(&st->st_ctim) >= since_ns;
}

/* The declared inputs, the program, the prerequisite outputs and the
 * needed outputs: still as when the key was made. NULL, or the first
 * path that is not. */
static const char *
key_inputs_changed(struct engine *e, struct graph *g, struct node *n)
{
	const kiln_step *ks = n->ks;
	char exe[PATH_MAX];
	struct fs_seen exe_seen;
	static const char program[] = "the tool's program";

	if (!ks->tool->builtin &&
	    (step_program(e, n, exe, sizeof exe, NULL, &exe_seen) != 0 ||
	     !filestate_unchanged(e->fs, exe, &exe_seen)))
		return program;
	for (size_t i = 0; i < ks->ninputs; i++)
		if (n->w->seen_in == NULL || !filestate_unchanged(e->fs, ks->inputs[i], &n->w->seen_in[i])) {
			filestate_forget(e->fs, ks->inputs[i]);
			return ks->inputs[i];
		}
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			if (!step_output_unchanged(e, d->outpaths[i], &d->outs[i]))
				return d->outpaths[i];
	}
	for (size_t j = 0; j < n->nrneeds; j++) {
		const struct need_dep *nd = &n->rneeds[j];
		const struct node *d;
		if (nd->out < 0)
			continue;
		d = &g->nodes[nd->idx];
		if (!step_output_unchanged(e, d->outpaths[nd->out], &d->outs[nd->out]))
			return d->outpaths[nd->out];
	}
	return NULL;
}

/* A discovered folder ("dir/"): its listing's hash, unless it changed
 * after start_ns (then *changed is set). 0 or an error. */
static int
folder_seen(struct engine *e, const char *path, int64_t start_ns, struct disc_seen *ds,
            int *changed)
{
	struct stat st;
	int rv;

	if (fstatat(path[0] == '/' ? AT_FDCWD : e->rootfd, path, &st, 0) != 0) {
		ds->missing = 1;
		return 0;
	}
	if (changed_since(&st, start_ns)) {
		*changed = 1;
		return 0;
	}
	rv = trace_dep_hash(e, path, &ds->h);
	ds->missing = rv == KILN_ENOTFOUND;
	return rv != 0 && rv != KILN_ENOTFOUND ? rv : 0;
}

/* Hash n->disc now into n->w->disc_seen. 0 (*changed set when disc[*at]
 * changed after the tool started: disc_seen stays NULL) or an error. */
static int
discovered_seen(struct engine *e, struct node *n, size_t *at, int *changed)
{
	struct disc_seen *v = NULL;
	int rv = 0;

	free(n->w->disc_seen);
	n->w->disc_seen = NULL;
	if (n->ndisc > 0 && (v = calloc(n->ndisc, sizeof *v)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n->ndisc && rv == 0 && !*changed; i++) {
		const char *p = n->disc[i];
		size_t len = strlen(p);
		struct fs_seen seen;
		*at = i;
		if (len > 0 && p[len - 1] == '/') {
			rv = folder_seen(e, p, n->w->start_wall_ns, &v[i], changed);
			continue;
		}
		/* what this pass knew of it may predate the run */
		filestate_forget(e->fs, p);
		rv = filestate_hash_seen(e->fs, p, &v[i].h, &seen);
		if (rv == KILN_ENOTFOUND) {
			v[i].missing = 1;
			rv = 0;
		} else if (rv == 0 && seen.rec.ctime_ns >= n->w->start_wall_ns) {
			*changed = 1;
		}
	}
	if (rv != 0 || *changed) {
		free(v);
		return rv;
	}
	n->w->disc_seen = v;
	return 0;
}

enum verify_result
run_verify(struct engine *e, struct graph *g, struct node *n, char *why, size_t whylen)
{
	const char *what = key_inputs_changed(e, g, n);
	size_t at = 0;
	int rv, changed = 0;

	if (what != NULL) {
		snprintf(why, whylen, "%s changed while its tool ran", what);
		return VERIFY_CHANGED;
	}
	if ((rv = discovered_seen(e, n, &at, &changed)) != 0) {
		snprintf(why, whylen, "%s", kiln_strerror(rv));
		return VERIFY_FAILED;
	}
	if (changed) {
		snprintf(why, whylen, "%s (found while it ran) changed while its tool ran",
		         n->disc[at]);
		return VERIFY_CHANGED;
	}
	return VERIFY_HELD;
}
