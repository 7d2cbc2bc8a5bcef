/*
 * planners.c - the planner catalogue (see planners.h). The table is
 * indexed by enum ocs_planner_id; tests/unit/test_planners.c checks that
 * every id has its entry and each demand kind exactly one default.
 */
#include "planners.h"

#include <string.h>

static const struct ocs_planner catalogue[OCS_PLANNER_COUNT] = {
	[OCS_PLANNER_LEAF_CENTRIC] = {.id = OCS_PLANNER_LEAF_CENTRIC,
				      .name = "leaf-centric",
				      .demand = OCS_PLANNER_LEAF_DEMAND,
				      .is_default = true,
				      .summary = "leaf-centric planning (LumosCore)"},
	[OCS_PLANNER_POD_CENTRIC] = {.id = OCS_PLANNER_POD_CENTRIC,
				     .name = "pod-centric",
				     .demand = OCS_PLANNER_LEAF_DEMAND,
				     .is_default = false,
				     .summary = "pod-centric baseline, same contract"},
	[OCS_PLANNER_DELTA_FAST] =
		{.id = OCS_PLANNER_DELTA_FAST,
		 .name = "delta-fast",
		 .demand = OCS_PLANNER_PARALLELISM,
		 .is_default = true,
		 .summary = "DAG-aware pod-pair circuits (DELTA-Fast genetic search)"},
	[OCS_PLANNER_PROP_ALLOC] = {.id = OCS_PLANNER_PROP_ALLOC,
				    .name = "prop-alloc",
				    .demand = OCS_PLANNER_PARALLELISM,
				    .is_default = false,
				    .summary = "baseline: circuits proportional to volume"},
	[OCS_PLANNER_SQRT_ALLOC] =
		{.id = OCS_PLANNER_SQRT_ALLOC,
		 .name = "sqrt-alloc",
		 .demand = OCS_PLANNER_PARALLELISM,
		 .is_default = false,
		 .summary = "baseline: circuits proportional to the square root of volume"},
	[OCS_PLANNER_ITER_HALVE] =
		{.id = OCS_PLANNER_ITER_HALVE,
		 .name = "iter-halve",
		 .demand = OCS_PLANNER_PARALLELISM,
		 .is_default = false,
		 .summary = "baseline: heaviest pair first, weight halved each time"},
};

const struct ocs_planner *ocs_planner_at(size_t i)
{
	return i < OCS_PLANNER_COUNT ? &catalogue[i] : NULL;
}

const struct ocs_planner *ocs_planner_find(const char *name)
{
	for (size_t i = 0; name && i < OCS_PLANNER_COUNT; i++)
		if (strcmp(catalogue[i].name, name) == 0)
			return &catalogue[i];
	return NULL;
}

const struct ocs_planner *ocs_planner_default(enum ocs_planner_demand demand)
{
	for (size_t i = 0; i < OCS_PLANNER_COUNT; i++)
		if (catalogue[i].demand == demand && catalogue[i].is_default)
			return &catalogue[i];
	return NULL;
}

const char *ocs_planner_demand_name(enum ocs_planner_demand demand)
{
	return demand == OCS_PLANNER_PARALLELISM ? "parallelism" : "leaf_demand";
}
