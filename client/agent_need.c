/* agent_need.c — `kiln need` from a tool running on this agent
 * (docs/agents.md, "kiln need on an agent").
 *
 * The tool's `kiln need` talks to $KILN_SOCKET as it would to its daemon;
 * here that is a small rep socket of the agent's own, private to this
 * user like the daemon's. Each request must be a NeedRequest; it is
 * relayed to the daemon with the step's own token (which says which run
 * asks) over a connection of the relay's. An answer with outputs is made
 * true on this machine before the tool sees it: each output fetched into
 * the cache and copied to its project-relative path in the asking run's
 * folder (found by the token), so the path the tool is given is there.
 * Anything else a tool could send is refused.
 *
 * Threads: one relay thread; the slots' tokens are read through the
 * agent's find callback (under the agent's lock). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/transport/ipc/ipc.h>

#include "agent.h"
#include "libkiln_int.h"

struct agent_relay {
	nng_socket sock;
	int open;
	pthread_t thread;
	int started;
	struct agent_slot s;     /* its connection, the cache, a fetch folder */
	agent_find_fn find;
	void *arg;
	char url[PATH_MAX + 16];
	char path[PATH_MAX];
};

/* An error reply for the tool. */
static nng_msg *
reply_error(int code, const char *why)
{
	Kiln__Reply rep;
	nng_msg *m = NULL;
	uint8_t *buf;
	size_t len;

	kiln_proto_reply_init(&rep);
	rep.status = kiln_proto_status_of(code);
	rep.error = (char *)why;
	if (kiln_proto_pack_alloc(&rep.base, &buf, &len) != 0)
		return NULL;
	if (nng_msg_alloc(&m, len) == 0)
		memcpy(nng_msg_body(m), buf, len);
	free(buf);
	return m;
}

/* Lay the answer's outputs out in the run's folder work. */
static int
outputs_place(struct agent_relay *r, const Kiln__NeedReply *nr, const char *work,
              char *why, size_t len)
{
	for (size_t i = 0; i < nr->n_paths && i < nr->n_hashes; i++) {
		Kiln__AgentFile f = KILN__AGENT_FILE__INIT;
		char dst[PATH_MAX * 2];
		struct stat st;
		f.path = nr->paths[i];
		f.id = nr->hashes[i];
		snprintf(dst, sizeof dst, "%s/%s", work, nr->paths[i]);
		if (lstat(dst, &st) == 0)
			continue;   /* asked before in this run */
		if (agent_input_place(&r->s, work, &f, why, len) != 0)
			return KILN_EIO;
	}
	return 0;
}

/* One request from a tool: relayed, its outputs laid out, answered. */
static nng_msg *
relay_one(struct agent_relay *r, nng_msg *in)
{
	Kiln__Request *q = NULL, req;
	struct conn_reply cr;
	const uint8_t *data;
	size_t ndata, len;
	char work[PATH_MAX], why[PATH_MAX + 256];
	nng_msg *out = NULL;
	uint8_t *buf;
	int rv;

	if (kiln_proto_request_unpack(nng_msg_body(in), nng_msg_len(in), &q, &data, &ndata) != 0)
		return reply_error(KILN_EPROTO, "not a kiln.proto Request");
	if (q->body_case != KILN__REQUEST__BODY_NEED || q->need->token == NULL ||
	    r->find(r->arg, q->need->token, work, sizeof work) != 0) {
		kiln_proto_request_free(q);
		return reply_error(KILN_EAUTH, "this agent relays only kiln need from "
		                   "the steps it runs");
	}
	if (r->s.conn == NULL && (rv = agent_connect(r->s.cfg, &r->s.conn)) != 0) {
		kiln_proto_request_free(q);
		return reply_error(rv, "the agent cannot reach its daemon");
	}
	lk_request_init(r->s.conn, &req);
	req.body_case = KILN__REQUEST__BODY_NEED;
	req.need = q->need;
	rv = lk_call_main(r->s.conn, &req, KILN__REPLY__BODY_NEED_REPLY, &cr);
	if (rv != 0) {
		out = reply_error(rv, kiln_conn_error(r->s.conn)[0] ? kiln_conn_error(r->s.conn)
		                  : kiln_strerror(rv));
		if (rv != KILN_EFAILED && rv != KILN_EINVAL && rv != KILN_ENOTFOUND &&
		    rv != KILN_ECANCELLED) {
			kiln_close(r->s.conn);   /* connect again next time */
			r->s.conn = NULL;
		}
		kiln_proto_request_free(q);
		return out;
	}
	if (!cr.rep->need_reply->pending &&
	    outputs_place(r, cr.rep->need_reply, work, why, sizeof why) != 0) {
		out = reply_error(KILN_EIO, why);
	} else if (kiln_proto_pack_alloc(&cr.rep->base, &buf, &len) == 0) {
		if (nng_msg_alloc(&out, len) == 0)
			memcpy(nng_msg_body(out), buf, len);
		free(buf);
	}
	conn_reply_free(&cr);
	kiln_proto_request_free(q);
	return out;
}

static void *
relay_main(void *arg)
{
	struct agent_relay *r = arg;

	for (;;) {
		nng_msg *in, *out;
		if (nng_recvmsg(r->sock, &in, 0) != 0)
			break;   /* closed */
		out = relay_one(r, in);
		nng_msg_free(in);
		if (out != NULL && nng_sendmsg(r->sock, out, 0) != 0)
			nng_msg_free(out);
	}
	return NULL;
}

int
agent_relay_start(const struct agent_config *cfg, kiln_store *store, agent_find_fn find,
                  void *arg, struct agent_relay **rp, char *url, size_t urllen)
{
	struct agent_relay *r = calloc(1, sizeof *r);
	int rv;

	*rp = NULL;
	if (r == NULL)
		return KILN_ENOMEM;
	r->find = find;
	r->arg = arg;
	r->s.cfg = cfg;
	r->s.store = store;
	snprintf(r->s.work, sizeof r->s.work, "%s/work/need", cfg->cache);
	/* a unix socket's path is short: in the cache when it fits, else in
	 * the temporary folder */
	snprintf(r->path, sizeof r->path, "%s/need.sock", cfg->cache);
	if (strlen(r->path) > 100)
		snprintf(r->path, sizeof r->path, "/tmp/kiln-agent-%ld-need.sock", (long)getpid());
	unlink(r->path);
	snprintf(r->url, sizeof r->url, "ipc://%s", r->path);
	if ((rv = nng_rep0_open(&r->sock)) != 0) {
		free(r);
		return KILN_EIO;
	}
	r->open = 1;
	{
		/* the tools of this user only, like the daemon's socket */
		nng_listener l;
		if ((rv = nng_listener_create(&l, r->sock, r->url)) != 0 ||
		    (rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0600)) != 0 ||
		    (rv = nng_listener_start(l, 0)) != 0)
			rv = -1;
	}
	if (rv != 0 || pthread_create(&r->thread, NULL, relay_main, r) != 0) {
		agent_relay_stop(r);
		return KILN_EIO;
	}
	r->started = 1;
	snprintf(url, urllen, "%s", r->url);
	*rp = r;
	return 0;
}

void
agent_relay_stop(struct agent_relay *r)
{
	if (r == NULL)
		return;
	if (r->open)
		nng_close(r->sock);   /* ends the thread's receive */
	if (r->started)
		pthread_join(r->thread, NULL);
	kiln_close(r->s.conn);
	unlink(r->path);
	free(r);
}
