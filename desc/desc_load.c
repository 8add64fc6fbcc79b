/* desc_load.c — one description file: YAML tree -> struct desc_file.
 *
 * Every mapping is walked against a table of the keys it may hold; an
 * unknown key is an error that suggests the nearest known one, a wrong
 * type says what was expected and what was found, and checking carries on
 * so that one run reports every problem. Paths written in a *.kiln.yaml
 * are relative to its folder and are stored relative to the project root.
 * Nothing here looks at other files: references (tools, URLs, profiles)
 * are checked by desc_resolve.c once every file is loaded. */
#include <stdlib.h>
#include <string.h>

#include "desc_int.h"
#include "kiln_store.h"

#define FORMAT_VERSION 1

struct ld {
	struct desc_file *f;
	arena *a;
	diags *dg;
};

static kiln_loc
at(struct ld *c, const ynode *n)
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
static int
want(struct ld *c, const ynode *n, enum ynode_type t, const char *field,
     const char *what)
{
	if (n != NULL && n->type == t)
		return 1;
	diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "expected %s, found %s",
	         what, kind(n));
	return 0;
}

/* A scalar as a string, or NULL after an error. Empty/null is refused. */
static const char *
text(struct ld *c, const ynode *n, const char *field)
{
	if (!want(c, n, Y_SCALAR, field, "a string"))
		return NULL;
	if (n->len == 0 || (n->plain && (strcmp(n->str, "~") == 0 ||
	                                 strcmp(n->str, "null") == 0))) {
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "must not be empty");
		return NULL;
	}
	return n->str;
}

static int
boolean(struct ld *c, const ynode *n, const char *field, int *out)
{
	if (n != NULL && n->type == Y_SCALAR && n->plain &&
	    (strcmp(n->str, "true") == 0 || strcmp(n->str, "false") == 0)) {
		*out = n->str[0] == 't';
		return 1;
	}
	diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field,
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

static const char *
name_of(struct ld *c, const ynode *key, const char *field, const char *what)
{
	const char *s = text(c, key, field);

	if (s != NULL && !is_name(s)) {
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, key), field, "%s name '%s': use "
		         "letters, digits, '_', '-' and '.' (at most 64)", what, s);
		return NULL;
	}
	return s;
}

static const char *
path_field(struct ld *c, const char *parent, const char *key)
{
	const char *p = arena_printf(c->a, "%s%s%s", parent, *parent ? "." : "", key);

	return p ? p : "";
}

/* ---- walking mappings against a key table ---- */

typedef void (*field_fn)(struct ld *c, const ynode *v, void *obj, const char *field);

struct field {
	const char *key;
	field_fn fn;
};

static void
map_walk(struct ld *c, const ynode *map, const char *path, const struct field *fields,
         size_t nfields, void *obj)
{
	const char *keys[32];

	for (size_t i = 0; i < nfields && i < 32; i++)
		keys[i] = fields[i].key;
	for (size_t i = 0; i < map->n; i++) {
		const ynode *k = map->items[2 * i], *v = map->items[2 * i + 1];
		const char *name = text(c, k, path), *hint;
		size_t j;
		if (name == NULL)
			continue;
		for (j = 0; j < i; j++) {
			const ynode *prev = map->items[2 * j];
			if (prev->type == Y_SCALAR && strcmp(prev->str, name) == 0)
				break;
		}
		if (j < i) {
			diag_add(c->dg, KILN_DIAG_ERROR, at(c, k), path, "key '%s' given "
			         "twice (first at line %d)", name, map->items[2 * j]->line);
			continue;
		}
		for (j = 0; j < nfields && strcmp(fields[j].key, name) != 0; j++)
			;
		if (j < nfields) {
			fields[j].fn(c, v, obj, path_field(c, path, name));
			continue;
		}
		hint = diag_suggest(name, keys, nfields < 32 ? nfields : 32);
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, k), path, "unknown key '%s'%s%s%s",
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

static void
require(struct ld *c, const ynode *map, const char *path, const char *key,
        const char *what)
{
	if (!has_key(map, key))
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, map), path, "missing '%s' (%s)", key, what);
}

/* ---- values ---- */

static enum kiln_val_type
scalar_type(const ynode *n)
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
	v->loc = at(c, n);
	if (n->type == Y_SCALAR) {
		v->type = scalar_type(n);
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

static kiln_val *
params(struct ld *c, const ynode *n, const char *field)
{
	kiln_val *v;

	if (!want(c, n, Y_MAP, field, "a mapping of parameter names to values"))
		return NULL;
	for (size_t i = 0; i < n->n; i++)
		name_of(c, n->items[2 * i], field, "parameter");
	if ((v = arena_alloc(c->a, sizeof *v)) != NULL)
		to_val(c, n, v);
	return v;
}

/* A list of strings; a single string counts as a list of one. */
static void
strings(struct ld *c, const ynode *n, const char *field, void (*each)(struct ld *,
        const ynode *, const char *, void *), void *arg)
{
	if (n != NULL && n->type == Y_SCALAR) {
		each(c, n, field, arg);
		return;
	}
	if (!want(c, n, Y_SEQ, field, "a list of strings"))
		return;
	for (size_t i = 0; i < n->n; i++)
		each(c, n->items[i], arena_printf(c->a, "%s[%zu]", field, i), arg);
}

/* A path written in this file, made relative to the project root. NULL
 * (after an error) when it could escape the root. */
static const char *
root_path(struct ld *c, const ynode *n, const char *s, const char *field)
{
	const char *p = *c->f->dir ? arena_printf(c->a, "%s/%s", c->f->dir, s) : s;

	if (p == NULL || kiln_url_check(p) != 0) {
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "path '%s' is not a "
		         "plain relative path inside the project (no '..', leading '/', "
		         "empty segments, backslashes or control characters)", s);
		return NULL;
	}
	return p;
}

/* ---- fields shared by rules and assets ---- */

static void
one_input(struct ld *c, const ynode *n, const char *field, void *arg)
{
	struct desc_input in = {text(c, n, field), NULL, at(c, n), field};

	if (in.text == NULL)
		return;
	if (in.text[0] == '@') {
		if (kiln_url_check(in.text + 1) != 0) {
			diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "'%s' is not a "
			         "valid URL reference ('@' then a URL or URL glob)", in.text);
			return;
		}
	} else if ((in.path = root_path(c, n, in.text, field)) == NULL) {
		return;
	}
	vec_push(c->a, arg, &in);
}

/* The inputs of a rule or asset: room for all of them first, as a vec
 * grown in the file's arena leaves every outgrown copy behind. */
static void
inputs_field(struct ld *c, const ynode *v, const char *f, vec *inputs)
{
	if (v != NULL && v->type == Y_SEQ)
		vec_reserve(c->a, inputs, inputs->n + v->n);
	strings(c, v, f, one_input, inputs);
}

static void
one_profile_name(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = text(c, n, field);

	if (s != NULL)
		vec_push(c->a, arg, &s);
}

static int
output_file_ok(struct ld *c, const ynode *n, const char *file, const char *field)
{
	if (strchr(file, '/') == NULL && strcmp(file, ".") != 0 && strcmp(file, "..") != 0)
		return 1;
	diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "output file '%s' must be "
	         "a plain file name (tools write into their own scratch folder)", file);
	return 0;
}

static void
outputs(struct ld *c, const ynode *n, vec *out, const char *field)
{
	if (n != NULL && n->type == Y_SCALAR) {
		kiln_output o = {"out", text(c, n, field)};
		if (o.file != NULL && output_file_ok(c, n, o.file, field))
			vec_push(c->a, out, &o);
		return;
	}
	if (!want(c, n, Y_MAP, field, "a file name, or a mapping of output names "
	          "to file names"))
		return;
	for (size_t i = 0; i < n->n; i++) {
		const ynode *k = n->items[2 * i], *v = n->items[2 * i + 1];
		const char *f = path_field(c, field, k->type == Y_SCALAR ? k->str : "?");
		kiln_output o = {name_of(c, k, field, "output"), text(c, v, f)};
		if (o.name != NULL && o.file != NULL && output_file_ok(c, v, o.file, f))
			vec_push(c->a, out, &o);
	}
}

/* ---- rules ---- */

#define RULE (*(struct desc_rule *)obj)

static void r_match(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = text(c, v, f);
	RULE.match_loc = at(c, v);
	if (s != NULL)
		RULE.match = root_path(c, v, s, f);
}
static void r_url(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.url = text(c, v, f);
	RULE.url_loc = at(c, v);
}
static void r_tool(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.tool = text(c, v, f);
	RULE.tool_loc = at(c, v);
}
static void r_inputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	inputs_field(c, v, f, &RULE.inputs);
}
static void r_outputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.outputs_loc = at(c, v);
	outputs(c, v, &RULE.outputs, f);
}
static void r_params(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.params = params(c, v, f);
}
static void r_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.profiles_loc = at(c, v);
	strings(c, v, f, one_profile_name, &RULE.profiles);
}

static const struct field rule_fields[] = {
	{"match", r_match}, {"url", r_url}, {"tool", r_tool}, {"inputs", r_inputs},
	{"outputs", r_outputs}, {"params", r_params}, {"profiles", r_profiles},
};

static void
one_rule(struct ld *c, const ynode *n, int index)
{
	struct desc_rule r = {.loc = at(c, n), .index = index};
	const char *path = arena_printf(c->a, "rules[%d]", index);

	vec_init(&r.inputs, sizeof(struct desc_input));
	vec_init(&r.outputs, sizeof(kiln_output));
	vec_init(&r.profiles, sizeof(const char *));
	if (!want(c, n, Y_MAP, path, "a rule (a mapping with match, url and tool)"))
		return;
	map_walk(c, n, path, rule_fields, sizeof rule_fields / sizeof rule_fields[0], &r);
	require(c, n, path, "match", "the glob of source files this rule builds");
	require(c, n, path, "url", "the URL of each step, e.g. \"sprites/${match.path}\"");
	require(c, n, path, "tool", "the tool that builds each match");
	if (r.match && r.url && r.tool)
		vec_push(c->a, &c->f->rules, &r);
}

/* ---- assets ---- */

#define ASSET (*(struct desc_asset *)obj)

static void a_url(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = text(c, v, f);
	ASSET.url_loc = at(c, v);
	if (s != NULL && kiln_url_check(s) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "URL '%s' must be "
		         "'/'-separated names without '..', '.', empty segments, a "
		         "leading '/', backslashes or control characters (at most 400 "
		         "bytes)", s);
	else
		ASSET.url = s;
}
static void a_tool(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.tool = text(c, v, f);
	ASSET.tool_loc = at(c, v);
}
static void a_inputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	inputs_field(c, v, f, &ASSET.inputs);
}
static void a_outputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.outputs_loc = at(c, v);
	outputs(c, v, &ASSET.outputs, f);
}
static void a_params(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.params = params(c, v, f);
}
static void a_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.profiles_loc = at(c, v);
	strings(c, v, f, one_profile_name, &ASSET.profiles);
}

static const struct field asset_fields[] = {
	{"url", a_url}, {"tool", a_tool}, {"inputs", a_inputs},
	{"outputs", a_outputs}, {"params", a_params}, {"profiles", a_profiles},
};

static void
one_asset(struct ld *c, const ynode *n, int index)
{
	struct desc_asset as = {.loc = at(c, n), .index = index};
	const char *path = arena_printf(c->a, "assets[%d]", index);

	vec_init(&as.inputs, sizeof(struct desc_input));
	vec_init(&as.outputs, sizeof(kiln_output));
	vec_init(&as.profiles, sizeof(const char *));
	if (!want(c, n, Y_MAP, path, "an asset (a mapping with url and tool)"))
		return;
	map_walk(c, n, path, asset_fields, sizeof asset_fields / sizeof asset_fields[0], &as);
	require(c, n, path, "url", "the URL this asset is known by");
	require(c, n, path, "tool", "the tool that builds it");
	if (as.url && as.tool)
		vec_push(c->a, &c->f->assets, &as);
}

/* The longest time limit: a year, far past any tool, far within 32 bits. */
#define TIMEOUT_MAX_S (366u * 86400u)

/* A duration: a whole number with s, m, h or d after it (none: seconds),
 * as `kiln gc --max-age` reads one; 0 means no limit. */
static void
duration(struct ld *c, const ynode *v, const char *f, kiln_timeout *out)
{
	const char *s = text(c, v, f), *p;
	unsigned long long n = 0, mul = 1;

	if (s == NULL)
		return;
	for (p = s; *p >= '0' && *p <= '9' && n <= TIMEOUT_MAX_S; p++)
		n = n * 10 + (unsigned)(*p - '0');
	switch (p > s ? *p : '?') {
	case '\0': break;
	case 's': p++; break;
	case 'm': mul = 60; p++; break;
	case 'h': mul = 3600; p++; break;
	case 'd': mul = 86400; p++; break;
	default: p = "?";
	}
	if (*p != '\0' || n * mul > TIMEOUT_MAX_S) {
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "not a duration: '%s' "
		         "(a whole number with s, m, h or d after it, e.g. 30s or 5m, "
		         "at most 366d; 0 for no limit)", s);
		return;
	}
	*out = (kiln_timeout){s, (uint32_t)(n * mul), at(c, v)};
}

/* ---- tools ---- */

#define TOOL (*(kiln_tool *)obj)

static void
one_arg(struct ld *c, const ynode *n, const char *field, void *arg)
{
	kiln_tool *t = arg;
	/* An empty argv item is legitimate; anything but a scalar is not. */
	const char *s = n && n->type == Y_SCALAR ? n->str : text(c, n, field);
	const char **run;

	if (s == NULL)
		return;
	/* Tools have a handful of arguments: grow by copying, in the arena. */
	if ((run = arena_alloc(c->a, (t->nrun + 1) * sizeof *run)) == NULL)
		return;
	if (t->nrun)
		memcpy(run, t->run, t->nrun * sizeof *run);
	run[t->nrun++] = s;
	t->run = run;
}

/* TOOL.shell bit 1: 'shell: true' was given; bit 2: run was one string.
 * one_tool checks that the two agree once every key has been seen. */
static void t_run(struct ld *c, const ynode *v, void *obj, const char *f)
{
	if (v != NULL && v->type == Y_SCALAR) {
		one_arg(c, v, f, obj);
		TOOL.shell |= 2;
		return;
	}
	strings(c, v, f, one_arg, obj);
}
static void t_version(struct ld *c, const ynode *v, void *obj, const char *f)
{
	TOOL.version = text(c, v, f);
}
static void t_env(struct ld *c, const ynode *v, void *obj, const char *f)
{
	if (!want(c, v, Y_MAP, f, "a mapping of variable names to values"))
		return;
	TOOL.env = arena_alloc(c->a, (v->n ? v->n : 1) * sizeof *TOOL.env);
	for (size_t i = 0; TOOL.env && i < v->n; i++) {
		const ynode *k = v->items[2 * i], *val = v->items[2 * i + 1];
		kiln_kv kv = {name_of(c, k, f, "environment variable"),
		              want(c, val, Y_SCALAR, f, "a string") ? val->str : NULL,
		              at(c, val)};
		if (kv.key && kv.value)
			TOOL.env[TOOL.nenv++] = kv;
	}
}
static void t_shell(struct ld *c, const ynode *v, void *obj, const char *f)
{
	int b;

	if (boolean(c, v, f, &b) && b)
		TOOL.shell |= 1;
}
static void t_depfile(struct ld *c, const ynode *v, void *obj, const char *f)
{
	boolean(c, v, f, &TOOL.depfile);
}

static void t_trace(struct ld *c, const ynode *v, void *obj, const char *f)
{
	int b;

	if (boolean(c, v, f, &b))
		TOOL.notrace = !b;
}

static void t_timeout(struct ld *c, const ynode *v, void *obj, const char *f)
{
	duration(c, v, f, &TOOL.timeout);
}

static const struct field tool_fields[] = {
	{"run", t_run}, {"version", t_version}, {"env", t_env},
	{"shell", t_shell}, {"depfile", t_depfile}, {"trace", t_trace},
	{"timeout", t_timeout},
};

static void
one_tool(struct ld *c, const ynode *k, const ynode *n)
{
	kiln_tool t = {.loc = at(c, k), .version = ""};
	const char *path;

	t.name = name_of(c, k, "tools", "tool");
	if (t.name == NULL)
		return;
	path = arena_printf(c->a, "tools.%s", t.name);
	if (!want(c, n, Y_MAP, path, "a tool (a mapping with run)"))
		return;
	map_walk(c, n, path, tool_fields, sizeof tool_fields / sizeof tool_fields[0], &t);
	require(c, n, path, "run", "the command: a list of arguments");
	if ((t.shell & 2) && !(t.shell & 1))
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), path_field(c, path, "run"),
		         "expected a list of arguments (tools run without a shell; set "
		         "'shell: true' to run one command line through /bin/sh)");
	else if ((t.shell & 1) && !(t.shell & 2) && t.nrun > 0)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), path_field(c, path, "run"),
		         "with 'shell: true', run is one command line (a string)");
	t.shell = t.shell & 1;
	if (t.nrun > 0)
		vec_push(c->a, &c->f->tools, &t);
}

/* ---- profiles and bundles (kiln.yaml) ---- */

#define PROFILE (*(struct desc_profile *)obj)

static void p_inherits(struct ld *c, const ynode *v, void *obj, const char *f)
{
	PROFILE.inherits = text(c, v, f);
	PROFILE.inherits_loc = at(c, v);
}
static void p_vars(struct ld *c, const ynode *v, void *obj, const char *f)
{
	static const char *const reserved[] = {"in", "out", "depfile", "param",
	                                       "match", "profile", "project"};
	if (!want(c, v, Y_MAP, f, "a mapping of variable names to values"))
		return;
	for (size_t i = 0; i < v->n; i++) {
		const ynode *k = v->items[2 * i], *val = v->items[2 * i + 1];
		kiln_kv kv = {name_of(c, k, f, "variable"), NULL, at(c, val)};
		for (size_t r = 0; kv.key && r < sizeof reserved / sizeof *reserved; r++) {
			size_t rl = strlen(reserved[r]);
			if (strncmp(kv.key, reserved[r], rl) == 0 &&
			    (kv.key[rl] == '\0' || kv.key[rl] == '.')) {
				diag_add(c->dg, KILN_DIAG_ERROR, at(c, k), f, "variable name "
				         "'%s' is reserved", kv.key);
				kv.key = NULL;
			}
		}
		if (want(c, val, Y_SCALAR, path_field(c, f, k->str), "a single value"))
			kv.value = val->str;
		if (kv.key && kv.value)
			vec_push(c->a, &PROFILE.vars, &kv);
	}
}

static const struct field profile_fields[] = {
	{"inherits", p_inherits}, {"vars", p_vars},
};

static void
one_bundle_pattern(struct ld *c, const ynode *n, const char *field, void *arg)
{
	struct desc_input in = {text(c, n, field), NULL, at(c, n), field};

	if (in.text != NULL && kiln_url_check(in.text) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "'%s' is not a URL "
		         "or URL glob", in.text);
	else if (in.text != NULL)
		vec_push(c->a, arg, &in);
}

/* ---- the top level ---- */

static void k_kiln(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (v == NULL || v->type != Y_SCALAR || scalar_type(v) != KILN_VAL_INT)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "expected the format "
		         "version, an integer (1)");
	else if (atoi(v->str) != FORMAT_VERSION)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "format version %s is not "
		         "one this kiln reads (it reads %d)", v->str, FORMAT_VERSION);
}
static void k_project(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->project = text(c, v, f);
}
static void k_materialize(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = text(c, v, f);

	(void)obj;
	if (s != NULL && (c->f->materialize = kiln_mat_mode_parse(s)) == KILN_MAT_UNSET)
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "'%s' is not a way to "
		         "materialize outputs: use 'copy' (the default: files of their "
		         "own) or 'hardlink' (links to the store's blobs)", s);
}
static void k_tool_timeout(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	duration(c, v, f, &c->f->tool_timeout);
}
/* One entry of `path:`: an absolute folder, or one of the project
 * (made absolute when the file is loaded). No ':' — PATH's separator. */
static void
one_path_dir(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = text(c, n, field);

	(void)arg;
	if (s == NULL)
		return;
	if (strchr(s, ':') != NULL) {
		diag_add(c->dg, KILN_DIAG_ERROR, at(c, n), field, "folder '%s' has a "
		         "':' (give each folder as its own list entry)", s);
		return;
	}
	if (s[0] != '/' && (s = root_path(c, n, s, field)) == NULL)
		return;
	vec_push(c->a, &c->f->path, &s);
}
static void k_path(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->has_path = 1;
	if (v != NULL && v->type == Y_SEQ)
		vec_reserve(c->a, &c->f->path, v->n);
	strings(c, v, f, one_path_dir, NULL);
}
static void
one_source(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = text(c, n, field);

	(void)arg;
	if (s != NULL && (s = root_path(c, n, s, field)) != NULL)
		vec_push(c->a, &c->f->sources, &s);
}
static void k_sources(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->sources_loc = at(c, v);
	strings(c, v, f, one_source, NULL);
}
static void k_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (!want(c, v, Y_MAP, f, "a mapping of profile names to profiles"))
		return;
	for (size_t i = 0; i < v->n; i++) {
		const ynode *k = v->items[2 * i], *p = v->items[2 * i + 1];
		struct desc_profile pr = {.loc = at(c, k)};
		vec_init(&pr.vars, sizeof(kiln_kv));
		if (k->type == Y_SCALAR && kiln_profile_check(k->str) != 0) {
			diag_add(c->dg, KILN_DIAG_ERROR, at(c, k), f, "profile name '%s': "
			         "use 1-64 of letters, digits, '_', '-', '.'", k->str);
			continue;
		}
		if ((pr.name = text(c, k, f)) == NULL)
			continue;
		if (p->type == Y_SCALAR && p->len == 0) {
			vec_push(c->a, &c->f->profiles, &pr); /* "pc:" alone */
			continue;
		}
		if (want(c, p, Y_MAP, path_field(c, f, pr.name), "a profile (inherits, vars)"))
			map_walk(c, p, path_field(c, f, pr.name), profile_fields,
			         sizeof profile_fields / sizeof profile_fields[0], &pr);
		vec_push(c->a, &c->f->profiles, &pr);
	}
}
static void k_tools(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (want(c, v, Y_MAP, f, "a mapping of tool names to tools"))
		for (size_t i = 0; i < v->n; i++)
			one_tool(c, v->items[2 * i], v->items[2 * i + 1]);
}
static void k_rules(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (want(c, v, Y_SEQ, f, "a list of rules") &&
	    vec_reserve(c->a, &c->f->rules, c->f->rules.n + v->n) == 0)
		for (size_t i = 0; i < v->n; i++)
			one_rule(c, v->items[i], (int)i);
}
static void k_assets(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (want(c, v, Y_SEQ, f, "a list of assets") &&
	    vec_reserve(c->a, &c->f->assets, c->f->assets.n + v->n) == 0)
		for (size_t i = 0; i < v->n; i++)
			one_asset(c, v->items[i], (int)i);
}
static void k_bundles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (!want(c, v, Y_MAP, f, "a mapping of bundle names to lists of URLs"))
		return;
	for (size_t i = 0; i < v->n; i++) {
		const ynode *k = v->items[2 * i];
		struct desc_bundle b = {name_of(c, k, f, "bundle"), {0}, at(c, k)};
		vec_init(&b.patterns, sizeof(struct desc_input));
		if (b.name == NULL)
			continue;
		strings(c, v->items[2 * i + 1], path_field(c, f, b.name),
		        one_bundle_pattern, &b.patterns);
		vec_push(c->a, &c->f->bundles, &b);
	}
}
static void k_root_only(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	diag_add(c->dg, KILN_DIAG_ERROR, at(c, v), f, "'%s' belongs in the project's "
	         "kiln.yaml, not in a *.kiln.yaml file", f);
}

static const struct field root_fields[] = {
	{"kiln", k_kiln}, {"project", k_project}, {"sources", k_sources},
	{"profiles", k_profiles}, {"tools", k_tools}, {"rules", k_rules},
	{"assets", k_assets}, {"bundles", k_bundles}, {"materialize", k_materialize},
	{"tool_timeout", k_tool_timeout}, {"path", k_path},
};
static const struct field sub_fields[] = {
	{"kiln", k_kiln}, {"tools", k_tools}, {"rules", k_rules},
	{"assets", k_assets}, {"bundles", k_bundles}, {"project", k_root_only},
	{"sources", k_root_only}, {"profiles", k_root_only},
	{"materialize", k_root_only}, {"tool_timeout", k_root_only},
	{"path", k_root_only},
};

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
		goto out;
	}
	/* The model copies what it keeps of the tree but its strings: the
	 * tree goes when the file is loaded (~100 bytes a YAML node). */
	rv = ytree_parse(path, f->relpath, &tree, &f->a, &f->dg, &top);
	if (rv == KILN_ENOMEM)
		goto out;
	if (rv == 0 && top == NULL && f->is_root)
		diag_add(&f->dg, KILN_DIAG_ERROR, at(&c, NULL), "", "the file is empty "
		         "(expected 'kiln: 1', 'project' and 'profiles')");
	rv = 0;
	if (top == NULL || !want(&c, top, Y_MAP, "", "a mapping of kiln keys (kiln, "
	                         "project, sources, profiles, tools, rules, assets, bundles)"))
		goto out;
	if (f->is_root) {
		map_walk(&c, top, "", root_fields, sizeof root_fields / sizeof root_fields[0], NULL);
		require(&c, top, "", "kiln", "the format version: 'kiln: 1'");
		require(&c, top, "", "project", "the project's name");
		require(&c, top, "", "profiles", "at least one profile, e.g. 'pc:'");
		path_join(&c, root);
	} else {
		map_walk(&c, top, "", sub_fields, sizeof sub_fields / sizeof sub_fields[0], NULL);
	}
	rv = f->a.failed ? KILN_ENOMEM : 0;
out:
	arena_free(&tree);
	return rv;
}

void
desc_file_free(struct desc_file *f)
{
	arena_free(&f->a);
}
