/* test_enospc.c — a full disk makes puts and record writes fail with
 * KILN_ENOSPC ("no space ..."), leaves the store consistent (no temp files,
 * no partial blob, every record names a sound blob, fsck clean) and the
 * store works again as soon as space is freed.
 *
 * Each case mounts its own 8 MiB tmpfs inside its temp dir, so this needs
 * root; otherwise the cases are skipped with the reason printed. The store
 * lives on the tmpfs with a 1 MiB initial LMDB map (it must grow by itself)
 * and KILN_DURABLE_FSYNC. */
#include <errno.h>
#include <fcntl.h>
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
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) == 0)
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

/* No temp files, every blob sound, every index entry resolves, fsck clean. */
static void
check_consistent(kiln_store *s, const char *when)
{
	static kiln_id ids[20000];
	struct tu_ids l = {0, 20000, ids};
	int rv;

	tu_assert_store_sound(s, when, NULL, NULL);
	if ((rv = kiln_store_index_list(s, NULL, NULL, tu_collect_id, &l)) != 0)
		fail_msg("%s: index_list: %s", when, kiln_strerror(rv));
	for (size_t i = 0; i < l.n && i < l.max; i++)
		if ((rv = kiln_store_verify(s, &ids[i])) != 0)
			fail_msg("%s: index entry %zu names a blob that is %s", when, i,
			         kiln_strerror(rv));
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
	int fd = tu_memfd_of(buf, len), rv;

	if (fd < 0)
		fail_msg("memfd: %s", strerror(errno));
	rv = kiln_store_put_fd(s, fd, id);
	close(fd);
	return rv;
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
		tu_fill64(buf, 1000, 10 + (uint64_t)i);
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
		tu_fill64(buf, BLOB_LEN, 1000 + (uint64_t)nput);
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
	tu_fill64(buf, BLOB_LEN, 5000);
	assert_enospc(put_fd_of(s, buf, BLOB_LEN, &id), "put_fd");
	tu_fill64(buf, BLOB_LEN, 5001);
	assert_enospc(tu_put_by_writer(s, buf, BLOB_LEN, 65536, NULL, &id),
	              "a blob writer");
	tu_fill64(buf, BLOB_LEN, 5002);
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
	tu_fill64(buf, BLOB_LEN, 1000 + (uint64_t)nput);
	assert_kiln(0, kiln_store_put_buf(s, buf, BLOB_LEN, &id));
	assert_true(kiln_id_cmp(&id, &want) == 0);
	assert_kiln(0, kiln_store_index_set(s, "pc", "after/full", &id));
	tu_fill64(buf, BLOB_LEN, 5001);
	assert_kiln(0, tu_put_by_writer(s, buf, BLOB_LEN, 65536, NULL, &id));
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
	tu_fill64(small, sizeof small, 1);
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

	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
