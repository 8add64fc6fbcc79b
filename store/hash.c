/* hash.c — XXH3-128 content identity. The only file that includes xxhash.h:
 * swapping the hash function touches this file alone. It also hashes a
 * file with XXH3 and SHA-256 together in one read (kiln_id_sha256_of_fd), and
 * reads and writes both names in hex. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* Debian's libxxhash is built for baseline x86-64 (SSE2); its *_dispatch
 * entry points pick AVX2/AVX-512 at run time. This header redirects the
 * XXH3_128bits* calls below to them, so hashing runs as fast as
 * xxh128sum's own build (figures: docs/store.md, "Hashing"). */
#include <xxh_x86dispatch.h>
#endif

#include "kiln_hex.h"
#include "store_int.h"

struct kiln_hasher {
	XXH3_state_t *st;
};

/* XXH128_canonical_t is big-endian high64 then low64: the order xxh128sum
 * prints, so the bytes of kiln_id hex-encode to the familiar string. */
static void
id_from_hash(XXH128_hash_t h, kiln_id *id)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);
	memcpy(id->b, c.digest, sizeof id->b);
}

void
kiln_id_of_buf(const void *buf, size_t len, kiln_id *id)
{
	id_from_hash(XXH3_128bits(buf, len), id);
}

int
kiln_hasher_new(kiln_hasher **hp)
{
	kiln_hasher *h = malloc(sizeof *h);

	if (h == NULL)
		return KILN_ENOMEM;
	if ((h->st = XXH3_createState()) == NULL) {
		free(h);
		return KILN_ENOMEM;
	}
	XXH3_128bits_reset(h->st);
	*hp = h;
	return 0;
}

void
kiln_hasher_update(kiln_hasher *h, const void *buf, size_t len)
{
	XXH3_128bits_update(h->st, buf, len);
}

void
kiln_hasher_digest(const kiln_hasher *h, kiln_id *id)
{
	id_from_hash(XXH3_128bits_digest(h->st), id);
}

void
kiln_hasher_reset(kiln_hasher *h)
{
	XXH3_128bits_reset(h->st);
}

void
kiln_hasher_free(kiln_hasher *h)
{
	if (h == NULL)
		return;
	XXH3_freeState(h->st);
	free(h);
}

/* Large reads amortise the syscall; 1 MiB stays in L2 on this machine. */
#define HASH_CHUNK (1u << 20)
#define HASH_SMALL (16u << 10)

/* The XXH3-128 of what fd holds from its offset to its end, and with sha
 * non-NULL its SHA-256, in one read. Most files a build hashes (sources,
 * outputs, logs) end within the first HASH_SMALL bytes: hashed from the
 * stack in one call, with no state or buffer allocated (a 1 MiB malloc
 * is an mmap and munmap). */
static int
hash_fd(int fd, kiln_id *id, uint8_t *sha, uint64_t *size)
{
	char small[HASH_SMALL], *buf = NULL;
	XXH3_state_t *st = NULL;
	store_sha *sh = NULL;
	uint64_t total = 0;
	size_t have = 0;
	int rv = 0;

	while (have < sizeof small) {
		ssize_t n = read(fd, small + have, sizeof small - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_err_from_errno(errno);
		if (n == 0) {
			id_from_hash(XXH3_128bits(small, have), id);
			if (size != NULL)
				*size = have;
			return sha != NULL ? store_sha_of_buf(small, have, sha) : 0;
		}
		have += (size_t)n;
	}
	if ((st = XXH3_createState()) == NULL || (buf = malloc(HASH_CHUNK)) == NULL ||
	    (sha != NULL && store_sha_new(&sh) != 0)) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	XXH3_128bits_reset(st);
	for (ssize_t n = (ssize_t)have; n != 0; n = read(fd, buf, HASH_CHUNK)) {
		/* the first round is the stack's bytes, then the buffer's */
		const char *p = total == 0 ? small : buf;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rv = kiln_err_from_errno(errno);
			goto fail;
		}
		XXH3_128bits_update(st, p, (size_t)n);
		if (sh != NULL)
			store_sha_update(sh, p, (size_t)n);
		total += (uint64_t)n;
	}
	if (sh != NULL && (rv = store_sha_final(sh, sha)) != 0)
		goto fail;
	id_from_hash(XXH3_128bits_digest(st), id);
	if (size != NULL)
		*size = total;
fail:
	free(buf);
	store_sha_free(sh);
	XXH3_freeState(st);
	return rv;
}

int
kiln_id_of_fd(int fd, kiln_id *id, uint64_t *size)
{
	return hash_fd(fd, id, NULL, size);
}

int
kiln_id_sha256_of_fd(int fd, kiln_id *id, uint8_t sha[KILN_SHA256_LEN], uint64_t *size)
{
	return hash_fd(fd, id, sha, size);
}

void
kiln_id_to_hex(const kiln_id *id, char hex[KILN_ID_HEX_LEN + 1])
{
	kiln_hex_encode(id->b, sizeof id->b, hex);
}


int
kiln_id_from_hex(const char *hex, kiln_id *id)
{
	return kiln_hex_decode(hex, id->b, sizeof id->b, 0);
}

void
kiln_sha256_to_hex(const uint8_t sha[KILN_SHA256_LEN], char hex[KILN_SHA256_HEX_LEN + 1])
{
	kiln_hex_encode(sha, KILN_SHA256_LEN, hex);
}

int
kiln_sha256_from_hex(const char *hex, uint8_t sha[KILN_SHA256_LEN])
{
	return kiln_hex_decode(hex, sha, KILN_SHA256_LEN, 0);
}

int
kiln_id_cmp(const kiln_id *a, const kiln_id *b)
{
	return memcmp(a->b, b->b, sizeof a->b);
}
