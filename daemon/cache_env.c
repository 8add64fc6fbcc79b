/* cache_env.c — KILN_CACHE_* in kilnd's environment, for one machine's
 * shared cache over the user's file and the project's kiln.yaml (the
 * engine merges the three: remote.c). kilnd gets the environment of the
 * `kiln` that started it, so these are the user's shell's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_env.h"
#include "kiln_desc.h"

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A file named in the environment must be absolute: the shell that set
 * it had its own folder, which the daemon does not know. */
static int
abs_file(const char *name, const char *v, char *err, size_t len)
{
	if (v == NULL || v[0] == '/')
		return 0;
	snprintf(err, len, "%s='%s': expected an absolute path", name, v);
	return KILN_EINVAL;
}

static int
duration(const char *name, const char *v, char *err, size_t len)
{
	uint32_t s;

	if (v == NULL || kiln_duration_parse(v, &s) == 0)
		return 0;
	snprintf(err, len, "%s='%s': expected a duration such as 30s or 2m", name, v);
	return KILN_EINVAL;
}

int
cache_env_read(struct engine_cache_env *ce, char *err, size_t len)
{
	int rv;

	*ce = (struct engine_cache_env){
		.url = env("KILN_CACHE_URL"),
		.mode = env("KILN_CACHE_MODE"),
		.basic_auth_file = env("KILN_CACHE_BASIC_AUTH_FILE"),
		.bearer_token_file = env("KILN_CACHE_BEARER_TOKEN_FILE"),
		.ca_file = env("KILN_CACHE_CA_FILE"),
		.sign_key_file = env("KILN_CACHE_SIGN_KEY_FILE"),
		.timeout = env("KILN_CACHE_TIMEOUT"),
		.connect_timeout = env("KILN_CACHE_CONNECT_TIMEOUT"),
		.stop_wait = env("KILN_CACHE_STOP_WAIT"),
		.config_home = env("XDG_CONFIG_HOME"),
		.home = env("HOME"),
	};
	if (ce->url != NULL && strncmp(ce->url, "http://", 7) != 0 &&
	    strncmp(ce->url, "https://", 8) != 0) {
		snprintf(err, len, "KILN_CACHE_URL='%s': expected an http:// or https:// URL",
		         ce->url);
		return KILN_EINVAL;
	}
	if (ce->mode != NULL && kiln_cache_mode_parse(ce->mode) == KILN_CACHE_MODE_UNSET) {
		snprintf(err, len, "KILN_CACHE_MODE='%s': expected read, readwrite or off",
		         ce->mode);
		return KILN_EINVAL;
	}
	if (ce->basic_auth_file != NULL && ce->bearer_token_file != NULL) {
		snprintf(err, len, "KILN_CACHE_BASIC_AUTH_FILE and KILN_CACHE_BEARER_TOKEN_FILE "
		         "are both set: give one");
		return KILN_EINVAL;
	}
	if ((rv = abs_file("KILN_CACHE_BASIC_AUTH_FILE", ce->basic_auth_file, err, len)) != 0 ||
	    (rv = abs_file("KILN_CACHE_BEARER_TOKEN_FILE", ce->bearer_token_file, err, len)) != 0 ||
	    (rv = abs_file("KILN_CACHE_CA_FILE", ce->ca_file, err, len)) != 0 ||
	    (rv = abs_file("KILN_CACHE_SIGN_KEY_FILE", ce->sign_key_file, err, len)) != 0 ||
	    (rv = duration("KILN_CACHE_TIMEOUT", ce->timeout, err, len)) != 0 ||
	    (rv = duration("KILN_CACHE_CONNECT_TIMEOUT", ce->connect_timeout, err, len)) != 0 ||
	    (rv = duration("KILN_CACHE_STOP_WAIT", ce->stop_wait, err, len)) != 0)
		return rv;
	return 0;
}
