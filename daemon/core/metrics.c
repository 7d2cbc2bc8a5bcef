/*
 * metrics.c - the metric registry of metrics.h and its Prometheus text
 * rendering. Families keep their series in insertion order in a growing
 * array; label sets per family are few (methods x statuses, device states),
 * so look-up is a linear scan.
 */
#define _GNU_SOURCE /* open_memstream */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mx_kind { MX_COUNTER, MX_GAUGE, MX_HISTOGRAM };

struct mx_series {
	char **values; /* one per label */
	double value;  /* counter or gauge */
	double sum;    /* histogram */
	unsigned long long count;
	unsigned long long *buckets; /* histogram: per finite bound, not cumulative */
};

struct mx_family {
	enum mx_kind kind;
	char *name;
	char *help;
	char **labels;
	size_t n_labels;
	double *bounds;
	size_t n_bounds;
	struct mx_series *series;
	size_t n_series;
	size_t cap_series;
};

struct mx_registry {
	struct mx_family **families;
	size_t n;
	size_t cap;
};

const double mx_latency_buckets_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
				       0.01,   0.025,	0.05,	0.1,   0.25,   0.5,
				       1,      2.5,	5,	10,    30,     100};
const size_t mx_latency_buckets_n = sizeof(mx_latency_buckets_s) / sizeof(mx_latency_buckets_s[0]);

struct mx_registry *mx_registry_new(void)
{
	return calloc(1, sizeof(struct mx_registry));
}

static void free_series(struct mx_family *f, struct mx_series *s)
{
	for (size_t i = 0; i < f->n_labels; i++)
		free(s->values[i]);
	free(s->values);
	free(s->buckets);
}

static void free_family(struct mx_family *f)
{
	if (!f)
		return;
	mx_clear(f);
	free(f->series);
	for (size_t i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->bounds);
	free(f->name);
	free(f->help);
	free(f);
}

void mx_registry_free(struct mx_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		free_family(reg->families[i]);
	free(reg->families);
	free(reg);
}

static bool valid_name(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/*
 * The same family registered again (same kind, help and labels): a part of
 * the daemon that starts again (a replica's leader and follower phases,
 * docs/replicas.md) gets its family back and keeps its series.
 */
static bool same_family(const struct mx_family *f, enum mx_kind kind, const char *help,
			const char *const *labels)
{
	size_t n = 0;

	if (f->kind != kind || strcmp(f->help, help) != 0)
		return false;
	while (labels && labels[n])
		n++;
	if (n != f->n_labels)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(f->labels[i], labels[i]) != 0)
			return false;
	return true;
}

static struct mx_family *add_family(struct mx_registry *reg, enum mx_kind kind, const char *name,
				    const char *help, const char *const *labels)
{
	struct mx_family *f;

	if (!reg || !valid_name(name) || !help || (kind == MX_COUNTER) != ends_with(name, "_total"))
		return NULL;
	for (size_t i = 0; i < reg->n; i++)
		if (strcmp(reg->families[i]->name, name) == 0)
			return same_family(reg->families[i], kind, help, labels) ? reg->families[i]
										 : NULL;
	if (reg->n == reg->cap) {
		size_t ncap = reg->cap ? reg->cap * 2 : 16;
		struct mx_family **fams = realloc(reg->families, ncap * sizeof(*fams));

		if (!fams)
			return NULL;
		reg->families = fams;
		reg->cap = ncap;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->kind = kind;
	f->name = strdup(name);
	f->help = strdup(help);
	while (labels && labels[f->n_labels])
		f->n_labels++;
	f->labels = calloc(f->n_labels + 1, sizeof(*f->labels));
	if (!f->name || !f->help || !f->labels)
		goto fail;
	for (size_t i = 0; i < f->n_labels; i++) {
		if (!valid_name(labels[i]) || strcmp(labels[i], "le") == 0)
			goto fail;
		f->labels[i] = strdup(labels[i]);
		if (!f->labels[i])
			goto fail;
	}
	reg->families[reg->n++] = f;
	return f;
fail:
	free_family(f);
	return NULL;
}

struct mx_family *mx_counter(struct mx_registry *reg, const char *name, const char *help,
			     const char *const *labels)
{
	return add_family(reg, MX_COUNTER, name, help, labels);
}

struct mx_family *mx_gauge(struct mx_registry *reg, const char *name, const char *help,
			   const char *const *labels)
{
	return add_family(reg, MX_GAUGE, name, help, labels);
}

struct mx_family *mx_histogram(struct mx_registry *reg, const char *name, const char *help,
			       const char *const *labels, const double *bounds, size_t n_bounds)
{
	struct mx_family *f;

	if (!bounds || n_bounds == 0)
		return NULL;
	for (size_t i = 0; i < n_bounds; i++)
		if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
			return NULL;
	f = add_family(reg, MX_HISTOGRAM, name, help, labels);
	if (!f)
		return NULL;
	if (f->bounds) /* registered again: the same bounds */
		return f->n_bounds == n_bounds &&
				       memcmp(f->bounds, bounds, n_bounds * sizeof(*bounds)) == 0
			       ? f
			       : NULL;
	f->bounds = malloc(n_bounds * sizeof(*bounds));
	if (!f->bounds) {
		/* Leave the family registered but unusable: mx_observe refuses it. */
		return NULL;
	}
	memcpy(f->bounds, bounds, n_bounds * sizeof(*bounds));
	f->n_bounds = n_bounds;
	return f;
}

static struct mx_series *find_series(struct mx_family *f, const char *const *values)
{
	struct mx_series *s;

	for (size_t i = 0; i < f->n_series; i++) {
		size_t j;

		for (j = 0; j < f->n_labels; j++)
			if (strcmp(f->series[i].values[j], values[j]) != 0)
				break;
		if (j == f->n_labels)
			return &f->series[i];
	}
	if (f->n_series == f->cap_series) {
		size_t ncap = f->cap_series ? f->cap_series * 2 : 8;
		struct mx_series *ns = realloc(f->series, ncap * sizeof(*ns));

		if (!ns)
			return NULL;
		f->series = ns;
		f->cap_series = ncap;
	}
	s = &f->series[f->n_series];
	memset(s, 0, sizeof(*s));
	s->values = calloc(f->n_labels + 1, sizeof(*s->values));
	if (!s->values)
		return NULL;
	if (f->kind == MX_HISTOGRAM) {
		s->buckets = calloc(f->n_bounds, sizeof(*s->buckets));
		if (!s->buckets)
			goto fail;
	}
	for (size_t j = 0; j < f->n_labels; j++) {
		s->values[j] = strdup(values[j] ? values[j] : "");
		if (!s->values[j])
			goto fail;
	}
	f->n_series++;
	return s;
fail:
	free_series(f, s);
	return NULL;
}

int mx_add(struct mx_family *fam, const char *const *values, double amount)
{
	struct mx_series *s;

	if (!fam || fam->kind == MX_HISTOGRAM)
		return -EINVAL;
	if (fam->kind == MX_COUNTER && !(amount >= 0))
		return 0;
	s = find_series(fam, values);
	if (!s)
		return -ENOMEM;
	s->value += amount;
	return 0;
}

int mx_set(struct mx_family *fam, const char *const *values, double value)
{
	struct mx_series *s;

	if (!fam || fam->kind != MX_GAUGE)
		return -EINVAL;
	s = find_series(fam, values);
	if (!s)
		return -ENOMEM;
	s->value = value;
	return 0;
}

int mx_observe(struct mx_family *fam, const char *const *values, double value)
{
	struct mx_series *s;

	if (!fam || fam->kind != MX_HISTOGRAM || !fam->bounds)
		return -EINVAL;
	s = find_series(fam, values);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < fam->n_bounds; i++) {
		if (value <= fam->bounds[i]) {
			s->buckets[i]++;
			break;
		}
	}
	s->count++;
	s->sum += value;
	return 0;
}

void mx_clear(struct mx_family *fam)
{
	if (!fam)
		return;
	for (size_t i = 0; i < fam->n_series; i++)
		free_series(fam, &fam->series[i]);
	fam->n_series = 0;
}

static void write_escaped(FILE *out, const char *s, bool quote_too)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (quote_too && *s == '"')
			fputs("\\\"", out);
		else
			fputc(*s, out);
	}
}

/*
 * The shortest %g form that reads back as v: 0.0025, not
 * 0.0025000000000000001, so that le="0.0025" in a query matches.
 */
static void shortest(char *buf, size_t len, double v)
{
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, len, "%.*g", digits, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

static void write_number(FILE *out, double v)
{
	char buf[64];

	if (isnan(v))
		fputs("NaN", out);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", out);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(out, "%.0f", v);
	else {
		shortest(buf, sizeof(buf), v);
		fputs(buf, out);
	}
}

/* name{l1="v1",...,extra="x"} with the series' labels and an optional extra pair. */
static void write_labels(FILE *out, const struct mx_family *f, const struct mx_series *s,
			 const char *extra_name, const char *extra_value)
{
	bool any = f->n_labels > 0 || extra_name;
	bool first = true;

	if (!any)
		return;
	fputc('{', out);
	for (size_t i = 0; i < f->n_labels; i++) {
		fprintf(out, "%s%s=\"", first ? "" : ",", f->labels[i]);
		write_escaped(out, s->values[i], true);
		fputc('"', out);
		first = false;
	}
	if (extra_name)
		fprintf(out, "%s%s=\"%s\"", first ? "" : ",", extra_name, extra_value);
	fputc('}', out);
}

static void render_family(FILE *out, const struct mx_family *f)
{
	static const char *const kinds[] = {"counter", "gauge", "histogram"};

	fprintf(out, "# HELP %s ", f->name);
	write_escaped(out, f->help, false);
	fprintf(out, "\n# TYPE %s %s\n", f->name, kinds[f->kind]);
	for (size_t i = 0; i < f->n_series; i++) {
		const struct mx_series *s = &f->series[i];
		unsigned long long cumulative = 0;
		char le[64];

		if (f->kind != MX_HISTOGRAM) {
			fputs(f->name, out);
			write_labels(out, f, s, NULL, NULL);
			fputc(' ', out);
			write_number(out, s->value);
			fputc('\n', out);
			continue;
		}
		for (size_t b = 0; b < f->n_bounds; b++) {
			cumulative += s->buckets[b];
			shortest(le, sizeof(le), f->bounds[b]);
			fprintf(out, "%s_bucket", f->name);
			write_labels(out, f, s, "le", le);
			fprintf(out, " %llu\n", cumulative);
		}
		fprintf(out, "%s_bucket", f->name);
		write_labels(out, f, s, "le", "+Inf");
		fprintf(out, " %llu\n%s_sum", s->count, f->name);
		write_labels(out, f, s, NULL, NULL);
		fputc(' ', out);
		write_number(out, s->sum);
		fprintf(out, "\n%s_count", f->name);
		write_labels(out, f, s, NULL, NULL);
		fprintf(out, " %llu\n", s->count);
	}
}

char *mx_render(const struct mx_registry *reg, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buf, &size);

	if (!out)
		return NULL;
	for (size_t i = 0; reg && i < reg->n; i++)
		render_family(out, reg->families[i]);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	if (len)
		*len = size;
	return buf;
}
