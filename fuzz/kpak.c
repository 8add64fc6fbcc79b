/* fuzz/kpak.c — libFuzzer target for client/kpak.h, the bundle reader a
 * game ships (docs/bundles.md): each input is opened as a bundle; when it
 * opens, every entry is listed, found again by its id, read (zstd
 * entries decompressed) and verified. Whatever the bytes, the reader must
 * only refuse: never read outside the input nor write past its buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>
#define KPAK_WITH_ZSTD
#include "kpak.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Entries larger than this are not read (a fuzzer's input is small, a
 * size field is not). */
#define READ_MAX (1u << 20)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kpak k;
	kpak_entry e, again;
	void *buf;

	if (kpak_open(&k, data, size) != KPAK_OK)
		return 0;
	for (uint32_t i = 0; i < k.nentries; i++) {
		if (kpak_entry_at(&k, i, &e) != KPAK_OK)
			continue;
		if (kpak_find(&k, e.id, &again) != KPAK_OK || again.offset != e.offset)
			abort();   /* the table is sorted by id: find must see it */
		if (e.size > READ_MAX || (buf = malloc(e.size ? (size_t)e.size : 1)) == NULL)
			continue;
		if (kpak_read(&e, buf, (size_t)e.size) == KPAK_OK)
			(void)kpak_verify(&e, buf);
		free(buf);
	}
	return 0;
}
