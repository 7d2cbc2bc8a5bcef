/*
 * test_sb_driver.c - the NETCONF driver (southbound/sb_device.h) against a
 * real ocs-devsim on loopback: SSH password and key authentication, host
 * key pinning, TLS with client certificates (made here with openssl), capability detection and
 * strategy, one-edit-per-call programming, state read-back, device refusals as structured errors,
 * RPC deadlines, dropped sessions, reconnect backoff, the confirmed
 * commit timeout revert, the parallel warm-start connect, the deadline of
 * a session's setup (SSH and TLS) and its slots, and an idle
 * session whose device went away replaced at the next connect.
 */
#include "sb_testlib.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* Asserts success and prints the structured error otherwise. */
#define OK(call)                                                                                   \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_)                                                                           \
			fprintf(stderr, "%s:%d: %s %s: %s\n", __FILE__, __LINE__, err.device,      \
				err.operation, err.message);                                       \
		assert_int_equal(rc_, 0);                                                          \
	} while (0)

static struct tl_fleet fleet;
static struct sb_driver *drv;

static int setup(void **state)
{
	if (tl_fleet_start(&fleet, 2, NULL))
		return -1;
	return sb_driver_new(NULL, &drv);
}

static int teardown(void **state)
{
	sb_driver_free(drv);
	return tl_fleet_stop(&fleet);
}

static struct sb_device *open_dev(int i, int rpc_timeout_ms)
{
	struct sb_device_config c = tl_device_config(&fleet, i);
	c.rpc_timeout_ms = rpc_timeout_ms;
	c.backoff_min_ms = 20;
	c.backoff_max_ms = 160;
	struct sb_device *d = NULL;
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	return d;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void set_faults(struct sb_device *d, const char *spec)
{
	struct sb_error err;

	if (tl_set_faults(d, spec, &err))
		fail_msg("set-faults on %s: %s", sb_device_name(d), err.message);
}

static void test_capabilities_and_strategy(void **state)
{
	struct sb_device *d = open_dev(0, 2000);
	struct sb_error err = {0};
	OK(sb_device_connect(d, &err));
	const struct sb_capabilities *c = sb_device_capabilities(d);
	assert_true(c->candidate);
	assert_true(c->confirmed_commit);
	assert_true(c->validate);
	assert_true(c->rollback_on_error);
	assert_false(c->writable_running);
	assert_false(c->yuma);
	assert_int_equal(sb_device_strategy(d), SB_STRATEGY_CONFIRMED);
	assert_true(sb_device_should_validate(d));
	sb_device_free(d);
}

static void test_bad_password_and_backoff(void **state)
{
	struct sb_device_config c = tl_device_config(&fleet, 0);
	snprintf(c.password, sizeof(c.password), "wrong");
	c.backoff_min_ms = 200;
	struct sb_device *d = NULL;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	assert_string_equal(err.operation, "connect");
	assert_string_equal(err.device, "devsim0");
	/* immediately again: still backing off, no new attempt */
	assert_int_equal(sb_device_connect(d, &err), -EAGAIN);
	/* bounded retries until a deadline end in a timeout, not a hang */
	int64_t t0 = sb_now_ms();
	int rc = sb_device_connect_until(d, t0 + 500, &err);
	assert_true(rc == -ETIMEDOUT || rc == -ECONNREFUSED);
	assert_true(sb_now_ms() - t0 < 2000);
	sb_device_free(d);
}

/*
 * Warm start: 8 devices connected in parallel, 4 at a time; two of them
 * cannot authenticate and stay down with their own error until the
 * deadline, the other six have sessions. The same call on connected
 * devices keeps their sessions.
 */
static void test_connect_many(void **state)
{
	struct tl_fleet f8;
	assert_int_equal(tl_fleet_start(&f8, 8, NULL), 0);
	struct sb_device **d = tl_devices(drv, &f8, 0, 8, 2000);
	for (int i = 2; i < 8; i += 5) {
		struct sb_device_config c = tl_device_config(&f8, i);
		snprintf(c.password, sizeof(c.password), "wrong");
		sb_device_free(d[i]);
		assert_int_equal(sb_device_new(drv, &c, &d[i]), 0);
	}
	struct sb_error errs[8];
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_device_connect_many(d, 8, 4, t0 + 1500, errs), 6);
	assert_true(sb_now_ms() - t0 < 5000);
	for (int i = 0; i < 8; i++) {
		bool bad = i == 2 || i == 7;
		assert_int_equal(sb_device_connected(d[i]), !bad);
		if (bad) {
			assert_true(errs[i].code == -ECONNREFUSED || errs[i].code == -ETIMEDOUT);
			assert_string_equal(errs[i].operation, "connect");
			assert_string_equal(errs[i].device, sb_device_name(d[i]));
		} else {
			assert_int_equal(errs[i].code, 0);
		}
	}
	uint64_t connects = atomic_load(&sb_driver_counters(drv)->connects);
	assert_int_equal(sb_device_connect_many(d, 2, 8, sb_now_ms() + 1000, NULL), 2);
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->connects), connects);
	tl_devices_free(d, 8);
	assert_int_equal(tl_fleet_stop(&f8), 0);
}

/*
 * The device restarts while the session is idle: the next connect sees the
 * closed socket and opens a new session (counted as lost + connected)
 * instead of reporting the dead one as up and failing the next RPC.
 */
static void test_dead_session_replaced(void **state)
{
	struct tl_fleet f1;
	assert_int_equal(tl_fleet_start(&f1, 1, NULL), 0);
	struct sb_device **d = tl_devices(drv, &f1, 0, 1, 2000);
	struct sb_device_config cfg = tl_device_config(&f1, 0);
	cfg.hostkey_policy = SB_HOSTKEY_ACCEPT_ANY; /* the restarted simulator has a new key */
	sb_device_free(d[0]);
	assert_int_equal(sb_device_new(drv, &cfg, &d[0]), 0);
	struct sb_error err = {0};
	OK(sb_device_connect(d[0], &err));
	OK(sb_device_lock(d[0], SB_DS_CANDIDATE, &err));
	OK(sb_device_unlock(d[0], SB_DS_CANDIDATE, &err));
	assert_int_equal(tl_fleet_stop(&f1), 0);
	assert_int_equal(tl_fleet_restart(&f1, NULL), 0);
	const struct sb_driver_counters *c = sb_driver_counters(drv);
	uint64_t connects = atomic_load(&c->connects), lost = atomic_load(&c->sessions_lost);
	uint64_t timeouts = atomic_load(&c->rpc_timeouts);
	OK(sb_device_connect(d[0], &err));
	assert_int_equal(atomic_load(&c->connects), connects + 1);
	assert_int_equal(atomic_load(&c->sessions_lost), lost + 1);
	OK(sb_device_lock(d[0], SB_DS_CANDIDATE, &err));
	OK(sb_device_unlock(d[0], SB_DS_CANDIDATE, &err));
	assert_int_equal(atomic_load(&c->rpc_timeouts), timeouts);
	/* a live idle session stays */
	OK(sb_device_connect(d[0], &err));
	assert_int_equal(atomic_load(&c->connects), connects + 1);
	tl_devices_free(d, 1);
	assert_int_equal(tl_fleet_stop(&f1), 0);
}

/*
 * The keepalive (sb_device_keepalive): a live idle session gets no RPC; a
 * device that went away is reported down (-ECONNREFUSED, then -EAGAIN while
 * backing off, no session made up); once it is back the session is replaced
 * and counted as a reconnect; a device a transaction holds is skipped.
 */
static void test_keepalive(void **state)
{
	struct tl_fleet f1;
	assert_int_equal(tl_fleet_start(&f1, 1, NULL), 0);
	struct sb_device_config cfg = tl_device_config(&f1, 0);
	cfg.hostkey_policy = SB_HOSTKEY_ACCEPT_ANY; /* the restarted simulator has a new key */
	cfg.backoff_min_ms = 200;
	struct sb_device *d = NULL;
	assert_int_equal(sb_device_new(drv, &cfg, &d), 0);
	struct sb_error err = {0};
	const struct sb_driver_counters *c = sb_driver_counters(drv);
	OK(sb_device_keepalive(d, &err)); /* connects a device without a session */
	assert_true(sb_device_connected(d));
	assert_int_equal(sb_device_reconnects(d), 0);
	uint64_t rpcs = atomic_load(&c->rpcs);
	OK(sb_device_keepalive(d, &err));
	assert_int_equal(atomic_load(&c->rpcs), rpcs); /* no RPC on a live session */
	assert_int_equal(sb_device_reconnects(d), 0);
	/* claimed by a transaction: left alone */
	sb_device_claim(d);
	assert_false(sb_device_try_claim(d));
	assert_int_equal(sb_device_keepalive(d, &err), -EBUSY);
	sb_device_unclaim(d);
	/* the device goes away: down, and the dead session is not kept */
	assert_int_equal(tl_fleet_stop(&f1), 0);
	assert_int_equal(sb_device_keepalive(d, &err), -ECONNREFUSED);
	assert_string_equal(err.operation, "connect");
	assert_false(sb_device_connected(d));
	assert_int_equal(sb_device_keepalive(d, &err), -EAGAIN); /* backing off */
	/* back on the same port: replaced, one reconnect */
	assert_int_equal(tl_fleet_restart(&f1, NULL), 0);
	nanosleep(&(struct timespec){0, 250 * 1000000L}, NULL); /* past the backoff */
	OK(sb_device_keepalive(d, &err));
	assert_true(sb_device_connected(d));
	assert_int_equal(sb_device_reconnects(d), 1);
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	/* restarted under the idle session: replaced by the next keepalive */
	assert_int_equal(tl_fleet_stop(&f1), 0);
	assert_int_equal(tl_fleet_restart(&f1, NULL), 0);
	OK(sb_device_keepalive(d, &err));
	assert_int_equal(sb_device_reconnects(d), 2);
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	sb_device_free(d);
	assert_int_equal(tl_fleet_stop(&f1), 0);
}

static void test_pinned_hostkey_mismatch(void **state)
{
	struct sb_device_config c = tl_device_config(&fleet, 0);
	snprintf(c.hostkey_sha256, sizeof(c.hostkey_sha256), "SHA256:not-the-right-key");
	struct sb_device *d = NULL;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.message, "does not match the pinned"));
	sb_device_free(d);
}

static void test_public_key_auth(void **state)
{
	char dir[] = "/tmp/sb-keys-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char priv[128], pub[128];
	snprintf(priv, sizeof(priv), "%s/id_ecdsa", dir);
	snprintf(pub, sizeof(pub), "%s/id_ecdsa.pub", dir);
	ssh_key key = NULL;
	assert_int_equal(ssh_pki_generate(SSH_KEYTYPE_ECDSA_P256, 256, &key), SSH_OK);
	assert_int_equal(ssh_pki_export_privkey_file(key, NULL, NULL, NULL, priv), SSH_OK);
	ssh_key pubkey = NULL;
	assert_int_equal(ssh_pki_export_privkey_to_pubkey(key, &pubkey), SSH_OK);
	assert_int_equal(ssh_pki_export_pubkey_file(pubkey, pub), SSH_OK);
	ssh_key_free(pubkey);
	ssh_key_free(key);

	/* a fleet that only accepts this key (no password) */
	struct tl_fleet kf;
	const char *extra[] = {"--authorized-key", pub, NULL};
	assert_int_equal(tl_fleet_start(&kf, 1, extra), 0);
	struct sb_device_config c = tl_device_config(&kf, 0);
	c.password[0] = '\0';
	snprintf(c.privkey_path, sizeof(c.privkey_path), "%s", priv);
	snprintf(c.pubkey_path, sizeof(c.pubkey_path), "%s", pub);
	struct sb_device *d = NULL;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	OK(sb_device_connect(d, &err));
	sb_device_free(d);
	/* the same device without the key is refused */
	c.privkey_path[0] = c.pubkey_path[0] = '\0';
	snprintf(c.password, sizeof(c.password), TL_PASSWORD);
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	sb_device_free(d);
	assert_int_equal(tl_fleet_stop(&kf), 0);
	unlink(priv);
	unlink(pub);
	rmdir(dir);
}

static void make_cert(const char *dir, const char *name, const char *cn, const char *ca)
{
	assert_int_equal(tl_make_cert(dir, name, cn, ca), 0);
}

static void test_tls_certificates(void **state)
{
	char dir[] = "/tmp/sb-tls-XXXXXX";
	assert_non_null(mkdtemp(dir));
	make_cert(dir, "ca", "ocs-test-ca", NULL);
	make_cert(dir, "server", "127.0.0.1", "ca");
	make_cert(dir, "client", "ocs-controller", "ca");
	make_cert(dir, "rogue-ca", "rogue-ca", NULL);
	make_cert(dir, "rogue", "ocs-controller", "rogue-ca");
	char cert[128], key[128], ca[128];
	snprintf(cert, sizeof(cert), "%s/server.pem", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	struct tl_fleet tf;
	const char *extra[] = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, NULL};
	assert_int_equal(tl_fleet_start(&tf, 1, extra), 0);

	struct sb_device_config c = tl_device_config(&tf, 0);
	c.transport = SB_TRANSPORT_TLS;
	snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/client.pem", dir);
	snprintf(c.tls_key, sizeof(c.tls_key), "%s/client.key", dir);
	snprintf(c.tls_ca, sizeof(c.tls_ca), "%s/ca.pem", dir);
	struct sb_device *d = NULL;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	OK(sb_device_connect(d, &err));
	assert_int_equal(sb_device_strategy(d), SB_STRATEGY_CONFIRMED);
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	free(s);

	/* a server that does not answer the <get-schema> of a TLS connect: the
	 * connect fails at its deadline (nc_connect_tls() makes the socket
	 * itself; the guard finds it by its address) */
	set_faults(d, "hang@schema=6000");
	struct sb_device_config slow = c;
	slow.rpc_timeout_ms = 250;
	struct sb_device *ds = NULL;
	assert_int_equal(sb_device_new(drv, &slow, &ds), 0);
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_device_connect(ds, &err), -ECONNREFUSED);
	int64_t took = sb_now_ms() - t0;
	assert_true(took >= 950 && took < 4000);
	assert_non_null(strstr(err.message, "no NETCONF session within 1000 ms"));
	/* the other TLS session to the same server was left alone */
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	free(s);
	assert_int_equal(sb_device_connect_until(ds, sb_now_ms() + 5000, &err), 0);
	sb_device_free(ds);
	sb_device_free(d);

	/* a client certificate from another CA is refused */
	snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/rogue.pem", dir);
	snprintf(c.tls_key, sizeof(c.tls_key), "%s/rogue.key", dir);
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	sb_device_free(d);
	assert_int_equal(tl_fleet_stop(&tf), 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_edit_commit_and_state(void **state)
{
	struct sb_device *d = open_dev(1, 2000);
	struct sb_error err = {0};
	OK(sb_device_connect(d, &err));
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	/* a second lock from another session is denied */
	struct sb_device *other = open_dev(1, 2000);
	OK(sb_device_connect(other, &err));
	assert_int_equal(sb_device_lock(other, SB_DS_CANDIDATE, &err), -EREMOTEIO);
	assert_non_null(strstr(err.message, "lock-denied"));
	sb_device_free(other);

	struct sb_xc want[] = {{0, 1}, {1, 0}, {2, 5}, {5, 2}};
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, NULL, 0, want, 4, &err));
	OK(sb_device_validate(d, &err));
	int64_t t_commit = sb_now_ms();
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	assert_int_equal(n, 4);
	assert_int_equal(s[0].in, 0);
	assert_int_equal(s[0].out, 1);
	if (sb_now_ms() - t_commit < 20)
		assert_int_equal(s[0].status, SB_XC_STATUS_PENDING); /* 25 ms MEMS settle */
	free(s);
	sleep_ms(40);
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(s[i].status, SB_XC_STATUS_CONNECTED);
	free(s);

	/* change: removals before additions in one edit */
	struct sb_xc next[] = {{0, 2}, {2, 0}, {1, 3}, {3, 1}};
	int rc = sb_device_edit_xcs(d, SB_DS_CANDIDATE, want, 4, next, 4, &err);
	if (rc)
		fprintf(stderr, "edit: %s: %s\n", err.operation, err.message);
	assert_int_equal(rc, 0);
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	OK(sb_device_read_xcs(d, false, SB_DS_RUNNING, &s, &n, &err));
	struct sb_xc got[8];
	for (size_t i = 0; i < n; i++)
		got[i] = (struct sb_xc){s[i].in, s[i].out};
	assert_true(tl_same(got, n, next, 4));
	free(s);

	/* the device refuses a one-way circuit and says why */
	struct sb_xc oneway[] = {{0, 2}, {2, 0}, {1, 3}, {3, 1}, {6, 7}};
	rc = sb_device_edit_xcs(d, SB_DS_CANDIDATE, next, 4, oneway, 5, &err);
	if (rc)
		fprintf(stderr, "edit: %s: %s\n", err.operation, err.message);
	assert_int_equal(rc, 0);
	assert_int_equal(sb_device_validate(d, &err), -EREMOTEIO);
	assert_non_null(strstr(err.message, "one-way circuit"));
	assert_string_equal(err.operation, "validate");
	OK(sb_device_discard(d, &err));
	/* out-of-range port named with its path */
	struct sb_xc range[] = {{0, 2}, {2, 0}, {1, 3}, {3, 1}, {20, 21}, {21, 20}};
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, next, 4, range, 6, &err));
	assert_int_equal(sb_device_commit(d, 0, NULL, NULL, &err), -EREMOTEIO);
	assert_non_null(strstr(err.message, "out of range"));
	OK(sb_device_discard(d, &err));
	/* back to empty */
	OK(sb_device_replace_xcs(d, SB_DS_CANDIDATE, NULL, 0, &err));
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	OK(sb_device_read_xcs(d, false, SB_DS_RUNNING, &s, &n, &err));
	assert_int_equal(n, 0);
	free(s);
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	sb_device_free(d);
}

/*
 * ocsd reads replies on the session's transport itself (sb_wire.h): a
 * notification that arrives on an RPC session before a reply is skipped,
 * and the stream stays in step for the RPCs after it.
 */
/*
 * Issue 13 P1 (sb_txn.c): edit-config + validate pipelined in one write.
 * Both answered: 0; validate refuses: its error, named; edit refused: the
 * edit's error, validate's answer read and ignored. In every case the
 * session stays in step (no reconnect, the next RPCs answered).
 */
static void test_pipelined_edit_validate(void **state)
{
	struct sb_device *d = open_dev(1, 2000);
	struct sb_error err = {0};
	OK(sb_device_connect(d, &err));
	const struct sb_driver_counters *c = sb_driver_counters(drv);
	uint64_t lost = atomic_load(&c->sessions_lost), rpcs = atomic_load(&c->rpcs);
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	struct sb_xc want[] = {{0, 1}, {1, 0}, {2, 5}, {5, 2}};
	OK(sb_device_edit_xcs_validate(d, NULL, 0, want, 4, &err));
	assert_int_equal(atomic_load(&c->rpcs) - rpcs, 3);
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	struct sb_xc *got = NULL;
	size_t n = 0;
	assert_int_equal(tl_read_running(d, &got, &n), 0);
	assert_true(tl_same(got, n, want, 4));
	free(got);

	/* the edit is taken, validate refuses a one-way circuit */
	struct sb_xc oneway[] = {{0, 1}, {1, 0}, {2, 5}, {5, 2}, {6, 7}};
	assert_int_equal(sb_device_edit_xcs_validate(d, want, 4, oneway, 5, &err), -EREMOTEIO);
	assert_string_equal(err.operation, "validate");
	assert_non_null(strstr(err.message, "one-way circuit"));
	OK(sb_device_discard(d, &err));

	/* the edit is refused (device fault knob): its error, not validate's */
	OK(sb_device_rpc_xml(
		d,
		"<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>refuse@edit</spec>"
		"</set-faults>",
		&err));
	assert_int_equal(sb_device_edit_xcs_validate(d, want, 4, oneway, 5, &err), -EREMOTEIO);
	assert_string_equal(err.operation, "edit-config");
	OK(sb_device_discard(d, &err));

	/* still in step: the same session answers, running untouched */
	assert_true(sb_device_connected(d));
	assert_int_equal(atomic_load(&c->sessions_lost), lost);
	assert_int_equal(tl_read_running(d, &got, &n), 0);
	assert_true(tl_same(got, n, want, 4));
	free(got);
	OK(sb_device_replace_xcs(d, SB_DS_CANDIDATE, NULL, 0, &err));
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	sb_device_free(d);
}

static void test_notification_on_rpc_session(void **state)
{
	struct sb_device *d = open_dev(0, 2000);
	struct sb_error err = {0};
	OK(sb_device_connect(d, &err));
	OK(sb_device_subscribe(d, &err));
	for (int i = 0; i < 5; i++) {
		/* the device sends the notification to this session, then the <ok/> */
		OK(sb_device_rpc_xml(d,
				     "<emit-notification xmlns=\"urn:ocsd:yang:ocs-devsim\"><kind>"
				     "port-state-change</kind><port>3</port></emit-notification>",
				     &err));
		OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
		struct sb_xc_state *s = NULL;
		size_t n = 0;
		OK(sb_device_read_xcs(d, false, SB_DS_CANDIDATE, &s, &n, &err));
		free(s);
		OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	}
	assert_true(sb_device_connected(d));
	sb_device_free(d);
}

static void test_deadline_and_drop(void **state)
{
	struct sb_device *d = open_dev(0, 200);
	struct sb_error err = {0};
	uint64_t timeouts = atomic_load(&sb_driver_counters(drv)->rpc_timeouts);
	set_faults(d, "hang@get=2000");
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err), -ETIMEDOUT);
	int64_t took = sb_now_ms() - t0;
	assert_true(took >= 190 && took < 1500); /* generous: CI runs tests in parallel */
	assert_false(sb_device_connected(d));
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->rpc_timeouts), timeouts + 1);
	/* the knob fired once: a new session works */
	assert_int_equal(sb_device_connect_until(d, sb_now_ms() + 3000, &err), 0);
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	free(s);

	set_faults(d, "drop@lock");
	assert_int_equal(sb_device_lock(d, SB_DS_CANDIDATE, &err), -ECONNRESET);
	assert_false(sb_device_connected(d));
	assert_int_equal(sb_device_connect_until(d, sb_now_ms() + 3000, &err), 0);
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));

	/* a bad fault spec is refused with the field named */
	assert_int_equal(sb_device_rpc_xml(d,
					   "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>"
					   "explode@now</spec></set-faults>",
					   &err),
			 -EREMOTEIO);
	assert_non_null(strstr(err.message, "explode@now"));
	sb_device_free(d);
}

/*
 * A device that does not answer the <get-schema> libnetconf2 sends while it
 * connects: the connect fails at the setup's deadline, 4 x rpc_timeout_ms,
 * not after libnetconf2's own 300 s (before the guard, this connect waited
 * for the whole hang and succeeded). The knob fires once: the next connect
 * works.
 */
static void test_setup_deadline(void **state)
{
	struct sb_device *ctl = open_dev(1, 2000);
	struct sb_device *d = open_dev(1, 250);
	struct sb_error err = {0};
	set_faults(ctl, "hang@schema=6000");
	int64_t t0 = sb_now_ms();
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	int64_t took = sb_now_ms() - t0;
	assert_true(took >= 950 && took < 4000); /* generous: CI runs tests in parallel */
	assert_non_null(strstr(err.message, "no NETCONF session within 1000 ms"));
	assert_false(sb_device_connected(d));
	assert_int_equal(sb_device_connect_until(d, sb_now_ms() + 5000, &err), 0);
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	OK(sb_device_read_xcs(d, true, SB_DS_RUNNING, &s, &n, &err));
	free(s);
	sb_device_free(d);
	sb_device_free(ctl);
}

struct slow_connect {
	struct sb_device *dev;
	int rc;
};

static void *slow_connect_main(void *arg)
{
	struct slow_connect *sc = arg;
	struct sb_error err = {0};
	sc->rc = sb_device_connect(sc->dev, &err);
	return NULL;
}

/*
 * One device slow in its setup (its first <get-schema> answered after 6 s,
 * within the 8 s deadline) holds one of the driver's setup slots: another
 * device connects meanwhile in well under a second (with the single
 * connect mutex of before, it waited for the 6 s), and the slow one
 * connects too once its answer comes.
 */
static void test_setup_slots(void **state)
{
	struct sb_device *ctl = open_dev(1, 2000);
	struct slow_connect sc = {.dev = open_dev(1, 2000), .rc = -1};
	struct sb_device *fast = open_dev(0, 2000);
	struct sb_error err = {0};
	pthread_t t;
	set_faults(ctl, "hang@schema=6000");
	int64_t t0 = sb_now_ms();
	assert_int_equal(pthread_create(&t, NULL, slow_connect_main, &sc), 0);
	sleep_ms(500); /* the slow one is in its setup */
	int64_t t1 = sb_now_ms();
	OK(sb_device_connect(fast, &err));
	int64_t took = sb_now_ms() - t1;
	assert_true(took < 2500);	      /* generous: CI runs tests in parallel */
	assert_true(sb_now_ms() - t0 < 5500); /* before the slow one's answer */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sc.rc, 0);
	assert_true(sb_now_ms() - t0 >= 5900);
	sb_device_free(fast);
	sb_device_free(sc.dev);
	sb_device_free(ctl);
}

static void test_confirmed_commit_reverts(void **state)
{
	struct sb_device *d = open_dev(0, 2000);
	struct sb_error err = {0};
	OK(sb_device_connect(d, &err));
	struct sb_xc want[] = {{4, 5}, {5, 4}};
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, NULL, 0, want, 2, &err));
	OK(sb_device_commit(d, 1, "p1", NULL, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	sb_device_disconnect(d); /* persist: survives the session */
	struct sb_xc *x = NULL;
	size_t n = 0;
	assert_int_equal(tl_read_running(d, &x, &n), 0);
	assert_true(tl_same(x, n, want, 2));
	free(x);
	/* a wrong persist-id cannot confirm */
	assert_int_equal(sb_device_commit(d, 0, NULL, "p2", &err), -EREMOTEIO);
	sleep_ms(1300);
	assert_int_equal(tl_read_running(d, &x, &n), 0);
	assert_int_equal(n, 0);
	free(x);
	/* cancel-commit reverts at once */
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, NULL, 0, want, 2, &err));
	OK(sb_device_commit(d, 60, "p3", NULL, &err));
	OK(sb_device_cancel_commit(d, "p3", &err));
	assert_int_equal(tl_read_running(d, &x, &n), 0);
	assert_int_equal(n, 0);
	free(x);
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	sb_device_free(d);
}

/* New settings wait for the next connect; a session made with old ones is replaced. */
static void test_staged_config(void **state)
{
	struct sb_device *d = open_dev(0, 2000);
	struct sb_error err = {0};
	const struct sb_driver_counters *k = sb_driver_counters(drv);
	struct sb_xc x0[] = {{2, 3}, {3, 2}};
	OK(sb_device_connect(d, &err));
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, NULL, 0, x0, 2, &err));

	/* point the handle at device 1: the open session (and its lock) stay
	 * until the next connect, so a step in progress is not cut */
	struct sb_device_config c1 = tl_device_config(&fleet, 1);
	c1.rpc_timeout_ms = 2000;
	uint64_t connects = atomic_load(&k->connects);
	OK(sb_device_set_config(d, &c1));
	assert_true(sb_device_connected(d));
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_connect(d, &err));
	assert_int_equal(atomic_load(&k->connects), connects + 1);
	assert_string_equal(sb_device_name(d), "devsim0"); /* the name stays */
	struct sb_xc_state *s = NULL;
	size_t n = 0;
	OK(sb_device_read_xcs(d, false, SB_DS_RUNNING, &s, &n, &err));
	assert_int_equal(n, 0); /* device 1 never got the edit */
	free(s);

	/* a port nobody listens on: refused at the next connect; back again */
	struct sb_device_config dead = c1;
	int dead_port = tl_ports_reserve(1); /* reserved for this test, never listened on */
	assert_true(dead_port > 0);
	dead.port = (uint16_t)dead_port;
	OK(sb_device_set_config(d, &dead));
	assert_int_equal(sb_device_connect(d, &err), -ECONNREFUSED);
	assert_false(sb_device_connected(d));
	struct sb_device_config c0 = tl_device_config(&fleet, 0);
	c0.rpc_timeout_ms = 2000;
	OK(sb_device_set_config(d, &c0));
	OK(sb_device_connect(d, &err)); /* no backoff left from the failure */
	OK(sb_device_read_xcs(d, false, SB_DS_RUNNING, &s, &n, &err));
	assert_int_equal(n, 2);
	free(s);
	/* leave device 0 as the other tests expect it */
	OK(sb_device_lock(d, SB_DS_CANDIDATE, &err));
	OK(sb_device_edit_xcs(d, SB_DS_CANDIDATE, x0, 2, NULL, 0, &err));
	OK(sb_device_commit(d, 0, NULL, NULL, &err));
	OK(sb_device_unlock(d, SB_DS_CANDIDATE, &err));
	struct sb_device_config bad = c0;
	bad.host[0] = '\0';
	assert_int_equal(sb_device_set_config(d, &bad), -EINVAL);
	sb_device_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capabilities_and_strategy),
		cmocka_unit_test(test_bad_password_and_backoff),
		cmocka_unit_test(test_connect_many),
		cmocka_unit_test(test_dead_session_replaced),
		cmocka_unit_test(test_keepalive),
		cmocka_unit_test(test_pinned_hostkey_mismatch),
		cmocka_unit_test(test_public_key_auth),
		cmocka_unit_test(test_tls_certificates),
		cmocka_unit_test(test_edit_commit_and_state),
		cmocka_unit_test(test_pipelined_edit_validate),
		cmocka_unit_test(test_notification_on_rpc_session),
		cmocka_unit_test(test_deadline_and_drop),
		cmocka_unit_test(test_setup_deadline),
		cmocka_unit_test(test_setup_slots),
		cmocka_unit_test(test_confirmed_commit_reverts),
		cmocka_unit_test(test_staged_config),
	};
	if (getenv("SB_TEST_FILTER")) /* debugging: run the tests matching a pattern */
		cmocka_set_test_filter(getenv("SB_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
