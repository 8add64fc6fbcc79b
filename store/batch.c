/* batch.c — committing record writes: one (the single-record calls of
 * index.c) or many queued in a kiln_batch, in one write transaction.
 *
 * A kiln_batch is an array of struct rec_op, each owning one allocation
 * that holds its key, outputs and payload (copied in when queued). Commit
 * hands the array to rop_commit, which applies the ops in order inside one
 * db_write; the callback may run more than once (the map grew), so it
 * recomputes everything it reports. The batch is emptied only after the
 * transaction committed, so on error the caller still holds every record.
 *
 * Threads: a kiln_batch belongs to one thread at a time; rop_commit may be
 * called from any thread (db_write serializes writers). */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

struct kiln_batch {
	struct rec_op *ops;
	size_t n, cap;
};

/* ---- committing ---- */

/* How many ops a commit applies between looks at how much of the
 * database it has mapped (db_txn_trim_pages). */
#define UNMAP_EVERY_OPS 32

struct commit {
	kiln_store *s;
	const struct rec_op *ops;
	size_t n;
	const struct pending_use *uses; /* deferred use records of puts */
	size_t nuses;
	int lenient; /* a batch: tolerate what rop_commit documents */
	size_t skipped;
};

/* What a batch tolerates of op's error rv: 1 to go on without it. */
static int
tolerated(const struct rec_op *op, int rv)
{
	if (rv == KILN_ENOTFOUND || rv == ROP_EBLOBGONE)
		return 1;
	/* A record this kiln cannot decode is fsck's to report, not a reason
	 * to refuse every other record of the batch. */
	return op->kind == ROP_ACTION_TOUCH &&
	       (rv == KILN_ECORRUPT || rv == KILN_EVERSION);
}

static int
commit_txn(db_txn *t, void *arg)
{
	struct commit *c = arg;
	int64_t now = store_now(c->s);
	struct blob_seen seen;
	size_t named = c->nuses;
	int rv = 0;

	/* made afresh each time: the callback runs again after a map
	 * resize, in a new transaction */
	for (size_t i = 0; i < c->n; i++)
		named += c->ops[i].kind == ROP_ACTION_PUT ? c->ops[i].noutputs
		         : c->ops[i].kind == ROP_INDEX_SET ||
		           c->ops[i].kind == ROP_ACTION_TOUCH;  /* one, usually */
	blob_seen_init(&seen, named);
	c->skipped = 0;
	for (size_t i = 0; i < c->nuses && rv == 0; i++) {
		/* Each record lands on a random leaf or two, and the kernel
		 * maps 16 neighbouring pages a fault: a large commit maps far
		 * more of the database than it touches (figures:
		 * docs/store.md, "Resident memory"). */
		if (i % UNMAP_EVERY_OPS == UNMAP_EVERY_OPS - 1)
			db_txn_trim_pages(t);
		if (blob_seen_find(&seen, &c->uses[i].id) ||
		    kiln_store_has(c->s, &c->uses[i].id, NULL) != 0)
			continue;  /* touched already; or gc took it meanwhile */
		if ((rv = blobrec_touch(t, &c->uses[i].id, c->uses[i].size,
		                        c->uses[i].sha, now)) == 0)
			blob_seen_add(&seen, &c->uses[i].id);
	}
	for (size_t i = 0; i < c->n && rv == 0; i++) {
		if (i % UNMAP_EVERY_OPS == UNMAP_EVERY_OPS - 1)
			db_txn_trim_pages(t);   /* (as above) */
		if ((rv = rop_apply(t, c->s, &seen, &c->ops[i], now)) == 0)
			continue;
		if (!c->lenient || !tolerated(&c->ops[i], rv))
			break;
		if ((rv == KILN_ENOTFOUND && rop_names_blobs(&c->ops[i])) ||
		    rv == ROP_EBLOBGONE)
			c->skipped++;
		rv = 0;
	}
	blob_seen_free(&seen);
	return rv;
}

int
rop_commit(kiln_store *s, const struct rec_op *ops, size_t n, size_t *skipped)
{
	struct commit c = {s, ops, n, NULL, 0, skipped != NULL, 0};
	struct pending_use *uses;
	int rv;

	if (skipped != NULL)
		*skipped = 0;
	if ((rv = store_writable(s)) != 0)
		return rv;
	store_uses_take(s, &uses, &c.nuses);
	c.uses = uses;
	if (n == 0 && c.nuses == 0)
		return 0;
	/* Data before pointer: every blob put so far is on disk before any
	 * record that may name it commits (synchronously: see db_open). */
	if ((rv = store_sync_puts(s)) != 0 ||
	    (rv = db_write(s->db, commit_txn, &c)) != 0) {
		store_uses_return(s, uses, c.nuses);
		return rv == ROP_EBLOBGONE ? KILN_ENOTFOUND : rv;
	}
	free(uses);
	if (skipped != NULL)
		*skipped = c.skipped;
	return 0;
}

/* ---- owned copies of ops ---- */

int
rop_copy(const struct rec_op *op, struct rec_op *out)
{
	size_t nout = op->noutputs * sizeof *op->outputs;
	uint8_t *p = malloc(op->klen + nout + op->len);

	if (p == NULL)
		return KILN_ENOMEM;
	*out = *op;
	/* The key comes first: rop_free frees the block through it. */
	memcpy(p, op->key, op->klen);
	out->key = p;
	p += op->klen;
	if (nout > 0) {
		memcpy(p, op->outputs, nout);
		out->outputs = (const kiln_id *)p;
		p += nout;
	}
	if (op->len > 0) {
		memcpy(p, op->data, op->len);
		out->data = p;
	}
	return 0;
}

void
rop_free(struct rec_op *op)
{
	free((void *)op->key);
}

/* ---- the batch ---- */

int
kiln_batch_new(kiln_batch **b)
{
	if ((*b = calloc(1, sizeof **b)) == NULL)
		return KILN_ENOMEM;
	return 0;
}

static void
batch_clear(kiln_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		rop_free(&b->ops[i]);
	b->n = 0;
}

void
kiln_batch_free(kiln_batch *b)
{
	if (b == NULL)
		return;
	batch_clear(b);
	free(b->ops);
	free(b);
}

size_t
kiln_batch_len(const kiln_batch *b)
{
	return b->n;
}

/* Queue a copy of op (built by the caller, which returns its error). */
static int
batch_add(kiln_batch *b, int built, const struct rec_op *op)
{
	int rv;

	if (built != 0)
		return built;
	if (store_grow(&b->ops, &b->cap, b->n, sizeof *b->ops) != 0)
		return KILN_ENOMEM;
	if ((rv = rop_copy(op, &b->ops[b->n])) != 0)
		return rv;
	b->n++;
	return 0;
}

int
kiln_batch_index_set(kiln_batch *b, const char *profile, const char *url,
                     const kiln_id *id)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;

	return batch_add(b, rop_index(&op, ROP_INDEX_SET, key, profile, url, id), &op);
}

int
kiln_batch_index_delete(kiln_batch *b, const char *profile, const char *url)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;

	return batch_add(b, rop_index(&op, ROP_INDEX_DEL, key, profile, url, NULL), &op);
}

int
kiln_batch_action_put(kiln_batch *b, const kiln_id *key, const kiln_id *outputs,
                      size_t noutputs, const void *data, size_t len)
{
	struct rec_op op;

	return batch_add(b, rop_action(&op, ROP_ACTION_PUT, key, outputs, noutputs,
	                               data, len), &op);
}

int
kiln_batch_action_touch(kiln_batch *b, const kiln_id *key)
{
	struct rec_op op;

	return batch_add(b, rop_action(&op, ROP_ACTION_TOUCH, key, NULL, 0, NULL, 0),
	                 &op);
}

int
kiln_batch_file_put(kiln_batch *b, const char *path, const kiln_file_rec *r)
{
	struct rec_op op;

	return batch_add(b, rop_file(&op, ROP_FILE_PUT, path, r), &op);
}

int
kiln_batch_file_delete(kiln_batch *b, const char *path)
{
	struct rec_op op;

	return batch_add(b, rop_file(&op, ROP_FILE_DEL, path, NULL), &op);
}

int
kiln_batch_step_put(kiln_batch *b, const char *profile, const char *url,
                    const void *data, size_t len)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;

	return batch_add(b, rop_step(&op, ROP_STEP_PUT, key, profile, url, data, len),
	                 &op);
}

int
kiln_batch_deps_set(kiln_batch *b, const char *profile, const char *url,
                    const char *const *deps, size_t n)
{
	char key[INDEX_KEY_MAX + 1];
	struct rec_op op;
	size_t len = 0, at = 0;
	char *list = NULL;
	int rv;

	if (n > 0 && deps == NULL)
		return KILN_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (deps[i] == NULL || deps[i][0] == '\0')
			return KILN_EINVAL;
		len += strlen(deps[i]) + 1;
	}
	if (len > 0 && (list = malloc(len)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(deps[i]) + 1;
		memcpy(list + at, deps[i], l);
		at += l;
	}
	rv = rop_deps(&op, key, profile, url, list, len);
	if (rv == 0)
		rv = batch_add(b, 0, &op);
	free(list);
	return rv;
}

int
kiln_store_commit(kiln_store *s, kiln_batch *b, size_t *skipped)
{
	size_t n = 0;
	int rv = rop_commit(s, b->ops, b->n, &n);

	if (skipped != NULL)
		*skipped = n;
	if (rv == 0)
		batch_clear(b);
	return rv;
}
