/* check_programs.c — kiln check --programs: every used tool's program, as a
 * build would look: on kiln.yaml's `path` when it has one, else on this
 * shell's PATH (the PATH a build asked from here runs with), a name with
 * a '/' relative to the project. A program not found fails every step of
 * its tool at build time; kiln check says so before the build starts.
 * A warning, not an error: the program may be installed or built before
 * the build (a project's own tools/, made by make), as a source file that
 * does not exist yet is a warning. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln_desc.h"
#include "tool_spawn.h"

/* A (tool, program) pair already looked up. */
struct seen {
	const kiln_tool *tool;
	const char *prog;
};

static int
seen_has(const struct seen *v, size_t n, const kiln_tool *t, const char *prog)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tool == t && strcmp(v[i].prog, prog) == 0)
			return 1;
	return 0;
}

/* Look up prog for tool t; print a warning when it cannot be run. 1 when
 * it warned. */
static int
program_check(const kiln_desc *d, const kiln_tool *t, const char *prog, const char *path)
{
	char exe[PATH_MAX], where[200];
	int rv = spawn_find(prog, path, kiln_desc_root(d), exe, sizeof exe);

	if (rv == 0)
		return 0;
	spawn_where_looked(prog, path, kiln_desc_root(d), where, sizeof where);
	fprintf(stderr, "%s:%d:%d: warning: tools.%s.run: program '%s' %s, looked for %s: "
	        "each step of this tool fails until it is\n", t->loc.file ? t->loc.file : "?",
	        t->loc.line, t->loc.col, t->name, prog,
	        rv == KILN_EACCES ? "is not executable" : "not found", where);
	return 1;
}

size_t
check_programs(const kiln_desc *d)
{
	const char *const *names;
	size_t nprof = kiln_desc_profiles(d, &names), n = 0, cap = 0, nwarn = 0;
	const char *path = kiln_desc_path(d) ? kiln_desc_path(d) : getenv("PATH");
	struct seen *v = NULL;

	for (size_t p = 0; p < nprof; p++) {
		const kiln_plan *pl = kiln_desc_plan(d, names[p]);
		for (size_t i = 0; pl != NULL && i < pl->nsteps; i++) {
			const kiln_step *st = &pl->steps[i];
			const char *prog = st->tool == NULL || st->tool->builtin ? NULL
			                   : st->tool->shell ? "/bin/sh"
			                   : st->nargv ? st->argv[0] : NULL;
			/* a program the engine names (${in}...) is known only then */
			if (prog == NULL || strstr(prog, "${") != NULL ||
			    seen_has(v, n, st->tool, prog))
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct seen *nv = realloc(v, ncap * sizeof *nv);
				if (nv == NULL)
					goto done;   /* out of memory: fewer findings */
				v = nv;
				cap = ncap;
			}
			v[n++] = (struct seen){st->tool, prog};
			nwarn += (size_t)program_check(d, st->tool, prog, path);
		}
	}
done:
	free(v);
	return nwarn;
}
