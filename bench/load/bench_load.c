/* bench_load.c — the description loader benchmark: kiln_desc_load on a
 * generated game project against its peers.
 *
 * Usage: bench_load SCRATCH_DIR   (normally through bench/load/run.sh)
 *
 * Generates (untimed) a project of N empty source files laid out like a
 * game's — sprites, UI and effect textures, sound effects and music,
 * shaders, levels, at most 500 files a folder — described by a kiln.yaml
 * with three profiles (inheritance, variables), five rules (**, {a,b},
 * match fields in URLs and outputs, a profile-restricted one, one in a
 * *.kiln.yaml), four explicit assets (one overriding a rule's URL, one
 * many-to-one over a URL glob of the UI sprites' steps, one over a file
 * glob) and bundles with globs. An untimed load checks it: zero errors,
 * zero warnings, and the expected number of steps in every profile. Then,
 * REPS times each, order rotating from run to run:
 *
 *   kiln_desc_load + kiln_desc_free   walk, parse, validate, resolve every
 *                                     profile, free
 *   find <sources> -type f            the floor of walking the same tree
 *                                     (readdir with d_type, as kiln does)
 *   ninja -C <root> -t targets all    ninja parsing the equivalent manifest:
 *                                     one edge per step of the default
 *                                     profile, a rule per tool, a phony
 *                                     edge per bundle; nothing is run
 *
 * The peers are spawned with posix_spawn (stdout to /dev/null) and timed
 * with CLOCK_MONOTONIC around spawn+wait; kiln is timed in process. Every
 * side runs once untimed first, so the dentry and page caches are warm for
 * all of them. Figures are medians with min–max; ratios are median/median.
 * The target: the kiln median under 1.0 s for 100,000 files.
 * Missing it is not an error: the exit status is 0 unless something failed.
 *
 * Sizes come from the environment (defaults in brackets):
 *   KILN_BENCH_LOAD_N [100000]   source files in the generated project
 *   KILN_BENCH_REPS [5]          timed runs of every side
 *   KILN_BENCH_VERBOSE [0]       1: print every run's figure to stderr */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_desc.h"
#include "../common/benchutil.h"

#define PROG "bench_load"

#define PER_DIR 500        /* files a folder, at most */
#define TARGET_S 1.0       /* the bound for the kiln median */
#define DEFAULT_PROFILE "pc"

struct cfg {
	const char *scratch;
	char root[4096];  /* the generated project */
	int reps;
	long n;
};

/* One timed side: a figure per run. */

/* ---- small helpers --------------------------------------------------- */






/* mkdir -p of root/rel. */
static void make_dirs(const char *root, const char *rel)
{
	char path[4096];
	char *p;

	path_join(path, sizeof path, root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		make_dir(path);
		*p = '/';
	}
	make_dir(path);
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0)
		die("create %s: %s", path, strerror(errno));
	close(fd);
}

static FILE *open_out(const char *root, const char *rel)
{
	char path[4096];
	FILE *f;

	path_join(path, sizeof path, root, rel);
	if ((f = fopen(path, "we")) == NULL)
		die("create %s: %s", path, strerror(errno));
	return f;
}

static void close_out(FILE *f, const char *what)
{
	if (ferror(f) || fclose(f) != 0)
		die("write %s: %s", what, strerror(errno));
}

/* "1,234,567" */

/* ---- the generated project ------------------------------------------- */

/* One kind of source file: <dir>/dNNN/<stem><i>.<ext>, PER_DIR a folder;
 * ext alternates between the two when there are two. */
struct kind {
	const char *dir;
	char stem;
	const char *ext[2];
	int permille;  /* share of N; 0: the rest */
	int audio;     /* built by the rule limited to pc and mobile */
	long n;
};

static struct kind kinds[] = {
	{"art/sprites", 'f', {"png", NULL}, 0, 0, 0},
	{"art/sprites/ui", 'b', {"png", NULL}, 5, 0, 0},
	{"art/ui", 'i', {"png", NULL}, 40, 0, 0},
	{"art/fx", 'x', {"png", NULL}, 10, 0, 0},
	{"audio/sfx", 's', {"wav", NULL}, 70, 1, 0},
	{"audio/music", 'm', {"wav", NULL}, 10, 1, 0},
	{"shaders", 's', {"vert", "frag"}, 30, 0, 0},
	{"levels", 'l', {"yaml", NULL}, 20, 0, 0},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])
#define NEXTRA 2 /* art/sprites/hero.png and hero_hires.png */

static const char *const source_dirs[] = {"art", "audio", "shaders", "levels"};
#define NSOURCES (sizeof source_dirs / sizeof source_dirs[0])

/* What the loader must find in the generated project. */
struct expect {
	long files, folders, audio;
	size_t steps[3]; /* pc, mobile, editor-preview */
};

static const char *const profiles[] = {"pc", "mobile", "editor-preview"};
#define NPROFILES (sizeof profiles / sizeof profiles[0])

static const char kiln_yaml[] =
	"# kiln.yaml — generated by bench/load/bench_load.c: %ld source files\n"
	"kiln: 1\n"
	"project: bench-load\n"
	"sources: [art, audio, shaders, levels]\n"
	"\n"
	"profiles:\n"
	"  pc:\n"
	"    vars: { tex_max: 2048, quality: 9, fmt: bc7 }\n"
	"  mobile:\n"
	"    inherits: pc\n"
	"    vars: { tex_max: 512, fmt: astc }\n"
	"  editor-preview:\n"
	"    inherits: mobile\n"
	"    vars: { tex_max: 256 }\n"
	"\n"
	"tools:\n"
	"  resize:\n"
	"    run: [convert, \"${in}\", -resize, \"${tex_max}x${tex_max}>\", \"${out}\"]\n"
	"    version: 2\n"
	"    env: { MAGICK_THREAD_LIMIT: \"1\" }\n"
	"  texc:\n"
	"    run: [tools/texc, --max, \"${tex_max}\", --format, \"${fmt}\", --mips,\n"
	"          \"${param.mips}\", -o, \"${out.tex}\", -m, \"${out.meta}\", \"${in}\"]\n"
	"  glsl:\n"
	"    run: [glslangValidator, -V, --depfile, \"${depfile}\", -o, \"${out}\", \"${in}\"]\n"
	"    depfile: true\n"
	"  atlas:\n"
	"    run: [tools/atlas, --padding, \"${param.padding}\",\n"
	"          -o, \"${out.image}\", -m, \"${out.frames}\", \"${in...}\"]\n"
	"  ogg:\n"
	"    run: \"oggenc -q ${quality} -o '${out}' '${in}' 2>&1\"\n"
	"    shell: true\n"
	"\n"
	"rules:\n"
	"  - match: \"art/sprites/**/*.png\"\n"
	"    url: \"sprites/${match.path}\"\n"
	"    outputs: \"${match.name}.png\"\n"
	"    tool: resize\n"
	"  - match: \"art/{ui,fx}/**/*.png\"\n"
	"    url: \"tex/${match.path}\"\n"
	"    outputs: { tex: \"${match.name}.${fmt}.ktx\", meta: \"${match.name}.json\" }\n"
	"    params: { mips: 4 }\n"
	"    tool: texc\n"
	"  - match: \"shaders/**/*.{vert,frag}\"\n"
	"    url: \"shaders/${match.dir}/${match.file}.spv\"\n"
	"    tool: glsl\n"
	"  - match: \"audio/**/*.wav\"\n"
	"    url: \"sounds/${match.path}.ogg\"\n"
	"    tool: ogg\n"
	"    profiles: [pc, mobile]\n"
	"\n"
	"assets:\n"
	"  - url: ui/atlas\n"
	"    tool: atlas\n"
	"    inputs: [\"@sprites/ui/**\"]\n"
	"    outputs: { image: atlas.png, frames: atlas.json }\n"
	"    params: { padding: 2 }\n"
	"  - url: sprites/hero\n"
	"    tool: resize\n"
	"    inputs: [art/sprites/hero_hires.png]\n"
	"    outputs: hero.png\n"
	"\n"
	"bundles:\n"
	"  preload: [ui/atlas, ui/fonts, \"shaders/**\"]\n"
	"  sprites: [\"sprites/**\"]\n"
	"  ui: [\"tex/ui/**\", \"tex/fx/d000/*\"]\n"
	"  levels: [\"levels/**\"]\n";

static const char levels_yaml[] =
	"# levels/levels.kiln.yaml — paths relative to levels/\n"
	"kiln: 1\n"
	"tools:\n"
	"  level:\n"
	"    run: [tools/levelc, --profile, \"${profile}\", -o, \"${out}\", \"${in}\"]\n"
	"rules:\n"
	"  - match: \"**/*.yaml\"\n"
	"    url: \"levels/${match.path}\"\n"
	"    tool: level\n";

static const char ui_yaml[] =
	"# art/ui/ui.kiln.yaml — paths relative to art/ui/\n"
	"assets:\n"
	"  - url: ui/fonts\n"
	"    tool: atlas\n"
	"    inputs: [\"d000/*.png\"]\n"
	"    outputs: { image: fonts.png, frames: fonts.json }\n"
	"    params: { padding: 1 }\n";

static const char audio_yaml[] =
	"# audio/audio.kiln.yaml\n"
	"tools:\n"
	"  bank:\n"
	"    run: [tools/bankc, -o, \"${out}\", \"${in...}\"]\n"
	"assets:\n"
	"  - url: sounds/banks/sfx0\n"
	"    tool: bank\n"
	"    inputs: [\"@sounds/sfx/d000/**\"]\n"
	"    profiles: [pc, mobile]\n";

/* How many files of each kind: at least one each, the rest sprites. */
static void kinds_size(long n)
{
	long rest = n - NEXTRA;
	size_t k;

	for (k = 1; k < NKINDS; k++) {
		kinds[k].n = n * kinds[k].permille / 1000;
		if (kinds[k].n < 2)
			kinds[k].n = 2;
		rest -= kinds[k].n;
	}
	if (rest < 1)
		die("KILN_BENCH_LOAD_N=%ld is too small for the project's mix", n);
	kinds[0].n = rest;
}

static void gen_kind(const char *root, const struct kind *k, struct expect *e)
{
	char dir[4096], path[4096], name[64];
	const char *ext;
	long i;

	make_dirs(root, k->dir);
	for (i = 0; i < k->n; i++) {
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "%s/d%03ld", k->dir, i / PER_DIR);
			path_join(dir, sizeof dir, root, name);
			make_dir(dir);
			e->folders++;
		}
		ext = k->ext[1] != NULL && i % 2 ? k->ext[1] : k->ext[0];
		snprintf(name, sizeof name, "%c%ld.%s", k->stem, i, ext);
		path_join(path, sizeof path, dir, name);
		touch(path);
	}
	e->files += k->n;
	if (k->audio)
		e->audio += k->n;
}

static void gen_text(const char *root, const char *rel, const char *fmt, long n)
{
	FILE *f = open_out(root, rel);

	fprintf(f, fmt, n);
	close_out(f, rel);
}

/* Write the project under c->root; e gets what loading it must give. */
static void gen_project(const struct cfg *c, struct expect *e)
{
	char path[4096];
	size_t k;

	memset(e, 0, sizeof *e);
	make_dir(c->root);
	kinds_size(c->n);
	for (k = 0; k < NKINDS; k++)
		gen_kind(c->root, &kinds[k], e);
	path_join(path, sizeof path, c->root, "art/sprites/hero.png");
	touch(path);
	path_join(path, sizeof path, c->root, "art/sprites/hero_hires.png");
	touch(path);
	e->files += NEXTRA;
	gen_text(c->root, "kiln.yaml", kiln_yaml, c->n);
	gen_text(c->root, "levels/levels.kiln.yaml", levels_yaml, 0);
	gen_text(c->root, "art/ui/ui.kiln.yaml", ui_yaml, 0);
	gen_text(c->root, "audio/audio.kiln.yaml", audio_yaml, 0);
	/* A step per source file (hero's is replaced by the asset sprites/hero),
	 * plus ui/atlas and ui/fonts, plus the sound bank where audio is built. */
	e->steps[0] = e->steps[1] = (size_t)e->files + 3;
	e->steps[2] = (size_t)(e->files - e->audio) + 2;
}

/* ---- the equivalent ninja manifest ----------------------------------- */

/* A path in a ninja build line: '$', ' ', ':' and newlines escaped. */
static void ninja_path(FILE *f, const char *prefix, const char *p)
{
	fputs(prefix, f);
	for (; *p; p++) {
		if (*p == '$' || *p == ' ' || *p == ':' || *p == '\n')
			fputc('$', f);
		fputc(*p, f);
	}
}

/* One rule per tool the steps use. */
static void ninja_rules(FILE *f, const kiln_plan *p)
{
	const kiln_tool *seen[64];
	size_t nseen = 0, i, j;

	for (i = 0; i < p->nsteps; i++) {
		const kiln_tool *t = p->steps[i].tool;
		for (j = 0; j < nseen && seen[j] != t; j++)
			;
		if (j < nseen || nseen == sizeof seen / sizeof seen[0])
			continue;
		seen[nseen++] = t;
		fprintf(f, "rule %s\n  command = tools/%s -o $out $in\n  description = %s $out\n",
		        t->name, t->name, t->name);
		if (t->depfile)
			fputs("  depfile = $out.d\n  deps = gcc\n", f);
	}
}

/* build.ninja at the project root for the default profile's plan: an edge
 * per step (inputs: its source files and its prerequisites' outputs), a
 * phony edge per bundle. Returns the number of targets ninja must list. */
static size_t write_ninja(const char *root, const kiln_plan *p)
{
	FILE *f = open_out(root, "build.ninja");
	size_t i, j;

	fprintf(f, "# generated by bench/load/bench_load.c from profile '%s'\n"
	        "ninja_required_version = 1.5\n\n", p->profile);
	ninja_rules(f, p);
	for (i = 0; i < p->nsteps; i++) {
		const kiln_step *s = &p->steps[i];
		ninja_path(f, "build ", "out/");
		ninja_path(f, "", s->url);
		fprintf(f, ": %s", s->tool->name);
		for (j = 0; j < s->ninputs; j++)
			ninja_path(f, " ", s->inputs[j]);
		for (j = 0; j < s->nneeds; j++) {
			ninja_path(f, " ", "out/");
			ninja_path(f, "", s->needs[j]);
		}
		fputc('\n', f);
	}
	for (i = 0; i < p->nbundles; i++) {
		ninja_path(f, "build ", "bundle/");
		ninja_path(f, "", p->bundles[i].name);
		fputs(": phony", f);
		for (j = 0; j < p->bundles[i].nurls; j++) {
			ninja_path(f, " ", "out/");
			ninja_path(f, "", p->bundles[i].urls[j]);
		}
		fputc('\n', f);
	}
	close_out(f, "build.ninja");
	return p->nsteps + p->nbundles;
}

/* ---- kiln ------------------------------------------------------------- */

static void print_diags(const kiln_desc *d, size_t max)
{
	const kiln_diag *dg;
	size_t n = kiln_desc_diags(d, &dg), i;

	for (i = 0; i < n && i < max; i++)
		fprintf(stderr, "  %s:%d:%d: %s: %s%s%s\n", dg[i].loc.file, dg[i].loc.line,
		        dg[i].loc.col, dg[i].level == KILN_DIAG_ERROR ? "error" : "warning",
		        dg[i].field, *dg[i].field ? ": " : "", dg[i].msg);
	if (n > max)
		fprintf(stderr, "  ... and %zu more\n", n - max);
}

/* Check one profile's plan against the generator's count. */
static size_t check_plan(const kiln_desc *d, const char *profile, size_t want)
{
	const kiln_plan *p = kiln_desc_plan(d, profile);

	if (p == NULL)
		die("profile '%s' has no plan", profile);
	if (p->nsteps != want)
		die("profile '%s': %zu steps, the generator expects %zu", profile, p->nsteps,
		    want);
	return p->nsteps;
}

/* The untimed first load: zero errors and warnings, the expected steps in
 * every profile; writes build.ninja. Prints the sanity line. */
static size_t kiln_check(const struct cfg *c, const struct expect *e)
{
	char buf[NPROFILES][32], nsrc[32];
	const kiln_diag *dg;
	const char *const *files;
	struct mallinfo2 mi;
	kiln_desc *d;
	size_t ndiag, nfiles, i, ntargets;
	int rv = kiln_desc_load(c->root, &d);

	if (d == NULL)
		die("kiln_desc_load %s: %s", c->root, kiln_strerror(rv));
	ndiag = kiln_desc_diags(d, &dg);
	if (rv != 0 || ndiag > 0) {
		fprintf(stderr, "bench_load: the generated project has %zu errors, %zu "
		        "warnings:\n", kiln_desc_nerrors(d), ndiag - kiln_desc_nerrors(d));
		print_diags(d, 20);
		die("kiln_desc_load %s: %s (the project is kept for a look)", c->root,
		    kiln_strerror(rv));
	}
	for (i = 0; i < NPROFILES; i++)
		fmt_count(buf[i], sizeof buf[i], (double)check_plan(d, profiles[i], e->steps[i]));
	mi = mallinfo2();
	nfiles = kiln_desc_files(d, &files);
	fmt_count(nsrc, sizeof nsrc, (double)e->files);
	ntargets = write_ninja(c->root, kiln_desc_plan(d, DEFAULT_PROFILE));
	printf("project: %s source files in %ld folders, %zu description files, 5 rules, "
	       "4 assets;\n  steps: pc %s, mobile %s, editor-preview %s; 0 errors, 0 "
	       "warnings; heap after load %.0f MiB\n\n", nsrc, e->folders, nfiles,
	       buf[0], buf[1], buf[2], (double)(mi.uordblks + mi.hblkhd) / (1 << 20));
	fflush(stdout);
	kiln_desc_free(d);
	return ntargets;
}

static double kiln_run(const struct cfg *c)
{
	double t0 = now(), t1;
	kiln_desc *d;
	int rv = kiln_desc_load(c->root, &d);

	if (rv != 0)
		die("kiln_desc_load %s: %s", c->root, kiln_strerror(rv));
	kiln_desc_free(d);
	t1 = now();
	return t1 - t0;
}

/* ---- peers ----------------------------------------------------------- */

/* Run argv[0] (found on PATH) with stdout into out_path (NULL: /dev/null),
 * or, when buf is not NULL, into buf (a few bytes); stderr to /dev/null.
 * Returns the wall time of spawn+wait in seconds. */
static double spawn_timed(char *const argv[], const char *out_path, char *buf, size_t len)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	int p[2] = { -1, -1 }, rv, status;
	double t0, t1;
	ssize_t n;
	pid_t pid;

	if (buf != NULL && pipe2(p, O_CLOEXEC) != 0)
		die("pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (buf != NULL)
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null",
		                                 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	t0 = now();
	rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	if (rv != 0)
		die("spawn %s: %s", argv[0], strerror(rv));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	t1 = now();
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("%s %s failed (status %d)", argv[0], argv[1], status);
	if (buf != NULL) {
		close(p[1]);
		/* The child has exited: its few bytes sit in the pipe. */
		n = read(p[0], buf, len - 1);
		buf[n > 0 ? n : 0] = '\0';
		close(p[0]);
	}
	return t1 - t0;
}

/* 1 when name is an executable on PATH. */
static int on_path(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;
	char full[4096];

	for (p = path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		snprintf(full, sizeof full, "%.*s/%s", (int)(end - p), p, name);
		if (end > p && access(full, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* The first line of `prog --version`. */
static void prog_version(const char *prog, char *buf, size_t len)
{
	char *argv[] = { (char *)prog, "--version", NULL };

	spawn_timed(argv, NULL, buf, len);
	buf[strcspn(buf, "\n")] = '\0';
}

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	long n = 0;
	int ch;

	if (f == NULL)
		die("open %s: %s", path, strerror(errno));
	while ((ch = getc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

struct peers {
	char *find_argv[NSOURCES + 4];
	char find_dirs[NSOURCES][4096];
	char *ninja_argv[7];
	int have_ninja;
	char find_ver[256], ninja_ver[256];
};

static void peers_init(struct peers *pr, const struct cfg *c)
{
	size_t i;

	pr->find_argv[0] = "find";
	for (i = 0; i < NSOURCES; i++) {
		path_join(pr->find_dirs[i], sizeof pr->find_dirs[i], c->root, source_dirs[i]);
		pr->find_argv[i + 1] = pr->find_dirs[i];
	}
	pr->find_argv[NSOURCES + 1] = "-type";
	pr->find_argv[NSOURCES + 2] = "f";
	pr->find_argv[NSOURCES + 3] = NULL;
	pr->ninja_argv[0] = "ninja";
	pr->ninja_argv[1] = "-C";
	pr->ninja_argv[2] = (char *)c->root;
	pr->ninja_argv[3] = "-t";
	pr->ninja_argv[4] = "targets";
	pr->ninja_argv[5] = "all";
	pr->ninja_argv[6] = NULL;
	pr->have_ninja = on_path("ninja");
	prog_version("find", pr->find_ver, sizeof pr->find_ver);
	if (pr->have_ninja)
		prog_version("ninja", pr->ninja_ver, sizeof pr->ninja_ver);
}

/* The untimed first runs, output kept and counted: find must list every
 * source and description file, ninja every target. */
static void peers_check(const struct peers *pr, const struct cfg *c, long nfind,
                        size_t ntargets)
{
	char out[4096];
	long n;

	path_join(out, sizeof out, c->scratch, "peer.out");
	spawn_timed(pr->find_argv, out, NULL, 0);
	if ((n = count_lines(out)) != nfind)
		die("find listed %ld files, the generator made %ld", n, nfind);
	if (pr->have_ninja) {
		spawn_timed(pr->ninja_argv, out, NULL, 0);
		if ((n = count_lines(out)) != (long)ntargets)
			die("ninja -t targets listed %ld targets, build.ninja has %zu", n,
			    ntargets);
	}
	unlink(out);
}

/* ---- statistics and the table ---------------------------------------- */




static double series_median(const struct series *s)
{
	double med, lo, hi;

	series_stats(s, &med, &lo, &hi);
	return med;
}

/* "123 ms (110–130)", or "1.23 ms (1.10–1.30)" under 10 ms */
static void fmt_series(char *buf, size_t len, const struct series *s)
{
	double med, lo, hi;

	series_stats(s, &med, &lo, &hi);
	if (med < 0.01) /* small projects */
		snprintf(buf, len, "%.2f ms (%.2f–%.2f)", med * 1e3, lo * 1e3, hi * 1e3);
	else
		snprintf(buf, len, "%.0f ms (%.0f–%.0f)", med * 1e3, lo * 1e3, hi * 1e3);
}

/* Column widths; the '–' and 'µ' in figures are 2-3 bytes for 1 column,
 * hence the padding helper. */

static void print_header(void)
{
	put_col("case", 30);
	put_col("kiln", 20);
	put_col("peer", 44);
	put_col("ratio", 6);
	put_col("target", 8);
	puts("result");
}

/* One table line, kiln against a peer; the ratio is kiln/peer (lower is
 * better). With a target, the kiln median is held against it in seconds. */
static void print_row(const char *name, const struct series *kiln, const char *peer_name,
                      const struct series *peer, int with_target)
{
	char kb[64], pb[64], pcol[128], rb[16], tb[16];
	double km = series_median(kiln);

	fmt_series(kb, sizeof kb, kiln);
	if (peer != NULL) {
		fmt_series(pb, sizeof pb, peer);
		snprintf(pcol, sizeof pcol, "%s %s", peer_name, pb);
		snprintf(rb, sizeof rb, "%.2f", km / series_median(peer));
	} else {
		snprintf(pcol, sizeof pcol, "%s", peer_name);
		snprintf(rb, sizeof rb, "-");
	}
	put_col(name, 30);
	put_col(kb, 20);
	put_col(pcol, 44);
	put_col(rb, 6);
	if (!with_target) {
		put_col("-", 8);
		puts("(info)");
		return;
	}
	snprintf(tb, sizeof tb, "< %.1f s", TARGET_S);
	put_col(tb, 8);
	puts(km < TARGET_S ? "target met" : "target MISSED");
}

/* ---- the timed runs --------------------------------------------------- */

struct sides {
	struct series kiln, find, ninja;
};

static void run_side(int side, const struct cfg *c, const struct peers *pr, struct sides *s)
{
	if (side == 0)
		series_add(&s->kiln, kiln_run(c));
	else if (side == 1)
		series_add(&s->find, spawn_timed(pr->find_argv, NULL, NULL, 0));
	else if (pr->have_ninja)
		series_add(&s->ninja, spawn_timed(pr->ninja_argv, NULL, NULL, 0));
}

static void bench_load(const struct cfg *c, const struct peers *pr, struct sides *s)
{
	int rep, k;

	s->kiln.label = "kiln_desc_load+free, s";
	s->find.label = "find -type f, s";
	s->ninja.label = "ninja -t targets all, s";
	fprintf(stderr, "  .. %d runs of each side, order rotating\n", c->reps);
	kiln_run(c); /* warm: the first kiln load was the checking one */
	for (rep = 0; rep < c->reps; rep++)
		for (k = 0; k < 3; k++)
			run_side((rep + k) % 3, c, pr, s);
}

static void print_results(const struct cfg *c, const struct peers *pr,
                          const struct sides *s, long nfiles)
{
	char row[96], count[32], ninja_skip[128];
	double us = 1e6 / (double)nfiles;

	fmt_count(count, sizeof count, (double)nfiles);
	snprintf(row, sizeof row, "load %s files", count);
	print_header();
	print_row(row, &s->kiln, "find -type f", &s->find, 1);
	if (pr->have_ninja) {
		print_row("load, vs ninja manifest", &s->kiln, "ninja -t targets all", &s->ninja, 0);
	} else {
		snprintf(ninja_skip, sizeof ninja_skip, "ninja: skipped, not on PATH");
		print_row("load, vs ninja manifest", &s->kiln, ninja_skip, NULL, 0);
	}
	printf("\nper source file: kiln %.2f µs, find %.2f µs", series_median(&s->kiln) * us,
	       series_median(&s->find) * us);
	if (pr->have_ninja)
		printf(", ninja %.2f µs", series_median(&s->ninja) * us);
	printf("\n\nkiln: kiln_desc_load + kiln_desc_free in process (walk the %zu source "
	       "folders, parse and\n  check 4 description files, resolve 3 profiles), "
	       "after one untimed load. find: `find\n  <sources> -type f >/dev/null`. ninja: "
	       "`ninja -C <root> -t targets all >/dev/null` on a\n  build.ninja with an edge "
	       "per step of profile '%s', a phony edge per bundle (parses,\n  runs nothing). "
	       "Peers are spawned and timed around spawn+wait; %d runs each.\n",
	       NSOURCES, DEFAULT_PROFILE, c->reps);
	printf("versions: %s; ninja %s\n", pr->find_ver, pr->have_ninja ? pr->ninja_ver
	       : "not installed");
}

/* ---- the machine ------------------------------------------------------ */

/* The file system type, device and mount point holding path, from the
 * longest matching mount point in /proc/self/mountinfo. */


static void print_machine(const struct cfg *c)
{
	char fs[8192], cpu[256];
	struct utsname u;
	double ram = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);

	scratch_fs(c->scratch, fs, sizeof fs);
	cpu_model(cpu, sizeof cpu);
	if (uname(&u) != 0)
		snprintf(u.release, sizeof u.release, "?");
	printf("\nmachine: nproc %ld (%s), %.1f GiB RAM, Linux %s; scratch %s on %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), cpu, ram / (1 << 30), u.release, c->scratch, fs);
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct sides s;
	struct peers pr;
	struct expect e;
	struct cfg c;
	struct stat st;
	size_t ntargets;
	double t0;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_load SCRATCH_DIR (see bench/load/run.sh)\n");
		return 2;
	}
	c.scratch = argv[1];
	if (stat(c.scratch, &st) != 0 || !S_ISDIR(st.st_mode))
		die("%s is not a folder", c.scratch);
	c.reps = (int)env_long("KILN_BENCH_REPS", 5, 1);
	c.n = env_long("KILN_BENCH_LOAD_N", 100000, 100);
	bench_prog = PROG;
	bench_verbose = (int)env_long("KILN_BENCH_VERBOSE", 0, 0);
	if (c.reps > MAXREPS)
		die("at most %d runs a side", MAXREPS);
	if (c.n > 10000000)
		die("KILN_BENCH_LOAD_N: at most 10000000");
	path_join(c.root, sizeof c.root, c.scratch, "project");

	printf("kiln description loader benchmark: medians of %d runs (min–max); ratio = "
	       "kiln / peer\nmedian (lower is better). Target: the kiln median under "
	       "%.1f s (issue: 100,000 files\n\"well under a second\").\n\n", c.reps, TARGET_S);
	fflush(stdout);
	fprintf(stderr, "  .. generating a project of %ld source files\n", c.n);
	t0 = now();
	gen_project(&c, &e);
	fprintf(stderr, "  .. generated in %.1f s; checking it loads cleanly\n", now() - t0);
	ntargets = kiln_check(&c, &e);
	peers_init(&pr, &c);
	if (!pr.have_ninja)
		fprintf(stderr, "  .. ninja is not on PATH: its row is skipped "
		        "(Debian: scripts/ensure-deps bench)\n");
	peers_check(&pr, &c, e.files + 3, ntargets);
	bench_load(&c, &pr, &s);
	print_results(&c, &pr, &s, e.files);
	print_machine(&c);
	fflush(stdout);
	return 0;
}
