/* selfwrite.c — project files the build itself changed (see selfwrite.h).
 *
 * A small table: a handful of tools misbehave at a time, and each entry
 * is replaced by the next write of its file, so SELFWRITE_MAX entries
 * (the oldest goes first) are plenty. An entry is looked up on every
 * change the watch reports while the table is not empty: a string compare
 * per entry, and a stat only for a file the table names. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine_int.h"
#include "decide.h"
#include "step.h"
#include "selfwrite.h"

#define SELFWRITE_MAX 64

/* Declared inputs of one step at most, for its run to hold back their
 * changes (selfwrite_run_begin). */
#define SELFWRITE_RUN_INPUTS 64

/* What the next change of a file changes: a write moves the times (ctime
 * even where a tool resets mtime), a save by rename the inode. */
struct fstate {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

/* A declared input of a running traced tool (selfwrite_run_begin). */
struct held {
	const char *path;   /* the node's own string: lives while it runs */
	const struct node *n;
};

struct selfwrites {
	pthread_mutex_t mu;
	char *paths[SELFWRITE_MAX];
	struct fstate st[SELFWRITE_MAX];
	unsigned n, next;   /* entries used; the one replaced next when full */
	struct held *held;  /* the running tools' inputs */
	size_t nheld, capheld;
	char **deferred;    /* their changes not reported yet */
	int *complete;      /* each one's kind (a save that is over) */
	size_t ndeferred, capdeferred;
};

int
selfwrite_new(struct selfwrites **sp)
{
	struct selfwrites *s = calloc(1, sizeof *s);

	*sp = NULL;
	if (s == NULL)
		return KILN_ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	*sp = s;
	return 0;
}

void
selfwrite_free(struct selfwrites *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; i < s->n; i++)
		free(s->paths[i]);
	for (size_t i = 0; i < s->ndeferred; i++)
		free(s->deferred[i]);
	free(s->deferred);
	free(s->complete);
	free(s->held);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* The state of the project file relpath. 0, or -1 (gone, unreadable). */
static int
fstate_of(const struct engine *e, const char *relpath, struct fstate *f)
{
	char full[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(full, sizeof full, "%s/%s", e->root, relpath) >= sizeof full ||
	    lstat(full, &st) != 0)
		return -1;
	memset(f, 0, sizeof *f);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime = st.st_mtim;
	f->ctime = st.st_ctim;
	return 0;
}

static int
fstate_eq(const struct fstate *a, const struct fstate *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Index of relpath in s, or s->n. Lock held. */
static unsigned
entry_find(const struct selfwrites *s, const char *relpath)
{
	unsigned i;

	for (i = 0; i < s->n && strcmp(s->paths[i], relpath) != 0; i++)
		;
	return i;
}

/* Remember relpath in state f (no memory: not remembered, and its
 * changes are reported as edits, as before). */
static void
entry_put(struct selfwrites *s, const char *relpath, const struct fstate *f)
{
	unsigned i;
	char *copy;

	pthread_mutex_lock(&s->mu);
	if ((i = entry_find(s, relpath)) == s->n) {
		if ((copy = strdup(relpath)) == NULL)
			goto out;
		if (s->n < SELFWRITE_MAX) {
			i = s->n++;
		} else {
			i = s->next;
			s->next = (s->next + 1) % SELFWRITE_MAX;
			free(s->paths[i]);
		}
		s->paths[i] = copy;
	}
	s->st[i] = *f;
out:
	pthread_mutex_unlock(&s->mu);
}

void
selfwrite_note(struct engine *e, struct node *n, const char *relpath)
{
	struct fstate f;

	selfwrite_forget(n);
	if (relpath == NULL || e->selfw == NULL)
		return;
	/* (no memory for the name: the step fails as ever, but is not
	 * known for a writer, and may loop as before) */
	if ((n->selfw_path = strdup(relpath)) == NULL)
		return;
	/* the tool has ended: its writes are done, the state is final */
	if (fstate_of(e, relpath, &f) == 0)
		entry_put(e->selfw, relpath, &f);
}

int
selfwrite_is(struct engine *e, const char *relpath)
{
	struct selfwrites *s = e->selfw;
	struct fstate now, then;
	unsigned i;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (s->n == 0 || (i = entry_find(s, relpath)) == s->n) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	then = s->st[i];
	pthread_mutex_unlock(&s->mu);
	return fstate_of(e, relpath, &now) == 0 && fstate_eq(&now, &then);
}

void
selfwrite_settle(struct engine *e, struct graph *g, struct node *n)
{
	if (n->selfw_path == NULL)
		return;
	/* the file table may hold its state from before the run */
	filestate_forget(e->fs, n->selfw_path);
	n->selfw_have = step_quick_key(e, g, n, &n->selfw_quick) == 0;
}

int
selfwrite_unchanged(const struct node *n, const kiln_id *quick)
{
	return n->selfw_path != NULL && n->selfw_have && id_eq(quick, &n->selfw_quick);
}

void
selfwrite_forget(struct node *n)
{
	free(n->selfw_path);
	n->selfw_path = NULL;
	n->selfw_have = 0;
}

/* ---- changes of a running tool's inputs ------------------------------- */

/* Whether a running tool reads relpath (lock held). */
static int
held_by_any(const struct selfwrites *s, const char *relpath)
{
	for (size_t i = 0; i < s->nheld; i++)
		if (strcmp(s->held[i].path, relpath) == 0)
			return 1;
	return 0;
}

void
selfwrite_run_begin(struct engine *e, const struct node *n)
{
	struct selfwrites *s = e->selfw;
	size_t want = n->ks->ninputs;

	/* an untraced tool's writes are never known for its own: its
	 * inputs' changes go out at once, as before; so do those of a step
	 * of many inputs (an atlas of 5,000 sources is never looked through
	 * on every change) */
	if (s == NULL || want == 0 || want > SELFWRITE_RUN_INPUTS ||
	    e->trace_shim[0] == '\0' || n->ks->tool->notrace)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->nheld + want > s->capheld) {
		size_t ncap = (s->nheld + want) * 2;
		struct held *nv = realloc(s->held, ncap * sizeof *nv);
		if (nv == NULL)
			goto out;   /* not held: reported at once */
		s->held = nv;
		s->capheld = ncap;
	}
	for (size_t i = 0; i < want; i++)
		s->held[s->nheld++] = (struct held){n->ks->inputs[i], n};
out:
	pthread_mutex_unlock(&s->mu);
}

int
selfwrite_defer(struct engine *e, const char *relpath, int complete)
{
	struct selfwrites *s = e->selfw;
	size_t i;
	int rv = 0;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (s->nheld == 0 || !held_by_any(s, relpath))
		goto out;
	for (i = 0; i < s->ndeferred && strcmp(s->deferred[i], relpath) != 0; i++)
		;
	if (i < s->ndeferred) {
		s->complete[i] |= complete;
		rv = 1;
		goto out;
	}
	if (s->ndeferred == s->capdeferred) {
		size_t ncap = s->capdeferred ? s->capdeferred * 2 : 16;
		char **nv = realloc(s->deferred, ncap * sizeof *nv);
		int *nc;
		if (nv == NULL)
			goto out;
		s->deferred = nv;
		if ((nc = realloc(s->complete, ncap * sizeof *nc)) == NULL)
			goto out;
		s->complete = nc;
		s->capdeferred = ncap;
	}
	if ((s->deferred[s->ndeferred] = strdup(relpath)) == NULL)
		goto out;   /* no memory: reported at once */
	s->complete[s->ndeferred++] = complete;
	rv = 1;
out:
	pthread_mutex_unlock(&s->mu);
	return rv;
}

void
selfwrite_run_end(struct engine *e, const struct node *n)
{
	struct selfwrites *s = e->selfw;
	char **out = NULL;
	int *kind = NULL;
	size_t nout = 0, k = 0;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nheld; i++)
		if (s->held[i].n != n)
			s->held[k++] = s->held[i];
	s->nheld = k;
	/* what no running tool reads any more goes out (unlocked, below) */
	if (s->ndeferred > 0 && (out = malloc(s->ndeferred * sizeof *out)) != NULL &&
	    (kind = malloc(s->ndeferred * sizeof *kind)) != NULL) {
		k = 0;
		for (size_t i = 0; i < s->ndeferred; i++) {
			if (held_by_any(s, s->deferred[i])) {
				s->complete[k] = s->complete[i];
				s->deferred[k++] = s->deferred[i];
			} else {
				kind[nout] = s->complete[i];
				out[nout++] = s->deferred[i];
			}
		}
		s->ndeferred = k;
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < nout; i++) {
		/* the tool's own write (its trace was read): not an edit */
		if (!selfwrite_is(e, out[i]) && e->cfg.changed != NULL)
			e->cfg.changed(e->cfg.arg, out[i], kind[i]);
		free(out[i]);
	}
	free(out);
	free(kind);
}
