/* fuzz/desc.c — libFuzzer target for the asset-description loader.
 *
 * An input is a kiln.yaml, optionally followed by a line "#8<" and the
 * text of a second description file, art/sub.kiln.yaml. Each input is
 * loaded as a project (with a few source files to match), every plan and
 * diagnostic is walked, and the sub-file is reloaded, so the parser, the
 * field checks, resolution and reload all see hostile input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln_desc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];

static void
put(const char *rel, const void *buf, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", root, rel);
	if ((f = fopen(path, "wb")) == NULL)
		abort();
	if (len > 0 && fwrite(buf, 1, len, f) != len)
		abort();
	fclose(f);
}

static void
cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		return;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const files[] = {
		"art/a.png", "art/ui/button.png", "art/ui/panel.png",
		"art/sprites/hero.png", "audio/jump.wav", "shaders/basic.vert",
	};
	char path[256];

	(void)argc;
	(void)argv;
	snprintf(root, sizeof root, "%s/kiln-fuzz-XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(root) == NULL)
		abort();
	atexit(cleanup);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char dir[256];
		snprintf(path, sizeof path, "%s/%s", root, files[i]);
		snprintf(dir, sizeof dir, "%s", path);
		for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
			*p = '\0';
			mkdir(dir, 0755);
			*p = '/';
		}
		put(files[i], "x", 1);
	}
	return 0;
}

/* Touch every string the loader hands out, so ASan sees bad pointers. */
static size_t
walk(const kiln_desc *d)
{
	const char *const *names;
	const kiln_diag *g;
	size_t sum = 0, n = kiln_desc_diags(d, &g), np;

	for (size_t i = 0; i < n; i++)
		sum += strlen(g[i].msg) + strlen(g[i].field) + strlen(g[i].loc.file);
	np = kiln_desc_profiles(d, &names);
	for (size_t i = 0; i < np; i++) {
		const kiln_plan *p = kiln_desc_plan(d, names[i]);
		for (size_t s = 0; p != NULL && s < p->nsteps; s++) {
			const kiln_step *st = &p->steps[s];
			sum += strlen(st->url);
			for (size_t k = 0; k < st->nargv; k++)
				sum += strlen(st->argv[k]);
			for (size_t k = 0; k < st->ninputs; k++)
				sum += strlen(st->inputs[k]);
			for (size_t k = 0; k < st->nneeds; k++)
				sum += strlen(st->needs[k]);
		}
	}
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *cut = memmem(data, size, "\n#8<\n", 5);
	size_t first = cut ? (size_t)(cut - (const char *)data) : size;
	kiln_desc *d = NULL;
	char sub[256];

	put("kiln.yaml", data, first);
	snprintf(sub, sizeof sub, "%s/art/sub.kiln.yaml", root);
	if (cut != NULL)
		put("art/sub.kiln.yaml", cut + 5, size - first - 5);
	else
		unlink(sub);
	if (kiln_desc_load(root, &d) == KILN_ENOMEM || d == NULL)
		return 0;
	walk(d);
	if (cut != NULL) {
		put("art/sub.kiln.yaml", "tools: { t: { run: [x] } }\n", 27);
		kiln_desc_reload(d, "art/sub.kiln.yaml");
		walk(d);
	}
	kiln_desc_free(d);
	return 0;
}
