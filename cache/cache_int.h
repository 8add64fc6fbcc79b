/* cache_int.h — what the files of cache/ share: the handle, one transfer,
 * and the functions between them. Not installed, not included outside
 * cache/.
 *
 * Threads: the handle's own thread (transfer.c's cache_loop) owns the
 * multi handle and every easy handle, and is the only one that calls
 * libcurl after open. Callers' threads only touch the lists, counters and
 * breaker under c->mu, and wake the loop with curl_multi_wakeup (which
 * libcurl allows from any thread). */
#ifndef KILN_CACHE_INT_H
#define KILN_CACHE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <curl/curl.h>

#include "curl_lib.h"

#include "kiln_cache.h"

enum xfer_op { XFER_GET, XFER_HEAD, XFER_PUT };

/* One HTTP request from start to answer. A caller that waits owns it (on
 * its stack or heap) and sleeps on c->done_cv until done; a background
 * upload is owned by the handle and freed when it ends. */
struct xfer {
	struct xfer *next;
	enum xfer_op op;
	enum kiln_cache_kind kind;
	char url[2048 + 80];
	int background;     /* a queued upload */
	uint64_t seq;       /* queue order, for "AC after earlier CAS" */
	CURL *easy;

	/* GET: where the body goes and how much of it is allowed. */
	kiln_cache_sink_fn sink;
	void *sink_arg;
	uint64_t max_bytes;
	uint64_t got;
	int too_big;        /* the body passed max_bytes */
	int sink_rc;        /* the sink's code, when it stopped the transfer */
	uint64_t discarded; /* bytes of an error page thrown away */

	/* PUT: the body, from buf or by pread from fd. */
	const unsigned char *buf;
	unsigned char *owned; /* background copy of buf, freed at the end */
	int fd;               /* -1, or the fd to pread; owned when background */
	uint64_t len;
	uint64_t off;

	/* A background PUT that asks first: heading while its HEAD runs;
	 * present when the server had the entry with len bytes (no PUT). */
	int heading;
	int present;

	/* The outcome. */
	int done;
	int rc;
	uint64_t size;
	char errbuf[CURL_ERROR_SIZE];
};

struct kiln_cache {
	/* Fixed after open. */
	char base[2048];
	int read_only;
	char *userpwd;         /* "user:password", or NULL */
	struct curl_slist *headers;
	char *ca_file;
	char *sign_key;        /* the sign_key_file's secret, or NULL */
	size_t sign_key_len;
	long connect_timeout_ms, timeout_ms, stall_ms;
	unsigned max_parallel, max_uploads;
	unsigned queue_max;
	uint64_t queue_max_bytes;
	unsigned breaker_failures;
	long breaker_open_ms, breaker_max_ms;

	CURLM *multi;
	pthread_t thread;
	int thread_started;

	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t done_cv;   /* a waited-for transfer ended, or the queue drained */
	int stopping;
	struct xfer *pending;     /* callers' transfers not started yet (FIFO) */
	struct xfer **pending_tail;
	struct xfer *queue;       /* background uploads not started yet (FIFO) */
	struct xfer **queue_tail;
	struct xfer *running;     /* on the multi handle */
	unsigned nqueue;
	uint64_t queue_bytes;
	uint64_t next_seq;
	unsigned nrunning, nrunning_uploads;
	unsigned nfail;           /* consecutive failures */
	int64_t open_until_ms;    /* breaker open until (monotonic), or 0 */
	long period_ms;           /* the next opening's length */
	kiln_cache_stats st;
};

/* config.c: the base URL's form, and the credentials of cfg into c. */
int cache_config_apply(kiln_cache *c, const kiln_cache_config *cfg);
void cache_config_free(kiln_cache *c);

/* transfer.c: the handle's thread. */
void *cache_loop(void *arg);

/* cache.c, under c->mu: account a finished transfer's outcome (counters,
 * breaker). failure: it counts toward opening the breaker. */
void cache_note_result(kiln_cache *c, struct xfer *x, int failure);

/* Milliseconds on the monotonic clock. */
int64_t cache_now_ms(void);

#endif
