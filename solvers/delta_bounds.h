/*
 * delta_bounds.h - per-link capacity upper bounds Xbar for DELTA (the
 * paper's Alg. 2 XUpperBoundEstimation with Alg. 4 CalTaskTimeWindows).
 *
 * A link never needs more circuits than the largest number of flows that can
 * be active at once in one of its directions: beyond that every flow already
 * runs at B. For every task, [EST, LCT] is a window that contains its
 * execution in any valid plan (every link with at least one circuit):
 *   tau_m  = V / (F * B)                    shortest possible duration
 *   EST    = forward longest path with tau  (Alg. 4 step 2)
 *   T_up   = makespan bound: longest path with V_dir(m) / B, where V_dir is
 *            the total volume of m's direction (a busy direction moves at
 *            least B, so no task can take longer)
 *   LCT    = backward from T_up with tau and delta (Alg. 4 step 3)
 * For each direction, the distinct EST/LCT values cut time into windows; in
 * each window the tasks whose [EST, LCT) covers its midpoint may overlap,
 * except pairs ordered by the transitive closure of the DAG. The largest
 * flow sum of a set of mutually unordered tasks (a maximum-weight
 * independent set of the conflict graph) bounds the concurrency. MWIS is
 * solved exactly by branch and bound for windows of up to 30 tasks; larger
 * windows use a chain-cover bound (tasks greedily split into chains of the
 * DAG order; an independent set holds at most one task per chain), which is
 * never below the MWIS, so Xbar stays a valid upper bound.
 *
 * Pure and thread-safe on a const problem.
 */
#ifndef OCS_DELTA_BOUNDS_H
#define OCS_DELTA_BOUNDS_H

#include <stdatomic.h>

#include "delta_dag.h"

/*
 * Alg. 4: fills est_ms and lct_ms (n_tasks entries each) and returns T_up
 * via *t_up_ms. Returns 0 or -ENOMEM.
 */
int delta_time_windows(const struct delta_problem *p, double *est_ms, double *lct_ms,
		       double *t_up_ms);

/*
 * Alg. 2: fills xbar (one entry per link, each >= 1). Returns 0 or -ENOMEM.
 */
int delta_bounds(const struct delta_problem *p, int *xbar);
/*
 * The same, reading cancel (NULL: none; set by the caller from any thread)
 * between windows: -ECANCELED (xbar unfinished) once it is set. On large
 * DAGs the bounds take seconds (issue 14 #8).
 */
int delta_bounds_until(const struct delta_problem *p, int *xbar, const atomic_bool *cancel);

#endif
