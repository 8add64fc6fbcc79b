/* bench_proto — kilnd over ipc:// against bare nng, in one run:
 *
 *   1. status round trip: libkiln's kiln_status_get to a real kilnd, vs a
 *      bare nng req/rep echo of the same request and reply sizes;
 *   2. blob get throughput of a 256 MiB blob: kiln_blob_get (daemon-side
 *      verification, chunks read from the store, client-side hashing, four
 *      chunks in flight) vs bare nng moving the same bytes: from memory as
 *      req/rep chunks with the same window and chunk size, from the same
 *      blob file (open + pread per chunk, as kilnd does) the same way, and
 *      from memory as a push/pull stream (nng's floor on this machine).
 *
 * The bare peer is a child process forked before any nng call (nng 1.5
 * does not survive a fork), serving from a buffer in memory; kilnd is the
 * release build, started with --foreground. Timed cases alternate (bare,
 * kiln, bare, kiln, ...) so drift hits both. Figures are medians; ratios
 * are kiln / bare. This file includes nng.h for the bare side only.
 *
 * usage: bench_proto KILND [ROUND_TRIPS [REPS [BLOB_MIB]]] */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "kiln.h"

#define WINDOW 4          /* chunks in flight, as libkiln */
#define BARE_WORKERS 4

extern char **environ;

static char dir[256];     /* the scratch project */
static char rep_url[300], push_url[300];
static pid_t peer_pid, kilnd_pid; /* killed by die() */

static void
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("bench_proto: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (peer_pid > 0)
		kill(peer_pid, SIGKILL);
	if (kilnd_pid > 0)
		kill(kilnd_pid, SIGTERM);
	exit(1);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile of n sorted values. */
static double
quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* ---- the bare peer (child process) --------------------------------------- */

/* Requests: 'E' + u32 reply size: an echo of that many bytes;
 * 'C' + u64 offset + u32 length: those bytes of the buffer;
 * 'F' + u64 offset + u32 length + path: those bytes of the file;
 * 'P' + u32 count + u32 size: push count messages of size, then reply. */
static uint8_t *bulk;
static size_t bulk_len;
static nng_socket push_sock;

static nng_msg *
bare_answer(const uint8_t *q, size_t n)
{
	nng_msg *m = NULL;
	uint64_t off;
	uint32_t len, count;

	if (n >= 5 && q[0] == 'E') {
		memcpy(&len, q + 1, 4);
		nng_msg_alloc(&m, len);
	} else if (n >= 13 && q[0] == 'C') {
		memcpy(&off, q + 1, 8);
		memcpy(&len, q + 9, 4);
		if (off + len <= bulk_len && nng_msg_alloc(&m, len) == 0)
			memcpy(nng_msg_body(m), bulk + off, len);
	} else if (n >= 14 && q[0] == 'F') {
		char path[512];
		int fd;
		memcpy(&off, q + 1, 8);
		memcpy(&len, q + 9, 4);
		snprintf(path, sizeof path, "%.*s", (int)(n - 13), (const char *)q + 13);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 &&
		    nng_msg_alloc(&m, len) == 0 &&
		    pread(fd, nng_msg_body(m), len, (off_t)off) != (ssize_t)len) {
			nng_msg_free(m);
			m = NULL;
		}
		if (fd >= 0)
			close(fd);
	} else if (n >= 9 && q[0] == 'P') {
		memcpy(&count, q + 1, 4);
		memcpy(&len, q + 5, 4);
		for (uint32_t i = 0; i < count; i++) {
			nng_msg *p;
			if (nng_msg_alloc(&p, len) != 0)
				break;
			memcpy(nng_msg_body(p), bulk + ((size_t)i * len) % (bulk_len - len),
			       len);
			if (nng_sendmsg(push_sock, p, 0) != 0)
				nng_msg_free(p);
		}
		nng_msg_alloc(&m, 0);
	}
	return m;
}

static void *
bare_worker(void *arg)
{
	nng_socket s = *(nng_socket *)arg;
	nng_ctx ctx;
	nng_aio *aio;

	if (nng_ctx_open(&ctx, s) != 0 || nng_aio_alloc(&aio, NULL, NULL) != 0)
		return NULL;
	for (;;) {
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) != 0)
			return NULL;
		nng_msg *q = nng_aio_get_msg(aio);
		nng_msg *r = bare_answer(nng_msg_body(q), nng_msg_len(q));
		nng_msg_free(q);
		if (r == NULL)
			continue;
		nng_aio_set_msg(aio, r);
		nng_ctx_send(ctx, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) != 0)
			nng_msg_free(r);
	}
}

static void
bare_serve(size_t len)
{
	pthread_t t[BARE_WORKERS];
	nng_socket s;

	bulk_len = len;
	if ((bulk = malloc(len)) == NULL)
		die("no memory for %zu bytes", len);
	for (size_t i = 0; i < len; i++)
		bulk[i] = (uint8_t)(i * 2654435761u >> 13);
	/* The parent dials in the background and waits until we listen. */
	if (nng_rep0_open(&s) != 0 || nng_listen(s, rep_url, NULL, 0) != 0 ||
	    nng_push0_open(&push_sock) != 0 ||
	    nng_listen(push_sock, push_url, NULL, 0) != 0)
		die("bare peer cannot listen on %s", rep_url);
	for (int i = 0; i < BARE_WORKERS; i++)
		pthread_create(&t[i], NULL, bare_worker, &s);
	pause(); /* until the parent kills us */
}

/* ---- the client side of the bare peer ----------------------------------- */

struct bare {
	nng_socket req, pull;
	nng_ctx ctx[WINDOW];
	nng_aio *aio[WINDOW];
};

static void
bare_open(struct bare *b)
{
	int rv;

	if ((rv = nng_req0_open(&b->req)) != 0 ||
	    (rv = nng_dial(b->req, rep_url, NULL, NNG_FLAG_NONBLOCK)) != 0 ||
	    (rv = nng_pull0_open(&b->pull)) != 0 ||
	    (rv = nng_dial(b->pull, push_url, NULL, NNG_FLAG_NONBLOCK)) != 0)
		die("dialing the bare peer: %s", nng_strerror(rv));
	for (int i = 0; i < WINDOW; i++)
		if (nng_ctx_open(&b->ctx[i], b->req) != 0 ||
		    nng_aio_alloc(&b->aio[i], NULL, NULL) != 0)
			die("bare contexts");
}

/* Send q on slot k and start waiting for the reply. */
static void
bare_send(struct bare *b, int k, const void *q, size_t n)
{
	nng_msg *m;

	if (nng_msg_alloc(&m, n) != 0)
		die("no memory");
	memcpy(nng_msg_body(m), q, n);
	nng_aio_set_msg(b->aio[k], m);
	nng_ctx_send(b->ctx[k], b->aio[k]);
	nng_aio_wait(b->aio[k]);
	if (nng_aio_result(b->aio[k]) != 0)
		die("bare send: %s", nng_strerror(nng_aio_result(b->aio[k])));
	nng_ctx_recv(b->ctx[k], b->aio[k]);
}

/* Wait for slot k's reply; returns its length. */
static size_t
bare_wait(struct bare *b, int k)
{
	nng_msg *m;
	size_t n;

	nng_aio_wait(b->aio[k]);
	if (nng_aio_result(b->aio[k]) != 0)
		die("bare recv: %s", nng_strerror(nng_aio_result(b->aio[k])));
	m = nng_aio_get_msg(b->aio[k]);
	n = nng_msg_len(m);
	nng_msg_free(m);
	return n;
}

/* One echo round trip of a request of qlen bytes and a reply of rlen. */
static void
bare_echo(struct bare *b, size_t qlen, uint32_t rlen)
{
	uint8_t q[64] = {'E'};

	memcpy(q + 1, &rlen, 4);
	bare_send(b, 0, q, qlen < 5 ? 5 : qlen);
	bare_wait(b, 0);
}

/* Fetch len bytes in chunks, WINDOW in flight: from the peer's memory, or
 * from the file at path (NULL: memory). */
static void
bare_get(struct bare *b, size_t len, uint32_t chunk, const char *path)
{
	uint64_t next = 0, got = 0, sent = 0, recvd = 0;
	uint8_t q[13 + 512] = {'C'};
	size_t n = 13;

	if (path != NULL) {
		q[0] = 'F';
		n += (size_t)snprintf((char *)q + 13, 512, "%s", path);
	}
	while (got < len) {
		while (next < len && sent - recvd < WINDOW) {
			uint32_t c = len - next < chunk ? (uint32_t)(len - next) : chunk;
			memcpy(q + 1, &next, 8);
			memcpy(q + 9, &c, 4);
			bare_send(b, (int)(sent++ % WINDOW), q, n);
			next += c;
		}
		got += bare_wait(b, (int)(recvd++ % WINDOW));
	}
}

/* Have the peer push len bytes in chunk-sized messages; pull them all. */
static void
bare_stream(struct bare *b, size_t len, uint32_t chunk)
{
	uint32_t count = (uint32_t)((len + chunk - 1) / chunk);
	uint8_t q[9] = {'P'};
	nng_msg *m;

	memcpy(q + 1, &count, 4);
	memcpy(q + 5, &chunk, 4);
	bare_send(b, 0, q, sizeof q);
	for (uint32_t i = 0; i < count; i++) {
		if (nng_recvmsg(b->pull, &m, 0) != 0)
			die("bare pull");
		nng_msg_free(m);
	}
	bare_wait(b, 0);
}

/* ---- kilnd --------------------------------------------------------------- */

static pid_t
kilnd_start(const char *kilnd)
{
	char *argv[] = {(char *)kilnd, "--foreground", "--project", dir, NULL};
	char sock[400];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	struct stat st;

	/* Its log goes to the scratch folder, not into the figures. */
	snprintf(sock, sizeof sock, "%s/kilnd.log", dir);
	if (posix_spawn_file_actions_init(&fa) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, sock,
	                                     O_WRONLY | O_CREAT, 0600) != 0 ||
	    posix_spawn(&pid, kilnd, &fa, NULL, argv, environ) != 0)
		die("cannot run %s", kilnd);
	posix_spawn_file_actions_destroy(&fa);
	kilnd_pid = pid;
	snprintf(sock, sizeof sock, "%s/.kiln/kilnd.sock", dir);
	for (int i = 0; stat(sock, &st) != 0; i++) {
		if (i > 500)
			die("kilnd did not start");
		usleep(10000);
	}
	return pid;
}

static int
discard(const void *buf, size_t len, void *arg)
{
	(void)buf;
	*(uint64_t *)arg += len;
	return 0;
}

/* ---- the two comparisons -------------------------------------------------- */

static void
bench_status(kiln_conn *c, struct bare *b, int n)
{
	double *tk = malloc(sizeof(double) * (size_t)n);
	double *tb = malloc(sizeof(double) * (size_t)n);
	kiln_status st;
	double t0, mk, mb, pk, pb;

	if (tk == NULL || tb == NULL)
		die("no memory");
	for (int i = 0; i < 200; i++) { /* warm both */
		kiln_status_get(c, &st);
		bare_echo(b, 8, 300);
	}
	for (int i = 0; i < n; i++) {
		t0 = now();
		bare_echo(b, 8, 300); /* a status request is 6 bytes, its reply ~300 */
		tb[i] = now() - t0;
		t0 = now();
		if (kiln_status_get(c, &st) != 0)
			die("status: %s", kiln_conn_error(c));
		tk[i] = now() - t0;
	}
	mk = quantile(tk, (size_t)n, 0.5) * 1e6;
	pk = quantile(tk, (size_t)n, 0.99) * 1e6;
	mb = quantile(tb, (size_t)n, 0.5) * 1e6;
	pb = quantile(tb, (size_t)n, 0.99) * 1e6;
	printf("status round trip, %d each, ipc://\n", n);
	printf("  kiln_status_get      median %7.1f us   p99 %7.1f us\n", mk, pk);
	printf("  bare nng req/rep     median %7.1f us   p99 %7.1f us\n", mb, pb);
	printf("  ratio kiln/bare      median %7.2fx     p99 %7.2fx   (target <= 2x)\n",
	       mk / mb, pk / pb);
	free(tk);
	free(tb);
}

static void
bench_get(kiln_conn *c, struct bare *b, int reps, size_t len)
{
	double tk[32], tr[32], tf[32], ts[32], t0, mk, mr, mf, ms, cold = 0;
	double mib = (double)len / 1048576;
	char hex[KILN_ID_HEX_LEN + 1], path[400];
	uint32_t chunk;
	uint8_t *data = malloc(len);
	kiln_status st;
	kiln_id id;
	uint64_t got;

	if (data == NULL || reps > 32)
		die("no memory");
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	if (kiln_blob_put(c, data, len, NULL, &id) != 0)
		die("put: %s", kiln_conn_error(c));
	free(data);
	if (kiln_status_get(c, &st) != 0)
		die("status");
	chunk = st.chunk_size; /* what libkiln asks for, with the defaults */
	kiln_id_to_hex(&id, hex);
	snprintf(path, sizeof path, "%s/.kiln/store/objects/%.2s/%s", dir, hex,
	         hex + 2);
	for (int r = -1; r < reps; r++) { /* r = -1: warm-up, untimed */
		t0 = now();
		bare_get(b, len, chunk, NULL);
		if (r >= 0)
			tr[r] = now() - t0;
		t0 = now();
		bare_get(b, len, chunk, path);
		if (r >= 0)
			tf[r] = now() - t0;
		t0 = now();
		bare_stream(b, len, chunk);
		if (r >= 0)
			ts[r] = now() - t0;
		got = 0;
		t0 = now();
		if (kiln_blob_get(c, &id, discard, &got) != 0 || got != len)
			die("get: %s", kiln_conn_error(c));
		if (r >= 0)
			tk[r] = now() - t0;
		else
			cold = now() - t0;
	}
	mk = mib / quantile(tk, (size_t)reps, 0.5);
	mr = mib / quantile(tr, (size_t)reps, 0.5);
	mf = mib / quantile(tf, (size_t)reps, 0.5);
	ms = mib / quantile(ts, (size_t)reps, 0.5);
	printf("blob get of %.0f MiB, ipc://, %u-byte chunks, %d in flight, "
	       "median of %d\n", mib, chunk, WINDOW, reps);
	printf("  kiln_blob_get, first       %7.0f MiB/s   (kilnd re-hashes the "
	       "blob before sending; one run)\n", mib / cold);
	printf("  kiln_blob_get, again       %7.0f MiB/s   (re-hashed lately, "
	       "file unchanged; libkiln hashes what it gets)\n", mk);
	printf("  bare nng req/rep chunks    %7.0f MiB/s   kiln = %.2f of it\n", mr,
	       mk / mr);
	printf("  the same, from the file    %7.0f MiB/s   kiln = %.2f of it\n", mf,
	       mk / mf);
	printf("  bare nng push/pull stream  %7.0f MiB/s   kiln = %.2f of it"
	       "   (target >= 0.7)\n", ms, mk / ms);
}

int
main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 5000;
	int reps = argc > 3 ? atoi(argv[3]) : 9;
	size_t len = (size_t)(argc > 4 ? atoi(argv[4]) : 256) << 20;
	kiln_connect_opts o = {.project = dir, .flags = KILN_CONNECT_NO_START};
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	kiln_conn *c;
	struct bare b;
	pid_t peer, kd;
	char cmd[600];

	if (argc < 2 || n < 100 || reps < 1 || reps > 32 || len == 0)
		die("usage: bench_proto KILND [ROUND_TRIPS>=100 [REPS<=32 [BLOB_MIB]]]");
	snprintf(dir, sizeof dir, "%s/kiln-bench-proto.XXXXXX", tmp);
	if (mkdtemp(dir) == NULL)
		die("mkdtemp: %s", strerror(errno));
	snprintf(rep_url, sizeof rep_url, "ipc://%s/bare.sock", dir);
	snprintf(push_url, sizeof push_url, "ipc://%s/bare-push.sock", dir);
	if ((peer = fork()) == 0) { /* before any nng call */
		bare_serve(len);
		_exit(0);
	}
	peer_pid = peer;
	kd = kilnd_start(argv[1]);
	if (kiln_connect(&o, &c) != 0)
		die("cannot connect to kilnd");
	bare_open(&b);
	printf("bench/proto: kilnd (%s) vs bare nng, both over ipc://, %ld cores\n",
	       argv[1], sysconf(_SC_NPROCESSORS_ONLN));
	bench_status(c, &b, n);
	bench_get(c, &b, reps, len);
	kiln_stop(c);
	kiln_close(c);
	waitpid(kd, NULL, 0);
	kill(peer, SIGKILL);
	waitpid(peer, NULL, 0);
	snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_proto: could not remove %s\n", dir);
	return 0;
}
