/* test_engine_key.c — action keys (action_key.c) and stat-first file
 * hashing (filestate.c): the two things every rebuild decision rests on. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "action_key.h"
#include "filestate.h"

static void
key_of(const char *const *labels, const char *const *texts, size_t n, kiln_id *k)
{
	struct key_parts kp;

	key_parts_init(&kp);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(key_parts_text(&kp, labels[i], texts[i]), 0);
	assert_int_equal(key_parts_key(&kp, k), 0);
	key_parts_free(&kp);
}

static void
key_ignores_the_order_parts_are_added_in(void **state)
{
	const char *l1[] = {"tool", "argv", "param x"}, *t1[] = {"cp", "a", "1"};
	const char *l2[] = {"param x", "tool", "argv"}, *t2[] = {"1", "cp", "a"};
	kiln_id a, b;

	(void)state;
	key_of(l1, t1, 3, &a);
	key_of(l2, t2, 3, &b);
	assert_int_equal(kiln_id_cmp(&a, &b), 0);
}

static void
key_separates_labels_from_values(void **state)
{
	/* the encoding carries lengths: moving a byte from the label to the
	 * value gives another key */
	const char *l1[] = {"ab"}, *t1[] = {"c"};
	const char *l2[] = {"a"}, *t2[] = {"bc"};
	kiln_id a, b, h;
	struct key_parts kp;

	(void)state;
	key_of(l1, t1, 1, &a);
	key_of(l2, t2, 1, &b);
	assert_int_not_equal(kiln_id_cmp(&a, &b), 0);
	/* and a type byte: 16 bytes of text are not the hash of those bytes */
	key_parts_init(&kp);
	key_parts_text(&kp, "in f", "aaaaaaaaaaaaaaaa");
	key_parts_key(&kp, &a);
	key_parts_free(&kp);
	memset(h.b, 'a', 16);
	key_parts_init(&kp);
	key_parts_hash(&kp, "in f", &h);
	key_parts_key(&kp, &b);
	key_parts_free(&kp);
	assert_int_not_equal(kiln_id_cmp(&a, &b), 0);
}

static void
key_changes_with_every_part(void **state)
{
	const char *l[] = {"tool", "tool version", "argv", "var tex"};
	const char *t[] = {"convert", "1", "convert\x1f${in}", "512"};
	const char *t2[4];
	kiln_id base, k;

	(void)state;
	key_of(l, t, 4, &base);
	for (size_t i = 0; i < 4; i++) {
		memcpy(t2, t, sizeof t2);
		t2[i] = "other";
		key_of(l, t2, 4, &k);
		if (kiln_id_cmp(&k, &base) == 0)
			fail_msg("changing part '%s' left the key unchanged", l[i]);
	}
	/* a part gone changes it too */
	key_of(l, t, 3, &k);
	assert_int_not_equal(kiln_id_cmp(&k, &base), 0);
}

static void
diff_says_what_changed_from_what_to_what(void **state)
{
	struct key_parts old, now;
	Kiln__KeyPart **pb;
	Kiln__KeyChange **ch;
	size_t npb, nch;
	char reason[512];
	kiln_id k, h1, h2;
	int total;

	(void)state;
	key_parts_init(&old);
	key_parts_init(&now);
	kiln_id_of_buf("one", 3, &h1);
	kiln_id_of_buf("two", 3, &h2);
	key_parts_text(&old, "tool version", "1");
	key_parts_hash(&old, "in a.png", &h1);
	key_parts_text(&old, "param gone", "x");
	key_parts_text(&now, "tool version", "2");
	key_parts_hash(&now, "in a.png", &h2);
	key_parts_text(&now, "param new", "y");
	key_parts_key(&old, &k);
	key_parts_key(&now, &k);
	assert_int_equal(key_parts_to_pb(&old, &pb, &npb), 0);
	total = key_parts_diff(pb, npb, &now, 16, &ch, &nch, reason, sizeof reason);
	assert_int_equal(total, 4);
	assert_int_equal(nch, 4);
	char hex1[KILN_ID_HEX_LEN + 1], hex2[KILN_ID_HEX_LEN + 1], want[128];
	kiln_id_to_hex(&h1, hex1);
	kiln_id_to_hex(&h2, hex2);
	snprintf(want, sizeof want, "in a.png changed %.8s -> %.8s", hex1, hex2);
	if (strstr(reason, want) == NULL || strstr(reason, "param gone removed") == NULL ||
	    strstr(reason, "new param new (y)") == NULL)
		fail_msg("reason '%s' lacks '%s' or the param changes", reason, want);
	/* the version change is past the third: summarized */
	key_changes_free(ch);
	key_parts_pb_free(pb);
	key_parts_free(&old);
	key_parts_free(&now);
}

/* ---- filestate ---- */

static void
filestate_hashes_only_what_stat_says_changed(void **state)
{
	kiln_store *s;
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};
	struct filestate *fs;
	kiln_id h1, h2, want;
	uint64_t nstat, nhashed;
	const char *root = tu_dir(state);

	assert_int_equal(kiln_store_open(tu_path(state, "store"), &o, &s), 0);
	tu_write_file(tu_path(state, "a.txt"), "hello", 5);
	/* not changed in the last clock ticks: its stat can vouch for it
	 * (filestate_does_not_trust_a_racy_stat) */
	assert_int_equal(tu_sh("sleep 0.05"), 0);
	assert_int_equal(filestate_new(s, root, &fs), 0);
	assert_int_equal(filestate_hash(fs, "a.txt", &h1), 0);
	kiln_id_of_buf("hello", 5, &want);
	assert_int_equal(kiln_id_cmp(&h1, &want), 0);
	/* same pass: answered from memory, no stat */
	filestate_counts(fs, &nstat, &nhashed);
	assert_int_equal(filestate_hash(fs, "a.txt", &h2), 0);
	uint64_t nstat2, nhashed2;
	filestate_counts(fs, &nstat2, &nhashed2);
	assert_int_equal(nstat2, nstat);
	/* a new pass, the file only touched... same inode, new mtime: its
	 * stat changed, so it is hashed again, and hashes the same */
	filestate_pass(fs);
	assert_int_equal(filestate_hash(fs, "a.txt", &h2), 0);
	filestate_counts(fs, &nstat2, &nhashed2);
	assert_int_equal(nstat2, nstat + 1);
	assert_int_equal(nhashed2, nhashed);   /* stat unchanged: no read */
	assert_int_equal(tu_sh("touch -d '+1 minute' '%s/a.txt'", root), 0);
	filestate_pass(fs);
	assert_int_equal(filestate_hash(fs, "a.txt", &h2), 0);
	filestate_counts(fs, &nstat2, &nhashed2);
	assert_int_equal(nhashed2, nhashed + 1);
	assert_int_equal(kiln_id_cmp(&h2, &want), 0);
	/* same size, new content: found by its stat, new hash */
	tu_write_file(tu_path(state, "a.txt"), "HELLO", 5);
	assert_int_equal(tu_sh("sleep 0.05"), 0);
	filestate_pass(fs);
	assert_int_equal(filestate_hash(fs, "a.txt", &h2), 0);
	assert_int_not_equal(kiln_id_cmp(&h2, &want), 0);
	/* missing files are answers too */
	assert_int_equal(filestate_hash(fs, "nope.txt", &h2), KILN_ENOTFOUND);
	filestate_free(fs);
	kiln_store_close(s);
}

static void
filestate_remembers_across_daemons_through_the_store(void **state)
{
	kiln_store *s;
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};
	struct filestate *fs;
	kiln_batch *b;
	kiln_id h;
	uint64_t nstat, nhashed;

	assert_int_equal(kiln_store_open(tu_path(state, "store"), &o, &s), 0);
	tu_write_file(tu_path(state, "a.txt"), "hello", 5);
	assert_int_equal(tu_sh("sleep 0.05"), 0);
	assert_int_equal(filestate_new(s, tu_dir(state), &fs), 0);
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	assert_int_equal(kiln_batch_new(&b), 0);
	assert_int_equal(filestate_flush(fs, b), 0);
	assert_int_equal(kiln_batch_len(b), 1);
	assert_int_equal(kiln_store_commit(s, b, NULL), 0);
	kiln_batch_free(b);
	filestate_free(fs);
	/* a new filestate (a restarted daemon) reads the record: no hashing */
	assert_int_equal(filestate_new(s, tu_dir(state), &fs), 0);
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	filestate_counts(fs, &nstat, &nhashed);
	assert_int_equal(nhashed, 0);
	filestate_free(fs);
	kiln_store_close(s);
}

/* A file changed in the clock tick it was hashed in could change again
 * with the same stat: such a racy record is hashed again at its next
 * look, and saved so that a restarted daemon hashes it too. */
static void
filestate_does_not_trust_a_racy_stat(void **state)
{
	kiln_store *s;
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};
	struct filestate *fs;
	struct fs_seen seen;
	kiln_batch *b;
	kiln_id h, want;
	uint64_t nstat, nhashed, nhashed2;

	assert_int_equal(kiln_store_open(tu_path(state, "store"), &o, &s), 0);
	/* the stat must come within FS_RACY_NS of the write: a busy machine
	 * can take longer (beside stress-ng it did), so try again until one
	 * attempt is quick enough — racy is the setting, not the subject */
	for (int tries = 0;; tries++) {
		tu_write_file(tu_path(state, "a.txt"), "hello", 5);
		assert_int_equal(filestate_new(s, tu_dir(state), &fs), 0);
		assert_int_equal(filestate_hash_seen(fs, "a.txt", &h, &seen), 0);
		if (seen.racy)
			break;
		filestate_free(fs);
		assert_true(tries < 1000);
	}
	/* the same bytes, same size, the mtime put back: only content tells */
	tu_write_file(tu_path(state, "a.txt"), "HELLO", 5);
	assert_int_equal(tu_sh("touch -d @%lld.%09lld '%s/a.txt'",
	                       (long long)(seen.rec.mtime_ns / 1000000000),
	                       (long long)(seen.rec.mtime_ns % 1000000000), tu_dir(state)), 0);
	filestate_pass(fs);
	filestate_counts(fs, &nstat, &nhashed);
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	kiln_id_of_buf("HELLO", 5, &want);
	assert_int_equal(kiln_id_cmp(&h, &want), 0);
	filestate_counts(fs, &nstat, &nhashed2);
	assert_int_equal(nhashed2, nhashed + 1);
	/* written to the store so that it never matches a stat */
	assert_int_equal(kiln_batch_new(&b), 0);
	assert_int_equal(filestate_flush(fs, b), 0);
	assert_int_equal(kiln_store_commit(s, b, NULL), 0);
	kiln_batch_free(b);
	filestate_free(fs);
	assert_int_equal(filestate_new(s, tu_dir(state), &fs), 0);
	filestate_counts(fs, &nstat, &nhashed);
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	filestate_counts(fs, &nstat, &nhashed2);
	assert_int_equal(nhashed2, nhashed + 1);
	filestate_free(fs);
	kiln_store_close(s);
}

/* What a step's key was made from, checked after its tool ran. */
static void
filestate_unchanged_sees_any_change_since_the_record(void **state)
{
	kiln_store *s;
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};
	struct filestate *fs;
	struct fs_seen seen, gone;
	kiln_id h;
	const char *root = tu_dir(state);

	assert_int_equal(kiln_store_open(tu_path(state, "store"), &o, &s), 0);
	tu_write_file(tu_path(state, "a.txt"), "hello", 5);
	assert_int_equal(tu_sh("sleep 0.05"), 0);
	assert_int_equal(filestate_new(s, root, &fs), 0);
	assert_int_equal(filestate_hash_seen(fs, "a.txt", &h, &seen), 0);
	assert_false(seen.racy);
	assert_int_equal(filestate_unchanged(fs, "a.txt", &seen), 1);
	/* touched: the content may have changed and changed back */
	assert_int_equal(tu_sh("touch '%s/a.txt'", root), 0);
	assert_int_equal(filestate_unchanged(fs, "a.txt", &seen), 0);
	/* this pass still answers from memory until told to forget it */
	tu_write_file(tu_path(state, "a.txt"), "other", 5);
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	assert_int_equal(memcmp(h.b, seen.rec.hash.b, 16), 0);
	filestate_forget(fs, "a.txt");
	assert_int_equal(filestate_hash(fs, "a.txt", &h), 0);
	assert_int_not_equal(memcmp(h.b, seen.rec.hash.b, 16), 0);
	/* a missing file stays unchanged until it appears */
	assert_int_equal(filestate_hash_seen(fs, "b.txt", &h, &gone), KILN_ENOTFOUND);
	assert_true(gone.missing);
	assert_int_equal(filestate_unchanged(fs, "b.txt", &gone), 1);
	tu_write_file(tu_path(state, "b.txt"), "new", 3);
	assert_int_equal(filestate_unchanged(fs, "b.txt", &gone), 0);
	filestate_free(fs);
	kiln_store_close(s);
}

/* A project file is read beneath the root: a symlink out of it is
 * refused, one inside it followed. */
static void
filestate_refuses_a_symlink_out_of_the_project(void **state)
{
	kiln_store *s;
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};
	struct filestate *fs;
	kiln_id h, want;
	const char *root = tu_dir(state);

	assert_int_equal(kiln_store_open(tu_path(state, "store"), &o, &s), 0);
	assert_int_equal(tu_sh("mkdir -p '%s/p/src' '%s/outside' && echo secret > '%s/outside/s' && "
	                       "echo inside > '%s/p/src/real' && ln -s real '%s/p/src/in' && "
	                       "ln -s '%s/outside/s' '%s/p/src/abs' && ln -s ../../outside/s '%s/p/src/rel' && "
	                       "ln -s '%s/outside' '%s/p/dir'",
	                       root, root, root, root, root, root, root, root, root, root), 0);
	assert_int_equal(filestate_new(s, tu_path(state, "p"), &fs), 0);
	assert_int_equal(filestate_hash(fs, "src/in", &h), 0);
	kiln_id_of_buf("inside\n", 7, &want);
	assert_int_equal(kiln_id_cmp(&h, &want), 0);
	assert_int_equal(filestate_hash(fs, "src/abs", &h), KILN_EOUTSIDE);
	assert_int_equal(filestate_hash(fs, "src/rel", &h), KILN_EOUTSIDE);
	assert_int_equal(filestate_hash(fs, "dir/s", &h), KILN_EOUTSIDE);
	assert_int_equal(filestate_hash(fs, "../outside/s", &h), KILN_EOUTSIDE);
	filestate_free(fs);
	kiln_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(key_ignores_the_order_parts_are_added_in),
		cmocka_unit_test(key_separates_labels_from_values),
		cmocka_unit_test(key_changes_with_every_part),
		cmocka_unit_test(diff_says_what_changed_from_what_to_what),
		cmocka_unit_test_setup_teardown(filestate_hashes_only_what_stat_says_changed,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(filestate_remembers_across_daemons_through_the_store,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(filestate_does_not_trust_a_racy_stat,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(filestate_unchanged_sees_any_change_since_the_record,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(filestate_refuses_a_symlink_out_of_the_project,
		                                tu_setup_dir, tu_teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
