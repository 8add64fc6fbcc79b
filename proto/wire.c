/* wire.c — packing and unpacking kiln.proto's envelopes.
 *
 * protobuf-c does the encoding. What this file adds is the handling of the
 * bulk `data` field (number 100, encoded last by protobuf-c since it has the
 * highest number): a receiver finds it by walking the top-level fields and,
 * when it is the last one, decodes only what precedes it and hands the
 * bytes back where they lie, so a 1 MiB chunk is never copied to be read.
 *
 * It also bounds what a decode may allocate. protobuf-c keeps 32 bytes of
 * scan state for every field it meets and a copy of every unknown field or
 * repeated element, so 2 MiB of two-byte fields would cost it 64 MiB: the
 * decode runs on a counting allocator and fails past
 * kiln_proto_decode_budget(len). Every function here is reentrant. */
#include <stdlib.h>
#include <string.h>

#include "kiln_proto.h"

#define DATA_FIELD 100
#define WIRE_VARINT 0
#define WIRE_64BIT 1
#define WIRE_LEN 2
#define WIRE_32BIT 5

uint32_t
kiln_proto_chunk_max(size_t max_message)
{
	size_t room = max_message > KILN_ENVELOPE_ROOM ?
	                      max_message - KILN_ENVELOPE_ROOM : 0;

	if (room > UINT32_MAX)
		room = UINT32_MAX;
	return (uint32_t)room;
}

void
kiln_proto_request_init(Kiln__Request *req)
{
	kiln__request__init(req);
	req->version = KILN_PROTO_VERSION;
}

void
kiln_proto_reply_init(Kiln__Reply *rep)
{
	kiln__reply__init(rep);
	rep->version = KILN_PROTO_VERSION;
}

/* Read a varint at *pos (advanced past it). Returns 0 or KILN_EPROTO. */
static int
varint_get(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return KILN_EPROTO;
		uint8_t b = p[(*pos)++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return 0;
	}
	return KILN_EPROTO;
}

/* Step *pos over the value of a field of wire type wt. */
static int
field_skip(const uint8_t *p, size_t len, size_t *pos, unsigned wt)
{
	uint64_t v;
	int rv;

	switch (wt) {
	case WIRE_VARINT: return varint_get(p, len, pos, &v);
	case WIRE_64BIT: v = 8; break;
	case WIRE_32BIT: v = 4; break;
	case WIRE_LEN:
		if ((rv = varint_get(p, len, pos, &v)) != 0)
			return rv;
		break;
	default: return KILN_EPROTO; /* groups: not in kiln.proto */
	}
	if (v > len - *pos)
		return KILN_EPROTO;
	*pos += v;
	return 0;
}

/* Whether the last top-level field of the message is `data`: then *head
 * is where that field starts, and *dstart and *dlen locate its bytes. */
static int
data_is_last(const uint8_t *p, size_t len, size_t *head, size_t *dstart,
             size_t *dlen)
{
	size_t pos = 0, start, value;
	uint64_t key, n;

	while (pos < len) {
		start = pos;
		if (varint_get(p, len, &pos, &key) != 0)
			return 0;
		value = pos;
		if (field_skip(p, len, &pos, key & 7) != 0)
			return 0;
		if (pos == len && key >> 3 == DATA_FIELD && (key & 7) == WIRE_LEN) {
			if (varint_get(p, len, &value, &n) != 0)
				return 0;
			*head = start;
			*dstart = value;
			*dlen = n;
			return 1;
		}
	}
	return 0;
}

size_t
kiln_proto_decode_budget(size_t len)
{
	size_t slack = KILN_DECODE_SLACK;

	if (len > (SIZE_MAX - slack) / KILN_DECODE_RATIO)
		return SIZE_MAX;
	return KILN_DECODE_RATIO * len + slack;
}

/* What one decode has allocated so far, and why it stopped if it did. */
struct budget {
	size_t used, limit;
	int over;       /* an allocation would have passed the limit */
	int oom;        /* malloc said no */
};

/* protobuf-c's allocation hook. Each block is charged as glibc's malloc
 * would take it (a 16-byte header, 16-byte rounding) and the charges are
 * never given back on free: what a decode touched, freed or not, is what
 * it cost. The blocks are plain malloc'd ones, so a message decoded here
 * is freed with protobuf-c's default allocator. */
static void *
budget_alloc(void *data, size_t size)
{
	struct budget *b = data;
	size_t cost = size > SIZE_MAX - 31 ? SIZE_MAX : (size + 31) & ~(size_t)15;
	void *p;

	if (cost > b->limit - b->used) {
		b->over = 1;
		return NULL;
	}
	b->used += cost;
	if ((p = malloc(size)) == NULL)
		b->oom = 1;
	return p;
}

static void
budget_free(void *data, void *p)
{
	(void)data;
	free(p);
}

/* Unpack a message of descriptor desc, splitting out the data field; the
 * data field of the unpacked struct lies at data_off. */
static int
unpack_split(const ProtobufCMessageDescriptor *desc, size_t data_off,
             const void *buf, size_t len, ProtobufCMessage **m,
             const uint8_t **data, size_t *ndata)
{
	const uint8_t *p = buf;
	size_t head = len, dstart = 0, dlen = 0;
	int split = data_is_last(p, len, &head, &dstart, &dlen);
	struct budget b = {.limit = kiln_proto_decode_budget(len)};
	ProtobufCAllocator a = {budget_alloc, budget_free, &b};
	ProtobufCBinaryData *own;

	*m = protobuf_c_message_unpack(desc, &a, head, p);
	if (*m == NULL)
		return b.over ? KILN_ERANGE : b.oom ? KILN_ENOMEM : KILN_EPROTO;
	own = (ProtobufCBinaryData *)((char *)*m + data_off);
	if (split) {
		*data = p + dstart;
		*ndata = dlen;
	} else {
		*data = own->len ? own->data : NULL;
		*ndata = own->len;
	}
	return 0;
}

int
kiln_proto_unpack_bounded(const ProtobufCMessageDescriptor *desc,
                          const void *buf, size_t len, ProtobufCMessage **m)
{
	struct budget b = {.limit = kiln_proto_decode_budget(len)};
	ProtobufCAllocator a = {budget_alloc, budget_free, &b};

	*m = protobuf_c_message_unpack(desc, &a, len, buf);
	if (*m == NULL)
		return b.over ? KILN_ERANGE : b.oom ? KILN_ENOMEM : KILN_EPROTO;
	return 0;
}

int
kiln_proto_request_unpack(const void *buf, size_t len, Kiln__Request **req,
                          const uint8_t **data, size_t *ndata)
{
	return unpack_split(&kiln__request__descriptor,
	                    offsetof(Kiln__Request, data), buf, len,
	                    (ProtobufCMessage **)req, data, ndata);
}

void
kiln_proto_request_free(Kiln__Request *req)
{
	if (req != NULL)
		kiln__request__free_unpacked(req, NULL);
}

int
kiln_proto_reply_unpack(const void *buf, size_t len, Kiln__Reply **rep,
                        const uint8_t **data, size_t *ndata)
{
	return unpack_split(&kiln__reply__descriptor, offsetof(Kiln__Reply, data),
	                    buf, len, (ProtobufCMessage **)rep, data, ndata);
}

void
kiln_proto_reply_free(Kiln__Reply *rep)
{
	if (rep != NULL)
		kiln__reply__free_unpacked(rep, NULL);
}

size_t
kiln_proto_size(const ProtobufCMessage *m)
{
	return protobuf_c_message_get_packed_size(m);
}

size_t
kiln_proto_pack(const ProtobufCMessage *m, void *buf)
{
	return protobuf_c_message_pack(m, buf);
}

int
kiln_proto_pack_alloc(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	if ((*buf = malloc(*len ? *len : 1)) == NULL)
		return KILN_ENOMEM;
	protobuf_c_message_pack(m, *buf);
	return 0;
}

/* Write v as a varint at out; returns its length. */
static size_t
varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

size_t
kiln_proto_data_header(uint8_t out[KILN_DATA_HEADER_MAX], size_t ndata)
{
	size_t n = varint_put(out, (uint64_t)DATA_FIELD << 3 | WIRE_LEN);

	return n + varint_put(out + n, ndata);
}

int
kiln_proto_id_get(ProtobufCBinaryData b, kiln_id *id)
{
	if (b.len != sizeof(id->b))
		return KILN_EINVAL;
	memcpy(id->b, b.data, sizeof(id->b));
	return 0;
}

ProtobufCBinaryData
kiln_proto_id_ref(const kiln_id *id)
{
	ProtobufCBinaryData b = {sizeof(id->b), (uint8_t *)id->b};

	return b;
}
