/* discover.h — what a run revealed it used: its depfile and its
 * file-access trace (discover.c, trace.c), and the warnings about paths
 * kiln could not record. */
#ifndef KILND_DISCOVER_H
#define KILND_DISCOVER_H

#include "engine_int.h"

/* ---- discover.c: depfiles, the path policy, warnings ---- */

#define WARN_MAX 32              /* warnings kept per run, then "and N more" */

/* The warnings of one run, gathered while its depfile and trace are read. */
struct warn_list {
	char *v[WARN_MAX + 1];   /* kept (room for the "and N more" line) */
	size_t n;
	kiln_id *extra;          /* hashes of the ones past WARN_MAX */
	size_t nextra, capextra;
	int oom;
	/* the run's inputs under build/ (its prerequisites' and needs'
	 * outputs), sorted when the first build/ path is met: a bundle over
	 * many outputs reads each, and a scan per path is quadratic */
	const char **inputs;
	size_t ninputs;
	/* those of them that are folder outputs: a path under one is theirs */
	const char **folders;
	size_t nfolders;
	int inputs_made;
};

/* After n's tool (root process pid) exited 0 in scratch folder dir
 * (absolute): read its depfile (if the tool has one) and its trace into
 * n->disc, n->traced, and n->warnings (replaced). 0, or a KILN_E* code
 * with n->error set. */
int step_deps_read(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
                   const char *dir);

/* Put path (absolute, or relative to the root; listing: a folder whose
 * names were read; missing: looked for in vain) used by n's run through
 * dep_path.h's policy: 1 with its recorded name in out (project-relative,
 * or absolute outside the project, "dir/" for a listing); 0 not recorded
 * (the machine's, kiln's own, an input of n's under build/, a folder only
 * stat'ed), with a warning in wl for a use of build/ n does not declare
 * and for a path that cannot be recorded. */
int step_dep_name(struct engine *e, const struct graph *g, const struct node *n,
                  const char *path, int listing, int missing, struct warn_list *wl,
                  char *out, size_t outlen);

/* Warn in wl that path cannot be recorded, and why. */
void step_warn_unrecordable(struct warn_list *wl, const char *path, const char *why);

/* n's warnings: how many; replace them with a copy of v (0 or
 * KILN_ENOMEM); free them. */
size_t step_nwarnings(const struct node *n);
int step_set_warnings(struct node *n, char *const *v, size_t count);
void step_warnings_free(struct node *n);

/* ---- trace.c: file-access tracing ---- */

/* Find libkilntrace.so beside the daemon's executable, else in
 * $(PREFIX)/lib/kiln, into e->trace_shim ("" and one log line: none). */
void trace_setup(struct engine *e);

/* The environment entries that trace a run in scratch folder <scratch>
 * (LD_PRELOAD, KILN_TRACE_FILE, PYTHONDONTWRITEBYTECODE, sanitizer
 * options): malloc'd strings into out (room for 8), their count in *nout
 * (0 when untraced). 0 or KILN_ENOMEM. */
int trace_env(const struct engine *e, unsigned scratch, char **out, size_t *nout);

/* After n's tool (root process pid) exited 0 in scratch folder dir
 * (absolute), with n->disc holding its depfile's files if it has one:
 * read its trace, set n->traced, n->ndisc_depfile, and append the files it
 * looked at (step_dep_name) to n->disc, warnings to wl. 0, or a KILN_E*
 * code with n->error set (KILN_EFAILED: it wrote outside its scratch
 * folder; KILN_ENOMEM). */
int trace_finish(struct engine *e, const struct graph *g, struct node *n, pid_t pid,
                 const char *dir, struct warn_list *wl);

/* The hash a discovered dependency is checked by: a file's content, or
 * for a path ending in '/' the folder's sorted names. 0, KILN_ENOTFOUND
 * (missing), or another error. */
int trace_dep_hash(struct engine *e, const char *path, kiln_id *h);

#endif
