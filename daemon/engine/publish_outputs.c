/* publish_outputs.c — a step's outputs in build/<profile>/: putting them
 * there as the materialize mode says (materialize_all, for a run and for a
 * reused result) and whether the files there are still what this daemon
 * (or the store's files records) last saw: the whole stat for copies, the
 * content when a hard link's ctime moved.
 *
 * Threads: the worker holding the node. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "folder_out.h"
#include "publish.h"
#include "step.h"

/* How outputs go into build/: the daemon's override (kilnd
 * --materialize, KILN_MATERIALIZE), else the project's 'materialize',
 * else copies. e->desc is only replaced with no build active. */
static kiln_mat_mode
mat_mode(const struct engine *e)
{
	kiln_mat_mode m = e->cfg.materialize;

	if (m == KILN_MAT_UNSET && e->desc != NULL)
		m = kiln_desc_materialize(e->desc);
	return m == KILN_MAT_HARDLINK ? KILN_MAT_HARDLINK : KILN_MAT_COPY;
}

/* An intermediate's outputs (.kiln/intermediate/) are always hard links
 * to their blobs, whatever the project's mode: nobody edits them or
 * ships them, and a copy would keep its bytes twice on a file system
 * without reflinks (an intermediate of 48 MB took 96 MB). Where linking
 * fails (another file system) materialize_output copies. */
#define INTERMEDIATE_TOP ".kiln/intermediate/"

static kiln_mat_mode
path_mode(const struct engine *e, const char *path)
{
	if (strncmp(path, INTERMEDIATE_TOP, strlen(INTERMEDIATE_TOP)) == 0)
		return KILN_MAT_HARDLINK;
	return mat_mode(e);
}

static int64_t
stat_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Whether path (st: its lstat) still holds rec->hash, hashed again;
 * the inode must be the one st describes. */
static int
mat_same_bytes(struct engine *e, const char *path, const struct stat *st,
               const kiln_file_rec *rec)
{
	struct stat fst;
	kiln_id h;
	int fd, ok;

	fd = openat(e->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = fstat(fd, &fst) == 0 && fst.st_ino == st->st_ino &&
	     kiln_id_of_fd(fd, &h, NULL) == 0 && id_eq(&h, &rec->hash);
	close(fd);
	return ok;
}

/* Whether the file st describes (path) still is the one rec describes.
 * Copies: the whole stat, ctime too (a write that puts size and mtime
 * back still moves it), and one link (a hard link left by hardlink mode
 * is no copy: it is made one). Hard links: every link made to a blob (a
 * second output with the same bytes) moves the ctime of all its links,
 * so a ctime that moved alone has the file hashed again: the same bytes
 * and rec takes the new ctime (hashed once, not every build), other
 * bytes and it changed (an edit that put the mtime back). */
static int
mat_stat_same(struct engine *e, const char *path, const struct stat *st,
              kiln_file_rec *rec)
{
	int64_t ctime_ns = stat_ns(&st->st_ctim);

	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size != rec->size ||
	    (uint64_t)st->st_ino != rec->ino || stat_ns(&st->st_mtim) != rec->mtime_ns)
		return 0;
	if (path_mode(e, path) == KILN_MAT_COPY)
		return ctime_ns == rec->ctime_ns && st->st_nlink == 1;
	if (ctime_ns == rec->ctime_ns)
		return 1;
	if (!mat_same_bytes(e, path, st, rec))
		return 0;
	rec->ctime_ns = ctime_ns;
	return 1;
}

int
mat_unchanged(struct engine *e, const char *path, kiln_file_rec *rec)
{
	struct stat st;

	return fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       mat_stat_same(e, path, &st, rec);
}

int
step_output_unchanged(struct engine *e, const char *path, const struct node_out *o)
{
	kiln_file_rec rec = o->mat;   /* o is another step's: read only */
	kiln_id h;
	int fd, rv;

	if (o->folder)
		return folder_unchanged(e, path, &o->id);
	if (mat_unchanged(e, path, &rec))
		return 1;
	/* its stat moved: with hard links, another output putting the same
	 * blob does that (the store refreshes a blob's times); the content
	 * says whether it still is the blob the key names */
	if ((fd = openat(e->rootfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	rv = kiln_id_of_fd(fd, &h, NULL);
	close(fd);
	return rv == 0 && id_eq(&h, &o->id);
}

/* Copies: whether path already is a copy of o->id as recorded, by this
 * daemon (o->mat) or in the store's files records (a restarted daemon's
 * first build finds every output so), so it needs no copying again: a
 * copy costs a write where a hard link to the same blob cost nothing.
 * o->mat then describes it. */
static int
copy_intact(struct engine *e, const char *path, struct node_out *o)
{
	kiln_file_rec rec;
	struct stat st;

	if (fstatat(e->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;   /* a restore: nothing there */
	if (id_eq(&o->mat.hash, &o->id) && mat_stat_same(e, path, &st, &o->mat))
		return 1;
	if (kiln_store_file_get(e->s, path, &rec) != 0 || !id_eq(&rec.hash, &o->id) ||
	    !mat_stat_same(e, path, &st, &rec))
		return 0;
	o->mat = rec;
	return 1;
}

int
materialize_all(struct engine *e, struct node *n)
{
	kiln_mat_mode mode = n->ks->intermediate ? KILN_MAT_HARDLINK : mat_mode(e);

	for (size_t i = 0; i < n->ks->noutputs; i++) {
		int rv;
		n->outs[i].mat_gen = 0;   /* written again: looked at again */
		if (n->outs[i].folder) {
			if ((rv = folder_materialize(e, n->outpaths[i], &n->outs[i].id)) != 0) {
				set_error(n, "cannot write the folder %s: %s", n->outpaths[i],
				          kiln_strerror(rv));
				return rv;
			}
			continue;
		}
		if (mode == KILN_MAT_COPY && copy_intact(e, n->outpaths[i], &n->outs[i]))
			continue;
		rv = materialize_output(e->s, e->root, e->rootfd, n->outpaths[i], &n->outs[i].id,
		                        mode, e->cfg.build_umask, &n->outs[i].mat);
		if (rv != 0) {
			set_error(n, "cannot write %s: %s", n->outpaths[i], kiln_strerror(rv));
			return rv;
		}
	}
	return 0;
}
