/* jobs.h — a fixed pool of threads running queued jobs in order of
 * arrival. kilnd's server hands every request to it, so that handlers
 * (which read and write files, hash, fsync) never run on nng's own threads,
 * which must stay free to move bytes for every connection. */
#ifndef KILND_JOBS_H
#define KILND_JOBS_H

struct job {
	struct job *next;            /* the queue's; the pusher leaves it */
	void (*run)(struct job *j);  /* runs on a pool thread */
};

struct kilnd_jobs;

/* Start n threads. Returns 0, KILN_ENOMEM or KILN_EIO. */
int jobs_new(unsigned n, struct kilnd_jobs **jp);

/* Queue j (any thread). A job is queued at most once at a time. Returns 0,
 * or KILN_ECLOSED once jobs_stop has begun (j is not queued: the caller
 * cleans up). */
int jobs_push(struct kilnd_jobs *jobs, struct job *j);

/* Refuse new jobs, run every job still queued, then end the threads. */
void jobs_stop(struct kilnd_jobs *jobs);

/* Stop if need be, and free. NULL is allowed. */
void jobs_free(struct kilnd_jobs *jobs);

#endif
