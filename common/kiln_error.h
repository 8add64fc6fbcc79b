/* kiln_error.h — the error codes every kiln library returns.
 *
 * Success is 0 everywhere. Failures are negative KILN_E* codes in the band
 * -20099..-20001, chosen so they never collide with LMDB's (-30799..-30780)
 * or with negated errno values. When you add a code, add its message to
 * common/error.c and never renumber an existing one: the wire protocol maps
 * them in one place and old clients keep their meaning. */
#ifndef KILN_ERROR_H
#define KILN_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_err {
	KILN_OK = 0,
	KILN_EINVAL = -20001,    /* malformed argument or input */
	KILN_ENOMEM = -20002,    /* out of memory */
	KILN_EIO = -20003,       /* I/O error from the operating system */
	KILN_ENOSPC = -20004,    /* no space left on the device */
	KILN_ENOTFOUND = -20005, /* no such blob, record or file */
	KILN_ECORRUPT = -20006,  /* data does not match its hash or record format */
	KILN_ENOTSTORE = -20007, /* folder exists but is not a kiln store */
	KILN_EVERSION = -20008,  /* written by a newer kiln; refusing to touch it */
	KILN_EACCES = -20009,    /* permission denied */
	KILN_EREADONLY = -20010, /* store or shared cache opened read-only */
	KILN_ERANGE = -20011,    /* buffer too small or value out of range */
	KILN_EBUSY = -20012,     /* resource in use (too many readers, locked) */
	KILN_EDB = -20013,       /* unexpected error from the database engine */
	KILN_EEXIST = -20014,    /* already exists */
	KILN_EPROTO = -20015,    /* malformed or unexpected message on the wire */
	KILN_ETIMEDOUT = -20016, /* no answer in time */
	KILN_ENODAEMON = -20017, /* no daemon answers, and none could be started */
	KILN_EAUTH = -20018,     /* the daemon refused the token, or the
	                          * request for the token's role */
	KILN_ENOTSUP = -20019,   /* request or protocol version not supported */
	KILN_ECLOSED = -20020,   /* connection closed, or the daemon is stopping */
	KILN_EBADPROJECT = -20021, /* the project's descriptions have errors */
	KILN_EFAILED = -20022,   /* a build step failed */
	KILN_ECANCELLED = -20023, /* the work was cancelled */
	KILN_EOUTSIDE = -20024,  /* a path leads out of its root (a symlink) */
	KILN_ETLS = -20025,      /* the TLS handshake failed (a certificate,
	                          * the daemon's or ours) */
	KILN_EDBCHANGED = -20026, /* the store's database file was cut short
	                           * (or replaced) while the store had it open */
};

/* A static, human-readable message for a code (0 or KILN_E*); never NULL. */
const char *kiln_strerror(int code);

/* Map an errno value to the nearest KILN_E* code (EIO for the unknown). */
int kiln_err_from_errno(int err);

#ifdef __cplusplus
}
#endif

#endif
