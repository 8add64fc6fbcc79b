/* store_int.h — what store/ modules share and nobody else sees.
 *
 * Module map:
 *   store.c    open/close, the folder layout and its format marker
 *   db.c       the LMDB environment (the only file including lmdb.h):
 *              transactions, map growth, reader pool
 *   dbcheck.c  checking LMDB's data file with pread before it is mapped
 *   guard.c    the SIGBUS handler (kilnd's choice) under the store's maps
 *              of files someone may cut short
 *   records.c  versioned binary encodings of database values
 *   blob.c     writing, publishing and reading blobs
 *   index.c    index, action, file, step and blob-use records: each
 *              record write is one struct rec_op, applied in a write txn
 *   deps.c     discovered dependencies per step, and the reverse
 *   batch.c    committing rec_ops (one, or a kiln_batch of many) in one
 *              write transaction
 *   fsck.c     checking and repairing
 *   gc.c       garbage collection
 *   fileio.c   small POSIX helpers (full writes, fsync of folders)
 *   hash.c     XXH3-128 (the only file including xxhash.h)
 *   sha256.c   SHA-256 through OpenSSL EVP (the only file including an
 *              OpenSSL header)
 *   blobsha.c  blobs' SHA-256s: the sha256 map, lookups, filling in the
 *              SHA-256 of a record made before them
 *   blobstat.c the store's running figures (blob count, bytes) and gc's
 *              state, in the meta database
 *   names.c    URL/path/profile validation
 *   error.c    kiln_strerror */
#ifndef KILN_STORE_INT_H
#define KILN_STORE_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiln_store.h"
#include "kiln_clock.h"

/* ---- the handle ---- */

typedef struct kiln_db kiln_db;

/* KILN_DURABLE_BATCH: blobs synced one by one at most; more and a sync
 * is one syncfs(). */
#define STORE_SYNC_EACH_MAX 16

struct kiln_store {
	char *dir;            /* as given */
	char *objects;        /* <dir>/objects */
	char *tmp;            /* <dir>/tmp */
	unsigned flags;       /* KILN_STORE_* */
	enum kiln_durability durability;
	kiln_db *db;
	/* KILN_DURABLE_BATCH only (else -1): the objects folder, for syncfs. */
	int objects_fd;
	int open_lock_fd;   /* <store>/db/open.lock, flock shared or exclusive */
	/* KILN_DURABLE_BATCH: blobs published without an fsync since the
	 * last sync took them (under uses_mu), while they are few; past
	 * STORE_SYNC_EACH_MAX, or after a failed sync, unsynced_many: the
	 * next sync is a syncfs. */
	kiln_id unsynced[STORE_SYNC_EACH_MAX];
	size_t nunsynced;
	int unsynced_many;
	int unsynced_shard;   /* one of them made its shard folder */
	/* KILN_DURABLE_BATCH: one sync at a time, so that a commit waits for
	 * another's sync of the blobs its records may name. */
	pthread_mutex_t sync_mu;
	/* KILN_DURABLE_BATCH: use records of blobs put since the last record
	 * commit, written by that commit (a put costs no transaction; gc
	 * judges such a blob by its file's mtime, which put refreshes). */
	pthread_mutex_t uses_mu;
	struct pending_use {
		kiln_id id;
		uint64_t size;
		uint8_t sha[KILN_SHA256_LEN];
	} *uses;
	size_t nuses, capuses;
	/* kiln_store_opts.now_ns and now_arg: set at open, never changed. */
	int64_t (*now_ns)(void *now_arg);
	void *now_arg;
};

/* The store's wall clock (kiln_store_opts.now_ns, else CLOCK_REALTIME):
 * what use stamps are written with and gc's ages are measured against. */
static inline int64_t
store_now(const kiln_store *s)
{
	return s->now_ns != NULL ? s->now_ns(s->now_arg) : kiln_wall_ns();
}

/* The layout version written to <dir>/kiln-store. Bump it when the folder
 * layout or a record encoding changes incompatibly, and teach open to
 * upgrade or refuse older stores. Record encodings carry their own
 * version byte too (records.c). */
#define STORE_FORMAT 1


/* "<objects>/ab/<30 hex>" into buf (PATH_MAX). */
void store_blob_path(const kiln_store *s, const kiln_id *id, char *buf);

/* Returns 0 when s may be written, else KILN_EREADONLY. */
int store_writable(const kiln_store *s);

/* ---- blob.c: KILN_DURABLE_BATCH ---- */

/* Before a record commit: when puts were published without an fsync since
 * the last sync, make them durable, so no record can name a blob a power
 * cut would lose: up to STORE_SYNC_EACH_MAX of them one by one (each
 * file's fdatasync, then its shard folder's fsync, and objects/'s when a
 * put made a shard folder), more
 * with one syncfs() of the store's file system. (syncfs writes out every
 * dirty page of that file system, other programs' too, so a small commit
 * syncs its few blobs one by one: figures in docs/store.md.) A no-op for the
 * other durabilities. Safe from any thread. Returns 0 or the errno-mapped
 * KILN_E*; on an error the puts stay pending for the next sync. */
int store_sync_puts(kiln_store *s);

/* A blob was published without an fsync (KILN_DURABLE_BATCH): the next
 * store_sync_puts makes it durable. made_shard: its put made its shard
 * folder, whose name in objects/ must be made durable too. */
void store_unsynced_add(kiln_store *s, const kiln_id *id, int made_shard);

/* Make a unique named temp file "<tmp>/<kind>-<pid>-XXXXXX" (path into
 * name, PATH_MAX) and return its fd in *fd. The pid lets an open tell a
 * live writer's temp file from a crashed one's. */
int store_tmp_named(const kiln_store *s, const char *kind, char *name, int *fd);

/* ---- sha256.c ---- */

/* A running SHA-256. */
typedef struct store_sha store_sha;

/* Returns 0 or KILN_ENOMEM. */
int store_sha_new(store_sha **h);
void store_sha_update(store_sha *h, const void *buf, size_t len);
/* The digest of everything fed; h is spent. 0 or KILN_ENOMEM. */
int store_sha_final(store_sha *h, uint8_t out[KILN_SHA256_LEN]);
void store_sha_free(store_sha *h);
/* One call for len bytes at buf. 0 or KILN_ENOMEM. */
int store_sha_of_buf(const void *buf, size_t len, uint8_t out[KILN_SHA256_LEN]);

/* ---- names.c: the checks of kiln_url_check/kiln_profile_check for
 * strings whose length is known (len bytes, no NUL needed) ---- */
int names_url_check(const char *url, size_t len);
int names_profile_check(const char *profile, size_t len);

/* ---- fileio.c ---- */

/* Read exactly len bytes; KILN_ECORRUPT when the file is shorter. */
int fio_read_all(int fd, void *buf, size_t len);
/* fsync the folder at path. */
int fio_fsync_dir(const char *path);
/* mkdir that treats EEXIST as success; *made (may be NULL) says whether it
 * was created now. */
int fio_mkdir(const char *path, mode_t mode, int *made);

/* ---- db.c: one LMDB environment, eight named databases ---- */

/* Databases from DB_STEPS on came after the first store format: a writable
 * open creates them; a read-only handle on an older store reads them as
 * empty. New databases go at the end. */
enum db_name { DB_INDEX, DB_ACTIONS, DB_FILES, DB_BLOBS, DB_META, DB_STEPS,
	       DB_DEPS, DB_SHA256, DB_COUNT };

typedef struct db_txn db_txn;

/* Open (creating when allowed) the environment in folder path; with
 * check_pages every page is walked first (KILN_STORE_CHECK_PAGES). */
int db_open(const char *path, uint64_t map_size, int rdonly, int nosync,
            int check_pages, kiln_db **dbp);
void db_close(kiln_db *db);

/* A callback run inside a transaction. Return 0 to commit (write txns) or
 * a KILN_E* code to abort and have it returned. A write callback may run
 * more than once (after the map grows), so it must not have side effects
 * outside the transaction that a second run would repeat wrongly. */
typedef int (*db_fn)(db_txn *t, void *arg);

/* Unmap the pages of the database file this process has touched (see
 * kiln_store_unmap_pages). */
void db_unmap_pages(kiln_db *db);
/* db_unmap_pages only when this process maps more file pages than it did
 * when db was opened by over the allowance (see kiln_store_trim_pages);
 * and the same from inside a transaction's callback (which holds the
 * resize lock db_trim_pages takes): a write transaction
 * that touches thousands of random leaves would otherwise map them all
 * before its commit. */
void db_trim_pages(kiln_db *db);
void db_txn_trim_pages(db_txn *t);
/* The allowance, in bytes (default 8 MiB). */
void db_set_mapped_max(kiln_db *db, uint64_t bytes);

/* ---- dbcheck.c: LMDB's data file read with pread, never mapped ---- */

/* What a meta page says (the newer of the two; last_pg the larger). */
struct db_meta {
	uint32_t psize;
	uint64_t last_pg, txnid, free_root, main_root;
};

/* Read and check both meta pages of the data file open at fd. Returns 0,
 * KILN_ECORRUPT (short, wrong magic, version or page size), or KILN_EIO. */
int dbfile_meta(int fd, struct db_meta *m);
/* dbfile_meta, then whether the file holds all (last_pg + 1) pages:
 * KILN_ECORRUPT when it is shorter (LMDB would die with SIGBUS). */
int dbfile_check_size(int fd, struct db_meta *m);
/* Walk every page reachable from m's roots with pread and check what LMDB
 * follows without bounds checks. Returns 0, KILN_ECORRUPT, KILN_EIO or
 * KILN_ENOMEM. The caller holds a read transaction, so that no page of
 * that snapshot (or a newer one) is reused meanwhile. */
int dbfile_walk(int fd, const struct db_meta *m);

/* KILN_EDBCHANGED once the data file was found cut short under the handle
 * (every transaction is refused from then on), else 0. Any thread. */
int db_damaged(const kiln_db *db);

/* ---- guard.c: a SIGBUS in a mapped file that was cut short ---- */

/* Watch [base, base + len), a map of a file that someone may cut short:
 * psize is LMDB's page size for its data file, 0 for any other file.
 * Returns the slot (for the calls below), or -1 when no handler is
 * installed (kiln_store_guard_install) or every slot is taken: then the
 * map is read unguarded, as before. Any thread. */
int guard_add(const void *base, size_t len, unsigned psize);
/* The map of slot i moved (or, base NULL, is gone for now). Only while
 * nothing reads through it. i may be -1. */
void guard_move(int i, const void *base, size_t len, unsigned psize);
/* 1 when a read of slot i's map faulted past the file's end since
 * guard_add (it read a page put there instead), else 0. i may be -1. */
int guard_faulted(int i);
/* Give slot i back (before the map is unmapped). i may be -1. */
void guard_remove(int i);

/* Run fn in a read snapshot. */
int db_read(kiln_db *db, db_fn fn, void *arg);
/* Run fn in the (one, serialized across processes) write transaction. */
int db_write(kiln_db *db, db_fn fn, void *arg);

/* Borrowed value: valid until the transaction ends. KILN_ENOTFOUND. */
int db_get(db_txn *t, enum db_name d, const void *k, size_t klen,
           const void **v, size_t *vlen);
int db_put(db_txn *t, enum db_name d, const void *k, size_t klen,
           const void *v, size_t vlen);
/* KILN_ENOTFOUND when absent. */
int db_del(db_txn *t, enum db_name d, const void *k, size_t klen);

/* The number of records in database d (LMDB keeps it: no scan). */
int db_entries(db_txn *t, enum db_name d, uint64_t *n);

/* Called per key starting with prefix, in key order. Non-zero stops and is
 * returned. The callback must not modify database d (collect keys and
 * delete them after the walk). */
typedef int (*db_each_fn)(db_txn *t, const void *k, size_t klen,
                          const void *v, size_t vlen, void *arg);
int db_each(db_txn *t, enum db_name d, const void *prefix, size_t plen,
            db_each_fn fn, void *arg);

/* ---- records.c: database values, each starting with a version byte ---- */

#define REC_VERSION 1

/* index: key "<profile>\0<url>" -> rec_index */
struct rec_index {
	kiln_id id;
	int64_t set_ns;
};
/* blobs: key id (16 bytes) -> rec_blob (its own version: records.c) */
struct rec_blob {
	uint64_t size;
	int64_t used_ns;
	int has_sha;                  /* 0: a record from before SHA-256s */
	uint8_t sha[KILN_SHA256_LEN];
};

#define REC_INDEX_LEN 25
#define REC_BLOB_VERSION 2
#define REC_BLOB_LEN_V1 17
#define REC_BLOB_LEN 49   /* the largest: version 2 */
#define REC_SHA_LEN 17
#define REC_FILE_LEN 49
#define REC_ACTION_HEAD 25
#define REC_STEP_HEAD 9

/* The largest opaque payload of an action or step record. */
#define REC_PAYLOAD_MAX (64u << 20)

void rec_index_encode(const struct rec_index *r, uint8_t out[REC_INDEX_LEN]);
int rec_index_decode(const void *v, size_t len, struct rec_index *r);
/* Version 2 when r has a SHA-256, else version 1 (what a record without
 * one always was); returns the length written. */
size_t rec_blob_encode(const struct rec_blob *r, uint8_t out[REC_BLOB_LEN]);
int rec_blob_decode(const void *v, size_t len, struct rec_blob *r);
/* sha256: key SHA-256 (32 bytes) -> ver u8 | blob id [16] */
void rec_sha_encode(const kiln_id *id, uint8_t out[REC_SHA_LEN]);
int rec_sha_decode(const void *v, size_t len, kiln_id *id);
void rec_file_encode(const kiln_file_rec *r, uint8_t out[REC_FILE_LEN]);
int rec_file_decode(const void *v, size_t len, kiln_file_rec *r);
/* Encoded action length for n outputs and len payload bytes. */
size_t rec_action_size(size_t noutputs, size_t len);
void rec_action_encode(const kiln_action *a, uint8_t *out);
/* Decodes into a malloc'd kiln_action (key left zero). */
int rec_action_decode(const void *v, size_t len, kiln_action **a);
/* Only the output ids and used time, without allocating: calls fn per
 * output. Returns 0, KILN_ECORRUPT, KILN_EVERSION or fn's non-zero. */
int rec_action_outputs(const void *v, size_t len, int64_t *used_ns,
                       int (*fn)(const kiln_id *id, void *arg), void *arg);

/* steps: key "<profile>\0<url>" -> set time and the engine's payload. */
size_t rec_step_size(size_t len);
void rec_step_encode(int64_t set_ns, const void *data, size_t len, uint8_t *out);
/* *data points into v (valid as long as v is). */
int rec_step_decode(const void *v, size_t vlen, int64_t *set_ns,
                    const void **data, size_t *len);

/* index keys */
#define INDEX_KEY_MAX (64 + 1 + 400)
/* Build "<profile>\0<url>"; returns its length, or KILN_EINVAL. */
int index_key(const char *profile, const char *url, char out[INDEX_KEY_MAX]);

/* ---- index.c helpers used by blob.c and gc.c ---- */

/* In a write txn: record that blob id (size bytes) was used now. sha (a
 * put's, may be NULL) is recorded with its sha256 entry; without one the
 * record keeps the SHA-256 it had. */
int blobrec_touch(db_txn *t, const kiln_id *id, uint64_t size,
                  const uint8_t *sha, int64_t now);

/* ---- blobstat.c: the running figures of the blobs database and gc's
 * state, in the meta database ---- */

/* In a write txn: write blob id's record (value v, vlen bytes) and move the
 * store's blob figures by what it adds. Every write of the blobs database
 * goes through here or blobrec_del_sized. */
int blobrec_write(db_txn *t, const kiln_id *id, const void *v, size_t vlen);
/* The same when the caller has just read what was there: had (a record
 * was), and the size it recorded (0 when it could not be decoded). Saves
 * the second lookup on the touch path (every output of every step). */
int blobrec_replace(db_txn *t, const kiln_id *id, const void *v, size_t vlen, int had,
                    uint64_t old_size);
/* In a write txn: delete blob id's record, of size bytes (0 when it could
 * not be decoded), and take it from the figures. KILN_ENOTFOUND when
 * absent. */
int blobrec_del_sized(db_txn *t, const kiln_id *id, uint64_t size);
/* At a writable open: sum the figures when they are missing or do not
 * cover every record (a kiln from before them wrote some): one scan. */
int blobstat_init(kiln_store *s);
/* In gc's first write txn: gc started at t0. */
int gcstate_begin(db_txn *t, int64_t t0);
/* After a gc (not a dry run) finished: record what it did. */
int gcstate_end(kiln_store *s, int64_t t0, uint64_t max_size,
                const kiln_gc_stats *st);
/* Hold <store>/gc.lock shared while gc runs (close *fd to release), so a
 * status can tell a running gc from a crashed one. */
int gclock_open(kiln_store *s, int *fd);

/* ---- blobsha.c ---- */

/* In a write txn: delete blob id's record and its sha256 entry (when the
 * entry names id). KILN_ENOTFOUND when there was no record. */
int blobrec_del(db_txn *t, const kiln_id *id);
/* In a write txn: sha256 entry sha -> id. */
int shamap_set(db_txn *t, const uint8_t sha[KILN_SHA256_LEN], const kiln_id *id);
/* In a write txn: delete sha256 entry sha if it names id (0 also when it
 * names another blob, or is absent). */
int shamap_del(db_txn *t, const uint8_t sha[KILN_SHA256_LEN], const kiln_id *id);

/* KILN_DURABLE_BATCH: remember a put's use record (with its SHA-256) for
 * the next commit. Returns 0 or KILN_ENOMEM. */
int store_use_defer(kiln_store *s, const kiln_id *id, uint64_t size,
                    const uint8_t sha[KILN_SHA256_LEN]);
/* Take the deferred use records (the caller owns *uses, frees it), and
 * put them back after a failed commit. */
void store_uses_take(kiln_store *s, struct pending_use **uses, size_t *n);
void store_uses_return(kiln_store *s, struct pending_use *uses, size_t n);

/* ---- index.c: record writes, shared by the single-record calls and
 * batches ---- */

enum rop_kind {
	ROP_INDEX_SET, ROP_INDEX_DEL,
	ROP_ACTION_PUT, ROP_ACTION_TOUCH, ROP_ACTION_DEL,
	ROP_FILE_PUT, ROP_FILE_DEL,
	ROP_STEP_PUT, ROP_STEP_DEL,
	ROP_DEPS_SET,
};

/* One record write, checked and ready to apply. The pointers are borrowed
 * (a batch keeps copies: rop_copy). */
struct rec_op {
	enum rop_kind kind;
	const void *key;         /* the database key, klen >= 1 bytes */
	size_t klen;
	kiln_id id;              /* INDEX_SET: the blob */
	kiln_file_rec file;      /* FILE_PUT */
	const kiln_id *outputs;  /* ACTION_PUT */
	size_t noutputs;
	const void *data;        /* ACTION_PUT, STEP_PUT: the payload */
	size_t len;
};

/* Build an op from the public calls' arguments, with their checks:
 * KILN_EINVAL for a bad name or a NULL with a count, KILN_ERANGE for a
 * payload over REC_PAYLOAD_MAX. keybuf holds the key the op points at. */
int rop_index(struct rec_op *op, enum rop_kind kind, char keybuf[INDEX_KEY_MAX],
              const char *profile, const char *url, const kiln_id *id);
int rop_action(struct rec_op *op, enum rop_kind kind, const kiln_id *key,
               const kiln_id *outputs, size_t noutputs, const void *data,
               size_t len);
int rop_file(struct rec_op *op, enum rop_kind kind, const char *path,
             const kiln_file_rec *r);
int rop_step(struct rec_op *op, enum rop_kind kind, char keybuf[INDEX_KEY_MAX],
             const char *profile, const char *url, const void *data,
             size_t len);

/* ---- deps.c: a step's discovered dependencies, both ways ---- */

/* DEPS_SET: key "<profile>\0<url>" (rop_step's), data the new list (each
 * dependency NUL-terminated, one after the other; empty: none). */
int rop_deps(struct rec_op *op, char keybuf[INDEX_KEY_MAX + 1], const char *profile,
             const char *url, const void *list, size_t len);
/* Replace the step's list and its reverse records, in a write txn. */
int deps_set_apply(db_txn *t, const struct rec_op *op);

/* 1 for the kinds that name blobs (INDEX_SET, ACTION_PUT). */
int rop_names_blobs(const struct rec_op *op);

/* Internal only, from rop_apply: an ACTION_TOUCH whose result names a blob
 * that is not in the store (gc removed it). Not applied; a batch counts it
 * as skipped, a single call returns KILN_ENOTFOUND. (An absent result is
 * KILN_ENOTFOUND, which a batch tolerates without counting.) */
#define ROP_EBLOBGONE (-20097)

/* The blobs found present and touched in the running write transaction.
 * A build's commit names each output three times (its put's use record,
 * the action result, the index entry); gc removes files only in its own
 * write transactions, so inside this one a blob seen present stays
 * present, and its file is stat'ed and its use record written once. A
 * fixed-size open-addressing table: when full it remembers no more, which
 * only costs the repeats. */
struct blob_seen {
	struct seen_slot { kiln_id id; int used; } *v;
	size_t cap;              /* a power of two, or 0: remembers nothing */
	size_t n;                /* at most cap / 2: it doubles, or stops adding */
};

/* Room for about n blobs; it grows past n (an empty table on no memory,
 * and one that stops remembering when it cannot grow: still correct). */
void blob_seen_init(struct blob_seen *b, size_t n);
void blob_seen_free(struct blob_seen *b);
/* 1 when id was seen (and touched) in this transaction; b may be NULL.
 * (Not an idset: that one is filled, then sorted, then searched.) */
int blob_seen_find(const struct blob_seen *b, const kiln_id *id);
void blob_seen_add(struct blob_seen *b, const kiln_id *id);

/* Apply op in a write txn at time now. A record naming blobs first checks
 * that they all exist (else KILN_ENOTFOUND, and nothing was written) and
 * refreshes their use times, as gc relies on; seen (may be NULL) skips the
 * blobs this transaction checked and touched already. Deleting or touching
 * an absent record gives KILN_ENOTFOUND. */
int rop_apply(db_txn *t, kiln_store *s, struct blob_seen *seen,
              const struct rec_op *op, int64_t now);

/* ---- batch.c ---- */

/* Copy op's key, outputs and payload into one allocation that out owns
 * (free with rop_free). Returns 0 or KILN_ENOMEM. */
int rop_copy(const struct rec_op *op, struct rec_op *out);
void rop_free(struct rec_op *op);

/* Commit n ops in one write transaction, in order, after store_sync_puts.
 * With skipped == NULL any error (KILN_ENOTFOUND included) aborts
 * everything: the single-record calls. Otherwise (a batch) an op naming a
 * missing blob is left out and counted in *skipped, and deleting or
 * touching an absent or undecodable record is no error. */
int rop_commit(kiln_store *s, const struct rec_op *ops, size_t n,
               size_t *skipped);

/* ---- scanning objects/ (fsck.c, gc.c) ---- */

struct blob_entry {
	kiln_id id;
	uint64_t size;
	int64_t mtime_ns;
};

/* Called per regular file named like a blob; stray entries go to stray_fn
 * (may be NULL) with their path relative to the store. */
typedef int (*scan_fn)(const struct blob_entry *e, void *arg);
typedef int (*stray_fn)(const char *relpath, void *arg);
int objects_scan(kiln_store *s, scan_fn fn, stray_fn stray, void *arg);

/* Make room for one more item in a malloc'd array of *cap items of size
 * bytes holding n (doubling; 256 to start). array_ptr is the address of the
 * array's pointer (e.g. &set->ids), left untouched on failure. Returns 0 or
 * KILN_ENOMEM. */
int store_grow(void *array_ptr, size_t *cap, size_t n, size_t size);

/* Sorted, de-duplicated set of ids. */
struct idset {
	kiln_id *ids;
	size_t n, cap;
};
int idset_add(struct idset *set, const kiln_id *id);
void idset_sort(struct idset *set);
int idset_has(const struct idset *set, const kiln_id *id);
void idset_free(struct idset *set);

#endif
