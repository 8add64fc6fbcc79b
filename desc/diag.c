/* diag.c — collecting the loader's diagnostics, and "did you mean". */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "desc_int.h"

void
diags_init(diags *d, arena *a)
{
	d->a = a;
	vec_init(&d->list, sizeof(kiln_diag));
	d->nerrors = 0;
}

void
diag_add(diags *d, enum kiln_diag_level level, kiln_loc loc, const char *field,
         const char *fmt, ...)
{
	kiln_diag g = {level, loc, field ? field : "", NULL};
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	g.msg = arena_strdup(d->a, buf);
	g.field = arena_strdup(d->a, g.field);
	if (g.loc.file != NULL)
		g.loc.file = arena_strdup(d->a, g.loc.file);
	if (g.msg == NULL || g.field == NULL || vec_push(d->a, &d->list, &g) == NULL)
		return; /* a->failed tells the caller */
	if (level == KILN_DIAG_ERROR)
		d->nerrors++;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), capped:
 * anything above cap returns cap + 1. */
static size_t
distance(const char *a, const char *b, size_t cap)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[3][65];

	if (la > 64 || lb > 64)
		return cap + 1;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *cur = d[i % 3], *prev = d[(i + 2) % 3], *prev2 = d[(i + 1) % 3];
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			size_t best = sub < del ? sub : del;
			best = best < ins ? best : ins;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
	}
	return d[la % 3][lb] > cap ? cap + 1 : d[la % 3][lb];
}

const char *
diag_suggest(const char *word, const char *const *cand, size_t n)
{
	size_t len = strlen(word), cap = len <= 3 ? 1 : len <= 6 ? 2 : 3;
	const char *best = NULL;
	size_t bestd = cap + 1;

	for (size_t i = 0; i < n; i++) {
		size_t dd = distance(word, cand[i], cap);
		if (dd < bestd) {
			bestd = dd;
			best = cand[i];
		}
	}
	return best;
}
