/* verified.c — the table of recently verified blobs (see verified.h).
 *
 * Threads: any handler thread (jobs.c); one mutex guards the table, never
 * held while hashing. A direct-mapped table: a blob's slot is picked by
 * its id, and a newer entry simply replaces an older one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verified.h"
#include "kiln_clock.h"

struct entry {
	kiln_id id;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	time_t when;           /* CLOCK_MONOTONIC seconds; 0: empty */
};

struct kilnd_verified {
	pthread_mutex_t mu;
	struct entry *e;
	unsigned n, ttl_s;
};

int
verified_new(unsigned n, unsigned ttl_s, struct kilnd_verified **vp)
{
	struct kilnd_verified *v = calloc(1, sizeof(*v));

	*vp = NULL;
	if (v == NULL || (n > 0 && (v->e = calloc(n, sizeof(*v->e))) == NULL)) {
		free(v);
		return KILN_ENOMEM;
	}
	pthread_mutex_init(&v->mu, NULL);
	v->n = n;
	v->ttl_s = ttl_s;
	*vp = v;
	return 0;
}

void
verified_free(struct kilnd_verified *v)
{
	if (v == NULL)
		return;
	pthread_mutex_destroy(&v->mu);
	free(v->e);
	free(v);
}

static int
same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The slot of id (the table is not empty). */
static struct entry *
slot(struct kilnd_verified *v, const kiln_id *id)
{
	uint32_t h;

	memcpy(&h, id->b, sizeof(h)); /* ids are uniformly spread already */
	return &v->e[h % v->n];
}

/* Whether the table says id at st hashed right within ttl. */
static int
remembered(struct kilnd_verified *v, const kiln_id *id, const struct stat *st)
{
	struct entry *e;
	int hit;

	if (v->n == 0)
		return 0;
	pthread_mutex_lock(&v->mu);
	e = slot(v, id);
	hit = e->when != 0 && (time_t)(kiln_mono_ns() / 1000000000 + 1) /* never 0 */ - e->when < (time_t)v->ttl_s &&
	      kiln_id_cmp(&e->id, id) == 0 && e->dev == st->st_dev &&
	      e->ino == st->st_ino && e->size == st->st_size &&
	      same_time(&e->mtime, &st->st_mtim) &&
	      same_time(&e->ctime, &st->st_ctim);
	pthread_mutex_unlock(&v->mu);
	return hit;
}

static void
remember(struct kilnd_verified *v, const kiln_id *id, const struct stat *st)
{
	if (v->n == 0)
		return;
	pthread_mutex_lock(&v->mu);
	*slot(v, id) = (struct entry){.id = *id, .dev = st->st_dev,
	                              .ino = st->st_ino, .size = st->st_size,
	                              .mtime = st->st_mtim, .ctime = st->st_ctim,
	                              .when = (time_t)(kiln_mono_ns() / 1000000000 + 1) /* never 0 */};
	pthread_mutex_unlock(&v->mu);
}

int
verified_check(struct kilnd_verified *v, const kiln_id *id, int fd,
               const struct stat *st)
{
	kiln_id got;
	int rv;

	if (remembered(v, id, st))
		return 0;
	if (lseek(fd, 0, SEEK_SET) != 0 ||
	    (rv = kiln_id_of_fd(fd, &got, NULL)) != 0)
		return KILN_EIO;
	if (kiln_id_cmp(&got, id) != 0)
		return KILN_ECORRUPT;
	remember(v, id, st);
	return 0;
}
