/* test_probe_words — which missing lookups are a tool's probes of its own
 * command line (probe_words.h): ImageMagick's words and their pieces are,
 * a plain word naming a file the tool was pointed at is not. */
#include <string.h>

#include "probe_words.h"
#include "testutil.h"

/* The sample's resize step, as spawned. */
static char *const convert_argv[] = {
	"convert", "art/hero.png", "-resize", "50%", "-strip", "-define",
	"png:exclude-chunks=date,time", "png32:.kiln/scratch/r1/1/hero.png",
};

static const struct {
	const char *what, *rel;
	int noise;
} convert_cases[] = {
	{"the program's own name", "convert", 1},
	{"an option", "-strip", 1},
	{"a prefixed word whole", "png32:.kiln/scratch/r1/1/hero.png", 1},
	{"a word's last component", "hero.png", 1},
	{"a word's prefix", "png", 1},
	{"a word's text after its prefix", "exclude-chunks=date,time", 1},
	{"a prefixed word's prefix", "png32", 1},
	{"the input itself is no probe", "art/hero.png", 0},
	{"an unrelated name", "extra.cfg", 0},
	{"a value that is no option", "50%", 0},
	{"a folder of a word is no piece", "art", 0},
};

static void
convert_probes(void **state)
{
	struct probe_words pw = {0};

	(void)state;
	assert_int_equal(probe_words_make(&pw, convert_argv,
	                                  sizeof convert_argv / sizeof convert_argv[0], 0), 0);
	for (size_t i = 0; i < sizeof convert_cases / sizeof convert_cases[0]; i++)
		if (probe_words_noise(&pw, convert_cases[i].rel) != convert_cases[i].noise)
			fail_msg("%s: '%s' taken for %s", convert_cases[i].what, convert_cases[i].rel,
			         convert_cases[i].noise ? "a project file" : "a probe");
	probe_words_free(&pw);
}

/* A plain word wins over a piece of another: the tool was pointed at it. */
static void
plain_word_kept(void **state)
{
	char *const argv[] = {"tool", "-c", "opt.cfg", "conf/opt.cfg", "x.png", "out/y.png"};
	struct probe_words pw = {0};

	(void)state;
	assert_int_equal(probe_words_make(&pw, argv, 6, 0), 0);
	assert_int_equal(probe_words_noise(&pw, "opt.cfg"), 0);
	assert_int_equal(probe_words_noise(&pw, "x.png"), 0);
	assert_int_equal(probe_words_noise(&pw, "y.png"), 1);
	assert_int_equal(probe_words_noise(&pw, "png"), 1);
	assert_int_equal(probe_words_noise(&pw, "tool"), 1);
	assert_int_equal(probe_words_noise(&pw, "-c"), 1);
	probe_words_free(&pw);
}

/* A shell tool: the script's words; a command's first word after an
 * operator is a program's name; the positional values are words. */
static void
shell_script(void **state)
{
	char *const argv[] = {"/bin/sh", "-c", "cat a.txt | zstd -q -c > \"$1\"; magick x", "sh",
	                      "out/z.zst"};
	struct probe_words pw = {0};

	(void)state;
	assert_int_equal(probe_words_make(&pw, argv, 5, 1), 0);
	assert_int_equal(probe_words_noise(&pw, "cat"), 1);
	assert_int_equal(probe_words_noise(&pw, "zstd"), 1);
	assert_int_equal(probe_words_noise(&pw, "magick"), 1);
	assert_int_equal(probe_words_noise(&pw, "-q"), 1);
	assert_int_equal(probe_words_noise(&pw, "a.txt"), 0);
	assert_int_equal(probe_words_noise(&pw, "x"), 0);
	assert_int_equal(probe_words_noise(&pw, "z.zst"), 1);
	assert_int_equal(probe_words_noise(&pw, "zst"), 1);
	probe_words_free(&pw);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(convert_probes),
		cmocka_unit_test(plain_word_kept),
		cmocka_unit_test(shell_script),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
