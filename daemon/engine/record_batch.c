/* record_batch.c — the batch that steps' records are queued in, and its
 * commits: when the oldest record has waited long enough or enough have
 * queued (engine_batch_unlock), and when a build ends (batch_commit). A
 * failed commit is noted for lost.c. Also the hand-back of the store's
 * mapped pages while a build works (pages_tick).
 *
 * Threads: any worker. batch_mu guards the batch; commit_mu makes commits
 * one at a time (and orders them with lost.c's notes); pages_tick is
 * lock-free. */
#include <pthread.h>
#include <stdio.h>

#include "engine_int.h"
#include "lost.h"
#include "record_batch.h"

/* Every 2 ms of work, hand the store's mapped database pages back if
 * more than 8 MiB of them are mapped (kiln_store_trim_pages): a build
 * reads or writes most of the database, and its pages would stay in the
 * daemon's resident set. Random reads map fast (the kernel maps 16
 * neighbouring pages a fault), so most of a large database is mapped
 * within a fraction of a second. Unmapping whatever was mapped every few
 * ms cost a small project's full build dearly: each madvise flushes the
 * other core's TLB (an interrupt, slow in a VM); hence the allowance.
 * (The figures: docs/build.md, "Figures behind the engine's code".)
 * Unlocked. */
void
pages_tick(struct engine *e)
{
	int64_t now = kiln_mono_ns();
	int64_t last = __atomic_load_n(&e->last_unmap_ns, __ATOMIC_RELAXED);

	if (now - last < 2 * 1000000LL ||
	    !__atomic_compare_exchange_n(&e->last_unmap_ns, &last, now, 0,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	kiln_store_trim_pages(e->s);
}

/* Commit what waits in the batch. 0, or the failed commit's code: its
 * records are gone, and lost_note says which batch they were in. */
int
batch_commit(struct engine *e)
{
	kiln_batch *b, *fresh;
	size_t skipped = 0;
	uint32_t gen;
	int rv;

	pthread_mutex_lock(&e->commit_mu);
	pthread_mutex_lock(&e->batch_mu);
	filestate_flush(e->fs, e->batch);
	b = e->batch;
	if (kiln_batch_len(b) == 0 || kiln_batch_new(&fresh) != 0) {
		pthread_mutex_unlock(&e->batch_mu);
		pthread_mutex_unlock(&e->commit_mu);
		return 0;
	}
	e->batch = fresh;
	e->batch_since_ns = 0;
	gen = e->batch_gen;
	__atomic_store_n(&e->batch_gen, gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->batch_mu);
	if ((rv = kiln_store_commit(e->s, b, &skipped)) != 0) {
		/* before commit_mu goes: a build ending next must see it */
		lost_note(e, gen, rv);
		if (e->cfg.log) {
			char msg[160];
			snprintf(msg, sizeof msg, "committing build records: %s",
			         kiln_strerror(rv));
			e->cfg.log(e->cfg.arg, 1, msg);
		}
	} else if (skipped > 0) {
		/* gc removed a blob between its put (or the lookup that
		 * reused it) and this commit: those records are not in the
		 * store, so their steps must not be believed up to date */
		lost_note_skipped(e, gen);
	}
	kiln_batch_free(b);
	pthread_mutex_unlock(&e->commit_mu);
	pages_tick(e);
	return rv;
}

int
engine_batch_lock(struct engine *e, kiln_batch **b)
{
	pthread_mutex_lock(&e->batch_mu);
	*b = e->batch;
	return 0;
}

/* When queued records are committed: when the oldest has waited 100 ms,
 * or at this many records. (Timed from the oldest record, not from the
 * last commit: a small build after a pause would otherwise commit, with a
 * syncfs and an fdatasync, in the middle of its chain of steps, as well as
 * at its end.) Each commit rewrites every database page its records land on,
 * and the use records of blobs and actions, keyed by hash, land on random
 * ones: fewer, larger commits write less. Past this size, the commit's
 * copies of those pages raise the daemon's peak memory (docs/build.md,
 * "Figures behind the engine's code"). */
#define COMMIT_OPS 2048

void
engine_batch_unlock(struct engine *e)
{
	size_t len = kiln_batch_len(e->batch);
	int64_t now = kiln_mono_ns();
	int due;

	if (len > 0 && e->batch_since_ns == 0)
		e->batch_since_ns = now;
	due = len >= COMMIT_OPS ||
	      (len > 0 && now - e->batch_since_ns > 100 * 1000000LL);

	pthread_mutex_unlock(&e->batch_mu);
	if (due)
		batch_commit(e);
}
