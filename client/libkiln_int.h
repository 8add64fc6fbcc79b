/* libkiln_int.h — what libkiln's files share: the connection object and
 * the request helper. Not installed. */
#ifndef LIBKILN_INT_H
#define LIBKILN_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "conn.h"
#include "kiln.h"

/* The subscription of a connection. */
struct kiln_sub {
	int active;
	uint64_t id;
	kiln_cursor cur;          /* the last event delivered */
	struct conn_reply batch;  /* the poll reply being handed out */
	size_t next;              /* its next event */
	int gather_ms;            /* kiln_events_gather */
	char **urls;              /* kiln_events_filter's copies (owned) */
	size_t nurls;
	char *profile;            /* NULL: any */
	/* kiln_events_snapshot, and the snapshot being handed out: pages
	 * snap_page..snap_pages still to ask for, the batch's states from
	 * snext, then the SNAPSHOT_END (snap_end) */
	int snapshot;
	int snap_end;
	uint32_t snap_page, snap_pages;
	uint64_t snap_steps;
	size_t snext;
	char snap_error[1024];
	/* with a callback: */
	int threaded;
	pthread_t thread;
	atomic_int quit;
	kiln_event_fn fn;
	void *arg;
	char error[1024];         /* the events slot's own error text */
	/* the event handed out last points here */
	kiln_step_event step;
	kiln_step_output outs[16];
	kiln_build_summary build;
	kiln_step_started started;
	kiln_step_state state;
};

struct kiln_conn {
	struct conn *conn;
	char token[256];          /* sent with every request when set */
	int timeout_ms;
	size_t max_message;
	uint32_t chunk;           /* blob bytes per message we ask for */
	uint32_t put_chunk;       /* the daemon's limit, learned on first put */
	char error[8192];         /* the daemon's words for the last failure
	                             (a project's errors take lines) */
	struct kiln_sub sub;
	/* kiln_build_status and kiln_why results point here */
	struct conn_reply held;
	kiln_build_summary summary;
	kiln_why_change changes[64];
	kiln_step_output why_outs[16];
	/* kiln_deps and kiln_rdeps arrays (malloc'd; freed with held) */
	void *held_arrays[3];
};

/* Free what c holds for the last call's results, and hold r instead. */
void lk_hold(kiln_conn *c, struct conn_reply *r);

/* A request envelope with the protocol version and the token set. */
void lk_request_init(const kiln_conn *c, Kiln__Request *req);

/* Send req (and data) on slot, wait for the reply, and check it: 0 when
 * its status is OK and it carries the body want (NOT_SET: any); else the
 * code for its status with the daemon's words in err (errlen bytes), or
 * KILN_EPROTO. On success the caller frees r with conn_reply_free. */
int lk_call(kiln_conn *c, unsigned slot, const Kiln__Request *req,
            const void *data, size_t ndata, int timeout_ms,
            Kiln__Reply__BodyCase want, struct conn_reply *r, char *err,
            size_t errlen);

/* Fill a summary from the wire's message (strings borrowed). */
void lk_summary_of(const Kiln__BuildFinished *bf, kiln_build_summary *s);

/* An ordinary request on the main slot, with c->error for the daemon's
 * words. */
int lk_call_main(kiln_conn *c, const Kiln__Request *req,
                 Kiln__Reply__BodyCase want, struct conn_reply *r);

/* Check a reply already received, as lk_call does. r is freed on error. */
int lk_reply_check(struct conn_reply *r, Kiln__Reply__BodyCase want, char *err,
                   size_t errlen);

/* autostart.c: connect to the project's daemon, starting it when none
 * answers (unless no_start). */
int lk_autostart(const struct kiln_paths *p, const char *kilnd, int no_start,
                 const struct conn_opts *o, int timeout_ms, struct conn **conn);

/* events.c: end the subscription's thread and state (kiln_close). */
void lk_sub_end(kiln_conn *c);
/* Free kiln_events_filter's copies in s. */
void lk_filter_free(struct kiln_sub *s);

#endif
