/* tree.c — tree records (kiln_tree.h): a folder walked into the store,
 * and records read back.
 *
 * The walk reads the folder first, whole, checking every bound, and only
 * then moves files: a folder that breaks a rule moves nothing. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kiln_tree.h"

#define TREE_MAGIC "kiln-tree 1\n"

struct walk_ent {
	char *path;
	int dir;
	unsigned mode;
	uint64_t size;
	kiln_id id;
};

struct walk {
	const char *top;
	struct walk_ent *v;
	size_t n, cap;
	uint64_t bytes;
	char *why;
	size_t whylen;
};

/* A name a record can hold: no control character (a line end would end
 * the entry). */
static int
name_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

static int
walk_push(struct walk *w, const char *rel, const struct stat *st)
{
	struct walk_ent *x;

	if (w->n >= KILN_TREE_MAX_ENTRIES) {
		snprintf(w->why, w->whylen, "more than %d files and folders",
		         KILN_TREE_MAX_ENTRIES);
		return KILN_EINVAL;
	}
	if (w->n == w->cap) {
		size_t ncap = w->cap ? 2 * w->cap : 64;
		struct walk_ent *nv = realloc(w->v, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		w->v = nv;
		w->cap = ncap;
	}
	x = &w->v[w->n];
	memset(x, 0, sizeof *x);
	if ((x->path = strdup(rel)) == NULL)
		return KILN_ENOMEM;
	x->dir = S_ISDIR(st->st_mode);
	x->mode = x->dir || (st->st_mode & S_IXUSR) ? 0755 : 0644;
	x->size = x->dir ? 0 : (uint64_t)st->st_size;
	w->n++;
	return 0;
}

/* Walk the folder top/rel (rel "" for top itself), depth deep. */
static int
walk_dir(struct walk *w, const char *rel, int depth)
{
	char path[PATH_MAX + KILN_TREE_MAX_PATH + 2], sub[KILN_TREE_MAX_PATH + 2];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rv = 0;

	if (depth > KILN_TREE_MAX_DEPTH) {
		snprintf(w->why, w->whylen, "'%s' is nested more than %d folders deep",
		         rel, KILN_TREE_MAX_DEPTH);
		return KILN_EINVAL;
	}
	if ((size_t)snprintf(path, sizeof path, "%s%s%s", w->top, rel[0] ? "/" : "", rel) >=
	    sizeof path)
		return KILN_ERANGE;
	if ((d = opendir(path)) == NULL)
		return errno == ENOMEM ? KILN_ENOMEM : KILN_EIO;
	while (rv == 0 && (errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "",
		                     de->d_name) > KILN_TREE_MAX_PATH || !name_ok(de->d_name)) {
			snprintf(w->why, w->whylen, "'%.200s%s%.200s': a name kiln cannot "
			         "record (a control character, or longer than %d bytes)",
			         rel, rel[0] ? "/" : "", de->d_name, KILN_TREE_MAX_PATH);
			rv = KILN_EINVAL;
			break;
		}
		if ((size_t)snprintf(path, sizeof path, "%s/%s", w->top, sub) >= sizeof path ||
		    lstat(path, &st) != 0) {
			rv = KILN_EIO;
			break;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			snprintf(w->why, w->whylen, "'%s' is %s: a folder output holds only "
			         "files and folders", sub, S_ISLNK(st.st_mode) ? "a symlink"
			         : "a special file");
			rv = KILN_EINVAL;
			break;
		}
		if (S_ISREG(st.st_mode) &&
		    (w->bytes += (uint64_t)st.st_size) > KILN_TREE_MAX_BYTES) {
			snprintf(w->why, w->whylen, "its files hold more than %llu bytes",
			         (unsigned long long)KILN_TREE_MAX_BYTES);
			rv = KILN_EINVAL;
			break;
		}
		if ((rv = walk_push(w, sub, &st)) == 0 && S_ISDIR(st.st_mode))
			rv = walk_dir(w, sub, depth + 1);
	}
	if (rv == 0 && errno != 0)
		rv = KILN_EIO;
	closedir(d);
	return rv;
}

static int
ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct walk_ent *)a)->path, ((const struct walk_ent *)b)->path);
}

/* The record's text for the sorted entries (files' ids set). */
static int
tree_text(const struct walk *w, char **out, size_t *len)
{
	char *buf = NULL, hex[KILN_ID_HEX_LEN + 1];
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);

	if (f == NULL)
		return KILN_ENOMEM;
	fputs(TREE_MAGIC, f);
	for (size_t i = 0; i < w->n; i++) {
		const struct walk_ent *x = &w->v[i];
		if (!x->dir)
			kiln_id_to_hex(&x->id, hex);
		fprintf(f, "%c %o %llu %s %s\n", x->dir ? 'd' : 'f', x->mode,
		        (unsigned long long)x->size, x->dir ? "-" : hex, x->path);
	}
	if (fclose(f) != 0) {
		free(buf);
		return KILN_ENOMEM;
	}
	*out = buf;
	*len = blen;
	return 0;
}

int
kiln_tree_put_dir(kiln_store *s, const char *path, kiln_id *id, uint64_t *size,
                  char *why, size_t whylen)
{
	struct walk w = {.top = path, .why = why, .whylen = whylen};
	char file[PATH_MAX + KILN_TREE_MAX_PATH + 2], *text = NULL;
	struct stat st;
	size_t tlen = 0;
	int rv;

	why[0] = '\0';
	if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return KILN_ENOTFOUND;
	if ((rv = walk_dir(&w, "", 0)) != 0)
		goto fail;
	qsort(w.v, w.n, sizeof *w.v, ent_cmp);
	for (size_t i = 0; i < w.n; i++) {
		if (w.v[i].dir)
			continue;
		snprintf(file, sizeof file, "%s/%s", path, w.v[i].path);
		/* the size of what was stored, not of the walk's lstat: a
		 * file still written meanwhile would leave a record that no
		 * copy in build/ ever matches */
		if ((rv = kiln_store_put_move(s, file, &w.v[i].id)) != 0 ||
		    (rv = kiln_store_has(s, &w.v[i].id, &w.v[i].size)) != 0)
			goto fail;
	}
	if ((rv = tree_text(&w, &text, &tlen)) != 0 ||
	    (rv = kiln_store_put_buf(s, text, tlen, id)) != 0)
		goto fail;
	*size = tlen;
fail:
	for (size_t i = 0; i < w.n; i++)
		free(w.v[i].path);
	free(w.v);
	free(text);
	return rv;
}

int
kiln_tree_looks(const void *buf, size_t len)
{
	return len >= sizeof TREE_MAGIC - 1 && memcmp(buf, TREE_MAGIC, sizeof TREE_MAGIC - 1) == 0;
}

/* path is relative, each part a real name, no control character. */
static int
path_ok(const char *p)
{
	const char *end;

	if (p[0] == '\0' || strlen(p) > KILN_TREE_MAX_PATH || !name_ok(p))
		return 0;
	for (; *p != '\0'; p = *end ? end + 1 : end) {
		end = strchrnul(p, '/');
		if (end == p || (end - p == 1 && p[0] == '.') ||
		    (end - p == 2 && p[0] == '.' && p[1] == '.') || end - p > NAME_MAX ||
		    (*end == '/' && end[1] == '\0'))
			return 0;
	}
	return 1;
}

/* Whether the parent folder of entry i is an entry before it (the
 * entries before i are sorted: a binary search). */
static int
parent_listed(const kiln_tree *t, size_t i)
{
	const char *p = t->e[i].path, *slash = strrchr(p, '/');
	size_t lo = 0, hi = i, plen;

	if (slash == NULL)
		return 1;
	plen = (size_t)(slash - p);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *q = t->e[mid].path;
		int c = strncmp(q, p, plen);
		if (c == 0 && q[plen] == '\0')
			return t->e[mid].dir;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;   /* after it (c == 0: q is longer, so after too) */
	}
	return 0;
}

/* One line (NUL-terminated, without its '\n') into e. */
static int
parse_line(char *line, kiln_tree_entry *e)
{
	char type, hash[KILN_ID_HEX_LEN + 2];
	unsigned long long size;
	unsigned mode;
	int off = 0;

	/* the path is what follows exactly one space: it may begin with one */
	if (sscanf(line, "%c %3o %llu %33s%n", &type, &mode, &size, hash, &off) != 4 ||
	    off == 0 || line[off] != ' ' || (type != 'f' && type != 'd'))
		return KILN_EINVAL;
	off++;
	e->dir = type == 'd';
	e->mode = mode;
	e->size = size;
	e->path = line + off;
	if (e->dir)
		return mode == 0755 && size == 0 && strcmp(hash, "-") == 0 ? 0 : KILN_EINVAL;
	if ((mode != 0644 && mode != 0755) || kiln_id_from_hex(hash, &e->id) != 0)
		return KILN_EINVAL;
	return 0;
}

int
kiln_tree_parse(const void *buf, size_t len, kiln_tree **tp)
{
	kiln_tree *t;
	size_t nl = 0, i = 0;
	char *p, *end;
	int rv = KILN_EINVAL;

	*tp = NULL;
	if (!kiln_tree_looks(buf, len) || memchr(buf, '\0', len) != NULL ||
	    ((const char *)buf)[len - 1] != '\n')
		return KILN_EINVAL;
	for (size_t k = 0; k < len; k++)
		nl += ((const char *)buf)[k] == '\n';
	if (nl - 1 > KILN_TREE_MAX_ENTRIES)
		return KILN_EINVAL;
	if ((t = calloc(1, sizeof *t)) == NULL || (t->text = malloc(len + 1)) == NULL ||
	    (t->e = calloc(nl, sizeof *t->e)) == NULL) {
		kiln_tree_free(t);
		return KILN_ENOMEM;
	}
	memcpy(t->text, buf, len);
	t->text[len] = '\0';
	for (p = t->text + sizeof TREE_MAGIC - 1; *p != '\0'; p = end + 1, i++) {
		end = strchr(p, '\n');
		*end = '\0';
		if (parse_line(p, &t->e[i]) != 0 || !path_ok(t->e[i].path) ||
		    (i > 0 && strcmp(t->e[i - 1].path, t->e[i].path) >= 0) ||
		    !parent_listed(t, i))
			goto fail;
		if (!t->e[i].dir && (t->bytes += t->e[i].size) > KILN_TREE_MAX_BYTES)
			goto fail;
	}
	t->n = i;
	*tp = t;
	return 0;
fail:
	kiln_tree_free(t);
	return rv;
}

int
kiln_tree_load(kiln_store *s, const kiln_id *id, kiln_tree **t)
{
	void *buf;
	size_t len;
	int rv;

	*t = NULL;
	if ((rv = kiln_store_read(s, id, &buf, &len)) != 0)
		return rv;
	rv = kiln_tree_parse(buf, len, t);
	free(buf);
	return rv;
}

void
kiln_tree_free(kiln_tree *t)
{
	if (t == NULL)
		return;
	free(t->e);
	free(t->text);
	free(t);
}
