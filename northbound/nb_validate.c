/*
 * nb_validate.c - validation of every request the northbound serves,
 * against the fabric limits the daemon provides (the bytes are decoded
 * first by nb_decode.c; page tokens are nb_paging.c's).
 *
 * Runs on the gRPC thread before a handler sees the request, so the daemon
 * only ever receives requests whose every field is within bounds. Each
 * refusal names the field by its path in the request message, in the
 * spelling of the proto and of job files: "placement.gpus[12].leaf: 4100 is
 * outside 0..4095". Checks run in field order and stop at the first problem,
 * so the answer is deterministic.
 *
 * Pure functions: no globals, no I/O; thread-safe.
 *
 * Why one file of about 1,000 lines: it is one table of checks, a function
 * per request or message (the JobSpec's placement, demand, parallelism,
 * ring and rail parts included), all on the same bounds and field helpers;
 * split by request, every part would need those helpers from another file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_internal.h"

struct bounds {
	enum nb_fabric_kind kind;
	int pods;
	int leaves_per_pod;
	int leaves;
	int gpus_per_leaf;
	long long gpus;
	int groups;
	int leaf_links_max;
	int max_gpus_per_job;
	int max_leaf_pairs;
	const struct nb_planner *planners; /* the limits' own array */
	size_t n_planners;		   /* 0: names not checked here */
	int nodes;			   /* ring domain: nodes */
	int gpus_per_node;		   /* ring domain */
	int servers;			   /* rail-OCS fabric: servers (spares included) */
	int rails;			   /* rail-OCS fabric: GPUs per server */
};

/* The orchestrations a ring request may name ("" = the first). The
 * northbound knows the names only; the solvers implement them. */
static const char *const ring_orchestrations[] = {"dcn-free", "fat-tree", "greedy"};
#define RING_ORCHESTRATION_LIST "dcn-free, fat-tree or greedy"

/* A ring domain's limits: its size, and no leaf-spine structure. */
static int ring_limits_check(const struct nb_limits *l, struct nb_error *err)
{
	if (l->ring.nodes <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.ring.nodes", "%d must be positive",
				    l->ring.nodes);
	if (l->ring.gpus_per_node <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.ring.gpus_per_node",
				    "%d must be positive", l->ring.gpus_per_node);
	if (l->ring.nodes > 1 << 24)
		return nb_error_set(err, NB_INTERNAL, "limits.ring.nodes", "%d, at most %d",
				    l->ring.nodes, 1 << 24);
	if (l->ring.gpus_per_node > 1 << 16)
		return nb_error_set(err, NB_INTERNAL, "limits.ring.gpus_per_node", "%d, at most %d",
				    l->ring.gpus_per_node, 1 << 16);
	if (l->pods || l->leaves_per_pod || l->gpus_per_leaf || l->leaf_links_max)
		return nb_error_set(
			err, NB_INTERNAL, "limits.pods",
			"a ring domain has no pods, leaves or leaf links (leave them 0)");
	if (l->groups < 0 || l->max_gpus_per_job < 0 || l->max_leaf_pairs < 0)
		return nb_error_set(err, NB_INTERNAL, "limits", "negative bound");
	return 0;
}

/* A rail-OCS fabric's limits: servers and rails, no leaf-spine structure. */
static int rail_limits_check(const struct nb_limits *l, struct nb_error *err)
{
	if (l->rail.servers <= 0 || l->rail.servers > 1 << 24)
		return nb_error_set(err, NB_INTERNAL, "limits.rail.servers", "%d is outside 1..%d",
				    l->rail.servers, 1 << 24);
	if (l->rail.rails <= 0 || l->rail.rails > 1 << 16)
		return nb_error_set(err, NB_INTERNAL, "limits.rail.rails", "%d is outside 1..%d",
				    l->rail.rails, 1 << 16);
	if (l->pods || l->leaves_per_pod || l->gpus_per_leaf || l->leaf_links_max ||
	    l->ring.nodes || l->ring.gpus_per_node)
		return nb_error_set(
			err, NB_INTERNAL, "limits.pods",
			"a rail-ocs fabric has no pods, leaves or nodes (leave them 0)");
	if (l->groups < 0 || l->max_gpus_per_job < 0 || l->max_leaf_pairs < 0)
		return nb_error_set(err, NB_INTERNAL, "limits", "negative bound");
	return 0;
}

int nb_limits_check(const struct nb_limits *l, struct nb_error *err)
{
	if (!l)
		return nb_error_set(err, NB_INTERNAL, "limits", "missing");
	if (l->kind == NB_FABRIC_OCSTRX_RING)
		return ring_limits_check(l, err);
	if (l->kind == NB_FABRIC_RAIL_OCS)
		return rail_limits_check(l, err);
	if (l->kind != NB_FABRIC_LEAF_SPINE_OCS)
		return nb_error_set(err, NB_INTERNAL, "limits.kind", "%d is not a fabric kind",
				    (int)l->kind);
	if (l->ring.nodes || l->ring.gpus_per_node)
		return nb_error_set(err, NB_INTERNAL, "limits.ring",
				    "set on a leaf-spine-ocs fabric (leave it 0)");
	if (l->pods <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.pods", "%d must be positive",
				    l->pods);
	if (l->leaves_per_pod <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.leaves_per_pod",
				    "%d must be positive", l->leaves_per_pod);
	if (l->gpus_per_leaf <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.gpus_per_leaf", "%d must be positive",
				    l->gpus_per_leaf);
	if (l->groups <= 0)
		return nb_error_set(err, NB_INTERNAL, "limits.groups", "%d must be positive",
				    l->groups);
	if ((long long)l->pods * l->leaves_per_pod > 1 << 24)
		return nb_error_set(err, NB_INTERNAL, "limits.leaves_per_pod",
				    "%lld leaves in all, at most %d",
				    (long long)l->pods * l->leaves_per_pod, 1 << 24);
	if (l->leaf_links_max < 0 || l->max_gpus_per_job < 0 || l->max_leaf_pairs < 0)
		return nb_error_set(err, NB_INTERNAL, "limits", "negative bound");
	if (l->n_planners > NB_PLANNERS_MAX)
		return nb_error_set(err, NB_INTERNAL, "limits.n_planners", "%zu, at most %d",
				    l->n_planners, NB_PLANNERS_MAX);
	for (size_t i = 0; i < l->n_planners; i++)
		if (!l->planners[i].name || !l->planners[i].name[0])
			return nb_error_set(err, NB_INTERNAL, "limits.planners",
					    "[%zu] has no name", i);
	return 0;
}

static void bounds_from_limits(const struct nb_limits *l, struct bounds *b)
{
	b->kind = l->kind;
	b->pods = l->pods;
	b->leaves_per_pod = l->leaves_per_pod;
	b->leaves = l->pods * l->leaves_per_pod;
	b->gpus_per_leaf = l->gpus_per_leaf;
	b->gpus = (long long)b->leaves * l->gpus_per_leaf;
	b->nodes = l->ring.nodes;
	b->gpus_per_node = l->ring.gpus_per_node;
	if (l->kind == NB_FABRIC_OCSTRX_RING)
		b->gpus = (long long)b->nodes * b->gpus_per_node;
	b->servers = l->rail.servers;
	b->rails = l->rail.rails;
	if (l->kind == NB_FABRIC_RAIL_OCS)
		b->gpus = (long long)b->servers * b->rails;
	b->groups = l->groups;
	b->leaf_links_max = l->leaf_links_max ? l->leaf_links_max : l->gpus_per_leaf;
	b->max_gpus_per_job = l->max_gpus_per_job;
	if (b->max_gpus_per_job == 0 || b->max_gpus_per_job > b->gpus)
		b->max_gpus_per_job = b->gpus > 1 << 30 ? 1 << 30 : (int)b->gpus;
	b->max_leaf_pairs = l->max_leaf_pairs ? l->max_leaf_pairs : NB_DEFAULT_MAX_LEAF_PAIRS;
	b->planners = l->planners;
	b->n_planners = l->n_planners;
}

/* Job ids and device names: [A-Za-z0-9._-] (plus ':' for device names). */
static int check_name(const char *s, const char *field, int max_len, bool required,
		      const char *extra, struct nb_error *err)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0)
		return required ? nb_error_set(err, NB_INVALID_ARGUMENT, field, "required") : 0;
	if (n > (size_t)max_len)
		return nb_error_set(err, NB_INVALID_ARGUMENT, field, "%zu characters, at most %d",
				    n, max_len);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-' || (c && extra && strchr(extra, c)))
			continue;
		if (c >= 0x20 && c < 0x7f)
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "character '%c' at offset %zu is not allowed "
					    "(use A-Z a-z 0-9 . _ -%s)",
					    c, i, extra ? " :" : "");
		return nb_error_set(
			err, NB_INVALID_ARGUMENT, field,
			"byte 0x%02x at offset %zu is not allowed (use A-Z a-z 0-9 . _ -%s)", c, i,
			extra ? " :" : "");
	}
	return 0;
}

/* page_size in 0..max and a page_token this server made (or ""). */
static int check_page(enum nb_method m, int32_t page_size, const char *token, struct nb_error *err)
{
	int max = m == NB_JOBS_LIST_JOBS ? NB_LIST_JOBS_PAGE_MAX : NB_LIST_CIRCUITS_PAGE_MAX;
	const char *after;
	struct nb_circuit_key key;
	struct nb_error ignored;
	int64_t port;
	bool ok;

	if (page_size < 0 || page_size > max)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "page_size",
				    "%" PRId32 " is out of range 0..%d (0: %zu)", page_size, max,
				    nb_page_size(m, 0));
	if (!token || !*token)
		return 0;
	if (strlen(token) > NB_PAGE_TOKEN_MAX_LEN)
		ok = false;
	else if (m == NB_JOBS_LIST_JOBS)
		ok = (after = nb_jobs_token_after(token)) != NULL &&
		     check_name(after, "", NB_ID_MAX_LEN, true, NULL, &ignored) == 0;
	else if (m == NB_FABRIC_LIST_RAIL_PORTS)
		ok = nb_rail_ports_token_after(token, &port);
	else
		ok = nb_circuits_token_after(token, &key);
	if (!ok)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "page_token",
				    "not a next_page_token of this call; start again with \"\"");
	return 0;
}

static int check_printable(const char *s, const char *field, size_t max_len, struct nb_error *err)
{
	size_t n = s ? strlen(s) : 0;

	if (n > max_len)
		return nb_error_set(err, NB_INVALID_ARGUMENT, field, "%zu characters, at most %zu",
				    n, max_len);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "byte 0x%02x at offset %zu is not printable ASCII",
					    (unsigned char)s[i], i);
	return 0;
}

static int check_range(long long v, long long lo, long long hi, const char *field,
		       struct nb_error *err)
{
	if (v < lo || v > hi)
		return nb_error_set(err, NB_INVALID_ARGUMENT, field, "%lld is outside %lld..%lld",
				    v, lo, hi);
	return 0;
}

/* A numeric filter must come with its has_* flag. */
static int check_filter(bool has, int value, int count, const char *field, const char *flag,
			struct nb_error *err)
{
	if (has)
		return check_range(value, 0, count - 1, field, err);
	if (value != 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, field, "%d given but %s is false",
				    value, flag);
	return 0;
}

struct gpu_index {
	long long gpu;
	size_t at;
};

static int cmp_gpu_index(const void *a, const void *b)
{
	const struct gpu_index *x = a, *y = b;

	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

static int validate_placement(const Ocs__V1__Placement *p, const struct bounds *b,
			      unsigned char *leaf_used, struct nb_error *err)
{
	char field[128];
	struct gpu_index *order;

	if (!p)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement", "required");
	if (p->n_gpus == 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus",
				    "empty; a job needs at least one GPU");
	if (p->n_gpus > (size_t)b->max_gpus_per_job)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus",
				    "%zu GPUs, at most %d", p->n_gpus, b->max_gpus_per_job);
	for (size_t i = 0; i < p->n_gpus; i++) {
		const Ocs__V1__GpuPlacement *g = p->gpus[i];
		int want_leaf, want_pod;

		if (!g)
			return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus", "null");
		snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", i);
		if (check_range(g->gpu, 0, b->gpus - 1, field, err))
			return -EINVAL;
		snprintf(field, sizeof(field), "placement.gpus[%zu].leaf", i);
		if (check_range(g->leaf, 0, b->leaves - 1, field, err))
			return -EINVAL;
		want_leaf = (int)(g->gpu / b->gpus_per_leaf);
		if (g->leaf != want_leaf)
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "leaf %d does not hold gpu %lld (leaf %d does)",
					    g->leaf, (long long)g->gpu, want_leaf);
		snprintf(field, sizeof(field), "placement.gpus[%zu].pod", i);
		if (check_range(g->pod, 0, b->pods - 1, field, err))
			return -EINVAL;
		want_pod = g->leaf / b->leaves_per_pod;
		if (g->pod != want_pod)
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "pod %d does not hold leaf %d (pod %d does)", g->pod,
					    g->leaf, want_pod);
		leaf_used[g->leaf] = 1;
	}
	order = malloc(p->n_gpus * sizeof(*order));
	if (!order)
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "placement.gpus", "out of memory");
	for (size_t i = 0; i < p->n_gpus; i++)
		order[i] = (struct gpu_index){p->gpus[i]->gpu, i};
	qsort(order, p->n_gpus, sizeof(*order), cmp_gpu_index);
	for (size_t i = 1; i < p->n_gpus; i++) {
		if (order[i].gpu != order[i - 1].gpu)
			continue;
		snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", order[i].at);
		nb_error_set(err, NB_INVALID_ARGUMENT, field,
			     "%lld is listed twice (first at gpus[%zu])", order[i].gpu,
			     order[i - 1].at);
		free(order);
		return -EINVAL;
	}
	free(order);
	return 0;
}

static int cmp_pair_index(const void *a, const void *b)
{
	return cmp_gpu_index(a, b); /* same shape: key = a*leaves+b, position */
}

static int validate_leaf_demand(const Ocs__V1__LeafDemand *d, const struct bounds *b,
				const unsigned char *leaf_used, struct nb_error *err)
{
	char field[128];
	int *links_at_leaf;
	struct gpu_index *order;
	int rc = 0;

	if (d->n_pairs == 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "leaf_demand.pairs",
				    "empty; list the leaf pairs that need links");
	if (d->n_pairs > (size_t)b->max_leaf_pairs)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "leaf_demand.pairs",
				    "%zu pairs, at most %d", d->n_pairs, b->max_leaf_pairs);
	for (size_t i = 0; i < d->n_pairs; i++) {
		const Ocs__V1__LeafPair *p = d->pairs[i];

		if (!p)
			return nb_error_set(err, NB_INVALID_ARGUMENT, "leaf_demand.pairs", "null");
		snprintf(field, sizeof(field), "leaf_demand.pairs[%zu].a", i);
		if (check_range(p->a, 0, b->leaves - 1, field, err))
			return -EINVAL;
		if (!leaf_used[p->a])
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "leaf %d holds none of the job's GPUs", p->a);
		snprintf(field, sizeof(field), "leaf_demand.pairs[%zu].b", i);
		if (check_range(p->b, 0, b->leaves - 1, field, err))
			return -EINVAL;
		if (p->b == p->a)
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "equals a (%d); a pair joins two different leaves",
					    p->a);
		if (!leaf_used[p->b])
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "leaf %d holds none of the job's GPUs", p->b);
		snprintf(field, sizeof(field), "leaf_demand.pairs[%zu].links", i);
		if (check_range(p->links, 1, b->leaf_links_max, field, err))
			return -EINVAL;
	}
	links_at_leaf = calloc((size_t)b->leaves, sizeof(*links_at_leaf));
	order = malloc(d->n_pairs * sizeof(*order));
	if (!links_at_leaf || !order) {
		free(links_at_leaf);
		free(order);
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "leaf_demand.pairs",
				    "out of memory");
	}
	for (size_t i = 0; i < d->n_pairs && rc == 0; i++) {
		const Ocs__V1__LeafPair *p = d->pairs[i];
		int lo = p->a < p->b ? p->a : p->b, hi = p->a < p->b ? p->b : p->a;

		order[i] = (struct gpu_index){(long long)lo * b->leaves + hi, i};
		links_at_leaf[p->a] += p->links;
		links_at_leaf[p->b] += p->links;
		if (links_at_leaf[p->a] > b->leaf_links_max ||
		    links_at_leaf[p->b] > b->leaf_links_max) {
			int leaf = links_at_leaf[p->a] > b->leaf_links_max ? p->a : p->b;

			snprintf(field, sizeof(field), "leaf_demand.pairs[%zu].links", i);
			rc = nb_error_set(err, NB_INVALID_ARGUMENT, field,
					  "leaf %d would need %d links in total, it has %d", leaf,
					  links_at_leaf[leaf], b->leaf_links_max);
		}
	}
	if (rc == 0) {
		qsort(order, d->n_pairs, sizeof(*order), cmp_pair_index);
		for (size_t i = 1; i < d->n_pairs; i++) {
			if (order[i].gpu != order[i - 1].gpu)
				continue;
			snprintf(field, sizeof(field), "leaf_demand.pairs[%zu]", order[i].at);
			rc = nb_error_set(
				err, NB_INVALID_ARGUMENT, field,
				"leaves %lld and %lld are listed twice (first at pairs[%zu])",
				order[i].gpu / b->leaves, order[i].gpu % b->leaves,
				order[i - 1].at);
			break;
		}
	}
	free(links_at_leaf);
	free(order);
	return rc;
}

/* A double in lo..hi (lo excluded when open_lo); NaN and infinities refused. */
static int check_real(double v, double lo, bool open_lo, double hi, const char *field,
		      struct nb_error *err)
{
	if (v != v || (open_lo ? !(v > lo) : !(v >= lo)) || !(v <= hi))
		return nb_error_set(err, NB_INVALID_ARGUMENT, field,
				    open_lo ? "%g is outside (%g, %g]" : "%g is outside %g..%g", v,
				    lo, hi);
	return 0;
}

/* Bounds of the parallelism spec's integer fields (0 = default where the
 * proto says so); cross-field rules (tp dividing heads, ...) are the
 * daemon's, which builds the workload. */
struct par_int {
	const char *name;
	size_t offset;
	long long lo, hi;
};

#define PAR_INT(f, lo, hi)                                                                         \
	{                                                                                          \
#f, offsetof(Ocs__V1__ParallelismSpec, f), lo, hi                                  \
	}

static const struct par_int par_ints[] = {
	PAR_INT(layers, 1, 100000),
	PAR_INT(hidden, 1, 1 << 20),
	PAR_INT(ffn, 1, 1 << 22),
	PAR_INT(heads, 1, 1 << 16),
	PAR_INT(vocab, 1, 1 << 24),
	PAR_INT(experts, 0, 1 << 16),
	PAR_INT(top_k, 0, 1 << 16),
	PAR_INT(ffn_matrices, 0, 3),
	PAR_INT(tp, 1, 1024),
	PAR_INT(pp, 1, 1024),
	PAR_INT(dp, 0, 1 << 24),
	PAR_INT(ep, 0, 1 << 16),
	PAR_INT(expert_tp, 0, 1024),
	PAR_INT(seq_len, 1, 1 << 24),
	PAR_INT(micro_batch, 0, 1 << 16),
	PAR_INT(micro_batches, 1, NB_PARALLELISM_MAX_MICRO_BATCHES),
	PAR_INT(bytes_per_value, 0, 64),
	PAR_INT(grad_bytes, 0, 64),
	PAR_INT(gpus_per_pod_per_replica, 1, 1 << 30), /* upper bound: GPUs of a pod */
	PAR_INT(replicas_per_pod_set, 0, 1 << 30),     /* upper bound: GPUs of a pod */
	PAR_INT(first_pod, 0, 1 << 30),		       /* upper bound: pods - 1 */
	PAR_INT(max_generations, 0, NB_PARALLELISM_MAX_GENERATIONS),
	PAR_INT(stall_generations, 0, NB_PARALLELISM_MAX_STALL),
	PAR_INT(time_budget_ms, 0, NB_PARALLELISM_MAX_TIME_BUDGET_MS),
};

static int validate_parallelism(const Ocs__V1__ParallelismSpec *q, const struct bounds *b,
				struct nb_error *err)
{
	long long pod_gpus = (long long)b->leaves_per_pod * b->gpus_per_leaf;
	char field[96];

	if (!q)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "parallelism", "null");
	for (size_t i = 0; i < sizeof(par_ints) / sizeof(par_ints[0]); i++) {
		const struct par_int *f = &par_ints[i];
		int32_t v = *(const int32_t *)((const char *)q + f->offset);
		long long hi = f->hi;

		if (strcmp(f->name, "gpus_per_pod_per_replica") == 0 ||
		    strcmp(f->name, "replicas_per_pod_set") == 0)
			hi = pod_gpus;
		else if (strcmp(f->name, "first_pod") == 0)
			hi = b->pods - 1;
		snprintf(field, sizeof(field), "parallelism.%s", f->name);
		if (check_range(v, f->lo, hi, field, err))
			return -EINVAL;
	}
	if (q->ffn_matrices == 1)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "parallelism.ffn_matrices",
				    "1 is not 0 (default), 2 or 3");
	if (q->experts == 0 && q->top_k != 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "parallelism.top_k",
				    "%d given for a dense model (experts 0)", q->top_k);
	if (q->experts > 0 && (q->top_k < 1 || q->top_k > q->experts))
		return nb_error_set(err, NB_INVALID_ARGUMENT, "parallelism.top_k",
				    "%d is outside 1..%d (experts)", q->top_k, q->experts);
	if (check_real(q->gpu_tflops, 0, false, 1e6, "parallelism.gpu_tflops", err) ||
	    check_real(q->efficiency, 0, false, 1, "parallelism.efficiency", err) ||
	    check_real(q->bandwidth_gbps, 0, true, 1e6, "parallelism.bandwidth_gbps", err) ||
	    check_real(q->intra_pod_gbps, 0, false, 1e7, "parallelism.intra_pod_gbps", err))
		return -EINVAL;
	return 0;
}

/* The limits' planner called name; NULL when it is not one. */
static const struct nb_planner *find_planner(const struct bounds *b, const char *name)
{
	for (size_t i = 0; i < b->n_planners; i++)
		if (strcmp(b->planners[i].name, name) == 0)
			return &b->planners[i];
	return NULL;
}

/*
 * The names of the limits' planners into out: every one as "a, b, c"
 * (all), or those that take (or not) a parallelism spec as "a, b or c".
 */
static void planner_names(const struct bounds *b, bool all, bool takes_parallelism, char *out,
			  size_t size)
{
	size_t n = 0, listed = 0, total = 0;

	for (size_t i = 0; i < b->n_planners; i++)
		total += all || b->planners[i].takes_parallelism == takes_parallelism;
	out[0] = '\0';
	for (size_t i = 0; i < b->n_planners && n < size; i++) {
		const char *sep = listed == 0 ? "" : !all && listed + 1 == total ? " or " : ", ";

		if (!all && b->planners[i].takes_parallelism != takes_parallelism)
			continue;
		listed++;
		n += (size_t)snprintf(out + n, size - n, "%s%s", sep, b->planners[i].name);
	}
}

/*
 * options.planner names one of the limits' planners, or is empty (the
 * daemon then picks the default of the job's kind of demand). Only checked
 * to be printable when the limits list no planners.
 */
static int check_planner_name(const char *planner, const struct bounds *b, struct nb_error *err)
{
	char names[256];

	if (!planner[0] || find_planner(b, planner))
		return 0;
	if (check_printable(planner, "options.planner", 64, err))
		return -EINVAL;
	if (b->n_planners == 0)
		return 0;
	planner_names(b, true, false, names, sizeof(names));
	return nb_error_set(err, NB_INVALID_ARGUMENT, "options.planner",
			    "\"%s\" is not a known planner (%s)", planner, names);
}

/* A named planner takes the job's kind of demand. */
static int check_planner_kind(const Ocs__V1__JobSpec *j, const struct bounds *b,
			      struct nb_error *err)
{
	const char *planner = j->options && j->options->planner ? j->options->planner : "";
	bool par = j->demand_case == OCS__V1__JOB_SPEC__DEMAND_PARALLELISM;
	const struct nb_planner *p = planner[0] ? find_planner(b, planner) : NULL;
	char names[256];

	if (!p || p->takes_parallelism == par)
		return 0;
	planner_names(b, false, par, names, sizeof(names));
	if (par)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "options.planner",
				    "\"%s\" plans a leaf_demand, not a parallelism spec (use %s)",
				    planner, names);
	return nb_error_set(err, NB_INVALID_ARGUMENT, "options.planner",
			    "\"%s\" plans a parallelism spec, not a leaf_demand (use %s)", planner,
			    names);
}

/* A refusal for a request that needs the other kind of fabric. */
static int wrong_kind(const struct bounds *b, const char *field, const char *what,
		      struct nb_error *err)
{
	return nb_error_set(err, NB_FAILED_PRECONDITION, field, "%s; this fabric is %s", what,
			    nb_fabric_kind_name(b->kind));
}

/* "the domain's N GPUs" or "the N GPUs a job may hold", whichever bounds a job. */
static void job_gpu_bound(const struct bounds *b, char *out, size_t size)
{
	if (b->max_gpus_per_job < b->gpus)
		snprintf(out, size, "the %d GPUs a job may hold", b->max_gpus_per_job);
	else
		snprintf(out, size, "the domain's %lld GPUs", b->gpus);
}

/*
 * A ring request on a ring domain: tp a positive multiple of the GPUs per
 * node, gpus a multiple of tp or rings (not both), each within what a job
 * may hold, and a known orchestration. The seed is free (greedy only uses
 * it). Whether the healthy free nodes give enough rings is the daemon's
 * (RESOURCE_EXHAUSTED from the planner).
 */
static int validate_ring(const Ocs__V1__RingRequest *r, const struct bounds *b,
			 struct nb_error *err)
{
	const char *orch;
	char bound[64];
	bool known;

	if (!r)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring", "null");
	job_gpu_bound(b, bound, sizeof(bound));
	if (r->tp <= 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.tp",
				    "%d: give the GPUs of one TP ring, a positive multiple of the "
				    "%d GPUs per node",
				    r->tp, b->gpus_per_node);
	if (r->tp % b->gpus_per_node)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.tp",
				    "%d is not a multiple of the %d GPUs per node", r->tp,
				    b->gpus_per_node);
	if (r->tp > b->max_gpus_per_job)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.tp", "%d exceeds %s", r->tp,
				    bound);
	if (r->gpus < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.gpus",
				    "%lld is negative (0: see ring.rings)", (long long)r->gpus);
	if (r->gpus % r->tp)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.gpus",
				    "%lld is not a multiple of ring.tp (%d)", (long long)r->gpus,
				    r->tp);
	if (r->gpus > b->max_gpus_per_job)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.gpus", "%lld exceeds %s",
				    (long long)r->gpus, bound);
	if (r->rings < 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.rings",
				    "%d is negative (0 with gpus 0: the whole domain)", r->rings);
	if (r->rings > 0 && r->gpus > 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.rings",
				    "%d given together with ring.gpus (%lld); ask for GPUs or for "
				    "rings, not both",
				    r->rings, (long long)r->gpus);
	if ((long long)r->rings * r->tp > b->max_gpus_per_job)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.rings",
				    "%d rings of %d GPUs need %lld GPUs, more than %s", r->rings,
				    r->tp, (long long)r->rings * r->tp, bound);
	orch = r->orchestration ? r->orchestration : "";
	known = !orch[0];
	for (size_t i = 0; i < sizeof(ring_orchestrations) / sizeof(ring_orchestrations[0]); i++)
		known = known || strcmp(orch, ring_orchestrations[i]) == 0;
	if (known)
		return 0;
	if (check_printable(orch, "ring.orchestration", 64, err))
		return -EINVAL;
	return nb_error_set(err, NB_INVALID_ARGUMENT, "ring.orchestration",
			    "\"%s\" is not a known orchestration (" RING_ORCHESTRATION_LIST ")",
			    orch);
}

/* A ring job: no placement, no planner option, then the request itself. */
static int validate_ring_job(const Ocs__V1__JobSpec *j, const struct bounds *b,
			     struct nb_error *err)
{
	if (j->placement)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement",
				    "a ring job has no placement: ocsd picks the nodes");
	if (j->options && j->options->planner && j->options->planner[0])
		return nb_error_set(err, NB_INVALID_ARGUMENT, "options.planner",
				    "a ring job takes no planner; choose ring.orchestration "
				    "(" RING_ORCHESTRATION_LIST ")");
	if (j->options && j->options->allow_moving_other_jobs)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "options.allow_moving_other_jobs",
				    "a ring job never moves other jobs' rings");
	return validate_ring(j->ring, b, err);
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

/*
 * A rail job is its GPUs: placement.gpus (at least one, at most what a job
 * may hold), each a GPU of the fabric (leaf and pod 0), none twice; no
 * demand and no options. Whether each GPU is healthy, joined to a rail
 * port and free is the daemon's (FAILED_PRECONDITION).
 */
static int validate_rail_job(const Ocs__V1__JobSpec *j, const struct bounds *b,
			     struct nb_error *err)
{
	const Ocs__V1__Placement *p = j->placement;
	char field[128];
	long long *sorted;
	size_t n = p ? p->n_gpus : 0;

	if (j->demand_case != OCS__V1__JOB_SPEC__DEMAND__NOT_SET)
		return wrong_kind(
			b,
			j->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING	  ? "ring"
			: j->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND ? "leaf_demand"
										  : "parallelism",
			"a rail-ocs job is its GPUs (placement.gpus) and takes no demand", err);
	if (j->options && ((j->options->planner && j->options->planner[0]) ||
			   j->options->allow_moving_other_jobs))
		return nb_error_set(err, NB_INVALID_ARGUMENT, "options",
				    "a rail-ocs job takes no planner and moves no other job");
	if (n == 0)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus",
				    "required: the job's GPUs (server * %d + rail)", b->rails);
	if ((long long)n > b->max_gpus_per_job)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus",
				    "%zu GPUs, at most %d", n, b->max_gpus_per_job);
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__GpuPlacement *g = p->gpus[i];

		if (!g)
			return nb_error_set(err, NB_INVALID_ARGUMENT, "placement.gpus", "null");
		snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", i);
		if (check_range(g->gpu, 0, b->gpus - 1, field, err))
			return -EINVAL;
		if (g->leaf || g->pod) {
			snprintf(field, sizeof(field), "placement.gpus[%zu].%s", i,
				 g->leaf ? "leaf" : "pod");
			return nb_error_set(err, NB_INVALID_ARGUMENT, field,
					    "a rail-ocs fabric has no leaves or pods (leave it 0)");
		}
	}
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted)
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "placement", "out of memory");
	for (size_t i = 0; i < n; i++)
		sorted[i] = p->gpus[i]->gpu;
	qsort(sorted, n, sizeof(*sorted), cmp_ll);
	for (size_t i = 1; i < n; i++)
		if (sorted[i] == sorted[i - 1]) {
			long long dup = sorted[i];
			size_t at = 0;

			free(sorted);
			for (size_t k = 0, seen = 0; k < n; k++)
				if (p->gpus[k]->gpu == dup && seen++ == 1)
					at = k;
			snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", at);
			return nb_error_set(err, NB_INVALID_ARGUMENT, field, "gpu %lld given twice",
					    dup);
		}
	free(sorted);
	return 0;
}

static int validate_job(const Ocs__V1__JobSpec *j, const struct bounds *b, struct nb_error *err)
{
	bool ring_domain = b->kind == NB_FABRIC_OCSTRX_RING;
	unsigned char *leaf_used;
	int rc;

	if (check_name(j->id, "id", NB_ID_MAX_LEN, true, NULL, err))
		return -EINVAL;
	if (check_printable(j->idempotency_key, "idempotency_key", NB_IDEMPOTENCY_KEY_MAX_LEN, err))
		return -EINVAL;
	if (b->kind == NB_FABRIC_RAIL_OCS)
		return validate_rail_job(j, b, err);
	switch (j->demand_case) {
	case OCS__V1__JOB_SPEC__DEMAND_RING:
		if (!ring_domain)
			return wrong_kind(b, "ring", "a ring request needs an ocstrx-ring domain",
					  err);
		return validate_ring_job(j, b, err);
	case OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND:
		if (ring_domain)
			return wrong_kind(b, "leaf_demand",
					  "an ocstrx-ring domain takes ring requests (ring), "
					  "not leaf_demand",
					  err);
		break;
	case OCS__V1__JOB_SPEC__DEMAND_PARALLELISM:
		if (ring_domain)
			return wrong_kind(b, "parallelism",
					  "an ocstrx-ring domain takes ring requests (ring), "
					  "not parallelism",
					  err);
		break;
	default:
		return nb_error_set(err, NB_INVALID_ARGUMENT, "demand",
				    ring_domain ? "required: set ring"
						: "required: set leaf_demand or parallelism");
	}
	leaf_used = calloc((size_t)b->leaves, 1);
	if (!leaf_used)
		return nb_error_set(err, NB_RESOURCE_EXHAUSTED, "placement", "out of memory");
	rc = validate_placement(j->placement, b, leaf_used, err);
	if (rc == 0 && j->options && j->options->planner)
		rc = check_planner_name(j->options->planner, b, err);
	if (rc == 0) {
		switch (j->demand_case) {
		case OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND:
			rc = validate_leaf_demand(j->leaf_demand, b, leaf_used, err);
			break;
		default:
			rc = validate_parallelism(j->parallelism, b, err);
			break;
		}
	}
	if (rc == 0)
		rc = check_planner_kind(j, b, err);
	free(leaf_used);
	return rc;
}

static int validate_mark_node(const Ocs__V1__MarkNodeRequest *r, const struct bounds *b,
			      struct nb_error *err)
{
	if (b->kind != NB_FABRIC_OCSTRX_RING)
		return wrong_kind(b, "node", "nodes exist only on an ocstrx-ring domain", err);
	if (check_range(r->node, 0, b->nodes - 1, "node", err))
		return -EINVAL;
	if (r->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY ||
	    r->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY)
		return 0;
	if (r->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_UNSPECIFIED)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "condition",
				    "required: NODE_CONDITION_HEALTHY or NODE_CONDITION_FAULTY");
	return nb_error_set(err, NB_INVALID_ARGUMENT, "condition", "%d is not a NodeCondition",
			    (int)r->condition);
}

static int validate_gpu(int64_t gpu, const struct bounds *b, struct nb_error *err)
{
	if (b->kind != NB_FABRIC_RAIL_OCS)
		return wrong_kind(b, "gpu", "GPU swaps exist only on a rail-ocs fabric", err);
	return check_range(gpu, 0, b->gpus - 1, "gpu", err);
}

static int validate_mark_gpu(const Ocs__V1__MarkGpuRequest *r, const struct bounds *b,
			     struct nb_error *err)
{
	if (validate_gpu(r->gpu, b, err))
		return -EINVAL;
	if (r->condition == OCS__V1__GPU_CONDITION__GPU_CONDITION_HEALTHY ||
	    r->condition == OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY)
		return 0;
	if (r->condition == OCS__V1__GPU_CONDITION__GPU_CONDITION_UNSPECIFIED)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "condition",
				    "required: GPU_CONDITION_HEALTHY or GPU_CONDITION_FAULTY");
	return nb_error_set(err, NB_INVALID_ARGUMENT, "condition", "%d is not a GpuCondition",
			    (int)r->condition);
}

static int validate_list_rail_ports(const Ocs__V1__ListRailPortsRequest *r, const struct bounds *b,
				    struct nb_error *err)
{
	if (b->kind != NB_FABRIC_RAIL_OCS)
		return wrong_kind(b, "", "rail ports exist only on a rail-ocs fabric", err);
	if (check_name(r->job_id, "job_id", NB_ID_MAX_LEN, false, NULL, err) ||
	    check_filter(r->has_server, r->server, b->servers, "server", "has_server", err) ||
	    check_filter(r->has_rail, r->rail, b->rails, "rail", "has_rail", err))
		return -EINVAL;
	return check_page(NB_FABRIC_LIST_RAIL_PORTS, r->page_size, r->page_token, err);
}

static int validate_list_rings(const Ocs__V1__ListRingsRequest *r, const struct bounds *b,
			       struct nb_error *err)
{
	if (b->kind != NB_FABRIC_OCSTRX_RING)
		return wrong_kind(b, "", "rings exist only on an ocstrx-ring domain", err);
	if (check_name(r->job_id, "job_id", NB_ID_MAX_LEN, false, NULL, err))
		return -EINVAL;
	return check_filter(r->has_node, r->node, b->nodes, "node", "has_node", err);
}

/* Drift scopes (issue 14 #2): a device name, and the cross-connect's ports with has_ports. */
static int validate_drift_scope(const Ocs__V1__DriftScope *s, const struct bounds *b,
				struct nb_error *err)
{
	if (b->kind != NB_FABRIC_LEAF_SPINE_OCS)
		return wrong_kind(b, "scope", "drift concerns cross-connects of leaf-spine fabrics",
				  err);
	if (!s)
		return 0;
	if (check_name(s->device, "scope.device", NB_DEVICE_NAME_MAX_LEN, s->has_ports, ":", err))
		return -EINVAL;
	if (!s->has_ports && (s->in_port || s->out_port))
		return nb_error_set(err, NB_INVALID_ARGUMENT, "scope.has_ports",
				    "in_port and out_port are given: set has_ports");
	if (s->in_port < 0 || s->in_port > 65535)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "scope.in_port",
				    "%d is outside 0..65535", s->in_port);
	if (s->out_port < 0 || s->out_port > 65535)
		return nb_error_set(err, NB_INVALID_ARGUMENT, "scope.out_port",
				    "%d is outside 0..65535", s->out_port);
	return 0;
}

int nb_validate_request(enum nb_method m, const ProtobufCMessage *req,
			const struct nb_limits *limits, struct nb_error *err)
{
	const struct nb_method_info *info = nb_method_info(m);
	struct bounds b;

	if (!info)
		return nb_error_set(err, NB_UNIMPLEMENTED, "", "unknown method %d", (int)m);
	if (!req || req->descriptor != info->request)
		return nb_error_set(err, NB_INTERNAL, "", "request is not a %s",
				    info->request->name);
	if (nb_limits_check(limits, err))
		return -EINVAL;
	bounds_from_limits(limits, &b);
	switch (m) {
	case NB_FABRIC_GET_FABRIC:
	case NB_EVENTS_WATCH:
		return 0;
	case NB_FABRIC_LIST_DEVICES: {
		const Ocs__V1__ListDevicesRequest *r = (const void *)req;

		if (r->has_group && b.groups == 0)
			return wrong_kind(&b, "group", "this ring domain has no device groups",
					  err);
		return check_filter(r->has_group, r->group, b.groups, "group", "has_group", err);
	}
	case NB_FABRIC_LIST_CIRCUITS: {
		const Ocs__V1__ListCircuitsRequest *r = (const void *)req;

		if (check_name(r->job_id, "job_id", NB_ID_MAX_LEN, false, NULL, err) ||
		    check_name(r->device, "device", NB_DEVICE_NAME_MAX_LEN, false, ":", err))
			return -EINVAL;
		if (r->has_pod && b.kind == NB_FABRIC_OCSTRX_RING)
			return wrong_kind(&b, "pod", "an ocstrx-ring domain has no pods", err);
		if (r->has_pod && b.kind == NB_FABRIC_RAIL_OCS)
			return wrong_kind(&b, "pod", "a rail-ocs fabric has no pods", err);
		if (check_filter(r->has_pod, r->pod, b.pods, "pod", "has_pod", err))
			return -EINVAL;
		return check_page(m, r->page_size, r->page_token, err);
	}
	case NB_FABRIC_DRAIN_DEVICE: {
		const Ocs__V1__DrainDeviceRequest *r = (const void *)req;

		return check_name(r->device, "device", NB_DEVICE_NAME_MAX_LEN, true, ":", err);
	}
	case NB_FABRIC_UNDRAIN_DEVICE: {
		const Ocs__V1__UndrainDeviceRequest *r = (const void *)req;

		return check_name(r->device, "device", NB_DEVICE_NAME_MAX_LEN, true, ":", err);
	}
	case NB_FABRIC_MARK_NODE:
		return validate_mark_node((const Ocs__V1__MarkNodeRequest *)req, &b, err);
	case NB_FABRIC_LIST_RINGS:
		return validate_list_rings((const Ocs__V1__ListRingsRequest *)req, &b, err);
	case NB_FABRIC_LIST_DRIFT:
		if (b.kind != NB_FABRIC_LEAF_SPINE_OCS && b.kind != NB_FABRIC_OCSTRX_RING)
			return wrong_kind(&b, "",
					  "drift concerns cross-connects of leaf-spine fabrics "
					  "and bundles of ocstrx-ring domains",
					  err);
		return check_name(((const Ocs__V1__ListDriftRequest *)req)->device, "device",
				  NB_DEVICE_NAME_MAX_LEN, false, ":", err);
	case NB_FABRIC_ADOPT_CROSS_CONNECTS: {
		const Ocs__V1__AdoptCrossConnectsRequest *r = (const void *)req;

		if (validate_drift_scope(r->scope, &b, err))
			return -EINVAL;
		return check_name(r->job_id, "job_id", NB_ID_MAX_LEN, false, NULL, err);
	}
	case NB_FABRIC_CLEAR_CROSS_CONNECTS:
		return validate_drift_scope(
			((const Ocs__V1__ClearCrossConnectsRequest *)req)->scope, &b, err);
	case NB_FABRIC_REPLACE_GPU:
		return validate_gpu(((const Ocs__V1__ReplaceGpuRequest *)req)->gpu, &b, err);
	case NB_FABRIC_MARK_GPU:
		return validate_mark_gpu((const Ocs__V1__MarkGpuRequest *)req, &b, err);
	case NB_FABRIC_LIST_RAIL_PORTS:
		return validate_list_rail_ports((const Ocs__V1__ListRailPortsRequest *)req, &b,
						err);
	case NB_FABRIC_LIST_CABLING:
		return check_name(((const Ocs__V1__ListCablingRequest *)req)->device, "device",
				  NB_DEVICE_NAME_MAX_LEN, false, ":", err);
	case NB_FABRIC_CLEAR_CABLING: {
		const Ocs__V1__ClearCablingRequest *r = (const void *)req;

		if (check_name(r->device, "device", NB_DEVICE_NAME_MAX_LEN, true, ":", err))
			return -EINVAL;
		if (r->port < 0 || r->port > 65535)
			return nb_error_set(err, NB_INVALID_ARGUMENT, "port",
					    "%d is outside 0..65535", r->port);
		return 0;
	}
	case NB_JOBS_SUBMIT_JOB:
	case NB_JOBS_PLAN_JOB:
		return validate_job((const Ocs__V1__JobSpec *)req, &b, err);
	case NB_JOBS_RELEASE_JOB:
		return check_name(((const Ocs__V1__ReleaseJobRequest *)req)->id, "id",
				  NB_ID_MAX_LEN, true, NULL, err);
	case NB_JOBS_GET_JOB:
		return check_name(((const Ocs__V1__GetJobRequest *)req)->id, "id", NB_ID_MAX_LEN,
				  true, NULL, err);
	case NB_JOBS_LIST_JOBS: {
		const Ocs__V1__ListJobsRequest *r = (const void *)req;
		int state = (int)r->state;

		if (!protobuf_c_enum_descriptor_get_value(&ocs__v1__job_state__descriptor, state))
			return nb_error_set(err, NB_INVALID_ARGUMENT, "state",
					    "%d is not a JobState", state);
		return check_page(m, r->page_size, r->page_token, err);
	}
	case NB_HEALTH_CHECK:
	case NB_HEALTH_WATCH:
		return check_printable(((const Grpc__Health__V1__HealthCheckRequest *)req)->service,
				       "service", NB_HEALTH_SERVICE_MAX_LEN, err);
	case NB_METHOD_COUNT:
		break;
	}
	return nb_error_set(err, NB_UNIMPLEMENTED, "", "unknown method %d", (int)m);
}
