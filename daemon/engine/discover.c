/* discover.c — what a step's run revealed it used, after its tool
 * exited 0: its depfile (tools with `depfile: true`), then its file-access
 * trace (trace.c), each path put through the one policy of
 * dep_path.h, and the warnings for paths kiln could not record
 * (docs/build.md, "Discovered paths").
 *
 * A path is recorded (n->disc, the result's FileDeps) when it is a project
 * file or an external one. It is left out silently when it is the
 * machine's (a name looked for in vain directly in "/" too), kiln's own
 * (.kiln/), or one of the step's inputs under build/ (those are in its
 * key); trace.c also leaves out a tool's probes of its own command line
 * (probe_words.c). Everything else is a warning in the
 * result (n->warnings, ActionResult.warnings): a use of another step's
 * output under build/ the step does not declare, or a path that cannot be
 * a store key. Warnings are capped at WARN_MAX, then one "and N more"
 * line counting the distinct others.
 *
 * Threads: engine workers, on nodes they hold. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dep_path.h"
#include "depfile.h"
#include "engine_int.h"
#include "discover.h"
#include "scratch.h"
#include "step.h"

#define WARN_PATH_SHOWN 200 /* a path's bytes shown in a warning */

/* ---- warnings -------------------------------------------------------------- */

/* Add a warning (duplicates dropped). Past WARN_MAX only its hash is kept,
 * to count the distinct others. */
static void
warn_add(struct warn_list *wl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
warn_add(struct warn_list *wl, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < wl->n; i++)
		if (strcmp(wl->v[i], buf) == 0)
			return;
	if (wl->n < WARN_MAX) {
		if ((wl->v[wl->n] = strdup(buf)) == NULL)
			wl->oom = 1;
		else
			wl->n++;
		return;
	}
	if (wl->nextra == wl->capextra) {
		size_t ncap = wl->capextra ? 2 * wl->capextra : 64;
		kiln_id *nv = realloc(wl->extra, ncap * sizeof *nv);
		if (nv == NULL) {
			wl->oom = 1;
			return;
		}
		wl->extra = nv;
		wl->capextra = ncap;
	}
	kiln_id_of_buf(buf, strlen(buf), &wl->extra[wl->nextra++]);
}

static int
id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(kiln_id));
}

/* The number of distinct warnings past the kept ones. */
static size_t
warn_more(struct warn_list *wl)
{
	size_t n = 0;

	if (wl->nextra > 1)
		qsort(wl->extra, wl->nextra, sizeof *wl->extra, id_cmp);
	for (size_t i = 0; i < wl->nextra; i++)
		n += i == 0 || id_cmp(&wl->extra[i], &wl->extra[i - 1]) != 0;
	return n;
}

static void
warn_free(struct warn_list *wl)
{
	for (size_t i = 0; i < wl->n; i++)
		free(wl->v[i]);
	free(wl->extra);
	free(wl->inputs);
	free(wl->folders);
	memset(wl, 0, sizeof *wl);
}

size_t
step_nwarnings(const struct node *n)
{
	size_t k = 0;

	while (n->warnings != NULL && n->warnings[k] != NULL)
		k++;
	return k;
}

void
step_warnings_free(struct node *n)
{
	for (size_t i = 0; n->warnings != NULL && n->warnings[i] != NULL; i++)
		free(n->warnings[i]);
	free(n->warnings);
	n->warnings = NULL;
}

int
step_set_warnings(struct node *n, char *const *v, size_t count)
{
	char **nv = NULL;

	if (count > 0 && (nv = calloc(count + 1, sizeof *nv)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < count; i++)
		if ((nv[i] = strdup(v[i])) == NULL) {
			while (i > 0)
				free(nv[--i]);
			free(nv);
			return KILN_ENOMEM;
		}
	step_warnings_free(n);
	n->warnings = nv;
	return 0;
}

/* Make wl the result's warnings (and free it). 0 or KILN_ENOMEM. */
static int
warn_finish(struct node *n, struct warn_list *wl)
{
	size_t more = warn_more(wl);
	int rv = wl->oom ? KILN_ENOMEM : 0;

	if (rv == 0 && more > 0) {
		if (asprintf(&wl->v[wl->n], "and %zu more warning%s like these", more,
		             more == 1 ? "" : "s") < 0)
			rv = KILN_ENOMEM;
		else
			wl->n++;
	}
	if (rv == 0)
		rv = step_set_warnings(n, wl->v, wl->n);
	warn_free(wl);
	return rv;
}

/* path as a warning shows it: control characters as \xNN, cut short. */
static void
path_show(const char *path, char *out, size_t len)
{
	size_t j = 0;

	for (const unsigned char *p = (const unsigned char *)path; *p && j + 5 < len; p++) {
		if ((size_t)((const char *)p - path) >= WARN_PATH_SHOWN) {
			snprintf(out + j, len - j, "...");
			return;
		}
		if (*p < 0x20 || *p == 0x7f)
			j += (size_t)snprintf(out + j, len - j, "\\x%02x", *p);
		else
			out[j++] = (char)*p;
	}
	out[j] = '\0';
}

void
step_warn_unrecordable(struct warn_list *wl, const char *path, const char *why)
{
	char shown[WARN_PATH_SHOWN + 64];

	path_show(path, shown, sizeof shown);
	warn_add(wl, "cannot record %s as a dependency (%s): editing it will not "
	         "rerun the step", shown, why);
}

/* ---- the policy, for one path -------------------------------------------- */

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* wl->inputs: the prerequisites' outputs n's tool was given (with
 * `@URL#name`, that one: another output of that step is not in its key,
 * so reading it is undeclared) and the outputs its run was handed by
 * `kiln need`, sorted. 0 or KILN_ENOMEM. */
static int
build_inputs_make(struct warn_list *wl, const struct graph *g, const struct node *n)
{
	size_t cap = n->nrneeds + n->ks->norder;

	wl->inputs_made = 1;
	if ((wl->inputs = calloc(cap + 1, sizeof *wl->inputs)) == NULL ||
	    (wl->folders = calloc(cap + 1, sizeof *wl->folders)) == NULL)
		return KILN_ENOMEM;
	for (size_t o = 0; o < n->ks->norder; o++) {
		const struct node *d;
		size_t i;
		if (step_input_output(g, &n->ks->order[o], &d, &i) == 0) {
			wl->inputs[wl->ninputs++] = d->outpaths[i];
			if (d->ks->outputs[i].folder)
				wl->folders[wl->nfolders++] = d->outpaths[i];
		}
	}
	for (uint32_t i = 0; i < n->nrneeds; i++) {
		const struct need_dep *nd = &n->rneeds[i];
		const struct node *d;
		if (nd->out >= 0 && nd->idx < g->n) {
			d = &g->nodes[nd->idx];
			wl->inputs[wl->ninputs++] = d->outpaths[nd->out];
			if (d->ks->outputs[nd->out].folder)
				wl->folders[wl->nfolders++] = d->outpaths[nd->out];
		}
	}
	qsort(wl->inputs, wl->ninputs, sizeof *wl->inputs, str_cmp);
	return 0;
}

/* Whether rel (under build/) is one of n's inputs: its prerequisites'
 * outputs, or an output its run was handed by `kiln need`, or a file or
 * folder inside one that is a folder output (a listing: only that). Out
 * of memory it is taken for one (no warning is better than a false one).
 * What a folder output holds is in its key (its tree record's id). */
static int
build_input(struct warn_list *wl, const struct graph *g, const struct node *n,
            const char *rel, int listing)
{
	if (!wl->inputs_made && build_inputs_make(wl, g, n) != 0)
		return 1;
	if (!listing &&
	    bsearch(&rel, wl->inputs, wl->ninputs, sizeof *wl->inputs, str_cmp) != NULL)
		return 1;
	for (size_t i = 0; i < wl->nfolders; i++) {
		size_t l = strlen(wl->folders[i]);
		if (strncmp(rel, wl->folders[i], l) == 0 && (rel[l] == '\0' || rel[l] == '/'))
			return 1;
	}
	return 0;
}

/* Warn about rel under build/: another step's output (or no step's), which
 * n does not declare. */
static void
warn_build(struct warn_list *wl, const struct graph *g, const char *rel)
{
	char shown[WARN_PATH_SHOWN + 64];

	path_show(rel, shown, sizeof shown);
	for (uint32_t k = 0; k < g->n; k++) {
		const struct node *d = &g->nodes[k];
		for (size_t i = 0; i < d->ks->noutputs; i++)
			if (strcmp(d->outpaths[i], rel) == 0) {
				char url[600];   /* URL#name: what inputs: would name */
				step_output_url(d, i, url, sizeof url);
				warn_add(wl, "used %s, an output of step %s it does not "
				         "declare: kiln cannot track that; declare it as an "
				         "input (\"@%s\") or ask for it with `kiln need %s`",
				         shown, d->ks->url, url, d->ks->url);
				return;
			}
	}
	warn_add(wl, "used %s under build/, no output of a step it declares: kiln "
	         "cannot track that; declare the step that makes it as an input "
	         "(\"@URL\") or ask for it with `kiln need URL`", shown);
}

static int
is_folder(const struct engine *e, const char *path)
{
	struct stat st;

	return fstatat(path[0] == '/' ? AT_FDCWD : e->rootfd, path, &st, 0) == 0 &&
	       S_ISDIR(st.st_mode);
}

int
step_dep_name(struct engine *e, const struct graph *g, const struct node *n,
              const char *path, int listing, int missing, struct warn_list *wl,
              char *out, size_t outlen)
{
	const struct dep_path_policy pp = {e->root, getenv("HOME")};
	char abs[PATH_MAX * 2];
	enum dep_path_class cls;
	int w = path[0] == '/' ? snprintf(abs, sizeof abs, "%s", path)
	                       : snprintf(abs, sizeof abs, "%s/%s", e->root, path);

	/* the file the tool reached, where a symlink before a ".." decides */
	if (w >= 0 && (size_t)w < sizeof abs) {
		dep_path_resolve(abs, sizeof abs);
		path = abs;
	}
	/* a name looked for in vain directly in "/" is the machine's: no
	 * project creates files there, and zstd's pseudo-names for its
	 * standard streams ("/" "*stdin*\\" and "/" "*stdout*\\", stat'ed
	 * whenever it reads a pipe) are no store key either */
	if (missing && path[0] == '/' && path[1] != '\0' && strchr(path + 1, '/') == NULL)
		return 0;
	cls = dep_path_classify(&pp, path, listing, out, outlen);

	if (cls == DEP_PATH_IGNORED)
		return 0;
	if (cls == DEP_PATH_INVALID) {
		step_warn_unrecordable(wl, out, "not a valid store key: a control "
		                       "character or backslash, or too long");
		return 0;
	}
	/* a search path into build/ probes for names no step makes: a miss
	 * there is no use of an output; nor is a folder stat'ed, anywhere (a
	 * listing is) */
	if (cls == DEP_PATH_BUILD) {
		if (!missing && !build_input(wl, g, n, out, listing) &&
		    (listing || !is_folder(e, out)))
			warn_build(wl, g, out);
		return 0;
	}
	return listing || missing || !is_folder(e, out);
}

/* ---- depfiles ----------------------------------------------------------------- */

/* Read the whole depfile at path: a malloc'd buffer (NUL-terminated) and
 * its length. 0, or a KILN_E* code with n->error set. */
static int
depfile_load(struct engine *e, struct node *n, const char *path, char **buf,
             size_t *len)
{
	struct stat st;
	int fd;

	*buf = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0 ||
	    st.st_size > (64 << 20)) {
		if (fd >= 0)
			close(fd);
		set_error(n, "%s: the tool did not write its depfile (${depfile}, "
		          "%s)", n->ks->url, path + strlen(e->root) + 1);
		return KILN_ENOTFOUND;
	}
	*len = (size_t)st.st_size;
	if ((*buf = malloc(*len + 1)) == NULL || (size_t)read(fd, *buf, *len) != *len) {
		close(fd);
		free(*buf);
		*buf = NULL;
		set_error(n, "%s: cannot read its depfile", n->ks->url);
		return KILN_EIO;
	}
	(*buf)[*len] = '\0';
	close(fd);
	return 0;
}

/* Read the step's depfile (scratch_path ".d") into n->disc. 0, or a
 * KILN_E* code with n->error set. */
static int
depfile_read(struct engine *e, const struct graph *g, struct node *n,
             const char *dir, struct warn_list *wl)
{
	char path[PATH_MAX + 16], **deps = NULL, **keep = NULL, *buf;
	size_t ndeps = 0, nkeep = 0, len = 0;
	int rv;

	(void)dir;
	scratch_path(e, n->w->scratch, ".d", 1, path, sizeof path);
	if ((rv = depfile_load(e, n, path, &buf, &len)) != 0)
		return rv;
	rv = depfile_parse(buf, len, &deps, &ndeps);
	free(buf);
	if (rv != 0) {
		set_error(n, "%s: its depfile is not make syntax (%s)", n->ks->url,
		          kiln_strerror(rv));
		return rv;
	}
	if ((keep = calloc(ndeps + 1, sizeof *keep)) == NULL)
		rv = KILN_ENOMEM;
	for (size_t i = 0; rv == 0 && i < ndeps; i++) {
		char name[PATH_MAX];
		int dup = 0;
		if (!step_dep_name(e, g, n, deps[i], 0, 0, wl, name, sizeof name))
			continue;
		/* "a/../b.h" and "b.h" are one file now */
		for (size_t k = 0; k < nkeep && !dup; k++)
			dup = strcmp(keep[k], name) == 0;
		if (!dup && (keep[nkeep] = strdup(name)) == NULL)
			rv = KILN_ENOMEM;
		else if (!dup)
			nkeep++;
	}
	if (rv == 0)
		rv = step_set_disc(n, keep, nkeep);
	for (size_t i = 0; keep && i < nkeep; i++)
		free(keep[i]);
	free(keep);
	depfile_free(deps, ndeps);
	if (rv != 0) {
		set_error(n, "%s: out of memory reading its depfile", n->ks->url);
		return rv;
	}
	return 0;
}

int
step_deps_read(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
               const char *dir)
{
	struct warn_list wl = {0};
	int rv = 0;

	if (n->ks->tool->depfile)
		rv = depfile_read(e, g, n, dir, &wl);
	if (rv == 0)
		rv = trace_finish(e, g, n, pid, dir, &wl);
	if (warn_finish(n, &wl) != 0 && rv == 0) {
		set_error(n, "%s: out of memory", n->ks->url);
		rv = KILN_ENOMEM;
	}
	return rv;
}
