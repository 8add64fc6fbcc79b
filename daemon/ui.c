/* ui.c — the dashboard's lifecycle and HTTP front door (docs/ui.md): a
 * secret drawn at start, one nng HTTP server started on the first
 * UiRequest, and one handler for every path that checks the secret (the
 * first path segment) in constant time before serving a compiled-in file
 * or an API answer (ui_api.c), and refuses an action (a POST) sent by
 * another site's page (its Origin header). The websocket of events shares
 * the server (ui_ws.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "kiln_error.h"
#include "kiln_hex.h"
#include "ui_int.h"

/* .kiln/ui (mode 0600, as private as the socket): "PORT SECRET [LISTEN]",
 * written when the dashboard is first served, so that the next daemon of
 * the project serves it again at the same URL and open pages reconnect by
 * themselves. Removing the file ends that (and draws a new secret). */
static void
saved_path(const struct kilnd_ui *u, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ui", u->d->paths.dir);
}

/* Read .kiln/ui into u (secret, port, listen) when it is well formed. */
static void
saved_read(struct kilnd_ui *u)
{
	char path[PATH_MAX + 8], secret[UI_SECRET_LEN + 2], listen[64] = "";
	unsigned port;
	FILE *f;
	int n;

	saved_path(u, path, sizeof path);
	if ((f = fopen(path, "re")) == NULL)
		return;
	n = fscanf(f, "%5u %33s %63s", &port, secret, listen);
	fclose(f);
	if (n < 2 || port == 0 || port > 65535 || strlen(secret) != UI_SECRET_LEN ||
	    strspn(secret, "0123456789abcdef") != UI_SECRET_LEN)
		return;
	memcpy(u->secret, secret, UI_SECRET_LEN + 1);
	u->saved_port = port;
	snprintf(u->saved_listen, sizeof u->saved_listen, "%s", listen);
}

static void
saved_write(struct kilnd_ui *u, int port, const char *listen)
{
	char path[PATH_MAX + 8], tmp[PATH_MAX + 16];
	FILE *f;
	int fd;

	saved_path(u, path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return;
	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		return;
	}
	fprintf(f, "%d %s %s\n", port, u->secret, listen);
	if (fclose(f) == 0)
		rename(tmp, path);
	else
		unlink(tmp);
}

int
ui_new(struct kilnd *d, struct kilnd_ui **up)
{
	struct kilnd_ui *u;
	uint8_t raw[UI_SECRET_LEN / 2];

	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return KILN_EIO;
	if ((u = calloc(1, sizeof *u)) == NULL)
		return KILN_ENOMEM;
	u->d = d;
	kiln_hex_encode(raw, sizeof raw, u->secret);
	pthread_mutex_init(&u->mu, NULL);
	saved_read(u);
	*up = u;
	return 0;
}

void
ui_resume(struct kilnd_ui *u)
{
	Kiln__UiRequest q = KILN__UI_REQUEST__INIT;
	char url[512], err[512] = "";

	if (u->saved_port == 0)
		return;
	q.port = u->saved_port;
	q.listen = u->saved_listen;
	if (ui_start(u, &q, url, sizeof url, err, sizeof err) == 0)
		kilnd_log(u->d, KILND_INFO, "serving the dashboard again on port %u "
		          "(.kiln/ui)", u->saved_port);
	else
		kilnd_log(u->d, KILND_WARNING, "could not serve the dashboard again "
		          "(.kiln/ui): %s", err);
}

void
ui_free(struct kilnd_ui *u)
{
	if (u == NULL)
		return;
	atomic_store(&u->closing, 1);
	pthread_mutex_lock(&u->mu);
	if (u->serving) {
		ui_ws_stop(u);
		nng_http_server_stop(u->http);
		/* a callback that began before the stop finishes first */
		while (atomic_load(&u->inflight) > 0)
			usleep(1000);
		nng_http_server_release(u->http);
	}
	pthread_mutex_unlock(&u->mu);
	pthread_mutex_destroy(&u->mu);
	free(u);
}

int
ui_secret_ok(const struct kilnd_ui *u, const char *s, size_t len)
{
	unsigned char diff = len != UI_SECRET_LEN;

	for (size_t i = 0; i < UI_SECRET_LEN; i++)
		diff |= (unsigned char)(u->secret[i] ^ (i < len ? s[i] : 0));
	return diff == 0;
}

int
ui_pipe_open(struct kilnd_ui *u, uint32_t pipe)
{
	uint32_t slot;

	if (u == NULL || pipe < UI_PIPE_BASE || atomic_load(&u->closing))
		return 0;
	if (pipe == UI_PIPE_BASE) /* the API's calls: open while it serves */
		return 1;
	slot = pipe - UI_PIPE_BASE - 1;
	return slot < UI_MAX_CONNS && !atomic_load(&u->conns[slot].done);
}

/* ---- the query string ---- */

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
ui_query_get(const char *query, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key), o = 0;
	const char *p = query;

	while (p != NULL && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			for (p += klen + 1; *p && *p != '&'; p++) {
				int c = (unsigned char)*p, h, l;
				if (c == '+')
					c = ' ';
				else if (c == '%' && (h = hexval(p[1])) >= 0 &&
				         (l = hexval(p[2])) >= 0) {
					c = h * 16 + l;
					p += 2;
				}
				if (o + 1 >= len)
					return KILN_ERANGE;
				buf[o++] = (char)c;
			}
			buf[o] = '\0';
			return 0;
		}
		if ((p = strchr(p, '&')) != NULL)
			p++;
	}
	return KILN_ENOTFOUND;
}

/* ---- the Origin ---- */

int
ui_origin_ok(const char *origin, const char *host)
{
	size_t n;

	if (origin == NULL)
		return 1;   /* not a browser's page: curl, an engine's client */
	if (host == NULL || host[0] == '\0')
		return 0;
	if (strncasecmp(origin, "http://", 7) == 0)
		n = 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		n = 8;      /* the page behind a TLS proxy that keeps Host */
	else
		return 0;   /* "null" (a sandboxed frame, a file), or garbage */
	return strcasecmp(origin + n, host) == 0;
}

/* ---- HTTP ---- */

static void
respond(nng_aio *aio, uint16_t status, const char *type, const void *body,
        size_t len)
{
	nng_http_res *res;
	int rv;

	if ((rv = nng_http_res_alloc(&res)) != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	if ((rv = nng_http_res_set_status(res, status)) != 0 ||
	    (rv = nng_http_res_set_header(res, "Content-Type", type)) != 0 ||
	    (rv = nng_http_res_set_header(res, "Cache-Control", "no-store")) != 0 ||
	    (rv = nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff")) != 0 ||
	    /* nng's copy of 0 bytes fails as out of memory (its allocation
	     * of 0 is NULL), which closed the connection with no answer:
	     * an empty body is no copy */
	    (len > 0 && (rv = nng_http_res_copy_data(res, body, len)) != 0)) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static const struct ui_file *
file_find(const char *name, size_t len)
{
	if (len == 0) {
		name = "index.html";
		len = strlen(name);
	}
	for (size_t i = 0; i < ui_nfiles; i++)
		if (strlen(ui_files[i].name) == len &&
		    memcmp(ui_files[i].name, name, len) == 0)
			return &ui_files[i];
	return NULL;
}

/* "/SECRET/REST?QUERY": a wrong or missing secret is 403, whatever REST. */
static void
http_serve(struct kilnd_ui *u, nng_aio *aio, nng_http_req *req)
{
	const char *uri = nng_http_req_get_uri(req), *rest, *q;
	size_t seg, restlen;
	const struct ui_file *f;

	if (uri[0] != '/')
		return respond(aio, 400, "text/plain", "bad request\n", 12);
	seg = strcspn(uri + 1, "/?");
	if (!ui_secret_ok(u, uri + 1, seg))
		return respond(aio, 403, "text/plain", "forbidden\n", 10);
	/* an action from another site's page, which knows the URL (a
	 * leaked link, a Referer): only the dashboard's own page, or a
	 * client that is no page (no Origin), may change anything */
	if (strcmp(nng_http_req_get_method(req), "GET") != 0 &&
	    strcmp(nng_http_req_get_method(req), "HEAD") != 0 &&
	    !ui_origin_ok(nng_http_req_get_header(req, "Origin"),
	                  nng_http_req_get_header(req, "Host")))
		return respond(aio, 403, "text/plain", "cross-origin request refused\n", 29);
	rest = uri + 1 + seg;
	rest += *rest == '/';
	q = strchr(rest, '?');
	restlen = q ? (size_t)(q - rest) : strlen(rest);
	if (restlen >= 4 && strncmp(rest, "api/", 4) == 0) {
		char path[128], *body = NULL;
		const char *type = "application/json";
		size_t len = 0;
		uint16_t st;
		if (restlen - 4 >= sizeof path)
			return respond(aio, 404, "text/plain", "not found\n", 10);
		memcpy(path, rest + 4, restlen - 4);
		path[restlen - 4] = '\0';
		st = ui_api(u, nng_http_req_get_method(req), path, q ? q + 1 : NULL,
		            &body, &len, &type);
		if (body == NULL)
			respond(aio, 500, "text/plain", "out of memory\n", 14);
		else
			respond(aio, st, type, body, len);
		free(body);
		return;
	}
	if ((f = file_find(rest, restlen)) == NULL)
		return respond(aio, 404, "text/plain", "not found\n", 10);
	respond(aio, 200, f->type, f->data, f->len);
}

static void
http_cb(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct kilnd_ui *u = nng_http_handler_get_data(h);

	atomic_fetch_add(&u->inflight, 1);
	if (atomic_load(&u->closing))
		respond(aio, 503, "text/plain", "stopping\n", 9);
	else
		http_serve(u, aio, req);
	atomic_fetch_sub(&u->inflight, 1);
}

/* Whether host is a loopback address (the default, safe without tokens). */
static int
loopback(const char *host)
{
	return strcmp(host, "127.0.0.1") == 0 || strcmp(host, "localhost") == 0 ||
	       strcmp(host, "::1") == 0;
}

static int
http_start(struct kilnd_ui *u, const char *host, unsigned port)
{
	char addr[300];
	nng_url *url;
	nng_http_handler *h;
	nng_sockaddr sa;
	int rv;

	snprintf(addr, sizeof addr, strchr(host, ':') ? "http://[%s]:%u"
	         : "http://%s:%u", host, port);
	if ((rv = nng_url_parse(&url, addr)) != 0)
		return KILN_EINVAL;
	rv = nng_http_server_hold(&u->http, url);
	nng_url_free(url);
	if (rv != 0)
		return KILN_ENOMEM;
	/* "" with a tree: every path reaches http_cb (the websocket's own
	 * path, registered by its listener, is more specific) */
	if ((rv = nng_http_handler_alloc(&h, "", http_cb)) != 0 ||
	    (rv = nng_http_handler_set_tree(h)) != 0 ||
	    (rv = nng_http_handler_set_method(h, NULL)) != 0 ||
	    (rv = nng_http_handler_set_data(h, u, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(u->http, h)) != 0 ||
	    (rv = nng_http_server_start(u->http)) != 0) {
		nng_http_server_release(u->http);
		return rv == NNG_EADDRINUSE ? KILN_EBUSY : KILN_EIO;
	}
	if (nng_http_server_get_addr(u->http, &sa) != 0) {
		nng_http_server_stop(u->http);
		nng_http_server_release(u->http);
		return KILN_EIO;
	}
	return ntohs(sa.s_family == NNG_AF_INET6 ? sa.s_in6.sa_port : sa.s_in.sa_port);
}

int
ui_start(struct kilnd_ui *u, const Kiln__UiRequest *q, char *url, size_t len,
         char *err, size_t errlen)
{
	const char *host = q->listen && q->listen[0] ? q->listen : "127.0.0.1";
	int port, rv = 0;

	if (q->port > 65535) {
		snprintf(err, errlen, "port %u is not a TCP port", q->port);
		return KILN_EINVAL;
	}
	if (!loopback(host) && u->d->tokens[ROLE_CLIENT].len == 0) {
		snprintf(err, errlen, "the dashboard listens on %s only when the "
		         "daemon has a client token (kilnd --token-file); without "
		         "one it serves loopback only", host);
		return KILN_EINVAL;
	}
	pthread_mutex_lock(&u->mu);
	if (!u->serving) {
		if ((port = http_start(u, host, q->port)) < 0) {
			rv = port;
		} else if ((rv = ui_ws_start(u, host, port)) != 0) {
			nng_http_server_stop(u->http);
			nng_http_server_release(u->http);
		} else {
			snprintf(u->url, sizeof u->url, strchr(host, ':') ?
			         "http://[%s]:%d/%s/" : "http://%s:%d/%s/", host, port,
			         u->secret);
			u->serving = 1;
			saved_write(u, port, q->listen ? q->listen : "");
		}
	}
	if (rv == 0)
		snprintf(url, len, "%s", u->url);
	pthread_mutex_unlock(&u->mu);
	if (rv != 0 && err[0] == '\0')
		snprintf(err, errlen, "serving the dashboard on %s: %s", host,
		         kiln_strerror(rv));
	return rv;
}
