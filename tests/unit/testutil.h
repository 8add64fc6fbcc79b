/* testutil.h — helpers shared by kiln's cmocka unit tests.
 *
 * Each case gets a fresh temp dir (setup/teardown below); tests refer to it
 * through tu_dir(state). */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kiln_store.h"

/* cmocka group/case setup: make a fresh temp dir; teardown removes it. */
int tu_setup_dir(void **state);
int tu_teardown_dir(void **state);

/* The current case's temp dir. */
const char *tu_dir(void **state);

/* snprintf into a static rotating buffer: "<dir>/<fmt...>". */
const char *tu_path(void **state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Write len bytes to path (created or truncated); fails the test on error. */
void tu_write_file(const char *path, const void *buf, size_t len);

/* Fill buf with deterministic pseudo-random bytes from seed. */
void tu_fill(void *buf, size_t len, uint64_t seed);

/* Open (creating) a store under the case dir at "store", with durability. */
kiln_store *tu_open_store(void **state, enum kiln_durability d);

/* Remove a tree (like rm -rf); ignores errors. */
void tu_rmtree(const char *path);

/* Run a shell command line; returns its exit status (test helper only). */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* assert_int_equal that prints kiln_strerror of both on failure. */
#define assert_kiln(expected, actual)                                          \
	do {                                                                   \
		int tu_e_ = (expected), tu_a_ = (actual);                      \
		if (tu_e_ != tu_a_)                                            \
			fail_msg("%s: expected %d (%s), got %d (%s)", #actual, \
			         tu_e_, kiln_strerror(tu_e_), tu_a_,           \
			         kiln_strerror(tu_a_));                        \
	} while (0)

#endif
