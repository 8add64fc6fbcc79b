/* test_crash.c — a put is visible only once complete, even when the process
 * doing it is killed at any point.
 *
 * A child process opens the store and puts blobs of many sizes through every
 * put path (buf, fd, move, path, blob writer), naming them by index entries
 * and action results, and appends a record of every call that returned to a
 * log file. Iterations cycle through the three durabilities; with
 * KILN_DURABLE_BATCH the records go through kiln_batch commits of a few
 * puts' records each, logged once the commit returned. Once the child has opened the store, the parent waits a random
 * 0-50 ms, SIGKILLs it, and checks the store from outside (every file under
 * objects/ re-hashes to its name) and through a fresh handle (every logged
 * call is still in effect, every record names a sound blob, fsck is clean). The store is kept across iterations,
 * so each child also opens a store its predecessor crashed in.
 *
 * The parent never has the store open while a child runs (LMDB and fork do
 * not mix). KILN_TEST_SEED=<n> repeats a run's kill delays and content. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define ITERATIONS   40
#define MAX_DELAY_US 50000
#define MAX_LEN      ((5u << 20) + 11)

static const size_t sizes[] = {
	0, 1, 100, 4096, 65537, 300000, (1u << 20) + 3, 3u << 20, MAX_LEN,
	70000, 200, 1500000,
};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static const char *const methods[] = {"put_buf", "put_fd", "put_move",
                                      "blob writer", "put_path"};

/* What the child logs after a call returned 0. */
enum { REC_PUT = 1, REC_INDEX, REC_ACTION };

struct rec {
	uint32_t kind, iter, seq, nout;
	kiln_id id;      /* PUT, INDEX: the blob; ACTION: the key */
	kiln_id out[2];  /* ACTION outputs */
	char profile[8];
	char url[40];
};

static uint64_t
test_seed(void)
{
	const char *e = getenv("KILN_TEST_SEED");
	struct timespec ts;

	if (e && *e)
		return strtoull(e, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
	        ((uint64_t)getpid() << 40)) | 1;
}

static kiln_id
action_key(uint32_t iter, uint32_t seq)
{
	char text[64];
	kiln_id k;

	snprintf(text, sizeof text, "crash action %u/%u", iter, seq);
	kiln_id_of_buf(text, strlen(text), &k);
	return k;
}

/* ---- the child -------------------------------------------------------- */

static void __attribute__((noreturn))
child_die(uint32_t seq, const char *what, int rv)
{
	fprintf(stderr, "crash child, op %u: %s: %s\n", seq, what,
	        kiln_strerror(rv));
	_exit(1);
}

static void
child_write_file(const char *path, const void *buf, size_t len, uint32_t seq)
{
	if (tu_try_write_file(path, buf, len) != 0)
		child_die(seq, "write source file", kiln_err_from_errno(errno));
}

static int
child_put(kiln_store *s, const char *src, uint32_t iter, uint32_t seq,
          const uint8_t *buf, size_t len, const kiln_id *want, kiln_id *id)
{
	char path[4096 + 64];
	int fd, rv;

	switch (seq % 5) {
	case 0:
		return kiln_store_put_buf(s, buf, len, id);
	case 1:
		if ((fd = tu_memfd_of(buf, len)) < 0)
			child_die(seq, "memfd source", kiln_err_from_errno(errno));
		rv = kiln_store_put_fd(s, fd, id);
		close(fd);
		return rv;
	case 2:
		snprintf(path, sizeof path, "%s/m-%u-%u", src, iter, seq);
		child_write_file(path, buf, len, seq);
		return kiln_store_put_move(s, path, id);
	case 3:
		return tu_put_by_writer(s, buf, len, 1 + (seq * 7919u) % 100000,
		                        want, id);
	default:
		snprintf(path, sizeof path, "%s/p-%u-%u", src, iter, seq);
		child_write_file(path, buf, len, seq);
		rv = kiln_store_put_path(s, path, id);
		unlink(path);
		return rv;
	}
}

static void
child_log(int logfd, const struct rec *r)
{
	if (write(logfd, r, sizeof *r) != (ssize_t)sizeof *r)
		child_die(r->seq, "write log", kiln_err_from_errno(errno));
}

/* Records queued in a kiln_batch (KILN_DURABLE_BATCH iterations): logged
 * only once committed. */
struct queue {
	kiln_batch *b; /* NULL: name records one call each */
	struct rec r[8];
	size_t n;
};

/* Name r (an index entry or action result) now, or queue it. */
static void
child_name(kiln_store *s, struct queue *q, int logfd, const struct rec *r)
{
	int rv;

	if (r->kind == REC_INDEX)
		rv = q->b ? kiln_batch_index_set(q->b, r->profile, r->url, &r->id)
		          : kiln_store_index_set(s, r->profile, r->url, &r->id);
	else
		rv = q->b ? kiln_batch_action_put(q->b, &r->id, r->out, 2, "result", 6)
		          : kiln_store_action_put(s, &r->id, r->out, 2, "result", 6);
	if (rv != 0)
		child_die(r->seq, r->kind == REC_INDEX ? "index_set" : "action_put", rv);
	if (q->b == NULL)
		child_log(logfd, r);
	else
		q->r[q->n++] = *r;
}

static void
child_commit(kiln_store *s, struct queue *q, int logfd, uint32_t seq)
{
	size_t skipped;
	int rv;

	if ((rv = kiln_store_commit(s, q->b, &skipped)) != 0)
		child_die(seq, "commit", rv);
	if (skipped != 0)
		child_die(seq, "commit skipped records naming blobs just put", 0);
	for (size_t i = 0; i < q->n; i++)
		child_log(logfd, &q->r[i]);
	q->n = 0;
}

/* Put, name and log until killed. */
static void __attribute__((noreturn))
child_run(const char *store, const char *src, int logfd, int readyfd,
          uint32_t iter, uint64_t seed)
{
	static const enum kiln_durability durs[3] = {
		KILN_DURABLE_FSYNC, KILN_DURABLE_NONE, KILN_DURABLE_BATCH};
	kiln_store_opts o = {.durability = durs[iter % 3]};
	uint8_t *buf = malloc(MAX_LEN);
	kiln_id prev = {{0}};
	struct queue q = {NULL, {{0}}, 0};
	kiln_store *s;
	int rv;

	if (buf == NULL)
		child_die(0, "malloc", KILN_ENOMEM);
	if (o.durability == KILN_DURABLE_BATCH && kiln_batch_new(&q.b) != 0)
		child_die(0, "kiln_batch_new", KILN_ENOMEM);
	if ((rv = kiln_store_open(store, &o, &s)) != 0)
		child_die(0, "kiln_store_open", rv);
	if (write(readyfd, "r", 1) != 1)
		_exit(3);
	close(readyfd);
	for (uint32_t seq = 0; seq < 100000; seq++) {
		uint64_t cs = seed ^ ((uint64_t)iter << 32 | seq) * 0xff51afd7ed558ccdULL;
		/* Batch iterations keep to the small sizes, so that many
		 * commits happen before the kill (and some are cut by it). */
		size_t len = sizes[tu_rand_next(&cs) % (q.b != NULL ? 6 : NSIZES)];
		struct rec r = {.iter = iter, .seq = seq};
		kiln_id want;

		tu_fill64(buf, len, cs);
		kiln_id_of_buf(buf, len, &want);
		if ((rv = child_put(s, src, iter, seq, buf, len, &want, &r.id)) != 0)
			child_die(seq, methods[seq % 5], rv);
		if (kiln_id_cmp(&r.id, &want) != 0)
			child_die(seq, "put returned an id that is not the content's hash", 0);
		r.kind = REC_PUT;
		child_log(logfd, &r);

		snprintf(r.profile, sizeof r.profile, "%s", seq % 2 ? "ps5" : "pc");
		snprintf(r.url, sizeof r.url, "it%u/%u", iter, seq);
		r.kind = REC_INDEX;
		child_name(s, &q, logfd, &r);

		if (seq % 3 == 2) {
			r.out[0] = r.id;
			r.out[1] = prev;
			r.nout = 2;
			r.id = action_key(iter, seq);
			r.kind = REC_ACTION;
			child_name(s, &q, logfd, &r);
			r.id = r.out[0];
		}
		if (q.b != NULL && seq % 2 == 1)
			child_commit(s, &q, logfd, seq);
		prev = r.id;
	}
	kiln_batch_free(q.b);
	kiln_store_close(s);
	_exit(0);
}

/* ---- the parent's checks --------------------------------------------- */

struct entries {
	size_t n, cap;
	kiln_id *id;
	char (*url)[48];
	char (*profile)[16];
};

static int
collect_entry(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	struct entries *es = arg;

	if (es->n == es->cap) {
		es->cap = es->cap ? es->cap * 2 : 64;
		es->id = realloc(es->id, es->cap * sizeof *es->id);
		es->url = realloc(es->url, es->cap * sizeof *es->url);
		es->profile = realloc(es->profile, es->cap * sizeof *es->profile);
		if (!es->id || !es->url || !es->profile)
			return -1;
	}
	es->id[es->n] = *id;
	snprintf(es->url[es->n], sizeof es->url[0], "%s", url);
	snprintf(es->profile[es->n], sizeof es->profile[0], "%s", profile);
	es->n++;
	return 0;
}

static void
entries_free(struct entries *es)
{
	free(es->id);
	free(es->url);
	free(es->profile);
	memset(es, 0, sizeof *es);
}

static struct rec *
read_log(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	struct rec *r;

	if (fd < 0 || fstat(fd, &st) != 0)
		fail_msg("open log %s: %s", path, strerror(errno));
	/* a record cut by the kill is possible only in theory (one write()) */
	*n = (size_t)st.st_size / sizeof *r;
	r = malloc(*n * sizeof *r + 1);
	assert_non_null(r);
	if (pread(fd, r, *n * sizeof *r, 0) != (ssize_t)(*n * sizeof *r))
		fail_msg("read log: %s", strerror(errno));
	close(fd);
	return r;
}

/* Every logged call of iteration iter is still in effect. Blobs put but
 * never named are checked only with_puts: gc may have collected them. */
static void
check_logged(kiln_store *s, const struct rec *log, size_t nlog, uint32_t iter,
             int with_puts, const char *at, size_t *nput)
{
	for (size_t i = 0; i < nlog; i++) {
		const struct rec *r = &log[i];
		kiln_action *a = NULL;
		kiln_id got;
		int rv;

		if (r->iter != iter)
			continue;
		switch (r->kind) {
		case REC_PUT:
			(*nput)++;
			if (!with_puts)
				break;
			if ((rv = kiln_store_verify(s, &r->id)) != 0)
				fail_msg("%s: blob of returned put %u lost or bad: %s", at,
				         r->seq, kiln_strerror(rv));
			break;
		case REC_INDEX:
			rv = kiln_store_index_get(s, r->profile, r->url, &got);
			if (rv != 0 || kiln_id_cmp(&got, &r->id) != 0)
				fail_msg("%s: committed index entry %s %s lost or changed: %s",
				         at, r->profile, r->url, kiln_strerror(rv));
			break;
		case REC_ACTION:
			if ((rv = kiln_store_action_get(s, &r->id, &a)) != 0)
				fail_msg("%s: committed action of op %u lost: %s", at,
				         r->seq, kiln_strerror(rv));
			rv = a->noutputs == 2 && !kiln_id_cmp(&a->outputs[0], &r->out[0]) &&
			     !kiln_id_cmp(&a->outputs[1], &r->out[1]) && a->len == 6 &&
			     !memcmp(a->data, "result", 6);
			kiln_action_free(a);
			if (!rv)
				fail_msg("%s: action of op %u came back different", at, r->seq);
			for (int j = 0; j < 2; j++)
				if ((rv = kiln_store_verify(s, &r->out[j])) != 0)
					fail_msg("%s: action of op %u names a bad blob: %s",
					         at, r->seq, kiln_strerror(rv));
			break;
		default:
			fail_msg("%s: log record %zu has kind %u", at, i, r->kind);
		}
	}
}

/* Every index entry (of any iteration still kept) names a sound blob. */
static void
check_index(kiln_store *s, const char *at)
{
	struct entries es = {0};
	int rv;

	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, collect_entry, &es));
	for (size_t i = 0; i < es.n; i++)
		if ((rv = kiln_store_verify(s, &es.id[i])) != 0)
			fail_msg("%s: index %s %s names a blob that is %s", at,
			         es.profile[i], es.url[i], kiln_strerror(rv));
	entries_free(&es);
}

/* A temp file left by the killed child is not a blob: if its content's
 * hash is in the store, that is because objects/ holds a sound copy. */
static size_t
check_tmp_invisible(kiln_store *s, const char *store, const char *at)
{
	char names[64][256], path[4608];
	size_t n = tu_list_tmp(store, names, 64);

	for (size_t i = 0; i < n && i < 64; i++) {
		kiln_id id;
		int fd, rv;

		snprintf(path, sizeof path, "%s/tmp/%s", store, names[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue; /* a folder, or gone */
		rv = kiln_id_of_fd(fd, &id, NULL);
		close(fd);
		if (rv != 0)
			continue;
		rv = kiln_store_has(s, &id, NULL);
		if (rv == 0 && (rv = kiln_store_verify(s, &id)) != 0)
			fail_msg("%s: temp file tmp/%s is visible as a blob that "
			         "does not verify: %s", at, names[i], kiln_strerror(rv));
		if (rv != 0 && rv != KILN_ENOTFOUND)
			fail_msg("%s: has() on a temp file's hash: %s", at,
			         kiln_strerror(rv));
	}
	return n;
}

/* Drop the records of iteration iter and collect what they named, so the
 * store does not grow without bound across iterations. */
static void
forget_iteration(kiln_store *s, const struct rec *log, size_t nlog, uint32_t iter,
                 const char *at)
{
	struct entries es = {0};
	char prefix[32];
	kiln_gc_opts o = {.max_size = 0, .action_max_age_s = TU_AGE_FOREVER,
	                  .grace_s = 0};
	kiln_gc_stats st;
	int rv;

	snprintf(prefix, sizeof prefix, "it%u/", iter);
	assert_kiln(0, kiln_store_index_list(s, NULL, prefix, collect_entry, &es));
	for (size_t i = 0; i < es.n; i++)
		if ((rv = kiln_store_index_delete(s, es.profile[i], es.url[i])) != 0)
			fail_msg("%s: index_delete %s %s: %s", at, es.profile[i],
			         es.url[i], kiln_strerror(rv));
	entries_free(&es);
	for (size_t i = 0; i < nlog; i++)
		if (log[i].iter == iter && log[i].kind == REC_ACTION &&
		    (rv = kiln_store_action_delete(s, &log[i].id)) != 0)
			fail_msg("%s: action_delete of op %u: %s", at, log[i].seq,
			         kiln_strerror(rv));
	if ((rv = kiln_store_gc(s, &o, &st)) != 0)
		fail_msg("%s: gc: %s", at, kiln_strerror(rv));
}

/* fork a child running fn-like code; returns its pid after it said ready
 * (or -1 when it died first; *status then holds its wait status). */
static pid_t
spawn_child(const char *store, const char *src, int logfd, uint32_t iter,
            uint64_t seed, int *status)
{
	int ready[2];
	ssize_t n;
	char c;
	pid_t pid;

	assert_int_equal(0, pipe2(ready, O_CLOEXEC));
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		close(ready[0]);
		child_run(store, src, logfd, ready[1], iter, seed);
	}
	close(ready[1]);
	do
		n = read(ready[0], &c, 1);
	while (n < 0 && errno == EINTR);
	close(ready[0]);
	if (n == 1)
		return pid;
	waitpid(pid, status, 0);
	return -1;
}

static void
put_is_visible_only_once_complete_when_killed_at_random(void **state)
{
	uint64_t seed = test_seed(), rng = seed * 0x9e3779b97f4a7c15ULL | 1, nblobs, nbytes;
	char store[4096], src[4096], logp[4096], at[160];
	size_t nlog, total_puts = 0, max_tmp = 0;
	struct rec *log;
	int logfd;

	print_message("# seed %" PRIu64 " (KILN_TEST_SEED=%" PRIu64
	              " repeats the kill delays and content)\n", seed, seed);
	snprintf(store, sizeof store, "%s", tu_path(state, "store"));
	snprintf(src, sizeof src, "%s", tu_path(state, "src"));
	snprintf(logp, sizeof logp, "%s", tu_path(state, "log"));
	assert_int_equal(0, mkdir(src, 0755));
	tu_create_store(store);
	logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	assert_true(logfd >= 0);

	for (uint32_t iter = 0; iter < ITERATIONS; iter++) {
		unsigned delay = (unsigned)(tu_rand_next(&rng) % (MAX_DELAY_US + 1));
		int status = 0;
		pid_t pid;
		kiln_store *s;

		snprintf(at, sizeof at, "seed %" PRIu64 ", iteration %u (%s, killed "
		         "after %u us)", seed, iter,
		         iter % 2 ? "DURABLE_FSYNC" : "DURABLE_NONE", delay);
		if ((pid = spawn_child(store, src, logfd, iter, seed, &status)) < 0)
			fail_msg("%s: child died before opening the store (status "
			         "0x%x; see its stderr)", at, (unsigned)status);
		usleep(delay);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) &&
		    !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
			fail_msg("%s: child failed before the kill (status 0x%x); "
			         "its stderr says which store call", at,
			         (unsigned)status);

		tu_check_objects(store, at, &nblobs, &nbytes);
		s = tu_open_store_at(store, 0, KILN_DURABLE_NONE, at);
		log = read_log(logp, &nlog);
		check_logged(s, log, nlog, iter, 1, at, &total_puts);
		if (iter > 0) /* after the gc in forget_iteration */
			check_logged(s, log, nlog, iter - 1, 0, at, &(size_t){0});
		check_index(s, at);
		tu_assert_fsck_clean(s, at, nblobs, nbytes);
		{
			size_t ntmp = check_tmp_invisible(s, store, at);
			if (ntmp > max_tmp)
				max_tmp = ntmp;
		}
		if (iter >= 2)
			forget_iteration(s, log, nlog, iter - 2, at);
		free(log);
		kiln_store_close(s);
	}
	close(logfd);
	print_message("# %d kills, %zu puts returned before them, at most %zu "
	              "temp files left at once\n", ITERATIONS, total_puts, max_tmp);
}


/* A child that has written 4 MiB into a blob writer and then waits. */
static void __attribute__((noreturn))
writer_child(const char *store, int readyfd, const uint8_t *buf, size_t len)
{
	kiln_store_opts o = {.durability = KILN_DURABLE_NONE};
	kiln_blob_writer *w;
	kiln_store *s;
	int rv;

	if ((rv = kiln_store_open(store, &o, &s)) != 0)
		child_die(0, "kiln_store_open", rv);
	if ((rv = kiln_blob_writer_open(s, &w)) != 0)
		child_die(0, "blob_writer_open", rv);
	if ((rv = kiln_blob_writer_write(w, buf, len)) != 0)
		child_die(0, "blob_writer_write", rv);
	if (write(readyfd, "r", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

static void
killed_writer_leaves_no_blob_and_the_next_open_removes_its_temp_files(void **state)
{
	size_t len = 4u << 20, ntmp, ntmp2;
	uint8_t *buf = malloc(len);
	char store[4096], names[8][256];
	kiln_id whole, part;
	uint64_t nblobs, nbytes;
	int ready[2], status;
	kiln_store *s;
	pid_t pid;
	char c;

	assert_non_null(buf);
	tu_fill64(buf, len, 4242);
	kiln_id_of_buf(buf, len, &whole);
	snprintf(store, sizeof store, "%s", tu_path(state, "store"));
	tu_create_store(store);

	assert_int_equal(0, pipe2(ready, O_CLOEXEC));
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == 0) {
		close(ready[0]);
		writer_child(store, ready[1], buf, len);
	}
	assert_true(pid > 0);
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1) {
		waitpid(pid, &status, 0);
		fail_msg("writer child died before writing (status 0x%x)",
		         (unsigned)status);
	}
	close(ready[0]);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);

	tu_check_objects(store, "after killing a writer", &nblobs, &nbytes);
	if (nblobs != 0)
		fail_msg("a writer killed before commit published %" PRIu64 " blob(s)",
		         nblobs);
	ntmp = tu_list_tmp(store, names, 8);

	/* The writer's pid is gone, so the next open removes its temp files. */
	s = tu_open_store_at(store, 0, KILN_DURABLE_NONE, "after killing a writer");
	ntmp2 = tu_list_tmp(store, names, 8);
	if (ntmp2 != 0)
		fail_msg("open left %zu of the killed writer's %zu temp file(s) in "
		         "tmp/ (first: %s)", ntmp2, ntmp, names[0]);
	assert_kiln(KILN_ENOTFOUND, kiln_store_has(s, &whole, NULL));
	(void)part;
	tu_assert_fsck_clean(s, "after killing a writer", 0, 0);
	kiln_store_close(s);
	free(buf);
}

/* Temp files named "<kind>-<pid>-..." are kept while their writer lives
 * (however old their mtime: put_move keeps the caller's) and removed once
 * it is gone; files naming no writer are removed after an hour. */
static void
open_sweeps_temp_files_of_dead_writers_and_keeps_live_ones(void **state)
{
	char store[4096], names[8][256], path[4608];
	struct timespec t[2];
	kiln_store *s;
	pid_t dead;
	size_t n;

	snprintf(store, sizeof store, "%s", tu_path(state, "store"));
	tu_create_store(store);
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= 3600 + 120;
	t[1] = t[0];
	snprintf(path, sizeof path, "%s/tmp/left-by-crash", store);
	tu_write_file(path, "partial", 7);
	assert_int_equal(0, utimensat(AT_FDCWD, path, t, 0));
	snprintf(path, sizeof path, "%s/tmp/no-owner-yet", store);
	tu_write_file(path, "in progress", 11);
	snprintf(path, sizeof path, "%s/tmp/move-%ld-aaaaaa", store, (long)getpid());
	tu_write_file(path, "old mtime, live writer", 22);
	assert_int_equal(0, utimensat(AT_FDCWD, path, t, 0));
	if ((dead = fork()) == 0)
		_exit(0);
	assert_true(dead > 0);
	waitpid(dead, NULL, 0);
	snprintf(path, sizeof path, "%s/tmp/put-%ld-bbbbbb", store, (long)dead);
	tu_write_file(path, "fresh, dead writer", 18);

	s = tu_open_store_at(store, 0, KILN_DURABLE_NONE, "with four temp files");
	n = tu_list_tmp(store, names, 8);
	qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	snprintf(path, sizeof path, "move-%ld-aaaaaa", (long)getpid());
	if (n != 2 || strcmp(names[0], path) != 0 || strcmp(names[1], "no-owner-yet") != 0)
		fail_msg("after open tmp/ holds %zu file(s) (%s, %s); expected only "
		         "%s and no-owner-yet", n, n ? names[0] : "-",
		         n > 1 ? names[1] : "-", path);
	tu_assert_fsck_clean(s, "after the sweep", 0, 0);
	kiln_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			put_is_visible_only_once_complete_when_killed_at_random,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			killed_writer_leaves_no_blob_and_the_next_open_removes_its_temp_files,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			open_sweeps_temp_files_of_dead_writers_and_keeps_live_ones,
			tu_setup_dir, tu_teardown_dir),
	};

	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
