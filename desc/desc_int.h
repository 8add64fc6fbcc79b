/* desc_int.h — what the description loader's modules share.
 *
 *   glob_compile.c, glob_match.c  path patterns (glob.h; glob_int.h is
 *                  their compiled form)
 *   arena.c        bump allocation; one arena per file and one per plan set
 *   yaml_tree.c    libyaml events -> node tree (the only file including
 *                  yaml.h), with size, depth and alias bounds
 *   diag.c         collecting diagnostics; "did you mean" suggestions
 *   desc_load.c    one file: node tree -> struct desc_file, and the
 *                  readers of typed values (load_int.h)
 *   desc_fields.c  the YAML field tables: every known key and its parser
 *   template.c     ${...} expansion and checking
 *   srcwalk.c      the list of files under the source folders
 *   desc_resolve.c files + sources -> one kiln_plan per profile, with
 *                  resolve_tools.c (command lines) and resolve_inputs.c
 *                  (inputs, bundles); resolve_int.h is theirs alone
 *   strmap.c       string -> index hash map (URLs, tool names)
 *   plan_graph.c   cycles among a plan's prerequisite links
 *   desc.c         kiln_desc_load/reload/free and the accessors */
#ifndef KILN_DESC_INT_H
#define KILN_DESC_INT_H

#include <stddef.h>

#include "kiln_desc.h"

/* ---- arena.c ---- */

struct arena_chunk;
typedef struct arena {
	struct arena_chunk *head;
	int failed; /* an allocation failed; the result is unusable */
} arena;

/* Zeroed memory that lives until arena_free; NULL (and a->failed) when out
 * of memory. */
void *arena_alloc(arena *a, size_t size);
/* The same without zeroing, for memory about to be overwritten. */
void *arena_alloc_raw(arena *a, size_t size);
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_strdup(arena *a, const char *s);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(arena *a);

/* Growable array of pointers or structs, in an arena. */
typedef struct vec {
	void *items;
	size_t n, cap, size;
} vec;
void vec_init(vec *v, size_t item_size);
/* Append one item (copied from item); NULL when out of memory. */
void *vec_push(arena *a, vec *v, const void *item);
/* Make room for n items in all; 0 or KILN_ENOMEM. */
int vec_reserve(arena *a, vec *v, size_t n);
/* Sort a vec of const char * by strcmp and drop repeats, in place. */
void vec_sort_unique_str(vec *v);

/* ---- diag.c ---- */

typedef struct diags {
	arena *a;
	vec list; /* kiln_diag */
	size_t nerrors;
} diags;

void diags_init(diags *d, arena *a);
void diag_add(diags *d, enum kiln_diag_level level, kiln_loc loc,
              const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The candidate nearest to word by edit distance, if near enough to be a
 * plausible typo, else NULL. */
const char *diag_suggest(const char *word, const char *const *candidates, size_t n);

/* ---- yaml_tree.c ---- */

enum ynode_type { Y_SCALAR, Y_SEQ, Y_MAP };

typedef struct ynode {
	enum ynode_type type;
	int line, col;
	int plain;        /* scalar written without quotes */
	const char *str;  /* scalar text, NUL-terminated */
	size_t len;       /* scalar length */
	size_t n;         /* sequence items, or map pairs */
	struct ynode **items; /* sequence: n items; map: 2n (key, value) */
} ynode;

#define DESC_MAX_BYTES (1u << 20)  /* a description file */
#define DESC_MAX_DEPTH 64
#define DESC_MAX_NODES 200000      /* counting what aliases repeat */

/* Parse the YAML file at path (display name file for diagnostics) into a
 * tree in a, its scalars' text in strs (a loader keeps the text and frees
 * the tree). Returns 0 with *root set (NULL for an empty file), or
 * KILN_EINVAL after adding diagnostics, or KILN_ENOMEM. */
int ytree_parse(const char *path, const char *file, arena *a, arena *strs,
                diags *dg, ynode **root);

/* ---- the parsed content of one description file ---- */

struct desc_rule {
	const char *match;     /* glob, relative to the project root */
	kiln_loc match_loc;
	const char *url;       /* template */
	kiln_loc url_loc;
	const char *tool;
	kiln_loc tool_loc;
	vec inputs;            /* struct desc_input */
	vec outputs;           /* kiln_output (file = template) */
	kiln_loc outputs_loc;
	kiln_val *params;
	vec profiles;          /* const char *; empty: every profile */
	kiln_loc profiles_loc;
	int intermediate;      /* outputs only other steps use (kiln_step) */
	kiln_loc loc;
	int index;             /* position in its file's list, for fields */
};

struct desc_input {
	const char *text; /* as written: "@url", "@url/<glob>", a path or a glob */
	const char *path; /* for files: relative to the project root */
	kiln_loc loc;
	const char *field; /* "assets[1].inputs[2]" */
};

struct desc_asset {
	const char *url;
	kiln_loc url_loc;
	const char *tool;
	kiln_loc tool_loc;
	vec inputs;   /* struct desc_input */
	vec outputs;  /* kiln_output */
	kiln_loc outputs_loc;
	kiln_val *params;
	vec profiles;
	kiln_loc profiles_loc;
	int intermediate;      /* outputs only other steps use (kiln_step) */
	kiln_loc loc;
	int index;
};

struct desc_profile {
	const char *name;
	const char *inherits;
	kiln_loc inherits_loc;
	vec vars; /* kiln_kv */
	kiln_loc loc;
};

struct desc_bundle {
	const char *name;
	vec patterns; /* struct desc_input (text = URL or URL glob, then
	                 optionally #output) */
	uint32_t align;   /* default 16 */
	int compress;     /* enum kiln_compress */
	int manifest;
	kiln_loc loc;
};

struct desc_file {
	char *relpath;   /* "kiln.yaml", "art/ui/ui.kiln.yaml" */
	char *dir;       /* its folder relative to the root, "" for the root */
	int is_root;
	arena a;
	diags dg;        /* parse and field errors of this file */
	/* root only */
	const char *project;
	int materialize; /* kiln_mat_mode */
	kiln_timeout tool_timeout; /* the tools' default time limit */
	kiln_cache_desc cache;   /* `cache:` (url NULL: not given) */
	int has_path;    /* `path:` given */
	vec path;        /* const char *, its folders as written (relative
	                    ones relative to the root) */
	const char *path_str; /* those joined with ':', all absolute; NULL:
	                    no `path:` (or out of memory: f->a.failed) */
	vec sources;     /* const char *, relative folders */
	kiln_loc sources_loc;
	vec profiles;    /* struct desc_profile */
	/* any file */
	vec tools;       /* kiln_tool */
	vec rules;       /* struct desc_rule */
	vec assets;      /* struct desc_asset */
	vec bundles;     /* struct desc_bundle */
};

/* Read and check one file into f (f->relpath, dir, is_root set by the
 * caller; f->a and f->dg initialised). Returns 0 or KILN_ENOMEM; problems
 * are diagnostics in f->dg. */
int desc_file_load(struct desc_file *f, const char *root);
void desc_file_free(struct desc_file *f);

/* ---- template.c ---- */

/* Looks a variable up: returns its value, or NULL when undefined. A
 * variable the engine fills later (in, out, depfile...) is "deferred". */
typedef struct tmpl_scope {
	const char *(*lookup)(const char *name, size_t len, void *arg);
	void *arg;
	int (*deferred)(const char *name, size_t len, void *arg);
	/* Non-NULL for a shell tool's command line: values are never spliced
	 * into a shell script. Each one is appended to vals and "${@K}" (K its
	 * 1-based index there) written in its place, and "$${" is kept as
	 * written; the engine turns both into quoted positional parameters
	 * (daemon/engine/run.c). */
	struct tmpl_vals *vals;
} tmpl_scope;

/* A shell command line's values, in the arena of the expansion. */
typedef struct tmpl_vals {
	const char **v;
	size_t n, cap;
} tmpl_vals;

/* Expand ${...} in text. Deferred names are kept as written; "$${" gives
 * "${" (but see tmpl_scope.vals). On an undefined variable or bad syntax,
 * returns NULL with *bad set to a message (in a). */
char *tmpl_expand(arena *a, const char *text, const tmpl_scope *sc, const char **bad);

/* ---- srcwalk.c ---- */

/* Every regular file under the source folders (relative paths, sorted),
 * and every *.kiln.yaml among them. Symlinks resolving outside root are
 * reported as errors; paths failing kiln_url_check are left out with a
 * warning; description files are not in files. */
typedef struct srcset {
	vec files; /* const char * */
	vec descs; /* const char * */
	vec dirs;  /* const char *: every folder walked */
} srcset;
int srcwalk(const char *root, const char *const *folders, size_t n, arena *a,
            diags *dg, kiln_loc loc, srcset *out);

/* ---- desc_resolve.c ---- */

struct plan_set {
	arena a;
	diags dg;
	vec plans; /* kiln_plan */
};

/* Resolve every profile of the loaded files into ps. Returns 0 or
 * KILN_ENOMEM; problems are diagnostics in ps->dg. */
int desc_resolve(const char *root, struct desc_file **files, size_t nfiles,
                 const srcset *src, struct plan_set *ps);

/* ---- plan_graph.c ---- */

/* Report (as errors in dg) every cycle among the URL-sorted steps' needs. */
void plan_cycles(diags *dg, const kiln_step *steps, size_t n);
/* Report outputs that would overwrite each other in build/<profile>/, or
 * the index map (kiln-index.txt), as errors at their steps. */
void plan_outputs(diags *dg, const kiln_step *steps, size_t n);

#endif
