/*
 * delta_leaves.h - from DELTA's pod-level plan to a leaf-level demand for
 * the leaf-centric planner (issue 6 point 6): each pod pair's circuits are
 * shared among the leaf pairs its flows actually join.
 *
 * GPU positions: either the caller's list of the job's GPUs in rank order
 * (delta_workload_gpus() entries, order in delta_workload.h; each must sit
 * in the pod the spec gives its rank, once), or by default the first GPUs
 * of every pod, ordered by stage, then co-located replica, then lane; GPU n
 * of pod p is the fabric's GPU p * leaves_per_pod * k_leaf + n and hangs off
 * the leaf ocs_fabric_gpu_leaf() names. A PP flow joins lane r of a replica's
 * stage s to lane r of stage s+1; a DP ring flow joins the same GPU position
 * in consecutive pod sets.
 *
 * Distribution: for each real pod pair, the leaf pairs get weights = the
 * number of distinct GPU pairs its tasks join between them, and the pair's
 * circuits go one at a time to the leaf pair with the largest
 * weight / (circuits so far + 1) (D'Hondt; ties to the lower leaf pair)
 * among those whose two leaves still have a free uplink (k_leaf per leaf).
 * Circuits that find no such pair are counted as unplaced.
 *
 * Pure and thread-safe.
 */
#ifndef OCS_DELTA_LEAVES_H
#define OCS_DELTA_LEAVES_H

#include <stddef.h>
#include <stdint.h>

#include "delta_dag.h"
#include "delta_workload.h"
#include "fabric.h"

/* Links leaf a needs to leaf b (a < b, different pods). */
struct delta_leaf_links {
	int a, b;
	int links;
};

/*
 * Checks a list of the job's GPUs in rank order (delta_workload_gpus()
 * entries): every GPU in the fabric, in the pod the spec gives its rank,
 * listed once. Returns 0, -EINVAL with err ("placement.gpu_ids[i]" or
 * "placement.gpu_ids"), or -ENOMEM.
 */
int delta_check_gpu_ids(const struct ocs_fabric *f, const struct delta_workload *w,
			const int64_t *gpus, struct delta_error *err);

/*
 * Builds the leaf demand for plan x (links of the problem built from
 * w->dag); gpus may be NULL (default positions). Errors name
 * "placement.gpu_ids[i]" for a GPU outside the fabric or in the wrong pod. *out (sorted by a, b) is
 * allocated; caller frees with free(). *unplaced receives the circuits no leaf pair could take.
 * Returns 0, -EINVAL with err (the job does not fit the fabric: field "fabric" or "placement.*"),
 * or -ENOMEM.
 */
int delta_leaf_demand(const struct ocs_fabric *f, const struct delta_workload *w,
		      const struct delta_problem *p, const int *x, const int64_t *gpus,
		      struct delta_leaf_links **out, size_t *n_out, long *unplaced,
		      struct delta_error *err);

#endif
