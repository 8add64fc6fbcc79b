/* cmd_audit.c — kiln audit [URL|GLOB...] [-C DIR] [-p PROFILE] [--sample N]
 * [--seed S] [--json]: run recorded steps again and report every one whose
 * outputs differ from the recorded ones (docs/build.md, "kiln audit"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char audit_usage[] =
	"usage: kiln audit [URL|GLOB...] [-C DIR] [-p PROFILE] [--sample N]\n"
	"                  [--seed S] [--json]\n";

static const char audit_help[] =
	"usage: kiln audit [URL|GLOB...] [-C DIR] [-p PROFILE] [--sample N]\n"
	"                  [--seed S] [--json]\n"
	"\n"
	"Run steps whose results are recorded again, in scratch folders, and\n"
	"compare what they make with the recorded outputs: a tool that writes\n"
	"different bytes from the same inputs (a time stamp, a random number, its\n"
	"output path) breaks caching for everyone. Nothing is published: build/,\n"
	"the index and the records stay as they are. Run it after a build; the\n"
	"steps run one at a time, and builds wait until the audit ends.\n"
	"\n"
	"  -C, --directory DIR  the project folder\n"
	"  -p, --profile NAME   the profile (default: the first in kiln.yaml)\n"
	"      --sample N       run N of the matched steps, picked at random\n"
	"      --seed S         pick the sample with seed S (the same steps again)\n"
	"      --json           one JSON object per step run, then a summary\n"
	"\n"
	"Exit status: 0 every step made its recorded outputs; 1 a step's outputs\n"
	"differ, or its tool failed; 2 usage errors, nothing built yet, or files\n"
	"changed since the last build.\n"
	"\n"
	"example: kiln audit --sample 20 'textures/**'\n";

struct audit_args {
	const char *dir;
	kiln_audit_opts o;
	int json;
};

static int
audit_args(int argc, char **argv, struct audit_args *a)
{
	static const struct option longopts[] = {
		{"directory", required_argument, NULL, 'C'},
		{"profile", required_argument, NULL, 'p'},
		{"sample", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long long v;
	char *end;
	int ch;

	while ((ch = getopt_long(argc, argv, ":C:p:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': a->dir = optarg; break;
		case 'p': a->o.profile = optarg; break;
		case 'J': a->json = 1; break;
		case 'n':
		case 's':
			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (*optarg == '\0' || *optarg == '-' || *end != '\0' || errno != 0 ||
			    (ch == 'n' && (v == 0 || v > 1000000)))
				return cli_usage("audit", audit_usage, "%s: not a number in "
				                 "range: '%s'", ch == 'n' ? "--sample" : "--seed",
				                 optarg);
			if (ch == 'n')
				a->o.sample = (uint32_t)v;
			else
				a->o.seed = v;
			break;
		case 'h': return cli_help(audit_help) == CLI_OK ? CLI_CONTINUE : CLI_USAGE;
		default: return cli_bad_option("audit", audit_usage, longopts, ch, argv);
		}
	}
	a->o.targets = (const char *const *)argv + optind;
	a->o.ntargets = (size_t)(argc - optind);
	a->o.path = getenv("PATH");
	return CLI_OK;
}

static const char *
verdict_word(kiln_audit_verdict v)
{
	return v == KILN_AUDIT_SAME ? "same" : v == KILN_AUDIT_DIFFERENT ? "different"
	     : "failed";
}

static void
step_text(const kiln_audit_step *s)
{
	char rec[KILN_ID_HEX_LEN + 1], got[KILN_ID_HEX_LEN + 1];

	if (s->verdict == KILN_AUDIT_FAILED) {
		printf("FAILED %s: %s\n", s->url, s->error);
		return;
	}
	if (s->verdict != KILN_AUDIT_DIFFERENT)
		return;
	printf("DIFFERENT %s\n", s->url);
	for (size_t k = 0; k < s->noutputs; k++) {
		const kiln_audit_output *o = &s->outputs[k];
		kiln_id_to_hex(&o->recorded, rec);
		if (o->has_got)
			kiln_id_to_hex(&o->got, got);
		printf("  output %s: recorded %s (%" PRIu64 " bytes), this run %s",
		       o->name, rec, o->recorded_size, o->has_got ? got : "(no file)");
		if (o->has_got)
			printf(" (%" PRIu64 " bytes)", o->got_size);
		putchar('\n');
	}
}

static void
step_json(const kiln_audit_step *s)
{
	char hex[KILN_ID_HEX_LEN + 1];
	json_t *o = json_object(), *outs = json_array();
	int err = 0;

	err |= kiln_json_text(o, "event", "audit-step");
	err |= kiln_json_text(o, "url", s->url);
	err |= kiln_json_text(o, "verdict", verdict_word(s->verdict));
	err |= kiln_json_ms(o, "duration_ms", (double)s->duration_ns / 1e6);
	if (s->verdict == KILN_AUDIT_FAILED)
		err |= kiln_json_text(o, "error", s->error);
	for (size_t k = 0; k < s->noutputs; k++) {
		const kiln_audit_output *out = &s->outputs[k];
		json_t *it = json_object();
		err |= kiln_json_text(it, "name", out->name);
		kiln_id_to_hex(&out->recorded, hex);
		err |= kiln_json_text(it, "recorded", hex);
		err |= kiln_json_uint(it, "recorded_size", out->recorded_size);
		if (out->has_got) {
			kiln_id_to_hex(&out->got, hex);
			err |= kiln_json_text(it, "got", hex);
			err |= kiln_json_uint(it, "got_size", out->got_size);
		} else {
			err |= kiln_json_null(it, "got");
		}
		err |= kiln_json_push(outs, it);
	}
	err |= kiln_json_put(o, "outputs", outs);
	if (kiln_json_print(stdout, o, err) != 0)
		fprintf(stderr, "kiln: could not write a step's JSON\n");
}

/* Print the answer; the exit status it means. */
static int
audit_print(const struct audit_args *args, const kiln_audit_info *a)
{
	unsigned same = 0, diff = 0, failed = 0;

	for (size_t i = 0; i < a->nsteps; i++) {
		const kiln_audit_step *s = &a->steps[i];
		same += s->verdict == KILN_AUDIT_SAME;
		diff += s->verdict == KILN_AUDIT_DIFFERENT;
		failed += s->verdict == KILN_AUDIT_FAILED;
		if (args->json)
			step_json(s);
		else
			step_text(s);
	}
	if (args->json) {
		json_t *o = json_object();
		int err = 0;
		err |= kiln_json_text(o, "event", "audit");
		err |= kiln_json_text(o, "profile", a->profile);
		err |= kiln_json_uint(o, "cached", a->cached);
		err |= kiln_json_uint(o, "not_audited", a->not_audited);
		err |= kiln_json_uint(o, "audited", a->nsteps);
		err |= kiln_json_uint(o, "same", same);
		err |= kiln_json_uint(o, "different", diff);
		err |= kiln_json_uint(o, "failed", failed);
		err |= kiln_json_uint(o, "seed", a->seed);
		if (kiln_json_print(stdout, o, err) != 0)
			fprintf(stderr, "kiln: could not write the audit's JSON\n");
	} else {
		printf("audited %zu of %u recorded steps of profile %s", a->nsteps,
		       a->cached, a->profile);
		if (args->o.sample > 0)
			printf(" (sample seed %" PRIu64 ")", a->seed);
		printf(": %u same, %u different, %u failed", same, diff, failed);
		if (a->not_audited > 0)
			printf("; %u not audited (never built, bundles, folder outputs, or they use kiln need)",
			       a->not_audited);
		putchar('\n');
	}
	return diff > 0 || failed > 0 ? CLI_PROBLEM : CLI_OK;
}

int
cmd_audit(const struct cli *cli, int argc, char **argv)
{
	struct audit_args args = {0};
	kiln_audit_info a;
	kiln_conn *c;
	int rv;

	if ((rv = audit_args(argc, argv, &args)) != CLI_OK)
		return rv == CLI_CONTINUE ? CLI_OK : rv;
	if (args.dir != NULL && chdir(args.dir) != 0) {
		cli_errorf("audit", "%s: %s", args.dir, strerror(errno));
		return CLI_USAGE;
	}
	if ((rv = cli_connect("audit", cli, 1, &c)) != CLI_OK)
		return rv;
	if ((rv = kiln_audit(c, &args.o, &a)) != 0) {
		const char *why = kiln_conn_error(c);
		if (rv == KILN_EBUSY || rv == KILN_ENOTFOUND || rv == KILN_EINVAL)
			cli_errorf("audit", "%s", why[0] ? why : kiln_strerror(rv));
		else
			cli_daemon_error("audit", "auditing", c, rv);
		kiln_close(c);
		return rv == KILN_EBUSY ? CLI_PROBLEM : rv == KILN_ENOTFOUND ||
		       rv == KILN_EINVAL ? CLI_USAGE : CLI_PROBLEM;
	}
	rv = audit_print(&args, &a);
	fflush(stdout);
	kiln_audit_free(&a);
	kiln_close(c);
	return rv;
}
