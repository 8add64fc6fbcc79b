/* fuzz/wire.c — libFuzzer target for the wire decoder of proto/wire.c.
 *
 * Each input is decoded as a Request, the way kilnd decodes every message
 * it receives, and as a Reply, the way a client decodes the daemon's
 * answers. Whatever decodes is walked (every string, id and repeated
 * element the handlers would read, and the split-off data bytes) and
 * encoded again, so ASan sees any pointer the decoder got wrong; inputs
 * made of many tiny fields run into the decode budget, so its refusal path
 * (protobuf-c freeing a half-built message) is exercised too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A sink the compiler cannot drop the reads into. */
static volatile size_t sink;

static size_t
bytes_sum(const uint8_t *p, size_t n)
{
	size_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += p[i];
	return sum;
}

static size_t
str_sum(const char *s)
{
	return s != NULL ? strlen(s) : 0;
}

/* Read what a handler reads of a request. */
static size_t
request_walk(const Kiln__Request *r)
{
	size_t sum = str_sum(r->token) + r->version;
	kiln_id id;

	sum += strlen(kiln_proto_request_name(r->body_case));
	switch (r->body_case) {
	case KILN__REQUEST__BODY_BLOB_HAS:
		for (size_t i = 0; i < r->blob_has->n_ids; i++)
			sum += kiln_proto_id_get(r->blob_has->ids[i], &id) == 0 ?
			               id.b[0] : bytes_sum(r->blob_has->ids[i].data,
			                                   r->blob_has->ids[i].len);
		break;
	case KILN__REQUEST__BODY_BLOB_GET:
		sum += bytes_sum(r->blob_get->id.data, r->blob_get->id.len) +
		       str_sum(r->blob_get->profile) + str_sum(r->blob_get->url);
		break;
	case KILN__REQUEST__BODY_BLOB_PUT:
		sum += bytes_sum(r->blob_put->id.data, r->blob_put->id.len) +
		       str_sum(r->blob_put->profile) + str_sum(r->blob_put->url);
		break;
	default:
		break;
	}
	return sum;
}

/* Read what a client reads of a reply. */
static size_t
reply_walk(const Kiln__Reply *r)
{
	size_t sum = str_sum(r->error) + strlen(kiln_proto_status_name(r->status));

	if (r->body_case == KILN__REPLY__BODY_STATUS_REPLY) {
		sum += str_sum(r->status_reply->project) +
		       str_sum(r->status_reply->store);
		for (size_t i = 0; i < r->status_reply->n_listen; i++)
			sum += str_sum(r->status_reply->listen[i]);
	} else if (r->body_case == KILN__REPLY__BODY_POLL_REPLY) {
		for (size_t i = 0; i < r->poll_reply->n_events; i++) {
			const Kiln__Event *e = r->poll_reply->events[i];
			if (e->kind_case == KILN__EVENT__KIND_LOG)
				sum += str_sum(e->log->text);
			else if (e->kind_case == KILN__EVENT__KIND_BLOB_STORED)
				sum += str_sum(e->blob_stored->url) +
				       bytes_sum(e->blob_stored->id.data,
				                 e->blob_stored->id.len);
		}
	}
	return sum;
}

/* Encode m again: the packer walks every field the decoder filled in. */
static void
repack(const ProtobufCMessage *m)
{
	uint8_t *buf;
	size_t len;

	if (kiln_proto_pack_alloc(m, &buf, &len) != 0)
		return;
	if (len > 0)
		sink += buf[len - 1];
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Kiln__Request *req;
	Kiln__Reply *rep;
	const uint8_t *bytes;
	size_t nbytes;

	if (kiln_proto_request_unpack(data, size, &req, &bytes, &nbytes) == 0) {
		sink += request_walk(req) + bytes_sum(bytes, nbytes);
		repack(&req->base);
		kiln_proto_request_free(req);
	}
	if (kiln_proto_reply_unpack(data, size, &rep, &bytes, &nbytes) == 0) {
		sink += reply_walk(rep) + bytes_sum(bytes, nbytes);
		repack(&rep->base);
		kiln_proto_reply_free(rep);
	}
	return 0;
}
