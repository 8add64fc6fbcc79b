/* cmd_trace.c — kiln trace [BUILD] [-C DIR] [-o FILE]: a build's timeline,
 * the Chrome trace-event file the daemon left in .kiln/traces/ (written by
 * daemon/engine/timeline.c; docs/build.md, "The timeline of a build").
 *
 * It reads the file itself: no daemon is needed (or started) to look at
 * a build that is over. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char trace_usage[] =
	"usage: kiln trace [BUILD] [-C DIR] [-o FILE]\n";

static const char trace_help[] =
	"usage: kiln trace [BUILD] [-C DIR] [-o FILE]\n"
	"\n"
	"Write the timeline of the last build (or of build number BUILD, as\n"
	"kiln build --json names it) as Chrome trace-event JSON: open it in\n"
	"https://ui.perfetto.dev or chrome://tracing. One lane per -j slot (and\n"
	"per slot of each build agent), a slice per step that ran with its URL,\n"
	"decision and reason, and the waits of steps on `kiln need`. The daemon\n"
	"keeps the traces of the last 20 builds in .kiln/traces/.\n"
	"\n"
	"  -C, --directory DIR  the project folder\n"
	"  -o, --output FILE    write to FILE instead of stdout\n"
	"\n"
	"example: kiln trace -o build.json\n";

/* Copy the open trace in to out. Returns 0 or a KILN_E* code. */
static int
copy_out(FILE *in, FILE *out)
{
	char buf[65536];
	size_t n;

	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			return kiln_err_from_errno(errno);
	if (ferror(in))
		return KILN_EIO;
	return fflush(out) == 0 ? 0 : kiln_err_from_errno(errno);
}

/* Open the trace named by build ("": the last one) in project dir. */
static int
trace_open(const char *dir, const char *build, FILE **f)
{
	char path[PATH_MAX];
	int fd;
	int n = build[0] == '\0'
	        ? snprintf(path, sizeof path, "%s/.kiln/traces/last", dir)
	        : snprintf(path, sizeof path, "%s/.kiln/traces/%s.json", dir, build);

	if (n < 0 || (size_t)n >= sizeof path)
		return KILN_ERANGE;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? KILN_ENOTFOUND : kiln_err_from_errno(errno);
	if ((*f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return KILN_ENOMEM;
	}
	return 0;
}

static int
trace_args(int argc, char **argv, const char **dir, const char **build,
           const char **outpath)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":C:o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': *dir = optarg; break;
		case 'o': *outpath = optarg; break;
		case 'h': return cli_help(trace_help) == CLI_OK ? CLI_CONTINUE : CLI_USAGE;
		default: return cli_bad_option("trace", trace_usage, longopts, ch, argv);
		}
	}
	if (argc - optind > 1)
		return cli_usage("trace", trace_usage, "one build at a time");
	*build = optind < argc ? argv[optind] : "";
	/* a number, never a path: the name cannot leave .kiln/traces/ */
	if (optind < argc && ((*build)[0] == '\0' ||
	    strspn(*build, "0123456789") != strlen(*build) || strlen(*build) > 20))
		return cli_usage("trace", trace_usage, "BUILD is a build number "
		                 "(kiln build --json names it), not '%s'", *build);
	return CLI_OK;
}

int
cmd_trace(const struct cli *cli, int argc, char **argv)
{
	const char *given = NULL, *build = "", *outpath = NULL;
	char dir[PATH_MAX];
	FILE *in = NULL, *out = stdout;
	int rv;

	(void)cli;
	if ((rv = trace_args(argc, argv, &given, &build, &outpath)) != CLI_OK)
		return rv == CLI_CONTINUE ? CLI_OK : rv;
	if ((rv = cli_project_dir(given, dir, sizeof dir)) != 0) {
		cli_error("trace", "finding the project", rv);
		return CLI_USAGE;
	}
	if ((rv = trace_open(dir, build, &in)) != 0) {
		if (rv == KILN_ENOTFOUND && build[0] == '\0')
			cli_errorf("trace", "%s: no build has left a trace yet", dir);
		else if (rv == KILN_ENOTFOUND)
			cli_errorf("trace", "no trace of build %s in %s/.kiln/traces "
			           "(the last 20 builds are kept)", build, dir);
		else
			cli_error("trace", "reading the trace", rv);
		return CLI_PROBLEM;
	}
	if (outpath != NULL && (out = fopen(outpath, "w")) == NULL) {
		cli_errorf("trace", "%s: %s", outpath, strerror(errno));
		fclose(in);
		return CLI_USAGE;
	}
	rv = copy_out(in, out);
	fclose(in);
	if (out != stdout && fclose(out) != 0 && rv == 0)
		rv = kiln_err_from_errno(errno);
	if (rv != 0) {
		cli_error("trace", outpath ? outpath : "writing", rv);
		return CLI_PROBLEM;
	}
	return CLI_OK;
}
