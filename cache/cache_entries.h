/* cache_entries.h — kiln's entries in a shared remote cache that speaks
 * Bazel's HTTP cache protocol (GET/PUT/HEAD BASE/ac/<64 hex>,
 * BASE/cas/<64 hex>): their keys, encoding and validation. docs/cache.md
 * is the layout's reference; this header is its C face.
 *
 * One kiln action key has a first-level AC entry, the *index*: an REAPI
 * ActionResult whose stdout_raw holds the candidate results of the key,
 * each by the content of the files its run discovered and the step
 * outputs it needed. Each candidate has a second-level AC entry, the
 * *result*: an ActionResult listing its outputs as OutputFiles (path = the
 * output's name, digest = the blob's SHA-256 and size) and its log as
 * stdout_digest. The remote side sees SHA-256 digests only; the caller
 * computes them (the store keeps one per blob).
 *
 * This library (libkilncache.a) does no I/O, never prints and never exits.
 * Decoding takes untrusted bytes: anything outside the layout or its
 * limits is KILN_ECORRUPT, which a caller treats as a miss. Every function
 * returns 0 or a negative KILN_E* code unless it says otherwise, and is
 * reentrant. */
#ifndef KILN_CACHE_ENTRIES_H
#define KILN_CACHE_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

/* A SHA-256: 32 bytes, on the wire 64 lowercase hex characters. */
#define KILN_CACHE_SHA_LEN 32
#define KILN_CACHE_HEX_LEN 64

/* Limits (docs/cache.md, "Limits"); an entry past any of them is refused
 * by the encoder (KILN_ERANGE) and the decoder (KILN_ECORRUPT). */
#define KILN_CACHE_ENTRY_MAX (2u << 20)  /* bytes of one AC entry */
#define KILN_CACHE_CANDIDATES_MAX 8      /* candidates per index */
#define KILN_CACHE_FILES_MAX 8192        /* discovered files per candidate */
#define KILN_CACHE_NEEDS_MAX 1024        /* needed outputs per candidate */
#define KILN_CACHE_WARNINGS_MAX 33       /* warnings per candidate */
#define KILN_CACHE_OUTPUTS_MAX 4096      /* outputs per result */
#define KILN_CACHE_STR_MAX 4096          /* bytes of a path, URL, name, warning */

/* The version written into an index, and the tags hashed into keys: a
 * layout an older reader would misread changes all three (docs/cache.md). */
#define KILN_CACHE_INDEX_VERSION 1
#define KILN_CACHE_INDEX_TAG "kiln.cache.index.v1"
#define KILN_CACHE_RESULT_TAG "kiln.cache.result.v1"

/* What ActionResult.execution_metadata.worker says in kiln's entries; a
 * decoder requires it (the last field: an entry cut short lacks it). */
#define KILN_CACHE_WORKER "kiln"

/* A discovered file: a project-relative path ("dir/" or "./" for a
 * listing) or a clean absolute one, and its content's SHA-256, unless the
 * file did not exist (present 0). */
struct kiln_cache_file {
	const char *path;
	int present;
	uint8_t sha[KILN_CACHE_SHA_LEN];
};

/* A step output the run asked for with `kiln need`: step URL, output name,
 * and the SHA-256 of the blob it was handed. */
struct kiln_cache_need {
	const char *url;
	const char *output;
	uint8_t sha[KILN_CACHE_SHA_LEN];
};

/* One candidate result of an action key: the conditions under which it
 * holds (files, needs: in any order to the encoder, sorted by path and by
 * (url, output) as decoded) and what kiln records of its run. */
struct kiln_cache_candidate {
	const struct kiln_cache_file *files;
	size_t nfiles;
	const struct kiln_cache_need *needs;
	size_t nneeds;
	int traced;
	uint64_t duration_ns;
	const char *const *warnings;
	size_t nwarnings;
};

/* A decoded index: candidates newest first. Everything it points to
 * belongs to it until kiln_cache_index_free. */
struct kiln_cache_index {
	size_t ncandidates;
	struct kiln_cache_candidate *candidates;
	void *priv;
};

/* A blob on the remote side: SHA-256 and length. */
struct kiln_cache_digest {
	uint8_t sha[KILN_CACHE_SHA_LEN];
	uint64_t size;            /* at most INT64_MAX (REAPI's int64) */
};

/* One output of a result: its name in the step (the OutputFile's path) and
 * its blob. */
struct kiln_cache_output {
	const char *name;
	struct kiln_cache_digest blob;
	int executable;
};

/* A second-level entry: the outputs (in the order given), and the run's
 * log when has_log. A decoded one owns its strings until
 * kiln_cache_result_free. */
struct kiln_cache_result {
	const struct kiln_cache_output *outputs;
	size_t noutputs;
	int has_log;
	struct kiln_cache_digest log;
	void *priv;
};

/* ---- keys ---------------------------------------------------------------- */

/* The first-level key of an action: SHA-256(KILN_CACHE_INDEX_TAG, NUL,
 * action). action is kiln's action key, any len > 0 bytes. Returns 0,
 * KILN_EINVAL (len 0) or KILN_ENOMEM. */
int kiln_cache_index_key(const void *action, size_t len,
                         uint8_t key[KILN_CACHE_SHA_LEN]);

/* The second-level key of candidate c of an action: SHA-256 of the tag,
 * the action and c's conditions in canonical order (docs/cache.md, "The
 * result key"). Only files and needs count. Returns 0, KILN_EINVAL (len 0,
 * or c breaks a rule of the layout: a bad path, a duplicate), KILN_ERANGE
 * (a limit) or KILN_ENOMEM. */
int kiln_cache_result_key(const void *action, size_t len,
                          const struct kiln_cache_candidate *c,
                          uint8_t key[KILN_CACHE_SHA_LEN]);

/* Write the 64 lowercase hex characters of sha and a NUL into hex. */
void kiln_cache_hex(const uint8_t sha[KILN_CACHE_SHA_LEN],
                    char hex[KILN_CACHE_HEX_LEN + 1]);

/* Parse exactly 64 lowercase hex characters followed by NUL (the only form
 * an REAPI digest or a Bazel cache key takes). Returns 0 or KILN_EINVAL. */
int kiln_cache_unhex(const char *hex, uint8_t sha[KILN_CACHE_SHA_LEN]);

/* ---- first level: the index ---------------------------------------------- */

/* Encode the index entry listing c[0..n) (newest first) into a malloc'd
 * *buf of *len bytes, to PUT at ac/<index key>. Returns 0, KILN_EINVAL (n
 * is 0, a candidate breaks a rule of the layout, two share their
 * conditions), KILN_ERANGE (a limit, or the entry would pass
 * KILN_CACHE_ENTRY_MAX) or KILN_ENOMEM. */
int kiln_cache_index_encode(const struct kiln_cache_candidate *c, size_t n,
                            uint8_t **buf, size_t *len);

/* Decode an index entry fetched from ac/<index key>. Returns 0 with *out
 * set (free with kiln_cache_index_free), KILN_ECORRUPT (not an index entry
 * of this layout: malformed, not canonical, an unknown field, a bad path or
 * digest, a limit passed) or KILN_ENOMEM. */
int kiln_cache_index_decode(const void *buf, size_t len,
                            struct kiln_cache_index **out);
void kiln_cache_index_free(struct kiln_cache_index *ix);

/* The index to PUT after a run produced candidate add: add first, then the
 * candidates of old (NULL: none, e.g. the fetched entry was a miss or
 * KILN_ECORRUPT) in their order, without those whose conditions equal
 * add's (the same variant run again), at most KILN_CACHE_CANDIDATES_MAX,
 * dropping the oldest while the entry would pass KILN_CACHE_ENTRY_MAX.
 * Returns what kiln_cache_index_encode returns for add alone. */
int kiln_cache_index_merge(const struct kiln_cache_index *old,
                           const struct kiln_cache_candidate *add,
                           uint8_t **buf, size_t *len);

/* ---- second level: a result ---------------------------------------------- */

/* Encode r into a malloc'd *buf of *len bytes, to PUT at ac/<result key>
 * once every blob it names is in the CAS. Returns 0, KILN_EINVAL (a bad or
 * duplicate output name, a size past INT64_MAX), KILN_ERANGE (a limit) or
 * KILN_ENOMEM. */
int kiln_cache_result_encode(const struct kiln_cache_result *r, uint8_t **buf,
                             size_t *len);

/* Decode a result entry fetched from ac/<result key>. Returns 0 with *out
 * set (free with kiln_cache_result_free), KILN_ECORRUPT or KILN_ENOMEM. */
int kiln_cache_result_decode(const void *buf, size_t len,
                             struct kiln_cache_result **out);
void kiln_cache_result_free(struct kiln_cache_result *r);

/* ---- signatures (cache/sign.c; docs/cache.md, "Signed entries") ---------- */

/* A signed entry is the unsigned one followed by the ActionResult field
 * kiln_signature (1001): 3 bytes of tag and length, then an HMAC-SHA256
 * over a tag, the entry's AC key and the unsigned entry. A reader without
 * a key decodes a signed entry like any other (the field is known and
 * ignored). Keys are the secret's bytes, at least KILN_CACHE_SIGN_KEY_MIN
 * of them (openssl rand -hex 32 makes 64). */
#define KILN_CACHE_SIG_LEN 32
#define KILN_CACHE_SIG_TRAILER (3 + KILN_CACHE_SIG_LEN)
#define KILN_CACHE_SIGN_KEY_MIN 32
#define KILN_CACHE_SIGN_KEY_MAX 4096

/* The entry buf (len bytes, as an encoder made it: never signed already)
 * signed with key k for AC key ackey, into a malloc'd *out of *outlen
 * bytes. Returns 0, KILN_EINVAL (a key of a bad length, len 0),
 * KILN_ERANGE (the signed entry would pass KILN_CACHE_ENTRY_MAX) or
 * KILN_ENOMEM. */
int kiln_cache_entry_sign(const void *k, size_t klen, const uint8_t ackey[KILN_CACHE_SHA_LEN],
                          const void *buf, size_t len, uint8_t **out, size_t *outlen);

/* 0 when buf, fetched from ac/<ackey>, ends with a signature that key k
 * made for ackey and the bytes before it; KILN_ECORRUPT when it is
 * unsigned or the signature does not match (someone without the key wrote
 * it, or moved it from another key); KILN_EINVAL (a key of a bad length)
 * or KILN_ENOMEM. Compares in constant time. */
int kiln_cache_entry_verify(const void *k, size_t klen, const uint8_t ackey[KILN_CACHE_SHA_LEN],
                            const void *buf, size_t len);

#endif
