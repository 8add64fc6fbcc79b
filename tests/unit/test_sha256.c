/* test_sha256.c — every blob's second name, its SHA-256 (issue 24).
 *
 * Every way bytes enter the store records the SHA-256 computed in the same
 * pass as XXH3 (checked against known answers and against OpenSSL's
 * one-shot digest), the sha256 database finds the blob by it, a writer
 * told the remote's digest refuses other bytes and stores nothing, a
 * record written before SHA-256s gets one the first time it is asked for,
 * gc takes a removed blob's entry with it, and fsck finds and repairs a
 * wrong record or entry. Cases reach into the database (store_int.h) only
 * to write what an older kiln or damage would have left. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "testutil.h"
#include "store_int.h"

#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static const char *
sha_hex(const uint8_t sha[KILN_SHA256_LEN])
{
	static char bufs[4][KILN_SHA256_HEX_LEN + 1];
	static int next;
	char *b = bufs[next++ % 4];

	kiln_sha256_to_hex(sha, b);
	return b;
}

static void
sha_of_hex(const char *hex, uint8_t sha[KILN_SHA256_LEN])
{
	assert_kiln(0, kiln_sha256_from_hex(hex, sha));
}

/* OpenSSL's one-shot digest: the reference the store's streaming is held to. */
static void
sha_ref(const void *buf, size_t len, uint8_t sha[KILN_SHA256_LEN])
{
	unsigned n = 0;

	assert_int_equal(EVP_Digest(buf, len, sha, &n, EVP_sha256(), NULL), 1);
	assert_int_equal(n, KILN_SHA256_LEN);
}

/* The store says blob id's SHA-256 is want, and finds id by it. */
static void
assert_sha(kiln_store *s, const kiln_id *id, const uint8_t want[KILN_SHA256_LEN],
           const char *what)
{
	uint8_t got[KILN_SHA256_LEN];
	kiln_id found;
	int rv;

	if ((rv = kiln_store_blob_sha256(s, id, got)) != 0)
		fail_msg("%s: blob_sha256: %s", what, kiln_strerror(rv));
	if (memcmp(got, want, KILN_SHA256_LEN) != 0)
		fail_msg("%s: SHA-256 %s, expected %s", what, sha_hex(got), sha_hex(want));
	if ((rv = kiln_store_find_sha256(s, want, &found)) != 0)
		fail_msg("%s: find_sha256(%s): %s", what, sha_hex(want), kiln_strerror(rv));
	if (kiln_id_cmp(&found, id) != 0)
		fail_msg("%s: find_sha256 named another blob", what);
}

/* ---- the record, read and written as they are on disk ---- */

struct rec_io {
	kiln_id id;
	struct rec_blob r;
	int found;                   /* get: a record decoded */
	uint8_t sha[KILN_SHA256_LEN];
	int entry;                   /* get: the sha256 entry of sha names... */
	kiln_id entry_id;            /* ...this blob */
	/* put: write r as is (a version-1 record when !r.has_sha) and drop
	 * the entry of sha; with set_entry, point sha's entry at entry_id */
	int drop_entry, set_entry;
};

static int
rec_get_txn(db_txn *t, void *arg)
{
	struct rec_io *io = arg;
	const void *v;
	size_t vlen;

	io->found = db_get(t, DB_BLOBS, io->id.b, 16, &v, &vlen) == 0 &&
	            rec_blob_decode(v, vlen, &io->r) == 0;
	io->entry = db_get(t, DB_SHA256, io->sha, KILN_SHA256_LEN, &v, &vlen) == 0 &&
	            rec_sha_decode(v, vlen, &io->entry_id) == 0;
	return 0;
}

static int
rec_put_txn(db_txn *t, void *arg)
{
	struct rec_io *io = arg;
	uint8_t v[REC_BLOB_LEN];
	size_t len = rec_blob_encode(&io->r, v);
	int rv;

	if ((rv = db_put(t, DB_BLOBS, io->id.b, 16, v, len)) != 0)
		return rv;
	if (io->drop_entry && (rv = db_del(t, DB_SHA256, io->sha, KILN_SHA256_LEN)) != 0 &&
	    rv != KILN_ENOTFOUND)
		return rv;
	return io->set_entry ? shamap_set(t, io->sha, &io->entry_id) : 0;
}

static struct rec_io
rec_get(kiln_store *s, const kiln_id *id, const uint8_t sha[KILN_SHA256_LEN])
{
	struct rec_io io = {.id = *id};

	memcpy(io.sha, sha, KILN_SHA256_LEN);
	assert_kiln(0, db_read(s->db, rec_get_txn, &io));
	return io;
}

/* What a kiln before SHA-256s left: a version-1 record, no entry. */
static void
make_old_record(kiln_store *s, const kiln_id *id, const uint8_t sha[KILN_SHA256_LEN])
{
	struct rec_io io = rec_get(s, id, sha);
	uint8_t v[REC_BLOB_LEN];

	assert_true(io.found);
	io.r.has_sha = 0;
	assert_int_equal(rec_blob_encode(&io.r, v), REC_BLOB_LEN_V1);
	assert_int_equal(v[0], 1);
	io.drop_entry = 1;
	assert_kiln(0, db_write(s->db, rec_put_txn, &io));
}

/* ---- the put paths ---- */

enum put_way { BY_BUF, BY_FD, BY_PATH, BY_MOVE, BY_MOVE_LINKED, BY_WRITER, NWAYS };

static const char *const way_names[NWAYS] = {
	"put_buf", "put_fd (pipe)", "put_path", "put_move",
	"put_move of a hard-linked file (copied)", "blob writer (1-byte writes)",
};

static void
put_by(void **state, kiln_store *s, enum put_way way, const void *buf, size_t len,
       kiln_id *id)
{
	const char *path = tu_path(state, "src-%d", (int)way);
	int fds[2];

	switch (way) {
	case BY_BUF:
		assert_kiln(0, kiln_store_put_buf(s, buf, len, id));
		return;
	case BY_FD:
		/* a pipe, not a file: the streaming read loop; content this
		 * small fits the pipe's buffer */
		assert_int_equal(pipe(fds), 0);
		assert_int_equal(tu_write_all(fds[1], buf, len), 0);
		close(fds[1]);
		assert_kiln(0, kiln_store_put_fd(s, fds[0], id));
		close(fds[0]);
		return;
	case BY_PATH:
		tu_write_file(path, buf, len);
		assert_kiln(0, kiln_store_put_path(s, path, id));
		return;
	case BY_MOVE:
		tu_write_file(path, buf, len);
		assert_kiln(0, kiln_store_put_move(s, path, id));
		return;
	case BY_MOVE_LINKED:
		tu_write_file(path, buf, len);
		unlink(tu_path(state, "link-%d", (int)way));
		assert_int_equal(link(path, tu_path(state, "link-%d", (int)way)), 0);
		assert_kiln(0, kiln_store_put_move(s, path, id));
		return;
	case BY_WRITER:
		assert_kiln(0, tu_put_by_writer(s, buf, len, 1, NULL, id));
		return;
	case NWAYS:
		break;
	}
	fail_msg("no such way");
}

/* Each way, each durability (BATCH defers the record to the next commit,
 * and its put_move renames the caller's file straight into objects/):
 * "" and "abc" get their known SHA-256s, found by them, before and after
 * the record is committed. */
static void
known_answers_by_every_put_path(void **state)
{
	static const enum kiln_durability ds[] = {KILN_DURABLE_NONE, KILN_DURABLE_FSYNC,
	                                         KILN_DURABLE_BATCH};
	static const struct { const char *text, *sha; } kat[] = {
		{"", SHA_EMPTY}, {"abc", SHA_ABC},
	};

	for (size_t d = 0; d < sizeof ds / sizeof *ds; d++) {
		for (int way = 0; way < NWAYS; way++) {
			for (size_t k = 0; k < 2; k++) {
				char what[160];
				uint8_t want[KILN_SHA256_LEN];
				kiln_id id, expect;
				kiln_store *s;
				tu_rmtree(tu_path(state, "store"));
				s = tu_open_store(state, ds[d]);
				snprintf(what, sizeof what, "%s of \"%s\", durability %d",
				         way_names[way], kat[k].text, (int)ds[d]);
				sha_of_hex(kat[k].sha, want);
				put_by(state, s, (enum put_way)way, kat[k].text,
				       strlen(kat[k].text), &id);
				kiln_id_of_buf(kat[k].text, strlen(kat[k].text), &expect);
				assert_int_equal(kiln_id_cmp(&id, &expect), 0);
				assert_sha(s, &id, want, what);
				/* the record (BATCH: written by this commit) has it */
				{
					kiln_batch *b;
					assert_kiln(0, kiln_batch_new(&b));
					assert_kiln(0, kiln_store_commit(s, b, NULL));
					kiln_batch_free(b);
				}
				struct rec_io io = rec_get(s, &id, want);
				if (!io.found || !io.r.has_sha ||
				    memcmp(io.r.sha, want, KILN_SHA256_LEN) != 0)
					fail_msg("%s: the blob record holds no SHA-256, or "
					         "another", what);
				if (!io.entry || kiln_id_cmp(&io.entry_id, &id) != 0)
					fail_msg("%s: no sha256 entry naming the blob", what);
				assert_sha(s, &id, want, what);
				tu_assert_fsck_clean(s, what, 1, strlen(kat[k].text));
				kiln_store_close(s);
			}
		}
	}
}

/* Over 16 KiB (the stack fast path) and over one 1 MiB read: the digest
 * carried across pieces is the one-shot digest of the whole. */
static void
large_content_streamed_in_pieces_matches_the_one_shot_digest(void **state)
{
	size_t len = (3u << 20) + 12345;
	uint8_t *buf = malloc(len), want[KILN_SHA256_LEN];
	static const enum kiln_durability ds[] = {KILN_DURABLE_NONE, KILN_DURABLE_BATCH};

	assert_non_null(buf);
	tu_fill64(buf, len, 24);
	sha_ref(buf, len, want);
	for (size_t d = 0; d < 2; d++) {
		static const enum put_way ways[] = {BY_PATH, BY_MOVE};
		for (size_t w = 0; w < 2; w++) {
			kiln_store *s;
			kiln_id id;
			tu_rmtree(tu_path(state, "store"));
			s = tu_open_store(state, ds[d]);
			put_by(state, s, ways[w], buf, len, &id);
			assert_sha(s, &id, want, way_names[ways[w]]);
			kiln_store_close(s);
		}
		kiln_store *s;
		kiln_id id;
		tu_rmtree(tu_path(state, "store"));
		s = tu_open_store(state, ds[d]);
		assert_kiln(0, tu_put_by_writer(s, buf, len, 65537, NULL, &id));
		assert_sha(s, &id, want, "writer, 64 KiB + 1 pieces");
		kiln_store_close(s);
	}
	free(buf);
}

/* A blob fetched by its SHA-256 is checked in the same pass: other bytes
 * are refused and nothing is stored; the right ones are. */
static void
a_writer_expecting_a_sha256_refuses_other_content_and_stores_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	uint8_t want[KILN_SHA256_LEN], got_sha[KILN_SHA256_LEN];
	kiln_blob_writer *w;
	kiln_id abd, id;
	char tmp[4][256];

	sha_of_hex(SHA_ABC, want);
	kiln_id_of_buf("abd", 3, &abd);
	assert_kiln(0, kiln_blob_writer_open(s, &w));
	kiln_blob_writer_expect_sha256(w, want);
	assert_kiln(0, kiln_blob_writer_write(w, "ab", 2));
	assert_kiln(0, kiln_blob_writer_write(w, "d", 1));
	assert_kiln(KILN_ECORRUPT, kiln_blob_writer_commit(w, NULL, &id));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &abd, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, want, &id));
	assert_kiln(KILN_ENOTFOUND, kiln_store_blob_sha256(s, &abd, got_sha));
	assert_int_equal(tu_list_tmp(tu_path(state, "store"), tmp, 4), 0);
	tu_assert_fsck_clean(s, "after the refused put", 0, 0);

	/* expected set before any byte, and matched */
	assert_kiln(0, kiln_blob_writer_open(s, &w));
	kiln_blob_writer_expect_sha256(w, want);
	assert_kiln(0, kiln_blob_writer_write(w, "abc", 3));
	assert_kiln(0, kiln_blob_writer_commit(w, NULL, &id));
	assert_sha(s, &id, want, "the expected content");
	kiln_store_close(s);
}

/* A store written before SHA-256s: version-1 records, no sha256
 * database entries. Still read; the SHA-256 is computed when first asked
 * for and recorded, keeping the use time; a blob without any record gets
 * one dated by its file; a read-only handle computes without writing. */
static void
an_old_record_gets_its_sha256_the_first_time_it_is_asked_for(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	uint8_t want[KILN_SHA256_LEN], got[KILN_SHA256_LEN];
	struct rec_io io;
	int64_t used;
	kiln_id id, found;

	sha_of_hex(SHA_ABC, want);
	assert_kiln(0, kiln_store_put_buf(s, "abc", 3, &id));
	make_old_record(s, &id, want);
	io = rec_get(s, &id, want);
	assert_true(io.found);
	assert_false(io.r.has_sha);
	assert_false(io.entry);
	used = io.r.used_ns;
	tu_assert_fsck_clean(s, "a store with a version-1 record", 1, 3);

	/* read-only: computed, not written */
	kiln_store_close(s);
	s = tu_open_store_at(tu_path(state, "store"), KILN_STORE_RDONLY,
	                     KILN_DURABLE_FSYNC, "read-only");
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, want, &found));
	assert_kiln(0, kiln_store_blob_sha256(s, &id, got));
	assert_memory_equal(got, want, KILN_SHA256_LEN);
	assert_false(rec_get(s, &id, want).entry);
	kiln_store_close(s);

	s = tu_open_store(state, KILN_DURABLE_FSYNC);
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, want, &found));
	assert_sha(s, &id, want, "first asked");
	io = rec_get(s, &id, want);
	assert_true(io.found && io.r.has_sha && io.entry);
	assert_int_equal(io.r.size, 3);
	if (io.r.used_ns != used)
		fail_msg("asking for the SHA-256 moved the use time");
	/* a later touch keeps it */
	assert_kiln(0, kiln_store_touch(s, &id, 1));
	assert_true(rec_get(s, &id, want).r.has_sha);
	kiln_store_close(s);
}

static int
del_both_txn(db_txn *t, void *arg)
{
	struct rec_io *io = arg;

	return blobrec_del(t, &io->id);
}

static void
a_blob_without_a_record_gets_one_dated_by_its_file(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	uint8_t want[KILN_SHA256_LEN];
	struct rec_io io = {0};
	struct stat st;
	kiln_id id, found;

	sha_of_hex(SHA_ABC, want);
	assert_kiln(0, kiln_store_put_buf(s, "abc", 3, &id));
	io.id = id;
	assert_kiln(0, db_write(s->db, del_both_txn, &io));
	io = rec_get(s, &id, want);
	assert_false(io.found);
	assert_false(io.entry);
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, want, &found));
	assert_sha(s, &id, want, "a blob without a record");
	io = rec_get(s, &id, want);
	assert_true(io.found && io.r.has_sha && io.entry);
	assert_int_equal(stat(tu_blob_path(state, &id), &st), 0);
	assert_int_equal(io.r.used_ns,
	                 (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
	kiln_store_close(s);
}

/* Damage: asking for a corrupt blob's SHA-256 says so, records nothing. */
static void
a_corrupt_blob_has_no_sha256(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	uint8_t want[KILN_SHA256_LEN], got[KILN_SHA256_LEN];
	kiln_id id;

	sha_of_hex(SHA_ABC, want);
	assert_kiln(0, kiln_store_put_buf(s, "abc", 3, &id));
	make_old_record(s, &id, want);
	tu_flip_byte(tu_blob_path(state, &id), 1);
	assert_kiln(KILN_ECORRUPT, kiln_store_blob_sha256(s, &id, got));
	assert_false(rec_get(s, &id, want).r.has_sha);
	kiln_store_close(s);
}

/* gc removes a blob's record and its sha256 entry together; a blob
 * quarantined is not found by its SHA-256 though its entry remains. */
static void
gc_removes_the_sha256_entry_with_the_blob(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_FSYNC, &clock);
	kiln_gc_opts o = {.max_size = 0, .action_max_age_s = 1, .grace_s = 1};
	uint8_t want[KILN_SHA256_LEN], other[KILN_SHA256_LEN];
	kiln_gc_stats st;
	kiln_id id, keep, found;
	struct rec_io io;

	sha_of_hex(SHA_ABC, want);
	assert_kiln(0, kiln_store_put_buf(s, "abc", 3, &id));
	assert_kiln(0, kiln_store_put_buf(s, "kept", 4, &keep));
	assert_kiln(0, kiln_store_index_set(s, "pc", "kept", &keep));
	assert_kiln(0, kiln_store_blob_sha256(s, &keep, other));
	tu_clock_advance(&clock, 5000);
	assert_kiln(0, kiln_store_gc(s, &o, &st));
	tu_assert_stat("gc", st, removed_blobs, 1);
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, want, &found));
	io = rec_get(s, &id, want);
	assert_false(io.found);
	if (io.entry)
		fail_msg("gc left the removed blob's sha256 entry");
	assert_sha(s, &keep, other, "the rooted blob");

	assert_kiln(0, kiln_store_quarantine(s, &keep));
	assert_kiln(KILN_ENOTFOUND, kiln_store_find_sha256(s, other, &found));
	kiln_store_close(s);
}

/* A wrong entry (naming another blob), a wrong SHA-256 in a record, a
 * missing entry and an entry naming no blob are each reported, then
 * repaired from the content; a version-1 record is no problem, and repair
 * fills it in. */
static void
fsck_finds_and_repairs_wrong_sha256_records_and_entries(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	uint8_t sa[KILN_SHA256_LEN], sb[KILN_SHA256_LEN], sc[KILN_SHA256_LEN],
	        sd[KILN_SHA256_LEN], ghost[KILN_SHA256_LEN];
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	kiln_id a, b, c, d, found;
	struct rec_io io;

	assert_kiln(0, kiln_store_put_buf(s, "a", 1, &a));
	assert_kiln(0, kiln_store_put_buf(s, "bb", 2, &b));
	assert_kiln(0, kiln_store_put_buf(s, "ccc", 3, &c));
	assert_kiln(0, kiln_store_put_buf(s, "dddd", 4, &d));
	sha_ref("a", 1, sa);
	sha_ref("bb", 2, sb);
	sha_ref("ccc", 3, sc);
	sha_ref("dddd", 4, sd);
	memset(ghost, 0x5a, sizeof ghost);

	/* a's entry names b */
	io = rec_get(s, &a, sa);
	io.set_entry = 1;
	io.entry_id = b;
	assert_kiln(0, db_write(s->db, rec_put_txn, &io));
	/* b's record holds c's SHA-256 (and c's entry stays c's) */
	io = rec_get(s, &b, sb);
	memcpy(io.r.sha, sc, KILN_SHA256_LEN);
	memcpy(io.sha, sb, KILN_SHA256_LEN);
	io.drop_entry = 1;
	assert_kiln(0, db_write(s->db, rec_put_txn, &io));
	/* an entry naming a blob that is not there */
	io = (struct rec_io){.id = d, .set_entry = 1};
	memcpy(io.sha, ghost, KILN_SHA256_LEN);
	io.entry_id = (kiln_id){{9, 9, 9}};
	io.r = rec_get(s, &d, sd).r;
	assert_kiln(0, db_write(s->db, rec_put_txn, &io));
	/* d: a version-1 record (no problem) */
	make_old_record(s, &d, sd);

	tu_fsck_run(s, 0, &ps, &st);
	tu_assert_stat("fsck", st, sha256, 3);
	tu_assert_stat("fsck", st, corrupt, 0);
	tu_assert_stat("fsck", st, missing, 0);
	if (ps.n != 3)
		fail_msg("expected 3 problems, got:%s", tu_fsck_describe(&ps));
	for (size_t i = 0; i < ps.n; i++)
		if (ps.p[i].kind != KILN_FSCK_SHA256 || ps.p[i].repaired)
			fail_msg("expected unrepaired SHA256 problems, got:%s",
			         tu_fsck_describe(&ps));
	assert_false(rec_get(s, &d, sd).r.has_sha);   /* no repair: no write */

	tu_fsck_run(s, 1, &ps, &st);
	tu_assert_stat("fsck --repair", st, sha256, 3);
	tu_assert_stat("fsck --repair", st, repaired, 3);
	tu_assert_fsck_clean(s, "after repair", 4, 10);

	assert_kiln(0, kiln_store_find_sha256(s, sa, &found));
	assert_int_equal(kiln_id_cmp(&found, &a), 0);
	io = rec_get(s, &b, sb);
	assert_true(io.r.has_sha && io.entry);
	assert_memory_equal(io.r.sha, sb, KILN_SHA256_LEN);
	assert_int_equal(kiln_id_cmp(&io.entry_id, &b), 0);
	io = rec_get(s, &c, sc);
	assert_true(io.entry);
	assert_int_equal(kiln_id_cmp(&io.entry_id, &c), 0);
	assert_false(rec_get(s, &a, ghost).entry);
	io = rec_get(s, &d, sd);
	assert_true(io.r.has_sha && io.entry);   /* filled in by repair */
	kiln_store_close(s);
}

static void
hex_round_trips_and_refuses_bad_input(void **state)
{
	uint8_t sha[KILN_SHA256_LEN];
	char hex[KILN_SHA256_HEX_LEN + 1];

	(void)state;
	assert_kiln(0, kiln_sha256_from_hex(SHA_ABC, sha));
	kiln_sha256_to_hex(sha, hex);
	assert_string_equal(hex, SHA_ABC);
	assert_kiln(0, kiln_sha256_from_hex(
		"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", sha));
	kiln_sha256_to_hex(sha, hex);
	assert_string_equal(hex, SHA_ABC);
	assert_kiln(KILN_EINVAL, kiln_sha256_from_hex(SHA_ABC "0", sha));
	assert_kiln(KILN_EINVAL, kiln_sha256_from_hex("ba78", sha));
	assert_kiln(KILN_EINVAL, kiln_sha256_from_hex(NULL, sha));
	assert_kiln(KILN_EINVAL, kiln_sha256_from_hex(
		"g a7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", sha));
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(known_answers_by_every_put_path),
		T(large_content_streamed_in_pieces_matches_the_one_shot_digest),
		T(a_writer_expecting_a_sha256_refuses_other_content_and_stores_nothing),
		T(an_old_record_gets_its_sha256_the_first_time_it_is_asked_for),
		T(a_blob_without_a_record_gets_one_dated_by_its_file),
		T(a_corrupt_blob_has_no_sha256),
		T(gc_removes_the_sha256_entry_with_the_blob),
		T(fsck_finds_and_repairs_wrong_sha256_records_and_entries),
		T(hex_round_trips_and_refuses_bad_input),
	};
	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
