/* result.c — second-level entries (docs/cache.md, "The result entry"): a
 * plain REAPI ActionResult whose output_files are a step's outputs (path =
 * the output's name, digest = its blob's SHA-256 and size) and whose
 * stdout_digest is the run's log. Nothing kiln-specific is in it, so a
 * server that checks that every blob an entry names is still in its CAS
 * (bazel-remote) checks kiln's results completely.
 *
 * A decoded result borrows its names from the unpacked message, which it
 * keeps in priv until kiln_cache_result_free. */
#include <stdlib.h>
#include <string.h>

#include "entries_int.h"

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether the n names are unique (sorted copies; n >= 1). 0, KILN_EINVAL
 * or KILN_ENOMEM. */
static int
names_unique(const struct kiln_cache_output *v, size_t n)
{
	const char **names = malloc(n * sizeof *names);
	int rv = 0;

	if (names == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n; i++)
		names[i] = v[i].name;
	qsort(names, n, sizeof *names, name_cmp);
	for (size_t i = 1; i < n && rv == 0; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			rv = KILN_EINVAL;
	free(names);
	return rv;
}

/* Check r's outputs: count, names, sizes, duplicates. */
static int
outputs_ok(const struct kiln_cache_output *v, size_t n)
{
	if (n > KILN_CACHE_OUTPUTS_MAX)
		return KILN_ERANGE;
	for (size_t i = 0; i < n; i++)
		if (v[i].name == NULL || !check_output_name(v[i].name) ||
		    v[i].blob.size > INT64_MAX)
			return KILN_EINVAL;
	return n > 0 ? names_unique(v, n) : 0;
}

static void
digest_set(rx_digest *dg, char hex[KILN_CACHE_HEX_LEN + 1], const struct kiln_cache_digest *d)
{
	build__bazel__remote__execution__v2__digest__init(dg);
	kiln_cache_hex(d->sha, hex);
	dg->hash = hex;
	dg->size_bytes = (int64_t)d->size;
}

/* The messages of one output, and its hash's hex. */
struct out_msg {
	rx_file f;
	rx_digest dg;
	char hex[KILN_CACHE_HEX_LEN + 1];
};

int
kiln_cache_result_encode(const struct kiln_cache_result *r, uint8_t **buf, size_t *len)
{
	rx_result ar = BUILD__BAZEL__REMOTE__EXECUTION__V2__ACTION_RESULT__INIT;
	rx_meta meta = BUILD__BAZEL__REMOTE__EXECUTION__V2__EXECUTED_ACTION_METADATA__INIT;
	rx_digest log;
	char loghex[KILN_CACHE_HEX_LEN + 1];
	struct out_msg *om = NULL;
	rx_file **pf = NULL;
	size_t n = r->noutputs;
	int rv;

	if ((rv = outputs_ok(r->outputs, n)) != 0)
		return rv;
	if (r->has_log && r->log.size > INT64_MAX)
		return KILN_EINVAL;
	om = malloc((n ? n : 1) * sizeof *om);
	pf = malloc((n ? n : 1) * sizeof *pf);
	rv = KILN_ENOMEM;
	if (om == NULL || pf == NULL)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		build__bazel__remote__execution__v2__output_file__init(&om[i].f);
		om[i].f.path = (char *)r->outputs[i].name;
		digest_set(&om[i].dg, om[i].hex, &r->outputs[i].blob);
		om[i].f.digest = &om[i].dg;
		om[i].f.is_executable = r->outputs[i].executable ? 1 : 0;
		pf[i] = &om[i].f;
	}
	ar.n_output_files = n;
	ar.output_files = pf;
	if (r->has_log) {
		digest_set(&log, loghex, &r->log);
		ar.stdout_digest = &log;
	}
	/* Never zero bytes (a miss to bazel-remote), even with no outputs. */
	meta.worker = KILN_CACHE_WORKER;
	ar.execution_metadata = &meta;
	rv = result_pack(&ar, buf, len);
fail:
	free(om);
	free(pf);
	return rv;
}

struct result_priv {
	rx_result *ar;
	struct kiln_cache_output *outs;
};

void
kiln_cache_result_free(struct kiln_cache_result *r)
{
	struct result_priv *p;

	if (r == NULL)
		return;
	if ((p = r->priv) != NULL) {
		if (p->ar != NULL)
			protobuf_c_message_free_unpacked(&p->ar->base, NULL);
		free(p->outs);
		free(p);
	}
	free(r);
}

/* Fill r from the checked envelope p->ar. 0, KILN_ECORRUPT or KILN_ENOMEM. */
static int
result_from_msg(struct result_priv *p, struct kiln_cache_result *r)
{
	const rx_result *ar = p->ar;
	size_t n = ar->n_output_files;
	int rv;

	if (n > KILN_CACHE_OUTPUTS_MAX || ar->stdout_raw.len != 0)
		return KILN_ECORRUPT;
	if ((p->outs = calloc(n ? n : 1, sizeof *p->outs)) == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const rx_file *f = ar->output_files[i];
		if (f->base.n_unknown_fields != 0 || !check_digest(f->digest, &p->outs[i].blob))
			return KILN_ECORRUPT;
		p->outs[i].name = f->path;
		p->outs[i].executable = f->is_executable;
	}
	if ((rv = outputs_ok(p->outs, n)) != 0)
		return rv == KILN_ENOMEM ? rv : KILN_ECORRUPT;
	r->outputs = p->outs;
	r->noutputs = n;
	if (ar->stdout_digest != NULL) {
		if (!check_digest(ar->stdout_digest, &r->log))
			return KILN_ECORRUPT;
		r->has_log = 1;
	}
	return 0;
}

int
kiln_cache_result_decode(const void *buf, size_t len, struct kiln_cache_result **out)
{
	struct kiln_cache_result *r = calloc(1, sizeof *r);
	struct result_priv *p = calloc(1, sizeof *p);
	int rv;

	*out = NULL;
	if (r == NULL || p == NULL) {
		free(r);
		free(p);
		return KILN_ENOMEM;
	}
	r->priv = p;
	if ((rv = result_unpack(buf, len, &p->ar)) != 0 || (rv = result_from_msg(p, r)) != 0) {
		kiln_cache_result_free(r);
		return rv;
	}
	*out = r;
	return 0;
}
