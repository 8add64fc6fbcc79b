/* keys.c — the AC keys of kiln's remote-cache entries (docs/cache.md,
 * "Keys") and the hex form of SHA-256s. The only file of cache/ that
 * includes OpenSSL: SHA-256 through its EVP API (libcrypto).
 *
 * Both keys start with a tag and a NUL, so kiln's entries never share a key
 * with Bazel's (the SHA-256 of an Action message) or with another layout
 * version's, even on one server. Every length in the result key is a
 * 4-byte big-endian count, so no two different candidates hash the same
 * bytes. */
#include <openssl/evp.h>
#include <string.h>

#include "entries_int.h"
#include "kiln_hex.h"

/* SHA-256 over the pieces fed with sha_put; ctx NULL once a step failed. */
struct sha {
	EVP_MD_CTX *ctx;
	int err;
};

static int
sha_begin(struct sha *h)
{
	h->err = 0;
	if ((h->ctx = EVP_MD_CTX_new()) == NULL)
		return KILN_ENOMEM;
	if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
		h->err = 1;
	return 0;
}

static void
sha_put(struct sha *h, const void *p, size_t n)
{
	if (!h->err && n > 0 && EVP_DigestUpdate(h->ctx, p, n) != 1)
		h->err = 1;
}

static void
sha_u32(struct sha *h, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

	sha_put(h, b, sizeof b);
}

/* A string as its length, then its bytes. */
static void
sha_str(struct sha *h, const char *s)
{
	size_t n = strlen(s);

	sha_u32(h, (uint32_t)n);
	sha_put(h, s, n);
}

/* Finish into out; frees the context. 0 or KILN_ENOMEM (OpenSSL failed:
 * its one way to fail here is an allocation). */
static int
sha_end(struct sha *h, uint8_t out[KILN_CACHE_SHA_LEN])
{
	unsigned int n = 0;

	if (!h->err && (EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != KILN_CACHE_SHA_LEN))
		h->err = 1;
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
	return h->err ? KILN_ENOMEM : 0;
}

int
kiln_cache_index_key(const void *action, size_t len, uint8_t key[KILN_CACHE_SHA_LEN])
{
	struct sha h;
	int rv;

	if (len == 0)
		return KILN_EINVAL;
	if ((rv = sha_begin(&h)) != 0)
		return rv;
	sha_put(&h, KILN_CACHE_INDEX_TAG, sizeof KILN_CACHE_INDEX_TAG); /* with NUL */
	sha_put(&h, action, len);
	return sha_end(&h, key);
}

int
kiln_cache_result_key(const void *action, size_t len, const struct kiln_cache_candidate *c,
                      uint8_t key[KILN_CACHE_SHA_LEN])
{
	struct canon cc;
	struct sha h;
	int rv;

	if (len == 0 || len > UINT32_MAX)
		return KILN_EINVAL;
	if ((rv = canon_make(c, &cc)) != 0)
		return rv;
	if ((rv = sha_begin(&h)) != 0)
		goto fail;
	sha_put(&h, KILN_CACHE_RESULT_TAG, sizeof KILN_CACHE_RESULT_TAG);
	sha_u32(&h, (uint32_t)len);
	sha_put(&h, action, len);
	sha_u32(&h, (uint32_t)c->nfiles);
	for (size_t i = 0; i < c->nfiles; i++) {
		uint8_t present = cc.files[i]->present ? 1 : 0;
		sha_str(&h, cc.files[i]->path);
		sha_put(&h, &present, 1);
		if (present)
			sha_put(&h, cc.files[i]->sha, KILN_CACHE_SHA_LEN);
	}
	sha_u32(&h, (uint32_t)c->nneeds);
	for (size_t i = 0; i < c->nneeds; i++) {
		sha_str(&h, cc.needs[i]->url);
		sha_str(&h, cc.needs[i]->output);
		sha_put(&h, cc.needs[i]->sha, KILN_CACHE_SHA_LEN);
	}
	rv = sha_end(&h, key);
fail:
	canon_free(&cc);
	return rv;
}

void
kiln_cache_hex(const uint8_t sha[KILN_CACHE_SHA_LEN], char hex[KILN_CACHE_HEX_LEN + 1])
{
	kiln_hex_encode(sha, KILN_CACHE_SHA_LEN, hex);
}


int
kiln_cache_unhex(const char *hex, uint8_t sha[KILN_CACHE_SHA_LEN])
{
	return kiln_hex_decode(hex, sha, KILN_CACHE_SHA_LEN, 1);
}
