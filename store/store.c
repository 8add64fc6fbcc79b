/* store.c — opening and closing a store, and its folder layout.
 *
 * <store>/kiln-store holds "kiln-store <STORE_FORMAT>\n" and is written last
 * when a store is made, so a folder with the marker is a complete store. A
 * folder holding only our own layout entries but no marker is a creation
 * that was interrupted, and CREATE finishes it. Any other non-empty folder
 * is refused: kiln never scribbles into a folder it does not own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"
#include "kiln_clock.h"

#define DEFAULT_MAP_SIZE (16ULL << 30)
#define MARKER "kiln-store"
/* Temp files that name no writer process are removed after this long. */
#define TMP_MAX_AGE_S 3600

void
store_blob_path(const kiln_store *s, const kiln_id *id, char *buf)
{
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	snprintf(buf, PATH_MAX, "%s/%.2s/%s", s->objects, hex, hex + 2);
}

int
store_tmp_named(const kiln_store *s, const char *kind, char *name, int *fd)
{
	snprintf(name, PATH_MAX, "%s/%s-%ld-XXXXXX", s->tmp, kind, (long)getpid());
	if ((*fd = mkostemp(name, O_CLOEXEC)) < 0)
		return kiln_err_from_errno(errno);
	return 0;
}

int
store_writable(const kiln_store *s)
{
	return (s->flags & KILN_STORE_RDONLY) ? KILN_EREADONLY : 0;
}

const char *
kiln_store_dir(const kiln_store *s)
{
	return s->dir;
}

static char *
path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);

	if (p != NULL)
		snprintf(p, n, "%s/%s", a, b);
	return p;
}

/* mkdir -p, for the store folder itself (e.g. <project>/.kiln/store). */
static int
mkdir_parents(const char *dir)
{
	char buf[PATH_MAX];
	int rv;

	if (strlen(dir) >= sizeof buf)
		return KILN_EINVAL;
	strcpy(buf, dir);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		rv = fio_mkdir(buf, 0755, NULL);
		*p = '/';
		if (rv != 0)
			return rv;
	}
	return fio_mkdir(buf, 0755, NULL);
}

/* Parse the marker: 0 (format in *fmt), KILN_ENOTFOUND, KILN_ENOTSTORE. */
static int
marker_read(const char *dir, int *fmt)
{
	char path[PATH_MAX], buf[64];
	int fd, n;
	ssize_t got;

	snprintf(path, sizeof path, "%s/" MARKER, dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? KILN_ENOTFOUND : kiln_err_from_errno(errno);
	got = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (got <= 0)
		return KILN_ENOTSTORE;
	buf[got] = '\0';
	if (sscanf(buf, MARKER " %d%n", fmt, &n) != 1 || *fmt < 1 || buf[n] != '\n')
		return KILN_ENOTSTORE;
	return 0;
}

/* Two processes may create one store at once: each writes its own temp
 * marker and renames it into place; either rename leaves the same bytes. */
static int
marker_write(const char *dir, int durable)
{
	char tmp[PATH_MAX], path[PATH_MAX], text[32];
	int fd, rv, len = snprintf(text, sizeof text, MARKER " %d\n", STORE_FORMAT);

	snprintf(tmp, sizeof tmp, "%s/" MARKER ".tmp-XXXXXX", dir);
	snprintf(path, sizeof path, "%s/" MARKER, dir);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return kiln_err_from_errno(errno);
	fchmod(fd, 0644);
	rv = kiln_write_all(fd, text, (size_t)len);
	if (rv == 0 && durable && fsync(fd) != 0)
		rv = kiln_err_from_errno(errno);
	close(fd);
	if (rv == 0 && rename(tmp, path) != 0)
		rv = kiln_err_from_errno(errno);
	if (rv == 0 && durable)
		rv = fio_fsync_dir(dir);
	if (rv != 0)
		unlink(tmp);
	return rv;
}

/* 1 when the folder holds nothing but entries a store creation makes. */
static int
only_our_entries(const char *dir)
{
	static const char *const ours[] = {"objects", "tmp", "corrupt", "db"};
	DIR *d = opendir(dir);
	struct dirent *e;
	int ok = 1;

	if (d == NULL)
		return 0;
	while (ok && (e = readdir(d)) != NULL) {
		int known = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		            strcmp(e->d_name, MARKER) == 0 ||
		            strncmp(e->d_name, MARKER ".tmp-", sizeof MARKER + 4) == 0;
		for (size_t i = 0; !known && i < sizeof ours / sizeof ours[0]; i++)
			known = strcmp(e->d_name, ours[i]) == 0;
		ok = known;
	}
	closedir(d);
	return ok;
}

/* Decide whether dir is (or may become) a store. *fresh = must create. */
static int
store_check_folder(const char *dir, unsigned flags, int *fresh)
{
	struct stat st;
	int fmt = 0, rv;

	*fresh = 0;
	if (stat(dir, &st) != 0) {
		if (errno != ENOENT)
			return kiln_err_from_errno(errno);
		if (!(flags & KILN_STORE_CREATE))
			return KILN_ENOTFOUND;
		*fresh = 1;
		return mkdir_parents(dir);
	}
	if (!S_ISDIR(st.st_mode))
		return KILN_ENOTSTORE;
	rv = marker_read(dir, &fmt);
	if (rv == 0)
		return fmt > STORE_FORMAT ? KILN_EVERSION : 0;
	if (rv != KILN_ENOTFOUND)
		return rv;
	/* Another process creating this store may have renamed its marker
	 * into place since we looked (seen beside stress-ng: "not a kiln
	 * store"): the marker counts as ours, and is read again. */
	if (!only_our_entries(dir))
		return KILN_ENOTSTORE;
	if ((rv = marker_read(dir, &fmt)) == 0)
		return fmt > STORE_FORMAT ? KILN_EVERSION : 0;
	if (rv != KILN_ENOTFOUND)
		return rv;
	if (!(flags & KILN_STORE_CREATE))
		return KILN_ENOTFOUND;
	*fresh = 1;
	return 0;
}

/* The writer pid in a temp name "<kind>-<pid>-XXXXXX", or 0. */
static pid_t
tmp_owner(const char *name)
{
	const char *dash = strchr(name, '-');
	char *end;
	long pid;

	if (dash == NULL || dash[1] < '1' || dash[1] > '9')
		return 0;
	pid = strtol(dash + 1, &end, 10);
	return *end == '-' && pid > 0 ? (pid_t)pid : 0;
}

/* Remove temp files crashed writers left behind: those whose writer process
 * is gone, and unnamed leftovers not written for an hour. A live writer's
 * file is kept however old its mtime (put_move's file keeps the mtime the
 * caller gave it). */
static void
tmp_sweep(const char *tmpdir)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	struct stat st;
	time_t now = time(NULL);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		pid_t owner = tmp_owner(e->d_name);
		int gone;
		if (e->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (owner != 0)
			gone = kill(owner, 0) != 0 && errno == ESRCH;
		else
			gone = now - st.st_mtime > TMP_MAX_AGE_S;
		if (gone)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

static int
store_layout(kiln_store *s, char **dbdir, char **corrupt)
{
	int rv;

	*dbdir = path_join(s->dir, "db");
	*corrupt = path_join(s->dir, "corrupt");
	if (*dbdir == NULL || *corrupt == NULL)
		return KILN_ENOMEM;
	if (s->flags & KILN_STORE_RDONLY)
		return 0;
	if ((rv = fio_mkdir(s->objects, 0755, NULL)) != 0 ||
	    (rv = fio_mkdir(s->tmp, 0755, NULL)) != 0 ||
	    (rv = fio_mkdir(*dbdir, 0755, NULL)) != 0 ||
	    (rv = fio_mkdir(*corrupt, 0755, NULL)) != 0)
		return rv;
	return 0;
}

/* Take <dir>/db/open.lock: shared for a user, exclusive for a repair
 * (KILN_STORE_EXCLUSIVE, set-aside). KILN_EBUSY when the other kind is
 * held. A read-only opener of a store nobody opened for writing yet finds
 * no lock file and takes none (*fd = -1). */
static int
open_lock_take(const char *dir, int exclusive, int rdonly, int *fd)
{
	char path[PATH_MAX];

	*fd = -1;
	if (snprintf(path, sizeof path, "%s/db/open.lock", dir) >= (int)sizeof path)
		return KILN_ERANGE;
	*fd = rdonly ? open(path, O_RDONLY | O_CLOEXEC)
	             : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return rdonly && (errno == ENOENT || errno == EACCES) ? 0
		                                                      : kiln_err_from_errno(errno);
	if (flock(*fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
		int rv = errno == EWOULDBLOCK ? KILN_EBUSY : kiln_err_from_errno(errno);
		close(*fd);
		*fd = -1;
		return rv;
	}
	return 0;
}

/* KILN_DURABLE_BATCH syncs through a held fd of objects/ (store_sync_puts);
 * a read-only handle never puts. */
static int
store_open_objects(kiln_store *s)
{
	if (s->durability != KILN_DURABLE_BATCH || (s->flags & KILN_STORE_RDONLY))
		return 0;
	s->objects_fd = open(s->objects, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return s->objects_fd >= 0 ? 0 : kiln_err_from_errno(errno);
}

int
kiln_store_open(const char *dir, const kiln_store_opts *opts, kiln_store **sp)
{
	kiln_store_opts def = {0};
	kiln_store *s;
	char *dbdir = NULL, *corrupt = NULL;
	int fresh, rv;

	if (dir == NULL || *dir == '\0' || sp == NULL)
		return KILN_EINVAL;
	if (opts == NULL)
		opts = &def;
	if ((opts->flags & KILN_STORE_CREATE) && (opts->flags & KILN_STORE_RDONLY))
		return KILN_EINVAL;
	if ((rv = store_check_folder(dir, opts->flags, &fresh)) != 0)
		return rv;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return KILN_ENOMEM;
	s->flags = opts->flags;
	s->durability = opts->durability;
	s->now_ns = opts->now_ns;
	s->now_arg = opts->now_arg;
	s->objects_fd = -1;
	s->open_lock_fd = -1;
	pthread_mutex_init(&s->uses_mu, NULL);
	pthread_mutex_init(&s->sync_mu, NULL);
	s->dir = strdup(dir);
	s->objects = path_join(dir, "objects");
	s->tmp = path_join(dir, "tmp");
	if (s->dir == NULL || s->objects == NULL || s->tmp == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	if ((rv = store_layout(s, &dbdir, &corrupt)) != 0 ||
	    (rv = open_lock_take(dir, (opts->flags & KILN_STORE_EXCLUSIVE) != 0,
	                         (opts->flags & KILN_STORE_RDONLY) != 0,
	                         &s->open_lock_fd)) != 0 ||
	    (rv = store_open_objects(s)) != 0)
		goto fail;
	rv = db_open(dbdir, opts->map_size ? opts->map_size : DEFAULT_MAP_SIZE,
	             (opts->flags & KILN_STORE_RDONLY) != 0,
	             opts->durability == KILN_DURABLE_NONE,
	             (opts->flags & KILN_STORE_CHECK_PAGES) != 0, &s->db);
	if (rv != 0)
		goto fail;
	if (opts->mapped_max)
		db_set_mapped_max(s->db, opts->mapped_max);
	if (fresh && (rv = marker_write(dir, opts->durability != KILN_DURABLE_NONE)) != 0)
		goto fail;
	/* The figures are for status only: a store that cannot sum them
	 * now (a full disk refusing the write) still opens, and shows
	 * them as not exact until an open that can. */
	(void)blobstat_init(s);
	if (!(s->flags & KILN_STORE_RDONLY))
		tmp_sweep(s->tmp);
	free(dbdir);
	free(corrupt);
	*sp = s;
	return 0;
fail:
	free(dbdir);
	free(corrupt);
	kiln_store_close(s);
	return rv;
}

/* "<dir>/corrupt/data.mdb.<UTC time>.<pid>": a name no earlier repair
 * took (the time tells when the file was found damaged). */
static int
aside_name(const char *dir, char *buf, size_t len)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	if (gmtime_r(&now, &tm) == NULL ||
	    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm) == 0)
		return KILN_EIO;
	if (snprintf(buf, len, "%s/corrupt/data.mdb.%s.%ld", dir, stamp,
	             (long)getpid()) >= (int)len)
		return KILN_ERANGE;
	return 0;
}

int
kiln_store_db_set_aside(const char *dir, char *moved, size_t len)
{
	char from[PATH_MAX], lock[PATH_MAX], to[PATH_MAX], corrupt[PATH_MAX];
	int fresh, rv, held;

	if (dir == NULL || moved == NULL || len == 0)
		return KILN_EINVAL;
	if ((rv = store_check_folder(dir, 0, &fresh)) != 0)
		return rv;
	if (fresh)
		return KILN_ENOTFOUND;
	if (snprintf(from, sizeof from, "%s/db/data.mdb", dir) >= (int)sizeof from ||
	    snprintf(lock, sizeof lock, "%s/db/lock.mdb", dir) >= (int)sizeof lock ||
	    snprintf(corrupt, sizeof corrupt, "%s/corrupt", dir) >= (int)sizeof corrupt)
		return KILN_ERANGE;
	if ((rv = fio_mkdir(corrupt, 0755, NULL)) != 0 ||
	    (rv = aside_name(dir, to, sizeof to)) != 0)
		return rv;
	/* A daemon still on the file would go on writing the moved one, and
	 * LMDB's reader table must not be removed under it. */
	if ((rv = open_lock_take(dir, 1, 0, &held)) != 0)
		return rv;
	if (rename(from, to) != 0) {
		rv = kiln_err_from_errno(errno);
		goto out;
	}
	/* The lock file holds only the reader table of the old file; LMDB
	 * makes a new one with the new database. */
	if (unlink(lock) != 0 && errno != ENOENT) {
		rv = kiln_err_from_errno(errno);
		goto out;
	}
	snprintf(moved, len, "%s", to);
	if ((rv = fio_fsync_dir(corrupt)) != 0)
		goto out;
	snprintf(corrupt, sizeof corrupt, "%s/db", dir);
	rv = fio_fsync_dir(corrupt);
out:
	close(held);
	return rv;
}

int
kiln_store_damaged(const kiln_store *s)
{
	return db_damaged(s->db);
}

void
kiln_store_unmap_pages(kiln_store *s)
{
	db_unmap_pages(s->db);
}

void
kiln_store_trim_pages(kiln_store *s)
{
	db_trim_pages(s->db);
}

void
kiln_store_close(kiln_store *s)
{
	if (s == NULL)
		return;
	if (s->nuses > 0)   /* deferred use records: commit them */
		rop_commit(s, NULL, 0, NULL);
	db_close(s->db);
	free(s->uses);
	pthread_mutex_destroy(&s->uses_mu);
	pthread_mutex_destroy(&s->sync_mu);
	if (s->objects_fd >= 0)
		close(s->objects_fd);
	if (s->open_lock_fd >= 0)
		close(s->open_lock_fd);   /* after the database: others may go on */
	free(s->dir);
	free(s->objects);
	free(s->tmp);
	free(s);
}
