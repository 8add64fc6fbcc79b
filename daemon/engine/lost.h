/* lost.h — the steps whose records a failed (or gc-skipped) commit lost
 * (lost.c). */
#ifndef KILND_LOST_H
#define KILND_LOST_H

#include "engine_int.h"

/* The batch numbered gen failed to commit with rv (commit_mu held). */
void lost_note(struct engine *e, uint32_t gen, int rv);
/* Batch gen committed but skipped records naming blobs gc had removed
 * (commit_mu held): its steps are forgotten as a lost batch's are, but
 * their builds do not fail. */
void lost_note_skipped(struct engine *e, uint32_t gen);

/* Forget the in-memory results of the steps whose records were in the
 * failed batches noted since the last call, and count them into their
 * builds (e->mu held). Cheap when nothing failed. */
void lost_apply(struct engine *e);

/* n's full decision begins (unlocked, its worker): note the batch its
 * records may go to first. */
void lost_decision_begins(struct engine *e, struct node *n);

/* n finished in state st (e->mu held, before it is counted into its
 * builds): note the batch its records went to last; lose its result if
 * a record could not be queued or a batch since its first failed. */
void lost_node_finished(struct engine *e, struct graph *g, struct node *n,
                        enum node_state st);

/* The reaper thread's callback for a node's tool. */

#endif
