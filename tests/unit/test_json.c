/* test_json — JSON output (common/json.c, proto/json.c): text that is not
 * UTF-8 becomes U+FFFD with a "<field>_replaced" flag and always parses;
 * valid text passes unchanged; wire messages keep kiln.proto's names. */
#include <stdlib.h>
#include <string.h>

#include "kiln_json.h"
#include "kiln_proto.h"
#include "testutil.h"

/* o[key] as a string, and whether o has key "_replaced". */
static const char *
text_of(json_t *o, const char *key, int *flag)
{
	char name[64];

	snprintf(name, sizeof name, "%s_replaced", key);
	*flag = json_object_get(o, name) == json_true();
	return json_string_value(json_object_get(o, key));
}

static void
text_is_valid_utf8_or_replaced_and_flagged(void **state)
{
	static const struct {
		const char *name, *in, *out;
		int flagged;
	} cases[] = {
		{"ascii", "sprites/hero", "sprites/hero", 0},
		{"empty", "", "", 0},
		{"two-byte é", "caf\xc3\xa9", "caf\xc3\xa9", 0},
		{"four-byte emoji", "a\xf0\x9f\x98\x80", "a\xf0\x9f\x98\x80", 0},
		{"a lone 0xff", "b\xff" "d", "b\xef\xbf\xbd" "d", 1},
		{"a truncated sequence at the end", "x\xc3", "x\xef\xbf\xbd", 1},
		{"an overlong slash", "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd", 1},
		{"a surrogate", "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 1},
		{"past U+10FFFF", "\xf4\x90\x80\x80",
		 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 1},
		{"a continuation byte alone", "\x80z", "\xef\xbf\xbdz", 1},
		{"a quote and a control character", "a\"\n", "a\"\n", 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *o = json_object(), *back;
		json_error_t jerr;
		char *text;
		int flag;
		assert_int_equal(kiln_json_text(o, "url", cases[i].in), 0);
		text = kiln_json_dumps(json_incref(o));
		assert_non_null(text);
		if ((back = json_loads(text, 0, &jerr)) == NULL)
			fail_msg("%s: the output does not parse: %s (%s)", cases[i].name,
			         text, jerr.text);
		if (strcmp(text_of(back, "url", &flag), cases[i].out) != 0)
			fail_msg("%s: got %s", cases[i].name, text);
		if (flag != cases[i].flagged)
			fail_msg("%s: url_replaced %s", cases[i].name, flag ? "set" : "missing");
		json_decref(back);
		json_decref(o);
		free(text);
	}
}

static void
a_list_is_flagged_once_when_any_element_was_replaced(void **state)
{
	const char *const paths[] = {"ok.txt", "b\xff.txt", "c\xfe.txt"};
	json_t *o = json_object();
	int flag;

	(void)state;
	assert_int_equal(kiln_json_texts(o, "paths", paths, 3), 0);
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "paths"), 0)),
	                    "ok.txt");
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "paths"), 1)),
	                    "b\xef\xbf\xbd.txt");
	text_of(o, "paths", &flag);
	assert_true(flag);
	assert_int_equal(kiln_json_texts(o, "fine", paths, 1), 0);
	text_of(o, "fine", &flag);
	assert_false(flag);
	json_decref(o);
}

static void
a_wire_event_keeps_the_schemas_names(void **state)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__StepEvent s = KILN__STEP_EVENT__INIT;
	Kiln__StepOutput out = KILN__STEP_OUTPUT__INIT, *outs[] = {&out};
	uint8_t id[16] = {0xab, 0xcd};
	uint64_t builds[] = {7};
	json_t *o, *step;
	int err = 0, flag;

	(void)state;
	e.seq = 42;
	e.time_ns = (int64_t)1 << 60;            /* past 2^53: a string */
	e.kind_case = KILN__EVENT__KIND_STEP;
	e.step = &s;
	s.url = "b\xff";
	s.profile = "pc";
	s.result = KILN__STEP_EVENT__RESULT__FAILED;
	s.n_builds = 1;
	s.builds = builds;
	s.n_outputs = 1;
	s.outputs = outs;
	out.name = "out";
	out.id.data = id;
	out.id.len = sizeof id;
	out.path = "build/pc/b";
	o = kiln_proto_json(&e.base, &err);
	assert_int_equal(err, 0);
	assert_int_equal(json_integer_value(json_object_get(o, "seq")), 42);
	assert_string_equal(json_string_value(json_object_get(o, "time_ns")),
	                    "1152921504606846976");
	/* the oneof: only the member set */
	assert_null(json_object_get(o, "overflow"));
	step = json_object_get(o, "step");
	assert_string_equal(json_string_value(json_object_get(step, "result")), "FAILED");
	assert_string_equal(text_of(step, "url", &flag), "b\xef\xbf\xbd");
	assert_true(flag);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(step, "builds"), 0)), 7);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(step, "outputs"), 0), "id")),
		"abcd0000000000000000000000000000");
	json_decref(o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_is_valid_utf8_or_replaced_and_flagged),
		cmocka_unit_test(a_list_is_flagged_once_when_any_element_was_replaced),
		cmocka_unit_test(a_wire_event_keeps_the_schemas_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
