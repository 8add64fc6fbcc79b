/* testutil.h — helpers shared by kiln's cmocka unit tests.
 *
 * Each case gets a fresh temp dir (setup/teardown below); tests refer to it
 * through tu_dir(state). Helpers that fail the test (fail_msg, assert_*)
 * must run on the main thread of the test process; the ones marked "safe in
 * threads and children" return an error instead, for worker threads and
 * forked children that report back by other means. */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cmocka.h>

#include "kiln_store.h"

/* Ten years in seconds: an action age or grace period nothing reaches. */
#define TU_AGE_FOREVER ((int64_t)10 * 365 * 24 * 3600)

/* ---- temp dirs and files ---------------------------------------------- */

/* cmocka group/case setup: make a fresh temp dir; teardown removes it. */
int tu_setup_dir(void **state);
int tu_teardown_dir(void **state);

/* The current case's temp dir. */
const char *tu_dir(void **state);

/* snprintf into a static rotating buffer: "<dir>/<fmt...>". */
const char *tu_path(void **state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Write all len bytes to fd, retrying short writes and EINTR. Returns 0,
 * or -1 with errno set. Safe in threads and children. */
int tu_write_all(int fd, const void *buf, size_t len);

/* Write len bytes to path (created or truncated, 0644). Returns 0, or -1
 * with errno set. Safe in threads and children. */
int tu_try_write_file(const char *path, const void *buf, size_t len);

/* Write len bytes to path (created or truncated); fails the test on error. */
void tu_write_file(const char *path, const void *buf, size_t len);

/* A memfd (close-on-exec) holding the len bytes of buf, its offset at 0;
 * -1 with errno set on failure. Safe in threads and children. */
int tu_memfd_of(const void *buf, size_t len);

/* Remove a tree (like rm -rf); ignores errors. */
void tu_rmtree(const char *path);

/* Run a shell command line; returns its exit status (test helper only). */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleep ms milliseconds, resuming after signals. */
void tu_sleep_ms(long ms);

/* ---- content ----------------------------------------------------------- */

/* Fill buf with deterministic pseudo-random bytes from seed. */
void tu_fill(void *buf, size_t len, uint64_t seed);

/* Advance the xorshift64 state *x (never 0) and return its new value. */
uint64_t tu_rand_next(uint64_t *x);

/* Fill buf with deterministic pseudo-random bytes from seed, 8 at a time:
 * fast enough for MiBs (other bytes than tu_fill gives for the seed). */
void tu_fill64(void *buf, size_t len, uint64_t seed);

/* The id of text's bytes (as an action key). */
kiln_id tu_key_of(const char *text);

/* ---- stores ------------------------------------------------------------ */

/* Open (creating) a store under the case dir at "store", with durability. */
kiln_store *tu_open_store(void **state, enum kiln_durability d);

/* A store clock (kiln_store_opts.now_ns) that runs with CLOCK_REALTIME
 * but ahead of it by ahead_ns, which only grows: a case moves it on
 * instead of sleeping until use stamps are old. Zero it before use. */
struct tu_clock {
	int64_t ahead_ns;
};

/* kiln_store_opts.now_ns for a struct tu_clock *clock. Safe in threads. */
int64_t tu_clock_now(void *clock);

/* Move c on by ms milliseconds: everything stamped so far is that much
 * older. Safe in threads. */
void tu_clock_advance(struct tu_clock *c, int64_t ms);

/* tu_open_store with the store's clock set to c (which must outlive the
 * handle). */
kiln_store *tu_open_store_clocked(void **state, enum kiln_durability d,
                                  struct tu_clock *c);

/* Open the store at path with flags (kiln_store_flags) and durability d;
 * fails the test, naming what, unless it opens. */
kiln_store *tu_open_store_at(const char *path, unsigned flags,
                             enum kiln_durability d, const char *what);

/* Create a store at path and close it again (so that children forked next
 * find it made and the parent holds no handle). Fails the test on error. */
void tu_create_store(const char *path);

/* Put len bytes of tu_fill content from seed; fails the test unless the
 * put returns 0 and the content's hash. */
kiln_id tu_put_content(kiln_store *s, uint64_t seed, size_t len);

/* Put len bytes of buf through a blob writer, chunk bytes per write, and
 * commit expecting want (NULL: any); aborts the writer when a write fails.
 * Returns the first error, or 0 with *id set. Safe in threads and
 * children. */
int tu_put_by_writer(kiln_store *s, const void *buf, size_t len, size_t chunk,
                     const kiln_id *want, kiln_id *id);

/* Where blob id's file lives in the case's store: "<dir>/store/objects/
 * ab/<30 hex>" (in tu_path's rotating buffer). */
const char *tu_blob_path(void **state, const kiln_id *id);

/* Flip one byte at off of a published blob file, as disk rot would; its
 * mode stays 0444. Fails the test on error. */
void tu_flip_byte(const char *path, off_t off);

/* Cut a published blob file to len bytes; its mode stays 0444. Fails the
 * test on error. */
void tu_truncate_blob(const char *path, off_t len);

/* ---- checking a store from outside ------------------------------------- */

/* Every file under <store>/objects is a sound blob: a 0444 regular file in
 * a 2-hex fan-out folder, named by the other 30 hex of its hash, and
 * re-hashing to its name. Counts into *nblobs and *nbytes (each may be
 * NULL). Fails the test, naming what and the file, otherwise. */
void tu_check_objects(const char *store, const char *what, uint64_t *nblobs,
                      uint64_t *nbytes);

/* tu_check_objects for a store no writer is in the middle of: tmp/ is also
 * empty and every blob has exactly one link (no temp name is left). */
void tu_check_objects_settled(const char *store, const char *what,
                              uint64_t *nblobs, uint64_t *nbytes);

/* Names of the entries in <store>/tmp: the first max into names; returns
 * how many there are (0 when the folder does not exist). */
size_t tu_list_tmp(const char *store, char names[][256], size_t max);

/* ---- fsck -------------------------------------------------------------- */

/* One problem fsck reported, copied out of the callback. */
struct tu_fsck_problem {
	enum kiln_fsck_kind kind;
	kiln_id id;
	char where[512];
	int repaired;
};

/* The problems of one fsck run: the first TU_FSCK_MAX in p, all in n. */
#define TU_FSCK_MAX 32
struct tu_fsck_problems {
	size_t n;
	struct tu_fsck_problem p[TU_FSCK_MAX];
};

/* kiln_fsck_fn: append *p to the struct tu_fsck_problems at arg. */
void tu_fsck_collect(const kiln_fsck_problem *p, void *arg);

/* Run fsck (repairing when repair is set): problems into *ps, stats into
 * *st, which is poisoned first so every field must be written. Fails the
 * test unless fsck returns 0. */
void tu_fsck_run(kiln_store *s, int repair, struct tu_fsck_problems *ps,
                 kiln_fsck_stats *st);

/* "CORRUPT", "MISSING", "BAD_RECORD" or "STRAY" ("?" for another value). */
const char *tu_fsck_kind_name(enum kiln_fsck_kind k);

/* The problems one per line, for failure messages; " (none)" when there
 * are none. Static buffer, valid until the next call. */
const char *tu_fsck_describe(const struct tu_fsck_problems *ps);

/* fsck without repair finds no problem and counts exactly nblobs blobs of
 * nbytes bytes. Fails the test, naming what and the problems, otherwise. */
void tu_assert_fsck_clean(kiln_store *s, const char *what, uint64_t nblobs,
                          uint64_t nbytes);

/* The open store s is settled and sound: tu_check_objects_settled passes
 * on its folder and fsck is clean, counting the same blobs and bytes.
 * Those counts go to *nblobs and *nbytes (each may be NULL). */
void tu_assert_store_sound(kiln_store *s, const char *what, uint64_t *nblobs,
                           uint64_t *nbytes);

/* ---- index listings ---------------------------------------------------- */

/* Ids from an index listing: the first max into id; n counts them all. */
struct tu_ids {
	size_t n, max;
	kiln_id *id;
};

/* kiln_index_fn: append the entry's id to the struct tu_ids at arg. */
int tu_collect_id(const char *profile, const char *url, const kiln_id *id,
                  void *arg);

/* ---- running ----------------------------------------------------------- */

/* main's last step: returns nfailed (cmocka's count of failed cases), and
 * when it is not 0 turns LeakSanitizer's report off: a failed case
 * longjmps past its cleanup and leaks, which would bury the failure.
 * Passing runs are still checked for leaks. */
int tu_skip_leak_report_if_failed(int nfailed);

/* assert_int_equal that prints kiln_strerror of both on failure. */
#define assert_kiln(expected, actual)                                          \
	do {                                                                   \
		int tu_e_ = (expected), tu_a_ = (actual);                      \
		if (tu_e_ != tu_a_)                                            \
			fail_msg("%s: expected %d (%s), got %d (%s)", #actual, \
			         tu_e_, kiln_strerror(tu_e_), tu_a_,           \
			         kiln_strerror(tu_a_));                        \
	} while (0)

/* Fails unless stats field (st).field equals want, naming what the stats
 * came from ("gc", "fsck") and the field. */
#define tu_assert_stat(what, st, field, want)                                  \
	do {                                                                   \
		uint64_t tu_got_ = (st).field, tu_want_ = (want);              \
		if (tu_got_ != tu_want_)                                       \
			fail_msg("%s stats: %s is %" PRIu64 ", expected %" PRIu64, \
			         (what), #field, tu_got_, tu_want_);           \
	} while (0)

#endif
