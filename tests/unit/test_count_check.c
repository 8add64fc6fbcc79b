/* test_count_check — kiln build's check of its summary against its step
 * events (client/count_check.h, KILN_CHECK_COUNTS): each step counts as
 * its last event said, a step with no event is up to date, and nothing is
 * judged when events may be missing. A table of cases: the events a build
 * received, its summary, and whether the check passes. */
#include <stdlib.h>
#include <string.h>

#include "count_check.h"
#include "testutil.h"

struct ev { const char *url; kiln_step_result r; };

struct count_case {
	const char *name;
	struct ev evs[8];        /* {NULL}-ended */
	kiln_build_summary sum;
	int lost;                /* an overflow came */
	int agree;               /* count_check_summary returns 0 */
};

#define SUM(T, R, U, F, S) \
	{.build = 7, .profile = "pc", .done = 1, .total = (T), .ran = (R), \
	 .reused = (U), .failed = (F), .skipped = (S), .index = "", .error = ""}

static const struct count_case cases[] = {
	{"events and summary agree",
	 {{"a", KILN_STEP_RAN}, {"b", KILN_STEP_RAN}, {NULL, 0}},
	 SUM(3, 2, 1, 0, 0), 0, 1},
	{"a step that ran counted as up to date disagrees",
	 {{"a", KILN_STEP_RAN}, {"b", KILN_STEP_RAN}, {"c", KILN_STEP_RAN}, {NULL, 0}},
	 SUM(3, 0, 3, 0, 0), 0, 0},
	{"a step counted as ran that sent no event disagrees",
	 {{NULL, 0}}, SUM(2, 1, 1, 0, 0), 0, 0},
	{"a step decided again counts as its last event",
	 {{"a", KILN_STEP_SKIPPED}, {"a", KILN_STEP_RAN}, {NULL, 0}},
	 SUM(1, 1, 0, 0, 0), 0, 1},
	{"reused events are at most the summary's reused (up to date sends none)",
	 {{"a", KILN_STEP_REUSED}, {NULL, 0}}, SUM(4, 0, 4, 0, 0), 0, 1},
	{"more reused events than the summary's reused disagree",
	 {{"a", KILN_STEP_REUSED}, {"b", KILN_STEP_REUSED}, {NULL, 0}},
	 SUM(2, 1, 1, 0, 0), 0, 0},
	{"failed and skipped are compared",
	 {{"a", KILN_STEP_FAILED}, {"b", KILN_STEP_SKIPPED}, {NULL, 0}},
	 SUM(2, 0, 0, 1, 0), 0, 0},
	{"lost events: not judged",
	 {{"a", KILN_STEP_RAN}, {NULL, 0}}, SUM(3, 3, 0, 0, 0), 1, 1},
};

static void
each_case_judges_as_expected(void **state)
{
	(void)state;
	setenv("KILN_CHECK_COUNTS", "1", 1);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct count_case *k = &cases[i];
		struct count_check c;
		char why[1024] = "";
		int rv;

		count_check_init(&c);
		for (const struct ev *e = k->evs; e->url != NULL; e++) {
			kiln_step_event s = {.profile = "pc", .url = e->url, .result = e->r};
			count_check_step(&c, &s);
		}
		if (k->lost)
			count_check_lost(&c);
		rv = count_check_summary(&c, &k->sum, why, sizeof why);
		if ((rv == 0) != k->agree)
			fail_msg("%s: check returned %d (%s)", k->name, rv, why);
		if (rv != 0 && strstr(why, "KILN_CHECK_COUNTS: build 7's summary") == NULL)
			fail_msg("%s: the message does not say which build: %s", k->name, why);
		count_check_free(&c);
	}
}

static void
off_unless_set_to_1(void **state)
{
	kiln_build_summary sum = SUM(1, 1, 0, 0, 0);
	struct count_check c;
	char why[256];

	(void)state;
	unsetenv("KILN_CHECK_COUNTS");
	count_check_init(&c);
	assert_int_equal(0, count_check_summary(&c, &sum, why, sizeof why));
	count_check_free(&c);
	setenv("KILN_CHECK_COUNTS", "0", 1);
	count_check_init(&c);
	assert_int_equal(0, count_check_summary(&c, &sum, why, sizeof why));
	count_check_free(&c);
}

static void
a_build_its_client_cancelled_is_not_judged(void **state)
{
	kiln_build_summary sum = SUM(2, 1, 0, 0, 0);
	struct count_check c;
	char why[256];

	(void)state;
	sum.error = "cancelled";
	sum.cancelled = 1;
	setenv("KILN_CHECK_COUNTS", "1", 1);
	count_check_init(&c);
	assert_int_equal(0, count_check_summary(&c, &sum, why, sizeof why));
	count_check_free(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_case_judges_as_expected),
		cmocka_unit_test(off_unless_set_to_1),
		cmocka_unit_test(a_build_its_client_cancelled_is_not_judged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
