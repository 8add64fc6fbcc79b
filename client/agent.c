/* agent.c — the loop of `kiln agent` (docs/agents.md).
 *
 * The main thread owns the daemon connection it takes work on: hello,
 * then takes, each listing the leases its slots still run (the
 * heartbeat) and how many slots are free; a take with a free slot waits
 * at the daemon until a job comes (at most a third of the lease, so that
 * heartbeats keep coming). Each job goes to a free slot's thread, which
 * runs it with a connection of its own (fetches, uploads and the answer
 * never wait behind a parked take). A lease the daemon cancels gets its
 * tool killed. When the daemon goes away (restarted, stopped, the
 * network), every job is abandoned (the daemon gives them to others) and
 * the agent connects again, waiting longer each time up to 5 s.
 *
 * Threads: the main loop and one thread per slot; jobs pass through
 * `mu`. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "libkiln_int.h"
#include "tool_spawn.h"

#ifndef KILN_LIBDIR
#define KILN_LIBDIR "/usr/local/lib/kiln"
#endif

struct slot_thread {
	struct agent_slot s;
	struct agent *ag;
	pthread_t thread;
	Kiln__AgentJob *job;     /* given by the loop (mu); NULL: free */
	uint64_t lease;          /* the job's lease while it runs (mu) */
};

struct agent {
	const struct agent_config *cfg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct slot_thread *slots;
	unsigned nslots;
	int quit;
	/* the jobs' replies are freed with the reply that carried them */
	kiln_store *store;
	struct kilnd_spawner *sp;
	struct agent_gc gc;
	struct agent_relay *relay;
	kiln_cache *shared;
	_Atomic uint64_t bytes_in, bytes_out;   /* blobs fetched and sent */
	struct agent_line line;  /* the hello connection, for answers */
	int lock_fd;             /* flock on <cache>/agent.lock */
};

/* The relay's question: which running job has this need token (mu). */
static int
find_token(void *arg, const char *token, char *work, size_t len)
{
	struct agent *ag = arg;
	int rv = KILN_ENOTFOUND;

	pthread_mutex_lock(&ag->mu);
	for (unsigned i = 0; i < ag->nslots && rv != 0; i++) {
		const Kiln__AgentJob *j = ag->slots[i].job;
		if (j != NULL && j->need_token != NULL && j->need_token[0] != '\0' &&
		    strcmp(j->need_token, token) == 0) {
			snprintf(work, len, "%s", ag->slots[i].s.work);
			rv = 0;
		}
	}
	pthread_mutex_unlock(&ag->mu);
	return rv;
}

static void
nap_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

int
agent_connect(const struct agent_config *cfg, kiln_conn **c)
{
	kiln_connect_opts o = {.url = cfg->url, .token = cfg->token,
	                       .tls_ca = cfg->tls_ca, .tls_cert = cfg->tls_cert,
	                       .tls_key = cfg->tls_key, .flags = KILN_CONNECT_NO_START,
	                       .timeout_ms = 30000};

	return kiln_connect(&o, c);
}

/* ---- the slots ---------------------------------------------------------- */

static void *
slot_main(void *arg)
{
	struct slot_thread *t = arg;
	struct agent *ag = t->ag;

	pthread_mutex_lock(&ag->mu);
	for (;;) {
		Kiln__AgentJob *job;
		while (t->job == NULL && !ag->quit)
			pthread_cond_wait(&ag->cv, &ag->mu);
		if (ag->quit)
			break;
		job = t->job;
		pthread_mutex_unlock(&ag->mu);
		if (agent_job_run(&t->s, job) != 0 && t->s.conn != NULL) {
			kiln_close(t->s.conn);   /* connect again for the next */
			t->s.conn = NULL;
		}
		kiln__agent_job__free_unpacked(job, NULL);
		pthread_mutex_lock(&ag->mu);
		t->job = NULL;
		t->lease = 0;
		t->s.cancelled = 0;
		pthread_cond_broadcast(&ag->cv);
	}
	pthread_mutex_unlock(&ag->mu);
	return NULL;
}

/* The shim beside this program (bin/libkilntrace.so), else the
 * installed one; "" when there is none (jobs run untraced). */
static void
shim_find(char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			snprintf(out, len, "%.*s/libkilntrace.so", (int)(slash - exe), exe);
			if (access(out, R_OK) == 0)
				return;
		}
	}
	snprintf(out, len, "%s/libkilntrace.so", KILN_LIBDIR);
	if (access(out, R_OK) != 0)
		out[0] = '\0';
}

static int
mkdirs(const char *path)
{
	char buf[PATH_MAX];

	if (strlen(path) >= sizeof buf)
		return KILN_ERANGE;
	strcpy(buf, path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0755) != 0 && errno != EEXIST)
				return KILN_EIO;
			*p = '/';
		}
	return mkdir(buf, 0755) != 0 && errno != EEXIST ? KILN_EIO : 0;
}

static int
agent_open(struct agent *ag, const struct agent_config *cfg)
{
	kiln_store_opts so = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_BATCH};
	char path[PATH_MAX], shim[PATH_MAX];
	int rv;

	/* the cache's path goes into traces as the prefix rewritten to the
	 * daemon's folder: no character the trace escapes */
	if (strpbrk(cfg->cache, "\\\n") != NULL) {
		fprintf(stderr, "kiln: agent: --cache %s: a path without '\\' or a "
		        "newline, please\n", cfg->cache);
		return KILN_EINVAL;
	}
	/* one agent per cache: two would empty each other's work folders */
	snprintf(path, sizeof path, "%s/agent.lock", cfg->cache);
	if ((rv = mkdirs(cfg->cache)) != 0 ||
	    (ag->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "kiln: agent: the cache %s: %s\n", cfg->cache,
		        rv ? kiln_strerror(rv) : strerror(errno));
		return rv ? rv : KILN_EIO;
	}
	if (flock(ag->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "kiln: agent: another agent uses the cache %s (give this "
		        "one --cache DIR of its own)\n", cfg->cache);
		return KILN_EBUSY;
	}
	snprintf(path, sizeof path, "%s/store", cfg->cache);
	if ((rv = kiln_store_open(path, &so, &ag->store)) != 0) {
		fprintf(stderr, "kiln: agent: the cache %s: %s\n", cfg->cache, kiln_strerror(rv));
		return rv;
	}
	if ((rv = spawner_new(&ag->sp, 1)) != 0) {
		fprintf(stderr, "kiln: agent: %s\n", kiln_strerror(rv));
		return rv;
	}
	if (cfg->shared_url != NULL) {
		kiln_cache_config cc = {.url = cfg->shared_url, .read_only = !cfg->shared_rw,
		                        .basic_auth_file = cfg->shared_basic,
		                        .bearer_token_file = cfg->shared_bearer,
		                        .ca_file = cfg->shared_ca};
		if ((rv = kiln_cache_open(&cc, &ag->shared)) != 0) {
			fprintf(stderr, "kiln: agent: the shared cache %s: %s\n", cfg->shared_url,
			        kiln_strerror(rv));
			return rv;
		}
		fprintf(stderr, "kiln: agent: inputs from the shared cache %s%s\n",
		        cfg->shared_url, cfg->shared_rw ? ", outputs to it" : "");
	}
	shim_find(shim, sizeof shim);
	if (shim[0] == '\0')
		fprintf(stderr, "kiln: agent: no libkilntrace.so beside kiln nor in "
		        KILN_LIBDIR ": steps run untraced\n");
	if ((ag->slots = calloc(cfg->slots, sizeof *ag->slots)) == NULL)
		return KILN_ENOMEM;
	{
		char need_url[PATH_MAX + 16], exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		exe[n > 0 ? n : 0] = '\0';
		need_url[0] = '\0';
		snprintf(path, sizeof path, "%s/work/need", cfg->cache);
		if (n <= 0 || mkdirs(path) != 0 ||
		    agent_relay_start(cfg, ag->store, find_token, ag, &ag->relay, need_url,
		                      sizeof need_url) != 0) {
			fprintf(stderr, "kiln: agent: cannot listen for the tools' kiln need: "
			        "a step that uses it fails here\n");
			need_url[0] = '\0';
		}
		for (unsigned i = 0; i < cfg->slots; i++) {
			snprintf(ag->slots[i].s.need_url, sizeof ag->slots[i].s.need_url, "%s",
			         need_url);
			snprintf(ag->slots[i].s.kiln_exe, sizeof ag->slots[i].s.kiln_exe, "%s", exe);
		}
	}
	for (unsigned i = 0; i < cfg->slots; i++) {
		struct slot_thread *t = &ag->slots[i];
		t->ag = ag;
		t->s.cfg = cfg;
		t->s.store = ag->store;
		t->s.sp = ag->sp;
		t->s.gc = &ag->gc;
		t->s.line = &ag->line;
		t->s.shared = ag->shared;
		t->s.bytes_in = &ag->bytes_in;
		t->s.bytes_out = &ag->bytes_out;
		snprintf(t->s.shim, sizeof t->s.shim, "%s", shim);
		snprintf(t->s.work, sizeof t->s.work, "%s/work/%u", cfg->cache, i);
		if ((rv = mkdirs(t->s.work)) != 0) {
			fprintf(stderr, "kiln: agent: %s: %s\n", t->s.work, kiln_strerror(rv));
			return rv;
		}
		/* the trace's paths are the ones the kernel resolved: through
		 * a --cache with ".." or a symlink in it they would not start
		 * with the folder as given, and not be rewritten */
		if (realpath(t->s.work, path) == NULL || strpbrk(path, "\\\n") != NULL) {
			fprintf(stderr, "kiln: agent: %s: no real path without '\\' or a "
			        "newline\n", t->s.work);
			return KILN_EINVAL;
		}
		snprintf(t->s.work, sizeof t->s.work, "%s", path);
		if (pthread_create(&t->thread, NULL, slot_main, t) != 0)
			return KILN_EIO;
		ag->nslots++;
	}
	return 0;
}

/* Kill the tool slot t runs now, if any (the slot's thread sets its pid). */
static void
slot_kill(struct agent *ag, struct slot_thread *t)
{
	pid_t pid = __atomic_load_n(&t->s.pid, __ATOMIC_ACQUIRE);

	if (pid > 0)
		spawner_kill(ag->sp, pid, 1000);
}

static void
agent_close(struct agent *ag)
{
	pthread_mutex_lock(&ag->mu);
	ag->quit = 1;
	for (unsigned i = 0; i < ag->nslots; i++) {
		ag->slots[i].s.cancelled = 1;
		slot_kill(ag, &ag->slots[i]);
	}
	pthread_cond_broadcast(&ag->cv);
	pthread_mutex_unlock(&ag->mu);
	for (unsigned i = 0; i < ag->nslots; i++) {
		pthread_join(ag->slots[i].thread, NULL);
		kiln_close(ag->slots[i].s.conn);
	}
	agent_relay_stop(ag->relay);
	kiln_cache_close(ag->shared);
	spawner_free(ag->sp);
	free(ag->slots);
	kiln_store_close(ag->store);
	if (ag->lock_fd >= 0)
		close(ag->lock_fd);
}

/* ---- the line: answers on the hello connection -------------------------- */

/* Contexts of a connection the loop never uses (its takes use the main
 * one): each carries one answer at a time. */
#define LINE_FIRST CONN_SLOT_EVENTS
#define LINE_N (CONN_NSLOTS - CONN_SLOT_EVENTS)
/* As long as a slot's own connection waited for an answer's reply (the
 * daemon may fetch an output from the shared cache before it replies). */
#define LINE_TIMEOUT_MS 30000

int
agent_line_answer(struct agent_line *l, const Kiln__AgentDoneRequest *q,
                  char *err, size_t len)
{
	Kiln__Request req;
	struct conn_reply r;
	unsigned k = 0;
	int rv;

	pthread_mutex_lock(&l->mu);
	while (l->conn != NULL && l->busy == (1u << LINE_N) - 1)
		pthread_cond_wait(&l->cv, &l->mu);
	if (l->conn == NULL) {
		pthread_mutex_unlock(&l->mu);
		snprintf(err, len, "no session with the daemon");
		return KILN_ECLOSED;
	}
	while (l->busy & (1u << k))
		k++;
	l->busy |= 1u << k;
	l->users++;
	pthread_mutex_unlock(&l->mu);
	lk_request_init(l->conn, &req);
	req.body_case = KILN__REQUEST__BODY_AGENT_DONE;
	req.agent_done = (Kiln__AgentDoneRequest *)q;
	rv = lk_call(l->conn, LINE_FIRST + k, &req, NULL, 0, LINE_TIMEOUT_MS,
	             KILN__REPLY__BODY__NOT_SET, &r, err, len);
	if (rv == 0)
		conn_reply_free(&r);
	pthread_mutex_lock(&l->mu);
	l->busy &= ~(1u << k);
	l->users--;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return rv;
}

/* A session began on c: answers go there. */
static void
line_attach(struct agent_line *l, kiln_conn *c)
{
	pthread_mutex_lock(&l->mu);
	l->conn = c;
	pthread_mutex_unlock(&l->mu);
}

/* The session ended: wait for the answers on its connection (each ends
 * within the connection's timeout) so that it can be closed. */
static void
line_detach(struct agent_line *l)
{
	pthread_mutex_lock(&l->mu);
	l->conn = NULL;
	pthread_cond_broadcast(&l->cv);
	while (l->users > 0)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* ---- talking to the daemon -------------------------------------------------- */

static int
hello(kiln_conn *c, const struct agent_config *cfg, uint64_t *id, uint32_t *lease_ms,
      char *root, size_t len)
{
	Kiln__Request req;
	Kiln__AgentHelloRequest q = KILN__AGENT_HELLO_REQUEST__INIT;
	struct conn_reply r;
	struct utsname u;
	char os[200];
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int rv;

	if (uname(&u) != 0)
		memset(&u, 0, sizeof u);
	snprintf(os, sizeof os, "%s %s", u.sysname, u.release);
	q.name = (char *)cfg->name;
	q.os = os;
	q.arch = u.machine;
	q.cores = cores > 0 ? (uint32_t)cores : 1;
	q.slots = cfg->slots;
	lk_request_init(c, &req);
	req.body_case = KILN__REQUEST__BODY_AGENT_HELLO;
	req.agent_hello = &q;
	if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_AGENT_HELLO_REPLY, &r)) != 0)
		return rv;
	*id = r.rep->agent_hello_reply->agent;
	*lease_ms = r.rep->agent_hello_reply->lease_ms;
	snprintf(root, len, "%s", r.rep->agent_hello_reply->root ?
	         r.rep->agent_hello_reply->root : "");
	conn_reply_free(&r);
	return root[0] == '/' ? 0 : KILN_EPROTO;
}

/* Hand the reply's jobs to free slots and cancel what it says (mu not
 * held). Jobs are unpacked copies the slots own. */
static int
dispatch(struct agent *ag, const Kiln__AgentTakeReply *tr)
{
	int rv = 0;

	pthread_mutex_lock(&ag->mu);
	for (size_t k = 0; k < tr->n_cancel; k++)
		for (unsigned i = 0; i < ag->nslots; i++) {
			struct slot_thread *t = &ag->slots[i];
			if (t->lease != tr->cancel[k])
				continue;
			t->s.cancelled = 1;
			slot_kill(ag, t);
		}
	for (size_t k = 0; k < tr->n_jobs; k++) {
		uint8_t *buf;
		size_t len = kiln__agent_job__get_packed_size(tr->jobs[k]);
		struct slot_thread *t = NULL;
		for (unsigned i = 0; i < ag->nslots && t == NULL; i++)
			if (ag->slots[i].job == NULL)
				t = &ag->slots[i];
		if (t == NULL || (buf = malloc(len ? len : 1)) == NULL) {
			rv = KILN_ENOMEM;   /* not answered: the lease runs out */
			continue;
		}
		kiln__agent_job__pack(tr->jobs[k], buf);
		t->job = kiln__agent_job__unpack(NULL, len, buf);
		free(buf);
		if (t->job == NULL) {
			rv = KILN_ENOMEM;
			continue;
		}
		t->lease = t->job->lease;
		t->s.cancelled = 0;
	}
	pthread_cond_broadcast(&ag->cv);
	pthread_mutex_unlock(&ag->mu);
	return rv;
}

/* Abandon every job (the daemon forgot this agent, or went away): kill
 * the tools and wait until the slots are free. */
static void
abandon_all(struct agent *ag)
{
	pthread_mutex_lock(&ag->mu);
	for (unsigned i = 0; i < ag->nslots; i++) {
		struct slot_thread *t = &ag->slots[i];
		if (t->job == NULL)
			continue;
		t->s.cancelled = 1;
		slot_kill(ag, t);
	}
	for (unsigned i = 0; i < ag->nslots; i++)
		while (ag->slots[i].job != NULL)
			pthread_cond_wait(&ag->cv, &ag->mu);
	pthread_mutex_unlock(&ag->mu);
}

/* Slots without a job (mu held). */
static unsigned
slots_free(const struct agent *ag)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ag->nslots; i++)
		n += ag->slots[i].job == NULL;
	return n;
}

/* One session with the daemon: hello, then take until it fails. Returns
 * the error that ended it. */
static int
session(struct agent *ag, kiln_conn *c)
{
	uint64_t id, running[4096];
	uint32_t lease_ms;
	char root[PATH_MAX];
	int rv;

	if ((rv = hello(c, ag->cfg, &id, &lease_ms, root, sizeof root)) != 0)
		return rv;
	fprintf(stderr, "kiln: agent: joined %s as agent %llu (%u slots)\n",
	        ag->cfg->url, (unsigned long long)id, ag->cfg->slots);
	line_attach(&ag->line, c);
	pthread_mutex_lock(&ag->mu);
	for (unsigned i = 0; i < ag->nslots; i++) {
		ag->slots[i].s.agent = id;
		snprintf(ag->slots[i].s.root, sizeof ag->slots[i].s.root, "%s", root);
	}
	pthread_mutex_unlock(&ag->mu);
	while (!*ag->cfg->stop) {
		Kiln__Request req;
		Kiln__AgentTakeRequest q = KILN__AGENT_TAKE_REQUEST__INIT;
		struct conn_reply r;
		unsigned nfree = 0;
		size_t nrun = 0;

		pthread_mutex_lock(&ag->mu);
		for (unsigned i = 0; i < ag->nslots; i++)
			if (ag->slots[i].job == NULL)
				nfree++;
			else if (nrun < sizeof running / sizeof running[0])
				running[nrun++] = ag->slots[i].lease;
		pthread_mutex_unlock(&ag->mu);
		q.agent = id;
		q.free = nfree;
		q.running = running;
		q.n_running = nrun;
		q.wait_ms = nfree > 0 ? lease_ms / 3 : 0;
		q.bytes_in = atomic_load(&ag->bytes_in);
		q.bytes_out = atomic_load(&ag->bytes_out);
		/* a daemon gone (stopped, killed, unplugged) leaves a request
		 * unanswered, not failed: give up on it soon after its park,
		 * well before the daemon would give our jobs to others */
		c->timeout_ms = (int)q.wait_ms + 3000;
		lk_request_init(c, &req);
		req.body_case = KILN__REQUEST__BODY_AGENT_TAKE;
		req.agent_take = &q;
		if ((rv = lk_call_main(c, &req, KILN__REPLY__BODY_AGENT_TAKE_REPLY, &r)) != 0)
			return rv;
		dispatch(ag, r.rep->agent_take_reply);
		conn_reply_free(&r);
		if (nfree == 0) {
			/* busy: wait for a slot to free up, or the next heartbeat */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += (long)(lease_ms / 3) * 1000000;
			until.tv_sec += until.tv_nsec / 1000000000;
			until.tv_nsec %= 1000000000;
			pthread_mutex_lock(&ag->mu);
			while (!*ag->cfg->stop && slots_free(ag) == 0 &&
			       pthread_cond_timedwait(&ag->cv, &ag->mu, &until) != ETIMEDOUT)
				;
			pthread_mutex_unlock(&ag->mu);
		}
	}
	return 0;
}

int
agent_main(const struct agent_config *cfg)
{
	struct agent ag = {.cfg = cfg, .lock_fd = -1};
	unsigned backoff = 200;
	int said = 0, rv;

	pthread_mutex_init(&ag.mu, NULL);
	pthread_mutex_init(&ag.gc.mu, NULL);
	pthread_cond_init(&ag.cv, NULL);
	pthread_mutex_init(&ag.line.mu, NULL);
	pthread_cond_init(&ag.line.cv, NULL);
	if ((rv = agent_open(&ag, cfg)) != 0) {
		agent_close(&ag);
		return 1;
	}
	while (!*cfg->stop) {
		kiln_conn *c = NULL;
		if ((rv = agent_connect(cfg, &c)) == 0) {
			backoff = 200;
			said = 0;
			rv = session(&ag, c);
			line_detach(&ag.line);
			kiln_close(c);
			if (*cfg->stop)
				break;
			if (rv == KILN_EAUTH || rv == KILN_EVERSION || rv == KILN_ENOTSUP) {
				fprintf(stderr, "kiln: agent: the daemon refused this agent: %s\n",
				        kiln_strerror(rv));
				abandon_all(&ag);
				agent_close(&ag);
				return 1;
			}
			fprintf(stderr, "kiln: agent: lost the daemon at %s (%s); its "
			        "jobs are abandoned; connecting again\n", cfg->url,
			        kiln_strerror(rv));
			abandon_all(&ag);
		} else if (!said) {
			fprintf(stderr, "kiln: agent: no daemon at %s yet (%s); trying "
			        "again\n", cfg->url, kiln_strerror(rv));
			said = 1;
		}
		nap_ms(backoff);
		backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
	}
	abandon_all(&ag);
	agent_close(&ag);
	pthread_cond_destroy(&ag.cv);
	pthread_mutex_destroy(&ag.mu);
	return 0;
}
