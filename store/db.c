/* db.c — the store's LMDB environment; the only file that includes lmdb.h.
 *
 * One environment in <store>/db holds the named databases of enum db_name.
 * Other modules never see an MDB_* type: they run callbacks inside db_read
 * or db_write and use db_get/db_put/db_del/db_each.
 *
 * Threads: any thread may call db_read/db_write. The environment is opened
 * with MDB_NOTLS so read transactions belong to transaction objects, not
 * threads; finished read transactions are reset and kept in a small pool of
 * atomic slots so the next reader only renews one (cheap) instead of
 * allocating a reader slot. Every live transaction holds `resize` for reading; growing the map
 * takes it for writing, which is how LMDB's "no transaction active in this
 * process" rule for mdb_env_set_mapsize is kept.
 *
 * Map growth: a write that hits MDB_MAP_FULL is aborted, the map doubles,
 * and the callback runs again. Another process that grew the map makes our
 * next transaction return MDB_MAP_RESIZED; we adopt its size and retry. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "store_int.h"

#define POOL_MAX 16
#define MAX_READERS 1024
#define MAX_RETRIES 32
/* Internal only: a put found the map full. Never returned to callers. */
#define DB_EMAPFULL (-20098)

/* How much more of the database than at open a process may keep mapped
 * before db_trim_pages hands it back. Unmapping is not free: besides the
 * faults to map hot pages again, every madvise of a multi-threaded
 * process flushes the other cores' TLBs (an interrupt to each, which a VM
 * pays dearly), so a database this small stays mapped whole. */
#define DB_MAPPED_MAX (8u << 20)

/* How often a read transaction checks the data file's size when a read
 * past its end cannot kill the process (guard.c's handler installed):
 * the check costs two fstat calls, several times a cached read's own
 * cost (0.15 against 1.2 us per kiln_store_index_get on the machine
 * this was written on), and the guard covers the reads in between. */
#define DB_CHECK_EVERY_NS 2000000

static const char *const db_names[DB_COUNT] = {
	[DB_INDEX] = "index",
	[DB_ACTIONS] = "actions",
	[DB_FILES] = "files",
	[DB_BLOBS] = "blobs",
	[DB_META] = "meta",
	[DB_STEPS] = "steps",
	[DB_DEPS] = "deps",
	[DB_SHA256] = "sha256",
};

struct kiln_db {
	MDB_env *env;
	MDB_dbi dbi[DB_COUNT];
	/* 0 for a database a read-only handle found missing (an older store,
	 * see enum db_name): it reads as empty. */
	int have[DB_COUNT];
	int rdonly;
	/* The data file was found shorter than the pages the environment
	 * uses (db_sound): KILN_EDBCHANGED from then on, for every
	 * transaction, so nothing more is read through the map or written
	 * into the file. Written once, read by any thread. */
	int damaged;
	int64_t checked_ns; /* CLOCK_MONOTONIC of the last db_sound (atomic) */
	unsigned psize;   /* LMDB's page size, from open */
	int guard;        /* guard.c's slot for the map, or -1 */
	pthread_rwlock_t resize;
	uint64_t mapsize; /* written under resize (write), read under (read) */
	void *map_base;   /* the data file's mapping (map_locate), the same */
	size_t map_len;
	/* db_trim_pages: /proc/self/statm (-1: unknown, always unmap), the
	 * file pages this process had mapped at open, and how many more it
	 * may map before they are handed back */
	int statm_fd;
	long base_pages;
	long max_pages;
	/* Reset read txns ready for renewal; a slot is taken and given back
	 * with one atomic exchange (no lock on the read path). */
	MDB_txn *pool[POOL_MAX];
};

struct db_txn {
	kiln_db *db;
	MDB_txn *txn;
};

static void map_locate(kiln_db *db);
static long file_pages(const kiln_db *db);

static int
db_err(int rc)
{
	switch (rc) {
	case 0: return 0;
	case MDB_NOTFOUND: return KILN_ENOTFOUND;
	case MDB_MAP_FULL: return DB_EMAPFULL;
	case MDB_READERS_FULL: return KILN_EBUSY;
	/* A damaged file, or a transaction LMDB gave up on after meeting one
	 * (BAD_TXN), or an environment it declared unusable (PANIC). */
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_BAD_TXN:
	case MDB_PANIC: return KILN_ECORRUPT;
	case MDB_VERSION_MISMATCH: return KILN_EVERSION;
	case MDB_BAD_VALSIZE: return KILN_EINVAL;
	}
	if (rc > 0)
		return kiln_err_from_errno(rc);
	return KILN_EDB;
}

/* Mark the database damaged, for good; returns KILN_EDBCHANGED. */
static int
db_set_damaged(kiln_db *db)
{
	__atomic_store_n(&db->damaged, 1, __ATOMIC_RELEASE);
	return KILN_EDBCHANGED;
}

/* Before a transaction reads through the map, and before a commit writes
 * into the file: is the data file still as long as the pages the newest
 * snapshot uses? LMDB never shrinks it, and writes a commit's pages
 * before its meta, so only someone cutting the file short (truncate, a
 * copy over it) makes it shorter: a read past its end would be a SIGBUS
 * (guard.c catches the one that races this check), and a commit would
 * write pages past a hole of zeros that its tree points into. Found so,
 * the database stays refused for the handle's life (KILN_EDBCHANGED).
 *
 * The meta pages themselves are read through the map (mdb_env_info), so
 * the file must hold both before they are; and the size compared is
 * taken after the meta is read, as dbfile_check_size does, so that
 * another process's commit meanwhile can only make the file longer than
 * the meta says. Two fstat calls, about a microsecond in all: read
 * transactions of a guarded handle check less often (db_sound_read). */
static int
db_sound(kiln_db *db)
{
	MDB_envinfo info;
	struct stat st;
	int fd;

	if (__atomic_load_n(&db->damaged, __ATOMIC_ACQUIRE))
		return KILN_EDBCHANGED;
	if (mdb_env_get_fd(db->env, &fd) != 0 || fstat(fd, &st) != 0)
		return 0; /* cannot tell: the reads will say */
	if ((uint64_t)st.st_size < 2 * (uint64_t)db->psize)
		return db_set_damaged(db);
	if (mdb_env_info(db->env, &info) != 0 || fstat(fd, &st) != 0)
		return 0;
	if (((uint64_t)info.me_last_pgno + 1) * db->psize > (uint64_t)st.st_size)
		return db_set_damaged(db);
	return 0;
}

/* db_sound for a read transaction: at most every DB_CHECK_EVERY_NS
 * while the map is guarded, else every time. */
static int
db_sound_read(kiln_db *db)
{
	int64_t now, last;

	if (db->guard < 0)
		return db_sound(db);
	if (__atomic_load_n(&db->damaged, __ATOMIC_ACQUIRE))
		return KILN_EDBCHANGED;
	now = kiln_mono_ns();
	last = __atomic_load_n(&db->checked_ns, __ATOMIC_RELAXED);
	if (now - last < DB_CHECK_EVERY_NS)
		return 0;
	__atomic_store_n(&db->checked_ns, now, __ATOMIC_RELAXED);
	return db_sound(db);
}

int
db_damaged(const kiln_db *db)
{
	return __atomic_load_n(&db->damaged, __ATOMIC_ACQUIRE) ? KILN_EDBCHANGED : 0;
}

static uint64_t
env_mapsize(MDB_env *env)
{
	MDB_envinfo info;

	mdb_env_info(env, &info);
	return (uint64_t)info.me_mapsize;
}

/* Open every named database: from a read txn when they all exist (so an
 * open never waits for another process's writer), else create them. A
 * read-only handle cannot create: it needs the first format's databases
 * and reads later ones it lacks as empty. */
static int
db_open_dbis(kiln_db *db)
{
	for (int create = 0; create < 2; create++) {
		MDB_txn *txn;
		int rc = mdb_txn_begin(db->env, NULL, create ? 0 : MDB_RDONLY, &txn);
		if (rc != 0)
			return db_err(rc);
		for (int i = 0; i < DB_COUNT && rc == 0; i++) {
			rc = mdb_dbi_open(txn, db_names[i], create ? MDB_CREATE : 0,
			                  &db->dbi[i]);
			db->have[i] = rc == 0;
			if (rc == MDB_NOTFOUND && db->rdonly && i >= DB_STEPS)
				rc = 0;
		}
		if (rc == 0)
			return db_err(mdb_txn_commit(txn));
		mdb_txn_abort(txn);
		if (rc != MDB_NOTFOUND)
			return db_err(rc);
		if (db->rdonly)
			return KILN_ENOTSTORE;
	}
	return KILN_EDB;
}

/* Before LMDB maps <path>/data.mdb: is it as long as its meta pages say?
 * A short file (truncated, or cut by a full disk or a bad copy) would
 * be a SIGBUS at the first read past its end. No file yet is fine: LMDB
 * makes it. The checks (and the on-disk layout they rely on) are in
 * dbcheck.c. */
static int
db_check_file(const char *path)
{
	char file[PATH_MAX];
	struct db_meta m;
	struct stat st;
	int fd, rv;

	if (snprintf(file, sizeof file, "%s/data.mdb", path) >= (int)sizeof file)
		return KILN_ERANGE;
	if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : kiln_err_from_errno(errno);
	/* Empty: a crash while LMDB made the file; it writes the metas anew. */
	if (fstat(fd, &st) != 0)
		rv = kiln_err_from_errno(errno);
	else
		rv = st.st_size == 0 ? 0 : dbfile_check_size(fd, &m);
	close(fd);
	return rv;
}

/* After open, before any page is read through the map: walk every page
 * with pread inside a read transaction (which keeps its snapshot's pages
 * from being reused meanwhile). A brand-new environment has no file
 * content to check yet (its metas are written at the first commit). */
static int
db_check_pages(kiln_db *db)
{
	struct db_meta m;
	MDB_txn *txn;
	struct stat st;
	int fd, rv;

	if (mdb_env_get_fd(db->env, &fd) != 0 || fstat(fd, &st) != 0)
		return KILN_EDB;
	if (st.st_size == 0)
		return 0;
	if ((rv = db_err(mdb_txn_begin(db->env, NULL, MDB_RDONLY, &txn))) != 0)
		return rv;
	/* A writer committing meanwhile may rewrite a meta page as it is read
	 * (a torn read looks like damage): damage is believed only when no
	 * commit happened during the walk. */
	for (int i = 0; i < 3; i++) {
		struct db_meta now;
		if ((rv = dbfile_check_size(fd, &m)) == 0)
			rv = dbfile_walk(fd, &m);
		if (rv != KILN_ECORRUPT || dbfile_meta(fd, &now) != 0 ||
		    now.txnid == m.txnid)
			break;
	}
	mdb_txn_abort(txn);
	return rv;
}

int
db_open(const char *path, uint64_t map_size, int rdonly, int nosync, int check_pages,
        kiln_db **dbp)
{
	unsigned flags = MDB_NOTLS | (rdonly ? MDB_RDONLY : 0) | (nosync ? MDB_NOSYNC : 0);
	kiln_db *db = calloc(1, sizeof *db);
	int rv, fd, dead;

	if (db == NULL)
		return KILN_ENOMEM;
	db->rdonly = rdonly;
	db->statm_fd = -1;
	db->guard = -1;
	pthread_rwlock_init(&db->resize, NULL);
	if ((rv = db_err(mdb_env_create(&db->env))) != 0)
		goto fail;
	mdb_env_set_maxdbs(db->env, DB_COUNT);
	mdb_env_set_maxreaders(db->env, MAX_READERS);
	mdb_env_set_mapsize(db->env, (size_t)map_size);
	if ((rv = db_check_file(path)) != 0 ||
	    (rv = db_err(mdb_env_open(db->env, path, flags, 0644))) != 0)
		goto fail;
	/* LMDB leaves its data fd inheritable; tools we spawn must not hold
	 * the database open. */
	if (mdb_env_get_fd(db->env, &fd) == 0)
		fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
	/* Reader slots of killed processes would pin old pages forever. */
	mdb_reader_check(db->env, &dead);
	{
		MDB_stat ms;
		if ((rv = db_err(mdb_env_stat(db->env, &ms))) != 0)
			goto fail;
		db->psize = ms.ms_psize;
	}
	db->mapsize = env_mapsize(db->env);
	map_locate(db);
	if ((check_pages && (rv = db_check_pages(db)) != 0) ||
	    (rv = db_open_dbis(db)) != 0)
		goto fail;
	db->statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	db->base_pages = file_pages(db);
	db_set_mapped_max(db, DB_MAPPED_MAX);
	*dbp = db;
	return 0;
fail:
	guard_remove(db->guard);
	if (db->env != NULL)
		mdb_env_close(db->env);
	pthread_rwlock_destroy(&db->resize);
	free(db);
	return rv;
}

/* Pages of files (and shared memory) this process has mapped now: the
 * third field of /proc/self/statm. -1 when unknown. */
static long
file_pages(const kiln_db *db)
{
	char buf[128];
	long size, resident, shared;
	ssize_t n;

	if (db->statm_fd < 0 || (n = pread(db->statm_fd, buf, sizeof buf - 1, 0)) <= 0)
		return -1;
	buf[n] = '\0';
	return sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) == 3 ? shared : -1;
}

void
db_set_mapped_max(kiln_db *db, uint64_t bytes)
{
	db->max_pages = (long)(bytes / (uint64_t)sysconf(_SC_PAGESIZE));
}

/* Where LMDB mapped the data file: it does not say (mdb_env_info's
 * me_mapaddr is only set for MDB_FIXEDMAP), so find the mapping of the
 * file's device and inode in /proc/self/maps. Called after open and after
 * every resize (which remaps), with resize held for writing or before any
 * other user. Not found: base NULL, and db_unmap_pages does nothing. */
static void
map_locate(kiln_db *db)
{
	struct stat st;
	char line[512];
	FILE *f;
	int fd;

	db->map_base = NULL;
	db->map_len = 0;
	if (mdb_env_get_fd(db->env, &fd) != 0 || fstat(fd, &st) != 0 ||
	    (f = fopen("/proc/self/maps", "re")) == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi, off, ino;
		unsigned maj, mnr;
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj, &mnr,
		           &ino) == 6 && ino == (unsigned long)st.st_ino && off == 0 &&
		    maj == major(st.st_dev) && mnr == minor(st.st_dev) &&
		    hi - lo > db->map_len) {
			db->map_base = (void *)lo;
			db->map_len = hi - lo;
		}
	}
	fclose(f);
	if (db->guard < 0)
		db->guard = guard_add(db->map_base, db->map_len, db->psize);
	else
		guard_move(db->guard, db->map_base, db->map_len, db->psize);
}

/* After a transaction's reads: did one fault past the file's end (and
 * read guard.c's page instead)? Then whatever it read is thrown away and
 * the database refused from now on. */
static int
db_faulted(kiln_db *db)
{
	return guard_faulted(db->guard) ? db_set_damaged(db) : 0;
}

/* Caller holds resize (read): the map cannot move meanwhile. Readers and
 * the writer inside it only fault their pages back in: the file's pages
 * are shared, the map is read-only (a write transaction's pages are
 * malloc'd copies until commit writes them), and LMDB never rewrites a
 * page a reader may see. */
static void
unmap_held(kiln_db *db)
{
	MDB_envinfo info;
	MDB_stat st;

	if (db->map_base != NULL && !db_damaged(db) && mdb_env_info(db->env, &info) == 0 &&
	    mdb_env_stat(db->env, &st) == 0) {
		size_t len = ((size_t)info.me_last_pgno + 1) * st.ms_psize;
		madvise(db->map_base, len < db->map_len ? len : db->map_len, MADV_DONTNEED);
	}
}

void
db_unmap_pages(kiln_db *db)
{
	pthread_rwlock_rdlock(&db->resize);
	unmap_held(db);
	pthread_rwlock_unlock(&db->resize);
}

/* Whether this process maps more file pages than at open by over the
 * allowance (unknown: yes). */
static int
over_allowance(const kiln_db *db)
{
	long now = file_pages(db);

	return now < 0 || db->base_pages < 0 || now - db->base_pages > db->max_pages;
}

void
db_trim_pages(kiln_db *db)
{
	if (over_allowance(db))
		db_unmap_pages(db);
}

void
db_txn_trim_pages(db_txn *t)
{
	if (over_allowance(t->db))
		unmap_held(t->db);
}

/* Caller holds resize for writing (or is the last user). */
static void
pool_drain(kiln_db *db)
{
	for (int i = 0; i < POOL_MAX; i++) {
		MDB_txn *t = __atomic_exchange_n(&db->pool[i], NULL, __ATOMIC_ACQ_REL);
		if (t != NULL)
			mdb_txn_abort(t);
	}
}

void
db_close(kiln_db *db)
{
	if (db == NULL)
		return;
	pool_drain(db);
	guard_remove(db->guard);
	mdb_env_close(db->env);
	if (db->statm_fd >= 0)
		close(db->statm_fd);
	pthread_rwlock_destroy(&db->resize);
	free(db);
}

/* Grow the map to twice `seen`, unless another thread already grew it;
 * grow == 0 adopts a size another process set. */
static int
db_resize(kiln_db *db, uint64_t seen, int grow)
{
	int rc = 0;

	pthread_rwlock_wrlock(&db->resize);
	if (!grow || db->mapsize == seen) {
		pool_drain(db);
		rc = mdb_env_set_mapsize(db->env, grow ? (size_t)(seen * 2) : 0);
		db->mapsize = env_mapsize(db->env);
		map_locate(db);
	}
	pthread_rwlock_unlock(&db->resize);
	return db_err(rc);
}

/* Take a read txn from the pool or begin one; caller holds resize (read). */
static int
reader_get(kiln_db *db, MDB_txn **txn)
{
	MDB_txn *t = NULL;
	int rc;

	for (int i = 0; i < POOL_MAX && t == NULL; i++)
		if (__atomic_load_n(&db->pool[i], __ATOMIC_RELAXED) != NULL)
			t = __atomic_exchange_n(&db->pool[i], NULL, __ATOMIC_ACQ_REL);
	if (t != NULL) {
		if ((rc = mdb_txn_renew(t)) == 0) {
			*txn = t;
			return 0;
		}
		mdb_txn_abort(t);
		return rc;
	}
	return mdb_txn_begin(db->env, NULL, MDB_RDONLY, txn);
}

static void
reader_put(kiln_db *db, MDB_txn *t)
{
	mdb_txn_reset(t);
	for (int i = 0; i < POOL_MAX; i++) {
		MDB_txn *empty = NULL;
		if (__atomic_compare_exchange_n(&db->pool[i], &empty, t, 0,
		                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return;
	}
	mdb_txn_abort(t);
}

int
db_read(kiln_db *db, db_fn fn, void *arg)
{
	for (int i = 0; i < MAX_RETRIES; i++) {
		struct db_txn t = {db, NULL};
		int rc, rv;

		pthread_rwlock_rdlock(&db->resize);
		if ((rv = db_sound_read(db)) != 0) {
			pthread_rwlock_unlock(&db->resize);
			return rv;
		}
		rc = reader_get(db, &t.txn);
		if (rc == MDB_MAP_RESIZED) {
			pthread_rwlock_unlock(&db->resize);
			if ((rv = db_resize(db, 0, 0)) != 0)
				return rv;
			continue;
		}
		if (rc != 0) {
			pthread_rwlock_unlock(&db->resize);
			return db_err(rc);
		}
		rv = fn(&t, arg);
		if (db_faulted(db) != 0)
			rv = KILN_EDBCHANGED;
		reader_put(db, t.txn);
		pthread_rwlock_unlock(&db->resize);
		return rv;
	}
	return KILN_EBUSY;
}

/* A commit's error, told apart: LMDB turns a short write into EIO ("which
 * error code?"), and a file system that fills up in the middle of a
 * write (tmpfs, ext4) writes short before it returns ENOSPC. A commit that
 * failed with EIO while the database's file system has less than 1 MiB
 * left is called what it most likely was, a full disk. */
static int
commit_err(kiln_db *db, int rc)
{
	int rv = db_err(rc), fd;
	struct statvfs vfs;

	if (rv == KILN_EIO && mdb_env_get_fd(db->env, &fd) == 0 &&
	    fstatvfs(fd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < 1024 * 1024)
		rv = KILN_ENOSPC;
	return rv;
}

int
db_write(kiln_db *db, db_fn fn, void *arg)
{
	if (db->rdonly)
		return KILN_EREADONLY;
	for (int i = 0; i < MAX_RETRIES; i++) {
		struct db_txn t = {db, NULL};
		uint64_t seen;
		int rc, rv;

		pthread_rwlock_rdlock(&db->resize);
		seen = db->mapsize;
		if ((rv = db_sound(db)) != 0) {
			pthread_rwlock_unlock(&db->resize);
			return rv;
		}
		rc = mdb_txn_begin(db->env, NULL, 0, &t.txn);
		if (rc != 0) {
			pthread_rwlock_unlock(&db->resize);
			if (rc != MDB_MAP_RESIZED)
				return db_err(rc);
			if ((rv = db_resize(db, 0, 0)) != 0)
				return rv;
			continue;
		}
		rv = fn(&t, arg);
		/* the file cut short meanwhile: write nothing past its end */
		if (db_faulted(db) != 0)
			rv = KILN_EDBCHANGED;
		if (rv == 0 && (rv = db_sound(db)) == 0)
			rv = commit_err(db, mdb_txn_commit(t.txn));
		else
			mdb_txn_abort(t.txn);
		pthread_rwlock_unlock(&db->resize);
		if (rv != DB_EMAPFULL)
			return rv;
		if ((rv = db_resize(db, seen, 1)) != 0)
			return rv;
	}
	return KILN_ENOSPC;
}

int
db_get(db_txn *t, enum db_name d, const void *k, size_t klen, const void **v,
       size_t *vlen)
{
	MDB_val key = {klen, (void *)k}, val;
	int rc;

	if (!t->db->have[d])
		return KILN_ENOTFOUND;
	if ((rc = mdb_get(t->txn, t->db->dbi[d], &key, &val)) != 0)
		return db_faulted(t->db) ? KILN_EDBCHANGED : db_err(rc);
	if (db_faulted(t->db) != 0)
		return KILN_EDBCHANGED;
	*v = val.mv_data;
	*vlen = val.mv_size;
	return 0;
}

int
db_put(db_txn *t, enum db_name d, const void *k, size_t klen, const void *v,
       size_t vlen)
{
	MDB_val key = {klen, (void *)k}, val = {vlen, (void *)v};

	if (!t->db->have[d])
		return KILN_EREADONLY; /* only a read-only handle lacks one */
	if (db_faulted(t->db) != 0)
		return KILN_EDBCHANGED;
	return db_err(mdb_put(t->txn, t->db->dbi[d], &key, &val, 0));
}

int
db_del(db_txn *t, enum db_name d, const void *k, size_t klen)
{
	MDB_val key = {klen, (void *)k};

	if (!t->db->have[d])
		return KILN_EREADONLY;
	if (db_faulted(t->db) != 0)
		return KILN_EDBCHANGED;
	return db_err(mdb_del(t->txn, t->db->dbi[d], &key, NULL));
}

int
db_entries(db_txn *t, enum db_name d, uint64_t *n)
{
	MDB_stat st;
	int rc;

	*n = 0;
	if (!t->db->have[d])
		return 0;
	if ((rc = mdb_stat(t->txn, t->db->dbi[d], &st)) != 0)
		return db_err(rc);
	*n = st.ms_entries;
	return 0;
}

int
db_each(db_txn *t, enum db_name d, const void *prefix, size_t plen,
        db_each_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val key = {plen, (void *)prefix}, val;
	int rc, rv = 0;
	MDB_cursor_op op = plen > 0 ? MDB_SET_RANGE : MDB_FIRST;

	if (!t->db->have[d])
		return 0;
	if ((rc = mdb_cursor_open(t->txn, t->db->dbi[d], &c)) != 0)
		return db_err(rc);
	while ((rc = mdb_cursor_get(c, &key, &val, op)) == 0) {
		op = MDB_NEXT;
		if ((rv = db_faulted(t->db)) != 0)
			break;
		if (plen > 0 && (key.mv_size < plen || memcmp(key.mv_data, prefix, plen) != 0))
			break;
		if ((rv = fn(t, key.mv_data, key.mv_size, val.mv_data, val.mv_size,
		             arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rv != 0)
		return rv;
	if (db_faulted(t->db) != 0)
		return KILN_EDBCHANGED;
	return rc == MDB_NOTFOUND ? 0 : db_err(rc);
}
