/* strmap.h — a string -> index hash map whose memory lives in an arena. */
#ifndef KILN_STRMAP_H
#define KILN_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "desc_int.h"

struct strmap {
	const char **keys;
	uint64_t *hashes; /* compared before the keys: fewer cache misses */
	size_t *vals;
	size_t cap;
};

/* Size m for n keys (it never grows: callers know their key count).
 * Returns 0 or KILN_ENOMEM. */
int strmap_init(arena *a, struct strmap *m, size_t n);

/* 1 with *val set when key is present, else 0. */
int strmap_get(const struct strmap *m, const char *key, size_t *val);

/* Set key (borrowed: it must outlive m) to val. */
void strmap_put(struct strmap *m, const char *key, size_t val);

#endif
