/* index.c — first-level entries (docs/cache.md, "The index entry"): an
 * ActionResult with no outputs whose stdout_raw is a kiln.cache.v1.Index
 * (proto/kiln_cache.proto) listing an action key's candidate results,
 * newest first; and the merge that puts a new candidate in front.
 *
 * A decoded index borrows its strings from the unpacked messages, which it
 * keeps in priv until kiln_cache_index_free. */
#include <stdlib.h>
#include <string.h>

#include "entries_int.h"

typedef Kiln__Cache__V1__Index pb_index;
typedef Kiln__Cache__V1__Candidate pb_cand;
typedef Kiln__Cache__V1__File pb_file;
typedef Kiln__Cache__V1__Need pb_need;

/* One candidate as messages, in canonical order. */
struct cand_msg {
	pb_cand m;
	pb_file *files;
	pb_file **pfiles;
	pb_need *needs;
	pb_need **pneeds;
};

static void
cand_msg_free(struct cand_msg *cm)
{
	free(cm->files);
	free(cm->pfiles);
	free(cm->needs);
	free(cm->pneeds);
}

/* Fill *cm from c in the order of cc. 0 or KILN_ENOMEM. */
static int
cand_msg_make(const struct kiln_cache_candidate *c, const struct canon *cc,
              struct cand_msg *cm)
{
	size_t nf = c->nfiles ? c->nfiles : 1, nn = c->nneeds ? c->nneeds : 1;

	kiln__cache__v1__candidate__init(&cm->m);
	cm->files = malloc(nf * sizeof *cm->files);
	cm->pfiles = malloc(nf * sizeof *cm->pfiles);
	cm->needs = malloc(nn * sizeof *cm->needs);
	cm->pneeds = malloc(nn * sizeof *cm->pneeds);
	if (!cm->files || !cm->pfiles || !cm->needs || !cm->pneeds)
		return KILN_ENOMEM;
	for (size_t i = 0; i < c->nfiles; i++) {
		pb_file *f = &cm->files[i];
		kiln__cache__v1__file__init(f);
		f->path = (char *)cc->files[i]->path;
		if (cc->files[i]->present) {
			f->sha256.len = KILN_CACHE_SHA_LEN;
			f->sha256.data = (uint8_t *)cc->files[i]->sha;
		}
		cm->pfiles[i] = f;
	}
	for (size_t i = 0; i < c->nneeds; i++) {
		pb_need *n = &cm->needs[i];
		kiln__cache__v1__need__init(n);
		n->url = (char *)cc->needs[i]->url;
		n->output = (char *)cc->needs[i]->output;
		n->sha256.len = KILN_CACHE_SHA_LEN;
		n->sha256.data = (uint8_t *)cc->needs[i]->sha;
		cm->pneeds[i] = n;
	}
	cm->m.n_files = c->nfiles;
	cm->m.files = cm->pfiles;
	cm->m.n_needs = c->nneeds;
	cm->m.needs = cm->pneeds;
	cm->m.traced = c->traced ? 1 : 0;
	cm->m.duration_ns = c->duration_ns;
	cm->m.n_warnings = c->nwarnings;
	cm->m.warnings = (char **)c->warnings;
	return 0;
}

/* Wrap the packed index ib in an ActionResult and pack that. */
static int
wrap_index(uint8_t *ib, size_t nib, uint8_t **buf, size_t *len)
{
	rx_result ar = BUILD__BAZEL__REMOTE__EXECUTION__V2__ACTION_RESULT__INIT;
	rx_meta meta = BUILD__BAZEL__REMOTE__EXECUTION__V2__EXECUTED_ACTION_METADATA__INIT;

	meta.worker = KILN_CACHE_WORKER;
	ar.stdout_raw.len = nib;
	ar.stdout_raw.data = ib;
	ar.execution_metadata = &meta;
	return result_pack(&ar, buf, len);
}

/* Pack the index of v[0..n), each already canonical in cc[i]. */
static int
index_pack(const struct kiln_cache_candidate *const *v, const struct canon *cc,
           size_t n, uint8_t **buf, size_t *len)
{
	pb_index ix = KILN__CACHE__V1__INDEX__INIT;
	struct cand_msg *cm = calloc(n, sizeof *cm);
	pb_cand **pc = calloc(n, sizeof *pc);
	uint8_t *ib = NULL;
	size_t nib;
	int rv = KILN_ENOMEM;

	if (cm == NULL || pc == NULL)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if ((rv = cand_msg_make(v[i], &cc[i], &cm[i])) != 0)
			goto fail;
		pc[i] = &cm[i].m;
	}
	ix.version = KILN_CACHE_INDEX_VERSION;
	ix.n_candidates = n;
	ix.candidates = pc;
	rv = KILN_ERANGE;
	if ((nib = kiln__cache__v1__index__get_packed_size(&ix)) > KILN_CACHE_ENTRY_MAX)
		goto fail;
	rv = KILN_ENOMEM;
	if ((ib = malloc(nib)) == NULL)
		goto fail;
	kiln__cache__v1__index__pack(&ix, ib);
	rv = wrap_index(ib, nib, buf, len);
fail:
	for (size_t i = 0; cm != NULL && i < n; i++)
		cand_msg_free(&cm[i]);
	free(cm);
	free(pc);
	free(ib);
	return rv;
}

/* Check v[0..n) and encode them: what kiln_cache_index_encode does, on an
 * array of pointers. */
static int
index_encode(const struct kiln_cache_candidate *const *v, size_t n, uint8_t **buf,
             size_t *len)
{
	struct canon *cc;
	size_t made = 0;
	int rv = 0;

	if (n == 0)
		return KILN_EINVAL;
	if (n > KILN_CACHE_CANDIDATES_MAX)
		return KILN_ERANGE;
	if ((cc = calloc(n, sizeof *cc)) == NULL)
		return KILN_ENOMEM;
	for (; made < n && rv == 0; made++)
		rv = canon_make(v[made], &cc[made]);
	if (rv != 0) {
		made--; /* the failed one freed itself */
		goto fail;
	}
	/* Two candidates with one set of conditions: one is stale. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (canon_same(v[i], &cc[i], v[j], &cc[j])) {
				rv = KILN_EINVAL;
				goto fail;
			}
	rv = index_pack(v, cc, n, buf, len);
fail:
	for (size_t i = 0; i < made; i++)
		canon_free(&cc[i]);
	free(cc);
	return rv;
}

int
kiln_cache_index_encode(const struct kiln_cache_candidate *c, size_t n, uint8_t **buf,
                        size_t *len)
{
	const struct kiln_cache_candidate *v[KILN_CACHE_CANDIDATES_MAX];

	if (n > KILN_CACHE_CANDIDATES_MAX)
		return KILN_ERANGE;
	for (size_t i = 0; i < n; i++)
		v[i] = &c[i];
	return index_encode(v, n, buf, len);
}

int
kiln_cache_index_merge(const struct kiln_cache_index *old,
                       const struct kiln_cache_candidate *add, uint8_t **buf, size_t *len)
{
	const struct kiln_cache_candidate *v[KILN_CACHE_CANDIDATES_MAX];
	struct canon ca, co;
	size_t n = 1;
	int rv;

	if ((rv = canon_make(add, &ca)) != 0)
		return rv;
	v[0] = add;
	for (size_t i = 0; old != NULL && i < old->ncandidates && n < KILN_CACHE_CANDIDATES_MAX; i++) {
		const struct kiln_cache_candidate *o = &old->candidates[i];
		int same;
		if ((rv = canon_make(o, &co)) != 0)
			continue; /* not decoded by us: leave it out */
		same = canon_same(add, &ca, o, &co);
		canon_free(&co);
		if (!same)
			v[n++] = o;
	}
	canon_free(&ca);
	/* The oldest go first when the entry would be too large. */
	while ((rv = index_encode(v, n, buf, len)) == KILN_ERANGE && n > 1)
		n--;
	return rv;
}

/* ---- decoding ------------------------------------------------------------ */

struct index_priv {
	rx_result *ar;
	pb_index *ix;
};

void
kiln_cache_index_free(struct kiln_cache_index *ix)
{
	struct index_priv *p;

	if (ix == NULL)
		return;
	p = ix->priv;
	for (size_t i = 0; i < ix->ncandidates; i++) {
		free((void *)ix->candidates[i].files);
		free((void *)ix->candidates[i].needs);
	}
	free(ix->candidates);
	if (p != NULL) {
		if (p->ix != NULL)
			protobuf_c_message_free_unpacked(&p->ix->base, NULL);
		if (p->ar != NULL)
			protobuf_c_message_free_unpacked(&p->ar->base, NULL);
		free(p);
	}
	free(ix);
}

/* Convert one decoded candidate into *c (arrays allocated, strings
 * borrowed) and check it, in canonical order, against the layout. */
static int
cand_from_msg(const pb_cand *m, struct kiln_cache_candidate *c)
{
	struct kiln_cache_file *f;
	struct kiln_cache_need *nd;
	struct canon cc;
	int rv;

	if (m->base.n_unknown_fields != 0 || m->n_files > KILN_CACHE_FILES_MAX ||
	    m->n_needs > KILN_CACHE_NEEDS_MAX)
		return KILN_ECORRUPT;
	f = calloc(m->n_files ? m->n_files : 1, sizeof *f);
	nd = calloc(m->n_needs ? m->n_needs : 1, sizeof *nd);
	c->files = f;
	c->needs = nd;
	if (f == NULL || nd == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < m->n_files; i++) {
		const pb_file *x = m->files[i];
		if (x->base.n_unknown_fields != 0 || (x->sha256.len != 0 && !check_sha(&x->sha256)))
			return KILN_ECORRUPT;
		f[i].path = x->path;
		f[i].present = x->sha256.len != 0;
		if (f[i].present)
			memcpy(f[i].sha, x->sha256.data, KILN_CACHE_SHA_LEN);
	}
	for (size_t i = 0; i < m->n_needs; i++) {
		const pb_need *x = m->needs[i];
		if (x->base.n_unknown_fields != 0 || !check_sha(&x->sha256))
			return KILN_ECORRUPT;
		nd[i].url = x->url;
		nd[i].output = x->output;
		memcpy(nd[i].sha, x->sha256.data, KILN_CACHE_SHA_LEN);
	}
	c->nfiles = m->n_files;
	c->nneeds = m->n_needs;
	c->traced = m->traced;
	c->duration_ns = m->duration_ns;
	c->warnings = (const char *const *)m->warnings;
	c->nwarnings = m->n_warnings;
	if ((rv = canon_make(c, &cc)) != 0)
		return rv == KILN_ENOMEM ? rv : KILN_ECORRUPT;
	/* Canonical order on the wire: sorting moved nothing. */
	for (size_t i = 0; i < c->nfiles && rv == 0; i++)
		rv = cc.files[i] == &f[i] ? 0 : KILN_ECORRUPT;
	for (size_t i = 0; i < c->nneeds && rv == 0; i++)
		rv = cc.needs[i] == &nd[i] ? 0 : KILN_ECORRUPT;
	canon_free(&cc);
	return rv;
}

/* Check the envelope of a first-level entry and unpack its index. */
static int
index_unpack(const void *buf, size_t len, struct index_priv *p)
{
	const ProtobufCBinaryData *raw;
	ProtobufCMessage *m;
	int rv;

	if ((rv = result_unpack(buf, len, &p->ar)) != 0)
		return rv;
	raw = &p->ar->stdout_raw;
	if (p->ar->n_output_files != 0 || p->ar->stdout_digest != NULL || raw->len == 0)
		return KILN_ECORRUPT;
	rv = kiln_proto_unpack_bounded(&kiln__cache__v1__index__descriptor, raw->data,
	                               raw->len, &m);
	if (rv != 0)
		return rv == KILN_ENOMEM ? rv : KILN_ECORRUPT;
	p->ix = (pb_index *)m;
	if ((rv = check_canonical(m, raw->data, raw->len)) != 0)
		return rv;
	if (m->n_unknown_fields != 0 || p->ix->version != KILN_CACHE_INDEX_VERSION ||
	    p->ix->n_candidates == 0 || p->ix->n_candidates > KILN_CACHE_CANDIDATES_MAX)
		return KILN_ECORRUPT;
	return 0;
}

int
kiln_cache_index_decode(const void *buf, size_t len, struct kiln_cache_index **out)
{
	struct kiln_cache_index *ix = calloc(1, sizeof *ix);
	struct index_priv *p = calloc(1, sizeof *p);
	int rv = KILN_ENOMEM;

	*out = NULL;
	if (ix == NULL || p == NULL) {
		free(ix);
		free(p);
		return KILN_ENOMEM;
	}
	ix->priv = p;
	if ((rv = index_unpack(buf, len, p)) != 0)
		goto fail;
	ix->candidates = calloc(p->ix->n_candidates, sizeof *ix->candidates);
	if (ix->candidates == NULL) {
		rv = KILN_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < p->ix->n_candidates && rv == 0; i++) {
		ix->ncandidates = i + 1; /* so that free sees its arrays */
		rv = cand_from_msg(p->ix->candidates[i], &ix->candidates[i]);
	}
	for (size_t i = 0; rv == 0 && i < ix->ncandidates; i++)
		for (size_t j = i + 1; rv == 0 && j < ix->ncandidates; j++)
			rv = canon_same(&ix->candidates[i], NULL, &ix->candidates[j], NULL) ?
			             KILN_ECORRUPT : 0;
	if (rv != 0)
		goto fail;
	*out = ix;
	return 0;
fail:
	kiln_cache_index_free(ix);
	return rv;
}
