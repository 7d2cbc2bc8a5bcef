/*
 * bench_delta_milp.c - optional validation of DELTA-Fast against the DELTA
 * paper's variable-length time-interval MILP (section III-B, DELTA-Topo:
 * with the fair-sharing constraint (17)) on small random DAGs, solved to
 * proven optimality by GLPK and CBC side by side. Both are test-only
 * dependencies from Debian (libglpk-dev; coinor-libcbc-dev, packaged in
 * Debian 12 as CBC 2.10.8, listed in deploy/install-deps.sh). The model is
 * written once through milp_model.h and loaded into each solver; without
 * CBC (pkg-config finds no cbc) the benchmark runs GLPK only and says so.
 *
 * Model, with K = 2|M| - 1 intervals [t_k, t_k+1] (the paper's footnote 1):
 *   x_l = sum_b 2^b beta_lb >= 1, sum_l cost * x_l <= U_p              (5)-(7)
 *   rho_lbk = beta_lb * Delta_k (big-M)                                    (8)
 *   sum_{m on d} w_mk <= B sum_b 2^b rho_lbk     per direction d of l      (9)
 *   w_mk <= F_m B Delta_k                       per-flow NIC cap (10)/(27)
 *   sum_k w_mk = V_m, w_mk <= V_m y_mk                                (11)-(12)
 *   s_mk >= y_mk - y_m,k-1, sum_k s_mk = 1      contiguous activity      (13)
 *   S_m <= t_k + M(1-y_mk), C_m >= t_k+1 - M(1-y_mk)                    (15)
 *   S_m >= C_pre + delta, S_m >= release_m                               (16)
 *   |w_mk / F_m - u_dk| <= M'(1-y_mk)           fair sharing             (17)
 *   C >= C_m, minimise C                                            (18), (3)
 * The MILP may delay starts and run below the fair share, freedoms the
 * simulator (and so DELTA-Fast) does not have, so its optimum is a lower
 * bound: the figure printed is DELTA-Fast's makespan over it (the issue's
 * target: within 2%), against CBC's proven optimum (GLPK's where only GLPK
 * proves one). Only instances proven optimal within the time limit count.
 * Example of a gap that is the model's and not the search's
 * (seed 42, instance 3): three tasks leave pod 1 at once on 4 circuits
 * (3 + 2 + 1 flows); the simulator starts all of them, shares 4/6 B per flow
 * and ends at 5.67 ms; the MILP holds the 3-flow task back until the 2-flow
 * one is done, so every flow runs at B and it ends at 5.0 ms. Exhaustive
 * enumeration (tests/property) shows DELTA-Fast optimal for the simulator's
 * semantics on such instances.
 *
 * It first checks both back ends on a hand-solved MILP. Per instance it
 * prints both solvers' objective, status (opt: proven optimal; feas: time
 * limit with an incumbent; none) and wall time, DELTA-Fast's ratio and the
 * simulator optimum (every plan simulated: it tells the model's gaps from
 * the search's), then medians. It fails (exit 1) only on a broken
 * guarantee: a failed self-check, two proven optima differing by more than
 * 1e-6 relative, a solver's solution violating the model (checked
 * independently by milp_max_violation), or a simulated plan below a proven
 * optimum (the MILP relaxes the simulator, so no plan beats it).
 *
 * Usage: bench_delta_milp [instances 1..1024, default 20] [seed, default 42]
 *                         [time_limit_s per solver and instance, default 20]
 */
#include <glpk.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milp_model.h"

#include "delta_bounds.h"
#include "delta_dag.h"
#include "delta_ga.h"
#include "delta_sim.h"
#include "bench_clock.h"

static unsigned long long rs;
static int rnd(int lo, int hi)
{
	rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
	return lo + (int)((rs >> 33) % (unsigned long long)(hi - lo + 1));
}

/* Circuits link l can take without breaking a budget on its own. */
static int link_cap(const struct delta_problem *p, int l)
{
	const struct delta_link *lk = &delta_problem_links(p)[l];
	const int *U = delta_problem_port_budget(p);
	int cap = 1 << 20;
	if (lk->cost_a && U[lk->a] / lk->cost_a < cap)
		cap = U[lk->a] / lk->cost_a;
	if (lk->cost_b && U[lk->b] / lk->cost_b < cap)
		cap = U[lk->b] / lk->cost_b;
	return cap;
}

/* Best simulated makespan over every plan within budget (x[l] from 1 to
 * its cap for links l.. on): the simulator's own optimum, which tells a
 * gap of the search (DELTA-Fast above it) from one of the model (the MILP
 * below it). At most 16 circuits per link (budgets here are 2 to 4 ports).
 * INFINITY when no plan fits. */
static double sim_optimum(const struct delta_problem *p, int *x, int l)
{
	if (l == delta_problem_n_links(p)) {
		struct delta_sim_result r;
		if (!delta_plan_within_budget(p, x) || delta_simulate(p, x, &r, NULL, NULL))
			return INFINITY;
		return r.makespan_ms;
	}
	double best = INFINITY;
	int cap = link_cap(p, l);
	for (x[l] = 1; x[l] <= (cap < 16 ? cap : 16); x[l]++)
		best = fmin(best, sim_optimum(p, x, l + 1));
	return best;
}

/* Volumes enter the MILP in megabytes (rates in MB/ms), times in ms: in
 * bytes the coefficients spanned seven orders of magnitude (1/F_m next to
 * V_m = 6e6), and CBC's branch and bound then "proved" optima that GLPK's
 * solutions beat (seed 42, instance 0: 9.0 ms proven against 7.5 ms). */
#define MILP_UNIT_BYTES 1e6

/* Builds the MILP of the top comment; its objective is the makespan.
 * Returns NULL if out of memory (a model that broke while being built says
 * why in milp_error). Caller frees with milp_free. */
static struct milp *build_milp(const struct delta_problem *p, double horizon)
{
	int n = delta_problem_n_tasks(p), L = delta_problem_n_links(p), K = 2 * n - 1;
	int pods = delta_problem_pods(p);
	const struct delta_task *tk = delta_problem_tasks(p);
	const struct delta_link *links = delta_problem_links(p);
	const struct delta_dep *deps = delta_problem_deps(p);
	const int *U = delta_problem_port_budget(p);
	double B = delta_problem_bytes_per_ms(p) / MILP_UNIT_BYTES, M = horizon;
	double V[64];
	struct milp *mp = milp_new();
	if (!mp)
		return NULL;

	int bits[64], beta[64][8], rho[64][8][64];
	int t[130], w[64][64], y[64][64], s[64][64], S[64], C[64], u[128][64], Cmax;
	for (int l = 0; l < L; l++) {
		int cap = link_cap(p, l);
		bits[l] = (int)floor(log2(cap > 1 ? cap : 1)) + 1;
		for (int b = 0; b < bits[l]; b++) {
			beta[l][b] = milp_col(mp, MILP_INTEGER, 0, 1, 0);
			for (int k = 0; k < K; k++)
				rho[l][b][k] = milp_col(mp, MILP_CONTINUOUS, 0, M, 0);
		}
		/* x_l >= 1 */
		for (int b = 0; b < bits[l]; b++)
			milp_term(mp, beta[l][b], 1 << b);
		milp_row(mp, 1, INFINITY);
	}
	for (int q = 0; q < pods; q++) {
		for (int l = 0; l < L; l++) {
			int cost = links[l].a == q   ? links[l].cost_a
				   : links[l].b == q ? links[l].cost_b
						     : 0;
			for (int b = 0; cost && b < bits[l]; b++)
				milp_term(mp, beta[l][b], (double)cost * (1 << b));
		}
		if (milp_row_len(mp))
			milp_row(mp, -INFINITY, U[q]);
	}
	for (int k = 0; k <= K; k++)
		t[k] = milp_col(mp, MILP_CONTINUOUS, 0, k == 0 ? 0 : M, 0);
	for (int k = 0; k < K; k++) { /* t_k+1 >= t_k */
		milp_term(mp, t[k + 1], 1);
		milp_term(mp, t[k], -1);
		milp_row(mp, 0, INFINITY);
	}
	Cmax = milp_col(mp, MILP_CONTINUOUS, 0, M, 1); /* the objective (3) */
	double vmax_flow = 0;
	for (int m = 0; m < n; m++) {
		V[m] = tk[m].volume_bytes / MILP_UNIT_BYTES;
		vmax_flow = fmax(vmax_flow, V[m] / tk[m].flows);
	}
	for (int m = 0; m < n; m++) {
		S[m] = milp_col(mp, MILP_CONTINUOUS, tk[m].release_ms, M, 0);
		C[m] = milp_col(mp, MILP_CONTINUOUS, 0, M, 0);
		for (int k = 0; k < K; k++) {
			w[m][k] = milp_col(mp, MILP_CONTINUOUS, 0, V[m], 0);
			y[m][k] = milp_col(mp, MILP_INTEGER, 0, 1, 0);
			s[m][k] = milp_col(mp, MILP_INTEGER, 0, 1, 0);
		}
	}
	for (int d = 0; d < 2 * L; d++)
		for (int k = 0; k < K; k++)
			u[d][k] = milp_col(mp, MILP_CONTINUOUS, 0, vmax_flow, 0);
	/* (8) rho = beta * Delta */
	for (int l = 0; l < L; l++)
		for (int b = 0; b < bits[l]; b++)
			for (int k = 0; k < K; k++) {
				milp_term(mp, rho[l][b][k], 1);
				milp_term(mp, beta[l][b], -M);
				milp_row(mp, -INFINITY, 0);
				milp_term(mp, rho[l][b][k], 1);
				milp_term(mp, t[k + 1], -1);
				milp_term(mp, t[k], 1);
				milp_row(mp, -INFINITY, 0);
				milp_term(mp, rho[l][b][k], 1);
				milp_term(mp, t[k + 1], -1);
				milp_term(mp, t[k], 1);
				milp_term(mp, beta[l][b], -M);
				milp_row(mp, -M, INFINITY);
			}
	/* (9) per direction capacity */
	for (int l = 0; l < L; l++)
		for (int dir = 0; dir < 2; dir++)
			for (int k = 0; k < K; k++) {
				int src = dir ? links[l].b : links[l].a;
				for (int m = 0; m < n; m++)
					if (delta_problem_task_link(p, m) == l &&
					    tk[m].src_pod == src)
						milp_term(mp, w[m][k], 1);
				if (!milp_row_len(mp))
					continue;
				for (int b = 0; b < bits[l]; b++)
					milp_term(mp, rho[l][b][k], -B * (1 << b));
				milp_row(mp, -INFINITY, 0);
			}
	for (int m = 0; m < n; m++) {
		int l = delta_problem_task_link(p, m);
		int d = 2 * l + (tk[m].src_pod == links[l].a ? 0 : 1);
		for (int k = 0; k < K; k++) {
			milp_term(mp, w[m][k], 1); /* NIC cap */
			milp_term(mp, t[k + 1], -tk[m].flows * B);
			milp_term(mp, t[k], tk[m].flows * B);
			milp_row(mp, -INFINITY, 0);
			milp_term(mp, w[m][k], 1); /* (12) */
			milp_term(mp, y[m][k], -V[m]);
			milp_row(mp, -INFINITY, 0);
			milp_term(mp, s[m][k], 1); /* (13) */
			milp_term(mp, y[m][k], -1);
			if (k > 0)
				milp_term(mp, y[m][k - 1], 1);
			milp_row(mp, 0, INFINITY);
			milp_term(mp, S[m], 1); /* (15) */
			milp_term(mp, t[k], -1);
			milp_term(mp, y[m][k], M);
			milp_row(mp, -INFINITY, M);
			milp_term(mp, C[m], 1);
			milp_term(mp, t[k + 1], -1);
			milp_term(mp, y[m][k], -M);
			milp_row(mp, -M, INFINITY);
			milp_term(mp, w[m][k], 1.0 / tk[m].flows); /* (17) */
			milp_term(mp, u[d][k], -1);
			milp_term(mp, y[m][k], vmax_flow);
			milp_row(mp, -INFINITY, vmax_flow);
			milp_term(mp, w[m][k], 1.0 / tk[m].flows);
			milp_term(mp, u[d][k], -1);
			milp_term(mp, y[m][k], -vmax_flow);
			milp_row(mp, -vmax_flow, INFINITY);
		}
		for (int k = 0; k < K; k++)
			milp_term(mp, w[m][k], 1); /* (11) */
		milp_row(mp, V[m], V[m]);
		for (int k = 0; k < K; k++)
			milp_term(mp, s[m][k], 1);
		milp_row(mp, 1, 1);
		milp_term(mp, Cmax, 1); /* (18) */
		milp_term(mp, C[m], -1);
		milp_row(mp, 0, INFINITY);
		milp_term(mp, C[m], 1);
		milp_term(mp, S[m], -1);
		milp_row(mp, 0, INFINITY);
	}
	for (int e = 0; e < delta_problem_n_deps(p); e++) { /* (16) */
		milp_term(mp, S[deps[e].post], 1);
		milp_term(mp, C[deps[e].pre], -1);
		milp_row(mp, deps[e].delay_ms, INFINITY);
	}
	return mp;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Largest model violation accepted in a solver's solution (relative for
 * rows and bounds, absolute for integrality; see milp_max_violation). */
#define MAX_VIOLATION 1e-5
/* Two proven optima must agree to this relative difference. */
#define AGREE_REL 1e-6

/* "opt", "feas" (time limit, incumbent only) or "none". */
static const char *status_name(const struct milp_result *r)
{
	return r->proven_optimal ? "opt" : r->has_solution ? "feas" : "none";
}

static void print_solver(const char *name, const struct milp_result *r)
{
	if (r->has_solution)
		printf(" | %s %8.4f ms %-4s %6.2f s", name, r->objective, status_name(r),
		       r->seconds);
	else
		printf(" | %s %11s %-4s %6.2f s", name, "-", status_name(r), r->seconds);
}

/*
 * Checks each back end on a hand-solved MILP using every bound type the
 * builder offers (ranged, equality, upper-only and free rows; integer,
 * free and fixed columns), so a translation slip shows before the bench
 * trusts the solvers:
 *   min 3a + 2b - c + d,  a, b integer in [0, 5], c free, d = 2
 *   1 <= 2a + 2b <= 3,  c - a - b = 0.25,  c <= 10,  a + b + c free
 * c = a + b + 0.25 turns the objective into 2a + b + 1.75, and integral
 * a + b >= 1 makes (0, 1, 1.25, 2) the only optimum: 2.75 (the LP
 * relaxation reaches 2.25 at b = 0.5). Returns the number of failures.
 */
static int check_backends(int with_cbc)
{
	static const double want_x[4] = {0, 1, 1.25, 2}, want_obj = 2.75;
	static const double fractional_x[4] = {0, 0.5, 0.75, 2};
	int failures = 0;
	struct milp *mp = milp_new();
	if (!mp)
		return 1;
	int a = milp_col(mp, MILP_INTEGER, 0, 5, 3), b = milp_col(mp, MILP_INTEGER, 0, 5, 2);
	int c = milp_col(mp, MILP_CONTINUOUS, -INFINITY, INFINITY, -1);
	milp_col(mp, MILP_CONTINUOUS, 2, 2, 1); /* d, fixed */
	milp_term(mp, a, 2);
	milp_term(mp, b, 2);
	milp_row(mp, 1, 3);
	milp_term(mp, c, 1);
	milp_term(mp, a, -1);
	milp_term(mp, b, -1);
	milp_row(mp, 0.25, 0.25);
	milp_term(mp, c, 1);
	milp_row(mp, -INFINITY, 10);
	milp_term(mp, a, 1);
	milp_term(mp, b, 1);
	milp_term(mp, c, 1);
	milp_row(mp, -INFINITY, INFINITY);
	if (milp_max_violation(mp, want_x) > 1e-12 ||
	    fabs(milp_max_violation(mp, fractional_x) - 0.5) > 1e-12) {
		printf("self-check: milp_max_violation misjudges the hand-solved points\n");
		failures++;
	}
	for (int k = 0; k < 1 + with_cbc; k++) {
		struct milp_result r;
		const char *name = k ? "CBC" : "GLPK";
		int rc = k ? milp_solve_cbc(mp, 10, &r) : milp_solve_glpk(mp, 10, &r);
		int ok = rc == 0 && r.proven_optimal && r.x && fabs(r.objective - want_obj) < 1e-9;
		for (int j = 0; ok && j < 4; j++)
			ok = fabs(r.x[j] - want_x[j]) < 1e-9;
		if (!ok) {
			printf("self-check: %s does not find the hand-solved optimum %.2f "
			       "(rc %d, %s, objective %g)\n",
			       name, want_obj, rc, status_name(&r), r.objective);
			failures++;
		}
		milp_result_clear(&r);
	}
	milp_free(mp);

	/* A column twice in one row is refused with a message naming it. */
	mp = milp_new();
	if (!mp)
		return failures + 1;
	a = milp_col(mp, MILP_CONTINUOUS, 0, 1, 1);
	milp_term(mp, a, 1);
	milp_term(mp, a, 1);
	milp_row(mp, 0, 1);
	struct milp_result r;
	if (!milp_error(mp) || !strstr(milp_error(mp), "row 0: column 0 appears twice") ||
	    milp_solve_glpk(mp, 1, &r) != -1) {
		printf("self-check: a repeated column is not refused (%s)\n",
		       milp_error(mp) ? milp_error(mp) : "no error");
		failures++;
	}
	milp_free(mp);
	if (!failures)
		printf("self-check: %s the hand-solved optimum; bad points and rows refused\n",
		       with_cbc ? "GLPK and CBC find" : "GLPK finds");
	return failures;
}

int main(int argc, char **argv)
{
	int instances = argc > 1 ? atoi(argv[1]) : 20;
	rs = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
	int limit_s = argc > 3 ? atoi(argv[3]) : 20;
	const char *cbc_version = milp_cbc_version();
	static double ratios[1024], search[1024], t_glpk[1024], t_cbc[1024];
	int n_ratio = 0, n_run = 0, within = 0, both = 0, agree = 0, failures = 0;
	int proven_glpk = 0, proven_cbc = 0, ref_glpk = 0, search_gaps = 0, model_gaps = 0;
	double sum_glpk_s = 0, sum_cbc_s = 0;
	double worst_violation = 0;
	if (instances < 1 || instances > 1024 || limit_s < 1) {
		fprintf(stderr, "usage: bench_delta_milp [instances 1..1024] [seed] "
				"[time_limit_s >= 1]\n");
		return 2;
	}
	glp_term_out(GLP_OFF);
	printf("bench_delta_milp: %d instances, seed %llu, time limit %d s per solver; "
	       "GLPK %s, ",
	       instances, rs, limit_s, glp_version());
	if (cbc_version)
		printf("CBC %s\n", cbc_version);
	else
		printf("CBC not built in (pkg-config found no cbc): GLPK only\n");
	failures += check_backends(cbc_version != NULL);
	for (int i = 0; i < instances; i++) {
		int pods = rnd(2, 3), nt = rnd(2, 5), nd = 0;
		int budget[3];
		struct delta_task tasks[8];
		struct delta_dep deps[16];
		for (int q = 0; q < pods; q++)
			budget[q] = rnd(2, 4);
		for (int m = 0; m < nt; m++) {
			int a = rnd(0, pods - 1), b = rnd(0, pods - 2);
			b += b >= a;
			tasks[m] = (struct delta_task){a, b, rnd(1, 3), rnd(1, 6) * 1e6, 0};
			if (m > 0 && rnd(0, 2) > 0)
				deps[nd++] = (struct delta_dep){rnd(0, m - 1), m, rnd(0, 3) * 0.5};
		}
		struct delta_dag dag = {.pods = pods,
					.port_budget = budget,
					.bandwidth_gbps = 8,
					.n_tasks = nt,
					.tasks = tasks,
					.n_deps = nd,
					.deps = deps};
		struct delta_error err;
		struct delta_problem *p = delta_problem_new(&dag, &err);
		struct delta_ga_params gp;
		struct delta_sim_result res;
		int x[16];
		double est[8], lct[8], t_up;
		delta_ga_defaults(&gp);
		gp.seed = (uint64_t)i + 1;
		if (!p || delta_fast(p, &gp, NULL, NULL, x, &res, NULL, &err)) {
			delta_problem_free(p);
			continue; /* budgets too small for the pairs */
		}
		delta_time_windows(p, est, lct, &t_up);
		int xe[16];
		double sim_opt = sim_optimum(p, xe, 0);
		struct milp *mp = build_milp(p, t_up);
		struct milp_result g = {0}, c = {0};
		if (!mp || milp_solve_glpk(mp, limit_s, &g) ||
		    (cbc_version && milp_solve_cbc(mp, limit_s, &c))) {
			fprintf(stderr, "instance %d: MILP not solved: %s\n", i,
				mp && milp_error(mp) ? milp_error(mp)
						     : "out of memory or solver failed to start");
			milp_free(mp);
			delta_problem_free(p);
			return 1;
		}
		printf("instance %2d: %d tasks, %5d cols %5d rows", i, nt, milp_n_cols(mp),
		       milp_n_rows(mp));
		print_solver("GLPK", &g);
		if (cbc_version)
			print_solver("CBC", &c);
		t_glpk[n_run] = g.seconds;
		t_cbc[n_run++] = c.seconds;
		sum_glpk_s += g.seconds;
		sum_cbc_s += c.seconds;
		proven_glpk += g.proven_optimal;
		proven_cbc += c.proven_optimal;

		/* Each solver's solution checked against the neutral model. */
		const struct milp_result *sol[2] = {&g, &c};
		for (int k = 0; k < 2; k++) {
			if (!sol[k]->has_solution)
				continue;
			double v = milp_max_violation(mp, sol[k]->x);
			worst_violation = fmax(worst_violation, v);
			if (v > MAX_VIOLATION) {
				printf(" | %s SOLUTION VIOLATES THE MODEL by %.3g",
				       k ? "CBC" : "GLPK", v);
				failures++;
			}
		}
		if (g.proven_optimal && c.proven_optimal) {
			both++;
			if (fabs(g.objective - c.objective) <=
			    AGREE_REL * fmax(fabs(g.objective), fabs(c.objective))) {
				agree++;
			} else {
				printf(" | OPTIMA DISAGREE");
				failures++;
			}
		}
		/* Reference: CBC's proven optimum, GLPK's when CBC is absent or
		 * did not prove one (they agree when both do). */
		const struct milp_result *ref = c.proven_optimal   ? &c
						: g.proven_optimal ? &g
								   : NULL;
		if (ref) {
			double ratio = res.makespan_ms / ref->objective;
			double s_ratio = res.makespan_ms / sim_opt;
			ratios[n_ratio] = ratio;
			search[n_ratio++] = s_ratio;
			ref_glpk += ref == &g && cbc_version;
			within += res.makespan_ms <= ref->objective * 1.02 + 1e-9;
			printf(" | DELTA-Fast %.4f ms, ratio %.4f%s; simulator optimum %.4f ms",
			       res.makespan_ms, ratio,
			       ref == &g && cbc_version ? " (GLPK's optimum)" : "", sim_opt);
			/* Beyond 2%: the model's gap when no plan simulates within
			 * 2% of the MILP, else the search's. */
			if (res.makespan_ms > ref->objective * 1.02 + 1e-9) {
				if (sim_opt > ref->objective * 1.02 + 1e-9)
					model_gaps++;
				else
					search_gaps++;
			}
			/* The MILP relaxes the simulator, so no plan beats it. */
			if (sim_opt < ref->objective * (1 - 1e-6)) {
				printf(" | BELOW THE LOWER BOUND");
				failures++;
			}
		} else {
			printf(" | no proven optimum within %d s", limit_s);
		}
		printf("\n");
		fflush(stdout); /* progress under ctest, instances take seconds */
		milp_result_clear(&g);
		milp_result_clear(&c);
		milp_free(mp);
		delta_problem_free(p);
	}
	if (n_run) {
		printf("solve time over %d instances (time limit hits count at %d s): "
		       "GLPK median %.3f s, total %.1f s",
		       n_run, limit_s, median(t_glpk, n_run), sum_glpk_s);
		if (cbc_version)
			printf("; CBC median %.3f s, total %.1f s", median(t_cbc, n_run),
			       sum_cbc_s);
		printf("\nproven optimal: GLPK %d of %d", proven_glpk, n_run);
		if (cbc_version)
			printf(", CBC %d of %d; both proven %d, agreeing within %.0e relative %d",
			       proven_cbc, n_run, both, AGREE_REL, agree);
		printf("; largest model violation of a solution %.3g\n", worst_violation);
	}
	if (n_ratio) {
		double med = median(ratios, n_ratio);
		printf("DELTA-Fast / %s optimum over %d proven instances: median %.4f, max %.4f; "
		       "%d of %d within 2%%",
		       cbc_version ? "CBC" : "GLPK", n_ratio, med, ratios[n_ratio - 1], within,
		       n_ratio);
		if (ref_glpk)
			printf(" (%d against GLPK's optimum: CBC did not prove one)", ref_glpk);
		printf("\nDELTA-Fast / simulator optimum (every plan simulated) over the same: "
		       "median %.4f, max %.4f; beyond 2%%: %d the model's (no plan simulates "
		       "within 2%% of the MILP), %d the search's\n",
		       median(search, n_ratio), search[n_ratio - 1], model_gaps, search_gaps);
	}
	if (failures)
		printf("FAILED: %d broken guarantees (see the self-check lines and upper-case "
		       "marks above)\n",
		       failures);
	return failures ? 1 : 0;
}
