/* hot_reload.c — a stand-in for a game editor's hot-reload: connect to
 * the project's kiln daemon, keep some assets built as the artist saves,
 * and print one line per asset to reload.
 *
 *   hot-reload [-p PROFILE] [URL|GLOB]...     (run in the project folder)
 *
 * Prints, as they happen:
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

/* One event of the live build: the steps' results are what an editor
 * reloads (only those of the assets it named: the daemon filters); the
 * rest (changes, build ends) it may ignore. */
static int
on_event(const kiln_event *ev, void *arg)
{
	char hex[KILN_ID_HEX_LEN + 1];
	const kiln_step_event *s = ev->step;
	const char *nl;

	(void)arg;
	if (ev->type == KILN_EVENT_LOG) {
		fprintf(stderr, "hot-reload: %s\n", ev->text);
		return 0;
	}
	if (ev->type != KILN_EVENT_STEP)
		return 0;
	if (s->result == KILN_STEP_FAILED) {
		nl = strchr(s->error, '\n');
		printf("failed %s: %.*s\n", s->url,
		       nl ? (int)(nl - s->error) : (int)strlen(s->error), s->error);
	} else if (s->result == KILN_STEP_RAN || s->result == KILN_STEP_REUSED) {
		for (size_t i = 0; i < s->noutputs; i++) {
			kiln_id_to_hex(&s->outputs[i].id, hex);
			printf("reload %s %s %s\n", s->url, s->outputs[i].path, hex);
		}
	}
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
	if ((rv = kiln_events_filter(c, &f)) != 0) {
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
