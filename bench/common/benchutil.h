/* benchutil.h — what kiln's benchmark programs share: dying with a
 * message, the clock, sizes from the environment, scratch folders, series
 * of timed runs (median and min–max), aligned table columns, and the
 * machine line. Bench programs only; they may exit. */
#ifndef KILN_BENCHUTIL_H
#define KILN_BENCHUTIL_H

#include <stddef.h>
#include <stdio.h>

#define MAXREPS 64

extern const char *bench_prog; /* prefix of die()'s messages */
extern int bench_verbose;       /* series_add prints every run to stderr */

/* Print "<bench_prog>: <message>" on stderr and exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* CLOCK_MONOTONIC in seconds. */
double now(void);
/* The integer in environment variable name (>= min), or dflt when unset. */
long env_long(const char *name, long dflt, long min);
/* buf = dir/name (dies when it does not fit). */
void path_join(char *buf, size_t len, const char *dir, const char *name);
/* mkdir, dying on any error but EEXIST. */
void make_dir(const char *path);

/* Create root/rel for writing (die on failure); close_out checks every
 * write made to it, naming what in the message. */
FILE *open_out(const char *root, const char *rel);
void close_out(FILE *f, const char *what);

/* The figures of one timed case. */
struct series {
	const char *label; /* for KILN_BENCH_VERBOSE */
	int n;
	double v[MAXREPS];
};
void series_add(struct series *s, double v);
void series_stats(const struct series *s, double *med, double *lo, double *hi);

/* "1,234,567" / "1,235k" style counts into buf. */
void fmt_count(char *buf, size_t len, double x);
/* Print s padded to width display columns (UTF-8 aware). */
void put_col(const char *s, int width);
/* The file system type and device of path, for the machine line. */
void scratch_fs(const char *path, char *fs, size_t len);
/* The CPU model name from /proc/cpuinfo. */
void cpu_model(char *buf, size_t len);

#endif
