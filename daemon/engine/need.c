/* need.c — `kiln need URL` from inside a running step (docs/build.md,
 * "kiln need"; need.h). need_wait.c holds the waiting and the cycles.
 *
 * Every run gets a token (KILN_STEP_TOKEN) that names it while its tool
 * runs. A NeedRequest carrying it asks for another step's output: one
 * already done in this wave is answered at once; otherwise the step and
 * all it needs are scheduled for the needing run's builds, at their
 * priority, and the run is suspended: its -j slot is lent out (e->running
 * drops) so `-j 1` cannot deadlock. The request is answered "pending" and
 * the client asks again (1 ms doubling to 50 ms): no handler thread waits
 * for a build. A tool may ask for several at once: each ask not answered
 * yet is an entry of e->ons, scheduled when it first comes (so they build
 * in parallel), and the run stays suspended until every one is done. Then
 * need_grant gives it a slot back before any new step starts (workers call
 * it first), or leaves it waiting until a tool ends; only then do its
 * polls get the paths: no answer is given while the slot is lent out.
 * What was handed over is recorded (n->rneeds) and written into the run's
 * ActionResult as UrlDeps.
 *
 * A need that would wait on the needing step itself — A needs B while B
 * (or anything B waits on: a prerequisite, a suspended run's need) waits
 * on A — is a cycle: the request fails with the cycle spelt out, and
 * every suspended run on it is resumed with the same error, so all of
 * them fail rather than hang (the error is the answer to the ask that
 * waits on the cycle, not to the run's other asks). A dynamic prerequisite on the way is only a
 * hint (what a step needed last time, maybe no longer): its waiter stops
 * waiting and is decided now instead.
 *
 * The needs of a step's last result are dynamic prerequisites: before
 * deciding it (need_prereqs) they are scheduled and the step waits on
 * them like on declared ones (e->dwait, released by need_finished), so
 * their output hashes are current when the quick fingerprint or the cached
 * result is checked. A cold daemon learns them from the cached result
 * (need_check_result: EVAL_NEEDS) and decides the step again once they are
 * done.
 *
 * Threads: everything here runs with e->mu held, except need_env (reads
 * what is fixed while the run exists), need_check_result (takes e->mu)
 * and the result helpers (on nodes their caller holds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "engine_int.h"
#include "graph.h"
#include "need.h"
#include "agent_jobs.h"
#include "schedule.h"

/* ---- setup ---------------------------------------------------------------- */

int
need_init(struct engine *e)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char *slash;

	/* the CLI beside the running kilnd: the same build as the daemon */
	if (len > 0) {
		exe[len] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			if ((e->kiln_cli = malloc(strlen(exe) + 6)) == NULL)
				return KILN_ENOMEM;
			sprintf(e->kiln_cli, "%s/kiln", exe);
		}
	}
	if (e->cfg.ipc_url != NULL && (e->ipc_url = strdup(e->cfg.ipc_url)) == NULL)
		return KILN_ENOMEM;
	return 0;
}

void
need_free(struct engine *e)
{
	for (size_t i = 0; i < e->nons; i++)
		free(e->ons[i].err);
	free(e->ons);
	free(e->toks);
	free(e->dwait);
	free(e->kiln_cli);
	free(e->ipc_url);
	e->ons = NULL;
	e->nons = e->capons = 0;
	e->toks = NULL;
	e->dwait = NULL;
	e->kiln_cli = e->ipc_url = NULL;
}

void
need_deps_free(struct need_dep *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].url);
		free(v[i].output);
	}
	free(v);
}

/* ---- tokens --------------------------------------------------------------- */

int
need_token_add(struct engine *e, struct graph *g, struct node *n)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[16];
	size_t got = 0;

	while (got < sizeof r) {
		ssize_t k = getrandom(r + got, sizeof r - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return KILN_EIO;
		got += (size_t)k;
	}
	if (e->ntoks == e->captoks) {
		size_t ncap = e->captoks ? e->captoks * 2 : 16;
		struct need_tok *nv = realloc(e->toks, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		e->toks = nv;
		e->captoks = ncap;
	}
	for (size_t i = 0; i < 16; i++) {
		n->w->token[2 * i] = hex[r[i] >> 4];
		n->w->token[2 * i + 1] = hex[r[i] & 15];
	}
	n->w->token[32] = '\0';
	memcpy(e->toks[e->ntoks].tok, n->w->token, sizeof n->w->token);
	e->toks[e->ntoks].g = g;
	e->toks[e->ntoks].n = n;
	e->ntoks++;
	n->need_state = NEED_NONE;
	need_deps_free(n->rneeds, n->nrneeds);
	n->rneeds = NULL;
	n->nrneeds = 0;
	return 0;
}

/* ---- outstanding needs ---------------------------------------------------- */

int
need_done(const struct engine *e, const struct node *t)
{
	return t->wave == e->wave && node_done_state(t->st);
}

/* The entry of e->ons for n's ask for target, or -1. */
long
need_on_find(const struct engine *e, const struct node *n, uint32_t target)
{
	for (size_t i = 0; i < e->nons; i++)
		if (e->ons[i].n == n && e->ons[i].target == target)
			return (long)i;
	return -1;
}

/* Record that n's run asked for target (err: already answered with this,
 * malloc'd, taken over). 0 or KILN_ENOMEM. */
static int
on_add(struct engine *e, struct graph *g, struct node *n, uint32_t target,
       char *err)
{
	if (e->nons == e->capons) {
		size_t ncap = e->capons ? e->capons * 2 : 16;
		struct need_on *nv = realloc(e->ons, ncap * sizeof *nv);
		if (nv == NULL) {
			free(err);
			return KILN_ENOMEM;
		}
		e->ons = nv;
		e->capons = ncap;
	}
	e->ons[e->nons++] = (struct need_on){g, n, target, err};
	return 0;
}

static void
on_drop(struct engine *e, size_t i)
{
	free(e->ons[i].err);
	e->ons[i] = e->ons[--e->nons];
}

/* Whether every need n's run asked has its answer (the step finished, or
 * an error): a suspended run may take a slot back. */
static int
on_resolved(const struct engine *e, const struct node *n)
{
	for (size_t i = 0; i < e->nons; i++) {
		const struct need_on *o = &e->ons[i];
		if (o->n == n && o->err == NULL && !need_done(e, &o->g->nodes[o->target]))
			return 0;
	}
	return 1;
}

/* n's run stops waiting on its needs: one more span for the timeline. */
static void
wait_close(struct node *n)
{
	struct node_work *w = n->w;

	if (w == NULL || w->need_since == 0)
		return;
	if (w->nwaits < ENGINE_MAX_WAIT_SPANS) {
		w->waits[w->nwaits].t0 = w->need_since;
		w->waits[w->nwaits++].t1 = kiln_mono_ns();
	}
	w->need_since = 0;
}

int
need_run_end(struct engine *e, struct node *n)
{
	int held = n->need_state != NEED_SUSPENDED;

	if (!held) {
		e->nsusp--;
		wait_close(n);
	}
	n->need_state = NEED_NONE;
	for (size_t i = 0; i < e->ntoks; i++)
		if (e->toks[i].n == n) {
			e->toks[i] = e->toks[--e->ntoks];
			break;
		}
	for (size_t i = 0; i < e->nons;)  /* asked, never answered */
		if (e->ons[i].n == n)
			on_drop(e, i);
		else
			i++;
	n->w->token[0] = '\0';
	return held;
}

static struct need_tok *
tok_find(struct engine *e, const char *tok)
{
	if (tok == NULL || strlen(tok) != 32)
		return NULL;
	for (size_t i = 0; i < e->ntoks; i++)
		if (memcmp(e->toks[i].tok, tok, 32) == 0)
			return &e->toks[i];
	return NULL;
}

char *
need_env(const struct engine *e, const struct node *n, int i)
{
	const char *name = i == 0 ? "KILN" : i == 1 ? "KILN_SOCKET" : "KILN_STEP_TOKEN";
	const char *val = i == 0 ? (e->kiln_cli ? e->kiln_cli : "kiln")
	                : i == 1 ? (e->ipc_url ? e->ipc_url : "") : n->w->token;
	char *s = malloc(strlen(name) + strlen(val) + 2);

	if (s != NULL)
		sprintf(s, "%s=%s", name, val);
	return s;
}

/* ---- slots ---------------------------------------------------------------- */

void
need_grant(struct engine *e)
{
	for (size_t i = 0; i < e->ntoks && e->nsusp > 0; i++) {
		struct node *n = e->toks[i].n;
		if (n->need_state != NEED_SUSPENDED)
			continue;
		if (!e->quit && !on_resolved(e, n))
			continue;
		if (e->running >= jobs_limit(e) && !e->quit)
			return;  /* the next tool that ends frees one */
		e->running++;
		e->nsusp--;
		n->need_state = NEED_NONE;
		wait_close(n);
	}
}


/* ---- the cached result's needs -------------------------------------------- */

/* The URL as `kiln why` names an output: URL, or URL#name for a step with
 * named outputs. */
static void
dep_name(const struct graph *g, const struct need_dep *d, char *out, size_t len)
{
	const kiln_step *ks = d->out >= 0 ? g->nodes[d->idx].ks : NULL;
	int plain = ks != NULL ? ks->noutputs == 1 && strcmp(d->output, "out") == 0
	                       : strcmp(d->output, "out") == 0;

	snprintf(out, len, "%s%s%s", d->url, plain ? "" : "#", plain ? "" : d->output);
}

enum cache_result
need_check_result(struct engine *e, struct graph *g, struct node *n,
                  Kiln__UrlDep *const *deps, size_t ndeps, char *why,
                  size_t whylen)
{
	struct need_dep *v = ndeps ? calloc(ndeps, sizeof *v) : NULL;
	int miss = 0, pending = 0;

	if (ndeps > 0 && v == NULL)
		return CACHE_MISS;   /* no memory: as good as a miss */
	for (size_t i = 0; i < ndeps; i++) {
		v[i].url = strdup(deps[i]->url ? deps[i]->url : "");
		v[i].output = strdup(deps[i]->output && deps[i]->output[0] ?
		                     deps[i]->output : "out");
		v[i].out = -1;
		if (deps[i]->hash.len == 16)
			memcpy(v[i].hash.b, deps[i]->hash.data, 16);
		if (v[i].url == NULL || v[i].output == NULL) {
			need_deps_free(v, ndeps);
			return CACHE_MISS;
		}
	}
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < ndeps && !miss; i++) {
		struct need_dep *d = &v[i];
		char name[600];
		const struct node *t;
		if (!need_dep_resolve(g, d) || &g->nodes[d->idx] == n) {
			dep_name(g, d, name, sizeof name);
			snprintf(why, whylen, "needed %s is no longer a step of profile %s",
			         name, g->profile);
			miss = 1;
			break;
		}
		t = &g->nodes[d->idx];
		dep_name(g, d, name, sizeof name);
		if (!need_done(e, t)) {
			if (n->needs_wave == e->wave) {
				snprintf(why, whylen, "needed %s could not be brought up to "
				         "date first", name);
				miss = 1;
			}
			pending = 1;
		} else if (t->st != N_DONE) {
			snprintf(why, whylen, "needed %s %s", name,
			         t->st == N_WOULD_RUN ? "would run" : "did not build");
			miss = 1;
		} else if (memcmp(t->outs[d->out].id.b, d->hash.b, 16) != 0) {
			char was[KILN_ID_HEX_LEN + 1], now[KILN_ID_HEX_LEN + 1];
			kiln_id_to_hex(&d->hash, was);
			kiln_id_to_hex(&t->outs[d->out].id, now);
			snprintf(why, whylen, "needed %s changed %.8s -> %.8s", name, was, now);
			miss = 1;
		} else {
			d->cur = t->outs[d->out].id;
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (miss) {
		need_deps_free(v, ndeps);
		return CACHE_MISS;
	}
	need_deps_free(n->needs, n->nneeds);
	n->needs = v;
	n->nneeds = ndeps;
	return pending ? CACHE_NEEDS : CACHE_HIT;
}

int
need_result_pb(const struct node *n, Kiln__UrlDep ***out, size_t *np)
{
	size_t k = n->nrneeds;
	Kiln__UrlDep *v;
	Kiln__UrlDep **p;

	*out = NULL;
	*np = 0;
	if (k == 0)
		return 0;
	if ((p = malloc(k * (sizeof *p + sizeof *v))) == NULL)
		return KILN_ENOMEM;
	v = (Kiln__UrlDep *)(p + k);
	for (size_t i = 0; i < k; i++) {
		kiln__url_dep__init(&v[i]);
		v[i].url = n->rneeds[i].url;
		v[i].output = n->rneeds[i].output;
		v[i].hash.data = (uint8_t *)n->rneeds[i].hash.b;
		v[i].hash.len = 16;
		p[i] = &v[i];
	}
	*out = p;
	*np = k;
	return 0;
}

void
need_run_commit(struct node *n, int ok)
{
	if (ok) {
		need_deps_free(n->needs, n->nneeds);
		n->needs = n->rneeds;
		n->nneeds = n->nrneeds;
	} else {
		need_deps_free(n->rneeds, n->nrneeds);
	}
	n->rneeds = NULL;
	n->nrneeds = 0;
}

/* ---- the request ---------------------------------------------------------- */

/* Record that n's run was handed output k of t. 0 or KILN_ENOMEM. */
static int
run_need_add(struct node *n, const struct node *t, size_t k)
{
	const char *name = t->ks->outputs[k].name;
	struct need_dep *nv;

	for (size_t i = 0; i < n->nrneeds; i++)
		if (strcmp(n->rneeds[i].url, t->ks->url) == 0 &&
		    strcmp(n->rneeds[i].output, name) == 0) {
			n->rneeds[i].hash = t->outs[k].id;
			return 0;
		}
	if ((nv = realloc(n->rneeds, (n->nrneeds + 1) * sizeof *nv)) == NULL)
		return KILN_ENOMEM;
	n->rneeds = nv;
	nv = &n->rneeds[n->nrneeds];
	memset(nv, 0, sizeof *nv);
	nv->url = strdup(t->ks->url);
	nv->output = strdup(name);
	nv->hash = t->outs[k].id;
	nv->idx = t->idx;
	nv->out = (int)k;
	if (nv->url == NULL || nv->output == NULL) {
		free(nv->url);
		free(nv->output);
		return KILN_ENOMEM;
	}
	n->nrneeds++;
	return 0;
}

/* The answer for a need of t that is finished in this wave. */
static int
answer_done(struct node *n, const struct node *t, int out,
            struct engine_need_answer *ans, char *err, size_t errlen)
{
	size_t lo = out >= 0 ? (size_t)out : 0;
	size_t hi = out >= 0 ? (size_t)out + 1 : t->ks->noutputs;

	if (t->st != N_DONE || !t->have) {
		const char *what = t->st == N_FAILED ? "failed" : t->st == N_SKIPPED
		                   ? "was skipped (a step it needs failed)" : t->st ==
		                   N_CANCELLED ? "was cancelled" : "did not build";
		snprintf(err, errlen, "needed step %s %s%s%s", t->ks->url, what,
		         t->st == N_FAILED && t->error ? ": " : "",
		         t->st == N_FAILED && t->error ? t->error : "");
		return t->st == N_CANCELLED ? KILN_ECANCELLED : KILN_EFAILED;
	}
	/* an agent fetches what it is given as one blob each: a folder's
	 * would reach its tool as the tree record's text */
	for (size_t k = lo; n->w != NULL && n->w->lease != 0 && k < hi; k++)
		if (t->outs[k].folder) {
			snprintf(err, errlen, "needed output %s#%s is a folder output: "
			         "a step on a build agent cannot be given one (declare "
			         "it as an input: such a step runs on the daemon's machine)",
			         t->ks->url, t->ks->outputs[k].name);
			return KILN_EINVAL;
		}
	if ((ans->paths = calloc(hi - lo + 1, sizeof *ans->paths)) == NULL ||
	    (ans->ids = calloc(hi - lo + 1, sizeof *ans->ids)) == NULL)
		return KILN_ENOMEM;
	for (size_t k = lo; k < hi; k++) {
		if ((ans->paths[ans->n] = strdup(t->outpaths[k])) == NULL ||
		    run_need_add(n, t, k) != 0)
			return KILN_ENOMEM;
		ans->ids[ans->n++] = t->outs[k].id;
	}
	return 0;
}

/* n's run asks for t, not finished in this wave: schedule t (and all it
 * needs) for n's builds, and record the ask in e->ons, with a need cycle
 * as its answer when t waits on n. 0 or KILN_ENOMEM. */
static int
need_ask(struct engine *e, struct graph *g, struct node *n, struct node *t)
{
	char msg[2048];
	int rv;

	if ((rv = need_cycle_find(e, g, n, t, msg, sizeof msg)) < 0)
		return rv;
	if (rv == 1) {
		char *m = strdup(msg);
		return m == NULL ? KILN_ENOMEM : on_add(e, g, n, t->idx, m);
	}
	if ((rv = need_schedule_closure(e, g, t, n->builds)) != 0)
		return rv;
	return need_done(e, t) ? 0 : on_add(e, g, n, t->idx, NULL);
}

void
engine_need_answer_free(struct engine_need_answer *ans)
{
	for (size_t i = 0; ans->paths && i < ans->n; i++)
		free(ans->paths[i]);
	free(ans->paths);
	free(ans->ids);
	memset(ans, 0, sizeof *ans);
}

int
engine_need(struct engine *e, const char *token, const char *url,
            const char *output, struct engine_need_answer *ans, char *err,
            size_t errlen)
{
	struct need_tok *tk;
	struct graph *g;
	struct node *n, *t = NULL;
	uint32_t at;
	long i = -1;
	int out = -1, rv;

	memset(ans, 0, sizeof *ans);
	err[0] = '\0';
	pthread_mutex_lock(&e->mu);
	if (e->quit) {
		rv = KILN_ECLOSED;
		goto fail;
	}
	if ((tk = tok_find(e, token)) == NULL) {
		snprintf(err, errlen, "the step token is unknown or expired (kiln need "
		         "works only while the step's tool runs)");
		rv = KILN_ENOTFOUND;
		goto fail;
	}
	g = tk->g;
	n = tk->n;
	need_grant(e);
	if (url == NULL || !step_index(g->plan, url, &at)) {
		snprintf(err, errlen, "no step of profile %s has the URL '%s' (kiln ls "
		         "-p %s lists them)", g->profile, url ? url : "", g->profile);
		rv = KILN_EINVAL;
	} else {
		t = &g->nodes[at];
		for (size_t k = 0; output && output[0] && k < t->ks->noutputs && out < 0; k++)
			if (strcmp(t->ks->outputs[k].name, output) == 0)
				out = (int)k;
		if (output != NULL && output[0] != '\0' && out < 0) {
			snprintf(err, errlen, "step %s has no output named '%s'", url, output);
			rv = KILN_EINVAL;
		} else {
			rv = 0;
			i = need_on_find(e, n, t->idx);
		}
	}
	if (n->need_state == NEED_SUSPENDED) {
		/* every answer waits for the slot; a need asked alongside the
		 * others is scheduled at once, to build in parallel */
		if (rv == 0 && i < 0 && !need_done(e, t) && n->builds != 0 &&
		    (rv = need_ask(e, g, n, t)) != 0)
			goto fail;
		err[0] = '\0';
		ans->pending = 1;
		rv = 0;
		goto fail;
	}
	if (rv != 0)
		goto fail;
	if (i < 0 && !need_done(e, t)) {
		if (n->builds == 0) {
			snprintf(err, errlen, "the builds this step belongs to were cancelled");
			rv = KILN_ECANCELLED;
			goto fail;
		}
		if ((rv = need_ask(e, g, n, t)) != 0)
			goto fail;
		i = need_on_find(e, n, t->idx);
	}
	if (i >= 0 && e->ons[i].err != NULL) {
		snprintf(err, errlen, "%s", e->ons[i].err);
		on_drop(e, (size_t)i);
		rv = KILN_EFAILED;
		need_grant(e);  /* runs on a cycle resume, with the error */
		goto fail;
	}
	if (!need_done(e, t) && n->w != NULL && n->w->lease != 0) {
		/* a run on an agent holds no slot here: it asks again */
		ans->pending = 1;
		rv = 0;
		goto fail;
	}
	if (!need_done(e, t)) {
		/* lend the slot out until all it asked for is done */
		n->need_state = NEED_SUSPENDED;
		n->w->need_since = kiln_mono_ns();
		e->nsusp++;
		e->running--;
		pthread_cond_broadcast(&e->cv);
		ans->pending = 1;
		rv = 0;
		goto fail;
	}
	if (i >= 0)
		on_drop(e, (size_t)i);
	rv = answer_done(n, t, out, ans, err, errlen);
	/* a run on an agent: its agent may now fetch what it was given */
	if (rv == 0 && n->w != NULL && n->w->lease != 0)
		rv = agent_lease_allow(e, n, ans->ids, ans->n);
fail:
	pthread_mutex_unlock(&e->mu);
	if (rv != 0)
		engine_need_answer_free(ans);
	return rv;
}
