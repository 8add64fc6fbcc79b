/* entries_int.h — what the entry files of cache/ (keys, check, index, result, sign) share: short names for the
 * generated messages, the rules of the layout (check.c) and SHA-256
 * (keys.c; sign.c's HMAC is the other use of OpenSSL). */
#ifndef KILN_CACHE_ENTRIES_INT_H
#define KILN_CACHE_ENTRIES_INT_H

#include "cache_entries.h"
#include "kiln_cache.pb-c.h"
#include "kiln_error.h"
#include "kiln_proto.h"
#include "reapi.pb-c.h"

typedef Build__Bazel__Remote__Execution__V2__ActionResult rx_result;
typedef Build__Bazel__Remote__Execution__V2__OutputFile rx_file;
typedef Build__Bazel__Remote__Execution__V2__Digest rx_digest;
typedef Build__Bazel__Remote__Execution__V2__ExecutedActionMetadata rx_meta;
#define rx_result_desc build__bazel__remote__execution__v2__action_result__descriptor

/* A candidate's conditions in canonical order (pointers into the
 * candidate's own arrays): files by path, needs by (url, output). */
struct canon {
	const struct kiln_cache_file **files;
	const struct kiln_cache_need **needs;
};

/* Check c against the layout's rules and limits and sort its conditions
 * into *cc (free with canon_free). 0, KILN_EINVAL (a bad path or string, a
 * duplicate), KILN_ERANGE (a count or length past its limit) or
 * KILN_ENOMEM. */
int canon_make(const struct kiln_cache_candidate *c, struct canon *cc);
void canon_free(struct canon *cc);

/* Whether a and b have the same conditions, each in the order of its
 * canon (ca, cb), or NULL when its own arrays are in canonical order. */
int canon_same(const struct kiln_cache_candidate *a, const struct canon *ca,
               const struct kiln_cache_candidate *b, const struct canon *cb);

/* Whether s is an output's name: a relative path of at most
 * KILN_CACHE_STR_MAX bytes, no empty, "." or ".." component, no control
 * character. */
int check_output_name(const char *s);

/* Whether s is a non-empty string of at most KILN_CACHE_STR_MAX bytes
 * without control characters. */
int check_str(const char *s);

/* 0 when m packs to exactly the len bytes at buf (canonical form: fields
 * in order, no duplicate, no default value written); else KILN_ECORRUPT,
 * or KILN_ENOMEM. */
int check_canonical(const ProtobufCMessage *m, const void *buf, size_t len);

/* Whether a REAPI digest is a SHA-256 one (64 lowercase hex, size >= 0)
 * without unknown fields; its bytes into *d. */
int check_digest(const rx_digest *dg, struct kiln_cache_digest *d);

/* Whether an ActionResult ends with kiln's metadata (worker "kiln", no
 * other field). Field 9 is the last one kiln writes, so an entry cut short
 * at a field boundary, which protobuf would still parse, lacks it. */
int check_meta(const rx_result *ar);

/* Decode an ActionResult entry of kiln's: length, budget, canonical form,
 * exit code 0, kiln's metadata last, no unknown top-level field. 0, KILN_ECORRUPT or
 * KILN_ENOMEM. */
int result_unpack(const void *buf, size_t len, rx_result **ar);

/* Pack an ActionResult into a malloc'd buffer, refusing one past
 * KILN_CACHE_ENTRY_MAX. 0, KILN_ERANGE or KILN_ENOMEM. */
int result_pack(rx_result *ar, uint8_t **buf, size_t *len);

/* A binary field of 32 bytes. */
int check_sha(const ProtobufCBinaryData *b);

#endif
