/* agent_files.c — which project files a build agent's job carries
 * beyond the step's declared inputs (docs/agents.md, "Files nobody
 * declared"): the project files its argv names (a script run by path,
 * `python3 tools/x.py`), and the files an agent's run looked for in vain
 * that this machine has, read from its trace whatever the tool's exit
 * status (a compiler exits 1 on a missing #include), sent with the
 * next try.
 *
 * Both come from outside the daemon's own word (a description's argv, an
 * agent's trace), and both are read and sent to agents: only a regular
 * project file outside build/ and .kiln/ whose real path (symlinks
 * followed) is inside the project is ever sent (dep_path.h's policy).
 *
 * Threads: engine workers (agent_argv_file, making a job) and the
 * daemon's handler threads (agent_trace_lacked, landing an answer), on
 * nodes they hold, e->mu not held. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent_jobs.h"
#include "dep_path.h"
#include "engine_int.h"
#include "scratch.h"

/* Add rel to the files n's next job carries: 1 when it is new, 0 when
 * it was there, KILN_ERANGE past 4,096, KILN_ENOMEM. */
static int
extra_add(struct node *n, const char *rel)
{
	char **nv;

	for (size_t i = 0; i < n->w->nextra; i++)
		if (strcmp(n->w->extra[i], rel) == 0)
			return 0;
	if (n->w->nextra >= 4096)
		return KILN_ERANGE;
	if ((nv = realloc(n->w->extra, (n->w->nextra + 1) * sizeof *nv)) == NULL)
		return KILN_ENOMEM;
	n->w->extra = nv;
	if ((nv[n->w->nextra] = strdup(rel)) == NULL)
		return KILN_ENOMEM;
	n->w->nextra++;
	return 1;
}

/* Undo the trace's escapes (`\\` and `\n`) in place. */
static void
unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] == 'n') {
			*d++ = '\n';
			s++;
		} else if (s[0] == '\\' && s[1] == '\\') {
			*d++ = '\\';
			s++;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Whether abs resolves (symlinks followed) to a place inside the
 * project: a trace comes from the agent, and what it names is read and
 * sent to agents. */
static int
inside_root(const struct engine *e, const char *abs)
{
	char real[PATH_MAX], rroot[PATH_MAX];
	size_t n;

	if (realpath(abs, real) == NULL || realpath(e->root, rroot) == NULL)
		return 0;
	n = strlen(rroot);
	return strncmp(real, rroot, n) == 0 && real[n] == '/';
}

/* Whether path (absolute, from the agent's trace, in the daemon's terms)
 * names something the agent's run looked for in vain that exists here: a
 * regular file of the project outside build/ and .kiln/ (a prerequisite's
 * output is an input already), or a folder it listed (its regular
 * files). Each such file joins n's extras: 1 when any did. */
static int
lacked_add(struct engine *e, struct node *n, const char *path, int listing)
{
	const struct dep_path_policy pp = {e->root, getenv("HOME")};
	char rel[PATH_MAX], abs[PATH_MAX * 2];
	struct stat st;
	int added = 0;
	DIR *d;
	struct dirent *de;

	/* the one policy for what a trace names (dep_path.h): lexically
	 * clean, project-relative, never "..", never .kiln/ */
	switch (dep_path_classify(&pp, path, 0, rel, sizeof rel)) {
	case DEP_PATH_PROJECT:
		break;
	case DEP_PATH_EXTERNAL:
		/* a file outside the project that is here and was not
		 * there: never sent, but the run is not this machine's */
		return !listing && stat(rel, &st) == 0 ? AGENT_LACKED_HERE : 0;
	default:
		return 0;
	}
	snprintf(abs, sizeof abs, "%s/%s", e->root, rel);
	if (!inside_root(e, abs))
		return stat(abs, &st) == 0 ? AGENT_LACKED_HERE : 0;
	if (!listing)
		return lstat(abs, &st) == 0 && S_ISREG(st.st_mode) && extra_add(n, rel) == 1
		       ? AGENT_LACKED_SENT : AGENT_LACKED_NONE;
	/* a folder listed on the agent shows only what was laid out: send
	 * every file it holds here (not its subfolders' files) */
	if ((d = opendir(abs)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		char sub[PATH_MAX * 3];
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
		    (de->d_name[1] == '.' && de->d_name[2] == '\0')))
			continue;
		snprintf(sub, sizeof sub, "%s/%s", abs, de->d_name);
		int k = lacked_add(e, n, sub, 0);
		if (k > added)
			added = k;
	}
	closedir(d);
	return added;
}

int
agent_trace_lacked(struct engine *e, struct node *n)
{
	char path[PATH_MAX + 16], *line = NULL;
	size_t cap = 0;
	ssize_t k;
	int added = 0;
	FILE *f;

	scratch_path(e, n->w->scratch, ".trace", 1, path, sizeof path);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	if (fseeko(f, n->w->trace_off, SEEK_SET) != 0) {
		fclose(f);
		return 0;
	}
	while ((k = getline(&line, &cap, f)) > 0) {
		char *p = line + 2;
		if (line[k - 1] == '\n')
			line[k - 1] = '\0';
		if ((line[0] != 'M' && line[0] != 'D') || line[1] != ' ')
			continue;
		unescape(p);
		int got = lacked_add(e, n, p, line[0] == 'D');
		if (got > added)
			added = got;
	}
	free(line);
	fclose(f);
	return added;
}

int
agent_argv_file(const struct engine *e, const char *word, char *rel, size_t len)
{
	const struct dep_path_policy pp = {e->root, getenv("HOME")};
	char abs[PATH_MAX * 2];
	struct stat st;

	/* a plain relative path, as a description writes a script's: no
	 * "..", which only text would resolve (a symlink may precede it) */
	if (word[0] == '\0' || word[0] == '/' || word[0] == '-' || strlen(word) >= len ||
	    strcmp(word, "..") == 0 || strncmp(word, "../", 3) == 0 || strstr(word, "/../") != NULL ||
	    (strlen(word) >= 3 && strcmp(word + strlen(word) - 3, "/..") == 0))
		return 0;
	if (dep_path_classify(&pp, word, 0, rel, len) != DEP_PATH_PROJECT)
		return 0;
	snprintf(abs, sizeof abs, "%s/%s", e->root, rel);
	return lstat(abs, &st) == 0 && S_ISREG(st.st_mode) && inside_root(e, abs);
}
