/* conn.c — libkiln's nng side: dialing, and sending requests and
 * receiving replies on a req0 socket's contexts.
 *
 * Each slot is a context with its own aio and runs one request at a time:
 * send (waited for), then a receive started at once and waited for by
 * conn_wait, so several slots can have requests in flight together.
 *
 * Threads: a slot is used by one thread at a time (libkiln gives the
 * events slot to the subscription thread, the others to the caller); the
 * socket itself is nng's and thread-safe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "conn.h"

struct slot {
	nng_ctx ctx;
	nng_aio *aio;
	int pending;    /* a receive is in flight */
};

struct conn {
	nng_socket sock;
	nng_dialer dialer;
	nng_tls_config *tls;
	size_t max_message;
	struct slot slots[CONN_NSLOTS];
};

static int
err_of_nng(int rv)
{
	switch (rv) {
	case 0: return 0;
	case NNG_ENOMEM: return KILN_ENOMEM;
	case NNG_ETIMEDOUT: return KILN_ETIMEDOUT;
	case NNG_ECONNREFUSED:
	case NNG_ENOENT: return KILN_ENODAEMON;
	case NNG_ECLOSED:
	case NNG_ECONNSHUT:
	case NNG_ECONNRESET:
	case NNG_ECANCELED: return KILN_ECLOSED;
	case NNG_EMSGSIZE: return KILN_ERANGE;
	case NNG_EADDRINVAL:
	case NNG_EINVAL: return KILN_EINVAL;
	case NNG_EPERM: return KILN_EACCES;
	/* a certificate, not the token: the token is never sent before the
	 * handshake succeeds */
	case NNG_EPEERAUTH:
	case NNG_ECRYPTO: return KILN_ETLS;
	default: return KILN_EIO;
	}
}

/* The host part of a tcp-like URL, for TLS's server name check. */
static int
url_host(const char *url, char *host, size_t len)
{
	const char *p = strstr(url, "://"), *end;

	if (p == NULL)
		return KILN_EINVAL;
	p += 3;
	if (*p == '[') { /* [v6]:port */
		p++;
		end = strchr(p, ']');
	} else {
		end = strrchr(p, ':');
	}
	if (end == NULL || (size_t)(end - p) >= len)
		return KILN_EINVAL;
	memcpy(host, p, (size_t)(end - p));
	host[end - p] = '\0';
	return 0;
}

/* Read a whole (small) PEM file into a malloc'd string. */
static int
pem_slurp(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long size = -1;
	size_t n;

	*out = NULL;
	if (f == NULL)
		return KILN_EINVAL;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    size > (1 << 20) || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return KILN_EINVAL; /* not a file, or too large for a PEM */
	}
	if ((buf = malloc((size_t)size + 1)) == NULL) {
		fclose(f);
		return KILN_ENOMEM;
	}
	n = fread(buf, 1, (size_t)size, f);
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* Our own certificate, for a daemon that asks for one (--tls-client-ca):
 * nng 1.5.2 takes the certificate and the key as PEM text. */
static int
tls_own_cert(struct conn *c, const struct conn_opts *o)
{
	char *cert = NULL, *key = NULL;
	int rv;

	if (o->tls_cert == NULL && o->tls_key == NULL)
		return 0;
	if (o->tls_cert == NULL || o->tls_key == NULL)
		return KILN_EINVAL;
	if ((rv = pem_slurp(o->tls_cert, &cert)) == 0 &&
	    (rv = pem_slurp(o->tls_key, &key)) == 0 &&
	    (rv = nng_tls_config_own_cert(c->tls, cert, key, NULL)) != 0)
		rv = rv == NNG_ENOMEM ? KILN_ENOMEM : KILN_EINVAL;
	free(cert);
	free(key);
	return rv;
}

static int
tls_setup(struct conn *c, const char *url, const struct conn_opts *o)
{
	char host[256];
	int rv;

	if (o->tls_ca == NULL || url_host(url, host, sizeof(host)) != 0)
		return KILN_EINVAL;
	if ((rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0 ||
	    (rv = nng_tls_config_ca_file(c->tls, o->tls_ca)) != 0 ||
	    (rv = nng_tls_config_server_name(c->tls, host)) != 0)
		return rv == NNG_ENOMEM ? KILN_ENOMEM : KILN_EINVAL;
	if ((rv = tls_own_cert(c, o)) != 0)
		return rv;
	if ((rv = nng_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, c->tls)) != 0)
		return rv == NNG_ENOMEM ? KILN_ENOMEM : KILN_EINVAL;
	return 0;
}

/* The code for a failed dial. A TLS daemon that closes the connection
 * during the handshake refused our certificate, or our lack of one
 * (kilnd --tls-client-ca; mbedtls's TLS 1.2 server just hangs up): say
 * so, rather than that the daemon went away. */
static int
dial_err(const char *url, int rv)
{
	if (strncmp(url, "tls+tcp://", 10) == 0 &&
	    (rv == NNG_ECONNSHUT || rv == NNG_ECONNRESET))
		return KILN_ETLS;
	return err_of_nng(rv);
}

static int
slots_open(struct conn *c)
{
	int rv;

	for (unsigned i = 0; i < CONN_NSLOTS; i++) {
		if ((rv = nng_ctx_open(&c->slots[i].ctx, c->sock)) != 0 ||
		    (rv = nng_aio_alloc(&c->slots[i].aio, NULL, NULL)) != 0)
			return err_of_nng(rv);
	}
	return 0;
}

int
conn_open(const char *url, const struct conn_opts *o, struct conn **cp)
{
	struct conn *c = calloc(1, sizeof(*c));
	int rv;

	*cp = NULL;
	if (c == NULL)
		return KILN_ENOMEM;
	c->max_message = o->max_message;
	/* No resending: a request is answered once or fails (a long poll or a
	 * put chunk must not be repeated behind the caller's back). */
	if ((rv = err_of_nng(nng_req0_open(&c->sock))) != 0 ||
	    (rv = err_of_nng(nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
	                                       NNG_DURATION_INFINITE))) != 0 ||
	    (rv = err_of_nng(nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ,
	                                         o->max_message))) != 0 ||
	    (rv = slots_open(c)) != 0 ||
	    (rv = err_of_nng(nng_dialer_create(&c->dialer, c->sock, url))) != 0 ||
	    (strncmp(url, "tls+tcp://", 10) == 0 &&
	     (rv = tls_setup(c, url, o)) != 0) ||
	    (rv = dial_err(url, nng_dialer_start(c->dialer, 0))) != 0) {
		conn_close(c);
		return rv;
	}
	*cp = c;
	return 0;
}

/* Wait out a receive left in flight (a caller gave up on it). */
static void
slot_settle(struct slot *s)
{
	if (!s->pending)
		return;
	nng_aio_cancel(s->aio);
	nng_aio_wait(s->aio);
	if (nng_aio_result(s->aio) == 0)
		nng_msg_free(nng_aio_get_msg(s->aio));
	s->pending = 0;
}

void
conn_close(struct conn *c)
{
	if (c == NULL)
		return;
	for (unsigned i = 0; i < CONN_NSLOTS; i++)
		if (c->slots[i].aio != NULL)
			slot_settle(&c->slots[i]);
	nng_close(c->sock);
	for (unsigned i = 0; i < CONN_NSLOTS; i++)
		if (c->slots[i].aio != NULL)
			nng_aio_free(c->slots[i].aio);
	if (c->tls != NULL)
		nng_tls_config_free(c->tls);
	free(c);
}

/* The request, then data as its data field, in one message. */
static int
msg_build(const struct conn *c, const Kiln__Request *req, const void *data,
          size_t ndata, nng_msg **m)
{
	uint8_t hdr[KILN_DATA_HEADER_MAX];
	size_t head = kiln_proto_size(&req->base), nhdr = 0;
	uint8_t *body;
	int rv;

	if (ndata > 0)
		nhdr = kiln_proto_data_header(hdr, ndata);
	if (head + nhdr + ndata > c->max_message)
		return KILN_ERANGE;
	if ((rv = nng_msg_alloc(m, head + nhdr + ndata)) != 0)
		return err_of_nng(rv);
	body = nng_msg_body(*m);
	kiln_proto_pack(&req->base, body);
	if (ndata > 0) {
		memcpy(body + head, hdr, nhdr);
		memcpy(body + head + nhdr, data, ndata);
	}
	return 0;
}

int
conn_send(struct conn *c, unsigned slot, const Kiln__Request *req,
          const void *data, size_t ndata, int timeout_ms)
{
	struct slot *s = &c->slots[slot];
	nng_msg *m;
	int rv;

	slot_settle(s);
	if ((rv = msg_build(c, req, data, ndata, &m)) != 0)
		return rv;
	nng_aio_set_msg(s->aio, m);
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	if ((rv = nng_aio_result(s->aio)) != 0) {
		nng_msg_free(m);
		return err_of_nng(rv);
	}
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_recv(s->ctx, s->aio);
	s->pending = 1;
	return 0;
}

int
conn_wait(struct conn *c, unsigned slot, struct conn_reply *r)
{
	struct slot *s = &c->slots[slot];
	nng_msg *m;
	int rv;

	memset(r, 0, sizeof(*r));
	if (!s->pending)
		return KILN_EINVAL;
	nng_aio_wait(s->aio);
	s->pending = 0;
	if ((rv = nng_aio_result(s->aio)) != 0)
		return err_of_nng(rv);
	m = nng_aio_get_msg(s->aio);
	if ((rv = kiln_proto_reply_unpack(nng_msg_body(m), nng_msg_len(m),
	                                  &r->rep, &r->data, &r->ndata)) != 0) {
		nng_msg_free(m);
		return rv;
	}
	r->msg = m;
	return 0;
}

int
conn_call(struct conn *c, unsigned slot, const Kiln__Request *req,
          const void *data, size_t ndata, int timeout_ms, struct conn_reply *r)
{
	int rv;

	memset(r, 0, sizeof(*r));
	if ((rv = conn_send(c, slot, req, data, ndata, timeout_ms)) != 0)
		return rv;
	return conn_wait(c, slot, r);
}

void
conn_reply_free(struct conn_reply *r)
{
	kiln_proto_reply_free(r->rep);
	if (r->msg != NULL)
		nng_msg_free(r->msg);
	memset(r, 0, sizeof(*r));
}
