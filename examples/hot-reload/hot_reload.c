/* hot_reload.c — a stand-in for a game editor's hot-reload: connect to
 * the project's kiln daemon, keep some assets built as the artist saves,
 * and print one line per asset to reload.
 *
 *   hot-reload [-p PROFILE] [URL|GLOB]...     (run in the project folder)
 *
 * Prints, first what is built already (the daemon's snapshot), then as
 * they happen:
 *   reload URL PATH HASH    a step produced (or restored) this output:
 *                           load PATH (under the project) again
 *   failed URL: REASON      keep the last good asset; show REASON
 * Ends on Ctrl-C. See README.md beside it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static volatile int stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void
print_reload(const char *url, const kiln_step_output *o, size_t n)
{
	char hex[KILN_ID_HEX_LEN + 1];

	for (size_t i = 0; i < n; i++) {
		kiln_id_to_hex(&o[i].id, hex);
		printf("reload %s %s %s\n", url, o[i].path, hex);
	}
}

static void
print_failed(const char *url, const char *error)
{
	const char *nl = strchr(error, '\n');

	printf("failed %s: %.*s\n", url,
	       nl ? (int)(nl - error) : (int)strlen(error), error);
}

/* One event of the live build: the snapshot's steps (what is built when
 * the editor starts) and the steps' results are what an editor loads
 * (only those of the assets it named: the daemon filters); the rest
 * (changes, build ends) it may ignore. */
static int
on_event(const kiln_event *ev, void *arg)
{
	const kiln_step_event *s = ev->step;
	const kiln_step_state *st = ev->state;

	(void)arg;
	if (ev->type == KILN_EVENT_SNAPSHOT) {
		/* a failed step's outputs are its last good ones: load those */
		print_reload(st->url, st->outputs, st->noutputs);
		if (st->state == KILN_STATE_FAILED)
			print_failed(st->url, st->error);
		fflush(stdout);
		return 0;
	}
	if (ev->type == KILN_EVENT_LOG) {
		fprintf(stderr, "hot-reload: %s\n", ev->text);
		return 0;
	}
	if (ev->type != KILN_EVENT_STEP)
		return 0;
	if (s->result == KILN_STEP_FAILED)
		print_failed(s->url, s->error);
	else if (s->result == KILN_STEP_RAN || s->result == KILN_STEP_REUSED)
		print_reload(s->url, s->outputs, s->noutputs);
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	kiln_build_opts o = {.priority = 100};
	kiln_event_filter f = {0};
	kiln_conn *c;
	int i = 1, rv;

	if (argc > 2 && strcmp(argv[1], "-p") == 0) {
		o.profile = argv[2];
		i = 3;
	}
	o.targets = (const char *const *)argv + i;
	o.ntargets = (size_t)(argc - i);
	o.path = getenv("PATH");
	if ((rv = kiln_connect(NULL, &c)) != 0) {
		fprintf(stderr, "hot-reload: no kiln daemon: %s\n", kiln_strerror(rv));
		return 2;
	}
	/* Only the steps of the assets named cross the connection, not those
	 * of their prerequisites, nor other clients' builds of other assets
	 * and profiles. */
	f.urls = o.targets;
	f.nurls = o.ntargets;
	f.profile = o.profile;
	/* What is built already comes first, then every change from that
	 * very moment: nothing missed, nothing twice. */
	if ((rv = kiln_events_filter(c, &f)) != 0 ||
	    (rv = kiln_events_snapshot(c, 1)) != 0) {
		fprintf(stderr, "hot-reload: %s\n", kiln_strerror(rv));
		kiln_close(c);
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	rv = kiln_live(c, &o, &stop, on_event, NULL);
	if (rv != 0)
		fprintf(stderr, "hot-reload: %s%s%s\n", kiln_strerror(rv),
		        kiln_conn_error(c)[0] ? ": " : "", kiln_conn_error(c));
	kiln_close(c);
	return rv == 0 ? 0 : 2;
}
