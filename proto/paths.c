/* paths.c — where a project's daemon keeps its socket, lock, pid file, log
 * and store. Both kilnd and its clients derive them here, so they cannot
 * disagree. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_proto.h"

static int
is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Cut dir (an absolute path) to its parent in place; 0 when it was "/". */
static int
path_up(char *dir)
{
	char *slash = strrchr(dir, '/');

	if (strcmp(dir, "/") == 0 || slash == NULL)
		return 0;
	if (slash == dir)
		slash[1] = '\0';
	else
		slash[0] = '\0';
	return 1;
}

int
kiln_project_find(char *dir, size_t len)
{
	char probe[PATH_MAX + 16];
	char *walk;

	if (getcwd(dir, len) == NULL)
		return errno == ERANGE ? KILN_ERANGE : kiln_err_from_errno(errno);
	if ((walk = strdup(dir)) == NULL)
		return KILN_ENOMEM;
	do {
		snprintf(probe, sizeof(probe), "%s/kiln.yaml",
		         strcmp(walk, "/") == 0 ? "" : walk);
		if (is_file(probe)) {
			strcpy(dir, walk); /* a prefix of what dir held */
			break;
		}
	} while (path_up(walk));
	free(walk);
	return 0;
}

/* snprintf "<project>/.kiln/<name>" into buf, or KILN_ERANGE. */
static int
join(char *buf, size_t len, const char *project, const char *name)
{
	const char *root = strcmp(project, "/") == 0 ? "" : project;

	if ((size_t)snprintf(buf, len, "%s/.kiln%s%s", root, *name ? "/" : "",
	                     name) >= len)
		return KILN_ERANGE;
	return 0;
}

int
kiln_paths_init(struct kiln_paths *p, const char *project)
{
	int rv;

	memset(p, 0, sizeof(*p));
	if (project == NULL) {
		if ((rv = kiln_project_find(p->project, sizeof(p->project))) != 0)
			return rv;
	} else if (realpath(project, p->project) == NULL) {
		return errno == ENAMETOOLONG ? KILN_ERANGE : kiln_err_from_errno(errno);
	}
	if ((rv = join(p->dir, sizeof(p->dir), p->project, "")) != 0 ||
	    (rv = join(p->sock, sizeof(p->sock), p->project, "kilnd.sock")) != 0 ||
	    (rv = join(p->lock, sizeof(p->lock), p->project, "kilnd.lock")) != 0 ||
	    (rv = join(p->pid, sizeof(p->pid), p->project, "kilnd.pid")) != 0 ||
	    (rv = join(p->log, sizeof(p->log), p->project, "kilnd.log")) != 0 ||
	    (rv = join(p->start_lock, sizeof(p->start_lock), p->project,
	               "start.lock")) != 0 ||
	    (rv = join(p->store, sizeof(p->store), p->project, "store")) != 0)
		return rv;
	if (strlen(p->sock) > KILN_SOCK_PATH_MAX)
		return KILN_ERANGE;
	snprintf(p->url, sizeof(p->url), "ipc://%s", p->sock);
	return 0;
}
