/* arena.c — bump allocation for the description loader. A description
 * file's whole model lives in one arena, so replacing a file on reload is
 * one arena_free, and no field needs its own free. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desc_int.h"

#define CHUNK_MIN (64u << 10)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

void *
arena_alloc(arena *a, size_t size)
{
	void *p = arena_alloc_raw(a, size);

	if (p != NULL)
		memset(p, 0, size);
	return p;
}

void *
arena_alloc_raw(arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	size_t need = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	void *p;

	if (size > SIZE_MAX / 2) {
		a->failed = 1;
		return NULL;
	}
	if (c == NULL || c->cap - c->used < need) {
		size_t cap = need > CHUNK_MIN ? need : CHUNK_MIN;
		/* A big block gets a chunk of its own behind the current one,
		 * whose free tail small allocations go on using. */
		int aside = c != NULL && need > CHUNK_MIN / 4;
		if ((c = malloc(sizeof *c + cap)) == NULL) {
			a->failed = 1;
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		if (aside) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = (char *)c->data + c->used;
	c->used += need;
	return p;
}

char *
arena_strndup(arena *a, const char *s, size_t n)
{
	char *p = arena_alloc_raw(a, n + 1);

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *
arena_strdup(arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *
arena_printf(arena *a, const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (p = arena_alloc(a, (size_t)n + 1)) == NULL)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void
arena_free(arena *a)
{
	while (a->head != NULL) {
		struct arena_chunk *next = a->head->next;
		free(a->head);
		a->head = next;
	}
	a->failed = 0;
}

int
vec_reserve(arena *a, vec *v, size_t n)
{
	void *items;

	if (v->cap >= n)
		return 0;
	if ((items = arena_alloc_raw(a, n * v->size)) == NULL)
		return KILN_ENOMEM;
	if (v->n > 0)
		memcpy(items, v->items, v->n * v->size);
	v->items = items;
	v->cap = n;
	return 0;
}

void
vec_init(vec *v, size_t item_size)
{
	v->items = NULL;
	v->n = v->cap = 0;
	v->size = item_size;
}

void *
vec_push(arena *a, vec *v, const void *item)
{
	char *slot;

	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 8;
		void *items = arena_alloc_raw(a, cap * v->size);
		if (items == NULL)
			return NULL;
		if (v->n > 0)
			memcpy(items, v->items, v->n * v->size);
		v->items = items;
		v->cap = cap;
	}
	slot = (char *)v->items + v->n++ * v->size;
	memcpy(slot, item, v->size);
	return slot;
}

static int
str_order(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
vec_sort_unique_str(vec *v)
{
	const char **p = v->items;
	size_t w = 0;

	if (v->n > 1)
		qsort(p, v->n, sizeof *p, str_order);
	for (size_t i = 0; i < v->n; i++)
		if (w == 0 || strcmp(p[w - 1], p[i]) != 0)
			p[w++] = p[i];
	v->n = w;
}
