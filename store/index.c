/* index.c — the records: index (profile, URL -> blob), actions (key ->
 * result), files (path -> stat + hash), steps (profile, URL -> the engine's
 * decision record) and blob use times.
 *
 * Every record write is a struct rec_op: built and checked from a public
 * call's arguments (rop_index, rop_action, ...), then applied inside a write
 * transaction by rop_apply — alone for the single-record calls here, or
 * with many others for a kiln_batch (batch.c, rop_commit). Both paths share
 * every check and every byte written.
 *
 * Every record that names a blob is written in a transaction that first
 * checks the blob file exists and refreshes its use time. gc deletes blob
 * files only inside its own write transactions and skips any blob used
 * after it took its snapshot, so the two serialize: a record is committed
 * only while its blobs exist, and a blob named after gc looked is kept. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store_int.h"

int
blobrec_touch(db_txn *t, const kiln_id *id, uint64_t size, const uint8_t *sha,
              int64_t now)
{
	struct rec_blob r = {size, now, 0, {0}}, old = {0};
	uint8_t v[REC_BLOB_LEN];
	const void *ov;
	size_t ovlen, len;
	int had, decoded, rv;

	/* The record's SHA-256 outlives touches: read it back (the lookup
	 * finds the leaf the put then writes, so it costs little more). */
	rv = db_get(t, DB_BLOBS, id->b, sizeof id->b, &ov, &ovlen);
	if (rv != 0 && rv != KILN_ENOTFOUND)
		return rv;
	had = rv == 0;
	decoded = had && rec_blob_decode(ov, ovlen, &old) == 0;
	if (!decoded)
		old.has_sha = 0;
	if (sha != NULL) {
		r.has_sha = 1;
		memcpy(r.sha, sha, sizeof r.sha);
		/* a put of content already recorded with it: the entry is
		 * there (written with the record) */
		if (!old.has_sha || memcmp(old.sha, sha, sizeof old.sha) != 0) {
			/* a wrong one recorded before (damage) goes with its
			 * entry */
			if (old.has_sha && (rv = shamap_del(t, old.sha, id)) != 0)
				return rv;
			if ((rv = shamap_set(t, sha, id)) != 0)
				return rv;
		}
	} else if (old.has_sha) {
		r.has_sha = 1;
		memcpy(r.sha, old.sha, sizeof r.sha);
	}
	len = rec_blob_encode(&r, v);
	return blobrec_replace(t, id, v, len, had, decoded ? old.size : 0);
}

/* Check that each blob exists and mark it used; KILN_ENOTFOUND if not,
 * and then nothing was touched: a batch skips such a record and must
 * leave no trace of it. (The touching loop checks ids[0] before writing
 * anything, so the first pass starts at ids[1].) */
static int
name_blobs(db_txn *t, kiln_store *s, struct blob_seen *seen, const kiln_id *ids,
           size_t n, int64_t now)
{
	for (size_t i = 1; i < n; i++)
		if (!blob_seen_find(seen, &ids[i]) && kiln_store_has(s, &ids[i], NULL) != 0)
			return KILN_ENOTFOUND;
	for (size_t i = 0; i < n; i++) {
		uint64_t size;
		int rv;
		if (blob_seen_find(seen, &ids[i]))
			continue;   /* checked and touched in this transaction */
		if ((rv = kiln_store_has(s, &ids[i], &size)) != 0 ||
		    (rv = blobrec_touch(t, &ids[i], size, NULL, now)) != 0)
			return rv;
		blob_seen_add(seen, &ids[i]);
	}
	return 0;
}

void
blob_seen_init(struct blob_seen *b, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n && cap < ((size_t)1 << 30))
		cap *= 2;
	b->v = calloc(cap, sizeof *b->v);
	b->cap = b->v != NULL ? cap : 0;
	b->n = 0;
}

void
blob_seen_free(struct blob_seen *b)
{
	free(b->v);
	b->v = NULL;
	b->cap = b->n = 0;
}

/* The slot of id, or the empty one where it would go; NULL when full. */
static struct seen_slot *
seen_slot(const struct blob_seen *b, const kiln_id *id)
{
	uint64_t h;

	memcpy(&h, id->b, sizeof h);   /* a content hash: any 8 bytes spread */
	for (size_t i = 0, at = (size_t)h & (b->cap - 1); i < b->cap;
	     i++, at = (at + 1) & (b->cap - 1))
		if (!b->v[at].used || kiln_id_cmp(&b->v[at].id, id) == 0)
			return &b->v[at];
	return NULL;
}

int
blob_seen_find(const struct blob_seen *b, const kiln_id *id)
{
	struct seen_slot *sl;

	return b != NULL && b->cap != 0 && (sl = seen_slot(b, id)) != NULL && sl->used;
}

/* Double b's table; 0, or -1 (b unchanged) when out of memory. The count
 * of ids a commit names is a guess (a touched record's outputs count one),
 * and a full table would make every miss a walk over all of it. */
static int
blob_seen_grow(struct blob_seen *b)
{
	struct blob_seen n = {NULL, b->cap * 2, b->n};

	if (b->cap >= ((size_t)1 << 30) || (n.v = calloc(n.cap, sizeof *n.v)) == NULL)
		return -1;
	for (size_t i = 0; i < b->cap; i++)
		if (b->v[i].used)
			*seen_slot(&n, &b->v[i].id) = b->v[i];
	free(b->v);
	*b = n;
	return 0;
}

void
blob_seen_add(struct blob_seen *b, const kiln_id *id)
{
	struct seen_slot *sl;

	if (b == NULL || b->cap == 0 || ((b->n + 1) * 2 > b->cap && blob_seen_grow(b) != 0) ||
	    (sl = seen_slot(b, id)) == NULL)
		return;
	if (!sl->used)
		b->n++;
	*sl = (struct seen_slot){*id, 1};
}

/* ---- blob use ---- */

struct touch_arg {
	kiln_store *s;
	const kiln_id *ids;
	size_t n;
};

static int
touch_txn(db_txn *t, void *arg)
{
	struct touch_arg *a = arg;
	int64_t now = store_now(a->s);

	for (size_t i = 0; i < a->n; i++) {
		uint64_t size;
		int rv;
		if (kiln_store_has(a->s, &a->ids[i], &size) != 0)
			continue;
		if ((rv = blobrec_touch(t, &a->ids[i], size, NULL, now)) != 0)
			return rv;
	}
	return 0;
}

int
kiln_store_touch(kiln_store *s, const kiln_id *ids, size_t n)
{
	struct touch_arg a = {s, ids, n};

	if (n == 0)
		return 0;
	return db_write(s->db, touch_txn, &a);
}

/* ---- building ops ---- */

static int
payload_check(const void *data, size_t len)
{
	if (len > 0 && data == NULL)
		return KILN_EINVAL;
	return len > REC_PAYLOAD_MAX ? KILN_ERANGE : 0;
}

int
rop_index(struct rec_op *op, enum rop_kind kind, char keybuf[INDEX_KEY_MAX],
          const char *profile, const char *url, const kiln_id *id)
{
	int n = index_key(profile, url, keybuf);

	if (n < 0)
		return n;
	if (kind == ROP_INDEX_SET && id == NULL)
		return KILN_EINVAL;
	memset(op, 0, sizeof *op);
	op->kind = kind;
	op->key = keybuf;
	op->klen = (size_t)n;
	if (id != NULL)
		op->id = *id;
	return 0;
}

int
rop_step(struct rec_op *op, enum rop_kind kind, char keybuf[INDEX_KEY_MAX],
         const char *profile, const char *url, const void *data, size_t len)
{
	int rv = rop_index(op, kind, keybuf, profile, url, NULL);

	if (rv != 0 || (rv = payload_check(data, len)) != 0)
		return rv;
	op->data = data;
	op->len = len;
	return 0;
}

int
rop_action(struct rec_op *op, enum rop_kind kind, const kiln_id *key,
           const kiln_id *outputs, size_t noutputs, const void *data,
           size_t len)
{
	int rv;

	if (key == NULL || (noutputs > 0 && outputs == NULL))
		return KILN_EINVAL;
	if ((rv = payload_check(data, len)) != 0)
		return rv;
	/* The record counts outputs in 32 bits. */
	if (noutputs > UINT32_MAX / 16)
		return KILN_ERANGE;
	memset(op, 0, sizeof *op);
	op->kind = kind;
	op->key = key->b;
	op->klen = sizeof key->b;
	op->outputs = outputs;
	op->noutputs = noutputs;
	op->data = data;
	op->len = len;
	return 0;
}

int
rop_file(struct rec_op *op, enum rop_kind kind, const char *path,
         const kiln_file_rec *r)
{
	if (kiln_url_check(path) != 0 || (kind == ROP_FILE_PUT && r == NULL))
		return KILN_EINVAL;
	memset(op, 0, sizeof *op);
	op->kind = kind;
	op->key = path;
	op->klen = strlen(path);
	if (r != NULL)
		op->file = *r;
	return 0;
}

int
rop_names_blobs(const struct rec_op *op)
{
	return op->kind == ROP_INDEX_SET || op->kind == ROP_ACTION_PUT;
}

/* ---- applying ops ---- */

static int
index_set_apply(db_txn *t, kiln_store *s, struct blob_seen *seen,
                const struct rec_op *op, int64_t now)
{
	struct rec_index r = {op->id, now};
	uint8_t v[REC_INDEX_LEN];
	int rv;

	if ((rv = name_blobs(t, s, seen, &op->id, 1, now)) != 0)
		return rv;
	rec_index_encode(&r, v);
	return db_put(t, DB_INDEX, op->key, op->klen, v, sizeof v);
}

/* Encode rec and put it under op's key in the actions db. */
static int
action_write(db_txn *t, const struct rec_op *op, const kiln_action *rec)
{
	size_t size = rec_action_size(rec->noutputs, rec->len);
	uint8_t *v = malloc(size);
	int rv;

	if (v == NULL)
		return KILN_ENOMEM;
	rec_action_encode(rec, v);
	rv = db_put(t, DB_ACTIONS, op->key, op->klen, v, size);
	free(v);
	return rv;
}

static int
action_put_apply(db_txn *t, kiln_store *s, struct blob_seen *seen,
                 const struct rec_op *op, int64_t now)
{
	kiln_action rec = {{{0}}, now, now, op->noutputs, (kiln_id *)op->outputs,
	                   op->len, (void *)op->data};
	const void *old;
	size_t oldlen;
	int rv;

	if ((rv = name_blobs(t, s, seen, op->outputs, op->noutputs, now)) != 0)
		return rv;
	/* Keep the first creation time across replacements. */
	if (db_get(t, DB_ACTIONS, op->key, op->klen, &old, &oldlen) == 0) {
		kiln_action *prev;
		if (rec_action_decode(old, oldlen, &prev) == 0) {
			rec.created_ns = prev->created_ns;
			kiln_action_free(prev);
		}
	}
	return action_write(t, op, &rec);
}

static int
action_touch_apply(db_txn *t, kiln_store *s, struct blob_seen *seen,
                   const struct rec_op *op, int64_t now)
{
	kiln_action *rec;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_ACTIONS, op->key, op->klen, &v, &vlen)) != 0 ||
	    (rv = rec_action_decode(v, vlen, &rec)) != 0)
		return rv;
	/* A touch keeps the result a gc root for another max-age, so it must
	 * keep its blobs too: gc may have listed the result as too old to be
	 * a root just before this touch, and then keeps it but goes on to
	 * remove its outputs unless their use times say they were used after
	 * it started (gc.c). A result whose blob is already gone is not
	 * touched: it is no longer a result, and its caller must not believe
	 * it cached. */
	rv = name_blobs(t, s, seen, rec->outputs, rec->noutputs, now);
	if (rv == 0) {
		rec->used_ns = now;
		rv = action_write(t, op, rec);
	} else if (rv == KILN_ENOTFOUND) {
		rv = ROP_EBLOBGONE;
	}
	kiln_action_free(rec);
	return rv;
}

static int
step_put_apply(db_txn *t, const struct rec_op *op, int64_t now)
{
	size_t size = rec_step_size(op->len);
	uint8_t *v = malloc(size);
	int rv;

	if (v == NULL)
		return KILN_ENOMEM;
	rec_step_encode(now, op->data, op->len, v);
	rv = db_put(t, DB_STEPS, op->key, op->klen, v, size);
	free(v);
	return rv;
}

int
rop_apply(db_txn *t, kiln_store *s, struct blob_seen *seen, const struct rec_op *op,
          int64_t now)
{
	uint8_t v[REC_FILE_LEN];

	switch (op->kind) {
	case ROP_INDEX_SET: return index_set_apply(t, s, seen, op, now);
	case ROP_INDEX_DEL: return db_del(t, DB_INDEX, op->key, op->klen);
	case ROP_ACTION_PUT: return action_put_apply(t, s, seen, op, now);
	case ROP_ACTION_TOUCH: return action_touch_apply(t, s, seen, op, now);
	case ROP_ACTION_DEL: return db_del(t, DB_ACTIONS, op->key, op->klen);
	case ROP_FILE_PUT:
		rec_file_encode(&op->file, v);
		return db_put(t, DB_FILES, op->key, op->klen, v, sizeof v);
	case ROP_FILE_DEL: return db_del(t, DB_FILES, op->key, op->klen);
	case ROP_STEP_PUT: return step_put_apply(t, op, now);
	case ROP_STEP_DEL: return db_del(t, DB_STEPS, op->key, op->klen);
	case ROP_DEPS_SET: return deps_set_apply(t, op);
	}
	return KILN_EINVAL;
}

/* ---- reading ---- */

/* A borrowed value by key, for the get calls. */
struct get_arg {
	enum db_name db;
	const void *key;
	size_t klen;
	int (*decode)(const void *v, size_t vlen, void *out);
	void *out;
};

static int
get_txn(db_txn *t, void *arg)
{
	struct get_arg *a = arg;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, a->db, a->key, a->klen, &v, &vlen)) != 0)
		return rv;
	return a->decode(v, vlen, a->out);
}

static int
record_get(kiln_store *s, enum db_name db, const void *key, size_t klen,
           int (*decode)(const void *v, size_t vlen, void *out), void *out)
{
	struct get_arg a = {db, key, klen, decode, out};

	return db_read(s->db, get_txn, &a);
}

/* ---- index ---- */

int
kiln_store_index_set(kiln_store *s, const char *profile, const char *url,
                     const kiln_id *id)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;
	int rv;

	if ((rv = rop_index(&op, ROP_INDEX_SET, key, profile, url, id)) != 0)
		return rv;
	return rop_commit(s, &op, 1, NULL);
}

static int
index_decode(const void *v, size_t vlen, void *out)
{
	struct rec_index r;
	int rv = rec_index_decode(v, vlen, &r);

	if (rv == 0)
		*(kiln_id *)out = r.id;
	return rv;
}

int
kiln_store_index_get(kiln_store *s, const char *profile, const char *url,
                     kiln_id *id)
{
	char key[INDEX_KEY_MAX];
	int n = index_key(profile, url, key);

	if (n < 0)
		return n;
	return record_get(s, DB_INDEX, key, (size_t)n, index_decode, id);
}

int
kiln_store_index_delete(kiln_store *s, const char *profile, const char *url)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;
	int rv;

	if ((rv = rop_index(&op, ROP_INDEX_DEL, key, profile, url, NULL)) != 0)
		return rv;
	return rop_commit(s, &op, 1, NULL);
}

struct list_arg {
	const char *profile;
	const char *url_prefix;
	kiln_index_fn fn;
	void *arg;
	int user_rv;
};

/* What list_one returns to db_each besides 0 and a KILN_E* code. */
enum { LIST_STOPPED = 1 /* the user's callback stopped the walk */ };

static int
list_one(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
         void *arg)
{
	struct list_arg *a = arg;
	char key[INDEX_KEY_MAX + 1];
	const char *url;
	struct rec_index r;

	(void)t;
	if (klen > INDEX_KEY_MAX || rec_index_decode(v, vlen, &r) != 0)
		return 0; /* fsck reports undecodable records */
	memcpy(key, k, klen);
	key[klen] = '\0';
	url = memchr(key, '\0', klen);
	if (url == NULL)
		return 0;
	url++;
	if (a->url_prefix != NULL && strncmp(url, a->url_prefix, strlen(a->url_prefix)) != 0)
		return 0;
	if ((a->user_rv = a->fn(key, url, &r.id, a->arg)) != 0)
		return LIST_STOPPED;
	return 0;
}

static int
list_txn(db_txn *t, void *arg)
{
	struct list_arg *a = arg;
	char prefix[INDEX_KEY_MAX];
	int n = 0;

	if (a->profile != NULL) {
		/* Within one profile, URL order is key order: seek straight to
		 * "<profile>\0<url_prefix>". */
		const char *up = a->url_prefix ? a->url_prefix : "";
		size_t pl = strlen(a->profile), ul = strlen(up);
		if (pl + 1 + ul > sizeof prefix)
			return KILN_EINVAL;
		memcpy(prefix, a->profile, pl);
		prefix[pl] = '\0';
		memcpy(prefix + pl + 1, up, ul);
		n = (int)(pl + 1 + ul);
	}
	return db_each(t, DB_INDEX, prefix, (size_t)n, list_one, a);
}

int
kiln_store_index_list(kiln_store *s, const char *profile, const char *url_prefix,
                      kiln_index_fn fn, void *arg)
{
	struct list_arg a = {profile, url_prefix, fn, arg, 0};
	int rv;

	if (profile != NULL && kiln_profile_check(profile) != 0)
		return KILN_EINVAL;
	if (url_prefix != NULL && strlen(url_prefix) > 400)
		return KILN_EINVAL;
	rv = db_read(s->db, list_txn, &a);
	return rv == LIST_STOPPED ? a.user_rv : rv;
}

/* ---- actions ---- */

/* The single-record action calls other than get. */
static int
action_commit(kiln_store *s, enum rop_kind kind, const kiln_id *key,
              const kiln_id *outputs, size_t noutputs, const void *data,
              size_t len)
{
	struct rec_op op;
	int rv;

	if ((rv = rop_action(&op, kind, key, outputs, noutputs, data, len)) != 0)
		return rv;
	return rop_commit(s, &op, 1, NULL);
}

int
kiln_store_action_put(kiln_store *s, const kiln_id *key, const kiln_id *outputs,
                      size_t noutputs, const void *data, size_t len)
{
	return action_commit(s, ROP_ACTION_PUT, key, outputs, noutputs, data, len);
}

static int
action_decode(const void *v, size_t vlen, void *out)
{
	return rec_action_decode(v, vlen, out);
}

int
kiln_store_action_get(kiln_store *s, const kiln_id *key, kiln_action **ap)
{
	kiln_action *a;
	int rv = record_get(s, DB_ACTIONS, key->b, sizeof key->b, action_decode, &a);

	if (rv != 0)
		return rv;
	a->key = *key;
	*ap = a;
	return 0;
}

void
kiln_action_free(kiln_action *a)
{
	free(a); /* one allocation: see rec_action_decode */
}

int
kiln_store_action_touch(kiln_store *s, const kiln_id *key)
{
	return action_commit(s, ROP_ACTION_TOUCH, key, NULL, 0, NULL, 0);
}

int
kiln_store_action_delete(kiln_store *s, const kiln_id *key)
{
	return action_commit(s, ROP_ACTION_DEL, key, NULL, 0, NULL, 0);
}

/* ---- files ---- */

static int
file_commit(kiln_store *s, enum rop_kind kind, const char *path,
            const kiln_file_rec *r)
{
	struct rec_op op;
	int rv;

	if ((rv = rop_file(&op, kind, path, r)) != 0)
		return rv;
	return rop_commit(s, &op, 1, NULL);
}

int
kiln_store_file_put(kiln_store *s, const char *path, const kiln_file_rec *r)
{
	return file_commit(s, ROP_FILE_PUT, path, r);
}

static int
file_decode(const void *v, size_t vlen, void *out)
{
	return rec_file_decode(v, vlen, out);
}

int
kiln_store_file_get(kiln_store *s, const char *path, kiln_file_rec *r)
{
	kiln_file_rec got;
	int rv;

	if (kiln_url_check(path) != 0)
		return KILN_EINVAL;
	rv = record_get(s, DB_FILES, path, strlen(path), file_decode, &got);
	if (rv == 0)
		*r = got;
	return rv;
}

int
kiln_store_file_delete(kiln_store *s, const char *path)
{
	return file_commit(s, ROP_FILE_DEL, path, NULL);
}

/* ---- steps ---- */

static int
step_commit(kiln_store *s, enum rop_kind kind, const char *profile,
            const char *url, const void *data, size_t len)
{
	char key[INDEX_KEY_MAX];
	struct rec_op op;
	int rv;

	if ((rv = rop_step(&op, kind, key, profile, url, data, len)) != 0)
		return rv;
	return rop_commit(s, &op, 1, NULL);
}

int
kiln_store_step_put(kiln_store *s, const char *profile, const char *url,
                    const void *data, size_t len)
{
	return step_commit(s, ROP_STEP_PUT, profile, url, data, len);
}

struct step_out {
	void *data;
	size_t len;
};

/* Copies the payload out of the transaction's borrowed value. */
static int
step_decode(const void *v, size_t vlen, void *out)
{
	struct step_out *o = out;
	const void *data;
	int64_t set_ns;
	int rv = rec_step_decode(v, vlen, &set_ns, &data, &o->len);

	if (rv != 0)
		return rv;
	if ((o->data = malloc(o->len + 1)) == NULL)
		return KILN_ENOMEM;
	memcpy(o->data, data, o->len);
	return 0;
}

int
kiln_store_step_get(kiln_store *s, const char *profile, const char *url,
                    void **data, size_t *len)
{
	char key[INDEX_KEY_MAX];
	struct step_out o = {NULL, 0};
	int rv, n = index_key(profile, url, key);

	if (n < 0)
		return n;
	if ((rv = record_get(s, DB_STEPS, key, (size_t)n, step_decode, &o)) != 0)
		return rv;
	*data = o.data;
	*len = o.len;
	return 0;
}

int
kiln_store_step_delete(kiln_store *s, const char *profile, const char *url)
{
	return step_commit(s, ROP_STEP_DEL, profile, url, NULL, 0);
}
