/* testutil.c — temp dirs, content, store wrappers and outside checks of a
 * store's files for the unit tests. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln_clock.h"
#include "testutil.h"

/* ---- temp dirs and files ---------------------------------------------- */

int
tu_setup_dir(void **state)
{
	const char *base = getenv("TMPDIR");
	char *dir = malloc(4096);

	if (dir == NULL)
		return -1;
	snprintf(dir, 4096, "%s/kiln-unit-XXXXXX", base ? base : "/tmp");
	if (mkdtemp(dir) == NULL) {
		free(dir);
		return -1;
	}
	*state = dir;
	return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else {
		chmod(path, 0644);
		unlink(path);
	}
	return 0;
}

void
tu_rmtree(const char *path)
{
	nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

int
tu_teardown_dir(void **state)
{
	char *dir = *state;

	if (dir != NULL && getenv("KILN_KEEP_TMP") == NULL)
		tu_rmtree(dir);
	free(dir);
	*state = NULL;
	return 0;
}

const char *
tu_dir(void **state)
{
	return *state;
}

const char *
tu_path(void **state, const char *fmt, ...)
{
	static char bufs[8][4096];
	static int next;
	char *b = bufs[next++ % 8];
	int n = snprintf(b, 4096, "%s/", tu_dir(state));
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b + n, 4096 - n, fmt, ap);
	va_end(ap);
	return b;
}

int
tu_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Close fd keeping errno; returns -1 (for error paths). */
static int
close_failed(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
	return -1;
}

int
tu_try_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	if (tu_write_all(fd, buf, len) != 0)
		return close_failed(fd);
	return close(fd);
}

void
tu_write_file(const char *path, const void *buf, size_t len)
{
	if (tu_try_write_file(path, buf, len) != 0)
		fail_msg("write %s: %s", path, strerror(errno));
}

int
tu_memfd_of(const void *buf, size_t len)
{
	int fd = memfd_create("kiln-test", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (tu_write_all(fd, buf, len) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		return close_failed(fd);
	return fd;
}

int
tu_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

void
tu_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- content ----------------------------------------------------------- */

void
tu_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

uint64_t
tu_rand_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

void
tu_fill64(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL | 1;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		tu_rand_next(&x);
		memcpy(p + i, &x, 8);
	}
	for (tu_rand_next(&x); i < len; i++, x >>= 8)
		p[i] = (uint8_t)x;
}

kiln_id
tu_key_of(const char *text)
{
	kiln_id k;

	kiln_id_of_buf(text, strlen(text), &k);
	return k;
}

/* ---- stores ------------------------------------------------------------ */

kiln_store *
tu_open_store_at(const char *path, unsigned flags, enum kiln_durability d,
                 const char *what)
{
	kiln_store_opts o = {.flags = flags, .durability = d};
	kiln_store *s = NULL;
	int rv = kiln_store_open(path, &o, &s);

	if (rv != 0)
		fail_msg("%s: opening the store at %s failed: %s", what, path,
		         kiln_strerror(rv));
	return s;
}

kiln_store *
tu_open_store(void **state, enum kiln_durability d)
{
	return tu_open_store_at(tu_path(state, "store"), KILN_STORE_CREATE, d,
	                        "tu_open_store");
}

int64_t
tu_clock_now(void *clock)
{
	struct tu_clock *c = clock;

	return kiln_wall_ns() + __atomic_load_n(&c->ahead_ns, __ATOMIC_SEQ_CST);
}

void
tu_clock_advance(struct tu_clock *c, int64_t ms)
{
	__atomic_add_fetch(&c->ahead_ns, ms * 1000000, __ATOMIC_SEQ_CST);
}

kiln_store *
tu_open_store_clocked(void **state, enum kiln_durability d, struct tu_clock *c)
{
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = d,
	                     .now_ns = tu_clock_now, .now_arg = c};
	kiln_store *s = NULL;
	int rv = kiln_store_open(tu_path(state, "store"), &o, &s);

	if (rv != 0)
		fail_msg("tu_open_store_clocked: opening the store at %s failed: %s",
		         tu_path(state, "store"), kiln_strerror(rv));
	return s;
}

void
tu_create_store(const char *path)
{
	kiln_store_close(tu_open_store_at(path, KILN_STORE_CREATE,
	                                  KILN_DURABLE_FSYNC, "creating a store"));
}

kiln_id
tu_put_content(kiln_store *s, uint64_t seed, size_t len)
{
	void *buf = malloc(len ? len : 1);
	kiln_id id, want;

	assert_non_null(buf);
	tu_fill(buf, len, seed);
	kiln_id_of_buf(buf, len, &want);
	assert_kiln(0, kiln_store_put_buf(s, buf, len, &id));
	free(buf);
	if (kiln_id_cmp(&id, &want) != 0)
		fail_msg("put_buf returned an id that is not the content's hash");
	return id;
}

int
tu_put_by_writer(kiln_store *s, const void *buf, size_t len, size_t chunk,
                 const kiln_id *want, kiln_id *id)
{
	const uint8_t *p = buf;
	kiln_blob_writer *w;
	int rv;

	if ((rv = kiln_blob_writer_open(s, &w)) != 0)
		return rv;
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;
		if ((rv = kiln_blob_writer_write(w, p + off, n)) != 0) {
			kiln_blob_writer_abort(w);
			return rv;
		}
	}
	return kiln_blob_writer_commit(w, want, id);
}

const char *
tu_blob_path(void **state, const kiln_id *id)
{
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	return tu_path(state, "store/objects/%.2s/%s", hex, hex + 2);
}

void
tu_flip_byte(const char *path, off_t off)
{
	int fd = -1;
	unsigned char c;

	if (chmod(path, 0644) != 0 || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		fail_msg("open %s for writing: %s", path, strerror(errno));
	if (pread(fd, &c, 1, off) != 1)
		fail_msg("pread %s: %s", path, strerror(errno));
	c ^= 0x20;
	if (pwrite(fd, &c, 1, off) != 1)
		fail_msg("pwrite %s: %s", path, strerror(errno));
	close(fd);
	chmod(path, 0444);
}

void
tu_truncate_blob(const char *path, off_t len)
{
	if (chmod(path, 0644) != 0 || truncate(path, len) != 0)
		fail_msg("truncate %s: %s", path, strerror(errno));
	chmod(path, 0444);
}

/* ---- checking a store from outside ------------------------------------- */

static int
is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

static int
is_dot_or_dotdot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* One file of objects/<fan>/: a sound blob (singly linked when settled);
 * returns its size. */
static uint64_t
check_blob_file(const char *dir, const char *fan, const char *name,
                const char *what, int settled)
{
	char path[4608], want[KILN_ID_HEX_LEN + 1], got[KILN_ID_HEX_LEN + 1];
	struct stat st;
	uint64_t size;
	kiln_id id;
	int fd;

	if (!is_lower_hex(name, 30))
		fail_msg("%s: objects/%s/%s is not a blob name (a temp file "
		         "published?)", what, fan, name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st) != 0)
		fail_msg("%s: open objects/%s/%s: %s", what, fan, name,
		         strerror(errno));
	if (!S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0444)
		fail_msg("%s: objects/%s/%s has mode %o, expected a 0444 file", what,
		         fan, name, (unsigned)st.st_mode);
	if (settled && st.st_nlink != 1)
		fail_msg("%s: objects/%s/%s has %lu links: another name for it was "
		         "left behind", what, fan, name, (unsigned long)st.st_nlink);
	assert_kiln(0, kiln_id_of_fd(fd, &id, &size));
	close(fd);
	memcpy(want, fan, 2);
	memcpy(want + 2, name, 31); /* both checked: 2 and 30 hex */
	kiln_id_to_hex(&id, got);
	if (strcmp(want, got) != 0)
		fail_msg("%s: objects/%s/%s (%" PRIu64 " bytes) hashes to %s: a "
		         "partial or damaged blob is visible", what, fan, name, size,
		         got);
	return size;
}

/* tu_check_objects, and with settled tmp/ empty and single links. */
static void
check_objects(const char *store, const char *what, int settled,
              uint64_t *nblobs, uint64_t *nbytes)
{
	char objs[4096], sub[4352], first[256];
	uint64_t n = 0, bytes = 0;
	struct dirent *e, *f;
	DIR *d, *d2;

	if (settled && tu_list_tmp(store, &first, 1) != 0)
		fail_msg("%s: tmp/%s is left behind though no write is under way",
		         what, first);
	snprintf(objs, sizeof objs, "%s/objects", store);
	if ((d = opendir(objs)) == NULL)
		fail_msg("%s: opendir objects/: %s", what, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		if (is_dot_or_dotdot(e->d_name))
			continue;
		if (!is_lower_hex(e->d_name, 2))
			fail_msg("%s: objects/%s is not a fan-out folder", what, e->d_name);
		snprintf(sub, sizeof sub, "%s/%s", objs, e->d_name);
		if ((d2 = opendir(sub)) == NULL)
			fail_msg("%s: objects/%s: %s", what, e->d_name, strerror(errno));
		while ((f = readdir(d2)) != NULL) {
			if (is_dot_or_dotdot(f->d_name))
				continue;
			bytes += check_blob_file(sub, e->d_name, f->d_name, what, settled);
			n++;
		}
		closedir(d2);
	}
	closedir(d);
	if (nblobs)
		*nblobs = n;
	if (nbytes)
		*nbytes = bytes;
}

void
tu_check_objects(const char *store, const char *what, uint64_t *nblobs,
                 uint64_t *nbytes)
{
	check_objects(store, what, 0, nblobs, nbytes);
}

void
tu_check_objects_settled(const char *store, const char *what,
                         uint64_t *nblobs, uint64_t *nbytes)
{
	check_objects(store, what, 1, nblobs, nbytes);
}

size_t
tu_list_tmp(const char *store, char names[][256], size_t max)
{
	char dir[4096];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/tmp", store);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (is_dot_or_dotdot(e->d_name))
			continue;
		if (n < max)
			snprintf(names[n], 256, "%s", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/* ---- fsck -------------------------------------------------------------- */

void
tu_fsck_collect(const kiln_fsck_problem *p, void *arg)
{
	struct tu_fsck_problems *ps = arg;

	if (ps->n < TU_FSCK_MAX) {
		struct tu_fsck_problem *q = &ps->p[ps->n];
		q->kind = p->kind;
		q->id = p->id;
		snprintf(q->where, sizeof q->where, "%s", p->where ? p->where : "(null)");
		q->repaired = p->repaired;
	}
	ps->n++;
}

/* tu_fsck_run, returning what fsck returned. */
static int
fsck_into(kiln_store *s, int repair, struct tu_fsck_problems *ps,
          kiln_fsck_stats *st)
{
	memset(ps, 0, sizeof *ps);
	memset(st, 0xa5, sizeof *st); /* every field must be written */
	return kiln_store_fsck(s, repair, tu_fsck_collect, ps, st);
}

void
tu_fsck_run(kiln_store *s, int repair, struct tu_fsck_problems *ps,
            kiln_fsck_stats *st)
{
	int rv = fsck_into(s, repair, ps, st);

	if (rv != 0)
		fail_msg("fsck%s: %s", repair ? " with repair" : "", kiln_strerror(rv));
}

const char *
tu_fsck_kind_name(enum kiln_fsck_kind k)
{
	switch (k) {
	case KILN_FSCK_CORRUPT: return "CORRUPT";
	case KILN_FSCK_MISSING: return "MISSING";
	case KILN_FSCK_BAD_RECORD: return "BAD_RECORD";
	case KILN_FSCK_STRAY: return "STRAY";
	case KILN_FSCK_SHA256: return "SHA256";
	}
	return "?";
}

const char *
tu_fsck_describe(const struct tu_fsck_problems *ps)
{
	static char buf[8192];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ps->n && i < TU_FSCK_MAX; i++) {
		char hex[KILN_ID_HEX_LEN + 1];
		kiln_id_to_hex(&ps->p[i].id, hex);
		off += (size_t)snprintf(buf + off, sizeof buf - off,
		                        "\n  %s %s where=\"%s\" repaired=%d",
		                        tu_fsck_kind_name(ps->p[i].kind), hex,
		                        ps->p[i].where, ps->p[i].repaired);
		if (off >= sizeof buf)
			break;
	}
	return ps->n ? buf : " (none)";
}

void
tu_assert_fsck_clean(kiln_store *s, const char *what, uint64_t nblobs,
                     uint64_t nbytes)
{
	static struct tu_fsck_problems ps; /* main thread only, like fail_msg */
	kiln_fsck_stats st;
	int rv;

	if ((rv = fsck_into(s, 0, &ps, &st)) != 0)
		fail_msg("%s: fsck: %s", what, kiln_strerror(rv));
	if (ps.n || st.corrupt || st.missing || st.bad_records || st.stray || st.sha256)
		fail_msg("%s: fsck found %zu problem(s): corrupt %" PRIu64
		         ", missing %" PRIu64 ", bad records %" PRIu64 ", stray %"
		         PRIu64 ", sha256 %" PRIu64 ":%s", what, ps.n, st.corrupt,
		         st.missing, st.bad_records, st.stray, st.sha256,
		         tu_fsck_describe(&ps));
	if (st.blobs != nblobs || st.bytes != nbytes)
		fail_msg("%s: fsck counted %" PRIu64 " blobs / %" PRIu64 " bytes, "
		         "expected %" PRIu64 " / %" PRIu64, what, st.blobs, st.bytes,
		         nblobs, nbytes);
}

void
tu_assert_store_sound(kiln_store *s, const char *what, uint64_t *nblobs,
                      uint64_t *nbytes)
{
	uint64_t n, bytes;

	tu_check_objects_settled(kiln_store_dir(s), what, &n, &bytes);
	tu_assert_fsck_clean(s, what, n, bytes);
	if (nblobs)
		*nblobs = n;
	if (nbytes)
		*nbytes = bytes;
}

/* ---- index listings ---------------------------------------------------- */

int
tu_collect_id(const char *profile, const char *url, const kiln_id *id,
              void *arg)
{
	struct tu_ids *l = arg;

	(void)profile;
	(void)url;
	if (l->n < l->max)
		l->id[l->n] = *id;
	l->n++;
	return 0;
}

/* ---- running ----------------------------------------------------------- */

/* LeakSanitizer asks this at exit; the sanitizer-free build never does. */
int __lsan_is_turned_off(void);
static int cases_failed;

int
__lsan_is_turned_off(void)
{
	return cases_failed != 0;
}

int
tu_skip_leak_report_if_failed(int nfailed)
{
	cases_failed = nfailed;
	return nfailed;
}
