/* materialize.c — outputs under build/<profile>/ and kiln-index.txt (see
 * materialize.h for the index format).
 *
 * Every path is walked from the project root one folder at a time with
 * openat(O_NOFOLLOW | O_DIRECTORY), so a symlink a user (or a tool) left in
 * build/ cannot send a write outside the project; the last step then works
 * on names relative to that folder's fd. A file that replaces another is
 * made under a temporary name in its own folder (a hard link to the blob,
 * or a copy) and renamed over the old one: a game reading build/ sees the
 * old file or the new one, never none, and never part of a copy (a copy
 * is written unnamed, O_TMPFILE, and only then linked at a name).
 *
 * Threads: no state of its own but the temporary-name counter (atomic). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kiln_error.h"
#include "materialize.h"

#define INDEX_NAME "kiln-index.txt"

static atomic_uint tmp_counter;

/* A fresh temporary name for this process in a folder. */
static void
tmp_name(char *buf, size_t len)
{
	snprintf(buf, len, ".kiln-tmp-%ld-%u", (long)getpid(),
	         atomic_fetch_add(&tmp_counter, 1));
}

/* The index map's temporary name. Two builds of a profile can end at once,
 * each writing its map beside build/<profile>/kiln-index.txt while a full
 * one prunes that folder: pruning keeps this daemon's (a crashed one's go). */
#define INDEX_TMP ".kiln-index-tmp-"

static void
index_tmp_name(char *buf, size_t len)
{
	snprintf(buf, len, INDEX_TMP "%ld-%u", (long)getpid(),
	         atomic_fetch_add(&tmp_counter, 1));
}

static int
index_tmp_ours(const char *name)
{
	char pre[64];
	int n = snprintf(pre, sizeof(pre), INDEX_TMP "%ld-", (long)getpid());

	return strncmp(name, pre, (size_t)n) == 0;
}

static int64_t
ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* relpath is relative, and each of its '/'-separated parts is a real name:
 * not empty, ".", ".." or longer than NAME_MAX. */
static int
rel_check(const char *relpath)
{
	const char *p = relpath, *end;

	if (relpath == NULL || relpath[0] == '\0' || relpath[0] == '/' ||
	    strlen(relpath) >= PATH_MAX)
		return KILN_EINVAL;
	for (; *p != '\0'; p = *end == '/' ? end + 1 : end) {
		end = strchrnul(p, '/');
		if (end == p || end - p > NAME_MAX ||
		    (end - p == 1 && p[0] == '.') ||
		    (end - p == 2 && p[0] == '.' && p[1] == '.'))
			return KILN_EINVAL;
		if (*end == '/' && end[1] == '\0')
			return KILN_EINVAL; /* a trailing '/' names no file */
	}
	return 0;
}

/* Why openat(dfd, name, O_DIRECTORY | O_NOFOLLOW) failed with err: a
 * symlink is refused (KILN_EINVAL), anything else but a folder is in the
 * way (KILN_EEXIST). */
static int
open_dir_err(int dfd, const char *name, int err)
{
	struct stat st;

	if (err == ELOOP || err == ENOTDIR) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !S_ISLNK(st.st_mode))
			return KILN_EEXIST;
		return KILN_EINVAL;
	}
	return kiln_err_from_errno(err);
}

/* Open the folder name in dfd, without following a symlink; when create,
 * make it first if it is missing, mode 0777 less mask (kilnd's own umask
 * is 077: the mode is set after mkdir). */
static int
open_dir_at(int dfd, const char *name, int create, mode_t mask, int *fd)
{
	*fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dfd, name, 0777) == 0) {
			*fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (*fd >= 0 && fchmod(*fd, 0777 & ~mask) != 0) {
				int e = errno;
				close(*fd);
				return kiln_err_from_errno(e);
			}
			return *fd < 0 ? open_dir_err(dfd, name, errno) : 0;
		}
		if (errno != EEXIST)
			return kiln_err_from_errno(errno);
		*fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	return *fd < 0 ? open_dir_err(dfd, name, errno) : 0;
}

/* Open the folder of root/relpath (relpath checked) walking down from root,
 * making missing folders (mode 0777 less mask) when create. *dfd is that
 * folder, *name the last part of relpath (a pointer into it). */
static int
walk_parents(const char *root, const char *relpath, int create, mode_t mask,
             int *dfd, const char **name)
{
	char part[NAME_MAX + 1];
	const char *p = relpath, *end;
	int fd, sub, rv;

	if ((fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return kiln_err_from_errno(errno);
	while ((end = strchr(p, '/')) != NULL) {
		memcpy(part, p, (size_t)(end - p));
		part[end - p] = '\0';
		rv = open_dir_at(fd, part, create, mask, &sub);
		close(fd);
		if (rv != 0)
			return rv;
		fd = sub;
		p = end + 1;
	}
	*dfd = fd;
	*name = p;
	return 0;
}

static void
rec_of_stat(const struct stat *st, const kiln_id *id, kiln_file_rec *rec)
{
	rec->size = (uint64_t)st->st_size;
	rec->mtime_ns = ts_ns(&st->st_mtim);
	rec->ino = (uint64_t)st->st_ino;
	rec->ctime_ns = ts_ns(&st->st_ctim);
	rec->hash = *id;
}

/* Cleared the first time the file system refuses a clone (ext4, tmpfs,
 * or build/ and the store on two file systems): one daemon serves one
 * project, so every later output would be refused the same way, and the
 * copy then opens the blob once instead of twice. */
static atomic_int clone_works = 1;

/* Make the new file fd a reflink of blob id: 0, or KILN_ENOTSUP (no
 * reflink here: copy instead), KILN_ENOTFOUND. */
static int
clone_blob(kiln_store *s, const kiln_id *id, int fd)
{
	int bfd, rv;

	if (!atomic_load_explicit(&clone_works, memory_order_relaxed))
		return KILN_ENOTSUP;
	if ((rv = kiln_store_open_blob(s, id, &bfd)) != 0)
		return rv;
	rv = ioctl(fd, FICLONE, bfd) == 0 ? 0 : errno;
	close(bfd);
	if (rv == EOPNOTSUPP || rv == ENOTTY || rv == EINVAL || rv == EXDEV ||
	    rv == ENOSYS)
		atomic_store_explicit(&clone_works, 0, memory_order_relaxed);
	return rv == 0 ? 0 : KILN_ENOTSUP;
}

/* Fill the new file fd with blob id's bytes: a reflink where the file
 * system has them, else a copy checked against id as it is written
 * (kiln_store_copy_out hashes the whole blob before writing a byte). A
 * reflink is not read back: the engine hashed the blob just before (the
 * put after a run, kiln_store_verify before a cached result is served
 * again), and reading it would cost most of what the clone saves. */
static int
fill_copy(kiln_store *s, const kiln_id *id, int fd)
{
	int rv = clone_blob(s, id, fd);

	return rv == KILN_ENOTSUP ? kiln_store_copy_out(s, id, fd) : rv;
}

/* Rename tmp over name in dfd; tmp is removed when that fails. */
static int
rename_into(int dfd, const char *tmp, const char *name)
{
	int rv = 0;

	if (renameat(dfd, tmp, dfd, name) != 0) {
		rv = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST
		             ? KILN_EEXIST : kiln_err_from_errno(errno);
		unlinkat(dfd, tmp, 0);
	}
	return rv;
}

/* Make tmp in dfd a copy of blob id, mode 0666 less mask. */
static int
copy_blob_at(kiln_store *s, const kiln_id *id, int dfd, const char *tmp,
             mode_t mask)
{
	int fd, rv;

	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return kiln_err_from_errno(errno);
	rv = fchmod(fd, 0666 & ~mask) != 0 ? kiln_err_from_errno(errno)
	     : fill_copy(s, id, fd);
	if (close(fd) != 0 && rv == 0)
		rv = kiln_err_from_errno(errno);
	if (rv != 0)
		unlinkat(dfd, tmp, 0);
	return rv;
}

/* place_copy where O_TMPFILE is missing: made under a temporary name and
 * renamed. */
static int
place_copy_named(kiln_store *s, const kiln_id *id, int dfd, const char *name,
                 mode_t mask)
{
	char tmp[64];
	int rv = KILN_EEXIST;

	/* EEXIST: a name left by a crashed daemon of our pid */
	for (int tries = 0; tries < 100 && rv == KILN_EEXIST; tries++) {
		tmp_name(tmp, sizeof(tmp));
		rv = copy_blob_at(s, id, dfd, tmp, mask);
	}
	return rv != 0 ? rv : rename_into(dfd, tmp, name);
}

/* Cleared when linking by AT_EMPTY_PATH is refused (it needs
 * CAP_DAC_READ_SEARCH): /proc/self/fd/N then, every time. */
static atomic_int empty_path_works = 1;

/* Give the unnamed file fd (O_TMPFILE) the name name in dfd: 0 or an
 * errno (EEXIST: the name is taken). */
static int
link_unnamed(int fd, int dfd, const char *name)
{
	char proc[64];

	if (atomic_load_explicit(&empty_path_works, memory_order_relaxed)) {
		if (linkat(fd, "", dfd, name, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != ENOENT && errno != EPERM)
			return errno;
		atomic_store_explicit(&empty_path_works, 0, memory_order_relaxed);
	}
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
}

/* The unnamed file fd put at name in dfd over what is there: linked under
 * a temporary name, then renamed. */
static int
replace_with_unnamed(int fd, int dfd, const char *name)
{
	char tmp[64];
	int e = EEXIST;

	/* EEXIST: a name left by a crashed daemon of our pid */
	for (int tries = 0; tries < 100 && e == EEXIST; tries++) {
		tmp_name(tmp, sizeof(tmp));
		e = link_unnamed(fd, dfd, tmp);
	}
	return e != 0 ? kiln_err_from_errno(e) : rename_into(dfd, tmp, name);
}

/* Put a copy of blob id at name in dfd, replacing whatever is there (a
 * hard link to the blob included), so that a reader sees the old file or
 * the whole new one, never part of it. The copy is made as an unnamed
 * file (O_TMPFILE) and linked at its name: a clean build/ (a restore)
 * takes one directory update a file where a named temporary and a rename
 * took two, each under the folder's lock the workers contend for. */
static int
place_copy(kiln_store *s, const kiln_id *id, int dfd, const char *name,
           mode_t mask)
{
	int fd, rv, e;

	fd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL
		       ? place_copy_named(s, id, dfd, name, mask)
		       : kiln_err_from_errno(errno);
	rv = fchmod(fd, 0666 & ~mask) != 0 ? kiln_err_from_errno(errno) : 0;
	if (rv == 0 && (rv = fill_copy(s, id, fd)) == 0) {
		e = link_unnamed(fd, dfd, name);
		rv = e == EEXIST ? replace_with_unnamed(fd, dfd, name)
		                 : e != 0 ? kiln_err_from_errno(e) : 0;
	}
	close(fd);
	return rv;
}

/* Put blob id (its file at blob) at name in dfd, replacing what is there. */
static int
place_blob(kiln_store *s, const kiln_id *id, const char *blob, int dfd,
           const char *name, mode_t mask)
{
	char tmp[64];
	int rv = 0, tries;

	for (tries = 0;; tries++) {
		tmp_name(tmp, sizeof(tmp));
		if (linkat(AT_FDCWD, blob, dfd, tmp, 0) == 0)
			break;
		if (errno == EEXIST && tries < 100)
			continue; /* left by a crashed daemon of our pid */
		if (errno == EXDEV || errno == EMLINK || errno == EPERM) {
			rv = copy_blob_at(s, id, dfd, tmp, mask);
			break;
		}
		return errno == ENOENT ? KILN_ENOTFOUND : kiln_err_from_errno(errno);
	}
	return rv != 0 ? rv : rename_into(dfd, tmp, name);
}

/* The folder of an output opened with one openat2 that refuses a symlink
 * anywhere below root (walk_parents opens and closes every folder on the
 * way, four system calls a level), from rootfd when it is open (-1: root
 * opened by path). 0, or KILN_ENOTFOUND: not opened (a missing folder, a
 * kernel without openat2), for walk_parents to do. */
static int
output_dir(const char *root, int rootfd, const char *relpath, int *dfd,
           const char **name)
{
	const char *slash = strrchr(relpath, '/');
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	                       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH};
	char dir[PATH_MAX];
	int rfd = rootfd, fd;

	if (slash == NULL || (size_t)(slash - relpath) >= sizeof dir ||
	    (rfd < 0 && (rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
		return KILN_ENOTFOUND;
	memcpy(dir, relpath, (size_t)(slash - relpath));
	dir[slash - relpath] = '\0';
	fd = (int)syscall(SYS_openat2, rfd, dir, &how, sizeof how);
	if (rfd != rootfd)
		close(rfd);
	if (fd < 0)
		return KILN_ENOTFOUND;
	*dfd = fd;
	*name = slash + 1;
	return 0;
}

static int
blob_stat(const char *blob, struct stat *st)
{
	if (stat(blob, st) == 0)
		return 0;
	return errno == ENOENT ? KILN_ENOTFOUND : kiln_err_from_errno(errno);
}

/* The link to the blob failed with EEXIST (the name is taken) or ENOENT
 * (the blob is missing): nothing to do when the name already is the
 * blob's inode, else what stands there is replaced. */
static int
replace_if_other(kiln_store *s, const kiln_id *id, const char *blob, int dfd,
                 const char *name, mode_t mask)
{
	struct stat bst, cur;
	int rv;

	if ((rv = blob_stat(blob, &bst)) != 0)
		return rv;
	if (fstatat(dfd, name, &cur, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? place_blob(s, id, blob, dfd, name, mask)
		                       : kiln_err_from_errno(errno);
	if (S_ISDIR(cur.st_mode))
		return KILN_EEXIST;
	if (!S_ISREG(cur.st_mode) || cur.st_ino != bst.st_ino || cur.st_dev != bst.st_dev)
		return place_blob(s, id, blob, dfd, name, mask);
	return 0;
}

/* Hard-link mode: a link to the blob at name in dfd, or nothing to do
 * when name already is the blob's inode. */
static int
place_link(kiln_store *s, const kiln_id *id, const char *blob, int dfd,
           const char *name, mode_t mask)
{
	int e;

	/* A clean build/ (a full build, a restore) takes one link and no
	 * look first: a taken name says EEXIST, a blob missing from the
	 * store ENOENT (the folder is open). The temp name and rename of
	 * place_blob are for replacing a file atomically. */
	e = linkat(AT_FDCWD, blob, dfd, name, 0) == 0 ? 0 : errno;
	if (e == EEXIST || e == ENOENT)
		return replace_if_other(s, id, blob, dfd, name, mask);
	if (e != 0)
		return place_blob(s, id, blob, dfd, name, mask);   /* EXDEV: a copy */
	return 0;
}

int
materialize_output(kiln_store *s, const char *root, int rootfd, const char *relpath,
                   const kiln_id *id, kiln_mat_mode mode, mode_t mask,
                   kiln_file_rec *st)
{
	char blob[PATH_MAX];
	struct stat bst, cur;
	const char *name;
	int dfd, rv;

	if ((rv = rel_check(relpath)) != 0 ||
	    (rv = kiln_store_blob_path(s, id, blob, sizeof(blob))) != 0)
		return rv;
	/* a blob not in the store makes no folders */
	if (output_dir(root, rootfd, relpath, &dfd, &name) != 0 &&
	    ((rv = blob_stat(blob, &bst)) != 0 ||
	     (rv = walk_parents(root, relpath, 1, mask, &dfd, &name)) != 0))
		return rv;
	if (mode == KILN_MAT_HARDLINK)
		rv = place_link(s, id, blob, dfd, name, mask);
	else
		rv = place_copy(s, id, dfd, name, mask);
	if (rv == 0 && st != NULL) {
		if (fstatat(dfd, name, &cur, AT_SYMLINK_NOFOLLOW) == 0)
			rec_of_stat(&cur, id, st);
		else
			rv = kiln_err_from_errno(errno);
	}
	close(dfd);
	return rv;
}

int
materialize_dir_open(const char *root, const char *relpath, int create, mode_t mask,
                     int *fd)
{
	const char *name;
	int dfd, rv;

	*fd = -1;
	if ((rv = rel_check(relpath)) != 0 ||
	    (rv = walk_parents(root, relpath, create, mask, &dfd, &name)) != 0)
		return rv;
	rv = open_dir_at(dfd, name, create, mask, fd);
	/* a file or symlink where the folder goes (the output was a file
	 * before): replaced, as a file output replaces what is in its way */
	if (create && (rv == KILN_EEXIST || rv == KILN_EINVAL)) {
		if (unlinkat(dfd, name, 0) == 0)
			rv = open_dir_at(dfd, name, create, mask, fd);
		else
			rv = kiln_err_from_errno(errno);
	}
	close(dfd);
	return rv;
}

int
materialize_unchanged(const char *root, const char *relpath,
                      const kiln_file_rec *rec)
{
	struct stat st;
	const char *name;
	int dfd, ok;

	if (rel_check(relpath) != 0 ||
	    walk_parents(root, relpath, 0, 0, &dfd, &name) != 0)
		return 0;
	ok = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	     S_ISREG(st.st_mode) && (uint64_t)st.st_size == rec->size &&
	     ts_ns(&st.st_mtim) == rec->mtime_ns &&
	     (uint64_t)st.st_ino == rec->ino && ts_ns(&st.st_ctim) == rec->ctime_ns;
	close(dfd);
	return ok;
}

/* ---- the index ---------------------------------------------------------- */

static int
entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct index_entry *)a)->url,
	              ((const struct index_entry *)b)->url);
}

/* A field of an index line: no tab, line end or other control character. */
static int
field_check(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return KILN_EINVAL;
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return KILN_EINVAL;
	return 0;
}

static int
index_check(struct index_entry *e, size_t n)
{
	size_t i;
	int rv;

	int sorted = 1;

	for (i = 0; i < n; i++) {
		char file[PATH_MAX];
		size_t fl = e[i].file != NULL ? strlen(e[i].file) : 0;
		/* a folder output's line ends its path with one '/' */
		if (fl == 0 || fl >= sizeof file)
			return KILN_EINVAL;
		memcpy(file, e[i].file, fl + 1);
		if (fl > 1 && file[fl - 1] == '/')
			file[fl - 1] = '\0';
		if ((rv = field_check(e[i].url)) != 0 ||
		    (rv = field_check(e[i].file)) != 0 || (rv = rel_check(file)) != 0)
			return rv;
	}
	/* callers usually pass them sorted: one pass to see, no sort */
	for (i = 1; i < n && sorted; i++)
		sorted = strcmp(e[i - 1].url, e[i].url) < 0;
	if (!sorted) {
		qsort(e, n, sizeof(*e), entry_cmp);
		for (i = 1; i < n; i++)
			if (strcmp(e[i - 1].url, e[i].url) == 0)
				return KILN_EINVAL; /* a game could not tell them apart */
	}
	return 0;
}

#define INDEX_WRITE_BUF (1 << 20)

/* Write the index text into the new file fd (taken over, closed). */
static int
index_write_fd(int fd, const char *profile, const struct index_entry *e,
               size_t n)
{
	char hex[KILN_ID_HEX_LEN + 1], *vbuf;
	FILE *f;
	int rv = 0;

	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		return KILN_ENOMEM;
	}
	/* Written a MiB at a time (glibc sizes a buffer it allocates itself
	 * by st_blksize, 4 KiB, whatever setvbuf asks): each write into
	 * build/<profile>/ is an event the daemon's own watcher wakes up for,
	 * so fewer, larger writes. Without the memory, 4 KiB. */
	if ((vbuf = malloc(INDEX_WRITE_BUF)) != NULL)
		setvbuf(f, vbuf, _IOFBF, INDEX_WRITE_BUF);
	/* 100,000 lines: whole fields with fputs, not a format each, and
	 * without stdio's lock on every call (f is ours alone) */
	fprintf(f, "kiln-index 1 %s\n", profile);
	for (size_t i = 0; i < n; i++) {
		char num[24], *p = num + sizeof num;
		uint64_t size = e[i].size;
		*--p = '\0';
		do
			*--p = (char)('0' + size % 10);
		while ((size /= 10) != 0);
		kiln_id_to_hex(&e[i].id, hex);
		fputs_unlocked(e[i].url, f);
		putc_unlocked('\t', f);
		fputs_unlocked(hex, f);
		putc_unlocked('\t', f);
		fputs_unlocked(p, f);
		putc_unlocked('\t', f);
		fputs_unlocked(e[i].file, f);
		putc_unlocked('\n', f);
	}
	if (fflush(f) != 0 || ferror(f))
		rv = kiln_err_from_errno(errno);
	if (fclose(f) != 0 && rv == 0)
		rv = kiln_err_from_errno(errno);
	free(vbuf);
	return rv;
}

int
materialize_index_write_tmp(const char *root, const char *profile,
                            struct index_entry *entries, size_t n,
                            mode_t mask, struct index_tmp *t)
{
	char rel[PATH_MAX];
	const char *name;
	int fd, rv;

	t->dfd = -1;
	if ((rv = kiln_profile_check(profile)) != 0 ||
	    (rv = index_check(entries, n)) != 0)
		return rv;
	snprintf(rel, sizeof(rel), "build/%s/" INDEX_NAME, profile);
	if ((rv = walk_parents(root, rel, 1, mask, &t->dfd, &name)) != 0) {
		t->dfd = -1;
		return rv;
	}
	/* O_EXCL: a name left by a crash may be a hard link to a blob. */
	for (int tries = 0; tries < 100; tries++) {
		index_tmp_name(t->tmp, sizeof(t->tmp));
		fd = openat(t->dfd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		rv = kiln_err_from_errno(errno);
	else if (fchmod(fd, 0666 & ~mask) != 0) {
		rv = kiln_err_from_errno(errno);
		close(fd);
		unlinkat(t->dfd, t->tmp, 0);
	} else if ((rv = index_write_fd(fd, profile, entries, n)) != 0) {
		unlinkat(t->dfd, t->tmp, 0);
	}
	if (rv != 0) {
		close(t->dfd);
		t->dfd = -1;
	}
	return rv;
}

int
materialize_index_put(struct index_tmp *t)
{
	int rv = 0;

	if (t->dfd < 0)
		return KILN_EINVAL;
	if (renameat(t->dfd, t->tmp, t->dfd, INDEX_NAME) != 0) {
		rv = errno == EISDIR ? KILN_EEXIST : kiln_err_from_errno(errno);
		unlinkat(t->dfd, t->tmp, 0);
	}
	close(t->dfd);
	t->dfd = -1;
	return rv;
}

void
materialize_index_discard(struct index_tmp *t)
{
	if (t->dfd < 0)
		return;
	unlinkat(t->dfd, t->tmp, 0);
	close(t->dfd);
	t->dfd = -1;
}

int
materialize_write_index(const char *root, const char *profile,
                        struct index_entry *entries, size_t n, mode_t mask)
{
	struct index_tmp t;
	int rv = materialize_index_write_tmp(root, profile, entries, n, mask, &t);

	return rv != 0 ? rv : materialize_index_put(&t);
}

/* ---- pruning ------------------------------------------------------------ */

struct prune {
	const char *const *keep;
	size_t nkeep;
	char rel[PATH_MAX]; /* the folder being read, relative, '/'-ended */
	int rv;
};

static int
keep_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

/* Whether name is a temporary file of this daemon's (tmp_name): a
 * worker of another build is putting an output in place through it. */
static int
tmp_ours(const char *name)
{
	char pre[64];
	int n = snprintf(pre, sizeof(pre), ".kiln-tmp-%ld-", (long)getpid());

	return strncmp(name, pre, (size_t)n) == 0;
}

static int
prune_keeps(struct prune *pr, size_t len, const char *name)
{
	if (len == 0 && (strcmp(name, INDEX_NAME) == 0 || index_tmp_ours(name)))
		return 1;
	if (tmp_ours(name))
		return 1;
	if (pr->nkeep == 0)
		return 0;
	snprintf(pr->rel + len, sizeof(pr->rel) - len, "%s", name);
	return bsearch(pr->rel, pr->keep, pr->nkeep, sizeof(*pr->keep),
	               keep_cmp) != NULL;
}

/* Whether a kept path lies under the folder pr->rel ('/'-ended): the
 * folder stays even while it is empty (the output is being put there:
 * its folder made, the file not linked yet). */
static int
prune_holds(const struct prune *pr)
{
	size_t lo = 0, hi = pr->nkeep, len = strlen(pr->rel);

	while (lo < hi) {   /* the first kept path not before rel */
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(pr->keep[mid], pr->rel) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pr->nkeep && strncmp(pr->keep[lo], pr->rel, len) == 0;
}

/* Remove what pr does not keep in the folder fd (taken over, closed), whose
 * path relative to build/<profile>/ is pr->rel[0..len). Errors are noted in
 * pr->rv and the rest is pruned all the same. */
static void
prune_dir(struct prune *pr, int fd, size_t len)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int sub, isdir;

	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		pr->rv = KILN_EIO;
		return;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		size_t nlen = strlen(de->d_name);

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		isdir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN)
			isdir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			        S_ISDIR(st.st_mode);
		if (len + nlen + 2 > sizeof(pr->rel)) {
			pr->rv = KILN_EIO;
			continue;
		}
		if (!isdir) {
			if (!prune_keeps(pr, len, de->d_name) &&
			    unlinkat(dirfd(d), de->d_name, 0) != 0 && errno != ENOENT)
				pr->rv = KILN_EIO;
			continue;
		}
		/* a folder output ("dir/" kept) is its own: folder_out.c */
		memcpy(pr->rel + len, de->d_name, nlen);
		pr->rel[len + nlen] = '/';
		pr->rel[len + nlen + 1] = '\0';
		if (pr->nkeep > 0 && bsearch(pr->rel, pr->keep, pr->nkeep, sizeof(*pr->keep),
		                             keep_cmp) != NULL)
			continue;
		sub = openat(dirfd(d), de->d_name,
		             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			pr->rv = KILN_EIO;
			continue;
		}
		memcpy(pr->rel + len, de->d_name, nlen);
		pr->rel[len + nlen] = '/';
		prune_dir(pr, sub, len + nlen + 1);
		pr->rel[len + nlen + 1] = '\0';
		/* Only an empty one goes; one holding kept files stays. */
		if (!prune_holds(pr) && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) != 0 &&
		    errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
			pr->rv = KILN_EIO;
	}
	if (errno != 0)
		pr->rv = KILN_EIO;
	closedir(d);
}

int
materialize_prune(const char *root, const char *profile,
                  const char *const *keep, size_t nkeep)
{
	return materialize_prune_in(root, "build", profile, keep, nkeep);
}

int
materialize_prune_in(const char *root, const char *top, const char *profile,
                     const char *const *keep, size_t nkeep)
{
	struct prune *pr;
	char rel[PATH_MAX];
	const char *name;
	int dfd, fd, rv;

	if ((rv = kiln_profile_check(profile)) != 0)
		return rv;
	snprintf(rel, sizeof(rel), "%s/%s", top, profile);
	if ((rv = walk_parents(root, rel, 0, 0, &dfd, &name)) != 0)
		return rv == KILN_ENOTFOUND ? 0 : rv;
	rv = open_dir_at(dfd, name, 0, 0, &fd);
	close(dfd);
	if (rv != 0)
		return rv == KILN_ENOTFOUND ? 0 : rv;
	if ((pr = malloc(sizeof(*pr))) == NULL) {
		close(fd);
		return KILN_ENOMEM;
	}
	*pr = (struct prune){.keep = keep, .nkeep = nkeep};
	prune_dir(pr, fd, 0);
	rv = pr->rv;
	free(pr);
	return rv;
}
