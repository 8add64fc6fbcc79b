/* conn.h — libkiln's connection to a daemon: one nng req0 socket with a
 * few contexts ("slots"), each able to have one request in flight, so that
 * a subscription and several chunks of a blob can be outstanding at once.
 * Internal to libkiln; the only client file that includes nng.h is conn.c,
 * and no nng type appears here. */
#ifndef KILN_CONN_H
#define KILN_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_proto.h"

#define CONN_GET_WINDOW 4 /* blob chunks in flight at once */

enum conn_slot {
	CONN_SLOT_MAIN = 0,   /* ordinary requests */
	CONN_SLOT_EVENTS = 1, /* the subscription's polls */
	CONN_SLOT_GET = 2,    /* CONN_GET_WINDOW slots for blob chunks */
	CONN_NSLOTS = CONN_SLOT_GET + CONN_GET_WINDOW,
};

struct conn;

struct conn_opts {
	size_t max_message; /* largest message sent or accepted */
	const char *tls_ca; /* CA file for tls+tcp:// */
	const char *tls_cert; /* our certificate (PEM file) for a daemon that
	                       * asks for one (mutual TLS), or NULL */
	const char *tls_key;  /* its private key (PEM file), with tls_cert */
};

/* A decoded reply; the bytes of its data field live in msg. */
struct conn_reply {
	void *msg;          /* the nng message (opaque here) */
	Kiln__Reply *rep;
	const uint8_t *data;
	size_t ndata;
};

/* Dial url and wait until connected. Returns 0, KILN_ENODAEMON (nothing
 * listens there), KILN_EINVAL (a bad address or TLS file), KILN_ETLS (the
 * TLS handshake failed: the daemon's certificate, or ours), KILN_ENOMEM or
 * KILN_EIO. */
int conn_open(const char *url, const struct conn_opts *o, struct conn **c);
void conn_close(struct conn *c);

/* Send req (its data field unset) followed by data as its data field on
 * slot, then start waiting for the reply (at most timeout_ms). Returns 0,
 * KILN_ERANGE (larger than max_message), KILN_ETIMEDOUT, KILN_ECLOSED,
 * KILN_ENOMEM or KILN_EIO. */
int conn_send(struct conn *c, unsigned slot, const Kiln__Request *req,
              const void *data, size_t ndata, int timeout_ms);

/* Wait for the reply to the slot's request and decode it into r (free it
 * with conn_reply_free). Returns 0 (whatever the reply's status),
 * KILN_ETIMEDOUT, KILN_ECLOSED, KILN_EPROTO (not a Reply) or KILN_EIO. */
int conn_wait(struct conn *c, unsigned slot, struct conn_reply *r);

/* conn_send then conn_wait. */
int conn_call(struct conn *c, unsigned slot, const Kiln__Request *req,
              const void *data, size_t ndata, int timeout_ms,
              struct conn_reply *r);

void conn_reply_free(struct conn_reply *r);

#endif
