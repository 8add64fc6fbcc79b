/* records.c — the binary values kept in the LMDB databases.
 *
 * Every value starts with a version byte (REC_VERSION, now 1); integers are
 * little-endian, ids are their 16 canonical bytes. Layouts, version 1:
 *
 *   index   key "<profile>\0<url>"
 *           value: ver u8 | blob id [16] | set_ns i64           (25 bytes)
 *   blobs   key blob id [16]
 *           value, version 1 (a record without a SHA-256):
 *                  ver u8 = 1 | size u64 | used_ns i64          (17 bytes)
 *           value, version 2 (REC_BLOB_VERSION, since issue 24):
 *                  ver u8 = 2 | size u64 | used_ns i64 |
 *                  sha256 [32]                                  (49 bytes)
 *           Both are read; a record is written as version 2 whenever its
 *           SHA-256 is known (every put), as version 1 otherwise (a touch
 *           of a version-1 record keeps it one). A version-1 record gets
 *           its SHA-256 when it is first asked for (blobsha.c) or by
 *           fsck --repair. A kiln from before version 2 reads a version-2
 *           record as KILN_EVERSION: its gc then judges that blob by its
 *           file's mtime, and its touches write version 1 again (the
 *           SHA-256 is then computed again when asked for).
 *   sha256  key SHA-256 [32]
 *           value: ver u8 | blob id [16]                        (17 bytes)
 *           The reverse of the SHA-256s in blobs records: written in the
 *           same transaction as the record, deleted with it (gc, fsck).
 *   files   key project-relative path
 *           value: ver u8 | size u64 | mtime_ns i64 | ino u64 |
 *                  ctime_ns i64 | hash [16]                     (49 bytes)
 *   actions key action key [16]
 *           value: ver u8 | created_ns i64 | used_ns i64 | noutputs u32 |
 *                  len u32 | outputs [16 * noutputs] | payload [len]
 *   steps   key "<profile>\0<url>"
 *           value: ver u8 | set_ns i64 | payload [rest, <= 64 MiB]
 *           The payload is the build engine's own record, opaque here
 *           and versioned by the engine; it names no blobs the store
 *           knows of (gc and fsck's blob checks ignore steps).
 *   meta    the store's figures and gc's state: layouts in blobstat.c
 *
 * Changing a layout: give the new one the next version number, keep the
 * decoder of every older version (or have store.c upgrade stores on open
 * and bump STORE_FORMAT), and add a case to tests/unit/test_db.c that
 * decodes a value written by the old version. A decoder meeting a version
 * above its own returns KILN_EVERSION and the record is left untouched. */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static void
put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Common header check: 0, KILN_EVERSION or KILN_ECORRUPT. */
static int
rec_check(const void *v, size_t len, size_t min)
{
	const uint8_t *p = v;

	if (len < 1)
		return KILN_ECORRUPT;
	if (p[0] > REC_VERSION)
		return KILN_EVERSION;
	if (p[0] != REC_VERSION || len < min)
		return KILN_ECORRUPT;
	return 0;
}

void
rec_index_encode(const struct rec_index *r, uint8_t out[REC_INDEX_LEN])
{
	out[0] = REC_VERSION;
	memcpy(out + 1, r->id.b, 16);
	put_u64(out + 17, (uint64_t)r->set_ns);
}

int
rec_index_decode(const void *v, size_t len, struct rec_index *r)
{
	const uint8_t *p = v;
	int rv = rec_check(v, len, REC_INDEX_LEN);

	if (rv != 0)
		return rv;
	if (len != REC_INDEX_LEN)
		return KILN_ECORRUPT;
	memcpy(r->id.b, p + 1, 16);
	r->set_ns = (int64_t)get_u64(p + 17);
	return 0;
}

size_t
rec_blob_encode(const struct rec_blob *r, uint8_t out[REC_BLOB_LEN])
{
	out[0] = r->has_sha ? REC_BLOB_VERSION : 1;
	put_u64(out + 1, r->size);
	put_u64(out + 9, (uint64_t)r->used_ns);
	if (!r->has_sha)
		return REC_BLOB_LEN_V1;
	memcpy(out + REC_BLOB_LEN_V1, r->sha, KILN_SHA256_LEN);
	return REC_BLOB_LEN;
}

/* Blob records have their own version (rec_check's is the others'). */
int
rec_blob_decode(const void *v, size_t len, struct rec_blob *r)
{
	const uint8_t *p = v;

	if (len < 1)
		return KILN_ECORRUPT;
	if (p[0] > REC_BLOB_VERSION)
		return KILN_EVERSION;
	if (!((p[0] == 1 && len == REC_BLOB_LEN_V1) ||
	      (p[0] == 2 && len == REC_BLOB_LEN)))
		return KILN_ECORRUPT;
	r->size = get_u64(p + 1);
	r->used_ns = (int64_t)get_u64(p + 9);
	r->has_sha = p[0] == 2;
	if (r->has_sha)
		memcpy(r->sha, p + REC_BLOB_LEN_V1, KILN_SHA256_LEN);
	return 0;
}

void
rec_sha_encode(const kiln_id *id, uint8_t out[REC_SHA_LEN])
{
	out[0] = REC_VERSION;
	memcpy(out + 1, id->b, 16);
}

int
rec_sha_decode(const void *v, size_t len, kiln_id *id)
{
	const uint8_t *p = v;
	int rv = rec_check(v, len, REC_SHA_LEN);

	if (rv != 0)
		return rv;
	if (len != REC_SHA_LEN)
		return KILN_ECORRUPT;
	memcpy(id->b, p + 1, 16);
	return 0;
}

void
rec_file_encode(const kiln_file_rec *r, uint8_t out[REC_FILE_LEN])
{
	out[0] = REC_VERSION;
	put_u64(out + 1, r->size);
	put_u64(out + 9, (uint64_t)r->mtime_ns);
	put_u64(out + 17, r->ino);
	put_u64(out + 25, (uint64_t)r->ctime_ns);
	memcpy(out + 33, r->hash.b, 16);
}

int
rec_file_decode(const void *v, size_t len, kiln_file_rec *r)
{
	const uint8_t *p = v;
	int rv = rec_check(v, len, REC_FILE_LEN);

	if (rv != 0)
		return rv;
	if (len != REC_FILE_LEN)
		return KILN_ECORRUPT;
	r->size = get_u64(p + 1);
	r->mtime_ns = (int64_t)get_u64(p + 9);
	r->ino = get_u64(p + 17);
	r->ctime_ns = (int64_t)get_u64(p + 25);
	memcpy(r->hash.b, p + 33, 16);
	return 0;
}

size_t
rec_action_size(size_t noutputs, size_t len)
{
	return REC_ACTION_HEAD + 16 * noutputs + len;
}

void
rec_action_encode(const kiln_action *a, uint8_t *out)
{
	out[0] = REC_VERSION;
	put_u64(out + 1, (uint64_t)a->created_ns);
	put_u64(out + 9, (uint64_t)a->used_ns);
	put_u32(out + 17, (uint32_t)a->noutputs);
	put_u32(out + 21, (uint32_t)a->len);
	for (size_t i = 0; i < a->noutputs; i++)
		memcpy(out + REC_ACTION_HEAD + 16 * i, a->outputs[i].b, 16);
	if (a->len > 0)
		memcpy(out + REC_ACTION_HEAD + 16 * a->noutputs, a->data, a->len);
}

/* Validate an action value's header; sets counts. */
static int
action_head(const uint8_t *p, size_t len, size_t *nout, size_t *plen)
{
	int rv = rec_check(p, len, REC_ACTION_HEAD);

	if (rv != 0)
		return rv;
	*nout = get_u32(p + 17);
	*plen = get_u32(p + 21);
	if (rec_action_size(*nout, *plen) != len)
		return KILN_ECORRUPT;
	return 0;
}

int
rec_action_decode(const void *v, size_t len, kiln_action **ap)
{
	const uint8_t *p = v;
	size_t nout, plen;
	kiln_action *a;
	int rv = action_head(p, len, &nout, &plen);

	if (rv != 0)
		return rv;
	/* One allocation: the struct, then outputs, then payload. */
	if ((a = calloc(1, sizeof *a + 16 * nout + plen + 1)) == NULL)
		return KILN_ENOMEM;
	a->created_ns = (int64_t)get_u64(p + 1);
	a->used_ns = (int64_t)get_u64(p + 9);
	a->noutputs = nout;
	a->outputs = (kiln_id *)(a + 1);
	a->len = plen;
	a->data = (char *)(a->outputs + nout);
	memcpy(a->outputs, p + REC_ACTION_HEAD, 16 * nout);
	memcpy(a->data, p + REC_ACTION_HEAD + 16 * nout, plen);
	*ap = a;
	return 0;
}

int
rec_action_outputs(const void *v, size_t len, int64_t *used_ns,
                   int (*fn)(const kiln_id *id, void *arg), void *arg)
{
	const uint8_t *p = v;
	size_t nout, plen;
	int rv = action_head(p, len, &nout, &plen);

	if (rv != 0)
		return rv;
	if (used_ns != NULL)
		*used_ns = (int64_t)get_u64(p + 9);
	for (size_t i = 0; fn != NULL && i < nout; i++) {
		kiln_id id;
		memcpy(id.b, p + REC_ACTION_HEAD + 16 * i, 16);
		if ((rv = fn(&id, arg)) != 0)
			return rv;
	}
	return 0;
}

size_t
rec_step_size(size_t len)
{
	return REC_STEP_HEAD + len;
}

void
rec_step_encode(int64_t set_ns, const void *data, size_t len, uint8_t *out)
{
	out[0] = REC_VERSION;
	put_u64(out + 1, (uint64_t)set_ns);
	if (len > 0)
		memcpy(out + REC_STEP_HEAD, data, len);
}

int
rec_step_decode(const void *v, size_t vlen, int64_t *set_ns, const void **data,
                size_t *len)
{
	const uint8_t *p = v;
	int rv = rec_check(v, vlen, REC_STEP_HEAD);

	if (rv != 0)
		return rv;
	*set_ns = (int64_t)get_u64(p + 1);
	*data = p + REC_STEP_HEAD;
	*len = vlen - REC_STEP_HEAD;
	return 0;
}

int
index_key(const char *profile, const char *url, char out[INDEX_KEY_MAX])
{
	size_t pl, ul;

	if (profile == NULL || url == NULL)
		return KILN_EINVAL;
	pl = strnlen(profile, 65);
	ul = strnlen(url, 401);
	if (names_profile_check(profile, pl) != 0 || names_url_check(url, ul) != 0)
		return KILN_EINVAL;
	memcpy(out, profile, pl);
	out[pl] = '\0';
	memcpy(out + pl + 1, url, ul);
	return (int)(pl + 1 + ul);
}
