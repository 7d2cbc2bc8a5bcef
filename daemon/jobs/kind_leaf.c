/*
 * kind_leaf.c - the leaf-demand job kind: the scheduler gives the links it
 * needs per leaf pair (JobSpec.leaf_demand); planners leaf-centric (the
 * default) and pod-centric plan them directly.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "jobs_plan.h"
#include "jobs_util.h"

static bool leaf_check(const struct ocsd_config *cfg, const struct jm_spec *spec,
		       struct err_info *err)
{
	struct lc_problem p;

	if (spec->n_demand == 0) {
		err_set(err, ERR_INVALID, "leaf_demand.pairs", "the job asks for no links");
		return false;
	}
	if (lc_validate(&cfg->fabric, spec->demand, spec->n_demand, NULL, 0, &p, 1) > 0) {
		const char *idx = strchr(p.field, '[');

		err_set(err, ERR_INVALID, "", "%s", p.reason);
		snprintf(err->field, sizeof(err->field), "leaf_demand.pairs%s", idx ? idx : "");
		return false;
	}
	return true;
}

const struct jm_kind jm_kind_leaf = {
	.name = "leaf-demand",
	.demand = OCS_PLANNER_LEAF_DEMAND,
	.demand_name = "a leaf demand",
	.check = leaf_check,
	.plan = jp_plan_leaf,
	.figures = NULL,
};
