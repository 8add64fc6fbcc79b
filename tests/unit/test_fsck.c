/* test_fsck.c — kiln_store_fsck finds damaged, missing and stray blobs and
 * undecodable records, changes nothing unless asked to repair, and repairs
 * by moving bad files to corrupt/ and dropping the records naming them.
 *
 * Damage is done from outside the store, the way a disk or a user would:
 * truncate, flip a byte, delete, drop a foreign file into objects/, swap a
 * blob for a symlink, and (through the store's database layer in
 * store_int.h, below the record encoders) overwrite record values with
 * garbage. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"
#include "testutil.h"

/* ---- what fsck reported ---------------------------------------------- */

/* The one problem about id with this kind; fails if none or several. */
static const struct tu_fsck_problem *
find_problem(const struct tu_fsck_problems *ps, enum kiln_fsck_kind kind,
             const kiln_id *id, const char *what)
{
	const struct tu_fsck_problem *found = NULL;

	for (size_t i = 0; i < ps->n; i++) {
		if (ps->p[i].kind != kind || kiln_id_cmp(&ps->p[i].id, id) != 0)
			continue;
		if (found)
			fail_msg("fsck reported %s twice as %s:%s", what,
			         tu_fsck_kind_name(kind), tu_fsck_describe(ps));
		found = &ps->p[i];
	}
	if (!found)
		fail_msg("fsck did not report %s as %s; it reported:%s", what,
		         tu_fsck_kind_name(kind), tu_fsck_describe(ps));
	return found;
}

/* fsck is clean and objects/ settled, holding nblobs sound blobs. */
static void
assert_clean(kiln_store *s, uint64_t nblobs, const char *when)
{
	uint64_t n;

	tu_assert_store_sound(s, when, &n, NULL);
	if (n != nblobs)
		fail_msg("%s: fsck checked %" PRIu64 " blobs, expected %" PRIu64,
		         when, n, nblobs);
}

#define assert_stat(st, field, want) tu_assert_stat("fsck", st, field, want)

/* ---- building and damaging a store ----------------------------------- */

/* "objects/ab/cdef..." as fsck is expected to name it. */
static const char *
blob_rel(const kiln_id *id)
{
	static char buf[64];
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	snprintf(buf, sizeof buf, "objects/%.2s/%s", hex, hex + 2);
	return buf;
}

static kiln_id
hash_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	kiln_id id;

	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	assert_kiln(0, kiln_id_of_fd(fd, &id, NULL));
	close(fd);
	return id;
}

/* ---- snapshots: prove a plain fsck changes nothing -------------------- */

struct text {
	char *s;
	size_t len, cap;
};

static void
text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0,
		              fmt, ap);
		va_end(ap);
		if (t->s && t->len + (size_t)n < t->cap)
			break;
		t->cap = (t->cap + (size_t)n + 1) * 2;
		t->s = realloc(t->s, t->cap);
		assert_non_null(t->s);
	}
	t->len += (size_t)n;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file below dir (except db/): relative path, type, size, mode and
 * content hash, in name order. */
static void
snap_tree(const char *dir, const char *rel, struct text *t)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		names = realloc(names, (n + 1) * sizeof *names);
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		char path[4096], r[4096];
		struct stat st;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", names[i]);
		if (lstat(path, &st) != 0 || !strcmp(r, "db")) {
			free(names[i]);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			text_add(t, "%s/\n", r);
			snap_tree(path, r, t);
		} else if (S_ISREG(st.st_mode)) {
			char hex[KILN_ID_HEX_LEN + 1];
			kiln_id id = hash_file(path);
			kiln_id_to_hex(&id, hex);
			text_add(t, "%s %lld %o %s\n", r, (long long)st.st_size,
			         (unsigned)st.st_mode & 07777, hex);
		} else {
			text_add(t, "%s mode %o\n", r, (unsigned)st.st_mode);
		}
		free(names[i]);
	}
	free(names);
}

static int
snap_entry(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	text_add(arg, "index %s %s %s\n", profile, url, hex);
	return 0;
}

/* Files, index entries and the given actions, as one text. */
static char *
snapshot(void **state, kiln_store *s, const kiln_id *keys, size_t nkeys)
{
	struct text t = {0};
	char dir[4096];

	snprintf(dir, sizeof dir, "%s", tu_path(state, "store"));
	snap_tree(dir, "", &t);
	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, snap_entry, &t));
	for (size_t i = 0; i < nkeys; i++) {
		kiln_action *a = NULL;
		int rv = kiln_store_action_get(s, &keys[i], &a);
		text_add(&t, "action %zu: %s", i, kiln_strerror(rv));
		if (rv == 0) {
			for (size_t j = 0; j < a->noutputs; j++) {
				char hex[KILN_ID_HEX_LEN + 1];
				kiln_id_to_hex(&a->outputs[j], hex);
				text_add(&t, " %s", hex);
			}
			kiln_action_free(a);
		}
		text_add(&t, "\n");
	}
	return t.s;
}

static void
assert_same_snapshot(const char *before, const char *after, const char *what)
{
	if (strcmp(before, after) != 0)
		fail_msg("%s changed the store.\nbefore:\n%s\nafter:\n%s", what,
		         before, after);
}

/* Hashes of every regular file below dir (recursively), for corrupt/. */
static size_t
tree_hashes(const char *dir, kiln_id *out, size_t max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (lstat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			n += tree_hashes(path, out + n, max - n);
		else if (n < max)
			out[n++] = S_ISREG(st.st_mode) ? hash_file(path) : (kiln_id){{0}};
	}
	closedir(d);
	return n;
}

static void
assert_in_corrupt(void **state, const kiln_id *content, const char *what)
{
	kiln_id found[64];
	size_t n = tree_hashes(tu_path(state, "store/corrupt"), found, 64);

	for (size_t i = 0; i < n; i++)
		if (kiln_id_cmp(&found[i], content) == 0)
			return;
	fail_msg("repair should have moved %s into corrupt/ (kept for forensics), "
	         "but corrupt/ holds no file with its bytes (%zu files there)",
	         what, n);
}

static void
assert_no_file(const char *path, const char *what)
{
	struct stat st;

	if (lstat(path, &st) == 0)
		fail_msg("%s should no longer be at %s", what, path);
}

static void
assert_index_is(kiln_store *s, const char *profile, const char *url,
                const kiln_id *want, const char *what)
{
	kiln_id got;
	int rv = kiln_store_index_get(s, profile, url, &got);

	if (want == NULL) {
		if (rv != KILN_ENOTFOUND)
			fail_msg("index %s %s (%s) should have been dropped, get says %s",
			         profile, url, what, kiln_strerror(rv));
		return;
	}
	if (rv != 0)
		fail_msg("index %s %s (%s) should still be there: %s", profile, url,
		         what, kiln_strerror(rv));
	if (kiln_id_cmp(&got, want) != 0)
		fail_msg("index %s %s (%s) names a different blob after repair",
		         profile, url, what);
}

static void
assert_action_is(kiln_store *s, const kiln_id *key, int want_present,
                  const char *what)
{
	kiln_action *a = NULL;
	int rv = kiln_store_action_get(s, key, &a);

	if (rv == 0)
		kiln_action_free(a);
	if (want_present && rv != 0)
		fail_msg("action %s should still be there: %s", what, kiln_strerror(rv));
	if (!want_present && rv != KILN_ENOTFOUND)
		fail_msg("action %s should have been dropped by repair, get says %s",
		         what, kiln_strerror(rv));
}

/* ---- cases ------------------------------------------------------------ */

static void
fsck_of_a_sound_store_reports_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = tu_put_content(s, 1, 1000), b = tu_put_content(s, 2, 0);
	kiln_id c = tu_put_content(s, 3, 70000), key = tu_key_of("k");
	kiln_fsck_stats st;
	struct tu_fsck_problems ps;

	assert_kiln(0, kiln_store_index_set(s, "pc", "a", &a));
	assert_kiln(0, kiln_store_action_put(s, &key, &b, 1, "x", 1));
	(void)c;
	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 0)
		fail_msg("fsck of a sound store reported:%s", tu_fsck_describe(&ps));
	assert_stat(st, blobs, 3);
	assert_stat(st, bytes, 71000);
	assert_stat(st, corrupt, 0);
	assert_stat(st, missing, 0);
	assert_stat(st, bad_records, 0);
	assert_stat(st, stray, 0);
	assert_stat(st, repaired, 0);
	tu_fsck_run(s, 1, &ps, &st);
	if (ps.n != 0 || st.repaired != 0)
		fail_msg("repairing fsck of a sound store reported:%s",
		         tu_fsck_describe(&ps));
	assert_stat(st, blobs, 3);
	kiln_store_close(s);
}

static void
fsck_finds_truncated_altered_and_missing_blobs(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = tu_put_content(s, 10, 5000);  /* index pc sprites/hero: truncated */
	kiln_id b = tu_put_content(s, 11, 7000);  /* action K1: one byte flipped */
	kiln_id c = tu_put_content(s, 12, 3000);  /* index pc sounds/boom: deleted */
	kiln_id d = tu_put_content(s, 13, 9000);  /* index ps5 + action K1: sound */
	kiln_id e = tu_put_content(s, 14, 11000); /* index ps5 + action K2: sound */
	kiln_id f = tu_put_content(s, 15, 1300);  /* unnamed: sound */
	kiln_id k1 = tu_key_of("action one"), k2 = tu_key_of("action two");
	kiln_id k1_outs[2] = {b, d}, keys[2] = {k1, k2};
	kiln_id bad_a, bad_b;
	char k1hex[KILN_ID_HEX_LEN + 1];
	char *before, *after;
	const struct tu_fsck_problem *pa, *pb, *pc;
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;

	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/hero", &a));
	assert_kiln(0, kiln_store_index_set(s, "pc", "sounds/boom", &c));
	assert_kiln(0, kiln_store_index_set(s, "ps5", "sprites/hero", &d));
	assert_kiln(0, kiln_store_index_set(s, "ps5", "music/theme", &e));
	assert_kiln(0, kiln_store_action_put(s, &k1, k1_outs, 2, "one", 3));
	assert_kiln(0, kiln_store_action_put(s, &k2, &e, 1, "two", 3));
	kiln_id_to_hex(&k1, k1hex);

	tu_truncate_blob(tu_blob_path(state, &a), 2500);
	tu_flip_byte(tu_blob_path(state, &b), 3333);
	if (unlink(tu_blob_path(state, &c)) != 0)
		fail_msg("unlink: %s", strerror(errno));
	bad_a = hash_file(tu_blob_path(state, &a));
	bad_b = hash_file(tu_blob_path(state, &b));

	/* check only: exactly three problems, nothing changed */
	before = snapshot(state, s, keys, 2);
	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 3)
		fail_msg("fsck should report exactly 3 problems, reported %zu:%s",
		         ps.n, tu_fsck_describe(&ps));
	pa = find_problem(&ps, KILN_FSCK_CORRUPT, &a, "the truncated blob");
	pb = find_problem(&ps, KILN_FSCK_CORRUPT, &b, "the altered blob");
	pc = find_problem(&ps, KILN_FSCK_MISSING, &c, "the deleted blob");
	if (!strstr(pa->where, "index") || !strstr(pa->where, "pc") ||
	    !strstr(pa->where, "sprites/hero"))
		fail_msg("the truncated blob's where=\"%s\" should name the index "
		         "entry naming it (\"index pc sprites/hero\")", pa->where);
	if (!strstr(pb->where, "action") || !strstr(pb->where, k1hex))
		fail_msg("the altered blob's where=\"%s\" should name the action "
		         "naming it (\"action %s\")", pb->where, k1hex);
	if (!strstr(pc->where, "index") || !strstr(pc->where, "pc") ||
	    !strstr(pc->where, "sounds/boom"))
		fail_msg("the missing blob's where=\"%s\" should name the index "
		         "entry (\"index pc sounds/boom\")", pc->where);
	for (size_t i = 0; i < ps.n; i++)
		if (ps.p[i].repaired)
			fail_msg("fsck without repair says it repaired:%s",
			         tu_fsck_describe(&ps));
	assert_stat(st, blobs, 5);
	assert_stat(st, bytes, 2500 + 7000 + 9000 + 11000 + 1300);
	assert_stat(st, corrupt, 2);
	assert_stat(st, missing, 1);
	assert_stat(st, bad_records, 0);
	assert_stat(st, stray, 0);
	assert_stat(st, repaired, 0);
	after = snapshot(state, s, keys, 2);
	assert_same_snapshot(before, after, "fsck without repair");
	free(before);
	free(after);

	/* repair: the same three, each repaired */
	tu_fsck_run(s, 1, &ps, &st);
	if (ps.n != 3)
		fail_msg("repairing fsck should report the 3 problems, reported %zu:%s",
		         ps.n, tu_fsck_describe(&ps));
	find_problem(&ps, KILN_FSCK_CORRUPT, &a, "the truncated blob");
	find_problem(&ps, KILN_FSCK_CORRUPT, &b, "the altered blob");
	find_problem(&ps, KILN_FSCK_MISSING, &c, "the deleted blob");
	for (size_t i = 0; i < ps.n; i++)
		if (!ps.p[i].repaired)
			fail_msg("repairing fsck left a problem unrepaired:%s",
			         tu_fsck_describe(&ps));
	assert_stat(st, corrupt, 2);
	assert_stat(st, missing, 1);
	assert_stat(st, repaired, 3);

	assert_no_file(tu_blob_path(state, &a), "the truncated blob");
	assert_no_file(tu_blob_path(state, &b), "the altered blob");
	assert_in_corrupt(state, &bad_a, "the truncated blob");
	assert_in_corrupt(state, &bad_b, "the altered blob");
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &a, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &b, NULL));
	assert_index_is(s, "pc", "sprites/hero", NULL, "named the truncated blob");
	assert_index_is(s, "pc", "sounds/boom", NULL, "named the deleted blob");
	assert_action_is(s, &k1, 0, "K1 (named the altered blob)");
	assert_index_is(s, "ps5", "sprites/hero", &d, "sound");
	assert_index_is(s, "ps5", "music/theme", &e, "sound");
	assert_action_is(s, &k2, 1, "K2 (sound)");
	assert_kiln(0, kiln_store_verify(s, &d));
	assert_kiln(0, kiln_store_verify(s, &e));
	assert_kiln(0, kiln_store_verify(s, &f));

	assert_clean(s, 3, "after repair");
	/* a rebuild puts the content back */
	{
		kiln_id again = tu_put_content(s, 10, 5000);
		assert_true(kiln_id_cmp(&again, &a) == 0);
		assert_kiln(0, kiln_store_verify(s, &a));
	}
	assert_clean(s, 4, "after putting the truncated content back");
	kiln_store_close(s);

	/* and it all holds after reopening */
	s = tu_open_store(state, KILN_DURABLE_NONE);
	assert_index_is(s, "pc", "sprites/hero", NULL, "named the truncated blob");
	assert_action_is(s, &k1, 0, "K1 (named the altered blob)");
	assert_action_is(s, &k2, 1, "K2 (sound)");
	assert_clean(s, 4, "after reopening");
	kiln_store_close(s);
}

static void
fsck_names_the_action_whose_output_is_missing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 20, 2000), y = tu_put_content(s, 21, 3000);
	kiln_id key = tu_key_of("pack level 1"), outs[2] = {x, y};
	char khex[KILN_ID_HEX_LEN + 1];
	const struct tu_fsck_problem *p;
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;

	assert_kiln(0, kiln_store_action_put(s, &key, outs, 2, "r", 1));
	kiln_id_to_hex(&key, khex);
	assert_int_equal(0, unlink(tu_blob_path(state, &y)));

	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 1)
		fail_msg("fsck should report exactly 1 problem, reported %zu:%s",
		         ps.n, tu_fsck_describe(&ps));
	p = find_problem(&ps, KILN_FSCK_MISSING, &y, "the action's deleted output");
	if (!strstr(p->where, "action") || !strstr(p->where, khex))
		fail_msg("where=\"%s\" should name the action (\"action %s\")",
		         p->where, khex);
	assert_stat(st, missing, 1);
	assert_stat(st, blobs, 1);
	assert_action_is(s, &key, 1, "before repair");

	tu_fsck_run(s, 1, &ps, &st);
	find_problem(&ps, KILN_FSCK_MISSING, &y, "the action's deleted output");
	assert_stat(st, repaired, 1);
	assert_action_is(s, &key, 0, "naming a missing output");
	assert_kiln(0, kiln_store_verify(s, &x));
	assert_clean(s, 1, "after repair");
	kiln_store_close(s);
}

static void
fsck_names_the_file_of_an_unnamed_corrupt_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 25, 4000), y = tu_put_content(s, 26, 4000), bad;
	const struct tu_fsck_problem *p;
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	char rel[64];

	assert_kiln(0, kiln_store_index_set(s, "pc", "y", &y));
	tu_flip_byte(tu_blob_path(state, &x), 0);
	bad = hash_file(tu_blob_path(state, &x));
	snprintf(rel, sizeof rel, "%s", blob_rel(&x));

	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 1)
		fail_msg("fsck should report exactly 1 problem, reported %zu:%s",
		         ps.n, tu_fsck_describe(&ps));
	p = find_problem(&ps, KILN_FSCK_CORRUPT, &x, "the altered unnamed blob");
	if (!strstr(p->where, rel))
		fail_msg("where=\"%s\" should name the file (%s): no record names "
		         "it", p->where, rel);
	assert_stat(st, corrupt, 1);
	assert_stat(st, blobs, 2);

	tu_fsck_run(s, 1, &ps, &st);
	assert_stat(st, repaired, 1);
	assert_no_file(tu_blob_path(state, &x), "the altered unnamed blob");
	assert_in_corrupt(state, &bad, "the altered unnamed blob");
	assert_index_is(s, "pc", "y", &y, "sound");
	assert_clean(s, 1, "after repair");
	kiln_store_close(s);
}

static void
fsck_reports_stray_files_in_objects(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 30, 2000), st1, st2;
	char xhex[KILN_ID_HEX_LEN + 1], stray2[128];
	const char *p1, *p2;
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	int seen1 = 0, seen2 = 0;
	char *before, *after;

	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &x));
	kiln_id_to_hex(&x, xhex);
	p1 = tu_path(state, "store/objects/stray.txt");
	tu_write_file(p1, "hello", 5);
	snprintf(stray2, sizeof stray2, "objects/%.2s/not-a-blob.tmp", xhex);
	p2 = tu_path(state, "store/%s", stray2);
	tu_write_file(p2, "partial", 7);
	kiln_id_of_buf("hello", 5, &st1);
	kiln_id_of_buf("partial", 7, &st2);

	before = snapshot(state, s, NULL, 0);
	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 2)
		fail_msg("fsck should report the 2 stray files, reported %zu:%s",
		         ps.n, tu_fsck_describe(&ps));
	for (size_t i = 0; i < ps.n; i++) {
		if (ps.p[i].kind != KILN_FSCK_STRAY)
			fail_msg("a foreign file should be STRAY:%s",
			         tu_fsck_describe(&ps));
		seen1 += strstr(ps.p[i].where, "stray.txt") != NULL;
		seen2 += strstr(ps.p[i].where, "not-a-blob.tmp") != NULL;
	}
	if (seen1 != 1 || seen2 != 1)
		fail_msg("each stray's where should name its file once "
		         "(objects/stray.txt, %s):%s", stray2, tu_fsck_describe(&ps));
	assert_stat(st, stray, 2);
	assert_stat(st, blobs, 1);
	assert_stat(st, corrupt, 0);
	after = snapshot(state, s, NULL, 0);
	assert_same_snapshot(before, after, "fsck without repair");
	free(before);
	free(after);

	tu_fsck_run(s, 1, &ps, &st);
	assert_stat(st, stray, 2);
	assert_stat(st, repaired, 2);
	assert_no_file(p1, "objects/stray.txt after repair");
	assert_no_file(p2, "the stray in a fan-out folder after repair");
	assert_in_corrupt(state, &st1, "objects/stray.txt");
	assert_in_corrupt(state, &st2, stray2);
	assert_index_is(s, "pc", "x", &x, "sound blob beside strays");
	assert_clean(s, 1, "after repair");
	kiln_store_close(s);
}

static void
fsck_never_follows_a_symlink_in_place_of_a_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 40, 2000), victim;
	const char *target = tu_path(state, "victim.txt");
	char path[4096];
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	void *buf = NULL;
	size_t len;
	int rv;

	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &x));
	tu_write_file(target, "not yours", 9);
	victim = hash_file(target);
	snprintf(path, sizeof path, "%s", tu_blob_path(state, &x));
	assert_int_equal(0, unlink(path));
	assert_int_equal(0, symlink(target, path));

	rv = kiln_store_read(s, &x, &buf, &len);
	if (rv == 0)
		free(buf);
	if (rv != KILN_ECORRUPT && rv != KILN_ENOTFOUND && rv != KILN_EIO)
		fail_msg("read of a blob replaced by a symlink to other bytes "
		         "returned %s, expected CORRUPT, NOTFOUND or EIO",
		         kiln_strerror(rv));

	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n < 1)
		fail_msg("fsck did not notice a symlink in place of blob %s",
		         blob_rel(&x));
	tu_fsck_run(s, 1, &ps, &st);
	for (size_t i = 0; i < ps.n; i++)
		if (!ps.p[i].repaired)
			fail_msg("repair left a problem:%s", tu_fsck_describe(&ps));
	assert_no_file(path, "the symlink");
	{
		kiln_id now = hash_file(target);
		if (kiln_id_cmp(&now, &victim) != 0)
			fail_msg("repair changed the symlink's target file");
	}
	assert_index_is(s, "pc", "x", NULL, "named the replaced blob");
	assert_clean(s, 0, "after repair");
	kiln_store_close(s);
}

/* A record whose value garble_put overwrites. */
struct garble {
	enum db_name db;
	const void *key;
	size_t klen;
};

/* db_fn: the record must exist; its value becomes three bytes no kiln can
 * decode. */
static int
garble_put(db_txn *t, void *arg)
{
	static const uint8_t junk[3] = {0xff, 0x00, 0x7f};
	const struct garble *g = arg;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, g->db, g->key, g->klen, &v, &vlen)) != 0)
		return rv;
	return db_put(t, g->db, g->key, g->klen, junk, sizeof junk);
}

/* Overwrite the value of record key in database db with garbage, below
 * the record encoders (records.c); what names it in a failure. */
static void
garble_record(kiln_store *s, enum db_name db, const void *key, size_t klen,
              const char *what)
{
	struct garble g = {db, key, klen};
	int rv = db_write(s->db, garble_put, &g);

	if (rv != 0)
		fail_msg("garbling %s: %s", what, kiln_strerror(rv));
}

static int
count_entry(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	(void)profile;
	(void)url;
	(void)id;
	(*(int *)arg)++;
	return 0;
}

static void
fsck_reports_and_drops_undecodable_records(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 50, 100), y = tu_put_content(s, 51, 200);
	kiln_id k1 = tu_key_of("a1"), k2 = tu_key_of("a2"), keys[2] = {k1, k2};
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	kiln_action *a = NULL;
	char ikey[INDEX_KEY_MAX];
	int rv, klen, n_before = 0, n_after = 0, n_bad_actions = 0;

	assert_kiln(0, kiln_store_index_set(s, "pc", "one", &x));
	assert_kiln(0, kiln_store_index_set(s, "pc", "two", &y));
	assert_kiln(0, kiln_store_action_put(s, &k1, &x, 1, "1", 1));
	assert_kiln(0, kiln_store_action_put(s, &k2, &y, 1, "2", 1));
	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, count_entry, &n_before));
	klen = index_key("pc", "one", ikey);
	assert_true(klen > 0);
	garble_record(s, DB_INDEX, ikey, (size_t)klen, "index pc one");
	garble_record(s, DB_ACTIONS, k1.b, sizeof k1.b, "action a1");
	kiln_store_close(s);
	s = tu_open_store(state, KILN_DURABLE_NONE);

	for (int i = 0; i < 2; i++) {
		rv = kiln_store_action_get(s, &keys[i], &a);
		if (rv == 0)
			kiln_action_free(a);
		else if (rv == KILN_ECORRUPT || rv == KILN_EVERSION)
			n_bad_actions++;
		else
			fail_msg("action_get of a sound or garbled record: %s",
			         kiln_strerror(rv));
	}
	if (n_bad_actions != 1)
		fail_msg("expected one action_get to refuse the garbled record "
		         "(ECORRUPT/EVERSION), got %d", n_bad_actions);

	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 2 || st.bad_records != 2)
		fail_msg("fsck should report 2 BAD_RECORD problems (bad_records=%"
		         PRIu64 "), reported %zu:%s", st.bad_records, ps.n,
		         tu_fsck_describe(&ps));
	for (size_t i = 0; i < ps.n; i++)
		if (ps.p[i].kind != KILN_FSCK_BAD_RECORD)
			fail_msg("garbled records should be BAD_RECORD:%s",
			         tu_fsck_describe(&ps));
	assert_stat(st, blobs, 2);

	tu_fsck_run(s, 1, &ps, &st);
	assert_stat(st, bad_records, 2);
	assert_stat(st, repaired, 2);
	assert_clean(s, 2, "after dropping the garbled records");
	/* one good record of each kind is left */
	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, count_entry, &n_after));
	if (n_after != n_before - 1)
		fail_msg("after repair %d index entries are left, expected %d",
		         n_after, n_before - 1);
	n_bad_actions = 0;
	for (int i = 0; i < 2; i++) {
		rv = kiln_store_action_get(s, &keys[i], &a);
		if (rv == 0)
			kiln_action_free(a);
		else if (rv == KILN_ENOTFOUND)
			n_bad_actions++;
		else
			fail_msg("action_get after repair: %s", kiln_strerror(rv));
	}
	if (n_bad_actions != 1)
		fail_msg("after repair exactly the garbled action should be gone; "
		         "%d of 2 are", n_bad_actions);
	kiln_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(fsck_of_a_sound_store_reports_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fsck_finds_truncated_altered_and_missing_blobs, tu_setup_dir,
			tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fsck_names_the_action_whose_output_is_missing, tu_setup_dir,
			tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fsck_names_the_file_of_an_unnamed_corrupt_blob, tu_setup_dir,
			tu_teardown_dir),
		cmocka_unit_test_setup_teardown(fsck_reports_stray_files_in_objects,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fsck_never_follows_a_symlink_in_place_of_a_blob, tu_setup_dir,
			tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fsck_reports_and_drops_undecodable_records, tu_setup_dir,
			tu_teardown_dir),
	};

	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
