/*
 * test_lc_planner.c - unit tests of the planning API (solvers/leafcentric.c,
 * leafcentric_request.c, realize.c) on hand-made requests: validation messages, a non-power-of-two
 * H, pod-centric polarization next to leaf-centric, pinned ports exhausting
 * a spine (unplaced demand reported, never dropped), determinism and
 * realization input checks. The generated-instance guarantees live in
 * tests/property/test_lc_property.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "l2check.h"
#include "leafcentric.h"

/* 4 pods, k_leaf 8, k_spine 4, tau 2: H = 4, 2 leaves per pod (leaves 0..7). */
static struct ocs_fabric lab(enum ocs_wiring w)
{
	return (struct ocs_fabric){.pods = 4,
				   .k_leaf = 8,
				   .k_spine = 4,
				   .tau = 2,
				   .k_ocs = w == OCS_WIRING_DUAL ? 8 : 4,
				   .wiring = w};
}

static void test_validate_names_fields(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_CROSS);
	const struct lc_demand d[] = {
		{0, 1, 1},	       /* same pod */
		{0, 8, 1},	       /* b out of range */
		{2, 2, 1},	       /* same leaf */
		{0, 2, -4},	       /* negative */
		{0, 2, 5},  {4, 0, 4}, /* leaf 0 over its 8 uplinks */
		{2, 0, 1},	       /* pair 0-2 again */
	};
	struct lc_problem p[16];
	int n = lc_validate(&f, d, 7, NULL, 0, p, 16);

	assert_int_equal(n, 6);
	assert_string_equal(p[0].field, "demand[0]");
	assert_string_equal(p[0].reason, "leaves 0 and 1 are both in pod 0");
	assert_string_equal(p[1].field, "demand[1]");
	assert_non_null(strstr(p[1].reason, "leaf b = 8 out of range 0..7"));
	assert_string_equal(p[2].field, "demand[2]");
	assert_string_equal(p[3].field, "demand[3]");
	assert_non_null(strstr(p[3].reason, "negative"));
	assert_string_equal(p[4].field, "demand[5]");
	assert_non_null(strstr(p[4].reason, "leaf 0 needs 9 uplinks"));
	assert_string_equal(p[5].field, "demand[6]");
	assert_non_null(strstr(p[5].reason, "already appear as a pair in demand[4]"));
	/* Count is complete even without room to write. */
	assert_int_equal(lc_validate(&f, d, 7, NULL, 0, NULL, 0), 6);
	/* Plans refuse what does not validate. */
	struct lc_plan *plan = (struct lc_plan *)&f;
	assert_int_equal(lc_plan(&f, d, 7, NULL, 0, NULL, &plan), -EINVAL);
	assert_null(plan);
}

static void test_non_power_of_two_h(void **state)
{
	/* k_leaf 6, tau 2: H = 3. Leaf 0 sends all 6 uplinks to pod 1's leaves. */
	struct ocs_fabric f = {.pods = 3,
			       .k_leaf = 6,
			       .k_spine = 4,
			       .tau = 2,
			       .k_ocs = 3,
			       .wiring = OCS_WIRING_CROSS};
	const struct lc_demand d[] = {{0, 2, 3}, {0, 3, 3}, {1, 4, 6}, {2, 5, 2}};
	struct lc_options opt = {.realize = true};
	struct lc_plan *p = NULL;
	int load[6][3] = {{0}};

	assert_int_equal(lc_plan(&f, d, 4, NULL, 0, &opt, &p), 0);
	for (size_t i = 0; i < p->n_assignment; i++) {
		load[p->assignment[i].a][p->assignment[i].h] += p->assignment[i].links;
		load[p->assignment[i].b][p->assignment[i].h] += p->assignment[i].links;
	}
	/* Six uplinks over three spines, two each: exactly tau per spine. */
	for (int h = 0; h < 3; h++) {
		assert_int_equal(load[0][h], 2);
		assert_int_equal(load[1][h], 2);
	}
	assert_true(p->max_contention <= 1.0);
	assert_int_equal(p->n_unplaced, 0);
	assert_int_equal(p->n_unrealized, 0);
	assert_int_equal(l2_check(&f, p->xcs, p->n_xcs, NULL, 0), 0);
	lc_plan_free(p);
}

static void test_pod_centric_polarizes(void **state)
{
	/*
	 * tau 1, H 4, 4 leaves per pod. Pod-centric spreads each pod pair's
	 * links over spines from a start fixed by the pods: pair (0,1) puts
	 * 0-4 on spine 1 and 0-5 on spine 2, pair (0,2) puts 0-9 on spine 2
	 * again. Leaf-centric finds three distinct spines for leaf 0.
	 */
	struct ocs_fabric f = {.pods = 4,
			       .k_leaf = 4,
			       .k_spine = 4,
			       .tau = 1,
			       .k_ocs = 4,
			       .wiring = OCS_WIRING_CROSS};
	const struct lc_demand d[] = {{0, 4, 1}, {0, 5, 1}, {0, 9, 1}, {1, 8, 1}};
	struct lc_plan *lc = NULL, *pc = NULL;

	assert_int_equal(lc_plan(&f, d, 4, NULL, 0, NULL, &lc), 0);
	assert_int_equal(pc_plan(&f, d, 4, NULL, 0, NULL, &pc), 0);
	assert_true(lc->max_contention <= 1.0);
	assert_int_equal(lc->contended_leaves, 0);
	assert_true(pc->max_contention == 2.0);
	assert_int_equal(pc->contended_leaves, 1);
	lc_plan_free(lc);
	lc_plan_free(pc);
}

static void test_pinned_ports_exhaust_a_spine(void **state)
{
	/* 2 pods, 1 group (k_leaf 2, tau 2), 2 leaves per pod, k_spine 4. */
	struct ocs_fabric f = {.pods = 2,
			       .k_leaf = 2,
			       .k_spine = 4,
			       .tau = 2,
			       .k_ocs = 2,
			       .wiring = OCS_WIRING_CROSS};
	const struct lc_demand first[] = {{0, 2, 2}, {1, 3, 1}};
	const struct lc_demand second[] = {{1, 3, 1}};
	struct lc_options opt = {.realize = true};
	struct lc_plan *p1 = NULL, *p2 = NULL;

	assert_int_equal(lc_plan(&f, first, 2, NULL, 0, &opt, &p1), 0);
	assert_int_equal(p1->n_xcs, 6);
	/* The first plan holds 3 of pod 0's 4 spine ports: one circuit still fits. */
	assert_int_equal(lc_plan(&f, second, 1, p1->xcs, p1->n_xcs, &opt, &p2), 0);
	assert_int_equal(p2->n_unplaced, 0);
	assert_int_equal(p2->changed_existing, 0);
	assert_int_equal(p2->n_xcs, 8);
	assert_memory_equal(p2->xcs, p1->xcs, 6 * sizeof(struct ocs_xc));
	assert_int_equal(l2_check(&f, p2->xcs, p2->n_xcs, NULL, 0), 0);
	/* Now every port is pinned: the demand is reported unplaced, not dropped. */
	{
		struct lc_plan *p3 = NULL;

		assert_int_equal(lc_plan(&f, second, 1, p2->xcs, p2->n_xcs, &opt, &p3), 0);
		assert_int_equal(p3->n_unplaced, 1);
		assert_int_equal(p3->unplaced[0].a, 1);
		assert_int_equal(p3->unplaced[0].b, 3);
		assert_int_equal(p3->unplaced[0].links, 1);
		assert_int_equal(p3->n_assignment, 0);
		assert_int_equal(p3->n_xcs, 8);
		lc_plan_free(p3);
	}
	lc_plan_free(p1);
	lc_plan_free(p2);
}

static void test_deterministic(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_STRAIGHT);
	const struct lc_demand d[] = {{0, 2, 3}, {1, 4, 4}, {3, 6, 4},
				      {5, 7, 8}, {0, 6, 2}, {2, 5, 0}};
	struct lc_options opt = {.realize = true};
	struct lc_plan *a = NULL, *b = NULL;

	assert_int_equal(lc_plan(&f, d, 6, NULL, 0, &opt, &a), 0);
	assert_int_equal(lc_plan(&f, d, 6, NULL, 0, &opt, &b), 0);
	assert_int_equal(a->n_assignment, b->n_assignment);
	assert_memory_equal(a->assignment, b->assignment, a->n_assignment * sizeof(*a->assignment));
	assert_int_equal(a->n_xcs, b->n_xcs);
	assert_memory_equal(a->xcs, b->xcs, a->n_xcs * sizeof(*a->xcs));
	lc_plan_free(a);
	lc_plan_free(b);
	lc_plan_free(NULL);
}

static void test_realize_rejects_bad_topology(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_DUAL);
	const struct rz_circuits same_pod[] = {{1, 1, 0, 1}};
	const struct rz_circuits bad_group[] = {{0, 1, 4, 1}};
	const struct rz_circuits too_many[] = {{0, 1, 0, 3}, {0, 2, 0, 3}};
	const struct rz_circuits ok[] = {{1, 0, 2, 4}}; /* i > j means the same pair */
	struct rz_result *r = NULL;

	assert_int_equal(rz_realize(&f, same_pod, 1, NULL, 0, NULL, 0, &r), -EINVAL);
	assert_int_equal(rz_realize(&f, bad_group, 1, NULL, 0, NULL, 0, &r), -EINVAL);
	assert_int_equal(rz_realize(&f, too_many, 2, NULL, 0, NULL, 0, &r), 0);
	/* Pod 0 has 4 spine ports in group 0 and is asked for 6: two are unrealized. */
	assert_int_equal(r->unrealized_circuits, 2);
	assert_int_equal(l2_check(&f, r->xcs, r->n_xcs, NULL, 0), 0);
	rz_result_free(r);
	assert_int_equal(rz_realize(&f, ok, 1, NULL, 0, NULL, 0, &r), 0);
	assert_int_equal(r->n_xcs, 8);
	assert_int_equal(r->n_unrealized, 0);
	assert_int_equal(l2_check(&f, r->xcs, r->n_xcs, NULL, 0), 0);
	rz_result_free(r);
	rz_result_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validate_names_fields),
		cmocka_unit_test(test_non_power_of_two_h),
		cmocka_unit_test(test_pod_centric_polarizes),
		cmocka_unit_test(test_pinned_ports_exhaust_a_spine),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_realize_rejects_bad_topology),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
