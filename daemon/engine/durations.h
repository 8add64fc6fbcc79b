/* durations.h — how long each step's tool took when it last ran, kept
 * in <project>/.kiln/durations across builds, daemons and a deleted store
 * (durations.c; the scheduler's estimates, estimate.c). A hint, never
 * trusted for anything but ordering: a lost or damaged file costs a
 * first build its order, nothing else.
 *
 * Not thread-safe: the engine calls it with e->mu held. */
#ifndef KILND_DURATIONS_H
#define KILND_DURATIONS_H

#include <stdint.h>

struct durations;

/* Where damage is reported: (arg, is_error, message). */
typedef void (*durations_log_fn)(void *arg, int error, const char *msg);

/* Read <root>/.kiln/durations. A missing file is an empty history; a
 * damaged one (not this format, a malformed line, too big) is ignored in
 * whole or in the part that is damaged, with one line through log naming
 * the file and line. 0 or KILN_ENOMEM (then *dp is NULL). */
int durations_load(const char *root, durations_log_fn log, void *arg,
                   struct durations **dp);

/* profile's url's last duration in ns; 0: none recorded. */
uint64_t durations_get(const struct durations *d, const char *profile, const char *url);

/* Record ns (> 0) as profile's url's last duration. 0 or KILN_ENOMEM;
 * a URL too long to keep is not kept (0). */
int durations_set(struct durations *d, const char *profile, const char *url,
                  uint64_t ns);

/* Write the history when it changed since it was loaded or last saved:
 * to a temporary file in .kiln/, then renamed over the old one (a reader
 * sees the old file or the new one, never a part). The newest
 * DURATIONS_MAX entries are kept. 0 or KILN_EIO. */
int durations_save(struct durations *d);

void durations_free(struct durations *d);

#define DURATIONS_MAX 200000               /* entries kept */
#define DURATIONS_MAX_BYTES (64u << 20)    /* a bigger file is ignored */

#endif
