/* yaml_tree.c — a description file's YAML as a tree of nodes with their
 * line and column. The only file that includes yaml.h.
 *
 * Bounds, because description files come from anyone with commit rights
 * and a daemon must not fall over on them: at most DESC_MAX_BYTES per file,
 * one document, nesting at most DESC_MAX_DEPTH deep, no tags, and at most
 * DESC_MAX_NODES nodes counting every node an alias repeats (libyaml 0.2.5
 * has no depth limit, and aliases let a tiny file stand for an exponential
 * tree — the "billion laughs"). An alias shares its anchor's node: the tree
 * is a DAG, and walking it costs at most the node budget. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "desc_int.h"

struct frame {
	ynode *node;
	vec kids; /* ynode * */
	size_t count; /* nodes in this subtree so far */
};

struct anchor {
	const char *name;
	ynode *node;
	size_t count; /* 0 while the anchored collection is still open */
};

struct builder {
	arena *a;     /* the tree: nodes, their child arrays, anchors */
	arena *strs;  /* scalar text, which outlives the tree */
	diags *dg;
	const char *file;
	struct frame stack[DESC_MAX_DEPTH + 1];
	int depth;
	vec anchors; /* struct anchor */
	size_t total;
	ynode *root;
	int ndocs;
};

static kiln_loc
mark_loc(const char *file, yaml_mark_t m)
{
	return (kiln_loc){file, (int)m.line + 1, (int)m.column + 1};
}

static int
fail(struct builder *b, yaml_mark_t m, const char *fmt, const char *arg)
{
	diag_add(b->dg, KILN_DIAG_ERROR, mark_loc(b->file, m), "", fmt, arg);
	return KILN_EINVAL;
}

/* Attach a finished node (count nodes big) to the open collection. */
static int
attach(struct builder *b, ynode *n, size_t count, yaml_mark_t m)
{
	b->total += count;
	if (b->total > DESC_MAX_NODES)
		return fail(b, m, "document too large: more than %s nodes "
		            "(counting what aliases repeat)", "200000");
	if (b->depth == 0) {
		b->root = n;
		return 0;
	}
	b->stack[b->depth - 1].count += count;
	return vec_push(b->a, &b->stack[b->depth - 1].kids, &n) ? 0 : KILN_ENOMEM;
}

static int
anchor_add(struct builder *b, const yaml_char_t *name, ynode *n, size_t count)
{
	struct anchor an = {arena_strdup(b->a, (const char *)name), n, count};

	return an.name && vec_push(b->a, &b->anchors, &an) ? 0 : KILN_ENOMEM;
}

static ynode *
node_new(struct builder *b, enum ynode_type t, yaml_mark_t m)
{
	ynode *n = arena_alloc(b->a, sizeof *n);

	if (n != NULL) {
		n->type = t;
		n->line = (int)m.line + 1;
		n->col = (int)m.column + 1;
	}
	return n;
}

static int
on_scalar(struct builder *b, yaml_event_t *e)
{
	const char *v = (const char *)e->data.scalar.value;
	size_t len = e->data.scalar.length;
	ynode *n;

	if (!e->data.scalar.plain_implicit && !e->data.scalar.quoted_implicit)
		return fail(b, e->start_mark, "YAML tags such as '%s' are not supported",
		            (const char *)e->data.scalar.tag);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		char what[8];
		if ((c >= 0x20 || c == '\t' || c == '\n') && c != 0x7f)
			continue;
		/* Reported, and the load goes on so that every one is found. */
		snprintf(what, sizeof what, c ? "0x%02x" : "NUL", c);
		fail(b, e->start_mark, "control character %s in a value (NUL and "
		     "control characters are not allowed)", what);
		break;
	}
	if ((n = node_new(b, Y_SCALAR, e->start_mark)) == NULL ||
	    (n->str = arena_strndup(b->strs, v, len)) == NULL)
		return KILN_ENOMEM;
	n->len = len;
	n->plain = e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	if (e->data.scalar.anchor != NULL && anchor_add(b, e->data.scalar.anchor, n, 1) != 0)
		return KILN_ENOMEM;
	return attach(b, n, 1, e->start_mark);
}

static int
on_open(struct builder *b, yaml_event_t *e, enum ynode_type t)
{
	int implicit = t == Y_SEQ ? e->data.sequence_start.implicit
	                          : e->data.mapping_start.implicit;
	const yaml_char_t *tag = t == Y_SEQ ? e->data.sequence_start.tag
	                                    : e->data.mapping_start.tag;
	const yaml_char_t *anchor = t == Y_SEQ ? e->data.sequence_start.anchor
	                                       : e->data.mapping_start.anchor;
	struct frame *f;
	ynode *n;

	if (!implicit && tag != NULL)
		return fail(b, e->start_mark, "YAML tags such as '%s' are not supported",
		            (const char *)tag);
	if (b->depth == DESC_MAX_DEPTH)
		return fail(b, e->start_mark, "nested deeper than %s levels", "64");
	if ((n = node_new(b, t, e->start_mark)) == NULL)
		return KILN_ENOMEM;
	if (anchor != NULL && anchor_add(b, anchor, n, 0) != 0)
		return KILN_ENOMEM;
	f = &b->stack[b->depth++];
	f->node = n;
	f->count = 1;
	vec_init(&f->kids, sizeof(ynode *));
	return 0;
}

static int
on_close(struct builder *b, yaml_event_t *e)
{
	struct frame *f = &b->stack[--b->depth];
	ynode *n = f->node;
	struct anchor *an = b->anchors.items;

	n->items = f->kids.items;
	n->n = n->type == Y_MAP ? f->kids.n / 2 : f->kids.n;
	for (size_t i = 0; i < b->anchors.n; i++)
		if (an[i].node == n)
			an[i].count = f->count;
	/* The children were counted into b->total as they attached. */
	b->total -= f->count - 1;
	return attach(b, n, f->count, e->start_mark);
}

static int
on_alias(struct builder *b, yaml_event_t *e)
{
	const char *name = (const char *)e->data.alias.anchor;
	struct anchor *an = b->anchors.items;

	for (size_t i = b->anchors.n; i-- > 0;) {
		if (strcmp(an[i].name, name) != 0)
			continue;
		if (an[i].count == 0)
			return fail(b, e->start_mark, "alias '*%s' refers to a collection "
			            "that contains it", name);
		return attach(b, an[i].node, an[i].count, e->start_mark);
	}
	return fail(b, e->start_mark, "alias '*%s' names no anchor", name);
}

static int
on_event(struct builder *b, yaml_event_t *e)
{
	switch (e->type) {
	case YAML_DOCUMENT_START_EVENT:
		if (++b->ndocs > 1)
			return fail(b, e->start_mark, "%s", "one YAML document per "
			            "description file (found a second '---')");
		return 0;
	case YAML_SCALAR_EVENT: return on_scalar(b, e);
	case YAML_SEQUENCE_START_EVENT: return on_open(b, e, Y_SEQ);
	case YAML_MAPPING_START_EVENT: return on_open(b, e, Y_MAP);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT: return on_close(b, e);
	case YAML_ALIAS_EVENT: return on_alias(b, e);
	default: return 0;
	}
}

/* Read the whole file (it is small: bounded by DESC_MAX_BYTES). */
static int
slurp(const char *path, const char *file, diags *dg, char **buf, size_t *len)
{
	kiln_loc loc = {file, 0, 0};
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rv;

	if (fd < 0) {
		diag_add(dg, KILN_DIAG_ERROR, loc, "", "cannot read: %s", strerror(errno));
		return KILN_EINVAL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > DESC_MAX_BYTES) {
		close(fd);
		diag_add(dg, KILN_DIAG_ERROR, loc, "", "not a regular file of at most "
		         "%u bytes", DESC_MAX_BYTES);
		return KILN_EINVAL;
	}
	if ((*buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return KILN_ENOMEM;
	}
	*len = 0;
	while (*len < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + *len, (size_t)st.st_size - *len);
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	close(fd);
	rv = *len == (size_t)st.st_size ? 0 : KILN_EIO;
	if (rv != 0) {
		free(*buf);
		diag_add(dg, KILN_DIAG_ERROR, loc, "", "short read");
		return KILN_EINVAL;
	}
	return 0;
}

int
ytree_parse(const char *path, const char *file, arena *a, arena *strs, diags *dg,
            ynode **root)
{
	struct builder b = {.a = a, .strs = strs, .dg = dg, .file = file};
	yaml_parser_t p;
	yaml_event_t e;
	char *buf;
	size_t len;
	int rv = 0, done = 0;

	*root = NULL;
	vec_init(&b.anchors, sizeof(struct anchor));
	if ((rv = slurp(path, file, dg, &buf, &len)) != 0)
		return rv;
	if (memchr(buf, '\0', len) != NULL) {
		free(buf);
		diag_add(dg, KILN_DIAG_ERROR, (kiln_loc){file, 0, 0}, "",
		         "NUL byte in the file (not a text file?)");
		return KILN_EINVAL;
	}
	if (!yaml_parser_initialize(&p)) {
		free(buf);
		return KILN_ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (rv == 0 && !done) {
		if (!yaml_parser_parse(&p, &e)) {
			kiln_loc loc = mark_loc(file, p.problem_mark);
			diag_add(dg, KILN_DIAG_ERROR, loc, "", "YAML syntax: %s%s%s",
			         p.problem ? p.problem : "malformed",
			         p.context ? " " : "", p.context ? p.context : "");
			rv = KILN_EINVAL;
			break;
		}
		done = e.type == YAML_STREAM_END_EVENT;
		rv = on_event(&b, &e);
		yaml_event_delete(&e);
	}
	yaml_parser_delete(&p);
	free(buf);
	if (rv == 0 && (a->failed || strs->failed))
		rv = KILN_ENOMEM;
	if (rv == 0)
		*root = b.root;
	return rv;
}
