/*
 * delta_baselines.c - Prop-Alloc, Sqrt-Alloc and Iter-Halve (see
 * delta_baselines.h).
 */
#include "delta_baselines.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *delta_baseline_name(enum delta_baseline kind)
{
	switch (kind) {
	case DELTA_PROP_ALLOC:
		return "prop-alloc";
	case DELTA_SQRT_ALLOC:
		return "sqrt-alloc";
	case DELTA_ITER_HALVE:
		return "iter-halve";
	}
	return NULL;
}

int delta_check_min_ports(const struct delta_problem *p, struct delta_error *err)
{
	int pods = delta_problem_pods(p), n_links = delta_problem_n_links(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *budget = delta_problem_port_budget(p);
	char field[64];

	for (int q = 0; q < pods; q++) {
		long need = 0;
		int n = 0;
		for (int l = 0; l < n_links; l++) {
			if (links[l].a == q && links[l].cost_a > 0)
				need += links[l].cost_a, n++;
			if (links[l].b == q && links[l].cost_b > 0)
				need += links[l].cost_b, n++;
		}
		if (need > budget[q]) {
			snprintf(field, sizeof(field), "port_budget[%d]", q);
			delta_error_set(
				err, field,
				"pod %d needs at least %ld ports (one circuit on each of its "
				"%d pod pairs), budget is %d",
				q, need, n, budget[q]);
			return -ENOSPC;
		}
	}
	return 0;
}

static void link_weights(const struct delta_problem *p, double *w)
{
	const struct delta_task *tasks = delta_problem_tasks(p);
	for (int l = 0; l < delta_problem_n_links(p); l++)
		w[l] = 0;
	for (int t = 0; t < delta_problem_n_tasks(p); t++)
		w[delta_problem_task_link(p, t)] += tasks[t].volume_bytes;
}

/* Gives back circuits at over-budget pods, largest link first. */
static void trim_to_budget(const struct delta_problem *p, int *x, long *used)
{
	int pods = delta_problem_pods(p), n_links = delta_problem_n_links(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *budget = delta_problem_port_budget(p);

	delta_ports_used(p, x, used);
	for (int q = 0; q < pods; q++) {
		while (used[q] > budget[q]) {
			int best = -1;
			for (int l = 0; l < n_links; l++) {
				int cost = links[l].a == q   ? links[l].cost_a
					   : links[l].b == q ? links[l].cost_b
							     : 0;
				if (cost > 0 && x[l] > 1 && (best < 0 || x[l] > x[best]))
					best = l;
			}
			if (best < 0)
				break; /* cannot happen after delta_check_min_ports */
			x[best]--;
			used[links[best].a] -= links[best].cost_a;
			used[links[best].b] -= links[best].cost_b;
		}
	}
}

static int proportional(const struct delta_problem *p, const double *w, int *x)
{
	int pods = delta_problem_pods(p), n_links = delta_problem_n_links(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *budget = delta_problem_port_budget(p);
	double *pod_w = calloc((size_t)pods, sizeof(double));

	if (!pod_w)
		return -ENOMEM;
	for (int l = 0; l < n_links; l++) {
		if (links[l].cost_a > 0)
			pod_w[links[l].a] += w[l] * links[l].cost_a;
		if (links[l].cost_b > 0)
			pod_w[links[l].b] += w[l] * links[l].cost_b;
	}
	for (int l = 0; l < n_links; l++) {
		double share = INFINITY;
		if (links[l].cost_a > 0 && pod_w[links[l].a] > 0)
			share = fmin(share, budget[links[l].a] * w[l] / pod_w[links[l].a]);
		if (links[l].cost_b > 0 && pod_w[links[l].b] > 0)
			share = fmin(share, budget[links[l].b] * w[l] / pod_w[links[l].b]);
		if (!isfinite(share))
			share = 1;
		x[l] = share < 1 ? 1 : (int)floor(share + 1e-9);
	}
	free(pod_w);
	return 0;
}

static void iter_halve(const struct delta_problem *p, double *w, int *x, long *used)
{
	int n_links = delta_problem_n_links(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *budget = delta_problem_port_budget(p);

	for (int l = 0; l < n_links; l++) {
		x[l] = 1;
		w[l] /= 2;
	}
	delta_ports_used(p, x, used);
	for (;;) {
		int best = -1;
		for (int l = 0; l < n_links; l++) {
			if (used[links[l].a] + links[l].cost_a > budget[links[l].a] ||
			    used[links[l].b] + links[l].cost_b > budget[links[l].b])
				continue;
			if (links[l].cost_a == 0 && links[l].cost_b == 0)
				continue; /* free link: one circuit is as good as any */
			if (best < 0 || w[l] > w[best])
				best = l;
		}
		if (best < 0)
			break;
		x[best]++;
		w[best] /= 2;
		used[links[best].a] += links[best].cost_a;
		used[links[best].b] += links[best].cost_b;
	}
}

int delta_baseline_plan(const struct delta_problem *p, enum delta_baseline kind, int *x,
			struct delta_error *err)
{
	int n_links = delta_problem_n_links(p);
	int rc = delta_check_min_ports(p, err);
	if (rc)
		return rc;
	double *w = malloc((size_t)n_links * sizeof(double));
	long *used = malloc((size_t)delta_problem_pods(p) * sizeof(long));
	if (!w || !used) {
		free(w);
		free(used);
		return -ENOMEM;
	}
	link_weights(p, w);
	switch (kind) {
	case DELTA_SQRT_ALLOC:
		for (int l = 0; l < n_links; l++)
			w[l] = sqrt(w[l]);
		rc = proportional(p, w, x);
		if (rc == 0)
			trim_to_budget(p, x, used);
		break;
	case DELTA_PROP_ALLOC:
		rc = proportional(p, w, x);
		if (rc == 0)
			trim_to_budget(p, x, used);
		break;
	case DELTA_ITER_HALVE:
		iter_halve(p, w, x, used);
		break;
	default:
		rc = delta_error_set(err, "planner", "unknown baseline %d", (int)kind);
	}
	free(w);
	free(used);
	return rc;
}
