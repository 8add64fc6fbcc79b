/* cmd_build.c — kiln build, kiln why, kiln log: the build engine's
 * commands, all served by the project's daemon (started when none runs). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "count_check.h"
#include "progress.h"

/* Work in -C DIR (the daemon is the project's, found from there). */
static int
enter_dir(const char *cmd, const char *dir)
{
	if (dir != NULL && chdir(dir) != 0) {
		cli_errorf(cmd, "%s: %s", dir, strerror(errno));
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* ---- kiln build ------------------------------------------------------------ */

static const char build_usage[] =
	"usage: kiln build [URL|GLOB...] [-C DIR] [-p PROFILE] [-j N] [-k] [-n]\n"
	"                  [--json] [-q] [--priority N] [--wait-uploads]\n";

static const char build_help[] =
	"usage: kiln build [URL|GLOB...] [-C DIR] [-p PROFILE] [-j N] [-k] [-n]\n"
	"                  [--json] [-q] [--priority N] [--wait-uploads]\n"
	"\n"
	"Bring the named assets (default: all) and everything they need up to\n"
	"date for a profile, on the project's daemon (started if none runs).\n"
	"Steps whose inputs, tool, params and variables hash as before are not\n"
	"run again; outputs go to the store and to build/<profile>/, with the\n"
	"index map build/<profile>/kiln-index.txt.\n"
	"\n"
	"  -C, --directory DIR  the project folder (default: found upward from .)\n"
	"  -p, --profile NAME   the profile (default: the first in kiln.yaml)\n"
	"  -j, --jobs N         tools running at once (default: the cores)\n"
	"  -k, --keep-going     after a failure, build what does not depend on it\n"
	"  -n, --dry-run        print what would run and why; run nothing\n"
	"      --json           one JSON object per event on stdout\n"
	"  -q, --quiet          print only failures, warnings and the summary\n"
	"      --priority N     0 (default) for batch builds; higher goes first\n"
	"      --wait-uploads   return only once the results are uploaded to the\n"
	"                       shared cache (or failed), and print how many (CI)\n"
	"\n"
	"On a terminal one status line shows [done/total], the steps running and\n"
	"failed, the time elapsed and an estimate of the time left (from the\n"
	"steps' recorded durations), and the steps running longest; otherwise\n"
	"one line per step that ran or failed. The summary names the slowest\n"
	"steps, and ends with the steps that failed. The timeline: kiln trace.\n"
	"Without -k a failure starts no more tools; the other steps are still\n"
	"decided (those up to date count so). Ctrl-C cancels the\n"
	"steps no other client needs. Exit status: 0 built, 1 a step failed (or\n"
	"was skipped because one failed, or results could not be recorded), 2\n"
	"usage or description errors, 130 cancelled (3: with KILN_CHECK_COUNTS=1,\n"
	"a testing aid, the summary did not count what the step events said).\n";

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct build_view {
	int json, tty, dry;
	int quiet;              /* failures, warnings and the summary only */
	uint64_t id;
	int live;               /* a status line is on screen */
	struct progress *prog;  /* kiln build's (NULL: kiln watch) */
	struct count_check *check; /* kiln build's (NULL: kiln watch) */
	/* the URLs of the steps that failed in this build, for its summary
	 * (its FAILED blocks may be far up by then), ", "-separated; past
	 * what fits, a count */
	char failed[2048];
	unsigned failed_more;
	/* kiln watch: the failures printed, each step's last (a repeat is
	 * not printed again), and how many of this build's were repeats */
	struct shown_failure *shown;
	size_t nshown, capshown;
	unsigned repeats;
};

/* A failure kiln watch printed: the step, and a hash of its words. */
struct shown_failure {
	char *url;
	uint64_t run;
};

#define WATCH_MAX_SHOWN 4096

static uint64_t
failure_sig(const kiln_step_event *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = s->error ? s->error : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h;
}

/* Whether s (a failure) repeats the one last printed for its step: the
 * same words, and no tool ran for it in this build (a failure decided
 * without a run, such as a step not run again; a new run of the tool is
 * news even when it fails alike). If not, it is the one printed now. */
static int
failure_repeats(struct build_view *v, const kiln_step_event *s)
{
	uint64_t sig = failure_sig(s);
	size_t i;

	for (i = 0; i < v->nshown && strcmp(v->shown[i].url, s->url) != 0; i++)
		;
	if (i < v->nshown) {
		if (v->shown[i].run == sig && s->duration_ns == 0)
			return 1;
		v->shown[i].run = sig;
		return 0;
	}
	if (v->nshown == v->capshown) {
		size_t ncap = v->capshown ? v->capshown * 2 : 16;
		struct shown_failure *nv;
		if (ncap > WATCH_MAX_SHOWN ||
		    (nv = realloc(v->shown, ncap * sizeof *nv)) == NULL)
			return 0;   /* not remembered: printed every time */
		v->shown = nv;
		v->capshown = ncap;
	}
	if ((v->shown[v->nshown].url = strdup(s->url)) == NULL)
		return 0;
	v->shown[v->nshown++].run = sig;
	return 0;
}

/* s's step did not fail: a later failure of it is news. */
static void
failure_forget(struct build_view *v, const char *url)
{
	for (size_t i = 0; i < v->nshown; i++)
		if (strcmp(v->shown[i].url, url) == 0) {
			free(v->shown[i].url);
			v->shown[i] = v->shown[--v->nshown];
			return;
		}
}

/* Note url as failed in this build (once). */
static void
failed_add(struct build_view *v, const char *url)
{
	size_t used = strlen(v->failed), len = strlen(url);

	for (const char *p = v->failed; (p = strstr(p, url)) != NULL; p += len)
		if ((p == v->failed || p[-1] == ' ') && (p[len] == ',' || p[len] == '\0'))
			return;
	if (used + len + 3 > sizeof v->failed)
		v->failed_more++;
	else
		snprintf(v->failed + used, sizeof v->failed - used, "%s%s", used ? ", " : "", url);
}

/* Terminal columns of stdout (80 when it does not say). */
static unsigned
term_cols(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* Redraw the status line (a terminal, not --quiet). */
static void
status_draw(struct build_view *v)
{
	char line[1024];

	if (!v->tty || v->quiet || v->dry || v->prog == NULL)
		return;
	progress_line(v->prog, term_cols(), line, sizeof line);
	printf("\r\033[K%s", line);
	v->live = 1;
	fflush(stdout);
}

static const char *
result_word(kiln_step_result r)
{
	static const char *const words[] = {"ran", "reused", "FAILED", "skipped",
	                                    "cancelled", "would run"};

	return (unsigned)r < 6 ? words[r] : "?";
}

static void
step_json(const kiln_step_event *s)
{
	char hex[KILN_ID_HEX_LEN + 1];
	json_t *o = json_object();
	int err = 0;

	err |= kiln_json_text(o, "event", "step");
	err |= kiln_json_text(o, "url", s->url);
	err |= kiln_json_text(o, "profile", s->profile);
	err |= kiln_json_text(o, "result", s->result == KILN_STEP_FAILED ? "failed"
	                                 : result_word(s->result));
	err |= kiln_json_text(o, "reason", s->reason);
	err |= kiln_json_ms(o, "duration_ms", (double)s->duration_ns / 1e6);
	err |= kiln_json_uint(o, "done", s->done);
	err |= kiln_json_uint(o, "total", s->total);
	err |= kiln_json_ms(o, "estimate_ms", (double)s->estimate_ns / 1e6);
	if (s->machine[0] != '\0')
		err |= kiln_json_text(o, "machine", s->machine);
	if (s->result == KILN_STEP_FAILED) {
		err |= kiln_json_text(o, "error", s->error);
		err |= kiln_json_int(o, "exit_code", s->exit_code);
		err |= kiln_json_int(o, "signal", s->signal);
	}
	if (s->has_log) {
		kiln_id_to_hex(&s->log, hex);
		err |= kiln_json_text(o, "log", hex);
	}
	if (s->nwarnings > 0)
		err |= kiln_json_texts(o, "warnings", s->warnings, s->nwarnings);
	err |= kiln_json_put(o, "outputs", cli_outputs_json(s->outputs, s->noutputs, &err));
	if (kiln_json_print(stdout, o, err) != 0)
		fprintf(stderr, "kiln: could not write a step's JSON\n");
}

static void
step_print(struct build_view *v, const kiln_step_event *s)
{
	if (v->json) {
		step_json(s);
		return;
	}
	/* a step with warnings gets its own lines, on a terminal too */
	if ((v->tty || v->quiet) && s->nwarnings == 0 &&
	    (s->result == KILN_STEP_RAN || s->result == KILN_STEP_REUSED)) {
		if (v->prog != NULL) {
			status_draw(v);
		} else if (!v->quiet) {
			printf("\r\033[K[%u/%u] %s", s->done, s->total, s->url);
			v->live = 1;
			fflush(stdout);
		}
		return;
	}
	if (v->quiet && s->result != KILN_STEP_FAILED && s->nwarnings == 0)
		return;
	if (v->live) {
		fputs("\r\033[K", stdout);
		v->live = 0;
	}
	switch (s->result) {
	case KILN_STEP_FAILED:
		failed_add(v, s->url);
		printf("FAILED %s\n", s->url);
		for (const char *p = s->error; *p;) {
			const char *nl = strchr(p, '\n');
			int len = nl ? (int)(nl - p) : (int)strlen(p);
			printf("  %.*s\n", len, p);
			p += len + (nl != NULL);
		}
		if (s->has_log)
			printf("  (whole log: kiln log -p %s %s)\n", s->profile, s->url);
		break;
	case KILN_STEP_WOULD_RUN:
		printf("would run %s: %s\n", s->url, s->reason);
		break;
	case KILN_STEP_RAN:
		printf("ran %s (%.2f s%s%s): %s\n", s->url, (double)s->duration_ns / 1e9,
		       s->machine[0] ? " on " : "", s->machine, s->reason);
		break;
	default:
		printf("%s %s%s%s\n", result_word(s->result), s->url,
		       s->reason[0] ? ": " : "", s->reason);
	}
	for (size_t i = 0; i < s->nwarnings; i++)
		printf("  warning: %s\n", s->warnings[i]);
	fflush(stdout);
	status_draw(v);
}

static int
summary_print(struct build_view *v, const kiln_build_summary *b)
{
	int cancelled;

	if (v->live)
		fputs("\r\033[K", stdout);
	v->live = 0;
	if (v->json) {
		json_t *o = json_object();
		int err = 0;
		err |= kiln_json_text(o, "event", "build");
		err |= kiln_json_uint(o, "build", b->build);
		err |= kiln_json_text(o, "profile", b->profile);
		err |= kiln_json_uint(o, "total", b->total);
		err |= kiln_json_uint(o, "ran", b->ran);
		err |= kiln_json_uint(o, "reused", b->reused);
		err |= kiln_json_uint(o, "failed", b->failed);
		err |= kiln_json_uint(o, "skipped", b->skipped);
		err |= kiln_json_uint(o, "cancelled", b->cancelled);
		err |= kiln_json_uint(o, "would_run", b->would_run);
		err |= kiln_json_uint(o, "files_statted", b->files_statted);
		err |= kiln_json_ms(o, "duration_ms", (double)b->duration_ns / 1e6);
		err |= kiln_json_text(o, "index", b->index);
		err |= kiln_json_text(o, "error", b->error);
		if (kiln_json_print(stdout, o, err) != 0)
			fprintf(stderr, "kiln: could not write the build's JSON\n");
	} else if (v->dry) {
		printf("%u of %u steps of profile %s would run\n", b->would_run,
		       b->total, b->profile);
	} else {
		char cancel[32] = "", slow[1024] = "";
		if (b->cancelled > 0)
			snprintf(cancel, sizeof cancel, ", %u cancelled", b->cancelled);
		else if (strcmp(b->error, "cancelled") == 0)
			snprintf(cancel, sizeof cancel, ", cancelled");
		printf("profile %s: %u steps, %u ran, %u up to date, %u failed, "
		       "%u skipped%s in %.2f s\n", b->profile, b->total, b->ran,
		       b->reused, b->failed, b->skipped, cancel,
		       (double)b->duration_ns / 1e9);
		if (v->prog != NULL)
			progress_slowest(v->prog, slow, sizeof slow);
		if (slow[0])
			printf("%s\n", slow);
		if (b->index[0])
			printf("outputs in build/%s/ (index: %s)\n", b->profile, b->index);
		/* last, where the eye lands, as cargo and bazel do */
		if (v->failed[0] && v->failed_more)
			printf("failed: %s and %u more\n", v->failed, v->failed_more);
		else if (v->failed[0])
			printf("failed: %s\n", v->failed);
	}
	v->failed[0] = '\0';
	v->failed_more = 0;
	fflush(stdout);
	if (v->check != NULL) {
		char why[1024];
		if (count_check_summary(v->check, b, why, sizeof why) != 0) {
			cli_errorf("build", "%s", why);
			return CLI_COUNTS;
		}
	}
	cancelled = b->cancelled > 0 || strcmp(b->error, "cancelled") == 0;
	/* a build-wide problem (results that could not be recorded, a map
	 * that could not be written) fails the build like a failed step */
	if (b->error[0] && strcmp(b->error, "cancelled") != 0 && !v->json)
		cli_errorf("build", "%s", b->error);
	if (b->failed > 0 || b->skipped > 0 || (b->error[0] && !cancelled))
		return CLI_PROBLEM;
	if (cancelled)
		return 130;
	return CLI_OK;
}

/* The build's status said it is done (its BuildFinished event, and
 * every step event of it before that, are in the daemon's ring already): take what of
 * them this client has not received yet, up to the BuildFinished event,
 * so that no step line is missing. When nothing more comes, bs is the
 * summary (and the events are not all seen: no count check). */
static int
build_drain(kiln_conn *c, struct build_view *v, kiln_build_summary *bs)
{
	kiln_event ev;
	unsigned others = 0;

	/* other builds' events may keep coming: not for ever */
	while (others++ < 100000 && kiln_events_poll(c, 200, &ev) == 0) {
		if (ev.type == KILN_EVENT_OVERFLOW || ev.type == KILN_EVENT_STOPPING)
			break;
		if (ev.type == KILN_EVENT_STEP) {
			for (size_t i = 0; i < ev.step->nbuilds; i++)
				if (ev.step->builds[i] == v->id) {
					count_check_step(v->check, ev.step);
					progress_finished(v->prog, ev.step);
					step_print(v, ev.step);
					break;
				}
		} else if (ev.type == KILN_EVENT_BUILD_DONE && ev.build->build == v->id) {
			return summary_print(v, ev.build);
		}
	}
	count_check_lost(v->check);
	return summary_print(v, bs);
}

static int
build_follow(kiln_conn *c, struct build_view *v)
{
	int cancel_sent = 0, idle_ms = 0, rv;
	kiln_event ev;
	kiln_build_summary bs;

	for (;;) {
		if (interrupted && !cancel_sent) {
			kiln_build_cancel(c, v->id);
			cancel_sent = 1;
		}
		rv = kiln_events_poll(c, 200, &ev);
		if (rv == KILN_ETIMEDOUT) {
			/* quiet for a while: is the build (and the daemon) still
			 * there? */
			status_draw(v);   /* the clocks move on */
			if ((idle_ms += 200) < 2000)
				continue;
			idle_ms = 0;
			if ((rv = kiln_build_status(c, v->id, &bs)) != 0) {
				cli_daemon_error("build", "asking about the build", c, rv);
				return CLI_PROBLEM;
			}
			if (bs.done)
				return build_drain(c, v, &bs);
			continue;
		}
		if (rv != 0) {
			cli_daemon_error("build", "following the build", c, rv);
			return CLI_PROBLEM;
		}
		idle_ms = 0;
		if (ev.type == KILN_EVENT_OVERFLOW) {
			/* lost events: the summary still tells the outcome (and
			 * cannot be checked against the events); the user learns
			 * that step lines are missing above it */
			if (!ev.evicted)
				cli_errorf("build", "%" PRIu64 " events were lost (this client "
				           "fell behind the daemon's --event-buffer): some "
				           "steps are not listed; the summary is the daemon's",
				           ev.new_epoch ? 0 : ev.last_lost - ev.first_lost + 1);
			count_check_lost(v->check);
			if (kiln_build_status(c, v->id, &bs) == 0 && bs.done)
				return summary_print(v, &bs);
			continue;
		}
		if (ev.type == KILN_EVENT_STOPPING) {
			cli_errorf("build", "the daemon is stopping (%s)", ev.text);
			return CLI_PROBLEM;
		}
		if (ev.type == KILN_EVENT_STEP) {
			for (size_t i = 0; i < ev.step->nbuilds; i++)
				if (ev.step->builds[i] == v->id) {
					count_check_step(v->check, ev.step);
					progress_finished(v->prog, ev.step);
					step_print(v, ev.step);
					break;
				}
		} else if (ev.type == KILN_EVENT_STEP_STARTED) {
			for (size_t i = 0; i < ev.started->nbuilds; i++)
				if (ev.started->builds[i] == v->id) {
					progress_started(v->prog, ev.started);
					status_draw(v);
					break;
				}
		} else if (ev.type == KILN_EVENT_BUILD_DONE && ev.build->build == v->id) {
			return summary_print(v, ev.build);
		}
	}
}

/* --wait-uploads: wait until the daemon has nothing left to upload to
 * the shared cache, then say what became of the results since before (the
 * build's, and any another build queued meanwhile). A cache never fails a
 * build: the exit status stays the build's. */
static void
uploads_wait(const struct cli *cli, const kiln_status *before, int json)
{
	struct timespec tick = {0, 100 * 1000000};
	FILE *out = json ? stderr : stdout;
	kiln_status st;
	kiln_conn *c;

	if (cli_connect("build", cli, 0, &c) != CLI_OK || c == NULL)
		return;
	while (!interrupted && kiln_status_get(c, &st) == 0 && st.cache_pending > 0)
		nanosleep(&tick, NULL);
	if (!interrupted && kiln_status_get(c, &st) == 0 && strcmp(st.cache_mode, "off") != 0)
		fprintf(out, "shared cache: %" PRIu64 " results uploaded, %" PRIu64
		        " uploads failed or dropped\n", st.cache_uploaded - before->cache_uploaded,
		        st.cache_dropped - before->cache_dropped);
	kiln_close(c);
}

int
cmd_build(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"jobs", required_argument, NULL, 'j'},
		{"keep-going", no_argument, NULL, 'k'},
		{"dry-run", no_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'J'},
		{"quiet", no_argument, NULL, 'q'},
		{"priority", required_argument, NULL, 'P'},
		{"wait-uploads", no_argument, NULL, 'U'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	kiln_build_opts o = {0};
	kiln_status before = {0};
	int wait_uploads = 0;
	struct build_view v = {0};
	struct progress prog;
	struct count_check check;
	const char *dir = NULL;
	char profile[128], *end;
	uint32_t nsteps;
	kiln_conn *c;
	int ch, rv;
	long n;

	while ((ch = getopt_long(argc, argv, ":C:p:j:knqh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'p': o.profile = optarg; break;
		case 'q': v.quiet = 1; break;
		case 'j':
		case 'P':
			n = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || n < (ch == 'j') || n > 10000)
				return cli_usage("build", build_usage, "%s: not a number "
				                 "in range: '%s'", ch == 'j' ? "-j" : "--priority",
				                 optarg);
			if (ch == 'j')
				o.jobs = (unsigned)n;
			else
				o.priority = (unsigned)n;
			break;
		case 'k': o.keep_going = 1; break;
		case 'n': o.dry_run = 1; break;
		case 'J': v.json = 1; break;
		case 'U': wait_uploads = 1; break;
		case 'h': return cli_help(build_help);
		default: return cli_bad_option("build", build_usage, longopts, ch, argv);
		}
	}
	/* tools are found on this shell's PATH, as make's would be, not on
	 * the PATH of whichever shell started the daemon */
	o.path = getenv("PATH");
	o.targets = (const char *const *)argv + optind;
	o.ntargets = (size_t)(argc - optind);
	v.dry = o.dry_run;
	v.tty = isatty(STDOUT_FILENO) && !v.json;
	if ((rv = enter_dir("build", dir)) != CLI_OK ||
	    (rv = cli_connect("build", cli, 1, &c)) != CLI_OK)
		return rv;
	if (wait_uploads && kiln_status_get(c, &before) != 0)
		wait_uploads = 0;   /* an old daemon: nothing to count from */
	if ((rv = kiln_subscribe(c, NULL)) != 0) {
		cli_daemon_error("build", "subscribing to events", c, rv);
		kiln_close(c);
		return CLI_PROBLEM;
	}
	/* a status line needs no more than 10 updates a second, and a round
	 * trip per step costs the daemon more than small steps do; the
	 * build's end still comes at once. (Each gathering wait
	 * is a timer in nng 1.5, whose expiry spins its aio-expire thread:
	 * a short gather costs CPU for nothing; figures in docs/build.md,
	 * "Where the full build's time goes".) */
	kiln_events_gather(c, 100);
	rv = kiln_build_start(c, &o, &v.id, &nsteps, profile, sizeof profile);
	if (rv == KILN_EBADPROJECT || rv == KILN_EINVAL) {
		const char *words = kiln_conn_error(c);
		if (rv == KILN_EBADPROJECT)
			fprintf(stderr, "kiln: build: the project has errors:\n%s%s", words,
			        words[0] && words[strlen(words) - 1] == '\n' ? "" : "\n");
		else
			cli_errorf("build", "%s", words[0] ? words : kiln_strerror(rv));
		kiln_close(c);
		return CLI_USAGE;
	}
	if (rv != 0) {
		cli_daemon_error("build", "starting the build", c, rv);
		kiln_close(c);
		return CLI_PROBLEM;
	}
	{
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		progress_init(&prog, o.jobs ? o.jobs : cores > 0 ? (unsigned)cores : 1, nsteps);
		v.prog = &prog;
	}
	count_check_init(&check);
	v.check = &check;
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	status_draw(&v);
	rv = build_follow(c, &v);
	progress_free(&prog);
	count_check_free(&check);
	kiln_close(c);
	if (wait_uploads && rv != 130)
		uploads_wait(cli, &before, v.json);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	return rv;
}

/* ---- kiln watch ------------------------------------------------------------ */

static const char watch_usage[] =
	"usage: kiln watch [-C DIR] [-p PROFILE] [-j N] [-k] [--json] [URL|GLOB]...\n";
static const char watch_help[] =
	"usage: kiln watch [-C DIR] [-p PROFILE] [-j N] [-k] [--json] [URL|GLOB]...\n"
	"\n"
	"Keep assets up to date: build them (every step when none is named),\n"
	"then again whenever project files change, printing each step's result\n"
	"and the summary of each build that did something, as they happen (with\n"
	"--json, one object per line, as kiln build --json). An edit made while a\n"
	"build runs is built as soon as that build ends. Live builds run before\n"
	"batch builds (priority 100). Runs until interrupted (Ctrl-C), which\n"
	"cancels a build in progress. kiln events shows the changes themselves.\n"
	"\n"
	"options:\n"
	"  -C DIR           the project is DIR's (default: the current folder's)\n"
	"  -p PROFILE       the profile to build (default: the project's first)\n"
	"  -j N             tools at once (default: the daemon's cores)\n"
	"  -k, --keep-going after a failure, build what does not depend on it\n"
	"  --json           one JSON object per line\n"
	"  -h, --help       show this help\n"
	"\n"
	"exit status: 0 interrupted; 1 the daemon stopped or went away; 2 bad\n"
	"usage, the project has errors at the start, or no daemon could be\n"
	"reached.\n";

/* What kiln watch prints: its builds' steps, and the summary of the first
 * build and of every later one that did something. A change that left
 * everything up to date (a file no step reads, say kiln watch's own
 * output redirected into the project) prints nothing, so that it causes
 * no further change. A failure is printed once: a later build that
 * reports it again without running the tool (a step not run again because
 * nothing it reads changed, issue 38; an input still missing) prints
 * nothing of it, and counts as having done nothing. */
static int
watch_event(const kiln_event *ev, void *arg)
{
	struct build_view *v = arg;
	const kiln_build_summary *b = ev->build;

	switch (ev->type) {
	case KILN_EVENT_STEP:
		if (ev->step->result == KILN_STEP_FAILED && failure_repeats(v, ev->step)) {
			v->repeats++;
			break;
		}
		if (ev->step->result != KILN_STEP_FAILED)
			failure_forget(v, ev->step->url);
		step_print(v, ev->step);
		break;
	case KILN_EVENT_BUILD_DONE:
		if (v->id == 0 || b->ran || b->failed > v->repeats || b->skipped ||
		    b->cancelled || b->error[0])
			summary_print(v, b);
		v->repeats = 0;
		v->id = b->build;
		break;
	case KILN_EVENT_LOG:
		cli_errorf("watch", "%s", ev->text);
		break;
	case KILN_EVENT_OVERFLOW:
		/* kiln_live builds again: what was lost is rebuilt, not shown */
		if (ev->evicted)
			cli_errorf("watch", "the daemon closed this subscription to make "
			           "room for a newer one (--max-subscribers); "
			           "subscribing again");
		else if (ev->new_epoch)
			cli_errorf("watch", "the daemon restarted; building again");
		else
			cli_errorf("watch", "%" PRIu64 " events were lost (this client "
			           "fell behind the daemon's --event-buffer); building "
			           "again", ev->last_lost - ev->first_lost + 1);
		break;
	default:
		break;
	}
	return 0;
}

int
cmd_watch(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"jobs", required_argument, NULL, 'j'},
		{"keep-going", no_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	kiln_build_opts o = {.priority = 100};
	struct build_view v = {0};
	const char *dir = NULL;
	kiln_conn *c;
	char *end;
	int ch, rv;
	long n;

	while ((ch = getopt_long(argc, argv, ":C:p:j:kh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': dir = optarg; break;
		case 'p': o.profile = optarg; break;
		case 'j':
			n = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || n < 1 || n > 10000)
				return cli_usage("watch", watch_usage, "-j: not a number in "
				                 "range: '%s'", optarg);
			o.jobs = (unsigned)n;
			break;
		case 'k': o.keep_going = 1; break;
		case 'J': v.json = 1; break;
		case 'h': return cli_help(watch_help);
		default: return cli_bad_option("watch", watch_usage, longopts, ch, argv);
		}
	}
	o.path = getenv("PATH");
	o.targets = (const char *const *)argv + optind;
	o.ntargets = (size_t)(argc - optind);
	if ((rv = enter_dir("watch", dir)) != CLI_OK ||
	    (rv = cli_connect("watch", cli, 1, &c)) != CLI_OK)
		return rv;
	/* Other profiles' steps and builds need not cross the connection. No
	 * URL globs: the steps of the targets' prerequisites are printed too
	 * (and without -p the profile is only known once the build starts). */
	if (o.profile != NULL &&
	    (rv = kiln_events_filter(c, &(kiln_event_filter){.profile = o.profile})) != 0) {
		cli_error("watch", "filtering events", rv);
		kiln_close(c);
		return CLI_USAGE;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	rv = kiln_live(c, &o, (const volatile int *)&interrupted, watch_event, &v);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	for (size_t i = 0; i < v.nshown; i++)
		free(v.shown[i].url);
	free(v.shown);
	if (rv == KILN_EBADPROJECT || rv == KILN_EINVAL) {
		const char *words = kiln_conn_error(c);
		cli_errorf("watch", "%s", words[0] ? words : kiln_strerror(rv));
		kiln_close(c);
		return CLI_USAGE;
	}
	if (rv != 0) {
		cli_daemon_error("watch", "keeping the build up to date", c, rv);
		kiln_close(c);
		return CLI_PROBLEM;
	}
	kiln_close(c);
	return CLI_OK;
}

/* ---- kiln why / kiln log -------------------------------------------------- */

static const char why_usage[] = "usage: kiln why URL [-C DIR] [-p PROFILE]\n";
static const char why_help[] =
	"usage: kiln why URL [-C DIR] [-p PROFILE]\n"
	"\n"
	"Say why the last build ran the step URL (which input, prerequisite,\n"
	"param, tool or variable changed, from which hash or value to which;\n"
	"a long text shown where it differs), or why it reused\n"
	"a result, whether its run was file-access traced, and its warnings\n"
	"(paths it used that kiln could not record as dependencies). Hashes\n"
	"show their first 8 hex digits.\n";

static const char log_usage[] = "usage: kiln log URL [-C DIR] [-p PROFILE]\n";
static const char log_help[] =
	"usage: kiln log URL [-C DIR] [-p PROFILE]\n"
	"\n"
	"Print what the step's tool wrote to stdout and stderr when it last ran\n"
	"(kept in the store, for failures too).\n";

static int
why_args(const char *cmd, const char *usage, const char *help, int argc,
         char **argv, const char **dir, const char **profile, const char **url)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":C:p:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': *dir = optarg; break;
		case 'p': *profile = optarg; break;
		case 'h': return cli_help(help) == CLI_OK ? -1 : CLI_USAGE;
		default: return cli_bad_option(cmd, usage, longopts, ch, argv);
		}
	}
	if (optind + 1 != argc)
		return cli_usage(cmd, usage, optind == argc ? "which URL?"
		                 : "one URL at a time");
	*url = argv[optind];
	return CLI_OK;
}

static int
why_get(const char *cmd, const struct cli *cli, const char *dir,
        const char *profile, const char *url, kiln_conn **c, kiln_why_info *w)
{
	int rv;

	if ((rv = enter_dir(cmd, dir)) != CLI_OK ||
	    (rv = cli_connect(cmd, cli, 1, c)) != CLI_OK)
		return rv;
	if ((rv = kiln_why(*c, profile, url, w)) != 0) {
		if (rv == KILN_ENOTFOUND)
			cli_errorf(cmd, "%s", kiln_conn_error(*c)[0] ? kiln_conn_error(*c)
			           : "no build has decided that step yet");
		else
			cli_daemon_error(cmd, url, *c, rv);
		kiln_close(*c);
		*c = NULL;
		return rv == KILN_EINVAL ? CLI_USAGE : CLI_PROBLEM;
	}
	return CLI_OK;
}

int
cmd_why(const struct cli *cli, int argc, char **argv)
{
	const char *dir = NULL, *profile = NULL, *url = NULL;
	static const char *const decisions[] = {"ran", "reused a cached result",
	                                        "failed"};
	kiln_why_info w;
	kiln_conn *c;
	char when[64] = "?", hex[KILN_ID_HEX_LEN + 1];
	struct tm tm;
	time_t t;
	int rv;

	if ((rv = why_args("why", why_usage, why_help, argc, argv, &dir, &profile,
	                   &url)) != CLI_OK)
		return rv < 0 ? CLI_OK : rv;
	if ((rv = why_get("why", cli, dir, profile, url, &c, &w)) != CLI_OK)
		return rv;
	t = (time_t)(w.time_ns / 1000000000);
	if (localtime_r(&t, &tm) != NULL)
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
	printf("%s: %s\n", url, w.reason);
	printf("last decision: %s at %s", (unsigned)w.decision < 3
	       ? decisions[w.decision] : "?", when);
	if (w.decision == 0)
		printf(" (the tool took %.2f s)", (double)w.duration_ns / 1e9);
	printf("%s\n", w.this_daemon ? "" : " (recorded by an earlier daemon)");
	if (w.program[0])
		printf("program: %s\n", w.program);
	if (w.machine[0])
		printf("ran on: agent %s\n", w.machine);
	if (w.nchanges > 0)
		printf("what changed since the decision before:\n");
	for (size_t i = 0; i < w.nchanges; i++) {
		const kiln_why_change *ch = &w.changes[i];
		/* a declared prerequisite's key label is "need URL" (hashed
		 * into keys): shown by the name kiln deps uses */
		const char *pre = strncmp(ch->label, "need ", 5) == 0 ? "prerequisite " : "";
		const char *label = pre[0] ? ch->label + 5 : ch->label;
		if (ch->before[0] && ch->after[0])
			printf("  %s%s: %s -> %s\n", pre, label, ch->before, ch->after);
		else if (ch->after[0])
			printf("  %s%s: new (%s)\n", pre, label, ch->after);
		else
			printf("  %s%s: gone (was %s)\n", pre, label, ch->before);
	}
	if (w.decision != 2)
		printf("traced: %s\n", w.traced ? "yes" : "no (a process ran without "
		       "the tracer: a static binary, or none found; its declared inputs, "
		       "depfile and what traced processes saw are its dependencies)");
	if (w.decision == 2 && w.error[0])
		printf("error: %s\n", w.error);
	for (size_t i = 0; i < w.nwarnings; i++)
		printf("warning: %s\n", w.warnings[i]);
	for (size_t i = 0; i < w.noutputs; i++) {
		kiln_id_to_hex(&w.outputs[i].id, hex);
		printf("output %s: %s %s (%llu bytes)\n", w.outputs[i].name,
		       w.outputs[i].path, hex, (unsigned long long)w.outputs[i].size);
	}
	if (w.has_log)
		printf("log: kiln log %s%s%s%s\n", profile ? "-p " : "",
		       profile ? profile : "", profile ? " " : "", url);
	kiln_close(c);
	return CLI_OK;
}

static int
sink_stdout(const void *buf, size_t len, void *arg)
{
	(void)arg;
	return kiln_write_all(STDOUT_FILENO, buf, len);
}

int
cmd_log(const struct cli *cli, int argc, char **argv)
{
	const char *dir = NULL, *profile = NULL, *url = NULL;
	kiln_why_info w;
	kiln_conn *c;
	int rv;

	if ((rv = why_args("log", log_usage, log_help, argc, argv, &dir, &profile,
	                   &url)) != CLI_OK)
		return rv < 0 ? CLI_OK : rv;
	if ((rv = why_get("log", cli, dir, profile, url, &c, &w)) != CLI_OK)
		return rv;
	if (!w.has_log) {
		if (w.decision == 0 || w.decision == 2)
			fprintf(stderr, "kiln: log: %s: the tool printed nothing\n", url);
		else
			fprintf(stderr, "kiln: log: %s: reused a cached result; its "
			        "log is not kept with it\n", url);
		kiln_close(c);
		return CLI_OK;
	}
	/* on stderr: stdout is the tool's output, byte for byte */
	if (w.machine[0] != '\0')
		fprintf(stderr, "kiln: log: %s: ran on agent %s\n", url, w.machine);
	if ((rv = kiln_blob_get(c, &w.log, sink_stdout, NULL)) != 0) {
		cli_daemon_error("log", "reading the log", c, rv);
		kiln_close(c);
		return CLI_PROBLEM;
	}
	kiln_close(c);
	return CLI_OK;
}
