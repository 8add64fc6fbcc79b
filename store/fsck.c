/* fsck.c — proving the store sound, and repairing it without inventing data.
 *
 * Order: (1) read every index and action record in one snapshot, noting the
 * blobs each names (and decode every step record, which names none); (2) re-hash every blob in objects/; (3) a named blob
 * that is neither sound nor corrupt is missing. Repair then moves corrupt
 * blobs and strays to corrupt/ and, in one write transaction, drops records
 * that still name a bad or missing blob (re-checked inside the transaction,
 * so a record a concurrent writer re-pointed meanwhile survives). Problems
 * are reported after repair so each says whether it was fixed.
 *
 * SHA-256s (blobsha.c's rule: a blob record holds one exactly when the
 * sha256 database maps it back): step (2) computes each blob's SHA-256 in
 * the same read as its XXH3; then one snapshot compares every sound blob's
 * record and entry with it, and walks the sha256 database for entries
 * naming another blob or none. Repair rewrites them from the content, in
 * the repair transaction, each re-checked there first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/* A record naming a blob, or an undecodable record (bad = 1). */
struct ref {
	kiln_id id;
	enum db_name db;
	uint8_t *key;
	size_t klen;
	int bad;
	size_t seq; /* walk order, so reports name the first record found */
};

struct problem {
	kiln_fsck_problem p;
	char where[600];
};

/* A sound blob's SHA-256, as its content says. */
struct blob_sha {
	kiln_id id;
	uint8_t sha[KILN_SHA256_LEN];
};

/* A SHA-256 repair: set the record's (and its entry), set an entry, or
 * delete one (sha the key, id what it named). */
enum sha_fix_kind { FIX_RECORD, FIX_ENTRY_SET, FIX_ENTRY_DEL };

struct sha_fix {
	enum sha_fix_kind kind;
	kiln_id id;
	uint8_t sha[KILN_SHA256_LEN];
};

struct fsck {
	kiln_store *s;
	int repair;
	kiln_fsck_stats *st;
	struct ref *refs;
	size_t nrefs, caprefs;
	struct idset sound, corrupt, missing;
	struct blob_sha *shas;       /* sound blobs, sorted by id before use */
	size_t nshas, capshas;
	struct blob_sha *by_sha;     /* the same, sorted by SHA-256 */
	struct sha_fix *fixes;
	size_t nfixes, capfixes;
	struct problem *probs;
	size_t nprobs, capprobs;
	int rv; /* first error inside a callback */
};

static int
ref_add(struct fsck *f, enum db_name db, const void *k, size_t klen,
        const kiln_id *id, int bad)
{
	struct ref *r;

	if (store_grow(&f->refs, &f->caprefs, f->nrefs, sizeof *f->refs) != 0)
		return KILN_ENOMEM;
	r = &f->refs[f->nrefs];
	memset(r, 0, sizeof *r);
	if ((r->key = malloc(klen)) == NULL)
		return KILN_ENOMEM;
	memcpy(r->key, k, klen);
	r->klen = klen;
	r->db = db;
	r->bad = bad;
	r->seq = f->nrefs;
	if (id != NULL)
		r->id = *id;
	f->nrefs++;
	return 0;
}

/* "index <profile> <url>", "step <profile> <url>" or "action <hex key>". */
static void
ref_where(const struct ref *r, char *buf, size_t len)
{
	char hex[KILN_ID_HEX_LEN + 1];

	if (r->db == DB_INDEX || r->db == DB_STEPS) {
		const char *k = (const char *)r->key;
		size_t pl = strnlen(k, r->klen);
		int ul = pl < r->klen ? (int)(r->klen - pl - 1) : 0;
		snprintf(buf, len, "%s %.*s %.*s", r->db == DB_INDEX ? "index" : "step",
		         (int)pl, k, ul, k + pl + 1);
		return;
	}
	if (r->klen == 16) {
		kiln_id key;
		memcpy(key.b, r->key, 16);
		kiln_id_to_hex(&key, hex);
		snprintf(buf, len, "action %s", hex);
	} else {
		snprintf(buf, len, "action (malformed key)");
	}
}

static int
collect_index(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
              void *arg)
{
	struct rec_index r;
	int bad = rec_index_decode(v, vlen, &r) != 0 ||
	          memchr(k, '\0', klen) == NULL;

	(void)t;
	return ref_add(arg, DB_INDEX, k, klen, bad ? NULL : &r.id, bad);
}

/* Steps name no blobs: only an undecodable one is a finding. */
static int
collect_step(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
             void *arg)
{
	const void *data;
	size_t len;
	int64_t set_ns;

	(void)t;
	if (rec_step_decode(v, vlen, &set_ns, &data, &len) == 0 &&
	    memchr(k, '\0', klen) != NULL)
		return 0;
	return ref_add(arg, DB_STEPS, k, klen, NULL, 1);
}

struct action_walk {
	struct fsck *f;
	const void *k;
	size_t klen;
};

static int
collect_output(const kiln_id *id, void *arg)
{
	struct action_walk *w = arg;

	return ref_add(w->f, DB_ACTIONS, w->k, w->klen, id, 0);
}

static int
collect_action(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
               void *arg)
{
	struct action_walk w = {arg, k, klen};
	int rv;

	(void)t;
	if (klen != 16)
		return ref_add(arg, DB_ACTIONS, k, klen, NULL, 1);
	rv = rec_action_outputs(v, vlen, NULL, collect_output, &w);
	if (rv == KILN_ECORRUPT || rv == KILN_EVERSION)
		return ref_add(arg, DB_ACTIONS, k, klen, NULL, 1);
	return rv;
}

static int
collect_txn(db_txn *t, void *arg)
{
	int rv = db_each(t, DB_INDEX, NULL, 0, collect_index, arg);

	if (rv == 0)
		rv = db_each(t, DB_ACTIONS, NULL, 0, collect_action, arg);
	return rv != 0 ? rv : db_each(t, DB_STEPS, NULL, 0, collect_step, arg);
}

static struct problem *
problem_add(struct fsck *f, enum kiln_fsck_kind kind, const kiln_id *id)
{
	struct problem *p;

	if (store_grow(&f->probs, &f->capprobs, f->nprobs, sizeof *f->probs) != 0)
		return NULL;
	p = &f->probs[f->nprobs++];
	memset(p, 0, sizeof *p);
	p->p.kind = kind;
	if (id != NULL)
		p->p.id = *id;
	return p;
}

/* Records by blob id, sound ones before undecodable ones of the same id,
 * and in walk order (index, then actions; key order) among equals. */
static int
ref_order(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	int c = kiln_id_cmp(&x->id, &y->id);

	if (c != 0)
		return c;
	if (x->bad != y->bad)
		return x->bad - y->bad;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Where a blob is named: the first record naming it, plus a count. */
static void
blob_where(const struct fsck *f, const kiln_id *id, char *buf, size_t len)
{
	const struct ref *first = NULL;
	size_t n = 0;
	char hex[KILN_ID_HEX_LEN + 1];

	size_t lo = 0, hi = f->nrefs;

	/* refs are sorted by id (ref_order): find the first naming id */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ref_order(&f->refs[mid], &(struct ref){.id = *id}) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < f->nrefs && !f->refs[i].bad &&
	                    kiln_id_cmp(&f->refs[i].id, id) == 0; i++) {
		if (first == NULL)
			first = &f->refs[i];
		n++;
	}
	if (first == NULL) {
		kiln_id_to_hex(id, hex);
		snprintf(buf, len, "objects/%.2s/%s (unreferenced)", hex, hex + 2);
		return;
	}
	ref_where(first, buf, len);
	if (n > 1)
		snprintf(buf + strlen(buf), len - strlen(buf), " and %zu more", n - 1);
}

/* Move a damaged file into corrupt/ for forensics. */
static int
quarantine(struct fsck *f, const char *rel, const char *name)
{
	char from[PATH_MAX], to[PATH_MAX];

	snprintf(from, sizeof from, "%s/%s", f->s->dir, rel);
	snprintf(to, sizeof to, "%s/corrupt/%s", f->s->dir, name);
	return rename(from, to) == 0 ? 0 : kiln_err_from_errno(errno);
}

/* kiln_store_verify, with the SHA-256 of the same read into sha. */
static int
verify_both(kiln_store *s, const kiln_id *id, uint8_t sha[KILN_SHA256_LEN])
{
	kiln_id got;
	int fd, rv;

	if ((rv = kiln_store_open_blob(s, id, &fd)) != 0)
		return rv;
	rv = kiln_id_sha256_of_fd(fd, &got, sha, NULL);
	close(fd);
	if (rv == 0 && kiln_id_cmp(&got, id) != 0)
		rv = KILN_ECORRUPT;
	return rv;
}

static int
check_blob(const struct blob_entry *e, void *arg)
{
	struct fsck *f = arg;
	uint8_t sha[KILN_SHA256_LEN];
	int rv = verify_both(f->s, &e->id, sha);

	f->st->blobs++;
	f->st->bytes += e->size;
	if (rv == 0) {
		if (store_grow(&f->shas, &f->capshas, f->nshas, sizeof *f->shas) != 0)
			return KILN_ENOMEM;
		f->shas[f->nshas].id = e->id;
		memcpy(f->shas[f->nshas++].sha, sha, sizeof sha);
		return idset_add(&f->sound, &e->id);
	}
	if (rv == KILN_ENOTFOUND)
		return 0; /* removed while we walked (gc) */
	if (rv != KILN_ECORRUPT)
		return rv;
	f->st->corrupt++;
	return idset_add(&f->corrupt, &e->id);
}

static int
check_stray(const char *rel, void *arg)
{
	struct fsck *f = arg;
	struct problem *p = problem_add(f, KILN_FSCK_STRAY, NULL);
	char name[PATH_MAX];

	if (p == NULL)
		return KILN_ENOMEM;
	f->st->stray++;
	snprintf(p->where, sizeof p->where, "%s", rel);
	if (f->repair) {
		snprintf(name, sizeof name, "stray-%s", strrchr(rel, '/') + 1);
		p->p.repaired = quarantine(f, rel, name) == 0;
	}
	return 0;
}

/* ---- SHA-256s ---- */

static int
sha_order(const void *a, const void *b)
{
	return kiln_id_cmp(&((const struct blob_sha *)a)->id,
	                   &((const struct blob_sha *)b)->id);
}

static int
sha_order_sha(const void *a, const void *b)
{
	return memcmp(((const struct blob_sha *)a)->sha, ((const struct blob_sha *)b)->sha,
	              KILN_SHA256_LEN);
}

/* Whether sha is the content of a sound blob. */
static int
sound_has_sha(const struct fsck *f, const uint8_t sha[KILN_SHA256_LEN])
{
	struct blob_sha key;

	memcpy(key.sha, sha, sizeof key.sha);
	return f->nshas > 0 &&
	       bsearch(&key, f->by_sha, f->nshas, sizeof *f->by_sha, sha_order_sha) != NULL;
}

/* The content's SHA-256 of sound blob id; NULL when id is not one. */
static const uint8_t *
sound_sha(const struct fsck *f, const kiln_id *id)
{
	struct blob_sha key = {.id = *id};
	const struct blob_sha *b = f->nshas == 0 ? NULL
	        : bsearch(&key, f->shas, f->nshas, sizeof *f->shas, sha_order);

	return b != NULL ? b->sha : NULL;
}

static int
fix_add(struct fsck *f, enum sha_fix_kind kind, const kiln_id *id,
        const uint8_t sha[KILN_SHA256_LEN])
{
	if (store_grow(&f->fixes, &f->capfixes, f->nfixes, sizeof *f->fixes) != 0)
		return KILN_ENOMEM;
	f->fixes[f->nfixes].kind = kind;
	f->fixes[f->nfixes].id = *id;
	memcpy(f->fixes[f->nfixes++].sha, sha, KILN_SHA256_LEN);
	return 0;
}

/* A KILN_FSCK_SHA256 finding (report and repair); what is printf-like. */
static int
sha_problem(struct fsck *f, enum sha_fix_kind kind, const kiln_id *id,
            const uint8_t sha[KILN_SHA256_LEN], const char *what,
            const uint8_t *shown)
{
	struct problem *p = problem_add(f, KILN_FSCK_SHA256, id);
	char hex[KILN_SHA256_HEX_LEN + 1];

	if (p == NULL)
		return KILN_ENOMEM;
	f->st->sha256++;
	kiln_sha256_to_hex(shown, hex);
	snprintf(p->where, sizeof p->where, "sha256 %s: %s", hex, what);
	return fix_add(f, kind, id, sha);
}

/* Each sound blob's record and entry against its content. */
static int
sha_check_blobs(db_txn *t, struct fsck *f)
{
	for (size_t i = 0; i < f->nshas; i++) {
		const struct blob_sha *b = &f->shas[i];
		struct rec_blob r;
		const void *v;
		size_t vlen;
		kiln_id named;
		int rv;
		if (db_get(t, DB_BLOBS, b->id.b, 16, &v, &vlen) != 0 ||
		    rec_blob_decode(v, vlen, &r) != 0)
			continue;   /* no record (an orphan), or not ours to read */
		if (!r.has_sha) {   /* made before SHA-256s: no damage */
			if ((rv = fix_add(f, FIX_RECORD, &b->id, b->sha)) != 0)
				return rv;
			continue;
		}
		if (memcmp(r.sha, b->sha, sizeof r.sha) != 0) {
			rv = sha_problem(f, FIX_RECORD, &b->id, b->sha,
			                 "recorded for this blob, not its content's", r.sha);
		} else if (db_get(t, DB_SHA256, b->sha, KILN_SHA256_LEN, &v, &vlen) != 0) {
			rv = sha_problem(f, FIX_ENTRY_SET, &b->id, b->sha,
			                 "no sha256 entry for this blob", b->sha);
		} else if (rec_sha_decode(v, vlen, &named) != 0 ||
		           kiln_id_cmp(&named, &b->id) != 0) {
			rv = sha_problem(f, FIX_ENTRY_SET, &b->id, b->sha,
			                 "sha256 entry names another blob", b->sha);
		} else {
			rv = 0;
		}
		if (rv != 0)
			return rv;
	}
	return 0;
}

/* Whether blob id's record holds sha: then its entry is the record's
 * pair, which gc drops with it once the blob is gone (a blob removed by
 * hand: like its use record, not fsck's to report). */
static int
record_holds(db_txn *t, const kiln_id *id, const uint8_t sha[KILN_SHA256_LEN])
{
	struct rec_blob r;
	const void *v;
	size_t vlen;

	return db_get(t, DB_BLOBS, id->b, 16, &v, &vlen) == 0 &&
	       rec_blob_decode(v, vlen, &r) == 0 && r.has_sha &&
	       memcmp(r.sha, sha, KILN_SHA256_LEN) == 0;
}

/* An entry is wrong when it does not decode, names a sound blob of
 * another content, or names a blob that is not there and whose record
 * does not hold it (a corrupt one goes with its record, unreported: the
 * blob's report says it). */
static int
sha_check_entry(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
                void *arg)
{
	struct fsck *f = arg;
	uint8_t key[KILN_SHA256_LEN] = {0};
	const uint8_t *have;
	kiln_id id = {{0}};

	memcpy(key, k, klen < sizeof key ? klen : sizeof key);
	if (klen != KILN_SHA256_LEN || rec_sha_decode(v, vlen, &id) != 0)
		return sha_problem(f, FIX_ENTRY_DEL, &id, key,
		                   "undecodable sha256 entry", key);
	if ((have = sound_sha(f, &id)) != NULL) {
		if (memcmp(have, key, sizeof key) == 0)
			return 0;
		/* the SHA-256 of another sound blob: reported, and pointed
		 * back at it, by that blob's check */
		if (sound_has_sha(f, key))
			return 0;
		return sha_problem(f, FIX_ENTRY_DEL, &id, key,
		                   "sha256 entry names a blob of other content", key);
	}
	if (idset_has(&f->corrupt, &id))
		return fix_add(f, FIX_ENTRY_DEL, &id, key);
	if (kiln_store_has(f->s, &id, NULL) == 0 || record_holds(t, &id, key))
		return 0;   /* put since the scan; or the record's pair */
	return sha_problem(f, FIX_ENTRY_DEL, &id, key,
	                   "sha256 entry names a blob not in the store", key);
}

static int
sha_check_txn(db_txn *t, void *arg)
{
	struct fsck *f = arg;
	int rv;

	free(f->by_sha);
	if (f->nshas > 0 && (f->by_sha = malloc(f->nshas * sizeof *f->by_sha)) == NULL)
		return KILN_ENOMEM;
	if (f->nshas > 0) {
		memcpy(f->by_sha, f->shas, f->nshas * sizeof *f->by_sha);
		qsort(f->by_sha, f->nshas, sizeof *f->by_sha, sha_order_sha);
	}
	if ((rv = sha_check_blobs(t, f)) != 0)
		return rv;
	/* a key over 32 bytes is cut here and cannot be deleted by it: the
	 * repair would only report it again; LMDB's key order is all that
	 * such a key could disturb */
	return db_each(t, DB_SHA256, NULL, 0, sha_check_entry, f);
}

/* One SHA-256 repair, re-checked inside the repair transaction. */
static int
sha_fix_apply(db_txn *t, struct fsck *f, const struct sha_fix *x)
{
	struct rec_blob r;
	const void *v;
	size_t vlen;
	kiln_id named;
	uint8_t buf[REC_BLOB_LEN];
	const uint8_t *have;
	int rv;

	if (x->kind == FIX_ENTRY_DEL) {
		if (db_get(t, DB_SHA256, x->sha, KILN_SHA256_LEN, &v, &vlen) != 0 ||
		    (rec_sha_decode(v, vlen, &named) == 0 && kiln_id_cmp(&named, &x->id) != 0))
			return 0;   /* rewritten meanwhile */
		have = sound_sha(f, &x->id);
		if ((have != NULL && memcmp(have, x->sha, KILN_SHA256_LEN) == 0) ||
		    (have == NULL && !idset_has(&f->corrupt, &x->id) &&
		     (kiln_store_has(f->s, &x->id, NULL) == 0 ||
		      record_holds(t, &x->id, x->sha))))
			return 0;
		rv = db_del(t, DB_SHA256, x->sha, KILN_SHA256_LEN);
		return rv == KILN_ENOTFOUND ? 0 : rv;
	}
	if (db_get(t, DB_BLOBS, x->id.b, 16, &v, &vlen) != 0 ||
	    rec_blob_decode(v, vlen, &r) != 0)
		return 0;   /* dropped meanwhile (gc) */
	if (x->kind == FIX_ENTRY_SET)
		return r.has_sha && memcmp(r.sha, x->sha, sizeof r.sha) == 0
		       ? shamap_set(t, x->sha, &x->id) : 0;
	if (r.has_sha && memcmp(r.sha, x->sha, sizeof r.sha) == 0)
		return 0;
	if (r.has_sha && (rv = shamap_del(t, r.sha, &x->id)) != 0)
		return rv;
	r.has_sha = 1;
	memcpy(r.sha, x->sha, sizeof r.sha);
	vlen = rec_blob_encode(&r, buf);
	if ((rv = shamap_set(t, x->sha, &x->id)) != 0)
		return rv;
	return db_put(t, DB_BLOBS, x->id.b, 16, buf, vlen);
}

/* Does the record still (inside the repair txn) name a bad/missing blob? */
static int
names_bad(const kiln_id *id, void *arg)
{
	struct fsck *f = arg;

	return idset_has(&f->corrupt, id) || idset_has(&f->missing, id);
}

static int
repair_txn(db_txn *t, void *arg)
{
	struct fsck *f = arg;

	for (size_t i = 0; i < f->nrefs; i++) {
		struct ref *r = &f->refs[i];
		const void *v;
		size_t vlen;
		int drop, rv;
		if (db_get(t, r->db, r->key, r->klen, &v, &vlen) != 0)
			continue;
		if (r->bad) {
			drop = 1;
		} else if (r->db == DB_INDEX) {
			struct rec_index ri;
			drop = rec_index_decode(v, vlen, &ri) == 0 && names_bad(&ri.id, f);
		} else {
			drop = rec_action_outputs(v, vlen, NULL, names_bad, f) == 1;
		}
		if (drop && (rv = db_del(t, r->db, r->key, r->klen)) != 0)
			return rv;
	}
	for (size_t i = 0; i < f->corrupt.n; i++) {
		int rv = blobrec_del(t, &f->corrupt.ids[i]);
		if (rv != 0 && rv != KILN_ENOTFOUND)
			return rv;
	}
	for (size_t i = 0; i < f->nfixes; i++) {
		int rv = sha_fix_apply(t, f, &f->fixes[i]);
		if (rv != 0)
			return rv;
	}
	return 0;
}

/* Turn the findings into problem reports (and repairs). */
static int
fsck_findings(struct fsck *f)
{
	int rv = 0;

	for (size_t i = 0; i < f->nrefs; i++) {
		struct ref *r = &f->refs[i];
		if (r->bad) {
			struct problem *p = problem_add(f, KILN_FSCK_BAD_RECORD, NULL);
			if (p == NULL)
				return KILN_ENOMEM;
			f->st->bad_records++;
			ref_where(r, p->where, sizeof p->where);
		} else if (!idset_has(&f->sound, &r->id) && !idset_has(&f->corrupt, &r->id)) {
			if ((rv = idset_add(&f->missing, &r->id)) != 0)
				return rv;
		}
	}
	idset_sort(&f->missing); /* also removes duplicates */
	for (size_t i = 0; i < f->missing.n; i++) {
		struct problem *p = problem_add(f, KILN_FSCK_MISSING, &f->missing.ids[i]);
		if (p == NULL)
			return KILN_ENOMEM;
		f->st->missing++;
		blob_where(f, &f->missing.ids[i], p->where, sizeof p->where);
	}
	for (size_t i = 0; i < f->corrupt.n; i++) {
		struct problem *p = problem_add(f, KILN_FSCK_CORRUPT, &f->corrupt.ids[i]);
		if (p == NULL)
			return KILN_ENOMEM;
		blob_where(f, &f->corrupt.ids[i], p->where, sizeof p->where);
	}
	return 0;
}

static int
fsck_repair(struct fsck *f)
{
	int rv = db_write(f->s->db, repair_txn, f);

	if (rv != 0)
		return rv;
	for (size_t i = 0; i < f->nprobs; i++) {
		struct problem *p = &f->probs[i];
		char hex[KILN_ID_HEX_LEN + 1], rel[64];
		if (p->p.kind == KILN_FSCK_STRAY)
			continue;
		if (p->p.kind == KILN_FSCK_CORRUPT) {
			kiln_id_to_hex(&p->p.id, hex);
			snprintf(rel, sizeof rel, "objects/%.2s/%s", hex, hex + 2);
			p->p.repaired = quarantine(f, rel, hex) == 0;
		} else {
			p->p.repaired = 1; /* records dropped above */
		}
	}
	return 0;
}

static void
fsck_free(struct fsck *f)
{
	for (size_t i = 0; i < f->nrefs; i++)
		free(f->refs[i].key);
	free(f->refs);
	free(f->probs);
	free(f->shas);
	free(f->by_sha);
	free(f->fixes);
	idset_free(&f->sound);
	idset_free(&f->corrupt);
	idset_free(&f->missing);
}

int
kiln_store_fsck(kiln_store *s, int repair, kiln_fsck_fn fn, void *arg,
                kiln_fsck_stats *st)
{
	kiln_fsck_stats local;
	struct fsck f = {0};
	int rv;

	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof *st);
	if (repair && (rv = store_writable(s)) != 0)
		return rv;
	f.s = s;
	f.repair = repair;
	f.st = st;
	if ((rv = db_read(s->db, collect_txn, &f)) != 0 ||
	    (rv = objects_scan(s, check_blob, check_stray, &f)) != 0)
		goto fail;
	if (f.nrefs > 1)
		qsort(f.refs, f.nrefs, sizeof *f.refs, ref_order);
	idset_sort(&f.sound);
	idset_sort(&f.corrupt);
	if (f.nshas > 1)
		qsort(f.shas, f.nshas, sizeof *f.shas, sha_order);
	if ((rv = fsck_findings(&f)) != 0 ||
	    (rv = db_read(s->db, sha_check_txn, &f)) != 0)
		goto fail;
	if (repair && (f.nprobs > 0 || f.nfixes > 0) && (rv = fsck_repair(&f)) != 0)
		goto fail;
	for (size_t i = 0; i < f.nprobs; i++) {
		f.probs[i].p.where = f.probs[i].where;
		st->repaired += (uint64_t)f.probs[i].p.repaired;
		if (fn != NULL)
			fn(&f.probs[i].p, arg);
	}
fail:
	fsck_free(&f);
	return rv;
}
