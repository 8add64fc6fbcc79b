// glob_compile.c — compiling path patterns (glob.h) into kiln_glob.
//
// Compiling checks the pattern's syntax once, linking each '{' and ',' to
// the next ',' or '}' of its group and each '[' to the end of its class;
// expands the braces by walking those links into at most
// KILN_GLOB_MAX_ALTS alternatives; and splits each alternative into
// segments of ops: a literal byte, ANY ('?'), STAR ('*') or CLASS (a
// 256-bit set, filled by asking fnmatch(3) about every ASCII byte, so
// classes mean exactly what fnmatch says). A "**" segment becomes DSTAR;
// runs of them merge, and a trailing one becomes "*" then DSTAR, which is
// "one or more segments".
//
// Also glob_free and the accessors of the compiled form (glob_int.h),
// which glob_match.c matches paths against.
#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "glob_int.h"

// State of one glob_compile.
struct comp {
	kiln_glob *g;
	const char *pat;
	const char *why;
	uint16_t link[KILN_GLOB_MAX + 1]; // '{' and ',': next ',' or '}' of the
	                                  // group; '[': just past its ']'
	uint16_t open[KILN_GLOB_MAX];     // per open group: its last '{' or ','
	char buf[KILN_GLOB_MAX + 1];      // the alternative being expanded
};

// Where expansion resumes after the current alternative: just past the
// '}' of its group, then the continuation of the group around that.
struct cont {
	size_t at;
	const struct cont *up;
};

static int
bad(struct comp *c, const char *why)
{
	c->why = why;
	return KILN_EINVAL;
}

// p with room for need elements of size bytes, *cap doubling as needed;
// NULL when out of memory (p is then untouched).
static void *
grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;

	if (need <= *cap)
		return p;
	while (n < need)
		n *= 2;
	if ((p = realloc(p, n * size)) != NULL)
		*cap = n;
	return p;
}

// ---- syntax ---------------------------------------------------------------

// Whether [s, e) names a POSIX character class.
static int
class_name_ok(const char *s, const char *e)
{
	static const char *const names[] = {
		"alnum", "alpha", "blank", "cntrl", "digit", "graph",
		"lower", "print", "punct", "space", "upper", "xdigit",
	};
	size_t n = (size_t)(e - s);

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
			return 1;
	return 0;
}

// Index of the ']' closing the class that opens at p[0] == '[', or 0 with
// *why set.
static size_t
class_end(const char *p, const char **why)
{
	size_t i = 1;

	if (p[i] == '!' || p[i] == '^')
		i++;
	if (p[i] == ']')
		i++; // a ']' first is a member
	for (; p[i] != ']'; i++) {
		if (p[i] == '\0') {
			*why = "'[' without ']'";
			return 0;
		}
		if (p[i] == '\\' && p[i + 1] != '\0') {
			i++;
		} else if (p[i] == '[' && p[i + 1] && strchr(":.=", p[i + 1])) {
			const char *e = p + i + 2;
			while (*e && !(e[0] == p[i + 1] && e[1] == ']'))
				e++;
			if (*e == '\0') {
				*why = "'[:', '[.' or '[=' without its end";
				return 0;
			}
			if (p[i + 1] == ':' && !class_name_ok(p + i + 2, e)) {
				*why = "unknown name in '[:name:]'";
				return 0;
			}
			i = (size_t)(e + 1 - p);
		}
	}
	return i;
}

// Length of the class opening at p[0] == '[' (through its ']'), or 0 with
// *why set when it is not closed or holds '/' or a non-ASCII byte.
static size_t
class_len(const char *p, const char **why)
{
	size_t end = class_end(p, why);

	for (size_t i = 0; i < end; i++) {
		if (p[i] == '/') {
			*why = "'/' in a character class";
			return 0;
		}
		if ((unsigned char)p[i] >= 0x80) {
			*why = "non-ASCII character in a character class";
			return 0;
		}
	}
	return end ? end + 1 : 0;
}

// Check escapes, classes and braces of c->pat (len bytes), filling c->link.
static int
syntax_check(struct comp *c, size_t len)
{
	const char *p = c->pat;
	size_t depth = 0, n;

	for (size_t i = 0; i < len; i++) {
		switch (p[i]) {
		case '\\':
			if (p[i + 1] == '\0')
				return bad(c, "trailing '\\'");
			if (p[i + 1] == '/')
				return bad(c, "'\\/' (a '/' always separates)");
			i++;
			break;
		case '[':
			if ((n = class_len(p + i, &c->why)) == 0)
				return KILN_EINVAL;
			c->link[i] = (uint16_t)(i + n);
			i += n - 1;
			break;
		case '{':
			c->open[depth++] = (uint16_t)i;
			break;
		case ',': // a plain character outside braces
			if (depth > 0) {
				c->link[c->open[depth - 1]] = (uint16_t)i;
				c->open[depth - 1] = (uint16_t)i;
			}
			break;
		case '}':
			if (depth == 0)
				return bad(c, "'}' without '{'");
			c->link[c->open[--depth]] = (uint16_t)i;
			break;
		}
	}
	return depth ? bad(c, "'{' without '}'") : 0;
}

// ---- one alternative --------------------------------------------------------

// The index of a class with set, adding it when new.
static int
class_add(kiln_glob *g, const uint8_t set[32], size_t *idx)
{
	void *q;

	for (*idx = 0; *idx < g->ncls; (*idx)++)
		if (memcmp(g->cls[*idx], set, 32) == 0)
			return 0;
	if ((q = grow(g->cls, &g->capcls, g->ncls + 1, 32)) == NULL)
		return KILN_ENOMEM;
	g->cls = q;
	memcpy(g->cls[g->ncls++], set, 32);
	return 0;
}

// The op for the class p[0..n): the ASCII bytes fnmatch puts in it, and all
// others when it is negated; never '/'.
static int
class_op(struct comp *c, const char *p, size_t n, uint16_t *op)
{
	char pat[KILN_GLOB_MAX + 1];
	uint8_t set[32] = {0};
	size_t idx;
	int rv;

	memcpy(pat, p, n);
	pat[n] = '\0';
	for (int ch = 1; ch < 0x80; ch++) {
		char s[2] = {(char)ch, '\0'};
		if ((rv = fnmatch(pat, s, 0)) == 0)
			set[ch >> 3] |= (uint8_t)(1u << (ch & 7));
		else if (rv != FNM_NOMATCH)
			return bad(c, "malformed character class");
	}
	if (p[1] == '!' || p[1] == '^')
		memset(set + 16, 0xff, 16);
	set['/' >> 3] &= (uint8_t) ~(1u << ('/' & 7));
	if ((rv = class_add(c->g, set, &idx)) != 0)
		return rv;
	*op = (uint16_t)(OP_CLASS + idx);
	return 0;
}

// Append the ops of segment p[0..n) (not "**") to g->ops; *lit is set to
// whether they are all literal bytes.
static int
seg_ops(struct comp *c, const char *p, size_t n, int *lit)
{
	kiln_glob *g = c->g;
	void *q;
	int rv;

	*lit = 1;
	for (size_t i = 0; i < n; i++) {
		uint16_t op = (unsigned char)p[i];
		if ((q = grow(g->ops, &g->capops, g->nops + 1, 2)) == NULL)
			return KILN_ENOMEM;
		g->ops = q;
		if (p[i] == '\\') {
			op = (unsigned char)p[++i];
		} else if (p[i] == '*') {
			if (i + 1 < n && p[i + 1] == '*')
				return bad(c, "'**' inside a segment");
			op = OP_STAR;
		} else if (p[i] == '?') {
			op = OP_ANY;
		} else if (p[i] == '[') {
			size_t len = class_len(p + i, &c->why);
			if ((rv = class_op(c, p + i, len, &op)) != 0)
				return rv;
			i += len - 1;
		}
		*lit &= op < 256;
		g->ops[g->nops++] = op;
	}
	return 0;
}

// How many literal ops end o[0..n) right after its last STAR; 0 when
// something else follows that STAR.
static uint16_t
seg_tail(const uint16_t *o, size_t n)
{
	size_t t = 0;

	while (t < n && o[n - t - 1] < 256)
		t++;
	return t < n && o[n - t - 1] == OP_STAR ? (uint16_t)t : 0;
}

// Append segment p[0..n) of the alternative that starts at segs[first].
static int
seg_add(struct comp *c, size_t first, const char *p, size_t n)
{
	kiln_glob *g = c->g;
	struct seg s = {.op = (uint32_t)g->nops, .kind = SEG_DSTAR};
	void *q;
	int rv, lit;

	if (n == 0)
		return bad(c, "empty segment (a trailing '/' or '//')");
	if (n == 2 && p[0] == '*' && p[1] == '*') {
		if (g->nseg > first && g->segs[g->nseg - 1].kind == SEG_DSTAR)
			return 0; // "**/**" is "**"
	} else {
		if ((rv = seg_ops(c, p, n, &lit)) != 0)
			return rv;
		s.nop = (uint16_t)(g->nops - s.op);
		s.kind = lit ? SEG_LIT : SEG_WILD;
		const uint16_t *o = g->ops + s.op;
		s.ntail = lit ? 0 : seg_tail(o, s.nop);
		if (lit && o[0] == '.' &&
		    (s.nop == 1 || (s.nop == 2 && o[1] == '.')))
			return bad(c, "'.' or '..' segment");
	}
	if ((q = grow(g->segs, &g->capseg, g->nseg + 1, sizeof s)) == NULL)
		return KILN_ENOMEM;
	g->segs = q;
	g->segs[g->nseg++] = s;
	return 0;
}

// A trailing DSTAR matches one or more segments: put a "*" before it.
static int
dstar_trailing(struct comp *c, size_t first)
{
	kiln_glob *g = c->g;
	int rv;

	if (g->nseg == first || g->segs[g->nseg - 1].kind != SEG_DSTAR)
		return 0;
	g->nseg--;
	if ((rv = seg_add(c, first, "*", 1)) != 0)
		return rv;
	return seg_add(c, first, "**", 2);
}

// Compile c->buf[0..len), one expansion of the braces, as an alternative.
static int
alt_add(struct comp *c, size_t len)
{
	kiln_glob *g = c->g;
	const char *p = c->buf;
	size_t first = g->nseg, s = 0;
	int rv;

	if (g->nalt == KILN_GLOB_MAX_ALTS)
		return bad(c, "braces expand to more than 64 alternatives");
	if (len == 0)
		return bad(c, "empty pattern (or empty brace alternative)");
	if (p[0] == '/')
		return bad(c, "leading '/'");
	c->buf[len] = '\0';
	// No '/' is escaped or inside a class (syntax_check), so each one
	// separates segments.
	for (size_t i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		if ((rv = seg_add(c, first, p + s, i - s)) != 0)
			return rv;
		s = i + 1;
	}
	if ((rv = dstar_trailing(c, first)) != 0)
		return rv;
	g->alt[g->nalt].seg = (uint32_t)first;
	g->alt[g->nalt++].nseg = (uint32_t)(g->nseg - first);
	return 0;
}

// ---- braces -----------------------------------------------------------------

static int expand_group(struct comp *c, size_t open, const struct cont *k,
                        size_t olen);

// Expand c->pat from i, c->buf[0..olen) already written, then go on at k.
static int
expand(struct comp *c, size_t i, const struct cont *k, size_t olen)
{
	const char *p = c->pat;

	for (;;) {
		size_t n = 1;
		if (p[i] == '\0')
			return alt_add(c, olen);
		if (p[i] == '{')
			return expand_group(c, i, k, olen);
		if ((p[i] == ',' || p[i] == '}') && k != NULL) {
			i = k->at;
			k = k->up;
			continue;
		}
		if (p[i] == '\\')
			n = 2;
		else if (p[i] == '[')
			n = c->link[i] - i;
		memcpy(c->buf + olen, p + i, n);
		olen += n;
		i += n;
	}
}

// Expand each alternative of the group opening at c->pat[open].
static int
expand_group(struct comp *c, size_t open, const struct cont *k, size_t olen)
{
	size_t end = open;
	int rv;

	while (c->pat[end] != '}')
		end = c->link[end];
	struct cont after = {end + 1, k};
	for (size_t a = open; a != end; a = c->link[a])
		if ((rv = expand(c, a + 1, &after, olen)) != 0)
			return rv;
	return 0;
}

// ---- prefix -----------------------------------------------------------------

// p[0..n) with escapes resolved, in a new string.
static char *
unescape(const char *p, size_t n, size_t *len)
{
	char *s = malloc(n + 1);

	*len = 0;
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\\')
			i++;
		s[(*len)++] = p[i];
	}
	s[*len] = '\0';
	return s;
}

// Set g's prefix, nskip, literal and text from pattern.
static int
prefix_init(kiln_glob *g, const char *p)
{
	size_t i, cut = 0, n;

	for (i = 0; p[i] != '\0' && !strchr("*?[{", p[i]); i++) {
		if (p[i] == '\\') {
			i++;
		} else if (p[i] == '/') {
			cut = i + 1;
			g->nskip++;
		}
	}
	g->literal = p[i] == '\0';
	if ((g->prefix = unescape(p, cut, &g->nprefix)) == NULL)
		return KILN_ENOMEM;
	if (g->literal && (g->text = unescape(p, i, &n)) == NULL)
		return KILN_ENOMEM;
	return 0;
}

// ---- API --------------------------------------------------------------------

int
glob_compile(const char *pattern, kiln_glob **gp, const char **why)
{
	struct comp *c = NULL;
	size_t len;
	int rv = KILN_EINVAL;

	if (why)
		*why = NULL;
	if (gp == NULL)
		return KILN_EINVAL;
	*gp = NULL;
	if ((c = calloc(1, sizeof *c)) == NULL)
		return KILN_ENOMEM;
	c->pat = pattern;
	if (pattern == NULL) {
		rv = bad(c, "no pattern");
		goto fail;
	}
	len = strnlen(pattern, KILN_GLOB_MAX + 1);
	if (len == 0 || len > KILN_GLOB_MAX) {
		rv = bad(c, len ? "longer than 1024 bytes" : "empty pattern");
		goto fail;
	}
	if ((rv = syntax_check(c, len)) != 0)
		goto fail;
	rv = KILN_ENOMEM;
	if ((c->g = calloc(1, sizeof *c->g)) == NULL)
		goto fail;
	if ((rv = prefix_init(c->g, pattern)) != 0)
		goto fail;
	if ((rv = expand(c, 0, NULL, 0)) != 0)
		goto fail;
	*gp = c->g;
	free(c);
	return 0;
fail:
	if (why && rv == KILN_EINVAL)
		*why = c->why;
	glob_free(c->g);
	free(c);
	return rv;
}

void
glob_free(kiln_glob *g)
{
	if (g == NULL)
		return;
	free(g->prefix);
	free(g->text);
	free(g->segs);
	free(g->ops);
	free(g->cls);
	free(g);
}

const char *
glob_prefix(const kiln_glob *g)
{
	return g->prefix;
}

int
glob_is_literal(const kiln_glob *g)
{
	return g->literal;
}
