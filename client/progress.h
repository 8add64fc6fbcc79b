/* progress.h — what `kiln build` shows while a build runs and after it
 * (progress.c; docs/build.md, "Progress"): the terminal's status line
 * (done/total, running, failed, elapsed, an estimate of the time left,
 * the steps running longest) and the slowest steps for the summary. */
#ifndef KILN_PROGRESS_H
#define KILN_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

#define PROGRESS_SLOWEST 3   /* steps the summary names */

struct progress_run {
	char *url;
	int64_t since_ns;        /* kiln_mono_ns when its start was seen */
	uint64_t expected_ns;
};

struct progress {
	int64_t start_ns;        /* when the build was asked for */
	unsigned jobs;           /* tools at once (-j, or this machine's cores) */
	uint32_t done, total, failed;
	uint64_t left_ns;        /* the daemon's recorded time left */
	int have_left;           /* an event has said left_ns */
	struct progress_run *run;
	size_t nrun, caprun;
	struct slow { char url[256]; uint64_t ns; } slowest[PROGRESS_SLOWEST];
};

/* Begin p for a build of total steps run jobs at once. */
void progress_init(struct progress *p, unsigned jobs, uint32_t total);

/* Free what p holds. */
void progress_free(struct progress *p);

/* A step of the build started / finished. */
void progress_started(struct progress *p, const kiln_step_started *s);
void progress_finished(struct progress *p, const kiln_step_event *s);

/* The status line for a terminal width cols, into buf. */
void progress_line(const struct progress *p, unsigned cols, char *buf, size_t len);

/* "slowest: URL 1.20 s, ..." for the summary into buf ("" when no step
 * ran). */
void progress_slowest(const struct progress *p, char *buf, size_t len);

#endif
