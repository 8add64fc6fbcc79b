/* lost.c — steps whose records a failed commit lost.
 *
 * A step is published when its records commit (docs/build.md). A commit
 * that fails (a full disk: ENOSPC) loses every record of its batch, and a
 * batch holds records of several steps, possibly of several builds, queued
 * between two commits. Such a step's outputs are in build/, but neither
 * its action result nor its index entry reached the store: the builds
 * that wanted it must fail, and the next build must decide it afresh, so
 * a warm daemon must forget the result it holds in memory (have, key,
 * quick: the fast path would call it up to date).
 *
 * Which steps: the batches are numbered (e->batch_gen, bumped when
 * batch_commit takes the batch), and each step's full decision notes the
 * number when it begins (rec_lo) and when the step finishes (rec_hi): its
 * records are in batches of that range. A failed batch is noted by
 * batch_commit (lost_note); the steps already finished are found when the
 * engine next holds e->mu (lost_apply, from builds_check and build_end),
 * those still in progress when they finish (lost_node_finished). Both err
 * on the side of losing: a step lost although its records committed is
 * only decided in full next time, and finds its cached result.
 *
 * A commit that succeeds can still skip records: those naming a blob that
 * gc (another process's too) removed between the put, or the lookup that
 * reused a cached result, and the commit (store/gc.c says why that is the
 * only outcome gc can leave, besides keeping the blob). Such a step's
 * output is in build/, but neither its index entry nor (for a reuse) its
 * touched result is in the store: the same ranges note those batches
 * (lost_note_skipped, skip_lo/hi/max), and their steps are forgotten
 * like lost ones but not counted into their builds: nothing failed, and
 * the next build decides them in full and makes the blob again.
 *
 * Threads: lost_note and lost_note_skipped under commit_mu (takes batch_mu); the rest under
 * e->mu, but lost_decision_begins (the node's worker, which owns rec_lo). */
#include <string.h>

#include "engine_int.h"
#include "lost.h"

/* Widen the range [*lo, *hi] and *max to batch gen (batch_mu held). */
static void
span_note(uint32_t *lo, uint32_t *hi, uint32_t *max, uint32_t gen)
{
	if (*hi == 0 || gen < *lo)
		*lo = gen;
	if (gen > *hi)
		__atomic_store_n(hi, gen, __ATOMIC_RELEASE);
	if (gen > __atomic_load_n(max, __ATOMIC_RELAXED))
		__atomic_store_n(max, gen, __ATOMIC_RELEASE);
}

void
lost_note(struct engine *e, uint32_t gen, int rv)
{
	pthread_mutex_lock(&e->batch_mu);
	span_note(&e->lost_lo, &e->lost_hi, &e->lost_max, gen);
	/* read under e->mu only (node_lose): atomic (ThreadSanitizer,
	 * e2e/gc_race) */
	__atomic_store_n(&e->lost_rv, rv, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->batch_mu);
}

void
lost_note_skipped(struct engine *e, uint32_t gen)
{
	pthread_mutex_lock(&e->batch_mu);
	span_note(&e->skip_lo, &e->skip_hi, &e->skip_max, gen);
	pthread_mutex_unlock(&e->batch_mu);
}

void
lost_decision_begins(struct engine *e, struct node *n)
{
	n->rec_lo = __atomic_load_n(&e->batch_gen, __ATOMIC_ACQUIRE);
	n->rec_hi = 0;
	n->rec_failed = 0;
	n->lost = 0;   /* no other thread looks at a node being decided */
	__atomic_store_n(&n->unrecorded, 0, __ATOMIC_RELAXED);
}

/* Forget n's result (e->mu held). Its output ids stay: dependents
 * deciding now may read them. */
static void
node_forget(struct graph *g, struct node *n)
{
	n->have = 0;
	memset(&n->key, 0, sizeof n->key);
	memset(&n->quick, 0, sizeof n->quick);
	for (size_t i = 0; i < n->ks->noutputs; i++)
		n->outs[i].mat_gen = 0;   /* build/'s copy: not vouched for */
	g->index_dirty = 1;
}

/* Forget n's result because gc took a blob its records named (e->mu
 * held). build/ holds its outputs as its decision left them (a copy, or
 * a link to the blob's inode, are not taken with the blob), so the map
 * (output_index.c) lists them still, and a whole-profile build's pruning
 * keeps them, until the step is decided again: it is no failure, and
 * build/ must stay what the sources say. */
static void
node_unrecord(struct graph *g, struct node *n)
{
	int had = n->have;

	node_forget(g, n);
	if (had)
		n->unrecorded = 1;
}

/* Forget n's result (e->mu held) and count it into the builds that want
 * it, once. */
static void
node_lose(struct engine *e, struct graph *g, struct node *n)
{
	node_forget(g, n);
	if (n->lost)
		return;
	n->lost = 1;
	for (uint64_t m = n->builds; m != 0; m &= m - 1) {
		struct build *b = e->active[__builtin_ctzll(m)];
		if (b == NULL)
			continue;
		if (b->nlost++ == 0)
			b->lost_rv = __atomic_load_n(&e->lost_rv, __ATOMIC_RELAXED);
	}
}

/* Whether n is a step whose full decision has finished, so that its
 * records lie in batches [rec_lo, rec_hi]. */
static int
recorded(const struct node *n)
{
	return (n->st == N_DONE || n->st == N_FAILED) && n->rec_lo != 0 &&
	       n->rec_hi >= n->rec_lo;
}

/* Take the range [*lo, *hi] noted since the last call; 0 when none. */
static int
span_take(struct engine *e, uint32_t *lo, uint32_t *hi, uint32_t *out_lo,
          uint32_t *out_hi)
{
	if (__atomic_load_n(hi, __ATOMIC_ACQUIRE) == 0)
		return 0;
	pthread_mutex_lock(&e->batch_mu);
	*out_lo = *lo;
	*out_hi = *hi;
	*lo = 0;
	__atomic_store_n(hi, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->batch_mu);
	return 1;
}

/* Forget (count: and lose) every finished step with records in [lo, hi]. */
static void
span_apply(struct engine *e, uint32_t lo, uint32_t hi, int count)
{
	for (struct graph *g = e->graphs; g != NULL; g = g->next)
		for (uint32_t i = 0; i < g->n; i++) {
			struct node *n = &g->nodes[i];
			if (!recorded(n) || n->rec_lo > hi || n->rec_hi < lo)
				continue;
			if (count)
				node_lose(e, g, n);
			else
				node_unrecord(g, n);
		}
}

void
lost_apply(struct engine *e)
{
	uint32_t lo, hi;

	if (span_take(e, &e->lost_lo, &e->lost_hi, &lo, &hi))
		span_apply(e, lo, hi, 1);
	if (span_take(e, &e->skip_lo, &e->skip_hi, &lo, &hi))
		span_apply(e, lo, hi, 0);
}

void
lost_node_finished(struct engine *e, struct graph *g, struct node *n,
                   enum node_state st)
{
	if (st != N_DONE && st != N_FAILED) {
		n->rec_lo = 0;   /* skipped or cancelled: nothing queued */
		return;
	}
	if (n->rec_lo == 0)
		return;
	n->rec_hi = __atomic_load_n(&e->batch_gen, __ATOMIC_ACQUIRE);
	/* a batch that failed since its first record may hold some of them */
	if (n->rec_failed || __atomic_load_n(&e->lost_max, __ATOMIC_ACQUIRE) >= n->rec_lo)
		node_lose(e, g, n);
	else if (__atomic_load_n(&e->skip_max, __ATOMIC_ACQUIRE) >= n->rec_lo)
		node_unrecord(g, n);
}
