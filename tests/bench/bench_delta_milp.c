/*
 * bench_delta_milp.c - optional validation of DELTA-Fast against the DELTA
 * paper's variable-length time-interval MILP (section III-B, DELTA-Topo:
 * with the fair-sharing constraint (17)) on small random DAGs, solved to
 * proven optimality with GLPK (a test-only dependency; the issue names CBC,
 * which is not packaged here, GLPK is already in deploy/install-deps.sh).
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
 * target: within 2%). Only instances GLPK proves optimal within the time
 * limit count. Example of a gap that is the model's and not the search's
 * (seed 42, instance 3): three tasks leave pod 1 at once on 4 circuits
 * (3 + 2 + 1 flows); the simulator starts all of them, shares 4/6 B per flow
 * and ends at 5.67 ms; the MILP holds the 3-flow task back until the 2-flow
 * one is done, so every flow runs at B and it ends at 5.0 ms. Exhaustive
 * enumeration (tests/property) shows DELTA-Fast optimal for the simulator's
 * semantics on such instances.
 *
 * Usage: bench_delta_milp [instances] [seed] [time_limit_s]
 */
#include <glpk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_bounds.h"
#include "delta_dag.h"
#include "delta_ga.h"
#include "delta_sim.h"

static unsigned long long rs;
static int rnd(int lo, int hi)
{
	rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
	return lo + (int)((rs >> 33) % (unsigned long long)(hi - lo + 1));
}

struct row {
	int n;
	int ind[4096];
	double val[4096];
};

static void term(struct row *r, int col, double v)
{
	r->n++;
	r->ind[r->n] = col;
	r->val[r->n] = v;
}

static void emit(glp_prob *lp, struct row *r, int type, double lb, double ub)
{
	int i = glp_add_rows(lp, 1);
	glp_set_mat_row(lp, i, r->n, r->ind, r->val);
	glp_set_row_bnds(lp, i, type, lb, ub);
	r->n = 0;
}

static int col(glp_prob *lp, int kind, double lb, double ub)
{
	int j = glp_add_cols(lp, 1);
	glp_set_col_kind(lp, j, kind);
	if (kind == GLP_BV)
		return j;
	glp_set_col_bnds(lp, j, ub > lb ? GLP_DB : GLP_FX, lb, ub);
	return j;
}

/* Returns the proven optimal makespan, or -1. */
static double solve_milp(const struct delta_problem *p, double horizon, int time_limit_s)
{
	int n = delta_problem_n_tasks(p), L = delta_problem_n_links(p), K = 2 * n - 1;
	int pods = delta_problem_pods(p);
	const struct delta_task *tk = delta_problem_tasks(p);
	const struct delta_link *links = delta_problem_links(p);
	const struct delta_dep *deps = delta_problem_deps(p);
	const int *U = delta_problem_port_budget(p);
	double B = delta_problem_bytes_per_ms(p), M = horizon;
	static struct row r;
	glp_prob *lp = glp_create_prob();
	glp_set_obj_dir(lp, GLP_MIN);

	int bits[64], beta[64][8], rho[64][8][64];
	int t[130], w[64][64], y[64][64], s[64][64], S[64], C[64], u[128][64], Cmax;
	for (int l = 0; l < L; l++) {
		int cap = 1 << 20;
		if (links[l].cost_a)
			cap = U[links[l].a] / links[l].cost_a < cap
				      ? U[links[l].a] / links[l].cost_a
				      : cap;
		if (links[l].cost_b)
			cap = U[links[l].b] / links[l].cost_b < cap
				      ? U[links[l].b] / links[l].cost_b
				      : cap;
		bits[l] = (int)floor(log2(cap > 1 ? cap : 1)) + 1;
		for (int b = 0; b < bits[l]; b++) {
			beta[l][b] = col(lp, GLP_BV, 0, 1);
			for (int k = 0; k < K; k++)
				rho[l][b][k] = col(lp, GLP_CV, 0, M);
		}
		/* x_l >= 1 */
		for (int b = 0; b < bits[l]; b++)
			term(&r, beta[l][b], 1 << b);
		emit(lp, &r, GLP_LO, 1, 0);
	}
	for (int q = 0; q < pods; q++) {
		for (int l = 0; l < L; l++) {
			int cost = links[l].a == q   ? links[l].cost_a
				   : links[l].b == q ? links[l].cost_b
						     : 0;
			for (int b = 0; cost && b < bits[l]; b++)
				term(&r, beta[l][b], (double)cost * (1 << b));
		}
		if (r.n)
			emit(lp, &r, GLP_UP, 0, U[q]);
	}
	for (int k = 0; k <= K; k++)
		t[k] = col(lp, GLP_CV, 0, k == 0 ? 0 : M);
	for (int k = 0; k < K; k++) { /* t_k+1 >= t_k */
		term(&r, t[k + 1], 1);
		term(&r, t[k], -1);
		emit(lp, &r, GLP_LO, 0, 0);
	}
	Cmax = col(lp, GLP_CV, 0, M);
	glp_set_obj_coef(lp, Cmax, 1);
	double vmax_flow = 0;
	for (int m = 0; m < n; m++)
		vmax_flow = fmax(vmax_flow, tk[m].volume_bytes / tk[m].flows);
	for (int m = 0; m < n; m++) {
		S[m] = col(lp, GLP_CV, tk[m].release_ms, M);
		C[m] = col(lp, GLP_CV, 0, M);
		for (int k = 0; k < K; k++) {
			w[m][k] = col(lp, GLP_CV, 0, tk[m].volume_bytes);
			y[m][k] = col(lp, GLP_BV, 0, 1);
			s[m][k] = col(lp, GLP_BV, 0, 1);
		}
	}
	for (int d = 0; d < 2 * L; d++)
		for (int k = 0; k < K; k++)
			u[d][k] = col(lp, GLP_CV, 0, vmax_flow);
	/* (8) rho = beta * Delta */
	for (int l = 0; l < L; l++)
		for (int b = 0; b < bits[l]; b++)
			for (int k = 0; k < K; k++) {
				term(&r, rho[l][b][k], 1);
				term(&r, beta[l][b], -M);
				emit(lp, &r, GLP_UP, 0, 0);
				term(&r, rho[l][b][k], 1);
				term(&r, t[k + 1], -1);
				term(&r, t[k], 1);
				emit(lp, &r, GLP_UP, 0, 0);
				term(&r, rho[l][b][k], 1);
				term(&r, t[k + 1], -1);
				term(&r, t[k], 1);
				term(&r, beta[l][b], -M);
				emit(lp, &r, GLP_LO, -M, 0);
			}
	/* (9) per direction capacity */
	for (int l = 0; l < L; l++)
		for (int dir = 0; dir < 2; dir++)
			for (int k = 0; k < K; k++) {
				int src = dir ? links[l].b : links[l].a;
				for (int m = 0; m < n; m++)
					if (delta_problem_task_link(p, m) == l &&
					    tk[m].src_pod == src)
						term(&r, w[m][k], 1);
				if (!r.n)
					continue;
				for (int b = 0; b < bits[l]; b++)
					term(&r, rho[l][b][k], -B * (1 << b));
				emit(lp, &r, GLP_UP, 0, 0);
			}
	for (int m = 0; m < n; m++) {
		int l = delta_problem_task_link(p, m);
		int d = 2 * l + (tk[m].src_pod == links[l].a ? 0 : 1);
		for (int k = 0; k < K; k++) {
			term(&r, w[m][k], 1); /* NIC cap */
			term(&r, t[k + 1], -tk[m].flows * B);
			term(&r, t[k], tk[m].flows * B);
			emit(lp, &r, GLP_UP, 0, 0);
			term(&r, w[m][k], 1); /* (12) */
			term(&r, y[m][k], -tk[m].volume_bytes);
			emit(lp, &r, GLP_UP, 0, 0);
			term(&r, s[m][k], 1); /* (13) */
			term(&r, y[m][k], -1);
			if (k > 0)
				term(&r, y[m][k - 1], 1);
			emit(lp, &r, GLP_LO, 0, 0);
			term(&r, S[m], 1); /* (15) */
			term(&r, t[k], -1);
			term(&r, y[m][k], M);
			emit(lp, &r, GLP_UP, 0, M);
			term(&r, C[m], 1);
			term(&r, t[k + 1], -1);
			term(&r, y[m][k], -M);
			emit(lp, &r, GLP_LO, -M, 0);
			term(&r, w[m][k], 1.0 / tk[m].flows); /* (17) */
			term(&r, u[d][k], -1);
			term(&r, y[m][k], vmax_flow);
			emit(lp, &r, GLP_UP, 0, vmax_flow);
			term(&r, w[m][k], 1.0 / tk[m].flows);
			term(&r, u[d][k], -1);
			term(&r, y[m][k], -vmax_flow);
			emit(lp, &r, GLP_LO, -vmax_flow, 0);
		}
		for (int k = 0; k < K; k++)
			term(&r, w[m][k], 1); /* (11) */
		emit(lp, &r, GLP_FX, tk[m].volume_bytes, tk[m].volume_bytes);
		for (int k = 0; k < K; k++)
			term(&r, s[m][k], 1);
		emit(lp, &r, GLP_FX, 1, 1);
		term(&r, Cmax, 1); /* (18) */
		term(&r, C[m], -1);
		emit(lp, &r, GLP_LO, 0, 0);
		term(&r, C[m], 1);
		term(&r, S[m], -1);
		emit(lp, &r, GLP_LO, 0, 0);
	}
	for (int e = 0; e < delta_problem_n_deps(p); e++) { /* (16) */
		term(&r, S[deps[e].post], 1);
		term(&r, C[deps[e].pre], -1);
		emit(lp, &r, GLP_LO, deps[e].delay_ms, 0);
	}
	glp_iocp parm;
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.tm_lim = time_limit_s * 1000;
	double result = -1;
	if (glp_intopt(lp, &parm) == 0 && glp_mip_status(lp) == GLP_OPT)
		result = glp_mip_obj_val(lp);
	glp_delete_prob(lp);
	return result;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int instances = argc > 1 ? atoi(argv[1]) : 20;
	rs = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
	int limit_s = argc > 3 ? atoi(argv[3]) : 20;
	double ratios[1024];
	int solved = 0, within = 0;
	glp_term_out(GLP_OFF);
	if (instances > 1024)
		instances = 1024;
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
		double opt = solve_milp(p, t_up, limit_s);
		if (opt > 0) {
			ratios[solved++] = res.makespan_ms / opt;
			within += res.makespan_ms <= opt * 1.02 + 1e-9;
			printf("instance %2d: %d tasks, DELTA-Fast %.4f ms, MILP optimum %.4f ms, "
			       "ratio %.4f\n",
			       i, nt, res.makespan_ms, opt, res.makespan_ms / opt);
		} else {
			printf("instance %2d: MILP not proven optimal within %d s\n", i, limit_s);
		}
		delta_problem_free(p);
	}
	if (solved) {
		qsort(ratios, (size_t)solved, sizeof(double), cmp_d);
		printf("DELTA-Fast / MILP optimum over %d proven instances: median %.4f, max %.4f; "
		       "%d of %d within 2%%\n",
		       solved, ratios[solved / 2], ratios[solved - 1], within, solved);
	}
	return 0;
}
