/*
 * test_ocs_json.c - unit tests of the JSON conventions the tools share
 * (common/ocs_json.c): any value parses, syntax errors name line and
 * column, repeated keys are refused with the path of their object (nested
 * objects and arrays, escaped and non-ASCII keys, the top level; and 3,000
 * random documents, where the path must lead to an object that holds the
 * key), and numbers are written at 6 decimals with whole numbers as
 * integers.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ocs_json.h"

static json_t *parse(const char *text, struct ocs_json_error *err)
{
	return ocs_json_parse(text, strlen(text), err);
}

static void test_values(void **state)
{
	struct ocs_json_error err;
	json_t *v = parse(" {\"a\": [1, -2.5, true, null], \"s\": \"x\\u00e9\","
			  " \"big\": 9007199254740993} ",
			  &err);
	json_t *a;

	(void)state;
	assert_non_null(v);
	a = json_object_get(v, "a");
	assert_int_equal(json_integer_value(json_array_get(a, 0)), 1);
	assert_true(json_real_value(json_array_get(a, 1)) == -2.5);
	assert_int_equal(json_integer_value(json_object_get(v, "big")), 9007199254740993LL);
	assert_string_equal(json_string_value(json_object_get(v, "s")), "x\xc3\xa9");
	assert_string_equal(ocs_json_type_name(a), "array");
	assert_string_equal(ocs_json_type_name(json_array_get(a, 1)), "number");
	assert_string_equal(ocs_json_type_name(json_array_get(a, 2)), "boolean");
	assert_string_equal(ocs_json_type_name(json_array_get(a, 3)), "null");
	assert_string_equal(ocs_json_type_name(json_object_get(v, "none")), "missing");
	json_decref(v);
	/* Any value at the top, so that callers can say "must be an object". */
	v = parse("5", &err);
	assert_true(json_is_integer(v));
	json_decref(v);
}

static void test_syntax_errors(void **state)
{
	struct ocs_json_error err;

	(void)state;
	assert_null(parse("{\"fabric\": {", &err));
	assert_false(err.duplicate_key);
	assert_string_equal(err.path, "");
	assert_non_null(strstr(err.message, "line 1, column 12: "));
	assert_null(parse("{\"a\": 1,\n \"b\": tru}", &err));
	assert_non_null(strstr(err.message, "line 2, column "));
	assert_null(parse("{\"a\": 1} x", &err));
	assert_false(err.duplicate_key);
	assert_null(parse("", &err));
	assert_false(err.duplicate_key);
}

static void test_duplicate_keys(void **state)
{
	static const struct {
		const char *text;
		const char *path;
		const char *key;
	} cases[] = {
		{"{\"a\": 1, \"a\": 2}", "", "a"},
		{"{\"job\": {\"placement\": {\"gpus\": [], \"pods\": 1, \"gpus\": []}}}",
		 "job.placement", "gpus"},
		{"[{}, {\"x\": [0, {\"k\": 1, \"k\": 1}]}]", "[1].x[1]", "k"},
		/* The same key in sibling objects is fine; the repeat is in the second. */
		{"{\"d\": [{\"a\": 1, \"b\": 2}, {\"a\": 1, \"b\": 2, \"a\": 3}]}", "d[1]", "a"},
		/* Escaped quotes and backslashes in the repeated key. */
		{"{\"o\": {\"q\\\"\\\\\": 1, \"q\\\"\\\\\": 2}}", "o", "q\"\\"},
		/* Non-ASCII text before it and a key spelled with an escape. */
		{"{\"\xc3\xa9t\xc3\xa9\": {\"n\": 1, \"\\u006e\": 2}}", "\xc3\xa9t\xc3\xa9", "n"},
	};
	struct ocs_json_error err;
	char message[64], long_text[400];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_null(parse(cases[i].text, &err));
		assert_true(err.duplicate_key);
		assert_string_equal(err.path, cases[i].path);
		snprintf(message, sizeof(message), "duplicate key \"%s\"", cases[i].key);
		assert_string_equal(err.message, message);
	}
	/* Broken text after the repeat: jansson stopped before it, the path is known. */
	assert_null(parse("{\"o\": {\"a\": 1,\n \"a\": 2, ]", &err));
	assert_true(err.duplicate_key);
	assert_string_equal(err.path, "o");
	assert_string_equal(err.message, "duplicate key \"a\"");
	/* A path longer than err.path holds: line and column instead. */
	snprintf(long_text, sizeof(long_text), "{\"%0300d\": {\"a\": 1, \"a\": 2}}", 0);
	assert_null(parse(long_text, &err));
	assert_true(err.duplicate_key);
	assert_string_equal(err.path, "");
	assert_string_equal(err.message, "line 1, column 317: duplicate object key near '\"a\"'");
}

/*
 * A random document: its text, and the first key an object repeats (in
 * text order, where jansson stops) with that object's path.
 */
struct gen {
	char text[8192];
	size_t len;
	unsigned seed;
	bool repeated;
	char path[256];
	char key[16];
};

static void emit(struct gen *g, const char *s)
{
	size_t n = strlen(s);

	assert_true(g->len + n < sizeof(g->text));
	memcpy(g->text + g->len, s, n + 1);
	g->len += n;
}

/* Keys spelled in the text and as decoded; two spellings of "n". */
static const char *const key_text[] = {"a", "b", "q\\\"", "\\u00e9", "n", "\\u006e"};
static const char *const key_value[] = {"a", "b", "q\"", "\xc3\xa9", "n", "n"};

/* One value at path (its own path, as ocs_json_parse() spells paths). */
static void gen_value(struct gen *g, const char *path, int depth)
{
	unsigned kind = depth > 3 ? 0 : (unsigned)rand_r(&g->seed) % 4;
	unsigned n = (unsigned)rand_r(&g->seed) % 4;
	const char *used[4];
	char child[256];

	if (kind <= 1) {
		emit(g, kind ? "\"s\"" : "1.5");
		return;
	}
	emit(g, kind == 2 ? "[" : "{");
	for (unsigned i = 0; i < n; i++) {
		if (i)
			emit(g, ", ");
		if (kind == 2) {
			assert_true(snprintf(child, sizeof(child), "%s[%u]", path, i) <
				    (int)sizeof(child));
		} else {
			unsigned k = (unsigned)rand_r(&g->seed) % 6;

			used[i] = key_value[k];
			for (unsigned j = 0; j < i && !g->repeated; j++) {
				if (strcmp(used[j], used[i]) != 0)
					continue;
				g->repeated = true;
				snprintf(g->path, sizeof(g->path), "%s", path);
				snprintf(g->key, sizeof(g->key), "%s", used[i]);
			}
			emit(g, "\"");
			emit(g, key_text[k]);
			emit(g, "\": ");
			assert_true(snprintf(child, sizeof(child), "%s%s%s", path,
					     path[0] ? "." : "", used[i]) < (int)sizeof(child));
		}
		gen_value(g, child, depth + 1);
	}
	emit(g, kind == 2 ? "]" : "}");
}

static void test_random_documents(void **state)
{
	int refused = 0;

	(void)state;
	for (unsigned seed = 1; seed <= 3000; seed++) {
		struct gen g = {.seed = seed};
		struct ocs_json_error err;
		char message[64];
		json_t *v;

		gen_value(&g, "", 0);
		v = ocs_json_parse(g.text, g.len, &err);
		if (!g.repeated) {
			if (!v)
				fail_msg("%s: refused: %s: %s", g.text, err.path, err.message);
			json_decref(v);
			continue;
		}
		if (v || !err.duplicate_key)
			fail_msg("%s: repeated key not refused", g.text);
		snprintf(message, sizeof(message), "duplicate key \"%s\"", g.key);
		if (strcmp(err.path, g.path) != 0 || strcmp(err.message, message) != 0)
			fail_msg("%s: got '%s: %s', want '%s: %s'", g.text, err.path, err.message,
				 g.path, message);
		refused++;
	}
	assert_true(refused > 300);
}

/* The text ocs_json_dumps() gives for one number. */
static void expect_number(double v, const char *text)
{
	json_t *arr = json_array();
	char *out, want[64];

	assert_int_equal(json_array_append_new(arr, ocs_json_number(v)), 0);
	out = ocs_json_dumps(arr, false);
	snprintf(want, sizeof(want), "[%s]", text);
	assert_string_equal(out, want);
	free(out);
	json_decref(arr);
}

static void test_numbers(void **state)
{
	(void)state;
	expect_number(17.0, "17");
	expect_number(-0.0, "0");
	expect_number(2.5, "2.5");
	expect_number(0.000125, "0.000125");
	expect_number(1.0 / 3.0, "0.333333");
	expect_number(2.0 / 3.0, "0.666667");
	expect_number(0.0000004, "0");
	expect_number(0.0000006, "1e-6");
	expect_number(-1234.5678904, "-1234.56789");
	expect_number(123456789.123456, "123456789.123456");
	expect_number(0.45, "0.45");
	expect_number(1e15, "1000000000000000");
	expect_number(1e300, "1e300");
	expect_number(NAN, "null");
	expect_number(INFINITY, "null");
}

static void test_dumps(void **state)
{
	json_t *v = json_pack("{s:i, s:[], s:{s:o}}", "a", 1, "e", "o", "x", ocs_json_number(0.5));
	char *text;

	(void)state;
	text = ocs_json_dumps(v, false);
	assert_string_equal(text, "{\"a\":1,\"e\":[],\"o\":{\"x\":0.5}}");
	free(text);
	text = ocs_json_dumps(v, true);
	assert_string_equal(text,
			    "{\n  \"a\": 1,\n  \"e\": [],\n  \"o\": {\n    \"x\": 0.5\n  }\n}");
	free(text);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),	       cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_duplicate_keys), cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_dumps),	       cmocka_unit_test(test_random_documents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
