/* check.c — the rules of kiln's remote-cache layout (docs/cache.md), in
 * one place for the encoders (which refuse to write what breaks them) and
 * the decoders (which refuse to read it): paths, strings, counts, digests,
 * canonical candidates, and the canonical form of a whole entry.
 *
 * Canonical form is checked by packing the decoded message again and
 * comparing bytes: one test catches fields out of order, a singular field
 * given twice (protobuf keeps the last, a second reader might not), a
 * string holding a NUL (C sees it cut short) and non-minimal varints. */
#include <stdlib.h>
#include <string.h>

#include "entries_int.h"

/* Whether the n bytes at p are a relative path: components separated by
 * single '/', none empty, "." or "..". */
static int
rel_ok(const char *p, size_t n)
{
	size_t i = 0, j;

	while (i < n) {
		for (j = i; j < n && p[j] != '/'; j++)
			;
		if (j == i || (j - i == 1 && p[i] == '.') ||
		    (j - i == 2 && p[i] == '.' && p[i + 1] == '.'))
			return 0;
		if (j == n)
			return 1;
		i = j + 1;
	}
	return 0; /* empty, or a trailing '/' */
}

int
check_str(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > KILN_CACHE_STR_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

int
check_output_name(const char *s)
{
	return check_str(s) && rel_ok(s, strlen(s));
}

/* A discovered path: "./" (the project root's listing), or a relative or
 * clean absolute path, with one trailing '/' for a listing. */
static int
dep_path_ok(const char *s)
{
	size_t n = strlen(s);

	if (!check_str(s))
		return 0;
	if (strcmp(s, "./") == 0)
		return 1;
	if (s[n - 1] == '/')
		n--;
	if (n > 0 && s[0] == '/') {
		s++;
		n--;
	}
	return rel_ok(s, n);
}

static int
file_cmp(const void *a, const void *b)
{
	const struct kiln_cache_file *x = *(const struct kiln_cache_file *const *)a;
	const struct kiln_cache_file *y = *(const struct kiln_cache_file *const *)b;

	return strcmp(x->path, y->path);
}

static int
need_cmp(const void *a, const void *b)
{
	const struct kiln_cache_need *x = *(const struct kiln_cache_need *const *)a;
	const struct kiln_cache_need *y = *(const struct kiln_cache_need *const *)b;
	int c = strcmp(x->url, y->url);

	return c != 0 ? c : strcmp(x->output, y->output);
}

/* Limits first (so a huge list is refused before it is sorted), then each
 * string. 0, KILN_EINVAL or KILN_ERANGE. */
static int
cand_fields_ok(const struct kiln_cache_candidate *c)
{
	if (c->nfiles > KILN_CACHE_FILES_MAX || c->nneeds > KILN_CACHE_NEEDS_MAX ||
	    c->nwarnings > KILN_CACHE_WARNINGS_MAX)
		return KILN_ERANGE;
	for (size_t i = 0; i < c->nfiles; i++)
		if (c->files[i].path == NULL || !dep_path_ok(c->files[i].path))
			return KILN_EINVAL;
	for (size_t i = 0; i < c->nneeds; i++)
		if (c->needs[i].url == NULL || c->needs[i].output == NULL ||
		    !check_str(c->needs[i].url) || !check_str(c->needs[i].output))
			return KILN_EINVAL;
	/* A warning is a sentence: it may be empty, never past the limit. */
	for (size_t i = 0; i < c->nwarnings; i++)
		if (c->warnings[i] == NULL || strlen(c->warnings[i]) > KILN_CACHE_STR_MAX)
			return KILN_EINVAL;
	return 0;
}

int
canon_make(const struct kiln_cache_candidate *c, struct canon *cc)
{
	int rv;

	cc->files = NULL;
	cc->needs = NULL;
	if ((rv = cand_fields_ok(c)) != 0)
		return rv;
	cc->files = malloc((c->nfiles ? c->nfiles : 1) * sizeof *cc->files);
	cc->needs = malloc((c->nneeds ? c->nneeds : 1) * sizeof *cc->needs);
	if (cc->files == NULL || cc->needs == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < c->nfiles; i++)
		cc->files[i] = &c->files[i];
	for (size_t i = 0; i < c->nneeds; i++)
		cc->needs[i] = &c->needs[i];
	qsort(cc->files, c->nfiles, sizeof *cc->files, file_cmp);
	qsort(cc->needs, c->nneeds, sizeof *cc->needs, need_cmp);
	/* Sorted, a duplicate sits beside its twin. */
	rv = KILN_EINVAL;
	for (size_t i = 1; i < c->nfiles; i++)
		if (file_cmp(&cc->files[i - 1], &cc->files[i]) == 0)
			goto fail;
	for (size_t i = 1; i < c->nneeds; i++)
		if (need_cmp(&cc->needs[i - 1], &cc->needs[i]) == 0)
			goto fail;
	return 0;
fail:
	canon_free(cc);
	return rv;
}

void
canon_free(struct canon *cc)
{
	free(cc->files);
	free(cc->needs);
	cc->files = NULL;
	cc->needs = NULL;
}

int
canon_same(const struct kiln_cache_candidate *a, const struct canon *ca,
           const struct kiln_cache_candidate *b, const struct canon *cb)
{
	if (a->nfiles != b->nfiles || a->nneeds != b->nneeds)
		return 0;
	for (size_t i = 0; i < a->nfiles; i++) {
		const struct kiln_cache_file *x = ca ? ca->files[i] : &a->files[i];
		const struct kiln_cache_file *y = cb ? cb->files[i] : &b->files[i];
		if (strcmp(x->path, y->path) != 0 || !x->present != !y->present ||
		    (x->present && memcmp(x->sha, y->sha, KILN_CACHE_SHA_LEN) != 0))
			return 0;
	}
	for (size_t i = 0; i < a->nneeds; i++) {
		const struct kiln_cache_need *x = ca ? ca->needs[i] : &a->needs[i];
		const struct kiln_cache_need *y = cb ? cb->needs[i] : &b->needs[i];
		if (need_cmp(&x, &y) != 0 || memcmp(x->sha, y->sha, KILN_CACHE_SHA_LEN) != 0)
			return 0;
	}
	return 1;
}

int
check_canonical(const ProtobufCMessage *m, const void *buf, size_t len)
{
	uint8_t *again;
	int same;

	if (protobuf_c_message_get_packed_size(m) != len)
		return KILN_ECORRUPT;
	if ((again = malloc(len ? len : 1)) == NULL)
		return KILN_ENOMEM;
	protobuf_c_message_pack(m, again);
	same = memcmp(again, buf, len) == 0;
	free(again);
	return same ? 0 : KILN_ECORRUPT;
}

int
check_sha(const ProtobufCBinaryData *b)
{
	return b->len == KILN_CACHE_SHA_LEN;
}

int
check_digest(const rx_digest *dg, struct kiln_cache_digest *d)
{
	if (dg == NULL || dg->base.n_unknown_fields != 0 || dg->size_bytes < 0)
		return 0;
	if (kiln_cache_unhex(dg->hash, d->sha) != 0)
		return 0;
	d->size = (uint64_t)dg->size_bytes;
	return 1;
}

int
check_meta(const rx_result *ar)
{
	const rx_meta *m = ar->execution_metadata;

	return m != NULL && m->base.n_unknown_fields == 0 &&
	       strcmp(m->worker, KILN_CACHE_WORKER) == 0;
}

int
result_unpack(const void *buf, size_t len, rx_result **ar)
{
	ProtobufCMessage *m;
	int rv;

	*ar = NULL;
	if (len == 0 || len > KILN_CACHE_ENTRY_MAX)
		return KILN_ECORRUPT;
	rv = kiln_proto_unpack_bounded(&rx_result_desc, buf, len, &m);
	if (rv != 0)
		return rv == KILN_ENOMEM ? rv : KILN_ECORRUPT;
	rv = check_canonical(m, buf, len);
	if (rv == 0 && (m->n_unknown_fields != 0 || ((rx_result *)m)->exit_code != 0 ||
	                !check_meta((rx_result *)m)))
		rv = KILN_ECORRUPT;
	if (rv != 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		return rv;
	}
	*ar = (rx_result *)m;
	return 0;
}

int
result_pack(rx_result *ar, uint8_t **buf, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(&ar->base);

	if (n > KILN_CACHE_ENTRY_MAX)
		return KILN_ERANGE;
	if ((*buf = malloc(n ? n : 1)) == NULL)
		return KILN_ENOMEM;
	*len = protobuf_c_message_pack(&ar->base, *buf);
	return 0;
}
