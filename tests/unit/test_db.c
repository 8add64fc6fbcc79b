/* test_db — the content database: index, actions, file records, map growth,
 * record versions, and opening folders that are or are not stores.
 *
 * Like bench_store, this reaches below the store once with lmdb.h: to make
 * a store look like one written before a database was added. */
#include <dirent.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_int.h"
#include "testutil.h"

static kiln_id
put_text(kiln_store *s, const char *text)
{
	kiln_id id;
	int rv = kiln_store_put_buf(s, text, strlen(text), &id);

	if (rv != 0)
		fail_msg("put '%s': %s", text, kiln_strerror(rv));
	return id;
}

static void
index_set_get_delete(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	kiln_id a = put_text(s, "A"), b = put_text(s, "B"), got;

	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/hero", &a));
	assert_kiln(0, kiln_store_index_set(s, "mobile", "sprites/hero", &b));
	assert_kiln(0, kiln_store_index_get(s, "pc", "sprites/hero", &got));
	assert_memory_equal(got.b, a.b, 16);
	assert_kiln(0, kiln_store_index_get(s, "mobile", "sprites/hero", &got));
	assert_memory_equal(got.b, b.b, 16);
	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/hero", &b));
	assert_kiln(0, kiln_store_index_get(s, "pc", "sprites/hero", &got));
	assert_memory_equal(got.b, b.b, 16);
	assert_kiln(0, kiln_store_index_delete(s, "pc", "sprites/hero"));
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "sprites/hero", &got));
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_delete(s, "pc", "sprites/hero"));
	kiln_store_close(s);
}

static void
index_never_names_a_missing_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id ghost, got;

	kiln_id_of_buf("not stored", 10, &ghost);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_set(s, "pc", "a", &ghost));
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "a", &got));
	kiln_store_close(s);
}

static void
index_refuses_bad_names(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = put_text(s, "A");

	assert_kiln(KILN_EINVAL, kiln_store_index_set(s, "pc", "../etc/passwd", &a));
	assert_kiln(KILN_EINVAL, kiln_store_index_set(s, "pc", "/abs", &a));
	assert_kiln(KILN_EINVAL, kiln_store_index_set(s, "p/c", "ok", &a));
	assert_kiln(KILN_EINVAL, kiln_store_index_set(s, "", "ok", &a));
	assert_kiln(KILN_EINVAL, kiln_store_index_get(s, "pc", "a\nb", &a));
	kiln_store_close(s);
}

struct seen {
	char items[16][128];
	int n;
	int stop_after;
};

static int
collect(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	struct seen *s = arg;

	(void)id;
	snprintf(s->items[s->n++], 128, "%s:%s", profile, url);
	return s->stop_after && s->n == s->stop_after ? 42 : 0;
}

static void
index_lists_by_profile_and_prefix_in_order(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = put_text(s, "A");
	struct seen seen = {0};

	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/b", &a));
	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/a", &a));
	assert_kiln(0, kiln_store_index_set(s, "pc", "shaders/x", &a));
	assert_kiln(0, kiln_store_index_set(s, "pcx", "sprites/c", &a));
	assert_kiln(0, kiln_store_index_set(s, "mobile", "sprites/a", &a));

	assert_kiln(0, kiln_store_index_list(s, "pc", "sprites/", collect, &seen));
	assert_int_equal(seen.n, 2);
	assert_string_equal(seen.items[0], "pc:sprites/a");
	assert_string_equal(seen.items[1], "pc:sprites/b");

	memset(&seen, 0, sizeof seen);
	assert_kiln(0, kiln_store_index_list(s, NULL, "sprites/", collect, &seen));
	assert_int_equal(seen.n, 4);
	assert_string_equal(seen.items[0], "mobile:sprites/a");
	assert_string_equal(seen.items[3], "pcx:sprites/c");

	memset(&seen, 0, sizeof seen);
	assert_kiln(0, kiln_store_index_list(s, "pc", NULL, collect, &seen));
	assert_int_equal(seen.n, 3);

	memset(&seen, 0, sizeof seen);
	seen.stop_after = 2;
	assert_int_equal(kiln_store_index_list(s, NULL, NULL, collect, &seen), 42);
	assert_int_equal(seen.n, 2);
	kiln_store_close(s);
}

static void
actions_round_trip_and_keep_their_creation_time(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_FSYNC, &clock);
	kiln_id outs[2] = {put_text(s, "out1"), put_text(s, "out2")}, key, ghost;
	kiln_action *a;
	int64_t created, used;

	kiln_id_of_buf("action key", 10, &key);
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_get(s, &key, &a));
	assert_kiln(0, kiln_store_action_put(s, &key, outs, 2, "payload", 7));
	assert_kiln(0, kiln_store_action_get(s, &key, &a));
	assert_memory_equal(a->key.b, key.b, 16);
	assert_int_equal(a->noutputs, 2);
	assert_memory_equal(a->outputs[1].b, outs[1].b, 16);
	assert_int_equal(a->len, 7);
	assert_memory_equal(a->data, "payload", 7);
	created = a->created_ns;
	used = a->used_ns;
	kiln_action_free(a);

	tu_clock_advance(&clock, 2);
	assert_kiln(0, kiln_store_action_touch(s, &key));
	assert_kiln(0, kiln_store_action_get(s, &key, &a));
	assert_true(a->used_ns > used);
	kiln_action_free(a);

	assert_kiln(0, kiln_store_action_put(s, &key, outs, 1, NULL, 0));
	assert_kiln(0, kiln_store_action_get(s, &key, &a));
	assert_int_equal(a->created_ns, created);
	assert_int_equal(a->noutputs, 1);
	assert_int_equal(a->len, 0);
	kiln_action_free(a);

	kiln_id_of_buf("ghost", 5, &ghost);
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_put(s, &key, &ghost, 1, NULL, 0));
	assert_kiln(0, kiln_store_action_delete(s, &key));
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_get(s, &key, &a));
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_touch(s, &key));
	kiln_store_close(s);
}

static void
file_records_round_trip(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_file_rec r = {12345, 1700000000123456789LL, 987654, 1700000001000000001LL, {{0}}};
	kiln_file_rec got;

	kiln_id_of_buf("content", 7, &r.hash);
	assert_kiln(0, kiln_store_file_put(s, "art/hero.png", &r));
	assert_kiln(0, kiln_store_file_get(s, "art/hero.png", &got));
	assert_memory_equal(&got, &r, sizeof r);
	assert_kiln(KILN_EINVAL, kiln_store_file_put(s, "../x", &r));
	assert_kiln(0, kiln_store_file_delete(s, "art/hero.png"));
	assert_kiln(KILN_ENOTFOUND, kiln_store_file_get(s, "art/hero.png", &got));
	kiln_store_close(s);
}

/* A store whose LMDB map starts at 1 MiB, so that writing a few MiB of
 * records makes it grow (and move). */
static const kiln_store_opts small_map = {.flags = KILN_STORE_CREATE,
                                          .durability = KILN_DURABLE_NONE,
                                          .map_size = 1 << 20};

/* The URL of the k-th index record the tests below write. */
static void
texture_url(char *url, size_t len, int k)
{
	snprintf(url, len, "textures/level%03d/a-rather-long-name-%06d.png", k % 100, k);
}

/* Set index records 0..n-1 (profile "pc") to id, per records a batch. */
static void
index_fill(kiln_store *s, int n, int per, const kiln_id *id)
{
	char url[200];

	for (int i = 0; i < n; i += per) {
		kiln_batch *b;
		assert_kiln(0, kiln_batch_new(&b));
		for (int k = i; k < i + per && k < n; k++) {
			texture_url(url, sizeof url, k);
			assert_kiln(0, kiln_batch_index_set(b, "pc", url, id));
		}
		assert_kiln(0, kiln_store_commit(s, b, NULL));
		kiln_batch_free(b);
	}
}

/* Read index records 0..n-1 (mapping their pages). */
static void
index_read_all(kiln_store *s, int n)
{
	char url[200];
	kiln_id got;

	for (int i = 0; i < n; i++) {
		texture_url(url, sizeof url, i);
		assert_kiln(0, kiln_store_index_get(s, "pc", url, &got));
	}
}

static void
map_grows_past_its_initial_size(void **state)
{
	kiln_store_opts o = small_map;
	kiln_store *s;
	kiln_id a, got;
	struct stat st;
	char url[200];
	const int n = 20000;

	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &s));
	a = put_text(s, "A");
	for (int i = 0; i < n; i++) {
		texture_url(url, sizeof url, i);
		assert_kiln(0, kiln_store_index_set(s, "pc", url, &a));
	}
	assert_int_equal(stat(tu_path(state, "store/db/data.mdb"), &st), 0);
	if (st.st_size <= (off_t)o.map_size)
		fail_msg("data.mdb is %lld bytes: never grew past the 1 MiB map",
		         (long long)st.st_size);
	kiln_store_close(s);
	/* Reopening with the small size still sees everything. */
	o.flags = 0;
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &s));
	texture_url(url, sizeof url, n - 1);
	assert_kiln(0, kiln_store_index_get(s, "pc", url, &got));
	assert_memory_equal(got.b, a.b, 16);
	kiln_store_close(s);
}

/* The resident file-backed memory of this process, in KiB (-1: unknown). */
static long
rss_file_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "RssFile: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* A store at "store" opened with o, holding n index records naming blob
 * *a, every one read once: several MiB of its pages are mapped. */
static kiln_store *
mapped_store(void **state, const kiln_store_opts *o, int n, kiln_id *a)
{
	kiln_store *s;

	assert_kiln(0, kiln_store_open(tu_path(state, "store"), o, &s));
	*a = put_text(s, "A");
	index_fill(s, n, 1000, a);
	index_read_all(s, n);
	return s;
}

/* RssFile (KiB) before and after fn(s); the case is skipped where this
 * kernel does not say. */
static void
rss_around(kiln_store *s, void (*fn)(kiln_store *), long *before, long *after)
{
	*before = rss_file_kib();
	fn(s);
	*after = rss_file_kib();
	if (*before < 0 || *after < 0)
		skip();
}

/* Every page a long-running daemon read stays mapped until the store hands
 * the mappings back; afterwards the records still read (the pages fault in
 * again). The map starts small so that it has moved (grown) before. */
static void
unmapping_pages_shrinks_the_resident_set_and_keeps_the_data(void **state)
{
	kiln_id a, got;
	char url[200];
	const int n = 40000;
	kiln_store *s = mapped_store(state, &small_map, n, &a);
	long before, after;

	rss_around(s, kiln_store_unmap_pages, &before, &after);
	/* ~40,000 records of ~90 bytes: several MiB of pages */
	if (before - after < 2048)
		fail_msg("RssFile %ld KiB before, %ld KiB after: the database's "
		         "pages were not unmapped", before, after);
	for (int i = 0; i < n; i += 997) {
		texture_url(url, sizeof url, i);
		assert_kiln(0, kiln_store_index_get(s, "pc", url, &got));
		assert_memory_equal(got.b, a.b, 16);
	}
	kiln_store_close(s);
}

/* A commit of thousands of records spread over a big database would map
 * every leaf it passes through before it ends (the kernel maps 16
 * neighbouring pages a fault); past the allowance (1 MiB here) it hands
 * them back as it goes, so what stays mapped after it is a small part of
 * the database. */
static void
a_big_commit_hands_its_pages_back_as_it_goes(void **state)
{
	kiln_store_opts o = small_map;
	kiln_store *s;
	kiln_batch *b;
	kiln_id a, c;
	char url[200];
	const int n = 100000;
	long before, after;

	o.mapped_max = 1 << 20;
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &s));
	a = put_text(s, "A");
	c = put_text(s, "C");
	index_fill(s, n, 5000, &a);
	/* one record in every 25, across the whole key range */
	assert_kiln(0, kiln_batch_new(&b));
	for (int k = 0; k < n; k += 25) {
		texture_url(url, sizeof url, k);
		assert_kiln(0, kiln_batch_index_set(b, "pc", url, &c));
	}
	kiln_store_unmap_pages(s);
	before = rss_file_kib();
	assert_kiln(0, kiln_store_commit(s, b, NULL));
	after = rss_file_kib();
	kiln_batch_free(b);
	if (before < 0 || after < 0)
		skip();
	/* the database is ~15 MiB; the allowance, the commit's last 32
	 * records and its own bookkeeping map a few MiB at most */
	if (after - before > 4096)
		fail_msg("RssFile grew %ld KiB over one commit: it kept the pages "
		         "it read mapped", after - before);
	texture_url(url, sizeof url, n - 25);
	assert_kiln(0, kiln_store_index_get(s, "pc", url, &a));
	assert_memory_equal(a.b, c.b, 16);
	kiln_store_close(s);
}

/* kiln_store_trim_pages unmaps only past the allowance: a database
 * mapped within it stays mapped (no faults to map it again, no TLB
 * flushes), one mapped beyond it is handed back. */
static void
trimming_leaves_a_small_mapping_and_hands_a_big_one_back(void **state)
{
	kiln_store_opts o = small_map;
	kiln_store *s;
	kiln_id a;
	const int n = 40000;
	long before, after;

	o.mapped_max = 64 << 20;
	s = mapped_store(state, &o, n, &a);
	/* several MiB mapped, within 64 MiB: left alone */
	rss_around(s, kiln_store_trim_pages, &before, &after);
	if (before - after > 512)
		fail_msg("RssFile %ld KiB before, %ld KiB after: trimming within "
		         "the allowance unmapped the database", before, after);
	kiln_store_close(s);
	/* the same database with a 1 MiB allowance: handed back */
	o.flags = 0;
	o.mapped_max = 1 << 20;
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &s));
	index_read_all(s, n);
	rss_around(s, kiln_store_trim_pages, &before, &after);
	if (before - after < 2048)
		fail_msg("RssFile %ld KiB before, %ld KiB after: trimming past "
		         "the allowance left the pages mapped", before, after);
	kiln_store_close(s);
}

struct raw {
	enum db_name db;
	const void *k;
	size_t klen;
	const void *v;
	size_t vlen;
};

static int
raw_put(db_txn *t, void *arg)
{
	struct raw *r = arg;

	return db_put(t, r->db, r->k, r->klen, r->v, r->vlen);
}

static void
records_of_a_newer_version_are_refused_not_misread(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	uint8_t v[REC_INDEX_LEN] = {REC_VERSION + 1};
	uint8_t shortv[3] = {REC_VERSION, 1, 2};
	struct raw r = {DB_INDEX, "pc\0new", 6, v, sizeof v};
	kiln_id got, key;
	kiln_action *a;
	void *data;
	size_t len;

	assert_kiln(0, db_write(s->db, raw_put, &r));
	assert_kiln(KILN_EVERSION, kiln_store_index_get(s, "pc", "new", &got));
	r = (struct raw){DB_INDEX, "pc\0short", 8, shortv, sizeof shortv};
	assert_kiln(0, db_write(s->db, raw_put, &r));
	assert_kiln(KILN_ECORRUPT, kiln_store_index_get(s, "pc", "short", &got));
	kiln_id_of_buf("k", 1, &key);
	r = (struct raw){DB_ACTIONS, key.b, 16, v, sizeof v};
	assert_kiln(0, db_write(s->db, raw_put, &r));
	assert_kiln(KILN_EVERSION, kiln_store_action_get(s, &key, &a));
	r = (struct raw){DB_STEPS, "pc\0new", 6, v, sizeof v};
	assert_kiln(0, db_write(s->db, raw_put, &r));
	assert_kiln(KILN_EVERSION, kiln_store_step_get(s, "pc", "new", &data, &len));
	r = (struct raw){DB_STEPS, "pc\0short", 8, shortv, 2};
	assert_kiln(0, db_write(s->db, raw_put, &r));
	assert_kiln(KILN_ECORRUPT, kiln_store_step_get(s, "pc", "short", &data, &len));
	kiln_store_close(s);
}

/* A store at <case>/store with n index entries, closed again; its data
 * file's path into file (PATH_MAX). */
static kiln_id
damage_fixture(void **state, int n, char *file)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "content named by its hash");
	char url[32];

	for (int i = 0; i < n; i++) {
		snprintf(url, sizeof url, "u/%04d", i);
		assert_kiln(0, kiln_store_index_set(s, "pc", url, &id));
	}
	kiln_store_close(s);
	snprintf(file, PATH_MAX, "%s/store/db/data.mdb", tu_dir(state));
	return id;
}

/* The meta fields dbcheck.c reads with pread are the ones LMDB reports:
 * this pins the layout facts it relies on (docs/store.md) to the LMDB
 * build in use. */
static void
meta_pages_read_as_lmdb_reports_them(void **state)
{
	char file[PATH_MAX];
	struct db_meta m;
	MDB_env *env;
	MDB_envinfo info;
	MDB_stat st;
	int fd;

	damage_fixture(state, 500, file);
	assert_true((fd = open(file, O_RDONLY)) >= 0);
	assert_kiln(0, dbfile_check_size(fd, &m));
	assert_kiln(0, dbfile_walk(fd, &m));
	close(fd);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_open(env, tu_path(state, "store/db"), MDB_RDONLY, 0644), 0);
	assert_int_equal(mdb_env_info(env, &info), 0);
	assert_int_equal(mdb_env_stat(env, &st), 0);
	assert_int_equal(m.last_pg, info.me_last_pgno);
	assert_int_equal(m.txnid, info.me_last_txnid);
	assert_int_equal(m.psize, st.ms_psize);
	assert_true(m.main_root >= 2 && m.main_root <= m.last_pg);
	mdb_env_close(env);
}

/* Half the file cut off: LMDB would die with SIGBUS at the first page
 * past the end; open refuses instead, read-only or not, and after the
 * file is set aside the store opens again with its blobs. */
static void
a_truncated_database_is_refused_then_set_aside(void **state)
{
	char file[PATH_MAX], moved[PATH_MAX];
	kiln_store_opts o = {.flags = KILN_STORE_RDONLY};
	kiln_store *s = NULL;
	struct stat st;
	kiln_id id = damage_fixture(state, 2000, file), got;

	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(truncate(file, st.st_size / 2), 0);
	assert_kiln(KILN_ECORRUPT, kiln_store_open(tu_path(state, "store"), &o, &s));
	o.flags = 0;
	assert_kiln(KILN_ECORRUPT, kiln_store_open(tu_path(state, "store"), &o, &s));
	assert_null(s);
	assert_kiln(0, kiln_store_db_set_aside(tu_path(state, "store"), moved, sizeof moved));
	assert_int_equal(stat(moved, &st), 0);
	assert_non_null(strstr(moved, "/corrupt/data.mdb."));
	s = tu_open_store(state, KILN_DURABLE_NONE);
	assert_kiln(KILN_ENOTFOUND, kiln_store_index_get(s, "pc", "u/0000", &got));
	assert_kiln(0, kiln_store_verify(s, &id));
	kiln_store_close(s);
}

/* Fewer bytes than even the two meta pages. */
static void
a_database_shorter_than_its_meta_pages_is_refused(void **state)
{
	char file[PATH_MAX];
	kiln_store *s = NULL;

	damage_fixture(state, 1, file);
	assert_int_equal(truncate(file, 100), 0);
	assert_kiln(KILN_ECORRUPT, kiln_store_open(tu_path(state, "store"), NULL, &s));
	assert_int_equal(truncate(file, 0), 0);
	/* an empty file is what a crash at creation leaves: LMDB starts it */
	s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_store_close(s);
}

/* Garbage over the header of the main database's root page (the page
 * LMDB reads first to find the named databases), or of a page past it:
 * refused, not followed. */
static void
a_damaged_page_header_is_refused(void **state)
{
	static const uint8_t junk[32] = {0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0x7f,
	                                 0x41, 0x41, 0x41, 0x41, 0xff, 0xff, 0x01, 0x00};
	char file[PATH_MAX];
	struct db_meta m;
	kiln_store *s = NULL;
	kiln_store_opts walk = {.flags = KILN_STORE_CHECK_PAGES};
	int fd;

	damage_fixture(state, 2000, file);
	assert_true((fd = open(file, O_RDWR)) >= 0);
	assert_kiln(0, dbfile_meta(fd, &m));
	for (uint64_t pg = 2; pg <= m.last_pg; pg++) {
		uint8_t keep[sizeof junk];
		assert_int_equal(pread(fd, keep, sizeof keep, (off_t)(pg * m.psize)), sizeof keep);
		assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)(pg * m.psize)), sizeof junk);
		/* a free page may be damaged harmlessly; a reachable one never */
		if (pg == m.main_root)
			assert_kiln(KILN_ECORRUPT, dbfile_walk(fd, &m));
		if (dbfile_walk(fd, &m) == KILN_ECORRUPT)
			assert_kiln(KILN_ECORRUPT,
			            kiln_store_open(tu_path(state, "store"), &walk, &s));
		assert_int_equal(pwrite(fd, keep, sizeof keep, (off_t)(pg * m.psize)), sizeof keep);
	}
	close(fd);
	s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_store_close(s);
}

/* The data file cut short while a store has it open (truncate under a
 * running daemon, issue 36): every read and write after is refused with
 * KILN_EDBCHANGED instead of dying of SIGBUS, nothing is written into the
 * file, and after the store is closed the file is set aside as one found
 * damaged at open. Cut to the two meta pages, to half, to less than a
 * page, and to nothing. */
static void
a_database_cut_short_while_open_is_refused(void **state)
{
	char file[PATH_MAX], moved[PATH_MAX];
	kiln_id got;
	struct stat st;

	for (int i = 0; i < 4; i++) {
		kiln_id id = damage_fixture(state, 2000, file);
		kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
		off_t to;
		assert_int_equal(stat(file, &st), 0);
		to = i == 0 ? 8192 : i == 1 ? st.st_size / 2 : i == 2 ? 100 : 0;
		assert_kiln(0, kiln_store_damaged(s));
		assert_int_equal(truncate(file, to), 0);
		assert_kiln(KILN_EDBCHANGED, kiln_store_index_get(s, "pc", "u/1999", &got));
		assert_kiln(KILN_EDBCHANGED, kiln_store_damaged(s));
		assert_kiln(KILN_EDBCHANGED, kiln_store_index_set(s, "pc", "new", &id));
		assert_kiln(KILN_EDBCHANGED, kiln_store_index_get(s, "pc", "u/0000", &got));
		kiln_store_close(s);
		assert_int_equal(stat(file, &st), 0);
		if (st.st_size != to)
			fail_msg("cut to %lld bytes, the file has %lld after the store "
			         "was used and closed", (long long)to, (long long)st.st_size);
		assert_kiln(0, kiln_store_db_set_aside(tu_path(state, "store"), moved,
		                                       sizeof moved));
	}
}

struct cut {
	const char *file;
	off_t to;
	int seen;
	int put;     /* also write a record after the cut */
};

static int
count_entry(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
            void *arg)
{
	(void)t, (void)k, (void)klen, (void)v, (void)vlen;
	((struct cut *)arg)->seen++;
	return 0;
}

/* Inside the transaction, after its size check: cut the file, then walk
 * (and maybe write) the index through the map. */
static int
cut_then_read(db_txn *t, void *arg)
{
	struct cut *c = arg;
	const void *v;
	size_t vlen;
	int rv;

	assert_int_equal(truncate(c->file, c->to), 0);
	rv = db_each(t, DB_INDEX, NULL, 0, count_entry, c);
	if (rv == 0)
		fail_msg("a walk through a map cut short answered 0 (%d entries)", c->seen);
	(void)db_get(t, DB_INDEX, "pc", 3, &v, &vlen);
	if (c->put)
		return db_put(t, DB_INDEX, "zz", 2, "v", 1);
	return rv;
}

/* The race the size check cannot close: the file cut between the check
 * and the reads of the same transaction. With guard.c's handler (what
 * kilnd installs) the reads past the end get a filler page that LMDB
 * takes as an error or an empty record (not an assert), the transaction
 * answers KILN_EDBCHANGED, and a write transaction commits nothing. Cut
 * to the meta pages, to half, and to nothing (its meta pages are then
 * fillers too, read by LMDB as a tree past the map). */
static void
a_cut_racing_a_transaction_is_caught_by_the_guard(void **state)
{
	char file[PATH_MAX], moved[PATH_MAX];
	struct stat st;

	assert_kiln(0, kiln_store_guard_install());
	for (int i = 0; i < 6; i++) {
		kiln_store *s;
		struct cut c = {file, 0, 0, i >= 3};
		damage_fixture(state, 3000, file);
		s = tu_open_store(state, KILN_DURABLE_NONE);
		assert_int_equal(stat(file, &st), 0);
		c.to = i % 3 == 0 ? 8192 : i % 3 == 1 ? st.st_size / 2 : 0;
		if (c.put)
			assert_kiln(KILN_EDBCHANGED, db_write(s->db, cut_then_read, &c));
		else
			assert_kiln(KILN_EDBCHANGED, db_read(s->db, cut_then_read, &c));
		assert_kiln(KILN_EDBCHANGED, kiln_store_damaged(s));
		kiln_store_close(s);
		assert_int_equal(stat(file, &st), 0);
		if (st.st_size != c.to)
			fail_msg("case %d: cut to %lld bytes, the file has %lld after",
			         i, (long long)c.to, (long long)st.st_size);
		assert_kiln(0, kiln_store_db_set_aside(tu_path(state, "store"), moved,
		                                       sizeof moved));
	}
}

/* guard.c on a plain file: a guarded map of a file cut short reads zeros
 * past the new end and says it faulted; an unguarded one still dies of
 * SIGBUS (in a child), as the default action would have it. */
static void
the_guard_catches_only_its_own_maps(void **state)
{
	const char *file = tu_path(state, "f");
	size_t len = 64 << 10;
	char *buf = malloc(len);
	volatile unsigned char *map;
	unsigned sum = 0;
	int fd, g, wst;
	pid_t pid;

	assert_non_null(buf);
	memset(buf, 'x', len);
	assert_kiln(0, kiln_store_guard_install());
	assert_true((fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644)) >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	free(buf);
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_true((g = guard_add((const void *)map, len, 0)) >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(map[100], 'x');
	assert_false(guard_faulted(g));
	for (size_t i = 4096; i < len; i += 1024)
		sum += map[i];
	assert_int_equal(sum, 0);
	assert_true(guard_faulted(g));
	guard_remove(g);
	munmap((void *)map, len);
	/* no slot: the handler hands the fault to the action before it */
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);
	if ((pid = fork()) == 0) {
		signal(SIGBUS, SIG_DFL);  /* cmocka's own catcher is not the test */
		kiln_store_guard_install();
		_exit(map[8192] == 0 ? 10 : 11);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &wst, 0), pid);
	if (!WIFSIGNALED(wst) || WTERMSIG(wst) != SIGBUS)
		fail_msg("an unguarded read past the end: status %#x, not SIGBUS", wst);
	munmap((void *)map, len);
	close(fd);
}

/* Make the store at dir look like one written before the steps database
 * existed, by dropping it below the store (LMDB directly). */
static void
drop_steps_db(const char *dbdir)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;

	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
	assert_int_equal(mdb_env_open(env, dbdir, 0, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "steps", 0, &dbi), 0);
	assert_int_equal(mdb_drop(txn, dbi, 1), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "steps", 0, &dbi), MDB_NOTFOUND);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

static void
a_store_from_before_the_steps_db_opens(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = put_text(s, "old"), got;
	void *data = NULL;
	size_t len = 0;

	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &a));
	kiln_store_close(s);
	drop_steps_db(tu_path(state, "store/db"));

	/* Read-only: no steps yet, everything else as it was. */
	s = tu_open_store_at(tu_path(state, "store"), KILN_STORE_RDONLY,
	                     KILN_DURABLE_NONE, "read-only, old store");
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_get(s, "pc", "x", &data, &len));
	assert_kiln(0, kiln_store_index_get(s, "pc", "x", &got));
	assert_memory_equal(got.b, a.b, 16);
	tu_assert_fsck_clean(s, "read-only, old store", 1, 3);
	kiln_store_close(s);

	/* Writable: the database is added, and a read-only handle sees it. */
	s = tu_open_store_at(tu_path(state, "store"), 0, KILN_DURABLE_NONE,
	                     "writable, old store");
	assert_kiln(KILN_ENOTFOUND, kiln_store_step_get(s, "pc", "x", &data, &len));
	assert_kiln(0, kiln_store_step_put(s, "pc", "x", "why", 3));
	kiln_store_close(s);
	s = tu_open_store_at(tu_path(state, "store"), KILN_STORE_RDONLY,
	                     KILN_DURABLE_NONE, "read-only, upgraded store");
	assert_kiln(0, kiln_store_step_get(s, "pc", "x", &data, &len));
	assert_int_equal(len, 3);
	assert_memory_equal(data, "why", 3);
	free(data);
	kiln_store_close(s);
}

static void
data_survives_close_and_reopen(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	kiln_id a = put_text(s, "persist"), got;

	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &a));
	kiln_store_close(s);
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), NULL, &s));
	assert_kiln(0, kiln_store_index_get(s, "pc", "x", &got));
	assert_memory_equal(got.b, a.b, 16);
	kiln_store_close(s);
}

static void
database_fd_is_not_inherited_by_tools(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		char link[300], target[4096];
		ssize_t n;
		int fd = atoi(e->d_name);
		snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
		if ((n = readlink(link, target, sizeof target - 1)) <= 0)
			continue;
		target[n] = '\0';
		if (strstr(target, "/store/db/") == NULL)
			continue;
		found++;
		if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
			fail_msg("%s is inheritable by spawned tools", target);
	}
	closedir(d);
	assert_true(found >= 1);
	kiln_store_close(s);
}

static void
opening_folders_that_are_not_stores(void **state)
{
	kiln_store_opts create = {.flags = KILN_STORE_CREATE};
	kiln_store_opts bad = {.flags = KILN_STORE_CREATE | KILN_STORE_RDONLY};
	kiln_store *s;
	struct stat st;

	/* missing folder, no CREATE */
	assert_kiln(KILN_ENOTFOUND, kiln_store_open(tu_path(state, "none"), NULL, &s));
	assert_int_equal(access(tu_path(state, "none"), F_OK), -1);
	/* a folder with someone else's files: refused, untouched */
	assert_int_equal(mkdir(tu_path(state, "docs"), 0755), 0);
	tu_write_file(tu_path(state, "docs/readme.txt"), "mine", 4);
	assert_kiln(KILN_ENOTSTORE, kiln_store_open(tu_path(state, "docs"), &create, &s));
	assert_int_equal(access(tu_path(state, "docs/objects"), F_OK), -1);
	assert_int_equal(access(tu_path(state, "docs/kiln-store"), F_OK), -1);
	/* a plain file */
	assert_kiln(KILN_ENOTSTORE,
	            kiln_store_open(tu_path(state, "docs/readme.txt"), &create, &s));
	/* a store written by a newer kiln: refused, untouched */
	assert_int_equal(mkdir(tu_path(state, "future"), 0755), 0);
	tu_write_file(tu_path(state, "future/kiln-store"), "kiln-store 999\n", 15);
	assert_kiln(KILN_EVERSION, kiln_store_open(tu_path(state, "future"), &create, &s));
	assert_int_equal(access(tu_path(state, "future/db"), F_OK), -1);
	/* a garbled marker */
	tu_write_file(tu_path(state, "future/kiln-store"), "kiln-stor 1\n", 12);
	assert_kiln(KILN_ENOTSTORE, kiln_store_open(tu_path(state, "future"), &create, &s));
	/* contradictory flags */
	assert_kiln(KILN_EINVAL, kiln_store_open(tu_path(state, "x"), &bad, &s));
	/* nested creation, and an interrupted creation is finished */
	assert_kiln(0, kiln_store_open(tu_path(state, "p/.kiln/store"), &create, &s));
	kiln_store_close(s);
	assert_int_equal(mkdir(tu_path(state, "half"), 0755), 0);
	assert_int_equal(mkdir(tu_path(state, "half/objects"), 0755), 0);
	assert_kiln(KILN_ENOTFOUND, kiln_store_open(tu_path(state, "half"), NULL, &s));
	assert_kiln(0, kiln_store_open(tu_path(state, "half"), &create, &s));
	assert_int_equal(stat(tu_path(state, "half/kiln-store"), &st), 0);
	kiln_store_close(s);
}

static void
stale_temp_files_are_swept_on_open(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	const char *old = tu_path(state, "store/tmp/put-old"),
	           *young = tu_path(state, "store/tmp/put-young");
	struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};

	kiln_store_close(s);
	tu_write_file(old, "x", 1);
	tu_write_file(young, "y", 1);
	assert_int_equal(utimensat(AT_FDCWD, old, t, 0), 0);
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), NULL, &s));
	assert_int_equal(access(old, F_OK), -1);
	assert_int_equal(access(young, F_OK), 0);
	kiln_store_close(s);
}

/* Fork a process that opens the store, reads once (registering a reader
 * slot), signals on the pipe, and waits to be killed. */
static pid_t
spawn_reader(void **state)
{
	kiln_store *s;
	kiln_id got;
	int p[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		if (kiln_store_open(tu_path(state, "store"), NULL, &s) != 0 ||
		    kiln_store_index_get(s, "pc", "x", &got) != 0)
			_exit(1);
		(void)!write(p[1], "r", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

static int
reader_registered(void **state, pid_t pid)
{
	return tu_sh("mdb_stat -r %s | grep -qw %d", tu_path(state, "store/db"),
	             (int)pid) == 0;
}

/* A process killed while holding a reader slot must not pin old pages
 * forever: the next open clears its slot. (Another process keeps the
 * environment open, as a running daemon would, so LMDB's own reset of an
 * unused lock file cannot be what clears it.) */
static void
reader_slots_of_killed_processes_are_cleared_on_open(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a = put_text(s, "A");
	pid_t holder, victim;
	int stale, live;

	assert_kiln(0, kiln_store_index_set(s, "pc", "x", &a));
	kiln_store_close(s);
	holder = spawn_reader(state);
	victim = spawn_reader(state);
	assert_true(reader_registered(state, victim));
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
	assert_true(reader_registered(state, victim)); /* stale, not yet cleared */
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), NULL, &s));
	stale = reader_registered(state, victim);
	live = reader_registered(state, holder);
	kiln_store_close(s);
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	if (stale)
		fail_msg("reader slot of killed pid %d still registered after open",
		         (int)victim);
	assert_true(live);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(index_set_get_delete),
		T(index_never_names_a_missing_blob),
		T(index_refuses_bad_names),
		T(index_lists_by_profile_and_prefix_in_order),
		T(actions_round_trip_and_keep_their_creation_time),
		T(file_records_round_trip),
		T(map_grows_past_its_initial_size),
		T(unmapping_pages_shrinks_the_resident_set_and_keeps_the_data),
		T(a_big_commit_hands_its_pages_back_as_it_goes),
		T(trimming_leaves_a_small_mapping_and_hands_a_big_one_back),
		T(records_of_a_newer_version_are_refused_not_misread),
		T(a_store_from_before_the_steps_db_opens),
		T(data_survives_close_and_reopen),
		T(database_fd_is_not_inherited_by_tools),
		T(opening_folders_that_are_not_stores),
		T(stale_temp_files_are_swept_on_open),
		T(reader_slots_of_killed_processes_are_cleared_on_open),
		T(meta_pages_read_as_lmdb_reports_them),
		T(a_truncated_database_is_refused_then_set_aside),
		T(a_database_shorter_than_its_meta_pages_is_refused),
		T(a_damaged_page_header_is_refused),
		T(a_database_cut_short_while_open_is_refused),
		T(a_cut_racing_a_transaction_is_caught_by_the_guard),
		T(the_guard_catches_only_its_own_maps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
