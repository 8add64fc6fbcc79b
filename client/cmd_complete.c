/* cmd_complete.c — `kiln __complete`, the hidden helper the bash completion
 * (client/kiln.bash-completion) asks for words: the command names, a
 * project's profiles, a profile's step URLs. One word a line, nothing on
 * failure (a completion must stay quiet), and never a daemon: the names
 * come from the descriptions alone. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kiln_desc.h"

static const char complete_usage[] =
	"usage: kiln __complete commands | profiles [-C DIR] | "
	"urls [-C DIR] [-p PROFILE]\n";

/* The profiles or the step URLs of the project in dir (NULL: found from
 * here), quietly. */
static int
complete_project(const char *what, const char *dir, const char *profile)
{
	char root[PATH_MAX];
	const char *const *names;
	const kiln_plan *p;
	kiln_desc *d = NULL;
	size_t n;

	if (cli_project_dir(dir, root, sizeof root) != 0 ||
	    kiln_desc_load(root, &d) == KILN_ENOTFOUND || d == NULL)
		return CLI_USAGE;
	n = kiln_desc_profiles(d, &names);
	if (strcmp(what, "profiles") == 0) {
		for (size_t i = 0; i < n; i++)
			puts(names[i]);
	} else if ((p = kiln_desc_plan(d, profile ? profile : n ? names[0] : ""))
	           != NULL) {
		for (size_t i = 0; i < p->nsteps; i++)
			puts(p->steps[i].url);
	}
	kiln_desc_free(d);
	return CLI_OK;
}

int
cmd_complete(const struct cli *cli, int argc, char **argv,
             const char *const *commands, size_t ncommands)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'C'},
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{0},
	};
	const char *dir = NULL, *profile = NULL, *what;
	int ch;

	(void)cli;
	while ((ch = getopt_long(argc, argv, ":C:p:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'p': profile = optarg; break;
		default: return cli_bad_option("__complete", complete_usage, longopts, ch, argv);
		}
	}
	if (optind + 1 != argc)
		return cli_usage("__complete", complete_usage, "which words?");
	what = argv[optind];
	if (strcmp(what, "commands") == 0) {
		for (size_t i = 0; i < ncommands; i++)
			puts(commands[i]);
		return CLI_OK;
	}
	if (strcmp(what, "profiles") == 0 || strcmp(what, "urls") == 0)
		return complete_project(what, dir, profile);
	return cli_usage("__complete", complete_usage, "unknown words '%s'", what);
}
