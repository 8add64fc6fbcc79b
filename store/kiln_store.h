/* kiln_store.h — kiln's content-addressed blob store and content database.
 *
 * A store is a folder:
 *
 *   <store>/kiln-store          marker file: "kiln-store <format version>\n"
 *   <store>/objects/ab/<30 hex> blobs, named by XXH3-128 exactly as
 *                               `xxh128sum` prints it, read-only (0444)
 *   <store>/tmp/                blobs being written; never read by anyone
 *   <store>/corrupt/            blobs fsck found damaged (kept for forensics)
 *   <store>/db/                 one LMDB environment, named databases
 *                               index, actions, files, blobs, steps, deps,
 *                               sha256
 *
 * Blobs are named by XXH3-128. Each also has its SHA-256 (the name remote
 * caches use), computed in the same pass as XXH3 when its bytes enter the
 * store, kept in its blobs record, and mapped back to the blob by the
 * sha256 database.
 *
 * Blobs are published atomically: written (or moved) into tmp/, hashed in
 * the same pass, optionally fsynced, then linked into objects/. A blob is on
 * disk (and durable, with KILN_DURABLE_FSYNC) before any record naming it is
 * committed, so a crash can leave an orphan blob but never a record pointing
 * at nothing.
 *
 * Threads: one kiln_store may be used by any number of threads at once.
 * Processes: several processes (daemon, CLI, agents on the same host) may
 * open the same store. One process must not open the same store twice
 * (LMDB's rule: closing the second handle drops the first one's locks).
 * Never use a kiln_store in a child after fork(); spawn with posix_spawn.
 *
 * Every function returns 0 or a negative KILN_E* code (kiln_error.h). */
#ifndef KILN_STORE_H
#define KILN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- content identity ------------------------------------------------ */

/* An XXH3-128 digest in canonical (big-endian) byte order: hex-encoding the
 * 16 bytes in order gives the string xxh128sum prints. */
typedef struct kiln_id {
	uint8_t b[16];
} kiln_id;

#define KILN_ID_HEX_LEN 32 /* characters, without the terminating NUL */

/* Hash len bytes at buf. */
void kiln_id_of_buf(const void *buf, size_t len, kiln_id *id);

/* Hash everything readable from fd up to EOF; *size (may be NULL) gets the
 * byte count. Returns 0 or KILN_EIO. */
int kiln_id_of_fd(int fd, kiln_id *id, uint64_t *size);

/* Write the 32 lowercase hex characters and a NUL into hex. */
void kiln_id_to_hex(const kiln_id *id, char hex[KILN_ID_HEX_LEN + 1]);

/* Parse exactly 32 hex characters (either case) followed by NUL.
 * Returns 0 or KILN_EINVAL. */
int kiln_id_from_hex(const char *hex, kiln_id *id);

/* memcmp order; 0 when equal. */
int kiln_id_cmp(const kiln_id *a, const kiln_id *b);

/* A blob's second name: its SHA-256, as remote caches (Bazel's HTTP cache,
 * the remote-execution API) name content. Hex is lowercase, 64 characters. */
#define KILN_SHA256_LEN 32
#define KILN_SHA256_HEX_LEN 64

/* Write the 64 lowercase hex characters and a NUL into hex. */
void kiln_sha256_to_hex(const uint8_t sha[KILN_SHA256_LEN],
                        char hex[KILN_SHA256_HEX_LEN + 1]);

/* Parse exactly 64 hex characters (either case) followed by NUL.
 * Returns 0 or KILN_EINVAL. */
int kiln_sha256_from_hex(const char *hex, uint8_t sha[KILN_SHA256_LEN]);

/* kiln_id_of_fd that also computes the SHA-256, in the same read of the
 * file (what the store does with every blob it takes in; the engine with
 * a file it must name both ways). Returns 0, KILN_ENOMEM or the
 * errno-mapped KILN_E*. */
int kiln_id_sha256_of_fd(int fd, kiln_id *id, uint8_t sha[KILN_SHA256_LEN], uint64_t *size);

/* Streaming hasher for callers that feed data in pieces. */
typedef struct kiln_hasher kiln_hasher;

/* Returns 0 or KILN_ENOMEM. */
int kiln_hasher_new(kiln_hasher **h);
void kiln_hasher_update(kiln_hasher *h, const void *buf, size_t len);
/* The digest of everything fed since new/reset; h stays usable. */
void kiln_hasher_digest(const kiln_hasher *h, kiln_id *id);
void kiln_hasher_reset(kiln_hasher *h);
void kiln_hasher_free(kiln_hasher *h);

/* Write all len bytes to fd, retrying short writes and EINTR (a helper
 * for every writer of blob bytes: the store, libkiln, the CLI). Returns 0,
 * KILN_ENOSPC, KILN_EIO or another errno-mapped KILN_E* code. */
int kiln_write_all(int fd, const void *buf, size_t len);

/* ---- names ----------------------------------------------------------- */

/* A URL or project-relative path: 1..400 bytes (with a profile name it
 * must fit LMDB's 511-byte key limit), '/'-separated segments,
 * none empty, "." or "..", not starting with '/', no backslash, no control
 * characters. Returns 0 or KILN_EINVAL. */
int kiln_url_check(const char *url);

/* A profile name: 1..64 of [A-Za-z0-9_.-], not starting with '.' or '-'.
 * Returns 0 or KILN_EINVAL. */
int kiln_profile_check(const char *profile);

/* ---- opening --------------------------------------------------------- */

typedef struct kiln_store kiln_store;

enum kiln_store_flags {
	KILN_STORE_CREATE = 1 << 0, /* make the folder a store if it is not yet */
	KILN_STORE_RDONLY = 1 << 1, /* every write returns KILN_EREADONLY */
	/* Walk every page of the database (pread) before using it, so a page
	 * overwritten with garbage is refused (KILN_ECORRUPT), not followed.
	 * It reads the whole used file: for long-lived or checking openers
	 * (kilnd at start, fsck). Every open checks the file's length against
	 * its meta pages, which is what keeps a cut-short file from a SIGBUS. */
	KILN_STORE_CHECK_PAGES = 1 << 2,
	/* The store alone: refused (KILN_EBUSY) while any other handle, in
	 * this process or another (a running kilnd, a kiln gc), has it open;
	 * and while this one is open, others are refused. For repairs
	 * (fsck --repair), which must not change files under a user. Every
	 * other open shares <store>/db/open.lock (flock). */
	KILN_STORE_EXCLUSIVE = 1 << 3,
};

enum kiln_durability {
	/* fsync each blob and its folder before returning from a put, and
	 * commit every record synchronously. Survives power loss. */
	KILN_DURABLE_FSYNC = 0,
	/* Leave both to the OS. Survives a killed process, not a power cut:
	 * after one, fsck may find records naming lost blobs (it repairs them
	 * by dropping the records, and a rebuild puts the content back). */
	KILN_DURABLE_NONE = 1,
	/* Puts do not fsync; instead, before the next record is committed
	 * (single or batch), every blob put through this handle since the
	 * last sync is made durable (a few one by one, many with one
	 * syncfs() of the store's filesystem), and the record commits
	 * synchronously. Records still never name a blob that a power cut
	 * could lose, and a put costs no fsync or transaction of its own
	 * (its use record waits for that commit): what a build daemon
	 * wants. */
	KILN_DURABLE_BATCH = 2,
};

typedef struct kiln_store_opts {
	unsigned flags;                  /* kiln_store_flags */
	enum kiln_durability durability;
	/* Initial LMDB map size in bytes; 0 = 16 GiB. It is address space,
	 * not disk, and grows by itself when full. */
	uint64_t map_size;
	/* How much more of the database than at open the process may keep
	 * mapped before kiln_store_trim_pages, and a commit as it goes, hand
	 * the pages back; 0 = 8 MiB. */
	uint64_t mapped_max;
	/* The wall clock, in ns since the epoch, that the store stamps its
	 * records with (blob use times, index and action times) and that gc
	 * measures ages and grace periods against; NULL = CLOCK_REALTIME.
	 * Called with now_arg from any thread using the handle, so it must
	 * be thread-safe; it should never go back. A blob judged by its
	 * file's mtime (a put not yet recorded) is as old as CLOCK_REALTIME
	 * says: moving this clock on never makes a file just written look
	 * old. For tests: a clock moved ahead stands in for waiting out an
	 * age or a grace period. */
	int64_t (*now_ns)(void *now_arg);
	void *now_arg;
} kiln_store_opts;

/* Open the store in folder dir (opts may be NULL: defaults, no create).
 * Removes temp files whose writer process is gone (left by crashes) and
 * clears reader slots of dead processes. A missing folder is created (with
 * its parents) only with CREATE; so is an empty one. Returns 0, KILN_ENOTFOUND (no
 * folder, or not a store and no CREATE), KILN_ENOTSTORE (a non-empty folder
 * without the marker), KILN_EVERSION, KILN_EACCES, KILN_EIO, KILN_ENOMEM,
 * KILN_EDB, or KILN_ECORRUPT when the database file is damaged (shorter
 * than its meta pages say, or a page LMDB would follow off the file:
 * checked with plain reads before anything is read through the map; see
 * kiln_store_db_set_aside). */
int kiln_store_open(const char *dir, const kiln_store_opts *opts, kiln_store **sp);

/* When kiln_store_open said KILN_ECORRUPT (its database file is cut short
 * or has a damaged page, which LMDB would crash on): move <dir>/db/data.mdb
 * to <dir>/corrupt/data.mdb.<UTC time>.<pid> (kept, never deleted), so
 * the next open makes a new, empty database. Blobs stay: they are named
 * by their content. What the records said is lost and rebuilt by the next
 * build; gc judges blobs without use records by their files' mtimes. No
 * other process may have the store open. *moved (len bytes) gets the new
 * path. Returns 0, KILN_ENOTFOUND (no store), KILN_ENOTSTORE,
 * KILN_EVERSION, KILN_ERANGE or the errno-mapped KILN_E*. */
int kiln_store_db_set_aside(const char *dir, char *moved, size_t len);

/* Close. Every other call on s must have returned. NULL is allowed. */
void kiln_store_close(kiln_store *s);

/* The store's folder as given to open; valid until close. */
const char *kiln_store_dir(const kiln_store *s);

/* KILN_EDBCHANGED once s found its database file cut short under it (by
 * the size check before each transaction, or by a read through the map
 * that faulted past the file's end, with kiln_store_guard_install): from
 * then on every call that would read or write the database returns
 * KILN_EDBCHANGED, so that nothing more is read from a file that no
 * longer holds it nor written into it. The file is for
 * kiln_store_db_set_aside (kiln fsck --repair) once s is closed. Else 0.
 * Any thread; cheap (one atomic load). */
int kiln_store_damaged(const kiln_store *s);

/* For a process that keeps stores open while others may touch their
 * files (kilnd): take SIGBUS over, so that a read through one of the
 * store's maps of a file cut short (its database file; a blob or a file
 * put by path) fails the call reading it instead of killing the
 * process. A SIGBUS anywhere else gets the action set before. Process-
 * wide, once, before threads are made; idempotent. Returns 0 or the
 * errno-mapped KILN_E* of sigaction. */
int kiln_store_guard_install(void);

/* Unmap the database pages this process has read or written. The database
 * is a shared mapping of its file: every page a long-running process ever
 * looked at stays in its resident set (all of a large project's database,
 * for a daemon: docs/store.md, "Resident memory") though it is the
 * kernel's page cache, not the process's memory.
 * This hands the mappings back; the pages stay cached, and the next read of
 * one faults it in again (microseconds). Safe at any time, from any thread,
 * with transactions running. */
void kiln_store_unmap_pages(kiln_store *s);

/* kiln_store_unmap_pages, but only when the process maps more file pages
 * than when s was opened by over opts.mapped_max: unmapping costs the
 * faults to map hot pages again and, in a multi-threaded process, a TLB
 * flush on every other core, so a small database is left mapped whole.
 * Reads /proc/self/statm (a few microseconds); where it cannot, it always
 * unmaps. A commit does the same every 32 records it applies. */
void kiln_store_trim_pages(kiln_store *s);

/* ---- blobs ----------------------------------------------------------- */

/* Put len bytes from buf. On success *id is their hash. Returns 0,
 * KILN_ENOSPC, KILN_EIO, KILN_EREADONLY or KILN_ENOMEM. */
int kiln_store_put_buf(kiln_store *s, const void *buf, size_t len, kiln_id *id);

/* Put everything readable from fd (a file, pipe or socket) up to EOF. */
int kiln_store_put_fd(kiln_store *s, int fd, kiln_id *id);

/* Put a copy of the file at path; path is left alone. */
int kiln_store_put_path(kiln_store *s, const char *path, kiln_id *id);

/* Publish the file at path by moving it (no copy of its bytes when it is on
 * the store's filesystem; a copy then unlink otherwise). On success path no
 * longer exists. The file must not be written to concurrently. */
int kiln_store_put_move(kiln_store *s, const char *path, kiln_id *id);

/* A blob written in pieces (a network upload, a tool's stream). */
typedef struct kiln_blob_writer kiln_blob_writer;

/* Returns 0, KILN_EREADONLY, KILN_ENOSPC, KILN_EIO or KILN_ENOMEM. */
int kiln_blob_writer_open(kiln_store *s, kiln_blob_writer **w);
/* Returns 0, KILN_ENOSPC or KILN_EIO; after an error only abort is valid. */
int kiln_blob_writer_write(kiln_blob_writer *w, const void *buf, size_t len);
/* Say what the content's SHA-256 must be (a blob fetched from a remote
 * cache by that name), at any time before commit: commit then publishes
 * nothing and returns KILN_ECORRUPT unless it matches. The check costs no
 * second read: the writer hashes every byte with both hashes as it comes. */
void kiln_blob_writer_expect_sha256(kiln_blob_writer *w,
                                    const uint8_t sha[KILN_SHA256_LEN]);
/* Publish. When expect is not NULL and the content does not hash to it,
 * nothing is published and KILN_ECORRUPT is returned (likewise for an
 * expected SHA-256). w is freed in every case. */
int kiln_blob_writer_commit(kiln_blob_writer *w, const kiln_id *expect, kiln_id *id);
/* Discard everything written; frees w. NULL is allowed. */
void kiln_blob_writer_abort(kiln_blob_writer *w);

/* The SHA-256 of blob id into out. Every put records it in the blob's
 * record; a blob whose record predates that (or has none) is read once,
 * checked against id (KILN_ECORRUPT when it does not hash to it), and its
 * SHA-256 recorded (not with KILN_STORE_RDONLY: then only computed).
 * Returns 0, KILN_ENOTFOUND (no such blob), KILN_ECORRUPT, KILN_EIO or
 * KILN_ENOMEM. */
int kiln_store_blob_sha256(kiln_store *s, const kiln_id *id,
                           uint8_t out[KILN_SHA256_LEN]);

/* The blob whose SHA-256 is sha: 0 with *id set when it is in the store,
 * else KILN_ENOTFOUND. A blob put through s but whose record waits for the
 * next commit (KILN_DURABLE_BATCH) is found too; a blob whose record
 * predates SHA-256s is found once kiln_store_blob_sha256 or
 * `kiln fsck --repair` recorded it. Like kiln_store_has, the blob may be
 * removed at any time after. */
int kiln_store_find_sha256(kiln_store *s, const uint8_t sha[KILN_SHA256_LEN],
                           kiln_id *id);

/* 0 when the blob exists (*size, may be NULL, gets its length), else
 * KILN_ENOTFOUND. Does not read the content. */
int kiln_store_has(kiln_store *s, const kiln_id *id, uint64_t *size);

/* Write the blob's path into buf (len bytes). KILN_ERANGE if too small.
 * The path may stop existing at any time (gc); opening it must treat
 * ENOENT as "not in the store". */
int kiln_store_blob_path(kiln_store *s, const kiln_id *id, char *buf, size_t len);

/* Open the blob read-only (O_CLOEXEC) without verifying it; the caller
 * closes *fd. An open fd stays readable even if gc removes the blob. */
int kiln_store_open_blob(kiln_store *s, const kiln_id *id, int *fd);

/* Read the whole blob into a malloc'd buffer (*buf, free() it) after
 * checking it hashes to id. Returns 0, KILN_ENOTFOUND, KILN_ECORRUPT,
 * KILN_ENOMEM or KILN_EIO. */
int kiln_store_read(kiln_store *s, const kiln_id *id, void **buf, size_t *len);

/* Write the blob to fd, only after checking it hashes to id: corrupt
 * content is never written. Returns 0, KILN_ENOTFOUND, KILN_ECORRUPT or
 * KILN_EIO (a write error on fd included). */
int kiln_store_copy_out(kiln_store *s, const kiln_id *id, int fd);

/* Re-hash the blob. Returns 0, KILN_ENOTFOUND or KILN_ECORRUPT. */
int kiln_store_verify(kiln_store *s, const kiln_id *id);

/* Move blob id out of objects/ into <store>/corrupt/<32 hex> (replacing
 * an earlier file of that name there), as `kiln fsck --repair` does, so
 * that it is never served again: kiln_store_has says KILN_ENOTFOUND and
 * records naming it read as misses until the content is put again. For a
 * blob the caller found damaged (kiln_store_verify said KILN_ECORRUPT):
 * the bytes are not looked at again, so a sound blob put back under the
 * name in between would be moved too (a miss, nothing wrong served). The
 * blobs record is left (gc and a later put of the content handle a
 * missing file). Returns 0, KILN_ENOTFOUND (no such blob: another caller
 * moved it first), KILN_EREADONLY, KILN_ERANGE (a store path too long),
 * KILN_EACCES or KILN_EIO. */
int kiln_store_quarantine(kiln_store *s, const kiln_id *id);

/* Mark blobs as used now (gc removes the least recently used first).
 * Unknown ids are ignored. */
int kiln_store_touch(kiln_store *s, const kiln_id *ids, size_t n);

/* ---- index: (profile, URL) -> blob ----------------------------------- */

/* Point profile/url at blob id. The blob must exist (KILN_ENOTFOUND
 * otherwise): records never name missing blobs. KILN_EINVAL for a bad
 * profile or URL. */
int kiln_store_index_set(kiln_store *s, const char *profile, const char *url,
                         const kiln_id *id);

/* Returns 0 (*id set) or KILN_ENOTFOUND. */
int kiln_store_index_get(kiln_store *s, const char *profile, const char *url,
                         kiln_id *id);

/* Returns 0 or KILN_ENOTFOUND. */
int kiln_store_index_delete(kiln_store *s, const char *profile, const char *url);

/* Called once per entry in (profile, url) order. The strings are valid only
 * during the call. A non-zero return stops the walk and is returned by
 * kiln_store_index_list. */
typedef int (*kiln_index_fn)(const char *profile, const char *url,
                             const kiln_id *id, void *arg);

/* Walk entries of profile (NULL: every profile) whose URL starts with
 * url_prefix (NULL or "": all). Runs on one consistent snapshot. */
int kiln_store_index_list(kiln_store *s, const char *profile,
                          const char *url_prefix, kiln_index_fn fn, void *arg);

/* ---- actions: action key -> result ----------------------------------- */

typedef struct kiln_action {
	kiln_id key;
	int64_t created_ns;  /* when first stored (CLOCK_REALTIME) */
	int64_t used_ns;     /* last put or touch */
	size_t noutputs;
	kiln_id *outputs;    /* the blobs this result names */
	size_t len;
	void *data;          /* the caller's opaque result record */
} kiln_action;

/* Store a result: the blobs it names (each must exist, else
 * KILN_ENOTFOUND) and an opaque payload of at most 64 MiB (KILN_ERANGE
 * beyond). Replaces any previous result under key. */
int kiln_store_action_put(kiln_store *s, const kiln_id *key,
                          const kiln_id *outputs, size_t noutputs,
                          const void *data, size_t len);

/* Returns 0 with *a malloc'd (free with kiln_action_free), KILN_ENOTFOUND,
 * or KILN_ECORRUPT / KILN_EVERSION for a record this kiln cannot read. */
int kiln_store_action_get(kiln_store *s, const kiln_id *key, kiln_action **a);
void kiln_action_free(kiln_action *a);

/* Mark a result as used now, keeping it a gc root for another max-age,
 * and its blobs as used now (so a gc that started earlier keeps them).
 * KILN_ENOTFOUND when there is no such result, or when a blob it names is
 * gone (then nothing is touched). */
int kiln_store_action_touch(kiln_store *s, const kiln_id *key);

int kiln_store_action_delete(kiln_store *s, const kiln_id *key);

/* ---- files: project-relative path -> what it looked like ------------- */

typedef struct kiln_file_rec {
	uint64_t size;
	int64_t mtime_ns;
	uint64_t ino;
	int64_t ctime_ns;
	kiln_id hash; /* content hash; the content need not be in the store */
} kiln_file_rec;

/* path follows kiln_url_check. */
int kiln_store_file_put(kiln_store *s, const char *path, const kiln_file_rec *r);
int kiln_store_file_get(kiln_store *s, const char *path, kiln_file_rec *r);
int kiln_store_file_delete(kiln_store *s, const char *path);

/* ---- steps: (profile, URL) -> the last build's decision record -------- */

/* The build engine keeps, per step, what it decided last time and from
 * which inputs (`kiln why` reads it). The payload is the engine's own
 * versioned record (at most 64 MiB); the store only keeps it. It names no
 * blobs as far as the store knows: gc roots nothing by it and fsck only
 * checks that it decodes. Replaces any previous record. Returns 0,
 * KILN_EINVAL (bad name), KILN_ERANGE (payload too big), KILN_EREADONLY. */
int kiln_store_step_put(kiln_store *s, const char *profile, const char *url,
                        const void *data, size_t len);
/* Returns 0 with *data malloc'd (free() it; len may be 0) and *len,
 * KILN_ENOTFOUND (also from a read-only handle on a store made before
 * steps existed), or KILN_ECORRUPT / KILN_EVERSION. */
int kiln_store_step_get(kiln_store *s, const char *profile, const char *url,
                        void **data, size_t *len);
/* Returns 0 or KILN_ENOTFOUND. */
int kiln_store_step_delete(kiln_store *s, const char *profile, const char *url);

/* ---- batches: many records, one transaction -------------------------- */

/* A build finishes thousands of steps a second; committing each record in
 * its own synchronous transaction would make the disk the bottleneck. A
 * batch collects records (copied in) and kiln_store_commit writes them all
 * in one write transaction, in the order they were added. */
typedef struct kiln_batch kiln_batch;

/* Returns 0 or KILN_ENOMEM. */
int kiln_batch_new(kiln_batch **b);
/* NULL is allowed. */
void kiln_batch_free(kiln_batch *b);
/* Records waiting. */
size_t kiln_batch_len(const kiln_batch *b);

/* Queue a record; same arguments and checks as the single-record calls
 * (KILN_EINVAL for a bad name, KILN_ERANGE for an oversized payload),
 * KILN_ENOMEM. */
int kiln_batch_index_set(kiln_batch *b, const char *profile, const char *url,
                         const kiln_id *id);
int kiln_batch_index_delete(kiln_batch *b, const char *profile, const char *url);
int kiln_batch_action_put(kiln_batch *b, const kiln_id *key,
                          const kiln_id *outputs, size_t noutputs,
                          const void *data, size_t len);
int kiln_batch_action_touch(kiln_batch *b, const kiln_id *key);
int kiln_batch_file_put(kiln_batch *b, const char *path, const kiln_file_rec *r);
int kiln_batch_file_delete(kiln_batch *b, const char *path);
int kiln_batch_step_put(kiln_batch *b, const char *profile, const char *url,
                        const void *data, size_t len);

/* Commit every queued record in one write transaction, then empty b.
 * A record naming a blob that is not in the store (index set, action put)
 * is skipped, not committed, and counted in *skipped (may be NULL): the
 * others still commit, and a skipped record leaves no trace (not even its
 * present blobs' use times). An action touch whose result names a blob no
 * longer in the store is skipped and counted the same way. A concurrent
 * gc (this process or another) decides, in its own write transaction,
 * either before such a record (and keeps its blobs) or after (the record
 * is skipped): a caller that counts skips must not take those records'
 * steps as recorded. Deleting or touching something absent is not
 * an error, nor touching an action record this kiln cannot decode (fsck
 * reports it). Returns 0, KILN_EREADONLY, KILN_ENOSPC, KILN_ENOMEM,
 * KILN_EDB, or KILN_EIO (the sync of KILN_DURABLE_BATCH failed); on error
 * nothing was committed, *skipped is 0, and b is left as it was, for a
 * retry. Committing an empty batch writes nothing. */
int kiln_store_commit(kiln_store *s, kiln_batch *b, size_t *skipped);

/* ---- deps: what each step's last result discovered, and the reverse --- */

/* The build engine records, per (profile, URL), the dependencies its last
 * result discovered (strings of its own: "f:PATH" a file, "u:URL" a needed
 * step), and the store keeps the reverse too, so that every step depending
 * on one of them is one lookup. Setting a list replaces the previous one
 * (an empty list removes it) and its reverse records, atomically at commit.
 * Returns 0, KILN_EINVAL (bad name, an empty string), KILN_ENOMEM. */
int kiln_batch_deps_set(kiln_batch *b, const char *profile, const char *url,
                        const char *const *deps, size_t n);

/* Called with each string found; non-zero stops the walk and is returned. */
typedef int (*kiln_dep_fn)(const char *s, void *arg);

/* Every step URL of profile whose recorded list holds dep (in no useful
 * order). Returns 0 (none found is 0), KILN_EINVAL, KILN_ECORRUPT, or
 * what fn returned. */
int kiln_store_rdeps(kiln_store *s, const char *profile, const char *dep,
                     kiln_dep_fn fn, void *arg);

/* The list recorded for (profile, url), in recorded order. Returns 0,
 * KILN_ENOTFOUND (none), KILN_EINVAL, KILN_ECORRUPT, or what fn returned. */
int kiln_store_deps(kiln_store *s, const char *profile, const char *url,
                    kiln_dep_fn fn, void *arg);

/* ---- checking and collecting ----------------------------------------- */

enum kiln_fsck_kind {
	KILN_FSCK_CORRUPT,    /* blob content does not hash to its name */
	KILN_FSCK_MISSING,    /* a record names a blob that is not there */
	KILN_FSCK_BAD_RECORD, /* a database record this kiln cannot decode */
	KILN_FSCK_STRAY,      /* a file in objects/ that is not a blob */
	/* a blob record's SHA-256 that is not its content's, or a sha256
	 * entry missing, or naming another blob or none */
	KILN_FSCK_SHA256,
};

typedef struct kiln_fsck_problem {
	enum kiln_fsck_kind kind;
	kiln_id id;        /* the blob concerned (zero for STRAY/BAD_RECORD) */
	const char *where; /* "index pc sprites/hero", "action <hex>",
	                      "objects/ab/..." — valid during the call */
	int repaired;      /* 1 when repair fixed it */
} kiln_fsck_problem;

typedef void (*kiln_fsck_fn)(const kiln_fsck_problem *p, void *arg);

typedef struct kiln_fsck_stats {
	uint64_t blobs, bytes;         /* blobs checked and their size */
	uint64_t corrupt, missing, bad_records, stray;
	uint64_t repaired;
	uint64_t sha256;               /* KILN_FSCK_SHA256 problems */
} kiln_fsck_stats;

/* Check that every blob re-hashes to its name, every index and action
 * record names an existing, sound blob, every step record decodes, and
 * every blob's recorded SHA-256 and sha256 entry agree with its content;
 * report each problem to fn (may be NULL). With repair, corrupt blobs move to <store>/corrupt/, records
 * naming bad or missing blobs are dropped, undecodable records are
 * dropped, strays move to corrupt/, and SHA-256 records and entries are
 * recomputed from the content (records made before SHA-256s get theirs
 * too, without a report) — nothing is ever invented.
 * Returns 0 when the walk completed (problems are counted in *st), or an
 * error that stopped it. */
int kiln_store_fsck(kiln_store *s, int repair, kiln_fsck_fn fn, void *arg,
                    kiln_fsck_stats *st);

typedef struct kiln_gc_opts {
	/* Remove unrooted blobs, least recently used first, until the store's
	 * blobs total at most this many bytes (0: remove every unrooted one). */
	uint64_t max_size;
	/* Action results used within this many seconds are roots; older ones
	 * are deleted (their blobs then only survive if otherwise rooted). */
	int64_t action_max_age_s;
	/* Blobs used within this many seconds are never removed, so a put
	 * that is about to be named by a record is safe. */
	int64_t grace_s;
	int dry_run; /* count what would go, remove nothing */
	/* Called after each blob is removed (with dry_run: for each blob that
	 * would be), in least-recently-used order; may be NULL. */
	void (*removed)(const kiln_id *id, uint64_t size, void *arg);
	void *arg;
} kiln_gc_opts;

typedef struct kiln_gc_stats {
	uint64_t blobs, bytes;                /* before */
	uint64_t rooted_blobs, rooted_bytes;  /* kept because named by a root */
	uint64_t removed_blobs, removed_bytes;
	uint64_t removed_actions;
	uint64_t removed_records; /* use records of blobs gone from objects/ */
} kiln_gc_stats;

/* Collect garbage. Roots: every index entry (all profiles) and action
 * results used within action_max_age_s. Never removes a rooted blob, a
 * blob within its grace period, or a blob a concurrent put is publishing;
 * never leaves an action result naming a removed blob. Runs in the
 * caller's thread without blocking readers or opens; writers wait only for
 * short batches. */
int kiln_store_gc(kiln_store *s, const kiln_gc_opts *o, kiln_gc_stats *st);

/* The store's figures, read without scanning (store/blobstat.c). */
typedef struct kiln_store_stats {
	uint64_t blobs;  /* use records in the blobs database (one per blob) */
	uint64_t bytes;  /* the sum of their sizes */
	int exact;       /* 0: a kiln from before these figures wrote blob
	                  * records since this store was last opened
	                  * writable; bytes misses them until the next open */
	int gc_running;  /* a gc holds <store>/gc.lock now */
	int64_t gc_started_ns;          /* the running gc's start, or 0 */
	int64_t last_gc_start_ns, last_gc_end_ns; /* 0: no gc finished yet */
	uint64_t last_gc_removed_blobs, last_gc_removed_bytes;
	uint64_t last_gc_removed_actions;
	uint64_t last_gc_max_size;      /* the budget it was given */
} kiln_store_stats;

/* Fill *st: one read transaction and a probe of gc.lock, whatever the
 * store's size (only a store no writable open of this kiln could sum yet
 * is summed by a scan, per call). Puts of this handle whose use records
 * wait for the next commit (KILN_DURABLE_BATCH) are counted too, once
 * each. Returns 0 or a KILN_E* code. */
int kiln_store_stats_get(kiln_store *s, kiln_store_stats *st);

#ifdef __cplusplus
}
#endif

#endif
