/* dep_path.c — which paths a tool used become discovered dependencies,
 * and under what name (dep_path.h; docs/build.md, "Discovered paths").
 *
 * The order of the tests is the policy:
 *   1. "/" itself: nothing (no tool depends on the machine's root).
 *   2. Inside the project root: .kiln/ is kiln's own (scratch folders,
 *      depfiles, traces), also behind a tool's prefix (png32:.kiln/...,
 *      a word ImageMagick looks up whole); build/ holds steps' outputs (the caller checks
 *      them against the step's inputs); the root folder is a dependency
 *      only as a listing; everything else is a project file, named
 *      relative to the root, and must be a valid store key.
 *   3. Hidden entries directly in $HOME ($HOME/.cache, .local, .config):
 *      the machine's, like a tool's caches.
 *   4. Beside the project, under the folder that holds it: an external
 *      file, even where that folder is a machine location (a project in
 *      /tmp/ci/p using /tmp/ci/common is still using its sibling).
 *   5. The machine's locations (/usr, /lib*, /bin, /sbin, /etc, /proc,
 *      /sys, /dev, /run, /tmp, /var, /opt, /nix, /snap): system headers,
 *      libraries, the tools themselves (whose program is in the key).
 *   6. Anything else: an external file, by its clean absolute path.
 *
 * Cleaning is lexical except for ".." after a named component, which is
 * resolved as the kernel resolved it (dep_path_resolve): a path through a
 * symlink otherwise keeps the symlink's name, and the same file spelled
 * two ways is two dependencies (both checked, so nothing is missed; it
 * only costs a stat).
 *
 * Threads: no state; any thread. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dep_path.h"
#include "kiln_store.h"

/* Top-level folders that belong to the machine, not to any project. */
static const char *const machine_dirs[] = {
	"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
	"/proc", "/sys", "/dev", "/run", "/tmp", "/var", "/opt", "/nix", "/snap",
};

void
dep_path_clean(char *p)
{
	char *out = p, *in = p;

	while (*in) {
		while (*in == '/')
			in++;
		char *seg = in;
		while (*in && *in != '/')
			in++;
		size_t sl = (size_t)(in - seg);
		if (sl == 0 || (sl == 1 && seg[0] == '.'))
			continue;
		if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
			/* back to the previous '/' ("/.." stays "/") */
			while (out > p && *--out != '/')
				;
			continue;
		}
		*out++ = '/';
		memmove(out, seg, sl);
		out += sl;
	}
	if (out == p)
		*out++ = '/';
	*out = '\0';
}

/* The end of p's last ".." component that follows a named one (neither
 * "." nor ".."), or NULL when none does: only then can a symlink decide
 * where the ".." leads. */
static const char *
last_climb(const char *p)
{
	const char *end = NULL, *in = p;
	int named = 0;

	while (*in) {
		while (*in == '/')
			in++;
		const char *seg = in;
		while (*in && *in != '/')
			in++;
		size_t sl = (size_t)(in - seg);
		if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
			if (named)
				end = in;
		} else if (sl > 0 && !(sl == 1 && seg[0] == '.')) {
			named = 1;
		}
	}
	return end;
}

/* The entry where the lookup of the absolute path head fails (its
 * deepest existing folder, resolved, and the next name, which is missing)
 * into out (len bytes): creating that entry is what would change the
 * lookup. -1 when none is found or it does not fit. */
static int
missing_entry(const char *head, char *out, size_t len)
{
	char prefix[PATH_MAX], real[PATH_MAX] = "/";
	const char *in = head;

	while (*in) {
		while (*in == '/')
			in++;
		const char *seg = in;
		while (*in && *in != '/')
			in++;
		size_t sl = (size_t)(in - seg), lp = (size_t)(in - head);
		if (sl == 0)
			break;
		memcpy(prefix, head, lp);
		prefix[lp] = '\0';
		if (realpath(prefix, out) != NULL) {   /* exists: go deeper */
			snprintf(real, sizeof real, "%s", out);
			continue;
		}
		if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
			return snprintf(out, len, "%s", real) < (int)len ? 0 : -1;
		return snprintf(out, len, "%s/%.*s", strcmp(real, "/") == 0 ? "" : real,
		                (int)sl, seg) < (int)len ? 0 : -1;
	}
	return -1;
}

void
dep_path_resolve(char *p, size_t cap)
{
	const char *end = p[0] == '/' ? last_climb(p) : NULL;
	char head[PATH_MAX], real[PATH_MAX];
	size_t lh, lr, lt;

	if (end == NULL) {
		dep_path_clean(p);
		return;
	}
	/* Too long to resolve: left as it is, its ".." makes the policy call
	 * it unrecordable (a warning) rather than name a file it is not. */
	if ((lh = (size_t)(end - p)) >= sizeof head)
		return;
	memcpy(head, p, lh);
	head[lh] = '\0';
	lt = strlen(end);
	if (realpath(head, real) != NULL) {
		if ((lr = strlen(real)) + lt >= cap)
			return;
		memmove(p + lr, end, lt + 1);   /* the tail: "" or "/...", no ".." */
		memcpy(p, real, lr);
		dep_path_clean(p);
		return;
	}
	/* The lookup fails in head (a folder missing, or a link gone since
	 * the tool looked): the dependency is the missing entry, whose
	 * creation would change what the tool finds. A loop or a folder it
	 * may not search: cleaned as text. */
	if ((errno == ENOENT || errno == ENOTDIR) && missing_entry(head, real, sizeof real) == 0 &&
	    strlen(real) < cap) {
		memcpy(p, real, strlen(real) + 1);
		return;
	}
	dep_path_clean(p);
}

/* Whether p is dir (len ld) or lies under it. */
static int
under(const char *p, const char *dir, size_t ld)
{
	return strncmp(p, dir, ld) == 0 && (p[ld] == '/' || p[ld] == '\0');
}

/* Whether p's first component is name. */
static int
first_is(const char *p, const char *name)
{
	return under(p, name, strlen(name));
}

static int
is_machine(const char *p)
{
	for (size_t i = 0; i < sizeof machine_dirs / sizeof machine_dirs[0]; i++)
		if (under(p, machine_dirs[i], strlen(machine_dirs[i])))
			return 1;
	return 0;
}

/* Whether p is a hidden entry directly in home, or under one. */
static int
is_home_hidden(const char *p, const char *home)
{
	size_t lh;

	if (home == NULL || home[0] != '/')
		return 0;
	lh = strlen(home);
	while (lh > 1 && home[lh - 1] == '/')
		lh--;
	if (lh <= 1)
		return 0;   /* HOME=/: its hidden entries are no one's cache */
	return strncmp(p, home, lh) == 0 && p[lh] == '/' && p[lh + 1] == '.';
}

/* Whether p lies beside the project, in the folder that holds it ("/"
 * does not count: that would be the whole machine). */
static int
is_sibling(const char *p, const char *root)
{
	const char *slash = strrchr(root, '/');

	return slash != NULL && slash > root && under(p, root, (size_t)(slash - root));
}

/* Write name (and '/' for a listing) into out: cls, or INVALID when it
 * does not fit. */
static enum dep_path_class
put(char *out, size_t outlen, const char *name, int listing, enum dep_path_class cls)
{
	int w = snprintf(out, outlen, "%s%s", name, listing ? "/" : "");

	return w < 0 || (size_t)w >= outlen ? DEP_PATH_INVALID : cls;
}

/* Whether rel (project-relative) is kiln's own folder spelled behind a
 * tool's prefix: "PREFIX:REST", PREFIX without a '/', REST in .kiln/
 * relative to the root or absolute (root/.kiln/...). ImageMagick is given
 * `png32:.kiln/scratch/<run>/1/hero.png` and looks that whole word up as
 * a file first; no project file has such a name, and the scratch part
 * changes with every run. */
static int
prefixed_own(const char *rel, const char *root)
{
	const char *colon = strchr(rel, ':'), *slash = strchr(rel, '/');
	size_t lr = strlen(root);

	if (colon == NULL || colon == rel || (slash != NULL && slash < colon))
		return 0;
	rel = colon + 1;
	if (strncmp(rel, root, lr) == 0 && rel[lr] == '/')
		rel += lr + 1;
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	return first_is(rel, ".kiln");
}

/* A path inside the project, rel relative to its root. */
static enum dep_path_class
classify_project(const char *rel, const char *root, int listing, char *out,
                 size_t outlen)
{
	if (rel[0] == '\0') {
		snprintf(out, outlen, "%s", listing ? "./" : ".");
		return listing ? DEP_PATH_PROJECT : DEP_PATH_IGNORED;
	}
	if (first_is(rel, ".kiln") || prefixed_own(rel, root))
		return put(out, outlen, rel, 0, DEP_PATH_IGNORED);
	if (kiln_url_check(rel) != 0)
		return put(out, outlen, rel, 0, DEP_PATH_INVALID);
	if (first_is(rel, "build"))
		return put(out, outlen, rel, listing, DEP_PATH_BUILD);
	return put(out, outlen, rel, listing, DEP_PATH_PROJECT);
}

enum dep_path_class
dep_path_classify(const struct dep_path_policy *pp, const char *path, int listing,
                  char *out, size_t outlen)
{
	char p[PATH_MAX * 2];
	size_t lr = strlen(pp->root);
	int w;

	if (path[0] == '/')
		w = snprintf(p, sizeof p, "%s", path);
	else
		w = snprintf(p, sizeof p, "%s/%s", pp->root, path);
	if (w < 0 || (size_t)w >= sizeof p) {
		snprintf(out, outlen, "%s", path);
		return DEP_PATH_INVALID;
	}
	dep_path_clean(p);
	if (strcmp(p, "/") == 0)
		return put(out, outlen, p, 0, DEP_PATH_IGNORED);
	if (under(p, pp->root, lr))
		return classify_project(p[lr] ? p + lr + 1 : "", pp->root, listing, out,
		                        outlen);
	if (is_home_hidden(p, pp->home))
		return put(out, outlen, p, 0, DEP_PATH_IGNORED);
	if (!is_sibling(p, pp->root) && is_machine(p))
		return put(out, outlen, p, 0, DEP_PATH_IGNORED);
	/* the same rules as a project path's, without its leading '/' */
	if (kiln_url_check(p + 1) != 0)
		return put(out, outlen, p, 0, DEP_PATH_INVALID);
	return put(out, outlen, p, listing, DEP_PATH_EXTERNAL);
}
