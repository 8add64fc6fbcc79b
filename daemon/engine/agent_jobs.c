/* agent_jobs.c — steps run by build agents (docs/agents.md).
 *
 * An agent (`kiln agent` on another machine) joins with a number of
 * slots. The workers fill the daemon's own -j slots first, then, while
 * agents have free slots, start a runnable step "remotely": its job is
 * made (run.c's step_job: argv, environment, every input put into the
 * store) and waits as a lease until an agent takes it. The agent runs the
 * tool and uploads what it made; its answer is landed here into the
 * step's scratch folder, log and trace exactly where a local run would
 * have left them, and the step is then finished by the same code as a
 * local run (publish.c: verify, discover, store, record). So a step run
 * on an agent has the same key, records and events as a local one.
 *
 * A lease is the agent's as long as it keeps taking (its heartbeat):
 * past lease_ms without one, or when its connection closes, its steps
 * go back to the runnable heap (to run elsewhere or here) and a late
 * answer is refused. Nothing of an answer is used before every blob it
 * names is in the store (verified by the upload), and a run whose trace
 * shows it looked for a project file the agent lacked, whatever its exit
 * status, is tried again with those files (at most AGENT_TRIES times,
 * then here; which files: agent_files.c).
 *
 * Threads: the daemon's handler threads (join, take, done, leave), its
 * timer (expire) and the engine's workers (start, cancel); everything
 * under e->mu except landing an answer's files and giving back a
 * scratch folder, done while the lease is L_FINISHING (nobody else
 * touches the node's work then). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_jobs.h"
#include "builds.h"
#include "engine_int.h"
#include "need.h"
#include "remote.h"
#include "run.h"
#include "schedule.h"
#include "scratch.h"
#include "step.h"

/* Tries of one step on agents in a run before it runs here: a try is
 * lost to an agent that refused it, a bad answer, or missing files. */
#define AGENT_TRIES 3
/* A lease lasts this long without a heartbeat (engine_config.lease_ms). */
#define LEASE_MS_DEFAULT 5000
/* An agent silent this many lease times is gone. */
#define AGENT_GONE_LEASES 2

enum lease_state {
	L_PREPARING,   /* a worker makes its job */
	L_READY,       /* waits for an agent */
	L_HELD,        /* an agent runs it */
	L_FINISHING,   /* its answer (or its return) is being landed */
	L_CANCELLED,   /* the step no longer wants it; the agent is told */
};

struct lease {
	uint64_t id;
	struct graph *g;
	struct node *n;          /* NULL once cancelled */
	uint64_t agent;          /* 0 until taken */
	enum lease_state st;
	int64_t deadline_ns;
	Kiln__AgentJob *job;     /* L_READY: the job, given to the taker */
	kiln_id *inputs;         /* its inputs' blobs: what agents may read */
	size_t ninputs;
};

struct agent {
	uint64_t id;
	uint32_t pipe;
	char name[64], os[64], arch[32];
	unsigned cores, slots;
	unsigned held;           /* its leases: held, finishing, cancelled */
	int64_t seen_ns;
	uint64_t ran, failed, refused;
	uint64_t bytes_in, bytes_out;   /* as its takes say */
};

struct agents {
	struct agent *v;
	size_t n, cap;
	struct lease *l;
	size_t nl, capl;
	uint64_t next_agent, next_lease;
	unsigned slots;          /* of every agent */
	unsigned inflight;       /* leases not cancelled */
	unsigned nready;
};

static unsigned
lease_ms(const struct engine *e)
{
	return e->cfg.lease_ms ? e->cfg.lease_ms : LEASE_MS_DEFAULT;
}

static struct agents *
agents_get(struct engine *e)
{
	if (e->agents == NULL)
		e->agents = calloc(1, sizeof *e->agents);
	return e->agents;
}

void
agent_jobs_free(struct engine *e)
{
	struct agents *a = e->agents;

	if (a == NULL)
		return;
	for (size_t i = 0; i < a->nl; i++)
		step_job_free(a->l[i].job);
	free(a->l);
	free(a->v);
	free(a);
	e->agents = NULL;
}

static struct agent *
agent_find(struct agents *a, uint64_t id)
{
	for (size_t i = 0; a != NULL && i < a->n; i++)
		if (a->v[i].id == id)
			return &a->v[i];
	return NULL;
}

/* Another agent than ag with its id. */
static int
agent_find_other(const struct agents *a, const struct agent *ag)
{
	for (size_t i = 0; i < a->n; i++)
		if (&a->v[i] != ag && a->v[i].id == ag->id)
			return 1;
	return 0;
}

static struct lease *
lease_find(struct agents *a, uint64_t id)
{
	for (size_t i = 0; a != NULL && i < a->nl; i++)
		if (a->l[i].id == id)
			return &a->l[i];
	return NULL;
}

static void
lease_remove(struct agents *a, struct lease *l)
{
	struct agent *ag = l->agent ? agent_find(a, l->agent) : NULL;

	if (ag != NULL && ag->held > 0)
		ag->held--;
	if (l->st != L_CANCELLED && a->inflight > 0)
		a->inflight--;
	if (l->st == L_READY && a->nready > 0)
		a->nready--;
	step_job_free(l->job);
	free(l->inputs);
	*l = a->l[--a->nl];
}

int
agent_jobs_room(const struct engine *e)
{
	const struct agents *a = e->agents;

	return a != NULL && a->inflight < a->slots;
}

unsigned
agent_jobs_slots(const struct engine *e)
{
	return e->agents != NULL ? e->agents->slots : 0;
}

/* ---- starting and cancelling (the workers; e->mu held) ------------------ */

/* A lease id nobody can guess from the ones before it (getrandom; it
 * is not the only check: an answer must come on the taker's
 * connection), never 0, unique among the leases. */
static uint64_t
lease_id_new(struct agents *a)
{
	uint64_t id;

	do {
		if (getrandom(&id, sizeof id, 0) != sizeof id)
			id = ++a->next_lease ^ (uint64_t)kiln_mono_ns() * 0x9e3779b97f4a7c15u;
	} while (id == 0 || lease_find(a, id) != NULL);
	return id;
}

int
agent_lease_new(struct engine *e, struct graph *g, struct node *n)
{
	struct agents *a = agents_get(e);

	if (a == NULL)
		return KILN_ENOMEM;
	if (a->nl == a->capl) {
		size_t ncap = a->capl ? 2 * a->capl : 16;
		struct lease *nv = realloc(a->l, ncap * sizeof *nv);
		if (nv == NULL)
			return KILN_ENOMEM;
		a->l = nv;
		a->capl = ncap;
	}
	a->l[a->nl++] = (struct lease){.id = lease_id_new(a), .g = g, .n = n,
	                               .st = L_PREPARING};
	a->inflight++;
	n->w->lease = a->l[a->nl - 1].id;
	return 0;
}

/* End n's run as killed: its step is finished (publish.c sees a tool
 * killed by a signal; the worker then cancels or supersedes it). */
static void
run_end_killed(struct engine *e, struct node *n)
{
	struct spawn_result r = {.exited = 0, .status = SIGKILL};

	n->w->lease = 0;
	need_run_end(e, n);   /* its token goes; it held no slot here */
	completed_push(e, &n->w->run, &r);
}

void
agent_lease_ready(struct engine *e, struct node *n, Kiln__AgentJob *job)
{
	struct agents *a = e->agents;
	struct lease *l = lease_find(a, n->w->lease);

	if (l == NULL) {   /* cannot happen: only this worker removes it */
		step_job_free(job);
		run_end_killed(e, n);
		return;
	}
	job->lease = l->id;
	l->job = job;
	/* kept after the job goes to its agent: blob reads are checked
	 * against them (an allocation failure only refuses those reads) */
	if ((l->inputs = calloc(job->n_inputs + 1, sizeof *l->inputs)) != NULL)
		for (size_t i = 0; i < job->n_inputs; i++)
			if (job->inputs[i]->id.len == 16)
				memcpy(l->inputs[l->ninputs++].b, job->inputs[i]->id.data, 16);
	l->st = L_READY;
	a->nready++;
	if (e->cfg.agent_wake != NULL)
		e->cfg.agent_wake(e->cfg.arg, 1);
}

void
agent_lease_failed(struct engine *e, struct node *n)
{
	struct lease *l = lease_find(e->agents, n->w->lease);

	if (l != NULL)
		lease_remove(e->agents, l);
	n->w->lease = 0;
}

int
agent_lease_allow(struct engine *e, struct node *n, const kiln_id *ids, size_t nids)
{
	struct lease *l = lease_find(e->agents, n->w->lease);
	kiln_id *nv;

	if (l == NULL || nids == 0)
		return 0;
	if ((nv = realloc(l->inputs, (l->ninputs + nids) * sizeof *nv)) == NULL)
		return KILN_ENOMEM;
	memcpy(nv + l->ninputs, ids, nids * sizeof *nv);
	l->inputs = nv;
	l->ninputs += nids;
	return 0;
}

int
agent_lease_cancel(struct engine *e, struct node *n)
{
	struct agents *a = e->agents;
	struct lease *l = lease_find(a, n->w->lease);

	if (l == NULL || l->st == L_PREPARING || l->st == L_FINISHING ||
	    l->st == L_CANCELLED)
		return KILN_EBUSY;   /* its worker or its answer ends it */
	if (l->st == L_READY) {
		lease_remove(a, l);
	} else {                 /* held: the agent is told on its next take */
		l->st = L_CANCELLED;
		l->n = NULL;
		a->inflight--;
	}
	run_end_killed(e, n);
	return 0;
}

void
agent_jobs_quit(struct engine *e)
{
	struct agents *a = e->agents;

	for (size_t i = 0; a != NULL && i < a->nl;) {
		struct lease *l = &a->l[i];
		if ((l->st == L_READY || l->st == L_HELD) && l->n != NULL)
			agent_lease_cancel(e, l->n);   /* removes or cancels l */
		else
			i++;
		if (i < a->nl && &a->l[i] == l && l->st == L_CANCELLED)
			i++;
	}
}

/* ---- giving a step back ---------------------------------------------------- */

/* The lease l (L_FINISHING, e->mu held, dropped and taken again) is over
 * without a result: give the scratch folder back and put the step back
 * on the runnable heap, or finish it cancelled when nobody wants it. */
static void
lease_return(struct engine *e, struct lease *l)
{
	uint64_t id = l->id;
	struct graph *g = l->g;
	struct node *n = l->n;

	pthread_mutex_unlock(&e->mu);
	scratch_give(e, n->w->scratch, n->w->log_fd);
	n->w->log_fd = -1;
	n->w->machine[0] = '\0';
	free(n->w->landed);   /* that answer's: not the next run's */
	n->w->landed = NULL;
	pthread_mutex_lock(&e->mu);
	if ((l = lease_find(e->agents, id)) != NULL)
		lease_remove(e->agents, l);
	n->w->lease = 0;
	need_run_end(e, n);   /* the next run gets a token of its own */
	if (node_wanted(e, n)) {
		n->st = N_RUNNABLE;
		if (heap_push(n->w->local_only ? &e->runnable_local : &e->runnable, g, n) != 0) {
			set_error(n, "%s: out of memory", n->ks->url);
			n->outcome = O_FAILED;
			node_finish(e, g, n, N_FAILED);
		}
		pthread_cond_broadcast(&e->cv);
	} else {
		node_finish(e, g, n, N_CANCELLED);
	}
	builds_check(e);
}

/* Return every lease of agent id that is not being landed (e->mu held,
 * dropped and taken again). */
static void
agent_leases_return(struct engine *e, uint64_t id)
{
	for (;;) {
		struct agents *a = e->agents;
		struct lease *l = NULL;
		for (size_t i = 0; i < a->nl && l == NULL;)
			if (a->l[i].agent == id && a->l[i].st == L_CANCELLED)
				lease_remove(a, &a->l[i]);   /* nothing to return */
			else if (a->l[i].agent == id && a->l[i].st == L_HELD)
				l = &a->l[i];
			else
				i++;
		if (l == NULL)
			return;
		l->st = L_FINISHING;
		lease_return(e, l);
	}
}

/* Waiting jobs go back to the heap when no agent is left to take them. */
static void
ready_return(struct engine *e)
{
	for (;;) {
		struct agents *a = e->agents;
		struct lease *l = NULL;
		if (a == NULL || a->slots > 0)
			return;
		for (size_t i = 0; i < a->nl && l == NULL; i++)
			if (a->l[i].st == L_READY)
				l = &a->l[i];
		if (l == NULL)
			return;
		a->nready--;
		l->st = L_FINISHING;
		step_job_free(l->job);
		l->job = NULL;
		lease_return(e, l);
	}
}

static void
agent_remove(struct engine *e, uint64_t id, const char *why)
{
	struct agents *a = e->agents;
	struct agent *ag = agent_find(a, id);

	if (ag == NULL)
		return;
	engine_logf(e, 0, "agent %s (%llu) left: %s", ag->name, (unsigned long long)id, why);
	a->slots -= ag->slots;
	*ag = a->v[--a->n];
	agent_leases_return(e, id);
	ready_return(e);
}

/* ---- the agents' requests -------------------------------------------------- */

static void
copy_str(char *dst, size_t len, const char *src)
{
	size_t k = 0;

	/* names are for people and logs: printable ASCII only */
	for (; src != NULL && *src != '\0' && k + 1 < len; src++)
		dst[k++] = *src >= 0x20 && *src < 0x7f ? *src : '?';
	dst[k] = '\0';
}

int
engine_agent_join(struct engine *e, uint32_t pipe, const Kiln__AgentHelloRequest *q,
                  uint64_t *id)
{
	struct agents *a;
	struct agent *ag;
	int rv = 0;

	if (q->slots == 0 || q->slots > 4096)
		return KILN_EINVAL;
	pthread_mutex_lock(&e->mu);
	if ((a = agents_get(e)) == NULL) {
		rv = KILN_ENOMEM;
	} else if (a->n == a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 8;
		struct agent *nv = realloc(a->v, ncap * sizeof *nv);
		if (nv == NULL)
			rv = KILN_ENOMEM;
		else {
			a->v = nv;
			a->cap = ncap;
		}
	}
	if (rv == 0) {
		ag = &a->v[a->n++];
		memset(ag, 0, sizeof *ag);
		/* unguessable: a slot's own connection answers with it */
		do {
			if (getrandom(&ag->id, sizeof ag->id, 0) != sizeof ag->id)
				ag->id = ++a->next_agent ^ (uint64_t)kiln_mono_ns();
		} while (ag->id == 0 || agent_find_other(a, ag));
		ag->pipe = pipe;
		copy_str(ag->name, sizeof ag->name, q->name);
		copy_str(ag->os, sizeof ag->os, q->os);
		copy_str(ag->arch, sizeof ag->arch, q->arch);
		ag->cores = q->cores;
		ag->slots = q->slots;
		ag->seen_ns = kiln_mono_ns();
		a->slots += q->slots;
		*id = ag->id;
		engine_logf(e, 0, "agent %s (%llu) joined: %u slots, %s %s", ag->name,
		         (unsigned long long)ag->id, ag->slots, ag->os, ag->arch);
		pthread_cond_broadcast(&e->cv);   /* runnable steps may start */
	}
	pthread_mutex_unlock(&e->mu);
	return rv;
}

uint32_t
engine_agent_lease_ms(const struct engine *e)
{
	return lease_ms(e);
}

void
engine_agent_pipe_closed(struct engine *e, uint32_t pipe)
{
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; e->agents != NULL && i < e->agents->n;)
		if (e->agents->v[i].pipe == pipe)
			agent_remove(e, e->agents->v[i].id, "its connection closed");
		else
			i++;
	pthread_mutex_unlock(&e->mu);
}

static int
listed(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

int
engine_agent_take(struct engine *e, uint64_t id, uint32_t pipe, const Kiln__AgentTakeRequest *q,
                  Kiln__AgentTakeReply *rep)
{
	uint32_t nfree = q->free;
	const uint64_t *running = q->running;
	size_t nrunning = q->n_running;
	struct agents *a;
	struct agent *ag;
	int64_t now = kiln_mono_ns();
	size_t njobs = 0, ncancel = 0;

	kiln__agent_take_reply__init(rep);
	pthread_mutex_lock(&e->mu);
	a = e->agents;
	if ((ag = agent_find(a, id)) == NULL || ag->pipe != pipe) {
		pthread_mutex_unlock(&e->mu);
		return KILN_ENOTFOUND;
	}
	ag->seen_ns = now;
	ag->bytes_in = q->bytes_in;
	ag->bytes_out = q->bytes_out;
	if (nfree > ag->slots)
		nfree = ag->slots;
	rep->jobs = calloc(nfree + 1, sizeof *rep->jobs);
	rep->cancel = calloc(ag->held + 1, sizeof *rep->cancel);
	if (rep->jobs == NULL || rep->cancel == NULL) {
		pthread_mutex_unlock(&e->mu);
		engine_agent_take_free(rep);
		return KILN_ENOMEM;
	}
	/* its leases: renewed when it still runs them; a held one it does
	 * not list was lost on the way (it never got the reply): back to
	 * the heap; a cancelled one it no longer lists is over */
	for (size_t i = 0; i < a->nl;) {
		struct lease *l = &a->l[i];
		int has = listed(running, nrunning, l->id);
		if (l->agent != id) {
			i++;
		} else if (l->st == L_CANCELLED && !has) {
			lease_remove(a, l);
		} else if (l->st == L_CANCELLED) {
			rep->cancel[ncancel++] = l->id;
			i++;
		} else if (l->st == L_HELD && has) {
			l->deadline_ns = now + (int64_t)lease_ms(e) * 1000000;
			i++;
		} else if (l->st == L_HELD) {
			l->st = L_FINISHING;
			lease_return(e, l);   /* drops e->mu: start over */
			a = e->agents;
			if ((ag = agent_find(a, id)) == NULL)
				break;
			i = 0;
		} else {
			i++;
		}
	}
	for (size_t i = 0; ag != NULL && i < a->nl && njobs < nfree && ag->held < ag->slots; i++) {
		struct lease *l = &a->l[i];
		if (l->st != L_READY)
			continue;
		l->st = L_HELD;
		l->agent = id;
		l->deadline_ns = now + (int64_t)lease_ms(e) * 1000000;
		a->nready--;
		ag->held++;
		rep->jobs[njobs++] = l->job;
		l->job = NULL;
	}
	rep->n_jobs = njobs;
	rep->n_cancel = ncancel;
	pthread_mutex_unlock(&e->mu);
	return ag == NULL ? KILN_ENOTFOUND : 0;
}

void
engine_agent_take_free(Kiln__AgentTakeReply *rep)
{
	for (size_t i = 0; i < rep->n_jobs; i++)
		step_job_free(rep->jobs[i]);
	free(rep->jobs);
	free(rep->cancel);
	rep->jobs = NULL;
	rep->cancel = NULL;
	rep->n_jobs = rep->n_cancel = 0;
}

unsigned
engine_agent_ready(struct engine *e)
{
	unsigned n;

	pthread_mutex_lock(&e->mu);
	n = e->agents != NULL ? e->agents->nready : 0;
	pthread_mutex_unlock(&e->mu);
	return n;
}

void
engine_agents_expire(struct engine *e)
{
	int64_t now = kiln_mono_ns();
	int64_t gone = (int64_t)lease_ms(e) * AGENT_GONE_LEASES * 1000000;

	pthread_mutex_lock(&e->mu);
	for (int again = 1; again && e->agents != NULL;) {
		struct agents *a = e->agents;
		again = 0;
		for (size_t i = 0; i < a->n && !again; i++)
			if (now - a->v[i].seen_ns > gone) {
				agent_remove(e, a->v[i].id, "silent past its lease");
				again = 1;
			}
		for (size_t i = 0; i < a->nl && !again; i++)
			if (a->l[i].st == L_HELD && now > a->l[i].deadline_ns) {
				engine_logf(e, 0, "%s: its agent's lease ran out; running it "
				         "elsewhere", a->l[i].n->ks->url);
				a->l[i].st = L_FINISHING;
				lease_return(e, &a->l[i]);
				again = 1;
			}
	}
	pthread_mutex_unlock(&e->mu);
}

/* ---- landing an answer ------------------------------------------------------ */

static int
id_of(const ProtobufCBinaryData *b, kiln_id *id)
{
	if (b->len != 16)
		return KILN_EINVAL;
	memcpy(id->b, b->data, 16);
	return 0;
}

/* Copy blob id (which must be in the store, size bytes when size is not
 * UINT64_MAX) to fd at offset off. */
static int
blob_copy(struct engine *e, const kiln_id *id, uint64_t size, int fd, off_t off)
{
	char path[PATH_MAX];
	struct stat st;
	int in, rv = 0;

	if (kiln_store_blob_path(e->s, id, path, sizeof path) != 0 ||
	    (in = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return KILN_ENOTFOUND;
	if (fstat(in, &st) != 0 || (size != UINT64_MAX && (uint64_t)st.st_size != size)) {
		close(in);
		return KILN_EINVAL;
	}
	for (off_t done = 0; done < st.st_size && rv == 0;) {
		char buf[65536];
		ssize_t k = pread(in, buf, sizeof buf, done);
		if (k <= 0 || pwrite(fd, buf, (size_t)k, off + done) != k)
			rv = KILN_EIO;
		done += k > 0 ? k : 0;
	}
	close(in);
	return rv;
}

static int
blob_to_file(struct engine *e, const kiln_id *id, uint64_t size, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	int rv;

	if (fd < 0)
		return KILN_EIO;
	rv = blob_copy(e, id, size, fd, 0);
	if (close(fd) != 0 && rv == 0)
		rv = KILN_EIO;
	return rv;
}

/* An output's file name from the wire: inside the scratch folder, never
 * absolute, never "..". */
static int
name_ok(const char *s)
{
	if (s == NULL || s[0] == '\0' || s[0] == '/')
		return 0;
	for (const char *p = s; *p; ) {
		size_t k = strcspn(p, "/");
		if ((k == 2 && p[0] == '.' && p[1] == '.') || (k == 1 && p[0] == '.') || k == 0)
			return 0;
		p += k;
		if (*p == '/')
			p++;
	}
	return 1;
}

/* Put what the agent made where the tool would have left it here: the
 * declared outputs into the scratch folder, the log into the log file,
 * the depfile beside it, the trace into the trace file at this run's
 * offset. The node is the caller's (L_FINISHING), e->mu not held.
 * 0 or a code with msg saying what was wrong. */
static int
answer_land(struct engine *e, struct node *n, const Kiln__AgentDoneRequest *q,
            char *msg, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX * 3];
	kiln_id id;
	int rv, fd;

	scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir);
	if (q->log_id.len > 0) {
		if (id_of(&q->log_id, &id) != 0 ||
		    (rv = blob_copy(e, &id, UINT64_MAX, n->w->log_fd, 0)) != 0) {
			snprintf(msg, len, "its log is not in the store");
			return KILN_EINVAL;
		}
	}
	if (q->exited && q->status == 0) {
		free(n->w->landed);
		if ((n->w->landed = calloc(n->ks->noutputs + 1, sizeof *n->w->landed)) == NULL) {
			snprintf(msg, len, "out of memory");
			return KILN_ENOMEM;
		}
		for (size_t i = 0; i < n->ks->noutputs; i++) {
			uint64_t size;
			const Kiln__AgentFile *f = NULL;
			for (size_t k = 0; k < q->n_outputs; k++)
				if (q->outputs[k]->path != NULL &&
				    strcmp(q->outputs[k]->path, n->ks->outputs[i].file) == 0)
					f = q->outputs[k];
			if (f == NULL)
				continue;   /* publish says the tool did not write it */
			/* no copy into scratch: the blob is the output (its
			 * bytes were checked against its id when uploaded) */
			/* put in the shared cache by the agent: fetched by its
			 * SHA-256 (checked) and then by our name */
			if (f->in_cache && f->sha256.len == 32 && id_of(&f->id, &id) == 0 &&
			    kiln_store_has(e->s, &id, NULL) != 0) {
				kiln_id got;
				if (remote_blob_fetch(e, f->sha256.data, f->size, &got) != 0 ||
				    memcmp(got.b, id.b, 16) != 0) {
					snprintf(msg, len, "output '%s': not in the shared cache as the "
					         "answer says", n->ks->outputs[i].name);
					return KILN_EINVAL;
				}
			}
			if (!name_ok(f->path) || id_of(&f->id, &id) != 0 ||
			    kiln_store_has(e->s, &id, &size) != 0 || size != f->size) {
				snprintf(msg, len, "output '%s': its blob is not in the store "
				         "or has another size (a corrupt upload?)",
				         n->ks->outputs[i].name);
				return KILN_EINVAL;
			}
			n->w->landed[i] = (struct landed_out){id, size, 1};
		}
	}
	if (q->depfile_id.len > 0 && n->ks->tool->depfile) {
		scratch_path(e, n->w->scratch, ".d", 1, path, sizeof path);
		if (id_of(&q->depfile_id, &id) != 0 ||
		    blob_to_file(e, &id, UINT64_MAX, path) != 0) {
			snprintf(msg, len, "its depfile is not in the store");
			return KILN_EINVAL;
		}
	}
	if (q->trace_id.len > 0) {
		scratch_path(e, n->w->scratch, ".trace", 1, path, sizeof path);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		rv = fd < 0 || id_of(&q->trace_id, &id) != 0 ? KILN_EIO
		     : blob_copy(e, &id, UINT64_MAX, fd, n->w->trace_off);
		if (fd >= 0)
			close(fd);
		if (rv != 0) {
			snprintf(msg, len, "its trace is not in the store");
			return KILN_EINVAL;
		}
	}
	return 0;
}

/* Give the step back after a try on an agent that brought no result
 * (e->mu held, lease L_FINISHING). local: run it here next. */
static void
try_lost(struct engine *e, struct lease *l, int local)
{
	struct node *n = l->n;

	n->w->agent_tries++;
	if (local || n->w->agent_tries >= AGENT_TRIES)
		n->w->local_only = 1;
	lease_return(e, l);
}

int
engine_agent_done(struct engine *e, uint64_t id, uint32_t pipe,
                  const Kiln__AgentDoneRequest *q, char *err, size_t len)
{
	struct agents *a;
	struct agent *ag;
	struct lease *l;
	struct node *n;
	struct spawn_result r = {0};
	char name[64];
	int rv;

	err[0] = '\0';
	pthread_mutex_lock(&e->mu);
	a = e->agents;
	ag = agent_find(a, id);
	l = lease_find(a, q->lease);
	/* only on the connection that said hello and took the lease: an
	 * id and a lease number are not proof enough (another holder of
	 * the agent token could have learnt them) */
	if (ag == NULL || ag->pipe != pipe || l == NULL || l->agent != id ||
	    l->st != L_HELD) {
		if (ag != NULL && ag->pipe == pipe && l != NULL && l->agent == id &&
		    l->st == L_CANCELLED)
			lease_remove(a, l);
		pthread_mutex_unlock(&e->mu);
		snprintf(err, len, "lease %llu is not held by this connection (expired, "
		         "cancelled, never given, or taken on another connection: "
		         "answer on the one that said hello)", (unsigned long long)q->lease);
		return KILN_ENOTFOUND;
	}
	l->st = L_FINISHING;
	n = l->n;
	snprintf(name, sizeof name, "%s", ag->name);
	if (q->outcome != KILN__AGENT_DONE_REQUEST__OUTCOME__RAN) {
		char why[600];
		copy_str(why, sizeof why, q->error);
		ag->refused++;
		if (q->outcome == KILN__AGENT_DONE_REQUEST__OUTCOME__REFUSED) {
			/* kiln why says why it ran here */
			char *nr = NULL;
			if (asprintf(&nr, "%s; agent %s refused it: %s", n->reason ? n->reason
			             : "it had to run", name, why) >= 0) {
				free(n->reason);
				n->reason = nr;
			}
		}
		engine_logf(e, 0, "%s: agent %s did not run it (%s); running it %s", n->ks->url,
		         name, why, q->outcome == KILN__AGENT_DONE_REQUEST__OUTCOME__REFUSED
		         ? "elsewhere" : "again");
		try_lost(e, l, q->outcome == KILN__AGENT_DONE_REQUEST__OUTCOME__REFUSED);
		pthread_mutex_unlock(&e->mu);
		return 0;
	}
	pthread_mutex_unlock(&e->mu);

	rv = answer_land(e, n, q, err, len);
	pthread_mutex_lock(&e->mu);
	if ((l = lease_find(e->agents, q->lease)) == NULL) {   /* cannot happen */
		pthread_mutex_unlock(&e->mu);
		return KILN_ENOTFOUND;
	}
	if (rv != 0) {
		engine_logf(e, 1, "%s: the answer of agent %s was refused: %s", n->ks->url,
		         name, err);
		if ((ag = agent_find(e->agents, id)) != NULL)
			ag->failed++;
		try_lost(e, l, 0);
		pthread_mutex_unlock(&e->mu);
		return rv;
	}
	/* A run that looked in vain for a file this machine has is not the
	 * run it would have been here, whatever its exit status (a compiler
	 * exits 1 on a missing #include): never a result (a success's record
	 * would claim the file's content, a failure is not the tool's).
	 * Tried again with those files, and after AGENT_TRIES here. */
	{
		int lacked;
		pthread_mutex_unlock(&e->mu);
		lacked = agent_trace_lacked(e, n);
		pthread_mutex_lock(&e->mu);
		if ((l = lease_find(e->agents, q->lease)) == NULL) {   /* cannot happen */
			pthread_mutex_unlock(&e->mu);
			return KILN_ENOTFOUND;
		}
		if (lacked == AGENT_LACKED_HERE) {
			engine_logf(e, 0, "%s: agent %s lacked a file outside the project "
			         "its tool looked for; running it here", n->ks->url, name);
			try_lost(e, l, 1);
			pthread_mutex_unlock(&e->mu);
			return 0;
		}
		if (lacked) {
			engine_logf(e, 0, "%s: agent %s lacked files its tool looked for; "
			         "sending them with the next try", n->ks->url, name);
			try_lost(e, l, 0);
			pthread_mutex_unlock(&e->mu);
			return 0;
		}
	}
	r.exited = q->exited;
	r.status = q->status;
	r.wall_ns = q->wall_ns;
	r.cpu_ns = q->cpu_ns;
	r.maxrss_kb = q->maxrss_kb;
	r.timed_out = q->timed_out;
	n->w->agent_pid = q->pid;
	snprintf(n->w->machine, sizeof n->w->machine, "%s", name);
	if ((ag = agent_find(e->agents, id)) != NULL) {
		if (q->exited && q->status == 0)
			ag->ran++;
		else
			ag->failed++;
	}
	lease_remove(e->agents, l);
	n->w->lease = 0;
	need_run_end(e, n);
	completed_push(e, &n->w->run, &r);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int
engine_agent_blob_wanted(struct engine *e, const kiln_id *id)
{
	int found = 0;

	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; e->agents != NULL && i < e->agents->nl && !found; i++) {
		const struct lease *l = &e->agents->l[i];
		if (l->st != L_HELD)
			continue;
		for (size_t k = 0; k < l->ninputs && !found; k++)
			found = memcmp(l->inputs[k].b, id->b, 16) == 0;
	}
	pthread_mutex_unlock(&e->mu);
	return found;
}

unsigned
engine_agent_upload_room(struct engine *e)
{
	unsigned n = 0;

	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; e->agents != NULL && i < e->agents->nl; i++) {
		const struct lease *l = &e->agents->l[i];
		if (l->st == L_HELD && l->n != NULL)
			n += (unsigned)l->n->ks->noutputs + 3;   /* log, depfile, trace */
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* ---- status ------------------------------------------------------------------ */

int
engine_agents_status(struct engine *e, Kiln__AgentInfo ***out, size_t *nout)
{
	Kiln__AgentInfo **v = NULL;
	size_t n = 0;
	int rv = 0;

	*out = NULL;
	*nout = 0;
	pthread_mutex_lock(&e->mu);
	if (e->agents != NULL && e->agents->n > 0) {
		struct agents *a = e->agents;
		size_t one = sizeof(Kiln__AgentInfo) + sizeof a->v[0].name;
		/* one block: the pointers, then each info with its name */
		char *block = calloc(a->n, sizeof *v + one);
		v = (Kiln__AgentInfo **)block;
		for (size_t i = 0; v != NULL && i < a->n; i++) {
			Kiln__AgentInfo *ai = (Kiln__AgentInfo *)(block + a->n * sizeof *v + i * one);
			kiln__agent_info__init(ai);
			ai->name = (char *)(ai + 1);
			memcpy(ai->name, a->v[i].name, sizeof a->v[i].name);
			ai->id = a->v[i].id;
			ai->slots = a->v[i].slots;
			for (size_t k = 0; k < a->nl; k++)
				ai->running += a->l[k].agent == a->v[i].id &&
				               a->l[k].st != L_CANCELLED;
			ai->ran = a->v[i].ran;
			ai->failed = a->v[i].failed;
			ai->refused = a->v[i].refused;
			ai->bytes_in = a->v[i].bytes_in;
			ai->bytes_out = a->v[i].bytes_out;
			v[n++] = ai;
		}
		if (v == NULL)
			rv = KILN_ENOMEM;
	}
	pthread_mutex_unlock(&e->mu);
	*out = v;
	*nout = n;
	return rv;
}
