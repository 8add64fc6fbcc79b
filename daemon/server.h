/* server.h — kilnd's nng side: the rep0 socket, its listeners, and the
 * workers that receive a request, have handlers.c answer it and send the
 * reply (server.c, workers.c, peers.c: the only daemon files that include
 * nng.h). */
#ifndef KILND_SERVER_H
#define KILND_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "kilnd.h"

/* Open the socket, start the workers, listen on the project's ipc:// socket
 * (mode 0600, peers of another uid refused) and on cfg.listen if set. On
 * failure err (len bytes) says why. Returns 0, KILN_EBUSY (address in use),
 * KILN_EINVAL (bad address, TLS files), KILN_EACCES, KILN_ENOMEM or
 * KILN_EIO. */
int server_start(struct kilnd *d, char *err, size_t len);

/* Answer parked polls, close every connection and listener, stop and free
 * the workers (waiting for the handlers in progress to return). */
void server_stop(struct kilnd *d);

/* The listen addresses the status reply reports: at most max of them into
 * urls, their number returned. Valid until server_stop. */
size_t server_listen_urls(struct kilnd *d, const char **urls, size_t max);

/* Whether the connection pipe is still open (peers.c). A connection
 * counts as closed before its subscriptions and uploads are dropped, so a
 * handler that made one and then finds its connection closed must drop
 * it itself. Any thread. */
int server_pipe_open(struct kilnd *d, uint32_t pipe);

#endif
