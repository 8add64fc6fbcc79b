/* benchutil.c — helpers shared by the benchmark programs (benchutil.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "benchutil.h"

const char *bench_prog = "bench";
int bench_verbose;

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", bench_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

long env_long(const char *name, long dflt, long min)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min)
		die("%s=%s: want an integer >= %ld", name, s, min);
	return v;
}

void path_join(char *buf, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
		die("path too long: %s/%s", dir, name);
}

void make_dir(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir %s: %s", path, strerror(errno));
}

void series_add(struct series *s, double v)
{
	if (bench_verbose)
		fprintf(stderr, "     run %d %s: %.4g\n", s->n + 1, s->label, v);
	if (s->n < MAXREPS)
		s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void series_stats(const struct series *s, double *med, double *lo, double *hi)
{
	double v[MAXREPS];
	int n = s->n;

	memcpy(v, s->v, sizeof v[0] * n);
	qsort(v, n, sizeof v[0], cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	*med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void fmt_count(char *buf, size_t len, double x)
{
	char digits[32], *o = buf;
	int i, nd;

	nd = snprintf(digits, sizeof digits, "%.0f", x);
	for (i = 0; i < nd && (size_t)(o - buf) + 2 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0)
			*o++ = ',';
		*o++ = digits[i];
	}
	*o = '\0';
}

void put_col(const char *s, int width)
{
	int cols = 0;
	const char *p;

	for (p = s; *p; p++)
		cols += ((unsigned char)*p & 0xc0) != 0x80;
	fputs(s, stdout);
	for (; cols < width; cols++)
		putchar(' ');
	putchar(' ');
}

void scratch_fs(const char *path, char *fs, size_t len)
{
	char real[4096], line[8192], mnt[4096], type[64], dev[512], best[4096 + 640] = "";
	size_t bestlen = 0, ml;
	FILE *f;
	char *sep;

	if (realpath(path, real) == NULL || (f = fopen("/proc/self/mountinfo", "re")) == NULL) {
		snprintf(fs, len, "?");
		return;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		sep = strstr(line, " - ");
		if (sep == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %511s", type, dev) != 2)
			continue;
		ml = strlen(mnt);
		if (strncmp(real, mnt, ml) != 0 || (real[ml] != '/' && real[ml] != '\0' && ml > 1))
			continue;
		if (ml >= bestlen) {
			bestlen = ml;
			snprintf(best, sizeof best, "%s (%s mounted on %s)", type, dev, mnt);
		}
	}
	fclose(f);
	snprintf(fs, len, "%s", best[0] ? best : "?");
}

void cpu_model(char *buf, size_t len)
{
	char line[512], *p;
	FILE *f = fopen("/proc/cpuinfo", "re");

	snprintf(buf, len, "?");
	if (f == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "model name", 10) != 0 || (p = strchr(line, ':')) == NULL)
			continue;
		p += 1 + strspn(p + 1, " \t");
		p[strcspn(p, "\n")] = '\0';
		snprintf(buf, len, "%s", p);
		break;
	}
	fclose(f);
}

FILE *
open_out(const char *root, const char *rel)
{
	char path[4096];
	FILE *f;

	path_join(path, sizeof path, root, rel);
	if ((f = fopen(path, "we")) == NULL)
		die("create %s: %s", path, strerror(errno));
	return f;
}

void
close_out(FILE *f, const char *what)
{
	if (ferror(f) || fclose(f) != 0)
		die("write %s: %s", what, strerror(errno));
}
