/* materialize.h — the files a game reads.
 *
 * build/<profile>/ under the project holds every output of the profile's
 * last build, at <folder of the URL>/<output file name>, plus
 * kiln-index.txt, the map a game loads to find each URL's file and hash
 * (format below; docs/build.md repeats it). Each output is, by the
 * project's 'materialize' (kiln_desc.h):
 *   copy (the default): a file of its own, 0644 under umask 022 (the
 *     user's umask, see materialize_output), sharing no inode with
 *     the store or another output, so writing into it (root, or after a
 *     chmod) changes nothing else: a reflink (FICLONE) where the file
 *     system has them (btrfs, XFS), else a copy checked against the
 *     blob's name as it is written;
 *   hardlink: a hard link to the store's read-only blob (a copy when the
 *     store is on another filesystem): no bytes written, but a write
 *     through it changes the blob and every output with those bytes.
 *
 * kiln-index.txt, version 1: UTF-8 text, '\n' line ends. The first line is
 *   kiln-index 1 <profile>
 * then one line per output, sorted by URL (byte order), four fields
 * separated by single tabs:
 *   <url> TAB <32 lowercase hex: XXH3-128 of the content> TAB <size in
 *   bytes, decimal> TAB <file path relative to build/<profile>/>
 * A step's single output is listed under the step's URL; a step with
 * named outputs lists each as <url>#<name>. A folder output's line names
 * its folder, the path ending in '/', and its tree record (hash and size
 * of that record: kiln_tree.h). URLs never hold tabs or line
 * ends (the loader refuses control characters). Written to a temporary
 * file and renamed, so a reader sees the old map or the new one.
 *
 * Paths given here are checked: relative, no "..", and no symlink on the
 * way that would lead outside the project (each folder is opened with
 * O_NOFOLLOW from the project root down).
 *
 * Threads: any thread; two calls must not materialize the same path at
 * once (the engine gives each output path one owner step). */
#ifndef KILND_MATERIALIZE_H
#define KILND_MATERIALIZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiln_desc.h"
#include "kiln_store.h"

/* Make root/relpath the blob id (rootfd: root opened, O_PATH will do, or
 * -1 to open it by path), by mode. KILN_MAT_HARDLINK: nothing to do when
 * it already is the blob's inode; otherwise replace whatever is there (a
 * stale file, one the user edited or replaced, a symlink) by a hard link
 * to the blob, or a copy when linking fails with EXDEV, EMLINK or EPERM.
 * Any other mode: whatever is there is replaced by a copy of its own (a
 * reflink, or bytes checked against id as they are written; a reflink is
 * not read back, see fill_copy), even when it already holds the bytes:
 * the caller knows when it does (its record of the file). Copies are mode
 * 0666 less mask (the user's umask: 0644 with the usual 022, readable by
 * a game running as another user), made unnamed (O_TMPFILE) and linked
 * at their name, or renamed
 * over the old file (a reader sees the old file or the whole new one). Missing
 * folders are made, mode 0777 less mask. *st (may be NULL) gets what the file looks like
 * afterwards. Returns 0,
 * KILN_ENOTFOUND (the blob is not in the store), KILN_EINVAL (bad
 * relpath, or a symlink on the way), KILN_EEXIST (a folder stands where
 * the file goes, or a file where a folder goes), KILN_ECORRUPT (copying,
 * the blob did not match id), KILN_EACCES, KILN_EIO, KILN_ENOSPC.
 * Note that every new hard link to a blob changes the ctime of all its
 * links: materializing the same content at a second path makes
 * materialize_unchanged say 0 for the first. */
int materialize_output(kiln_store *s, const char *root, int rootfd,
                       const char *relpath, const kiln_id *id, kiln_mat_mode mode,
                       mode_t mask, kiln_file_rec *st);

/* Open the folder root/relpath (a folder output's place) walking down
 * from root without following a symlink on the way; when create, make it
 * and its parents, replacing a file or symlink where it goes. *fd is the
 * folder (O_DIRECTORY), the caller closes it. 0, KILN_ENOTFOUND,
 * KILN_EINVAL (bad relpath, a symlink on the way), KILN_EEXIST, KILN_EIO. */
int materialize_dir_open(const char *root, const char *relpath, int create, mode_t mask,
                         int *fd);

/* Whether root/relpath still is what rec says, judged by stat alone
 * (size, mtime_ns, ino, ctime_ns): 1 yes, 0 no or missing. */
int materialize_unchanged(const char *root, const char *relpath,
                          const kiln_file_rec *rec);

struct index_entry {
	const char *url;   /* "sprites/hero", "ui/atlas#frames" */
	kiln_id id;
	uint64_t size;
	const char *file;  /* relative to build/<profile>/ */
};

/* Write root/build/<profile>/kiln-index.txt (format above) from n entries
 * in any order (entries is sorted in place), mode 0666 less mask (missing
 * folders 0777 less mask). Returns 0, KILN_EINVAL (a bad
 * profile, a URL or file with a control character, a file path that is
 * not plainly relative, two entries with one URL, or a symlink on the
 * way), KILN_EEXIST (a folder named kiln-index.txt, or a file where a
 * folder goes), KILN_ENOMEM, KILN_EACCES, KILN_EIO, KILN_ENOSPC. */
int materialize_write_index(const char *root, const char *profile,
                            struct index_entry *entries, size_t n, mode_t mask);

/* materialize_write_index in two parts, so that the map can be written
 * while something else goes on and only appear when that is done: the
 * map written to a new name beside kiln-index.txt (the same checks and
 * errors; on an error nothing is left and t is ended), then put in place
 * under its name, which ends t (on an error the new file is removed). */
struct index_tmp {
	int dfd;        /* build/<profile>/; -1: nothing to put or drop */
	char tmp[64];   /* the new file's name in it */
};
int materialize_index_write_tmp(const char *root, const char *profile,
                                struct index_entry *entries, size_t n,
                                mode_t mask, struct index_tmp *t);
int materialize_index_put(struct index_tmp *t);
/* Or remove the new file instead, which ends t (one not begun is fine). */
void materialize_index_discard(struct index_tmp *t);

/* Remove files (and symlinks, never followed) under root/build/<profile>/
 * that are not in keep (relative paths, sorted by strcmp; "dir/" keeps a
 * folder whole) and are not kiln-index.txt nor a temporary file of this
 * process (an output being put in place by another thread), and folders
 * left empty (not build/<profile> itself, nor a folder a kept path lies
 * in: another thread may have just made it for its output). A
 * missing folder is nothing to prune. Returns 0, KILN_EINVAL (a bad
 * profile, or build/ or build/<profile> is a symlink), KILN_EEXIST (one of
 * them is not a folder), KILN_ENOMEM or KILN_EIO (something could not be
 * removed; the rest was). */
int materialize_prune(const char *root, const char *profile,
                      const char *const *keep, size_t nkeep);
/* materialize_prune of root/top/<profile>/ (top: "build", or
 * ".kiln/intermediate" for the intermediates' files). */
int materialize_prune_in(const char *root, const char *top, const char *profile,
                         const char *const *keep, size_t nkeep);

#endif
