/* ui_int.h — what the dashboard's files share (daemon/ui*.c): the state
 * behind struct kilnd_ui, the in-process call into the daemon's own
 * request handlers, and the compiled-in static files (generated from
 * daemon/ui/ by the Makefile). */
#ifndef KILND_UI_INT_H
#define KILND_UI_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "events.h"
#include "handlers.h"
#include "kiln_json.h"
#include "kilnd.h"
#include "ui.h"

#define UI_SECRET_LEN 32      /* hex characters of the secret */
#define UI_MAX_CONNS 16       /* websockets at once; more are closed */
#define UI_MAX_FRAME (1u << 20) /* largest message either way, bytes */
#define UI_MAX_LOG (4u << 20) /* a log served at most this big */
#define UI_MAX_TRACE (16u << 20) /* a build's trace, likewise */
#define UI_MAX_IMAGE (16u << 20) /* an image output, likewise */

/* One websocket: a page following the event stream. */
struct ui_conn {
	struct kilnd_ui *u;
	nng_stream *s;
	uint32_t pipe;          /* UI_PIPE_BASE + 1 + slot */
	pthread_t thread;
	int started;            /* thread was created (join it) */
	atomic_int done;        /* the thread has finished with the slot */
	pthread_mutex_t mu;     /* guards woken (events.c's wake takes it
	                         * with the events lock held; the thread never
	                         * holds it while calling into events.c) */
	pthread_cond_t cv;
	int woken;
	struct ev_waiter waiter;
};

struct kilnd_ui {
	struct kilnd *d;
	char secret[UI_SECRET_LEN + 1];
	pthread_mutex_t mu;     /* guards everything below */
	int serving;
	char url[256];
	unsigned saved_port;    /* from .kiln/ui: serve there at start */
	char saved_listen[64];
	nng_http_server *http;
	nng_stream_listener *ws;
	nng_aio *accept;
	struct ui_conn conns[UI_MAX_CONNS];
	atomic_int closing;     /* ui_free began: no new work */
	atomic_int inflight;    /* HTTP callbacks running now */
};

/* Whether s (NUL-terminated, any length) is the secret, in time that does
 * not depend on where they differ. */
int ui_secret_ok(const struct kilnd_ui *u, const char *s, size_t len);

/* Whether a request with this Origin header (NULL: none) and Host header
 * comes from the dashboard's own page, or from no page at all (curl, a
 * game engine's websocket client send no Origin): the only ones allowed
 * to act or to follow events. Another site's page sends its own origin. */
int ui_origin_ok(const char *origin, const char *host);

/* Run q (its body set; version filled in here) through the daemon's
 * request handlers as connection pipe, then give the answer's Reply as
 * JSON to *out (the "status", "error" and the reply's body fields).
 * Returns 0 (also for a refused request: see "status"), or KILN_ENOMEM. */
int ui_call(struct kilnd *d, uint32_t pipe, Kiln__Request *q, json_t **out);

/* ui_api.c: answer one API request (path after "/SECRET/api/", query
 * string or NULL) into *body (malloc'd JSON or log text), *type, and
 * returns the HTTP status. */
uint16_t ui_api(struct kilnd_ui *u, const char *method, const char *path,
                const char *query, char **body, size_t *len, const char **type);

/* ui_image.c: GET image?url=U&output=O&profile=P, an image output (PNG
 * or JPEG, or a folder output's first) as *body, *len, *type; returns the
 * HTTP status (*body a JSON error when not 200, NULL: out of memory). */
uint16_t ui_image(struct kilnd_ui *u, const char *query, char **body, size_t *len,
                  const char **type);

/* The value of key in a query string a=b&c=d, percent-decoded into buf;
 * 0, or KILN_ENOTFOUND, or KILN_ERANGE (longer than len - 1). */
int ui_query_get(const char *query, const char *key, char *buf, size_t len);

/* ui_ws.c: start accepting websockets on the server's port; close them. */
int ui_ws_start(struct kilnd_ui *u, const char *host, int port);
void ui_ws_stop(struct kilnd_ui *u);

/* The compiled-in files (obj/gen/ui_files.c). */
struct ui_file {
	const char *name;       /* "index.html" */
	const char *type;       /* its Content-Type */
	const unsigned char *data;
	size_t len;
};
extern const struct ui_file ui_files[];
extern const size_t ui_nfiles;

#endif
