/* agent_job.c — one job on a build agent (docs/agents.md).
 *
 * The slot's folder is the job's root: emptied, then every input laid
 * out at its project-relative path, copied from the local cache (blobs
 * fetched from the daemon only when the cache lacks them, verified by
 * their id on the way). The program must be the daemon's: a bare name is
 * found on this machine's PATH and hashed; another hash refuses the job
 * (the daemon runs it elsewhere). The tool runs there with the
 * file-access tracer; its outputs (after exit status 0), log, depfile
 * and trace (whatever its exit status: the daemon reads the trace for
 * files the run lacked) are uploaded, the paths in depfile and trace
 * rewritten from this folder to the daemon's project folder, and the job
 * answered. A job the daemon
 * cancels is answered with nothing.
 *
 * Paths from the wire are checked before anything is written: relative,
 * no "..", no "." or empty parts; nothing escapes the slot's folder.
 *
 * Threads: the slot's own thread; s->pid and s->cancelled are also read
 * and set by the loop (agent.c) under its lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "kiln_hex.h"
#include "kiln_rmtree.h"
#include "libkiln_int.h"
#include "tool_spawn.h"

void
agent_gc_maybe(struct agent_slot *s, uint64_t fetched)
{
	struct agent_gc *g = s->gc;
	/* a blob is needed from its fetch until it is laid out: seconds
	 * (KILN_TEST_AGENT_GC_GRACE_S: a test's shorter grace) */
	const char *tg = getenv("KILN_TEST_AGENT_GC_GRACE_S");
	kiln_gc_opts o = {.max_size = s->cfg->cache_max,
	                  .grace_s = tg != NULL ? atoi(tg) : 60};
	kiln_gc_stats st;
	int go;

	if (g == NULL || s->cfg->cache_max == 0)
		return;
	pthread_mutex_lock(&g->mu);
	g->fetched += fetched;
	go = !g->running && g->fetched > s->cfg->cache_max / 8;
	if (go) {
		g->running = 1;
		g->fetched = 0;
	}
	pthread_mutex_unlock(&g->mu);
	if (!go)
		return;
	/* blobs of the running jobs were touched or put within the grace
	 * time: never removed under a job */
	if (kiln_store_gc(s->store, &o, &st) == 0 && st.removed_blobs > 0)
		fprintf(stderr, "kiln: agent: cache over its bound: removed %llu blobs "
		        "(%llu bytes)\n", (unsigned long long)st.removed_blobs,
		        (unsigned long long)st.removed_bytes);
	pthread_mutex_lock(&g->mu);
	g->running = 0;
	pthread_mutex_unlock(&g->mu);
}

/* A relative path without "..", "." or empty parts. */
static int
rel_ok(const char *s)
{
	if (s == NULL || s[0] == '\0' || s[0] == '/' || strlen(s) >= PATH_MAX - 1)
		return 0;
	for (const char *p = s; *p;) {
		size_t k = strcspn(p, "/");
		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += k;
		if (*p == '/' && *++p == '\0')
			return 0;
	}
	return 1;
}

/* Empty the folder (not following symlinks). */
static void
folder_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char sub[PATH_MAX * 2];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		kiln_rmtree(sub);
	}
	closedir(d);
}

/* mkdir -p the folders above root/rel (and rel itself when dir). */
static int
parents(const char *root, const char *rel, int dir)
{
	char buf[PATH_MAX * 2];
	size_t nr = strlen(root);

	if (snprintf(buf, sizeof buf, "%s/%s", root, rel) >= (int)sizeof buf)
		return KILN_ERANGE;
	for (char *p = buf + nr + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return KILN_EIO;
		*p = '/';
	}
	if (dir && mkdir(buf, 0755) != 0 && errno != EEXIST)
		return KILN_EIO;
	return 0;
}

static int
slot_conn(struct agent_slot *s)
{
	return s->conn != NULL ? 0 : agent_connect(s->cfg, &s->conn);
}

/* Fetch blob id (SHA-256 sha) from the shared cache into tmp, checked
 * by both names. 0 or a code (the caller asks the daemon). */
static int
shared_fetch(struct agent_slot *s, const kiln_id *id, const uint8_t *sha, const char *tmp)
{
	char hex[KILN_SHA256_LEN * 2 + 1];
	uint8_t got_sha[KILN_SHA256_LEN];
	kiln_id got;
	uint64_t size;
	int fd, rv;

	if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return KILN_EIO;
	kiln_hex_encode(sha, KILN_SHA256_LEN, hex);
	rv = kiln_cache_get_fd(s->shared, KILN_CACHE_CAS, hex, UINT64_MAX / 2, fd, &size);
	/* nginx checks nothing it stores: both names, from the bytes */
	if (rv == 0 && (lseek(fd, 0, SEEK_SET) != 0 ||
	                (rv = kiln_id_sha256_of_fd(fd, &got, got_sha, NULL)) != 0 ||
	                memcmp(got.b, id->b, 16) != 0 || memcmp(got_sha, sha, 32) != 0))
		rv = rv ? rv : KILN_ECORRUPT;
	close(fd);
	if (rv != 0)
		unlink(tmp);
	return rv;
}

/* The blob id into the local cache (fetched when it is not there: from
 * the shared cache when sha is known, else from the daemon). */
static int
blob_cached(struct agent_slot *s, const kiln_id *id, const uint8_t *sha)
{
	char tmp[PATH_MAX + 16];
	kiln_id got;
	int fd, rv;

	if (kiln_store_has(s->store, id, NULL) == 0) {
		kiln_store_touch(s->store, id, 1);   /* kept longest by gc */
		return 0;
	}
	snprintf(tmp, sizeof tmp, "%s.fetch", s->work);
	if (sha != NULL && s->shared != NULL && shared_fetch(s, id, sha, tmp) == 0) {
		rv = 0;
	} else {
		if ((rv = slot_conn(s)) != 0)
			return rv;
		if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
			return KILN_EIO;
		rv = kiln_blob_get_fd(s->conn, id, fd);   /* verified by libkiln */
		close(fd);
	}
	{
		struct stat st;
		uint64_t size = stat(tmp, &st) == 0 ? (uint64_t)st.st_size : 0;
		if (rv == 0 && (rv = kiln_store_put_move(s->store, tmp, &got)) == 0 &&
		    memcmp(got.b, id->b, 16) != 0)
			rv = KILN_ECORRUPT;
		unlink(tmp);
		if (rv == 0) {
			agent_gc_maybe(s, size);
			if (s->bytes_in != NULL)
				atomic_fetch_add(s->bytes_in, size);
		}
	}
	return rv;
}

static int
copy_file(const char *from, const char *to, int exec)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out, rv = 0;
	char buf[65536];
	ssize_t k;

	if (in < 0)
		return KILN_EIO;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, exec ? 0755 : 0644);
	if (out < 0) {
		close(in);
		return errno == EEXIST ? KILN_EEXIST : KILN_EIO;
	}
	while ((k = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)k) != k) {
			rv = KILN_EIO;
			break;
		}
	if (k < 0)
		rv = KILN_EIO;
	if (close(out) != 0)
		rv = KILN_EIO;
	close(in);
	return rv;
}

/* Lay out one input: fetched into the cache, copied into the root (a
 * copy, not a link: a tool that writes its input must not change the
 * cache). */
int
agent_input_place(struct agent_slot *s, const char *root, const Kiln__AgentFile *f,
                  char *err, size_t len)
{
	char blob[PATH_MAX], dst[PATH_MAX * 2];
	kiln_id id;
	int rv;

	if (!rel_ok(f->path) || f->id.len != 16) {
		snprintf(err, len, "an input path or id from the daemon is not acceptable");
		return KILN_EINVAL;
	}
	memcpy(id.b, f->id.data, 16);
	if ((rv = blob_cached(s, &id, f->sha256.len == 32 ? f->sha256.data : NULL)) != 0) {
		snprintf(err, len, "fetching input %s: %s", f->path, kiln_strerror(rv));
		return rv;
	}
	if ((rv = parents(root, f->path, 0)) != 0 ||
	    (rv = kiln_store_blob_path(s->store, &id, blob, sizeof blob)) != 0) {
		snprintf(err, len, "laying out input %s: %s", f->path, kiln_strerror(rv));
		return rv;
	}
	snprintf(dst, sizeof dst, "%s/%s", root, f->path);
	if ((rv = copy_file(blob, dst, f->exec)) != 0)
		snprintf(err, len, "laying out input %s: %s", f->path, kiln_strerror(rv));
	return rv;
}

/* The program the job names, found here (into exe), must hash to the
 * daemon's. 0, or KILN_ENOTFOUND (none) / KILN_EEXIST (another one) with why said. */
static int
program_check(struct agent_slot *s, const Kiln__AgentJob *job, char *exe, size_t len,
              char *why, size_t wlen)
{
	const char *path = getenv("PATH");
	kiln_id id;
	int fd, rv;

	if (job->program == NULL || job->program[0] == '\0' || job->program_id.len != 16) {
		snprintf(why, wlen, "the job names no program");
		return KILN_EINVAL;
	}
	if (strchr(job->program, '/') != NULL && job->program[0] != '/') {
		if (!rel_ok(job->program))
			return KILN_EINVAL;
		snprintf(exe, len, "%s/%s", s->work, job->program);
	} else if ((rv = spawn_find(job->program, path, s->work, exe, len)) != 0) {
		snprintf(why, wlen, "program '%s' not found on this agent's PATH (%s)",
		         job->program, path ? path : "");
		return KILN_ENOTFOUND;
	}
	if ((fd = open(exe, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(why, wlen, "program %s: %s", exe, strerror(errno));
		return KILN_ENOTFOUND;
	}
	rv = kiln_id_of_fd(fd, &id, NULL);
	close(fd);
	if (rv != 0 || memcmp(id.b, job->program_id.data, 16) != 0) {
		snprintf(why, wlen, "program %s on this agent differs from the daemon's "
		         "(another version?)", exe);
		return KILN_EEXIST;
	}
	return 0;
}

/* ---- running ------------------------------------------------------------- */

struct wait_done {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	struct spawn_result r;
};

static void
on_done(void *arg, const struct spawn_result *r)
{
	struct wait_done *wd = arg;

	pthread_mutex_lock(&wd->mu);
	wd->r = *r;
	wd->done = 1;
	pthread_cond_signal(&wd->cv);
	pthread_mutex_unlock(&wd->mu);
}

/* Whether this program is built with AddressSanitizer. */
static int
agent_is_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 1;
#else
	return 0;
#endif
}

static char *
env_item(const char *name, const char *value)
{
	char *s;

	return asprintf(&s, "%s=%s", name, value) < 0 ? NULL : s;
}

/* ---- what goes back ---------------------------------------------------------- */

/* The file's bytes with every "<work>/" and a trailing "<work>" turned into
 * the daemon's root: the paths a tool wrote in its depfile or the tracer
 * in its trace. *out malloc'd. */
static int
rewrite(const struct agent_slot *s, const char *path, char **out, size_t *nout)
{
	FILE *f = fopen(path, "re"), *m;
	size_t nw = strlen(s->work);
	char *line = NULL;
	size_t cap = 0;
	ssize_t k;

	*out = NULL;
	*nout = 0;
	if (f == NULL)
		return KILN_ENOTFOUND;
	if ((m = open_memstream(out, nout)) == NULL) {
		fclose(f);
		return KILN_ENOMEM;
	}
	while ((k = getline(&line, &cap, f)) > 0) {
		for (char *p = line; *p;) {
			char *hit = strstr(p, s->work);
			if (hit == NULL || (hit[nw] != '/' && hit[nw] != '\n' && hit[nw] != ' ' &&
			                    hit[nw] != '\0' && hit[nw] != ':')) {
				if (hit == NULL) {
					fputs(p, m);
					break;
				}
				fwrite(p, 1, (size_t)(hit - p) + nw, m);
				p = hit + nw;
				continue;
			}
			fwrite(p, 1, (size_t)(hit - p), m);
			fputs(s->root, m);
			p = hit + nw;
		}
	}
	free(line);
	fclose(f);
	return fclose(m) == 0 ? 0 : KILN_ENOMEM;
}

/* Count n bytes sent (kiln status shows them per agent). */
static void
sent(struct agent_slot *s, uint64_t n)
{
	if (s->bytes_out != NULL)
		atomic_fetch_add(s->bytes_out, n);
}

/* The daemon had no upload slot for us (BUSY: remote connections share
 * part of them, docs/agents.md "Security"): wait a little before trying
 * again, 50 ms doubling to 1 s, for about 15 s in all. 0: give up. */
static int
busy_wait(int rv, unsigned *tries)
{
	unsigned ms = *tries < 5 ? 50u << *tries : 1000;
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	if (rv != KILN_EBUSY || ++*tries > 20)
		return 0;
	nanosleep(&ts, NULL);
	return 1;
}

/* Upload a file (or buffer); its id into a 16-byte buffer b. */
static int
upload_fd(struct agent_slot *s, int fd, uint8_t *b)
{
	kiln_id id;
	struct stat st;
	unsigned tries = 0;
	int rv;

	do
		rv = lseek(fd, 0, SEEK_SET) == 0 ? kiln_blob_put_fd(s->conn, fd, NULL, &id)
		                                  : KILN_EIO;
	while (busy_wait(rv, &tries));

	if (rv == 0) {
		memcpy(b, id.b, 16);
		if (fstat(fd, &st) == 0)
			sent(s, (uint64_t)st.st_size);
	}
	return rv;
}

static int
upload_buf(struct agent_slot *s, const void *buf, size_t len, uint8_t *b)
{
	kiln_id id;
	unsigned tries = 0;
	int rv;

	do
		rv = kiln_blob_put(s->conn, buf, len, NULL, &id);
	while (busy_wait(rv, &tries));

	if (rv == 0) {
		memcpy(b, id.b, 16);
		sent(s, len);
	}
	return rv;
}

/* A testing aid: KILN_TEST_AGENT_CORRUPT=1 makes this agent upload each
 * output with its first byte changed while naming the original's id in
 * its answer (what a bad disk or link would do). */
static int
corrupt_test(void)
{
	const char *v = getenv("KILN_TEST_AGENT_CORRUPT");

	return v != NULL && strcmp(v, "1") == 0;
}

/* Put the output open at fd into the shared cache: 0 with its id in b
 * and its SHA-256 in sha, or a code (the caller sends it to the daemon). */
static int
shared_put(struct agent_slot *s, int fd, uint8_t *b, uint8_t *sha)
{
	char hex[KILN_SHA256_LEN * 2 + 1];
	kiln_id id;
	int rv;

	if ((rv = kiln_id_sha256_of_fd(fd, &id, sha, NULL)) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		return rv ? rv : KILN_EIO;
	kiln_hex_encode(sha, KILN_SHA256_LEN, hex);
	if ((rv = kiln_cache_put_fd(s->shared, KILN_CACHE_CAS, hex, fd)) != 0)
		return rv;
	memcpy(b, id.b, 16);
	{
		struct stat st;
		if (fstat(fd, &st) == 0)
			sent(s, (uint64_t)st.st_size);
	}
	return 0;
}

static int
output_upload(struct agent_slot *s, const char *path, uint8_t *b, uint64_t *size,
              uint8_t *sha, int *in_cache)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rv;

	if (fd < 0)
		return KILN_ENOTFOUND;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return KILN_ENOTFOUND;
	}
	*size = (uint64_t)st.st_size;
	*in_cache = 0;
	if (s->shared != NULL && s->cfg->shared_rw && !corrupt_test() &&
	    shared_put(s, fd, b, sha) == 0) {
		*in_cache = 1;   /* the daemon fetches it there */
		close(fd);
		return 0;
	}
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return KILN_EIO;
	}
	if (corrupt_test() && st.st_size > 0) {
		kiln_id id;
		char *buf = malloc((size_t)st.st_size);
		rv = buf == NULL ? KILN_ENOMEM : kiln_id_of_fd(fd, &id, NULL);
		if (rv == 0 && pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
			rv = KILN_EIO;
		if (rv == 0) {
			buf[0] ^= 0x5a;
			rv = upload_buf(s, buf, (size_t)st.st_size, b);
			memcpy(b, id.b, 16);
		}
		free(buf);
		close(fd);
		return rv;
	}
	rv = upload_fd(s, fd, b);
	close(fd);
	return rv;
}

/* Answer on the agent's hello connection (the daemon takes an answer
 * only there), not the slot's own. */
static int
answer(struct agent_slot *s, Kiln__AgentDoneRequest *q)
{
	char err[1024];
	int rv = agent_line_answer(s->line, q, err, sizeof err);

	if (rv == KILN_ENOTFOUND || rv == KILN_EINVAL)
		/* the daemon took the step back, or refused the answer: it
		 * runs the step elsewhere; not a fault of the connection */
		fprintf(stderr, "kiln: agent: lease %llu: answer refused: %s\n",
		        (unsigned long long)q->lease, err);
	else if (rv == KILN_ECLOSED)
		/* the session ended: the daemon gives the step to others */
		fprintf(stderr, "kiln: agent: lease %llu: not answered: %s\n",
		        (unsigned long long)q->lease, err);
	return rv == KILN_ENOTFOUND || rv == KILN_EINVAL || rv == KILN_ECLOSED ? 0 : rv;
}

static int
refuse(struct agent_slot *s, const Kiln__AgentJob *job,
       Kiln__AgentDoneRequest__Outcome outcome, const char *why)
{
	Kiln__AgentDoneRequest q = KILN__AGENT_DONE_REQUEST__INIT;

	fprintf(stderr, "kiln: agent: %s: not run here: %s\n", job->url, why);
	q.agent = s->agent;
	q.lease = job->lease;
	q.outcome = outcome;
	q.error = (char *)why;
	return answer(s, &q);
}

/* Upload the run's depfile and trace (when it has them), paths rewritten
 * to the daemon's project, into q (their ids in ids[1] and ids[2]). */
static int
files_upload(struct agent_slot *s, const Kiln__AgentJob *job, Kiln__AgentDoneRequest *q,
             uint8_t ids[3][16])
{
	char path[PATH_MAX * 3], *buf;
	size_t len;
	int rv;

	if (job->depfile[0] != '\0') {
		snprintf(path, sizeof path, "%s/%s", s->work, job->depfile);
		if (rewrite(s, path, &buf, &len) == 0) {
			rv = upload_buf(s, buf, len, ids[1]);
			free(buf);
			if (rv != 0)
				return rv;
			q->depfile_id.data = ids[1];
			q->depfile_id.len = 16;
		}
	}
	if (!job->notrace && s->shim[0] != '\0') {
		snprintf(path, sizeof path, "%s/%s.trace", s->work, job->scratch);
		if (rewrite(s, path, &buf, &len) == 0) {
			rv = upload_buf(s, buf, len, ids[2]);
			free(buf);
			if (rv != 0)
				return rv;
			q->trace_id.data = ids[2];
			q->trace_id.len = 16;
		}
	}
	return 0;
}

int
agent_job_run(struct agent_slot *s, const Kiln__AgentJob *job)
{
	Kiln__AgentDoneRequest q = KILN__AGENT_DONE_REQUEST__INIT;
	Kiln__AgentFile *outs = NULL, **outp = NULL;
	uint8_t ids[3][16];
	char exe[PATH_MAX * 2], why[PATH_MAX * 3] = "", path[PATH_MAX * 3];
	char **env = NULL;
	size_t nenv = 0;
	struct wait_done wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	struct spawn_req rq = {0};
	int log_fd = -1, rv;

	folder_empty(s->work);
	if (!rel_ok(job->scratch) || (job->depfile[0] != '\0' && !rel_ok(job->depfile)))
		return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED,
		              "a scratch or depfile path that is not acceptable");
	for (size_t i = 0; i < job->n_outputs; i++)
		if (!rel_ok(job->outputs[i]))
			return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED,
			              "an output path that is not acceptable");
	for (size_t i = 0; i < job->n_inputs && !s->cancelled; i++)
		if (agent_input_place(s, s->work, job->inputs[i], why, sizeof why) != 0)
			return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED, why);
	if (s->cancelled)
		return 0;
	if (parents(s->work, job->scratch, 1) != 0)
		return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED,
		              "cannot make the scratch folder");
	for (size_t i = 0; i < job->n_outputs; i++) {
		snprintf(path, sizeof path, "%s/%s", job->scratch, job->outputs[i]);
		parents(s->work, path, 0);
	}
	/* untraced, a file the tool looked for in vain could not be told
	 * from one it never needed: such a run is not the daemon's run */
	if (!job->notrace && s->shim[0] == '\0')
		return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__REFUSED,
		              "no libkilntrace.so on this agent: it cannot trace the tool");
	if ((rv = program_check(s, job, exe, sizeof exe, why, sizeof why)) != 0)
		return refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__REFUSED, why);

	/* the environment: this machine's PATH and HOME, the job's own */
	if ((env = calloc(job->n_env + 16, sizeof *env)) == NULL)
		return KILN_ENOMEM;
	env[nenv++] = env_item("PATH", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	env[nenv++] = env_item("HOME", getenv("HOME") ? getenv("HOME") : s->work);
	env[nenv++] = env_item("LANG", "C.UTF-8");
	snprintf(path, sizeof path, "%s/%s", s->work, job->scratch);
	env[nenv++] = env_item("TMPDIR", path);
	env[nenv++] = env_item("KILN_PROJECT", s->work);
	if (!job->notrace && s->shim[0] != '\0') {
		env[nenv++] = env_item("LD_PRELOAD", s->shim);
		snprintf(path, sizeof path, "%s/%s.trace", s->work, job->scratch);
		env[nenv++] = env_item("KILN_TRACE_FILE", path);
		env[nenv++] = env_item("PYTHONDONTWRITEBYTECODE", "1");
		/* a tool that is itself an ASan binary (this agent's kiln, for
		 * kiln need, in the tests) aborts when a library is preloaded
		 * before libasan unless told not to check, as the daemon's */
		if (getenv("ASAN_OPTIONS") != NULL || agent_is_asan()) {
			const char *a = getenv("ASAN_OPTIONS");
			char *v = NULL;
			if (asprintf(&v, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", a ? a : "",
			             a && a[0] ? ":" : "") < 0)
				v = NULL;
			env[nenv++] = v;
		}
	}
	/* kiln need: through this agent's relay (agent_need.c) */
	if (job->need_token != NULL && job->need_token[0] != '\0' && s->need_url[0] != '\0') {
		env[nenv++] = env_item("KILN", s->kiln_exe);
		env[nenv++] = env_item("KILN_SOCKET", s->need_url);
		env[nenv++] = env_item("KILN_STEP_TOKEN", job->need_token);
	}
	for (size_t i = 0; i < job->n_env; i++)
		env[nenv++] = strdup(job->env[i]);
	for (size_t i = 0; i < nenv; i++)
		if (env[i] == NULL) {
			rv = KILN_ENOMEM;
			goto out;
		}
	snprintf(path, sizeof path, "%s/%s.log", s->work, job->scratch);
	if ((log_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		rv = refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED,
		            "cannot make the log file");
		goto out;
	}
	rq.path = exe;
	rq.argv = (const char *const *)job->argv;
	rq.envp = (const char *const *)env;
	rq.cwd = s->work;
	rq.log_fd = log_fd;
	rq.timeout_ms = job->timeout_ms;
	if (job->n_argv == 0) {
		rv = refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED, "no argv");
		goto out;
	}
	{
		/* argv must end with NULL: the unpacked message's does not */
		char **argv = calloc(job->n_argv + 1, sizeof *argv);
		pid_t pid = 0;
		if (argv == NULL) {
			rv = KILN_ENOMEM;
			goto out;
		}
		memcpy(argv, job->argv, job->n_argv * sizeof *argv);
		rq.argv = (const char *const *)argv;
		rv = spawner_start(s->sp, &rq, on_done, &wd, &pid);
		free(argv);
		if (rv != 0) {
			snprintf(why, sizeof why, "cannot start %s: %s", exe, kiln_strerror(rv));
			rv = refuse(s, job, KILN__AGENT_DONE_REQUEST__OUTCOME__SETUP_FAILED, why);
			goto out;
		}
		__atomic_store_n(&s->pid, pid, __ATOMIC_RELEASE);
		if (s->cancelled)
			spawner_kill(s->sp, pid, 1000);
		pthread_mutex_lock(&wd.mu);
		while (!wd.done)
			pthread_cond_wait(&wd.cv, &wd.mu);
		pthread_mutex_unlock(&wd.mu);
		__atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
		q.pid = pid;
	}
	if (s->cancelled) {   /* nobody wants the answer */
		fprintf(stderr, "kiln: agent: %s: cancelled by the daemon\n", job->url);
		rv = 0;
		goto out;
	}
	if ((rv = slot_conn(s)) != 0)
		goto out;
	q.agent = s->agent;
	q.lease = job->lease;
	q.outcome = KILN__AGENT_DONE_REQUEST__OUTCOME__RAN;
	q.exited = wd.r.exited;
	q.status = wd.r.status;
	q.wall_ns = wd.r.wall_ns;
	q.cpu_ns = wd.r.cpu_ns;
	q.maxrss_kb = wd.r.maxrss_kb;
	q.timed_out = wd.r.timed_out;
	{
		struct stat st;
		if (fstat(log_fd, &st) == 0 && st.st_size > 0 && lseek(log_fd, 0, SEEK_SET) == 0) {
			if ((rv = upload_fd(s, log_fd, ids[0])) != 0)
				goto out;
			q.log_id.data = ids[0];
			q.log_id.len = 16;
		}
	}
	if (wd.r.exited && wd.r.status == 0) {
		outs = calloc(job->n_outputs + 1, sizeof *outs);
		outp = calloc(job->n_outputs + 1, sizeof *outp);
		/* per output: its id, then its SHA-256 */
		uint8_t (*oid)[48] = calloc(job->n_outputs + 1, 48);
		if (outs == NULL || outp == NULL || oid == NULL) {
			free(oid);
			rv = KILN_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < job->n_outputs; i++) {
			kiln__agent_file__init(&outs[q.n_outputs]);
			snprintf(path, sizeof path, "%s/%s/%s", s->work, job->scratch, job->outputs[i]);
			int in_cache = 0;
			rv = output_upload(s, path, oid[i], &outs[q.n_outputs].size, oid[i] + 16,
			                   &in_cache);
			if (rv == KILN_ENOTFOUND)
				continue;   /* the daemon says it was not written */
			if (rv != 0) {
				free(oid);
				goto out;
			}
			outs[q.n_outputs].path = job->outputs[i];
			outs[q.n_outputs].id.data = oid[i];
			outs[q.n_outputs].id.len = 16;
			if (in_cache) {
				outs[q.n_outputs].sha256.data = oid[i] + 16;
				outs[q.n_outputs].sha256.len = 32;
				outs[q.n_outputs].in_cache = 1;
			}
			outp[q.n_outputs] = &outs[q.n_outputs];
			q.n_outputs++;
		}
		q.outputs = outp;
		/* the answer goes before oid is freed */
		if ((rv = files_upload(s, job, &q, ids)) == 0)
			rv = answer(s, &q);
		free(oid);
		goto out;
	}
	/* a failed run's depfile and trace too: the daemon reads the trace
	 * for files the run looked for in vain, whatever its exit status (a
	 * compiler exits 1 on a missing #include) */
	if ((rv = files_upload(s, job, &q, ids)) == 0)
		rv = answer(s, &q);
out:
	if (log_fd >= 0)
		close(log_fd);
	for (size_t i = 0; env != NULL && i < nenv; i++)
		free(env[i]);
	free(env);
	free(outs);
	free(outp);
	return rv;
}
