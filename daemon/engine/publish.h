/* publish.h — finishing a step after its tool ran (publish.c): outputs
 * into the store and build/<profile>/ (publish_outputs.c), its records
 * queued (publish_records.c), after the check that it read what its key
 * says (verify.c). */
#ifndef KILND_PUBLISH_H
#define KILND_PUBLISH_H

#include "engine_int.h"

/* How finishing a step went. */
enum finish_result {
	FINISH_DONE,     /* published, recorded, materialized */
	FINISH_FAILED,   /* n->error says why */
	FINISH_AGAIN,    /* its inputs changed while the tool ran (n->reason
	                    says which): nothing was published or recorded,
	                    and the step must be decided again */
};

/* Finish n after its tool ended (unlocked): outputs into the store,
 * records, materialization. */
enum finish_result step_finish(struct engine *e, struct graph *g, struct node *n);

/* Record a failure (log kept, decision record) after step_* failed. */
void step_record_failure(struct engine *e, struct graph *g, struct node *n);

/* Drop what a run left (a cancelled step: no record). */
void step_forget(struct node *n);

/* Whether root/path is still the file rec describes: the whole stat for
 * copies (and one link); for hard links a ctime that moved alone has the
 * file hashed again (rec takes the new ctime when the bytes are the
 * same). */
int mat_unchanged(struct engine *e, const char *path, kiln_file_rec *rec);

/* Whether the materialized output o at path still holds o's blob: its
 * stat as recorded, or else its content. */
int step_output_unchanged(struct engine *e, const char *path, const struct node_out *o);

/* Put n's outputs into build/<profile>/ as the materialize mode says
 * (n->outs[].mat updated); a copy already intact is left. */
int materialize_all(struct engine *e, struct node *n);

/* Queue n's index entries and materialized-file records. */
int outputs_record(struct engine *e, const struct graph *g, struct node *n);

/* Queue n's decision record (against n->prev, with n->parts). */
int record_put(struct engine *e, const struct graph *g, struct node *n,
               Kiln__StepRecord__Decision decision);

/* Read (prev_load) or drop (prev_drop) n's previous decision record. */
void prev_load(struct engine *e, const struct graph *g, struct node *n);
void prev_drop(struct node *n);

/* ---- verify.c ---- */
/* After n's tool exited 0 (its depfile and trace read into n->disc):
 * whether everything it may have read is what its key was made from. */
enum verify_result {
	VERIFY_HELD,     /* yes: n->w->disc_seen holds the discovered files'
	                    hashes, for its action result */
	VERIFY_CHANGED,  /* no: why says what changed (the step must be
	                    decided again, nothing recorded) */
	VERIFY_FAILED,   /* it could not be checked: why has the error */
};
enum verify_result run_verify(struct engine *e, struct graph *g, struct node *n,
                              char *why, size_t whylen);

#endif
