/*
 * atlas.c — the sample's texture atlas packer: many sprites into one
 * RGBA PNG plus a JSON frame table, using Debian's libstb (stb_rect_pack
 * for the layout, stb_image to read, stb_image_write to write). Run by kiln
 * as the `atlas` tool of kiln.yaml:
 *
 *   atlas [--padding N] -o ATLAS.png -m FRAMES.json SPRITE.png...
 *
 * A frame is named by its file name without ".png" (build/pc/ui/sprites/
 * star.png -> "star"); two sprites with one frame name are an error. The atlas is the smallest power-of-two square that
 * holds every sprite, cut down to the power-of-two height actually used.
 * The output depends only on the inputs and their order (kiln passes them
 * sorted), so a rebuild writes the same bytes. Single-threaded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>
#include <stb_image_write.h>
#include <stb_rect_pack.h>

#define MAX_SIDE 8192

struct sprite {
	char name[128];
	unsigned char *pixels;  /* RGBA, from stbi_load */
	int w, h;
};

/* The frame name of path: its last segment without ".png". */
static int
frame_name(const char *path, char *out, size_t cap)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	if (len > 4 && strcmp(base + len - 4, ".png") == 0)
		len -= 4;
	if (len == 0 || len >= cap)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (base[i] == '"' || base[i] == '\\' || (unsigned char)base[i] < 0x20)
			return -1;      /* keeps the JSON free of escapes */
	memcpy(out, base, len);
	out[len] = '\0';
	return 0;
}

static int
next_pow2(int v)
{
	int p = 1;

	while (p < v)
		p *= 2;
	return p;
}

/* Pack every sprite (padded) into a side x side square; on success *used
 * is the height the packed rects reach. */
static int
try_pack(stbrp_rect *rects, int n, int side, int *used)
{
	stbrp_context ctx;
	stbrp_node *nodes = malloc((size_t)side * sizeof *nodes);
	int ok;

	if (nodes == NULL)
		return -1;
	stbrp_init_target(&ctx, side, side, nodes, side);
	ok = stbrp_pack_rects(&ctx, rects, n);
	free(nodes);
	*used = 0;
	for (int i = 0; ok && i < n; i++)
		if (rects[i].y + rects[i].h > *used)
			*used = rects[i].y + rects[i].h;
	return ok ? 0 : 1;
}

static int
write_frames(const char *path, const char *image, const struct sprite *s,
             const stbrp_rect *r, int n, int pad, int w, int h)
{
	const char *base = strrchr(image, '/');
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		return -1;
	}
	fprintf(f, "{\n  \"image\": \"%s\",\n  \"width\": %d,\n  \"height\": %d,\n"
	        "  \"frames\": {\n", base ? base + 1 : image, w, h);
	for (int i = 0; i < n; i++)
		fprintf(f, "    \"%s\": { \"x\": %d, \"y\": %d, \"w\": %d, \"h\": %d }%s\n",
		        s[i].name, r[i].x + pad, r[i].y + pad, s[i].w, s[i].h,
		        i + 1 < n ? "," : "");
	fprintf(f, "  }\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* Copy every sprite into the atlas at its packed place. */
static void
blit_all(unsigned char *atlas, int aw, const struct sprite *s, const stbrp_rect *r,
         int n, int pad)
{
	for (int i = 0; i < n; i++)
		for (int y = 0; y < s[i].h; y++)
			memcpy(atlas + ((size_t)(r[i].y + pad + y) * aw + r[i].x + pad) * 4,
			       s[i].pixels + (size_t)y * s[i].w * 4, (size_t)s[i].w * 4);
}

static int
usage(void)
{
	fprintf(stderr, "usage: atlas [--padding N] -o ATLAS.png -m FRAMES.json SPRITE.png...\n");
	return 2;
}

int
main(int argc, char **argv)
{
	const char *out = NULL, *frames = NULL;
	struct sprite *s = NULL;
	stbrp_rect *r = NULL;
	unsigned char *atlas = NULL;
	long area = 0;
	int i, n = 0, pad = 0, side, used = 0, rc = 1, c;

	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--padding") == 0)
			pad = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-o") == 0)
			out = argv[i + 1];
		else if (strcmp(argv[i], "-m") == 0)
			frames = argv[i + 1];
		else
			return usage();
	}
	if (out == NULL || frames == NULL || i >= argc || pad < 0 || pad > 64)
		return usage();
	s = calloc((size_t)(argc - i), sizeof *s);
	r = calloc((size_t)(argc - i), sizeof *r);
	if (s == NULL || r == NULL)
		goto done;
	for (; i < argc; i++, n++) {
		if (frame_name(argv[i], s[n].name, sizeof s[n].name) != 0) {
			fprintf(stderr, "atlas: %s: unusable frame name\n", argv[i]);
			goto done;
		}
		for (int j = 0; j < n; j++)
			if (strcmp(s[j].name, s[n].name) == 0) {
				fprintf(stderr, "atlas: two sprites make the frame '%s'\n", s[n].name);
				goto done;
			}
		if ((s[n].pixels = stbi_load(argv[i], &s[n].w, &s[n].h, &c, 4)) == NULL) {
			fprintf(stderr, "atlas: %s: %s\n", argv[i], stbi_failure_reason());
			goto done;
		}
		r[n] = (stbrp_rect){.id = n, .w = s[n].w + 2 * pad, .h = s[n].h + 2 * pad};
		area += (long)r[n].w * r[n].h;
	}
	for (side = 16; side * (long)side < area; side *= 2)
		;
	for (; side <= MAX_SIDE; side *= 2)
		if ((rc = try_pack(r, n, side, &used)) <= 0)
			break;
	if (side > MAX_SIDE || rc < 0) {
		fprintf(stderr, "atlas: the sprites do not fit in %dx%d\n", MAX_SIDE, MAX_SIDE);
		rc = 1;
		goto done;
	}
	rc = 1;
	used = next_pow2(used);
	if ((atlas = calloc((size_t)side * used, 4)) == NULL)
		goto done;
	blit_all(atlas, side, s, r, n, pad);
	if (!stbi_write_png(out, side, used, 4, atlas, side * 4)) {
		fprintf(stderr, "atlas: cannot write %s\n", out);
		goto done;
	}
	if (write_frames(frames, out, s, r, n, pad, side, used) != 0)
		goto done;
	rc = 0;
done:
	for (int j = 0; s != NULL && j < n; j++)
		stbi_image_free(s[j].pixels);
	free(s);
	free(r);
	free(atlas);
	return rc;
}
