/* action_results.c — the results kept under one action key (see
 * decide.h and proto/kiln.proto's ActionEntry).
 *
 * A step's key names its declared inputs but not the files its runs
 * discovered (depfile, trace) nor the assets they needed, so two runs with
 * one key can differ: an #include edited and then undone. Each key keeps
 * up to RESULTS_MAX results, newest use first; a lookup takes the first
 * whose discovered files and needs still hold. A new result replaces one
 * that discovered the same files with the same hashes (it is the same
 * variant, run again: its blobs were gone, say) and otherwise goes in
 * front; past RESULTS_MAX the last, least recently used, goes. A result
 * used from further back is moved to the front.
 *
 * The entry is read from the store and written through the record batch:
 * two runs of one key finishing within one commit keep only the later
 * one's entry (a later miss, never a wrong hit).
 *
 * Threads: workers, each on a node it holds; nothing shared but the
 * batch (engine_batch_lock). */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "decide.h"
#include "record_batch.h"

#define RESULTS_MAX 8

Kiln__ActionEntry *
results_get(struct engine *e, const kiln_id *key)
{
	kiln_action *a = NULL;
	Kiln__ActionEntry *entry = NULL;

	if (kiln_store_action_get(e->s, key, &a) != 0)
		return NULL;
	entry = kiln__action_entry__unpack(NULL, a->len, a->data);
	kiln_action_free(a);
	return entry;
}

static int
bytes_eq(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Whether two results discovered the same files with the same hashes and
 * needed the same outputs: then the newer replaces the older. */
static int
same_variant(const Kiln__ActionResult *a, const Kiln__ActionResult *b)
{
	if (a->n_files != b->n_files || a->n_needs != b->n_needs)
		return 0;
	for (size_t i = 0; i < a->n_files; i++)
		if (strcmp(a->files[i]->path, b->files[i]->path) != 0 ||
		    !bytes_eq(&a->files[i]->hash, &b->files[i]->hash))
			return 0;
	for (size_t i = 0; i < a->n_needs; i++)
		if (strcmp(a->needs[i]->url, b->needs[i]->url) != 0 ||
		    strcmp(a->needs[i]->output, b->needs[i]->output) != 0 ||
		    !bytes_eq(&a->needs[i]->hash, &b->needs[i]->hash))
			return 0;
	return 1;
}

/* Queue v[0..n) as key's entry, with the union of their output blobs for
 * gc. 0 or KILN_ENOMEM. */
static int
entry_queue(struct engine *e, const kiln_id *key, Kiln__ActionResult **v, size_t n)
{
	Kiln__ActionEntry entry = KILN__ACTION_ENTRY__INIT;
	size_t nids = 0, len;
	kiln_id *ids;
	uint8_t *buf;
	kiln_batch *b;
	int rv;

	for (size_t i = 0; i < n; i++)
		nids += v[i]->n_outputs;
	if ((ids = calloc(nids + 1, sizeof *ids)) == NULL)
		return KILN_ENOMEM;
	nids = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i]->n_outputs; k++)
			if (v[i]->outputs[k]->id.len == 16)
				memcpy(ids[nids++].b, v[i]->outputs[k]->id.data, 16);
	entry.results = v;
	entry.n_results = n;
	len = kiln__action_entry__get_packed_size(&entry);
	if ((buf = malloc(len ? len : 1)) == NULL) {
		free(ids);
		return KILN_ENOMEM;
	}
	kiln__action_entry__pack(&entry, buf);
	engine_batch_lock(e, &b);
	rv = kiln_batch_action_put(b, key, ids, nids, buf, len);
	engine_batch_unlock(e);
	free(buf);
	free(ids);
	return rv;
}

int
results_put(struct engine *e, const kiln_id *key, Kiln__ActionResult *ar)
{
	Kiln__ActionEntry *old = results_get(e, key);
	Kiln__ActionResult *v[RESULTS_MAX];
	size_t n = 0;
	int rv;

	v[n++] = ar;
	for (size_t i = 0; old != NULL && i < old->n_results && n < RESULTS_MAX; i++)
		if (!same_variant(old->results[i], ar))
			v[n++] = old->results[i];
	rv = entry_queue(e, key, v, n);
	if (old != NULL)
		kiln__action_entry__free_unpacked(old, NULL);
	return rv;
}

int
results_touch(struct engine *e, const kiln_id *key, Kiln__ActionEntry *entry, size_t at)
{
	Kiln__ActionResult *v[RESULTS_MAX];
	size_t n = 0;

	if (at == 0 || at >= entry->n_results)
		return 0;
	v[n++] = entry->results[at];
	for (size_t i = 0; i < entry->n_results && n < RESULTS_MAX; i++)
		if (i != at)
			v[n++] = entry->results[i];
	return entry_queue(e, key, v, n);
}
