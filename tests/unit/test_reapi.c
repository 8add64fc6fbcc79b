/* test_reapi — kiln's entries in a Bazel-protocol remote cache (cache/,
 * docs/cache.md): keys are the documented SHA-256s, both entries round-trip,
 * merging keeps newest first without stale twins and within the caps, the
 * encoders refuse what the layout forbids, the decoders refuse every
 * hostile entry (KILN_ECORRUPT), and what kiln writes parses as an REAPI
 * ActionResult with SHA-256 digests when read by protoc --decode_raw, with
 * the field numbers of the real schema (remote-apis @ becdd8f9) — not
 * through kiln's own decoder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_entries.h"
#include "kiln_cache.pb-c.h"
#include "kiln_error.h"
#include "reapi.pb-c.h"
#include "testutil.h"

typedef Build__Bazel__Remote__Execution__V2__ActionResult rx_result;
typedef Build__Bazel__Remote__Execution__V2__OutputFile rx_file;
typedef Build__Bazel__Remote__Execution__V2__Digest rx_digest;
typedef Build__Bazel__Remote__Execution__V2__ExecutedActionMetadata rx_meta;

#define ACTION "step-key"

static void
sha_fill(uint8_t sha[KILN_CACHE_SHA_LEN], uint8_t v)
{
	memset(sha, v, KILN_CACHE_SHA_LEN);
}

static const char *
hex_of(const uint8_t sha[KILN_CACHE_SHA_LEN])
{
	static char hex[4][KILN_CACHE_HEX_LEN + 1];
	static int at;

	at = (at + 1) % 4;
	kiln_cache_hex(sha, hex[at]);
	return hex[at];
}

/* The candidate of the known-answer key: files unsorted on purpose. */
static struct kiln_cache_file sample_files[2];
static struct kiln_cache_need sample_needs[1];
static const char *const sample_warnings[] = {"used /home/u/x: outside"};

static struct kiln_cache_candidate
sample_candidate(void)
{
	struct kiln_cache_candidate c = {0};

	sample_files[0] = (struct kiln_cache_file){.path = "a.h", .present = 1};
	sha_fill(sample_files[0].sha, 0x11);
	sample_files[1] = (struct kiln_cache_file){.path = "/usr/x.h", .present = 0};
	sample_needs[0] = (struct kiln_cache_need){.url = "sprites/a", .output = "out"};
	sha_fill(sample_needs[0].sha, 0x22);
	c.files = sample_files;
	c.nfiles = 2;
	c.needs = sample_needs;
	c.nneeds = 1;
	c.traced = 1;
	c.duration_ns = 123456789;
	c.warnings = sample_warnings;
	c.nwarnings = 1;
	return c;
}

/* A candidate with one discovered file "inc/<i>.h" of content byte v. */
struct one_file {
	struct kiln_cache_file f;
	char path[32];
	struct kiln_cache_candidate c;
};

static void
one_file_make(struct one_file *o, int i, uint8_t v)
{
	snprintf(o->path, sizeof o->path, "inc/%d.h", i);
	o->f = (struct kiln_cache_file){.path = o->path, .present = 1};
	sha_fill(o->f.sha, v);
	o->c = (struct kiln_cache_candidate){.files = &o->f, .nfiles = 1};
}

/* Hashes of bytes 0x7a, 0x7b, 0x7c: hex that starts with '7', which
 * protoc --decode_raw cannot take for a nested message (0x37 is wire type
 * 7), so it prints them as the strings they are. */
static struct kiln_cache_output sample_outputs[2];

static struct kiln_cache_result
sample_result(void)
{
	struct kiln_cache_result r = {0};

	sample_outputs[0] = (struct kiln_cache_output){.name = "out", .blob.size = 5};
	sha_fill(sample_outputs[0].blob.sha, 0x7a);
	sample_outputs[1] = (struct kiln_cache_output){.name = "mips/1.png", .blob.size = 0,
	                                               .executable = 1};
	sha_fill(sample_outputs[1].blob.sha, 0x7b);
	r.outputs = sample_outputs;
	r.noutputs = 2;
	r.has_log = 1;
	r.log.size = 12;
	sha_fill(r.log.sha, 0x7c);
	return r;
}

/* ---- keys ---------------------------------------------------------------- */

/* Known answers computed outside kiln (sha256sum and Python's hashlib over
 * the byte layouts docs/cache.md gives). */
static void
keys_are_the_documented_sha256s(void **state)
{
	struct kiln_cache_candidate c = sample_candidate();
	uint8_t key[KILN_CACHE_SHA_LEN];

	(void)state;
	/* printf 'kiln.cache.index.v1\0step-key' | sha256sum */
	assert_kiln(0, kiln_cache_index_key(ACTION, strlen(ACTION), key));
	assert_string_equal(hex_of(key),
	                    "f26f05d4520ca109ca6125dec8e4a457341edefa6695e80307ffdefe5d9d724a");
	assert_kiln(0, kiln_cache_result_key(ACTION, strlen(ACTION), &c, key));
	assert_string_equal(hex_of(key),
	                    "5327ac70233d190d971a61f3f00d7b3442fcabf0fd71ab5c90c6648bd0cca2e9");
	assert_kiln(KILN_EINVAL, kiln_cache_index_key(ACTION, 0, key));
}

static void
result_key_follows_conditions_only(void **state)
{
	struct kiln_cache_candidate c = sample_candidate();
	uint8_t k0[KILN_CACHE_SHA_LEN], k[KILN_CACHE_SHA_LEN];
	struct kiln_cache_file swapped[2];

	(void)state;
	assert_kiln(0, kiln_cache_result_key(ACTION, strlen(ACTION), &c, k0));
	/* Order given, traced, duration and warnings: same key. */
	swapped[0] = sample_files[1];
	swapped[1] = sample_files[0];
	c.files = swapped;
	c.traced = 0;
	c.duration_ns = 1;
	c.nwarnings = 0;
	assert_kiln(0, kiln_cache_result_key(ACTION, strlen(ACTION), &c, k));
	assert_memory_equal(k0, k, sizeof k);
	/* A file's content, its presence, another action: another key. */
	swapped[1].sha[31] ^= 1;
	assert_kiln(0, kiln_cache_result_key(ACTION, strlen(ACTION), &c, k));
	assert_memory_not_equal(k0, k, sizeof k);
	swapped[1].sha[31] ^= 1;
	swapped[0].present = 1;
	assert_kiln(0, kiln_cache_result_key(ACTION, strlen(ACTION), &c, k));
	assert_memory_not_equal(k0, k, sizeof k);
	swapped[0].present = 0;
	assert_kiln(0, kiln_cache_result_key("step-kez", 8, &c, k));
	assert_memory_not_equal(k0, k, sizeof k);
}

static void
hex_is_strict_lowercase(void **state)
{
	uint8_t sha[KILN_CACHE_SHA_LEN], back[KILN_CACHE_SHA_LEN];
	char hex[KILN_CACHE_HEX_LEN + 2];

	(void)state;
	for (int i = 0; i < KILN_CACHE_SHA_LEN; i++)
		sha[i] = (uint8_t)(i * 37);
	kiln_cache_hex(sha, hex);
	assert_kiln(0, kiln_cache_unhex(hex, back));
	assert_memory_equal(sha, back, sizeof sha);
	hex[5] = 'A';
	assert_kiln(KILN_EINVAL, kiln_cache_unhex(hex, back));
	kiln_cache_hex(sha, hex);
	hex[63] = '\0';
	assert_kiln(KILN_EINVAL, kiln_cache_unhex(hex, back));
	kiln_cache_hex(sha, hex);
	hex[64] = '0';
	hex[65] = '\0';
	assert_kiln(KILN_EINVAL, kiln_cache_unhex(hex, back));
}

/* ---- round trips ----------------------------------------------------------- */

static void
index_round_trips_in_canonical_order(void **state)
{
	struct kiln_cache_candidate c[2] = {sample_candidate(), {0}};
	struct kiln_cache_index *ix;
	const struct kiln_cache_candidate *d;
	uint8_t *buf;
	size_t len;

	(void)state;
	/* The second: discovered nothing, needed nothing (valid: a step whose
	 * run was traced and touched no file). */
	assert_kiln(0, kiln_cache_index_encode(c, 2, &buf, &len));
	assert_kiln(0, kiln_cache_index_decode(buf, len, &ix));
	assert_int_equal(2, ix->ncandidates);
	d = &ix->candidates[0];
	assert_int_equal(2, d->nfiles);
	assert_string_equal("/usr/x.h", d->files[0].path);
	assert_false(d->files[0].present);
	assert_string_equal("a.h", d->files[1].path);
	assert_true(d->files[1].present);
	assert_memory_equal(sample_files[0].sha, d->files[1].sha, KILN_CACHE_SHA_LEN);
	assert_int_equal(1, d->nneeds);
	assert_string_equal("sprites/a", d->needs[0].url);
	assert_string_equal("out", d->needs[0].output);
	assert_memory_equal(sample_needs[0].sha, d->needs[0].sha, KILN_CACHE_SHA_LEN);
	assert_true(d->traced);
	assert_int_equal(123456789, d->duration_ns);
	assert_int_equal(1, d->nwarnings);
	assert_string_equal(sample_warnings[0], d->warnings[0]);
	assert_int_equal(0, ix->candidates[1].nfiles);
	assert_int_equal(0, ix->candidates[1].nneeds);
	kiln_cache_index_free(ix);
	free(buf);
}

static void
result_round_trips(void **state)
{
	struct kiln_cache_result r = sample_result(), *d;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_kiln(0, kiln_cache_result_encode(&r, &buf, &len));
	assert_kiln(0, kiln_cache_result_decode(buf, len, &d));
	assert_int_equal(2, d->noutputs);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(r.outputs[i].name, d->outputs[i].name);
		assert_memory_equal(r.outputs[i].blob.sha, d->outputs[i].blob.sha,
		                    KILN_CACHE_SHA_LEN);
		assert_int_equal(r.outputs[i].blob.size, d->outputs[i].blob.size);
		assert_int_equal(r.outputs[i].executable, d->outputs[i].executable);
	}
	assert_true(d->has_log);
	assert_memory_equal(r.log.sha, d->log.sha, KILN_CACHE_SHA_LEN);
	assert_int_equal(12, d->log.size);
	kiln_cache_result_free(d);
	free(buf);
	/* No outputs, no log: still not zero bytes, still decodes. */
	r.noutputs = 0;
	r.has_log = 0;
	assert_kiln(0, kiln_cache_result_encode(&r, &buf, &len));
	assert_true(len > 0);
	assert_kiln(0, kiln_cache_result_decode(buf, len, &d));
	assert_int_equal(0, d->noutputs);
	assert_false(d->has_log);
	kiln_cache_result_free(d);
	free(buf);
}

/* ---- signatures ------------------------------------------------------------ */

#define SIGN_KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A signed entry verifies with its key for its AC key only; a byte changed
 * anywhere, the signature cut off, another key or another AC key: corrupt.
 * Readers without a key decode it like an unsigned one. */
static void
signed_entries_verify_only_with_their_key_and_ac_key(void **state)
{
	struct kiln_cache_result r = sample_result(), *d;
	struct kiln_cache_candidate c = sample_candidate();
	struct kiln_cache_index *ix;
	uint8_t key[KILN_CACHE_SHA_LEN], other[KILN_CACHE_SHA_LEN], *buf, *sig, *ibuf, *isig;
	size_t len, slen, ilen, islen, klen = strlen(SIGN_KEY);

	(void)state;
	assert_kiln(0, kiln_cache_index_key(ACTION, strlen(ACTION), key));
	assert_kiln(0, kiln_cache_index_key("step-kez", 8, other));
	assert_kiln(0, kiln_cache_result_encode(&r, &buf, &len));
	assert_kiln(0, kiln_cache_entry_sign(SIGN_KEY, klen, key, buf, len, &sig, &slen));
	assert_int_equal(len + KILN_CACHE_SIG_TRAILER, slen);
	assert_memory_equal(buf, sig, len);
	assert_kiln(0, kiln_cache_entry_verify(SIGN_KEY, klen, key, sig, slen));
	/* decoders take it, key or not */
	assert_kiln(0, kiln_cache_result_decode(sig, slen, &d));
	assert_int_equal(2, d->noutputs);
	kiln_cache_result_free(d);
	/* unsigned, moved to another key, signed with another key */
	assert_kiln(KILN_ECORRUPT, kiln_cache_entry_verify(SIGN_KEY, klen, key, buf, len));
	assert_kiln(KILN_ECORRUPT, kiln_cache_entry_verify(SIGN_KEY, klen, other, sig, slen));
	assert_kiln(KILN_ECORRUPT, kiln_cache_entry_verify(SIGN_KEY "x", klen + 1, key, sig, slen));
	/* any byte changed */
	for (size_t i = 0; i < slen; i++) {
		sig[i] ^= 0x01;
		assert_kiln(KILN_ECORRUPT, kiln_cache_entry_verify(SIGN_KEY, klen, key, sig, slen));
		sig[i] ^= 0x01;
	}
	/* cut short anywhere */
	for (size_t n = 0; n < slen; n++)
		assert_kiln(KILN_ECORRUPT, kiln_cache_entry_verify(SIGN_KEY, klen, key, sig, n));
	/* keys too short or too long */
	assert_kiln(KILN_EINVAL, kiln_cache_entry_verify(SIGN_KEY, 31, key, sig, slen));
	assert_kiln(KILN_EINVAL, kiln_cache_entry_sign(SIGN_KEY, 31, key, buf, len, &isig, &islen));
	/* an index entry the same way */
	assert_kiln(0, kiln_cache_index_encode(&c, 1, &ibuf, &ilen));
	assert_kiln(0, kiln_cache_entry_sign(SIGN_KEY, klen, key, ibuf, ilen, &isig, &islen));
	assert_kiln(0, kiln_cache_entry_verify(SIGN_KEY, klen, key, isig, islen));
	assert_kiln(0, kiln_cache_index_decode(isig, islen, &ix));
	assert_int_equal(1, ix->ncandidates);
	kiln_cache_index_free(ix);
	free(ibuf);
	free(isig);
	free(buf);
	free(sig);
}

/* ---- merge ----------------------------------------------------------------- */

/* Merge add into the index held in *buf (NULL: none), replacing *buf. */
static void
merge_into(uint8_t **buf, size_t *len, const struct kiln_cache_candidate *add)
{
	struct kiln_cache_index *old = NULL;
	uint8_t *next;
	size_t nlen;

	if (*buf != NULL)
		assert_kiln(0, kiln_cache_index_decode(*buf, *len, &old));
	assert_kiln(0, kiln_cache_index_merge(old, add, &next, &nlen));
	kiln_cache_index_free(old);
	free(*buf);
	*buf = next;
	*len = nlen;
}

/* The content byte of each candidate's one file, newest first. */
static void
assert_order(const uint8_t *buf, size_t len, const uint8_t *want, size_t n)
{
	struct kiln_cache_index *ix;

	assert_kiln(0, kiln_cache_index_decode(buf, len, &ix));
	if (ix->ncandidates != n)
		fail_msg("expected %zu candidates, found %zu", n, ix->ncandidates);
	for (size_t i = 0; i < n; i++)
		if (ix->candidates[i].files[0].sha[0] != want[i])
			fail_msg("candidate %zu: expected content %#x, found %#x", i, want[i],
			         ix->candidates[i].files[0].sha[0]);
	kiln_cache_index_free(ix);
}

static void
merge_puts_newest_first_replaces_its_twin_and_caps(void **state)
{
	struct one_file o[KILN_CACHE_CANDIDATES_MAX + 2];
	uint8_t *buf = NULL, want[KILN_CACHE_CANDIDATES_MAX];
	size_t len = 0;

	(void)state;
	one_file_make(&o[0], 0, 1);
	one_file_make(&o[1], 0, 2);
	merge_into(&buf, &len, &o[0].c);
	merge_into(&buf, &len, &o[1].c);
	assert_order(buf, len, (const uint8_t[]){2, 1}, 2);
	/* The same variant again (its result was rebuilt): moved to the front,
	 * not listed twice. */
	one_file_make(&o[2], 0, 1);
	o[2].c.duration_ns = 99;
	merge_into(&buf, &len, &o[2].c);
	assert_order(buf, len, (const uint8_t[]){1, 2}, 2);
	/* Past the cap, the oldest goes. */
	for (int i = 3; i < KILN_CACHE_CANDIDATES_MAX + 2; i++) {
		one_file_make(&o[i], 0, (uint8_t)(i + 10));
		merge_into(&buf, &len, &o[i].c);
	}
	for (int i = 0; i < KILN_CACHE_CANDIDATES_MAX - 1; i++)
		want[i] = (uint8_t)(KILN_CACHE_CANDIDATES_MAX + 1 - i + 10);
	want[KILN_CACHE_CANDIDATES_MAX - 1] = 1;
	assert_order(buf, len, want, KILN_CACHE_CANDIDATES_MAX);
	free(buf);
}

/* A candidate of n files with long paths (about 700 KiB encoded at 4000). */
static struct kiln_cache_candidate
big_candidate(struct kiln_cache_file *f, char (*paths)[160], size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++) {
		snprintf(paths[i], sizeof paths[i], "assets/%0140zu", i);
		f[i] = (struct kiln_cache_file){.path = paths[i], .present = 1};
		sha_fill(f[i].sha, v);
	}
	return (struct kiln_cache_candidate){.files = f, .nfiles = n};
}

static void
merge_drops_the_oldest_to_fit_the_entry_cap(void **state)
{
	enum { N = 4000 };
	struct kiln_cache_file *f = calloc(3 * N, sizeof *f);
	char (*paths)[160] = calloc(N, sizeof *paths);
	struct kiln_cache_candidate c[3];
	struct kiln_cache_index *ix;
	uint8_t *buf = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(f);
	assert_non_null(paths);
	for (int i = 0; i < 3; i++) {
		c[i] = big_candidate(f + i * N, paths, N, (uint8_t)(i + 1));
		merge_into(&buf, &len, &c[i]);
	}
	assert_true(len <= KILN_CACHE_ENTRY_MAX);
	assert_kiln(0, kiln_cache_index_decode(buf, len, &ix));
	assert_int_equal(2, ix->ncandidates);
	assert_int_equal(3, ix->candidates[0].files[0].sha[0]);
	assert_int_equal(2, ix->candidates[1].files[0].sha[0]);
	kiln_cache_index_free(ix);
	/* Three at once do not fit. */
	free(buf);
	assert_kiln(KILN_ERANGE, kiln_cache_index_encode(c, 3, &buf, &len));
	free(f);
	free(paths);
}

/* ---- what the encoders refuse ------------------------------------------- */

static void
encoders_refuse_what_the_layout_forbids(void **state)
{
	static const char *const bad_names[] = {
		"", "/abs", "../up", "a/../b", "a//b", "a/", "./a", "a/.", "tab\there",
	};
	static const char *const bad_deps[] = {
		"", "/", "//", "../x", "a/../b", "/a//b", "a/./b", ".", "..", "/..", "x//",
	};
	static const char *const good_deps[] = {"./", "a", "a/", "/usr/include/x.h", "/opt/"};
	struct kiln_cache_result r = sample_result();
	struct kiln_cache_output outs[2];
	struct one_file o;
	struct kiln_cache_candidate c[KILN_CACHE_CANDIDATES_MAX + 1];
	uint8_t *buf;
	size_t len;

	(void)state;
	memcpy(outs, sample_outputs, sizeof outs);
	r.outputs = outs;
	for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
		outs[0].name = bad_names[i];
		if (kiln_cache_result_encode(&r, &buf, &len) != KILN_EINVAL)
			fail_msg("output name \"%s\" was accepted", bad_names[i]);
	}
	outs[0].name = outs[1].name; /* a duplicate */
	assert_kiln(KILN_EINVAL, kiln_cache_result_encode(&r, &buf, &len));
	outs[0].name = "out";
	outs[0].blob.size = (uint64_t)INT64_MAX + 1;
	assert_kiln(KILN_EINVAL, kiln_cache_result_encode(&r, &buf, &len));
	r.noutputs = KILN_CACHE_OUTPUTS_MAX + 1;
	assert_kiln(KILN_ERANGE, kiln_cache_result_encode(&r, &buf, &len));

	one_file_make(&o, 0, 1);
	for (size_t i = 0; i < sizeof bad_deps / sizeof *bad_deps; i++) {
		o.f.path = bad_deps[i];
		if (kiln_cache_index_encode(&o.c, 1, &buf, &len) != KILN_EINVAL)
			fail_msg("discovered path \"%s\" was accepted", bad_deps[i]);
	}
	for (size_t i = 0; i < sizeof good_deps / sizeof *good_deps; i++) {
		o.f.path = good_deps[i];
		if (kiln_cache_index_encode(&o.c, 1, &buf, &len) != 0)
			fail_msg("discovered path \"%s\" was refused", good_deps[i]);
		free(buf);
	}
	assert_kiln(KILN_EINVAL, kiln_cache_index_encode(&o.c, 0, &buf, &len));
	for (int i = 0; i <= KILN_CACHE_CANDIDATES_MAX; i++)
		c[i] = o.c;
	/* Two candidates with the same conditions. */
	assert_kiln(KILN_EINVAL, kiln_cache_index_encode(c, 2, &buf, &len));
	assert_kiln(KILN_ERANGE,
	            kiln_cache_index_encode(c, KILN_CACHE_CANDIDATES_MAX + 1, &buf, &len));
	c[0].nfiles = KILN_CACHE_FILES_MAX + 1;
	assert_kiln(KILN_ERANGE, kiln_cache_index_encode(c, 1, &buf, &len));
	/* The same file twice in one candidate. */
	{
		struct kiln_cache_file twice[2] = {o.f, o.f};
		c[0] = (struct kiln_cache_candidate){.files = twice, .nfiles = 2};
		assert_kiln(KILN_EINVAL, kiln_cache_index_encode(c, 1, &buf, &len));
	}
}

/* ---- what the decoders refuse ------------------------------------------- */

static uint8_t *
pack(const ProtobufCMessage *m, size_t *len)
{
	uint8_t *buf;

	*len = protobuf_c_message_get_packed_size(m);
	buf = malloc(*len ? *len : 1);
	assert_non_null(buf);
	protobuf_c_message_pack(m, buf);
	return buf;
}

static void
assert_result_corrupt(const char *what, const void *buf, size_t len)
{
	struct kiln_cache_result *r = NULL;
	int rv = kiln_cache_result_decode(buf, len, &r);

	if (rv != KILN_ECORRUPT)
		fail_msg("%s: result decode gave %d (%s), not KILN_ECORRUPT", what, rv,
		         kiln_strerror(rv));
	assert_null(r);
}

static void
assert_index_corrupt(const char *what, const void *buf, size_t len)
{
	struct kiln_cache_index *ix = NULL;
	int rv = kiln_cache_index_decode(buf, len, &ix);

	if (rv != KILN_ECORRUPT)
		fail_msg("%s: index decode gave %d (%s), not KILN_ECORRUPT", what, rv,
		         kiln_strerror(rv));
	assert_null(ix);
}

static void
truncated_entries_are_refused(void **state)
{
	struct kiln_cache_result r = sample_result();
	struct kiln_cache_candidate c = sample_candidate();
	uint8_t *rb, *ib;
	size_t rlen, ilen;
	char what[96];

	(void)state;
	assert_kiln(0, kiln_cache_result_encode(&r, &rb, &rlen));
	assert_kiln(0, kiln_cache_index_encode(&c, 1, &ib, &ilen));
	/* Every prefix, including those that end on a field boundary (which
	 * protobuf parses): the metadata written last is missing. */
	for (size_t n = 0; n < rlen; n++) {
		snprintf(what, sizeof what, "result cut to %zu of %zu bytes", n, rlen);
		assert_result_corrupt(what, rb, n);
	}
	for (size_t n = 0; n < ilen; n++) {
		snprintf(what, sizeof what, "index cut to %zu of %zu bytes", n, ilen);
		assert_index_corrupt(what, ib, n);
	}
	/* Each is not the other. */
	assert_index_corrupt("a result read as an index", rb, rlen);
	assert_result_corrupt("an index read as a result", ib, ilen);
	free(rb);
	free(ib);
}

/* A result entry with one output file whose fields the case sets. */
struct hostile {
	rx_result ar;
	rx_file f, *pf[2];
	rx_digest dg;
	rx_meta meta;
};

static void
hostile_init(struct hostile *h)
{
	static char hex[KILN_CACHE_HEX_LEN + 1];

	memset(hex, 'a', KILN_CACHE_HEX_LEN);
	build__bazel__remote__execution__v2__action_result__init(&h->ar);
	build__bazel__remote__execution__v2__output_file__init(&h->f);
	build__bazel__remote__execution__v2__digest__init(&h->dg);
	build__bazel__remote__execution__v2__executed_action_metadata__init(&h->meta);
	h->dg.hash = hex;
	h->dg.size_bytes = 3;
	h->f.path = "out";
	h->f.digest = &h->dg;
	h->pf[0] = h->pf[1] = &h->f;
	h->ar.n_output_files = 1;
	h->ar.output_files = h->pf;
	h->meta.worker = "kiln";
	h->ar.execution_metadata = &h->meta;
}

static void
hostile_result_entries_are_refused(void **state)
{
	static const char *const bad_hashes[] = {
		"", "aaaa",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",   /* 63 */
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 65 */
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"gaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* a SHA-1's length */
	};
	static const char *const bad_paths[] = {"/etc/passwd", "../x", "a/../../x", "", "a//b"};
	struct hostile h;
	rx_digest log;
	uint8_t *buf, *big;
	size_t len;
	struct kiln_cache_result *r;

	(void)state;
	hostile_init(&h);
	buf = pack(&h.ar.base, &len);
	assert_kiln(0, kiln_cache_result_decode(buf, len, &r)); /* the baseline is fine */
	kiln_cache_result_free(r);
	free(buf);
	for (size_t i = 0; i < sizeof bad_hashes / sizeof *bad_hashes; i++) {
		hostile_init(&h);
		h.dg.hash = (char *)bad_hashes[i];
		buf = pack(&h.ar.base, &len);
		assert_result_corrupt(bad_hashes[i], buf, len);
		free(buf);
	}
	for (size_t i = 0; i < sizeof bad_paths / sizeof *bad_paths; i++) {
		hostile_init(&h);
		h.f.path = (char *)bad_paths[i];
		buf = pack(&h.ar.base, &len);
		assert_result_corrupt(bad_paths[i], buf, len);
		free(buf);
	}
	hostile_init(&h);
	h.dg.size_bytes = -1;
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("negative size", buf, len);
	free(buf);
	hostile_init(&h);
	h.f.digest = NULL;
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("no digest", buf, len);
	free(buf);
	hostile_init(&h);
	h.ar.n_output_files = 2; /* "out" twice */
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("duplicate output", buf, len);
	free(buf);
	hostile_init(&h);
	h.ar.exit_code = 1;
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("a failed run", buf, len);
	free(buf);
	hostile_init(&h);
	h.meta.worker = "bazel";
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("not kiln's", buf, len);
	free(buf);
	hostile_init(&h);
	build__bazel__remote__execution__v2__digest__init(&log);
	log.hash = "bad";
	h.ar.stdout_digest = &log;
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("a bad log digest", buf, len);
	free(buf);
	hostile_init(&h);
	h.ar.stdout_raw.len = 3;
	h.ar.stdout_raw.data = (uint8_t *)"abc";
	buf = pack(&h.ar.base, &len);
	assert_result_corrupt("inline stdout in a result", buf, len);
	free(buf);

	/* Hand-made bytes: an unknown field (3: output_directories, which kiln
	 * would ignore), a singular field twice, a NUL inside a path, not
	 * protobuf at all. Each is followed by the metadata kiln writes. */
#define META "\x4a\x06\x0a\x04kiln"
	static const struct {
		const char *what;
		const char *bytes;
		size_t len;
	} raw[] = {
		{"an output directory", "\x1a\x00" META, 2 + 8},
		{"exit_code twice", "\x20\x00\x20\x00" META, 4 + 8},
		{"garbage", "\xff\xff\xff\xff", 4},
		{"a length past the end", "\x12\x7f\x0a", 3},
	};
	for (size_t i = 0; i < sizeof raw / sizeof *raw; i++)
		assert_result_corrupt(raw[i].what, raw[i].bytes, raw[i].len);

	/* A NUL inside a path ("o\0/.."): C would read "o". */
	hostile_init(&h);
	h.f.path = "oX/..";
	buf = pack(&h.ar.base, &len);
	*(uint8_t *)memchr(buf, 'X', len) = '\0';
	assert_result_corrupt("a NUL in a path", buf, len);
	free(buf);

	/* Huge counts: 2 MiB of empty output files (two bytes each) stop at the
	 * decode budget or the count limit; one byte over the entry cap is
	 * refused unread. */
	len = KILN_CACHE_ENTRY_MAX;
	big = malloc(len + 1);
	assert_non_null(big);
	for (size_t i = 0; i + 1 < len; i += 2) {
		big[i] = 0x12;
		big[i + 1] = 0x00;
	}
	assert_result_corrupt("a million empty outputs", big, len);
	memset(big, 0, len + 1);
	assert_result_corrupt("past the entry cap", big, len + 1);
	free(big);
}

/* An index entry holding ix, packed. */
static uint8_t *
index_entry(Kiln__Cache__V1__Index *ix, size_t *len)
{
	rx_result ar = BUILD__BAZEL__REMOTE__EXECUTION__V2__ACTION_RESULT__INIT;
	rx_meta meta = BUILD__BAZEL__REMOTE__EXECUTION__V2__EXECUTED_ACTION_METADATA__INIT;
	uint8_t *raw, *buf;
	size_t nraw;

	raw = pack(&ix->base, &nraw);
	meta.worker = "kiln";
	ar.execution_metadata = &meta;
	ar.stdout_raw.data = raw;
	ar.stdout_raw.len = nraw;
	buf = pack(&ar.base, len);
	free(raw);
	return buf;
}

static void
hostile_index_entries_are_refused(void **state)
{
	enum { MANY = KILN_CACHE_FILES_MAX + 1 };
	Kiln__Cache__V1__Index ix = KILN__CACHE__V1__INDEX__INIT;
	Kiln__Cache__V1__Candidate cand = KILN__CACHE__V1__CANDIDATE__INIT, *pc[KILN_CACHE_CANDIDATES_MAX + 1];
	Kiln__Cache__V1__File f[2], **pf = calloc(MANY, sizeof *pf);
	Kiln__Cache__V1__Need nd = KILN__CACHE__V1__NEED__INIT, *pn[1] = {&nd};
	uint8_t sha[KILN_CACHE_SHA_LEN] = {0}, *buf;
	struct kiln_cache_index *d;
	size_t len;

	(void)state;
	assert_non_null(pf);
	for (int i = 0; i < 2; i++) {
		kiln__cache__v1__file__init(&f[i]);
		f[i].sha256.data = sha;
		f[i].sha256.len = sizeof sha;
	}
	f[0].path = "a.h";
	f[1].path = "b.h";
	pf[0] = &f[0];
	pf[1] = &f[1];
	cand.n_files = 2;
	cand.files = pf;
	for (int i = 0; i <= KILN_CACHE_CANDIDATES_MAX; i++)
		pc[i] = &cand;
	ix.version = 1;
	ix.n_candidates = 1;
	ix.candidates = pc;
	buf = index_entry(&ix, &len);
	assert_kiln(0, kiln_cache_index_decode(buf, len, &d)); /* the baseline */
	kiln_cache_index_free(d);
	free(buf);

#define REFUSE(what)                                                           \
	do {                                                                   \
		buf = index_entry(&ix, &len);                                  \
		assert_index_corrupt(what, buf, len);                          \
		free(buf);                                                     \
	} while (0)
	ix.version = 2;
	REFUSE("a newer version");
	ix.version = 1;
	ix.n_candidates = 0;
	REFUSE("no candidates");
	ix.n_candidates = 2;
	REFUSE("two candidates with the same conditions");
	ix.n_candidates = KILN_CACHE_CANDIDATES_MAX + 1;
	REFUSE("too many candidates");
	ix.n_candidates = 1;
	f[0].path = "c.h";
	REFUSE("files out of order");
	f[0].path = "b.h";
	REFUSE("a file twice");
	f[0].path = "/etc/../shadow";
	REFUSE("a .. in a discovered path");
	f[0].path = "a.h";
	f[0].sha256.len = 31;
	REFUSE("a 31-byte SHA-256");
	f[0].sha256.len = 32;
	nd.url = "u";
	nd.output = "out";
	cand.n_needs = 1;
	cand.needs = pn;
	REFUSE("a need without its SHA-256");
	cand.n_needs = 0;
	for (int i = 2; i < MANY; i++)
		pf[i] = &f[1];
	cand.n_files = MANY;
	REFUSE("more files than the limit");
	cand.n_files = 2;
	free(pf);
}

/* ---- independently of kiln's decoder ------------------------------------ */

/* protoc --decode_raw's reading of the len bytes at buf (NULL when protoc
 * is missing: the case is skipped). */
static char *
decode_raw(void **state, const uint8_t *buf, size_t len)
{
	const char *in = tu_path(state, "entry.bin"), *out = tu_path(state, "entry.txt");
	char cmd[1024], *text;
	FILE *fp;
	long n;

	if (system("command -v protoc >/dev/null 2>&1") != 0)
		return NULL;
	tu_write_file(in, buf, len);
	snprintf(cmd, sizeof cmd, "protoc --decode_raw <'%s' >'%s'", in, out);
	assert_int_equal(0, system(cmd));
	fp = fopen(out, "r");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal((size_t)n, fread(text, 1, (size_t)n, fp));
	fclose(fp);
	return text;
}

/* The numbers below are the real schema's (remote_execution.proto @
 * becdd8f9): ActionResult.output_files = 2, stdout_raw = 5, stdout_digest
 * = 6, execution_metadata = 9; OutputFile.path = 1, digest = 2,
 * is_executable = 4; Digest.hash = 1, size_bytes = 2;
 * ExecutedActionMetadata.worker = 1. */
static void
entries_parse_as_action_results_with_sha256_digests(void **state)
{
	struct kiln_cache_result r = sample_result();
	struct kiln_cache_candidate c = sample_candidate();
	static const char head[] = "5 {\n  1: 1\n  2 {\n", tail[] = "9 {\n  1: \"kiln\"\n}\n";
	char want[2048];
	uint8_t *buf;
	size_t len;
	char *text;

	assert_kiln(0, kiln_cache_result_encode(&r, &buf, &len));
	if ((text = decode_raw(state, buf, len)) == NULL) {
		free(buf);
		skip();
	}
	snprintf(want, sizeof want,
	         "2 {\n  1: \"out\"\n  2 {\n    1: \"%s\"\n    2: 5\n  }\n}\n"
	         "2 {\n  1: \"mips/1.png\"\n  2 {\n    1: \"%s\"\n  }\n  4: 1\n}\n"
	         "6 {\n  1: \"%s\"\n  2: 12\n}\n"
	         "9 {\n  1: \"kiln\"\n}\n",
	         hex_of(sample_outputs[0].blob.sha), hex_of(sample_outputs[1].blob.sha),
	         hex_of(r.log.sha));
	assert_string_equal(want, text);
	free(text);
	free(buf);

	/* The index: stdout_raw (5) holds the list, which decode_raw reads as a
	 * message too: version 1 (field 1), one candidate (field 2). Nothing
	 * at 2 (no outputs), and no digest anywhere. */
	assert_kiln(0, kiln_cache_index_encode(&c, 1, &buf, &len));
	text = decode_raw(state, buf, len);
	assert_non_null(text);
	if (strncmp(text, head, strlen(head)) != 0)
		fail_msg("index entry does not start with stdout_raw: %s", text);
	len = strlen(text);
	assert_true(len > strlen(head) + strlen(tail));
	assert_string_equal(tail, text + len - strlen(tail));
	free(text);
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keys_are_the_documented_sha256s),
		cmocka_unit_test(result_key_follows_conditions_only),
		cmocka_unit_test(hex_is_strict_lowercase),
		cmocka_unit_test(index_round_trips_in_canonical_order),
		cmocka_unit_test(result_round_trips),
		cmocka_unit_test(signed_entries_verify_only_with_their_key_and_ac_key),
		cmocka_unit_test(merge_puts_newest_first_replaces_its_twin_and_caps),
		cmocka_unit_test(merge_drops_the_oldest_to_fit_the_entry_cap),
		cmocka_unit_test(encoders_refuse_what_the_layout_forbids),
		cmocka_unit_test(truncated_entries_are_refused),
		cmocka_unit_test(hostile_result_entries_are_refused),
		cmocka_unit_test(hostile_index_entries_are_refused),
		cmocka_unit_test_setup_teardown(entries_parse_as_action_results_with_sha256_digests,
		                                tu_setup_dir, tu_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
