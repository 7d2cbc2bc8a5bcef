/*
 * test_sb_txn.c - the transaction engine (southbound/sb_txn.h) against
 * ocs-devsim fleets built from the fabric model: all-or-nothing commits
 * across 4..16 devices, the L2 checker refusing a one-way plan before any
 * device is touched, read-back verification catching a commit without
 * effect, compensating rollback on devices without confirmed-commit,
 * a device changed behind ocsd's back (its stale pre-image never feeds a
 * compensating edit), hooks, counters and the asynchronous form; a TLS
 * fleet restarted under idle sessions (no socket to check: the prepare's
 * retry on a fresh session commits the next transaction); the progress
 * hook, step by step and device by device, in each thread mode.
 */
#include "sb_testlib.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define MAX_DEV 16
#define MAX_XC	16

/* The 4-pod lab fabric of the brief, straight wiring: 4 groups x 8 devices. */
static const struct ocs_fabric lab_straight = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};
/* The same with cross wiring: device pairs hold a permutation and its inverse. */
static const struct ocs_fabric lab_cross = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_CROSS};

struct plan_buf {
	struct sb_txn_device devs[MAX_DEV];
	struct sb_xc xcs[MAX_DEV][MAX_XC];
	int group[MAX_DEV];
	int device[MAX_DEV];
	struct sb_txn_plan plan;
	struct tl_verify_ctx verify;
	struct sb_txn_hooks hooks;
};

static struct sb_driver *drv;
static struct sb_engine *eng;
static uint64_t next_id = 1;

static int setup(void **state)
{
	if (sb_driver_new(NULL, &drv) || sb_engine_new(8, &eng))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	sb_engine_free(eng);
	sb_driver_free(drv);
	return 0;
}

/* Plan: fleet device i is fabric (group i / 8, device i % 8), round r. */
static void build_plan(struct plan_buf *b, const struct ocs_fabric *f, struct sb_device **devs,
		       int n, int round)
{
	memset(b, 0, sizeof(*b));
	for (int i = 0; i < n; i++) {
		b->group[i] = i / 8;
		b->device[i] = i % 8;
		b->devs[i].dev = devs[i];
		b->devs[i].target = b->xcs[i];
		b->devs[i].n_target = tl_fabric_device_xcs(f, b->group[i], b->device[i], round,
							   b->xcs[i], MAX_XC);
	}
	b->plan = (struct sb_txn_plan){.id = next_id++, .devices = b->devs, .n_devices = (size_t)n};
	b->verify = (struct tl_verify_ctx){.fabric = f, .group = b->group, .device = b->device};
	b->hooks = (struct sb_txn_hooks){.verify = tl_verify, .arg = &b->verify};
}

/* Every device holds exactly its plan target; the read state has no one-way circuit. */
static void assert_devices_hold(struct plan_buf *b, const struct ocs_fabric *f, bool target,
				struct sb_xc **pre, size_t *n_pre)
{
	size_t n = b->plan.n_devices;
	struct sb_xc *got[MAX_DEV] = {0};
	size_t n_got[MAX_DEV] = {0};
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(tl_read_running(b->devs[i].dev, &got[i], &n_got[i]), 0);
		if (target)
			assert_true(
				tl_same(got[i], n_got[i], b->devs[i].target, b->devs[i].n_target));
		else
			assert_true(tl_same(got[i], n_got[i], pre[i], n_pre[i]));
	}
	char why[256] = "";
	int bad = tl_l2_violations(f, b->group, b->device, (const struct sb_xc *const *)got, n_got,
				   n, why, sizeof(why));
	if (bad)
		fprintf(stderr, "L2: %s\n", why);
	assert_int_equal(bad, 0);
	for (size_t i = 0; i < n; i++)
		free(got[i]);
}

static void snapshot(struct sb_device **devs, int n, struct sb_xc **pre, size_t *n_pre)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(tl_read_running(devs[i], &pre[i], &n_pre[i]), 0);
}

static void free_snapshot(struct sb_xc **pre, int n)
{
	for (int i = 0; i < n; i++)
		free(pre[i]);
}

static void print_result(const struct sb_txn_result *r)
{
	if (r->outcome != SB_TXN_COMMITTED)
		fprintf(stderr, "txn %s: %s\n", sb_txn_outcome_name(r->outcome), r->message);
}

static void test_commit_16_devices_and_change(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 16, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 16, 2000);
	struct plan_buf b;
	for (int round = 0; round < 3; round++) {
		build_plan(&b, &lab_straight, devs, 16, round);
		struct sb_txn_result r;
		uint64_t edits = atomic_load(&sb_driver_counters(drv)->edits);
		assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
		/* batched: exactly one edit-config per device, not one per cross-connect */
		assert_int_equal(atomic_load(&sb_driver_counters(drv)->edits) - edits, 16);
		if (round > 0)
			assert_true(r.step_ms[SB_STEP_PREPARE] < 2000);
		print_result(&r);
		assert_int_equal(r.outcome, SB_TXN_COMMITTED);
		assert_int_equal(r.n_failed_devices, 0);
		assert_int_equal(b.verify.plan_calls, 1);
		assert_int_equal(b.verify.readback_calls, 1);
		for (int i = 0; i < 16; i++) {
			assert_int_equal(r.devices[i].outcome, SB_DEV_CONFIRMED);
			assert_int_equal(r.devices[i].strategy, SB_STRATEGY_CONFIRMED);
		}
		/* the verify step waited for the 25 ms MEMS settle */
		assert_true(r.step_ms[SB_STEP_VERIFY] >= 15);
		assert_devices_hold(&b, &lab_straight, true, NULL, NULL);
		sb_txn_result_clear(&r);
	}
	tl_devices_free(devs, 16);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

static void test_one_way_plan_refused_untouched(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct plan_buf b;
	build_plan(&b, &lab_straight, devs, 4, 0);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	sb_txn_result_clear(&r);

	/* next round, but device 2 loses one direction of a circuit */
	build_plan(&b, &lab_straight, devs, 4, 1);
	b.devs[2].n_target--;
	uint64_t rpcs = atomic_load(&sb_driver_counters(drv)->rpcs);
	uint64_t refused = atomic_load(&sb_engine_counters(eng)->refused);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_REFUSED);
	assert_int_equal(r.failed_step, SB_STEP_PLAN);
	assert_non_null(strstr(r.message, "plan refused by the checker"));
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->rpcs), rpcs); /* no device touched */
	assert_int_equal(atomic_load(&sb_engine_counters(eng)->refused), refused + 1);
	sb_txn_result_clear(&r);

	/* a malformed plan (duplicate input) is rejected outright */
	build_plan(&b, &lab_straight, devs, 4, 1);
	b.xcs[0][1].in = b.xcs[0][0].in;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), -EINVAL);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

/* A device nobody answers for got no RPC: the rest roll back, and that is proven. */
static void test_unreachable_device_rolled_back(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct sb_xc *pre[4];
	size_t n_pre[4];
	snapshot(devs, 4, pre, n_pre);
	struct sb_device_config c = tl_device_config(&fleet, 3);
	int dead_port = tl_ports_reserve(1); /* reserved for this test: nobody listens */
	assert_true(dead_port > 0);
	c.port = (uint16_t)dead_port;
	assert_int_equal(sb_device_set_config(devs[3], &c), 0);
	struct plan_buf b;
	build_plan(&b, &lab_straight, devs, 4, 1);
	struct sb_txn_options o = {.connect_timeout_ms = 300};
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, &o, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.failed_step, SB_STEP_PREPARE);
	assert_int_equal(r.devices[3].outcome, SB_DEV_UNTOUCHED);
	assert_string_equal(r.devices[3].error.operation, "connect");
	for (int i = 0; i < 3; i++)
		assert_int_equal(r.devices[i].outcome, SB_DEV_ROLLED_BACK);
	assert_non_null(strstr(r.message, "every device rolled back"));
	sb_txn_result_clear(&r);
	b.plan.n_devices = 3; /* the reachable ones are as they were */
	assert_devices_hold(&b, &lab_straight, false, pre, n_pre);
	free_snapshot(pre, 4);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

static void test_cross_wiring_pairs(void **state)
{
	struct tl_fleet fleet;
	const char *extra[] = {"--unidirectional", NULL};
	assert_int_equal(tl_fleet_start(&fleet, 8, extra), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 8, 2000);
	struct plan_buf b;
	build_plan(&b, &lab_cross, devs, 8, 0);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	assert_devices_hold(&b, &lab_cross, true, NULL, NULL);
	sb_txn_result_clear(&r);
	/* changing device 0 without its partner 1 would leave one-way circuits */
	struct plan_buf b2;
	build_plan(&b2, &lab_cross, devs, 8, 1);
	b2.plan.n_devices = 1;
	assert_int_equal(sb_engine_run(eng, &b2.plan, &b2.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_REFUSED);
	sb_txn_result_clear(&r);
	assert_devices_hold(&b, &lab_cross, true, NULL, NULL);
	tl_devices_free(devs, 8);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

static void set_faults(struct sb_device *d, const char *spec)
{
	struct sb_error err;

	if (tl_set_faults(d, spec, &err))
		fail_msg("set-faults on %s: %s", sb_device_name(d), err.message);
}

static void test_readback_catches_commit_without_effect(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct plan_buf b;
	build_plan(&b, &lab_straight, devs, 4, 0);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	sb_txn_result_clear(&r);
	struct sb_xc *pre[4];
	size_t n_pre[4];
	snapshot(devs, 4, pre, n_pre);
	/* device 3 answers <ok/> to commit but changes nothing (netconfd's defect) */
	set_faults(devs[3], "noeffect@commit");
	build_plan(&b, &lab_straight, devs, 4, 1);
	uint64_t rolled = atomic_load(&sb_engine_counters(eng)->rolled_back);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.failed_step, SB_STEP_VERIFY);
	assert_int_equal(r.devices[3].failed_step, SB_STEP_VERIFY);
	assert_non_null(strstr(r.devices[3].error.message, "read-back differs"));
	assert_string_equal(r.devices[3].error.device, "devsim3");
	for (int i = 0; i < 4; i++)
		assert_int_equal(r.devices[i].outcome, SB_DEV_ROLLED_BACK);
	assert_int_equal(atomic_load(&sb_engine_counters(eng)->rolled_back), rolled + 1);
	sb_txn_result_clear(&r);
	assert_devices_hold(&b, &lab_straight, false, pre, n_pre);
	free_snapshot(pre, 4);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

static void test_compensating_rollback_without_confirmed_commit(void **state)
{
	struct tl_fleet fleet;
	const char *extra[] = {"--no-confirmed-commit", NULL};
	assert_int_equal(tl_fleet_start(&fleet, 4, extra), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct plan_buf b;
	build_plan(&b, &lab_straight, devs, 4, 0);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	assert_int_equal(r.devices[0].strategy, SB_STRATEGY_CANDIDATE);
	sb_txn_result_clear(&r);
	struct sb_xc *pre[4];
	size_t n_pre[4];
	snapshot(devs, 4, pre, n_pre);
	/* devices 0 and 1 are committed (plain commit) when device 2 fails verify */
	set_faults(devs[2], "fail-port=1");
	build_plan(&b, &lab_straight, devs, 4, 1);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.devices[2].failed_step, SB_STEP_VERIFY);
	sb_txn_result_clear(&r);
	set_faults(devs[2], "");
	assert_devices_hold(&b, &lab_straight, false, pre, n_pre);
	free_snapshot(pre, 4);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

/* Another manager changes device i behind ocsd's back: its own session, lock, edit, commit. */
static void change_behind_back(const struct tl_fleet *fleet, int i, const struct sb_xc *xcs,
			       size_t n)
{
	struct sb_device **other = tl_devices(drv, fleet, i, 1, 2000);
	struct sb_error err = {0};
	assert_int_equal(sb_device_connect(other[0], &err), 0);
	assert_int_equal(sb_device_lock(other[0], SB_DS_CANDIDATE, &err), 0);
	assert_int_equal(sb_device_replace_xcs(other[0], SB_DS_CANDIDATE, xcs, n, &err), 0);
	assert_int_equal(sb_device_commit(other[0], 0, NULL, NULL, &err), 0);
	assert_int_equal(sb_device_unlock(other[0], SB_DS_CANDIDATE, &err), 0);
	tl_devices_free(other, 1);
}

/*
 * The pre-image of a confirmed-commit device comes from its session's last
 * verified image, without a get-config. Another manager changes device 0
 * behind ocsd's back; the next transaction fails on that device before its
 * confirm: the device cancels our commit itself, and the rollback finds
 * running neither at the stale image nor at our target. No compensating
 * edit is sent from the stale image (device 0 keeps the other manager's
 * content), the result says so, and the image is forgotten: the next
 * transaction reads running again and commits. sb_device_forget_image()
 * (reconciliation saw drift) makes the next pre-image a fresh read too,
 * which a compensating edit may then use.
 */
static void test_stale_image_never_compensates(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct plan_buf b;
	struct sb_txn_result r;
	const struct sb_driver_counters *c = sb_driver_counters(drv);
	for (int round = 0; round < 2; round++) {
		if (round == 1) {
			/* the first get or get-config device 0 receives is refused: on a
			 * warm session it is the read-back after the commit, not a
			 * pre-image read in prepare */
			set_faults(devs[0], "refuse@get");
			build_plan(&b, &lab_straight, devs, 4, round);
			assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
			assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
			assert_int_equal(r.devices[0].failed_step, SB_STEP_VERIFY);
			assert_string_equal(r.devices[0].error.operation, "get");
			sb_txn_result_clear(&r);
			set_faults(devs[0], "");
		}
		build_plan(&b, &lab_straight, devs, 4, round);
		assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
		print_result(&r);
		assert_int_equal(r.outcome, SB_TXN_COMMITTED);
		sb_txn_result_clear(&r);
		struct sb_xc *img = NULL;
		size_t n_img = 0;
		assert_int_equal(sb_device_image_xcs(devs[0], &img, &n_img), 0);
		assert_true(tl_same(img, n_img, b.devs[0].target, b.devs[0].n_target));
		free(img);
	}
	/* rounds repeat every 3 on 4 pods: round 6 is neither round 1 (the image) nor 2 */
	struct sb_xc drift[MAX_XC];
	size_t n_drift = tl_fabric_device_xcs(&lab_straight, 0, 0, 6, drift, MAX_XC);
	change_behind_back(&fleet, 0, drift, n_drift);
	struct sb_xc *pre[4];
	size_t n_pre[4];
	snapshot(devs, 4, pre, n_pre);
	assert_true(tl_same(pre[0], n_pre[0], drift, n_drift));
	assert_false(tl_same(pre[0], n_pre[0], b.devs[0].target, b.devs[0].n_target));
	set_faults(devs[0], "refuse@confirm");
	build_plan(&b, &lab_straight, devs, 4, 2);
	uint64_t edits = atomic_load(&c->edits);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	fprintf(stderr, "txn %s: %s\n", sb_txn_outcome_name(r.outcome), r.message);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_true(r.devices[0].stale_image);
	assert_int_equal(r.devices[0].outcome, SB_DEV_ROLLED_BACK);
	for (int i = 1; i < 4; i++)
		assert_false(r.devices[i].stale_image);
	/* 4 edits to the target, and the compensating edits of the 3 confirmed
	 * devices whose images were right; none to device 0 */
	assert_int_equal(atomic_load(&c->edits) - edits, 4 + 3);
	sb_txn_result_clear(&r);
	set_faults(devs[0], "");
	/* device 0 keeps the other manager's content, the others their pre-image */
	assert_devices_hold(&b, &lab_straight, false, pre, n_pre);
	struct sb_xc *img = NULL;
	size_t n_img = 0;
	assert_int_equal(sb_device_image_xcs(devs[0], &img, &n_img), -ENOENT);
	free_snapshot(pre, 4);
	/* the next transaction reads device 0's running and commits */
	build_plan(&b, &lab_straight, devs, 4, 3);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	sb_txn_result_clear(&r);
	assert_devices_hold(&b, &lab_straight, true, NULL, NULL);
	/* drift again, now seen by reconciliation: the image is forgotten, the
	 * pre-image is read afresh, and device 0 (confirmed when device 1
	 * refuses its confirm) is compensated back to the other manager's content */
	change_behind_back(&fleet, 0, drift, n_drift);
	sb_device_forget_image(devs[0]);
	snapshot(devs, 4, pre, n_pre);
	set_faults(devs[1], "refuse@confirm");
	build_plan(&b, &lab_straight, devs, 4, 4);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_false(r.devices[0].stale_image);
	sb_txn_result_clear(&r);
	set_faults(devs[1], "");
	assert_devices_hold(&b, &lab_straight, false, pre, n_pre);
	free_snapshot(pre, 4);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

struct hook_log {
	int intents;
	int outcomes;
	enum sb_txn_outcome last;
	bool refuse_intent;
	uint64_t rpcs_at_intent;
};

/* The hooks' arg: the verify context first (tl_verify casts to it), then the log. */
struct verify_with_log {
	struct tl_verify_ctx v;
	struct hook_log log;
};

static int intent_hook(void *arg, const struct sb_txn_plan *plan)
{
	struct hook_log *log = &((struct verify_with_log *)arg)->log;
	log->intents++;
	log->rpcs_at_intent = atomic_load(&sb_driver_counters(drv)->rpcs);
	return log->refuse_intent ? -1 : 0;
}

static void outcome_hook(void *arg, const struct sb_txn_plan *plan, const struct sb_txn_result *r)
{
	struct hook_log *log = &((struct verify_with_log *)arg)->log;
	log->outcomes++;
	log->last = r->outcome;
}

static void done_cb(void *arg, const struct sb_txn_result *r)
{
	int *called = arg;
	*called = (int)r->outcome + 100;
}

/*
 * Issue 14 finding 6 over TLS: the simulator restarts while the sessions
 * are idle. The driver reaches a TLS session's socket (sb_wire_fd) as it
 * does an SSH one, so each dead session is found idle before the lock and
 * replaced: no RPC fails and prepare needs no retry (the retry, sb_txn.c
 * R1, is for a session that dies between the two: test_sb_txn_faults).
 */
static void test_tls_restart_retried_in_prepare(void **state)
{
	char dir[] = "/tmp/sb-txn-tls-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(tl_make_cert(dir, "ca", "ocs-test-ca", NULL), 0);
	assert_int_equal(tl_make_cert(dir, "server", "127.0.0.1", "ca"), 0);
	assert_int_equal(tl_make_cert(dir, "client", "ocs-controller", "ca"), 0);
	char cert[128], key[128], ca[128];
	snprintf(cert, sizeof(cert), "%s/server.pem", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	const char *extra[] = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, NULL};
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, extra), 0);
	struct sb_device *devs[4];
	for (int i = 0; i < 4; i++) {
		struct sb_device_config c = tl_device_config(&fleet, i);
		c.transport = SB_TRANSPORT_TLS;
		snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/client.pem", dir);
		snprintf(c.tls_key, sizeof(c.tls_key), "%s/client.key", dir);
		snprintf(c.tls_ca, sizeof(c.tls_ca), "%s/ca.pem", dir);
		assert_int_equal(sb_device_new(drv, &c, &devs[i]), 0);
	}
	struct plan_buf b;
	struct sb_txn_result r;
	build_plan(&b, &lab_straight, devs, 4, 0);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	sb_txn_result_clear(&r);
	/* restarted empty under the idle sessions */
	assert_int_equal(tl_fleet_stop(&fleet), 0);
	assert_int_equal(tl_fleet_restart(&fleet, extra), 0);
	uint64_t retries = atomic_load(&sb_engine_counters(eng)->prepare_retries);
	uint64_t lost = atomic_load(&sb_driver_counters(drv)->sessions_lost);
	build_plan(&b, &lab_straight, devs, 4, 1);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	print_result(&r);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	for (int i = 0; i < 4; i++)
		assert_false(r.devices[i].prepare_retried);
	assert_int_equal(atomic_load(&sb_engine_counters(eng)->prepare_retries) - retries, 0);
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->sessions_lost) - lost, 4);
	assert_devices_hold(&b, &lab_straight, true, NULL, NULL);
	sb_txn_result_clear(&r);
	for (int i = 0; i < 4; i++)
		sb_device_free(devs[i]);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_hooks_async_and_counters(void **state)
{
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 4, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 4, 2000);
	struct plan_buf b;
	build_plan(&b, &lab_straight, devs, 4, 2);
	struct verify_with_log vl = {.v = b.verify};
	b.hooks = (struct sb_txn_hooks){.persist_intent = intent_hook,
					.persist_outcome = outcome_hook,
					.verify = tl_verify,
					.arg = &vl};
	uint64_t rpcs = atomic_load(&sb_driver_counters(drv)->rpcs);
	uint64_t committed = atomic_load(&sb_engine_counters(eng)->committed);
	struct sb_txn_handle *h = NULL;
	int called = 0;
	assert_int_equal(sb_engine_start(eng, &b.plan, &b.hooks, NULL, done_cb, &called, &h), 0);
	struct sb_txn_result r;
	assert_int_equal(sb_txn_join(h, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_COMMITTED);
	assert_int_equal(called, 100 + SB_TXN_COMMITTED);
	assert_int_equal(vl.log.intents, 1);
	assert_int_equal(vl.log.outcomes, 1);
	assert_int_equal(vl.log.rpcs_at_intent, rpcs); /* intent saved before any RPC */
	assert_int_equal(atomic_load(&sb_engine_counters(eng)->committed), committed + 1);
	sb_txn_result_clear(&r);
	/* an intent that cannot be persisted refuses the transaction untouched */
	vl.log.refuse_intent = true;
	build_plan(&b, &lab_straight, devs, 4, 3);
	vl.v = b.verify;
	b.hooks = (struct sb_txn_hooks){.persist_intent = intent_hook,
					.persist_outcome = outcome_hook,
					.verify = tl_verify,
					.arg = &vl};
	rpcs = atomic_load(&sb_driver_counters(drv)->rpcs);
	assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_REFUSED);
	assert_int_equal(vl.log.outcomes, 1); /* no outcome for a refused plan */
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->rpcs), rpcs);
	sb_txn_result_clear(&r);
	tl_devices_free(devs, 4);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

/* What the progress hook was told, in order (calls of one transaction are serialised). */
struct progress_call {
	enum sb_txn_step step;
	size_t done, total;
};

struct progress_log {
	struct tl_verify_ctx v; /* first: tl_verify takes the hooks' arg as its context */
	struct progress_call calls[64];
	size_t n;
};

static void progress_hook(void *arg, enum sb_txn_step step, size_t done, size_t total)
{
	struct progress_log *l = arg;

	if (l->n < sizeof(l->calls) / sizeof(l->calls[0]))
		l->calls[l->n] = (struct progress_call){step, done, total};
	l->n++;
}

/* The log is exactly: for each step of `steps` in turn, done 0, 1, .., total. */
static void assert_progress(const struct progress_log *l, const enum sb_txn_step *steps,
			    size_t n_steps, size_t total)
{
	size_t k = 0;

	assert_int_equal(l->n, n_steps * (total + 1));
	for (size_t s = 0; s < n_steps; s++)
		for (size_t done = 0; done <= total; done++, k++) {
			assert_int_equal(l->calls[k].step, steps[s]);
			assert_int_equal(l->calls[k].done, done);
			assert_int_equal(l->calls[k].total, total);
		}
}

/*
 * The progress hook, with each way a step's devices run (one loop, loops of
 * 3 devices, a task per device): every step reported from 0 to the plan's
 * devices, one device at a time, in the order the steps run; a rollback too.
 */
static void test_progress_every_step_and_device(void **state)
{
	static const enum sb_txn_step committed[] = {SB_STEP_PREPARE, SB_STEP_COMMIT,
						     SB_STEP_VERIFY, SB_STEP_CONFIRM};
	static const enum sb_txn_step rolled_back[] = {SB_STEP_PREPARE, SB_STEP_COMMIT,
						       SB_STEP_VERIFY, SB_STEP_ROLLBACK};
	const struct sb_txn_options modes[] = {
		{0}, {.devices_per_loop = 3}, {.thread_per_device = true}};
	struct tl_fleet fleet;
	assert_int_equal(tl_fleet_start(&fleet, 8, NULL), 0);
	struct sb_device **devs = tl_devices(drv, &fleet, 0, 8, 2000);
	struct plan_buf b;
	int round = 0;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct progress_log l = {0};
		struct sb_txn_result r;
		build_plan(&b, &lab_straight, devs, 8, round++);
		l.v = b.verify;
		b.hooks = (struct sb_txn_hooks){
			.verify = tl_verify, .progress = progress_hook, .arg = &l};
		assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, &modes[m], &r), 0);
		print_result(&r);
		assert_int_equal(r.outcome, SB_TXN_COMMITTED);
		assert_progress(&l, committed, 4, 8);
		sb_txn_result_clear(&r);
		/* device 5 commits without effect: the read-back fails, all roll back */
		set_faults(devs[5], "noeffect@commit");
		build_plan(&b, &lab_straight, devs, 8, round++);
		l = (struct progress_log){.v = b.verify};
		b.hooks = (struct sb_txn_hooks){
			.verify = tl_verify, .progress = progress_hook, .arg = &l};
		assert_int_equal(sb_engine_run(eng, &b.plan, &b.hooks, &modes[m], &r), 0);
		assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
		assert_progress(&l, rolled_back, 4, 8);
		sb_txn_result_clear(&r);
		set_faults(devs[5], "");
	}
	tl_devices_free(devs, 8);
	assert_int_equal(tl_fleet_stop(&fleet), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_16_devices_and_change),
		cmocka_unit_test(test_one_way_plan_refused_untouched),
		cmocka_unit_test(test_unreachable_device_rolled_back),
		cmocka_unit_test(test_cross_wiring_pairs),
		cmocka_unit_test(test_readback_catches_commit_without_effect),
		cmocka_unit_test(test_compensating_rollback_without_confirmed_commit),
		cmocka_unit_test(test_stale_image_never_compensates),
		cmocka_unit_test(test_hooks_async_and_counters),
		cmocka_unit_test(test_tls_restart_retried_in_prepare),
		cmocka_unit_test(test_progress_every_step_and_device),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
