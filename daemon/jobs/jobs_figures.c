/*
 * jobs_figures.c - the figures of a job's plan as text, so that the state
 * store keeps them (st_figures_put) and `ocsctl jobs` shows them after a
 * restart (issue 14 #14). The store sees an opaque string; only this file
 * knows its layout:
 *
 *   line 1  "ocsd-figures 1"
 *   line 2  planner
 *   line 3  links_requested links_placed circuits_new circuits_moved
 *           max_contention plan_us
 *   line 4  has_delta makespan_ms critical_comm_ms nct ports_used
 *           ports_saved generations plan_ms
 *   line 5  has_ring orchestration ("-" when empty) rings nodes_per_ring
 *           gpus_placed gpus_wasted cross_tor_share constraints_kept
 *           constraints_total
 *   line 6  n_unplaced, then a b links of each
 *   then    one moved job id per line
 *
 * Doubles are written with %.17g, so a round trip gives the same value.
 * Job ids and planner names hold no control characters (the northbound
 * refuses them), so a line is a field. A leaf of the daemon's call graph.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_util.h"

#define FIG_MAGIC "ocsd-figures 1"

/* Appends to a growing string; -ENOMEM leaves *s freed and NULL. */
__attribute__((format(printf, 3, 4))) static int append(char **s, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	p = n < 0 ? NULL : realloc(*s, *len + (size_t)n + 1);
	if (!p) {
		free(*s);
		*s = NULL;
		return -ENOMEM;
	}
	*s = p;
	va_start(ap, fmt);
	vsnprintf(*s + *len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*len += (size_t)n;
	return 0;
}

char *jm_figures_encode(const struct jm_figures *f)
{
	const struct jm_delta_figures *d = &f->delta;
	const struct jm_ring_figures *r = &f->ring;
	char *s = NULL;
	size_t len = 0;
	int rc = append(&s, &len, "%s\n%s\n%d %d %d %d %.17g %lld\n", FIG_MAGIC, f->planner,
			f->links_requested, f->links_placed, f->circuits_new, f->circuits_moved,
			f->max_contention, (long long)f->plan_us);

	if (rc == 0)
		rc = append(&s, &len, "%d %.17g %.17g %.17g %ld %ld %d %.17g\n", f->has_delta,
			    d->makespan_ms, d->critical_comm_ms, d->nct, d->ports_used,
			    d->ports_saved, d->generations, d->plan_ms);
	if (rc == 0)
		rc = append(&s, &len, "%d %s %d %d %lld %lld %.17g %d %d\n%zu", f->has_ring,
			    r->orchestration[0] ? r->orchestration : "-", r->rings,
			    r->nodes_per_ring, (long long)r->gpus_placed, (long long)r->gpus_wasted,
			    r->cross_tor_share, r->constraints_kept, r->constraints_total,
			    f->n_unplaced);
	for (size_t i = 0; rc == 0 && i < f->n_unplaced; i++)
		rc = append(&s, &len, " %d %d %d", f->unplaced[i].a, f->unplaced[i].b,
			    f->unplaced[i].links);
	if (rc == 0)
		rc = append(&s, &len, "\n");
	for (size_t i = 0; rc == 0 && i < f->n_moved_jobs; i++)
		rc = append(&s, &len, "%s\n", f->moved_jobs[i]);
	return rc == 0 ? s : NULL;
}

/* The next line of *p (its newline replaced by NUL), NULL at the end. */
static char *next_line(char **p)
{
	char *line = *p, *nl;

	if (!line || !*line)
		return NULL;
	nl = strchr(line, '\n');
	if (nl) {
		*nl = '\0';
		*p = nl + 1;
	} else {
		*p = line + strlen(line);
	}
	return line;
}

static int decode_lines(char *p, struct jm_figures *f)
{
	struct jm_delta_figures *d = &f->delta;
	struct jm_ring_figures *r = &f->ring;
	char *line[6], orch[sizeof(r->orchestration)];
	int has_delta, has_ring, used;
	long long plan_us, placed, wasted;
	size_t n_unplaced;

	for (int i = 0; i < 6; i++)
		if (!(line[i] = next_line(&p)))
			return -EINVAL;
	if (strcmp(line[0], FIG_MAGIC) != 0 || strlen(line[1]) >= sizeof(f->planner))
		return -EINVAL;
	snprintf(f->planner, sizeof(f->planner), "%s", line[1]);
	if (sscanf(line[2], "%d %d %d %d %lg %lld", &f->links_requested, &f->links_placed,
		   &f->circuits_new, &f->circuits_moved, &f->max_contention, &plan_us) != 6 ||
	    sscanf(line[3], "%d %lg %lg %lg %ld %ld %d %lg", &has_delta, &d->makespan_ms,
		   &d->critical_comm_ms, &d->nct, &d->ports_used, &d->ports_saved, &d->generations,
		   &d->plan_ms) != 8 ||
	    sscanf(line[4], "%d %15s %d %d %lld %lld %lg %d %d", &has_ring, orch, &r->rings,
		   &r->nodes_per_ring, &placed, &wasted, &r->cross_tor_share, &r->constraints_kept,
		   &r->constraints_total) != 9 ||
	    sscanf(line[5], "%zu%n", &n_unplaced, &used) != 1 || n_unplaced > 1000000)
		return -EINVAL;
	f->plan_us = plan_us;
	f->has_delta = has_delta != 0;
	f->has_ring = has_ring != 0;
	r->gpus_placed = placed;
	r->gpus_wasted = wasted;
	snprintf(r->orchestration, sizeof(r->orchestration), "%s", strcmp(orch, "-") ? orch : "");
	if (n_unplaced) {
		char *q = line[5] + used;

		f->unplaced = calloc(n_unplaced, sizeof(*f->unplaced));
		if (!f->unplaced)
			return -ENOMEM;
		for (size_t i = 0; i < n_unplaced; i++, f->n_unplaced++) {
			struct lc_demand *u = &f->unplaced[i];

			if (sscanf(q, " %d %d %d%n", &u->a, &u->b, &u->links, &used) != 3)
				return -EINVAL;
			q += used;
		}
	}
	for (char *id; (id = next_line(&p));) {
		char(*m)[72] = realloc(f->moved_jobs, (f->n_moved_jobs + 1) * sizeof(*m));

		if (!m)
			return -ENOMEM;
		f->moved_jobs = m;
		snprintf(f->moved_jobs[f->n_moved_jobs++], sizeof(*m), "%s", id);
	}
	return 0;
}

int jm_figures_decode(const char *text, struct jm_figures *out)
{
	char *copy = text ? strdup(text) : NULL;
	int rc;

	*out = (struct jm_figures){0};
	if (!copy)
		return text ? -ENOMEM : -EINVAL;
	rc = decode_lines(copy, out);
	free(copy);
	if (rc)
		jm_figures_clear(out);
	return rc;
}
