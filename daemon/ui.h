/* ui.h — the web dashboard kilnd serves on request (`kiln ui`, UiRequest;
 * docs/ui.md): static pages compiled in, JSON answers to the same requests
 * the CLI makes, and the event stream over a websocket, all on one nng HTTP
 * server, every URL behind a per-daemon secret.
 *
 * Threads: ui_new and ui_free run on the main thread (before serving and
 * after the server stopped taking requests); ui_start on a handler thread
 * (under the module's lock); the HTTP callbacks on nng's threads; each
 * websocket connection on a thread of its own (ui_ws.c). */
#ifndef KILND_UI_H
#define KILND_UI_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_proto.h"

struct kilnd;
struct kilnd_ui;

/* The pipe ids the dashboard's in-process calls use: above any nng pipe id
 * (nng's are below 2^31), so that subscriptions and build owners of the
 * page never collide with a real connection's. */
#define UI_PIPE_BASE 0x80000000u

/* Make the (idle) dashboard state: the secret is drawn here. Returns 0,
 * KILN_ENOMEM or KILN_EIO (no random bytes). */
int ui_new(struct kilnd *d, struct kilnd_ui **up);

/* Stop serving (closing every websocket, joining their threads) and free.
 * NULL is allowed. */
void ui_free(struct kilnd_ui *u);

/* Serve the dashboard as q asks, or keep serving it; url gets its address
 * with the secret. Returns 0, KILN_EINVAL (an address not allowed: see
 * UiRequest.listen; the reason in err), KILN_EBUSY (the port is taken) or
 * KILN_EIO. */
int ui_start(struct kilnd_ui *u, const Kiln__UiRequest *q, char *url,
             size_t len, char *err, size_t errlen);

/* At start: serve the dashboard again where the project's last daemon
 * served it (.kiln/ui), so that open pages reconnect. Logs the outcome. */
void ui_resume(struct kilnd_ui *u);

/* Whether pipe (>= UI_PIPE_BASE) belongs to the dashboard and is open. */
int ui_pipe_open(struct kilnd_ui *u, uint32_t pipe);

#endif
