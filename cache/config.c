/* config.c — checking a kiln_cache_config: the base URL's form, the
 * credential and signing-key files (their permissions and content), and
 * the defaults; signing and checking AC entries with the handle's key. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_entries.h"
#include "cache_int.h"

/* A credential is one short line; anything longer is not one. */
#define CRED_MAX 4096

int
kiln_cache_check_key(const char *hex)
{
	if (hex == NULL)
		return KILN_EINVAL;
	for (int i = 0; i < 64; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return KILN_EINVAL;
	return hex[64] == '\0' ? 0 : KILN_EINVAL;
}

/* The URL goes into every request line, so it must be plain: http(s), a
 * host, no credentials (they would show wherever the URL is printed), no
 * query or fragment (the key is appended to the path), printable ASCII. */
static int
check_url(const char *url)
{
	const char *host, *end;

	if (url == NULL)
		return KILN_EINVAL;
	if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return KILN_EINVAL;
	end = host + strcspn(host, "/");
	if (end == host || memchr(host, '@', (size_t)(end - host)) != NULL)
		return KILN_EINVAL;
	for (const char *p = url; *p != '\0'; p++)
		if (*p <= ' ' || *p >= 0x7f || *p == '?' || *p == '#')
			return KILN_EINVAL;
	return 0;
}

/* Read the one-line secret at path into *out (malloc'd). Refused when
 * others may read or change it: a secret the whole machine can read is
 * not one, and ssh draws the line at the same place. */
static int
read_secret(const char *path, char **out)
{
	char buf[CRED_MAX + 1];
	struct stat sb;
	ssize_t n;
	size_t len;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kiln_err_from_errno(errno);
	if (fstat(fd, &sb) != 0) {
		rc = kiln_err_from_errno(errno);
		goto fail;
	}
	rc = KILN_EACCES;
	if ((sb.st_mode & (S_IROTH | S_IWOTH)) != 0)
		goto fail;
	rc = KILN_EINVAL;
	if (!S_ISREG(sb.st_mode))
		goto fail;
	n = read(fd, buf, CRED_MAX + 1);
	if (n < 0) {
		rc = kiln_err_from_errno(errno);
		goto fail;
	}
	len = (size_t)n;
	if (len > CRED_MAX)
		goto fail;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	/* A control character would let the file add header lines. */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < ' ' || buf[i] == 0x7f)
			goto fail;
	if (len == 0)
		goto fail;
	buf[len] = '\0';
	rc = KILN_ENOMEM;
	if ((*out = strdup(buf)) == NULL)
		goto fail;
	rc = 0;
fail:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return rc;
}

/* Say in cfg->err which file could not be used, and why. */
static int
file_err(const kiln_cache_config *cfg, const char *what, const char *path, int rc)
{
	const char *why = kiln_strerror(rc);

	if (rc == KILN_EACCES)
		why = "others may read or write it (chmod 600 it), or it cannot be read";
	else if (rc == KILN_EINVAL)
		why = "not one line of printable characters (at most 4096), or not a regular file";
	if (cfg->err != NULL && cfg->errlen > 0)
		snprintf(cfg->err, cfg->errlen, "%s %s: %s", what, path, why);
	return rc;
}

/* The secret that signs entries: a credential like the others, and long
 * enough that it cannot be guessed (64 hex digits from openssl rand -hex
 * 32 are 256 bits; 32 characters is the least taken). */
static int
apply_sign_key(kiln_cache *c, const kiln_cache_config *cfg)
{
	const char *f = cfg->sign_key_file;
	int rc;

	if (f == NULL)
		return 0;
	if ((rc = read_secret(f, &c->sign_key)) != 0)
		return file_err(cfg, "sign_key_file", f, rc);
	c->sign_key_len = strlen(c->sign_key);
	if (c->sign_key_len < KILN_CACHE_SIGN_KEY_MIN) {
		if (cfg->err != NULL && cfg->errlen > 0)
			snprintf(cfg->err, cfg->errlen, "sign_key_file %s: shorter than %d characters "
			         "(make one with: openssl rand -hex 32 >FILE)", f, KILN_CACHE_SIGN_KEY_MIN);
		return KILN_EINVAL;
	}
	return 0;
}

int
kiln_cache_signs(const kiln_cache *c)
{
	return c->sign_key != NULL;
}

int
kiln_cache_sign(kiln_cache *c, const uint8_t ackey[32], uint8_t **buf, size_t *len)
{
	uint8_t *out;
	size_t n;
	int rc;

	if (c->sign_key == NULL)
		return 0;
	rc = kiln_cache_entry_sign(c->sign_key, c->sign_key_len, ackey, *buf, *len, &out, &n);
	if (rc != 0)
		return rc;
	free(*buf);
	*buf = out;
	*len = n;
	return 0;
}

int
kiln_cache_verify(kiln_cache *c, const uint8_t ackey[32], const void *buf, size_t len)
{
	if (c->sign_key == NULL)
		return 0;
	return kiln_cache_entry_verify(c->sign_key, c->sign_key_len, ackey, buf, len);
}

static int
apply_credentials(kiln_cache *c, const kiln_cache_config *cfg)
{
	char *token = NULL, *line = NULL;
	struct curl_slist *h;
	size_t n;
	int rc;

	if (cfg->basic_auth_file != NULL && cfg->bearer_token_file != NULL)
		return KILN_EINVAL;
	if (cfg->basic_auth_file != NULL) {
		if ((rc = read_secret(cfg->basic_auth_file, &c->userpwd)) != 0)
			return file_err(cfg, "basic_auth_file", cfg->basic_auth_file, rc);
		return strchr(c->userpwd, ':') != NULL ? 0 : KILN_EINVAL;
	}
	if (cfg->bearer_token_file == NULL)
		return 0;
	if ((rc = read_secret(cfg->bearer_token_file, &token)) != 0)
		return file_err(cfg, "bearer_token_file", cfg->bearer_token_file, rc);
	rc = KILN_ENOMEM;
	n = strlen(token) + sizeof("Authorization: Bearer ");
	if ((line = malloc(n)) == NULL)
		goto fail;
	snprintf(line, n, "Authorization: Bearer %s", token);
	if ((h = curl_fn->slist_append(c->headers, line)) == NULL)
		goto fail;
	c->headers = h;
	rc = 0;
fail:
	if (line != NULL)
		explicit_bzero(line, n);
	explicit_bzero(token, strlen(token));
	free(line);
	free(token);
	return rc;
}

/* Short enough that a cache on the other side of a dead VPN costs a build
 * a few seconds once (then the breaker answers), long enough for a LAN or
 * a nearby cloud region; docs/cache-http.md has the reasoning. */
static void
apply_defaults(kiln_cache *c, const kiln_cache_config *cfg)
{
	c->read_only = cfg->read_only != 0;
	c->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 2000;
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 120000;
	c->stall_ms = cfg->stall_ms > 0 ? cfg->stall_ms : 10000;
	c->max_parallel = cfg->max_parallel > 0 ? cfg->max_parallel : 4;
	/* Uploads leave half the connections to lookups, which a build waits
	 * on; uploads it does not. */
	c->max_uploads = c->max_parallel > 1 ? c->max_parallel / 2 : 1;
	c->queue_max = cfg->queue_max > 0 ? cfg->queue_max : 1024;
	c->queue_max_bytes = cfg->queue_max_bytes > 0 ? cfg->queue_max_bytes : (uint64_t)64 << 20;
	c->breaker_failures = cfg->breaker_failures > 0 ? cfg->breaker_failures : 5;
	c->breaker_open_ms = cfg->breaker_open_ms > 0 ? cfg->breaker_open_ms : 30000;
	c->breaker_max_ms = cfg->breaker_max_ms > 0 ? cfg->breaker_max_ms : 600000;
	if (c->breaker_max_ms < c->breaker_open_ms)
		c->breaker_max_ms = c->breaker_open_ms;
	c->period_ms = c->breaker_open_ms;
}

int
cache_config_apply(kiln_cache *c, const kiln_cache_config *cfg)
{
	size_t n;
	int rc;

	if (cfg == NULL || (rc = check_url(cfg->url)) != 0)
		return KILN_EINVAL;
	n = strlen(cfg->url);
	while (n > 0 && cfg->url[n - 1] == '/')
		n--;
	if (n >= sizeof(c->base))
		return KILN_EINVAL;
	memcpy(c->base, cfg->url, n);
	c->base[n] = '\0';
	apply_defaults(c, cfg);
	if (cfg->ca_file != NULL && (c->ca_file = strdup(cfg->ca_file)) == NULL)
		return KILN_ENOMEM;
	/* bazel-remote wants Content-Length, which curl sends for a known
	 * size; "Expect:" stops curl waiting for a 100 Continue that some
	 * servers never send. */
	if ((c->headers = curl_fn->slist_append(NULL, "Expect:")) == NULL)
		return KILN_ENOMEM;
	if ((rc = apply_credentials(c, cfg)) != 0)
		return rc;
	return apply_sign_key(c, cfg);
}

void
cache_config_free(kiln_cache *c)
{
	if (c->userpwd != NULL) {
		explicit_bzero(c->userpwd, strlen(c->userpwd));
		free(c->userpwd);
		c->userpwd = NULL;
	}
	/* The bearer line is in the list; curl frees it without wiping. */
	for (struct curl_slist *h = c->headers; h != NULL; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	curl_fn->slist_free_all(c->headers);
	c->headers = NULL;
	free(c->ca_file);
	c->ca_file = NULL;
	if (c->sign_key != NULL) {
		explicit_bzero(c->sign_key, c->sign_key_len);
		free(c->sign_key);
		c->sign_key = NULL;
	}
}
