/* json.c — the JSON helpers of kiln_json.h over jansson. jansson refuses
 * strings that are not UTF-8, so text passes through utf8_fix first; the
 * rest is small wrappers that turn jansson's -1/NULL into KILN_ENOMEM. */
#include "kiln_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_error.h"

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 when p starts none. */
static size_t
utf8_seq(const unsigned char *p)
{
	unsigned c = p[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

json_t *
kiln_json_string(const char *s, int *replaced)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)p), o = 0;
	char *fixed;
	json_t *v;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i);
		if (n == 0)
			break;
		i += n;
		if (i == len)
			return json_stringn((const char *)p, len);
	}
	if (len == 0)
		return json_string("");
	/* at most 3 bytes (U+FFFD) for each byte in */
	if ((fixed = malloc(len * 3 + 1)) == NULL)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i);
		if (n == 0) {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			if (replaced != NULL)
				*replaced = 1;
			continue;
		}
		memcpy(fixed + o, p + i, n);
		o += n;
		i += n;
	}
	v = json_stringn(fixed, o);
	free(fixed);
	return v;
}

/* obj[key "_replaced"] = true */
static int
flag_replaced(json_t *obj, const char *key)
{
	char name[128];

	snprintf(name, sizeof name, "%s_replaced", key);
	return json_object_set_new(obj, name, json_true()) == 0 ? 0 : KILN_ENOMEM;
}

int
kiln_json_text(json_t *obj, const char *key, const char *s)
{
	int replaced = 0;

	if (json_object_set_new(obj, key, kiln_json_string(s, &replaced)) != 0)
		return KILN_ENOMEM;
	return replaced ? flag_replaced(obj, key) : 0;
}

int
kiln_json_texts(json_t *obj, const char *key, const char *const *v, size_t n)
{
	json_t *arr = json_array();
	int replaced = 0;

	if (json_object_set_new(obj, key, arr) != 0)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, kiln_json_string(v[i], &replaced)) != 0)
			return KILN_ENOMEM;
	return replaced ? flag_replaced(obj, key) : 0;
}

int
kiln_json_put(json_t *obj, const char *key, json_t *v)
{
	return json_object_set_new(obj, key, v) == 0 ? 0 : KILN_ENOMEM;
}

int
kiln_json_push(json_t *arr, json_t *v)
{
	return json_array_append_new(arr, v) == 0 ? 0 : KILN_ENOMEM;
}

int
kiln_json_int(json_t *obj, const char *key, int64_t v)
{
	return kiln_json_put(obj, key, json_integer((json_int_t)v));
}

/* jansson's integers are signed 64-bit: a counter past 2^63 is clamped
 * (no kiln counter comes near it). */
int
kiln_json_uint(json_t *obj, const char *key, uint64_t v)
{
	return kiln_json_put(obj, key, json_integer(v > INT64_MAX ? INT64_MAX
	                                            : (json_int_t)v));
}

int
kiln_json_bool(json_t *obj, const char *key, int v)
{
	return kiln_json_put(obj, key, json_boolean(v));
}

int
kiln_json_null(json_t *obj, const char *key)
{
	return kiln_json_put(obj, key, json_null());
}

int
kiln_json_ms(json_t *obj, const char *key, double v)
{
	return kiln_json_put(obj, key, json_real(round(v * 1000.0) / 1000.0));
}

#define DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

int
kiln_json_print(FILE *f, json_t *v, int err)
{
	int rv = err != 0 ? KILN_ENOMEM : 0;

	if (rv == 0 && v == NULL)
		rv = KILN_ENOMEM;
	if (rv == 0 && (json_dumpf(v, f, DUMP_FLAGS) != 0 || fputc('\n', f) == EOF ||
	                fflush(f) != 0))
		rv = KILN_EIO;
	json_decref(v);
	return rv;
}

char *
kiln_json_dumps(json_t *v)
{
	char *s = v ? json_dumps(v, DUMP_FLAGS) : NULL;

	json_decref(v);
	return s;
}
