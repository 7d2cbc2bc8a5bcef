/*
 * test_delta_workload.c - the DELTA workload model on a configuration small
 * enough to work out by hand (4 layers, TP 2, PP 4, DP 2, 2 stages per pod),
 * the DP-replica symmetry reduction, expansion of a plan to real pod pairs,
 * and refusal of bad specs with the offending field named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_dag.h"
#include "delta_leaves.h"
#include "delta_plan.h"
#include "fabric.h"
#include "delta_sim.h"
#include "delta_workload.h"

static void small_spec(struct delta_workload_spec *q)
{
	delta_workload_defaults(q);
	q->layers = 4;
	q->hidden = 64;
	q->ffn = 256;
	q->heads = 4;
	q->vocab = 100;
	q->tp = 2;
	q->pp = 4;
	q->dp = 2;
	q->seq_len = 128;
	q->micro_batches = 4;
	q->bandwidth_gbps = 400;
	q->gpus = 16;
	q->gpus_per_pod_per_replica = 4; /* 2 stages of 2 GPUs per pod */
}

static int count_prefix(const struct delta_workload *w, const char *prefix)
{
	int n = 0;
	for (int t = 0; t < w->dag.n_tasks; t++)
		n += strncmp(w->task_names[t], prefix, strlen(prefix)) == 0;
	return n;
}

static int find_task(const struct delta_workload *w, const char *name)
{
	for (int t = 0; t < w->dag.n_tasks; t++)
		if (!strcmp(w->task_names[t], name))
			return t;
	return -1;
}

static void test_small_by_hand(void **state)
{
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	small_spec(&q);
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	assert_int_equal(w->stage_width, 2);
	assert_int_equal(w->set_pods, 2); /* stages 0,1 | 2,3 */
	assert_int_equal(w->pod_sets, 2); /* units = TP*DP/w = 2, one per set */
	assert_int_equal(w->dag.pods, 4); /* 2 pods + 2 ring peers */
	/* Only the s1 -> s2 boundary crosses pods: M forward + M backward. */
	assert_int_equal(count_prefix(w, "fwd "), 4);
	assert_int_equal(count_prefix(w, "bwd "), 4);
	assert_int_equal(count_prefix(w, "dp "), 4);
	int f0 = find_task(w, "fwd mb0 s1>s2");
	assert_true(f0 >= 0);
	const struct delta_task *t = &w->dag.tasks[f0];
	assert_int_equal(t->src_pod, 0);
	assert_int_equal(t->dst_pod, 1);
	assert_int_equal(t->flows, 2);				   /* c * w */
	assert_float_equal(t->volume_bytes, 128.0 * 64 * 2, 1e-6); /* (w/TP) b s h beta */
	/* Release: forward of stages 0 and 1 plus the intra-pod s0 -> s1 send. */
	double layer = 2.0 * 128 * 4 * 64 * 64 + 4.0 * 128 * 128 * 64 + 2.0 * 128 * 2 * 64 * 256;
	double rate = 2 * 989e12 * 0.5 / 1e3, intra = 3600e9 / 8 / 1e3;
	double act = 128.0 * 64 * 2, tp_ms = 2 * (2.0 * 1 / 2) * act / intra;
	double fwd = layer / rate + tp_ms;
	assert_float_equal(w->compute_fwd_ms, fwd, 1e-12);
	assert_float_equal(t->release_ms, 2 * fwd + act / 2 / intra, 1e-12);
	/* DP of stage 0: ring of S = 2 sets, 2(S-1)/S = 1 x params x 2 bytes. */
	int d0 = find_task(w, "dp s0");
	assert_true(d0 >= 0);
	double params0 = 4.0 * 64 * 64 + 2.0 * 64 * 256 + 100.0 * 64;
	assert_float_equal(w->dag.tasks[d0].volume_bytes, params0 * 2, 1e-6);
	assert_int_equal(w->dag.tasks[d0].src_pod, 0);
	assert_int_equal(w->dag.tasks[d0].dst_pod, 2); /* ring peer of pod 0 */
	/* Budgets: the job's GPUs per pod; peers carry none. */
	assert_int_equal(w->dag.port_budget[0], 4);
	assert_int_equal(w->dag.port_budget[1], 4);
	assert_int_equal(w->dag.port_budget[2], 0);
	/* Links: PP (0,1) and two ring links costing 1 port (S = 2). */
	assert_int_equal(w->dag.n_links, 3);
	assert_int_equal(w->dag.links[1].cost_a, 1);
	assert_int_equal(w->dag.links[1].cost_b, 0);

	struct delta_problem *p = delta_problem_new(&w->dag, &err);
	assert_non_null(p);
	/* "bwd mb0 s2>s1" must wait for fwd mb0 (pipeline turn-around). */
	int b0 = find_task(w, "bwd mb0 s2>s1"), n_in, found = 0;
	const int *in = delta_problem_in_deps(p, b0, &n_in);
	for (int k = 0; k < n_in; k++)
		found |= delta_problem_deps(p)[in[k]].pre == f0;
	assert_true(found);
	int x[3] = {2, 1, 1};
	struct delta_sim_result r;
	assert_int_equal(delta_simulate(p, x, &r, NULL, NULL), 0);
	assert_true(r.nct >= 1.0 - 1e-12);
	/* Expansion: PP link in both sets, each ring link once (S = 2). */
	struct delta_pod_circuits pc[8];
	assert_true(delta_workload_expand_max(w, p) <= 8);
	int n = delta_workload_expand(w, p, x, pc);
	assert_int_equal(n, 4);
	assert_int_equal(pc[0].i, 0);
	assert_int_equal(pc[0].j, 1);
	assert_int_equal(pc[1].i, 2);
	assert_int_equal(pc[1].j, 3);
	assert_int_equal(pc[2].i, 0);
	assert_int_equal(pc[2].j, 2);
	assert_int_equal(pc[2].circuits, 1);
	delta_problem_free(p);
	delta_workload_free(w);
}

/*
 * The reduction against a direct schedule: the full 1F1B schedule of the
 * small spec (every op, asynchronous sends, ideal network) computed here by
 * plain relaxation, independently of the builder, must start every
 * inter-pod task of the reduced DAG exactly when the reduced DAG's ideal
 * schedule does.
 */
static void test_reduction_matches_full_schedule(void **state)
{
	enum { PP = 4, M = 16 };
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	small_spec(&q);
	q.micro_batches = M;
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	struct delta_problem *p = delta_problem_new(&w->dag, &err);
	assert_non_null(p);
	int n = delta_problem_n_tasks(p);
	double *rs = malloc((size_t)n * sizeof(double)), *rf = malloc((size_t)n * sizeof(double));
	struct delta_sim_result ideal;
	assert_int_equal(delta_simulate_ideal(p, &ideal, rs, rf), 0);

	double layer = 2.0 * 128 * 4 * 64 * 64 + 4.0 * 128 * 128 * 64 + 2.0 * 128 * 2 * 64 * 256;
	double rate = 2 * 989e12 * 0.5 / 1e3, intra = 3600e9 / 8 / 1e3, bpms = 400e9 / 8 / 1e3;
	double act = 128.0 * 64 * 2, tp_ms = 2 * (2.0 * 1 / 2) * act / intra;
	double fwd[PP], bwd[PP];
	for (int s = 0; s < PP; s++) {
		double fl = layer + (s == PP - 1 ? 2.0 * 128 * 64 * 100 : 0);
		fwd[s] = fl / rate + tp_ms;
		bwd[s] = 2 * fl / rate + tp_ms;
	}
	/* Sends between stages: s1 -> s2 crosses pods (2 flows of act/2 each). */
	double local = act / 2 / intra, remote = act / 2 / bpms;
	double comm[PP - 1] = {local, remote, local};
	/* Op order per stage (1F1B) and op times by relaxation. */
	int kind[PP][2 * M], mb[PP][2 * M];
	for (int s = 0; s < PP; s++) {
		int warm = PP - s - 1, k = 0, nf = 0, nb = 0;
		for (int i = 0; i < warm; i++, k++)
			kind[s][k] = 0, mb[s][k] = nf++;
		while (nf < M) {
			kind[s][k] = 0, mb[s][k++] = nf++;
			kind[s][k] = 1, mb[s][k++] = nb++;
		}
		while (nb < M)
			kind[s][k] = 1, mb[s][k++] = nb++;
	}
	double ff[PP][M] = {{0}}, bf[PP][M] = {{0}};
	for (int pass = 0; pass < 4 * PP * M; pass++)
		for (int s = 0; s < PP; s++) {
			double prev = 0;
			for (int k = 0; k < 2 * M; k++) {
				int b = mb[s][k];
				double ready = prev;
				if (kind[s][k] == 0) {
					if (s > 0 && ff[s - 1][b] + comm[s - 1] > ready)
						ready = ff[s - 1][b] + comm[s - 1];
					ff[s][b] = prev = ready + fwd[s];
				} else {
					if (s < PP - 1 && bf[s + 1][b] + comm[s] > ready)
						ready = bf[s + 1][b] + comm[s];
					bf[s][b] = prev = ready + bwd[s];
				}
			}
		}
	/* Long op chains exercise the zero-volume sync tasks as well. */
	assert_true(count_prefix(w, "sync ") > 0);
	char name[48];
	for (int b = 0; b < M; b++) {
		snprintf(name, sizeof(name), "fwd mb%d s1>s2", b);
		int t = find_task(w, name);
		assert_true(t >= 0);
		assert_float_equal(rs[t], ff[1][b], 1e-12);
		assert_float_equal(rf[t], ff[1][b] + remote, 1e-12);
		snprintf(name, sizeof(name), "bwd mb%d s2>s1", b);
		t = find_task(w, name);
		assert_true(t >= 0);
		assert_float_equal(rs[t], bf[2][b], 1e-12);
	}
	for (int s = 0; s < PP; s++) {
		snprintf(name, sizeof(name), "dp s%d", s);
		int t = find_task(w, name);
		assert_float_equal(rs[t], bf[s][M - 1], 1e-12);
	}
	free(rs);
	free(rf);
	delta_problem_free(p);
	delta_workload_free(w);
}

static void test_symmetry_merge(void **state)
{
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	small_spec(&q);
	q.replicas_per_pod_set = 2; /* both replicas on the same 2 pods */
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	assert_int_equal(w->pod_sets, 1);
	assert_int_equal(w->dag.pods, 2);
	assert_int_equal(count_prefix(w, "dp "), 0); /* DP stays inside pods */
	int f0 = find_task(w, "fwd mb0 s1>s2");
	assert_int_equal(w->dag.tasks[f0].flows, 4);
	assert_float_equal(w->dag.tasks[f0].volume_bytes, 2 * 128.0 * 64 * 2, 1e-6);
	assert_int_equal(w->dag.port_budget[0], 8);
	delta_workload_free(w);

	/* Four sets: ring links cost 2 ports at the real pod. */
	small_spec(&q);
	q.dp = 4;
	q.gpus = 32;
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	assert_int_equal(w->pod_sets, 4);
	int d0 = find_task(w, "dp s0");
	double params0 = 4.0 * 64 * 64 + 2.0 * 64 * 256 + 100.0 * 64;
	assert_float_equal(w->dag.tasks[d0].volume_bytes, 2.0 * 3 / 4 * params0 * 2, 1e-6);
	assert_int_equal(w->dag.links[1].cost_a, 2);
	delta_workload_free(w);
}

static void test_moe(void **state)
{
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	small_spec(&q);
	q.experts = 8;
	q.top_k = 2;
	q.ep = 4;
	q.gpus_per_pod_per_replica = 8; /* w = lcm(2, 4) = 4: 2 stages per pod */
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	assert_int_equal(w->stage_width, 4);
	assert_int_equal(w->pod_sets, 1); /* units = TP*DP/w = 1 */
	assert_int_equal(count_prefix(w, "fwd "), 4);
	delta_workload_free(w);
}

static void expect_field(struct delta_workload_spec *q, const char *field)
{
	struct delta_workload *w = (struct delta_workload *)1;
	struct delta_error err;
	assert_int_not_equal(delta_workload_build(q, &w, &err), 0);
	assert_null(w);
	assert_string_equal(err.field, field);
	assert_true(strlen(err.reason) > 0);
}

static void test_bad_specs(void **state)
{
	struct delta_workload_spec q;
	small_spec(&q);
	q.dp = 0;
	q.gpus = 18; /* TP*PP = 8 does not divide 18 */
	expect_field(&q, "parallelism.tp");
	small_spec(&q);
	q.gpus = 20; /* TP*PP*DP = 16 */
	expect_field(&q, "placement.gpus");
	small_spec(&q);
	q.gpus_per_pod_per_replica = 3; /* splits a TP group */
	expect_field(&q, "placement.gpus_per_pod_per_replica");
	small_spec(&q);
	q.bandwidth_gbps = 0;
	expect_field(&q, "bandwidth_gbps");
	small_spec(&q);
	q.tp = 8;
	q.dp = 0;
	q.gpus = 32; /* 8 does not divide 4 heads */
	expect_field(&q, "parallelism.tp");
	small_spec(&q);
	q.pp = 3;
	expect_field(&q, "parallelism.pp");
	small_spec(&q);
	q.fabric_pods = 3; /* needs 4 pods */
	expect_field(&q, "placement.pods");
	small_spec(&q);
	q.replicas_per_pod_set = 3;
	expect_field(&q, "placement.replicas_per_pod_set");
	small_spec(&q);
	q.ep = 2; /* dense model */
	expect_field(&q, "parallelism.ep");
	small_spec(&q);
	q.micro_batches = 2;
	expect_field(&q, "training.micro_batches");
}

static void test_leaf_demand(void **state)
{
	/* 4 pods of 2 leaves with 2 GPUs each (k_leaf 2, k_spine 4, tau 2). The
	 * small job fills every pod: stage s0 on leaf 0, s1 on leaf 1 of pod 0,
	 * s2/s3 on the leaves of pod 1; the second DP set on pods 2 and 3. */
	struct ocs_fabric f = {.pods = 4,
			       .k_leaf = 2,
			       .k_spine = 4,
			       .tau = 2,
			       .k_ocs = 8,
			       .wiring = OCS_WIRING_STRAIGHT};
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	assert_int_equal(ocs_fabric_validate(&f, NULL, 0), 0);
	small_spec(&q);
	assert_int_equal(delta_workload_build(&q, &w, &err), 0);
	struct delta_problem *p = delta_problem_new(&w->dag, &err);
	assert_non_null(p);
	int x[3] = {1, 2, 2}; /* PP (0,1), ring of pod 0, ring of pod 1 */
	struct delta_leaf_links *d;
	size_t n;
	long unplaced;
	assert_int_equal(delta_leaf_demand(&f, w, p, x, NULL, &d, &n, &unplaced, &err), 0);
	assert_int_equal(unplaced, 0);
	/* Expected (sorted): (0,4) DP s0, (1,2) PP s1>s2 set 0, (1,5) DP s1,
	 * (2,6) DP s2, (3,7) DP s3, (5,6) PP set 1. */
	int want[][3] = {{0, 4, 1}, {1, 2, 1}, {1, 5, 1}, {2, 6, 1}, {3, 7, 1}, {5, 6, 1}};
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(d[i].a, want[i][0]);
		assert_int_equal(d[i].b, want[i][1]);
		assert_int_equal(d[i].links, want[i][2]);
	}
	free(d);
	/* More circuits than uplinks: leaf 1 has 2 uplinks, PP wants 3. */
	int big[3] = {3, 2, 2};
	assert_int_equal(delta_leaf_demand(&f, w, p, big, NULL, &d, &n, &unplaced, &err), 0);
	assert_true(unplaced > 0);
	int used[8] = {0};
	for (size_t i = 0; i < n; i++) {
		used[d[i].a] += d[i].links;
		used[d[i].b] += d[i].links;
	}
	for (int l = 0; l < 8; l++)
		assert_true(used[l] <= f.k_leaf);
	free(d);
	/* An explicit GPU list in rank order: the identity is the default... */
	int64_t gpus[16];
	for (int i = 0; i < 16; i++)
		gpus[i] = i;
	assert_int_equal(delta_workload_gpus(w), 16);
	assert_int_equal(delta_leaf_demand(&f, w, p, x, gpus, &d, &n, &unplaced, &err), 0);
	assert_int_equal(n, 6);
	assert_int_equal(d[1].a, 1);
	assert_int_equal(d[1].b, 2);
	free(d);
	/* ...swapping stages 0 and 1 of set 0 in pod 0 moves the s1>s2 pair to
	 * leaf 0 and the DP ring of s0 to leaf 1. */
	gpus[0] = 2, gpus[1] = 3, gpus[2] = 0, gpus[3] = 1;
	assert_int_equal(delta_leaf_demand(&f, w, p, x, gpus, &d, &n, &unplaced, &err), 0);
	int found_pp = 0, found_dp = 0;
	for (size_t i = 0; i < n; i++) {
		found_pp |= d[i].a == 0 && d[i].b == 2;
		found_dp |= d[i].a == 1 && d[i].b == 4;
	}
	assert_true(found_pp && found_dp);
	free(d);
	/* A GPU in another pod than its rank's, and a GPU listed twice. */
	gpus[0] = 4;
	assert_int_equal(delta_leaf_demand(&f, w, p, x, gpus, &d, &n, &unplaced, &err), -EINVAL);
	assert_string_equal(err.field, "placement.gpu_ids[0]");
	gpus[0] = 2;
	gpus[1] = 2;
	assert_int_equal(delta_leaf_demand(&f, w, p, x, gpus, &d, &n, &unplaced, &err), -EINVAL);
	assert_string_equal(err.field, "placement.gpu_ids");
	/* A fabric with too few pods is refused. */
	f.pods = 3;
	assert_int_equal(delta_leaf_demand(&f, w, p, x, NULL, &d, &n, &unplaced, &err), -EINVAL);
	assert_string_equal(err.field, "placement.pods");
	delta_problem_free(p);
	delta_workload_free(w);
}

static void test_plan_job(void **state)
{
	struct ocs_fabric f = {.pods = 4,
			       .k_leaf = 2,
			       .k_spine = 4,
			       .tau = 2,
			       .k_ocs = 8,
			       .wiring = OCS_WIRING_STRAIGHT};
	struct delta_workload_spec q;
	struct delta_job_plan *plan;
	struct delta_error err;
	enum delta_planner kind;
	small_spec(&q);
	assert_int_equal(delta_planner_parse("iter-halve", &kind), 0);
	assert_int_equal(kind, DELTA_PLANNER_ITER_HALVE);
	assert_int_equal(delta_planner_parse("leaf-centric", &kind), -EINVAL);
	/* Iter-Halve fills every port: PP (0,1) and both rings share pods 0/1. */
	assert_int_equal(delta_plan_job(&q, kind, NULL, NULL, &f, NULL, &plan, &err), 0);
	assert_int_equal(plan->pod_sets, 2);
	assert_int_equal(plan->ports_available, 16);
	long ports = 0, links = 0;
	for (size_t i = 0; i < plan->n_circuits; i++)
		ports += 2 * plan->circuits[i].circuits;
	for (size_t i = 0; i < plan->n_leaf_demand; i++)
		links += plan->leaf_demand[i].links;
	assert_int_equal(ports, plan->ports_used);
	assert_true(plan->ports_used <= plan->ports_available);
	assert_int_equal(links + plan->leaf_unplaced, ports / 2);
	assert_true(plan->sim.nct >= 1.0);
	delta_job_plan_free(plan);
	assert_int_equal(
		delta_plan_job(&q, DELTA_PLANNER_FAST, NULL, NULL, NULL, NULL, &plan, &err), 0);
	assert_null(plan->leaf_demand);
	assert_true(plan->ports_used <= plan->ports_available);
	delta_job_plan_free(plan);
	q.bandwidth_gbps = 0;
	assert_int_equal(
		delta_plan_job(&q, DELTA_PLANNER_FAST, NULL, NULL, NULL, NULL, &plan, &err),
		-EINVAL);
	assert_null(plan);
	assert_string_equal(err.field, "bandwidth_gbps");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_by_hand),
		cmocka_unit_test(test_reduction_matches_full_schedule),
		cmocka_unit_test(test_symmetry_merge),
		cmocka_unit_test(test_moe),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_leaf_demand),
		cmocka_unit_test(test_plan_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
