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

static char *slurp(FILE *fp, size_t *len)
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

struct json_value *ocsplan_read_json(const struct ocsplan_io *io, struct ocsplan_problems *p,
				     int *exit_code)
{
	FILE *fp = io->in_path ? fopen(io->in_path, "rb") : stdin;
	struct json_value *v;
	char err[160];
	size_t len = 0;
	char *text;

	if (!fp) {
		fprintf(stderr, "ocsplan: cannot open %s: %s\n", io->in_path, strerror(errno));
		*exit_code = OCSPLAN_EXIT_FAILURE;
		return NULL;
	}
	text = slurp(fp, &len);
	if (fp != stdin)
		fclose(fp);
	if (!text) {
		fprintf(stderr, "ocsplan: cannot read %s\n", io->in_path ? io->in_path : "stdin");
		*exit_code = OCSPLAN_EXIT_FAILURE;
		return NULL;
	}
	v = json_parse(text, len, err, sizeof(err));
	free(text);
	if (!v) {
		ocsplan_problem(p, "input", "malformed JSON: %s", err);
		*exit_code = OCSPLAN_EXIT_INVALID;
	}
	return v;
}

int ocsplan_write_json(const struct ocsplan_io *io, const struct json_writer *w)
{
	size_t len;
	const char *text = json_writer_text(w, &len);
	FILE *fp;
	bool ok;

	if (!text) {
		fprintf(stderr, "ocsplan: out of memory while writing the answer\n");
		return OCSPLAN_EXIT_FAILURE;
	}
	fp = io->out_path ? fopen(io->out_path, "wb") : stdout;
	if (!fp) {
		fprintf(stderr, "ocsplan: cannot open %s: %s\n", io->out_path, strerror(errno));
		return OCSPLAN_EXIT_FAILURE;
	}
	ok = fwrite(text, 1, len, fp) == len && fputc('\n', fp) != EOF;
	ok &= fp == stdout ? fflush(fp) == 0 : fclose(fp) == 0;
	if (!ok) {
		fprintf(stderr, "ocsplan: cannot write %s\n",
			io->out_path ? io->out_path : "stdout");
		return OCSPLAN_EXIT_FAILURE;
	}
	return OCSPLAN_EXIT_OK;
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

static const struct json_value *member(const struct json_value *obj, const char *where,
				       const char *key, bool optional, struct ocsplan_problems *p)
{
	const struct json_value *v = json_get(obj, key);
	char f[96];

	if (!v && !optional)
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "missing");
	return v;
}

bool ocsplan_get_int(const struct json_value *obj, const char *where, const char *key, int64_t min,
		     int64_t max, int *out, struct ocsplan_problems *p)
{
	const struct json_value *v = member(obj, where, key, false, p);
	char f[96];
	int64_t x;

	if (!v)
		return false;
	if (!json_integer(v, &x)) {
		ocsplan_problem(
			p, field_name(f, sizeof(f), where, key), "must be an integer, not %s",
			json_type(v) == JSON_NUMBER ? "a fraction" : json_type_name(json_type(v)));
		return false;
	}
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

bool ocsplan_get_string(const struct json_value *obj, const char *where, const char *key,
			const char **out, struct ocsplan_problems *p)
{
	const struct json_value *v = member(obj, where, key, false, p);
	char f[96];

	if (!v)
		return false;
	if (json_type(v) != JSON_STRING) {
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "must be a string, not %s",
				json_type_name(json_type(v)));
		return false;
	}
	*out = json_string(v);
	return true;
}

bool ocsplan_get_array(const struct json_value *obj, const char *where, const char *key,
		       bool optional, const struct json_value **out, struct ocsplan_problems *p)
{
	const struct json_value *v = member(obj, where, key, optional, p);
	char f[96];

	*out = NULL;
	if (!v)
		return optional;
	if (json_type(v) != JSON_ARRAY) {
		ocsplan_problem(p, field_name(f, sizeof(f), where, key), "must be an array, not %s",
				json_type_name(json_type(v)));
		return false;
	}
	*out = v;
	return true;
}

void ocsplan_unknown_fields(const struct json_value *obj, const char *where,
			    const char *const *known, struct ocsplan_problems *p)
{
	for (size_t i = 0; i < json_len(obj); i++) {
		const char *key = json_key_at(obj, i);
		size_t k = 0;

		while (known[k] && strcmp(known[k], key) != 0)
			k++;
		char f[96];

		if (!known[k])
			ocsplan_problem(p, field_name(f, sizeof(f), where, key), "unknown field");
	}
}
