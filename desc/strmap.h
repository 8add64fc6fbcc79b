/* strmap.h — a string -> index hash map whose memory lives in an arena. */
#ifndef KILN_STRMAP_H
#define KILN_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "desc_int.h"

struct strmap {
	arena *a;         /* where the table and its larger copies are made */
	const char **keys;
	uint64_t *hashes; /* compared before the keys: fewer cache misses */
	size_t *vals;
	size_t cap, n;    /* cap a power of 2; n <= cap / 2 always */
};

/* Size m for about n keys, in arena a. It grows past n by doubling (the
 * old table stays in the arena until arena_free: at most as much again).
 * Returns 0 or KILN_ENOMEM. */
int strmap_init(arena *a, struct strmap *m, size_t n);

/* 1 with *val set when key is present, else 0. */
int strmap_get(const struct strmap *m, const char *key, size_t *val);

/* Set key (borrowed: it must outlive m) to val. Returns 0, or
 * KILN_ENOMEM (m unchanged, and the arena marked failed). */
int strmap_put(struct strmap *m, const char *key, size_t val);

#endif
