/* main.c — the kiln command: global options, then one command from the
 * table below. Each command parses its own options and returns the exit
 * status; this file is the only one in client/ that exits. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cmd_help(const struct cli *cli, int argc, char **argv);

static const struct command {
	const char *name;
	int (*run)(const struct cli *cli, int argc, char **argv);
	const char *summary;
	const char *example; /* one typical use, for kiln --help */
} commands[] = {
	{"put", cmd_put, "store files in the content store, print their hashes",
	 "kiln put art/hero.png"},
	{"cat", cmd_cat, "write a stored blob to stdout, after verifying it",
	 "kiln cat 3f2a...9c1d > hero.png"},
	{"fsck", cmd_fsck, "check every blob and record; --repair what is broken",
	 "kiln fsck --repair"},
	{"gc", cmd_gc, "remove blobs nothing refers to, oldest use first",
	 "kiln gc --max-size 10G"},
	{"status", cmd_status, "show the project's daemon (starting it if need be)",
	 "kiln status -C game/"},
	{"stop", cmd_stop, "stop the project's daemon", "kiln stop -C game/"},
	{"events", cmd_events, "print the daemon's events as they happen",
	 "kiln events --json"},
	{"ui", cmd_ui, "serve a live web dashboard of the daemon, print its URL",
	 "kiln ui --open"},
	{"check", cmd_check, "load and validate the asset descriptions",
	 "kiln check --programs"},
	{"ls", cmd_ls, "list the build steps of a profile", "kiln ls -p mobile"},
	{"build", cmd_build, "build assets for a profile (only what changed)",
	 "kiln build -p pc 'sprites/**'"},
	{"watch", cmd_watch, "keep assets up to date as their files change",
	 "kiln watch -p pc"},
	{"hold", cmd_hold, "hold change reports while a command runs (a checkout)",
	 "kiln hold git checkout main"},
	{"release", cmd_release, "end every hold on change reports",
	 "kiln release"},
	{"why", cmd_why, "say why the last build ran or reused a step",
	 "kiln why sprites/hero"},
	{"log", cmd_log, "print a step's tool output from its last run",
	 "kiln log sprites/hero"},
	{"audit", cmd_audit, "run cached steps again; report outputs that differ",
	 "kiln audit --sample 20"},
	{"trace", cmd_trace, "write a build's timeline (Chrome trace-event JSON)",
	 "kiln trace -o build.json"},
	{"deps", cmd_deps, "print what a step depends on, declared and discovered",
	 "kiln deps shaders/lit.frag"},
	{"rdeps", cmd_rdeps, "print the steps that depend on a file or a step",
	 "kiln rdeps shaders/include/common.glsl --all"},
	{"graph", cmd_graph, "print the step graph (Graphviz dot or JSON)",
	 "kiln graph ui/atlas | dot -Tsvg > atlas.svg"},
	{"need", cmd_need, "from inside a step: build another step, print its output",
	 "\"$KILN\" need textures/stone"},
	{"agent", cmd_agent, "run a daemon's build steps on this machine",
	 "kiln agent --connect tls+tcp://farm:7070 --token-file t"},
	{"help", cmd_help, "show the help of kiln or of one command",
	 "kiln help build"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char usage[] =
	"usage: kiln [--store DIR] [--connect URL [--token-file FILE]\n"
	"            [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]]\n"
	"            COMMAND [ARG...]\n"
	"       kiln --help | --version\n";

static void
help_print(void)
{
	printf("kiln %s — a content build daemon for games\n\n%s\ncommands:\n",
	       KILN_VERSION, usage);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		printf("  %-7s %s\n", commands[i].name, commands[i].summary);
		/* an entry without one is a bug tests/e2e/cli.bats reports */
		if (commands[i].example != NULL)
			printf("          e.g. %s\n", commands[i].example);
	}
	fputs("\n"
	      "options:\n"
	      "  --store DIR          the store folder, for every command (default:\n"
	      "                       <project>/.kiln/store, where the project is\n"
	      "                       the nearest folder upward holding kiln.yaml,\n"
	      "                       else the current folder); with it, put and\n"
	      "                       cat use that store directly, never a daemon\n"
	      "  --connect URL        talk to the daemon at tcp://HOST:PORT or\n"
	      "                       tls+tcp://HOST:PORT instead of the project's\n"
	      "  --token-file FILE    the token that daemon asks for (first line)\n"
	      "  --tls-ca FILE        the CA certificate that signed its TLS\n"
	      "                       certificate (PEM)\n"
	      "  --tls-cert FILE      our TLS certificate (PEM), for a daemon that\n"
	      "                       asks for one (kilnd --tls-client-ca)\n"
	      "  --tls-key FILE       its private key (PEM)\n"
	      "  -h, --help           show this help\n"
	      "  --version            print the version\n"
	      "\n"
	      "examples:\n"
	      "  kiln build -p pc                  build every asset for pc\n"
	      "  kiln why sprites/hero             why that step ran\n"
	      "  kiln graph | dot -Tsvg > g.svg    draw the step graph\n"
	      "\n"
	      "The project is the nearest folder upward holding kiln.yaml (or -C\n"
	      "DIR). Its daemon, kilnd, is started by the first command that needs\n"
	      "it; outside any project such a command says so and exits 2 instead.\n"
	      "put and cat use the daemon when it runs, the store directly when not.\n"
	      "\n"
	      "exit status: 0 ok; 1 problems found (a failed step, corrupt or\n"
	      "missing data); 2 bad usage, bad input, no kiln.yaml here or above,\n"
	      "an unusable store or an unreachable daemon.\n"
	      "Run 'kiln COMMAND --help' for a command's options.\n",
	      stdout);
}

static const struct command *
command_find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* kiln help [COMMAND]: the same text as --help. */
static int
cmd_help(const struct cli *cli, int argc, char **argv)
{
	const struct command *cmd;
	char help[] = "--help";
	char *args[] = {NULL, help, NULL};

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		help_print();
		return CLI_OK;
	}
	if (argc > 2)
		return cli_usage("help", "usage: kiln help [COMMAND]\n",
		                 "expected one command name");
	if ((cmd = command_find(argv[1])) == NULL)
		return cli_usage(NULL, usage, "unknown command '%s'", argv[1]);
	args[0] = argv[1];
	optind = 0;
	return cmd->run(cli, 2, args);
}

/* Parse the options before the command name. Returns CLI_CONTINUE to go
 * on with the command at argv[optind], else the exit status. */
static int
global_parse(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 'S'},
		{"connect", required_argument, NULL, 'c'},
		{"token-file", required_argument, NULL, 't'},
		{"tls-ca", required_argument, NULL, 'a'},
		{"tls-cert", required_argument, NULL, 'C'},
		{"tls-key", required_argument, NULL, 'K'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	int c;

	opterr = 0;
	/* '+': stop at the command name; its options are its own. */
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'S': cli->store = optarg; break;
		case 'c': cli->connect = optarg; break;
		case 't': cli->token_file = optarg; break;
		case 'a': cli->tls_ca = optarg; break;
		case 'C': cli->tls_cert = optarg; break;
		case 'K': cli->tls_key = optarg; break;
		case 'h': help_print(); return CLI_OK;
		case 'V': printf("kiln %s\n", KILN_VERSION); return CLI_OK;
		default: return cli_bad_option(NULL, usage, longopts, c, argv);
		}
	}
	if ((cli->tls_cert == NULL) != (cli->tls_key == NULL))
		return cli_usage(NULL, usage, "--tls-cert and --tls-key go together");
	if (optind >= argc)
		return cli_usage(NULL, usage, "no command given");
	return CLI_CONTINUE;
}

/* Open /dev/null on any of fds 0-2 that the caller closed: otherwise the
 * store's own files could get those numbers, and printing a hash would
 * write into the database. */
static void
stdio_guard(void)
{
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
		    open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
			exit(CLI_USAGE); /* nowhere left to even say so */
}

/* Everything printed on stdout must have arrived (a full disk, a closed
 * pipe), or the exit status would claim success for lost output. */
static int
stdout_close(int rv)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_errorf(NULL, "writing to stdout: %s", strerror(errno));
		return CLI_USAGE;
	}
	return rv;
}

/* The hidden `kiln __complete` (cmd_complete.c), given the table's names. */
static int
complete_run(const struct cli *cli, int argc, char **argv)
{
	const char *names[NCOMMANDS];

	for (size_t i = 0; i < NCOMMANDS; i++)
		names[i] = commands[i].name;
	return cmd_complete(cli, argc, argv, names, NCOMMANDS);
}

int
main(int argc, char **argv)
{
	struct cli cli = {0};
	const struct command *cmd;
	int rv, first;

	stdio_guard();
	if ((rv = global_parse(&cli, argc, argv)) != CLI_CONTINUE)
		exit(stdout_close(rv));
	first = optind;
	optind = 0;
	if (strcmp(argv[first], "__complete") == 0)
		exit(stdout_close(complete_run(&cli, argc - first, argv + first)));
	if ((cmd = command_find(argv[first])) == NULL)
		exit(cli_usage(NULL, usage, "unknown command '%s'", argv[first]));
	optind = 0; /* restart getopt for the command's own options */
	rv = cmd->run(&cli, argc - first, argv + first);
	exit(stdout_close(rv));
}
