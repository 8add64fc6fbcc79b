/* test_proto — the wire helpers of proto/: envelopes round-trip, blob bytes
 * are found where they lie, anything malformed is KILN_EPROTO, a message
 * whose decode would take more memory than its budget is KILN_ERANGE, the status
 * mapping is one-to-one where it must be, and both ends agree on paths. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_proto.h"
#include "testutil.h"

/* Encode req, then data as its data field (the way kilnd and libkiln
 * send blob chunks) into a malloc'd buffer. */
static uint8_t *
pack_with_data(const Kiln__Request *req, const void *data, size_t n,
               size_t *len)
{
	uint8_t hdr[KILN_DATA_HEADER_MAX];
	size_t head = kiln_proto_size(&req->base);
	size_t nhdr = kiln_proto_data_header(hdr, n);
	uint8_t *buf = malloc(head + nhdr + n);

	assert_non_null(buf);
	kiln_proto_pack(&req->base, buf);
	memcpy(buf + head, hdr, nhdr);
	memcpy(buf + head + nhdr, data, n);
	*len = head + nhdr + n;
	return buf;
}

static void
put_request(Kiln__Request *req, Kiln__BlobPutRequest *put)
{
	kiln_proto_request_init(req);
	kiln__blob_put_request__init(put);
	put->upload = 77;
	put->offset = 4096;
	put->commit = 1;
	put->url = "sprites/hero";
	req->body_case = KILN__REQUEST__BODY_BLOB_PUT;
	req->blob_put = put;
}

static void
chunk_bytes_are_used_where_they_lie(void **state)
{
	Kiln__Request req, *got;
	Kiln__BlobPutRequest put;
	uint8_t chunk[5000], *buf;
	const uint8_t *data;
	size_t len, n;

	(void)state;
	tu_fill(chunk, sizeof chunk, 1);
	put_request(&req, &put);
	buf = pack_with_data(&req, chunk, sizeof chunk, &len);
	assert_kiln(0, kiln_proto_request_unpack(buf, len, &got, &data, &n));
	assert_int_equal(n, sizeof chunk);
	assert_ptr_equal(data, buf + len - sizeof chunk); /* not a copy */
	assert_memory_equal(data, chunk, sizeof chunk);
	assert_int_equal(got->version, KILN_PROTO_VERSION);
	assert_int_equal(got->body_case, KILN__REQUEST__BODY_BLOB_PUT);
	assert_int_equal(got->blob_put->upload, 77);
	assert_int_equal(got->blob_put->offset, 4096);
	assert_true(got->blob_put->commit);
	assert_string_equal(got->blob_put->url, "sprites/hero");
	kiln_proto_request_free(got);
	free(buf);
}

static void
protobuf_c_puts_data_last_too(void **state)
{
	Kiln__Request req, *got;
	Kiln__BlobPutRequest put;
	uint8_t chunk[300], *buf;
	const uint8_t *data;
	size_t len, n;

	(void)state;
	tu_fill(chunk, sizeof chunk, 2);
	put_request(&req, &put);
	req.data.data = chunk;
	req.data.len = sizeof chunk;
	assert_kiln(0, kiln_proto_pack_alloc(&req.base, &buf, &len));
	assert_kiln(0, kiln_proto_request_unpack(buf, len, &got, &data, &n));
	assert_int_equal(n, sizeof chunk);
	assert_true(data > buf && data < buf + len); /* found in place */
	assert_memory_equal(data, chunk, sizeof chunk);
	assert_int_equal(got->blob_put->upload, 77);
	kiln_proto_request_free(got);
	free(buf);
}

static void
data_first_falls_back_to_a_decoded_copy(void **state)
{
	/* field 100 "abc", then version 1: legal protobuf, data not last */
	static const uint8_t msg[] = {0xa2, 0x06, 3, 'a', 'b', 'c', 0x08, 0x01};
	Kiln__Request *got;
	const uint8_t *data;
	size_t n;

	(void)state;
	assert_kiln(0, kiln_proto_request_unpack(msg, sizeof msg, &got, &data, &n));
	assert_int_equal(n, 3);
	assert_memory_equal(data, "abc", 3);
	assert_true(data < msg || data >= msg + sizeof msg); /* got's own */
	assert_int_equal(got->version, 1);
	kiln_proto_request_free(got);
}

static void
data_header_matches_protobuf_c(void **state)
{
	static const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 1u << 20,
	                               (1u << 21) + 3};
	Kiln__Reply rep;
	uint8_t hdr[KILN_DATA_HEADER_MAX], *want, *mine;
	size_t head, nhdr, wlen;

	(void)state;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		uint8_t *bytes = calloc(n ? n : 1, 1);
		assert_non_null(bytes);
		kiln_proto_reply_init(&rep);
		rep.status = KILN__STATUS__STATUS_NOT_FOUND;
		head = kiln_proto_size(&rep.base);
		rep.data.data = bytes;
		rep.data.len = n;
		assert_kiln(0, kiln_proto_pack_alloc(&rep.base, &want, &wlen));
		nhdr = n ? kiln_proto_data_header(hdr, n) : 0; /* proto3: no empty */
		assert_int_equal(wlen, head + nhdr + n);
		assert_non_null(mine = malloc(wlen));
		rep.data.len = 0;
		kiln_proto_pack(&rep.base, mine);
		memcpy(mine + head, hdr, nhdr);
		memcpy(mine + head + nhdr, bytes, n);
		if (memcmp(mine, want, wlen) != 0)
			fail_msg("a data field of %zu bytes encodes differently", n);
		free(mine);
		free(want);
		free(bytes);
	}
}

static void
malformed_input_is_eproto(void **state)
{
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                  0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	static const uint8_t group[] = {0x0b, 0x0c};       /* wire type 3 */
	static const uint8_t long_len[] = {0x1a, 0x7f, 1}; /* 127 of 1 bytes */
	Kiln__Request req, *got;
	Kiln__BlobPutRequest put;
	uint8_t chunk[1000], *buf;
	const uint8_t *data;
	size_t len, n;

	(void)state;
	assert_kiln(KILN_EPROTO, kiln_proto_request_unpack(garbage, sizeof garbage,
	                                                   &got, &data, &n));
	assert_kiln(KILN_EPROTO, kiln_proto_request_unpack(group, sizeof group,
	                                                   &got, &data, &n));
	assert_kiln(KILN_EPROTO, kiln_proto_request_unpack(long_len,
	                                                   sizeof long_len, &got,
	                                                   &data, &n));
	/* Cut anywhere inside the chunk: never a message. */
	tu_fill(chunk, sizeof chunk, 3);
	put_request(&req, &put);
	buf = pack_with_data(&req, chunk, sizeof chunk, &len);
	for (size_t cut = len - sizeof chunk; cut < len; cut += 37)
		if (kiln_proto_request_unpack(buf, cut, &got, &data, &n) !=
		    KILN_EPROTO)
			fail_msg("a message cut at %zu of %zu bytes was accepted", cut,
			         len);
	free(buf);
}

static void
empty_message_decodes_without_a_version(void **state)
{
	Kiln__Request *got;
	const uint8_t *data;
	size_t n;

	(void)state;
	assert_kiln(0, kiln_proto_request_unpack("", 0, &got, &data, &n));
	assert_int_equal(got->version, 0); /* kilnd answers BAD_VERSION */
	assert_int_equal(got->body_case, KILN__REQUEST__BODY__NOT_SET);
	assert_null(data);
	kiln_proto_request_free(got);
}

static void
unknown_request_types_are_kept_as_unknown_fields(void **state)
{
	/* version 1, field 40 (a request type from the future), empty */
	static const uint8_t msg[] = {0x08, 0x01, 0xc2, 0x02, 0x00};
	Kiln__Request *got;
	const uint8_t *data;
	size_t n;

	(void)state;
	assert_kiln(0, kiln_proto_request_unpack(msg, sizeof msg, &got, &data, &n));
	assert_int_equal(got->body_case, KILN__REQUEST__BODY__NOT_SET);
	assert_int_equal(got->base.n_unknown_fields, 1);
	assert_int_equal(got->base.unknown_fields[0].tag, 40);
	kiln_proto_request_free(got);
}

/* n bytes of one field repeated: its key (1 or 2 bytes) and, for a varint,
 * a zero value or, for a length-delimited one, an empty value. */
static uint8_t *
repeat_field(const uint8_t *field, size_t nfield, size_t n)
{
	uint8_t *buf = malloc(n);

	assert_non_null(buf);
	for (size_t i = 0; i + nfield <= n; i += nfield)
		memcpy(buf + i, field, nfield);
	return buf;
}

static void
tiny_fields_are_refused_by_the_decode_budget(void **state)
{
	/* Each is a legal protobuf encoding of 2 MiB that protobuf-c would
	 * decode into 32 to 40 times its size. */
	static const struct {
		const char *name;
		uint8_t field[3];
		size_t nfield;
	} cases[] = {
		{"unknown field 1000, varint 0", {0xc0, 0x3e, 0x00}, 3},
		{"version 1, again and again", {0x08, 0x01}, 2},
		{"unknown field 1000, empty bytes", {0xc2, 0x3e, 0x00}, 3},
	};
	/* blob_has holding 2 MiB of empty ids: repeated elements of a
	 * submessage count too */
	static const uint8_t has_head[] = {0x08, 0x01, 0x62, 0xfa, 0xff, 0x7f};
	size_t n = 2u << 20;
	Kiln__Request *got;
	Kiln__Reply *rep;
	const uint8_t *data;
	size_t nd;
	uint8_t *buf;

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t len = n - n % cases[i].nfield;
		buf = repeat_field(cases[i].field, cases[i].nfield, len);
		if (kiln_proto_request_unpack(buf, len, &got, &data, &nd) !=
		    KILN_ERANGE)
			fail_msg("%s: a request of %zu bytes was not refused", cases[i].name,
			         len);
		if (kiln_proto_reply_unpack(buf, len, &rep, &data, &nd) != KILN_ERANGE)
			fail_msg("%s: a reply of %zu bytes was not refused", cases[i].name,
			         len);
		free(buf);
	}
	/* 0x1ffffa bytes of "0a 00" after a 6-byte head: 2 MiB in all */
	buf = repeat_field((const uint8_t[]){0x0a, 0x00}, 2, n);
	memcpy(buf, has_head, sizeof has_head);
	assert_kiln(KILN_ERANGE, kiln_proto_request_unpack(buf, n, &got, &data, &nd));
	free(buf);
}

static void
large_well_formed_requests_fit_the_budget(void **state)
{
	Kiln__Request req, *got;
	Kiln__BlobPutRequest put;
	Kiln__BlobHasRequest has;
	ProtobufCBinaryData ids[KILN_HAS_MAX];
	uint8_t hdr[KILN_DATA_HEADER_MAX], *chunk, *buf, *first;
	const uint8_t *data;
	size_t n = KILN_MAX_MESSAGE_DEFAULT - 64, len, nd, head, nhdr;
	kiln_id id;

	(void)state;
	/* A 2 MiB blob put, bytes last: decoded without them. */
	assert_non_null(chunk = malloc(n));
	tu_fill(chunk, n, 4);
	put_request(&req, &put);
	buf = pack_with_data(&req, chunk, n, &len);
	assert_true(len <= KILN_MAX_MESSAGE_DEFAULT);
	assert_kiln(0, kiln_proto_request_unpack(buf, len, &got, &data, &nd));
	assert_int_equal(nd, n);
	kiln_proto_request_free(got);
	/* The same bytes first: protobuf-c copies them, within budget. */
	nhdr = kiln_proto_data_header(hdr, n);
	head = len - n - nhdr;
	assert_non_null(first = malloc(len));
	memcpy(first, hdr, nhdr);
	memcpy(first + nhdr, chunk, n);
	memcpy(first + nhdr + n, buf, head);
	assert_kiln(0, kiln_proto_request_unpack(first, len, &got, &data, &nd));
	assert_int_equal(nd, n);
	assert_memory_equal(data, chunk, n);
	assert_int_equal(got->blob_put->upload, 77);
	kiln_proto_request_free(got);
	free(first);
	free(buf);
	free(chunk);
	/* The largest BlobHasRequest, the one with the most fields. */
	kiln_proto_request_init(&req);
	kiln__blob_has_request__init(&has);
	tu_fill(id.b, sizeof id.b, 5);
	for (size_t i = 0; i < KILN_HAS_MAX; i++)
		ids[i] = kiln_proto_id_ref(&id);
	has.ids = ids;
	has.n_ids = KILN_HAS_MAX;
	req.body_case = KILN__REQUEST__BODY_BLOB_HAS;
	req.blob_has = &has;
	assert_kiln(0, kiln_proto_pack_alloc(&req.base, &buf, &len));
	assert_kiln(0, kiln_proto_request_unpack(buf, len, &got, &data, &nd));
	assert_int_equal(got->blob_has->n_ids, KILN_HAS_MAX);
	kiln_proto_request_free(got);
	free(buf);
}

static void
decode_budget_saturates(void **state)
{
	(void)state;
	assert_int_equal(kiln_proto_decode_budget(0), KILN_DECODE_SLACK);
	assert_int_equal(kiln_proto_decode_budget(1000),
	                 KILN_DECODE_RATIO * 1000 + KILN_DECODE_SLACK);
	assert_true(kiln_proto_decode_budget(SIZE_MAX / 2) == SIZE_MAX);
	assert_true(kiln_proto_decode_budget(SIZE_MAX) == SIZE_MAX);
}

static void
status_mapping(void **state)
{
	static const struct {
		int code;
		Kiln__Status status;
		int back; /* what a client reports */
	} cases[] = {
		{0, KILN__STATUS__STATUS_OK, 0},
		{KILN_EINVAL, KILN__STATUS__STATUS_BAD_REQUEST, KILN_EINVAL},
		{KILN_EPROTO, KILN__STATUS__STATUS_BAD_REQUEST, KILN_EINVAL},
		{KILN_EVERSION, KILN__STATUS__STATUS_BAD_VERSION, KILN_ENOTSUP},
		{KILN_ENOTSUP, KILN__STATUS__STATUS_UNSUPPORTED, KILN_ENOTSUP},
		{KILN_EAUTH, KILN__STATUS__STATUS_UNAUTHENTICATED, KILN_EAUTH},
		{KILN_ENOTFOUND, KILN__STATUS__STATUS_NOT_FOUND, KILN_ENOTFOUND},
		{KILN_ECORRUPT, KILN__STATUS__STATUS_CORRUPT, KILN_ECORRUPT},
		{KILN_ENOSPC, KILN__STATUS__STATUS_NO_SPACE, KILN_ENOSPC},
		{KILN_EIO, KILN__STATUS__STATUS_IO, KILN_EIO},
		{KILN_EBUSY, KILN__STATUS__STATUS_BUSY, KILN_EBUSY},
		{KILN_ERANGE, KILN__STATUS__STATUS_TOO_LARGE, KILN_ERANGE},
		{KILN_ECLOSED, KILN__STATUS__STATUS_STOPPING, KILN_ECLOSED},
		{KILN_EREADONLY, KILN__STATUS__STATUS_READ_ONLY, KILN_EREADONLY},
		{KILN_EDB, KILN__STATUS__STATUS_INTERNAL, KILN_EIO},
		{KILN_ENOMEM, KILN__STATUS__STATUS_INTERNAL, KILN_EIO},
	};

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		Kiln__Status st = kiln_proto_status_of(cases[i].code);
		if (st != cases[i].status || kiln_proto_err_of(st) != cases[i].back)
			fail_msg("%s: status %d (want %d), back %d (want %d)",
			         kiln_strerror(cases[i].code), st, cases[i].status,
			         kiln_proto_err_of(st), cases[i].back);
		assert_string_not_equal(kiln_proto_status_name(st), "unknown-status");
	}
	assert_kiln(KILN_EPROTO, kiln_proto_err_of((Kiln__Status)999));
}

static void
chunks_leave_room_for_the_envelope(void **state)
{
	(void)state;
	assert_int_equal(kiln_proto_chunk_max(KILN_MAX_MESSAGE_DEFAULT),
	                 KILN_MAX_MESSAGE_DEFAULT - KILN_ENVELOPE_ROOM);
	assert_int_equal(kiln_proto_chunk_max(1000), 0);
	assert_true(kiln_proto_chunk_max(KILN_MAX_MESSAGE_MIN) > 0);
}

static void
paths_of_a_project(void **state)
{
	struct kiln_paths p;
	char real[PATH_MAX], want[PATH_MAX + 64];

	assert_non_null(realpath(tu_dir(state), real));
	assert_kiln(0, kiln_paths_init(&p, tu_dir(state)));
	assert_string_equal(p.project, real);
	snprintf(want, sizeof want, "%s/.kiln/kilnd.sock", real);
	assert_string_equal(p.sock, want);
	snprintf(want, sizeof want, "ipc://%s/.kiln/kilnd.sock", real);
	assert_string_equal(p.url, want);
	snprintf(want, sizeof want, "%s/.kiln/store", real);
	assert_string_equal(p.store, want);
	assert_kiln(KILN_ENOTFOUND, kiln_paths_init(&p, tu_path(state, "none")));
}

static void
socket_paths_too_long_are_refused(void **state)
{
	char deep[PATH_MAX];
	size_t n;

	n = (size_t)snprintf(deep, sizeof deep, "%s/", tu_dir(state));
	while (n < 120) { /* one more folder level until the path is long */
		deep[n++] = 'd';
		deep[n] = '\0';
	}
	assert_int_equal(mkdir(deep, 0700), 0);
	{
		struct kiln_paths p;
		assert_kiln(KILN_ERANGE, kiln_paths_init(&p, deep));
	}
}

static void
the_project_is_the_nearest_folder_with_kiln_yaml(void **state)
{
	char cwd[PATH_MAX], found[PATH_MAX], real[PATH_MAX];

	assert_non_null(getcwd(cwd, sizeof cwd));
	tu_write_file(tu_path(state, "kiln.yaml"), "kiln: 1\n", 8);
	assert_int_equal(mkdir(tu_path(state, "art"), 0700), 0);
	assert_int_equal(mkdir(tu_path(state, "art/sprites"), 0700), 0);
	assert_int_equal(chdir(tu_path(state, "art/sprites")), 0);
	assert_kiln(0, kiln_project_find(found, sizeof found));
	assert_int_equal(chdir(cwd), 0);
	assert_non_null(realpath(tu_dir(state), real));
	assert_string_equal(found, real);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chunk_bytes_are_used_where_they_lie),
		cmocka_unit_test(protobuf_c_puts_data_last_too),
		cmocka_unit_test(data_first_falls_back_to_a_decoded_copy),
		cmocka_unit_test(data_header_matches_protobuf_c),
		cmocka_unit_test(malformed_input_is_eproto),
		cmocka_unit_test(empty_message_decodes_without_a_version),
		cmocka_unit_test(unknown_request_types_are_kept_as_unknown_fields),
		cmocka_unit_test(tiny_fields_are_refused_by_the_decode_budget),
		cmocka_unit_test(large_well_formed_requests_fit_the_budget),
		cmocka_unit_test(decode_budget_saturates),
		cmocka_unit_test(status_mapping),
		cmocka_unit_test(chunks_leave_room_for_the_envelope),
		cmocka_unit_test_setup_teardown(paths_of_a_project, tu_setup_dir,
		                                tu_teardown_dir),
		cmocka_unit_test_setup_teardown(socket_paths_too_long_are_refused,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			the_project_is_the_nearest_folder_with_kiln_yaml, tu_setup_dir,
			tu_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
