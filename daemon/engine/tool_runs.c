/* tool_runs.c — the program a tool's program exec'd in its own place
 * (tool_runs.h).
 *
 * A tool's program is found on the build's PATH and its content is in the
 * action key ("tool exe"). That program may be a shim: pyenv's python3 is
 * a script that execs ~/.pyenv/versions/X/bin/python3, and the machine's
 * own folders and $HOME's hidden ones are no discovered dependencies, so
 * an interpreter upgraded behind the shim would rerun nothing. The tracer
 * records each exec (its X lines); the last program the tool's own
 * process exec'd is what actually ran. Its content hash is the key part
 * "tool runs" (content only, as "tool exe": a colleague whose pyenv lives
 * in another $HOME shares the results); its path is how it is found
 * again.
 *
 * The key is made before the run, so what the shim execs is learned from
 * the last run: remembered in the node (n->execs, with the program it was
 * found behind) and, for a new daemon, in the step's decision record
 * (StepRecord.program and .program_ran). A run that shows another program
 * (or none) makes its key again before its result is stored, so the
 * result is filed under the key of what ran and the next decision, which
 * knows it, finds it.
 *
 * Only a program that is a script ("#!") counts as a shim: a shell
 * binary running a command string (a shell tool, `sh -c`) execs its last
 * command in its place too, but what that command runs is the script's
 * business (and keying it would cost every shell step a run on a machine
 * that has not learnt it yet: the shared cache could not serve it).
 *
 * The shim stays in the key: a wrapper's own text (the options it adds,
 * the environment it sets) can change what the program makes, so a step
 * run through a shim and one whose PATH finds the program directly have
 * different keys (each cached on its own).
 *
 * Threads: the worker holding the node. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "publish.h"
#include "tool_runs.h"

#define PART "tool runs"

/* The program remembered behind exe, or NULL. */
static const char *
runs_of(const struct node *n, const char *exe)
{
	if (n->execs == NULL || strcmp(n->execs, exe) != 0)
		return NULL;
	return n->execs + strlen(n->execs) + 1;
}

/* Remember that exe exec'd ran (NULL: nothing). 0 or KILN_ENOMEM. */
static int
runs_set(struct node *n, const char *exe, const char *ran)
{
	size_t le = strlen(exe) + 1, lr;
	char *v = NULL;

	if (ran != NULL) {
		lr = strlen(ran) + 1;
		if ((v = malloc(le + lr)) == NULL)
			return KILN_ENOMEM;
		memcpy(v, exe, le);
		memcpy(v + le, ran, lr);
	}
	free(n->execs);
	n->execs = v;
	n->execs_known = 1;
	return 0;
}

/* What the decision record says the program exec'd (a daemon's first
 * decision of n). */
static int
runs_from_record(struct engine *e, const struct graph *g, struct node *n)
{
	const Kiln__StepRecord *r;

	prev_load(e, g, n);
	r = n->w->prev;
	if (r != NULL && r->program != NULL && r->program[0] != '\0' &&
	    r->program_ran != NULL && r->program_ran[0] != '\0')
		return runs_set(n, r->program, r->program_ran);
	return runs_set(n, "", NULL);
}

static int
part_add(struct engine *e, struct key_parts *kp, const char *ran)
{
	kiln_id h;
	int rv = filestate_hash(e->fs, ran, &h);

	if (rv == 0)
		return key_parts_hash(kp, PART, &h);
	/* gone (an uninstalled version): the key differs, the step runs and
	 * its run says what it execs now */
	return key_parts_text(kp, PART, "missing");
}

int
tool_runs_part(struct engine *e, const struct graph *g, struct node *n,
               const char *exe, struct key_parts *kp)
{
	const char *ran;
	int rv;

	if (!n->execs_known && (rv = runs_from_record(e, g, n)) != 0)
		return rv;
	if ((ran = runs_of(n, exe)) == NULL)
		return 0;
	return part_add(e, kp, ran);
}

int
tool_runs_quick(struct engine *e, const struct node *n, const char *exe, kiln_id *h)
{
	const char *ran = runs_of(n, exe);

	if (ran == NULL)
		return 0;
	if (filestate_hash(e->fs, ran, h) != 0)
		memset(h, 0, sizeof *h);
	return 1;
}

/* Whether ran, exec'd by the process that started as exe, is another
 * program: not exe itself (a program that execs itself again), nor a
 * name of the process's own image (/proc/self/exe), and a file. */
static int
runs_other(const char *exe, const char *ran)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat st;

	if (ran[0] != '/' || strcmp(exe, ran) == 0 || strncmp(ran, "/proc/", 6) == 0 ||
	    strncmp(ran, "/dev/", 5) == 0)
		return 0;
	if (stat(ran, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	return realpath(exe, a) == NULL || realpath(ran, b) == NULL || strcmp(a, b) != 0;
}

/* Whether the program at path is a script ("#!"): a shim. */
static int
is_script(const char *path)
{
	char head[2];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return 0;
	ok = read(fd, head, 2) == 2 && head[0] == '#' && head[1] == '!';
	close(fd);
	return ok;
}

int
tool_runs_learn(struct engine *e, struct node *n, const char *ran)
{
	const char *exe = n->w->program, *had = runs_of(n, exe);
	int rv;

	if (exe[0] == '\0' || n->ks->tool->builtin)
		return 0;
	if (!is_script(exe) || !runs_other(exe, ran))
		ran = NULL;
	if ((had == NULL && ran == NULL) || (had != NULL && ran != NULL && strcmp(had, ran) == 0)) {
		n->execs_known = 1;
		return 0;
	}
	if ((rv = runs_set(n, exe, ran)) != 0)
		return rv;
	key_parts_drop(&n->w->parts, PART);
	if (ran != NULL && (rv = part_add(e, &n->w->parts, ran)) != 0)
		return rv;
	return key_parts_key(&n->w->parts, &n->w->new_key);
}

const char *
tool_runs_ran(const struct node *n)
{
	const char *ran = n->w != NULL ? runs_of(n, n->w->program) : NULL;

	return ran != NULL ? ran : "";
}
