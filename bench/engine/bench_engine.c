/* bench_engine.c — the build engine benchmark: `kiln build` against ninja,
 * GNU make and a floor, on the same generated graph.
 *
 * Usage: bench_engine [-j JOBS] [-n N[,N...]] [--big] [--rules R] [--rules-n STEPS]
 *                     [--rules-only] --kiln PATH SCRATCH_DIR
 *        (normally through bench/engine/run.sh)
 *
 * For every N the program writes (untimed) four copies of one project, one
 * folder per side so that no side sees another's files: N sources
 * src/fNNNNN.txt of a few dozen bytes; a layer of one-to-one steps
 * `cp src/fNNNNN.txt cp/fNNNNN`; a layer of many-to-one steps, each over ten
 * copies, `sh -c 'exec cat "$@" > "$0"' cat/gNNNNN cp/f...`; and one bundle
 * step, the same command over every cat output. kiln gets kiln.yaml (a rule
 * for the copies, the bundle asset) plus src/catNNN.kiln.yaml files holding
 * the cat assets (a description file may not pass 1 MiB); ninja a
 * build.ninja; make a Makefile of explicit rules (built-in rules off); the
 * floor nothing: it is this program posix_spawning the same argv (no shell),
 * at most JOBS at once, in dependency order (a ready list and counts of
 * unfinished inputs). Every side runs with the same -j.
 *
 * Cases, timed with CLOCK_MONOTONIC around spawn+wait, sides in an order
 * that rotates from run to run:
 *   full build   from clean: kiln's daemon stopped and build/ and .kiln/
 *                removed (daemon start and an empty store are counted);
 *                ninja's outputs, .ninja_log and .ninja_deps removed;
 *                make's and the floor's outputs removed
 *   no-op        the same build again (kiln: the warm daemon)
 *   one change   one source rewritten with new content, then the build
 *                (three steps rerun: its copy, its cat, the bundle)
 *   restore      kiln only: build/ removed, the outputs come back from the
 *                store through the warm daemon (as copies, or hard links
 *                with KILN_BENCH_MATERIALIZE=hardlink: kiln.yaml's
 *                materialize)
 * and the daemon's VmHWM/VmRSS from /proc after them. After every build the
 * bundle is compared with the bytes it must hold (every source in order);
 * a difference is printed loudly and makes the exit status 1. kiln failing
 * or missing is not an error: its columns say why and the peers still run.
 *
 * --big adds N = 100,000 for no-op, one change and restore; its full builds
 * run once, as setup (ninja takes minutes there), and the floor is skipped.
 *
 * Then the rules × files case (rules_size): R rules over the same F files
 * (R = --rules, 4; R × F = --rules-n steps, 100,000), one step per rule and
 * file, `cp src/fNNNNN.txt rK/fNNNNN`, nothing built. Timed: `kiln check`
 * (the loader: parse, glob, resolve) against `ninja -t targets all` (ninja
 * parsing the same graph's build.ninja), and a dry run of everything:
 * `kiln build -n` with a warm daemon (its first, cold one timed apart)
 * against `ninja -n` and `make -n`. A loader table sized from the files
 * alone once hung here (issue 36). --rules-only runs just this case.
 * The issue's targets are printed with every table; missing one is not an
 * error. Single-threaded; children are reaped before each case ends. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_store.h"
#include "../common/benchutil.h"

#define PROG "bench_engine"

#define GROUP 10            /* inputs of a cat step */
#define YAML_CHUNK 1000     /* cat assets a *.kiln.yaml */
#define MAX_N 100000        /* five-digit names; the bundle's command line */
#define BIG_N 100000
#define ARG_STR_MAX 131072  /* Linux's MAX_ARG_STRLEN: ninja and make pass a
                               command as one argument of /bin/sh -c */
#define PROFILE "default"
#define CAT_SH "exec cat \"$@\" > \"$0\""
#define MAXSIZES 8
#define NAME_LEN 32         /* "src/f%05ld.txt" and the like, with room */

extern char **environ;

enum side { S_KILN, S_NINJA, S_MAKE, S_FLOOR, NSIDES };
static const char *const side_names[NSIDES] = { "kiln", "ninja", "make", "floor" };
enum kase { C_FULL, C_NOOP, C_ONE, C_RESTORE, NCASES };
static const char *const case_names[NCASES] = {
	"full build", "no-op", "one change", "restore"
};

struct cfg {
	const char *scratch;
	const char *kiln;       /* the kiln binary */
	int jobs, big;
	long sizes[MAXSIZES];
	int nsizes;
	int have_ninja;
	char cp_path[PATH_MAX], sh_path[PATH_MAX]; /* the floor's programs */
	char ninja_ver[128], make_ver[128], kiln_ver[128];
	int failed;             /* a bundle mismatch: exit 1 at the end */
	int keep;               /* KILN_BENCH_KEEP: leave the projects */
	int gen_only;           /* --gen-only: write the projects, run nothing */
	long big_n;             /* --big's N (KILN_BENCH_ENGINE_BIG_N, for tests) */
	long rules, rules_n;    /* the rules × files case: R rules, R × F steps */
	int rules_only;         /* --rules-only: that case alone */
};

/* One N: its four project folders, what the bundle must hold, the figures. */
struct proj {
	long n, ngroups;
	int big;                /* --big's N: full builds once, no floor */
	int reps[NCASES];
	char root[NSIDES][PATH_MAX];
	int *rev;               /* each source's revision */
	char *expect;           /* the bundle's bytes */
	size_t expect_len;
	char kiln_bundle[PATH_MAX];
	int kiln_ok;
	char kiln_why[600];
	long hwm_kib, rss_kib;  /* the daemon's, -1 unknown */
	double load[2];         /* 1-minute load average before and after */
	struct series fig[NCASES][NSIDES];
	int nbad[NCASES][NSIDES]; /* runs that left a wrong bundle */
};

/* ---- running programs ---------------------------------------------------- */

/* Run argv (argv[0] looked up on PATH) in cwd with stdout to /dev/null and
 * stderr to errfile, at most timeout seconds (then it is killed). Returns
 * the wall time of spawn+wait; *status gets the wait status, -1 when it
 * timed out. */
static double run_prog(char *const argv[], const char *cwd, const char *errfile,
                       double timeout, int *status)
{
	posix_spawn_file_actions_t fa;
	struct pollfd pfd;
	double t0, t1;
	pid_t pid;
	int rv, fd, timed_out = 0;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (cwd != NULL)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	t0 = now();
	if ((rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ)) != 0)
		die("spawn %s: %s", argv[0], strerror(rv));
	posix_spawn_file_actions_destroy(&fa);
	/* A pidfd turns readable when the child exits: a timeout without
	 * polling waitpid, so short runs are timed exactly. */
	if ((fd = (int)syscall(SYS_pidfd_open, pid, 0)) >= 0) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		while ((rv = poll(&pfd, 1, (int)(timeout * 1000))) < 0 && errno == EINTR)
			;
		if (rv == 0) {
			kill(pid, SIGKILL);
			timed_out = 1;
		}
		close(fd);
	}
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	t1 = now();
	if (timed_out)
		*status = -1;
	return t1 - t0;
}

/* The first line of file into buf ("" when it is empty or missing). */
static void first_line(const char *file, char *buf, size_t len)
{
	FILE *f = fopen(file, "re");

	buf[0] = '\0';
	if (f != NULL) {
		if (fgets(buf, (int)len, f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* "exited 2: <first line of its stderr>", "killed by signal 9", ... */
static void why_failed(int status, double timeout, const char *errfile, char *buf,
                       size_t len)
{
	char line[300];

	first_line(errfile, line, sizeof line);
	if (status == -1)
		snprintf(buf, len, "timed out after %.0f s", timeout);
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited %d%s%s", WEXITSTATUS(status), *line ? ": " : "", line);
	else
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
}

/* Run a peer or a helper that must succeed; returns its wall time. */
static double run_must(char *const argv[], const char *cwd, const char *errfile,
                       double timeout)
{
	char why[400];
	int status;
	double t = run_prog(argv, cwd, errfile, timeout, &status);

	if (status != 0) {
		why_failed(status, timeout, errfile, why, sizeof why);
		die("%s in %s: %s", argv[0], cwd ? cwd : ".", why);
	}
	return t;
}

/* The first line of `prog --version`. */
static void prog_version(const char *prog, const char *scratch, char *buf, size_t len)
{
	char *argv[] = { (char *)prog, "--version", NULL };
	char out[PATH_MAX];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status;

	path_join(out, sizeof out, scratch, "version.out");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	snprintf(buf, len, "?");
	if (posix_spawnp(&pid, prog, &fa, NULL, argv, environ) == 0 &&
	    waitpid(pid, &status, 0) == pid && status == 0)
		first_line(out, buf, len);
	posix_spawn_file_actions_destroy(&fa);
	unlink(out);
}

/* The full path of name on PATH into buf; 0, or -1 when it is not there. */
static int find_on_path(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p, *end;

	for (p = path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		snprintf(buf, len, "%.*s/%s", (int)(end - p), p, name);
		if (end > p && access(buf, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* rm -rf the NULL-terminated list of paths, relative to cwd. */
static void rm_rf(const struct cfg *c, const char *cwd, ...)
{
	char *argv[8] = { "rm", "-rf", "--" };
	char err[PATH_MAX];
	va_list ap;
	int n = 3;

	va_start(ap, cwd);
	while (n < 7 && (argv[n] = va_arg(ap, char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	path_join(err, sizeof err, c->scratch, "rm.err");
	run_must(argv, cwd, err, 600);
}

/* ---- the generated project ------------------------------------------------ */

/* Source i's text at revision rev; returns its length. */
static int src_text(char *buf, size_t len, long i, int rev)
{
	return snprintf(buf, len, "f%05ld rev %d: a few dozen bytes of source text\n", i, rev);
}

static void write_source(const char *root, long i, int rev)
{
	char rel[32], text[96];
	int n = src_text(text, sizeof text, i, rev);
	FILE *f;

	snprintf(rel, sizeof rel, "src/f%05ld.txt", i);
	f = open_out(root, rel);
	fwrite(text, 1, (size_t)n, f);
	close_out(f, rel);
}

/* The bundle's bytes: every source's text in order (the groups are runs of
 * consecutive sources, the bundle takes the groups in order). */
static void make_expect(struct proj *p)
{
	char text[96];
	size_t off = 0;
	long i;

	for (i = 0; i < p->n; i++)
		off += (size_t)src_text(text, sizeof text, i, p->rev[i]);
	free(p->expect);
	if ((p->expect = malloc(off + 1)) == NULL)
		die("out of memory");
	for (off = 0, i = 0; i < p->n; i++)
		off += (size_t)src_text(p->expect + off, 96, i, p->rev[i]);
	p->expect_len = off;
}

/* The members of group g: sources [*lo, *hi). */
static void group_range(const struct proj *p, long g, long *lo, long *hi)
{
	*lo = g * GROUP;
	*hi = *lo + GROUP < p->n ? *lo + GROUP : p->n;
}

static void write_kiln(const struct proj *p, const char *root)
{
	char rel[64];
	FILE *f = open_out(root, "kiln.yaml");
	const char *mat = getenv("KILN_BENCH_MATERIALIZE");
	long g, i, lo, hi;

	fprintf(f, "# kiln.yaml — generated by bench/engine/bench_engine.c: %ld sources\n"
	        "kiln: 1\nproject: bench-engine\nsources: [src]\n", p->n);
	/* how build/ gets its files (copy, hardlink); not given: kiln's
	 * default, and a kiln from before the setting reads the file */
	if (mat != NULL && mat[0] != '\0')
		fprintf(f, "materialize: %s\n", mat);
	fprintf(f, "\n"
	        "profiles:\n  " PROFILE ":\n\n"
	        "tools:\n"
	        "  copy:\n    run: [cp, \"${in}\", \"${out}\"]\n"
	        "  concat:\n    run: [sh, -c, '" CAT_SH "', \"${out}\", \"${in...}\"]\n\n"
	        "rules:\n  - match: \"src/*.txt\"\n    url: \"cp/${match.name}\"\n"
	        "    tool: copy\n\n"
	        "# the cat steps are in src/cat*.kiln.yaml\n"
	        "assets:\n  - url: bundle\n    tool: concat\n    inputs: [\"@cat/**\"]\n");
	close_out(f, "kiln.yaml");
	for (g = 0; g < p->ngroups; g++) {
		if (g % YAML_CHUNK == 0) {
			snprintf(rel, sizeof rel, "src/cat%03ld.kiln.yaml", g / YAML_CHUNK);
			f = open_out(root, rel);
			fputs("assets:\n", f);
		}
		group_range(p, g, &lo, &hi);
		fprintf(f, "  - {url: cat/g%05ld, tool: concat, inputs: [", g);
		for (i = lo; i < hi; i++)
			fprintf(f, "%s\"@cp/f%05ld\"", i > lo ? ", " : "", i);
		fputs("]}\n", f);
		if (g % YAML_CHUNK == YAML_CHUNK - 1 || g == p->ngroups - 1)
			close_out(f, rel);
	}
}

static void write_ninja(const struct proj *p, const char *root)
{
	FILE *f = open_out(root, "build.ninja");
	long g, i, lo, hi;

	fprintf(f, "# generated by bench/engine/bench_engine.c: %ld sources\n"
	        "ninja_required_version = 1.5\n\n"
	        "rule cp\n  command = cp $in $out\n"
	        "rule cat\n  command = sh -c 'exec cat \"$$@\" > \"$$0\"' $out $in\n\n", p->n);
	for (i = 0; i < p->n; i++)
		fprintf(f, "build cp/f%05ld: cp src/f%05ld.txt\n", i, i);
	for (g = 0; g < p->ngroups; g++) {
		group_range(p, g, &lo, &hi);
		fprintf(f, "build cat/g%05ld: cat", g);
		for (i = lo; i < hi; i++)
			fprintf(f, " cp/f%05ld", i);
		fputc('\n', f);
	}
	fputs("build bundle: cat", f);
	for (g = 0; g < p->ngroups; g++)
		fprintf(f, " cat/g%05ld", g);
	fputs("\ndefault bundle\n", f);
	close_out(f, "build.ninja");
}

/* Explicit rules, literal commands; output folders made by order-only
 * prerequisites, as a careful Makefile does. */
static void write_make(const struct proj *p, const char *root)
{
	FILE *f = open_out(root, "Makefile");
	long g, i, lo, hi;

	fprintf(f, "# generated by bench/engine/bench_engine.c: %ld sources\n"
	        "MAKEFLAGS += --no-builtin-rules\n.SUFFIXES:\n\nbundle:", p->n);
	for (g = 0; g < p->ngroups; g++)
		fprintf(f, " cat/g%05ld", g);
	fputs("\n\tsh -c 'exec cat \"$$@\" > \"$$0\"' bundle", f);
	for (g = 0; g < p->ngroups; g++)
		fprintf(f, " cat/g%05ld", g);
	fputc('\n', f);
	for (g = 0; g < p->ngroups; g++) {
		group_range(p, g, &lo, &hi);
		fprintf(f, "cat/g%05ld:", g);
		for (i = lo; i < hi; i++)
			fprintf(f, " cp/f%05ld", i);
		fprintf(f, " | cat\n\tsh -c 'exec cat \"$$@\" > \"$$0\"' cat/g%05ld", g);
		for (i = lo; i < hi; i++)
			fprintf(f, " cp/f%05ld", i);
		fputc('\n', f);
	}
	for (i = 0; i < p->n; i++)
		fprintf(f, "cp/f%05ld: src/f%05ld.txt | cp\n\tcp src/f%05ld.txt cp/f%05ld\n",
		        i, i, i, i);
	fputs("cp cat:\n\tmkdir -p $@\n", f);
	close_out(f, "Makefile");
}

static void gen_project(const struct cfg *c, struct proj *p)
{
	char src[PATH_MAX];
	long i;
	int s;

	for (s = 0; s < NSIDES; s++) {
		if (s == S_FLOOR && p->big)
			continue;
		snprintf(p->root[s], sizeof p->root[s], "%s/n%ld-%s", c->scratch, p->n,
		         side_names[s]);
		make_dir(p->root[s]);
		path_join(src, sizeof src, p->root[s], "src");
		make_dir(src);
		for (i = 0; i < p->n; i++)
			write_source(p->root[s], i, 0);
	}
	write_kiln(p, p->root[S_KILN]);
	write_ninja(p, p->root[S_NINJA]);
	write_make(p, p->root[S_MAKE]);
	make_expect(p);
}

/* ---- the floor ------------------------------------------------------------ */

/* The floor's state: every name once, the ready list, the counts. Tasks
 * are numbered copies 0..n-1, cat steps n..n+ngroups-1, then the bundle. */
struct floor {
	const struct cfg *c;
	const struct proj *p;
	char (*names)[NAME_LEN]; /* src/f.. [0, n), cp/f.. [n, 2n), cat/g.. */
	char **argv;
	long *ready, head, tail;
	long *left;              /* unfinished inputs of cat g; [ngroups]: bundle's */
	pid_t *pids;             /* the running, c->jobs slots (0: free) */
	long *tasks;
};

static void floor_init(struct floor *f, const struct cfg *c, const struct proj *p)
{
	long i, g, lo, hi;

	f->c = c;
	f->p = p;
	f->head = f->tail = 0;
	f->names = malloc(sizeof *f->names * (size_t)(2 * p->n + p->ngroups));
	f->argv = malloc(sizeof *f->argv * (size_t)(p->ngroups + GROUP + 8));
	f->ready = malloc(sizeof *f->ready * (size_t)(p->n + p->ngroups + 1));
	f->left = malloc(sizeof *f->left * (size_t)(p->ngroups + 1));
	f->pids = calloc((size_t)c->jobs, sizeof *f->pids);
	f->tasks = calloc((size_t)c->jobs, sizeof *f->tasks);
	if (!f->names || !f->argv || !f->ready || !f->left || !f->pids || !f->tasks)
		die("floor: out of memory");
	for (i = 0; i < p->n; i++) {
		snprintf(f->names[i], NAME_LEN, "src/f%05ld.txt", i);
		snprintf(f->names[p->n + i], NAME_LEN, "cp/f%05ld", i);
		f->ready[f->tail++] = i;
	}
	for (g = 0; g < p->ngroups; g++) {
		snprintf(f->names[2 * p->n + g], NAME_LEN, "cat/g%05ld", g);
		group_range(p, g, &lo, &hi);
		f->left[g] = hi - lo;
	}
	f->left[p->ngroups] = p->ngroups;
}

static void floor_free(struct floor *f)
{
	free(f->names);
	free(f->argv);
	free(f->ready);
	free(f->left);
	free(f->pids);
	free(f->tasks);
}

/* Task t's argv into f->argv: exactly what kiln, ninja and make run. */
static void floor_argv(struct floor *f, long t)
{
	const struct proj *p = f->p;
	char **a = f->argv;
	long g, i, lo, hi;

	if (t < p->n) {
		*a++ = (char *)f->c->cp_path;
		*a++ = f->names[t];
		*a++ = f->names[p->n + t];
	} else {
		*a++ = (char *)f->c->sh_path;
		*a++ = "-c";
		*a++ = CAT_SH;
		if (t < p->n + p->ngroups) {
			g = t - p->n;
			*a++ = f->names[2 * p->n + g];
			group_range(p, g, &lo, &hi);
			for (i = lo; i < hi; i++)
				*a++ = f->names[p->n + i];
		} else {
			*a++ = "bundle";
			for (g = 0; g < p->ngroups; g++)
				*a++ = f->names[2 * p->n + g];
		}
	}
	*a = NULL;
}

/* The output of task t (copies and cat steps: names[n + t]). */
static const char *floor_out(const struct floor *f, long t)
{
	return t < f->p->n + f->p->ngroups ? f->names[f->p->n + t] : "bundle";
}

/* Task t finished: what it unblocks joins the ready list. */
static void floor_done(struct floor *f, long t)
{
	const struct proj *p = f->p;

	if (t < p->n && --f->left[t / GROUP] == 0)
		f->ready[f->tail++] = p->n + t / GROUP;
	else if (t >= p->n && t < p->n + p->ngroups && --f->left[p->ngroups] == 0)
		f->ready[f->tail++] = p->n + p->ngroups;
}

/* Every command of the graph, spawned by argv (posix_spawn, no shell) in
 * the floor's folder with at most c->jobs running, in dependency order.
 * Returns the wall time. */
static double floor_build(const struct cfg *c, const struct proj *p)
{
	long ntasks = p->n + p->ngroups + 1, done = 0;
	int nrun = 0, k, rv, status, cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct floor f;
	double t0;
	pid_t pid;

	floor_init(&f, c, p);
	if (cwd < 0 || chdir(p->root[S_FLOOR]) != 0)
		die("chdir %s: %s", p->root[S_FLOOR], strerror(errno));
	make_dir("cp");
	make_dir("cat");
	t0 = now();
	while (done < ntasks) {
		for (; nrun < c->jobs && f.head < f.tail; nrun++) {
			for (k = 0; f.pids[k] != 0; k++)
				;
			f.tasks[k] = f.ready[f.head++];
			floor_argv(&f, f.tasks[k]);
			if ((rv = posix_spawn(&f.pids[k], f.argv[0], NULL, NULL, f.argv, environ)) != 0)
				die("floor: spawn %s: %s", f.argv[0], strerror(rv));
		}
		if ((pid = waitpid(-1, &status, 0)) < 0) {
			if (errno == EINTR)
				continue;
			die("floor: waitpid: %s", strerror(errno));
		}
		for (k = 0; k < c->jobs && f.pids[k] != pid; k++)
			;
		if (k == c->jobs)
			continue; /* not one of ours */
		if (status != 0)
			die("floor: the step making %s failed (status %d)",
			    floor_out(&f, f.tasks[k]), status);
		f.pids[k] = 0;
		nrun--;
		done++;
		floor_done(&f, f.tasks[k]);
	}
	t0 = now() - t0;
	if (fchdir(cwd) != 0)
		die("fchdir: %s", strerror(errno));
	close(cwd);
	floor_free(&f);
	return t0;
}

/* ---- kiln's daemon ------------------------------------------------------- */

/* The daemon's pid from <root>/.kiln/kilnd.pid when that process is a live
 * kilnd, else 0. */
static pid_t kilnd_pid(const char *root)
{
	char path[PATH_MAX + 32], comm[64];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/.kiln/kilnd.pid", root);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	first_line(path, comm, sizeof comm);
	return strcmp(comm, "kilnd") == 0 ? (pid_t)pid : 0;
}

/* VmHWM and VmRSS of the project's daemon, in KiB (-1: no daemon). */
static void kilnd_mem(const char *root, long *hwm, long *rss)
{
	char path[64], line[256];
	pid_t pid = kilnd_pid(root);
	FILE *f;

	*hwm = *rss = -1;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if (pid == 0 || (f = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		sscanf(line, "VmHWM: %ld", hwm);
		sscanf(line, "VmRSS: %ld", rss);
	}
	fclose(f);
}

/* `kiln stop` in the project; when a kilnd still runs after that, SIGTERM
 * then SIGKILL to the pid in its pid file (it is ours: we started it). */
static void kilnd_stop(const struct cfg *c, const char *root)
{
	char *argv[] = { (char *)c->kiln, "stop", NULL };
	char err[PATH_MAX];
	pid_t pid;
	int status, i;

	if (kilnd_pid(root) == 0)
		return;
	path_join(err, sizeof err, c->scratch, "kiln-stop.err");
	run_prog(argv, root, err, 30, &status);
	for (i = 0; i < 100 && (pid = kilnd_pid(root)) != 0; i++) {
		kill(pid, i < 50 ? SIGTERM : SIGKILL);
		usleep(100000);
	}
}

/* ---- one build of one side ----------------------------------------------- */

/* Generous: about 30x what ninja needs a step here. */
static double build_timeout(const struct proj *p)
{
	return 120 + 0.1 * (double)(p->n + p->ngroups);
}

/* Make side s's tree as if nothing had been built. */
static void clean(const struct cfg *c, struct proj *p, int s)
{
	if (s == S_KILN) {
		kilnd_stop(c, p->root[s]);
		rm_rf(c, p->root[s], "build", ".kiln", NULL);
	} else if (s == S_NINJA) {
		rm_rf(c, p->root[s], "cp", "cat", "bundle", ".ninja_log", ".ninja_deps", NULL);
	} else {
		rm_rf(c, p->root[s], "cp", "cat", "bundle", NULL);
	}
}

static char found_bundle[PATH_MAX]; /* nftw's callback has no argument */

static int bundle_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	if (type != FTW_F || strcmp(path + ftw->base, "bundle") != 0)
		return 0;
	snprintf(found_bundle, sizeof found_bundle, "%s", path);
	return 1;
}

/* kiln's bundle: build/default/bundle, where the engine is meant to put
 * it; when it is not there, the first file named bundle under build/ (and
 * a note saying where). */
static void kiln_find_bundle(struct proj *p)
{
	char build_dir[PATH_MAX];
	struct stat st;

	path_join(p->kiln_bundle, sizeof p->kiln_bundle, p->root[S_KILN],
	          "build/" PROFILE "/bundle");
	if (stat(p->kiln_bundle, &st) == 0)
		return;
	path_join(build_dir, sizeof build_dir, p->root[S_KILN], "build");
	found_bundle[0] = '\0';
	if (nftw(build_dir, bundle_visit, 16, FTW_PHYS) == 1) {
		printf("note: kiln's bundle is %s, not build/" PROFILE "/bundle\n",
		       found_bundle + strlen(p->root[S_KILN]) + 1);
		snprintf(p->kiln_bundle, sizeof p->kiln_bundle, "%s", found_bundle);
	}
}

/* Compare side s's bundle with p->expect after a run of case k; the first
 * difference of a side and case is printed loudly, every one is counted
 * and fails the run. */
static void check_bundle(struct cfg *c, struct proj *p, int s, int k)
{
	char path[PATH_MAX], got_hex[KILN_ID_HEX_LEN + 1], want_hex[KILN_ID_HEX_LEN + 1];
	kiln_id got_id, want_id;
	struct stat st;
	char *buf = NULL;
	ssize_t n = -1;
	int fd;

	if (s == S_KILN && p->kiln_bundle[0] == '\0')
		kiln_find_bundle(p);
	if (s == S_KILN)
		snprintf(path, sizeof path, "%s", p->kiln_bundle);
	else
		path_join(path, sizeof path, p->root[s], "bundle");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 && fstat(fd, &st) == 0 &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL)
		n = read(fd, buf, (size_t)st.st_size + 1);
	if (fd >= 0)
		close(fd);
	if (n == (ssize_t)p->expect_len && memcmp(buf, p->expect, p->expect_len) == 0) {
		free(buf);
		return;
	}
	kiln_id_of_buf(p->expect, p->expect_len, &want_id);
	kiln_id_to_hex(&want_id, want_hex);
	if (n >= 0) {
		kiln_id_of_buf(buf, (size_t)n, &got_id);
		kiln_id_to_hex(&got_id, got_hex);
	}
	c->failed = 1;
	if (p->nbad[k][s]++ > 0) {
		free(buf);
		return;
	}
	printf("!! BUNDLE MISMATCH: %s, N=%ld, after %s: %s holds %zd bytes (xxh128 %.16s), "
	       "want %zu bytes (xxh128 %.16s)\n", side_names[s], p->n, case_names[k], path, n,
	       n >= 0 ? got_hex : "-", p->expect_len, want_hex);
	fflush(stdout);
	free(buf);
}

/* One timed build of side s for case k; 0, or -1 when kiln failed (kiln
 * is then unavailable for the rest of this N). A peer failing is fatal. */
static int build(struct cfg *c, struct proj *p, int s, int k)
{
	char jobs[16], err[PATH_MAX], why[500];
	char *kiln_argv[] = { (char *)c->kiln, "build", "-C", p->root[S_KILN], "-p", PROFILE,
	                      "-j", jobs, NULL };
	char *ninja_argv[] = { "ninja", "-C", p->root[S_NINJA], "-j", jobs, NULL };
	char *make_argv[] = { "make", "-C", p->root[S_MAKE], "-j", jobs, NULL };
	double t, timeout = build_timeout(p);
	int status;

	snprintf(jobs, sizeof jobs, "%d", c->jobs);
	snprintf(err, sizeof err, "%s/%s.err", c->scratch, side_names[s]);
	if (s == S_FLOOR) {
		t = floor_build(c, p);
	} else if (s == S_KILN) {
		t = run_prog(kiln_argv, p->root[S_KILN], err, timeout, &status);
		if (status != 0) {
			why_failed(status, timeout, err, why, sizeof why);
			snprintf(p->kiln_why, sizeof p->kiln_why, "%s: `kiln build` %s",
			         case_names[k], why);
			p->kiln_ok = 0;
			return -1;
		}
	} else {
		t = run_must(s == S_NINJA ? ninja_argv : make_argv, NULL, err, timeout);
	}
	series_add(&p->fig[k][s], t);
	check_bundle(c, p, s, k);
	return 0;
}

/* ---- the cases ----------------------------------------------------------- */

/* The sides that take part in case k, in rotated order for run r. */
static int sides_of(const struct cfg *c, const struct proj *p, int k, int r, int *out)
{
	int all[NSIDES], n = 0, i;

	if (p->kiln_ok)
		all[n++] = S_KILN;
	if (k != C_RESTORE) {
		if (c->have_ninja)
			all[n++] = S_NINJA;
		all[n++] = S_MAKE;
		if (k == C_FULL && !p->big)
			all[n++] = S_FLOOR;
	}
	for (i = 0; i < n; i++)
		out[i] = all[(r + i) % n];
	return n;
}

static void run_case(struct cfg *c, struct proj *p, int k)
{
	int order[NSIDES], r, i, n, s;
	long src;

	fprintf(stderr, "  .. N=%ld: %s, %d run%s a side\n", p->n, case_names[k], p->reps[k],
	        p->reps[k] == 1 ? "" : "s");
	for (r = 0; r < p->reps[k]; r++) {
		if (k == C_ONE) {
			/* Spread the changes over the sources; the same one everywhere. */
			src = ((long)r * 7919 + p->n / 2) % p->n;
			p->rev[src]++;
			for (s = S_KILN; s <= S_MAKE; s++)
				write_source(p->root[s], src, p->rev[src]);
			make_expect(p);
		}
		n = sides_of(c, p, k, r, order);
		for (i = 0; i < n; i++) {
			s = order[i];
			if (s == S_KILN && !p->kiln_ok)
				continue; /* failed earlier in this run */
			if (k == C_FULL)
				clean(c, p, s);
			else if (k == C_RESTORE)
				rm_rf(c, p->root[s], "build", NULL);
			build(c, p, s, k);
		}
	}
}

/* Whether kiln can take part at all: the binary runs and the generated
 * description checks clean. */
static void kiln_probe(const struct cfg *c, struct proj *p)
{
	char *argv[] = { (char *)c->kiln, "check", "-q", "-C", p->root[S_KILN], NULL };
	char err[PATH_MAX], why[400];
	int status;

	p->kiln_ok = 0;
	if (access(c->kiln, X_OK) != 0) {
		snprintf(p->kiln_why, sizeof p->kiln_why, "%s: %s", c->kiln, strerror(errno));
		return;
	}
	path_join(err, sizeof err, c->scratch, "kiln-check.err");
	run_prog(argv, NULL, err, 600, &status);
	if (status != 0) {
		why_failed(status, 600, err, why, sizeof why);
		snprintf(p->kiln_why, sizeof p->kiln_why, "`kiln check` of the generated "
		         "project %s", why);
		return;
	}
	p->kiln_ok = 1;
}

/* ---- the table ------------------------------------------------------------ */

/* Seconds as "1.23 s", "456 ms", "12.3 ms", "1.23 ms" by size. */
static void fmt_secs(char *buf, size_t len, double v, double ref)
{
	if (ref >= 10)
		snprintf(buf, len, "%.1f", v);
	else if (ref >= 1)
		snprintf(buf, len, "%.2f", v);
	else if (ref >= 0.1)
		snprintf(buf, len, "%.0f", v * 1e3);
	else if (ref >= 0.01)
		snprintf(buf, len, "%.1f", v * 1e3);
	else
		snprintf(buf, len, "%.2f", v * 1e3);
}

/* "456 ms (440–470)": the median and, over several runs, min–max. */
static void fmt_cell(char *buf, size_t len, const struct series *s)
{
	char m[32], lo_s[32], hi_s[32];
	double med, lo, hi;

	series_stats(s, &med, &lo, &hi);
	fmt_secs(m, sizeof m, med, med);
	if (s->n == 1) {
		snprintf(buf, len, "%s %s", m, med >= 1 ? "s" : "ms");
		return;
	}
	fmt_secs(lo_s, sizeof lo_s, lo, med);
	fmt_secs(hi_s, sizeof hi_s, hi, med);
	snprintf(buf, len, "%s %s (%s–%s)", m, med >= 1 ? "s" : "ms", lo_s, hi_s);
}

static double median(const struct series *s)
{
	double med, lo, hi;

	series_stats(s, &med, &lo, &hi);
	return med;
}

/* kiln/other as "0.93", or "-" when either is missing. */
static void fmt_ratio(char *buf, size_t len, const struct series *k, const struct series *o)
{
	if (k->n == 0 || o->n == 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f", median(k) / median(o));
}

static void print_row(const struct proj *p, int k)
{
	char cell[128], runs[24];
	int s;

	put_col(case_names[k], 12);
	snprintf(runs, sizeof runs, "%d%s", p->reps[k], k == C_FULL && p->big ? " setup" : "");
	put_col(runs, 7);
	for (s = 0; s < NSIDES; s++) {
		if (p->fig[k][s].n > 0)
			fmt_cell(cell, sizeof cell, &p->fig[k][s]);
		else if (s == S_KILN)
			snprintf(cell, sizeof cell, "n/a");
		else
			snprintf(cell, sizeof cell, "-");
		put_col(cell, 21);
	}
	fmt_ratio(cell, sizeof cell, &p->fig[k][S_KILN], &p->fig[k][S_NINJA]);
	put_col(cell, 10);
	fmt_ratio(cell, sizeof cell, &p->fig[k][S_KILN], &p->fig[k][S_FLOOR]);
	puts(cell);
}

/* One target: "full build kiln/ninja 0.93 <= 0.8 MISSED". */
static void print_target(const char *what, const struct series *k, const struct series *o,
                         double bound)
{
	double r;

	if (k->n == 0 || o->n == 0) {
		printf("  %-30s <= %.1f   n/a\n", what, bound);
		return;
	}
	r = median(k) / median(o);
	printf("  %-30s <= %.1f   %.2f  %s\n", what, bound, r, r <= bound ? "met" : "MISSED");
}

static void print_table(const struct cfg *c, const struct proj *p)
{
	char n[32], g[32], steps[32];
	int k, s;

	fmt_count(n, sizeof n, (double)p->n);
	fmt_count(g, sizeof g, (double)p->ngroups);
	fmt_count(steps, sizeof steps, (double)(p->n + p->ngroups + 1));
	printf("\nN=%s: %s cp + %s cat + 1 bundle = %s steps, -j%d\n", n, n, g, steps, c->jobs);
	put_col("case", 12);
	put_col("runs", 7);
	for (s = 0; s < NSIDES; s++)
		put_col(side_names[s], 21);
	put_col("kiln/ninja", 10);
	puts("kiln/floor");
	for (k = 0; k < NCASES; k++)
		print_row(p, k);
	put_col("daemon mem", 20);
	if (p->hwm_kib >= 0)
		printf("peak (VmHWM) %.1f MiB, at the end (VmRSS) %.1f MiB\n",
		       p->hwm_kib / 1024.0, p->rss_kib / 1024.0);
	else
		puts("n/a");
	if (!p->kiln_ok)
		printf("kiln: not available (%s)\n", p->kiln_why);
	for (k = 0; k < NCASES; k++)
		for (s = 0; s < NSIDES; s++)
			if (p->nbad[k][s] > 0)
				printf("!! %s: a wrong bundle after %d of %d %s runs (timed anyway)\n",
				       side_names[s], p->nbad[k][s], p->fig[k][s].n, case_names[k]);
	if (p->big)
		printf("(full builds: run once to set up, no floor; figures for information)\n");
	printf("load average (1 min) before and after the runs: %.2f, %.2f\n", p->load[0],
	       p->load[1]);
	printf("targets (issue), median ratios:\n");
	if (!p->big) {
		print_target("full build, kiln/ninja", &p->fig[C_FULL][S_KILN],
		             &p->fig[C_FULL][S_NINJA], 0.8);
		print_target("full build, kiln/floor", &p->fig[C_FULL][S_KILN],
		             &p->fig[C_FULL][S_FLOOR], 1.2);
	}
	if (p->n >= 10000) {
		print_target("no-op, kiln/ninja", &p->fig[C_NOOP][S_KILN],
		             &p->fig[C_NOOP][S_NINJA], 0.5);
		print_target("one change, kiln/ninja", &p->fig[C_ONE][S_KILN],
		             &p->fig[C_ONE][S_NINJA], 0.5);
	}
	if (p->n >= BIG_N)
		printf("  %-30s <  150 MiB %s\n", "daemon peak RSS",
		       p->hwm_kib < 0 ? "n/a" : p->hwm_kib < 150 * 1024 ? "met" : "MISSED");
	fflush(stdout);
}

/* The 1-minute load average: other work on the machine skews the figures. */
static double loadavg(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "re");

	if (f != NULL) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

/* ---- one N ----------------------------------------------------------------- */

static void proj_init(struct proj *p, long n, int big)
{
	int k, s;

	memset(p, 0, sizeof *p);
	p->n = n;
	p->ngroups = (n + GROUP - 1) / GROUP;
	p->big = big;
	p->hwm_kib = p->rss_kib = -1;
	p->reps[C_FULL] = big ? 1 : n <= 2000 ? 3 : 1;
	p->reps[C_NOOP] = p->reps[C_ONE] = big ? 3 : 5;
	p->reps[C_RESTORE] = big ? 1 : 3;
	/* ninja and make hand the bundle's command to /bin/sh -c as one
	 * argument: " cat/gNNNNN" a group. */
	if (p->ngroups * 11 + 100 >= ARG_STR_MAX)
		die("N=%ld: the bundle's command line would pass Linux's %d-byte bound",
		    n, ARG_STR_MAX);
	if ((p->rev = calloc((size_t)n, sizeof *p->rev)) == NULL)
		die("out of memory");
	for (k = 0; k < NCASES; k++)
		for (s = 0; s < NSIDES; s++)
			p->fig[k][s].label = side_names[s];
}

static void run_size(struct cfg *c, long n, int big)
{
	static struct proj p; /* the series are large */
	double t0 = now();
	int k, s;

	proj_init(&p, n, big);
	fprintf(stderr, "  .. N=%ld: generating the projects%s\n", n,
	        big ? " (the full builds run once to set up: many minutes)" : "");
	gen_project(c, &p);
	fprintf(stderr, "  .. generated in %.1f s\n", now() - t0);
	if (c->gen_only) {
		for (s = 0; s < NSIDES; s++)
			if (p.root[s][0] != '\0')
				printf("%s\n", p.root[s]);
		return;
	}
	kiln_probe(c, &p);
	p.load[0] = loadavg();
	for (k = 0; k < NCASES; k++)
		run_case(c, &p, k);
	p.load[1] = loadavg();
	kilnd_mem(p.root[S_KILN], &p.hwm_kib, &p.rss_kib);
	kilnd_stop(c, p.root[S_KILN]);
	print_table(c, &p);
	for (s = 0; s < NSIDES && !c->keep; s++)
		if (p.root[s][0] != '\0')
			rm_rf(c, c->scratch, p.root[s], NULL);
	free(p.rev);
	free(p.expect);
}

/* ---- rules × files ----------------------------------------------------------- */

enum rcase { R_CHECK, R_DRY_COLD, R_DRY, NRCASES };
static const char *const rcase_names[NRCASES] = {
	"check", "dry run, cold", "dry run"
};

/* The project of R rules over F files for side s (kiln, ninja, make). */
static void rules_write(const char *root, int s, long r, long f)
{
	FILE *o;
	long k, i;

	if (s == S_KILN) {
		o = open_out(root, "kiln.yaml");
		fprintf(o, "# generated by bench/engine/bench_engine.c: %ld rules x %ld files\n"
		        "kiln: 1\nproject: bench-rules\nsources: [src]\nprofiles:\n  " PROFILE
		        ":\ntools:\n  copy: { run: [cp, \"${in}\", \"${out}\"] }\nrules:\n", r, f);
		for (k = 0; k < r; k++)
			fprintf(o, "  - { match: \"src/*.txt\", url: \"r%ld/${match.name}\", "
			        "tool: copy }\n", k);
		close_out(o, "kiln.yaml");
	} else if (s == S_NINJA) {
		o = open_out(root, "build.ninja");
		fputs("rule cp\n  command = cp $in $out\n", o);
		for (k = 0; k < r; k++)
			for (i = 0; i < f; i++)
				fprintf(o, "build r%ld/f%05ld: cp src/f%05ld.txt\n", k, i, i);
		close_out(o, "build.ninja");
	} else {
		o = open_out(root, "Makefile");
		fputs("MAKEFLAGS += --no-builtin-rules\n.SUFFIXES:\nall:", o);
		for (k = 0; k < r; k++)
			for (i = 0; i < f; i++)
				fprintf(o, " r%ld/f%05ld", k, i);
		fputc('\n', o);
		for (k = 0; k < r; k++)
			for (i = 0; i < f; i++)
				fprintf(o, "r%ld/f%05ld: src/f%05ld.txt\n\tcp src/f%05ld.txt r%ld/f%05ld\n",
				        k, i, i, i, k, i);
		close_out(o, "Makefile");
	}
}

/* One timed run of argv in root, into fig; a failure is kept in why. */
static void rules_run(const struct cfg *c, char *const argv[], const char *root,
                      struct series *fig, char *why, size_t len)
{
	char err[PATH_MAX];
	int status;
	double t;

	path_join(err, sizeof err, c->scratch, "rules.err");
	t = run_prog(argv, root, err, 600, &status);
	if (status != 0) {
		if (why[0] == '\0')
			why_failed(status, 600, err, why, len);
		return;
	}
	series_add(fig, t);
}

static void rules_row(int k, const struct series fig[NSIDES])
{
	char cell[128];
	int s;

	put_col(rcase_names[k], 15);
	for (s = S_KILN; s <= S_MAKE; s++) {
		if (fig[s].n > 0)
			fmt_cell(cell, sizeof cell, &fig[s]);
		else
			snprintf(cell, sizeof cell, "-");
		put_col(cell, 21);
	}
	fmt_ratio(cell, sizeof cell, &fig[S_KILN], &fig[S_NINJA]);
	put_col(cell, 12);
	fmt_ratio(cell, sizeof cell, &fig[S_KILN], &fig[S_MAKE]);
	puts(cell);
}

/* The rules × files case: c->rules rules over c->rules_n / c->rules files. */
static void rules_size(struct cfg *c)
{
	static struct series fig[NRCASES][NSIDES];
	char root[NSIDES][PATH_MAX], src[PATH_MAX], why[600] = "", nsteps[32], nfiles[32];
	long f = c->rules_n / c->rules, i;
	int s, k, rep;

	memset(fig, 0, sizeof fig);
	fprintf(stderr, "  .. rules x files: %ld rules over %ld files\n", c->rules, f);
	for (s = S_KILN; s <= S_MAKE; s++) {
		snprintf(root[s], sizeof root[s], "%s/rules-%s", c->scratch, side_names[s]);
		make_dir(root[s]);
		path_join(src, sizeof src, root[s], "src");
		make_dir(src);
		for (i = 0; i < f; i++)
			write_source(root[s], i, 0);
		rules_write(root[s], s, c->rules, f);
		for (k = 0; k < NRCASES; k++)
			fig[k][s].label = side_names[s];
	}
	char *check[] = { (char *)c->kiln, "check", "-q", NULL };
	char *dry[] = { (char *)c->kiln, "build", "-n", "-p", PROFILE, NULL };
	char *ninja_t[] = { "ninja", "-t", "targets", "all", NULL };
	char *ninja_n[] = { "ninja", "-n", NULL };
	char *make_n[] = { "make", "-n", NULL };
	for (rep = 0; rep < 5; rep++) {
		rules_run(c, check, root[S_KILN], &fig[R_CHECK][S_KILN], why, sizeof why);
		if (c->have_ninja)
			rules_run(c, ninja_t, root[S_NINJA], &fig[R_CHECK][S_NINJA], why, sizeof why);
	}
	for (rep = 0; rep < 3; rep++) {
		kilnd_stop(c, root[S_KILN]);   /* cold: the daemon starts and loads */
		rules_run(c, dry, root[S_KILN], &fig[R_DRY_COLD][S_KILN], why, sizeof why);
		rules_run(c, dry, root[S_KILN], &fig[R_DRY][S_KILN], why, sizeof why);
		if (c->have_ninja)
			rules_run(c, ninja_n, root[S_NINJA], &fig[R_DRY][S_NINJA], why, sizeof why);
		rules_run(c, make_n, root[S_MAKE], &fig[R_DRY][S_MAKE], why, sizeof why);
	}
	kilnd_stop(c, root[S_KILN]);
	fmt_count(nsteps, sizeof nsteps, (double)(f * c->rules));
	fmt_count(nfiles, sizeof nfiles, (double)f);
	printf("\nrules x files: %ld rules over the same %s files = %s steps, nothing built\n",
	       c->rules, nfiles, nsteps);
	printf("  check: kiln check / ninja -t targets all; dry run: kiln build -n "
	       "(warm daemon; cold: started\n  and loading) / ninja -n / make -n\n");
	put_col("case", 15);
	for (s = S_KILN; s <= S_MAKE; s++)
		put_col(side_names[s], 21);
	put_col("kiln/ninja", 12);
	puts("kiln/make");
	for (k = 0; k < NRCASES; k++)
		rules_row(k, fig[k]);
	if (why[0] != '\0')
		printf("failed: %s\n", why);
	if (fig[R_CHECK][S_KILN].n > 0)
		printf("target (issue 36): kiln check of %s steps < 2 s: %.2f s %s\n", nsteps,
		       median(&fig[R_CHECK][S_KILN]),
		       median(&fig[R_CHECK][S_KILN]) < 2 ? "met" : "MISSED");
	fflush(stdout);
	for (s = S_KILN; s <= S_MAKE && !c->keep; s++)
		rm_rf(c, c->scratch, root[s], NULL);
}

/* ---- options and the machine ------------------------------------------------ */

static void parse_sizes(struct cfg *c, const char *list)
{
	const char *p = list;
	char *end;
	long v;

	c->nsizes = 0;
	while (*p) {
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p || v < GROUP || v > MAX_N || c->nsizes == MAXSIZES)
			die("-n %s: want up to %d sizes, each %d..%d, comma-separated", list,
			    MAXSIZES, GROUP, MAX_N);
		c->sizes[c->nsizes++] = v;
		p = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			die("-n %s: want N[,N...]", list);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: " PROG " [-j JOBS] [-n N[,N...]] [--big] [--gen-only] "
	        "[--rules R] [--rules-n STEPS] [--rules-only] --kiln PATH SCRATCH_DIR\n"
	        "  (see bench/engine/run.sh)\n");
	exit(2);
}

static void parse_args(struct cfg *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "sizes", required_argument, NULL, 'n' },
		{ "big", no_argument, NULL, 'b' },
		{ "kiln", required_argument, NULL, 'k' },
		{ "gen-only", no_argument, NULL, 'g' },
		{ "rules", required_argument, NULL, 'r' },
		{ "rules-n", required_argument, NULL, 'R' },
		{ "rules-only", no_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = getenv("KILN_BENCH_ENGINE_N");
	int ch;

	memset(c, 0, sizeof *c);
	c->jobs = (int)env_long("KILN_BENCH_JOBS", sysconf(_SC_NPROCESSORS_ONLN), 1);
	c->big = (int)env_long("KILN_BENCH_ENGINE_BIG", 0, 0);
	c->keep = (int)env_long("KILN_BENCH_KEEP", 0, 0);
	c->big_n = env_long("KILN_BENCH_ENGINE_BIG_N", BIG_N, GROUP);
	if (c->big_n > MAX_N)
		die("KILN_BENCH_ENGINE_BIG_N: at most %d", MAX_N);
	c->rules = env_long("KILN_BENCH_ENGINE_RULES", 4, 1);
	c->rules_n = env_long("KILN_BENCH_ENGINE_RULES_N", 100000, 1);
	parse_sizes(c, sizes && *sizes ? sizes : "1000,10000");
	while ((ch = getopt_long(argc, argv, "j:n:", opts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			c->jobs = atoi(optarg);
			if (c->jobs < 1 || c->jobs > 1024)
				die("-j %s: want 1..1024", optarg);
			break;
		case 'n': parse_sizes(c, optarg); break;
		case 'b': c->big = 1; break;
		case 'k': c->kiln = optarg; break;
		case 'g': c->gen_only = c->keep = 1; break;
		case 'r': c->rules = atol(optarg); break;
		case 'R': c->rules_n = atol(optarg); break;
		case 'o': c->rules_only = 1; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || c->kiln == NULL)
		usage();
	/* five-digit file names */
	if (c->rules < 1 || c->rules > 1000 || c->rules_n / c->rules < 1 ||
	    c->rules_n / c->rules > MAX_N)
		die("--rules %ld --rules-n %ld: want 1..1000 rules over 1..%d files", c->rules,
		    c->rules_n, MAX_N);
	c->scratch = argv[optind];
}

static void print_machine(const struct cfg *c)
{
	char fs[8192], cpu[256];
	struct utsname u;
	double ram = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);

	scratch_fs(c->scratch, fs, sizeof fs);
	cpu_model(cpu, sizeof cpu);
	if (uname(&u) != 0)
		snprintf(u.release, sizeof u.release, "?");
	printf("\nversions: %s; ninja %s; %s\n", c->kiln_ver, c->have_ninja ? c->ninja_ver
	       : "not installed", c->make_ver);
	printf("machine: nproc %ld (%s), %.1f GiB RAM, Linux %s; scratch %s on %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), cpu, ram / (1 << 30), u.release, c->scratch, fs);
}

int main(int argc, char **argv)
{
	static struct cfg c;
	static char kiln_abs[PATH_MAX];
	struct stat st;
	char path[PATH_MAX];
	int i;

	bench_prog = PROG;
	bench_verbose = (int)env_long("KILN_BENCH_VERBOSE", 0, 0);
	parse_args(&c, argc, argv);
	if (stat(c.scratch, &st) != 0 || !S_ISDIR(st.st_mode))
		die("%s is not a folder", c.scratch);
	if (find_on_path("cp", c.cp_path, sizeof c.cp_path) != 0 ||
	    find_on_path("sh", c.sh_path, sizeof c.sh_path) != 0 ||
	    find_on_path("make", path, sizeof path) != 0)
		die("needs cp, sh and make on PATH");
	c.have_ninja = find_on_path("ninja", path, sizeof path) == 0;
	/* kiln runs in its project folder: a relative path would not hold. */
	if (realpath(c.kiln, kiln_abs) != NULL)
		c.kiln = kiln_abs;
	prog_version(c.kiln, c.scratch, c.kiln_ver, sizeof c.kiln_ver);
	prog_version("make", c.scratch, c.make_ver, sizeof c.make_ver);
	if (c.have_ninja)
		prog_version("ninja", c.scratch, c.ninja_ver, sizeof c.ninja_ver);
	else
		fprintf(stderr, "  .. ninja is not on PATH: its columns are skipped "
		        "(Debian: scripts/ensure-deps bench)\n");

	printf("kiln build engine benchmark: one graph for kiln, ninja, GNU make and the "
	       "floor, -j%d.\n"
	       "  N sources src/fNNNNN.txt; N steps `cp IN OUT`; N/%d steps `sh -c '" CAT_SH
	       "' OUT IN...`\n  over %d copies each; one bundle step, the same over every cat "
	       "output. floor: this\n  program posix_spawning the same argv, at most -j at "
	       "once, in dependency order.\n"
	       "  Figures: medians (min–max) of the runs column, wall time of spawn+wait, "
	       "in the\n  unit after the median; ratios are kiln median / peer median "
	       "(lower is better).\n"
	       "  full build: from clean (kiln: daemon stopped, build/ and .kiln/ removed). "
	       "no-op:\n  again (kiln: warm daemon). one change: one source rewritten, then "
	       "the build.\n  restore: kiln only, build/ removed. Every bundle is checked "
	       "against the expected bytes.\n", c.jobs, GROUP, GROUP);
	fflush(stdout);
	for (i = 0; i < c.nsizes && !c.rules_only; i++)
		run_size(&c, c.sizes[i], 0);
	if (c.big && !c.rules_only)
		run_size(&c, c.big_n, 1);
	if (!c.gen_only)
		rules_size(&c);
	print_machine(&c);
	if (c.failed)
		printf("\n!! some bundle did not hold the expected bytes (see the lines with !! "
		       "above)\n");
	fflush(stdout);
	return c.failed;
}
