/*
 * ocs_json.h - the JSON conventions shared by ocsd's command-line tools
 * (ocsplan in solvers/ocsplan, ocsctl in northbound/ocsctl), on top of
 * jansson: reading a document with duplicate keys refused by path, numbers
 * written at a fixed precision, and compact or indented text.
 *
 * It lives outside solvers/ and northbound/ so that both tools share it
 * without either folder depending on the other; it depends on libc, libm
 * and jansson only.
 *
 * Thread-safety: no shared state; distinct values may be used from
 * different threads (jansson's own rules apply to one value).
 */
#ifndef OCS_JSON_H
#define OCS_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Why a text was refused by ocs_json_parse(). */
struct ocs_json_error {
	/*
	 * true: an object repeats a key; path names that object ("placement",
	 * "demand[2]", "" at the top level) and message is `duplicate key
	 * "gpus"` (path "" and a message with line and column when the path
	 * does not fit or memory ran out). false: the text is not JSON (or
	 * memory ran out); path is "" and message says where, "line 1,
	 * column 12: string or '}' expected near end of file".
	 */
	bool duplicate_key;
	char path[256];
	char message[256];
};

/*
 * Parses len bytes of UTF-8 JSON text: one value of any type, surrounded
 * only by white space; an object with the same key twice is refused.
 * Returns a new reference (caller json_decref()s it) or NULL with err set.
 */
json_t *ocs_json_parse(const char *text, size_t len, struct ocs_json_error *err);

/*
 * v as a JSON number at the tools' precision: finite values are rounded
 * to 6 decimals (absolute); a result that is a whole number below 2^53 in
 * magnitude becomes a JSON integer ("17", "0"), any other stays a real
 * and is written with at most 15 significant digits ("2.5", "0.000125",
 * "5e-5"). Below 1e9 in magnitude that is every one of the 6 decimals.
 * NaN and infinities become null. Returns a new reference, NULL when out
 * of memory.
 */
json_t *ocs_json_number(double v);

/*
 * The text of v: compact ({"a":1,"b":[]}) or indented by two spaces with
 * "key": value, object members in insertion order, reals as
 * ocs_json_number() describes. Returns a malloc'd NUL-terminated string
 * (caller free()s it), NULL when out of memory or a string is not UTF-8.
 */
char *ocs_json_dumps(const json_t *v, bool pretty);

/* "null", "boolean", "number", "string", "array" or "object"; "missing" for NULL. */
const char *ocs_json_type_name(const json_t *v);

#endif
