/* gc.c — removing blobs nothing needs, least recently used first.
 *
 * At start, T0 = now. Phase 1 deletes action results last used before
 * T0 - max_age (so a kept result never names a blob removed below). Phase 2
 * takes one snapshot of the roots (every index entry, every remaining
 * action's outputs, and the files listed by the tree records among them:
 * a folder output keeps its files) and lists objects/. Unrooted blobs last used before
 * T0 - grace are candidates, oldest first, taken until the store fits the
 * budget. Phase 3 removes them in short write transactions; inside each,
 * a candidate whose use time moved past T0 - grace is skipped: every
 * put, touch and record naming a blob refreshes that time in a write
 * transaction, so whatever started using a blob after the snapshot keeps
 * it. Writers wait for one batch at most; readers never wait.
 *
 * Why T0 is read inside a write transaction (issue 21). A record naming a
 * blob is committed in a write transaction that checks the blob exists and
 * stamps its use time with that transaction's clock; gc's unlinks happen
 * in its own write transactions, which LMDB's writer lock (one per store,
 * across processes) serializes with every commit. So a commit either runs
 * before gc's unlink (it saw the blob, and stamped it) or after (it sees
 * the blob gone and skips the record: kiln_store_commit counts it, and
 * the caller must redo that step). The stamp keeps the blob only if gc's
 * re-check compares it with a T0 that every commit missing from the
 * roots snapshot stamps at or after. With T0 read anywhere, a commit could
 * take its clock before T0, be still running when the roots' read
 * snapshot begins (so its record is not a root) and end before gc's
 * removal: its stamp < T0 - grace, and with grace 0 gc removed the blob
 * its new record names. Reading T0 while holding the writer lock closes
 * that: a commit that ended before is in the snapshot taken after, and
 * one that began after takes its clock at or past T0. The same holds for
 * action results (a touch stamps the result and its outputs) against
 * action_cut. It relies on the store's clock (CLOCK_REALTIME unless
 * kiln_store_opts.now_ns) not stepping back across the few milliseconds
 * between; a clock stepped back by more than the grace period can still
 * let a blob go. Nothing here depends on the grace
 * period for correctness: grace only spares blobs put but not named yet
 * from the work (and the redo) of a skipped record. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln_tree.h"
#include "store_int.h"

#define GC_BATCH 256
#define NS 1000000000LL

struct candidate {
	kiln_id id;
	uint64_t size;
	int64_t used_ns;
	int removed; /* by the last attempt of its batch's transaction */
};

struct gc {
	kiln_store *s;
	const kiln_gc_opts *o;
	kiln_gc_stats *st;
	int64_t now; /* T0, by the store's clock */
	/* The store's clock minus CLOCK_REALTIME at T0 (0 unless a clock is
	 * injected): added to file mtimes, which the kernel stamps. */
	int64_t file_skew;
	int64_t action_cut, grace_cut;
	struct idset roots;
	struct idset old_actions; /* action keys to delete */
	struct idset present;     /* every blob file found in objects/ */
	struct idset stale;       /* use records whose blob file is gone */
	struct candidate *c;
	size_t nc, capc;
	/* the batch being removed, and what it achieved */
	size_t from, to;
	uint64_t batch_blobs, batch_bytes;
};

static int
root_output(const kiln_id *id, void *arg)
{
	return idset_add(arg, id);
}

static int
scan_action(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
            void *arg)
{
	struct gc *g = arg;
	int64_t used;
	kiln_id key;
	int rv;

	(void)t;
	if (klen != 16)
		return 0;
	if ((rv = rec_action_outputs(v, vlen, &used, NULL, NULL)) != 0)
		return 0; /* undecodable: fsck's business, not a root */
	if (used < g->action_cut) {
		memcpy(key.b, k, 16);
		return idset_add(&g->old_actions, &key);
	}
	return rec_action_outputs(v, vlen, NULL, root_output, &g->roots);
}

static int
scan_index(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
           void *arg)
{
	struct gc *g = arg;
	struct rec_index r;

	(void)t;
	(void)k;
	(void)klen;
	if (rec_index_decode(v, vlen, &r) != 0)
		return 0;
	return idset_add(&g->roots, &r.id);
}

/* A rooted tree record (a folder output, kiln_tree.h) keeps the blobs it
 * lists: each root that reads as one adds its files to the roots. Only
 * the first bytes of other blobs are read. A tree that cannot be read is
 * fsck's business; its files then go like any unrooted blob. */
static int
roots_add_trees(struct gc *g)
{
	size_t n0 = g->roots.n;
	char head[16];

	for (size_t i = 0; i < n0; i++) {
		kiln_tree *t;
		ssize_t got;
		int fd, rv;
		if (kiln_store_open_blob(g->s, &g->roots.ids[i], &fd) != 0)
			continue;
		got = read(fd, head, sizeof head);
		close(fd);
		if (got <= 0 || !kiln_tree_looks(head, (size_t)got))
			continue;
		if ((rv = kiln_tree_load(g->s, &g->roots.ids[i], &t)) == KILN_ENOMEM)
			return rv;
		for (size_t k = 0; rv == 0 && k < t->n; k++)
			if (!t->e[k].dir && (rv = idset_add(&g->roots, &t->e[k].id)) != 0) {
				kiln_tree_free(t);
				return rv;
			}
		kiln_tree_free(t);
	}
	idset_sort(&g->roots);
	return 0;
}

static int
roots_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;
	int rv;

	idset_free(&g->roots);
	idset_free(&g->old_actions);
	if ((rv = db_each(t, DB_INDEX, NULL, 0, scan_index, g)) != 0)
		return rv;
	return db_each(t, DB_ACTIONS, NULL, 0, scan_action, g);
}

static int
drop_actions_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;

	for (size_t i = 0; i < g->old_actions.n; i++) {
		const void *v;
		size_t vlen;
		int64_t used;
		int rv;
		/* Skip a result that was put again or touched since the scan. */
		if (db_get(t, DB_ACTIONS, g->old_actions.ids[i].b, 16, &v, &vlen) != 0 ||
		    rec_action_outputs(v, vlen, &used, NULL, NULL) != 0 ||
		    used >= g->action_cut)
			continue;
		if ((rv = db_del(t, DB_ACTIONS, g->old_actions.ids[i].b, 16)) != 0)
			return rv;
	}
	return 0;
}

static int
list_blob(const struct blob_entry *e, void *arg)
{
	struct gc *g = arg;
	int rv;

	if ((rv = idset_add(&g->present, &e->id)) != 0)
		return rv;
	g->st->blobs++;
	g->st->bytes += e->size;
	if (idset_has(&g->roots, &e->id)) {
		g->st->rooted_blobs++;
		g->st->rooted_bytes += e->size;
		return 0;
	}
	if (store_grow(&g->c, &g->capc, g->nc, sizeof *g->c) != 0)
		return KILN_ENOMEM;
	g->c[g->nc++] = (struct candidate){e->id, e->size,
	                                   e->mtime_ns + g->file_skew, 0};
	return 0;
}

/* A blob without a use record (an orphan from a crash) counts as used
 * when its file was written. */
static int
use_times_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;

	for (size_t i = 0; i < g->nc; i++) {
		const void *v;
		size_t vlen;
		struct rec_blob r;
		if (db_get(t, DB_BLOBS, g->c[i].id.b, 16, &v, &vlen) == 0 &&
		    rec_blob_decode(v, vlen, &r) == 0)
			g->c[i].used_ns = r.used_ns;
	}
	return 0;
}

/* Use records whose blob is not in objects/ (removed by hand, or by a
 * crash between gc's unlink and its commit) would pile up forever. */
static int
find_stale(db_txn *t, const void *k, size_t klen, const void *v, size_t vlen,
           void *arg)
{
	struct gc *g = arg;
	kiln_id id;

	(void)t;
	(void)v;
	(void)vlen;
	if (klen != sizeof id.b)
		return 0;
	memcpy(id.b, k, sizeof id.b);
	return idset_has(&g->present, &id) ? 0 : idset_add(&g->stale, &id);
}

static int
drop_stale_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;
	int rv;

	idset_free(&g->stale);
	g->st->removed_records = 0;
	if ((rv = db_each(t, DB_BLOBS, NULL, 0, find_stale, g)) != 0)
		return rv;
	for (size_t i = 0; i < g->stale.n; i++) {
		/* re-checked here: a put may have published it since the scan */
		if (kiln_store_has(g->s, &g->stale.ids[i], NULL) == 0)
			continue;
		if ((rv = blobrec_del(t, &g->stale.ids[i])) != 0 &&
		    rv != KILN_ENOTFOUND)
			return rv;
		g->st->removed_records++;
	}
	return 0;
}

static int
by_use(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	if (x->used_ns != y->used_ns)
		return x->used_ns < y->used_ns ? -1 : 1;
	return kiln_id_cmp(&x->id, &y->id);
}

/* Keep, in use order, only the candidates that must go to meet the budget. */
static void
choose_victims(struct gc *g)
{
	uint64_t total = g->st->bytes;
	size_t w = 0;

	if (g->nc > 1)
		qsort(g->c, g->nc, sizeof *g->c, by_use);
	for (size_t r = 0; r < g->nc && total > g->o->max_size; r++) {
		if (g->c[r].used_ns >= g->grace_cut)
			continue;
		total -= g->c[r].size;
		g->c[w++] = g->c[r];
	}
	g->nc = w;
}

static int
remove_batch_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;

	g->batch_blobs = g->batch_bytes = 0;
	for (size_t i = g->from; i < g->to; i++)
		g->c[i].removed = 0;
	for (size_t i = g->from; i < g->to; i++) {
		const void *v;
		size_t vlen;
		struct rec_blob r;
		char path[PATH_MAX];
		int rv;
		if (db_get(t, DB_BLOBS, g->c[i].id.b, 16, &v, &vlen) == 0 &&
		    rec_blob_decode(v, vlen, &r) == 0 && r.used_ns >= g->grace_cut)
			continue; /* used since we looked */
		store_blob_path(g->s, &g->c[i].id, path);
		if (unlink(path) != 0 && errno != ENOENT)
			return kiln_err_from_errno(errno);
		rv = blobrec_del(t, &g->c[i].id);   /* and its sha256 entry */
		if (rv != 0 && rv != KILN_ENOTFOUND)
			return rv;
		g->c[i].removed = 1;
		g->batch_blobs++;
		g->batch_bytes += g->c[i].size;
	}
	return 0;
}

static int
gc_remove(struct gc *g)
{
	for (g->from = 0; g->from < g->nc; g->from = g->to) {
		int rv;
		g->to = g->from + GC_BATCH < g->nc ? g->from + GC_BATCH : g->nc;
		if ((rv = db_write(g->s->db, remove_batch_txn, g)) != 0)
			return rv;
		g->st->removed_blobs += g->batch_blobs;
		g->st->removed_bytes += g->batch_bytes;
		for (size_t i = g->from; g->o->removed != NULL && i < g->to; i++)
			if (g->c[i].removed)
				g->o->removed(&g->c[i].id, g->c[i].size, g->o->arg);
	}
	return 0;
}

/* T0. With an injected clock (kiln_store_opts.now_ns) a file's mtime is
 * moved by that clock's lead over CLOCK_REALTIME, so a blob judged by it
 * is as old as the real clock says: a clock moved on never makes a file
 * just written (a put not yet recorded) look old. */
static void
read_clock(struct gc *g)
{
	g->now = store_now(g->s);
	g->file_skew = g->s->now_ns != NULL ? g->now - kiln_wall_ns() : 0;
}

/* Read the clock while holding the writer lock: see the top of the file. */
static int
now_txn(db_txn *t, void *arg)
{
	struct gc *g = arg;

	read_clock(g);
	return gcstate_begin(t, g->now);
}

/* now - age seconds, saturating: an age beyond the epoch keeps everything. */
static int64_t
cutoff(int64_t now, int64_t age_s)
{
	if (age_s > now / NS)
		return INT64_MIN;
	return now - age_s * NS;
}

int
kiln_store_gc(kiln_store *s, const kiln_gc_opts *o, kiln_gc_stats *st)
{
	kiln_gc_stats local;
	struct gc g = {.s = s, .o = o};
	int lockfd = -1, rv;

	if (o == NULL || o->action_max_age_s < 0 || o->grace_s < 0)
		return KILN_EINVAL;
	if (st == NULL)
		st = &local;
	memset(st, 0, sizeof *st);
	if (!o->dry_run && (rv = store_writable(s)) != 0)
		return rv;
	read_clock(&g);
	if (!o->dry_run && ((rv = gclock_open(s, &lockfd)) != 0 ||
	                    (rv = db_write(s->db, now_txn, &g)) != 0))
		goto fail;
	g.st = st;
	g.action_cut = cutoff(g.now, o->action_max_age_s);
	g.grace_cut = cutoff(g.now, o->grace_s);
	if ((rv = db_read(s->db, roots_txn, &g)) != 0)
		goto fail;
	st->removed_actions = g.old_actions.n;
	if (!o->dry_run && g.old_actions.n > 0 &&
	    (rv = db_write(s->db, drop_actions_txn, &g)) != 0)
		goto fail;
	idset_sort(&g.roots);
	if ((rv = roots_add_trees(&g)) != 0)
		goto fail;
	if ((rv = objects_scan(s, list_blob, NULL, &g)) != 0 ||
	    (rv = db_read(s->db, use_times_txn, &g)) != 0)
		goto fail;
	choose_victims(&g);
	if (o->dry_run) {
		for (size_t i = 0; i < g.nc; i++) {
			st->removed_blobs++;
			st->removed_bytes += g.c[i].size;
			if (o->removed != NULL)
				o->removed(&g.c[i].id, g.c[i].size, o->arg);
		}
	} else {
		idset_sort(&g.present);
		if ((rv = gc_remove(&g)) == 0)
			rv = db_write(s->db, drop_stale_txn, &g);
		if (rv == 0)
			rv = gcstate_end(s, g.now, o->max_size, st);
	}
fail:
	if (lockfd >= 0)
		close(lockfd);
	idset_free(&g.roots);
	idset_free(&g.old_actions);
	idset_free(&g.present);
	idset_free(&g.stale);
	free(g.c);
	return rv;
}
