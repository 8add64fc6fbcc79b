/* dep_path.h — the one policy for paths a step's tool says it used (its
 * depfile) or was seen using (its file-access trace): which become
 * discovered dependencies, under what name, and which are left out
 * (docs/build.md, "Discovered paths").
 *
 * Paths are cleaned lexically ("." and ".." components, "//"), relative
 * ones against the project root (tools run there). Inside the project a
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

/* Classify path (absolute, or relative to the root) and write its name
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

#endif
