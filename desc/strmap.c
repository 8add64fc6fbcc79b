/* strmap.c — a string -> index hash map in an arena: open addressing with
 * linear probing, FNV-1a hashes kept beside the keys so a probe rarely
 * touches a key's bytes. Keys are borrowed, not copied.
 *
 * The table doubles before it is half full, so a probe always meets an
 * empty slot: a caller's guess of its key count is a hint, never a limit
 * (the URL map was once sized from the source files and, with three rules
 * per file, probed a full table for ever). */
#include <stdint.h>
#include <string.h>

#include "strmap.h"
#include "kiln_strhash.h"

/* Empty arrays of cap slots for m (its contents untouched). */
static int
table_alloc(struct strmap *m, size_t cap, struct strmap *t)
{
	if (cap > SIZE_MAX / 2 / sizeof *t->hashes) {
		m->a->failed = 1;
		return KILN_ENOMEM;
	}
	t->a = m->a;
	t->cap = cap;
	t->n = 0;
	t->keys = arena_alloc(m->a, cap * sizeof *t->keys);
	t->hashes = arena_alloc_raw(m->a, cap * sizeof *t->hashes);
	t->vals = arena_alloc_raw(m->a, cap * sizeof *t->vals);
	return t->keys && t->hashes && t->vals ? 0 : KILN_ENOMEM;
}

int
strmap_init(arena *a, struct strmap *m, size_t n)
{
	size_t cap = 16;

	while (cap < n * 2 && cap < SIZE_MAX / 4)
		cap *= 2;
	m->a = a;
	return table_alloc(m, cap, m);
}

/* The slot of key: its own, or the empty one where it would go. Ends: at
 * most half the slots are taken. */
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

/* Double m's table. 0 or KILN_ENOMEM (m unchanged). */
static int
strmap_grow(struct strmap *m)
{
	struct strmap t;

	if (table_alloc(m, m->cap * 2, &t) != 0)
		return KILN_ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] == NULL)
			continue;
		size_t j = strmap_slot(&t, m->keys[i], m->hashes[i]);
		t.keys[j] = m->keys[i];
		t.hashes[j] = m->hashes[i];
		t.vals[j] = m->vals[i];
	}
	t.n = m->n;
	*m = t;
	return 0;
}

int
strmap_put(struct strmap *m, const char *key, size_t val)
{
	uint64_t h = kiln_strhash(key);
	size_t i = strmap_slot(m, key, h);

	if (m->keys[i] == NULL) {
		if ((m->n + 1) * 2 > m->cap) {
			if (strmap_grow(m) != 0)
				return KILN_ENOMEM;
			i = strmap_slot(m, key, h);
		}
		m->keys[i] = key;
		m->hashes[i] = h;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}
