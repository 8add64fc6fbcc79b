/* count_check.h — a testing aid for `kiln build` (count_check.c;
 * docs/build.md, "Checking the summary against the step events"): with
 * KILN_CHECK_COUNTS=1 in its environment, kiln build tallies the step
 * events it received for its build and fails loudly when the build's
 * summary counts something else. The end-to-end suites set it. */
#ifndef KILN_COUNT_CHECK_H
#define KILN_COUNT_CHECK_H

#include <stddef.h>

#include "kiln.h"

/* Each step's last result for one build, keyed by profile and URL. */
struct count_check {
	int on;                  /* KILN_CHECK_COUNTS=1 */
	int lost;                /* events may be missing: nothing to compare */
	struct count_step {
		char *key;           /* "profile\nurl" */
		kiln_step_result result;
	} *v;
	size_t n, cap;
	int nomem;               /* a step could not be noted: not compared */
};

/* Begin c, on when the environment asks for it. */
void count_check_init(struct count_check *c);

/* Free what c holds. */
void count_check_free(struct count_check *c);

/* A step event of the build: its result replaces an earlier one of the
 * same step (a step decided again in the build gets a new event). */
void count_check_step(struct count_check *c, const kiln_step_event *s);

/* Events of the build may have been lost (an overflow, a summary taken
 * from the build's status): the check is skipped. */
void count_check_lost(struct count_check *c);

/* Compare the summary b with the events: 0 when they agree (or c is off,
 * or cannot judge), else -1 with what differs in why. Ran, failed,
 * skipped and would-run are compared exactly; reused events are at most
 * the summary's reused (steps up to date send no event); cancelled
 * steps are not compared (a step no build wants any more is cancelled
 * without an event), and a build its client cancelled is not judged. */
int count_check_summary(const struct count_check *c, const kiln_build_summary *b,
                        char *why, size_t whylen);

#endif
