/* test_enospc.c — a full disk makes puts and record writes fail with
 * KILN_ENOSPC ("no space ..."), leaves the store consistent (no temp files,
 * no partial blob, every record names a sound blob, fsck clean) and the
 * store works again as soon as space is freed.
 *
 * Each case mounts its own 8 MiB tmpfs inside its temp dir, so this needs
 * root; otherwise the cases are skipped with the reason printed. The store
 * lives on the tmpfs with a 1 MiB initial LMDB map (it must grow by itself)
 * and KILN_DURABLE_FSYNC. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define BLOB_LEN (400u * 1024)
#define NPRE     3000 /* long index entries before the disk fills */
#define URL_LEN  380  /* long, but within every limit the store states */

/* The case's mount and open store, so teardown can clean up after a
 * failed assertion. */
static struct {
	char mnt[4096];
	char store[4200];
	int mounted, private_ns;
	char why[256];
	kiln_store *s;
} ctx;

static int
setup_tmpfs(void **state)
{
	if (tu_setup_dir(state) != 0)
		return -1;
	ctx.s = NULL;
	ctx.mounted = 0;
	ctx.why[0] = '\0';
	snprintf(ctx.mnt, sizeof ctx.mnt, "%s", tu_path(state, "mnt"));
	snprintf(ctx.store, sizeof ctx.store, "%s/store", ctx.mnt);
	if (mkdir(ctx.mnt, 0755) != 0)
		return -1;
	if (geteuid() != 0) {
		snprintf(ctx.why, sizeof ctx.why, "needs root to mount a tmpfs "
		         "(running as uid %d)", (int)geteuid());
		return 0;
	}
	/* A private mount namespace: if the process dies mid-case (a
	 * sanitizer abort), its tmpfs goes with it instead of staying mounted. */
	if (!ctx.private_ns && unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		ctx.private_ns = 1;
	if (mount("tmpfs", ctx.mnt, "tmpfs", 0, "size=8m") != 0) {
		snprintf(ctx.why, sizeof ctx.why, "mount -t tmpfs -o size=8m failed: %s",
		         strerror(errno));
		return 0;
	}
	ctx.mounted = 1;
	return 0;
}

static int
teardown_tmpfs(void **state)
{
	kiln_store_close(ctx.s);
	ctx.s = NULL;
	if (ctx.mounted && umount(ctx.mnt) != 0 && umount2(ctx.mnt, MNT_DETACH) != 0)
		fprintf(stderr, "# umount %s: %s\n", ctx.mnt, strerror(errno));
	ctx.mounted = 0;
	return tu_teardown_dir(state);
}

static void
need_tmpfs(void)
{
	if (!ctx.mounted) {
		print_message("# skipped: %s\n", ctx.why);
		skip();
	}
}

static kiln_store *
open_small_store(void)
{
	kiln_store_opts o = {.flags = KILN_STORE_CREATE,
	                     .durability = KILN_DURABLE_FSYNC,
	                     .map_size = 1u << 20};
	int rv;

	kiln_store_close(ctx.s);
	ctx.s = NULL;
	if ((rv = kiln_store_open(ctx.store, &o, &ctx.s)) != 0)
		fail_msg("open store on the tmpfs: %s", kiln_strerror(rv));
	return ctx.s;
}

static void
close_store(void)
{
	kiln_store_close(ctx.s);
	ctx.s = NULL;
}

static uint64_t
next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void
fill64(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL | 1;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		next_rand(&x);
		memcpy(buf + i, &x, 8);
	}
	for (next_rand(&x); i < len; i++, x >>= 8)
		buf[i] = (uint8_t)x;
}

/* Write a file of len bytes (or until the disk is full when len is 0);
 * returns the bytes written. */
static size_t
write_filler(const char *path, size_t len, size_t chunk)
{
	static uint8_t buf[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t done = 0;

	if (fd < 0)
		fail_msg("create %s: %s", path, strerror(errno));
	memset(buf, 0x5a, sizeof buf);
	while (len == 0 || done < len) {
		size_t n = chunk;
		ssize_t w;
		if (len && len - done < n)
			n = len - done;
		if ((w = write(fd, buf, n)) <= 0) {
			if (len == 0 && errno == ENOSPC)
				break;
			fail_msg("write %s: %s", path, strerror(errno));
		}
		done += (size_t)w;
	}
	close(fd);
	return done;
}

static void
assert_enospc(int rv, const char *what)
{
	if (rv != KILN_ENOSPC)
		fail_msg("%s on a full disk returned %d (%s), expected KILN_ENOSPC",
		         what, rv, kiln_strerror(rv));
	if (strstr(kiln_strerror(rv), "no space") == NULL)
		fail_msg("kiln_strerror(KILN_ENOSPC) is \"%s\": should say \"no space\"",
		         kiln_strerror(rv));
}

/* ---- consistency checks ------------------------------------------------ */

static int
is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

/* Every file in objects/ re-hashes to its name; returns how many. */
static uint64_t
check_objects(const char *when)
{
	char objs[4300], sub[4600], path[4900];
	struct dirent *e, *f;
	uint64_t n = 0;
	DIR *d, *d2;

	snprintf(objs, sizeof objs, "%s/objects", ctx.store);
	if ((d = opendir(objs)) == NULL)
		fail_msg("%s: opendir objects/: %s", when, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!is_lower_hex(e->d_name, 2))
			fail_msg("%s: objects/%s is not a fan-out folder", when, e->d_name);
		snprintf(sub, sizeof sub, "%s/%s", objs, e->d_name);
		if ((d2 = opendir(sub)) == NULL)
			fail_msg("%s: objects/%s: %s", when, e->d_name, strerror(errno));
		while ((f = readdir(d2)) != NULL) {
			char want[KILN_ID_HEX_LEN + 1], got[KILN_ID_HEX_LEN + 1];
			kiln_id id;
			int fd;

			if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, ".."))
				continue;
			if (!is_lower_hex(f->d_name, 30))
				fail_msg("%s: objects/%s/%s is not a blob name", when,
				         e->d_name, f->d_name);
			snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
			if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				fail_msg("%s: open objects/%s/%s: %s", when, e->d_name,
				         f->d_name, strerror(errno));
			assert_kiln(0, kiln_id_of_fd(fd, &id, NULL));
			close(fd);
			memcpy(want, e->d_name, 2);
			memcpy(want + 2, f->d_name, 31);
			kiln_id_to_hex(&id, got);
			if (strcmp(want, got) != 0)
				fail_msg("%s: objects/%s/%s hashes to %s: a partial blob is "
				         "visible", when, e->d_name, f->d_name, got);
			n++;
		}
		closedir(d2);
	}
	closedir(d);
	return n;
}

static void
assert_tmp_empty(const char *when)
{
	char dir[4300];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/tmp", ctx.store);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			char name[256];
			snprintf(name, sizeof name, "%s", e->d_name);
			closedir(d);
			fail_msg("%s: tmp/%s was left behind by a failed write", when, name);
		}
	closedir(d);
}

struct idlist {
	size_t n, max;
	kiln_id *id;
};

static int
collect_id(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	struct idlist *l = arg;

	(void)profile;
	(void)url;
	if (l->n < l->max)
		l->id[l->n] = *id;
	l->n++;
	return 0;
}

static void
print_problem(const kiln_fsck_problem *p, void *arg)
{
	print_message("# fsck: kind %d where %s\n", (int)p->kind, p->where);
	(*(int *)arg)++;
}

/* No temp files, every blob sound, every index entry resolves, fsck clean. */
static void
check_consistent(kiln_store *s, const char *when)
{
	static kiln_id ids[20000];
	struct idlist l = {0, 20000, ids};
	kiln_fsck_stats st;
	uint64_t nblobs;
	int n = 0, rv;

	assert_tmp_empty(when);
	nblobs = check_objects(when);
	if ((rv = kiln_store_index_list(s, NULL, NULL, collect_id, &l)) != 0)
		fail_msg("%s: index_list: %s", when, kiln_strerror(rv));
	for (size_t i = 0; i < l.n && i < l.max; i++)
		if ((rv = kiln_store_verify(s, &ids[i])) != 0)
			fail_msg("%s: index entry %zu names a blob that is %s", when, i,
			         kiln_strerror(rv));
	memset(&st, 0, sizeof st);
	if ((rv = kiln_store_fsck(s, 0, print_problem, &n, &st)) != 0)
		fail_msg("%s: fsck: %s", when, kiln_strerror(rv));
	if (n || st.corrupt || st.missing || st.bad_records || st.stray)
		fail_msg("%s: fsck found %d problem(s)", when, n);
	if (st.blobs != nblobs)
		fail_msg("%s: fsck counted %" PRIu64 " blobs, objects/ holds %" PRIu64,
		         when, st.blobs, nblobs);
}

static void
assert_index(kiln_store *s, const char *url, const kiln_id *want, const char *when)
{
	kiln_id got;
	int rv = kiln_store_index_get(s, "pc", url, &got);

	if (rv != 0 || kiln_id_cmp(&got, want) != 0)
		fail_msg("%s: committed entry pc %s is %s", when, url,
		         rv ? kiln_strerror(rv) : "naming another blob");
}

/* ---- cases ------------------------------------------------------------ */

static int
put_fd_of(kiln_store *s, const uint8_t *buf, size_t len, kiln_id *id)
{
	int fd = memfd_create("kiln-enospc", MFD_CLOEXEC), rv;

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET))
		fail_msg("memfd: %s", strerror(errno));
	rv = kiln_store_put_fd(s, fd, id);
	close(fd);
	return rv;
}

/* Put through a blob writer; any error must be ENOSPC. */
static int
put_writer(kiln_store *s, const uint8_t *buf, size_t len, kiln_id *id)
{
	kiln_blob_writer *w;
	int rv;

	if ((rv = kiln_blob_writer_open(s, &w)) != 0)
		return rv;
	for (size_t off = 0; off < len; off += 65536) {
		size_t n = len - off < 65536 ? len - off : 65536;
		if ((rv = kiln_blob_writer_write(w, buf + off, n)) != 0) {
			kiln_blob_writer_abort(w);
			return rv;
		}
	}
	return kiln_blob_writer_commit(w, NULL, id);
}

static void
blob_puts_on_a_full_disk_fail_with_enospc_and_leave_store_consistent(void **state)
{
	uint8_t *buf;
	char filler[4300], url[64], outside[4096];
	kiln_id ids[64], id, want, key;
	int nput = 0, rv = 0, nindex_full = 0;
	kiln_store *s;

	need_tmpfs();
	buf = malloc(BLOB_LEN);
	assert_non_null(buf);
	s = open_small_store();
	/* a baseline: small blobs, index entries and an action */
	for (int i = 0; i < 4; i++) {
		fill64(buf, 1000, 10 + (uint64_t)i);
		assert_kiln(0, kiln_store_put_buf(s, buf, 1000, &id));
		snprintf(url, sizeof url, "base/%d", i);
		assert_kiln(0, kiln_store_index_set(s, "pc", url, &id));
	}
	kiln_id_of_buf("k", 1, &key);
	assert_kiln(0, kiln_store_action_put(s, &key, &id, 1, "r", 1));
	snprintf(filler, sizeof filler, "%s/filler", ctx.mnt);
	write_filler(filler, 2u << 20, 65536);

	/* put 400 KiB blobs until the disk is full */
	for (nput = 0; nput < 64; nput++) {
		fill64(buf, BLOB_LEN, 1000 + (uint64_t)nput);
		if ((rv = kiln_store_put_buf(s, buf, BLOB_LEN, &ids[nput])) != 0)
			break;
		snprintf(url, sizeof url, "big/%d", nput);
		rv = kiln_store_index_set(s, "pc", url, &ids[nput]);
		if (rv == KILN_ENOSPC) {
			nindex_full++;
			continue;
		}
		assert_kiln(0, rv);
	}
	if (nput == 64)
		fail_msg("64 puts of 400 KiB fit on an 8 MiB tmpfs?");
	assert_enospc(rv, "put_buf");
	print_message("# disk full after %d puts of 400 KiB (%d index_set hit "
	              "ENOSPC first)\n", nput, nindex_full);
	kiln_id_of_buf(buf, BLOB_LEN, &want);
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &want, NULL));

	/* every other way in fails the same way */
	fill64(buf, BLOB_LEN, 5000);
	assert_enospc(put_fd_of(s, buf, BLOB_LEN, &id), "put_fd");
	fill64(buf, BLOB_LEN, 5001);
	assert_enospc(put_writer(s, buf, BLOB_LEN, &id), "a blob writer");
	fill64(buf, BLOB_LEN, 5002);
	snprintf(outside, sizeof outside, "%s", tu_path(state, "outside"));
	tu_write_file(outside, buf, BLOB_LEN);
	assert_enospc(kiln_store_put_path(s, outside, &id), "put_path");
	assert_enospc(kiln_store_put_move(s, outside, &id),
	              "put_move from another filesystem");
	if (access(outside, F_OK) != 0)
		fail_msg("a failed put_move removed its source file");
	check_consistent(s, "after ENOSPC on puts");
	for (int i = 0; i < nput; i++) {
		snprintf(url, sizeof url, "big/%d", i);
		if (kiln_store_index_get(s, "pc", url, &id) == 0)
			assert_kiln(0, kiln_store_verify(s, &ids[i]));
	}

	/* free space: puts work again */
	assert_int_equal(0, unlink(filler));
	fill64(buf, BLOB_LEN, 1000 + (uint64_t)nput);
	assert_kiln(0, kiln_store_put_buf(s, buf, BLOB_LEN, &id));
	assert_true(kiln_id_cmp(&id, &want) == 0);
	assert_kiln(0, kiln_store_index_set(s, "pc", "after/full", &id));
	fill64(buf, BLOB_LEN, 5001);
	assert_kiln(0, put_writer(s, buf, BLOB_LEN, &id));
	check_consistent(s, "after freeing space");
	close_store();
	s = open_small_store();
	assert_index(s, "after/full", &want, "after reopening");
	check_consistent(s, "after reopening");
	free(buf);
}

static void
record_writes_on_a_full_disk_fail_with_enospc_and_leave_store_consistent(void **state)
{
	static char url[1100];
	char filler1[4300], filler2[4300];
	kiln_id v, key, got;
	uint8_t small[100];
	void *payload;
	int nset, rv = 0;
	kiln_store *s;
	void *rbuf;
	size_t rlen;

	(void)state;
	need_tmpfs();
	s = open_small_store();
	fill64(small, sizeof small, 1);
	assert_kiln(0, kiln_store_put_buf(s, small, sizeof small, &v));
	assert_kiln(0, kiln_store_index_set(s, "pc", "first", &v));

	/* long URLs use up pages fast; 3000 of them also outgrow the 1 MiB
	 * initial map, which must grow by itself */
	memset(url, 'x', sizeof url - 1);
	for (int i = 0; i < NPRE; i++) {
		int n = snprintf(url, sizeof url, "pre/%05d/", i);
		url[n] = 'x';
		url[URL_LEN] = '\0';
		if ((rv = kiln_store_index_set(s, "pc", url, &v)) != 0)
			fail_msg("index_set of entry %d with a %d-byte URL, disk not "
			         "yet full: %s", i, URL_LEN, kiln_strerror(rv));
	}
	{
		struct stat st;
		char data[4400];
		snprintf(data, sizeof data, "%s/db/data.mdb", ctx.store);
		if (stat(data, &st) == 0)
			print_message("# db/data.mdb is %lld bytes after %d long "
			              "entries (initial map 1 MiB)\n",
			              (long long)st.st_size, NPRE);
	}

	/* fill the disk to the last byte */
	snprintf(filler1, sizeof filler1, "%s/filler1", ctx.mnt);
	snprintf(filler2, sizeof filler2, "%s/filler2", ctx.mnt);
	write_filler(filler1, 0, 65536);
	write_filler(filler2, 0, 512);

	for (nset = 0; nset < 20000; nset++) {
		int n = snprintf(url, sizeof url, "lmdb/%05d/", nset);
		url[n] = 'x';
		url[URL_LEN] = '\0';
		if ((rv = kiln_store_index_set(s, "pc", url, &v)) != 0)
			break;
	}
	if (nset == 20000)
		fail_msg("20000 index entries of %d bytes fit on a full disk?", URL_LEN);
	assert_enospc(rv, "index_set");
	print_message("# index_set hit ENOSPC after %d more entries\n", nset);
	rv = kiln_store_index_get(s, "pc", url, &got);
	if (rv != KILN_ENOTFOUND && !(rv == 0 && kiln_id_cmp(&got, &v) == 0))
		fail_msg("the failed entry reads back as %s", kiln_strerror(rv));

	/* an action with a large payload fails the same way */
	payload = calloc(1, 256 * 1024);
	assert_non_null(payload);
	kiln_id_of_buf("big action", 10, &key);
	assert_enospc(kiln_store_action_put(s, &key, &v, 1, payload, 256 * 1024),
	              "action_put of 256 KiB");

	/* reads still work and nothing is inconsistent */
	assert_kiln(0, kiln_store_read(s, &v, &rbuf, &rlen));
	free(rbuf);
	assert_index(s, "first", &v, "on the full disk");
	for (int i = 0; i < nset; i++) {
		int n = snprintf(url, sizeof url, "lmdb/%05d/", i);
		url[n] = 'x';
		assert_index(s, url, &v, "on the full disk");
	}
	check_consistent(s, "after ENOSPC on records");

	/* free space: writes work again, without reopening */
	assert_int_equal(0, unlink(filler1));
	assert_int_equal(0, unlink(filler2));
	rv = kiln_store_index_set(s, "pc", "after/full", &v);
	if (rv != 0)
		fail_msg("index_set after freeing space: %s (does the store recover "
		         "from a failed commit without reopening?)", kiln_strerror(rv));
	assert_kiln(0, kiln_store_action_put(s, &key, &v, 1, payload, 256 * 1024));
	check_consistent(s, "after freeing space");
	close_store();
	s = open_small_store();
	assert_index(s, "after/full", &v, "after reopening");
	for (int i = 0; i < NPRE; i++) {
		int n = snprintf(url, sizeof url, "pre/%05d/", i);
		url[n] = 'x';
		assert_index(s, url, &v, "after reopening");
	}
	for (int i = 0; i < nset; i++) {
		int n = snprintf(url, sizeof url, "lmdb/%05d/", i);
		url[n] = 'x';
		assert_index(s, url, &v, "after reopening");
	}
	check_consistent(s, "after reopening");
	free(payload);
}

/* A failed case longjmps past its cleanup and leaks its store; skip the
 * leak report then so the failure stays readable. Passing runs are still
 * checked for leaks. */
int __lsan_is_turned_off(void);
static int cases_failed;

int
__lsan_is_turned_off(void)
{
	return cases_failed != 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			blob_puts_on_a_full_disk_fail_with_enospc_and_leave_store_consistent,
			setup_tmpfs, teardown_tmpfs),
		cmocka_unit_test_setup_teardown(
			record_writes_on_a_full_disk_fail_with_enospc_and_leave_store_consistent,
			setup_tmpfs, teardown_tmpfs),
	};

	cases_failed = cmocka_run_group_tests(tests, NULL, NULL);
	return cases_failed;
}
