/* bundle_fields.c — reading one `bundles:` item of a description file:
 *
 *   bundles:
 *     preload: [ui/atlas, "shaders/[a-z]*"]        # shorthand: entries only
 *     level1:
 *       entries: [levels/level1, "sprites/hero", "ui/atlas#image"]
 *       compress: zstd                            # or none (the default)
 *       align: 64                                 # a power of two, default 16
 *       manifest: true                            # also <name>.json
 *
 * Patterns are checked here as URLs or URL globs, each optionally ending
 * in #output; what they match is resolved per profile (resolve_bundles.c).
 * docs/format.md ("Bundles") and docs/bundles.md are the reference. */
#include <stdlib.h>
#include <string.h>

#include "kiln_store.h"
#include "load_int.h"

/* Largest alignment a bundle may ask for: a page of the largest size a
 * GPU or a mapping wants; beyond it padding only wastes the file. */
#define BUNDLE_ALIGN_MAX 65536u

#define BUNDLE (*(struct desc_bundle *)obj)

static void
one_pattern(struct ld *c, const ynode *n, const char *field, void *arg)
{
	struct desc_input in = {ld_text(c, n, field), NULL, ld_at(c, n), field};
	const char *hash;
	char *url;

	if (in.text == NULL)
		return;
	hash = strchr(in.text, '#');
	if ((url = arena_strdup(c->a, in.text)) == NULL)
		return;
	if (hash != NULL)
		url[hash - in.text] = '\0';
	if (kiln_url_check(url) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, in.loc, field, "'%s' is not a URL or URL "
		         "glob (optionally followed by #output)", in.text);
	else if (hash != NULL && (hash[1] == '\0' || strchr(hash + 1, '#') != NULL ||
	                          strchr(hash + 1, '/') != NULL))
		diag_add(c->dg, KILN_DIAG_ERROR, in.loc, field, "'%s': after '#' comes the "
		         "name of one output of the step", in.text);
	else
		vec_push(c->a, arg, &in);
}

static void b_entries(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ld_strings(c, v, f, one_pattern, &BUNDLE.patterns);
}

static void b_compress(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);

	if (s != NULL && strcmp(s, "zstd") == 0)
		BUNDLE.compress = KILN_COMPRESS_ZSTD;
	else if (s != NULL && strcmp(s, "none") == 0)
		BUNDLE.compress = KILN_COMPRESS_NONE;
	else if (s != NULL)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "unknown compression '%s' "
		         "(zstd or none)", s);
}

static void b_align(struct ld *c, const ynode *v, void *obj, const char *f)
{
	const char *s = ld_text(c, v, f);
	char *end = NULL;
	unsigned long a = 0;

	if (s == NULL)
		return;
	if (ld_scalar_type(v) == KILN_VAL_INT)
		a = strtoul(s, &end, 10);
	if (end == NULL || *end != '\0' || a == 0 || a > BUNDLE_ALIGN_MAX || (a & (a - 1)) != 0)
		diag_add(c->dg, KILN_DIAG_ERROR, ld_at(c, v), f, "alignment '%s': a power "
		         "of two from 1 to %u", s, BUNDLE_ALIGN_MAX);
	else
		BUNDLE.align = (uint32_t)a;
}

static void b_manifest(struct ld *c, const ynode *v, void *obj, const char *f)
{
	ld_bool(c, v, f, &BUNDLE.manifest);
}

static const struct field bundle_fields[] = {
	{"entries", b_entries}, {"compress", b_compress}, {"align", b_align},
	{"manifest", b_manifest},
};

void
desc_bundle_read(struct ld *c, const ynode *k, const ynode *v, const char *field)
{
	struct desc_bundle b = {ld_name(c, k, field, "bundle"), {0}, 16,
	                        KILN_COMPRESS_NONE, 0, ld_at(c, k)};
	const char *f;

	vec_init(&b.patterns, sizeof(struct desc_input));
	if (b.name == NULL)
		return;
	f = ld_field(c, field, b.name);
	if (v != NULL && v->type == Y_MAP) {
		ld_map_walk(c, v, f, bundle_fields,
		            sizeof bundle_fields / sizeof bundle_fields[0], &b);
		ld_require(c, v, f, "entries", "the URLs whose outputs the bundle holds");
	} else {
		ld_strings(c, v, f, one_pattern, &b.patterns);
	}
	vec_push(c->a, &c->f->bundles, &b);
}
