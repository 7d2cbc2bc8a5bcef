/*
 * delta_baselines.h - traffic-matrix planners that DELTA is compared with
 * (DELTA paper section V-A2), scored on the same simulator (delta_sim.h):
 *
 *   Prop-Alloc  (after SiP-ML) each pod splits its port budget over its
 *               links in proportion to their volume W (both directions
 *               summed); a link gets the smaller of its two ends' shares.
 *   Sqrt-Alloc  the same with sqrt(W): sequential demands from one pod
 *               minimise total time with circuits proportional to sqrt(W).
 *   Iter-Halve  (after TopoOpt) every link starts with one circuit and
 *               weight W / 2; repeatedly the heaviest link that still fits
 *               both ends' budgets gets one more circuit and its weight is
 *               halved, until no link fits.
 *
 * Every link gets at least one circuit (a plan with an idle link is
 * invalid); pods over budget after rounding give back circuits from their
 * largest link first. Ties break on the lowest link index: deterministic.
 * Pure and thread-safe on a const problem.
 */
#ifndef OCS_DELTA_BASELINES_H
#define OCS_DELTA_BASELINES_H

#include "delta_dag.h"

enum delta_baseline {
	DELTA_PROP_ALLOC,
	DELTA_SQRT_ALLOC,
	DELTA_ITER_HALVE,
};

/* "prop-alloc", "sqrt-alloc", "iter-halve". */
const char *delta_baseline_name(enum delta_baseline kind);

/*
 * Checks that one circuit per link fits every pod's budget. Returns 0, or
 * -ENOSPC with err naming "port_budget[p]".
 */
int delta_check_min_ports(const struct delta_problem *p, struct delta_error *err);

/*
 * Fills x (one entry per link). Returns 0, -ENOSPC (budgets too small, err
 * filled) or -ENOMEM.
 */
int delta_baseline_plan(const struct delta_problem *p, enum delta_baseline kind, int *x,
			struct delta_error *err);

#endif
