/* output_index.h — kiln-index.txt written at a build's end
 * (output_index.c). */
#ifndef KILND_OUTPUT_INDEX_H
#define KILND_OUTPUT_INDEX_H

#include "engine_int.h"

/* The index map to write when a build ends: gathered with e->mu held (other
 * builds of the wave may be finishing nodes of this graph), written
 * without it. */
struct index_job {
	struct index_entry *v;
	size_t n;
	char *strs;              /* "url#name" of steps with named outputs
	                            (!url_plain); other urls and the files
	                            point into the plan and the graph, which
	                            outlive the build */
	/* per entry of v: 1 when its step has no result in this daemon (not
	 * decided yet, or it failed): the store's records say what build/
	 * holds for it, looked up without e->mu (index_fill) */
	uint8_t *pending;
	const char **paths;      /* pending entries' build/... paths */
	char profile[65];
	int prune;               /* build/<profile>/ to be pruned to keep */
	const char **keep;       /* every output path of every step of the
	                            graph, relative to build/<profile>/ (a
	                            folder's ends in '/'), for the prune */
	size_t nkeep;
	char *kstrs;             /* keep's folder paths */
	const char **ikeep;      /* the same for .kiln/intermediate/<profile>/ */
	size_t nikeep;
};

/* Free what j holds (j itself is the caller's). */
void index_job_free(struct index_job *j);

/* g's index entries in the map's order (g->iorder), sorted by URL once
 * per graph (e->mu held). 0 or KILN_ENOMEM. */
int iorder_make(struct graph *g);

/* The map of b's graph to write (e->mu held): 1 with j filled; 0 when
 * nothing changed, or no memory (a later build writes it). */
int index_gather(struct engine *e, struct build *b, struct index_job *j);

/* Commit the build's records and write its index map (job NULL: none),
 * e->mu not held. *commit_rv is the commit's result. 0 or the error
 * writing the map. */
int commit_and_index(struct engine *e, struct index_job *job, int *commit_rv);

#endif
