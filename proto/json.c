/* json.c — any message of the wire schema as JSON, from protobuf-c's own
 * descriptors: field names as in kiln.proto, enums by their value names,
 * bytes (hashes) as lowercase hex, strings under kiln_json.h's UTF-8
 * policy. Used by the daemon's dashboard (docs/ui.md), so what the page
 * sees is exactly the wire's events and replies, field for field. A oneof
 * member appears only when it is the one set; every other field always.
 * A 64-bit integer beyond 2^53 is a decimal string. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_error.h"
#include "kiln_hex.h"
#include "kiln_json.h"
#include "kiln_proto.h"

/* Deeper nesting than the schema has is refused (a malformed message). */
#define JSON_MAX_DEPTH 8

/* Integers past 2^53 lose digits in JavaScript (a daemon's epoch is 64
 * random bits): those are written as decimal strings instead. */
#define JSON_SAFE_INT ((int64_t)1 << 53)

static json_t *message_json(const ProtobufCMessage *m, int depth, int *err);

static json_t *
big_json(const char *fmt, ...)
{
	char buf[32];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return json_string(buf);
}

static json_t *
bytes_json(const ProtobufCBinaryData *b)
{
	char *hex;
	json_t *v;

	if (b->len > (1u << 20) || (hex = malloc(b->len * 2 + 1)) == NULL)
		return NULL;
	kiln_hex_encode(b->data, b->len, hex);
	v = json_string(hex);
	free(hex);
	return v;
}

static json_t *
enum_json(const ProtobufCEnumDescriptor *d, int value)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, value);

	return ev != NULL ? json_string(ev->name) : json_integer(value);
}

/* One value of field f at p; *replaced set for a string that was fixed. */
static json_t *
value_json(const ProtobufCFieldDescriptor *f, const void *p, int depth,
           int *replaced, int *err)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: {
		int64_t i = *(const int64_t *)p;
		if (i > JSON_SAFE_INT || i < -JSON_SAFE_INT)
			return big_json("%" PRId64, i);
		return json_integer(i);
	}
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: {
		uint64_t u = *(const uint64_t *)p;
		if (u > JSON_SAFE_INT)
			return big_json("%" PRIu64, u);
		return json_integer((json_int_t)u);
	}
	case PROTOBUF_C_TYPE_FLOAT:
		return json_real(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_real(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM:
		return enum_json(f->descriptor, *(const int *)p);
	case PROTOBUF_C_TYPE_STRING:
		return kiln_json_string(*(char *const *)p, replaced);
	case PROTOBUF_C_TYPE_BYTES:
		return bytes_json(p);
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(ProtobufCMessage *const *)p == NULL)
			return json_null();
		return message_json(*(ProtobufCMessage *const *)p, depth + 1, err);
	}
	return NULL;
}

/* The size of one element of a repeated field of f's type. */
static size_t
elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
	case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
	default: return 4;
	}
}

/* obj[f->name] = the field's value (or list), with its _replaced flag. */
static void
field_json(json_t *obj, const ProtobufCMessage *m,
           const ProtobufCFieldDescriptor *f, int depth, int *err)
{
	const char *base = (const char *)m;
	int replaced = 0;
	json_t *v;

	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t n = *(const size_t *)(base + f->quantifier_offset);
		const char *arr = *(char *const *)(base + f->offset);
		v = json_array();
		for (size_t i = 0; i < n && v != NULL; i++)
			*err |= kiln_json_push(v, value_json(f, arr + i * elem_size(f),
			                                     depth, &replaced, err));
	} else {
		v = value_json(f, base + f->offset, depth, &replaced, err);
	}
	*err |= kiln_json_put(obj, f->name, v);
	if (replaced) {
		char name[128];
		snprintf(name, sizeof name, "%s_replaced", f->name);
		*err |= kiln_json_bool(obj, name, 1);
	}
}

static json_t *
message_json(const ProtobufCMessage *m, int depth, int *err)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *obj;

	if (depth > JSON_MAX_DEPTH) {
		*err |= KILN_EINVAL;
		return json_null();
	}
	obj = json_object();
	for (unsigned i = 0; i < d->n_fields && obj != NULL; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		field_json(obj, m, f, depth, err);
	}
	return obj;
}

json_t *
kiln_proto_json(const ProtobufCMessage *m, int *err)
{
	json_t *v = message_json(m, 0, err);

	if (v == NULL)
		*err |= KILN_ENOMEM;
	return v;
}
