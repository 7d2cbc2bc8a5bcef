/*
 * ocs_json.c - the shared JSON conventions of ocsd's tools (see ocs_json.h).
 *
 * jansson refuses a repeated key (JSON_REJECT_DUPLICATES) but reports only
 * the line and column; name_duplicate() works out the path of the object
 * from the bytes jansson had read (see there). jansson does all the parsing.
 */
#include "ocs_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One open container while walking the text: where its part of the path starts. */
struct level {
	bool object;
	bool expect_key; /* object: the next string is a key */
	size_t index;	 /* array: the element being read */
	size_t base;	 /* path length before this container's own part */
};

/* The index just past the string whose opening quote is text[i] (complete by then). */
static size_t string_end(const char *text, size_t i, size_t end)
{
	for (i++; i < end && text[i] != '"'; i++)
		if (text[i] == '\\')
			i++;
	return i + 1;
}

/* Sets the path to base, then ".key" (or "key" at the start) or "[index]". */
static bool path_set(char *path, size_t size, size_t base, const char *key, size_t index)
{
	int w = key ? snprintf(path + base, size - base, "%s%s", base ? "." : "", key)
		    : snprintf(path + base, size - base, "[%zu]", index);

	return w >= 0 && (size_t)w < size - base;
}

/*
 * Fills err for a key jansson refused as repeated (je): the path of the
 * object holding it and `duplicate key "k"`; where that cannot be worked
 * out (memory, a path longer than err->path) the line and column instead.
 *
 * jansson stops right after the key (its closing quote is the byte before
 * je->position) and has read every byte before it as valid JSON, so a walk
 * over those bytes that only skips strings and follows brackets, commas and
 * keys knows where it is: the repeated key is the string that ends there.
 */
static void name_duplicate(const char *text, size_t len, const json_error_t *je,
			   struct ocs_json_error *err)
{
	size_t end = je->position > 0 && (size_t)je->position <= len ? (size_t)je->position : 0;
	struct level *stack = calloc(JSON_PARSER_MAX_DEPTH + 1, sizeof(*stack));
	json_t *key = NULL;
	size_t depth = 0;
	bool ok = stack != NULL;

	err->duplicate_key = true;
	err->path[0] = '\0';
	for (size_t i = 0; ok && i < end; i++) {
		struct level *top = depth ? &stack[depth - 1] : NULL;
		char c = text[i];

		if (c == '"') {
			size_t j = string_end(text, i, end);

			if (top && top->object && top->expect_key) {
				json_t *k = json_loadb(text + i, j - i, JSON_DECODE_ANY, NULL);

				top->expect_key = false;
				/* The repeated key: the path is its object's (below). */
				if (j == end) {
					key = k;
					break;
				}
				ok = json_is_string(k) &&
				     path_set(err->path, sizeof(err->path), top->base,
					      json_string_value(k), 0);
				json_decref(k);
			}
			i = j - 1;
		} else if ((c == '{' || c == '[') && depth <= JSON_PARSER_MAX_DEPTH) {
			stack[depth++] = (struct level){c == '{', c == '{', 0, strlen(err->path)};
			if (c == '[')
				ok = path_set(err->path, sizeof(err->path), stack[depth - 1].base,
					      NULL, 0);
		} else if ((c == '}' || c == ']') && top) {
			err->path[top->base] = '\0';
			depth--;
		} else if (c == ',' && top && top->object) {
			top->expect_key = true;
		} else if (c == ',' && top) {
			ok = path_set(err->path, sizeof(err->path), top->base, NULL, ++top->index);
		}
	}
	if (ok && json_is_string(key)) {
		err->path[depth ? stack[depth - 1].base : 0] = '\0';
		snprintf(err->message, sizeof(err->message), "duplicate key \"%s\"",
			 json_string_value(key));
	} else {
		err->path[0] = '\0';
		snprintf(err->message, sizeof(err->message), "line %d, column %d: %s", je->line,
			 je->column, je->text);
	}
	json_decref(key);
	free(stack);
}

json_t *ocs_json_parse(const char *text, size_t len, struct ocs_json_error *err)
{
	json_error_t je;
	json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);

	if (v)
		return v;
	if (json_error_code(&je) == json_error_duplicate_key) {
		name_duplicate(text, len, &je, err);
		return NULL;
	}
	err->duplicate_key = false;
	err->path[0] = '\0';
	if (je.line > 0)
		snprintf(err->message, sizeof(err->message), "line %d, column %d: %s", je.line,
			 je.column, je.text);
	else
		snprintf(err->message, sizeof(err->message), "%s", je.text);
	return NULL;
}

json_t *ocs_json_number(double v)
{
	char buf[64];
	double r;

	if (!isfinite(v))
		return json_null();
	/* "%.6f" rounds the exact binary value, as the tools always printed it. */
	snprintf(buf, sizeof(buf), fabs(v) < 1e15 ? "%.6f" : "%.17g", v);
	r = strtod(buf, NULL);
	if (r == trunc(r) && fabs(r) < 9007199254740992.0)
		return json_integer((json_int_t)r);
	return json_real(r);
}

char *ocs_json_dumps(const json_t *v, bool pretty)
{
	return json_dumps(v, JSON_REAL_PRECISION(15) | (pretty ? JSON_INDENT(2) : JSON_COMPACT));
}

const char *ocs_json_type_name(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		break;
	}
	return v ? "null" : "missing";
}
