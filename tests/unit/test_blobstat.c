/* test_blobstat.c — the store's running figures (kiln_store_stats_get):
 * blob count and bytes equal what objects/ holds after puts, duplicate
 * puts, gc, a reopen, puts whose use records wait for a commit, and puts
 * racing gc in several threads; gc's state is what the last gc did.
 *
 * Threads never call cmocka asserts; they record their first error. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define NTHREADS 3
#define NPUTS 120

/* The figures must equal objects/, counted from outside. */
static void
assert_figures(void **state, kiln_store *s, const char *what)
{
	uint64_t nblobs = 0, nbytes = 0;
	kiln_store_stats st;
	int rv;

	tu_check_objects(tu_path(state, "store"), what, &nblobs, &nbytes);
	if ((rv = kiln_store_stats_get(s, &st)) != 0)
		fail_msg("%s: stats: %s", what, kiln_strerror(rv));
	if (st.blobs != nblobs || st.bytes != nbytes)
		fail_msg("%s: stats say %" PRIu64 " blobs, %" PRIu64 " bytes; objects/ "
		         "holds %" PRIu64 ", %" PRIu64, what, st.blobs, st.bytes,
		         nblobs, nbytes);
	assert_true(st.exact);
}

static void
empty_store_has_no_blobs(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_store_stats st;

	assert_int_equal(kiln_store_stats_get(s, &st), 0);
	assert_int_equal(st.blobs, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.gc_running, 0);
	assert_int_equal(st.last_gc_end_ns, 0);
	kiln_store_close(s);
}

static void
puts_and_duplicates_are_counted_once(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);

	for (int i = 0; i < 20; i++)
		tu_put_content(s, (uint64_t)i, 100 + (size_t)i * 53);
	for (int i = 0; i < 20; i += 3)
		tu_put_content(s, (uint64_t)i, 100 + (size_t)i * 53);
	assert_figures(state, s, "20 puts and 7 again");
	kiln_store_close(s);
	s = tu_open_store(state, KILN_DURABLE_NONE);
	assert_figures(state, s, "reopened");
	kiln_store_close(s);
}

static void
gc_moves_the_figures_and_is_recorded(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_gc_opts o = {.action_max_age_s = 0, .grace_s = 0};
	kiln_gc_stats g;
	kiln_store_stats st;
	kiln_id keep = tu_put_content(s, 1, 4000);

	for (int i = 2; i < 12; i++)
		tu_put_content(s, (uint64_t)i, 300 * (size_t)i);
	assert_int_equal(kiln_store_index_set(s, "pc", "kept", &keep), 0);
	assert_int_equal(kiln_store_gc(s, &o, &g), 0);
	assert_int_equal(g.removed_blobs, 10);
	assert_figures(state, s, "after gc");
	assert_int_equal(kiln_store_stats_get(s, &st), 0);
	assert_int_equal(st.blobs, 1);
	assert_int_equal(st.bytes, 4000);
	assert_int_equal(st.last_gc_removed_blobs, g.removed_blobs);
	assert_int_equal(st.last_gc_removed_bytes, g.removed_bytes);
	assert_true(st.last_gc_start_ns > 0);
	assert_true(st.last_gc_end_ns >= st.last_gc_start_ns);
	assert_int_equal(st.gc_running, 0);
	assert_int_equal(st.gc_started_ns, 0);
	kiln_store_close(s);
}

/* KILN_DURABLE_BATCH: a put's use record waits for the next commit; the
 * figures count it meanwhile, once, and the same after the commit. */
static void
pending_puts_are_counted(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	kiln_batch *b;
	size_t skipped;

	for (int i = 0; i < 8; i++)
		tu_put_content(s, (uint64_t)i, 700 + (size_t)i);
	tu_put_content(s, 3, 703);
	assert_figures(state, s, "puts before their commit");
	assert_int_equal(kiln_batch_new(&b), 0);
	assert_int_equal(kiln_store_commit(s, b, &skipped), 0);
	kiln_batch_free(b);
	assert_figures(state, s, "after the commit");
	kiln_store_close(s);
}

struct racer {
	kiln_store *s;
	int t;
	int gc;          /* this thread runs gc instead */
	atomic_int *stop;
	int err;
};

static void *
race(void *arg)
{
	struct racer *r = arg;

	if (r->gc) {
		kiln_gc_opts o = {.action_max_age_s = 0, .grace_s = 0};
		while (!atomic_load(r->stop) && r->err == 0)
			r->err = kiln_store_gc(r->s, &o, NULL);
		return NULL;
	}
	for (int j = 0; j < NPUTS && r->err == 0; j++) {
		char mine[NPUTS * 40 + 64];
		kiln_id id;
		size_t len = 1 + (size_t)j * 37 + (size_t)r->t;
		/* half the contents are shared by every thread */
		tu_fill(mine, len, j % 2 ? (uint64_t)j : (uint64_t)(r->t * 1000 + j));
		r->err = kiln_store_put_buf(r->s, mine, len, &id);
		/* with no grace, gc may take a blob already there while
		 * the put looks at it: what concerns here is the figures */
		if (r->err == KILN_ENOTFOUND)
			r->err = 0;
	}
	return NULL;
}

static void
puts_racing_gc_keep_the_figures_exact(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	struct racer r[NTHREADS + 1];
	pthread_t th[NTHREADS + 1];
	atomic_int stop = 0;

	for (int i = 0; i <= NTHREADS; i++) {
		r[i] = (struct racer){s, i, i == NTHREADS, &stop, 0};
		assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(th[NTHREADS], NULL);
	for (int i = 0; i <= NTHREADS; i++)
		if (r[i].err != 0)
			fail_msg("thread %d: %s", i, kiln_strerror(r[i].err));
	assert_figures(state, s, "puts racing gc");
	kiln_store_close(s);
	s = tu_open_store(state, KILN_DURABLE_NONE);
	assert_figures(state, s, "reopened after the race");
	kiln_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(empty_store_has_no_blobs,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(puts_and_duplicates_are_counted_once,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_moves_the_figures_and_is_recorded,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(pending_puts_are_counted,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(puts_racing_gc_keep_the_figures_exact,
		                                tu_setup_dir, tu_teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
