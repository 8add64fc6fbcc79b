/* audit.c — kiln_audit (kiln.h): the AuditRequest, and its reply made
 * into plain structs. */
#include <stdlib.h>
#include <string.h>

#include "libkiln_int.h"

/* One step of the reply into s (outputs allocated). 0 or KILN_ENOMEM. */
static int
step_of(const Kiln__AuditStep *m, kiln_audit_step *s)
{
	kiln_audit_output *o = NULL;

	memset(s, 0, sizeof(*s));
	s->url = m->url;
	s->verdict = m->verdict == KILN__AUDIT_STEP__VERDICT__SAME ? KILN_AUDIT_SAME
	           : m->verdict == KILN__AUDIT_STEP__VERDICT__DIFFERENT ? KILN_AUDIT_DIFFERENT
	           : KILN_AUDIT_FAILED;
	s->error = m->error;
	s->duration_ns = m->duration_ns;
	if (m->n_outputs > 0 && (o = calloc(m->n_outputs, sizeof(*o))) == NULL)
		return KILN_ENOMEM;
	for (size_t k = 0; k < m->n_outputs; k++) {
		const Kiln__AuditOutput *mo = m->outputs[k];
		o[k].name = mo->name;
		kiln_proto_id_get(mo->recorded, &o[k].recorded);
		o[k].has_got = kiln_proto_id_get(mo->got, &o[k].got) == 0;
		o[k].recorded_size = mo->recorded_size;
		o[k].got_size = mo->got_size;
	}
	s->outputs = o;
	s->noutputs = m->n_outputs;
	return 0;
}

int
kiln_audit(kiln_conn *c, const kiln_audit_opts *o, kiln_audit_info *a)
{
	Kiln__Request req;
	Kiln__AuditRequest q = KILN__AUDIT_REQUEST__INIT;
	const Kiln__AuditReply *ar;
	struct conn_reply r;
	int rv;

	memset(a, 0, sizeof(*a));
	q.profile = (char *)(o->profile ? o->profile : "");
	q.targets = (char **)o->targets;
	q.n_targets = o->ntargets;
	q.sample = o->sample;
	q.seed = o->seed;
	q.path = (char *)(o->path ? o->path : "");
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_AUDIT;
	req.audit = &q;
	/* tools run one after another before the answer: no time limit */
	if ((rv = lk_call(c, CONN_SLOT_MAIN, &req, NULL, 0, -1,
	                  KILN__REPLY__BODY_AUDIT_REPLY, &r, c->error,
	                  sizeof(c->error))) != 0)
		return rv;
	lk_hold(c, &r);
	ar = c->held.rep->audit_reply;
	a->profile = ar->profile;
	a->cached = ar->cached;
	a->not_audited = ar->not_audited;
	a->seed = ar->seed;
	if (ar->n_steps > 0 && (a->steps = calloc(ar->n_steps, sizeof(*a->steps))) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < ar->n_steps; i++) {
		if ((rv = step_of(ar->steps[i], &a->steps[i])) != 0) {
			kiln_audit_free(a);
			return rv;
		}
		a->nsteps++;
	}
	return 0;
}

void
kiln_audit_free(kiln_audit_info *a)
{
	for (size_t i = 0; i < a->nsteps; i++)
		free((void *)a->steps[i].outputs);
	free(a->steps);
	a->steps = NULL;
	a->nsteps = 0;
}
