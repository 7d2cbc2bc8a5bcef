/*
 * delta_ga.h - DELTA-Fast: the simulation-based, domain-adapted genetic
 * algorithm of the DELTA paper (Alg. 3, with Alg. 5 FeasibleRandomInit and
 * Alg. 6 RepairTopo) over the circuit counts x of a delta_problem.
 *
 * Fitness is (makespan, ports used), compared lexicographically: makespans
 * within a relative 1e-9 count as equal and then fewer ports win. The
 * population starts with the three baselines (delta_baselines.h) repaired
 * to the bounds (clipping x to Xbar never changes a schedule, see
 * delta_bounds.h) plus feasible random plans (Alg. 5), so the result is
 * never worse than the best baseline. Each generation keeps the elites,
 * fills up with tournament selection, uniform crossover, mutation (a +-1
 * step or a fresh value in [1, Xbar]) and repair (Alg. 6; an unrepairable
 * child is replaced by a feasible random plan). The search stops after
 * stall_generations without improvement, after max_generations, when the
 * caller's clock passes time_budget_ms, or once the caller's cancel flag is
 * set (read at every generation: the caller is gone, the result is not
 * wanted; no trim pass follows). A final greedy pass then removes
 * circuits one at a time while the makespan does not grow (the secondary
 * objective: fewest ports at the best makespan).
 *
 * Fitness evaluations run on the caller's pool; every random choice is made
 * serially from a splitmix64 generator seeded with `seed`, so a seed gives
 * the same plan with or without a pool, as long as no time budget cuts the
 * run short. Pure and thread-safe on a const problem.
 */
#ifndef OCS_DELTA_GA_H
#define OCS_DELTA_GA_H

#include <stdatomic.h>
#include <stdint.h>

#include "delta_dag.h"
#include "delta_sim.h"
#include "ocs_pool.h"

struct delta_ga_params {
	uint64_t seed;
	int population;		       /* N_pop, >= 4 */
	int elites;		       /* kept unchanged each generation, < population */
	int tournament;		       /* tournament size, >= 1 */
	double crossover_rate;	       /* 0..1 */
	double mutation_rate;	       /* per link, 0..1; 0 = 1 / links */
	int max_generations;	       /* hard cap, >= 0 */
	int stall_generations;	       /* stop after this many without improvement, >= 1 */
	double time_budget_ms;	       /* 0 = none; needs clock_ms */
	double (*clock_ms)(void *ctx); /* monotonic ms, supplied by the caller */
	void *clock_ctx;
	int trim_ports; /* run the fewest-ports pass (default 1) */
	/* NULL: none. Set by the caller (any thread) when the result is no
	 * longer wanted; the search only reads it, once per generation. */
	const atomic_bool *cancel;
};

/* population 32, elites 2, tournament 3, crossover 0.9, mutation auto,
 * max_generations 100000, stall 200, no time budget, trim on, seed 1. */
void delta_ga_defaults(struct delta_ga_params *params);

struct delta_ga_stats {
	int generations;	/* generations run */
	int best_generation;	/* last generation that improved the best */
	long evaluations;	/* simulations, including the trim pass */
	int stopped_by_time;	/* the time budget ended the search */
	int stopped_by_cancel;	/* the cancel flag ended the search */
	long ports_before_trim; /* ports of the best plan before the trim pass */
};

/*
 * Runs DELTA-Fast. xbar may be NULL (then delta_bounds() is computed).
 * Fills x (one entry per link), *result (simulation of x) and, if not NULL,
 * *stats. Returns 0; -EINVAL with err for bad params; -ENOSPC with err when
 * the budgets cannot give each link one circuit; -ECANCELED when the cancel
 * flag was set while the bounds were computed (no plan yet; later it stops
 * the search with the best plan so far); -ENOMEM.
 */
int delta_fast(const struct delta_problem *p, const struct delta_ga_params *params, const int *xbar,
	       const struct ocs_pool *pool, int *x, struct delta_sim_result *result,
	       struct delta_ga_stats *stats, struct delta_error *err);

#endif
