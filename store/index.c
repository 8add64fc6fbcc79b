/* index.c — the records: index (profile, URL -> blob), actions (key ->
 * result), files (path -> stat + hash) and blob use times.
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

#define ACTION_PAYLOAD_MAX (64u << 20)

int
blobrec_touch(db_txn *t, const kiln_id *id, uint64_t size, int64_t now)
{
	struct rec_blob r = {size, now};
	uint8_t v[REC_BLOB_LEN];

	rec_blob_encode(&r, v);
	return db_put(t, DB_BLOBS, id->b, sizeof id->b, v, sizeof v);
}

/* Check that each blob exists and mark it used; KILN_ENOTFOUND if not. */
static int
name_blobs(db_txn *t, kiln_store *s, const kiln_id *ids, size_t n, int64_t now)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t size;
		int rv = kiln_store_has(s, &ids[i], &size);
		if (rv != 0 || (rv = blobrec_touch(t, &ids[i], size, now)) != 0)
			return rv;
	}
	return 0;
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
	int64_t now = store_now_ns();

	for (size_t i = 0; i < a->n; i++) {
		uint64_t size;
		int rv;
		if (kiln_store_has(a->s, &a->ids[i], &size) != 0)
			continue;
		if ((rv = blobrec_touch(t, &a->ids[i], size, now)) != 0)
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

/* ---- index ---- */

struct index_arg {
	kiln_store *s;
	char key[INDEX_KEY_MAX];
	size_t klen;
	kiln_id id;
};

static int
index_arg_init(struct index_arg *a, kiln_store *s, const char *profile,
               const char *url)
{
	int n = index_key(profile, url, a->key);

	if (n < 0)
		return n;
	a->s = s;
	a->klen = (size_t)n;
	return 0;
}

static int
index_set_txn(db_txn *t, void *arg)
{
	struct index_arg *a = arg;
	int64_t now = store_now_ns();
	struct rec_index r = {a->id, now};
	uint8_t v[REC_INDEX_LEN];
	int rv;

	if ((rv = name_blobs(t, a->s, &a->id, 1, now)) != 0)
		return rv;
	rec_index_encode(&r, v);
	return db_put(t, DB_INDEX, a->key, a->klen, v, sizeof v);
}

int
kiln_store_index_set(kiln_store *s, const char *profile, const char *url,
                     const kiln_id *id)
{
	struct index_arg a;
	int rv;

	if ((rv = index_arg_init(&a, s, profile, url)) != 0)
		return rv;
	if ((rv = store_writable(s)) != 0)
		return rv;
	a.id = *id;
	return db_write(s->db, index_set_txn, &a);
}

static int
index_get_txn(db_txn *t, void *arg)
{
	struct index_arg *a = arg;
	struct rec_index r;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_INDEX, a->key, a->klen, &v, &vlen)) != 0 ||
	    (rv = rec_index_decode(v, vlen, &r)) != 0)
		return rv;
	a->id = r.id;
	return 0;
}

int
kiln_store_index_get(kiln_store *s, const char *profile, const char *url,
                     kiln_id *id)
{
	struct index_arg a;
	int rv;

	if ((rv = index_arg_init(&a, s, profile, url)) != 0)
		return rv;
	if ((rv = db_read(s->db, index_get_txn, &a)) == 0)
		*id = a.id;
	return rv;
}

static int
index_del_txn(db_txn *t, void *arg)
{
	struct index_arg *a = arg;

	return db_del(t, DB_INDEX, a->key, a->klen);
}

int
kiln_store_index_delete(kiln_store *s, const char *profile, const char *url)
{
	struct index_arg a;
	int rv;

	if ((rv = index_arg_init(&a, s, profile, url)) != 0)
		return rv;
	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, index_del_txn, &a);
}

struct list_arg {
	const char *profile;
	const char *url_prefix;
	kiln_index_fn fn;
	void *arg;
	int user_rv;
};

/* Marks "the user's callback stopped the walk" inside db_each. */
#define LIST_STOPPED 1

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

struct action_arg {
	kiln_store *s;
	const kiln_id *key;
	const kiln_id *outputs;
	size_t noutputs;
	const void *data;
	size_t len;
	kiln_action *out;
};

static int
action_put_txn(db_txn *t, void *arg)
{
	struct action_arg *a = arg;
	int64_t now = store_now_ns();
	kiln_action rec = {*a->key, now, now, a->noutputs, (kiln_id *)a->outputs,
	                   a->len, (void *)a->data};
	const void *old;
	size_t oldlen, size = rec_action_size(a->noutputs, a->len);
	uint8_t *v;
	int rv;

	if ((rv = name_blobs(t, a->s, a->outputs, a->noutputs, now)) != 0)
		return rv;
	/* Keep the first creation time across replacements. */
	if (db_get(t, DB_ACTIONS, a->key->b, 16, &old, &oldlen) == 0) {
		kiln_action *prev;
		if (rec_action_decode(old, oldlen, &prev) == 0) {
			rec.created_ns = prev->created_ns;
			kiln_action_free(prev);
		}
	}
	if ((v = malloc(size)) == NULL)
		return KILN_ENOMEM;
	rec_action_encode(&rec, v);
	rv = db_put(t, DB_ACTIONS, a->key->b, 16, v, size);
	free(v);
	return rv;
}

int
kiln_store_action_put(kiln_store *s, const kiln_id *key, const kiln_id *outputs,
                      size_t noutputs, const void *data, size_t len)
{
	struct action_arg a = {s, key, outputs, noutputs, data, len, NULL};
	int rv;

	if (len > ACTION_PAYLOAD_MAX || noutputs > UINT32_MAX / 16 ||
	    (len > 0 && data == NULL) || (noutputs > 0 && outputs == NULL))
		return KILN_EINVAL;
	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, action_put_txn, &a);
}

static int
action_get_txn(db_txn *t, void *arg)
{
	struct action_arg *a = arg;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_ACTIONS, a->key->b, 16, &v, &vlen)) != 0)
		return rv;
	return rec_action_decode(v, vlen, &a->out);
}

int
kiln_store_action_get(kiln_store *s, const kiln_id *key, kiln_action **ap)
{
	struct action_arg a = {s, key, NULL, 0, NULL, 0, NULL};
	int rv = db_read(s->db, action_get_txn, &a);

	if (rv != 0)
		return rv;
	a.out->key = *key;
	*ap = a.out;
	return 0;
}

void
kiln_action_free(kiln_action *a)
{
	free(a); /* one allocation: see rec_action_decode */
}

static int
action_touch_txn(db_txn *t, void *arg)
{
	struct action_arg *a = arg;
	kiln_action *rec;
	const void *v;
	size_t vlen;
	uint8_t *buf;
	int rv;

	if ((rv = db_get(t, DB_ACTIONS, a->key->b, 16, &v, &vlen)) != 0 ||
	    (rv = rec_action_decode(v, vlen, &rec)) != 0)
		return rv;
	rec->used_ns = store_now_ns();
	if ((buf = malloc(vlen)) == NULL) {
		kiln_action_free(rec);
		return KILN_ENOMEM;
	}
	rec_action_encode(rec, buf);
	rv = db_put(t, DB_ACTIONS, a->key->b, 16, buf, vlen);
	free(buf);
	kiln_action_free(rec);
	return rv;
}

int
kiln_store_action_touch(kiln_store *s, const kiln_id *key)
{
	struct action_arg a = {s, key, NULL, 0, NULL, 0, NULL};
	int rv;

	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, action_touch_txn, &a);
}

static int
action_del_txn(db_txn *t, void *arg)
{
	struct action_arg *a = arg;

	return db_del(t, DB_ACTIONS, a->key->b, 16);
}

int
kiln_store_action_delete(kiln_store *s, const kiln_id *key)
{
	struct action_arg a = {s, key, NULL, 0, NULL, 0, NULL};
	int rv;

	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, action_del_txn, &a);
}

/* ---- files ---- */

struct file_arg {
	const char *path;
	kiln_file_rec rec;
};

static int
file_put_txn(db_txn *t, void *arg)
{
	struct file_arg *a = arg;
	uint8_t v[REC_FILE_LEN];

	rec_file_encode(&a->rec, v);
	return db_put(t, DB_FILES, a->path, strlen(a->path), v, sizeof v);
}

int
kiln_store_file_put(kiln_store *s, const char *path, const kiln_file_rec *r)
{
	struct file_arg a = {path, *r};
	int rv;

	if (kiln_url_check(path) != 0)
		return KILN_EINVAL;
	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, file_put_txn, &a);
}

static int
file_get_txn(db_txn *t, void *arg)
{
	struct file_arg *a = arg;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_FILES, a->path, strlen(a->path), &v, &vlen)) != 0)
		return rv;
	return rec_file_decode(v, vlen, &a->rec);
}

int
kiln_store_file_get(kiln_store *s, const char *path, kiln_file_rec *r)
{
	struct file_arg a = {path, {0}};
	int rv;

	if (kiln_url_check(path) != 0)
		return KILN_EINVAL;
	if ((rv = db_read(s->db, file_get_txn, &a)) == 0)
		*r = a.rec;
	return rv;
}

static int
file_del_txn(db_txn *t, void *arg)
{
	struct file_arg *a = arg;

	return db_del(t, DB_FILES, a->path, strlen(a->path));
}

int
kiln_store_file_delete(kiln_store *s, const char *path)
{
	struct file_arg a = {path, {0}};
	int rv;

	if (kiln_url_check(path) != 0)
		return KILN_EINVAL;
	if ((rv = store_writable(s)) != 0)
		return rv;
	return db_write(s->db, file_del_txn, &a);
}
