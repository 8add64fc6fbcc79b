/* cli.c — helpers every kiln command shares: messages in one format,
 * usage and help, sizes and durations, and where the store is.
 *
 * Messages go to stderr as "kiln: <command>: <what>: <why>", so a user (or
 * a script's log) always sees which command, which file, hash or folder,
 * and what went wrong. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kiln_proto.h"

/* ---- messages ---------------------------------------------------------- */

static void
prefix(const char *cmd)
{
	if (cmd)
		fprintf(stderr, "kiln: %s: ", cmd);
	else
		fputs("kiln: ", stderr);
}

void
cli_error(const char *cmd, const char *what, int code)
{
	prefix(cmd);
	fprintf(stderr, "%s: %s\n", what, kiln_strerror(code));
}

void
cli_errorf(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	prefix(cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
cli_help(const char *text)
{
	fputs(text, stdout);
	return CLI_OK;
}

int
cli_usage(const char *cmd, const char *usage, const char *fmt, ...)
{
	va_list ap;

	if (fmt) {
		prefix(cmd);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fputs(usage, stderr);
	if (cmd)
		fprintf(stderr, "Run 'kiln %s --help' for details.\n", cmd);
	else
		fputs("Run 'kiln --help' for details.\n", stderr);
	return CLI_USAGE;
}

/* Whether word (a "--name=value" with namelen bytes of "--name") is a
 * long option of longopts that takes no value and has val. */
static int
long_takes_none(const struct option *longopts, const char *word, int namelen,
                int val)
{
	for (const struct option *o = longopts; o->name != NULL; o++)
		if (o->val == val && o->has_arg == no_argument &&
		    (int)strlen(o->name) == namelen - 2 &&
		    strncmp(o->name, word + 2, namelen - 2) == 0)
			return 1;
	return 0;
}

int
cli_bad_option(const char *cmd, const char *usage,
               const struct option *longopts, int c, char **argv)
{
	/* getopt has stepped past the offending word, unless the offence was
	 * a letter inside a cluster ("-xn"); then argv[optind-1] is the word
	 * before, and only optopt says what was wrong. */
	const char *word = argv[optind - 1];
	int namelen = (int)strcspn(word, "=");

	if (c == ':' && strncmp(word, "--", 2) == 0) /* it is the last word */
		return cli_usage(cmd, usage, "option '%s' needs a value", word);
	if (c == ':')
		return cli_usage(cmd, usage, "option '-%c' needs a value", optopt);
	if (optopt == 0) /* an unknown or ambiguous long option */
		return cli_usage(cmd, usage, "unknown option '%.*s'", namelen, word);
	if (word[namelen] == '=' && long_takes_none(longopts, word, namelen, optopt))
		return cli_usage(cmd, usage, "option '%.*s' takes no value",
		                 namelen, word);
	return cli_usage(cmd, usage, "unknown option '-%c'", optopt);
}

/* ---- values ------------------------------------------------------------ */

/* Parse the leading decimal digits of s into *n; *end gets the rest.
 * Signs, spaces and an empty number are refused (strtoull takes them). */
static int
parse_count(const char *s, uint64_t *n, const char **end)
{
	char *e;

	if (!isdigit((unsigned char)s[0]))
		return KILN_EINVAL;
	errno = 0;
	*n = strtoull(s, &e, 10);
	if (errno == ERANGE)
		return KILN_ERANGE;
	*end = e;
	return 0;
}

/* *n *= mul, refusing to overflow max. */
static int
scale(uint64_t *n, uint64_t mul, uint64_t max)
{
	if (mul != 0 && *n > max / mul)
		return KILN_ERANGE;
	*n *= mul;
	return 0;
}

int
cli_parse_size(const char *s, uint64_t *bytes)
{
	static const char units[] = "kmgt";
	const char *u, *p;
	uint64_t mul = 1;
	int rv;

	if ((rv = parse_count(s, bytes, &p)) != 0)
		return rv;
	if (*p != '\0' && (u = strchr(units, tolower((unsigned char)*p))) != NULL) {
		mul = (uint64_t)1 << (10 * (u - units + 1));
		p++;
		if (tolower((unsigned char)*p) == 'i') {
			p++;
			if (tolower((unsigned char)*p) != 'b')
				return KILN_EINVAL; /* "Ki" alone */
		}
	}
	if (tolower((unsigned char)*p) == 'b')
		p++;
	if (*p != '\0')
		return KILN_EINVAL;
	return scale(bytes, mul, UINT64_MAX);
}

int
cli_parse_duration(const char *s, int64_t *seconds)
{
	const char *p;
	uint64_t n, mul = 1;
	int rv;

	if ((rv = parse_count(s, &n, &p)) != 0)
		return rv;
	switch (*p) {
	case '\0': break;
	case 's': mul = 1; p++; break;
	case 'm': mul = 60; p++; break;
	case 'h': mul = 3600; p++; break;
	case 'd': mul = 86400; p++; break;
	default: return KILN_EINVAL;
	}
	if (*p != '\0')
		return KILN_EINVAL;
	if ((rv = scale(&n, mul, INT64_MAX)) != 0)
		return rv;
	*seconds = (int64_t)n;
	return 0;
}

char *
cli_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int i = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%.1f %s", v, units[i]);
	return buf;
}

/* ---- the store --------------------------------------------------------- */

int
cli_project_dir(const char *given, char *dir, size_t len)
{
	if (given != NULL) {
		if ((size_t)snprintf(dir, len, "%s", given) >= len)
			return KILN_ERANGE;
		return 0;
	}
	return kiln_project_find(dir, len);
}

int
cli_store_dir(const char *given, char *buf, size_t len)
{
	char project[PATH_MAX];
	int rv;

	if (given != NULL) {
		if ((size_t)snprintf(buf, len, "%s", given) >= len)
			return KILN_ERANGE;
		return 0;
	}
	if ((rv = kiln_project_find(project, sizeof(project))) != 0)
		return rv;
	if ((size_t)snprintf(buf, len, "%s/.kiln/store",
	                     strcmp(project, "/") == 0 ? "" : project) >= len)
		return KILN_ERANGE;
	return 0;
}

/* mkdir -p path. *made is set when path itself did not exist before.
 * Returns 0, or -1 with errno set, like mkdir(2), so that the caller can
 * give the OS's reason ("Not a directory"). */
static int
mkdirs(const char *path, int *made)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	*made = 0;
	if (n == 0 || n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, 0777) == 0)
			*made = c == '\0';
		else if (errno != EEXIST)
			return -1;
		if (c == '\0')
			return 0;
		*p = c;
	}
}

/* Say why the store at dir did not open, in words a user can act on. */
static void
open_error(const char *cmd, const char *dir, int rv)
{
	switch (rv) {
	case KILN_ENOTFOUND:
		cli_errorf(cmd, "%s: no kiln store here ('kiln put' creates one; "
		           "--store DIR picks another)", dir);
		break;
	case KILN_ENOTSTORE:
		cli_errorf(cmd, "%s: not a kiln store: the folder holds other files "
		           "and no kiln-store marker (refusing to touch it)", dir);
		break;
	case KILN_EVERSION:
		cli_errorf(cmd, "%s: the store was written by a newer version of "
		           "kiln than this one (%s); refusing to touch it", dir,
		           KILN_VERSION);
		break;
	case KILN_ECORRUPT:
		cli_errorf(cmd, "%s/db/data.mdb: the store's database is damaged (cut "
		           "short, or a page overwritten); run 'kiln fsck --repair' to "
		           "set it aside and start a new one (blobs are kept; the next "
		           "build rebuilds the records)", dir);
		break;
	case KILN_EBUSY:
		cli_errorf(cmd, "%s: the store is in use by another process (a "
		           "running kilnd: 'kiln stop' first; or a kiln gc, put, "
		           "fsck), and this needs it alone", dir);
		break;
	default:
		cli_errorf(cmd, "%s: cannot open the store: %s", dir,
		           kiln_strerror(rv));
		break;
	}
}

int
cli_store_open(const char *cmd, const struct cli *cli, unsigned flags,
               kiln_store **sp)
{
	int why;

	return cli_store_open_why(cmd, cli, flags, sp, &why);
}

int
cli_store_open_why(const char *cmd, const struct cli *cli, unsigned flags,
                   kiln_store **sp, int *why)
{
	kiln_store_opts opts = {.flags = flags, .durability = KILN_DURABLE_FSYNC};
	char dir[PATH_MAX];
	struct stat st;
	int rv, made = 0;

	*why = 0;
	*sp = NULL;
	if ((rv = cli_store_dir(cli->store, dir, sizeof(dir))) != 0) {
		cli_error(cmd, "finding the store folder", rv);
		return CLI_USAGE;
	}
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		cli_errorf(cmd, "%s: not a kiln store: not a folder", dir);
		return CLI_USAGE;
	}
	if ((flags & KILN_STORE_CREATE) && mkdirs(dir, &made) != 0) {
		cli_errorf(cmd, "%s: cannot create the store folder: %s", dir,
		           strerror(errno));
		return CLI_USAGE;
	}
	if ((rv = kiln_store_open(dir, &opts, sp)) != 0) {
		*why = rv;
		open_error(cmd, dir, rv);
		if (made)
			rmdir(dir); /* leave no trace of a failed put */
		*sp = NULL;
		return CLI_USAGE;
	}
	if (made)
		cli_errorf(cmd, "created a new store in %s", dir);
	return CLI_OK;
}

/* ---- the daemon -------------------------------------------------------- */

/* The first line of --token-file into buf. */
static int
token_read(const char *cmd, const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (f == NULL) {
		cli_errorf(cmd, "--token-file %s: %s", path, strerror(errno));
		return CLI_USAGE;
	}
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	return CLI_OK;
}

/* Whether a TLS file given cannot be read, after saying so: libkiln only
 * knows that a TLS setting failed, not which file or why. */
static int
tls_file_check(const char *cmd, const char *option, const char *path)
{
	if (path == NULL || access(path, R_OK) == 0)
		return 0;
	cli_errorf(cmd, "%s %s: %s", option, path, strerror(errno));
	return 1;
}

int
cli_token_read(const char *cmd, const char *path, char *buf, size_t len)
{
	return token_read(cmd, path, buf, len);
}

int
cli_chdir(const char *cmd, const char *dir)
{
	if (dir == NULL || chdir(dir) == 0)
		return CLI_OK;
	cli_errorf(cmd, "%s: %s", dir, strerror(errno));
	return CLI_USAGE;
}

/* Whether a project holds the current folder: without one, a daemon
 * started here would serve a folder that is no project (and leave a
 * .kiln/ behind), so say so instead. */
static int
project_check(const char *cmd)
{
	char dir[PATH_MAX], yaml[PATH_MAX + 16];
	int rv;

	if ((rv = kiln_project_find(dir, sizeof dir)) != 0) {
		cli_error(cmd, "finding the project", rv);
		return CLI_USAGE;
	}
	snprintf(yaml, sizeof yaml, "%s/kiln.yaml", strcmp(dir, "/") ? dir : "");
	if (access(yaml, F_OK) == 0)
		return CLI_OK;
	cli_errorf(cmd, "no kiln.yaml in %s or any folder above it: not in a "
	           "kiln project (cd into one, or give -C DIR)", dir);
	return CLI_USAGE;
}

int
cli_connect(const char *cmd, const struct cli *cli, int start, kiln_conn **c)
{
	kiln_connect_opts o = {.url = cli->connect, .tls_ca = cli->tls_ca,
	                       .tls_cert = cli->tls_cert, .tls_key = cli->tls_key};
	char token[256];
	int rv;

	*c = NULL;
	if (start && cli->connect == NULL && project_check(cmd) != CLI_OK)
		return CLI_USAGE;
	if (cli->connect != NULL && (tls_file_check(cmd, "--tls-ca", cli->tls_ca) ||
	    tls_file_check(cmd, "--tls-cert", cli->tls_cert) ||
	    tls_file_check(cmd, "--tls-key", cli->tls_key)))
		return CLI_USAGE;
	if (cli->token_file != NULL) {
		if (token_read(cmd, cli->token_file, token, sizeof(token)) != CLI_OK)
			return CLI_USAGE;
		o.token = token;
	}
	o.flags = start ? 0 : KILN_CONNECT_NO_START;
	if ((rv = kiln_connect(&o, c)) == 0)
		return CLI_OK;
	/* No daemon (or none possible: a project path too long for a unix
	 * socket): the caller works on the store directly. */
	if ((rv == KILN_ENODAEMON || rv == KILN_ERANGE) && !start &&
	    cli->connect == NULL)
		return CLI_OK;
	if (rv == KILN_ENODAEMON && cli->connect != NULL)
		cli_errorf(cmd, "%s: no daemon answers there", cli->connect);
	else if (rv == KILN_ENODAEMON)
		cli_errorf(cmd, "no daemon answers and none could be started (is "
		           "kilnd next to kiln, on PATH, or named by $KILND?)");
	else if (rv == KILN_ERANGE)
		cli_errorf(cmd, "the project's path is too long for a unix socket "
		           "(at most %d bytes with /.kiln/kilnd.sock)",
		           KILN_SOCK_PATH_MAX);
	else
		cli_error(cmd, cli->connect ? cli->connect : "connecting to the "
		          "daemon", rv);
	return CLI_USAGE;
}

void
cli_daemon_error(const char *cmd, const char *what, kiln_conn *c, int rv)
{
	const char *words = c != NULL ? kiln_conn_error(c) : "";

	if (words[0] != '\0')
		cli_errorf(cmd, "%s: %s (%s)", what, words, kiln_strerror(rv));
	else
		cli_error(cmd, what, rv);
}

json_t *
cli_outputs_json(const kiln_step_output *o, size_t n, int *err)
{
	char hex[KILN_ID_HEX_LEN + 1];
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *it = json_object();
		kiln_id_to_hex(&o[i].id, hex);
		*err |= kiln_json_text(it, "name", o[i].name);
		*err |= kiln_json_text(it, "hash", hex);
		*err |= kiln_json_uint(it, "size", o[i].size);
		*err |= kiln_json_text(it, "path", o[i].path);
		*err |= kiln_json_push(arr, it);
	}
	return arr;
}
