/* publish.c — finishing a step after its tool ended: its log into the
 * store, what the run read (its depfile and trace, discover.c) and the
 * check that it read what its key says (verify.c); then each output is
 * moved into the store (a rename: the scratch folder is on the project's
 * filesystem: the blob publish), materialized into build/<profile>/
 * (publish_outputs.c), and only then are its action result, index and
 * decision records queued for the next batch commit (publish_records.c).
 * A failure records its decision and keeps its log.
 *
 * Threads: the worker holding the node (a completion taken from the
 * reaper), unlocked. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_int.h"
#include "decide.h"
#include "discover.h"
#include "folder_out.h"
#include "need.h"
#include "publish.h"
#include "remote.h"
#include "scratch.h"
#include "step.h"

/* What a step's log keeps of a longer one: this much of its head and
 * of its tail. A tool printing a gigabyte must not put a gigabyte into
 * the store with every run; what matters is how it began and ended. */
#define LOG_KEEP ((off_t)1 << 20)

/* Cut the log in fd (size bytes, the tool gone) to its first and last
 * LOG_KEEP bytes around a line saying so. Best effort: a log that cannot
 * be cut is kept whole. */
static void
log_cut(int fd, off_t size)
{
	char mark[160];
	char *tail = malloc((size_t)LOG_KEEP);
	int len;

	if (tail == NULL || pread(fd, tail, (size_t)LOG_KEEP, size - LOG_KEEP) != LOG_KEEP) {
		free(tail);
		return;
	}
	len = snprintf(mark, sizeof mark, "\n[kiln: %lld bytes of the tool's output cut "
	               "here; the log keeps its first and last %lld bytes]\n",
	               (long long)(size - 2 * LOG_KEEP), (long long)LOG_KEEP);
	if (ftruncate(fd, LOG_KEEP) == 0 &&
	    pwrite(fd, mark, (size_t)len, LOG_KEEP) == len &&
	    pwrite(fd, tail, (size_t)LOG_KEEP, LOG_KEEP + len) == LOG_KEEP) {
		/* cut: the file holds head, mark, tail */
	}
	free(tail);
}

/* Move the log into the store (kept for failures too: `kiln log`), cut
 * to its head and tail when long; an empty one stays open for the
 * folder's next run. */
static void
log_publish(struct engine *e, struct node *n, const char *logp)
{
	struct stat st;

	n->w->has_log = 0;
	if (n->w->log_fd >= 0 && fstat(n->w->log_fd, &st) == 0 && st.st_size > 2 * LOG_KEEP)
		log_cut(n->w->log_fd, st.st_size);
	if (n->w->log_fd >= 0 && (fstat(n->w->log_fd, &st) != 0 || st.st_size > 0)) {
		if (kiln_store_put_move(e->s, logp, &n->w->log_id) == 0)
			n->w->has_log = 1;
		close(n->w->log_fd);
		n->w->log_fd = -1;
	}
}

static const char *
signal_name(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

/* Queue n's action result (its outputs, the files it discovered with what
 * they held after the run, the steps it needed, its log) under
 * n->w->new_key, beside the key's other results (action_results.c).
 * 0 or KILN_ENOMEM. */
static int
action_result_put(struct engine *e, struct node *n)
{
	Kiln__ActionResult ar = KILN__ACTION_RESULT__INIT;
	size_t no = n->ks->noutputs, nd = n->ndisc;
	struct pb_outputs *po = step_outputs_pb(n, 0);
	/* most steps discover nothing: no allocations for them */
	Kiln__FileDep *fdv = nd ? calloc(nd, sizeof *fdv) : NULL;
	Kiln__FileDep **fdp = nd ? calloc(nd, sizeof *fdp) : NULL;
	kiln_id *fdh = nd ? calloc(nd, sizeof *fdh) : NULL;
	Kiln__UrlDep **udp = NULL;
	int rv = KILN_ENOMEM;

	if (po == NULL ||
	    (nd > 0 && (fdv == NULL || fdp == NULL || fdh == NULL)) ||
	    need_result_pb(n, &udp, &ar.n_needs) != 0)
		goto fail;
	ar.outputs = po->p;
	ar.n_outputs = no;
	for (size_t i = 0; i < nd; i++) {
		kiln__file_dep__init(&fdv[i]);
		fdv[i].path = n->disc[i];
		fdv[i].source = i < n->ndisc_depfile ? KILN__FILE_DEP__SOURCE__DEPFILE
		                : KILN__FILE_DEP__SOURCE__TRACE;
		/* a missing file keeps an empty hash: "must still be missing".
		 * The hash is the one run_verify took after the run. */
		if (n->w->disc_seen != NULL && !n->w->disc_seen[i].missing) {
			fdh[i] = n->w->disc_seen[i].h;
			fdv[i].hash.data = fdh[i].b;
			fdv[i].hash.len = 16;
		}
		fdp[i] = &fdv[i];
	}
	ar.files = fdp;
	ar.n_files = nd;
	ar.needs = udp;
	ar.traced = n->traced;
	ar.warnings = n->warnings;
	ar.n_warnings = step_nwarnings(n);
	if (n->w->has_log) {
		ar.log.data = n->w->log_id.b;
		ar.log.len = 16;
	}
	ar.duration_ns = n->duration_ns;
	rv = results_put(e, &n->w->new_key, &ar);
fail:
	free(udp);
	free(fdv);
	free(fdp);
	free(fdh);
	free(po);
	return rv;
}

/* The testing aids' waits (engine.h: hold_finish_ms, hold_place_ms). */
static void
hold_ms(unsigned ms)
{
	struct timespec hold = {ms / 1000, (long)(ms % 1000) * 1000000};

	if (ms > 0)
		nanosleep(&hold, NULL);
}

/* Whether output i of n is in the store already: an agent's. */
static int
landed(const struct node *n, size_t i)
{
	return n->w->landed != NULL && n->w->landed[i].ok;
}

/* Whether an output of n is missing from its scratch folder dir (a file
 * that is not a regular file, a folder that is not a folder): 1 with
 * n->error saying which, else 0. */
static int
outputs_missing(struct engine *e, struct node *n, const char *dir)
{
	for (size_t i = 0; i < n->ks->noutputs; i++) {
		char out[PATH_MAX * 3];
		struct stat st;
		int folder = n->ks->outputs[i].folder;
		if (landed(n, i))
			continue;
		snprintf(out, sizeof out, "%s/%s", dir, n->ks->outputs[i].file);
		if (lstat(out, &st) == 0 && (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
			continue;
		if (folder)
			set_error(n, "%s: the tool did not leave its folder output '%s' (%s/, "
			          "expected at %s)", n->ks->url, n->ks->outputs[i].name,
			          n->ks->outputs[i].file, out + strlen(e->root) + 1);
		else
			set_error(n, "%s: the tool did not write its output '%s' "
			          "(%s, expected at %s)", n->ks->url, n->ks->outputs[i].name,
			          n->ks->outputs[i].file, out + strlen(e->root) + 1);
		return 1;
	}
	return 0;
}

/* How many times a step's outputs are put again when gc takes one before
 * it reaches build/, before the step is run again instead. */
#define REPUT_TRIES 8

/* Put n's outputs into build/ (materialize_all). No record names a blob
 * between its put and the commit of its step's records, so gc (from any
 * process, with a short --grace) may take it before it is copied into
 * build/: it is then put again from the file the tool wrote, held open
 * since before its put (held[i]; -1 for a folder or an agent's output),
 * and the copy tried again. KILN_ENOTFOUND when that cannot be done (or
 * gc kept winning): the step is run again. */
static int
outputs_place(struct engine *e, struct node *n, const int *held)
{
	for (int tries = 0;; tries++) {
		int rv = materialize_all(e, n);
		if (rv != KILN_ENOTFOUND || tries == REPUT_TRIES)
			return rv;
		free(n->error);
		n->error = NULL;
		for (size_t i = 0; i < n->ks->noutputs; i++) {
			kiln_id id;
			if (kiln_store_has(e->s, &n->outs[i].id, NULL) == 0)
				continue;
			if (held[i] < 0 || lseek(held[i], 0, SEEK_SET) != 0)
				return KILN_ENOTFOUND;
			if ((rv = kiln_store_put_fd(e->s, held[i], &id)) != 0) {
				set_error(n, "%s: cannot store output '%s' again: %s", n->ks->url,
				          n->ks->outputs[i].name, kiln_strerror(rv));
				return rv == KILN_ENOTFOUND ? KILN_EIO : rv;
			}
			if (!id_eq(&id, &n->outs[i].id))
				return KILN_ENOTFOUND;   /* not the bytes put: run it */
		}
	}
}

enum finish_result
step_finish(struct engine *e, struct graph *g, struct node *n)
{
	char dir[PATH_MAX], logp[PATH_MAX + 16], tail[2048] = "";
	/* the trace's root process: on an agent, its pid there */
	pid_t pid = n->w->machine[0] != '\0' ? n->w->agent_pid : n->w->pid;
	enum finish_result res = FINISH_DONE;
	int *held = NULL;   /* each file output, open since before its put */
	int rv;

	/* the lengths were checked when the run started (paths_make) */
	scratch_path(e, n->w->scratch, "", 1, dir, sizeof dir);
	scratch_path(e, n->w->scratch, ".log", 1, logp, sizeof logp);
	n->duration_ns = (uint64_t)n->w->res.wall_ns;
	__atomic_store_n(&n->w->pid, 0, __ATOMIC_RELEASE);   /* engine_cancel reads it */
	/* the last lines are for the error message: only a failure reads them */
	if (n->w->log_fd >= 0 && (!n->w->res.exited || n->w->res.status != 0))
		spawn_log_tail(n->w->log_fd, 8, tail, sizeof tail);
	log_publish(e, n, logp);
	if (!n->w->res.exited || n->w->res.status != 0) {
		if (n->w->res.timed_out && n->w->timeout != NULL)
			set_error(n, "%s: the tool ran longer than its timeout of %s (tool "
			          "'%s', %s:%d)%s%s", n->ks->url, n->w->timeout->text,
			          n->ks->tool->name, n->w->timeout->loc.file,
			          n->w->timeout->loc.line,
			          tail[0] ? "; its last lines:\n" : "", tail);
		else if (n->w->res.exited)
			set_error(n, "%s: the tool exited with status %d%s%s", n->ks->url,
			          n->w->res.status, tail[0] ? "; its last lines:\n" : "", tail);
		else
			set_error(n, "%s: the tool was killed by signal %d (SIG%s)%s%s",
			          n->ks->url, n->w->res.status, signal_name(n->w->res.status),
			          tail[0] ? "; its last lines:\n" : "", tail);
		res = FINISH_FAILED;
		goto fail;
	}
	/* what it read and wrote, before anything it made is published */
	if (step_deps_read(e, g, n, pid, dir) != 0) {
		res = FINISH_FAILED;
		goto fail;
	}
	/* and that it read what its key says (verify.c) */
	hold_ms(e->cfg.hold_finish_ms);
	switch (run_verify(e, g, n, tail, sizeof tail)) {
	case VERIFY_HELD:
		break;
	case VERIFY_CHANGED:
		free(n->reason);
		n->reason = strdup(tail);
		res = FINISH_AGAIN;
		goto fail;
	case VERIFY_FAILED:
		set_error(n, "%s: checking its inputs after the run: %s", n->ks->url, tail);
		res = FINISH_FAILED;
		goto fail;
	}
	if ((held = malloc((n->ks->noutputs + 1) * sizeof *held)) == NULL) {
		set_error(n, "%s: out of memory", n->ks->url);
		res = FINISH_FAILED;
		goto fail;
	}
	for (size_t i = 0; i < n->ks->noutputs; i++)
		held[i] = -1;
	/* every output there before any goes into the store: a run that left
	 * one of two stores nothing (its other would be a blob no record
	 * names, kept until gc) */
	if (outputs_missing(e, n, dir))
		res = FINISH_FAILED;
	/* folders first: one can still be refused for what it holds */
	for (size_t i = 0; i < n->ks->noutputs && res == FINISH_DONE; i++) {
		if (n->ks->outputs[i].folder && !landed(n, i) && folder_publish(e, n, i, dir) != 0)
			res = FINISH_FAILED;
	}
	for (size_t i = 0; i < n->ks->noutputs && res == FINISH_DONE; i++) {
		char out[PATH_MAX * 3];
		struct stat st;
		if (landed(n, i)) {
			/* in the store already: an agent's (agent_jobs.c) */
			n->outs[i].id = n->w->landed[i].id;
			n->outs[i].size = n->w->landed[i].size;
			continue;
		}
		if (n->ks->outputs[i].folder)
			continue;
		snprintf(out, sizeof out, "%s/%s", dir, n->ks->outputs[i].file);
		if (lstat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
			outputs_missing(e, n, dir);   /* it went meanwhile: say so */
			res = FINISH_FAILED;
			break;
		}
		n->outs[i].size = (uint64_t)st.st_size;
		/* its bytes, should gc take the blob before build/ has them */
		held[i] = open(out, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if ((rv = kiln_store_put_move(e->s, out, &n->outs[i].id)) != 0) {
			set_error(n, "%s: cannot store output '%s': %s", n->ks->url,
			          n->ks->outputs[i].name, kiln_strerror(rv));
			res = FINISH_FAILED;
		}
	}
	if (res == FINISH_DONE)
		hold_ms(e->cfg.hold_place_ms);   /* tests only: gc's window */
	if (res == FINISH_DONE && (rv = outputs_place(e, n, held)) != 0) {
		res = rv == KILN_ENOTFOUND ? FINISH_AGAIN : FINISH_FAILED;
		if (res == FINISH_AGAIN) {
			free(n->error);
			n->error = NULL;
			free(n->reason);
			n->reason = strdup("gc removed an output from the store before it "
			                   "reached build/");
		}
	}
	if (res == FINISH_DONE && action_result_put(e, n) != 0) {
		set_error(n, "%s: out of memory", n->ks->url);
		res = FINISH_FAILED;
	}
	if (res == FINISH_DONE) {
		n->key = n->w->new_key;
		n->have = 1;
		n->outcome = O_RAN;
		int qrv = outputs_record(e, g, n);
		/* its needs become the result's before the record lists them */
		need_run_commit(n, 1);
		if (qrv == 0)
			qrv = record_put(e, g, n, KILN__STEP_RECORD__DECISION__RAN);
		n->rec_failed = qrv != 0;   /* unrecorded: node_finish loses it */
		n->send_event = 1;
		/* shared with the other machines in the background, once it is
		 * this machine's result */
		if (qrv == 0)
			remote_upload(e, n);
	}
fail:
	for (size_t i = 0; held != NULL && i < n->ks->noutputs; i++)
		if (held[i] >= 0)
			close(held[i]);
	free(held);
	if (res != FINISH_DONE)
		need_run_commit(n, 0);
	if (n->ks->tool->depfile) {
		char dep[PATH_MAX + 16];
		scratch_path(e, n->w->scratch, ".d", 1, dep, sizeof dep);
		unlink(dep);
	}
	/* outputs were moved out: the folder is usually empty and is reused */
	scratch_give(e, n->w->scratch, n->w->log_fd);
	n->w->log_fd = -1;
	if (res == FINISH_DONE) {   /* a failure keeps them for step_record_failure */
		prev_drop(n);
		key_parts_free(&n->w->parts);
	}
	return res;
}

void
step_record_failure(struct engine *e, struct graph *g, struct node *n)
{
	n->have = 0;
	n->outcome = O_FAILED;
	if (n->w == NULL)   /* failed before deciding (no memory for it) */
		return;
	if (n->w->parts.n > 0) {
		if (n->w->prev == NULL)
			prev_load(e, g, n);
		record_put(e, g, n, KILN__STEP_RECORD__DECISION__FAILED);
	}
	prev_drop(n);
	key_parts_free(&n->w->parts);
}

void
step_forget(struct node *n)
{
	n->have = 0;
	node_work_free(n);
}

