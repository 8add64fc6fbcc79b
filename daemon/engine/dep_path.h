/* dep_path.h — the one policy for paths a step's tool says it used (its
 * depfile) or was seen using (its file-access trace): which become
 * discovered dependencies, under what name, and which are left out
 * (docs/build.md, "Discovered paths").
 *
 * Paths are cleaned lexically ("." and "//" components, and ".." where no
 * symlink can precede it), relative ones against the project root (tools
 * run there); a ".." after a named component is resolved as the kernel
 * resolved it (dep_path_resolve). Inside the project a
 * path is named project-relative; outside it by its clean absolute path
 * (an external file), except the machine's own locations. */
#ifndef KILND_DEP_PATH_H
#define KILND_DEP_PATH_H

#include <stddef.h>

enum dep_path_class {
	DEP_PATH_PROJECT,   /* a project file: recorded, project-relative */
	DEP_PATH_EXTERNAL,  /* outside the project: recorded, absolute */
	DEP_PATH_IGNORED,   /* the machine's (system folders, hidden entries
	                       of $HOME), kiln's own .kiln/, the root folder
	                       itself as a file: not recorded, nothing to say */
	DEP_PATH_BUILD,     /* under build/: the caller decides (a declared
	                       input is in the key; anything else is a warning) */
	DEP_PATH_INVALID,   /* cannot be recorded (not a valid store key, too
	                       long): a warning */
};

/* Where the project is and whose home the daemon runs in. Both borrowed. */
struct dep_path_policy {
	const char *root;   /* the project folder: absolute, clean, not "/" */
	const char *home;   /* $HOME of the daemon; NULL or "": none */
};

/* Classify path (absolute, or relative to the root; cleaned as text, so
 * resolve it first where a symlink may matter) and write its name
 * into out (outlen bytes): project-relative for PROJECT and BUILD,
 * absolute for EXTERNAL, the clean path as far as known for INVALID and
 * IGNORED. With listing (a folder whose names were read) the name ends in
 * '/', the root folder's being "./". */
enum dep_path_class dep_path_classify(const struct dep_path_policy *pp,
                                      const char *path, int listing,
                                      char *out, size_t outlen);

/* Clean the absolute path p in place: no "//", "." or ".." components, no
 * trailing '/' (but "/" itself); ".." above "/" stays at "/". */
void dep_path_clean(char *p);

/* Make the absolute path p (cap bytes) name the file the kernel reaches
 * by it, then clean it. Text cannot do this where a ".." follows a named
 * component: if that component is a symlink ("inc/lnk/../inc.h", lnk
 * leading elsewhere) ".." climbs from the link's target, not from inc/.
 * So the part up to the last such ".." is resolved with realpath(3) (only
 * paths that have one pay for it) and the rest, which has none, is
 * cleaned as text. Where a lookup through that part fails (a folder
 * missing, or the link gone since the tool looked), p becomes the missing
 * entry (its deepest existing folder, resolved, and the missing name):
 * creating it is what would change the lookup. A loop or a folder that
 * cannot be searched: cleaned as text. A result that does not fit in cap:
 * p is left as it is, and its ".." makes dep_path_classify call it
 * invalid (a warning) rather than name a file it is not. Symlinks with no
 * ".." after them stay as they are (their names are what the tool used;
 * reading follows them). */
void dep_path_resolve(char *p, size_t cap);

#endif
