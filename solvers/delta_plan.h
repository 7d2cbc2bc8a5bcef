/*
 * delta_plan.h - one call from a parallelism spec to a job's pod-level
 * circuits (and, given a fabric, its leaf-level demand), for the daemon's
 * SubmitJob/PlanJob with planner "delta-fast" or a baseline. It chains
 * delta_workload_build(), delta_problem_new(), DELTA-Fast or a baseline,
 * delta_workload_expand() and delta_leaf_demand(); the caller passes the
 * leaf demand to the leaf-centric planner (leafcentric.h) itself.
 *
 * Pure (no I/O, no globals; parallel only on the caller's pool) and
 * thread-safe. The result is owned by the caller: delta_job_plan_free().
 */
#ifndef OCS_DELTA_PLAN_H
#define OCS_DELTA_PLAN_H

#include <stddef.h>

#include "delta_ga.h"
#include "delta_leaves.h"
#include "delta_workload.h"
#include "fabric.h"
#include "ocs_pool.h"

enum delta_planner {
	DELTA_PLANNER_FAST,
	DELTA_PLANNER_PROP_ALLOC,
	DELTA_PLANNER_SQRT_ALLOC,
	DELTA_PLANNER_ITER_HALVE,
};

/* "delta-fast", "prop-alloc", "sqrt-alloc", "iter-halve"; 0 or -EINVAL. */
int delta_planner_parse(const char *name, enum delta_planner *out);

struct delta_job_plan {
	struct delta_pod_circuits *circuits; /* every real pod pair, i < j */
	size_t n_circuits;
	struct delta_sim_result sim; /* of one pod set (all are identical) */
	long ports_used;	     /* job-wide */
	long ports_available;	     /* job-wide: the job's GPUs in its pods */
	int pod_sets;
	struct delta_ga_stats stats;	      /* delta-fast only */
	struct delta_leaf_links *leaf_demand; /* when a fabric was given */
	size_t n_leaf_demand;
	long leaf_unplaced; /* circuits no leaf pair could take */
};

/*
 * Plans a job. params may be NULL (delta_ga_defaults()); fabric may be NULL
 * (no leaf demand); gpus (the job's GPUs in rank order, see
 * delta_workload.h) may be NULL for the default positions. Returns 0 and *out; -EINVAL or -ENOSPC
 * with err naming the field; -ENOMEM.
 */
int delta_plan_job(const struct delta_workload_spec *spec, enum delta_planner planner,
		   const struct delta_ga_params *params, const struct ocs_pool *pool,
		   const struct ocs_fabric *fabric, const int64_t *gpus,
		   struct delta_job_plan **out, struct delta_error *err);
void delta_job_plan_free(struct delta_job_plan *plan);

#endif
