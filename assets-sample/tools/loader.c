/*
 * loader.c — the proof that a game can consume kiln's output: open a built
 * bundle (kpak, docs/bundles.md) and the profile's index map
 * (build/<profile>/kiln-index.txt, docs/build.md), check the bundle's
 * structure, then every entry's id against its name and its XXH3-128
 * against both its own bytes and the index, and print what it found.
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

#include "kpak.h"
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

/* The header's and the table's bounds; 0 when the file is well formed. */
static int
check_layout(const unsigned char *b, size_t len, uint32_t *n, const char **names,
             uint32_t *names_size)
{
	uint64_t table_end;

	if (len < KPAK_HEADER_SIZE || memcmp(b, KPAK_MAGIC, 8) != 0) {
		fprintf(stderr, "loader: not a kpak file\n");
		return -1;
	}
	if (kpak_get32(b + 8) != KPAK_VERSION) {
		fprintf(stderr, "loader: kpak version %" PRIu32 " (this loader reads %u)\n",
		        kpak_get32(b + 8), KPAK_VERSION);
		return -1;
	}
	if (kpak_get32(b + 16) == 0 || (kpak_get32(b + 16) & (kpak_get32(b + 16) - 1)) != 0) {
		fprintf(stderr, "loader: alignment %" PRIu32 " is not a power of two\n",
		        kpak_get32(b + 16));
		return -1;
	}
	*n = kpak_get32(b + 12);
	*names_size = kpak_get32(b + 20);
	table_end = KPAK_HEADER_SIZE + (uint64_t)*n * KPAK_ENTRY_SIZE;
	if (kpak_get64(b + 24) != len || table_end + *names_size > len ||
	    (*names_size > 0 && b[table_end + *names_size - 1] != '\0')) {
		fprintf(stderr, "loader: truncated or malformed header (file %zu bytes, "
		        "header says %" PRIu64 ")\n", len, kpak_get64(b + 24));
		return -1;
	}
	*names = (const char *)b + table_end;
	return 0;
}

/* Check entry i; print it; count its problems. */
static int
check_entry(const unsigned char *b, size_t len, uint32_t i, const char *names,
            uint32_t names_size, uint32_t prev_id, const struct index_map *m)
{
	const unsigned char *row = b + KPAK_HEADER_SIZE + (size_t)i * KPAK_ENTRY_SIZE;
	uint32_t id = kpak_get32(row), off = kpak_get32(row + 4), nlen = kpak_get32(row + 8);
	uint64_t at = kpak_get64(row + 16), size = kpak_get64(row + 24);
	uint32_t align = kpak_get32(b + 16);
	const struct index_line *il;
	unsigned char mine[16];
	char want[33], got[33];
	const char *name;
	int bad = 0;

	if (kpak_get32(row + 12) != 0 || (uint64_t)off + nlen >= names_size || names[off + nlen] != '\0' ||
	    strlen(names + off) != nlen || at % align != 0 || at > len || size > len - at) {
		printf("  entry %" PRIu32 ": malformed (unknown flags, or name or data out "
		       "of bounds)\n", i);
		return 1;
	}
	name = names + off;
	kpak_hex(row + 32, want);
	kpak_hash(b + at, size, mine);
	kpak_hex(mine, got);
	printf("  0x%08" PRIx32 "  %-28s %8" PRIu64 "  %s", id, name, size, got);
	if (i > 0 && id <= prev_id)
		printf("  [table not sorted by id]"), bad++;
	if (id != kpak_id(name))
		printf("  [id is not XXH32(name)]"), bad++;
	if (strcmp(want, got) != 0)
		printf("  [bundle says %s]", want), bad++;
	if ((il = index_find(m, name)) == NULL)
		printf("  [not in the index]"), bad++;
	else if (strcmp(il->hash, got) != 0 || il->size != size)
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
	unsigned char h[16];
	char hex[33];

	if (strncmp(bundle, index, dl) != 0)
		return 0;       /* a bundle copied elsewhere: nothing to compare */
	kpak_hash(b, len, h);
	kpak_hex(h, hex);
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
	const char *names;
	uint32_t n = 0, names_size, prev = 0;
	size_t len;
	int bad = 0, rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: loader BUNDLE.kpak build/PROFILE/kiln-index.txt\n");
		return 2;
	}
	if (index_load(&m, argv[2]) != 0 || (b = slurp("loader", argv[1], &len)) == NULL)
		goto done;
	if (check_layout(b, len, &n, &names, &names_size) != 0)
		goto done;
	printf("%s: kpak %u, %" PRIu32 " entries, %zu bytes (profile %s)\n", argv[1],
	       KPAK_VERSION, n, len, m.profile);
	for (uint32_t i = 0; i < n; i++) {
		bad += check_entry(b, len, i, names, names_size, prev, &m);
		prev = kpak_get32(b + KPAK_HEADER_SIZE + (size_t)i * KPAK_ENTRY_SIZE);
	}
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
