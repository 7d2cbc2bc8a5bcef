/*
 * hbd_fattree.c - the parts of the fat-tree orchestration (hbd_ring.c,
 * Algs. 4-5) that act on cross_tor_share beyond the paper's constraints,
 * called from hbd_ring.c through hbd_fattree.h:
 *   - the order of a job's rings (hbd_ft_order): the share counts, over
 *     consecutive rings and ranks, node pairs under different ToRs, so it
 *     depends only on the order of the rings' ToR sequences (a greedy
 *     chain of them, then a local search of short chains);
 *   - the rank-aligned cut (hbd_ft_aligned_cut), a second placement that
 *     hbd_ring.c compares with Algs. 4-5's: a Lagrangian dynamic programme
 *     over the deployment line that prices every node by the (ToR, rank)
 *     pair it takes, instead of dropping whole ToRs around faults; the
 *     same cut fills what the block labelling (hbd_label.c) leaves short
 *     (hbd_ft_aligned_fill), priced on the pairs the labelling opened;
 *   - the block re-cut (hbd_ft_polish), which re-cuts the chosen plan
 *     block by block wherever that uses fewer (ToR, rank) pairs;
 *   - the constraints a plan honours (hbd_ft_constraints_honoured).
 * Symbols as in hbd_ring.c (m nodes per ring, K hops, A ToRs per
 * aggregation domain). Pure, no globals.
 */
#include "hbd_fattree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * The most (rank, ToR) pairs or (free node, rank) entries the index of the
 * chain and the aligned cut allocate (a few rings of a huge m): past it the
 * rings stay in ToR order and the aligned cut is not tried.
 */
#define MAX_CELLS ((size_t)1 << 24)

/*
 * The local search of the chain (improve_chain): on at most this many
 * groups (n^2 distances, each pass about 4 n^2 steps), at most this many
 * passes. 64 groups took 64 ToRs x 16 at 90% from 13.65% to 13.59% but
 * doubled a plan's instructions there; 32 keeps what 16 x 64 gains.
 */
#define CHAIN_MAX_GROUPS 32
#define CHAIN_PASSES	 4

struct ring_key {
	const int *tors; /* ring r's ToR sequence at tors[r * m] */
	int m;
};

/* A ring as the order sorts it: the ToR sequences live in the shared key. */
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

/*
 * Stable counting sort of ref[0 .. n) by key[0 .. n) (key[i] is ref[i]'s, in
 * 0 .. range - 1); tmp holds n refs, count range + 1 ints. The order's
 * sorts are all of small integers (ToRs, group sizes, group ranks), so this
 * replaces qsort and its comparator calls, and keeps ties in the order they
 * come, which is what makes the sorts below chain.
 */
static void counting_sort(struct ring_ref *ref, struct ring_ref *tmp, const int *key, int n,
			  int range, int *count)
{
	memset(count, 0, ((size_t)range + 1) * sizeof(int));
	for (int i = 0; i < n; i++)
		count[key[i] + 1]++;
	for (int v = 0; v < range; v++)
		count[v + 1] += count[v];
	for (int i = 0; i < n; i++)
		tmp[count[key[i]]++] = ref[i];
	memcpy(ref, tmp, (size_t)n * sizeof(*ref));
}

/*
 * The chain's local search: path holds the n groups (ToR sequences of m in
 * seq) in chain order; a step reverses a stretch of it (2-opt) or moves a
 * stretch of up to three groups elsewhere, either way round (or-opt),
 * whenever that lowers the chain's Hamming length, until a pass over all
 * of them finds none or CHAIN_PASSES passes are done. 0 or -ENOMEM.
 */
static int improve_chain(const int *seq, int m, int *path, int n)
{
	int *dist = malloc((size_t)n * n * sizeof(int)), *tmp = malloc((size_t)n * sizeof(int));
	bool better = true;

	if (!dist || !tmp) {
		free(dist);
		free(tmp);
		return -ENOMEM;
	}
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			int h = 0;

			for (int i = 0; i < m; i++)
				h += seq[(size_t)a * m + i] != seq[(size_t)b * m + i];
			dist[(size_t)a * n + b] = h;
		}
#define D(x, y) ((x) < 0 || (y) < 0 ? 0 : dist[(size_t)(x)*n + (y)])
#define AT(j)	((j) < 0 || (j) >= n ? -1 : path[j])
	for (int pass = 0; better && pass < CHAIN_PASSES; pass++) {
		better = false;
		/* 2-opt: reverse path[i .. j]. */
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++) {
				int gain = D(AT(i - 1), AT(i)) + D(AT(j), AT(j + 1)) -
					   D(AT(i - 1), AT(j)) - D(AT(i), AT(j + 1));

				if (gain <= 0)
					continue;
				for (int a = i, b = j; a < b; a++, b--) {
					int x = path[a];

					path[a] = path[b];
					path[b] = x;
				}
				better = true;
			}
		/* Or-opt: path[i .. i + len) taken out and put back after position j. */
		for (int len = 1; len <= 3; len++)
			for (int i = 0; i + len <= n; i++)
				for (int j = -1; j < n; j++) {
					int first = path[i], last = path[i + len - 1], x, y, in,
					    rev, k = 0;
					int out = D(AT(i - 1), first) + D(last, AT(i + len)) -
						  D(AT(i - 1), AT(i + len));

					if (j >= i - 1 && j < i + len)
						continue;
					x = AT(j);
					y = AT(j + 1);
					in = D(x, first) + D(last, y) - D(x, y);
					rev = D(x, last) + D(first, y) - D(x, y);
					if (out - (in < rev ? in : rev) <= 0)
						continue;
					for (int q = 0; q < n; q++)
						if (q < i || q >= i + len)
							tmp[k++] = path[q];
					/* After the group at j, which sits len earlier once it is
					 * out. */
					k = j < 0 ? 0 : (j < i ? j : j - len) + 1;
					memmove(tmp + k + len, tmp + k,
						(size_t)(n - len - k) * sizeof(int));
					for (int q = 0; q < len; q++)
						tmp[k + q] = in <= rev ? path[i + q]
								       : path[i + len - 1 - q];
					memcpy(path, tmp, (size_t)n * sizeof(int));
					better = true;
				}
	}
#undef D
#undef AT
	free(dist);
	free(tmp);
	return 0;
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
 * which holds at most nodes_per_tor groups per entry. A chain of at most
 * CHAIN_MAX_GROUPS groups then goes through improve_chain(): on 16 ToRs x
 * 64 the block labelling's groups mix two sequences around faults, and a
 * greedy walk leaves one crossing or two that a 2-opt move takes back.
 */
static int chain_groups(const struct hbd_cut *c, const struct ring_ref *ref, int need, int *out)
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
	int *path = malloc((size_t)need * sizeof(int));
	int rc = -ENOMEM;

	if (!first || !seq || !bucket_start || !bucket_fill || !bucket || !matches || !visited ||
	    !path)
		goto done;
	for (int k = 0; k < need; k++) {
		if (k > 0 && ref[k - 1].group_first == ref[k].group_first)
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
	for (int g = 0, len = 0; g >= 0;) {
		int best = -1;

		visited[g] = 1;
		path[len++] = g;
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
	if (n_groups <= CHAIN_MAX_GROUPS && improve_chain(seq, m, path, n_groups) < 0)
		goto done;
	for (int j = 0; j < n_groups; j++)
		for (int k = first[path[j]]; k < first[path[j] + 1]; k++)
			memcpy(out + (size_t)written++ * m, c->rings + (size_t)ref[k].ring * m,
			       (size_t)m * sizeof(int));
	rc = 0;
done:
	free(path);
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
int hbd_ft_order(const struct hbd_cut *c, int need, int *out)
{
	int n = c->n_rings, range = (c->d->tors > n ? c->d->tors : n) + 1;
	int *tors = malloc((size_t)n * c->m * sizeof(int));
	struct ring_key key = {tors, c->m};
	struct ring_ref *ref = malloc((size_t)n * sizeof(*ref)),
			*tmp = malloc((size_t)n * sizeof(*tmp));
	int *keys = malloc((size_t)n * sizeof(int)),
	    *count = malloc((size_t)(range + 1) * sizeof(int));
	int rc;

	if (!tors || !ref || !tmp || !keys || !count) {
		rc = -ENOMEM;
		goto done;
	}
	for (size_t i = 0; i < (size_t)n * c->m; i++)
		tors[i] = ocs_ring_node_tor(c->d, c->rings[i]);
	for (int r = 0; r < n; r++)
		ref[r] = (struct ring_ref){&key, r, 0, 0};
	/* By ToR sequence, ties by ring: one stable pass per rank, the last rank first. */
	for (int i = c->m - 1; i >= 0; i--) {
		for (int k = 0; k < n; k++)
			keys[k] = tors[(size_t)ref[k].ring * c->m + i];
		counting_sort(ref, tmp, keys, n, c->d->tors, count);
	}
	for (int a = 0, b; a < n; a = b) {
		for (b = a + 1; b < n && ring_tor_cmp(&ref[a], &ref[b]) == 0; b++)
			;
		for (int i = a; i < b; i++) {
			ref[i].group_size = b - a;
			ref[i].group_first = a;
		}
	}
	/* The largest groups first (then ToR order, then ring: the order they are in). */
	for (int k = 0; k < n; k++)
		keys[k] = n - ref[k].group_size;
	counting_sort(ref, tmp, keys, n, n + 1, count);
	/* The chosen ones back in ToR order (a group's rings stay together, by ring). */
	for (int k = 0; k < need; k++)
		keys[k] = ref[k].group_first;
	counting_sort(ref, tmp, keys, need, n, count);
	if ((size_t)c->m * (size_t)c->d->tors <= MAX_CELLS) {
		rc = chain_groups(c, ref, need, out);
	} else {
		/* Too many (rank, ToR) pairs to index: the rings in ToR order. */
		for (int k = 0; k < need; k++)
			memcpy(out + (size_t)k * c->m, c->rings + (size_t)ref[k].ring * c->m,
			       (size_t)c->m * sizeof(int));
		rc = 0;
	}
done:
	free(ref);
	free(tmp);
	free(keys);
	free(count);
	free(tors);
	return rc;
}

/* ---- fat-tree, the rank-aligned cut ------------------------------------- */

/*
 * The rank-aligned cut prices each node by the (ToR, rank) pair it takes.
 * After the best ordering, consecutive rings change ToR at rank i about
 * (distinct ToRs of rank i) - 1 times, so the share is driven by how many
 * distinct (ToR, rank) pairs the rings use (hbd_ft_order() reaches that
 * count on the benchmark's domains). A node costs nothing on a pair that two
 * or more nodes used in the previous round, PAIR_COST / 4 on a pair one node
 * used, PAIR_COST on an unused pair: the aligned pairs (ToR t at rank t mod
 * m, which consecutive rings of one ToR window share in every sub-line)
 * start as used by every sub-line, the others as unused. A hop out of an
 * aggregation domain adds AGG_COST. The round that uses the fewest pairs
 * wins. Tried and dropped: a price of PAIR_COST / (1 + users) (0.8 points
 * worse at 90% scale on 64 ToRs x 16), one round (1.5 to 3 points worse),
 * bisecting to the exact gain (slower, no better than within a quarter).
 */
#define PAIR_COST      16
#define AGG_COST       1
#define ALIGNED_ROUNDS 3

/* No partial ring reaches this entry (far from INT64_MIN: subtracting prices cannot wrap). */
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
static inline __attribute__((always_inline)) int aligned_pass_m(struct hbd_cut *c,
								struct aligned_cut *a,
								int64_t ring_gain, int64_t need,
								const int m)
{
	int k = a->k, f = a->f, at, rings = 0;
	/* value = (gain * rings - price) * scale + rings: ties go to more rings. */
	int64_t scale = (int64_t)c->n + 1, ring_value = ring_gain * scale + 1, best_end = 0;
	/*
	 * Locals, not a->...: the stores to back (bytes, which may alias
	 * anything) would otherwise make the compiler reload every field on
	 * every step of the inner loops.
	 */
	const int *pos = a->pos, *tor = a->tor, *agg = a->agg;
	const int64_t *cost = a->cost, agg_cost = a->agg_cost;
	const int window_mask = a->window - 1;
	int64_t *value = a->value;
	uint8_t *backs = a->back;
	int *end_at = a->end_at;

	for (int j = 0; j < f; j++) {
		const int64_t *price = cost + (size_t)tor[j] * m;
		int64_t *to = value + (size_t)(j & window_mask) * m;
		uint8_t *back = backs + (size_t)j * m;
		const int pos_j = pos[j], agg_j = agg[j];

		to[0] = best_end - price[0];
		for (int s = 1; s < m; s++) {
			to[s] = NO_VALUE;
			back[s] = 0;
		}
		/* Rank s of j follows rank s - 1 of one of the (at most K) free positions before
		 * it. */
		for (int i = j - 1; i >= 0 && pos_j - pos[i] <= k; i--) {
			const int64_t hop = agg[i] != agg_j ? agg_cost : 0;
			const int64_t *from = value + (size_t)(i & window_mask) * m;

			for (int s = 1; s < m; s++) {
				int64_t v = from[s - 1] - price[s] - hop;

				if (v > to[s]) {
					to[s] = v;
					back[s] = (uint8_t)(j - i);
				}
			}
		}
		end_at[j] = j > 0 ? end_at[j - 1] : -1;
		if (to[m - 1] > NO_VALUE / 2 && to[m - 1] + ring_value > best_end) {
			best_end = to[m - 1] + ring_value;
			end_at[j] = j;
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

/*
 * The pass with m a constant where rings are 4 or 8 nodes (TP-32 and TP-64
 * on 8-GPU nodes), so the compiler unrolls the rank loops: they are most of
 * a fat-tree plan's time.
 */
static int aligned_pass(struct hbd_cut *c, struct aligned_cut *a, int64_t ring_gain, int64_t need)
{
	switch (a->m) {
	case 4:
		return aligned_pass_m(c, a, ring_gain, need, 4);
	case 8:
		return aligned_pass_m(c, a, ring_gain, need, 8);
	default:
		return aligned_pass_m(c, a, ring_gain, need, a->m);
	}
}

/*
 * The rank-aligned cut: the smallest ring gain at which the Lagrangian cut
 * of the open line still gives `need` rings, i.e. the job's rings with the
 * cheapest (ToR, rank) pairs (the spare nodes are left out where they bring
 * the cut back onto the ToR windows, a ring skips a fault where its other
 * ranks stay aligned), repriced over ALIGNED_ROUNDS rounds by the pairs the
 * previous round used. The line is not closed: a ring never crosses the
 * seam of a closed domain (Algs. 4-5 place what needs it). c->free: the
 * free positions; placed: NULL for the aligned pairs' starting prices, else
 * the nodes rings placed before use on each (ToR, rank) pair (the fill).
 * Leaves the best round's rings in c->rings and returns 1; 0 when the open
 * line holds fewer than need rings or n * m passes MAX_CELLS; -ENOMEM.
 */
static int aligned_rings(struct hbd_cut *c, int64_t need, const int *placed)
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

	if ((size_t)c->n * (size_t)c->m > MAX_CELLS) {
		rc = 0;
		goto done;
	}
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
		used[q] = placed				      ? placed[q]
			  : (int)(q / c->m) % c->m == (int)(q % c->m) ? d->nodes_per_tor
								      : 0;
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
		 * hbd_ft_order() drops the extra ones from the smallest groups.
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
		if (placed)
			memcpy(used, placed, n_pairs * sizeof(int));
		else
			memset(used, 0, n_pairs * sizeof(int));
		n_used = 0;
		for (size_t q = 0; q < (size_t)c->n_rings * c->m; q++) {
			size_t pair = (size_t)ocs_ring_node_tor(d, c->rings[q]) * c->m + q % c->m;

			n_used += used[pair]++ == 0;
		}
		/*
		 * The round that uses the fewest (ToR, rank) pairs is the one
		 * ordered; a round that uses no fewer than the best ends the search.
		 */
		if (found && n_used >= best_used)
			break;
		best_used = n_used;
		best_rings = c->n_rings;
		memcpy(kept, c->rings, (size_t)c->n_rings * c->m * sizeof(int));
		found = 1;
	}
	if (found) {
		memcpy(c->rings, kept, (size_t)best_rings * c->m * sizeof(int));
		c->n_rings = best_rings;
	}
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

int hbd_ft_aligned_cut(struct hbd_cut *c, int64_t need, int *out)
{
	int rc = aligned_rings(c, need, NULL);

	if (rc > 0) {
		int order = hbd_ft_order(c, (int)need, out);

		rc = order ? order : 1;
	}
	return rc;
}

int hbd_ft_aligned_fill(struct hbd_cut *c, int64_t need, const int *placed)
{
	return aligned_rings(c, need, placed);
}

/* ---- fat-tree, the block re-cut ----------------------------------------- */

/*
 * The block re-cut polishes a plan's rings where the aligned cut's prices
 * stop moving (its rounds reach a fixed point after two). It takes blocks of
 * POLISH_BLOCK positions in turn, widened to the spans of the rings that
 * reach into them, and re-cuts each block's free positions into the same
 * number of rings by an exact dynamic programme whose price is the number of
 * (ToR, rank) pairs the block opens that no ring outside it uses. A pair
 * used only inside the block is given back when the block's rings move off
 * it, so a re-cut is kept when it opens fewer pairs than it gives back: the
 * count of distinct pairs, which the share follows once ordered (see
 * hbd_ft_aligned_cut), only falls. A block that gives back no pair is not
 * re-cut. Only a block whose ToRs all differ is priced exactly; on a
 * narrower domain a pair opened twice is counted twice, which only makes
 * the re-cut more careful. POLISH_SWEEPS sweeps, the second with blocks
 * shifted by half a block. Tried (medians of 40 fault sets, TP-32, 5%
 * faults): blocks of 16 to 64 positions (within 0.3 points of each other at
 * 90% scale), four sweeps (0.2 points more at 90% on 64 ToRs x 16), also
 * keeping re-cuts that open as many pairs as they give back (no better, and
 * every block re-cut), moving a ring from one block to another (0.5 points
 * on a few fault sets, at several times the time).
 */
#define POLISH_BLOCK  32
#define POLISH_SWEEPS 2
/* The dynamic programme's table cap (entries): larger blocks are left as they are. */
#define POLISH_CELLS ((size_t)1 << 20)
#define POLISH_INF   (INT32_MAX / 4)

struct polish {
	const struct ocs_ring_domain *d;
	const uint8_t *free; /* by position */
	int n, m, k, n_rings;
	int *pos;	/* n_rings * m positions, ring r at pos[r * m] */
	int *span;	/* by position: the ring whose span holds it, or -1 */
	uint8_t *wraps; /* by ring: it crosses the seam (never re-cut) */
	int *pairs;	/* by ToR * m + rank: nodes on that pair */
	/* one block's working memory */
	int *list, *ids;
	int32_t *value, *ended, *open;
	uint8_t *back;
	size_t cells;
};

static int32_t polish_price(const struct polish *p, int position, int rank)
{
	return p->pairs[(size_t)(position % p->d->tors) * p->m + rank] == 0;
}

static void polish_count(struct polish *p, const int *ring, int delta)
{
	for (int i = 0; i < p->m; i++)
		p->pairs[(size_t)(ring[i] % p->d->tors) * p->m + i] += delta;
}

/*
 * Re-cuts block [a, b) (widened to whole ring spans). value[(x * m + s) * w +
 * u]: least price with free position x at rank s and u free positions before
 * it left idle; open[x * w + u]: least price with every free position before
 * x decided and the last ring closed.
 */
static bool polish_block(struct polish *p, int a, int b)
{
	int m = p->m, lo = a, hi = b, f = 0, c = 0, idle, w, freed = 0;
	int32_t best;

	if (p->span[lo] >= 0)
		lo = p->pos[(size_t)p->span[lo] * m];
	if (p->span[hi - 1] >= 0)
		hi = p->pos[(size_t)p->span[hi - 1] * m + m - 1] + 1;
	for (int q = lo; q < hi; q++) {
		int r = p->span[q];

		if (r >= 0 && p->wraps[r])
			return false;
		if (p->free[q])
			p->list[f++] = q;
		if (r >= 0 && p->pos[(size_t)r * m] == q)
			p->ids[c++] = r;
	}
	idle = f - c * m;
	w = idle + 1;
	if (c == 0 || (size_t)(f + 1) * m * w > p->cells)
		return false;
	for (int r = 0; r < c; r++)
		polish_count(p, p->pos + (size_t)p->ids[r] * m, -1);
	/* The pairs the block's rings give back, each once (marked -1 while counted). */
	for (int r = 0; r < c; r++)
		for (int i = 0; i < m; i++) {
			size_t q = (size_t)(p->pos[(size_t)p->ids[r] * m + i] % p->d->tors) * m + i;

			if (p->pairs[q] == 0) {
				freed++;
				p->pairs[q] = -1; /* counted */
			}
		}
	for (int r = 0; r < c; r++)
		for (int i = 0; i < m; i++) {
			size_t q = (size_t)(p->pos[(size_t)p->ids[r] * m + i] % p->d->tors) * m + i;

			if (p->pairs[q] < 0)
				p->pairs[q] = 0;
		}
	if (freed == 0) {
		/* Nothing to give back: no re-cut can use fewer pairs. */
		for (int r = 0; r < c; r++)
			polish_count(p, p->pos + (size_t)p->ids[r] * m, 1);
		return false;
	}
	for (int u = 0; u < w; u++)
		p->open[u] = u == 0 ? 0 : POLISH_INF;
	for (int x = 0; x < f; x++) {
		for (int u = 0; u < w; u++) {
			for (int s = 0; s < m; s++) {
				int32_t v = s == 0 ? p->open[(size_t)x * w + u] : POLISH_INF;
				int from = 0;

				for (int y = x - 1;
				     s > 0 && y >= 0 && p->list[x] - p->list[y] <= p->k; y--) {
					int uu = u - (x - y - 1);

					if (uu < 0)
						break;
					if (p->value[((size_t)y * m + s - 1) * w + uu] < v) {
						v = p->value[((size_t)y * m + s - 1) * w + uu];
						from = x - y;
					}
				}
				if (v < POLISH_INF)
					v += polish_price(p, p->list[x], s);
				p->value[((size_t)x * m + s) * w + u] = v;
				p->back[((size_t)x * m + s) * w + u] = (uint8_t)from;
			}
			p->ended[(size_t)x * w + u] = p->value[((size_t)x * m + m - 1) * w + u];
		}
		for (int u = 0; u < w; u++) {
			int32_t skip = u > 0 ? p->open[(size_t)x * w + u - 1] : POLISH_INF;
			int32_t end = p->ended[(size_t)x * w + u];

			p->open[(size_t)(x + 1) * w + u] = skip < end ? skip : end;
		}
	}
	best = p->open[(size_t)f * w + idle];
	if (best >= freed) {
		for (int r = 0; r < c; r++)
			polish_count(p, p->pos + (size_t)p->ids[r] * m, 1);
		return false;
	}
	for (int q = lo; q < hi; q++)
		p->span[q] = -1;
	for (int x = f, u = idle, r = 0; x > 0;) {
		int *ring;

		if (u > 0 && p->open[(size_t)x * w + u] == p->open[(size_t)(x - 1) * w + u - 1] &&
		    p->open[(size_t)(x - 1) * w + u - 1] < POLISH_INF) {
			x--;
			u--;
			continue;
		}
		ring = p->pos + (size_t)p->ids[r++] * m;
		x--;
		for (int s = m - 1; s >= 0; s--) {
			ring[s] = p->list[x];
			if (s > 0) {
				int back = p->back[((size_t)x * m + s) * w + u];

				u -= back - 1;
				x -= back;
			}
		}
		for (int q = ring[0]; q <= ring[m - 1]; q++)
			p->span[q] = (int)(ring - p->pos) / m;
		polish_count(p, ring, 1);
	}
	return true;
}

int hbd_ft_polish(const struct hbd_cut *c, int *rings, int n_rings)
{
	const struct ocs_ring_domain *d = c->d;
	struct polish p = {.d = d, .free = c->free, .n = c->n, .m = c->m, .k = d->k_hops};
	size_t width = POLISH_BLOCK + 2 * ((size_t)c->m * d->k_hops + 1);
	int rc = -ENOMEM;

	p.n_rings = n_rings;
	p.cells = POLISH_CELLS;
	p.pos = malloc((size_t)n_rings * c->m * sizeof(int));
	p.span = malloc((size_t)c->n * sizeof(int));
	p.wraps = calloc((size_t)n_rings + 1, 1);
	p.pairs = calloc((size_t)d->tors * c->m, sizeof(int));
	p.list = malloc(width * sizeof(int));
	p.ids = malloc(width * sizeof(int));
	if (width * c->m * (width + 1) < p.cells)
		p.cells = width * c->m * (width + 1);
	p.value = malloc(p.cells * sizeof(int32_t));
	p.back = malloc(p.cells);
	p.ended = malloc(p.cells * sizeof(int32_t));
	p.open = malloc((p.cells + width + 1) * sizeof(int32_t));
	if (!p.pos || !p.span || !p.wraps || !p.pairs || !p.list || !p.ids || !p.value || !p.back ||
	    !p.ended || !p.open)
		goto done;
	for (int q = 0; q < c->n; q++)
		p.span[q] = -1;
	for (int r = 0; r < n_rings; r++) {
		int *ring = p.pos + (size_t)r * c->m;

		for (int i = 0; i < c->m; i++)
			ring[i] = ocs_ring_position(d, rings[(size_t)r * c->m + i]);
		p.wraps[r] = ring[c->m - 1] < ring[0];
		polish_count(&p, ring, 1);
	}
	/* Spans must be disjoint (the cuts of this file and hbd_ring.c make them so). */
	for (int r = 0; r < n_rings; r++) {
		const int *ring = p.pos + (size_t)r * c->m;
		int first = p.wraps[r] ? 0 : ring[0], last = ring[c->m - 1];

		for (int q = first; q <= last; q++) {
			if (p.span[q] >= 0) {
				rc = 0;
				goto done;
			}
			p.span[q] = r;
		}
		for (int q = p.wraps[r] ? ring[0] : c->n; q < c->n; q++) {
			if (p.span[q] >= 0) {
				rc = 0;
				goto done;
			}
			p.span[q] = r;
		}
	}
	rc = 0;
	for (int sweep = 0; sweep < POLISH_SWEEPS; sweep++)
		for (int a = sweep * POLISH_BLOCK / 2; a < c->n; a += POLISH_BLOCK)
			rc |= polish_block(&p, a,
					   a + POLISH_BLOCK < c->n ? a + POLISH_BLOCK : c->n);
	for (size_t q = 0; rc && q < (size_t)n_rings * c->m; q++)
		rings[q] = ocs_ring_node_at(d, p.pos[q]);
done:
	free(p.pos);
	free(p.span);
	free(p.wraps);
	free(p.pairs);
	free(p.list);
	free(p.ids);
	free(p.value);
	free(p.back);
	free(p.ended);
	free(p.open);
	return rc;
}

/*
 * The constraints of Algs. 4-5 that rings (n_rings of m nodes) honour, for
 * a placement the binary search did not make: segment s is isolated when no
 * ring has nodes both in it and outside it; aggregation domain a is aligned
 * when every ring with a node in it sits in one segment on a ToR window
 * (rank i under a ToR that is i modulo m). 0 or -ENOMEM.
 */
int hbd_ft_constraints_honoured(const struct ocs_ring_domain *d, const int *rings, int n_rings,
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
