/*
 * planners.h - the catalogue of ocsd's planners: each planner's name (as
 * JobSpec.options.planner, ocsplan's subcommands and the metrics spell it),
 * the kind of demand it plans, and which planner is the default of each
 * kind. This is the one place planner names are written: the daemon hands
 * them to the northbound through its limits, ocsplan dispatches on them.
 *
 * Pure: a const table and look-ups over it, libc only; every call is
 * thread-safe and every pointer returned is to static storage.
 */
#ifndef OCS_PLANNERS_H
#define OCS_PLANNERS_H

#include <stdbool.h>
#include <stddef.h>

/* The kind of demand a planner takes; each kind has one default planner. */
enum ocs_planner_demand {
	OCS_PLANNER_LEAF_DEMAND, /* sparse leaf-pair links (JobSpec.leaf_demand, leafcentric.h) */
	OCS_PLANNER_PARALLELISM, /* a parallelism spec (JobSpec.parallelism, delta_plan.h) */
};

/* Every planner, in catalogue order: leaf demand ones, then parallelism ones. */
enum ocs_planner_id {
	OCS_PLANNER_LEAF_CENTRIC,
	OCS_PLANNER_POD_CENTRIC,
	OCS_PLANNER_DELTA_FAST,
	OCS_PLANNER_PROP_ALLOC,
	OCS_PLANNER_SQRT_ALLOC,
	OCS_PLANNER_ITER_HALVE,
	OCS_PLANNER_COUNT
};

struct ocs_planner {
	enum ocs_planner_id id;
	const char *name; /* "leaf-centric" */
	enum ocs_planner_demand demand;
	bool is_default;     /* planned with when a job of this demand names no planner */
	const char *summary; /* one line for help texts */
};

/* The i-th planner in catalogue order (i = its id); NULL from OCS_PLANNER_COUNT on. */
const struct ocs_planner *ocs_planner_at(size_t i);
/* The planner called name (exact spelling); NULL when unknown or name is NULL. */
const struct ocs_planner *ocs_planner_find(const char *name);
/* The default planner of a demand kind: leaf-centric, delta-fast. */
const struct ocs_planner *ocs_planner_default(enum ocs_planner_demand demand);
/* The JobSpec field that carries a demand kind: "leaf_demand", "parallelism". */
const char *ocs_planner_demand_name(enum ocs_planner_demand demand);

#endif
