/* evsnap.c — a snapshot's pages (evsnap.h): each step as a StepState,
 * packed page by page so that no reply passes the bounds a poll reply
 * has (a snapshot of 100,000 steps is several hundred replies, never one
 * message a client with the smallest --max-message could not take). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "evsnap.h"
#include "kiln_proto.h"

/* A page being filled: its steps' messages, and their outputs. */
struct page_fill {
	Kiln__StepState *st, **pst;
	Kiln__StepOutput **ob;   /* per step: its outputs (malloc'd) */
	Kiln__StepOutput ***op;  /* per step: pointers to them */
	uint32_t n, max;
	size_t bytes;
};

static void
fill_clear(struct page_fill *f)
{
	for (uint32_t i = 0; i < f->n; i++) {
		free(f->ob[i]);
		free(f->op[i]);
	}
	f->n = 0;
	f->bytes = 0;
}

/* Step i of s as f's next message (not counted yet). */
static int
step_fill(const struct engine_snap *s, size_t i, kiln_store *store,
          struct page_fill *f)
{
	const struct engine_snap_step *sp = &s->steps[i];
	Kiln__StepState *st = &f->st[f->n];
	Kiln__StepOutput *ob = NULL, **op = NULL;

	kiln__step_state__init(st);
	if (sp->nouts > 0 && ((ob = calloc(sp->nouts, sizeof *ob)) == NULL ||
	                      (op = calloc(sp->nouts, sizeof *op)) == NULL)) {
		free(ob);
		return KILN_ENOMEM;
	}
	for (uint32_t k = 0; k < sp->nouts; k++) {
		struct engine_snap_out *o = &s->outs[sp->out0 + k];
		kiln__step_output__init(&ob[k]);
		ob[k].name = s->strs + o->name;
		ob[k].path = s->strs + o->path;
		ob[k].id = kiln_proto_id_ref(&o->id);
		if (o->size == UINT64_MAX && (store == NULL ||
		    kiln_store_has(store, &o->id, &o->size) != 0))
			o->size = 0; /* asked once: the pages are made once */
		ob[k].size = o->size;
		op[k] = &ob[k];
	}
	st->profile = s->strs + sp->profile;
	st->url = s->strs + sp->url;
	st->state = (Kiln__StepState__State)sp->state;
	st->building = sp->building != 0;
	st->error = s->strs + sp->error;
	st->outputs = op;
	st->n_outputs = sp->nouts;
	f->ob[f->n] = ob;
	f->op[f->n] = op;
	f->pst[f->n] = st;
	return 0;
}

/* Pack f's steps as the next page of p. */
static int
page_flush(struct page_fill *f, uint64_t epoch, uint64_t through, int more,
           struct ev_pages *p)
{
	Kiln__PollReply pr = KILN__POLL_REPLY__INIT;
	Kiln__Reply rep;
	struct ev_page *np;
	int rv;

	if ((np = realloc(p->page, (p->n + 1) * sizeof *np)) == NULL)
		return KILN_ENOMEM;
	p->page = np;
	pr.epoch = epoch;
	pr.through = through;
	pr.snapshot = f->pst;
	pr.n_snapshot = f->n;
	pr.snapshot_more = more;
	kiln_proto_reply_init(&rep);
	rep.body_case = KILN__REPLY__BODY_POLL_REPLY;
	rep.poll_reply = &pr;
	if ((rv = kiln_proto_pack_alloc(&rep.base, &np[p->n].buf, &np[p->n].len)) != 0)
		return rv;
	p->steps += f->n;
	p->bytes += np[p->n].len;
	p->n++;
	fill_clear(f);
	return 0;
}

void
evsnap_free(struct ev_pages *p)
{
	if (p == NULL)
		return;
	for (uint32_t i = 0; i < p->n; i++)
		free(p->page[i].buf);
	free(p->page);
	free(p);
}

/* The steps of s into p's pages. */
static int
pages_fill(const struct engine_snap *s, kiln_store *store, uint64_t epoch,
           uint64_t through, size_t max_bytes, struct page_fill *f,
           struct ev_pages *p)
{
	int rv;

	for (size_t i = 0; i < s->n; i++) {
		size_t sz;
		if ((rv = step_fill(s, i, store, f)) != 0)
			return rv;
		/* the step's bytes, its tag and length, and room for the
		 * envelope (as events.c's reply_pack counts) */
		sz = kiln__step_state__get_packed_size(&f->st[f->n]) + 12;
		if (f->n > 0 && (f->n == f->max || f->bytes + sz + 64 > max_bytes)) {
			Kiln__StepOutput *ob = f->ob[f->n], **op = f->op[f->n];
			Kiln__StepState keep = f->st[f->n];
			if ((rv = page_flush(f, epoch, through, 1, p)) != 0) {
				free(ob);
				free(op);
				return rv;
			}
			f->st[0] = keep;
			f->ob[0] = ob;
			f->op[0] = op;
			f->pst[0] = &f->st[0];
		}
		f->bytes += sz;
		f->n++;
	}
	return f->n > 0 ? page_flush(f, epoch, through, 0, p) : 0;
}

int
evsnap_pages(const struct engine_snap *s, kiln_store *store, uint64_t epoch,
             uint64_t through, size_t max_bytes, uint32_t max_steps,
             struct ev_pages **out)
{
	struct page_fill f = {.max = max_steps ? max_steps : 1};
	struct ev_pages *p;
	int rv = KILN_ENOMEM;

	*out = NULL;
	if (s == NULL || s->n == 0)
		return 0;
	if ((p = calloc(1, sizeof *p)) == NULL)
		return KILN_ENOMEM;
	/* one more slot than a page holds: the step that did not fit */
	if ((f.st = calloc(f.max + 1, sizeof *f.st)) != NULL &&
	    (f.pst = calloc(f.max + 1, sizeof *f.pst)) != NULL &&
	    (f.ob = calloc(f.max + 1, sizeof *f.ob)) != NULL &&
	    (f.op = calloc(f.max + 1, sizeof *f.op)) != NULL)
		rv = pages_fill(s, store, epoch, through, max_bytes, &f, p);
	if (f.ob != NULL && f.op != NULL)
		fill_clear(&f);
	free(f.st);
	free(f.pst);
	free(f.ob);
	free(f.op);
	if (rv != 0) {
		evsnap_free(p);
		return rv;
	}
	*out = p;
	return 0;
}
