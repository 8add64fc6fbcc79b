/* test_roles — the permission table (daemon/roles.c): what each role may
 * send, and which role a token grants. */
#include <stdio.h>
#include <string.h>

#include "roles.h"
#include "testutil.h"

#define C ROLE_CLIENT
#define G ROLE_AGENT
#define A ROLE_ADMIN

static void
who_may_send_what(void **state)
{
	static const struct {
		int body;          /* a Request body case (its field number) */
		const char *name;
		int client, agent; /* admin may send anything */
	} cases[] = {
		{KILN__REQUEST__BODY_STATUS, "status", 1, 1},
		{KILN__REQUEST__BODY_STOP, "stop", 0, 0},
		{KILN__REQUEST__BODY_UI, "ui", 0, 0},
		{KILN__REQUEST__BODY_BLOB_HAS, "blob_has", 1, 1},
		{KILN__REQUEST__BODY_BLOB_GET, "blob_get", 1, 1},
		{KILN__REQUEST__BODY_BLOB_PUT, "blob_put", 1, 1},
		{KILN__REQUEST__BODY_SUBSCRIBE, "subscribe", 1, 0},
		{KILN__REQUEST__BODY_UNSUBSCRIBE, "unsubscribe", 1, 0},
		{KILN__REQUEST__BODY_POLL, "poll", 1, 0},
		{KILN__REQUEST__BODY_BUILD, "build", 1, 0},
		{KILN__REQUEST__BODY_CANCEL, "cancel", 1, 0},
		{KILN__REQUEST__BODY_BUILD_STATUS, "build_status", 1, 0},
		{KILN__REQUEST__BODY_WHY, "why", 1, 0},
		{KILN__REQUEST__BODY_DEPS, "deps", 1, 0},
		{KILN__REQUEST__BODY_RDEPS, "rdeps", 1, 0},
		/* a tool on an agent asks through its agent (docs/agents.md) */
		{KILN__REQUEST__BODY_NEED, "need", 1, 1},
		{KILN__REQUEST__BODY_HOLD, "hold", 1, 0},
		{50, "the first agent request", 0, 1},
		{55, "an agent request", 0, 1},
		{59, "the last agent request", 0, 1},
		{49, "an engine request not in the table yet", 0, 0},
		{60, "a request past the agents' range", 0, 0},
		{KILN__REQUEST__BODY__NOT_SET, "no request", 0, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		Kiln__Request__BodyCase b = (Kiln__Request__BodyCase)cases[i].body;
		if (role_allows(C, b) != cases[i].client)
			fail_msg("client and %s: expected %s", cases[i].name,
			         cases[i].client ? "allowed" : "refused");
		if (role_allows(G, b) != cases[i].agent)
			fail_msg("agent and %s: expected %s", cases[i].name,
			         cases[i].agent ? "allowed" : "refused");
		if (!role_allows(A, b))
			fail_msg("admin and %s: refused", cases[i].name);
		if (role_allows(ROLE_NONE, b))
			fail_msg("no role and %s: allowed", cases[i].name);
	}
}

static void
set(struct role_token *t, const char *s)
{
	snprintf(t->secret, sizeof t->secret, "%s", s);
	t->len = strlen(s);
}

static void
tokens_grant_their_role(void **state)
{
	struct role_token t[ROLE_COUNT] = {0};

	(void)state;
	set(&t[C], "client-0123456789abcdef");
	set(&t[A], "admin-0123456789abcdef");
	/* no agent token: nobody is an agent, not even with an empty token */
	assert_int_equal(role_of_token(t, "client-0123456789abcdef"), C);
	assert_int_equal(role_of_token(t, "admin-0123456789abcdef"), A);
	assert_int_equal(role_of_token(t, ""), ROLE_NONE);
	/* a prefix, an extension, one byte off: no role */
	assert_int_equal(role_of_token(t, "client-0123456789abcde"), ROLE_NONE);
	assert_int_equal(role_of_token(t, "client-0123456789abcdef0"), ROLE_NONE);
	assert_int_equal(role_of_token(t, "client-0123456789abcdeF"), ROLE_NONE);
	set(&t[G], "agent-0123456789abcdef");
	assert_int_equal(role_of_token(t, "agent-0123456789abcdef"), G);
	assert_string_equal(role_name(G), "agent");
	assert_string_equal(role_name(ROLE_NONE), "no");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(who_may_send_what),
		cmocka_unit_test(tokens_grant_their_role),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
