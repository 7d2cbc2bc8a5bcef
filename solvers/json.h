/*
 * json.h - a small JSON reader and writer for the offline tools (ocsplan)
 * and tests. No dependencies beyond libc, no I/O: text in, tree out; tree or
 * writer calls in, text out.
 *
 * Reader: json_parse() builds an immutable tree that the caller frees with
 * json_free(). Accessors accept NULL and wrong-typed values and then return
 * NULL / 0 / false, so callers can chain look-ups and check once. Numbers are
 * kept as double and as an exact int64 when the literal is an integer.
 * Limits (bounded input from untrusted files): nesting depth 256.
 *
 * Writer: appends to a growing buffer; commas and (optional) indentation are
 * inserted automatically. Inside an object, call json_w_key() before each
 * value.
 *
 * Thread-safety: no shared state; distinct trees and writers may be used
 * from different threads.
 */
#ifndef OCS_JSON_H
#define OCS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_value;

/*
 * Parses `len` bytes of UTF-8 JSON text (one value, surrounded only by white
 * space). Returns the tree, or NULL with a message in err such as
 * "line 3, column 14: expected ',' or '}'". Caller frees with json_free().
 */
struct json_value *json_parse(const char *text, size_t len, char *err, size_t err_len);
void json_free(struct json_value *v);

enum json_type json_type(const struct json_value *v);
/* "null", "boolean", "number", "string", "array", "object". */
const char *json_type_name(enum json_type t);
/* Member of an object by key; NULL when absent or v is not an object. */
const struct json_value *json_get(const struct json_value *v, const char *key);
/* Number of elements of an array or members of an object; 0 otherwise. */
size_t json_len(const struct json_value *v);
/* i-th element of an array, or i-th member value of an object. */
const struct json_value *json_at(const struct json_value *v, size_t i);
/* i-th member key of an object (in document order); NULL otherwise. */
const char *json_key_at(const struct json_value *v, size_t i);
double json_number(const struct json_value *v);
/* True when v is a number whose literal is an integer fitting int64. */
bool json_integer(const struct json_value *v, int64_t *out);
const char *json_string(const struct json_value *v); /* NUL-terminated */
bool json_bool(const struct json_value *v);

struct json_writer;

struct json_writer *json_writer_new(bool pretty);
void json_writer_free(struct json_writer *w);
void json_w_object_begin(struct json_writer *w);
void json_w_object_end(struct json_writer *w);
void json_w_array_begin(struct json_writer *w);
void json_w_array_end(struct json_writer *w);
void json_w_key(struct json_writer *w, const char *key);
void json_w_int(struct json_writer *w, int64_t v);
/* Finite values with 6 decimals, trailing zeros trimmed; NaN/inf write null. */
void json_w_double(struct json_writer *w, double v);
void json_w_string(struct json_writer *w, const char *s);
void json_w_bool(struct json_writer *w, bool v);
void json_w_null(struct json_writer *w);
/*
 * The text written so far (NUL-terminated, owned by the writer). Returns
 * NULL if an allocation failed at any point.
 */
const char *json_writer_text(const struct json_writer *w, size_t *len);

#endif
