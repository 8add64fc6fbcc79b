/* load_int.h — what desc_load.c (loading one file, reading values) and
 * desc_fields.c (the field tables) share. Private to desc/.
 *
 * Every ld_* reader adds a diagnostic (an error at the node's line and
 * column, naming the field) when the value is not what it should be, and
 * returns NULL or 0 then; checking carries on. */
#ifndef KILN_LOAD_INT_H
#define KILN_LOAD_INT_H

#include "desc_int.h"

/* The file being loaded, its arena and its diagnostics. */
struct ld {
	struct desc_file *f;
	arena *a;
	diags *dg;
};

/* Reads one key's value v into obj; field is the key's full name
 * ("rules[2].url") for diagnostics. */
typedef void (*field_fn)(struct ld *c, const ynode *v, void *obj, const char *field);

/* One known key of a mapping, and its parser. */
struct field {
	const char *key;
	field_fn fn;
};

/* ---- desc_load.c ---- */

/* Where n is (file, line, column); line 0 for NULL. */
kiln_loc ld_at(struct ld *c, const ynode *n);
/* 1 when n has type t, else an error "expected <what>, found ..." and 0. */
int ld_want(struct ld *c, const ynode *n, enum ynode_type t, const char *field,
            const char *what);
/* A scalar as a string, or NULL after an error. Empty/null is refused. */
const char *ld_text(struct ld *c, const ynode *n, const char *field);
/* true or false into *out: 1, or 0 after an error. */
int ld_bool(struct ld *c, const ynode *n, const char *field, int *out);
/* A name of a tool, profile, bundle, output or variable (what says
 * which): letters, digits, '_', '-', '.'; NULL after an error. */
const char *ld_name(struct ld *c, const ynode *key, const char *field,
                    const char *what);
/* "parent.key" (or "key" under the top level), in c's arena. */
const char *ld_field(struct ld *c, const char *parent, const char *key);
/* Walk map's keys against fields: each known key's parser runs on its
 * value with obj; an unknown or repeated key is an error. */
void ld_map_walk(struct ld *c, const ynode *map, const char *path,
                 const struct field *fields, size_t nfields, void *obj);
/* An error when map has no key (what it is for says what to give). */
void ld_require(struct ld *c, const ynode *map, const char *path, const char *key,
                const char *what);
/* The type a scalar reads as: string (quoted), null, bool, int or float. */
enum kiln_val_type ld_scalar_type(const ynode *n);
/* A mapping of parameter names to values, as a kiln_val; NULL after an
 * error. */
kiln_val *ld_params(struct ld *c, const ynode *n, const char *field);
/* Call each for every string of a list; a single string counts as a list
 * of one. */
void ld_strings(struct ld *c, const ynode *n, const char *field,
                void (*each)(struct ld *, const ynode *, const char *, void *),
                void *arg);
/* A path written in this file, made relative to the project root. NULL
 * (after an error) when it could escape the root. */
const char *ld_root_path(struct ld *c, const ynode *n, const char *s,
                         const char *field);

/* ---- desc_fields.c ---- */

/* Read the top-level mapping of kiln.yaml (desc_fields_root: every key,
 * and kiln, project and profiles required) or of a *.kiln.yaml
 * (desc_fields_sub: tools, rules, assets, bundles) into c->f. */
void desc_fields_root(struct ld *c, const ynode *top);
void desc_fields_sub(struct ld *c, const ynode *top);
/* The top-level mapping of a user's config.yaml (user_config.c): cache. */
void desc_fields_user(struct ld *c, const ynode *top);

/* ---- bundle_fields.c ---- */

/* One `bundles:` item, key k (its name) and value v (a list of URL
 * patterns, or a mapping with entries: and options), into c->f->bundles;
 * field is "bundles". */
void desc_bundle_read(struct ld *c, const ynode *k, const ynode *v, const char *field);

#endif
