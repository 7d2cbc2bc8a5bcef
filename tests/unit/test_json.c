/*
 * test_json.c - unit tests of the JSON reader and writer (solvers/json.c):
 * every value type, escapes, error positions, depth limit, and round trips
 * of writer output through the reader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

static struct json_value *parse(const char *s, char *err, size_t n)
{
	return json_parse(s, strlen(s), err, n);
}

static void test_values(void **state)
{
	char err[128];
	struct json_value *v = parse(" {\"a\": [1, -2.5, 3e2, true, false, null],"
				     " \"s\": \"x\\ty\\u00e9\\ud83d\\ude00\", \"big\": 9007199254740993,"
				     " \"neg\": -0, \"e\": {}} ", err, sizeof(err));
	const struct json_value *a;
	int64_t i;

	assert_non_null(v);
	assert_int_equal(json_type(v), JSON_OBJECT);
	assert_int_equal(json_len(v), 5);
	assert_string_equal(json_key_at(v, 1), "s");
	a = json_get(v, "a");
	assert_int_equal(json_len(a), 6);
	assert_true(json_integer(json_at(a, 0), &i));
	assert_int_equal(i, 1);
	assert_false(json_integer(json_at(a, 1), &i));
	assert_true(json_number(json_at(a, 1)) == -2.5);
	assert_false(json_integer(json_at(a, 2), &i));
	assert_true(json_number(json_at(a, 2)) == 300.0);
	assert_true(json_bool(json_at(a, 3)));
	assert_int_equal(json_type(json_at(a, 4)), JSON_BOOL);
	assert_false(json_bool(json_at(a, 4)));
	assert_int_equal(json_type(json_at(a, 5)), JSON_NULL);
	assert_null(json_at(a, 6));
	assert_string_equal(json_string(json_get(v, "s")), "x\ty\xc3\xa9\xf0\x9f\x98\x80");
	assert_true(json_integer(json_get(v, "big"), &i));
	assert_int_equal(i, 9007199254740993LL);
	assert_int_equal(json_len(json_get(v, "e")), 0);
	/* Wrong-typed and missing look-ups are harmless. */
	assert_null(json_get(a, "x"));
	assert_null(json_get(v, "missing"));
	assert_null(json_string(a));
	assert_false(json_integer(NULL, &i));
	assert_string_equal(json_type_name(json_type(a)), "array");
	json_free(v);
}

static void test_errors(void **state)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
		{ "", "line 1, column 1: unexpected end of input" },
		{ "{\"a\": 1,\n  \"b\" 2}", "line 2, column 7: expected ':'" },
		{ "[1 2]", "line 1, column 4: expected ',' or ']'" },
		{ "{\"a\": 1", "expected ',' or '}'" },
		{ "\"abc", "unterminated string" },
		{ "01", "unexpected text after the value" },
		{ "1.", "invalid number" },
		{ "-", "invalid number" },
		{ "tru", "unexpected character 't'" },
		{ "\"\\x\"", "invalid escape" },
		{ "\"\\u0000\"", "invalid escape" },
		{ "\"\\ud800\"", "invalid escape" },
		{ "\"a\nb\"", "control character" },
		{ "{1: 2}", "expected a string key" },
		{ "[1] [2]", "unexpected text after the value" },
	};
	char err[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_null(parse(cases[i].text, err, sizeof(err)));
		if (!strstr(err, cases[i].msg))
			fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].msg);
	}
}

static void test_depth_limit(void **state)
{
	char err[128];
	size_t n = 300;
	char *deep = malloc(2 * n + 1);
	struct json_value *v;

	memset(deep, '[', n);
	memset(deep + n, ']', n);
	deep[2 * n] = '\0';
	assert_null(parse(deep, err, sizeof(err)));
	assert_non_null(strstr(err, "nesting deeper than 256"));
	deep[100] = '\0';
	memset(deep + 50, ']', 50);
	v = parse(deep, err, sizeof(err));
	assert_non_null(v);
	json_free(v);
	free(deep);
}

static void test_writer_round_trip(void **state)
{
	for (int pretty = 0; pretty < 2; pretty++) {
		struct json_writer *w = json_writer_new(pretty);
		struct json_value *v;
		const char *text;
		char err[128];
		size_t len;

		json_w_object_begin(w);
		json_w_key(w, "n");
		json_w_int(w, -42);
		json_w_key(w, "d");
		json_w_double(w, 2.5);
		json_w_key(w, "tiny");
		json_w_double(w, 0.000125);
		json_w_key(w, "inf");
		json_w_double(w, 1.0 / 0.0);
		json_w_key(w, "s\"q");
		json_w_string(w, "line\nnext\x01");
		json_w_key(w, "arr");
		json_w_array_begin(w);
		json_w_bool(w, true);
		json_w_null(w);
		json_w_array_begin(w);
		json_w_array_end(w);
		json_w_object_begin(w);
		json_w_object_end(w);
		json_w_array_end(w);
		json_w_object_end(w);
		text = json_writer_text(w, &len);
		assert_non_null(text);
		assert_int_equal(strlen(text), len);
		if (!pretty)
			assert_string_equal(text, "{\"n\":-42,\"d\":2.5,\"tiny\":0.000125,\"inf\":null,"
						  "\"s\\\"q\":\"line\\nnext\\u0001\","
						  "\"arr\":[true,null,[],{}]}");
		v = json_parse(text, len, err, sizeof(err));
		assert_non_null(v);
		assert_true(json_number(json_get(v, "d")) == 2.5);
		assert_string_equal(json_string(json_get(v, "s\"q")), "line\nnext\x01");
		assert_int_equal(json_len(json_get(v, "arr")), 4);
		json_free(v);
		json_writer_free(w);
	}
	json_writer_free(NULL);
	json_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_writer_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
