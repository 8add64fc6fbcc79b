/* ui_image.c — the dashboard's thumbnails (docs/ui.md, "Images"):
 *
 *   GET api/image?url=U&output=O&profile=P
 *
 * answers the blob the store's index names for output O of step U in
 * profile P (the output last published: what build/ holds, also while
 * the step's newer run fails) when it is a PNG or a JPEG, told by its
 * first bytes, whatever its name; for a folder output, its first file in
 * path order named *.png, *.jpg or *.jpeg that is one. Nothing but an
 * output the index names is served: no part of the request reaches the
 * file system, so no path can be asked for. At most UI_MAX_IMAGE bytes.
 *
 * Threads: nng's HTTP threads, several at once (the store is
 * thread-safe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kiln_error.h"
#include "kiln_tree.h"
#include "ui_int.h"

#define IMAGE_TRIES 16   /* files of a folder looked into, at most */

/* "image/png" or "image/jpeg" by the magic numbers, or NULL. */
static const char *
image_type(const unsigned char *b, size_t n)
{
	static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

	if (n >= sizeof png && memcmp(b, png, sizeof png) == 0)
		return "image/png";
	if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return "image/jpeg";
	return NULL;
}

/* Whether a folder entry's name says it is an image. */
static int
image_name(const char *path)
{
	const char *dot = strrchr(path, '.');

	return dot != NULL && (strcasecmp(dot, ".png") == 0 ||
	                       strcasecmp(dot, ".jpg") == 0 ||
	                       strcasecmp(dot, ".jpeg") == 0);
}

/* The first bytes of blob id into head (len bytes at most); their count,
 * or a negative KILN_E* code. */
static ssize_t
blob_head(kiln_store *s, const kiln_id *id, unsigned char *head, size_t len)
{
	ssize_t n;
	int fd, rv;

	if ((rv = kiln_store_open_blob(s, id, &fd)) != 0)
		return rv;
	n = pread(fd, head, len, 0);
	close(fd);
	return n < 0 ? KILN_EIO : n;
}

/* Blob id read whole when it is an image of at most UI_MAX_IMAGE bytes:
 * 0 with *body, *len, *type; KILN_EINVAL (not an image), KILN_ERANGE
 * (larger), or the store's code. */
static int
image_read(kiln_store *s, const kiln_id *id, char **body, size_t *len,
           const char **type)
{
	uint64_t size;
	void *buf = NULL;
	size_t n = 0;
	const char *t;
	int rv;

	if ((rv = kiln_store_has(s, id, &size)) != 0)
		return rv;
	if (size > UI_MAX_IMAGE)
		return KILN_ERANGE;
	if ((rv = kiln_store_read(s, id, &buf, &n)) != 0)
		return rv;
	if ((t = image_type(buf, n)) == NULL) {
		free(buf);
		return KILN_EINVAL;
	}
	*type = t;
	*body = buf;
	*len = n;
	return 0;
}

/* The first image of the folder output whose tree record is id. */
static int
folder_image(kiln_store *s, const kiln_id *id, char **body, size_t *len,
             const char **type)
{
	kiln_tree *t;
	int rv, tries = 0;

	if ((rv = kiln_tree_load(s, id, &t)) != 0)
		return rv;
	rv = KILN_EINVAL;
	for (size_t i = 0; i < t->n && tries < IMAGE_TRIES; i++) {
		if (t->e[i].dir || !image_name(t->e[i].path) || t->e[i].size > UI_MAX_IMAGE)
			continue;
		tries++;
		if ((rv = image_read(s, &t->e[i].id, body, len, type)) == 0 ||
		    rv == KILN_ENOMEM)
			break;
		rv = KILN_EINVAL;
	}
	kiln_tree_free(t);
	return rv;
}

/* The blob the index names for output of url: "URL#NAME", or "URL" for
 * a step's one output named "out" (step_output_url). */
static int
output_id(kiln_store *s, const char *profile, const char *url, const char *output,
          kiln_id *id)
{
	char key[4096 + 256 + 2];
	int rv;

	snprintf(key, sizeof key, "%s#%s", url, output);
	rv = kiln_store_index_get(s, profile, key, id);
	if (rv != 0 && strcmp(output, "out") == 0)
		rv = kiln_store_index_get(s, profile, url, id);
	return rv;
}

/* {"error": msg} with status st (body NULL when out of memory). */
static uint16_t
image_error(uint16_t st, const char *msg, char **body)
{
	json_t *o = json_object();
	int err = kiln_json_text(o, "error", msg);

	*body = err ? NULL : kiln_json_dumps(o);
	if (err)
		json_decref(o);
	return st;
}

uint16_t
ui_image(struct kilnd_ui *u, const char *query, char **body, size_t *len,
         const char **type)
{
	kiln_store *s = u->d->store;
	char url[4096], output[256], profile[256];
	unsigned char head[16];
	kiln_id id;
	ssize_t n;
	int rv;

	if (query == NULL || ui_query_get(query, "url", url, sizeof url) != 0 ||
	    ui_query_get(query, "output", output, sizeof output) != 0 ||
	    ui_query_get(query, "profile", profile, sizeof profile) != 0 ||
	    url[0] == '\0' || output[0] == '\0' || profile[0] == '\0')
		return image_error(400, "image?url=U&output=O&profile=P", body);
	if (output_id(s, profile, url, output, &id) != 0)
		return image_error(404, "no such output published (a step's output, "
		                   "by its name)", body);
	/* a folder's tree record can be larger than any image: by its head */
	if ((n = blob_head(s, &id, head, sizeof head)) < 0)
		rv = (int)n;
	else if (kiln_tree_looks(head, (size_t)n))
		rv = folder_image(s, &id, body, len, type);
	else
		rv = image_read(s, &id, body, len, type);
	if (rv == 0)
		return 200;
	if (rv == KILN_EINVAL)
		return image_error(415, "not a PNG or JPEG image (nor a folder with one)",
		                   body);
	if (rv == KILN_ERANGE)
		return image_error(413, "the image is larger than the dashboard shows",
		                   body);
	return image_error(rv == KILN_ENOTFOUND ? 404 : 500, kiln_strerror(rv), body);
}
