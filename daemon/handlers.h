/* handlers.h — turning one decoded Request into one answer, without nng:
 * workers.c decodes the message, calls handle_request, and encodes what the
 * answer says (a Reply, maybe followed by blob bytes read from a file; a
 * reply already encoded; or "park this poll"). */
#ifndef KILND_HANDLERS_H
#define KILND_HANDLERS_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "kilnd.h"
#include "uploads.h"

/* One request, as the server received it. */
struct kilnd_call {
	const Kiln__Request *req;
	const uint8_t *data;  /* Request.data (a put chunk), may be NULL */
	size_t ndata;
	uint32_t pipe;        /* the connection it came on */
	int remote;           /* it came over tcp:// or tls+tcp:// */
};

enum answer_kind {
	ANSWER_REPLY,  /* encode reply, then fd bytes if fd_len > 0 */
	ANSWER_BYTES,  /* send bytes as they are (an encoded Reply) */
	ANSWER_PARK,   /* park the poll for wait_ms, then handle_poll_again */
};

struct kilnd_answer {
	enum answer_kind kind;
	Kiln__Reply reply;
	union {
		Kiln__StatusReply status;
		Kiln__BlobHasReply has;
		Kiln__BlobGetReply get;
		Kiln__BlobPutReply put;
		Kiln__SubscribeReply sub;
		Kiln__BuildReply build;
		Kiln__BuildFinished build_status;
		Kiln__AgentHelloReply agent_hello;
		Kiln__UiReply ui;
		Kiln__HoldReply hold;
	} body;
	char error[8192];     /* reply.error points here (a project's errors
	                         can take many lines) */
	kiln_id id;           /* an id the reply refers to */
	struct upload_done done;
	void *heap[6];        /* freed by answer_release (a status takes 5) */
	int fd;               /* blob bytes to append as Reply.data: */
	uint64_t fd_off;      /* from this offset */
	size_t fd_len;        /* this many (0: none) */
	uint8_t *bytes;       /* ANSWER_BYTES (malloc'd) */
	size_t nbytes;
	uint32_t wait_ms;     /* ANSWER_PARK */
	int after_stop;       /* ask the daemon to stop once sent */
};

/* Answer c into a (which the caller zeroes). w is the caller's waiter, for
 * a poll that must wait. Counts the request and, when refused, the bad
 * request. */
void handle_request(struct kilnd *d, const struct kilnd_call *c,
                    struct kilnd_answer *a, struct ev_waiter *w);

/* Answer a parked poll after its wait (no further parking). */
void handle_poll_again(struct kilnd *d, const struct kilnd_call *c,
                       struct kilnd_answer *a);

/* handlers_build.c: build, cancel, build status, why. */
int h_build(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w);
int h_cancel(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
             struct ev_waiter *w);
int h_build_status(struct kilnd *d, const struct kilnd_call *c,
                   struct kilnd_answer *a, struct ev_waiter *w);
int h_why(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
          struct ev_waiter *w);
int h_audit(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w);
int h_deps(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
           struct ev_waiter *w);
int h_rdeps(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
            struct ev_waiter *w);

/* handlers_build.c: kiln need from a running step (engine_need). */
int h_need(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
           struct ev_waiter *w);

/* handlers_agent.c: build agents (hello, take, done). take_answer
 * answers a take again after its park (w NULL: no parking). */
int h_agent_hello(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
                  struct ev_waiter *w);
int h_agent_take(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
                 struct ev_waiter *w);
int h_agent_done(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
                 struct ev_waiter *w);
int take_answer(struct kilnd *d, const struct kilnd_call *c, struct kilnd_answer *a,
                struct ev_waiter *w);

/* Free what the answer holds (fd, heap, bytes). */
void answer_release(struct kilnd_answer *a);

#endif
