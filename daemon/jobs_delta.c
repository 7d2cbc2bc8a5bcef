/*
 * jobs_delta.c - the job manager's side of DAG-aware planning: a job's
 * parallelism spec (struct jm_workload) planned into a leaf demand with
 * delta_plan_job() on a solver worker, and the solvers' field names mapped
 * to the API's. Pure except for reading the monotonic clock (the search's
 * time budget and the figures' plan time); thread-safe.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Field names of delta_workload_build() and delta_leaf_demand() -> the
 * JobSpec's: the parallelism spec is flat in the API, placement.gpus is the
 * GPU list in rank order. */
void jm_delta_field(const char *in, char *out, size_t len)
{
	static const char *const groups[] = { "model.", "parallelism.", "training.", "hardware.",
					      "placement.", NULL };

	if (strncmp(in, "placement.gpu_ids", 17) == 0) {
		snprintf(out, len, "placement.gpus%s", in + 17);
		return;
	}
	if (strcmp(in, "placement.gpus") == 0) {
		snprintf(out, len, "placement.gpus");
		return;
	}
	if (strncmp(in, "port_budget", 11) == 0) {
		/* A pod's port budget is the job's GPUs in it. */
		snprintf(out, len, "placement.gpus");
		return;
	}
	if (strcmp(in, "placement.pods") == 0) {
		snprintf(out, len, "parallelism.first_pod");
		return;
	}
	if (strcmp(in, "parallelism.expert_tp") == 0 || strcmp(in, "bandwidth_gbps") == 0) {
		snprintf(out, len, "parallelism.%s", in);
		return;
	}
	for (size_t i = 0; groups[i]; i++)
		if (strncmp(in, groups[i], strlen(groups[i])) == 0) {
			snprintf(out, len, "parallelism.%s", in + strlen(groups[i]));
			return;
		}
	snprintf(out, len, "parallelism%s%s", in[0] ? "." : "", in);
}

struct jm_workload *jm_workload_dup(const struct jm_workload *w)
{
	struct jm_workload *c = w ? malloc(sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	*c = *w;
	c->gpus = malloc((w->n_gpus ? w->n_gpus : 1) * sizeof(*c->gpus));
	if (!c->gpus) {
		free(c);
		return NULL;
	}
	if (w->n_gpus)
		memcpy(c->gpus, w->gpus, w->n_gpus * sizeof(*c->gpus));
	return c;
}

void jm_workload_free(struct jm_workload *w)
{
	if (!w)
		return;
	free(w->gpus);
	free(w);
}

static double mono_ms(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int jm_plan_workload(const struct ocs_fabric *f, const char *planner, const struct jm_workload *wl,
		     const struct ocs_pool *solver_pool, struct lc_demand **demand,
		     size_t *n_demand, struct jm_delta_figures *fig, struct delta_error *err)
{
	struct delta_job_plan *dp = NULL;
	enum delta_planner kind = DELTA_PLANNER_FAST;
	struct delta_ga_params ga = wl->ga;
	double t0 = mono_ms(NULL);
	struct lc_demand *d;
	int rc;

	*demand = NULL;
	*n_demand = 0;
	ga.clock_ms = mono_ms;
	ga.clock_ctx = NULL;
	delta_planner_parse(planner, &kind);
	/* Fitness runs on the solver pool's threads, helping while it waits. */
	rc = delta_plan_job(&wl->spec, kind, &ga, solver_pool, f, wl->gpus, &dp, err);
	if (rc)
		return rc;
	if (dp->leaf_unplaced > 0) {
		delta_error_set(err, "placement.gpus",
				"%ld of the planned circuits find no leaf pair with free uplinks "
				"among the job's leaves",
				dp->leaf_unplaced);
		rc = -ENOSPC;
	} else if (dp->n_leaf_demand == 0) {
		rc = delta_error_set(err, "parallelism", "the plan needs no inter-pod links");
	} else if (!(d = malloc(dp->n_leaf_demand * sizeof(*d)))) {
		rc = -ENOMEM;
	} else {
		for (size_t i = 0; i < dp->n_leaf_demand; i++)
			d[i] = (struct lc_demand){ dp->leaf_demand[i].a, dp->leaf_demand[i].b,
						   dp->leaf_demand[i].links };
		*demand = d;
		*n_demand = dp->n_leaf_demand;
		*fig = (struct jm_delta_figures){
			.makespan_ms = dp->sim.makespan_ms,
			.critical_comm_ms = dp->sim.critical_comm_ms,
			.nct = dp->sim.nct,
			.ports_used = dp->ports_used,
			.ports_saved = dp->ports_available - dp->ports_used,
			.generations = kind == DELTA_PLANNER_FAST ? dp->stats.generations : 0,
			.plan_ms = mono_ms(NULL) - t0,
		};
	}
	delta_job_plan_free(dp);
	return rc;
}
