/*
 * test_delta_ga.c - hand-checkable cases for the DELTA capacity bounds
 * (chains, overlapping and time-separated tasks), the three baselines on a
 * star, and DELTA-Fast's parameter checks, budget refusal and time budget
 * (with a fake clock the test controls).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "delta_baselines.h"
#include "delta_bounds.h"
#include "delta_dag.h"
#include "delta_ga.h"
#include "ocs_pool_pthread.h"

#define MB 1e6

static struct delta_problem *make(int pods, const int *budget, const struct delta_task *t, int nt,
				  const struct delta_dep *d, int nd)
{
	struct delta_dag dag = {.pods = pods,
				.port_budget = budget,
				.bandwidth_gbps = 8,
				.n_tasks = nt,
				.tasks = t,
				.n_deps = nd,
				.deps = d};
	struct delta_error err;
	struct delta_problem *p = delta_problem_new(&dag, &err);
	assert_non_null(p);
	return p;
}

static const int budget3[3] = {16, 16, 16};

static void test_bound_chain(void **state)
{
	/* Dependent tasks never overlap: the bound is the largest F, not the sum. */
	struct delta_task t[] = {{0, 1, 2, MB, 0}, {0, 1, 3, MB, 0}, {0, 1, 1, MB, 0}};
	struct delta_dep d[] = {{0, 1, 0}, {1, 2, 0}};
	struct delta_problem *p = make(3, budget3, t, 3, d, 2);
	int xbar[1];
	assert_int_equal(delta_bounds(p, xbar), 0);
	assert_int_equal(xbar[0], 3);
	delta_problem_free(p);
}

static void test_bound_overlap(void **state)
{
	/* Independent tasks may overlap: 2 + 3. The reverse direction (F 4) is
	 * bounded on its own; the link takes the larger. */
	struct delta_task t[] = {{0, 1, 2, MB, 0}, {0, 1, 3, MB, 0}};
	struct delta_problem *p = make(3, budget3, t, 2, NULL, 0);
	int xbar[1];
	assert_int_equal(delta_bounds(p, xbar), 0);
	assert_int_equal(xbar[0], 5);
	delta_problem_free(p);
	struct delta_task u[] = {{0, 1, 2, MB, 0}, {1, 0, 4, MB, 0}};
	p = make(3, budget3, u, 2, NULL, 0);
	assert_int_equal(delta_bounds(p, xbar), 0);
	assert_int_equal(xbar[0], 4);
	delta_problem_free(p);
}

static void test_bound_time_separated(void **state)
{
	/* B = 1 MB/ms. T_up is the longest path with direction volumes:
	 * t2 (0.125) + 100 + t1 (V(0->1) = 2) = 102.125. t0 (0->1, F 2) must
	 * leave t3 (1->2, 100 MB, 1 flow) its 100 ms: LCT(t0) = 2.125. t1 (0->1,
	 * F 3) waits 100 ms after t2: EST(t1) = 100.125. Their windows do not
	 * meet: bound 3, not 5. */
	struct delta_task t[] = {
		{0, 1, 2, MB, 0}, {0, 1, 3, MB, 0}, {0, 2, 1, MB / 8, 0}, {1, 2, 1, 100 * MB, 0}};
	struct delta_dep d[] = {{0, 3, 0}, {2, 1, 100}};
	struct delta_problem *p = make(3, budget3, t, 4, d, 2);
	int xbar[3];
	double est[4], lct[4], t_up;
	assert_int_equal(delta_time_windows(p, est, lct, &t_up), 0);
	assert_float_equal(est[1], 100.125, 1e-9);
	assert_float_equal(t_up, 102.125, 1e-9);
	assert_float_equal(lct[0], 2.125, 1e-9);
	assert_int_equal(delta_bounds(p, xbar), 0);
	assert_int_equal(delta_problem_n_links(p), 3);
	assert_int_equal(xbar[0], 3);
	delta_problem_free(p);
}

static void test_baselines_star(void **state)
{
	/* Pod 0 (4 ports) talks to pod 1 (3 MB) and pod 2 (1 MB). */
	static const int budget[3] = {4, 4, 4};
	struct delta_task t[] = {{0, 1, 4, 3 * MB, 0}, {0, 2, 4, 1 * MB, 0}};
	struct delta_problem *p = make(3, budget, t, 2, NULL, 0);
	int x[2];
	/* Prop: pod 0 shares 4 * 3/4 = 3 and 4 * 1/4 = 1. */
	assert_int_equal(delta_baseline_plan(p, DELTA_PROP_ALLOC, x, NULL), 0);
	assert_int_equal(x[0], 3);
	assert_int_equal(x[1], 1);
	/* Sqrt: 4 * 1.732/2.732 = 2.54 -> 2, 4 * 1/2.732 = 1.46 -> 1. */
	assert_int_equal(delta_baseline_plan(p, DELTA_SQRT_ALLOC, x, NULL), 0);
	assert_int_equal(x[0], 2);
	assert_int_equal(x[1], 1);
	/* Halve: (1,1), weights 1.5/0.5 MB -> link 0 twice (1.5, 0.75), full. */
	assert_int_equal(delta_baseline_plan(p, DELTA_ITER_HALVE, x, NULL), 0);
	assert_int_equal(x[0], 3);
	assert_int_equal(x[1], 1);
	assert_string_equal(delta_baseline_name(DELTA_ITER_HALVE), "iter-halve");
	delta_problem_free(p);
}

static double fake_now;
static double fake_clock(void *ctx)
{
	(void)ctx;
	fake_now += 10;
	return fake_now;
}

static atomic_bool cancel_flag;
/* A clock that, on its third reading, cancels the search (as a caller that went away). */
static double cancelling_clock(void *ctx)
{
	(void)ctx;
	fake_now += 10;
	if (fake_now >= 30)
		atomic_store(&cancel_flag, true);
	return fake_now;
}

/* Issue 14 #8: a search whose caller is gone stops at the next generation. */
static void test_ga_cancel(void **state)
{
	static const int budget[3] = {4, 4, 4};
	struct delta_task t[] = {{0, 1, 4, 3 * MB, 0}, {0, 2, 4, 1 * MB, 0}, {1, 2, 2, 2 * MB, 0}};
	struct delta_dep d[] = {{0, 2, 1}};
	struct delta_problem *p = make(3, budget, t, 3, d, 1);
	struct delta_ga_params gp;
	struct delta_sim_result r;
	struct delta_ga_stats st;
	struct delta_error err;
	int x[3];

	(void)state;
	delta_ga_defaults(&gp);
	gp.stall_generations = 1000000000;
	gp.cancel = &cancel_flag;
	/* set before the search: the bounds stop (on large DAGs they take seconds) */
	atomic_store(&cancel_flag, true);
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, &st, &err), -ECANCELED);
	assert_int_equal(st.stopped_by_cancel, 1);
	assert_int_equal(st.generations, 0);
	assert_int_equal(delta_bounds_until(p, x, &cancel_flag), -ECANCELED);
	/* set after the bounds (given): not one generation runs, the plan is feasible */
	assert_int_equal(delta_bounds(p, x), 0);
	assert_int_equal(delta_fast(p, &gp, x, NULL, x, &r, &st, &err), 0);
	assert_int_equal(st.stopped_by_cancel, 1);
	assert_int_equal(st.generations, 0);
	assert_true(delta_plan_within_budget(p, x));
	/* set while it runs (t0, generations 1 and 2 read the clock; the
	 * third reading sets it): the check at generation 2 ends it */
	atomic_store(&cancel_flag, false);
	gp.clock_ms = cancelling_clock;
	gp.time_budget_ms = 1e12;
	fake_now = 0;
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, &st, &err), 0);
	assert_int_equal(st.stopped_by_cancel, 1);
	assert_int_equal(st.stopped_by_time, 0);
	assert_int_equal(st.generations, 1);
	/* never set: the search runs to its stall limit */
	atomic_store(&cancel_flag, false);
	delta_ga_defaults(&gp);
	gp.cancel = &cancel_flag;
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, &st, &err), 0);
	assert_int_equal(st.stopped_by_cancel, 0);
	assert_true(st.generations >= gp.stall_generations);
	delta_problem_free(p);
}

static void test_ga_params_and_budget(void **state)
{
	static const int budget[3] = {4, 4, 4};
	static const int tight[3] = {1, 4, 4};
	struct delta_task t[] = {{0, 1, 4, 3 * MB, 0}, {0, 2, 4, 1 * MB, 0}, {1, 2, 2, 2 * MB, 0}};
	struct delta_dep d[] = {{0, 2, 1}};
	struct delta_problem *p = make(3, budget, t, 3, d, 1);
	struct delta_ga_params gp;
	struct delta_sim_result r;
	struct delta_ga_stats st;
	struct delta_error err;
	int x[3];

	delta_ga_defaults(&gp);
	gp.population = 2;
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err), -EINVAL);
	assert_string_equal(err.field, "population");
	delta_ga_defaults(&gp);
	gp.time_budget_ms = 5;
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err), -EINVAL);
	assert_string_equal(err.field, "time_budget_ms");
	/* A clock moving 10 ms per reading and a 25 ms budget: two checks pass. */
	gp.clock_ms = fake_clock;
	gp.time_budget_ms = 25;
	fake_now = 0;
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, &st, &err), 0);
	assert_int_equal(st.stopped_by_time, 1);
	assert_int_equal(st.generations, 2);
	assert_true(delta_plan_within_budget(p, x));
	/* The full search. Links (0,1), (0,2), (1,2); pod 1 splits its 4 ports
	 * between t0 and t2. x01 = 3: t0 1 ms, t2 at 2 on 1 circuit 2 ms -> 4.
	 * x01 = 2: t0 1.5 ms, t2 at 2.5 on 2 circuits 1 ms -> 3.5 (optimum).
	 * x01 = 1: t0 3 ms, t2 at 4 -> 5. t1 needs one circuit; fewest ports. */
	delta_ga_defaults(&gp);
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, &st, &err), 0);
	assert_int_equal(x[0], 2);
	assert_int_equal(x[1], 1);
	assert_int_equal(x[2], 2);
	assert_float_equal(r.makespan_ms, 3.5, 1e-9);
	delta_problem_free(p);

	/* Pod 0 cannot give one circuit to each of its two pairs. */
	p = make(3, tight, t, 3, d, 1);
	delta_ga_defaults(&gp);
	assert_int_equal(delta_fast(p, &gp, NULL, NULL, x, &r, NULL, &err), -ENOSPC);
	assert_string_equal(err.field, "port_budget[0]");
	assert_int_equal(delta_baseline_plan(p, DELTA_PROP_ALLOC, x, &err), -ENOSPC);
	delta_problem_free(p);
}

static void count_call(void *arg, size_t i)
{
	int *hits = arg;
	__atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

static void test_pthread_pool(void **state)
{
	/* Every index exactly once, for several runs on one pool, including
	 * empty and single-item runs; threads <= 1 gives a serial pool. */
	static int hits[1000];
	for (int threads = 1; threads <= 3; threads++) {
		struct ocs_pool_pthread *pp = ocs_pool_pthread_new(threads);
		assert_non_null(pp);
		const struct ocs_pool *pool = ocs_pool_pthread_pool(pp);
		size_t sizes[] = {0, 1, 7, 1000, 3};
		for (size_t r = 0; r < sizeof(sizes) / sizeof(sizes[0]); r++) {
			memset(hits, 0, sizeof(hits));
			ocs_pool_run(pool, count_call, hits, sizes[r]);
			for (size_t i = 0; i < 1000; i++)
				assert_int_equal(hits[i], i < sizes[r] ? 1 : 0);
		}
		ocs_pool_pthread_free(pp);
	}
	memset(hits, 0, sizeof(hits));
	ocs_pool_run(NULL, count_call, hits, 5); /* NULL pool: serial */
	assert_int_equal(hits[4], 1);
	assert_int_equal(hits[5], 0);
	ocs_pool_pthread_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bound_chain),	     cmocka_unit_test(test_bound_overlap),
		cmocka_unit_test(test_bound_time_separated), cmocka_unit_test(test_baselines_star),
		cmocka_unit_test(test_ga_params_and_budget), cmocka_unit_test(test_ga_cancel),
		cmocka_unit_test(test_pthread_pool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
