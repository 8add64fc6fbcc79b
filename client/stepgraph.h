/* stepgraph.h — the step graph `kiln graph` prints: steps and files as nodes,
 * declared and discovered dependencies as edges, and the part of it that
 * some named nodes need (or that depends on them). Built by the caller
 * from a profile's plan and the daemon's answers; printed by cmd_graph.c.
 * Single-threaded; a graph owns copies of every string added to it. */
#ifndef KILN_CLI_STEPGRAPH_H
#define KILN_CLI_STEPGRAPH_H

#include <stddef.h>

#include "kiln_desc.h"

enum gnode_kind { GN_STEP, GN_FILE };

/* Ordered: where one dependency is both declared and discovered, the
 * declared kind (the smaller) is kept. */
enum gedge_kind { GE_INPUT, GE_PREREQ, GE_DISCOVERED, GE_NEED };

/* What the last build did with a step. */
enum gstate { GS_UNKNOWN, GS_RAN, GS_REUSED, GS_FAILED };

struct gnode {
	const char *name;      /* URL or project-relative path (owned) */
	enum gnode_kind kind;
	const kiln_step *step; /* GN_STEP: its description (borrowed) */
	enum gstate state;     /* GN_STEP */
	int missing;           /* GN_FILE: recorded as looked for, not found */
	int keep;              /* selected for printing */
};

struct gedge {
	size_t from, to;       /* node indexes; "to" depends on "from" */
	enum gedge_kind kind;
};

struct graph;

/* A graph holding one node per step of plan (borrowed: it must outlive
 * the graph), in the plan's order. Returns 0 or KILN_ENOMEM. */
int graph_new(const kiln_plan *plan, struct graph **g);
void graph_free(struct graph *g);

/* Record that step url depends on name (a step URL for GE_PREREQ and
 * GE_NEED, a file path otherwise; missing: a file looked for and not
 * found). Call graph_finish after the last one. Returns 0, KILN_ENOMEM or
 * KILN_ENOTFOUND (url or a prerequisite is not a step of the plan). */
int graph_add(struct graph *g, const char *url, const char *name,
              enum gedge_kind kind, int missing);

/* Set the last build's state of step url (unknown URLs are ignored). */
void graph_state(struct graph *g, const char *url, enum gstate state);

/* Make the file nodes and the edges. Returns 0 or KILN_ENOMEM. */
int graph_finish(struct graph *g);

/* Keep the nodes whose name matches one of the patterns (a name as
 * written, or a glob as in desc/glob.h) and what they depend on, or with
 * rdeps what depends on them; none: keep everything. On KILN_ENOTFOUND
 * *bad names a pattern that matched nothing. Returns 0, KILN_ENOTFOUND or
 * KILN_ENOMEM. */
int graph_select(struct graph *g, char *const *patterns, size_t n, int rdeps,
                 const char **bad);

/* The nodes and edges, valid until graph_free. Edges are sorted by their
 * "to" node, then "from", one per pair. */
const struct gnode *graph_nodes(const struct graph *g, size_t *n);
const struct gedge *graph_edges(const struct graph *g, size_t *n);

#endif
