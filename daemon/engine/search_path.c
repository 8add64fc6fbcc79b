/* search_path.c — the PATH each build finds its tools' programs on.
 *
 * Which program a tool name means must not depend on who started the
 * daemon: a build uses the project's `path:` when kiln.yaml pins one,
 * else the PATH its client sent (as make and ninja use their caller's),
 * else the daemon's own (docs/build.md, "Where steps run and what they
 * see"). A step shared by builds with different PATHs uses the PATH of
 * the build that first asked for it in the wave.
 *
 * The engine keeps each distinct PATH string once, in a small table
 * (e->paths); builds and nodes name their entry by index (a node has
 * room for 16 bits, not a pointer, without growing). Entry 0 is the
 * daemon's PATH and stays. Other entries are reclaimed only when the
 * table is full and a build brings a new PATH: then every entry no active
 * build and no step still being decided or run names is freed. A step
 * of a cancelled build may still be running then: it keeps its entry.
 *
 * Threads: everything here under e->mu, but engine_path_of (any thread
 * that owns a node in progress: its entry cannot be reclaimed under it). */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "search_path.h"

int
engine_path_init(struct engine *e)
{
	e->paths[0] = e->tool_path;
	e->npaths = 1;
	return 0;
}

void
engine_path_free(struct engine *e)
{
	/* entry 0 is e->tool_path, freed by its owner */
	for (unsigned i = 1; i < e->npaths; i++)
		free(e->paths[i]);
	e->npaths = 0;
}

/* Whether node n may still look its program up (e->mu held). */
static int
node_in_progress(const struct node *n)
{
	return n->st == N_WAITING || n->st == N_READY || n->st == N_EVAL ||
	       n->st == N_RUNNABLE || n->st == N_RUNNING;
}

/* Free the entries nothing names any more (e->mu held). The per-wave
 * program cache is keyed by entry: it is emptied, so that a reused entry
 * never finds the program of the PATH it held before. */
static void
paths_reclaim(struct engine *e)
{
	uint8_t used[ENGINE_MAX_PATHS] = {1};

	for (int i = 0; i < ENGINE_MAX_BUILDS; i++)
		if (e->active[i] != NULL)
			used[e->active[i]->pathi] = 1;
	for (const struct graph *g = e->graphs; g != NULL; g = g->next)
		for (uint32_t i = 0; i < g->n; i++)
			if (node_in_progress(&g->nodes[i]))
				used[g->nodes[i].pathi] = 1;
	pthread_mutex_lock(&e->tools_mu);
	e->ntools = 0;
	pthread_mutex_unlock(&e->tools_mu);
	for (unsigned i = 1; i < e->npaths; i++)
		if (!used[i]) {
			free(e->paths[i]);
			e->paths[i] = NULL;
		}
}

int
engine_path_intern(struct engine *e, const char *path, uint16_t *idx)
{
	unsigned i, slot = e->npaths;

	if (path == NULL || path[0] == '\0') {
		*idx = 0;
		return 0;
	}
	for (i = 0; i < e->npaths; i++)
		if (e->paths[i] != NULL && strcmp(e->paths[i], path) == 0) {
			*idx = (uint16_t)i;
			return 0;
		}
	if (slot == ENGINE_MAX_PATHS)
		paths_reclaim(e);
	for (i = 1; i < e->npaths && slot == ENGINE_MAX_PATHS; i++)
		if (e->paths[i] == NULL)
			slot = i;
	if (slot == ENGINE_MAX_PATHS)
		return KILN_EBUSY;
	if ((e->paths[slot] = strdup(path)) == NULL)
		return KILN_ENOMEM;
	if (slot == e->npaths)
		e->npaths++;
	*idx = (uint16_t)slot;
	return 0;
}

const char *
engine_path_of(const struct engine *e, const struct node *n)
{
	/* not e->npaths: another build may be adding an entry meanwhile */
	const char *p = n->pathi < ENGINE_MAX_PATHS ? e->paths[n->pathi] : NULL;

	return p != NULL ? p : e->tool_path;
}
