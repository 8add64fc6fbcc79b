/* error.c — messages for KILN_E* codes and the one errno mapping. */
#include <errno.h>
#include <stddef.h>

#include "kiln_error.h"

static const struct {
	int code;
	const char *msg;
} messages[] = {
	{KILN_OK, "success"},
	{KILN_EINVAL, "invalid argument"},
	{KILN_ENOMEM, "out of memory"},
	{KILN_EIO, "input/output error"},
	{KILN_ENOSPC, "no space left on device"},
	{KILN_ENOTFOUND, "not found"},
	{KILN_ECORRUPT, "data is corrupt (content does not match its hash or format)"},
	{KILN_ENOTSTORE, "not a kiln store"},
	{KILN_EVERSION, "written by a newer version of kiln"},
	{KILN_EACCES, "permission denied"},
	{KILN_EREADONLY, "open read-only (a store, or a shared cache set read-only)"},
	{KILN_ERANGE, "value out of range"},
	{KILN_EBUSY, "resource busy"},
	{KILN_EDB, "database error"},
	{KILN_EEXIST, "already exists"},
	{KILN_EPROTO, "malformed message (protocol error)"},
	{KILN_ETIMEDOUT, "timed out"},
	{KILN_ENODAEMON, "no daemon running, and none could be started"},
	{KILN_EAUTH, "refused: missing or wrong token, or one whose role may "
	             "not send this request"},
	{KILN_ENOTSUP, "not supported by the other side"},
	{KILN_ECLOSED, "connection closed (the daemon stopped or went away)"},
	{KILN_EBADPROJECT, "the project's descriptions have errors"},
	{KILN_EFAILED, "a build step failed"},
	{KILN_ECANCELLED, "cancelled"},
	{KILN_EOUTSIDE, "a symlink on the path leads out of the project"},
	{KILN_ETLS, "the TLS handshake failed: the daemon's certificate did not "
	            "verify against --tls-ca, or does not name the address connected to; "
	            "or the daemon asks for a client certificate (--tls-cert/--tls-key) "
	            "signed by a CA it trusts"},
	{KILN_EDBCHANGED, "the store's database file changed under the process that "
	                  "has it open (cut short); run 'kiln fsck --repair'"},
};

const char *
kiln_strerror(int code)
{
	for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++)
		if (messages[i].code == code)
			return messages[i].msg;
	return "unknown error";
}

int
kiln_err_from_errno(int err)
{
	switch (err) {
	case 0: return KILN_OK;
	case ENOMEM: return KILN_ENOMEM;
	case ENOSPC:
	case EDQUOT:
	case EFBIG: return KILN_ENOSPC;
	case ENOENT:
	case ENOTDIR: return KILN_ENOTFOUND;
	case EACCES:
	case EPERM: return KILN_EACCES;
	case EROFS: return KILN_EREADONLY;
	case EEXIST: return KILN_EEXIST;
	case EINVAL:
	case ENAMETOOLONG: return KILN_EINVAL;
	case EBUSY:
	case EMFILE:
	case ENFILE: return KILN_EBUSY;
	default: return KILN_EIO;
	}
}
