/*
 * test_l2check.c - unit tests of the independent L2 symmetry checker
 * (solvers/l2check.c) on hand-built cross-connect sets for every wiring:
 * clean two-way circuits pass, and each kind of violation is caught and
 * named (range, cabling, doubled ports, one-way circuits, loops).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "l2check.h"

/* 3 pods, 4-port leaves and spines, tau 2: 2 groups; devices use ports 0..2 (6 for dual). */
static struct ocs_fabric small(enum ocs_wiring w)
{
	return (struct ocs_fabric){ .pods = 3, .k_leaf = 4, .k_spine = 4, .tau = 2, .k_ocs = 8,
				    .wiring = w };
}

static int check(enum ocs_wiring w, const struct ocs_xc *xcs, size_t n, struct l2_violation *v,
		 int max)
{
	struct ocs_fabric f = small(w);

	assert_int_equal(ocs_fabric_validate(&f, NULL, 0), 0);
	return l2_check(&f, xcs, n, v, max);
}

static void test_empty_passes(void **state)
{
	assert_int_equal(check(OCS_WIRING_STRAIGHT, NULL, 0, NULL, 0), 0);
}

static void test_two_way_circuits_pass(void **state)
{
	/* straight: device 2 of group 1 joins pods 0 and 1 both ways, device 0 pods 1 and 2. */
	const struct ocs_xc straight[] = { { 1, 2, 0, 1 }, { 1, 2, 1, 0 }, { 1, 0, 1, 2 },
					   { 1, 0, 2, 1 } };
	/* cross: device 2 in 0 -> out 1 and device 3 in 1 -> out 0 (pod 0 port 2 <-> pod 1 port 3). */
	const struct ocs_xc cross[] = { { 0, 2, 0, 1 }, { 0, 3, 1, 0 } };
	/* dual: device 1 joins pod 0's first port (in/out 0) to pod 2's second (in/out 5). */
	const struct ocs_xc dual[] = { { 0, 1, 0, 5 }, { 0, 1, 5, 0 } };

	assert_int_equal(check(OCS_WIRING_STRAIGHT, straight, 4, NULL, 0), 0);
	assert_int_equal(check(OCS_WIRING_CROSS, cross, 2, NULL, 0), 0);
	assert_int_equal(check(OCS_WIRING_DUAL, dual, 2, NULL, 0), 0);
}

static void test_one_way_circuit(void **state)
{
	const struct ocs_xc half[] = { { 0, 2, 0, 1 } };
	/* On a straight device, the other half must use the same device. */
	const struct ocs_xc wrong_device[] = { { 0, 2, 0, 1 }, { 0, 3, 1, 0 } };
	struct l2_violation v[4];

	assert_int_equal(check(OCS_WIRING_CROSS, half, 1, v, 4), 1);
	assert_memory_equal(&v[0].xc, &half[0], sizeof(half[0]));
	assert_non_null(strstr(v[0].reason, "one-way"));
	assert_int_equal(check(OCS_WIRING_STRAIGHT, wrong_device, 2, v, 4), 2);
	assert_non_null(strstr(v[0].reason, "one-way"));
	assert_non_null(strstr(v[1].reason, "one-way"));
	/* The same pair is a valid circuit under cross wiring. */
	assert_int_equal(check(OCS_WIRING_CROSS, wrong_device, 2, v, 4), 0);
}

static void test_three_cycle_is_one_way(void **state)
{
	/* 0 -> 1 -> 2 -> 0 on one straight device: everybody answers the wrong pod. */
	const struct ocs_xc cyc[] = { { 0, 0, 0, 1 }, { 0, 0, 1, 2 }, { 0, 0, 2, 0 } };
	struct l2_violation v[3];

	assert_int_equal(check(OCS_WIRING_STRAIGHT, cyc, 3, v, 3), 3);
	for (int i = 0; i < 3; i++)
		assert_non_null(strstr(v[i].reason, "answers"));
}

static void test_loop_back(void **state)
{
	const struct ocs_xc straight[] = { { 0, 0, 1, 1 } };
	const struct ocs_xc dual[] = { { 1, 0, 4, 4 } };
	struct l2_violation v[1];

	assert_int_equal(check(OCS_WIRING_STRAIGHT, straight, 1, v, 1), 1);
	assert_non_null(strstr(v[0].reason, "loops back"));
	assert_int_equal(check(OCS_WIRING_DUAL, dual, 1, v, 1), 1);
	assert_non_null(strstr(v[0].reason, "loops back"));
}

static void test_range_and_cabling(void **state)
{
	const struct ocs_xc bad[] = {
		{ 2, 0, 0, 1 },  /* group out of range */
		{ -1, 0, 0, 1 }, /* negative group */
		{ 0, 4, 0, 1 },  /* device out of range (straight: 4 per group) */
		{ 0, 0, 8, 1 },  /* input out of range */
		{ 0, 0, 1, -1 }, /* output out of range */
		{ 0, 1, 3, 0 },  /* input 3 exists but no pod 3 */
		{ 0, 1, 0, 7 },  /* output 7 exists but uncabled */
	};
	struct l2_violation v[8];

	assert_int_equal(check(OCS_WIRING_STRAIGHT, bad, 7, v, 8), 7);
	assert_non_null(strstr(v[0].reason, "group 2 out of range"));
	assert_non_null(strstr(v[1].reason, "group -1"));
	assert_non_null(strstr(v[2].reason, "device 4"));
	assert_non_null(strstr(v[3].reason, "out of range"));
	assert_non_null(strstr(v[4].reason, "out of range"));
	assert_non_null(strstr(v[5].reason, "input port 3 is not cabled"));
	assert_non_null(strstr(v[6].reason, "output port 7 is not cabled"));
	/* dual uses 2 ports per pod: input 5 is cabled there, 6 is not. */
	const struct ocs_xc dual_bad[] = { { 0, 0, 6, 0 } };
	assert_int_equal(check(OCS_WIRING_DUAL, dual_bad, 1, v, 8), 1);
	assert_non_null(strstr(v[0].reason, "input port 6"));
}

static void test_doubled_ports(void **state)
{
	/* Two cross-connects on input 0 of one device, and two on output 0 of another. */
	const struct ocs_xc twice[] = { { 0, 0, 0, 1 }, { 0, 0, 1, 0 }, { 0, 0, 0, 2 },
					{ 0, 1, 1, 0 }, { 0, 1, 2, 0 }, { 0, 1, 0, 1 } };
	struct l2_violation v[8];
	int n = check(OCS_WIRING_STRAIGHT, twice, 6, v, 8);
	int in_dup = 0, out_dup = 0;

	assert_true(n >= 2);
	for (int i = 0; i < n && i < 8; i++) {
		in_dup += strstr(v[i].reason, "input port 0 of device 0 already") != NULL;
		out_dup += strstr(v[i].reason, "output port 0 of device 1 already") != NULL;
	}
	assert_int_equal(in_dup, 1);
	assert_int_equal(out_dup, 1);
}

static void test_count_beyond_max_out(void **state)
{
	const struct ocs_xc half[] = { { 0, 0, 0, 1 }, { 0, 1, 0, 1 }, { 0, 2, 0, 1 } };
	struct l2_violation v[1];

	/* All violations are counted even when only the first fits. */
	assert_int_equal(check(OCS_WIRING_STRAIGHT, half, 3, v, 1), 3);
	assert_int_equal(check(OCS_WIRING_STRAIGHT, half, 3, NULL, 0), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_passes),
		cmocka_unit_test(test_two_way_circuits_pass),
		cmocka_unit_test(test_one_way_circuit),
		cmocka_unit_test(test_three_cycle_is_one_way),
		cmocka_unit_test(test_loop_back),
		cmocka_unit_test(test_range_and_cabling),
		cmocka_unit_test(test_doubled_ports),
		cmocka_unit_test(test_count_beyond_max_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
