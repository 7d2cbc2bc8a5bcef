/*
 * hbd.c - the ocsplan subcommand `hbd-ring`: read an OCSTrx ring domain
 * (the members of the fabric file's ocstrx-ring object), the faulty and
 * busy nodes and one job, plan its TP rings with hbd_plan()
 * (solvers/hbd_ring.h) and write the rings, the figures and the bundle
 * settings of every ring node as JSON. With "fail": NODE it then repairs
 * the first ring holding NODE with hbd_repair() and adds the outcome.
 *
 * Exit codes (issue 11, section 2): 0 planned; 1 the job does not fit (a
 * JSON error on stdout with the rings needed and available) or an I/O
 * failure; 2 invalid input, one "field: reason" line per problem on stderr.
 * The request and answer formats are in solvers/README.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hbd_ring.h"
#include "io.h"

int ocsplan_hbd_main(int argc, char **argv);

/* Domains past this many nodes are refused (64x the largest deploy/fabrics domain). */
#define MAX_NODES (1 << 22)

struct request {
	struct ocs_ring_domain d;
	bool domain_ok;
	uint8_t *use;
	struct hbd_request job;
	int fail; /* -1: no repair asked */
};

static void parse_domain(const json_t *obj, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"tors",   "nodes-per-tor", "gpus-per-node",
					    "k-hops", "bundles",       "tors-per-agg",
					    "closed", "devices",       NULL};
	const char *w = "ocstrx-ring";
	struct ocs_fabric_problem fp[16];
	const json_t *closed;
	bool ok = true;
	int n;

	if (!json_is_object(obj)) {
		ocsplan_problem(p, w, obj ? "must be an object" : "missing");
		return;
	}
	ocsplan_unknown_fields(obj, w, known, p);
	ok &= ocsplan_get_int(obj, w, "tors", 1, MAX_NODES, &r->d.tors, p);
	ok &= ocsplan_get_int(obj, w, "nodes-per-tor", 1, MAX_NODES, &r->d.nodes_per_tor, p);
	ok &= ocsplan_get_int(obj, w, "gpus-per-node", 1, 1024, &r->d.gpus_per_node, p);
	ok &= ocsplan_get_int(obj, w, "k-hops", 1, UINT8_MAX, &r->d.k_hops, p);
	ok &= ocsplan_get_int(obj, w, "bundles", 1, 1024, &r->d.bundles, p);
	r->d.tors_per_agg = 1;
	if (json_object_get(obj, "tors-per-agg"))
		ok &= ocsplan_get_int(obj, w, "tors-per-agg", 1, MAX_NODES, &r->d.tors_per_agg, p);
	closed = json_object_get(obj, "closed");
	if (closed && !json_is_boolean(closed)) {
		ocsplan_problem(p, "ocstrx-ring.closed", "must be true or false");
		ok = false;
	}
	r->d.closed = json_is_true(closed);
	if (!ok)
		return;
	if ((int64_t)r->d.tors * r->d.nodes_per_tor > MAX_NODES) {
		ocsplan_problem(p, "ocstrx-ring", "more than %d nodes", MAX_NODES);
		return;
	}
	n = ocs_ring_validate(&r->d, fp, 16);
	for (int i = 0; i < n && i < 16; i++) {
		char field[64];

		snprintf(field, sizeof(field), "ocstrx-ring.%s", fp[i].field);
		ocsplan_problem(p, field, "%s", fp[i].reason);
	}
	r->domain_ok = n == 0;
}

/* Marks the nodes of list `key` with `mark`; a node already marked otherwise is a problem. */
static void parse_nodes(const json_t *top, const char *key, uint8_t mark, struct request *r,
			struct ocsplan_problems *p)
{
	const json_t *arr;
	int n = ocs_ring_nodes(&r->d);

	if (!ocsplan_get_array(top, "", key, true, &arr, p) || !arr)
		return;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *v = json_array_get(arr, i);
		char f[48];
		json_int_t node;

		snprintf(f, sizeof(f), "%s[%zu]", key, i);
		if (!json_is_integer(v)) {
			ocsplan_problem(p, f, "must be a node id");
			continue;
		}
		node = json_integer_value(v);
		if (node < 0 || node >= n) {
			ocsplan_problem(p, f, "unknown node %lld (the domain has nodes 0..%d)",
					(long long)node, n - 1);
			continue;
		}
		if (r->use[node] != HBD_NODE_FREE && r->use[node] != mark)
			ocsplan_problem(p, f, "node %lld is also listed in faulty_nodes",
					(long long)node);
		else
			r->use[node] = mark;
	}
}

static void parse_job(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"gpus", "tp", NULL};
	const json_t *job = json_object_get(top, "job");
	int gpus = 0;
	bool ok = true;

	if (!json_is_object(job)) {
		ocsplan_problem(p, "job", job ? "must be an object {\"gpus\", \"tp\"}" : "missing");
		return;
	}
	ocsplan_unknown_fields(job, "job", known, p);
	ok &= ocsplan_get_int(job, "job", "tp", 1, INT_MAX, &r->job.tp, p);
	ok &= ocsplan_get_int(job, "job", "gpus", 0, INT_MAX, &gpus, p);
	r->job.gpus = gpus;
	if (!r->domain_ok || !ok)
		return;
	if (r->job.tp % r->d.gpus_per_node != 0)
		ocsplan_problem(p, "job.tp", "%d is not a multiple of gpus-per-node (%d)",
				r->job.tp, r->d.gpus_per_node);
	else if (r->job.gpus % r->job.tp != 0)
		ocsplan_problem(p, "job.gpus", "%lld is not a multiple of tp (%d)",
				(long long)r->job.gpus, r->job.tp);
}

static void parse_request(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"ocstrx-ring",   "faulty_nodes", "busy_nodes", "job",
					    "orchestration", "seed",	     "fail",	   NULL};
	const char *orch = "dcn-free";
	int seed = 0;

	if (!json_is_object(top)) {
		ocsplan_problem(p, "input", "must be a JSON object with ocstrx-ring and job");
		return;
	}
	ocsplan_unknown_fields(top, "", known, p);
	parse_domain(json_object_get(top, "ocstrx-ring"), r, p);
	if (json_object_get(top, "orchestration") &&
	    ocsplan_get_string(top, "", "orchestration", &orch, p) &&
	    hbd_orch_parse(orch, &r->job.orch) != 0)
		ocsplan_problem(p, "orchestration", "\"%s\" is not dcn-free, fat-tree or greedy",
				orch);
	if (json_object_get(top, "seed") && ocsplan_get_int(top, "", "seed", 0, INT_MAX, &seed, p))
		r->job.seed = (uint64_t)seed;
	if (r->domain_ok) {
		r->use = calloc((size_t)ocs_ring_nodes(&r->d), 1);
		if (!r->use) {
			ocsplan_problem(p, "input", "out of memory");
			return;
		}
		parse_nodes(top, "faulty_nodes", HBD_NODE_FAULTY, r, p);
		parse_nodes(top, "busy_nodes", HBD_NODE_BUSY, r, p);
	}
	parse_job(top, r, p);
	r->fail = -1;
	if (json_object_get(top, "fail") &&
	    ocsplan_get_int(top, "", "fail", 0, INT_MAX, &r->fail, p) && r->domain_ok &&
	    r->fail >= ocs_ring_nodes(&r->d))
		ocsplan_problem(p, "fail", "unknown node %d (the domain has nodes 0..%d)", r->fail,
				ocs_ring_nodes(&r->d) - 1);
}

static json_t *int_array(const int *v, int n)
{
	json_t *arr = json_array();
	bool ok = arr != NULL;

	for (int i = 0; ok && i < n; i++)
		ok = ocsplan_append(arr, json_integer(v[i]));
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *bundle_json(const struct hbd_bundle *b, bool with_node)
{
	json_t *o = json_pack("{s:i, s:s, s:o}", "id", b->bundle, "path",
			      b->path == HBD_PATH_EXTERNAL ? "external" : "loopback", "peer",
			      b->peer >= 0 ? json_integer(b->peer) : json_null());

	if (o && with_node && !ocsplan_set(o, "node", json_integer(b->node))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Every ring node with the settings of its bundles, in ring order. */
static json_t *nodes_json(const struct ocs_ring_domain *d, const struct hbd_plan *pl)
{
	json_t *arr = json_array();
	struct hbd_bundle *set = malloc((size_t)pl->m * (size_t)d->bundles * sizeof(*set));
	bool ok = arr && set;

	for (int k = 0; ok && k < pl->n_rings; k++) {
		ok = hbd_ring_bundles(d, pl->nodes + (size_t)k * pl->m, pl->m, set) == 0;
		for (int i = 0; ok && i < pl->m; i++) {
			json_t *bundles = json_array();

			ok = bundles != NULL;
			for (int b = 0; ok && b < d->bundles; b++)
				ok = ocsplan_append(bundles,
						    bundle_json(&set[i * d->bundles + b], false));
			ok = ok && ocsplan_append(arr, json_pack("{s:i, s:o}", "id",
								 set[i * d->bundles].node,
								 "bundles", bundles));
		}
	}
	free(set);
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *plan_json(const struct ocs_ring_domain *d, const struct hbd_plan *pl)
{
	json_t *top = json_object(), *rings = json_array();
	bool ok = ocsplan_set(top, "rings", rings);

	for (int k = 0; ok && k < pl->n_rings; k++)
		ok = ocsplan_append(rings,
				    json_pack("{s:o}", "nodes",
					      int_array(pl->nodes + (size_t)k * pl->m, pl->m)));
	ok = ok && ocsplan_set(top, "gpus_placed", json_integer(pl->gpus_placed)) &&
	     ocsplan_set(top, "gpus_wasted", json_integer(pl->gpus_wasted)) &&
	     ocsplan_set(top, "cross_tor_share", ocs_json_number(pl->cross_tor_share)) &&
	     ocsplan_set(top, "constraints_kept", json_integer(pl->constraints_kept)) &&
	     ocsplan_set(top, "plan_us", json_integer(pl->plan_us)) &&
	     ocsplan_set(top, "nodes", nodes_json(d, pl));
	if (!ok) {
		json_decref(top);
		return NULL;
	}
	return top;
}

static json_t *repair_json(const struct hbd_repair *r)
{
	json_t *o = json_object(), *changes = json_array();
	bool ok = ocsplan_set(o, "changes", changes);

	for (size_t i = 0; ok && i < r->n_changes; i++)
		ok = ocsplan_append(changes, bundle_json(&r->changes[i], true));
	ok = ok && ocsplan_set(o, "kind", json_string(hbd_repair_kind_name(r->kind))) &&
	     ocsplan_set(o, "nodes", r->nodes ? int_array(r->nodes, r->m) : json_array());
	if (ok && r->kind == HBD_REPAIR_EXTEND)
		ok = ocsplan_set(o, "added", json_integer(r->added));
	if (ok && r->kind != HBD_REPAIR_EXTEND)
		ok = ocsplan_set(o, "reason", json_string(r->reason));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Repairs the first ring holding r->fail; adds "repair" to answer. 0, or an exit code. */
static int add_repair(struct request *r, const struct hbd_plan *pl, json_t *answer)
{
	struct hbd_repair rep;
	const int *ring = NULL;
	int rc;

	for (int k = 0; k < pl->n_rings && !ring; k++)
		for (int i = 0; i < pl->m; i++)
			if (pl->nodes[(size_t)k * pl->m + i] == r->fail)
				ring = pl->nodes + (size_t)k * pl->m;
	if (!ring) {
		fprintf(stderr, "fail: node %d is in no ring of the plan\n", r->fail);
		return OCSPLAN_EXIT_INVALID;
	}
	for (int i = 0; i < pl->n_rings * pl->m; i++)
		r->use[pl->nodes[i]] = HBD_NODE_BUSY;
	r->use[r->fail] = HBD_NODE_FAULTY;
	rc = hbd_repair(&r->d, r->use, ring, pl->m, r->fail, &r->job, &rep);
	if (rc) {
		fprintf(stderr, "ocsplan: repair failed: %s\n", strerror(-rc));
		return OCSPLAN_EXIT_FAILURE;
	}
	rc = ocsplan_set(answer, "repair", repair_json(&rep)) ? 0 : OCSPLAN_EXIT_FAILURE;
	hbd_repair_clear(&rep);
	return rc;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int ocsplan_hbd_main(int argc, char **argv)
{
	struct ocsplan_io io = {0};
	struct ocsplan_problems p = {0};
	struct request r = {.fail = -1};
	struct hbd_plan pl;
	struct hbd_error err = {0};
	json_t *top, *answer;
	int code = OCSPLAN_EXIT_INVALID, rc;
	int64_t t0;

	for (int i = 1; i < argc; i++)
		if (ocsplan_io_option(&io, argc, argv, &i, &p) == 0)
			ocsplan_problem(&p, argv[i], "unknown option for hbd-ring");
	if (p.count)
		return OCSPLAN_EXIT_INVALID;
	top = ocsplan_read_json(&io, &p, &code);
	if (!top)
		return code;
	parse_request(top, &r, &p);
	json_decref(top);
	if (p.count) {
		free(r.use);
		return OCSPLAN_EXIT_INVALID;
	}
	t0 = now_us();
	rc = hbd_plan(&r.d, r.use, &r.job, &pl, &err);
	pl.plan_us = now_us() - t0;
	if (rc == -ENOSPC) {
		answer = json_pack("{s:{s:s, s:s, s:i, s:i}}", "error", "field", err.field,
				   "reason", err.reason, "rings_needed", pl.rings_needed,
				   "rings_available", pl.rings_available);
		code = ocsplan_write_json(&io, answer);
		json_decref(answer);
		free(r.use);
		return code == OCSPLAN_EXIT_OK ? OCSPLAN_EXIT_FAILURE : code;
	}
	if (rc) {
		if (rc == -EINVAL)
			fprintf(stderr, "%s: %s\n", err.field ? err.field : "input", err.reason);
		else
			fprintf(stderr, "ocsplan: planning failed: %s\n", strerror(-rc));
		free(r.use);
		return rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
	}
	answer = plan_json(&r.d, &pl);
	code = answer ? OCSPLAN_EXIT_OK : OCSPLAN_EXIT_FAILURE;
	if (answer && r.fail >= 0)
		code = add_repair(&r, &pl, answer);
	if (code == OCSPLAN_EXIT_OK)
		code = ocsplan_write_json(&io, answer);
	json_decref(answer);
	hbd_plan_clear(&pl);
	free(r.use);
	return code;
}
