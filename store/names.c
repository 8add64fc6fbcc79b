/* names.c — what a URL, a project-relative path and a profile name may be.
 * These strings reach file names (build/<profile>/<url>) and database keys,
 * so anything that could escape a folder or confuse a terminal is refused. */
#include <string.h>

#include "store_int.h"

#define URL_MAX 400 /* profile + NUL + URL must stay under LMDB's 511-byte keys */
#define PROFILE_MAX 64

int
kiln_url_check(const char *url)
{
	return url == NULL ? KILN_EINVAL : names_url_check(url, strlen(url));
}

int
names_url_check(const char *url, size_t len)
{
	size_t seg = 0;

	if (len == 0 || len > URL_MAX)
		return KILN_EINVAL;
	if (url[0] == '/')
		return KILN_EINVAL;
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = i < len ? (unsigned char)url[i] : '/';
		if (c == '/') {
			size_t n = i - seg;
			const char *s = url + seg;
			if (n == 0 || (n == 1 && s[0] == '.') ||
			    (n == 2 && s[0] == '.' && s[1] == '.'))
				return KILN_EINVAL;
			seg = i + 1;
			continue;
		}
		if (c < 0x20 || c == 0x7f || c == '\\')
			return KILN_EINVAL;
	}
	return 0;
}

int
kiln_profile_check(const char *p)
{
	return p == NULL ? KILN_EINVAL : names_profile_check(p, strlen(p));
}

int
names_profile_check(const char *p, size_t len)
{
	if (len == 0 || len > PROFILE_MAX)
		return KILN_EINVAL;
	if (p[0] == '.' || p[0] == '-')
		return KILN_EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return KILN_EINVAL;
	}
	return 0;
}
