/* cmd_agent.c — kiln agent: options, then agent.c's loop until a signal
 * (docs/agents.md). */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "cli.h"

static const char agent_usage[] =
	"usage: kiln agent --connect URL [--token-file FILE] [--tls-ca FILE]\n"
	"                  [--tls-cert FILE --tls-key FILE]\n"
	"                  [-j N] [--cache DIR] [--cache-max SIZE] [--name NAME]\n";
static const char agent_help[] =
	"usage: kiln agent --connect URL [--token-file FILE] [--tls-ca FILE]\n"
	"                  [--tls-cert FILE --tls-key FILE]\n"
	"                  [-j N] [--cache DIR] [--cache-max SIZE] [--name NAME]\n"
	"\n"
	"Run build steps for the daemon at URL (tls+tcp://HOST:PORT across\n"
	"machines, tcp:// on a trusted network or loopback) until stopped with\n"
	"SIGINT or SIGTERM. The agent needs no copy of the project: each step's\n"
	"inputs are fetched by hash into the cache (kept between steps and runs)\n"
	"and laid out under the cache's work folder with the project's relative\n"
	"paths; the tool runs there traced; outputs, log and what it read go back\n"
	"to the daemon, which records the result as if it had run the tool. A\n"
	"step whose program here differs from the daemon's is refused (the\n"
	"daemon runs it elsewhere). When the daemon goes away the agent connects\n"
	"again by itself.\n"
	"\n"
	"  --connect URL       the daemon (its kilnd --listen address)\n"
	"  --token-file FILE   the daemon's agent token (kilnd --agent-token-file;\n"
	"                      the first line of FILE)\n"
	"  --tls-ca FILE       the CA that signed the daemon's certificate\n"
	"  --tls-cert FILE, --tls-key FILE\n"
	"                      this agent's certificate and key, for a daemon that\n"
	"                      asks for one (kilnd --tls-client-ca)\n"
	"  -j, --jobs N        steps at once (default: the cores)\n"
	"  --cache DIR         the local store and work folders (default\n"
	"                      $XDG_CACHE_HOME/kiln/agent, else ~/.cache/kiln/agent);\n"
	"                      one agent per cache (a second one is refused)\n"
	"  --cache-max SIZE    the cache's blobs take at most about this much;\n"
	"                      the least recently used go first (default 10G)\n"
	"  --name NAME         what kiln status and step events call this agent\n"
	"                      (default: the host name)\n"
	"\n"
	"With KILN_CACHE_URL in the environment (and KILN_CACHE_MODE=readwrite,\n"
	"KILN_CACHE_{BASIC_AUTH,BEARER_TOKEN,CA}_FILE as for kilnd) inputs are\n"
	"fetched from that shared cache first and outputs put there, checked by\n"
	"their SHA-256: the daemon's link then carries only the small messages.\n"
	"\n"
	"Exit status: 0 stopped by a signal; 1 could not start (the cache, a\n"
	"refused token); 2 usage.\n";

static volatile sig_atomic_t stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

int
cmd_agent(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"connect", required_argument, NULL, 'c'},
		{"token-file", required_argument, NULL, 't'},
		{"tls-ca", required_argument, NULL, 'a'},
		{"tls-cert", required_argument, NULL, 'C'},
		{"tls-key", required_argument, NULL, 'K'},
		{"jobs", required_argument, NULL, 'j'},
		{"cache", required_argument, NULL, 'd'},
		{"name", required_argument, NULL, 'n'},
		{"cache-max", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct agent_config cfg = {.url = cli->connect, .tls_ca = cli->tls_ca,
	                           .tls_cert = cli->tls_cert, .tls_key = cli->tls_key,
	                           .stop = &stop_flag};
	const char *token_file = cli->token_file;
	char token[256], cache[PATH_MAX], host[256];
	struct sigaction sa = {0};
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	char *end;
	int ch;

	cfg.slots = cores > 0 ? (unsigned)cores : 1;
	cfg.cache_max = (uint64_t)10 << 30;
	while ((ch = getopt_long(argc, argv, ":j:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': cfg.url = optarg; break;
		case 't': token_file = optarg; break;
		case 'a': cfg.tls_ca = optarg; break;
		case 'C': cfg.tls_cert = optarg; break;
		case 'K': cfg.tls_key = optarg; break;
		case 'd': cfg.cache = optarg; break;
		case 'n': cfg.name = optarg; break;
		case 'm':
			if (cli_parse_size(optarg, &cfg.cache_max) != 0 ||
			    cfg.cache_max < (1u << 20))
				return cli_usage("agent", agent_usage, "--cache-max '%s': a "
				                 "size of at least 1M", optarg);
			break;
		case 'j': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || v < 1 || v > 256)
				return cli_usage("agent", agent_usage, "-j '%s': a count from "
				                 "1 to 256", optarg);
			cfg.slots = (unsigned)v;
			break;
		}
		case 'h': return cli_help(agent_help);
		default: return cli_bad_option("agent", agent_usage, longopts, ch, argv);
		}
	}
	if (optind != argc)
		return cli_usage("agent", agent_usage, "unexpected argument '%s'", argv[optind]);
	if ((cfg.tls_cert == NULL) != (cfg.tls_key == NULL))
		return cli_usage("agent", agent_usage, "--tls-cert and --tls-key go together");
	if (cfg.url == NULL)
		return cli_usage("agent", agent_usage, "which daemon? (--connect URL)");
	if (token_file != NULL) {
		if (cli_token_read("agent", token_file, token, sizeof token) != CLI_OK)
			return CLI_USAGE;
		cfg.token = token;
	}
	if (cfg.cache == NULL) {
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		if (xdg != NULL && xdg[0] == '/')
			snprintf(cache, sizeof cache, "%s/kiln/agent", xdg);
		else if (home != NULL && home[0] == '/')
			snprintf(cache, sizeof cache, "%s/.cache/kiln/agent", home);
		else
			return cli_usage("agent", agent_usage, "no $HOME: which cache? "
			                 "(--cache DIR)");
		cfg.cache = cache;
	} else if (cfg.cache[0] != '/') {
		/* the work folder's path goes into traces: make it absolute */
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof cwd) == NULL ||
		    snprintf(cache, sizeof cache, "%s/%s", cwd, cfg.cache) >= (int)sizeof cache)
			return cli_usage("agent", agent_usage, "--cache %s: path too long",
			                 cfg.cache);
		cfg.cache = cache;
	}
	/* the shared cache, as the daemon's environment names it */
	{
		const char *u = getenv("KILN_CACHE_URL"), *m = getenv("KILN_CACHE_MODE");
		if (u != NULL && u[0] != '\0' && (m == NULL || strcmp(m, "off") != 0)) {
			if (m != NULL && m[0] != '\0' && strcmp(m, "read") != 0 &&
			    strcmp(m, "readwrite") != 0)
				return cli_usage("agent", agent_usage, "KILN_CACHE_MODE='%s': "
				                 "expected read, readwrite or off", m);
			cfg.shared_url = u;
			cfg.shared_rw = m != NULL && strcmp(m, "readwrite") == 0;
			cfg.shared_basic = getenv("KILN_CACHE_BASIC_AUTH_FILE");
			cfg.shared_bearer = getenv("KILN_CACHE_BEARER_TOKEN_FILE");
			cfg.shared_ca = getenv("KILN_CACHE_CA_FILE");
		}
	}
	if (cfg.name == NULL) {
		if (gethostname(host, sizeof host) != 0)
			snprintf(host, sizeof host, "agent");
		host[sizeof host - 1] = '\0';
		cfg.name = host;
	}
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return agent_main(&cfg);
}
