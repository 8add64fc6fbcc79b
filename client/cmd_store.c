/* cmd_store.c — the commands that work on the content store: put, cat,
 * fsck and gc.
 *
 * put and cat go through the project's daemon when one runs (so that its
 * subscribers hear of new blobs, and remote daemons can be reached with
 * --connect), and open the store directly when none does or --store names
 * one. fsck and gc always work on the store directly. Each command parses
 * its options, does one library call per item and turns the library's
 * codes into lines a person can act on. */
#include <errno.h>
#include <limits.h>
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

static const char put_usage[] =
	"usage: kiln put [--store DIR] FILE...\n"
	"       kiln put [--store DIR] [-p PROFILE] --url URL FILE\n";

static const char put_help[] =
	"usage: kiln put [--store DIR] FILE...\n"
	"       kiln put [--store DIR] [-p PROFILE] --url URL FILE\n"
	"\n"
	"Copy each FILE into the content store and print its hash, one line per\n"
	"file, as xxh128sum does: \"<32 hex digits>  <FILE>\". A FILE of \"-\"\n"
	"reads standard input. When the project's daemon runs, the bytes are\n"
	"streamed to it (it checks they hash to what kiln computed, and tells\n"
	"its subscribers); otherwise the store is written directly, and created\n"
	"when there is none yet. Unless named with --url, the blobs are not named\n"
	"by anything, so 'kiln gc' may remove them once their grace period is\n"
	"over.\n"
	"\n"
	"options:\n"
	"  --url URL            name the blob URL in the index (one FILE only)\n"
	"  -p, --profile NAME   the profile of that name (default \"default\")\n"
	STORE_OPTION_HELP
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
	       rv == KILN_EDB || rv == KILN_EACCES || rv == KILN_ECLOSED ||
	       rv == KILN_ETIMEDOUT;
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

/* Where put sends its files: the daemon, or the store it opened. */
struct put_dest {
	kiln_conn *conn;      /* the daemon, or NULL */
	kiln_store *store;    /* opened on the first file when no daemon */
	const kiln_name *name; /* --url */
};

/* Store what fd holds (and name it) and print the line for path. Returns 0
 * or the KILN_E* code of the failure, after saying on stderr what failed. */
static int
put_one(struct put_dest *d, const char *path, int fd)
{
	char hex[KILN_ID_HEX_LEN + 1];
	kiln_id id;
	int rv;

	if (d->conn != NULL) {
		if ((rv = kiln_blob_put_fd(d->conn, fd, d->name, &id)) != 0) {
			cli_daemon_error("put", path, d->conn, rv);
			return rv;
		}
	} else if ((rv = kiln_store_put_fd(d->store, fd, &id)) != 0 ||
	           (d->name && (rv = kiln_store_index_set(d->store,
	                        d->name->profile, d->name->url, &id)) != 0)) {
		cli_errorf("put", "%s: %s (store %s)", path, kiln_strerror(rv),
		           kiln_store_dir(d->store));
		return rv;
	}
	kiln_id_to_hex(&id, hex);
	printf("%s  %s\n", hex, path);
	return 0;
}

/* Check --url and --profile. */
static int
put_name_check(const kiln_name *name, int nfiles)
{
	if (kiln_url_check(name->url) != 0)
		return cli_usage("put", put_usage, "--url '%s': not a valid URL "
		                 "('/'-separated, relative, no '.' or '..' parts)",
		                 name->url);
	if (kiln_profile_check(name->profile) != 0)
		return cli_usage("put", put_usage, "--profile '%s': not a valid "
		                 "profile name", name->profile);
	if (nfiles != 1)
		return cli_usage("put", put_usage, "--url names one FILE; %d given",
		                 nfiles);
	return CLI_OK;
}

int
cmd_put(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 'S'},
		{"url", required_argument, NULL, 'u'},
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	kiln_name name = {.profile = "default"};
	struct put_dest d = {0};
	struct cli c = *cli;
	int ch, fd, rv, status = CLI_OK;

	while ((ch = getopt_long(argc, argv, ":hp:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S': c.store = optarg; break;
		case 'u': name.url = optarg; break;
		case 'p': name.profile = optarg; break;
		case 'h': return cli_help(put_help);
		default: return cli_bad_option("put", put_usage, longopts, ch, argv);
		}
	}
	if (optind >= argc)
		return cli_usage("put", put_usage, "no FILE given (\"-\" reads stdin)");
	if (name.url != NULL) {
		if ((rv = put_name_check(&name, argc - optind)) != CLI_OK)
			return rv;
		d.name = &name;
	}
	if (c.store == NULL && (rv = cli_connect("put", &c, 0, &d.conn)) != CLI_OK)
		return rv;
	for (int i = optind; i < argc; i++) {
		if (put_input(argv[i], &fd) != 0) {
			status = CLI_USAGE;
			continue;
		}
		/* Opened (and created) only once there is something to put. */
		if (d.conn == NULL && d.store == NULL &&
		    cli_store_open("put", &c, KILN_STORE_CREATE, &d.store) != CLI_OK)
			rv = KILN_ENOTFOUND;
		else
			rv = put_one(&d, argv[i], fd);
		if (fd != STDIN_FILENO)
			close(fd);
		if (rv != 0)
			status = CLI_USAGE;
		if ((d.conn == NULL && d.store == NULL) || put_is_fatal(rv))
			break;
	}
	kiln_store_close(d.store);
	kiln_close(d.conn);
	return status;
}

/* ---- cat --------------------------------------------------------------- */

static const char cat_usage[] =
	"usage: kiln cat [--store DIR] [-p PROFILE] HASH|URL\n";

static const char cat_help[] =
	"usage: kiln cat [--store DIR] [-p PROFILE] HASH|URL\n"
	"\n"
	"Write a stored blob to standard output: the blob named HASH (32 hex\n"
	"digits, as 'kiln put' prints), or the one the index names URL in the\n"
	"profile. The blob is checked against its hash first: corrupt content is\n"
	"never written, not even in part. Served by the project's daemon when\n"
	"one runs, read from the store directly otherwise. Never creates a\n"
	"store and never starts a daemon.\n"
	"\n"
	"options:\n"
	"  -p, --profile NAME   the profile URL is looked up in (default\n"
	"                       \"default\")\n"
	STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln cat 1b2c...e9f0 > hero.png\n"
	"  kiln cat -p pc sprites/hero > hero.png\n"
	"  kiln cat \"$(kiln put hero.png | cut -d' ' -f1)\" | cmp - hero.png\n"
	"\n"
	"exit status: 0 written; 1 no such blob or URL, or the blob is corrupt\n"
	"(nothing written; 'kiln fsck --repair' moves it aside); 2 bad usage, a\n"
	"malformed HASH or URL, no usable store or daemon, or an I/O error.\n";

/* What cat was asked for: a hash, or a URL in a profile. */
struct cat_what {
	const char *arg;
	int by_name;
	kiln_id id;
	kiln_name name;
};

/* Whether arg looks like a mistyped hash: hex digits only, nearly the
 * right length. Such an argument is refused rather than looked up. */
static int
looks_like_hash(const char *arg)
{
	size_t n = strspn(arg, "0123456789abcdefABCDEF");

	return arg[n] == '\0' && n >= 16 && n <= 64;
}

/* Parse a HASH|URL argument, saying what they look like when it is
 * neither. */
static int
cat_parse(const char *arg, struct cat_what *w)
{
	w->arg = arg;
	if (kiln_id_from_hex(arg, &w->id) == 0)
		return CLI_OK;
	if (!looks_like_hash(arg) && kiln_url_check(arg) == 0) {
		if (kiln_profile_check(w->name.profile) != 0)
			return cli_usage("cat", cat_usage, "--profile '%s': not a valid "
			                 "profile name", w->name.profile);
		w->by_name = 1;
		w->name.url = arg;
		return CLI_OK;
	}
	cli_errorf("cat", "'%s': not a blob hash (expected %d hex digits, as "
	           "'kiln put' prints) nor a URL", arg, KILN_ID_HEX_LEN);
	return CLI_USAGE;
}

/* The exit status for a failed cat, after saying why. */
static int
cat_failed(const struct cat_what *w, int rv, const char *where, kiln_conn *c)
{
	switch (rv) {
	case KILN_ENOTFOUND:
		if (w->by_name)
			cli_errorf("cat", "%s: no such URL in profile %s (%s)", w->arg,
			           w->name.profile, where);
		else
			cli_errorf("cat", "%s: no such blob in the store (%s)", w->arg,
			           where);
		return CLI_PROBLEM;
	case KILN_ECORRUPT:
		cli_errorf("cat", "%s: the stored blob is corrupt (its content does "
		           "not hash to its name); nothing written. 'kiln fsck "
		           "--repair' moves it aside", w->arg);
		return CLI_PROBLEM;
	default:
		if (c != NULL)
			cli_daemon_error("cat", w->arg, c, rv);
		else
			cli_errorf("cat", "%s: %s (reading the store %s or writing "
			           "stdout)", w->arg, kiln_strerror(rv), where);
		return CLI_USAGE;
	}
}

/* kiln_sink_fn writing to stdout. */
static int
stdout_sink(const void *buf, size_t len, void *arg)
{
	(void)arg;
	return kiln_write_all(STDOUT_FILENO, buf, len);
}

/* cat served by the daemon. */
static int
cat_daemon(kiln_conn *c, const struct cat_what *w)
{
	int rv;

	if (w->by_name)
		rv = kiln_blob_get_name(c, &w->name, stdout_sink, NULL, NULL);
	else
		rv = kiln_blob_get(c, &w->id, stdout_sink, NULL);
	return rv == 0 ? CLI_OK : cat_failed(w, rv, "the daemon's store", c);
}

/* cat from the store, opened here. */
static int
cat_offline(const struct cli *c, const struct cat_what *w)
{
	kiln_store *s;
	kiln_id id = w->id;
	int rv;

	if ((rv = cli_store_open("cat", c, KILN_STORE_RDONLY, &s)) != CLI_OK)
		return rv;
	if (w->by_name)
		rv = kiln_store_index_get(s, w->name.profile, w->name.url, &id);
	if (rv == 0)
		rv = kiln_store_copy_out(s, &id, STDOUT_FILENO);
	if (rv != 0)
		rv = cat_failed(w, rv, kiln_store_dir(s), NULL);
	kiln_store_close(s);
	return rv;
}

int
cmd_cat(const struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, 'S'},
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct cat_what w = {.name.profile = "default"};
	struct cli c = *cli;
	kiln_conn *conn = NULL;
	int ch, rv;

	while ((ch = getopt_long(argc, argv, ":hp:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S': c.store = optarg; break;
		case 'p': w.name.profile = optarg; break;
		case 'h': return cli_help(cat_help);
		default: return cli_bad_option("cat", cat_usage, longopts, ch, argv);
		}
	}
	if (argc - optind != 1)
		return cli_usage("cat", cat_usage, "expected exactly one HASH or URL");
	if ((rv = cat_parse(argv[optind], &w)) != CLI_OK)
		return rv;
	if (c.store == NULL && (rv = cli_connect("cat", &c, 0, &conn)) != CLI_OK)
		return rv;
	if (conn == NULL)
		return cat_offline(&c, &w);
	rv = cat_daemon(conn, &w);
	kiln_close(conn);
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
	"                       rebuild puts the content back); a damaged\n"
	"                       database file (db/data.mdb cut short or with a\n"
	"                       bad page) is moved to <store>/corrupt/ and a new,\n"
	"                       empty database started (blobs are kept; the next\n"
	"                       build rebuilds the records). Stop the daemon first.\n"
	STORE_OPTION_HELP
	"\n"
	"examples:\n"
	"  kiln fsck\n"
	"  kiln fsck --repair && kiln fsck\n"
	"\n"
	"exit status: 0 no problems; 1 problems found (even when repaired, but\n"
	"for a damaged database --repair set aside: then 0 if the rest is sound);\n"
	"2 bad usage, no usable store, or the check could not complete.\n";

static const char *
fsck_kind_name(enum kiln_fsck_kind kind)
{
	switch (kind) {
	case KILN_FSCK_CORRUPT: return "corrupt";
	case KILN_FSCK_MISSING: return "missing";
	case KILN_FSCK_BAD_RECORD: return "bad-record";
	case KILN_FSCK_STRAY: return "stray";
	case KILN_FSCK_SHA256: return "sha256";
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
	case KILN_FSCK_SHA256: return "recomputed from the content";
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
	uint64_t n = st->corrupt + st->missing + st->bad_records + st->stray +
	             st->sha256;
	char size[32];

	printf("checked %" PRIu64 " blob%s, %" PRIu64 " bytes (%s): ", st->blobs,
	       st->blobs == 1 ? "" : "s", st->bytes,
	       cli_format_size(st->bytes, size, sizeof(size)));
	if (n == 0) {
		puts("no problems");
		return 0;
	}
	printf("%" PRIu64 " problem%s (%" PRIu64 " corrupt, %" PRIu64
	       " missing, %" PRIu64 " bad records, %" PRIu64 " stray, %" PRIu64
	       " sha256)",
	       n, n == 1 ? "" : "s", st->corrupt, st->missing, st->bad_records,
	       st->stray, st->sha256);
	if (repair)
		printf(", %" PRIu64 " repaired", st->repaired);
	putchar('\n');
	return n;
}

/* Open the store for fsck. A damaged database file (KILN_ECORRUPT, said
 * on stderr by the open) is a finding: a plain check stops there with
 * CLI_PROBLEM; a repair moves the file into corrupt/ and opens the store
 * again with a new, empty database, to check the blobs. */
static int
fsck_open(const struct cli *c, int repair, kiln_store **sp)
{
	char dir[PATH_MAX], moved[PATH_MAX];
	int rv, why;

	/* A plain check must not change anything, so it cannot. */
	/* A repair needs the store alone: moving files a running kilnd has
	 * open would lose what it writes next. */
	rv = cli_store_open_why("fsck", c, KILN_STORE_CHECK_PAGES |
	                        (repair ? KILN_STORE_EXCLUSIVE : KILN_STORE_RDONLY),
	                        sp, &why);
	if (rv == CLI_OK || why != KILN_ECORRUPT)
		return rv;
	if (!repair)
		return CLI_PROBLEM;
	if ((rv = cli_store_dir(c->store, dir, sizeof dir)) != 0 ||
	    (rv = kiln_store_db_set_aside(dir, moved, sizeof moved)) != 0) {
		cli_errorf("fsck", "%s: cannot set the damaged database aside: %s", dir,
		           kiln_strerror(rv));
		return CLI_USAGE;
	}
	cli_errorf("fsck", "repaired: the damaged database was moved to %s; a new "
	           "one starts empty (the next build rebuilds its records)", moved);
	return cli_store_open("fsck", c, KILN_STORE_CHECK_PAGES | KILN_STORE_EXCLUSIVE, sp);
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
	if ((rv = fsck_open(&c, repair, &s)) != CLI_OK)
		return rv;
	if ((rv = kiln_store_fsck(s, repair, fsck_print, NULL, &st)) != 0) {
		fflush(stdout); /* the problems found so far, before the error */
		cli_errorf("fsck", "%s: the check stopped: %s", kiln_store_dir(s),
		           kiln_strerror(rv));
		rv = CLI_USAGE;
	} else if (fsck_summary(&st, repair) == 0) {
		rv = CLI_OK;
	} else {
		if (st.repaired < st.corrupt + st.missing + st.bad_records + st.stray +
		                  st.sha256)
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
