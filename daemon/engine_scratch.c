/* engine_scratch.c — the scratch folders steps run in, kept and reused.
 *
 * Every run gets .kiln/scratch/<n>/ for its outputs, with <n>.log (its
 * stdout and stderr) and <n>.trace (the file-access shim's records) beside
 * it. Making and removing those for every step cost more than the tools
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
 * Threads: any worker; the free list has its own lock (never held while
 * calling out). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"

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
			goto out;
		}
		e->scratch_free = nv;
		e->capscratch_free = ncap;
	}
	e->scratch_free[e->nscratch_free++] = sl;
out:
	pthread_mutex_unlock(&e->scratch_mu);
	return rv;
}

/* Make folder dir, and .kiln/scratch above it when that is missing (made
 * on the first step, and again if removed). 0: made, 1: it was there. */
static int
dir_make(struct engine *e, const char *dir)
{
	char parent[PATH_MAX];

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno == EEXIST)
		return 1;
	if (errno != ENOENT)
		return kiln_err_from_errno(errno);
	snprintf(parent, sizeof parent, "%s/.kiln/scratch", e->root);
	if (mkdir(parent, 0755) != 0 && errno != EEXIST)
		return kiln_err_from_errno(errno);
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
	if ((size_t)snprintf(dir, sizeof dir, "%s/.kiln/scratch/%u", e->root, n) >= sizeof dir) {
		if (sl.log_fd >= 0)
			close(sl.log_fd);
		return KILN_ERANGE;
	}
	if (fresh && (rv = dir_make(e, dir)) < 0)
		return rv;
	/* the last runs' records stay: this run's start after them */
	snprintf(path, sizeof path, "%s.trace", dir);
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
	snprintf(path, sizeof path, "%s.log", dir);
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

	snprintf(dir, sizeof dir, "%s/.kiln/scratch/%u", e->root, id);
	if (dir_empty(dir) && pool_push(e, (struct scratch_slot){id, log_fd}) == 0)
		return;
	if (log_fd >= 0)
		close(log_fd);
	/* something was left behind (or the folder is gone): start afresh
	 * under another number rather than clean up after the tool */
	engine_rmtree(dir);
	snprintf(path, sizeof path, "%s.log", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s.trace", dir);
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
