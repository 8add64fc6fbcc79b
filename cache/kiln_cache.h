/* kiln_cache.h — a client for Bazel's HTTP remote-cache protocol
 * (libkilncache.a).
 *
 * A shared cache is any HTTP/1.1 server that answers GET, HEAD and PUT on
 * BASE/cas/<sha256 hex> (blobs) and BASE/ac/<sha256 hex> (action results):
 * nginx with its dav module, bazel-remote, Apache mod_dav. A miss is a 404;
 * any 2xx answers a PUT. This library is only the transport: it does not
 * hash, verify or interpret what it moves (nginx verifies nothing, so the
 * caller checks every downloaded blob against its key).
 *
 * One handle owns one thread and one libcurl multi handle: every transfer
 * of the handle runs there, so connections are kept alive and reused
 * between calls, and calls from several threads run at once (up to
 * max_parallel connections). The calls below may be made from any thread.
 *
 * The cache being down or slow must never stall a build: transfers have
 * short timeouts, and a circuit breaker answers every lookup as a miss at
 * once, without connecting, for a while after repeated failures
 * (docs/cache-http.md). Uploads can go through a bounded background queue
 * that never blocks its caller. Only this folder includes curl.h. */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_cache kiln_cache;

/* Which half of the cache a key names: BASE/cas/<hex> or BASE/ac/<hex>. */
enum kiln_cache_kind {
	KILN_CACHE_CAS = 0,
	KILN_CACHE_AC = 1,
};

/* How to reach the server. Zero fields take the defaults in brackets
 * (docs/cache-http.md says why each is what it is). Strings are copied by
 * kiln_cache_open; the struct may go away after it returns. */
typedef struct kiln_cache_config {
	/* "http://host[:port][/path]" or "https://...": the BASE above. No
	 * user:password@ (credentials come from files), query or fragment. */
	const char *url;
	/* Set: every put is refused with KILN_EREADONLY and nothing is sent
	 * (artists read, CI writes). */
	int read_only;
	/* A file holding "user:password" for HTTP Basic, or a bearer token
	 * (sent as "Authorization: Bearer <token>"). At most one of the two.
	 * The file must not be readable or writable by others (mode & 007 ==
	 * 0), like ssh's keys: KILN_EACCES otherwise. One line; a trailing
	 * newline is ignored. */
	const char *basic_auth_file;
	const char *bearer_token_file;
	/* A CA bundle for https servers with a private CA [system store]. */
	const char *ca_file;
	/* A file holding the secret that signs and checks AC entries
	 * (docs/cache.md, "Signed entries"): one line of at least 32 and at
	 * most 4096 printable characters (openssl rand -hex 32), a trailing
	 * newline ignored, mode & 007 == 0 like the credential files. With
	 * it, kiln_cache_sign signs and kiln_cache_verify refuses what is not
	 * signed with it [none: neither]. */
	const char *sign_key_file;
	/* Where kiln_cache_open writes, when it fails, a sentence naming the
	 * file or setting at fault (NULL: nowhere). */
	char *err;
	size_t errlen;
	long connect_timeout_ms; /* [2000] to set up a connection */
	long timeout_ms;         /* [120000] a whole transfer, however big */
	long stall_ms;           /* [10000] below 1 KiB/s this long: give up */
	unsigned max_parallel;   /* [4] connections (and transfers) at once */
	/* The background upload queue: uploads waiting to start, and bytes of
	 * the buffers it holds copies of [1024 uploads, 64 MiB]. */
	unsigned queue_max;
	uint64_t queue_max_bytes;
	/* The circuit breaker: opens after this many consecutive failures
	 * (connection refused, timeout, 5xx) [5], for open_ms [30000],
	 * doubling each time it reopens up to max_ms [600000]. */
	unsigned breaker_failures;
	long breaker_open_ms;
	long breaker_max_ms;
} kiln_cache_config;

/* Counters since open, for `kiln status`. */
typedef struct kiln_cache_stats {
	uint64_t hits;          /* GET or HEAD answered 200 */
	uint64_t misses;        /* GET or HEAD answered 404 */
	uint64_t skipped;       /* answered as a miss: the breaker was open */
	uint64_t errors;        /* transfers that failed (any method) */
	uint64_t uploads;       /* PUTs answered 2xx */
	uint64_t dropped;       /* queued uploads never sent (queue full,
	                         * breaker open, handle closed) */
	uint64_t bytes_down;    /* body bytes received */
	uint64_t bytes_up;      /* body bytes sent in PUTs that succeeded */
	uint64_t connects;      /* TCP connections opened (keep-alive reuse
	                         * keeps this low) */
	uint64_t present;       /* uploads not sent: a HEAD found the entry,
	                         * of that size (kiln_cache_put_missing_async_fd) */
	uint64_t breaker_opens; /* times the breaker opened */
	int breaker_open;       /* 1 while it is open */
	unsigned queued;        /* uploads waiting or in flight now */
} kiln_cache_stats;

/* Receives a downloaded body in pieces, in order, on the handle's thread
 * (so it must not call back into the handle). Returns 0 to go on, or a
 * KILN_E* code that stops the transfer and becomes the call's result. A
 * transfer that fails after some pieces were delivered has delivered a
 * partial body: the caller discards what it got unless the call returns 0. */
typedef int (*kiln_cache_sink_fn)(void *arg, const void *data, size_t len);

/* Check cfg (the URL's form, the credential files) and start the handle's
 * thread. Nothing is sent yet. On success *c is the handle, to close with
 * kiln_cache_close. Returns 0, KILN_EINVAL (a malformed URL or file),
 * KILN_EACCES (a credential file others can read), KILN_ENOTFOUND (a
 * missing credential file), KILN_ENOMEM or KILN_EIO. */
int kiln_cache_open(const kiln_cache_config *cfg, kiln_cache **c);

/* Sign the AC entry *buf (len *len) for the key ackey with the handle's
 * sign_key_file: *buf is replaced by a malloc'd signed copy (the old one
 * freed). Without a key, nothing changes. 0, KILN_ERANGE or KILN_ENOMEM. */
int kiln_cache_sign(kiln_cache *c, const uint8_t ackey[32], uint8_t **buf, size_t *len);

/* Whether an AC entry fetched from ac/<ackey> may be used: 0 when the
 * handle has no key, or the entry is signed with it for ackey;
 * KILN_ECORRUPT otherwise (treat it as a corrupt entry), or KILN_ENOMEM. */
int kiln_cache_verify(kiln_cache *c, const uint8_t ackey[32], const void *buf, size_t len);

/* Whether the handle has a signing key. */
int kiln_cache_signs(const kiln_cache *c);

/* Stop the thread: uploads still queued are dropped (counted), transfers
 * in flight are cut. Call kiln_cache_flush first to let uploads finish.
 * No other call on c may be running. NULL is ignored. */
void kiln_cache_close(kiln_cache *c);

/* 0 when hex is exactly 64 lowercase hex digits (a SHA-256, as the
 * protocol and bazel-remote require), KILN_EINVAL otherwise. Every call
 * below checks its key with it before building a URL. */
int kiln_cache_check_key(const char *hex);

/* Download the entry of kind and key hex into sink, refusing a body longer
 * than max_bytes (whatever the server claims); *size (may be NULL) gets
 * the body's length. Returns 0; KILN_ENOTFOUND for a miss (404, or at
 * once while the breaker is open); KILN_ERANGE past max_bytes; KILN_EAUTH
 * when the server refuses the credentials (401, 403); KILN_ETIMEDOUT;
 * KILN_EIO (no connection, 5xx); KILN_EPROTO (another status, e.g. a
 * redirect, which is never followed); KILN_EINVAL for a bad key; or the
 * sink's code. */
int kiln_cache_get(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                   uint64_t max_bytes, kiln_cache_sink_fn sink, void *arg,
                   uint64_t *size);

/* kiln_cache_get writing the body to fd at its current offset. On failure
 * part of a body may have been written. */
int kiln_cache_get_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                      uint64_t max_bytes, int fd, uint64_t *size);

/* Whether the server has the entry: 0 with *size (may be NULL) its length
 * as the server says, or the codes of kiln_cache_get. */
int kiln_cache_head(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                    uint64_t *size);

/* Upload len bytes of buf as the entry, waiting for the answer. Returns 0
 * on any 2xx; KILN_EREADONLY (read-only: nothing sent); KILN_EBUSY at once
 * while the breaker is open; KILN_ERANGE (413); or the codes of
 * kiln_cache_get. buf is only read during the call. */
int kiln_cache_put(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                   const void *buf, size_t len);

/* kiln_cache_put of the whole file open at fd (read with pread from
 * offset 0 to its size now; the fd's offset is not used). */
int kiln_cache_put_fd(kiln_cache *c, enum kiln_cache_kind kind,
                      const char *hex, int fd);

/* Queue an upload for the handle's thread and return at once; the outcome
 * is only counted (uploads, errors, dropped). The buffer is copied; the fd
 * is duplicated (the caller may close its own) and read when the upload
 * starts. An AC upload starts only after every CAS upload queued before it
 * has finished, so an action result never names blobs still on their way.
 * Returns 0 when queued; KILN_EREADONLY (read-only); KILN_EBUSY when the
 * queue is full (the upload is dropped and counted); KILN_EINVAL,
 * KILN_ENOMEM, KILN_EIO. */
int kiln_cache_put_async(kiln_cache *c, enum kiln_cache_kind kind,
                         const char *hex, const void *buf, size_t len);
int kiln_cache_put_async_fd(kiln_cache *c, enum kiln_cache_kind kind,
                            const char *hex, int fd);

/* kiln_cache_put_async_fd, but asking first: when its turn comes, a HEAD,
 * and no PUT if the server answers 200 with the file's size (counted in
 * `present`, not in `uploads`). Any other answer (a 404, another size)
 * goes on with the PUT; a failed HEAD fails the upload as a failed PUT
 * would. Meant for CAS blobs, whose key is the SHA-256 of their bytes: a
 * server that checks what it stores (bazel-remote) has the right bytes
 * under the key; one that does not (nginx) may keep a corrupt blob of
 * the right size, which the caller repairs with a plain put. */
int kiln_cache_put_missing_async_fd(kiln_cache *c, enum kiln_cache_kind kind,
                                    const char *hex, int fd);

/* Wait until the upload queue is empty and no upload is in flight, or
 * timeout_ms passes (< 0: no limit). Returns 0 or KILN_ETIMEDOUT. */
int kiln_cache_flush(kiln_cache *c, long timeout_ms);

/* Copy the counters into *st. */
void kiln_cache_stats_get(kiln_cache *c, kiln_cache_stats *st);

#ifdef __cplusplus
}
#endif

#endif
