/* folder_out.c — folder outputs: made empty for the tool, walked into the
 * store after it, and put into build/ as a folder of copies that is
 * checked, file by file, against its tree record (see folder_out.h).
 *
 * The folder in build/ is read with file descriptors from its top down,
 * never following a symlink: one found inside is removed (a tree holds
 * none), not followed.
 *
 * Threads: the worker holding the node. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "folder_out.h"
#include "kiln_rmtree.h"
#include "kiln_tree.h"
#include "materialize.h"
#include "step.h"

int
folder_prepare(struct node *n, const char *dir)
{
	char path[PATH_MAX * 2];

	for (size_t i = 0; i < n->ks->noutputs; i++) {
		if (!n->ks->outputs[i].folder)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, n->ks->outputs[i].file);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return kiln_err_from_errno(errno);
	}
	return 0;
}

int
folder_publish(struct engine *e, struct node *n, size_t i, const char *dir)
{
	char path[PATH_MAX * 2], why[600];
	int rv;

	snprintf(path, sizeof path, "%s/%s", dir, n->ks->outputs[i].file);
	rv = kiln_tree_put_dir(e->s, path, &n->outs[i].id, &n->outs[i].size, why, sizeof why);
	if (rv == KILN_ENOTFOUND)
		set_error(n, "%s: the tool did not leave its folder output '%s' (%s/, "
		          "expected at %s)", n->ks->url, n->ks->outputs[i].name,
		          n->ks->outputs[i].file, path + strlen(e->root) + 1);
	else if (rv == KILN_EINVAL)
		set_error(n, "%s: folder output '%s' (%s/): %s", n->ks->url,
		          n->ks->outputs[i].name, n->ks->outputs[i].file, why);
	else if (rv != 0)
		set_error(n, "%s: cannot store folder output '%s': %s", n->ks->url,
		          n->ks->outputs[i].name, kiln_strerror(rv));
	else
		kiln_rmtree(path);   /* its folders, emptied: the scratch is reused */
	return rv;
}

/* A walk of a folder in build/ against its tree. */
struct tw {
	const kiln_tree *t;
	uint8_t *ok;        /* per entry: found, of its type and content */
	int fix;            /* remove what does not belong (else stop at it) */
	int bad;            /* something differs */
	char rel[KILN_TREE_MAX_PATH + NAME_MAX + 2];
};

static int
entry_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const kiln_tree_entry *)elem)->path);
}

/* Remove name in dfd, a folder with everything in it, never following a
 * symlink. Best effort: what stays makes the check fail. */
static void
remove_at(int dfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd;

	if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) ||
	    depth > KILN_TREE_MAX_DEPTH + 8)
		return;
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			remove_at(dirfd(d), de->d_name, depth + 1);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Whether the regular file name in dfd (st: its lstat) holds x's bytes. */
static int
file_same(int dfd, const char *name, const struct stat *st, const kiln_tree_entry *x)
{
	kiln_id h;
	int fd, ok;

	/* the mode too: the tree records the owner's execute bit, and a
	 * script that lost it in build/ is not the output */
	if ((uint64_t)st->st_size != x->size ||
	    ((st->st_mode & S_IXUSR) != 0) != ((x->mode & 0100) != 0))
		return 0;
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	ok = kiln_id_of_fd(fd, &h, NULL) == 0 && id_eq(&h, &x->id);
	close(fd);
	return ok;
}

/* Walk the folder fd (taken over), w->rel[0..len) its path in the tree. */
static void
tw_dir(struct tw *w, int fd, size_t len, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;

	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		w->bad = 1;
		return;
	}
	while ((w->fix || !w->bad) && (de = readdir(d)) != NULL) {
		size_t nlen = strlen(de->d_name);
		const kiln_tree_entry *x = NULL;
		int same;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (len + nlen + 2 <= sizeof w->rel) {
			memcpy(w->rel + len, de->d_name, nlen + 1);
			x = bsearch(w->rel, w->t->e, w->t->n, sizeof *w->t->e, entry_cmp);
		}
		memset(&st, 0, sizeof st);
		same = x != NULL && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       (x->dir ? S_ISDIR(st.st_mode) && depth <= KILN_TREE_MAX_DEPTH + 1
		        : S_ISREG(st.st_mode) && file_same(dirfd(d), de->d_name, &st, x));
		if (!same) {
			w->bad = 1;
			/* a file of other bytes is replaced as it is copied */
			if (w->fix && (x == NULL || x->dir || !S_ISREG(st.st_mode)))
				remove_at(dirfd(d), de->d_name, 0);
			continue;
		}
		w->ok[x - w->t->e] = 1;
		if (x->dir) {
			int sub = openat(dirfd(d), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				w->bad = 1;
				continue;
			}
			w->rel[len + nlen] = '/';
			tw_dir(w, sub, len + nlen + 1, depth + 1);
		}
	}
	closedir(d);
}

/* Walk root/relpath against tree id (fix: removing what does not belong).
 * 0 with *same (everything there and nothing else), or an error.
 * *tp and *okp, when not NULL, get the tree and the per-entry found
 * flags (the caller frees them). */
static int
tree_walk(struct engine *e, const char *relpath, const kiln_id *id, int fix,
          int *same, kiln_tree **tp, uint8_t **okp)
{
	struct tw w = {.fix = fix};
	kiln_tree *t;
	int fd, rv;

	*same = 0;
	if ((rv = kiln_tree_load(e->s, id, &t)) != 0)
		return rv;
	if ((w.ok = calloc(t->n + 1, 1)) == NULL) {
		kiln_tree_free(t);
		return KILN_ENOMEM;
	}
	w.t = t;
	rv = materialize_dir_open(e->root, relpath, fix, e->cfg.build_umask, &fd);
	if (rv == 0) {
		tw_dir(&w, fd, 0, 0);
		*same = !w.bad;
		for (size_t i = 0; i < t->n && *same; i++)
			*same = w.ok[i];
	} else if (rv == KILN_ENOTFOUND && !fix) {
		rv = 0;
	}
	if (tp != NULL && okp != NULL) {
		*tp = t;
		*okp = w.ok;
	} else {
		kiln_tree_free(t);
		free(w.ok);
	}
	return rv;
}

int
folder_unchanged(struct engine *e, const char *relpath, const kiln_id *id)
{
	int same;

	return tree_walk(e, relpath, id, 0, &same, NULL, NULL) == 0 && same;
}

int
folder_materialize(struct engine *e, const char *relpath, const kiln_id *id)
{
	char path[PATH_MAX + KILN_TREE_MAX_PATH + 2];
	kiln_tree *t = NULL;
	uint8_t *ok = NULL;
	int same, fd = -1, rv;

	if ((rv = tree_walk(e, relpath, id, 1, &same, &t, &ok)) != 0 || same)
		goto done;
	if ((rv = materialize_dir_open(e->root, relpath, 1, e->cfg.build_umask, &fd)) != 0)
		goto done;
	/* parents come before what they hold in the record's order */
	for (size_t i = 0; i < t->n && rv == 0; i++) {
		const kiln_tree_entry *x = &t->e[i];
		if (ok[i])
			continue;
		if (x->dir) {
			/* kilnd's own umask is 077: build/ follows its user's */
			if ((mkdirat(fd, x->path, 0777) != 0 && errno != EEXIST) ||
			    fchmodat(fd, x->path, 0777 & ~e->cfg.build_umask, 0) != 0)
				rv = kiln_err_from_errno(errno);
			continue;
		}
		if ((size_t)snprintf(path, sizeof path, "%s/%s", relpath, x->path) >= sizeof path)
			rv = KILN_ERANGE;
		else
			rv = materialize_output(e->s, e->root, e->rootfd, path, &x->id,
			                        KILN_MAT_COPY, e->cfg.build_umask, NULL);
		/* a copy is 0666 less the mask: an executable gets its bits */
		if (rv == 0 && (x->mode & 0100) != 0 &&
		    fchmodat(fd, x->path, 0777 & ~e->cfg.build_umask, 0) != 0)
			rv = kiln_err_from_errno(errno);
	}
done:
	if (fd >= 0)
		close(fd);
	kiln_tree_free(t);
	free(ok);
	return rv;
}

int
folder_blobs_present(struct engine *e, const kiln_id *id)
{
	kiln_tree *t;
	int ok;

	if (kiln_tree_load(e->s, id, &t) != 0)
		return 0;
	ok = 1;
	for (size_t i = 0; i < t->n && ok; i++)
		ok = t->e[i].dir || kiln_store_has(e->s, &t->e[i].id, NULL) == 0;
	kiln_tree_free(t);
	return ok;
}
