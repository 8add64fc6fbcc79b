/* test_hash — kiln_id is XXH3-128 exactly as xxh128sum prints it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Digests printed by Debian's xxh128sum (xxhash 0.8.1). */
static const struct {
	const char *text;
	size_t zeros; /* when non-zero: that many NUL bytes instead of text */
	const char *hex;
} known[] = {
	{"", 0, "99aa06d3014798d86001c324468d497f"},
	{"abc", 0, "06b05ab6733a618578af5f94892f3950"},
	{"The quick brown fox jumps over the lazy dog", 0,
	 "ddd650205ca3e7fa24a1cc2e3a8a7651"},
	{NULL, 1000, "3fb94aea6d09b97224c1ea6074dd588c"},
};

static void
digests_match_xxh128sum(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		char hex[KILN_ID_HEX_LEN + 1];
		kiln_id id;
		char *zeros = calloc(1, known[i].zeros + 1);
		assert_non_null(zeros);
		if (known[i].text != NULL)
			kiln_id_of_buf(known[i].text, strlen(known[i].text), &id);
		else
			kiln_id_of_buf(zeros, known[i].zeros, &id);
		kiln_id_to_hex(&id, hex);
		assert_string_equal(hex, known[i].hex);
		free(zeros);
	}
}

static void
streaming_and_fd_hashes_equal_one_shot(void **state)
{
	size_t len = 3 * 1024 * 1024 + 17;
	char *buf = malloc(len);
	kiln_hasher *h;
	kiln_id a, b, c;
	uint64_t size = 0;
	int fd;

	assert_non_null(buf);
	tu_fill(buf, len, 7);
	kiln_id_of_buf(buf, len, &a);
	assert_kiln(0, kiln_hasher_new(&h));
	for (size_t off = 0; off < len; off += 4099)
		kiln_hasher_update(h, buf + off, off + 4099 <= len ? 4099 : len - off);
	kiln_hasher_digest(h, &b);
	kiln_hasher_free(h);
	assert_memory_equal(a.b, b.b, 16);

	tu_write_file(tu_path(state, "f"), buf, len);
	fd = open(tu_path(state, "f"), O_RDONLY);
	assert_true(fd >= 0);
	assert_kiln(0, kiln_id_of_fd(fd, &c, &size));
	close(fd);
	assert_memory_equal(a.b, c.b, 16);
	assert_int_equal(size, len);
	free(buf);
}

/* kiln_id_of_fd hashes small files from the stack and bigger ones in
 * chunks: every length around the switch, and a pipe's short reads. */
static void
fd_hashes_equal_one_shot_at_every_size_around_the_small_buffer(void **state)
{
	static const size_t lens[] = {0, 1, 4095, 16383, 16384, 16385, 40000};
	char buf[40000];
	kiln_id a, c;
	uint64_t size;
	int fd, p[2];

	tu_fill(buf, sizeof buf, 11);
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		kiln_id_of_buf(buf, lens[i], &a);
		tu_write_file(tu_path(state, "f%zu", i), buf, lens[i]);
		assert_true((fd = open(tu_path(state, "f%zu", i), O_RDONLY)) >= 0);
		size = 12345;
		assert_kiln(0, kiln_id_of_fd(fd, &c, &size));
		close(fd);
		if (memcmp(a.b, c.b, 16) != 0 || size != lens[i])
			fail_msg("a file of %zu bytes: hash or size (%llu) differs from "
			         "the one-shot hash", lens[i], (unsigned long long)size);
	}
	/* a pipe hands the bytes over in two reads */
	assert_int_equal(0, pipe(p));
	assert_int_equal(1000, write(p[1], buf, 1000));
	assert_int_equal(20000, write(p[1], buf + 1000, 20000));
	close(p[1]);
	kiln_id_of_buf(buf, 21000, &a);
	assert_kiln(0, kiln_id_of_fd(p[0], &c, &size));
	close(p[0]);
	assert_memory_equal(a.b, c.b, 16);
	assert_int_equal(size, 21000);
}

static void
hex_round_trips_and_accepts_upper_case(void **state)
{
	kiln_id id, back;
	char hex[KILN_ID_HEX_LEN + 1];

	(void)state;
	assert_kiln(0, kiln_id_from_hex("06B05AB6733A618578AF5F94892F3950", &id));
	kiln_id_to_hex(&id, hex);
	assert_string_equal(hex, "06b05ab6733a618578af5f94892f3950");
	assert_kiln(0, kiln_id_from_hex(hex, &back));
	assert_int_equal(kiln_id_cmp(&id, &back), 0);
}

static void
malformed_hex_is_rejected(void **state)
{
	static const char *const bad[] = {
		"",
		"06b05ab6733a618578af5f94892f395",   /* 31 */
		"06b05ab6733a618578af5f94892f39500", /* 33 */
		"06b05ab6733a618578af5f94892f395g",
		"06b05ab6733a618578af5f94892f395 ",
		"../05ab6733a618578af5f94892f3950",
		"0x b05ab6733a618578af5f94892f3950",
	};
	kiln_id id;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (kiln_id_from_hex(bad[i], &id) != KILN_EINVAL)
			fail_msg("accepted malformed hash '%s'", bad[i]);
	assert_kiln(KILN_EINVAL, kiln_id_from_hex(NULL, &id));
}

static void
every_error_code_has_a_message(void **state)
{
	(void)state;
	for (int c = KILN_EEXIST; c <= KILN_EINVAL; c++)
		assert_string_not_equal(kiln_strerror(c), "unknown error");
	assert_string_equal(kiln_strerror(12345), "unknown error");
	assert_string_equal(kiln_strerror(KILN_ENOSPC), "no space left on device");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(digests_match_xxh128sum),
		cmocka_unit_test_setup_teardown(streaming_and_fd_hashes_equal_one_shot,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(fd_hashes_equal_one_shot_at_every_size_around_the_small_buffer,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test(hex_round_trips_and_accepts_upper_case),
		cmocka_unit_test(malformed_hex_is_rejected),
		cmocka_unit_test(every_error_code_has_a_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
