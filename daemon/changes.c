/* changes.c — coalescing the watch's changes into SourcesChanged events
 * (see changes.h).
 *
 * Threads: changes_note on the watch's reader thread, the publisher on its
 * own; c->mu guards everything but the thread handle. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "changes.h"
#include "kiln_clock.h"
#include "kiln_error.h"

struct kilnd_changes {
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* CLOCK_MONOTONIC: a change, or stop */
	pthread_t thread;
	int stop;
	unsigned settle_ms;
	char *paths[CHANGES_MAX_PATHS];
	size_t npaths;
	uint32_t more;
	int everything;
	int64_t first_ns;           /* the batch's first change; 0: none */
	int64_t due_ns;             /* publish then, unless more changes come */
	uint32_t holds[CHANGES_MAX_HOLDS]; /* connections holding reports */
	unsigned nholds;
	void (*publish)(void *arg, Kiln__Event *ev);
	void *arg;
};

/* What is pending goes out in one event. Called unlocked, with the batch
 * taken out of c. */
static void
batch_publish(struct kilnd_changes *c, char **paths, size_t n, uint32_t more,
              int everything)
{
	Kiln__Event ev = KILN__EVENT__INIT;
	Kiln__SourcesChanged sc = KILN__SOURCES_CHANGED__INIT;

	sc.paths = paths;
	sc.n_paths = n;
	sc.more = more;
	sc.everything = everything;
	ev.kind_case = KILN__EVENT__KIND_SOURCES_CHANGED;
	ev.sources_changed = &sc;
	c->publish(c->arg, &ev);
}

static void *
changes_main(void *arg)
{
	struct kilnd_changes *c = arg;
	char *paths[CHANGES_MAX_PATHS];
	struct timespec ts;
	size_t n;
	uint32_t more;
	int everything;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->stop && (c->first_ns == 0 || c->nholds > 0))
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->stop)
			break;
		if (kiln_mono_ns() < c->due_ns) {
			ts.tv_sec = c->due_ns / 1000000000;
			ts.tv_nsec = c->due_ns % 1000000000;
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
			continue; /* the due time may have moved */
		}
		n = c->npaths;
		memcpy(paths, c->paths, n * sizeof *paths);
		more = c->more;
		everything = c->everything;
		c->npaths = 0;
		c->more = 0;
		c->everything = 0;
		c->first_ns = 0;
		pthread_mutex_unlock(&c->mu);
		batch_publish(c, paths, n, more, everything);
		for (size_t i = 0; i < n; i++)
			free(paths[i]);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int
changes_new(unsigned settle_ms, void (*publish)(void *arg, Kiln__Event *ev),
            void *arg, struct kilnd_changes **cp)
{
	struct kilnd_changes *c = calloc(1, sizeof *c);
	pthread_condattr_t ca;
	int rv;

	if (c == NULL)
		return KILN_ENOMEM;
	c->settle_ms = settle_ms;
	c->publish = publish;
	c->arg = arg;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rv = pthread_create(&c->thread, NULL, changes_main, c)) != 0) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		free(c);
		return kiln_err_from_errno(rv);
	}
	*cp = c;
	return 0;
}

void
changes_free(struct kilnd_changes *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	for (size_t i = 0; i < c->npaths; i++)
		free(c->paths[i]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int
changes_hold(struct kilnd_changes *c, uint32_t pipe, int hold)
{
	unsigned i;
	int rv = 0;

	if (c == NULL) /* before the daemon serves, or after */
		return 0;
	pthread_mutex_lock(&c->mu);
	for (i = 0; i < c->nholds && c->holds[i] != pipe; i++)
		;
	if (hold && i == c->nholds) {
		if (c->nholds == CHANGES_MAX_HOLDS)
			rv = KILN_EBUSY;
		else
			c->holds[c->nholds++] = pipe;
	} else if (!hold && pipe == 0) {
		c->nholds = 0;
	} else if (!hold && i < c->nholds) {
		c->holds[i] = c->holds[--c->nholds];
	}
	if (c->nholds == 0 && c->first_ns != 0) {
		c->due_ns = 0; /* released: what gathered goes out now */
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return rv;
}

int
changes_held(struct kilnd_changes *c, uint32_t pipe)
{
	int held = 0;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < c->nholds && !held; i++)
		held = c->holds[i] == pipe;
	pthread_mutex_unlock(&c->mu);
	return held;
}

/* Add relpath to the batch once. Lock held. */
static void
batch_add(struct kilnd_changes *c, const char *relpath)
{
	for (size_t i = 0; i < c->npaths; i++)
		if (strcmp(c->paths[i], relpath) == 0)
			return;
	if (c->npaths == CHANGES_MAX_PATHS ||
	    (c->paths[c->npaths] = strdup(relpath)) == NULL)
		c->more++;
	else
		c->npaths++;
}

void
changes_note(struct kilnd_changes *c, const char *relpath, int complete)
{
	int64_t now = kiln_mono_ns();
	int64_t wait = (int64_t)(complete ? CHANGES_COMPLETE_MS : c->settle_ms) * 1000000;

	pthread_mutex_lock(&c->mu);
	if (relpath == NULL)
		c->everything = 1;
	else
		batch_add(c, relpath);
	if (c->first_ns == 0)
		c->first_ns = now;
	/* a quiet period from now, but never past the batch's deadline (a
	 * held batch's first change is its release's: no deadline meanwhile) */
	c->due_ns = now + wait;
	if (c->nholds == 0 &&
	    c->due_ns > c->first_ns + (int64_t)CHANGES_MAX_WAIT_MS * 1000000)
		c->due_ns = c->first_ns + (int64_t)CHANGES_MAX_WAIT_MS * 1000000;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}
