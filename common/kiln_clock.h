/* kiln_clock.h — the clocks every part of kiln reads, in nanoseconds.
 *
 * Monotonic for durations and deadlines (it never jumps with the wall
 * clock); wall time where a value is stored or compared with file times;
 * the coarse wall clock where it must be the clock the kernel stamps file
 * times with (ext4's ctime/mtime come from it, so a "changed after the tool
 * started" test is only sound against the same clock). */
#ifndef KILN_CLOCK_H
#define KILN_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
kiln_clock_ns(clockid_t which)
{
	struct timespec ts;

	clock_gettime(which, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC */
static inline int64_t
kiln_mono_ns(void)
{
	return kiln_clock_ns(CLOCK_MONOTONIC);
}

/* CLOCK_REALTIME */
static inline int64_t
kiln_wall_ns(void)
{
	return kiln_clock_ns(CLOCK_REALTIME);
}

/* CLOCK_REALTIME_COARSE: the clock file times are stamped with. */
static inline int64_t
kiln_coarse_wall_ns(void)
{
	return kiln_clock_ns(CLOCK_REALTIME_COARSE);
}

#endif
