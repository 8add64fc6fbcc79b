/* verified.h — which blobs the daemon re-hashed lately, so that a blob
 * served again and again (to every editor, every agent) is not re-read in
 * full before each transfer.
 *
 * An entry holds what the blob's file looked like when it hashed right:
 * device, inode, size, mtime and ctime. Blobs are never rewritten in place;
 * anything that touches the file (a write, a chmod, fsck moving it aside, a
 * new file under the name) changes one of those, and the blob is re-hashed.
 * What a stat cannot see — media decay under an unchanged inode — is caught
 * within ttl seconds here, and on every transfer by the client, which
 * hashes what it receives. */
#ifndef KILND_VERIFIED_H
#define KILND_VERIFIED_H

#include <sys/stat.h>

#include "kiln_store.h"

struct kilnd_verified;

/* A table of n entries (0: never remember). Returns 0 or KILN_ENOMEM. */
int verified_new(unsigned n, unsigned ttl_s, struct kilnd_verified **vp);
void verified_free(struct kilnd_verified *v);

/* Make sure the blob open at fd (whose fstat is st) hashes to id: at once
 * when it did within ttl and its file is unchanged, else by re-hashing it
 * (then it is remembered). Returns 0, KILN_ECORRUPT or KILN_EIO. Any
 * thread. */
int verified_check(struct kilnd_verified *v, const kiln_id *id, int fd,
                   const struct stat *st);

#endif
