/* kiln_strhash.h — FNV-1a over a C string: the hash of kiln's in-memory
 * string tables (paths, URLs), where keys are short and a cheap, stable,
 * well-spread 64-bit value is all that is needed. Never stored, never
 * sent: not a content hash (that is XXH3-128, store/hash.c). */
#ifndef KILN_STRHASH_H
#define KILN_STRHASH_H

#include <stdint.h>

static inline uint64_t
kiln_strhash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

#endif
