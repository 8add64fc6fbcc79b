/*
 * levelc.c — the sample's level compiler. Reads a level description
 * (YAML: a name, a size and entities that name their textures by URL) and
 * writes a compiled level (JSON) that lists every texture it uses with the
 * texture's XXH3-128 and size, entities pointing into that list. Run by
 * kiln as the `levelc` tool of kiln.yaml:
 *
 *   levelc -o OUT.json LEVEL.yaml
 *
 * The textures are not declared in kiln.yaml: levelc asks kiln for each
 * one while it runs, with `"$KILN" need URL [--output NAME]` (a texture
 * written "URL#NAME" names one output of a step with several), which
 * builds the texture if needed, records it as this step's dependency and
 * prints its materialized path relative to the project root (our working
 * folder). The command is run by argv through posix_spawn with a pipe —
 * never a shell, so a URL is never parsed as shell syntax. Single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#include <yaml.h>

#include "slurp.h"

#define MAX_TEX 256
#define MAX_ENT 4096

extern char **environ;

/* XXH3-128 of len bytes in canonical (big-endian) order: the order in
 * which xxh128sum and kiln-index.txt print it. */
static void
hash128(const void *data, size_t len, unsigned char out[16])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	memcpy(out, c.digest, 16);
}

/* out (33 bytes) = hash as 32 lowercase hex digits. */
static void
hex32(const unsigned char hash[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", hash[i]);
}

struct texture {
	const char *url;        /* as the level wrote it; in the YAML document */
	char path[4096];        /* what kiln need printed */
	unsigned char hash[16];
	size_t size;
	uint32_t width, height; /* from the PNG header; 0 when not a PNG */
};

struct entity {
	const char *type;
	int texture;            /* index into the texture list */
	long x, y;
};

struct level {
	const char *name;
	long w, h;
	struct texture tex[MAX_TEX];
	int ntex;
	struct entity ent[MAX_ENT];
	int nent;
};

/* The value of key in mapping node m, or NULL. */
static yaml_node_t *
map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	yaml_node_pair_t *p;
	yaml_node_t *k;

	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

static const char *
scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int
integer(yaml_node_t *n, long *out)
{
	const char *s = scalar(n);
	char *end;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	*out = strtol(s, &end, 10);
	return *end == '\0' && errno == 0 ? 0 : -1;
}

/* The index of url in the texture list, added when new. */
static int
texture_ref(struct level *lv, const char *url)
{
	for (int i = 0; i < lv->ntex; i++)
		if (strcmp(lv->tex[i].url, url) == 0)
			return i;
	if (lv->ntex == MAX_TEX)
		return -1;
	lv->tex[lv->ntex].url = url;
	return lv->ntex++;
}

/* One entity mapping into lv. */
static int
entity_read(struct level *lv, yaml_document_t *d, yaml_node_t *m, int i)
{
	struct entity *e = &lv->ent[lv->nent];
	const char *tex = scalar(map_get(d, m, "texture"));

	e->type = scalar(map_get(d, m, "type"));
	if (e->type == NULL || tex == NULL || integer(map_get(d, m, "x"), &e->x) != 0 ||
	    integer(map_get(d, m, "y"), &e->y) != 0) {
		fprintf(stderr, "levelc: entities[%d]: needs type, texture, x and y\n", i);
		return -1;
	}
	if (tex[0] == '-' || tex[0] == '\0') {
		/* kiln need would read it as an option */
		fprintf(stderr, "levelc: entities[%d]: '%s' is not a URL\n", i, tex);
		return -1;
	}
	if ((e->texture = texture_ref(lv, tex)) < 0) {
		fprintf(stderr, "levelc: more than %d textures\n", MAX_TEX);
		return -1;
	}
	lv->nent++;
	return 0;
}

static int
level_read(struct level *lv, yaml_document_t *d)
{
	yaml_node_t *root = yaml_document_get_root_node(d), *size, *ents, *n;
	yaml_node_item_t *it;

	lv->name = scalar(map_get(d, root, "level"));
	size = map_get(d, root, "size");
	ents = map_get(d, root, "entities");
	if (lv->name == NULL || size == NULL || size->type != YAML_SEQUENCE_NODE ||
	    size->data.sequence.items.top - size->data.sequence.items.start != 2 ||
	    ents == NULL || ents->type != YAML_SEQUENCE_NODE) {
		fprintf(stderr, "levelc: a level needs 'level', 'size: [w, h]' and 'entities'\n");
		return -1;
	}
	if (integer(yaml_document_get_node(d, size->data.sequence.items.start[0]), &lv->w) ||
	    integer(yaml_document_get_node(d, size->data.sequence.items.start[1]), &lv->h)) {
		fprintf(stderr, "levelc: size: two integers\n");
		return -1;
	}
	for (it = ents->data.sequence.items.start; it < ents->data.sequence.items.top; it++) {
		n = yaml_document_get_node(d, *it);
		if (lv->nent == MAX_ENT || entity_read(lv, d, n, (int)(it - ents->data.sequence.items.start)))
			return -1;
	}
	return 0;
}

/* Run "$KILN need URL [--output NAME]" and put its one line of output in
 * t->path. */
static int
kiln_need(const char *kiln, struct texture *t)
{
	char url[1024], *hash, buf[4096 + 2], sink[512];
	char *argv[] = {(char *)kiln, "need", url, NULL, NULL, NULL};
	posix_spawn_file_actions_t fa;
	int fd[2], status, rc, overflow = 0;
	size_t len = 0;
	ssize_t got;
	pid_t pid, w;

	if (snprintf(url, sizeof url, "%s", t->url) >= (int)sizeof url)
		return -1;
	if ((hash = strchr(url, '#')) != NULL) {
		*hash = '\0';
		argv[3] = "--output";
		argv[4] = hash + 1;
	}
	if (pipe2(fd, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
	rc = posix_spawn(&pid, kiln, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (rc != 0) {
		close(fd[0]);
		fprintf(stderr, "levelc: cannot run %s: %s\n", kiln, strerror(rc));
		return -1;
	}
	/* Read to the end even past our buffer, so kiln never blocks on a
	 * full pipe; an answer that did not fit is an error below. */
	while ((got = read(fd[0], len < sizeof buf - 1 ? buf + len : sink,
	                   len < sizeof buf - 1 ? sizeof buf - 1 - len : sizeof sink)) != 0) {
		if (got < 0 && errno != EINTR)
			break;
		if (got > 0 && len < sizeof buf - 1)
			len += (size_t)got;
		else if (got > 0)
			overflow = 1;
	}
	close(fd[0]);
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	buf[len] = '\0';
	if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "levelc: kiln need %s failed\n", t->url);
		return -1;
	}
	if (overflow || len < 2 || len == sizeof buf - 1 || buf[len - 1] != '\n' ||
	    strchr(buf, '\n') != buf + len - 1) {
		fprintf(stderr, "levelc: kiln need %s: expected one line, got '%s'\n", t->url, buf);
		return -1;
	}
	buf[len - 1] = '\0';
	memcpy(t->path, buf, len);
	return 0;
}

/* Materialize, read and hash every texture. */
static int
textures_fetch(struct level *lv)
{
	const char *kiln = getenv("KILN");
	unsigned char *data;

	if (kiln == NULL || *kiln == '\0') {
		fprintf(stderr, "levelc: KILN is not set: levelc runs as a kiln build step "
		        "and asks for textures with \"$KILN need URL\"\n");
		return -1;
	}
	for (int i = 0; i < lv->ntex; i++) {
		struct texture *t = &lv->tex[i];
		if (kiln_need(kiln, t) != 0 || (data = slurp("levelc", t->path, &t->size)) == NULL)
			return -1;
		hash128(data, t->size, t->hash);
		if (t->size >= 24 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
			t->width = (uint32_t)data[16] << 24 | (uint32_t)data[17] << 16 | data[18] << 8 | data[19];
			t->height = (uint32_t)data[20] << 24 | (uint32_t)data[21] << 16 | data[22] << 8 | data[23];
		}
		free(data);
	}
	return 0;
}

/* A JSON string of s (the level's names and URLs: printable text). */
static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	fputc('"', f);
}

static int
level_write(const struct level *lv, const char *out)
{
	FILE *f = fopen(out, "w");
	char hex[33];

	if (f == NULL) {
		perror(out);
		return -1;
	}
	fputs("{\n  \"level\": ", f);
	json_str(f, lv->name);
	fprintf(f, ",\n  \"size\": [%ld, %ld],\n  \"textures\": [\n", lv->w, lv->h);
	for (int i = 0; i < lv->ntex; i++) {
		hex32(lv->tex[i].hash, hex);
		fputs("    { \"url\": ", f);
		json_str(f, lv->tex[i].url);
		fprintf(f, ", \"xxh128\": \"%s\", \"size\": %zu, \"width\": %" PRIu32
		        ", \"height\": %" PRIu32 " }%s\n", hex, lv->tex[i].size,
		        lv->tex[i].width, lv->tex[i].height, i + 1 < lv->ntex ? "," : "");
	}
	fputs("  ],\n  \"entities\": [\n", f);
	for (int i = 0; i < lv->nent; i++) {
		fputs("    { \"type\": ", f);
		json_str(f, lv->ent[i].type);
		fprintf(f, ", \"texture\": %d, \"x\": %ld, \"y\": %ld }%s\n", lv->ent[i].texture,
		        lv->ent[i].x, lv->ent[i].y, i + 1 < lv->nent ? "," : "");
	}
	fputs("  ]\n}\n", f);
	return fclose(f) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	static struct level lv;
	yaml_parser_t p;
	yaml_document_t d;
	unsigned char *text;
	size_t len;
	int rc = 1;

	if (argc != 4 || strcmp(argv[1], "-o") != 0) {
		fprintf(stderr, "usage: levelc -o OUT.json LEVEL.yaml\n");
		return 2;
	}
	if ((text = slurp("levelc", argv[3], &len)) == NULL)
		return 1;
	if (!yaml_parser_initialize(&p)) {
		free(text);
		return 1;
	}
	yaml_parser_set_input_string(&p, text, len);
	if (!yaml_parser_load(&p, &d)) {
		fprintf(stderr, "levelc: %s:%zu:%zu: %s\n", argv[3], p.problem_mark.line + 1,
		        p.problem_mark.column + 1, p.problem ? p.problem : "malformed YAML");
		yaml_parser_delete(&p);
		free(text);
		return 1;
	}
	if (level_read(&lv, &d) == 0 && textures_fetch(&lv) == 0 && level_write(&lv, argv[2]) == 0)
		rc = 0;
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	free(text);
	return rc;
}
