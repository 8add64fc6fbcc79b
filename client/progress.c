/* progress.c — kiln build's status line and slowest steps (progress.h).
 *
 * The estimate of the time left comes from the daemon: each StepStarted
 * carries the step's last recorded tool time (expected_ns), and every
 * step event the recorded time of the build's steps not finished
 * (left_ns). What the running steps still need is their expected time
 * less what they have run; what has not started is left_ns less the
 * running steps' expected time; spread over -j slots, and never less
 * than the longest running step still needs. No recorded times: "?". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_clock.h"
#include "progress.h"

void
progress_init(struct progress *p, unsigned jobs, uint32_t total)
{
	memset(p, 0, sizeof *p);
	p->start_ns = kiln_mono_ns();
	p->jobs = jobs ? jobs : 1;
	p->total = total;
}

void
progress_free(struct progress *p)
{
	for (size_t i = 0; i < p->nrun; i++)
		free(p->run[i].url);
	free(p->run);
	p->run = NULL;
	p->nrun = p->caprun = 0;
}

static void
run_drop(struct progress *p, const char *url)
{
	for (size_t i = 0; i < p->nrun; i++)
		if (strcmp(p->run[i].url, url) == 0) {
			free(p->run[i].url);
			p->run[i] = p->run[--p->nrun];
			return;
		}
}

void
progress_started(struct progress *p, const kiln_step_started *s)
{
	char *url;

	p->done = s->done;
	p->total = s->total;
	p->left_ns = s->left_ns;
	p->have_left = 1;
	run_drop(p, s->url);   /* started again (an edit, an agent retry) */
	if (p->nrun == p->caprun) {
		size_t ncap = p->caprun ? p->caprun * 2 : 16;
		struct progress_run *nv = realloc(p->run, ncap * sizeof *nv);
		if (nv == NULL)
			return;   /* not shown as running; the counts stay right */
		p->run = nv;
		p->caprun = ncap;
	}
	if ((url = strdup(s->url)) == NULL)
		return;
	p->run[p->nrun++] = (struct progress_run){url, kiln_mono_ns(), s->expected_ns};
}

/* Keep s among the slowest steps that ran. */
static void
slow_note(struct progress *p, const kiln_step_event *s)
{
	size_t i = PROGRESS_SLOWEST;

	while (i > 0 && p->slowest[i - 1].ns < s->duration_ns)
		i--;
	if (i == PROGRESS_SLOWEST)
		return;
	memmove(&p->slowest[i + 1], &p->slowest[i],
	        (PROGRESS_SLOWEST - 1 - i) * sizeof p->slowest[0]);
	snprintf(p->slowest[i].url, sizeof p->slowest[i].url, "%s", s->url);
	p->slowest[i].ns = s->duration_ns;
}

void
progress_finished(struct progress *p, const kiln_step_event *s)
{
	p->done = s->done;
	p->total = s->total;
	p->left_ns = s->left_ns;
	p->have_left = 1;
	run_drop(p, s->url);
	if (s->result == KILN_STEP_FAILED)
		p->failed++;
	if ((s->result == KILN_STEP_RAN || s->result == KILN_STEP_FAILED) &&
	    s->duration_ns > 0)
		slow_note(p, s);
}

/* A duration as "7.2s", "1m05s", "1h02m". */
static void
clock_fmt(uint64_t ns, char *buf, size_t len)
{
	uint64_t s = ns / 1000000000;

	if (s < 60)
		snprintf(buf, len, "%.1fs", (double)ns / 1e9);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
		         (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
		         (unsigned long long)(s / 60 % 60));
}

/* The estimate of the time left, or 0 with *known 0. */
static uint64_t
time_left(const struct progress *p, int64_t now, int *known)
{
	uint64_t running_exp = 0, running_rem = 0, longest = 0, rest;

	for (size_t i = 0; i < p->nrun; i++) {
		uint64_t ran = (uint64_t)(now - p->run[i].since_ns);
		uint64_t rem = p->run[i].expected_ns > ran ? p->run[i].expected_ns - ran : 0;
		running_exp += p->run[i].expected_ns;
		running_rem += rem;
		if (rem > longest)
			longest = rem;
	}
	*known = p->have_left && (p->left_ns > 0 || running_exp > 0);
	rest = p->left_ns > running_exp ? p->left_ns - running_exp : 0;
	rest = (rest + running_rem) / p->jobs;
	return rest > longest ? rest : longest;
}

/* The running steps, longest running first, as "a (4s), b (1s)". */
static void
longest_names(const struct progress *p, int64_t now, char *buf, size_t len)
{
	size_t used[3] = {0}, nused = 0, at = 0;

	buf[0] = '\0';
	while (nused < 3 && nused < p->nrun) {
		size_t best = p->nrun;
		for (size_t i = 0; i < p->nrun; i++) {
			int taken = 0;
			for (size_t k = 0; k < nused; k++)
				taken |= used[k] == i;
			if (!taken && (best == p->nrun || p->run[i].since_ns < p->run[best].since_ns))
				best = i;
		}
		used[nused++] = best;
		char t[32];
		clock_fmt((uint64_t)(now - p->run[best].since_ns), t, sizeof t);
		int n = snprintf(buf + at, len - at, "%s%s (%s)", at ? ", " : "",
		                 p->run[best].url, t);
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
}

void
progress_line(const struct progress *p, unsigned cols, char *buf, size_t len)
{
	int64_t now = kiln_mono_ns();
	char el[32], left[40] = "?", names[512];
	int known;
	uint64_t eta = time_left(p, now, &known);
	size_t max = cols > 1 && cols < len ? cols - 1 : len - 1;

	clock_fmt((uint64_t)(now - p->start_ns), el, sizeof el);
	if (known) {
		left[0] = '~';
		clock_fmt(eta, left + 1, sizeof left - 1);
	}
	longest_names(p, now, names, sizeof names);
	snprintf(buf, len, "[%u/%u] %zu running, %u failed, %s elapsed, %s left%s%s",
	         p->done, p->total, p->nrun, p->failed, el, left,
	         names[0] ? ": " : "", names);
	if (strlen(buf) > max)
		buf[max] = '\0';   /* one terminal line: \r redraws it */
}

void
progress_slowest(const struct progress *p, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < PROGRESS_SLOWEST && p->slowest[i].ns > 0; i++) {
		int n = snprintf(buf + at, len - at, "%s%s %.2f s", i ? ", " : "slowest: ",
		                 p->slowest[i].url, (double)p->slowest[i].ns / 1e9);
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
}
