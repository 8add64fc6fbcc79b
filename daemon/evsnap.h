/* evsnap.h — a subscription's snapshot (SubscribeRequest.snapshot) as the
 * poll replies that carry it: engine_snapshot's steps encoded into pages,
 * each a whole Reply of at most max_steps steps and max_bytes bytes
 * (kiln.proto, "Snapshot"; docs/protocol.md). events.c keeps them with the
 * subscription until its client has read them.
 *
 * Threads: a page set is owned by one thread at a time (built by the
 * subscribing handler, then events.c's, under its lock). */
#ifndef KILND_EVSNAP_H
#define KILND_EVSNAP_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_store.h"

struct engine_snap; /* engine.h */

struct ev_pages {
	uint32_t n;
	struct ev_page { uint8_t *buf; size_t len; } *page;
	uint64_t steps;          /* in all the pages */
	uint64_t bytes;          /* their encoded size, together */
};

/* Encode s's steps into *out (NULL when s has none): pages of
 * Reply{PollReply{epoch, through, snapshot, snapshot_more}}, in s's
 * order. Sizes the snapshot does not know are asked of store (NULL: left
 * 0). Returns 0 or KILN_ENOMEM. */
int evsnap_pages(const struct engine_snap *s, kiln_store *store, uint64_t epoch,
                 uint64_t through, size_t max_bytes, uint32_t max_steps,
                 struct ev_pages **out);

/* NULL is allowed. */
void evsnap_free(struct ev_pages *p);

#endif
