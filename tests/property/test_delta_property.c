/*
 * test_delta_property.c - generated instances for the DELTA solvers, each
 * checked by code independent of the solver under test:
 *   - bounds: Xbar of every link is never below the largest number of flows
 *     active at once in either direction, measured from simulated
 *     schedules of random plans (midpoints between consecutive events);
 *   - DELTA-Fast never has a longer makespan than the best baseline, and
 *     its plan fits the budgets;
 *   - on instances small enough to enumerate every x, DELTA-Fast finds the
 *     optimal makespan, and the fewest ports among the plans reaching it;
 *   - the same seed gives the same plan with no pool and a 2-thread pool;
 *   - the first two also on DAGs built from small random parallelism specs.
 * Instance count and seed come from argv (defaults keep the run short).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_baselines.h"
#include "delta_bounds.h"
#include "delta_dag.h"
#include "delta_ga.h"
#include "delta_sim.h"
#include "delta_workload.h"
#include "ocs_pool_pthread.h"

static int failures;
static int checked_ga, checked_opt, checked_bounds;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
		}                                                                                  \
	} while (0)

static uint64_t rs;
static int rnd(int lo, int hi)
{
	rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
	return lo + (int)((rs >> 33) % (uint64_t)(hi - lo + 1));
}

struct inst {
	int pods;
	int budget[8];
	struct delta_task tasks[64];
	struct delta_dep deps[256];
	int nt, nd;
};

static struct delta_problem *gen(struct inst *in, int pods, int nt, int max_flows, int budget)
{
	struct delta_dag dag;
	struct delta_error err;
	in->pods = pods;
	in->nt = nt;
	in->nd = 0;
	for (int p = 0; p < pods; p++)
		in->budget[p] = budget;
	for (int t = 0; t < nt; t++) {
		int a = rnd(0, pods - 1), b = rnd(0, pods - 2);
		if (b >= a)
			b++;
		in->tasks[t] = (struct delta_task){a, b, rnd(1, max_flows), rnd(1, 8) * 1e6, 0};
		for (int k = 0; k < 2 && t > 0; k++)
			if (rnd(0, 2) > 0 && in->nd < 256)
				in->deps[in->nd++] =
					(struct delta_dep){rnd(0, t - 1), t, rnd(0, 4) * 0.5};
	}
	dag = (struct delta_dag){.pods = pods,
				 .port_budget = in->budget,
				 .bandwidth_gbps = 8,
				 .n_tasks = nt,
				 .tasks = in->tasks,
				 .n_deps = in->nd,
				 .deps = in->deps};
	struct delta_problem *p = delta_problem_new(&dag, &err);
	if (!p)
		fprintf(stderr, "generator: %s: %s\n", err.field, err.reason);
	return p;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Largest flow sum active at once per link (max over directions). */
static void observed_concurrency(const struct delta_problem *p, const double *s, const double *f,
				 int *conc)
{
	int n = delta_problem_n_tasks(p), L = delta_problem_n_links(p);
	const struct delta_task *t = delta_problem_tasks(p);
	const struct delta_link *links = delta_problem_links(p);
	double *ev = malloc(2 * (size_t)n * sizeof(double));
	int ne = 0;
	for (int i = 0; i < n; i++) {
		ev[ne++] = s[i];
		ev[ne++] = f[i];
	}
	qsort(ev, (size_t)ne, sizeof(double), cmp_d);
	for (int l = 0; l < L; l++)
		conc[l] = 0;
	for (int k = 0; k + 1 < ne; k++) {
		if (ev[k + 1] - ev[k] < 1e-7)
			continue;
		double mid = (ev[k] + ev[k + 1]) / 2;
		for (int l = 0; l < L; l++)
			for (int dir = 0; dir < 2; dir++) {
				int src = dir ? links[l].b : links[l].a, sum = 0;
				for (int i = 0; i < n; i++)
					if (delta_problem_task_link(p, i) == l &&
					    t[i].src_pod == src && s[i] <= mid && mid < f[i])
						sum += t[i].flows;
				if (sum > conc[l])
					conc[l] = sum;
			}
	}
	free(ev);
}

static void prop_bounds(int instances)
{
	for (int k = 0; k < instances; k++) {
		struct inst in;
		struct delta_problem *p = gen(&in, rnd(2, 4), rnd(2, 40), 4, 64);
		int L = delta_problem_n_links(p), xbar[16], x[16], conc[16];
		double s[64], f[64];
		struct delta_sim_result r;
		CHECK(delta_bounds(p, xbar) == 0, "bounds failed");
		for (int trial = 0; trial < 6; trial++) {
			for (int l = 0; l < L; l++)
				x[l] = rnd(1, trial < 3 ? 2 : 12);
			CHECK(delta_simulate(p, x, &r, s, f) == 0, "simulation failed");
			observed_concurrency(p, s, f, conc);
			checked_bounds++;
			for (int l = 0; l < L; l++)
				CHECK(xbar[l] >= conc[l],
				      "instance %d link %d: Xbar %d < observed %d", k, l, xbar[l],
				      conc[l]);
		}
		delta_problem_free(p);
	}
}

static double best_baseline(const struct delta_problem *p)
{
	double best = INFINITY;
	int x[16];
	struct delta_sim_result r;
	for (int b = DELTA_PROP_ALLOC; b <= DELTA_ITER_HALVE; b++) {
		CHECK(delta_baseline_plan(p, (enum delta_baseline)b, x, NULL) == 0, "baseline");
		CHECK(delta_plan_within_budget(p, x), "baseline %d over budget", b);
		if (delta_simulate(p, x, &r, NULL, NULL) == 0 && r.makespan_ms < best)
			best = r.makespan_ms;
	}
	return best;
}

static void prop_ga_vs_baselines(int instances)
{
	struct delta_ga_params gp;
	delta_ga_defaults(&gp);
	gp.stall_generations = 25;
	gp.population = 16;
	for (int k = 0; k < instances; k++) {
		struct inst in;
		struct delta_problem *p = gen(&in, rnd(3, 5), rnd(4, 40), 6, rnd(6, 16));
		int x[16];
		struct delta_sim_result r;
		struct delta_error err;
		gp.seed = (uint64_t)k + 1;
		int rc = delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err);
		if (rc == 0) {
			double bb = best_baseline(p);
			CHECK(r.makespan_ms <= bb * (1 + 1e-9),
			      "instance %d: DELTA-Fast %.6f > best baseline %.6f", k, r.makespan_ms,
			      bb);
			CHECK(delta_plan_within_budget(p, x), "instance %d over budget", k);
			checked_ga++;
		} else {
			CHECK(rc == -ENOSPC, "instance %d: delta_fast rc %d", k, rc);
		}
		delta_problem_free(p);
	}
}

/* Optimal makespan over every x in [1, maxv]^L within budget; *ports gets
 * the fewest ports among the plans that reach it. */
static double enumerate(const struct delta_problem *p, int *x, int l, int L, int maxv, long *ports)
{
	*ports = 0; /* also when no plan is within budget (INFINITY) */
	if (l == L) {
		struct delta_sim_result r;
		if (!delta_plan_within_budget(p, x) || delta_simulate(p, x, &r, NULL, NULL))
			return INFINITY;
		for (int k = 0; k < L; k++)
			*ports += 2L * x[k];
		return r.makespan_ms;
	}
	double best = INFINITY;
	long best_ports = 0;
	for (int v = 1; v <= maxv; v++) {
		long pv;
		x[l] = v;
		double m = enumerate(p, x, l + 1, L, maxv, &pv);
		if (isinf(m))
			continue;
		if (isinf(best) || m < best - 1e-9 * fmax(1, best)) {
			best = m;
			best_ports = pv;
		} else if (fabs(m - best) <= 1e-9 * fmax(1, best) && pv < best_ports) {
			best_ports = pv;
		}
	}
	*ports = best_ports;
	return best;
}

static void prop_exhaustive(int instances)
{
	struct delta_ga_params gp;
	delta_ga_defaults(&gp);
	gp.stall_generations = 40;
	gp.population = 16;
	for (int k = 0; k < instances; k++) {
		struct inst in;
		int budget = rnd(3, 6);
		struct delta_problem *p = gen(&in, 3, rnd(3, 12), 5, budget);
		int x[16], xe[16];
		struct delta_sim_result r;
		struct delta_error err;
		gp.seed = (uint64_t)k + 100;
		if (delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err) == 0) {
			long opt_ports, used[8];
			double opt =
				enumerate(p, xe, 0, delta_problem_n_links(p), budget, &opt_ports);
			long ports = delta_ports_used(p, x, used);
			CHECK(ports <= opt_ports,
			      "instance %d: %ld ports, the optimum makespan needs only %ld", k,
			      ports, opt_ports);
			CHECK(isfinite(opt) && fabs(r.makespan_ms - opt) <= 1e-9 * fmax(1, opt),
			      "instance %d: DELTA-Fast %.9f, optimum %.9f", k, r.makespan_ms, opt);
			checked_opt++;
		}
		delta_problem_free(p);
	}
}

/* Small random parallelism specs: bounds and DELTA-Fast on model DAGs. */
static void prop_workloads(int instances)
{
	struct delta_ga_params gp;
	delta_ga_defaults(&gp);
	gp.stall_generations = 20;
	gp.population = 12;
	for (int k = 0; k < instances; k++) {
		struct delta_workload_spec q;
		struct delta_workload *w;
		struct delta_error err;
		delta_workload_defaults(&q);
		q.tp = 1 << rnd(0, 1);
		q.pp = rnd(2, 4);
		q.dp = rnd(1, 3);
		q.layers = q.pp * rnd(1, 2);
		q.hidden = 64 * rnd(1, 4);
		q.ffn = 4 * q.hidden;
		q.heads = 4;
		q.vocab = 1000;
		q.seq_len = 256 * rnd(1, 8);
		q.micro_batches = q.pp + rnd(0, 4);
		q.bandwidth_gbps = 100 * rnd(1, 8);
		q.gpu_tflops = 50 * rnd(1, 20); /* slow GPUs: compute and comm comparable */
		q.gpus_per_pod_per_replica = q.tp * rnd(1, q.pp - 1);
		if (rnd(0, 3) == 0) {
			q.experts = 4;
			q.top_k = 2;
			q.ep = 2;
			q.gpus_per_pod_per_replica = 2 * rnd(1, q.pp - 1);
			q.dp = 2 * rnd(1, 2);
		}
		if (delta_workload_build(&q, &w, &err)) {
			CHECK(0, "workload %d refused: %s: %s", k, err.field, err.reason);
			continue;
		}
		struct delta_problem *p = delta_problem_new(&w->dag, &err);
		CHECK(p != NULL, "workload %d: DAG refused: %s: %s", k, err.field, err.reason);
		if (!p) {
			delta_workload_free(w);
			continue;
		}
		int L = delta_problem_n_links(p), n = delta_problem_n_tasks(p);
		int *xbar = malloc((size_t)L * sizeof(int)), *x = malloc((size_t)L * sizeof(int));
		int *conc = malloc((size_t)L * sizeof(int));
		double *s = malloc((size_t)n * sizeof(double)),
		       *f = malloc((size_t)n * sizeof(double));
		struct delta_sim_result r;
		CHECK(delta_bounds(p, xbar) == 0, "workload %d bounds", k);
		for (int trial = 0; trial < 4; trial++) {
			for (int l = 0; l < L; l++)
				x[l] = rnd(1, 2 * xbar[l]);
			CHECK(delta_simulate(p, x, &r, s, f) == 0, "workload %d simulation", k);
			CHECK(r.nct >= 1 - 1e-9, "workload %d: NCT %g below 1", k, r.nct);
			observed_concurrency(p, s, f, conc);
			checked_bounds++;
			for (int l = 0; l < L; l++)
				CHECK(xbar[l] >= conc[l],
				      "workload %d link %d: Xbar %d < observed %d", k, l, xbar[l],
				      conc[l]);
		}
		gp.seed = (uint64_t)k + 1000;
		if (delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err) == 0) {
			double bb = best_baseline(p);
			CHECK(r.makespan_ms <= bb * (1 + 1e-9), "workload %d: DELTA-Fast %g > %g",
			      k, r.makespan_ms, bb);
			CHECK(delta_plan_within_budget(p, x), "workload %d over budget", k);
			checked_ga++;
		}
		free(xbar);
		free(x);
		free(conc);
		free(s);
		free(f);
		delta_problem_free(p);
		delta_workload_free(w);
	}
}

static void prop_pool_determinism(int instances)
{
	struct ocs_pool_pthread *pp = ocs_pool_pthread_new(2);
	struct delta_ga_params gp;
	delta_ga_defaults(&gp);
	gp.stall_generations = 20;
	for (int k = 0; k < instances; k++) {
		struct inst in;
		struct delta_problem *p = gen(&in, 4, 40, 6, 12);
		int x1[16], x2[16];
		struct delta_sim_result r1, r2;
		struct delta_ga_stats s1, s2;
		gp.seed = (uint64_t)k * 7 + 3;
		int rc1 = delta_fast(p, &gp, NULL, NULL, x1, &r1, &s1, NULL);
		int rc2 = delta_fast(p, &gp, NULL, ocs_pool_pthread_pool(pp), x2, &r2, &s2, NULL);
		CHECK(rc1 == rc2, "instance %d: rc %d vs %d", k, rc1, rc2);
		if (rc1 == 0) {
			CHECK(memcmp(x1, x2, sizeof(int) * (size_t)delta_problem_n_links(p)) == 0,
			      "instance %d: plans differ between serial and pooled runs", k);
			CHECK(s1.evaluations == s2.evaluations, "instance %d: evaluations differ",
			      k);
		}
		delta_problem_free(p);
	}
	ocs_pool_pthread_free(pp);
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	rs = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261122;
	prop_bounds(300 * scale);
	prop_ga_vs_baselines(60 * scale);
	prop_exhaustive(40 * scale);
	prop_pool_determinism(6 * scale);
	prop_workloads(10 * scale);
	printf("checked: %d simulated schedules against bounds, %d DELTA-Fast runs against "
	       "baselines, %d against exhaustive optima\n",
	       checked_bounds, checked_ga, checked_opt);
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
