/* scratch.h — the scratch folders steps run in (scratch.c). */
#ifndef KILND_SCRATCH_H
#define KILND_SCRATCH_H

#include "engine_int.h"

/* Remove the scratch areas of earlier daemon runs and make this run's
 * (e->scratch_run), which no earlier run used. Call once, after the sweep
 * of orphans: nothing of an earlier run may still write there. 0 or a
 * KILN_E* code. */
int scratch_init(struct engine *e);

/* The path of scratch folder id (suffix "") or of its log, trace or
 * depfile beside it (suffix ".log", ".trace", ".d"), in this run's area:
 * relative to the project root, or absolute when absolute is set. id 0 is
 * the area itself. Every scratch path is built here. 0 or KILN_ERANGE
 * (out too small). */
int scratch_path(const struct engine *e, unsigned id, const char *suffix,
                 int absolute, char *out, size_t len);

/* A scratch folder for a run: a free one (empty, with its empty log) or a
 * new one. *id is its number; *log_fd the open log for the tool's stdout
 * and stderr; *trace_off where this run's records will start in its trace
 * file. 0 or a KILN_E* code (nothing held). */
int scratch_take(struct engine *e, unsigned *id, int *log_fd, off_t *trace_off);

/* The run in folder id is finished (its outputs moved out, its log
 * published or empty): reuse the folder when the run left it empty,
 * otherwise remove it with its files. log_fd: the run's log, open and
 * empty, kept for the next run (or closed), or -1. */
void scratch_give(struct engine *e, unsigned id, int log_fd);

/* Forget the free list (engine_free; the folders go with .kiln/scratch). */
void scratch_free_all(struct engine *e);

#endif
