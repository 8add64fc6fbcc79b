/* test_dep_path — the path policy for depfiles and traces (dep_path.h):
 * lexical cleaning, project-relative names inside the project, absolute
 * names for external files, nothing for the machine's own locations, and
 * a warning class for what cannot be a store key. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dep_path.h"
#include "testutil.h"

#define ROOT "/work/games/proj"
#define HOME "/home/dev"

static const char *const class_name[] = {"project", "external", "ignored",
                                         "build", "invalid"};

static const struct {
	const char *what, *path;
	int listing;
	enum dep_path_class cls;
	const char *name;   /* NULL: not checked */
} cases[] = {
	{"plain project file", "src/a.h", 0, DEP_PATH_PROJECT, "src/a.h"},
	{"a/./b", "src/./a.h", 0, DEP_PATH_PROJECT, "src/a.h"},
	{"a//b", "src//a.h", 0, DEP_PATH_PROJECT, "src/a.h"},
	{"a/b/../c (glslc, gcc)", "src/shaders/ge/../utils/rgb.frag", 0,
	 DEP_PATH_PROJECT, "src/shaders/utils/rgb.frag"},
	{"leading ./", "./src/a.h", 0, DEP_PATH_PROJECT, "src/a.h"},
	{"absolute inside the project", ROOT "/src/a.h", 0, DEP_PATH_PROJECT, "src/a.h"},
	{"absolute with .. back into it", ROOT "/../proj/src/a.h", 0, DEP_PATH_PROJECT,
	 "src/a.h"},
	{"../x from the root: a sibling", "../common/x.glsl", 0, DEP_PATH_EXTERNAL,
	 "/work/games/common/x.glsl"},
	{"two levels up", "../../shared/y.h", 0, DEP_PATH_EXTERNAL, "/work/shared/y.h"},
	{"a name that starts like the root", ROOT "2/a.h", 0, DEP_PATH_EXTERNAL,
	 ROOT "2/a.h"},
	{"system header", "/usr/include/x.h", 0, DEP_PATH_IGNORED, NULL},
	{"system header through ..", "/usr/lib/gcc/../../include/stdio.h", 0,
	 DEP_PATH_IGNORED, NULL},
	{"/etc", "/etc/ld.so.cache", 0, DEP_PATH_IGNORED, NULL},
	{"/tmp", "/tmp/cc1.s", 0, DEP_PATH_IGNORED, NULL},
	{"/lib64", "/lib64/ld-linux-x86-64.so.2", 0, DEP_PATH_IGNORED, NULL},
	{"/usrx is not /usr", "/usrx/a.h", 0, DEP_PATH_EXTERNAL, "/usrx/a.h"},
	{"$HOME/.cache", HOME "/.cache/x", 0, DEP_PATH_IGNORED, NULL},
	{"$HOME/.config itself", HOME "/.config", 0, DEP_PATH_IGNORED, NULL},
	{"$HOME/libs is external", HOME "/libs/z.h", 0, DEP_PATH_EXTERNAL,
	 HOME "/libs/z.h"},
	{".. past /", "/../../usr/include/x.h", 0, DEP_PATH_IGNORED, NULL},
	{".. past / from the root", "../../../../../../../opt/x", 0, DEP_PATH_IGNORED, NULL},
	{".. past / to a non-system folder", "/../../srv/x.h", 0, DEP_PATH_EXTERNAL,
	 "/srv/x.h"},
	{"/ itself", "/", 0, DEP_PATH_IGNORED, NULL},
	{"the root as a file", ROOT, 0, DEP_PATH_IGNORED, NULL},
	{"the root as a listing", ROOT, 1, DEP_PATH_PROJECT, "./"},
	{"a project folder listed: dir/", ROOT "/src/lib", 1, DEP_PATH_PROJECT, "src/lib/"},
	{"a project folder listed, relative", "src/lib/", 1, DEP_PATH_PROJECT, "src/lib/"},
	{"an external folder listed", "../common", 1, DEP_PATH_EXTERNAL,
	 "/work/games/common/"},
	{".kiln/ is kiln's", ".kiln/scratch/3.d", 0, DEP_PATH_IGNORED, NULL},
	{".kilnx is not .kiln", ".kilnx/a", 0, DEP_PATH_PROJECT, ".kilnx/a"},
	{".kiln/ behind a tool's prefix (png32:)", "png32:.kiln/scratch/r1/1/hero.png", 0,
	 DEP_PATH_IGNORED, NULL},
	{".kiln/ behind a prefix, absolute", "png32:" ROOT "/.kiln/scratch/r1/1/a.png", 0,
	 DEP_PATH_IGNORED, NULL},
	{".kiln/ behind a prefix and ./", ROOT "/png:./.kiln/scratch/1/a.png", 0,
	 DEP_PATH_IGNORED, NULL},
	{"a prefix before a project path is a project path", "png32:art/a.png", 0,
	 DEP_PATH_PROJECT, "png32:art/a.png"},
	{"a colon after a '/' is no prefix", "src/x:.kiln/a", 0, DEP_PATH_PROJECT,
	 "src/x:.kiln/a"},
	{"build/ is for the caller", "build/pc/sprites/a.png", 0, DEP_PATH_BUILD,
	 "build/pc/sprites/a.png"},
	{"build/ through ..", "src/../build/pc/a.png", 0, DEP_PATH_BUILD, "build/pc/a.png"},
	{"builds/ is a project folder", "builds/a", 0, DEP_PATH_PROJECT, "builds/a"},
	{"a control character", "src/a\nb.h", 0, DEP_PATH_INVALID, "src/a\nb.h"},
	{"a backslash outside", "/srv/a\\b.h", 0, DEP_PATH_INVALID, "/srv/a\\b.h"},
};

static void
table(void **state)
{
	const struct dep_path_policy pp = {ROOT, HOME};
	char out[4096];

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum dep_path_class got = dep_path_classify(&pp, cases[i].path, cases[i].listing,
		                                            out, sizeof out);
		if (got != cases[i].cls)
			fail_msg("%s: '%s' is %s, expected %s (name '%s')", cases[i].what,
			         cases[i].path, class_name[got], class_name[cases[i].cls], out);
		if (cases[i].name != NULL && strcmp(out, cases[i].name) != 0)
			fail_msg("%s: '%s' named '%s', expected '%s'", cases[i].what,
			         cases[i].path, out, cases[i].name);
	}
}

/* A project in a machine location still has siblings there: the CI
 * checkout in /tmp/ci/p that includes /tmp/ci/common. */
static void
project_under_a_machine_location(void **state)
{
	const struct dep_path_policy pp = {"/tmp/ci/p", NULL};
	char out[4096];

	(void)state;
	assert_int_equal(dep_path_classify(&pp, "../common/c.h", 0, out, sizeof out),
	                 DEP_PATH_EXTERNAL);
	assert_string_equal(out, "/tmp/ci/common/c.h");
	assert_int_equal(dep_path_classify(&pp, "/tmp/other/x.h", 0, out, sizeof out),
	                 DEP_PATH_IGNORED);
	assert_int_equal(dep_path_classify(&pp, "/usr/include/x.h", 0, out, sizeof out),
	                 DEP_PATH_IGNORED);
}

/* Too long for a store key (400 bytes), or for the buffer: a warning. */
static void
too_long(void **state)
{
	const struct dep_path_policy pp = {ROOT, HOME};
	char path[600], out[64];

	(void)state;
	memset(path, 'a', sizeof path - 1);
	path[sizeof path - 1] = '\0';
	assert_int_equal(dep_path_classify(&pp, path, 0, out, sizeof out), DEP_PATH_INVALID);
	assert_int_equal(dep_path_classify(&pp, "src/a-name-longer-than-the-buffer-given"
	                                   "-to-the-classifier.h", 0, out, 32),
	                 DEP_PATH_INVALID);
}

static void
clean_in_place(void **state)
{
	static const struct { const char *in, *want; } c[] = {
		{"/a/./b", "/a/b"}, {"//a//b//", "/a/b"}, {"/a/b/../c", "/a/c"},
		{"/..", "/"}, {"/../..", "/"}, {"/a/..", "/"}, {"/", "/"}, {"/.", "/"},
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		snprintf(buf, sizeof buf, "%s", c[i].in);
		dep_path_clean(buf);
		if (strcmp(buf, c[i].want) != 0)
			fail_msg("clean '%s': '%s', expected '%s'", c[i].in, buf, c[i].want);
	}
}

/* A ".." after a symlink climbs from the link's target, as the kernel
 * does; everything else is cleaned as text. In the case's temp dir (made
 * physical first): p/inc/inc.h, out/real/, out/inc.h, p/inc/lnk ->
 * ../../out/real (relative), p/inc/abs -> <dir>/out/real, p/inc/in ->
 * ../sub (inside p), p/loop -> loop. */
static void
resolve_through_symlinks(void **state)
{
	char dir[4096], buf[8192];
	struct { const char *in, *want; } c[] = {
		{"p/inc/lnk/../inc.h", "out/inc.h"},
		{"p/inc/abs/../inc.h", "out/inc.h"},
		{"p/inc/lnk/./../../out/real/../inc.h", "out/inc.h"},
		{"p/inc/lnk/./../../out/real/x/../../inc.h", "out/real/x"},   /* no x/ */
		{"p/inc/in/../inc/inc.h", "p/inc/inc.h"},   /* inside: sub/.. = p */
		{"p/inc/lnk/../missing.h", "out/missing.h"}, /* a probe: its folder */
		{"p/inc/inc.h", "p/inc/inc.h"},              /* no "..": as it is */
		{"p/inc/lnk/x.h", "p/inc/lnk/x.h"},          /* a link without "..": its name */
		{"p/./inc//inc.h", "p/inc/inc.h"},
		{"p/gone/../inc/inc.h", "p/gone"},           /* fails at gone: that entry */
		{"p/inc/inc.h/../x", "p/inc/inc.h"},         /* not a folder: the file */
		{"p/inc/lnk/nope/../x", "out/real/nope"},    /* missing under the link's target */
		{"p/loop/../inc/inc.h", "p/inc/inc.h"},      /* a loop: text */
	};

	if (realpath(tu_dir(state), dir) == NULL)
		fail_msg("realpath %s", tu_dir(state));
	assert_int_equal(tu_sh("cd '%s' && mkdir -p p/inc p/sub out/real && "
	                       "echo p >p/inc/inc.h && echo o >out/inc.h && "
	                       "ln -s ../../out/real p/inc/lnk && "
	                       "ln -s '%s/out/real' p/inc/abs && ln -s ../sub p/inc/in && "
	                       "ln -s loop p/loop", dir, dir), 0);
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char want[8192];
		snprintf(buf, sizeof buf, "%s/%s", dir, c[i].in);
		snprintf(want, sizeof want, "%s/%s", dir, c[i].want);
		dep_path_resolve(buf, sizeof buf);
		if (strcmp(buf, want) != 0)
			fail_msg("resolve '%s': '%s', expected '%s'", c[i].in, buf, want);
	}
	/* resolved, out/ lies beside p: an external file for the policy */
	{
		char root[8192], path[8192], out[8192], want[8192];
		snprintf(root, sizeof root, "%s/p", dir);
		const struct dep_path_policy pp = {root, NULL};
		snprintf(path, sizeof path, "%s/p/inc/lnk/../inc.h", dir);
		dep_path_resolve(path, sizeof path);
		assert_int_equal(dep_path_classify(&pp, path, 0, out, sizeof out),
		                 DEP_PATH_EXTERNAL);
		snprintf(want, sizeof want, "%s/out/inc.h", dir);
		assert_string_equal(out, want);
	}
	/* a result that does not fit: left as it is (the policy then calls
	 * it invalid), never cut or cleaned into another file's name */
	snprintf(buf, sizeof buf, "%s/p/inc/lnk/../inc.h", dir);
	{
		char small[8192];
		size_t n = strlen(buf) + 1;
		assert_true(n <= sizeof small);
		memcpy(small, buf, n);
		assert_int_equal(tu_sh("mkdir -p '%s/out/real/%0200d/deep' && "
		                       "ln -s '%s/out/real/%0200d/deep' '%s/p/inc/long'",
		                       dir, 0, dir, 0, dir), 0);
		snprintf(small, sizeof small, "%s/p/inc/long/../inc.h", dir);
		n = strlen(small) + 1;
		dep_path_resolve(small, n);
		assert_true(strstr(small, "/../") != NULL);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table),
		cmocka_unit_test(project_under_a_machine_location),
		cmocka_unit_test(too_long),
		cmocka_unit_test(clean_in_place),
		cmocka_unit_test_setup_teardown(resolve_through_symlinks, tu_setup_dir,
		                                tu_teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
