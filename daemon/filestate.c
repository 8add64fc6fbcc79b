/* filestate.c — stat-first content hashing with a memory of every file
 * seen (see filestate.h).
 *
 * The table maps a path to its last stat and hash; entries are never
 * removed (a project's files number in the hundreds of thousands at most,
 * and a missing file is worth remembering too). One mutex guards the
 * table; stat and hashing run outside it, so two threads asking for the
 * same changed file may both hash it, which is wasted work but harmless. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filestate.h"
#include "watch.h"

/* One a file (100,000 sources: the path in the same allocation, and
 * byte flags, save ~30 bytes a file over separate strings and ints). */
struct fentry {
	uint64_t h;       /* of path, compared before the string */
	kiln_file_rec rec;
	struct fentry *next_dirty;
	uint64_t pass;    /* stat'ed during this pass */
	uint64_t seen_gen; /* the watch's generation of that stat (0: none) */
	uint8_t known;    /* rec holds a stat and hash (else: unknown) */
	uint8_t missing;  /* at the last stat it did not exist */
	uint8_t dirty;    /* rec changed since the last flush (on the list) */
	char path[];
};

struct filestate {
	kiln_store *s;
	char *root;
	int rootfd;       /* O_PATH: short path walks from the root */
	pthread_mutex_t mu;
	struct fentry **slots;
	size_t cap, n;
	struct fentry *dirty;  /* records to write at the next flush */
	uint64_t pass;
	int verify;
	struct watch *watch;   /* NULL: stat every file every pass */
	atomic_uint_fast64_t nstat, nhashed;
};

static uint64_t
str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

int
filestate_new(kiln_store *s, const char *root, struct filestate **fsp)
{
	struct filestate *fs = calloc(1, sizeof *fs);

	if (fs == NULL || (fs->root = strdup(root)) == NULL ||
	    (fs->slots = calloc(1024, sizeof *fs->slots)) == NULL) {
		if (fs != NULL)
			free(fs->root);
		free(fs);
		return KILN_ENOMEM;
	}
	if ((fs->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		int rv = kiln_err_from_errno(errno);
		free(fs->slots);
		free(fs->root);
		free(fs);
		return rv;
	}
	fs->cap = 1024;
	fs->s = s;
	fs->pass = 1;
	pthread_mutex_init(&fs->mu, NULL);
	*fsp = fs;
	return 0;
}

void
filestate_free(struct filestate *fs)
{
	if (fs == NULL)
		return;
	for (size_t i = 0; i < fs->cap; i++)
		free(fs->slots[i]);
	free(fs->slots);
	free(fs->root);
	close(fs->rootfd);
	pthread_mutex_destroy(&fs->mu);
	free(fs);
}

void
filestate_pass(struct filestate *fs)
{
	pthread_mutex_lock(&fs->mu);
	fs->pass++;
	pthread_mutex_unlock(&fs->mu);
}

void
filestate_set_watch(struct filestate *fs, struct watch *w)
{
	pthread_mutex_lock(&fs->mu);
	fs->watch = w;
	pthread_mutex_unlock(&fs->mu);
}

void
filestate_set_verify(struct filestate *fs, int verify)
{
	pthread_mutex_lock(&fs->mu);
	fs->verify = verify;
	pthread_mutex_unlock(&fs->mu);
}

void
filestate_counts(struct filestate *fs, uint64_t *nstat, uint64_t *nhashed)
{
	*nstat = atomic_load(&fs->nstat);
	*nhashed = atomic_load(&fs->nhashed);
}

/* Double the table (mu held). */
static int
table_grow(struct filestate *fs)
{
	size_t ncap = fs->cap * 2;
	struct fentry **ns = calloc(ncap, sizeof *ns);

	if (ns == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < fs->cap; i++) {
		struct fentry *e = fs->slots[i];
		if (e == NULL)
			continue;
		size_t j = e->h & (ncap - 1);
		while (ns[j] != NULL)
			j = (j + 1) & (ncap - 1);
		ns[j] = e;
	}
	free(fs->slots);
	fs->slots = ns;
	fs->cap = ncap;
	return 0;
}

/* The entry of path, made when absent (mu held). NULL: out of memory. */
static struct fentry *
table_get(struct filestate *fs, const char *path)
{
	uint64_t h = str_hash(path);
	size_t i = h & (fs->cap - 1);
	struct fentry *e;
	size_t len;

	for (; fs->slots[i] != NULL; i = (i + 1) & (fs->cap - 1))
		if (fs->slots[i]->h == h && strcmp(fs->slots[i]->path, path) == 0)
			return fs->slots[i];
	if ((fs->n + 1) * 4 > fs->cap * 3) {
		if (table_grow(fs) != 0)
			return NULL;
		return table_get(fs, path);
	}
	len = strlen(path);
	if ((e = calloc(1, sizeof *e + len + 1)) == NULL)
		return NULL;
	memcpy(e->path, path, len + 1);
	e->h = h;
	fs->slots[i] = e;
	fs->n++;
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
	if (fstatat(dfd, path, st, 0) != 0)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND
		                                           : kiln_err_from_errno(errno);
	return S_ISREG(st->st_mode) ? 0 : KILN_ENOTFOUND;
}

/* Hash the file's content, and stat it again through the open file so the
 * stat recorded is the one of the bytes hashed. */
static int
file_hash(struct filestate *fs, const char *path, struct stat *st, kiln_id *hash)
{
	int fd = openat(path[0] == '/' ? AT_FDCWD : fs->rootfd, path,
	                O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int rv;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? KILN_ENOTFOUND
		                                           : kiln_err_from_errno(errno);
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return KILN_ENOTFOUND;
	}
	rv = kiln_id_of_fd(fd, hash, NULL);
	close(fd);
	if (rv == 0)
		atomic_fetch_add(&fs->nhashed, 1);
	return rv;
}

int
filestate_hash(struct filestate *fs, const char *path, kiln_id *hash)
{
	struct fentry *e;
	kiln_file_rec rec, db;
	struct stat st;
	int rv, known, verify, watched;
	uint64_t pass, gen = 0;

	pthread_mutex_lock(&fs->mu);
	if ((e = table_get(fs, path)) == NULL) {
		pthread_mutex_unlock(&fs->mu);
		return KILN_ENOMEM;
	}
	/* seen this pass, or nothing touched it since it was last looked at
	 * (the watch's lock nests inside ours; it never takes ours) */
	if (e->pass == fs->pass ||
	    (fs->watch != NULL && !fs->verify && (e->known || e->missing) &&
	     watch_clean(fs->watch, path, e->seen_gen))) {
		e->pass = fs->pass;
		rv = e->missing ? KILN_ENOTFOUND : 0;
		*hash = e->missing ? (kiln_id){{0}} : e->rec.hash;
		pthread_mutex_unlock(&fs->mu);
		return rv;
	}
	known = e->known;
	rec = e->rec;
	pass = fs->pass;
	verify = fs->verify;
	pthread_mutex_unlock(&fs->mu);

	watched = fs->watch != NULL && path[0] != '/' &&
	          watch_prepare(fs->watch, path, &gen) == 0;

	if (!known) {
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
		rv = file_hash(fs, path, &st, hash);
		rec_of_stat(&rec, &st);
		rec.hash = *hash;
		known = -1;  /* changed: record it */
	}
	if (rv == KILN_ENOTFOUND) {
		pthread_mutex_lock(&fs->mu);
		e->missing = 1;
		e->pass = pass;
		e->seen_gen = watched ? gen : 0;
		pthread_mutex_unlock(&fs->mu);
		memset(hash, 0, sizeof *hash);
		return rv;
	}
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&fs->mu);
	e->rec = rec;
	e->known = 1;
	e->missing = 0;
	e->pass = pass;
	e->seen_gen = watched ? gen : 0;
	if (known == -1 && path[0] != '/' && !e->dirty) {
		e->dirty = 1;
		e->next_dirty = fs->dirty;
		fs->dirty = e;
	}
	pthread_mutex_unlock(&fs->mu);
	return 0;
}

int
filestate_flush(struct filestate *fs, kiln_batch *b)
{
	int rv = 0;

	pthread_mutex_lock(&fs->mu);
	while (fs->dirty != NULL && rv == 0) {
		struct fentry *e = fs->dirty;
		if ((rv = kiln_batch_file_put(b, e->path, &e->rec)) == 0) {
			fs->dirty = e->next_dirty;
			e->dirty = 0;
			e->next_dirty = NULL;
		}
	}
	pthread_mutex_unlock(&fs->mu);
	return rv;
}
