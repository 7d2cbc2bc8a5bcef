/*
 * kind_ring.c - the ring job kind (OCSTrx ring domains, issue 11): the
 * scheduler asks for TP rings (JobSpec.ring: tp, GPUs or rings,
 * orchestration); hbd_plan (solvers/hbd_ring.h) picks the nodes on the pool
 * against a snapshot of the ring state (which nodes are free, held or
 * faulty), and the change set is every ring with the settings of every
 * bundle of its nodes. A ring job has no circuits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "jobs_internal.h"
#include "jobs_util.h"

static bool ring_check(const struct ocsd_config *cfg, const struct jm_spec *spec,
		       struct err_info *err)
{
	const struct jm_ring_request *r = spec->ring;
	const struct ocs_ring_domain *d = &cfg->ring;
	enum hbd_orch orch;

	if (cfg->kind != CFG_OCSTRX_RING) {
		err_set(err, ERR_PRECONDITION, "ring", "the fabric is %s, not an ocstrx-ring",
			cfg_kind_name(cfg->kind));
		return false;
	}
	if (r->tp <= 0 || r->tp % d->gpus_per_node != 0) {
		err_set(err, ERR_INVALID, "ring.tp", "%d is not a multiple of the %d GPUs per node",
			r->tp, d->gpus_per_node);
		return false;
	}
	if (r->gpus < 0 || r->gpus % r->tp != 0 || r->gpus > ocs_ring_gpus(d)) {
		err_set(err, ERR_INVALID, "ring.gpus",
			"%lld is not a multiple of tp %d within the domain's %lld GPUs",
			(long long)r->gpus, r->tp, (long long)ocs_ring_gpus(d));
		return false;
	}
	if (r->rings < 0 || (r->rings && r->gpus)) {
		err_set(err, ERR_INVALID, "ring.rings", "%d: give gpus or rings, not both",
			r->rings);
		return false;
	}
	if (r->orchestration[0] && hbd_orch_parse(r->orchestration, &orch) != 0) {
		err_set(err, ERR_INVALID, "ring.orchestration",
			"\"%s\" is not dcn-free, fat-tree or greedy", r->orchestration);
		return false;
	}
	return true;
}

/* "job.tp" -> "ring.tp": the solver names its request "job", the API "ring". */
static void ring_field(const char *solver_field, char *out, size_t len)
{
	const char *dot = solver_field ? strchr(solver_field, '.') : NULL;

	snprintf(out, len, "ring%s", dot ? dot : "");
}

static void ring_plan(struct jp_task *t)
{
	struct hbd_request req;
	struct hbd_plan p = {0};
	struct hbd_error e = {0};
	int64_t start = clk_mono_us(t->clock);
	int rc;

	t->refused = true;
	if (jr_request(&t->ring, &t->domain, &req) != 0) {
		err_set(&t->err, ERR_INVALID, "ring.orchestration", "unknown orchestration");
		return;
	}
	rc = hbd_plan(&t->domain, t->use, &req, &p, &e);
	p.plan_us = clk_mono_us(t->clock) - start;
	if (rc == -ENOSPC) {
		err_set(&t->err, ERR_EXHAUSTED, t->ring.gpus ? "ring.gpus" : "ring.rings",
			"%d ring(s) of %d nodes needed, %d available: %s", p.rings_needed,
			t->ring.tp / t->domain.gpus_per_node, p.rings_available, e.reason);
	} else if (rc == -EINVAL) {
		err_set(&t->err, ERR_INVALID, "", "%s", e.reason);
		ring_field(e.field, t->err.field, sizeof(t->err.field));
	} else if (rc) {
		err_set(&t->err, ERR_INTERNAL, "", "ring plan: %s", strerror(-rc));
	} else if (jr_plan_change(&t->domain, &p, &t->change) != 0) {
		err_set(&t->err, ERR_INTERNAL, "", "out of memory");
	} else {
		t->refused = false;
	}
	if (rc == 0 || rc == -ENOSPC) {
		struct jm_ring_figures *f = &t->fig.ring;

		t->fig.has_ring = true;
		snprintf(f->orchestration, sizeof(f->orchestration), "%s", hbd_orch_name(req.orch));
		snprintf(t->fig.planner, sizeof(t->fig.planner), "%s", f->orchestration);
		f->rings = p.n_rings;
		f->nodes_per_ring = p.m;
		f->gpus_placed = p.gpus_placed;
		f->gpus_wasted = p.gpus_wasted;
		f->cross_tor_share = p.cross_tor_share;
		f->constraints_kept = p.constraints_kept;
		f->constraints_total = p.constraints_total;
		t->fig.plan_us = p.plan_us;
	}
	hbd_plan_clear(&p);
}

const struct jm_kind jm_kind_ring = {
	.name = "ring",
	.rings = true,
	.demand = OCS_PLANNER_LEAF_DEMAND, /* unused: ring jobs take no planner option */
	.demand_name = "a ring request",
	.check = ring_check,
	.plan = ring_plan,
	.figures = NULL,
};
