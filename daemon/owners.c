/* owners.c — the builds' owning connections, and the thread that cancels
 * a build whose owners all went away (owners.h).
 *
 * A plain array of claims: kilnd runs at most a few dozen builds at once
 * (ENGINE_MAX_BUILDS), and claims of ended builds are dropped whenever a
 * new build is claimed, so it stays about that small.
 *
 * Threads: mu guards everything below it; the thread waits on cv for the
 * earliest orphan's deadline, a new orphan, or closing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln_error.h"
#include "owners.h"
#include "kiln_clock.h"

struct claim {
	uint64_t build;
	uint32_t *pipes;     /* the connections that want it */
	uint32_t npipes, cap;
	int64_t orphan_ns;   /* when its last owner closed; 0: owned */
};

struct kilnd_owners {
	struct owners_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* CLOCK_MONOTONIC */
	pthread_t thread;
	int closing;
	struct claim *v;
	size_t n, cap;
};

/* Take claim i out of the array (lock held). */
static void
claim_drop(struct kilnd_owners *o, size_t i)
{
	free(o->v[i].pipes);
	o->v[i] = o->v[--o->n];
}

/* Drop the claims of builds that ended (lock held). */
static void
claims_prune(struct kilnd_owners *o)
{
	for (size_t i = 0; i < o->n;)
		if (o->cfg.ended(o->cfg.arg, o->v[i].build))
			claim_drop(o, i);
		else
			i++;
}

/* The claim of build, made when start (lock held). NULL: none, or out of
 * memory when start. */
static struct claim *
claim_get(struct kilnd_owners *o, uint64_t build, int start)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].build == build)
			return &o->v[i];
	if (!start)
		return NULL;
	claims_prune(o);
	if (o->n == o->cap) {
		size_t ncap = o->cap ? o->cap * 2 : 16;
		struct claim *nv = realloc(o->v, ncap * sizeof *nv);
		if (nv == NULL)
			return NULL;
		o->v = nv;
		o->cap = ncap;
	}
	o->v[o->n] = (struct claim){.build = build};
	return &o->v[o->n++];
}

/* Add pipe to c's owners unless there. Returns 0 or KILN_ENOMEM. */
static int
claim_add_pipe(struct claim *c, uint32_t pipe)
{
	for (uint32_t i = 0; i < c->npipes; i++)
		if (c->pipes[i] == pipe)
			return 0;
	if (c->npipes == c->cap) {
		uint32_t ncap = c->cap ? c->cap * 2 : 2;
		uint32_t *np = realloc(c->pipes, ncap * sizeof *np);
		if (np == NULL)
			return KILN_ENOMEM;
		c->pipes = np;
		c->cap = ncap;
	}
	c->pipes[c->npipes++] = pipe;
	return 0;
}

int
owners_claim(struct kilnd_owners *o, uint64_t build, uint32_t pipe, int start)
{
	struct claim *c;
	int rv = 0;

	pthread_mutex_lock(&o->mu);
	if ((c = claim_get(o, build, start)) != NULL) {
		if ((rv = claim_add_pipe(c, pipe)) == 0)
			c->orphan_ns = 0;
		else if (start && c->npipes == 0)
			claim_drop(o, (size_t)(c - o->v)); /* untracked, as if before */
	} else if (start) {
		rv = KILN_ENOMEM;
	}
	pthread_mutex_unlock(&o->mu);
	return rv;
}

void
owners_pipe_closed(struct kilnd_owners *o, uint32_t pipe)
{
	int orphaned = 0;

	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->n; i++) {
		struct claim *c = &o->v[i];
		for (uint32_t j = 0; j < c->npipes; j++)
			if (c->pipes[j] == pipe) {
				c->pipes[j] = c->pipes[--c->npipes];
				break;
			}
		if (c->npipes == 0 && c->orphan_ns == 0) {
			c->orphan_ns = kiln_mono_ns();
			orphaned = 1;
		}
	}
	if (orphaned)
		pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/* Take out the first orphan whose grace has ended into *build, or say
 * when the next one ends (*next_ns, 0: none). Lock held. */
static int
orphan_due(struct kilnd_owners *o, uint64_t *build, int64_t *next_ns)
{
	int64_t now = kiln_mono_ns(), grace = (int64_t)o->cfg.grace_ms * 1000000;

	*next_ns = 0;
	for (size_t i = 0; i < o->n; i++) {
		int64_t due = o->v[i].orphan_ns + grace;
		if (o->v[i].orphan_ns == 0)
			continue;
		if (due <= now) {
			*build = o->v[i].build;
			claim_drop(o, i);
			return 1;
		}
		if (*next_ns == 0 || due < *next_ns)
			*next_ns = due;
	}
	return 0;
}

static void *
owners_main(void *arg)
{
	struct kilnd_owners *o = arg;
	uint64_t build;
	int64_t next;

	pthread_mutex_lock(&o->mu);
	while (!o->closing) {
		if (orphan_due(o, &build, &next)) {
			/* the engine's locks come after ours: never under mu */
			pthread_mutex_unlock(&o->mu);
			o->cfg.cancel(o->cfg.arg, build);
			pthread_mutex_lock(&o->mu);
		} else if (next == 0) {
			pthread_cond_wait(&o->cv, &o->mu);
		} else {
			struct timespec ts = {next / 1000000000, next % 1000000000};
			pthread_cond_timedwait(&o->cv, &o->mu, &ts);
		}
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int
owners_new(const struct owners_config *cfg, struct kilnd_owners **op)
{
	struct kilnd_owners *o;
	pthread_condattr_t ca;

	*op = NULL;
	if ((o = calloc(1, sizeof *o)) == NULL)
		return KILN_ENOMEM;
	o->cfg = *cfg;
	pthread_mutex_init(&o->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&o->thread, NULL, owners_main, o) != 0) {
		pthread_cond_destroy(&o->cv);
		pthread_mutex_destroy(&o->mu);
		free(o);
		return KILN_EIO;
	}
	*op = o;
	return 0;
}

void
owners_free(struct kilnd_owners *o)
{
	if (o == NULL)
		return;
	pthread_mutex_lock(&o->mu);
	o->closing = 1;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->thread, NULL);
	while (o->n > 0)
		claim_drop(o, o->n - 1);
	free(o->v);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	free(o);
}
