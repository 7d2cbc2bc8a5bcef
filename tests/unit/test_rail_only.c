/*
 * test_rail_only.c - the rail-only what-if model (solvers/rail_only.h)
 * against the Rail-only paper: every row of Table II (switches,
 * transceivers, cost and power savings for 32,768 and 65,536 GPUs at radix
 * 64, 128 and 256), the "117 to 234 million dollars" of section V-E, and the
 * 8.2 % / 11.2 % all-to-all slow-downs of section IV-B; plus the tier rule
 * and input validation.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rail_only.h"

/* Table II; the HB domain is the paper's DGX GH200 (256 GPUs). */
struct table2_row {
	int64_t gpus;
	int radix;
	int64_t switches_sota, switches_rail_only;
	int64_t transceivers_sota, transceivers_rail_only;
	int savings_cost_pct, savings_power_pct; /* as printed, whole percent */
};

static const struct table2_row table2[] = {
	{32768, 64, 2560, 1536, 196608, 131072, 38, 37},
	{32768, 128, 1280, 256, 196608, 65536, 77, 75},
	{32768, 256, 384, 128, 131072, 65536, 62, 60},
	{65536, 64, 5120, 3072, 393216, 262144, 38, 37},
	{65536, 128, 2560, 1536, 393216, 262144, 38, 37},
	{65536, 256, 1280, 256, 393216, 131072, 77, 75},
};

static struct rail_only_input paper_input(int64_t gpus, int radix)
{
	struct rail_only_input in = {
		.gpus = gpus, .radix = radix, .hb_domain = 256, .hb_gbps = 3600, .nic_gbps = 400};

	rail_only_default_prices(&in);
	return in;
}

static void test_table2(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(table2) / sizeof(table2[0]); i++) {
		const struct table2_row *row = &table2[i];
		struct rail_only_input in = paper_input(row->gpus, row->radix);
		struct rail_only_result r;
		double sota_cost, rail_cost, sota_power, rail_power;

		assert_int_equal(rail_only_evaluate(&in, &r), 0);
		assert_int_equal(r.rail_optimized.switches, row->switches_sota);
		assert_int_equal(r.rail_only.switches, row->switches_rail_only);
		assert_int_equal(r.rail_optimized.transceivers, row->transceivers_sota);
		assert_int_equal(r.rail_only.transceivers, row->transceivers_rail_only);
		/* Equations (4) and (5), priced per switch port, recomputed here. */
		sota_cost = 694.0 * (double)(row->switches_sota * row->radix) +
			    199.0 * (double)row->transceivers_sota;
		rail_cost = 694.0 * (double)(row->switches_rail_only * row->radix) +
			    199.0 * (double)row->transceivers_rail_only;
		sota_power = 18.0 * (double)(row->switches_sota * row->radix) +
			     9.0 * (double)row->transceivers_sota;
		rail_power = 18.0 * (double)(row->switches_rail_only * row->radix) +
			     9.0 * (double)row->transceivers_rail_only;
		assert_true(fabs(r.rail_optimized.cost_usd - sota_cost) < 1e-3);
		assert_true(fabs(r.rail_only.cost_usd - rail_cost) < 1e-3);
		assert_true(fabs(r.rail_optimized.power_w - sota_power) < 1e-3);
		assert_true(fabs(r.rail_only.power_w - rail_power) < 1e-3);
		/*
		 * The paper prints whole percents: every figure is within half a
		 * point. (Power 37 % is exactly 37.5 %: 90 W against 144 W per
		 * GPU; the paper rounds that one down.)
		 */
		assert_true(fabs(100 * r.savings_cost - row->savings_cost_pct) <= 0.5 + 1e-9);
		assert_true(fabs(100 * r.savings_power - row->savings_power_pct) <= 0.5 + 1e-9);
	}
}

static void test_issue_row_and_tiers(void **state)
{
	struct rail_only_input in = paper_input(32768, 128);
	struct rail_only_result r;

	(void)state;
	assert_int_equal(rail_only_evaluate(&in, &r), 0);
	/* 2 tiers of radix 128 reach 8,192 GPUs: the rail-optimized Clos needs 3. */
	assert_int_equal(r.rail_optimized.tiers, 3);
	/* A rail holds 32768 / 256 = 128 GPUs: one tier. */
	assert_int_equal(r.rail_only.tiers, 1);
	assert_int_equal(r.rail_optimized.switches, 1280);
	assert_int_equal(r.rail_only.switches, 256);
	assert_int_equal(r.rail_optimized.transceivers, 196608);
	assert_int_equal(r.rail_only.transceivers, 65536);
	assert_int_equal((int)lround(100 * r.savings_cost), 77);
	assert_int_equal((int)lround(100 * r.savings_power), 75);
	/* Section V-E: "117 to 234 million dollars" (32,768 at 128; 65,536 at 256). */
	assert_int_equal((int)((r.rail_optimized.cost_usd - r.rail_only.cost_usd) / 1e6), 117);
	in = paper_input(65536, 256);
	assert_int_equal(rail_only_evaluate(&in, &r), 0);
	assert_int_equal((int)((r.rail_optimized.cost_usd - r.rail_only.cost_usd) / 1e6), 234);

	assert_int_equal(rail_only_clos_capacity(64, 1), 64);
	assert_int_equal(rail_only_clos_capacity(64, 2), 2048);
	assert_int_equal(rail_only_clos_capacity(64, 3), 65536);
	assert_int_equal(rail_only_clos_tiers(64, 1), 1);
	assert_int_equal(rail_only_clos_tiers(64, 64), 1);
	assert_int_equal(rail_only_clos_tiers(64, 65), 2);
	assert_int_equal(rail_only_clos_tiers(64, 2049), 3);
	assert_int_equal(rail_only_clos_tiers(256, 32768), 2);
	assert_int_equal(rail_only_clos_tiers(256, 32769), 3);
	assert_int_equal(rail_only_clos_tiers(4, INT64_MAX), 62);
	assert_int_equal(rail_only_clos_capacity(4, 70), INT64_MAX);
}

/*
 * Section IV-B: when y(x-1) = x(y-1), i.e. x = y, equation (3) over (2) is
 * 1 + C_S/C_F. The paper gives 8.2 % and 11.2 % for DGX A100 (NVLink 2.4
 * Tb/s, NIC 200 Gb/s per GPU) and DGX H100 (3.6 Tb/s, 400 Gb/s); the paper
 * does not list the figures it used, and those bandwidths give 8.33 % and
 * 11.11 %: equal to C_S/C_F here, within 0.15 points of the printed ones.
 */
static void test_a2a_slowdown(void **state)
{
	static const struct {
		double hb_gbps, nic_gbps, paper_pct;
	} platforms[] = {{2400, 200, 8.2}, {3600, 400, 11.2}};
	struct rail_only_result r;

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct rail_only_input in = {.gpus = 64,
					     .radix = 64,
					     .hb_domain = 8,
					     .hb_gbps = platforms[i].hb_gbps,
					     .nic_gbps = platforms[i].nic_gbps};

		rail_only_default_prices(&in);
		assert_int_equal(rail_only_evaluate(&in, &r), 0);
		/* x = y = 8, D = 1: (2) = max(7/C_F, 56/C_S), (3) = 56/C_F + 56/C_S. */
		assert_true(fabs(r.t_rail_optimized - 56.0 / in.nic_gbps) < 1e-12);
		assert_true(fabs(r.t_rail_only - (56.0 / in.hb_gbps + 56.0 / in.nic_gbps)) < 1e-12);
		assert_true(fabs(r.slowdown - in.nic_gbps / in.hb_gbps) < 1e-12);
		assert_true(fabs(100 * r.slowdown - platforms[i].paper_pct) < 0.15);
	}
	/* The paper's GH200 cluster of Table II (x = 256, y = 128): 11.2 %. */
	struct rail_only_input gh = paper_input(32768, 128);
	assert_int_equal(rail_only_evaluate(&gh, &r), 0);
	assert_int_equal((int)lround(1000 * r.slowdown), 112);
	/* One HB domain: no network traffic, no slow-down; one GPU: nothing at all. */
	gh.hb_domain = 32768;
	assert_int_equal(rail_only_evaluate(&gh, &r), 0);
	assert_true(r.slowdown == 0.0);
	gh.gpus = 1;
	gh.hb_domain = 1;
	assert_int_equal(rail_only_evaluate(&gh, &r), 0);
	assert_true(r.t_rail_optimized == 0.0 && r.slowdown == 0.0);
}

static void test_validation(void **state)
{
	struct rail_only_input in = paper_input(32768, 128);
	struct rail_only_problem p[8];
	struct rail_only_result r;

	(void)state;
	assert_int_equal(rail_only_validate(&in, p, 8), 0);
	in.radix = 96;
	assert_int_equal(rail_only_validate(&in, p, 8), 1);
	assert_string_equal(p[0].field, "radix");
	assert_int_equal(rail_only_evaluate(&in, &r), -EINVAL);
	in.radix = 2;
	assert_int_equal(rail_only_validate(&in, p, 8), 1);
	assert_string_equal(p[0].field, "radix");
	in = paper_input(0, 128);
	assert_int_equal(rail_only_validate(&in, p, 8), 1);
	assert_string_equal(p[0].field, "gpus");
	in = paper_input(1000, 128);
	assert_int_equal(rail_only_validate(&in, p, 8), 1);
	assert_string_equal(p[0].field, "hb_domain");
	assert_non_null(strstr(p[0].reason, "must divide gpus"));
	in = paper_input(32768, 128);
	in.nic_gbps = 0;
	in.price_switch_port_usd = -1;
	in.power_transceiver_w = NAN;
	assert_int_equal(rail_only_validate(&in, p, 8), 3);
	assert_string_equal(p[0].field, "nic_gbps");
	assert_string_equal(p[1].field, "price_switch_port_usd");
	assert_string_equal(p[2].field, "power_transceiver_w");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table2),
		cmocka_unit_test(test_issue_row_and_tiers),
		cmocka_unit_test(test_a2a_slowdown),
		cmocka_unit_test(test_validation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
