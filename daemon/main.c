/* main.c — kilnd, the kiln daemon of one project: the command line, then
 * start, serve until told to stop, and stop cleanly. The only file in
 * daemon/ that exits; everything else returns codes. */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents.h"
#include "cache_env.h"
#include "changes.h"
#include "engine.h"
#include "events.h"
#include "kilnd.h"
#include "owners.h"
#include "server.h"
#include "ui.h"
#include "uploads.h"
#include "verified.h"

/* How long a build whose clients all disconnected waits for one to come
 * back (a reconnect, then a status request) before it is cancelled:
 * longer than a redial takes, short enough that a killed `kiln build`'s
 * tools stop about at once (docs/protocol.md, "When a client goes away"). */
#define ORPHAN_GRACE_MS 2000

static const char usage[] =
	"usage: kilnd [--project DIR] [--store DIR] [--foreground] [OPTION...]\n"
	"       kilnd --help | --version\n";

static const char help[] =
	"kilnd — the kiln daemon of one project\n"
	"\n"
	"usage: kilnd [--project DIR] [--store DIR] [--foreground] [OPTION...]\n"
	"\n"
	"Serves the project's store and events to kiln, editors and agents over\n"
	"ipc://<project>/.kiln/kilnd.sock (mode 0600, this user only). Detaches\n"
	"and logs to <project>/.kiln/kilnd.log unless --foreground; returns once\n"
	"it serves. One daemon per project: a second one exits with status 3.\n"
	"The kiln command starts it when needed; 'kiln stop' or SIGTERM stop it.\n"
	"\n"
	"options:\n"
	"  --project DIR          the project folder (default: the nearest folder\n"
	"                         upward holding kiln.yaml, else the current one)\n"
	"  --store DIR            the store (default <project>/.kiln/store)\n"
	"  -f, --foreground       do not detach; log to stderr\n"
	"  -v, --verbose          log every connection too\n"
	"  --listen URL           also listen on tcp://HOST:PORT (plain: loopback\n"
	"                         only) or tls+tcp://HOST:PORT (any address,\n"
	"                         0.0.0.0 for all); needs at least one of the\n"
	"                         three token files below\n"
	"  --token-file FILE      the client role's token (first line, 16+\n"
	"                         characters): what kiln does (build, cancel,\n"
	"                         events, put, cat, status, why, deps, need,\n"
	"                         hold), but not stop and not agent requests\n"
	"  --agent-token-file FILE  the agent role's: agent requests, blob put,\n"
	"                         get and has, status\n"
	"  --admin-token-file FILE  the admin role's: everything, stop too (the\n"
	"                         ipc socket is always admin)\n"
	"  --tls-cert FILE        PEM certificate for tls+tcp://\n"
	"  --tls-key FILE         PEM private key for tls+tcp://\n"
	"  --tls-client-ca FILE   tls+tcp:// clients must present a certificate\n"
	"                         this PEM CA signed (mutual TLS), and a token\n"
	"  --max-message SIZE     largest request accepted (default 2M); blob\n"
	"                         chunks are 16 KiB smaller\n"
	"  --event-buffer N       events held for slow or returning clients\n"
	"                         (default 4096)\n"
	"  --event-buffer-bytes SIZE  and their bytes at most (default 4M)\n"
	"  --max-subscribers N    subscriptions at once (default 64)\n"
	"  --max-uploads N        blob uploads in progress (default 64)\n"
	"  --max-clients N        connections at once (default 256)\n"
	"  --workers N            requests handled at once (default 16)\n"
	"  --verify-ttl SECONDS   serve a blob re-hashed this recently, whose file\n"
	"                         is unchanged, without re-hashing it (default\n"
	"                         600; 0: re-hash before every transfer)\n"
	"  --settle MS            report a change that is not a finished save\n"
	"                         (a write in progress, a create, a delete) after\n"
	"                         this long without another (default 30; a file\n"
	"                         closed after writing or renamed into place: 2)\n"
	"  --no-watch             do not watch the project with inotify: stat\n"
	"                         every file on every build (also\n"
	"                         KILN_NO_WATCH=1 in the environment)\n"
	"  --materialize MODE     put outputs into build/ as copies (copy) or as\n"
	"                         hard links to the store (hardlink), whatever\n"
	"                         kiln.yaml says (also KILN_MATERIALIZE=MODE)\n"
	"  --local-jobs N         run at most N tools on this machine; 0: run\n"
	"                         every step on build agents (kiln agent; a step\n"
	"                         an agent refuses still runs here)\n"
	"  --agent-lease MS       an agent that has not asked for work this long\n"
	"                         loses its steps to others (default 5000)\n"
	"  --agent-upload-max SIZE  the largest blob the agent role may upload\n"
	"                         (default 4G); a remote connection holds at\n"
	"                         most an eighth of --max-uploads, remote ones\n"
	"                         three quarters in all\n"
	"  -h, --help             show this help\n"
	"  --version              print the version\n"
	"\n"
	"SIZE is bytes or a number with K, M or G (powers of 1024).\n"
	"exit status: 0 serving (or stopped cleanly in the foreground); 1 could\n"
	"not start; 2 bad usage; 3 a daemon already serves this project.\n";

void
kilnd_config_defaults(struct kilnd_config *c)
{
	*c = (struct kilnd_config){
		.max_message = KILN_MAX_MESSAGE_DEFAULT,
		.event_buffer = 4096,
		.event_buffer_bytes = 4u << 20,
		.max_subscribers = 64,
		.max_uploads = 64,
		.max_clients = 256,
		.workers = 16,
		.upload_idle_s = 300,
		.agent_upload_max = KILND_AGENT_UPLOAD_MAX_DEFAULT,
		.verify_ttl_s = 600,
		.settle_ms = 30,
	};
}

/* ---- the command line ---------------------------------------------------- */

static int
bad_usage(const char *fmt, const char *arg)
{
	fputs("kilnd: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage, stderr);
	fputs("Run 'kilnd --help' for details.\n", stderr);
	return KILND_EXIT_USAGE;
}

/* Parse a count or a size with an optional K, M or G suffix within
 * [min, max]. Returns 0 or KILN_EINVAL. */
static int
parse_num(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned shift = 0;

	if (!isdigit((unsigned char)s[0]))
		return KILN_EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	}
	if (toupper((unsigned char)*end) == 'B' ||
	    (toupper((unsigned char)end[0]) == 'I' &&
	     toupper((unsigned char)end[1]) == 'B'))
		end += end[0] == 'b' || end[0] == 'B' ? 1 : 2;
	if (errno != 0 || *end != '\0' || *v > (max >> shift))
		return KILN_EINVAL;
	*v <<= shift;
	return *v >= min && *v <= max ? 0 : KILN_EINVAL;
}

/* Options with a numeric value: where each goes and its bounds. Returns
 * KILND_CONTINUE, or KILND_EXIT_USAGE after saying why. */
static int
option_num(struct kilnd_config *c, int opt, const char *arg)
{
	uint64_t v;

	switch (opt) {
	case 'M':
		if (parse_num(arg, KILN_MAX_MESSAGE_MIN, KILN_MAX_MESSAGE_MAX, &v))
			return bad_usage("--max-message '%s': a size from 64K to 256M",
			                 arg);
		c->max_message = v;
		return KILND_CONTINUE;
	case 'E':
		if (parse_num(arg, 1, 1u << 20, &v))
			return bad_usage("--event-buffer '%s': a count from 1 to 1M", arg);
		c->event_buffer = (uint32_t)v;
		return KILND_CONTINUE;
	case 'B':
		if (parse_num(arg, 4096, 1u << 30, &v))
			return bad_usage("--event-buffer-bytes '%s': a size from 4K to "
			                 "1G", arg);
		c->event_buffer_bytes = v;
		return KILND_CONTINUE;
	case 'D':
		if (parse_num(arg, 1, 10000, &v))
			return bad_usage("--settle '%s': milliseconds from 1 to 10000", arg);
		c->settle_ms = (uint32_t)v;
		return KILND_CONTINUE;
	case 'T':
		if (parse_num(arg, 0, 86400, &v))
			return bad_usage("--verify-ttl '%s': seconds from 0 to 86400", arg);
		c->verify_ttl_s = (uint32_t)v;
		return KILND_CONTINUE;
	case 'J':
		if (parse_num(arg, 0, 4096, &v))
			return bad_usage("--local-jobs '%s': a count from 0 to 4096", arg);
		c->local_jobs = v == 0 ? -1 : (int)v;
		return KILND_CONTINUE;
	case 'X':
		if (parse_num(arg, 4096, 1ull << 50, &v))
			return bad_usage("--agent-upload-max '%s': a size of 4K or more",
			                 arg);
		c->agent_upload_max = v;
		return KILND_CONTINUE;
	case 'L':
		if (parse_num(arg, 200, 600000, &v))
			return bad_usage("--agent-lease '%s': milliseconds from 200 to "
			                 "600000", arg);
		c->lease_ms = (uint32_t)v;
		return KILND_CONTINUE;
	}
	if (parse_num(arg, 1, 4096, &v))
		return bad_usage("'%s': a count from 1 to 4096", arg);
	*(opt == 'S' ? &c->max_subscribers : opt == 'U' ? &c->max_uploads :
	  opt == 'C' ? &c->max_clients : &c->workers) = (uint32_t)v;
	return KILND_CONTINUE;
}

/* Whether sa is a loopback address: 127.0.0.0/8, ::1, or 127.0.0.0/8
 * written as an IPv4-mapped IPv6 address. */
static int
addr_is_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in *in4 = (const void *)sa;
	const struct sockaddr_in6 *in6 = (const void *)sa;

	if (sa->sa_family == AF_INET)
		return ntohl(in4->sin_addr.s_addr) >> 24 == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) &&
		        in6->sin6_addr.s6_addr[12] == 127);
	return 0;
}

/* Whether a plain tcp://HOST:PORT address can only be on the loopback
 * interface: HOST resolves, and every address it resolves to is loopback
 * (nng resolves it again to bind, and may take any of them). Reading the
 * text instead would take a name such as 127.0.0.1.example.com for
 * loopback and refuse [0:0:0:0:0:0:0:1]. An empty host or "*" (every
 * interface) is not loopback. */
static int
is_loopback(const char *url)
{
	const char *host = url + strlen("tcp://"), *end;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	char name[256];
	int all = 1;

	if (*host == '[')
		end = strchr(++host, ']');
	else
		end = strrchr(host, ':');
	if (end == NULL || end == host || (size_t)(end - host) >= sizeof(name))
		return 0;
	memcpy(name, host, (size_t)(end - host));
	name[end - host] = '\0';
	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai != NULL; ai = ai->ai_next)
		all &= addr_is_loopback(ai->ai_addr);
	freeaddrinfo(res);
	return all;
}

/* The remote-listener options make sense together. Returns KILND_CONTINUE,
 * or KILND_EXIT_USAGE after saying why. */
static int
options_check(const struct kilnd_config *c)
{
	int tls;

	int tokens = c->token_file || c->agent_token_file || c->admin_token_file;

	if (c->listen == NULL)
		return tokens || c->tls_cert || c->tls_key || c->tls_client_ca ?
		       bad_usage("%s need --listen", "--*token-file/--tls-*") :
		       KILND_CONTINUE;
	tls = strncmp(c->listen, "tls+tcp://", 10) == 0;
	if (!tls && strncmp(c->listen, "tcp://", 6) != 0)
		return bad_usage("--listen '%s': expected tcp://HOST:PORT or "
		                 "tls+tcp://HOST:PORT", c->listen);
	if (!tokens)
		return bad_usage("--listen %s needs --token-file, --agent-token-file "
		                 "or --admin-token-file FILE (remote clients must "
		                 "present a role's token)", c->listen);
	if (tls && (c->tls_cert == NULL || c->tls_key == NULL))
		return bad_usage("--listen %s needs --tls-cert and --tls-key",
		                 c->listen);
	if (!tls && c->tls_client_ca != NULL)
		return bad_usage("--tls-client-ca needs a tls+tcp:// listener, not "
		                 "%s", c->listen);
	if (!tls && !is_loopback(c->listen))
		return bad_usage("--listen %s: plain tcp:// only on the loopback "
		                 "address (a host that resolves to 127.0.0.0/8 or "
		                 "::1 only); use tls+tcp:// across machines",
		                 c->listen);
	return KILND_CONTINUE;
}

/* Parse argv into c. Returns KILND_CONTINUE to run, else the exit status. */
static int
options_parse(struct kilnd *d, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'p'},
		{"store", required_argument, NULL, 's'},
		{"foreground", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"listen", required_argument, NULL, 'l'},
		{"token-file", required_argument, NULL, 't'},
		{"agent-token-file", required_argument, NULL, 'g'},
		{"admin-token-file", required_argument, NULL, 'a'},
		{"tls-client-ca", required_argument, NULL, 'A'},
		{"tls-cert", required_argument, NULL, 'c'},
		{"tls-key", required_argument, NULL, 'k'},
		{"max-message", required_argument, NULL, 'M'},
		{"event-buffer", required_argument, NULL, 'E'},
		{"event-buffer-bytes", required_argument, NULL, 'B'},
		{"max-subscribers", required_argument, NULL, 'S'},
		{"max-uploads", required_argument, NULL, 'U'},
		{"max-clients", required_argument, NULL, 'C'},
		{"workers", required_argument, NULL, 'W'},
		{"verify-ttl", required_argument, NULL, 'T'},
		{"no-watch", no_argument, NULL, 'N'},
		{"settle", required_argument, NULL, 'D'},
		{"materialize", required_argument, NULL, 'm'},
		{"local-jobs", required_argument, NULL, 'J'},
		{"agent-lease", required_argument, NULL, 'L'},
		{"agent-upload-max", required_argument, NULL, 'X'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct kilnd_config *c = &d->cfg;
	int opt, rv;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":fvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': c->project = optarg; break;
		case 's': c->store = optarg; break;
		case 'f': c->foreground = 1; break;
		case 'v': d->verbose = 1; break;
		case 'l': c->listen = optarg; break;
		case 't': c->token_file = optarg; break;
		case 'g': c->agent_token_file = optarg; break;
		case 'a': c->admin_token_file = optarg; break;
		case 'A': c->tls_client_ca = optarg; break;
		case 'c': c->tls_cert = optarg; break;
		case 'k': c->tls_key = optarg; break;
		case 'N': c->no_watch = 1; break;
		case 'm':
			if ((c->materialize = kiln_mat_mode_parse(optarg)) == KILN_MAT_UNSET)
				return bad_usage("--materialize '%s': expected copy or hardlink",
				                 optarg);
			break;
		case 'h': fputs(help, stdout); return KILND_EXIT_OK;
		case 'V': printf("kilnd %s\n", KILND_VERSION); return KILND_EXIT_OK;
		case ':': return bad_usage("option '%s' needs a value", argv[optind - 1]);
		case '?': return bad_usage("unknown option '%s'", argv[optind - 1]);
		default:
			if ((rv = option_num(c, opt, optarg)) != KILND_CONTINUE)
				return rv;
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	return options_check(c);
}

/* ---- starting ------------------------------------------------------------ */

/* Read one role's token: the file's first line, at least 16 bytes.
 * Returns 0, or a KILN_E* code after saying why on stderr. */
static int
token_load(const char *option, const char *path, struct role_token *t)
{
	FILE *f;
	size_t n;
	int err;

	if ((f = fopen(path, "re")) == NULL) {
		err = errno;
		fprintf(stderr, "kilnd: %s %s: %s\n", option, path, strerror(err));
		return kiln_err_from_errno(err);
	}
	if (fgets(t->secret, sizeof(t->secret), f) == NULL)
		t->secret[0] = '\0';
	fclose(f);
	n = strcspn(t->secret, "\r\n");
	t->secret[n] = '\0';
	t->len = n;
	if (n < 16) {
		fprintf(stderr, "kilnd: %s %s: the token (its first line) must "
		        "have at least 16 characters\n", option, path);
		return KILN_EINVAL;
	}
	return 0;
}

/* Read every role's token file given. Two roles with one token would make
 * a request's role ambiguous (and a client token an admin's): refused. */
static int
tokens_load(struct kilnd *d)
{
	static const char *const option[ROLE_COUNT] = {
		[ROLE_CLIENT] = "--token-file",
		[ROLE_AGENT] = "--agent-token-file",
		[ROLE_ADMIN] = "--admin-token-file",
	};
	const char *path[ROLE_COUNT] = {
		[ROLE_CLIENT] = d->cfg.token_file,
		[ROLE_AGENT] = d->cfg.agent_token_file,
		[ROLE_ADMIN] = d->cfg.admin_token_file,
	};
	struct role_token *t = d->tokens;
	int rv;

	for (int r = ROLE_CLIENT; r < ROLE_COUNT; r++)
		if (path[r] != NULL &&
		    (rv = token_load(option[r], path[r], &t[r])) != 0)
			return rv;
	for (int r = ROLE_CLIENT; r < ROLE_COUNT; r++)
		for (int o = r + 1; o < ROLE_COUNT; o++)
			if (t[r].len > 0 && t[r].len == t[o].len &&
			    memcmp(t[r].secret, t[o].secret, t[r].len) == 0) {
				fprintf(stderr, "kilnd: %s and %s hold the same token; "
				        "each role needs its own\n", option[r], option[o]);
				return KILN_EINVAL;
			}
	return 0;
}

/* The store folder, made absolute, opened (created if need be). */
static int
store_open(struct kilnd *d, char *err, size_t len)
{
	/* the daemon lives long and maps every page: walk them once first */
	kiln_store_opts o = {.flags = KILN_STORE_CREATE | KILN_STORE_CHECK_PAGES,
	                     .durability = KILN_DURABLE_BATCH};
	const char *dir = d->cfg.store ? d->cfg.store : d->paths.store;
	int rv;

	if ((rv = kiln_store_open(dir, &o, &d->store)) == KILN_ECORRUPT) {
		/* Starting on it could only crash later: refuse, and say how
		 * to get a working store back. */
		snprintf(err, len, "%s/db/data.mdb: the store's database is damaged "
		         "(cut short, or a page overwritten); run 'kiln fsck --repair' "
		         "to set it aside and start a new one", dir);
		return rv;
	}
	if (rv != 0) {
		snprintf(err, len, "%s: cannot open the store: %s", dir,
		         kiln_strerror(rv));
		return rv;
	}
	if (realpath(dir, d->store_dir) == NULL)
		snprintf(d->store_dir, sizeof(d->store_dir), "%s", dir);
	return 0;
}

/* The engine's agent_wake: jobs wait for agents (e->mu held: quick). */
static void
engine_agent_wake(void *arg, unsigned n)
{
	struct kilnd *d = arg;

	agents_wake(d->agents, n);
}

static void
engine_publish(void *arg, Kiln__Event *ev)
{
	struct kilnd *d = arg;

	events_publish(d->events, ev);
}

/* The watch's changes, on their way to SourcesChanged events. */
static void
engine_changed(void *arg, const char *relpath, int complete)
{
	struct kilnd *d = arg;

	changes_note(d->changes, relpath, complete);
}

static void
engine_log(void *arg, int error, const char *msg)
{
	kilnd_log(arg, error ? KILND_ERROR : KILND_INFO, "%s", msg);
}

/* The build engine, on the project and store (it reads the descriptions
 * at the first build). */
static int
engine_start(struct kilnd *d, char *err, size_t len)
{
	const char *path = getenv("PATH"), *nw = getenv("KILN_NO_WATCH");
	const char *hold = getenv("KILN_TEST_HOLD_FINISH_MS");
	const char *hold_place = getenv("KILN_TEST_HOLD_PLACE_MS");
	const char *stall = getenv("KILN_TEST_WATCH_STALL_MS");
	const char *hold_edits = getenv("KILN_TEST_HOLD_EDITS_MS");
	const char *mat = getenv("KILN_MATERIALIZE");
	struct engine_config c = {
		.root = d->paths.project,
		.store = d->store,
		.workers = d->cfg.build_workers,
		.tool_path = path && path[0] ? path : NULL,
		.settle_ms = d->cfg.settle_ms,
		.no_watch = d->cfg.no_watch || (nw != NULL && nw[0] != '\0' && strcmp(nw, "0") != 0),
		.hold_finish_ms = hold ? (unsigned)strtoul(hold, NULL, 10) : 0,
		.hold_place_ms = hold_place ? (unsigned)strtoul(hold_place, NULL, 10) : 0,
		.watch_stall_ms = stall ? (unsigned)strtoul(stall, NULL, 10) : 0,
		.hold_edits_ms = hold_edits ? (unsigned)strtoul(hold_edits, NULL, 10) : 0,
		.materialize = (kiln_mat_mode)d->cfg.materialize,
		.build_umask = d->user_umask,
		.ipc_url = d->paths.url,
		.local_jobs = d->cfg.local_jobs,
		.lease_ms = d->cfg.lease_ms,
		.agent_wake = engine_agent_wake,
		.publish = engine_publish,
		.changed = engine_changed,
		.log = engine_log,
		.arg = d,
	};
	int rv;

	/* the flag first; a bad value in the environment is refused like a
	 * bad flag, not quietly ignored */
	if (c.materialize == KILN_MAT_UNSET && mat != NULL && mat[0] != '\0' &&
	    (c.materialize = kiln_mat_mode_parse(mat)) == KILN_MAT_UNSET) {
		snprintf(err, len, "KILN_MATERIALIZE='%s': expected copy or hardlink", mat);
		return KILN_EINVAL;
	}
	/* the shared cache for this machine, over the user's file and the
	 * project's `cache:` */
	if ((rv = cache_env_read(&c.cache, err, len)) != 0)
		return rv;
	if ((rv = changes_new(d->cfg.settle_ms, engine_publish, d, &d->changes)) != 0) {
		snprintf(err, len, "starting the change reporter: %s", kiln_strerror(rv));
		return rv;
	}
	rv = engine_new(&c, &d->engine);
	if (rv != 0)
		snprintf(err, len, "starting the build engine: %s", kiln_strerror(rv));
	return rv;
}

/* owners.c's cancel: a build whose clients all went away. */
static void
orphan_cancel(void *arg, uint64_t build)
{
	struct kilnd *d = arg;

	if (engine_cancel(d->engine, build) == 0)
		kilnd_log(d, KILND_INFO, "cancelled build %llu: every client that "
		          "wanted it disconnected %u ms ago", (unsigned long long)build,
		          ORPHAN_GRACE_MS);
}

/* owners.c's question: has the build ended (or been forgotten)? */
static int
build_ended(void *arg, uint64_t build)
{
	struct kilnd *d = arg;
	Kiln__BuildFinished bf;

	return engine_build_status(d->engine, build, &bf) != 0 || bf.done;
}

/* Track which clients want each build, so that a build whose client died
 * (kill -9) does not run on for nobody. */
static int
owners_start(struct kilnd *d)
{
	struct owners_config oc = {ORPHAN_GRACE_MS, orphan_cancel, build_ended, d};

	return owners_new(&oc, &d->owners);
}

/* Say what a killed daemon left behind, now that there is a log. */
static void
stale_report(struct kilnd *d)
{
	const char *what = d->stale_sock ? "socket and pid file" : "pid file";

	if (d->stale_pid != 0)
		kilnd_log(d, KILND_WARNING, "the previous daemon (pid %ld) did not "
		          "stop cleanly (killed?); removed its stale %s",
		          d->stale_pid, what);
	else if (d->stale_sock)
		kilnd_log(d, KILND_WARNING, "removed a stale socket left by a "
		          "daemon that did not stop cleanly");
}

/* Everything from the lock to serving. Returns an exit status; err says
 * why on failure. */
static int
start(struct kilnd *d, char *err, size_t len)
{
	long other;
	int rv;

	d->chunk_size = kiln_proto_chunk_max(d->cfg.max_message);
	if ((rv = kilnd_lock(d, &other)) == KILN_EBUSY) {
		snprintf(err, len, "kilnd: a daemon already serves %s (pid %ld)",
		         d->paths.project, other);
		return KILND_EXIT_RUNNING;
	}
	if (rv != 0 || (rv = kilnd_log_open(d)) != 0) {
		snprintf(err, len, "kilnd: %s: %s", d->paths.dir, kiln_strerror(rv));
		return KILND_EXIT_FAIL;
	}
	/* The store's maps survive a file cut short under them (guard.c):
	 * taken before any thread exists. */
	if ((rv = kilnd_signals_init(d)) != 0 ||
	    (rv = kiln_store_guard_install()) != 0 ||
	    (rv = events_new(d->cfg.event_buffer, d->cfg.event_buffer_bytes,
	                     d->cfg.max_subscribers, &d->events)) != 0) {
		snprintf(err, len, "kilnd: starting: %s", kiln_strerror(rv));
		return KILND_EXIT_FAIL;
	}
	stale_report(d);
	if ((rv = store_open(d, err, len)) != 0 ||
	    (rv = verified_new(d->cfg.verify_ttl_s ? 1024 : 0, d->cfg.verify_ttl_s,
	                       &d->verified)) != 0 ||
	    (rv = uploads_new(d->store, d->cfg.max_uploads, d->cfg.upload_idle_s,
	                      &d->uploads)) != 0 ||
	    (rv = engine_start(d, err, len)) != 0 ||
	    (rv = owners_start(d)) != 0 ||
	    (rv = agents_new(d, &d->agents)) != 0 ||
	    (rv = ui_new(d, &d->ui)) != 0 ||
	    (rv = server_start(d, err, len)) != 0) {
		if (err[0] == '\0')
			snprintf(err, len, "starting: %s", kiln_strerror(rv));
		kilnd_log(d, KILND_ERROR, "%s", err);
		return KILND_EXIT_FAIL;
	}
	d->start_ns = kiln_mono_ns();
	ui_resume(d->ui);
	kilnd_log(d, KILND_INFO, "kilnd %s serving %s on %s (pid %ld, store %s)",
	          KILND_VERSION, d->paths.project, d->paths.url, (long)getpid(),
	          d->store_dir);
	if (d->cfg.listen)
		kilnd_log(d, KILND_INFO, "also listening on %s (a role's token "
		          "required:%s%s%s%s)", d->cfg.listen,
		          d->cfg.token_file ? " client" : "",
		          d->cfg.agent_token_file ? " agent" : "",
		          d->cfg.admin_token_file ? " admin" : "",
		          d->cfg.tls_client_ca ? "; and a client certificate" : "");
	return KILND_EXIT_OK;
}

/* ---- stopping ------------------------------------------------------------ */

/* Tell subscribers, then take everything down in the reverse order. */
static void
stop(struct kilnd *d)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__Stopping s = KILN__STOPPING__INIT;

	if (d->server != NULL) {
		kilnd_log(d, KILND_INFO, "stopping (%s)", d->stop_reason);
		s.reason = d->stop_reason;
		e.kind_case = KILN__EVENT__KIND_STOPPING;
		e.stopping = &s;
		events_publish(d->events, &e);
	}
	atomic_store(&d->stopping, 1);
	server_stop(d);          /* no handler runs after this */
	ui_free(d->ui);          /* nor a dashboard's call */
	d->ui = NULL;
	agents_stop(d->agents);  /* no lease expires after this */
	owners_free(d->owners);  /* no cancel after this */
	d->owners = NULL;
	engine_free(d->engine);  /* running tools killed, finished work kept */
	d->engine = NULL;
	/* only now: until engine_free the engine's threads may wake takes
	 * (engine_agent_wake reads d->agents) */
	agents_free(d->agents);
	d->agents = NULL;
	changes_free(d->changes); /* after the engine: its watch reports here */
	d->changes = NULL;
	uploads_free(d->uploads); /* unfinished uploads leave nothing behind */
	d->uploads = NULL;
	kiln_store_close(d->store);
	d->store = NULL;
	verified_free(d->verified);
	d->verified = NULL;
	events_free(d->events);
	d->events = NULL;
	kilnd_unlock(d);
	if (d->start_ns != 0)
		kilnd_log(d, KILND_INFO, "stopped");
	kilnd_log_close(d);
}

static int
run(struct kilnd *d)
{
	char err[2 * PATH_MAX] = "";
	int rv, status;

	if ((rv = kiln_paths_init(&d->paths, d->cfg.project)) != 0) {
		fprintf(stderr, "kilnd: %s: %s%s\n",
		        d->cfg.project ? d->cfg.project : "the project folder",
		        kiln_strerror(rv), rv == KILN_ERANGE ? " (the path is too "
		        "long for a unix socket: at most 107 bytes with "
		        "/.kiln/kilnd.sock)" : "");
		return KILND_EXIT_FAIL;
	}
	if (tokens_load(d) != 0)
		return KILND_EXIT_USAGE;
	if ((rv = kilnd_detach(d, &status)) != KILND_DETACH_CHILD)
		return rv == KILND_DETACH_PARENT ? status : KILND_EXIT_FAIL;
	if ((status = start(d, err, sizeof(err))) != KILND_EXIT_OK) {
		if (d->cfg.foreground)
			fprintf(stderr, "%s\n", err);
		kilnd_ready(d, status, err);
		stop(d);
		return status;
	}
	kilnd_ready(d, KILND_EXIT_OK, NULL);
	kilnd_wait(d);
	stop(d);
	return KILND_EXIT_OK;
}

int
main(int argc, char **argv)
{
	struct kilnd d = {.lock_fd = -1, .ready_fd = -1, .wake_fd = -1,
	                  .sig_fd = -1, .log_fd = -1};
	int status;

	/* Inherited descriptors (a test harness's pipes, a shell's) would stay
	 * open for the daemon's whole life. */
	closefrom(STDERR_FILENO + 1);
	d.user_umask = umask(077);
	/* Many worker threads each making and freeing small records would
	 * otherwise get a malloc arena each, every one keeping its own free
	 * memory; two are enough (docs/build.md, "Daemon memory"). */
	mallopt(M_ARENA_MAX, 2);
	pthread_mutex_init(&d.log_mu, NULL);
	kilnd_config_defaults(&d.cfg);
	if ((status = options_parse(&d, argc, argv)) != KILND_CONTINUE)
		exit(status);
	status = run(&d);
	pthread_mutex_destroy(&d.log_mu);
	exit(status);
}
