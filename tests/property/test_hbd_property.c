/*
 * test_hbd_property.c - property tests of the TP-ring planner
 * (solvers/hbd_ring.c) over thousands of random OCSTrx ring domains: open
 * and closed, K 1..4, 2, 4 or 8 GPUs per node, random faulty and busy
 * nodes, every orchestration.
 *
 * Everything is re-checked from the outputs with a checker written here:
 * positions, ToRs, hop gaps and the components of the K-hop graph are
 * recomputed from the numbering of fabric.h (node n is index n % p under
 * ToR n / p, at position index * tors + tor) without the solver's helpers.
 *   - every ring is m distinct healthy free nodes, each 1..K positions
 *     above the one before it (around the circle when closed), never
 *     lapping the circle; no node is in two rings;
 *   - every orchestration places a job exactly when the sum of floor(c/m)
 *     over the components (union-find here) is enough, and dcn-free with
 *     the whole domain places exactly that many rings; a refusal reports
 *     the rings needed and available; gpus_wasted is the free GPUs left;
 *   - cross_tor_share equals the definition of issue 11, recounted;
 *   - every bundle setting joins exactly the ring neighbours, each external
 *     path is matched by the opposite bundle of its peer at the same
 *     distance, the ends and idle bundles are on loopback;
 *   - greedy gives the same plan for the same seed;
 *   - repairs: in a domain filled with rings, and in one with a random
 *     number of rings, for every single fault of every ring node and every
 *     pair of faults (each node of the repaired ring failing after the
 *     first repair): a ring never shrinks. A bypass-extend keeps the ring's
 *     healthy nodes in order plus one node that was free; a re-placement
 *     happens only when no extension exists and a "lost" only when neither
 *     an extension nor a ring of m healthy free nodes exists, both proved
 *     by brute force here (every free node at every rank; a depth-first
 *     search over every next node). Every repaired ring obeys the model on
 *     healthy nodes that were free or in the ring (never another ring's,
 *     never a faulty one); its changes turn the old settings into the new
 *     ones, change every bundle they list and never touch the failed node.
 *   - the block re-cut of the fat-tree planner (hbd_ft_polish), fed the
 *     rings of a whole-domain dcn-free plan: the same number of rings, each
 *     obeying the model on free nodes, no node twice, and fewer distinct
 *     (ToR, rank) pairs (recounted here) exactly when it says it changed a
 *     ring, never more; it must change some over the run. The same and
 *     fat-tree plans on the benchmark's 1,024-node shapes (64 ToRs x 16,
 *     16 x 64, 5% faults, 85% and 90% of the GPUs), where the re-cut works
 *     hardest, through every check above.
 *   - the block labelling (hbd_ft_label_cut) on its own, on every domain
 *     and the benchmark's shapes: valid rings on free nodes, no node twice,
 *     exactly their positions taken from the free set, every ToR at a
 *     single rank, no fewer rings than the plain tilings 0 1 2 3 and
 *     0 0 1 1 2 2 3 3 counted here (and no more than the optimum); it must
 *     beat both somewhere over the run.
 *   - the labelling extended (hbd_ft_label_extend), asked for 1 to 8 rings
 *     beyond the labelling's with a few pairs more than the labelling's or
 *     any number: when it places them, exactly that many valid rings on
 *     free nodes, no node twice, within the pair budget (recounted), no
 *     more than the optimum, the free set exactly what they leave; when it
 *     does not, the labelling's rings and free set untouched. It must
 *     place some over the run.
 *
 * Usage: test_hbd_property [seed] [domains]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbd_fattree.h"
#include "hbd_ring.h"

static int failures;
static char current[256];

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			if (failures++ < 20) {                                                     \
				fprintf(stderr, "FAIL %s: %s: ", current, #cond);                  \
				fprintf(stderr, __VA_ARGS__);                                      \
				fputc('\n', stderr);                                               \
			}                                                                          \
		}                                                                                  \
	} while (0)

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int below(uint64_t *s, int n)
{
	return (int)(rnd(s) % (uint64_t)n);
}

/* ---- the independent model ------------------------------------------------ */

static int n_of(const struct ocs_ring_domain *d)
{
	return d->tors * d->nodes_per_tor;
}

static int pos_of(const struct ocs_ring_domain *d, int node)
{
	return (node % d->nodes_per_tor) * d->tors + node / d->nodes_per_tor;
}

static int tor_of(const struct ocs_ring_domain *d, int node)
{
	return node / d->nodes_per_tor;
}

/* Positions from a to b going up (mod n when closed); -1 when b is not above a. */
static int up(const struct ocs_ring_domain *d, int node_a, int node_b)
{
	int g = pos_of(d, node_b) - pos_of(d, node_a);

	if (d->closed)
		g = ((g % n_of(d)) + n_of(d)) % n_of(d);
	return g > 0 ? g : -1;
}

static int uf_find(int *parent, int x)
{
	while (parent[x] != x)
		x = parent[x] = parent[parent[x]];
	return x;
}

/* Sum over the components of the K-hop graph of the usable nodes of floor(size / m). */
static int ring_optimum(const struct ocs_ring_domain *d, const uint8_t *usable, int m)
{
	int n = n_of(d), total = 0;
	int *parent = malloc((size_t)n * sizeof(int)), *size = calloc((size_t)n, sizeof(int));

	for (int v = 0; v < n; v++)
		parent[v] = v;
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			int g = up(d, a, b);

			if (usable[a] && usable[b] && g >= 1 && g <= d->k_hops)
				parent[uf_find(parent, a)] = uf_find(parent, b);
		}
	for (int v = 0; v < n; v++)
		if (usable[v])
			size[uf_find(parent, v)]++;
	for (int v = 0; v < n; v++)
		total += size[v] / m;
	free(parent);
	free(size);
	return total;
}

/* The ring obeys the physical model and uses only nodes usable[] allows. */
static bool ring_ok(const struct ocs_ring_domain *d, const int *ring, int m, const uint8_t *usable,
		    const char *what)
{
	int span = 0;
	bool ok = true;

	for (int i = 0; i < m; i++) {
		bool in = ring[i] >= 0 && ring[i] < n_of(d);

		CHECK(in, "%s: node %d out of range", what, ring[i]);
		if (!in)
			return false;
		CHECK(usable[ring[i]], "%s: node %d is not usable", what, ring[i]);
		ok &= usable[ring[i]] != 0;
	}
	for (int i = 1; i < m; i++) {
		int g = up(d, ring[i - 1], ring[i]);

		CHECK(g >= 1 && g <= d->k_hops, "%s: gap %d between ranks %d and %d", what, g,
		      i - 1, i);
		ok &= g >= 1 && g <= d->k_hops;
		span += g;
	}
	CHECK(span < n_of(d), "%s: the ring laps the circle (span %d)", what, span);
	return ok && span < n_of(d);
}

static double share_recount(const struct ocs_ring_domain *d, const int *nodes, int rings, int m)
{
	int cross = 0;

	if (rings < 2)
		return 0.0;
	for (int k = 0; k + 1 < rings; k++)
		for (int i = 0; i < m; i++)
			cross += tor_of(d, nodes[k * m + i]) != tor_of(d, nodes[(k + 1) * m + i]);
	return (double)cross / ((double)(rings - 1) * m);
}

/* The setting bundle b of ring[i] must have, written here from the model. */
static struct hbd_bundle expected(const struct ocs_ring_domain *d, const int *ring, int m, int i,
				  int b)
{
	struct hbd_bundle e = {ring[i], (uint8_t)b, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1};

	if (b == HBD_BUNDLE_DOWN && i > 0)
		e = (struct hbd_bundle){ring[i],	   (uint8_t)b,
					HBD_PATH_EXTERNAL, (uint8_t)up(d, ring[i - 1], ring[i]),
					HBD_DIR_DOWN,	   ring[i - 1]};
	if (b == HBD_BUNDLE_UP && i + 1 < m)
		e = (struct hbd_bundle){ring[i],	   (uint8_t)b,
					HBD_PATH_EXTERNAL, (uint8_t)up(d, ring[i], ring[i + 1]),
					HBD_DIR_UP,	   ring[i + 1]};
	return e;
}

static bool same(const struct hbd_bundle *a, const struct hbd_bundle *b)
{
	return a->node == b->node && a->bundle == b->bundle && a->path == b->path &&
	       a->distance == b->distance && a->dir == b->dir && a->peer == b->peer;
}

/* hbd_ring_bundles joins exactly the ring neighbours, both ends agreeing. */
static void check_bundles(const struct ocs_ring_domain *d, const int *ring, int m)
{
	int nb = d->bundles;
	struct hbd_bundle *set = malloc((size_t)m * nb * sizeof(*set));

	CHECK(hbd_ring_bundles(d, ring, m, set) == 0, "bundles of a valid ring refused");
	for (int i = 0; i < m; i++)
		for (int b = 0; b < nb; b++) {
			const struct hbd_bundle *s = &set[i * nb + b];
			struct hbd_bundle e = expected(d, ring, m, i, b);

			CHECK(same(s, &e), "rank %d bundle %d: path %d peer %d distance %d", i, b,
			      s->path, s->peer, s->distance);
			if (s->path != HBD_PATH_EXTERNAL)
				continue;
			/* The peer's opposite bundle points back at the same distance. */
			int j = s->dir == HBD_DIR_UP ? i + 1 : i - 1;
			int back = s->dir == HBD_DIR_UP ? HBD_BUNDLE_DOWN : HBD_BUNDLE_UP;
			bool ok = j >= 0 && j < m && ring[j] == s->peer;

			CHECK(ok, "rank %d bundle %d reaches %d, not a ring neighbour", i, b,
			      s->peer);
			if (ok) {
				const struct hbd_bundle *r = &set[j * nb + back];

				CHECK(r->peer == ring[i] && r->distance == s->distance,
				      "rank %d and %d disagree", i, j);
			}
		}
	free(set);
}

/* ---- random instances ---------------------------------------------------- */

static struct ocs_ring_domain random_domain(uint64_t *s)
{
	static const int gpn[] = {2, 4, 8};
	struct ocs_ring_domain d;
	int divisors[16], nd = 0;

	do {
		d.tors = 1 + below(s, 12);
		d.nodes_per_tor = 1 + below(s, 6);
		d.k_hops = 1 + below(s, 4);
	} while (d.k_hops >= d.tors * d.nodes_per_tor);
	d.gpus_per_node = gpn[below(s, 3)];
	d.bundles = 2 + below(s, d.gpus_per_node - 1);
	for (int t = 1; t <= d.tors; t++)
		if (d.tors % t == 0)
			divisors[nd++] = t;
	d.tors_per_agg = divisors[below(s, nd)];
	d.closed = below(s, 2);
	return d;
}

struct counts {
	long plans, placed, refused;
	long single, pairs, repairs, extend, replace, lost; /* faults, repairs and their kinds */
};

static void check_plan(const struct ocs_ring_domain *d, const uint8_t *use,
		       const struct hbd_request *req, struct counts *cnt)
{
	int n = n_of(d), m = req->tp / d->gpus_per_node, free_nodes = 0, opt;
	uint8_t *usable = malloc((size_t)n), *seen = calloc((size_t)n, 1);
	struct hbd_plan p;
	struct hbd_error err = {0};
	int64_t need;
	int rc;

	for (int v = 0; v < n; v++) {
		usable[v] = use[v] == HBD_NODE_FREE;
		free_nodes += usable[v];
	}
	opt = m <= n ? ring_optimum(d, usable, m) : 0;
	need = req->gpus ? req->gpus / req->tp : (opt ? opt : 1);
	rc = hbd_plan(d, use, req, &p, &err);
	cnt->plans++;
	CHECK(rc == 0 || rc == -ENOSPC, "rc %d (%s)", rc, err.reason);
	CHECK((rc == 0) == (need <= opt), "rc %d with %lld rings needed and %d fitting", rc,
	      (long long)need, opt);
	if (rc == -ENOSPC) {
		cnt->refused++;
		CHECK(p.rings_needed == need && p.rings_available == opt,
		      "refusal says %d needed, %d available", p.rings_needed, p.rings_available);
	}
	if (rc == 0) {
		cnt->placed++;
		CHECK(p.m == m && p.n_rings == need, "%d rings of %d", p.n_rings, p.m);
		for (int k = 0; k < p.n_rings; k++) {
			const int *ring = p.nodes + (size_t)k * m;

			if (!ring_ok(d, ring, m, usable, "plan"))
				continue;
			for (int i = 0; i < m; i++) {
				CHECK(!seen[ring[i]], "node %d in two rings", ring[i]);
				seen[ring[i]] = 1;
			}
			check_bundles(d, ring, m);
		}
		CHECK(p.gpus_placed == need * req->tp, "gpus_placed %lld",
		      (long long)p.gpus_placed);
		CHECK(p.gpus_wasted ==
			      (req->gpus ? 0 : (int64_t)(free_nodes - need * m) * d->gpus_per_node),
		      "gpus_wasted %lld", (long long)p.gpus_wasted);
		CHECK(p.cross_tor_share == share_recount(d, p.nodes, p.n_rings, m),
		      "cross_tor_share %g, recount %g", p.cross_tor_share,
		      share_recount(d, p.nodes, p.n_rings, m));
		if (req->orch == HBD_ORCH_FAT_TREE)
			CHECK(p.constraints_total ==
					      d->nodes_per_tor * (d->tors / d->tors_per_agg) +
						      d->tors / d->tors_per_agg &&
				      p.constraints_kept >= 0 &&
				      p.constraints_kept <= p.constraints_total,
			      "constraints %d of %d", p.constraints_kept, p.constraints_total);
		if (req->orch == HBD_ORCH_GREEDY) {
			struct hbd_plan again;

			CHECK(hbd_plan(d, use, req, &again, NULL) == 0 &&
				      memcmp(again.nodes, p.nodes,
					     (size_t)p.n_rings * m * sizeof(int)) == 0,
			      "greedy differs for the same seed");
			hbd_plan_clear(&again);
		}
	}
	hbd_plan_clear(&p);
	free(usable);
	free(seen);
}

/*
 * The changes of a re-placement, applied to the settings before it, give
 * the settings after it; every change changes something; only nodes of
 * the old or new ring are touched, never the failed one.
 */
static void check_replace_changes(const struct ocs_ring_domain *d, const int *old_ring,
				  const int *new_ring, int m, int failed,
				  const struct hbd_repair *r)
{
	int n = n_of(d), nb = d->bundles;
	struct hbd_bundle *state = malloc((size_t)n * nb * sizeof(*state));
	struct hbd_bundle *want = malloc((size_t)n * nb * sizeof(*want));

	for (int v = 0; v < n; v++)
		for (int b = 0; b < nb; b++)
			state[v * nb + b] = want[v * nb + b] = (struct hbd_bundle){
				v, (uint8_t)b, HBD_PATH_LOOPBACK, 0, HBD_DIR_UP, -1};
	for (int i = 0; i < m; i++)
		for (int b = 0; b < nb; b++) {
			state[old_ring[i] * nb + b] = expected(d, old_ring, m, i, b);
			want[new_ring[i] * nb + b] = expected(d, new_ring, m, i, b);
		}
	/* The failed node keeps whatever it had: nobody programs it. */
	for (int b = 0; b < nb; b++)
		want[failed * nb + b] = state[failed * nb + b];
	for (size_t c = 0; c < r->n_changes; c++) {
		const struct hbd_bundle *ch = &r->changes[c];
		bool ok = ch->node >= 0 && ch->node < n && ch->bundle < nb && ch->node != failed;

		CHECK(ok, "change of node %d bundle %d", ch->node, ch->bundle);
		if (!ok)
			continue;
		CHECK(!same(&state[ch->node * nb + ch->bundle], ch),
		      "node %d bundle %d listed without changing", ch->node, ch->bundle);
		state[ch->node * nb + ch->bundle] = *ch;
	}
	for (int v = 0; v < n * nb; v++)
		CHECK(same(&state[v], &want[v]), "node %d bundle %d wrong after the changes",
		      v / nb, v % nb);
	free(state);
	free(want);
}

/* ---- repairs: brute force, without the planner ---------------------------- */

/* Whether ring (m nodes) obeys the model, quietly: gaps 1..K, span under n. */
static bool fits(const struct ocs_ring_domain *d, const int *ring, int m)
{
	int span = 0;

	for (int i = 1; i < m; i++) {
		int g = up(d, ring[i - 1], ring[i]);

		if (g < 1 || g > d->k_hops)
			return false;
		span += g;
	}
	return span < n_of(d);
}

/*
 * Whether some healthy free node x, put at any rank of rest (the ring
 * without its failed node, m - 1 nodes), makes a ring that obeys the
 * model: every free node, every rank.
 */
static bool extension_exists(const struct ocs_ring_domain *d, const uint8_t *use, const int *rest,
			     int m)
{
	int *cand = malloc((size_t)m * sizeof(int));
	bool found = false;

	for (int x = 0; !found && m >= 2 && x < n_of(d); x++) {
		if (use[x] != HBD_NODE_FREE)
			continue;
		for (int s = 0; !found && s < m; s++) {
			for (int i = 0, r = 0; i < m; i++)
				cand[i] = i == s ? x : rest[r++];
			found = fits(d, cand, m);
		}
	}
	free(cand);
	return found;
}

/* Depth-first over every choice of next usable node: a ring of m exists from ring[0..k). */
static bool ring_from(const struct ocs_ring_domain *d, const uint8_t *usable, int *ring, int k,
		      int m, int span)
{
	if (k == m)
		return true;
	for (int v = 0; v < n_of(d); v++) {
		int g = up(d, ring[k - 1], v);

		if (!usable[v] || g < 1 || g > d->k_hops || span + g >= n_of(d))
			continue;
		ring[k] = v;
		if (ring_from(d, usable, ring, k + 1, m, span + g))
			return true;
	}
	return false;
}

static bool ring_exists(const struct ocs_ring_domain *d, const uint8_t *usable, int m)
{
	int *ring = malloc((size_t)m * sizeof(int));
	bool found = false;

	for (int v = 0; !found && v < n_of(d); v++)
		if (usable[v]) {
			ring[0] = v;
			found = ring_from(d, usable, ring, 1, m, 0);
		}
	free(ring);
	return found;
}

/*
 * One repair of ring (m nodes) after `failed` failed, use as the daemon
 * gives it (failed faulty, the ring busy). Checks the outcome against the
 * brute force and the model; returns the repaired ring (caller frees),
 * NULL when lost.
 */
static int *check_repair(const struct ocs_ring_domain *d, const uint8_t *use, const int *ring,
			 int m, int failed, const struct hbd_request *req, struct counts *cnt)
{
	int n = n_of(d), *rest = malloc((size_t)m * sizeof(int)), *kept = NULL;
	uint8_t *usable = malloc((size_t)n);
	struct hbd_repair r;
	bool can_extend;
	int rc;

	for (int i = 0, k = 0; i < m; i++)
		if (ring[i] != failed)
			rest[k++] = ring[i];
	for (int v = 0; v < n; v++)
		usable[v] = use[v] == HBD_NODE_FREE;
	for (int i = 0; i < m; i++)
		usable[ring[i]] = ring[i] != failed;
	can_extend = extension_exists(d, use, rest, m);
	rc = hbd_repair(d, use, ring, m, failed, req, &r);
	CHECK(rc == 0, "repair failed: %d", rc);
	if (rc)
		goto done;
	cnt->repairs++;
	if (r.kind == HBD_REPAIR_EXTEND) {
		int x = r.added;

		cnt->extend++;
		CHECK(can_extend, "extended where the brute force finds no extension");
		CHECK(r.m == m, "extended ring of %d, not %d", r.m, m);
		CHECK(x >= 0 && x < n && use[x] == HBD_NODE_FREE, "took in node %d, not free", x);
		/* The ring's healthy nodes in their order, x somewhere among them. */
		for (int i = 0, k = 0; i < r.m; i++) {
			if (r.nodes[i] == x)
				continue;
			CHECK(k < m - 1 && r.nodes[i] == rest[k], "extension reorders rank %d", i);
			k++;
		}
		if (ring_ok(d, r.nodes, m, usable, "extended"))
			check_replace_changes(d, ring, r.nodes, m, failed, &r);
	} else if (r.kind == HBD_REPAIR_REPLACE) {
		cnt->replace++;
		CHECK(!can_extend, "re-placed although an extension exists");
		CHECK(r.m == m, "re-placed ring of %d, not %d", r.m, m);
		if (ring_ok(d, r.nodes, m, usable, "re-placed"))
			check_replace_changes(d, ring, r.nodes, m, failed, &r);
	} else {
		cnt->lost++;
		CHECK(r.kind == HBD_REPAIR_LOST, "kind %d", r.kind);
		CHECK(!can_extend, "lost although an extension exists");
		CHECK(!ring_exists(d, usable, m), "lost although a ring of %d exists", m);
		CHECK(!r.nodes && r.n_changes == 0, "lost with nodes or changes");
	}
	if (r.kind != HBD_REPAIR_LOST && r.nodes) {
		kept = malloc((size_t)m * sizeof(int));
		memcpy(kept, r.nodes, (size_t)m * sizeof(int));
	}
	hbd_repair_clear(&r);
done:
	free(rest);
	free(usable);
	return kept;
}

/*
 * Fills the domain with `rings` dcn-free rings (0: all that fit) and, ring
 * by ring, fails every node (a single fault), then after that repair every
 * node of the repaired ring (a pair of faults), restoring the domain
 * between faults.
 */
static void check_repairs(const struct ocs_ring_domain *d, uint8_t *use, int tp, int rings,
			  enum hbd_orch orch, struct counts *cnt)
{
	int n = n_of(d), m = tp / d->gpus_per_node;
	struct hbd_request req = {.tp = tp, .gpus = (int64_t)rings * tp, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_plan p;
	uint8_t *use2 = malloc((size_t)n);

	if (hbd_plan(d, use, &req, &p, NULL) != 0) {
		free(use2);
		return;
	}
	req.orch = orch;
	req.gpus = 0;
	for (int k = 0; k < p.n_rings * m; k++)
		use[p.nodes[k]] = HBD_NODE_BUSY;
	for (int k = 0; k < p.n_rings; k++) {
		const int *ring = p.nodes + (size_t)k * m;

		for (int j = 0; j < m; j++) {
			int failed = ring[j], *once;

			use[failed] = HBD_NODE_FAULTY;
			cnt->single++;
			once = check_repair(d, use, ring, m, failed, &req, cnt);
			for (int f = 0; once && f < m; f++) {
				/* The domain after the first repair: its ring busy, the old one
				 * freed. */
				memcpy(use2, use, (size_t)n);
				for (int i = 0; i < m; i++)
					if (ring[i] != failed)
						use2[ring[i]] = HBD_NODE_FREE;
				for (int i = 0; i < m; i++)
					use2[once[i]] = HBD_NODE_BUSY;
				use2[once[f]] = HBD_NODE_FAULTY;
				cnt->pairs++;
				free(check_repair(d, use2, once, m, once[f], &req, cnt));
			}
			free(once);
			use[failed] = HBD_NODE_BUSY;
		}
	}
	for (int k = 0; k < p.n_rings * m; k++)
		use[p.nodes[k]] = HBD_NODE_FREE;
	hbd_plan_clear(&p);
	free(use2);
}

/* Distinct (ToR, rank) pairs of rings (n_rings of m nodes), recounted. */
static int pairs_recount(const struct ocs_ring_domain *d, const int *rings, int n_rings, int m)
{
	uint8_t *seen = calloc((size_t)d->tors * m, 1);
	int count = 0;

	for (int k = 0; k < n_rings; k++)
		for (int i = 0; i < m; i++) {
			size_t q = (size_t)tor_of(d, rings[k * m + i]) * m + i;

			count += !seen[q];
			seen[q] = 1;
		}
	free(seen);
	return count;
}

/* The block re-cut of a whole-domain dcn-free plan's rings; returns 1 when it cut pairs. */
static int check_polish(const struct ocs_ring_domain *d, const uint8_t *use, int m)
{
	int n = n_of(d), rc, before, after, fewer = 0;
	uint8_t *usable = malloc((size_t)n), *seen = calloc((size_t)n, 1);
	struct hbd_request req = {.tp = m * d->gpus_per_node, .orch = HBD_ORCH_DCN_FREE};
	struct hbd_cut cut = {.d = d, .n = n, .m = m, .free = malloc((size_t)n)};
	struct hbd_plan p;

	for (int v = 0; v < n; v++) {
		usable[v] = use[v] == HBD_NODE_FREE;
		cut.free[pos_of(d, v)] = usable[v];
	}
	if (hbd_plan(d, use, &req, &p, NULL) == 0 && p.n_rings > 0) {
		before = pairs_recount(d, p.nodes, p.n_rings, m);
		rc = hbd_ft_polish(&cut, p.nodes, p.n_rings);
		CHECK(rc == 0 || rc == 1, "polish rc %d", rc);
		after = pairs_recount(d, p.nodes, p.n_rings, m);
		CHECK(rc == 1 ? after < before : after == before,
		      "polish says %d, (ToR, rank) pairs %d -> %d", rc, before, after);
		fewer = rc == 1 && after < before;
		for (int k = 0; k < p.n_rings; k++) {
			const int *ring = p.nodes + (size_t)k * m;

			if (!ring_ok(d, ring, m, usable, "re-cut"))
				continue;
			for (int i = 0; i < m; i++) {
				CHECK(!seen[ring[i]], "re-cut: node %d in two rings", ring[i]);
				seen[ring[i]] = 1;
			}
		}
	}
	hbd_plan_clear(&p);
	free(cut.free);
	free(usable);
	free(seen);
	return fewer;
}

/*
 * Rings the w = 1 and w = 2 tilings hold (hbd_label.c's patterns 0 1 2 3
 * and 0 0 1 1 2 2 3 3 on blocks from ToR 0), counted without its code: a
 * lower bound on what the block labelling finds. 0 where a tiling does not
 * apply (ToRs not a multiple of the block, or K < 3 for w = 2, where a
 * node of rank r does not reach both of rank r + 1).
 */
static int tiling_rings(const struct ocs_ring_domain *d, const uint8_t *usable, int m, int w)
{
	int len = w * m, total = 0;

	if (d->tors % len != 0 || (w == 2 && d->k_hops < 3) || (w == 1 && d->k_hops < 1))
		return 0;
	for (int row = 0; row < d->nodes_per_tor; row++)
		for (int b = 0; b < d->tors / len; b++) {
			int least = w;

			for (int r = 0; r < m; r++) {
				int here = 0;

				for (int j = 0; j < w; j++) {
					int pos = row * d->tors + b * len + r * w + j;

					here += usable[pos % d->tors * d->nodes_per_tor +
						       pos / d->tors];
				}
				least = here < least ? here : least;
			}
			total += least;
		}
	return total;
}

/*
 * The block labelling (hbd_ft_label_cut) alone: valid rings on free nodes,
 * no node twice, exactly their positions taken out of the free set, every
 * ToR at one rank, and at least as many rings as the w = 1 and w = 2
 * tilings counted above. Returns 1 when it beat both.
 */
static int check_label(const struct ocs_ring_domain *d, const uint8_t *use, int m)
{
	int n = n_of(d), rc, best_tiling;
	uint8_t *usable = malloc((size_t)n), *seen = calloc((size_t)n, 1);
	int *rank_of_tor = malloc((size_t)d->tors * sizeof(int));
	struct hbd_cut cut = {.d = d,
			      .n = n,
			      .m = m,
			      .free = malloc((size_t)n),
			      .rings = malloc((size_t)n * sizeof(int))};

	for (int t = 0; t < d->tors; t++)
		rank_of_tor[t] = -1;
	for (int v = 0; v < n; v++) {
		usable[v] = use[v] == HBD_NODE_FREE;
		cut.free[pos_of(d, v)] = usable[v];
	}
	rc = hbd_ft_label_cut(&cut, 3);
	CHECK(rc >= 0 && rc == cut.n_rings, "label cut rc %d, %d rings", rc, cut.n_rings);
	for (int k = 0; k < cut.n_rings && rc > 0; k++) {
		const int *ring = cut.rings + (size_t)k * m;

		if (!ring_ok(d, ring, m, usable, "label"))
			continue;
		for (int i = 0; i < m; i++) {
			int t = tor_of(d, ring[i]);

			CHECK(!seen[ring[i]], "label: node %d in two rings", ring[i]);
			seen[ring[i]] = 1;
			CHECK(rank_of_tor[t] < 0 || rank_of_tor[t] == i,
			      "label: ToR %d at ranks %d and %d", t, rank_of_tor[t], i);
			rank_of_tor[t] = i;
		}
	}
	for (int v = 0; v < n && rc >= 0; v++)
		CHECK(cut.free[pos_of(d, v)] == (usable[v] && !seen[v]),
		      "label: node %d free %d after the cut (usable %d, in a ring %d)", v,
		      cut.free[pos_of(d, v)], usable[v], seen[v]);
	best_tiling = tiling_rings(d, usable, m, 1);
	if (tiling_rings(d, usable, m, 2) > best_tiling)
		best_tiling = tiling_rings(d, usable, m, 2);
	CHECK(cut.n_rings >= best_tiling, "label: %d rings, a plain tiling holds %d", cut.n_rings,
	      best_tiling);
	CHECK(cut.n_rings <= ring_optimum(d, usable, m), "label: %d rings above the optimum %d",
	      cut.n_rings, ring_optimum(d, usable, m));
	free(cut.free);
	free(cut.rings);
	free(usable);
	free(seen);
	free(rank_of_tor);
	return cut.n_rings > best_tiling;
}

/*
 * The block labelling extended (hbd_ft_label_extend), asked for 1 to 8
 * rings more than the labelling holds, with at most max_pairs (ToR, rank)
 * pairs: when it says it placed them, exactly `need` valid rings on free
 * nodes (the labelling's included), no node twice, at most max_pairs
 * distinct pairs (recounted), no more than the optimum, and the free set
 * exactly the usable nodes outside them; when it says it did not, the
 * labelling's rings and free set untouched. Returns 1 when it placed them.
 */
static int check_extend(const struct ocs_ring_domain *d, const uint8_t *use, int m, uint64_t *s)
{
	int n = n_of(d), rc, labelled, need, max_pairs, placed = 0;
	uint8_t *usable = malloc((size_t)n), *seen = calloc((size_t)n, 1), *free_before;
	int *rings_before;
	struct hbd_cut cut = {.d = d,
			      .n = n,
			      .m = m,
			      .free = malloc((size_t)n),
			      .rings = malloc((size_t)n * sizeof(int))};

	for (int v = 0; v < n; v++) {
		usable[v] = use[v] == HBD_NODE_FREE;
		cut.free[pos_of(d, v)] = usable[v];
	}
	rc = hbd_ft_label_cut(&cut, 2 + below(s, 2));
	labelled = cut.n_rings;
	if (rc <= 0) {
		CHECK(rc == 0, "label cut rc %d", rc);
		goto out;
	}
	need = labelled + 1 + below(s, 8);
	/* Half the time a few pairs beyond the labelling's, else every pair. */
	max_pairs = pairs_recount(d, cut.rings, labelled, m) +
		    (below(s, 2) ? below(s, 3) : d->tors * m);
	free_before = malloc((size_t)n);
	rings_before = malloc((size_t)labelled * m * sizeof(int));
	memcpy(free_before, cut.free, (size_t)n);
	memcpy(rings_before, cut.rings, (size_t)labelled * m * sizeof(int));
	rc = hbd_ft_label_extend(&cut, need, max_pairs);
	CHECK(rc == 0 || rc == 1, "extend rc %d", rc);
	if (rc == 0) {
		CHECK(cut.n_rings == labelled &&
			      !memcmp(rings_before, cut.rings,
				      (size_t)labelled * m * sizeof(int)) &&
			      !memcmp(free_before, cut.free, (size_t)n),
		      "extend: refused (need %d, labelled %d) but changed the cut", need, labelled);
	} else if (rc == 1) {
		CHECK(cut.n_rings == need, "extend: %d rings for a need of %d", cut.n_rings, need);
		for (int k = 0; k < cut.n_rings; k++) {
			const int *ring = cut.rings + (size_t)k * m;

			if (!ring_ok(d, ring, m, usable, "extend"))
				continue;
			for (int i = 0; i < m; i++) {
				CHECK(!seen[ring[i]], "extend: node %d in two rings", ring[i]);
				seen[ring[i]] = 1;
			}
		}
		CHECK(pairs_recount(d, cut.rings, cut.n_rings, m) <= max_pairs,
		      "extend: %d (ToR, rank) pairs, at most %d allowed",
		      pairs_recount(d, cut.rings, cut.n_rings, m), max_pairs);
		CHECK(cut.n_rings <= ring_optimum(d, usable, m),
		      "extend: %d rings above the optimum %d", cut.n_rings,
		      ring_optimum(d, usable, m));
		for (int v = 0; v < n; v++)
			CHECK(cut.free[pos_of(d, v)] == (usable[v] && !seen[v]),
			      "extend: node %d free %d after (usable %d, in a ring %d)", v,
			      cut.free[pos_of(d, v)], usable[v], seen[v]);
		placed = 1;
	}
	free(free_before);
	free(rings_before);
out:
	free(cut.free);
	free(cut.rings);
	free(usable);
	free(seen);
	return placed;
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261124;
	int domains = argc > 2 ? atoi(argv[2]) : 3000;
	struct counts cnt = {0};
	int recut = 0, label_beat = 0, extended = 0;

	for (int t = 0; t < domains; t++) {
		uint64_t s = seed + (uint64_t)t * 7919;
		struct ocs_ring_domain d = random_domain(&s);
		int n = n_of(&d), fault_pct = below(&s, 30), busy_pct = below(&s, 30);
		uint8_t *use = calloc((size_t)n, 1);
		int m = 1 + below(&s, 6);
		struct hbd_request req = {.tp = m * d.gpus_per_node, .seed = rnd(&s)};

		snprintf(
			current, sizeof(current),
			"seed %llu domain %d (tors %d p %d gpn %d K %d bundles %d agg %d %s, m %d)",
			(unsigned long long)seed, t, d.tors, d.nodes_per_tor, d.gpus_per_node,
			d.k_hops, d.bundles, d.tors_per_agg, d.closed ? "closed" : "open", m);
		for (int v = 0; v < n; v++) {
			int x = below(&s, 100);

			use[v] = x < fault_pct		    ? HBD_NODE_FAULTY
				 : x < fault_pct + busy_pct ? HBD_NODE_BUSY
							    : HBD_NODE_FREE;
		}
		for (int o = 0; o < 3; o++) {
			req.orch = (enum hbd_orch)o;
			req.gpus = 0;
			check_plan(&d, use, &req, &cnt);
			req.gpus = (int64_t)req.tp * (1 + below(&s, n / m + 2));
			check_plan(&d, use, &req, &cnt);
		}
		/*
		 * The repair property: a domain without busy nodes, filled with
		 * rings (few free nodes left), then with a random number of them.
		 */
		for (int v = 0; v < n; v++)
			if (use[v] == HBD_NODE_BUSY)
				use[v] = HBD_NODE_FREE;
		recut += check_polish(&d, use, m);
		label_beat += check_label(&d, use, m);
		extended += check_extend(&d, use, m, &s);
		check_repairs(&d, use, req.tp, 0, (enum hbd_orch)below(&s, 3), &cnt);
		check_repairs(&d, use, req.tp, 1 + below(&s, n / m + 1),
			      (enum hbd_orch)below(&s, 3), &cnt);
		free(use);
	}
	/* The benchmark's shapes: 5% faults, fat-tree at 85% and 90% of the GPUs. */
	for (int t = 0; t < 8; t++) {
		static const struct ocs_ring_domain big[] = {{64, 16, 8, 3, 3, 8, true},
							     {16, 64, 8, 3, 3, 4, true}};
		const struct ocs_ring_domain *d = &big[t % 2];
		uint64_t s = seed + 104729 + (uint64_t)t;
		uint8_t use[1024] = {0};
		struct hbd_request req = {.tp = 32, .orch = HBD_ORCH_FAT_TREE};

		snprintf(current, sizeof(current), "seed %llu shape %dx%d set %d",
			 (unsigned long long)seed, d->tors, d->nodes_per_tor, t);
		for (int f = 0; f < 51;) {
			int v = below(&s, 1024);

			f += use[v] == HBD_NODE_FREE;
			use[v] = HBD_NODE_FAULTY;
		}
		req.gpus = (t / 2 % 2 ? 7372 : 6963) / 32 * 32;
		check_plan(d, use, &req, &cnt);
		recut += check_polish(d, use, 4);
		label_beat += check_label(d, use, 4);
		extended += check_extend(d, use, 4, &s);
	}
	printf("hbd property: %d domains, %ld plans (%ld placed, %ld refused); %ld single faults "
	       "and %ld pairs of faults, %ld repairs: %ld bypass-extend, %ld re-placed, %ld lost; "
	       "%d failures; %d block re-cuts used fewer (ToR, rank) pairs; %d block labellings "
	       "held more rings than a plain tiling; %d extended\n",
	       domains, cnt.plans, cnt.placed, cnt.refused, cnt.single, cnt.pairs, cnt.repairs,
	       cnt.extend, cnt.replace, cnt.lost, failures, recut, label_beat, extended);
	/* Each outcome must have been exercised, or the generator is too narrow. */
	if (cnt.extend == 0 || cnt.replace == 0 || cnt.lost == 0 || cnt.refused == 0 ||
	    recut == 0 || label_beat == 0 || extended == 0) {
		fprintf(stderr, "FAIL: some outcome never happened\n");
		return 1;
	}
	return failures ? 1 : 0;
}
