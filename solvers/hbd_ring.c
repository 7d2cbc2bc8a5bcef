/*
 * hbd_ring.c - the TP-ring planner of an OCSTrx ring domain (hbd_ring.h):
 * the three orchestrations and the bundle settings of a ring (the repair of
 * a ring after a node fault is hbd_repair.c).
 *
 * Everything works on deployment positions (fabric.h: position = index *
 * tors + tor). Symbols of the paper (InfinitePOD appendix D):
 *   n  nodes of the domain, K  the hop reach (k_hops), m  nodes per ring,
 *   p  nodes per ToR (the number of sub-lines), A  ToRs per aggregation
 *   domain, so a "segment" (sub-line j inside aggregation domain a) is the
 *   A consecutive positions j*tors + a*A ... + A-1; segments in deployment
 *   order are just the blocks [s*A, s*A + A) of positions.
 *
 * dcn-free (Alg. 2): the free positions split into components wherever two
 * consecutive free positions are more than K apart (around the circle when
 * closed); a component of c nodes is cut into floor(c/m) runs of m, each a
 * ring. A ring can only use nodes of one component, so this count is the
 * optimum.
 *
 * fat-tree (Algs. 4, 5): constraint c (0 <= c < n_seg) isolates segment c,
 * constraint n_seg + a aligns aggregation domain a: every ToR of the domain
 * with an unavailable node is dropped from all sub-lines (the ToR-fault
 * expansion), so that every segment of the domain has the same free ToRs and
 * cuts into rings at the same ToR windows. Placement with nc constraints
 * isolates the first min(nc, n_seg) segments, aligns the first
 * max(0, nc - n_seg) domains and cuts what follows the isolated segments as
 * one line; a binary search finds the largest nc that still places the job.
 * A second binary search then finds how many free nodes the cuts may leave
 * out (at most m - 1 at a time) so that rings start on a ToR window (ToR a
 * multiple of m) while the job still fits: the job's spare nodes go where
 * they bring a sub-line's rings back in line with the other sub-lines.
 * That is one placement; the rank-aligned cut of hbd_fattree.c is another
 * (it leaves the spare nodes out, and lets a ring skip a fault, where that
 * keeps each rank under the fewest ToRs), the block labelling of
 * hbd_label.c the third (every ToR at one rank, in blocks of patterns
 * chosen to lose the fewest rings to faults; where it holds a few rings
 * too few, hbd_extend.c opens a few more (ToR, rank) pairs and re-cuts
 * the line), and the job gets whichever has the lowest cross_tor_share,
 * then its block re-cut (hbd_fattree.c) when that has a lower share still. Either way
 * hbd_ft_order() takes the rings of the largest groups of rings with the same ToR sequence first
 * and chains the groups along short Hamming steps, so that consecutive rings put each rank under
 * the same ToR as often as possible (that is what cross_tor_share measures).
 *
 * greedy (the paper's baseline): the cut of Alg. 2 started at a random
 * offset inside each component, and the rings taken in random order. It
 * places exactly the jobs dcn-free places, with no care for ToRs.
 */
#include "hbd_ring.h"
#include "hbd_fattree.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const orch_names[] = {"dcn-free", "fat-tree", "greedy"};

const char *hbd_orch_name(enum hbd_orch o)
{
	if ((unsigned)o >= sizeof(orch_names) / sizeof(orch_names[0]))
		return NULL;
	return orch_names[o];
}

int hbd_orch_parse(const char *name, enum hbd_orch *out)
{
	for (unsigned i = 0; i < sizeof(orch_names) / sizeof(orch_names[0]); i++) {
		if (name && strcmp(name, orch_names[i]) == 0) {
			*out = (enum hbd_orch)i;
			return 0;
		}
	}
	return -EINVAL;
}

void hbd_plan_clear(struct hbd_plan *p)
{
	if (!p)
		return;
	free(p->nodes);
	p->nodes = NULL;
	p->n_rings = 0;
}

static void set_error(struct hbd_error *err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(struct hbd_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->field = field;
	va_start(ap, fmt);
	vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
	va_end(ap);
}

/* splitmix64: the greedy baseline's own generator (no rand()). */
static uint64_t prng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int prng_below(uint64_t *s, int bound)
{
	return bound <= 1 ? 0 : (int)(prng_next(s) % (uint64_t)bound);
}

/* How many positions b sits above a (around the circle when closed); <= 0 when below. */
static int gap_up(const struct ocs_ring_domain *d, int pos_a, int pos_b)
{
	int g = pos_b - pos_a;

	if (d->closed && g <= 0)
		g += ocs_ring_nodes(d);
	return g;
}

bool hbd_ring_valid(const struct ocs_ring_domain *d, const int *ring, int m)
{
	int n = ocs_ring_nodes(d), span = 0;

	if (!ring || m < 1 || m > n)
		return false;
	for (int i = 0; i < m; i++)
		if (ring[i] < 0 || ring[i] >= n)
			return false;
	for (int i = 1; i < m; i++) {
		int g = gap_up(d, ocs_ring_position(d, ring[i - 1]), ocs_ring_position(d, ring[i]));

		if (g < 1 || g > d->k_hops)
			return false;
		span += g;
	}
	/* Monotone around the circle: the ring never laps it, so its nodes are distinct. */
	return span < n;
}

void hbd_idle_bundles(const struct ocs_ring_domain *d, int node, struct hbd_bundle *out)
{
	for (int b = 0; b < d->bundles; b++)
		out[b] = (struct hbd_bundle){.node = node,
					     .bundle = (uint8_t)b,
					     .path = HBD_PATH_LOOPBACK,
					     .distance = 0,
					     .dir = HBD_DIR_UP,
					     .peer = -1};
}

static struct hbd_bundle external(int node, int bundle, int distance, enum hbd_dir dir, int peer)
{
	return (struct hbd_bundle){.node = node,
				   .bundle = (uint8_t)bundle,
				   .path = HBD_PATH_EXTERNAL,
				   .distance = (uint8_t)distance,
				   .dir = (uint8_t)dir,
				   .peer = peer};
}

int hbd_ring_bundles(const struct ocs_ring_domain *d, const int *ring, int m,
		     struct hbd_bundle *out)
{
	if (!hbd_ring_valid(d, ring, m) || (m >= 2 && d->bundles < 2))
		return -EINVAL;
	for (int i = 0; i < m; i++) {
		struct hbd_bundle *b = out + (size_t)i * (size_t)d->bundles;
		int pos = ocs_ring_position(d, ring[i]);

		hbd_idle_bundles(d, ring[i], b);
		if (i > 0)
			b[HBD_BUNDLE_DOWN] =
				external(ring[i], HBD_BUNDLE_DOWN,
					 gap_up(d, ocs_ring_position(d, ring[i - 1]), pos),
					 HBD_DIR_DOWN, ring[i - 1]);
		if (i + 1 < m)
			b[HBD_BUNDLE_UP] =
				external(ring[i], HBD_BUNDLE_UP,
					 gap_up(d, pos, ocs_ring_position(d, ring[i + 1])),
					 HBD_DIR_UP, ring[i + 1]);
	}
	return 0;
}

double hbd_cross_tor_share(const struct ocs_ring_domain *d, const int *nodes, int n_rings, int m)
{
	int64_t cross = 0;

	if (n_rings < 2 || m < 1)
		return 0.0;
	for (int k = 0; k + 1 < n_rings; k++)
		for (int i = 0; i < m; i++)
			cross += ocs_ring_node_tor(d, nodes[(size_t)k * m + i]) !=
				 ocs_ring_node_tor(d, nodes[(size_t)(k + 1) * m + i]);
	return (double)cross / ((double)(n_rings - 1) * m);
}

/* ---- the cut of Alg. 2 (struct hbd_cut: hbd_fattree.h) ------------------ */

/*
 * Fat-tree: how many free nodes to leave out before index idx so that the
 * ring starts on a ToR window (its ToR a multiple of m, like every aligned
 * ring); 0 when no window start is within m - 1 nodes, the budget and the
 * component (end index b).
 */
static int window_skip(const struct hbd_cut *c, int start, int count, int idx, int b)
{
	for (int s = 0; s < c->m && s <= c->skip_budget && b - (idx + s) >= c->m; s++) {
		int pos = c->pos_list[(start + idx + s) % count];

		if (pos % c->d->tors % c->m == 0)
			return s;
	}
	return 0;
}

/* Cuts the run of component positions pos_list[(start + a) % c .. b) into rings. */
static void cut_component(struct hbd_cut *c, int start, int count, int a, int b)
{
	int idx = a;

	if (c->prng)
		idx += prng_below(c->prng, (b - a) % c->m + 1);
	while (b - idx >= c->m) {
		int *ring = c->rings + (size_t)c->n_rings * c->m;
		int skip = c->skip_budget > 0 ? window_skip(c, start, count, idx, b) : 0;

		idx += skip;
		c->skip_budget -= skip;
		for (int i = 0; i < c->m; i++)
			ring[i] = ocs_ring_node_at(c->d, c->pos_list[(start + idx + i) % count]);
		c->n_rings++;
		idx += c->m;
	}
}

/*
 * Cuts the free positions of [lo, hi) into rings, appended to c->rings.
 * wrap: the range is the whole closed circle, so the last free position may
 * join the first.
 */
static void cut_range(struct hbd_cut *c, int lo, int hi, bool wrap)
{
	int count = 0, start = 0, a = 0, k = c->d->k_hops;

	for (int pos = lo; pos < hi; pos++)
		if (c->free[pos])
			c->pos_list[count++] = pos;
	if (count == 0)
		return;
	if (wrap) {
		/* Start after a gap wider than K; with none, the free nodes form one cycle. */
		for (int i = 0; i < count; i++) {
			int prev = c->pos_list[(i + count - 1) % count];

			if (gap_up(c->d, prev, c->pos_list[i]) > k) {
				start = i;
				break;
			}
		}
	}
	for (int t = 1; t <= count; t++) {
		bool end = t == count;

		if (!end) {
			int prev = c->pos_list[(start + t - 1) % count];
			int cur = c->pos_list[(start + t) % count];

			end = (wrap ? gap_up(c->d, prev, cur) : cur - prev) > k;
		}
		if (end) {
			cut_component(c, start, count, a, t);
			a = t;
		}
	}
}

/* ---- fat-tree (Algs. 4, 5) ----------------------------------------------- */

struct fat_tree {
	int tors_per_agg, n_seg, n_agg;
	int skip_budget; /* free nodes the placement may leave out to start rings on windows */
	const uint8_t *base_free; /* by position: free before any expansion */
	uint8_t *tor_blocked;	  /* by ToR: some node of it is not free */
};

/* Placement-Fat-Tree with nc constraints kept; the rings land in c->rings. */
static int fat_tree_place(struct hbd_cut *c, const struct fat_tree *ft, int nc)
{
	const struct ocs_ring_domain *d = c->d;
	int n_isolated = nc < ft->n_seg ? nc : ft->n_seg;
	int n_aligned = nc > ft->n_seg ? nc - ft->n_seg : 0;
	int A = ft->tors_per_agg;

	memcpy(c->free, ft->base_free, (size_t)c->n);
	/* The ToR-fault expansion of the alignment constraint. */
	for (int t = 0; t < n_aligned * A; t++)
		if (ft->tor_blocked[t])
			for (int j = 0; j < d->nodes_per_tor; j++)
				c->free[j * d->tors + t] = 0;
	c->n_rings = 0;
	c->skip_budget = ft->skip_budget;
	for (int s = 0; s < n_isolated; s++)
		cut_range(c, s * A, s * A + A, false);
	cut_range(c, n_isolated * A, c->n, d->closed && n_isolated == 0);
	return c->n_rings;
}

/* ---- hbd_plan ------------------------------------------------------------ */

/* The request's name of a domain field the validator names ("k-hops" -> "ocstrx-ring.k-hops"). */
static const char *domain_field(const char *name)
{
	static const char *const fields[] = {
		"ocstrx-ring.tors",   "ocstrx-ring.nodes-per-tor", "ocstrx-ring.gpus-per-node",
		"ocstrx-ring.k-hops", "ocstrx-ring.bundles",	   "ocstrx-ring.tors-per-agg",
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strcmp(fields[i] + strlen("ocstrx-ring."), name) == 0)
			return fields[i];
	return "ocstrx-ring";
}

static int check_request(const struct ocs_ring_domain *d, const uint8_t *use,
			 const struct hbd_request *req, struct hbd_error *err)
{
	struct ocs_fabric_problem problem;
	int n;

	if (!d || !use || !req) {
		set_error(err, NULL, "no domain, node use or request");
		return -EINVAL;
	}
	if (ocs_ring_validate(d, &problem, 1) > 0) {
		set_error(err, domain_field(problem.field), "%s", problem.reason);
		return -EINVAL;
	}
	if (d->k_hops > UINT8_MAX) {
		set_error(err, "ocstrx-ring.k-hops", "at most %d hops", UINT8_MAX);
		return -EINVAL;
	}
	if (req->tp < 1 || req->tp % d->gpus_per_node != 0) {
		set_error(err, "job.tp", "%d is not a positive multiple of gpus-per-node (%d)",
			  req->tp, d->gpus_per_node);
		return -EINVAL;
	}
	if (req->gpus < 0 || req->gpus % req->tp != 0) {
		set_error(err, "job.gpus", "%lld is not a multiple of tp (%d)",
			  (long long)req->gpus, req->tp);
		return -EINVAL;
	}
	if (!hbd_orch_name(req->orch)) {
		set_error(err, "orchestration", "must be dcn-free, fat-tree or greedy");
		return -EINVAL;
	}
	if (req->tp / d->gpus_per_node >= 2 && d->bundles < 2) {
		set_error(err, "ocstrx-ring.bundles",
			  "a ring of 2 or more nodes needs a DOWN and an UP bundle per node");
		return -EINVAL;
	}
	n = ocs_ring_nodes(d);
	for (int i = 0; i < n; i++) {
		if (use[i] > HBD_NODE_FAULTY) {
			set_error(err, "nodes", "node %d has an unknown use %u", i, use[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * Algs. 4-5 and the window search; spare: free nodes beyond the job's, the
 * most any placement of it can leave out. Leaves the rings in c->rings.
 */
static int fat_tree(struct hbd_cut *c, int64_t need, int64_t spare, struct hbd_plan *out)
{
	const struct ocs_ring_domain *d = c->d;
	struct fat_tree ft = {.tors_per_agg = d->tors_per_agg};
	uint8_t *base = malloc((size_t)c->n), *blocked = calloc((size_t)d->tors, 1);
	int low = 0, high, best = 0, skip = 0;

	if (!base || !blocked) {
		free(base);
		free(blocked);
		return -ENOMEM;
	}
	memcpy(base, c->free, (size_t)c->n);
	for (int pos = 0; pos < c->n; pos++)
		if (!base[pos])
			blocked[pos % d->tors] = 1;
	ft.n_agg = ocs_ring_agg_domains(d);
	ft.n_seg = ft.n_agg * d->nodes_per_tor;
	ft.base_free = base;
	ft.tor_blocked = blocked;
	high = ft.n_seg + ft.n_agg;
	out->constraints_total = high;
	while (low <= high) {
		int mid = low + (high - low) / 2;

		if (fat_tree_place(c, &ft, mid) >= need) {
			best = mid;
			low = mid + 1;
		} else {
			high = mid - 1;
		}
	}
	/*
	 * nc = 0 is the cut of Alg. 2, which the caller checked places the job.
	 * Then the same search over the free nodes the cut may leave out to
	 * start rings on ToR windows: the spare nodes of the job go where they
	 * bring rings back into line with those of the other sub-lines.
	 */
	low = 1;
	high = (int)spare;
	while (low <= high) {
		int mid = low + (high - low) / 2;

		ft.skip_budget = mid;
		if (fat_tree_place(c, &ft, best) >= need) {
			skip = mid;
			low = mid + 1;
		} else {
			high = mid - 1;
		}
	}
	ft.skip_budget = skip;
	fat_tree_place(c, &ft, best);
	out->constraints_kept = best;
	free(base);
	free(blocked);
	return 0;
}

/*
 * The block labelling (hbd_label.c, patterns of at most max_w rings) as a
 * placement: its rings and, where they are fewer than the job needs,
 * either the labelling extended by a few (ToR, rank) pairs
 * (hbd_ft_label_extend), when that takes fewer pairs than a plan with a
 * share below `share` may open, or else (when `fill`) the rest cut from
 * the free nodes it leaves by the aligned cut priced on the pairs the
 * labelling opened (hbd_ft_aligned_fill); all ordered by hbd_ft_order()
 * into out. 1 placed, 0 not (c->free is left without the rings'
 * positions), -ENOMEM.
 */
static int label_place(struct hbd_cut *c, int64_t need, double share, int max_w, bool fill,
		       int *out)
{
	int rc = hbd_ft_label_cut(c, max_w), labelled = c->n_rings, m = c->m;
	size_t size = (size_t)labelled * m * sizeof(int);
	int *label = NULL, *used = NULL;

	if (rc <= 0 || labelled >= need)
		goto order;
	/*
	 * Ordered by ToR sequence, rings whose pairs number p cross at least
	 * p - m times among (need - 1) * m links: more pairs cannot win.
	 */
	rc = hbd_ft_label_extend(c, need, (int)ceil(share * (double)(need - 1) * m) + m - 1);
	if (rc || !fill)
		goto order;
	/* Alg. 2 on the free nodes left is the most the fill could add: too few, stop. */
	c->skip_budget = 0;
	cut_range(c, 0, c->n, c->d->closed);
	rc = c->n_rings >= need;
	c->n_rings = labelled;
	if (!rc)
		return 0;
	label = malloc(size ? size : 1);
	used = calloc((size_t)c->d->tors * m, sizeof(int));
	rc = -ENOMEM;
	if (!label || !used)
		goto done;
	memcpy(label, c->rings, size);
	for (size_t q = 0; q < (size_t)labelled * m; q++)
		used[(size_t)ocs_ring_node_tor(c->d, label[q]) * m + q % m]++;
	rc = hbd_ft_aligned_fill(c, need - labelled, used);
	if (rc <= 0)
		goto done;
	/* The fill's rings go after the labelling's (disjoint nodes: they fit in c->rings). */
	memmove(c->rings + (size_t)labelled * m, c->rings, (size_t)c->n_rings * m * sizeof(int));
	memcpy(c->rings, label, size);
	c->n_rings += labelled;
order:
	if (rc > 0) {
		rc = hbd_ft_order(c, (int)need, out);
		rc = rc ? rc : 1;
	}
done:
	free(label);
	free(used);
	return rc;
}

/*
 * Gives the plan the need rings in other when their share is below *share
 * (then lowered to theirs); 0 or -ENOMEM.
 */
static int take_if_lower(const struct hbd_cut *c, int64_t need, const int *other, double *share,
			 struct hbd_plan *out)
{
	double mine = hbd_cross_tor_share(c->d, other, (int)need, c->m);

	if (mine >= *share)
		return 0;
	memcpy(out->nodes, other, (size_t)need * c->m * sizeof(int));
	*share = mine;
	return hbd_ft_constraints_honoured(c->d, other, (int)need, c->m, &out->constraints_kept);
}

/*
 * The fat-tree placements, Algs. 4-5 with the window search, the
 * rank-aligned cut, the block labelling (filled or extended) and, when
 * that took blocks of three rings, the labelling of blocks of at most two
 * (extended only), each ordered by hbd_ft_order(); the job gets the one
 * with the lowest cross-ToR share (the earlier on a tie), then the block
 * re-cut of it when that, ordered again, has a lower share still;
 * constraints_kept says what the rings it gets honour.
 */
static int fat_tree_best(struct hbd_cut *c, int64_t need, int64_t spare, struct hbd_plan *out)
{
	size_t size = (size_t)need * c->m * sizeof(int);
	uint8_t *base = malloc((size_t)c->n);
	int *other = malloc(size);
	double share;
	bool wide;
	int rc = -ENOMEM;

	if (!base || !other)
		goto done;
	memcpy(base, c->free, (size_t)c->n);
	rc = fat_tree(c, need, spare, out);
	if (rc == 0)
		rc = hbd_ft_order(c, (int)need, out->nodes);
	if (rc)
		goto done;
	share = hbd_cross_tor_share(c->d, out->nodes, (int)need, c->m);
	memcpy(c->free, base, (size_t)c->n);
	rc = hbd_ft_aligned_cut(c, need, other);
	if (rc > 0)
		rc = take_if_lower(c, need, other, &share, out);
	if (rc)
		goto done;
	memcpy(c->free, base, (size_t)c->n);
	rc = label_place(c, need, share, 3, true, other);
	wide = c->label_w > 2;
	memcpy(c->free, base, (size_t)c->n);
	if (rc > 0)
		rc = take_if_lower(c, need, other, &share, out);
	if (rc)
		goto done;
	/*
	 * Blocks of three rings hold the most but mix their sequences most
	 * around faults; the labelling of blocks of at most two, extended,
	 * often chains with fewer crossings (16 ToRs x 64 at 85%).
	 */
	if (wide) {
		rc = label_place(c, need, share, 2, false, other);
		memcpy(c->free, base, (size_t)c->n);
		if (rc > 0)
			rc = take_if_lower(c, need, other, &share, out);
		if (rc)
			goto done;
	}
	memcpy(c->rings, out->nodes, size);
	rc = hbd_ft_polish(c, c->rings, (int)need);
	if (rc <= 0)
		goto done;
	c->n_rings = (int)need;
	rc = hbd_ft_order(c, (int)need, other);
	if (rc == 0)
		rc = take_if_lower(c, need, other, &share, out);
done:
	free(base);
	free(other);
	return rc;
}

int hbd_plan(const struct ocs_ring_domain *d, const uint8_t *use, const struct hbd_request *req,
	     struct hbd_plan *out, struct hbd_error *err)
{
	struct hbd_cut c = {0};
	int64_t need, free_nodes = 0;
	uint64_t seed;
	int rc, optimum;

	memset(out, 0, sizeof(*out));
	rc = check_request(d, use, req, err);
	if (rc)
		return rc;
	seed = req->seed;
	c.d = d;
	c.n = ocs_ring_nodes(d);
	c.m = req->tp / d->gpus_per_node;
	out->m = c.m;
	/* check_request() validated the domain: n > 0 (unsigned says so to the compiler). */
	c.free = malloc((unsigned)c.n);
	c.pos_list = malloc((unsigned)c.n * sizeof(int));
	c.rings = malloc((unsigned)c.n * sizeof(int));
	if (!c.free || !c.pos_list || !c.rings) {
		rc = -ENOMEM;
		goto done;
	}
	for (int pos = 0; pos < c.n; pos++) {
		c.free[pos] = use[ocs_ring_node_at(d, pos)] == HBD_NODE_FREE;
		free_nodes += c.free[pos];
	}
	/* Alg. 2 gives the optimum, which every orchestration is measured against. */
	if (c.m <= c.n)
		cut_range(&c, 0, c.n, d->closed);
	optimum = c.n_rings;
	need = req->gpus ? req->gpus / req->tp : (optimum > 0 ? optimum : 1);
	if (need > optimum) {
		out->rings_needed = need > INT_MAX ? INT_MAX : (int)need;
		out->rings_available = optimum;
		set_error(err, "job.gpus", "the job needs %lld rings of %d nodes, %d fit",
			  (long long)need, c.m, optimum);
		rc = -ENOSPC;
		goto done;
	}
	out->nodes = malloc((size_t)need * c.m * sizeof(int));
	if (!out->nodes) {
		rc = -ENOMEM;
		goto done;
	}
	out->n_rings = (int)need;
	switch (req->orch) {
	case HBD_ORCH_DCN_FREE:
		memcpy(out->nodes, c.rings, (size_t)need * c.m * sizeof(int));
		break;
	case HBD_ORCH_FAT_TREE:
		rc = fat_tree_best(&c, need, free_nodes - need * c.m, out);
		break;
	case HBD_ORCH_GREEDY:
		c.prng = &seed;
		c.n_rings = 0;
		cut_range(&c, 0, c.n, d->closed);
		/* A partial Fisher-Yates shuffle picks `need` rings in random order. */
		for (int k = 0; k < need; k++) {
			int j = k + prng_below(&seed, c.n_rings - k);

			memcpy(out->nodes + (size_t)k * c.m, c.rings + (size_t)j * c.m,
			       (size_t)c.m * sizeof(int));
			if (j != k)
				memcpy(c.rings + (size_t)j * c.m, c.rings + (size_t)k * c.m,
				       (size_t)c.m * sizeof(int));
		}
		break;
	}
	if (rc)
		goto done;
	out->gpus_placed = need * req->tp;
	if (req->gpus == 0)
		out->gpus_wasted = (free_nodes - need * c.m) * d->gpus_per_node;
	out->cross_tor_share = hbd_cross_tor_share(d, out->nodes, out->n_rings, c.m);
done:
	if (rc)
		hbd_plan_clear(out);
	free(c.free);
	free(c.pos_list);
	free(c.rings);
	return rc;
}
