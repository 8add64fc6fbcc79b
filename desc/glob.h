// glob.h — path patterns of pattern rules and asset inputs.
//
// (This file, glob_int.h and glob_*.c use line comments: their examples
// hold "/*" and "*/", which a block comment cannot contain.)
//
// A pattern is matched against a relative, '/'-separated path, one segment
// (the text between slashes) at a time. Syntax:
//
//   *      any run of characters within a segment
//   ?      one character within a segment (a whole UTF-8 sequence)
//   [...]  one character of a class as in fnmatch(3): ranges, [!...] and
//          [^...] negate, [[:alpha:]] and friends; ASCII members only,
//          never '/', and it must be closed
//   **     as a whole segment only: any number of whole segments. At the
//          start or in the middle it may match none: "**/b" matches "b" and
//          "x/y/b", "a/**/b" matches "a/b". At the end it matches one or
//          more: "a/**" matches "a/x" and "a/x/y" but not "a" — it means
//          "everything inside a", as in .gitignore
//   {a,b}  alternatives, each of which may hold '/', wildcards and nested
//          braces; "{,x/}" allows an empty one. A ',' outside braces is a
//          plain character; braces and commas inside a class are members
//   \c     the character c itself (c may not be '/')
//
// Dotfiles: a segment starting with '.' is matched only by a pattern
// segment starting with a literal '.' (or "\."): '*', '?' and classes do
// not match its leading dot (fnmatch's FNM_PERIOD, per segment, as shells
// do), and '**' never matches such a segment. So "art/**/*.png" skips
// "art/.cache/x.png" and "art/.x.png", and "a/**" skips "a/b/.git", while
// "art/.cache/*.png" and "**/.keep" reach them.
//
// Matching is case-sensitive and otherwise byte-exact (no Unicode
// normalization), except that '?', a class and the end of a '*' always
// take whole UTF-8 characters. A brace with one alternative, "{a}", is
// just "a"; an unbalanced brace is an error, never a literal: write "\{".
//
// A path that is empty, starts or ends with '/', holds "//", or has a "."
// or ".." segment matches no pattern.
//
// Threads: a compiled kiln_glob is read-only; any number of threads may
// match against it at once.
#ifndef KILN_GLOB_H
#define KILN_GLOB_H

#include "kiln_error.h"

// Longest pattern accepted, in bytes (not counting the NUL).
#define KILN_GLOB_MAX 1024
// Most alternatives a pattern's braces may expand to.
#define KILN_GLOB_MAX_ALTS 64

typedef struct kiln_glob kiln_glob;

// Compile pattern into *g (NULL on failure). Returns 0, KILN_ENOMEM, or
// KILN_EINVAL when pattern is NULL or malformed: empty, longer than
// KILN_GLOB_MAX, a leading '/', an empty segment ("a//b", "a/"), a "." or
// ".." segment, '**' inside a segment ("a**", "***"), an unclosed or
// unopened brace, an unclosed class, a class with '/' or a non-ASCII
// member, "\/" or a trailing '\', or braces expanding to more than
// KILN_GLOB_MAX_ALTS alternatives. Each alternative is checked as a pattern
// of its own, so "{a,}" is refused: it holds an empty one. On KILN_EINVAL,
// *why (when why is not NULL) is set to a static message saying what is
// wrong. Compiling costs far more than matching: compile each rule once.
int glob_compile(const char *pattern, kiln_glob **g, const char **why);

// Free g and everything it owns; g may be NULL.
void glob_free(kiln_glob *g);

// 1 when path (relative, '/'-separated, no leading '/') matches g, else 0.
// Allocates nothing. Costs at most (pattern segments x path segments)
// segment tests per brace alternative whatever the pattern, so hostile
// ones like "**/x/**/x/**/y" stay cheap; typical patterns are linear in
// the path.
int glob_match(const kiln_glob *g, const char *path);

// The fixed leading folders of the pattern: the longest prefix ending in
// '/' with no wildcard, class or brace before it, escapes resolved; ""
// when there is none ("art/sprites/" for "art/sprites/**/*.png", "art/"
// for "art/a.png", "" for "{art,audio}/x"). A path not starting with it
// cannot match, which lets callers skip whole folders cheaply. Owned by g,
// valid until glob_free(g).
const char *glob_prefix(const kiln_glob *g);

// 1 when the pattern has no wildcard, class or brace (a plain path, maybe
// with escapes), else 0. Such a pattern matches exactly one path.
int glob_is_literal(const kiln_glob *g);

#endif
