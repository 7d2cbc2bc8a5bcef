/*
 * test_planners.c - the planner catalogue (solvers/planners.c): every id
 * has its entry, names are unique and found again, each kind of demand has
 * exactly one default, and the names and kinds are the ones the API and
 * ocsplan document (solvers/README.md, proto/ocs/v1/jobs.proto).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "planners.h"

static void test_entries(void **state)
{
	int defaults[2] = {0, 0};
	size_t n = 0;
	const struct ocs_planner *p;

	(void)state;
	for (size_t i = 0; (p = ocs_planner_at(i)) != NULL; i++) {
		n++;
		assert_int_equal(p->id, i);
		assert_non_null(p->name);
		assert_non_null(p->summary);
		assert_true(p->demand == OCS_PLANNER_LEAF_DEMAND ||
			    p->demand == OCS_PLANNER_PARALLELISM);
		assert_ptr_equal(ocs_planner_find(p->name), p);
		defaults[p->demand] += p->is_default;
	}
	assert_int_equal(n, OCS_PLANNER_COUNT);
	assert_int_equal(defaults[OCS_PLANNER_LEAF_DEMAND], 1);
	assert_int_equal(defaults[OCS_PLANNER_PARALLELISM], 1);
	assert_null(ocs_planner_at(OCS_PLANNER_COUNT));
}

static void test_lookups(void **state)
{
	static const struct {
		const char *name;
		enum ocs_planner_id id;
		enum ocs_planner_demand demand;
	} documented[] = {
		{"leaf-centric", OCS_PLANNER_LEAF_CENTRIC, OCS_PLANNER_LEAF_DEMAND},
		{"pod-centric", OCS_PLANNER_POD_CENTRIC, OCS_PLANNER_LEAF_DEMAND},
		{"delta-fast", OCS_PLANNER_DELTA_FAST, OCS_PLANNER_PARALLELISM},
		{"prop-alloc", OCS_PLANNER_PROP_ALLOC, OCS_PLANNER_PARALLELISM},
		{"sqrt-alloc", OCS_PLANNER_SQRT_ALLOC, OCS_PLANNER_PARALLELISM},
		{"iter-halve", OCS_PLANNER_ITER_HALVE, OCS_PLANNER_PARALLELISM},
	};

	(void)state;
	assert_int_equal(sizeof(documented) / sizeof(documented[0]), OCS_PLANNER_COUNT);
	for (size_t i = 0; i < OCS_PLANNER_COUNT; i++) {
		const struct ocs_planner *p = ocs_planner_find(documented[i].name);

		assert_non_null(p);
		assert_int_equal(p->id, documented[i].id);
		assert_int_equal(p->demand, documented[i].demand);
	}
	assert_string_equal(ocs_planner_default(OCS_PLANNER_LEAF_DEMAND)->name, "leaf-centric");
	assert_string_equal(ocs_planner_default(OCS_PLANNER_PARALLELISM)->name, "delta-fast");
	assert_null(ocs_planner_find("Leaf-Centric"));
	assert_null(ocs_planner_find(""));
	assert_null(ocs_planner_find(NULL));
	assert_string_equal(ocs_planner_demand_name(OCS_PLANNER_LEAF_DEMAND), "leaf_demand");
	assert_string_equal(ocs_planner_demand_name(OCS_PLANNER_PARALLELISM), "parallelism");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries),
		cmocka_unit_test(test_lookups),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
