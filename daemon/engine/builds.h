/* builds.h — build requests and their ends (builds.c; e->mu held). */
#ifndef KILND_BUILDS_H
#define KILND_BUILDS_H

#include "engine_int.h"

/* Count a finished node into build b. */
void build_count(struct build *b, const struct node *n);

/* End every build whose steps are all finished (e->mu dropped and
 * retaken while a build's records commit). */
void builds_check(struct engine *e);

/* Schedule node n for build b. Prerequisites come first (topological
 * order), so each of n's is already part of the wave. */
void node_schedule(struct engine *e, struct graph *g, struct node *n, struct build *b);

#endif
