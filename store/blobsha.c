/* blobsha.c — each blob's second name, its SHA-256: the sha256 map that
 * finds a blob by it, and the SHA-256 of a blob whose record predates
 * them.
 *
 * The rule the other modules keep: a blob record holds a SHA-256 exactly
 * when the sha256 database maps that SHA-256 back to the blob. Both are
 * written in the same transaction (blobrec_touch, here) and deleted in the
 * same transaction (blobrec_del: gc, fsck); fsck checks and repairs the
 * pair. Puts compute the SHA-256 in the pass that hashes the bytes
 * (blob.c); only records written before this existed (version 1,
 * records.c) lack one, and get it here the first time it is asked for. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

int
shamap_set(db_txn *t, const uint8_t sha[KILN_SHA256_LEN], const kiln_id *id)
{
	uint8_t v[REC_SHA_LEN];

	rec_sha_encode(id, v);
	return db_put(t, DB_SHA256, sha, KILN_SHA256_LEN, v, sizeof v);
}

int
shamap_del(db_txn *t, const uint8_t sha[KILN_SHA256_LEN], const kiln_id *id)
{
	const void *v;
	size_t vlen;
	kiln_id got;
	int rv;

	if (db_get(t, DB_SHA256, sha, KILN_SHA256_LEN, &v, &vlen) != 0)
		return 0;
	/* an undecodable entry names nothing: it goes too */
	if (rec_sha_decode(v, vlen, &got) == 0 && kiln_id_cmp(&got, id) != 0)
		return 0;
	rv = db_del(t, DB_SHA256, sha, KILN_SHA256_LEN);
	return rv == KILN_ENOTFOUND ? 0 : rv;
}

int
blobrec_del(db_txn *t, const kiln_id *id)
{
	struct rec_blob r;
	const void *v;
	size_t vlen;
	uint64_t size;
	int rv;

	if ((rv = db_get(t, DB_BLOBS, id->b, sizeof id->b, &v, &vlen)) != 0)
		return rv;
	/* v is LMDB's until the next write: decoded before shamap_del */
	if (rec_blob_decode(v, vlen, &r) != 0) {
		r.has_sha = 0;
		r.size = 0;   /* what the store's figures count it as */
	}
	size = r.size;
	if (r.has_sha && (rv = shamap_del(t, r.sha, id)) != 0)
		return rv;
	return blobrec_del_sized(t, id, size);
}

/* ---- asking ---- */

struct ask {
	kiln_store *s;
	kiln_id id;
	uint8_t sha[KILN_SHA256_LEN];
	int found;
	int64_t mtime_ns;   /* the file's, for a blob without a record */
	uint64_t size;
};

static int
recorded_txn(db_txn *t, void *arg)
{
	struct ask *a = arg;
	struct rec_blob r;
	const void *v;
	size_t vlen;

	if (db_get(t, DB_BLOBS, a->id.b, sizeof a->id.b, &v, &vlen) == 0 &&
	    rec_blob_decode(v, vlen, &r) == 0 && r.has_sha) {
		memcpy(a->sha, r.sha, sizeof a->sha);
		a->found = 1;
	}
	return 0;
}

/* A put of this handle whose record waits for the next commit
 * (KILN_DURABLE_BATCH): by id when sha is NULL, else by SHA-256. 1 when
 * found (a->id and a->sha set). */
static int
pending_find(struct ask *a, const uint8_t *sha)
{
	kiln_store *s = a->s;
	int found = 0;

	pthread_mutex_lock(&s->uses_mu);
	for (size_t i = s->nuses; i-- > 0 && !found;) {
		const struct pending_use *u = &s->uses[i];
		found = sha != NULL ? memcmp(u->sha, sha, sizeof u->sha) == 0
		                    : kiln_id_cmp(&u->id, &a->id) == 0;
		if (found) {
			a->id = u->id;
			memcpy(a->sha, u->sha, sizeof a->sha);
		}
	}
	pthread_mutex_unlock(&s->uses_mu);
	return found;
}

/* Record the SHA-256 just computed, unless another caller did, or the
 * record is one this kiln cannot read (left alone, as everywhere). A
 * blob without a record gets one used when its file was written: what gc
 * judged it by until now. gc removes files only in its own write
 * transactions, so a blob present here stays present until commit. */
static int
fill_txn(db_txn *t, void *arg)
{
	struct ask *a = arg;
	struct rec_blob r = {a->size, a->mtime_ns, 1, {0}};
	uint8_t v[REC_BLOB_LEN];
	const void *ov;
	size_t ovlen, len;
	int rv;

	if (kiln_store_has(a->s, &a->id, NULL) != 0)
		return 0;
	if ((rv = db_get(t, DB_BLOBS, a->id.b, sizeof a->id.b, &ov, &ovlen)) == 0) {
		struct rec_blob old;
		if (rec_blob_decode(ov, ovlen, &old) != 0 || old.has_sha)
			return 0;
		r.size = old.size;
		r.used_ns = old.used_ns;
	} else if (rv != KILN_ENOTFOUND) {
		return rv;
	}
	memcpy(r.sha, a->sha, sizeof r.sha);
	len = rec_blob_encode(&r, v);
	if ((rv = shamap_set(t, a->sha, &a->id)) != 0)
		return rv;
	return blobrec_write(t, &a->id, v, len);
}

/* Read the blob once, for both hashes: its SHA-256 is believed only when
 * the same bytes hash to its name. */
static int
sha_compute(struct ask *a)
{
	struct stat st;
	kiln_id got;
	int fd, rv;

	if ((rv = kiln_store_open_blob(a->s, &a->id, &fd)) != 0)
		return rv;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (fstat(fd, &st) != 0)
		rv = kiln_err_from_errno(errno);
	else
		rv = kiln_id_sha256_of_fd(fd, &got, a->sha, &a->size);
	close(fd);
	if (rv != 0)
		return rv;
	if (kiln_id_cmp(&got, &a->id) != 0)
		return KILN_ECORRUPT;
	a->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}

int
kiln_store_blob_sha256(kiln_store *s, const kiln_id *id, uint8_t out[KILN_SHA256_LEN])
{
	struct ask a = {.s = s, .id = *id};
	int rv;

	if ((rv = kiln_store_has(s, id, NULL)) != 0)
		return rv;
	if ((rv = db_read(s->db, recorded_txn, &a)) != 0)
		return rv;
	if (!a.found && !pending_find(&a, NULL)) {
		if ((rv = sha_compute(&a)) != 0)
			return rv;
		/* a failed write loses only the saving: asked again, the
		 * bytes are read again */
		if (!(s->flags & KILN_STORE_RDONLY))
			db_write(s->db, fill_txn, &a);
	}
	memcpy(out, a.sha, KILN_SHA256_LEN);
	return 0;
}

static int
lookup_txn(db_txn *t, void *arg)
{
	struct ask *a = arg;
	const void *v;
	size_t vlen;

	if (db_get(t, DB_SHA256, a->sha, sizeof a->sha, &v, &vlen) == 0 &&
	    rec_sha_decode(v, vlen, &a->id) == 0)
		a->found = 1;
	return 0;
}

int
kiln_store_find_sha256(kiln_store *s, const uint8_t sha[KILN_SHA256_LEN], kiln_id *id)
{
	struct ask a = {.s = s};
	int rv;

	memcpy(a.sha, sha, sizeof a.sha);
	if ((rv = db_read(s->db, lookup_txn, &a)) != 0)
		return rv;
	/* an entry outlives its blob only until gc drops the record (a blob
	 * quarantined, or removed by hand): present is what counts */
	if ((a.found && kiln_store_has(s, &a.id, NULL) == 0) ||
	    (pending_find(&a, sha) && kiln_store_has(s, &a.id, NULL) == 0)) {
		*id = a.id;
		return 0;
	}
	return KILN_ENOTFOUND;
}
