/*
 * ocs_json.c - the shared JSON conventions of ocsd's tools (see ocs_json.h).
 *
 * jansson refuses a repeated key (JSON_REJECT_DUPLICATES) but reports only
 * the line and column. To name the object that holds it, the repeated key
 * is renamed in a copy of the text to a marker no document uses, the copy
 * is parsed with repeats allowed, and the tree is searched for the marker:
 * the path to it is the path of the object. jansson does all the parsing;
 * this file only finds where the key starts.
 */
#include "ocs_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON escapes in the renamed text; they decode to MARKER_KEY. */
#define MARKER_TEXT "\\u0001ocs-json-duplicate-key\\u0001"
#define MARKER_KEY  "\001ocs-json-duplicate-key\001"

/* Appends ".key" (or "key" at the start) or "[i]" to path; false when it does not fit. */
static bool path_push(char *path, size_t size, const char *key, size_t index)
{
	size_t n = strlen(path);
	int w = key ? snprintf(path + n, size - n, "%s%s", n ? "." : "", key)
		    : snprintf(path + n, size - n, "[%zu]", index);

	return w >= 0 && (size_t)w < size - n;
}

/* Depth-first search for the object holding MARKER_KEY; its path goes into path. */
static bool find_marker(const json_t *v, char *path, size_t size)
{
	size_t n = strlen(path), i;
	const char *key;
	json_t *child;

	if (json_is_object(v)) {
		if (json_object_get(v, MARKER_KEY))
			return true;
		json_object_foreach((json_t *)v, key, child)
		{
			if (path_push(path, size, key, 0) && find_marker(child, path, size))
				return true;
			path[n] = '\0';
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, child)
		{
			if (path_push(path, size, NULL, i) && find_marker(child, path, size))
				return true;
			path[n] = '\0';
		}
	}
	return false;
}

/*
 * The opening quote of the string whose closing quote is text[close]: the
 * nearest quote before it that no backslash escapes. False when none.
 */
static bool opening_quote(const char *text, size_t close, size_t *open)
{
	for (size_t i = close; i-- > 0;) {
		size_t backslashes = 0;

		if (text[i] != '"')
			continue;
		while (backslashes < i && text[i - 1 - backslashes] == '\\')
			backslashes++;
		if (backslashes % 2 == 0) {
			*open = i;
			return true;
		}
	}
	return false;
}

/*
 * Fills err for a key jansson refused as repeated (je): the path of its
 * object and `duplicate key "k"`; where the path cannot be worked out (the
 * text is broken further on, or memory ran out) the line and column
 * instead. The key ends just before byte je->position: its closing quote is
 * text[je->position - 1].
 */
static void name_duplicate(const char *text, size_t len, const json_error_t *je,
			   struct ocs_json_error *err)
{
	size_t end = je->position > 0 ? (size_t)je->position : 0, open = 0;
	size_t n_marker = strlen(MARKER_TEXT);
	json_t *key = NULL, *tree = NULL;
	char *copy = NULL;
	bool named;

	if (end >= 2 && end <= len && text[end - 1] == '"' && opening_quote(text, end - 1, &open))
		key = json_loadb(text + open, end - open, JSON_DECODE_ANY, NULL);
	if (json_is_string(key))
		copy = malloc(len - (end - open) + n_marker + 2);
	if (copy) {
		size_t n = open + 1;

		memcpy(copy, text, n);
		memcpy(copy + n, MARKER_TEXT, n_marker);
		n += n_marker;
		memcpy(copy + n, text + end - 1, len - (end - 1));
		n += len - (end - 1);
		/* Parsed with repeats allowed: the marker is the only new key. */
		tree = json_loadb(copy, n, JSON_DECODE_ANY, NULL);
	}
	err->duplicate_key = true;
	err->path[0] = '\0';
	named = tree && find_marker(tree, err->path, sizeof(err->path));
	if (named)
		snprintf(err->message, sizeof(err->message), "duplicate key \"%s\"",
			 json_string_value(key));
	else if (json_is_string(key))
		snprintf(err->message, sizeof(err->message),
			 "line %d, column %d: duplicate key \"%s\"", je->line, je->column,
			 json_string_value(key));
	else
		snprintf(err->message, sizeof(err->message), "line %d, column %d: %s", je->line,
			 je->column, je->text);
	if (!named)
		err->path[0] = '\0';
	json_decref(tree);
	free(copy);
	json_decref(key);
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
