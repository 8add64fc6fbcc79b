/* cmd_desc.c — commands about the asset descriptions, without a daemon:
 * kiln check (validate, report every problem) and kiln ls (list the steps
 * of a profile, as text or JSON). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln_desc.h"
#include "kiln_proto.h"

static const char check_usage[] = "usage: kiln check [-C DIR] [-p PROFILE] [-q] [--programs]\n";
static const char check_help[] =
	"usage: kiln check [-C DIR] [-p PROFILE] [-q] [--programs]\n"
	"\n"
	"Load kiln.yaml and every *.kiln.yaml under the source folders, check\n"
	"every field, resolve every profile into its build steps, and report\n"
	"every problem as FILE:LINE:COLUMN: error|warning: FIELD: what is wrong.\n"
	"\n"
	"options:\n"
	"  -C, --project DIR    the project folder (default: the nearest folder\n"
	"                       upward holding kiln.yaml)\n"
	"  -p, --profile NAME   also require that this profile exists\n"
	"  -q, --quiet          print errors and warnings only, no summary\n"
	"      --programs       also look up each used tool's program as a build\n"
	"                       from this shell would (kiln.yaml's path, else\n"
	"                       PATH; project-relative names in the project): one\n"
	"                       not found is a warning (its steps would fail)\n"
	"\n"
	"exit status: 0 valid (warnings allowed); 2 errors in the descriptions,\n"
	"or bad usage.\n";

static const char ls_usage[] = "usage: kiln ls [-C DIR] [-p PROFILE] [--json]\n";
static const char ls_help[] =
	"usage: kiln ls [-C DIR] [-p PROFILE] [--json]\n"
	"\n"
	"List the build steps of a profile (default: the first in kiln.yaml):\n"
	"URL, tool, inputs in the order the tool gets them (source files and\n"
	"@prerequisite URLs, @URL#name for one output), outputs, and\n"
	"where the step was defined; an asset that replaces a rule's step says\n"
	"so; once built, the program its tool ran (absolute, as found on that\n"
	"build's PATH) and whether the last run's file accesses were traced\n"
	"(read from the project's store). With --json, one JSON object with\n"
	"every step and bundle.\n"
	"\n"
	"options:\n"
	"  -C, --project DIR    the project folder (default: the nearest folder\n"
	"                       upward holding kiln.yaml)\n"
	"  -p, --profile NAME   the profile to list\n"
	"      --json           machine-readable output\n"
	"\n"
	"exit status: 0 listed; 2 errors in the descriptions, or bad usage.\n";

static void
diag_print(const kiln_diag *g)
{
	const char *level = g->level == KILN_DIAG_ERROR ? "error" : "warning";

	if (g->loc.line > 0)
		fprintf(stderr, "%s:%d:%d: %s: ", g->loc.file, g->loc.line, g->loc.col, level);
	else
		fprintf(stderr, "%s: %s: ", g->loc.file, level);
	if (g->field[0] != '\0')
		fprintf(stderr, "%s: ", g->field);
	fprintf(stderr, "%s\n", g->msg);
}

int
cli_project_load(const char *cmd, const char *given, kiln_desc **d, size_t *nwarn)
{
	char dir[PATH_MAX];
	const kiln_diag *g;
	size_t n;
	int rv;

	*d = NULL;
	*nwarn = 0;
	if ((rv = cli_project_dir(given, dir, sizeof dir)) != 0) {
		cli_error(cmd, "finding the project", rv);
		return CLI_USAGE;
	}
	rv = kiln_desc_load(dir, d);
	if (rv == KILN_ENOTFOUND) {
		if (given != NULL)
			cli_errorf(cmd, "%s: no kiln.yaml there", dir);
		else
			cli_errorf(cmd, "no kiln.yaml in %s or any folder above it: not "
			           "in a kiln project (cd into one, or give -C DIR)", dir);
		return CLI_USAGE;
	}
	if (*d == NULL) {
		cli_error(cmd, dir, rv);
		return CLI_USAGE;
	}
	n = kiln_desc_diags(*d, &g);
	for (size_t i = 0; i < n; i++) {
		diag_print(&g[i]);
		*nwarn += g[i].level == KILN_DIAG_WARNING;
	}
	return CLI_OK;
}

const char *
cli_profile_pick(const char *cmd, const kiln_desc *d, const char *given)
{
	const char *const *names;
	size_t n = kiln_desc_profiles(d, &names);

	if (given == NULL)
		return n > 0 ? names[0] : NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], given) == 0)
			return names[i];
	cli_errorf(cmd, "unknown profile '%s' (profiles:%s%s)", given, n ? " " : " none",
	           n ? names[0] : "");
	for (size_t i = 1; i < n; i++)
		fprintf(stderr, "  also: %s\n", names[i]);
	return NULL;
}

int
cmd_check(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"quiet", no_argument, NULL, 'q'},
		{"programs", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *dir = NULL, *profile = NULL;
	const char *const *names;
	kiln_desc *d;
	size_t nwarn, nerr, nprof, nfiles;
	const char *const *files;
	int ch, quiet = 0, programs = 0, rv;

	(void)cli;
	while ((ch = getopt_long(argc, argv, ":C:p:qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'p': profile = optarg; break;
		case 'q': quiet = 1; break;
		case 'P': programs = 1; break;
		case 'h': return cli_help(check_help);
		default: return cli_bad_option("check", check_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("check", check_usage, "unexpected argument '%s'", argv[optind]);
	if ((rv = cli_project_load("check", dir, &d, &nwarn)) != CLI_OK)
		return rv;
	nerr = kiln_desc_nerrors(d);
	/* what this machine has, not what the descriptions say: asked for
	 * (a project's own tools may be built before the build runs); the
	 * plans hold the programs, so not with errors */
	if (programs && nerr == 0)
		nwarn += check_programs(d);
	if (profile != NULL && cli_profile_pick("check", d, profile) == NULL)
		nerr++;
	nprof = kiln_desc_profiles(d, &names);
	nfiles = kiln_desc_files(d, &files);
	if (!quiet && nerr == 0) {
		printf("ok: project '%s', %zu description file%s, %zu warning%s\n",
		       kiln_desc_project(d), nfiles, nfiles == 1 ? "" : "s", nwarn,
		       nwarn == 1 ? "" : "s");
		for (size_t i = 0; i < nprof; i++) {
			const kiln_plan *p = kiln_desc_plan(d, names[i]);
			printf("  profile %s: %zu steps, %zu bundles\n", names[i],
			       p ? p->nsteps : 0, p ? p->nbundles : 0);
		}
	} else if (!quiet) {
		fprintf(stderr, "kiln: check: %zu error%s, %zu warning%s\n", nerr,
		        nerr == 1 ? "" : "s", nwarn, nwarn == 1 ? "" : "s");
	}
	kiln_desc_free(d);
	return nerr ? CLI_USAGE : CLI_OK;
}

/* ---- ls ---- */

/* obj[key] = "FILE:LINE" */
static int
json_loc(json_t *obj, const char *key, const kiln_loc *l)
{
	char buf[600];

	snprintf(buf, sizeof buf, "%s:%d", l->file, l->line);
	return kiln_json_text(obj, key, buf);
}

/* What the store recorded of a step's last decision. */
struct step_last {
	int traced;              /* its run was traced: 1, 0, or -1 (no
	                            successful record: never built, or no store) */
	char program[PATH_MAX];  /* the program its tool ran ("": unknown) */
};

static void
step_last_get(kiln_store *st, const char *profile, const char *url,
              struct step_last *l)
{
	Kiln__StepRecord *rec;
	void *data = NULL;
	size_t len = 0;

	l->traced = -1;
	l->program[0] = '\0';
	if (st == NULL || kiln_store_step_get(st, profile, url, &data, &len) != 0)
		return;
	rec = kiln__step_record__unpack(NULL, len, data);
	free(data);
	if (rec == NULL)
		return;
	l->traced = rec->decision == KILN__STEP_RECORD__DECISION__FAILED ? -1
	            : rec->traced;
	snprintf(l->program, sizeof l->program, "%s", rec->program);
	kiln__step_record__free_unpacked(rec, NULL);
}

/* An input of s's order as inputs: would write it: a path, "@URL" for
 * the one unnamed output of a step, else "@URL#name". */
static void
input_text(const kiln_plan *p, const kiln_input *it, char *buf, size_t len)
{
	size_t at;

	if (it->path != NULL) {
		snprintf(buf, len, "%s", it->path);
		return;
	}
	if (step_find(p->steps, p->nsteps, it->url, &at) && p->steps[at].noutputs == 1 &&
	    strcmp(it->output, "out") == 0)
		snprintf(buf, len, "@%s", it->url);
	else
		snprintf(buf, len, "@%s#%s", it->url, it->output);
}

static json_t *
ls_json_step(const kiln_plan *p, const kiln_step *s, const struct step_last *l,
             int *err)
{
	char buf[PATH_MAX + 128];
	json_t *o = json_object(), *order = json_array(), *outs = json_object();
	int replaced = 0;

	*err |= kiln_json_text(o, "url", s->url);
	*err |= kiln_json_text(o, "tool", s->tool ? s->tool->name : "");
	*err |= kiln_json_texts(o, "inputs", (const char *const *)s->inputs, s->ninputs);
	*err |= kiln_json_texts(o, "needs", (const char *const *)s->needs, s->nneeds);
	for (size_t i = 0; i < s->norder; i++) { /* what ${in...} gives, in order */
		input_text(p, &s->order[i], buf, sizeof buf);
		*err |= kiln_json_push(order, kiln_json_string(buf, &replaced));
	}
	*err |= kiln_json_put(o, "order", order);
	if (replaced)
		*err |= kiln_json_bool(o, "order_replaced", 1);
	for (size_t i = 0; i < s->noutputs; i++) {
		/* a folder output as it is written: "glyphs/" */
		snprintf(buf, sizeof buf, "%s%s", s->outputs[i].file,
		         s->outputs[i].folder ? "/" : "");
		*err |= kiln_json_text(outs, s->outputs[i].name, buf);
	}
	*err |= kiln_json_put(o, "outputs", outs);
	*err |= kiln_json_texts(o, "argv", (const char *const *)s->argv, s->nargv);
	*err |= json_loc(o, "defined_at", &s->loc);
	*err |= kiln_json_text(o, "origin", s->bundle ? "bundle"
	                                    : s->from_rule ? "rule" : "asset");
	if (s->overrides.file != NULL)
		*err |= json_loc(o, "overrides", &s->overrides);
	else
		*err |= kiln_json_null(o, "overrides");
	if (l->traced < 0)
		*err |= kiln_json_null(o, "traced");
	else
		*err |= kiln_json_bool(o, "traced", l->traced);
	if (l->program[0])
		*err |= kiln_json_text(o, "program", l->program);
	else
		*err |= kiln_json_null(o, "program");
	return o;
}

static int
ls_json(const kiln_desc *d, const kiln_plan *p, kiln_store *st)
{
	json_t *o = json_object(), *steps = json_array(), *bundles = json_object();
	int err = 0;

	err |= kiln_json_text(o, "project", kiln_desc_project(d));
	err |= kiln_json_text(o, "profile", p->profile);
	for (size_t i = 0; i < p->nsteps; i++) {
		struct step_last l;
		step_last_get(st, p->profile, p->steps[i].url, &l);
		err |= kiln_json_push(steps, ls_json_step(p, &p->steps[i], &l, &err));
	}
	err |= kiln_json_put(o, "steps", steps);
	for (size_t i = 0; i < p->nbundles; i++)
		err |= kiln_json_texts(bundles, p->bundles[i].name,
		                       (const char *const *)p->bundles[i].urls,
		                       p->bundles[i].nurls);
	err |= kiln_json_put(o, "bundles", bundles);
	return kiln_json_print(stdout, o, err);
}

static void
ls_text(const kiln_plan *p, kiln_store *st)
{
	for (size_t i = 0; i < p->nsteps; i++) {
		const kiln_step *s = &p->steps[i];
		struct step_last l;
		step_last_get(st, p->profile, s->url, &l);
		printf("%s\n  tool     %s\n  defined  %s:%d (%s)", s->url,
		       s->tool ? s->tool->name : "?", s->loc.file, s->loc.line,
		       s->bundle ? "bundle" : s->from_rule ? "rule" : "asset");
		if (s->overrides.file != NULL)
			printf(", overrides the rule at %s:%d", s->overrides.file,
			       s->overrides.line);
		printf("\n");
		/* in the order the tool gets them */
		for (size_t j = 0; j < s->norder; j++) {
			char buf[PATH_MAX + 128];
			input_text(p, &s->order[j], buf, sizeof buf);
			printf("  input    %s\n", buf);
		}
		for (size_t j = 0; j < s->noutputs; j++)
			printf("  output   %s = %s%s\n", s->outputs[j].name, s->outputs[j].file,
			       s->outputs[j].folder ? "/" : "");
		if (l.program[0])
			printf("  program  %s (last decision)\n", l.program);
		if (l.traced >= 0 && (s->tool == NULL || !s->tool->builtin))
			printf("  traced   %s\n", l.traced ? "yes (last run)" :
			       "no (last run: a static or untraceable program)");
	}
	for (size_t i = 0; i < p->nbundles; i++) {
		printf("bundle %s:", p->bundles[i].name);
		for (size_t j = 0; j < p->bundles[i].nurls; j++)
			printf(" %s", p->bundles[i].urls[j]);
		printf("\n");
	}
	printf("%zu steps in profile %s\n", p->nsteps, p->profile);
}

int
cmd_ls(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *dir = NULL, *given = NULL, *profile;
	const kiln_plan *plan;
	kiln_store *st = NULL;
	kiln_desc *d;
	size_t nwarn;
	int ch, json = 0, rv;

	(void)cli;
	while ((ch = getopt_long(argc, argv, ":C:p:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'p': given = optarg; break;
		case 'j': json = 1; break;
		case 'h': return cli_help(ls_help);
		default: return cli_bad_option("ls", ls_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("ls", ls_usage, "unexpected argument '%s'", argv[optind]);
	if ((rv = cli_project_load("ls", dir, &d, &nwarn)) != CLI_OK)
		return rv;
	if (kiln_desc_nerrors(d) > 0) {
		fprintf(stderr, "kiln: ls: the descriptions have errors (see above; "
		        "kiln check lists them)\n");
		kiln_desc_free(d);
		return CLI_USAGE;
	}
	if ((profile = cli_profile_pick("ls", d, given)) == NULL ||
	    (plan = kiln_desc_plan(d, profile)) == NULL) {
		kiln_desc_free(d);
		return CLI_USAGE;
	}
	/* what the last builds recorded, when there is a store to read */
	{
		char sdir[PATH_MAX];
		kiln_store_opts o = {.flags = KILN_STORE_RDONLY,
		                     .durability = KILN_DURABLE_FSYNC};
		snprintf(sdir, sizeof sdir, "%s/.kiln/store", kiln_desc_root(d));
		if (kiln_store_open(sdir, &o, &st) != 0)
			st = NULL;
	}
	rv = 0;
	if (!json)
		ls_text(plan, st);
	else if ((rv = ls_json(d, plan, st)) != 0)
		fprintf(stderr, "kiln ls: writing JSON: %s\n", kiln_strerror(rv));
	kiln_store_close(st);
	kiln_desc_free(d);
	return rv == 0 ? CLI_OK : CLI_USAGE;
}
