/*
 * loader.c — the proof that a game can consume kiln's output: open a
 * bundle kiln built (kpak, docs/bundles.md) with kiln's reader
 * client/kpak.h, as a game would, and the profile's index map
 * (build/<profile>/kiln-index.txt, docs/build.md); then check every
 * entry's id against its name and its XXH3-128 against both its own bytes
 * (decompressed when the bundle uses zstd) and the index, and print what
 * it found.
 *
 *   loader BUNDLE.kpak build/PROFILE/kiln-index.txt
 *
 * Exit 0 when everything matches, 1 on any mismatch or malformed file, 2
 * on bad usage. Single-threaded.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KPAK_WITH_ZSTD
#include "kpak.h"   /* client/kpak.h */
#include "slurp.h"

struct index_line {
	const char *url, *hash, *path;
	uint64_t size;
};

struct index_map {
	char *text;
	struct index_line *lines;
	size_t n;
	char profile[64];
};

/* Split the index text in place into its lines. */
static int
index_load(struct index_map *m, const char *path)
{
	size_t len, cap = 0;
	char *p, *nl, *f[4];

	if ((m->text = (char *)slurp("loader", path, &len)) == NULL)
		return -1;
	if (sscanf(m->text, "kiln-index 1 %63s", m->profile) != 1) {
		fprintf(stderr, "loader: %s: not a kiln-index 1 file\n", path);
		return -1;
	}
	p = strchr(m->text, '\n');
	for (p = p ? p + 1 : m->text + len; *p; p = nl + 1) {
		if ((nl = strchr(p, '\n')) == NULL) {
			fprintf(stderr, "loader: %s: last line has no newline\n", path);
			return -1;
		}
		*nl = '\0';
		f[0] = p;
		for (int i = 1; i < 4; i++)
			if ((f[i] = strchr(f[i - 1], '\t')) != NULL)
				*f[i]++ = '\0';
			else
				break;
		if (f[1] == NULL || f[2] == NULL || f[3] == NULL || strlen(f[1]) != 32) {
			fprintf(stderr, "loader: %s: malformed line '%s'\n", path, p);
			return -1;
		}
		if (m->n == cap) {
			void *grown = realloc(m->lines, (cap = cap ? cap * 2 : 64) * sizeof *m->lines);
			if (grown == NULL)
				return -1;
			m->lines = grown;
		}
		m->lines[m->n++] = (struct index_line){f[0], f[1], f[3], strtoull(f[2], NULL, 10)};
	}
	return 0;
}

static const struct index_line *
index_find(const struct index_map *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->lines[i].path, path) == 0)
			return &m->lines[i];
	return NULL;
}

/* XXH3-128 of len bytes as 32 lowercase hex digits (the index's form). */
static void
hash_hex(const void *data, size_t len, char out[33])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
}

/* Check entry i: its bytes (decompressed when zstd) against its hash,
 * its id against its name, and both against the index; print it; count
 * its problems. */
static int
check_entry(const kpak *k, uint32_t i, const struct index_map *m)
{
	const struct index_line *il;
	unsigned char *bytes;
	char want[33], got[33];
	kpak_entry e;
	int bad = 0, rv;

	if ((rv = kpak_entry_at(k, i, &e)) != 0) {
		printf("  entry %" PRIu32 ": %s\n", i, kpak_strerror(rv));
		return 1;
	}
	if ((bytes = malloc(e.size ? (size_t)e.size : 1)) == NULL)
		return 1;
	for (int b = 0; b < 16; b++)
		snprintf(want + 2 * b, 3, "%02x", e.hash[b]);
	if ((rv = kpak_read(&e, bytes, (size_t)e.size)) != 0) {
		printf("  0x%08" PRIx32 "  %-28s  [%s]\n", e.id, e.name, kpak_strerror(rv));
		free(bytes);
		return 1;
	}
	hash_hex(bytes, (size_t)e.size, got);
	free(bytes);
	printf("  0x%08" PRIx32 "  %-28s %8" PRIu64 " %-4s %s", e.id, e.name, e.size,
	       e.flags & KPAK_FLAG_ZSTD ? "zstd" : "", got);
	if (e.id != kpak_id(e.name))
		printf("  [id is not XXH32(name)]"), bad++;
	if (strcmp(want, got) != 0)
		printf("  [bundle says %s]", want), bad++;
	if ((il = index_find(m, e.name)) == NULL)
		printf("  [not in the index]"), bad++;
	else if (strcmp(il->hash, got) != 0 || il->size != e.size)
		printf("  [index says %s, %" PRIu64 " bytes]", il->hash, il->size), bad++;
	printf("%s\n", bad ? "" : "  ok");
	return bad;
}

/* The bundle file itself should be in the index too, under its path
 * relative to the index's folder. */
static int
check_self(const char *bundle, const char *index, const unsigned char *b, size_t len,
           const struct index_map *m)
{
	const char *slash = strrchr(index, '/');
	size_t dl = slash ? (size_t)(slash - index) + 1 : 0;
	const struct index_line *il;
	char hex[33];

	if (strncmp(bundle, index, dl) != 0)
		return 0;       /* a bundle copied elsewhere: nothing to compare */
	hash_hex(b, len, hex);
	if ((il = index_find(m, bundle + dl)) == NULL || strcmp(il->hash, hex) != 0) {
		printf("  the bundle file (%s) does not match the index\n", hex);
		return 1;
	}
	printf("  bundle file %s = index entry %s  ok\n", hex, il->url);
	return 0;
}

int
main(int argc, char **argv)
{
	struct index_map m = {0};
	unsigned char *b = NULL;
	size_t len;
	kpak k;
	int bad = 0, rc = 1, rv;

	if (argc != 3) {
		fprintf(stderr, "usage: loader BUNDLE.kpak build/PROFILE/kiln-index.txt\n");
		return 2;
	}
	if (index_load(&m, argv[2]) != 0 || (b = slurp("loader", argv[1], &len)) == NULL)
		goto done;
	if ((rv = kpak_open(&k, b, len)) != 0) {
		fprintf(stderr, "loader: %s: %s\n", argv[1], kpak_strerror(rv));
		goto done;
	}
	printf("%s: kpak %u, %" PRIu32 " entries, %zu bytes (profile %s)\n", argv[1],
	       k.version, k.nentries, len, m.profile);
	for (uint32_t i = 0; i < k.nentries; i++)
		bad += check_entry(&k, i, &m);
	bad += check_self(argv[1], argv[2], b, len, &m);
	if (bad)
		printf("%s: %d problem(s)\n", argv[1], bad);
	else
		printf("%s: every entry matches its hash and the index\n", argv[1]);
	rc = bad ? 1 : 0;
done:
	free(b);
	free(m.text);
	free(m.lines);
	return rc;
}
