/* durations.c — the steps' last durations (durations.h), in memory as a
 * tree (libc's tsearch) keyed by "profile\turl", on disk as
 * <project>/.kiln/durations, as ninja keeps .ninja_log beside its build:
 * the store's records can go (rm -rf .kiln/store, a gc) and the next
 * first build still knows which steps are long.
 *
 * The file, version 1 (text, one entry a line, any order):
 *
 *     # kiln durations 1
 *     <ns> <gen> <profile>\t<url>
 *
 * ns is the tool's wall time in nanoseconds (> 0); gen the save in which
 * the entry was last recorded (larger is newer; the oldest go first when
 * more than DURATIONS_MAX are kept). A URL holding a newline is not kept.
 * When you change this layout, bump the version in the first line: a file
 * of another version is ignored as a whole (and rewritten at the next
 * save), which costs one build its order and nothing else.
 *
 * It is not fsync'ed: a crash may leave the old file or an empty one, and
 * either only costs order. */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durations.h"
#include "kiln_error.h"

#define DUR_HEADER "# kiln durations 1\n"
#define DUR_KEY_MAX 4096          /* profile, tab and URL */

struct dur_entry {
	uint64_t ns, gen;
	char key[];
};

struct durations {
	void *tree;                /* struct dur_entry *, by key */
	size_t n;
	uint64_t gen;              /* newer than every entry's on disk */
	int dirty;
	char path[4096];
	char tmp[4200];
};

static int
entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dur_entry *)a)->key, ((const struct dur_entry *)b)->key);
}

/* "profile\turl" into buf; 0, or -1 when it does not fit or cannot be
 * written on a line. */
static int
key_make(char *buf, size_t len, const char *profile, const char *url)
{
	int w = snprintf(buf, len, "%s\t%s", profile, url);

	if (w < 0 || (size_t)w >= len || strchr(buf, '\n') != NULL)
		return -1;
	return 0;
}

/* Set key's entry (a new one, or the one there), keeping the newer gen. */
static int
entry_put(struct durations *d, const char *key, uint64_t ns, uint64_t gen)
{
	size_t kl = strlen(key) + 1;
	struct dur_entry *e = malloc(sizeof *e + kl), **at;

	if (e == NULL)
		return KILN_ENOMEM;
	e->ns = ns;
	e->gen = gen;
	memcpy(e->key, key, kl);
	if ((at = tsearch(e, &d->tree, entry_cmp)) == NULL) {
		free(e);
		return KILN_ENOMEM;
	}
	if (*at != e) {
		if (gen >= (*at)->gen) {
			(*at)->ns = ns;
			(*at)->gen = gen;
		}
		free(e);
		return 0;
	}
	d->n++;
	return 0;
}

/* Parse one line "<ns> <gen> <key>" (no newline); 0 or -1. */
static int
line_parse(char *line, uint64_t *ns, uint64_t *gen, char **key)
{
	char *end;

	if (line[0] < '0' || line[0] > '9')
		return -1;
	errno = 0;
	*ns = strtoull(line, &end, 10);
	if (errno != 0 || *end != ' ' || *ns == 0 || end[1] < '0' || end[1] > '9')
		return -1;
	*gen = strtoull(end + 1, &end, 10);
	if (errno != 0 || *end != ' ' || strlen(end + 1) >= DUR_KEY_MAX ||
	    strchr(end + 1, '\t') == NULL || end[1] == '\t')
		return -1;
	*key = end + 1;
	return 0;
}

/* One line through log: "path:line: what". */
static void
say(durations_log_fn log, void *arg, const char *path, size_t line, const char *what)
{
	char msg[4600];

	if (log == NULL)
		return;
	snprintf(msg, sizeof msg, "%s:%zu: %s", path, line, what);
	log(arg, 0, msg);
}

/* Read the file's entries into d; damage is reported, never fatal. */
static int
file_read(struct durations *d, durations_log_fn log, void *arg)
{
	FILE *f = fopen(d->path, "re");
	char *line = NULL;
	size_t cap = 0, lineno = 0, nbad = 0, firstbad = 0;
	ssize_t len;
	struct stat st;
	int rv = 0;

	if (f == NULL)
		return 0;   /* none yet (or unreadable: the same to a hint) */
	if (fstat(fileno(f), &st) != 0 || st.st_size > DURATIONS_MAX_BYTES) {
		say(log, arg, d->path, 1, "larger than a durations file may be: "
		    "ignored (it is rewritten after the next build)");
		d->dirty = 1;
		goto out;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		uint64_t ns, gen;
		char *key;
		lineno++;
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		else
			len = -1;  /* cut short: a write that did not finish */
		if (lineno == 1) {
			if (len < 0 || strncmp(line, DUR_HEADER, strlen(DUR_HEADER) - 1) != 0 ||
			    line[strlen(DUR_HEADER) - 1] != '\0') {
				say(log, arg, d->path, 1, "not a kiln durations file of "
				    "version 1: ignored (it is rewritten after the next build)");
				d->dirty = 1;
				goto out;
			}
			continue;
		}
		if (len < 0 || line_parse(line, &ns, &gen, &key) != 0) {
			if (nbad++ == 0)
				firstbad = lineno;
			continue;
		}
		if (d->n >= DURATIONS_MAX)
			continue;
		if ((rv = entry_put(d, key, ns, gen)) != 0)
			goto out;
		if (gen >= d->gen)
			d->gen = gen + 1;
	}
	if (nbad > 0) {
		char what[128];
		snprintf(what, sizeof what, "damaged line ignored (%zu damaged in all); "
		         "the other entries are used", nbad);
		say(log, arg, d->path, firstbad, what);
		d->dirty = 1;   /* rewrite it whole */
	}
out:
	free(line);
	fclose(f);
	return rv;
}

int
durations_load(const char *root, durations_log_fn log, void *arg, struct durations **dp)
{
	struct durations *d = calloc(1, sizeof *d);
	int rv;

	*dp = NULL;
	if (d == NULL)
		return KILN_ENOMEM;
	d->gen = 1;
	snprintf(d->path, sizeof d->path, "%s/.kiln/durations", root);
	snprintf(d->tmp, sizeof d->tmp, "%s.tmp-%ld", d->path, (long)getpid());
	if ((rv = file_read(d, log, arg)) != 0) {
		durations_free(d);
		return rv;
	}
	*dp = d;
	return 0;
}

uint64_t
durations_get(const struct durations *d, const char *profile, const char *url)
{
	_Alignas(struct dur_entry) char buf[sizeof(struct dur_entry) + DUR_KEY_MAX];
	struct dur_entry *k = (struct dur_entry *)buf, *const *at;

	if (d == NULL || d->n == 0 ||
	    key_make(k->key, DUR_KEY_MAX, profile, url) != 0)
		return 0;
	at = tfind(k, &d->tree, entry_cmp);
	return at != NULL ? (*at)->ns : 0;
}

int
durations_set(struct durations *d, const char *profile, const char *url, uint64_t ns)
{
	char key[DUR_KEY_MAX];
	int rv;

	if (d == NULL || ns == 0 || key_make(key, sizeof key, profile, url) != 0)
		return 0;
	if ((rv = entry_put(d, key, ns, d->gen)) == 0)
		d->dirty = 1;
	return rv;
}

/* twalk_r's gathering of every entry into an array. */
struct gather {
	struct dur_entry **v;
	size_t n;
};

static void
gather_one(const void *nodep, VISIT which, void *arg)
{
	struct gather *g = arg;

	if (which == postorder || which == leaf)
		g->v[g->n++] = *(struct dur_entry *const *)nodep;
}

static int
newest_first(const void *a, const void *b)
{
	const struct dur_entry *x = *(struct dur_entry *const *)a;
	const struct dur_entry *y = *(struct dur_entry *const *)b;

	return x->gen < y->gen ? 1 : x->gen > y->gen ? -1 : strcmp(x->key, y->key);
}

int
durations_save(struct durations *d)
{
	struct gather g = {NULL, 0};
	FILE *f;
	int ok;

	if (d == NULL || !d->dirty)
		return 0;
	if ((g.v = malloc((d->n + 1) * sizeof *g.v)) == NULL)
		return KILN_ENOMEM;
	twalk_r(d->tree, gather_one, &g);
	qsort(g.v, g.n, sizeof *g.v, newest_first);
	if ((f = fopen(d->tmp, "we")) == NULL) {
		free(g.v);
		return KILN_EIO;
	}
	ok = fputs(DUR_HEADER, f) >= 0;
	for (size_t i = 0; ok && i < g.n && i < DURATIONS_MAX; i++)
		ok = fprintf(f, "%" PRIu64 " %" PRIu64 " %s\n", g.v[i]->ns, g.v[i]->gen,
		             g.v[i]->key) > 0;
	free(g.v);
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(d->tmp, d->path) != 0) {
		unlink(d->tmp);
		return KILN_EIO;
	}
	d->dirty = 0;
	d->gen++;
	return 0;
}

void
durations_free(struct durations *d)
{
	if (d == NULL)
		return;
	tdestroy(d->tree, free);
	free(d);
}
