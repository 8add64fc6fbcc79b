/* test_http_cache.c — cache/'s HTTP transport against a real Debian nginx
 * (its dav module, as docs/cache-http.md configures it), started by each
 * case on a free loopback port in the case's temp dir. No nginx is a
 * failure naming the package, never a skip: scripts/ensure-deps installs
 * it for `make test`.
 *
 * Timing is never asserted: the breaker cases count connection attempts
 * (kiln_cache_stats.connects) and only sleep past a period to let it end. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "kiln_cache.h"

/* ---- the server -------------------------------------------------------- */

/* The nginx of the running case (one at a time). */
static struct {
	char dir[4096];
	int port;
	pid_t pid;
} srv;

static const char *
nginx_binary(void)
{
	const char *bin = getenv("KILN_NGINX");

	if (bin == NULL)
		bin = "/usr/sbin/nginx";
	if (access(bin, X_OK) != 0)
		fail_msg("no nginx at %s: install Debian's nginx package (scripts/ensure-deps "
		         "test does) or name one in KILN_NGINX", bin);
	return bin;
}

static int
free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t n = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &n), 0);
	close(s);
	return ntohs(a.sin_port);
}

static void
nginx_write_conf(void)
{
	const char *d = srv.dir;
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/nginx.conf", d);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "daemon off;\nmaster_process on;\nworker_processes 1;\n%s"
	        "pid %s/nginx.pid;\nerror_log %s/error.log warn;\n"
	        "events { worker_connections 64; }\nhttp {\n"
	        "  access_log %s/access.log;\n  default_type application/octet-stream;\n",
	        geteuid() == 0 ? "user root;\n" : "", d, d, d);
	fprintf(f, "  client_body_temp_path %s/tmp/body;\n  proxy_temp_path %s/tmp/proxy;\n"
	        "  fastcgi_temp_path %s/tmp/fastcgi;\n  uwsgi_temp_path %s/tmp/uwsgi;\n"
	        "  scgi_temp_path %s/tmp/scgi;\n", d, d, d, d, d);
	fprintf(f, "  server {\n    listen 127.0.0.1:%d;\n    root %s/data;\n"
	        "    client_max_body_size 0;\n"
	        "    location /cache/ {\n      dav_methods PUT DELETE;\n"
	        "      create_full_put_path on;\n      dav_access user:rw group:r all:r;\n"
	        "      limit_except GET HEAD PUT { deny all; }\n    }\n", srv.port, d);
	fprintf(f, "    location /auth/ {\n      auth_basic kiln;\n"
	        "      auth_basic_user_file %s/htpasswd;\n"
	        "      dav_methods PUT;\n      create_full_put_path on;\n    }\n", d);
	fprintf(f, "    location /bearer/ {\n"
	        "      if ($http_authorization != \"Bearer s3cret-token\") { return 401; }\n"
	        "      dav_methods PUT;\n      create_full_put_path on;\n    }\n");
	fprintf(f, "    location /redirect/ {\n      return 302 file:///etc/passwd;\n    }\n"
	        "    location /broken/ {\n      return 503;\n    }\n");
	/* A filter that rewrites bodies drops Content-Length: these answers
	 * come chunked, of a length the client learns only by reading. */
	fprintf(f, "    location /chunked/ {\n      sub_filter_types *;\n"
	        "      sub_filter never-there x;\n    }\n  }\n}\n");
	assert_int_equal(fclose(f), 0);
}

static int
port_answers(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (s >= 0)
		close(s);
	return ok;
}

/* Start nginx on srv.port and wait until it accepts connections. */
static void
nginx_start(void)
{
	const char *bin = nginx_binary();
	char conf[4200], errlog[4200], out[4200];
	int st;

	snprintf(conf, sizeof(conf), "%s/nginx.conf", srv.dir);
	snprintf(errlog, sizeof(errlog), "%s/error.log", srv.dir);
	snprintf(out, sizeof(out), "%s/nginx.out", srv.dir);
	assert_true((srv.pid = fork()) >= 0);
	if (srv.pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* A test that crashes takes its nginx with it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl(bin, "nginx", "-p", srv.dir, "-e", errlog, "-c", conf, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		if (port_answers(srv.port))
			return;
		if (waitpid(srv.pid, &st, WNOHANG) == srv.pid) {
			srv.pid = 0;
			tu_sh("cat '%s' '%s' >&2", out, errlog);
			fail_msg("nginx (%s) exited before listening; its output is above", bin);
		}
		tu_sleep_ms(10);
	}
	fail_msg("nginx did not listen on 127.0.0.1:%d within 5 s", srv.port);
}

/* Stop it (fast shutdown) and reap it: the port refuses from now on. */
static void
nginx_stop(void)
{
	if (srv.pid <= 0)
		return;
	kill(srv.pid, SIGTERM);
	waitpid(srv.pid, NULL, 0);
	srv.pid = 0;
}

static int
setup(void **state)
{
	nginx_binary();
	if (tu_setup_dir(state) != 0)
		return -1;
	snprintf(srv.dir, sizeof(srv.dir), "%s", tu_dir(state));
	srv.port = free_port();
	tu_sh("mkdir -p '%s/data/cache' '%s/data/chunked/cas' '%s/tmp'", srv.dir, srv.dir, srv.dir);
	nginx_write_conf();
	nginx_start();
	return 0;
}

static int
teardown(void **state)
{
	nginx_stop();
	return tu_teardown_dir(state);
}

/* ---- helpers ----------------------------------------------------------- */

static const char *
url_of(const char *location)
{
	static char url[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", srv.port, location);
	return url;
}

/* A key: 64 lowercase hex made from n (the tests need names, not
 * SHA-256s; nginx checks nothing). */
static const char *
key(unsigned n)
{
	/* per thread: four threads at once take keys */
	static _Thread_local char bufs[4][65];
	static _Thread_local int next;
	char *k = bufs[next++ % 4];

	for (int i = 0; i < 64; i++)
		k[i] = "0123456789abcdef"[(n >> ((i % 8) * 4)) & 0xf];
	k[64] = '\0';
	return k;
}

static kiln_cache *
open_cache(const char *location, kiln_cache_config *cfg)
{
	kiln_cache_config def = {0};
	kiln_cache *c = NULL;

	if (cfg == NULL)
		cfg = &def;
	cfg->url = url_of(location);
	assert_kiln(0, kiln_cache_open(cfg, &c));
	return c;
}

struct membuf {
	unsigned char *p;
	size_t len, cap;
};

static int
sink_mem(void *arg, const void *data, size_t len)
{
	struct membuf *b = arg;

	if (b->len + len > b->cap) {
		size_t cap = (b->len + len) * 2;
		unsigned char *p = realloc(b->p, cap);

		if (p == NULL)
			return KILN_ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

/* GET into memory, expecting the want bytes. */
static void
get_expect(kiln_cache *c, enum kiln_cache_kind kind, const char *k, const void *want,
           size_t len)
{
	struct membuf b = {0};
	uint64_t size = 0;

	assert_kiln(0, kiln_cache_get(c, kind, k, len, sink_mem, &b, &size));
	if (size != len || b.len != len || (len > 0 && memcmp(b.p, want, len) != 0))
		fail_msg("GET %s: %zu bytes (size %llu), expected %zu equal bytes", k, b.len,
		         (unsigned long long)size, len);
	free(b.p);
}

static kiln_cache_stats
stats(kiln_cache *c)
{
	kiln_cache_stats st;

	kiln_cache_stats_get(c, &st);
	return st;
}

/* Lines of nginx's access log holding needle. */
static int
log_count(const char *needle)
{
	return tu_sh("exit $(grep -c -- '%s' '%s/access.log')", needle, srv.dir);
}

/* log_count once at least n lines hold needle, or after 5 s: nginx
 * writes a request's line just after its answer, so a client done with a
 * request can be ahead of the log on a loaded machine. */
static int
log_wait(const char *needle, int n)
{
	int got = 0;

	for (int i = 0; i < 500 && (got = log_count(needle)) < n; i++)
		tu_sleep_ms(10);
	return got;
}

static void
write_secret(const char *path, const char *text, mode_t mode)
{
	tu_write_file(path, text, strlen(text));
	assert_int_equal(chmod(path, mode), 0);
}

/* ---- cases ------------------------------------------------------------- */

static void
put_then_get_round_trips_cas_and_ac_over_one_connection(void **state)
{
	const char *blob = "the bytes of a texture", *result = "an action result";
	kiln_cache *c = open_cache("cache", NULL);
	kiln_cache_stats st;
	uint64_t size = 0;

	(void)state;
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(1), blob, strlen(blob)));
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_AC, key(1), result, strlen(result)));
	/* Same key, other kind: two separate entries. */
	get_expect(c, KILN_CACHE_CAS, key(1), blob, strlen(blob));
	get_expect(c, KILN_CACHE_AC, key(1), result, strlen(result));
	assert_kiln(0, kiln_cache_head(c, KILN_CACHE_CAS, key(1), &size));
	assert_int_equal(size, strlen(blob));
	/* An overwrite is a 204, also success; an empty body round trips. */
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(1), blob, strlen(blob)));
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(2), "", 0));
	get_expect(c, KILN_CACHE_CAS, key(2), "", 0);
	for (int i = 0; i < 20; i++)
		get_expect(c, KILN_CACHE_CAS, key(1), blob, strlen(blob));
	st = stats(c);
	if (st.connects != 1)
		fail_msg("%llu connections for 27 sequential requests, expected 1 (keep-alive)",
		         (unsigned long long)st.connects);
	tu_assert_stat("cache", st, uploads, 4);
	tu_assert_stat("cache", st, hits, 24);
	tu_assert_stat("cache", st, errors, 0);
	tu_assert_stat("cache", st, bytes_up, 2 * strlen(blob) + strlen(result));
	tu_assert_stat("cache", st, bytes_down, 21 * strlen(blob) + strlen(result));
	assert_int_equal(tu_sh("test -f '%s/data/cache/cas/%s'", srv.dir, key(1)), 0);
	kiln_cache_close(c);
}

static void
a_404_is_a_miss(void **state)
{
	kiln_cache *c = open_cache("cache", NULL);
	struct membuf b = {0};
	kiln_cache_stats st;

	(void)state;
	assert_kiln(KILN_ENOTFOUND, kiln_cache_get(c, KILN_CACHE_CAS, key(7), 1 << 20, sink_mem, &b, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_cache_head(c, KILN_CACHE_AC, key(7), NULL));
	/* Even with a bound smaller than nginx's 404 page. */
	assert_kiln(KILN_ENOTFOUND, kiln_cache_get(c, KILN_CACHE_AC, key(7), 1, sink_mem, &b, NULL));
	assert_int_equal(b.len, 0);
	st = stats(c);
	tu_assert_stat("cache", st, misses, 3);
	tu_assert_stat("cache", st, errors, 0);
	tu_assert_stat("cache", st, connects, 1);
	free(b.p);
	kiln_cache_close(c);
}

static void
bad_keys_and_urls_are_refused_before_anything_is_sent(void **state)
{
	const char *bad_keys[] = {"", "abc", "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
	                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
	                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0",
	                          "../../../../etc/passwd0123456789abcdef0123456789abcdef0123456789"};
	const char *bad_urls[] = {"ftp://127.0.0.1/", "file:///etc", "127.0.0.1:80", "http://",
	                          "http://user:pw@127.0.0.1/c", "http://127.0.0.1/c?x=1",
	                          "http://127.0.0.1/c#f", "http://127.0.0.1/a b", "gopher://h/"};
	kiln_cache_config cfg = {0};
	kiln_cache *c = open_cache("cache", NULL), *c2 = NULL;
	struct membuf b = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
		assert_kiln(KILN_EINVAL, kiln_cache_check_key(bad_keys[i]));
		assert_kiln(KILN_EINVAL, kiln_cache_get(c, KILN_CACHE_CAS, bad_keys[i], 10, sink_mem, &b, NULL));
		assert_kiln(KILN_EINVAL, kiln_cache_head(c, KILN_CACHE_AC, bad_keys[i], NULL));
		assert_kiln(KILN_EINVAL, kiln_cache_put(c, KILN_CACHE_CAS, bad_keys[i], "x", 1));
		assert_kiln(KILN_EINVAL, kiln_cache_put_async(c, KILN_CACHE_AC, bad_keys[i], "x", 1));
	}
	assert_kiln(KILN_EINVAL, kiln_cache_head(c, (enum kiln_cache_kind)2, key(1), NULL));
	assert_kiln(0, kiln_cache_flush(c, 5000));
	tu_assert_stat("cache", stats(c), connects, 0);
	kiln_cache_close(c);
	for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
		cfg.url = bad_urls[i];
		if (kiln_cache_open(&cfg, &c2) != KILN_EINVAL)
			fail_msg("the URL '%s' was accepted", bad_urls[i]);
		assert_null(c2);
	}
	cfg.url = "HTTPS://cache.example:9090/base/";
	assert_kiln(0, kiln_cache_open(&cfg, &c2));
	kiln_cache_close(c2);
	assert_int_equal(log_count("HTTP/1"), 0);
}

struct getter {
	kiln_cache *c;
	const unsigned char *want;
	size_t len;
	int rc, same;
};

static void *
get_in_thread(void *arg)
{
	struct getter *g = arg;
	struct membuf b = {0};

	g->rc = kiln_cache_get(g->c, KILN_CACHE_CAS, key(10), g->len, sink_mem, &b, NULL);
	g->same = b.len == g->len && memcmp(b.p, g->want, g->len) == 0;
	free(b.p);
	return NULL;
}

static void
a_10_mb_blob_goes_up_from_an_fd_and_down_to_one_four_at_once(void **state)
{
	size_t len = 10 << 20;
	unsigned char *blob = malloc(len), *back = malloc(len);
	kiln_cache *c = open_cache("cache", NULL);
	struct getter g[4];
	pthread_t t[4];
	uint64_t size = 0, before;
	int in, out;

	(void)state;
	assert_non_null(blob);
	assert_non_null(back);
	tu_fill64(blob, len, 42);
	assert_true((in = tu_memfd_of(blob, len)) >= 0);
	assert_kiln(0, kiln_cache_put_fd(c, KILN_CACHE_CAS, key(10), in));
	assert_kiln(0, kiln_cache_head(c, KILN_CACHE_CAS, key(10), &size));
	assert_int_equal(size, len);
	assert_true((out = tu_memfd_of("", 0)) >= 0);
	assert_kiln(0, kiln_cache_get_fd(c, KILN_CACHE_CAS, key(10), len, out, &size));
	assert_int_equal(size, len);
	assert_int_equal(pread(out, back, len, 0), (ssize_t)len);
	assert_memory_equal(back, blob, len);
	/* One byte short of the bound it needs: refused. */
	assert_kiln(KILN_ERANGE, kiln_cache_get_fd(c, KILN_CACHE_CAS, key(10), len - 1, out, NULL));
	/* That refusal cut its connection; the four at once need at most
	 * max_parallel (4) new ones. */
	before = stats(c).connects;
	for (int i = 0; i < 4; i++) {
		g[i] = (struct getter){c, blob, len, -1, 0};
		assert_int_equal(pthread_create(&t[i], NULL, get_in_thread, &g[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_kiln(0, g[i].rc);
		assert_true(g[i].same);
	}
	if (stats(c).connects - before > 4)
		fail_msg("%llu connections for 4 lookups at once, expected at most max_parallel (4)",
		         (unsigned long long)(stats(c).connects - before));
	close(in);
	close(out);
	free(blob);
	free(back);
	kiln_cache_close(c);
}

static void
read_only_refuses_every_upload_and_sends_none(void **state)
{
	kiln_cache_config cfg = {.read_only = 1};
	kiln_cache *c = open_cache("cache", &cfg);
	int fd = tu_memfd_of("abc", 3);

	(void)state;
	assert_kiln(KILN_EREADONLY, kiln_cache_put(c, KILN_CACHE_CAS, key(3), "abc", 3));
	assert_kiln(KILN_EREADONLY, kiln_cache_put_fd(c, KILN_CACHE_AC, key(3), fd));
	assert_kiln(KILN_EREADONLY, kiln_cache_put_async(c, KILN_CACHE_CAS, key(3), "abc", 3));
	assert_kiln(KILN_EREADONLY, kiln_cache_put_async_fd(c, KILN_CACHE_AC, key(3), fd));
	assert_kiln(0, kiln_cache_flush(c, 5000));
	/* Reading still works. */
	tu_sh("mkdir -p '%s/data/cache/cas' && printf abc >'%s/data/cache/cas/%s'", srv.dir,
	      srv.dir, key(4));
	get_expect(c, KILN_CACHE_CAS, key(4), "abc", 3);
	tu_assert_stat("cache", stats(c), uploads, 0);
	tu_assert_stat("cache", stats(c), connects, 1);
	kiln_cache_close(c);
	assert_int_equal(log_wait("\"GET ", 1), 1);
	assert_int_equal(log_count("\"PUT "), 0);
	assert_int_equal(tu_sh("test -e '%s/data/cache/cas/%s' || test -e '%s/data/cache/ac/%s'",
	                       srv.dir, key(3), srv.dir, key(3)), 1);
	close(fd);
}

static void
the_breaker_opens_when_the_server_stops_and_closes_once_it_is_back(void **state)
{
	kiln_cache_config cfg = {.breaker_failures = 3, .breaker_open_ms = 300,
	                         .breaker_max_ms = 600, .connect_timeout_ms = 1000};
	kiln_cache *c = open_cache("cache", &cfg);
	struct membuf b = {0};
	kiln_cache_stats st;
	uint64_t before;
	int rc;

	(void)state;
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(5), "five", 4));
	nginx_stop();
	for (int i = 0; i < 3; i++) {
		before = stats(c).connects;
		rc = kiln_cache_get(c, KILN_CACHE_CAS, key(5), 100, sink_mem, &b, NULL);
		if (rc != KILN_EIO)
			fail_msg("lookup %d with the server stopped: %s, expected an I/O error", i,
			         kiln_strerror(rc));
		assert_true(stats(c).connects > before);
	}
	st = stats(c);
	assert_int_equal(st.breaker_open, 1);
	tu_assert_stat("cache", st, breaker_opens, 1);
	tu_assert_stat("cache", st, errors, 3);
	/* Open: misses at once, puts refused, uploads dropped; no connection. */
	before = st.connects;
	for (int i = 0; i < 5; i++)
		assert_kiln(KILN_ENOTFOUND, kiln_cache_get(c, KILN_CACHE_CAS, key(5), 100, sink_mem, &b, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_cache_head(c, KILN_CACHE_CAS, key(5), NULL));
	assert_kiln(KILN_EBUSY, kiln_cache_put(c, KILN_CACHE_CAS, key(6), "x", 1));
	assert_kiln(0, kiln_cache_put_async(c, KILN_CACHE_CAS, key(6), "x", 1));
	assert_kiln(0, kiln_cache_flush(c, 5000));
	st = stats(c);
	tu_assert_stat("cache", st, connects, before);
	tu_assert_stat("cache", st, skipped, 7);
	tu_assert_stat("cache", st, dropped, 1);
	/* Its period over with the server still down: one try, and it
	 * opens again at once (for twice as long). */
	tu_sleep_ms(350);
	assert_kiln(KILN_EIO, kiln_cache_head(c, KILN_CACHE_CAS, key(5), NULL));
	st = stats(c);
	assert_true(st.connects > before);
	tu_assert_stat("cache", st, breaker_opens, 2);
	assert_int_equal(st.breaker_open, 1);
	before = st.connects;
	assert_kiln(KILN_ENOTFOUND, kiln_cache_head(c, KILN_CACHE_CAS, key(5), NULL));
	tu_assert_stat("cache", stats(c), connects, before);
	/* The server back and the period (600 ms now) over: an answer
	 * closes the breaker. */
	nginx_start();
	tu_sleep_ms(650);
	get_expect(c, KILN_CACHE_CAS, key(5), "five", 4);
	st = stats(c);
	assert_int_equal(st.breaker_open, 0);
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(6), "six", 3));
	free(b.p);
	kiln_cache_close(c);
}

static void
a_huge_body_is_cut_at_the_bound(void **state)
{
	size_t len = 8 << 20, bound = 1 << 20;
	unsigned char *big = malloc(len);
	kiln_cache *c = open_cache("cache", NULL), *cc = open_cache("chunked", NULL);
	struct membuf b = {0};

	(void)state;
	assert_non_null(big);
	tu_fill64(big, len, 8);
	tu_sh("mkdir -p '%s/data/cache/cas'", srv.dir);
	tu_write_file(tu_path(state, "data/cache/cas/%s", key(8)), big, len);
	tu_write_file(tu_path(state, "data/chunked/cas/%s", key(8)), big, len);
	/* A declared length past the bound: refused before any byte. */
	assert_kiln(KILN_ERANGE, kiln_cache_get(c, KILN_CACHE_CAS, key(8), bound, sink_mem, &b, NULL));
	assert_int_equal(b.len, 0);
	/* No declared length (chunked): cut where it passes the bound. */
	assert_kiln(KILN_ERANGE, kiln_cache_get(cc, KILN_CACHE_CAS, key(8), bound, sink_mem, &b, NULL));
	if (b.len == 0 || b.len > bound)
		fail_msg("the sink got %zu bytes of a chunked body, expected 1..%zu", b.len, bound);
	tu_assert_stat("chunked", stats(cc), errors, 1);
	/* Within its bound the same chunked answer is whole. */
	b.len = 0;
	assert_kiln(0, kiln_cache_get(cc, KILN_CACHE_CAS, key(8), len, sink_mem, &b, NULL));
	assert_int_equal(b.len, len);
	assert_memory_equal(b.p, big, len);
	free(b.p);
	free(big);
	kiln_cache_close(c);
	kiln_cache_close(cc);
}

static void
basic_auth_passes_with_the_right_password_only(void **state)
{
	kiln_cache_config cfg = {0};
	kiln_cache *c, *c2 = NULL;
	struct membuf b = {0};

	assert_int_equal(tu_sh("printf 'kiln:%%s\\n' \"$(openssl passwd -apr1 right-pw)\" >'%s'",
	                       tu_path(state, "htpasswd")), 0);
	write_secret(tu_path(state, "right"), "kiln:right-pw\n", 0600);
	write_secret(tu_path(state, "wrong"), "kiln:wrong-pw\n", 0640);
	write_secret(tu_path(state, "open"), "kiln:right-pw\n", 0644);
	cfg.basic_auth_file = tu_path(state, "right");
	c = open_cache("auth", &cfg);
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_AC, key(9), "nine", 4));
	get_expect(c, KILN_CACHE_AC, key(9), "nine", 4);
	kiln_cache_close(c);

	cfg.basic_auth_file = tu_path(state, "wrong");
	c = open_cache("auth", &cfg);
	assert_kiln(KILN_EAUTH, kiln_cache_put(c, KILN_CACHE_AC, key(11), "x", 1));
	assert_kiln(KILN_EAUTH, kiln_cache_get(c, KILN_CACHE_AC, key(9), 100, sink_mem, &b, NULL));
	assert_int_equal(b.len, 0);
	/* A refusal is an answer: it does not open the breaker. */
	assert_int_equal(stats(c).breaker_open, 0);
	kiln_cache_close(c);
	assert_int_equal(tu_sh("test -e '%s/data/auth/ac/%s'", srv.dir, key(11)), 1);

	c = open_cache("auth", NULL);
	assert_kiln(KILN_EAUTH, kiln_cache_head(c, KILN_CACHE_AC, key(9), NULL));
	kiln_cache_close(c);

	/* A secret others can read is refused before anything is sent. */
	cfg.url = url_of("auth");
	cfg.basic_auth_file = tu_path(state, "open");
	assert_kiln(KILN_EACCES, kiln_cache_open(&cfg, &c2));
	cfg.basic_auth_file = tu_path(state, "missing");
	assert_kiln(KILN_ENOTFOUND, kiln_cache_open(&cfg, &c2));
	write_secret(tu_path(state, "nocolon"), "kiln\n", 0600);
	cfg.basic_auth_file = tu_path(state, "nocolon");
	assert_kiln(KILN_EINVAL, kiln_cache_open(&cfg, &c2));
	assert_null(c2);
}

static void
a_bearer_token_file_becomes_the_authorization_header(void **state)
{
	kiln_cache_config cfg = {0};
	kiln_cache *c, *c2 = NULL;

	write_secret(tu_path(state, "token"), "s3cret-token\n", 0600);
	write_secret(tu_path(state, "bad"), "other-token", 0600);
	write_secret(tu_path(state, "twolines"), "s3cret-token\nX-Evil: 1\n", 0600);
	cfg.bearer_token_file = tu_path(state, "token");
	c = open_cache("bearer", &cfg);
	assert_kiln(0, kiln_cache_put(c, KILN_CACHE_CAS, key(12), "twelve", 6));
	get_expect(c, KILN_CACHE_CAS, key(12), "twelve", 6);
	kiln_cache_close(c);
	cfg.bearer_token_file = tu_path(state, "bad");
	c = open_cache("bearer", &cfg);
	assert_kiln(KILN_EAUTH, kiln_cache_head(c, KILN_CACHE_CAS, key(12), NULL));
	kiln_cache_close(c);
	/* A second line would be a header of the file's choosing. */
	cfg.url = url_of("bearer");
	cfg.bearer_token_file = tu_path(state, "twolines");
	assert_kiln(KILN_EINVAL, kiln_cache_open(&cfg, &c2));
	cfg.basic_auth_file = tu_path(state, "token");
	cfg.bearer_token_file = tu_path(state, "token");
	assert_kiln(KILN_EINVAL, kiln_cache_open(&cfg, &c2));
	assert_null(c2);
}

static void
the_upload_queue_drops_past_its_bound_and_counts(void **state)
{
	kiln_cache_config cfg = {.queue_max = 2, .max_parallel = 2};
	size_t len = 256 << 10;
	unsigned char *blob = malloc(len);
	kiln_cache *c = open_cache("cache", &cfg);
	kiln_cache_stats st;
	int n = 40, queued = 0, refused = 0;

	(void)state;
	assert_non_null(blob);
	tu_fill64(blob, len, 1);
	/* Far faster than one upload each: the queue fills, and the rest
	 * are dropped at once instead of waiting. */
	for (int i = 0; i < n; i++) {
		int rc = kiln_cache_put_async(c, KILN_CACHE_CAS, key(100 + (unsigned)i), blob, len);

		if (rc == 0)
			queued++;
		else if (rc == KILN_EBUSY)
			refused++;
		else
			fail_msg("put_async %d: %s", i, kiln_strerror(rc));
	}
	assert_kiln(0, kiln_cache_flush(c, 20000));
	st = stats(c);
	if (refused == 0)
		fail_msg("all %d uploads were queued; expected the queue of 2 to fill", n);
	tu_assert_stat("cache", st, dropped, (uint64_t)refused);
	tu_assert_stat("cache", st, uploads, (uint64_t)queued);
	tu_assert_stat("cache", st, queued, 0);
	assert_int_equal(tu_sh("test $(ls '%s/data/cache/cas' | wc -l) -eq %d", srv.dir, queued), 0);
	free(blob);
	kiln_cache_close(c);
}

static void
an_ac_upload_starts_after_the_cas_uploads_queued_before_it(void **state)
{
	size_t len = 2 << 20;
	unsigned char *blob = malloc(len);
	kiln_cache *c = open_cache("cache", NULL);
	int fd;

	assert_non_null(blob);
	tu_fill64(blob, len, 3);
	for (unsigned i = 0; i < 6; i++)
		assert_kiln(0, kiln_cache_put_async(c, KILN_CACHE_CAS, key(200 + i), blob, len));
	tu_write_file(tu_path(state, "result"), "result", 6);
	assert_true((fd = open(tu_path(state, "result"), O_RDONLY)) >= 0);
	assert_kiln(0, kiln_cache_put_async_fd(c, KILN_CACHE_AC, key(200), fd));
	close(fd);
	assert_kiln(0, kiln_cache_flush(c, 20000));
	tu_assert_stat("cache", stats(c), uploads, 7);
	/* nginx logs a request when it ends: the AC line is the last PUT. */
	assert_int_equal(log_wait("\"PUT ", 7), 7);
	assert_int_equal(tu_sh("grep '\"PUT ' '%s/access.log' | tail -n 1 | grep -q /ac/", srv.dir), 0);
	get_expect(c, KILN_CACHE_AC, key(200), "result", 6);
	free(blob);
	kiln_cache_close(c);
}

/* Results queued each after its blob, as the uploader queues them, one
 * transfer at a time: every AC upload waits for the CAS upload before it,
 * and each end must start the next at once. The loop used to start it
 * only when curl_multi_poll woke, 1 s later with nothing else in flight:
 * these 60 pairs took a minute (90 of the 120 transfers were still
 * pending after 30 s). The bound (45 s for 120 small transfers on
 * loopback, about 1 s each through the old loop, milliseconds now) is no
 * speed check: it only tells "started by the end of the last" from
 * "started by a timeout", with room for a busy machine. */
static void
uploads_a_result_unblocks_start_without_waiting_for_the_poll(void **state)
{
	kiln_cache_config cfg = {.max_parallel = 1};
	kiln_cache *c = open_cache("cache", &cfg);
	unsigned n = 60;

	(void)state;
	for (unsigned i = 0; i < n; i++) {
		assert_kiln(0, kiln_cache_put_async(c, KILN_CACHE_CAS, key(400 + i), "blob", 4));
		assert_kiln(0, kiln_cache_put_async(c, KILN_CACHE_AC, key(400 + i), "result", 6));
	}
	if (kiln_cache_flush(c, 45000) != 0)
		fail_msg("%u of %u uploads still pending after 45 s: the ones blocked behind a "
		         "blob waited for the poll's timeout", stats(c).queued, 2 * n);
	tu_assert_stat("cache", stats(c), uploads, 2 * n);
	tu_assert_stat("cache", stats(c), errors, 0);
	kiln_cache_close(c);
}

/* put_missing: a HEAD first; the server's blob of the same size is not
 * sent again, an absent one or one of another size is; and an AC upload
 * queued after them still waits for them. */
static void
an_upload_that_asks_first_sends_only_what_the_server_lacks(void **state)
{
	kiln_cache *c = open_cache("cache", NULL);
	int fd;

	tu_write_file(tu_path(state, "blob"), "0123456789", 10);
	assert_true((fd = open(tu_path(state, "blob"), O_RDONLY)) >= 0);
	tu_sh("mkdir -p '%s/data/cache/cas' && printf 0123456789 >'%s/data/cache/cas/%s' && "
	      "printf 01234 >'%s/data/cache/cas/%s'", srv.dir, srv.dir, key(30), srv.dir, key(31));
	/* there with its size; cut short; absent */
	assert_kiln(0, kiln_cache_put_missing_async_fd(c, KILN_CACHE_CAS, key(30), fd));
	assert_kiln(0, kiln_cache_put_missing_async_fd(c, KILN_CACHE_CAS, key(31), fd));
	assert_kiln(0, kiln_cache_put_missing_async_fd(c, KILN_CACHE_CAS, key(32), fd));
	assert_kiln(0, kiln_cache_put_async(c, KILN_CACHE_AC, key(33), "r", 1));
	close(fd);
	assert_kiln(0, kiln_cache_flush(c, 20000));
	tu_assert_stat("cache", stats(c), present, 1);
	tu_assert_stat("cache", stats(c), uploads, 3);
	tu_assert_stat("cache", stats(c), bytes_up, 21);
	tu_assert_stat("cache", stats(c), misses, 0);
	tu_assert_stat("cache", stats(c), errors, 0);
	assert_int_equal(log_wait("\"PUT ", 3), 3);
	assert_int_equal(log_count("\"HEAD "), 3);
	assert_int_equal(log_count(key(30)), 1);   /* its HEAD only */
	/* the AC entry went last, after every CAS upload before it */
	assert_int_equal(tu_sh("grep -E '\"(PUT|HEAD) ' '%s/access.log' | tail -n 1 | grep -q /ac/",
	                       srv.dir), 0);
	get_expect(c, KILN_CACHE_CAS, key(31), "0123456789", 10);
	get_expect(c, KILN_CACHE_CAS, key(32), "0123456789", 10);
	kiln_cache_close(c);
}

static void
a_redirect_is_not_followed_and_5xx_opens_the_breaker(void **state)
{
	kiln_cache_config cfg = {.breaker_failures = 2, .breaker_open_ms = 60000};
	kiln_cache *c = open_cache("redirect", NULL), *b5;
	struct membuf b = {0};
	kiln_cache_stats st;

	(void)state;
	assert_kiln(KILN_EPROTO, kiln_cache_get(c, KILN_CACHE_CAS, key(13), 1 << 20, sink_mem, &b, NULL));
	assert_kiln(KILN_EPROTO, kiln_cache_put(c, KILN_CACHE_CAS, key(13), "x", 1));
	assert_int_equal(b.len, 0);
	/* Not a failure of the server: the breaker stays shut. */
	assert_int_equal(stats(c).breaker_open, 0);
	kiln_cache_close(c);
	b5 = open_cache("broken", &cfg);
	assert_kiln(KILN_EIO, kiln_cache_head(b5, KILN_CACHE_AC, key(13), NULL));
	assert_kiln(KILN_EIO, kiln_cache_get(b5, KILN_CACHE_AC, key(13), 100, sink_mem, &b, NULL));
	assert_kiln(KILN_ENOTFOUND, kiln_cache_get(b5, KILN_CACHE_AC, key(13), 100, sink_mem, &b, NULL));
	st = stats(b5);
	assert_int_equal(st.breaker_open, 1);
	tu_assert_stat("broken", st, skipped, 1);
	assert_int_equal(log_wait("\" 503 ", 2), 2);
	free(b.p);
	kiln_cache_close(b5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(put_then_get_round_trips_cas_and_ac_over_one_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(a_404_is_a_miss, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_keys_and_urls_are_refused_before_anything_is_sent, setup, teardown),
		cmocka_unit_test_setup_teardown(a_10_mb_blob_goes_up_from_an_fd_and_down_to_one_four_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(read_only_refuses_every_upload_and_sends_none, setup, teardown),
		cmocka_unit_test_setup_teardown(the_breaker_opens_when_the_server_stops_and_closes_once_it_is_back, setup, teardown),
		cmocka_unit_test_setup_teardown(a_huge_body_is_cut_at_the_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(basic_auth_passes_with_the_right_password_only, setup, teardown),
		cmocka_unit_test_setup_teardown(a_bearer_token_file_becomes_the_authorization_header, setup, teardown),
		cmocka_unit_test_setup_teardown(a_redirect_is_not_followed_and_5xx_opens_the_breaker, setup, teardown),
		cmocka_unit_test_setup_teardown(the_upload_queue_drops_past_its_bound_and_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(an_ac_upload_starts_after_the_cas_uploads_queued_before_it, setup, teardown),
		cmocka_unit_test_setup_teardown(an_upload_that_asks_first_sends_only_what_the_server_lacks, setup, teardown),
		cmocka_unit_test_setup_teardown(uploads_a_result_unblocks_start_without_waiting_for_the_poll, setup, teardown),
	};
	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
