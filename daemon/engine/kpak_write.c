/* kpak_write.c — packing a bundle's entries into a kpak file (version 2,
 * the layout in client/kpak.h, which this file shares), with its generated
 * C header of stable ids and, on request, a JSON manifest.
 *
 * An entry's id is XXH32 of its name (kpak_id): it never depends on the
 * other entries, so a game compiled against an older header still finds
 * its assets. Two entries with one id, or one C name, refuse the bundle
 * (the id must never silently change meaning). The data is written in id
 * order, each entry at a multiple of the alignment; with zstd an entry is
 * stored compressed only when that makes it smaller. Its hash is always
 * of its own bytes (what the index map lists), so a reader checks what it
 * decompressed. Everything here is deterministic: the same entries and
 * options give the same bytes (the result is cached by its key). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "kiln_hex.h"
#include "kpak.h"
#include "kpak_write.h"

static void
put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void
put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* The C name of entry name in bundle: KPAK_<BUNDLE>_<NAME>, upper case,
 * every character but letters and digits as '_'. */
static void
c_name(const char *bundle, const char *name, char *out, size_t len)
{
	size_t w = (size_t)snprintf(out, len, "KPAK_%s_%s", bundle, name);

	for (size_t i = 5; i < len && i < w && out[i] != '\0'; i++) {
		char c = out[i];
		if (c >= 'a' && c <= 'z')
			out[i] = (char)(c - 'a' + 'A');
		else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			out[i] = '_';
	}
}

static int
by_id(const void *a, const void *b)
{
	const struct kpak_in *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* An entry's C name, for sorting them to find two alike. */
struct cname {
	char *name;
	const struct kpak_in *e;
};

static int
by_cname(const void *a, const void *b)
{
	return strcmp(((const struct cname *)a)->name, ((const struct cname *)b)->name);
}

/* Two entries (v sorted by id) with one id, or one C name: KILN_EINVAL
 * with err naming both. */
static int
check_unique(const struct kpak_opts *o, const struct kpak_in *v, size_t n, char *err,
             size_t errlen)
{
	struct cname *c;
	size_t total = 0;
	char *text;

	for (size_t i = 1; i < n; i++)
		if (v[i].id == v[i - 1].id) {
			snprintf(err, errlen, "bundle '%s': entries '%s' (%s) and '%s' (%s) have "
			         "the same id 0x%08x (XXH32 of the name); rename one of them",
			         o->bundle, v[i - 1].name, v[i - 1].url, v[i].name, v[i].url,
			         v[i].id);
			return KILN_EINVAL;
		}
	for (size_t i = 0; i < n; i++)
		total += strlen("KPAK__") + strlen(o->bundle) + strlen(v[i].name) + 1;
	if ((c = malloc((n ? n : 1) * sizeof *c + total)) == NULL)
		return KILN_ENOMEM;
	text = (char *)(c + (n ? n : 1));
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen("KPAK__") + strlen(o->bundle) + strlen(v[i].name) + 1;
		c[i].name = text;
		c[i].e = &v[i];
		c_name(o->bundle, v[i].name, text, len);
		text += len;
	}
	if (n > 1)
		qsort(c, n, sizeof *c, by_cname);
	for (size_t i = 1; i < n; i++)
		if (strcmp(c[i].name, c[i - 1].name) == 0) {
			const struct kpak_in *x = c[i - 1].e, *y = c[i].e;
			if (strcmp(x->name, y->name) > 0) {   /* the message's order: by name */
				const struct kpak_in *t = x;
				x = y;
				y = t;
			}
			snprintf(err, errlen, "bundle '%s': entries '%s' (%s) and '%s' (%s) have "
			         "the same C name %s in %s.h; rename one of them", o->bundle,
			         x->name, x->url, y->name, y->url, c[i].name, o->bundle);
			free(c);
			return KILN_EINVAL;
		}
	free(c);
	return 0;
}

static uint64_t
align_up(uint64_t x, uint32_t a)
{
	return (x + a - 1) & ~(uint64_t)(a - 1);
}

static int
write_all(int fd, const void *p, size_t len, uint64_t off)
{
	const unsigned char *b = p;

	while (len > 0) {
		ssize_t w = pwrite(fd, b, len, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? kiln_err_from_errno(errno) : KILN_EIO;
		b += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Entry i's record in the table at rec. */
static void
table_put(unsigned char *rec, const struct kpak_in *e, uint32_t name_off,
          uint32_t flags, uint64_t off, uint64_t stored)
{
	put32(rec, e->id);
	put32(rec + 4, name_off);
	put32(rec + 8, (uint32_t)strlen(e->name));
	put32(rec + 12, flags);
	put64(rec + 16, off);
	put64(rec + 24, stored);
	put64(rec + 32, e->size);
	memcpy(rec + 40, e->blob.b, 16);
}

/* The entry's stored bytes: its blob, or zstd's frame of it when smaller
 * (*flags KPAK_FLAG_ZSTD). *out is malloc'd. */
static int
entry_bytes(kiln_store *s, const struct kpak_opts *o, const struct kpak_in *e,
            void **out, size_t *len, uint32_t *flags)
{
	void *raw = NULL, *z;
	size_t rlen = 0, bound, zlen;
	int rv;

	*flags = 0;
	if ((rv = kiln_store_read(s, &e->blob, &raw, &rlen)) != 0)
		return rv;
	if (rlen != e->size) {
		free(raw);
		return KILN_ECORRUPT;
	}
	*out = raw;
	*len = rlen;
	if (!o->zstd || rlen == 0)
		return 0;
	bound = ZSTD_compressBound(rlen);
	if ((z = malloc(bound)) == NULL) {
		free(raw);
		return KILN_ENOMEM;
	}
	zlen = ZSTD_compress(z, bound, raw, rlen, KPAK_ZSTD_LEVEL);
	if (ZSTD_isError(zlen) || zlen >= rlen) {
		free(z);   /* incompressible: stored as it is */
		return 0;
	}
	free(raw);
	*out = z;
	*len = zlen;
	*flags = KPAK_FLAG_ZSTD;
	return 0;
}

/* Where each entry went, for the header and the manifest. */
struct placed {
	uint64_t off, stored;
	uint32_t flags;
};

static int
write_kpak(kiln_store *s, const struct kpak_opts *o, const struct kpak_in *v, size_t n,
           int fd, struct placed *pl, char *err, size_t errlen)
{
	uint64_t names_size = 0, table = KPAK_HEADER_SIZE + (uint64_t)n * KPAK_ENTRY_SIZE;
	uint64_t at, end;
	unsigned char *head;
	size_t hlen;
	int rv = 0;

	for (size_t i = 0; i < n; i++)
		names_size += strlen(v[i].name) + 1;
	if (n > UINT32_MAX / KPAK_ENTRY_SIZE || names_size > UINT32_MAX / 2) {
		snprintf(err, errlen, "bundle '%s': too many entries for one kpak", o->bundle);
		return KILN_ERANGE;
	}
	hlen = (size_t)(table + names_size);
	if ((head = calloc(1, hlen)) == NULL)
		return KILN_ENOMEM;
	end = at = align_up(hlen, o->align);
	for (size_t i = 0, noff = 0; i < n && rv == 0; i++) {
		void *bytes = NULL;
		size_t len = 0;
		if ((rv = entry_bytes(s, o, &v[i], &bytes, &len, &pl[i].flags)) != 0) {
			snprintf(err, errlen, "bundle '%s': entry '%s' (%s, blob in the store): %s",
			         o->bundle, v[i].name, v[i].url, kiln_strerror(rv));
			break;
		}
		pl[i].off = at;
		pl[i].stored = len;
		if ((rv = write_all(fd, bytes, len, at)) != 0)
			snprintf(err, errlen, "bundle '%s': writing entry '%s': %s", o->bundle,
			         v[i].name, kiln_strerror(rv));
		free(bytes);
		table_put(head + KPAK_HEADER_SIZE + i * KPAK_ENTRY_SIZE, &v[i], (uint32_t)noff,
		          pl[i].flags, at, len);
		memcpy(head + table + noff, v[i].name, strlen(v[i].name) + 1);
		noff += strlen(v[i].name) + 1;
		end = at + len;
		at = align_up(end, o->align);
	}
	memcpy(head, KPAK_MAGIC, 8);
	put32(head + 8, KPAK_VERSION);
	put32(head + 12, (uint32_t)n);
	put32(head + 16, o->align);
	put32(head + 20, (uint32_t)names_size);
	put64(head + 24, end);
	/* the gaps are holes, which read as the zeros the format asks for */
	if (rv == 0 && (rv = write_all(fd, head, hlen, 0)) == 0 && ftruncate(fd, (off_t)end) != 0)
		rv = kiln_err_from_errno(errno);
	if (rv != 0 && err[0] == '\0')
		snprintf(err, errlen, "bundle '%s': writing the kpak: %s", o->bundle,
		         kiln_strerror(rv));
	free(head);
	return rv;
}

/* s inside a C comment: a name holding a star then a slash would end
 * it and put the rest of the name in the header as code; a backslash goes
 * between them. */
static void
comment_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		fputc(*s, f);
		if (*s == '*' && s[1] == '/')
			fputc('\\', f);
	}
}

static int
write_header(const struct kpak_opts *o, const struct kpak_in *v, size_t n,
             const char *path)
{
	FILE *f = fopen(path, "we");
	char cn[1024];
	int ok;

	if (f == NULL)
		return kiln_err_from_errno(errno);
	c_name(o->bundle, "H", cn, sizeof cn);
	fprintf(f, "/* %s.h: entry ids of bundle %s.kpak, generated by kiln "
	        "(docs/bundles.md).\n * An id is XXH32 of the entry's name: it changes "
	        "only when the asset is renamed. */\n#ifndef %s\n#define %s\n\n",
	        o->bundle, o->bundle, cn, cn);
	c_name(o->bundle, "NENTRIES", cn, sizeof cn);
	for (size_t i = 0; i < n; i++) {
		char name[1024];
		c_name(o->bundle, v[i].name, name, sizeof name);
		fprintf(f, "#define %-40s 0x%08xu  /* ", name, v[i].id);
		comment_text(f, v[i].name);
		fprintf(f, ", %llu bytes */\n", (unsigned long long)v[i].size);
	}
	fprintf(f, "#define %s %zuu\n\n#endif\n", cn, n);
	ok = !ferror(f);
	return fclose(f) == 0 && ok ? 0 : KILN_EIO;
}

/* s as a JSON string (names are URL paths, but quote what JSON needs). */
static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int
write_manifest(const struct kpak_opts *o, const struct kpak_in *v, size_t n,
               const struct placed *pl, const char *path)
{
	FILE *f = fopen(path, "we");
	char hex[33];
	int ok;

	if (f == NULL)
		return kiln_err_from_errno(errno);
	fprintf(f, "{\"bundle\": ");
	json_str(f, o->bundle);
	fprintf(f, ", \"kpak_version\": %u, \"alignment\": %u, \"compress\": \"%s\", "
	        "\"entries\": [", KPAK_VERSION, o->align, o->zstd ? "zstd" : "none");
	for (size_t i = 0; i < n; i++) {
		kiln_hex_encode(v[i].blob.b, 16, hex);
		fprintf(f, "%s\n  {\"id\": %u, \"name\": ", i ? "," : "", v[i].id);
		json_str(f, v[i].name);
		fprintf(f, ", \"url\": ");
		json_str(f, v[i].url);
		fprintf(f, ", \"offset\": %llu, \"stored_size\": %llu, \"size\": %llu, "
		        "\"compression\": \"%s\", \"xxh3_128\": \"%s\"}",
		        (unsigned long long)pl[i].off, (unsigned long long)pl[i].stored,
		        (unsigned long long)v[i].size,
		        pl[i].flags & KPAK_FLAG_ZSTD ? "zstd" : "none", hex);
	}
	fprintf(f, "\n]}\n");
	ok = !ferror(f);
	return fclose(f) == 0 && ok ? 0 : KILN_EIO;
}

int
kpak_write(kiln_store *s, const struct kpak_opts *o, struct kpak_in *v, size_t n,
           const char *kpak_path, const char *h_path, const char *json_path,
           char *err, size_t errlen)
{
	struct placed *pl;
	int fd, rv;

	err[0] = '\0';
	for (size_t i = 0; i < n; i++)
		v[i].id = kpak_id(v[i].name);
	if (n > 1)
		qsort(v, n, sizeof *v, by_id);
	if ((rv = check_unique(o, v, n, err, errlen)) != 0)
		return rv;
	if ((pl = calloc(n ? n : 1, sizeof *pl)) == NULL)
		return KILN_ENOMEM;
	fd = open(kpak_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		rv = kiln_err_from_errno(errno);
		snprintf(err, errlen, "bundle '%s': cannot create %s: %s", o->bundle, kpak_path,
		         kiln_strerror(rv));
		free(pl);
		return rv;
	}
	rv = write_kpak(s, o, v, n, fd, pl, err, errlen);
	if (close(fd) != 0 && rv == 0)
		rv = KILN_EIO;
	if (rv == 0 && (rv = write_header(o, v, n, h_path)) != 0)
		snprintf(err, errlen, "bundle '%s': writing %s.h: %s", o->bundle, o->bundle,
		         kiln_strerror(rv));
	if (rv == 0 && json_path != NULL && (rv = write_manifest(o, v, n, pl, json_path)) != 0)
		snprintf(err, errlen, "bundle '%s': writing %s.json: %s", o->bundle, o->bundle,
		         kiln_strerror(rv));
	free(pl);
	return rv;
}
