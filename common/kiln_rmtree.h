/* kiln_rmtree.h — removing a folder and everything under it, never
 * following a symlink out of it (rmtree.c). The engine's scratch folders
 * and an agent's work folders. */
#ifndef KILN_RMTREE_H
#define KILN_RMTREE_H

/* rm -rf path, best effort (what cannot be removed stays). */
void kiln_rmtree(const char *path);

#endif
