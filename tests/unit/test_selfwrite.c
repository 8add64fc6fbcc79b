/* test_selfwrite — project files the build itself changed (selfwrite.h):
 * a file in the state a step's write left it in is the build's own, and
 * any later change of it an edit; a change of a running tool's input is
 * reported once the tool ended, unless it was that tool's own write. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "selfwrite.h"
#include "testutil.h"

struct fixture {
	struct engine e;
	kiln_tool tool;
	kiln_step ks[2];
	struct node n[2];
	const char *inputs[2][1];
	char seen[8][64];        /* changes reported, as "path complete" */
	int nseen;
};

static void
on_changed(void *arg, const char *relpath, int complete)
{
	struct fixture *f = arg;

	if (f->nseen < 8)
		snprintf(f->seen[f->nseen++], sizeof f->seen[0], "%s %d", relpath, complete);
}

/* Append text to the project file name. */
static void
append(struct fixture *f, const char *name, const char *text)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s", f->e.root, name);
	assert_non_null(fp = fopen(path, "a"));
	fputs(text, fp);
	fclose(fp);
}

/* Two steps a and b; both read a.txt (b only with shared). */
static struct fixture *
fixture_new(void **state, int shared)
{
	struct fixture *f = calloc(1, sizeof *f);

	assert_non_null(f);
	assert_non_null(f->e.root = strdup(tu_dir(state)));
	assert_int_equal(selfwrite_new(&f->e.selfw), 0);
	snprintf(f->e.trace_shim, sizeof f->e.trace_shim, "/lib/libkilntrace.so");
	f->e.cfg.changed = on_changed;
	f->e.cfg.arg = f;
	for (int i = 0; i < 2; i++) {
		f->inputs[i][0] = i == 0 || shared ? "a.txt" : "b.txt";
		f->ks[i].url = i == 0 ? "a" : "b";
		f->ks[i].tool = &f->tool;
		f->ks[i].inputs = f->inputs[i];
		f->ks[i].ninputs = 1;
		f->n[i].ks = &f->ks[i];
	}
	append(f, "a.txt", "one\n");
	append(f, "b.txt", "b\n");
	return f;
}

static void
fixture_free(struct fixture *f)
{
	selfwrite_forget(&f->n[0]);
	selfwrite_forget(&f->n[1]);
	selfwrite_free(f->e.selfw);
	free(f->e.root);
	free(f);
}

static void
own_write_then_an_edit(void **state)
{
	struct fixture *f = fixture_new(state, 0);

	append(f, "a.txt", "x\n");              /* the tool's write */
	selfwrite_note(&f->e, &f->n[0], "a.txt");
	assert_string_equal(f->n[0].selfw_path, "a.txt");
	assert_true(selfwrite_is(&f->e, "a.txt"));
	assert_false(selfwrite_is(&f->e, "b.txt"));
	append(f, "a.txt", "edited\n");         /* an artist's */
	assert_false(selfwrite_is(&f->e, "a.txt"));
	fixture_free(f);
}

static void
a_touch_after_the_write_is_an_edit(void **state)
{
	struct fixture *f = fixture_new(state, 0);
	char path[4096];
	struct timespec later[2] = {{0, UTIME_OMIT}, {2000000000, 0}};

	selfwrite_note(&f->e, &f->n[0], "a.txt");
	assert_true(selfwrite_is(&f->e, "a.txt"));
	snprintf(path, sizeof path, "%s/a.txt", f->e.root);
	assert_int_equal(utimensat(AT_FDCWD, path, later, 0), 0);
	assert_false(selfwrite_is(&f->e, "a.txt"));
	fixture_free(f);
}

static void
a_write_outside_the_project_names_nothing(void **state)
{
	struct fixture *f = fixture_new(state, 0);

	selfwrite_note(&f->e, &f->n[0], NULL);
	assert_null(f->n[0].selfw_path);
	assert_false(selfwrite_is(&f->e, "a.txt"));
	fixture_free(f);
}

static void
a_running_tools_own_write_is_never_reported(void **state)
{
	struct fixture *f = fixture_new(state, 0);

	selfwrite_run_begin(&f->e, &f->n[0]);
	append(f, "a.txt", "x\n");
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 0), 1);
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 1);
	/* a file no running tool reads goes out at once */
	assert_int_equal(selfwrite_defer(&f->e, "b.txt", 1), 0);
	selfwrite_note(&f->e, &f->n[0], "a.txt");   /* its trace, read */
	selfwrite_run_end(&f->e, &f->n[0]);
	assert_int_equal(f->nseen, 0);
	/* nothing held any more */
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 0);
	fixture_free(f);
}

static void
an_edit_while_the_tool_runs_is_reported_at_its_end(void **state)
{
	struct fixture *f = fixture_new(state, 0);

	selfwrite_run_begin(&f->e, &f->n[0]);
	append(f, "a.txt", "edited\n");
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 0), 1);
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 1);
	assert_int_equal(f->nseen, 0);
	selfwrite_run_end(&f->e, &f->n[0]);
	assert_int_equal(f->nseen, 1);
	assert_string_equal(f->seen[0], "a.txt 1");
	fixture_free(f);
}

static void
a_file_two_tools_read_is_reported_when_the_last_ends(void **state)
{
	struct fixture *f = fixture_new(state, 1);

	selfwrite_run_begin(&f->e, &f->n[0]);
	selfwrite_run_begin(&f->e, &f->n[1]);
	append(f, "a.txt", "edited\n");
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 1);
	selfwrite_run_end(&f->e, &f->n[0]);
	assert_int_equal(f->nseen, 0);
	selfwrite_run_end(&f->e, &f->n[1]);
	assert_int_equal(f->nseen, 1);
	assert_string_equal(f->seen[0], "a.txt 1");
	fixture_free(f);
}

static void
an_untraced_tool_holds_nothing(void **state)
{
	struct fixture *f = fixture_new(state, 0);

	f->tool.notrace = 1;
	selfwrite_run_begin(&f->e, &f->n[0]);
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 0);
	selfwrite_run_end(&f->e, &f->n[0]);
	f->tool.notrace = 0;
	f->e.trace_shim[0] = '\0';   /* no tracer at all */
	selfwrite_run_begin(&f->e, &f->n[0]);
	assert_int_equal(selfwrite_defer(&f->e, "a.txt", 1), 0);
	selfwrite_run_end(&f->e, &f->n[0]);
	assert_int_equal(f->nseen, 0);
	fixture_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(own_write_then_an_edit, tu_setup_dir,
		                                tu_teardown_dir),
		cmocka_unit_test_setup_teardown(a_touch_after_the_write_is_an_edit,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(a_write_outside_the_project_names_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(a_running_tools_own_write_is_never_reported,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(an_edit_while_the_tool_runs_is_reported_at_its_end,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(a_file_two_tools_read_is_reported_when_the_last_ends,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(an_untraced_tool_holds_nothing, tu_setup_dir,
		                                tu_teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
