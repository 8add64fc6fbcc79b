/* resolve_int.h — what the three files of resolving share: the state of
 * one resolve (struct rs), a step in the making (struct sb), and the
 * functions desc_resolve.c calls in resolve_tools.c and resolve_inputs.c.
 *
 *   desc_resolve.c   steps from rules and assets, profiles, the plan
 *   resolve_tools.c  ${...} scopes; tools' command lines and env expanded
 *   resolve_inputs.c inputs to source files or prerequisite steps
 *   resolve_bundles.c bundles, and the built-in step that packs each
 *
 * Private to desc/: nothing here outlives desc_resolve(). */
#ifndef KILN_RESOLVE_INT_H
#define KILN_RESOLVE_INT_H

#include <limits.h>

#include "desc_int.h"
#include "glob.h"
#include "strmap.h"

struct match {
	const char *path, *dir, *name, *ext, *file;
};

struct sb {
	kiln_step st;
	const char *toolname;
	kiln_loc tool_loc;
	const vec *decl_inputs; /* struct desc_input */
	const vec *decl_outputs;
	const char *source;     /* the matched file of a rule step */
	struct match m;
	int has_match;
	int dead;               /* replaced by an asset */
	const char *where;      /* "rules[2]", "assets[0]": field prefix */
	vec inputs, needs;      /* const char * */
	vec order;              /* kiln_input, as written (kiln_step.order) */
};

struct rs {
	const char *root;
	struct desc_file **files;
	size_t nfiles;
	const srcset *src;
	arena *a;   /* the plans: lives as long as the kiln_desc */
	arena *tmp; /* working data of resolving (steps in the making, the URL
	             * map, match fields): freed at the end, so the plans do
	             * not carry the scaffolding (docs/build.md, "Daemon
	             * memory") */
	diags *dg;
	const char *project;
	/* tools of every file, by name */
	struct strmap tools;
	vec toolv;     /* const kiln_tool * */
	vec toolnames; /* const char *, same order (for suggestions) */
	int *tool_reported; /* per tool: a template error was reported (once
	                     * for all profiles: the first profile is named) */
	int *tool_match;    /* per tool: tool_uses_match */
	size_t tool_index;  /* of the tool being expanded */
	/* rule globs, compiled once: globs[i] for the i-th rule over all files */
	kiln_glob **globs;
	/* per profile */
	const char *profile;
	vec vars; /* kiln_kv, nearest profile first */
	vec steps; /* struct sb */
	struct strmap urls;
	const char *const *profile_names;
	size_t nprofiles;
	size_t nassets; /* over all files */
	char realroot[PATH_MAX]; /* "" when it could not be resolved */
};

/* The last expansion, reusable by the next step of the same declaration. */
struct tool_memo {
	const kiln_tool *tool;
	const vec *decl; /* the rule's or asset's outputs: one per declaration */
	const char **argv;
	size_t nargv;
	kiln_kv *env;
};

/* ---- resolve_tools.c ---- */

/* Expand text in the scope of step s (NULL: no step, for URL and output
 * templates) with match fields m (NULL: none) and r's variables; with
 * tool_stage, the names the engine fills in (in, out, depfile) are kept as
 * written. NULL with *bad set to a message on an undefined variable or bad
 * syntax, or NULL alone when out of memory. The result lives in r->a. */
char *resolve_expand(struct rs *r, const struct sb *s, const struct match *m,
                     int tool_stage, const char *text, const char **bad);

/* 1 when a tool's templates use ${match.*}: then each step of a rule
 * expands differently; otherwise every step of one rule or asset gets the
 * same command line, expanded once (see resolve_tool_expand). */
int resolve_tool_uses_match(const kiln_tool *t);

/* Fill s->st.argv and env from its tool (s->st.tool, r->tool_index),
 * reusing memo's expansion when it is the same tool and declaration. A
 * template error is reported once per tool (*reported set), naming s. */
void resolve_tool_expand(struct rs *r, struct sb *s, int *reported,
                         struct tool_memo *memo);

/* ---- resolve_inputs.c ---- */

/* The first of the sorted source files not before prefix. */
size_t resolve_file_range(const srcset *src, const char *prefix);

/* One declared input of step s: files (s->inputs), or prerequisite steps
 * (s->needs), and each in its place in s->order; problems are
 * diagnostics in r->dg. */
void resolve_input(struct rs *r, struct sb *s, const struct desc_input *in);

/* s's inputs in written order, each once (at its first place), as a
 * plain array in r->a: for kiln_step.order. NULL only for none, or out
 * of memory. */
const kiln_input *resolve_order(struct rs *r, struct sb *s, size_t *n);

/* Sort and de-duplicate a vec of strings (in r->tmp) into a plain array
 * of just their count in r->a. NULL only for none, or out of memory. */
const char **resolve_sorted_unique(struct rs *r, vec *v, size_t *n);

/* ---- resolve_bundles.c ---- */

/* The bundles of every file, their patterns matched against the profile's
 * URL-sorted steps *steps (n of them), into plan->bundles, and one step
 * per bundle (URL bundles/<name>) merged into *steps, which is replaced
 * by a new URL-sorted array in r->a (*n grows). Problems are diagnostics.
 * 0 or KILN_ENOMEM. */
int resolve_bundles(struct rs *r, kiln_plan *plan, kiln_step **steps, size_t *n);

#endif
