/*
 * kind_rail.c - the rail job kind (rail-OCS fabrics, issue 12): a job is
 * the GPUs it holds (JobSpec.placement.gpus, GPU id = server * rails +
 * rail, spares included; solvers/fabric.h). There is nothing to plan and
 * no circuit of its own: the port map joins every active server's GPUs to
 * the rails whatever the jobs, so a job goes PENDING -> PROGRAMMING (an
 * empty change set) -> ACTIVE, and a release frees its GPUs. What the job
 * manager checks on top (jobs.c): each GPU healthy and joined to a rail
 * port (jm_deps.gpus_check), and held by no other live job.
 *
 * Its part of a transaction (kind_txn.h): the fabric's check of
 * cross-connects (rail_check_xcs, rail_swap.h, on the port map), and a GPU
 * swap stored with its intent (st_rail_intent_begin).
 */
#include <stdio.h>

#include "clock.h"
#include "config.h"
#include "jobs_internal.h"
#include "jobs_util.h"
#include "kind_txn.h"
#include "rail_swap.h"

static bool rail_check(const struct ocsd_config *cfg, const struct jm_spec *spec,
		       struct err_info *err)
{
	int64_t n_gpus = ocs_rail_gpus(&cfg->rail);

	if (cfg->kind != CFG_RAIL_OCS) {
		err_set(err, ERR_PRECONDITION, "placement", "the fabric is %s, not a rail-ocs",
			cfg_kind_name(cfg->kind));
		return false;
	}
	if (spec->n_gpus == 0) {
		err_set(err, ERR_INVALID, "placement.gpus",
			"required: the job's GPUs (server * %d + rail)", cfg->rail.rails);
		return false;
	}
	for (size_t i = 0; i < spec->n_gpus; i++)
		if (spec->gpus[i] < 0 || spec->gpus[i] >= n_gpus) {
			char field[64];

			snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", i);
			err_set(err, ERR_INVALID, field,
				"gpu %lld is not a GPU of the fabric (0..%lld)",
				(long long)spec->gpus[i], (long long)n_gpus - 1);
			return false;
		}
	return true;
}

const struct jm_kind jm_kind_rail = {
	.name = "rail",
	.rings = false,
	.gpus_only = true,
	.demand = OCS_PLANNER_LEAF_DEMAND, /* unused: rail jobs take no planner */
	.demand_name = "GPUs",
	.check = rail_check,
	.plan = NULL,
	.figures = NULL,
};

int krl_check_xcs(const void *ctx, const struct ocs_xc *xcs, size_t n, struct l2_violation *v)
{
	struct rail_violation rv;
	int bad = rail_check_xcs(ctx, xcs, n, &rv, 1);

	*v = (struct l2_violation){.xc = {0, 0, 0, 0}, .reason = "out of memory"};
	if (bad > 0) {
		v->xc = rv.xc;
		snprintf(v->reason, sizeof(v->reason), "%s", rv.reason);
	}
	return bad;
}

/* A GPU swap's intent: its cross-connects and the swap (kind_change), in one write. */
static int krl_swap_intent(void *state, const struct txn_deps *d, const struct txn_change *c,
			   const struct txn_plan *p, int64_t *txn_id)
{
	(void)state;
	(void)p;
	return st_rail_intent_begin(d->store, c->removals, c->n_removals, c->additions,
				    c->n_additions, c->kind_change, clk_wall_ms(d->clock), txn_id);
}

const struct txn_kind_ops krl_swap_ops = {.intent = krl_swap_intent};
