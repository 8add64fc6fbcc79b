/* cmd_ui.c — kiln ui [-C DIR] [--port N] [--listen ADDR] [--open]: have the
 * project's daemon serve its web dashboard (docs/ui.md) and print the URL
 * (secret included), or open it in the desktop's browser. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"

extern char **environ;

static const char ui_usage[] =
	"usage: kiln ui [-C DIR] [--port N] [--listen ADDR] [--open]\n";

static const char ui_help[] =
	"usage: kiln ui [-C DIR] [--port N] [--listen ADDR] [--open]\n"
	"\n"
	"Have the project's daemon (started if need be) serve a live dashboard\n"
	"of its builds, steps, failures and store, and print its URL. The URL\n"
	"holds a secret the daemon draws each time it starts: anyone with the\n"
	"URL sees the project and can start builds, so share it as you would\n"
	"the project's socket. A second kiln ui prints the same URL.\n"
	"\n"
	"  -C DIR           the project folder (default: found from here)\n"
	"      --port N     the TCP port (default: a free one)\n"
	"      --listen ADDR  the address to serve on (default 127.0.0.1, this\n"
	"                   machine only); another, e.g. 0.0.0.0, only when kilnd\n"
	"                   runs with --token-file (a networked daemon)\n"
	"      --open       open the URL with xdg-open too\n"
	"\n"
	"example: kiln ui --open\n";

/* Open url with xdg-open, without waiting for the browser. */
static void
ui_open(const char *url)
{
	char *argv[] = {"xdg-open", (char *)url, NULL};
	pid_t pid;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
		cli_errorf("ui", "cannot run xdg-open (%s): open the URL yourself",
		           strerror(errno));
		return;
	}
	waitpid(pid, NULL, 0); /* xdg-open itself returns at once */
}

int
cmd_ui(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'P'},
		{"listen", required_argument, NULL, 'L'},
		{"open", no_argument, NULL, 'o'},
		{"project", required_argument, NULL, 'C'},
		{"directory", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *dir = NULL, *listen = NULL;
	unsigned long port = 0;
	char url[512], *end;
	kiln_conn *c;
	int ch, rv, open = 0;

	while ((ch = getopt_long(argc, argv, ":C:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'P':
			errno = 0;
			port = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' || port > 65535)
				return cli_usage("ui", ui_usage, "--port takes 0 to 65535, "
				                 "not '%s'", optarg);
			break;
		case 'L': listen = optarg; break;
		case 'o': open = 1; break;
		case 'C': dir = optarg; break;
		case 'h': return cli_help(ui_help);
		default: return cli_bad_option("ui", ui_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("ui", ui_usage, "unexpected argument '%s'", argv[optind]);
	if ((rv = cli_chdir("ui", dir)) != CLI_OK ||
	    (rv = cli_connect("ui", cli, 1, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_ui_start(c, (unsigned)port, listen, url, sizeof url)) != 0) {
		cli_daemon_error("ui", "serving the dashboard", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	kiln_close(c);
	printf("%s\n", url);
	fflush(stdout);
	if (open)
		ui_open(url);
	return CLI_OK;
}
