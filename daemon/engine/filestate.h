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

#include <stdint.h>

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
 * A project-relative path is opened beneath the root: a symlink on the
 * way that leads out of the project (`ln -s /etc/shadow src/a.txt`, a
 * source folder replaced by a link elsewhere) is refused, warm or cold.
 * Returns 0 (*hash set), KILN_ENOTFOUND (the file does not exist, or is
 * not a regular file; *hash zeroed), KILN_EOUTSIDE, KILN_EIO or
 * KILN_ENOMEM. */
int filestate_hash(struct filestate *fs, const char *path, kiln_id *hash);

/* What a filestate_hash_seen answer came from: the file's stat and hash
 * at the time, and how far that stat can vouch for the content. */
struct fs_seen {
	kiln_file_rec rec;  /* stat and hash; zeroed when missing */
	uint8_t missing;    /* it did not exist (or was not a regular file) */
	uint8_t racy;       /* it changed within FS_RACY_NS of being stat'ed:
	                       an edit in the same clock tick would keep its
	                       stat, so only its content can tell */
};

/* How close to its stat a change makes a record racy. File times come
 * from the kernel's coarse clock (one tick: 1 to 10 ms), so an edit
 * right after a stat can carry the same ctime as the one before it. */
#define FS_RACY_NS (30 * 1000000LL)

/* filestate_hash, and what the answer came from in *seen (may be NULL). */
int filestate_hash_seen(struct filestate *fs, const char *path, kiln_id *hash,
                        struct fs_seen *seen);

/* Whether path still is what seen describes, asked afresh (a stat now;
 * the content hashed again when seen is racy): 1 unchanged, 0 changed,
 * replaced, appeared or gone (any stat change counts: the content may
 * have changed and changed back). Used after a tool ran, to know that
 * it read what the step's key was made from. */
int filestate_unchanged(struct filestate *fs, const char *path,
                        const struct fs_seen *seen);

/* Forget what this pass knows of path: its next filestate_hash stats it
 * again (the file changed under a running step). */
void filestate_forget(struct filestate *fs, const char *path);

/* Move the records of files hashed since the last flush into batch b (to
 * be committed with the build's other records). Returns 0 or an error. */
int filestate_flush(struct filestate *fs, kiln_batch *b);

/* Counters since filestate_new: stat calls and files hashed. */
void filestate_counts(struct filestate *fs, uint64_t *nstat, uint64_t *nhashed);

#endif
