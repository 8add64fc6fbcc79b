/*
 * kpak.h — read a kiln bundle (a "kpak", format version 2) from memory.
 * Header-only: copy it into a game or include it from kiln's install
 * (<kiln/kpak.h>); docs/bundles.md is the reference of the format.
 *
 *   kpak k;
 *   kpak_entry e;
 *   if (kpak_open(&k, file_bytes, file_size) == 0 &&
 *       kpak_find(&k, KPAK_PRELOAD_UI_ATLAS_PNG, &e) == 0) {
 *           ... e.size bytes: kpak_read(&e, dst, e.size) copies them, or
 *           decompresses a zstd entry; e.stored points at them in place
 *           when e.flags is 0 (no copy needed) ...
 *   }
 *
 * Build options (define before including):
 *   KPAK_WITH_ZSTD  decompress zstd entries with libzstd (link -lzstd);
 *                   without it kpak_read returns KPAK_ENOZSTD for them
 *   KPAK_NO_XXHASH  no kpak_id / kpak_verify (no libxxhash needed; the
 *                   generated header has the ids already)
 *
 * The file's bytes are borrowed, never copied: every kpak_entry points
 * into them and is valid as long as they are. Every offset and size is
 * checked against the file before use, so a truncated or damaged file
 * gives an error, never a read outside it. No allocation, no global
 * state; thread-safe for concurrent readers of one kpak.
 *
 * Layout (all integers little-endian, offsets from the file's start):
 *   header  32 bytes: magic "KILNPAK\0", u32 version (2), u32 nentries,
 *           u32 alignment, u32 names_size, u64 file_size
 *   table   56 bytes an entry, sorted by id (strictly ascending):
 *           u32 id, u32 name_offset, u32 name_len, u32 flags,
 *           u64 data_offset, u64 stored_size, u64 size, u8 xxh3_128[16]
 *   names   names_size bytes, each name NUL-terminated
 *   data    each entry's stored bytes at a multiple of alignment
 *
 * Changing the layout means a new KPAK_VERSION, readers refusing the old
 * one, and docs/bundles.md and the writer (daemon/engine/bundle_build.c)
 * changed in the same commit.
 */
#ifndef KILN_KPAK_H
#define KILN_KPAK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef KPAK_NO_XXHASH
#include <xxhash.h>
#endif
#ifdef KPAK_WITH_ZSTD
#include <zstd.h>
#endif

#define KPAK_MAGIC       "KILNPAK"  /* 8 bytes with its NUL */
#define KPAK_VERSION     2u
#define KPAK_HEADER_SIZE 32u
#define KPAK_ENTRY_SIZE  56u
#define KPAK_FLAG_ZSTD   1u         /* the stored bytes are one zstd frame */
#define KPAK_FLAGS_KNOWN KPAK_FLAG_ZSTD

enum {
	KPAK_OK = 0,
	KPAK_EFORMAT = -1,   /* not a kpak, or damaged/truncated */
	KPAK_EVERSION = -2,  /* a kpak of another version */
	KPAK_ENOTFOUND = -3, /* no entry with that id */
	KPAK_ESIZE = -4,     /* the destination is smaller than the entry */
	KPAK_ENOZSTD = -5,   /* a zstd entry, read without KPAK_WITH_ZSTD */
	KPAK_EDATA = -6,     /* the entry's bytes do not decode or do not match
	                        its hash */
};

typedef struct kpak {
	const unsigned char *data;
	size_t size;
	uint32_t version, nentries, alignment, names_size;
} kpak;

typedef struct kpak_entry {
	uint32_t id;
	const char *name;        /* NUL-terminated, inside the file */
	uint32_t name_len;
	uint32_t flags;          /* KPAK_FLAG_ZSTD or 0 */
	const void *stored;      /* stored_size bytes, inside the file */
	uint64_t offset;         /* of stored, from the file's start */
	uint64_t stored_size;
	uint64_t size;           /* of the entry's own bytes */
	unsigned char hash[16];  /* XXH3-128 of the entry's own bytes,
	                            canonical (big-endian) order */
} kpak_entry;

/* The little-endian u32 / u64 at p. */
static inline uint32_t
kpak_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t
kpak_get64(const unsigned char *p)
{
	return (uint64_t)kpak_get32(p) | (uint64_t)kpak_get32(p + 4) << 32;
}

/* What an error code means, for a message. */
static inline const char *
kpak_strerror(int rv)
{
	switch (rv) {
	case KPAK_OK: return "ok";
	case KPAK_EFORMAT: return "not a kpak file, or a damaged or truncated one";
	case KPAK_EVERSION: return "a kpak of a version this reader does not know";
	case KPAK_ENOTFOUND: return "no such entry";
	case KPAK_ESIZE: return "the destination is smaller than the entry";
	case KPAK_ENOZSTD: return "a zstd entry, and this reader was built without "
	                          "KPAK_WITH_ZSTD";
	case KPAK_EDATA: return "the entry's bytes are damaged (bad zstd data or hash)";
	default: return "unknown kpak error";
	}
}

/* Open the bundle in data[0..size): checks the magic, the version, the
 * file size, and that the table and name pool lie inside it with ids in
 * strictly ascending order. 0, KPAK_EFORMAT or KPAK_EVERSION. */
static inline int
kpak_open(kpak *k, const void *data, size_t size)
{
	const unsigned char *p = (const unsigned char *)data;
	uint64_t table_end;

	memset(k, 0, sizeof *k);
	if (p == NULL || size < KPAK_HEADER_SIZE || memcmp(p, KPAK_MAGIC, 8) != 0)
		return KPAK_EFORMAT;
	k->version = kpak_get32(p + 8);
	if (k->version != KPAK_VERSION)
		return KPAK_EVERSION;
	k->nentries = kpak_get32(p + 12);
	k->alignment = kpak_get32(p + 16);
	k->names_size = kpak_get32(p + 20);
	table_end = KPAK_HEADER_SIZE + (uint64_t)k->nentries * KPAK_ENTRY_SIZE;
	if (kpak_get64(p + 24) != (uint64_t)size || k->alignment == 0 ||
	    (k->alignment & (k->alignment - 1)) != 0 ||
	    table_end + k->names_size > (uint64_t)size ||
	    (k->names_size > 0 && p[table_end + k->names_size - 1] != '\0'))
		return KPAK_EFORMAT;
	for (uint32_t i = 1; i < k->nentries; i++)
		if (kpak_get32(p + KPAK_HEADER_SIZE + (size_t)i * KPAK_ENTRY_SIZE) <=
		    kpak_get32(p + KPAK_HEADER_SIZE + (size_t)(i - 1) * KPAK_ENTRY_SIZE))
			return KPAK_EFORMAT;
	k->data = p;
	k->size = size;
	return KPAK_OK;
}

/* The i-th entry of the table (id order), checked against the file.
 * 0, KPAK_ENOTFOUND (i out of range) or KPAK_EFORMAT. */
static inline int
kpak_entry_at(const kpak *k, uint32_t i, kpak_entry *e)
{
	const unsigned char *r;
	uint64_t names = KPAK_HEADER_SIZE + (uint64_t)k->nentries * KPAK_ENTRY_SIZE;
	uint32_t noff;

	memset(e, 0, sizeof *e);
	if (k->data == NULL || i >= k->nentries)
		return KPAK_ENOTFOUND;
	r = k->data + KPAK_HEADER_SIZE + (size_t)i * KPAK_ENTRY_SIZE;
	e->id = kpak_get32(r);
	noff = kpak_get32(r + 4);
	e->name_len = kpak_get32(r + 8);
	e->flags = kpak_get32(r + 12);
	e->offset = kpak_get64(r + 16);
	e->stored_size = kpak_get64(r + 24);
	e->size = kpak_get64(r + 32);
	memcpy(e->hash, r + 40, 16);
	if ((uint64_t)noff + e->name_len >= k->names_size ||
	    k->data[names + noff + e->name_len] != '\0' ||
	    (e->flags & ~(uint32_t)KPAK_FLAGS_KNOWN) != 0 ||
	    e->offset < names + k->names_size || e->offset % k->alignment != 0 ||
	    e->offset > k->size || e->stored_size > k->size - e->offset ||
	    (e->flags == 0 && e->stored_size != e->size))
		return KPAK_EFORMAT;
	e->name = (const char *)k->data + names + noff;
	e->stored = k->data + e->offset;
	return KPAK_OK;
}

/* The entry with this id (binary search). 0, KPAK_ENOTFOUND or
 * KPAK_EFORMAT. */
static inline int
kpak_find(const kpak *k, uint32_t id, kpak_entry *e)
{
	uint32_t lo = 0, hi = k->data ? k->nentries : 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint32_t at = kpak_get32(k->data + KPAK_HEADER_SIZE + (size_t)mid * KPAK_ENTRY_SIZE);
		if (at == id)
			return kpak_entry_at(k, mid, e);
		if (at < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	memset(e, 0, sizeof *e);
	return KPAK_ENOTFOUND;
}

/* The entry's own bytes (e->size of them) into dst (cap bytes): a copy,
 * or zstd's decompression. 0, KPAK_ESIZE, KPAK_ENOZSTD or KPAK_EDATA
 * (the frame does not decode to exactly e->size bytes). */
static inline int
kpak_read(const kpak_entry *e, void *dst, size_t cap)
{
	if ((uint64_t)cap < e->size)
		return KPAK_ESIZE;
	if (e->flags == 0) {
		if (e->size > 0)
			memcpy(dst, e->stored, (size_t)e->size);
		return KPAK_OK;
	}
#ifdef KPAK_WITH_ZSTD
	{
		size_t got = ZSTD_decompress(dst, (size_t)e->size, e->stored,
		                             (size_t)e->stored_size);
		return ZSTD_isError(got) || got != e->size ? KPAK_EDATA : KPAK_OK;
	}
#else
	return KPAK_ENOZSTD;
#endif
}

#ifndef KPAK_NO_XXHASH
/* An entry's id: XXH32 (seed 0) of its name's bytes, without the NUL.
 * Depends on nothing but the name. */
static inline uint32_t
kpak_id(const char *name)
{
	return XXH32(name, strlen(name), 0);
}

/* Whether bytes (e->size of them: the entry's own, as kpak_read gives
 * them) have the entry's hash. 0 or KPAK_EDATA. */
static inline int
kpak_verify(const kpak_entry *e, const void *bytes)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(bytes, (size_t)e->size));
	return memcmp(c.digest, e->hash, 16) == 0 ? KPAK_OK : KPAK_EDATA;
}
#endif

#endif
