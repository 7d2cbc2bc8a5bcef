/*
 * test_drift.c - unit tests of the drift table (daemon/fabric/drift.c, issue 14
 * #2) and of the plan figures' text (daemon/jobs/jobs_figures.c, #14):
 *  - unowned two-way circuits become the planner's blockers, one-way or
 *    colliding cross-connects and unverified devices block their devices,
 *    for every wiring;
 *  - a property checked with the independent L2 checker (solvers/l2check.c)
 *    on random fabrics states: the stored circuits plus the blockers are
 *    always clean two-way circuits (what the planner requires), and every
 *    unowned cross-connect is a blocker or sits on a blocked device, so no
 *    plan can reuse its ports;
 *  - forgetting, the untouched paired view transactions use;
 *  - the marks of a commit that reverts by itself (dr_expect_revert): kept
 *    while a read finds them, dropped by a transaction that left them out;
 *  - figures survive encode and decode, and garbage is refused;
 *  - ring domains' node drift table (issue 28 #3): a node's entry replaced
 *    and cleared, the running total, bounds, the settings' text.
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

#include "drift.h"
#include "fabric_state.h"
#include "jobs_util.h"
#include "l2check.h"

static struct ocs_fabric lab(enum ocs_wiring w)
{
	return (struct ocs_fabric){4, 8, 4, 2, 8, w};
}

/*
 * The two cross-connects of a circuit between spine ports a and b (group
 * a.h); false when the wiring cannot connect them (cross wiring pairs
 * devices).
 */
static bool circuit(const struct ocs_fabric *f, struct ocs_spine_port a, struct ocs_spine_port b,
		    struct ocs_xc out[2])
{
	struct ocs_device_port ta = ocs_fabric_tx_port(f, a), rb = ocs_fabric_rx_port(f, b);
	struct ocs_device_port tb = ocs_fabric_tx_port(f, b), ra = ocs_fabric_rx_port(f, a);

	out[0] = (struct ocs_xc){a.h, ta.device, ta.port, rb.port};
	out[1] = (struct ocs_xc){a.h, tb.device, tb.port, ra.port};
	return ta.device == rb.device && tb.device == ra.device;
}

static int dev_of(const struct ocs_fabric *f, const struct ocs_xc *x)
{
	return ocs_fabric_device_id(f, x->group, x->device);
}

/* Sets every device's unowned list from xcs (any order). */
static void set_unowned(struct dr_table *t, const struct ocs_fabric *f, const struct ocs_xc *xcs,
			size_t n)
{
	for (int d = 0; d < ocs_fabric_devices(f); d++) {
		struct sb_xc mine[64];
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (dev_of(f, &xcs[i]) == d)
				mine[k++] =
					(struct sb_xc){(uint16_t)xcs[i].in, (uint16_t)xcs[i].out};
		assert_int_equal(dr_set(t, d, mine, k, NULL, 0), 0);
	}
}

static bool has_xc(const struct ocs_xc *xcs, size_t n, const struct ocs_xc *x)
{
	for (size_t i = 0; i < n; i++)
		if (!memcmp(&xcs[i], x, sizeof(*x)))
			return true;
	return false;
}

static void test_blockers_and_blocked(void **state)
{
	(void)state;
	for (int w = 0; w < 3; w++) {
		struct ocs_fabric f = lab((enum ocs_wiring)w);
		struct fs_state *fs = fs_new(&f);
		struct dr_table *t = dr_new(&f);
		struct ocs_spine_port a = {0, 1, 0},
				      b = {2, 1, f.wiring == OCS_WIRING_STRAIGHT ? 0 : 1};
		struct ocs_xc pair[2], job[2], *blk = NULL;
		struct st_circuit stored[2];
		bool blocked[64] = {false};
		size_t n_blk = 0;

		/* a clean two-way unowned circuit: both halves are blockers */
		assert_true(circuit(&f, a, b, pair));
		set_unowned(t, &f, pair, 2);
		assert_int_equal(dr_count(t), 2);
		assert_int_equal(dr_planner_view(t, fs, &blk, &n_blk, blocked), 0);
		assert_int_equal(n_blk, 2);
		assert_true(has_xc(blk, n_blk, &pair[0]) && has_xc(blk, n_blk, &pair[1]));
		for (int d = 0; d < ocs_fabric_devices(&f); d++)
			assert_false(blocked[d]);
		assert_int_equal(l2_check(&f, blk, n_blk, NULL, 0), 0);
		free(blk);

		/* one half only: one-way, its device blocked, no blocker */
		set_unowned(t, &f, pair, 1);
		assert_int_equal(dr_planner_view(t, fs, &blk, &n_blk, blocked), 0);
		assert_int_equal(n_blk, 0);
		assert_true(blocked[dev_of(&f, &pair[0])]);
		free(blk);

		/* both halves, but a stored circuit holds port a: both devices blocked */
		memset(blocked, 0, sizeof(blocked));
		set_unowned(t, &f, pair, 2);
		assert_true(circuit(&f, a, (struct ocs_spine_port){3, 1, b.k}, job));
		stored[0] = (struct st_circuit){job[0], "j"};
		stored[1] = (struct st_circuit){job[1], "j"};
		assert_int_equal(fs_apply(fs, NULL, 0, stored, 2), 0);
		assert_int_equal(dr_planner_view(t, fs, &blk, &n_blk, blocked), 0);
		assert_int_equal(n_blk, 0);
		assert_true(blocked[dev_of(&f, &pair[0])] && blocked[dev_of(&f, &pair[1])]);
		free(blk);

		/* forgotten (adopted or cleared): nothing left */
		dr_forget(t, pair, 2);
		assert_int_equal(dr_count(t), 0);

		/* an unverified device blocks until a read sets it */
		memset(blocked, 0, sizeof(blocked));
		dr_set_unverified(t, 5);
		assert_int_equal(dr_unverified(t), 1);
		assert_int_equal(dr_planner_view(t, fs, &blk, &n_blk, blocked), 0);
		assert_true(blocked[5]);
		free(blk);
		assert_int_equal(dr_set(t, 5, NULL, 0, NULL, 0), 0);
		assert_int_equal(dr_unverified(t), 0);
		dr_free(t);
		fs_free(fs);
	}
}

/* What a transaction's L2 check sees of untouched devices: two-way unowned only. */
static void test_paired_untouched(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_CROSS);
	struct dr_table *t = dr_new(&f);
	struct ocs_xc pair[2], one[2], all[3], *got = NULL;
	char touched[64] = {0};
	size_t n = 0;

	(void)state;
	assert_true(circuit(&f, (struct ocs_spine_port){0, 2, 0}, (struct ocs_spine_port){1, 2, 1},
			    pair));
	assert_true(circuit(&f, (struct ocs_spine_port){2, 0, 2}, (struct ocs_spine_port){3, 0, 3},
			    one));
	all[0] = pair[0];
	all[1] = pair[1];
	all[2] = one[0];
	set_unowned(t, &f, all, 3);
	assert_int_equal(dr_paired_untouched(t, touched, &got, &n), 0);
	assert_int_equal(n, 2);
	assert_true(has_xc(got, n, &pair[0]) && has_xc(got, n, &pair[1]));
	free(got);
	touched[dev_of(&f, &pair[0])] = 1;
	assert_int_equal(dr_paired_untouched(t, touched, &got, &n), 0);
	assert_true(n == 1 && !memcmp(&got[0], &pair[1], sizeof(pair[1])));
	free(got);
	dr_free(t);
}

/*
 * Marks of a paused leader's commit that reverts by itself (recovery.c):
 * marked cross-connects are reverting only on their device, a read that
 * no longer finds one drops its mark (and keeps the others), a mark of a
 * cross-connect marked twice is one, and a transaction that committed
 * without them (dr_reverted) drops them and their unowned entries, and
 * nothing else.
 */
static void test_expect_revert(void **state)
{
	struct ocs_fabric f = lab(OCS_WIRING_CROSS);
	struct dr_table *t = dr_new(&f);
	struct ocs_xc pair[2], other[2], all[4];
	struct sb_xc p0, p1, o0;
	int d0, d1;
	size_t n = 0;

	(void)state;
	assert_true(circuit(&f, (struct ocs_spine_port){0, 2, 0}, (struct ocs_spine_port){1, 2, 1},
			    pair));
	assert_true(circuit(&f, (struct ocs_spine_port){2, 2, 0}, (struct ocs_spine_port){3, 2, 1},
			    other));
	d0 = dev_of(&f, &pair[0]);
	d1 = dev_of(&f, &pair[1]);
	assert_int_not_equal(d0, d1);
	assert_int_equal(dev_of(&f, &other[0]), d0); /* the same devices, other ports */
	p0 = (struct sb_xc){(uint16_t)pair[0].in, (uint16_t)pair[0].out};
	p1 = (struct sb_xc){(uint16_t)pair[1].in, (uint16_t)pair[1].out};
	o0 = (struct sb_xc){(uint16_t)other[0].in, (uint16_t)other[0].out};
	memcpy(all, pair, sizeof(pair));
	memcpy(all + 2, other, sizeof(other));
	set_unowned(t, &f, all, 4);
	assert_int_equal(dr_expect_revert(t, pair, 2), 0);
	assert_int_equal(dr_expect_revert(t, pair, 1), 0); /* twice: one mark */
	assert_true(dr_reverting(t, d0, &p0) && dr_reverting(t, d1, &p1));
	assert_false(dr_reverting(t, d1, &p0)); /* only on its own device */
	assert_false(dr_reverting(t, d0, &o0));
	/* a read of d1 that no longer finds pair[1]: its mark goes, d0's stays */
	set_unowned(t, &f, (struct ocs_xc[]){pair[0], other[0], other[1]}, 3);
	assert_false(dr_reverting(t, d1, &p1));
	assert_true(dr_reverting(t, d0, &p0));
	/* a transaction without it committed on d0: pair[0] gone, other[0] kept */
	dr_reverted(t, d0);
	assert_false(dr_reverting(t, d0, &p0));
	assert_false(dr_is_unowned(t, &pair[0]));
	assert_true(dr_is_unowned(t, &other[0]) && dr_is_unowned(t, &other[1]));
	dr_device_unowned(t, d0, &n);
	assert_int_equal(n, 1);
	/* without marks it changes nothing */
	dr_reverted(t, d0);
	dr_device_unowned(t, d0, &n);
	assert_int_equal(n, 1);
	dr_free(t);
}

/*
 * Property, on random states: stored circuits of random jobs, unowned
 * circuits on free ports (some with a half missing, some reusing a stored
 * port). Checked with l2_check: stored + blockers is clean; and every
 * unowned cross-connect is a blocker or on a blocked device.
 */
static void test_property_random(void **state)
{
	unsigned seed = 14;
	size_t total_blockers = 0, total_blocked = 0, total_stored = 0;

	(void)state;
	for (int round = 0; round < 300; round++) {
		struct ocs_fabric f = lab((enum ocs_wiring)(round % 3));
		struct fs_state *fs = fs_new(&f);
		struct dr_table *t = dr_new(&f);
		struct st_circuit stored[128];
		struct ocs_xc unowned[128], *all, *blk = NULL;
		bool used[4][4][4] = {{{false}}}, blocked[64] = {false}; /* [h][pod][k] */
		size_t n_st = 0, n_un = 0, n_blk = 0;

		for (int tries = 0; tries < 40; tries++) {
			int h = rand_r(&seed) % 4, pa = rand_r(&seed) % 4, pb = rand_r(&seed) % 4;
			int ka = rand_r(&seed) % 4, kb = rand_r(&seed) % 4,
			    kind = rand_r(&seed) % 4;
			struct ocs_spine_port a = {pa, h, ka}, b = {pb, h, kb};
			struct ocs_xc c[2];

			if (pa == pb)
				continue; /* circuits join two pods */
			if (!circuit(&f, a, b, c) && kind != 2)
				continue; /* only junk may be what no wiring connects */
			if (kind == 0 && !used[h][pa][ka] && !used[h][pb][kb] &&
			    !fs_contains(fs, &c[0])) {
				/* a job's circuit, stored */
				stored[n_st] = (struct st_circuit){c[0], "job"};
				stored[n_st + 1] = (struct st_circuit){c[1], "job"};
				if (fs_apply(fs, NULL, 0, &stored[n_st], 2) == 0) {
					n_st += 2;
					used[h][pa][ka] = used[h][pb][kb] = true;
				}
			} else if (kind == 1 && !used[h][pa][ka] && !used[h][pb][kb]) {
				unowned[n_un++] = c[0]; /* a clean unowned circuit */
				unowned[n_un++] = c[1];
				used[h][pa][ka] = used[h][pb][kb] = true;
			} else if (kind == 2 && n_un < 120) {
				unowned[n_un++] = c[rand_r(&seed) % 2]; /* one-way, anywhere */
			}
		}
		/* a device reads each input once: keep the first per input */
		for (size_t i = 0; i < n_un; i++)
			for (size_t j = i + 1; j < n_un; j++)
				if (dev_of(&f, &unowned[i]) == dev_of(&f, &unowned[j]) &&
				    unowned[i].in == unowned[j].in)
					unowned[j--] = unowned[--n_un];
		set_unowned(t, &f, unowned, n_un);
		assert_int_equal(dr_planner_view(t, fs, &blk, &n_blk, blocked), 0);
		all = malloc((n_st + n_blk + 1) * sizeof(*all));
		for (size_t i = 0; i < n_st; i++)
			all[i] = fs_at(fs, i)->xc;
		memcpy(all + n_st, blk, n_blk * sizeof(*blk));
		assert_int_equal(l2_check(&f, all, n_st, NULL, 0), 0); /* the generator's */
		assert_int_equal(l2_check(&f, all, n_st + n_blk, NULL, 0), 0);
		for (size_t i = 0; i < n_un; i++)
			assert_true(has_xc(blk, n_blk, &unowned[i]) ||
				    blocked[dev_of(&f, &unowned[i])]);
		total_blockers += n_blk;
		total_stored += n_st;
		for (int d = 0; d < ocs_fabric_devices(&f); d++)
			total_blocked += blocked[d];
		free(all);
		free(blk);
		dr_free(t);
		fs_free(fs);
	}
	/* the states exercise every case */
	assert_true(total_blockers > 100 && total_blocked > 100 && total_stored > 100);
}

static void test_figures_text(void **state)
{
	struct jm_figures f = {0}, g;
	struct lc_demand unplaced[2] = {{0, 3, 2}, {1, 5, 1}};
	char moved[2][72] = {"job a", "b-2"};
	char *text;

	(void)state;
	snprintf(f.planner, sizeof(f.planner), "delta-fast");
	f.links_requested = 7;
	f.links_placed = 5;
	f.circuits_new = 3;
	f.circuits_moved = 1;
	f.max_contention = 0.1 + 0.2;
	f.plan_us = 123456789012;
	f.unplaced = unplaced;
	f.n_unplaced = 2;
	f.moved_jobs = moved;
	f.n_moved_jobs = 2;
	f.has_delta = true;
	f.delta = (struct jm_delta_figures){1.0 / 3, 2.5, 1.25, 40, 24, 812, 17.75};
	text = jm_figures_encode(&f);
	assert_non_null(text);
	assert_int_equal(jm_figures_decode(text, &g), 0);
	assert_string_equal(g.planner, "delta-fast");
	assert_int_equal(g.links_requested, 7);
	assert_int_equal(g.links_placed, 5);
	assert_int_equal(g.circuits_new, 3);
	assert_int_equal(g.circuits_moved, 1);
	assert_true(g.max_contention == f.max_contention); /* exact: %.17g */
	assert_true(g.plan_us == f.plan_us);
	assert_int_equal(g.n_unplaced, 2);
	assert_memory_equal(g.unplaced, unplaced, sizeof(unplaced));
	assert_int_equal(g.n_moved_jobs, 2);
	assert_string_equal(g.moved_jobs[0], "job a");
	assert_string_equal(g.moved_jobs[1], "b-2");
	assert_true(g.has_delta && g.delta.makespan_ms == 1.0 / 3 && g.delta.generations == 812);
	assert_false(g.has_ring);
	assert_string_equal(g.ring.orchestration, "");
	jm_figures_clear(&g);
	free(text);

	/* a ring plan's */
	memset(&f, 0, sizeof(f));
	f.has_ring = true;
	f.ring = (struct jm_ring_figures){"fat-tree", 4, 2, 32, 0, 0.375, 11, 12};
	text = jm_figures_encode(&f);
	assert_int_equal(jm_figures_decode(text, &g), 0);
	assert_true(g.has_ring && g.ring.rings == 4 && g.ring.constraints_total == 12);
	assert_string_equal(g.ring.orchestration, "fat-tree");
	assert_string_equal(g.planner, "");
	jm_figures_clear(&g);
	free(text);

	assert_int_equal(jm_figures_decode("ocsd-figures 2\nx\n", &g), -EINVAL);
	assert_int_equal(jm_figures_decode("ocsd-figures 1\nlc\n1 2 3\n", &g), -EINVAL);
	assert_int_equal(jm_figures_decode("", &g), -EINVAL);
	assert_int_equal(g.n_unplaced, 0);
}

static void test_node_drift(void **state)
{
	struct dr_nodes *t = dr_nodes_new(4);
	struct dr_bundle two[2] = {{1, {1, 1, 1, 0}, {1, 1, 2, 0}, 7, true},
				   {1, {0, 0, 0, 0}, {0, 1, 3, 1}, -1, false}};
	struct dr_bundle one = {3, {1, 0, 0, 0}, {1, 1, 1, 0}, 0, true};
	const struct dr_bundle *got;
	char buf[32];
	size_t n;

	(void)state;
	assert_non_null(t);
	assert_int_equal(dr_nodes_count(t), 4);
	assert_int_equal(dr_nodes_total(t), 0);
	assert_int_equal(dr_nodes_set(t, 1, two, 2), 0);
	assert_int_equal(dr_nodes_set(t, 3, &one, 1), 0);
	assert_int_equal(dr_nodes_total(t), 3);
	got = dr_nodes_get(t, 1, &n);
	assert_int_equal(n, 2);
	assert_int_equal(got[0].found_peer, 7);
	assert_int_equal(got[1].found.distance, 3);
	assert_true(got[0].fresh && !got[1].fresh);
	/* a node's entry is replaced as a whole, and cleared by an empty read */
	assert_int_equal(dr_nodes_set(t, 1, &two[1], 1), 0);
	assert_int_equal(dr_nodes_total(t), 2);
	assert_int_equal(dr_nodes_set(t, 1, NULL, 0), 0);
	assert_null(dr_nodes_get(t, 1, &n));
	assert_int_equal(n, 0);
	assert_int_equal(dr_nodes_total(t), 1);
	/* out of range: refused, nothing changed */
	assert_int_equal(dr_nodes_set(t, 4, &one, 1), -EINVAL);
	assert_int_equal(dr_nodes_set(t, -1, &one, 1), -EINVAL);
	assert_null(dr_nodes_get(t, 9, &n));
	assert_int_equal(n, 0);
	assert_int_equal(dr_nodes_total(t), 1);
	assert_null(dr_nodes_get(NULL, 0, &n));
	assert_string_equal(dr_bundle_setting(&one.expected, buf, sizeof(buf)), "loopback");
	assert_string_equal(dr_bundle_setting(&two[0].found, buf, sizeof(buf)), "external 2 up");
	assert_string_equal(dr_bundle_setting(&two[1].found, buf, sizeof(buf)), "external 3 down");
	dr_nodes_free(t);
	dr_nodes_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blockers_and_blocked),
		cmocka_unit_test(test_paired_untouched),
		cmocka_unit_test(test_expect_revert),
		cmocka_unit_test(test_property_random),
		cmocka_unit_test(test_figures_text),
		cmocka_unit_test(test_node_drift),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
