/* status.c — the one mapping between KILN_E* codes and the wire's Status,
 * and the names of statuses and request types for logs and messages. */
#include "kiln_proto.h"

static const struct {
	Kiln__Status status;
	int code;          /* what a client reports for status */
	const char *name;
} statuses[] = {
	{KILN__STATUS__STATUS_OK, 0, "ok"},
	{KILN__STATUS__STATUS_BAD_REQUEST, KILN_EINVAL, "bad-request"},
	{KILN__STATUS__STATUS_BAD_VERSION, KILN_ENOTSUP, "bad-version"},
	{KILN__STATUS__STATUS_UNSUPPORTED, KILN_ENOTSUP, "unsupported"},
	{KILN__STATUS__STATUS_UNAUTHENTICATED, KILN_EAUTH, "unauthenticated"},
	{KILN__STATUS__STATUS_NOT_FOUND, KILN_ENOTFOUND, "not-found"},
	{KILN__STATUS__STATUS_CORRUPT, KILN_ECORRUPT, "corrupt"},
	{KILN__STATUS__STATUS_NO_SPACE, KILN_ENOSPC, "no-space"},
	{KILN__STATUS__STATUS_IO, KILN_EIO, "io"},
	{KILN__STATUS__STATUS_BUSY, KILN_EBUSY, "busy"},
	{KILN__STATUS__STATUS_TOO_LARGE, KILN_ERANGE, "too-large"},
	{KILN__STATUS__STATUS_STOPPING, KILN_ECLOSED, "stopping"},
	{KILN__STATUS__STATUS_INTERNAL, KILN_EIO, "internal"},
	{KILN__STATUS__STATUS_READ_ONLY, KILN_EREADONLY, "read-only"},
	{KILN__STATUS__STATUS_BAD_PROJECT, KILN_EBADPROJECT, "bad-project"},
};
#define NSTATUSES (sizeof(statuses) / sizeof(statuses[0]))

Kiln__Status
kiln_proto_status_of(int code)
{
	switch (code) {
	case 0: return KILN__STATUS__STATUS_OK;
	case KILN_EINVAL:
	case KILN_EPROTO: return KILN__STATUS__STATUS_BAD_REQUEST;
	case KILN_EVERSION: return KILN__STATUS__STATUS_BAD_VERSION;
	case KILN_ENOTSUP: return KILN__STATUS__STATUS_UNSUPPORTED;
	case KILN_EAUTH: return KILN__STATUS__STATUS_UNAUTHENTICATED;
	case KILN_ENOTFOUND: return KILN__STATUS__STATUS_NOT_FOUND;
	/* A database cut short under the daemon is damage too: clients are
	 * told what and where in Reply.error (daemon/handlers.c). */
	case KILN_ECORRUPT:
	case KILN_EDBCHANGED: return KILN__STATUS__STATUS_CORRUPT;
	case KILN_ENOSPC: return KILN__STATUS__STATUS_NO_SPACE;
	case KILN_EIO: return KILN__STATUS__STATUS_IO;
	case KILN_EBUSY: return KILN__STATUS__STATUS_BUSY;
	case KILN_ERANGE: return KILN__STATUS__STATUS_TOO_LARGE;
	case KILN_ECLOSED: return KILN__STATUS__STATUS_STOPPING;
	case KILN_EREADONLY: return KILN__STATUS__STATUS_READ_ONLY;
	case KILN_EBADPROJECT: return KILN__STATUS__STATUS_BAD_PROJECT;
	default: return KILN__STATUS__STATUS_INTERNAL;
	}
}

int
kiln_proto_err_of(Kiln__Status status)
{
	for (size_t i = 0; i < NSTATUSES; i++)
		if (statuses[i].status == status)
			return statuses[i].code;
	return KILN_EPROTO;
}

const char *
kiln_proto_status_name(Kiln__Status status)
{
	for (size_t i = 0; i < NSTATUSES; i++)
		if (statuses[i].status == status)
			return statuses[i].name;
	return "unknown-status";
}

const char *
kiln_proto_request_name(Kiln__Request__BodyCase body)
{
	switch (body) {
	case KILN__REQUEST__BODY_STATUS: return "status";
	case KILN__REQUEST__BODY_STOP: return "stop";
	case KILN__REQUEST__BODY_BLOB_HAS: return "blob-has";
	case KILN__REQUEST__BODY_BLOB_GET: return "blob-get";
	case KILN__REQUEST__BODY_BLOB_PUT: return "blob-put";
	case KILN__REQUEST__BODY_SUBSCRIBE: return "subscribe";
	case KILN__REQUEST__BODY_UNSUBSCRIBE: return "unsubscribe";
	case KILN__REQUEST__BODY_POLL: return "poll";
	case KILN__REQUEST__BODY_BUILD: return "build";
	case KILN__REQUEST__BODY_CANCEL: return "cancel";
	case KILN__REQUEST__BODY_BUILD_STATUS: return "build-status";
	case KILN__REQUEST__BODY_WHY: return "why";
	case KILN__REQUEST__BODY_DEPS: return "deps";
	case KILN__REQUEST__BODY_RDEPS: return "rdeps";
	case KILN__REQUEST__BODY_NEED: return "need";
	case KILN__REQUEST__BODY_UI: return "ui";
	default: return "unknown";
	}
}
