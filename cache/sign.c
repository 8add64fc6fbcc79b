/* sign.c — signed AC entries (docs/cache.md, "Signed entries"): an
 * HMAC-SHA256, keyed with the secret of a sign_key_file, over the entry's
 * AC key and its bytes, appended to the entry as the ActionResult field
 * kiln_signature (1001, proto/reapi.proto).
 *
 * Why the AC key is in the MAC: without it a valid entry could be copied
 * under another key (one action's result served for another's). Why bytes
 * rather than a decoded message: the entries are canonical (check.c), so
 * the unsigned entry is exactly the signed one without its last 35 bytes,
 * and the MAC needs no second encoding to agree with the writer's.
 *
 * Everything here is pure (no I/O); OpenSSL's EVP_MAC does the HMAC. */
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>

#include "entries_int.h"

/* What the MAC covers first: a tag, so that the key can never make a MAC
 * that means something in another of kiln's formats. */
#define SIGN_TAG "kiln.cache.sign.v1"

/* Field 1001, wire type 2 (length-delimited), as a varint: 8010. */
static const uint8_t trailer_head[3] = {0xca, 0x3e, KILN_CACHE_SIG_LEN};

static int
mac_of(const void *k, size_t klen, const uint8_t ackey[KILN_CACHE_SHA_LEN],
       const void *buf, size_t len, uint8_t mac[KILN_CACHE_SIG_LEN])
{
	OSSL_PARAM params[2];
	EVP_MAC *hmac;
	EVP_MAC_CTX *ctx = NULL;
	size_t out = 0;
	int ok = 0;

	if ((hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL)
		return KILN_ENOMEM;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((ctx = EVP_MAC_CTX_new(hmac)) != NULL)
		ok = EVP_MAC_init(ctx, k, klen, params) == 1 &&
		     EVP_MAC_update(ctx, (const uint8_t *)SIGN_TAG, sizeof SIGN_TAG) == 1 &&
		     EVP_MAC_update(ctx, ackey, KILN_CACHE_SHA_LEN) == 1 &&
		     EVP_MAC_update(ctx, buf, len) == 1 &&
		     EVP_MAC_final(ctx, mac, &out, KILN_CACHE_SIG_LEN) == 1 &&
		     out == KILN_CACHE_SIG_LEN;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(hmac);
	return ok ? 0 : KILN_ENOMEM;
}

static int
key_ok(const void *k, size_t klen)
{
	return k != NULL && klen >= KILN_CACHE_SIGN_KEY_MIN && klen <= KILN_CACHE_SIGN_KEY_MAX;
}

int
kiln_cache_entry_sign(const void *k, size_t klen, const uint8_t ackey[KILN_CACHE_SHA_LEN],
                      const void *buf, size_t len, uint8_t **out, size_t *outlen)
{
	uint8_t *p;
	int rv;

	*out = NULL;
	if (!key_ok(k, klen) || len == 0)
		return KILN_EINVAL;
	if (len > KILN_CACHE_ENTRY_MAX - KILN_CACHE_SIG_TRAILER)
		return KILN_ERANGE;
	if ((p = malloc(len + KILN_CACHE_SIG_TRAILER)) == NULL)
		return KILN_ENOMEM;
	memcpy(p, buf, len);
	memcpy(p + len, trailer_head, sizeof trailer_head);
	if ((rv = mac_of(k, klen, ackey, buf, len, p + len + sizeof trailer_head)) != 0) {
		free(p);
		return rv;
	}
	*out = p;
	*outlen = len + KILN_CACHE_SIG_TRAILER;
	return 0;
}

int
kiln_cache_entry_verify(const void *k, size_t klen, const uint8_t ackey[KILN_CACHE_SHA_LEN],
                        const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint8_t mac[KILN_CACHE_SIG_LEN];
	size_t body;
	int rv;

	if (!key_ok(k, klen))
		return KILN_EINVAL;
	/* unsigned, or signed as kiln never signs: both untrusted */
	if (len <= KILN_CACHE_SIG_TRAILER || len > KILN_CACHE_ENTRY_MAX)
		return KILN_ECORRUPT;
	body = len - KILN_CACHE_SIG_TRAILER;
	if (memcmp(b + body, trailer_head, sizeof trailer_head) != 0)
		return KILN_ECORRUPT;
	if ((rv = mac_of(k, klen, ackey, b, body, mac)) != 0)
		return rv;
	rv = CRYPTO_memcmp(mac, b + body + sizeof trailer_head, KILN_CACHE_SIG_LEN) == 0
	     ? 0 : KILN_ECORRUPT;
	OPENSSL_cleanse(mac, sizeof mac);
	return rv;
}
