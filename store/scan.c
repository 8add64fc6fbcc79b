/* scan.c — walking objects/ and keeping sets of blob ids (fsck and gc). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

static int
is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

static int
scan_shard(DIR *top, const char *shard, scan_fn fn, stray_fn stray, void *arg)
{
	int fd = openat(dirfd(top), shard, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d;
	struct dirent *e;
	int rv = 0;

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return kiln_err_from_errno(errno);
	}
	while (rv == 0 && (e = readdir(d)) != NULL) {
		char hex[KILN_ID_HEX_LEN + 1], rel[PATH_MAX];
		struct blob_entry be;
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (is_hex(e->d_name, KILN_ID_HEX_LEN - 2)) {
			memcpy(hex, shard, 2);
			memcpy(hex + 2, e->d_name, KILN_ID_HEX_LEN - 2 + 1);
		}
		if (is_hex(e->d_name, KILN_ID_HEX_LEN - 2) &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && kiln_id_from_hex(hex, &be.id) == 0) {
			be.size = (uint64_t)st.st_size;
			be.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
			              st.st_mtim.tv_nsec;
			rv = fn(&be, arg);
		} else if (stray != NULL) {
			snprintf(rel, sizeof rel, "objects/%s/%s", shard, e->d_name);
			rv = stray(rel, arg);
		}
	}
	closedir(d);
	return rv;
}

int
objects_scan(kiln_store *s, scan_fn fn, stray_fn stray, void *arg)
{
	DIR *top = opendir(s->objects);
	struct dirent *e;
	int rv = 0;

	if (top == NULL)
		return errno == ENOENT ? 0 : kiln_err_from_errno(errno);
	while (rv == 0 && (e = readdir(top)) != NULL) {
		char rel[PATH_MAX];
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (is_hex(e->d_name, 2) &&
		    fstatat(dirfd(top), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			rv = scan_shard(top, e->d_name, fn, stray, arg);
		} else if (stray != NULL) {
			snprintf(rel, sizeof rel, "objects/%s", e->d_name);
			rv = stray(rel, arg);
		}
	}
	closedir(top);
	return rv;
}

int
store_grow(void *array_ptr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 256;
	void *old, *p;

	if (n < *cap)
		return 0;
	/* memcpy: the pointer has the caller's type, not void * */
	memcpy(&old, array_ptr, sizeof old);
	if (ncap > SIZE_MAX / size || (p = realloc(old, ncap * size)) == NULL)
		return KILN_ENOMEM;
	memcpy(array_ptr, &p, sizeof p);
	*cap = ncap;
	return 0;
}

int
idset_add(struct idset *set, const kiln_id *id)
{
	if (store_grow(&set->ids, &set->cap, set->n, sizeof *set->ids) != 0)
		return KILN_ENOMEM;
	set->ids[set->n++] = *id;
	return 0;
}

static int
id_order(const void *a, const void *b)
{
	return kiln_id_cmp(a, b);
}

void
idset_sort(struct idset *set)
{
	size_t w = 0;

	if (set->n == 0)
		return;
	qsort(set->ids, set->n, sizeof *set->ids, id_order);
	for (size_t r = 1; r < set->n; r++)
		if (kiln_id_cmp(&set->ids[w], &set->ids[r]) != 0)
			set->ids[++w] = set->ids[r];
	set->n = w + 1;
}

int
idset_has(const struct idset *set, const kiln_id *id)
{
	return set->n > 0 &&
	       bsearch(id, set->ids, set->n, sizeof *set->ids, id_order) != NULL;
}

void
idset_free(struct idset *set)
{
	free(set->ids);
	set->ids = NULL;
	set->n = set->cap = 0;
}
