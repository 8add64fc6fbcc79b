/* cmd_need.c — kiln need: from inside a step's tool, ask the daemon that
 * runs it for another step's output (built first when need be) and print
 * where it is. The daemon passes $KILN_SOCKET and $KILN_STEP_TOKEN to every
 * tool; docs/build.md, "kiln need", is the contract. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char need_usage[] = "usage: kiln need URL [--output NAME]\n";
static const char need_help[] =
	"usage: kiln need URL [--output NAME]\n"
	"\n"
	"From inside a build step's tool: build the step URL of the same profile\n"
	"if it is not up to date (at the step's priority, for its builds), record\n"
	"that this step depends on its content, and print the path of its output\n"
	"relative to the project root (the tool's working folder). A step with\n"
	"several outputs prints each, one per line in declared order, unless\n"
	"--output names one. While the step waits its -j slot is lent to others.\n"
	"\n"
	"  -o, --output NAME    just the output named NAME\n"
	"\n"
	"Exit status: 0 printed; 1 the need failed (unknown URL, the step failed,\n"
	"a need cycle, the step's token expired); 2 usage, or not inside a step\n"
	"($KILN_SOCKET and $KILN_STEP_TOKEN unset).\n";

int
cmd_need(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *output = NULL, *sock, *token;
	const char *const *paths;
	kiln_connect_opts o = {0};
	kiln_conn *c = NULL;
	size_t npaths;
	int ch, rv;

	(void)cli;
	while ((ch = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o': output = optarg; break;
		case 'h': return cli_help(need_help);
		default: return cli_bad_option("need", need_usage, longopts, ch, argv);
		}
	}
	if (optind + 1 != argc)
		return cli_usage("need", need_usage, optind == argc ? "which URL?"
		                 : "one URL at a time");
	sock = getenv("KILN_SOCKET");
	token = getenv("KILN_STEP_TOKEN");
	if (sock == NULL || sock[0] == '\0' || token == NULL || token[0] == '\0')
		return cli_usage("need", need_usage, "not inside a build step "
		                 "($KILN_SOCKET and $KILN_STEP_TOKEN are set only for "
		                 "a step's tool)");
	o.url = sock;
	o.flags = KILN_CONNECT_NO_START;
	if ((rv = kiln_connect(&o, &c)) != 0) {
		cli_error("need", sock, rv);
		return CLI_PROBLEM;
	}
	if ((rv = kiln_need(c, token, argv[optind], output, &paths, &npaths)) != 0) {
		/* the daemon's words say it all (the status code adds noise) */
		if (kiln_conn_error(c)[0] != '\0')
			cli_errorf("need", "%s: %s", argv[optind], kiln_conn_error(c));
		else
			cli_error("need", argv[optind], rv);
		kiln_close(c);
		return CLI_PROBLEM;
	}
	for (size_t i = 0; i < npaths; i++)
		printf("%s\n", paths[i]);
	kiln_close(c);
	if (fflush(stdout) != 0)
		return CLI_PROBLEM;
	return CLI_OK;
}
