/*
 * test_hbd_ring.c - unit tests of the TP-ring planner (solvers/hbd_ring.c)
 * on hand-made domains: the bundle settings of a ring (open and wrapping),
 * the physical-model checks, each orchestration's rings on a case worked
 * out by hand (components of Alg. 2, the wrap of a closed domain, the
 * fat-tree binary search with the ToR-fault expansion, the seeded greedy),
 * the refusals, and the three kinds of repair with their exact changes
 * (bypass-extend in the gap, at the end and at the front; a ring never
 * shrinks).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hbd_ring.h"

/* 4 ToRs x 3 nodes: positions 0..11, node at position q is ocs_ring_node_at(q). */
static struct ocs_ring_domain small(int k, bool closed)
{
	return (struct ocs_ring_domain){.tors = 4,
					.nodes_per_tor = 3,
					.gpus_per_node = 4,
					.k_hops = k,
					.bundles = 3,
					.tors_per_agg = 2,
					.closed = closed};
}

static int at(const struct ocs_ring_domain *d, int pos)
{
	return ocs_ring_node_at(d, pos);
}

static void assert_bundle(const struct hbd_bundle *b, int node, int bundle, int path, int distance,
			  int dir, int peer)
{
	assert_int_equal(b->node, node);
	assert_int_equal(b->bundle, bundle);
	assert_int_equal(b->path, path);
	assert_int_equal(b->distance, distance);
	assert_int_equal(b->dir, dir);
	assert_int_equal(b->peer, peer);
}

static void test_names(void **state)
{
	enum hbd_orch o;

	(void)state;
	assert_string_equal(hbd_orch_name(HBD_ORCH_DCN_FREE), "dcn-free");
	assert_string_equal(hbd_orch_name(HBD_ORCH_FAT_TREE), "fat-tree");
	assert_string_equal(hbd_orch_name(HBD_ORCH_GREEDY), "greedy");
	assert_null(hbd_orch_name((enum hbd_orch)3));
	assert_int_equal(hbd_orch_parse("fat-tree", &o), 0);
	assert_int_equal(o, HBD_ORCH_FAT_TREE);
	assert_int_equal(hbd_orch_parse("Greedy", &o), -EINVAL);
	assert_int_equal(hbd_orch_parse(NULL, &o), -EINVAL);
	assert_string_equal(hbd_repair_kind_name(HBD_REPAIR_EXTEND), "bypass-extend");
	assert_string_equal(hbd_repair_kind_name(HBD_REPAIR_REPLACE), "replace");
	assert_string_equal(hbd_repair_kind_name(HBD_REPAIR_LOST), "lost");
}

static void test_bundles_open(void **state)
{
	struct ocs_ring_domain d = small(3, false);
	int ring[3] = {at(&d, 0), at(&d, 1), at(&d, 3)};
	struct hbd_bundle b[9];

	(void)state;
	assert_true(hbd_ring_valid(&d, ring, 3));
	assert_int_equal(hbd_ring_bundles(&d, ring, 3, b), 0);
	/* First node: DOWN on loopback closes the ring, UP reaches position 1. */
	assert_bundle(&b[0], ring[0], 0, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);
	assert_bundle(&b[1], ring[0], 1, HBD_PATH_EXTERNAL, 1, HBD_DIR_UP, ring[1]);
	assert_bundle(&b[2], ring[0], 2, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);
	assert_bundle(&b[3], ring[1], 0, HBD_PATH_EXTERNAL, 1, HBD_DIR_DOWN, ring[0]);
	assert_bundle(&b[4], ring[1], 1, HBD_PATH_EXTERNAL, 2, HBD_DIR_UP, ring[2]);
	assert_bundle(&b[5], ring[1], 2, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);
	assert_bundle(&b[6], ring[2], 0, HBD_PATH_EXTERNAL, 2, HBD_DIR_DOWN, ring[1]);
	assert_bundle(&b[7], ring[2], 1, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);
	assert_bundle(&b[8], ring[2], 2, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);

	hbd_idle_bundles(&d, 5, b);
	for (int i = 0; i < 3; i++)
		assert_bundle(&b[i], 5, i, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1);

	/* A one-node ring is all loopback. */
	assert_int_equal(hbd_ring_bundles(&d, ring, 1, b), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(b[i].path, HBD_PATH_LOOPBACK);
}

static void test_bundles_wrap_and_model(void **state)
{
	struct ocs_ring_domain d = small(3, true);
	int wrap[3] = {at(&d, 10), at(&d, 11), at(&d, 1)};
	struct hbd_bundle b[9];

	(void)state;
	assert_int_equal(hbd_ring_bundles(&d, wrap, 3, b), 0);
	assert_bundle(&b[4], wrap[1], 1, HBD_PATH_EXTERNAL, 2, HBD_DIR_UP, wrap[2]);
	assert_bundle(&b[6], wrap[2], 0, HBD_PATH_EXTERNAL, 2, HBD_DIR_DOWN, wrap[1]);
	d.closed = false;
	assert_false(hbd_ring_valid(&d, wrap, 3));
	assert_int_equal(hbd_ring_bundles(&d, wrap, 3, b), -EINVAL);

	/* Gap above K, repeated node, not monotone, out of range. */
	int far[2] = {at(&d, 0), at(&d, 4)};
	int twice[3] = {at(&d, 0), at(&d, 1), at(&d, 1)};
	int down[2] = {at(&d, 2), at(&d, 1)};
	int bad[2] = {0, 12};
	assert_false(hbd_ring_valid(&d, far, 2));
	assert_false(hbd_ring_valid(&d, twice, 3));
	assert_false(hbd_ring_valid(&d, down, 2));
	assert_false(hbd_ring_valid(&d, bad, 2));
	assert_false(hbd_ring_valid(&d, far, 0));

	/* A ring may not lap a closed domain: 5 positions, K = 3, 0 -> 3 -> 1 -> 4. */
	struct ocs_ring_domain tiny = {5, 1, 4, 3, 2, 1, true};
	int lap[4] = {0, 3, 1, 4};
	assert_true(hbd_ring_valid(&tiny, lap, 2));
	assert_false(hbd_ring_valid(&tiny, lap, 4));

	/* One bundle cannot hold a ring of two nodes. */
	int two[2] = {at(&d, 0), at(&d, 1)};
	d.bundles = 1;
	assert_int_equal(hbd_ring_bundles(&d, two, 2, b), -EINVAL);
	assert_int_equal(hbd_ring_bundles(&d, two, 1, b), 0);
}

static uint8_t *uses(const struct ocs_ring_domain *d, const int *faulty_pos, int n_faulty)
{
	uint8_t *u = calloc((size_t)ocs_ring_nodes(d), 1);

	for (int i = 0; i < n_faulty; i++)
		u[at(d, faulty_pos[i])] = HBD_NODE_FAULTY;
	return u;
}

static void assert_ring_pos(const struct ocs_ring_domain *d, const int *ring, const int *pos, int m)
{
	for (int i = 0; i < m; i++)
		assert_int_equal(ring[i], at(d, pos[i]));
}

static void test_dcn_free_components(void **state)
{
	struct ocs_ring_domain d = small(2, false);
	int faulty[2] = {4, 5};
	uint8_t *u = uses(&d, faulty, 2);
	struct hbd_request req = {.tp = 12, .gpus = 0, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_plan p;
	struct hbd_error err = {0};

	(void)state;
	/* Components 0..3 and 6..11 (3 -> 6 is 3 > K apart): 1 + 2 rings of 3. */
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), 0);
	assert_int_equal(p.m, 3);
	assert_int_equal(p.n_rings, 3);
	assert_ring_pos(&d, p.nodes, (int[]){0, 1, 2}, 3);
	assert_ring_pos(&d, p.nodes + 3, (int[]){6, 7, 8}, 3);
	assert_ring_pos(&d, p.nodes + 6, (int[]){9, 10, 11}, 3);
	assert_int_equal(p.gpus_placed, 36);
	assert_int_equal(p.gpus_wasted, 4); /* position 3 */
	assert_int_equal(p.constraints_total, 0);
	/* Consecutive rings: position q and q + 6 or q + 3; ToR = q % 4. */
	assert_true(p.cross_tor_share > 0.0);
	assert_true(p.cross_tor_share == hbd_cross_tor_share(&d, p.nodes, p.n_rings, p.m));
	hbd_plan_clear(&p);

	/* A job of 4 rings does not fit; a job of 2 is not charged any waste. */
	req.gpus = 48;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -ENOSPC);
	assert_int_equal(p.rings_needed, 4);
	assert_int_equal(p.rings_available, 3);
	assert_null(p.nodes);
	assert_string_equal(err.field, "job.gpus");
	req.gpus = 24;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), 0);
	assert_int_equal(p.n_rings, 2);
	assert_int_equal(p.gpus_wasted, 0);
	hbd_plan_clear(&p);

	/* Busy nodes count like faulty ones. */
	u[at(&d, 7)] = HBD_NODE_BUSY;
	req.gpus = 0;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), 0);
	/* 0..3, then 6 8 9 10 11 (6 -> 8 is within K): 2 rings, 3 nodes left. */
	assert_int_equal(p.n_rings, 2);
	assert_ring_pos(&d, p.nodes + 3, (int[]){6, 8, 9}, 3);
	assert_int_equal(p.gpus_wasted, 12);
	hbd_plan_clear(&p);
	free(u);
}

static void test_dcn_free_closed_wraps(void **state)
{
	struct ocs_ring_domain d = small(1, false);
	int faulty[2] = {3, 8};
	uint8_t *u = uses(&d, faulty, 2);
	struct hbd_request req = {.tp = 8, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_plan p;
	bool wrapped = false;

	(void)state;
	/* Open: components of 3, 4 and 3 nodes give 1 + 2 + 1 rings of 2. */
	assert_int_equal(hbd_plan(&d, u, &req, &p, NULL), 0);
	assert_int_equal(p.n_rings, 4);
	hbd_plan_clear(&p);
	/* Closed: 9..11 and 0..2 join into 6 nodes, 3 rings, one across the seam. */
	d.closed = true;
	assert_int_equal(hbd_plan(&d, u, &req, &p, NULL), 0);
	assert_int_equal(p.n_rings, 5);
	for (int k = 0; k < p.n_rings; k++) {
		assert_true(hbd_ring_valid(&d, p.nodes + 2 * k, 2));
		wrapped |= p.nodes[2 * k] == at(&d, 11) && p.nodes[2 * k + 1] == at(&d, 0);
	}
	assert_true(wrapped);
	hbd_plan_clear(&p);
	free(u);
}

/* 4 ToRs x 2 nodes, 2 ToRs per aggregation domain: segments [0,1] [2,3] [4,5] [6,7]. */
static struct ocs_ring_domain fat(void)
{
	return (struct ocs_ring_domain){.tors = 4,
					.nodes_per_tor = 2,
					.gpus_per_node = 4,
					.k_hops = 2,
					.bundles = 2,
					.tors_per_agg = 2};
}

static void test_fat_tree_aligned(void **state)
{
	struct ocs_ring_domain d = fat();
	uint8_t *u = uses(&d, NULL, 0);
	struct hbd_request req = {.tp = 8, .orch = HBD_ORCH_FAT_TREE};
	struct hbd_plan p;

	(void)state;
	assert_int_equal(hbd_plan(&d, u, &req, &p, NULL), 0);
	assert_int_equal(p.constraints_total, 6);
	assert_int_equal(p.constraints_kept, 6);
	assert_int_equal(p.n_rings, 4);
	/* Rings grouped by ToRs: (0,1) twice, then (2,3) twice. */
	assert_ring_pos(&d, p.nodes, (int[]){0, 1, 4, 5, 2, 3, 6, 7}, 8);
	assert_float_equal(p.cross_tor_share, 2.0 / 6.0, 1e-12);
	hbd_plan_clear(&p);
	free(u);
}

static void test_fat_tree_tor_expansion(void **state)
{
	struct ocs_ring_domain d = fat();
	int faulty[1] = {0};
	uint8_t *u = uses(&d, faulty, 1);
	struct hbd_request req = {.tp = 8, .orch = HBD_ORCH_FAT_TREE};
	struct hbd_plan p;

	(void)state;
	/*
	 * The whole domain: Alg. 2 fits 3 rings in positions 1..7. Isolating
	 * the four segments still gives 3 ([2,3] [4,5] [6,7]); aligning domain 0
	 * drops ToR 0 from both sub-lines, [4,5] loses position 4: 2 rings.
	 */
	assert_int_equal(hbd_plan(&d, u, &req, &p, NULL), 0);
	assert_int_equal(p.n_rings, 3);
	assert_int_equal(p.constraints_kept, 4);
	assert_int_equal(p.gpus_wasted, 4);
	for (int k = 0; k < 3; k++)
		assert_int_equal(ocs_ring_position(&d, p.nodes[2 * k]) % 2, 0);
	hbd_plan_clear(&p);
	/* Two rings: every constraint holds, and they sit under the same ToRs. */
	req.gpus = 16;
	assert_int_equal(hbd_plan(&d, u, &req, &p, NULL), 0);
	assert_int_equal(p.constraints_kept, 6);
	assert_ring_pos(&d, p.nodes, (int[]){2, 3, 6, 7}, 4);
	assert_float_equal(p.cross_tor_share, 0.0, 0.0);
	hbd_plan_clear(&p);
	free(u);
}

static void test_greedy_seeded(void **state)
{
	struct ocs_ring_domain d = {16, 4, 4, 2, 2, 4, false};
	int faulty[3] = {5, 40, 50};
	uint8_t *u = uses(&d, faulty, 3);
	struct hbd_request req = {.tp = 12, .gpus = 12 * 10, .orch = HBD_ORCH_GREEDY, .seed = 3};
	struct hbd_plan a, b;
	bool differs = false;

	(void)state;
	assert_int_equal(hbd_plan(&d, u, &req, &a, NULL), 0);
	assert_int_equal(hbd_plan(&d, u, &req, &b, NULL), 0);
	assert_int_equal(a.n_rings, 10);
	assert_memory_equal(a.nodes, b.nodes, 30 * sizeof(int));
	for (int k = 0; k < 10; k++)
		assert_true(hbd_ring_valid(&d, a.nodes + 3 * k, 3));
	hbd_plan_clear(&b);
	for (uint64_t s = 4; s < 10 && !differs; s++) {
		req.seed = s;
		assert_int_equal(hbd_plan(&d, u, &req, &b, NULL), 0);
		differs = memcmp(a.nodes, b.nodes, 30 * sizeof(int)) != 0;
		hbd_plan_clear(&b);
	}
	assert_true(differs);
	hbd_plan_clear(&a);
	/* The whole domain: as many rings as Alg. 2 (61 free nodes, one component). */
	req.gpus = 0;
	assert_int_equal(hbd_plan(&d, u, &req, &a, NULL), 0);
	assert_int_equal(a.n_rings, 20);
	assert_int_equal(a.gpus_wasted, 4);
	hbd_plan_clear(&a);
	free(u);
}

static void test_refusals(void **state)
{
	struct ocs_ring_domain d = small(2, false);
	uint8_t *u = uses(&d, NULL, 0);
	struct hbd_request req = {.tp = 6, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_plan p;
	struct hbd_error err = {0};

	(void)state;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -EINVAL);
	assert_string_equal(err.field, "job.tp");
	req.tp = 8;
	req.gpus = 12;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -EINVAL);
	assert_string_equal(err.field, "job.gpus");
	req.gpus = 0;
	req.orch = (enum hbd_orch)9;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -EINVAL);
	assert_string_equal(err.field, "orchestration");
	req.orch = HBD_ORCH_FAT_TREE;
	d.bundles = 1;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -EINVAL);
	assert_string_equal(err.field, "ocstrx-ring.bundles");
	d.bundles = 2;
	u[3] = 7;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -EINVAL);
	u[3] = HBD_NODE_FREE;
	/* A ring longer than the domain, and a domain with nothing free. */
	req.tp = 13 * 4;
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -ENOSPC);
	assert_int_equal(p.rings_needed, 1);
	assert_int_equal(p.rings_available, 0);
	req.tp = 8;
	memset(u, HBD_NODE_BUSY, 12);
	assert_int_equal(hbd_plan(&d, u, &req, &p, &err), -ENOSPC);
	assert_int_equal(p.rings_available, 0);
	free(u);
	hbd_plan_clear(NULL);
	hbd_repair_clear(NULL);
}

/* Finds the change of (node, bundle); NULL when it is not among the changes. */
static const struct hbd_bundle *change_of(const struct hbd_repair *r, int node, int bundle)
{
	for (size_t i = 0; i < r->n_changes; i++)
		if (r->changes[i].node == node && r->changes[i].bundle == bundle)
			return &r->changes[i];
	return NULL;
}

static void test_repair_extend(void **state)
{
	struct ocs_ring_domain d = small(2, false);
	int ring[4] = {at(&d, 0), at(&d, 1), at(&d, 2), at(&d, 3)};
	uint8_t *u = uses(&d, NULL, 0);
	struct hbd_request req = {.tp = 16, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_repair r;

	(void)state;
	for (int i = 0; i < 4; i++)
		u[ring[i]] = HBD_NODE_BUSY;
	/*
	 * Position 1 fails; its gap has no free node (2 is in the ring) and
	 * nothing is below 0: the ring extends at its end, to position 5 (under
	 * the failed node's ToR 1) rather than the nearer 4 (ToR 0).
	 */
	u[ring[1]] = HBD_NODE_FAULTY;
	assert_int_equal(hbd_repair(&d, u, ring, 4, ring[1], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_EXTEND);
	assert_int_equal(r.m, 4);
	assert_int_equal(r.added, at(&d, 5));
	assert_ring_pos(&d, r.nodes, (int[]){0, 2, 3, 5}, 4);
	assert_int_equal(r.n_changes, 4);
	assert_bundle(change_of(&r, ring[0], HBD_BUNDLE_UP), ring[0], 1, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_UP, ring[2]);
	assert_bundle(change_of(&r, ring[2], HBD_BUNDLE_DOWN), ring[2], 0, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_DOWN, ring[0]);
	assert_bundle(change_of(&r, ring[3], HBD_BUNDLE_UP), ring[3], 1, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_UP, at(&d, 5));
	assert_bundle(change_of(&r, at(&d, 5), HBD_BUNDLE_DOWN), at(&d, 5), 0, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_DOWN, ring[3]);
	hbd_repair_clear(&r);

	/* Inside the gap: {0, 2, 3} loses 2 and takes in 1, between its neighbours. */
	int gap[3] = {at(&d, 0), at(&d, 2), at(&d, 3)};
	memset(u, HBD_NODE_FREE, 12);
	u[gap[0]] = u[gap[2]] = HBD_NODE_BUSY;
	u[gap[1]] = HBD_NODE_FAULTY;
	req.tp = 12;
	assert_int_equal(hbd_repair(&d, u, gap, 3, gap[1], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_EXTEND);
	assert_ring_pos(&d, r.nodes, (int[]){0, 1, 3}, 3);
	assert_int_equal(r.n_changes, 4);
	assert_bundle(change_of(&r, gap[0], HBD_BUNDLE_UP), gap[0], 1, HBD_PATH_EXTERNAL, 1,
		      HBD_DIR_UP, at(&d, 1));
	assert_bundle(change_of(&r, at(&d, 1), HBD_BUNDLE_DOWN), at(&d, 1), 0, HBD_PATH_EXTERNAL, 1,
		      HBD_DIR_DOWN, gap[0]);
	assert_bundle(change_of(&r, at(&d, 1), HBD_BUNDLE_UP), at(&d, 1), 1, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_UP, gap[2]);
	assert_bundle(change_of(&r, gap[2], HBD_BUNDLE_DOWN), gap[2], 0, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_DOWN, at(&d, 1));
	hbd_repair_clear(&r);

	/* At the front: {2, 3, 4} loses its end 4, 5 and 6 are busy; 0 (ToR 0, as 4) joins. */
	int end[3] = {at(&d, 2), at(&d, 3), at(&d, 4)};
	memset(u, HBD_NODE_FREE, 12);
	u[end[0]] = u[end[1]] = u[at(&d, 5)] = u[at(&d, 6)] = HBD_NODE_BUSY;
	u[end[2]] = HBD_NODE_FAULTY;
	assert_int_equal(hbd_repair(&d, u, end, 3, end[2], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_EXTEND);
	assert_ring_pos(&d, r.nodes, (int[]){0, 2, 3}, 3);
	assert_int_equal(r.n_changes, 3);
	assert_bundle(change_of(&r, end[1], HBD_BUNDLE_UP), end[1], 1, HBD_PATH_LOOPBACK, 0,
		      HBD_DIR_UP, -1);
	assert_bundle(change_of(&r, end[0], HBD_BUNDLE_DOWN), end[0], 0, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_DOWN, at(&d, 0));
	assert_bundle(change_of(&r, at(&d, 0), HBD_BUNDLE_UP), at(&d, 0), 1, HBD_PATH_EXTERNAL, 2,
		      HBD_DIR_UP, end[0]);
	hbd_repair_clear(&r);

	/* Bad calls. */
	assert_int_equal(hbd_repair(&d, u, ring, 4, at(&d, 7), &req, &r), -EINVAL);
	assert_int_equal(hbd_repair(&d, u, ring, 4, ring[1], &req, &r), -EINVAL); /* tp 12 */
	free(u);
}

static void test_repair_replace(void **state)
{
	struct ocs_ring_domain d = small(2, false);
	int ring[4] = {at(&d, 0), at(&d, 1), at(&d, 2), at(&d, 3)};
	uint8_t *u = uses(&d, NULL, 0);
	struct hbd_request req = {.tp = 16, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_repair r;

	(void)state;
	for (int i = 0; i < 4; i++)
		u[ring[i]] = HBD_NODE_BUSY;
	/*
	 * The first node fails and 4, 5 are faulty: nothing extends the ring
	 * (3 is more than K below 6); it moves to positions 6..9 and its old
	 * healthy nodes go back to idle.
	 */
	u[ring[0]] = u[at(&d, 4)] = u[at(&d, 5)] = HBD_NODE_FAULTY;
	assert_int_equal(hbd_repair(&d, u, ring, 4, ring[0], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_REPLACE);
	assert_int_equal(r.m, 4);
	assert_int_equal(r.added, -1);
	assert_ring_pos(&d, r.nodes, (int[]){6, 7, 8, 9}, 4);
	assert_int_equal(r.n_changes, 5 + 6);
	assert_bundle(change_of(&r, ring[1], HBD_BUNDLE_DOWN), ring[1], 0, HBD_PATH_LOOPBACK, 0,
		      HBD_DIR_UP, -1);
	assert_bundle(change_of(&r, ring[3], HBD_BUNDLE_DOWN), ring[3], 0, HBD_PATH_LOOPBACK, 0,
		      HBD_DIR_UP, -1);
	assert_null(change_of(&r, ring[3], HBD_BUNDLE_UP)); /* already on loopback */
	assert_null(change_of(&r, ring[0], HBD_BUNDLE_UP)); /* the failed node is left alone */
	assert_bundle(change_of(&r, at(&d, 6), HBD_BUNDLE_UP), at(&d, 6), 1, HBD_PATH_EXTERNAL, 1,
		      HBD_DIR_UP, at(&d, 7));
	assert_bundle(change_of(&r, at(&d, 9), HBD_BUNDLE_DOWN), at(&d, 9), 0, HBD_PATH_EXTERNAL, 1,
		      HBD_DIR_DOWN, at(&d, 8));
	hbd_repair_clear(&r);

	/* Neighbours 4 apart with K = 2 and no node fits: a re-placement, old nodes idle where
	 * unused. */
	int spread[3] = {at(&d, 0), at(&d, 2), at(&d, 4)};
	memset(u, HBD_NODE_FREE, 12);
	u[spread[0]] = u[spread[2]] = HBD_NODE_BUSY;
	u[spread[1]] = HBD_NODE_FAULTY;
	req.tp = 12;
	assert_int_equal(hbd_repair(&d, u, spread, 3, spread[1], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_REPLACE);
	assert_ring_pos(&d, r.nodes, (int[]){0, 1, 3}, 3);
	assert_null(change_of(&r, spread[1], HBD_BUNDLE_UP));
	assert_null(change_of(&r, spread[1], HBD_BUNDLE_DOWN));
	assert_bundle(change_of(&r, spread[2], HBD_BUNDLE_DOWN), spread[2], 0, HBD_PATH_LOOPBACK, 0,
		      HBD_DIR_UP, -1);
	hbd_repair_clear(&r);

	/* Nothing else free: the ring is lost, nothing changes. */
	memset(u, HBD_NODE_BUSY, 12);
	u[spread[1]] = HBD_NODE_FAULTY;
	assert_int_equal(hbd_repair(&d, u, spread, 3, spread[1], &req, &r), 0);
	assert_int_equal(r.kind, HBD_REPAIR_LOST);
	assert_null(r.nodes);
	assert_int_equal(r.n_changes, 0);
	assert_true(strlen(r.reason) > 0);
	hbd_repair_clear(&r);
	free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_bundles_open),
		cmocka_unit_test(test_bundles_wrap_and_model),
		cmocka_unit_test(test_dcn_free_components),
		cmocka_unit_test(test_dcn_free_closed_wraps),
		cmocka_unit_test(test_fat_tree_aligned),
		cmocka_unit_test(test_fat_tree_tor_expansion),
		cmocka_unit_test(test_greedy_seeded),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_repair_extend),
		cmocka_unit_test(test_repair_replace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
