/* probe_words.h — a run's command-line words, to tell a tool's probes of
 * its own arguments from lookups of project files (probe_words.c;
 * docs/build.md, "Discovered paths"). */
#ifndef KILND_PROBE_WORDS_H
#define KILND_PROBE_WORDS_H

#include <stddef.h>

/* The words of one run's command line: its argv, or for a shell tool the
 * words of its script (split where a plain command splits) and its
 * positional values. prog[i] says whether v[i] is in a command's first
 * place (a program's name). */
struct probe_words {
	char **v;
	unsigned char *prog;
	size_t n;
};

/* Make pw from the argv a run is spawned with (argc words; shell: it is
 * /bin/sh -c SCRIPT sh V1 ...). Replaces what pw held. 0 or KILN_ENOMEM
 * (pw then empty). */
int probe_words_make(struct probe_words *pw, char *const *argv, size_t argc, int shell);

void probe_words_free(struct probe_words *pw);

/* Whether a missing lookup of rel (project-relative, clean) is the tool
 * probing its own command line rather than looking for a project file: 1
 * when rel is a word that cannot be a path the tool was pointed at (an
 * option "-x", a word with ':' or '=', a program's name) or a piece of a
 * word (its last '/' component, the name before its first ':', the text
 * after it, its file name's extension), unless rel is also a word by
 * itself that is a plain path. */
int probe_words_noise(const struct probe_words *pw, const char *rel);

#endif
