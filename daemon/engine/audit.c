/* audit.c — kiln audit (docs/build.md, "kiln audit"): run steps whose
 * results are recorded again, in a scratch folder, and compare what they
 * make with the recorded outputs. A tool that makes different bytes from
 * the same inputs (a time stamp, a random number, its output path written
 * into the file) breaks caching for everyone: its dependents rebuild for
 * nothing, and two machines disagree on what the "same" asset is.
 *
 * Nothing is published: the outputs are hashed where the tool wrote them
 * and the folder is removed, so build/, the index, the store and the
 * records are as they were. The steps run one at a time, on the handler
 * thread that asked, while e->auditing keeps builds out (they would
 * decide the same nodes; their node_work is the audit's meanwhile).
 *
 * Which steps: those matched (URL globs, none: all) that have a result
 * and no `kiln need` (a need is answered only inside a build), and only
 * when no file changed since the last build (the watch says so; a daemon
 * without one cannot tell and audits anyway). --sample N picks N of them
 * with a seeded generator (splitmix64), so a test can name the pick.
 *
 * Threads: engine_audit takes e->mu to pick and to end; the runs are
 * unlocked, on nodes no build may touch while e->auditing is set. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "engine_int.h"
#include "glob.h"
#include "run.h"
#include "scratch.h"
#include "search_path.h"
#include "step.h"

#define AUDIT_MAX_STEPS 100000  /* steps in one answer (its size bounded) */

static uint64_t
splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The graph of profile ("" or NULL: the first), or NULL (e->mu held). */
static struct graph *
audit_graph(struct engine *e, const char *profile, char *err, size_t errlen)
{
	const char *const *profiles;
	struct graph *g;

	if (e->desc == NULL) {
		snprintf(err, errlen, "nothing is built yet (run kiln build first)");
		return NULL;
	}
	if ((profile == NULL || profile[0] == '\0') &&
	    (kiln_desc_profiles(e->desc, &profiles) == 0 || (profile = profiles[0]) == NULL)) {
		snprintf(err, errlen, "the project has no profile");
		return NULL;
	}
	for (g = e->graphs; g != NULL && strcmp(g->profile, profile) != 0; g = g->next)
		;
	if (g == NULL)
		snprintf(err, errlen, "profile %s is not built yet (run kiln build -p %s first)",
		         profile, profile);
	return g;
}

/* Whether n can be audited: a complete result, no needs, idle; a tool's
 * step (a bundle is kiln's own packing, run by no process) with file
 * outputs only (a folder output's run and comparison are not written yet). */
static int
auditable(const struct node *n)
{
	return n->have && n->w == NULL && n->nneeds == 0 && n->nrneeds == 0 &&
	       (n->st == N_DONE || n->st == N_IDLE) && n->ks->noutputs > 0 &&
	       !n->ks->tool->builtin && !n->folders;
}

/* The matched, auditable nodes into *pick (*npick), the others counted
 * into *skipped. 0, KILN_EINVAL (a bad glob, nothing matched: err) or
 * KILN_ENOMEM. */
static int
audit_candidates(struct graph *g, const Kiln__AuditRequest *rq, uint32_t **pick,
                 uint32_t *npick, uint32_t *skipped, char *err, size_t errlen)
{
	uint8_t *mark = calloc(g->n ? g->n : 1, 1);
	uint32_t *v = malloc((g->n ? g->n : 1) * sizeof *v), n = 0;

	if (mark == NULL || v == NULL) {
		free(mark);
		free(v);
		return KILN_ENOMEM;
	}
	for (size_t t = 0; t < rq->n_targets || (rq->n_targets == 0 && t == 0); t++) {
		kiln_glob *gl = NULL;
		const char *why = NULL;
		int matched = 0;
		if (rq->n_targets > 0 && glob_compile(rq->targets[t], &gl, &why) != 0) {
			snprintf(err, errlen, "target '%s': %s", rq->targets[t], why ? why : "bad glob");
			goto bad;
		}
		for (uint32_t i = 0; i < g->n; i++)
			if (gl == NULL || glob_match(gl, g->nodes[i].ks->url))
				matched = mark[i] = 1;
		glob_free(gl);
		if (!matched && rq->n_targets > 0) {
			snprintf(err, errlen, "no step of profile %s has the URL '%s' "
			         "(kiln ls -p %s lists them)", g->profile, rq->targets[t], g->profile);
			goto bad;
		}
	}
	*skipped = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		if (!mark[i])
			continue;
		if (auditable(&g->nodes[i]))
			v[n++] = i;
		else
			(*skipped)++;
	}
	free(mark);
	*pick = v;
	*npick = n;
	return 0;
bad:
	free(mark);
	free(v);
	return KILN_EINVAL;
}

/* Keep sample of the n candidates, picked with seed (a partial
 * Fisher-Yates shuffle), then in graph order: the same seed on the same
 * graph picks the same steps. */
static uint32_t
audit_sample(uint32_t *v, uint32_t n, uint32_t sample, uint64_t seed)
{
	uint64_t s = seed;

	if (sample == 0 || sample >= n)
		return n;
	for (uint32_t i = 0; i < sample; i++) {
		uint32_t j = i + (uint32_t)(splitmix64(&s) % (n - i));
		uint32_t t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
	for (uint32_t i = 1; i < sample; i++)   /* insertion sort: small */
		for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			uint32_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return sample;
}

/* Compare output k of n, as its run left it in the scratch folder, with
 * the recorded one; a difference is added to st. */
static void
audit_output(struct engine *e, struct node *n, size_t k, Kiln__AuditStep *st)
{
	char dir[PATH_MAX], path[PATH_MAX * 2];
	Kiln__AuditOutput *o;
	kiln_id got = {0};
	uint64_t size = 0;
	int fd, have = 0;

	if (scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir) != 0)
		return;
	snprintf(path, sizeof path, "%s/%s", dir, n->ks->outputs[k].file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		have = kiln_id_of_fd(fd, &got, &size) == 0;
		close(fd);
	}
	if (have && id_eq(&got, &n->outs[k].id))
		return;
	if ((o = malloc(sizeof *o + 32)) == NULL)
		return;
	kiln__audit_output__init(o);
	o->name = (char *)n->ks->outputs[k].name;
	memcpy((uint8_t *)(o + 1), n->outs[k].id.b, 16);
	o->recorded.data = (uint8_t *)(o + 1);
	o->recorded.len = 16;
	if (have) {
		memcpy((uint8_t *)(o + 1) + 16, got.b, 16);
		o->got.data = (uint8_t *)(o + 1) + 16;
		o->got.len = 16;
	}
	o->recorded_size = n->outs[k].size;
	o->got_size = size;
	st->outputs[st->n_outputs++] = o;
}

/* Run n again and judge it into st (unlocked; n is the audit's). */
static void
audit_one(struct engine *e, struct graph *g, struct node *n, Kiln__AuditStep *st)
{
	struct spawn_result r;
	char tail[1024];
	int rv;

	st->url = (char *)n->ks->url;
	if (node_work_get(n) != 0) {
		st->verdict = KILN__AUDIT_STEP__VERDICT__FAILED;
		st->error = (char *)protobuf_c_empty_string;   /* the verdict says */
		return;
	}
	if ((rv = step_run_wait(e, g, n, &r)) != 0) {
		st->verdict = KILN__AUDIT_STEP__VERDICT__FAILED;
		st->error = strdup(n->error ? n->error : kiln_strerror(rv));
		if (st->error == NULL)
			st->error = (char *)protobuf_c_empty_string;
		free(n->error);
		n->error = NULL;
		node_work_free(n);
		return;
	}
	st->duration_ns = (uint64_t)r.wall_ns;
	if (!r.exited || r.status != 0) {
		spawn_log_tail(n->w->log_fd, 5, tail, sizeof tail);
		st->verdict = KILN__AUDIT_STEP__VERDICT__FAILED;
		if (asprintf(&st->error, "the tool %s %d%s%s", r.exited ? "exited with"
		             : "was killed by signal", r.status, tail[0] ? ": " : "", tail) < 0)
			st->error = (char *)protobuf_c_empty_string;
	} else if ((st->outputs = calloc(n->ks->noutputs, sizeof *st->outputs)) != NULL) {
		for (size_t k = 0; k < n->ks->noutputs; k++)
			audit_output(e, n, k, st);
		st->verdict = st->n_outputs > 0 ? KILN__AUDIT_STEP__VERDICT__DIFFERENT
		                                : KILN__AUDIT_STEP__VERDICT__SAME;
	}
	/* its folder holds the outputs: scratch_give removes it all */
	scratch_give(e, n->w->scratch, n->w->log_fd);
	n->w->log_fd = -1;
	free(n->error);
	n->error = NULL;
	node_work_free(n);
}

/* Pick the steps and claim the engine for the audit (e->mu held). */
static int
audit_begin(struct engine *e, const Kiln__AuditRequest *rq, Kiln__AuditReply *rep,
            struct graph **gp, uint32_t **pick, uint32_t *npick, uint16_t *pathi,
            char *err, size_t errlen)
{
	const char *pinned;
	struct graph *g;
	int rv;

	if (e->quit)
		return KILN_ECLOSED;
	if (e->auditing || e->nactive > 0) {
		snprintf(err, errlen, "%s; try again when it ends", e->auditing
		         ? "another kiln audit is running" : "a build is running");
		return KILN_EBUSY;
	}
	if ((g = audit_graph(e, rq->profile, err, errlen)) == NULL)
		return KILN_ENOTFOUND;
	if (e->watch != NULL && atomic_load(&e->changes) != e->pass_changes) {
		snprintf(err, errlen, "files changed since the last build: run kiln "
		         "build first, so that what is audited is what is recorded");
		return KILN_EINVAL;
	}
	if ((rv = audit_candidates(g, rq, pick, npick, &rep->not_audited, err, errlen)) != 0)
		return rv;
	rep->cached = *npick;
	if (rq->seed == 0 && getrandom(&rep->seed, sizeof rep->seed, 0) != sizeof rep->seed)
		rep->seed = (uint64_t)kiln_wall_ns();
	else if (rq->seed != 0)
		rep->seed = rq->seed;
	*npick = audit_sample(*pick, *npick, rq->sample, rep->seed);
	if (*npick > AUDIT_MAX_STEPS)
		*npick = AUDIT_MAX_STEPS;
	pinned = kiln_desc_path(e->desc);
	if ((rv = engine_path_intern(e, pinned != NULL ? pinned : rq->path, pathi)) != 0) {
		free(*pick);
		return rv;
	}
	rep->profile = g->profile;
	*gp = g;
	e->auditing = 1;
	return 0;
}

int
engine_audit(struct engine *e, const Kiln__AuditRequest *rq, Kiln__AuditReply **out,
             char *err, size_t errlen)
{
	Kiln__AuditReply *rep = calloc(1, sizeof *rep);
	struct graph *g = NULL;
	uint32_t *pick = NULL, npick = 0;
	uint16_t pathi = 0;
	int rv;

	err[0] = '\0';
	*out = NULL;
	if (rep == NULL)
		return KILN_ENOMEM;
	kiln__audit_reply__init(rep);
	pthread_mutex_lock(&e->mu);
	rv = audit_begin(e, rq, rep, &g, &pick, &npick, &pathi, err, errlen);
	pthread_mutex_unlock(&e->mu);
	if (rv != 0) {
		free(rep);
		return rv;
	}
	if ((rep->steps = calloc(npick ? npick : 1, sizeof *rep->steps)) == NULL)
		npick = 0;
	for (uint32_t i = 0; i < npick; i++) {
		struct node *n = &g->nodes[pick[i]];
		uint16_t was = n->pathi;
		Kiln__AuditStep *st;
		/* the daemon stopping: the step running now is the last */
		pthread_mutex_lock(&e->mu);
		int quit = e->quit;
		pthread_mutex_unlock(&e->mu);
		if (quit || (st = calloc(1, sizeof *st)) == NULL)
			break;
		kiln__audit_step__init(st);
		pthread_mutex_lock(&e->mu);
		n->pathi = pathi;   /* the asking client's PATH, as a build's */
		pthread_mutex_unlock(&e->mu);
		audit_one(e, g, n, st);
		pthread_mutex_lock(&e->mu);
		n->pathi = was;
		pthread_mutex_unlock(&e->mu);
		rep->steps[rep->n_steps++] = st;
	}
	free(pick);
	pthread_mutex_lock(&e->mu);
	e->auditing = 0;
	pthread_mutex_unlock(&e->mu);
	*out = rep;
	return 0;
}

void
engine_audit_free(Kiln__AuditReply *rep)
{
	if (rep == NULL)
		return;
	for (size_t i = 0; i < rep->n_steps; i++) {
		Kiln__AuditStep *st = rep->steps[i];
		for (size_t k = 0; k < st->n_outputs; k++)
			free(st->outputs[k]);
		free(st->outputs);
		if (st->error != protobuf_c_empty_string)
			free(st->error);
		free(st);
	}
	free(rep->steps);
	free(rep);
}
