/* depfile.h — reading the make-style dependency files tools write
 * (gcc -MD, glslangValidator --depfile): "target...: prerequisite..."
 * rules, lines continued with a backslash, spaces in names escaped as "\ "
 * and "$$" for "$". Only the prerequisites matter to kiln. */
#ifndef KILND_DEPFILE_H
#define KILND_DEPFILE_H

#include <stddef.h>

/* Parse len bytes: *paths gets a malloc'd array of the distinct
 * prerequisites in the order first seen (each malloc'd; free with
 * depfile_free). Returns 0, KILN_EINVAL (not a depfile: a rule without
 * ':'), KILN_ENOMEM. */
int depfile_parse(const char *buf, size_t len, char ***paths, size_t *n);
void depfile_free(char **paths, size_t n);

#endif
