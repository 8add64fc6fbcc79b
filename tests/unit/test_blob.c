/* test_blob — putting and getting blobs: every put path, dedupe, move
 * without copying, and corruption never returned as data. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void
put_buf_is_readable_at_its_hash_path_read_only(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *text = "hello, kiln";
	kiln_id id, want;
	struct stat st;
	void *buf;
	size_t len;
	uint64_t size;

	assert_kiln(0, kiln_store_put_buf(s, text, strlen(text), &id));
	kiln_id_of_buf(text, strlen(text), &want);
	assert_memory_equal(id.b, want.b, 16);
	assert_int_equal(stat(tu_blob_path(state, &id), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0444);
	assert_kiln(0, kiln_store_has(s, &id, &size));
	assert_int_equal(size, strlen(text));
	assert_kiln(0, kiln_store_read(s, &id, &buf, &len));
	assert_int_equal(len, strlen(text));
	assert_memory_equal(buf, text, len);
	free(buf);
	assert_kiln(0, kiln_store_verify(s, &id));
	assert_int_equal(count_entries(tu_path(state, "store/tmp")), 0);
	kiln_store_close(s);
}

static void
same_content_twice_is_stored_once(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id a, b;
	char hex[KILN_ID_HEX_LEN + 1];

	assert_kiln(0, kiln_store_put_buf(s, "same", 4, &a));
	assert_kiln(0, kiln_store_put_buf(s, "same", 4, &b));
	assert_memory_equal(a.b, b.b, 16);
	kiln_id_to_hex(&a, hex);
	assert_int_equal(count_entries(tu_path(state, "store/objects/%.2s", hex)), 1);
	kiln_store_close(s);
}

static void
put_fd_reads_a_pipe_to_eof(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	size_t len = 300000;
	char *data = malloc(len);
	int p[2];
	kiln_id id, want;
	pid_t pid;

	assert_non_null(data);
	tu_fill(data, len, 3);
	kiln_id_of_buf(data, len, &want);
	assert_int_equal(pipe(p), 0);
	if ((pid = fork()) == 0) {
		close(p[0]);
		for (size_t off = 0; off < len;) {
			ssize_t n = write(p[1], data + off, len - off);
			if (n <= 0)
				_exit(1);
			off += (size_t)n;
		}
		_exit(0);
	}
	close(p[1]);
	assert_kiln(0, kiln_store_put_fd(s, p[0], &id));
	close(p[0]);
	assert_memory_equal(id.b, want.b, 16);
	free(data);
	kiln_store_close(s);
}

static void
put_path_copies_and_leaves_the_source(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *src = tu_path(state, "src.bin");
	struct stat a, b;
	kiln_id id;

	tu_write_file(src, "copy me", 7);
	assert_kiln(0, kiln_store_put_path(s, src, &id));
	assert_int_equal(stat(src, &a), 0);
	assert_int_equal(stat(tu_blob_path(state, &id), &b), 0);
	assert_true(a.st_ino != b.st_ino);
	assert_int_equal(a.st_mode & 0777, 0644);
	assert_kiln(KILN_ENOTFOUND, kiln_store_put_path(s, tu_path(state, "nope"), &id));
	kiln_store_close(s);
}

static void
put_move_keeps_the_inode_and_removes_the_source(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	const char *src = tu_path(state, "out.bin");
	size_t len = 1 << 20;
	char *data = malloc(len);
	struct stat before, after;
	kiln_id id, want;

	assert_non_null(data);
	tu_fill(data, len, 9);
	kiln_id_of_buf(data, len, &want);
	tu_write_file(src, data, len);
	assert_int_equal(stat(src, &before), 0);
	assert_kiln(0, kiln_store_put_move(s, src, &id));
	assert_memory_equal(id.b, want.b, 16);
	assert_int_equal(access(src, F_OK), -1);
	assert_int_equal(stat(tu_blob_path(state, &id), &after), 0);
	assert_int_equal(before.st_ino, after.st_ino); /* no byte was copied */
	assert_int_equal(after.st_mode & 0777, 0444);
	assert_int_equal(count_entries(tu_path(state, "store/tmp")), 0);
	free(data);
	kiln_store_close(s);
}

static void
put_move_of_a_hard_linked_file_copies_so_the_other_link_cannot_change_the_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	const char *src = tu_path(state, "a"), *other = tu_path(state, "b");
	struct stat blob, o;
	kiln_id id;

	tu_write_file(src, "linked", 6);
	assert_int_equal(link(src, other), 0);
	assert_kiln(0, kiln_store_put_move(s, src, &id));
	assert_int_equal(access(src, F_OK), -1);
	assert_int_equal(stat(other, &o), 0);
	assert_int_equal(stat(tu_blob_path(state, &id), &blob), 0);
	assert_true(o.st_ino != blob.st_ino);
	assert_int_equal(o.st_mode & 0777, 0644);
	kiln_store_close(s);
}

static void
put_move_refuses_non_files_and_leaves_them(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	const char *dir = tu_path(state, "adir"), *lnk = tu_path(state, "alink");
	kiln_id id;

	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(symlink("/etc/passwd", lnk), 0);
	assert_kiln(KILN_EINVAL, kiln_store_put_move(s, dir, &id));
	assert_kiln(KILN_EINVAL, kiln_store_put_move(s, lnk, &id));
	assert_kiln(KILN_ENOTFOUND, kiln_store_put_move(s, tu_path(state, "missing"), &id));
	assert_int_equal(access(dir, F_OK), 0);
	assert_int_equal(access(lnk, F_OK), 0);
	kiln_store_close(s);
}

static void
writer_with_a_wrong_expected_hash_publishes_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_blob_writer *w;
	kiln_id wrong, right, id;

	kiln_id_of_buf("something else", 14, &wrong);
	kiln_id_of_buf("part1part2", 10, &right);
	assert_kiln(0, kiln_blob_writer_open(s, &w));
	assert_kiln(0, kiln_blob_writer_write(w, "part1", 5));
	assert_kiln(0, kiln_blob_writer_write(w, "part2", 5));
	assert_kiln(KILN_ECORRUPT, kiln_blob_writer_commit(w, &wrong, &id));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &wrong, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &right, NULL));
	assert_int_equal(count_entries(tu_path(state, "store/tmp")), 0);

	assert_kiln(0, kiln_blob_writer_open(s, &w));
	assert_kiln(0, kiln_blob_writer_write(w, "part1part2", 10));
	assert_kiln(0, kiln_blob_writer_commit(w, &right, &id));
	assert_memory_equal(id.b, right.b, 16);
	kiln_blob_writer_abort(NULL);
	kiln_store_close(s);
}

static void
corrupt_blob_is_an_error_and_never_written_out(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	char data[5000];
	const char *out = tu_path(state, "out");
	struct stat st;
	kiln_id id;
	void *buf = NULL;
	size_t len;
	int fd;

	tu_fill(data, sizeof data, 1);
	assert_kiln(0, kiln_store_put_buf(s, data, sizeof data, &id));
	tu_flip_byte(tu_blob_path(state, &id), 4000);
	assert_kiln(KILN_ECORRUPT, kiln_store_verify(s, &id));
	assert_kiln(KILN_ECORRUPT, kiln_store_read(s, &id, &buf, &len));
	assert_null(buf);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_kiln(KILN_ECORRUPT, kiln_store_copy_out(s, &id, fd));
	close(fd);
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_size, 0);
	kiln_store_close(s);
}

static void
quarantine_moves_a_damaged_blob_to_corrupt_and_it_is_gone(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	char data[3000], hex[KILN_ID_HEX_LEN + 1];
	struct stat st;
	kiln_id id, again;

	tu_fill(data, sizeof data, 7);
	assert_kiln(0, kiln_store_put_buf(s, data, sizeof data, &id));
	tu_flip_byte(tu_blob_path(state, &id), 10);
	assert_kiln(KILN_ECORRUPT, kiln_store_verify(s, &id));
	assert_kiln(0, kiln_store_quarantine(s, &id));
	kiln_id_to_hex(&id, hex);
	if (stat(tu_path(state, "store/corrupt/%s", hex), &st) != 0 ||
	    st.st_size != (off_t)sizeof data)
		fail_msg("the damaged blob should be kept as store/corrupt/%s "
		         "(%zu bytes) for forensics; stat says %s", hex, sizeof data,
		         strerror(errno));
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &id, NULL));
	/* a second caller (another worker) finds nothing left to move */
	assert_kiln(KILN_ENOTFOUND, kiln_store_quarantine(s, &id));
	/* the content put again is a sound blob under its name */
	assert_kiln(0, kiln_store_put_buf(s, data, sizeof data, &again));
	assert_kiln(0, kiln_store_verify(s, &id));
	kiln_store_close(s);
}

static void
a_truncated_blob_is_replaced_when_its_content_is_put_again(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_FSYNC);
	char data[8192];
	kiln_id id, again;

	tu_fill(data, sizeof data, 5);
	assert_kiln(0, kiln_store_put_buf(s, data, sizeof data, &id));
	tu_truncate_blob(tu_blob_path(state, &id), 100);
	assert_kiln(KILN_ECORRUPT, kiln_store_verify(s, &id));
	assert_kiln(0, kiln_store_put_buf(s, data, sizeof data, &again));
	assert_kiln(0, kiln_store_verify(s, &id));
	kiln_store_close(s);
}

static void
missing_blob_is_not_found_everywhere(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id;
	void *buf;
	size_t len;
	int fd;
	char small[8];

	kiln_id_of_buf("never stored", 12, &id);
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &id, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_store_verify(s, &id));
	assert_kiln(KILN_ENOTFOUND, kiln_store_read(s, &id, &buf, &len));
	assert_kiln(KILN_ENOTFOUND, kiln_store_open_blob(s, &id, &fd));
	assert_kiln(KILN_ENOTFOUND, kiln_store_copy_out(s, &id, 1));
	assert_kiln(KILN_ERANGE, kiln_store_blob_path(s, &id, small, sizeof small));
	kiln_store_close(s);
}

static void
empty_blob_round_trips(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	const char *out = tu_path(state, "out");
	struct stat st;
	kiln_id id;
	int fd;

	assert_kiln(0, kiln_store_put_buf(s, "", 0, &id));
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_kiln(0, kiln_store_copy_out(s, &id, fd));
	close(fd);
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_size, 0);
	kiln_store_close(s);
}

static void
read_only_store_refuses_puts(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_store_opts ro = {.flags = KILN_STORE_RDONLY};
	kiln_blob_writer *w;
	kiln_id id;

	assert_kiln(0, kiln_store_put_buf(s, "x", 1, &id));
	kiln_store_close(s);
	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &ro, &s));
	assert_kiln(KILN_EREADONLY, kiln_store_put_buf(s, "y", 1, &id));
	assert_kiln(KILN_EREADONLY, kiln_blob_writer_open(s, &w));
	assert_kiln(KILN_EREADONLY, kiln_store_quarantine(s, &id));
	assert_kiln(0, kiln_store_verify(s, &id));
	kiln_store_close(s);
}

struct cutter {
	const char *path;
	useconds_t after_us;
};

static void *
cut_later(void *arg)
{
	struct cutter *c = arg;

	usleep(c->after_us);
	if (truncate(c->path, 4096) != 0)
		fail_msg("truncate %s", c->path);
	return NULL;
}

/* A file cut short while it is put by path (an editor rewriting a source
 * as the daemon stores it) read through a map: with the guard installed
 * (what kilnd does) the put does not die of SIGBUS; it stores the whole
 * file as it was or, having met the cut, the file as it is now, never a
 * blob of zeros. */
static void
a_file_cut_while_put_by_path_is_put_as_it_is_now(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	const char *path = tu_path(state, "big");
	size_t len = 32u << 20;
	char *buf = malloc(len);
	kiln_id whole, head, got;
	int met = 0;

	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('a' + i % 23);
	kiln_id_of_buf(buf, len, &whole);
	kiln_id_of_buf(buf, 4096, &head);
	assert_kiln(0, kiln_store_guard_install());
	for (int i = 0; i < 12; i++) {
		struct cutter c = {path, (useconds_t)(500 + i * 700)};
		pthread_t th;
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
		close(fd);
		assert_int_equal(pthread_create(&th, NULL, cut_later, &c), 0);
		assert_kiln(0, kiln_store_put_path(s, path, &got));
		pthread_join(th, NULL);
		if (kiln_id_cmp(&got, &head) == 0)
			met++;
		else if (kiln_id_cmp(&got, &whole) != 0)
			fail_msg("round %d: the put stored neither the file nor its cut "
			         "head", i);
	}
	print_message("%d of 12 puts met the cut\n", met);
	free(buf);
	kiln_store_close(s);
}

struct rewriter {
	const char *path;
	size_t len;
	atomic_int stop;
};

/* Rewrite the file in place, 1 MiB at a time, alternating two patterns,
 * until told to stop (an editor saving over a file without a rename). */
static void *
rewrite_in_place(void *arg)
{
	struct rewriter *r = arg;
	size_t chunk = 1u << 20;
	char *buf = malloc(chunk);
	int fd = open(r->path, O_WRONLY | O_CLOEXEC);

	if (buf == NULL || fd < 0)
		fail_msg("rewriter: cannot start");
	for (unsigned round = 0; !atomic_load(&r->stop); round++) {
		memset(buf, round % 2 ? 'x' : 'y', chunk);
		for (size_t off = 0; off < r->len && !atomic_load(&r->stop); off += chunk)
			if (pwrite(fd, buf, chunk, (off_t)off) != (ssize_t)chunk)
				fail_msg("rewriter: pwrite");
	}
	close(fd);
	free(buf);
	return NULL;
}

/* A file rewritten in place while it is put: whatever mix of old and new
 * bytes the put read, the blob holds exactly the bytes its name hashes
 * (through a map the bytes were hashed, then written in a second read of
 * the shared pages: a blob could hold other bytes than its name said). */
static void
a_file_rewritten_while_put_is_stored_under_the_hash_of_what_it_holds(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	struct rewriter r = {tu_path(state, "big"), 32u << 20, 0};
	char *buf = malloc(r.len);
	pthread_t th;
	int fd;

	assert_non_null(buf);
	memset(buf, 'a', r.len);
	fd = open(r.path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, r.len), (ssize_t)r.len);
	close(fd);
	free(buf);
	assert_int_equal(pthread_create(&th, NULL, rewrite_in_place, &r), 0);
	for (int i = 0; i < 8; i++) {
		kiln_id got;
		assert_kiln(0, kiln_store_put_path(s, r.path, &got));
		if (kiln_store_verify(s, &got) != 0) {
			atomic_store(&r.stop, 1);
			pthread_join(th, NULL);
			fail_msg("put %d: the blob's bytes do not hash to its name", i);
		}
	}
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	kiln_store_close(s);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(put_buf_is_readable_at_its_hash_path_read_only),
		T(same_content_twice_is_stored_once),
		T(put_fd_reads_a_pipe_to_eof),
		T(put_path_copies_and_leaves_the_source),
		T(put_move_keeps_the_inode_and_removes_the_source),
		T(put_move_of_a_hard_linked_file_copies_so_the_other_link_cannot_change_the_blob),
		T(put_move_refuses_non_files_and_leaves_them),
		T(writer_with_a_wrong_expected_hash_publishes_nothing),
		T(corrupt_blob_is_an_error_and_never_written_out),
		T(quarantine_moves_a_damaged_blob_to_corrupt_and_it_is_gone),
		T(a_truncated_blob_is_replaced_when_its_content_is_put_again),
		T(missing_blob_is_not_found_everywhere),
		T(empty_blob_round_trips),
		T(read_only_store_refuses_puts),
		T(a_file_cut_while_put_by_path_is_put_as_it_is_now),
		T(a_file_rewritten_while_put_is_stored_under_the_hash_of_what_it_holds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
