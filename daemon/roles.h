/* roles.h — who may send what: the role a request's token grants, and the
 * one table of which requests each role may send (docs/protocol.md,
 * "Roles").
 *
 * A request over the ipc socket (private to the daemon's user) is admin;
 * over tcp:// or tls+tcp:// its role is the one whose token it carries,
 * or none. Threads: everything here reads only what main.c fixed before
 * serving, so any thread may call it. */
#ifndef KILND_ROLES_H
#define KILND_ROLES_H

#include <stddef.h>

#include "kiln_proto.h"

enum kilnd_role {
	ROLE_NONE = 0, /* no token, or one no role has */
	ROLE_CLIENT,   /* --token-file: what a user's kiln does, but not stop */
	ROLE_AGENT,    /* --agent-token-file: agent requests, blobs, status */
	ROLE_ADMIN,    /* --admin-token-file, and the ipc socket: everything */
	ROLE_COUNT,
};

/* Agent requests are the Request oneof fields numbered in this range
 * (kiln.proto reserves it), whether or not this daemon knows them yet. */
#define ROLE_AGENT_FIRST 50
#define ROLE_AGENT_LAST 59

/* One role's secret: the first line of its token file. len 0: the role
 * has no token (nobody gets it over the network). */
struct role_token {
	char secret[256];
	size_t len;
};

/* The role whose token t is (tokens indexed by role; ROLE_NONE's is
 * unused), or ROLE_NONE. Every configured token is compared in full, in
 * time independent of where t differs from it. */
enum kilnd_role role_of_token(const struct role_token tokens[ROLE_COUNT],
                              const char *t);

/* Whether role r may send a request of type body. ROLE_NONE may send
 * nothing; ROLE_ADMIN anything. */
int role_allows(enum kilnd_role r, Kiln__Request__BodyCase body);

/* "client", "agent", "admin" or "no" (for ROLE_NONE). */
const char *role_name(enum kilnd_role r);

#endif
