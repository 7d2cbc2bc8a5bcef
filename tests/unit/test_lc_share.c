/*
 * test_lc_share.c - unit tests of planning around live jobs' leaf-spine
 * usage (lc_options.usage, lc_validate_usage, lc_usage_from_assignment in
 * solvers/leafcentric.h) on hand-checkable requests: two jobs on one leaf
 * with tau 2 and tau 1, a leaf whose links to one spine are full, a leaf
 * without uplinks left (unplaced), contention that cannot be avoided
 * (reported), live jobs' own contention counted in the figures, the
 * pod-centric baseline's figures, bad usage. Loads are
 * recounted here from the plans' assignments. Random sequences of jobs
 * live in tests/property/test_leaf_share_property.c.
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

/* 4 pods, k_leaf 8, k_spine 4, tau 2: H = 4, leaves 2p and 2p+1 in pod p. */
static struct ocs_fabric lab2(void)
{
	return (struct ocs_fabric){.pods = 4,
				   .k_leaf = 8,
				   .k_spine = 4,
				   .tau = 2,
				   .k_ocs = 4,
				   .wiring = OCS_WIRING_CROSS};
}

/* 4 pods, k_leaf 4, k_spine 2, tau 1: H = 4, leaves 2p and 2p+1 in pod p. */
static struct ocs_fabric lab1(void)
{
	return (struct ocs_fabric){.pods = 4,
				   .k_leaf = 4,
				   .k_spine = 2,
				   .tau = 1,
				   .k_ocs = 4,
				   .wiring = OCS_WIRING_CROSS};
}

/* Adds a plan's assignment to load[leaf][h] (H = 4). */
static void add_load(int load[][4], const struct lc_plan *p)
{
	for (size_t i = 0; i < p->n_assignment; i++) {
		load[p->assignment[i].a][p->assignment[i].h] += p->assignment[i].links;
		load[p->assignment[i].b][p->assignment[i].h] += p->assignment[i].links;
	}
}

static int placed_links(const struct lc_plan *p)
{
	int n = 0;

	for (size_t i = 0; i < p->n_assignment; i++)
		n += p->assignment[i].links;
	return n;
}

/*
 * Job 1 puts 4 links from leaf 0 to leaf 2, job 2 4 links from leaf 0 to
 * leaf 4 on the same leaf. Leaf 0 then uses all 8 uplinks: exactly tau = 2 at
 * every spine when job 2 counts job 1's usage. Job 1's cross-connects stay.
 */
static void test_two_jobs_share_a_leaf_tau2(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_demand job1[] = {{0, 2, 4}}, job2[] = {{4, 0, 4}};
	struct lc_options opt = {.realize = true};
	struct lc_plan *p1 = NULL, *p2 = NULL;
	struct lc_leaf_usage *u = NULL;
	size_t n_u = 0;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, job1, 1, NULL, 0, &opt, &p1), 0);
	assert_int_equal(lc_usage_from_assignment(p1->assignment, p1->n_assignment, &u, &n_u), 0);
	opt.usage = u;
	opt.n_usage = n_u;
	assert_int_equal(lc_plan(&f, job2, 1, p1->xcs, p1->n_xcs, &opt, &p2), 0);
	add_load(load, p1);
	add_load(load, p2);
	for (int h = 0; h < 4; h++)
		assert_int_equal(load[0][h], 2);
	assert_int_equal(placed_links(p2), 4);
	assert_int_equal(p2->n_unplaced, 0);
	assert_true(p2->contention_free);
	assert_true(p2->max_contention == 1.0); /* leaf 0: 2 links of 2 at every spine */
	assert_int_equal(p2->contended_leaves, 0);
	/* Pinned cross-connects are kept, first and unchanged. */
	assert_int_equal(p2->changed_existing, 0);
	assert_true(p2->n_xcs == p1->n_xcs + 8);
	assert_memory_equal(p2->xcs, p1->xcs, p1->n_xcs * sizeof(*p1->xcs));
	assert_int_equal(p2->n_unrealized, 0);
	assert_int_equal(l2_check(&f, p2->xcs, p2->n_xcs, NULL, 0), 0);
	free(u);
	lc_plan_free(p1);
	lc_plan_free(p2);
}

/* tau 1: jobs of 2 links each on leaf 0 take the 2 spines the other left. */
static void test_two_jobs_share_a_leaf_tau1(void **state)
{
	struct ocs_fabric f = lab1();
	const struct lc_demand job1[] = {{0, 2, 2}}, job2[] = {{0, 4, 1}, {0, 6, 1}};
	struct lc_options opt = {.realize = true};
	struct lc_plan *p1 = NULL, *p2 = NULL;
	struct lc_leaf_usage *u = NULL;
	size_t n_u = 0;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, job1, 1, NULL, 0, &opt, &p1), 0);
	assert_int_equal(lc_usage_from_assignment(p1->assignment, p1->n_assignment, &u, &n_u), 0);
	/* Leaf 0 and leaf 2 each use two spines once. */
	assert_int_equal(n_u, 4);
	opt.usage = u;
	opt.n_usage = n_u;
	assert_int_equal(lc_plan(&f, job2, 2, p1->xcs, p1->n_xcs, &opt, &p2), 0);
	add_load(load, p1);
	add_load(load, p2);
	for (int h = 0; h < 4; h++)
		assert_int_equal(load[0][h], 1);
	assert_true(p2->contention_free);
	assert_true(p2->max_contention == 1.0);
	assert_int_equal(p2->changed_existing, 0);
	assert_int_equal(l2_check(&f, p2->xcs, p2->n_xcs, NULL, 0), 0);
	free(u);
	lc_plan_free(p1);
	lc_plan_free(p2);
}

/*
 * Leaf 0's links to spine 1 are full (a live job's 2 paths): 6 new links
 * from leaf 0 to leaf 2 go 2 by 2 over spines 0, 2 and 3, nothing on 1.
 * With one path on spine 1, 7 new links: spine 1 takes exactly one more.
 */
static void test_leaf_full_at_one_spine(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage full[] = {{0, 1, 2}}, half[] = {{0, 1, 1}};
	const struct lc_demand six[] = {{0, 2, 6}}, seven[] = {{2, 0, 7}};
	const struct lc_spine_links expect[] = {{0, 2, 0, 2}, {0, 2, 2, 2}, {0, 2, 3, 2}};
	struct lc_options opt = {.realize = true, .usage = full, .n_usage = 1};
	struct lc_plan *p = NULL;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, six, 1, NULL, 0, &opt, &p), 0);
	assert_int_equal(p->n_assignment, 3);
	assert_memory_equal(p->assignment, expect, sizeof(expect));
	assert_true(p->contention_free);
	assert_int_equal(l2_check(&f, p->xcs, p->n_xcs, NULL, 0), 0);
	lc_plan_free(p);

	opt.usage = half;
	assert_int_equal(lc_plan(&f, seven, 1, NULL, 0, &opt, &p), 0);
	load[0][1] = 1;
	add_load(load, p);
	for (int h = 0; h < 4; h++)
		assert_int_equal(load[0][h], 2);
	assert_true(p->contention_free);
	assert_int_equal(p->n_unplaced, 0);
	lc_plan_free(p);
}

/*
 * Leaf 0's 8 uplinks are all in use: its pair goes to unplaced whole, the
 * other pair of the job is planned. With 6 in use, 2 of 3 links fit.
 */
static void test_leaf_without_room_is_unplaced(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage all[] = {{0, 0, 2}, {0, 1, 2}, {0, 2, 2}, {0, 3, 2}};
	const struct lc_leaf_usage most[] = {{0, 0, 2}, {0, 1, 2}, {0, 2, 2}};
	const struct lc_demand d[] = {{1, 3, 2}, {2, 0, 3}};
	struct lc_options opt = {.usage = all, .n_usage = 4};
	struct lc_plan *p = NULL;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, d, 2, NULL, 0, &opt, &p), 0);
	assert_int_equal(p->n_unplaced, 1);
	assert_int_equal(p->unplaced[0].a, 0);
	assert_int_equal(p->unplaced[0].b, 2);
	assert_int_equal(p->unplaced[0].links, 3);
	assert_int_equal(placed_links(p), 2);
	for (size_t i = 0; i < p->n_assignment; i++)
		assert_true(p->assignment[i].a == 1 && p->assignment[i].b == 3);
	assert_false(p->contention_free); /* something is unplaced */
	assert_true(p->max_contention == 1.0);
	lc_plan_free(p);

	opt.usage = most;
	opt.n_usage = 3;
	assert_int_equal(lc_plan(&f, d, 2, NULL, 0, &opt, &p), 0);
	assert_int_equal(p->n_unplaced, 1);
	assert_int_equal(p->unplaced[0].links, 1);
	add_load(load, p);
	assert_int_equal(load[0][3], 2); /* the two that fit take the free spine */
	assert_true(p->max_contention == 1.0);
	lc_plan_free(p);
}

/*
 * Leaf 0 has room only at spine 0, leaf 2 none there: one link between
 * them cannot avoid contention. It is placed (the leaves have uplinks
 * left) and the contention reported, never hidden.
 */
static void test_unavoidable_contention_is_reported(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage u[] = {{0, 1, 2}, {0, 2, 2}, {0, 3, 2}, {2, 0, 2}};
	const struct lc_demand d[] = {{0, 2, 1}};
	struct lc_options opt = {.usage = u, .n_usage = 4};
	struct lc_plan *p = NULL;

	assert_int_equal(lc_plan(&f, d, 1, NULL, 0, &opt, &p), 0);
	assert_int_equal(p->n_unplaced, 0);
	assert_int_equal(placed_links(p), 1);
	assert_true(p->max_contention == 1.5);
	assert_int_equal(p->contended_leaves, 1);
	assert_false(p->contention_free);
	lc_plan_free(p);
}

/*
 * Exactly one contention-free plan: leaf 0 has room only at spine 2, leaf
 * 2 at spines 1 and 2, leaf 4 at spines 1 and 2 (2 each). So 0-2 must take
 * spine 2 twice, which fills leaf 2 there, and 2-4 spine 1 twice.
 */
static void test_only_contention_free_plan_is_found(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage u[] = {{0, 0, 2}, {0, 1, 2}, {0, 3, 2}, {2, 0, 2},
					  {2, 3, 2}, {4, 0, 2}, {4, 3, 2}};
	const struct lc_demand d[] = {{2, 4, 2}, {0, 2, 2}};
	const struct lc_spine_links expect[] = {{0, 2, 2, 2}, {2, 4, 1, 2}};
	struct lc_options opt = {.usage = u, .n_usage = 7};
	struct lc_plan *p = NULL;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, d, 2, NULL, 0, &opt, &p), 0);
	for (size_t i = 0; i < 7; i++)
		load[u[i].leaf][u[i].spine] += u[i].links;
	add_load(load, p);
	for (int l = 0; l < 8; l++)
		for (int h = 0; h < 4; h++)
			assert_true(load[l][h] <= 2);
	assert_true(p->contention_free);
	assert_int_equal(p->n_assignment, 2);
	assert_memory_equal(p->assignment, expect, sizeof(expect));
	lc_plan_free(p);
}

/*
 * Live jobs already contended at leaf 7 (3 paths on spine 0): the figures
 * are over the combined load, so they report it although the new job,
 * elsewhere, adds none.
 */
static void test_live_contention_is_counted(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage u[] = {{7, 0, 3}, {0, 0, 2}};
	const struct lc_demand d[] = {{0, 2, 6}};
	struct lc_options opt = {.usage = u, .n_usage = 2};
	struct lc_plan *p = NULL;
	int load[8][4] = {{0}};

	assert_int_equal(lc_plan(&f, d, 1, NULL, 0, &opt, &p), 0);
	add_load(load, p);
	assert_int_equal(load[0][0], 0);
	for (int h = 1; h < 4; h++)
		assert_int_equal(load[0][h], 2);
	assert_true(p->max_contention == 1.5);
	assert_int_equal(p->contended_leaves, 1);
	assert_false(p->contention_free);
	assert_int_equal(p->n_unplaced, 0);
	lc_plan_free(p);
}

/* The baseline stays blind to leaves but reports the combined contention. */
static void test_pod_centric_counts_usage(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage u[] = {{0, 0, 2}, {0, 1, 2}, {0, 2, 2}, {0, 3, 1}};
	const struct lc_demand d[] = {{0, 2, 2}};
	struct lc_options opt = {.usage = u, .n_usage = 4};
	struct lc_plan *p = NULL;
	int load[8][4] = {{0}};

	assert_int_equal(pc_plan(&f, d, 1, NULL, 0, &opt, &p), 0);
	/* One uplink left at leaf 0: one link placed, one unplaced. */
	assert_int_equal(placed_links(p), 1);
	assert_int_equal(p->n_unplaced, 1);
	for (size_t i = 0; i < 4; i++)
		load[u[i].leaf][u[i].spine] += u[i].links;
	add_load(load, p);
	{
		int max = 0;

		for (int l = 0; l < 8; l++)
			for (int h = 0; h < 4; h++)
				max = load[l][h] > max ? load[l][h] : max;
		assert_true(p->max_contention == max / 2.0);
	}
	lc_plan_free(p);
}

static void test_usage_from_assignment(void **state)
{
	const struct lc_spine_links a[] = {{0, 2, 1, 2}, {0, 2, 0, 1}, {0, 4, 1, 1}, {2, 5, 3, 0}};
	const struct lc_leaf_usage expect[] = {
		{0, 0, 1}, {0, 1, 3}, {2, 0, 1}, {2, 1, 2}, {4, 1, 1}};
	const struct lc_spine_links bad[] = {{0, 2, -1, 1}};
	struct lc_leaf_usage *u = (struct lc_leaf_usage *)a;
	size_t n = 99;

	assert_int_equal(lc_usage_from_assignment(a, 4, &u, &n), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(u, expect, sizeof(expect));
	free(u);
	assert_int_equal(lc_usage_from_assignment(NULL, 0, &u, &n), 0);
	assert_non_null(u);
	assert_int_equal(n, 0);
	free(u);
	assert_int_equal(lc_usage_from_assignment(bad, 1, &u, &n), -EINVAL);
	assert_null(u);
	assert_int_equal(n, 0);
}

static void test_validate_usage(void **state)
{
	struct ocs_fabric f = lab2();
	const struct lc_leaf_usage u[] = {
		{8, 0, 1},			  /* leaf out of range */
		{0, 4, 1},			  /* spine out of range */
		{1, 0, -1},			  /* negative */
		{3, 0, 5},  {3, 1, 3}, {3, 2, 1}, /* leaf 3 over its 8 uplinks at [5] */
		{2, 0, 9},			  /* one entry over k_leaf */
		{1, 1, 2},  {1, 1, 2},		  /* duplicates add up, above tau is fine */
	};
	const struct lc_demand d[] = {{0, 2, 1}};
	struct lc_problem p[8];
	struct lc_options opt = {.usage = u, .n_usage = 9};
	struct lc_plan *plan = (struct lc_plan *)&f;

	assert_int_equal(lc_validate_usage(&f, u, 9, p, 8), 5);
	assert_string_equal(p[0].field, "leaf_spine_usage[0]");
	assert_string_equal(p[0].reason, "leaf = 8 out of range 0..7");
	assert_string_equal(p[1].field, "leaf_spine_usage[1]");
	assert_string_equal(p[1].reason, "spine = 4 out of range 0..3");
	assert_string_equal(p[2].field, "leaf_spine_usage[2]");
	assert_string_equal(p[2].reason, "links = -1 is negative");
	assert_string_equal(p[3].field, "leaf_spine_usage[5]");
	assert_string_equal(p[3].reason, "leaf 3 uses 9 uplinks, more than its k_leaf = 8");
	assert_string_equal(p[4].field, "leaf_spine_usage[6]");
	assert_int_equal(lc_validate_usage(&f, u, 9, NULL, 0), 5);
	assert_int_equal(lc_validate_usage(&f, u + 7, 2, NULL, 0), 0);
	assert_int_equal(lc_validate_usage(&f, NULL, 0, NULL, 0), 0);
	assert_int_equal(lc_validate_usage(&f, NULL, 3, p, 8), 1);
	assert_string_equal(p[0].field, "leaf_spine_usage[0]");
	/* Plans refuse usage that does not validate. */
	assert_int_equal(lc_plan(&f, d, 1, NULL, 0, &opt, &plan), -EINVAL);
	assert_null(plan);
	opt.usage = NULL;
	assert_int_equal(lc_plan(&f, d, 1, NULL, 0, &opt, &plan), -EINVAL);
	assert_null(plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_jobs_share_a_leaf_tau2),
		cmocka_unit_test(test_two_jobs_share_a_leaf_tau1),
		cmocka_unit_test(test_leaf_full_at_one_spine),
		cmocka_unit_test(test_leaf_without_room_is_unplaced),
		cmocka_unit_test(test_unavoidable_contention_is_reported),
		cmocka_unit_test(test_only_contention_free_plan_is_found),
		cmocka_unit_test(test_live_contention_is_counted),
		cmocka_unit_test(test_pod_centric_counts_usage),
		cmocka_unit_test(test_usage_from_assignment),
		cmocka_unit_test(test_validate_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
