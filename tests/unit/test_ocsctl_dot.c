/*
 * test_ocsctl_dot.c - the DOT quoting of `ocsctl topology`
 * (northbound/ocsctl/ocsctl_dot.c): ids and labels with quotes,
 * backslashes, newlines and control bytes come out as one valid DOT
 * string, and the job colours are distinct before they repeat.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ocsctl_dot.h"

/* dot_quoted(s) as a string; caller frees. */
static char *quoted(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	dot_quoted(f, s);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void expect_quoted(const char *in, const char *want)
{
	char *got = quoted(in);

	assert_string_equal(got, want);
	free(got);
}

static void test_plain(void **state)
{
	(void)state;
	expect_quoted("pod 3", "\"pod 3\"");
	expect_quoted("", "\"\"");
	expect_quoted(NULL, "\"\"");
	expect_quoted("ocs-g0-d1.x_y", "\"ocs-g0-d1.x_y\"");
}

static void test_quote_and_backslash(void **state)
{
	(void)state;
	expect_quoted("a\"b", "\"a\\\"b\"");
	expect_quoted("a\\b", "\"a\\\\b\"");
	/* a trailing backslash must not escape the closing quote */
	expect_quoted("job\\", "\"job\\\\\"");
	expect_quoted("\"\\\"", "\"\\\"\\\\\\\"\"");
}

static void test_newline_and_control(void **state)
{
	(void)state;
	expect_quoted("job a\ng0", "\"job a\\ng0\"");
	expect_quoted("a\tb\rc\x7f", "\"a?b?c?\"");
	/* UTF-8 passes through as it is */
	expect_quoted("n\xc3\xb8"
		      "de",
		      "\"n\xc3\xb8"
		      "de\"");
}

/* Every string dot_quoted writes scans as one DOT string: it opens and
 * closes with a quote and no quote inside is unescaped. */
static void test_scans_as_one_string(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 2000; seed++) {
		char in[24], *out;
		size_t n = seed % 23, i;
		unsigned x = seed * 2654435761u;

		for (i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			in[i] = (char)(1 + (x >> 16) % 127); /* any byte but NUL */
		}
		in[n] = '\0';
		out = quoted(in);
		assert_true(out[0] == '"');
		for (i = 1; out[i] && out[i] != '"'; i++)
			if (out[i] == '\\') {
				i++;
				assert_true(out[i] == '"' || out[i] == '\\' || out[i] == 'n');
			}
		assert_true(out[i] == '"' && out[i + 1] == '\0');
		free(out);
	}
}

static void test_job_colours(void **state)
{
	size_t n = dot_palette_size();

	(void)state;
	assert_true(n >= 8);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(dot_job_colour(i), dot_job_colour(j));
		assert_string_equal(dot_job_colour(i), dot_job_colour(i + n));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_quote_and_backslash),
		cmocka_unit_test(test_newline_and_control),
		cmocka_unit_test(test_scans_as_one_string),
		cmocka_unit_test(test_job_colours),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
