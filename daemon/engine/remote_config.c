/* remote_config.c — what the shared cache's handle is opened with
 * (remote.h; docs/cache.md, "Configuration"): the environment's settings
 * (checked by the daemon: daemon/cache_env.c) over the user's own
 * config.yaml over the project's `cache:`, key by key; the user's file
 * read again whenever it changed; the handle reopened when the result
 * changed.
 *
 * Threads: everything here runs with e->mu held and no build running
 * (a project load, or the check before a build); r->mu guards the handle
 * pointer while it is swapped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine_int.h"
#include "remote.h"
#include "step.h"

static int
str_same(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* A path as kiln_cache_open wants it: relative ones are the project's
 * (the user's file and the environment give absolute ones). NULL stays
 * NULL; *bad on no memory. */
static char *
cred_path(const struct engine *e, const char *f, int *bad)
{
	char *p = NULL;

	if (f == NULL)
		return NULL;
	if (f[0] == '/')
		p = strdup(f);
	else if (asprintf(&p, "%s/%s", e->root, f) < 0)
		p = NULL;
	if (p == NULL)
		*bad = 1;
	return p;
}

/* Settings as one level gives them (unset: NULL, KILN_CACHE_MODE_UNSET,
 * has_* 0). */
struct level {
	const char *url, *basic, *bearer, *ca, *sign;
	kiln_cache_mode mode;
	int has_timeout, has_connect;
	uint32_t timeout_s, connect_s;
};

static void
level_of_desc(const kiln_cache_desc *cd, struct level *l)
{
	*l = (struct level){
		.url = cd->url, .basic = cd->basic_auth_file, .bearer = cd->bearer_token_file,
		.ca = cd->ca_file, .sign = cd->sign_key_file, .mode = cd->mode,
		.has_timeout = cd->timeout.text != NULL, .timeout_s = cd->timeout.s,
		.has_connect = cd->connect_timeout.text != NULL,
		.connect_s = cd->connect_timeout.s,
	};
}

/* The daemon checked these before starting the engine. */
static void
level_of_env(const struct engine_cache_env *ev, struct level *l)
{
	*l = (struct level){
		.url = ev->url, .basic = ev->basic_auth_file, .bearer = ev->bearer_token_file,
		.ca = ev->ca_file, .sign = ev->sign_key_file,
		.mode = kiln_cache_mode_parse(ev->mode),
	};
	l->has_timeout = ev->timeout != NULL && kiln_duration_parse(ev->timeout, &l->timeout_s) == 0;
	l->has_connect = ev->connect_timeout != NULL &&
	                 kiln_duration_parse(ev->connect_timeout, &l->connect_s) == 0;
}

/* What over gives replaces what l has, key by key. The two credential
 * files are one key: a level naming either replaces both, so a user's
 * token never goes out beside the project's password file. */
static void
level_over(struct level *l, const struct level *over)
{
	if (over->url != NULL)
		l->url = over->url;
	if (over->mode != KILN_CACHE_MODE_UNSET)
		l->mode = over->mode;
	if (over->basic != NULL || over->bearer != NULL) {
		l->basic = over->basic;
		l->bearer = over->bearer;
	}
	if (over->ca != NULL)
		l->ca = over->ca;
	if (over->sign != NULL)
		l->sign = over->sign;
	if (over->has_timeout) {
		l->has_timeout = 1;
		l->timeout_s = over->timeout_s;
	}
	if (over->has_connect) {
		l->has_connect = 1;
		l->connect_s = over->connect_s;
	}
}

/* The configuration the environment, the user's file (uc, may be NULL)
 * and d ask for, in that order of precedence, into want (its strings
 * malloc'd); 0 with want->url NULL when no cache is wanted. */
static int
config_wanted(const struct engine *e, const kiln_desc *d, const kiln_cache_desc *uc,
              struct remote_conn *want)
{
	struct level l, over;
	int bad = 0;

	memset(want, 0, sizeof *want);
	level_of_desc(kiln_desc_cache(d), &l);
	if (uc != NULL) {
		level_of_desc(uc, &over);
		level_over(&l, &over);
	}
	level_of_env(&e->cfg.cache, &over);
	level_over(&l, &over);
	/* a url without a mode reads only: uploading is what CI opts into */
	if (l.mode == KILN_CACHE_MODE_UNSET)
		l.mode = KILN_CACHE_MODE_READ;
	if (l.url == NULL || l.url[0] == '\0' || l.mode == KILN_CACHE_MODE_OFF)
		return 0;
	want->mode = l.mode;
	want->timeout_s = l.has_timeout ? l.timeout_s : 0;
	want->connect_timeout_s = l.has_connect ? l.connect_s : 0;
	want->url = strdup(l.url);
	want->basic = cred_path(e, l.basic, &bad);
	want->bearer = cred_path(e, l.bearer, &bad);
	want->ca = cred_path(e, l.ca, &bad);
	want->sign = cred_path(e, l.sign, &bad);
	return want->url == NULL || bad ? KILN_ENOMEM : 0;
}

static int
conn_same(const struct remote_conn *a, const struct remote_conn *b)
{
	return str_same(a->url, b->url) && a->mode == b->mode && str_same(a->basic, b->basic) &&
	       str_same(a->bearer, b->bearer) && str_same(a->ca, b->ca) &&
	       str_same(a->sign, b->sign) &&
	       a->timeout_s == b->timeout_s && a->connect_timeout_s == b->connect_timeout_s;
}

static void
want_free(struct remote_conn *w)
{
	free(w->url);
	free(w->basic);
	free(w->bearer);
	free(w->ca);
	free(w->sign);
}

/* Open, reopen or close the handle to match d and the user's uc. */
static int
configure(struct engine *e, const kiln_desc *d, const kiln_cache_desc *uc)
{
	struct remote *r = e->remote;
	struct remote_conn want, *rc = NULL, *old;
	kiln_cache_config cfg = {0};
	char why[512] = "";
	int rv;

	if ((rv = config_wanted(e, d, uc, &want)) != 0)
		goto fail;
	old = r->conn;   /* only this thread (e->mu) changes r->conn */
	if (old != NULL && want.url != NULL && conn_same(old, &want))
		goto fail;   /* unchanged: keep the handle and its connections */
	if (old == NULL && want.url == NULL)
		goto fail;
	if (want.url != NULL) {
		cfg.url = want.url;
		cfg.read_only = want.mode != KILN_CACHE_MODE_READWRITE;
		cfg.basic_auth_file = want.basic;
		cfg.bearer_token_file = want.bearer;
		cfg.ca_file = want.ca;
		cfg.sign_key_file = want.sign;
		cfg.err = why;
		cfg.errlen = sizeof why;
		cfg.timeout_ms = (long)want.timeout_s * 1000;
		cfg.connect_timeout_ms = (long)want.connect_timeout_s * 1000;
		rv = KILN_ENOMEM;
		if ((rc = malloc(sizeof *rc)) == NULL)
			goto fail;
		*rc = want;
		memset(&want, 0, sizeof want);
		rc->refs = 1;
		rc->c = NULL;
		atomic_init(&rc->error_said, 0);
		if ((rv = kiln_cache_open(&cfg, &rc->c)) != 0) {
			/* a build never fails for the cache: it builds without */
			engine_logf(e, 1, "shared cache %s: %s; building without it", rc->url,
			           why[0] != '\0' ? why : kiln_strerror(rv));
			remote_conn_free(rc);
			rc = NULL;
		} else {
			engine_logf(e, 0, "shared cache %s (%s%s)", rc->url,
			           rc->mode == KILN_CACHE_MODE_READWRITE ? "readwrite" : "read",
			           kiln_cache_signs(rc->c) ? ", entries signed and checked" : "");
		}
	}
	pthread_mutex_lock(&r->mu);
	r->conn = rc;
	pthread_mutex_unlock(&r->mu);
	remote_conn_put(r, old);
	rv = 0;
fail:
	want_free(&want);
	return rv;
}

/* ---- the user's settings file ------------------------------------------------ */

static void
user_stamp(struct user_file *u, struct user_file *now)
{
	struct stat st;

	memset(now, 0, sizeof *now);
	if (stat(u->path, &st) != 0)
		return;
	now->exists = 1;
	now->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	now->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	now->ino = st.st_ino;
	now->dev = st.st_dev;
	now->size = (uint64_t)st.st_size;
}

static int
user_stamp_same(const struct user_file *a, const struct user_file *b)
{
	return a->exists == b->exists && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns && a->ino == b->ino && a->dev == b->dev &&
	       a->size == b->size;
}

/* The file's errors into err (one a line, as a description's) and the
 * daemon's log. */
static void
user_errors(struct engine *e, const kiln_user_config *uc, char *err, size_t errlen)
{
	const kiln_diag *dg;
	size_t n = kiln_user_config_diags(uc, &dg), used = 0;

	if (errlen > 0)
		err[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		char line[1024];
		int w;
		if (dg[i].level != KILN_DIAG_ERROR)
			continue;
		snprintf(line, sizeof line, "%s:%d:%d: %s%s%s", dg[i].loc.file ? dg[i].loc.file : "?",
		         dg[i].loc.line, dg[i].loc.col, dg[i].field, *dg[i].field ? ": " : "",
		         dg[i].msg);
		engine_logf(e, 1, "%s (kiln builds nothing until it is fixed)", line);
		if (used + 1 >= errlen)
			continue;
		w = snprintf(err + used, errlen - used, "%s\n", line);
		if (w > 0)
			used += (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
	}
}

/* Read the user's file (none: *uc NULL). With errors: KILN_EBADPROJECT
 * and err. */
static int
user_load(struct engine *e, kiln_user_config **uc, char *err, size_t errlen)
{
	struct user_file *u = &e->remote->user;
	struct user_file now;
	int rv;

	*uc = NULL;
	u->ok = 0;
	if (u->path[0] == '\0') {
		u->ok = 1;
		return 0;
	}
	/* the stamp before the read: an edit saved during it reads again */
	user_stamp(u, &now);
	rv = kiln_user_config_load(u->path, uc);
	if (rv == KILN_ENOTFOUND)
		rv = 0;
	else if (rv == 0 && kiln_user_config_nerrors(*uc) > 0) {
		user_errors(e, *uc, err, errlen);
		kiln_user_config_free(*uc);
		*uc = NULL;
		return KILN_EBADPROJECT;
	}
	if (rv == 0) {
		memcpy(now.path, u->path, sizeof now.path);
		*u = now;
		u->ok = 1;
	}
	return rv;
}

int
remote_configure(struct engine *e, const kiln_desc *d, char *err, size_t errlen)
{
	kiln_user_config *uc = NULL;
	int rv;

	if (e->remote == NULL)
		return 0;
	if ((rv = user_load(e, &uc, err, errlen)) != 0)
		return rv;
	rv = configure(e, d, uc != NULL ? kiln_user_config_cache(uc) : NULL);
	kiln_user_config_free(uc);
	if (rv != 0)
		snprintf(err, errlen, "configuring the shared cache: %s", kiln_strerror(rv));
	return rv;
}

int
remote_refresh(struct engine *e, char *err, size_t errlen)
{
	struct user_file now;

	if (e->remote == NULL || e->desc == NULL)
		return 0;
	if (e->remote->user.ok) {
		user_stamp(&e->remote->user, &now);
		if (user_stamp_same(&now, &e->remote->user))
			return 0;
	}
	return remote_configure(e, e->desc, err, errlen);
}

