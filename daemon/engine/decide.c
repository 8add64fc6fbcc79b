/* decide.c — deciding whether a step is up to date, may reuse a cached
 * result, or must run (step_eval; see decide.h).
 *
 * A cheap fingerprint first (quick_key: the program, the one it exec'd in
 * its place last time (tool_runs.c), and every input's hash): equal to
 * the last one, with the materialized files untouched and
 * the blobs still in the store, the step is up to date without computing
 * its key. Otherwise the key parts are gathered (decide_key.c) and hashed
 * into the action key. The same key as this daemon's last decision, with
 * the materialized files untouched, is up to date without a database
 * read. Otherwise the cache is asked (decide_cache.c): a usable result is
 * reused (materialized again, publish_outputs.c, and recorded,
 * publish_records.c); anything else runs (run.c, then publish.c). Every
 * decision that differs from the stored one is recorded with the key's
 * parts, so `kiln why` can say what changed.
 *
 * Threads: the worker holding the node (N_EVAL), unlocked. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "engine_int.h"
#include "folder_out.h"
#include "decide.h"
#include "discover.h"
#include "lost.h"
#include "publish.h"
#include "record_batch.h"
#include "remote.h"
#include "selfwrite.h"
#include "step.h"
#include "tool_runs.h"
#include "watch.h"

static void
set_reason(struct node *n, const char *reason)
{
	free(n->reason);
	n->reason = strdup(reason);
}

static int
prev_same_key(const struct node *n)
{
	return n->w->prev != NULL && n->w->prev->key.len == 16 &&
	       memcmp(n->w->prev->key.data, n->w->new_key.b, 16) == 0;
}

/* The changes since the previous record, as a one-line reason. */
static void
reason_of_changes(struct node *n, const char *lead, char *out, size_t outlen)
{
	Kiln__KeyChange **ch = NULL;
	size_t nch = 0;
	char what[900];
	int total;

	total = key_parts_diff(n->w->prev->parts, n->w->prev->n_parts, &n->w->parts, 0,
	                       &ch, &nch, what, sizeof what);
	key_changes_free(ch);
	if (total <= 0)
		snprintf(out, outlen, "%s", lead);
	else
		snprintf(out, outlen, "%s%s", lead, what);
}

/* Whether every materialized output is as this daemon left it, and its
 * blob still in the store. */
static int
outputs_intact(struct engine *e, struct node *n)
{
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		struct node_out *o = &n->outs[i];
		uint64_t gen = 0;
		int watched;
		/* a folder: each file's content against its tree record (the
		 * watch sees one folder, not what is inside it) */
		if (o->folder) {
			if (!folder_unchanged(e, n->outpaths[i], &o->id))
				return 0;
			continue;
		}
		/* nothing touched it since it was last found intact */
		if (e->watch != NULL && watch_clean(e->watch, n->outpaths[i], o->mat_gen))
			continue;
		watched = e->watch != NULL && watch_prepare(e->watch, n->outpaths[i], &gen) == 0;
		o->mat_gen = 0;
		if (!mat_unchanged(e, n->outpaths[i], &o->mat))
			return 0;
		o->mat_gen = watched ? gen : 0;
	}
	/* and the store still has what the index names */
	for (size_t i = 0; i < n->ks->noutputs; i++)
		if (!blob_present(e, &n->outs[i]))
			return 0;
	return 1;
}

/* Whether an output n's cached result puts back in build/ is there but
 * edited (not merely missing): 1 with its path in n->restored (malloc'd;
 * left NULL without memory), else 0. Looked at before the restore, which
 * overwrites it: what this daemon materialized (outs[].mat), else the
 * store's files record, else (no record) anything there counts as edited. */
static int
restore_edited(struct engine *e, struct node *n)
{
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		const struct node_out *o = &n->outs[i];
		const char *path = n->outpaths[i];
		kiln_file_rec rec = o->mat;
		struct stat st;
		if (fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;   /* missing: a plain restore */
		if (o->folder) {
			if (folder_unchanged(e, path, &o->id))
				continue;
		} else if ((id_eq(&rec.hash, &o->id) ||
		            kiln_store_file_get(e->s, path, &rec) == 0) &&
		           id_eq(&rec.hash, &o->id) && mat_unchanged(e, path, &rec)) {
			continue;
		}
		free(n->restored);
		n->restored = strdup(path);
		return 1;
	}
	return 0;
}

/* A cheap fingerprint of what can change between two builds of one loaded
 * description: the tool's program and the content of every input. The
 * rest of the key (argv, env, params, variables, outputs) comes from the
 * description, which a reload replaces together with the graph. Equal to
 * the last one, the full key needs no computing. 0, or an error (the slow
 * path then says which input is missing). */
static int
quick_key(struct engine *e, const struct graph *g, struct node *n, kiln_id *q)
{
	kiln_id small[64], *v = small;
	size_t nv = 1, cap = 2;   /* the program's, and what it execs */
	char exe[PATH_MAX];
	int rv;

	for (uint32_t k = 0; k < n->ndeps; k++)
		cap += g->nodes[n->deps[k]].ks->noutputs;
	cap += n->ks->ninputs + n->ndisc + n->nneeds;
	if (cap > 64 && (v = malloc(cap * sizeof *v)) == NULL)
		return KILN_ENOMEM;
	if ((rv = step_program(e, n, exe, sizeof exe, &v[0], NULL)) != 0)
		goto fail;
	nv += (size_t)tool_runs_quick(e, n, exe, &v[nv]);
	for (size_t i = 0; i < n->ks->ninputs; i++)
		if ((rv = filestate_hash(e->fs, n->ks->inputs[i], &v[nv++])) != 0)
			goto fail;
	for (uint32_t k = 0; k < n->ndeps; k++) {
		const struct node *d = &g->nodes[n->deps[k]];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			v[nv++] = d->outs[i].id;
	}
	/* discovered files: a missing one hashes as zeros, which no content
	 * has in practice */
	for (size_t i = 0; i < n->ndisc; i++) {
		int r = trace_dep_hash(e, n->disc[i], &v[nv++]);
		if (r != 0 && r != KILN_ENOTFOUND) {
			rv = r;
			goto fail;
		}
	}
	/* needed outputs as need_prereqs found them done in this wave */
	for (size_t i = 0; i < n->nneeds; i++)
		v[nv++] = n->needs[i].cur;
	kiln_id_of_buf(v, nv * sizeof *v, q);
fail:
	if (v != small)
		free(v);
	return rv;
}

int
step_quick_key(struct engine *e, const struct graph *g, struct node *n, kiln_id *q)
{
	return quick_key(e, g, n, q);
}

/* n's last run wrote a project file and nothing n reads changed since:
 * it fails again as it did, not run (its run would write again, and the
 * write start another build). */
static enum eval_result
selfwrite_fail(struct node *n)
{
	char reason[PATH_MAX + 200];

	snprintf(reason, sizeof reason, "not run again: its last run wrote %s, outside "
	         "its scratch folder, and nothing it reads changed since", n->selfw_path);
	set_reason(n, reason);
	/* the words of that run's failure (trace.c's), so that a client sees
	 * the same failure, not a new one (kiln watch prints it once) */
	set_error(n, "%s: the tool wrote outside its scratch folder: %s", n->ks->url,
	          n->selfw_path);
	n->duration_ns = 0;   /* no tool ran in this decision */
	n->have = 0;
	return EVAL_FAIL;
}

enum eval_result
step_eval(struct engine *e, struct graph *g, struct node *n, int dry_run)
{
	kiln_id quick;
	char dep_why[600];
	int have_quick;
	char reason[1200];
	int missing_blob, rv, same, downloaded = 0, edited = 0;
	enum cache_result cr;
	size_t hit;

	have_quick = quick_key(e, g, n, &quick) == 0;
	if (have_quick && n->have && id_eq(&quick, &n->quick) && outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		n->rec_lo = 0;   /* queues nothing */
		return EVAL_DONE;
	}
	if (have_quick && selfwrite_unchanged(n, &quick))
		return selfwrite_fail(n);
	selfwrite_forget(n);   /* decided afresh: a run says again */
	lost_decision_begins(e, n);
	free(n->restored);   /* a new decision: kiln why tells of this one */
	n->restored = NULL;
	if (n->error != NULL) {  /* from quick_key's tool lookup */
		free(n->error);
		n->error = NULL;
	}
	if (node_work_get(n) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(KILN_ENOMEM));
		n->have = 0;
		return EVAL_FAIL;
	}
	key_parts_free(&n->w->parts);
	prev_drop(n);
	n->w->has_log = 0;
	n->duration_ns = 0;
	memset(&n->w->res, 0, sizeof n->w->res);
	if ((rv = step_key_parts(e, g, n, &n->w->parts)) != 0 ||
	    (rv = key_parts_key(&n->w->parts, &n->w->new_key)) != 0) {
		if (n->error == NULL || rv == KILN_ENOMEM)
			set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
		n->have = 0;
		return EVAL_FAIL;
	}
	n->quick = quick;
	if (!have_quick)
		memset(&n->quick, 0, sizeof n->quick);
	/* the same key with files discovered last time (a depfile) still
	 * needs them checked: the cache lookup below does */
	if (n->ndisc == 0 && n->nneeds == 0 && n->have && id_eq(&n->key, &n->w->new_key) &&
	    outputs_intact(e, n)) {
		n->outcome = O_UP_TO_DATE;
		key_parts_free(&n->w->parts);
		return EVAL_DONE;
	}
	/* The same key as this daemon's last decision (build/ lost outputs: a
	 * restore): the record that decision left holds this key, so a cache
	 * hit needs no record read (a large restore reads far fewer records).
	 * (Had that record's commit failed, the stale one stays.) */
	same = n->have && id_eq(&n->key, &n->w->new_key);
	if (!same)
		prev_load(e, g, n);
	dep_why[0] = '\0';
	if ((cr = cache_lookup(e, g, n, &missing_blob, &hit, dep_why, sizeof dep_why)) ==
	    CACHE_NEEDS) {
		/* decided again once what it needs is done (need.c) */
		n->have = 0;
		prev_drop(n);
		key_parts_free(&n->w->parts);
		return EVAL_NEEDS;
	}
	/* a local miss: ask the shared cache; a result there that used
	 * `kiln need` may first need steps done, like a local one */
	if (cr == CACHE_MISS && !dry_run && remote_enabled(e)) {
		enum cache_result rr = cache_lookup_remote(e, g, n);
		if (rr == CACHE_NEEDS) {
			n->have = 0;
			prev_drop(n);
			key_parts_free(&n->w->parts);
			return EVAL_NEEDS;
		}
		if (rr == CACHE_HIT) {
			cr = CACHE_HIT;
			hit = 0;
			downloaded = 1;
		}
	}
	/* the same result as build/ should hold: say so when it puts back a
	 * file someone edited there (kiln why, the step's event) */
	edited = cr == CACHE_HIT && !dry_run && !downloaded && hit == 0 &&
	         (same || prev_same_key(n)) && restore_edited(e, n);
	if (cr == CACHE_HIT && !dry_run && (rv = materialize_all(e, n)) != 0) {
		if (rv != KILN_ENOTFOUND)
			return EVAL_FAIL;
		/* its blob went after the lookup: another step that found its
		 * own copy in build/ edited moved that blob (the same bytes) to
		 * corrupt/, or gc took it. Not a failure: run it. */
		free(n->error);
		n->error = NULL;
		cr = CACHE_MISS;
		missing_blob = 1;
	}
	if (cr == CACHE_HIT) {
		/* an older result of the same key (an undo) is not "up to date":
		 * build/ gets other bytes */
		int up = !downloaded && (same || prev_same_key(n)) && hit == 0;
		if (!up && hit > 0)
			prev_load(e, g, n);
		if (downloaded && n->w->prev != NULL && !prev_same_key(n))
			reason_of_changes(n, "downloaded from the shared cache: ", reason,
			                  sizeof reason);
		else if (downloaded)
			snprintf(reason, sizeof reason, "downloaded from the shared cache");
		else if (up && edited)
			snprintf(reason, sizeof reason, "up to date; %.900s was edited in "
			         "build/: restored from the store",
			         n->restored != NULL ? n->restored : "an output");
		else if (up)
			snprintf(reason, sizeof reason, "%s", n->have ?
			         "up to date; restored its outputs in build/ from the store" :
			         "up to date");
		else if (hit > 0 && prev_same_key(n))
			snprintf(reason, sizeof reason, "reused an earlier result of the same "
			         "key: the files it discovered hold again (%s)", dep_why[0] ?
			         dep_why : "an undo");
		else if (n->w->prev != NULL)
			reason_of_changes(n, "reused a cached result: ", reason, sizeof reason);
		else
			snprintf(reason, sizeof reason, "reused a cached result (no earlier "
			         "build of this step for profile %s)", g->profile);
		set_reason(n, reason);
		n->key = n->w->new_key;
		n->outcome = up ? O_UP_TO_DATE : O_REUSED;
		/* a dry run materializes nothing: its dependents may use the
		 * output ids, but the next real build must not think build/
		 * holds them */
		n->have = !dry_run;
		if (dry_run)
			memset(&n->quick, 0, sizeof n->quick);
		if (!dry_run) {
			kiln_batch *b;
			int qrv = outputs_record(e, g, n);
			engine_batch_lock(e, &b);
			if (qrv == 0)
				qrv = kiln_batch_action_touch(b, &n->w->new_key);
			engine_batch_unlock(e);
			if (qrv == 0 && !up)
				qrv = record_put(e, g, n, KILN__STEP_RECORD__DECISION__REUSED);
			n->rec_failed = qrv != 0;   /* unrecorded: node_finish loses it */
		}
		if (n->outcome == O_REUSED || (up && edited))
			n->send_event = 1;
		prev_drop(n);
		key_parts_free(&n->w->parts);
		return EVAL_DONE;
	}
	if (same)   /* the reason and the run's record compare with it */
		prev_load(e, g, n);
	if (n->w->prev == NULL)
		snprintf(reason, sizeof reason, "never built for profile %s", g->profile);
	else if (prev_same_key(n) && dep_why[0])
		snprintf(reason, sizeof reason, "%s", dep_why);
	else if (prev_same_key(n))
		snprintf(reason, sizeof reason, "%s", missing_blob ?
		         "its cached outputs are gone from the store (or were edited in build/)" :
		         n->w->prev->decision == KILN__STEP_RECORD__DECISION__FAILED ?
		         "it failed last time" : "no cached result for its key");
	else
		reason_of_changes(n, "", reason, sizeof reason);
	set_reason(n, reason);
	n->have = 0;
	return EVAL_RUN;
}
