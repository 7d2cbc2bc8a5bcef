/*
 * hbd_extend.c - the block labelling extended (hbd_fattree.h, issue 28
 * #4): where the labelling of hbd_label.c holds a few rings fewer than
 * the job needs, open a few more (ToR, rank) pairs, each one that lets
 * more rings fit, counted exactly, and cut the rings the pairs allow.
 * The aligned fill (hbd_fattree.c) covers the same shortfall from the
 * nodes the labelling left; this instead re-cuts the whole line, so the
 * rings a new pair lets in may take the labelling's nodes too. It pays
 * where a ToR has many nodes (a pair opens all of them): on 16 ToRs x 64
 * at 85% it needs 1 to 4 pairs beyond the labelling's 16.
 *
 * The count is a dynamic programme over the positions of the line (ToR
 * pos mod tors, fabric.h), from a position no labelled ring crosses (the
 * labelling's first block) once around; rings may interleave. Its state
 * holds, for each of the last K positions, the rank an unfinished ring
 * ending there needs next:
 *
 *   state: K slots of b bits; slot d-1 = 0 when no unfinished ring ends at
 *          i - d, v when one of rank v - 1 does (1 <= v <= m - 1)
 *   at position i, ToR t, ranks(t) the ranks it serves, from state s
 *   (sh: the slots moved one on, slot K-1's ring dropped, its nodes
 *   left free):
 *     idle                                  -> sh
 *     rank 0 in ranks(t), i usable           -> sh + slot 0 = 1   (a ring starts)
 *     slot d = v, rank v in ranks(t), usable -> sh without it, + slot 0 = v + 1,
 *                                               or +1 ring when v = m - 1
 *
 * Which pair: with the forward values F[i][s] (most rings before i, in s)
 * and backward values B[i][s] (most after), opening (t, r) at one
 * position i of t gains max over s of F[i][s] + step + B[i+1][s'] - count;
 * summed over t's positions it estimates the pair's gain. Pairs are tried
 * in that order, each by a forward pass, and the first that adds a ring
 * is kept; the estimates are redone when EXT_TRIES in a row add none.
 *
 * Which rings: many cuts hold the most rings, and the share counts how
 * the rings' ToR sequences chain (hbd_ft_order). The last pass takes,
 * among the cuts with the most rings, the one that costs least: a node on
 * a pair the labelling did not open costs 1, a link from ToR t to another
 * than the one t's labelled rings go on to costs 1, or EXT_BACK_COST when
 * it goes back to a sequence that starts earlier in the block (rings that
 * only ever switch forward, from sequence A to B, chain without extra
 * crossings; one that switches back cannot). Rings beyond the need go,
 * the costliest first. Pure, no globals.
 */
#include "hbd_fattree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EXT_MAX_K     8			/* slots of at least one bit in 8 */
#define EXT_MAX_BITS  8			/* b * K: 256 states at most */
#define EXT_MAX_CELLS ((size_t)1 << 20) /* positions x states of the tables */
#define EXT_MAX_SHORT 8			/* rings the labelling may lack */
#define EXT_TRIES     4			/* candidates in a row that add none before re-estimating */
#define EXT_ROUNDS    2			/* estimates at most: a third rarely helps, and costs 10% */
#define EXT_BACK_COST 3			/* a link back to a sequence that starts earlier */
#define EXT_NONE      INT64_MIN		/* a state the forward pass has not reached */

/* What a traceback entry records at its position (the high byte of e->from). */
enum { EXT_IDLE = 0, EXT_START = 1 /* , EXT_START + d: extend the ring at i - d */ };

struct ext {
	const struct hbd_cut *c;
	int k, m, bits, ns, tors;
	int n, start;	     /* the passes run over positions start .. start + n - 1, mod n */
	uint8_t *ok;	     /* by position: usable (free, or a labelled ring's) */
	uint8_t *lab;	     /* by ToR: the ranks it serves, a bit per rank */
	const uint8_t *home; /* by ToR: the ranks the labelling gave it */
	int *succ;	     /* by ToR: the ToR its labelled rings go on to most, -1 none */
	int *chain;	     /* by ToR: the rank-0 ToR of its labelled sequence, -1 none */
	int16_t *f, *b;	     /* (n + 1) x ns forward / backward values, f -1: unreachable */
	uint64_t *need;	     /* (n + 1) x words: the states backward() values (needed()) */
	int words;	     /* 64-bit words of a state set */
	uint16_t *from;	     /* n x ns: the state before position i | action << 8 */
	int *gain;	     /* tors x m estimates */
	int *cand;	     /* (t * m + r) in estimate order; then the rings' last positions */
	int n_cand;	     /* its size: tors x m, at least n / m + 1 */
	/* The transitions of each state, tabled once: */
	uint8_t sh0[1 << EXT_MAX_BITS];	  /* moved one on */
	uint8_t lo[1 << EXT_MAX_BITS][9]; /* its unfinished rings needing rank r next: */
	uint8_t dist[1 << EXT_MAX_BITS]
		    [EXT_MAX_K]; /* x in lo[r] .. lo[r + 1] - 1, ending at i - d */
	uint8_t want[1 << EXT_MAX_BITS][EXT_MAX_K]; /* r */
	uint8_t go[1 << EXT_MAX_BITS][EXT_MAX_K];   /* the state after ring x takes rank r at i */
};

static int slot(const struct ext *e, int s, int d)
{
	return (s >> (e->bits * (d - 1))) & ((1 << e->bits) - 1);
}

/* s with slot d cleared (d > 0), moved one on (slot 0 free, slot K-1 dropped). */
static int shifted(const struct ext *e, int s, int d)
{
	if (d > 0)
		s &= ~(((1 << e->bits) - 1) << (e->bits * (d - 1)));
	return (s << e->bits) & (e->ns - 1);
}

static void make_tables(struct ext *e)
{
	for (int s = 0; s < e->ns; s++) {
		int n = 0;

		e->sh0[s] = (uint8_t)shifted(e, s, 0);
		/* By rank, then by d: lo[r] counts the rings needing a rank below r. */
		for (int r = 0; r <= e->m; r++) {
			e->lo[s][r] = (uint8_t)n;
			for (int d = 1; r > 0 && r < e->m && d <= e->k; d++) {
				if (slot(e, s, d) != r)
					continue;
				e->dist[s][n] = (uint8_t)d;
				e->want[s][n] = (uint8_t)r;
				e->go[s][n++] =
					(uint8_t)(shifted(e, s, d) | (r < e->m - 1 ? r + 1 : 0));
			}
		}
	}
}

/* Position i of the pass on the line. */
static int line_pos(const struct ext *e, int i)
{
	int pos = e->start + i;

	return pos >= e->n ? pos - e->n : pos;
}

/* The ranks position i of the pass may take (0: none). */
static unsigned ranks_at(const struct ext *e, int i)
{
	int pos = line_pos(e, i);

	return e->ok[pos] ? e->lab[pos % e->tors] : 0;
}

/* What the link from ToR t1 on to ToR t2 costs (header comment). */
static int link_cost(const struct ext *e, int t1, int t2)
{
	int c1 = e->chain[t1], c2 = e->chain[t2];

	if (e->succ[t1] == t2)
		return 0;
	if (c1 >= 0 && c2 >= 0 && (c2 - c1 + e->tors) % e->tors > e->tors / 2)
		return EXT_BACK_COST;
	return 1;
}

/*
 * The forward pass that counts: returns the most rings; keeps F in e->f
 * when `values`. Values fit in 16 bits (the caller checks n / m).
 */
static int count_pass(struct ext *e, bool values)
{
	int16_t cur[1 << EXT_MAX_BITS], nx[1 << EXT_MAX_BITS];
	uint8_t act[1 << EXT_MAX_BITS], nact[1 << EXT_MAX_BITS];
	int na = 1, best = 0;

	memset(cur, 0xff, sizeof(cur)); /* -1: not reached */
	memset(nx, 0xff, sizeof(nx));
	cur[0] = 0;
	act[0] = 0;
	for (int i = 0; i <= e->n; i++) {
		unsigned a;
		int nn = 0;

		if (values) {
			int16_t *row = e->f + (size_t)i * e->ns;

			memset(row, 0xff, (size_t)e->ns * sizeof(int16_t));
			for (int j = 0; j < na; j++)
				row[act[j]] = cur[act[j]];
		}
		if (i == e->n)
			break;
		a = ranks_at(e, i);
#define RELAX(s2, v2)                                                                              \
	do {                                                                                       \
		if ((v2) > nx[s2]) {                                                               \
			if (nx[s2] < 0)                                                            \
				nact[nn++] = (uint8_t)(s2);                                        \
			nx[s2] = (int16_t)(v2);                                                    \
		}                                                                                  \
	} while (0)
		for (int j = 0; j < na; j++) {
			int s = act[j], v = cur[s];

			RELAX(e->sh0[s], v);
			if (a & 1)
				RELAX(e->sh0[s] | 1, v);
			if (!(a & ~1u))
				continue;
			for (int x = 0; x < e->lo[s][e->m]; x++)
				if (a >> e->want[s][x] & 1)
					RELAX(e->go[s][x], v + (e->want[s][x] == e->m - 1));
		}
#undef RELAX
		for (int j = 0; j < na; j++)
			cur[act[j]] = -1;
		for (int j = 0; j < nn; j++) {
			cur[nact[j]] = nx[nact[j]];
			nx[nact[j]] = -1;
			act[j] = nact[j];
		}
		na = nn;
	}
	for (int j = 0; j < na; j++)
		best = cur[act[j]] > best ? cur[act[j]] : best;
	return best;
}

/*
 * The forward pass that traces: keeps the choices in e->from, returns the
 * best final state; among the cuts with the most rings it takes the
 * cheapest (header comment): a ring is worth w, more than all nodes' and
 * links' costs.
 */
static int trace_pass(struct ext *e)
{
	int64_t cur[1 << EXT_MAX_BITS], nx[1 << EXT_MAX_BITS], best = EXT_NONE;
	int64_t w = (int64_t)(EXT_BACK_COST + 1) * e->n + 1;
	uint8_t act[1 << EXT_MAX_BITS], nact[1 << EXT_MAX_BITS];
	int na = 1, last = 0;

	for (int s = 0; s < e->ns; s++)
		cur[s] = nx[s] = EXT_NONE;
	cur[0] = 0;
	act[0] = 0;
	for (int i = 0; i < e->n; i++) {
		unsigned a = ranks_at(e, i);
		uint16_t *from = e->from + (size_t)i * e->ns;
		int nn = 0, t = line_pos(e, i) % e->tors;
		unsigned away = a & ~(unsigned)e->home[t];

		for (int j = 0; j < na; j++) {
			int s = act[j];

			for (int x = -2; x < e->lo[s][e->m];
			     x++) { /* -2: idle, -1: start, x: ring x */
				int r = x >= 0 ? e->want[s][x] : 0, d = x >= 0 ? e->dist[s][x] : 0,
				    s2;
				int64_t v2 = cur[s];

				if (x == -2) {
					s2 = e->sh0[s];
				} else if (x == -1) {
					if (!(a & 1))
						continue;
					s2 = e->sh0[s] | 1;
				} else {
					if (!(a >> r & 1))
						continue;
					s2 = e->go[s][x];
					v2 += r == e->m - 1 ? w : 0;
					v2 -= link_cost(e, line_pos(e, i - d) % e->tors, t);
				}
				if (x >= -1)
					v2 -= away >> r & 1;
				if (v2 <= nx[s2])
					continue;
				if (nx[s2] == EXT_NONE)
					nact[nn++] = (uint8_t)s2;
				nx[s2] = v2;
				from[s2] =
					(uint16_t)(s | (x == -2 ? EXT_IDLE : EXT_START + d) << 8);
			}
		}
		for (int j = 0; j < na; j++)
			cur[act[j]] = EXT_NONE;
		for (int j = 0; j < nn; j++) {
			cur[nact[j]] = nx[nact[j]];
			nx[nact[j]] = EXT_NONE;
			act[j] = nact[j];
		}
		na = nn;
	}
	for (int j = 0; j < na; j++)
		if (cur[act[j]] > best) {
			best = cur[act[j]];
			last = act[j];
		}
	return last;
}

static void set_state(uint64_t *set, int s)
{
	set[s >> 6] |= (uint64_t)1 << (s & 63);
}

/*
 * e->need[i]: the states whose backward values the estimate reads, and
 * those they read in turn: the states the forward pass reaches (F >= 0),
 * what they step to when position i serves any rank, and what those step
 * to on the open pairs. About 5 states of 64 are reached on 16 ToRs x 64;
 * valuing only these keeps the backward pass near a forward pass's cost.
 */
static void needed(struct ext *e)
{
	size_t words = (size_t)e->words;

	memset(e->need, 0, ((size_t)e->n + 1) * words * sizeof(uint64_t));
	set_state(e->need, 0);
	for (int i = 0; i < e->n; i++) {
		const int16_t *f = e->f + (size_t)i * e->ns;
		const uint64_t *cur = e->need + (size_t)i * words;
		uint64_t *nxt = e->need + (size_t)(i + 1) * words;
		unsigned a = ranks_at(e, i), any = e->ok[line_pos(e, i)] ? (1u << e->m) - 1 : 0;

		for (size_t wd = 0; wd < words; wd++)
			for (uint64_t bits = cur[wd]; bits; bits &= bits - 1) {
				int s = (int)(wd * 64) + __builtin_ctzll(bits);
				unsigned mask = f[s] >= 0 ? any : a;

				set_state(nxt, e->sh0[s]);
				if (mask & 1)
					set_state(nxt, e->sh0[s] | 1);
				for (int x = 0; x < e->lo[s][e->m]; x++)
					if (mask >> e->want[s][x] & 1)
						set_state(nxt, e->go[s][x]);
			}
	}
}

/*
 * The backward pass: e->b[i][s] = the most rings from position i on, in
 * state s, for the states of e->need[i] (needed() first; the others are
 * left unset).
 */
static void backward(struct ext *e)
{
	size_t words = (size_t)e->words;
	int16_t *nx = e->b + (size_t)e->n * e->ns;

	memset(nx, 0, (size_t)e->ns * sizeof(int16_t));
	for (int i = e->n - 1; i >= 0; i--) {
		unsigned a = ranks_at(e, i);
		int16_t *cur = e->b + (size_t)i * e->ns;
		const uint64_t *set = e->need + (size_t)i * words;

		nx = cur + e->ns;
		for (size_t wd = 0; wd < words; wd++)
			for (uint64_t bits = set[wd]; bits; bits &= bits - 1) {
				int s = (int)(wd * 64) + __builtin_ctzll(bits);
				int v = nx[e->sh0[s]];

				if (a & 1 && nx[e->sh0[s] | 1] > v)
					v = nx[e->sh0[s] | 1];
				for (int x = 0; x < e->lo[s][e->m]; x++) {
					int v2;

					if (!(a >> e->want[s][x] & 1))
						continue;
					v2 = nx[e->go[s][x]] + (e->want[s][x] == e->m - 1);
					v = v2 > v ? v2 : v;
				}
				cur[s] = (int16_t)v;
			}
	}
}

/* e->gain[t * m + r]: the estimate above for every pair not open, from F and B. */
static void estimate(struct ext *e, int count)
{
	int best[8];

	memset(e->gain, 0, (size_t)e->tors * e->m * sizeof(int));
	for (int i = 0; i < e->n; i++) {
		int pos = line_pos(e, i), t = pos % e->tors;
		const int16_t *f = e->f + (size_t)i * e->ns, *nx = e->b + (size_t)(i + 1) * e->ns;

		if (!e->ok[pos] || e->lab[t] == (1u << e->m) - 1)
			continue;
		for (int r = 0; r < e->m; r++)
			best[r] = count;
		for (uint64_t wd = 0, bits; wd < (uint64_t)e->words; wd++)
			for (bits = e->need[(size_t)i * e->words + wd]; bits; bits &= bits - 1) {
				int s = (int)(wd * 64) + __builtin_ctzll(bits), v = f[s];

				if (v < 0)
					continue;
				if (v + nx[e->sh0[s] | 1] > best[0])
					best[0] = v + nx[e->sh0[s] | 1];
				for (int x = 0; x < e->lo[s][e->m]; x++) {
					int r = e->want[s][x],
					    v2 = v + nx[e->go[s][x]] + (r == e->m - 1);

					best[r] = v2 > best[r] ? v2 : best[r];
				}
			}
		for (int r = 0; r < e->m; r++)
			if (!(e->lab[t] >> r & 1))
				e->gain[t * e->m + r] += best[r] - count;
	}
}

/* The candidates with a positive estimate, best first, in e->cand; how many. */
static int candidates(struct ext *e)
{
	int n = 0;

	for (int q = 0; q < e->tors * e->m; q++)
		if (e->gain[q] > 0)
			e->cand[n++] = q;
	/* Insertion sort: a few dozen candidates, stable (lower ToR first on a tie). */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && e->gain[e->cand[j - 1]] < e->gain[e->cand[j]]; j--) {
			int x = e->cand[j];

			e->cand[j] = e->cand[j - 1];
			e->cand[j - 1] = x;
		}
	return n;
}

/*
 * Opens pairs until need rings fit, `pairs` reaches max_pairs or
 * EXT_ROUNDS estimates are spent; the count reached.
 */
static int open_pairs(struct ext *e, int64_t need, int pairs, int max_pairs)
{
	int count = count_pass(e, true), rounds = 0;

	while (count < need && pairs < max_pairs && rounds++ < EXT_ROUNDS) {
		int n_cand, misses = 0;
		bool grew = false;

		needed(e);
		backward(e);
		estimate(e, count);
		n_cand = candidates(e);
		for (int j = 0; j < n_cand && misses < EXT_TRIES; j++) {
			int t = e->cand[j] / e->m, r = e->cand[j] % e->m, more;

			e->lab[t] |= (uint8_t)(1u << r);
			more = count_pass(e, false);
			if (more <= count) {
				e->lab[t] &= (uint8_t) ~(1u << r);
				misses++;
				continue;
			}
			count = more;
			pairs++;
			grew = true;
			misses = 0;
			if (count >= need || pairs >= max_pairs)
				break;
		}
		if (!grew)
			break;
		if (count < need && pairs < max_pairs)
			count = count_pass(e, true);
	}
	return count;
}

/* Writes the rings of the traced forward pass to c->rings as node ids (line order, reversed). */
static void rings_out(struct ext *e, struct hbd_cut *c, int last, int *link)
{
	int s = last, n_ends = 0, *ends = e->cand; /* the candidates are no longer needed */

	c->n_rings = 0;
	for (int i = e->n - 1; i >= 0; i--) {
		uint16_t x = e->from[(size_t)i * e->ns + s];
		int prev = x & 0xff, act = x >> 8;

		link[i] = -1;
		if (act > EXT_START) {
			int d = act - EXT_START;

			link[i] = i - d;
			if (slot(e, prev, d) == e->m - 1 && n_ends < e->n_cand)
				ends[n_ends++] = i;
		}
		s = prev;
	}
	for (int j = 0; j < n_ends; j++) {
		int *ring = c->rings + (size_t)c->n_rings * e->m;

		for (int q = e->m - 1, i = ends[j]; q >= 0; q--, i = link[i])
			ring[q] = ocs_ring_node_at(c->d, line_pos(e, i));
		c->n_rings++;
	}
}

/* What a ring (node ids) costs: the traced pass's costs of its nodes and links. */
static int ring_cost(const struct ext *e, const int *ring)
{
	const struct ocs_ring_domain *d = e->c->d;
	int cost = 0;

	for (int q = 0; q < e->m; q++) {
		int tor = ocs_ring_node_tor(d, ring[q]);

		cost += !(e->home[tor] >> q & 1);
		if (q + 1 < e->m)
			cost += link_cost(e, tor, ocs_ring_node_tor(d, ring[q + 1]));
	}
	return cost;
}

/* Drops the costliest rings (the later on a tie) beyond the need. */
static void keep_cheapest(const struct ext *e, struct hbd_cut *c, int64_t need)
{
	while (c->n_rings > need) {
		int worst = 0, worst_cost = -1;

		for (int j = 0; j < c->n_rings; j++) {
			int cost = ring_cost(e, c->rings + (size_t)j * e->m);

			if (cost >= worst_cost) {
				worst = j;
				worst_cost = cost;
			}
		}
		memmove(c->rings + (size_t)worst * e->m, c->rings + (size_t)(worst + 1) * e->m,
			(size_t)(c->n_rings - worst - 1) * e->m * sizeof(int));
		c->n_rings--;
	}
}

/*
 * e->succ from the labelled rings (c->rings, labelled of them): for each
 * ToR the ToR its rings go on to, by majority vote (Boyer-Moore: the one
 * most of them go on to when more than half do); e->chain: the rank-0 ToR
 * whose sequence of successors reaches the ToR.
 */
static void sequences(struct ext *e, int labelled, int *votes)
{
	const struct ocs_ring_domain *d = e->c->d;
	const int *rings = e->c->rings;

	for (int t = 0; t < e->tors; t++) {
		e->succ[t] = -1;
		e->chain[t] = -1;
		votes[t] = 0;
	}
	for (size_t q = 0; q < (size_t)labelled * e->m; q++) {
		int t1, t2;

		if (q % e->m == (size_t)e->m - 1)
			continue;
		t1 = ocs_ring_node_tor(d, rings[q]);
		t2 = ocs_ring_node_tor(d, rings[q + 1]);
		if (votes[t1] == 0)
			e->succ[t1] = t2;
		votes[t1] += e->succ[t1] == t2 ? 1 : -1;
	}
	for (int t = 0; t < e->tors; t++) {
		if (!(e->home[t] & 1))
			continue;
		for (int r = 0, u = t; r < e->m && u >= 0 && e->chain[u] < 0; r++, u = e->succ[u])
			e->chain[u] = t;
	}
}

/* Bits a slot needs to hold 0 .. m - 1. */
static int slot_bits(int m)
{
	int b = 0;

	while ((1 << b) < m)
		b++;
	return b;
}

int hbd_ft_label_extend(struct hbd_cut *c, int64_t need, int max_pairs)
{
	const struct ocs_ring_domain *d = c->d;
	struct ext *e = NULL;
	int labelled = c->n_rings, pairs = 0, *link = NULL, rc = 0;
	uint8_t *home = NULL;
	size_t cells;

	if (c->m < 2 || c->m > 8 || d->k_hops < 1 || d->k_hops > EXT_MAX_K || labelled < 1 ||
	    need - labelled > EXT_MAX_SHORT || slot_bits(c->m) * d->k_hops > EXT_MAX_BITS)
		return 0;
	cells = ((size_t)c->n + 1) << (slot_bits(c->m) * d->k_hops);
	if (cells > EXT_MAX_CELLS)
		return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (struct ext){.c = c, .k = d->k_hops, .m = c->m, .tors = d->tors, .n = c->n};
	e->bits = slot_bits(e->m);
	e->ns = 1 << (e->bits * e->k);
	e->start = d->closed ? c->label_first : 0;
	e->n_cand = e->tors * e->m > e->n / e->m + 1 ? e->tors * e->m : e->n / e->m + 1;
	e->ok = malloc((size_t)e->n);
	e->lab = calloc((size_t)e->tors, 1);
	home = malloc((size_t)e->tors);
	e->succ = malloc((size_t)e->tors * 3 * sizeof(int));
	e->words = (e->ns + 63) / 64;
	e->need = malloc(((size_t)e->n + 1) * e->words * sizeof(uint64_t));
	e->f = malloc(cells * sizeof(int16_t));
	e->b = malloc(cells * sizeof(int16_t));
	e->from = malloc(cells * sizeof(uint16_t));
	e->gain = malloc((size_t)e->tors * e->m * sizeof(int));
	e->cand = malloc((size_t)e->n_cand * sizeof(int));
	link = malloc((size_t)e->n * sizeof(int));
	if (!e->ok || !e->lab || !home || !e->succ || !e->need || !e->f || !e->b || !e->from ||
	    !e->gain || !e->cand || !link) {
		rc = -ENOMEM;
		goto done;
	}
	make_tables(e);
	/* The labelling's pairs are open; its rings' nodes are usable again. */
	memcpy(e->ok, c->free, (size_t)e->n);
	for (size_t q = 0; q < (size_t)labelled * e->m; q++) {
		int tor = ocs_ring_node_tor(d, c->rings[q]);

		e->ok[ocs_ring_position(d, c->rings[q])] = 1;
		if (!(e->lab[tor] >> (q % e->m) & 1)) {
			e->lab[tor] |= (uint8_t)(1u << (q % e->m));
			pairs++;
		}
	}
	memcpy(home, e->lab, (size_t)e->tors);
	e->home = home;
	e->chain = e->succ + e->tors;
	sequences(e, labelled, e->succ + 2 * e->tors);
	if (open_pairs(e, need, pairs, max_pairs) < need)
		goto done;
	rings_out(e, c, trace_pass(e), link);
	keep_cheapest(e, c, need);
	memcpy(c->free, e->ok, (size_t)e->n);
	for (size_t q = 0; q < (size_t)c->n_rings * e->m; q++)
		c->free[ocs_ring_position(d, c->rings[q])] = 0;
	rc = 1;
done:
	free(e->ok);
	free(e->lab);
	free(home);
	free(e->succ);
	free(e->need);
	free(e->f);
	free(e->b);
	free(e->from);
	free(e->gain);
	free(e->cand);
	free(e);
	free(link);
	return rc;
}
