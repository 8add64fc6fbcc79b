/* depfile.c — make-style depfiles (see depfile.h).
 *
 * A depfile is words: a word ends at unescaped whitespace; "\ " is a
 * space inside a word, "\#" a '#', "$$" a '$', and a backslash before a
 * line end joins the lines. A word ending in ':' (or a lone ':') ends the
 * targets of a rule; the words after it up to the next unjoined line end
 * are its prerequisites. Windows drive letters ("c:\x") are not expected
 * on this platform. */
#include <stdlib.h>
#include <string.h>

#include "depfile.h"
#include "kiln_error.h"

struct words {
	char **v;
	size_t n, cap;
};

static int
add(struct words *w, const char *s, size_t len)
{
	char *p;

	for (size_t i = 0; i < w->n; i++)
		if (strlen(w->v[i]) == len && memcmp(w->v[i], s, len) == 0)
			return 0;
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 16;
		char **nv = realloc(w->v, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		w->v = nv;
		w->cap = ncap;
	}
	if ((p = malloc(len + 1)) == NULL)
		return KILN_ENOMEM;
	memcpy(p, s, len);
	p[len] = '\0';
	w->v[w->n++] = p;
	return 0;
}

int
depfile_parse(const char *buf, size_t len, char ***paths, size_t *n)
{
	struct words out = {0};
	char *word = malloc(len + 1);
	size_t i = 0, wl = 0;
	int in_prereqs = 0, rv = 0, seen_rule = 0;

	if (word == NULL)
		return KILN_ENOMEM;
	while (i <= len && rv == 0) {
		char c = i < len ? buf[i] : '\n';
		if (c == '\\' && i + 1 < len) {
			char d = buf[i + 1];
			if (d == '\n' || (d == '\r' && i + 2 < len && buf[i + 2] == '\n')) {
				i += d == '\n' ? 2 : 3;   /* a joined line: a separator */
				c = ' ';
				goto sep;
			}
			if (d == ' ' || d == '#' || d == '\\') {
				word[wl++] = d;
				i += 2;
				continue;
			}
		}
		if (c == '$' && i + 1 < len && buf[i + 1] == '$') {
			word[wl++] = '$';
			i += 2;
			continue;
		}
		i++;
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			word[wl++] = c;
			continue;
		}
sep:
		if (wl > 0) {
			if (!in_prereqs && word[wl - 1] == ':') {
				in_prereqs = 1;   /* "target:" or a lone ":" */
				seen_rule = 1;
			} else if (in_prereqs) {
				rv = add(&out, word, wl);
			}
			wl = 0;
		}
		if (c == '\n')
			in_prereqs = 0;
	}
	free(word);
	if (rv == 0 && !seen_rule && len > 0) {
		for (size_t k = 0; k < len; k++)
			if (buf[k] != ' ' && buf[k] != '\n' && buf[k] != '\t' && buf[k] != '\r')
				rv = KILN_EINVAL;
	}
	if (rv != 0) {
		depfile_free(out.v, out.n);
		return rv;
	}
	*paths = out.v;
	*n = out.n;
	return 0;
}

void
depfile_free(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}
