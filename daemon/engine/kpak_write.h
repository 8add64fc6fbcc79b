/* kpak_write.h — writing a bundle: the kpak file (client/kpak.h holds its
 * layout, docs/bundles.md describes it), its C header of entry ids and its
 * JSON manifest (kpak_write.c). No engine state: blobs come from a store. */
#ifndef KILND_KPAK_WRITE_H
#define KILND_KPAK_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_store.h"

/* One entry to pack. */
struct kpak_in {
	const char *name;  /* its path under build/<profile>/: its id's source */
	const char *url;   /* the output's index URL (messages, manifest) */
	kiln_id blob;      /* its bytes, in the store */
	uint64_t size;
	uint32_t id;       /* set by kpak_write */
};

struct kpak_opts {
	const char *bundle;  /* the bundle's name: the header's prefix */
	uint32_t align;      /* a power of two */
	int zstd;            /* compress entries that get smaller */
};

/* zstd's level for compress: zstd: bundles are packed once per change of
 * an entry and loaded many times, so the ratio is worth the time. */
#define KPAK_ZSTD_LEVEL 19

/* Pack v[0..n) (reordered: sorted by id) from store s into kpak_path, its
 * header into h_path and, when json_path is not NULL, its manifest.
 * Returns 0; KILN_EINVAL when two entries share an id or a C name (err
 * names both); KILN_ERANGE past the format's limits; or the store's or
 * the file system's error (err says which entry or file). */
int kpak_write(kiln_store *s, const struct kpak_opts *o, struct kpak_in *v, size_t n,
               const char *kpak_path, const char *h_path, const char *json_path,
               char *err, size_t errlen);

#endif
