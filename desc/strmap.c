/* strmap.c — a string -> index hash map in an arena: open addressing with
 * linear probing, FNV-1a hashes kept beside the keys so a probe rarely
 * touches a key's bytes. Keys are borrowed, not copied. */
#include <stdint.h>
#include <string.h>

#include "strmap.h"
#include "kiln_strhash.h"

int
strmap_init(arena *a, struct strmap *m, size_t n)
{
	m->cap = 16;
	while (m->cap < n * 2)
		m->cap *= 2;
	m->keys = arena_alloc(a, m->cap * sizeof *m->keys);
	m->hashes = arena_alloc_raw(a, m->cap * sizeof *m->hashes);
	m->vals = arena_alloc_raw(a, m->cap * sizeof *m->vals);
	return m->keys && m->hashes && m->vals ? 0 : KILN_ENOMEM;
}

/* The slot of key: its own, or the empty one where it would go. */
static size_t
strmap_slot(const struct strmap *m, const char *key, uint64_t h)
{
	size_t i = h & (m->cap - 1);

	while (m->keys[i] != NULL && (m->hashes[i] != h || strcmp(m->keys[i], key) != 0))
		i = (i + 1) & (m->cap - 1);
	return i;
}

int
strmap_get(const struct strmap *m, const char *key, size_t *val)
{
	size_t i = strmap_slot(m, key, kiln_strhash(key));

	if (m->keys[i] == NULL)
		return 0;
	*val = m->vals[i];
	return 1;
}

/* The map never fills: callers size it for every key it will hold. */
void
strmap_put(struct strmap *m, const char *key, size_t val)
{
	uint64_t h = kiln_strhash(key);
	size_t i = strmap_slot(m, key, h);

	m->keys[i] = key;
	m->hashes[i] = h;
	m->vals[i] = val;
}

