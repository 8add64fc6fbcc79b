/* kpak_check.c — the tests' reader of kiln bundles, through client/kpak.h
 * alone (as a game would, with KPAK_WITH_ZSTD):
 *
 *   kpak-check BUNDLE.kpak build/<profile>/kiln-index.txt
 *
 * Opens the bundle, and for every entry reads its bytes (decompressing a
 * zstd one), checks them against the entry's hash, finds the index map's
 * line for the entry's name, and compares hash, size and every byte with
 * the file that line names under build/<profile>/. Also checks the bundle
 * file itself against its own index line. Prints one line per entry and
 * exits 0 when everything matches, 1 on any mismatch, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KPAK_WITH_ZSTD
#include "kpak.h"

/* The whole file at path (malloc'd) and its size; NULL when unreadable. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void
hex(const unsigned char h[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* The index line (url, hash, size) whose file field is file: 1 found. */
static int
index_find(const char *index, const char *file, char *url, char *hash,
           unsigned long long *size)
{
	FILE *f = fopen(index, "r");
	char line[4096], u[2048], h[64], fl[2048];
	int found = 0;

	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "%2047[^\t]\t%63[^\t]\t%llu\t%2047[^\n]", u, h, size, fl) == 4 &&
		    strcmp(fl, file) == 0) {
			strcpy(url, u);
			strcpy(hash, h);
			found = 1;
		}
	fclose(f);
	return found;
}

/* Entry e against the index and the file under root. 0 when all match. */
static int
check_entry(const kpak_entry *e, const char *index, const char *root)
{
	char url[2048], ihash[64], h[33], path[8192];
	unsigned long long isize;
	unsigned char *bytes = malloc(e->size ? (size_t)e->size : 1), *file;
	size_t flen = 0;
	int rv;

	if (bytes == NULL)
		return 1;
	hex(e->hash, h);
	printf("  0x%08x  %-30s %8llu %-4s %s  ", e->id, e->name, (unsigned long long)e->size,
	       e->flags & KPAK_FLAG_ZSTD ? "zstd" : "raw", h);
	if ((rv = kpak_read(e, bytes, (size_t)e->size)) != 0 || (rv = kpak_verify(e, bytes)) != 0) {
		printf("BAD: %s\n", kpak_strerror(rv));
		free(bytes);
		return 1;
	}
	if (!index_find(index, e->name, url, ihash, &isize)) {
		printf("BAD: not in the index map\n");
		free(bytes);
		return 1;
	}
	snprintf(path, sizeof path, "%s/%s", root, e->name);
	file = slurp(path, &flen);
	rv = strcmp(ihash, h) != 0 || isize != e->size || file == NULL || flen != e->size ||
	     memcmp(file, bytes, flen) != 0;
	printf(rv ? "BAD: differs from %s (%s, %s)\n" : "ok = %s\n", url, ihash, path);
	free(file);
	free(bytes);
	return rv;
}

int
main(int argc, char **argv)
{
	unsigned char *data;
	size_t len = 0, nzstd = 0;
	char root[4096], url[2048], ihash[64], h[33];
	const char *base;
	unsigned long long isize;
	kpak k;
	int rv, bad = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: kpak-check BUNDLE.kpak build/<profile>/kiln-index.txt\n");
		return 2;
	}
	snprintf(root, sizeof root, "%s", argv[2]);
	*(strrchr(root, '/') ? strrchr(root, '/') : root) = '\0';
	if ((data = slurp(argv[1], &len)) == NULL) {
		fprintf(stderr, "kpak-check: cannot read %s\n", argv[1]);
		return 1;
	}
	if ((rv = kpak_open(&k, data, len)) != 0) {
		printf("%s: %s\n", argv[1], kpak_strerror(rv));
		free(data);
		return 1;
	}
	printf("%s: kpak %u, %u entries, alignment %u, %zu bytes\n", argv[1], k.version,
	       k.nentries, k.alignment, len);
	for (uint32_t i = 0; i < k.nentries; i++) {
		kpak_entry e;
		if ((rv = kpak_entry_at(&k, i, &e)) != 0) {
			printf("  entry %u: %s\n", i, kpak_strerror(rv));
			bad = 1;
			continue;
		}
		nzstd += (e.flags & KPAK_FLAG_ZSTD) != 0;
		/* the table is searchable by the id the header gives */
		kpak_entry f;
		if (kpak_find(&k, kpak_id(e.name), &f) != 0 || f.offset != e.offset) {
			printf("  %s: its id 0x%08x does not find it\n", e.name, kpak_id(e.name));
			bad = 1;
		}
		bad |= check_entry(&e, argv[2], root);
	}
	/* the bundle file itself, under its own index line */
	base = argv[1] + strlen(root) + 1;
	{
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
		hex(c.digest, h);
	}
	if (strncmp(argv[1], root, strlen(root)) != 0 || !index_find(argv[2], base, url, ihash, &isize) ||
	    strcmp(ihash, h) != 0 || isize != len) {
		printf("  the bundle file (%s) does not match its index line\n", h);
		bad = 1;
	} else {
		printf("  bundle file %s = index entry %s  ok\n", h, url);
	}
	printf("%s: %u entries (%zu zstd): %s\n", argv[1], k.nentries, nzstd,
	       bad ? "MISMATCH" : "every entry matches the index map byte for byte");
	free(data);
	return bad;
}
