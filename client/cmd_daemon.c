/* cmd_daemon.c — the commands that talk to the daemon about itself:
 * status, stop and events. All go through libkiln (kiln.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;
#include "kiln_proto.h"

#define DAEMON_OPTION_HELP                                                   \
	"  -C, --project DIR    the project folder (default: the nearest folder\n" \
	"                       upward holding kiln.yaml)\n"                      \
	"  -h, --help           show this help\n"                                 \
	"(the global options --connect URL, --token-file FILE, --tls-ca FILE\n" \
	"and --tls-cert/--tls-key FILE talk to a remote daemon instead of the\n" \
	"project's)\n"

/* ---- status ------------------------------------------------------------ */

static const char status_usage[] = "usage: kiln status [-C DIR] [--json]\n";

static const char status_help[] =
	"usage: kiln status [-C DIR] [--json]\n"
	"\n"
	"Show the project's daemon: pid, uptime, version, project, store,\n"
	"addresses, connected clients and subscribers, queues, events held,\n"
	"requests answered, and the shared cache's counters (steps downloaded\n"
	"and missed, bytes down and up, results uploaded, pending and dropped\n"
	"uploads, errors, corrupt entries, the breaker), and the store: its\n"
	"blobs and bytes, whether a gc runs, and what the last gc removed.\n"
	"Starts the daemon when none runs.\n"
	"\n"
	"options:\n"
	"  --json               one JSON object instead of lines (the event\n"
	"                       epoch is a 16-hex-digit string)\n"
	DAEMON_OPTION_HELP
	"\n"
	"exit status: 0 the daemon answered; 2 no daemon could be reached or\n"
	"started, or no kiln.yaml here or in any folder above.\n";

/* The build agents connected now, one line each. */
static void
agents_print(const kiln_status *st)
{
	if (st->nagents == 0) {
		printf("agents    none\n");
		return;
	}
	for (uint32_t i = 0; i < st->nagents && i < 64; i++) {
		char in[32], out[32];
		printf("%s%s: %" PRIu32 " slots, %" PRIu32 " running; %" PRIu64 " ran, %"
		       PRIu64 " failed, %" PRIu64 " refused; %s in, %s out\n",
		       i ? "          " : "agents    ",
		       st->agents[i].name, st->agents[i].slots, st->agents[i].running,
		       st->agents[i].ran, st->agents[i].failed, st->agents[i].refused,
		       cli_format_size(st->agents[i].bytes_in, in, sizeof in),
		       cli_format_size(st->agents[i].bytes_out, out, sizeof out));
	}
	if (st->nagents > 64)
		printf("          and %" PRIu32 " more\n", st->nagents - 64);
}

/* "2026-11-26 05:10:03 UTC" */
static const char *
utc_time(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "%" PRId64 " ns", ns);
	return buf;
}

static void
store_print(const kiln_status *st)
{
	char size[32], when[40];

	if (!st->store_stats_known) {
		printf("store     figures unknown%s%s\n", st->store_error[0] ? ": " : "",
		       st->store_error);
		return;
	}
	printf("store     %" PRIu64 " blobs, %s (%" PRIu64 " bytes)%s\n",
	       st->store_blobs, cli_format_size(st->store_bytes, size, sizeof size),
	       st->store_bytes, st->store_exact ? "" : ", not counting an older kiln's puts");
	if (st->gc_running)
		printf("gc        running since %s\n", utc_time(st->gc_started_ns, when, sizeof when));
	if (st->last_gc_end_ns == 0) {
		if (!st->gc_running)
			printf("gc        none finished yet\n");
		return;
	}
	printf("%s %s: removed %" PRIu64 " blobs (%s), %" PRIu64 " action results; "
	       "took %.2f s\n", st->gc_running ? "          last gc" : "gc        last",
	       utc_time(st->last_gc_end_ns, when, sizeof when),
	       st->last_gc_removed_blobs,
	       cli_format_size(st->last_gc_removed_bytes, size, sizeof size),
	       st->last_gc_removed_actions,
	       (double)(st->last_gc_end_ns - st->last_gc_start_ns) / 1e9);
}

static void
status_print(const kiln_status *st)
{
	char held[32], cap[32];

	printf("kilnd %s (pid %" PRIu32 "), up %" PRIu64 ".%03" PRIu64 "s\n",
	       st->version, st->pid, st->uptime_ms / 1000, st->uptime_ms % 1000);
	printf("project   %s\nstore     %s\n", st->project, st->store);
	for (int i = 0; i < 2 && st->listen[i][0]; i++)
		printf("listen    %s\n", st->listen[i]);
	printf("clients   %" PRIu32 " connected, %" PRIu32 " subscribed\n",
	       st->clients, st->subscribers);
	printf("queues    %" PRIu32 " build steps, %" PRIu32 " uploads\n",
	       st->build_queue, st->uploads);
	printf("events    %016" PRIx64 ":%" PRIu64 " newest; %" PRIu32 " held "
	       "(%s of %s, at most %" PRIu32 ")\n", st->event_epoch, st->event_seq,
	       st->events_held, cli_format_size(st->events_bytes, held, sizeof(held)),
	       cli_format_size(st->event_buffer_bytes, cap, sizeof(cap)),
	       st->event_buffer);
	printf("requests  %" PRIu64 " answered, %" PRIu64 " refused\n",
	       st->requests, st->bad_requests);
	agents_print(st);
	store_print(st);
	if (st->cache_url[0] == '\0') {
		printf("cache     none\n");
		return;
	}
	printf("cache     %s (%s)%s\n", st->cache_url, st->cache_mode,
	       st->cache_breaker_open ? ", not asked for now: it kept failing" : "");
	printf("          %" PRIu64 " steps downloaded, %" PRIu64 " missed; %s down, "
	       "%s up\n", st->cache_hits, st->cache_misses,
	       cli_format_size(st->cache_bytes_down, held, sizeof(held)),
	       cli_format_size(st->cache_bytes_up, cap, sizeof(cap)));
	printf("          %" PRIu64 " results uploaded, %" PRIu32 " pending, %" PRIu64
	       " dropped; %" PRIu64 " errors, %" PRIu64 " corrupt\n", st->cache_uploaded,
	       st->cache_pending, st->cache_dropped, st->cache_errors, st->cache_corrupt);
	printf("          %" PRIu64 " blobs not uploaded: the server had them\n",
	       st->cache_skipped_uploads);
}

static json_t *
agents_json(const kiln_status *st, int *err)
{
	json_t *arr = json_array();

	for (uint32_t i = 0; i < st->nagents && i < 64; i++) {
		json_t *a = json_object();
		*err |= kiln_json_text(a, "name", st->agents[i].name);
		*err |= kiln_json_uint(a, "slots", st->agents[i].slots);
		*err |= kiln_json_uint(a, "running", st->agents[i].running);
		*err |= kiln_json_uint(a, "ran", st->agents[i].ran);
		*err |= kiln_json_uint(a, "failed", st->agents[i].failed);
		*err |= kiln_json_uint(a, "refused", st->agents[i].refused);
		*err |= kiln_json_uint(a, "bytes_in", st->agents[i].bytes_in);
		*err |= kiln_json_uint(a, "bytes_out", st->agents[i].bytes_out);
		*err |= kiln_json_push(arr, a);
	}
	return arr;
}

/* Flat fields after the others; absent when the figures are unknown
 * (store_error says why, when the daemon said). */
static void
store_json(json_t *o, const kiln_status *st, int *err)
{
	if (!st->store_stats_known) {
		if (st->store_error[0])
			*err |= kiln_json_text(o, "store_error", st->store_error);
		return;
	}
	*err |= kiln_json_uint(o, "store_blobs", st->store_blobs);
	*err |= kiln_json_uint(o, "store_bytes", st->store_bytes);
	*err |= kiln_json_bool(o, "store_exact", st->store_exact);
	*err |= kiln_json_bool(o, "gc_running", st->gc_running);
	*err |= kiln_json_int(o, "gc_started_ns", st->gc_started_ns);
	*err |= kiln_json_int(o, "last_gc_start_ns", st->last_gc_start_ns);
	*err |= kiln_json_int(o, "last_gc_end_ns", st->last_gc_end_ns);
	*err |= kiln_json_uint(o, "last_gc_removed_blobs", st->last_gc_removed_blobs);
	*err |= kiln_json_uint(o, "last_gc_removed_bytes", st->last_gc_removed_bytes);
	*err |= kiln_json_uint(o, "last_gc_removed_actions", st->last_gc_removed_actions);
	*err |= kiln_json_uint(o, "last_gc_max_size", st->last_gc_max_size);
}

static int
status_json(const kiln_status *st)
{
	const char *listen[2];
	char epoch[17];
	size_t nlisten = 0;
	json_t *o = json_object();
	int err = 0;

	while (nlisten < 2 && st->listen[nlisten][0]) {
		listen[nlisten] = st->listen[nlisten];
		nlisten++;
	}
	snprintf(epoch, sizeof epoch, "%016" PRIx64, st->event_epoch);
	err |= kiln_json_uint(o, "pid", st->pid);
	err |= kiln_json_uint(o, "uptime_ms", st->uptime_ms);
	err |= kiln_json_text(o, "version", st->version);
	err |= kiln_json_text(o, "project", st->project);
	err |= kiln_json_text(o, "store", st->store);
	err |= kiln_json_texts(o, "listen", listen, nlisten);
	err |= kiln_json_uint(o, "clients", st->clients);
	err |= kiln_json_uint(o, "subscribers", st->subscribers);
	err |= kiln_json_uint(o, "uploads", st->uploads);
	err |= kiln_json_uint(o, "build_queue", st->build_queue);
	err |= kiln_json_text(o, "event_epoch", epoch);
	err |= kiln_json_uint(o, "event_seq", st->event_seq);
	err |= kiln_json_uint(o, "events_held", st->events_held);
	err |= kiln_json_uint(o, "events_bytes", st->events_bytes);
	err |= kiln_json_uint(o, "requests", st->requests);
	err |= kiln_json_uint(o, "bad_requests", st->bad_requests);
	err |= kiln_json_uint(o, "max_message", st->max_message);
	err |= kiln_json_uint(o, "chunk_size", st->chunk_size);
	err |= kiln_json_uint(o, "event_buffer", st->event_buffer);
	err |= kiln_json_uint(o, "event_buffer_bytes", st->event_buffer_bytes);
	err |= kiln_json_text(o, "cache_url", st->cache_url);
	err |= kiln_json_text(o, "cache_mode", st->cache_mode);
	err |= kiln_json_uint(o, "cache_hits", st->cache_hits);
	err |= kiln_json_uint(o, "cache_misses", st->cache_misses);
	err |= kiln_json_uint(o, "cache_bytes_down", st->cache_bytes_down);
	err |= kiln_json_uint(o, "cache_bytes_up", st->cache_bytes_up);
	err |= kiln_json_uint(o, "cache_errors", st->cache_errors);
	err |= kiln_json_uint(o, "cache_dropped", st->cache_dropped);
	err |= kiln_json_bool(o, "cache_breaker_open", st->cache_breaker_open);
	err |= kiln_json_uint(o, "cache_uploaded", st->cache_uploaded);
	err |= kiln_json_uint(o, "cache_pending", st->cache_pending);
	err |= kiln_json_uint(o, "cache_corrupt", st->cache_corrupt);
	err |= kiln_json_uint(o, "cache_skipped_uploads", st->cache_skipped_uploads);
	err |= kiln_json_put(o, "agents", agents_json(st, &err));
	store_json(o, st, &err);
	return kiln_json_print(stdout, o, err);
}

int
cmd_status(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"project", required_argument, NULL, 'C'},
		{"directory", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *dir = NULL;
	kiln_status st;
	kiln_conn *c;
	int ch, rv, json = 0;

	while ((ch = getopt_long(argc, argv, ":C:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		case 'C': dir = optarg; break;
		case 'h': return cli_help(status_help);
		default: return cli_bad_option("status", status_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("status", status_usage, "unexpected argument '%s'",
		                 argv[optind]);
	if ((rv = cli_chdir("status", dir)) != CLI_OK ||
	    (rv = cli_connect("status", cli, 1, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_status_get(c, &st)) != 0) {
		cli_daemon_error("status", "asking the daemon", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	kiln_close(c);
	if (!json) {
		status_print(&st);
	} else if ((rv = status_json(&st)) != 0) {
		fprintf(stderr, "kiln status: writing JSON: %s\n", kiln_strerror(rv));
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* ---- stop -------------------------------------------------------------- */

static const char stop_usage[] = "usage: kiln stop [-C DIR]\n";

static const char stop_help[] =
	"usage: kiln stop [-C DIR]\n"
	"\n"
	"Ask the project's daemon to stop, and wait until it has: in-flight work\n"
	"finished or cancelled, the store closed, its socket and pid file gone.\n"
	"Without a running daemon, says so and succeeds. A remote daemon stops\n"
	"only for its admin token (kilnd --admin-token-file).\n"
	"Results still on their way to the shared cache are sent first, for at\n"
	"most KILN_CACHE_STOP_WAIT (60s by default; 0 drops them at once); the\n"
	"daemon's log says how many were uploaded, failed and dropped.\n"
	"\n"
	"options:\n" DAEMON_OPTION_HELP
	"\n"
	"exit status: 0 stopped (or none was running); 2 the daemon did not\n"
	"answer or did not stop within 10 seconds (plus that wait).\n";

/* How long a daemon stopping with uploads pending may take to send them
 * (the daemon's STOP_WAIT_S; the daemon got this environment too). */
static uint32_t
stop_upload_wait_s(void)
{
	const char *v = getenv("KILN_CACHE_STOP_WAIT");
	uint32_t s = 60;

	if (v != NULL && v[0] != '\0' && kiln_duration_parse(v, &s) != 0)
		s = 60;
	return s;
}

/* Wait until the daemon has released the project's daemon lock (it does
 * so last, after removing its socket and pid file), for 10 s and extra_s. */
static int
stop_wait(uint32_t extra_s)
{
	struct kiln_paths p;
	struct timespec ts = {0, 10 * 1000000};
	int fd;

	if (kiln_paths_init(&p, NULL) != 0 ||
	    (fd = open(p.lock, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* no lock file: nothing to wait for */
	for (uint64_t i = 0; i < 1000 + (uint64_t)extra_s * 100; i++) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			close(fd);
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	close(fd);
	return KILN_ETIMEDOUT;
}

int
cmd_stop(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'C'},
		{"directory", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *dir = NULL;
	uint32_t extra_s = 0;
	kiln_status st;
	kiln_conn *c;
	int ch, rv;

	while ((ch = getopt_long(argc, argv, ":C:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'h': return cli_help(stop_help);
		default: return cli_bad_option("stop", stop_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("stop", stop_usage, "unexpected argument '%s'",
		                 argv[optind]);
	if ((rv = cli_chdir("stop", dir)) != CLI_OK ||
	    (rv = cli_connect("stop", cli, 0, &c)) != CLI_OK)
		return rv;
	if (c == NULL) {
		cli_errorf("stop", "no daemon is running for this project");
		return CLI_OK;
	}
	/* the pid is only for the messages: a daemon that refuses status
	 * (its store's database was cut short under it) still takes stop */
	if (kiln_status_get(c, &st) != 0) {
		st.pid = 0;
		st.cache_pending = 0;
	}
	if (st.cache_pending > 0)
		printf("waiting for %" PRIu32 " uploads to the shared cache (at most %" PRIu32 " s)\n",
		       st.cache_pending, extra_s = stop_upload_wait_s());
	if ((rv = kiln_stop(c)) != 0) {
		cli_daemon_error("stop", "asking the daemon to stop", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	kiln_close(c);
	if (cli->connect == NULL && stop_wait(extra_s) != 0) {
		cli_errorf("stop", "kilnd (pid %" PRIu32 ") acknowledged but has not "
		           "stopped after %" PRIu32 " seconds", st.pid, 10 + extra_s);
		return CLI_USAGE;
	}
	if (st.pid != 0)
		printf("stopped kilnd (pid %" PRIu32 ")\n", st.pid);
	else
		printf("stopped kilnd\n");
	return CLI_OK;
}

/* ---- kiln hold / kiln release -------------------------------------------- */

static const char hold_usage[] = "usage: kiln hold [COMMAND [ARG...]]\n";
static const char hold_help[] =
	"usage: kiln hold [COMMAND [ARG...]]\n"
	"\n"
	"Hold the daemon's change reports while many files change at once (a\n"
	"checkout, an unpack), so that live builds (kiln watch, editors) build\n"
	"once afterwards instead of chasing every file: with a command, for as\n"
	"long as it runs (kiln hold git checkout main), then its exit status is\n"
	"kiln's; without one, until interrupted. What changed meanwhile is then\n"
	"reported at once, as one batch. The hold is this connection's: it ends\n"
	"with kiln hold, however that ends; without a command kiln hold also\n"
	"ends when kiln release ends every hold, or when the daemon stops.\n"
	"\n"
	"exit status: the command's (128+N for a signal N); without a command,\n"
	"0 interrupted or released, 1 the daemon stopped (what changed while it\n"
	"held was never reported); 2 bad usage or no daemon.\n";

static const char release_usage[] = "usage: kiln release\n";
static const char release_help[] =
	"usage: kiln release\n"
	"\n"
	"End every hold on the daemon's change reports (kiln hold), at once: what\n"
	"changed meanwhile is reported as one batch.\n";

static volatile sig_atomic_t hold_ended;

static void
on_hold_signal(int sig)
{
	(void)sig;
	hold_ended = 1;
}

/* Hold until a signal ends it, kiln release ends it (another client's
 * release ends every hold), or the daemon stops (its holds end with it):
 * asking every HOLD_CHECK_MS is what notices the last two, since a hold
 * sends nothing by itself. CLI_OK after a signal; a release exits 0 too,
 * as the hold did its job; a daemon gone is a problem (1): the changes
 * held meanwhile were never reported. */
#define HOLD_CHECK_MS 250

static int
hold_wait(kiln_conn *c)
{
	const struct timespec pause_ts = {0, HOLD_CHECK_MS * 1000000L};
	int held;

	while (!hold_ended) {
		nanosleep(&pause_ts, NULL); /* a signal cuts it short */
		if (hold_ended)
			break;
		if ((held = kiln_changes_held(c)) < 0) {
			cli_errorf("hold", "the daemon went away (%s): the hold ended "
			           "with it", kiln_strerror(held));
			return CLI_PROBLEM;
		}
		if (held == 0) {
			fputs("kiln: hold: released (kiln release)\n", stderr);
			return CLI_OK;
		}
	}
	return CLI_OK;
}

/* Run argv[0] with its arguments; its exit status, 128+N for signal N. */
static int
hold_run(char **argv)
{
	pid_t pid;
	int status;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
		cli_errorf("hold", "%s: %s", argv[0], strerror(errno));
		return 127;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return CLI_USAGE;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int
cmd_hold(const struct cli *cli, int argc, char **argv)
{
	kiln_conn *c;
	int rv;

	/* options end at the command: kiln hold make -j4 */
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return cli_help(hold_help);
	if (argc > 1 && argv[1][0] == '-' && strcmp(argv[1], "--") != 0)
		return cli_usage("hold", hold_usage, "unknown option '%s'", argv[1]);
	argv += argc > 1 && strcmp(argv[1], "--") == 0 ? 2 : 1;
	if ((rv = cli_connect("hold", cli, 1, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_changes_hold(c, KILN_HOLD)) != 0) {
		cli_daemon_error("hold", "holding change reports", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	if (argv[0] != NULL) {
		rv = hold_run(argv);
	} else {
		signal(SIGINT, on_hold_signal);
		signal(SIGTERM, on_hold_signal);
		fputs("kiln: hold: holding change reports; Ctrl-C (or kiln release) "
		      "ends it\n", stderr);
		if ((rv = hold_wait(c)) != CLI_OK) {
			kiln_close(c); /* the daemon is gone: nothing to release */
			return rv;
		}
	}
	kiln_changes_hold(c, KILN_RELEASE);
	kiln_close(c);
	return rv;
}

int
cmd_release(const struct cli *cli, int argc, char **argv)
{
	kiln_conn *c;
	int rv;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return cli_help(release_help);
	if (argc > 1)
		return cli_usage("release", release_usage, "unexpected argument '%s'",
		                 argv[1]);
	if ((rv = cli_connect("release", cli, 0, &c)) != CLI_OK)
		return rv;
	if (c == NULL)
		return CLI_OK; /* no daemon: nothing is held */
	if ((rv = kiln_changes_hold(c, KILN_RELEASE_ALL)) != 0) {
		cli_daemon_error("release", "releasing change reports", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	kiln_close(c);
	return CLI_OK;
}
