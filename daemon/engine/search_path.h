/* search_path.h — the PATH each build finds its tools' programs on
 * (search_path.c). */
#ifndef KILND_SEARCH_PATH_H
#define KILND_SEARCH_PATH_H

#include "engine_int.h"

/* Entry 0: the daemon's PATH (e->tool_path set). 0. */
int engine_path_init(struct engine *e);
void engine_path_free(struct engine *e);
/* The entry of path (NULL or "": the daemon's, 0), added if new (e->mu
 * held). 0, KILN_ENOMEM, KILN_EBUSY (ENGINE_MAX_PATHS in use). */
int engine_path_intern(struct engine *e, const char *path, uint16_t *idx);
/* The PATH n's program is found on and its tool runs with (n scheduled
 * in the current wave). Valid while n is in progress. */
const char *engine_path_of(const struct engine *e, const struct node *n);

#endif
