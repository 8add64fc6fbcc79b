/* kiln_proto.h — what kilnd and its clients share about talking to each
 * other: the protocol version and limits, packing and unpacking the
 * envelopes of proto/kiln.proto, the one mapping between KILN_E* codes and
 * the wire's Status, and where a project's daemon lives on disk.
 *
 * This library (libkilnproto.a) never prints, never exits and knows
 * nothing of nng: it works on byte buffers, so the daemon's server and the
 * client's connection code are the only places that touch nng messages.
 * Every function returns 0 or a negative KILN_E* code unless it says
 * otherwise. */
#ifndef KILN_PROTO_H
#define KILN_PROTO_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.pb-c.h"
#include "kiln_store.h"

/* The protocol version this build speaks (kiln.proto's rules say when it
 * changes). */
#define KILN_PROTO_VERSION 1

/* Defaults of the configurable limits (kilnd options, libkiln options). */
#define KILN_MAX_MESSAGE_DEFAULT (2u << 20)   /* bytes per message */
#define KILN_MAX_MESSAGE_MIN (64u << 10)
#define KILN_MAX_MESSAGE_MAX (256u << 20)
/* Room kept for the envelope around a chunk's bytes. */
#define KILN_ENVELOPE_ROOM (16u << 10)
#define KILN_CHUNK_DEFAULT (1u << 20)          /* blob bytes per message */
#define KILN_HAS_MAX 4096                      /* ids per BlobHasRequest */
#define KILN_POLL_MAX_EVENTS 256               /* events per PollReply */
#define KILN_POLL_MAX_WAIT_MS 60000
/* A subscription's filter (SubscribeRequest.urls, .profile): at most this
 * many URL globs (each at most KILN_GLOB_MAX bytes, desc/glob.h) and a
 * profile of at most this many bytes. The daemon matches every filtered
 * subscription against each event as it is published and as the ring
 * drops it, so both stay small. */
#define KILN_FILTER_MAX_URLS 16
#define KILN_FILTER_MAX_PROFILE 255

/* A decode may allocate at most RATIO times the message's size plus SLACK
 * bytes (kiln_proto_decode_budget). A well-formed kiln message needs far
 * less (a blob chunk sent before its envelope is copied once); a message
 * of tiny unknown or repeated fields would take many times its size (see
 * wire.c; figures in docs/protocol.md, "Limits and memory"). */
#define KILN_DECODE_RATIO 4
#define KILN_DECODE_SLACK (1u << 20)

/* The largest chunk that fits a message of max_message bytes. */
uint32_t kiln_proto_chunk_max(size_t max_message);

/* ---- envelopes ----------------------------------------------------------- */

/* Initialize an envelope with the protocol version set. */
void kiln_proto_request_init(Kiln__Request *req);
void kiln_proto_reply_init(Kiln__Reply *rep);

/* Decode a Request from len bytes at buf. The blob bytes of the envelope's
 * `data` field are returned apart, in *data / *ndata (NULL / 0 when there
 * are none): when the sender encoded them last (as kiln.proto asks) they
 * point into buf, uncopied, so buf must outlive their use; otherwise they
 * point into *req. Free *req with kiln_proto_request_free. Returns 0,
 * KILN_EPROTO (not a well-formed Request), KILN_ERANGE (decoding it would
 * allocate more than kiln_proto_decode_budget(len) bytes) or KILN_ENOMEM. */
int kiln_proto_request_unpack(const void *buf, size_t len, Kiln__Request **req,
                              const uint8_t **data, size_t *ndata);
void kiln_proto_request_free(Kiln__Request *req);

/* The same for a Reply (with the same budget). */
int kiln_proto_reply_unpack(const void *buf, size_t len, Kiln__Reply **rep,
                            const uint8_t **data, size_t *ndata);
void kiln_proto_reply_free(Kiln__Reply *rep);

/* Decode any message of descriptor desc from len bytes at buf, on the same
 * budget as the envelopes (no data field is split off). Free *m with
 * protobuf_c_message_free_unpacked(*m, NULL). Returns 0, KILN_EPROTO,
 * KILN_ERANGE (over budget) or KILN_ENOMEM. */
int kiln_proto_unpack_bounded(const ProtobufCMessageDescriptor *desc,
                              const void *buf, size_t len, ProtobufCMessage **m);

/* The bytes a decode of a len-byte message may allocate: KILN_DECODE_RATIO
 * * len + KILN_DECODE_SLACK, counting each block as malloc takes it (16-byte
 * rounding plus a header), freed or not; SIZE_MAX when that overflows. */
size_t kiln_proto_decode_budget(size_t len);

/* The encoded size of a message (any Kiln__* message). */
size_t kiln_proto_size(const ProtobufCMessage *m);

/* Encode m into buf, which has kiln_proto_size(m) bytes; returns the byte
 * count written. */
size_t kiln_proto_pack(const ProtobufCMessage *m, void *buf);

/* Encode m into a malloc'd buffer (*buf, free it). */
int kiln_proto_pack_alloc(const ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* How many bytes the header of a `data` field (tag and length) holding
 * ndata bytes takes; at most KILN_DATA_HEADER_MAX. Writing the header, then
 * the bytes, after an envelope packed without data yields the envelope with
 * data, encoded last — without first copying the bytes into the envelope. */
#define KILN_DATA_HEADER_MAX 12
size_t kiln_proto_data_header(uint8_t out[KILN_DATA_HEADER_MAX], size_t ndata);

/* ---- ids ----------------------------------------------------------------- */

/* A 16-byte id field into *id. Returns 0 or KILN_EINVAL (wrong length). */
int kiln_proto_id_get(ProtobufCBinaryData b, kiln_id *id);

/* An id field borrowing id's bytes (valid while *id is). */
ProtobufCBinaryData kiln_proto_id_ref(const kiln_id *id);

/* ---- status -------------------------------------------------------------- */

/* The wire status for a KILN_E* code (0 gives STATUS_OK). This is the one
 * place where library codes become wire codes. */
Kiln__Status kiln_proto_status_of(int code);

/* The KILN_E* code a client reports for a wire status (STATUS_OK gives 0;
 * a value this build does not know gives KILN_EPROTO). */
int kiln_proto_err_of(Kiln__Status status);

/* A short stable name for a status ("ok", "bad-request", ...). */
const char *kiln_proto_status_name(Kiln__Status status);

/* A short name for a request type ("status", "blob-get", ...), or
 * "unknown". */
const char *kiln_proto_request_name(Kiln__Request__BodyCase body);

/* ---- where a project's daemon lives -------------------------------------- */

/* Every path both sides must agree on, for one project. */
struct kiln_paths {
	char project[PATH_MAX];    /* absolute, no trailing slash */
	char dir[PATH_MAX];        /* <project>/.kiln */
	char sock[PATH_MAX];       /* <project>/.kiln/kilnd.sock */
	char url[PATH_MAX + 8];    /* ipc://<project>/.kiln/kilnd.sock */
	char lock[PATH_MAX];       /* <project>/.kiln/kilnd.lock: flock'ed by
	                              the live daemon for its whole life */
	char pid[PATH_MAX];        /* <project>/.kiln/kilnd.pid */
	char log[PATH_MAX];        /* <project>/.kiln/kilnd.log */
	char start_lock[PATH_MAX]; /* <project>/.kiln/start.lock: serializes
	                              clients that auto-start the daemon */
	char store[PATH_MAX];      /* <project>/.kiln/store */
};

/* The longest socket path a unix socket can bind (sun_path less its NUL). */
#define KILN_SOCK_PATH_MAX 107

/* The nearest folder upward from the current one holding kiln.yaml, else
 * the current folder, into dir (len bytes). Returns 0, KILN_ERANGE,
 * KILN_ENOMEM or KILN_EIO. */
int kiln_project_find(char *dir, size_t len);

/* Fill p for the project folder (NULL: kiln_project_find). The folder must
 * exist; it is made absolute. Returns 0, KILN_ENOTFOUND, KILN_ERANGE (a
 * path too long, the socket path included: at most KILN_SOCK_PATH_MAX
 * bytes) or KILN_EIO. */
int kiln_paths_init(struct kiln_paths *p, const char *project);

/* m (any message of the schema) as a JSON object (proto/json.c): field
 * names as in kiln.proto, enums by name, bytes as hex, strings under
 * kiln_json.h's policy; a oneof member only when set. *err becomes
 * non-zero when something could not be encoded (out of memory). The
 * caller owns the result (json_decref). */
struct json_t;
struct json_t *kiln_proto_json(const ProtobufCMessage *m, int *err);

#endif
