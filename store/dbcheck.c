/* dbcheck.c — checking LMDB's data file with plain reads, before and
 * without mapping it.
 *
 * LMDB maps data.mdb and follows page numbers and offsets it finds there
 * without bounds checks: a page past the end of a short file is a SIGBUS,
 * a garbage page header sends it anywhere in its 16 GiB map. So before a
 * store trusts the file, this reads it with pread (where a bad number is
 * only a bad number) and answers KILN_ECORRUPT for what LMDB would crash
 * on.
 *
 * The layout relied on is LMDB 0.9's on-disk format for 64-bit builds
 * (liblmdb mdb.c, structs MDB_page, MDB_meta, MDB_db, MDB_node; format
 * version MDB_DATA_VERSION 1; tests/unit/test_db.c checks the meta fields
 * against mdb_env_info and mdb_env_stat). All numbers are host-endian.
 *
 *   page header (16 bytes): u64 pgno @0 (its own page number), u16 flags
 *     @10 (1 branch, 2 leaf, 4 overflow, 8 meta, 0x20 leaf2), then u16
 *     lower @12 and u16 upper @14 (end of the node offset table, start of
 *     the nodes) — or for an overflow page u32 pages @12.
 *   pages 0 and 1 are meta pages; after the header: u32 magic 0xBEEFC0DE
 *     @16, u32 version @20, two MDB_db of 48 bytes @40 (free pages) and
 *     @88 (the main database), u64 last_pg @136 (the last page used),
 *     u64 txnid @144. The free MDB_db's first u32 (@40) is the page size,
 *     its u64 root @80; the main one's root is @128. LMDB uses the meta
 *     with the larger txnid; page 1 starts at the page size.
 *   MDB_db (48 bytes): ... u64 root @40 (all ones: empty tree).
 *   node: u16 lo @0, u16 hi @2, u16 flags @4, u16 ksize @6, key @8, then
 *     data. In a branch node the child page is lo | hi << 16 | flags << 32;
 *     in a leaf node the data size is lo | hi << 16, and the data is an
 *     overflow page number (flag 1, big data) or a named database's MDB_db
 *     (flag 2, in the main database).
 *
 * What is checked: the file holds (last_pg + 1) pages of the meta's page
 * size; every page reachable from the roots (free list, main database,
 * every named database) names itself, has a known kind, sane lower/upper
 * and nodes inside it, children and overflow runs within last_pg, and no
 * page is reached twice. Key and value bytes are not judged here: the
 * record decoders (records.c) refuse what they cannot read. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

#define META_MAGIC 0xBEEFC0DEu
#define META_VERSION 1u
#define PAGE_HDR 16u
#define NODE_HDR 8u
#define DB_REC 48u
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_LEAF2 0x20u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define NO_ROOT UINT64_MAX
#define DEPTH_MAX 64

static uint16_t
get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

static uint32_t
get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

/* Read n bytes at off; a short read is damage (the file is too short). */
static int
read_at(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return kiln_err_from_errno(errno);
		if (r == 0)
			return KILN_ECORRUPT;
		got += (size_t)r;
	}
	return 0;
}

/* Parse one meta page's fields (buf holds at least 152 bytes of it). */
static int
meta_parse(const uint8_t *buf, struct db_meta *m)
{
	m->psize = get32(buf + 40);
	m->free_root = get64(buf + 80);
	m->main_root = get64(buf + 128);
	m->last_pg = get64(buf + 136);
	m->txnid = get64(buf + 144);
	if (get32(buf + 16) != META_MAGIC || get32(buf + 20) != META_VERSION)
		return KILN_ECORRUPT;
	/* LMDB's page sizes are powers of two from 512 to 64 KiB */
	if (m->psize < 512 || m->psize > 65536 || (m->psize & (m->psize - 1)) != 0)
		return KILN_ECORRUPT;
	return m->last_pg < 1 ? KILN_ECORRUPT : 0;
}

int
dbfile_meta(int fd, struct db_meta *m)
{
	uint8_t buf[2][152];
	struct db_meta two[2];
	int rv;

	if ((rv = read_at(fd, buf[0], sizeof buf[0], 0)) != 0 ||
	    (rv = meta_parse(buf[0], &two[0])) != 0)
		return rv;
	if ((rv = read_at(fd, buf[1], sizeof buf[1], two[0].psize)) != 0 ||
	    (rv = meta_parse(buf[1], &two[1])) != 0)
		return rv;
	if (two[1].psize != two[0].psize)
		return KILN_ECORRUPT;
	*m = two[1].txnid > two[0].txnid ? two[1] : two[0];
	/* the older snapshot may still be read by someone: it must fit too */
	if (two[0].last_pg > m->last_pg || two[1].last_pg > m->last_pg)
		m->last_pg = two[0].last_pg > two[1].last_pg ? two[0].last_pg : two[1].last_pg;
	return 0;
}

int
dbfile_check_size(int fd, struct db_meta *m)
{
	struct stat st;
	int rv;

	/* Meta first, size second: LMDB writes a commit's pages before its
	 * meta, so a concurrent writer can only make the file longer than the
	 * meta read says. */
	if ((rv = dbfile_meta(fd, m)) != 0)
		return rv;
	if (fstat(fd, &st) != 0)
		return kiln_err_from_errno(errno);
	if ((m->last_pg + 1) > (uint64_t)st.st_size / m->psize)
		return KILN_ECORRUPT;
	return 0;
}

/* ---- walking the trees ---- */

struct walk {
	int fd;
	const struct db_meta *m;
	uint8_t *seen;   /* one bit per page */
	uint8_t *page;   /* per depth: DEPTH_MAX pages of psize */
};

static int walk_tree(struct walk *w, uint64_t pgno, int depth, int in_main);

/* Mark pgno reached; a page reached twice (a cycle, or two parents) or
 * past last_pg is damage. */
static int
walk_mark(struct walk *w, uint64_t pgno)
{
	if (pgno < 2 || pgno > w->m->last_pg)
		return KILN_ECORRUPT;
	if (w->seen[pgno / 8] & (1u << (pgno % 8)))
		return KILN_ECORRUPT;
	w->seen[pgno / 8] |= (uint8_t)(1u << (pgno % 8));
	return 0;
}

/* An overflow run holding a big value of size bytes. */
static int
walk_overflow(struct walk *w, uint64_t pgno, uint64_t size)
{
	uint8_t hdr[PAGE_HDR];
	uint32_t pages;
	int rv;

	if ((rv = walk_mark(w, pgno)) != 0 ||
	    (rv = read_at(w->fd, hdr, sizeof hdr, pgno * w->m->psize)) != 0)
		return rv;
	pages = get32(hdr + 12);
	if (get64(hdr) != pgno || !(get16(hdr + 10) & P_OVERFLOW) || pages < 1 ||
	    pgno + pages - 1 > w->m->last_pg ||
	    (uint64_t)pages * w->m->psize < size + PAGE_HDR)
		return KILN_ECORRUPT;
	for (uint32_t i = 1; i < pages; i++)
		if ((rv = walk_mark(w, pgno + i)) != 0)
			return rv;
	return 0;
}

/* One node of a leaf page: its data inside the page, or its overflow run
 * or named database sound. */
static int
walk_leaf_node(struct walk *w, const uint8_t *n, size_t room, int depth,
               int in_main)
{
	uint16_t flags = get16(n + 4);
	uint64_t dsize = (uint64_t)get16(n) | (uint64_t)get16(n + 2) << 16;
	size_t ksize = get16(n + 6);

	if (flags & F_BIGDATA) {
		if (NODE_HDR + ksize + 8 > room)
			return KILN_ECORRUPT;
		return walk_overflow(w, get64(n + NODE_HDR + ksize), dsize);
	}
	if (NODE_HDR + ksize + dsize > room)
		return KILN_ECORRUPT;
	if (flags & F_SUBDATA) {
		uint64_t root;
		if (!in_main || dsize != DB_REC)
			return KILN_ECORRUPT; /* kiln opens no DUPSORT databases */
		root = get64(n + NODE_HDR + ksize + 40);
		return root == NO_ROOT ? 0 : walk_tree(w, root, depth + 1, 0);
	}
	return 0;
}

/* The nodes of the page in w->page at depth. */
static int
walk_nodes(struct walk *w, uint8_t *p, int depth, int in_main)
{
	uint16_t flags = get16(p + 10), lower = get16(p + 12), upper = get16(p + 14);
	uint32_t psize = w->m->psize;
	int rv;

	if (lower < PAGE_HDR || lower > upper || upper > psize || (lower & 1))
		return KILN_ECORRUPT;
	if (flags & P_LEAF2)
		return 0; /* fixed-size keys, no nodes (DUPFIXED; kiln has none) */
	for (size_t i = 0; i < (lower - PAGE_HDR) / 2u; i++) {
		uint16_t off = get16(p + PAGE_HDR + 2 * i);
		if (off < upper || (size_t)off + NODE_HDR > psize)
			return KILN_ECORRUPT;
		if (flags & P_BRANCH) {
			const uint8_t *n = p + off;
			uint64_t child = (uint64_t)get16(n) | (uint64_t)get16(n + 2) << 16 |
			                 (uint64_t)get16(n + 4) << 32;
			if ((size_t)off + NODE_HDR + get16(n + 6) > psize)
				return KILN_ECORRUPT;
			rv = walk_tree(w, child, depth + 1, in_main);
		} else {
			rv = walk_leaf_node(w, p + off, psize - off, depth, in_main);
		}
		if (rv != 0)
			return rv;
	}
	return 0;
}

static int
walk_tree(struct walk *w, uint64_t pgno, int depth, int in_main)
{
	uint8_t *p;
	uint16_t kind;
	int rv;

	if (depth >= DEPTH_MAX)
		return KILN_ECORRUPT;
	p = w->page + (size_t)depth * w->m->psize;
	if ((rv = walk_mark(w, pgno)) != 0 ||
	    (rv = read_at(w->fd, p, w->m->psize, pgno * w->m->psize)) != 0)
		return rv;
	kind = get16(p + 10) & (P_BRANCH | P_LEAF | P_OVERFLOW);
	if (get64(p) != pgno || (kind != P_BRANCH && kind != P_LEAF))
		return KILN_ECORRUPT;
	return walk_nodes(w, p, depth, in_main);
}

int
dbfile_walk(int fd, const struct db_meta *m)
{
	struct walk w = {fd, m, NULL, NULL};
	int rv = 0;

	w.seen = calloc(m->last_pg / 8 + 1, 1);
	w.page = malloc((size_t)DEPTH_MAX * m->psize);
	if (w.seen == NULL || w.page == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	if (m->free_root != NO_ROOT)
		rv = walk_tree(&w, m->free_root, 0, 0);
	if (rv == 0 && m->main_root != NO_ROOT)
		rv = walk_tree(&w, m->main_root, 0, 1);
fail:
	free(w.seen);
	free(w.page);
	return rv;
}
