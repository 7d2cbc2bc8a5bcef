/*
 * bench_delta.c - DELTA benchmarks (label bench, not in the default run).
 *
 *   table1     the four workloads of the DELTA paper's Table I at 400 Gb/s
 *              and sequence length 4096: NCT of DELTA-Fast and of the three
 *              baselines side by side, ports used (job-wide) and saved;
 *              the paper expects DELTA-Fast <= the best baseline on all four
 *              and >= 20% fewer ports than available at that makespan.
 *   converge   time until DELTA-Fast sees no improvement in 200 generations
 *              for Megatron-462B and DeepSeek-671B at 128, 256 and 512
 *              micro-batches on a 2-thread pool (target: <= 2 s at 128).
 *
 * Every figure is the median of `runs` seeds (argv[2], default 3). GPUs are
 * H100-class (989 dense BF16 TFLOP/s at 50%) unless BENCH_GPU_TFLOPS sets
 * the peak (e.g. 312 for A100): slower GPUs leave more slack to save ports.
 * Usage: [BENCH_GPU_TFLOPS=T] bench_delta [table1|converge|all] [runs]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "delta_baselines.h"
#include "delta_bounds.h"
#include "delta_ga.h"
#include "delta_sim.h"
#include "delta_workload.h"
#include "ocs_pool_pthread.h"
#include "bench_clock.h"

static double now_ms(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct workload {
	const char *name;
	int layers, hidden, ffn, heads, vocab, experts, top_k, ffn_matrices;
	int tp, pp, ep, etp, gpus, gpus_per_pod, micro_batches;
};

/* Table I of the DELTA paper; model shapes from the public model cards
 * (DeepSeek-V3's 61 layers rounded to 64 so that PP 16 divides them, its
 * MLA attention approximated by 4h^2 projections; Megatron-462B as 96
 * layers of h = 19968, 12*L*h^2 ~ 460B). */
static const struct workload table1[] = {
	{"Megatron-177B", 96, 12288, 49152, 96, 51200, 0, 0, 2, 8, 6, 1, 1, 384, 16, 48},
	{"Mixtral-8x22B", 56, 6144, 16384, 48, 32768, 8, 2, 3, 2, 8, 8, 1, 128, 16, 64},
	{"Megatron-462B", 96, 19968, 79872, 128, 51200, 0, 0, 2, 8, 16, 1, 1, 1024, 32, 128},
	{"DeepSeek-671B", 64, 7168, 2048, 128, 129280, 256, 8, 3, 2, 16, 8, 1, 256, 32, 128},
};

static struct delta_workload *build(const struct workload *wl, int micro_batches)
{
	struct delta_workload_spec q;
	struct delta_workload *w;
	struct delta_error err;
	delta_workload_defaults(&q);
	q.layers = wl->layers;
	q.hidden = wl->hidden;
	q.ffn = wl->ffn;
	q.heads = wl->heads;
	q.vocab = wl->vocab;
	q.experts = wl->experts;
	q.top_k = wl->top_k;
	q.ffn_matrices = wl->ffn_matrices;
	q.tp = wl->tp;
	q.pp = wl->pp;
	q.ep = wl->ep;
	q.etp = wl->etp;
	q.gpus = wl->gpus;
	q.gpus_per_pod_per_replica = wl->gpus_per_pod;
	q.micro_batches = micro_batches;
	q.seq_len = 4096;
	q.bandwidth_gbps = 400;
	if (getenv("BENCH_GPU_TFLOPS"))
		q.gpu_tflops = atof(getenv("BENCH_GPU_TFLOPS"));
	if (delta_workload_build(&q, &w, &err)) {
		fprintf(stderr, "%s: %s: %s\n", wl->name, err.field, err.reason);
		exit(1);
	}
	return w;
}

static void run_table1(int runs, const struct ocs_pool *pool)
{
	printf("Table I workloads, 400 Gb/s, seq 4096 (median of %d seeds for DELTA-Fast)\n", runs);
	printf("%-14s %6s %5s | %9s %9s %9s %9s | %6s %6s %6s %6s %6s | %8s\n", "workload", "tasks",
	       "links", "delta-nct", "prop-nct", "sqrt-nct", "halve-nct", "avail", "delta", "prop",
	       "sqrt", "halve", "delta-ms");
	for (size_t k = 0; k < sizeof(table1) / sizeof(table1[0]); k++) {
		struct delta_workload *w = build(&table1[k], table1[k].micro_batches);
		struct delta_error err;
		struct delta_problem *p = delta_problem_new(&w->dag, &err);
		if (!p) {
			fprintf(stderr, "%s: %s: %s\n", table1[k].name, err.field, err.reason);
			exit(1);
		}
		int L = delta_problem_n_links(p), S = w->pod_sets;
		int *x = malloc((size_t)L * sizeof(int));
		long *used = malloc((size_t)delta_problem_pods(p) * sizeof(long));
		double base_nct[3], base_ports[3], nct[16], ports[16], ms[16];
		struct delta_sim_result r;
		for (int b = 0; b < 3; b++) {
			delta_baseline_plan(p, (enum delta_baseline)b, x, NULL);
			base_nct[b] = delta_simulate(p, x, &r, NULL, NULL) == 0 ? r.nct : INFINITY;
			base_ports[b] = (double)delta_ports_used(p, x, used) * S;
		}
		for (int i = 0; i < runs; i++) {
			struct delta_ga_params gp;
			delta_ga_defaults(&gp);
			gp.seed = (uint64_t)i + 1;
			double t0 = now_ms(NULL);
			if (delta_fast(p, &gp, NULL, pool, x, &r, NULL, &err)) {
				fprintf(stderr, "%s: %s: %s\n", table1[k].name, err.field,
					err.reason);
				exit(1);
			}
			ms[i] = now_ms(NULL) - t0;
			nct[i] = r.nct;
			ports[i] = (double)delta_ports_used(p, x, used) * S;
		}
		double avail = (double)delta_ports_available(p) * S;
		double d_nct = median(nct, runs), d_ports = median(ports, runs);
		printf("%-14s %6d %5d | %9.4f %9.4f %9.4f %9.4f | %6.0f %6.0f %6.0f %6.0f %6.0f | "
		       "%8.1f\n",
		       table1[k].name, delta_problem_n_tasks(p), L, d_nct, base_nct[0], base_nct[1],
		       base_nct[2], avail, d_ports, base_ports[0], base_ports[1], base_ports[2],
		       median(ms, runs));
		double best = fmin(base_nct[0], fmin(base_nct[1], base_nct[2]));
		printf("%-14s   ratio delta/best-baseline NCT %.4f, ports used %.1f%% of available "
		       "(%.1f%% saved)\n",
		       "", d_nct / best, 100 * d_ports / avail, 100 * (1 - d_ports / avail));
		free(x);
		free(used);
		delta_problem_free(p);
		delta_workload_free(w);
	}
}

static void run_converge(int runs, const struct ocs_pool *pool)
{
	static const int mbs[] = {128, 256, 512};
	printf("\nDELTA-Fast convergence (no improvement in 200 generations), 2-thread pool, "
	       "median of %d seeds\n",
	       runs);
	printf("%-14s %6s %6s %10s %8s %10s %10s\n", "workload", "mbs", "tasks", "median-ms",
	       "gens", "evals", "nct");
	for (int k = 2; k <= 3; k++) {
		for (int m = 0; m < 3; m++) {
			struct delta_workload *w = build(&table1[k], mbs[m]);
			struct delta_error err;
			struct delta_problem *p = delta_problem_new(&w->dag, &err);
			int *x = malloc((size_t)delta_problem_n_links(p) * sizeof(int));
			double ms[16], gens[16], evals[16], nct[16];
			for (int i = 0; i < runs; i++) {
				struct delta_ga_params gp;
				struct delta_ga_stats st;
				struct delta_sim_result r;
				delta_ga_defaults(&gp);
				gp.seed = (uint64_t)i + 1;
				double t0 = now_ms(NULL);
				delta_fast(p, &gp, NULL, pool, x, &r, &st, &err);
				ms[i] = now_ms(NULL) - t0;
				gens[i] = st.generations;
				evals[i] = (double)st.evaluations;
				nct[i] = r.nct;
			}
			printf("%-14s %6d %6d %10.1f %8.0f %10.0f %10.4f\n", table1[k].name, mbs[m],
			       delta_problem_n_tasks(p), median(ms, runs), median(gens, runs),
			       median(evals, runs), median(nct, runs));
			free(x);
			delta_problem_free(p);
			delta_workload_free(w);
		}
	}
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	int runs = argc > 2 ? atoi(argv[2]) : 3;
	if (runs < 1 || runs > 16)
		runs = 3;
	struct ocs_pool_pthread *pp = ocs_pool_pthread_new(2);
	const struct ocs_pool *pool = pp ? ocs_pool_pthread_pool(pp) : NULL;
	if (!strcmp(what, "table1") || !strcmp(what, "all"))
		run_table1(runs, pool);
	if (!strcmp(what, "converge") || !strcmp(what, "all"))
		run_converge(runs, pool);
	ocs_pool_pthread_free(pp);
	return 0;
}
