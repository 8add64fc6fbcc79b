/* record_batch.h — the batch steps' records are queued in, and its
 * commits (record_batch.c). */
#ifndef KILND_RECORD_BATCH_H
#define KILND_RECORD_BATCH_H

#include "engine_int.h"

/* Queue records for the next commit (e->batch_mu taken; 0); commit when
 * enough have waited (engine_batch_unlock drops the lock). */
int engine_batch_lock(struct engine *e, kiln_batch **b);
void engine_batch_unlock(struct engine *e);

/* Commit what waits in the record batch (e->mu not held). 0, or the
 * failed commit's code (lost_note has it). */
int batch_commit(struct engine *e);

/* Hand the store's mapped pages back now and then (unlocked). */
void pages_tick(struct engine *e);

#endif
