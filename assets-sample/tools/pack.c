/*
 * pack.c — the sample's bundle packer: many built files into one kpak file
 * (format in kpak.h and docs/bundles.md) plus a C header giving each entry
 * a stable integer id. Run by kiln as the `pack` tool of kiln.yaml:
 *
 *   pack --name NAME --root build/PROFILE -o OUT.kpak -H OUT.h FILE...
 *
 * Each FILE is a prerequisite's output as the engine passes it,
 * build/<profile>/<dir>/<file>; its entry name is that path relative to
 * --root, which is also its path in build/<profile>/kiln-index.txt, so a
 * loader can check each entry against the index. An id is XXH32 of the
 * name; two names of one bundle with the same id (or the same C macro
 * name) fail the pack, naming both, instead of shipping an ambiguous id.
 * Single-threaded.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpak.h"
#include "slurp.h"

struct entry {
	const char *name;       /* relative to --root; points into argv */
	char *macro;            /* the header's #define name */
	uint32_t id;
	unsigned char *data;
	size_t size;
	unsigned char hash[16];
	uint64_t offset;        /* in the bundle file */
};

static int
by_id(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int
by_macro(const void *a, const void *b)
{
	return strcmp((*(const struct entry *const *)a)->macro,
	              (*(const struct entry *const *)b)->macro);
}

/* KPAK_<BUNDLE>_<NAME> in upper case, every other character '_'. */
static char *
macro_name(const char *bundle, const char *name)
{
	size_t n = strlen("KPAK__") + strlen(bundle) + strlen(name) + 1;
	char *m = malloc(n), *p;

	if (m == NULL)
		return NULL;
	snprintf(m, n, "KPAK_%s_%s", bundle, name);
	for (p = m; *p; p++)
		*p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
	return m;
}

/* Load one input: read it, name it, hash it. */
static int
entry_load(struct entry *e, const char *bundle, const char *root, const char *path)
{
	size_t rl = strlen(root);

	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0') {
		fprintf(stderr, "pack: %s is not under %s/\n", path, root);
		return -1;
	}
	e->name = path + rl + 1;
	e->id = kpak_id(e->name);
	if ((e->macro = macro_name(bundle, e->name)) == NULL) {
		fprintf(stderr, "pack: out of memory\n");
		return -1;
	}
	if ((e->data = slurp("pack", path, &e->size)) == NULL)
		return -1;
	kpak_hash(e->data, e->size, e->hash);
	return 0;
}

/* Refuse two entries with one id, or one macro name. */
static int
check_unique(struct entry *es, size_t n)
{
	struct entry **byname;
	int bad = 0;

	qsort(es, n, sizeof *es, by_id);
	for (size_t i = 1; i < n; i++)
		if (es[i].id == es[i - 1].id) {
			fprintf(stderr, "pack: '%s' and '%s' have the same id 0x%08" PRIx32
			        "; rename one\n", es[i - 1].name, es[i].name, es[i].id);
			bad = 1;
		}
	if ((byname = malloc(n * sizeof *byname + 1)) == NULL) {
		fprintf(stderr, "pack: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		byname[i] = &es[i];
	qsort(byname, n, sizeof *byname, by_macro);
	for (size_t i = 1; i < n; i++)
		if (strcmp(byname[i]->macro, byname[i - 1]->macro) == 0) {
			fprintf(stderr, "pack: '%s' and '%s' both make the C name %s; rename one\n",
			        byname[i - 1]->name, byname[i]->name, byname[i]->macro);
			bad = 1;
		}
	free(byname);
	return bad ? -1 : 0;
}

static uint64_t
align_up(uint64_t v)
{
	return (v + KPAK_ALIGN - 1) / KPAK_ALIGN * KPAK_ALIGN;
}

/* Lay out and write the bundle; sets every entry's offset. */
static int
write_bundle(const char *out, struct entry *es, size_t n)
{
	static const unsigned char zeros[KPAK_ALIGN];
	unsigned char head[KPAK_HEADER_SIZE] = {0}, row[KPAK_ENTRY_SIZE];
	uint64_t names = 0, pos;
	FILE *f;
	int ok;

	for (size_t i = 0; i < n; i++)
		names += strlen(es[i].name) + 1;
	pos = KPAK_HEADER_SIZE + (uint64_t)n * KPAK_ENTRY_SIZE + names;
	for (size_t i = 0; i < n; i++) {
		es[i].offset = align_up(pos);
		pos = es[i].offset + es[i].size;
	}
	if (names > UINT32_MAX || n > UINT32_MAX) {
		fprintf(stderr, "pack: too many entries\n");
		return -1;
	}
	memcpy(head, KPAK_MAGIC, 8);
	kpak_put32(head + 8, KPAK_VERSION);
	kpak_put32(head + 12, (uint32_t)n);
	kpak_put32(head + 16, KPAK_ALIGN);
	kpak_put32(head + 20, (uint32_t)names);
	kpak_put64(head + 24, pos);
	if ((f = fopen(out, "wb")) == NULL) {
		perror(out);
		return -1;
	}
	ok = fwrite(head, sizeof head, 1, f) == 1;
	names = 0;
	for (size_t i = 0; ok && i < n; i++) {
		memset(row, 0, sizeof row);
		kpak_put32(row, es[i].id);
		kpak_put32(row + 4, (uint32_t)names);
		kpak_put32(row + 8, (uint32_t)strlen(es[i].name));
		kpak_put64(row + 16, es[i].offset);
		kpak_put64(row + 24, es[i].size);
		memcpy(row + 32, es[i].hash, 16);
		ok = fwrite(row, sizeof row, 1, f) == 1;
		names += strlen(es[i].name) + 1;
	}
	for (size_t i = 0; ok && i < n; i++)
		ok = fwrite(es[i].name, strlen(es[i].name) + 1, 1, f) == 1;
	pos = KPAK_HEADER_SIZE + (uint64_t)n * KPAK_ENTRY_SIZE + names;
	for (size_t i = 0; ok && i < n; i++) {
		ok = fwrite(zeros, es[i].offset - pos, 1, f) == 1 || es[i].offset == pos;
		ok = ok && (es[i].size == 0 || fwrite(es[i].data, es[i].size, 1, f) == 1);
		pos = es[i].offset + es[i].size;
	}
	if (fclose(f) != 0 || !ok) {
		fprintf(stderr, "pack: cannot write %s\n", out);
		return -1;
	}
	return 0;
}

/* The C header: one #define per entry, sorted by name, then the count. */
static int
write_header(const char *out, const char *bundle, struct entry *es, size_t n)
{
	struct entry **byname = malloc(n * sizeof *byname + 1);
	char *guard = macro_name(bundle, "H"), *count = macro_name(bundle, "NENTRIES");
	char hex[33];
	FILE *f = NULL;
	int rc = -1;

	if (byname == NULL || guard == NULL || count == NULL || (f = fopen(out, "w")) == NULL) {
		fprintf(stderr, "pack: cannot write %s\n", out);
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		byname[i] = &es[i];
	qsort(byname, n, sizeof *byname, by_macro);
	fprintf(f, "/* Generated by assets-sample/tools/pack for bundle '%s': do not edit.\n"
	        " * Each id is XXH32 (seed 0) of the entry's name, so it does not change\n"
	        " * when other assets are added; look it up in the bundle's entry table\n"
	        " * (docs/bundles.md). */\n#ifndef %s\n#define %s\n\n", bundle, guard, guard);
	for (size_t i = 0; i < n; i++) {
		kpak_hex(byname[i]->hash, hex);
		fprintf(f, "#define %-40s 0x%08" PRIx32 "u  /* %s, %zu bytes */\n",
		        byname[i]->macro, byname[i]->id, byname[i]->name, byname[i]->size);
	}
	fprintf(f, "\n#define %s %zuu\n\n#endif\n", count, n);
	rc = 0;
done:
	if (f != NULL && fclose(f) != 0)
		rc = -1;
	free(byname);
	free(guard);
	free(count);
	return rc;
}

static int
usage(void)
{
	fprintf(stderr, "usage: pack --name NAME --root DIR -o OUT.kpak -H OUT.h FILE...\n");
	return 2;
}

int
main(int argc, char **argv)
{
	const char *name = NULL, *root = NULL, *out = NULL, *header = NULL;
	struct entry *es;
	size_t n = 0, total;
	int i, rc = 1;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--name") == 0)
			name = argv[i + 1];
		else if (strcmp(argv[i], "--root") == 0)
			root = argv[i + 1];
		else if (strcmp(argv[i], "-o") == 0)
			out = argv[i + 1];
		else if (strcmp(argv[i], "-H") == 0)
			header = argv[i + 1];
		else
			return usage();
	}
	if (!name || !root || !out || !header || i >= argc)
		return usage();
	total = (size_t)(argc - i);
	if ((es = calloc(total, sizeof *es)) == NULL) {
		fprintf(stderr, "pack: out of memory\n");
		return 1;
	}
	for (; i < argc; i++, n++)
		if (entry_load(&es[n], name, root, argv[i]) != 0)
			goto done;
	if (check_unique(es, n) != 0 || write_bundle(out, es, n) != 0 ||
	    write_header(header, name, es, n) != 0)
		goto done;
	rc = 0;
done:
	for (size_t j = 0; j < total; j++) {
		free(es[j].data);
		free(es[j].macro);
	}
	free(es);
	return rc;
}
