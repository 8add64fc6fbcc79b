/* watch.c — inotify-backed "changed since" answers (see watch.h).
 *
 * One inotify watch per folder that holds a file someone asked about, and
 * per folder above it up to the root. An event naming an entry records
 * "changed in generation next" for that path (next = the generation the
 * coming watch_sync starts); an event about a folder itself (moved,
 * removed, its watch gone), an entry with a watched folder's name (that
 * folder replaced, by a symlink say), or a queue overflow records that
 * everything changed in generation next, and forgets the per-path records
 * (they no longer matter). A folder with more than WATCH_DIR_NAMES
 * changed names recorded gets one record instead: everything in it
 * changed in generation next. Another folder appearing, moving or going
 * inside a watched one changes nothing trusted: a file is only trusted
 * when every folder on its path is watched, so none lies under an
 * unwatched folder (a file looked for where its folder did not exist yet
 * was not watchable, so not trusted).
 *
 * Threads: w->lock guards everything; the reader thread takes it for
 * writing for each batch of events it read. watch_clean, asked about every
 * file of a warm build from every worker at once, only reads, and so does
 * watch_prepare for a file whose folders are all watched already: they
 * take the lock shared. Writers go first (a waiting writer holds back new
 * readers), so a stream of lookups never keeps events from being
 * recorded. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "kiln_error.h"
#include "watch.h"
#include "kiln_strhash.h"

#define WATCH_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | \
                    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)

/* Names recorded as changed before the record is dropped for a reset. */
#define WATCH_MAX_CHANGED (1u << 20)

/* Names of one folder recorded as changed before they give way to one
 * record for the folder: everything in it changed. A build that writes
 * 100,000 outputs into build/<profile>/cp/ would otherwise leave 100,000
 * names here for the daemon's life. What it costs: each file of
 * that folder is stat'ed the next time someone asks about it, which an
 * output the daemon just wrote is anyway. */
#define WATCH_DIR_NAMES 4096

/* A string -> uint64 map, open addressing; keys are copied. */
struct smap {
	char **keys;
	uint64_t *hashes, *vals;
	size_t cap, n;
};

struct wdir {
	char *path;      /* relative to the root; "" is the root */
	int wd;          /* -1: not watched (its watch went away) */
	uint32_t nnames; /* its entries' names in changed */
	uint64_t whole_gen; /* everything in it changed in this generation
	                       (0: no such record; then not in whole[]) */
};

struct watch {
	pthread_rwlock_t lock;
	int fd, stopfd;
	pthread_t thread;
	int have_thread;
	char *root;
	uint64_t gen;        /* the current generation, from 1 */
	uint64_t reset_gen;  /* everything changed in this generation */
	struct wdir *dirs;
	size_t ndirs, capdirs;
	struct smap dir_index;   /* path -> index in dirs */
	size_t *by_wd;           /* wd -> index in dirs + 1 (0: none) */
	size_t nby_wd;
	struct smap changed;     /* path -> generation it changed in */
	watch_change_fn on_change; /* watch_on_change; NULL: none */
	void *on_change_arg;
	size_t *whole;           /* indices in dirs of those with a whole_gen */
	size_t nwhole, capwhole;
	atomic_uint stall_ms;    /* watch_test_stall; read by the reader alone */
};

/* 0 marks an empty slot */
static uint64_t
str_hash(const char *s)
{
	return kiln_strhash(s) | 1;
}

static size_t
smap_find(const struct smap *m, const char *key, uint64_t h)
{
	size_t i = h & (m->cap - 1);

	while (m->hashes[i] != 0 && (m->hashes[i] != h || strcmp(m->keys[i], key) != 0))
		i = (i + 1) & (m->cap - 1);
	return i;
}

static uint64_t *
smap_get(const struct smap *m, const char *key)
{
	size_t i;

	if (m->cap == 0)
		return NULL;
	i = smap_find(m, key, str_hash(key));
	return m->hashes[i] != 0 ? &m->vals[i] : NULL;
}

static int
smap_grow(struct smap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	struct smap n = {calloc(ncap, sizeof(char *)), calloc(ncap, sizeof(uint64_t)),
	                 calloc(ncap, sizeof(uint64_t)), ncap, m->n};

	if (n.keys == NULL || n.hashes == NULL || n.vals == NULL) {
		free(n.keys);
		free(n.hashes);
		free(n.vals);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->hashes[i] != 0) {
			size_t k = smap_find(&n, m->keys[i], m->hashes[i]);
			n.keys[k] = m->keys[i];
			n.hashes[k] = m->hashes[i];
			n.vals[k] = m->vals[i];
		}
	free(m->keys);
	free(m->hashes);
	free(m->vals);
	*m = n;
	return 0;
}

/* Set key to val. 0 or KILN_ENOMEM. */
static int
smap_put(struct smap *m, const char *key, uint64_t val)
{
	uint64_t h = str_hash(key);
	size_t i;

	if ((m->n + 1) * 4 > m->cap * 3 && smap_grow(m) != 0)
		return KILN_ENOMEM;
	i = smap_find(m, key, h);
	if (m->hashes[i] == 0) {
		if ((m->keys[i] = strdup(key)) == NULL)
			return KILN_ENOMEM;
		m->hashes[i] = h;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}

/* Whether path names an entry right inside folder dir ("" the root). */
static int
entry_of(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	if (len == 0)
		return strchr(path, '/') == NULL;
	return strncmp(path, dir, len) == 0 && path[len] == '/' &&
	       strchr(path + len + 1, '/') == NULL;
}

/* Remove every key naming an entry of folder dir: the table is made
 * again without them (open addressing keeps no tombstones). 0 or
 * KILN_ENOMEM (m unchanged). */
static int
smap_drop_entries(struct smap *m, const char *dir)
{
	struct smap n = {calloc(m->cap, sizeof(char *)), calloc(m->cap, sizeof(uint64_t)),
	                 calloc(m->cap, sizeof(uint64_t)), m->cap, 0};

	if (n.keys == NULL || n.hashes == NULL || n.vals == NULL) {
		free(n.keys);
		free(n.hashes);
		free(n.vals);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->hashes[i] == 0)
			continue;
		if (entry_of(m->keys[i], dir)) {
			free(m->keys[i]);
			continue;
		}
		size_t k = smap_find(&n, m->keys[i], m->hashes[i]);
		n.keys[k] = m->keys[i];
		n.hashes[k] = m->hashes[i];
		n.vals[k] = m->vals[i];
		n.n++;
	}
	free(m->keys);
	free(m->hashes);
	free(m->vals);
	*m = n;
	return 0;
}

static void
smap_clear(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->hashes);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

/* ---- events ------------------------------------------------------------- */

/* Everything may have changed in the coming generation. Lock held. */
static void
reset_all(struct watch *w)
{
	w->reset_gen = w->gen + 1;
	smap_clear(&w->changed);
	/* every record is older than the reset, so none tells more */
	for (size_t i = 0; i < w->ndirs; i++) {
		w->dirs[i].nnames = 0;
		w->dirs[i].whole_gen = 0;
	}
	w->nwhole = 0;
}

/* Replace d's recorded names by one record: everything in it changed in
 * the coming generation. 0, or KILN_ENOMEM: the caller resets. Lock held. */
static int
dir_whole(struct watch *w, struct wdir *d)
{
	if (d->whole_gen == 0) {
		if (w->nwhole == w->capwhole) {
			size_t n = w->capwhole ? w->capwhole * 2 : 8;
			size_t *nv = realloc(w->whole, n * sizeof *nv);
			if (nv == NULL)
				return KILN_ENOMEM;
			w->whole = nv;
			w->capwhole = n;
		}
		w->whole[w->nwhole++] = (size_t)(d - w->dirs);
	}
	if (smap_drop_entries(&w->changed, d->path) != 0)
		return KILN_ENOMEM;
	d->whole_gen = w->gen + 1;
	d->nnames = 0;
	return 0;
}

static struct wdir *
dir_of_wd(struct watch *w, int wd)
{
	if (wd < 0 || (size_t)wd >= w->nby_wd || w->by_wd[wd] == 0)
		return NULL;
	return &w->dirs[w->by_wd[wd] - 1];
}

/* Tell the change listener, if any. Lock held. */
static void
notify(struct watch *w, const char *path, enum watch_change kind)
{
	if (w->on_change != NULL)
		w->on_change(w->on_change_arg, path, kind);
}

/* One event. Lock held. */
static void
event_take(struct watch *w, const struct inotify_event *ev)
{
	char path[PATH_MAX];
	struct wdir *d;
	size_t before;

	if (ev->mask & IN_Q_OVERFLOW) {
		reset_all(w);
		notify(w, NULL, WATCH_CHANGE_OVERFLOW);
		return;
	}
	if ((d = dir_of_wd(w, ev->wd)) == NULL)
		return;
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
		if (ev->mask & IN_IGNORED) {   /* the watch is gone */
			w->by_wd[ev->wd] = 0;
			d->wd = -1;
		}
		reset_all(w);
		notify(w, NULL, WATCH_CHANGE_ALL);
		return;
	}
	if (ev->len == 0 || ev->name[0] == '\0')
		return;
	if ((size_t)snprintf(path, sizeof path, "%s%s%s", d->path, d->path[0] ? "/" : "",
	                     ev->name) >= sizeof path ||
	    smap_get(&w->dir_index, path) != NULL) {
		reset_all(w);   /* (a watched folder's name: see the top) */
		notify(w, NULL, WATCH_CHANGE_ALL);
		return;
	}
	notify(w, path, ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO) ?
	                WATCH_CHANGE_COMPLETE : WATCH_CHANGE_PARTIAL);
	if (d->whole_gen == w->gen + 1)
		return;   /* the folder's record says it already */
	/* the record of changed names is bounded: past that, start over */
	if (w->changed.n >= WATCH_MAX_CHANGED) {
		reset_all(w);
		return;
	}
	if (d->nnames >= WATCH_DIR_NAMES) {
		if (dir_whole(w, d) != 0)
			reset_all(w);
		return;
	}
	before = w->changed.n;
	if (smap_put(&w->changed, path, w->gen + 1) != 0)
		reset_all(w);
	else if (w->changed.n > before)
		d->nnames++;
}

/* Read what is queued (non-blocking). Lock held. */
static void
drain(struct watch *w)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(w->fd, buf, sizeof buf)) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			event_take(w, ev);
			p += sizeof *ev + ev->len;
		}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		reset_all(w);
		notify(w, NULL, WATCH_CHANGE_ALL);
	}
}

static void *
reader_main(void *arg)
{
	struct watch *w = arg;
	struct pollfd p[2] = {{w->fd, POLLIN, 0}, {w->stopfd, POLLIN, 0}};

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents) {
			unsigned stall = atomic_load(&w->stall_ms);
			pthread_rwlock_wrlock(&w->lock);
			/* (the test hook: nobody reads the queue for a while, not
			 * even a build's watch_sync, which waits for the lock; the
			 * reader still stops at once) */
			if (stall > 0 && poll(&p[1], 1, (int)stall) > 0) {
				pthread_rwlock_unlock(&w->lock);
				break;
			}
			drain(w);
			pthread_rwlock_unlock(&w->lock);
		}
	}
	return NULL;
}

/* ---- the interface ------------------------------------------------------ */

int
watch_new(const char *root, struct watch **wp)
{
	struct watch *w = calloc(1, sizeof *w);
	int rv;

	*wp = NULL;
	if (w == NULL || (w->root = strdup(root)) == NULL) {
		free(w);
		return KILN_ENOMEM;
	}
	w->gen = 1;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	{
		pthread_rwlockattr_t a;
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&w->lock, &a);
		pthread_rwlockattr_destroy(&a);
	}
	if (w->fd < 0 || w->stopfd < 0) {
		rv = kiln_err_from_errno(errno);
		watch_free(w);
		return rv;
	}
	{
		/* the reader takes no signal meant for the daemon's other threads */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rv = pthread_create(&w->thread, NULL, reader_main, w);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rv != 0) {
			watch_free(w);
			return KILN_ENOMEM;
		}
	}
	w->have_thread = 1;
	*wp = w;
	return 0;
}

void
watch_free(struct watch *w)
{
	uint64_t one = 1;

	if (w == NULL)
		return;
	if (w->have_thread) {
		if (write(w->stopfd, &one, sizeof one) < 0) {
			/* an eventfd write cannot fail short of overflow */
		}
		pthread_join(w->thread, NULL);
	}
	if (w->fd >= 0)
		close(w->fd);
	if (w->stopfd >= 0)
		close(w->stopfd);
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i].path);
	free(w->dirs);
	free(w->by_wd);
	free(w->whole);
	smap_clear(&w->dir_index);
	smap_clear(&w->changed);
	pthread_rwlock_destroy(&w->lock);
	free(w->root);
	free(w);
}

void
watch_on_change(struct watch *w, watch_change_fn fn, void *arg)
{
	pthread_rwlock_wrlock(&w->lock);
	w->on_change = fn;
	w->on_change_arg = arg;
	pthread_rwlock_unlock(&w->lock);
}

void
watch_test_stall(struct watch *w, unsigned ms)
{
	atomic_store(&w->stall_ms, ms);
}

void
watch_sync(struct watch *w)
{
	pthread_rwlock_wrlock(&w->lock);
	drain(w);
	w->gen++;
	pthread_rwlock_unlock(&w->lock);
}

/* Watch folder dir (relative; "" the root). 0, KILN_ERANGE (too long),
 * KILN_EEXIST (one folder under two names), KILN_ENOMEM, or inotify's
 * error (its errno's code). Lock held. */
static int
dir_watch(struct watch *w, const char *dir)
{
	char full[PATH_MAX];
	uint64_t *idx = smap_get(&w->dir_index, dir);
	struct wdir *d = idx ? &w->dirs[*idx] : NULL;
	int wd;

	if (d != NULL && d->wd >= 0)
		return 0;
	if ((size_t)snprintf(full, sizeof full, "%s%s%s", w->root, dir[0] ? "/" : "", dir) >=
	    sizeof full)
		return KILN_ERANGE;
	if ((wd = inotify_add_watch(w->fd, full, WATCH_MASK | IN_ONLYDIR)) < 0)
		return kiln_err_from_errno(errno);
	if ((size_t)wd >= w->nby_wd) {
		size_t n = (size_t)wd * 2 + 16;
		size_t *nv = realloc(w->by_wd, n * sizeof *nv);
		if (nv == NULL)
			goto fail;
		memset(nv + w->nby_wd, 0, (n - w->nby_wd) * sizeof *nv);
		w->by_wd = nv;
		w->nby_wd = n;
	}
	if (w->by_wd[wd] != 0 && (d == NULL || w->by_wd[wd] != (size_t)(d - w->dirs) + 1))
		/* one folder under two names (a symlink): its events would
		 * name only one of them, so trust neither name */
		return KILN_EEXIST;
	if (d == NULL) {
		if (w->ndirs == w->capdirs) {
			size_t n = w->capdirs ? w->capdirs * 2 : 16;
			struct wdir *nv = realloc(w->dirs, n * sizeof *nv);
			if (nv == NULL)
				goto fail;
			w->dirs = nv;
			w->capdirs = n;
		}
		d = &w->dirs[w->ndirs];
		if ((d->path = strdup(dir)) == NULL)
			goto fail;
		d->nnames = 0;
		d->whole_gen = 0;
		if (smap_put(&w->dir_index, dir, w->ndirs) != 0) {
			free(d->path);
			goto fail;
		}
		w->ndirs++;
	}
	d->wd = wd;
	w->by_wd[wd] = (size_t)(d - w->dirs) + 1;
	return 0;
fail:
	inotify_rm_watch(w->fd, wd);
	return KILN_ENOMEM;
}

/* Whether every folder on relpath's way (copied into dir) is watched
 * already, so watch_prepare has nothing to change (lock held, either
 * way). */
static int
dirs_watched(struct watch *w, char *dir, const char *relpath, size_t len)
{
	memcpy(dir, relpath, len + 1);
	for (char *slash = strrchr(dir, '/');; slash = strrchr(dir, '/')) {
		uint64_t *idx;
		if (slash != NULL)
			*slash = '\0';
		idx = smap_get(&w->dir_index, slash != NULL ? dir : "");
		if (idx == NULL || w->dirs[*idx].wd < 0)
			return 0;
		if (slash == NULL)
			return 1;
	}
}

int
watch_prepare(struct watch *w, const char *relpath, uint64_t *gen)
{
	char dir[PATH_MAX];
	size_t len = strlen(relpath);
	int rv = 0;

	if (relpath[0] == '/' || len >= sizeof dir)
		return KILN_EINVAL;
	/* Most files are in folders watched already (a restore materializes
	 * 10,000 outputs into a few): a shared lock is enough to see that,
	 * where the exclusive one made the workers queue on it. */
	pthread_rwlock_rdlock(&w->lock);
	if (dirs_watched(w, dir, relpath, len)) {
		*gen = w->gen;
		pthread_rwlock_unlock(&w->lock);
		return 0;
	}
	pthread_rwlock_unlock(&w->lock);
	memcpy(dir, relpath, len + 1);
	pthread_rwlock_wrlock(&w->lock);
	/* the file's folder, then each one above it, the root last */
	for (char *slash = strrchr(dir, '/'); rv == 0;) {
		if (slash == NULL) {
			rv = dir_watch(w, "");
			break;
		}
		*slash = '\0';
		rv = dir_watch(w, dir);
		slash = strrchr(dir, '/');
	}
	*gen = w->gen;
	pthread_rwlock_unlock(&w->lock);
	return rv;
}

int
watch_clean(struct watch *w, const char *relpath, uint64_t gen)
{
	uint64_t *changed;
	int clean;

	if (gen == 0)
		return 0;
	pthread_rwlock_rdlock(&w->lock);
	clean = gen >= w->reset_gen &&
	        ((changed = smap_get(&w->changed, relpath)) == NULL || *changed <= gen);
	for (size_t i = 0; clean && i < w->nwhole; i++) {
		const struct wdir *d = &w->dirs[w->whole[i]];
		if (d->whole_gen > gen && entry_of(relpath, d->path))
			clean = 0;
	}
	pthread_rwlock_unlock(&w->lock);
	return clean;
}

int
watch_folder(struct watch *w, const char *reldir)
{
	char probe[PATH_MAX];
	uint64_t gen;

	/* watch_prepare watches the folders of a file: name one in reldir */
	if ((size_t)snprintf(probe, sizeof probe, "%s%s.", reldir,
	                     reldir[0] ? "/" : "") >= sizeof probe)
		return KILN_ERANGE;
	return watch_prepare(w, probe, &gen);
}
