/* test_desc — the description loader through its API: reloading one file
 * replaces exactly what it defined; errors and recovery on reload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_desc.h"
#include "testutil.h"

static const char root_yaml[] =
	"kiln: 1\n"
	"project: t\n"
	"sources: [art]\n"
	"profiles: { pc: , mobile: { inherits: pc } }\n"
	"tools:\n"
	"  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
	"rules:\n"
	"  - { match: \"art/**/*.png\", url: \"img/${match.path}\", tool: copy }\n";

static const char ui_yaml_v1[] =
	"assets:\n"
	"  - { url: ui/atlas, tool: copy, inputs: [\"@img/ui/**\"] }\n"
	"  - { url: ui/font, tool: copy, inputs: [font.png] }\n";

static const char ui_yaml_v2[] =
	"tools:\n"
	"  pack: { run: [pack, \"${in...}\", -o, \"${out}\"] }\n"
	"assets:\n"
	"  - { url: ui/atlas, tool: pack, inputs: [\"@img/ui/**\"] }\n";

static void
project(void **state)
{
	assert_int_equal(mkdir(tu_path(state, "art"), 0755), 0);
	assert_int_equal(mkdir(tu_path(state, "art/ui"), 0755), 0);
	tu_write_file(tu_path(state, "kiln.yaml"), root_yaml, strlen(root_yaml));
	tu_write_file(tu_path(state, "art/ui/button.png"), "b", 1);
	tu_write_file(tu_path(state, "art/ui/font.png"), "f", 1);
	tu_write_file(tu_path(state, "art/ui/ui.kiln.yaml"), ui_yaml_v1, strlen(ui_yaml_v1));
	tu_write_file(tu_path(state, "art/hero.png"), "h", 1);
}

static const kiln_step *
step(const kiln_plan *p, const char *url)
{
	for (size_t i = 0; i < p->nsteps; i++)
		if (strcmp(p->steps[i].url, url) == 0)
			return &p->steps[i];
	return NULL;
}

static void
print_diags(const kiln_desc *d)
{
	const kiln_diag *g;
	size_t n = kiln_desc_diags(d, &g);

	for (size_t i = 0; i < n; i++)
		print_message("# %s:%d:%d: %s: %s\n", g[i].loc.file, g[i].loc.line,
		              g[i].loc.col, g[i].field, g[i].msg);
}

static void
reload_replaces_exactly_what_the_file_defined(void **state)
{
	kiln_desc *d;
	const kiln_plan *p;
	const kiln_step *atlas;

	project(state);
	assert_kiln(0, kiln_desc_load(tu_dir(state), &d));
	p = kiln_desc_plan(d, "mobile");
	assert_non_null(p);
	/* rule steps for 3 pngs + 2 assets from art/ui/ui.kiln.yaml */
	assert_int_equal(p->nsteps, 5);
	atlas = step(p, "ui/atlas");
	assert_non_null(atlas);
	assert_string_equal(atlas->tool->name, "copy");
	assert_string_equal(atlas->loc.file, "art/ui/ui.kiln.yaml");
	assert_non_null(step(p, "ui/font"));
	assert_string_equal(step(p, "ui/font")->inputs[0], "art/ui/font.png");

	tu_write_file(tu_path(state, "art/ui/ui.kiln.yaml"), ui_yaml_v2, strlen(ui_yaml_v2));
	assert_kiln(0, kiln_desc_reload(d, "art/ui/ui.kiln.yaml"));
	p = kiln_desc_plan(d, "mobile");
	assert_int_equal(p->nsteps, 4);
	assert_null(step(p, "ui/font"));
	atlas = step(p, "ui/atlas");
	assert_string_equal(atlas->tool->name, "pack");
	assert_int_equal(atlas->nneeds, 2);
	assert_string_equal(atlas->needs[0], "img/ui/button");
	assert_string_equal(atlas->needs[1], "img/ui/font");
	/* the root's rule steps are untouched */
	assert_non_null(step(p, "img/hero"));
	kiln_desc_free(d);
}

static void
reload_of_a_deleted_or_new_file(void **state)
{
	kiln_desc *d;
	const char *const *files;

	project(state);
	assert_kiln(0, kiln_desc_load(tu_dir(state), &d));
	assert_int_equal(kiln_desc_files(d, &files), 2);
	unlink(tu_path(state, "art/ui/ui.kiln.yaml"));
	assert_kiln(0, kiln_desc_reload(d, "art/ui/ui.kiln.yaml"));
	assert_int_equal(kiln_desc_files(d, &files), 1);
	assert_null(step(kiln_desc_plan(d, "pc"), "ui/atlas"));
	assert_int_equal(kiln_desc_plan(d, "pc")->nsteps, 3);

	tu_write_file(tu_path(state, "art/new.kiln.yaml"), ui_yaml_v2, strlen(ui_yaml_v2));
	assert_kiln(0, kiln_desc_reload(d, "art/new.kiln.yaml"));
	assert_int_equal(kiln_desc_files(d, &files), 2);
	assert_non_null(step(kiln_desc_plan(d, "pc"), "ui/atlas"));
	assert_kiln(KILN_EINVAL, kiln_desc_reload(d, "art/hero.png"));
	assert_kiln(KILN_EINVAL, kiln_desc_reload(d, "../x.kiln.yaml"));
	kiln_desc_free(d);
}

static void
a_reload_that_breaks_the_file_reports_it_and_a_fix_recovers(void **state)
{
	static const char broken[] = "assets:\n  - { url: ui/atlas, tool: nope }\n";
	const kiln_diag *g;
	kiln_desc *d;

	project(state);
	assert_kiln(0, kiln_desc_load(tu_dir(state), &d));
	tu_write_file(tu_path(state, "art/ui/ui.kiln.yaml"), broken, strlen(broken));
	assert_kiln(KILN_EINVAL, kiln_desc_reload(d, "art/ui/ui.kiln.yaml"));
	assert_int_equal(kiln_desc_nerrors(d), 1);
	assert_int_equal(kiln_desc_diags(d, &g), 1);
	assert_string_equal(g[0].loc.file, "art/ui/ui.kiln.yaml");
	assert_int_equal(g[0].loc.line, 2);
	assert_string_equal(g[0].field, "assets[0].tool");
	assert_non_null(strstr(g[0].msg, "unknown tool 'nope'"));

	tu_write_file(tu_path(state, "art/ui/ui.kiln.yaml"), ui_yaml_v1, strlen(ui_yaml_v1));
	if (kiln_desc_reload(d, "art/ui/ui.kiln.yaml") != 0)
		print_diags(d);
	assert_int_equal(kiln_desc_nerrors(d), 0);
	assert_int_equal(kiln_desc_plan(d, "pc")->nsteps, 5);
	kiln_desc_free(d);
}

static void
reload_of_kiln_yaml_rereads_everything(void **state)
{
	static const char two_profiles_more[] =
		"kiln: 1\nproject: t2\nsources: [art]\n"
		"profiles: { pc: , mobile: , editor: }\n"
		"tools:\n  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
		/* a narrower rule: ui/atlas's "@img/ui/..." must still match
		 * a step (a glob input matching nothing is an error) */
		"rules:\n  - { match: \"art/ui/*.png\", url: \"img/ui/${match.name}\", tool: copy }\n";
	const char *const *names;
	kiln_desc *d;

	project(state);
	assert_kiln(0, kiln_desc_load(tu_dir(state), &d));
	tu_write_file(tu_path(state, "kiln.yaml"), two_profiles_more, strlen(two_profiles_more));
	assert_kiln(0, kiln_desc_reload(d, "kiln.yaml"));
	assert_int_equal(kiln_desc_profiles(d, &names), 3);
	assert_string_equal(kiln_desc_project(d), "t2");
	/* the old rule is gone; the sub-file's assets remain */
	assert_null(step(kiln_desc_plan(d, "editor"), "img/hero"));
	assert_non_null(step(kiln_desc_plan(d, "editor"), "img/ui/button"));
	assert_non_null(step(kiln_desc_plan(d, "editor"), "ui/font"));
	kiln_desc_free(d);
}

static void
a_list_param_spreads_into_one_argv_item_each(void **state)
{
	static const char yaml[] =
		"kiln: 1\nproject: t\nsources: [art]\nprofiles: { pc: }\n"
		"tools:\n"
		"  pack: { run: [pack, \"${param.flags...}\", --, \"${in...}\"] }\n"
		"assets:\n"
		"  - { url: a, tool: pack, inputs: [art/hero.png],\n"
		"      params: { flags: [-q, \"-o x y\", 3] } }\n"
		"  - { url: b, tool: pack, inputs: [art/hero.png], params: { flags: [] } }\n";
	static const char bad_c[] =
		"  - { url: c, tool: pack, inputs: [art/hero.png],\n"
		"      params: { flags: [[nested]] } }\n";
	char both[sizeof yaml + sizeof bad_c];
	const kiln_diag *g;
	const kiln_step *a, *b;
	kiln_desc *d;

	project(state);
	snprintf(both, sizeof both, "%s%s", yaml, bad_c);
	tu_write_file(tu_path(state, "kiln.yaml"), both, strlen(both));
	unlink(tu_path(state, "art/ui/ui.kiln.yaml"));
	assert_kiln(KILN_EINVAL, kiln_desc_load(tu_dir(state), &d));
	/* c's list holds a list: refused, naming the tool */
	assert_int_equal(kiln_desc_diags(d, &g), 1);
	assert_non_null(strstr(g[0].msg, "single values"));
	assert_non_null(strstr(g[0].msg, "step 'c'"));
	kiln_desc_free(d);

	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	if (kiln_desc_load(tu_dir(state), &d) != 0)
		print_diags(d);
	a = step(kiln_desc_plan(d, "pc"), "a");
	b = step(kiln_desc_plan(d, "pc"), "b");
	assert_non_null(a);
	assert_int_equal(a->nargv, 6);
	assert_string_equal(a->argv[1], "-q");
	assert_string_equal(a->argv[2], "-o x y");
	assert_string_equal(a->argv[3], "3");
	assert_string_equal(a->argv[4], "--");
	assert_string_equal(a->argv[5], "${in...}");
	assert_int_equal(b->nargv, 3);
	assert_string_equal(b->argv[1], "--");
	kiln_desc_free(d);
}

static void
a_missing_kiln_yaml_is_not_found(void **state)
{
	kiln_desc *d = (kiln_desc *)1;

	assert_kiln(KILN_ENOTFOUND, kiln_desc_load(tu_dir(state), &d));
	assert_null(d);
}

/* The number of warnings whose message holds text. */
static size_t
warnings_with(const kiln_desc *d, const char *text)
{
	const kiln_diag *g;
	size_t n = kiln_desc_diags(d, &g), found = 0;

	for (size_t i = 0; i < n; i++)
		found += g[i].level == KILN_DIAG_WARNING && strstr(g[i].msg, text) != NULL;
	return found;
}

static void
a_missing_input_stays_an_input_with_a_warning_and_an_odd_name_is_skipped(void **state)
{
	static const char ui[] =
		"assets:\n"
		"  - { url: ui/atlas, tool: copy, inputs: [\"@img/ui/**\"] }\n"
		"  - { url: ui/font, tool: copy, inputs: [gone.png] }\n";
	const kiln_step *font;
	kiln_desc *d;

	project(state);
	tu_write_file(tu_path(state, "art/ui/ui.kiln.yaml"), ui, strlen(ui));
	tu_write_file(tu_path(state, "art/ui/odd\nname.png"), "o", 1);
	if (kiln_desc_load(tu_dir(state), &d) != 0) {
		print_diags(d);
		fail_msg("a missing input or an odd file name refused the project");
	}
	/* the step stays, with the missing file as its input: the build
	 * engine fails that step alone while the file is missing */
	assert_non_null(font = step(kiln_desc_plan(d, "pc"), "ui/font"));
	assert_int_equal(font->ninputs, 1);
	assert_string_equal(font->inputs[0], "art/ui/gone.png");
	assert_int_equal(warnings_with(d, "'art/ui/gone.png' does not exist"), 1);
	/* the oddly named file: no step, one warning naming it escaped */
	assert_int_equal(warnings_with(d, "'art/ui/odd\\x0aname.png' skipped"), 1);
	assert_non_null(step(kiln_desc_plan(d, "pc"), "img/ui/button"));
	assert_null(step(kiln_desc_plan(d, "pc"), "img/ui/odd\nname"));
	assert_int_equal(kiln_desc_nerrors(d), 0);
	kiln_desc_free(d);
}

/* kiln.yaml with materialize: value (NULL: not given), loaded. */
static int
load_materialize(void **state, const char *value, kiln_desc **d)
{
	char yaml[512];

	snprintf(yaml, sizeof yaml, "%s%s%s%s", root_yaml, value ? "materialize: " : "",
	         value ? value : "", value ? "\n" : "");
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	return kiln_desc_load(tu_dir(state), d);
}

static void
materialize_is_copy_or_hardlink_and_anything_else_names_its_line(void **state)
{
	static const struct { const char *value; int rv; kiln_mat_mode mode; } cases[] = {
		{NULL, 0, KILN_MAT_UNSET},
		{"copy", 0, KILN_MAT_COPY},
		{"hardlink", 0, KILN_MAT_HARDLINK},
		{"symlink", KILN_EINVAL, KILN_MAT_UNSET},
		{"[copy]", KILN_EINVAL, KILN_MAT_UNSET},
	};
	const kiln_diag *g;
	kiln_desc *d;

	project(state);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		int rv = load_materialize(state, cases[i].value, &d);
		if (rv != cases[i].rv) {
			print_diags(d);
			fail_msg("materialize: %s loaded with %d, expected %d",
			         cases[i].value ? cases[i].value : "(none)", rv, cases[i].rv);
		}
		assert_int_equal(kiln_desc_materialize(d), cases[i].mode);
		if (rv != 0) {
			assert_int_equal(kiln_desc_diags(d, &g), 1);
			assert_string_equal(g[0].loc.file, "kiln.yaml");
			assert_int_equal(g[0].loc.line, 9);
			assert_int_equal(g[0].loc.col, 14);
			assert_string_equal(g[0].field, "materialize");
		}
		kiln_desc_free(d);
	}
	assert_int_equal(kiln_mat_mode_parse(NULL), KILN_MAT_UNSET);
	assert_int_equal(kiln_mat_mode_parse("Copy"), KILN_MAT_UNSET);
}

/* In a shell tool no value is spliced into the script: it gets "${@K}"
 * and the value is argv[K] (the engine makes it a positional parameter);
 * the engine's own names and "$${" stay as written. Argv tools are as
 * before. */
static void
a_shell_tool_gets_references_not_values(void **state)
{
	static const char yaml[] =
		"kiln: 1\nproject: t\nsources: [art]\n"
		"profiles: { pc: { vars: { q: \"$(touch x) 'a b'\" } } }\n"
		"tools:\n"
		"  sh: { shell: true, run: \"c -q '${q}' ${param.p} \\\"${match.name}\\\""
		" $${HOME} '${in}' ${out}\" }\n"
		"  cp: { run: [cp, \"-q${q}\", \"${in}\", \"${out}\"] }\n"
		"rules:\n"
		"  - { match: \"art/*.png\", url: \"s/${match.name}\", tool: sh,"
		" params: { p: \";|\" } }\n"
		"  - { match: \"art/*.png\", url: \"c/${match.name}\", tool: cp }\n";
	const kiln_step *s, *c;
	kiln_desc *d;

	project(state);
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	unlink(tu_path(state, "art/ui/ui.kiln.yaml"));
	if (kiln_desc_load(tu_dir(state), &d) != 0)
		print_diags(d);
	s = step(kiln_desc_plan(d, "pc"), "s/hero");
	c = step(kiln_desc_plan(d, "pc"), "c/hero");
	assert_non_null(s);
	assert_int_equal(s->nargv, 4);
	assert_string_equal(s->argv[0], "c -q '${@1}' ${@2} \"${@3}\" $${HOME} '${in}' ${out}");
	assert_string_equal(s->argv[1], "$(touch x) 'a b'");
	assert_string_equal(s->argv[2], ";|");
	assert_string_equal(s->argv[3], "hero");
	assert_non_null(c);
	assert_int_equal(c->nargv, 4);
	assert_string_equal(c->argv[1], "-q$(touch x) 'a b'");
	assert_string_equal(c->argv[2], "${in}");
	kiln_desc_free(d);
}

/* ---- the user's settings file (kiln_user_config_*) ---- */

static void
the_user_file_gives_cache_settings_with_paths_beside_it(void **state)
{
	static const char yaml[] =
		"cache:\n"
		"  url: https://cache.studio/kiln\n"
		"  mode: readwrite\n"
		"  bearer_token_file: cache-token\n"
		"  ca_file: /etc/kiln/ca.pem\n"
		"  timeout: 5s\n"
		"  connect_timeout: 1s\n";
	const char *path = tu_path(state, "config.yaml");
	const kiln_cache_desc *cd;
	kiln_user_config *u;

	tu_write_file(path, yaml, strlen(yaml));
	assert_kiln(0, kiln_user_config_load(path, &u));
	assert_int_equal(kiln_user_config_nerrors(u), 0);
	cd = kiln_user_config_cache(u);
	assert_string_equal(cd->url, "https://cache.studio/kiln");
	assert_int_equal(cd->mode, KILN_CACHE_MODE_READWRITE);
	/* relative to the file's folder, wherever the daemon runs */
	assert_string_equal(cd->bearer_token_file, tu_path(state, "cache-token"));
	assert_string_equal(cd->ca_file, "/etc/kiln/ca.pem");
	assert_null(cd->basic_auth_file);
	assert_int_equal(cd->timeout.s, 5);
	assert_int_equal(cd->connect_timeout.s, 1);
	kiln_user_config_free(u);
}

static void
a_user_file_may_give_only_a_mode_and_a_missing_or_empty_one_is_no_settings(void **state)
{
	const char *path = tu_path(state, "config.yaml");
	kiln_user_config *u;

	assert_kiln(KILN_ENOTFOUND, kiln_user_config_load(path, &u));
	assert_null(u);
	assert_kiln(KILN_ENOTFOUND, kiln_user_config_load(tu_path(state, "no/such/x.yaml"), &u));
	tu_write_file(path, "", 0);
	assert_kiln(0, kiln_user_config_load(path, &u));
	assert_int_equal(kiln_user_config_nerrors(u), 0);
	assert_null(kiln_user_config_cache(u)->url);
	kiln_user_config_free(u);
	/* unlike kiln.yaml's, no url is needed: the project's is used */
	tu_write_file(path, "cache:\n  mode: readwrite\n", 25);
	assert_kiln(0, kiln_user_config_load(path, &u));
	assert_int_equal(kiln_user_config_nerrors(u), 0);
	assert_int_equal(kiln_user_config_cache(u)->mode, KILN_CACHE_MODE_READWRITE);
	kiln_user_config_free(u);
}

/* The diagnostic of u at line, or NULL. */
static const kiln_diag *
user_diag_at(const kiln_user_config *u, int line)
{
	const kiln_diag *dg;
	size_t n = kiln_user_config_diags(u, &dg);

	for (size_t i = 0; i < n; i++)
		if (dg[i].loc.line == line)
			return &dg[i];
	return NULL;
}

static void
a_broken_user_file_names_its_path_line_and_field(void **state)
{
	static const char yaml[] =
		"cache:\n"
		"  url: http://cache/kiln\n"
		"  mode: sometimes\n"
		"  urll: http://x\n"
		"  basic_auth_file: a\n"
		"  bearer_token_file: b\n"
		"tools: {}\n";
	const char *path = tu_path(state, "config.yaml");
	const kiln_diag *dg;
	kiln_user_config *u;

	tu_write_file(path, yaml, strlen(yaml));
	assert_kiln(0, kiln_user_config_load(path, &u));
	assert_int_equal(kiln_user_config_nerrors(u), 4);
	assert_non_null(dg = user_diag_at(u, 3));
	assert_string_equal(dg->loc.file, path);
	assert_string_equal(dg->field, "cache.mode");
	assert_non_null(strstr(dg->msg, "'sometimes' is not a cache mode"));
	assert_non_null(dg = user_diag_at(u, 4));
	assert_non_null(strstr(dg->msg, "unknown key 'urll' (did you mean 'url'?)"));
	/* said where the mapping starts */
	assert_non_null(dg = user_diag_at(u, 2));
	assert_non_null(strstr(dg->msg, "not both"));
	/* a build's own settings have no place in a user's file */
	assert_non_null(dg = user_diag_at(u, 7));
	assert_non_null(strstr(dg->msg, "unknown key 'tools'"));
	kiln_user_config_free(u);
	tu_write_file(path, "- a list\n", 9);
	assert_kiln(0, kiln_user_config_load(path, &u));
	assert_int_equal(kiln_user_config_nerrors(u), 1);
	kiln_user_config_free(u);
}

static void
the_user_file_is_under_xdg_config_home_else_home(void **state)
{
	char buf[64];

	(void)state;
	assert_kiln(0, kiln_user_config_path("/x/cfg", "/home/u", buf, sizeof buf));
	assert_string_equal(buf, "/x/cfg/kiln/config.yaml");
	/* the XDG spec: a relative XDG_CONFIG_HOME is ignored */
	assert_kiln(0, kiln_user_config_path("cfg", "/home/u", buf, sizeof buf));
	assert_string_equal(buf, "/home/u/.config/kiln/config.yaml");
	assert_kiln(0, kiln_user_config_path(NULL, "/home/u", buf, sizeof buf));
	assert_string_equal(buf, "/home/u/.config/kiln/config.yaml");
	assert_kiln(KILN_ENOTFOUND, kiln_user_config_path(NULL, NULL, buf, sizeof buf));
	assert_kiln(KILN_ENOTFOUND, kiln_user_config_path("", "rel", buf, sizeof buf));
	assert_kiln(KILN_ERANGE, kiln_user_config_path("/a-rather-long-folder-name-here",
	                                                NULL, buf, 20));
}

static void
durations_parse_as_kiln_yaml_writes_them(void **state)
{
	uint32_t s = 7;

	(void)state;
	assert_kiln(0, kiln_duration_parse("30s", &s));
	assert_int_equal(s, 30);
	assert_kiln(0, kiln_duration_parse("2m", &s));
	assert_int_equal(s, 120);
	assert_kiln(0, kiln_duration_parse("45", &s));
	assert_int_equal(s, 45);
	assert_kiln(0, kiln_duration_parse("0", &s));
	assert_int_equal(s, 0);
	assert_kiln(KILN_EINVAL, kiln_duration_parse("", &s));
	assert_kiln(KILN_EINVAL, kiln_duration_parse("5 s", &s));
	assert_kiln(KILN_EINVAL, kiln_duration_parse("1.5s", &s));
	assert_kiln(KILN_EINVAL, kiln_duration_parse("367d", &s));
	assert_kiln(KILN_EINVAL, kiln_duration_parse("s", &s));
}

/* "f:PATH" for a source file, "o:URL#NAME" for an output: kiln_step.order
 * as one string, items separated by spaces. */
static const char *
order_str(const kiln_step *st, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < st->norder; i++) {
		const kiln_input *it = &st->order[i];
		size_t at = strlen(buf);
		if (it->path != NULL)
			snprintf(buf + at, len - at, "%sf:%s", i ? " " : "", it->path);
		else
			snprintf(buf + at, len - at, "%so:%s#%s", i ? " " : "", it->url, it->output);
	}
	return buf;
}

static void
inputs_keep_their_written_order_and_url_hash_name_picks_one_output(void **state)
{
	static const char yaml[] =
		"kiln: 1\n"
		"project: t\n"
		"sources: [art]\n"
		"profiles: { pc: }\n"
		"tools:\n"
		"  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
		"  split: { run: [split, \"${out.x}\", \"${out.y}\"] }\n"
		"rules:\n"
		"  - { match: \"art/*.png\", url: \"img/${match.name}\", tool: copy, inputs: [art/a.png] }\n"
		"assets:\n"
		"  - { url: two, tool: split, outputs: { x: x.bin, y: y.bin } }\n"
		"  - url: mix\n"
		"    tool: copy\n"
		"    inputs: [art/c.png, \"@two#y\", \"art/[ab].png\", \"@img/**\", \"@two\", art/c.png]\n"
		"  - { url: bad, tool: copy, inputs: [\"@two#z\"] }\n";
	char buf[1024];
	const kiln_plan *p;
	const kiln_diag *g;
	kiln_desc *d;
	size_t n, nerr = 0;

	assert_int_equal(mkdir(tu_path(state, "art"), 0755), 0);
	tu_write_file(tu_path(state, "art/a.png"), "a", 1);
	tu_write_file(tu_path(state, "art/b.png"), "b", 1);
	tu_write_file(tu_path(state, "art/c.png"), "c", 1);
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	assert_kiln(KILN_EINVAL, kiln_desc_load(tu_dir(state), &d));
	n = kiln_desc_diags(d, &g);
	for (size_t i = 0; i < n; i++)
		if (g[i].level == KILN_DIAG_ERROR) {
			nerr++;
			assert_string_equal(g[i].field, "assets[2].inputs[0]");
			assert_int_equal(g[i].loc.line, 15);
			assert_non_null(strstr(g[i].msg, "step 'two' has no output 'z' (its outputs: 'x', 'y')"));
		}
	assert_int_equal(nerr, 1);
	kiln_desc_free(d);

	/* without the bad reference the project loads */
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml) - strlen(
		"  - { url: bad, tool: copy, inputs: [\"@two#z\"] }\n"));
	assert_kiln(0, kiln_desc_load(tu_dir(state), &d));
	p = kiln_desc_plan(d, "pc");
	/* written order; a glob's matches sorted in their place; @two as each
	 * output in declared order; each input once, at its first place */
	assert_string_equal(order_str(step(p, "mix"), buf, sizeof buf),
	                    "f:art/c.png o:two#y f:art/a.png f:art/b.png o:img/a#out "
	                    "o:img/b#out o:img/c#out o:two#x");
	/* the sets the engine hashes and links stay sorted */
	assert_string_equal(step(p, "mix")->inputs[0], "art/a.png");
	assert_int_equal(step(p, "mix")->nneeds, 4);
	/* a rule's matched file first, then its inputs: */
	assert_string_equal(order_str(step(p, "img/c"), buf, sizeof buf), "f:art/c.png f:art/a.png");
	assert_string_equal(order_str(step(p, "img/a"), buf, sizeof buf), "f:art/a.png");
	kiln_desc_free(d);
}

static void
a_bundle_is_a_step_of_the_built_in_tool_with_its_entries_in_written_order(void **state)
{
	static const char yaml[] =
		"kiln: 1\n"
		"project: t\n"
		"sources: [art]\n"
		"profiles: { pc: }\n"
		"tools:\n"
		"  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
		"  split: { run: [split, \"${out.x}\", \"${out.y}\"] }\n"
		"rules:\n"
		"  - { match: \"art/*.png\", url: \"img/${match.name}\", tool: copy }\n"
		"assets:\n"
		"  - { url: two, tool: split, outputs: { x: x.bin, y: y.bin } }\n"
		"bundles:\n"
		"  short: [\"img/*\"]\n"
		"  long:\n"
		"    entries: [two#y, \"img/*\", img/a, two]\n"
		"    compress: zstd\n"
		"    align: 256\n"
		"    manifest: true\n";
	static const char sub[] = "bundles:\n  extra: [two#x]\n";
	char buf[1024];
	const kiln_plan *p;
	const kiln_step *b;
	kiln_desc *d;

	assert_int_equal(mkdir(tu_path(state, "art"), 0755), 0);
	tu_write_file(tu_path(state, "art/a.png"), "a", 1);
	tu_write_file(tu_path(state, "art/b.png"), "b", 1);
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	if (kiln_desc_load(tu_dir(state), &d) != 0)
		print_diags(d);
	p = kiln_desc_plan(d, "pc");
	assert_non_null(p);
	/* 2 rule steps, 1 asset, 2 bundles, URL-sorted with the rest */
	assert_int_equal(p->nsteps, 5);
	assert_int_equal(p->nbundles, 2);
	assert_string_equal(p->steps[0].url, "bundles/long");
	b = step(p, "bundles/long");
	assert_int_equal(b->tool->builtin, KILN_BUILTIN_BUNDLE);
	assert_non_null(b->bundle);
	assert_int_equal(b->bundle->align, 256);
	assert_int_equal(b->bundle->compress, KILN_COMPRESS_ZSTD);
	/* written order, each output once, `two` bringing only what #y did not */
	assert_string_equal(order_str(b, buf, sizeof buf),
	                    "o:two#y o:img/a#out o:img/b#out o:two#x");
	assert_int_equal(b->nneeds, 3);
	assert_int_equal(b->noutputs, 3);
	assert_string_equal(b->outputs[0].file, "long.kpak");
	assert_string_equal(b->outputs[1].file, "long.h");
	assert_string_equal(b->outputs[2].file, "long.json");
	b = step(p, "bundles/short");
	assert_int_equal(b->noutputs, 2);   /* no manifest */
	assert_int_equal(b->bundle->align, 16);
	assert_int_equal(b->bundle->compress, KILN_COMPRESS_NONE);
	/* a sub-file's bundle comes and goes with it */
	tu_write_file(tu_path(state, "art/b.kiln.yaml"), sub, strlen(sub));
	assert_kiln(0, kiln_desc_reload(d, "art/b.kiln.yaml"));
	p = kiln_desc_plan(d, "pc");
	assert_string_equal(order_str(step(p, "bundles/extra"), buf, sizeof buf), "o:two#x");
	unlink(tu_path(state, "art/b.kiln.yaml"));
	assert_kiln(0, kiln_desc_reload(d, "art/b.kiln.yaml"));
	assert_null(step(kiln_desc_plan(d, "pc"), "bundles/extra"));
	kiln_desc_free(d);
}

/* More steps than the URL map was once sized for (source files + 1024,
 * never grown: it probed a full table for ever, issue 36): three rules
 * over the same 3,000 files. */
static void
three_rules_over_3000_files_make_9000_steps(void **state)
{
	static const char yaml[] =
		"kiln: 1\n"
		"project: t\n"
		"sources: [art]\n"
		"profiles: { pc: }\n"
		"tools:\n"
		"  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
		"rules:\n"
		"  - { match: \"art/*.png\", url: \"a/${match.name}\", tool: copy }\n"
		"  - { match: \"art/*.png\", url: \"b/${match.name}\", tool: copy }\n"
		"  - { match: \"art/*.png\", url: \"c/${match.name}\", tool: copy }\n";
	const kiln_plan *p;
	kiln_desc *d;

	assert_int_equal(mkdir(tu_path(state, "art"), 0755), 0);
	for (int i = 0; i < 3000; i++)
		tu_write_file(tu_path(state, "art/f%d.png", i), "x", 1);
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, strlen(yaml));
	if (kiln_desc_load(tu_dir(state), &d) != 0)
		print_diags(d);
	assert_non_null(p = kiln_desc_plan(d, "pc"));
	assert_int_equal(p->nsteps, 9000);
	assert_non_null(step(p, "a/f0"));
	assert_non_null(step(p, "c/f2999"));
	kiln_desc_free(d);
}

/* The same with explicit assets: 4,097 of them over one source file hung
 * the old map (4,096 did not); 20,000 each make a step. */
static void
twenty_thousand_assets_over_one_file_make_a_step_each(void **state)
{
	static const char head[] =
		"kiln: 1\n"
		"project: t\n"
		"sources: [art]\n"
		"profiles: { pc: }\n"
		"tools:\n"
		"  c: { run: [cp, \"${in}\", \"${out}\"] }\n"
		"assets:\n";   /* short lines: a file is at most 1 MiB */
	size_t cap = sizeof head + 20000 * 64, len = strlen(head);
	char *yaml = malloc(cap);
	const kiln_plan *p;
	kiln_desc *d;

	assert_non_null(yaml);
	memcpy(yaml, head, len);
	for (int i = 0; i < 20000; i++)
		len += (size_t)snprintf(yaml + len, cap - len, "- {url: x/%d, tool: c, "
		                        "inputs: [art/one.png]}\n", i);
	assert_int_equal(mkdir(tu_path(state, "art"), 0755), 0);
	tu_write_file(tu_path(state, "art/one.png"), "x", 1);
	tu_write_file(tu_path(state, "kiln.yaml"), yaml, len);
	free(yaml);
	if (kiln_desc_load(tu_dir(state), &d) != 0)
		print_diags(d);
	assert_non_null(p = kiln_desc_plan(d, "pc"));
	assert_int_equal(p->nsteps, 20000);
	assert_non_null(step(p, "x/19999"));
	kiln_desc_free(d);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(reload_replaces_exactly_what_the_file_defined),
		T(reload_of_a_deleted_or_new_file),
		T(a_reload_that_breaks_the_file_reports_it_and_a_fix_recovers),
		T(reload_of_kiln_yaml_rereads_everything),
		T(a_list_param_spreads_into_one_argv_item_each),
		T(a_shell_tool_gets_references_not_values),
		T(a_missing_kiln_yaml_is_not_found),
		T(materialize_is_copy_or_hardlink_and_anything_else_names_its_line),
		T(a_missing_input_stays_an_input_with_a_warning_and_an_odd_name_is_skipped),
		T(the_user_file_gives_cache_settings_with_paths_beside_it),
		T(a_user_file_may_give_only_a_mode_and_a_missing_or_empty_one_is_no_settings),
		T(a_broken_user_file_names_its_path_line_and_field),
		T(the_user_file_is_under_xdg_config_home_else_home),
		T(durations_parse_as_kiln_yaml_writes_them),
		T(inputs_keep_their_written_order_and_url_hash_name_picks_one_output),
		T(a_bundle_is_a_step_of_the_built_in_tool_with_its_entries_in_written_order),
		T(three_rules_over_3000_files_make_9000_steps),
		T(twenty_thousand_assets_over_one_file_make_a_step_each),
	};

	alarm(600);   /* a loader that never ends: killed, counted as failed */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
