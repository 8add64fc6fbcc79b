/* blob.c — writing, publishing and reading blobs.
 *
 * Publish protocol (data before pointer):
 *   1. the content is in a temp file under tmp/ (an anonymous O_TMPFILE
 *      inode when the file system has them, else a named mkstemp file, or
 *      the caller's own file renamed into tmp/ by put_move), hashed in the
 *      same pass that wrote it, with XXH3-128 (its name) and SHA-256 (its
 *      record's second name) together (KILN_DURABLE_BATCH's put_move hashes the
 *      caller's file in place and renames it straight to its object name
 *      in 3: move_direct);
 *   2. made read-only, and fsynced with KILN_DURABLE_FSYNC;
 *   3. linked to objects/ab/<30 hex> (an existing blob of the same size
 *      counts as published: content addressing makes it the same bytes;
 *      one of another size is damaged and is replaced atomically), then the
 *      shard folder is fsynced;
 *   4. in one write transaction, the blob's use time and SHA-256 are
 *      recorded (with its sha256 entry) and — if
 *      gc removed the file between 3 and 4 — it is linked again from the
 *      temp file we still hold. gc removes files only inside its own write
 *      transactions, so when 4 commits the blob exists and its fresh use
 *      time protects it for gc's grace period;
 *   5. the temp name is removed.
 * A crash at any point leaves either nothing, a temp file (swept on a later
 * open), or a complete blob without a use record (an orphan gc collects).
 *
 * KILN_DURABLE_BATCH skips the fsyncs of 2 and 3 and notes the put
 * instead (after 4, so the note covers every file operation of the put);
 * store_sync_puts, called before each record commit, makes the noted puts
 * durable: a few one by one, many with one syncfs(). Syncs take turns
 * (sync_mu): a commit whose records name a blob another commit is syncing
 * waits for that sync. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

#define COPY_CHUNK (1u << 20)

struct kiln_blob_writer {
	kiln_store *s;
	int fd;
	char name[PATH_MAX]; /* "" when the temp file is anonymous */
	kiln_hasher *h;
	store_sha *sha;
	uint64_t size;
	int err;
	int expect_sha;                      /* expect_sha256 was called */
	uint8_t want_sha[KILN_SHA256_LEN];
};

/* What publish needs to know about a complete temp file. */
struct pending {
	kiln_store *s;
	int fd;
	const char *name; /* "" when anonymous */
	kiln_id id;
	uint64_t size;
	char final[PATH_MAX];
	int made_shard;   /* place() made the shard folder */
	uint8_t sha[KILN_SHA256_LEN];
};

static int
durable(const kiln_store *s)
{
	return s->durability == KILN_DURABLE_FSYNC;
}

/* Create the temp file for new content. */
static int
tmp_create(kiln_store *s, int *fd, char name[PATH_MAX])
{
	int rv;

	name[0] = '\0';
	*fd = open(s->tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	if (*fd >= 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return kiln_err_from_errno(errno);
	if ((rv = store_tmp_named(s, "put", name, fd)) != 0)
		name[0] = '\0';
	return rv;
}

/* Give the temp file the name dst. Returns an errno value (0 on success). */
static int
tmp_link(const struct pending *p, const char *dst)
{
	char proc[64];

	if (p->name[0] != '\0')
		return link(p->name, dst) == 0 ? 0 : errno;
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", p->fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
}

/* The blob at p->final exists but is not this size: it is damaged. Put
 * ours in its place with one rename, so readers see old or new, never
 * neither. */
static int
replace_damaged(const struct pending *p)
{
	char side[PATH_MAX];
	int fd, e;

	if ((e = store_tmp_named(p->s, "replace", side, &fd)) != 0)
		return e;
	close(fd);
	unlink(side);
	if ((e = tmp_link(p, side)) != 0)
		return kiln_err_from_errno(e);
	if (rename(side, p->final) != 0) {
		e = errno;
		unlink(side);
		return e == EISDIR ? KILN_ECORRUPT : kiln_err_from_errno(e);
	}
	return 0;
}

/* Step 3: link into objects/, making the shard folder on first use. */
static int
place(struct pending *p)
{
	char shard[PATH_MAX];
	struct stat st;
	int e, made, rv;

	snprintf(shard, sizeof shard, "%.*s", (int)(strrchr(p->final, '/') - p->final),
	         p->final);
	e = tmp_link(p, p->final);
	if (e == ENOENT) {
		if ((rv = fio_mkdir(shard, 0755, &made)) != 0)
			return rv;
		p->made_shard |= made;
		if (made && durable(p->s) && (rv = fio_fsync_dir(p->s->objects)) != 0)
			return rv;
		e = tmp_link(p, p->final);
	}
	if (e == EEXIST) {
		if (lstat(p->final, &st) == 0 && S_ISREG(st.st_mode) &&
		    (uint64_t)st.st_size == p->size)
			return 0;
		if ((rv = replace_damaged(p)) != 0)
			return rv;
	} else if (e != 0) {
		return kiln_err_from_errno(e);
	}
	return durable(p->s) ? fio_fsync_dir(shard) : 0;
}

/* Step 4, inside the write transaction. */
static int
publish_txn(db_txn *t, void *arg)
{
	struct pending *p = arg;
	struct stat st;
	int rv;

	if (lstat(p->final, &st) != 0 && (rv = place(p)) != 0)
		return rv;
	return blobrec_touch(t, &p->id, p->size, p->sha, store_now(p->s));
}

static int
publish(struct pending *p)
{
	int rv;

	if (fchmod(p->fd, 0444) != 0)
		return kiln_err_from_errno(errno);
	/* A failed fsync means the data may be gone: never retry and trust. */
	if (durable(p->s) && fsync(p->fd) != 0)
		return kiln_err_from_errno(errno);
	store_blob_path(p->s, &p->id, p->final);
	if (p->s->durability == KILN_DURABLE_BATCH) {
		/* No transaction per put: the use record waits for the next
		 * record commit. Until then gc goes by the file's mtime, so make
		 * it now (a moved file keeps its writer's). */
		if ((rv = place(p)) != 0)
			return rv;
		utimensat(AT_FDCWD, p->final, NULL, AT_SYMLINK_NOFOLLOW);
		if ((rv = store_use_defer(p->s, &p->id, p->size, p->sha)) != 0)
			return rv;
		store_unsynced_add(p->s, &p->id, p->made_shard);
		return 0;
	}
	if ((rv = place(p)) != 0 ||
	    (rv = db_write(p->s->db, publish_txn, p)) != 0)
		return rv;
	return 0;
}

void
store_unsynced_add(kiln_store *s, const kiln_id *id, int made_shard)
{
	pthread_mutex_lock(&s->uses_mu);
	s->unsynced_shard |= made_shard;
	for (size_t i = 0; i < s->nunsynced && !s->unsynced_many; i++)
		if (memcmp(s->unsynced[i].b, id->b, sizeof id->b) == 0)
			goto fail;   /* the same bytes again: one sync will do */
	if (s->nunsynced < STORE_SYNC_EACH_MAX)
		s->unsynced[s->nunsynced++] = *id;
	else
		s->unsynced_many = 1;
fail:
	pthread_mutex_unlock(&s->uses_mu);
}

/* Each blob's data, its shard folder (its name) and, when a put made a
 * shard folder, objects/ (the shard's name), each folder once. Every
 * blob's writeback is started before the first is waited for, so their
 * writes go to the disk together, not one wait each. A blob gone from
 * objects/ (gc took it since its put: with a short grace nothing else
 * protects a blob no record names yet) has nothing to sync: the commit
 * that follows finds it gone too and skips the records naming it, as it
 * does when gc takes it after the sync. (A put of the same bytes between
 * this sync and that commit places it again, noted for the next sync: a
 * record may then name it before it is synced, as after a syncfs that
 * came before such a put. Only a power cut in between can show that.) */
static int
sync_each(kiln_store *s, const kiln_id *ids, size_t n, int made_shard)
{
	char path[PATH_MAX];
	uint8_t shard_done[256] = {0};
	int fds[STORE_SYNC_EACH_MAX], rv = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		store_blob_path(s, &ids[i], path);
		if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			if (errno == ENOENT)
				continue;   /* gone: see above */
			rv = kiln_err_from_errno(errno);
			break;
		}
		/* only a head start: the fdatasync below is what counts */
		sync_file_range(fds[i], 0, 0, SYNC_FILE_RANGE_WRITE);
	}
	for (size_t k = 0; k < i; k++) {
		if (fds[k] < 0)
			continue;
		if (rv == 0 && fdatasync(fds[k]) != 0)
			rv = kiln_err_from_errno(errno);
		close(fds[k]);
	}
	for (i = 0; i < n && rv == 0; i++) {
		if (shard_done[ids[i].b[0]])
			continue;
		shard_done[ids[i].b[0]] = 1;
		store_blob_path(s, &ids[i], path);
		*strrchr(path, '/') = '\0';
		rv = fio_fsync_dir(path);
	}
	if (rv == 0 && made_shard && fsync(s->objects_fd) != 0)
		rv = kiln_err_from_errno(errno);
	return rv;
}

int
store_sync_puts(kiln_store *s)
{
	kiln_id ids[STORE_SYNC_EACH_MAX];
	size_t n;
	int many, shard, rv = 0;

	if (s->durability != KILN_DURABLE_BATCH)
		return 0;
	pthread_mutex_lock(&s->sync_mu);
	pthread_mutex_lock(&s->uses_mu);
	n = s->nunsynced;
	many = s->unsynced_many;
	shard = s->unsynced_shard;
	memcpy(ids, s->unsynced, n * sizeof *ids);
	s->nunsynced = 0;
	s->unsynced_many = 0;
	s->unsynced_shard = 0;
	pthread_mutex_unlock(&s->uses_mu);
	/* many: one flush of the whole file system, every blob and shard
	 * folder (and the rest of the page cache with them) */
	if (many)
		rv = syncfs(s->objects_fd) != 0 ? kiln_err_from_errno(errno) : 0;
	else if (n > 0)
		rv = sync_each(s, ids, n, shard);
	if (rv != 0) {   /* pending again: the next sync flushes all */
		pthread_mutex_lock(&s->uses_mu);
		s->unsynced_many = 1;
		pthread_mutex_unlock(&s->uses_mu);
	}
	pthread_mutex_unlock(&s->sync_mu);
	return rv;
}

int
kiln_blob_writer_open(kiln_store *s, kiln_blob_writer **wp)
{
	kiln_blob_writer *w;
	int rv;

	if ((rv = store_writable(s)) != 0)
		return rv;
	if ((w = calloc(1, sizeof *w)) == NULL)
		return KILN_ENOMEM;
	w->s = s;
	w->fd = -1;
	if ((rv = kiln_hasher_new(&w->h)) != 0 ||
	    (rv = store_sha_new(&w->sha)) != 0 ||
	    (rv = tmp_create(s, &w->fd, w->name)) != 0) {
		kiln_hasher_free(w->h);
		store_sha_free(w->sha);
		free(w);
		return rv;
	}
	*wp = w;
	return 0;
}

void
kiln_blob_writer_expect_sha256(kiln_blob_writer *w, const uint8_t sha[KILN_SHA256_LEN])
{
	w->expect_sha = 1;
	memcpy(w->want_sha, sha, sizeof w->want_sha);
}

int
kiln_blob_writer_write(kiln_blob_writer *w, const void *buf, size_t len)
{
	if (w->err != 0)
		return w->err;
	kiln_hasher_update(w->h, buf, len);
	store_sha_update(w->sha, buf, len);
	w->size += len;
	return w->err = kiln_write_all(w->fd, buf, len);
}

void
kiln_blob_writer_abort(kiln_blob_writer *w)
{
	if (w == NULL)
		return;
	if (w->name[0] != '\0')
		unlink(w->name);
	close(w->fd);
	kiln_hasher_free(w->h);
	store_sha_free(w->sha);
	free(w);
}

int
kiln_blob_writer_commit(kiln_blob_writer *w, const kiln_id *expect, kiln_id *id)
{
	struct pending p = {w->s, w->fd, w->name, {{0}}, w->size, "", 0, {0}};
	int rv = w->err;

	if (rv == 0 && (rv = store_sha_final(w->sha, p.sha)) == 0) {
		kiln_hasher_digest(w->h, &p.id);
		if ((expect != NULL && kiln_id_cmp(expect, &p.id) != 0) ||
		    (w->expect_sha && memcmp(w->want_sha, p.sha, sizeof p.sha) != 0))
			rv = KILN_ECORRUPT;
	}
	if (rv == 0 && (rv = publish(&p)) == 0 && id != NULL)
		*id = p.id;
	kiln_blob_writer_abort(w);
	return rv;
}

int
kiln_store_put_buf(kiln_store *s, const void *buf, size_t len, kiln_id *id)
{
	kiln_blob_writer *w;
	int rv;

	if ((rv = kiln_blob_writer_open(s, &w)) != 0)
		return rv;
	if ((rv = kiln_blob_writer_write(w, buf, len)) != 0) {
		kiln_blob_writer_abort(w);
		return rv;
	}
	return kiln_blob_writer_commit(w, NULL, id);
}

/* A put by path whose file changed size while it was read is read again
 * from the start, at most this many times; then what was read is kept. */
#define PUT_REREADS 3

/* Sentinel of put_read: the file's size changed while it was read. */
#define PUT_RESIZED 1

/* Read fd from its offset to its end into a new blob. With whole_file,
 * a file whose size is not what was read (cut short or grown meanwhile)
 * publishes nothing and returns PUT_RESIZED. */
static int
put_read(kiln_store *s, int fd, int whole_file, kiln_id *id)
{
	kiln_blob_writer *w;
	struct stat st;
	char *buf;
	int rv;

	if ((buf = malloc(COPY_CHUNK)) == NULL)
		return KILN_ENOMEM;
	if ((rv = kiln_blob_writer_open(s, &w)) != 0) {
		free(buf);
		return rv;
	}
	for (;;) {
		ssize_t n = read(fd, buf, COPY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rv = kiln_err_from_errno(errno);
		if (n <= 0)
			break;
		if ((rv = kiln_blob_writer_write(w, buf, (size_t)n)) != 0)
			break;
	}
	free(buf);
	if (rv == 0 && whole_file && fstat(fd, &st) == 0 && (uint64_t)st.st_size != w->size)
		rv = PUT_RESIZED;
	if (rv != 0) {
		kiln_blob_writer_abort(w);
		return rv;
	}
	return kiln_blob_writer_commit(w, NULL, id);
}

int
kiln_store_put_fd(kiln_store *s, int fd, kiln_id *id)
{
	return put_read(s, fd, 0, id);
}

int
kiln_store_put_path(kiln_store *s, const char *path, kiln_id *id)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rv, whole = 1;

	if (fd < 0)
		return kiln_err_from_errno(errno);
	/* Read, not mapped: through a map the bytes were hashed, then written
	 * in a second pass over shared pages, so a file rewritten in place
	 * between the two became a blob whose name was not the hash of what
	 * it held, and one cut short then failed the write with EFAULT (no
	 * SIGBUS to catch: the kernel did the reading). Each chunk read here
	 * is hashed and written from the same private buffer; a file cut or
	 * grown as it is read is read again, as it is now. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (int reads = 0;; reads++) {
		struct stat st;
		whole = reads < PUT_REREADS && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
		rv = put_read(s, fd, whole, id);
		if (rv != PUT_RESIZED)
			break;
		if (lseek(fd, 0, SEEK_SET) != 0) {
			rv = kiln_err_from_errno(errno);
			break;
		}
	}
	close(fd);
	return rv;
}

/* put_move for a file we must not take over (another file system, or other
 * hard links that would see our chmod and could later change the blob). */
static int
move_by_copy(kiln_store *s, const char *path, kiln_id *id)
{
	int rv = kiln_store_put_path(s, path, id);

	if (rv == 0 && unlink(path) != 0)
		rv = kiln_err_from_errno(errno);
	return rv;
}

/* Move the caller's file to a new name under tmp/ (written into name).
 * The name is this process's next "move-<pid>-<n>", taken by one rename
 * that refuses to replace, so no placeholder file is made and removed for
 * every move (each one an inode allocated and freed). A name left by an
 * earlier process of the same pid is skipped; file systems without
 * RENAME_NOREPLACE get a placeholder (store_tmp_named). 0 or a KILN_E*
 * code, with *cross set when path is on another file system. */
static int
move_to_tmp(kiln_store *s, const char *path, char name[PATH_MAX], int *cross)
{
	static unsigned long seq;
	int fd, rv;

	*cross = 0;
	for (int tries = 0; tries < 8; tries++) {
		snprintf(name, PATH_MAX, "%s/move-%ld-%lu", s->tmp, (long)getpid(),
		         __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
		if (renameat2(AT_FDCWD, path, AT_FDCWD, name, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EXDEV) {
			*cross = 1;
			return KILN_EIO;
		}
		if (errno != EEXIST) {
			if (errno != EINVAL && errno != ENOSYS)
				return kiln_err_from_errno(errno);
			break;
		}
	}
	if ((rv = store_tmp_named(s, "move", name, &fd)) != 0)
		return rv;
	close(fd);
	if (rename(path, name) != 0) {
		int e = errno;
		unlink(name);
		*cross = e == EXDEV;
		return kiln_err_from_errno(e);
	}
	return 0;
}

/* KILN_DURABLE_BATCH's put_move: the file is hashed where it is and
 * renamed straight to its object name, one rename where the general path
 * takes three directory updates (into tmp/, a link out of it, the unlink
 * of the temp name). Batch mode keeps no temp name to link again (the use
 * record waits for the next commit), so it has no use for one. A crash
 * leaves the file where it was, or published. Returns 0, a KILN_E* code,
 * or MOVE_DIRECT_CANNOT when this file system cannot do it (no
 * RENAME_NOREPLACE, or path is on another one): the caller takes the
 * general path, path untouched. */
enum { MOVE_DIRECT_CANNOT = 1 };

static int
move_direct(kiln_store *s, const char *path, const struct stat *st, kiln_id *id)
{
	struct pending p = {s, -1, "", {{0}}, 0, "", 0, {0}};
	struct stat cur;
	char shard[PATH_MAX];
	int made = 0;
	int rv = 0, e, stale = 0;

	if ((p.fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return kiln_err_from_errno(errno);
	/* the file lstat saw, not one put in its place since */
	if (fstat(p.fd, &cur) != 0 || cur.st_ino != st->st_ino || cur.st_dev != st->st_dev) {
		close(p.fd);
		return KILN_EINVAL;
	}
	if (st->st_size > (1 << 20))   /* a small file is read in one call */
		posix_fadvise(p.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if ((rv = kiln_id_sha256_of_fd(p.fd, &p.id, p.sha, &p.size)) != 0)
		goto fail;
	if (fchmod(p.fd, 0444) != 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	store_blob_path(s, &p.id, p.final);
	e = renameat2(AT_FDCWD, path, AT_FDCWD, p.final, RENAME_NOREPLACE) == 0 ? 0 : errno;
	if (e == ENOENT && access(path, F_OK) == 0) {   /* the shard, not path */
		snprintf(shard, sizeof shard, "%.*s",
		         (int)(strrchr(p.final, '/') - p.final), p.final);
		if ((rv = fio_mkdir(shard, 0755, &made)) != 0)
			goto fail;
		e = renameat2(AT_FDCWD, path, AT_FDCWD, p.final, RENAME_NOREPLACE) == 0 ? 0 : errno;
	}
	if (e == EEXIST) {
		/* the same bytes are published already (same hash and size);
		 * one of another size is damaged: ours replaces it in one
		 * rename, so readers see old or new, never neither */
		if (lstat(p.final, &cur) == 0 && S_ISREG(cur.st_mode) &&
		    (uint64_t)cur.st_size == p.size) {
			e = unlink(path) == 0 ? 0 : errno;
			stale = 1;   /* its mtime is whenever it was put */
		} else
			e = rename(path, p.final) == 0 ? 0 : errno;
		if (e == EISDIR) {
			rv = KILN_ECORRUPT;
			goto fail;
		}
	}
	if (e == EXDEV || e == EINVAL || e == ENOSYS) {
		rv = MOVE_DIRECT_CANNOT;
		goto fail;
	}
	if (e != 0) {
		rv = kiln_err_from_errno(e);
		goto fail;
	}
	/* Until the next commit gc goes by the file's mtime: a file written
	 * in the last minute has a fresh one already (a tool that kept an
	 * old one, cp -p say, gets now, as does a blob that was there). */
	if (stale || kiln_wall_ns() - ((int64_t)st->st_mtim.tv_sec * 1000000000 +
	                               st->st_mtim.tv_nsec) > 60 * 1000000000LL)
		utimensat(AT_FDCWD, p.final, NULL, AT_SYMLINK_NOFOLLOW);
	if ((rv = store_use_defer(s, &p.id, p.size, p.sha)) != 0) {
		/* no memory for the record: hand the caller its file back if
		 * it is the blob now (the bytes of another are published) */
		if (lstat(p.final, &cur) == 0 && cur.st_ino == st->st_ino &&
		    cur.st_dev == st->st_dev && rename(p.final, path) == 0)
			fchmod(p.fd, st->st_mode & 07777);
		close(p.fd);
		return rv;
	}
	store_unsynced_add(s, &p.id, made);
	close(p.fd);
	if (id != NULL)
		*id = p.id;
	return 0;
fail:
	/* nothing moved, path is still the caller's: give its mode back */
	fchmod(p.fd, st->st_mode & 07777);
	close(p.fd);
	return rv;
}

int
kiln_store_put_move(kiln_store *s, const char *path, kiln_id *id)
{
	char name[PATH_MAX];
	struct pending p = {s, -1, name, {{0}}, 0, "", 0, {0}};
	struct stat st;
	int rv, cross;

	if ((rv = store_writable(s)) != 0)
		return rv;
	if (lstat(path, &st) != 0)
		return kiln_err_from_errno(errno);
	if (!S_ISREG(st.st_mode))
		return KILN_EINVAL;
	if (st.st_nlink > 1)
		return move_by_copy(s, path, id);
	if (s->durability == KILN_DURABLE_BATCH && (rv = move_direct(s, path, &st, id)) != MOVE_DIRECT_CANNOT)
		return rv;
	if ((rv = move_to_tmp(s, path, name, &cross)) != 0)
		return cross ? move_by_copy(s, path, id) : rv;
	if ((p.fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	posix_fadvise(p.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if ((rv = kiln_id_sha256_of_fd(p.fd, &p.id, p.sha, &p.size)) != 0 ||
	    (rv = publish(&p)) != 0)
		goto fail;
	close(p.fd);
	unlink(name);
	if (id != NULL)
		*id = p.id;
	return 0;
fail:
	/* Give the caller its file back rather than lose it, and never leave
	 * it sharing an inode with a published blob it could later change. */
	if (p.fd >= 0) {
		struct stat mine, pub;
		if (p.final[0] != '\0' && fstat(p.fd, &mine) == 0 &&
		    lstat(p.final, &pub) == 0 && mine.st_ino == pub.st_ino &&
		    mine.st_dev == pub.st_dev)
			unlink(p.final);
		fchmod(p.fd, st.st_mode & 07777);
		close(p.fd);
	}
	if (rename(name, path) != 0)
		unlink(name);
	return rv;
}

int
kiln_store_has(kiln_store *s, const kiln_id *id, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;

	store_blob_path(s, id, path);
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return KILN_ENOTFOUND;
	if (size != NULL)
		*size = (uint64_t)st.st_size;
	return 0;
}

int
kiln_store_blob_path(kiln_store *s, const kiln_id *id, char *buf, size_t len)
{
	char path[PATH_MAX];

	store_blob_path(s, id, path);
	if (strlen(path) + 1 > len)
		return KILN_ERANGE;
	memcpy(buf, path, strlen(path) + 1);
	return 0;
}

int
kiln_store_open_blob(kiln_store *s, const kiln_id *id, int *fdp)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	store_blob_path(s, id, path);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return KILN_ENOTFOUND;
		return errno == ELOOP ? KILN_ECORRUPT : kiln_err_from_errno(errno);
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return KILN_ECORRUPT;
	}
	*fdp = fd;
	return 0;
}

int
kiln_store_verify(kiln_store *s, const kiln_id *id)
{
	kiln_id got;
	int fd, rv;

	if ((rv = kiln_store_open_blob(s, id, &fd)) != 0)
		return rv;
	rv = kiln_id_of_fd(fd, &got, NULL);
	close(fd);
	if (rv == 0 && kiln_id_cmp(&got, id) != 0)
		rv = KILN_ECORRUPT;
	return rv;
}

int
kiln_store_quarantine(kiln_store *s, const kiln_id *id)
{
	char from[PATH_MAX], to[PATH_MAX], hex[KILN_ID_HEX_LEN + 1];

	if (s->flags & KILN_STORE_RDONLY)
		return KILN_EREADONLY;
	store_blob_path(s, id, from);
	kiln_id_to_hex(id, hex);
	if ((size_t)snprintf(to, sizeof to, "%s/corrupt/%s", s->dir, hex) >= sizeof to)
		return KILN_ERANGE;
	/* one rename: a reader has the blob's name or nothing, and an fd
	 * open on it (a copy under way) reads what it read before */
	if (rename(from, to) == 0)
		return 0;
	return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND
	                                           : kiln_err_from_errno(errno);
}

int
kiln_store_read(kiln_store *s, const kiln_id *id, void **bufp, size_t *lenp)
{
	struct stat st;
	kiln_id got;
	char *buf = NULL;
	int fd, rv;

	if ((rv = kiln_store_open_blob(s, id, &fd)) != 0)
		return rv;
	if (fstat(fd, &st) != 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	if ((rv = fio_read_all(fd, buf, (size_t)st.st_size)) != 0)
		goto fail;
	kiln_id_of_buf(buf, (size_t)st.st_size, &got);
	if (kiln_id_cmp(&got, id) != 0) {
		rv = KILN_ECORRUPT;
		goto fail;
	}
	*bufp = buf;
	*lenp = (size_t)st.st_size;
	buf = NULL;
fail:
	free(buf);
	close(fd);
	return rv;
}

/* Blobs up to this size are copied out through a buffer on the stack:
 * most outputs are small, and mapping one costs a munmap whose TLB
 * shootdown interrupts every CPU running one of the daemon's threads
 * (a restore copies 10,000 of them). */
#define COPY_SMALL (16u << 10)

/* kiln_store_copy_out of the len bytes (<= COPY_SMALL) of the open blob fd. */
static int
copy_out_small(int fd, size_t len, const kiln_id *id, int out)
{
	char buf[COPY_SMALL];
	kiln_id got;
	int rv;

	if ((rv = fio_read_all(fd, buf, len)) != 0)
		return rv;
	kiln_id_of_buf(buf, len, &got);
	if (kiln_id_cmp(&got, id) != 0)
		return KILN_ECORRUPT;
	return kiln_write_all(out, buf, len);
}

int
kiln_store_copy_out(kiln_store *s, const kiln_id *id, int out)
{
	struct stat st;
	kiln_id got;
	void *map;
	int fd, rv, g;

	if ((rv = kiln_store_open_blob(s, id, &fd)) != 0)
		return rv;
	if (fstat(fd, &st) != 0) {
		rv = kiln_err_from_errno(errno);
		close(fd);
		return rv;
	}
	if (st.st_size <= COPY_SMALL) {
		rv = copy_out_small(fd, (size_t)st.st_size, id, out);
		close(fd);
		return rv;
	}
	/* Map once, hash, then write: one read of the bytes, and nothing
	 * reaches fd before the whole blob is known to be sound. */
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return kiln_err_from_errno(errno);
	/* a blob cut short as it is read (guard.c) no longer holds its
	 * content: damage, like one that does not hash to its name */
	g = guard_add(map, (size_t)st.st_size, 0);
	madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
	kiln_id_of_buf(map, (size_t)st.st_size, &got);
	if (kiln_id_cmp(&got, id) != 0 || guard_faulted(g))
		rv = KILN_ECORRUPT;
	else
		rv = kiln_write_all(out, map, (size_t)st.st_size);
	if (guard_faulted(g))
		rv = KILN_ECORRUPT;
	guard_remove(g);
	munmap(map, (size_t)st.st_size);
	return rv;
}

int
store_use_defer(kiln_store *s, const kiln_id *id, uint64_t size,
                const uint8_t sha[KILN_SHA256_LEN])
{
	int rv = 0;

	pthread_mutex_lock(&s->uses_mu);
	if (s->nuses == s->capuses) {
		size_t ncap = s->capuses ? s->capuses * 2 : 256;
		struct pending_use *nv = realloc(s->uses, ncap * sizeof *nv);
		if (nv == NULL)
			rv = KILN_ENOMEM;
		else {
			s->uses = nv;
			s->capuses = ncap;
		}
	}
	if (rv == 0) {
		struct pending_use *u = &s->uses[s->nuses++];
		u->id = *id;
		u->size = size;
		memcpy(u->sha, sha, sizeof u->sha);
	}
	pthread_mutex_unlock(&s->uses_mu);
	return rv;
}

void
store_uses_take(kiln_store *s, struct pending_use **uses, size_t *n)
{
	pthread_mutex_lock(&s->uses_mu);
	*uses = s->uses;
	*n = s->nuses;
	s->uses = NULL;
	s->nuses = s->capuses = 0;
	pthread_mutex_unlock(&s->uses_mu);
}

void
store_uses_return(kiln_store *s, struct pending_use *uses, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (store_use_defer(s, &uses[i].id, uses[i].size, uses[i].sha) != 0)
			break; /* lost use times only make gc judge by mtime */
	free(uses);
}
