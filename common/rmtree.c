/* rmtree.c — rm -rf without following symlinks (kiln_rmtree.h). */
#include <ftw.h>
#include <unistd.h>

#include "kiln_rmtree.h"

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void
kiln_rmtree(const char *path)
{
	/* depth first, physical: a symlink is removed, never walked into */
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
