/* bench_store.c — the blob store benchmark: kiln's store against its peers.
 *
 * Usage: bench_store SCRATCH_DIR   (normally through bench/store/run.sh)
 *
 * Prints one table line per comparison, each against a peer measured in the
 * same run:
 *
 *   put-by-move of a big file        vs  `xxh128sum` of the same file
 *   put-by-copy of a big file        vs  `cp` + `xxh128sum` of the copy
 *   4 KiB puts, FSYNC and NONE       vs  the bare file system floor (hash,
 *                                        create in tmp/, write, rename into
 *                                        a shard dir; fsync file + dir)
 *   index gets through the store     vs  bare mdb_get on the same LMDB env,
 *                                        one read txn per get (and one txn
 *                                        for all gets: the absolute floor)
 *
 * Rules: every timed case runs REPS times; figures are medians with min–max;
 * ratios are median/median. The peers are spawned with posix_spawn and timed
 * with CLOCK_MONOTONIC around spawn+wait. Before every timed run of the big
 * cases the scratch file system is synced (untimed), so no side pays for
 * the other's write-back; both sides read page-cached input and their order
 * alternates from rep to rep. The file put-by-move consumes is re-created
 * (untimed) before every run, and every run's content is distinct so that no
 * put is a dedup hit. Missing a target is not an error: the exit status is 0
 * unless something failed.
 *
 * Sizes come from the environment (defaults in brackets):
 *   KILN_BENCH_REPS [5]           runs of every timed case
 *   KILN_BENCH_BIG_MB [1024]      size of the big file
 *   KILN_BENCH_FSYNC_REPS [3]     runs of the big FSYNC (info) rows; 0: skip
 *   KILN_BENCH_SMALL_FSYNC [2000] 4 KiB puts per run with KILN_DURABLE_FSYNC
 *   KILN_BENCH_SMALL_NONE [20000] 4 KiB puts per run with KILN_DURABLE_NONE
 *   KILN_BENCH_INDEX_N [100000]   index entries
 *   KILN_BENCH_GETS [500000]      random gets per run
 *   KILN_BENCH_VERBOSE [0]        1: print every run's figure to stderr
 *
 * This is the one file outside store/ that includes lmdb.h: it measures the
 * bare mdb_get floor under the store's own index. It relies on the store's
 * documented layout: the LMDB environment is the folder <store>/db, the
 * index is the named database "index", and an index key is the profile
 * bytes, one NUL, then the URL bytes. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_store.h"
#include "../common/benchutil.h"

#define PROG "bench_store"

#define SMALL_LEN 4096
#define URL_MAX 64 /* "sprites/d%ld/f%ld" for any long i, with its NUL */
#define PROFILE "pc"

struct cfg {
	const char *scratch;
	int reps, fsync_reps;
	uint64_t big_len;
	long small_fsync, small_none, index_n, gets;
};

/* One timed case: a figure per run. */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* ---- small helpers --------------------------------------------------- */


static void check(int rv, const char *what)
{
	if (rv != 0)
		die("%s: %s", what, kiln_strerror(rv));
}


static uint64_t rng_next(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static void fill_random(void *buf, size_t len)
{
	uint64_t w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = rng_next();
		memcpy((char *)buf + i, &w, 8);
	}
}




/* fsync the folder at path, or with whole_fs, sync its whole file system
 * (before a timed run: no write-back of earlier runs under it). */
static void sync_dir(const char *path, int whole_fs)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || (whole_fs ? syncfs(fd) : fsync(fd)) != 0)
		die("sync %s: %s", path, strerror(errno));
	close(fd);
}

static void write_all(int fd, const void *buf, size_t len, const char *what)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write %s: %s", what, strerror(errno));
		buf = (const char *)buf + n;
		len -= (size_t)n;
	}
}

/* Overwrite the first 16 bytes of path with (tag, rep): each run's big file
 * gets content no earlier run had. */
static void stamp_file(const char *path, uint64_t tag, uint64_t rep)
{
	uint64_t st[2] = { tag, rep };
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || pwrite(fd, st, sizeof st, 0) != (ssize_t)sizeof st)
		die("stamp %s: %s", path, strerror(errno));
	close(fd);
}

/* Copy src to a new file dst in the kernel (untimed setup). */
static void copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (in < 0 || out < 0)
		die("copy %s -> %s: %s", src, dst, strerror(errno));
	do {
		n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
	} while (n > 0);
	if (n < 0)
		die("copy_file_range %s: %s", dst, strerror(errno));
	close(in);
	close(out);
}

/* Make the big source file: pseudo-random, each MiB stamped with its
 * index, then read it back once so it is page-cached. */
static void make_big(const char *path, uint64_t len)
{
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	uint64_t off, n;
	kiln_id id;

	if (buf == NULL || fd < 0)
		die("create %s: %s", path, strerror(errno));
	fill_random(buf, chunk);
	for (off = 0; off < len; off += n) {
		n = len - off < chunk ? len - off : chunk;
		memcpy(buf, &off, sizeof off);
		write_all(fd, buf, n, path);
	}
	close(fd);
	free(buf);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	check(kiln_id_of_fd(fd, &id, NULL), "warm the big file");
	close(fd);
}

/* ---- peers ----------------------------------------------------------- */

/* Run argv[0] (found on PATH) with stdout into out (when not NULL) and
 * stderr to /dev/null; return the wall time of spawn+wait in seconds. */
static double spawn_timed(char *const argv[], char *out, size_t outlen)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	int p[2] = { -1, -1 }, rv, status;
	double t0, t1;
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		die("pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (out != NULL)
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	t0 = now();
	rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	if (rv != 0)
		die("spawn %s: %s", argv[0], strerror(rv));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	t1 = now();
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("%s %s failed (status %d)", argv[0], argv[1], status);
	close(p[1]);
	if (out != NULL) {
		/* The child has exited: its few bytes sit in the pipe. */
		n = read(p[0], out, outlen - 1);
		out[n > 0 ? n : 0] = '\0';
	}
	close(p[0]);
	return t1 - t0;
}

/* Time `xxh128sum path`; hex gets the digest it printed. */
static double peer_xxh128sum(const char *path, char hex[KILN_ID_HEX_LEN + 1])
{
	char out[4096];
	char *argv[] = { "xxh128sum", (char *)path, NULL };
	double t = spawn_timed(argv, out, sizeof out);

	memcpy(hex, out, KILN_ID_HEX_LEN);
	hex[KILN_ID_HEX_LEN] = '\0';
	return t;
}

/* The store and xxh128sum must name the same content the same way. */
static void check_same(const char *peer_hex, const kiln_id *id, const char *what)
{
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	if (strcmp(peer_hex, hex) != 0)
		die("%s: xxh128sum printed %s, the store said %s", what, peer_hex, hex);
}

/* ---- statistics and the table ---------------------------------------- */




/* "1,234,567" */

enum unit { UNIT_MS, UNIT_RATE };

/* "123 ms (110–130)", "45,678/s (44,000–46,000)" or "1,234k/s (1,200–1,300)" */
static void fmt_series(char *buf, size_t len, const struct series *s, enum unit u)
{
	char a[32], b[32], c[32];
	double med, lo, hi, k;

	series_stats(s, &med, &lo, &hi);
	if (u == UNIT_MS) {
		snprintf(buf, len, "%.0f ms (%.0f–%.0f)", med * 1e3, lo * 1e3, hi * 1e3);
		return;
	}
	k = med >= 1e5 ? 1e3 : 1;
	fmt_count(a, sizeof a, med / k);
	fmt_count(b, sizeof b, lo / k);
	fmt_count(c, sizeof c, hi / k);
	snprintf(buf, len, "%s%s/s (%s–%s)", a, k > 1 ? "k" : "", b, c);
}

/* Column widths; the '–' in figures is 3 bytes for 1 column, hence the
 * padding helper. */

static void print_header(void)
{
	put_col("case", 40);
	put_col("kiln", 27);
	put_col("peer", 42);
	put_col("ratio", 6);
	put_col("target", 7);
	puts("result");
}

/* One table line. For times the ratio is kiln/peer (lower is better), for
 * rates kiln/peer too (higher is better); target_op is "<=", ">=" or NULL
 * for a figure without a target. */
static void print_row(const char *name, const struct series *kiln, const char *peer_name,
                      const struct series *peer, enum unit u, const char *target_op,
                      double target)
{
	char kb[128], pb[128], pcol[192], rb[16], tb[16];
	double km, pm, lo, hi, ratio;
	int met;

	series_stats(kiln, &km, &lo, &hi);
	series_stats(peer, &pm, &lo, &hi);
	ratio = km / pm;
	fmt_series(kb, sizeof kb, kiln, u);
	fmt_series(pb, sizeof pb, peer, u);
	snprintf(pcol, sizeof pcol, "%s %s", peer_name, pb);
	snprintf(rb, sizeof rb, "%.2f", ratio);
	put_col(name, 40);
	put_col(kb, 27);
	put_col(pcol, 42);
	put_col(rb, 6);
	if (target_op == NULL) {
		put_col("-", 7);
		puts("(info)");
		return;
	}
	snprintf(tb, sizeof tb, "%s %.1f", target_op, target);
	met = target_op[0] == '<' ? ratio <= target : ratio >= target;
	put_col(tb, 7);
	puts(met ? "target met" : "target MISSED");
}

/* ---- stores ----------------------------------------------------------- */

static kiln_store *store_open(const char *dir, enum kiln_durability d)
{
	kiln_store_opts o = { .flags = KILN_STORE_CREATE, .durability = d };
	kiln_store *s;

	check(kiln_store_open(dir, &o, &s), dir);
	return s;
}

/* Remove a big blob (untimed) so the scratch disk holds one at a time. */
static void drop_blob(kiln_store *s, const kiln_id *id)
{
	char path[4096];

	check(kiln_store_blob_path(s, id, path, sizeof path), "blob path");
	if (unlink(path) != 0)
		die("unlink %s: %s", path, strerror(errno));
}

/* ---- big files: put-by-move and put-by-copy -------------------------- */

struct big {
	const struct cfg *c;
	char src[4096], moved[4096], copy[4096];
	struct series move_kiln[2], move_peer, copy_kiln[2], copy_peer;
};

/* One run of put-by-move; odd runs time the store first and hash the
 * published blob (the same inode) with xxh128sum afterwards. */
static void big_move_run(struct big *b, kiln_store *s, int dur, int rep, int with_peer)
{
	char blob[4096], hex[KILN_ID_HEX_LEN + 1];
	double t0, t1;
	kiln_id id;

	copy_file(b->src, b->moved);
	stamp_file(b->moved, 0x6d6f7665u + dur, rep);
	if (with_peer && rep % 2 == 0) {
		sync_dir(b->c->scratch, 1);
		series_add(&b->move_peer, peer_xxh128sum(b->moved, hex));
	}
	sync_dir(b->c->scratch, 1);
	t0 = now();
	check(kiln_store_put_move(s, b->moved, &id), "put_move");
	t1 = now();
	series_add(&b->move_kiln[dur], t1 - t0);
	if (with_peer && rep % 2 == 1) {
		check(kiln_store_blob_path(s, &id, blob, sizeof blob), "blob path");
		sync_dir(b->c->scratch, 1);
		series_add(&b->move_peer, peer_xxh128sum(blob, hex));
	}
	if (with_peer)
		check_same(hex, &id, "put-by-move");
	drop_blob(s, &id);
}

/* One run of put-by-copy against cp + xxh128sum of the copy; the order
 * alternates from run to run. */
static void big_copy_run(struct big *b, kiln_store *s, int dur, int rep, int with_peer)
{
	char hex[KILN_ID_HEX_LEN + 1];
	char *cp[] = { "cp", b->src, b->copy, NULL };
	double t0, t1, tp;
	kiln_id id;
	int side;

	stamp_file(b->src, 0x636f7079u + dur, rep);
	for (side = 0; side < 2; side++) {
		sync_dir(b->c->scratch, 1);
		if ((side == 0) == (rep % 2 == 1)) {
			t0 = now();
			check(kiln_store_put_path(s, b->src, &id), "put_path");
			t1 = now();
			series_add(&b->copy_kiln[dur], t1 - t0);
			drop_blob(s, &id); /* before syncing: no write-back of it */
		} else if (with_peer) {
			tp = spawn_timed(cp, NULL, 0);
			tp += peer_xxh128sum(b->copy, hex);
			series_add(&b->copy_peer, tp);
			if (unlink(b->copy) != 0)
				die("unlink %s: %s", b->copy, strerror(errno));
		}
	}
	if (with_peer)
		check_same(hex, &id, "put-by-copy");
}

static void bench_big(const struct cfg *c)
{
	static struct big b;
	char dir[4096], name[4][96], size[32];
	double mib = (double)c->big_len / (1 << 20);
	kiln_store *s;
	int rep, dur;

	b.c = c;
	b.move_kiln[KILN_DURABLE_NONE].label = "put-by-move NONE, s";
	b.move_kiln[KILN_DURABLE_FSYNC].label = "put-by-move FSYNC, s";
	b.move_peer.label = "xxh128sum, s";
	b.copy_kiln[KILN_DURABLE_NONE].label = "put-by-copy NONE, s";
	b.copy_kiln[KILN_DURABLE_FSYNC].label = "put-by-copy FSYNC, s";
	b.copy_peer.label = "cp + xxh128sum, s";
	path_join(b.src, sizeof b.src, c->scratch, "big.src");
	path_join(b.moved, sizeof b.moved, c->scratch, "big.moved");
	path_join(b.copy, sizeof b.copy, c->scratch, "big.cp");
	path_join(dir, sizeof dir, c->scratch, "store-big");
	fprintf(stderr, "  .. writing a %.0f MiB source file\n", mib);
	make_big(b.src, c->big_len);
	for (dur = KILN_DURABLE_NONE; dur >= KILN_DURABLE_FSYNC; dur--) {
		int peer = dur == KILN_DURABLE_NONE;
		int reps = peer ? c->reps : c->fsync_reps;

		if (reps == 0)
			continue;
		fprintf(stderr, "  .. put-by-move and put-by-copy, %s, %d runs\n",
		         peer ? "KILN_DURABLE_NONE" : "KILN_DURABLE_FSYNC", reps);
		s = store_open(dir, dur);
		for (rep = 0; rep < reps; rep++) {
			big_move_run(&b, s, dur, rep, peer);
			big_copy_run(&b, s, dur, rep, peer);
		}
		kiln_store_close(s);
	}
	snprintf(size, sizeof size, c->big_len % (1 << 30) ? "%.0f MiB" : "%.0f GiB",
	         c->big_len % (1 << 30) ? mib : mib / 1024);
	snprintf(name[0], sizeof name[0], "put-by-move %s, NONE", size);
	snprintf(name[1], sizeof name[1], "put-by-copy %s, NONE", size);
	snprintf(name[2], sizeof name[2], "put-by-move %s, FSYNC, %d run%s", size, c->fsync_reps,
	         c->fsync_reps > 1 ? "s" : "");
	snprintf(name[3], sizeof name[3], "put-by-copy %s, FSYNC, %d run%s", size, c->fsync_reps,
	         c->fsync_reps > 1 ? "s" : "");
	print_row(name[0], &b.move_kiln[KILN_DURABLE_NONE], "xxh128sum", &b.move_peer,
	          UNIT_MS, "<=", 1.2);
	print_row(name[1], &b.copy_kiln[KILN_DURABLE_NONE], "cp + xxh128sum", &b.copy_peer,
	          UNIT_MS, "<=", 1.0);
	if (c->fsync_reps > 0) {
		print_row(name[2], &b.move_kiln[KILN_DURABLE_FSYNC], "xxh128sum", &b.move_peer,
		          UNIT_MS, NULL, 0);
		print_row(name[3], &b.copy_kiln[KILN_DURABLE_FSYNC], "cp + xxh128sum",
		          &b.copy_peer, UNIT_MS, NULL, 0);
	}
	fflush(stdout);
	unlink(b.src);
}

/* ---- small blobs: 4 KiB puts ----------------------------------------- */

/* The bare file system floor under a put: a store-like folder written the
 * way kiln_store.h says blobs are published, without the store. */
struct floor_dir {
	char tmp[4096], objects[4096];
	unsigned char made[256]; /* shard folders made so far */
};

struct small {
	const struct cfg *c;
	char buf[SMALL_LEN];
	uint64_t seq; /* makes every put's content distinct */
	struct series kiln[2], peer[2];
};

static void floor_init(struct floor_dir *f, const char *scratch, const char *name)
{
	char dir[4096];

	memset(f, 0, sizeof *f);
	path_join(dir, sizeof dir, scratch, name);
	path_join(f->tmp, sizeof f->tmp, dir, "tmp");
	path_join(f->objects, sizeof f->objects, dir, "objects");
	make_dir(dir);
	make_dir(f->tmp);
	make_dir(f->objects);
}

/* Hash, create tmp/<seq>, write, (fsync), rename to objects/ab/<30 hex>,
 * (fsync objects/ab). */
static void floor_put(struct floor_dir *f, const void *buf, size_t len, uint64_t seq,
                      int sync)
{
	char hex[KILN_ID_HEX_LEN + 1], name[24], tmp[4096], shard[4096], dst[4096];
	kiln_id id;
	int fd;

	kiln_id_of_buf(buf, len, &id);
	kiln_id_to_hex(&id, hex);
	snprintf(name, sizeof name, "%llu", (unsigned long long)seq);
	path_join(tmp, sizeof tmp, f->tmp, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		die("create %s: %s", tmp, strerror(errno));
	write_all(fd, buf, len, tmp);
	if (sync && fsync(fd) != 0)
		die("fsync %s: %s", tmp, strerror(errno));
	close(fd);
	snprintf(name, sizeof name, "%.2s", hex);
	path_join(shard, sizeof shard, f->objects, name);
	if (!f->made[id.b[0]]) {
		make_dir(shard);
		f->made[id.b[0]] = 1;
	}
	path_join(dst, sizeof dst, shard, hex + 2);
	if (rename(tmp, dst) != 0)
		die("rename %s: %s", tmp, strerror(errno));
	if (sync)
		sync_dir(shard, 0);
}

static void small_stamp(struct small *sm, uint64_t tag)
{
	uint64_t st[2] = { tag, sm->seq++ };

	memcpy(sm->buf, st, sizeof st);
}

/* One timed run of n puts through the store; returns puts/s. */
static double small_kiln_run(struct small *sm, kiln_store *s, long n)
{
	double t0 = now();
	kiln_id id;
	long i;

	for (i = 0; i < n; i++) {
		small_stamp(sm, 0x6b696c6eu);
		check(kiln_store_put_buf(s, sm->buf, SMALL_LEN, &id), "put_buf");
	}
	return n / (now() - t0);
}

static double small_floor_run(struct small *sm, struct floor_dir *f, long n, int sync)
{
	double t0 = now();
	long i;

	for (i = 0; i < n; i++) {
		small_stamp(sm, 0x666c6f72u);
		floor_put(f, sm->buf, SMALL_LEN, sm->seq, sync);
	}
	return n / (now() - t0);
}

static void bench_small(const struct cfg *c)
{
	static const char *const sname[2] = { "small-fsync", "small-none" };
	static const char *const fname[2] = { "floor-fsync", "floor-none" };
	static struct small sm;
	struct floor_dir f;
	char dir[4096], row[96];
	kiln_store *s;
	int dur, rep, side;
	long n;

	sm.c = c;
	sm.kiln[KILN_DURABLE_NONE].label = "4 KiB puts NONE, /s";
	sm.kiln[KILN_DURABLE_FSYNC].label = "4 KiB puts FSYNC, /s";
	sm.peer[KILN_DURABLE_NONE].label = "bare fs, /s";
	sm.peer[KILN_DURABLE_FSYNC].label = "bare fs+fsync, /s";
	fill_random(sm.buf, sizeof sm.buf);
	for (dur = KILN_DURABLE_NONE; dur >= KILN_DURABLE_FSYNC; dur--) {
		n = dur == KILN_DURABLE_FSYNC ? c->small_fsync : c->small_none;
		fprintf(stderr, "  .. 4 KiB puts, %s, %d runs of %ld\n",
		         dur == KILN_DURABLE_FSYNC ? "KILN_DURABLE_FSYNC" : "KILN_DURABLE_NONE",
		         c->reps, n);
		path_join(dir, sizeof dir, c->scratch, sname[dur]);
		floor_init(&f, c->scratch, fname[dur]);
		s = store_open(dir, dur);
		for (rep = 0; rep < c->reps; rep++) {
			for (side = 0; side < 2; side++) {
				sync_dir(c->scratch, 1);
				if ((side == 0) == (rep % 2 == 0))
					series_add(&sm.kiln[dur], small_kiln_run(&sm, s, n));
				else
					series_add(&sm.peer[dur], small_floor_run(&sm, &f, n,
					                                          dur == KILN_DURABLE_FSYNC));
			}
		}
		kiln_store_close(s);
	}
	snprintf(row, sizeof row, "4 KiB puts x%ld, NONE", c->small_none);
	print_row(row, &sm.kiln[KILN_DURABLE_NONE], "bare fs", &sm.peer[KILN_DURABLE_NONE],
	          UNIT_RATE, NULL, 0);
	snprintf(row, sizeof row, "4 KiB puts x%ld, FSYNC", c->small_fsync);
	print_row(row, &sm.kiln[KILN_DURABLE_FSYNC], "bare fs+fsync",
	          &sm.peer[KILN_DURABLE_FSYNC], UNIT_RATE, NULL, 0);
	fflush(stdout);
}

/* ---- index gets: the store vs bare mdb_get --------------------------- */

struct idx {
	const struct cfg *c;
	char dir[4096];
	char *urls;        /* index_n URLs of URL_MAX bytes */
	char *keys;        /* the same as LMDB keys: "pc\0<url>" */
	size_t *keylen;
	uint32_t *order;   /* gets random entry numbers */
	kiln_id ids[4];
	struct series kiln, bare, bare1;
};

static const char *idx_url(const struct idx *x, long i)
{
	return x->urls + (size_t)i * URL_MAX;
}

static void idx_fill(struct idx *x)
{
	const struct cfg *c = x->c;
	kiln_store *s = store_open(x->dir, KILN_DURABLE_NONE);
	char blob[64];
	char *url, *key;
	long i;

	fprintf(stderr, "  .. filling the index with %ld entries\n", c->index_n);
	for (i = 0; i < 4; i++) {
		snprintf(blob, sizeof blob, "index bench blob %ld\n", i);
		check(kiln_store_put_buf(s, blob, strlen(blob), &x->ids[i]), "put_buf");
	}
	x->urls = malloc((size_t)c->index_n * URL_MAX);
	x->keys = malloc((size_t)c->index_n * (URL_MAX + 4));
	x->keylen = malloc((size_t)c->index_n * sizeof *x->keylen);
	x->order = malloc((size_t)c->gets * sizeof *x->order);
	if (!x->urls || !x->keys || !x->keylen || !x->order)
		die("out of memory");
	for (i = 0; i < c->index_n; i++) {
		url = x->urls + (size_t)i * URL_MAX;
		key = x->keys + (size_t)i * (URL_MAX + 4);
		snprintf(url, URL_MAX, "sprites/d%ld/f%ld", i / 1000, i);
		memcpy(key, PROFILE, sizeof PROFILE); /* with its NUL */
		memcpy(key + sizeof PROFILE, url, strlen(url));
		x->keylen[i] = sizeof PROFILE + strlen(url);
		check(kiln_store_index_set(s, PROFILE, url, &x->ids[i % 4]), "index_set");
	}
	for (i = 0; i < c->gets; i++)
		x->order[i] = (uint32_t)(rng_next() % (uint64_t)c->index_n);
	kiln_store_close(s);
}

/* One run through the store: an untimed pass over every entry (warms the
 * new mapping, checks every answer), then the timed random gets. */
static void idx_kiln_run(struct idx *x)
{
	const struct cfg *c = x->c;
	kiln_store *s = store_open(x->dir, KILN_DURABLE_NONE);
	double t0, t1;
	long i, bad = 0;
	kiln_id id;

	for (i = 0; i < c->index_n; i++) {
		check(kiln_store_index_get(s, PROFILE, idx_url(x, i), &id), idx_url(x, i));
		if (kiln_id_cmp(&id, &x->ids[i % 4]) != 0)
			die("index_get %s: wrong blob", idx_url(x, i));
	}
	t0 = now();
	for (i = 0; i < c->gets; i++)
		bad += kiln_store_index_get(s, PROFILE, idx_url(x, x->order[i]), &id) != 0;
	t1 = now();
	if (bad)
		die("index_get: %ld of %ld gets failed", bad, c->gets);
	series_add(&x->kiln, c->gets / (t1 - t0));
	kiln_store_close(s);
}

static long idx_bare_gets(struct idx *x, MDB_env *env, MDB_dbi dbi, int txn_per_get)
{
	MDB_txn *txn = NULL;
	MDB_val k, v;
	long i, found = 0;
	uint32_t e;

	if (!txn_per_get && mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
		die("mdb_txn_begin failed");
	for (i = 0; i < x->c->gets; i++) {
		e = x->order[i];
		k.mv_data = x->keys + (size_t)e * (URL_MAX + 4);
		k.mv_size = x->keylen[e];
		if (txn_per_get && mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
			die("mdb_txn_begin failed");
		found += mdb_get(txn, dbi, &k, &v) == 0;
		if (txn_per_get)
			mdb_txn_abort(txn);
	}
	if (!txn_per_get)
		mdb_txn_abort(txn);
	return found;
}

/* One run on the bare LMDB environment under the store: an untimed warm
 * pass, then the random gets with a read txn each, then in one txn. */
static void idx_bare_run(struct idx *x)
{
	char db[4096];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k, v;
	double t0;
	long i, n = x->c->gets;
	int rv;

	path_join(db, sizeof db, x->dir, "db");
	if ((rv = mdb_env_create(&env)) != 0 || (rv = mdb_env_set_maxdbs(env, 16)) != 0 ||
	    (rv = mdb_env_set_mapsize(env, (size_t)16 << 30)) != 0 ||
	    (rv = mdb_env_open(env, db, MDB_RDONLY | MDB_NOTLS, 0644)) != 0)
		die("mdb_env_open %s: %s", db, mdb_strerror(rv));
	if ((rv = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) != 0 ||
	    (rv = mdb_dbi_open(txn, "index", 0, &dbi)) != 0)
		die("open the \"index\" database in %s: %s", db, mdb_strerror(rv));
	for (i = 0; i < x->c->index_n; i++) {
		k.mv_data = x->keys + (size_t)i * (URL_MAX + 4);
		k.mv_size = x->keylen[i];
		if ((rv = mdb_get(txn, dbi, &k, &v)) != 0)
			die("bare mdb_get pc/%s: %s (is the index key \"<profile>\\0<url>\"?)",
			    idx_url(x, i), mdb_strerror(rv));
	}
	if ((rv = mdb_txn_commit(txn)) != 0)
		die("mdb_txn_commit: %s", mdb_strerror(rv));
	t0 = now();
	if (idx_bare_gets(x, env, dbi, 1) != n)
		die("bare mdb_get missed keys");
	series_add(&x->bare, n / (now() - t0));
	t0 = now();
	if (idx_bare_gets(x, env, dbi, 0) != n)
		die("bare mdb_get missed keys");
	series_add(&x->bare1, n / (now() - t0));
	mdb_env_close(env);
}

static void bench_index(const struct cfg *c)
{
	static struct idx x;
	char row[96];
	int rep;

	x.c = c;
	x.kiln.label = "index_get, /s";
	x.bare.label = "mdb_get txn/get, /s";
	x.bare1.label = "mdb_get one txn, /s";
	path_join(x.dir, sizeof x.dir, c->scratch, "store-index");
	idx_fill(&x);
	fprintf(stderr, "  .. %d runs of %ld random index gets\n", c->reps, c->gets);
	for (rep = 0; rep < c->reps; rep++) {
		if (rep % 2 == 0) {
			idx_kiln_run(&x);
			idx_bare_run(&x);
		} else {
			idx_bare_run(&x);
			idx_kiln_run(&x);
		}
	}
	snprintf(row, sizeof row, "index gets, %ldk entries", c->index_n / 1000);
	print_row(row, &x.kiln, "mdb_get txn/get", &x.bare, UNIT_RATE, ">=", 0.8);
	print_row("index gets, floor", &x.kiln, "mdb_get one txn", &x.bare1, UNIT_RATE, NULL, 0);
	fflush(stdout);
	free(x.urls);
	free(x.keys);
	free(x.keylen);
	free(x.order);
}

/* ---- the machine ------------------------------------------------------ */

/* The file system type, device and mount point holding path, from the
 * longest matching mount point in /proc/self/mountinfo. */


static void print_machine(const struct cfg *c)
{
	char fs[8192], cpu[256];
	struct utsname u;
	double ram = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);

	scratch_fs(c->scratch, fs, sizeof fs);
	cpu_model(cpu, sizeof cpu);
	if (uname(&u) != 0)
		snprintf(u.release, sizeof u.release, "?");
	printf("\nmachine: nproc %ld (%s), %.1f GiB RAM, Linux %s; scratch %s on %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), cpu, ram / (1 << 30), u.release, c->scratch, fs);
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct cfg c;
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_store SCRATCH_DIR (see bench/store/run.sh)\n");
		return 2;
	}
	c.scratch = argv[1];
	if (stat(c.scratch, &st) != 0 || !S_ISDIR(st.st_mode))
		die("%s is not a folder", c.scratch);
	c.reps = (int)env_long("KILN_BENCH_REPS", 5, 1);
	bench_prog = PROG;
	bench_verbose = (int)env_long("KILN_BENCH_VERBOSE", 0, 0);
	c.fsync_reps = (int)env_long("KILN_BENCH_FSYNC_REPS", 3, 0);
	c.big_len = (uint64_t)env_long("KILN_BENCH_BIG_MB", 1024, 1) << 20;
	c.small_fsync = env_long("KILN_BENCH_SMALL_FSYNC", 2000, 1);
	c.small_none = env_long("KILN_BENCH_SMALL_NONE", 20000, 1);
	c.index_n = env_long("KILN_BENCH_INDEX_N", 100000, 1);
	c.gets = env_long("KILN_BENCH_GETS", 500000, 1);
	if (c.reps > MAXREPS || c.fsync_reps > MAXREPS)
		die("at most %d runs a case", MAXREPS);
	if (c.index_n > 99999999)
		die("KILN_BENCH_INDEX_N: at most 99999999");

	printf("kiln store benchmark: medians of %d runs (min–max); ratio = kiln / peer "
	       "median\n(times: lower is better; rates: higher is better). Big-file rows "
	       "use KILN_DURABLE_NONE\nlike their peers (no fsync); FSYNC rows are "
	       "information, against the same peer figures.\n\n",
	       c.reps);
	print_header();
	fflush(stdout);
	bench_big(&c);
	bench_small(&c);
	bench_index(&c);
	printf("\nbare fs: hash, create tmp/<n>, write, rename to objects/ab/<30 hex> (FSYNC: "
	       "fsync file and\n  shard folder), in a folder like a store's, no database. "
	       "mdb_get: the same keys in the\n  store's LMDB environment opened "
	       "MDB_RDONLY|MDB_NOTLS. Big files: syncfs before every timed run,\n  "
	       "content new each run, page-cached, peers' order alternating.\n");
	print_machine(&c);
	return 0;
}
