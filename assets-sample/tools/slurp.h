/*
 * slurp.h — read a whole file into memory, for the sample's small C tools
 * (loader, levelc), whose inputs are game assets of a few MB at
 * most. Single-threaded; no state.
 */
#ifndef SLURP_H
#define SLURP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read path into a malloc'ed buffer with a NUL after its last byte (so a
 * text file is also a C string); *len = its size. Returns the buffer, or
 * NULL with a message on stderr naming the tool (who) and the file. */
static inline unsigned char *
slurp(const char *who, const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long size;

	if (f == NULL) {
		fprintf(stderr, "%s: %s: %s\n", who, path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		goto fail;
	if ((buf = malloc((size_t)size + 1)) == NULL)
		goto fail;
	if (fread(buf, 1, (size_t)size, f) != (size_t)size)
		goto fail;
	buf[size] = '\0';
	fclose(f);
	*len = (size_t)size;
	return buf;
fail:
	fprintf(stderr, "%s: cannot read %s: %s\n", who, path,
	        errno ? strerror(errno) : "short read");
	free(buf);
	fclose(f);
	return NULL;
}

#endif
