/* kiln_json.h — JSON output through jansson, shared by the CLI's --json
 * output and the daemon's dashboard (events over a websocket, its HTTP
 * answers). One policy for text that is not UTF-8 (file names are bytes):
 * each byte that does not start a valid UTF-8 sequence is replaced by
 * U+FFFD, and the object holding the field gets "<field>_replaced": true,
 * so the output is always valid JSON and a reader can tell (docs/protocol.md,
 * "JSON output").
 *
 * Every setter returns 0 or KILN_ENOMEM; callers OR them together and
 * check once, as jansson's own calls accept a NULL value and fail then. */
#ifndef KILN_JSON_H
#define KILN_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* s as a JSON string under the policy above (NULL: ""); *replaced is set
 * to 1 when a byte was replaced (left alone otherwise). NULL on ENOMEM. */
json_t *kiln_json_string(const char *s, int *replaced);

/* obj[key] = s, under the policy; obj[key "_replaced"] = true if needed. */
int kiln_json_text(json_t *obj, const char *key, const char *s);

/* obj[key] = [v[0], ... v[n-1]], each under the policy; one
 * obj[key "_replaced"] = true if any was replaced. */
int kiln_json_texts(json_t *obj, const char *key, const char *const *v, size_t n);

int kiln_json_int(json_t *obj, const char *key, int64_t v);
int kiln_json_uint(json_t *obj, const char *key, uint64_t v);
int kiln_json_bool(json_t *obj, const char *key, int v);
int kiln_json_null(json_t *obj, const char *key);
/* obj[key] = v rounded to 3 decimals (milliseconds with microseconds). */
int kiln_json_ms(json_t *obj, const char *key, double v);
/* obj[key] = v, taking v's reference (NULL v: KILN_ENOMEM). */
int kiln_json_put(json_t *obj, const char *key, json_t *v);
/* arr += v, taking v's reference. */
int kiln_json_push(json_t *arr, json_t *v);

/* v on one line, compact, keys in insertion order; v's reference is
 * taken. err != 0 (an earlier setter failed) prints nothing and returns
 * KILN_ENOMEM. Returns 0, KILN_ENOMEM or KILN_EIO. */
int kiln_json_print(FILE *f, json_t *v, int err);

/* v as a compact NUL-terminated string the caller frees; takes v's
 * reference. NULL on ENOMEM. */
char *kiln_json_dumps(json_t *v);

#endif
