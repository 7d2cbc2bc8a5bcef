/*
 * io.c - shared input/output and field checking for ocsplan subcommands
 * (see io.h).
 */
#include "io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ocsplan_problem(struct ocsplan_problems *p, const char *field, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", field);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	p->count++;
}

int ocsplan_io_option(struct ocsplan_io *io, int argc, char **argv, int *i,
		      struct ocsplan_problems *p)
{
	const char *opt = argv[*i];
	const char **target = NULL;

	if (strcmp(opt, "--pretty") == 0) {
		io->pretty = true;
		return 1;
	}
	if (strcmp(opt, "--in") == 0)
		target = &io->in_path;
	else if (strcmp(opt, "--out") == 0)
		target = &io->out_path;
	else
		return 0;
	if (*i + 1 >= argc) {
		ocsplan_problem(p, opt, "needs a file name");
		return -1;
	}
	*target = argv[++*i];
	return 1;
}

char *ocsplan_slurp(FILE *fp, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, fp);

		n += got;
		if (n < cap) {
			if (ferror(fp)) {
				free(buf);
				return NULL;
			}
			break;
		}
		char *bigger = realloc(buf, cap * 2);

		if (!bigger) {
			free(buf);
			return NULL;
		}
		buf = bigger;
		cap *= 2;
	}
	*len = n;
	return buf;
}

json_t *ocsplan_read_json(const struct ocsplan_io *io, struct ocsplan_problems *p, int *exit_code)
{
	FILE *fp = io->in_path ? fopen(io->in_path, "rb") : stdin;
	size_t len = 0;
	char *text;
	json_t *v;

	if (!fp) {
		fprintf(stderr, "ocsplan: cannot open %s: %s\n", io->in_path, strerror(errno));
		*exit_code = OCSPLAN_EXIT_FAILURE;
		return NULL;
	}
	text = ocsplan_slurp(fp, &len);
	if (fp != stdin)
		fclose(fp);
	if (!text) {
		fprintf(stderr, "ocsplan: cannot read %s\n", io->in_path ? io->in_path : "stdin");
		*exit_code = OCSPLAN_EXIT_FAILURE;
		return NULL;
	}
	v = ocsplan_parse_json(text, len, p, exit_code);
	free(text);
	return v;
}

json_t *ocsplan_parse_json(const char *text, size_t len, struct ocsplan_problems *p, int *exit_code)
{
	struct ocs_json_error err;
	json_t *v = ocs_json_parse(text, len, &err);

	if (v)
		return v;
	if (err.duplicate_key)
		ocsplan_problem(p, err.path[0] ? err.path : "input", "%s", err.message);
	else
		ocsplan_problem(p, "input", "malformed JSON: %s", err.message);
	*exit_code = OCSPLAN_EXIT_INVALID;
	return NULL;
}

int ocsplan_write_json(const struct ocsplan_io *io, const json_t *answer)
{
	char *text = answer ? ocs_json_dumps(answer, io->pretty) : NULL;
	size_t len = text ? strlen(text) : 0;
	FILE *fp;
	bool ok;

	if (!text) {
		fprintf(stderr, "ocsplan: out of memory while writing the answer\n");
		return OCSPLAN_EXIT_FAILURE;
	}
	fp = io->out_path ? fopen(io->out_path, "wb") : stdout;
	if (!fp) {
		fprintf(stderr, "ocsplan: cannot open %s: %s\n", io->out_path, strerror(errno));
		free(text);
		return OCSPLAN_EXIT_FAILURE;
	}
	ok = fwrite(text, 1, len, fp) == len && fputc('\n', fp) != EOF;
	ok &= fp == stdout ? fflush(fp) == 0 : fclose(fp) == 0;
	free(text);
	if (!ok) {
		fprintf(stderr, "ocsplan: cannot write %s\n",
			io->out_path ? io->out_path : "stdout");
		return OCSPLAN_EXIT_FAILURE;
	}
	return OCSPLAN_EXIT_OK;
}

bool ocsplan_append(json_t *array, json_t *item)
{
	if (!array) {
		json_decref(item);
		return false;
	}
	return json_array_append_new(array, item) == 0;
}

bool ocsplan_set(json_t *obj, const char *key, json_t *value)
{
	if (!obj) {
		json_decref(value);
		return false;
	}
	return json_object_set_new(obj, key, value) == 0;
}

/* "where.key" into buf. */
static const char *field_name(char *buf, size_t len, const char *where, const char *key)
{
	if (where && *where)
		snprintf(buf, len, "%s.%s", where, key);
	else
		snprintf(buf, len, "%s", key);
	return buf;
}

static const json_t *member(const json_t *obj, const char *where, const char *key, bool optional,
			    struct ocsplan_problems *p)
{
	const json_t *v = json_object_get(obj, key);
	char f[96];

	if (!v && !optional)
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "missing");
	return v;
}

bool ocsplan_get_int(const json_t *obj, const char *where, const char *key, int64_t min,
		     int64_t max, int *out, struct ocsplan_problems *p)
{
	const json_t *v = member(obj, where, key, false, p);
	char f[96];
	int64_t x;

	if (!v)
		return false;
	if (!json_is_integer(v)) {
		ocsplan_problem(p, field_name(f, sizeof(f), where, key),
				"must be an integer, not %s",
				json_is_real(v) ? "a fraction" : ocs_json_type_name(v));
		return false;
	}
	x = json_integer_value(v);
	if (x < min || x > max) {
		if (x < 0 && min >= 0)
			ocsplan_problem(p, field_name(f, sizeof(f), where, key), "%lld is negative",
					(long long)x);
		else
			ocsplan_problem(p, field_name(f, sizeof(f), where, key),
					"%lld out of range %lld..%lld", (long long)x,
					(long long)min, (long long)max);
		return false;
	}
	*out = (int)x;
	return true;
}

bool ocsplan_get_string(const json_t *obj, const char *where, const char *key, const char **out,
			struct ocsplan_problems *p)
{
	const json_t *v = member(obj, where, key, false, p);
	char f[96];

	if (!v)
		return false;
	if (!json_is_string(v)) {
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "must be a string, not %s",
				ocs_json_type_name(v));
		return false;
	}
	*out = json_string_value(v);
	return true;
}

bool ocsplan_get_array(const json_t *obj, const char *where, const char *key, bool optional,
		       const json_t **out, struct ocsplan_problems *p)
{
	const json_t *v = member(obj, where, key, optional, p);
	char f[96];

	*out = NULL;
	if (!v)
		return optional;
	if (!json_is_array(v)) {
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "must be an array, not %s",
				ocs_json_type_name(v));
		return false;
	}
	*out = v;
	return true;
}

void ocsplan_unknown_fields(const json_t *obj, const char *where, const char *const *known,
			    struct ocsplan_problems *p)
{
	for (void *it = json_object_iter((json_t *)obj); it;
	     it = json_object_iter_next((json_t *)obj, it)) {
		const char *key = json_object_iter_key(it);
		size_t k = 0;
		char f[96];

		while (known[k] && strcmp(known[k], key) != 0)
			k++;
		if (!known[k])
			ocsplan_problem(p, field_name(f, sizeof(f), where, key), "unknown field");
	}
}
