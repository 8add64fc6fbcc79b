/* test_batch — many records in one transaction (kiln_batch), the steps
 * database, and KILN_DURABLE_BATCH.
 *
 * KILN_DURABLE_BATCH is checked at the system-call boundary: this program
 * defines syncfs() and fsync() itself, so the store library linked into it
 * calls these (which count, then call libc's). A case arms the counting
 * only around what it measures.
 *
 * The timing case prints figures as TAP comments; it asserts nothing about
 * them. KILN_BATCH_BENCH_N=10000 sets its size (default 300). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"
#include "testutil.h"

/* ---- counting syncfs and fsync ---------------------------------------- */

static struct {
	int armed;
	int nsyncfs;       /* syncfs calls while armed */
	int nfsync;        /* fsync calls while armed, LMDB's own excepted */
	int nobjsync;      /* of those, fsyncs of the store's objects/ */
	int ndbsync;       /* LMDB's own flushes (fsync, fdatasync) while armed */
	int fail_syncfs;   /* the next syncfs fails with EIO */
	int nblobsync;     /* fdatasync of anything but LMDB's files while armed */
	int fail_blobsync; /* the next such fdatasync fails with EIO */
	struct stat synced; /* what the last syncfs was given */
	int ndirops;       /* link, unlink, rename, renameat2 done while armed */
	int nblobstat;     /* lstat of a file under objects/ while armed */
} io;

static int
real_call(const char *name, int fd)
{
	int (*real)(int);

	*(void **)&real = dlsym(RTLD_NEXT, name);
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return real(fd);
}

int
syncfs(int fd)
{
	if (io.armed) {
		io.nsyncfs++;
		fstat(fd, &io.synced);
		if (io.fail_syncfs) {
			io.fail_syncfs = 0;
			errno = EIO;
			return -1;
		}
	}
	return real_call("syncfs", fd);
}

/* LMDB (the store's database) syncs its own files; only the store's blob
 * and folder fsyncs are of interest here. */
/* What fd names (its /proc/self/fd link) into target: the length, or
 * 0 when it cannot be read. */
static size_t
fd_target(int fd, char target[4096])
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, target, 4095)) <= 0)
		return 0;
	target[n] = '\0';
	return (size_t)n;
}

static int
is_db_file(int fd)
{
	char target[4096];

	return fd_target(fd, target) > 0 && strstr(target, "/store/db") != NULL;
}

/* Whether fd is the store's objects/ folder itself. */
static int
is_objects_dir(int fd)
{
	char target[4096];
	size_t n = fd_target(fd, target);

	return n >= 14 && strcmp(target + n - 14, "/store/objects") == 0;
}

int
fsync(int fd)
{
	if (io.armed && !is_db_file(fd)) {
		io.nfsync++;
		io.nobjsync += is_objects_dir(fd);
	} else if (io.armed) {
		io.ndbsync++;
	}
	return real_call("fsync", fd);
}

/* LMDB flushes its data file with fdatasync: a put that commits a
 * transaction shows here. */
int
fdatasync(int fd)
{
	if (io.armed && is_db_file(fd)) {
		io.ndbsync++;
	} else if (io.armed) {
		io.nblobsync++;
		if (io.fail_blobsync) {
			io.fail_blobsync = 0;
			errno = EIO;
			return -1;
		}
	}
	return real_call("fdatasync", fd);
}

/* Directory updates made, for put_move's one rename (KILN_DURABLE_BATCH);
 * a call that fails changed nothing and is not counted. */
static int
count_dir_op(int rv)
{
	if (io.armed && rv == 0)
		io.ndirops++;
	return rv;
}

int
link(const char *from, const char *to)
{
	int (*real)(const char *, const char *);

	*(void **)&real = dlsym(RTLD_NEXT, "link");
	return count_dir_op(real(from, to));
}

int
unlink(const char *path)
{
	int (*real)(const char *);

	*(void **)&real = dlsym(RTLD_NEXT, "unlink");
	return count_dir_op(real(path));
}

int
rename(const char *from, const char *to)
{
	int (*real)(const char *, const char *);

	*(void **)&real = dlsym(RTLD_NEXT, "rename");
	return count_dir_op(real(from, to));
}

int
renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
	int (*real)(int, const char *, int, const char *, unsigned);

	*(void **)&real = dlsym(RTLD_NEXT, "renameat2");
	return count_dir_op(real(fromfd, from, tofd, to, flags));
}

/* Blob files looked at (kiln_store_has lstat's them) while armed. */
int
lstat(const char *path, struct stat *st)
{
	int (*real)(const char *, struct stat *);

	if (io.armed && strstr(path, "/objects/") != NULL)
		io.nblobstat++;
	*(void **)&real = dlsym(RTLD_NEXT, "lstat");
	return real(path, st);
}

static void
io_arm(void)
{
	memset(&io, 0, sizeof io);
	io.armed = 1;
}

/* ---- helpers ----------------------------------------------------------- */

static kiln_batch *
batch_new(void)
{
	kiln_batch *b = NULL;

	assert_kiln(0, kiln_batch_new(&b));
	return b;
}

static void
url_of(char *buf, size_t len, const char *dir, int i)
{
	snprintf(buf, len, "%s/item-%05d.png", dir, i);
}

static kiln_file_rec
file_rec_of(int i)
{
	kiln_file_rec r = {(uint64_t)i * 7, 1700000000000000000LL + i, (uint64_t)i + 100,
	                   1700000000000000001LL + i, {{0}}};

	kiln_id_of_buf(&i, sizeof i, &r.hash);
	return r;
}

static void
assert_index_is(kiln_store *s, const char *profile, const char *url,
                const kiln_id *want)
{
	kiln_id got;
	int rv = kiln_store_index_get(s, profile, url, &got);

	if (rv != 0)
		fail_msg("index %s %s: %s", profile, url, kiln_strerror(rv));
	if (kiln_id_cmp(&got, want) != 0)
		fail_msg("index %s %s names another blob", profile, url);
}

static void
assert_step_is(kiln_store *s, const char *profile, const char *url,
               const void *want, size_t wantlen)
{
	void *data = NULL;
	size_t len = 0;
	int rv = kiln_store_step_get(s, profile, url, &data, &len);

	if (rv != 0)
		fail_msg("step %s %s: %s", profile, url, kiln_strerror(rv));
	if (len != wantlen || (len > 0 && memcmp(data, want, len) != 0))
		fail_msg("step %s %s: %zu bytes read back, %zu expected or other bytes",
		         profile, url, len, wantlen);
	free(data);
}

/* ---- batches ----------------------------------------------------------- */

#define MIXED 1000
#define NBLOBS 40

static void
a_batch_of_1000_mixed_records_commits_and_every_record_reads_back(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	kiln_batch *b = batch_new();
	kiln_id blobs[NBLOBS], got;
	kiln_action *a;
	kiln_file_rec fr;
	char url[64], payload[32];
	size_t skipped = 99;

	for (int i = 0; i < NBLOBS; i++)
		blobs[i] = tu_put_content(s, 1000 + (uint64_t)i, 100 + (size_t)i);
	for (int i = 0; i < MIXED; i++) {
		kiln_id key, out[2] = {blobs[i % NBLOBS], blobs[(i + 1) % NBLOBS]};
		kiln_file_rec r = file_rec_of(i);
		url_of(url, sizeof url, "mixed", i);
		key = tu_key_of(url);
		snprintf(payload, sizeof payload, "payload %d", i);
		switch (i % 4) {
		case 0: assert_kiln(0, kiln_batch_index_set(b, "pc", url, &blobs[i % NBLOBS])); break;
		case 1: assert_kiln(0, kiln_batch_action_put(b, &key, out, 2, payload, strlen(payload))); break;
		case 2: assert_kiln(0, kiln_batch_file_put(b, url, &r)); break;
		case 3: assert_kiln(0, kiln_batch_step_put(b, "pc", url, payload, strlen(payload))); break;
		}
	}
	/* Later records of the batch see earlier ones: applied in order. */
	assert_kiln(0, kiln_batch_index_set(b, "pc", "order/replaced", &blobs[0]));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "order/replaced", &blobs[1]));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "order/deleted", &blobs[0]));
	assert_kiln(0, kiln_batch_index_delete(b, "pc", "order/deleted"));
	assert_kiln(0, kiln_batch_file_put(b, "order/file", &(kiln_file_rec){0}));
	assert_kiln(0, kiln_batch_file_delete(b, "order/file"));
	/* Deleting or touching what is not there is no error. */
	assert_kiln(0, kiln_batch_index_delete(b, "pc", "never/was"));
	assert_kiln(0, kiln_batch_action_touch(b, &(kiln_id){{1, 2, 3}}));
	assert_int_equal(kiln_batch_len(b), MIXED + 8);

	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	assert_int_equal(skipped, 0);
	assert_int_equal(kiln_batch_len(b), 0);

	for (int i = 0; i < MIXED; i++) {
		kiln_file_rec want = file_rec_of(i);
		kiln_id key;
		url_of(url, sizeof url, "mixed", i);
		key = tu_key_of(url);
		snprintf(payload, sizeof payload, "payload %d", i);
		switch (i % 4) {
		case 0: assert_index_is(s, "pc", url, &blobs[i % NBLOBS]); break;
		case 1:
			assert_kiln(0, kiln_store_action_get(s, &key, &a));
			assert_int_equal(a->noutputs, 2);
			assert_memory_equal(a->outputs[1].b, blobs[(i + 1) % NBLOBS].b, 16);
			assert_int_equal(a->len, strlen(payload));
			assert_memory_equal(a->data, payload, a->len);
			kiln_action_free(a);
			break;
		case 2:
			assert_kiln(0, kiln_store_file_get(s, url, &fr));
			assert_memory_equal(&fr, &want, sizeof fr);
			break;
		case 3: assert_step_is(s, "pc", url, payload, strlen(payload)); break;
		}
	}
	assert_index_is(s, "pc", "order/replaced", &blobs[1]);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "order/deleted", &got));
	assert_kiln(KILN_ENOTFOUND, kiln_store_file_get(s, "order/file", &fr));
	/* An empty batch commits nothing, successfully. */
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	kiln_batch_free(b);
	/* blob i is 100 + i bytes */
	tu_assert_fsck_clean(s, "after the mixed batch", NBLOBS,
	                     NBLOBS * 100 + NBLOBS * (NBLOBS - 1) / 2);
	kiln_store_close(s);
}

struct use_time {
	kiln_id id;
	int64_t used_ns;
};

static int
use_time_txn(db_txn *t, void *arg)
{
	struct use_time *u = arg;
	struct rec_blob r;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_BLOBS, u->id.b, 16, &v, &vlen)) != 0 ||
	    (rv = rec_blob_decode(v, vlen, &r)) != 0)
		return rv;
	u->used_ns = r.used_ns;
	return 0;
}

/* The blob's use time in the store's blob records (what gc orders by). */
static int64_t
use_time(kiln_store *s, const kiln_id *id)
{
	struct use_time u = {*id, 0};

	assert_kiln(0, db_read(s->db, use_time_txn, &u));
	return u.used_ns;
}

static void
a_record_naming_a_missing_blob_is_skipped_and_counted_while_the_rest_commit(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_id good = tu_put_content(s, 1, 10), other = tu_put_content(s, 2, 20);
	kiln_id ghost, got, k_half = tu_key_of("half"), k_good = tu_key_of("good");
	kiln_id half[2];
	kiln_batch *b = batch_new();
	kiln_action *a;
	size_t skipped = 0;
	int64_t other_used;

	kiln_id_of_buf("never stored", 12, &ghost);
	half[0] = other;
	half[1] = ghost;
	other_used = use_time(s, &other);
	tu_clock_advance(&clock, 2);
	assert_kiln(0, kiln_batch_index_set(b, "pc", "good", &good));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "ghost", &ghost));
	assert_kiln(0, kiln_batch_action_put(b, &k_half, half, 2, "h", 1));
	assert_kiln(0, kiln_batch_action_put(b, &k_good, &good, 1, "g", 1));
	assert_kiln(0, kiln_batch_step_put(b, "pc", "good", "s", 1));
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	if (skipped != 2)
		fail_msg("2 records name a missing blob, %zu were counted skipped", skipped);
	assert_index_is(s, "pc", "good", &good);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "ghost", &got));
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_get(s, &k_half, &a));
	assert_kiln(0, kiln_store_action_get(s, &k_good, &a));
	kiln_action_free(a);
	assert_step_is(s, "pc", "good", "s", 1);
	/* The skipped action left no trace: its present output was not
	 * marked used. */
	if (use_time(s, &other) != other_used)
		fail_msg("a skipped record refreshed the use time of a blob it named");
	assert_true(use_time(s, &good) > other_used);
	kiln_batch_free(b);
	kiln_store_close(s);
}

static void
commit_on_a_read_only_store_fails_and_leaves_the_batch_for_a_retry(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = tu_put_content(s, 7, 70), got;
	kiln_batch *b = batch_new();
	size_t skipped = 99;

	kiln_store_close(s);
	s = tu_open_store_at(tu_path(state, "store"), KILN_STORE_RDONLY,
	                     KILN_DURABLE_NONE, "read-only");
	assert_kiln(0, kiln_batch_index_set(b, "pc", "x", &a));
	assert_kiln(0, kiln_batch_step_put(b, "pc", "x", "why", 3));
	assert_kiln(0, kiln_batch_file_put(b, "x", &(kiln_file_rec){.size = 1}));
	assert_kiln(KILN_EREADONLY, kiln_store_commit(s, b, &skipped));
	assert_int_equal(skipped, 0);
	assert_int_equal(kiln_batch_len(b), 3);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "x", &got));
	kiln_store_close(s);

	s = tu_open_store_at(tu_path(state, "store"), 0, KILN_DURABLE_NONE, "writable");
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	assert_int_equal(kiln_batch_len(b), 0);
	assert_index_is(s, "pc", "x", &a);
	assert_step_is(s, "pc", "x", "why", 3);
	kiln_batch_free(b);
	kiln_store_close(s);
}

static void
a_batch_bigger_than_the_map_grows_it_and_commits(void **state)
{
	kiln_store_opts o = {.flags = KILN_STORE_CREATE,
	                     .durability = KILN_DURABLE_NONE,
	                     .map_size = 1 << 20};
	kiln_store *s;
	kiln_batch *b = batch_new();
	kiln_id a, ghost;
	struct stat st;
	char url[128];
	size_t big = 512 * 1024, skipped = 99;
	char *payload = malloc(big);
	const int n = 20000;

	assert_non_null(payload);
	tu_fill64(payload, big, 3);
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &s));
	a = tu_put_content(s, 1, 1);
	/* First, so that every run of the commit meets it, however often the
	 * growing map makes it rerun: it must be counted once. */
	kiln_id_of_buf("ghost", 5, &ghost);
	assert_kiln(0, kiln_batch_index_set(b, "pc", "ghost", &ghost));
	for (int i = 0; i < n; i++) {
		snprintf(url, sizeof url, "textures/level%03d/a-rather-long-name-%06d.png",
		         i % 100, i);
		assert_kiln(0, kiln_batch_index_set(b, "pc", url, &a));
	}
	for (int i = 0; i < 8; i++) {
		snprintf(url, sizeof url, "big/%d", i);
		assert_kiln(0, kiln_batch_step_put(b, "pc", url, payload, big));
	}
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	assert_int_equal(skipped, 1);
	assert_int_equal(stat(tu_path(state, "store/db/data.mdb"), &st), 0);
	if (st.st_size <= (off_t)o.map_size * 4)
		fail_msg("data.mdb is %lld bytes: the batch never outgrew the map",
		         (long long)st.st_size);
	snprintf(url, sizeof url, "textures/level%03d/a-rather-long-name-%06d.png",
	         (n - 1) % 100, n - 1);
	assert_index_is(s, "pc", url, &a);
	assert_step_is(s, "pc", "big/7", payload, big);
	free(payload);
	kiln_batch_free(b);
	kiln_store_close(s);
}

static void
queueing_checks_names_and_sizes_like_the_single_calls(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_batch *b = batch_new();
	kiln_id a = tu_put_content(s, 1, 1), key = tu_key_of("k");
	static const char byte = 'x';
	const size_t over = REC_PAYLOAD_MAX + (size_t)1;

	assert_kiln(KILN_EINVAL, kiln_batch_index_set(b, "pc", "../up", &a));
	assert_kiln(KILN_EINVAL, kiln_batch_index_delete(b, "p c", "x"));
	assert_kiln(KILN_EINVAL, kiln_batch_file_put(b, "/abs", &(kiln_file_rec){0}));
	assert_kiln(KILN_EINVAL, kiln_batch_file_delete(b, ""));
	assert_kiln(KILN_EINVAL, kiln_batch_step_put(b, "pc", "a//b", "x", 1));
	assert_kiln(KILN_EINVAL, kiln_batch_action_put(b, &key, NULL, 1, NULL, 0));
	/* Oversized payloads are refused before a byte is read. */
	assert_kiln(KILN_ERANGE, kiln_batch_step_put(b, "pc", "x", &byte, over));
	assert_kiln(KILN_ERANGE, kiln_batch_action_put(b, &key, &a, 1, &byte, over));
	assert_kiln(KILN_ERANGE, kiln_store_step_put(s, "pc", "x", &byte, over));
	assert_kiln(KILN_ERANGE, kiln_store_action_put(s, &key, &a, 1, &byte, over));
	assert_int_equal(kiln_batch_len(b), 0);
	kiln_batch_free(b);
	kiln_store_close(s);
}

/* ---- steps ------------------------------------------------------------- */

static void
steps_round_trip(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	size_t big = 3u << 20, len = 1;
	char *payload = malloc(big);
	void *data = NULL;

	assert_non_null(payload);
	tu_fill64(payload, big, 9);
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_get(s, "pc", "a/b", &data, &len));
	assert_kiln(0, kiln_store_step_put(s, "pc", "a/b", "first", 5));
	assert_step_is(s, "pc", "a/b", "first", 5);
	assert_kiln(0, kiln_store_step_put(s, "pc", "a/b", payload, big));
	assert_step_is(s, "pc", "a/b", payload, big);
	/* Profiles are separate, and an empty payload is a payload. */
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_get(s, "mobile", "a/b", &data, &len));
	assert_kiln(0, kiln_store_step_put(s, "mobile", "a/b", NULL, 0));
	assert_step_is(s, "mobile", "a/b", NULL, 0);
	assert_kiln(0, kiln_store_step_delete(s, "pc", "a/b"));
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_get(s, "pc", "a/b", &data, &len));
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_delete(s, "pc", "a/b"));
	assert_step_is(s, "mobile", "a/b", NULL, 0);
	assert_kiln(KILN_EINVAL, kiln_store_step_put(s, "pc", "/abs", "x", 1));
	assert_kiln(KILN_EINVAL, kiln_store_step_get(s, "", "a", &data, &len));
	/* Reopened, it is still there. */
	kiln_store_close(s);
	s = tu_open_store(state, KILN_DURABLE_FSYNC);
	assert_step_is(s, "mobile", "a/b", NULL, 0);
	free(payload);
	kiln_store_close(s);
}

struct garble {
	const void *key;
	size_t klen;
};

static int
garble_txn(db_txn *t, void *arg)
{
	static const uint8_t junk[2] = {REC_VERSION, 0x01};
	struct garble *g = arg;

	return db_put(t, DB_STEPS, g->key, g->klen, junk, sizeof junk);
}

static void
fsck_reports_and_drops_undecodable_step_records(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	struct tu_fsck_problems ps;
	kiln_fsck_stats st;
	char key[INDEX_KEY_MAX];
	struct garble g = {key, 0};
	int n = index_key("pc", "s/one", key);

	assert_true(n > 0);
	g.klen = (size_t)n;
	assert_kiln(0, kiln_store_step_put(s, "pc", "s/one", "1", 1));
	assert_kiln(0, kiln_store_step_put(s, "pc", "s/two", "2", 1));
	assert_kiln(0, db_write(s->db, garble_txn, &g));

	tu_fsck_run(s, 0, &ps, &st);
	if (ps.n != 1 || ps.p[0].kind != KILN_FSCK_BAD_RECORD ||
	    strcmp(ps.p[0].where, "step pc s/one") != 0)
		fail_msg("fsck should report one BAD_RECORD at \"step pc s/one\":%s",
		         tu_fsck_describe(&ps));
	tu_assert_stat("fsck", st, bad_records, 1);
	tu_fsck_run(s, 1, &ps, &st);
	tu_assert_stat("fsck --repair", st, repaired, 1);
	tu_assert_fsck_clean(s, "after repair", 0, 0);
	assert_step_is(s, "pc", "s/two", "2", 1);
	kiln_store_close(s);
}

/* ---- KILN_DURABLE_BATCH ------------------------------------------------ */

/* Put one blob by each put path; returns their ids in ids[5]. */
static void
put_every_way(void **state, kiln_store *s, uint64_t seed, kiln_id ids[5])
{
	char buf[3000];
	const char *path = tu_path(state, "input-%llu", (unsigned long long)seed);
	int fd;

	for (int i = 0; i < 5; i++) {
		tu_fill(buf, sizeof buf, seed * 10 + (uint64_t)i);
		switch (i) {
		case 0: assert_kiln(0, kiln_store_put_buf(s, buf, sizeof buf, &ids[i])); break;
		case 1:
			assert_true((fd = tu_memfd_of(buf, sizeof buf)) >= 0);
			assert_kiln(0, kiln_store_put_fd(s, fd, &ids[i]));
			close(fd);
			break;
		case 2:
			tu_write_file(path, buf, sizeof buf);
			assert_kiln(0, kiln_store_put_path(s, path, &ids[i]));
			break;
		case 3:
			tu_write_file(path, buf, sizeof buf);
			assert_kiln(0, kiln_store_put_move(s, path, &ids[i]));
			break;
		case 4:
			assert_kiln(0, tu_put_by_writer(s, buf, sizeof buf, 1000, NULL, &ids[i]));
			break;
		}
	}
}

static void
durable_batch_puts_skip_fsync_and_the_next_commit_syncs_them(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	kiln_batch *b = batch_new();
	kiln_id ids[5], more[5];
	size_t skipped;

	io_arm();
	put_every_way(state, s, 1, ids);
	if (io.nfsync != 0 || io.nsyncfs != 0 || io.nblobsync != 0)
		fail_msg("5 puts with KILN_DURABLE_BATCH made %d fsyncs, %d fdatasyncs "
		         "and %d syncfs calls; expected none", io.nfsync, io.nblobsync,
		         io.nsyncfs);
	/* nor a database transaction each: their use records wait for the
	 * next commit */
	if (io.ndbsync != 0)
		fail_msg("5 puts with KILN_DURABLE_BATCH flushed the database %d "
		         "times; expected none", io.ndbsync);
	for (int i = 0; i < 5; i++) {
		char url[16];
		snprintf(url, sizeof url, "u%d", i);
		assert_kiln(0, kiln_batch_index_set(b, "pc", url, &ids[i]));
	}
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	/* a few blobs: each one's data, then its folder's and objects/'s
	 * names, never the whole file system's dirty pages */
	if (io.nblobsync != 5 || io.nsyncfs != 0)
		fail_msg("a batch commit after 5 unsynced puts made %d fdatasyncs and "
		         "%d syncfs calls, expected 5 and 0", io.nblobsync, io.nsyncfs);
	if (io.nfsync < 2)
		fail_msg("a batch commit after 5 unsynced puts fsynced %d folders, "
		         "expected their shards' and objects/", io.nfsync);
	/* Nothing put since: nothing to sync. */
	io_arm();
	assert_kiln(0, kiln_store_step_put(s, "pc", "u0", "x", 1));
	assert_kiln(0, kiln_store_index_set(s, "pc", "again", &ids[0]));
	assert_int_equal(io.nblobsync + io.nsyncfs + io.nfsync, 0);

	/* A failed sync fails the commit, which commits nothing, and the
	 * puts stay pending for the next one, a whole syncfs. */
	put_every_way(state, s, 2, more);
	io.fail_blobsync = 1;
	assert_kiln(KILN_EIO, kiln_store_index_set(s, "pc", "more", &more[0]));
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "more", &ids[0]));
	assert_int_equal(io.nsyncfs, 0);
	assert_kiln(0, kiln_store_index_set(s, "pc", "more", &more[0]));
	assert_int_equal(io.nsyncfs, 1);
	assert_kiln(0, kiln_store_file_put(s, "f", &(kiln_file_rec){0}));
	assert_int_equal(io.nsyncfs, 1);
	io.armed = 0;
	kiln_batch_free(b);
	kiln_store_close(s);
}

static void
many_unsynced_puts_are_synced_with_one_syncfs(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	kiln_id id;
	struct stat objects;

	assert_int_equal(stat(tu_path(state, "store/objects"), &objects), 0);
	io_arm();
	for (int i = 0; i < STORE_SYNC_EACH_MAX + 1; i++)
		id = tu_put_content(s, (uint64_t)i + 100, 200);
	assert_kiln(0, kiln_store_index_set(s, "pc", "last", &id));
	if (io.nsyncfs != 1 || io.nblobsync != 0)
		fail_msg("a commit after %d unsynced puts made %d syncfs calls and %d "
		         "fdatasyncs, expected 1 and 0", STORE_SYNC_EACH_MAX + 1,
		         io.nsyncfs, io.nblobsync);
	if (io.synced.st_dev != objects.st_dev || io.synced.st_ino != objects.st_ino)
		fail_msg("syncfs was given an fd that is not the store's objects/");
	/* and as many as it syncs one by one, one by one */
	io_arm();
	for (int i = 0; i < STORE_SYNC_EACH_MAX; i++)
		id = tu_put_content(s, (uint64_t)i + 200, 200);
	assert_kiln(0, kiln_store_index_set(s, "pc", "last", &id));
	assert_int_equal(io.nsyncfs, 0);
	assert_int_equal(io.nblobsync, STORE_SYNC_EACH_MAX);
	io.armed = 0;
	kiln_store_close(s);
}

/* objects/ holds only the 256 shard folders' names: a commit syncs it
 * when one of its blobs made its shard, not every time. */
static void
objects_is_synced_only_after_a_new_shard(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	char bufs[40][24];
	kiln_id ids[40], id;
	int a = -1, b = -1;

	/* two contents that land in one shard (same first hash byte) */
	for (int i = 0; i < 40 && b < 0; i++) {
		snprintf(bufs[i], sizeof bufs[i], "shard-%d", i);
		kiln_id_of_buf(bufs[i], strlen(bufs[i]), &ids[i]);
		for (int k = 0; k < i && b < 0; k++)
			if (ids[k].b[0] == ids[i].b[0]) {
				a = k;
				b = i;
			}
	}
	assert_true(b >= 0);
	io_arm();
	assert_kiln(0, kiln_store_put_buf(s, bufs[a], strlen(bufs[a]), &id));
	assert_kiln(0, kiln_store_index_set(s, "pc", "a", &id));
	assert_int_equal(io.nblobsync, 1);
	assert_int_equal(io.nobjsync, 1);   /* the new shard's name */
	io_arm();
	assert_kiln(0, kiln_store_put_buf(s, bufs[b], strlen(bufs[b]), &id));
	assert_kiln(0, kiln_store_index_set(s, "pc", "b", &id));
	assert_int_equal(io.nblobsync, 1);
	assert_int_equal(io.nfsync, 1);     /* its shard folder, for its name */
	assert_int_equal(io.nobjsync, 0);
	io.armed = 0;
	kiln_store_close(s);
}

/* gc (another process's, with no grace) may remove a blob between its
 * put and the next commit: the sync before that commit has nothing of it
 * to sync, and the commit skips the records naming it, counted, while the
 * rest commit (issue 36: the sync failed the whole commit, "not found"). */
static void
a_blob_gc_took_before_the_commit_skips_its_records_not_the_commit(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	kiln_id gone, kept, got;
	kiln_batch *b;
	size_t skipped = 99;

	assert_kiln(0, kiln_store_put_buf(s, "taken by gc", 11, &gone));
	assert_kiln(0, kiln_store_put_buf(s, "still here", 10, &kept));
	if (unlink(tu_blob_path(state, &gone)) != 0)
		fail_msg("removing the blob as gc would: %s", strerror(errno));
	assert_kiln(0, kiln_batch_new(&b));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "gone", &gone));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "kept", &kept));
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	assert_int_equal(skipped, 1);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "gone", &got));
	assert_kiln(0, kiln_store_index_get(s, "pc", "kept", &got));
	assert_true(kiln_id_cmp(&got, &kept) == 0);
	kiln_batch_free(b);
	kiln_store_close(s);
}

static void
other_durabilities_never_syncfs_and_fsync_keeps_its_fsyncs(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	kiln_id ids[5];

	io_arm();
	put_every_way(state, s, 3, ids);
	/* Proves the counting sees the store's fsyncs at all. */
	if (io.nfsync < 5)
		fail_msg("5 puts with KILN_DURABLE_FSYNC made only %d fsyncs", io.nfsync);
	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &ids[0]));
	kiln_store_close(s);
	s = tu_open_store_at(tu_path(state, "store"), 0, KILN_DURABLE_NONE, "none");
	io_arm();
	put_every_way(state, s, 4, ids);
	assert_kiln(0, kiln_store_index_set(s, "pc", "y", &ids[0]));
	assert_int_equal(io.nfsync, 0);
	assert_int_equal(io.nsyncfs, 0);
	io.armed = 0;
	kiln_store_close(s);
}

static void
expect_blob_is(void **state, const kiln_id *id, const struct stat *want, const char *what)
{
	struct stat st;

	if (stat(tu_blob_path(state, id), &st) != 0)
		fail_msg("%s: the blob is not in objects/: %s", what, strerror(errno));
	if (st.st_ino != want->st_ino)
		fail_msg("%s: the blob is inode %lu, expected the moved file's %lu",
		         what, (unsigned long)st.st_ino, (unsigned long)want->st_ino);
	if ((st.st_mode & 07777) != 0444)
		fail_msg("%s: the blob's mode is %o, expected 0444", what, st.st_mode & 07777);
}

/* A build publishes every output with put_move: in batch mode the file goes
 * to its object name with one rename, no link into tmp/ and back. */
static void
batch_put_move_is_one_rename_and_keeps_the_inode(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	const char *path = tu_path(state, "out");
	char buf[5000], path2[4096];
	struct timespec old[2];
	struct stat first, second, st;
	kiln_id id, again, want;

	tu_fill(buf, sizeof buf, 77);
	kiln_id_of_buf(buf, sizeof buf, &want);
	tu_write_file(path, buf, sizeof buf);
	assert_int_equal(0, stat(path, &first));
	io_arm();
	assert_kiln(0, kiln_store_put_move(s, path, &id));
	if (io.ndirops != 1)
		fail_msg("a batch put_move made %d directory updates (link, unlink, "
		         "rename), expected 1", io.ndirops);
	io.armed = 0;
	assert_memory_equal(id.b, want.b, 16);
	assert_int_equal(-1, lstat(path, &st));
	expect_blob_is(state, &id, &first, "first put");
	assert_kiln(0, kiln_store_verify(s, &id));

	/* the same bytes again: the published blob stays, the file goes, and
	 * the blob's mtime is fresh (gc goes by it until the next commit) */
	clock_gettime(CLOCK_REALTIME, &old[0]);
	old[0].tv_sec -= 7200;
	old[1] = old[0];
	assert_int_equal(0, utimensat(AT_FDCWD, tu_blob_path(state, &id), old, 0));
	snprintf(path2, sizeof path2, "%s", tu_path(state, "out2"));
	tu_write_file(path2, buf, sizeof buf);
	assert_kiln(0, kiln_store_put_move(s, path2, &again));
	assert_memory_equal(again.b, want.b, 16);
	assert_int_equal(-1, lstat(path2, &st));
	expect_blob_is(state, &id, &first, "a second put of the same bytes");
	assert_int_equal(0, stat(tu_blob_path(state, &id), &st));
	if (st.st_mtim.tv_sec < old[0].tv_sec + 7000)
		fail_msg("a put of bytes already published left the blob's 2 h old mtime");

	/* a damaged blob (another size) is replaced by the moved file */
	tu_truncate_blob(tu_blob_path(state, &id), 100);
	tu_write_file(path2, buf, sizeof buf);
	assert_int_equal(0, stat(path2, &second));
	assert_kiln(0, kiln_store_put_move(s, path2, &again));
	expect_blob_is(state, &id, &second, "a put over a damaged blob");
	assert_kiln(0, kiln_store_verify(s, &id));

	/* a file written hours ago gets a fresh mtime: until the next commit
	 * records its use, gc judges it by that */
	tu_fill(buf, sizeof buf, 78);
	tu_write_file(path2, buf, sizeof buf);
	assert_int_equal(0, utimensat(AT_FDCWD, path2, old, 0));
	assert_kiln(0, kiln_store_put_move(s, path2, &again));
	assert_int_equal(0, stat(tu_blob_path(state, &again), &st));
	if (st.st_mtim.tv_sec < old[0].tv_sec + 7000)
		fail_msg("a moved file written 2 h ago kept its mtime in objects/");
	tu_assert_store_sound(s, "after batch put_moves", NULL, NULL);
	kiln_store_close(s);
}

/* A build's commit names each output three times: its put's use record,
 * the action result and the index entry. The blob is looked at once. */
static void
a_commit_looks_at_each_blob_once_however_many_records_name_it(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_BATCH);
	const char *path = tu_path(state, "out");
	kiln_id id, key = tu_key_of("step"), got;
	kiln_batch *b = batch_new();
	char buf[300];
	size_t skipped = 1;

	tu_fill(buf, sizeof buf, 5);
	tu_write_file(path, buf, sizeof buf);
	assert_kiln(0, kiln_store_put_move(s, path, &id));
	assert_kiln(0, kiln_batch_action_put(b, &key, &id, 1, "r", 1));
	assert_kiln(0, kiln_batch_index_set(b, "pc", "url", &id));
	io_arm();
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	io.armed = 0;
	assert_int_equal(skipped, 0);
	if (io.nblobstat != 1)
		fail_msg("a commit of a put, an action and an index entry naming one "
		         "blob looked at its file %d times, expected 1", io.nblobstat);
	assert_kiln(0, kiln_store_index_get(s, "pc", "url", &got));
	assert_memory_equal(got.b, id.b, 16);
	tu_assert_store_sound(s, "after the commit", NULL, NULL);
	kiln_batch_free(b);
	kiln_store_close(s);
}

/* ---- gc ---------------------------------------------------------------- */

static void
gc_keeps_blobs_named_by_committed_batch_records(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_BATCH, &clock);
	kiln_id indexed = tu_put_content(s, 1, 100), output = tu_put_content(s, 2, 200);
	kiln_id unnamed = tu_put_content(s, 3, 300), key = tu_key_of("action");
	kiln_gc_opts o = {.max_size = 0, .action_max_age_s = TU_AGE_FOREVER, .grace_s = 0};
	kiln_gc_stats st;
	kiln_batch *b = batch_new();

	assert_kiln(0, kiln_batch_index_set(b, "pc", "kept", &indexed));
	assert_kiln(0, kiln_batch_action_put(b, &key, &output, 1, "r", 1));
	/* A step's payload is opaque: an id inside it roots nothing. */
	assert_kiln(0, kiln_batch_step_put(b, "pc", "kept", unnamed.b, 16));
	assert_kiln(0, kiln_store_commit(s, b, NULL));
	tu_clock_advance(&clock, 2); /* every use is now past grace 0 */
	assert_kiln(0, kiln_store_gc(s, &o, &st));
	tu_assert_stat("gc", st, removed_blobs, 1);
	assert_kiln(0, kiln_store_verify(s, &indexed));
	assert_kiln(0, kiln_store_verify(s, &output));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &unnamed, NULL));
	tu_assert_fsck_clean(s, "after gc", 2, 300);
	kiln_batch_free(b);
	kiln_store_close(s);
}

/* ---- timing (figures only) ---------------------------------------------- */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
timing_single_commits_against_one_batch(void **state)
{
	const char *e = getenv("KILN_BATCH_BENCH_N");
	int n = e != NULL && *e != '\0' ? atoi(e) : 300;
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	kiln_batch *b = batch_new();
	kiln_id a = tu_put_content(s, 1, 100);
	char url[64];
	double t0, single, batch;

	t0 = now_s();
	for (int i = 0; i < n; i++) {
		url_of(url, sizeof url, "single", i);
		assert_kiln(0, kiln_store_index_set(s, "pc", url, &a));
	}
	single = now_s() - t0;
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		url_of(url, sizeof url, "batch", i);
		assert_kiln(0, kiln_batch_index_set(b, "pc", url, &a));
	}
	assert_kiln(0, kiln_store_commit(s, b, NULL));
	batch = now_s() - t0;
	printf("# %d index sets, KILN_DURABLE_FSYNC: one txn each %.3f s "
	       "(%.0f/s), one batch %.3f s (%.0f/s), %.0fx\n", n, single,
	       n / single, batch, n / batch, single / batch);
	fflush(stdout);
	kiln_batch_free(b);
	kiln_store_close(s);
}

/* The table of blobs a commit has touched is sized from a guess (a
 * touched record's outputs count one); past it, it grows instead of
 * filling, when every miss would walk all of it. */
static void
the_seen_blobs_table_grows_past_its_guess_and_forgets_none(void **state)
{
	struct blob_seen seen;
	kiln_id id;

	(void)state;
	blob_seen_init(&seen, 1);
	for (uint32_t i = 0; i < 100000; i++) {
		kiln_id_of_buf(&i, sizeof i, &id);
		blob_seen_add(&seen, &id);
	}
	assert_int_equal(seen.n, 100000);
	assert_true(seen.n * 2 <= seen.cap);
	for (uint32_t i = 0; i < 100000; i++) {
		kiln_id_of_buf(&i, sizeof i, &id);
		if (!blob_seen_find(&seen, &id))
			fail_msg("blob %u of 100000 forgotten", i);
	}
	for (uint32_t i = 100000; i < 101000; i++) {
		kiln_id_of_buf(&i, sizeof i, &id);
		assert_false(blob_seen_find(&seen, &id));
	}
	blob_seen_free(&seen);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(a_batch_of_1000_mixed_records_commits_and_every_record_reads_back),
		T(a_record_naming_a_missing_blob_is_skipped_and_counted_while_the_rest_commit),
		T(commit_on_a_read_only_store_fails_and_leaves_the_batch_for_a_retry),
		T(a_batch_bigger_than_the_map_grows_it_and_commits),
		T(queueing_checks_names_and_sizes_like_the_single_calls),
		T(steps_round_trip),
		T(fsck_reports_and_drops_undecodable_step_records),
		T(durable_batch_puts_skip_fsync_and_the_next_commit_syncs_them),
		T(many_unsynced_puts_are_synced_with_one_syncfs),
		T(objects_is_synced_only_after_a_new_shard),
		T(a_blob_gc_took_before_the_commit_skips_its_records_not_the_commit),
		T(other_durabilities_never_syncfs_and_fsync_keeps_its_fsyncs),
		T(batch_put_move_is_one_rename_and_keeps_the_inode),
		T(a_commit_looks_at_each_blob_once_however_many_records_name_it),
		T(gc_keeps_blobs_named_by_committed_batch_records),
		T(timing_single_commits_against_one_batch),
		T(the_seen_blobs_table_grows_past_its_guess_and_forgets_none),
	};
	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
