/* test_deps — the store's discovered-dependency records (store/deps.c):
 * a step's list, and the reverse lookup kept in step with it. */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"
#include "testutil.h"

/* Collected strings, sorted and joined by ',' for one comparison. */
struct got {
	char *v[64];
	size_t n;
};

static int
collect(const char *s, void *arg)
{
	struct got *g = arg;

	if (g->n == 64)
		return -1;
	g->v[g->n] = strdup(s);
	return g->v[g->n++] == NULL ? KILN_ENOMEM : 0;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *
joined(struct got *g)
{
	static char buf[8192];

	qsort(g->v, g->n, sizeof *g->v, cmp);
	buf[0] = '\0';
	for (size_t i = 0; i < g->n; i++) {
		if (i)
			strcat(buf, ",");
		strcat(buf, g->v[i]);
		free(g->v[i]);
	}
	g->n = 0;
	return buf;
}

static const char *
rdeps(kiln_store *s, const char *profile, const char *dep)
{
	struct got g = {{0}, 0};

	assert_kiln(0, kiln_store_rdeps(s, profile, dep, collect, &g));
	return joined(&g);
}

static const char *
deps(kiln_store *s, const char *profile, const char *url)
{
	struct got g = {{0}, 0};
	int rv = kiln_store_deps(s, profile, url, collect, &g);

	if (rv == KILN_ENOTFOUND)
		return "(none)";
	assert_kiln(0, rv);
	return joined(&g);
}

static void
set(kiln_store *s, const char *profile, const char *url,
    const char *const *list, size_t n)
{
	kiln_batch *b;

	assert_kiln(0, kiln_batch_new(&b));
	assert_kiln(0, kiln_batch_deps_set(b, profile, url, list, n));
	assert_kiln(0, kiln_store_commit(s, b, NULL));
	kiln_batch_free(b);
}

static void
lists_and_reverse_lookups_follow_each_replacement(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *a1[] = {"f:inc/a.h", "f:inc/b.h", "u:tex/stone"};
	const char *a2[] = {"f:inc/b.h", "f:inc/c.h"};
	const char *b1[] = {"f:inc/b.h"};

	assert_string_equal(rdeps(s, "pc", "f:inc/a.h"), "");
	assert_string_equal(deps(s, "pc", "shaders/x"), "(none)");
	set(s, "pc", "shaders/x", a1, 3);
	set(s, "pc", "shaders/y", b1, 1);
	assert_string_equal(deps(s, "pc", "shaders/x"), "f:inc/a.h,f:inc/b.h,u:tex/stone");
	assert_string_equal(rdeps(s, "pc", "f:inc/a.h"), "shaders/x");
	assert_string_equal(rdeps(s, "pc", "f:inc/b.h"), "shaders/x,shaders/y");
	assert_string_equal(rdeps(s, "pc", "u:tex/stone"), "shaders/x");
	/* profiles are apart */
	assert_string_equal(rdeps(s, "mobile", "f:inc/b.h"), "");

	/* a new list drops the reverse records of what left it */
	set(s, "pc", "shaders/x", a2, 2);
	assert_string_equal(rdeps(s, "pc", "f:inc/a.h"), "");
	assert_string_equal(rdeps(s, "pc", "u:tex/stone"), "");
	assert_string_equal(rdeps(s, "pc", "f:inc/b.h"), "shaders/x,shaders/y");
	assert_string_equal(rdeps(s, "pc", "f:inc/c.h"), "shaders/x");

	/* an empty list removes the step */
	set(s, "pc", "shaders/x", NULL, 0);
	assert_string_equal(deps(s, "pc", "shaders/x"), "(none)");
	assert_string_equal(rdeps(s, "pc", "f:inc/b.h"), "shaders/y");
	assert_string_equal(rdeps(s, "pc", "f:inc/c.h"), "");

	/* reopened: still there */
	kiln_store_close(s);
	s = tu_open_store(state, KILN_DURABLE_FSYNC);
	assert_string_equal(rdeps(s, "pc", "f:inc/b.h"), "shaders/y");
	kiln_store_close(s);
}

static void
two_lists_of_one_step_in_one_batch_leave_the_last(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *l1[] = {"f:one"}, *l2[] = {"f:two"};
	kiln_batch *b;

	assert_kiln(0, kiln_batch_new(&b));
	assert_kiln(0, kiln_batch_deps_set(b, "pc", "s", l1, 1));
	assert_kiln(0, kiln_batch_deps_set(b, "pc", "s", l2, 1));
	assert_kiln(0, kiln_store_commit(s, b, NULL));
	kiln_batch_free(b);
	assert_string_equal(rdeps(s, "pc", "f:one"), "");
	assert_string_equal(rdeps(s, "pc", "f:two"), "s");
	kiln_store_close(s);
}

static void
long_paths_and_bad_arguments(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	char *longp = malloc(3000);
	const char *l[1];
	const char *empty[] = {""};
	kiln_batch *b;

	assert_non_null(longp);
	memset(longp, 'd', 2999);
	memcpy(longp, "f:", 2);
	longp[2999] = '\0';
	l[0] = longp;
	set(s, "pc", "far", l, 1);
	assert_string_equal(rdeps(s, "pc", longp), "far");
	assert_kiln(0, kiln_batch_new(&b));
	assert_kiln(KILN_EINVAL, kiln_batch_deps_set(b, "pc", "x", empty, 1));
	assert_kiln(KILN_EINVAL, kiln_batch_deps_set(b, "pc", "x", NULL, 1));
	assert_kiln(KILN_EINVAL, kiln_batch_deps_set(b, "", "x", l, 1));
	assert_kiln(KILN_EINVAL, kiln_batch_deps_set(b, "pc", "/abs", l, 1));
	assert_int_equal(kiln_batch_len(b), 0);
	kiln_batch_free(b);
	assert_kiln(KILN_EINVAL, kiln_store_rdeps(s, "", "f:x", collect, NULL));
	free(longp);
	kiln_store_close(s);
}

/* A forward record of length len (0: empty, 1: a future version byte). */
struct bad { const char *key; size_t klen; size_t len; };

static int
put_bad(db_txn *t, void *arg)
{
	const struct bad *b = arg;
	uint8_t v[1] = {REC_VERSION + 1};

	return db_put(t, DB_DEPS, b->key, b->klen, v, b->len);
}

static void
damaged_forward_records_are_refused_not_misread(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *l[] = {"f:x"};
	struct bad b = {"Fpc\0s", 5, 0};
	struct got g = {{0}, 0};
	kiln_batch *bt;

	for (b.len = 0; b.len < 2; b.len++) {
		assert_kiln(0, db_write(s->db, put_bad, &b));
		assert_kiln(0, kiln_batch_new(&bt));
		assert_kiln(0, kiln_batch_deps_set(bt, "pc", "s", l, 1));
		assert_kiln(b.len == 0 ? KILN_ECORRUPT : KILN_EVERSION,
		            kiln_store_commit(s, bt, NULL));
		kiln_batch_free(bt);
		assert_kiln(b.len == 0 ? KILN_ECORRUPT : KILN_EVERSION,
		            kiln_store_deps(s, "pc", "s", collect, &g));
	}
	kiln_store_close(s);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(lists_and_reverse_lookups_follow_each_replacement),
		T(two_lists_of_one_step_in_one_batch_leave_the_last),
		T(long_paths_and_bad_arguments),
		T(damaged_forward_records_are_refused_not_misread),
	};
	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
