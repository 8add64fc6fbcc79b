/* step.c — what every phase of a step shares: a growing string, the
 * step's error, its work in progress (node_work), its output paths and
 * URLs, its outputs as protobuf messages, its discovered files.
 *
 * Threads: the worker (or the reaper) holding the node, like the node's
 * result fields (engine_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "graph.h"
#include "publish.h"
#include "step.h"

void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t ncap = (b->n + n + 1) * 2;
		char *np = realloc(b->p, ncap);
		if (np == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

void
engine_logf(struct engine *e, int error, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	if (e->cfg.log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	e->cfg.log(e->cfg.arg, error, msg);
}

void
set_error(struct node *n, const char *fmt, ...)
{
	va_list ap;
	char buf[4096];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	free(n->error);
	n->error = strdup(buf);
}

int
node_work_get(struct node *n)
{
	if (n->w != NULL)
		return 0;
	if ((n->w = calloc(1, sizeof *n->w)) == NULL)
		return KILN_ENOMEM;
	key_parts_init(&n->w->parts);
	n->w->log_fd = -1;
	return 0;
}

void
node_work_free(struct node *n)
{
	if (n->w == NULL)
		return;
	key_parts_free(&n->w->parts);
	prev_drop(n);
	free(n->w->seen_in);
	free(n->w->disc_seen);
	for (size_t i = 0; i < n->w->nextra; i++)
		free(n->w->extra[i]);
	free(n->w->extra);
	free(n->w->landed);
	probe_words_free(&n->w->words);
	free(n->w);
	n->w = NULL;
}

int
step_output_path(const struct graph *g, const struct node *n, size_t i,
                 char *out, size_t outlen)
{
	const char *url = n->ks->url, *slash = strrchr(url, '/');
	/* an intermediate's outputs are the engine's: beside its store, where
	 * the watch reports nothing and nobody ships them */
	const char *top = n->ks->intermediate ? ".kiln/intermediate" : "build";
	int w;

	if (slash != NULL)
		w = snprintf(out, outlen, "%s/%s/%.*s/%s", top, g->profile,
		             (int)(slash - url), url, n->ks->outputs[i].file);
	else
		w = snprintf(out, outlen, "%s/%s/%s", top, g->profile, n->ks->outputs[i].file);
	return w < 0 || (size_t)w >= outlen ? KILN_ERANGE : 0;
}

struct pb_outputs *
step_outputs_pb(const struct node *n, int with_paths)
{
	size_t no = n->ks->noutputs;
	struct pb_outputs *o = malloc(sizeof *o + no * (sizeof *o->v + sizeof *o->p));

	if (o == NULL)
		return NULL;
	o->v = (Kiln__StepOutput *)(o + 1);
	o->p = (Kiln__StepOutput **)(o->v + no);
	o->n = no;
	for (size_t i = 0; i < no; i++) {
		kiln__step_output__init(&o->v[i]);
		o->v[i].name = (char *)n->ks->outputs[i].name;
		o->v[i].id.data = (uint8_t *)n->outs[i].id.b;
		o->v[i].id.len = 16;
		o->v[i].size = n->outs[i].size;
		if (with_paths)
			o->v[i].path = n->outpaths[i];
		o->p[i] = &o->v[i];
	}
	return o;
}

/* The index URL of output i: the step's URL, or URL#name for a step with
 * named outputs. */
int
step_input_output(const struct graph *g, const kiln_input *it, const struct node **d,
                  size_t *k)
{
	uint32_t at;

	if (it->path != NULL || !step_index(g->plan, it->url, &at))
		return KILN_ENOTFOUND;
	*d = &g->nodes[at];
	for (*k = 0; *k < (*d)->ks->noutputs; (*k)++)
		if (strcmp((*d)->ks->outputs[*k].name, it->output) == 0)
			return 0;
	return KILN_ENOTFOUND;
}

void
step_output_url(const struct node *n, size_t i, char *out, size_t outlen)
{
	const char *name = n->ks->outputs[i].name;

	if (n->ks->noutputs == 1 && strcmp(name, "out") == 0)
		snprintf(out, outlen, "%s", n->ks->url);
	else
		snprintf(out, outlen, "%s#%s", n->ks->url, name);
}

int
step_set_disc(struct node *n, char *const *paths, size_t count)
{
	char **v = count ? calloc(count, sizeof *v) : NULL;

	if (count && v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < count; i++)
		if ((v[i] = strdup(paths[i])) == NULL) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return KILN_ENOMEM;
		}
	for (size_t i = 0; i < n->ndisc; i++)
		free(n->disc[i]);
	free(n->disc);
	n->disc = v;
	n->ndisc = count;
	return 0;
}
