/* test_libkiln — kiln.h's calls against a real kilnd ($KILND), each case in
 * a fresh project folder: auto-start, blobs in and out, the callback
 * subscription, and a subscription that outlives its daemon. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "kiln.h"
#include "testutil.h"

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Connect to the case folder's daemon, starting it. */
static kiln_conn *
connect_here(void **state, unsigned flags)
{
	kiln_connect_opts o = {.project = tu_dir(state), .flags = flags,
	                       .max_message = 256 << 10};
	kiln_conn *c = NULL;

	assert_kiln(0, kiln_connect(&o, &c));
	return c;
}

/* Wait until the case folder's daemon has released its lock (stopped). */
static void
wait_stopped(void **state)
{
	int fd = open(tu_path(state, ".kiln/kilnd.lock"), O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	for (int i = 0; flock(fd, LOCK_SH | LOCK_NB) != 0; i++) {
		if (i > 1000)
			fail_msg("the daemon did not stop within 10 s");
		sleep_ms(10);
	}
	close(fd);
}

static int
setup(void **state)
{
	if (getenv("KILND") == NULL) {
		print_message("KILND is not set (tests/run.sh sets it)\n");
		return -1;
	}
	return tu_setup_dir(state);
}

/* Stop the case's daemon, if one runs, before removing its folder. */
static int
teardown(void **state)
{
	FILE *f = fopen(tu_path(state, ".kiln/kilnd.pid"), "r");
	long pid = 0;

	if (f != NULL) {
		if (fscanf(f, "%ld", &pid) == 1 && pid > 0 &&
		    kill((pid_t)pid, SIGTERM) == 0)
			wait_stopped(state);
		fclose(f);
	}
	return tu_teardown_dir(state);
}

static void
connect_starts_the_daemon(void **state)
{
	kiln_conn *a, *b;
	kiln_status sa, sb;
	char real[PATH_MAX];

	a = connect_here(state, 0);
	assert_kiln(0, kiln_status_get(a, &sa));
	assert_non_null(realpath(tu_dir(state), real));
	assert_string_equal(sa.project, real);
	assert_true(sa.pid > 0);
	assert_int_equal(sa.build_queue, 0);
	b = connect_here(state, KILN_CONNECT_NO_START);
	assert_kiln(0, kiln_status_get(b, &sb));
	assert_int_equal(sb.pid, sa.pid);
	assert_int_equal(sb.clients, 2);
	kiln_close(b);
	kiln_close(a);
}

static void
no_start_without_a_daemon_is_enodaemon(void **state)
{
	kiln_connect_opts o = {.project = tu_dir(state),
	                       .flags = KILN_CONNECT_NO_START};
	kiln_conn *c = NULL;

	assert_kiln(KILN_ENODAEMON, kiln_connect(&o, &c));
	assert_null(c);
	assert_int_equal(access(tu_path(state, ".kiln/kilnd.pid"), F_OK), -1);
}

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int
buf_sink(const void *data, size_t len, void *arg)
{
	struct buf *b = arg;

	if (b->len + len > b->cap)
		return KILN_ERANGE;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

static void
blobs_go_in_and_out_in_chunks(void **state)
{
	size_t len = (3u << 20) + 4321; /* 14 chunks of 240 KiB */
	uint8_t *data = malloc(len);
	struct buf back = {malloc(len), 0, len};
	kiln_name name = {"pc", "levels/one"};
	kiln_id id, want, byname, ids[2] = {{{0}}};
	uint64_t sizes[2];
	int present[2];
	kiln_conn *c = connect_here(state, 0);

	assert_non_null(data);
	assert_non_null(back.p);
	tu_fill(data, len, 7);
	kiln_id_of_buf(data, len, &want);
	assert_kiln(0, kiln_blob_put(c, data, len, &name, &id));
	assert_int_equal(kiln_id_cmp(&id, &want), 0);
	ids[0] = id;
	assert_kiln(0, kiln_blob_has(c, ids, 2, present, sizes));
	assert_int_equal(present[0], 1);
	assert_int_equal(sizes[0], len);
	assert_int_equal(present[1], 0);
	assert_kiln(0, kiln_blob_get(c, &id, buf_sink, &back));
	assert_int_equal(back.len, len);
	assert_memory_equal(back.p, data, len);
	back.len = 0;
	assert_kiln(0, kiln_blob_get_name(c, &name, buf_sink, &back, &byname));
	assert_int_equal(kiln_id_cmp(&byname, &want), 0);
	assert_kiln(KILN_ENOTFOUND, kiln_blob_get(c, &ids[1], buf_sink, &back));
	name.url = "levels/none";
	assert_kiln(KILN_ENOTFOUND, kiln_blob_get_name(c, &name, buf_sink, &back,
	                                               NULL));
	assert_non_null(strstr(kiln_conn_error(c), "levels/none"));
	kiln_close(c);
	free(back.p);
	free(data);
}

/* What the callback saw. */
struct seen {
	pthread_mutex_t mu;
	kiln_event ev[16];
	kiln_id ids[16];
	int n;
};

static int
collect(const kiln_event *ev, void *arg)
{
	struct seen *s = arg;

	pthread_mutex_lock(&s->mu);
	if (ev->type == KILN_EVENT_BLOB_STORED && s->n < 16) {
		s->ev[s->n] = *ev;
		s->ids[s->n++] = ev->id;
	}
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int
seen_count(struct seen *s)
{
	int n;

	pthread_mutex_lock(&s->mu);
	n = s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

static void
callback_subscription_sees_every_put(void **state)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	kiln_conn *sub = connect_here(state, 0), *put = connect_here(state, 0);
	kiln_id ids[5];
	kiln_status st;
	char text[16];

	assert_kiln(0, kiln_subscribe_cb(sub, NULL, collect, &s));
	for (int i = 0; i < 5; i++) {
		int n = snprintf(text, sizeof text, "blob %d", i);
		assert_kiln(0, kiln_blob_put(put, text, (size_t)n, NULL, &ids[i]));
	}
	for (int i = 0; seen_count(&s) < 5; i++) {
		if (i > 500)
			fail_msg("saw %d of 5 events in 5 s", seen_count(&s));
		sleep_ms(10);
	}
	assert_kiln(0, kiln_status_get(put, &st));
	assert_int_equal(st.subscribers, 1);
	assert_kiln(0, kiln_unsubscribe(sub));
	for (int i = 0; i < 5; i++) {
		assert_int_equal(kiln_id_cmp(&s.ids[i], &ids[i]), 0);
		assert_int_equal(s.ev[i].at.seq, s.ev[0].at.seq + (uint64_t)i);
	}
	assert_kiln(0, kiln_status_get(put, &st));
	assert_int_equal(st.subscribers, 0);
	kiln_close(put);
	kiln_close(sub);
}

static void
a_subscription_outlives_its_daemon(void **state)
{
	kiln_conn *sub = connect_here(state, 0), *other = connect_here(state, 0);
	kiln_status before, after;
	kiln_event ev;
	kiln_id id;
	int rv, overflow = 0, stored = 0;

	assert_kiln(0, kiln_status_get(other, &before));
	assert_kiln(0, kiln_subscribe(sub, NULL));
	assert_kiln(0, kiln_stop(other));
	kiln_close(other);
	wait_stopped(state);
	other = connect_here(state, 0); /* a new daemon */
	assert_kiln(0, kiln_status_get(other, &after));
	assert_int_not_equal(after.event_epoch, before.event_epoch);
	assert_kiln(0, kiln_blob_put(other, "x", 1, NULL, &id));
	/* The old daemon's stopping events, then the new one's. */
	while (!stored && (rv = kiln_events_poll(sub, 5000, &ev)) == 0) {
		if (ev.type == KILN_EVENT_OVERFLOW && ev.new_epoch) {
			overflow = 1;
			assert_int_equal(ev.at.epoch, after.event_epoch);
		}
		if (ev.type == KILN_EVENT_BLOB_STORED && overflow)
			stored = kiln_id_cmp(&ev.id, &id) == 0;
	}
	if (!stored)
		fail_msg("no new-epoch overflow then blob-stored (last rv %d: %s)",
		         rv, kiln_strerror(rv));
	kiln_close(other);
	kiln_close(sub);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(connect_starts_the_daemon, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(no_start_without_a_daemon_is_enodaemon,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(blobs_go_in_and_out_in_chunks, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(callback_subscription_sees_every_put,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(a_subscription_outlives_its_daemon,
		                                setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
