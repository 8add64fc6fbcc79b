/* action_key.h — a step's identity.
 *
 * Everything that can change what a step produces is one labelled part:
 * the tool (name, declared version, the executable's content hash), the
 * argv and env templates with variables and params expanded, each param,
 * each profile variable the tool's templates use, each output's file name,
 * each source input's content hash, the hash of each prerequisite output
 * the tool gets, and the order it gets its inputs in.
 * The action key is the XXH3-128 of the parts' canonical encoding
 * (docs/build.md, "Action keys"), and `kiln why` compares the parts of two
 * keys to say what changed.
 *
 * Threads: a key_parts belongs to one thread at a time. */
#ifndef KILND_ACTION_KEY_H
#define KILND_ACTION_KEY_H

#include <stddef.h>

#include "kiln_proto.h"
#include "kiln_store.h"

struct key_part {
	char *label;    /* "in art/a.png"; unique within a key */
	int is_hash;    /* value is hash, else text */
	kiln_id hash;
	char *text;     /* NUL-terminated; may hold '\x1f' item separators */
};

struct key_parts {
	struct key_part *v;
	size_t n, cap;
};

void key_parts_init(struct key_parts *kp);
/* Free the parts' memory; kp can be used again after key_parts_init. */
void key_parts_free(struct key_parts *kp);

/* Add a part. The label and text are copied. Returns 0 or KILN_ENOMEM. */
int key_parts_text(struct key_parts *kp, const char *label, const char *text);
int key_parts_hash(struct key_parts *kp, const char *label, const kiln_id *id);
/* Remove the parts labelled label. */
void key_parts_drop(struct key_parts *kp, const char *label);
/* As key_parts_text with label "<prefix><name>". */
int key_parts_text2(struct key_parts *kp, const char *prefix, const char *name,
                    const char *text);
int key_parts_hash2(struct key_parts *kp, const char *prefix, const char *name,
                    const kiln_id *id);

/* Sort by label and compute the action key. Returns 0 or KILN_ENOMEM. */
int key_parts_key(struct key_parts *kp, kiln_id *key);

/* The parts as protobuf messages (for StepRecord.parts): *out is a
 * malloc'd array of n pointers into one malloc'd block holding everything;
 * free both with key_parts_pb_free. Returns 0 or KILN_ENOMEM. */
int key_parts_to_pb(const struct key_parts *kp, Kiln__KeyPart ***out, size_t *n);
void key_parts_pb_free(Kiln__KeyPart **parts);

/* Compare an earlier key's parts (sorted by label, as stored) with kp
 * (sorted): fill *changes with one KeyChange per added, removed or changed
 * part (pointing into old and into a copy of kp's parts held in the same
 * block), at most max of them, and write a one-line summary of the first
 * few into reason. Returns the number of changes (all of them, even past
 * max) or KILN_ENOMEM. Free *changes with key_changes_free. */
int key_parts_diff(Kiln__KeyPart *const *old, size_t nold,
                   const struct key_parts *kp, size_t max,
                   Kiln__KeyChange ***changes, size_t *nchanges,
                   char *reason, size_t reasonlen);
void key_changes_free(Kiln__KeyChange **changes);

/* "1234abcd" (8 hex digits) of a hash part, or the text (shortened to
 * fit), for messages. */
void key_part_show(const Kiln__KeyPart *p, char *out, size_t outlen);

#endif
