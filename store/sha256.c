/* sha256.c — SHA-256 through OpenSSL's EVP API (libcrypto): the second
 * name every blob gets, the one remote caches use (Bazel's HTTP cache, the
 * remote-execution API: lowercase 64-hex). The only file that includes an
 * OpenSSL header: swapping the implementation touches this file alone.
 *
 * Blob bytes are hashed with both XXH3-128 and SHA-256 in the one pass that
 * brings them into the store (blob.c, hash.c's kiln_id_sha256_of_fd); nothing
 * reads a file twice for its SHA-256. OpenSSL picks the SHA-NI code path
 * at run time (~0.6 s/GiB here, against XXH3's ~0.03).
 *
 * Threads: the fetched algorithm is made once (pthread_once) and shared;
 * a store_sha belongs to one thread at a time. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>

#include "store_int.h"

struct store_sha {
	EVP_MD_CTX *ctx;
	int err; /* an EVP call failed: final reports it */
};

/* OpenSSL 3 looks the implementation up on every init given the legacy
 * EVP_sha256() object (a lock and a hash-table search per blob); an
 * explicitly fetched one is looked up once. */
static EVP_MD *sha_md;
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

static void
sha_fetch(void)
{
	sha_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *
sha_algo(void)
{
	pthread_once(&sha_once, sha_fetch);
	return sha_md != NULL ? sha_md : EVP_sha256();
}

int
store_sha_new(store_sha **hp)
{
	store_sha *h = calloc(1, sizeof *h);

	if (h == NULL)
		return KILN_ENOMEM;
	if ((h->ctx = EVP_MD_CTX_new()) == NULL) {
		free(h);
		return KILN_ENOMEM;
	}
	if (EVP_DigestInit_ex(h->ctx, sha_algo(), NULL) != 1) {
		store_sha_free(h);
		return KILN_ENOMEM;
	}
	*hp = h;
	return 0;
}

void
store_sha_update(store_sha *h, const void *buf, size_t len)
{
	if (len > 0 && !h->err && EVP_DigestUpdate(h->ctx, buf, len) != 1)
		h->err = 1;
}

int
store_sha_final(store_sha *h, uint8_t out[KILN_SHA256_LEN])
{
	unsigned n = 0;

	if (h->err || EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != KILN_SHA256_LEN)
		return KILN_ENOMEM;   /* EVP fails only when it cannot allocate */
	return 0;
}

void
store_sha_free(store_sha *h)
{
	if (h == NULL)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

int
store_sha_of_buf(const void *buf, size_t len, uint8_t out[KILN_SHA256_LEN])
{
	unsigned n = 0;

	if (EVP_Digest(buf, len, out, &n, sha_algo(), NULL) != 1 || n != KILN_SHA256_LEN)
		return KILN_ENOMEM;
	return 0;
}
