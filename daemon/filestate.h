/* filestate.h — the content hash of a file, asking the disk as little as
 * possible.
 *
 * Change detection is stat first (size, mtime_ns, inode, ctime_ns) against
 * what was recorded when the file was last hashed: only a file whose stat
 * differs is read and hashed again, and content hashes, never timestamps,
 * decide what rebuilds. Records live in memory (a warm daemon) and in the
 * store's files database (a restarted daemon); project files are recorded
 * under their project-relative path, tools (absolute paths) in memory only.
 * Within one pass (a build wave) each file is stat'ed at most once, so
 * every step of a build sees the same content for a shared input.
 *
 * Threads: every function may be called from any thread at once. */
#ifndef KILND_FILESTATE_H
#define KILND_FILESTATE_H

#include "kiln_store.h"

struct filestate;

/* root: the project folder (absolute). Returns 0 or KILN_ENOMEM. */
int filestate_new(kiln_store *s, const char *root, struct filestate **fsp);
void filestate_free(struct filestate *fs);

/* Begin a new pass: files are stat'ed again on their next use. */
void filestate_pass(struct filestate *fs);

struct watch;

/* With a watch (watch.h), a file nothing touched since it was last
 * stat'ed (with its folders watched) is answered from memory, without a
 * stat. NULL: every file is stat'ed once per pass. */
void filestate_set_watch(struct filestate *fs, struct watch *w);

/* When set, every file is re-hashed once per pass whatever its stat says
 * (`--verify`, the "overnight checksum"). */
void filestate_set_verify(struct filestate *fs, int verify);

/* The content hash of path: project-relative, or absolute for a tool.
 * Returns 0 (*hash set), KILN_ENOTFOUND (the file does not exist, or is
 * not a regular file; *hash zeroed), KILN_EIO or KILN_ENOMEM. */
int filestate_hash(struct filestate *fs, const char *path, kiln_id *hash);

/* Move the records of files hashed since the last flush into batch b (to
 * be committed with the build's other records). Returns 0 or an error. */
int filestate_flush(struct filestate *fs, kiln_batch *b);

/* Counters since filestate_new: stat calls and files hashed. */
void filestate_counts(struct filestate *fs, uint64_t *nstat, uint64_t *nhashed);

#endif
