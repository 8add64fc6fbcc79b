/*
 * kpak.h — the sample's bundle file format ("kpak", version 1), shared by
 * the packer (pack.c) and the loader (loader.c); docs/bundles.md is the
 * reference a game reads. Everything is little-endian, so it is written
 * and read byte by byte here rather than by casting structs (no padding or
 * host-order surprises). Single-threaded tools; no state.
 *
 *   header  32 bytes   magic "KILNPAK\0", u32 version, u32 nentries,
 *                      u32 alignment, u32 names_size, u64 file_size
 *   table   48 bytes   per entry, sorted by id (strictly ascending):
 *                      u32 id, u32 name_offset, u32 name_len, u32 flags (0),
 *                      u64 data_offset, u64 data_size, u8 hash[16]
 *   names   names_size bytes: every entry's name, each NUL-terminated
 *   data    each entry's bytes at a multiple of `alignment`, zero padding
 *
 * Changing the layout means a new version number, the loader refusing the
 * old one, and docs/bundles.md updated in the same commit.
 */
#ifndef KPAK_H
#define KPAK_H

#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#define KPAK_MAGIC       "KILNPAK"  /* 8 bytes with its NUL */
#define KPAK_VERSION     1u
#define KPAK_HEADER_SIZE 32u
#define KPAK_ENTRY_SIZE  48u
#define KPAK_ALIGN       16u

/* Store v at p, little-endian. */
static inline void
kpak_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Store v at p, little-endian. */
static inline void
kpak_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The little-endian u32 at p. */
static inline uint32_t
kpak_get32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* The little-endian u64 at p. */
static inline uint64_t
kpak_get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* An entry's id: XXH32 (seed 0) of its name's bytes, without the NUL.
 * Depends on nothing but the name, so adding or removing other entries
 * never changes it. */
static inline uint32_t
kpak_id(const char *name)
{
	return XXH32(name, strlen(name), 0);
}

/* XXH3-128 of len bytes at data in canonical (big-endian) byte order: the
 * order in which xxh128sum and kiln-index.txt print it as hex. */
static inline void
kpak_hash(const void *data, size_t len, unsigned char out[16])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	memcpy(out, c.digest, 16);
}

/* out (33 bytes) = hash as 32 lowercase hex digits. */
static inline void
kpak_hex(const unsigned char hash[16], char out[33])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[hash[i] >> 4];
		out[2 * i + 1] = digits[hash[i] & 15];
	}
	out[32] = '\0';
}

#endif
