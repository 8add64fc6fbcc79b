/* handlers_build.c — the build requests: start, cancel, status, why, need. The
 * engine (engine.h) does the work; these turn requests into its calls and
 * its answers into replies.
 *
 * Threads: run on the jobs.c pool like every handler; the engine has its
 * own locks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "handlers.h"
#include "server.h"
#include "owners.h"

/* The build belongs to the connection that asked for it: when that
 * closes (and no other asks about it in time) it is cancelled (owners.h).
 * A connection that closed before we got here has its pipe_cb run
 * already, or about to: either way it is dropped as an owner. */
static void
build_claim(struct kilnd *d, const struct kilnd_call *c, uint64_t build)
{
	if (owners_claim(d->owners, build, c->pipe, 1) != 0) {
		kilnd_log(d, KILND_WARNING, "build %llu: out of memory recording "
		          "its client: it runs on if the client goes away",
		          (unsigned long long)build);
		return;
	}
	if (!server_pipe_open(d, c->pipe))
		owners_pipe_closed(d->owners, c->pipe);
}

int
h_build(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
        struct ev_waiter *w)
{
	const Kiln__BuildRequest *rq = c->req->build;
	int rv;

	(void)w;
	if (rq->n_targets > 100000)
		return KILN_ERANGE;
	kiln__build_reply__init(&a->body.build);
	rv = engine_build(d->engine, rq, &a->body.build, a->error, sizeof a->error);
	if (rv != 0)
		return rv;
	kilnd_log(d, KILND_DEBUG, "build %llu of %u steps for profile %s (client %u)",
	          (unsigned long long)a->body.build.build, a->body.build.steps,
	          a->body.build.profile, c->pipe);
	build_claim(d, c, a->body.build.build);
	a->reply.body_case = KILN__REPLY__BODY_BUILD_REPLY;
	a->reply.build_reply = &a->body.build;
	return 0;
}

int
h_cancel(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
         struct ev_waiter *w)
{
	(void)a, (void)w;
	return engine_cancel(d->engine, c->req->cancel->build);
}

int
h_build_status(struct kilnd *d, const struct kilnd_call *c,
               struct kilnd_answer *a, struct ev_waiter *w)
{
	int rv;

	(void)w;
	rv = engine_build_status(d->engine, c->req->build_status->build,
	                         &a->body.build_status);
	if (rv != 0)
		return rv;
	/* asking keeps a build going: a client that polls, or one back after
	 * a reconnect, wants it (best effort: out of memory, it is not kept) */
	if (!a->body.build_status.done &&
	    owners_claim(d->owners, c->req->build_status->build, c->pipe, 0) == 0 &&
	    !server_pipe_open(d, c->pipe))
		owners_pipe_closed(d->owners, c->pipe);
	a->reply.body_case = KILN__REPLY__BODY_BUILD_STATUS_REPLY;
	a->reply.build_status_reply = &a->body.build_status;
	return 0;
}

/* Pack a reply whose body the caller set into a, then clear the body (it
 * points at memory the caller frees). */
static int
answer_pack(struct kilnd_answer *a)
{
	a->nbytes = kiln__reply__get_packed_size(&a->reply);
	if ((a->bytes = malloc(a->nbytes ? a->nbytes : 1)) == NULL) {
		a->reply.body_case = KILN__REPLY__BODY__NOT_SET;
		return KILN_ENOMEM;
	}
	kiln__reply__pack(&a->reply, a->bytes);
	a->reply.body_case = KILN__REPLY__BODY__NOT_SET;
	a->kind = ANSWER_BYTES;
	return 0;
}

/* The record came from protobuf's unpack: encode the whole reply here, so
 * it can be freed before the answer is sent. */
int
h_why(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
      struct ev_waiter *w)
{
	const Kiln__WhyRequest *q = c->req->why;
	Kiln__WhyReply wr = KILN__WHY_REPLY__INIT;
	Kiln__StepRecord *rec = NULL;
	int rv, mine = 0;

	(void)w;
	if (q->url == NULL || kiln_url_check(q->url) != 0)
		return KILN_EINVAL;
	rv = engine_why(d->engine, q->profile, q->url, &rec, &mine, a->error,
	                sizeof a->error);
	if (rv == KILN_ENOTFOUND)
		snprintf(a->error, sizeof a->error, "no build has decided %s%s%s yet",
		         q->url, q->profile && q->profile[0] ? " for profile " : "",
		         q->profile ? q->profile : "");
	if (rv != 0)
		return rv;
	wr.record = rec;
	wr.this_daemon = mine;
	a->reply.body_case = KILN__REPLY__BODY_WHY_REPLY;
	a->reply.why_reply = &wr;
	rv = answer_pack(a);
	kiln__step_record__free_unpacked(rec, NULL);
	return rv;
}

/* kiln audit: runs the steps on this handler thread (a long request;
 * builds wait meanwhile). Encoded here: the reply names the engine's
 * strings, freed right after. */
int
h_audit(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
        struct ev_waiter *w)
{
	const Kiln__AuditRequest *q = c->req->audit;
	Kiln__AuditReply *rep = NULL;
	int rv;

	(void)w;
	for (size_t i = 0; i < q->n_targets; i++)
		if (q->targets[i] == NULL || strlen(q->targets[i]) > 4096)
			return KILN_EINVAL;
	rv = engine_audit(d->engine, q, &rep, a->error, sizeof a->error);
	if (rv != 0)
		return rv;
	a->reply.body_case = KILN__REPLY__BODY_AUDIT_REPLY;
	a->reply.audit_reply = rep;
	rv = answer_pack(a);
	engine_audit_free(rep);
	return rv;
}

/* kiln need from a step's tool: answered at once, pending or not (the
 * client polls; docs/protocol.md). Encoded here: the paths are copies the
 * engine made for this answer. */
int
h_need(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
       struct ev_waiter *w)
{
	const Kiln__NeedRequest *q = c->req->need;
	Kiln__NeedReply nr = KILN__NEED_REPLY__INIT;
	struct engine_need_answer ans;
	ProtobufCBinaryData hashes[64];
	int rv;

	(void)w;
	rv = engine_need(d->engine, q->token, q->url, q->output, &ans, a->error,
	                 sizeof a->error);
	if (rv != 0)
		return rv;
	if (ans.n > 64) {
		engine_need_answer_free(&ans);
		snprintf(a->error, sizeof a->error, "%s has more than 64 outputs: "
		         "name one with --output", q->url);
		return KILN_ERANGE;
	}
	nr.pending = ans.pending;
	nr.paths = ans.paths;
	nr.n_paths = ans.n;
	for (size_t i = 0; i < ans.n; i++) {
		hashes[i].data = ans.ids[i].b;
		hashes[i].len = 16;
	}
	nr.hashes = hashes;
	nr.n_hashes = ans.n;
	a->reply.body_case = KILN__REPLY__BODY_NEED_REPLY;
	a->reply.need_reply = &nr;
	rv = answer_pack(a);
	engine_need_answer_free(&ans);
	return rv;
}

int
h_deps(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
       struct ev_waiter *w)
{
	const Kiln__DepsRequest *q = c->req->deps;
	Kiln__DepsReply *r = NULL;
	int rv;

	(void)w;
	if (q->url == NULL || kiln_url_check(q->url) != 0)
		return KILN_EINVAL;
	if ((rv = engine_deps(d->engine, q->profile, q->url, &r, a->error,
	                      sizeof a->error)) != 0)
		return rv;
	a->reply.body_case = KILN__REPLY__BODY_DEPS_REPLY;
	a->reply.deps_reply = r;
	rv = answer_pack(a);
	engine_deps_free(r);
	return rv;
}

int
h_rdeps(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
        struct ev_waiter *w)
{
	const Kiln__RdepsRequest *q = c->req->rdeps;
	Kiln__RdepsReply *r = NULL;
	int rv;

	(void)w;
	/* a URL or a project-relative path (relative names that never leave
	 * the project, which kiln_url_check enforces), or the absolute path of
	 * an external file a step discovered: only a lookup key, never opened */
	if (q->target == NULL ||
	    (q->target[0] == '/' ? kiln_url_check(q->target + 1) : kiln_url_check(q->target)) != 0)
		return KILN_EINVAL;
	if ((rv = engine_rdeps(d->engine, q->profile, q->target, q->all, &r,
	                       a->error, sizeof a->error)) != 0)
		return rv;
	a->reply.body_case = KILN__REPLY__BODY_RDEPS_REPLY;
	a->reply.rdeps_reply = r;
	rv = answer_pack(a);
	engine_rdeps_free(r);
	return rv;
}
