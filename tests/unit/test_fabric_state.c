/*
 * test_fabric_state.c - unit tests of the daemon's view of configured
 * cross-connects (daemon/fabric/fabric_state.c): applying confirmed changes,
 * per-job and per-device views, generation counting, and pairing
 * cross-connects into bidirectional circuits for every wiring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fabric_state.h"
#include "l2check.h"
#include "leafcentric.h"

static struct ocs_fabric lab(enum ocs_wiring w)
{
	return (struct ocs_fabric){4, 8, 4, 2, 8, w};
}

/* The two cross-connects of a circuit between spine ports a and b. */
static void circuit_xcs(const struct ocs_fabric *f, struct ocs_spine_port a,
			struct ocs_spine_port b, const char *job, struct st_circuit out[2])
{
	struct ocs_device_port ta = ocs_fabric_tx_port(f, a), rb = ocs_fabric_rx_port(f, b);
	struct ocs_device_port tb = ocs_fabric_tx_port(f, b), ra = ocs_fabric_rx_port(f, a);

	assert_int_equal(ta.device, rb.device);
	assert_int_equal(tb.device, ra.device);
	out[0] = (struct st_circuit){{a.h, ta.device, ta.port, rb.port}, ""};
	out[1] = (struct st_circuit){{b.h, tb.device, tb.port, ra.port}, ""};
	strcpy(out[0].job_id, job);
	strcpy(out[1].job_id, job);
}

static void test_apply_and_views(void **state)
{
	for (int w = 0; w < 3; w++) {
		struct ocs_fabric f = lab((enum ocs_wiring)w);
		struct fs_state *fs = fs_new(&f);
		struct st_circuit c1[2], c2[2];
		struct fs_circuit *cs;
		struct ocs_xc *xcs;
		unsigned long g0 = fs_generation(fs);
		size_t n;
		/* Pods 0 and 2 through port 0 of spine 1; pods 1 and 3 through port 2 of spine 3.
		 */
		struct ocs_spine_port a1 = {0, 1, 0}, b1 = {2, 1, 0};
		struct ocs_spine_port a2 = {1, 3, 2}, b2 = {3, 3, 2};

		if (f.wiring != OCS_WIRING_STRAIGHT) {
			/* dual: the peer port shares the device; cross: the paired device */
			b1.k = 1;
			b2.k = 3;
		}
		circuit_xcs(&f, a1, b1, "j1", c1);
		circuit_xcs(&f, a2, b2, "j2", c2);
		assert_int_equal(fs_apply(fs, NULL, 0, c1, 2), 0);
		assert_int_equal(fs_apply(fs, NULL, 0, c2, 2), 0);
		assert_int_equal(fs_count(fs), 4);
		assert_true(fs_generation(fs) == g0 + 2);

		xcs = fs_job_xcs(fs, "j1", &n);
		assert_int_equal(n, 2);
		free(xcs);
		assert_int_equal(fs_device_xcs(fs, ocs_fabric_device_id(&f, 1, c1[0].xc.device)),
				 f.wiring == OCS_WIRING_CROSS ? 1 : 2);

		cs = fs_circuits(fs, NULL, -1, -1, &n);
		assert_int_equal(n, 2);
		for (size_t i = 0; i < n; i++)
			assert_true(cs[i].complete);
		assert_int_equal(cs[0].a.pod, 0);
		assert_int_equal(cs[0].b.pod, 2);
		assert_string_equal(cs[0].job_id, "j1");
		free(cs);
		cs = fs_circuits(fs, "j2", -1, -1, &n);
		assert_int_equal(n, 1);
		assert_int_equal(cs[0].a.h, 3);
		free(cs);
		cs = fs_circuits(fs, NULL, -1, 3, &n);
		assert_int_equal(n, 1);
		free(cs);
		cs = fs_circuits(fs, NULL, ocs_fabric_device_id(&f, 1, c1[1].xc.device), -1, &n);
		assert_int_equal(n, 1);
		assert_string_equal(cs[0].job_id, "j1");
		free(cs);

		/* Removing one direction leaves a one-way circuit, reported as such. */
		assert_int_equal(fs_apply(fs, &c1[1].xc, 1, NULL, 0), 0);
		cs = fs_circuits(fs, "j1", -1, -1, &n);
		assert_int_equal(n, 1);
		assert_false(cs[0].complete);
		free(cs);
		assert_int_equal(fs_apply(fs, &c1[0].xc, 1, NULL, 0), 0);
		assert_int_equal(fs_count(fs), 2);
		xcs = fs_snapshot(fs, &n);
		assert_int_equal(n, 2);
		assert_int_equal(xcs[0].group, 3);
		free(xcs);
		fs_free(fs);
	}
	fs_free(NULL);
}

/*
 * Draining a device: the blockers are two-way (the independent checker
 * passes), block every free port of the device but at most one per group,
 * and a saturating plan on top of them puts nothing on the drained device.
 */
static void test_drain_blockers(void **state)
{
	for (int w = 0; w < 3; w++) {
		struct ocs_fabric f = {5, 8, 8, 2, 10, (enum ocs_wiring)w};
		struct fs_state *fs = fs_new(&f);
		int n_dev = ocs_fabric_devices(&f), drained_id = ocs_fabric_device_id(&f, 2, 1);
		bool *drained = calloc((size_t)n_dev, sizeof(bool));
		struct lc_demand demand[64];
		struct lc_options opt = {.realize = true};
		struct lc_plan *plan = NULL;
		struct ocs_xc *blk;
		size_t n_blk, n_demand = 0, free_left = 0;

		drained[drained_id] = true;
		blk = fs_drain_blockers(fs, drained, &n_blk);
		assert_non_null(blk);
		assert_true(n_blk > 0);
		assert_int_equal(l2_check(&f, blk, n_blk, NULL, 0), 0);
		for (size_t i = 0; i < n_blk; i++)
			assert_int_equal(blk[i].group, 2);
		/* Inputs of the drained device left free: at most one (odd pod count). */
		for (int port = 0; port < ocs_fabric_device_ports_used(&f); port++) {
			bool used = false;

			for (size_t i = 0; i < n_blk; i++)
				used |= blk[i].device == 1 && blk[i].in == port;
			free_left += !used;
		}
		assert_true(free_left <= (f.wiring == OCS_WIRING_DUAL ? 2 : 1));
		/* Every leaf of pod p wants links to every leaf of the next pods. */
		for (int a = 0; a < ocs_fabric_leaves(&f); a++)
			for (int b = a + 1; b < ocs_fabric_leaves(&f); b++)
				if (ocs_fabric_leaf_pod(&f, a) != ocs_fabric_leaf_pod(&f, b) &&
				    n_demand < 64 && (b - a) % 3 == 0)
					demand[n_demand++] = (struct lc_demand){a, b, 1};
		assert_int_equal(lc_plan(&f, demand, n_demand, blk, n_blk, &opt, &plan), 0);
		for (size_t i = 0; i < plan->n_xcs; i++) {
			bool blocker = false;

			for (size_t k = 0; k < n_blk; k++)
				blocker |= memcmp(&plan->xcs[i], &blk[k], sizeof(blk[k])) == 0;
			if (!blocker)
				assert_false(plan->xcs[i].group == 2 && plan->xcs[i].device == 1);
		}
		lc_plan_free(plan);
		free(blk);
		free(drained);
		fs_free(fs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apply_and_views),
		cmocka_unit_test(test_drain_blockers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
