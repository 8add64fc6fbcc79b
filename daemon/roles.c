/* roles.c — the permission table: which request each role may send, and
 * which role a token grants. This is the only place that says so; the
 * dispatch (handlers.c) asks role_allows before it runs a handler.
 *
 * A request type missing from the table is refused to the client and
 * agent roles (admin may send anything): a request added later is closed
 * to remote tokens until someone decides, here, who may send it. The
 * agents' requests (fields 50..59) need no row: the range is theirs. */
#include <string.h>

#include "roles.h"

#define CLIENT (1u << ROLE_CLIENT)
#define AGENT (1u << ROLE_AGENT)

static const struct {
	Kiln__Request__BodyCase body;
	unsigned roles; /* besides admin */
} table[] = {
	{KILN__REQUEST__BODY_STATUS, CLIENT | AGENT},
	{KILN__REQUEST__BODY_STOP, 0},
	{KILN__REQUEST__BODY_UI, 0},
	/* agents move inputs and outputs as blobs */
	{KILN__REQUEST__BODY_BLOB_HAS, CLIENT | AGENT},
	{KILN__REQUEST__BODY_BLOB_GET, CLIENT | AGENT},
	{KILN__REQUEST__BODY_BLOB_PUT, CLIENT | AGENT},
	{KILN__REQUEST__BODY_SUBSCRIBE, CLIENT},
	{KILN__REQUEST__BODY_UNSUBSCRIBE, CLIENT},
	{KILN__REQUEST__BODY_POLL, CLIENT},
	{KILN__REQUEST__BODY_BUILD, CLIENT},
	{KILN__REQUEST__BODY_CANCEL, CLIENT},
	{KILN__REQUEST__BODY_BUILD_STATUS, CLIENT},
	{KILN__REQUEST__BODY_WHY, CLIENT},
	{KILN__REQUEST__BODY_AUDIT, CLIENT},
	{KILN__REQUEST__BODY_DEPS, CLIENT},
	{KILN__REQUEST__BODY_RDEPS, CLIENT},
	/* a step's tool on an agent asks through its agent (docs/agents.md) */
	{KILN__REQUEST__BODY_NEED, CLIENT | AGENT},
	{KILN__REQUEST__BODY_HOLD, CLIENT},
};

int
role_allows(enum kilnd_role r, Kiln__Request__BodyCase body)
{
	if (r == ROLE_ADMIN)
		return 1;
	if (r != ROLE_CLIENT && r != ROLE_AGENT)
		return 0;
	if ((int)body >= ROLE_AGENT_FIRST && (int)body <= ROLE_AGENT_LAST)
		return r == ROLE_AGENT;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].body == body)
			return (table[i].roles & (1u << r)) != 0;
	return 0;
}

/* Whether t is the secret s, in time independent of where they differ
 * (it depends only on the secret's length). */
static int
token_equal(const struct role_token *s, const char *t, size_t n)
{
	unsigned diff = n != s->len;

	for (size_t i = 0; i < s->len; i++)
		diff |= (unsigned char)s->secret[i] ^
		        (unsigned char)(i < n ? t[i] : 0);
	return diff == 0 && s->len > 0;
}

enum kilnd_role
role_of_token(const struct role_token tokens[ROLE_COUNT], const char *t)
{
	enum kilnd_role found = ROLE_NONE;
	size_t n = strlen(t);

	/* no early exit: which role matched must not show in the time it
	 * took (main.c refuses two roles with one token, so at most one) */
	for (int r = ROLE_CLIENT; r < ROLE_COUNT; r++)
		if (token_equal(&tokens[r], t, n))
			found = (enum kilnd_role)r;
	return found;
}

const char *
role_name(enum kilnd_role r)
{
	switch (r) {
	case ROLE_CLIENT: return "client";
	case ROLE_AGENT: return "agent";
	case ROLE_ADMIN: return "admin";
	default: return "no";
	}
}
