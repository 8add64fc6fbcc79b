/* test_materialize — outputs under build/<profile>/: copies of their own
 * by default (a reflink where the file system has them; checked against
 * the blob's name), hard links to blobs in hardlink mode (a copy across
 * filesystems), replacing what a user put there, refusing
 * paths and symlinks that lead elsewhere, the exact kiln-index.txt text,
 * and pruning what the last build did not make. The project is "proj" in
 * the case dir and the store is "store" beside it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_error.h"
#include "materialize.h"
#include "testutil.h"

/* The project folder, made (in a buffer of its own: tu_path's rotate). */
static const char *
proj(void **state)
{
	static char p[4096];

	snprintf(p, sizeof(p), "%s/proj", tu_dir(state));
	if (mkdir(p, 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
	return p;
}

static struct stat
stat_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		fail_msg("lstat %s: %s", path, strerror(errno));
	return st;
}

static int
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The whole file, NUL-terminated, in a static buffer. */
static const char *
slurp(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return buf;
}

/* Entries of a folder other than . and .., or -1 when it cannot be read. */
static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static kiln_id
put_text(kiln_store *s, const char *text)
{
	kiln_id id;

	assert_kiln(0, kiln_store_put_buf(s, text, strlen(text), &id));
	return id;
}

/* ---- materialize_output ------------------------------------------------- */

static void
first_materialize_hard_links_the_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "hero pixels");
	const char *root = proj(state);
	kiln_file_rec rec;
	struct stat st, blob;
	int rootfd;

	/* the folders do not exist yet: walked down from root and made */
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/sprites/hero.png", &id,
	                                  KILN_MAT_HARDLINK, 022, &rec));
	/* and the daemon's way, from its open root, into the folder now there */
	assert_true((rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0);
	assert_int_equal(unlink(tu_path(state, "proj/build/pc/sprites/hero.png")), 0);
	assert_kiln(0, materialize_output(s, root, rootfd, "build/pc/sprites/hero.png", &id,
	                                  KILN_MAT_HARDLINK, 022, &rec));
	close(rootfd);
	st = stat_of(tu_path(state, "proj/build/pc/sprites/hero.png"));
	blob = stat_of(tu_blob_path(state, &id));
	assert_int_equal(st.st_ino, blob.st_ino);
	assert_int_equal(st.st_nlink, 2);
	assert_string_equal(slurp(tu_path(state, "proj/build/pc/sprites/hero.png")),
	                    "hero pixels");
	assert_int_equal(rec.ino, st.st_ino);
	assert_int_equal(rec.size, 11);
	assert_int_equal(rec.mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 +
	                                   st.st_mtim.tv_nsec);
	assert_int_equal(rec.ctime_ns, (int64_t)st.st_ctim.tv_sec * 1000000000 +
	                                   st.st_ctim.tv_nsec);
	assert_memory_equal(rec.hash.b, id.b, sizeof(id.b));
	assert_int_equal(materialize_unchanged(root, "build/pc/sprites/hero.png", &rec), 1);
	/* Nothing but the file: no temporary name left behind. */
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc/sprites")), 1);
	kiln_store_close(s);
}

static void
second_materialize_is_a_no_op(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "atlas");
	const char *root = proj(state);
	kiln_file_rec a, b;

	assert_kiln(0, materialize_output(s, root, -1, "build/pc/ui/atlas.bin", &id, KILN_MAT_HARDLINK, 022, &a));
	tu_sleep_ms(20); /* a relink would show in the ctime */
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/ui/atlas.bin", &id, KILN_MAT_HARDLINK, 022, &b));
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(materialize_unchanged(root, "build/pc/ui/atlas.bin", &a), 1);
	assert_int_equal(stat_of(tu_blob_path(state, &id)).st_nlink, 2);
	kiln_store_close(s);
}

static void
a_file_put_there_by_someone_else_is_replaced_by_the_blob(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "the real thing");
	const char *root = proj(state);
	const char *out = tu_path(state, "proj/build/pc/a.txt");
	kiln_file_rec rec, old;

	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &id, KILN_MAT_HARDLINK, 022, &old));
	assert_int_equal(unlink(out), 0);
	tu_write_file(out, "a user's file", 13);
	assert_int_equal(materialize_unchanged(root, "build/pc/a.txt", &old), 0);
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &id, KILN_MAT_HARDLINK, 022, &rec));
	assert_int_equal(stat_of(out).st_ino, stat_of(tu_blob_path(state, &id)).st_ino);
	assert_string_equal(slurp(out), "the real thing");
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);

	/* A symlink there is replaced too, and what it pointed at is left. */
	tu_write_file(tu_path(state, "target"), "keep me", 7);
	assert_int_equal(unlink(out), 0);
	assert_int_equal(symlink(tu_path(state, "target"), out), 0);
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &id, KILN_MAT_HARDLINK, 022, &rec));
	assert_true(S_ISREG(stat_of(out).st_mode));
	assert_int_equal(stat_of(out).st_ino, stat_of(tu_blob_path(state, &id)).st_ino);
	assert_string_equal(slurp(tu_path(state, "target")), "keep me");
	kiln_store_close(s);
}

static void
an_output_moving_to_other_content_is_swapped_atomically(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id v1 = put_text(s, "version 1"), v2 = put_text(s, "version 2");
	const char *root = proj(state);
	const char *out = tu_path(state, "proj/build/pc/a.txt");
	kiln_file_rec r1, r2;

	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &v1, KILN_MAT_HARDLINK, 022, &r1));
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &v2, KILN_MAT_HARDLINK, 022, &r2));
	assert_string_equal(slurp(out), "version 2");
	assert_int_equal(stat_of(tu_blob_path(state, &v1)).st_nlink, 1);
	assert_int_equal(stat_of(tu_blob_path(state, &v2)).st_nlink, 2);
	assert_int_equal(materialize_unchanged(root, "build/pc/a.txt", &r1), 0);
	assert_int_equal(materialize_unchanged(root, "build/pc/a.txt", &r2), 1);
	kiln_store_close(s);
}

static void
unchanged_is_judged_by_stat(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "content");
	const char *root = proj(state);
	struct timespec times[2] = {{1, 0}, {1, 0}};
	kiln_file_rec rec;

	assert_kiln(0, materialize_output(s, root, -1, "build/pc/x", &id, KILN_MAT_COPY, 022, &rec));
	assert_int_equal(materialize_unchanged(root, "build/pc/x", &rec), 1);
	assert_int_equal(materialize_unchanged(root, "build/pc/missing", &rec), 0);
	assert_int_equal(materialize_unchanged(root, "build/../build/pc/x", &rec), 0);
	assert_int_equal(utimensat(AT_FDCWD, tu_path(state, "proj/build/pc/x"),
	                           times, 0), 0);
	assert_int_equal(materialize_unchanged(root, "build/pc/x", &rec), 0);
	kiln_store_close(s);
}

static void
bad_relpaths_are_refused(void **state)
{
	static const char *const bad[] = {
		"", "/etc/passwd", "a//b", "../x", "a/../b", "a/./b", "a/", ".",
		"..", "build/pc/..",
	};
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "x");
	const char *root = proj(state);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rv = materialize_output(s, root, -1, bad[i], &id, KILN_MAT_COPY, 022, NULL);

		if (rv != KILN_EINVAL)
			fail_msg("'%s': expected KILN_EINVAL, got %s", bad[i],
			         kiln_strerror(rv));
	}
	assert_int_equal(count_entries(root), 0);
	kiln_store_close(s);
}

static void
a_symlinked_folder_on_the_way_is_refused_and_nothing_written_outside(void **state)
{
	static const char *const links[] = {"proj/build/pc", "proj/build"};
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "x");
	const char *root = proj(state);
	struct index_entry e = {"a", id, 1, "a.png"};

	assert_int_equal(mkdir(tu_path(state, "elsewhere"), 0755), 0);
	assert_int_equal(mkdir(tu_path(state, "proj/build"), 0755), 0);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		if (i == 1) {
			assert_int_equal(unlink(tu_path(state, "proj/build/pc")), 0);
			assert_int_equal(rmdir(tu_path(state, "proj/build")), 0);
		}
		assert_int_equal(symlink(tu_path(state, "elsewhere"),
		                         tu_path(state, "%s", links[i])), 0);
		assert_kiln(KILN_EINVAL,
		            materialize_output(s, root, -1, "build/pc/a.png", &id, KILN_MAT_COPY, 022, NULL));
		assert_kiln(KILN_EINVAL,
		            materialize_output(s, root, -1, "build/pc/sub/a.png", &id, KILN_MAT_COPY, 022, NULL));
		assert_kiln(KILN_EINVAL, materialize_write_index(root, "pc", &e, 1, 022));
		assert_kiln(KILN_EINVAL, materialize_prune(root, "pc", NULL, 0));
		assert_int_equal(materialize_unchanged(root, "build/pc/a.png",
		                                       &(kiln_file_rec){0}), 0);
		if (count_entries(tu_path(state, "elsewhere")) != 0)
			fail_msg("something was written through %s", links[i]);
	}
	kiln_store_close(s);
}

static void
a_folder_where_the_file_goes_or_a_file_where_a_folder_goes_is_eexist(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "x");
	const char *root = proj(state);

	assert_int_equal(tu_sh("mkdir -p '%s/build/pc/a.png/inner'", root), 0);
	assert_kiln(KILN_EEXIST, materialize_output(s, root, -1, "build/pc/a.png", &id, KILN_MAT_COPY, 022, NULL));
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc/a.png")), 1);
	tu_write_file(tu_path(state, "proj/build/pc/file"), "f", 1);
	assert_kiln(KILN_EEXIST,
	            materialize_output(s, root, -1, "build/pc/file/b.png", &id, KILN_MAT_COPY, 022, NULL));
	assert_string_equal(slurp(tu_path(state, "proj/build/pc/file")), "f");
	kiln_store_close(s);
}

static void
a_blob_not_in_the_store_is_not_found_and_nothing_is_made(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = tu_key_of("never stored");
	const char *root = proj(state);

	int rootfd;

	assert_kiln(KILN_ENOTFOUND, materialize_output(s, root, -1, "build/pc/a", &id, KILN_MAT_HARDLINK, 022, NULL));
	assert_kiln(KILN_ENOTFOUND, materialize_output(s, root, -1, "build/pc/a", &id, KILN_MAT_COPY, 022, NULL));
	assert_int_equal(count_entries(root), 0);
	/* its folder there already: the link fails, nothing is left */
	assert_int_equal(mkdir(tu_path(state, "proj/build"), 0755), 0);
	assert_true((rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0);
	assert_kiln(KILN_ENOTFOUND, materialize_output(s, root, rootfd, "build/a", &id, KILN_MAT_COPY, 022, NULL));
	close(rootfd);
	assert_int_equal(count_entries(tu_path(state, "proj/build")), 0);
	kiln_store_close(s);
}

static void
another_filesystem_gets_a_copy(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "copied across");
	char root[] = "/dev/shm/kiln-unit-XXXXXX";
	char out[sizeof(root) + 32];
	kiln_file_rec rec;
	struct stat st, blob;

	if (mkdtemp(root) == NULL) {
		kiln_store_close(s);
		skip();
	}
	blob = stat_of(tu_blob_path(state, &id));
	if (stat_of(root).st_dev == blob.st_dev) {
		tu_rmtree(root);
		kiln_store_close(s);
		print_message("# /dev/shm is on the store's filesystem: no EXDEV to test\n");
		skip();
	}
	snprintf(out, sizeof(out), "%s/build/pc/a.txt", root);
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &id, KILN_MAT_HARDLINK, 022, &rec));
	st = stat_of(out);
	if (strcmp(slurp(out), "copied across") != 0 || st.st_ino == blob.st_ino ||
	    st.st_nlink != 1 || (st.st_mode & 0777) != 0644 || rec.ino != st.st_ino)
		fail_msg("copy: content '%s', ino %ju (blob %ju), nlink %ju, mode %o",
		         slurp(out), (uintmax_t)st.st_ino, (uintmax_t)blob.st_ino,
		         (uintmax_t)st.st_nlink, st.st_mode & 0777);
	assert_int_equal(materialize_unchanged(root, "build/pc/a.txt", &rec), 1);
	assert_int_equal(stat_of(tu_blob_path(state, &id)).st_nlink, 1);
	snprintf(out, sizeof(out), "%s/build/pc", root);
	assert_int_equal(count_entries(out), 1);
	tu_rmtree(root);
	kiln_store_close(s);
}

/* Whether this file system makes reflinks (FICLONE from a to a new b). */
static int
reflinks_here(const char *a, const char *b)
{
	int from = open(a, O_RDONLY | O_CLOEXEC), to, ok;

	to = open(b, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ok = from >= 0 && to >= 0 && ioctl(to, FICLONE, from) == 0;
	if (from >= 0)
		close(from);
	if (to >= 0)
		close(to);
	unlink(b);
	return ok;
}

/* path is a file of its own holding text: one link, not blob's inode. */
static void
assert_own_copy(const char *path, const char *blob, const char *text)
{
	struct stat st = stat_of(path), b = stat_of(blob);

	if (strcmp(slurp(path), text) != 0 || st.st_ino == b.st_ino ||
	    st.st_nlink != 1 || b.st_nlink != 1 || (st.st_mode & 0777) != 0644)
		fail_msg("%s: content '%s' (expected '%s'), ino %ju (blob %ju), nlink "
		         "%ju (blob %ju), mode %o: expected a 0644 copy of its own (0666 less mask 022)", path,
		         slurp(path), text, (uintmax_t)st.st_ino, (uintmax_t)b.st_ino,
		         (uintmax_t)st.st_nlink, (uintmax_t)b.st_nlink, st.st_mode & 0777);
}

static void
copy_mode_makes_files_of_their_own_and_writing_into_one_changes_nothing_else(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "shared bytes");
	const char *root = proj(state), *blob = tu_blob_path(state, &id);
	const char *a = tu_path(state, "proj/build/pc/c/a.txt");
	char b[4096];
	kiln_file_rec ra, rb;
	int fd;

	snprintf(b, sizeof b, "%s/proj/build/pc/c/b.txt", tu_dir(state));
	/* reflink (btrfs, XFS) or, here on ext4 or tmpfs, the copy it falls
	 * back to: either way no inode is shared */
	print_message("# reflinks here: %s\n",
	              reflinks_here(blob, tu_path(state, "probe")) ? "yes" : "no (copies)");
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/c/a.txt", &id,
	                                  KILN_MAT_COPY, 022, &ra));
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/c/b.txt", &id,
	                                  KILN_MAT_COPY, 022, &rb));
	assert_own_copy(a, tu_blob_path(state, &id), "shared bytes");
	assert_own_copy(b, tu_blob_path(state, &id), "shared bytes");
	assert_int_not_equal(stat_of(a).st_ino, stat_of(b).st_ino);
	assert_int_equal(ra.ino, stat_of(a).st_ino);
	assert_memory_equal(ra.hash.b, id.b, sizeof id.b);
	assert_int_equal(materialize_unchanged(root, "build/pc/c/a.txt", &ra), 1);
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc/c")), 2);
	/* what anyone may do to a build/ file: write into it */
	assert_int_equal(chmod(a, 0644), 0);
	assert_true((fd = open(a, O_WRONLY | O_TRUNC)) >= 0);
	assert_int_equal(write(fd, "EDITED", 6), 6);
	close(fd);
	assert_string_equal(slurp(b), "shared bytes");
	assert_kiln(0, kiln_store_verify(s, &id));
	assert_int_equal(materialize_unchanged(root, "build/pc/c/a.txt", &ra), 0);
	/* and the next materialize puts it back */
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/c/a.txt", &id,
	                                  KILN_MAT_COPY, 022, &ra));
	assert_own_copy(a, blob, "shared bytes");
	kiln_store_close(s);
}

static void
copy_mode_replaces_a_hard_link_left_by_hardlink_mode(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "was linked");
	const char *root = proj(state), *blob = tu_blob_path(state, &id);
	const char *out = tu_path(state, "proj/build/pc/x.bin");
	kiln_file_rec rec;

	assert_kiln(0, materialize_output(s, root, -1, "build/pc/x.bin", &id,
	                                  KILN_MAT_HARDLINK, 022, &rec));
	assert_int_equal(stat_of(out).st_ino, stat_of(blob).st_ino);
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/x.bin", &id,
	                                  KILN_MAT_COPY, 022, &rec));
	assert_own_copy(out, blob, "was linked");
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);
	kiln_store_close(s);
}

static void
copy_mode_never_writes_a_blob_that_does_not_match_its_name(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id id = put_text(s, "good bytes"), old = put_text(s, "older output");
	const char *root = proj(state), *blob = tu_blob_path(state, &id);
	const char *out = tu_path(state, "proj/build/pc/a.txt");

	if (reflinks_here(blob, tu_path(state, "probe"))) {
		/* a reflink is not read back (materialize.c, fill_copy) */
		print_message("# this file system makes reflinks: no copy to check\n");
		kiln_store_close(s);
		skip();
	}
	assert_kiln(0, materialize_output(s, root, -1, "build/pc/a.txt", &old,
	                                  KILN_MAT_COPY, 022, NULL));
	tu_flip_byte(blob, 2);
	assert_kiln(KILN_ECORRUPT, materialize_output(s, root, -1, "build/pc/a.txt", &id,
	                                              KILN_MAT_COPY, 022, NULL));
	/* the old file stays whole, and no temporary file is left */
	assert_string_equal(slurp(out), "older output");
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);
	assert_kiln(KILN_ECORRUPT, materialize_output(s, root, -1, "build/pc/new.txt", &id,
	                                              KILN_MAT_COPY, 022, NULL));
	assert_false(exists(tu_path(state, "proj/build/pc/new.txt")));
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);
	kiln_store_close(s);
}

/* ---- the index ---------------------------------------------------------- */

static void
index_has_the_exact_format_sorted_by_url(void **state)
{
	const char *root = proj(state);
	kiln_id a, b, c;
	char ha[33], hb[33], hc[33], want[1024];
	struct index_entry e[3];

	kiln_id_of_buf("a", 1, &a);
	kiln_id_of_buf("bb", 2, &b);
	kiln_id_of_buf("ccc", 3, &c);
	kiln_id_to_hex(&a, ha);
	kiln_id_to_hex(&b, hb);
	kiln_id_to_hex(&c, hc);
	e[0] = (struct index_entry){"ui/atlas#frames", b, 2, "ui/atlas.frames.json"};
	e[1] = (struct index_entry){"sprites/hero", a, 1, "sprites/hero.png"};
	e[2] = (struct index_entry){"ui/atlas", c, 12345678901ULL, "ui/atlas.png"};
	assert_kiln(0, materialize_write_index(root, "pc", e, 3, 022));
	snprintf(want, sizeof(want),
	         "kiln-index 1 pc\n"
	         "sprites/hero\t%s\t1\tsprites/hero.png\n"
	         "ui/atlas\t%s\t12345678901\tui/atlas.png\n"
	         "ui/atlas#frames\t%s\t2\tui/atlas.frames.json\n",
	         ha, hc, hb);
	assert_string_equal(slurp(tu_path(state, "proj/build/pc/kiln-index.txt")), want);
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);

	/* Rewritten whole, by rename. */
	assert_kiln(0, materialize_write_index(root, "pc", e, 1, 022));
	snprintf(want, sizeof(want), "kiln-index 1 pc\nsprites/hero\t%s\t1\tsprites/hero.png\n", ha);
	assert_string_equal(slurp(tu_path(state, "proj/build/pc/kiln-index.txt")), want);
	assert_kiln(0, materialize_write_index(root, "pc", e, 0, 022));
	assert_string_equal(slurp(tu_path(state, "proj/build/pc/kiln-index.txt")),
	                    "kiln-index 1 pc\n");
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);
}

/* Written beside its place first: the old map stays, whole, until the new
 * one is put in its place; one refused leaves nothing behind. */
static void
index_written_aside_appears_only_when_put(void **state)
{
	const char *root = proj(state);
	char map[PATH_MAX], dir[PATH_MAX], want[512], hex[33];
	struct index_entry e[1];
	struct index_tmp t;
	kiln_id a;

	snprintf(map, sizeof map, "%s", tu_path(state, "proj/build/pc/kiln-index.txt"));
	snprintf(dir, sizeof dir, "%s", tu_path(state, "proj/build/pc"));
	kiln_id_of_buf("a", 1, &a);
	kiln_id_to_hex(&a, hex);
	e[0] = (struct index_entry){"sprites/hero", a, 1, "sprites/hero.png"};
	assert_kiln(0, materialize_write_index(root, "pc", e, 0, 022));

	assert_kiln(0, materialize_index_write_tmp(root, "pc", e, 1, 022, &t));
	assert_string_equal(slurp(map), "kiln-index 1 pc\n");
	assert_int_equal(count_entries(dir), 2);   /* the map and the new one */
	assert_kiln(0, materialize_index_put(&t));
	snprintf(want, sizeof want, "kiln-index 1 pc\nsprites/hero\t%s\t1\tsprites/hero.png\n", hex);
	assert_string_equal(slurp(map), want);
	assert_int_equal(count_entries(dir), 1);
	assert_int_equal(t.dfd, -1);

	assert_kiln(KILN_EINVAL, materialize_index_put(&t));   /* ended */

	/* refused up front: nothing written, nothing to put */
	e[0].file = "../x";
	assert_kiln(KILN_EINVAL, materialize_index_write_tmp(root, "pc", e, 1, 022, &t));
	assert_int_equal(t.dfd, -1);
	assert_int_equal(count_entries(dir), 1);
}

static void
index_refuses_what_its_format_cannot_hold(void **state)
{
	static const struct {
		const char *profile, *url1, *url2, *file;
	} cases[] = {
		{"pc", "a\tb", "c", "x"},
		{"pc", "a\nb", "c", "x"},
		{"pc", "a", "a", "x"},
		{"pc", "a", "b", "x\ty"},
		{"pc", "a", "b", "../x"},
		{"pc", "a", "b", "/x"},
		{"../pc", "a", "b", "x"},
		{"", "a", "b", "x"},
	};
	const char *root = proj(state);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct index_entry e[2] = {{cases[i].url1, {{0}}, 0, cases[i].file},
		                           {cases[i].url2, {{0}}, 0, "y"}};
		int rv = materialize_write_index(root, cases[i].profile, e, 2, 022);

		if (rv != KILN_EINVAL)
			fail_msg("case %zu: expected KILN_EINVAL, got %s", i,
			         kiln_strerror(rv));
	}
	assert_int_equal(count_entries(root), 0);
}

/* ---- pruning ------------------------------------------------------------ */

static void
prune_removes_stale_files_and_empty_folders_and_keeps_the_rest(void **state)
{
	static const char *const keep[] = {"a.png", "deep/er/kept.bin", "sub/keep.bin"};
	static const char *const present[] = {
		"a.png", "sub/keep.bin", "deep/er/kept.bin", "kiln-index.txt",
	};
	static const char *const gone[] = {
		"old.png", "sub/stale.bin", "empty", "stale", "sub/kiln-index.txt",
		"filelink", "dirlink", "deep/er/x",
	};
	const char *root = proj(state);

	assert_int_equal(tu_sh("cd '%s' && mkdir -p build/pc/sub build/pc/empty "
	                       "build/pc/stale/deep build/pc/deep/er ../outside && "
	                       "echo o > ../outside/file && "
	                       "for f in a.png old.png sub/keep.bin sub/stale.bin "
	                       "stale/deep/x deep/er/kept.bin deep/er/x "
	                       "kiln-index.txt sub/kiln-index.txt; do echo $f > build/pc/$f; done && "
	                       "ln -s ../../../outside/file build/pc/filelink && "
	                       "ln -s ../../../outside build/pc/dirlink", root), 0);
	assert_kiln(0, materialize_prune(root, "pc", keep, 3));
	for (size_t i = 0; i < sizeof(present) / sizeof(present[0]); i++)
		if (!exists(tu_path(state, "proj/build/pc/%s", present[i])))
			fail_msg("prune removed %s", present[i]);
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		if (exists(tu_path(state, "proj/build/pc/%s", gone[i])))
			fail_msg("prune left %s", gone[i]);
	assert_string_equal(slurp(tu_path(state, "outside/file")), "o\n");
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 4);

	/* Nothing kept: only the index and the profile folder stay. */
	assert_kiln(0, materialize_prune(root, "pc", NULL, 0));
	assert_int_equal(count_entries(tu_path(state, "proj/build/pc")), 1);
	/* A profile never built is nothing to prune. */
	assert_kiln(0, materialize_prune(root, "mobile", NULL, 0));
	assert_kiln(KILN_EINVAL, materialize_prune(root, "../x", NULL, 0));
}

/* Another thread may be putting an output in place while a build prunes:
 * its folder, made and still empty, and its temporary name stay; a crashed
 * daemon's temporary name (another pid) goes. */
static void
prune_keeps_the_folders_of_kept_paths_and_this_process_temporaries(void **state)
{
	static const char *const keep[] = {"a/b/new.bin", "fonts/"};
	const char *root = proj(state);
	char mine[64];

	snprintf(mine, sizeof mine, ".kiln-tmp-%ld-7", (long)getpid());
	assert_int_equal(tu_sh("cd '%s' && mkdir -p build/pc/a/b build/pc/c build/pc/fonts/x && "
	                       "echo t > build/pc/c/%s && echo f > build/pc/fonts/x/g && "
	                       "echo t > build/pc/.kiln-tmp-1-3 && echo d > build/pc/c/dead",
	                       root, mine), 0);
	assert_kiln(0, materialize_prune(root, "pc", keep, 2));
	if (!exists(tu_path(state, "proj/build/pc/a/b")))
		fail_msg("prune removed the empty folder of a kept path");
	if (!exists(tu_path(state, "proj/build/pc/c/%s", mine)))
		fail_msg("prune removed this process's temporary file");
	if (!exists(tu_path(state, "proj/build/pc/fonts/x/g")))
		fail_msg("prune went into a kept folder output");
	if (exists(tu_path(state, "proj/build/pc/.kiln-tmp-1-3")))
		fail_msg("prune left another process's temporary file");
	if (exists(tu_path(state, "proj/build/pc/c/dead")))
		fail_msg("prune left c/dead");
}

/* The intermediates' folder is pruned the same way. */
static void
prune_in_another_top_folder(void **state)
{
	static const char *const keep[] = {"pcm/a.pcm"};
	const char *root = proj(state);

	assert_int_equal(tu_sh("cd '%s' && mkdir -p .kiln/intermediate/pc/pcm build/pc && "
	                       "echo a > .kiln/intermediate/pc/pcm/a.pcm && "
	                       "echo b > .kiln/intermediate/pc/pcm/b.pcm && echo c > build/pc/c",
	                       root), 0);
	assert_kiln(0, materialize_prune_in(root, ".kiln/intermediate", "pc", keep, 1));
	if (!exists(tu_path(state, "proj/.kiln/intermediate/pc/pcm/a.pcm")))
		fail_msg("prune removed a kept intermediate");
	if (exists(tu_path(state, "proj/.kiln/intermediate/pc/pcm/b.pcm")))
		fail_msg("prune left pcm/b.pcm");
	if (!exists(tu_path(state, "proj/build/pc/c")))
		fail_msg("pruning the intermediates touched build/");
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(first_materialize_hard_links_the_blob),
		T(second_materialize_is_a_no_op),
		T(a_file_put_there_by_someone_else_is_replaced_by_the_blob),
		T(an_output_moving_to_other_content_is_swapped_atomically),
		T(unchanged_is_judged_by_stat),
		T(bad_relpaths_are_refused),
		T(a_symlinked_folder_on_the_way_is_refused_and_nothing_written_outside),
		T(a_folder_where_the_file_goes_or_a_file_where_a_folder_goes_is_eexist),
		T(a_blob_not_in_the_store_is_not_found_and_nothing_is_made),
		T(another_filesystem_gets_a_copy),
		T(copy_mode_makes_files_of_their_own_and_writing_into_one_changes_nothing_else),
		T(copy_mode_replaces_a_hard_link_left_by_hardlink_mode),
		T(copy_mode_never_writes_a_blob_that_does_not_match_its_name),
		T(index_has_the_exact_format_sorted_by_url),
		T(index_written_aside_appears_only_when_put),
		T(index_refuses_what_its_format_cannot_hold),
		T(prune_removes_stale_files_and_empty_folders_and_keeps_the_rest),
		T(prune_keeps_the_folders_of_kept_paths_and_this_process_temporaries),
		T(prune_in_another_top_folder),
	};
	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
