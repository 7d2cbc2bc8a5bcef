/*
 * test_devices.c - unit tests of the daemon's per-device facts
 * (daemon/fabric/devices.c) and the per-device index of cross-connects it exposes
 * (daemon/fabric/fabric_state.c): sorted per-device runs kept through inserts and
 * removals, per-device circuit views equal to the fabric-wide ones, the
 * read-back comparison (equal, unowned, missing, with a change applied),
 * drain stored in and restored from a real SQLite store, session state
 * transitions and name look-ups, and the ports a device reports down handed
 * to the planner as ports out of service.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devices.h"
#include "fabric_state.h"
#include "l2check.h"
#include "leafcentric.h"
#include "store.h"

/* 5 pods, 8 spine ports per spine, 10-port devices: 8 or 16 devices by wiring. */
static struct ocs_fabric lab(enum ocs_wiring w)
{
	return (struct ocs_fabric){5, 8, 8, 2, 10, w};
}

/* A realistic circuit set: a realized leaf-centric plan, owners alternating. */
static struct st_circuit *plan_circuits(const struct ocs_fabric *f, size_t *n)
{
	struct lc_demand demand[128];
	struct lc_options opt = {.realize = true};
	struct lc_plan *plan = NULL;
	struct st_circuit *out;
	size_t n_demand = 0;

	for (int a = 0; a < ocs_fabric_leaves(f); a++)
		for (int b = a + 1; b < ocs_fabric_leaves(f); b++)
			if (ocs_fabric_leaf_pod(f, a) != ocs_fabric_leaf_pod(f, b) &&
			    n_demand < 128 && (b - a) % 2 == 1)
				demand[n_demand++] = (struct lc_demand){a, b, 1};
	assert_int_equal(lc_plan(f, demand, n_demand, NULL, 0, &opt, &plan), 0);
	assert_true(plan->n_xcs > 20);
	out = calloc(plan->n_xcs, sizeof(*out));
	assert_non_null(out);
	for (size_t i = 0; i < plan->n_xcs; i++) {
		out[i].xc = plan->xcs[i];
		snprintf(out[i].job_id, sizeof(out[i].job_id), "job-%zu", i % 3);
	}
	*n = plan->n_xcs;
	lc_plan_free(plan);
	return out;
}

static struct devices *new_devs(const struct ocs_fabric *f, struct fs_state *fs,
				struct st_store *st, int64_t now_ms)
{
	int n = ocs_fabric_devices(f);
	char(*names)[24] = calloc((size_t)n, sizeof(*names));
	const char **ptrs = calloc((size_t)n, sizeof(*ptrs));
	struct devices *devs;

	assert_non_null(names);
	assert_non_null(ptrs);
	/* Names in an order unlike the ids, so the name index is a real sort. */
	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "ocs-%c%02d", 'z' - i % 7, i);
		ptrs[i] = names[i];
	}
	devs = dev_new(&(struct dev_deps){f, fs, st, ptrs, n, 1000, now_ms});
	assert_non_null(devs);
	free(ptrs);
	free(names);
	return devs;
}

/* Every device's run: its own cross-connects only, sorted by input, all found. */
static void check_runs(const struct ocs_fabric *f, const struct fs_state *fs,
		       const struct devices *devs)
{
	size_t total = 0;

	for (int id = 0; id < ocs_fabric_devices(f); id++) {
		size_t n;
		const struct st_circuit *run = dev_xcs(devs, id, &n);

		assert_int_equal(n, fs_device_xcs(fs, id));
		for (size_t i = 0; i < n; i++) {
			struct ocs_xc other = run[i].xc;

			assert_int_equal(ocs_fabric_device_id(f, run[i].xc.group, run[i].xc.device),
					 id);
			if (i)
				assert_true(run[i - 1].xc.in < run[i].xc.in);
			assert_true(fs_contains(fs, &run[i].xc));
			other.out = run[i].xc.out + 1;
			assert_false(fs_contains(fs, &other));
		}
		total += n;
	}
	assert_int_equal(total, fs_count(fs));
	for (int h = 0, sum = 0; h < ocs_fabric_groups(f); h++, sum = 0) {
		for (int k = 0; k < ocs_fabric_devices_per_group(f); k++)
			sum += (int)fs_device_xcs(fs, ocs_fabric_device_id(f, h, k));
		assert_int_equal(fs_group_xcs(fs, h), sum);
	}
}

/* The per-device circuit view equals the fabric-wide one filtered by device. */
static void check_device_circuits(const struct ocs_fabric *f, const struct fs_state *fs)
{
	size_t n_all;
	struct fs_circuit *all = fs_circuits(fs, NULL, -1, -1, &n_all);

	assert_non_null(all);
	for (int id = 0; id < ocs_fabric_devices(f); id++) {
		size_t n, k = 0;
		struct fs_circuit *one = fs_circuits(fs, NULL, id, -1, &n);

		assert_non_null(one);
		for (size_t i = 0; i < n_all; i++) {
			int ab = ocs_fabric_device_id(f, all[i].xc_ab.group, all[i].xc_ab.device);
			int ba = all[i].complete ? ocs_fabric_device_id(f, all[i].xc_ba.group,
									all[i].xc_ba.device)
						 : -1;

			if (ab != id && ba != id)
				continue;
			assert_true(k < n);
			assert_memory_equal(&one[k].xc_ab, &all[i].xc_ab, sizeof(all[i].xc_ab));
			assert_int_equal(one[k].complete, all[i].complete);
			k++;
		}
		assert_int_equal(k, n);
		free(one);
	}
	free(all);
}

static void test_index(void **state)
{
	for (int w = 0; w < 3; w++) {
		struct ocs_fabric f = lab((enum ocs_wiring)w);
		struct fs_state *fs = fs_new(&f);
		struct devices *devs = new_devs(&f, fs, NULL, 0);
		size_t n, half, n_blk;
		struct st_circuit *cs = plan_circuits(&f, &n);
		struct ocs_xc *removals = calloc(n, sizeof(*removals)), *blk;
		bool *drained = calloc((size_t)ocs_fabric_devices(&f), sizeof(bool));

		/* Inserted in two batches (the second merged into the first). */
		half = n / 2;
		assert_int_equal(fs_apply(fs, NULL, 0, cs + half, n - half), 0);
		assert_int_equal(fs_apply(fs, NULL, 0, cs, half), 0);
		assert_int_equal(fs_count(fs), n);
		check_runs(&f, fs, devs);
		check_device_circuits(&f, fs);

		/* Removing every other one keeps the runs sorted and exact. */
		for (size_t i = 0; i < n; i += 2)
			removals[i / 2] = cs[i].xc;
		assert_int_equal(fs_apply(fs, removals, (n + 1) / 2, NULL, 0), 0);
		assert_int_equal(fs_count(fs), n / 2);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(fs_contains(fs, &cs[i].xc), i % 2 == 1);
		check_runs(&f, fs, devs);
		check_device_circuits(&f, fs);

		/*
		 * Drain blockers around existing circuits: free ports only. The
		 * drained device and those receiving for its spine ports keep one
		 * cross-connect each, so they have free ports to block and used
		 * ones to avoid.
		 */
		drained[ocs_fabric_device_id(&f, 1, 0)] = true;
		for (int p = 0; p < ocs_fabric_device_ports_used(&f); p++) {
			struct ocs_spine_port sp;
			size_t n_run;
			const struct st_circuit *run;

			assert_int_equal(
				ocs_fabric_input_owner(&f, 1, (struct ocs_device_port){0, p}, &sp),
				0);
			for (int id = 0; id < 2; id++) {
				int dev = id == 0 ? 0 : ocs_fabric_rx_port(&f, sp).device;

				run = dev_xcs(devs, ocs_fabric_device_id(&f, 1, dev), &n_run);
				for (size_t i = 1; i < n_run; i++)
					removals[i - 1] = run[i].xc;
				if (n_run > 1)
					assert_int_equal(fs_apply(fs, removals, n_run - 1, NULL, 0),
							 0);
			}
		}
		blk = fs_drain_blockers(fs, drained, &n_blk);
		assert_non_null(blk);
		assert_true(n_blk > 0);
		/* Existing circuits are one-way now (every other one removed): check the blockers
		 * alone. */
		assert_int_equal(l2_check(&f, blk, n_blk, NULL, 0), 0);
		for (size_t i = 0; i < n_blk; i++) {
			size_t n_run;
			const struct st_circuit *run =
				dev_xcs(devs, ocs_fabric_device_id(&f, blk[i].group, blk[i].device),
					&n_run);

			assert_int_equal(blk[i].group, 1);
			for (size_t k = 0; k < n_run; k++) {
				assert_int_not_equal(run[k].xc.in, blk[i].in);
				assert_int_not_equal(run[k].xc.out, blk[i].out);
			}
		}
		free(blk);
		free(drained);
		free(removals);
		free(cs);
		dev_free(devs);
		fs_free(fs);
	}
}

static void test_compare(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_STRAIGHT);
	struct fs_state *fs = fs_new(&f);
	struct devices *devs = new_devs(&f, fs, NULL, 0);
	int id = ocs_fabric_device_id(&f, 2, 3);
	struct st_circuit held[3] = {
		{{2, 3, 1, 3}, "a"}, {{2, 3, 2, 5}, "a"}, {{2, 4, 1, 3}, "b"}}; /* another device */
	struct ocs_xc rm = {2, 3, 2, 0}; /* removal: by input */
	struct st_circuit add[2] = {{{2, 3, 4, 6}, "c"}, {{1, 3, 7, 8}, "c"}};
	struct st_intent change = {
		.removals = &rm, .n_removals = 1, .additions = add, .n_additions = 2};
	struct dev_diff d;

	assert_int_equal(fs_apply(fs, NULL, 0, held, 3), 0);

	/* Equal, in any order. */
	assert_int_equal(dev_compare(devs, id, NULL, (struct sb_xc[]){{2, 5}, {1, 3}}, 2, &d), 0);
	assert_true(dev_diff_equal(&d));
	dev_diff_clear(&d);

	/* A wrong output is both missing and unowned; an extra one is unowned. */
	assert_int_equal(
		dev_compare(devs, id, NULL, (struct sb_xc[]){{7, 0}, {1, 3}, {2, 6}}, 3, &d), 0);
	assert_false(dev_diff_equal(&d));
	assert_int_equal(d.n_missing, 1);
	assert_int_equal(d.missing[0].in, 2);
	assert_int_equal(d.missing[0].out, 5);
	assert_int_equal(d.n_unowned, 2);
	assert_int_equal(d.unowned[0].in, 2);
	assert_int_equal(d.unowned[0].out, 6);
	assert_int_equal(d.unowned[1].in, 7);
	dev_diff_clear(&d);

	/* An empty device misses everything. */
	assert_int_equal(dev_compare(devs, id, NULL, NULL, 0, &d), 0);
	assert_int_equal(d.n_missing, 2);
	assert_int_equal(d.n_unowned, 0);
	dev_diff_clear(&d);

	/* With the change applied: 2->5 removed, 4->6 added (the other addition is elsewhere). */
	assert_int_equal(dev_compare(devs, id, &change, (struct sb_xc[]){{4, 6}, {1, 3}}, 2, &d),
			 0);
	assert_true(dev_diff_equal(&d));
	dev_diff_clear(&d);
	/* ... and the device still at its pre-image is not at the target. */
	assert_int_equal(dev_compare(devs, id, &change, (struct sb_xc[]){{1, 3}, {2, 5}}, 2, &d),
			 0);
	assert_int_equal(d.n_missing, 1);
	assert_int_equal(d.missing[0].in, 4);
	assert_int_equal(d.n_unowned, 1);
	assert_int_equal(d.unowned[0].in, 2);
	dev_diff_clear(&d);
	dev_diff_clear(NULL);

	dev_free(devs);
	fs_free(fs);
}

static void test_read_without_handle(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_STRAIGHT);
	struct fs_state *fs = fs_new(&f);
	struct devices *devs = new_devs(&f, fs, NULL, 0);
	struct dev_readback rb;

	assert_null(dev_handle(devs, 0, DEV_ROLE_RECON));
	assert_null(dev_handle(devs, -1, DEV_ROLE_TXN));
	assert_int_equal(dev_read(devs, 0, DEV_ROLE_TXN, &rb), -ENOENT);
	assert_false(rb.ok);
	assert_true(rb.error[0] != '\0');
	dev_readback_clear(&rb);
	dev_readback_clear(NULL);
	dev_free(devs);
	dev_free(NULL);
	fs_free(fs);
}

static void test_names(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_CROSS);
	struct devices *devs = new_devs(&f, NULL, NULL, 0);

	assert_int_equal(dev_count(devs), ocs_fabric_devices(&f));
	for (int i = 0; i < dev_count(devs); i++)
		assert_int_equal(dev_find(devs, dev_name(devs, i)), i);
	assert_int_equal(dev_find(devs, "ocs-none"), -1);
	assert_int_equal(dev_find(devs, ""), -1);
	assert_string_equal(dev_name(devs, dev_count(devs)), "?");
	dev_free(devs);
}

static void test_sessions(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_STRAIGHT);
	struct devices *devs = new_devs(&f, NULL, NULL, 1000);
	struct dev_status s;

	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_CONNECTING);
	assert_int_equal(s.health, DEV_HEALTH_UNKNOWN);
	assert_true(s.since_ms == 1000);
	assert_string_equal(s.session_error, "");
	assert_int_equal(dev_status(devs, -1, &s), -ENOENT);

	/* CONNECTING --read ok--> CONNECTED */
	assert_true(dev_note_read(devs, 2, true, true, "", 2000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_CONNECTED);
	assert_int_equal(s.health, DEV_HEALTH_HEALTHY);
	assert_true(s.since_ms == 2000);
	/* Nothing changes: no event. */
	assert_false(dev_note_read(devs, 2, true, true, NULL, 3000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_true(s.since_ms == 2000);

	/* CONNECTED --read fails--> DISCONNECTED, with the error. */
	assert_true(dev_note_read(devs, 2, false, false, "connect: refused", 4000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_DISCONNECTED);
	assert_int_equal(s.health, DEV_HEALTH_UNREACHABLE);
	assert_string_equal(s.session_error, "connect: refused");
	assert_true(s.since_ms == 4000);
	assert_int_equal(dev_unreachable(devs), 1);
	/* Another error while down: an event, the state's since stays. */
	assert_true(dev_note_read(devs, 2, false, false, "", 5000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_string_equal(s.session_error, "unreadable");
	assert_true(s.since_ms == 4000);
	/* Read, but the session did not stay up: healthy yet DISCONNECTED. */
	assert_true(dev_note_read(devs, 2, true, false, "ignored", 6000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_DISCONNECTED);
	assert_int_equal(s.health, DEV_HEALTH_HEALTHY);
	assert_string_equal(s.session_error, "");
	assert_int_equal(dev_unreachable(devs), 0);
	/* DISCONNECTED --read ok--> CONNECTED */
	assert_true(dev_note_read(devs, 2, true, true, "", 7000));
	assert_int_equal(dev_status(devs, 2, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_CONNECTED);
	assert_true(s.since_ms == 7000);
	/* CONNECTING --read fails--> DISCONNECTED on another device. */
	assert_true(dev_note_read(devs, 0, false, false, "timeout", 8000));
	assert_int_equal(dev_status(devs, 0, &s), 0);
	assert_int_equal(s.session, DEV_SESSION_DISCONNECTED);
	assert_false(dev_note_read(devs, 99, true, true, "", 0));
	dev_free(devs);
}

/* One reported port: ocsd port `port`, `egress` side, `status`. */
static struct sb_port_info port(uint16_t p, bool egress, enum sb_port_status status)
{
	return (struct sb_port_info){.port = p, .egress = egress, .status = status};
}

static void test_ports_down(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_STRAIGHT); /* 10-port devices */
	struct devices *devs = new_devs(&f, NULL, NULL, 0);
	/* sorted by (port, egress) as the info parser gives them; port 12 is past k-ocs */
	struct sb_port_info ports[] = {
		port(1, false, SB_PORT_STATUS_ENABLED), port(3, false, SB_PORT_STATUS_FAILED),
		port(3, true, SB_PORT_STATUS_DISABLED), port(4, true, SB_PORT_STATUS_UNSUPPORTED),
		port(7, true, SB_PORT_STATUS_FAILED),	port(12, false, SB_PORT_STATUS_FAILED),
	};
	struct sb_device_info info = {.ports = ports, .n_ports = 6};
	struct ocs_xc *oos = NULL, seed = {9, 9, 9, 9};
	size_t n = 0;
	struct dev_status s;

	/* nothing reported yet: nothing out of service, the list left alone */
	assert_int_equal(dev_out_of_service(devs, &oos, &n), 0);
	assert_null(oos);
	assert_int_equal(n, 0);

	/* device 5: 4 sides down on ports 3 (both), 7 and 12 */
	assert_true(dev_note_info(devs, 5, &info));
	assert_int_equal(dev_status(devs, 5, &s), 0);
	assert_int_equal(s.ports_down, 4);
	assert_false(dev_note_info(devs, 5, &info)); /* the same: no event */
	/* appended after what is there (the miswired ports): 3 and 7 once each, 12 left out */
	oos = malloc(sizeof(*oos));
	assert_non_null(oos);
	oos[0] = seed;
	n = 1;
	assert_int_equal(dev_out_of_service(devs, &oos, &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(&oos[0], &seed, sizeof(seed));
	int h = ocs_fabric_device_group(&f, 5), k = ocs_fabric_device_in_group(&f, 5);
	assert_int_equal(oos[1].group, h);
	assert_int_equal(oos[1].device, k);
	assert_int_equal(oos[1].in, 3);
	assert_int_equal(oos[1].out, 3);
	assert_int_equal(oos[2].group, h);
	assert_int_equal(oos[2].device, k);
	assert_int_equal(oos[2].in, 7);
	free(oos);

	/* the port healed, another failed, the count the same: the set follows */
	ports[1].status = SB_PORT_STATUS_ENABLED;
	ports[2].status = SB_PORT_STATUS_ENABLED;
	ports[0].status = SB_PORT_STATUS_FAILED;
	ports[3].status = SB_PORT_STATUS_DISABLED;
	/* still 4 sides down (1, 4, 7, 12): ListDevices shows nothing new */
	assert_false(dev_note_info(devs, 5, &info));
	oos = NULL;
	n = 0;
	assert_int_equal(dev_out_of_service(devs, &oos, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(oos[0].in, 1);
	assert_int_equal(oos[1].in, 4);
	assert_int_equal(oos[2].in, 7);
	free(oos);

	/* every port healthy again: nothing out of service */
	for (size_t i = 0; i < 6; i++)
		ports[i].status = SB_PORT_STATUS_ENABLED;
	assert_true(dev_note_info(devs, 5, &info));
	assert_int_equal(dev_status(devs, 5, &s), 0);
	assert_int_equal(s.ports_down, 0);
	oos = NULL;
	n = 0;
	assert_int_equal(dev_out_of_service(devs, &oos, &n), 0);
	assert_null(oos);
	assert_int_equal(n, 0);
	assert_false(dev_note_info(devs, 99, &info));
	dev_free(devs);
}

static int count_drain(void *ctx, const char *device)
{
	(*(int *)ctx)++;
	return 0;
}

static void test_drain_persisted(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_DUAL);
	char dir[] = "/tmp/ocsd-devices-XXXXXX", path[64], err[256], cmd[80];
	struct st_store *st = NULL;
	struct devices *devs;
	struct dev_status s;
	int stored = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/state.db", dir);
	assert_int_equal(st_open(path, &st, err, sizeof(err)), 0);
	devs = new_devs(&f, NULL, st, 0);
	assert_int_equal(dev_n_drained(devs), 0);
	assert_int_equal(dev_set_drained(devs, 1, true), 0);
	assert_int_equal(dev_set_drained(devs, 3, true), 0);
	assert_int_equal(dev_set_drained(devs, 3, false), 0);
	assert_int_equal(dev_set_drained(devs, 1, true), 0); /* again: no double count */
	assert_int_equal(dev_set_drained(devs, dev_count(devs), true), -ENOENT);
	assert_true(dev_drained(devs, 1));
	assert_false(dev_drained(devs, 3));
	assert_false(dev_drained(devs, -1));
	assert_int_equal(dev_n_drained(devs), 1);
	assert_true(dev_drained_mask(devs)[1]);
	assert_false(dev_drained_mask(devs)[3]);
	assert_int_equal(dev_status(devs, 1, &s), 0);
	assert_true(s.drained);
	/* A device no longer configured, drained by an earlier run. */
	assert_int_equal(st_drain_set(st, "ocs-gone", true), 0);
	dev_free(devs);
	st_close(st);

	/* A restart: the store gives the drain back; the unknown name is skipped. */
	assert_int_equal(st_open(path, &st, err, sizeof(err)), 0);
	assert_int_equal(st_drain_list(st, count_drain, &stored), 0);
	assert_int_equal(stored, 2);
	devs = new_devs(&f, NULL, st, 0);
	assert_false(dev_drained(devs, 1));
	assert_int_equal(dev_restore_drained(devs), 0);
	assert_true(dev_drained(devs, 1));
	assert_false(dev_drained(devs, 3));
	assert_int_equal(dev_n_drained(devs), 1);
	/* Undrained is stored too. */
	assert_int_equal(dev_set_drained(devs, 1, false), 0);
	dev_free(devs);
	devs = new_devs(&f, NULL, st, 0);
	assert_int_equal(dev_restore_drained(devs), 0);
	assert_int_equal(dev_n_drained(devs), 0);
	dev_free(devs);
	st_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_read_without_handle),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_ports_down),
		cmocka_unit_test(test_drain_persisted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
