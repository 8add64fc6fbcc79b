/* resolve_inputs.c — a step's inputs.
 *
 * An input is a source file (a path, or a glob over the sorted source
 * list, walking only the files under its fixed prefix), a prerequisite
 * step ("@url"), or several ("@url/glob"), or one output of them
 * ("@url#name"). Each keeps its written place in the step's order (what
 * the tool's ${in...} lists), besides the sorted sets of files and steps
 * the engine hashes and links. A named file that does not
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

/* Add source file path to s, in its place. */
static void
file_push(struct rs *r, struct sb *s, const char *path)
{
	kiln_input it = {path, NULL, NULL};

	vec_push(r->tmp, &s->inputs, &path);
	vec_push(r->tmp, &s->order, &it);
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
		file_push(r, s, path);
	else if (file_absent(r, path)) {
		file_push(r, s, path);
		/* no URL in it: a rule's steps then share one warning */
		diag_add(r->dg, KILN_DIAG_WARNING, in->loc, in->field, "input file '%s' "
		         "does not exist: %s until it does", path, s->st.from_rule
		         ? "each step of this rule fails" : "this step fails");
	} else
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "input file '%s' "
		         "is not a regular file inside the project", path);
}

/* 1 when s is an output name (docs/format.md, "Profiles": 1-64 of
 * letters, digits, '_', '-' and '.'). */
static int
output_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

/* Split "@URL#name" (ref without the '@') into its URL pattern and
 * output name (*name NULL: every output). A URL may itself hold '#', so
 * a reference that names a step whole is that step; otherwise the text
 * after the last '#', when it is a valid output name, is the name. */
static const char *
ref_split(struct rs *r, const char *ref, const char **name)
{
	const char *hash = strrchr(ref, '#');
	size_t idx;

	*name = NULL;
	if (hash == NULL || hash == ref || !output_name_ok(hash + 1) ||
	    (strmap_get(&r->urls, ref, &idx) && !((struct sb *)r->steps.items)[idx].dead))
		return ref;
	*name = hash + 1;
	return arena_strndup(r->tmp, ref, (size_t)(hash - ref));
}

/* Make step t a prerequisite of s: every output of it, or the one named
 * (an unknown name is an error naming t's outputs). */
static void
need_push(struct rs *r, struct sb *s, const struct desc_input *in,
          const struct sb *t, const char *name)
{
	size_t k, first = 0, end = t->st.noutputs;

	if (name != NULL) {
		for (k = 0; k < t->st.noutputs && strcmp(t->st.outputs[k].name, name) != 0; k++)
			;
		if (k == t->st.noutputs) {
			char have[300] = "";
			for (size_t i = 0; i < t->st.noutputs && strlen(have) < 200; i++)
				snprintf(have + strlen(have), sizeof have - strlen(have), "%s'%s'",
				         i ? ", " : "", t->st.outputs[i].name);
			diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': step '%s' "
			         "has no output '%s' (its outputs: %s)", in->text, t->st.url,
			         name, have);
			return;
		}
		first = k;
		end = k + 1;
	}
	vec_push(r->tmp, &s->needs, &t->st.url);
	for (k = first; k < end; k++) {
		kiln_input it = {NULL, t->st.url, t->st.outputs[k].name};
		vec_push(r->tmp, &s->order, &it);
	}
}

static int
sb_url_order(const void *a, const void *b)
{
	return strcmp((*(const struct sb *const *)a)->st.url,
	              (*(const struct sb *const *)b)->st.url);
}

/* "@URL", "@URL#name", "@URL glob" or "@URL glob#name": prerequisite
 * steps, a glob's in URL order. 0, or KILN_ENOMEM. */
static int
need_input(struct rs *r, struct sb *s, const struct desc_input *in)
{
	const struct sb *all = r->steps.items, **hits = NULL;
	const char *name, *pattern = ref_split(r, in->text + 1, &name), *why;
	size_t n = 0, idx;
	kiln_glob *g;

	if (pattern == NULL)
		return KILN_ENOMEM;
	if (glob_compile(pattern, &g, &why) != 0) {
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': %s", in->text,
		         why ? why : "malformed pattern");
		return 0;
	}
	if (glob_is_literal(g)) {
		if (strmap_get(&r->urls, pattern, &idx) && !all[idx].dead)
			need_push(r, s, in, &all[idx], name);
		else
			diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s' names no "
			         "asset: unknown URL '%s' in profile '%s'", in->text, pattern,
			         r->profile);
		glob_free(g);
		return 0;
	}
	if ((hits = malloc((r->steps.n + 1) * sizeof *hits)) == NULL) {
		glob_free(g);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < r->steps.n; i++)
		if (!all[i].dead && &all[i] != s && glob_match(g, all[i].st.url))
			hits[n++] = &all[i];
	/* steps are in the order rules and assets made them: sort, so the
	 * tool gets the glob's matches in URL order */
	qsort(hits, n, sizeof *hits, sb_url_order);
	for (size_t i = 0; i < n; i++)
		need_push(r, s, in, hits[i], name);
	/* an empty ${in} is a wrong command, not a smaller one: refused */
	if (n == 0)
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s' matches "
		         "no step in profile '%s' (the tool would run without it)",
		         in->text, r->profile);
	free(hits);
	glob_free(g);
	return 0;
}

/* One declared input of step s: files, or prerequisite steps. */
void
resolve_input(struct rs *r, struct sb *s, const struct desc_input *in)
{
	const char *why;
	kiln_glob *g;
	size_t n = 0;

	if (in->text[0] == '@') {
		if (need_input(r, s, in) != 0)
			r->tmp->failed = 1;
		return;
	}
	if (glob_compile(in->path, &g, &why) != 0) {
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s': %s", in->text,
		         why ? why : "malformed pattern");
		return;
	}
	if (glob_is_literal(g)) {
		literal_input(r, s, in, in->path);
		n = 1;
	} else {
		/* the source list is sorted: a glob's matches come in path order */
		const char *const *files = r->src->files.items;
		const char *prefix = glob_prefix(g);
		size_t pl = strlen(prefix);
		for (size_t i = resolve_file_range(r->src, prefix);
		     i < r->src->files.n && strncmp(files[i], prefix, pl) == 0; i++)
			if (glob_match(g, files[i])) {
				file_push(r, s, files[i]);
				n++;
			}
	}
	if (n == 0)
		diag_add(r->dg, KILN_DIAG_ERROR, in->loc, in->field, "'%s' matches "
		         "no file in profile '%s' (the tool would run without it)",
		         in->text, r->profile);
	glob_free(g);
}

/* An input and its place, sorted by what it names to find the ones
 * written twice. */
struct placed {
	const kiln_input *it;
	size_t at;
};

/* 0 when x and y name the same file or the same output. */
static int
input_same(const kiln_input *x, const kiln_input *y)
{
	int c;

	if ((x->path == NULL) != (y->path == NULL))
		return x->path == NULL ? 1 : -1;
	if (x->path != NULL)
		return strcmp(x->path, y->path);
	return (c = strcmp(x->url, y->url)) != 0 ? c : strcmp(x->output, y->output);
}

/* By what they name, then by place: the first of equal ones is kept. */
static int
placed_cmp(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;
	int c = input_same(x->it, y->it);

	return c != 0 ? c : x->at < y->at ? -1 : x->at > y->at;
}

const kiln_input *
resolve_order(struct rs *r, struct sb *s, size_t *n)
{
	const kiln_input *v = s->order.items;
	size_t nv = s->order.n, w = 0;
	struct placed *p;
	unsigned char *dup;
	kiln_input *out;

	*n = 0;
	if (nv == 0)
		return NULL;
	if (nv == 1) {   /* most rule steps: nothing to sort out */
		if ((out = arena_alloc_raw(r->a, sizeof *out)) == NULL)
			return NULL;
		out[0] = v[0];
		*n = 1;
		return out;
	}
	p = malloc(nv * sizeof *p);
	dup = calloc(nv, 1);
	out = arena_alloc_raw(r->a, nv * sizeof *out);
	if (p == NULL || dup == NULL || out == NULL) {
		free(p);
		free(dup);
		r->a->failed = 1;   /* the plan is unusable without it */
		return NULL;
	}
	for (size_t i = 0; i < nv; i++)
		p[i] = (struct placed){&v[i], i};
	qsort(p, nv, sizeof *p, placed_cmp);
	for (size_t i = 1; i < nv; i++)
		if (input_same(p[i - 1].it, p[i].it) == 0)
			dup[p[i].at] = 1;
	for (size_t i = 0; i < nv; i++)
		if (!dup[i])
			out[w++] = v[i];
	free(p);
	free(dup);
	*n = w;
	return out;
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
