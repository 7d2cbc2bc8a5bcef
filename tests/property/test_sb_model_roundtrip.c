/*
 * test_sb_model_roundtrip.c - property test of the table of device models
 * (southbound/sb_model.h) against real simulated devices (ocs-devsim, one
 * process per model): for random targets, each driver's edit, applied by
 * the simulator and read back through the same driver, gives the target.
 *
 * Models: ocs-switch (candidate + confirmed commit; symmetric matchings,
 * since its devices refuse a one-way circuit), polatis (:writable-running
 * only; one-way pairs, any partial permutation), and ocs-transceiver (a
 * node's bundles: loopback or an external path within K, facing the way
 * its bundle faces). Each round draws a random target per device, writes
 * it as one edit from what the device holds now, on the datastore its
 * strategy says (candidate + commit, or running), and reads it back twice:
 * with <get> (every cross-connect `connected`, every path set) and with
 * <get-config> (the set alone). The checker is a set comparison on sorted
 * copies, written here; nothing of the driver's but its public calls.
 * Switching is instant (--switch-ms 0): a status is read once, not polled.
 *   usage: test_sb_model_roundtrip [rounds per device] [seed]
 */
#include "sb_testlib.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DEVICES 3  /* per model */
#define PORTS	24 /* cross-connect models */
#define NODES	8  /* transceiver domain */
#define K	2

static int rounds = 40;
static unsigned seed = 23;
static struct sb_driver *drv;

static int cmp_xc(const void *a, const void *b)
{
	const struct sb_xc *x = a, *y = b;
	return x->in != y->in ? x->in - y->in : x->out - y->out;
}

/* A random target on PORTS ports: a symmetric matching, or any partial permutation. */
static size_t random_xcs(bool symmetric, struct sb_xc *out)
{
	int perm[PORTS];
	for (int i = 0; i < PORTS; i++)
		perm[i] = i;
	for (int i = PORTS - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	size_t n = 0;
	if (symmetric) {
		for (int i = 0; i + 1 < PORTS; i += 2)
			if (rand() % 3) {
				out[n++] = (struct sb_xc){(uint16_t)perm[i], (uint16_t)perm[i + 1]};
				out[n++] = (struct sb_xc){(uint16_t)perm[i + 1], (uint16_t)perm[i]};
			}
	} else {
		for (int i = 0; i < PORTS; i++)
			if (rand() % 3)
				out[n++] = (struct sb_xc){(uint16_t)i, (uint16_t)perm[i]};
	}
	qsort(out, n, sizeof(*out), cmp_xc);
	return n;
}

/* Writes target on d from current as the device's strategy wants: one edit, then a commit. */
static void write_xcs(struct sb_device *d, const struct sb_xc *cur, size_t n_cur,
		      const struct sb_xc *tgt, size_t n_tgt)
{
	struct sb_error err = {0};
	bool running = sb_device_strategy(d) == SB_STRATEGY_RUNNING;
	int rc = sb_device_edit_xcs(d, running ? SB_DS_RUNNING : SB_DS_CANDIDATE, cur, n_cur, tgt,
				    n_tgt, &err);
	if (!rc && !running)
		rc = sb_device_commit(d, 0, NULL, NULL, &err);
	if (rc)
		fail_msg("%s: %s: %s", sb_device_name(d), err.operation, err.message);
}

/* The property on one cross-connect model. */
static void xc_model(enum sb_model m, const char *const *extra, bool symmetric,
		     enum sb_strategy want)
{
	struct tl_fleet f;
	assert_int_equal(tl_fleet_start(&f, DEVICES, extra), 0);
	struct sb_device *d[DEVICES];
	struct sb_xc held[DEVICES][PORTS];
	size_t n_held[DEVICES] = {0};
	for (int i = 0; i < DEVICES; i++) {
		struct sb_device_config c = tl_device_config(&f, i);
		struct sb_error err = {0};
		c.model = m;
		c.ports.n = PORTS; /* the model's default map */
		assert_int_equal(sb_device_new(drv, &c, &d[i]), 0);
		if (sb_device_connect(d[i], &err))
			fail_msg("connect: %s", err.message);
		assert_int_equal(sb_device_strategy(d[i]), want);
	}
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < DEVICES; i++) {
			struct sb_xc tgt[PORTS];
			size_t n = random_xcs(symmetric, tgt);
			write_xcs(d[i], held[i], n_held[i], tgt, n);
			for (int with_state = 0; with_state < 2; with_state++) {
				struct sb_xc_state *got;
				size_t n_got;
				struct sb_error err = {0};
				if (sb_device_read_xcs(d[i], with_state, SB_DS_RUNNING, &got,
						       &n_got, &err))
					fail_msg("read: %s", err.message);
				assert_int_equal(n_got, n);
				for (size_t k = 0; k < n; k++) {
					assert_int_equal(got[k].in, tgt[k].in);
					assert_int_equal(got[k].out, tgt[k].out);
					assert_int_equal(got[k].status,
							 with_state ? SB_XC_STATUS_CONNECTED
								    : SB_XC_STATUS_UNKNOWN);
				}
				free(got);
			}
			memcpy(held[i], tgt, n * sizeof(*tgt));
			n_held[i] = n;
		}
	for (int i = 0; i < DEVICES; i++)
		sb_device_free(d[i]);
	assert_int_equal(tl_fleet_stop(&f), 0);
}

static void test_ocs_switch(void **state)
{
	(void)state;
	const char *extra[] = {"--ports", "24", "--switch-ms", "0", NULL};
	xc_model(SB_MODEL_SWITCH, extra, true, SB_STRATEGY_CONFIRMED);
}

static void test_polatis(void **state)
{
	(void)state;
	const char *extra[] = {"--model", "polatis", "--ports", "24", NULL};
	xc_model(SB_MODEL_POLATIS, extra, false, SB_STRATEGY_RUNNING);
}

/* A random setting of node v's two facing bundles (positions 0..NODES-1, an open line). */
static void random_bundles(int v, struct sb_bundle *b)
{
	for (int k = 0; k < 2; k++) {
		int room = k == 0 ? v : NODES - 1 - v; /* positions below / above */
		int far = room < K ? room : K;
		b[k] = (struct sb_bundle){.bundle = (uint8_t)k};
		if (far > 0 && rand() % 2)
			b[k] = (struct sb_bundle){.bundle = (uint8_t)k,
						  .path = 1,
						  .distance = (uint8_t)(1 + rand() % far),
						  .dir = (uint8_t)(k == 0)};
	}
}

static void test_ocs_transceiver(void **state)
{
	(void)state;
	const char *extra[] = {"--model", "ocs-transceiver", "--ring-k", "2", NULL};
	struct tl_fleet f;
	assert_int_equal(tl_fleet_start(&f, NODES, extra), 0);
	struct sb_device *d[NODES];
	for (int v = 0; v < NODES; v++) {
		struct sb_device_config c = tl_device_config(&f, v);
		struct sb_error err = {0};
		c.model = SB_MODEL_TRANSCEIVER;
		c.node = (uint32_t)v;
		assert_int_equal(sb_device_new(drv, &c, &d[v]), 0);
		if (sb_device_connect(d[v], &err))
			fail_msg("connect: %s", err.message);
	}
	for (int r = 0; r < rounds; r++)
		for (int v = 0; v < NODES; v++) {
			struct sb_bundle tgt[2];
			struct sb_error err = {0};
			random_bundles(v, tgt);
			bool running = sb_device_strategy(d[v]) == SB_STRATEGY_RUNNING;
			int rc = sb_device_edit_bundles(
				d[v], running ? SB_DS_RUNNING : SB_DS_CANDIDATE, tgt, 2, &err);
			if (!rc && !running)
				rc = sb_device_commit(d[v], 0, NULL, NULL, &err);
			if (rc)
				fail_msg("node %d: %s: %s", v, err.operation, err.message);
			struct sb_bundle_state *got;
			size_t n_got;
			if (sb_device_read_bundles(d[v], false, SB_DS_RUNNING, &got, &n_got, NULL,
						   &err))
				fail_msg("read: %s", err.message);
			/* a bundle on loopback may be absent: it is the model's default */
			for (int k = 0; k < 2; k++) {
				const struct sb_bundle *seen = NULL;
				for (size_t j = 0; j < n_got; j++)
					if (got[j].set.bundle == k)
						seen = &got[j].set;
				struct sb_bundle loop = {.bundle = (uint8_t)k};
				assert_true(sb_bundle_equal(seen ? seen : &loop, &tgt[k]));
			}
			free(got);
		}
	for (int v = 0; v < NODES; v++)
		sb_device_free(d[v]);
	assert_int_equal(tl_fleet_stop(&f), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		seed = (unsigned)strtoul(argv[2], NULL, 10);
	srand(seed);
	if (sb_driver_new(NULL, &drv))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ocs_switch),
		cmocka_unit_test(test_polatis),
		cmocka_unit_test(test_ocs_transceiver),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sb_driver_free(drv);
	return rc;
}
