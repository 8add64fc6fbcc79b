/* owners.h — which client connections still want each build, so that a
 * build no connected client wants any more is cancelled (docs/protocol.md,
 * "When a client goes away").
 *
 * A build is owned by the connection (nng pipe) that started it, and by
 * every connection that asked for its status since. When the last of them
 * closes, the build is orphaned; if no connection asks for its status
 * within the grace period (a client reconnecting), it is cancelled through
 * the cancel function, as a Ctrl-C would (steps another build shares go
 * on). Builds started before owners_new, or whose claim could not be
 * recorded (out of memory), are never cancelled this way.
 *
 * Threads: every function may be called from any thread. One thread of
 * its own waits for grace periods to end and calls cancel, never with a
 * lock of this module held. */
#ifndef KILND_OWNERS_H
#define KILND_OWNERS_H

#include <stdint.h>

struct kilnd_owners;

struct owners_config {
	unsigned grace_ms;  /* how long an orphaned build waits for a client */
	/* Cancel the build (called on the owners thread). */
	void (*cancel)(void *arg, uint64_t build);
	/* Whether the build has ended (or is unknown): its claim is dropped.
	 * Called with the module's lock held: it must not call back in. */
	int (*ended)(void *arg, uint64_t build);
	void *arg;
};

/* Start the owners thread. Returns 0, KILN_ENOMEM or KILN_EIO. */
int owners_new(const struct owners_config *cfg, struct kilnd_owners **op);

/* Stop the thread (no cancel is called after this returns) and free.
 * NULL is allowed. */
void owners_free(struct kilnd_owners *o);

/* Connection pipe wants build. With start, the build is new and becomes
 * tracked; without, only a build tracked already gains the owner (asking
 * about a build untracked or ended claims nothing). An orphaned build
 * that gains an owner is kept. Returns 0 or KILN_ENOMEM. */
int owners_claim(struct kilnd_owners *o, uint64_t build, uint32_t pipe,
                 int start);

/* Connection pipe closed: it owns nothing any more. Idempotent. */
void owners_pipe_closed(struct kilnd_owners *o, uint32_t pipe);

#endif
