/*
 * bench_planner.c - benchmarks of the leaf-centric planner and the
 * realization (label bench, not run by default):
 *
 *   1. median plan and realize time on saturated instances at 2,048 /
 *      8,192 / 16,384 / 65,536 / 131,072 GPUs, per wiring (targets: 16,384
 *      GPUs <= 5 ms and 131,072 GPUs <= 60 ms, realization included);
 *   2. the paper's ILP (constraints (1), (2), (4)) solved by GLPK side by
 *      side with the leaf-centric planner on instances up to ~1,000 GPUs:
 *      time ratio, and both solutions checked against the constraints;
 *   3. pod-centric baseline vs leaf-centric: maximum contention and share of
 *      leaves with contention above 1 on the same instances;
 *   4. straight wiring: share of unrealized circuits on saturated random
 *      instances before and after Kempe repair (target <= 0.5% after);
 *   5. two jobs sharing every leaf: jobs A and B each use 37.5% or 50% of
 *      every leaf's uplinks (50%: together exactly full), B planned with
 *      A's cross-connects pinned, once with A's leaf-spine usage
 *      (lc_options.usage, computed by lc_usage_from_assignment and timed
 *      with the plan) and once blind to it, side by side: time, combined
 *      contention, unplaced links;
 *   6. the same on small near-tight instances next to GLPK: of the
 *      instances where an ILP proves that B fits contention-free around A's
 *      usage and ports, how many the planner plans contention-free (a plan
 *      claiming so where the ILP proves it impossible counts as a failure);
 *   7. random sequences of 2..6 jobs on overlapping leaves (the shapes of
 *      tests/property/test_leaf_share_property.c, small fabrics): for every
 *      job that ends contended on a contention-free load, GLPK computes the
 *      most links placeable contention-free within the free ports; the job
 *      is "avoidable" when that is at least what the planner placed;
 *   8. refusals over random job sequences against the exact check, before
 *      and after issue 30: the sequences of tests/property/
 *      test_fit_property.c (lc_exact.h's generator: arrivals and releases,
 *      small and mid-size jobs, three wirings, tau 1 and 2), each job
 *      planned twice on the same state, with the heuristic alone
 *      (lc_options.heuristic_only, as before issue 30) and as the daemon
 *      plans (the exact search behind it); a refusal is a plan that is not
 *      a placement (fit != LC_FIT_PLACED, or links unplaced, unrealized or
 *      over tau). Every refusal is judged by lc_exact's ILP; a job it proves
 *      feasible and refused is counted (target after: 0; a plan claiming
 *      LC_FIT_PLACED that is not a placement is a failure). The state
 *      advances with the "after" plan.
 *
 * Usage: bench_planner [repetitions] [sections]   (default 9, all: "12345678")
 * Exits 1 when a plan breaks a guarantee or the ILP answer is infeasible;
 * timings are printed, not asserted (targets are shown next to them).
 */
#include <glpk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l2check.h"
#include "lc_exact.h"
#include "lc_gen.h"
#include "leafcentric.h"
#include "bench_clock.h"

static int failures;

/* GLPK time limit per instance; an instance that hits it is shown as a timeout. */
#define ILP_LIMIT_MS	 10000
#define SYM_ILP_LIMIT_MS 20000

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct ocs_fabric fabric_for(int64_t gpus, enum ocs_wiring w)
{
	/* The deploy/fabrics shapes: k_leaf = k_spine = 16 up to 16k GPUs, 32 beyond. */
	int k = gpus > 16384 ? 32 : 16;
	struct ocs_fabric f = {.k_leaf = k, .k_spine = k, .tau = 2, .wiring = w};

	f.pods = (int)(gpus / ((int64_t)k * (k / 2)));
	f.k_ocs = f.pods * (w == OCS_WIRING_DUAL ? 2 : 1);
	return f;
}

static void bench_sizes(int reps)
{
	static const int64_t sizes[] = {2048, 8192, 16384, 65536, 131072};
	static const enum ocs_wiring wirings[] = {OCS_WIRING_CROSS, OCS_WIRING_DUAL,
						  OCS_WIRING_STRAIGHT};

	printf("== 1. plan + realize on saturated instances (median of %d, one core)\n", reps);
	printf("%8s %-9s %5s %6s %8s %10s %10s %10s %8s\n", "gpus", "wiring", "pods", "leaves",
	       "links", "plan_ms", "realize_ms", "total_ms", "target");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (size_t wi = 0; wi < 3; wi++) {
			struct ocs_fabric f = fabric_for(sizes[si], wirings[wi]);
			double *plan = calloc((size_t)reps, sizeof(double));
			double *real = calloc((size_t)reps, sizeof(double));
			double *tot = calloc((size_t)reps, sizeof(double));
			uint64_t seed = 1000 + si * 10 + wi;
			long links = 0;

			for (int r = 0; r < reps; r++) {
				size_t n;
				struct lc_demand *d =
					lc_gen_demand(&f, LC_GEN_SATURATED, NULL, 0, &seed, &n);
				struct lc_options opt = {.realize = true};
				struct lc_plan *p = NULL;
				double t0 = bench_now_ms();

				if (lc_plan(&f, d, n, NULL, 0, &opt, &p) != 0) {
					failures++;
					free(d);
					continue;
				}
				tot[r] = bench_now_ms() - t0;
				plan[r] = p->plan_ms;
				real[r] = p->realize_ms;
				links = 0;
				for (size_t i = 0; i < n; i++)
					links += d[i].links;
				if (p->max_contention > 1.0 || p->n_unplaced ||
				    (f.wiring != OCS_WIRING_STRAIGHT && p->n_unrealized) ||
				    l2_check(&f, p->xcs, p->n_xcs, NULL, 0) != 0) {
					fprintf(stderr, "guarantee broken at %lld GPUs %s\n",
						(long long)sizes[si], ocs_wiring_name(f.wiring));
					failures++;
				}
				lc_plan_free(p);
				free(d);
			}
			printf("%8lld %-9s %5d %6d %8ld %10.3f %10.3f %10.3f %8s\n",
			       (long long)sizes[si], ocs_wiring_name(f.wiring), f.pods,
			       ocs_fabric_leaves(&f), links, median(plan, reps), median(real, reps),
			       median(tot, reps),
			       sizes[si] == 16384    ? "<= 5"
			       : sizes[si] == 131072 ? "<= 60"
						     : "");
			free(plan);
			free(real);
			free(tot);
		}
	}
}

/*
 * The paper's model: integer L[a][b][h] for every ordered pair with demand,
 * (1) sum_h L[a][b][h] = L[a][b], (2) sum_b L[a][b][h] <= tau and
 * sum_a L[a][b][h] <= tau, (4) C[i][j][h] = C[j][i][h]. Feasibility only.
 * Writes the solution per ordered pair and spine into sol (n_pairs*2*H).
 * Returns the GLPK status or -1.
 */
static int solve_ilp(const struct ocs_fabric *f, const struct lc_demand *d, size_t n, int *sol)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f), P = f->pods;
	int n_vars = (int)n * 2 * H, row = 0;
	glp_prob *lp = glp_create_prob();
	glp_iocp parm;
	int *ia, *ja, ne = 0, rc;
	double *ar;
	/* rows: (1) 2n, (2) 2*N*H, (4) P*P*H/2 */
	int max_ne = n_vars * 3 + n_vars * 2 + 8;

	ia = malloc((size_t)(max_ne + 1) * sizeof(int));
	ja = malloc((size_t)(max_ne + 1) * sizeof(int));
	ar = malloc((size_t)(max_ne + 1) * sizeof(double));
	glp_set_obj_dir(lp, GLP_MIN);
	glp_add_cols(lp, n_vars);
	for (int c = 1; c <= n_vars; c++) {
		glp_set_col_kind(lp, c, GLP_IV);
		glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
	}
	/* column of (pair k, direction dir, spine h) */
#define COL(k, dir, h) ((int)(((k)*2 + (dir)) * H + (h)) + 1)
	for (size_t k = 0; k < n; k++) {
		for (int dir = 0; dir < 2; dir++) {
			row = glp_add_rows(lp, 1);
			glp_set_row_bnds(lp, row, GLP_FX, d[k].links, d[k].links);
			for (int h = 0; h < H; h++) {
				ne++;
				ia[ne] = row;
				ja[ne] = COL(k, dir, h);
				ar[ne] = 1.0;
			}
		}
	}
	/* (2): out of leaf x through h (dir 0 from a, dir 1 from b), and into it. */
	{
		int base_out = glp_add_rows(lp, N * H), base_in = glp_add_rows(lp, N * H);

		for (int r = 0; r < 2 * N * H; r++)
			glp_set_row_bnds(lp, base_out + r, GLP_UP, 0.0, f->tau);
		for (size_t k = 0; k < n; k++) {
			for (int h = 0; h < H; h++) {
				int from[2] = {d[k].a, d[k].b};

				for (int dir = 0; dir < 2; dir++) {
					ne++;
					ia[ne] = base_out + from[dir] * H + h;
					ja[ne] = COL(k, dir, h);
					ar[ne] = 1.0;
					ne++;
					ia[ne] = base_in + from[1 - dir] * H + h;
					ja[ne] = COL(k, dir, h);
					ar[ne] = 1.0;
				}
			}
		}
	}
	/* (4): for pods i < j and each h, C[i][j][h] - C[j][i][h] = 0. */
	{
		int base = glp_add_rows(lp, P * P * H);

		for (int r = 0; r < P * P * H; r++)
			glp_set_row_bnds(lp, base + r, GLP_FX, 0.0, 0.0);
		for (size_t k = 0; k < n; k++) {
			int pa = ocs_fabric_leaf_pod(f, d[k].a),
			    pb = ocs_fabric_leaf_pod(f, d[k].b);
			int i = pa < pb ? pa : pb, j = pa < pb ? pb : pa;

			for (int h = 0; h < H; h++) {
				for (int dir = 0; dir < 2; dir++) {
					int src = dir == 0 ? pa : pb;

					ne++;
					ia[ne] = base + (i * P + j) * H + h;
					ja[ne] = COL(k, dir, h);
					ar[ne] = src == i ? 1.0 : -1.0;
				}
			}
		}
	}
	glp_load_matrix(lp, ne, ia, ja, ar);
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.fp_heur = GLP_ON; /* feasibility pump: the model has no objective */
	parm.tm_lim = ILP_LIMIT_MS;
	rc = glp_intopt(lp, &parm);
	if (rc == 0 && (glp_mip_status(lp) == GLP_OPT || glp_mip_status(lp) == GLP_FEAS)) {
		for (size_t k = 0; k < n; k++)
			for (int dir = 0; dir < 2; dir++)
				for (int h = 0; h < H; h++)
					sol[(k * 2 + (size_t)dir) * (size_t)H + (size_t)h] =
						(int)(glp_mip_col_val(lp, COL(k, dir, h)) + 0.5);
		rc = 0;
	} else {
		rc = rc ? rc : -1;
	}
#undef COL
	glp_delete_prob(lp);
	free(ia);
	free(ja);
	free(ar);
	return rc;
}

/*
 * The same model restricted to L[a][b][h] = L[b][a][h] (one integer per
 * unordered pair and spine), which makes (4) hold by construction: (1) and
 * (2) only. Writes the solution in the ordered layout of solve_ilp().
 */
static int solve_ilp_symmetric(const struct ocs_fabric *f, const struct lc_demand *d, size_t n,
			       int *sol)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f);
	int n_vars = (int)n * H, ne = 0, rc, base;
	glp_prob *lp = glp_create_prob();
	glp_iocp parm;
	int *ia = malloc((size_t)(3 * n_vars + 1) * sizeof(int));
	int *ja = malloc((size_t)(3 * n_vars + 1) * sizeof(int));
	double *ar = malloc((size_t)(3 * n_vars + 1) * sizeof(double));

	glp_add_cols(lp, n_vars);
	for (int c = 1; c <= n_vars; c++) {
		glp_set_col_kind(lp, c, GLP_IV);
		glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
	}
	for (size_t k = 0; k < n; k++) {
		int row = glp_add_rows(lp, 1);

		glp_set_row_bnds(lp, row, GLP_FX, d[k].links, d[k].links);
		for (int h = 0; h < H; h++) {
			ne++;
			ia[ne] = row;
			ja[ne] = (int)k * H + h + 1;
			ar[ne] = 1.0;
		}
	}
	base = glp_add_rows(lp, N * H);
	for (int r = 0; r < N * H; r++)
		glp_set_row_bnds(lp, base + r, GLP_UP, 0.0, f->tau);
	for (size_t k = 0; k < n; k++) {
		for (int h = 0; h < H; h++) {
			for (int end = 0; end < 2; end++) {
				ne++;
				ia[ne] = base + (end ? d[k].b : d[k].a) * H + h;
				ja[ne] = (int)k * H + h + 1;
				ar[ne] = 1.0;
			}
		}
	}
	glp_load_matrix(lp, ne, ia, ja, ar);
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.tm_lim = SYM_ILP_LIMIT_MS;
	rc = glp_intopt(lp, &parm);
	if (rc == 0 && (glp_mip_status(lp) == GLP_OPT || glp_mip_status(lp) == GLP_FEAS)) {
		for (size_t k = 0; k < n; k++)
			for (int h = 0; h < H; h++)
				for (int dir = 0; dir < 2; dir++)
					sol[(k * 2 + (size_t)dir) * (size_t)H + (size_t)h] =
						(int)(glp_mip_col_val(lp, (int)k * H + h + 1) +
						      0.5);
		rc = 0;
	} else {
		rc = rc ? rc : -1;
	}
	glp_delete_prob(lp);
	free(ia);
	free(ja);
	free(ar);
	return rc;
}

/* Checks (1), (2), (4) on a per-ordered-pair solution; returns whether all hold. */
static bool constraints_hold(const struct ocs_fabric *f, const struct lc_demand *d, size_t n,
			     const int *sol)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f), P = f->pods;
	int *out = calloc((size_t)N * H, sizeof(int)), *in = calloc((size_t)N * H, sizeof(int));
	long *C = calloc((size_t)P * P * H, sizeof(long));
	bool ok = true;

	for (size_t k = 0; k < n; k++) {
		for (int dir = 0; dir < 2; dir++) {
			int from = dir ? d[k].b : d[k].a, to = dir ? d[k].a : d[k].b, sum = 0;

			for (int h = 0; h < H; h++) {
				int x = sol[(k * 2 + (size_t)dir) * (size_t)H + (size_t)h];

				sum += x;
				out[from * H + h] += x;
				in[to * H + h] += x;
				C[((size_t)ocs_fabric_leaf_pod(f, from) * P +
				   ocs_fabric_leaf_pod(f, to)) *
					  H +
				  h] += x;
			}
			ok &= sum == d[k].links; /* (1) */
		}
	}
	for (int x = 0; x < N * H; x++)
		ok &= out[x] <= f->tau && in[x] <= f->tau; /* (2) */
	for (int i = 0; i < P; i++)
		for (int j = 0; j < P; j++)
			for (int h = 0; h < H; h++) /* (4) */
				ok &= C[((size_t)i * P + j) * H + h] ==
				      C[((size_t)j * P + i) * H + h];
	free(out);
	free(in);
	free(C);
	return ok;
}

static void bench_ilp(int reps)
{
	static const struct {
		int pods, k_leaf, k_spine;
		enum lc_gen_shape shape;
	} cases[] = {
		{4, 4, 8, LC_GEN_SATURATED},  {8, 8, 8, LC_GEN_SATURATED},
		{8, 8, 16, LC_GEN_SATURATED}, {16, 8, 16, LC_GEN_SATURATED},
		{16, 8, 16, LC_GEN_RANDOM},   {8, 16, 16, LC_GEN_RANDOM},
	};

	printf("\n== 2. leaf-centric vs the paper's ILP in GLPK (tau 2, median of %d)\n", reps);
	printf("ilp: the paper's model, constraints (1), (2), (4), limit %d s; sym: the same\n"
	       "with L[a][b][h] = L[b][a][h] (so (4) holds by construction), limit %d s.\n"
	       "*_ok = solved within the limit and checked against (1), (2), (4); a median\n"
	       "at the limit makes the ratio a lower bound, shown as '>'.\n",
	       ILP_LIMIT_MS / 1000, SYM_ILP_LIMIT_MS / 1000);
	printf("%6s %-10s %5s %6s %7s %6s %8s %9s %10s %9s %10s %5s %5s %5s\n", "gpus", "shape",
	       "pods", "k_leaf", "k_spine", "vars", "lc_ms", "ilp_ms", "ilp/lc", "sym_ms", "sym/lc",
	       "lc", "ilp", "sym");
	for (size_t s = 0; s < sizeof(cases) / sizeof(cases[0]); s++) {
		struct ocs_fabric f = {.pods = cases[s].pods,
				       .k_leaf = cases[s].k_leaf,
				       .k_spine = cases[s].k_spine,
				       .tau = 2,
				       .k_ocs = cases[s].pods,
				       .wiring = OCS_WIRING_CROSS};
		double *lc_t = calloc((size_t)reps, sizeof(double));
		double *ilp_t = calloc((size_t)reps, sizeof(double));
		double *sym_t = calloc((size_t)reps, sizeof(double));
		uint64_t seed = 77 + s;
		int lc_ok = 0, ilp_ok = 0, ilp_solved = 0, sym_ok = 0, sym_solved = 0, vars = 0;
		double lm, im, sm;

		for (int r = 0; r < reps; r++) {
			size_t n;
			struct lc_demand *d = lc_gen_demand(&f, cases[s].shape, NULL, 0, &seed, &n);
			int H = ocs_fabric_groups(&f);
			int *sol = calloc(n * 2 * (size_t)H + 1, sizeof(int));
			struct lc_plan *p = NULL;
			double t0 = bench_now_ms();

			lc_plan(&f, d, n, NULL, 0, NULL, &p);
			lc_t[r] = bench_now_ms() - t0;
			if (p) {
				/* The plan as the paper's variables: the same spine both ways. */
				int *lsol = calloc(n * 2 * (size_t)H + 1, sizeof(int));

				for (size_t i = 0; i < p->n_assignment; i++)
					for (size_t k = 0; k < n; k++)
						if ((d[k].a < d[k].b ? d[k].a : d[k].b) ==
							    p->assignment[i].a &&
						    (d[k].a < d[k].b ? d[k].b : d[k].a) ==
							    p->assignment[i].b)
							for (int dir = 0; dir < 2; dir++)
								lsol[(k * 2 + (size_t)dir) *
									     (size_t)H +
								     (size_t)p->assignment[i].h] =
									p->assignment[i].links;
				lc_ok += constraints_hold(&f, d, n, lsol);
				free(lsol);
			}
			t0 = bench_now_ms();
			if (solve_ilp(&f, d, n, sol) == 0) {
				ilp_solved++;
				ilp_ok += constraints_hold(&f, d, n, sol);
			}
			ilp_t[r] = bench_now_ms() - t0;
			memset(sol, 0, n * 2 * (size_t)H * sizeof(int));
			t0 = bench_now_ms();
			if (solve_ilp_symmetric(&f, d, n, sol) == 0) {
				sym_solved++;
				sym_ok += constraints_hold(&f, d, n, sol);
			}
			sym_t[r] = bench_now_ms() - t0;
			vars = (int)n * 2 * H;
			lc_plan_free(p);
			free(sol);
			free(d);
		}
		lm = median(lc_t, reps);
		im = median(ilp_t, reps);
		sm = median(sym_t, reps);
		printf("%6lld %-10s %5d %6d %7d %6d %8.3f %9.1f %1s%8.0fx %9.1f %1s%8.0fx %3d/%d "
		       "%3d/%d %3d/%d\n",
		       (long long)ocs_fabric_gpus(&f), lc_gen_shape_name(cases[s].shape), f.pods,
		       f.k_leaf, f.k_spine, vars, lm, im, im >= ILP_LIMIT_MS ? ">" : "",
		       lm > 0 ? im / lm : 0, sm, sm >= SYM_ILP_LIMIT_MS ? ">" : "",
		       lm > 0 ? sm / lm : 0, lc_ok, reps, ilp_ok, reps, sym_ok, reps);
		failures += lc_ok != reps;
		/* A solved ILP must satisfy its own model. */
		failures += ilp_ok != ilp_solved;
		failures += sym_ok != sym_solved;
		free(lc_t);
		free(ilp_t);
		free(sym_t);
	}
}

static void bench_polarization(void)
{
	static const int64_t sizes[] = {2048, 16384};
	static const int taus[] = {2, 1};

	printf("\n== 3. pod-centric baseline vs leaf-centric (same instances, 5 each)\n");
	printf("%8s %4s %-10s %16s %18s %16s %18s\n", "gpus", "tau", "shape", "pod max_cont",
	       "pod leaves>1 (%)", "leaf max_cont", "leaf leaves>1 (%)");
	for (size_t si = 0; si < 2; si++) {
		for (size_t ti = 0; ti < 2; ti++) {
			for (int shape = 0; shape < LC_GEN_SHAPES; shape++) {
				struct ocs_fabric f = fabric_for(sizes[si], OCS_WIRING_CROSS);
				double pmax = 0, lmax = 0;
				long pc = 0, lcl = 0, leaves = 0;
				uint64_t seed = 500 + si + 10 * ti;

				f.tau = taus[ti];
				f.k_spine = f.k_spine / 2 * f.tau; /* keep leaves per pod */
				for (int r = 0; r < 5; r++) {
					size_t n;
					struct lc_demand *d = lc_gen_demand(
						&f, (enum lc_gen_shape)shape, NULL, 0, &seed, &n);
					struct lc_plan *p = NULL, *q = NULL;

					pc_plan(&f, d, n, NULL, 0, NULL, &p);
					lc_plan(&f, d, n, NULL, 0, NULL, &q);
					if (p && q) {
						pmax = p->max_contention > pmax ? p->max_contention
										: pmax;
						lmax = q->max_contention > lmax ? q->max_contention
										: lmax;
						pc += (long)p->contended_leaves;
						lcl += (long)q->contended_leaves;
						leaves += ocs_fabric_leaves(&f);
					} else {
						failures++;
					}
					lc_plan_free(p);
					lc_plan_free(q);
					free(d);
				}
				printf("%8lld %4d %-10s %16.2f %18.2f %16.2f %18.2f\n",
				       (long long)sizes[si], f.tau,
				       lc_gen_shape_name((enum lc_gen_shape)shape), pmax,
				       100.0 * pc / leaves, lmax, 100.0 * lcl / leaves);
			}
		}
	}
}

static void bench_straight(void)
{
	static const int64_t sizes[] = {2048, 8192, 16384, 65536, 131072};

	printf("\n== 4. straight wiring: unrealized circuits, saturated random (5 each)\n");
	printf("%8s %10s %16s %16s %8s\n", "gpus", "circuits", "before Kempe %", "after Kempe %",
	       "target");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		struct ocs_fabric f = fabric_for(sizes[si], OCS_WIRING_STRAIGHT);
		long circuits = 0, before = 0, after = 0;
		uint64_t seed = 900 + si;

		for (int r = 0; r < 5; r++) {
			size_t n;
			struct lc_demand *d =
				lc_gen_demand(&f, LC_GEN_SATURATED, NULL, 0, &seed, &n);
			struct lc_options opt = {.realize = true};
			struct lc_plan *p = NULL;

			if (lc_plan(&f, d, n, NULL, 0, &opt, &p) == 0) {
				for (size_t t = 0; t < p->n_topology; t++)
					circuits += p->topology[t].circuits;
				before += (long)p->unrealized_before_repair;
				after += (long)p->unrealized_circuits;
				failures += l2_check(&f, p->xcs, p->n_xcs, NULL, 0) != 0;
			} else {
				failures++;
			}
			lc_plan_free(p);
			free(d);
		}
		printf("%8lld %10ld %16.3f %16.3f %8s\n", (long long)sizes[si], circuits,
		       100.0 * before / circuits, 100.0 * after / circuits, "<= 0.5");
	}
}

/* Combined load of two plans: max over (leaf, spine), and leaves over tau. */
static int combined_load(const struct ocs_fabric *f, const struct lc_plan *x,
			 const struct lc_plan *y, long *contended)
{
	int N = ocs_fabric_leaves(f), H = ocs_fabric_groups(f), max = 0;
	int *load = calloc((size_t)N * H, sizeof(int));

	for (int k = 0; k < 2; k++) {
		const struct lc_plan *p = k ? y : x;

		for (size_t i = 0; i < p->n_assignment; i++) {
			load[(size_t)p->assignment[i].a * H + p->assignment[i].h] +=
				p->assignment[i].links;
			load[(size_t)p->assignment[i].b * H + p->assignment[i].h] +=
				p->assignment[i].links;
		}
	}
	for (int a = 0; a < N; a++) {
		bool over = false;

		for (int h = 0; h < H; h++) {
			int l = load[(size_t)a * H + h];

			max = l > max ? l : max;
			over |= l > f->tau;
		}
		*contended += over;
	}
	free(load);
	return max;
}

static void bench_shared(int reps)
{
	static const int64_t sizes[] = {2048, 16384, 131072};
	static const int taus[] = {2, 1};

	printf("\n== 5. two jobs sharing every leaf, cross wiring (median of %d)\n", reps);
	printf("A and B each use `fill` of every leaf's uplinks (50%%: together exactly full); "
	       "B is planned with\nA's cross-connects pinned, with A's usage and blind to it; "
	       "contention is A + B.\n");
	printf("%8s %4s %5s %10s %10s %12s %12s %14s %14s %11s\n", "gpus", "tau", "fill",
	       "usage_ms", "blind_ms", "usage max_c", "blind max_c", "usage lvs>1 %",
	       "blind lvs>1 %", "unplaced %");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		for (size_t ti = 0; ti < 4; ti++) {
			struct ocs_fabric f = fabric_for(sizes[si], OCS_WIRING_CROSS);
			double *aware_t = calloc((size_t)reps, sizeof(double));
			double *blind_t = calloc((size_t)reps, sizeof(double));
			uint64_t seed = 1300 + si * 10 + ti;
			int aware_max = 0, blind_max = 0, fill_a, fill_b;
			long aware_over = 0, blind_over = 0, leaves = 0, links = 0, unplaced = 0;

			f.tau = taus[ti / 2];
			f.k_spine = f.k_spine / 2 * f.tau; /* keep leaves per pod */
			fill_a = fill_b = ti % 2 ? f.k_leaf * 3 / 8 : f.k_leaf / 2;
			for (int r = 0; r < reps; r++) {
				size_t na, nb, n_u = 0;
				struct lc_demand *da = lc_gen_demand(&f, LC_GEN_SATURATED, NULL,
								     fill_a, &seed, &na);
				struct lc_demand *db = lc_gen_demand(&f, LC_GEN_SATURATED, NULL,
								     fill_b, &seed, &nb);
				struct lc_options opt = {.realize = true};
				struct lc_plan *pa = NULL, *aware = NULL, *blind = NULL;
				struct lc_leaf_usage *u = NULL;
				double t0;

				if (lc_plan(&f, da, na, NULL, 0, &opt, &pa) != 0) {
					failures++;
					free(da);
					free(db);
					continue;
				}
				t0 = bench_now_ms();
				if (lc_usage_from_assignment(pa->assignment, pa->n_assignment, &u,
							     &n_u) == 0) {
					opt.usage = u;
					opt.n_usage = n_u;
					lc_plan(&f, db, nb, pa->xcs, pa->n_xcs, &opt, &aware);
				}
				aware_t[r] = bench_now_ms() - t0;
				opt.usage = NULL;
				opt.n_usage = 0;
				t0 = bench_now_ms();
				lc_plan(&f, db, nb, pa->xcs, pa->n_xcs, &opt, &blind);
				blind_t[r] = bench_now_ms() - t0;
				if (!aware || !blind ||
				    l2_check(&f, aware->xcs, aware->n_xcs, NULL, 0) != 0) {
					failures++;
				} else {
					int am = combined_load(&f, pa, aware, &aware_over);
					int bm = combined_load(&f, pa, blind, &blind_over);

					aware_max = am > aware_max ? am : aware_max;
					blind_max = bm > blind_max ? bm : blind_max;
					leaves += ocs_fabric_leaves(&f);
					for (size_t i = 0; i < nb; i++)
						links += db[i].links;
					for (size_t i = 0; i < aware->n_unplaced; i++)
						unplaced += aware->unplaced[i].links;
				}
				lc_plan_free(pa);
				lc_plan_free(aware);
				lc_plan_free(blind);
				free(u);
				free(da);
				free(db);
			}
			printf("%8lld %4d %4.1f%% %10.3f %10.3f %12.2f %12.2f %14.2f %14.2f "
			       "%11.3f\n",
			       (long long)sizes[si], f.tau, 100.0 * fill_a / f.k_leaf,
			       median(aware_t, reps), median(blind_t, reps),
			       (double)aware_max / f.tau, (double)blind_max / f.tau,
			       leaves ? 100.0 * aware_over / leaves : 0,
			       leaves ? 100.0 * blind_over / leaves : 0,
			       links ? 100.0 * unplaced / links : 0);
			free(aware_t);
			free(blind_t);
		}
	}
}

/*
 * The ILP of sections 6 and 7: integer x[pair][h] >= 0 with sum of x at
 * (leaf, h) <= tau - U ([leaf * H + h]) and at (pod, h) <= fp ([pod * H + h],
 * free spine ports). all_links: sum_h x = links for every pair, feasibility
 * only: returns 1 feasible, 0 proven infeasible, -1 undecided in time.
 * Otherwise sum_h x <= links, maximizing the links placed: returns the
 * optimum, or -1 when not proven in time.
 */
static int contention_free_ilp(const struct ocs_fabric *f, const struct lc_demand *d, size_t n,
			       const int *U, const int *fp, bool all_links)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f), P = f->pods;
	int n_vars = (int)n * H, ne = 0, rc, st;
	glp_prob *lp = glp_create_prob();
	int *ia = malloc((size_t)(n_vars * 5 + 1) * sizeof(int));
	int *ja = malloc((size_t)(n_vars * 5 + 1) * sizeof(int));
	double *ar = malloc((size_t)(n_vars * 5 + 1) * sizeof(double));
	int base_pair, base_leaf, base_pod;
	glp_iocp parm;

	glp_add_cols(lp, n_vars);
	for (int c = 1; c <= n_vars; c++) {
		glp_set_col_kind(lp, c, GLP_IV);
		glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
	}
	base_pair = glp_add_rows(lp, (int)n);
	base_leaf = glp_add_rows(lp, N * H);
	base_pod = glp_add_rows(lp, P * H);
	glp_set_obj_dir(lp, GLP_MAX);
	for (int c = 1; !all_links && c <= n_vars; c++)
		glp_set_obj_coef(lp, c, 1.0);
	for (size_t k = 0; k < n; k++)
		glp_set_row_bnds(lp, base_pair + (int)k, all_links ? GLP_FX : GLP_UP,
				 all_links ? d[k].links : 0.0, d[k].links);
	for (int r = 0; r < N * H; r++)
		glp_set_row_bnds(lp, base_leaf + r, GLP_UP, 0.0,
				 U[r] < f->tau ? f->tau - U[r] : 0.0);
	for (int r = 0; r < P * H; r++)
		glp_set_row_bnds(lp, base_pod + r, GLP_UP, 0.0, fp[r] > 0 ? fp[r] : 0.0);
	for (size_t k = 0; k < n; k++) {
		for (int h = 0; h < H; h++) {
			int col = (int)k * H + h + 1;
			int rows[5] = {base_pair + (int)k, base_leaf + d[k].a * H + h,
				       base_leaf + d[k].b * H + h,
				       base_pod + ocs_fabric_leaf_pod(f, d[k].a) * H + h,
				       base_pod + ocs_fabric_leaf_pod(f, d[k].b) * H + h};

			for (int e = 0; e < 5; e++) {
				ne++;
				ia[ne] = rows[e];
				ja[ne] = col;
				ar[ne] = 1.0;
			}
		}
	}
	glp_load_matrix(lp, ne, ia, ja, ar);
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.tm_lim = ILP_LIMIT_MS;
	rc = glp_intopt(lp, &parm);
	st = glp_mip_status(lp);
	if (!all_links) {
		int best = rc == 0 && st == GLP_OPT ? (int)(glp_mip_obj_val(lp) + 0.5) : -1;

		glp_delete_prob(lp);
		free(ia);
		free(ja);
		free(ar);
		return best;
	}
	glp_delete_prob(lp);
	free(ia);
	free(ja);
	free(ar);
	if (rc == 0 && (st == GLP_OPT || st == GLP_FEAS))
		return 1;
	if (rc == GLP_ENOPFS || rc == GLP_ENODFS || (rc == 0 && st == GLP_NOFEAS))
		return 0;
	return -1;
}

static void bench_shared_ilp(void)
{
	static const struct {
		int pods, k_leaf, k_spine, tau, fill;
	} cases[] = {
		{8, 12, 12, 2, 5},
		{8, 16, 16, 2, 7},
		{16, 16, 16, 2, 7},
		{8, 16, 8, 1, 7},
	};
	const int instances = 30;

	printf("\n== 6. near-tight shared leaves next to GLPK (%d instances each, cross wiring)\n",
	       instances);
	printf("A and B each use `fill` of every leaf's uplinks; feasible = the ILP proves B fits "
	       "contention-free\naround A's usage and ports; found = the planner's plan for B "
	       "is contention-free.\n");
	printf("%6s %5s %6s %7s %4s %5s %9s %11s %9s %6s %7s\n", "gpus", "pods", "k_leaf",
	       "k_spine", "tau", "fill", "feasible", "infeasible", "undecided", "found", "found %");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct ocs_fabric f = {.pods = cases[c].pods,
				       .k_leaf = cases[c].k_leaf,
				       .k_spine = cases[c].k_spine,
				       .tau = cases[c].tau,
				       .k_ocs = cases[c].pods,
				       .wiring = OCS_WIRING_CROSS};
		int H = ocs_fabric_groups(&f), N = ocs_fabric_leaves(&f);
		int feasible = 0, infeasible = 0, undecided = 0, found = 0;
		uint64_t seed = 1600 + c;

		for (int r = 0; r < instances; r++) {
			size_t na, nb, n_u = 0;
			struct lc_demand *da = lc_gen_demand(&f, LC_GEN_SATURATED, NULL,
							     cases[c].fill, &seed, &na);
			struct lc_demand *db = lc_gen_demand(&f, LC_GEN_SATURATED, NULL,
							     cases[c].fill, &seed, &nb);
			struct lc_options opt = {.realize = true};
			struct lc_plan *pa = NULL, *pb = NULL;
			struct lc_leaf_usage *u = NULL;
			int *U = calloc((size_t)N * H, sizeof(int));
			int *fp = malloc((size_t)f.pods * H * sizeof(int));
			int fits;

			if (lc_plan(&f, da, na, NULL, 0, &opt, &pa) != 0 ||
			    lc_usage_from_assignment(pa->assignment, pa->n_assignment, &u, &n_u)) {
				failures++;
				goto next;
			}
			opt.usage = u;
			opt.n_usage = n_u;
			if (lc_plan(&f, db, nb, pa->xcs, pa->n_xcs, &opt, &pb) != 0) {
				failures++;
				goto next;
			}
			for (size_t i = 0; i < n_u; i++)
				U[u[i].leaf * H + u[i].spine] += u[i].links;
			for (int q = 0; q < f.pods * H; q++)
				fp[q] = f.k_spine;
			for (size_t i = 0; i < pa->n_assignment; i++) {
				const struct lc_spine_links *s = &pa->assignment[i];

				fp[ocs_fabric_leaf_pod(&f, s->a) * H + s->h] -= s->links;
				fp[ocs_fabric_leaf_pod(&f, s->b) * H + s->h] -= s->links;
			}
			fits = contention_free_ilp(&f, db, nb, U, fp, true);
			feasible += fits == 1;
			infeasible += fits == 0;
			undecided += fits < 0;
			found += fits == 1 && pb->contention_free;
			if (fits == 0 && pb->contention_free) {
				fprintf(stderr, "planner claims contention-free where the ILP "
						"proves it impossible\n");
				failures++;
			}
		next:
			lc_plan_free(pa);
			lc_plan_free(pb);
			free(u);
			free(U);
			free(fp);
			free(da);
			free(db);
		}
		printf("%6lld %5d %6d %7d %4d %2d/%-2d %9d %11d %9d %6d %6.1f%%\n",
		       (long long)ocs_fabric_gpus(&f), f.pods, f.k_leaf, f.k_spine, f.tau,
		       cases[c].fill, f.k_leaf, feasible, infeasible, undecided, found,
		       feasible ? 100.0 * found / feasible : 0.0);
	}
}

/* Free ports per (pod, group) left by pinned cross-connects (realize.h). */
static void free_ports(const struct ocs_fabric *f, const struct ocs_xc *x, size_t n, int *fp)
{
	int H = ocs_fabric_groups(f), P = f->pods;
	unsigned char *busy = malloc((size_t)P * f->k_spine);

	for (int h = 0; h < H; h++) {
		memset(busy, 0, (size_t)P * f->k_spine);
		rz_busy_spine_ports(f, h, x, n, busy);
		for (int q = 0; q < P; q++) {
			fp[q * H + h] = f->k_spine;
			for (int k = 0; k < f->k_spine; k++)
				fp[q * H + h] -= busy[(size_t)q * f->k_spine + k];
		}
	}
	free(busy);
}

/*
 * Section 7 for one job of a sequence: when it ends contended on a
 * contention-free load, is that avoidable? count: contended, avoidable,
 * avoidable with nothing unplaced, undecided.
 */
static void judge_job(const struct ocs_fabric *f, const struct lc_demand *d, size_t n,
		      const struct lc_leaf_usage *u, size_t n_u, const struct ocs_xc *pinned,
		      size_t n_pinned, const struct lc_plan *p, long *count)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f), placed = 0, best;
	int *U = calloc((size_t)N * H, sizeof(int)),
	    *fp = malloc((size_t)f->pods * H * sizeof(int));
	bool clean = true;

	for (size_t i = 0; i < n_u; i++)
		U[u[i].leaf * H + u[i].spine] += u[i].links;
	for (int i = 0; i < N * H; i++)
		clean &= U[i] <= f->tau;
	if (clean && p->max_contention > 1.0) {
		free_ports(f, pinned, n_pinned, fp);
		for (size_t i = 0; i < p->n_assignment; i++)
			placed += p->assignment[i].links;
		best = contention_free_ilp(f, d, n, U, fp, false);
		count[0]++;
		count[1] += best >= placed;
		count[2] += best >= placed && p->n_unplaced == 0;
		count[3] += best < 0;
	}
	free(U);
	free(fp);
}

static void bench_sequences(void)
{
	const int sequences = 400;

	printf("\n== 7. sequences of 2..6 jobs sharing leaves, contended jobs judged by GLPK "
	       "(%d sequences per tau)\n",
	       sequences);
	printf("contended: jobs planned on a contention-free load that end contended; avoidable: "
	       "GLPK places\nat least as many links contention-free (within the free ports); "
	       "the rest bought links with contention.\n");
	printf("%4s %6s %10s %10s %26s %10s\n", "tau", "jobs", "contended", "avoidable",
	       "avoidable, none unplaced", "undecided");
	for (int tau = 1; tau <= 2; tau++) {
		uint64_t seed = 1700 + (uint64_t)tau;
		long jobs = 0, count[4] = {0};

		for (int q = 0; q < sequences; q++) {
			int H = 2 + lc_gen_below(&seed, 5);
			struct ocs_fabric f = {.pods = 2 + lc_gen_below(&seed, 4),
					       .k_leaf = H * tau,
					       .k_spine = 2 * (1 + lc_gen_below(&seed, 3)),
					       .tau = tau,
					       .wiring = OCS_WIRING_CROSS};
			int N, n_jobs = 2 + lc_gen_below(&seed, 5);
			bool small = lc_gen_below(&seed, 2);
			unsigned char *allowed;
			struct lc_spine_links *all = malloc(sizeof(*all));
			struct ocs_xc *xcs = NULL;
			size_t n_all = 0, n_xcs = 0;

			if (tau == 2 && f.k_spine % 4)
				f.k_spine += 2;
			f.k_ocs = f.pods * ocs_fabric_ports_per_pod(&f);
			N = ocs_fabric_leaves(&f);
			allowed = malloc((size_t)N);
			for (int k = 0; k < n_jobs; k++) {
				int odds = 1 + lc_gen_below(&seed, 3);
				int fill = 1 + lc_gen_below(&seed, small ? f.k_leaf / 2 : f.k_leaf);
				enum lc_gen_shape shape =
					(enum lc_gen_shape)lc_gen_below(&seed, LC_GEN_SHAPES);
				struct lc_options opt = {.realize = true};
				struct lc_leaf_usage *u = NULL;
				struct lc_plan *p = NULL;
				struct lc_demand *d;
				size_t n, n_u = 0;

				for (int l = 0; l < N; l++)
					allowed[l] = lc_gen_below(&seed, odds) == 0;
				d = lc_gen_demand(&f, shape, allowed, fill, &seed, &n);
				if (lc_usage_from_assignment(all, n_all, &u, &n_u) == 0) {
					opt.usage = u;
					opt.n_usage = n_u;
					lc_plan(&f, d, n, xcs, n_xcs, &opt, &p);
				}
				if (p) {
					jobs++;
					judge_job(&f, d, n, u, n_u, xcs, n_xcs, p, count);
					all = realloc(all,
						      (n_all + p->n_assignment + 1) * sizeof(*all));
					memcpy(all + n_all, p->assignment,
					       p->n_assignment * sizeof(*all));
					n_all += p->n_assignment;
					free(xcs);
					xcs = p->xcs;
					n_xcs = p->n_xcs;
					p->xcs = NULL;
				} else {
					failures++;
				}
				lc_plan_free(p);
				free(u);
				free(d);
			}
			free(allowed);
			free(all);
			free(xcs);
		}
		printf("%4d %6ld %10ld %10ld %26ld %10ld\n", tau, jobs, count[0], count[1],
		       count[2], count[3]);
	}
}

/*
 * Section 8: whether the plan places the whole job (a refusal otherwise);
 * *claims is set when it says LC_FIT_PLACED. U is the live jobs' usage.
 */
static bool placed_whole(const struct ocs_fabric *f, const struct lc_plan *p, const int *U,
			 bool *claims)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f);
	int *load = calloc((size_t)N * H, sizeof(int));
	bool ok = p->n_unplaced == 0 && p->unrealized_circuits == 0 && p->changed_existing == 0;

	*claims = p->fit == LC_FIT_PLACED;
	for (size_t j = 0; j < p->n_assignment; j++) {
		load[p->assignment[j].a * H + p->assignment[j].h] += p->assignment[j].links;
		load[p->assignment[j].b * H + p->assignment[j].h] += p->assignment[j].links;
	}
	for (int i = 0; i < N * H; i++)
		ok &= load[i] == 0 || U[i] + load[i] <= f->tau;
	free(load);
	return ok && *claims;
}

/* A live job of section 8: its own cross-connects and assignment. */
struct s8_job {
	struct ocs_xc *xcs;
	size_t n_xcs;
	struct lc_spine_links *asg;
	size_t n_asg;
};

struct s8_state {
	struct s8_job *live;
	size_t n_live;
	struct ocs_xc *config;
	size_t n_config;
};

static void s8_release(struct s8_state *st, size_t i)
{
	free(st->live[i].xcs);
	free(st->live[i].asg);
	st->live[i] = st->live[--st->n_live];
	st->n_config = 0;
	for (size_t k = 0; k < st->n_live; k++) {
		if (st->live[k].n_xcs)
			memcpy(st->config + st->n_config, st->live[k].xcs,
			       st->live[k].n_xcs * sizeof(*st->config));
		st->n_config += st->live[k].n_xcs;
	}
}

/*
 * One job of section 8 planned before (heuristic alone) and after on the
 * same state; count: jobs, refused before, refused after, refused feasible
 * before, after, undecided. The state takes the "after" plan when placed.
 */
static void s8_job(const struct ocs_fabric *f, struct s8_state *st, const struct lc_demand *d,
		   size_t n, long *count)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f);
	int *U = calloc((size_t)N * H, sizeof(int));
	struct lc_spine_links *all = NULL;
	struct lc_leaf_usage *u = NULL;
	struct lcx_pair *pairs = malloc(n * sizeof(*pairs));
	size_t n_all = 0, n_u = 0;
	struct lc_plan *before = NULL, *after = NULL;
	bool ok_before = false, ok_after = false, claims = false;

	for (size_t i = 0; i < st->n_live; i++)
		n_all += st->live[i].n_asg;
	all = malloc((n_all + 1) * sizeof(*all));
	n_all = 0;
	for (size_t i = 0; i < st->n_live; i++)
		for (size_t j = 0; j < st->live[i].n_asg; j++) {
			const struct lc_spine_links *s = &st->live[i].asg[j];

			all[n_all++] = *s;
			U[s->a * H + s->h] += s->links;
			U[s->b * H + s->h] += s->links;
		}
	for (size_t i = 0; i < n; i++)
		pairs[i] = (struct lcx_pair){d[i].a, d[i].b, d[i].links};
	if (lc_usage_from_assignment(all, n_all, &u, &n_u) == 0) {
		struct lc_options opt = {
			.realize = true, .usage = u, .n_usage = n_u, .heuristic_only = true};

		if (lc_plan(f, d, n, st->config, st->n_config, &opt, &before) == 0)
			ok_before = placed_whole(f, before, U, &claims);
		opt.heuristic_only = false;
		if (lc_plan(f, d, n, st->config, st->n_config, &opt, &after) == 0) {
			ok_after = placed_whole(f, after, U, &claims);
			if (claims && !ok_after)
				failures++; /* LC_FIT_PLACED that is not a placement */
		}
	}
	if (!before || !after) {
		failures++;
	} else {
		count[0]++;
		count[1] += !ok_before;
		count[2] += !ok_after;
		if (!ok_before || !ok_after) {
			struct lcx_instance in = {f, pairs, n, st->config, st->n_config, U};
			struct lcx_result r;

			if (lcx_solve_ilp(&in, ILP_LIMIT_MS / 1000.0, &r) == 0) {
				count[3] += !ok_before && r.answer == LCX_FEASIBLE;
				count[4] += !ok_after && r.answer == LCX_FEASIBLE;
				count[5] += r.answer == LCX_UNDECIDED;
				lcx_result_clear(&r);
			} else {
				failures++;
			}
		}
		if (ok_after) {
			struct s8_job *j;

			st->live = realloc(st->live, (st->n_live + 1) * sizeof(*st->live));
			j = &st->live[st->n_live++];
			j->n_xcs = after->n_xcs - st->n_config;
			j->xcs = malloc((j->n_xcs + 1) * sizeof(*j->xcs));
			memcpy(j->xcs, after->xcs + st->n_config, j->n_xcs * sizeof(*j->xcs));
			j->asg = after->assignment;
			j->n_asg = after->n_assignment;
			after->assignment = NULL;
			free(st->config);
			st->config = after->xcs;
			st->n_config = after->n_xcs;
			after->xcs = NULL;
		}
	}
	lc_plan_free(before);
	lc_plan_free(after);
	free(U);
	free(u);
	free(all);
	free(pairs);
}

static void bench_refusals(void)
{
	static const enum ocs_wiring wirings[] = {OCS_WIRING_STRAIGHT, OCS_WIRING_DUAL,
						  OCS_WIRING_CROSS};
	const int sequences = 100;
	double t0 = bench_now_ms();

	printf("\n== 8. refusals over random job sequences against the exact check, before "
	       "(heuristic alone)\nand after issue 30 (%d sequences per tau and wiring, "
	       "test_fit_property's generator)\n",
	       sequences);
	printf("refused: the plan is not a placement of the whole job; refused feasible: "
	       "refused, and lc_exact's ILP\nfinds a placement (target after: 0); undecided: "
	       "the ILP hit its time limit.\n");
	printf("%4s %9s %6s %15s %14s %24s %23s %10s\n", "tau", "wiring", "jobs", "refused before",
	       "refused after", "refused feasible before", "refused feasible after", "undecided");
	for (int tau = 1; tau <= 2; tau++)
		for (size_t wi = 0; wi < 3; wi++) {
			uint64_t seed = 3000 + (uint64_t)tau * 10 + wi;
			long count[6] = {0};

			for (int q = 0; q < sequences; q++) {
				struct ocs_fabric f = lcx_gen_fabric(wirings[wi], tau, &seed);
				struct s8_state st = {0};
				int events = lcx_gen_events(&seed);

				for (int e = 0; e < events; e++) {
					struct lc_demand *d;
					size_t n;

					if (st.n_live && lcx_gen_release(&seed)) {
						s8_release(&st, (size_t)lc_gen_below(
									&seed, (int)st.n_live));
						continue;
					}
					d = lcx_gen_job(&f, lcx_gen_links(&seed), &seed, &n);
					if (d)
						s8_job(&f, &st, d, n, count);
					free(d);
				}
				while (st.n_live)
					s8_release(&st, 0);
				free(st.live);
				free(st.config);
			}
			printf("%4d %9s %6ld %15ld %14ld %24ld %23ld %10ld\n", tau,
			       ocs_wiring_name(wirings[wi]), count[0], count[1], count[2], count[3],
			       count[4], count[5]);
			failures += count[4] > 0;
		}
	printf("(%.1f s)\n", (bench_now_ms() - t0) / 1e3);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 9;
	const char *sections = argc > 2 ? argv[2] : "12345678";

	if (reps < 1)
		reps = 1;
	if (strchr(sections, '1'))
		bench_sizes(reps);
	if (strchr(sections, '2'))
		bench_ilp(reps < 3 ? reps : 3);
	if (strchr(sections, '3'))
		bench_polarization();
	if (strchr(sections, '4'))
		bench_straight();
	if (strchr(sections, '5'))
		bench_shared(reps);
	if (strchr(sections, '6'))
		bench_shared_ilp();
	if (strchr(sections, '7'))
		bench_sequences();
	if (strchr(sections, '8'))
		bench_refusals();
	if (failures)
		fprintf(stderr, "%d guarantee failures\n", failures);
	return failures ? 1 : 0;
}
