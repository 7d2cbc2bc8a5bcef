/*
 * io.h - what every ocsplan subcommand shares: reading the request (--in
 * FILE or stdin), writing the answer (--out FILE or stdout), the exit codes,
 * collecting problems as "field: reason" lines on stderr, and typed field
 * look-ups on the JSON tree that name the field when they fail.
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

#include "json.h"

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
 * Reads and parses the request. Returns the tree (caller frees with
 * json_free), or NULL with *exit_code set: OCSPLAN_EXIT_FAILURE when the
 * input cannot be read, OCSPLAN_EXIT_INVALID (problem printed) when it is
 * not JSON.
 */
struct json_value *ocsplan_read_json(const struct ocsplan_io *io, struct ocsplan_problems *p,
				     int *exit_code);

/* Writes the writer's text and a newline to the output; returns an exit code. */
int ocsplan_write_json(const struct ocsplan_io *io, const struct json_writer *w);

/*
 * Typed look-ups of member `key` of object `obj`, whose own name is `where`
 * ("fabric", "demand[3]"; "" at the top). Record a problem naming "where.key"
 * (or "key" at the top) and return
 * false when the member is missing (unless optional), of the wrong type, or
 * an integer outside min..max.
 */
bool ocsplan_get_int(const struct json_value *obj, const char *where, const char *key, int64_t min,
		     int64_t max, int *out, struct ocsplan_problems *p);
bool ocsplan_get_string(const struct json_value *obj, const char *where, const char *key,
			const char **out, struct ocsplan_problems *p);
/* Array member; optional ones absent give *out = NULL and true. */
bool ocsplan_get_array(const struct json_value *obj, const char *where, const char *key,
		       bool optional, const struct json_value **out, struct ocsplan_problems *p);
/* Records "where.key: unknown field" for every member not in the NULL-terminated list. */
void ocsplan_unknown_fields(const struct json_value *obj, const char *where,
			    const char *const *known, struct ocsplan_problems *p);

#endif
