/* test_tree.c — tree records (store/kiln_tree.h): a folder walked into the
 * store gives one canonical record whatever order it was written in, a
 * folder breaking a rule moves nothing, and the reader refuses records
 * that could lead a restore out of its folder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_tree.h"
#include "testutil.h"

static void
mkdir_ok(const char *path)
{
	if (mkdir(path, 0755) != 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
}

/* dir/a, dir/sub/b, dir/empty/ in the order given by late. */
static void
make_folder(const char *dir, int late)
{
	char p[4096];

	mkdir_ok(dir);
	if (late) {
		snprintf(p, sizeof p, "%s/empty", dir);
		mkdir_ok(p);
		snprintf(p, sizeof p, "%s/sub", dir);
		mkdir_ok(p);
		snprintf(p, sizeof p, "%s/sub/b", dir);
		tu_write_file(p, "bee\n", 4);
	}
	snprintf(p, sizeof p, "%s/a", dir);
	tu_write_file(p, "ay\n", 3);
	if (!late) {
		snprintf(p, sizeof p, "%s/sub", dir);
		mkdir_ok(p);
		snprintf(p, sizeof p, "%s/sub/b", dir);
		tu_write_file(p, "bee\n", 4);
		snprintf(p, sizeof p, "%s/empty", dir);
		mkdir_ok(p);
	}
}

static void
put_dir_gives_a_canonical_record_and_moves_the_files(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	char why[256], *d1 = strdup(tu_path(state, "one")), *d2 = strdup(tu_path(state, "two"));
	kiln_id id1, id2, a, b;
	uint64_t size;
	kiln_tree *t;
	char expect[512], ha[KILN_ID_HEX_LEN + 1], hb[KILN_ID_HEX_LEN + 1];

	make_folder(d1, 0);
	make_folder(d2, 1);
	assert_int_equal(kiln_tree_put_dir(s, d1, &id1, &size, why, sizeof why), 0);
	assert_int_equal(kiln_tree_put_dir(s, d2, &id2, &size, why, sizeof why), 0);
	if (memcmp(id1.b, id2.b, 16) != 0)
		fail_msg("the same folder written in another order gave another record");
	kiln_id_of_buf("ay\n", 3, &a);
	kiln_id_of_buf("bee\n", 4, &b);
	kiln_id_to_hex(&a, ha);
	kiln_id_to_hex(&b, hb);
	snprintf(expect, sizeof expect, "kiln-tree 1\nf 644 3 %s a\nd 755 0 - empty\n"
	         "d 755 0 - sub\nf 644 4 %s sub/b\n", ha, hb);
	{
		void *buf;
		size_t len;
		assert_int_equal(kiln_store_read(s, &id1, &buf, &len), 0);
		if (len != strlen(expect) || memcmp(buf, expect, len) != 0)
			fail_msg("record:\n%.*s\nexpected:\n%s", (int)len, (char *)buf, expect);
		free(buf);
	}
	/* the files went into the store; the folders stay, empty */
	assert_int_equal(access(tu_path(state, "one/a"), F_OK), -1);
	assert_int_equal(access(tu_path(state, "one/sub"), F_OK), 0);
	assert_int_equal(kiln_store_has(s, &a, NULL), 0);
	assert_int_equal(kiln_store_has(s, &b, NULL), 0);
	assert_int_equal(kiln_tree_load(s, &id1, &t), 0);
	assert_int_equal(t->n, 4);
	assert_string_equal(t->e[3].path, "sub/b");
	assert_int_equal(t->bytes, 7);
	kiln_tree_free(t);
	free(d1);
	free(d2);
	kiln_store_close(s);
}

static void
put_dir_refuses_a_symlink_and_moves_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	char why[256], *d = strdup(tu_path(state, "one"));
	kiln_id id;
	uint64_t size;

	make_folder(d, 0);
	assert_int_equal(symlink("/etc/passwd", tu_path(state, "one/sub/evil")), 0);
	assert_int_equal(kiln_tree_put_dir(s, d, &id, &size, why, sizeof why), KILN_EINVAL);
	if (strstr(why, "'sub/evil' is a symlink") == NULL)
		fail_msg("why: %s", why);
	assert_int_equal(access(tu_path(state, "one/a"), F_OK), 0);
	assert_int_equal(kiln_tree_put_dir(s, tu_path(state, "none"), &id, &size, why,
	                                   sizeof why), KILN_ENOTFOUND);
	free(d);
	kiln_store_close(s);
}

static void
parse_refuses_records_that_leave_their_folder(void **state)
{
	static const char h[] = "00112233445566778899aabbccddeeff";
	static const struct { const char *body; int ok; } cases[] = {
		{"f 644 1 %s a\n", 1},
		{"f 644 1 %s  lead space\n", 1},
		{"f 644 1 %s ../a\n", 0},
		{"f 644 1 %s /etc/x\n", 0},
		{"f 644 1 %s a/../../x\n", 0},
		{"f 644 1 %s sub/a\n", 0},           /* its folder not listed */
		{"f 644 1 %s b\nf 644 1 %s a\n", 0}, /* not sorted */
		{"f 644 1 %s a\nf 644 1 %s a\n", 0}, /* twice */
		{"f 777 1 %s a\n", 0},
		{"x 644 1 %s a\n", 0},
		{"f 644 1 %s a/\n", 0},
		{"f 644 1 %s \n", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[512];
		int n = snprintf(buf, sizeof buf, "kiln-tree 1\n");
		kiln_tree *t;
		n += snprintf(buf + n, sizeof buf - (size_t)n, cases[i].body, h, h);
		int rv = kiln_tree_parse(buf, (size_t)n, &t);
		if ((rv == 0) != cases[i].ok)
			fail_msg("case %zu (%s): parse returned %d", i, cases[i].body, rv);
		if (rv == 0 && i == 1)
			assert_string_equal(t->e[0].path, " lead space");
		kiln_tree_free(t);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(put_dir_gives_a_canonical_record_and_moves_the_files,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(put_dir_refuses_a_symlink_and_moves_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test(parse_refuses_records_that_leave_their_folder),
	};

	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
