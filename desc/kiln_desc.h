/* kiln_desc.h — a project's asset descriptions, loaded and validated.
 *
 * A project is described by kiln.yaml at its root plus any *.kiln.yaml
 * files under its source folders (docs/format.md is the reference). Loading
 * parses every file, checks every field, then resolves each profile into a
 * plan: the list of build steps (one per rule match or explicit asset),
 * their inputs, prerequisite links, outputs and expanded command lines.
 * Every problem becomes a diagnostic naming file:line:column and the field;
 * all of them are collected, not just the first.
 *
 * Memory: everything a kiln_desc hands out (strings, steps, diagnostics) is
 * owned by it and valid until the next kiln_desc_reload or kiln_desc_free.
 * Not thread-safe: one thread at a time per kiln_desc. */
#ifndef KILN_DESC_H
#define KILN_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_error.h"

typedef struct kiln_desc kiln_desc;

/* Where something was written: file relative to the project root. */
typedef struct kiln_loc {
	const char *file;
	int line, col; /* 1-based; 0 when not known */
} kiln_loc;

enum kiln_diag_level { KILN_DIAG_ERROR, KILN_DIAG_WARNING };

typedef struct kiln_diag {
	enum kiln_diag_level level;
	kiln_loc loc;
	const char *field; /* e.g. "assets[2].tool", "" when none */
	const char *msg;   /* what is wrong and what was expected */
} kiln_diag;

/* A typed value from YAML (params, variables). Scalars keep the text as
 * written in str; type says how a plain scalar reads. */
enum kiln_val_type {
	KILN_VAL_NULL, KILN_VAL_BOOL, KILN_VAL_INT, KILN_VAL_FLOAT,
	KILN_VAL_STRING, KILN_VAL_LIST, KILN_VAL_MAP,
};

typedef struct kiln_val {
	enum kiln_val_type type;
	const char *str;         /* scalars: the text; lists/maps: NULL */
	size_t n;                /* lists/maps: number of items */
	struct kiln_val *items;  /* list items, or map values */
	const char **keys;       /* maps: the keys, in file order */
	kiln_loc loc;
} kiln_val;

typedef struct kiln_kv {
	const char *key;
	const char *value;
	kiln_loc loc;
} kiln_kv;

/* A tool's time limit (`timeout:`, or the project's `tool_timeout:`). */
typedef struct kiln_timeout {
	const char *text;   /* as written, e.g. "30s"; NULL: not given */
	uint32_t s;         /* seconds; 0: no limit */
	kiln_loc loc;
} kiln_timeout;

typedef struct kiln_tool {
	const char *name;
	const char **run; /* argv template; with shell, one command string */
	size_t nrun;
	const char *version; /* "" when not given */
	kiln_kv *env;        /* templates */
	size_t nenv;
	int shell;   /* run through /bin/sh -c */
	int depfile; /* the tool writes a make-style depfile to ${depfile} */
	int notrace; /* trace: false — run without the file-access tracer */
	kiln_timeout timeout; /* its own; see kiln_desc_tool_timeout */
	kiln_loc loc;
	/* kiln_builtin: KILN_BUILTIN_NONE for a tool of the description (a
	 * program); otherwise work the engine does itself, with no process
	 * and no program (run is empty) */
	int builtin;
} kiln_tool;

enum kiln_builtin {
	KILN_BUILTIN_NONE = 0,
	KILN_BUILTIN_BUNDLE,   /* a `bundles:` entry's kpak (docs/bundles.md) */
};

typedef struct kiln_output {
	const char *name; /* "out" for a single unnamed output */
	const char *file; /* file name the tool writes, in its scratch folder
	                     (a folder output's name, without its '/') */
	int folder;       /* written "name/": the tool writes a folder (a
	                     tree record in the store; docs/format.md,
	                     "Folder outputs") */
} kiln_output;

/* One input as the tool gets it: a source file, or one output of a
 * prerequisite step. A step's inputs in this form keep the order its
 * `inputs:` lists them in (docs/format.md, "Input order"). */
typedef struct kiln_input {
	const char *path;   /* a project-relative source file; NULL: an output */
	const char *url;    /* path NULL: the prerequisite step's URL */
	const char *output; /* path NULL: the name of that step's output */
} kiln_input;

typedef struct kiln_step {
	const char *url;
	const kiln_tool *tool;
	/* The tool's argv and env with variables, params and match fields
	 * expanded. ${in}, ${in...}, ${out}, ${out.NAME} and ${depfile} are
	 * left in place for the build engine, which knows the paths. A shell
	 * tool's is its script, with "${@K}" where the K-th value was, then
	 * the values: argv[K] (tmpl_scope.vals in desc_int.h). */
	const char **argv;
	size_t nargv;
	kiln_kv *env;
	size_t nenv;
	const char **inputs; /* project-relative source files, sorted */
	size_t ninputs;
	const char **needs;  /* URLs of prerequisite steps, sorted */
	size_t nneeds;
	/* What ${in} and ${in...} name, in order: a rule's matched file
	 * first, then each `inputs:` item in its written place (a glob's
	 * matches sorted by path or URL, `@URL` as each of its outputs in
	 * their declared order, `@URL#name` as that one output); an input
	 * written twice is given once, at its first place. The same files
	 * and steps as inputs and needs. */
	const kiln_input *order;
	size_t norder;
	kiln_output *outputs;
	size_t noutputs;
	const kiln_val *params; /* a map, or NULL */
	kiln_loc loc;           /* the rule or asset that made this step */
	int from_rule;
	kiln_loc overrides;     /* file != NULL: this asset replaced a rule's step */
	/* `intermediate: true`: its outputs are for other steps only: kept in
	 * the store and under .kiln/intermediate/<profile>/, not in build/
	 * nor the index map (docs/format.md, "Intermediates") */
	int intermediate;
	/* A bundle's step (URL bundles/<name>, tool->builtin
	 * KILN_BUILTIN_BUNDLE): its options; its entries are the outputs
	 * order lists. NULL for every other step. */
	const struct kiln_bundle_plan *bundle;
} kiln_step;

/* How a bundle is packed (docs/bundles.md, "Options"). */
enum kiln_compress { KILN_COMPRESS_NONE = 0, KILN_COMPRESS_ZSTD };

typedef struct kiln_bundle_plan {
	const char *name;
	const char **urls; /* the entries' steps, sorted */
	size_t nurls;
	uint32_t align;    /* entry data alignment, a power of two */
	int compress;      /* enum kiln_compress */
	int manifest;      /* also write <name>.json */
	kiln_loc loc;
} kiln_bundle_plan;

/* The steps of one profile, sorted by URL. */
typedef struct kiln_plan {
	const char *profile;
	const kiln_step *steps;
	size_t nsteps;
	const kiln_bundle_plan *bundles;
	size_t nbundles;
	/* The profile's variables, its own first then inherited ones (nearest
	 * first: the first of a name wins), for the engine to tell which of
	 * them a step's tool uses. */
	const kiln_kv *vars;
	size_t nvars;
} kiln_plan;

/* Load the project whose root folder is root. Returns 0 when it is valid,
 * KILN_EINVAL when it has errors (*d is still set: read the diagnostics),
 * KILN_ENOTFOUND when root has no kiln.yaml (*d NULL), KILN_ENOMEM. */
int kiln_desc_load(const char *root, kiln_desc **d);

/* Re-read one description file (path relative to the root) after it
 * changed, was created or was deleted: exactly what that file defined is
 * replaced, and every profile is resolved again. Same returns as load;
 * KILN_EINVAL for a path that is not a description file. */
int kiln_desc_reload(kiln_desc *d, const char *relpath);

void kiln_desc_free(kiln_desc *d);

/* All diagnostics, errors and warnings, sorted by file, line, column. */
size_t kiln_desc_diags(const kiln_desc *d, const kiln_diag **diags);
size_t kiln_desc_nerrors(const kiln_desc *d);

const char *kiln_desc_root(const kiln_desc *d);
const char *kiln_desc_project(const kiln_desc *d);

/* How build/<profile>/ gets the files it holds (kiln.yaml's top-level
 * 'materialize'; docs/format.md, and materialize.h for what each does). */
typedef enum kiln_mat_mode {
	KILN_MAT_UNSET = 0,  /* not given: copies */
	KILN_MAT_COPY,       /* files of their own: a reflink, else a copy */
	KILN_MAT_HARDLINK,   /* hard links to the store's blobs (opt-in) */
} kiln_mat_mode;

/* The project's shared cache (kiln.yaml's `cache:`; docs/format.md and
 * docs/cache.md). Strings belong to the description. */
typedef enum kiln_cache_mode {
	KILN_CACHE_MODE_UNSET = 0, /* not given: readwrite when a url is */
	KILN_CACHE_MODE_OFF,       /* no lookups, no uploads */
	KILN_CACHE_MODE_READ,      /* look up, never upload (artists) */
	KILN_CACHE_MODE_READWRITE, /* look up and upload (CI) */
} kiln_cache_mode;

typedef struct kiln_cache_desc {
	const char *url;               /* http:// or https://; NULL: no cache */
	kiln_cache_mode mode;
	const char *basic_auth_file;   /* as written (relative: to the root) */
	const char *bearer_token_file;
	const char *ca_file;           /* a private CA for https (as written) */
	const char *sign_key_file;     /* the secret signing entries (as written) */
	kiln_timeout timeout;          /* a whole transfer (text NULL: default) */
	kiln_timeout connect_timeout;  /* setting up a connection (likewise) */
	kiln_loc loc;                  /* the `cache:` mapping (line 0: none) */
} kiln_cache_desc;

/* The project's `cache:` (its url NULL when not given); valid as long as d. */
const kiln_cache_desc *kiln_desc_cache(const kiln_desc *d);

/* "off", "read" or "readwrite" as a mode; anything else is
 * KILN_CACHE_MODE_UNSET. */
kiln_cache_mode kiln_cache_mode_parse(const char *s);

/* A duration as kiln.yaml writes one ("30s", "5m", "2h", "1d"; a bare
 * number is seconds; at most 366d) into *secs. 0 or KILN_EINVAL. */
int kiln_duration_parse(const char *s, uint32_t *secs);

/* A user's own settings for this machine: the file
 * $XDG_CONFIG_HOME/kiln/config.yaml (~/.config/kiln/config.yaml), which
 * may hold `cache:` with kiln.yaml's keys, none of them required
 * (docs/cache.md, "Configuration"). Relative paths in it are relative to
 * its folder and are made absolute. */
typedef struct kiln_user_config kiln_user_config;

/* The path of that file from the environment's values (either may be
 * NULL): XDG_CONFIG_HOME when it is absolute, else HOME/.config. Writes
 * it into buf (len bytes). 0, KILN_ENOTFOUND (neither is usable) or
 * KILN_ERANGE (too long). */
int kiln_user_config_path(const char *xdg_config_home, const char *home, char *buf,
                          size_t len);

/* Read the file at path. 0 with *u (free with kiln_user_config_free; its
 * problems are diagnostics, as a description's); KILN_ENOTFOUND when
 * there is no such file (no settings: not an error); KILN_ENOMEM. */
int kiln_user_config_load(const char *path, kiln_user_config **u);
void kiln_user_config_free(kiln_user_config *u);
size_t kiln_user_config_diags(const kiln_user_config *u, const kiln_diag **diags);
size_t kiln_user_config_nerrors(const kiln_user_config *u);
/* Its `cache:` (every field unset when the file has none); valid as long
 * as u. */
const kiln_cache_desc *kiln_user_config_cache(const kiln_user_config *u);

/* The project's 'path' (where tools' programs are found, whoever asks
 * for the build) as a PATH string of absolute folders, valid for d's
 * life; NULL when not given: each build's own PATH is used. */
const char *kiln_desc_path(const kiln_desc *d);

/* The project's 'materialize' (KILN_MAT_UNSET when not given). */
kiln_mat_mode kiln_desc_materialize(const kiln_desc *d);

/* The time limit t runs under: its own `timeout:`, else the project's
 * `tool_timeout:`; NULL when none applies (or it is 0). Valid as long as
 * d. Not part of any action key: it changes no output. */
const kiln_timeout *kiln_desc_tool_timeout(const kiln_desc *d, const kiln_tool *t);

/* "copy" or "hardlink" as a mode; anything else (NULL too) is
 * KILN_MAT_UNSET. */
kiln_mat_mode kiln_mat_mode_parse(const char *s);

/* Profile names in the order kiln.yaml lists them; the first is the
 * default. */
size_t kiln_desc_profiles(const kiln_desc *d, const char *const **names);

/* The plan of a profile (NULL for an unknown profile, or when the project
 * has errors that prevent resolving it). */
const kiln_plan *kiln_desc_plan(const kiln_desc *d, const char *profile);

/* The step with this URL in a URL-sorted step array (a plan's steps):
 * 1 with *at set, 0 when there is none. */
int step_find(const kiln_step *steps, size_t n, const char *url, size_t *at);

/* Description files read, relative to the root ("kiln.yaml" first). */
size_t kiln_desc_files(const kiln_desc *d, const char *const **files);

/* Every folder the source walk read, relative to the root. A file created,
 * deleted or renamed in one changes that folder's mtime: the build engine
 * stats these to know when to load the project again. */
size_t kiln_desc_dirs(const kiln_desc *d, const char *const **dirs);

#endif
