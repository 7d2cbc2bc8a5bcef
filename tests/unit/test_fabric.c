/*
 * test_fabric.c - unit tests of the fabric model (solvers/fabric.c): every
 * derived size and every index mapping, for all three wirings, with
 * hand-computed values and exhaustive round trips over small fabrics.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fabric.h"

static const enum ocs_wiring all_wirings[] = {OCS_WIRING_STRAIGHT, OCS_WIRING_DUAL,
					      OCS_WIRING_CROSS};

static struct ocs_fabric lab(enum ocs_wiring w)
{
	/* 4 pods, 8-port leaves, 8-port spines, tau 2: 4 spines and 4 leaves per pod. */
	return (struct ocs_fabric){
		.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = w};
}

static void test_wiring_names(void **state)
{
	enum ocs_wiring w;

	assert_string_equal(ocs_wiring_name(OCS_WIRING_STRAIGHT), "straight");
	assert_string_equal(ocs_wiring_name(OCS_WIRING_DUAL), "dual");
	assert_string_equal(ocs_wiring_name(OCS_WIRING_CROSS), "cross");
	assert_null(ocs_wiring_name((enum ocs_wiring)7));
	assert_int_equal(ocs_wiring_parse("dual", &w), 0);
	assert_int_equal(w, OCS_WIRING_DUAL);
	assert_int_equal(ocs_wiring_parse("Dual", &w), -EINVAL);
	assert_int_equal(ocs_wiring_parse(NULL, &w), -EINVAL);
}

static void test_sizes(void **state)
{
	for (size_t i = 0; i < 3; i++) {
		struct ocs_fabric f = lab(all_wirings[i]);
		int dual = all_wirings[i] == OCS_WIRING_DUAL;

		assert_int_equal(ocs_fabric_validate(&f, NULL, 0), 0);
		assert_int_equal(ocs_fabric_spines_per_pod(&f), 4);
		assert_int_equal(ocs_fabric_groups(&f), 4);
		assert_int_equal(ocs_fabric_leaves_per_pod(&f), 4);
		assert_int_equal(ocs_fabric_leaves(&f), 16);
		assert_int_equal(ocs_fabric_spines(&f), 16);
		assert_int_equal(ocs_fabric_gpus(&f), 128);
		assert_int_equal(ocs_fabric_ports_per_pod(&f), dual ? 2 : 1);
		assert_int_equal(ocs_fabric_devices_per_group(&f), dual ? 4 : 8);
		assert_int_equal(ocs_fabric_devices(&f), dual ? 16 : 32);
		assert_int_equal(ocs_fabric_device_ports_used(&f), dual ? 8 : 4);
		assert_int_equal(ocs_fabric_ocs_ports_total(&f), (dual ? 16 : 32) * 16);
		assert_int_equal(ocs_fabric_spine_ocs_ports_total(&f), 16 * 8);
	}
}

static void test_paper_scales(void **state)
{
	/* LumosCore setups: 32-port EPS (16 down, 16 up) and 64-port EPS, 256-port OCS. */
	struct ocs_fabric f16k = {128, 16, 16, 2, 256, OCS_WIRING_DUAL};
	struct ocs_fabric f131k = {256, 32, 32, 2, 256, OCS_WIRING_CROSS};

	assert_int_equal(ocs_fabric_validate(&f16k, NULL, 0), 0);
	assert_int_equal(ocs_fabric_gpus(&f16k), 16384);
	assert_int_equal(ocs_fabric_devices(&f16k), 8 * 8);
	assert_int_equal(ocs_fabric_validate(&f131k, NULL, 0), 0);
	assert_int_equal(ocs_fabric_gpus(&f131k), 131072);
	assert_int_equal(ocs_fabric_spines(&f131k), 256 * 16);
	assert_int_equal(ocs_fabric_devices(&f131k), 16 * 32);
}

static void test_leaf_spine_gpu_indexing(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_CROSS);

	assert_int_equal(ocs_fabric_leaf_pod(&f, 0), 0);
	assert_int_equal(ocs_fabric_leaf_pod(&f, 3), 0);
	assert_int_equal(ocs_fabric_leaf_pod(&f, 4), 1);
	assert_int_equal(ocs_fabric_leaf_pod(&f, 15), 3);
	assert_int_equal(ocs_fabric_leaf_index_in_pod(&f, 13), 1);
	assert_int_equal(ocs_fabric_gpu_leaf(&f, 0), 0);
	assert_int_equal(ocs_fabric_gpu_leaf(&f, 7), 0);
	assert_int_equal(ocs_fabric_gpu_leaf(&f, 8), 1);
	assert_int_equal(ocs_fabric_gpu_leaf(&f, 127), 15);
	for (int leaf = 0; leaf < ocs_fabric_leaves(&f); leaf++)
		assert_int_equal(ocs_fabric_leaf_id(&f, ocs_fabric_leaf_pod(&f, leaf),
						    ocs_fabric_leaf_index_in_pod(&f, leaf)),
				 leaf);
	for (int s = 0; s < ocs_fabric_spines(&f); s++)
		assert_int_equal(ocs_fabric_spine_id(&f, ocs_fabric_spine_pod(&f, s),
						     ocs_fabric_spine_group(&f, s)),
				 s);
	assert_int_equal(ocs_fabric_spine_id(&f, 2, 3), 11);
	for (int wi = 0; wi < 3; wi++) {
		struct ocs_fabric g = lab(all_wirings[wi]);

		for (int d = 0; d < ocs_fabric_devices(&g); d++) {
			int grp = ocs_fabric_device_group(&g, d);
			int in = ocs_fabric_device_in_group(&g, d);

			assert_in_range(grp, 0, ocs_fabric_groups(&g) - 1);
			assert_in_range(in, 0, ocs_fabric_devices_per_group(&g) - 1);
			assert_int_equal(ocs_fabric_device_id(&g, grp, in), d);
		}
	}
}

static void test_wiring_hand_values(void **state)
{
	struct ocs_fabric s = lab(OCS_WIRING_STRAIGHT), d = lab(OCS_WIRING_DUAL),
			  c = lab(OCS_WIRING_CROSS);
	struct ocs_spine_port p2k5 = {.pod = 2, .h = 1, .k = 5};
	struct ocs_device_port dp;

	dp = ocs_fabric_tx_port(&s, p2k5);
	assert_int_equal(dp.device, 5);
	assert_int_equal(dp.port, 2);
	dp = ocs_fabric_rx_port(&s, p2k5);
	assert_int_equal(dp.device, 5);
	assert_int_equal(dp.port, 2);

	dp = ocs_fabric_tx_port(&d, p2k5);
	assert_int_equal(dp.device, 2);
	assert_int_equal(dp.port, 5);
	dp = ocs_fabric_rx_port(&d, p2k5);
	assert_int_equal(dp.device, 2);
	assert_int_equal(dp.port, 5);

	dp = ocs_fabric_tx_port(&c, p2k5);
	assert_int_equal(dp.device, 5);
	assert_int_equal(dp.port, 2);
	dp = ocs_fabric_rx_port(&c, p2k5);
	assert_int_equal(dp.device, 4);
	assert_int_equal(dp.port, 2);
}

/*
 * For every wiring and every spine port: tx and rx land on valid device
 * ports, the inverses give the spine port back, and every cabled device
 * input (output) port belongs to exactly one spine port.
 */
static void test_wiring_round_trips(void **state)
{
	for (size_t wi = 0; wi < 3; wi++) {
		struct ocs_fabric f = lab(all_wirings[wi]);
		int dpg = ocs_fabric_devices_per_group(&f);
		int used = ocs_fabric_device_ports_used(&f);
		char *in_seen = calloc((size_t)dpg * used, 1);
		char *out_seen = calloc((size_t)dpg * used, 1);

		for (int h = 0; h < ocs_fabric_groups(&f); h++) {
			memset(in_seen, 0, (size_t)dpg * used);
			memset(out_seen, 0, (size_t)dpg * used);
			for (int p = 0; p < f.pods; p++) {
				for (int k = 0; k < f.k_spine; k++) {
					struct ocs_spine_port sp = {p, h, k}, back;
					struct ocs_device_port tx = ocs_fabric_tx_port(&f, sp);
					struct ocs_device_port rx = ocs_fabric_rx_port(&f, sp);

					assert_in_range(tx.device, 0, dpg - 1);
					assert_in_range(rx.device, 0, dpg - 1);
					assert_in_range(tx.port, 0, used - 1);
					assert_in_range(rx.port, 0, used - 1);
					assert_int_equal(ocs_fabric_input_owner(&f, h, tx, &back),
							 0);
					assert_memory_equal(&back, &sp, sizeof(sp));
					assert_int_equal(ocs_fabric_output_owner(&f, h, rx, &back),
							 0);
					assert_memory_equal(&back, &sp, sizeof(sp));
					assert_int_equal(in_seen[tx.device * used + tx.port]++, 0);
					assert_int_equal(out_seen[rx.device * used + rx.port]++, 0);
					if (f.wiring == OCS_WIRING_CROSS)
						assert_int_equal(rx.device, tx.device ^ 1);
					else
						assert_memory_equal(&rx, &tx, sizeof(rx));
				}
			}
			for (int i = 0; i < dpg * used; i++) {
				assert_int_equal(in_seen[i], 1);
				assert_int_equal(out_seen[i], 1);
			}
		}
		free(in_seen);
		free(out_seen);
	}
}

static void test_uncabled_ports(void **state)
{
	for (size_t wi = 0; wi < 3; wi++) {
		struct ocs_fabric f = lab(all_wirings[wi]);
		struct ocs_spine_port sp;
		int used = ocs_fabric_device_ports_used(&f);

		/* k_ocs is 16: ports from `used` up are not cabled to any spine. */
		assert_int_equal(
			ocs_fabric_input_owner(&f, 0, (struct ocs_device_port){0, used}, &sp),
			-ENOENT);
		assert_int_equal(
			ocs_fabric_output_owner(&f, 0, (struct ocs_device_port){0, 15}, &sp),
			-ENOENT);
		assert_int_equal(
			ocs_fabric_input_owner(&f, 0, (struct ocs_device_port){0, -1}, &sp),
			-ENOENT);
		assert_int_equal(ocs_fabric_input_owner(&f, 4, (struct ocs_device_port){0, 0}, &sp),
				 -ENOENT);
		assert_int_equal(
			ocs_fabric_input_owner(
				&f, 0,
				(struct ocs_device_port){ocs_fabric_devices_per_group(&f), 0}, &sp),
			-ENOENT);
	}
}

static int find_problem(const struct ocs_fabric_problem *p, int n, const char *field,
			const char *needle)
{
	for (int i = 0; i < n; i++)
		if (strcmp(p[i].field, field) == 0 && strstr(p[i].reason, needle))
			return 1;
	return 0;
}

static void test_validation(void **state)
{
	struct ocs_fabric_problem p[8];
	struct ocs_fabric f;
	int n;

	f = (struct ocs_fabric){4, 12, 8, 5, 16, OCS_WIRING_STRAIGHT};
	n = ocs_fabric_validate(&f, p, 8);
	assert_int_equal(n, 2);
	assert_true(find_problem(p, n, "k-leaf", "divisible by tau (5)"));
	assert_true(find_problem(p, n, "k-spine", "divisible by tau (5)"));

	f = (struct ocs_fabric){4, 8, 6, 1, 16, OCS_WIRING_STRAIGHT};
	assert_int_equal(ocs_fabric_validate(&f, p, 8), 0);
	f.wiring = OCS_WIRING_CROSS;
	f.k_spine = 7;
	n = ocs_fabric_validate(&f, p, 8);
	assert_int_equal(n, 1);
	assert_true(find_problem(p, n, "k-spine", "even for cross"));

	f = (struct ocs_fabric){9, 8, 8, 2, 16, OCS_WIRING_DUAL};
	n = ocs_fabric_validate(&f, p, 8);
	assert_int_equal(n, 1);
	assert_true(find_problem(p, n, "k-ocs", "need 18"));
	f.wiring = OCS_WIRING_CROSS;
	assert_int_equal(ocs_fabric_validate(&f, p, 8), 0);
	f.pods = 17;
	n = ocs_fabric_validate(&f, p, 8);
	assert_true(find_problem(p, n, "k-ocs", "need 17"));

	f = (struct ocs_fabric){0, -1, 8, 0, 16, OCS_WIRING_CROSS};
	n = ocs_fabric_validate(&f, p, 8);
	assert_int_equal(n, 3);
	assert_true(find_problem(p, n, "pods", "between 2"));
	assert_true(find_problem(p, n, "k-leaf", "between 1"));
	assert_true(find_problem(p, n, "tau", "between 1"));

	f = (struct ocs_fabric){4, 8, 8, 2, 16, (enum ocs_wiring)9};
	n = ocs_fabric_validate(&f, p, 8);
	assert_int_equal(n, 1);
	assert_true(find_problem(p, n, "wiring", "straight, dual or cross"));

	/* Counting goes on past the buffer. */
	f = (struct ocs_fabric){0, 0, 0, 0, 0, OCS_WIRING_CROSS};
	assert_int_equal(ocs_fabric_validate(&f, p, 2), 5);
}

static void test_ring_domain(void **state)
{
	struct ocs_ring_domain r = {.tors = 4,
				    .nodes_per_tor = 3,
				    .gpus_per_node = 4,
				    .k_hops = 3,
				    .bundles = 3,
				    .tors_per_agg = 2};
	struct ocs_fabric_problem p[4];

	assert_int_equal(ocs_ring_validate(&r, p, 4), 0);
	assert_int_equal(ocs_ring_nodes(&r), 12);
	assert_int_equal(ocs_ring_gpus(&r), 48);
	assert_int_equal(ocs_ring_agg_domains(&r), 2);
	/* Node 4 is index 1 under ToR 1: sub-line 1 starts at position 4. */
	assert_int_equal(ocs_ring_node_tor(&r, 4), 1);
	assert_int_equal(ocs_ring_node_agg(&r, 4), 0);
	assert_int_equal(ocs_ring_node_agg(&r, 6), 1);
	assert_int_equal(ocs_ring_position(&r, 4), 5);
	assert_int_equal(ocs_ring_position(&r, 0), 0);
	assert_int_equal(ocs_ring_position(&r, 3), 1);
	assert_int_equal(ocs_ring_position(&r, 11), 11);
	for (int n = 0; n < 12; n++)
		assert_int_equal(ocs_ring_node_at(&r, ocs_ring_position(&r, n)), n);
	for (int pos = 0; pos < 12; pos++)
		assert_int_equal(ocs_ring_position(&r, ocs_ring_node_at(&r, pos)), pos);
	/* Consecutive positions sit under different ToRs (the point of the order). */
	for (int pos = 0; pos + 1 < 12; pos++)
		if ((pos + 1) % r.tors != 0)
			assert_int_not_equal(ocs_ring_node_tor(&r, ocs_ring_node_at(&r, pos)),
					     ocs_ring_node_tor(&r, ocs_ring_node_at(&r, pos + 1)));
	assert_int_equal(ocs_ring_distance(&r, ocs_ring_node_at(&r, 0), ocs_ring_node_at(&r, 11)),
			 11);
	assert_false(ocs_ring_adjacent(&r, ocs_ring_node_at(&r, 0), ocs_ring_node_at(&r, 11)));
	r.closed = true;
	assert_int_equal(ocs_ring_distance(&r, ocs_ring_node_at(&r, 0), ocs_ring_node_at(&r, 11)),
			 1);
	assert_true(ocs_ring_adjacent(&r, ocs_ring_node_at(&r, 0), ocs_ring_node_at(&r, 11)));
	assert_false(ocs_ring_adjacent(&r, 5, 5));
	assert_true(ocs_ring_adjacent(&r, ocs_ring_node_at(&r, 2), ocs_ring_node_at(&r, 5)));
	assert_false(ocs_ring_adjacent(&r, ocs_ring_node_at(&r, 2), ocs_ring_node_at(&r, 6)));

	r.tors_per_agg = 3;
	r.bundles = 5;
	assert_int_equal(ocs_ring_validate(&r, p, 4), 2);
	r = (struct ocs_ring_domain){1, 2, 4, 2, 2, 1, false};
	assert_int_equal(ocs_ring_validate(&r, p, 4), 1);
	assert_string_equal(p[0].field, "k-hops");
	/* A ring's middle node needs a DOWN and an UP bundle. */
	r = (struct ocs_ring_domain){4, 2, 4, 2, 1, 1, false};
	assert_int_equal(ocs_ring_validate(&r, p, 4), 1);
	assert_true(find_problem(p, 1, "bundles", "DOWN and an UP bundle"));
	r.bundles = 2;
	assert_int_equal(ocs_ring_validate(&r, p, 4), 0);
}

static void test_rail_fabric(void **state)
{
	/* 4 groups of 9 servers (the last of each a spare), 8 rails. */
	struct ocs_rail_fabric r = {
		.servers = 36, .rails = 8, .servers_per_ocs = 9, .spare_servers_per_ocs = 1};
	struct ocs_fabric_problem p[4];
	struct ocs_rail_port_owner o;

	(void)state;
	assert_int_equal(ocs_rail_validate(&r, p, 4), 0);
	assert_int_equal(ocs_rail_groups(&r), 4);
	assert_int_equal(ocs_rail_active_per_group(&r), 8);
	assert_int_equal(ocs_rail_active_servers(&r), 32);
	assert_int_equal(ocs_rail_spare_servers(&r), 4);
	assert_int_equal(ocs_rail_gpus(&r), 288);
	assert_int_equal(ocs_rail_active_gpus(&r), 256);
	assert_int_equal(ocs_rail_spare_gpus(&r), 32);
	assert_int_equal(ocs_rail_rail_ports(&r), 256);
	assert_int_equal(ocs_rail_gpu_side_ports(&r), 72);
	assert_int_equal(ocs_rail_switch_side_ports(&r), 64);
	assert_int_equal(ocs_rail_device_ports(&r), 136);

	/* Server 10 is server 1 of group 1; 17 (index 8) is group 1's spare. */
	assert_int_equal(ocs_rail_server_group(&r, 10), 1);
	assert_int_equal(ocs_rail_server_in_group(&r, 10), 1);
	assert_int_equal(ocs_rail_server_id(&r, 1, 1), 10);
	assert_false(ocs_rail_is_spare_server(&r, 7));
	assert_true(ocs_rail_is_spare_server(&r, 8));
	assert_false(ocs_rail_is_spare_server(&r, 9));
	assert_true(ocs_rail_is_spare_server(&r, 17));
	assert_true(ocs_rail_is_spare_server(&r, 35));
	assert_false(ocs_rail_is_spare_server(&r, 36));

	/* GPU 85 = server 10, rail 5: GPU-side port 1*8+5, switch-side 72+13. */
	assert_int_equal(ocs_rail_gpu_id(&r, 10, 5), 85);
	assert_int_equal(ocs_rail_gpu_server(&r, 85), 10);
	assert_int_equal(ocs_rail_gpu_rail(&r, 85), 5);
	assert_int_equal(ocs_rail_gpu_port(&r, 85), 13);
	assert_int_equal(ocs_rail_switch_port(&r, 10, 5), 85);
	assert_int_equal(ocs_rail_port_id(&r, 10, 5), 64 + 13);
	assert_int_equal(ocs_rail_port_server(&r, 77), 10);
	assert_int_equal(ocs_rail_port_rail(&r, 77), 5);
	/* The spare's GPUs have GPU-side ports but no rail ports. */
	assert_int_equal(ocs_rail_gpu_port(&r, ocs_rail_gpu_id(&r, 17, 7)), 71);
	assert_int_equal(ocs_rail_switch_port(&r, 17, 0), -ENOENT);
	assert_int_equal(ocs_rail_port_id(&r, 17, 0), -ENOENT);

	assert_int_equal(ocs_rail_port_owner(&r, 1, 13, &o), 0);
	assert_true(o.is_gpu);
	assert_int_equal(o.gpu, 85);
	assert_int_equal(ocs_rail_port_owner(&r, 1, 85, &o), 0);
	assert_false(o.is_gpu);
	assert_int_equal(o.rail_port, 77);
	assert_int_equal(ocs_rail_port_owner(&r, 1, 136, &o), -ENOENT);
	assert_int_equal(ocs_rail_port_owner(&r, 4, 0, &o), -ENOENT);

	/* Every port of every device round-trips through its owner. */
	for (int g = 0; g < ocs_rail_groups(&r); g++)
		for (int port = 0; port < ocs_rail_device_ports(&r); port++) {
			assert_int_equal(ocs_rail_port_owner(&r, g, port, &o), 0);
			if (o.is_gpu) {
				assert_int_equal(
					ocs_rail_server_group(&r, ocs_rail_gpu_server(&r, o.gpu)),
					g);
				assert_int_equal(ocs_rail_gpu_port(&r, o.gpu), port);
			} else {
				int s = ocs_rail_port_server(&r, o.rail_port);

				assert_int_equal(ocs_rail_server_group(&r, s), g);
				assert_int_equal(
					ocs_rail_switch_port(&r, s,
							     ocs_rail_port_rail(&r, o.rail_port)),
					port);
			}
		}
}

static void test_rail_validation(void **state)
{
	struct ocs_rail_fabric r = {
		.servers = 32, .rails = 8, .servers_per_ocs = 6, .spare_servers_per_ocs = 1};
	struct ocs_fabric_problem p[4];

	(void)state;
	assert_int_equal(ocs_rail_validate(&r, p, 4), 1);
	assert_string_equal(p[0].field, "servers-per-ocs");
	assert_non_null(strstr(p[0].reason, "must divide servers (32)"));
	r.servers_per_ocs = 4;
	r.spare_servers_per_ocs = 4;
	assert_int_equal(ocs_rail_validate(&r, p, 4), 1);
	assert_string_equal(p[0].field, "spare-servers-per-ocs");
	r.spare_servers_per_ocs = 3;
	assert_int_equal(ocs_rail_validate(&r, p, 4), 0);
	r = (struct ocs_rail_fabric){0, 0, 1, -1};
	assert_int_equal(ocs_rail_validate(&r, p, 4), 3);
	assert_string_equal(p[0].field, "servers");
	assert_string_equal(p[1].field, "rails");
	assert_string_equal(p[2].field, "spare-servers-per-ocs");
	/* A device of (2*2048)*17 ports is beyond the limit. */
	r = (struct ocs_rail_fabric){4096, 17, 2048, 0};
	assert_int_equal(ocs_rail_validate(&r, p, 4), 1);
	assert_string_equal(p[0].field, "servers-per-ocs");
	assert_non_null(strstr(p[0].reason, "69632 ports"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wiring_names),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_paper_scales),
		cmocka_unit_test(test_leaf_spine_gpu_indexing),
		cmocka_unit_test(test_wiring_hand_values),
		cmocka_unit_test(test_wiring_round_trips),
		cmocka_unit_test(test_uncabled_ports),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_ring_domain),
		cmocka_unit_test(test_rail_fabric),
		cmocka_unit_test(test_rail_validation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
