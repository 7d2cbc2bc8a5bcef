/*
 * test_txn_kind.c - a job kind plugs into the transaction driver
 * (daemon/txn/txn_driver.h) through its ops alone: a test-only kind, known
 * to nothing in daemon/txn/, builds its own per-device targets, checks the
 * plan and the read-back, stores its intent and takes a confirmed change
 * into its own state. The real driver runs it on the real engine against
 * two ocs-devsim devices (there is no fake engine) with a SQLite store in a
 * temporary directory and the loop on this thread: to a commit (also with
 * the intent overlapped with the devices' prepare) and to a rollback (the
 * kind refuses the read-back; the devices are back as they were, the
 * kind's state untouched, the intent closed).
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

#include "loop.h"
#include "sb_testlib.h"
#include "store.h"
#include "txn_driver.h"

#define N_DEV  2
#define MAX_XC 16

/* The 4-pod lab fabric, straight wiring: the devices' cross-connects come from it. */
static const struct ocs_fabric lab = {
	.pods = 4, .k_leaf = 8, .k_spine = 8, .tau = 2, .k_ocs = 16, .wiring = OCS_WIRING_STRAIGHT};

/* The test kind's change: per device its whole target; whether it refuses the read-back. */
struct tk_change {
	struct sb_device **devs;
	struct sb_xc xcs[N_DEV][MAX_XC];
	size_t n[N_DEV];
	bool refuse_readback;
};

/* What the kind saw, and its own "state in memory" that a confirmed change goes to. */
static struct tk_seen {
	int builds, plan_checks, readback_checks, intents, applies, frees;
	int64_t applied_txn;
} seen;

struct tk_txn {
	bool refuse_readback;
	size_t n_target[N_DEV];
};

static int tk_build(const struct txn_deps *d, const struct txn_change *c, struct txn_plan *p,
		    void **state)
{
	const struct tk_change *k = c->kind_change;
	struct tk_txn *t = calloc(1, sizeof(*t));

	(void)d;
	*state = t;
	seen.builds++;
	p->devs = calloc(N_DEV, sizeof(*p->devs));
	p->dev_ids = calloc(N_DEV, sizeof(*p->dev_ids));
	if (!t || !p->devs || !p->dev_ids)
		return -ENOMEM;
	t->refuse_readback = k->refuse_readback;
	for (int i = 0; i < N_DEV; i++) {
		/* the change outlives the transaction in these tests: no copy needed */
		p->devs[i] = (struct sb_txn_device){k->devs[i], k->xcs[i], k->n[i], NULL, 0};
		p->dev_ids[i] = i;
		t->n_target[i] = k->n[i];
	}
	p->n_devs = N_DEV;
	return 0;
}

static int tk_verify(void *state, const struct txn_plan *p, enum sb_verify_phase phase,
		     const struct sb_device_xcs *devices, size_t n, char *why, size_t why_len)
{
	const struct tk_txn *t = state;

	assert_int_equal(n, p->n_devs);
	if (phase == SB_VERIFY_PLAN) {
		seen.plan_checks++;
		return 0;
	}
	seen.readback_checks++;
	for (size_t i = 0; i < n; i++)
		assert_int_equal(devices[i].n, t->n_target[devices[i].index]);
	if (t->refuse_readback) {
		snprintf(why, why_len, "the test kind refuses the read-back");
		return -EPROTO;
	}
	return 0;
}

static int tk_intent(void *state, const struct txn_deps *d, const struct txn_change *c,
		     const struct txn_plan *p, int64_t *txn_id)
{
	(void)state;
	(void)p;
	seen.intents++;
	return st_intent_begin(d->store, c->job_id, NULL, 0, NULL, 0, NULL, 0, 1, txn_id);
}

static int tk_apply(void *state, int64_t txn_id, char *why, size_t why_len)
{
	(void)state;
	(void)why;
	(void)why_len;
	seen.applies++;
	seen.applied_txn = txn_id;
	return 0;
}

static void tk_free(void *state)
{
	seen.frees++;
	free(state);
}

static const struct txn_kind_ops tk_ops = {.build = tk_build,
					   .verify = tk_verify,
					   .intent = tk_intent,
					   .apply = tk_apply,
					   .free_state = tk_free};
/* The same kind, its intent stored while the devices prepare. */
static const struct txn_kind_ops tk_ops_overlapped = {.build = tk_build,
						      .verify = tk_verify,
						      .intent = tk_intent,
						      .overlapped = true,
						      .apply = tk_apply,
						      .free_state = tk_free};

struct fx {
	struct tl_fleet fleet;
	struct sb_driver *sbd;
	struct sb_engine *engine;
	struct sb_device **devs;
	struct loop *loop;
	struct st_store *store;
	struct txn_driver *txn;
	char dir[64];
	/* the outcome */
	int dones;
	enum txn_result result;
	uint64_t txn_id;
	bool store_failed;
};

static void on_done(void *arg, const struct txn_outcome *o)
{
	struct fx *f = arg;

	f->dones++;
	f->result = o->result;
	f->txn_id = o->txn_id;
	f->store_failed = o->store_failed;
	assert_int_equal(o->n_devices, N_DEV);
	loop_stop(f->loop);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char path[128], err[256];

	if (!f || tl_fleet_start(&f->fleet, N_DEV, NULL) != 0 || sb_driver_new(NULL, &f->sbd) ||
	    sb_engine_new(N_DEV, &f->engine))
		return -1;
	f->devs = tl_devices(f->sbd, &f->fleet, 0, N_DEV, 2000);
	f->loop = loop_new();
	snprintf(f->dir, sizeof(f->dir), "/tmp/ocsd-txn-kind-XXXXXX");
	if (!f->devs || !f->loop || !mkdtemp(f->dir))
		return -1;
	snprintf(path, sizeof(path), "%s/state.db", f->dir);
	if (st_open(path, &f->store, err, sizeof(err)) != 0) {
		fprintf(stderr, "st_open: %s\n", err);
		return -1;
	}
	/* nothing of the circuit table: the kind's ops build, check and apply */
	f->txn = txn_driver_new(&(struct txn_deps){.store = f->store,
						   .loop = f->loop,
						   .engine = f->engine,
						   .confirm_timeout_s = 30,
						   .connect_timeout_ms = 2000});
	memset(&seen, 0, sizeof(seen));
	*state = f;
	return f->txn ? 0 : -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	int rc;

	txn_driver_free(f->txn);
	sb_engine_free(f->engine);
	tl_devices_free(f->devs, N_DEV);
	sb_driver_free(f->sbd);
	loop_free(f->loop);
	st_close(f->store);
	rc = tl_fleet_stop(&f->fleet);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0 || rc != 0)
		return -1;
	free(f);
	return 0;
}

/* A change of the test kind: round r of the lab fabric on group 0's devices 0 and 1. */
static void make_change(struct fx *f, struct tk_change *k, int round, bool refuse)
{
	memset(k, 0, sizeof(*k));
	k->devs = f->devs;
	k->refuse_readback = refuse;
	for (int i = 0; i < N_DEV; i++)
		k->n[i] = tl_fabric_device_xcs(&lab, 0, i, round, k->xcs[i], MAX_XC);
}

/* Runs change k of kind ops through the driver and the loop until done. */
static void run(struct fx *f, const struct txn_kind_ops *ops, const struct tk_change *k)
{
	struct txn_change c = {.job_id = "test-kind", .kind = ops, .kind_change = k};
	char why[300] = "";

	f->dones = 0;
	assert_int_equal(txn_start(f->txn, &c, on_done, f, why, sizeof(why)), 0);
	assert_int_equal(loop_run(f->loop), 0);
	assert_int_equal(f->dones, 1);
	assert_false(f->store_failed);
}

static int count_open(void *ctx, const struct st_intent *in)
{
	(void)in;
	(*(int *)ctx)++;
	return 0;
}

static void assert_devices_hold(struct fx *f, const struct tk_change *k)
{
	int open = 0;

	for (int i = 0; i < N_DEV; i++) {
		struct sb_xc *got = NULL;
		size_t n = 0;

		assert_int_equal(tl_read_running(f->devs[i], &got, &n), 0);
		assert_true(tl_same(got, n, k->xcs[i], k->n[i]));
		free(got);
	}
	assert_int_equal(st_intent_list_open(f->store, count_open, &open), 0);
	assert_int_equal(open, 0); /* the outcome is stored */
}

static void commit_with(void **state, const struct txn_kind_ops *ops)
{
	struct fx *f = *state;
	struct tk_change k;

	make_change(f, &k, 1, false);
	run(f, ops, &k);
	assert_int_equal(f->result, TXN_CONFIRMED);
	assert_true(f->txn_id > 0);
	assert_int_equal(seen.builds, 1);
	assert_int_equal(seen.intents, 1);
	assert_int_equal(seen.plan_checks, 1);
	assert_int_equal(seen.readback_checks, 1);
	assert_int_equal(seen.applies, 1);
	assert_int_equal(seen.applied_txn, (int64_t)f->txn_id);
	assert_int_equal(seen.frees, 1);
	assert_devices_hold(f, &k);
}

static void test_commit(void **state)
{
	commit_with(state, &tk_ops);
}

static void test_commit_overlapped(void **state)
{
	commit_with(state, &tk_ops_overlapped);
}

static void test_rollback(void **state)
{
	struct fx *f = *state;
	struct tk_change before, refused;

	make_change(f, &before, 1, false);
	run(f, &tk_ops, &before);
	assert_int_equal(f->result, TXN_CONFIRMED);
	memset(&seen, 0, sizeof(seen));
	make_change(f, &refused, 2, true);
	run(f, &tk_ops, &refused);
	assert_int_equal(f->result, TXN_ROLLED_BACK);
	assert_int_equal(seen.intents, 1);
	assert_int_equal(seen.readback_checks, 1);
	assert_int_equal(seen.applies, 0); /* the kind's state keeps what it had */
	assert_int_equal(seen.frees, 1);
	assert_devices_hold(f, &before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_overlapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
