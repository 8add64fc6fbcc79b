/* desc.c — kiln_desc: loading a project's descriptions, reloading one
 * changed file, and handing out plans and diagnostics.
 *
 * Each description file's model lives in its own arena, so a reload frees
 * and re-reads exactly that file; the source list and every profile's plan
 * are then rebuilt from all files (plans depend on all of them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "desc_int.h"
#include "kiln_store.h"

#define ROOT_FILE "kiln.yaml"
#define DESC_SUFFIX ".kiln.yaml"

struct kiln_desc {
	char *root;
	struct desc_file **files; /* [0] is kiln.yaml */
	size_t nfiles;
	arena src_a;              /* the source list and its diagnostics */
	diags src_dg;
	srcset src;
	struct plan_set ps;
	kiln_diag *all;           /* every diagnostic, sorted (malloc) */
	size_t nall, nerrors;
	const char **profile_names, **file_names; /* malloc */
	size_t nprofiles;
};

static struct desc_file *
file_new(const char *relpath)
{
	struct desc_file *f = calloc(1, sizeof *f);
	const char *slash = strrchr(relpath, '/');

	if (f == NULL)
		return NULL;
	diags_init(&f->dg, &f->a);
	f->relpath = arena_strdup(&f->a, relpath);
	f->dir = slash ? arena_strndup(&f->a, relpath, (size_t)(slash - relpath))
	               : arena_strdup(&f->a, "");
	f->is_root = strcmp(relpath, ROOT_FILE) == 0;
	if (f->relpath == NULL || f->dir == NULL) {
		arena_free(&f->a);
		free(f);
		return NULL;
	}
	return f;
}

static void
file_drop(struct desc_file *f)
{
	if (f != NULL) {
		desc_file_free(f);
		free(f);
	}
}

static int
file_add(kiln_desc *d, const char *relpath)
{
	struct desc_file **files = realloc(d->files, (d->nfiles + 1) * sizeof *files);
	struct desc_file *f;
	int rv;

	if (files == NULL)
		return KILN_ENOMEM;
	d->files = files;
	if ((f = file_new(relpath)) == NULL)
		return KILN_ENOMEM;
	if ((rv = desc_file_load(f, d->root)) != 0) {
		file_drop(f);
		return rv;
	}
	d->files[d->nfiles++] = f;
	return 0;
}

static int
diag_order(const void *a, const void *b)
{
	const kiln_diag *x = a, *y = b;
	int c;

	/* kiln.yaml first, then the other files by name */
	if ((c = (strcmp(y->loc.file, ROOT_FILE) == 0) - (strcmp(x->loc.file, ROOT_FILE) == 0)))
		return c;
	if ((c = strcmp(x->loc.file, y->loc.file)) != 0)
		return c;
	if (x->loc.line != y->loc.line)
		return x->loc.line < y->loc.line ? -1 : 1;
	if (x->loc.col != y->loc.col)
		return x->loc.col < y->loc.col ? -1 : 1;
	if ((c = strcmp(x->field, y->field)) != 0)
		return c;
	return strcmp(x->msg, y->msg);
}

static int
diags_append(kiln_desc *d, const diags *g, size_t *cap)
{
	const kiln_diag *in = g->list.items;

	for (size_t i = 0; i < g->list.n; i++) {
		if (d->nall == *cap) {
			size_t ncap = *cap ? *cap * 2 : 32;
			kiln_diag *n = realloc(d->all, ncap * sizeof *n);
			if (n == NULL)
				return KILN_ENOMEM;
			d->all = n;
			*cap = ncap;
		}
		d->all[d->nall] = in[i];
		if (d->all[d->nall].loc.file == NULL)
			d->all[d->nall].loc.file = "";
		d->nall++;
	}
	return 0;
}

/* Gather, sort and de-duplicate the diagnostics of every part (the same
 * problem found while resolving several profiles is reported once). */
static int
diags_merge(kiln_desc *d)
{
	size_t cap = 0, w = 0;
	int rv = 0;

	free(d->all);
	d->all = NULL;
	d->nall = d->nerrors = 0;
	for (size_t i = 0; i < d->nfiles && rv == 0; i++)
		rv = diags_append(d, &d->files[i]->dg, &cap);
	if (rv == 0)
		rv = diags_append(d, &d->src_dg, &cap);
	if (rv == 0)
		rv = diags_append(d, &d->ps.dg, &cap);
	if (rv != 0)
		return rv;
	if (d->nall > 1)
		qsort(d->all, d->nall, sizeof *d->all, diag_order);
	for (size_t i = 0; i < d->nall; i++)
		if (w == 0 || diag_order(&d->all[w - 1], &d->all[i]) != 0 ||
		    d->all[w - 1].level != d->all[i].level)
			d->all[w++] = d->all[i];
	d->nall = w;
	for (size_t i = 0; i < w; i++)
		d->nerrors += d->all[i].level == KILN_DIAG_ERROR;
	return 0;
}

/* Walk the sources, read every *.kiln.yaml, resolve the profiles. */
static int
desc_build(kiln_desc *d, int reread)
{
	const struct desc_file *root = d->files[0];
	kiln_loc loc = {ROOT_FILE, root->sources_loc.line, root->sources_loc.col};
	int rv;

	arena_free(&d->src_a);
	diags_init(&d->src_dg, &d->src_a);
	rv = srcwalk(d->root, root->sources.items, root->sources.n, &d->src_a,
	             &d->src_dg, loc, &d->src);
	if (rv != 0)
		return rv;
	for (size_t i = 0; reread && i < d->src.descs.n && rv == 0; i++)
		rv = file_add(d, ((const char *const *)d->src.descs.items)[i]);
	if (rv != 0)
		return rv;
	arena_free(&d->ps.a);
	diags_init(&d->ps.dg, &d->ps.a);
	if ((rv = desc_resolve(d->root, d->files, d->nfiles, &d->src, &d->ps)) != 0)
		return rv;
	if ((rv = diags_merge(d)) != 0)
		return rv;
	free(d->profile_names);
	free(d->file_names);
	d->nprofiles = d->files[0]->profiles.n;
	d->profile_names = calloc(d->nprofiles + 1, sizeof *d->profile_names);
	d->file_names = calloc(d->nfiles + 1, sizeof *d->file_names);
	if (d->profile_names == NULL || d->file_names == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < d->nprofiles; i++)
		d->profile_names[i] = ((const struct desc_profile *)d->files[0]->profiles.items)[i].name;
	for (size_t i = 0; i < d->nfiles; i++)
		d->file_names[i] = d->files[i]->relpath;
	return d->nerrors ? KILN_EINVAL : 0;
}

static void
desc_clear(kiln_desc *d)
{
	for (size_t i = 0; i < d->nfiles; i++)
		file_drop(d->files[i]);
	free(d->files);
	d->files = NULL;
	d->nfiles = 0;
	arena_free(&d->src_a);
	arena_free(&d->ps.a);
}

/* Load everything from scratch into d (whose root is set). */
static int
desc_full(kiln_desc *d)
{
	int rv;

	desc_clear(d);
	if ((rv = file_add(d, ROOT_FILE)) != 0)
		return rv;
	return desc_build(d, 1);
}

int
kiln_desc_load(const char *root, kiln_desc **dp)
{
	char path[4096];
	kiln_desc *d;
	int rv;

	*dp = NULL;
	snprintf(path, sizeof path, "%s/" ROOT_FILE, root);
	if (access(path, F_OK) != 0)
		return errno == ENOENT ? KILN_ENOTFOUND : kiln_err_from_errno(errno);
	if ((d = calloc(1, sizeof *d)) == NULL || (d->root = strdup(root)) == NULL) {
		free(d);
		return KILN_ENOMEM;
	}
	rv = desc_full(d);
	if (rv == KILN_ENOMEM || d->nfiles == 0) {
		kiln_desc_free(d);
		return rv ? rv : KILN_ENOMEM;
	}
	*dp = d;
	return rv;
}

int
kiln_desc_reload(kiln_desc *d, const char *relpath)
{
	size_t n = strlen(relpath), s = sizeof DESC_SUFFIX - 1, i;
	char path[4096];
	struct stat st;
	int rv;

	if (strcmp(relpath, ROOT_FILE) == 0)
		return desc_full(d); /* sources or profiles may have changed */
	if (kiln_url_check(relpath) != 0 || n <= s || strcmp(relpath + n - s, DESC_SUFFIX) != 0)
		return KILN_EINVAL;
	for (i = 1; i < d->nfiles && strcmp(d->files[i]->relpath, relpath) != 0; i++)
		;
	if (i < d->nfiles) {
		file_drop(d->files[i]);
		memmove(&d->files[i], &d->files[i + 1], (d->nfiles - i - 1) * sizeof *d->files);
		d->nfiles--;
	}
	snprintf(path, sizeof path, "%s/%s", d->root, relpath);
	if (stat(path, &st) == 0 && (rv = file_add(d, relpath)) != 0)
		return rv;
	return desc_build(d, 0);
}

void
kiln_desc_free(kiln_desc *d)
{
	if (d == NULL)
		return;
	desc_clear(d);
	free(d->all);
	free(d->profile_names);
	free(d->file_names);
	free(d->root);
	free(d);
}

size_t
kiln_desc_diags(const kiln_desc *d, const kiln_diag **out)
{
	*out = d->all;
	return d->nall;
}

size_t
kiln_desc_nerrors(const kiln_desc *d)
{
	return d->nerrors;
}

const char *
kiln_desc_root(const kiln_desc *d)
{
	return d->root;
}

const char *
kiln_desc_project(const kiln_desc *d)
{
	return d->files[0]->project ? d->files[0]->project : "";
}

const char *
kiln_desc_path(const kiln_desc *d)
{
	return d->files[0]->path_str;
}

kiln_mat_mode
kiln_desc_materialize(const kiln_desc *d)
{
	return (kiln_mat_mode)d->files[0]->materialize;
}

const kiln_timeout *
kiln_desc_tool_timeout(const kiln_desc *d, const kiln_tool *t)
{
	const kiln_timeout *to = t->timeout.text != NULL ? &t->timeout :
	                         &d->files[0]->tool_timeout;

	return to->text != NULL && to->s > 0 ? to : NULL;
}

const kiln_cache_desc *
kiln_desc_cache(const kiln_desc *d)
{
	return &d->files[0]->cache;
}

kiln_cache_mode
kiln_cache_mode_parse(const char *s)
{
	if (s == NULL)
		return KILN_CACHE_MODE_UNSET;
	if (strcmp(s, "off") == 0)
		return KILN_CACHE_MODE_OFF;
	if (strcmp(s, "read") == 0)
		return KILN_CACHE_MODE_READ;
	if (strcmp(s, "readwrite") == 0)
		return KILN_CACHE_MODE_READWRITE;
	return KILN_CACHE_MODE_UNSET;
}

kiln_mat_mode
kiln_mat_mode_parse(const char *s)
{
	if (s != NULL && strcmp(s, "copy") == 0)
		return KILN_MAT_COPY;
	if (s != NULL && strcmp(s, "hardlink") == 0)
		return KILN_MAT_HARDLINK;
	return KILN_MAT_UNSET;
}

size_t
kiln_desc_profiles(const kiln_desc *d, const char *const **names)
{
	*names = d->profile_names;
	return d->nprofiles;
}

const kiln_plan *
kiln_desc_plan(const kiln_desc *d, const char *profile)
{
	const kiln_plan *p = d->ps.plans.items;

	for (size_t i = 0; i < d->ps.plans.n; i++)
		if (strcmp(p[i].profile, profile) == 0)
			return &p[i];
	return NULL;
}

size_t
kiln_desc_files(const kiln_desc *d, const char *const **files)
{
	*files = d->file_names;
	return d->nfiles;
}

size_t
kiln_desc_dirs(const kiln_desc *d, const char *const **dirs)
{
	*dirs = d->src.dirs.items;
	return d->src.dirs.n;
}
