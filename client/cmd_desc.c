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

static void
json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void
json_strs(const char *const *v, size_t n, const char *prefix)
{
	putchar('[');
	for (size_t i = 0; i < n; i++) {
		char buf[1024];
		if (i)
			putchar(',');
		snprintf(buf, sizeof buf, "%s%s", prefix, v[i]);
		json_str(buf);
	}
	putchar(']');
}

static void
json_loc(const kiln_loc *l)
{
	char buf[600];

	snprintf(buf, sizeof buf, "%s:%d", l->file, l->line);
	json_str(buf);
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

static void
ls_json_step(const kiln_plan *p, const kiln_step *s, const struct step_last *l)
{
	char buf[PATH_MAX + 128];

	printf("{\"url\":");
	json_str(s->url);
	printf(",\"tool\":");
	json_str(s->tool ? s->tool->name : "");
	printf(",\"inputs\":");
	json_strs(s->inputs, s->ninputs, "");
	printf(",\"needs\":");
	json_strs(s->needs, s->nneeds, "");
	printf(",\"order\":[");   /* what ${in...} gives, in that order */
	for (size_t i = 0; i < s->norder; i++) {
		if (i)
			putchar(',');
		input_text(p, &s->order[i], buf, sizeof buf);
		json_str(buf);
	}
	putchar(']');
	printf(",\"outputs\":{");
	for (size_t i = 0; i < s->noutputs; i++) {
		if (i)
			putchar(',');
		char file[PATH_MAX];
		json_str(s->outputs[i].name);
		putchar(':');
		/* a folder output as it is written: "glyphs/" */
		snprintf(file, sizeof file, "%s%s", s->outputs[i].file,
		         s->outputs[i].folder ? "/" : "");
		json_str(file);
	}
	printf("},\"argv\":");
	json_strs(s->argv, s->nargv, "");
	printf(",\"defined_at\":");
	json_loc(&s->loc);
	printf(",\"origin\":\"%s\",\"overrides\":",
	       s->bundle ? "bundle" : s->from_rule ? "rule" : "asset");
	if (s->overrides.file != NULL)
		json_loc(&s->overrides);
	else
		printf("null");
	printf(",\"traced\":%s", l->traced < 0 ? "null" : l->traced ? "true" : "false");
	printf(",\"program\":");
	if (l->program[0])
		json_str(l->program);
	else
		printf("null");
	putchar('}');
}

static void
ls_json(const kiln_desc *d, const kiln_plan *p, kiln_store *st)
{
	printf("{\"project\":");
	json_str(kiln_desc_project(d));
	printf(",\"profile\":");
	json_str(p->profile);
	printf(",\"steps\":[");
	for (size_t i = 0; i < p->nsteps; i++) {
		struct step_last l;
		if (i)
			putchar(',');
		step_last_get(st, p->profile, p->steps[i].url, &l);
		ls_json_step(p, &p->steps[i], &l);
	}
	printf("],\"bundles\":{");
	for (size_t i = 0; i < p->nbundles; i++) {
		if (i)
			putchar(',');
		json_str(p->bundles[i].name);
		putchar(':');
		json_strs(p->bundles[i].urls, p->bundles[i].nurls, "");
	}
	printf("}}\n");
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
	if (json)
		ls_json(d, plan, st);
	else
		ls_text(plan, st);
	kiln_store_close(st);
	kiln_desc_free(d);
	return CLI_OK;
}
