/*
 * io.h - what every ocsplan subcommand shares: reading the request (--in
 * FILE or stdin), writing the answer (--out FILE or stdout), the exit codes,
 * collecting problems as "field: reason" lines on stderr, and typed field
 * look-ups on the JSON tree (jansson, through common/ocs_json.h) that name
 * the field when they fail.
 *
 * Contract for every subcommand: on success the JSON answer goes to the
 * output and the exit code is OCSPLAN_EXIT_OK; invalid input prints one line
 * per problem on stderr, nothing on stdout, and exits OCSPLAN_EXIT_INVALID;
 * I/O or memory failures exit OCSPLAN_EXIT_FAILURE.
 *
 * Single-threaded tool: nothing here is meant for concurrent use.
 */
#ifndef OCSPLAN_IO_H
#define OCSPLAN_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ocs_json.h"

enum {
	OCSPLAN_EXIT_OK = 0,
	OCSPLAN_EXIT_FAILURE = 1, /* could not read, write or allocate */
	OCSPLAN_EXIT_INVALID = 2, /* bad usage or bad input */
};

/* Options every subcommand accepts. */
struct ocsplan_io {
	const char *in_path;  /* NULL = stdin */
	const char *out_path; /* NULL = stdout */
	bool pretty;
};

/* Problems found so far (printed to stderr as "field: reason"). */
struct ocsplan_problems {
	int count;
};

void ocsplan_problem(struct ocsplan_problems *p, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Handles one shared option at argv[*i] (--in FILE, --out FILE, --pretty),
 * advancing *i past its value. Returns 1 when it consumed the option, 0 when
 * the option is not a shared one, -1 (problem recorded) when its value is
 * missing.
 */
int ocsplan_io_option(struct ocsplan_io *io, int argc, char **argv, int *i,
		      struct ocsplan_problems *p);

/*
 * Reads and parses the request. Returns the tree (caller json_decref()s
 * it), or NULL with *exit_code set: OCSPLAN_EXIT_FAILURE when the input
 * cannot be read, OCSPLAN_EXIT_INVALID (problem printed) when it is not
 * JSON ("input: malformed JSON: line 1, column 12: ...") or an object
 * repeats a key ("demand[2]: duplicate key \"links\"", "input: ..." at the
 * top level).
 */
json_t *ocsplan_read_json(const struct ocsplan_io *io, struct ocsplan_problems *p, int *exit_code);

/*
 * The two steps of ocsplan_read_json(), for a subcommand that opens its
 * input with messages of its own (delta.c). ocsplan_slurp() reads fp to
 * its end: the text (caller frees) and its length, or NULL on a read error
 * or out of memory. ocsplan_parse_json() parses text (left to the caller)
 * and reports malformed JSON or a repeated key as ocsplan_read_json() does.
 */
char *ocsplan_slurp(FILE *fp, size_t *len);
json_t *ocsplan_parse_json(const char *text, size_t len, struct ocsplan_problems *p,
			   int *exit_code);

/*
 * Writes the answer and a newline to the output (compact, or indented with
 * --pretty; numbers at the precision of ocs_json_number()). answer NULL
 * means building it ran out of memory. Returns an exit code.
 */
int ocsplan_write_json(const struct ocsplan_io *io, const json_t *answer);

/*
 * Appends item to array, taking the reference; false when either is NULL
 * (a failed allocation) or memory runs out, so that answers are built with
 * ok &= ocsplan_append(...) and checked once.
 */
bool ocsplan_append(json_t *array, json_t *item);
/* Sets member key of obj to value, taking the reference; false as ocsplan_append(). */
bool ocsplan_set(json_t *obj, const char *key, json_t *value);

/*
 * Typed look-ups of member `key` of object `obj`, whose own name is `where`
 * ("fabric", "demand[3]"; "" at the top). Record a problem naming "where.key"
 * (or "key" at the top) and return
 * false when the member is missing (unless optional), of the wrong type, or
 * an integer outside min..max.
 */
bool ocsplan_get_int(const json_t *obj, const char *where, const char *key, int64_t min,
		     int64_t max, int *out, struct ocsplan_problems *p);
bool ocsplan_get_string(const json_t *obj, const char *where, const char *key, const char **out,
			struct ocsplan_problems *p);
/* Array member; optional ones absent give *out = NULL and true. */
bool ocsplan_get_array(const json_t *obj, const char *where, const char *key, bool optional,
		       const json_t **out, struct ocsplan_problems *p);
/* Records "where.key: unknown field" for every member not in the NULL-terminated list. */
void ocsplan_unknown_fields(const json_t *obj, const char *where, const char *const *known,
			    struct ocsplan_problems *p);

#endif
