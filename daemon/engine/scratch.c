/* scratch.c — the scratch folders steps run in, kept and reused.
 *
 * Each daemon run has an area of its own, .kiln/scratch/<run>/, made with
 * mkdtemp when the engine starts (<run> is the start time and six random
 * characters; the areas of earlier runs are removed first). A step's run
 * gets <area>/<n>/ for its outputs, with <n>.log (its stdout and stderr),
 * <n>.trace (the file-access shim's records) and <n>.d (its depfile)
 * beside it. A path is never handed out by two daemon runs: a process of
 * a killed daemon's run that survived the sweep (orphans.h) and still
 * writes by its old path writes into a removed area, never into a folder
 * of the new run. scratch_path is the one place that builds these paths.
 *
 * Making and removing those for every step cost more than the tools
 * themselves on small steps: each is an inode allocated and freed, and on
 * ext4 without a journal every allocation walks past the inodes freed in
 * the last minutes (recently_deleted()), so the churn grows quadratically
 * over a large build. So a folder whose run left it empty (its outputs
 * moved into the store) goes back to a free list with its log and trace
 * files, and the next run uses them instead of creating new ones: an empty
 * log stays open on the list, and a trace is read from where the last
 * run's ended (truncating it every run freed its blocks, a journalled
 * inode update per step; it is cut back only past TRACE_KEEP). A folder a
 * tool left files in is removed and its number never reused.
 *
 * The processes of a run are killed (its process group) before the run is
 * finished, so nothing of an earlier run writes into a reused folder.
 *
 * Threads: scratch_init from the thread starting the engine; the rest
 * from any worker; the free list has its own lock (never held while
 * calling out). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "kiln_rmtree.h"
#include "scratch.h"

/* A reused folder's trace is cut back to nothing once it holds this much
 * (each run's records are a few hundred bytes to a few KiB). */
#define TRACE_KEEP (1 << 20)

/* Pop a free folder: its number (0 when the list is empty) and its open
 * empty log, or -1. */
static struct scratch_slot
pool_pop(struct engine *e)
{
	struct scratch_slot sl = {0, -1};

	pthread_mutex_lock(&e->scratch_mu);
	if (e->nscratch_free > 0)
		sl = e->scratch_free[--e->nscratch_free];
	pthread_mutex_unlock(&e->scratch_mu);
	return sl;
}

/* Push a free folder; when the list cannot grow the folder is simply
 * not reused (0 or -1). */
static int
pool_push(struct engine *e, struct scratch_slot sl)
{
	int rv = 0;

	pthread_mutex_lock(&e->scratch_mu);
	if (e->nscratch_free == e->capscratch_free) {
		size_t ncap = e->capscratch_free ? 2 * e->capscratch_free : 16;
		struct scratch_slot *nv = realloc(e->scratch_free, ncap * sizeof *nv);
		if (nv == NULL) {
			rv = -1;
			goto fail;
		}
		e->scratch_free = nv;
		e->capscratch_free = ncap;
	}
	e->scratch_free[e->nscratch_free++] = sl;
fail:
	pthread_mutex_unlock(&e->scratch_mu);
	return rv;
}

/* Where every daemon run's area is, relative to the root. */
#define SCRATCH_TOP ".kiln/scratch"

int
scratch_path(const struct engine *e, unsigned id, const char *suffix,
             int absolute, char *out, size_t len)
{
	int n;

	if (id == 0)   /* the area itself */
		n = snprintf(out, len, "%s%s" SCRATCH_TOP "/%s", absolute ? e->root : "",
		             absolute ? "/" : "", e->scratch_run);
	else
		n = snprintf(out, len, "%s%s" SCRATCH_TOP "/%s/%u%s",
		             absolute ? e->root : "", absolute ? "/" : "",
		             e->scratch_run, id, suffix);
	return n < 0 || (size_t)n >= len ? KILN_ERANGE : 0;
}

int
scratch_init(struct engine *e)
{
	char top[PATH_MAX], area[PATH_MAX];
	struct tm tm;
	time_t now = time(NULL);

	snprintf(top, sizeof top, "%s/" SCRATCH_TOP, e->root);
	kiln_rmtree(top);
	if (mkdir(top, 0755) != 0 && errno != EEXIST)
		return kiln_err_from_errno(errno);
	/* the time keeps a name apart from every earlier run's even though
	 * their areas are gone, which mkdtemp alone cannot see */
	gmtime_r(&now, &tm);
	if ((size_t)snprintf(area, sizeof area, "%s/%04d%02d%02dT%02d%02d%02d-XXXXXX",
	                     top, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	                     tm.tm_hour, tm.tm_min, tm.tm_sec) >= sizeof area)
		return KILN_ERANGE;
	if (mkdtemp(area) == NULL)
		return kiln_err_from_errno(errno);
	snprintf(e->scratch_run, sizeof e->scratch_run, "%s", strrchr(area, '/') + 1);
	return 0;
}

/* Make folder dir, and the area and .kiln/scratch above it when they are
 * missing (removed under the running daemon). 0: made, 1: it was there. */
static int
dir_make(struct engine *e, const char *dir)
{
	char path[PATH_MAX];

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno == EEXIST)
		return 1;
	if (errno != ENOENT)
		return kiln_err_from_errno(errno);
	snprintf(path, sizeof path, "%s/" SCRATCH_TOP, e->root);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return kiln_err_from_errno(errno);
	if (scratch_path(e, 0, "", 1, path, sizeof path) != 0 ||
	    (mkdir(path, 0755) != 0 && errno != EEXIST))
		return KILN_EIO;
	return mkdir(dir, 0755) == 0 ? 0 : kiln_err_from_errno(errno);
}

int
scratch_take(struct engine *e, unsigned *id, int *log_fd, off_t *trace_off)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct scratch_slot sl = pool_pop(e);
	unsigned n = sl.id;
	int fresh = n == 0, rv;
	struct stat st;

	if (fresh)
		n = __atomic_add_fetch(&e->next_scratch, 1, __ATOMIC_RELAXED);
	*id = n;
	*log_fd = -1;
	*trace_off = 0;
	if (scratch_path(e, n, "", 1, dir, sizeof dir) != 0 ||
	    scratch_path(e, n, ".trace", 1, path, sizeof path) != 0) {
		if (sl.log_fd >= 0)
			close(sl.log_fd);
		return KILN_ERANGE;
	}
	if (fresh && (rv = dir_make(e, dir)) < 0)
		return rv;
	/* the last runs' records stay: this run's start after them */
	if (!fresh && stat(path, &st) == 0) {
		if (st.st_size <= TRACE_KEEP)
			*trace_off = st.st_size;
		else if (truncate(path, 0) != 0) {
			rv = kiln_err_from_errno(errno);
			goto fail;
		}
	} else if (!fresh && errno == ENOENT) {
		/* no trace (an untraced tool writes none), or someone removed
		 * .kiln/scratch under the running daemon: then the folder is
		 * made again, and the log kept open is of a removed file */
		if ((rv = dir_make(e, dir)) < 0)
			goto fail;
		if (rv == 0 && sl.log_fd >= 0) {
			close(sl.log_fd);
			sl.log_fd = -1;
		}
	}
	if (sl.log_fd >= 0) {
		*log_fd = sl.log_fd;
		return 0;
	}
	scratch_path(e, n, ".log", 1, path, sizeof path);
	if ((*log_fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	return 0;
fail:
	scratch_give(e, n, sl.log_fd);
	return rv;
}

/* Whether folder dir holds nothing: 1, 0 (something, or unreadable). */
static int
dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int empty = 1;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

void
scratch_give(struct engine *e, unsigned id, int log_fd)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];

	if (scratch_path(e, id, "", 1, dir, sizeof dir) != 0)
		return;   /* never handed out: scratch_take checked the length */
	if (dir_empty(dir) && pool_push(e, (struct scratch_slot){id, log_fd}) == 0)
		return;
	if (log_fd >= 0)
		close(log_fd);
	/* something was left behind (or the folder is gone): start afresh
	 * under another number rather than clean up after the tool */
	kiln_rmtree(dir);
	scratch_path(e, id, ".log", 1, path, sizeof path);
	unlink(path);
	scratch_path(e, id, ".trace", 1, path, sizeof path);
	unlink(path);
}

void
scratch_free_all(struct engine *e)
{
	for (size_t i = 0; i < e->nscratch_free; i++)
		if (e->scratch_free[i].log_fd >= 0)
			close(e->scratch_free[i].log_fd);
	free(e->scratch_free);
	e->scratch_free = NULL;
	e->nscratch_free = e->capscratch_free = 0;
}
