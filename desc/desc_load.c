/* desc_load.c — one description file: YAML tree -> struct desc_file.
 *
 * Loading a file: parsing it into a node tree (yaml_tree.c), walking its
 * top-level mapping against the field tables of desc_fields.c, joining
 * `path:` into one PATH string, and freeing the tree. Also what those
 * tables' parsers read values with: a scalar as a string, a boolean, a
 * name, a list of strings, params, a path made relative to the project
 * root, and ld_map_walk, which walks a mapping against a table of the keys
 * it may hold: an unknown key is an error that suggests the nearest known
 * one, a wrong type says what was expected and what was found, and
 * checking carries on so that one run reports every problem. Nothing here
 * looks at other files: references (tools, URLs, profiles) are checked by
 * desc_resolve.c once every file is loaded. */
#include <stdlib.h>
#include <string.h>

#include "load_int.h"
#include "kiln_store.h"

/* ---- scalars, names and field paths ---- */

kiln_loc
ld_at(struct ld *c, const ynode *n)
{
	return (kiln_loc){c->f->relpath, n ? n->line : 0, n ? n->col : 0};
}

static const char *
kind(const ynode *n)
{
	if (n == NULL)
		return "nothing";
	if (n->type == Y_MAP)
		return "a mapping";
	if (n->type == Y_SEQ)
		return "a list";
	return "a value";
}

/* 1 when n has type t, else an error "expected <what>, found ...". */
int
ld_want(struct ld *c, const ynode *n, enum ynode_type t, const char *field,
        const char *what)
{
	if (n != NULL && n->type == t)
		return 1;
	diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "expected %s, found %s",
	         what, kind(n));
	return 0;
}

/* A scalar as a string, or NULL after an error. Empty/null is refused. */
const char *
ld_text(struct ld *c, const ynode *n, const char *field)
{
	if (!ld_want(c, n, Y_SCALAR, field, "a string"))
		return NULL;
	if (n->len == 0 || (n->plain && (strcmp(n->str, "~") == 0 ||
	                                 strcmp(n->str, "null") == 0))) {
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "must not be empty");
		return NULL;
	}
	return n->str;
}

int
ld_bool(struct ld *c, const ynode *n, const char *field, int *out)
{
	if (n != NULL && n->type == Y_SCALAR && n->plain &&
	    (strcmp(n->str, "true") == 0 || strcmp(n->str, "false") == 0)) {
		*out = n->str[0] == 't';
		return 1;
	}
	diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field,
	         "expected true or false, found %s%s%s%s", kind(n),
	         n && n->type == Y_SCALAR ? " '" : "",
	         n && n->type == Y_SCALAR ? n->str : "",
	         n && n->type == Y_SCALAR ? "'" : "");
	return 0;
}

/* Names of tools, profiles, bundles, outputs and variables. */
static int
is_name(const char *s)
{
	if (*s == '\0' || *s == '.' || *s == '-' || strlen(s) > 64)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return 0;
	return 1;
}

const char *
ld_name(struct ld *c, const ynode *key, const char *field, const char *what)
{
	const char *s = ld_text(c, key, field);

	if (s != NULL && !is_name(s)) {
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, key), field, "%s name '%s': use "
		         "letters, digits, '_', '-' and '.' (at most 64)", what, s);
		return NULL;
	}
	return s;
}

const char *
ld_field(struct ld *c, const char *parent, const char *key)
{
	const char *p = arena_printf(c->a, "%s%s%s", parent, *parent ? "." : "", key);

	return p ? p : "";
}

/* ---- walking mappings against a field table ---- */

void
ld_map_walk(struct ld *c, const ynode *map, const char *path,
            const struct field *fields, size_t nfields, void *obj)
{
	const char *keys[32];

	for (size_t i = 0; i < nfields && i < 32; i++)
		keys[i] = fields[i].key;
	for (size_t i = 0; i < map->n; i++) {
		const ynode *k = map->items[2 * i], *v = map->items[2 * i + 1];
		const char *name = ld_text(c, k, path), *hint;
		size_t j;
		if (name == NULL)
			continue;
		for (j = 0; j < i; j++) {
			const ynode *prev = map->items[2 * j];
			if (prev->type == Y_SCALAR && strcmp(prev->str, name) == 0)
				break;
		}
		if (j < i) {
			diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, k), path, "key '%s' given "
			         "twice (first at line %d)", name, map->items[2 * j]->line);
			continue;
		}
		for (j = 0; j < nfields && strcmp(fields[j].key, name) != 0; j++)
			;
		if (j < nfields) {
			fields[j].fn(c, v, obj, ld_field(c, path, name));
			continue;
		}
		hint = diag_suggest(name, keys, nfields < 32 ? nfields : 32);
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, k), path, "unknown key '%s'%s%s%s",
		         name, hint ? " (did you mean '" : "", hint ? hint : "",
		         hint ? "'?)" : "");
	}
}

static int
has_key(const ynode *map, const char *key)
{
	for (size_t i = 0; map && map->type == Y_MAP && i < map->n; i++)
		if (map->items[2 * i]->type == Y_SCALAR && strcmp(map->items[2 * i]->str, key) == 0)
			return 1;
	return 0;
}

void
ld_require(struct ld *c, const ynode *map, const char *path, const char *key,
           const char *what)
{
	if (!has_key(map, key))
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, map), path, "missing '%s' (%s)", key, what);
}

/* ---- values ---- */

enum kiln_val_type
ld_scalar_type(const ynode *n)
{
	const char *s = n->str;
	char *end;

	if (!n->plain)
		return KILN_VAL_STRING;
	if (n->len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0)
		return KILN_VAL_NULL;
	if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
		return KILN_VAL_BOOL;
	strtoll(s, &end, 0);
	if (*end == '\0')
		return KILN_VAL_INT;
	strtod(s, &end);
	return *end == '\0' ? KILN_VAL_FLOAT : KILN_VAL_STRING;
}

static void
to_val(struct ld *c, const ynode *n, kiln_val *v)
{
	v->loc = ld_at(c, n);
	if (n->type == Y_SCALAR) {
		v->type = ld_scalar_type(n);
		v->str = n->str;
		return;
	}
	v->type = n->type == Y_SEQ ? KILN_VAL_LIST : KILN_VAL_MAP;
	v->n = n->n;
	v->items = arena_alloc(c->a, (n->n ? n->n : 1) * sizeof *v->items);
	if (v->type == KILN_VAL_MAP)
		v->keys = arena_alloc(c->a, (n->n ? n->n : 1) * sizeof *v->keys);
	if (v->items == NULL || (v->type == KILN_VAL_MAP && v->keys == NULL))
		return;
	for (size_t i = 0; i < n->n; i++) {
		const ynode *item = v->type == KILN_VAL_MAP ? n->items[2 * i + 1] : n->items[i];
		if (v->type == KILN_VAL_MAP)
			v->keys[i] = n->items[2 * i]->type == Y_SCALAR ? n->items[2 * i]->str : "";
		to_val(c, item, &v->items[i]);
	}
}

kiln_val *
ld_params(struct ld *c, const ynode *n, const char *field)
{
	kiln_val *v;

	if (!ld_want(c, n, Y_MAP, field, "a mapping of parameter names to values"))
		return NULL;
	for (size_t i = 0; i < n->n; i++)
		ld_name(c, n->items[2 * i], field, "parameter");
	if ((v = arena_alloc(c->a, sizeof *v)) != NULL)
		to_val(c, n, v);
	return v;
}

/* A list of strings; a single string counts as a list of one. */
void
ld_strings(struct ld *c, const ynode *n, const char *field,
           void (*each)(struct ld *, const ynode *, const char *, void *),
           void *arg)
{
	if (n != NULL && n->type == Y_SCALAR) {
		each(c, n, field, arg);
		return;
	}
	if (!ld_want(c, n, Y_SEQ, field, "a list of strings"))
		return;
	for (size_t i = 0; i < n->n; i++)
		each(c, n->items[i], arena_printf(c->a, "%s[%zu]", field, i), arg);
}

/* A path written in this file, made relative to the project root. NULL
 * (after an error) when it could escape the root. */
const char *
ld_root_path(struct ld *c, const ynode *n, const char *s, const char *field)
{
	const char *p = *c->f->dir ? arena_printf(c->a, "%s/%s", c->f->dir, s) : s;

	if (p == NULL || kiln_url_check(p) != 0) {
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "path '%s' is not a "
		         "plain relative path inside the project (no '..', leading '/', "
		         "empty segments, backslashes or control characters)", s);
		return NULL;
	}
	return p;
}

/* `path:` as one PATH string of absolute folders, for the engine. */
static void
path_join(struct ld *c, const char *root)
{
	const char *const *d = c->f->path.items;
	char *s = c->f->has_path ? arena_strdup(c->a, "") : NULL;

	for (size_t i = 0; s != NULL && i < c->f->path.n; i++)
		s = arena_printf(c->a, "%s%s%s%s%s", s, i ? ":" : "",
		                 d[i][0] == '/' ? "" : root, d[i][0] == '/' ? "" : "/", d[i]);
	c->f->path_str = s;
}

int
desc_file_load(struct desc_file *f, const char *root)
{
	struct ld c = {f, &f->a, &f->dg};
	arena tree = {0};
	char *path = arena_printf(&tree, "%s/%s", root, f->relpath);
	ynode *top;
	int rv;

	vec_init(&f->sources, sizeof(const char *));
	vec_init(&f->profiles, sizeof(struct desc_profile));
	vec_init(&f->tools, sizeof(kiln_tool));
	vec_init(&f->rules, sizeof(struct desc_rule));
	vec_init(&f->assets, sizeof(struct desc_asset));
	vec_init(&f->bundles, sizeof(struct desc_bundle));
	vec_init(&f->path, sizeof(const char *));
	if (path == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	/* The model copies what it keeps of the tree but its strings: the
	 * tree goes when the file is loaded (its size: docs/build.md,
	 * "Daemon memory"). */
	rv = ytree_parse(path, f->relpath, &tree, &f->a, &f->dg, &top);
	if (rv == KILN_ENOMEM)
		goto fail;
	if (rv == 0 && top == NULL && f->is_root)
		diag_add(&f->dg, KILN_DIAG_ERROR, ld_at(&c, NULL), "", "the file is empty "
		         "(expected 'kiln: 1', 'project' and 'profiles')");
	rv = 0;
	if (top == NULL || !ld_want(&c, top, Y_MAP, "", "a mapping of kiln keys (kiln, "
	                            "project, sources, profiles, tools, rules, assets, bundles)"))
		goto fail;
	if (f->is_root) {
		desc_fields_root(&c, top);
		path_join(&c, root);
	} else {
		desc_fields_sub(&c, top);
	}
	rv = f->a.failed ? KILN_ENOMEM : 0;
fail:
	arena_free(&tree);
	return rv;
}

void
desc_file_free(struct desc_file *f)
{
	arena_free(&f->a);
}
