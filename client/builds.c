/* builds.c — kiln.h's builds: start, cancel, status, why, need. Progress comes
 * through the event subscription (events.c turns StepEvent and
 * BuildFinished into kiln_event). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libkiln_int.h"

void
lk_summary_of(const Kiln__BuildFinished *bf, kiln_build_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->build = bf->build;
	s->profile = bf->profile;
	s->done = bf->done;
	s->total = bf->total;
	s->ran = bf->ran;
	s->reused = bf->reused;
	s->failed = bf->failed;
	s->skipped = bf->skipped;
	s->cancelled = bf->cancelled;
	s->would_run = bf->would_run;
	s->files_statted = bf->files_statted;
	s->duration_ns = bf->duration_ns;
	s->index = bf->index;
	s->error = bf->error;
}

int
kiln_build_start(kiln_conn *c, const kiln_build_opts *o, uint64_t *build,
                 uint32_t *nsteps, char *profile, size_t profilelen)
{
	Kiln__Request req;
	Kiln__BuildRequest q = KILN__BUILD_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.targets = (char **)o->targets;
	q.n_targets = o->ntargets;
	q.profile = (char *)(o->profile ? o->profile : "");
	q.jobs = o->jobs;
	q.keep_going = o->keep_going;
	q.dry_run = o->dry_run;
	q.priority = o->priority;
	q.path = (char *)(o->path ? o->path : "");
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_BUILD;
	req.build = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_BUILD_REPLY, &r)) != 0)
		return rv;
	*build = r.rep->build_reply->build;
	if (nsteps != NULL)
		*nsteps = r.rep->build_reply->steps;
	if (profile != NULL && profilelen > 0)
		snprintf(profile, profilelen, "%s", r.rep->build_reply->profile);
	conn_reply_free(&r);
	return 0;
}

int
kiln_build_cancel(kiln_conn *c, uint64_t build)
{
	Kiln__Request req;
	Kiln__CancelRequest q = KILN__CANCEL_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.build = build;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_CANCEL;
	req.cancel = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY__NOT_SET, &r)) != 0)
		return rv;
	conn_reply_free(&r);
	return 0;
}

/* Keep r as the reply the caller's strings point into. */
void
lk_hold(kiln_conn *c, struct conn_reply *r)
{
	if (c->held.rep != NULL)
		conn_reply_free(&c->held);
	for (size_t i = 0; i < sizeof c->held_arrays / sizeof c->held_arrays[0]; i++) {
		free(c->held_arrays[i]);
		c->held_arrays[i] = NULL;
	}
	c->held = *r;
}

int
kiln_build_status(kiln_conn *c, uint64_t build, kiln_build_summary *s)
{
	Kiln__Request req;
	Kiln__BuildStatusRequest q = KILN__BUILD_STATUS_REQUEST__INIT;
	struct conn_reply r;
	int rv;

	q.build = build;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_BUILD_STATUS;
	req.build_status = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_BUILD_STATUS_REPLY, &r)) != 0)
		return rv;
	lk_hold(c, &r);
	lk_summary_of(c->held.rep->build_status_reply, s);
	return 0;
}

/* A key part as `kiln why` shows it: a hash's first 8 hex digits, or the
 * text with item separators as spaces. */
static void
part_show(const Kiln__KeyPart *p, char *out, size_t len)
{
	size_t j = 0;

	out[0] = '\0';
	if (p == NULL)
		return;
	if (p->hash.len == 16) {
		kiln_id id;
		char hex[KILN_ID_HEX_LEN + 1];
		kiln_proto_id_get(p->hash, &id);
		kiln_id_to_hex(&id, hex);
		snprintf(out, len, "%.8s", hex);
		return;
	}
	for (const char *t = p->text ? p->text : ""; *t && j + 1 < len; t++)
		out[j++] = *t == '\x1f' ? ' ' : *t;
	out[j] = '\0';
}

int
kiln_why(kiln_conn *c, const char *profile, const char *url, kiln_why_info *w)
{
	Kiln__Request req;
	Kiln__WhyRequest q = KILN__WHY_REQUEST__INIT;
	const Kiln__StepRecord *rec;
	struct conn_reply r;
	int rv;

	q.profile = (char *)(profile ? profile : "");
	q.url = (char *)url;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_WHY;
	req.why = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_WHY_REPLY, &r)) != 0)
		return rv;
	lk_hold(c, &r);
	memset(w, 0, sizeof(*w));
	if ((rec = c->held.rep->why_reply->record) == NULL)
		return KILN_EPROTO;
	w->this_daemon = c->held.rep->why_reply->this_daemon;
	w->traced = rec->traced;
	w->warnings = (const char *const *)rec->warnings;
	w->nwarnings = rec->n_warnings;
	w->program = rec->program;
	w->machine = rec->machine ? rec->machine : "";
	w->decision = (int)rec->decision;
	w->reason = rec->reason;
	w->error = rec->error;
	w->time_ns = rec->time_ns;
	w->duration_ns = rec->duration_ns;
	w->has_log = rec->log.len == 16;
	if (w->has_log)
		kiln_proto_id_get(rec->log, &w->log);
	for (size_t i = 0; i < rec->n_changes && i < 64; i++) {
		kiln_why_change *ch = &c->changes[i];
		ch->label = rec->changes[i]->label;
		part_show(rec->changes[i]->before, ch->before, sizeof(ch->before));
		part_show(rec->changes[i]->after, ch->after, sizeof(ch->after));
		w->nchanges++;
	}
	w->changes = c->changes;
	for (size_t i = 0; i < rec->n_outputs && i < 16; i++) {
		const Kiln__StepOutput *o = rec->outputs[i];
		c->why_outs[i].name = o->name;
		memset(&c->why_outs[i].id, 0, sizeof(kiln_id));
		kiln_proto_id_get(o->id, &c->why_outs[i].id);
		c->why_outs[i].size = o->size;
		c->why_outs[i].path = o->path;
		w->noutputs++;
	}
	w->outputs = c->why_outs;
	return 0;
}

int
kiln_need(kiln_conn *c, const char *token, const char *url, const char *output,
          const char *const **paths, size_t *npaths)
{
	Kiln__Request req;
	Kiln__NeedRequest q = KILN__NEED_REQUEST__INIT;
	struct conn_reply r;
	long wait_ns = 1000000;
	int rv;

	q.token = (char *)token;
	q.url = (char *)url;
	q.output = (char *)(output ? output : "");
	/* the daemon answers at once; while the step builds, ask again (no
	 * daemon thread waits on our behalf) */
	for (;;) {
		lk_request_init(c, &req);
		req.body_case = KILN__REQUEST__BODY_NEED;
		req.need = &q;
		if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_NEED_REPLY, &r)) != 0)
			return rv;
		if (!r.rep->need_reply->pending)
			break;
		conn_reply_free(&r);
		struct timespec ts = {0, wait_ns};
		nanosleep(&ts, NULL);
		if ((wait_ns *= 2) > 50000000)
			wait_ns = 50000000;
	}
	lk_hold(c, &r);
	*paths = (const char *const *)c->held.rep->need_reply->paths;
	*npaths = c->held.rep->need_reply->n_paths;
	return 0;
}
