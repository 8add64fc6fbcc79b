/* resolve_inputs.c — a step's inputs and a profile's bundles.
 *
 * An input is a source file (a path, or a glob over the sorted source
 * list, walking only the files under its fixed prefix), a prerequisite
 * step ("@url"), or several ("@url/glob"). A named file that does not
 * exist yet stays an input with a warning; one that is not a regular file
 * inside the project is refused. Bundles match their URL patterns against
 * the profile's URL-sorted steps. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "resolve_int.h"

/* The first of the sorted source files not before prefix. */
size_t
resolve_file_range(const srcset *src, const char *prefix)
{
	const char *const *files = src->files.items;
	size_t lo = 0, hi = src->files.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(files[mid], prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- inputs and links ---- */

static int
str_order(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
file_known(const struct rs *r, const char *path)
{
	char abs[PATH_MAX * 2], real[PATH_MAX];
	size_t rl = strlen(r->realroot);
	struct stat st;

	if (r->src->files.n > 0 && bsearch(&path, r->src->files.items, r->src->files.n,
	                                   sizeof(char *), str_order) != NULL)
		return 1;
	snprintf(abs, sizeof abs, "%s/%s", r->root, path);
	if (rl == 0 || realpath(abs, real) == NULL || stat(real, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return strncmp(real, r->realroot, rl) == 0 && real[rl] == '/';
}

/* 1 when nothing at all is at path (no file, no symlink, no folder). */
static int
file_absent(const struct rs *r, const char *path)
{
	char abs[PATH_MAX * 2];
	struct stat st;

	snprintf(abs, sizeof abs, "%s/%s", r->root, path);
	return lstat(abs, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

/* A source file named by its path. One that does not exist yet stays an
 * input, with a warning: the build engine fails that step alone (naming
 * the file and the step's file:line) until the file appears, so one
 * missing file does not stop the whole project. What exists but is not a
 * regular file inside the project (a folder, a symlink leading out) is
 * still refused. */
static void
literal_input(struct rs *r, struct sb *s, const struct desc_input *in,
              const char *path)
{
	if (file_known(r, path))
		vec_push(r->tmp, &s->inputs, &path);
	else if (file_absent(r, path)) {
		vec_push(r->tmp, &s->inputs, &path);
		/* no URL in it: a rule's steps then share one warning */
		diag_add(r->dg, KILN_DIAG_WARNING, in->loc, in->field, "input file '%s' "
		         "does not exist: %s until it does", path, s->st.from_rule
		         ? "each step of this rule fails" : "this step fails");
	} else
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "input file '%s' "
		         "is not a regular file inside the project", path);
}

/* One declared input of step s: files, or prerequisite steps. */
void
resolve_input(struct rs *r, struct sb *s, const struct desc_input *in)
{
	const char *field = in->field;
	const char *pattern = in->text[0] == '@' ? in->text + 1 : in->path;
	const char *why;
	kiln_glob *g;
	size_t n = 0, idx;

	if (glob_compile(pattern, &g, &why) != 0) {
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, field, "'%s': %s", in->text,
		         why ? why : "malformed pattern");
		return;
	}
	if (in->text[0] == '@' && glob_is_literal(g)) {
		if (strmap_get(&r->urls, pattern, &idx) && !((struct sb *)r->steps.items)[idx].dead)
			vec_push(r->tmp, &s->needs, &pattern);
		else
			diag_add(r->dg, KILN_DIAG_ERROR, in->loc, field, "'%s' names no "
			         "asset: unknown URL '%s' in profile '%s'", in->text, pattern,
			         r->profile);
		n = 1;
	} else if (in->text[0] == '@') {
		const struct sb *all = r->steps.items;
		for (size_t i = 0; i < r->steps.n; i++)
			if (!all[i].dead && &all[i] != s && glob_match(g, all[i].st.url)) {
				vec_push(r->tmp, &s->needs, &all[i].st.url);
				n++;
			}
	} else if (glob_is_literal(g)) {
		literal_input(r, s, in, pattern);
		n = 1;
	} else {
		const char *const *files = r->src->files.items;
		const char *prefix = glob_prefix(g);
		size_t pl = strlen(prefix);
		for (size_t i = resolve_file_range(r->src, prefix);
		     i < r->src->files.n && strncmp(files[i], prefix, pl) == 0; i++)
			if (glob_match(g, files[i])) {
				vec_push(r->tmp, &s->inputs, &files[i]);
				n++;
			}
	}
	if (n == 0)
		diag_add(r->dg, KILN_DIAG_WARNING, in->loc, field, "'%s' matches "
		         "nothing in profile '%s'", in->text, r->profile);
	glob_free(g);
}

/* Sort and de-duplicate a vec of strings (in r->tmp) into a plain array
 * of just their count in r->a. NULL only for none, or out of memory. */
const char **
resolve_sorted_unique(struct rs *r, vec *v, size_t *n)
{
	const char **p, **out;
	size_t w;

	vec_sort_unique_str(v);
	p = v->items;
	w = v->n;
	*n = 0;
	if (w == 0 || (out = arena_alloc_raw(r->a, w * sizeof *out)) == NULL)
		return NULL;
	memcpy(out, p, w * sizeof *out);
	*n = w;
	return out;
}

/* The first of the URL-sorted steps not before prefix. */
static size_t
first_with_prefix(const kiln_step *steps, size_t n, const char *prefix)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(steps[mid].url, prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void
resolve_bundles(struct rs *r, kiln_plan *plan, const kiln_step *steps,
                size_t n)
{
	vec out;

	vec_init(&out, sizeof(kiln_bundle_plan));
	for (size_t f = 0; f < r->nfiles; f++) {
		const struct desc_bundle *b = r->files[f]->bundles.items;
		for (size_t i = 0; i < r->files[f]->bundles.n; i++) {
			kiln_bundle_plan bp = {b[i].name, NULL, 0, b[i].loc};
			vec urls;
			vec_init(&urls, sizeof(const char *));
			for (size_t j = 0; j < b[i].patterns.n; j++) {
				const struct desc_input *in = (const struct desc_input *)b[i].patterns.items + j;
				const char *why;
				kiln_glob *g;
				size_t before = urls.n;
				if (glob_compile(in->text, &g, &why) != 0) {
					diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': %s",
					         in->text, why ? why : "malformed pattern");
					continue;
				}
				for (size_t k = first_with_prefix(steps, n, glob_prefix(g));
				     k < n && strncmp(steps[k].url, glob_prefix(g),
				                      strlen(glob_prefix(g))) == 0; k++)
					if (glob_match(g, steps[k].url))
						vec_push(r->tmp, &urls, &steps[k].url);
				if (urls.n == before)
					diag_add(r->dg, glob_is_literal(g) ? KILN_DIAG_ERROR : KILN_DIAG_WARNING,
					         in->loc, in->field, glob_is_literal(g)
					         ? "bundle '%s' names unknown URL '%s' in profile '%s'"
					         : "bundle '%s': '%s' matches no URL in profile '%s'",
					         b[i].name, in->text, r->profile);
				glob_free(g);
			}
			bp.urls = resolve_sorted_unique(r, &urls, &bp.nurls);
			vec_push(r->a, &out, &bp);
		}
	}
	plan->bundles = out.items;
	plan->nbundles = out.n;
}
