/*
 * delta_plan.c - a job's DELTA plan in one call (see delta_plan.h).
 */
#include "delta_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "delta_baselines.h"

int delta_planner_parse(const char *name, enum delta_planner *out)
{
	static const char *const names[] = {"delta-fast", "prop-alloc", "sqrt-alloc", "iter-halve"};
	for (int i = 0; i < 4; i++)
		if (name && !strcmp(name, names[i])) {
			*out = (enum delta_planner)i;
			return 0;
		}
	return -EINVAL;
}

void delta_job_plan_free(struct delta_job_plan *plan)
{
	if (!plan)
		return;
	free(plan->circuits);
	free(plan->leaf_demand);
	free(plan);
}

int delta_plan_job(const struct delta_workload_spec *spec, enum delta_planner planner,
		   const struct delta_ga_params *params, const struct ocs_pool *pool,
		   const struct ocs_fabric *fabric, const int64_t *gpus,
		   struct delta_job_plan **out, struct delta_error *err)
{
	struct delta_workload *w = NULL;
	struct delta_problem *p = NULL;
	struct delta_job_plan *plan = calloc(1, sizeof(*plan));
	struct delta_ga_params defaults;
	int *x = NULL;
	long *used = NULL;
	int rc;

	*out = NULL;
	if (!plan)
		return -ENOMEM;
	rc = delta_workload_build(spec, &w, err);
	if (rc)
		goto fail;
	p = delta_problem_new(&w->dag, err);
	if (!p) {
		rc = strcmp(err ? err->field : "", "memory") ? -EINVAL : -ENOMEM;
		goto fail;
	}
	rc = -ENOMEM;
	x = malloc((size_t)delta_problem_n_links(p) * sizeof(int));
	used = malloc((size_t)delta_problem_pods(p) * sizeof(long));
	plan->circuits = malloc((size_t)delta_workload_expand_max(w, p) * sizeof(*plan->circuits));
	if (!x || !used || !plan->circuits)
		goto fail;
	if (planner == DELTA_PLANNER_FAST) {
		if (!params) {
			delta_ga_defaults(&defaults);
			params = &defaults;
		}
		rc = delta_fast(p, params, NULL, pool, x, &plan->sim, &plan->stats, err);
	} else {
		rc = delta_baseline_plan(
			p, (enum delta_baseline)(planner - DELTA_PLANNER_PROP_ALLOC), x, err);
		if (rc == 0 && delta_simulate(p, x, &plan->sim, NULL, NULL))
			rc = delta_error_set(err, "tasks",
					     "the plan leaves a task without circuits");
	}
	if (rc)
		goto fail;
	plan->pod_sets = w->pod_sets;
	plan->n_circuits = (size_t)delta_workload_expand(w, p, x, plan->circuits);
	plan->ports_used = delta_ports_used(p, x, used) * w->pod_sets;
	plan->ports_available = delta_ports_available(p) * w->pod_sets;
	if (fabric)
		rc = delta_leaf_demand(fabric, w, p, x, gpus, &plan->leaf_demand,
				       &plan->n_leaf_demand, &plan->leaf_unplaced, err);
	if (rc == 0) {
		*out = plan;
		plan = NULL;
	}
fail:
	delta_job_plan_free(plan);
	free(x);
	free(used);
	delta_problem_free(p);
	delta_workload_free(w);
	return rc;
}
