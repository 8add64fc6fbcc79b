/* test_names — URLs, paths and profile names that could escape a folder or
 * confuse a terminal are refused. */
#include <string.h>

#include "testutil.h"

static void
urls(void **state)
{
	static const struct {
		const char *url;
		int ok;
	} cases[] = {
		{"sprites/hero", 1},
		{"shaders/basic.frag.spv", 1},
		{"a", 1},
		{"ui/atlas.png", 1},
		{"dir/.hidden", 1},
		{"name..with..dots", 1},
		{"", 0},
		{"/etc/passwd", 0},
		{"../up", 0},
		{"a/../b", 0},
		{"a/..", 0},
		{"./a", 0},
		{"a/./b", 0},
		{"a//b", 0},
		{"a/", 0},
		{"a\\b", 0},
		{"tab\there", 0},
		{"new\nline", 0},
		{"esc\x1b[31m", 0},
		{"del\x7f", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rv = kiln_url_check(cases[i].url);
		if ((rv == 0) != cases[i].ok)
			fail_msg("url '%s': expected %s, got %d", cases[i].url,
			         cases[i].ok ? "accepted" : "refused", rv);
	}
	assert_kiln(KILN_EINVAL, kiln_url_check(NULL));
}

static void
url_length_is_bounded(void **state)
{
	char url[402];

	(void)state;
	memset(url, 'a', sizeof url);
	url[400] = '\0';
	assert_kiln(0, kiln_url_check(url));
	url[400] = 'a';
	url[401] = '\0';
	assert_kiln(KILN_EINVAL, kiln_url_check(url));
}

static void
profiles(void **state)
{
	static const struct {
		const char *p;
		int ok;
	} cases[] = {
		{"pc", 1}, {"mobile", 1}, {"editor-preview", 1}, {"ps5_v2.1", 1},
		{"", 0}, {".hidden", 0}, {"-flag", 0}, {"a/b", 0}, {"a b", 0},
		{"..", 0}, {"x\n", 0},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rv = kiln_profile_check(cases[i].p);
		if ((rv == 0) != cases[i].ok)
			fail_msg("profile '%s': expected %s, got %d", cases[i].p,
			         cases[i].ok ? "accepted" : "refused", rv);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(urls),
		cmocka_unit_test(url_length_is_bounded),
		cmocka_unit_test(profiles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
