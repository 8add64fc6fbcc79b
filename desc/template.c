/* template.c — "${name}" expansion in tool command lines, URLs, output
 * names and env values.
 *
 * A variable is ${name}, where name is letters, digits and "_.-", optionally
 * ending in "..." (a list spread into several argv items; only the engine
 * expands those). "$${" writes a literal "${"; any other '$' is literal, so
 * shell commands keep their own $VARS. Names the build engine fills in
 * later (in, out, depfile) are "deferred": kept exactly as written.
 *
 * In a shell tool's command line (tmpl_scope.vals) no value is written
 * into the text: a shell would parse it, and a file named "$(touch x)"
 * would run a command. The value goes into a list instead and the text
 * gets a reference the engine makes a positional parameter of. */
#include <stdio.h>
#include <string.h>

#include "desc_int.h"

static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* Append n bytes to the growing output. Returns 0 or KILN_ENOMEM. */
static int
out_put(arena *a, char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*len + n + 1) * 2;
		char *nb = arena_alloc_raw(a, ncap);
		if (nb == NULL)
			return KILN_ENOMEM;
		if (*len > 0)
			memcpy(nb, *buf, *len);
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* Append v to vals and write its reference "${@K}". Returns 0 or
 * KILN_ENOMEM. */
static int
val_ref(arena *a, tmpl_vals *vals, const char *v, char **buf, size_t *len,
        size_t *cap)
{
	char ref[32];
	int n;

	if (vals->n == vals->cap) {
		size_t ncap = vals->cap ? vals->cap * 2 : 8;
		const char **nv = arena_alloc_raw(a, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		if (vals->n > 0)
			memcpy(nv, vals->v, vals->n * sizeof *nv);
		vals->v = nv;
		vals->cap = ncap;
	}
	/* a copy: a match field may live in a shorter arena than the step */
	if ((vals->v[vals->n] = arena_strndup(a, v, strlen(v))) == NULL)
		return KILN_ENOMEM;
	vals->n++;
	n = snprintf(ref, sizeof ref, "${@%zu}", vals->n);
	return out_put(a, buf, len, cap, ref, (size_t)n);
}

char *
tmpl_expand(arena *a, const char *text, const tmpl_scope *sc, const char **bad)
{
	char scratch[512], *buf = scratch;
	size_t len = 0, cap = sizeof scratch;
	const char *p = text;

	*bad = NULL;
	scratch[0] = '\0';
	/* Most templates are plain text: nothing to copy. The text outlives
	 * the result (both belong to the same kiln_desc). */
	if (strchr(text, '$') == NULL)
		return (char *)text;
	while (*p != '\0') {
		const char *d = strchr(p, '$'), *name, *end, *val;
		size_t nlen;
		if (d == NULL)
			d = p + strlen(p);
		if (out_put(a, &buf, &len, &cap, p, (size_t)(d - p)) != 0)
			return NULL;
		if (*d == '\0')
			break;
		if (d[1] == '$' && d[2] == '{') {
			/* the engine unescapes it in a shell line, after its own
			 * ${...} are replaced: it must still tell them apart */
			const char *esc = sc->vals ? "$${" : "${";
			if (out_put(a, &buf, &len, &cap, esc, strlen(esc)) != 0)
				return NULL;
			p = d + 3;
			continue;
		}
		if (d[1] != '{') {
			if (out_put(a, &buf, &len, &cap, "$", 1) != 0)
				return NULL;
			p = d + 1;
			continue;
		}
		name = d + 2;
		for (end = name; name_char(*end); end++)
			;
		nlen = (size_t)(end - name);
		if (*end != '}' || nlen == 0) {
			*bad = arena_printf(a, "malformed variable at '%.20s' (expected "
			                    "${name} with letters, digits, '_', '.', '-')", d);
			return NULL;
		}
		if (sc->deferred != NULL && sc->deferred(name, nlen, sc->arg)) {
			val = d;
			nlen = (size_t)(end + 1 - d);
		} else if ((val = sc->lookup(name, nlen, sc->arg)) != NULL) {
			nlen = strlen(val);
			if (sc->vals != NULL) {
				if (val_ref(a, sc->vals, val, &buf, &len, &cap) != 0)
					return NULL;
				p = end + 1;
				continue;
			}
		} else {
			*bad = arena_printf(a, "undefined variable '${%.*s}'", (int)nlen, name);
			return NULL;
		}
		if (out_put(a, &buf, &len, &cap, val, nlen) != 0)
			return NULL;
		p = end + 1;
	}
	return arena_strndup(a, buf, len);
}
