/* fuzz/cache.c — libFuzzer target for the remote-cache decoders of cache/
 * (docs/cache.md): each input is read as a first-level entry (an index)
 * and as a second-level one (a result), the way kilnd reads what a shared
 * cache sends back. Whatever decodes is walked (every path, URL, hash and
 * warning a reader uses), its result key computed, and encoded again, which
 * must succeed: the decoders accept only what the encoders would write. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache_entries.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A sink the compiler cannot drop the reads into. */
static volatile size_t sink;

static size_t
candidate_walk(const struct kiln_cache_candidate *c)
{
	size_t sum = c->duration_ns + (size_t)c->traced;

	for (size_t i = 0; i < c->nfiles; i++)
		sum += strlen(c->files[i].path) + c->files[i].sha[31] + (size_t)c->files[i].present;
	for (size_t i = 0; i < c->nneeds; i++)
		sum += strlen(c->needs[i].url) + strlen(c->needs[i].output) + c->needs[i].sha[0];
	for (size_t i = 0; i < c->nwarnings; i++)
		sum += strlen(c->warnings[i]);
	return sum;
}

static void
index_check(const struct kiln_cache_index *ix)
{
	uint8_t key[KILN_CACHE_SHA_LEN], *buf;
	size_t len;

	for (size_t i = 0; i < ix->ncandidates; i++) {
		sink += candidate_walk(&ix->candidates[i]);
		if (kiln_cache_result_key("fuzz", 4, &ix->candidates[i], key) != 0)
			abort(); /* a decoded candidate is a valid one */
		sink += key[0];
	}
	if (kiln_cache_index_encode(ix->candidates, ix->ncandidates, &buf, &len) != 0)
		abort();
	free(buf);
}

static void
result_check(const struct kiln_cache_result *r)
{
	uint8_t *buf;
	size_t len;

	for (size_t i = 0; i < r->noutputs; i++)
		sink += strlen(r->outputs[i].name) + r->outputs[i].blob.sha[0] + r->outputs[i].blob.size;
	if (kiln_cache_result_encode(r, &buf, &len) != 0)
		abort();
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_cache_index *ix;
	struct kiln_cache_result *r;

	if (kiln_cache_index_decode(data, size, &ix) == 0) {
		index_check(ix);
		kiln_cache_index_free(ix);
	}
	if (kiln_cache_result_decode(data, size, &r) == 0) {
		result_check(r);
		kiln_cache_result_free(r);
	}
	return 0;
}
