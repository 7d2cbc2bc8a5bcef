/*
 * test_delta_sim.c - hand-checkable DAGs for the DELTA simulator contract
 * (delta_sim.h): a chain, tasks competing on one direction, a NIC-bound
 * task, independent directions, rate changes at a start, critical-path
 * tie-breaking, and plans without circuits. B = 8 Gb/s = 1e6 bytes/ms so
 * every expected time below is worked out by hand in the comment beside it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "delta_dag.h"
#include "delta_sim.h"

#define MB 1e6

static const int budget3[3] = {8, 8, 8};

static struct delta_problem *make(const struct delta_task *t, int nt, const struct delta_dep *d,
				  int nd)
{
	struct delta_dag dag = {.pods = 3,
				.port_budget = budget3,
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

static void test_chain(void **state)
{
	/* t0: 2 MB at 1 MB/ms -> 0..2; +1 ms; t1: 3 MB -> 3..6. */
	struct delta_task t[] = {{0, 1, 1, 2 * MB, 0}, {1, 0, 1, 3 * MB, 0}};
	struct delta_dep d[] = {{0, 1, 1.0}};
	struct delta_problem *p = make(t, 2, d, 1);
	int x[] = {1};
	double s[2], f[2];
	struct delta_sim_result r;
	assert_int_equal(delta_problem_n_links(p), 1);
	assert_int_equal(delta_simulate(p, x, &r, s, f), 0);
	assert_float_equal(s[0], 0, 1e-9);
	assert_float_equal(f[0], 2, 1e-9);
	assert_float_equal(s[1], 3, 1e-9);
	assert_float_equal(f[1], 6, 1e-9);
	assert_float_equal(r.makespan_ms, 6, 1e-9);
	assert_float_equal(r.critical_comm_ms, 5,
			   1e-9); /* durations 2 + 3; the delay is not comm */
	assert_int_equal(r.critical_tasks, 2);
	assert_float_equal(r.nct, 1.0, 1e-12);
	delta_problem_free(p);
}

static void test_two_compete(void **state)
{
	/* One circuit, 2 flows: 0.5 MB/ms each. t0 (2 MB) ends at 4, t1 has
	 * 2 MB left, alone at 1 MB/ms: ends at 6. Ideal: t1 takes 4 -> nct 1.5. */
	struct delta_task t[] = {{0, 1, 1, 2 * MB, 0}, {0, 1, 1, 4 * MB, 0}};
	struct delta_problem *p = make(t, 2, NULL, 0);
	double s[2], f[2];
	struct delta_sim_result r;
	int x1[] = {1}, x2[] = {2};
	assert_int_equal(delta_simulate(p, x1, &r, s, f), 0);
	assert_float_equal(f[0], 4, 1e-9);
	assert_float_equal(f[1], 6, 1e-9);
	assert_float_equal(r.makespan_ms, 6, 1e-9);
	assert_float_equal(r.critical_comm_ms, 6, 1e-9);
	assert_float_equal(r.nct, 1.5, 1e-9);
	/* Two circuits: no sharing, t0 2 ms, t1 4 ms. */
	assert_int_equal(delta_simulate(p, x2, &r, s, f), 0);
	assert_float_equal(f[0], 2, 1e-9);
	assert_float_equal(f[1], 4, 1e-9);
	assert_float_equal(r.nct, 1.0, 1e-9);
	delta_problem_free(p);
}

static void test_nic_bound(void **state)
{
	/* F = 2, 4 MB. x = 4: each flow capped at B -> 2 MB/ms -> 2 ms.
	 * x = 1: each flow 0.5 MB/ms -> 1 MB/ms -> 4 ms, nct 2. */
	struct delta_task t[] = {{0, 1, 2, 4 * MB, 0}};
	struct delta_problem *p = make(t, 1, NULL, 0);
	struct delta_sim_result r;
	int x4[] = {4}, x1[] = {1}, x2[] = {2};
	assert_int_equal(delta_simulate(p, x4, &r, NULL, NULL), 0);
	assert_float_equal(r.makespan_ms, 2, 1e-9);
	assert_float_equal(r.nct, 1, 1e-9);
	assert_int_equal(delta_simulate(p, x2, &r, NULL, NULL), 0);
	assert_float_equal(r.makespan_ms, 2, 1e-9);
	assert_int_equal(delta_simulate(p, x1, &r, NULL, NULL), 0);
	assert_float_equal(r.makespan_ms, 4, 1e-9);
	assert_float_equal(r.nct, 2, 1e-9);
	delta_problem_free(p);
}

static void test_directions_independent(void **state)
{
	/* 0->1 and 1->0 on one circuit: each direction has its own B. */
	struct delta_task t[] = {{0, 1, 1, 3 * MB, 0}, {1, 0, 1, 3 * MB, 0}};
	struct delta_problem *p = make(t, 2, NULL, 0);
	double f[2];
	struct delta_sim_result r;
	int x[] = {1};
	assert_int_equal(delta_simulate(p, x, &r, NULL, f), 0);
	assert_float_equal(f[0], 3, 1e-9);
	assert_float_equal(f[1], 3, 1e-9);
	delta_problem_free(p);
}

static void test_rate_change_at_start(void **state)
{
	/* t2 (0->2, 1 MB) ends at 1 and releases t1 (0->1, 1 MB). t0 (0->1,
	 * 3 MB) alone 0..1 moves 1 MB; shared 1..3 at 0.5 MB/ms: t1 ends at 3,
	 * t0 has 1 MB left, alone again: ends at 4. Critical: t0 only (4 ms)
	 * against 3 ms ideal. */
	struct delta_task t[] = {{0, 1, 1, 3 * MB, 0}, {0, 1, 1, 1 * MB, 0}, {0, 2, 1, 1 * MB, 0}};
	struct delta_dep d[] = {{2, 1, 0.0}};
	struct delta_problem *p = make(t, 3, d, 1);
	double s[3], f[3];
	struct delta_sim_result r;
	int x[] = {1, 1};
	assert_int_equal(delta_problem_n_links(p), 2);
	assert_int_equal(delta_simulate(p, x, &r, s, f), 0);
	assert_float_equal(s[1], 1, 1e-9);
	assert_float_equal(f[1], 3, 1e-9);
	assert_float_equal(f[0], 4, 1e-9);
	assert_float_equal(r.makespan_ms, 4, 1e-9);
	assert_float_equal(r.critical_comm_ms, 4, 1e-9);
	assert_float_equal(r.nct, 4.0 / 3.0, 1e-9);
	delta_problem_free(p);
}

static void test_critical_predecessor(void **state)
{
	/* t0 (0->1, 1 MB) 0..1, t1 (0->2, 3 MB) 0..3; t2 (1->2, 1 MB) waits for
	 * t0 + 5 = 6 and t1 + 1 = 4: starts at 6 (t0 decides), ends at 7.
	 * Critical path t2 <- t0: 1 + 1 = 2 ms. */
	struct delta_task t[] = {{0, 1, 1, 1 * MB, 0}, {0, 2, 1, 3 * MB, 0}, {1, 2, 1, 1 * MB, 0}};
	struct delta_dep d[] = {{0, 2, 5.0}, {1, 2, 1.0}};
	struct delta_problem *p = make(t, 3, d, 2);
	double s[3], f[3];
	struct delta_sim_result r;
	int x[] = {1, 1, 1};
	assert_int_equal(delta_simulate(p, x, &r, s, f), 0);
	assert_float_equal(s[2], 6, 1e-9);
	assert_float_equal(r.makespan_ms, 7, 1e-9);
	assert_float_equal(r.critical_comm_ms, 2, 1e-9);
	assert_int_equal(r.critical_tasks, 2);
	/* Tie: t1 + 3 = 6 as well -> lowest index (t0) still decides. */
	struct delta_dep d2[] = {{0, 2, 5.0}, {1, 2, 3.0}};
	struct delta_problem *q = make(t, 3, d2, 2);
	assert_int_equal(delta_simulate(q, x, &r, s, f), 0);
	assert_float_equal(r.critical_comm_ms, 2, 1e-9);
	/* t1 + 4 = 7 > 6: t1 decides, path t2 <- t1 = 1 + 3. */
	struct delta_dep d3[] = {{0, 2, 5.0}, {1, 2, 4.0}};
	struct delta_problem *u = make(t, 3, d3, 2);
	assert_int_equal(delta_simulate(u, x, &r, s, f), 0);
	assert_float_equal(s[2], 7, 1e-9);
	assert_float_equal(r.critical_comm_ms, 4, 1e-9);
	delta_problem_free(p);
	delta_problem_free(q);
	delta_problem_free(u);
}

static void test_release_and_zero_volume(void **state)
{
	/* t0 released at 2.5 ms, 1 MB -> ends 3.5; t1 of zero volume on a link
	 * without circuits finishes at its start (t0 + 0.5 = 4). */
	struct delta_task t[] = {{0, 1, 1, 1 * MB, 2.5}, {0, 2, 1, 0, 0}};
	struct delta_dep d[] = {{0, 1, 0.5}};
	struct delta_problem *p = make(t, 2, d, 1);
	double s[2], f[2];
	struct delta_sim_result r;
	int x[] = {1, 0};
	assert_int_equal(delta_simulate(p, x, &r, s, f), 0);
	assert_float_equal(s[0], 2.5, 1e-9);
	assert_float_equal(f[0], 3.5, 1e-9);
	assert_float_equal(s[1], 4, 1e-9);
	assert_float_equal(f[1], 4, 1e-9);
	assert_float_equal(r.makespan_ms, 4, 1e-9);
	assert_float_equal(r.critical_comm_ms, 1, 1e-9);
	delta_problem_free(p);
}

static void test_no_circuit_invalid(void **state)
{
	struct delta_task t[] = {{0, 1, 1, 1 * MB, 0}, {1, 2, 1, 1 * MB, 0}};
	struct delta_problem *p = make(t, 2, NULL, 0);
	struct delta_sim_result r;
	int x[] = {1, 0};
	assert_int_equal(delta_simulate(p, x, &r, NULL, NULL), -EDOM);
	delta_problem_free(p);
}

static void test_bad_dags(void **state)
{
	struct delta_task t[] = {{0, 1, 1, 1 * MB, 0}, {1, 2, 1, 1 * MB, 0}};
	struct delta_dep cyc[] = {{0, 1, 0}, {1, 0, 0}};
	struct delta_dag dag = {.pods = 3,
				.port_budget = budget3,
				.bandwidth_gbps = 8,
				.n_tasks = 2,
				.tasks = t,
				.n_deps = 2,
				.deps = cyc};
	struct delta_error err;
	assert_null(delta_problem_new(&dag, &err));
	assert_string_equal(err.field, "deps");
	dag.n_deps = 0;
	dag.bandwidth_gbps = 0;
	assert_null(delta_problem_new(&dag, &err));
	assert_string_equal(err.field, "bandwidth_gbps");
	dag.bandwidth_gbps = 8;
	struct delta_task bad[] = {{0, 1, 0, 1 * MB, 0}};
	dag.tasks = bad;
	dag.n_tasks = 1;
	assert_null(delta_problem_new(&dag, &err));
	assert_string_equal(err.field, "tasks[0].flows");
	struct delta_task self[] = {{2, 2, 1, 1 * MB, 0}};
	dag.tasks = self;
	assert_null(delta_problem_new(&dag, &err));
	assert_string_equal(err.field, "tasks[0].dst_pod");
	struct delta_task far[] = {{0, 3, 1, 1 * MB, 0}};
	dag.tasks = far;
	assert_null(delta_problem_new(&dag, &err));
	assert_string_equal(err.field, "tasks[0].dst_pod");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_two_compete),
		cmocka_unit_test(test_nic_bound),
		cmocka_unit_test(test_directions_independent),
		cmocka_unit_test(test_rate_change_at_start),
		cmocka_unit_test(test_critical_predecessor),
		cmocka_unit_test(test_release_and_zero_volume),
		cmocka_unit_test(test_no_circuit_invalid),
		cmocka_unit_test(test_bad_dags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
