/* test_concurrency.c — one store used by several threads and processes at
 * once: concurrent puts of the same and of different content, index writes
 * and reads interleaved, gc running beside puts, and two processes creating
 * a store at the same moment.
 *
 * Every case ends by checking the files themselves: each file under objects/
 * re-hashes to its name and has one link (identical content is one file),
 * tmp/ holds nothing once every put has returned, and fsck is clean.
 *
 * Threads never call cmocka asserts (they would longjmp across threads);
 * they record the first error and the main thread reports it. Children are
 * forked before the parent opens the store. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define NTHREADS    4
#define NOPS        48

static const char *const methods[] = {"put_buf", "put_fd", "put_move",
                                      "blob writer"};

/* Op j of thread t in process proc: even ops put the same content in every
 * thread and process, odd ops content of their own. */
static uint64_t
op_seed(int proc, int t, int j)
{
	if (j % 2 == 0)
		return 1000 + (uint64_t)j;
	return 100000 * (uint64_t)(proc + 1) + 1000 * (uint64_t)t + (uint64_t)j;
}

static size_t
op_len(int j)
{
	static const size_t lens[4] = {13, 4096, 70000, 150000};

	if (j % 16 == 0)
		return (1u << 20) + (size_t)j;
	return lens[j % 4] + (size_t)j;
}

static kiln_id
op_id(int proc, int t, int j)
{
	size_t len = op_len(j);
	uint8_t *buf = malloc(len);
	kiln_id id;

	assert_non_null(buf);
	tu_fill64(buf, len, op_seed(proc, t, j));
	kiln_id_of_buf(buf, len, &id);
	free(buf);
	return id;
}

/* ---- a putting thread ------------------------------------------------- */

struct worker {
	kiln_store *s;
	int proc, t, with_index;
	const char *src;
	pthread_barrier_t *go;
	kiln_id want[NOPS], got[NOPS];
	char err[320];
};

static int
put_by(struct worker *w, int j, const uint8_t *buf, size_t len, kiln_id *id)
{
	char path[4096 + 64];
	int fd, rv;

	switch ((j + w->t) % 4) {
	case 0:
		return kiln_store_put_buf(w->s, buf, len, id);
	case 1:
		if ((fd = tu_memfd_of(buf, len)) < 0)
			return kiln_err_from_errno(errno);
		rv = kiln_store_put_fd(w->s, fd, id);
		close(fd);
		return rv;
	case 2:
		snprintf(path, sizeof path, "%s/p%d-t%d-%d", w->src, w->proc, w->t, j);
		if (tu_try_write_file(path, buf, len) != 0)
			return kiln_err_from_errno(errno);
		return kiln_store_put_move(w->s, path, id);
	default:
		return tu_put_by_writer(w->s, buf, len, 32768, NULL, id);
	}
}

static void *
worker_run(void *arg)
{
	struct worker *w = arg;
	uint8_t *buf = malloc((1u << 20) + NOPS);
	char url[64];
	int rv;

	if (w->go)
		pthread_barrier_wait(w->go);
	for (int j = 0; j < NOPS && buf && !w->err[0]; j++) {
		size_t len = op_len(j);

		tu_fill64(buf, len, op_seed(w->proc, w->t, j));
		kiln_id_of_buf(buf, len, &w->want[j]);
		if ((rv = put_by(w, j, buf, len, &w->got[j])) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d op %d (%s, %zu bytes): %s",
			         w->t, j, methods[(j + w->t) % 4], len, kiln_strerror(rv));
			break;
		}
		if (kiln_id_cmp(&w->got[j], &w->want[j]) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d op %d (%s): returned "
			         "id is not the content's hash", w->t, j,
			         methods[(j + w->t) % 4]);
			break;
		}
		if (!w->with_index)
			continue;
		snprintf(url, sizeof url, "t%d/%d", w->t, j);
		rv = kiln_store_index_set(w->s, w->proc ? "p1" : "p0", url, &w->got[j]);
		if (rv == 0 && j % 2 == 0) {
			snprintf(url, sizeof url, "shared/%d", j);
			rv = kiln_store_index_set(w->s, "pc", url, &w->got[j]);
		}
		if (rv != 0)
			snprintf(w->err, sizeof w->err, "thread %d op %d: index_set %s: %s",
			         w->t, j, url, kiln_strerror(rv));
	}
	if (!buf)
		snprintf(w->err, sizeof w->err, "malloc failed");
	free(buf);
	return NULL;
}

/* Run n workers of process proc on s at once; errors in w[i].err. */
static void
run_workers(kiln_store *s, struct worker *w, int n, int proc, const char *src,
            int with_index)
{
	pthread_t th[NTHREADS];
	pthread_barrier_t go;

	pthread_barrier_init(&go, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		w[i] = (struct worker){.s = s, .proc = proc, .t = i,
		                       .with_index = with_index, .src = src, .go = &go};
		if (pthread_create(&th[i], NULL, worker_run, &w[i]) != 0)
			snprintf(w[i].err, sizeof w[i].err, "pthread_create failed");
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
}

/* ---- checks on the files ---------------------------------------------- */

static int
cmp_id(const void *a, const void *b)
{
	return kiln_id_cmp(a, b);
}

/* Sort ids and drop duplicates; returns how many are distinct. */
static size_t
distinct(kiln_id *ids, size_t n)
{
	size_t d = 0;

	qsort(ids, n, sizeof *ids, cmp_id);
	for (size_t i = 0; i < n; i++)
		if (d == 0 || kiln_id_cmp(&ids[d - 1], &ids[i]) != 0)
			ids[d++] = ids[i];
	return d;
}

/* All puts succeeded with the right ids, each blob is there once. Sorts
 * and dedups all; returns the number of distinct ids. */
static size_t
check_put_results(kiln_store *s, kiln_id *all, size_t nall)
{
	size_t d;
	uint64_t nfiles;
	int rv;

	for (size_t i = 0; i < nall; i++)
		if ((rv = kiln_store_verify(s, &all[i])) != 0)
			fail_msg("blob of put %zu does not verify: %s", i, kiln_strerror(rv));
	d = distinct(all, nall);
	tu_assert_store_sound(s, "after every put returned", &nfiles, NULL);
	if (nfiles != d)
		fail_msg("%zu puts of %zu distinct contents left %" PRIu64 " files in "
		         "objects/", nall, d, nfiles);
	return d;
}

/* ---- cases ------------------------------------------------------------ */

static void
threads_put_same_and_different_content_concurrently(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	struct worker *w = calloc(NTHREADS, sizeof *w);
	kiln_id *all = malloc(NTHREADS * NOPS * sizeof *all);
	const char *src = tu_path(state, "src");
	char srcdir[4096];

	assert_non_null(w);
	assert_non_null(all);
	snprintf(srcdir, sizeof srcdir, "%s", src);
	assert_int_equal(0, mkdir(srcdir, 0755));
	run_workers(s, w, NTHREADS, 0, srcdir, 0);
	for (int i = 0; i < NTHREADS; i++)
		if (w[i].err[0])
			fail_msg("%s", w[i].err);
	for (int i = 0; i < NTHREADS; i++)
		memcpy(all + i * NOPS, w[i].got, sizeof w[i].got);
	if (check_put_results(s, all, NTHREADS * NOPS) !=
	    NOPS / 2 + NTHREADS * NOPS / 2)
		fail_msg("expected %d distinct contents", NOPS / 2 + NTHREADS * NOPS / 2);
	free(all);
	free(w);
	kiln_store_close(s);
}

/* A child process: open, say ready, wait for go, run 2 workers, exit 0 or
 * print what failed and exit 1. */
static void __attribute__((noreturn))
proc_child(const char *store, const char *src, int proc, int readyfd, int gofd)
{
	kiln_store_opts o = {
		.durability = proc ? KILN_DURABLE_FSYNC : KILN_DURABLE_NONE};
	struct worker w[2];
	kiln_store *s;
	char c;
	int rv, bad = 0;

	if ((rv = kiln_store_open(store, &o, &s)) != 0) {
		fprintf(stderr, "process %d: open: %s\n", proc, kiln_strerror(rv));
		_exit(1);
	}
	if (write(readyfd, "r", 1) != 1 || read(gofd, &c, 1) != 0)
		_exit(2);
	run_workers(s, w, 2, proc, src, 1);
	for (int i = 0; i < 2; i++)
		if (w[i].err[0]) {
			fprintf(stderr, "process %d: %s\n", proc, w[i].err);
			bad = 1;
		}
	kiln_store_close(s);
	_exit(bad);
}

static void
two_processes_put_same_and_different_content_into_one_store(void **state)
{
	char store[4096], src[4096];
	int ready[2], go[2], status[2];
	pid_t pid[2];
	kiln_id all[2 * 2 * NOPS];
	size_t nall = 0;
	kiln_store *s;
	char c;

	snprintf(store, sizeof store, "%s", tu_path(state, "store"));
	snprintf(src, sizeof src, "%s", tu_path(state, "src"));
	assert_int_equal(0, mkdir(src, 0755));
	tu_create_store(store);

	assert_int_equal(0, pipe2(ready, O_CLOEXEC));
	assert_int_equal(0, pipe2(go, O_CLOEXEC));
	fflush(stdout);
	fflush(stderr);
	for (int p = 0; p < 2; p++) {
		if ((pid[p] = fork()) == 0) {
			close(ready[0]);
			close(go[1]);
			proc_child(store, src, p, ready[1], go[0]);
		}
		assert_true(pid[p] > 0);
	}
	close(ready[1]);
	close(go[0]);
	for (int p = 0; p < 2; p++)
		if (read(ready[0], &c, 1) != 1)
			break; /* a child died; waitpid below says so */
	close(go[1]); /* go */
	close(ready[0]);
	for (int p = 0; p < 2; p++) {
		waitpid(pid[p], &status[p], 0);
		if (!WIFEXITED(status[p]) || WEXITSTATUS(status[p]) != 0)
			fail_msg("process %d failed (wait status 0x%x); its stderr says "
			         "which call", p, (unsigned)status[p]);
	}

	s = tu_open_store(state, KILN_DURABLE_NONE);
	for (int p = 0; p < 2; p++)
		for (int t = 0; t < 2; t++)
			for (int j = 0; j < NOPS; j++) {
				kiln_id want = op_id(p, t, j), got;
				char url[64];
				int rv;

				snprintf(url, sizeof url, "t%d/%d", t, j);
				rv = kiln_store_index_get(s, p ? "p1" : "p0", url, &got);
				if (rv != 0 || kiln_id_cmp(&got, &want) != 0)
					fail_msg("index p%d %s: %s or wrong blob", p, url,
					         kiln_strerror(rv));
				if (j % 2 == 0) {
					snprintf(url, sizeof url, "shared/%d", j);
					rv = kiln_store_index_get(s, "pc", url, &got);
					if (rv != 0 || kiln_id_cmp(&got, &want) != 0)
						fail_msg("index pc %s: %s or wrong blob", url,
						         kiln_strerror(rv));
				}
				all[nall++] = want;
			}
	check_put_results(s, all, nall);
	kiln_store_close(s);
}

/* ---- index writes and reads from several threads ---------------------- */

#define NVALS   8
#define IX_OPS  200

struct ixworker {
	kiln_store *s;
	int t;
	const kiln_id *vals;
	pthread_barrier_t *go;
	kiln_id last[16];
	char err[256];
};

static int
is_val(const kiln_id *vals, const kiln_id *id)
{
	for (int i = 0; i < NVALS; i++)
		if (kiln_id_cmp(&vals[i], id) == 0)
			return 1;
	return 0;
}

struct listcheck {
	const kiln_id *vals;
	char prev[64];
	int n, bad;
};

static int
check_listed(const char *profile, const char *url, const kiln_id *id, void *arg)
{
	struct listcheck *lc = arg;

	if (strcmp(profile, "pc") != 0 || strncmp(url, "shared/", 7) != 0 ||
	    !is_val(lc->vals, id) || (lc->n > 0 && strcmp(lc->prev, url) >= 0))
		lc->bad = 1;
	snprintf(lc->prev, sizeof lc->prev, "%s", url);
	lc->n++;
	return 0;
}

static void *
ixworker_run(void *arg)
{
	struct ixworker *w = arg;
	char profile[16], url[64];
	kiln_id got;
	int rv;

	snprintf(profile, sizeof profile, "p%d", w->t);
	pthread_barrier_wait(w->go);
	for (int k = 0; k < IX_OPS && !w->err[0]; k++) {
		const kiln_id *v = &w->vals[(k * 3 + w->t) % NVALS];

		snprintf(url, sizeof url, "own/%d", k % 16);
		if ((rv = kiln_store_index_set(w->s, profile, url, v)) != 0 ||
		    (rv = kiln_store_index_get(w->s, profile, url, &got)) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d: own %s: %s", w->t,
			         url, kiln_strerror(rv));
			break;
		}
		if (kiln_id_cmp(&got, v) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d: get %s %s right after "
			         "set returned another blob", w->t, profile, url);
			break;
		}
		w->last[k % 16] = *v;

		snprintf(url, sizeof url, "shared/%d", k % NVALS);
		if ((rv = kiln_store_index_set(w->s, "pc", url,
		                               &w->vals[(k + w->t) % NVALS])) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d: set pc %s: %s", w->t,
			         url, kiln_strerror(rv));
			break;
		}
		rv = kiln_store_index_get(w->s, "pc", url, &got);
		if ((rv != 0 && rv != KILN_ENOTFOUND) || (rv == 0 && !is_val(w->vals, &got))) {
			snprintf(w->err, sizeof w->err, "thread %d: get pc %s: %s or a blob "
			         "nobody set", w->t, url, kiln_strerror(rv));
			break;
		}
		if (w->t == NTHREADS - 1 && k % 5 == 0) {
			rv = kiln_store_index_delete(w->s, "pc", url);
			if (rv != 0 && rv != KILN_ENOTFOUND) {
				snprintf(w->err, sizeof w->err, "thread %d: delete pc %s: %s",
				         w->t, url, kiln_strerror(rv));
				break;
			}
		}
		if (k % 25 == 0) {
			struct listcheck lc = {.vals = w->vals};
			rv = kiln_store_index_list(w->s, "pc", "shared/", check_listed, &lc);
			if (rv != 0 || lc.bad || lc.n > NVALS)
				snprintf(w->err, sizeof w->err, "thread %d: list pc shared/: "
				         "%s, %d entries, %s", w->t, kiln_strerror(rv),
				         lc.n, lc.bad ? "unordered or bad entries" : "ok");
		}
	}
	return NULL;
}

static void
index_writes_and_reads_from_threads_stay_consistent(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	struct ixworker w[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t go;
	kiln_id vals[NVALS];
	struct tu_ids all = {0, 0, NULL};
	uint8_t buf[1000];
	uint64_t nblobs;

	for (int i = 0; i < NVALS; i++) {
		tu_fill64(buf, sizeof buf, 7000 + (uint64_t)i);
		assert_kiln(0, kiln_store_put_buf(s, buf, sizeof buf, &vals[i]));
	}
	pthread_barrier_init(&go, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct ixworker){.s = s, .t = i, .vals = vals, .go = &go};
		assert_int_equal(0, pthread_create(&th[i], NULL, ixworker_run, &w[i]));
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < NTHREADS; i++)
		if (w[i].err[0])
			fail_msg("%s", w[i].err);

	for (int t = 0; t < NTHREADS; t++)
		for (int u = 0; u < 16; u++) {
			char profile[16], url[64];
			kiln_id got;
			int rv;

			snprintf(profile, sizeof profile, "p%d", t);
			snprintf(url, sizeof url, "own/%d", u);
			rv = kiln_store_index_get(s, profile, url, &got);
			if (rv != 0 || kiln_id_cmp(&got, &w[t].last[u]) != 0)
				fail_msg("index %s %s is not what its only writer set last "
				         "(%s)", profile, url, kiln_strerror(rv));
		}
	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, tu_collect_id, &all));
	if (all.n < NTHREADS * 16 || all.n > NTHREADS * 16 + NVALS)
		fail_msg("index holds %zu entries, expected %d own + up to %d shared",
		         all.n, NTHREADS * 16, NVALS);
	tu_assert_store_sound(s, "after the index threads", &nblobs, NULL);
	if (nblobs != NVALS)
		fail_msg("objects/ holds %" PRIu64 " blobs, %d were put", nblobs,
		         NVALS);
	kiln_store_close(s);
}

/* ---- gc beside puts --------------------------------------------------- */

#define NOLD    2000 /* unnamed blobs, out of their grace period */
#define NREPUT  1200 /* of those, put again and named while gc runs */
#define OLD_LEN 512

struct gcput {
	kiln_store *s;
	int t;
	pthread_barrier_t *go;
	int nnamed;
	char err[256];
};

struct gcloop {
	kiln_store *s;
	atomic_int *stop;
	pthread_barrier_t *go;
	uint64_t runs, removed;
	char err[256];
};

/* Thread t puts old contents t, t+2, t+4, ... again, in the order gc
 * removes them (least recently used first), names each at once, and now
 * and then puts fresh content too. */
static void *
gcput_run(void *arg)
{
	struct gcput *w = arg;
	uint8_t buf[60000];
	char url[64];
	kiln_id id;
	int rv;

	pthread_barrier_wait(w->go);
	for (int i = w->t; i < NREPUT && !w->err[0]; i += 2) {
		int fresh = i % 40 < 2;
		size_t len = fresh ? 10000 + (size_t)(i * 797) % 50000 : OLD_LEN;

		tu_fill64(buf, len, fresh ? 90000 + (uint64_t)i : 500 + (uint64_t)i);
		if ((rv = kiln_store_put_buf(w->s, buf, len, &id)) != 0) {
			snprintf(w->err, sizeof w->err, "thread %d put %d: %s", w->t, i,
			         kiln_strerror(rv));
			break;
		}
		snprintf(url, sizeof url, "g%d/%d", w->t, i);
		if ((rv = kiln_store_index_set(w->s, "pc", url, &id)) != 0)
			snprintf(w->err, sizeof w->err, "index_set right after put %d "
			         "(%s content) returned %s: gc removed a blob inside its "
			         "grace period", i, fresh ? "fresh" : "old",
			         kiln_strerror(rv));
		else if ((rv = kiln_store_verify(w->s, &id)) != 0)
			snprintf(w->err, sizeof w->err, "blob named by %s: %s", url,
			         kiln_strerror(rv));
		w->nnamed++;
	}
	return NULL;
}

static void *
gcloop_run(void *arg)
{
	struct gcloop *g = arg;
	kiln_gc_opts o = {.max_size = 0, .action_max_age_s = TU_AGE_FOREVER,
	                  .grace_s = 1};
	kiln_gc_stats st;
	int rv;

	pthread_barrier_wait(g->go);
	while (!atomic_load(g->stop) && !g->err[0]) {
		if ((rv = kiln_store_gc(g->s, &o, &st)) != 0)
			snprintf(g->err, sizeof g->err, "gc: %s", kiln_strerror(rv));
		g->runs++;
		g->removed += st.removed_blobs;
	}
	return NULL;
}

static void
gc_beside_puts_never_removes_a_blob_about_to_be_named(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_gc_opts o = {.max_size = 0, .action_max_age_s = TU_AGE_FOREVER,
	                  .grace_s = 1};
	static kiln_id old[NOLD], named[NREPUT];
	struct tu_ids l = {0, NREPUT, named};
	struct gcput w[2];
	struct gcloop g;
	pthread_t th[3];
	pthread_barrier_t go;
	atomic_int stop = 0;
	kiln_gc_stats st;
	uint8_t buf[OLD_LEN];
	int rv;

	for (int i = 0; i < NOLD; i++) {
		tu_fill64(buf, sizeof buf, 500 + (uint64_t)i);
		assert_kiln(0, kiln_store_put_buf(s, buf, sizeof buf, &old[i]));
	}
	/* the old blobs are now out of a 1 s grace period */
	tu_clock_advance(&clock, 1200);

	pthread_barrier_init(&go, NULL, 3);
	g = (struct gcloop){.s = s, .stop = &stop, .go = &go};
	assert_int_equal(0, pthread_create(&th[2], NULL, gcloop_run, &g));
	for (int i = 0; i < 2; i++) {
		w[i] = (struct gcput){.s = s, .t = i, .go = &go};
		assert_int_equal(0, pthread_create(&th[i], NULL, gcput_run, &w[i]));
	}
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	atomic_store(&stop, 1);
	pthread_join(th[2], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 2; i++)
		if (w[i].err[0])
			fail_msg("thread %d: %s", i, w[i].err);
	if (g.err[0])
		fail_msg("%s", g.err);
	print_message("# gc ran %" PRIu64 " times beside %d puts, removed %" PRIu64
	              " blobs\n", g.runs, w[0].nnamed + w[1].nnamed, g.removed);

	assert_kiln(0, kiln_store_gc(s, &o, &st));
	g.removed += st.removed_blobs;
	for (int i = 0; i < NOLD; i++) {
		int fresh = i % 40 < 2;
		rv = kiln_store_has(s, &old[i], NULL);
		if (i < NREPUT && !fresh && rv != 0)
			fail_msg("old content %d, put again and named, is gone: %s", i,
			         kiln_strerror(rv));
		if ((i >= NREPUT || fresh) && rv != KILN_ENOTFOUND)
			fail_msg("old unnamed blob %d survived gc: %s", i,
			         kiln_strerror(rv));
	}
	if (g.removed < NOLD - NREPUT)
		fail_msg("gc removed %" PRIu64 " blobs in all, expected at least %d",
		         g.removed, NOLD - NREPUT);
	assert_kiln(0, kiln_store_index_list(s, NULL, NULL, tu_collect_id, &l));
	if (l.n != NREPUT)
		fail_msg("%zu index entries, expected %d", l.n, NREPUT);
	for (size_t i = 0; i < l.n; i++)
		if ((rv = kiln_store_verify(s, &named[i])) != 0)
			fail_msg("index entry %zu names a blob that is %s", i,
			         kiln_strerror(rv));
	tu_assert_store_sound(s, "after gc beside puts", NULL, NULL);
	kiln_store_close(s);
}

/* ---- put_move of an old file while another process opens the store ---- */

#define MOVE_LEN    (24u << 20)
#define MOVE_ROUNDS 8

/* Open and close the store until stopfd reaches EOF; exit 0, or 1 when an
 * open failed. */
static void __attribute__((noreturn))
opener_child(const char *store, int stopfd)
{
	kiln_store_opts o = {.durability = KILN_DURABLE_NONE};
	kiln_store *s;
	char c;
	int rv;

	fcntl(stopfd, F_SETFL, O_NONBLOCK);
	while (read(stopfd, &c, 1) < 0 && errno == EAGAIN) {
		if ((rv = kiln_store_open(store, &o, &s)) != 0) {
			fprintf(stderr, "opener: %s\n", kiln_strerror(rv));
			_exit(1);
		}
		kiln_store_close(s);
	}
	_exit(0);
}

static void
put_move_of_an_old_file_survives_another_process_opening_the_store(void **state)
{
	char store[4096], path[4096], err[512] = "";
	uint8_t *buf = malloc(MOVE_LEN);
	struct timespec t[2];
	int stop[2], status, rv;
	kiln_store *s;
	kiln_id want, id;
	pid_t pid;

	assert_non_null(buf);
	tu_fill64(buf, MOVE_LEN, 31337);
	snprintf(store, sizeof store, "%s", tu_path(state, "store"));
	tu_create_store(store);
	assert_int_equal(0, pipe2(stop, O_CLOEXEC));
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == 0) {
		close(stop[1]);
		opener_child(store, stop[0]);
	}
	assert_true(pid > 0);
	close(stop[0]);
	s = tu_open_store_at(store, 0, KILN_DURABLE_FSYNC, "the publisher");

	for (int r = 0; r < MOVE_ROUNDS && !err[0]; r++) {
		memcpy(buf, &r, sizeof r);
		kiln_id_of_buf(buf, MOVE_LEN, &want);
		snprintf(path, sizeof path, "%s", tu_path(state, "tool-output-%d", r));
		tu_write_file(path, buf, MOVE_LEN);
		/* a tool output written two hours ago, published only now */
		clock_gettime(CLOCK_REALTIME, &t[0]);
		t[0].tv_sec -= 7200;
		t[1] = t[0];
		assert_int_equal(0, utimensat(AT_FDCWD, path, t, 0));
		if ((rv = kiln_store_put_move(s, path, &id)) != 0)
			snprintf(err, sizeof err, "round %d: put_move of a file last "
			         "modified 2 h ago, while another process opens the "
			         "store, returned %s; its source file %s (does open's "
			         "temp sweep judge a moved file by the caller's mtime?)",
			         r, kiln_strerror(rv), access(path, F_OK) == 0
			         ? "is still there" : "is GONE: the content is lost");
		else if (kiln_id_cmp(&id, &want) != 0)
			snprintf(err, sizeof err, "round %d: wrong id", r);
		else if ((rv = kiln_store_verify(s, &id)) != 0)
			snprintf(err, sizeof err, "round %d: the moved blob is %s", r,
			         kiln_strerror(rv));
	}
	kiln_store_close(s);
	free(buf);
	close(stop[1]);
	waitpid(pid, &status, 0);
	if (err[0])
		fail_msg("%s", err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the opening process failed (status 0x%x)", (unsigned)status);
}

/* ---- creating a store from two processes at once ---------------------- */

static void
two_processes_creating_one_store_at_once_both_succeed(void **state)
{
	for (int round = 0; round < 40; round++) {
		kiln_store_opts o = {.flags = KILN_STORE_CREATE};
		char store[4096], marker[64] = {0};
		int go[2], status;
		pid_t pid[2];
		kiln_store *s;
		FILE *f;

		snprintf(store, sizeof store, "%s", tu_path(state, "store%d", round));
		assert_int_equal(0, pipe2(go, O_CLOEXEC));
		fflush(stdout);
		fflush(stderr);
		for (int p = 0; p < 2; p++) {
			if ((pid[p] = fork()) == 0) {
				char c;
				int rv;

				close(go[1]);
				if (read(go[0], &c, 1) != 0)
					_exit(2);
				if ((rv = kiln_store_open(store, &o, &s)) != 0) {
					fprintf(stderr, "round %d process %d: open with CREATE: "
					        "%s\n", round, p, kiln_strerror(rv));
					_exit(1);
				}
				kiln_store_close(s);
				_exit(0);
			}
			assert_true(pid[p] > 0);
		}
		close(go[0]);
		close(go[1]);
		for (int p = 0; p < 2; p++) {
			waitpid(pid[p], &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				fail_msg("round %d: process %d creating the store at the same "
				         "time as another failed (wait status 0x%x)", round,
				         p, (unsigned)status);
		}
		kiln_store_close(tu_open_store_at(store, 0, KILN_DURABLE_FSYNC,
		                                  "reopening the store both made"));
		f = fopen(tu_path(state, "store%d/kiln-store", round), "r");
		if (f == NULL || fgets(marker, sizeof marker, f) == NULL)
			fail_msg("round %d: no marker file", round);
		fclose(f);
		if (strcmp(marker, "kiln-store 1\n") != 0)
			fail_msg("round %d: marker holds \"%s\"", round, marker);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			threads_put_same_and_different_content_concurrently,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			two_processes_put_same_and_different_content_into_one_store,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			index_writes_and_reads_from_threads_stay_consistent,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			gc_beside_puts_never_removes_a_blob_about_to_be_named,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			put_move_of_an_old_file_survives_another_process_opening_the_store,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			two_processes_creating_one_store_at_once_both_succeed,
			tu_setup_dir, tu_teardown_dir),
	};

	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
