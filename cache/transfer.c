/* transfer.c — the handle's thread: one libcurl multi handle running every
 * transfer of a kiln_cache, and what an HTTP answer means in KILN_E*
 * codes.
 *
 * Threads: everything here runs on the handle's thread except where a
 * function says it takes c->mu; xfers being run are touched by no one
 * else until they are marked done (cache_int.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache_int.h"

/* An error page (404, 5xx) is read and thrown away so the connection can
 * be reused, but only this much of it: a server is not trusted to keep
 * its pages short. */
#define ERROR_PAGE_MAX (64 * 1024)

/* The lowest speed that is still progress (curl's LOW_SPEED_LIMIT). */
#define STALL_BYTES_PER_S 1024

/* Every socket is close-on-exec: kilnd forks build tools, which must not
 * inherit a connection to the cache. Counting here counts every attempt,
 * which is how the tests see keep-alive reuse and an open breaker. */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	kiln_cache *c = arg;
	curl_socket_t s;

	(void)purpose;
	s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	if (s != CURL_SOCKET_BAD) {
		pthread_mutex_lock(&c->mu);
		c->st.connects++;
		pthread_mutex_unlock(&c->mu);
	}
	return s;
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	curl_off_t declared = -1;
	long code = 0;
	int rc;

	curl_fn->easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		x->discarded += len;
		return x->discarded <= ERROR_PAGE_MAX ? len : CURL_WRITEFUNC_ERROR;
	}
	/* A declared length past the bound is refused before any byte
	 * reaches the sink; a body without one is cut where it passes. */
	if (x->got == 0 &&
	    curl_fn->easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared) == CURLE_OK &&
	    declared > 0 && (uint64_t)declared > x->max_bytes)
		len = SIZE_MAX;
	if (len == SIZE_MAX || len > x->max_bytes - x->got) {
		x->too_big = 1;
		return CURL_WRITEFUNC_ERROR;
	}
	x->got += len;
	if ((rc = x->sink(x->sink_arg, data, len)) != 0) {
		x->sink_rc = rc;
		return CURL_WRITEFUNC_ERROR;
	}
	return len;
}

static size_t
on_read(char *dst, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	ssize_t got;

	if (len > x->len - x->off)
		len = (size_t)(x->len - x->off);
	if (len == 0)
		return 0;
	if (x->fd < 0) {
		memcpy(dst, x->buf + x->off, len);
		x->off += len;
		return len;
	}
	do
		got = pread(x->fd, dst, len, (off_t)x->off);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		/* The file shrank since its size was taken: not the bytes the
		 * key names, so the upload must not complete. */
		x->sink_rc = got < 0 ? kiln_err_from_errno(errno) : KILN_EIO;
		return CURL_READFUNC_ABORT;
	}
	x->off += (uint64_t)got;
	return (size_t)got;
}

/* curl rewinds a body to send it again, e.g. when a kept-alive connection
 * turned out closed by the server. */
static int
on_seek(void *arg, curl_off_t offset, int origin)
{
	struct xfer *x = arg;

	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->len)
		return CURL_SEEKFUNC_FAIL;
	x->off = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* What every request shares. Redirects are never followed (a cache has
 * no reason to send one, and following could lead a request and its
 * credentials elsewhere); only http and https are spoken at all. */
static int
easy_common(kiln_cache *c, struct xfer *x, CURL *e)
{
	int bad = 0;
	long stall_s = c->stall_ms < 1000 ? 1 : c->stall_ms / 1000;

	bad |= curl_fn->easy_setopt(e, CURLOPT_URL, x->url);
	bad |= curl_fn->easy_setopt(e, CURLOPT_PRIVATE, x);
	bad |= curl_fn->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	bad |= curl_fn->easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	bad |= curl_fn->easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	bad |= curl_fn->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	bad |= curl_fn->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	bad |= curl_fn->easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	bad |= curl_fn->easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)STALL_BYTES_PER_S);
	bad |= curl_fn->easy_setopt(e, CURLOPT_LOW_SPEED_TIME, stall_s);
	bad |= curl_fn->easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	bad |= curl_fn->easy_setopt(e, CURLOPT_USERAGENT, "kiln");
	bad |= curl_fn->easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	bad |= curl_fn->easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	bad |= curl_fn->easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
	if (c->userpwd != NULL) {
		bad |= curl_fn->easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		bad |= curl_fn->easy_setopt(e, CURLOPT_USERPWD, c->userpwd);
	}
	if (c->ca_file != NULL)
		bad |= curl_fn->easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
	return bad;
}

static int
easy_method(struct xfer *x, CURL *e)
{
	int bad = 0;

	switch (x->heading ? XFER_HEAD : x->op) {
	case XFER_GET:
		bad |= curl_fn->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		bad |= curl_fn->easy_setopt(e, CURLOPT_WRITEDATA, x);
		break;
	case XFER_HEAD:
		bad |= curl_fn->easy_setopt(e, CURLOPT_NOBODY, 1L);
		break;
	case XFER_PUT:
		bad |= curl_fn->easy_setopt(e, CURLOPT_UPLOAD, 1L);
		bad |= curl_fn->easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		bad |= curl_fn->easy_setopt(e, CURLOPT_READDATA, x);
		bad |= curl_fn->easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		bad |= curl_fn->easy_setopt(e, CURLOPT_SEEKDATA, x);
		bad |= curl_fn->easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->len);
		/* The error page of a refused PUT is read like a GET's. */
		bad |= curl_fn->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		bad |= curl_fn->easy_setopt(e, CURLOPT_WRITEDATA, x);
		break;
	}
	return bad;
}

/* The answer's status as a code. *failure: it says the server is unwell
 * (5xx), which counts toward the breaker. */
static int
status_rc(const struct xfer *x, long code, int *failure)
{
	int put = x->op == XFER_PUT && !x->heading;

	if (put ? (code >= 200 && code < 300) : code == 200)
		return 0;
	if (code == 404 && !put)
		return KILN_ENOTFOUND;
	if (code == 401 || code == 403 || code == 407)
		return KILN_EAUTH;
	if (code == 413)
		return KILN_ERANGE;
	if (code >= 500) {
		*failure = 1;
		return KILN_EIO;
	}
	return KILN_EPROTO;
}

static int
curl_rc(const struct xfer *x, CURLcode res, long code, int *failure)
{
	if (x->too_big)
		return KILN_ERANGE;
	if (x->sink_rc != 0)
		return x->sink_rc;
	if (res == CURLE_WRITE_ERROR && x->discarded > 0)
		return status_rc(x, code, failure);
	switch (res) {
	case CURLE_OUT_OF_MEMORY:
		return KILN_ENOMEM;
	case CURLE_OPERATION_TIMEDOUT:
		*failure = 1;
		return KILN_ETIMEDOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		*failure = 1;
		return KILN_ETLS;
	default:
		*failure = 1;
		return KILN_EIO;
	}
}

static void
xfer_free_background(struct xfer *x)
{
	if (x->fd >= 0)
		close(x->fd);
	free(x->owned);
	free(x);
}

/* Account x's outcome and hand it back: to its waiting caller, or to
 * free() for a background upload. Takes c->mu. */
static void
xfer_end(kiln_cache *c, struct xfer *x, int failure)
{
	/* Once done is set, a waiting caller may free x at any moment. */
	int background = x->background;

	pthread_mutex_lock(&c->mu);
	for (struct xfer **p = &c->running; *p != NULL; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
	c->nrunning--;
	if (background)
		c->nrunning_uploads--;
	cache_note_result(c, x, failure);
	x->done = 1;
	pthread_cond_broadcast(&c->done_cv);
	pthread_mutex_unlock(&c->mu);
	if (background)
		xfer_free_background(x);
}

static int xfer_easy(kiln_cache *c, struct xfer *x);

/* The HEAD of an upload that asks first ended (x's easy handle is gone):
 * the server has the entry, or the PUT starts now on the same xfer (it
 * stays running, so an AC upload behind it still waits). */
static void
head_done(kiln_cache *c, struct xfer *x, int rc, curl_off_t len, int failure)
{
	x->heading = 0;
	if (rc == 0 && len >= 0 && (uint64_t)len == x->len) {
		x->present = 1;
		x->rc = 0;
		xfer_end(c, x, 0);
		return;
	}
	if (rc != 0 && rc != KILN_ENOTFOUND) {
		x->rc = rc;
		xfer_end(c, x, failure);
		return;
	}
	/* absent, or another size (a blob cut short): send it */
	x->got = x->discarded = x->off = 0;
	x->too_big = x->sink_rc = 0;
	if (xfer_easy(c, x) != 0) {
		x->rc = KILN_ENOMEM;
		xfer_end(c, x, 0);
	}
}

static void
xfer_finish(kiln_cache *c, struct xfer *x, CURLcode res)
{
	curl_off_t len = -1;
	long code = 0;
	int failure = 0;

	curl_fn->easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	x->rc = res == CURLE_OK ? status_rc(x, code, &failure) : curl_rc(x, res, code, &failure);
	if (x->heading) {
		if (x->rc != 0 || curl_fn->easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
		                                    &len) != CURLE_OK)
			len = -1;
		curl_fn->multi_remove_handle(c->multi, x->easy);
		curl_fn->easy_cleanup(x->easy);
		x->easy = NULL;
		head_done(c, x, x->rc, len, failure);
		return;
	}
	if (x->op == XFER_HEAD && x->rc == 0 &&
	    curl_fn->easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len) == CURLE_OK && len > 0)
		x->size = (uint64_t)len;
	if (x->op == XFER_GET)
		x->size = x->got;
	curl_fn->multi_remove_handle(c->multi, x->easy);
	curl_fn->easy_cleanup(x->easy);
	x->easy = NULL;
	xfer_end(c, x, failure);
}

/* A new easy handle for x, on the multi handle. 0, or -1 (none made). */
static int
xfer_easy(kiln_cache *c, struct xfer *x)
{
	CURL *e = curl_fn->easy_init();

	if (e != NULL && easy_common(c, x, e) == 0 && easy_method(x, e) == 0) {
		x->easy = e;
		if (curl_fn->multi_add_handle(c->multi, e) == CURLM_OK)
			return 0;
	}
	if (e != NULL)
		curl_fn->easy_cleanup(e);
	x->easy = NULL;
	return -1;
}

/* Start x on the multi handle (called with c->mu held; x is already
 * counted in nrunning). A handle that cannot be made ends x at once. */
static void
xfer_start(kiln_cache *c, struct xfer *x)
{
	x->next = c->running;
	c->running = x;
	if (xfer_easy(c, x) == 0)
		return;
	x->rc = KILN_ENOMEM;
	pthread_mutex_unlock(&c->mu);
	xfer_end(c, x, 0);
	pthread_mutex_lock(&c->mu);
}

/* The first queued upload allowed to start, unlinked: a CAS blob any
 * time, an AC entry only once no CAS upload queued before it is waiting
 * or in flight. Called with c->mu held. */
static struct xfer *
next_upload(kiln_cache *c)
{
	uint64_t first_cas = UINT64_MAX;
	struct xfer **p;

	for (struct xfer *r = c->running; r != NULL; r = r->next)
		if (r->background && r->kind == KILN_CACHE_CAS && r->seq < first_cas)
			first_cas = r->seq;
	for (p = &c->queue; *p != NULL; p = &(*p)->next) {
		struct xfer *x = *p;

		if (x->kind == KILN_CACHE_CAS || x->seq < first_cas) {
			*p = x->next;
			if (c->queue_tail == &x->next)
				c->queue_tail = p;
			c->nqueue--;
			c->queue_bytes -= x->owned != NULL ? x->len : 0;
			return x;
		}
	}
	return NULL;
}

/* Start what may start: callers' transfers first (a build waits on
 * them), then uploads within their share. Called with c->mu held. */
static void
start_ready(kiln_cache *c)
{
	struct xfer *x;

	while (c->pending != NULL && c->nrunning < c->max_parallel) {
		x = c->pending;
		if ((c->pending = x->next) == NULL)
			c->pending_tail = &c->pending;
		c->nrunning++;
		xfer_start(c, x);
	}
	while (c->nrunning < c->max_parallel && c->nrunning_uploads < c->max_uploads &&
	       (x = next_upload(c)) != NULL) {
		if (c->open_until_ms > cache_now_ms()) {
			c->st.dropped++;
			pthread_cond_broadcast(&c->done_cv);
			xfer_free_background(x);
			continue;
		}
		c->nrunning++;
		c->nrunning_uploads++;
		xfer_start(c, x);
	}
}

/* End what libcurl finished. Returns how many ended: each may have
 * unblocked a queued transfer (a result after its blobs) or its caller's
 * next request (an index PUT after its GET). */
static unsigned
drain_done(kiln_cache *c)
{
	CURLMsg *m;
	unsigned ended = 0;
	int left;

	while ((m = curl_fn->multi_info_read(c->multi, &left)) != NULL) {
		struct xfer *x = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_fn->easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		xfer_finish(c, x, m->data.result);
		ended++;
	}
	return ended;
}

/* Closing: cut what is in flight (only background uploads can be, as no
 * caller may be waiting on a closing handle). */
static void
cut_running(kiln_cache *c)
{
	while (c->running != NULL) {
		struct xfer *x = c->running;

		curl_fn->multi_remove_handle(c->multi, x->easy);
		curl_fn->easy_cleanup(x->easy);
		x->easy = NULL;
		x->rc = KILN_ECANCELLED;
		c->running = x->next;
		c->nrunning--;
		if (x->background) {
			c->nrunning_uploads--;
			c->st.dropped++;
			xfer_free_background(x);
		} else {
			x->done = 1;
		}
	}
	pthread_cond_broadcast(&c->done_cv);
}

void *
cache_loop(void *arg)
{
	kiln_cache *c = arg;
	int still;

	pthread_mutex_lock(&c->mu);
	while (!c->stopping) {
		start_ready(c);
		pthread_mutex_unlock(&c->mu);
		curl_fn->multi_perform(c->multi, &still);
		/* A transfer that ended may have freed a slot or let a queued
		 * AC upload go: start those now, not after the poll's timeout.
		 * Work added from other threads wakes the poll itself
		 * (curl_multi_wakeup in cache.c). */
		if (drain_done(c) == 0)
			curl_fn->multi_poll(c->multi, NULL, 0, 1000, NULL);
		pthread_mutex_lock(&c->mu);
	}
	cut_running(c);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}
