/* srcwalk.c — listing the files under a project's source folders.
 *
 * One readdir walk per folder (file types from d_type, so no stat per
 * file); names starting with '.' are skipped (.git, editor droppings).
 * A symlink is followed only to a file inside the project root; one leading
 * outside is an error, and a symlinked folder is not descended (a warning),
 * which rules out loops. A file or folder whose path kiln cannot use (a
 * control character, a backslash, too long) is skipped with a warning,
 * not the project refused. *.kiln.yaml files are description files,
 * listed apart. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "desc_int.h"
#include "kiln_store.h"

#define DESC_SUFFIX ".kiln.yaml"

struct walk {
	const char *root;
	char realroot[PATH_MAX];
	arena *a;
	diags *dg;
	kiln_loc loc;
	srcset *out;
};

static int
is_desc(const char *name)
{
	size_t n = strlen(name), s = sizeof DESC_SUFFIX - 1;

	return n > s && strcmp(name + n - s, DESC_SUFFIX) == 0;
}

static int
add_file(struct walk *w, const char *rel, const char *name)
{
	const char *p = arena_strdup(w->a, rel);

	if (p == NULL)
		return KILN_ENOMEM;
	return vec_push(w->a, is_desc(name) ? &w->out->descs : &w->out->files, &p)
	               ? 0 : KILN_ENOMEM;
}

/* A symlink: 1 = a file inside the root, 0 = skip, after reporting. */
static int
link_ok(struct walk *w, const char *rel)
{
	char abs[PATH_MAX * 2], real[PATH_MAX];
	size_t rl = strlen(w->realroot);
	struct stat st;

	snprintf(abs, sizeof abs, "%s/%s", w->root, rel);
	if (realpath(abs, real) == NULL) {
		diag_add(w->dg, KILN_DIAG_WARNING, w->loc, "sources",
		         "'%s' is a broken symlink; skipped", rel);
		return 0;
	}
	if (strncmp(real, w->realroot, rl) != 0 || (real[rl] != '/' && real[rl] != '\0')) {
		diag_add(w->dg, KILN_DIAG_ERROR, w->loc, "sources",
		         "'%s' is a symlink to '%s', outside the project root", rel, real);
		return 0;
	}
	if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
		diag_add(w->dg, KILN_DIAG_WARNING, w->loc, "sources",
		         "'%s' is a symlink to a folder; not followed", rel);
		return 0;
	}
	return 1;
}

/* A path kiln can use: the store keys file records by it and tools get
 * it in argv, so it must pass kiln_url_check (no control characters, no
 * backslash, not too long). Any other is skipped with a warning, so that
 * one oddly named file does not stop the project; 0 then. */
static int
name_usable(struct walk *w, const char *rel)
{
	char shown[256];
	const unsigned char *p = (const unsigned char *)rel;
	size_t j = 0;

	if (kiln_url_check(rel) == 0)
		return 1;
	/* shown as \xNN: a raw newline would split the diagnostic's line */
	for (; *p && j + 8 < sizeof shown; p++)
		if (*p < 0x20 || *p == 0x7f)
			j += (size_t)snprintf(shown + j, sizeof shown - j, "\\x%02x", *p);
		else
			shown[j++] = (char)*p;
	shown[j] = '\0';
	diag_add(w->dg, KILN_DIAG_WARNING, w->loc, "sources", "'%s%s' skipped: kiln "
	         "cannot use its name (a control character or backslash, or too long)",
	         shown, *p ? "..." : "");
	return 0;
}

static int
walk_dir(struct walk *w, const char *rel, int depth)
{
	char abs[PATH_MAX * 2], sub[PATH_MAX];
	DIR *d;
	struct dirent *e;
	int rv = 0;

	if (depth > 64)
		return 0;
	snprintf(abs, sizeof abs, "%s/%s", w->root, rel);
	if ((d = opendir(abs)) == NULL)
		return 0;
	{
		const char *p = arena_strdup(w->a, rel);
		if (p == NULL || !vec_push(w->a, &w->out->dirs, &p)) {
			closedir(d);
			return KILN_ENOMEM;
		}
	}
	while (rv == 0 && (e = readdir(d)) != NULL) {
		unsigned char t = e->d_type;
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name) >= sizeof sub)
			continue;
		if (t == DT_UNKNOWN && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG
			  : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
		if (!name_usable(w, sub))
			continue;
		if (t == DT_DIR)
			rv = walk_dir(w, sub, depth + 1);
		else if (t == DT_REG || (t == DT_LNK && link_ok(w, sub)))
			rv = add_file(w, sub, e->d_name);
	}
	closedir(d);
	return rv;
}

int
srcwalk(const char *root, const char *const *folders, size_t n, arena *a,
        diags *dg, kiln_loc loc, srcset *out)
{
	struct walk w = {root, "", a, dg, loc, out};
	int rv = 0;

	vec_init(&out->files, sizeof(const char *));
	vec_init(&out->descs, sizeof(const char *));
	vec_init(&out->dirs, sizeof(const char *));
	if (realpath(root, w.realroot) == NULL)
		return kiln_err_from_errno(errno);
	for (size_t i = 0; i < n && rv == 0; i++) {
		char abs[PATH_MAX * 2];
		struct stat st;
		snprintf(abs, sizeof abs, "%s/%s", root, folders[i]);
		if (lstat(abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
			diag_add(dg, KILN_DIAG_ERROR, loc, "sources", "source folder '%s' "
			         "does not exist (or is not a folder)", folders[i]);
			continue;
		}
		rv = walk_dir(&w, folders[i], 0);
	}
	vec_sort_unique_str(&out->files);
	vec_sort_unique_str(&out->descs);
	return rv != 0 ? rv : a->failed ? KILN_ENOMEM : 0;
}
