/* testutil.c — temp dirs and small file helpers for the unit tests. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

int
tu_setup_dir(void **state)
{
	const char *base = getenv("TMPDIR");
	char *dir = malloc(4096);

	if (dir == NULL)
		return -1;
	snprintf(dir, 4096, "%s/kiln-unit-XXXXXX", base ? base : "/tmp");
	if (mkdtemp(dir) == NULL) {
		free(dir);
		return -1;
	}
	*state = dir;
	return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else {
		chmod(path, 0644);
		unlink(path);
	}
	return 0;
}

void
tu_rmtree(const char *path)
{
	nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

int
tu_teardown_dir(void **state)
{
	char *dir = *state;

	if (dir != NULL && getenv("KILN_KEEP_TMP") == NULL)
		tu_rmtree(dir);
	free(dir);
	*state = NULL;
	return 0;
}

const char *
tu_dir(void **state)
{
	return *state;
}

const char *
tu_path(void **state, const char *fmt, ...)
{
	static char bufs[8][4096];
	static int next;
	char *b = bufs[next++ % 8];
	int n = snprintf(b, 4096, "%s/", tu_dir(state));
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b + n, 4096 - n, fmt, ap);
	va_end(ap);
	return b;
}

void
tu_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const char *p = buf;

	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0)
			fail_msg("write %s: %s", path, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

void
tu_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

kiln_store *
tu_open_store(void **state, enum kiln_durability d)
{
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = d};
	kiln_store *s = NULL;
	int rv = kiln_store_open(tu_path(state, "store"), &o, &s);

	if (rv != 0)
		fail_msg("kiln_store_open: %s", kiln_strerror(rv));
	return s;
}

int
tu_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}
