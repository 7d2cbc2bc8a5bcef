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
 * The job takes the rings of the largest groups of rings with the same ToR
 * sequence first, and returns them sorted by ToR sequence, so that
 * consecutive rings put each rank under the same ToR as often as possible
 * (that is what cross_tor_share measures): within a group every rank
 * matches, and neighbouring groups share most of their ToRs.
 *
 * greedy (the paper's baseline): the cut of Alg. 2 started at a random
 * offset inside each component, and the rings taken in random order. It
 * places exactly the jobs dcn-free places, with no care for ToRs.
 */
#include "hbd_ring.h"

#include <errno.h>
#include <limits.h>
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

/* ---- the cut of Alg. 2 -------------------------------------------------- */

/*
 * Working memory of one hbd_plan() call, allocated once: free[pos] says
 * whether position pos may be used, pos_list holds the free positions of
 * the range being cut, rings receives the cut rings (node ids, m apiece).
 */
struct cut {
	const struct ocs_ring_domain *d;
	int n, m;
	uint8_t *free;
	int *pos_list;
	int *rings;
	int n_rings;
	uint64_t *prng;	 /* greedy: random offsets inside components; NULL otherwise */
	int skip_budget; /* fat-tree: free nodes the cut may still leave out to open windows */
};

/*
 * Fat-tree: how many free nodes to leave out before index idx so that the
 * ring starts on a ToR window (its ToR a multiple of m, like every aligned
 * ring); 0 when no window start is within m - 1 nodes, the budget and the
 * component (end index b).
 */
static int window_skip(const struct cut *c, int start, int count, int idx, int b)
{
	for (int s = 0; s < c->m && s <= c->skip_budget && b - (idx + s) >= c->m; s++) {
		int pos = c->pos_list[(start + idx + s) % count];

		if (pos % c->d->tors % c->m == 0)
			return s;
	}
	return 0;
}

/* Cuts the run of component positions pos_list[(start + a) % c .. b) into rings. */
static void cut_component(struct cut *c, int start, int count, int a, int b)
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
static void cut_range(struct cut *c, int lo, int hi, bool wrap)
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
static int fat_tree_place(struct cut *c, const struct fat_tree *ft, int nc)
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

struct ring_key {
	const int *tors; /* ring r's ToR sequence at tors[r * m] */
	int m;
};

/* qsort has no context argument: the comparator reads it from the index array's header. */
struct ring_ref {
	const struct ring_key *key;
	int ring;
	int group_size;
	int group_first;
};

static int ring_tor_cmp(const struct ring_ref *x, const struct ring_ref *y)
{
	const struct ring_key *k = x->key;
	const int *tx = k->tors + (size_t)x->ring * k->m, *ty = k->tors + (size_t)y->ring * k->m;

	for (int i = 0; i < k->m; i++)
		if (tx[i] != ty[i])
			return tx[i] < ty[i] ? -1 : 1;
	return 0;
}

static int ref_by_tors(const void *a, const void *b)
{
	const struct ring_ref *x = a, *y = b;
	int c = ring_tor_cmp(x, y);

	if (c)
		return c;
	return (x->ring > y->ring) - (x->ring < y->ring);
}

static int ref_by_group(const void *a, const void *b)
{
	const struct ring_ref *x = a, *y = b;

	if (x->group_size != y->group_size)
		return x->group_size > y->group_size ? -1 : 1;
	if (x->group_first != y->group_first)
		return x->group_first < y->group_first ? -1 : 1;
	return (x->ring > y->ring) - (x->ring < y->ring);
}

/*
 * Writes the `need` rings of ref (sorted by ToR sequence, so rings with the
 * same sequence are adjacent) to out as a nearest-neighbour chain of their
 * groups: after a group comes the unvisited group whose ToR sequence
 * matches it at the most ranks (the first in ToR order on a tie, the first
 * unvisited one when none matches at any rank). A pair of consecutive rings
 * crosses ToRs at exactly the ranks where their sequences differ, so this
 * walks the groups along short Hamming steps: a ring that skips a fault at
 * rank r sits between the aligned window and the window shifted by one, one
 * step from each. Candidates come from an index of groups by (rank, ToR),
 * which holds at most nodes_per_tor groups per entry.
 */
static int chain_groups(const struct cut *c, const struct ring_ref *ref, int need, int *out)
{
	int m = c->m, tors = c->d->tors, n_groups = 0, written = 0, next_unvisited = 0;
	size_t n_buckets = (size_t)m * (size_t)tors;
	int *first = malloc(((size_t)need + 1) * sizeof(int));
	int *seq = malloc((size_t)need * m * sizeof(int));
	int *bucket_start = calloc(n_buckets + 1, sizeof(int));
	int *bucket_fill = calloc(n_buckets, sizeof(int));
	int *bucket = malloc((size_t)need * m * sizeof(int));
	int *matches = calloc((size_t)need, sizeof(int));
	uint8_t *visited = calloc((size_t)need, 1);
	int rc = -ENOMEM;

	if (!first || !seq || !bucket_start || !bucket_fill || !bucket || !matches || !visited)
		goto done;
	for (int k = 0; k < need; k++) {
		if (k > 0 && ring_tor_cmp(&ref[k - 1], &ref[k]) == 0)
			continue;
		first[n_groups] = k;
		for (int i = 0; i < m; i++) {
			int t = ref[k].key->tors[(size_t)ref[k].ring * m + i];

			seq[(size_t)n_groups * m + i] = t;
			bucket_start[(size_t)i * tors + t + 1]++;
		}
		n_groups++;
	}
	first[n_groups] = need;
	for (size_t b = 0; b < n_buckets; b++)
		bucket_start[b + 1] += bucket_start[b];
	for (int g = 0; g < n_groups; g++)
		for (int i = 0; i < m; i++) {
			size_t b = (size_t)i * tors + seq[(size_t)g * m + i];

			bucket[bucket_start[b] + bucket_fill[b]++] = g;
		}
	for (int g = 0; g >= 0;) {
		int best = -1;

		visited[g] = 1;
		for (int k = first[g]; k < first[g + 1]; k++)
			memcpy(out + (size_t)written++ * m, c->rings + (size_t)ref[k].ring * m,
			       (size_t)m * sizeof(int));
		for (int i = 0; i < m; i++) {
			size_t b = (size_t)i * tors + seq[(size_t)g * m + i];

			for (int e = bucket_start[b]; e < bucket_start[b + 1]; e++) {
				int h = bucket[e];

				if (visited[h])
					continue;
				matches[h]++;
				if (best < 0 || matches[h] > matches[best] ||
				    (matches[h] == matches[best] && h < best))
					best = h;
			}
		}
		for (int i = 0; i < m; i++) {
			size_t b = (size_t)i * tors + seq[(size_t)g * m + i];

			for (int e = bucket_start[b]; e < bucket_start[b + 1]; e++)
				matches[bucket[e]] = 0;
		}
		while (next_unvisited < n_groups && visited[next_unvisited])
			next_unvisited++;
		g = best >= 0 ? best : (next_unvisited < n_groups ? next_unvisited : -1);
	}
	rc = 0;
done:
	free(first);
	free(seq);
	free(bucket_start);
	free(bucket_fill);
	free(bucket);
	free(matches);
	free(visited);
	return rc;
}

/*
 * Chooses `need` rings of c, those of the largest groups of rings with the
 * same ToR sequence first, and writes them to out sorted by ToR sequence.
 */
static int order_by_tors(const struct cut *c, int need, int *out)
{
	int *tors = malloc((size_t)c->n_rings * c->m * sizeof(int));
	struct ring_key key = {tors, c->m};
	struct ring_ref *ref = malloc((size_t)c->n_rings * sizeof(*ref));
	int rc;

	if (!tors || !ref) {
		free(tors);
		free(ref);
		return -ENOMEM;
	}
	for (size_t i = 0; i < (size_t)c->n_rings * c->m; i++)
		tors[i] = ocs_ring_node_tor(c->d, c->rings[i]);
	for (int r = 0; r < c->n_rings; r++)
		ref[r] = (struct ring_ref){&key, r, 0, 0};
	qsort(ref, (size_t)c->n_rings, sizeof(*ref), ref_by_tors);
	for (int a = 0, b; a < c->n_rings; a = b) {
		for (b = a + 1; b < c->n_rings && ring_tor_cmp(&ref[a], &ref[b]) == 0; b++)
			;
		for (int i = a; i < b; i++) {
			ref[i].group_size = b - a;
			ref[i].group_first = a;
		}
	}
	qsort(ref, (size_t)c->n_rings, sizeof(*ref), ref_by_group);
	qsort(ref, (size_t)need, sizeof(*ref), ref_by_tors);
	rc = chain_groups(c, ref, need, out);
	free(ref);
	free(tors);
	return rc;
}

/* ---- fat-tree, the rank-aligned cut ------------------------------------- */

/*
 * The rank-aligned cut prices each node by the (ToR, rank) pair it takes.
 * After the best ordering, consecutive rings change ToR at rank i about
 * (distinct ToRs of rank i) - 1 times, so the share is driven by how many
 * distinct (ToR, rank) pairs the rings use. A pair costs PAIR_COST / (1 +
 * the nodes that used it in the previous round): the aligned pairs (ToR
 * t at rank t mod m, which consecutive rings of one ToR window share in
 * every sub-line) start as used by every sub-line, the others as unused; a
 * hop out of an aggregation domain adds AGG_COST.
 */
#define PAIR_COST      16
#define AGG_COST       1
#define ALIGNED_ROUNDS 3

/* No partial ring reaches this entry; far enough from INT64_MIN that subtracting prices cannot
 * wrap. */
#define NO_VALUE (INT64_MIN / 4)

/*
 * Working memory of the aligned cut. A node only follows one of the K free
 * positions before it, so the values live in a rolling window of K + 1 free
 * positions; what the trace needs is kept per free position, compactly.
 */
struct aligned_cut {
	int f, m, k;
	int window;	  /* rows of value: a power of two above K */
	const int *pos;	  /* the free positions, increasing */
	int *tor, *agg;	  /* by free index: its ToR and that ToR's aggregation domain */
	int64_t *cost;	  /* by ToR * m + rank: the price of a node there, scaled */
	int64_t agg_cost; /* a hop between aggregation domains, scaled */
	int64_t *value; /* by (free index mod window) * m + rank: best value with the node there */
	uint8_t *back;	/* by free index * m + rank > 0: how many free positions back rank - 1 is */
	int *end_at;	/* by free index: the end of the last ring of the best plan so far, or -1 */
};

/* The free index of rank 0 of the ring whose rank m - 1 is at free index j. */
static int ring_start(const struct aligned_cut *a, int j)
{
	for (int s = a->m - 1; s > 0; s--)
		j -= a->back[(size_t)j * a->m + s];
	return j;
}

/*
 * One pass of the Lagrangian: the cut of the open line (position 0 to n-1)
 * into rings of m free nodes, gaps 1..K, leaving any free node out, that
 * maximises ring_gain * rings - (prices), ties to more rings. Returns how
 * many rings that cut has; writes them to c->rings (in line order) when
 * they are at least need.
 */
static int aligned_pass(struct cut *c, struct aligned_cut *a, int64_t ring_gain, int64_t need)
{
	int m = a->m, k = a->k, f = a->f, at, rings = 0;
	/* value = (gain * rings - price) * scale + rings: ties go to more rings. */
	int64_t scale = (int64_t)c->n + 1, ring_value = ring_gain * scale + 1, best_end = 0;

	for (int j = 0; j < f; j++) {
		const int64_t *price = a->cost + (size_t)a->tor[j] * m;
		int64_t *to = a->value + (size_t)(j & (a->window - 1)) * m;
		uint8_t *back = a->back + (size_t)j * m;

		to[0] = best_end - price[0];
		for (int s = 1; s < m; s++) {
			to[s] = NO_VALUE;
			back[s] = 0;
		}
		/* Rank s of j follows rank s - 1 of one of the (at most K) free positions before
		 * it. */
		for (int i = j - 1; i >= 0 && a->pos[j] - a->pos[i] <= k; i--) {
			int64_t hop = a->agg[i] != a->agg[j] ? a->agg_cost : 0;
			const int64_t *from = a->value + (size_t)(i & (a->window - 1)) * m;

			for (int s = 1; s < m; s++) {
				int64_t v = from[s - 1] - price[s] - hop;

				if (v > to[s]) {
					to[s] = v;
					back[s] = (uint8_t)(j - i);
				}
			}
		}
		a->end_at[j] = j > 0 ? a->end_at[j - 1] : -1;
		if (to[m - 1] > NO_VALUE / 2 && to[m - 1] + ring_value > best_end) {
			best_end = to[m - 1] + ring_value;
			a->end_at[j] = j;
		}
	}
	for (at = f > 0 ? a->end_at[f - 1] : -1; at >= 0; rings++) {
		int start = ring_start(a, at);

		at = start > 0 ? a->end_at[start - 1] : -1;
	}
	if (rings >= need) {
		/* The trace runs from the end of the line: fill c->rings from the back. */
		at = f > 0 ? a->end_at[f - 1] : -1;
		for (int r = rings - 1; r >= 0; r--) {
			int j = at;

			for (int s = m - 1; s >= 0; s--) {
				c->rings[(size_t)r * m + s] = ocs_ring_node_at(c->d, a->pos[j]);
				if (s > 0)
					j -= a->back[(size_t)j * m + s];
			}
			at = j > 0 ? a->end_at[j - 1] : -1;
		}
		c->n_rings = rings;
	}
	return rings;
}

static int order_by_tors(const struct cut *c, int need, int *out);

/*
 * The rank-aligned cut: the smallest ring gain at which the Lagrangian cut
 * of the open line still gives `need` rings, i.e. the job's rings with the
 * cheapest (ToR, rank) pairs (the spare nodes are left out where they bring
 * the cut back onto the ToR windows), repriced over ALIGNED_ROUNDS rounds
 * by the pairs the previous round used. c->free: the free positions. Writes
 * the best round's rings, ordered by order_by_tors(), to out and returns 1;
 * 0 when the open line holds fewer than need rings; -ENOMEM.
 */
static int aligned_cut(struct cut *c, int64_t need, int *out)
{
	const struct ocs_ring_domain *d = c->d;
	struct aligned_cut a = {.m = c->m, .k = d->k_hops};
	size_t n_pairs = (size_t)d->tors * c->m;
	int *pos = malloc((size_t)c->n * sizeof(int)), *used = calloc(n_pairs, sizeof(int));
	int *kept = malloc((size_t)c->n * sizeof(int));
	int64_t scale = (int64_t)c->n + 1, gain = 4 * PAIR_COST * c->m;
	/* A gain above every price a ring can move makes the cut maximise rings. */
	int64_t top = (int64_t)c->n * (PAIR_COST + AGG_COST) + 1;
	int rc = -ENOMEM, found = 0, n_used, best_used = 0, best_rings = 0;

	a.pos = pos;
	a.tor = malloc((size_t)c->n * sizeof(int));
	a.agg = malloc((size_t)c->n * sizeof(int));
	a.cost = malloc(n_pairs * sizeof(int64_t));
	for (a.window = 1; a.window <= d->k_hops; a.window *= 2)
		;
	a.value = malloc((size_t)a.window * c->m * sizeof(int64_t));
	a.back = malloc((size_t)c->n * c->m);
	a.end_at = malloc((size_t)c->n * sizeof(int));
	if (!pos || !used || !kept || !a.tor || !a.agg || !a.cost || !a.value || !a.back ||
	    !a.end_at)
		goto done;
	for (int p = 0; p < c->n; p++)
		if (c->free[p]) {
			a.tor[a.f] = p % d->tors;
			a.agg[a.f] = a.tor[a.f] / d->tors_per_agg;
			pos[a.f++] = p;
		}
	a.agg_cost = AGG_COST * scale;
	for (size_t q = 0; q < n_pairs; q++)
		used[q] = (int)(q / c->m) % c->m == (int)(q % c->m) ? d->nodes_per_tor : 0;
	rc = 0;
	for (int round = 0; round < ALIGNED_ROUNDS; round++) {
		int64_t low, high;

		for (size_t q = 0; q < n_pairs; q++) {
			/* A pair two nodes use is shared; one node's pair is half paid. */
			a.cost[q] = (used[q] >= 2   ? 0
				     : used[q] == 1 ? PAIR_COST / 4
						    : PAIR_COST) *
				    scale;
		}
		/*
		 * Gallop up from the last round's gain, then halve the bracket to
		 * within a quarter: a gain a little high only adds rings, and
		 * order_by_tors() drops the extra ones from the smallest groups.
		 */
		low = 0;
		high = top;
		while (gain < high && aligned_pass(c, &a, gain, need) < need) {
			low = gain + 1;
			gain *= 2;
		}
		if (gain < high)
			high = gain;
		else if (aligned_pass(c, &a, top, need) < need)
			break; /* even the most rings the open line holds are too few */
		while (high - low > high / 4) {
			int64_t mid = low + (high - low) / 2;

			if (aligned_pass(c, &a, mid, need) >= need)
				high = mid;
			else
				low = mid + 1;
		}
		/* The last pass that placed the job was the one at high: c->rings holds it. */
		gain = high > 1 ? high : 1;
		memset(used, 0, n_pairs * sizeof(int));
		n_used = 0;
		for (size_t q = 0; q < (size_t)c->n_rings * c->m; q++) {
			size_t pair = (size_t)ocs_ring_node_tor(d, c->rings[q]) * c->m + q % c->m;

			n_used += used[pair]++ == 0;
		}
		/* The round that uses the fewest (ToR, rank) pairs is the one ordered. */
		if (!found || n_used < best_used) {
			best_used = n_used;
			best_rings = c->n_rings;
			memcpy(kept, c->rings, (size_t)c->n_rings * c->m * sizeof(int));
			found = 1;
		}
	}
	if (found) {
		memcpy(c->rings, kept, (size_t)best_rings * c->m * sizeof(int));
		c->n_rings = best_rings;
		rc = order_by_tors(c, (int)need, out);
	}
	if (rc == 0)
		rc = found;
done:
	free(pos);
	free(used);
	free(kept);
	free(a.tor);
	free(a.agg);
	free(a.cost);
	free(a.value);
	free(a.back);
	free(a.end_at);
	return rc;
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
static int fat_tree(struct cut *c, int64_t need, int64_t spare, struct hbd_plan *out)
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
 * The constraints of Algs. 4-5 that rings (n_rings of m nodes) honour, for
 * a placement the binary search did not make: segment s is isolated when no
 * ring has nodes both in it and outside it; aggregation domain a is aligned
 * when every ring with a node in it sits in one segment on a ToR window
 * (rank i under a ToR that is i modulo m). 0 or -ENOMEM.
 */
static int constraints_honoured(const struct ocs_ring_domain *d, const int *rings, int n_rings,
				int m, int *kept)
{
	int A = d->tors_per_agg, n_agg = ocs_ring_agg_domains(d), n_seg = n_agg * d->nodes_per_tor;
	uint8_t *crossed = calloc((size_t)n_seg, 1), *misaligned = calloc((size_t)n_agg, 1);

	if (!crossed || !misaligned) {
		free(crossed);
		free(misaligned);
		return -ENOMEM;
	}
	for (int r = 0; r < n_rings; r++) {
		const int *ring = rings + (size_t)r * m;
		int first = ocs_ring_position(d, ring[0]) / A;
		bool aligned = true, one_segment = true;

		for (int i = 0; i < m; i++) {
			int pos = ocs_ring_position(d, ring[i]);

			one_segment &= pos / A == first;
			aligned &= pos % d->tors % m == i;
		}
		for (int i = 0; i < m; i++) {
			int pos = ocs_ring_position(d, ring[i]);

			if (!one_segment)
				crossed[pos / A] = 1;
			if (!one_segment || !aligned)
				misaligned[pos % d->tors / A] = 1;
		}
	}
	*kept = 0;
	for (int s = 0; s < n_seg; s++)
		*kept += !crossed[s];
	for (int a = 0; a < n_agg; a++)
		*kept += !misaligned[a];
	free(crossed);
	free(misaligned);
	return 0;
}

/*
 * Both fat-tree placements, Algs. 4-5 with the window search and the
 * rank-aligned cut, each ordered by order_by_tors(); the job gets the one
 * with the lower cross-ToR share (Algs. 4-5 on a tie), and constraints_kept
 * says what the rings it gets honour.
 */
static int fat_tree_best(struct cut *c, int64_t need, int64_t spare, struct hbd_plan *out)
{
	uint8_t *base = malloc((size_t)c->n);
	int *other = malloc((size_t)need * c->m * sizeof(int));
	int rc = -ENOMEM;

	if (!base || !other)
		goto done;
	memcpy(base, c->free, (size_t)c->n);
	rc = fat_tree(c, need, spare, out);
	if (rc == 0)
		rc = order_by_tors(c, (int)need, out->nodes);
	if (rc)
		goto done;
	memcpy(c->free, base, (size_t)c->n);
	rc = aligned_cut(c, need, other);
	if (rc <= 0)
		goto done;
	rc = 0;
	if (hbd_cross_tor_share(c->d, other, (int)need, c->m) <
	    hbd_cross_tor_share(c->d, out->nodes, (int)need, c->m)) {
		memcpy(out->nodes, other, (size_t)need * c->m * sizeof(int));
		rc = constraints_honoured(c->d, other, (int)need, c->m, &out->constraints_kept);
	}
done:
	free(base);
	free(other);
	return rc;
}

int hbd_plan(const struct ocs_ring_domain *d, const uint8_t *use, const struct hbd_request *req,
	     struct hbd_plan *out, struct hbd_error *err)
{
	struct cut c = {0};
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
	c.free = malloc((size_t)c.n);
	c.pos_list = malloc((size_t)c.n * sizeof(int));
	c.rings = malloc((size_t)c.n * sizeof(int));
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
