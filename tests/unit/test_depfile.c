/* test_depfile.c — make-style depfiles as gcc -MD and glslangValidator
 * write them. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "depfile.h"

static void
expect(const char *text, const char *const *want, size_t nwant)
{
	char **got = NULL;
	size_t n = 0;

	assert_int_equal(depfile_parse(text, strlen(text), &got, &n), 0);
	if (n != nwant)
		fail_msg("'%s': %zu prerequisites, expected %zu", text, n, nwant);
	for (size_t i = 0; i < n; i++)
		if (strcmp(got[i], want[i]) != 0)
			fail_msg("'%s': prerequisite %zu is '%s', expected '%s'", text, i,
			         got[i], want[i]);
	depfile_free(got, n);
}

static void
gcc_style_with_continuations(void **state)
{
	const char *want[] = {"main.c", "inc/a.h", "/usr/include/stdio.h", "inc/b.h"};

	(void)state;
	expect("main.o: main.c inc/a.h \\\n /usr/include/stdio.h \\\n  inc/b.h\n", want, 4);
}

static void
escaped_spaces_dollars_and_hashes(void **state)
{
	const char *want[] = {"my file.glsl", "a$b", "c#d"};

	(void)state;
	expect("out.spv: my\\ file.glsl a$$b c\\#d\n", want, 3);
}

static void
several_targets_and_rules_without_duplicates(void **state)
{
	const char *want[] = {"x.h", "y.h"};

	(void)state;
	expect("a.o b.o: x.h\nc.o : y.h x.h\nx.h:\n", want, 2);
}

static void
crlf_and_empty(void **state)
{
	const char *want[] = {"a.h", "b.h"};
	char **got = NULL;
	size_t n = 9;

	(void)state;
	expect("t: a.h \\\r\n b.h\r\n", want, 2);
	assert_int_equal(depfile_parse("", 0, &got, &n), 0);
	assert_int_equal(n, 0);
	depfile_free(got, n);
	assert_int_equal(depfile_parse("no rule here\n", 13, &got, &n), KILN_EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gcc_style_with_continuations),
		cmocka_unit_test(escaped_spaces_dollars_and_hashes),
		cmocka_unit_test(several_targets_and_rules_without_duplicates),
		cmocka_unit_test(crlf_and_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
