/*
 * test_sb_trx.c - transceiver devices end to end on the southbound side:
 * the driver (sb_device_read_bundles/edit_bundles), the transaction engine
 * with ocs-transceiver devices, and the notification listener (sb_notif.h),
 * against one ocs-devsim process serving 12 nodes of an open line
 * (--model ocs-transceiver --count 12, K = 2, one node per ToR so that a
 * node's position is its number) and 6 nodes of a closed ring.
 *
 * The expected bundle settings and peers are computed here from the
 * physical model of ocs-transceiver.yang (bundle 0 down to the previous
 * ring node, bundle 1 up to the next, the ends on loopback), independently
 * of the daemon's planner.
 */
#include "sb_notif.h"
#include "sb_testlib.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define NODES	12
#define BUNDLES 2
#define K	2

static struct sb_driver *drv;
static struct sb_engine *eng;
static struct tl_fleet fleet;
static struct sb_device **devs;
static uint64_t next_id = 1;

static struct sb_device **transceivers(const struct tl_fleet *f, int n)
{
	struct sb_device **d = calloc((size_t)n, sizeof(*d));
	for (int i = 0; i < n; i++) {
		struct sb_device_config c = tl_device_config(f, i);
		c.model = SB_MODEL_TRANSCEIVER;
		c.node = (uint32_t)i;
		c.backoff_min_ms = 10;
		c.backoff_max_ms = 200;
		if (sb_device_new(drv, &c, &d[i]))
			abort();
	}
	return d;
}

static int setup(void **state)
{
	const char *extra[] = {"--model", "ocs-transceiver", "--ring-k", "2", NULL};
	if (sb_driver_new(NULL, &drv) || sb_engine_new(8, &eng) ||
	    tl_fleet_start(&fleet, NODES, extra))
		return -1;
	devs = transceivers(&fleet, NODES);
	return 0;
}

static int teardown(void **state)
{
	tl_devices_free(devs, NODES);
	sb_engine_free(eng);
	sb_driver_free(drv);
	return tl_fleet_stop(&fleet);
}

/* ---- the expected settings: the physical model, written out --------------- */

/* Every node of `nodes` nodes: idle (all loopback), then the rings' settings. */
struct layout {
	struct sb_bundle b[NODES][BUNDLES];
	int peer[NODES][BUNDLES]; /* expected peer-node, -1 on loopback */
	int n;			  /* nodes */
	bool closed;
};

static void layout_idle(struct layout *l, int n, bool closed)
{
	memset(l, 0, sizeof(*l));
	l->n = n;
	l->closed = closed;
	for (int v = 0; v < n; v++)
		for (int b = 0; b < BUNDLES; b++) {
			l->b[v][b] = (struct sb_bundle){.bundle = (uint8_t)b};
			l->peer[v][b] = -1;
		}
}

/* Positions from a to b going up (around the ring when closed). */
static int gap_up(const struct layout *l, int a, int b)
{
	return l->closed ? ((b - a) % l->n + l->n) % l->n : b - a;
}

static void layout_ring(struct layout *l, const int *ring, int m)
{
	for (int j = 0; j + 1 < m; j++) {
		int a = ring[j], c = ring[j + 1], d = gap_up(l, a, c);
		assert_true(d >= 1 && d <= K);
		l->b[a][1] = (struct sb_bundle){.bundle = 1, .path = 1, .distance = (uint8_t)d};
		l->peer[a][1] = c;
		l->b[c][0] = (struct sb_bundle){
			.bundle = 0, .path = 1, .distance = (uint8_t)d, .dir = 1};
		l->peer[c][0] = a;
	}
}

static struct sb_txn_device plan_devs[NODES];
static struct sb_txn_plan plan_of(struct layout *l, struct sb_device **d, const int *nodes, int n)
{
	for (int i = 0; i < n; i++)
		plan_devs[i] = (struct sb_txn_device){
			.dev = d[nodes[i]], .bundles = l->b[nodes[i]], .n_bundles = BUNDLES};
	return (struct sb_txn_plan){.id = next_id++, .devices = plan_devs, .n_devices = (size_t)n};
}

static const int all12[NODES] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* The verify callback: at read-back, every bundle reaches its expected peer. */
struct check {
	const struct layout *l;
	const int *nodes; /* plan device -> node */
	int plan_calls, readback_calls;
};

static int check_peers(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *v,
		       size_t n, char *why, size_t why_len)
{
	struct check *c = arg;
	for (size_t i = 0; i < n; i++) {
		int node = c->nodes[v[i].index];
		if (v[i].n_bundles != BUNDLES) {
			snprintf(why, why_len, "node %d: %zu bundles", node, v[i].n_bundles);
			return 1;
		}
		for (size_t k = 0; k < v[i].n_bundles; k++) {
			const struct sb_bundle_state *s = &v[i].bundles[k];
			int want = phase == SB_VERIFY_PLAN ? -1 : c->l->peer[node][s->set.bundle];
			bool status_ok = phase == SB_VERIFY_PLAN ? s->status == SB_PATH_UNKNOWN
								 : s->status == SB_PATH_ACTIVE;
			if (s->peer_node != want || !status_ok) {
				snprintf(why, why_len,
					 "node %d bundle %u reaches %d (status %d), expected %d",
					 node, s->set.bundle, s->peer_node, s->status, want);
				return 1;
			}
		}
	}
	if (phase == SB_VERIFY_PLAN)
		c->plan_calls++;
	else
		c->readback_calls++;
	return 0;
}

/* Reads every node of the layout back with state and compares. */
static void assert_nodes_hold(struct sb_device **d, const struct layout *l, const int *nodes, int n)
{
	for (int i = 0; i < n; i++) {
		int v = nodes[i];
		struct sb_bundle_state *s = NULL;
		size_t ns = 0;
		bool faulty = true;
		struct sb_error err = {0};
		assert_int_equal(sb_device_connect(d[v], &err), 0);
		assert_int_equal(
			sb_device_read_bundles(d[v], true, SB_DS_RUNNING, &s, &ns, &faulty, &err),
			0);
		assert_false(faulty);
		assert_int_equal(ns, BUNDLES);
		for (size_t k = 0; k < ns; k++) {
			if (!sb_bundle_equal(&s[k].set, &l->b[v][k]) ||
			    s[k].peer_node != l->peer[v][k])
				fail_msg("node %d bundle %zu: path %u distance %u dir %u peer %d, "
					 "expected path %u distance %u dir %u peer %d",
					 v, k, s[k].set.path, s[k].set.distance, s[k].set.dir,
					 s[k].peer_node, l->b[v][k].path, l->b[v][k].distance,
					 l->b[v][k].dir, l->peer[v][k]);
		}
		free(s);
	}
}

static void run_ok(struct layout *l, const int *nodes, int n)
{
	struct sb_txn_plan p = plan_of(l, devs, nodes, n);
	struct check c = {.l = l, .nodes = nodes};
	struct sb_txn_hooks hooks = {.verify = check_peers, .arg = &c};
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &p, &hooks, NULL, &r), 0);
	if (r.outcome != SB_TXN_COMMITTED)
		fail_msg("outcome %s: %s", sb_txn_outcome_name(r.outcome), r.message);
	assert_int_equal(c.plan_calls, 1);
	assert_int_equal(c.readback_calls, 1);
	sb_txn_result_clear(&r);
}

/* The rings every test starts from: {0,2,3,4} and {6,7,9,11}; 1, 5, 8, 10 idle. */
static void base_layout(struct layout *l)
{
	static const int ring_a[] = {0, 2, 3, 4}, ring_b[] = {6, 7, 9, 11};
	layout_idle(l, NODES, false);
	layout_ring(l, ring_a, 4);
	layout_ring(l, ring_b, 4);
}

/* Two rings on 12 nodes in one transaction; every node reads back its peers. */
static void test_program_rings(void **state)
{
	struct layout l;
	base_layout(&l);
	run_ok(&l, all12, NODES);
	assert_nodes_hold(devs, &l, all12, NODES);
	/* node 3 sits between 2 and 4, both 1 away: one through each bundle */
	assert_int_equal(l.peer[3][0], 2);
	assert_int_equal(l.peer[3][1], 4);
	/* back to idle */
	struct layout idle;
	layout_idle(&idle, NODES, false);
	run_ok(&idle, all12, NODES);
	assert_nodes_hold(devs, &idle, all12, NODES);
}

/* A refused commit on one node rolls every node back to its pre-image. */
static void test_refused_commit_rolls_back(void **state)
{
	struct layout before, after;
	base_layout(&before);
	run_ok(&before, all12, NODES);
	layout_idle(&after, NODES, false);
	static const int ring[] = {1, 3, 5, 6, 8};
	layout_ring(&after, ring, 5);
	struct sb_error err = {0};
	assert_int_equal(sb_device_rpc_xml(devs[5],
					   "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>"
					   "refuse@commit</spec></set-faults>",
					   &err),
			 0);
	struct sb_txn_plan p = plan_of(&after, devs, all12, NODES);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &p, NULL, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.failed_step, SB_STEP_COMMIT);
	assert_int_equal(r.devices[5].failed_step, SB_STEP_COMMIT);
	for (int i = 0; i < NODES; i++)
		assert_int_equal(r.devices[i].outcome, SB_DEV_ROLLED_BACK);
	sb_txn_result_clear(&r);
	assert_nodes_hold(devs, &before, all12, NODES);
}

/* Settings the physical model forbids are refused, the error naming the leaf. */
static void test_device_refuses_bad_paths(void **state)
{
	struct layout l;
	base_layout(&l);
	run_ok(&l, all12, NODES);
	static const struct {
		int node;
		struct sb_bundle b;
		const char *leaf;
	} bad[] = {
		/* beyond K = 2 */
		{5, {.bundle = 1, .path = 1, .distance = 3}, "bundle[id='1']/external/distance"},
		/* past the upper end of the open line */
		{11, {.bundle = 1, .path = 1, .distance = 1}, "bundle[id='1']/external/distance"},
		/* past the lower end */
		{1,
		 {.bundle = 0, .path = 1, .distance = 2, .dir = 1},
		 "bundle[id='0']/external/distance"},
		/* bundle 0 faces down (YANG must) */
		{8, {.bundle = 0, .path = 1, .distance = 1}, "bundle[id='0']/external"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct layout t = l;
		t.b[bad[i].node][bad[i].b.bundle] = bad[i].b;
		int nodes[] = {bad[i].node, 3};
		struct sb_txn_plan p = plan_of(&t, devs, nodes, 2);
		struct sb_txn_result r;
		assert_int_equal(sb_engine_run(eng, &p, NULL, NULL, &r), 0);
		assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
		assert_int_equal(r.devices[0].failed_step, SB_STEP_PREPARE);
		if (!strstr(r.devices[0].error.message, bad[i].leaf))
			fail_msg("case %zu: error does not name %s: %s", i, bad[i].leaf,
				 r.devices[0].error.message);
		sb_txn_result_clear(&r);
	}
	assert_nodes_hold(devs, &l, all12, NODES);
}

/* Malformed transceiver plans are refused before any I/O. */
static void test_malformed_plans(void **state)
{
	uint64_t rpcs = atomic_load(&sb_driver_counters(drv)->rpcs);
	struct sb_bundle dup[] = {{.bundle = 0}, {.bundle = 0}};
	struct sb_bundle no_distance[] = {{.bundle = 1, .path = 1}};
	struct sb_bundle loop_distance[] = {{.bundle = 0, .distance = 1}};
	struct sb_xc xc[] = {{0, 1}};
	struct sb_txn_device bad[] = {
		{.dev = devs[0], .bundles = dup, .n_bundles = 2},
		{.dev = devs[0], .bundles = no_distance, .n_bundles = 1},
		{.dev = devs[0], .bundles = loop_distance, .n_bundles = 1},
		{.dev = devs[0], .target = xc, .n_target = 1}, /* a switch's set */
		{.dev = devs[0], .n_bundles = 1},	       /* no array */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sb_txn_plan p = {.id = next_id++, .devices = &bad[i], .n_devices = 1};
		struct sb_txn_result r;
		if (sb_engine_run(eng, &p, NULL, NULL, &r) != -EINVAL)
			fail_msg("malformed plan %zu accepted", i);
	}
	assert_int_equal(atomic_load(&sb_driver_counters(drv)->rpcs), rpcs);
}

/* ---- faults and the listener ---------------------------------------------- */

#define MAX_NOTIFS 256

static struct {
	pthread_mutex_t mu;
	struct sb_notif got[MAX_NOTIFS];
	int n;
} notifs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_notif(void *arg, const struct sb_notif *n)
{
	pthread_mutex_lock(&notifs.mu);
	if (notifs.n < MAX_NOTIFS) {
		notifs.got[notifs.n] = *n;
		notifs.got[notifs.n].name = NULL; /* valid during the call only */
		notifs.n++;
	}
	pthread_mutex_unlock(&notifs.mu);
}

/* How many notifications match (kind, node or port, faulty/bundle/port_up; -1: any). */
static int count_notifs(enum sb_notif_kind kind, long source, long node, int detail)
{
	int c = 0;
	pthread_mutex_lock(&notifs.mu);
	for (int i = 0; i < notifs.n; i++) {
		const struct sb_notif *n = &notifs.got[i];
		bool port = kind == SB_NOTIF_PORT_STATE;
		if (n->kind != kind || (source >= 0 && n->source != (size_t)source) ||
		    (node >= 0 && (port ? n->port != node : n->node != (uint32_t)node)))
			continue;
		if (detail >= 0 && port && n->port_up != (detail == 1))
			continue;
		if (detail >= 0 && kind == SB_NOTIF_NODE_FAULT && n->faulty != (detail == 1))
			continue;
		if (detail >= 0 && kind == SB_NOTIF_LOSS_OF_LIGHT && n->bundle != detail)
			continue;
		c++;
	}
	pthread_mutex_unlock(&notifs.mu);
	return c;
}

static void wait_notifs(int want, enum sb_notif_kind kind, long source, long node, int detail)
{
	for (int i = 0; i < 500; i++) {
		if (count_notifs(kind, source, node, detail) >= want)
			return;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	fail_msg("no notification kind %d source %ld node %ld detail %d after 5 s", kind, source,
		 node, detail);
}

static void set_faults(int node, const char *spec)
{
	char xml[200];
	struct sb_error err = {0};
	snprintf(xml, sizeof(xml),
		 "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>%s</spec></set-faults>",
		 spec);
	assert_int_equal(sb_device_connect(devs[node], &err), 0);
	if (sb_device_rpc_xml(devs[node], xml, &err))
		fail_msg("set-faults %s on node %d: %s", spec, node, err.message);
}

static enum sb_path_status path_status(int node, int bundle, bool *faulty)
{
	struct sb_bundle_state *s = NULL;
	size_t n = 0;
	struct sb_error err = {0};
	assert_int_equal(sb_device_connect(devs[node], &err), 0);
	assert_int_equal(
		sb_device_read_bundles(devs[node], true, SB_DS_RUNNING, &s, &n, faulty, &err), 0);
	enum sb_path_status st = SB_PATH_UNKNOWN;
	for (size_t i = 0; i < n; i++)
		if (s[i].set.bundle == bundle)
			st = s[i].status;
	free(s);
	return st;
}

/*
 * node-fault on node 3 of ring {0,2,3,4}: its peers 2 and 4 report failed
 * and send loss-of-light, node 3 sends node-fault; a transaction that
 * points a bundle at node 3 rolls back; the bypass {0,2,4} (2 and 4 only)
 * commits; healing sends node-fault false and the paths come back.
 */
static void test_node_fault(void **state)
{
	struct layout l;
	base_layout(&l);
	run_ok(&l, all12, NODES);

	struct sb_listener *lis;
	assert_int_equal(sb_listener_new(drv, on_notif, NULL, &lis), 0);
	for (int i = 0; i < NODES; i++) {
		struct sb_device_config c = tl_device_config(&fleet, i);
		c.model = SB_MODEL_TRANSCEIVER;
		c.node = (uint32_t)i;
		c.backoff_min_ms = 10;
		c.backoff_max_ms = 200;
		assert_int_equal(sb_listener_add(lis, &c, (size_t)(100 + i)), 0);
	}
	assert_int_equal(sb_listener_start(lis), 0);
	assert_int_equal(sb_listener_add(lis, &(struct sb_device_config){0}, 0), -EBUSY);
	for (int i = 0; i < NODES; i++)
		wait_notifs(1, SB_NOTIF_SUBSCRIBED, 100 + i, -1, -1);

	set_faults(3, "node-fault");
	wait_notifs(1, SB_NOTIF_NODE_FAULT, 103, 3, 1);
	wait_notifs(1, SB_NOTIF_LOSS_OF_LIGHT, 102, 2, 1); /* node 2's bundle 1 reached 3 */
	wait_notifs(1, SB_NOTIF_LOSS_OF_LIGHT, 104, 4, 0); /* node 4's bundle 0 reached 3 */
	/* nobody else lost light */
	assert_int_equal(count_notifs(SB_NOTIF_LOSS_OF_LIGHT, -1, -1, -1), 2);
	bool faulty = false;
	assert_int_equal(path_status(2, 1, &faulty), SB_PATH_FAILED);
	assert_false(faulty);
	assert_int_equal(path_status(4, 0, &faulty), SB_PATH_FAILED);
	assert_int_equal(path_status(2, 0, &faulty), SB_PATH_ACTIVE); /* 2 -> 0 is fine */
	assert_int_equal(path_status(3, 0, &faulty), SB_PATH_FAILED);
	assert_true(faulty);
	/* received_us is CLOCK_MONOTONIC */
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&notifs.mu);
	int64_t last = notifs.got[notifs.n - 1].received_us;
	pthread_mutex_unlock(&notifs.mu);
	int64_t now_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	assert_true(last > 0 && last <= now_us && now_us - last < 10 * 1000000);

	/* pointing idle node 1 at the faulty node: read back failed, rolled back */
	struct layout toward = l;
	toward.b[1][1] = (struct sb_bundle){.bundle = 1, .path = 1, .distance = 2};
	toward.peer[1][1] = 3;
	int one[] = {1};
	struct sb_txn_plan p = plan_of(&toward, devs, one, 1);
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &p, NULL, NULL, &r), 0);
	assert_int_equal(r.outcome, SB_TXN_ROLLED_BACK);
	assert_int_equal(r.failed_step, SB_STEP_VERIFY);
	assert_non_null(strstr(r.devices[0].error.message, "failed"));
	sb_txn_result_clear(&r);
	assert_nodes_hold(devs, &l, one, 1);

	/* the bypass: 2 and 4 join directly (distance 2); node 3 is not touched */
	struct layout bypass;
	static const int ring_a[] = {0, 2, 4}, ring_b[] = {6, 7, 9, 11};
	layout_idle(&bypass, NODES, false);
	layout_ring(&bypass, ring_a, 3);
	layout_ring(&bypass, ring_b, 4);
	int changed[] = {2, 4};
	run_ok(&bypass, changed, 2);
	assert_nodes_hold(devs, &bypass, changed, 2);

	set_faults(3, "");
	wait_notifs(1, SB_NOTIF_NODE_FAULT, 103, 3, 0);
	assert_int_equal(path_status(3, 0, &faulty), SB_PATH_ACTIVE);
	assert_false(faulty);
	/* healing sends no loss-of-light */
	assert_int_equal(count_notifs(SB_NOTIF_LOSS_OF_LIGHT, -1, -1, -1), 2);
	/* emit-notification: the transceiver kinds reach the listener too */
	struct sb_error err = {0};
	assert_int_equal(sb_device_rpc_xml(devs[7],
					   "<emit-notification xmlns=\"urn:ocsd:yang:ocs-devsim\">"
					   "<kind>loss-of-light</kind><bundle>1</bundle>"
					   "</emit-notification>",
					   &err),
			 0);
	wait_notifs(1, SB_NOTIF_LOSS_OF_LIGHT, 107, 7, 1);
	sb_listener_free(lis);
	sb_listener_free(NULL);
	/* back to idle for the next test */
	struct layout idle;
	layout_idle(&idle, NODES, false);
	run_ok(&idle, all12, NODES);
}

/*
 * A rail OCS reports a GPU fault: on an ocs-switch, set-faults fail-port=P
 * sends port-state-change (P, failed) to every subscribed session, which
 * the listener delivers as SB_NOTIF_PORT_STATE (port P, port_up false);
 * clearing it sends (P, up). A port failed before and after a set-faults is
 * not reported again; another device hears nothing.
 */
static void test_port_state_change(void **state)
{
	struct tl_fleet sw;
	const char *extra[] = {"--ports", "8", NULL};
	assert_int_equal(tl_fleet_start(&sw, 2, extra), 0);
	pthread_mutex_lock(&notifs.mu);
	notifs.n = 0;
	pthread_mutex_unlock(&notifs.mu);
	struct sb_listener *lis;
	assert_int_equal(sb_listener_new(drv, on_notif, NULL, &lis), 0);
	/* device 0 twice (two subscribed sessions), device 1 once */
	static const int dev_of[] = {0, 0, 1};
	for (int i = 0; i < 3; i++) {
		struct sb_device_config c = tl_device_config(&sw, dev_of[i]);
		assert_int_equal(sb_listener_add(lis, &c, (size_t)(400 + i)), 0);
	}
	assert_int_equal(sb_listener_start(lis), 0);
	for (int i = 0; i < 3; i++)
		wait_notifs(1, SB_NOTIF_SUBSCRIBED, 400 + i, -1, -1);
	struct sb_device_config c = tl_device_config(&sw, 0);
	struct sb_device *d;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), 0);
#define SET_FAULTS(spec)                                                                           \
	"<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>" spec "</spec></set-faults>"

	assert_int_equal(sb_device_rpc_xml(d, SET_FAULTS("fail-port=3"), &err), 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 400, 3, 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 401, 3, 0);
	/* port 3 stays failed, port 5 fails (named twice: reported once) */
	assert_int_equal(
		sb_device_rpc_xml(d, SET_FAULTS("fail-port=5,fail-port=3,fail-port=5"), &err), 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 400, 5, 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 401, 5, 0);
	/* cleared: both ports are up again */
	assert_int_equal(sb_device_rpc_xml(d, SET_FAULTS(""), &err), 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 400, 3, 1);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 400, 5, 1);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 401, 5, 1);
	/* a port the device lacks is refused, naming the range, and sends nothing */
	assert_int_equal(sb_device_rpc_xml(d, SET_FAULTS("fail-port=8"), &err), -EREMOTEIO);
	assert_non_null(strstr(err.message, "ports 0..7"));
	/* a marker after everything: the notifications before it have arrived */
	assert_int_equal(sb_device_rpc_xml(d,
					   "<emit-notification xmlns=\"urn:ocsd:yang:ocs-devsim\">"
					   "<kind>connection-failed</kind><port>1</port>"
					   "</emit-notification>",
					   &err),
			 0);
	wait_notifs(1, SB_NOTIF_OTHER, 400, -1, -1);
	wait_notifs(1, SB_NOTIF_OTHER, 401, -1, -1);
	for (int s = 400; s <= 401; s++) {
		assert_int_equal(count_notifs(SB_NOTIF_PORT_STATE, s, -1, -1), 4);
		assert_int_equal(count_notifs(SB_NOTIF_PORT_STATE, s, 3, 0), 1);
		assert_int_equal(count_notifs(SB_NOTIF_PORT_STATE, s, 5, 0), 1);
	}
	assert_int_equal(count_notifs(SB_NOTIF_PORT_STATE, 402, -1, -1), 0);
	/* the same knob on device 1 reaches its own subscriber only */
	struct sb_device_config c1 = tl_device_config(&sw, 1);
	struct sb_device *d1;
	assert_int_equal(sb_device_new(drv, &c1, &d1), 0);
	assert_int_equal(sb_device_connect(d1, &err), 0);
	assert_int_equal(sb_device_rpc_xml(d1, SET_FAULTS("fail-port=0"), &err), 0);
	wait_notifs(1, SB_NOTIF_PORT_STATE, 402, 0, 0);
	assert_int_equal(count_notifs(SB_NOTIF_PORT_STATE, 400, 0, -1), 0);
#undef SET_FAULTS
	sb_device_free(d);
	sb_device_free(d1);
	sb_listener_free(lis);
	assert_int_equal(tl_fleet_stop(&sw), 0);
}

/* A closed domain of 6 nodes: a ring may wrap from the last position to the first. */
static void test_closed_domain_wraps(void **state)
{
	struct tl_fleet ring6;
	const char *extra[] = {"--model", "ocs-transceiver", "--ring-k",
			       "2",	  "--ring-closed",   NULL};
	assert_int_equal(tl_fleet_start(&ring6, 6, extra), 0);
	struct sb_device **d = transceivers(&ring6, 6);
	struct layout l;
	layout_idle(&l, 6, true);
	static const int ring[] = {4, 5, 1, 2}; /* 5 -> 1 wraps: distance 2 up */
	layout_ring(&l, ring, 4);
	assert_int_equal(l.b[5][1].distance, 2);
	static const int all6[] = {0, 1, 2, 3, 4, 5};
	struct sb_txn_plan p = plan_of(&l, d, all6, 6);
	struct check c = {.l = &l, .nodes = all6};
	struct sb_txn_hooks hooks = {.verify = check_peers, .arg = &c};
	struct sb_txn_result r;
	assert_int_equal(sb_engine_run(eng, &p, &hooks, NULL, &r), 0);
	if (r.outcome != SB_TXN_COMMITTED)
		fail_msg("outcome %s: %s", sb_txn_outcome_name(r.outcome), r.message);
	sb_txn_result_clear(&r);
	assert_nodes_hold(d, &l, all6, 6);
	tl_devices_free(d, 6);
	assert_int_equal(tl_fleet_stop(&ring6), 0);
}

/*
 * The listener reports a lost session (devsim stopped) and subscribes again
 * once the devices are back on the same ports, then delivers again.
 */
static void test_listener_reconnects(void **state)
{
	struct tl_fleet two;
	const char *extra[] = {"--model", "ocs-transceiver", NULL};
	assert_int_equal(tl_fleet_start(&two, 2, extra), 0);
	pthread_mutex_lock(&notifs.mu);
	notifs.n = 0;
	pthread_mutex_unlock(&notifs.mu);
	struct sb_listener *lis;
	assert_int_equal(sb_listener_new(drv, on_notif, NULL, &lis), 0);
	for (int i = 0; i < 2; i++) {
		struct sb_device_config c = tl_device_config(&two, i);
		c.model = SB_MODEL_TRANSCEIVER;
		c.node = (uint32_t)i;
		c.hostkey_policy = SB_HOSTKEY_ACCEPT_ANY; /* the restarted devsim has a new key */
		c.backoff_min_ms = 10;
		c.backoff_max_ms = 100;
		assert_int_equal(sb_listener_add(lis, &c, (size_t)(200 + i)), 0);
	}
	assert_int_equal(sb_listener_start(lis), 0);
	assert_int_equal(sb_listener_start(lis), -EALREADY);
	wait_notifs(1, SB_NOTIF_SUBSCRIBED, 200, -1, -1);
	wait_notifs(1, SB_NOTIF_SUBSCRIBED, 201, -1, -1);
	assert_int_equal(tl_fleet_stop(&two), 0);
	wait_notifs(1, SB_NOTIF_LOST, 200, -1, -1);
	wait_notifs(1, SB_NOTIF_LOST, 201, -1, -1);
	/* back on the same ports: both subscribe again, and a node fault set
	 * afterwards arrives on the new subscription */
	assert_int_equal(tl_fleet_restart(&two, extra), 0);
	wait_notifs(2, SB_NOTIF_SUBSCRIBED, 200, -1, -1);
	wait_notifs(2, SB_NOTIF_SUBSCRIBED, 201, -1, -1);
	struct sb_device_config c = tl_device_config(&two, 1);
	c.model = SB_MODEL_TRANSCEIVER;
	c.node = 1;
	struct sb_device *d;
	struct sb_error err = {0};
	assert_int_equal(sb_device_new(drv, &c, &d), 0);
	assert_int_equal(sb_device_connect(d, &err), 0);
	assert_int_equal(sb_device_rpc_xml(d,
					   "<set-faults xmlns=\"urn:ocsd:yang:ocs-devsim\"><spec>"
					   "node-fault</spec></set-faults>",
					   &err),
			 0);
	wait_notifs(1, SB_NOTIF_NODE_FAULT, 201, 1, 1);
	sb_device_free(d);
	sb_listener_free(lis);
	assert_int_equal(tl_fleet_stop(&two), 0);
}

/*
 * Over TLS the listener has no socket to poll (libnetconf2 keeps it) and
 * reads the session on its tick: notifications still arrive, from both
 * devices of a TLS fleet.
 */
static void test_listener_tls(void **state)
{
	char dir[] = "/tmp/sb-trx-tls-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(tl_make_cert(dir, "ca", "ocs-test-ca", NULL), 0);
	assert_int_equal(tl_make_cert(dir, "server", "127.0.0.1", "ca"), 0);
	assert_int_equal(tl_make_cert(dir, "client", "ocs-controller", "ca"), 0);
	char cert[128], key[128], ca[128];
	snprintf(cert, sizeof(cert), "%s/server.pem", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	struct tl_fleet tf;
	const char *extra[] = {"--model", "ocs-transceiver", "--tls-cert", cert, "--tls-key",
			       key,	  "--tls-ca",	     ca,	   NULL};
	assert_int_equal(tl_fleet_start(&tf, 2, extra), 0);
	pthread_mutex_lock(&notifs.mu);
	notifs.n = 0;
	pthread_mutex_unlock(&notifs.mu);
	struct sb_listener *lis;
	assert_int_equal(sb_listener_new(drv, on_notif, NULL, &lis), 0);
	struct sb_device_config c[2];
	for (int i = 0; i < 2; i++) {
		c[i] = tl_device_config(&tf, i);
		c[i].transport = SB_TRANSPORT_TLS;
		c[i].model = SB_MODEL_TRANSCEIVER;
		c[i].node = (uint32_t)i;
		snprintf(c[i].tls_cert, sizeof(c[i].tls_cert), "%s/client.pem", dir);
		snprintf(c[i].tls_key, sizeof(c[i].tls_key), "%s/client.key", dir);
		snprintf(c[i].tls_ca, sizeof(c[i].tls_ca), "%s/ca.pem", dir);
		assert_int_equal(sb_listener_add(lis, &c[i], (size_t)(300 + i)), 0);
	}
	assert_int_equal(sb_listener_start(lis), 0);
	wait_notifs(1, SB_NOTIF_SUBSCRIBED, 300, -1, -1);
	wait_notifs(1, SB_NOTIF_SUBSCRIBED, 301, -1, -1);
	for (int i = 0; i < 2; i++) {
		struct sb_device *d;
		struct sb_error err = {0};
		assert_int_equal(sb_device_new(drv, &c[i], &d), 0);
		assert_int_equal(sb_device_connect(d, &err), 0);
		assert_int_equal(
			sb_device_rpc_xml(d,
					  "<emit-notification "
					  "xmlns=\"urn:ocsd:yang:ocs-devsim\"><kind>node-fault</"
					  "kind></emit-notification>",
					  &err),
			0);
		sb_device_free(d);
		wait_notifs(1, SB_NOTIF_NODE_FAULT, 300 + i, i, 0);
	}
	sb_listener_free(lis);
	assert_int_equal(tl_fleet_stop(&tf), 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_program_rings),
		cmocka_unit_test(test_refused_commit_rolls_back),
		cmocka_unit_test(test_device_refuses_bad_paths),
		cmocka_unit_test(test_malformed_plans),
		cmocka_unit_test(test_node_fault),
		cmocka_unit_test(test_closed_domain_wraps),
		cmocka_unit_test(test_listener_reconnects),
		cmocka_unit_test(test_listener_tls),
		cmocka_unit_test(test_port_state_change),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
