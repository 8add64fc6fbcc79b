// glob_match.c — matching a path against a compiled pattern (glob.h).
//
// Matching walks an alternative's segments against the path's with the
// two-pointer wildcard algorithm, DSTAR playing the star: on a mismatch,
// go back to just after the last DSTAR and let it swallow one more path
// segment. Keeping only the last DSTAR bounds the work by (pattern
// segments x path segments) segment tests, and is exact: an earlier DSTAR
// swallowing more only moves the segments between the two later, which
// never lets the later one match something it could not already. That
// stays true although a DSTAR may not swallow a dot-segment: a pattern
// segment only ever matches dot-segments (a leading literal '.') or only
// others, so the segments between two DSTARs cannot move across one. The
// same algorithm, with STAR and whole UTF-8 characters, matches inside a
// segment.
#include <stdint.h>
#include <string.h>

#include "glob_int.h"

// ---- matching ---------------------------------------------------------------

// Index just past the character starting at p[j] (a whole UTF-8 sequence).
static size_t
char_next(const unsigned char *p, size_t j, size_t n)
{
	if (p[j++] >= 0xc0)
		while (j < n && (p[j] & 0xc0) == 0x80)
			j++;
	return j;
}

// How many bytes op matches at p[j] (j < n); 0 when it does not match.
static size_t
op_step(const kiln_glob *g, unsigned op, const unsigned char *p, size_t j,
        size_t n)
{
	if (op < 256)
		return p[j] == op;
	if (op >= OP_CLASS) {
		const uint8_t *set = g->cls[op - OP_CLASS];
		if (!(set[p[j] >> 3] & (1u << (p[j] & 7))))
			return 0;
	}
	return char_next(p, j, n) - j;
}

// Whether ops op[0..nop) match all of p[0..n).
static int
ops_match(const kiln_glob *g, const uint16_t *op, size_t nop,
          const unsigned char *p, size_t n)
{
	size_t i = 0, j = 0, si = SIZE_MAX, sj = 0, step;

	while (j < n) {
		if (i < nop && op[i] == OP_STAR) {
			if ((si = ++i) == nop)
				return 1; // a final '*' takes the rest
			sj = j;
		} else if (i < nop && (step = op_step(g, op[i], p, j, n)) != 0) {
			i++;
			j += step;
		} else if (si != SIZE_MAX) {
			i = si;
			j = sj = char_next(p, sj, n);
		} else {
			return 0;
		}
	}
	while (i < nop && op[i] == OP_STAR)
		i++;
	return i == nop;
}

// Whether the literal ops op[0..n) are the bytes p[0..n).
static int
lit_eq(const uint16_t *op, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] != op[i])
			return 0;
	return 1;
}

// Whether segment s matches the path segment p[0..n), n > 0.
static int
seg_match(const kiln_glob *g, const struct seg *s, const char *p, size_t n)
{
	const uint16_t *op = g->ops + s->op;

	if (s->kind == SEG_LIT)
		return n == s->nop && lit_eq(op, p, n);
	if (p[0] == '.' && op[0] != '.')
		return 0; // a leading dot only matches a literal one
	if (s->ntail) { // "*.png": check ".png" at the end first
		size_t nlead = s->nop - s->ntail, m = n - s->ntail;
		if (n < s->ntail || !lit_eq(op + nlead, p + m, s->ntail))
			return 0;
		return ops_match(g, op, nlead, (const unsigned char *)p, m);
	}
	return ops_match(g, op, s->nop, (const unsigned char *)p, n);
}

// Length of the path segment at p.
static size_t
seg_len(const char *p)
{
	const char *e = strchrnul(p, '/');
	return (size_t)(e - p);
}

// Just past the path segment at p (and its '/').
static const char *
seg_next(const char *p)
{
	p += seg_len(p);
	return *p == '/' ? p + 1 : p;
}

// Whether alternative a, its first nskip segments taken as matched, matches
// the rest of the path, p.
static int
alt_match(const kiln_glob *g, const struct alt *a, const char *p)
{
	const struct seg *s = g->segs + a->seg + g->nskip;
	const struct seg *end = g->segs + a->seg + a->nseg;
	const struct seg *star = NULL; // just after the last DSTAR
	const char *starp = NULL;      // what that DSTAR would swallow next

	for (;;) {
		if (s < end && s->kind == SEG_DSTAR) {
			star = ++s;
			starp = p;
			continue;
		}
		if (*p == '\0')
			return s == end;
		size_t n = seg_len(p);
		if (s < end && seg_match(g, s, p, n)) {
			s++;
			p += n + (p[n] == '/');
			continue;
		}
		if (star == NULL || *starp == '.')
			return 0; // a DSTAR never swallows a dot-segment
		s = star;
		p = starp = seg_next(starp);
	}
}

// Whether path is well formed: not empty, and no empty, "." or ".."
// segment. *last is set to its last segment.
static int
path_ok(const char *p, const char **last)
{
	const char *s = p;

	for (;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		size_t n = (size_t)(p - s);
		if (n == 0 || (s[0] == '.' && (n == 1 || (n == 2 && s[1] == '.'))))
			return 0;
		if (*p == '\0') {
			*last = s;
			return 1;
		}
		s = p + 1;
	}
}

int
glob_match(const kiln_glob *g, const char *path)
{
	const char *last;

	if (g->literal)
		return strcmp(path, g->text) == 0;
	if (strncmp(path, g->prefix, g->nprefix) != 0 || !path_ok(path, &last))
		return 0;
	size_t nlast = strlen(last);
	for (size_t i = 0; i < g->nalt; i++) {
		const struct alt *a = &g->alt[i];
		const struct seg *s = g->segs + a->seg + a->nseg - 1;
		// Most paths fail on their last segment ("*.png" vs "x.ogg"):
		// when the alternative ends in a plain segment, try it first.
		if (s->kind != SEG_DSTAR && !seg_match(g, s, last, nlast))
			continue;
		if (alt_match(g, a, path + g->nprefix))
			return 1;
	}
	return 0;
}
