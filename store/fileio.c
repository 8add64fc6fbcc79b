/* fileio.c — the few POSIX helpers every store module needs. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

int
kiln_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_err_from_errno(errno);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
fio_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return kiln_err_from_errno(errno);
		if (n == 0)
			return KILN_ECORRUPT;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
fio_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rv = 0;

	if (fd < 0)
		return kiln_err_from_errno(errno);
	if (fsync(fd) != 0)
		rv = kiln_err_from_errno(errno);
	close(fd);
	return rv;
}

int
fio_mkdir(const char *path, mode_t mode, int *made)
{
	if (made != NULL)
		*made = 0;
	if (mkdir(path, mode) == 0) {
		if (made != NULL)
			*made = 1;
		return 0;
	}
	if (errno == EEXIST) {
		struct stat st;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return KILN_ENOTSTORE;
	}
	return kiln_err_from_errno(errno);
}
