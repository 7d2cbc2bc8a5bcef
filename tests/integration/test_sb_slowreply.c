/*
 * test_sb_slowreply.c - a device that keeps sending must not hold an RPC
 * or a transaction past its deadline (issue H item M1: with rpc-timeout-ms
 * 3000 a reply trickled one byte every 250 ms held a release for 70 s, an
 * endless chunk for 67 s).
 *
 * ocs-devsim's reply faults (devsim_wire.h) on real sessions, over SSH and
 * over TLS: trickle@get=250 (the real reply, one byte every 250 ms) and
 * endless@get (a chunk header of 4294967295 bytes, then junk for as long as
 * the session is open). A read through sb_device fails within the RPC
 * timeout plus a margin (-ETIMEDOUT for the trickle; the endless chunk may
 * also end as a protocol error), including the drop of the out-of-step
 * session, and the next read on a fresh session succeeds at once. The same
 * faults at the commit of one device of a 4-device transaction roll it back
 * within its documented deadlines: the commit's RPC timeout, then the
 * rollback's rollback_timeout_ms, plus a margin.
 */
#include "sb_testlib.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define N_DEV		    4
#define RPC_TIMEOUT_MS	    1000
#define MARGIN_MS	    2000
#define ROLLBACK_TIMEOUT_MS 4000
#define CONNECT_TIMEOUT_MS  2000

static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};

static struct sb_driver *drv;
static struct sb_engine *eng;
static char cert_dir[] = "/tmp/sb-slowreply-XXXXXX";

struct transport {
	const char *name;
	bool tls;
	struct tl_fleet fleet;
	struct sb_device **devs;
};
static struct transport ssh = {.name = "ssh"}, tls = {.name = "tls", .tls = true};
static int round_no;

static int setup(void **state)
{
	(void)state;
	char cert[128], key[128], ca[128];
	if (!mkdtemp(cert_dir) || tl_make_cert(cert_dir, "ca", "ocs-test-ca", NULL) ||
	    tl_make_cert(cert_dir, "server", "127.0.0.1", "ca") ||
	    tl_make_cert(cert_dir, "client", "ocs-controller", "ca"))
		return -1;
	snprintf(cert, sizeof(cert), "%s/server.pem", cert_dir);
	snprintf(key, sizeof(key), "%s/server.key", cert_dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", cert_dir);
	/* a worker per trickling or endless session, and more for the rest */
	const char *ssh_extra[] = {"--workers", "8", NULL};
	const char *tls_extra[] = {"--workers", "8",	    "--tls-cert", cert, "--tls-key",
				   key,		"--tls-ca", ca,		  NULL};
	if (tl_fleet_start(&ssh.fleet, N_DEV, ssh_extra) ||
	    tl_fleet_start(&tls.fleet, N_DEV, tls_extra) || sb_driver_new(NULL, &drv) ||
	    sb_engine_new(N_DEV, &eng))
		return -1;
	ssh.devs = tl_devices(drv, &ssh.fleet, 0, N_DEV, RPC_TIMEOUT_MS);
	tls.devs = calloc(N_DEV, sizeof(*tls.devs));
	for (int i = 0; i < N_DEV; i++) {
		struct sb_device_config c = tl_device_config(&tls.fleet, i);
		c.rpc_timeout_ms = RPC_TIMEOUT_MS;
		c.backoff_min_ms = 10;
		c.backoff_max_ms = 200;
		c.transport = SB_TRANSPORT_TLS;
		snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/client.pem", cert_dir);
		snprintf(c.tls_key, sizeof(c.tls_key), "%s/client.key", cert_dir);
		snprintf(c.tls_ca, sizeof(c.tls_ca), "%s/ca.pem", cert_dir);
		if (sb_device_new(drv, &c, &tls.devs[i]))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tl_devices_free(ssh.devs, N_DEV);
	tl_devices_free(tls.devs, N_DEV);
	sb_engine_free(eng);
	sb_driver_free(drv);
	int rc = tl_fleet_stop(&ssh.fleet);
	rc |= tl_fleet_stop(&tls.fleet);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", cert_dir);
	return rc || system(cmd);
}

static void set_faults(struct sb_device *d, const char *spec)
{
	struct sb_error err;

	if (tl_set_faults(d, spec, &err))
		fail_msg("set-faults on %s: %s", sb_device_name(d), err.message);
}

/* A read of running through the driver: its result and how long it took. */
static int timed_read(struct sb_device *d, int64_t *ms, struct sb_error *err)
{
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	int64_t t0 = sb_now_ms();
	int rc = sb_device_connect_until(d, t0 + CONNECT_TIMEOUT_MS, err);
	if (!rc)
		rc = sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, err);
	*ms = sb_now_ms() - t0;
	free(s);
	return rc;
}

/* One plain RPC answered by a trickle or an endless chunk. */
static void rpc_case(struct transport *t, const char *spec, bool timeout_only)
{
	struct sb_device *d = t->devs[0];
	struct sb_error err = {0};
	int64_t ms;
	set_faults(d, spec);
	/* the session is connected: what is timed is the RPC and the drop */
	int rc = timed_read(d, &ms, &err);
	printf("  %s %-16s read: %d (%s) in %lld ms\n", t->name, spec, rc, err.message,
	       (long long)ms);
	if (timeout_only)
		assert_int_equal(rc, -ETIMEDOUT);
	else
		assert_true(rc == -ETIMEDOUT || rc == -EPROTO || rc == -EMSGSIZE);
	assert_false(sb_device_connected(d));
	assert_true(ms < RPC_TIMEOUT_MS + MARGIN_MS);
	/* a fresh session answers at once (the knob fired once) */
	rc = timed_read(d, &ms, &err);
	printf("  %s %-16s next read: %d in %lld ms\n", t->name, spec, rc, (long long)ms);
	assert_int_equal(rc, 0);
	assert_true(ms < CONNECT_TIMEOUT_MS + RPC_TIMEOUT_MS);
}

/* A transaction on the transport's 4 devices, device 1's commit answered by spec. */
static void txn_case(struct transport *t, const char *spec)
{
	struct sb_txn_device pd[N_DEV];
	struct sb_xc xcs[N_DEV][16];
	int group[N_DEV], device[N_DEV];
	for (int i = 0; i < N_DEV; i++) {
		set_faults(t->devs[i], "");
		group[i] = 0;
		device[i] = i;
		pd[i] = (struct sb_txn_device){
			.dev = t->devs[i],
			.target = xcs[i],
			.n_target = tl_fabric_device_xcs(&lab, 0, i, round_no, xcs[i], 16)};
	}
	round_no++;
	set_faults(t->devs[1], spec);
	struct tl_verify_ctx v = {.fabric = &lab, .group = group, .device = device};
	struct sb_txn_hooks hooks = {.verify = tl_verify, .arg = &v};
	struct sb_txn_plan plan = {.id = (uint64_t)round_no, .devices = pd, .n_devices = N_DEV};
	struct sb_txn_options opts = {.confirm_timeout_s = 20,
				      .verify_timeout_ms = 1000,
				      .connect_timeout_ms = CONNECT_TIMEOUT_MS,
				      .rollback_timeout_ms = ROLLBACK_TIMEOUT_MS};
	struct sb_txn_result r;
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_engine_run(eng, &plan, &hooks, &opts, &r), 0);
	int64_t ms = sb_now_ms() - t0;
	printf("  %s %-16s transaction: %s in %lld ms: %s\n", t->name, spec,
	       sb_txn_outcome_name(r.outcome), (long long)ms, r.message);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.devices[1].failed_step, SB_STEP_COMMIT);
	/* prepare and the commit are answered at once (the other devices) or
	 * time out (device 1's commit): RPC_TIMEOUT_MS; then the rollback */
	assert_true(ms < RPC_TIMEOUT_MS + ROLLBACK_TIMEOUT_MS + MARGIN_MS);
	sb_txn_result_clear(&r);
	for (int i = 0; i < N_DEV; i++)
		set_faults(t->devs[i], "");
}

static void test_trickle_rpc(void **state)
{
	(void)state;
	rpc_case(&ssh, "trickle@get=250", true);
	rpc_case(&tls, "trickle@get=250", true);
}

static void test_endless_rpc(void **state)
{
	(void)state;
	rpc_case(&ssh, "endless@get", false);
	rpc_case(&tls, "endless@get", false);
}

static void test_trickle_commit(void **state)
{
	(void)state;
	txn_case(&ssh, "trickle@commit=250");
	txn_case(&tls, "trickle@commit=250");
}

static void test_endless_commit(void **state)
{
	(void)state;
	txn_case(&ssh, "endless@commit");
	txn_case(&tls, "endless@commit");
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trickle_rpc),
		cmocka_unit_test(test_endless_rpc),
		cmocka_unit_test(test_trickle_commit),
		cmocka_unit_test(test_endless_commit),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
