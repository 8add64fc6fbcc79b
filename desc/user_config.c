/* user_config.c — a user's own settings file, $XDG_CONFIG_HOME/kiln/config.yaml
 * (kiln_desc.h, kiln_user_config_*).
 *
 * It is read with the loader kiln.yaml is read with (yaml_tree.c, the
 * field tables of desc_fields.c), so its errors name the file, the line
 * and the field the same way. It holds only settings of this machine
 * (`cache:` today), never anything that would change what a build
 * produces: two users with different files build the same bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "load_int.h"

struct kiln_user_config {
	struct desc_file f;   /* relpath: the file's path, as shown in errors */
};

int
kiln_user_config_path(const char *xdg, const char *home, char *buf, size_t len)
{
	int n;

	/* the XDG base directory spec: a relative value is to be ignored */
	if (xdg != NULL && xdg[0] == '/')
		n = snprintf(buf, len, "%s/kiln/config.yaml", xdg);
	else if (home != NULL && home[0] == '/')
		n = snprintf(buf, len, "%s/.config/kiln/config.yaml", home);
	else
		return KILN_ENOTFOUND;
	return n > 0 && (size_t)n < len ? 0 : KILN_ERANGE;
}

/* A credential or CA path written in the file, relative to its folder:
 * the file is the user's wherever they build, so "cache-token" beside it
 * means that file, whatever the project or the daemon's folder. */
static const char *
beside(struct ld *c, const char *p)
{
	const char *slash = strrchr(c->f->relpath, '/');

	if (p == NULL || p[0] == '/' || slash == NULL)
		return p;
	return arena_printf(c->a, "%.*s/%s", (int)(slash - c->f->relpath), c->f->relpath, p);
}

int
kiln_user_config_load(const char *path, kiln_user_config **out)
{
	kiln_user_config *u;
	struct ld c;
	arena tree = {0};
	struct stat st;
	ynode *top = NULL;
	int rv;

	*out = NULL;
	/* no file is no settings; any other trouble reading it is the
	 * parser's to report, as an error naming the file */
	if (stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
		return KILN_ENOTFOUND;
	if ((u = calloc(1, sizeof *u)) == NULL)
		return KILN_ENOMEM;
	diags_init(&u->f.dg, &u->f.a);
	if ((u->f.relpath = arena_strdup(&u->f.a, path)) == NULL ||
	    (u->f.dir = arena_strdup(&u->f.a, "")) == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	c = (struct ld){&u->f, &u->f.a, &u->f.dg};
	rv = ytree_parse(path, u->f.relpath, &tree, &u->f.a, &u->f.dg, &top);
	if (rv == KILN_ENOMEM)
		goto fail;
	/* an empty file is no settings, like a missing one */
	if (rv == 0 && top != NULL && ld_want(&c, top, Y_MAP, "", "a mapping of settings (cache)")) {
		kiln_cache_desc *cd = &u->f.cache;
		desc_fields_user(&c, top);
		cd->basic_auth_file = beside(&c, cd->basic_auth_file);
		cd->bearer_token_file = beside(&c, cd->bearer_token_file);
		cd->ca_file = beside(&c, cd->ca_file);
		cd->sign_key_file = beside(&c, cd->sign_key_file);
	}
	rv = u->f.a.failed ? KILN_ENOMEM : 0;
fail:
	arena_free(&tree);
	if (rv != 0) {
		kiln_user_config_free(u);
		return rv;
	}
	*out = u;
	return 0;
}

void
kiln_user_config_free(kiln_user_config *u)
{
	if (u == NULL)
		return;
	arena_free(&u->f.a);
	free(u);
}

size_t
kiln_user_config_diags(const kiln_user_config *u, const kiln_diag **out)
{
	*out = u->f.dg.list.items;
	return u->f.dg.list.n;
}

size_t
kiln_user_config_nerrors(const kiln_user_config *u)
{
	return u->f.dg.nerrors;
}

const kiln_cache_desc *
kiln_user_config_cache(const kiln_user_config *u)
{
	return &u->f.cache;
}
