/*
 * kind_parallelism.c - the parallelism job kind (DAG-aware planning): the
 * scheduler gives the job's parallelism spec (struct jm_workload);
 * delta_plan_job() (planner delta-fast, the default, or a baseline
 * prop-alloc, sqrt-alloc, iter-halve) searches the pod-level circuits on a
 * solver worker and shares them out to the leaves of the job's GPUs as a
 * leaf demand, which then goes the leaf-centric way (jp_plan_leaf). The
 * solvers' field names are mapped to the API's. Pure except for reading
 * the task's clock (the search's time budget and the plan time).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "jobs_plan.h"
#include "jobs_util.h"

/* Field names of delta_workload_build() and delta_leaf_demand() -> the
 * JobSpec's: the parallelism spec is flat in the API, placement.gpus is the
 * GPU list in rank order. */
static void delta_field(const char *in, char *out, size_t len)
{
	static const char *const groups[] = {"model.",	  "parallelism.", "training.",
					     "hardware.", "placement.",	  NULL};

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

static double mono_ms(void *ctx)
{
	return (double)clk_mono_us(ctx) / 1e3;
}

/*
 * Plans a workload into a leaf demand (*demand, malloc'd, caller frees) and
 * its DELTA figures. 0; -EINVAL or -ENOSPC with err naming the solvers'
 * field; -ENOMEM.
 */
static int plan_workload(const struct ocs_fabric *f, const char *planner,
			 const struct jm_workload *wl, const struct clk *clock,
			 const struct ocs_pool *solver_pool, const atomic_bool *cancel,
			 struct lc_demand **demand, size_t *n_demand, struct jm_delta_figures *fig,
			 struct delta_error *err)
{
	struct delta_job_plan *dp = NULL;
	enum delta_planner kind = DELTA_PLANNER_FAST;
	struct delta_ga_params ga = wl->ga;
	double t0 = mono_ms((void *)clock);
	struct lc_demand *d;
	int rc;

	*demand = NULL;
	*n_demand = 0;
	ga.clock_ms = mono_ms;
	ga.clock_ctx = (void *)clock;
	ga.cancel = cancel;
	/* The catalogue checked the name (jobs.c): the parse cannot fail. */
	(void)delta_planner_parse(planner, &kind);
	if (atomic_load(cancel))
		return -ECANCELED; /* the caller went away while this waited */
	/* Fitness runs on the solver pool's threads, helping while it waits. */
	rc = delta_plan_job(&wl->spec, kind, &ga, solver_pool, f, wl->gpus, &dp, err);
	if (rc)
		return rc;
	if (atomic_load(cancel)) {
		rc = -ECANCELED; /* stopped early: the result is nobody's */
	} else if (dp->leaf_unplaced > 0) {
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
			d[i] = (struct lc_demand){dp->leaf_demand[i].a, dp->leaf_demand[i].b,
						  dp->leaf_demand[i].links};
		*demand = d;
		*n_demand = dp->n_leaf_demand;
		*fig = (struct jm_delta_figures){
			.makespan_ms = dp->sim.makespan_ms,
			.critical_comm_ms = dp->sim.critical_comm_ms,
			.nct = dp->sim.nct,
			.ports_used = dp->ports_used,
			.ports_saved = dp->ports_available - dp->ports_used,
			.generations = kind == DELTA_PLANNER_FAST ? dp->stats.generations : 0,
			.plan_ms = mono_ms((void *)clock) - t0,
		};
	}
	delta_job_plan_free(dp);
	return rc;
}

/* The search (when the job has no leaf demand yet), then the leaf plan. */
static void parallelism_plan(struct jp_task *t)
{
	if (t->wl && t->n_demand == 0) {
		struct lc_demand *d = NULL;
		struct delta_error derr = {0};
		size_t n = 0;
		char field[272]; /* room for any mapping of derr.field */
		int rc = plan_workload(&t->f, t->planner, t->wl, t->clock, t->solver_pool,
				       &t->cancel, &d, &n, &t->delta, &derr);

		if (rc) {
			t->kind_rc = rc;
			delta_field(derr.field, field, sizeof(field));
			if (rc == -EINVAL)
				err_set(&t->kind_err, ERR_INVALID, field, "%s", derr.reason);
			else if (rc == -ECANCELED)
				err_set(&t->kind_err, ERR_CANCELLED, "",
					"the caller went away: the search stopped");
			else if (rc == -ENOSPC)
				err_set(&t->kind_err, ERR_EXHAUSTED, field,
					"%s; nothing was touched", derr.reason);
			else
				err_set(&t->kind_err, ERR_INTERNAL, "", "DELTA planner failed: %s",
					strerror(-rc));
			return;
		}
		free(t->demand);
		t->demand = d;
		t->n_demand = n;
		t->has_delta = true;
		if (t->search_only)
			return;
	}
	jp_plan_leaf(t);
}

/*
 * A spec of this kind carries no leaf demand (the search makes it); a job
 * restored with the demand its search found is checked like any demand,
 * where a refusal is a bug, not the caller's.
 */
static bool parallelism_check(const struct ocsd_config *cfg, const struct jm_spec *spec,
			      struct err_info *err)
{
	struct lc_problem p;

	if (spec->n_demand &&
	    lc_validate(&cfg->fabric, spec->demand, spec->n_demand, NULL, 0, &p, 1) > 0) {
		err_set(err, ERR_INTERNAL, "", "the planned leaf demand is invalid: %s", p.reason);
		return false;
	}
	return true;
}

static void parallelism_figures(const struct jp_task *t, struct jm_figures *fig)
{
	fig->has_delta = t->has_delta;
	fig->delta = t->delta;
	if (t->has_delta)
		fig->plan_us += (int64_t)(t->delta.plan_ms * 1000.0);
}

const struct jm_kind jm_kind_parallelism = {
	.name = "parallelism",
	.demand = OCS_PLANNER_PARALLELISM,
	.demand_name = "a parallelism spec",
	.check = parallelism_check,
	.plan = parallelism_plan,
	.figures = parallelism_figures,
};
