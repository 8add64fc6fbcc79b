/* cmd_events.c — kiln events: subscribe to the daemon and print its events
 * as they come, one line (or one JSON object) each, filtered on the
 * daemon's side by URL globs and a profile when given. Built on libkiln's
 * poll function; a line's first word is the cursor to resume after. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char events_usage[] =
	"usage: kiln events [-p PROFILE] [--since EPOCH:SEQ | --snapshot]\n"
	"                   [--count N] [--timeout DURATION] [--json] [URL|GLOB]...\n";

static const char events_help[] =
	"usage: kiln events [-p PROFILE] [--since EPOCH:SEQ | --snapshot]\n"
	"                   [--count N] [--timeout DURATION] [--json] [URL|GLOB]...\n"
	"\n"
	"Print the daemon's events as they happen, one line each:\n"
	"  EPOCH:SEQ KIND DETAILS\n"
	"where KIND is one of\n"
	"  blob-stored HASH SIZE [PROFILE URL]   a blob was put\n"
	"  log LEVEL TEXT                        a line of the daemon's log\n"
	"  overflow lost FIRST-LAST              events lost (this subscriber\n"
	"  overflow new-epoch                    fell behind, or the daemon\n"
	"                                        restarted): resynchronize\n"
	"  overflow evicted                      the daemon closed this watch to\n"
	"                                        make room for a newer subscriber\n"
	"                                        (--max-subscribers); kiln events\n"
	"                                        then ends: run it again with\n"
	"                                        --since EPOCH:SEQ of this line\n"
	"  stopping REASON                       the daemon is stopping\n"
	"  step PROFILE URL RESULT \"REASON\" [NAME=HASH PATH SIZE]...\n"
	"       [exit=N|signal=N error=\"TEXT\"] DURATION warnings=N\n"
	"                                        a build step finished: RESULT is\n"
	"                                        ran, reused, failed, skipped,\n"
	"                                        cancelled or would-run; REASON why\n"
	"                                        it ran; an output each (PATH where\n"
	"                                        it was materialized, SIZE bytes);\n"
	"                                        when it failed the tool's exit\n"
	"                                        status or signal and the error (its\n"
	"                                        last lines); DURATION in seconds\n"
	"                                        (0.250s); the count of warnings\n"
	"  build-done BUILD PROFILE total=N ran=N reused=N failed=N skipped=N\n"
	"       cancelled=N would-run=N DURATION [error=\"TEXT\"]\n"
	"                                        a build ended: its steps by result,\n"
	"                                        and a build-wide problem if any\n"
	"  started PROFILE URL expected=DURATION a build step's tool started (here, or\n"
	"                                        handed to agents); DURATION its last\n"
	"                                        recorded run's (0.000s: none known)\n"
	"  changed [everything] PATH... [more=N] project files changed on disk\n"
	"                                        (the daemon's watch, after they\n"
	"                                        settled; kilnd --settle); at most\n"
	"                                        64 paths, then how many more;\n"
	"                                        everything: the watch lost track\n"
	"  snapshot PROFILE URL STATE [building] [NAME=HASH PATH SIZE]...\n"
	"       [error=\"TEXT\"]                   --snapshot: a step's state when\n"
	"                                        kiln events started: STATE is\n"
	"                                        built, failed, skipped, cancelled\n"
	"                                        or not-built; building: a build has\n"
	"                                        it queued or running (a step line\n"
	"                                        follows unless it is up to date);\n"
	"                                        its outputs as a step line's (a\n"
	"                                        failed step's: its last good ones)\n"
	"  snapshot-end STEPS [error=\"TEXT\"]     the snapshot is whole: STEPS lines;\n"
	"                                        error: why there is none (the\n"
	"                                        descriptions have errors, or the\n"
	"                                        daemon holds too many snapshots)\n"
	"  other                                 a kind this kiln does not know\n"
	"Every event is one line: in texts, names and paths a backslash, a\n"
	"control character or DEL is a C escape (\\\\, \\n, \\t, \\r, else \\xNN);\n"
	"in \"quoted\" texts, names and paths a quote is \\\"; in names and paths\n"
	"a space is \\x20, and \"\" is empty.\n"
	"Ends when the daemon stops, after --count events, or when --timeout\n"
	"passes without an event. Starts the daemon when none runs.\n"
	"\n"
	"With URLs or globs (as kiln build takes them; at most 16), a step line\n"
	"is printed only for a step whose URL matches one; with -p, only for a\n"
	"step of that profile, and a build-done line only for a build of it. A\n"
	"blob-stored line naming a URL is filtered as a step's; every other\n"
	"line (log, overflow, stopping, changed) is always printed. The daemon\n"
	"filters: sequence numbers then skip the events left out, which are not\n"
	"lost (only an overflow line says events were lost).\n"
	"\n"
	"options:\n"
	"  -p, --profile NAME   only profile NAME's steps and builds\n"
	"  --since EPOCH:SEQ    resume after that event (the first word of a\n"
	"                       line printed earlier): every later event the\n"
	"                       daemon still holds is printed, or an overflow\n"
	"                       line says which were lost (with a filter: which\n"
	"                       it would have printed, as far as the daemon can\n"
	"                       tell; give the same filter)\n"
	"  --snapshot           first a snapshot line for every step the filter\n"
	"                       passes, then a snapshot-end line, then the\n"
	"                       events from that moment on: a step finishing\n"
	"                       meanwhile is in the snapshot or printed as a\n"
	"                       step line after it, never both, never neither\n"
	"  -n, --count N        stop after N events (the snapshot's lines not\n"
	"                       counted)\n"
	"  --timeout DURATION   stop after this long without an event: seconds,\n"
	"                       or with s, m, h: 1, 30s, 5m\n"
	"  --json               one JSON object per event: epoch, seq, time_ns,\n"
	"                       type (the KIND above) and the kind's fields (a\n"
	"                       step's outputs, builds and warnings as arrays;\n"
	"                       docs/protocol.md lists them)\n"
	"  -h, --help           show this help\n"
	"\n"
	"exit status: 0 ended as asked; 1 evicted (see above); 2 bad usage (a\n"
	"filter the daemon refuses: too many globs, a malformed or too long\n"
	"one), or the daemon could not be reached.\n";

struct events_opts {
	int since_set;
	kiln_cursor since;
	uint64_t count;   /* 0: no limit */
	int64_t timeout_s; /* 0: none */
	int json;
	int snapshot;
	kiln_event_filter filter; /* argv's globs, -p */
};

static const char *
kind_name(const kiln_event *ev)
{
	switch (ev->type) {
	case KILN_EVENT_OVERFLOW: return "overflow";
	case KILN_EVENT_LOG: return "log";
	case KILN_EVENT_BLOB_STORED: return "blob-stored";
	case KILN_EVENT_STOPPING: return "stopping";
	case KILN_EVENT_STEP: return ev->step ? "step" : "other";
	case KILN_EVENT_BUILD_DONE: return ev->build ? "build-done" : "other";
	case KILN_EVENT_SOURCES_CHANGED: return "changed";
	case KILN_EVENT_STEP_STARTED: return ev->started ? "started" : "other";
	case KILN_EVENT_SNAPSHOT: return ev->state ? "snapshot" : "other";
	case KILN_EVENT_SNAPSHOT_END: return "snapshot-end";
	default: return "other";
	}
}

static const char *
level_name(int level)
{
	return level == 2 ? "error" : level == 1 ? "warning" : "info";
}

static const char *
result_name(kiln_step_result r)
{
	static const char *const names[] = {"ran", "reused", "failed", "skipped",
	                                    "cancelled", "would-run"};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "other";
}

static const char *
state_name(kiln_step_state_kind k)
{
	static const char *const names[] = {"built", "failed", "skipped",
	                                    "cancelled", "not-built"};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "other";
}

/* How line_str prints a string. */
enum line_how {
	LINE_TEXT,   /* free text, last on its line */
	LINE_WORD,   /* a name or path: one word, "" when empty */
	LINE_QUOTED, /* a text among other fields: in double quotes */
};

/* Print s so that the event stays on one line: a backslash, control
 * characters and DEL as C escapes (\\, \n, \t, \r, else \xNN, always two
 * hex digits); in a word or a quoted text also a quote (\"), and in a word
 * a space (\x20). Bytes from 0x80 up go out as they are. */
static void
line_str(const char *s, enum line_how how)
{
	static const char named[] = "\n\t\r", letter[] = "ntr";
	int quote = how == LINE_QUOTED || (how == LINE_WORD && *s == '\0');
	const char *p;

	if (quote)
		putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '\\' || (ch == '"' && how != LINE_TEXT))
			printf("\\%c", ch);
		else if ((p = strchr(named, ch)) != NULL)
			printf("\\%c", letter[p - named]);
		else if (ch < 0x20 || ch == 0x7f || (ch == ' ' && how == LINE_WORD))
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	if (quote)
		putchar('"');
}

/* Each output as NAME=HASH PATH SIZE. */
static void
outputs_line(const kiln_step_output *o, size_t n)
{
	char hex[KILN_ID_HEX_LEN + 1];

	for (size_t i = 0; i < n; i++) {
		kiln_id_to_hex(&o[i].id, hex);
		putchar(' ');
		line_str(o[i].name, LINE_WORD);
		printf("=%s ", hex);
		line_str(o[i].path, LINE_WORD);
		printf(" %" PRIu64, o[i].size);
	}
}

/* A step's details: PROFILE URL RESULT "REASON", each output as
 * NAME=HASH PATH SIZE, when it failed exit=N (or signal=N) and
 * error="TEXT", then its duration and warnings=N. */
static void
step_line(const kiln_step_event *s)
{
	putchar(' ');
	line_str(s->profile, LINE_WORD);
	putchar(' ');
	line_str(s->url, LINE_WORD);
	printf(" %s ", result_name(s->result));
	line_str(s->reason, LINE_QUOTED);
	outputs_line(s->outputs, s->noutputs);
	if (s->result == KILN_STEP_FAILED) {
		if (s->signal != 0)
			printf(" signal=%d error=", s->signal);
		else
			printf(" exit=%d error=", s->exit_code);
		line_str(s->error, LINE_QUOTED);
	}
	printf(" %.3fs warnings=%zu", (double)s->duration_ns / 1e9, s->nwarnings);
}

/* A snapshot's step: PROFILE URL STATE [building], its outputs, and
 * error="TEXT" when it failed and the daemon knows why. */
static void
state_line(const kiln_step_state *st)
{
	putchar(' ');
	line_str(st->profile, LINE_WORD);
	putchar(' ');
	line_str(st->url, LINE_WORD);
	printf(" %s", state_name(st->state));
	if (st->building)
		fputs(" building", stdout);
	outputs_line(st->outputs, st->noutputs);
	if (st->error[0] != '\0') {
		fputs(" error=", stdout);
		line_str(st->error, LINE_QUOTED);
	}
}

/* A build's end: BUILD PROFILE, the steps counted by result, its
 * duration, and error="TEXT" when it had a build-wide problem. */
static void
build_line(const kiln_build_summary *b)
{
	printf(" %" PRIu64 " ", b->build);
	line_str(b->profile, LINE_WORD);
	printf(" total=%" PRIu32 " ran=%" PRIu32 " reused=%" PRIu32 " failed=%"
	       PRIu32 " skipped=%" PRIu32 " cancelled=%" PRIu32 " would-run=%"
	       PRIu32 " %.3fs", b->total, b->ran, b->reused, b->failed,
	       b->skipped, b->cancelled, b->would_run,
	       (double)b->duration_ns / 1e9);
	if (b->error[0] != '\0') {
		fputs(" error=", stdout);
		line_str(b->error, LINE_QUOTED);
	}
}

static void
event_line(const kiln_event *ev)
{
	char hex[KILN_ID_HEX_LEN + 1];

	printf("%016" PRIx64 ":%" PRIu64 " %s", ev->at.epoch, ev->at.seq,
	       kind_name(ev));
	switch (ev->type) {
	case KILN_EVENT_OVERFLOW:
		if (ev->evicted)
			fputs(" evicted", stdout);
		else if (ev->new_epoch)
			fputs(" new-epoch", stdout);
		else
			printf(" lost %" PRIu64 "-%" PRIu64, ev->first_lost,
			       ev->last_lost);
		break;
	case KILN_EVENT_LOG:
		printf(" %s ", level_name(ev->level));
		line_str(ev->text, LINE_TEXT);
		break;
	case KILN_EVENT_BLOB_STORED:
		kiln_id_to_hex(&ev->id, hex);
		printf(" %s %" PRIu64, hex, ev->size);
		if (ev->url[0]) {
			putchar(' ');
			line_str(ev->profile, LINE_WORD);
			putchar(' ');
			line_str(ev->url, LINE_WORD);
		}
		break;
	case KILN_EVENT_STOPPING:
		putchar(' ');
		line_str(ev->text, LINE_TEXT);
		break;
	case KILN_EVENT_STEP:
		if (ev->step != NULL)
			step_line(ev->step);
		break;
	case KILN_EVENT_BUILD_DONE:
		if (ev->build != NULL)
			build_line(ev->build);
		break;
	case KILN_EVENT_STEP_STARTED:
		if (ev->started != NULL) {
			putchar(' ');
			line_str(ev->started->profile, LINE_WORD);
			putchar(' ');
			line_str(ev->started->url, LINE_WORD);
			printf(" expected=%.3fs", (double)ev->started->expected_ns / 1e9);
		}
		break;
	case KILN_EVENT_SNAPSHOT:
		if (ev->state != NULL)
			state_line(ev->state);
		break;
	case KILN_EVENT_SNAPSHOT_END:
		printf(" %" PRIu64, ev->steps);
		if (ev->text[0] != '\0') {
			fputs(" error=", stdout);
			line_str(ev->text, LINE_QUOTED);
		}
		break;
	case KILN_EVENT_SOURCES_CHANGED:
		if (ev->everything)
			fputs(" everything", stdout);
		for (size_t i = 0; i < ev->npaths; i++) {
			putchar(' ');
			line_str(ev->paths[i], LINE_WORD);
		}
		if (ev->more)
			printf(" more=%" PRIu32, ev->more);
		break;
	default:
		break;
	}
	putchar('\n');
}

/* A step's fields, every one always present ("log" null without a log). */
static int
step_json(json_t *o, const kiln_step_event *s)
{
	char hex[KILN_ID_HEX_LEN + 1];
	json_t *builds = json_array();
	int err = 0;

	for (size_t i = 0; i < s->nbuilds; i++)
		err |= kiln_json_push(builds, json_integer((json_int_t)s->builds[i]));
	err |= kiln_json_put(o, "builds", builds);
	err |= kiln_json_text(o, "profile", s->profile);
	err |= kiln_json_text(o, "url", s->url);
	err |= kiln_json_text(o, "result", result_name(s->result));
	err |= kiln_json_text(o, "reason", s->reason);
	err |= kiln_json_put(o, "outputs", cli_outputs_json(s->outputs, s->noutputs, &err));
	err |= kiln_json_int(o, "exit_code", s->exit_code);
	err |= kiln_json_int(o, "signal", s->signal);
	err |= kiln_json_text(o, "error", s->error);
	if (s->has_log) {
		kiln_id_to_hex(&s->log, hex);
		err |= kiln_json_text(o, "log", hex);
	} else {
		err |= kiln_json_null(o, "log");
	}
	err |= kiln_json_uint(o, "duration_ns", s->duration_ns);
	err |= kiln_json_uint(o, "estimate_ns", s->estimate_ns);
	err |= kiln_json_uint(o, "done", s->done);
	err |= kiln_json_uint(o, "total", s->total);
	err |= kiln_json_texts(o, "warnings", s->warnings, s->nwarnings);
	return err;
}

/* A snapshot's step: its state's fields, every one always present. */
static int
state_json(json_t *o, const kiln_step_state *st)
{
	int err = 0;

	err |= kiln_json_text(o, "profile", st->profile);
	err |= kiln_json_text(o, "url", st->url);
	err |= kiln_json_text(o, "state", state_name(st->state));
	err |= kiln_json_bool(o, "building", st->building);
	err |= kiln_json_put(o, "outputs", cli_outputs_json(st->outputs, st->noutputs, &err));
	err |= kiln_json_text(o, "error", st->error);
	return err;
}

/* A build's end: its summary's fields. */
static int
build_json(json_t *o, const kiln_build_summary *b)
{
	int err = 0;

	err |= kiln_json_uint(o, "build", b->build);
	err |= kiln_json_text(o, "profile", b->profile);
	err |= kiln_json_uint(o, "total", b->total);
	err |= kiln_json_uint(o, "ran", b->ran);
	err |= kiln_json_uint(o, "reused", b->reused);
	err |= kiln_json_uint(o, "failed", b->failed);
	err |= kiln_json_uint(o, "skipped", b->skipped);
	err |= kiln_json_uint(o, "cancelled", b->cancelled);
	err |= kiln_json_uint(o, "would_run", b->would_run);
	err |= kiln_json_uint(o, "duration_ns", b->duration_ns);
	err |= kiln_json_uint(o, "files_statted", b->files_statted);
	err |= kiln_json_text(o, "index", b->index);
	err |= kiln_json_text(o, "error", b->error);
	return err;
}

/* The fields of the event types that carry few. */
static int
small_json(json_t *o, const kiln_event *ev)
{
	char hex[KILN_ID_HEX_LEN + 1];
	int err = 0;

	if (ev->type == KILN_EVENT_OVERFLOW) {
		err |= kiln_json_bool(o, "evicted", ev->evicted);
		err |= kiln_json_bool(o, "new_epoch", ev->new_epoch);
		err |= kiln_json_uint(o, "first_lost", ev->first_lost);
		err |= kiln_json_uint(o, "last_lost", ev->last_lost);
	}
	if (ev->type == KILN_EVENT_LOG)
		err |= kiln_json_text(o, "level", level_name(ev->level));
	if (ev->type == KILN_EVENT_LOG || ev->type == KILN_EVENT_STOPPING)
		err |= kiln_json_text(o, "text", ev->text);
	if (ev->type == KILN_EVENT_BLOB_STORED) {
		kiln_id_to_hex(&ev->id, hex);
		err |= kiln_json_text(o, "id", hex);
		err |= kiln_json_uint(o, "size", ev->size);
		err |= kiln_json_text(o, "profile", ev->profile);
		err |= kiln_json_text(o, "url", ev->url);
	}
	if (ev->type == KILN_EVENT_STEP_STARTED && ev->started != NULL) {
		err |= kiln_json_text(o, "profile", ev->started->profile);
		err |= kiln_json_text(o, "url", ev->started->url);
		err |= kiln_json_uint(o, "expected_ns", ev->started->expected_ns);
		err |= kiln_json_uint(o, "left_ns", ev->started->left_ns);
	}
	if (ev->type == KILN_EVENT_SNAPSHOT_END) {
		err |= kiln_json_uint(o, "steps", ev->steps);
		err |= kiln_json_text(o, "error", ev->text);
	}
	if (ev->type == KILN_EVENT_SOURCES_CHANGED) {
		err |= kiln_json_texts(o, "paths", ev->paths, ev->npaths);
		err |= kiln_json_uint(o, "more", ev->more);
		err |= kiln_json_bool(o, "everything", ev->everything);
	}
	return err;
}

static int
event_json(const kiln_event *ev)
{
	char epoch[17];
	json_t *o = json_object();
	int err = 0;

	snprintf(epoch, sizeof epoch, "%016" PRIx64, ev->at.epoch);
	err |= kiln_json_text(o, "epoch", epoch);
	err |= kiln_json_uint(o, "seq", ev->at.seq);
	err |= kiln_json_int(o, "time_ns", ev->time_ns);
	err |= kiln_json_text(o, "type", kind_name(ev));
	err |= small_json(o, ev);
	if (ev->type == KILN_EVENT_STEP && ev->step != NULL)
		err |= step_json(o, ev->step);
	if (ev->type == KILN_EVENT_BUILD_DONE && ev->build != NULL)
		err |= build_json(o, ev->build);
	if (ev->type == KILN_EVENT_SNAPSHOT && ev->state != NULL)
		err |= state_json(o, ev->state);
	return kiln_json_print(stdout, o, err);
}

/* Parse EPOCH:SEQ (16 hex digits at most, a colon, a decimal). Returns 0
 * or KILN_EINVAL. */
static int
cursor_parse(const char *s, kiln_cursor *cur)
{
	char *end;

	cur->epoch = strtoull(s, &end, 16);
	if (end == s || *end != ':' || end - s > 16 || end[1] < '0' ||
	    end[1] > '9')
		return KILN_EINVAL;
	cur->seq = strtoull(end + 1, &end, 10);
	return *end == '\0' ? 0 : KILN_EINVAL;
}

/* kiln events' options into o. Returns CLI_CONTINUE, or the exit status
 * (--help, or a usage error said on stderr). */
static int
events_parse(int argc, char **argv, struct events_opts *o)
{
	static const struct option longopts[] = {
		{"since", required_argument, NULL, 's'},
		{"count", required_argument, NULL, 'n'},
		{"timeout", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"snapshot", no_argument, NULL, 'S'},
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":hn:p:", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (cursor_parse(optarg, &o->since) != 0)
				return cli_usage("events", events_usage, "--since '%s': "
				                 "expected EPOCH:SEQ (as a line starts)", optarg);
			o->since_set = 1;
			break;
		case 'n':
			if (cli_parse_size(optarg, &o->count) != 0 || o->count == 0)
				return cli_usage("events", events_usage, "--count '%s': "
				                 "expected a positive number", optarg);
			break;
		case 't':
			if (cli_parse_duration(optarg, &o->timeout_s) != 0)
				return cli_usage("events", events_usage, "--timeout '%s': "
				                 "not a duration (examples: 1, 30s, 5m)", optarg);
			break;
		case 'j': o->json = 1; break;
		case 'S': o->snapshot = 1; break;
		case 'p': o->filter.profile = optarg; break;
		case 'h': return cli_help(events_help);
		default: return cli_bad_option("events", events_usage, longopts, ch, argv);
		}
	}
	if (o->snapshot && o->since_set)
		return cli_usage("events", events_usage, "--snapshot and --since: a "
		                 "resumed watch gets the events it missed, not a "
		                 "snapshot");
	/* The daemon judges the globs (and their number): it alone must,
	 * for any client, so it says the same to all. */
	o->filter.urls = (const char *const *)argv + optind;
	o->filter.nurls = (size_t)(argc - optind);
	return CLI_CONTINUE;
}

/* Print events until one of the ends the options set. */
static int
events_loop(kiln_conn *c, const struct events_opts *o)
{
	int wait_ms = o->timeout_s > 0 ? (int)(o->timeout_s * 1000) : 30000;
	uint64_t n = 0;
	kiln_event ev;
	int rv;

	for (;;) {
		rv = kiln_events_poll(c, wait_ms, &ev);
		if (rv == KILN_ETIMEDOUT && o->timeout_s == 0)
			continue;
		if (rv == KILN_ETIMEDOUT)
			return CLI_OK;
		if (rv != 0) {
			cli_daemon_error("events", "waiting for events", c, rv);
			return CLI_USAGE;
		}
		if (o->json && event_json(&ev) != 0)
			return CLI_USAGE;
		if (!o->json)
			event_line(&ev);
		if (fflush(stdout) != 0)
			return CLI_USAGE;
		/* Evicted: resubscribing at once would only evict the next
		 * oldest watcher, and it the next; a watcher steps aside. */
		if (ev.type == KILN_EVENT_OVERFLOW && ev.evicted) {
			fprintf(stderr, "kiln events: the daemon closed this "
			        "subscription to make room for a newer one "
			        "(--max-subscribers); resume with --since "
			        "%016" PRIx64 ":%" PRIu64 "\n", ev.at.epoch, ev.at.seq);
			return CLI_PROBLEM;
		}
		if (ev.type == KILN_EVENT_SNAPSHOT || ev.type == KILN_EVENT_SNAPSHOT_END)
			continue; /* not counted: --count counts the stream's */
		if (ev.type == KILN_EVENT_STOPPING || (o->count && ++n >= o->count))
			return CLI_OK;
	}
}

int
cmd_events(const struct cli *cli, int argc, char **argv)
{
	struct events_opts o = {0};
	kiln_conn *c;
	int rv;

	if ((rv = events_parse(argc, argv, &o)) != CLI_CONTINUE)
		return rv;
	if (o.timeout_s > 24 * 3600)
		o.timeout_s = 24 * 3600;
	if ((rv = cli_connect("events", cli, 1, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_events_filter(c, &o.filter)) != 0 ||
	    (rv = kiln_events_snapshot(c, o.snapshot)) != 0 ||
	    (rv = kiln_subscribe(c, o.since_set ? &o.since : NULL)) != 0) {
		cli_daemon_error("events", "subscribing", c, rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	rv = events_loop(c, &o);
	kiln_close(c);
	return rv;
}
