/* test_gc.c — kiln_store_gc keeps roots and removes the rest.
 *
 * Roots are index entries of every profile and action results used within
 * action_max_age_s. Everything else goes (least recently used first when a
 * size budget is given), except blobs inside their grace period. Each case
 * checks the files under objects/ as well as the API, and ends with a clean
 * fsck: gc must never leave a record naming a removed blob.
 *
 * Cases that need stamps to be old open the store with a test clock
 * (struct tu_clock) and move it on by OLD_MS instead of sleeping. AGE_S,
 * the max age or grace period they give gc, lies between: what was
 * stamped before the move is older, what was stamped after is "just now"
 * with AGE_S seconds of real time to spare before gc judges it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"

#define AGE_S 5
#define OLD_MS 10000

static const char *
hex_of(const kiln_id *id)
{
	static char bufs[4][KILN_ID_HEX_LEN + 1];
	static int next;
	char *b = bufs[next++ % 4];

	kiln_id_to_hex(id, b);
	return b;
}

/* The blob's file must be there, sound, and kiln_store_has must agree. */
static void
assert_kept(void **state, kiln_store *s, const kiln_id *id, const char *what)
{
	char hex[KILN_ID_HEX_LEN + 1];
	struct stat st;
	int rv;

	kiln_id_to_hex(id, hex);
	if ((rv = kiln_store_has(s, id, NULL)) != 0)
		fail_msg("%s (%s) should have survived gc, has() says %s", what,
		         hex, kiln_strerror(rv));
	if (stat(tu_blob_path(state, id), &st) != 0)
		fail_msg("%s (%s) should have survived gc, its file is gone: %s",
		         what, hex, strerror(errno));
	if ((rv = kiln_store_verify(s, id)) != 0)
		fail_msg("%s (%s) survived but does not verify: %s", what, hex,
		         kiln_strerror(rv));
}

/* The blob's file must be there (no store call: it might count as a use). */
static void
assert_file_there(void **state, const kiln_id *id, const char *what)
{
	char hex[KILN_ID_HEX_LEN + 1];
	struct stat st;

	kiln_id_to_hex(id, hex);
	if (stat(tu_blob_path(state, id), &st) != 0)
		fail_msg("%s (%s) should have survived gc, its file is gone: %s",
		         what, hex, strerror(errno));
}

/* The blob must be gone: no file, has() says not found. */
static void
assert_removed(void **state, kiln_store *s, const kiln_id *id, const char *what)
{
	char hex[KILN_ID_HEX_LEN + 1];
	struct stat st;
	int rv;

	kiln_id_to_hex(id, hex);
	if ((rv = kiln_store_has(s, id, NULL)) != KILN_ENOTFOUND)
		fail_msg("%s (%s) should have been removed by gc, has() says %s",
		         what, hex, kiln_strerror(rv));
	if (stat(tu_blob_path(state, id), &st) == 0)
		fail_msg("%s (%s): has() says gone but its file is still in objects/",
		         what, hex);
}

/* What gc reported through kiln_gc_opts.removed, in call order. */
static struct {
	size_t n;
	kiln_id id[64];
	uint64_t size[64];
} removed_log;

static void
log_removed(const kiln_id *id, uint64_t size, void *arg)
{
	(void)arg;
	if (removed_log.n < 64) {
		removed_log.id[removed_log.n] = *id;
		removed_log.size[removed_log.n] = size;
	}
	removed_log.n++;
}

static kiln_gc_stats
run_gc(kiln_store *s, uint64_t max_size, int64_t max_age_s, int64_t grace_s,
       int dry_run)
{
	kiln_gc_opts o = {.max_size = max_size,
	                  .action_max_age_s = max_age_s,
	                  .grace_s = grace_s,
	                  .dry_run = dry_run,
	                  .removed = log_removed};
	kiln_gc_stats st;

	memset(&st, 0xa5, sizeof st); /* every field must be written */
	removed_log.n = 0;
	assert_kiln(0, kiln_store_gc(s, &o, &st));
	if (removed_log.n != st.removed_blobs)
		fail_msg("gc called removed() %zu times but counts %" PRIu64
		         " removed blobs", removed_log.n, st.removed_blobs);
	return st;
}

#define assert_stat(st, field, want) tu_assert_stat("gc", st, field, want)

/* objects/ holds n sound blobs of bytes bytes in all, and nothing else. */
static void
assert_objects(void **state, uint64_t n, uint64_t bytes, const char *when)
{
	uint64_t gn, gb;

	tu_check_objects_settled(tu_path(state, "store"), when, &gn, &gb);
	if (gn != n || gb != bytes)
		fail_msg("%s: objects/ holds %" PRIu64 " files, %" PRIu64
		         " bytes; expected %" PRIu64 " files, %" PRIu64 " bytes",
		         when, gn, gb, n, bytes);
}

static void
assert_index(kiln_store *s, const char *profile, const char *url,
             const kiln_id *want)
{
	kiln_id got;
	int rv = kiln_store_index_get(s, profile, url, &got);

	if (rv != 0)
		fail_msg("index %s %s lost after gc: %s", profile, url,
		         kiln_strerror(rv));
	if (kiln_id_cmp(&got, want) != 0)
		fail_msg("index %s %s changed after gc: %s, expected %s", profile,
		         url, hex_of(&got), hex_of(want));
}

/* The action must exist and name exactly the given outputs, all present. */
static void
assert_action(kiln_store *s, const kiln_id *key, const kiln_id *outs, size_t n,
              const char *what)
{
	kiln_action *a = NULL;
	int rv = kiln_store_action_get(s, key, &a);

	if (rv != 0)
		fail_msg("action %s should have survived gc: %s", what,
		         kiln_strerror(rv));
	if (a->noutputs != n) {
		size_t got = a->noutputs;
		kiln_action_free(a);
		fail_msg("action %s names %zu outputs after gc, expected %zu",
		         what, got, n);
	}
	for (size_t i = 0; i < n; i++) {
		if (kiln_id_cmp(&a->outputs[i], &outs[i]) != 0) {
			kiln_action_free(a);
			fail_msg("action %s output %zu changed", what, i);
		}
		if ((rv = kiln_store_has(s, &outs[i], NULL)) != 0) {
			kiln_action_free(a);
			fail_msg("action %s survived but names removed blob %zu: %s",
			         what, i, kiln_strerror(rv));
		}
	}
	kiln_action_free(a);
}

static void
assert_action_gone(kiln_store *s, const kiln_id *key, const char *what)
{
	kiln_action *a = NULL;
	int rv = kiln_store_action_get(s, key, &a);

	if (rv == 0)
		kiln_action_free(a);
	if (rv != KILN_ENOTFOUND)
		fail_msg("old action %s should have been deleted by gc, get says %s",
		         what, kiln_strerror(rv));
}

/* ---- cases ------------------------------------------------------------ */

static void
gc_on_empty_store_removes_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_gc_stats st = run_gc(s, 0, 0, 0, 0);

	assert_stat(st, blobs, 0);
	assert_stat(st, bytes, 0);
	assert_stat(st, rooted_blobs, 0);
	assert_stat(st, rooted_bytes, 0);
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, removed_bytes, 0);
	assert_stat(st, removed_actions, 0);
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_keeps_index_roots_of_every_profile_and_removes_unnamed(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id p1 = tu_put_content(s, 1, 1000);
	kiln_id p2 = tu_put_content(s, 2, 2000);
	kiln_id p3 = tu_put_content(s, 3, 3000);
	kiln_id u1 = tu_put_content(s, 4, 4000);
	kiln_id u2 = tu_put_content(s, 5, 5000);
	kiln_id u3 = tu_put_content(s, 6, 600); /* named, then unnamed */
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/hero", &p1));
	assert_kiln(0, kiln_store_index_set(s, "ps5", "sprites/hero", &p2));
	assert_kiln(0, kiln_store_index_set(s, "switch", "sounds/boom", &p3));
	/* p1 named twice more: still one rooted blob */
	assert_kiln(0, kiln_store_index_set(s, "ps5", "sprites/hero-alt", &p1));
	assert_kiln(0, kiln_store_index_set(s, "switch", "x/y/z", &p1));
	assert_kiln(0, kiln_store_index_set(s, "pc", "gone/soon", &u3));
	assert_kiln(0, kiln_store_index_delete(s, "pc", "gone/soon"));

	st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);

	assert_kept(state, s, &p1, "blob named by pc, ps5 and switch entries");
	assert_kept(state, s, &p2, "blob named by a ps5 entry");
	assert_kept(state, s, &p3, "blob named by a switch entry");
	assert_removed(state, s, &u1, "unnamed blob u1");
	assert_removed(state, s, &u2, "unnamed blob u2");
	assert_removed(state, s, &u3, "blob whose index entry was deleted");
	assert_index(s, "pc", "sprites/hero", &p1);
	assert_index(s, "ps5", "sprites/hero", &p2);
	assert_index(s, "switch", "sounds/boom", &p3);
	assert_index(s, "ps5", "sprites/hero-alt", &p1);
	assert_index(s, "switch", "x/y/z", &p1);

	assert_stat(st, blobs, 6);
	assert_stat(st, bytes, 1000 + 2000 + 3000 + 4000 + 5000 + 600);
	assert_stat(st, rooted_blobs, 3);
	assert_stat(st, rooted_bytes, 6000);
	assert_stat(st, removed_blobs, 3);
	assert_stat(st, removed_bytes, 4000 + 5000 + 600);
	assert_stat(st, removed_actions, 0);
	assert_objects(state, 3, 6000, "after gc");
	tu_assert_store_sound(s, "after gc", NULL, NULL);

	/* a second gc finds only roots */
	st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);
	assert_stat(st, blobs, 3);
	assert_stat(st, bytes, 6000);
	assert_stat(st, rooted_blobs, 3);
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, removed_bytes, 0);
	kiln_store_close(s);
}

static void
gc_keeps_blobs_of_recently_used_actions(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id x = tu_put_content(s, 10, 1000);
	kiln_id y = tu_put_content(s, 11, 1500);
	kiln_id z = tu_put_content(s, 12, 700);
	kiln_id key = tu_key_of("action: pack sprites/hero");
	kiln_id outs[2] = {x, y};
	kiln_action *a = NULL;
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_action_put(s, &key, outs, 2, "result", 6));
	/* x is also named by an index entry: still counted once */
	assert_kiln(0, kiln_store_index_set(s, "pc", "sprites/hero", &x));

	st = run_gc(s, 0, 3600, 0, 0);

	assert_kept(state, s, &x, "blob named by a recent action and an index entry");
	assert_kept(state, s, &y, "blob named by a recent action");
	assert_removed(state, s, &z, "unnamed blob");
	assert_action(s, &key, outs, 2, "used just now");
	assert_kiln(0, kiln_store_action_get(s, &key, &a));
	if (a->len != 6 || memcmp(a->data, "result", 6) != 0) {
		kiln_action_free(a);
		fail_msg("gc changed the payload of a kept action");
	}
	kiln_action_free(a);
	assert_stat(st, blobs, 3);
	assert_stat(st, bytes, 3200);
	assert_stat(st, rooted_blobs, 2);
	assert_stat(st, rooted_bytes, 2500);
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, removed_bytes, 700);
	assert_stat(st, removed_actions, 0);
	assert_objects(state, 2, 2500, "after gc");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_deletes_old_actions_and_blobs_only_they_named(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_id o1 = tu_put_content(s, 20, 1100);  /* only the old action */
	kiln_id o2 = tu_put_content(s, 21, 1200);  /* old action + index */
	kiln_id sh = tu_put_content(s, 22, 1300);  /* old and new action */
	kiln_id t1 = tu_put_content(s, 23, 1400);  /* old but touched action */
	kiln_id n1, old_outs[3] = {o1, o2, sh}, touched_outs[1] = {t1}, new_outs[2];
	kiln_id k_old = tu_key_of("old"), k_touched = tu_key_of("touched"),
	        k_new = tu_key_of("new");
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_action_put(s, &k_old, old_outs, 3, "o", 1));
	assert_kiln(0, kiln_store_action_put(s, &k_touched, touched_outs, 1, "t", 1));
	assert_kiln(0, kiln_store_index_set(s, "pc", "keep/o2", &o2));
	tu_clock_advance(&clock, OLD_MS);
	assert_kiln(0, kiln_store_action_touch(s, &k_touched));
	n1 = tu_put_content(s, 24, 1500);
	new_outs[0] = n1;
	new_outs[1] = sh;
	assert_kiln(0, kiln_store_action_put(s, &k_new, new_outs, 2, "n", 1));

	st = run_gc(s, 0, AGE_S, 0, 0);

	assert_action_gone(s, &k_old, "put 10 s ago with max age 5 s");
	assert_removed(state, s, &o1, "blob named only by the old action");
	assert_kept(state, s, &o2, "blob of the old action also named by the index");
	assert_kept(state, s, &sh, "blob shared by the old and a new action");
	assert_action(s, &k_touched, touched_outs, 1, "put long ago but touched just now");
	assert_kept(state, s, &t1, "blob of the touched action");
	assert_action(s, &k_new, new_outs, 2, "put just now");
	assert_kept(state, s, &n1, "blob of the new action");
	assert_index(s, "pc", "keep/o2", &o2);
	assert_stat(st, removed_actions, 1);
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, removed_bytes, 1100);
	assert_stat(st, blobs, 5);
	assert_stat(st, bytes, 1100 + 1200 + 1300 + 1400 + 1500);
	assert_stat(st, rooted_blobs, 4);
	assert_stat(st, rooted_bytes, 1200 + 1300 + 1400 + 1500);
	tu_assert_store_sound(s, "after gc", NULL, NULL);

	/* every action gets old: all go, and so do blobs only they named */
	tu_clock_advance(&clock, OLD_MS);
	st = run_gc(s, 0, AGE_S, 0, 0);
	assert_stat(st, removed_actions, 2);
	assert_action_gone(s, &k_touched, "touched 10 s before the second gc");
	assert_action_gone(s, &k_new, "put 10 s before the second gc");
	assert_removed(state, s, &t1, "blob of the now old touched action");
	assert_removed(state, s, &n1, "blob of the now old new action");
	assert_removed(state, s, &sh, "blob shared by two old actions");
	assert_kept(state, s, &o2, "blob named by the index");
	assert_objects(state, 1, 1200, "after the second gc");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_size_budget_removes_least_recently_used_first(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id r = tu_put_content(s, 30, 1500), b[5];
	static const int order[5] = {3, 1, 4, 0, 2}; /* least recent first */
	kiln_gc_stats st;
	char what[64];

	assert_kiln(0, kiln_store_index_set(s, "pc", "root", &r));
	for (int i = 0; i < 5; i++)
		b[i] = tu_put_content(s, 31 + (uint64_t)i, 1000);
	/* one touch per call: each gets its own (nanosecond) last-use time */
	for (int i = 0; i < 5; i++)
		assert_kiln(0, kiln_store_touch(s, &b[order[i]], 1));

	/* 6500 bytes, budget 4000: the three least recently used go, in
	 * that order */
	st = run_gc(s, 4000, TU_AGE_FOREVER, 0, 0);
	for (int i = 0; i < 3 && i < (int)removed_log.n; i++)
		if (kiln_id_cmp(&removed_log.id[i], &b[order[i]]) != 0 ||
		    removed_log.size[i] != 1000)
			fail_msg("removed() call %d is not b%d (the %d. least "
			         "recently used, 1000 bytes)", i + 1, order[i], i + 1);
	for (int i = 0; i < 3; i++) {
		snprintf(what, sizeof what, "b%d (touched %d. of 5)", order[i], i + 1);
		assert_removed(state, s, &b[order[i]], what);
	}
	for (int i = 3; i < 5; i++) {
		snprintf(what, sizeof what, "b%d (touched %d. of 5)", order[i], i + 1);
		assert_kept(state, s, &b[order[i]], what);
	}
	assert_kept(state, s, &r, "rooted blob");
	assert_stat(st, blobs, 6);
	assert_stat(st, bytes, 6500);
	assert_stat(st, rooted_blobs, 1);
	assert_stat(st, rooted_bytes, 1500);
	assert_stat(st, removed_blobs, 3);
	assert_stat(st, removed_bytes, 3000);
	assert_objects(state, 3, 3500, "after gc to 4000 bytes");

	/* reorder: b2 is now older than b0; budget 2600 takes exactly b2 */
	assert_kiln(0, kiln_store_touch(s, &b[2], 1));
	assert_kiln(0, kiln_store_touch(s, &b[0], 1));
	st = run_gc(s, 2600, TU_AGE_FOREVER, 0, 0);
	assert_removed(state, s, &b[2], "b2 after being touched before b0");
	assert_kept(state, s, &b[0], "b0, touched last");
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, removed_bytes, 1000);

	/* a budget below the roots' size: every unrooted blob goes, roots stay */
	st = run_gc(s, 1000, TU_AGE_FOREVER, 0, 0);
	assert_removed(state, s, &b[0], "b0 under a budget below the roots");
	assert_kept(state, s, &r, "rooted blob under a budget below its size");
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, rooted_blobs, 1);
	assert_objects(state, 1, 1500, "after gc to 1000 bytes");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_budget_already_met_removes_nothing(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id u1 = tu_put_content(s, 40, 1000), u2 = tu_put_content(s, 41, 1000);
	kiln_gc_stats st = run_gc(s, 2000, TU_AGE_FOREVER, 0, 0);

	assert_kept(state, s, &u1, "unnamed blob within the budget");
	assert_kept(state, s, &u2, "unnamed blob within the budget");
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, blobs, 2);
	assert_stat(st, bytes, 2000);
	kiln_store_close(s);
}

static void
gc_dry_run_counts_but_removes_nothing(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_id r = tu_put_content(s, 50, 1000), u1 = tu_put_content(s, 51, 2000),
	        u2 = tu_put_content(s, 52, 3000), a1 = tu_put_content(s, 53, 4000);
	kiln_id ka = tu_key_of("old action"), outs[1] = {a1};
	kiln_gc_stats dry, real;
	uint64_t n, bytes;

	assert_kiln(0, kiln_store_index_set(s, "pc", "r", &r));
	assert_kiln(0, kiln_store_action_put(s, &ka, outs, 1, "a", 1));
	tu_clock_advance(&clock, OLD_MS);

	dry = run_gc(s, 0, AGE_S, 0, 1);
	{
		int seen = 0;
		for (size_t i = 0; i < removed_log.n && i < 64; i++)
			seen |= !kiln_id_cmp(&removed_log.id[i], &u1) ? 1
			      : !kiln_id_cmp(&removed_log.id[i], &u2) ? 2
			      : !kiln_id_cmp(&removed_log.id[i], &a1) ? 4 : 8;
		if (seen != 7)
			fail_msg("a dry run should report u1, u2 and the old action's "
			         "blob through removed() and nothing else (mask %d)",
			         seen);
	}
	assert_stat(dry, blobs, 4);
	assert_stat(dry, bytes, 10000);
	assert_stat(dry, rooted_blobs, 1);
	assert_stat(dry, rooted_bytes, 1000);
	assert_stat(dry, removed_blobs, 3);
	assert_stat(dry, removed_bytes, 9000);
	assert_stat(dry, removed_actions, 1);
	assert_kept(state, s, &u1, "unnamed blob after a dry run");
	assert_kept(state, s, &u2, "unnamed blob after a dry run");
	assert_kept(state, s, &a1, "old action's blob after a dry run");
	assert_action(s, &ka, outs, 1, "old action after a dry run");
	tu_check_objects_settled(tu_path(state, "store"), "after a dry run", &n,
	                         &bytes);
	if (n != 4 || bytes != 10000)
		fail_msg("dry run changed objects/: %" PRIu64 " files, %" PRIu64
		         " bytes (was 4, 10000)", n, bytes);

	real = run_gc(s, 0, AGE_S, 0, 0);
	if (memcmp(&dry, &real, sizeof dry) != 0)
		fail_msg("real gc stats differ from the dry run: removed %" PRIu64
		         "/%" PRIu64 " bytes/%" PRIu64 " actions vs dry %" PRIu64
		         "/%" PRIu64 "/%" PRIu64,
		         real.removed_blobs, real.removed_bytes,
		         real.removed_actions, dry.removed_blobs,
		         dry.removed_bytes, dry.removed_actions);
	assert_removed(state, s, &u1, "unnamed blob u1");
	assert_removed(state, s, &u2, "unnamed blob u2");
	assert_removed(state, s, &a1, "old action's blob");
	assert_action_gone(s, &ka, "old action");
	assert_kept(state, s, &r, "rooted blob");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_grace_period_protects_fresh_blobs(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_id old = tu_put_content(s, 60, 1000);
	kiln_id touched = tu_put_content(s, 61, 2000);
	kiln_id fresh;
	kiln_gc_stats st;

	tu_clock_advance(&clock, OLD_MS);
	fresh = tu_put_content(s, 62, 3000);
	assert_kiln(0, kiln_store_touch(s, &touched, 1));

	/* only look at files here: reading might count as a use */
	st = run_gc(s, 0, TU_AGE_FOREVER, 3600, 0);
	assert_file_there(state, &old, "unnamed blob 10 s old, grace 3600 s");
	assert_file_there(state, &touched, "unnamed blob touched now, grace 3600 s");
	assert_file_there(state, &fresh, "unnamed blob put now, grace 3600 s");
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, removed_bytes, 0);
	assert_stat(st, blobs, 3);

	st = run_gc(s, 0, TU_AGE_FOREVER, AGE_S, 0);
	assert_removed(state, s, &old, "unnamed blob 10 s old, grace 5 s");
	assert_kept(state, s, &touched, "unnamed blob touched within grace 5 s");
	assert_kept(state, s, &fresh, "unnamed blob put within grace 5 s");
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, removed_bytes, 1000);

	/* a size budget does not override the grace period either */
	st = run_gc(s, 1, TU_AGE_FOREVER, 3600, 0);
	assert_stat(st, removed_blobs, 0);

	st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);
	assert_removed(state, s, &touched, "touched blob, grace 0");
	assert_removed(state, s, &fresh, "fresh blob, grace 0");
	assert_stat(st, removed_blobs, 2);
	assert_stat(st, removed_bytes, 5000);
	assert_objects(state, 0, 0, "after gc with grace 0");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

static void
gc_removed_blob_can_be_put_again(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id u = tu_put_content(s, 70, 4321), again;
	kiln_gc_stats st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);

	assert_stat(st, removed_blobs, 1);
	assert_removed(state, s, &u, "unnamed blob");
	again = tu_put_content(s, 70, 4321);
	assert_true(kiln_id_cmp(&u, &again) == 0);
	assert_kept(state, s, &u, "blob put again after gc removed it");
	assert_kiln(0, kiln_store_index_set(s, "pc", "back", &u));
	st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);
	assert_stat(st, removed_blobs, 0);
	assert_kept(state, s, &u, "blob put again and named");
	tu_assert_store_sound(s, "after gc", NULL, NULL);
	kiln_store_close(s);
}

/* A blob whose file vanished outside kiln (deleted by hand) leaves a use
 * record; gc drops it, and keeps the records of blobs that are there. */
static void
gc_drops_use_records_of_blobs_gone_from_objects(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id gone = tu_put_content(s, 71, 11), kept = tu_put_content(s, 72, 12);
	char path[4096];
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_blob_path(s, &gone, path, sizeof path));
	assert_int_equal(unlink(path), 0);
	/* a grace of years: gc removes no blob, only the stale record */
	st = run_gc(s, 0, TU_AGE_FOREVER, TU_AGE_FOREVER, 0);
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, removed_records, 1);
	assert_kept(state, s, &kept, "a blob with its record");
	st = run_gc(s, 0, TU_AGE_FOREVER, TU_AGE_FOREVER, 0);
	assert_stat(st, removed_records, 0);
	/* the kept blob's record still orders it: with no grace it goes */
	st = run_gc(s, 0, TU_AGE_FOREVER, 0, 0);
	assert_stat(st, removed_blobs, 1);
	assert_stat(st, removed_records, 0);
	kiln_store_close(s);
}

static void
gc_accepts_the_largest_ages(void **state)
{
	kiln_store *s = tu_open_store(state, KILN_DURABLE_NONE);
	kiln_id u = tu_put_content(s, 80, 100), x = tu_put_content(s, 81, 200);
	kiln_id key = tu_key_of("k");
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_action_put(s, &key, &x, 1, "", 0));
	/* seconds near INT64_MAX must not overflow into "everything is old" */
	st = run_gc(s, 0, INT64_MAX, INT64_MAX, 0);
	assert_stat(st, removed_blobs, 0);
	assert_stat(st, removed_actions, 0);
	assert_kept(state, s, &u, "unnamed blob with grace INT64_MAX");
	assert_action(s, &key, &x, 1, "with max age INT64_MAX");
	kiln_store_close(s);
}

/* A result gc listed as too old to be a root may be touched before gc's
 * pass ends; gc then keeps the result, so the touch must keep its blobs
 * too: it stamps them used, as the grace period here shows. And a result
 * whose blob is already gone is not touched: a batch counts it skipped,
 * so the caller knows it is not cached. */
static void
gc_an_action_touch_keeps_its_blobs_and_refuses_a_gone_one(void **state)
{
	struct tu_clock clock = {0};
	kiln_store *s = tu_open_store_clocked(state, KILN_DURABLE_NONE, &clock);
	kiln_id x = tu_put_content(s, 30, 900), y = tu_put_content(s, 31, 901);
	kiln_id kx = tu_key_of("touched"), ky = tu_key_of("untouched");
	kiln_id z, kz = tu_key_of("blob gone");
	kiln_batch *b;
	size_t skipped = 0;
	kiln_gc_stats st;

	assert_kiln(0, kiln_store_action_put(s, &kx, &x, 1, "x", 1));
	assert_kiln(0, kiln_store_action_put(s, &ky, &y, 1, "y", 1));
	tu_clock_advance(&clock, OLD_MS);
	assert_kiln(0, kiln_store_action_touch(s, &kx));

	/* max age 0: both results go; the grace period spares what was
	 * used since */
	st = run_gc(s, 0, 0, AGE_S, 0);
	assert_stat(st, removed_actions, 2);
	assert_kept(state, s, &x, "blob of a result touched 10 s after its put");
	assert_removed(state, s, &y, "blob of a result not touched");

	z = tu_put_content(s, 32, 902);
	assert_kiln(0, kiln_store_action_put(s, &kz, &z, 1, "z", 1));
	if (unlink(tu_blob_path(state, &z)) != 0)
		fail_msg("unlink %s: %s", tu_blob_path(state, &z), strerror(errno));
	assert_kiln(KILN_ENOTFOUND, kiln_store_action_touch(s, &kz));
	assert_kiln(0, kiln_batch_new(&b));
	assert_kiln(0, kiln_batch_action_touch(b, &kz));
	assert_kiln(0, kiln_batch_action_touch(b, &kx));
	assert_kiln(0, kiln_store_commit(s, b, &skipped));
	if (skipped != 1)
		fail_msg("a touch of a result whose blob is gone: %zu records "
		         "skipped, expected 1", skipped);
	kiln_batch_free(b);
	kiln_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(gc_on_empty_store_removes_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			gc_keeps_index_roots_of_every_profile_and_removes_unnamed,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_keeps_blobs_of_recently_used_actions,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			gc_deletes_old_actions_and_blobs_only_they_named,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			gc_size_budget_removes_least_recently_used_first,
			tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_budget_already_met_removes_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_dry_run_counts_but_removes_nothing,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_grace_period_protects_fresh_blobs,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_removed_blob_can_be_put_again,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_drops_use_records_of_blobs_gone_from_objects,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(gc_accepts_the_largest_ages,
		                                tu_setup_dir, tu_teardown_dir),
		cmocka_unit_test_setup_teardown(
			gc_an_action_touch_keeps_its_blobs_and_refuses_a_gone_one,
			tu_setup_dir, tu_teardown_dir),
	};

	return tu_skip_leak_report_if_failed(
		cmocka_run_group_tests(tests, NULL, NULL));
}
