/* cmd_deps.c — `kiln deps URL` (what a step depends on) and `kiln rdeps
 * PATH|URL` (which steps depend on a file or a step), on the project's
 * daemon. Output is one dependency per line, a word saying how first, so
 * that scripts can grep it. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kiln.h"

static const char deps_usage[] = "usage: kiln deps URL [-C DIR] [-p PROFILE]\n";
static const char deps_help[] =
	"usage: kiln deps URL [-C DIR] [-p PROFILE]\n"
	"\n"
	"Print what the step URL depends on, one per line:\n"
	"  input PATH                 a source file its description names\n"
	"  prerequisite URL           a step whose outputs it takes\n"
	"  discovered PATH (depfile|trace) HASH|missing\n"
	"                             a file its last run read (or looked for\n"
	"                             and did not find), from its depfile or\n"
	"                             from tracing its file accesses\n"
	"  needs URL[#OUTPUT] HASH    an asset it asked for with `kiln need`\n"
	"The first line says whether the last run was traced. Hashes show\n"
	"their first 8 hex digits.\n";

static const char rdeps_usage[] =
	"usage: kiln rdeps PATH|URL [--all] [-C DIR] [-p PROFILE]\n";
static const char rdeps_help[] =
	"usage: kiln rdeps PATH|URL [--all] [-C DIR] [-p PROFILE]\n"
	"\n"
	"Print every step that depends on a file (a path relative to the\n"
	"current folder or to the project; a file outside the project that a\n"
	"depfile or trace recorded) or on a step (its URL), one per\n"
	"line with how: `URL  (input PATH | discovered PATH | prerequisite URL\n"
	"| needs URL)`. With --all, also the steps depending on those, and so\n"
	"on, each indented by its distance.\n"
	"\n"
	"  -a, --all            transitively\n"
	"  -C, --directory DIR  the project folder (default: found upward from .)\n"
	"  -p, --profile NAME   the profile (default: the first in kiln.yaml)\n";

static int
parse(const char *cmd, const char *usage, const char *help, int with_all,
      int argc, char **argv, const char **dir, const char **profile,
      const char **what, int *all)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":C:p:ah", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': *dir = optarg; break;
		case 'p': *profile = optarg; break;
		case 'a':
			if (!with_all)
				return cli_bad_option(cmd, usage, longopts, '?', argv);
			*all = 1;
			break;
		case 'h': return cli_help(help) == CLI_OK ? -1 : CLI_USAGE;
		default: return cli_bad_option(cmd, usage, longopts, ch, argv);
		}
	}
	if (optind + 1 != argc)
		return cli_usage(cmd, usage, optind == argc ? "which %s?"
		                 : "one at a time", with_all ? "file or URL" : "URL");
	*what = argv[optind];
	return CLI_OK;
}

static int
connect_in(const char *cmd, const struct cli *cli, const char *dir,
           kiln_conn **c)
{
	if (dir != NULL && chdir(dir) != 0) {
		cli_errorf(cmd, "%s: %s", dir, strerror(errno));
		return CLI_USAGE;
	}
	return cli_connect(cmd, cli, 1, c);
}

static void
hex8(const kiln_id *id, char out[9])
{
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	memcpy(out, hex, 8);
	out[8] = '\0';
}

int
cmd_deps(const struct cli *cli, int argc, char **argv)
{
	const char *dir = NULL, *profile = NULL, *url = NULL;
	kiln_deps_info d;
	kiln_conn *c;
	char h[9];
	int rv, all = 0;

	if ((rv = parse("deps", deps_usage, deps_help, 0, argc, argv, &dir,
	                &profile, &url, &all)) != CLI_OK)
		return rv < 0 ? CLI_OK : rv;
	if ((rv = connect_in("deps", cli, dir, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_deps(c, profile, url, &d)) != 0) {
		cli_daemon_error("deps", url, c, rv);
		kiln_close(c);
		return rv == KILN_ENOTFOUND || rv == KILN_EINVAL ? CLI_USAGE : CLI_PROBLEM;
	}
	printf("# %s, profile %s: %s\n", url, d.profile,
	       !d.built ? "no successful run recorded: nothing discovered yet"
	       : d.traced ? "last run traced" : "last run not traced (only "
	       "its depfile, if any, was read)");
	for (size_t i = 0; i < d.ninputs; i++)
		printf("input %s\n", d.inputs[i]);
	for (size_t i = 0; i < d.nprerequisites; i++)
		printf("prerequisite %s\n", d.prerequisites[i]);
	for (size_t i = 0; i < d.nfiles; i++) {
		const kiln_dep_file *f = &d.files[i];
		if (!f->missing)
			hex8(&f->hash, h);
		printf("discovered %s (%s) %s\n", f->path,
		       f->traced ? "trace" : "depfile", f->missing ? "missing" : h);
	}
	for (size_t i = 0; i < d.nneeds; i++) {
		hex8(&d.needs[i].hash, h);
		printf("needs %s%s%s %s\n", d.needs[i].url,
		       d.needs[i].output[0] ? "#" : "", d.needs[i].output, h);
	}
	kiln_close(c);
	return CLI_OK;
}

/* A target that names an existing file, as a path relative to the project
 * folder, or absolute for a file outside it (as the daemon records those);
 * anything else is passed on as written (a URL, or a path relative to the
 * project). */
static const char *
project_relative(kiln_conn *c, const char *target, char *buf, size_t len)
{
	char real[PATH_MAX], root[PATH_MAX];
	kiln_status st;
	struct stat sb;
	size_t n;

	if (stat(target, &sb) != 0 || realpath(target, real) == NULL ||
	    kiln_status_get(c, &st) != 0 || realpath(st.project, root) == NULL)
		return target;
	n = strlen(root);
	if (strncmp(real, root, n) != 0 || real[n] != '/')
		snprintf(buf, len, "%s", real);
	else
		snprintf(buf, len, "%s", real + n + 1);
	return buf;
}

int
cmd_rdeps(const struct cli *cli, int argc, char **argv)
{
	const char *dir = NULL, *profile = NULL, *target = NULL, *rel;
	const kiln_rdep *v;
	char buf[PATH_MAX];
	size_t n;
	kiln_conn *c;
	int rv, all = 0, is_step = 0;

	if ((rv = parse("rdeps", rdeps_usage, rdeps_help, 1, argc, argv, &dir,
	                &profile, &target, &all)) != CLI_OK)
		return rv < 0 ? CLI_OK : rv;
	if ((rv = connect_in("rdeps", cli, dir, &c)) != CLI_OK)
		return rv;
	rel = project_relative(c, target, buf, sizeof buf);
	if ((rv = kiln_rdeps(c, profile, rel, all, &v, &n, &is_step)) != 0) {
		cli_daemon_error("rdeps", rel, c, rv);
		kiln_close(c);
		return rv == KILN_EINVAL ? CLI_USAGE : CLI_PROBLEM;
	}
	if (n == 0)
		fprintf(stderr, "kiln: rdeps: no step depends on %s %s\n",
		        is_step ? "step" : "file", rel);
	for (size_t i = 0; i < n; i++)
		printf("%*s%s  (%s)\n", 2 * (int)(v[i].depth - 1), "", v[i].url,
		       v[i].via);
	kiln_close(c);
	return CLI_OK;
}
