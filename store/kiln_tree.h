/* kiln_tree.h — tree records: a folder kept in the store as blobs.
 *
 * A step's folder output (docs/format.md, "Folder outputs") is stored as
 * one blob per regular file plus one tree record, itself a blob, listing
 * every file and folder under it; the tree record's id is the output's
 * id. The record is text, version 1, '\n' line ends:
 *
 *   kiln-tree 1
 *   <type> SP <mode, 3 octal digits> SP <size> SP <hash> SP <path>
 *
 * one line per entry, sorted by path (byte order), no two alike. type is
 * 'f' (a regular file: size in bytes, hash its blob's 32 lowercase hex)
 * or 'd' (a folder, listed so that an empty one is kept: size 0, hash
 * '-'). mode is 644 or 755 for files (the owner's execute bit, nothing
 * else of the tool's umask) and 755 for folders. path is relative to the
 * folder, '/'-separated, each part a real name (not empty, "." or ".."),
 * no control character, at most KILN_TREE_MAX_PATH bytes; every parent of
 * an entry is listed before it. The same folder always gives the same
 * bytes, hence the same id.
 *
 * When you change the layout: bump the version in the first line, keep
 * reading version 1 (old action results name such records), and say so in
 * docs/store.md.
 *
 * Threads: as kiln_store. */
#ifndef KILN_TREE_H
#define KILN_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_store.h"

/* Bounds on one folder output: entries (files and folders), the bytes of
 * all its files, its depth, one path's length. */
#define KILN_TREE_MAX_ENTRIES 65536
#define KILN_TREE_MAX_BYTES (64ULL << 30)
#define KILN_TREE_MAX_DEPTH 64
#define KILN_TREE_MAX_PATH 1024

typedef struct kiln_tree_entry {
	const char *path; /* points into the tree's text */
	int dir;          /* a folder */
	unsigned mode;    /* 0644, 0755 */
	uint64_t size;
	kiln_id id;       /* files */
} kiln_tree_entry;

typedef struct kiln_tree {
	kiln_tree_entry *e; /* in the record's order */
	size_t n;
	uint64_t bytes;     /* of all its files */
	char *text;         /* owned: the paths point into it */
} kiln_tree;

/* Store the folder at path as a tree: each regular file moved into the
 * store (it leaves the folder), the folders left in place, empty; then the
 * tree record put. *id and *size are the record's. A symlink, a special
 * file, a name kiln cannot write into a record, or more than the bounds
 * above fail it with why (whylen bytes) saying which path and what, and
 * KILN_EINVAL (files already moved stay in the store, unnamed: gc's).
 * Other returns: KILN_ENOTFOUND (path is no folder), KILN_ENOMEM,
 * KILN_ENOSPC, KILN_EIO, KILN_EREADONLY. */
int kiln_tree_put_dir(kiln_store *s, const char *path, kiln_id *id, uint64_t *size,
                      char *why, size_t whylen);

/* Read the len bytes at buf as a tree record into *t (free with
 * kiln_tree_free). 0, KILN_EINVAL (not a tree record of a version this
 * reader knows, or one breaking a rule above), KILN_ENOMEM. */
int kiln_tree_parse(const void *buf, size_t len, kiln_tree **t);

/* Whether buf (len bytes, the start of a blob) begins as a tree record. */
int kiln_tree_looks(const void *buf, size_t len);

/* kiln_tree_parse of blob id (checked against its name as it is read).
 * 0, KILN_ENOTFOUND, KILN_ECORRUPT, KILN_EINVAL (not a tree), KILN_ENOMEM,
 * KILN_EIO. */
int kiln_tree_load(kiln_store *s, const kiln_id *id, kiln_tree **t);

void kiln_tree_free(kiln_tree *t);

#endif
