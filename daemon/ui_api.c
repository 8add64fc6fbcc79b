/* ui_api.c — the dashboard's JSON API: each answer is the same request the
 * CLI sends (status, build, cancel, why, deps, rdeps), run through the
 * daemon's own handlers (handle_request) as the dashboard's connection and
 * encoded field for field from the wire schema (proto/json.c); plus the
 * project's steps (what `kiln ls` reads) and a step's log from the store.
 *
 *   GET  status                      StatusReply
 *   GET  steps[?profile=P]           {"profile","profiles","steps":[{url,tool,last,images}]}
 *   GET  why|deps?url=U[&profile=P]  WhyReply | DepsReply
 *   GET  rdeps?target=T[&profile=P]  RdepsReply
 *   GET  log?id=HASH                 the blob, as text/plain
 *   GET  trace[?build=N]             the build's timeline (kiln trace's file)
 *   GET  image?url=U&output=O[&profile=P]  an image output (ui_image.c)
 *   POST build?url=U[&profile=P]     BuildReply (priority 100, as kiln watch)
 *   POST cancel?build=N              empty reply
 *   POST hold | release              kiln hold (until released) | kiln release
 *
 * Threads: nng's HTTP threads, several at once; everything used is the
 * daemon's thread-safe modules. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kiln_desc.h"
#include "kiln_error.h"
#include "ui_int.h"

#define UI_PRIORITY 100  /* an editor's: ahead of batch builds */

int
ui_call(struct kilnd *d, uint32_t pipe, Kiln__Request *q, json_t **out)
{
	struct kilnd_call c = {.req = q, .pipe = pipe};
	struct kilnd_answer *a;
	Kiln__Reply *rep = NULL;
	json_t *o;
	int err = 0;

	if ((a = calloc(1, sizeof *a)) == NULL)
		return KILN_ENOMEM;
	q->version = KILN_PROTO_VERSION;
	handle_request(d, &c, a, NULL);
	if (a->kind == ANSWER_BYTES)
		rep = kiln__reply__unpack(NULL, a->nbytes, a->bytes);
	o = kiln_proto_json(rep ? &rep->base : &a->reply.base, &err);
	if (rep != NULL)
		kiln__reply__free_unpacked(rep, NULL);
	answer_release(a);
	free(a);
	if (err != 0) {
		json_decref(o);
		return KILN_ENOMEM;
	}
	*out = o;
	return 0;
}

/* The HTTP status for a Reply's JSON: 200 when "status" is OK. */
static uint16_t
reply_http(const json_t *o)
{
	const char *st = json_string_value(json_object_get(o, "status"));

	if (st == NULL || strcmp(st, "STATUS_OK") == 0)
		return 200;
	if (strcmp(st, "STATUS_NOT_FOUND") == 0)
		return 404;
	return 400;
}

/* {"error": msg} */
static uint16_t
error_body(uint16_t st, const char *msg, char **body)
{
	json_t *o = json_object();
	int err = kiln_json_text(o, "error", msg);

	*body = err ? NULL : kiln_json_dumps(o);
	if (err)
		json_decref(o);
	return st;
}

/* Run q and dump its reply. */
static uint16_t
call_body(struct kilnd_ui *u, Kiln__Request *q, char **body)
{
	json_t *o;
	uint16_t st;

	if (ui_call(u->d, UI_PIPE_BASE, q, &o) != 0)
		return 500;
	st = reply_http(o);
	*body = kiln_json_dumps(o);
	return st;
}

/* s["last"]: the decision the store recorded for the step's last
 * evaluation (kiln why's), or nothing when there is none. */
static int
step_last(struct kilnd_ui *u, json_t *s, const char *profile, const char *url)
{
	Kiln__StepRecord *rec;
	void *data = NULL;
	size_t len = 0;
	const ProtobufCEnumValue *v;
	int err = 0;

	if (kiln_store_step_get(u->d->store, profile, url, &data, &len) != 0)
		return 0;
	rec = kiln__step_record__unpack(NULL, len, data);
	free(data);
	if (rec == NULL)
		return 0;
	v = protobuf_c_enum_descriptor_get_value(&kiln__step_record__decision__descriptor,
	                                         rec->decision);
	if (v != NULL)
		err = kiln_json_text(s, "last", v->name);
	kiln__step_record__free_unpacked(rec, NULL);
	return err;
}

/* s["images"]: the names of step's outputs that may be images (a PNG or
 * JPEG file, or a folder): the page asks api/image for those only. */
static int
step_images(json_t *s, const kiln_step *st)
{
	const char **v = calloc(st->noutputs ? st->noutputs : 1, sizeof *v);
	size_t n = 0;
	int err;

	if (v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < st->noutputs; i++) {
		const char *dot = strrchr(st->outputs[i].file, '.');
		if (st->outputs[i].folder ||
		    (dot != NULL && (strcasecmp(dot, ".png") == 0 ||
		                     strcasecmp(dot, ".jpg") == 0 ||
		                     strcasecmp(dot, ".jpeg") == 0)))
			v[n++] = st->outputs[i].name;
	}
	err = kiln_json_texts(s, "images", v, n);
	free(v);
	return err;
}

/* The project's steps for a profile, as the descriptions say (kiln ls). */
static uint16_t
steps_body(struct kilnd_ui *u, const char *profile, char **body)
{
	kiln_desc *desc = NULL;
	const kiln_plan *plan;
	const char *const *names;
	size_t nnames;
	json_t *o, *steps;
	int err = 0;

	if (kiln_desc_load(u->d->paths.project, &desc) != 0) {
		kiln_desc_free(desc);
		return error_body(409, "the project's descriptions have errors "
		                  "(kiln check)", body);
	}
	nnames = kiln_desc_profiles(desc, &names);
	if (profile[0] == '\0' && nnames > 0)
		profile = names[0];
	if ((plan = kiln_desc_plan(desc, profile)) == NULL) {
		kiln_desc_free(desc);
		return error_body(404, "no such profile", body);
	}
	o = json_object();
	steps = json_array();
	err |= kiln_json_text(o, "profile", plan->profile);
	err |= kiln_json_texts(o, "profiles", names, nnames);
	for (size_t i = 0; i < plan->nsteps; i++) {
		json_t *s = json_object();
		err |= kiln_json_text(s, "url", plan->steps[i].url);
		err |= kiln_json_text(s, "tool", plan->steps[i].tool ?
		                      plan->steps[i].tool->name : "");
		err |= step_last(u, s, plan->profile, plan->steps[i].url);
		err |= step_images(s, &plan->steps[i]);
		err |= kiln_json_push(steps, s);
	}
	err |= kiln_json_put(o, "steps", steps);
	kiln_desc_free(desc);
	*body = err ? NULL : kiln_json_dumps(o);
	if (err)
		json_decref(o);
	return 200;
}

/* A log blob, as text (the tool's own bytes: the browser shows them). */
static uint16_t
log_body(struct kilnd_ui *u, const char *query, char **body, size_t *len,
         const char **type)
{
	char hex[64];
	kiln_id id;
	void *buf = NULL;
	size_t n = 0;
	int rv;

	if (ui_query_get(query, "id", hex, sizeof hex) != 0 ||
	    kiln_id_from_hex(hex, &id) != 0)
		return error_body(400, "log?id=HASH: 32 hex digits", body);
	/* the size first: any blob's id is accepted here, and reading a
	 * large one whole only to refuse it would cost its size in memory */
	uint64_t size;
	if ((rv = kiln_store_has(u->d->store, &id, &size)) == 0 && size > UI_MAX_LOG)
		return error_body(413, "the log is larger than the dashboard shows "
		                  "(kiln cat it)", body);
	if (rv == 0)
		rv = kiln_store_read(u->d->store, &id, &buf, &n);
	if (rv != 0)
		return error_body(rv == KILN_ENOTFOUND ? 404 : 500,
		                  kiln_strerror(rv), body);
	if (n > UI_MAX_LOG) {
		free(buf);
		return error_body(413, "the log is larger than the dashboard shows "
		                  "(kiln cat it)", body);
	}
	if ((*body = realloc(buf, n + 1)) == NULL) {
		free(buf);
		return 500;
	}
	(*body)[n] = '\0';
	*len = n;
	*type = "text/plain; charset=utf-8";
	return 200;
}

/* .kiln/traces/<N>.json or .kiln/traces/last, as kiln trace reads it:
 * only digits name a build, so the path stays in that folder. */
static uint16_t
trace_body(struct kilnd_ui *u, const char *query, char **body, size_t *len)
{
	char build[24] = "", path[PATH_MAX + 64];
	FILE *f;
	long n;

	if (query != NULL && ui_query_get(query, "build", build, sizeof build) == 0 &&
	    (build[0] == '\0' || strspn(build, "0123456789") != strlen(build)))
		return error_body(400, "trace?build=N: a build number", body);
	snprintf(path, sizeof path, build[0] ? "%s/traces/%s.json" : "%s/traces/last",
	         u->d->paths.dir, build);
	if ((f = fopen(path, "re")) == NULL)
		return error_body(404, "no trace of that build (a dry run, or too old)",
		                  body);
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (long)UI_MAX_TRACE ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return error_body(413, "the trace is larger than the dashboard reads "
		                  "(kiln trace)", body);
	}
	if ((*body = malloc((size_t)n + 1)) == NULL) {
		fclose(f);
		return 500;
	}
	*len = fread(*body, 1, (size_t)n, f);
	(*body)[*len] = '\0';
	fclose(f);
	return 200;
}

/* The query's value of key into buf, or "" when it has none. */
static int
arg(const char *query, const char *key, char *buf, size_t len)
{
	int rv = ui_query_get(query, key, buf, len);

	if (rv == KILN_ENOTFOUND)
		buf[0] = '\0';
	return rv == KILN_ERANGE ? rv : 0;
}

static uint16_t
query_call(struct kilnd_ui *u, const char *path, const char *query, char **body)
{
	Kiln__Request q = KILN__REQUEST__INIT;
	Kiln__WhyRequest why = KILN__WHY_REQUEST__INIT;
	Kiln__DepsRequest deps = KILN__DEPS_REQUEST__INIT;
	Kiln__RdepsRequest rdeps = KILN__RDEPS_REQUEST__INIT;
	char url[4096], profile[256];

	if (arg(query, "profile", profile, sizeof profile) != 0 ||
	    arg(query, strcmp(path, "rdeps") == 0 ? "target" : "url", url,
	        sizeof url) != 0 || url[0] == '\0')
		return error_body(400, "needs url= (rdeps: target=), at most 4 KiB",
		                  body);
	if (strcmp(path, "why") == 0) {
		why.profile = profile, why.url = url;
		q.body_case = KILN__REQUEST__BODY_WHY, q.why = &why;
	} else if (strcmp(path, "deps") == 0) {
		deps.profile = profile, deps.url = url;
		q.body_case = KILN__REQUEST__BODY_DEPS, q.deps = &deps;
	} else {
		rdeps.profile = profile, rdeps.target = url;
		q.body_case = KILN__REQUEST__BODY_RDEPS, q.rdeps = &rdeps;
	}
	return call_body(u, &q, body);
}

static uint16_t
action_call(struct kilnd_ui *u, const char *path, const char *query, char **body)
{
	Kiln__Request q = KILN__REQUEST__INIT;
	Kiln__BuildRequest b = KILN__BUILD_REQUEST__INIT;
	Kiln__CancelRequest c = KILN__CANCEL_REQUEST__INIT;
	char url[4096], profile[256], *target = url, *end;

	if (strcmp(path, "cancel") == 0) {
		if (arg(query, "build", url, sizeof url) != 0 || url[0] == '\0')
			return error_body(400, "cancel?build=N", body);
		c.build = strtoull(url, &end, 10);
		if (*end != '\0')
			return error_body(400, "cancel?build=N", body);
		q.body_case = KILN__REQUEST__BODY_CANCEL, q.cancel = &c;
		return call_body(u, &q, body);
	}
	if (arg(query, "profile", profile, sizeof profile) != 0 ||
	    arg(query, "url", url, sizeof url) != 0 || url[0] == '\0')
		return error_body(400, "build?url=U[&profile=P]", body);
	b.n_targets = 1;
	b.targets = &target;
	b.profile = profile;
	b.priority = UI_PRIORITY;
	q.body_case = KILN__REQUEST__BODY_BUILD, q.build = &b;
	return call_body(u, &q, body);
}

uint16_t
ui_api(struct kilnd_ui *u, const char *method, const char *path,
       const char *query, char **body, size_t *len, const char **type)
{
	int post = strcmp(method, "POST") == 0;
	uint16_t st;

	*body = NULL;
	*len = 0;
	if (!post && strcmp(path, "status") == 0) {
		Kiln__Request q = KILN__REQUEST__INIT;
		Kiln__StatusRequest s = KILN__STATUS_REQUEST__INIT;
		q.body_case = KILN__REQUEST__BODY_STATUS, q.status = &s;
		st = call_body(u, &q, body);
	} else if (!post && strcmp(path, "steps") == 0) {
		char profile[256];
		if (arg(query, "profile", profile, sizeof profile) != 0)
			profile[0] = '\0';
		st = steps_body(u, profile, body);
	} else if (!post && (strcmp(path, "why") == 0 || strcmp(path, "deps") == 0 ||
	                     strcmp(path, "rdeps") == 0)) {
		st = query_call(u, path, query, body);
	} else if (!post && strcmp(path, "log") == 0) {
		st = log_body(u, query, body, len, type);
	} else if (!post && strcmp(path, "trace") == 0) {
		st = trace_body(u, query, body, len);
	} else if (!post && strcmp(path, "image") == 0) {
		st = ui_image(u, query, body, len, type);
	} else if (post && (strcmp(path, "hold") == 0 || strcmp(path, "release") == 0)) {
		/* the page's hold is the dashboard connection's; release ends
		 * every hold, as kiln release does */
		Kiln__Request q = KILN__REQUEST__INIT;
		Kiln__HoldRequest h = KILN__HOLD_REQUEST__INIT;
		h.release_all = strcmp(path, "release") == 0;
		q.body_case = KILN__REQUEST__BODY_HOLD, q.hold = &h;
		st = call_body(u, &q, body);
	} else if (post && (strcmp(path, "build") == 0 || strcmp(path, "cancel") == 0)) {
		/* POST only: a link or an image in another page cannot start
		 * one, and the secret guards against a form */
		st = action_call(u, path, query, body);
	} else {
		st = error_body(404, "no such API (docs/ui.md)", body);
	}
	/* a JSON answer (an error too) is text: its length is its own; a
	 * log, trace or image said its length (0: empty, NUL-terminated) */
	if (*body != NULL && *len == 0)
		*len = strlen(*body);
	return st;
}
