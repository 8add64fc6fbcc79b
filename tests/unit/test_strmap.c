/* test_strmap — the loader's string map holds however many keys it is
 * given, whatever count it was sized for: a map sized too small once
 * probed a full table for ever (issue 36). SIGALRM ends a run that hangs,
 * so a regression fails instead of stalling the suite. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strmap.h"
#include "testutil.h"

#define NKEYS 100000

/* NKEYS distinct keys, prefix then 0..NKEYS-1, in a. */
static const char **
make_keys(arena *a, const char *prefix)
{
	const char **k = arena_alloc(a, NKEYS * sizeof *k);

	assert_non_null(k);
	for (size_t i = 0; i < NKEYS; i++)
		assert_non_null(k[i] = arena_printf(a, "%s%zu", prefix, i));
	return k;
}

/* Put keys[i] -> i into a map sized for hint keys, then find each. */
static void
check_holds_all(size_t hint)
{
	arena a = {0};
	struct strmap m;
	const char **keys = make_keys(&a, "k"), **absent = make_keys(&a, "x");
	size_t v;

	assert_int_equal(strmap_init(&a, &m, hint), 0);
	for (size_t i = 0; i < NKEYS; i++)
		assert_int_equal(strmap_put(&m, keys[i], i), 0);
	assert_int_equal(m.n, NKEYS);
	for (size_t i = 0; i < NKEYS; i++) {
		if (!strmap_get(&m, keys[i], &v))
			fail_msg("map sized for %zu: key '%s' lost", hint, keys[i]);
		if (v != i)
			fail_msg("key '%s': value %zu, expected %zu", keys[i], v, i);
	}
	for (size_t i = 0; i < NKEYS; i++)
		if (strmap_get(&m, absent[i], &v))
			fail_msg("key '%s' was never put but is found", absent[i]);
	assert_false(a.failed);
	arena_free(&a);
}

static void
a_map_sized_for_no_key_holds_a_hundred_thousand(void **state)
{
	(void)state;
	check_holds_all(0);
}

static void
a_map_sized_for_a_thousand_holds_a_hundred_thousand(void **state)
{
	(void)state;
	check_holds_all(1024);   /* the URL map's old margin over the files */
}

static void
a_map_sized_exactly_holds_its_keys(void **state)
{
	(void)state;
	check_holds_all(NKEYS);
}

static void
a_key_put_again_takes_the_new_value_and_no_slot(void **state)
{
	arena a = {0};
	struct strmap m;
	size_t v;

	(void)state;
	assert_int_equal(strmap_init(&a, &m, 1), 0);
	for (size_t round = 0; round < 100; round++) {
		assert_int_equal(strmap_put(&m, "same", round), 0);
		assert_int_equal(strmap_put(&m, "other", round + 1), 0);
	}
	assert_int_equal(m.n, 2);
	assert_true(strmap_get(&m, "same", &v));
	assert_int_equal(v, 99);
	assert_true(strmap_get(&m, "other", &v));
	assert_int_equal(v, 100);
	assert_false(strmap_get(&m, "", &v));
	arena_free(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_map_sized_for_no_key_holds_a_hundred_thousand),
		cmocka_unit_test(a_map_sized_for_a_thousand_holds_a_hundred_thousand),
		cmocka_unit_test(a_map_sized_exactly_holds_its_keys),
		cmocka_unit_test(a_key_put_again_takes_the_new_value_and_no_slot),
	};

	alarm(300);   /* a probe that never ends: killed, counted as failed */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
