/* probe_words.c — which missing lookups are a tool looking at its own
 * command line, not for a project file (probe_words.h; docs/build.md,
 * "Discovered paths").
 *
 * ImageMagick's convert, before it parses its arguments, asks whether
 * each could be a file in its working folder (the project root): given
 * `art/hero.png -strip png32:.kiln/scratch/<run>/1/hero.png` it looks up
 * `convert`, `hero.png`, `-strip`, the prefixed word whole, and `png`
 * (its coder's name, from the extension). None of those is a file the
 * step uses: creating one changes nothing, and the scratch part changes
 * with every daemon run. A missing project file the tool was pointed at
 * (`tool -c optional.cfg`, optional.cfg not there yet) is a real
 * dependency: a plain word never counts as a probe.
 *
 * Threads: no shared state; a node's words belong to its worker. */
#include <stdlib.h>
#include <string.h>

#include "kiln_error.h"
#include "probe_words.h"

void
probe_words_free(struct probe_words *pw)
{
	for (size_t i = 0; i < pw->n; i++)
		free(pw->v[i]);
	free(pw->v);
	free(pw->prog);
	memset(pw, 0, sizeof *pw);
}

/* Append word (len bytes), prog: in a command's first place. */
static int
word_add(struct probe_words *pw, size_t *cap, const char *word, size_t len, int prog)
{
	if (len == 0)
		return 0;
	if (pw->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		char **nv = realloc(pw->v, ncap * sizeof *nv);
		unsigned char *np;
		if (nv == NULL)
			return KILN_ENOMEM;
		pw->v = nv;
		if ((np = realloc(pw->prog, ncap)) == NULL)
			return KILN_ENOMEM;
		pw->prog = np;
		*cap = ncap;
	}
	if ((pw->v[pw->n] = strndup(word, len)) == NULL)
		return KILN_ENOMEM;
	pw->prog[pw->n++] = (unsigned char)prog;
	return 0;
}

/* A shell script's words, split where a plain command splits (blanks,
 * quotes, operators; no expansions: a guess, which only decides what is
 * left out). A word after an operator, or first, names a program. */
static int
script_words(struct probe_words *pw, size_t *cap, const char *s)
{
	int first = 1, rv = 0;

	while (*s != '\0' && rv == 0) {
		size_t l = strcspn(s, " \t\n;|&<>()'\"`");
		if (l > 0) {
			rv = word_add(pw, cap, s, l, first);
			first = 0;
			s += l;
			continue;
		}
		if (strchr(";|&(`\n", *s) != NULL)
			first = 1;
		s++;
	}
	return rv;
}

int
probe_words_make(struct probe_words *pw, char *const *argv, size_t argc, int shell)
{
	size_t cap = 0;
	int rv = 0;

	probe_words_free(pw);
	if (shell && argc >= 3) {
		rv = script_words(pw, &cap, argv[2]);
		for (size_t i = 4; i < argc && rv == 0; i++)   /* $1...: values */
			rv = word_add(pw, &cap, argv[i], strlen(argv[i]), 0);
	} else {
		for (size_t i = 0; i < argc && rv == 0; i++)
			rv = word_add(pw, &cap, argv[i], strlen(argv[i]), i == 0);
	}
	if (rv != 0)
		probe_words_free(pw);
	return rv;
}

/* w without its leading "./"s: the name a lookup relative to the root
 * gives. */
static const char *
bare(const char *w)
{
	while (w[0] == '.' && w[1] == '/')
		w += 2;
	return w;
}

/* Whether word (in a program's place: prog) cannot be a path the tool was
 * pointed at: an option, a prefixed or assigned word, a program's name
 * (found on PATH, not in the working folder: it has no '/'). */
static int
not_a_path(const char *w, int prog)
{
	return w[0] == '-' || strchr(w, ':') != NULL || strchr(w, '=') != NULL ||
	       (prog && strchr(w, '/') == NULL);
}

/* Whether rel equals s's first len bytes. */
static int
is(const char *rel, const char *s, size_t len)
{
	return len > 0 && strlen(rel) == len && strncmp(rel, s, len) == 0;
}

/* Whether rel is word w itself (not a path) or a piece of it. */
static int
derived(const char *rel, const char *w, int prog)
{
	const char *colon = strchr(w, ':'), *slash = strrchr(w, '/'), *base, *dot;

	if (strcmp(rel, bare(w)) == 0)
		return not_a_path(w, prog);
	if (w[0] == '-' && strchr(w, '=') == NULL && strchr(w, ':') == NULL)
		return 0;   /* "-o3": no pieces */
	base = slash != NULL ? slash + 1 : w;
	if (slash != NULL && strcmp(rel, base) == 0)
		return 1;
	/* "PREFIX:REST", the prefix without a '/' (png32:out.png) */
	if (colon != NULL && memchr(w, '/', (size_t)(colon - w)) == NULL &&
	    (is(rel, w, (size_t)(colon - w)) || strcmp(rel, bare(colon + 1)) == 0))
		return 1;
	if ((dot = strrchr(base, '.')) != NULL && dot > base && strcmp(rel, dot + 1) == 0 &&
	    w[0] != '-')
		return 1;
	return 0;
}

int
probe_words_noise(const struct probe_words *pw, const char *rel)
{
	int piece = 0;

	if (rel[0] == '\0')
		return 0;
	for (size_t i = 0; i < pw->n; i++) {
		const char *w = pw->v[i];
		/* a plain word naming it: the tool was pointed at it */
		if (strcmp(rel, bare(w)) == 0 && !not_a_path(w, pw->prog[i]))
			return 0;
		if (!piece && derived(rel, w, pw->prog[i]))
			piece = 1;
	}
	return piece;
}
