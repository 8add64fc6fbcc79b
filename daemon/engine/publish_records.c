/* publish_records.c — a step's records, queued in the record batch
 * (record_batch.c) for the next commit: its decision record (with the key's
 * parts and what changed since the previous one, for `kiln why`), its
 * discovered dependencies (for `kiln rdeps`), its index entries and the
 * materialized files' stats. A step is published when these commit.
 *
 * Threads: the worker holding the node; the batch under batch_mu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "discover.h"
#include "publish.h"
#include "record_batch.h"
#include "step.h"
#include "tool_runs.h"

void
prev_load(struct engine *e, const struct graph *g, struct node *n)
{
	void *data;
	size_t len;

	if (n->w->prev != NULL)
		return;
	if (kiln_store_step_get(e->s, g->profile, n->ks->url, &data, &len) != 0)
		return;
	n->w->prev = kiln__step_record__unpack(NULL, len, data);
	free(data);
}

void
prev_drop(struct node *n)
{
	if (n->w == NULL)
		return;
	if (n->w->prev != NULL)
		kiln__step_record__free_unpacked(n->w->prev, NULL);
	n->w->prev = NULL;
}

/* Queue n's discovered dependencies for the store's deps records ("f:"
 * files, "u:" URLs it needed; `kiln rdeps` and the live recompile look
 * them up in reverse). */
static int
deps_queue(kiln_batch *b, const struct graph *g, const struct node *n)
{
	char **v = calloc((size_t)n->ndisc + n->nneeds + 1, sizeof *v);
	size_t nv = 0;
	int rv = 0;

	if (v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n->ndisc + n->nneeds && rv == 0; i++) {
		const char *what = i < n->ndisc ? n->disc[i] : n->needs[i - n->ndisc].url;
		size_t len = strlen(what) + 3;
		if ((v[nv] = malloc(len)) == NULL)
			rv = KILN_ENOMEM;
		else
			snprintf(v[nv++], len, "%s:%s", i < n->ndisc ? "f" : "u", what);
	}
	if (rv == 0)
		rv = kiln_batch_deps_set(b, g->profile, n->ks->url,
		                         (const char *const *)v, nv);
	for (size_t i = 0; i < nv; i++)
		free(v[i]);
	free(v);
	return rv;
}

/* Queue the decision record of n (outputs and log as they are now). */
int
record_put(struct engine *e, const struct graph *g, struct node *n,
           Kiln__StepRecord__Decision decision)
{
	Kiln__StepRecord r = KILN__STEP_RECORD__INIT;
	struct pb_outputs *po = NULL;
	char what[600];
	Kiln__KeyPart **parts = NULL;
	Kiln__KeyChange **ch = NULL;
	size_t nparts = 0, nch = 0, len;
	uint8_t *buf;
	kiln_batch *b;
	int rv;

	if ((rv = key_parts_to_pb(&n->w->parts, &parts, &nparts)) != 0)
		return rv;
	if (n->w->prev != NULL &&
	    key_parts_diff(n->w->prev->parts, n->w->prev->n_parts, &n->w->parts, 64,
	                   &ch, &nch, what, sizeof what) < 0) {
		key_parts_pb_free(parts);
		return KILN_ENOMEM;
	}
	r.key.data = n->w->new_key.b;
	r.key.len = 16;
	r.decision = decision;
	r.reason = n->reason ? n->reason : (char *)"";
	r.changes = ch;
	r.n_changes = nch;
	r.parts = parts;
	r.n_parts = nparts;
	if (decision != KILN__STEP_RECORD__DECISION__FAILED) {
		if ((po = step_outputs_pb(n, 1)) == NULL) {
			key_parts_pb_free(parts);
			key_changes_free(ch);
			return KILN_ENOMEM;
		}
		r.outputs = po->p;
		r.n_outputs = po->n;
	}
	if (n->w->has_log) {
		r.log.data = n->w->log_id.b;
		r.log.len = 16;
	}
	r.time_ns = kiln_wall_ns();
	r.duration_ns = n->duration_ns;
	r.traced = decision != KILN__STEP_RECORD__DECISION__FAILED && n->traced;
	r.program = n->w->program;
	r.program_ran = (char *)tool_runs_ran(n);
	r.machine = n->w->machine;
	if (decision != KILN__STEP_RECORD__DECISION__FAILED) {
		r.warnings = n->warnings;
		r.n_warnings = step_nwarnings(n);
	}
	if (decision == KILN__STEP_RECORD__DECISION__FAILED) {
		r.exit_code = n->w->res.exited ? n->w->res.status : 0;
		r.signal = n->w->res.exited ? 0 : n->w->res.status;
		r.error = n->error ? n->error : (char *)"";
	}
	len = kiln__step_record__get_packed_size(&r);
	if ((buf = malloc(len ? len : 1)) == NULL) {
		rv = KILN_ENOMEM;
	} else {
		kiln__step_record__pack(&r, buf);
		engine_batch_lock(e, &b);
		rv = kiln_batch_step_put(b, g->profile, n->ks->url, buf, len);
		/* a failure keeps the last success's dependencies: the files it
		 * read are still what the next attempt will likely read */
		if (rv == 0 && decision != KILN__STEP_RECORD__DECISION__FAILED)
			rv = deps_queue(b, g, n);
		engine_batch_unlock(e);
		free(buf);
	}
	key_parts_pb_free(parts);
	key_changes_free(ch);
	free(po);
	return rv;
}

/* Queue the index entries and materialized-file records of n's outputs. */
int
outputs_record(struct engine *e, const struct graph *g, struct node *n)
{
	kiln_batch *b;
	int rv = 0;

	engine_batch_lock(e, &b);
	for (size_t i = 0; i < n->ks->noutputs && rv == 0; i++) {
		char url[600];
		kiln_file_rec fr = n->outs[i].mat;
		step_output_url(n, i, url, sizeof url);
		rv = kiln_batch_index_set(b, g->profile, url, &n->outs[i].id);
		fr.hash = n->outs[i].id;
		/* a folder is checked by content (folder_out.c): no stat record */
		if (rv == 0 && !n->outs[i].folder)
			rv = kiln_batch_file_put(b, n->outpaths[i], &fr);
	}
	engine_batch_unlock(e);
	return rv;
}
