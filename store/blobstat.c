/* blobstat.c — the store's running figures: how many blobs and bytes its
 * blobs database records, and the state of gc, kept so that a status
 * request reads them in one lookup instead of a scan of a million records.
 *
 * Two records in the meta database, each starting with a version byte
 * (integers little-endian):
 *
 *   "blobs"  ver u8 = 1 | records u64 | bytes u64                (17 bytes)
 *            The number of records in the blobs database and the sum of
 *            their sizes. Changed in the same write transaction as every
 *            record it sums (blobrec_write, blobrec_del: every write of
 *            the blobs database goes through them), so it is exact in
 *            every snapshot, whichever process writes. A record this kiln
 *            cannot decode counts as 0 bytes, at the scan and at every
 *            change alike. A kiln from before these figures writes blobs
 *            records without them: records then differs from the
 *            database's entry count (mdb_stat), and the next writable open
 *            sums the records again (one scan), as it does when the
 *            figures are missing.
 *   "gc"     ver u8 = 1 | running_since i64 | last_start i64 |
 *            last_end i64 | removed_blobs u64 | removed_bytes u64 |
 *            removed_actions u64 | max_size u64                  (57 bytes)
 *            running_since: the start (T0) of the last gc to begin, 0
 *            when it ended; the last_* fields are the last gc that
 *            finished (0: none yet). Whether a gc really runs is told by
 *            <store>/gc.lock (a gc holds a shared flock on it; a crashed
 *            one holds nothing), not by running_since.
 *
 * Changing a layout: bump its version byte; a reader meeting a newer one
 * ignores the record (the blobs figures are then summed again at the next
 * writable open of a kiln that knows it). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "store_int.h"

#define STAT_KEY "blobs"
#define GC_KEY "gc"
#define STAT_LEN 17
#define GC_LEN 57
#define META_VERSION 1

struct blobstat {
	uint64_t records, bytes;
};

static void
le64_put(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
le64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* KILN_ENOTFOUND when absent or of another version. */
static int
stat_get(db_txn *t, struct blobstat *bs)
{
	const uint8_t *p;
	const void *v;
	size_t vlen;
	int rv;

	if ((rv = db_get(t, DB_META, STAT_KEY, strlen(STAT_KEY), &v, &vlen)) != 0)
		return rv;
	p = v;
	if (vlen != STAT_LEN || p[0] != META_VERSION)
		return KILN_ENOTFOUND;
	bs->records = le64_get(p + 1);
	bs->bytes = le64_get(p + 9);
	return 0;
}

static int
stat_put(db_txn *t, const struct blobstat *bs)
{
	uint8_t v[STAT_LEN];

	v[0] = META_VERSION;
	le64_put(v + 1, bs->records);
	le64_put(v + 9, bs->bytes);
	return db_put(t, DB_META, STAT_KEY, strlen(STAT_KEY), v, sizeof v);
}

/* The size a record adds to the figures: 0 when it cannot be decoded. */
static uint64_t
rec_size(const void *v, size_t vlen)
{
	struct rec_blob r;

	return rec_blob_decode(v, vlen, &r) == 0 ? r.size : 0;
}

/* Apply a change of records and bytes. Figures missing (a store this
 * open has not summed: a read-only handle never writes) stay missing. */
static int
stat_add(db_txn *t, int64_t drecords, uint64_t add, uint64_t sub)
{
	struct blobstat bs;
	int rv;

	if (drecords == 0 && add == sub)
		return 0;
	if ((rv = stat_get(t, &bs)) != 0)
		return rv == KILN_ENOTFOUND ? 0 : rv;
	bs.records += (uint64_t)drecords;
	bs.bytes = bs.bytes + add - sub;
	return stat_put(t, &bs);
}

int
blobrec_write(db_txn *t, const kiln_id *id, const void *v, size_t vlen)
{
	const void *ov;
	size_t ovlen;
	uint64_t old = 0;
	int had, rv;

	rv = db_get(t, DB_BLOBS, id->b, sizeof id->b, &ov, &ovlen);
	if (rv != 0 && rv != KILN_ENOTFOUND)
		return rv;
	had = rv == 0;
	if (had)
		old = rec_size(ov, ovlen);
	return blobrec_replace(t, id, v, vlen, had, old);
}

int
blobrec_replace(db_txn *t, const kiln_id *id, const void *v, size_t vlen, int had,
                uint64_t old_size)
{
	int rv;

	if ((rv = stat_add(t, had ? 0 : 1, rec_size(v, vlen), old_size)) != 0)
		return rv;
	return db_put(t, DB_BLOBS, id->b, sizeof id->b, v, vlen);
}

int
blobrec_del_sized(db_txn *t, const kiln_id *id, uint64_t size)
{
	int rv;

	if ((rv = stat_add(t, -1, 0, size)) != 0)
		return rv;
	return db_del(t, DB_BLOBS, id->b, sizeof id->b);
}

static int
sum_rec(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
        void *arg)
{
	struct blobstat *bs = arg;

	(void)t;
	(void)k;
	(void)klen;
	bs->records++;
	bs->bytes += rec_size(v, vlen);
	return 0;
}

/* Are the figures there and summing as many records as the database has? */
static int
stat_current(db_txn *t, struct blobstat *bs, int *ok)
{
	uint64_t n;
	int rv;

	*ok = 0;
	if ((rv = db_entries(t, DB_BLOBS, &n)) != 0)
		return rv;
	if ((rv = stat_get(t, bs)) == KILN_ENOTFOUND)
		return 0;
	*ok = rv == 0 && bs->records == n;
	return rv;
}

static int
check_txn(db_txn *t, void *arg)
{
	struct blobstat bs;

	return stat_current(t, &bs, arg);
}

static int
sum_txn(db_txn *t, void *arg)
{
	struct blobstat bs = {0, 0};
	int ok, rv;

	(void)arg;
	if ((rv = stat_current(t, &bs, &ok)) != 0 || ok)
		return rv;   /* another process summed them meanwhile */
	bs = (struct blobstat){0, 0};
	if ((rv = db_each(t, DB_BLOBS, NULL, 0, sum_rec, &bs)) != 0)
		return rv;
	return stat_put(t, &bs);
}

int
blobstat_init(kiln_store *s)
{
	int ok = 0, rv;

	if (s->flags & KILN_STORE_RDONLY)
		return 0;
	if ((rv = db_read(s->db, check_txn, &ok)) != 0 || ok)
		return rv;
	return db_write(s->db, sum_txn, NULL);
}

/* ---- gc's state ---- */

struct gcrec {
	int64_t running_since, last_start, last_end;
	uint64_t removed_blobs, removed_bytes, removed_actions, max_size;
};

static void
gc_get(db_txn *t, struct gcrec *g)
{
	const uint8_t *p;
	const void *v;
	size_t vlen;

	memset(g, 0, sizeof *g);
	if (db_get(t, DB_META, GC_KEY, strlen(GC_KEY), &v, &vlen) != 0)
		return;
	p = v;
	if (vlen != GC_LEN || p[0] != META_VERSION)
		return;
	g->running_since = (int64_t)le64_get(p + 1);
	g->last_start = (int64_t)le64_get(p + 9);
	g->last_end = (int64_t)le64_get(p + 17);
	g->removed_blobs = le64_get(p + 25);
	g->removed_bytes = le64_get(p + 33);
	g->removed_actions = le64_get(p + 41);
	g->max_size = le64_get(p + 49);
}

static int
gc_put(db_txn *t, const struct gcrec *g)
{
	uint8_t v[GC_LEN];

	v[0] = META_VERSION;
	le64_put(v + 1, (uint64_t)g->running_since);
	le64_put(v + 9, (uint64_t)g->last_start);
	le64_put(v + 17, (uint64_t)g->last_end);
	le64_put(v + 25, g->removed_blobs);
	le64_put(v + 33, g->removed_bytes);
	le64_put(v + 41, g->removed_actions);
	le64_put(v + 49, g->max_size);
	return db_put(t, DB_META, GC_KEY, strlen(GC_KEY), v, sizeof v);
}

int
gcstate_begin(db_txn *t, int64_t t0)
{
	struct gcrec g;

	gc_get(t, &g);
	g.running_since = t0;
	return gc_put(t, &g);
}

struct gc_end {
	kiln_store *s;
	int64_t t0;
	uint64_t max_size;
	const kiln_gc_stats *st;
};

static int
gc_end_txn(db_txn *t, void *arg)
{
	struct gc_end *e = arg;
	struct gcrec g;

	gc_get(t, &g);
	if (g.running_since == e->t0)
		g.running_since = 0;   /* else a later gc started meanwhile */
	g.last_start = e->t0;
	g.last_end = store_now(e->s);
	g.removed_blobs = e->st->removed_blobs;
	g.removed_bytes = e->st->removed_bytes;
	g.removed_actions = e->st->removed_actions;
	g.max_size = e->max_size;
	return gc_put(t, &g);
}

int
gcstate_end(kiln_store *s, int64_t t0, uint64_t max_size,
            const kiln_gc_stats *st)
{
	struct gc_end e = {s, t0, max_size, st};

	return db_write(s->db, gc_end_txn, &e);
}

int
gclock_open(kiln_store *s, int *fd)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof path, "%s/gc.lock", s->dir) >= (int)sizeof path)
		return KILN_ERANGE;
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return kiln_err_from_errno(errno);
	if (flock(*fd, LOCK_SH) != 0) {
		int rv = kiln_err_from_errno(errno);
		close(*fd);
		*fd = -1;
		return rv;
	}
	return 0;
}

/* Is a gc holding gc.lock now? A probe for an exclusive lock fails only
 * while one does (a gc starting meanwhile waits for the probe's release). */
static int
gc_running(const kiln_store *s)
{
	char path[PATH_MAX];
	int fd, busy;

	if (snprintf(path, sizeof path, "%s/gc.lock", s->dir) >= (int)sizeof path)
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

/* A stats read: the figures, and this handle's puts whose use records
 * wait for the next commit (KILN_DURABLE_BATCH), copied before the read
 * transaction begins: one committed meanwhile is then either in its
 * snapshot (found there, not counted twice) or not yet (counted here). */
struct stats_read {
	kiln_store *s;
	kiln_store_stats *st;
	struct pending_use *uses;
	size_t nuses;
};

static int
by_id(const void *a, const void *b)
{
	return kiln_id_cmp(&((const struct pending_use *)a)->id,
	                   &((const struct pending_use *)b)->id);
}

static int
pending_copy(struct stats_read *r)
{
	kiln_store *s = r->s;
	int rv = 0;

	pthread_mutex_lock(&s->uses_mu);
	if (s->nuses > 0) {
		r->uses = malloc(s->nuses * sizeof *r->uses);
		if (r->uses == NULL) {
			rv = KILN_ENOMEM;
		} else {
			memcpy(r->uses, s->uses, s->nuses * sizeof *r->uses);
			r->nuses = s->nuses;
		}
	}
	pthread_mutex_unlock(&s->uses_mu);
	if (r->nuses > 1)
		qsort(r->uses, r->nuses, sizeof *r->uses, by_id);
	return rv;
}

/* Count each pending put once, unless its record is in the snapshot or
 * its file is gone (gc judged it by its mtime). */
static int
pending_count(db_txn *t, struct stats_read *r)
{
	for (size_t i = 0; i < r->nuses; i++) {
		const struct pending_use *u = &r->uses[i];
		const void *v;
		size_t vlen;
		int rv;
		if (i > 0 && kiln_id_cmp(&u->id, &r->uses[i - 1].id) == 0)
			continue;
		rv = db_get(t, DB_BLOBS, u->id.b, sizeof u->id.b, &v, &vlen);
		if (rv == 0)
			continue;
		if (rv != KILN_ENOTFOUND)
			return rv;
		if (kiln_store_has(r->s, &u->id, NULL) != 0)
			continue;
		r->st->blobs++;
		r->st->bytes += u->size;
	}
	return 0;
}

static int
stats_txn(db_txn *t, void *arg)
{
	struct stats_read *r = arg;
	kiln_store_stats *st = r->st;
	struct blobstat bs;
	struct gcrec g;
	uint64_t n;
	int rv;

	if ((rv = db_entries(t, DB_BLOBS, &n)) != 0)
		return rv;
	st->blobs = n;
	if ((rv = stat_get(t, &bs)) == 0) {
		st->bytes = bs.bytes;
		st->exact = bs.records == n;
	} else if (rv == KILN_ENOTFOUND) {
		/* a store no writable open of this kiln summed yet (only a
		 * read-only handle gets here): sum it now */
		bs = (struct blobstat){0, 0};
		if ((rv = db_each(t, DB_BLOBS, NULL, 0, sum_rec, &bs)) != 0)
			return rv;
		st->bytes = bs.bytes;
		st->exact = 1;
	} else {
		return rv;
	}
	if ((rv = pending_count(t, r)) != 0)
		return rv;
	gc_get(t, &g);
	st->gc_started_ns = g.running_since;
	st->last_gc_start_ns = g.last_start;
	st->last_gc_end_ns = g.last_end;
	st->last_gc_removed_blobs = g.removed_blobs;
	st->last_gc_removed_bytes = g.removed_bytes;
	st->last_gc_removed_actions = g.removed_actions;
	st->last_gc_max_size = g.max_size;
	return 0;
}

int
kiln_store_stats_get(kiln_store *s, kiln_store_stats *st)
{
	struct stats_read r = {s, st, NULL, 0};
	int rv;

	if (s == NULL || st == NULL)
		return KILN_EINVAL;
	memset(st, 0, sizeof *st);
	if ((rv = pending_copy(&r)) == 0)
		rv = db_read(s->db, stats_txn, &r);
	free(r.uses);
	if (rv != 0)
		return rv;
	st->gc_running = gc_running(s);
	if (!st->gc_running)
		st->gc_started_ns = 0;
	return 0;
}
