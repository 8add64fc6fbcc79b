/* graph.h — the loaded project and the graph of each profile
 * (graph.c; e->mu held). */
#ifndef KILND_GRAPH_H
#define KILND_GRAPH_H

#include "engine_int.h"

/* Load the project, or load it again when a description file or a source
 * folder changed; no build may be active. 0, KILN_EBADPROJECT (err lists
 * the errors) or another error. */
int project_fresh(struct engine *e, char *err, size_t errlen);
/* The graph of a profile, made on first use. KILN_EINVAL: no such
 * profile; KILN_ENOMEM. (Outputs that would collide in build/ never get
 * here: the loader refuses them.) */
int graph_get(struct engine *e, const char *profile, struct graph **gp);
void graph_free(struct graph *g);
/* "unknown profile 'name' (profiles: a, b, c)" into err: the words every
 * command that takes -p gives for a name the project lacks. */
void profile_unknown(const struct engine *e, const char *profile, char *err,
                     size_t errlen);
void graphs_free(struct engine *e);
void stamps_free(struct engine *e);
/* The XXH3-128 of the sorted names in folder path (absolute), each with
 * its NUL; "." and ".." never count, nor names starting with '.' with
 * NAMES_SKIP_DOT, nor "build" with NAMES_SKIP_BUILD. 0, KILN_ENOTFOUND
 * (no such folder), KILN_EIO, KILN_ENOMEM (*id zeroed on error). */
#define NAMES_SKIP_DOT 1u
#define NAMES_SKIP_BUILD 2u
int folder_names_hash(const char *path, unsigned flags, kiln_id *id);
/* The index of the step with this URL in the URL-sorted plan: 1 found. */
int step_index(const kiln_plan *p, const char *url, uint32_t *at);

#endif
