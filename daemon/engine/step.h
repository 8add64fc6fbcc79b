/* step.h — what every phase of a step shares (step.c): a growing string,
 * the step's error, its work in progress, its outputs' paths and URLs. */
#ifndef KILND_STEP_H
#define KILND_STEP_H

#include <string.h>

#include "engine_int.h"

/* A node's outputs as protobuf messages (strings borrowed from the node);
 * one malloc'd block: free() it. NULL: out of memory. */
struct pb_outputs {
	Kiln__StepOutput *v;
	Kiln__StepOutput **p;
	size_t n;
};
struct pb_outputs *step_outputs_pb(const struct node *n, int with_paths);

/* Give n its node_work (n->w) unless it has one: 0 or KILN_ENOMEM. */
int node_work_get(struct node *n);
/* Free n->w (its key parts and previous record too); NULL is fine. */
void node_work_free(struct node *n);

/* Replace n->disc with a copy of paths (n of them). 0 or KILN_ENOMEM. */
int step_set_disc(struct node *n, char *const *paths, size_t count);

/* The output path relative to the project: build/<profile>/<dir>/<file>. */
int step_output_path(const struct graph *g, const struct node *n, size_t i,
                     char *out, size_t outlen);

/* A growing string; oom set once an allocation failed. */
struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};
void sb_add(struct sbuf *b, const char *s, size_t n);
void sb_str(struct sbuf *b, const char *s);

/* A line for the daemon's log (engine_config.log; nothing without one). */
void engine_logf(struct engine *e, int error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Set n->error (malloc'd) from the format. */
void set_error(struct node *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));


/* The index URL of output i: the step's URL, or URL#name for a step with
 * named outputs. */
void step_output_url(const struct node *n, size_t i, char *out, size_t outlen);

/* The prerequisite's node (*d) and output (*k) an input of the step's
 * order (kiln_step.order) names; KILN_ENOTFOUND for a source file, or
 * when the plan has no such step or output (the loader refuses both). */
int step_input_output(const struct graph *g, const kiln_input *it, const struct node **d,
                      size_t *k);

/* Whether two ids are equal. */
static inline int
id_eq(const kiln_id *a, const kiln_id *b)
{
	return memcmp(a->b, b->b, 16) == 0;
}

#endif
