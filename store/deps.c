/* deps.c — the dependencies each step's last result discovered, kept both
 * ways so that "which steps depend on this file (or URL)" is one lookup.
 *
 * One database, `deps`, two kinds of keys (records.c's conventions: values
 * start with the version byte):
 *
 *   'F' "<profile>\0<url>"                -> ver u8 | list
 *        list: each dependency NUL-terminated, one after the other
 *   'R' h(<profile>\0<dep>) [16] h(<url>) [16]  -> ver u8 | url
 *        h = XXH3-128; one record per (dependency, step)
 *
 * The reverse keys are hashes because a dependency can be a path of up to
 * PATH_MAX bytes and LMDB keys stop at 511; a lookup is one range scan
 * over the 17-byte prefix. Dependencies are opaque strings to the store
 * (the engine writes "f:PATH" for files and "u:URL" for needed URLs).
 *
 * Setting a step's list is one op (ROP_DEPS_SET) applied inside the batch's
 * write transaction: the old list is read there, so the reverse records
 * always match the forward list committed with them, whatever order
 * records of the same step were queued in. */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define DEP_KEY_LEN (1 + 16 + 16)

int
rop_deps(struct rec_op *op, char keybuf[INDEX_KEY_MAX + 1], const char *profile,
         const char *url, const void *list, size_t len)
{
	int n;

	if (len > 0 && (list == NULL || ((const char *)list)[len - 1] != '\0'))
		return KILN_EINVAL;
	if (len > REC_PAYLOAD_MAX)
		return KILN_ERANGE;
	if ((n = index_key(profile, url, keybuf + 1)) < 0)
		return n;
	keybuf[0] = 'F';
	memset(op, 0, sizeof *op);
	op->kind = ROP_DEPS_SET;
	op->key = keybuf;
	op->klen = (size_t)n + 1;
	op->data = list;
	op->len = len;
	return 0;
}

/* The reverse key of dep for the step named by the forward key fk. */
static void
rkey(const char *fk, size_t fklen, const char *dep, uint8_t out[DEP_KEY_LEN])
{
	const char *profile = fk + 1;
	size_t plen = strlen(profile);
	const char *url = profile + plen + 1;
	size_t ulen = fklen - 1 - plen - 1;
	size_t dlen = strlen(dep);
	char *buf = NULL;
	kiln_id h;
	char small[512];

	out[0] = 'R';
	/* profile \0 dep, hashed */
	if (plen + 1 + dlen <= sizeof small) {
		memcpy(small, profile, plen + 1);
		memcpy(small + plen + 1, dep, dlen);
		kiln_id_of_buf(small, plen + 1 + dlen, &h);
	} else if ((buf = malloc(plen + 1 + dlen)) != NULL) {
		memcpy(buf, profile, plen + 1);
		memcpy(buf + plen + 1, dep, dlen);
		kiln_id_of_buf(buf, plen + 1 + dlen, &h);
		free(buf);
	} else {
		/* cannot happen for real paths (PATH_MAX); hash the parts apart */
		kiln_id_of_buf(dep, dlen, &h);
	}
	memcpy(out + 1, h.b, 16);
	kiln_id_of_buf(url, ulen, &h);
	memcpy(out + 17, h.b, 16);
}

/* A list's entries as an array of pointers into it (sorted). */
static int
list_split(const char *list, size_t len, const char ***vp, size_t *np)
{
	size_t n = 0, k = 0;
	const char **v;

	for (size_t i = 0; i < len; i++)
		n += list[i] == '\0';
	*vp = NULL;
	*np = 0;
	if (n == 0)
		return 0;
	if ((v = malloc(n * sizeof *v)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < len; i += strlen(list + i) + 1)
		v[k++] = list + i;
	*vp = v;
	*np = n;
	return 0;
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int
deps_set_apply(db_txn *t, const struct rec_op *op)
{
	const char *fk = op->key;
	const char *url = fk + 1 + strlen(fk + 1) + 1;
	size_t ulen = op->klen - (size_t)(url - fk);
	const void *v;
	size_t vlen;
	char *old = NULL;
	size_t oldlen = 0, nnew = 0, nold = 0;
	const char **newv = NULL, **oldv = NULL;
	uint8_t k[DEP_KEY_LEN], *val = NULL;
	int rv;

	rv = db_get(t, DB_DEPS, op->key, op->klen, &v, &vlen);
	if (rv == 0) {
		/* copied: a put in this txn may move what v points at */
		if (vlen < 1)
			return KILN_ECORRUPT;
		if (((const uint8_t *)v)[0] != REC_VERSION)
			return ((const uint8_t *)v)[0] > REC_VERSION ? KILN_EVERSION
			                                             : KILN_ECORRUPT;
		oldlen = vlen - 1;
		if (oldlen > 0 && ((old = malloc(oldlen)) == NULL))
			return KILN_ENOMEM;
		if (oldlen > 0)
			memcpy(old, (const uint8_t *)v + 1, oldlen);
		if (oldlen > 0 && old[oldlen - 1] != '\0') {
			free(old);
			return KILN_ECORRUPT;
		}
	} else if (rv != KILN_ENOTFOUND) {
		return rv;
	}
	if ((rv = list_split(op->data, op->len, &newv, &nnew)) != 0 ||
	    (rv = list_split(old, oldlen, &oldv, &nold)) != 0)
		goto fail;
	if (nnew > 1)
		qsort(newv, nnew, sizeof *newv, str_cmp);
	for (size_t i = 0; i < nold; i++) {
		if (nnew > 0 && bsearch(&oldv[i], newv, nnew, sizeof *newv, str_cmp))
			continue;
		rkey(fk, op->klen, oldv[i], k);
		if ((rv = db_del(t, DB_DEPS, k, sizeof k)) != 0 && rv != KILN_ENOTFOUND)
			goto fail;
	}
	if ((val = malloc(1 + (ulen > op->len ? ulen : op->len))) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	val[0] = REC_VERSION;
	memcpy(val + 1, url, ulen);
	for (size_t i = 0; i < nnew; i++) {
		rkey(fk, op->klen, newv[i], k);
		if ((rv = db_put(t, DB_DEPS, k, sizeof k, val, 1 + ulen)) != 0)
			goto fail;
	}
	if (op->len == 0) {
		rv = db_del(t, DB_DEPS, op->key, op->klen);
		if (rv == KILN_ENOTFOUND)
			rv = 0;
	} else {
		memcpy(val + 1, op->data, op->len);
		rv = db_put(t, DB_DEPS, op->key, op->klen, val, 1 + op->len);
	}
fail:
	free(val);
	free(newv);
	free(oldv);
	free(old);
	return rv;
}

/* ---- reading ---- */

struct rd_arg {
	kiln_dep_fn fn;
	void *arg;
	char *buf;
	size_t cap;
};

/* Hand fn a NUL-terminated copy (values are borrowed, unterminated). */
static int
rd_emit(struct rd_arg *a, const void *p, size_t len)
{
	if (len + 1 > a->cap) {
		char *nb = realloc(a->buf, len + 1);
		if (nb == NULL)
			return KILN_ENOMEM;
		a->buf = nb;
		a->cap = len + 1;
	}
	memcpy(a->buf, p, len);
	a->buf[len] = '\0';
	return a->fn(a->buf, a->arg);
}

static int
rd_each(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
        void *arg)
{
	const uint8_t *p = v;

	(void)t;
	(void)k;
	if (klen != DEP_KEY_LEN || vlen < 1)
		return KILN_ECORRUPT;
	if (p[0] != REC_VERSION)
		return p[0] > REC_VERSION ? KILN_EVERSION : KILN_ECORRUPT;
	return rd_emit(arg, p + 1, vlen - 1);
}

struct rdeps_q {
	struct rd_arg a;
	uint8_t prefix[17];
};

static int
rdeps_txn(db_txn *t, void *arg)
{
	struct rdeps_q *q = arg;

	return db_each(t, DB_DEPS, q->prefix, sizeof q->prefix, rd_each, &q->a);
}

int
kiln_store_rdeps(kiln_store *s, const char *profile, const char *dep,
                 kiln_dep_fn fn, void *arg)
{
	struct rdeps_q q = {{fn, arg, NULL, 0}, {0}};
	size_t plen, dlen;
	char *buf;
	kiln_id h;
	int rv;

	if (profile == NULL || dep == NULL || fn == NULL ||
	    kiln_profile_check(profile) != 0)
		return KILN_EINVAL;
	plen = strlen(profile);
	dlen = strlen(dep);
	if ((buf = malloc(plen + 1 + dlen)) == NULL)
		return KILN_ENOMEM;
	memcpy(buf, profile, plen + 1);
	memcpy(buf + plen + 1, dep, dlen);
	kiln_id_of_buf(buf, plen + 1 + dlen, &h);
	free(buf);
	q.prefix[0] = 'R';
	memcpy(q.prefix + 1, h.b, 16);
	rv = db_read(s->db, rdeps_txn, &q);
	free(q.a.buf);
	return rv;
}

struct deps_q {
	struct rd_arg a;
	const char *key;
	size_t klen;
};

static int
deps_txn(db_txn *t, void *arg)
{
	struct deps_q *q = arg;
	const uint8_t *p;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_DEPS, q->key, q->klen, &v, &vlen)) != 0)
		return rv;
	p = v;
	if (vlen < 1 || p[0] != REC_VERSION)
		return vlen >= 1 && p[0] > REC_VERSION ? KILN_EVERSION : KILN_ECORRUPT;
	if (vlen > 1 && p[vlen - 1] != '\0')
		return KILN_ECORRUPT;
	for (size_t i = 1; i < vlen; ) {
		size_t l = strlen((const char *)p + i);
		if ((rv = rd_emit(&q->a, p + i, l)) != 0)
			return rv;
		i += l + 1;
	}
	return 0;
}

int
kiln_store_deps(kiln_store *s, const char *profile, const char *url,
                kiln_dep_fn fn, void *arg)
{
	char key[INDEX_KEY_MAX + 1];
	struct deps_q q = {{fn, arg, NULL, 0}, key, 0};
	int n, rv;

	if (fn == NULL || (n = index_key(profile, url, key + 1)) < 0)
		return KILN_EINVAL;
	key[0] = 'F';
	q.klen = (size_t)n + 1;
	rv = db_read(s->db, deps_txn, &q);
	free(q.a.buf);
	return rv;
}
