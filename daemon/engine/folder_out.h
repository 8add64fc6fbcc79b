/* folder_out.h — folder outputs (docs/format.md, "Folder outputs").
 *
 * An output declared "name/" is a folder the tool fills. After the run
 * its files go into the store and a tree record (store/kiln_tree.h) lists
 * them; the record's id is the output's id (node_out.id), so keys,
 * results, the index and the early cutoff treat it as one blob. In
 * build/<profile>/ (or .kiln/intermediate/) it is a folder of copies
 * (never hard links, whatever the materialize mode: a write into one
 * must not reach the store), checked by content against the record.
 *
 * Threads: the worker holding the node. */
#ifndef KILND_FOLDER_OUT_H
#define KILND_FOLDER_OUT_H

#include "engine_int.h"

/* Make the empty folder dir/<file> for output i before n's tool runs
 * (dir: its scratch folder, absolute). 0 or a KILN_E* code. */
int folder_prepare(struct node *n, const char *dir);

/* Store output i of n from its scratch folder dir (absolute) as a tree:
 * n->outs[i].id and size set, the emptied folder removed. On an error
 * n->error says what (the path inside the folder and the rule it broke). */
int folder_publish(struct engine *e, struct node *n, size_t i, const char *dir);

/* Make root/relpath hold exactly the tree id: files not in it (and
 * symlinks, special files) removed, missing or different ones copied from
 * the store. 0 or a KILN_E* code. */
int folder_materialize(struct engine *e, const char *relpath, const kiln_id *id);

/* Whether root/relpath holds exactly the tree id: the same names and
 * types, each file's content hashing as listed. */
int folder_unchanged(struct engine *e, const char *relpath, const kiln_id *id);

/* Whether the store has tree id and every file it lists. */
int folder_blobs_present(struct engine *e, const kiln_id *id);

#endif
