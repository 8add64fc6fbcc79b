/* jobs.c — the handler thread pool (see jobs.h).
 *
 * Threads: jobs_push from any thread (nng's callbacks), jobs_stop and
 * jobs_free from the main thread; the pool's threads pop and run. One mutex and condition
 * variable guard the queue. */
#include <pthread.h>
#include <stdlib.h>

#include "jobs.h"
#include "kiln_error.h"

struct kilnd_jobs {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	int quit, joined;
	unsigned n;
	pthread_t threads[];
};

/* The next job, or NULL once told to quit and the queue is empty. */
static struct job *
jobs_pop(struct kilnd_jobs *jobs)
{
	struct job *j;

	pthread_mutex_lock(&jobs->mu);
	while (jobs->head == NULL && !jobs->quit)
		pthread_cond_wait(&jobs->cv, &jobs->mu);
	if ((j = jobs->head) != NULL) {
		jobs->head = j->next;
		if (jobs->head == NULL)
			jobs->tail = NULL;
		j->next = NULL;
	}
	pthread_mutex_unlock(&jobs->mu);
	return j;
}

static void *
jobs_thread(void *arg)
{
	struct kilnd_jobs *jobs = arg;
	struct job *j;

	while ((j = jobs_pop(jobs)) != NULL)
		j->run(j);
	return NULL;
}

int
jobs_new(unsigned n, struct kilnd_jobs **jp)
{
	struct kilnd_jobs *jobs = calloc(1, sizeof(*jobs) + n * sizeof(pthread_t));

	*jp = NULL;
	if (jobs == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&jobs->mu, NULL);
	pthread_cond_init(&jobs->cv, NULL);
	for (; jobs->n < n; jobs->n++)
		if (pthread_create(&jobs->threads[jobs->n], NULL, jobs_thread,
		                   jobs) != 0) {
			jobs_free(jobs);
			return KILN_EIO;
		}
	*jp = jobs;
	return 0;
}

int
jobs_push(struct kilnd_jobs *jobs, struct job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&jobs->mu);
	if (jobs->quit) {
		pthread_mutex_unlock(&jobs->mu);
		return KILN_ECLOSED;
	}
	if (jobs->tail != NULL)
		jobs->tail->next = j;
	else
		jobs->head = j;
	jobs->tail = j;
	pthread_cond_signal(&jobs->cv);
	pthread_mutex_unlock(&jobs->mu);
	return 0;
}

void
jobs_stop(struct kilnd_jobs *jobs)
{
	if (jobs->joined)
		return;
	pthread_mutex_lock(&jobs->mu);
	jobs->quit = 1;
	pthread_cond_broadcast(&jobs->cv);
	pthread_mutex_unlock(&jobs->mu);
	for (unsigned i = 0; i < jobs->n; i++)
		pthread_join(jobs->threads[i], NULL);
	jobs->joined = 1;
}

void
jobs_free(struct kilnd_jobs *jobs)
{
	if (jobs == NULL)
		return;
	jobs_stop(jobs);
	pthread_cond_destroy(&jobs->cv);
	pthread_mutex_destroy(&jobs->mu);
	free(jobs);
}
