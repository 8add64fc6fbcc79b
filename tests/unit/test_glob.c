/* test_glob — path patterns match what glob.h says, refuse what it refuses,
 * and stay fast on hostile input. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "glob.h"
#include "testutil.h"

/* Compile pattern or fail the test, naming it and the reason. */
static kiln_glob *
compile_ok(const char *pattern)
{
	kiln_glob *g = NULL;
	const char *why = NULL;
	int rv = glob_compile(pattern, &g, &why);

	if (rv != 0)
		fail_msg("pattern '%s' refused: %s (%s)", pattern,
		         kiln_strerror(rv), why ? why : "no reason");
	return g;
}

/* pattern matches path exactly when want says so. */
static void
check_match(const char *pattern, const char *path, int want)
{
	kiln_glob *g = compile_ok(pattern);
	int got = glob_match(g, path);

	if (got != want)
		fail_msg("pattern '%s' vs path '%s': expected %s, got %d",
		         pattern, path, want ? "match" : "no match", got);
	if (got && strncmp(path, glob_prefix(g), strlen(glob_prefix(g))) != 0)
		fail_msg("pattern '%s' matched '%s' outside its prefix '%s'",
		         pattern, path, glob_prefix(g));
	glob_free(g);
}

static const struct {
	const char *pattern, *path;
	int match;
} match_cases[] = {
	/* * stays within a segment */
	{"*.png", "a.png", 1},
	{"*.png", "dir/a.png", 0},
	{"*", "a", 1},
	{"*", "a/b", 0},
	{"a*", "a", 1},
	{"*a*", "bab", 1},
	{"a*b*c", "abc", 1},
	{"a*b*c", "axxbyyc", 1},
	{"a*b*c", "axbyd", 0},
	{"*x", "xx", 1},
	{"dir/*", "dir/a", 1},
	{"dir/*", "dir/a/b", 0},
	{"*/*.png", "a/b.png", 1},
	/* ? is one character, never '/' */
	{"?.txt", "a.txt", 1},
	{"?.txt", "ab.txt", 0},
	{"a?b", "a/b", 0},
	{"?", "\xc3\xa9", 1},                 /* é, two bytes, one character */
	{"??", "\xc3\xa9", 0},
	{"*??", "\xe2\x82\xac", 0},           /* €, three bytes */
	{"*??b", "\xe2\x82\xac" "b", 0},
	{"*?[!a]*", "\xe2\x82\xac" "a", 0},   /* '*' never stops inside a character */
	{"*?", "x\xe2\x82\xac", 1},
	{"?\xc3\xa9?", "a\xc3\xa9z", 1},
	/* classes as in fnmatch(3) */
	{"[abc].png", "b.png", 1},
	{"[abc].png", "d.png", 0},
	{"[!abc].png", "d.png", 1},
	{"[!abc].png", "a.png", 0},
	{"[^a]x", "bx", 1},
	{"[a-c]1", "b1", 1},
	{"[a-c]1", "d1", 0},
	{"[[:digit:]]x", "7x", 1},
	{"[[:digit:]]x", "ax", 0},
	{"[]]", "]", 1},
	{"[!]]", "a", 1},
	{"[!]]", "]", 0},
	{"[!a]", "\xc3\xa9", 1},
	{"[!a]", "\xc3\xa9\xc3\xa9", 0},
	{"[{,}]", ",", 1},
	{"[{,}]", "{", 1},
	{"[\\]]", "]", 1},
	{"x[.]y", "x.y", 1},
	/* ** at the start: zero or more segments */
	{"**/b", "b", 1},
	{"**/b", "x/y/b", 1},
	{"**/b", "x/yb", 0},
	{"**/b", "b/x", 0},
	{"**/*.png", "c.png", 1},
	{"**/*.png", "a/b/c.png", 1},
	/* ** in the middle: zero or more segments */
	{"a/**/b", "a/b", 1},
	{"a/**/b", "a/x/y/b", 1},
	{"a/**/b", "b", 0},
	{"a/**/b", "a/x/y/c", 0},
	{"a/**/b/**/c", "a/x/b/y/b/z/c", 1},
	{"a/**/b/**/c", "a/x/c/y/b", 0},
	{"art/sprites/**/*.png", "art/sprites/ui/button_03.png", 1},
	{"art/sprites/**/*.png", "art/sprites/button.png", 1},
	{"art/sprites/**/*.png", "art/sounds/x.png", 0},
	{"art/sprites/**/*.png", "art/sprites/ui/button.jpg", 0},
	{"**/**/x", "x", 1},
	{"**/**/x", "a/b/x", 1},
	/* ** at the end: one or more segments, "everything inside" */
	{"a/**", "a", 0},
	{"a/**", "a/x", 1},
	{"a/**", "a/x/y", 1},
	{"a/**", "ab/x", 0},
	{"a/**/**", "a", 0},
	{"a/**/**", "a/b/c", 1},
	{"**", "x", 1},
	{"**", "x/y/z", 1},
	/* dotfiles: only a literal leading '.' matches one */
	{"*.png", ".png", 0},
	{"*", ".hidden", 0},
	{"?x", ".x", 0},
	{"[.]x", ".x", 0},
	{".*", ".hidden", 1},
	{"\\.h", ".h", 1},
	{"**/*.png", "a/.cache/b.png", 0},
	{"**/*.png", ".b.png", 0},
	{"**/.keep", "a/b/.keep", 1},
	{"a/.cache/*.png", "a/.cache/b.png", 1},
	{"a/**", "a/.git", 0},
	{"a/**", "a/b/.git", 0},
	{"a/*/b", "a/.x/b", 0},
	{"a*", "a.b", 1},
	/* braces: alternatives, with '/', wildcards, empty, nested */
	{"{a,b}.png", "a.png", 1},
	{"{a,b}.png", "b.png", 1},
	{"{a,b}.png", "c.png", 0},
	{"*.{png,jpg}", "x.jpg", 1},
	{"*.{png,jpg}", "x.gif", 0},
	{"art/{ui,fx}/*.png", "art/fx/x.png", 1},
	{"{art/ui,sfx}/*", "art/ui/a", 1},
	{"{art/ui,sfx}/*", "sfx/a", 1},
	{"{art/ui,sfx}/*", "art/a", 0},
	{"a/{,b/}c", "a/c", 1},
	{"a/{,b/}c", "a/b/c", 1},
	{"a/{,b/}c", "a/x/c", 0},
	{"{**/,}*.png", "a/b/c.png", 1},
	{"{a,b}/{c,d}", "b/c", 1},
	{"{a,b}/{c,d}", "c/b", 0},
	{"{a,b{c,d}}x", "bdx", 1},
	{"{a,b{c,d}}x", "bx", 0},
	{"{a,{b,{c,d}}}", "d", 1},
	{"{a}", "a", 1},
	{"x,y", "x,y", 1},
	/* escapes */
	{"\\*", "*", 1},
	{"\\*", "a", 0},
	{"a\\?", "a?", 1},
	{"a\\?", "ab", 0},
	{"\\[a]", "[a]", 1},
	{"\\{a,b\\}", "{a,b}", 1},
	{"\\\\", "\\", 1},
	{"*\\*", "a*", 1},
	{"*\\*", "ab", 0},
	{"{a\\,b,c}", "a,b", 1},
	{"{a\\,b,c}", "c", 1},
	{"{a\\,b,c}", "b", 0},
	/* case-sensitive */
	{"*.PNG", "a.png", 0},
	{"Art/*", "art/x", 0},
	{"[A-Z]", "a", 0},
	/* plain paths */
	{"art/a.png", "art/a.png", 1},
	{"art/a.png", "art/a.pngx", 0},
	{"art/a.png", "art/a", 0},
	{"art/a.png", "art", 0},
	/* malformed paths match nothing */
	{"*", "", 0},
	{"**", "/a", 0},
	{"a/*", "a/", 0},
	{"**", "a//b", 0},
	{"**/x", "./x", 0},
	{"*/x", "../x", 0},
	{".*", ".", 0},
	{".*", "..", 0},
	{"a/.*/b", "a/../b", 0},
};

static void
patterns_match_what_the_syntax_says(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++)
		check_match(match_cases[i].pattern, match_cases[i].path,
		            match_cases[i].match);
}

static void
malformed_patterns_are_refused_with_a_reason(void **state)
{
	static const char *const bad[] = {
		"", "/a", "/", "a//b", "a/", "./a", "a/./b", "a/..", "..", "\\.",
		"a**", "**a", "a/***/b", "x/a**b", "{a,b", "a,b}", "}", "{a,{b}",
		"[ab", "a[!", "[", "[]", "[!]", "[[:alpha:]", "[[:nope:]]", "[a/b]",
		"[\xc3\xa9]", "a\\", "a\\/b", "{a,}", "{,}", "{/a,b}", "a/{b,}",
		"a/{.,b}", "a/{b,/c}", "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}",
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		kiln_glob *g = (kiln_glob *)&g;
		const char *why = NULL;
		int rv = glob_compile(bad[i], &g, &why);
		if (rv != KILN_EINVAL)
			fail_msg("pattern '%s': expected KILN_EINVAL, got %d (%s)",
			         bad[i], rv, kiln_strerror(rv));
		if (why == NULL)
			fail_msg("pattern '%s' refused without a reason", bad[i]);
		if (g != NULL)
			fail_msg("pattern '%s' refused but *g was not cleared", bad[i]);
	}
}

static void
null_pattern_or_handle_is_refused(void **state)
{
	kiln_glob *g;

	(void)state;
	assert_kiln(KILN_EINVAL, glob_compile(NULL, &g, NULL));
	assert_null(g);
	assert_kiln(KILN_EINVAL, glob_compile("a", NULL, NULL));
	assert_kiln(KILN_EINVAL, glob_compile("[a", &g, NULL));
	glob_free(NULL);
}

static void
pattern_length_is_bounded(void **state)
{
	char pat[KILN_GLOB_MAX + 2];
	kiln_glob *g;

	(void)state;
	memset(pat, 'a', sizeof pat);
	for (size_t i = 100; i < KILN_GLOB_MAX; i += 100)
		pat[i] = '/';
	pat[KILN_GLOB_MAX] = '\0';
	g = compile_ok(pat);
	assert_int_equal(1, glob_match(g, pat));
	glob_free(g);
	pat[KILN_GLOB_MAX] = 'a';
	pat[KILN_GLOB_MAX + 1] = '\0';
	assert_kiln(KILN_EINVAL, glob_compile(pat, &g, NULL));
}

static void
braces_expand_to_at_most_64_alternatives(void **state)
{
	char pat[KILN_GLOB_MAX + 1] = "";
	kiln_glob *g;

	(void)state;
	g = compile_ok("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}");
	assert_int_equal(1, glob_match(g, "abbaba"));
	glob_free(g);
	/* 2^300 alternatives: refused after the 65th, not after all */
	for (int i = 0; i < 300; i++)
		strcat(pat, "{,}");
	strcat(pat, "x");
	assert_kiln(KILN_EINVAL, glob_compile(pat, &g, NULL));
}

static void
deep_nesting_compiles_and_matches(void **state)
{
	char pat[KILN_GLOB_MAX + 1];
	kiln_glob *g;
	size_t n = 0;

	(void)state;
	for (int i = 0; i < 300; i++)
		pat[n++] = '{';
	pat[n++] = 'a';
	for (int i = 0; i < 300; i++)
		pat[n++] = '}';
	pat[n] = '\0';
	g = compile_ok(pat);
	assert_int_equal(1, glob_match(g, "a"));
	assert_int_equal(0, glob_match(g, "b"));
	glob_free(g);
}

static void
prefix_is_the_fixed_leading_folders(void **state)
{
	static const struct {
		const char *pattern, *prefix;
	} cases[] = {
		{"art/sprites/**/*.png", "art/sprites/"},
		{"art/a.png", "art/"},
		{"a.png", ""},
		{"{art,audio}/x", ""},
		{"art/{a,b}/x", "art/"},
		{"a\\*b/c/*.png", "a*b/c/"},
		{"a/b*/c", "a/"},
		{"**/x", ""},
		{"a/[bc]/d", "a/"},
		{"a/b?/c", "a/"},
		{"x,y/z", "x,y/"},
		{"a/b/**", "a/b/"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		kiln_glob *g = compile_ok(cases[i].pattern);
		if (strcmp(glob_prefix(g), cases[i].prefix) != 0)
			fail_msg("pattern '%s': prefix '%s', expected '%s'",
			         cases[i].pattern, glob_prefix(g), cases[i].prefix);
		glob_free(g);
	}
}

static void
plain_paths_are_literal(void **state)
{
	static const struct {
		const char *pattern;
		int literal;
	} cases[] = {
		{"art/a.png", 1}, {"a\\*b", 1}, {"x,y", 1}, {"a/.keep", 1},
		{"*.png", 0}, {"{a}", 0}, {"[a]", 0}, {"a?", 0}, {"**", 0},
		{"a/**", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		kiln_glob *g = compile_ok(cases[i].pattern);
		if (glob_is_literal(g) != cases[i].literal)
			fail_msg("pattern '%s': glob_is_literal %d, expected %d",
			         cases[i].pattern, glob_is_literal(g),
			         cases[i].literal);
		glob_free(g);
	}
}

/* "<seg>/<seg>/.../<seg>" with n copies of seg, then tail (may be ""). */
static void
repeat(char *buf, size_t cap, const char *seg, int n, const char *tail)
{
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (i > 0)
			strncat(buf, "/", cap - strlen(buf) - 1);
		strncat(buf, seg, cap - strlen(buf) - 1);
	}
	strncat(buf, tail, cap - strlen(buf) - 1);
}

static void
hostile_patterns_match_correctly_without_blowup(void **state)
{
	static char path[8192], pat[KILN_GLOB_MAX + 1];

	(void)state;
	/* runs of ** against a deep path */
	repeat(pat, sizeof pat, "**", 100, "/x");
	repeat(path, sizeof path, "a", 1000, "");
	check_match(pat, path, 0);
	repeat(path, sizeof path, "a", 1000, "/x");
	check_match(pat, path, 1);
	/* ** separated by segments, which cannot merge */
	repeat(pat, sizeof pat, "**/a", 60, "/**/b");
	repeat(path, sizeof path, "a", 1000, "");
	check_match(pat, path, 0);
	repeat(path, sizeof path, "a", 1000, "/b");
	check_match(pat, path, 1);
	repeat(pat, sizeof pat, "**/*a*", 60, "/**/b");
	repeat(path, sizeof path, "aaaaaaaaaa", 500, "/c");
	check_match(pat, path, 0);
	/* stars within one long segment */
	pat[0] = '\0';
	for (int i = 0; i < 200; i++)
		strcat(pat, "*a");
	strcat(pat, "*b");
	memset(path, 'a', 4000);
	path[4000] = '\0';
	check_match(pat, path, 0);
	strcpy(path + 4000, "b");
	check_match(pat, path, 1);
}

/* ---- a naive matcher to check against ------------------------------------
 * Exponential, but obviously right on small inputs. It works on wide
 * characters (so '?' is one character), knows only the syntax the random
 * words below use ('*', '?', "[ab]", "[!a]", plain characters), and tries
 * '*' and '**' at every length. (glibc 2.36's fnmatch cannot be the oracle
 * here: in a UTF-8 locale, after a '*' it takes '?' and classes as one
 * byte, so "*??b" matches the two characters of "\u20acb".) */
static int
naive_class(const wchar_t **p, wchar_t c)
{
	const wchar_t *q = *p + 1;
	int neg = *q == L'!', in = 0;

	for (q += neg; *q != L']'; q++)
		in |= *q == c;
	*p = q + 1;
	return in != neg;
}

static int
naive_seg(const wchar_t *p, const wchar_t *s, int first)
{
	if (first && *s == L'.' && *p != L'.')
		return 0; /* a leading dot only matches a literal one */
	if (*p == L'\0')
		return *s == L'\0';
	if (*p == L'*') {
		for (;; s++) {
			if (naive_seg(p + 1, s, 0))
				return 1;
			if (*s == L'\0')
				return 0;
		}
	}
	if (*s == L'\0')
		return 0;
	if (*p == L'[')
		return naive_class(&p, *s) && naive_seg(p, s + 1, 0);
	return (*p == L'?' || *p == *s) && naive_seg(p + 1, s + 1, 0);
}

/* Whether the pattern segments p[0..np) match the path segments s[0..ns). */
static int
naive(char **p, int np, char **s, int ns)
{
	wchar_t wp[64], ws[64];

	if (np == 0)
		return ns == 0;
	if (strcmp(p[0], "**") == 0) {
		for (int k = np == 1 ? 1 : 0; k <= ns; k++) {
			if (k > 0 && s[k - 1][0] == '.')
				return 0;
			if (naive(p + 1, np - 1, s + k, ns - k))
				return 1;
		}
		return 0;
	}
	if (ns == 0 || mbstowcs(wp, p[0], 64) == (size_t)-1 ||
	    mbstowcs(ws, s[0], 64) == (size_t)-1)
		return 0;
	return naive_seg(wp, ws, 1) && naive(p + 1, np - 1, s + 1, ns - 1);
}

static uint64_t
rand_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Join n random picks from words with '/' into buf; the picks into part. */
static int
random_join(uint64_t *x, const char *const *words, size_t nwords, int max,
            char *buf, char **part)
{
	int n = 1 + (int)(rand_next(x) % (uint64_t)max);

	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		part[i] = (char *)words[rand_next(x) % nwords];
		if (i > 0)
			strcat(buf, "/");
		strcat(buf, part[i]);
	}
	return n;
}

static void
agrees_with_a_naive_matcher_on_random_cases(void **state)
{
	static const char *const pw[] = {
		"a", "b", "*", "?", "a*", "*b", "[ab]", "[!a]", ".a", ".*",
		"**", "**", "*a*", "?b", "ab", "*??b", "*[!a]?b", "?[!a]?", "*\xc3\xa9*", "[!b]*?",
		"*?[!a]*",
	};
	static const char *const sw[] = {
		"a", "b", "ab", "ba", ".a", "aab", "bb", "\xe2\x82\xac",
		"\xe2\x82\xac" "b", "\xc3\xa9" "ab", "a\xc3\xa9" "b",
	};
	uint64_t x = 0x9e3779b97f4a7c15u;
	char pat[256], path[256], *pp[8], *sp[8];

	(void)state;
	if (setlocale(LC_CTYPE, "C.UTF-8") == NULL)
		fail_msg("no C.UTF-8 locale for the naive matcher's mbstowcs");
	for (int i = 0; i < 20000; i++) {
		int np = random_join(&x, pw, sizeof pw / sizeof pw[0], 6, pat, pp);
		int ns = random_join(&x, sw, sizeof sw / sizeof sw[0], 7, path, sp);
		int want = naive(pp, np, sp, ns);
		kiln_glob *g = compile_ok(pat);
		if (glob_match(g, path) != want)
			fail_msg("pattern '%s' vs path '%s': naive matcher says %d",
			         pat, path, want);
		glob_free(g);
	}
	setlocale(LC_CTYPE, "C");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(patterns_match_what_the_syntax_says),
		cmocka_unit_test(malformed_patterns_are_refused_with_a_reason),
		cmocka_unit_test(null_pattern_or_handle_is_refused),
		cmocka_unit_test(pattern_length_is_bounded),
		cmocka_unit_test(braces_expand_to_at_most_64_alternatives),
		cmocka_unit_test(deep_nesting_compiles_and_matches),
		cmocka_unit_test(prefix_is_the_fixed_leading_folders),
		cmocka_unit_test(plain_paths_are_literal),
		cmocka_unit_test(hostile_patterns_match_correctly_without_blowup),
		cmocka_unit_test(agrees_with_a_naive_matcher_on_random_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
