/* cache.c — kiln_cache's public calls: opening and closing a handle,
 * handing transfers to its thread (transfer.c) and waiting for them, the
 * upload queue, the circuit breaker and the counters.
 *
 * Threads: any thread may call these; they touch the handle's lists,
 * counters and breaker only under c->mu (cache_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_int.h"

int64_t
cache_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Called with c->mu held. */
static int
breaker_is_open(kiln_cache *c)
{
	return c->open_until_ms > cache_now_ms();
}

/* Any answer from the server closes the breaker; a failure counts, and
 * the breaker opens at the threshold. Once its period has passed, the
 * next transfers go out again (the count is still past the threshold),
 * so one more failure reopens it at once, for twice as long. */
static void
breaker_note(kiln_cache *c, int failure)
{
	int64_t now;

	if (!failure) {
		c->nfail = 0;
		c->open_until_ms = 0;
		c->period_ms = c->breaker_open_ms;
		return;
	}
	c->nfail++;
	now = cache_now_ms();
	if (c->nfail < c->breaker_failures || c->open_until_ms > now)
		return;
	c->open_until_ms = now + c->period_ms;
	c->st.breaker_opens++;
	c->period_ms = c->period_ms > c->breaker_max_ms / 2 ? c->breaker_max_ms : c->period_ms * 2;
}

void
cache_note_result(kiln_cache *c, struct xfer *x, int failure)
{
	if (x->rc == 0 && x->present) {
		c->st.present++;
	} else if (x->rc == 0 && x->op == XFER_PUT) {
		c->st.uploads++;
		c->st.bytes_up += x->len;
	} else if (x->rc == 0) {
		c->st.hits++;
	} else if (x->rc == KILN_ENOTFOUND) {
		c->st.misses++;
	} else {
		c->st.errors++;
	}
	c->st.bytes_down += x->got;
	/* A transfer cut by the caller's sink or a closing handle says
	 * nothing about the server. */
	if (x->rc != KILN_ECANCELLED && (x->sink_rc == 0 || failure))
		breaker_note(c, failure);
}

static void
cache_free(kiln_cache *c)
{
	if (c->multi != NULL)
		curl_fn->multi_cleanup(c->multi);
	cache_config_free(c);
	free(c);
}

static int
start_thread(kiln_cache *c)
{
	pthread_condattr_t ca;
	int rc;

	if (pthread_condattr_init(&ca) != 0)
		return KILN_ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&c->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return KILN_ENOMEM;
	if (pthread_mutex_init(&c->mu, NULL) != 0) {
		pthread_cond_destroy(&c->done_cv);
		return KILN_ENOMEM;
	}
	if (pthread_create(&c->thread, NULL, cache_loop, c) != 0) {
		pthread_mutex_destroy(&c->mu);
		pthread_cond_destroy(&c->done_cv);
		return KILN_ENOMEM;
	}
	return 0;
}

int
kiln_cache_open(const kiln_cache_config *cfg, kiln_cache **out)
{
	kiln_cache *c;
	int rc;

	*out = NULL;
	/* libcurl is loaded here, not at the program's start (curl_lib.h) */
	if ((rc = curl_lib_load(NULL, 0)) != 0)
		return rc;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return KILN_ENOMEM;
	c->pending_tail = &c->pending;
	c->queue_tail = &c->queue;
	if ((rc = cache_config_apply(c, cfg)) != 0)
		goto fail;
	rc = KILN_ENOMEM;
	if ((c->multi = curl_fn->multi_init()) == NULL)
		goto fail;
	/* Keep as many idle connections as may be busy at once, so the next
	 * transfers reuse them instead of connecting again. */
	curl_fn->multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)c->max_parallel);
	curl_fn->multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)c->max_parallel);
	if ((rc = start_thread(c)) != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	cache_free(c);
	return rc;
}

void
kiln_cache_close(kiln_cache *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stopping = 1;
	while (c->queue != NULL) {
		struct xfer *x = c->queue;

		c->queue = x->next;
		c->st.dropped++;
		if (x->fd >= 0)
			close(x->fd);
		free(x->owned);
		free(x);
	}
	pthread_mutex_unlock(&c->mu);
	curl_fn->multi_wakeup(c->multi);
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->done_cv);
	cache_free(c);
}

static int
xfer_init(kiln_cache *c, struct xfer *x, enum xfer_op op, enum kiln_cache_kind kind,
          const char *hex)
{
	memset(x, 0, sizeof(*x));
	x->fd = -1;
	x->op = op;
	x->kind = kind;
	if (kiln_cache_check_key(hex) != 0 || (kind != KILN_CACHE_CAS && kind != KILN_CACHE_AC))
		return KILN_EINVAL;
	snprintf(x->url, sizeof(x->url), "%s/%s/%s", c->base,
	         kind == KILN_CACHE_CAS ? "cas" : "ac", hex);
	return 0;
}

/* Hand x to the handle's thread and wait for its end. While the breaker
 * is open nothing is sent: a lookup is a miss, a put is refused. */
static int
run_and_wait(kiln_cache *c, struct xfer *x)
{
	pthread_mutex_lock(&c->mu);
	if (breaker_is_open(c)) {
		c->st.skipped++;
		pthread_mutex_unlock(&c->mu);
		return x->op == XFER_PUT ? KILN_EBUSY : KILN_ENOTFOUND;
	}
	*c->pending_tail = x;
	c->pending_tail = &x->next;
	pthread_mutex_unlock(&c->mu);
	curl_fn->multi_wakeup(c->multi);
	pthread_mutex_lock(&c->mu);
	while (!x->done)
		pthread_cond_wait(&c->done_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return x->rc;
}

int
kiln_cache_get(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
               uint64_t max_bytes, kiln_cache_sink_fn sink, void *arg, uint64_t *size)
{
	struct xfer *x;
	int rc;

	if (sink == NULL)
		return KILN_EINVAL;
	/* Heap, not stack: an xfer holds a URL and curl's error buffer. */
	if ((x = malloc(sizeof(*x))) == NULL)
		return KILN_ENOMEM;
	if ((rc = xfer_init(c, x, XFER_GET, kind, hex)) == 0) {
		x->sink = sink;
		x->sink_arg = arg;
		x->max_bytes = max_bytes;
		rc = run_and_wait(c, x);
		if (rc == 0 && size != NULL)
			*size = x->size;
	}
	free(x);
	return rc;
}

/* kiln_cache_sink_fn writing to the fd at arg. */
static int
sink_fd(void *arg, const void *data, size_t len)
{
	int fd = *(int *)arg;
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? kiln_err_from_errno(errno) : KILN_EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
kiln_cache_get_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                  uint64_t max_bytes, int fd, uint64_t *size)
{
	return kiln_cache_get(c, kind, hex, max_bytes, sink_fd, &fd, size);
}

int
kiln_cache_head(kiln_cache *c, enum kiln_cache_kind kind, const char *hex, uint64_t *size)
{
	struct xfer *x;
	int rc;

	if ((x = malloc(sizeof(*x))) == NULL)
		return KILN_ENOMEM;
	if ((rc = xfer_init(c, x, XFER_HEAD, kind, hex)) == 0) {
		rc = run_and_wait(c, x);
		if (rc == 0 && size != NULL)
			*size = x->size;
	}
	free(x);
	return rc;
}

/* The size of the file at fd, for a body read by pread. */
static int
fd_size(int fd, uint64_t *len)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0)
		return kiln_err_from_errno(errno);
	if (!S_ISREG(sb.st_mode))
		return KILN_EINVAL;
	*len = (uint64_t)sb.st_size;
	return 0;
}

static int
put_sync(kiln_cache *c, enum kiln_cache_kind kind, const char *hex, const void *buf,
         size_t len, int fd)
{
	struct xfer *x;
	int rc;

	if (c->read_only)
		return KILN_EREADONLY;
	if ((x = malloc(sizeof(*x))) == NULL)
		return KILN_ENOMEM;
	if ((rc = xfer_init(c, x, XFER_PUT, kind, hex)) != 0)
		goto fail;
	x->buf = buf;
	x->len = len;
	x->fd = fd;
	if (fd >= 0 && (rc = fd_size(fd, &x->len)) != 0)
		goto fail;
	rc = run_and_wait(c, x);
fail:
	free(x);
	return rc;
}

int
kiln_cache_put(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
               const void *buf, size_t len)
{
	if (buf == NULL && len > 0)
		return KILN_EINVAL;
	return put_sync(c, kind, hex, buf, len, -1);
}

int
kiln_cache_put_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex, int fd)
{
	if (fd < 0)
		return KILN_EINVAL;
	return put_sync(c, kind, hex, NULL, 0, fd);
}

/* Queue x (a background upload the handle now owns), or drop it when the
 * queue is full. */
static int
enqueue(kiln_cache *c, struct xfer *x)
{
	uint64_t bytes = x->owned != NULL ? x->len : 0;

	pthread_mutex_lock(&c->mu);
	if (c->stopping || c->nqueue >= c->queue_max ||
	    c->queue_bytes + bytes > c->queue_max_bytes) {
		c->st.dropped++;
		pthread_mutex_unlock(&c->mu);
		if (x->fd >= 0)
			close(x->fd);
		free(x->owned);
		free(x);
		return KILN_EBUSY;
	}
	x->background = 1;
	x->seq = c->next_seq++;
	*c->queue_tail = x;
	c->queue_tail = &x->next;
	c->nqueue++;
	c->queue_bytes += bytes;
	pthread_mutex_unlock(&c->mu);
	curl_fn->multi_wakeup(c->multi);
	return 0;
}

int
kiln_cache_put_async(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                     const void *buf, size_t len)
{
	struct xfer *x;
	int rc;

	if (c->read_only)
		return KILN_EREADONLY;
	if (buf == NULL && len > 0)
		return KILN_EINVAL;
	if ((x = malloc(sizeof(*x))) == NULL)
		return KILN_ENOMEM;
	if ((rc = xfer_init(c, x, XFER_PUT, kind, hex)) != 0)
		goto fail;
	rc = KILN_ENOMEM;
	/* malloc(0) may answer NULL; one byte keeps "owned" meaning "a copy". */
	if ((x->owned = malloc(len > 0 ? len : 1)) == NULL)
		goto fail;
	memcpy(x->owned, buf, len);
	x->buf = x->owned;
	x->len = len;
	return enqueue(c, x);
fail:
	free(x);
	return rc;
}

static int
put_async_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex, int fd,
             int ask_first)
{
	struct xfer *x;
	int rc;

	if (c->read_only)
		return KILN_EREADONLY;
	if (fd < 0)
		return KILN_EINVAL;
	if ((x = malloc(sizeof(*x))) == NULL)
		return KILN_ENOMEM;
	if ((rc = xfer_init(c, x, XFER_PUT, kind, hex)) != 0)
		goto fail;
	if ((rc = fd_size(fd, &x->len)) != 0)
		goto fail;
	if ((x->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		rc = kiln_err_from_errno(errno);
		goto fail;
	}
	x->heading = ask_first;
	return enqueue(c, x);
fail:
	free(x);
	return rc;
}

int
kiln_cache_put_async_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex, int fd)
{
	return put_async_fd(c, kind, hex, fd, 0);
}

int
kiln_cache_put_missing_async_fd(kiln_cache *c, enum kiln_cache_kind kind, const char *hex,
                                int fd)
{
	return put_async_fd(c, kind, hex, fd, 1);
}

int
kiln_cache_flush(kiln_cache *c, long timeout_ms)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	if (timeout_ms >= 0) {
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (timeout_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&c->mu);
	while (rc == 0 && (c->nqueue > 0 || c->nrunning_uploads > 0)) {
		if (timeout_ms < 0)
			pthread_cond_wait(&c->done_cv, &c->mu);
		else if (pthread_cond_timedwait(&c->done_cv, &c->mu, &until) == ETIMEDOUT)
			rc = KILN_ETIMEDOUT;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void
kiln_cache_stats_get(kiln_cache *c, kiln_cache_stats *st)
{
	pthread_mutex_lock(&c->mu);
	*st = c->st;
	st->breaker_open = breaker_is_open(c);
	st->queued = c->nqueue + c->nrunning_uploads;
	pthread_mutex_unlock(&c->mu);
}
