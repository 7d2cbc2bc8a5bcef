/*
 * metrics.h - the metric registry behind `GET /metrics`: counters, gauges
 * and histograms with labels, rendered in the Prometheus text exposition
 * format (version 0.0.4).
 *
 * Threading: a registry belongs to the daemon's event-loop thread. Nothing
 * here locks; other threads post their observations to the loop, which
 * records them. That keeps every figure consistent with the state the loop
 * owns and the hot paths free of atomics.
 *
 * Names follow Prometheus conventions, enforced at registration: counters
 * end in `_total`; base units in the name (`_seconds`, `_bytes`).
 */
#ifndef OCSD_METRICS_H
#define OCSD_METRICS_H

#include <stddef.h>

struct mx_registry;
struct mx_family;

/* Caller frees with mx_registry_free() (accepts NULL). */
struct mx_registry *mx_registry_new(void);
void mx_registry_free(struct mx_registry *reg);

/*
 * Registers a family. `labels` is a NULL-terminated array of label names
 * (NULL for none). Histogram bounds are the upper bounds of the finite
 * buckets, strictly increasing; +Inf is implicit. Returns NULL on a bad name,
 * a duplicate, or out of memory. The registry owns the family. Registering
 * the same family again (same kind, help, labels and bounds) returns it with
 * its series: a part of the daemon that starts again keeps its figures.
 */
struct mx_family *mx_counter(struct mx_registry *reg, const char *name, const char *help,
			     const char *const *labels);
struct mx_family *mx_gauge(struct mx_registry *reg, const char *name, const char *help,
			   const char *const *labels);
struct mx_family *mx_histogram(struct mx_registry *reg, const char *name, const char *help,
			       const char *const *labels, const double *bounds, size_t n_bounds);

/*
 * Updates the series with these label values (as many as the family has
 * labels; NULL when it has none), creating it on first use. Counters only
 * go up: mx_add() ignores negative amounts. Return 0, or -ENOMEM /
 * -EINVAL (wrong kind of family).
 */
int mx_add(struct mx_family *fam, const char *const *values, double amount);
int mx_set(struct mx_family *fam, const char *const *values, double value);
int mx_observe(struct mx_family *fam, const char *const *values, double value);
/* Drops every series of a gauge family (before re-filling it from state). */
void mx_clear(struct mx_family *fam);

/* Renders every family; returns a malloc'd NUL-terminated text (caller frees) or NULL. */
char *mx_render(const struct mx_registry *reg, size_t *len);

/* Bucket bounds for latencies from 100 us to about 100 s, in seconds. */
extern const double mx_latency_buckets_s[];
extern const size_t mx_latency_buckets_n;

#endif
