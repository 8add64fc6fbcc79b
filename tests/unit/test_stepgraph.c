/* test_stepgraph — the graph `kiln graph` prints (client/stepgraph.h): one
 * edge per dependency (declared wins over discovered), file nodes made
 * from the names given, and the selection of what named nodes need or
 * what depends on them. The plan is made by hand: four steps
 *   art/a.png -> sized/a -> sprites/a -> bundle <- sounds/s <- audio/s.wav
 * with sprites/a also reading include.h (discovered) and bundle asking
 * for sized/a with `kiln need`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepgraph.h"
#include "testutil.h"

static const char *in_a[] = {"art/a.png"}, *in_s[] = {"audio/s.wav"};
static const char *need_sprite[] = {"sized/a"};
static const char *need_bundle[] = {"sounds/s", "sprites/a"};
static const kiln_tool tool = {.name = "t"};

/* Sorted by URL, as kiln_desc_plan gives them. */
static const kiln_step steps[] = {
	{.url = "bundle", .tool = &tool, .needs = need_bundle, .nneeds = 2},
	{.url = "sized/a", .tool = &tool, .inputs = in_a, .ninputs = 1},
	{.url = "sounds/s", .tool = &tool, .inputs = in_s, .ninputs = 1},
	{.url = "sprites/a", .tool = &tool, .needs = need_sprite, .nneeds = 1},
};
static const kiln_plan plan = {.profile = "pc", .steps = steps, .nsteps = 4};

/* The graph above, finished. */
static struct graph *
graph_made(void)
{
	struct graph *g;

	assert_kiln(0, graph_new(&plan, &g));
	for (size_t i = 0; i < plan.nsteps; i++) {
		const kiln_step *s = &steps[i];
		for (size_t j = 0; j < s->ninputs; j++)
			assert_kiln(0, graph_add(g, s->url, s->inputs[j], GE_INPUT, 0));
		for (size_t j = 0; j < s->nneeds; j++)
			assert_kiln(0, graph_add(g, s->url, s->needs[j], GE_PREREQ, 0));
	}
	/* what a run reports: its declared input again, a header, a miss */
	assert_kiln(0, graph_add(g, "sized/a", "art/a.png", GE_DISCOVERED, 0));
	assert_kiln(0, graph_add(g, "sprites/a", "include.h", GE_DISCOVERED, 0));
	assert_kiln(0, graph_add(g, "sprites/a", "gone.h", GE_DISCOVERED, 1));
	assert_kiln(0, graph_add(g, "bundle", "sized/a", GE_NEED, 0));
	assert_kiln(0, graph_add(g, "bundle", "sprites/a", GE_NEED, 0));
	graph_state(g, "sprites/a", GS_FAILED);
	assert_kiln(0, graph_finish(g));
	return g;
}

/* The kept nodes' names, sorted, space-separated, into buf. */
static const char *
kept(const struct graph *g, char *buf, size_t len)
{
	size_t n, used = 0;
	const struct gnode *v = graph_nodes(g, &n);

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (v[i].keep)
			used += (size_t)snprintf(buf + used, len - used, "%s%s",
			                         used ? " " : "", v[i].name);
	return buf;
}

static size_t
node_of(const struct graph *g, const char *name)
{
	size_t n;
	const struct gnode *v = graph_nodes(g, &n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return i;
	fail_msg("no node %s", name);
	return 0;
}

static void
edges_one_per_pair_declared_first(void **state)
{
	struct graph *g = graph_made();
	size_t ne, nn;
	const struct gedge *e = graph_edges(g, &ne);
	const struct gnode *v = graph_nodes(g, &nn);
	int seen_input = 0, seen_need = 0, seen_prereq = 0;

	(void)state;
	/* 2 inputs + 3 prerequisites + 2 discovered headers + 1 need
	 * (bundle's need of sprites/a is its prerequisite already) */
	assert_int_equal(ne, 8);
	/* steps, then the distinct files: art/a.png, audio/s.wav, gone.h,
	 * include.h */
	assert_int_equal(nn, 8);
	for (size_t i = 0; i < ne; i++) {
		const char *from = v[e[i].from].name, *to = v[e[i].to].name;
		if (strcmp(from, "art/a.png") == 0 && strcmp(to, "sized/a") == 0)
			seen_input += e[i].kind == GE_INPUT;
		if (strcmp(from, "sized/a") == 0 && strcmp(to, "bundle") == 0)
			seen_need += e[i].kind == GE_NEED;
		if (strcmp(from, "sprites/a") == 0 && strcmp(to, "bundle") == 0)
			seen_prereq += e[i].kind == GE_PREREQ;
	}
	assert_int_equal(seen_input, 1);
	assert_int_equal(seen_need, 1);
	assert_int_equal(seen_prereq, 1);
	assert_true(v[node_of(g, "gone.h")].missing);
	assert_false(v[node_of(g, "include.h")].missing);
	assert_int_equal(v[node_of(g, "sprites/a")].state, GS_FAILED);
	graph_free(g);
}

static const struct {
	const char *name;
	const char *patterns[2];
	size_t n;
	int rdeps;
	const char *want;
} select_cases[] = {
	{"no names: everything", {NULL}, 0, 0,
	 "bundle sized/a sounds/s sprites/a art/a.png audio/s.wav gone.h include.h"},
	{"a step: what it needs, transitively", {"sprites/a"}, 1, 0,
	 "sized/a sprites/a art/a.png gone.h include.h"},
	{"a glob of steps", {"s*/a"}, 1, 0,
	 "sized/a sprites/a art/a.png gone.h include.h"},
	{"two names", {"sized/a", "sounds/s"}, 2, 0,
	 "sized/a sounds/s art/a.png audio/s.wav"},
	{"rdeps of a source file: up to the bundle", {"art/a.png"}, 1, 1,
	 "bundle sized/a sprites/a art/a.png"},
	{"rdeps of a discovered file", {"include.h"}, 1, 1,
	 "bundle sprites/a include.h"},
	{"rdeps of the top step: itself", {"bundle"}, 1, 1, "bundle"},
};

static void
select_keeps_what_names_need_or_what_needs_them(void **state)
{
	char buf[512];
	const char *bad;

	(void)state;
	for (size_t i = 0; i < sizeof select_cases / sizeof select_cases[0]; i++) {
		struct graph *g = graph_made();
		assert_kiln(0, graph_select(g, (char *const *)select_cases[i].patterns,
		                            select_cases[i].n, select_cases[i].rdeps, &bad));
		if (strcmp(kept(g, buf, sizeof buf), select_cases[i].want) != 0)
			fail_msg("%s: kept '%s', expected '%s'", select_cases[i].name,
			         buf, select_cases[i].want);
		graph_free(g);
	}
}

static void
a_name_matching_nothing_is_named(void **state)
{
	struct graph *g = graph_made();
	char *pats[] = {"bundle", "nothing/**"};
	const char *bad = NULL;

	(void)state;
	assert_kiln(KILN_ENOTFOUND, graph_select(g, pats, 2, 0, &bad));
	assert_string_equal(bad, "nothing/**");
	graph_free(g);
}

static void
unknown_steps_are_refused(void **state)
{
	struct graph *g;

	(void)state;
	assert_kiln(0, graph_new(&plan, &g));
	assert_kiln(KILN_ENOTFOUND, graph_add(g, "no/step", "x", GE_INPUT, 0));
	assert_kiln(KILN_ENOTFOUND, graph_add(g, "bundle", "no/step", GE_NEED, 0));
	assert_kiln(0, graph_finish(g));
	graph_free(g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(edges_one_per_pair_declared_first),
		cmocka_unit_test(select_keeps_what_names_need_or_what_needs_them),
		cmocka_unit_test(a_name_matching_nothing_is_named),
		cmocka_unit_test(unknown_steps_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
