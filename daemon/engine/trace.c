/* trace.c — file-access tracing of build steps (docs/build.md,
 * "File-access tracing"): finding the shim (shim/kilntrace.c), the
 * environment that loads it into a tool, and reading what it recorded.
 *
 * After a tool exits 0 its trace (<n>.trace beside its scratch folder,
 * scratch.c; the record format is in shim/kilntrace.c) is read: a change to any file outside the
 * step's scratch folder and depfile fails the step; project files the
 * tool read, stat'ed or looked for in vain join n->disc after the
 * depfile's, and folders it listed join as "folder/" (their sorted names
 * are hashed: trace_dep_hash). Which paths, and under what name, is
 * discover.c's step_dep_name (dep_path.h's policy, the same as for
 * depfiles): project files, and files outside the project but not the
 * machine's, by absolute path; a use of build/ the step does not declare,
 * or a path that cannot be recorded, is a warning. Declared inputs are
 * left out (they are in the key), and so are missing lookups that are the
 * tool probing its own command line (probe_words.c). The last program
 * the tool's own process exec'd in its place (X records of its pid) is
 * handed to tool_runs.c, for the key.
 *
 * A run is traced when every process image that ran wrote its hello line
 * and every process ended normally: each pid must say hello (H) once more
 * than it exec'ed successfully (X minus x; the root once more than that,
 * for its own image), and each start (H, or F for a fork or posix_spawn
 * child) must be matched by an end (E, or a successful exec). A static
 * binary writes no hello; a process killed by a signal writes no E and
 * its buffered records are lost. Either way the step still builds, from
 * declared inputs and the dependencies that were recorded, untraced.
 *
 * The trace is read line by line (getline: memory is one record, the
 * paths found and a hash table of pids), never more than it held when the
 * tool exited; a trace over TRACE_MAX (256 MiB, a runaway tool) is not
 * read at all and the run is untraced.
 *
 * Threads: trace_setup from engine_new; the rest from engine workers on
 * nodes they hold (e->trace_shim is read-only after setup). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dep_path.h"
#include "engine_int.h"
#include "selfwrite.h"
#include "discover.h"
#include "graph.h"
#include "scratch.h"
#include "step.h"
#include "tool_runs.h"

#ifndef KILN_LIBDIR
#define KILN_LIBDIR "/usr/local/lib/kiln"
#endif
#define SHIM_NAME "libkilntrace.so"
#define TRACE_MAX (256u << 20)   /* a bigger trace is not read: untraced */

/* ---- setup and environment ---------------------------------------------- */

void
trace_setup(struct engine *e)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

	e->trace_shim[0] = '\0';
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL &&
		    (size_t)(slash - exe) + sizeof SHIM_NAME + 1 < sizeof e->trace_shim) {
			snprintf(e->trace_shim, sizeof e->trace_shim, "%.*s/%s",
			         (int)(slash - exe), exe, SHIM_NAME);
			if (access(e->trace_shim, R_OK) == 0)
				return;
		}
	}
	snprintf(e->trace_shim, sizeof e->trace_shim, "%s/%s", KILN_LIBDIR, SHIM_NAME);
	if (access(e->trace_shim, R_OK) == 0)
		return;
	e->trace_shim[0] = '\0';
	if (e->cfg.log)
		e->cfg.log(e->cfg.arg, 1, "no " SHIM_NAME " beside kilnd nor in "
		           KILN_LIBDIR ": steps run untraced (only declared inputs "
		           "and depfiles are dependencies)");
}

/* Whether this daemon is itself built with AddressSanitizer. */
static int
daemon_is_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 1;
#else
	return 0;
#endif
}

int
trace_env(const struct engine *e, unsigned scratch, char **out, size_t *nout)
{
	static const char *const pass[] = {"UBSAN_OPTIONS", "LSAN_OPTIONS"};
	const char *asan = getenv("ASAN_OPTIONS");
	size_t n = 0;

	*nout = 0;
	if (e->trace_shim[0] == '\0')
		return 0;
	if (asprintf(&out[n], "LD_PRELOAD=%s", e->trace_shim) < 0)
		goto fail;
	n++;
	{
		char path[PATH_MAX + 16];
		if (scratch_path(e, scratch, ".trace", 1, path, sizeof path) != 0 ||
		    asprintf(&out[n], "KILN_TRACE_FILE=%s", path) < 0)
			goto fail;
		n++;
	}
	/* Python would write __pycache__/ beside the project's scripts: a
	 * write outside the scratch folder */
	if ((out[n] = strdup("PYTHONDONTWRITEBYTECODE=1")) == NULL)
		goto fail;
	n++;
	/* A testing aid: a tool that is itself an ASan binary (bin/asan/kiln
	 * inside a step) aborts when a library is preloaded before libasan
	 * unless told not to check. */
	if (asan != NULL || daemon_is_asan()) {
		if (asprintf(&out[n], "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
		             asan ? asan : "", asan && asan[0] ? ":" : "") < 0)
			goto fail;
		n++;
	}
	for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
		const char *v = getenv(pass[i]);
		if (v == NULL)
			continue;
		if (asprintf(&out[n], "%s=%s", pass[i], v) < 0)
			goto fail;
		n++;
	}
	*nout = n;
	return 0;
fail:
	while (n > 0)
		free(out[--n]);
	return KILN_ENOMEM;
}

/* ---- dependency hashes -------------------------------------------------- */

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The hash of a folder's sorted names (rel ends with '/'; project-relative
 * or absolute). */
static int
listing_hash(const struct engine *e, const char *rel, kiln_id *h)
{
	char path[PATH_MAX];

	if (rel[0] == '/')   /* a folder outside the project */
		snprintf(path, sizeof path, "%s", rel);
	else
		snprintf(path, sizeof path, "%s/%s", e->root, rel);
	return folder_names_hash(path, 0, h);
}

int
trace_dep_hash(struct engine *e, const char *path, kiln_id *h)
{
	size_t len = strlen(path);

	if (len > 0 && path[len - 1] == '/')
		return listing_hash(e, path, h);
	return filestate_hash(e->fs, path, h);
}

/* ---- reading a trace ------------------------------------------------------ */

/* Undo the shim's escapes (\\ and \n) in place. */
static void
unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && (s[1] == '\\' || s[1] == 'n')) {
			*o++ = s[1] == 'n' ? '\n' : '\\';
			s++;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* Writes that are not outputs and harm nothing. */
static int
write_harmless(const char *p)
{
	static const char *const exact[] = {"/dev/null", "/dev/tty", "/dev/stdout",
	                                    "/dev/stderr", "/dev/zero", "/dev/full"};
	static const char *const under[] = {"/dev/pts/", "/dev/fd/", "/dev/shm/",
	                                    "/proc/self/", "/proc/thread-self/"};

	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (strcmp(p, exact[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof under / sizeof under[0]; i++)
		if (strncmp(p, under[i], strlen(under[i])) == 0)
			return 1;
	if (strncmp(p, "/dev/tty", 8) == 0)
		return 1;
	if (strncmp(p, "/proc/", 6) == 0) {   /* /proc/<pid>/...: its own */
		const char *q = p + 6;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 6 && *q == '/')
			return 1;
	}
	return 0;
}

struct pidcount {   /* a slot of trace_read's pid table */
	long pid;
	int used;
	long n;      /* hellos minus successful execs */
	long live;   /* starts (H, F) minus ends (E, successful X) */
};

struct trace_read {
	struct engine *e;
	const struct graph *g;
	struct node *n;
	struct warn_list *wl;
	const char *scratch;      /* absolute: the step's scratch folder */
	size_t lroot, lscratch;
	char depfile[PATH_MAX + 16], trace[PATH_MAX + 16];  /* beside it */
	char **paths;             /* dependencies, as step_dep_name names them */
	size_t npaths, cappaths;
	struct pidcount *pids;    /* open addressing, cappids a power of 2 */
	size_t npids, cappids;
	int hello, oom, unread;
	char bad[PATH_MAX];       /* the first write outside, if any */
	/* the tool's own process: what it exec'd in its place (a shim
	 * exec'ing its interpreter). An X is an attempt until the next X or
	 * the end; an x right after it says it failed. */
	long root;
	int exec_pending;
	char exec_try[PATH_MAX], exec_ran[PATH_MAX];
};

static size_t
pid_slot(const struct pidcount *v, size_t cap, long pid)
{
	size_t i = ((unsigned long)pid * 0x9E3779B97F4A7C15ull) & (cap - 1);

	while (v[i].used && v[i].pid != pid)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Double the pid table (kept at most half full). */
static int
pid_grow(struct trace_read *t)
{
	size_t ncap = t->cappids ? t->cappids * 2 : 64;
	struct pidcount *nv = calloc(ncap, sizeof *nv);

	if (nv == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < t->cappids; i++)
		if (t->pids[i].used)
			nv[pid_slot(nv, ncap, t->pids[i].pid)] = t->pids[i];
	free(t->pids);
	t->pids = nv;
	t->cappids = ncap;
	return 0;
}

static void
pid_add(struct trace_read *t, long pid, long delta, long live)
{
	struct pidcount *c;

	if (2 * (t->npids + 1) > t->cappids && pid_grow(t) != 0) {
		t->oom = 1;
		return;
	}
	c = &t->pids[pid_slot(t->pids, t->cappids, pid)];
	if (!c->used) {
		c->used = 1;
		c->pid = pid;
		t->npids++;
	}
	c->n += delta;
	c->live += live;
}

static void
path_add(struct trace_read *t, const char *name)
{
	char *s;

	if (t->npaths == t->cappaths) {
		size_t ncap = t->cappaths ? t->cappaths * 2 : 64;
		char **nv = realloc(t->paths, ncap * sizeof *nv);
		if (nv == NULL) {
			t->oom = 1;
			return;
		}
		t->paths = nv;
		t->cappaths = ncap;
	}
	if ((s = strdup(name)) == NULL) {
		t->oom = 1;
		return;
	}
	t->paths[t->npaths++] = s;
}

/* Whether absolute p is the step's own: its scratch folder, depfile or
 * trace. */
static int
own_file(const struct trace_read *t, const char *p)
{
	if (strcmp(p, t->depfile) == 0 || strcmp(p, t->trace) == 0)
		return 1;
	if (strncmp(p, t->scratch, t->lscratch) != 0)
		return 0;
	p += t->lscratch;
	return *p == '\0' || *p == '/';
}

/* A file or folder the tool looked at (kind R, S, M or D): a dependency
 * if the policy records it and it is no declared input. */
static void
trace_look(struct trace_read *t, const char *p, char kind)
{
	char name[PATH_MAX];

	if (!step_dep_name(t->e, t->g, t->n, p, kind == 'D', kind == 'M', t->wl, name,
	                   sizeof name))
		return;
	/* a word of its own command line it looked up as a file first
	 * (probe_words.c): no project file it uses */
	if (kind == 'M' && name[0] != '/' && probe_words_noise(&t->n->w->words, name))
		return;
	for (size_t i = 0; kind != 'D' && i < t->n->ks->ninputs; i++)
		if (strcmp(t->n->ks->inputs[i], name) == 0)
			return;
	path_add(t, name);
}

/* An X record ("<pid> <path>"): the tool's own process about to exec
 * path. The attempt before it, if no x undid it, worked. */
static void
root_exec(struct trace_read *t, char *rest)
{
	char *end;
	long pid = strtol(rest, &end, 10);

	if (pid != t->root || *end != ' ')
		return;
	if (t->exec_pending)
		memcpy(t->exec_ran, t->exec_try, sizeof t->exec_ran);
	unescape(end + 1);
	t->exec_pending = end[1] == '/' && strlen(end + 1) < sizeof t->exec_try;
	if (t->exec_pending) {
		memcpy(t->exec_try, end + 1, strlen(end + 1) + 1);
		dep_path_clean(t->exec_try);
	}
}

static void
trace_line(struct trace_read *t, char *line)
{
	char kind = line[0], *rest = line + 2, path[PATH_MAX * 2];

	if (line[0] == '\0' || line[1] != ' ')
		return;
	switch (kind) {
	case 'H':
		t->hello = 1;
		pid_add(t, strtol(rest, NULL, 10), 1, 1);
		return;
	case 'F':
		pid_add(t, strtol(rest, NULL, 10), 0, 1);
		return;
	case 'X':
		pid_add(t, strtol(rest, NULL, 10), -1, -1);
		root_exec(t, rest);
		return;
	case 'x':
		pid_add(t, strtol(rest, NULL, 10), 1, 1);
		if (strtol(rest, NULL, 10) == t->root)
			t->exec_pending = 0;
		return;
	case 'E':
		pid_add(t, strtol(rest, NULL, 10), 0, -1);
		return;
	case 'R': case 'S': case 'M': case 'D': case 'W':
		break;
	default:
		return;
	}
	unescape(rest);
	if (rest[0] != '/') {   /* the shim could not make it absolute */
		if (kind != 'W')
			step_warn_unrecordable(t->wl, rest, "the tracer saw it relative "
			                       "to an unknown folder");
		return;
	}
	if (strlen(rest) < sizeof path) {   /* resolved where text cannot */
		memcpy(path, rest, strlen(rest) + 1);
		dep_path_resolve(path, sizeof path);
		rest = path;
	} else {
		dep_path_clean(rest);   /* too long to record anyway */
	}
	if (kind == 'W') {
		if (!own_file(t, rest) && !write_harmless(rest) && t->bad[0] == '\0')
			snprintf(t->bad, sizeof t->bad, "%.*s", (int)sizeof t->bad - 1, rest);
		return;
	}
	if (own_file(t, rest))
		return;
	trace_look(t, rest, kind);
}

/* Feed the trace's lines from off on (this run's; scratch.c) to
 * trace_line, one at a time, read in chunks (memory is a chunk, grown only
 * for a record longer than one; records are a few KiB at most). 0, or
 * KILN_ENOTFOUND: no trace, KILN_ERANGE: one bigger than TRACE_MAX (a
 * runaway tool), not read at all: untraced. */
static int
trace_read_file(struct trace_read *t, const char *path, off_t off)
{
	size_t cap = 16384, have = 0;
	struct stat st;
	char *buf, *line, *nl;
	off_t pos = off;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return KILN_ENOTFOUND;
	if (fstat(fd, &st) != 0 || st.st_size <= off) {
		close(fd);
		return KILN_ENOTFOUND;
	}
	if ((uint64_t)(st.st_size - off) > TRACE_MAX) {
		close(fd);
		return KILN_ERANGE;
	}
	if ((buf = malloc(cap)) == NULL) {
		t->oom = 1;
		close(fd);
		return 0;
	}
	/* stop at the size seen: a process the tool left behind may still
	 * be appending */
	while (!t->oom && pos < st.st_size) {
		size_t want = cap - have;
		ssize_t n;
		if (want == 0) {   /* one record fills the buffer */
			char *nb = realloc(buf, 2 * cap);
			if (nb == NULL) {
				t->oom = 1;
				break;
			}
			buf = nb;
			cap *= 2;
			continue;
		}
		if ((off_t)want > st.st_size - pos)
			want = (size_t)(st.st_size - pos);
		if ((n = pread(fd, buf + have, want, pos)) < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			t->unread = n < 0;   /* what was read counts; untraced */
			break;               /* 0: cut short meanwhile */
		}
		pos += n;
		have += (size_t)n;
		for (line = buf; (nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL;
		     line = nl + 1) {
			*nl = '\0';
			trace_line(t, line);
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
	}
	/* a last line without its newline is a record cut short (a killed
	 * child): not read */
	free(buf);
	close(fd);
	return 0;
}

/* Append t's paths not yet in n->disc (sorted, unique). */
static int
disc_merge(struct trace_read *t)
{
	struct node *n = t->n;
	size_t total = n->ndisc, at;
	char **all;
	int rv;

	if (t->npaths > 1)
		qsort(t->paths, t->npaths, sizeof *t->paths, str_cmp);
	if ((all = calloc(n->ndisc + t->npaths + 1, sizeof *all)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n->ndisc; i++)
		all[i] = n->disc[i];
	at = total;
	for (size_t i = 0; i < t->npaths; i++) {
		int dup = i > 0 && strcmp(t->paths[i], t->paths[i - 1]) == 0;
		for (size_t k = 0; !dup && k < n->ndisc; k++)
			dup = strcmp(n->disc[k], t->paths[i]) == 0;
		if (!dup)
			all[at++] = t->paths[i];
	}
	rv = step_set_disc(n, all, at);
	free(all);
	return rv;
}

int
trace_finish(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
             const char *dir, struct warn_list *wl)
{
	struct trace_read t = {0};
	char path[PATH_MAX + 16];
	int rv = 0;

	n->traced = 0;
	n->ndisc_depfile = n->ks->tool->depfile ? n->ndisc : 0;
	if (!n->ks->tool->depfile && step_set_disc(n, NULL, 0) != 0) {
		set_error(n, "%s: out of memory", n->ks->url);
		return KILN_ENOMEM;
	}
	if (e->trace_shim[0] == '\0' || n->ks->tool->notrace)
		return 0;
	t.e = e;
	t.g = g;
	t.n = n;
	t.wl = wl;
	t.scratch = dir;
	scratch_path(e, n->w->scratch, ".d", 1, t.depfile, sizeof t.depfile);
	scratch_path(e, n->w->scratch, ".trace", 1, t.trace, sizeof t.trace);
	snprintf(path, sizeof path, "%s", t.trace);
	t.lroot = strlen(e->root);
	t.lscratch = strlen(dir);
	pid_add(&t, (long)pid, -1, 0);   /* the tool's own first image */
	t.root = (long)pid;
	if (trace_read_file(&t, path, n->w->trace_off) != 0) {
		free(t.pids);
		return 0;   /* no process loaded the shim, or a runaway trace */
	}
	if (t.exec_pending)
		memcpy(t.exec_ran, t.exec_try, sizeof t.exec_ran);
	if (t.oom) {
		set_error(n, "%s: out of memory reading its file-access trace", n->ks->url);
		rv = KILN_ENOMEM;
	} else if (t.bad[0]) {
		const char *shown = t.bad;
		if (strncmp(shown, e->root, t.lroot) == 0 && shown[t.lroot] == '/')
			shown += t.lroot + 1;
		/* a project file: its change is the build's own (selfwrite.c) */
		selfwrite_note(e, n, shown != t.bad ? shown : NULL);
		set_error(n, "%s: the tool wrote outside its scratch folder: %s",
		          n->ks->url, shown);
		rv = KILN_EFAILED;
	} else if ((rv = disc_merge(&t)) != 0) {
		set_error(n, "%s: out of memory", n->ks->url);
	/* what its own process exec'd, for its key; not a run on an agent,
	 * whose programs are that machine's */
	} else if (t.hello && n->w->machine[0] == '\0' &&
	           (rv = tool_runs_learn(e, n, t.exec_ran)) != 0) {
		set_error(n, "%s: %s", n->ks->url, kiln_strerror(rv));
	} else {
		n->traced = t.hello && !t.unread;
		for (size_t i = 0; i < t.cappids; i++)
			if (t.pids[i].used && (t.pids[i].n < 0 || t.pids[i].live > 0))
				n->traced = 0;   /* no hello, or killed */
	}
	for (size_t i = 0; i < t.npaths; i++)
		free(t.paths[i]);
	free(t.paths);
	free(t.pids);
	return rv;
}
