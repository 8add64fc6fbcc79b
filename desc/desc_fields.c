/* desc_fields.c — the YAML field tables: every key kiln.yaml and a
 * *.kiln.yaml may hold, and how each one is parsed.
 *
 * One table per mapping: the top level (root_fields for kiln.yaml,
 * sub_fields for a *.kiln.yaml, where the project-wide keys are errors),
 * a rule, an asset, a tool and a profile; each entry names the function
 * that reads that key's value into the file's model (struct desc_file in
 * desc_int.h). Paths written in a *.kiln.yaml are relative to its folder
 * and are stored relative to the project root. When you add a key, add it
 * to its table here and to docs/format.md. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "load_int.h"
#include "kiln_store.h"

#define FORMAT_VERSION 1

/* ---- fields shared by rules and assets ---- */

static void
one_input(struct ld *c, const ynode *n, const char *field, void *arg)
{
	struct desc_input in = {ld_text(c, n, field), NULL, ld_at(c, n), field};

	if (in.text == NULL)
		return;
	if (in.text[0] == '@') {
		if (kiln_url_check(in.text + 1) != 0) {
			diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "'%s' is not a "
			         "valid URL reference ('@' then a URL or URL glob)", in.text);
			return;
		}
	} else if ((in.path = ld_root_path(c, n, in.text, field)) == NULL) {
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
	ld_strings(c, v, f, one_input, inputs);
}

static void
one_profile_name(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = ld_text(c, n, field);

	if (s != NULL)
		vec_push(c->a, arg, &s);
}

/* A plain file name, or a folder's name and one trailing '/' (the
 * slash is taken off o->file and said by o->folder). */
static int
output_file_ok(struct ld *c, const ynode *n, kiln_output *o, const char *field)
{
	size_t len = strlen(o->file);
	char *name;

	if (len > 1 && o->file[len - 1] == '/') {
		if ((name = arena_strndup(c->a, o->file, len - 1)) == NULL)
			return 0;
		o->file = name;
		o->folder = 1;
	}
	if (strchr(o->file, '/') == NULL && strcmp(o->file, ".") != 0 &&
	    strcmp(o->file, "..") != 0 && o->file[0] != '\0')
		return 1;
	diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "output file '%s%s' must be "
	         "a plain file name, or a folder's name ending in '/' (tools write into "
	         "their own scratch folder)", o->file, o->folder ? "/" : "");
	return 0;
}

static void
outputs(struct ld *c, const ynode *n, vec *out, const char *field)
{
	if (n != NULL && n->type == Y_SCALAR) {
		kiln_output o = {"out", ld_text(c, n, field), 0};
		if (o.file != NULL && output_file_ok(c, n, &o, field))
			vec_push(c->a, out, &o);
		return;
	}
	if (!ld_want(c, n, Y_MAP, field, "a file name, or a mapping of output names "
	             "to file names"))
		return;
	for (size_t i = 0; i < n->n; i++) {
		const ynode *k = n->items[2 * i], *v = n->items[2 * i + 1];
		const char *f = ld_field(c, field, k->type == Y_SCALAR ? k->str : "?");
		kiln_output o = {ld_name(c, k, field, "output"), ld_text(c, v, f), 0};
		if (o.name != NULL && o.file != NULL && output_file_ok(c, v, &o, f))
			vec_push(c->a, out, &o);
	}
}

/* ---- rules ---- */

#define RULE (*(struct desc_rule *)obj)

static void r_match(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);
	RULE.match_loc = ld_at(c, v);
	if (s != NULL)
		RULE.match = ld_root_path(c, v, s, f);
}
static void r_url(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.url = ld_text(c, v, f);
	RULE.url_loc = ld_at(c, v);
}
static void r_tool(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.tool = ld_text(c, v, f);
	RULE.tool_loc = ld_at(c, v);
}
static void r_inputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	inputs_field(c, v, f, &RULE.inputs);
}
static void r_outputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.outputs_loc = ld_at(c, v);
	outputs(c, v, &RULE.outputs, f);
}
static void r_params(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.params = ld_params(c, v, f);
}
static void r_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	RULE.profiles_loc = ld_at(c, v);
	ld_strings(c, v, f, one_profile_name, &RULE.profiles);
}

static void r_intermediate(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ld_bool(c, v, f, &RULE.intermediate);
}

static const struct field rule_fields[] = {
	{"match", r_match}, {"url", r_url}, {"tool", r_tool}, {"inputs", r_inputs},
	{"outputs", r_outputs}, {"params", r_params}, {"profiles", r_profiles},
	{"intermediate", r_intermediate},
};

static void
one_rule(struct ld *c, const ynode *n, int index)
{
	struct desc_rule r = {.loc = ld_at(c, n), .index = index};
	const char *path = arena_printf(c->a, "rules[%d]", index);

	vec_init(&r.inputs, sizeof(struct desc_input));
	vec_init(&r.outputs, sizeof(kiln_output));
	vec_init(&r.profiles, sizeof(const char *));
	if (!ld_want(c, n, Y_MAP, path, "a rule (a mapping with match, url and tool)"))
		return;
	ld_map_walk(c, n, path, rule_fields, sizeof rule_fields / sizeof rule_fields[0], &r);
	ld_require(c, n, path, "match", "the glob of source files this rule builds");
	ld_require(c, n, path, "url", "the URL of each step, e.g. \"sprites/${match.path}\"");
	ld_require(c, n, path, "tool", "the tool that builds each match");
	if (r.match && r.url && r.tool)
		vec_push(c->a, &c->f->rules, &r);
}

/* ---- assets ---- */

#define ASSET (*(struct desc_asset *)obj)

static void a_url(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);
	ASSET.url_loc = ld_at(c, v);
	if (s != NULL && kiln_url_check(s) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "URL '%s' must be "
		         "'/'-separated names without '..', '.', empty segments, a "
		         "leading '/', backslashes or control characters (at most 400 "
		         "bytes)", s);
	else
		ASSET.url = s;
}
static void a_tool(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.tool = ld_text(c, v, f);
	ASSET.tool_loc = ld_at(c, v);
}
static void a_inputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	inputs_field(c, v, f, &ASSET.inputs);
}
static void a_outputs(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.outputs_loc = ld_at(c, v);
	outputs(c, v, &ASSET.outputs, f);
}
static void a_params(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.params = ld_params(c, v, f);
}
static void a_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ASSET.profiles_loc = ld_at(c, v);
	ld_strings(c, v, f, one_profile_name, &ASSET.profiles);
}

static void a_intermediate(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ld_bool(c, v, f, &ASSET.intermediate);
}

static const struct field asset_fields[] = {
	{"url", a_url}, {"tool", a_tool}, {"inputs", a_inputs},
	{"outputs", a_outputs}, {"params", a_params}, {"profiles", a_profiles},
	{"intermediate", a_intermediate},
};

static void
one_asset(struct ld *c, const ynode *n, int index)
{
	struct desc_asset as = {.loc = ld_at(c, n), .index = index};
	const char *path = arena_printf(c->a, "assets[%d]", index);

	vec_init(&as.inputs, sizeof(struct desc_input));
	vec_init(&as.outputs, sizeof(kiln_output));
	vec_init(&as.profiles, sizeof(const char *));
	if (!ld_want(c, n, Y_MAP, path, "an asset (a mapping with url and tool)"))
		return;
	ld_map_walk(c, n, path, asset_fields, sizeof asset_fields / sizeof asset_fields[0], &as);
	ld_require(c, n, path, "url", "the URL this asset is known by");
	ld_require(c, n, path, "tool", "the tool that builds it");
	if (as.url && as.tool)
		vec_push(c->a, &c->f->assets, &as);
}

/* The longest time limit: a year, far past any tool, far within 32 bits. */
#define TIMEOUT_MAX_S (366u * 86400u)

/* A duration: a whole number with s, m, h or d after it (none: seconds),
 * as `kiln gc --max-age` reads one; 0 means no limit. */
int
kiln_duration_parse(const char *s, uint32_t *secs)
{
	const char *p;
	unsigned long long n = 0, mul = 1;

	if (s == NULL)
		return KILN_EINVAL;
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
	if (*p != '\0' || n * mul > TIMEOUT_MAX_S)
		return KILN_EINVAL;
	*secs = (uint32_t)(n * mul);
	return 0;
}

static void
duration(struct ld *c, const ynode *v, const char *f, kiln_timeout *out)
{
	const char *s = ld_text(c, v, f);
	uint32_t secs;

	if (s == NULL)
		return;
	if (kiln_duration_parse(s, &secs) != 0) {
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "not a duration: '%s' "
		         "(a whole number with s, m, h or d after it, e.g. 30s or 5m, "
		         "at most 366d; 0 for no limit)", s);
		return;
	}
	*out = (kiln_timeout){s, secs, ld_at(c, v)};
}

/* ---- tools ---- */

#define TOOL (*(kiln_tool *)obj)

static void
one_arg(struct ld *c, const ynode *n, const char *field, void *arg)
{
	kiln_tool *t = arg;
	/* An empty argv item is legitimate; anything but a scalar is not. */
	const char *s = n && n->type == Y_SCALAR ? n->str : ld_text(c, n, field);
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
	ld_strings(c, v, f, one_arg, obj);
}
static void t_version(struct ld *c, const ynode *v, void *obj, const char *f)
{
	TOOL.version = ld_text(c, v, f);
}
static void t_env(struct ld *c, const ynode *v, void *obj, const char *f)
{
	if (!ld_want(c, v, Y_MAP, f, "a mapping of variable names to values"))
		return;
	TOOL.env = arena_alloc(c->a, (v->n ? v->n : 1) * sizeof *TOOL.env);
	for (size_t i = 0; TOOL.env && i < v->n; i++) {
		const ynode *k = v->items[2 * i], *val = v->items[2 * i + 1];
		kiln_kv kv = {ld_name(c, k, f, "environment variable"),
		              ld_want(c, val, Y_SCALAR, f, "a string") ? val->str : NULL,
		              ld_at(c, val)};
		if (kv.key && kv.value)
			TOOL.env[TOOL.nenv++] = kv;
	}
}
static void t_shell(struct ld *c, const ynode *v, void *obj, const char *f)
{
	int b;

	if (ld_bool(c, v, f, &b) && b)
		TOOL.shell |= 1;
}
static void t_depfile(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ld_bool(c, v, f, &TOOL.depfile);
}

static void t_trace(struct ld *c, const ynode *v, void *obj, const char *f)
{
	int b;

	if (ld_bool(c, v, f, &b))
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
	kiln_tool t = {.loc = ld_at(c, k), .version = ""};
	const char *path;

	t.name = ld_name(c, k, "tools", "tool");
	if (t.name == NULL)
		return;
	path = arena_printf(c->a, "tools.%s", t.name);
	if (!ld_want(c, n, Y_MAP, path, "a tool (a mapping with run)"))
		return;
	ld_map_walk(c, n, path, tool_fields, sizeof tool_fields / sizeof tool_fields[0], &t);
	ld_require(c, n, path, "run", "the command: a list of arguments");
	if ((t.shell & 2) && !(t.shell & 1))
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), ld_field(c, path, "run"),
		         "expected a list of arguments (tools run without a shell; set "
		         "'shell: true' to run one command line through /bin/sh)");
	else if ((t.shell & 1) && !(t.shell & 2) && t.nrun > 0)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), ld_field(c, path, "run"),
		         "with 'shell: true', run is one command line (a string)");
	t.shell = t.shell & 1;
	if (t.nrun > 0)
		vec_push(c->a, &c->f->tools, &t);
}

/* ---- profiles (kiln.yaml) ---- */

#define PROFILE (*(struct desc_profile *)obj)

static void p_inherits(struct ld *c, const ynode *v, void *obj, const char *f)
{
	PROFILE.inherits = ld_text(c, v, f);
	PROFILE.inherits_loc = ld_at(c, v);
}
static void p_vars(struct ld *c, const ynode *v, void *obj, const char *f)
{
	static const char *const reserved[] = {"in", "out", "depfile", "param",
	                                       "match", "profile", "project"};
	if (!ld_want(c, v, Y_MAP, f, "a mapping of variable names to values"))
		return;
	for (size_t i = 0; i < v->n; i++) {
		const ynode *k = v->items[2 * i], *val = v->items[2 * i + 1];
		kiln_kv kv = {ld_name(c, k, f, "variable"), NULL, ld_at(c, val)};
		for (size_t r = 0; kv.key && r < sizeof reserved / sizeof *reserved; r++) {
			size_t rl = strlen(reserved[r]);
			if (strncmp(kv.key, reserved[r], rl) == 0 &&
			    (kv.key[rl] == '\0' || kv.key[rl] == '.')) {
				diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, k), f, "variable name "
				         "'%s' is reserved", kv.key);
				kv.key = NULL;
			}
		}
		if (ld_want(c, val, Y_SCALAR, ld_field(c, f, k->str), "a single value"))
			kv.value = val->str;
		if (kv.key && kv.value)
			vec_push(c->a, &PROFILE.vars, &kv);
	}
}

static const struct field profile_fields[] = {
	{"inherits", p_inherits}, {"vars", p_vars},
};

/* ---- the top level ---- */

static void k_kiln(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (v == NULL || v->type != Y_SCALAR || ld_scalar_type(v) != KILN_VAL_INT)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "expected the format "
		         "version, an integer (1)");
	else if (atoi(v->str) != FORMAT_VERSION)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "format version %s is not "
		         "one this kiln reads (it reads %d)", v->str, FORMAT_VERSION);
}
static void k_project(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->project = ld_text(c, v, f);
}
static void k_materialize(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);

	(void)obj;
	if (s != NULL && (c->f->materialize = kiln_mat_mode_parse(s)) == KILN_MAT_UNSET)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "'%s' is not a way to "
		         "materialize outputs: use 'copy' (the default: files of their "
		         "own) or 'hardlink' (links to the store's blobs)", s);
}
static void k_tool_timeout(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	duration(c, v, f, &c->f->tool_timeout);
}
/* ---- cache: the shared cache (docs/cache.md, "Using a shared cache") ---- */

#define CACHE (*(kiln_cache_desc *)obj)

static void c_url(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);

	/* kiln_cache_open checks the rest when the daemon opens it; the
	 * scheme here, where a typo can be pointed at */
	if (s != NULL && strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "'%s' is not an http:// "
		         "or https:// URL", s);
	else
		CACHE.url = s;
}
static void c_mode(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);

	if (s != NULL && (CACHE.mode = kiln_cache_mode_parse(s)) == KILN_CACHE_MODE_UNSET)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "'%s' is not a cache mode: "
		         "use 'read' (look up, never upload), 'readwrite' or 'off'", s);
}
static void c_basic(struct ld *c, const ynode *v, void *obj, const char *f)
{
	CACHE.basic_auth_file = ld_text(c, v, f);
}
static void c_bearer(struct ld *c, const ynode *v, void *obj, const char *f)
{
	CACHE.bearer_token_file = ld_text(c, v, f);
}
static void c_ca(struct ld *c, const ynode *v, void *obj, const char *f)
{
	CACHE.ca_file = ld_text(c, v, f);
}
static void c_sign(struct ld *c, const ynode *v, void *obj, const char *f)
{
	CACHE.sign_key_file = ld_text(c, v, f);
}
static void c_timeout(struct ld *c, const ynode *v, void *obj, const char *f)
{
	duration(c, v, f, &CACHE.timeout);
}
static void c_connect_timeout(struct ld *c, const ynode *v, void *obj, const char *f)
{
	duration(c, v, f, &CACHE.connect_timeout);
}

static const struct field cache_fields[] = {
	{"url", c_url}, {"mode", c_mode}, {"basic_auth_file", c_basic},
	{"bearer_token_file", c_bearer}, {"ca_file", c_ca}, {"timeout", c_timeout},
	{"connect_timeout", c_connect_timeout}, {"sign_key_file", c_sign},
};

/* `cache:` into cd. The project's must name its server (a mode alone
 * means nothing there); a user's file may give only what it changes
 * (a mode, credentials) over the project's. */
static void
cache_section(struct ld *c, const ynode *v, const char *f, kiln_cache_desc *cd,
              int need_url)
{
	if (!ld_want(c, v, Y_MAP, f, "a mapping (url, mode, basic_auth_file, "
	             "bearer_token_file, ca_file, sign_key_file, timeout, connect_timeout)"))
		return;
	cd->loc = ld_at(c, v);
	ld_map_walk(c, v, f, cache_fields, sizeof cache_fields / sizeof cache_fields[0], cd);
	if (cd->basic_auth_file != NULL && cd->bearer_token_file != NULL)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "give basic_auth_file "
		         "or bearer_token_file, not both");
	if (need_url && cd->url == NULL && cd->mode != KILN_CACHE_MODE_OFF)
		ld_require(c, v, f, "url", "the cache server's http:// or https:// URL");
}

static void k_cache(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	cache_section(c, v, f, &c->f->cache, 1);
}

static void k_user_cache(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	cache_section(c, v, f, &c->f->cache, 0);
}

/* One entry of `path:`: an absolute folder, or one of the project
 * (made absolute when the file is loaded). No ':' — PATH's separator. */
static void
one_path_dir(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = ld_text(c, n, field);

	(void)arg;
	if (s == NULL)
		return;
	if (strchr(s, ':') != NULL) {
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, n), field, "folder '%s' has a "
		         "':' (give each folder as its own list entry)", s);
		return;
	}
	if (s[0] != '/' && (s = ld_root_path(c, n, s, field)) == NULL)
		return;
	vec_push(c->a, &c->f->path, &s);
}
static void k_path(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->has_path = 1;
	if (v != NULL && v->type == Y_SEQ)
		vec_reserve(c->a, &c->f->path, v->n);
	ld_strings(c, v, f, one_path_dir, NULL);
}
static void
one_source(struct ld *c, const ynode *n, const char *field, void *arg)
{
	const char *s = ld_text(c, n, field);

	(void)arg;
	if (s != NULL && (s = ld_root_path(c, n, s, field)) != NULL)
		vec_push(c->a, &c->f->sources, &s);
}
static void k_sources(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	c->f->sources_loc = ld_at(c, v);
	ld_strings(c, v, f, one_source, NULL);
}
static void k_profiles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (!ld_want(c, v, Y_MAP, f, "a mapping of profile names to profiles"))
		return;
	for (size_t i = 0; i < v->n; i++) {
		const ynode *k = v->items[2 * i], *p = v->items[2 * i + 1];
		struct desc_profile pr = {.loc = ld_at(c, k)};
		vec_init(&pr.vars, sizeof(kiln_kv));
		if (k->type == Y_SCALAR && kiln_profile_check(k->str) != 0) {
			diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, k), f, "profile name '%s': "
			         "use 1-64 of letters, digits, '_', '-', '.'", k->str);
			continue;
		}
		if ((pr.name = ld_text(c, k, f)) == NULL)
			continue;
		if (p->type == Y_SCALAR && p->len == 0) {
			vec_push(c->a, &c->f->profiles, &pr); /* "pc:" alone */
			continue;
		}
		if (ld_want(c, p, Y_MAP, ld_field(c, f, pr.name), "a profile (inherits, vars)"))
			ld_map_walk(c, p, ld_field(c, f, pr.name), profile_fields,
			            sizeof profile_fields / sizeof profile_fields[0], &pr);
		vec_push(c->a, &c->f->profiles, &pr);
	}
}
static void k_tools(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (ld_want(c, v, Y_MAP, f, "a mapping of tool names to tools"))
		for (size_t i = 0; i < v->n; i++)
			one_tool(c, v->items[2 * i], v->items[2 * i + 1]);
}
static void k_rules(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (ld_want(c, v, Y_SEQ, f, "a list of rules") &&
	    vec_reserve(c->a, &c->f->rules, c->f->rules.n + v->n) == 0)
		for (size_t i = 0; i < v->n; i++)
			one_rule(c, v->items[i], (int)i);
}
static void k_assets(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (ld_want(c, v, Y_SEQ, f, "a list of assets") &&
	    vec_reserve(c->a, &c->f->assets, c->f->assets.n + v->n) == 0)
		for (size_t i = 0; i < v->n; i++)
			one_asset(c, v->items[i], (int)i);
}
static void k_bundles(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	if (!ld_want(c, v, Y_MAP, f, "a mapping of bundle names to bundles"))
		return;
	for (size_t i = 0; i < v->n; i++)
		desc_bundle_read(c, v->items[2 * i], v->items[2 * i + 1], f);
}
static void k_root_only(struct ld *c, const ynode *v, void *obj, const char *f)
{
	(void)obj;
	diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "'%s' belongs in the project's "
	         "kiln.yaml, not in a *.kiln.yaml file", f);
}

static const struct field root_fields[] = {
	{"kiln", k_kiln}, {"project", k_project}, {"sources", k_sources},
	{"profiles", k_profiles}, {"tools", k_tools}, {"rules", k_rules},
	{"assets", k_assets}, {"bundles", k_bundles}, {"materialize", k_materialize},
	{"tool_timeout", k_tool_timeout}, {"path", k_path}, {"cache", k_cache},
};
static const struct field sub_fields[] = {
	{"kiln", k_kiln}, {"tools", k_tools}, {"rules", k_rules},
	{"assets", k_assets}, {"bundles", k_bundles}, {"project", k_root_only},
	{"sources", k_root_only}, {"profiles", k_root_only},
	{"materialize", k_root_only}, {"tool_timeout", k_root_only},
	{"path", k_root_only}, {"cache", k_root_only},
};

void
desc_fields_root(struct ld *c, const ynode *top)
{
	ld_map_walk(c, top, "", root_fields, sizeof root_fields / sizeof root_fields[0], NULL);
	ld_require(c, top, "", "kiln", "the format version: 'kiln: 1'");
	ld_require(c, top, "", "project", "the project's name");
	ld_require(c, top, "", "profiles", "at least one profile, e.g. 'pc:'");
}

void
desc_fields_sub(struct ld *c, const ynode *top)
{
	ld_map_walk(c, top, "", sub_fields, sizeof sub_fields / sizeof sub_fields[0], NULL);
}

/* A user's own file holds settings of this machine only: nothing that
 * would make one machine's build differ from another's. */
static const struct field user_fields[] = {
	{"cache", k_user_cache},
};

void
desc_fields_user(struct ld *c, const ynode *top)
{
	ld_map_walk(c, top, "", user_fields, sizeof user_fields / sizeof user_fields[0], NULL);
}
