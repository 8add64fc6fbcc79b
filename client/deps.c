/* deps.c — kiln.h's dependency queries: kiln_deps (what a step depends on)
 * and kiln_rdeps (what depends on a file or step). Results point into the
 * reply held on the connection; the arrays of structs are kept beside it
 * (lk_hold frees both at the next call). */
#include <stdlib.h>
#include <string.h>

#include "libkiln_int.h"

int
kiln_deps(kiln_conn *c, const char *profile, const char *url, kiln_deps_info *d)
{
	Kiln__Request req;
	Kiln__DepsRequest q = KILN__DEPS_REQUEST__INIT;
	const Kiln__DepsReply *r;
	struct conn_reply cr;
	kiln_dep_file *files;
	kiln_dep_need *needs;
	int rv;

	q.profile = (char *)(profile ? profile : "");
	q.url = (char *)url;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_DEPS;
	req.deps = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_DEPS_REPLY, &cr)) != 0)
		return rv;
	lk_hold(c, &cr);
	r = c->held.rep->deps_reply;
	memset(d, 0, sizeof(*d));
	files = calloc(r->n_files + 1, sizeof(*files));
	needs = calloc(r->n_needs + 1, sizeof(*needs));
	c->held_arrays[0] = files;
	c->held_arrays[1] = needs;
	if (files == NULL || needs == NULL)
		return KILN_ENOMEM;
	d->profile = r->profile;
	d->inputs = r->inputs;
	d->ninputs = r->n_inputs;
	d->prerequisites = r->prerequisites;
	d->nprerequisites = r->n_prerequisites;
	d->built = r->built;
	d->traced = r->traced;
	for (size_t i = 0; i < r->n_files; i++) {
		const Kiln__FileDep *f = r->files[i];
		files[i].path = f->path;
		files[i].missing = f->hash.len != 16;
		files[i].traced = f->source == KILN__FILE_DEP__SOURCE__TRACE;
		if (!files[i].missing)
			kiln_proto_id_get(f->hash, &files[i].hash);
	}
	d->files = files;
	d->nfiles = r->n_files;
	for (size_t i = 0; i < r->n_needs; i++) {
		const Kiln__UrlDep *u = r->needs[i];
		needs[i].url = u->url;
		needs[i].output = u->output;
		if (u->hash.len == 16)
			kiln_proto_id_get(u->hash, &needs[i].hash);
	}
	d->needs = needs;
	d->nneeds = r->n_needs;
	return 0;
}

int
kiln_rdeps(kiln_conn *c, const char *profile, const char *target, int all,
           const kiln_rdep **v, size_t *n, int *is_step)
{
	Kiln__Request req;
	Kiln__RdepsRequest q = KILN__RDEPS_REQUEST__INIT;
	const Kiln__RdepsReply *r;
	struct conn_reply cr;
	kiln_rdep *out;
	int rv;

	q.profile = (char *)(profile ? profile : "");
	q.target = (char *)target;
	q.all = all != 0;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_RDEPS;
	req.rdeps = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_RDEPS_REPLY, &cr)) != 0)
		return rv;
	lk_hold(c, &cr);
	r = c->held.rep->rdeps_reply;
	if ((out = calloc(r->n_dependents + 1, sizeof(*out))) == NULL)
		return KILN_ENOMEM;
	c->held_arrays[0] = out;
	for (size_t i = 0; i < r->n_dependents; i++) {
		out[i].url = r->dependents[i]->url;
		out[i].via = r->dependents[i]->via;
		out[i].depth = r->dependents[i]->depth;
	}
	*v = out;
	*n = r->n_dependents;
	if (is_step != NULL)
		*is_step = r->is_step;
	return 0;
}
