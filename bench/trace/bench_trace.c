/* bench_trace.c — the cost of file-access tracing (libkilntrace.so) on a
 * tool: the same command run untraced and traced (LD_PRELOAD of the shim,
 * KILN_TRACE_FILE into the scratch folder), alternating, median of each.
 *
 *   bench_trace --shim SO [--runs R] [-n N] [--glsl] SCRATCH
 *
 * Cases: this program re-run as a tool that opens, reads and closes N
 * (10,000) small files; `cp` of one small file, the tool of
 * bench/engine's steps, where what tracing adds to a process's start and
 * end (loading the shim, opening the trace file, its H and E records) is
 * the whole cost (each sample is 100 runs, reported per run);
 * glslangValidator -V on a generated fragment shader with an #include
 * chain (when --glsl and it is on PATH). The trace file is removed before
 * each traced sample. Prints one line per case: untraced and traced
 * medians (min-max) and the ratio. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/benchutil.h"

extern char **environ;

/* The tool: open, read and close dir/f<i>.txt for i < n. */
static int
child(const char *dir, long n)
{
	char path[4096], buf[256];

	for (long i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/f%ld.txt", dir, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, buf, sizeof buf) < 0)
			return 1;
		close(fd);
	}
	return 0;
}

static void
gen_files(const char *dir, long n)
{
	char name[64];

	make_dir(dir);
	for (long i = 0; i < n; i++) {
		snprintf(name, sizeof name, "f%ld.txt", i);
		FILE *f = open_out(dir, name);
		fprintf(f, "small file %ld\n", i);
		close_out(f, name);
	}
}

static void
gen_shader(const char *dir)
{
	FILE *f;

	make_dir(dir);
	f = open_out(dir, "lib.glsl");
	for (int i = 0; i < 200; i++)
		fprintf(f, "vec4 f%d(vec4 x) { return sin(x * %d.0) + cos(x.yzwx) * %d.5; }\n",
		        i, i + 1, i);
	close_out(f, "lib.glsl");
	f = open_out(dir, "main.frag");
	fprintf(f, "#version 450\n#extension GL_GOOGLE_include_directive : require\n"
	        "#include \"lib.glsl\"\nlayout(location = 0) in vec4 uv;\n"
	        "layout(location = 0) out vec4 color;\nvoid main() {\n  vec4 a = uv;\n");
	for (int i = 0; i < 200; i++)
		fprintf(f, "  a = f%d(a);\n", i);
	fprintf(f, "  color = a;\n}\n");
	close_out(f, "main.frag");
}

/* Run argv reps times in a row (traced when env is not NULL) and return
 * the wall time of one run. */
static double
run_once(char *const *argv, char *const *env, const char *trace, int reps)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st, rv;
	double t0;

	if (trace != NULL)
		unlink(trace);
	/* glslangValidator names its input on stdout */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	t0 = now();
	for (int i = 0; i < reps; i++) {
		rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env ? env : environ);
		if (rv != 0)
			die("cannot run %s: %s", argv[0], strerror(rv));
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("%s failed", argv[0]);
	}
	posix_spawn_file_actions_destroy(&fa);
	return (now() - t0) / reps;
}

static void
bench_case(const char *label, char *const *argv, char *const *tenv, const char *trace,
           int runs, int reps)
{
	struct series u = {.label = "untraced"}, t = {.label = "traced"};
	double um, ulo, uhi, tm, tlo, thi;

	run_once(argv, NULL, NULL, 1);   /* warm the page cache */
	run_once(argv, tenv, trace, 1);
	for (int i = 0; i < runs; i++) {
		series_add(&u, run_once(argv, NULL, NULL, reps));
		series_add(&t, run_once(argv, tenv, trace, reps));
	}
	series_stats(&u, &um, &ulo, &uhi);
	series_stats(&t, &tm, &tlo, &thi);
	printf("%-34s untraced %8.3f ms (%.3f-%.3f)  traced %8.3f ms (%.3f-%.3f)  ratio %.3f"
	       "  (+%.3f ms)\n", label, um * 1e3, ulo * 1e3, uhi * 1e3, tm * 1e3, tlo * 1e3,
	       thi * 1e3, tm / um, (tm - um) * 1e3);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	const char *shim = NULL, *scratch = NULL;
	long n = 10000;
	int runs = 31, glsl = 0;
	char files[4096], shaders[4096], trace[4096], self[4096];
	char pre[4200], tf[4200], nstr[32];

	bench_prog = "bench_trace";
	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], atol(argv[3]));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--shim") == 0 && i + 1 < argc)
			shim = argv[++i];
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atol(argv[++i]);
		else if (strcmp(argv[i], "--glsl") == 0)
			glsl = 1;
		else if (argv[i][0] != '-' && scratch == NULL)
			scratch = argv[i];
		else
			die("usage: bench_trace --shim SO [--runs R] [-n N] [--glsl] SCRATCH");
	}
	if (shim == NULL || scratch == NULL || runs < 1 || runs > MAXREPS || n < 1)
		die("usage: bench_trace --shim SO [--runs R (1-%d)] [-n N] [--glsl] SCRATCH",
		    MAXREPS);
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
	if (sl <= 0)
		die("cannot read /proc/self/exe");
	self[sl] = '\0';
	path_join(files, sizeof files, scratch, "files");
	path_join(shaders, sizeof shaders, scratch, "shaders");
	path_join(trace, sizeof trace, scratch, "run.trace");
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shim);
	snprintf(tf, sizeof tf, "KILN_TRACE_FILE=%s", trace);
	/* the traced environment: ours plus the two variables */
	size_t ne = 0;
	while (environ[ne] != NULL)
		ne++;
	char **tenv = calloc(ne + 3, sizeof *tenv);
	if (tenv == NULL)
		die("out of memory");
	for (size_t i = 0; i < ne; i++)
		tenv[i] = environ[i];
	tenv[ne] = pre;
	tenv[ne + 1] = tf;

	gen_files(files, n);
	snprintf(nstr, sizeof nstr, "%ld", n);
	char *cargv[] = {self, (char *)"--child", files, nstr, NULL};
	char label[64];
	snprintf(label, sizeof label, "open+read+close %ld files", n);
	bench_case(label, cargv, tenv, trace, runs, 1);
	{
		char src[4200], dst[4200];
		path_join(src, sizeof src, files, "f0.txt");
		path_join(dst, sizeof dst, scratch, "copy.txt");
		char *pargv[] = {(char *)"cp", src, dst, NULL};
		bench_case("cp one small file (per run)", pargv, tenv, trace, runs, 100);
	}
	if (glsl) {
		char in[4200], out[4200];
		gen_shader(shaders);
		path_join(in, sizeof in, shaders, "main.frag");
		path_join(out, sizeof out, shaders, "main.spv");
		char *gargv[] = {(char *)"glslangValidator", (char *)"-V", (char *)"-o", out,
		                 in, NULL};
		bench_case("glslangValidator -V (200 functions)", gargv, tenv, trace, runs, 1);
	}
	free(tenv);
	return 0;
}
