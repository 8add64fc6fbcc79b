/* blob_watch.c — whether the blobs a warm daemon serves are still in
 * the store, without a stat per output per build.
 *
 * An up-to-date step's outputs are checked in build/ (decide.c's
 * outputs_intact), but its blobs could be gone from the store under the
 * daemon: `rm` in .kiln/store/objects/, `kiln fsck --repair` moving a bad
 * one to corrupt/, gc run by another process. The index would then name
 * nothing and a later restore fail. So a step is up to date only while its
 * blobs are in the store: a second inotify watch (watch.h), rooted at the
 * store's objects/ folder, says which blob names nothing touched since
 * they were last found there; the rest are stat'ed. Blobs are only ever
 * added there by the daemon's own puts, so a full build costs one event
 * per new blob, and a no-op none.
 *
 * Threads: any worker (the watch has its own lock). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_int.h"
#include "decide.h"
#include "watch.h"

void
blobs_watch_open(struct engine *e)
{
	char dir[PATH_MAX];

	if ((size_t)snprintf(dir, sizeof dir, "%s/objects", kiln_store_dir(e->s)) >= sizeof dir)
		return;
	if (e->watch != NULL && watch_new(dir, &e->blobs) != 0)
		e->blobs = NULL;
}

int
blob_present(struct engine *e, struct node_out *o)
{
	char hex[KILN_ID_HEX_LEN + 1], rel[KILN_ID_HEX_LEN + 2], path[PATH_MAX];
	uint64_t gen = 0;
	struct stat st;
	int watched;

	kiln_id_to_hex(&o->id, hex);
	snprintf(rel, sizeof rel, "%.2s/%s", hex, hex + 2);
	if (e->blobs != NULL && watch_clean(e->blobs, rel, o->blob_gen))
		return 1;
	watched = e->blobs != NULL && watch_prepare(e->blobs, rel, &gen) == 0;
	o->blob_gen = 0;
	if (kiln_store_blob_path(e->s, &o->id, path, sizeof path) != 0 ||
	    lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	o->blob_gen = watched ? gen : 0;
	return 1;
}
