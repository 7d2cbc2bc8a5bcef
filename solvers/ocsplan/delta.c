/*
 * delta.c - the ocsplan subcommands of the DAG-aware planner family:
 * `delta-fast` (DELTA-Fast, solvers/delta_ga.h) and the traffic-matrix
 * baselines `prop-alloc`, `sqrt-alloc`, `iter-halve`
 * (solvers/delta_baselines.h), all scored by the same simulator
 * (solvers/delta_sim.h).
 *
 * Input is either an explicit DAG (the contract of issue 6: pods,
 * port_budget, bandwidth_gbps, tasks, deps) or a parallelism spec (model,
 * parallelism, training, hardware, placement, bandwidth_gbps, optional
 * fabric) that solvers/delta_workload.h turns into a DAG. With
 * --leaf-centric (parallelism spec and fabric only) the pod-level circuits
 * are distributed to leaf pairs (solvers/delta_leaves.h) and planned and
 * realized by the leaf-centric planner (solvers/leafcentric.h). Formats,
 * options and errors are documented in solvers/README.md.
 *
 * The request/answer plumbing is io.h's (options --in/--out/--pretty, exit
 * codes, "field: reason" problems, unknown fields, answer building), except
 * reading, writing and the typed look-ups, which keep this family's messages
 * (below). It needs the planner family only for --leaf-centric (leaf.h,
 * leafcentric.h). Wiring:
 * the parallelism planners of the catalogue (solvers/planners.h), one
 * OCSPLAN_FAMILY line in families.def and delta.c in CMakeLists.txt.
 *
 * Single-threaded except for the optional fitness pool (--threads).
 */
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "delta_baselines.h"
#include "delta_dag.h"
#include "delta_ga.h"
#include "delta_leaves.h"
#include "delta_sim.h"
#include "delta_workload.h"
#include "fabric.h"
#include "leafcentric.h"
#include "io.h"
#include "leaf.h"
#include "ocs_json.h"
#include "ocs_pool_pthread.h"
#include "planners.h"

int ocsplan_delta_main(const struct ocs_planner *planner, int argc, char **argv);

/*
 * Reading the request, writing the answer and the typed look-ups follow the
 * contract of io.h with this family's own messages, which differ from
 * io.c's in a few words: a file that cannot be opened or read, a string or
 * array member of another type, a negative number where the range starts
 * at 0.
 */
static json_t *dio_read_json(const struct ocsplan_io *io, struct ocsplan_problems *p,
			     int *exit_code)
{
	FILE *fp = io->in_path ? fopen(io->in_path, "rb") : stdin;
	const char *name = io->in_path ? io->in_path : "stdin";
	size_t len = 0;
	char *text = fp ? ocsplan_slurp(fp, &len) : NULL;

	if (fp && fp != stdin)
		fclose(fp);
	if (!text) {
		fprintf(stderr, "ocsplan: cannot read %s: %s\n", name, strerror(errno));
		*exit_code = OCSPLAN_EXIT_FAILURE;
		return NULL;
	}
	json_t *v = ocsplan_parse_json(text, len, p, exit_code);
	free(text);
	return v;
}

/* answer NULL: building it ran out of memory. */
static int dio_write_json(const struct ocsplan_io *io, const json_t *answer)
{
	char *text = answer ? ocs_json_dumps(answer, io->pretty) : NULL;
	const char *name = io->out_path ? io->out_path : "stdout";

	if (!text) {
		fprintf(stderr, "ocsplan: out of memory while writing the answer\n");
		return OCSPLAN_EXIT_FAILURE;
	}
	size_t len = strlen(text);
	FILE *fp = io->out_path ? fopen(io->out_path, "wb") : stdout;
	bool ok = fp && fwrite(text, 1, len, fp) == len && fputc('\n', fp) != EOF;
	if (fp)
		ok &= (fp == stdout ? fflush(fp) : fclose(fp)) == 0;
	free(text);
	if (!ok) {
		fprintf(stderr, "ocsplan: cannot write %s: %s\n", name, strerror(errno));
		return OCSPLAN_EXIT_FAILURE;
	}
	return OCSPLAN_EXIT_OK;
}

static void field_name(char *out, size_t len, const char *where, const char *key)
{
	if (where[0])
		snprintf(out, len, "%s.%s", where, key);
	else
		snprintf(out, len, "%s", key);
}

/* Integer member in min..max; problems name "where.key". */
static bool dget_int(const json_t *obj, const char *where, const char *key, int64_t min,
		     int64_t max, int *out, struct ocsplan_problems *p)
{
	const json_t *v = json_object_get(obj, key);
	char field[96];
	int64_t x;

	field_name(field, sizeof(field), where, key);
	if (!v) {
		ocsplan_problem(p, field, "missing");
		return false;
	}
	if (!json_is_integer(v)) {
		ocsplan_problem(p, field, "must be an integer, not %s",
				json_is_real(v) ? "a fraction" : ocs_json_type_name(v));
		return false;
	}
	x = json_integer_value(v);
	if (x < min || x > max) {
		ocsplan_problem(p, field, "%lld out of range %lld..%lld", (long long)x,
				(long long)min, (long long)max);
		return false;
	}
	*out = (int)x;
	return true;
}

static bool dget_string(const json_t *obj, const char *where, const char *key, const char **out,
			struct ocsplan_problems *p)
{
	const json_t *v = json_object_get(obj, key);
	char field[96];

	field_name(field, sizeof(field), where, key);
	if (!json_is_string(v)) {
		ocsplan_problem(p, field, v ? "must be a string" : "missing");
		return false;
	}
	*out = json_string_value(v);
	return true;
}

/* Array member; an absent optional one gives *out = NULL and true. */
static bool dget_array(const json_t *obj, const char *where, const char *key, bool optional,
		       const json_t **out, struct ocsplan_problems *p)
{
	char field[96];

	*out = json_object_get(obj, key);
	field_name(field, sizeof(field), where, key);
	if (!*out) {
		if (!optional)
			ocsplan_problem(p, field, "missing");
		return optional;
	}
	if (!json_is_array(*out)) {
		ocsplan_problem(p, field, "must be an array");
		*out = NULL;
		return false;
	}
	return true;
}

struct options {
	struct ocsplan_io io;
	int threads;
	int leaf_centric;
	int seed_set, gens_set, stall_set, budget_set;
	long seed;
	int max_generations, stall_generations;
	double time_budget_ms;
};

struct request {
	/* explicit DAG */
	int pods;
	int *budget;
	struct delta_task *tasks;
	struct delta_dep *deps;
	char **ids;
	int n_tasks, n_deps;
	double bandwidth_gbps;
	/* parallelism spec */
	int is_workload;
	struct delta_workload_spec spec;
	struct ocs_fabric fabric;
	int has_fabric;
	int64_t *gpu_ids; /* placement.gpu_ids, rank order; NULL: default positions */
	size_t n_gpu_ids;
	/* GA settings from the file */
	struct delta_ga_params ga;
};

static double now_ms(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A number member; absent and optional leaves *out unchanged. */
static bool get_number(const json_t *obj, const char *where, const char *key, bool optional,
		       double min, double *out, struct ocsplan_problems *p)
{
	const json_t *v = json_object_get(obj, key);
	char field[96];

	field_name(field, sizeof(field), where, key);
	if (!v) {
		if (!optional)
			ocsplan_problem(p, field, "missing");
		return optional;
	}
	if (!json_is_number(v)) {
		ocsplan_problem(p, field, "must be a number, not %s", ocs_json_type_name(v));
		return false;
	}
	double d = json_number_value(v);
	if (!isfinite(d) || d < min) {
		ocsplan_problem(p, field, "must be a number >= %g, got %g", min, d);
		return false;
	}
	*out = d;
	return true;
}

/* An optional integer member: absent leaves *out unchanged. */
static void get_opt_int(const json_t *obj, const char *where, const char *key, int64_t min,
			int64_t max, int *out, struct ocsplan_problems *p)
{
	if (json_object_get(obj, key))
		dget_int(obj, where, key, min, max, out, p);
}

static void parse_ga(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	int seed = (int)r->ga.seed;
	get_opt_int(top, "", "seed", 0, INT_MAX, &seed, p);
	r->ga.seed = (uint64_t)seed;
	get_opt_int(top, "", "max_generations", 0, INT_MAX, &r->ga.max_generations, p);
	get_number(top, "", "time_budget_ms", true, 0, &r->ga.time_budget_ms, p);
}

static int find_id(const struct request *r, const char *id)
{
	for (int t = 0; t < r->n_tasks; t++)
		if (r->ids[t] && !strcmp(r->ids[t], id))
			return t;
	return -1;
}

static void parse_dag(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {
		"pods", "port_budget",	   "bandwidth_gbps", "tasks", "deps",
		"seed", "max_generations", "time_budget_ms", NULL};
	static const char *const task_keys[] = {"id",		"src_pod",    "dst_pod", "flows",
						"volume_bytes", "release_ms", NULL};
	static const char *const dep_keys[] = {"pre", "post", "delay_ms", NULL};
	const json_t *budget, *tasks, *deps;
	char where[48];

	ocsplan_unknown_fields(top, "", known, p);
	dget_int(top, "", "pods", 2, 1 << 16, &r->pods, p);
	get_number(top, "", "bandwidth_gbps", false, 0, &r->bandwidth_gbps, p);
	parse_ga(top, r, p);
	if (dget_array(top, "", "port_budget", false, &budget, p)) {
		if ((int)json_array_size(budget) != r->pods) {
			ocsplan_problem(p, "port_budget", "needs %d entries (one per pod), has %zu",
					r->pods, json_array_size(budget));
		} else {
			r->budget = calloc((size_t)r->pods, sizeof(int));
			for (int i = 0; r->budget && i < r->pods; i++) {
				const json_t *e = json_array_get(budget, (size_t)i);
				int64_t v = json_is_integer(e) ? json_integer_value(e) : -1;
				if (v < 0 || v > INT_MAX) {
					snprintf(where, sizeof(where), "port_budget[%d]", i);
					ocsplan_problem(p, where, "must be an integer >= 0");
				} else {
					r->budget[i] = (int)v;
				}
			}
		}
	}
	if (dget_array(top, "", "tasks", false, &tasks, p)) {
		r->n_tasks = (int)json_array_size(tasks);
		r->tasks = calloc((size_t)r->n_tasks + 1, sizeof(*r->tasks));
		r->ids = calloc((size_t)r->n_tasks + 1, sizeof(char *));
		if (!r->tasks || !r->ids) {
			ocsplan_problem(p, "tasks", "out of memory");
			return;
		}
		for (int t = 0; t < r->n_tasks; t++) {
			const json_t *e = json_array_get(tasks, (size_t)t);
			struct delta_task *m = &r->tasks[t];
			const char *id = NULL;
			snprintf(where, sizeof(where), "tasks[%d]", t);
			if (!json_is_object(e)) {
				ocsplan_problem(p, where, "must be an object");
				continue;
			}
			ocsplan_unknown_fields(e, where, task_keys, p);
			if (dget_string(e, where, "id", &id, p)) {
				if (find_id(r, id) >= 0)
					ocsplan_problem(p, where, "duplicate id \"%s\"", id);
				r->ids[t] = strdup(id);
			}
			dget_int(e, where, "src_pod", 0, INT_MAX, &m->src_pod, p);
			dget_int(e, where, "dst_pod", 0, INT_MAX, &m->dst_pod, p);
			dget_int(e, where, "flows", 1, INT_MAX, &m->flows, p);
			get_number(e, where, "volume_bytes", false, 0, &m->volume_bytes, p);
			get_number(e, where, "release_ms", true, 0, &m->release_ms, p);
		}
	}
	if (!dget_array(top, "", "deps", true, &deps, p) || !deps || p->count)
		return;
	r->n_deps = (int)json_array_size(deps);
	r->deps = calloc((size_t)r->n_deps + 1, sizeof(*r->deps));
	if (!r->deps) {
		ocsplan_problem(p, "deps", "out of memory");
		return;
	}
	for (int d = 0; d < r->n_deps; d++) {
		const json_t *e = json_array_get(deps, (size_t)d);
		const char *pre = NULL, *post = NULL;
		snprintf(where, sizeof(where), "deps[%d]", d);
		if (!json_is_object(e)) {
			ocsplan_problem(p, where, "must be an object");
			continue;
		}
		ocsplan_unknown_fields(e, where, dep_keys, p);
		if (dget_string(e, where, "pre", &pre, p) &&
		    (r->deps[d].pre = find_id(r, pre)) < 0) {
			snprintf(where, sizeof(where), "deps[%d].pre", d);
			ocsplan_problem(p, where, "unknown task \"%s\"", pre);
		}
		if (dget_string(e, where, "post", &post, p) &&
		    (r->deps[d].post = find_id(r, post)) < 0) {
			snprintf(where, sizeof(where), "deps[%d].post", d);
			ocsplan_problem(p, where, "unknown task \"%s\"", post);
		}
		get_number(e, where, "delay_ms", true, 0, &r->deps[d].delay_ms, p);
	}
}

static void parse_fabric(const json_t *fab, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"pods",  "k_leaf", "k_spine", "tau",
					    "k_ocs", "wiring", NULL};
	struct ocs_fabric_problem fp[8];
	const char *wiring = NULL;
	bool ok = true;

	if (!json_is_object(fab)) {
		ocsplan_problem(p, "fabric", "must be an object");
		return;
	}
	ocsplan_unknown_fields(fab, "fabric", known, p);
	ok &= dget_int(fab, "fabric", "pods", 0, 1 << 16, &r->fabric.pods, p);
	ok &= dget_int(fab, "fabric", "k_leaf", 0, 1 << 12, &r->fabric.k_leaf, p);
	ok &= dget_int(fab, "fabric", "k_spine", 0, 1 << 12, &r->fabric.k_spine, p);
	ok &= dget_int(fab, "fabric", "tau", 0, 1 << 12, &r->fabric.tau, p);
	ok &= dget_int(fab, "fabric", "k_ocs", 0, 1 << 20, &r->fabric.k_ocs, p);
	if (dget_string(fab, "fabric", "wiring", &wiring, p) &&
	    ocs_wiring_parse(wiring, &r->fabric.wiring) != 0) {
		ocsplan_problem(p, "fabric.wiring", "\"%s\" is not straight, dual or cross",
				wiring);
		ok = false;
	}
	if (!ok || !wiring)
		return;
	int n = ocs_fabric_validate(&r->fabric, fp, 8);
	for (int i = 0; i < n && i < 8; i++) {
		char field[80];
		snprintf(field, sizeof(field), "fabric.%s", fp[i].field);
		for (char *c = field; *c; c++)
			if (*c == '-')
				*c = '_';
		ocsplan_problem(p, field, "%s", fp[i].reason);
	}
	r->has_fabric = n == 0;
	r->spec.fabric_pods = r->fabric.pods;
}

static bool get_object(const json_t *top, const char *key, bool optional, const json_t **out,
		       struct ocsplan_problems *p)
{
	*out = json_object_get(top, key);
	if (!*out) {
		if (!optional)
			ocsplan_problem(p, key, "missing");
		return false;
	}
	if (!json_is_object(*out)) {
		ocsplan_problem(p, key, "must be an object");
		return false;
	}
	return true;
}

static void parse_workload(const json_t *top, struct request *r, struct ocsplan_problems *p)
{
	static const char *const known[] = {"model",	      "parallelism", "training",
					    "hardware",	      "placement",   "bandwidth_gbps",
					    "fabric",	      "seed",	     "max_generations",
					    "time_budget_ms", NULL};
	static const char *const model_keys[] = {"layers", "hidden",	   "ffn",
						 "heads",  "vocab",	   "experts",
						 "top_k",  "ffn_matrices", NULL};
	static const char *const par_keys[] = {"tp", "pp", "dp", "ep", "expert_tp", NULL};
	static const char *const train_keys[] = {"seq_len", "micro_batch", "micro_batches", NULL};
	static const char *const hw_keys[] = {"gpu_tflops",	 "efficiency", "intra_pod_gbps",
					      "bytes_per_value", "grad_bytes", NULL};
	static const char *const place_keys[] = {
		"gpus", "gpus_per_pod_per_replica", "replicas_per_pod_set", "first_pod", "gpu_ids",
		NULL};
	struct delta_workload_spec *q = &r->spec;
	const json_t *o;

	r->is_workload = 1;
	ocsplan_unknown_fields(top, "", known, p);
	get_number(top, "", "bandwidth_gbps", false, 0, &q->bandwidth_gbps, p);
	parse_ga(top, r, p);
	if (get_object(top, "model", false, &o, p)) {
		ocsplan_unknown_fields(o, "model", model_keys, p);
		dget_int(o, "model", "layers", 1, INT_MAX, &q->layers, p);
		dget_int(o, "model", "hidden", 1, INT_MAX, &q->hidden, p);
		dget_int(o, "model", "ffn", 1, INT_MAX, &q->ffn, p);
		dget_int(o, "model", "heads", 1, INT_MAX, &q->heads, p);
		dget_int(o, "model", "vocab", 1, INT_MAX, &q->vocab, p);
		get_opt_int(o, "model", "experts", 0, INT_MAX, &q->experts, p);
		get_opt_int(o, "model", "top_k", 0, INT_MAX, &q->top_k, p);
		get_opt_int(o, "model", "ffn_matrices", 0, INT_MAX, &q->ffn_matrices, p);
	}
	if (get_object(top, "parallelism", false, &o, p)) {
		ocsplan_unknown_fields(o, "parallelism", par_keys, p);
		dget_int(o, "parallelism", "tp", 1, INT_MAX, &q->tp, p);
		dget_int(o, "parallelism", "pp", 1, INT_MAX, &q->pp, p);
		get_opt_int(o, "parallelism", "dp", 1, INT_MAX, &q->dp, p);
		get_opt_int(o, "parallelism", "ep", 1, INT_MAX, &q->ep, p);
		get_opt_int(o, "parallelism", "expert_tp", 1, INT_MAX, &q->etp, p);
	}
	if (get_object(top, "training", false, &o, p)) {
		ocsplan_unknown_fields(o, "training", train_keys, p);
		dget_int(o, "training", "seq_len", 1, INT_MAX, &q->seq_len, p);
		get_opt_int(o, "training", "micro_batch", 1, INT_MAX, &q->micro_batch, p);
		dget_int(o, "training", "micro_batches", 1, 1 << 20, &q->micro_batches, p);
	}
	if (get_object(top, "hardware", true, &o, p)) {
		ocsplan_unknown_fields(o, "hardware", hw_keys, p);
		get_number(o, "hardware", "gpu_tflops", true, 0, &q->gpu_tflops, p);
		get_number(o, "hardware", "efficiency", true, 0, &q->efficiency, p);
		get_number(o, "hardware", "intra_pod_gbps", true, 0, &q->intra_pod_gbps, p);
		get_opt_int(o, "hardware", "bytes_per_value", 1, 64, &q->bytes_per_value, p);
		get_opt_int(o, "hardware", "grad_bytes", 1, 64, &q->grad_bytes, p);
	}
	if (get_object(top, "placement", false, &o, p)) {
		ocsplan_unknown_fields(o, "placement", place_keys, p);
		get_opt_int(o, "placement", "gpus", 1, INT_MAX, &q->gpus, p);
		dget_int(o, "placement", "gpus_per_pod_per_replica", 1, INT_MAX,
			 &q->gpus_per_pod_per_replica, p);
		get_opt_int(o, "placement", "replicas_per_pod_set", 1, INT_MAX,
			    &q->replicas_per_pod_set, p);
		get_opt_int(o, "placement", "first_pod", 0, INT_MAX, &q->first_pod, p);
		const json_t *ids;
		if (dget_array(o, "placement", "gpu_ids", true, &ids, p) && ids) {
			r->n_gpu_ids = json_array_size(ids);
			r->gpu_ids = calloc(r->n_gpu_ids + 1, sizeof(*r->gpu_ids));
			for (size_t i = 0; r->gpu_ids && i < r->n_gpu_ids; i++) {
				const json_t *e = json_array_get(ids, i);

				r->gpu_ids[i] = json_is_integer(e) ? json_integer_value(e) : -1;
				if (r->gpu_ids[i] < 0) {
					char field[64];
					snprintf(field, sizeof(field), "placement.gpu_ids[%zu]", i);
					ocsplan_problem(p, field, "must be an integer >= 0");
				}
			}
			if (!r->gpu_ids)
				ocsplan_problem(p, "placement.gpu_ids", "out of memory");
		}
	}
	if (get_object(top, "fabric", true, &o, p))
		parse_fabric(o, r, p);
}

static void free_request(struct request *r)
{
	for (int t = 0; r->ids && t < r->n_tasks; t++)
		free(r->ids[t]);
	free(r->ids);
	free(r->budget);
	free(r->gpu_ids);
	free(r->tasks);
	free(r->deps);
}

static bool set_sim(json_t *answer, const struct delta_sim_result *res, long used, long available)
{
	return ocsplan_set(answer, "makespan_ms", ocs_json_number(res->makespan_ms)) &&
	       ocsplan_set(answer, "critical_comm_ms", ocs_json_number(res->critical_comm_ms)) &&
	       ocsplan_set(answer, "nct", ocs_json_number(res->nct)) &&
	       ocsplan_set(answer, "ports_used", json_integer(used)) &&
	       ocsplan_set(answer, "ports_available", json_integer(available)) &&
	       ocsplan_set(answer, "ports_saved", json_integer(available - used));
}

/* The leaf-centric answer in the format of `ocsplan leaf-centric --realize`. */
static bool set_leaf_plan(json_t *answer, const struct delta_leaf_links *d, size_t n, long unplaced,
			  const struct lc_plan *pl)
{
	json_t *demand = json_array();
	bool ok = ocsplan_set(answer, "leaf_demand", demand);

	for (size_t i = 0; ok && i < n; i++)
		ok = ocsplan_append(demand, json_pack("{s:i, s:i, s:i}", "a", d[i].a, "b", d[i].b,
						      "links", d[i].links));
	return ok && ocsplan_set(answer, "leaf_unplaced_circuits", json_integer(unplaced)) &&
	       ocsplan_set(answer, "leaf_centric",
			   ocsplan_lc_plan_json(pl, &(struct lc_options){.realize = true}));
}

static int parse_options(const struct ocs_planner *planner, int argc, char **argv,
			 struct options *o, struct ocsplan_problems *p)
{
	o->threads = 1;
	for (int i = 1; i < argc; i++) {
		int used = ocsplan_io_option(&o->io, argc, argv, &i, p);
		if (used)
			continue;
		const char *opt = argv[i];
		if (!strcmp(opt, "--leaf-centric")) {
			o->leaf_centric = 1;
			continue;
		}
		long *lv = NULL;
		int *iv = NULL, *set = NULL;
		double *dv = NULL;
		long seed = 0;
		if (!strcmp(opt, "--seed"))
			lv = &seed, set = &o->seed_set;
		else if (!strcmp(opt, "--max-generations"))
			iv = &o->max_generations, set = &o->gens_set;
		else if (!strcmp(opt, "--stall-generations"))
			iv = &o->stall_generations, set = &o->stall_set;
		else if (!strcmp(opt, "--threads"))
			iv = &o->threads;
		else if (!strcmp(opt, "--time-budget-ms"))
			dv = &o->time_budget_ms, set = &o->budget_set;
		else {
			ocsplan_problem(p, opt, "unknown option for %s", planner->name);
			continue;
		}
		if (i + 1 >= argc) {
			ocsplan_problem(p, opt, "needs a value");
			continue;
		}
		char *end;
		const char *val = argv[++i];
		if (dv) {
			*dv = strtod(val, &end);
			if (*end || *dv < 0)
				ocsplan_problem(p, opt, "\"%s\" is not a number >= 0", val);
		} else {
			long v = strtol(val, &end, 10);
			long min = (iv == &o->threads || iv == &o->stall_generations) ? 1 : 0;
			if (*end || v < min || v > INT_MAX)
				ocsplan_problem(p, opt, "\"%s\" is not a valid count", val);
			else if (lv)
				o->seed = v;
			else
				*iv = (int)v;
		}
		if (set)
			*set = 1;
	}
	if (o->threads > 64)
		ocsplan_problem(p, "--threads", "at most 64");
	return p->count ? -1 : 0;
}

struct run {
	struct delta_problem *prob;
	struct delta_workload *wl;
	int *x;
	struct delta_sim_result res;
	struct delta_ga_stats stats;
	double *start, *finish;
};

static int plan(const struct ocs_planner *planner, struct request *r, const struct options *o,
		struct run *run, struct ocsplan_problems *p)
{
	struct delta_error err;
	struct delta_dag dag = {.pods = r->pods,
				.port_budget = r->budget,
				.bandwidth_gbps = r->bandwidth_gbps,
				.n_tasks = r->n_tasks,
				.tasks = r->tasks,
				.n_deps = r->n_deps,
				.deps = r->deps};
	if (r->is_workload) {
		int rc = delta_workload_build(&r->spec, &run->wl, &err);
		if (rc) {
			ocsplan_problem(p, err.field, "%s", err.reason);
			return rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
		}
		dag = run->wl->dag;
		if (r->gpu_ids && (long)r->n_gpu_ids != delta_workload_gpus(run->wl)) {
			ocsplan_problem(p, "placement.gpu_ids",
					"needs %ld entries (the job's GPUs in rank order), has %zu",
					delta_workload_gpus(run->wl), r->n_gpu_ids);
			return OCSPLAN_EXIT_INVALID;
		}
		if (r->gpu_ids && !r->has_fabric) {
			ocsplan_problem(p, "placement.gpu_ids", "needs a fabric to check against");
			return OCSPLAN_EXIT_INVALID;
		}
		if (r->gpu_ids) {
			rc = delta_check_gpu_ids(&r->fabric, run->wl, r->gpu_ids, &err);
			if (rc) {
				ocsplan_problem(p, err.field, "%s", err.reason);
				return rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
			}
		}
	}
	run->prob = delta_problem_new(&dag, &err);
	if (!run->prob) {
		ocsplan_problem(p, err.field, "%s", err.reason);
		return strcmp(err.field, "memory") ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
	}
	int n = delta_problem_n_tasks(run->prob), L = delta_problem_n_links(run->prob), rc;
	run->x = calloc((size_t)L, sizeof(int));
	run->start = calloc((size_t)n, sizeof(double));
	run->finish = calloc((size_t)n, sizeof(double));
	if (!run->x || !run->start || !run->finish) {
		ocsplan_problem(p, "input", "out of memory");
		return OCSPLAN_EXIT_FAILURE;
	}
	if (planner->id == OCS_PLANNER_DELTA_FAST) {
		struct ocs_pool_pthread *pool =
			o->threads > 1 ? ocs_pool_pthread_new(o->threads) : NULL;
		struct delta_ga_params gp = r->ga;
		if (o->seed_set)
			gp.seed = (uint64_t)o->seed;
		if (o->gens_set)
			gp.max_generations = o->max_generations;
		if (o->stall_set)
			gp.stall_generations = o->stall_generations;
		if (o->budget_set)
			gp.time_budget_ms = o->time_budget_ms;
		if (gp.time_budget_ms > 0)
			gp.clock_ms = now_ms;
		rc = delta_fast(run->prob, &gp, NULL, pool ? ocs_pool_pthread_pool(pool) : NULL,
				run->x, &run->res, &run->stats, &err);
		ocs_pool_pthread_free(pool);
	} else {
		enum delta_baseline kind = planner->id == OCS_PLANNER_PROP_ALLOC ? DELTA_PROP_ALLOC
					   : planner->id == OCS_PLANNER_SQRT_ALLOC
						   ? DELTA_SQRT_ALLOC
						   : DELTA_ITER_HALVE;
		rc = delta_baseline_plan(run->prob, kind, run->x, &err);
	}
	if (rc) {
		ocsplan_problem(p, err.field, "%s", err.reason);
		return rc == -ENOMEM ? OCSPLAN_EXIT_FAILURE : OCSPLAN_EXIT_INVALID;
	}
	rc = delta_simulate(run->prob, run->x, &run->res, run->start, run->finish);
	if (rc) {
		ocsplan_problem(p, "tasks", "the plan leaves a task without circuits");
		return OCSPLAN_EXIT_INVALID;
	}
	return OCSPLAN_EXIT_OK;
}

static int write_answer(const struct ocs_planner *planner, const struct request *r,
			const struct options *o, const struct run *run,
			const struct delta_leaf_links *leaves, size_t n_leaves, long unplaced,
			const struct lc_plan *lp)
{
	const struct delta_problem *prob = run->prob;
	int L = delta_problem_n_links(prob), S = run->wl ? run->wl->pod_sets : 1;
	long *used = malloc((size_t)delta_problem_pods(prob) * sizeof(long));
	struct delta_pod_circuits *pc = NULL;
	int n_pc = 0;
	json_t *answer = json_object(), *x = json_array(), *tasks = json_array();
	bool ok;
	int code;

	if (run->wl) {
		pc = malloc((size_t)delta_workload_expand_max(run->wl, prob) * sizeof(*pc) + 1);
		if (pc)
			n_pc = delta_workload_expand(run->wl, prob, run->x, pc);
	}
	ok = used && (!run->wl || pc) &&
	     ocsplan_set(answer, "planner", json_string(planner->name)) &&
	     ocsplan_set(answer, "x", json_incref(x));
	for (int k = 0; ok && k < (run->wl ? n_pc : L); k++) {
		const struct delta_link *l = &delta_problem_links(prob)[k];
		ok = ocsplan_append(x, json_pack("{s:i, s:i, s:i}", "i", run->wl ? pc[k].i : l->a,
						 "j", run->wl ? pc[k].j : l->b, "circuits",
						 run->wl ? pc[k].circuits : run->x[k]));
	}
	ok = ok &&
	     set_sim(answer, &run->res, delta_ports_used(prob, run->x, used) * S,
		     delta_ports_available(prob) * S) &&
	     ocsplan_set(answer, "tasks", json_incref(tasks));
	for (int t = 0; ok && t < delta_problem_n_tasks(prob); t++)
		ok = ocsplan_append(tasks, json_pack("{s:s, s:o, s:o}", "id",
						     run->wl ? run->wl->task_names[t] : r->ids[t],
						     "start_ms", ocs_json_number(run->start[t]),
						     "finish_ms", ocs_json_number(run->finish[t])));
	if (ok && run->wl)
		ok = ocsplan_set(answer, "pod_sets", json_integer(S));
	if (ok && planner->id == OCS_PLANNER_DELTA_FAST)
		ok = ocsplan_set(answer, "stats",
				 json_pack("{s:I, s:I, s:b}", "generations",
					   (json_int_t)run->stats.generations, "evaluations",
					   (json_int_t)run->stats.evaluations, "stopped_by_time",
					   (int)run->stats.stopped_by_time));
	if (ok && lp)
		ok = set_leaf_plan(answer, leaves, n_leaves, unplaced, lp);
	code = dio_write_json(&o->io, ok ? answer : NULL);
	json_decref(x);
	json_decref(tasks);
	json_decref(answer);
	free(used);
	free(pc);
	return code;
}

int ocsplan_delta_main(const struct ocs_planner *planner, int argc, char **argv)
{
	struct options o = {0};
	struct ocsplan_problems p = {0};
	struct request r = {0};
	struct run run = {0};
	struct delta_leaf_links *leaves = NULL;
	size_t n_leaves = 0;
	long unplaced = 0;
	struct lc_plan *lp = NULL;
	int code;

	if (parse_options(planner, argc, argv, &o, &p))
		return OCSPLAN_EXIT_INVALID;
	json_t *top = dio_read_json(&o.io, &p, &code);
	if (!top)
		return code;
	delta_workload_defaults(&r.spec);
	delta_ga_defaults(&r.ga);
	if (!json_is_object(top))
		ocsplan_problem(&p, "input",
				"must be a JSON object (an explicit DAG or a "
				"parallelism spec)");
	else if (json_object_get(top, "tasks"))
		parse_dag(top, &r, &p);
	else if (json_object_get(top, "parallelism"))
		parse_workload(top, &r, &p);
	else
		ocsplan_problem(&p, "input",
				"needs \"tasks\" (explicit DAG) or \"parallelism\" "
				"(parallelism spec)");
	json_decref(top);
	if (o.leaf_centric && p.count == 0 && (!r.is_workload || !r.has_fabric))
		ocsplan_problem(&p, "--leaf-centric",
				"needs a parallelism spec with a fabric (an explicit DAG has no "
				"GPU placement)");
	code = p.count ? OCSPLAN_EXIT_INVALID : plan(planner, &r, &o, &run, &p);
	if (code == OCSPLAN_EXIT_OK && o.leaf_centric) {
		struct delta_error err;
		int rc = delta_leaf_demand(&r.fabric, run.wl, run.prob, run.x, r.gpu_ids, &leaves,
					   &n_leaves, &unplaced, &err);
		if (rc) {
			ocsplan_problem(&p, err.field, "%s", err.reason);
			code = rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
		} else {
			struct lc_demand *d = calloc(n_leaves + 1, sizeof(*d));
			struct lc_options lo = {.realize = true};
			for (size_t i = 0; d && i < n_leaves; i++)
				d[i] = (struct lc_demand){leaves[i].a, leaves[i].b,
							  leaves[i].links};
			rc = d ? lc_plan(&r.fabric, d, n_leaves, NULL, 0, &lo, &lp) : -ENOMEM;
			free(d);
			if (rc) {
				fprintf(stderr, "ocsplan: leaf-centric planning failed: %s\n",
					strerror(-rc));
				code = rc == -EINVAL ? OCSPLAN_EXIT_INVALID : OCSPLAN_EXIT_FAILURE;
			}
		}
	}
	if (code == OCSPLAN_EXIT_OK)
		code = write_answer(planner, &r, &o, &run, leaves, n_leaves, unplaced, lp);
	lc_plan_free(lp);
	free(leaves);
	free(run.x);
	free(run.start);
	free(run.finish);
	delta_problem_free(run.prob);
	delta_workload_free(run.wl);
	free_request(&r);
	return code;
}
