/* uploads.h — blob puts in progress (BlobPutRequest), each streamed
 * chunk by chunk into a kiln_blob_writer and published only when its
 * content hashes to the id the client claims. */
#ifndef KILND_UPLOADS_H
#define KILND_UPLOADS_H

#include <stdint.h>

#include "kiln_proto.h"
#include "kiln_store.h"

struct kilnd_uploads;

/* What a committed put published, for the BlobStored event. */
struct upload_done {
	int committed;
	kiln_id id;
	uint64_t size;
};

/* Who sends a chunk, and what it may hold. */
struct upload_from {
	uint32_t pipe;        /* its connection */
	int remote;           /* over tcp:// or tls+tcp:// */
	uint64_t max_bytes;   /* the largest blob it may upload; 0: no limit */
	uint32_t agent_max;   /* the agent role: the uploads in progress the
	                         whole role may hold (with this one's); 0:
	                         another role */
};

/* At most max uploads at once; one untouched for idle_s seconds is
 * discarded when room is needed. Remote connections share at most
 * uploads_remote_max(max) of them, each holding at most
 * uploads_pipe_max(max): the rest are kept for local requests (the
 * owner's kiln put), which no remote peer can crowd out. Returns 0 or
 * KILN_ENOMEM. */
int uploads_new(kiln_store *store, uint32_t max, uint32_t idle_s,
                struct kilnd_uploads **up);

/* The slots remote connections may hold in all, and each one. */
uint32_t uploads_remote_max(uint32_t max);
uint32_t uploads_pipe_max(uint32_t max);

/* Discard every upload in progress and free. NULL is allowed. */
void uploads_free(struct kilnd_uploads *up);

/* Apply one BlobPutRequest from the client from->pipe, with its chunk of
 * n bytes. Fills rep, and *done after a commit. Errors (the upload is then
 * discarded, except for KILN_EBUSY on a chunk in flight and
 * KILN_ENOTFOUND): KILN_EBUSY (no room, or none left for from's kind,
 * role or connection), KILN_ENOTFOUND (no such upload on this pipe), KILN_ERANGE
 * (past from->max_bytes), KILN_EINVAL (offset not the bytes received so far, a bad
 * id, profile or URL), KILN_ECORRUPT (content does not hash to the claimed
 * id), and the store's write errors. */
int uploads_put(struct kilnd_uploads *up, const struct upload_from *from,
                const Kiln__BlobPutRequest *req, const uint8_t *data,
                size_t n, Kiln__BlobPutReply *rep, struct upload_done *done);

/* Discard the uploads of a closed pipe (one whose chunk is being written
 * is discarded when that write ends). */
void uploads_pipe_closed(struct kilnd_uploads *up, uint32_t pipe);

/* Uploads in progress. */
uint32_t uploads_count(struct kilnd_uploads *up);

#endif
