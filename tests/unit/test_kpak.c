/* test_kpak — bundles: the writer (daemon/engine/kpak_write.c) against
 * the reader a game includes (client/kpak.h, with zstd): what is packed
 * reads back byte for byte, compressed or not, at the asked alignment;
 * collisions of ids or C names refuse the bundle naming both; and a
 * damaged or truncated file is an error from the reader, never a read
 * outside it. The store is "store" in the case dir. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KPAK_WITH_ZSTD
#include "kiln_error.h"
#include "kpak.h"
#include "kpak_write.h"
#include "testutil.h"

struct fx {
	kiln_store *s;
	struct kpak_in v[3];
	char big[3000];
};

static void
fx_open(void **state, struct fx *f)
{
	kiln_store_opts o = {.flags = KILN_STORE_CREATE, .durability = KILN_DURABLE_NONE};

	assert_kiln(0, kiln_store_open(tu_path(state, "store"), &o, &f->s));
	for (size_t i = 0; i < sizeof f->big; i++)
		f->big[i] = "kiln bundles "[i % 13];
	f->v[0] = (struct kpak_in){"ui/atlas.png", "ui/atlas#image", {{0}}, 3, 0};
	f->v[1] = (struct kpak_in){"levels/level1.json", "levels/level1", {{0}}, sizeof f->big, 0};
	f->v[2] = (struct kpak_in){"empty.bin", "empty", {{0}}, 0, 0};
	assert_kiln(0, kiln_store_put_buf(f->s, "PNG", 3, &f->v[0].blob));
	assert_kiln(0, kiln_store_put_buf(f->s, f->big, sizeof f->big, &f->v[1].blob));
	assert_kiln(0, kiln_store_put_buf(f->s, "", 0, &f->v[2].blob));
}

/* The whole file at path, malloc'd. */
static unsigned char *
file_of(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *b;
	long n;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	rewind(fp);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	*len = (size_t)n;
	return b;
}

/* Pack f's entries with o and check every one reads back as stored. */
static void
round_trip(void **state, const struct kpak_opts *o, size_t *nzstd)
{
	struct fx f;
	char err[1024];
	unsigned char *b;
	size_t len;
	kpak k;

	fx_open(state, &f);
	assert_kiln(0, kpak_write(f.s, o, f.v, 3, tu_path(state, "b.kpak"), tu_path(state, "b.h"),
	                          tu_path(state, "b.json"), err, sizeof err));
	b = file_of(tu_path(state, "b.kpak"), &len);
	assert_int_equal(kpak_open(&k, b, len), KPAK_OK);
	assert_int_equal(k.nentries, 3);
	assert_int_equal(k.alignment, o->align);
	*nzstd = 0;
	for (int i = 0; i < 3; i++) {
		const char *name = i == 0 ? "ui/atlas.png" : i == 1 ? "levels/level1.json" : "empty.bin";
		const void *want = i == 0 ? "PNG" : i == 1 ? f.big : "";
		kpak_entry e;
		unsigned char *got;
		assert_int_equal(kpak_find(&k, kpak_id(name), &e), KPAK_OK);
		assert_string_equal(e.name, name);
		assert_int_equal(e.offset % o->align, 0);
		got = malloc(e.size + 1);
		assert_int_equal(kpak_read(&e, got, e.size), KPAK_OK);
		assert_int_equal(kpak_verify(&e, got), KPAK_OK);
		assert_memory_equal(got, want, e.size);
		*nzstd += (e.flags & KPAK_FLAG_ZSTD) != 0;
		free(got);
	}
	kpak_entry none;
	assert_int_equal(kpak_find(&k, kpak_id("nosuch"), &none), KPAK_ENOTFOUND);
	free(b);
	kiln_store_close(f.s);
}

static void
packed_entries_read_back_byte_for_byte(void **state)
{
	struct kpak_opts o = {"preload", 16, 0};
	size_t nz;

	round_trip(state, &o, &nz);
	assert_int_equal(nz, 0);
}

static void
zstd_compresses_what_shrinks_and_reads_back(void **state)
{
	struct kpak_opts o = {"level1", 4096, 1};
	size_t nz;

	round_trip(state, &o, &nz);
	assert_int_equal(nz, 1);   /* the 3000 repeated bytes; not "PNG" nor "" */
}

static void
the_header_names_each_id(void **state)
{
	struct kpak_opts o = {"preload", 16, 0};
	struct fx f;
	char err[1024], line[256];
	unsigned char *h;
	size_t len;

	fx_open(state, &f);
	assert_kiln(0, kpak_write(f.s, &o, f.v, 3, tu_path(state, "b.kpak"), tu_path(state, "b.h"),
	                          NULL, err, sizeof err));
	h = file_of(tu_path(state, "b.h"), &len);
	h[len] = '\0';
	snprintf(line, sizeof line, "#define KPAK_PRELOAD_UI_ATLAS_PNG                0x%08xu",
	         kpak_id("ui/atlas.png"));
	assert_non_null(strstr((char *)h, line));
	assert_non_null(strstr((char *)h, "#define KPAK_PRELOAD_NENTRIES 3u"));
	free(h);
	kiln_store_close(f.s);
}

static void
entries_with_one_c_name_refuse_the_bundle(void **state)
{
	struct kpak_opts o = {"b", 16, 0};
	struct fx f;
	char err[1024];

	fx_open(state, &f);
	f.v[0].name = "a-b.png";
	f.v[1].name = "a_b.png";
	assert_kiln(KILN_EINVAL, kpak_write(f.s, &o, f.v, 3, tu_path(state, "b.kpak"),
	                                    tu_path(state, "b.h"), NULL, err, sizeof err));
	assert_non_null(strstr(err, "'a-b.png'"));
	assert_non_null(strstr(err, "'a_b.png'"));
	assert_non_null(strstr(err, "KPAK_B_A_B_PNG"));
	kiln_store_close(f.s);
}

static void
a_damaged_file_is_an_error_never_a_read_outside_it(void **state)
{
	struct kpak_opts o = {"b", 16, 0};
	struct fx f;
	char err[1024];
	unsigned char *b;
	size_t len;
	kpak k;
	kpak_entry e;

	fx_open(state, &f);
	assert_kiln(0, kpak_write(f.s, &o, f.v, 3, tu_path(state, "b.kpak"), tu_path(state, "b.h"),
	                          NULL, err, sizeof err));
	b = file_of(tu_path(state, "b.kpak"), &len);
	/* truncated: every shorter length is refused */
	for (size_t n = 0; n < len; n += 7)
		assert_int_not_equal(kpak_open(&k, b, n), KPAK_OK);
	/* another version */
	b[8] = 1;
	assert_int_equal(kpak_open(&k, b, len), KPAK_EVERSION);
	b[8] = 2;
	/* an unknown flag, then data past the end */
	assert_int_equal(kpak_open(&k, b, len), KPAK_OK);
	b[KPAK_HEADER_SIZE + 12] = 0x80;
	assert_int_equal(kpak_entry_at(&k, 0, &e), KPAK_EFORMAT);
	b[KPAK_HEADER_SIZE + 12] = 0;
	b[KPAK_HEADER_SIZE + 16 + 7] = 0x10;
	assert_int_equal(kpak_entry_at(&k, 0, &e), KPAK_EFORMAT);
	free(b);
	kiln_store_close(f.s);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, tu_setup_dir, tu_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(packed_entries_read_back_byte_for_byte),
		T(zstd_compresses_what_shrinks_and_reads_back),
		T(the_header_names_each_id),
		T(entries_with_one_c_name_refuse_the_bundle),
		T(a_damaged_file_is_an_error_never_a_read_outside_it),
	};
	return tu_skip_leak_report_if_failed(cmocka_run_group_tests(tests, NULL, NULL));
}
