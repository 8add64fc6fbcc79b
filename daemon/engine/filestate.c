/* filestate.c — stat-first content hashing with a memory of every file
 * seen (see filestate.h).
 *
 * The table maps a path to its last stat and hash; entries are never
 * removed (a project's files number in the hundreds of thousands at most,
 * and a missing file is worth remembering too). It is split in shards by
 * the path's hash, each with its own mutex: a warm build asks about every
 * file of the project from every worker at once, each answer quick,
 * and with one mutex the workers spent more time blocked on it (futex
 * sleeps and wake-ups) than answering. Stat and hashing run outside the
 * locks, so two threads asking for the same changed file may both hash
 * it, which is wasted work but harmless. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "filestate.h"
#include "watch.h"
#include "kiln_strhash.h"

/* One a file (100,000 sources: the path in the same allocation, and
 * byte flags, save memory a file over separate strings and ints). */
struct fentry {
	uint64_t h;       /* of path, compared before the string */
	kiln_file_rec rec;
	struct fentry *next_dirty;
	uint64_t pass;    /* stat'ed during this pass */
	uint64_t seen_gen; /* the watch's generation of that stat (0: none) */
	uint8_t known;    /* rec holds a stat and hash (else: unknown) */
	uint8_t missing;  /* at the last stat it did not exist */
	uint8_t dirty;    /* rec changed since the last flush (on the list) */
	uint8_t racy;     /* rec's stat cannot vouch for its content (fs_seen) */
	char path[];
};

/* Shards: a power of two, well above the worker count so that two
 * workers rarely meet on one. */
#define FS_SHARDS 64

/* One part of the table: the paths whose hash's top bits say so. */
struct shard {
	pthread_mutex_t mu;
	struct fentry **slots;
	size_t cap, n;
	struct fentry *dirty;  /* records to write at the next flush */
} __attribute__((aligned(64)));   /* a cache line each */

struct filestate {
	kiln_store *s;
	char *root;
	int rootfd;       /* O_PATH: short path walks from the root */
	_Atomic uint64_t pass;
	atomic_int verify;
	struct watch *_Atomic watch;   /* NULL: stat every file every pass */
	atomic_uint_fast64_t nstat, nhashed;
	struct shard shards[FS_SHARDS];
};

/* The first slot count of a shard (64 shards: 4,096 slots in all). */
#define SHARD_CAP0 64

int
filestate_new(kiln_store *s, const char *root, struct filestate **fsp)
{
	struct filestate *fs = aligned_alloc(64, sizeof *fs);
	int rv = KILN_ENOMEM;
	size_t k;

	*fsp = NULL;
	if (fs == NULL)
		return KILN_ENOMEM;
	memset(fs, 0, sizeof *fs);
	if ((fs->root = strdup(root)) == NULL)
		goto fail;
	for (k = 0; k < FS_SHARDS; k++)
		if ((fs->shards[k].slots = calloc(SHARD_CAP0, sizeof(struct fentry *))) == NULL)
			goto fail;
	if ((fs->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	for (k = 0; k < FS_SHARDS; k++) {
		fs->shards[k].cap = SHARD_CAP0;
		pthread_mutex_init(&fs->shards[k].mu, NULL);
	}
	fs->s = s;
	atomic_init(&fs->pass, 1);
	*fsp = fs;
	return 0;
fail:
	for (k = 0; k < FS_SHARDS; k++)
		free(fs->shards[k].slots);
	free(fs->root);
	free(fs);
	return rv;
}

void
filestate_free(struct filestate *fs)
{
	if (fs == NULL)
		return;
	for (size_t k = 0; k < FS_SHARDS; k++) {
		struct shard *sh = &fs->shards[k];
		for (size_t i = 0; i < sh->cap; i++)
			free(sh->slots[i]);
		free(sh->slots);
		pthread_mutex_destroy(&sh->mu);
	}
	free(fs->root);
	close(fs->rootfd);
	free(fs);
}

void
filestate_pass(struct filestate *fs)
{
	atomic_fetch_add(&fs->pass, 1);
}

void
filestate_set_watch(struct filestate *fs, struct watch *w)
{
	atomic_store(&fs->watch, w);
}

void
filestate_set_verify(struct filestate *fs, int verify)
{
	atomic_store(&fs->verify, verify);
}

void
filestate_counts(struct filestate *fs, uint64_t *nstat, uint64_t *nhashed)
{
	*nstat = atomic_load(&fs->nstat);
	*nhashed = atomic_load(&fs->nhashed);
}

/* The shard of a path's hash: its top bits (the low ones pick the slot). */
static struct shard *
shard_of(struct filestate *fs, uint64_t h)
{
	return &fs->shards[h >> 58];
}

_Static_assert(FS_SHARDS == 64, "shard_of takes the hash's top 6 bits");

/* Double a shard's table (its mu held). */
static int
table_grow(struct shard *sh)
{
	size_t ncap = sh->cap * 2;
	struct fentry **ns = calloc(ncap, sizeof *ns);

	if (ns == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < sh->cap; i++) {
		struct fentry *e = sh->slots[i];
		if (e == NULL)
			continue;
		size_t j = e->h & (ncap - 1);
		while (ns[j] != NULL)
			j = (j + 1) & (ncap - 1);
		ns[j] = e;
	}
	free(sh->slots);
	sh->slots = ns;
	sh->cap = ncap;
	return 0;
}

/* The entry of path (hash h), made when absent (sh->mu held). NULL: out
 * of memory. */
static struct fentry *
table_get(struct shard *sh, const char *path, uint64_t h)
{
	size_t i = h & (sh->cap - 1);
	struct fentry *e;
	size_t len;

	for (; sh->slots[i] != NULL; i = (i + 1) & (sh->cap - 1))
		if (sh->slots[i]->h == h && strcmp(sh->slots[i]->path, path) == 0)
			return sh->slots[i];
	if ((sh->n + 1) * 4 > sh->cap * 3) {
		if (table_grow(sh) != 0)
			return NULL;
		return table_get(sh, path, h);
	}
	len = strlen(path);
	if ((e = calloc(1, sizeof *e + len + 1)) == NULL)
		return NULL;
	memcpy(e->path, path, len + 1);
	e->h = h;
	sh->slots[i] = e;
	sh->n++;
	return e;
}

static int
stat_equal(const kiln_file_rec *r, const struct stat *st)
{
	return r->size == (uint64_t)st->st_size && r->ino == (uint64_t)st->st_ino &&
	       r->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec &&
	       r->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static void
rec_of_stat(kiln_file_rec *r, const struct stat *st)
{
	r->size = (uint64_t)st->st_size;
	r->ino = (uint64_t)st->st_ino;
	r->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	r->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/* Stat path (following symlinks), relative to the root unless absolute:
 * 0 for a regular file, KILN_ENOTFOUND for none, or another error. Not
 * counted: file_stat counts what deciding costs. */
static int
stat_regular(struct filestate *fs, const char *path, struct stat *st)
{
	if (fstatat(path[0] == '/' ? AT_FDCWD : fs->rootfd, path, st, 0) != 0)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND
		                                           : kiln_err_from_errno(errno);
	return S_ISREG(st->st_mode) ? 0 : KILN_ENOTFOUND;
}

/* Stat path (relative to the root unless absolute): one syscall, with
 * no open, because most files have not changed. */
static int
file_stat(struct filestate *fs, const char *path, struct stat *st, int *watched)
{
	int dfd = path[0] == '/' ? AT_FDCWD : fs->rootfd;

	atomic_fetch_add(&fs->nstat, 1);
	/* the watch sees a symlink's own folder, not its target's: a file
	 * reached through one is not watched */
	if (*watched) {
		if (fstatat(dfd, path, st, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno == ENOENT)
				return KILN_ENOTFOUND;
		} else if (!S_ISLNK(st->st_mode)) {
			return S_ISREG(st->st_mode) ? 0 : KILN_ENOTFOUND;
		}
		*watched = 0;
	}
	return stat_regular(fs, path, st);
}

/* Open a project file for reading beneath the root: no "..", absolute
 * symlink or relative one climbing out of the project may lead the open
 * elsewhere (openat2's RESOLVE_BENEATH: the kernel checks every step, so
 * a folder swapped for a link between our checks cannot slip through).
 * -1 with errno set; EXDEV when the path leads out. */
static int
open_beneath(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	char link[64], real[PATH_MAX], root[PATH_MAX];
	ssize_t n, m;
	int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);

	if (fd >= 0 || errno != ENOSYS)
		return fd;
	/* kernels before 5.6: open, then ask where the descriptor landed */
	if ((fd = openat(rootfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return -1;
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	n = readlink(link, real, sizeof real - 1);
	snprintf(link, sizeof link, "/proc/self/fd/%d", rootfd);
	m = readlink(link, root, sizeof root - 1);
	if (n < 0 || m < 0 || n <= m || memcmp(real, root, (size_t)m) != 0 ||
	    real[m] != '/') {
		close(fd);
		errno = EXDEV;
		return -1;
	}
	return fd;
}

static int64_t
wall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Hash the file's content, and stat it again through the open file so the
 * stat recorded is the one of the bytes hashed. *racy: its last change is
 * so close to now that a change in the same clock tick would keep this
 * stat (git's "racily clean" entries). */
static int
file_hash(struct filestate *fs, const char *path, struct stat *st, kiln_id *hash,
          int *racy)
{
	int fd = path[0] == '/' ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
	                        : open_beneath(fs->rootfd, path);
	int64_t now;
	int rv;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND
		       : errno == EXDEV || errno == ELOOP ? KILN_EOUTSIDE
		                                          : kiln_err_from_errno(errno);
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return KILN_ENOTFOUND;
	}
	now = wall_now_ns();
	*racy = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec + FS_RACY_NS > now ||
	        (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec + FS_RACY_NS > now;
	rv = kiln_id_of_fd(fd, hash, NULL);
	close(fd);
	if (rv == 0)
		atomic_fetch_add(&fs->nhashed, 1);
	return rv;
}

static void
seen_set(struct fs_seen *seen, const struct fentry *e)
{
	if (seen == NULL)
		return;
	memset(seen, 0, sizeof *seen);
	seen->missing = e->missing;
	seen->racy = e->racy;
	if (!e->missing)
		seen->rec = e->rec;
}

int
filestate_hash(struct filestate *fs, const char *path, kiln_id *hash)
{
	return filestate_hash_seen(fs, path, hash, NULL);
}

int
filestate_hash_seen(struct filestate *fs, const char *path, kiln_id *hash,
                    struct fs_seen *seen)
{
	uint64_t h = kiln_strhash(path);
	struct shard *sh = shard_of(fs, h);
	struct watch *w = atomic_load(&fs->watch);
	struct fentry *e;
	kiln_file_rec rec, db;
	struct stat st;
	int rv, known, verify = atomic_load(&fs->verify), watched, racy = 0, was_racy;
	uint64_t pass = atomic_load(&fs->pass), gen = 0;

	pthread_mutex_lock(&sh->mu);
	if ((e = table_get(sh, path, h)) == NULL) {
		pthread_mutex_unlock(&sh->mu);
		return KILN_ENOMEM;
	}
	/* seen this pass, or nothing touched it since it was last looked at
	 * (the watch's lock nests inside ours; it never takes ours) */
	if (e->pass == pass ||
	    (w != NULL && !verify && (e->known || e->missing) &&
	     watch_clean(w, path, e->seen_gen))) {
		e->pass = pass;
		rv = e->missing ? KILN_ENOTFOUND : 0;
		*hash = e->missing ? (kiln_id){{0}} : e->rec.hash;
		seen_set(seen, e);
		pthread_mutex_unlock(&sh->mu);
		return rv;
	}
	was_racy = e->racy;
	known = e->known && !was_racy;   /* a racy stat proves nothing */
	rec = e->rec;
	pthread_mutex_unlock(&sh->mu);

	watched = w != NULL && path[0] != '/' && watch_prepare(w, path, &gen) == 0;

	if (!known && !was_racy) {
		/* a restarted daemon: what the last one recorded */
		if (path[0] != '/' && kiln_store_file_get(fs->s, path, &db) == 0) {
			rec = db;
			known = 1;
		}
	}
	rv = file_stat(fs, path, &st, &watched);
	if (rv == 0 && known && !verify && stat_equal(&rec, &st)) {
		*hash = rec.hash;
	} else if (rv == 0) {
		rv = file_hash(fs, path, &st, hash, &racy);
		rec_of_stat(&rec, &st);
		rec.hash = *hash;
		known = -1;  /* changed: record it */
	}
	if (rv == KILN_ENOTFOUND) {
		pthread_mutex_lock(&sh->mu);
		e->missing = 1;
		e->racy = 0;
		e->pass = pass;
		e->seen_gen = watched ? gen : 0;
		seen_set(seen, e);
		pthread_mutex_unlock(&sh->mu);
		memset(hash, 0, sizeof *hash);
		return rv;
	}
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&sh->mu);
	e->rec = rec;
	e->known = 1;
	e->missing = 0;
	if (known == -1)
		e->racy = (uint8_t)racy;
	e->pass = pass;
	e->seen_gen = watched ? gen : 0;
	if (known == -1 && path[0] != '/' && !e->dirty) {
		e->dirty = 1;
		e->next_dirty = sh->dirty;
		sh->dirty = e;
	}
	seen_set(seen, e);
	pthread_mutex_unlock(&sh->mu);
	return 0;
}

void
filestate_forget(struct filestate *fs, const char *path)
{
	uint64_t h = kiln_strhash(path);
	struct shard *sh = shard_of(fs, h);
	struct fentry *e;

	pthread_mutex_lock(&sh->mu);
	if ((e = table_get(sh, path, h)) != NULL) {
		e->pass = 0;
		e->seen_gen = 0;
	}
	pthread_mutex_unlock(&sh->mu);
}

int
filestate_unchanged(struct filestate *fs, const char *path, const struct fs_seen *seen)
{
	struct stat st;
	kiln_id h;
	int racy, rv = stat_regular(fs, path, &st);

	if (seen->missing)
		return rv == KILN_ENOTFOUND;
	if (rv != 0 || !stat_equal(&seen->rec, &st))
		return 0;
	if (!seen->racy)
		return 1;
	/* the stat cannot tell: the content can */
	return file_hash(fs, path, &st, &h, &racy) == 0 && stat_equal(&seen->rec, &st) &&
	       memcmp(h.b, seen->rec.hash.b, sizeof h.b) == 0;
}

int
filestate_flush(struct filestate *fs, kiln_batch *b)
{
	int rv = 0;

	for (size_t k = 0; k < FS_SHARDS && rv == 0; k++) {
		struct shard *sh = &fs->shards[k];
		pthread_mutex_lock(&sh->mu);
		while (sh->dirty != NULL && rv == 0) {
			struct fentry *e = sh->dirty;
			kiln_file_rec r = e->rec;
			/* a racy record must not vouch for the file after a
			 * restart either: a stat that can never match */
			if (e->racy)
				r.ctime_ns = -1;
			if ((rv = kiln_batch_file_put(b, e->path, &r)) == 0) {
				sh->dirty = e->next_dirty;
				e->dirty = 0;
				e->next_dirty = NULL;
			}
		}
		pthread_mutex_unlock(&sh->mu);
	}
	return rv;
}
