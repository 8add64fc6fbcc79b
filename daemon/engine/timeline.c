/* timeline.c — a build's timeline as a Chrome trace-event file, the JSON
 * that Perfetto (ui.perfetto.dev) and chrome://tracing open (docs/build.md,
 * "The timeline of a build").
 *
 * While a build runs, each step whose tool ran in it (ran, failed or
 * cancelled while running) adds a slice: its URL, result, reason, machine,
 * its tool's time and its `kiln need` waits. Steps up to date or reused
 * run nothing and get no slice; the build's slice counts them. A slice
 * holds its slot from its tool's start to its end (the slot is free
 * then); checking and publishing its outputs comes after, on no slot, and
 * is a slice of its own ("publish"). At the build's end the slices are
 * laid out in lanes: a slice goes to the lowest lane of its machine free
 * at its start, so this machine's lanes are its -j slots in use and an
 * agent's lanes its slots; publishing has lanes of its own, after them
 * (a step publishing while the next one runs in its slot would otherwise
 * take a lane more: ten lanes for -j 2). Each lane is a thread (tid)
 * named by an "M" thread_name event.
 *
 * File: .kiln/traces/<build id>.json, written to a temp file in that
 * folder (named by the daemon's pid and the build) and renamed into
 * place; traces/last is a symlink to the newest. A daemon numbers its
 * builds after the highest trace it finds there (timeline_last_id), so
 * no trace is replaced by a later daemon's. The newest TIMELINE_KEEP
 * traces (by mtime) stay. Builds end at once: the rename, the link and
 * the prune are done under an flock of the folder (one build at a time;
 * the file's mtime is set then, so the newest by mtime is the one last
 * linked), and the prune removes only the temp files of other daemons
 * (a crash's), never one another build of this daemon is writing.
 *
 * Threads: see timeline.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "kiln_json.h"
#include "timeline.h"

struct tl_slice {
	char *url;
	char *reason;
	char *error;
	char *machine;           /* "" for this machine */
	char **needs;            /* URLs its run was given by `kiln need` */
	uint32_t nneeds;
	uint32_t lane;           /* its tid, set when written */
	uint32_t publane;        /* its publishing's tid (0: none) */
	const char *result;      /* "ran", "failed", "cancelled" */
	int64_t t0, t1;          /* kiln_mono_ns */
	int64_t tslot;           /* its slot's end: t0 <= tslot <= t1 */
	uint64_t tool_ns;
	struct wait_span waits[ENGINE_MAX_WAIT_SPANS];
	uint8_t nwaits;
};

struct timeline {
	uint64_t id;
	char profile[65];
	int64_t start_ns, start_wall_ns;
	uint32_t jobs;
	struct tl_slice *v;
	size_t n, cap;
	uint32_t dropped;        /* slices over TIMELINE_MAX_SLICES */
};

struct timeline *
timeline_new(const struct build *b)
{
	struct timeline *t = calloc(1, sizeof *t);

	if (t == NULL)
		return NULL;
	t->id = b->id;
	snprintf(t->profile, sizeof t->profile, "%s", b->profile);
	t->start_ns = b->start_ns;
	t->start_wall_ns = kiln_wall_ns();
	t->jobs = b->jobs;
	return t;
}

static void
slice_free(struct tl_slice *s)
{
	free(s->url);
	free(s->reason);
	free(s->error);
	free(s->machine);
	for (uint32_t i = 0; i < s->nneeds; i++)
		free(s->needs[i]);
	free(s->needs);
}

void
timeline_free(struct timeline *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->n; i++)
		slice_free(&t->v[i]);
	free(t->v);
	free(t);
}

/* What n's run came to, or NULL when its tool did not run. */
static const char *
run_result(const struct node *n)
{
	if (n->w == NULL || n->w->start_ns == 0)
		return NULL;
	switch ((enum node_state)n->st) {
	case N_DONE: return n->outcome == O_RAN ? "ran" : NULL;
	case N_FAILED: return "failed";
	case N_CANCELLED: return "cancelled";
	default: return NULL;
	}
}

static char *
dup_short(const char *s)
{
	return s == NULL ? NULL : strndup(s, TIMELINE_MAX_REASON);
}

/* The URLs n's run needed (its result's, or those handed over so far). */
static void
slice_needs(struct tl_slice *s, const struct node *n)
{
	const struct need_dep *v = n->nrneeds > 0 ? n->rneeds : n->needs;
	uint32_t nv = n->nrneeds > 0 ? n->nrneeds : n->nneeds;

	if (nv > TIMELINE_MAX_NEEDS)
		nv = TIMELINE_MAX_NEEDS;
	if (nv == 0 || (s->needs = calloc(nv, sizeof *s->needs)) == NULL)
		return;
	for (uint32_t i = 0; i < nv; i++)
		if ((s->needs[s->nneeds] = strdup(v[i].url)) != NULL)
			s->nneeds++;
}

void
timeline_step(struct timeline *t, const struct node *n, int64_t now_ns)
{
	const char *result = run_result(n);
	struct tl_slice *s;

	if (t == NULL || result == NULL)
		return;
	if (t->n >= TIMELINE_MAX_SLICES) {
		t->dropped++;
		return;
	}
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct tl_slice *nv = realloc(t->v, ncap * sizeof *nv);
		if (nv == NULL) {
			t->dropped++;
			return;
		}
		t->v = nv;
		t->cap = ncap;
	}
	s = &t->v[t->n];
	memset(s, 0, sizeof *s);
	s->url = strdup(n->ks->url);
	s->reason = dup_short(n->reason ? n->reason : "");
	s->error = dup_short(n->st == N_FAILED && n->error ? n->error : "");
	s->machine = strdup(n->w->machine);
	if (s->url == NULL || s->reason == NULL || s->error == NULL || s->machine == NULL) {
		slice_free(s);
		t->dropped++;
		return;
	}
	slice_needs(s, n);
	s->result = result;
	s->t0 = n->w->start_ns;
	s->t1 = now_ns > s->t0 ? now_ns : s->t0;
	/* unknown end (a run that never reached its completion): all slot */
	s->tslot = n->w->end_ns >= s->t0 && n->w->end_ns <= s->t1 ? n->w->end_ns : s->t1;
	s->tool_ns = n->duration_ns;
	s->nwaits = n->w->nwaits;
	memcpy(s->waits, n->w->waits, sizeof s->waits);
	t->n++;
}

/* ---- lanes ---------------------------------------------------------------- */

static int
by_machine_start(const void *a, const void *b, void *arg)
{
	const struct timeline *t = arg;
	const struct tl_slice *x = &t->v[*(const size_t *)a];
	const struct tl_slice *y = &t->v[*(const size_t *)b];
	int c = strcmp(x->machine, y->machine);

	if (c != 0)
		return c;
	return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static int
by_publish_start(const void *a, const void *b, void *arg)
{
	const struct timeline *t = arg;
	const struct tl_slice *x = &t->v[*(const size_t *)a];
	const struct tl_slice *y = &t->v[*(const size_t *)b];

	return x->tslot < y->tslot ? -1 : x->tslot > y->tslot;
}

/* Give every slice a lane: tid 1.. for this machine, 1000 * k + 1.. for
 * the k-th agent. *order gets the slices by machine, then start. Returns
 * 0 or KILN_ENOMEM. */
static int
lanes_assign(struct timeline *t, size_t **order)
{
	int64_t *ends = NULL;
	size_t nends = 0, k = 0;
	size_t *o = malloc((t->n ? t->n : 1) * sizeof *o);

	if (o == NULL || (ends = malloc((t->n ? t->n : 1) * sizeof *ends)) == NULL) {
		free(o);
		return KILN_ENOMEM;
	}
	for (size_t i = 0; i < t->n; i++)
		o[i] = i;
	qsort_r(o, t->n, sizeof *o, by_machine_start, t);
	for (size_t i = 0; i < t->n; i++) {
		struct tl_slice *s = &t->v[o[i]];
		size_t lane = 0;
		if (i == 0 && s->machine[0] != '\0')
			k = 1;       /* agents only: tids from 1001 all the same */
		if (i > 0 && strcmp(t->v[o[i - 1]].machine, s->machine) != 0) {
			nends = 0;   /* the next machine: lanes start again */
			k++;
		}
		while (lane < nends && ends[lane] > s->t0)
			lane++;
		if (lane == nends)
			nends++;
		ends[lane] = s->tslot;
		s->lane = (uint32_t)(k * 1000 + lane + 1);
	}
	/* publishing, in order of its start (on any machine: outputs are
	 * published here) */
	qsort_r(o, t->n, sizeof *o, by_publish_start, t);
	nends = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct tl_slice *s = &t->v[o[i]];
		size_t lane = 0;
		if (s->t1 <= s->tslot)
			continue;
		while (lane < nends && ends[lane] > s->tslot)
			lane++;
		if (lane == nends)
			nends++;
		ends[lane] = s->t1;
		s->publane = (uint32_t)(TIMELINE_PUBLISH_TID + lane);
	}
	qsort_r(o, t->n, sizeof *o, by_machine_start, t);
	free(ends);
	*order = o;
	return 0;
}

/* ---- JSON ----------------------------------------------------------------- */

/* s as a JSON string under kiln's one policy (kiln_json.h): a URL, reason
 * or tool message that is not UTF-8 (or was cut inside a character at 240
 * bytes) gets U+FFFD, so the trace always parses. */
static void
json_str(FILE *f, const char *s)
{
	int replaced = 0;
	json_t *j = kiln_json_string(s, &replaced);
	char *text = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	fputs(text != NULL ? text : "\"\"", f);   /* no memory: an empty name */
	free(text);
	json_decref(j);
}

static double
us(const struct timeline *t, int64_t ns)
{
	return ns > t->start_ns ? (double)(ns - t->start_ns) / 1000.0 : 0.0;
}

static void
thread_name(FILE *f, uint32_t tid, const char *machine, uint32_t lane)
{
	fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\","
	        "\"args\":{\"name\":", tid);
	if (tid == 0) {
		json_str(f, "build");
	} else if (tid >= TIMELINE_PUBLISH_TID) {
		char name[64];
		snprintf(name, sizeof name, "publishing %u", tid - TIMELINE_PUBLISH_TID + 1);
		json_str(f, name);
	} else {
		char name[128];
		snprintf(name, sizeof name, "%s%sslot %u", machine,
		         machine[0] ? " " : "", lane);
		json_str(f, name);
	}
	fprintf(f, "}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":"
	        "\"thread_sort_index\",\"args\":{\"sort_index\":%u}}", tid, tid);
}

static void
write_slice(FILE *f, const struct timeline *t, const struct tl_slice *s)
{
	fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"step\",\"name\":",
	        s->lane);
	json_str(f, s->url);
	fprintf(f, ",\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"url\":", us(t, s->t0),
	        (double)(s->tslot - s->t0) / 1000.0);
	json_str(f, s->url);
	fprintf(f, ",\"decision\":\"%s\",\"reason\":", s->result);
	json_str(f, s->reason);
	fprintf(f, ",\"tool_ms\":%.3f,\"publish_ms\":%.3f", (double)s->tool_ns / 1e6,
	        (double)(s->t1 - s->tslot) / 1e6);
	if (s->machine[0]) {
		fputs(",\"machine\":", f);
		json_str(f, s->machine);
	}
	if (s->error[0]) {
		fputs(",\"error\":", f);
		json_str(f, s->error);
	}
	if (s->nneeds > 0) {
		fputs(",\"needs\":[", f);
		for (uint32_t i = 0; i < s->nneeds; i++) {
			if (i)
				fputc(',', f);
			json_str(f, s->needs[i]);
		}
		fputc(']', f);
	}
	fputs("}}", f);
	for (uint8_t i = 0; i < s->nwaits; i++) {
		fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"need\","
		        "\"name\":\"waiting on kiln need\",\"ts\":%.3f,\"dur\":%.3f,"
		        "\"args\":{\"url\":", s->lane, us(t, s->waits[i].t0),
		        (double)(s->waits[i].t1 - s->waits[i].t0) / 1000.0);
		json_str(f, s->url);
		fputs("}}", f);
	}
	if (s->publane != 0) {
		fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"cat\":\"publish\","
		        "\"name\":", s->publane);
		json_str(f, s->url);
		fprintf(f, ",\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"url\":",
		        us(t, s->tslot), (double)(s->t1 - s->tslot) / 1000.0);
		json_str(f, s->url);
		fprintf(f, ",\"decision\":\"%s\"}}", s->result);
	}
}

/* The whole file on f. */
static void
write_json(FILE *f, const struct timeline *t, const size_t *order,
           const Kiln__BuildFinished *bf, int64_t end_ns)
{
	char name[128];

	snprintf(name, sizeof name, "kiln build %llu (%s)",
	         (unsigned long long)t->id, t->profile);
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
	fputs("{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\","
	      "\"args\":{\"name\":", f);
	json_str(f, name);
	fputs("}}", f);
	thread_name(f, 0, "", 0);
	/* a machine's lanes first appear in increasing order (lanes_assign) */
	uint32_t npub = 0;
	for (size_t i = 0, named = 0; i < t->n; i++) {
		const struct tl_slice *s = &t->v[order[i]];
		if (s->lane > named) {
			thread_name(f, s->lane, s->machine, s->lane % 1000);
			named = s->lane;
		}
		if (s->publane != 0 && s->publane - TIMELINE_PUBLISH_TID + 1 > npub)
			npub = s->publane - TIMELINE_PUBLISH_TID + 1;
	}
	for (uint32_t i = 0; i < npub; i++)
		thread_name(f, TIMELINE_PUBLISH_TID + i, "", 0);
	fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"cat\":\"build\",\"name\":");
	json_str(f, name);
	fprintf(f, ",\"ts\":0,\"dur\":%.3f,\"args\":{\"build\":%llu,\"profile\":",
	        us(t, end_ns), (unsigned long long)t->id);
	json_str(f, t->profile);
	fprintf(f, ",\"total\":%u,\"ran\":%u,\"reused\":%u,\"failed\":%u,"
	        "\"skipped\":%u,\"cancelled\":%u,\"slices_dropped\":%u,"
	        "\"start_unix_ns\":%lld,\"error\":", bf->total, bf->ran, bf->reused,
	        bf->failed, bf->skipped, bf->cancelled, t->dropped,
	        (long long)t->start_wall_ns);
	json_str(f, bf->error ? bf->error : "");
	fputs("}}", f);
	for (size_t i = 0; i < t->n; i++)
		write_slice(f, t, &t->v[order[i]]);
	fputs("\n]}\n", f);
}

/* ---- the file ------------------------------------------------------------- */

/* "<digits>.json": a trace's name. */
static int
is_trace_name(const char *name)
{
	size_t nd = strspn(name, "0123456789");

	return nd > 0 && strcmp(name + nd, ".json") == 0;
}

struct trace_file { char name[64]; struct timespec mtime; };

static int
newest_first(const void *a, const void *b)
{
	const struct timespec *x = &((const struct trace_file *)a)->mtime;
	const struct timespec *y = &((const struct trace_file *)b)->mtime;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? 1 : -1;
	return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/* Whether name is a temp file of another daemon than this one (left by
 * a crash: its pid is gone, or another process's now): ".tmp-<pid>-..."
 * or ".tmp-last-<pid>-...". This daemon's are other builds' in progress. */
static int
stale_temp(const char *name)
{
	const char *p = name + 5;   /* after ".tmp-" */
	char *end;
	long pid;

	if (strncmp(p, "last-", 5) == 0)
		p += 5;
	pid = strtol(p, &end, 10);
	return end == p || *end != '-' || pid != (long)getpid();
}

/* Remove all but the newest TIMELINE_KEEP traces (keep, just written,
 * stays whatever the clock says) and temp files a crash left (the
 * folder's flock held). */
static void
traces_prune(int dirfd, const char *keep)
{
	struct trace_file *v = NULL;
	size_t n = 0, cap = 0, kept = 1;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;
	struct stat st;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			if (stale_temp(de->d_name))
				unlinkat(dirfd, de->d_name, 0);
			continue;
		}
		if (!is_trace_name(de->d_name) || strcmp(de->d_name, keep) == 0 ||
		    strlen(de->d_name) >= sizeof v->name ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			struct trace_file *nv = realloc(v, ncap * sizeof *nv);
			if (nv == NULL)
				break;
			v = nv;
			cap = ncap;
		}
		memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1);
		v[n++].mtime = st.st_mtim;
	}
	closedir(d);
	if (n > 0)
		qsort(v, n, sizeof *v, newest_first);
	for (size_t i = 0; i < n; i++)
		if (kept++ >= TIMELINE_KEEP)
			unlinkat(dirfd, v[i].name, 0);
	free(v);
}

/* traces/last -> name, replaced atomically (the folder's flock held; the
 * temp link is the build's own all the same). */
static void
last_point(int dirfd, const char *name)
{
	char tmp[96];

	snprintf(tmp, sizeof tmp, ".tmp-last-%ld-%s", (long)getpid(), name);
	unlinkat(dirfd, tmp, 0);
	if (symlinkat(name, dirfd, tmp) == 0 && renameat(dirfd, tmp, dirfd, "last") != 0)
		unlinkat(dirfd, tmp, 0);
}

static int
traces_dir(int rootfd)
{
	if (mkdirat(rootfd, ".kiln", 0755) != 0 && errno != EEXIST)
		return -1;
	if (mkdirat(rootfd, TIMELINE_DIR, 0755) != 0 && errno != EEXIST)
		return -1;
	return openat(rootfd, TIMELINE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Rename the written temp file tmp to name, point traces/last at it and
 * prune, one build at a time (an flock of the folder: a build's prune
 * then never sees another's trace half placed). 0 or a KILN_E* code. */
static int
trace_place(int dirfd, const char *tmp, const char *name)
{
	int lockfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rv = 0;

	if (lockfd < 0)
		return kiln_err_from_errno(errno);
	/* a file system without flock (ENOLCK, EOPNOTSUPP): placed all
	 * the same, as before there was a lock */
	while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR)
		;
	/* its mtime now: the newest by mtime is the one linked last */
	if (utimensat(dirfd, tmp, NULL, 0) != 0 || renameat(dirfd, tmp, dirfd, name) != 0) {
		rv = kiln_err_from_errno(errno);
	} else {
		last_point(dirfd, name);
		traces_prune(dirfd, name);
	}
	close(lockfd);   /* and the lock with it */
	return rv;
}

uint64_t
timeline_last_id(int rootfd)
{
	int fd = openat(rootfd, TIMELINE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;
	uint64_t max = 0;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		unsigned long long id;
		if (!is_trace_name(de->d_name) || strlen(de->d_name) > 25)
			continue;
		id = strtoull(de->d_name, NULL, 10);
		if (id > max && id < UINT64_MAX / 2)
			max = id;
	}
	closedir(d);
	return max;
}

int
timeline_write(int rootfd, struct timeline *t, const Kiln__BuildFinished *bf)
{
	char name[64], tmp[96];
	size_t *order = NULL;
	FILE *f = NULL;
	int dirfd, fd, rv;

	if ((dirfd = traces_dir(rootfd)) < 0) {
		timeline_free(t);
		return kiln_err_from_errno(errno);
	}
	snprintf(name, sizeof name, "%llu.json", (unsigned long long)t->id);
	snprintf(tmp, sizeof tmp, ".tmp-%ld-%s", (long)getpid(), name);
	if ((rv = lanes_assign(t, &order)) != 0)
		goto fail;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		rv = kiln_err_from_errno(errno);
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	write_json(f, t, order, bf, kiln_mono_ns());
	if (fflush(f) != 0 || ferror(f)) {
		rv = kiln_err_from_errno(errno);
		fclose(f);
		goto fail;
	}
	if (fclose(f) != 0) {
		rv = kiln_err_from_errno(errno);
		goto fail;
	}
	rv = trace_place(dirfd, tmp, name);
fail:
	if (rv != 0)
		unlinkat(dirfd, tmp, 0);
	close(dirfd);
	free(order);
	timeline_free(t);
	return rv;
}
