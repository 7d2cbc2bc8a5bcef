/*
 * test_fabric_state.c - unit tests of the daemon's view of configured
 * cross-connects (daemon/fabric_state.c): applying confirmed changes,
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

static struct ocs_fabric lab(enum ocs_wiring w)
{
	return (struct ocs_fabric){ 4, 8, 4, 2, 8, w };
}

/* The two cross-connects of a circuit between spine ports a and b. */
static void circuit_xcs(const struct ocs_fabric *f, struct ocs_spine_port a,
			struct ocs_spine_port b, const char *job, struct st_circuit out[2])
{
	struct ocs_device_port ta = ocs_fabric_tx_port(f, a), rb = ocs_fabric_rx_port(f, b);
	struct ocs_device_port tb = ocs_fabric_tx_port(f, b), ra = ocs_fabric_rx_port(f, a);

	assert_int_equal(ta.device, rb.device);
	assert_int_equal(tb.device, ra.device);
	out[0] = (struct st_circuit){ { a.h, ta.device, ta.port, rb.port }, "" };
	out[1] = (struct st_circuit){ { b.h, tb.device, tb.port, ra.port }, "" };
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
		/* Pods 0 and 2 through port 0 of spine 1; pods 1 and 3 through port 2 of spine 3. */
		struct ocs_spine_port a1 = { 0, 1, 0 }, b1 = { 2, 1, 0 };
		struct ocs_spine_port a2 = { 1, 3, 2 }, b2 = { 3, 3, 2 };

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apply_and_views),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
