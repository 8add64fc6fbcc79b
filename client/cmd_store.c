/* cmd_store.c — the commands that work on the content store directly,
 * without a daemon: put, cat, fsck and gc.
 *
 * Each one parses its options, opens the store (only put may create one;
 * cat and a plain fsck open it read-only), does one library call per item
 * and turns the library's codes into lines a person can act on. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define STORE_OPTION_HELP                                                    \
	"  --store DIR          the store folder (default: <project>/.kiln/store,\n" \
	"                       where the project is the nearest folder upward\n" \
	"                       holding kiln.yaml, else the current folder)\n"    \
	"  -h, --help           show this help\n"

/* ---- put --------------------------------------------------------------- */

static const char put_usage[] = "usage: kiln put [--store DIR] FILE...\n";

static const char put_help[] =
	"usage: kiln put [--store DIR] FILE...\n"
	"\n"
	"Copy each FILE into the content store and print its hash, one line per\n"
	"file, as xxh128sum does: \"<32 hex digits>  <FILE>\". A FILE of \"-\"\n"
	"reads standard input. Creates the store when there is none yet. The\n"
	"blobs are not named by anything, so 'kiln gc' may remove them once\n"
	"their grace period is over.\n"
	"\n"
	"options:\n" STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln put art/hero.png              store a file, print its hash\n"
	"  kiln put sfx/*.wav > hashes.txt    store many\n"
	"  tar c levels/ | kiln put -         store standard input\n"
	"\n"
	"exit status: 0 every FILE stored; 2 a FILE could not be read, or the\n"
	"store could not be opened or written (the other FILEs are still stored\n"
	"unless the store itself failed).\n";

/* A failure that will fail every later put too: stop at the first. */
static int
put_is_fatal(int rv)
{
	return rv == KILN_ENOSPC || rv == KILN_ENOMEM || rv == KILN_EREADONLY ||
	       rv == KILN_EDB || rv == KILN_EACCES;
}

/* Open FILE ("-": stdin) into *fd, or say on stderr why not. Returns 0
 * or KILN_EINVAL. */
static int
put_input(const char *path, int *fd)
{
	struct stat st;

	*fd = STDIN_FILENO;
	if (strcmp(path, "-") != 0 &&
	    (*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0) {
		/* The OS's words are the clearest for a file that won't open. */
		cli_errorf("put", "%s: %s", path, strerror(errno));
		return KILN_EINVAL;
	}
	if (fstat(*fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		cli_errorf("put", "%s: is a folder (put takes files)", path);
		close(*fd);
		return KILN_EINVAL;
	}
	return 0;
}

/* Store what fd holds and print the line for path. Returns 0 or the
 * KILN_E* code of the failure, after saying on stderr what failed. */
static int
put_one(kiln_store *s, const char *path, int fd)
{
	char hex[KILN_ID_HEX_LEN + 1];
	kiln_id id;
	int rv;

	if ((rv = kiln_store_put_fd(s, fd, &id)) != 0) {
		cli_errorf("put", "%s: %s (store %s)", path, kiln_strerror(rv),
		           kiln_store_dir(s));
		return rv;
	}
	kiln_id_to_hex(&id, hex);
	printf("%s  %s\n", hex, path);
	return 0;
}

int
cmd_put(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct cli c = *cli;
	kiln_store *s = NULL;
	int ch, fd, rv, status = CLI_OK;

	while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S': c.store = optarg; break;
		case 'h': return cli_help(put_help);
		default: return cli_bad_option("put", put_usage, longopts, ch, argv);
		}
	}
	if (optind >= argc)
		return cli_usage("put", put_usage, "no FILE given (\"-\" reads stdin)");
	for (int i = optind; i < argc; i++) {
		if (put_input(argv[i], &fd) != 0) {
			status = CLI_USAGE;
			continue;
		}
		/* Opened (and created) only once there is something to put. */
		if (s == NULL &&
		    cli_store_open("put", &c, KILN_STORE_CREATE, &s) != CLI_OK)
			rv = KILN_ENOTFOUND;
		else
			rv = put_one(s, argv[i], fd);
		if (fd != STDIN_FILENO)
			close(fd);
		if (rv != 0)
			status = CLI_USAGE;
		if (s == NULL || put_is_fatal(rv))
			break;
	}
	kiln_store_close(s);
	return status;
}

/* ---- cat --------------------------------------------------------------- */

static const char cat_usage[] = "usage: kiln cat [--store DIR] HASH\n";

static const char cat_help[] =
	"usage: kiln cat [--store DIR] HASH\n"
	"\n"
	"Write the blob named HASH (32 hex digits, as 'kiln put' prints) to\n"
	"standard output. The blob is checked against its hash first: corrupt\n"
	"content is never written, not even in part. Never creates a store.\n"
	"\n"
	"options:\n" STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln cat 1b2c...e9f0 > hero.png\n"
	"  kiln cat \"$(kiln put hero.png | cut -d' ' -f1)\" | cmp - hero.png\n"
	"\n"
	"exit status: 0 written; 1 no such blob, or it is corrupt (nothing\n"
	"written; 'kiln fsck --repair' moves it aside); 2 bad usage, a malformed\n"
	"HASH, no usable store, or an I/O error.\n";

/* Parse a HASH argument, saying what a hash looks like when it is not. */
static int
hash_parse(const char *cmd, const char *arg, kiln_id *id)
{
	if (kiln_id_from_hex(arg, id) == 0)
		return CLI_OK;
	cli_errorf(cmd, "'%s': not a blob hash (expected %d hex digits, as "
	           "'kiln put' prints)", arg, KILN_ID_HEX_LEN);
	return CLI_USAGE;
}

int
cmd_cat(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct cli c = *cli;
	kiln_store *s;
	kiln_id id;
	int ch, rv;

	while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S': c.store = optarg; break;
		case 'h': return cli_help(cat_help);
		default: return cli_bad_option("cat", cat_usage, longopts, ch, argv);
		}
	}
	if (argc - optind != 1)
		return cli_usage("cat", cat_usage, "expected exactly one HASH");
	if ((rv = hash_parse("cat", argv[optind], &id)) != CLI_OK)
		return rv;
	if ((rv = cli_store_open("cat", &c, KILN_STORE_RDONLY, &s)) != CLI_OK)
		return rv;
	switch ((rv = kiln_store_copy_out(s, &id, STDOUT_FILENO))) {
	case 0:
		break;
	case KILN_ENOTFOUND:
		cli_errorf("cat", "%s: no such blob in the store %s", argv[optind],
		           kiln_store_dir(s));
		rv = CLI_PROBLEM;
		break;
	case KILN_ECORRUPT:
		cli_errorf("cat", "%s: the stored blob is corrupt (its content does "
		           "not hash to its name); nothing written. 'kiln fsck "
		           "--repair' moves it aside", argv[optind]);
		rv = CLI_PROBLEM;
		break;
	default:
		cli_errorf("cat", "%s: %s (reading the store %s or writing stdout)",
		           argv[optind], kiln_strerror(rv), kiln_store_dir(s));
		rv = CLI_USAGE;
		break;
	}
	kiln_store_close(s);
	return rv;
}

/* ---- fsck -------------------------------------------------------------- */

static const char fsck_usage[] = "usage: kiln fsck [--store DIR] [--repair]\n";

static const char fsck_help[] =
	"usage: kiln fsck [--store DIR] [--repair]\n"
	"\n"
	"Check that every blob re-hashes to its name and every index entry and\n"
	"action result names a sound blob. Prints one line per problem:\n"
	"  KIND  HASH  WHERE  [(repaired: ...)]\n"
	"where KIND is corrupt, missing, bad-record or stray and HASH is \"-\"\n"
	"when no blob is concerned, then a summary line. Without --repair the\n"
	"store is opened read-only and nothing is changed.\n"
	"\n"
	"options:\n"
	"  --repair             move corrupt blobs and stray files to\n"
	"                       <store>/corrupt/ (kept for forensics) and drop\n"
	"                       records that name bad or missing blobs or that\n"
	"                       cannot be decoded; nothing is invented (a\n"
	"                       rebuild puts the content back)\n"
	STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln fsck\n"
	"  kiln fsck --repair && kiln fsck\n"
	"\n"
	"exit status: 0 no problems; 1 problems found (even when repaired);\n"
	"2 bad usage, no usable store, or the check could not complete.\n";

static const char *
fsck_kind_name(enum kiln_fsck_kind kind)
{
	switch (kind) {
	case KILN_FSCK_CORRUPT: return "corrupt";
	case KILN_FSCK_MISSING: return "missing";
	case KILN_FSCK_BAD_RECORD: return "bad-record";
	case KILN_FSCK_STRAY: return "stray";
	}
	return "unknown";
}

/* What --repair did about a problem of this kind. */
static const char *
fsck_repair_name(enum kiln_fsck_kind kind)
{
	switch (kind) {
	case KILN_FSCK_CORRUPT:
	case KILN_FSCK_STRAY: return "moved to corrupt/";
	case KILN_FSCK_MISSING:
	case KILN_FSCK_BAD_RECORD: return "record dropped";
	}
	return "fixed";
}

/* kiln_fsck_fn: one line per problem on stdout. */
static void
fsck_print(const kiln_fsck_problem *p, void *arg)
{
	static const kiln_id zero;
	char hex[KILN_ID_HEX_LEN + 1] = "-";

	(void)arg;
	if (kiln_id_cmp(&p->id, &zero) != 0)
		kiln_id_to_hex(&p->id, hex);
	printf("%-10s  %s  %s", fsck_kind_name(p->kind), hex,
	       p->where ? p->where : "-");
	if (p->repaired)
		printf("  (repaired: %s)", fsck_repair_name(p->kind));
	putchar('\n');
}

/* The summary line; returns the number of problems. */
static uint64_t
fsck_summary(const kiln_fsck_stats *st, int repair)
{
	uint64_t n = st->corrupt + st->missing + st->bad_records + st->stray;
	char size[32];

	printf("checked %" PRIu64 " blob%s, %" PRIu64 " bytes (%s): ", st->blobs,
	       st->blobs == 1 ? "" : "s", st->bytes,
	       cli_format_size(st->bytes, size, sizeof(size)));
	if (n == 0) {
		puts("no problems");
		return 0;
	}
	printf("%" PRIu64 " problem%s (%" PRIu64 " corrupt, %" PRIu64
	       " missing, %" PRIu64 " bad records, %" PRIu64 " stray)",
	       n, n == 1 ? "" : "s", st->corrupt, st->missing, st->bad_records,
	       st->stray);
	if (repair)
		printf(", %" PRIu64 " repaired", st->repaired);
	putchar('\n');
	return n;
}

int
cmd_fsck(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"repair", no_argument, NULL, 'r'},
		{"store", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct cli c = *cli;
	kiln_fsck_stats st = {0};
	kiln_store *s;
	int ch, rv, repair = 0;

	while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r': repair = 1; break;
		case 'S': c.store = optarg; break;
		case 'h': return cli_help(fsck_help);
		default: return cli_bad_option("fsck", fsck_usage, longopts, ch, argv);
		}
	}
	if (optind < argc)
		return cli_usage("fsck", fsck_usage, "unexpected argument '%s'",
		                 argv[optind]);
	/* A plain check must not change anything, so it cannot. */
	if ((rv = cli_store_open("fsck", &c, repair ? 0 : KILN_STORE_RDONLY,
	                         &s)) != CLI_OK)
		return rv;
	if ((rv = kiln_store_fsck(s, repair, fsck_print, NULL, &st)) != 0) {
		fflush(stdout); /* the problems found so far, before the error */
		cli_errorf("fsck", "%s: the check stopped: %s", kiln_store_dir(s),
		           kiln_strerror(rv));
		rv = CLI_USAGE;
	} else if (fsck_summary(&st, repair) == 0) {
		rv = CLI_OK;
	} else {
		if (st.repaired < st.corrupt + st.missing + st.bad_records + st.stray)
			cli_errorf("fsck", "%s: run 'kiln fsck --repair' to move damaged "
			           "blobs aside and drop records naming them",
			           kiln_store_dir(s));
		rv = CLI_PROBLEM;
	}
	kiln_store_close(s);
	return rv;
}

/* ---- gc ---------------------------------------------------------------- */

static const char gc_usage[] =
	"usage: kiln gc [--store DIR] [--max-size SIZE] [--max-age DURATION]\n"
	"               [--grace DURATION] [--dry-run]\n";

static const char gc_help[] =
	"usage: kiln gc [--store DIR] [--max-size SIZE] [--max-age DURATION]\n"
	"               [--grace DURATION] [--dry-run]\n"
	"\n"
	"Remove blobs that nothing refers to, least recently used first, until\n"
	"the store holds at most SIZE bytes of blobs. Blobs named by an index\n"
	"entry or by an action result used within --max-age are kept; older\n"
	"action results are deleted. A blob used within --grace is never\n"
	"removed, so a build that is about to name it is safe.\n"
	"\n"
	"options:\n"
	"  --max-size SIZE      remove until the blobs total at most SIZE: bytes,\n"
	"                       or with a K, M, G or T suffix (powers of 1024):\n"
	"                       4096, 512M, 10G (default 0: remove every blob\n"
	"                       that is not rooted or within its grace period)\n"
	"  --max-age DURATION   how long an unused action result stays a root:\n"
	"                       seconds, or with s, m, h or d: 90, 12h, 30d\n"
	"                       (default 30d)\n"
	"  --grace DURATION     never remove a blob used this recently\n"
	"                       (default 5m)\n"
	"  -n, --dry-run        print what would be removed, remove nothing\n"
	STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln gc --dry-run                  what would a full collection free?\n"
	"  kiln gc --max-size 10G             shrink the store to 10 GiB\n"
	"  kiln gc --max-age 7d --grace 1h\n"
	"\n"
	"exit status: 0 done; 2 bad usage or no usable store.\n";

/* Parse --max-size's value, or say what was wrong with it. */
static int
gc_size(const char *arg, uint64_t *bytes)
{
	int rv = cli_parse_size(arg, bytes);

	if (rv == 0)
		return CLI_OK;
	return cli_usage("gc", gc_usage, "--max-size '%s': %s (examples: 4096, "
	                 "512M, 10G)", arg,
	                 rv == KILN_ERANGE ? "too large" : "not a size");
}

/* Parse a DURATION option's value, or say what was wrong with it. */
static int
gc_duration(const char *opt, const char *arg, int64_t *seconds)
{
	int rv = cli_parse_duration(arg, seconds);

	if (rv == 0)
		return CLI_OK;
	return cli_usage("gc", gc_usage, "%s '%s': %s (examples: 90, 5m, 12h, "
	                 "30d)", opt, arg,
	                 rv == KILN_ERANGE ? "too long" : "not a duration");
}

/* One line per blob gc removes (or would remove with --dry-run). */
static void
gc_print_removed(const kiln_id *id, uint64_t size, void *arg)
{
	const kiln_gc_opts *o = arg;
	char hex[KILN_ID_HEX_LEN + 1];

	kiln_id_to_hex(id, hex);
	printf("%s %s %llu bytes\n", o->dry_run ? "would remove" : "removed", hex,
	       (unsigned long long)size);
}

static void
gc_report(const kiln_gc_opts *o, const kiln_gc_stats *st)
{
	char removed[32], before[32], left[32];
	uint64_t nleft = st->blobs - st->removed_blobs;

	cli_format_size(st->removed_bytes, removed, sizeof(removed));
	cli_format_size(st->bytes, before, sizeof(before));
	cli_format_size(st->bytes - st->removed_bytes, left, sizeof(left));
	printf("%s %" PRIu64 " of %" PRIu64 " blob%s (%s of %s) and %" PRIu64
	       " expired action result%s\n",
	       o->dry_run ? "would remove" : "removed", st->removed_blobs,
	       st->blobs, st->blobs == 1 ? "" : "s", removed, before,
	       st->removed_actions, st->removed_actions == 1 ? "" : "s");
	printf("%s %" PRIu64 " blob%s (%s), %" PRIu64 " of them named by the "
	       "index or an action result\n",
	       o->dry_run ? "would keep" : "kept", nleft, nleft == 1 ? "" : "s",
	       left, st->rooted_blobs);
	if (o->max_size != 0 && st->bytes - st->removed_bytes > o->max_size)
		printf("the rest is rooted or within its grace period, so the store "
		       "stays above --max-size %s\n",
		       cli_format_size(o->max_size, left, sizeof(left)));
	if (o->dry_run)
		puts("dry run: nothing was removed");
}

int
cmd_gc(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"max-size", required_argument, NULL, 'M'},
		{"max-age", required_argument, NULL, 'A'},
		{"grace", required_argument, NULL, 'G'},
		{"dry-run", no_argument, NULL, 'n'},
		{"store", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	kiln_gc_opts o = {
		.max_size = 0,
		.action_max_age_s = 30 * 86400,
		.grace_s = 5 * 60,
	};
	struct cli c = *cli;
	kiln_gc_stats st = {0};
	kiln_store *s;
	int ch, rv = CLI_OK;

	while (rv == CLI_OK &&
	       (ch = getopt_long(argc, argv, ":hn", longopts, NULL)) != -1) {
		switch (ch) {
		case 'M': rv = gc_size(optarg, &o.max_size); break;
		case 'A':
			rv = gc_duration("--max-age", optarg, &o.action_max_age_s);
			break;
		case 'G': rv = gc_duration("--grace", optarg, &o.grace_s); break;
		case 'n': o.dry_run = 1; break;
		case 'S': c.store = optarg; break;
		case 'h': return cli_help(gc_help);
		default: return cli_bad_option("gc", gc_usage, longopts, ch, argv);
		}
	}
	if (rv != CLI_OK)
		return rv;
	if (optind < argc)
		return cli_usage("gc", gc_usage, "unexpected argument '%s'",
		                 argv[optind]);
	if ((rv = cli_store_open("gc", &c, 0, &s)) != CLI_OK)
		return rv;
	o.removed = gc_print_removed;
	o.arg = &o;
	if ((rv = kiln_store_gc(s, &o, &st)) != 0) {
		cli_errorf("gc", "%s: collection stopped: %s", kiln_store_dir(s),
		           kiln_strerror(rv));
		rv = CLI_USAGE;
	} else {
		gc_report(&o, &st);
	}
	kiln_store_close(s);
	return rv;
}
