/* count_check.c — kiln build's check of its summary against its step
 * events (count_check.h). Steps are few enough per build for a sorted
 * array; a testing aid, so clarity over speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "count_check.h"

void
count_check_init(struct count_check *c)
{
	const char *v = getenv("KILN_CHECK_COUNTS");

	memset(c, 0, sizeof *c);
	c->on = v != NULL && strcmp(v, "1") == 0;
}

void
count_check_free(struct count_check *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].key);
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}

/* The index of key in c->v, or where it goes (*found 0). */
static size_t
step_find(const struct count_check *c, const char *key, int *found)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(c->v[mid].key, key);
		if (cmp == 0) {
			*found = 1;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

void
count_check_step(struct count_check *c, const kiln_step_event *s)
{
	size_t len, at;
	char *key;
	int found;

	if (!c->on || c->nomem)
		return;
	len = strlen(s->profile) + strlen(s->url) + 2;
	if ((key = malloc(len)) == NULL) {
		c->nomem = 1;
		return;
	}
	snprintf(key, len, "%s\n%s", s->profile, s->url);
	at = step_find(c, key, &found);
	if (found) {
		c->v[at].result = s->result;
		free(key);
		return;
	}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 64;
		struct count_step *nv = realloc(c->v, ncap * sizeof *nv);
		if (nv == NULL) {
			free(key);
			c->nomem = 1;
			return;
		}
		c->v = nv;
		c->cap = ncap;
	}
	memmove(&c->v[at + 1], &c->v[at], (c->n - at) * sizeof *c->v);
	c->v[at].key = key;
	c->v[at].result = s->result;
	c->n++;
}

void
count_check_lost(struct count_check *c)
{
	c->lost = 1;
}

int
count_check_summary(const struct count_check *c, const kiln_build_summary *b,
                    char *why, size_t whylen)
{
	uint32_t seen[KILN_STEP_WOULD_RUN + 1] = {0};

	if (!c->on || c->lost || c->nomem || strcmp(b->error, "cancelled") == 0)
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if ((unsigned)c->v[i].result <= KILN_STEP_WOULD_RUN)
			seen[c->v[i].result]++;
	if (seen[KILN_STEP_RAN] == b->ran && seen[KILN_STEP_FAILED] == b->failed &&
	    seen[KILN_STEP_SKIPPED] == b->skipped &&
	    seen[KILN_STEP_WOULD_RUN] == b->would_run &&
	    seen[KILN_STEP_REUSED] <= b->reused && c->n <= b->total)
		return 0;
	snprintf(why, whylen, "KILN_CHECK_COUNTS: build %llu's summary does not count "
	         "what its step events said: summary ran %u, reused (or up to date) "
	         "%u, failed %u, skipped %u, would run %u of %u steps; events (each "
	         "step's last) ran %u, reused %u, failed %u, skipped %u, would run %u, "
	         "cancelled %u of %zu steps", (unsigned long long)b->build, b->ran,
	         b->reused, b->failed, b->skipped, b->would_run, b->total,
	         seen[KILN_STEP_RAN], seen[KILN_STEP_REUSED], seen[KILN_STEP_FAILED],
	         seen[KILN_STEP_SKIPPED], seen[KILN_STEP_WOULD_RUN],
	         seen[KILN_STEP_CANCELLED], c->n);
	return -1;
}
