/*
 * delta_sim.h - the discrete-event simulator that scores a DELTA plan (the
 * fitness function of DELTA-Fast and the yardstick of the baselines).
 *
 * Contract (issue 6; any plan can be re-checked independently with it):
 *  - time starts at 0; a task starts at the latest of its predecessors'
 *    finish plus delay_ms and its release_ms (0 for explicit DAGs; tasks
 *    without predecessors start at their release);
 *  - directions are independent: a link with x circuits carries x * B each
 *    way;
 *  - while tasks are active on direction i -> j, each of their flows gets
 *    min(B, x * B / total active flows on i -> j), so a task moves F times
 *    that; rates change only when a task starts or finishes;
 *  - a task of zero volume finishes at its start; a task with volume on a
 *    link without circuits never finishes and makes the plan invalid;
 *  - the makespan is the last finish;
 *  - the critical path is traced back from the last-finishing task (lowest
 *    index on a tie) through the predecessor that determined each start
 *    (the one with the largest finish + delay; lowest task index on a tie;
 *    none when the release determined it); critical_comm_ms is the sum of
 *    the durations of the tasks on it;
 *  - nct divides critical_comm_ms by the same quantity under an ideal
 *    network where every task runs at F * B from its start (its own
 *    schedule and critical path); 1 when that is 0.
 *
 * Times compare with a relative tolerance of 1e-9 for ties. The simulation
 * is deterministic and allocates its scratch space per call. Thread-safe:
 * any number of simulations may run at once on one const problem.
 */
#ifndef OCS_DELTA_SIM_H
#define OCS_DELTA_SIM_H

#include "delta_dag.h"

/*
 * Validates and compiles a DAG (delta_problem_compile() in delta_dag.h, same
 * errors) and records the critical time of its ideal schedule. Returns NULL
 * with err filled on a bad input or on allocation failure (field "memory").
 * Caller frees with delta_problem_free().
 */
struct delta_problem *delta_problem_new(const struct delta_dag *dag, struct delta_error *err);

struct delta_sim_result {
	double makespan_ms;
	double critical_comm_ms;
	double nct;
	int critical_tasks; /* tasks on the critical path */
};

/*
 * Simulates the plan x (one circuit count per link, >= 0). start_ms and
 * finish_ms, when not NULL, receive n_tasks entries each. Returns 0, -EDOM
 * when some task can never finish (a link without circuits), or -ENOMEM.
 */
int delta_simulate(const struct delta_problem *p, const int *x, struct delta_sim_result *out,
		   double *start_ms, double *finish_ms);

/*
 * The ideal-network schedule (every task at F * B from its start): fills
 * out (nct = 1) and, when not NULL, start/finish per task. Returns 0 or
 * -ENOMEM.
 */
int delta_simulate_ideal(const struct delta_problem *p, struct delta_sim_result *out,
			 double *start_ms, double *finish_ms);

#endif
