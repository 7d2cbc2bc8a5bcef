/*
 * leaf.c - the ocsplan subcommands `leaf-centric` and `pod-centric`: read a
 * fabric, a sparse leaf demand and optionally the existing cross-connects
 * and the leaf-spine usage of live jobs, plan with lc_plan() / pc_plan() (solvers/leafcentric.h)
 * and write the plan as JSON. The request and answer formats are in solvers/README.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "io.h"
#include "leaf.h"
#include "leafcentric.h"
#include "planners.h"

int ocsplan_leaf_main(const struct ocs_planner *planner, int argc, char **argv);

/* 64x the 131,072-GPU fabric of deploy/fabrics (256 pods x 16 spines x 32 ports). */
#define MAX_SPINE_PORTS (64LL * 256 * 16 * 32)

struct request {
	struct ocs_fabric fabric;
	bool fabric_ok;
	struct lc_demand *demand;
	size_t n_demand;
	struct ocs_xc *existing;
	size_t n_existing;
	struct lc_leaf_usage *usage;
	size_t n_usage;
};

static void parse_fabric(const json_t *fab, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"pods",  "k_leaf", "k_spine", "tau",
					    "k_ocs", "wiring", NULL};
	struct ocs_fabric_problem fp[16];
	const char *wiring = NULL;
	bool ok = true;
	int n;

	if (!json_is_object(fab)) {
		ocsplan_problem(p, "fabric", fab ? "must be an object" : "missing");
		return;
	}
	ocsplan_unknown_fields(fab, "fabric", known, p);
	ok &= ocsplan_get_int(fab, "fabric", "pods", 0, 1 << 16, &r->fabric.pods, p);
	ok &= ocsplan_get_int(fab, "fabric", "k_leaf", 0, 1 << 12, &r->fabric.k_leaf, p);
	ok &= ocsplan_get_int(fab, "fabric", "k_spine", 0, 1 << 12, &r->fabric.k_spine, p);
	ok &= ocsplan_get_int(fab, "fabric", "tau", 0, 1 << 12, &r->fabric.tau, p);
	ok &= ocsplan_get_int(fab, "fabric", "k_ocs", 0, 1 << 20, &r->fabric.k_ocs, p);
	if (ocsplan_get_string(fab, "fabric", "wiring", &wiring, p) &&
	    ocs_wiring_parse(wiring, &r->fabric.wiring) != 0) {
		ocsplan_problem(p, "fabric.wiring", "\"%s\" is not straight, dual or cross",
				wiring);
		ok = false;
	}
	if (!ok || !wiring)
		return;
	n = ocs_fabric_validate(&r->fabric, fp, 16);
	for (int i = 0; i < n && i < 16; i++) {
		char field[64];

		/* The validator names config fields ("k-leaf"); the request spells them k_leaf. */
		snprintf(field, sizeof(field), "fabric.%s", fp[i].field);
		for (char *c = field; *c; c++)
			if (*c == '-')
				*c = '_';
		ocsplan_problem(p, field, "%s", fp[i].reason);
	}
	if (n > 16)
		ocsplan_problem(p, "fabric", "%d more problems", n - 16);
	/* Working memory grows with spine ports; refuse fabrics far past any real one. */
	if (n == 0 && ocs_fabric_spine_ocs_ports_total(&r->fabric) > MAX_SPINE_PORTS) {
		ocsplan_problem(p, "fabric", "%lld spine ports, more than ocsplan handles (%lld)",
				(long long)ocs_fabric_spine_ocs_ports_total(&r->fabric),
				(long long)MAX_SPINE_PORTS);
		n = 1;
	}
	r->fabric_ok = n == 0;
}

static void parse_demand(const json_t *arr, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"a", "b", "links", NULL};

	r->n_demand = json_array_size(arr);
	r->demand = calloc(r->n_demand ? r->n_demand : 1, sizeof(*r->demand));
	if (!r->demand) {
		ocsplan_problem(p, "demand", "out of memory");
		return;
	}
	for (size_t i = 0; i < r->n_demand; i++) {
		const json_t *e = json_array_get(arr, i);
		struct lc_demand *d = &r->demand[i];
		char where[48];

		snprintf(where, sizeof(where), "demand[%zu]", i);
		if (!json_is_object(e)) {
			ocsplan_problem(p, where, "must be an object {\"a\", \"b\", \"links\"}");
			continue;
		}
		ocsplan_unknown_fields(e, where, known, p);
		ocsplan_get_int(e, where, "a", 0, INT_MAX, &d->a, p);
		ocsplan_get_int(e, where, "b", 0, INT_MAX, &d->b, p);
		ocsplan_get_int(e, where, "links", 0, INT_MAX, &d->links, p);
	}
}

static void parse_existing(const json_t *arr, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"group", "device", "in", "out", NULL};

	r->n_existing = json_array_size(arr);
	r->existing = calloc(r->n_existing ? r->n_existing : 1, sizeof(*r->existing));
	if (!r->existing) {
		ocsplan_problem(p, "existing", "out of memory");
		return;
	}
	for (size_t i = 0; i < r->n_existing; i++) {
		const json_t *e = json_array_get(arr, i);
		struct ocs_xc *x = &r->existing[i];
		char where[48];

		snprintf(where, sizeof(where), "existing[%zu]", i);
		if (!json_is_object(e)) {
			ocsplan_problem(
				p, where,
				"must be an object {\"group\", \"device\", \"in\", \"out\"}");
			continue;
		}
		ocsplan_unknown_fields(e, where, known, p);
		ocsplan_get_int(e, where, "group", 0, INT_MAX, &x->group, p);
		ocsplan_get_int(e, where, "device", 0, INT_MAX, &x->device, p);
		ocsplan_get_int(e, where, "in", 0, INT_MAX, &x->in, p);
		ocsplan_get_int(e, where, "out", 0, INT_MAX, &x->out, p);
	}
}

static void parse_usage(const json_t *arr, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"leaf", "spine", "links", NULL};

	r->n_usage = json_array_size(arr);
	r->usage = calloc(r->n_usage ? r->n_usage : 1, sizeof(*r->usage));
	if (!r->usage) {
		ocsplan_problem(p, "leaf_spine_usage", "out of memory");
		return;
	}
	for (size_t i = 0; i < r->n_usage; i++) {
		const json_t *e = json_array_get(arr, i);
		struct lc_leaf_usage *u = &r->usage[i];
		char where[48];

		snprintf(where, sizeof(where), "leaf_spine_usage[%zu]", i);
		if (!json_is_object(e)) {
			ocsplan_problem(p, where,
					"must be an object {\"leaf\", \"spine\", \"links\"}");
			continue;
		}
		ocsplan_unknown_fields(e, where, known, p);
		ocsplan_get_int(e, where, "leaf", 0, INT_MAX, &u->leaf, p);
		ocsplan_get_int(e, where, "spine", 0, INT_MAX, &u->spine, p);
		ocsplan_get_int(e, where, "links", 0, INT_MAX, &u->links, p);
	}
}

static void parse_request(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"fabric", "demand", "existing", "leaf_spine_usage",
					    NULL};
	const json_t *demand, *existing, *usage;
	int before;

	if (!json_is_object(top)) {
		ocsplan_problem(p, "input", "must be a JSON object with fabric and demand");
		return;
	}
	ocsplan_unknown_fields(top, "", known, p);
	parse_fabric(json_object_get(top, "fabric"), r, p);
	if (ocsplan_get_array(top, "", "demand", false, &demand, p))
		parse_demand(demand, r, p);
	if (ocsplan_get_array(top, "", "existing", true, &existing, p) && existing)
		parse_existing(existing, r, p);
	if (ocsplan_get_array(top, "", "leaf_spine_usage", true, &usage, p) && usage)
		parse_usage(usage, r, p);
	/* Checks against the fabric only make sense once every field has its type. */
	before = p->count;
	if (r->fabric_ok && before == 0) {
		struct lc_problem *lp = calloc(64, sizeof(*lp));
		int n = lp ? lc_validate(&r->fabric, r->demand, r->n_demand, r->existing,
					 r->n_existing, lp, 64)
			   : 0;

		if (lp && n < 64)
			n += lc_validate_usage(&r->fabric, r->usage, r->n_usage, lp + n, 64 - n);
		else if (lp)
			n += lc_validate_usage(&r->fabric, r->usage, r->n_usage, NULL, 0);

		if (!lp)
			ocsplan_problem(p, "input", "out of memory");
		for (int i = 0; i < n && i < 64; i++)
			ocsplan_problem(p, lp[i].field, "%s", lp[i].reason);
		if (n > 64)
			ocsplan_problem(p, "input", "%d more problems not shown", n - 64);
		free(lp);
	}
}

static json_t *circuits_json(const struct rz_circuits *c, size_t n)
{
	json_t *arr = json_array();
	bool ok = arr != NULL;

	for (size_t i = 0; ok && i < n; i++)
		ok = ocsplan_append(arr, json_pack("{s:i, s:i, s:i, s:i}", "i", c[i].i, "j", c[i].j,
						   "h", c[i].h, "circuits", c[i].circuits));
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *xcs_json(const struct ocs_xc *x, size_t n)
{
	json_t *arr = json_array();
	bool ok = arr != NULL;

	for (size_t i = 0; ok && i < n; i++)
		ok = ocsplan_append(arr,
				    json_pack("{s:i, s:i, s:i, s:i}", "group", x[i].group, "device",
					      x[i].device, "in", x[i].in, "out", x[i].out));
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* Whether the demand fits (leafcentric.h, enum lc_fit) and what binds. */
static json_t *fit_json(const struct lc_plan *pl)
{
	static const char *const status[] = {"placed", "none", "gave-up", "unchecked"};
	static const char *const limit[] = {"", "leaf-uplinks", "pod-ports", "device-ports",
					    "together"};

	return json_pack("{s:s, s:s, s:s, s:I}", "status", status[pl->fit], "limit",
			 limit[pl->limit], "why", pl->why, "search_steps",
			 (json_int_t)pl->fit_steps);
}

json_t *ocsplan_lc_plan_json(const struct lc_plan *pl, const struct lc_options *opt)
{
	json_t *plan = json_object(), *assignment = json_array(), *unplaced = json_array();
	bool ok = ocsplan_set(plan, "spine_assignment", assignment) && unplaced;

	for (size_t i = 0; ok && i < pl->n_assignment; i++)
		ok = ocsplan_append(assignment,
				    json_pack("{s:i, s:i, s:i, s:i}", "a", pl->assignment[i].a, "b",
					      pl->assignment[i].b, "h", pl->assignment[i].h,
					      "links", pl->assignment[i].links));
	for (size_t i = 0; ok && i < pl->n_unplaced; i++)
		ok = ocsplan_append(unplaced,
				    json_pack("{s:i, s:i, s:i}", "a", pl->unplaced[i].a, "b",
					      pl->unplaced[i].b, "links", pl->unplaced[i].links));
	ok = ok &&
	     ocsplan_set(plan, "logical_topology", circuits_json(pl->topology, pl->n_topology)) &&
	     ocsplan_set(plan, "max_contention", ocs_json_number(pl->max_contention)) &&
	     ocsplan_set(plan, "contended_leaves",
			 json_integer((json_int_t)pl->contended_leaves)) &&
	     ocsplan_set(plan, "contention_free", json_boolean(pl->contention_free)) &&
	     ocsplan_set(plan, "unplaced", json_incref(unplaced));
	if (ok && opt->realize)
		ok = ocsplan_set(plan, "cross_connects", xcs_json(pl->xcs, pl->n_xcs));
	ok = ok &&
	     ocsplan_set(plan, "unrealized", circuits_json(pl->unrealized, pl->n_unrealized)) &&
	     ocsplan_set(plan, "changed_existing", json_integer((json_int_t)pl->changed_existing));
	if (ok && opt->replan)
		ok = ocsplan_set(plan, "moved_existing", xcs_json(pl->moved, pl->n_moved));
	ok = ok && ocsplan_set(plan, "fit", fit_json(pl));
	ok = ok && ocsplan_set(plan, "stats",
			       json_pack("{s:o, s:o, s:I}", "plan_ms", ocs_json_number(pl->plan_ms),
					 "realize_ms", ocs_json_number(pl->realize_ms),
					 "unrealized_before_repair",
					 (json_int_t)pl->unrealized_before_repair));
	json_decref(unplaced);
	if (!ok) {
		json_decref(plan);
		return NULL;
	}
	return plan;
}

int ocsplan_leaf_main(const struct ocs_planner *planner, int argc, char **argv)
{
	struct ocsplan_io io = {0};
	struct ocsplan_problems p = {0};
	struct lc_options opt = {0};
	struct request r = {0};
	json_t *top, *answer;
	struct lc_plan *pl = NULL;
	int code = OCSPLAN_EXIT_INVALID, rc;

	for (int i = 1; i < argc; i++) {
		int used = ocsplan_io_option(&io, argc, argv, &i, &p);

		if (used != 0)
			continue;
		if (strcmp(argv[i], "--realize") == 0)
			opt.realize = true;
		else if (strcmp(argv[i], "--replan") == 0)
			opt.replan = true;
		else
			ocsplan_problem(&p, argv[i], "unknown option for %s", planner->name);
	}
	if (p.count)
		return OCSPLAN_EXIT_INVALID;
	top = ocsplan_read_json(&io, &p, &code);
	if (!top)
		return code;
	parse_request(top, &r, &p);
	json_decref(top);
	if (p.count) {
		free(r.demand);
		free(r.existing);
		free(r.usage);
		return OCSPLAN_EXIT_INVALID;
	}
	opt.usage = r.usage;
	opt.n_usage = r.n_usage;
	rc = (planner->id == OCS_PLANNER_POD_CENTRIC ? pc_plan : lc_plan)(
		&r.fabric, r.demand, r.n_demand, r.existing, r.n_existing, &opt, &pl);
	free(r.demand);
	free(r.existing);
	free(r.usage);
	opt.usage = NULL;
	opt.n_usage = 0;
	if (rc) {
		fprintf(stderr, "ocsplan: planning failed: %s\n", strerror(-rc));
		return rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
	}
	answer = ocsplan_lc_plan_json(pl, &opt);
	code = ocsplan_write_json(&io, answer);
	json_decref(answer);
	lc_plan_free(pl);
	return code;
}
