/* cmd_stepgraph.c — `kiln graph`: the step graph of a profile as Graphviz dot
 * or JSON. Declared dependencies (source inputs, prerequisite steps) come
 * from the descriptions, loaded here; discovered ones (depfiles, traced
 * file accesses, `kiln need`) and the last build's outcome of each step
 * from the project's daemon, which alone has them (stepgraph.h holds the
 * graph itself). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "stepgraph.h"
#include "kiln.h"

static const char graph_usage[] =
	"usage: kiln graph [URL|GLOB...] [-C DIR] [-p PROFILE] "
	"[--format dot|json] [--rdeps]\n";
static const char graph_help[] =
	"usage: kiln graph [URL|GLOB...] [-C DIR] [-p PROFILE] "
	"[--format dot|json] [--rdeps]\n"
	"\n"
	"Print the step graph of a profile: steps (boxes) and the files they\n"
	"read (notes), with an edge from each dependency to the step that\n"
	"depends on it. Solid edges are declared (a source input, a\n"
	"prerequisite step); dashed ones were discovered by the last run (a\n"
	"depfile, a traced file access, `kiln need`). A step whose last build\n"
	"failed is drawn red. With URLs or globs (also file paths), only what\n"
	"they need; with --rdeps, only what depends on them.\n"
	"\n"
	"  kiln graph | dot -Tsvg > graph.svg\n"
	"  kiln graph ui/atlas --format json\n"
	"  kiln graph --rdeps 'art/ui/*.png'\n"
	"\n"
	"options:\n"
	"  -C, --project DIR    the project folder (default: the nearest folder\n"
	"                       upward holding kiln.yaml)\n"
	"  -p, --profile NAME   the profile (default: the first in kiln.yaml)\n"
	"  -f, --format FORMAT  dot (default) or json: {\"profile\", \"nodes\":\n"
	"                       [{\"id\", \"kind\": \"step\"|\"file\", ...}],\n"
	"                       \"edges\": [{\"from\", \"to\", \"kind\": \"input\"|\n"
	"                       \"prerequisite\"|\"discovered\"|\"need\"}]}\n"
	"  -r, --rdeps          what depends on the named nodes instead\n"
	"\n"
	"exit status: 0 printed; 1 the daemon could not answer; 2 bad usage,\n"
	"errors in the descriptions, or a name that matches nothing.\n";

struct graph_opts {
	const char *dir, *profile;
	int json, rdeps;
	int helped;         /* --help was printed: nothing else to do */
	char **patterns;
	size_t npatterns;
};

static const char *const edge_kinds[] = {"input", "prerequisite",
                                         "discovered", "need"};
static const char *const states[] = {"unknown", "ran", "reused", "failed"};

static int
graph_parse(int argc, char **argv, struct graph_opts *o)
{
	static const struct option longopts[] = {
		{"project", required_argument, NULL, 'C'},
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"format", required_argument, NULL, 'f'},
		{"rdeps", no_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":C:p:f:rh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': o->dir = optarg; break;
		case 'p': o->profile = optarg; break;
		case 'r': o->rdeps = 1; break;
		case 'f':
			if (strcmp(optarg, "dot") != 0 && strcmp(optarg, "json") != 0)
				return cli_usage("graph", graph_usage, "--format: "
				                 "'%s' is neither dot nor json", optarg);
			o->json = strcmp(optarg, "json") == 0;
			break;
		case 'h': o->helped = 1; return cli_help(graph_help);
		default: return cli_bad_option("graph", graph_usage, longopts, ch, argv);
		}
	}
	o->patterns = argv + optind;
	o->npatterns = (size_t)(argc - optind);
	return CLI_CONTINUE;
}

/* One step's discovered dependencies and last outcome, from the daemon.
 * A step the daemon does not know (its descriptions differ from ours)
 * is left as the descriptions say. */
static int
step_ask(kiln_conn *c, struct graph *g, const char *profile, const char *url)
{
	static const enum gstate decided[] = {GS_RAN, GS_REUSED, GS_FAILED};
	kiln_deps_info d;
	kiln_why_info w;
	int rv;

	if ((rv = kiln_why(c, profile, url, &w)) == 0 && (unsigned)w.decision < 3)
		graph_state(g, url, decided[w.decision]);
	else if (rv != 0 && rv != KILN_ENOTFOUND)
		return rv;
	if ((rv = kiln_deps(c, profile, url, &d)) == KILN_ENOTFOUND)
		return 0;
	if (rv != 0)
		return rv;
	for (size_t i = 0; i < d.nfiles && rv == 0; i++)
		rv = graph_add(g, url, d.files[i].path, GE_DISCOVERED,
		               d.files[i].missing);
	for (size_t i = 0; i < d.nneeds && rv == 0; i++)
		rv = graph_add(g, url, d.needs[i].url, GE_NEED, 0);
	/* a need of a step these descriptions lack: not drawable, not fatal */
	return rv == KILN_ENOTFOUND ? 0 : rv;
}

static int
graph_declared(struct graph *g, const kiln_plan *p)
{
	int rv = 0;

	for (size_t i = 0; i < p->nsteps && rv == 0; i++) {
		const kiln_step *s = &p->steps[i];
		for (size_t j = 0; j < s->ninputs && rv == 0; j++)
			rv = graph_add(g, s->url, s->inputs[j], GE_INPUT, 0);
		for (size_t j = 0; j < s->nneeds && rv == 0; j++)
			rv = graph_add(g, s->url, s->needs[j], GE_PREREQ, 0);
	}
	return rv;
}

/* Write s as a dot double-quoted string's content. */
static void
dot_str(const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if (*s != '\n')
			putchar(*s);
	}
}

static void
dot_id(const struct gnode *n)
{
	fputs(n->kind == GN_STEP ? "\"step:" : "\"file:", stdout);
	dot_str(n->name);
	putchar('"');
}

static void
dot_node(const struct gnode *n)
{
	putchar('\t');
	dot_id(n);
	fputs(" [label=\"", stdout);
	dot_str(n->name);
	if (n->kind == GN_STEP) {
		fputs("\\n", stdout);
		dot_str(n->step->tool ? n->step->tool->name : "");
		if (n->state == GS_FAILED)
			fputs("\\nFAILED\", color=red, fontcolor=red, penwidth=2, "
			      "style=\"filled\", fillcolor=\"#fde0e0\"", stdout);
		else
			putchar('"');
		fputs(", shape=box", stdout);
	} else {
		fputs(n->missing ? "\\n(missing)\", style=dotted" : "\"", stdout);
		fputs(", shape=note, fontsize=9", stdout);
	}
	puts("];");
}

static void
graph_dot(const struct graph *g, const char *profile)
{
	size_t nn, ne;
	const struct gnode *n = graph_nodes(g, &nn);
	const struct gedge *e = graph_edges(g, &ne);

	fputs("digraph \"kiln ", stdout);
	dot_str(profile);
	puts("\" {\n\trankdir=LR;\n\tnode [fontname=\"sans-serif\", fontsize=10];");
	for (size_t i = 0; i < nn; i++)
		if (n[i].keep)
			dot_node(&n[i]);
	for (size_t i = 0; i < ne; i++) {
		if (!n[e[i].from].keep || !n[e[i].to].keep)
			continue;
		putchar('\t');
		dot_id(&n[e[i].from]);
		fputs(" -> ", stdout);
		dot_id(&n[e[i].to]);
		if (e[i].kind == GE_DISCOVERED)
			fputs(" [style=dashed]", stdout);
		else if (e[i].kind == GE_NEED)
			fputs(" [style=dashed, label=\"need\"]", stdout);
		puts(";");
	}
	puts("}");
}

/* obj[key] = "step:NAME" or "file:NAME" */
static int
json_id(json_t *obj, const char *key, const struct gnode *n)
{
	char id[PATH_MAX + 8];

	snprintf(id, sizeof id, "%s:%s", n->kind == GN_STEP ? "step" : "file",
	         n->name);
	return kiln_json_text(obj, key, id);
}

static json_t *
json_node(const struct gnode *n, int *err)
{
	json_t *o = json_object();

	*err |= json_id(o, "id", n);
	*err |= kiln_json_text(o, "name", n->name);
	if (n->kind == GN_STEP) {
		*err |= kiln_json_text(o, "kind", "step");
		*err |= kiln_json_text(o, "tool", n->step->tool ? n->step->tool->name : "");
		*err |= kiln_json_text(o, "state", states[n->state]);
	} else {
		*err |= kiln_json_text(o, "kind", "file");
		*err |= kiln_json_bool(o, "missing", n->missing);
	}
	return o;
}

static void
graph_json(const struct graph *g, const char *profile)
{
	size_t nn, ne;
	const struct gnode *n = graph_nodes(g, &nn);
	const struct gedge *e = graph_edges(g, &ne);
	json_t *o = json_object(), *nodes = json_array(), *edges = json_array();
	int err = 0;

	err |= kiln_json_text(o, "profile", profile);
	for (size_t i = 0; i < nn; i++)
		if (n[i].keep)
			err |= kiln_json_push(nodes, json_node(&n[i], &err));
	err |= kiln_json_put(o, "nodes", nodes);
	for (size_t i = 0; i < ne; i++) {
		json_t *it;
		if (!n[e[i].from].keep || !n[e[i].to].keep)
			continue;
		it = json_object();
		err |= json_id(it, "from", &n[e[i].from]);
		err |= json_id(it, "to", &n[e[i].to]);
		err |= kiln_json_text(it, "kind", edge_kinds[e[i].kind]);
		err |= kiln_json_push(edges, it);
	}
	err |= kiln_json_put(o, "edges", edges);
	if (kiln_json_print(stdout, o, err) != 0)
		fprintf(stderr, "kiln graph: could not write JSON\n");
}

/* Fill g from the descriptions and the daemon. */
static int
graph_fill(const struct cli *cli, struct graph *g, const kiln_plan *p)
{
	kiln_conn *c;
	int rv;

	if ((rv = graph_declared(g, p)) != 0) {
		cli_error("graph", "the declared dependencies", rv);
		return CLI_USAGE;
	}
	if ((rv = cli_connect("graph", cli, 1, &c)) != CLI_OK)
		return rv;
	for (size_t i = 0; i < p->nsteps; i++)
		if ((rv = step_ask(c, g, p->profile, p->steps[i].url)) != 0) {
			cli_daemon_error("graph", p->steps[i].url, c, rv);
			kiln_close(c);
			return CLI_PROBLEM;
		}
	kiln_close(c);
	if ((rv = graph_finish(g)) != 0) {
		cli_error("graph", "making the graph", rv);
		return CLI_PROBLEM;
	}
	return CLI_OK;
}

int
cmd_graph(const struct cli *cli, int argc, char **argv)
{
	struct graph_opts o = {0};
	const kiln_plan *p;
	const char *profile, *bad;
	struct graph *g = NULL;
	kiln_desc *d;
	size_t nwarn;
	int rv;

	if ((rv = graph_parse(argc, argv, &o)) != CLI_CONTINUE || o.helped)
		return rv;
	/* the daemon is the one of the project found from here */
	if (o.dir != NULL && chdir(o.dir) != 0) {
		cli_errorf("graph", "%s: %s", o.dir, strerror(errno));
		return CLI_USAGE;
	}
	if ((rv = cli_project_load("graph", NULL, &d, &nwarn)) != CLI_OK)
		return rv;
	if (kiln_desc_nerrors(d) != 0 ||
	    (profile = cli_profile_pick("graph", d, o.profile)) == NULL ||
	    (p = kiln_desc_plan(d, profile)) == NULL) {
		kiln_desc_free(d);
		return CLI_USAGE;
	}
	if ((rv = graph_new(p, &g)) != 0) {
		cli_error("graph", "making the graph", rv);
		rv = CLI_PROBLEM;
	} else if ((rv = graph_fill(cli, g, p)) == CLI_OK) {
		if ((rv = graph_select(g, o.patterns, o.npatterns, o.rdeps, &bad)) != 0) {
			cli_errorf("graph", "%s: no step or file of profile %s matches",
			           bad ? bad : "?", profile);
			rv = rv == KILN_ENOTFOUND ? CLI_USAGE : CLI_PROBLEM;
		} else {
			(o.json ? graph_json : graph_dot)(g, profile);
		}
	}
	graph_free(g);
	kiln_desc_free(d);
	return rv;
}
