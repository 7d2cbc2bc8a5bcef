/*
 * hbd_label.c - the block labelling, a third fat-tree placement of the
 * TP-ring planner (hbd_fattree.h, issue 28 #4): each ToR serves one rank,
 * so its rings open at most one (ToR, rank) pair per ToR, and the labels
 * are chosen so that faults cost as few rings as possible.
 *
 * A pattern labels L = w * m consecutive ToRs with ranks such that w rings
 * fit in the L positions of one sub-line when all are free (positions
 * index * tors + tor, fabric.h: the L ToRs of a block hold L consecutive
 * positions in each of the p sub-lines). The family, for K hops:
 *
 *   w = 1   0 1 2 3            aligned windows: a fault costs its ring
 *   w = 2   0 0 1 1 2 2 3 3    two or three rings whose nodes of one rank
 *   w = 3   0 0 0 1 1 1 ...    stand side by side, so faults under
 *                              different ranks cost one ring, not two
 *   stagger 0 0 1 0 1 2 1 2 3 2 3 3   three rings started at 0, 1 and 3
 *                              with strides of 3: other neighbours
 *
 * (shown for m = 4; a pattern needs its strides <= K, and L <= 16 unless
 * w = 1). A block is a pattern on a run of ToRs; its value is the rings it
 * holds summed over the sub-lines. A window with at most one unusable
 * position holds w minus that many (the pattern's own rings are
 * disjoint); with more, a dynamic programme over the ranks whose state is
 * the subset of a rank's w positions the surviving chains end on
 * (window_rings) gives the exact count. Blocks of different patterns and
 * single unlabelled ToRs tile the ToR circle; a dynamic programme over the
 * ToRs picks the tiling with the most rings, for every start of the first
 * block. Ranks are fixed per ToR, so rings never cross a block and the
 * blocks are independent. The rings of a window with two or more unusable
 * positions come from an exact dynamic programme over its positions
 * (pattern_rings), the others are the pattern's own.
 *
 * On the bench's fault sets (TP-32, 8-GPU nodes, K = 3, 5% node faults),
 * 64 ToRs x 16 hold 215 to 220 rings this way, one pair per ToR, where one
 * pattern everywhere holds 210 to 213; an 85% job needs 217. hbd_ring.c
 * fills a shortfall from the free nodes left (hbd_ft_aligned_fill).
 * Pure, no globals.
 */
#include "hbd_fattree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX_K    6  /* state: one bit per position of the last K */
#define LABEL_MAX_L    16 /* positions of a pattern with w >= 2 (a 32-bit mask per window) */
#define LABEL_PATTERNS 4

/* Bits set in a subset of the (at most 3) positions of a rank. */
static const uint8_t bits3[8] = {0, 1, 1, 2, 1, 2, 2, 3};

struct pattern {
	int len, rings;		    /* L positions, w rings when all are free */
	uint8_t rank[LABEL_MAX_L];  /* rank of each position (len <= 16 but w = 1) */
	uint8_t ring[LABEL_MAX_L];  /* which of the w rings holds it when all are free */
	uint8_t reach[LABEL_MAX_L]; /* bit d-1: position i - d has rank[i] - 1 */
	uint8_t at[LABEL_MAX_L];    /* the w positions of rank r: at[r * w .. r * w + w) */
	/*
	 * from[r][S']: bit S set when chains ending on the subset S of rank
	 * r's positions can go on, each to its own node within K, onto
	 * exactly the subset S' of rank r + 1's (subsets of the w <= 3
	 * positions, as bits).
	 */
	uint8_t from[LABEL_MAX_L][8];
};

struct label_cut {
	const struct hbd_cut *c;
	int k, tors, rows;
	int max_w; /* the most rings a pattern may hold */
	struct pattern pat[LABEL_PATTERNS];
	int n_pat;
	int *bad_before; /* unusable positions before pos, over two laps */
	uint16_t *back;	 /* dynamic programme choices, L x 2^K: choice | state << 4 */
};

/* Position pos of the line: free to use (beyond the end of an open line: no). */
static bool usable(const struct label_cut *lc, int64_t pos)
{
	const struct hbd_cut *c = lc->c;

	if (pos >= c->n) {
		if (!c->d->closed)
			return false;
		pos -= c->n;
	}
	return c->free[pos] != 0;
}

static void pattern_uniform(struct pattern *p, int m, int w)
{
	p->len = w * m;
	p->rings = w;
	for (int i = 0; i < p->len && i < LABEL_MAX_L; i++) {
		p->rank[i] = (uint8_t)(i / w);
		p->ring[i] = (uint8_t)(i % w);
	}
}

/*
 * Three rings started at 0, 1 and 3 with strides of 3: ring A at 0, 2, 5,
 * 8, ..., ring B at 1, 4, 7, ..., ring C at 3, 6, ... and its last node at
 * 3m - 1; together they hold every position of 0 .. 3m - 1.
 */
static void pattern_stagger(struct pattern *p, int m)
{
	p->len = 3 * m;
	p->rings = 3;
	for (int r = 0; r < m; r++) {
		int at[3] = {r == 0 ? 0 : 3 * r - 1, 1 + 3 * r, r == m - 1 ? 3 * m - 1 : 3 + 3 * r};

		for (int j = 0; j < 3; j++) {
			if (at[j] >=
			    LABEL_MAX_L) /* make_patterns keeps 3m <= 16; gcc -O3 can't see it */
				continue;
			p->rank[at[j]] = (uint8_t)r;
			p->ring[at[j]] = (uint8_t)j;
		}
	}
}

/*
 * Most rings of pattern p on the L positions from `first` whose usable bits
 * are `ok` (bit i: position first + i), written to rings (positions, m
 * apiece, *n_rings counting) from the choices in lc->back.
 *
 *   state s: bit d-1 set = position i-d ends an unfinished ring (of rank
 *   p->rank[i-d]); at position i with rank r, from s:
 *     idle                      if bit K-1 is clear
 *     start a ring (r = 0)      if usable and bit K-1 is clear
 *     extend the ring at i-d    if usable, bit d-1 set, rank[i-d] = r - 1,
 *                               and d = K or bit K-1 clear;
 *   rank m - 1 closes the ring (+1), any other rank leaves bit 0 set.
 */
static int pattern_rings(struct label_cut *lc, const struct pattern *p, uint32_t ok, int64_t first,
			 int *rings, int *n_rings)
{
	const int m = lc->c->m, k = lc->k, n_states = 1 << k, top = 1 << (k - 1);
	int value[1 << LABEL_MAX_K], next[1 << LABEL_MAX_K], best;

	for (int s = 0; s < n_states; s++)
		value[s] = -1;
	value[0] = 0;
	for (int i = 0; i < p->len; i++) {
		int r = p->rank[i];
		bool free_here = ok >> i & 1;
		uint16_t *back = lc->back + (size_t)i * n_states;

		for (int s = 0; s < n_states; s++)
			next[s] = -1;
		for (int s = 0; s < n_states; s++) {
			if (value[s] < 0)
				continue;
			/*
			 * choice: 0 idle, 1 start, 1 + d extend the ring ending at
			 * i - d; `options` has bit ch set for each one allowed here.
			 */
			int options = (free_here ? (s & p->reach[i]) << 2 : 0) |
				      (free_here && r == 0 ? 2 : 0) | 1;

			while (options) {
				int ch = __builtin_ctz((unsigned)options), rest = s, gain = 0, ns;

				options &= options - 1;
				if (ch >= 2)
					rest = s & ~(1 << (ch - 2));
				if (rest & top)
					continue;
				ns = (rest << 1) & (n_states - 1);
				if (ch >= 1) {
					if (r == m - 1)
						gain = 1;
					else
						ns |= 1;
				}
				if (value[s] + gain > next[ns]) {
					next[ns] = value[s] + gain;
					back[ns] = (uint16_t)(ch | s << 4);
				}
			}
		}
		memcpy(value, next, sizeof(int) * (size_t)n_states);
	}
	/*
	 * End with no unfinished ring: a plan that leaves one unfinished holds
	 * no more rings than the same plan with that ring never started.
	 */
	best = value[0] > 0 ? value[0] : 0;
	if (best > 0) {
		int ring_of[LABEL_MAX_L], choice[LABEL_MAX_L], s = 0, *out;

		for (int i = p->len - 1; i >= 0; i--) {
			uint16_t b = lc->back[(size_t)i * n_states + s];

			choice[i] = b & 15;
			s = b >> 4;
		}
		/* Forward: a start opens a ring, an extension joins the ring at i - d. */
		for (int i = 0; i < p->len; i++) {
			ring_of[i] = -1;
			if (choice[i] == 0)
				continue;
			if (choice[i] == 1)
				ring_of[i] = (*n_rings)++;
			else
				ring_of[i] = ring_of[i - (choice[i] - 1)];
			out = rings + (size_t)ring_of[i] * m;
			out[p->rank[i]] = (int)((first + i) % lc->c->n);
		}
	}
	return best;
}

/* Rings of pattern p in the window of positions from `first`. */
static int window_rings(struct label_cut *lc, struct pattern *p, int64_t first)
{
	const int w = p->rings, m = lc->c->m;
	int bad = lc->bad_before[first + p->len] - lc->bad_before[first], most = 0;
	unsigned reach = 0;

	/* The pattern's rings are disjoint: one unusable position costs one. */
	if (bad <= 1)
		return w - bad;
	if (w == 1)
		return 0;
	/*
	 * reach: bit S set when chains from rank 0 can end on exactly the
	 * subset S of rank r's usable positions; the rings are the largest S
	 * reached at rank m - 1.
	 */
	for (int r = 0; r < m; r++) {
		unsigned usable_set = 0, next = 0;

		for (int j = 0; j < w; j++) {
			int64_t pos = first + p->at[r * w + j];

			usable_set |= (unsigned)(lc->bad_before[pos + 1] == lc->bad_before[pos])
				      << j;
		}
		for (unsigned sub = 0; sub < 1u << w; sub++)
			if ((sub & ~usable_set) == 0 &&
			    (r == 0 || (reach & p->from[r - 1][sub]) != 0))
				next |= 1u << sub;
		reach = next;
	}
	for (unsigned sub = 0; sub < 1u << w; sub++)
		if (reach >> sub & 1 && bits3[sub] > most)
			most = bits3[sub];
	return most;
}

/*
 * Whether the chains on subset s of rank r can each go on to its own node
 * of subset t of rank r + 1 (Hall's condition: every part of t reaches at
 * least as many chains of s as it has nodes; reach[j]: the positions of
 * rank r within K before node j of rank r + 1).
 */
static bool chains_go_on(const uint8_t *reach, unsigned s, unsigned t)
{
	for (unsigned part = t; part != 0; part = (part - 1) & t) {
		unsigned seen = 0;

		for (unsigned j = 0; j < 3; j++)
			if (part >> j & 1)
				seen |= reach[j];
		if (bits3[seen & s] < bits3[part])
			return false;
	}
	return true;
}

/* A pattern's positions per rank, reach masks and chain transitions (w >= 2). */
static void pattern_layers(struct pattern *p, int m, int k)
{
	const int w = p->rings;
	int fill[LABEL_MAX_L] = {0};

	for (int i = 0; i < p->len; i++) {
		p->at[p->rank[i] * w + fill[p->rank[i]]++] = (uint8_t)i;
		p->reach[i] = 0;
		for (int dist = 1; dist <= k && dist <= i; dist++)
			if (p->rank[i - dist] + 1 == p->rank[i])
				p->reach[i] |= (uint8_t)(1 << (dist - 1));
	}
	for (int r = 0; r + 1 < m; r++) {
		uint8_t reach[3] = {0};

		for (int j = 0; j < w; j++)
			for (int i = 0; i < w; i++) {
				int gap = p->at[(r + 1) * w + j] - p->at[r * w + i];

				if (gap >= 1 && gap <= k)
					reach[j] |= (uint8_t)(1u << i);
			}
		for (unsigned t = 0; t < 1u << w; t++) {
			p->from[r][t] = 0;
			for (unsigned s = 0; s < 1u << w; s++)
				if (chains_go_on(reach, s, t))
					p->from[r][t] |= (uint8_t)(1u << s);
		}
	}
}

/* The family of patterns for m and K (header comment), those that fit the ToRs. */
static void make_patterns(struct label_cut *lc)
{
	const int m = lc->c->m;

	for (int kind = 0; kind < LABEL_PATTERNS; kind++) {
		struct pattern *p = &lc->pat[lc->n_pat];
		int w = kind < 3 ? kind + 1 : 3;

		if (w > lc->k || w > lc->max_w || (kind == 3 && (m < 2 || 3 * m > LABEL_MAX_L)))
			continue;
		if (kind < 3)
			pattern_uniform(p, m, w);
		else
			pattern_stagger(p, m);
		if (p->len > lc->tors || (w > 1 && p->len > LABEL_MAX_L))
			continue;
		if (w > 1)
			pattern_layers(p, m, lc->k);
		lc->n_pat++;
	}
}

/*
 * Writes the rings of block (first ToR c0, pattern p) in every sub-line to
 * c->rings as positions; healthy windows take the pattern's own rings.
 */
static void block_rings(struct label_cut *lc, struct pattern *p, int c0)
{
	struct hbd_cut *c = (struct hbd_cut *)lc->c;

	for (int row = 0; row < lc->rows; row++) {
		int64_t first = (int64_t)row * lc->tors + c0;
		int bad = lc->bad_before[first + p->len] - lc->bad_before[first], lost = -1,
		    got = 0;
		uint32_t ok = 0;

		if (bad == 0 && p->rings == 1) {
			int *ring = c->rings + (size_t)c->n_rings++ * c->m;

			for (int i = 0; i < c->m; i++)
				ring[i] = (int)((first + i) % c->n);
			continue;
		}
		if (p->rings == 1)
			continue;
		for (int i = 0; i < p->len; i++)
			ok |= (uint32_t)usable(lc, first + i) << i;
		if (bad >= 2) {
			pattern_rings(lc, p, ok, first, c->rings + (size_t)c->n_rings * c->m, &got);
			c->n_rings += got;
			continue;
		}
		/* The pattern's own rings, but the one through the unusable position. */
		for (int i = 0; i < p->len; i++)
			if (!(ok >> i & 1))
				lost = p->ring[i];
		for (int i = 0; i < p->len; i++)
			if (p->ring[i] != lost) {
				int slot =
					p->ring[i] < lost || lost < 0 ? p->ring[i] : p->ring[i] - 1;

				c->rings[(size_t)(c->n_rings + slot) * c->m + p->rank[i]] =
					(int)((first + i) % c->n);
			}
		c->n_rings += p->rings - (lost >= 0);
	}
}

int hbd_ft_label_cut(struct hbd_cut *c, int max_w)
{
	const struct ocs_ring_domain *d = c->d;
	struct label_cut lc = {
		.c = c, .k = d->k_hops, .tors = d->tors, .rows = d->nodes_per_tor, .max_w = max_w};
	int *val = NULL, *f = NULL, *pick = NULL, best = 0, best_o = 0, max_len = 0, rc = 0;

	c->n_rings = 0;
	c->label_w = 0;
	if (lc.k > LABEL_MAX_K)
		return 0;
	make_patterns(&lc);
	for (int q = 0; q < lc.n_pat; q++)
		max_len = lc.pat[q].len > max_len ? lc.pat[q].len : max_len;
	lc.bad_before = malloc((2 * (size_t)c->n + 1) * sizeof(int));
	lc.back = malloc(((size_t)LABEL_MAX_L << LABEL_MAX_K) * sizeof(uint16_t));
	val = malloc((size_t)lc.tors * (lc.n_pat + 1) * sizeof(int));
	f = malloc(((size_t)lc.tors + 1) * sizeof(int));
	pick = malloc(((size_t)lc.tors + 1) * sizeof(int));
	if (!lc.bad_before || !lc.back || !val || !f || !pick)
		goto oom;
	if (lc.n_pat == 0)
		goto done;
	lc.bad_before[0] = 0;
	for (int64_t pos = 0; pos < 2 * (int64_t)c->n; pos++)
		lc.bad_before[pos + 1] = lc.bad_before[pos] + !usable(&lc, pos);
	for (int t = 0; t < lc.tors; t++)
		for (int q = 0; q < lc.n_pat; q++) {
			int sum = 0;

			for (int row = 0; row < lc.rows; row++)
				sum += window_rings(&lc, &lc.pat[q], (int64_t)row * lc.tors + t);
			val[(size_t)t * lc.n_pat + q] = sum;
		}
	/*
	 * Tilings of the ToR circle from each start o of the first block: f[i]
	 * is the most rings on ToRs o .. o + i - 1, pick[i] the pattern of the
	 * block that ends there (-1: ToR o + i - 1 stays unlabelled).
	 */
	for (int pass = 0; pass < 2; pass++) {
		int from = pass ? best_o : 0, to = pass ? best_o + 1 : max_len;

		for (int o = from; o < to && o < lc.tors; o++) {
			f[0] = 0;
			for (int i = 1; i <= lc.tors; i++) {
				f[i] = f[i - 1];
				pick[i] = -1;
				for (int q = 0; q < lc.n_pat; q++) {
					int len = lc.pat[q].len, v, col;

					if (len > i)
						continue;
					col = o + i - len;
					col -= col >= lc.tors ? lc.tors : 0;
					v = f[i - len] + val[(size_t)col * lc.n_pat + q];
					if (v > f[i]) {
						f[i] = v;
						pick[i] = q;
					}
				}
			}
			if (!pass && f[lc.tors] > best) {
				best = f[lc.tors];
				best_o = o;
			}
		}
	}
	if (best == 0)
		goto done;
	for (int i = lc.tors; i > 0;) {
		int q = pick[i];

		if (q < 0) {
			i--;
			continue;
		}
		i -= lc.pat[q].len;
		block_rings(&lc, &lc.pat[q], (best_o + i) % lc.tors);
		c->label_w = lc.pat[q].rings > c->label_w ? lc.pat[q].rings : c->label_w;
	}
	/* Positions to node ids; the ring's positions leave the free set. */
	for (size_t i = 0; i < (size_t)c->n_rings * c->m; i++) {
		c->free[c->rings[i]] = 0;
		c->rings[i] = ocs_ring_node_at(d, c->rings[i]);
	}
	c->label_first = best_o;
	rc = best; /* what the tiling counted: the property test holds it to c->n_rings */
	goto done;
oom:
	rc = -ENOMEM;
done:
	free(lc.bad_before);
	free(lc.back);
	free(val);
	free(f);
	free(pick);
	return rc;
}
