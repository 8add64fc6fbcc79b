/* cli.h — what the kiln command-line program shares between its commands.
 *
 * The program is main.c (global options, the command table) plus one
 * cmd_<area>.c per group of commands. A command is a function
 * cmd_<name>(cli, argc, argv) that gets argv[0] = its own name, parses its
 * options with getopt_long, and returns the process's exit status; it never
 * exits itself (only main.c does). Everything it prints about failures goes
 * through cli_error/cli_errorf so that every message reads
 * "kiln: <command>: <what>: <why>" on stderr. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln.h"
#include "kiln_json.h"
#include "kiln_store.h"
#include "kiln_desc.h"
#include "kiln_json.h"

#define KILN_VERSION "0.1.0"

/* The exit statuses every command uses. */
enum cli_exit {
	CLI_CONTINUE = -1, /* not an exit: an option parser's "the options are
	                    * fine, go on with the command" */
	CLI_OK = 0,      /* did what was asked, found nothing wrong */
	CLI_PROBLEM = 1, /* ran, and found problems (corrupt or missing data) */
	CLI_USAGE = 2,   /* bad usage, bad input, or an unusable environment */
	CLI_COUNTS = 3,  /* kiln build with KILN_CHECK_COUNTS=1: its summary
	                    disagrees with its step events (count_check.h) */
};

/* Options given before the command name, in force for every command. */
struct cli {
	const char *store;      /* --store DIR, or NULL for the project default */
	const char *connect;    /* --connect URL: a remote daemon */
	const char *token_file; /* --token-file FILE: its token */
	const char *tls_ca;     /* --tls-ca FILE: its CA (tls+tcp://) */
	const char *tls_cert;   /* --tls-cert FILE: our certificate, for a */
	const char *tls_key;    /* daemon that asks for one; --tls-key FILE */
};

/* ---- commands (cmd_store.c) ------------------------------------------ */

/* kiln put FILE...: store files, print "<hash>  <FILE>" per file. */
int cmd_put(const struct cli *cli, int argc, char **argv);
/* kiln cat HASH: write a verified blob to stdout. */
int cmd_cat(const struct cli *cli, int argc, char **argv);
/* kiln fsck [--repair]: check every blob and record. */
int cmd_fsck(const struct cli *cli, int argc, char **argv);
/* kiln gc [...]: remove unrooted blobs. */
int cmd_gc(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_daemon.c) ----------------------------------------- */

/* kiln status [--json]: the daemon's state (starting it if need be). */
int cmd_status(const struct cli *cli, int argc, char **argv);
/* kiln ui [-C DIR] [--port N] [--listen ADDR] [--open]: the dashboard. */
int cmd_ui(const struct cli *cli, int argc, char **argv);
/* kiln stop: stop the daemon and wait until it is gone. */
int cmd_stop(const struct cli *cli, int argc, char **argv);
int cmd_hold(const struct cli *cli, int argc, char **argv);
int cmd_release(const struct cli *cli, int argc, char **argv);
/* kiln events [...]: print the daemon's events as they come. */
int cmd_events(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_build.c) -------------------------------------------- */

/* kiln build [URL|GLOB...] [-C DIR] [-p PROFILE] [-j N] [-k] [-n] [--json] */
int cmd_build(const struct cli *cli, int argc, char **argv);
int cmd_watch(const struct cli *cli, int argc, char **argv);
/* kiln why URL [-p PROFILE]: why the last build ran or reused a step. */
int cmd_why(const struct cli *cli, int argc, char **argv);
/* kiln log URL [-p PROFILE]: the step's tool output from its last run. */
int cmd_log(const struct cli *cli, int argc, char **argv);
/* kiln deps URL: a step's declared and discovered dependencies. */
int cmd_deps(const struct cli *cli, int argc, char **argv);
/* kiln rdeps PATH|URL [--all]: the steps depending on a file or step. */
int cmd_rdeps(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_audit.c) -------------------------------------------- */

/* kiln audit [URL|GLOB...] [-C DIR] [-p PROFILE] [--sample N] [--seed S]:
 * run recorded steps again, report those whose outputs differ. */
int cmd_audit(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_trace.c) -------------------------------------------- */

/* kiln trace [BUILD] [-C DIR] [-o FILE]: a build's timeline. */
int cmd_trace(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_need.c) --------------------------------------------- */

/* kiln need URL [--output NAME]: from inside a step, another step's output. */
int cmd_need(const struct cli *cli, int argc, char **argv);

/* ---- commands (cmd_agent.c) -------------------------------------------- */
/* kiln agent --connect URL [--token-file F] [-j N] [--cache DIR]: run a
 * daemon's steps on this machine. */
int cmd_agent(const struct cli *cli, int argc, char **argv);

/* The first line of a token file into buf (says why on failure). CLI_OK
 * or CLI_USAGE. */
int cli_token_read(const char *cmd, const char *path, char *buf, size_t len);

/* ---- messages ---------------------------------------------------------- */

/* Print "kiln: <cmd>: <what>: <kiln_strerror(code)>" on stderr. cmd may be
 * NULL for messages about kiln itself. */
void cli_error(const char *cmd, const char *what, int code);

/* Print "kiln: <cmd>: " and the formatted text, then a newline, on stderr. */
void cli_errorf(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A command's --help: print text on stdout. Returns CLI_OK. */
int cli_help(const char *text);

/* Bad usage: print the message (if fmt is not NULL), the usage synopsis
 * and a pointer to --help on stderr. Returns CLI_USAGE. */
int cli_usage(const char *cmd, const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* getopt_long with longopts returned c = '?' or ':' (optstring starts
 * with ':' and opterr is 0): say which option was wrong and how, then the
 * usage. Returns CLI_USAGE. */
int cli_bad_option(const char *cmd, const char *usage,
                   const struct option *longopts, int c, char **argv);


/* ---- values ------------------------------------------------------------ */

/* Parse a size: plain bytes, or a number with a K, M, G or T suffix
 * (powers of 1024, any case, optionally followed by "B" or "iB"): "4096",
 * "512M", "10GiB". Returns 0 or KILN_EINVAL (malformed) or KILN_ERANGE
 * (does not fit in 64 bits). */
int cli_parse_size(const char *s, uint64_t *bytes);

/* Parse a duration: seconds, or a number with an s, m, h or d suffix:
 * "90", "5m", "30d". Returns 0, KILN_EINVAL or KILN_ERANGE. */
int cli_parse_duration(const char *s, int64_t *seconds);

/* Format bytes for people ("512 B", "1.5 MiB") into buf. Returns buf. */
char *cli_format_size(uint64_t bytes, char *buf, size_t len);

/* ---- the project -------------------------------------------------------- */

/* The project folder: given (-C DIR) when not NULL, else the nearest folder
 * upward from the current one holding kiln.yaml, else the current folder.
 * Returns 0, KILN_ERANGE or KILN_EIO. */
int cli_project_dir(const char *given, char *buf, size_t len);

/* kiln check [-C DIR] [-p PROFILE]: load and validate the descriptions. */
int cmd_check(const struct cli *cli, int argc, char **argv);
/* Look up every tool's program as a build from this shell would
 * (check_programs.c); print a warning for each that cannot be run.
 * Returns the number of warnings. */
size_t check_programs(const kiln_desc *d);
/* kiln ls [-C DIR] [-p PROFILE] [--json]: list the steps of a profile. */
int cmd_ls(const struct cli *cli, int argc, char **argv);
/* Load the project in given (NULL: found as cli_project_dir does), print
 * its diagnostics on stderr; *nwarn counts the warnings. CLI_OK, or
 * CLI_USAGE with *d NULL when it could not be read at all. */
int cli_project_load(const char *cmd, const char *given, kiln_desc **d,
                     size_t *nwarn);
/* The profile to use: given (must exist, else says so) or the first.
 * NULL after an error. */
const char *cli_profile_pick(const char *cmd, const kiln_desc *d,
                             const char *given);

/* ---- commands (cmd_complete.c) ----------------------------------------- */

/* kiln __complete commands|profiles|urls [-C DIR] [-p PROFILE]: words for
 * the bash completion, one a line; commands are the table's names. */
int cmd_complete(const struct cli *cli, int argc, char **argv,
                 const char *const *commands, size_t ncommands);

/* ---- commands (cmd_graph.c) -------------------------------------------- */

/* kiln graph [URL|GLOB...] [-C DIR] [-p PROFILE] [--format dot|json]
 * [--rdeps]: the step graph, declared and discovered edges. */
int cmd_graph(const struct cli *cli, int argc, char **argv);

/* ---- the store --------------------------------------------------------- */

/* The store folder to use: given when not NULL, else
 * <project>/.kiln/store, where the project is the nearest folder upward
 * from the current one that holds kiln.yaml, else the current folder.
 * Writes it into buf. Returns 0, KILN_ERANGE or KILN_EIO. */
int cli_store_dir(const char *given, char *buf, size_t len);

/* Resolve the store folder (as cli_store_dir) and open it with flags
 * (kiln_store_flags). With KILN_STORE_CREATE, missing folders on the way
 * are made first. On failure, says why on stderr, naming the folder, and
 * returns CLI_USAGE; *sp is then NULL. Returns CLI_OK on success. */
int cli_store_open(const char *cmd, const struct cli *cli, unsigned flags,
                   kiln_store **sp);
/* cli_store_open, and *why the library's code when the open failed (0
 * otherwise): fsck tells a damaged database (KILN_ECORRUPT) apart. */
int cli_store_open_why(const char *cmd, const struct cli *cli, unsigned flags,
                       kiln_store **sp, int *why);

/* ---- the daemon -------------------------------------------------------- */

/* Connect to the daemon: the project's (started when none answers, if
 * start is set) or --connect's. Returns CLI_OK with *c set; CLI_OK with *c
 * NULL when start is not set and no project daemon runs (the caller works
 * offline); or says why on stderr and returns CLI_USAGE — also when start
 * is set and no folder from here upward holds kiln.yaml (no daemon is
 * started outside a project). */
int cli_connect(const char *cmd, const struct cli *cli, int start,
                kiln_conn **c);

/* -C DIR: make dir (NULL: stay) the current folder, where the project is
 * looked for. CLI_OK, or CLI_USAGE after saying why. */
int cli_chdir(const char *cmd, const char *dir);

/* Say on stderr why a request to the daemon failed, with the daemon's own
 * words when it gave any. */
void cli_daemon_error(const char *cmd, const char *what, kiln_conn *c, int rv);

/* A step event's outputs for --json (build and events print the same):
 * [{"name","hash","size","path"}...]; *err |= KILN_ENOMEM on failure. */
json_t *cli_outputs_json(const kiln_step_output *o, size_t n, int *err);

#endif
