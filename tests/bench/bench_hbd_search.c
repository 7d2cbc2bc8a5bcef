/*
 * bench_hbd_search.c - how far the fat-tree planner's cross-ToR share is
 * from plans a long search finds (issue 28 #4), label bench, not in the
 * default run. The planner has 1 ms at 8,192 GPUs; the search here takes
 * seconds to minutes a plan, so it measures what the time limit costs and
 * where the targets sit, not a placement anyone would wait for.
 *
 * On the fault sets of `bench_hbd share` (the same draws), for a shape and
 * a job scale, each set: the floor (bench_share_floor), the planner's
 * crossings and the search's. A plan whose rank i visits D_i ToRs has at
 * least sum (D_i - 1) = pairs - m crossings in any order (pairs: distinct
 * (ToR, rank) pairs its nodes take), so the search first looks for a small
 * set of open pairs that holds the job's rings, then for one whose rings
 * chain into few crossings:
 *
 *   count    the most rings a set of open pairs holds on the line cut open
 *            at position 0 (a ring found there is valid on the closed line
 *            too): a dynamic programme over the positions whose state
 *            holds, for each of the last K positions, the rank the
 *            unfinished ring ending there needs next (0: none); rings may
 *            interleave.
 *   repair   while the job does not fit, open the pair that lets the most
 *            rings fit (every closed pair counted).
 *   prune    close every open pair, in random order, that the job can do
 *            without.
 *   start    the best of the aligned labelling (ToR t serves rank t mod m)
 *            and the 2m shifts of the side-by-side one (t / 2 mod m), each
 *            repaired and pruned.
 *   iterate  `iters` times: from the current set, close 1 to 3 random
 *            pairs or give 1 to 3 random ToRs a single random rank, repair,
 *            prune; keep it when it has no more pairs than the current set
 *            (or, 3 times in 100, anyway), and go back to the best when the
 *            current one is 4 pairs worse.
 *   chain    `chain_iters` more from the set with the fewest pairs, judged
 *            by the crossings of its rings instead: the rings traced back
 *            from the count (then, 3 more times, the cut whose links most
 *            follow those the last rings took), grouped by ToR sequence,
 *            the groups chained by nearest neighbour, 2-opt and or-opt
 *            (srch_order; stronger and slower than hbd_ft_order).
 *
 * Columns: floor and allow (the most crossings 1.25 x or 1.5 x the floor
 * allows, at 85% and 90% scale), planner (the fat-tree planner), pairs and
 * pairs-m (the fewest pairs found and the crossings they allow at best),
 * first_it (the first iteration whose pairs allowed `allow`, -1 none),
 * pairs' (the pairs of the best-chained set), ordered (its rings in
 * hbd_ft_order's order), chained (in srch_order's), seconds (the search).
 * Issue 28 #4's targets are on medians: the median share at most 1.25 x
 * the median floor at 85% scale and 1.5 x at 90%. Deterministic: the same
 * arguments print the same figures but the seconds.
 *
 * Usage: bench_hbd_search [shape] [scale] [sets] [iters] [chain_iters]
 * shape 64x16, 16x64 or both (default), scale in percent (90), sets from
 * the first of bench_hbd's draws (10), iters (1500), chain_iters (300).
 * Exits 1 when the planner places nothing or a traced ring is invalid,
 * 2 on bad arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_hbd_draw.h"
#include "hbd_fattree.h"

#define SRCH_MAX_STATES 4096
#define SRCH_MAX_K	12	  /* K slots of at least one bit in 4096 states */
#define SRCH_RING	(1 << 12) /* a ring's value; a link off s->succ costs 1 */
#define SRCH_NONE	INT32_MIN /* a state not reached */
#define SRCH_ROUNDS	4	  /* cuts tried for the rings of the best set */

/* The search's working state for one fault set. */
struct srch {
	const struct ocs_ring_domain *d;
	int n, m, k, bits, ns, need;
	uint8_t *ok;		       /* by position: a free node */
	int32_t *a, *b;		       /* ns: values at the current and next position */
	uint16_t *from;		       /* n x ns: the state before each position | action << 12 */
	const int *succ;	       /* by (ToR, rank): the ToR a link should go to; NULL: any */
	uint8_t *act;		       /* srch_rings(): n, the action at each position */
	int *fill;		       /* srch_rings(): n, the nodes each started ring has */
	int slot_ring[SRCH_MAX_K + 1]; /* srch_rings(): the ring ending d back */
	uint64_t rng;
};

static int srch_slot(const struct srch *s, int st, int dd)
{
	return (st >> (s->bits * (dd - 1))) & ((1 << s->bits) - 1);
}

/* st with slot dd cleared (dd > 0), moved one on: slot 0 empty, slot K-1 dropped. */
static int srch_shift(const struct srch *s, int st, int dd)
{
	if (dd > 0)
		st &= ~(((1 << s->bits) - 1) << (s->bits * (dd - 1)));
	return (st << s->bits) & (s->ns - 1);
}

static void srch_relax(const struct srch *s, int i, int to, int v, int st, int act, bool trace)
{
	if (s->b[to] >= v)
		return;
	s->b[to] = v;
	if (trace)
		s->from[(size_t)i * s->ns + to] = (uint16_t)(st | act << 12);
}

/*
 * The most rings the open pairs lab (a bit per rank, by ToR) hold; with
 * trace, s->from records how, and *last gets the final state. With
 * s->succ, among the cuts with the most rings the one with the fewest
 * links off it.
 */
static int srch_count(struct srch *s, const uint8_t *lab, bool trace, int *last)
{
	int best = 0, best_st = 0;

	for (int st = 0; st < s->ns; st++)
		s->a[st] = SRCH_NONE;
	s->a[0] = 0;
	for (int i = 0; i < s->n; i++) {
		int tor = i % s->d->tors, ranks = s->ok[i] ? lab[tor] : 0;
		int32_t *x;

		for (int st = 0; st < s->ns; st++)
			s->b[st] = SRCH_NONE;
		for (int st = 0; st < s->ns; st++) {
			int v = s->a[st], sh;

			if (v == SRCH_NONE)
				continue;
			sh = srch_shift(s, st, 0);
			srch_relax(s, i, sh, v, st, 0, trace);
			if (!ranks)
				continue;
			if (ranks & 1)
				srch_relax(s, i, sh | 1, v, st, 1, trace);
			for (int dd = 1; dd <= s->k; dd++) {
				int r = srch_slot(s, st, dd), w = v, prev;

				if (r == 0 || !(ranks >> r & 1))
					continue;
				prev = (i - dd + s->n) % s->d->tors;
				if (s->succ && s->succ[prev * s->m + r - 1] != tor)
					w--;
				if (r == s->m - 1)
					srch_relax(s, i, srch_shift(s, st, dd), w + SRCH_RING, st,
						   1 + dd, trace);
				else
					srch_relax(s, i, srch_shift(s, st, dd) | (r + 1), w, st,
						   1 + dd, trace);
			}
		}
		x = s->a;
		s->a = s->b;
		s->b = x;
	}
	for (int st = 0; st < s->ns; st++)
		if (s->a[st] > s->a[best_st]) /* state 0 is always reached */
			best_st = st;
	best = s->a[best_st];
	if (last)
		*last = best_st;
	return (best + SRCH_RING - 1) / SRCH_RING;
}

static int srch_pairs(const struct srch *s, const uint8_t *lab)
{
	int c = 0;

	for (int t = 0; t < s->d->tors; t++)
		c += __builtin_popcount(lab[t]);
	return c;
}

/* Opens the pair that fits the most rings (ties at random) until the job fits. */
static void srch_repair(struct srch *s, uint8_t *lab)
{
	int have = srch_count(s, lab, false, NULL);

	while (have < s->need) {
		int bt = -1, br = -1, bc = -1, ties = 0;

		for (int t = 0; t < s->d->tors; t++)
			for (int r = 0; r < s->m; r++) {
				int c;

				if (lab[t] >> r & 1)
					continue;
				lab[t] |= (uint8_t)(1 << r);
				c = srch_count(s, lab, false, NULL);
				lab[t] &= (uint8_t) ~(1 << r);
				if (c > bc) {
					bc = c;
					bt = t;
					br = r;
					ties = 1;
				} else if (c == bc && bench_rnd(&s->rng) % (uint64_t)++ties == 0) {
					bt = t;
					br = r;
				}
			}
		lab[bt] |= (uint8_t)(1 << br);
		have = bc;
	}
}

/* Closes every open pair, in random order, that the job can do without. */
static void srch_prune(struct srch *s, uint8_t *lab, int *order)
{
	int all = s->d->tors * s->m;

	for (int i = 0; i < all; i++)
		order[i] = i;
	for (int i = all - 1; i > 0; i--) {
		int j = (int)(bench_rnd(&s->rng) % (uint64_t)(i + 1)), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (int i = 0; i < all; i++) {
		int t = order[i] / s->m, r = order[i] % s->m;

		if (!(lab[t] >> r & 1))
			continue;
		lab[t] &= (uint8_t) ~(1 << r);
		if (srch_count(s, lab, false, NULL) < s->need)
			lab[t] |= (uint8_t)(1 << r);
	}
}

/*
 * The rings lab holds, traced back (complete rings only, node ids, m
 * apiece, into rings): how many.
 */
static int srch_rings(struct srch *s, const uint8_t *lab, int *rings)
{
	uint8_t *act = s->act;
	int *slot_ring = s->slot_ring, *fill = s->fill;
	int st, n_open = 0, done = 0;

	srch_count(s, lab, true, &st);
	for (int i = s->n - 1; i >= 0; i--) {
		uint16_t f = s->from[(size_t)i * s->ns + st];

		act[i] = (uint8_t)(f >> 12);
		st = f & 0xfff;
	}
	/* Forward again: slot_ring[d] is the unfinished ring ending d positions back. */
	for (int dd = 0; dd <= s->k; dd++)
		slot_ring[dd] = -1;
	for (int i = 0; i < s->n; i++) {
		int ring = -1;

		if (act[i] == 1) {
			ring = n_open++;
			fill[ring] = 0;
		} else if (act[i] > 1) {
			ring = slot_ring[act[i] - 1];
			slot_ring[act[i] - 1] = -1;
		}
		memmove(slot_ring + 2, slot_ring + 1, (size_t)(s->k - 1) * sizeof(int));
		slot_ring[1] = -1;
		if (ring < 0)
			continue;
		/* Rings are numbered as they start; a ring's nodes go to its row. */
		rings[(size_t)ring * s->m + fill[ring]] = ocs_ring_node_at(s->d, i);
		if (++fill[ring] == s->m)
			done++;
		else
			slot_ring[1] = ring;
	}
	/* Keep the complete ones, in order. */
	for (int r = 0, w = 0; r < n_open; r++)
		if (fill[r] == s->m)
			memmove(rings + (size_t)w++ * s->m, rings + (size_t)r * s->m,
				(size_t)s->m * sizeof(int));
	return done;
}

/* Hamming distance of groups a and b's ToR sequences. */
static int srch_ham(const int *seq, int m, int a, int b)
{
	int h = 0;

	for (int i = 0; i < m; i++)
		h += seq[a * m + i] != seq[b * m + i];
	return h;
}

static int srch_path_len(const int *seq, int m, const int *path, int g)
{
	int len = 0;

	for (int i = 0; i + 1 < g; i++)
		len += srch_ham(seq, m, path[i], path[i + 1]);
	return len;
}

/*
 * The fewest crossings this bench finds for `need` of the rings: rings of one
 * ToR sequence (a group) go together (no crossing among them), excess rings
 * leave the smallest groups first, and the groups are chained by a nearest
 * neighbour path from every start, improved by 2-opt and moves of 1 to 3
 * groups until neither helps. Slower and stronger than hbd_ft_order.
 */
static int srch_order(const struct srch *s, const int *rings, int n_rings)
{
	int m = s->m, g = 0, drop = n_rings - s->need, best = -1;
	int *seq = malloc((size_t)n_rings * m * sizeof(int)),
	    *cnt = calloc((size_t)n_rings, sizeof(int));
	int *path = malloc((size_t)n_rings * sizeof(int)),
	    *bp = malloc((size_t)n_rings * sizeof(int));
	uint8_t *used = malloc((size_t)n_rings);

	for (int r = 0; r < n_rings; r++) {
		int x = 0;

		for (int i = 0; i < m; i++)
			seq[g * m + i] = ocs_ring_node_tor(s->d, rings[(size_t)r * m + i]);
		while (x < g && srch_ham(seq, m, x, g) != 0)
			x++;
		cnt[x]++;
		if (x == g)
			g++;
	}
	while (drop > 0) {
		int small = -1;

		for (int x = 0; x < g; x++)
			if (cnt[x] > 0 && (small < 0 || cnt[x] < cnt[small]))
				small = x;
		cnt[small]--;
		drop--;
	}
	for (int x = 0, w = 0, all = g; x < all; x++)
		if (cnt[x] > 0) {
			memmove(seq + w * m, seq + x * m, (size_t)m * sizeof(int));
			cnt[w++] = cnt[x];
			g = w;
		}
	for (int start = 0; start < g; start++) {
		int len;

		memset(used, 0, (size_t)g);
		path[0] = start;
		used[start] = 1;
		for (int i = 1; i < g; i++) {
			int nb = -1;

			for (int x = 0; x < g; x++)
				if (!used[x] &&
				    (nb < 0 || srch_ham(seq, m, path[i - 1], x) <
						       srch_ham(seq, m, path[i - 1], nb)))
					nb = x;
			path[i] = nb;
			used[nb] = 1;
		}
		for (bool better = true; better;) {
			better = false;
			/* 2-opt: reverse path[i..j]. */
			for (int i = 0; i < g; i++)
				for (int j = i + 1; j < g; j++) {
					int before =
						(i > 0 ? srch_ham(seq, m, path[i - 1], path[i])
						       : 0) +
						(j + 1 < g ? srch_ham(seq, m, path[j], path[j + 1])
							   : 0);
					int after =
						(i > 0 ? srch_ham(seq, m, path[i - 1], path[j])
						       : 0) +
						(j + 1 < g ? srch_ham(seq, m, path[i], path[j + 1])
							   : 0);

					if (after < before) {
						for (int a = i, b = j; a < b; a++, b--) {
							int t = path[a];

							path[a] = path[b];
							path[b] = t;
						}
						better = true;
					}
				}
			/*
			 * Or-opt: move path[i..i+l-1] before bp[j] of the path without it
			 * (bp; j = g - l: to the end), when the path gets shorter.
			 */
			for (int l = 1; l <= 3 && l < g; l++)
				for (int i = 0; i + l <= g; i++) {
					int first = path[i], last = path[i + l - 1], out = 0;

					if (i > 0)
						out += srch_ham(seq, m, path[i - 1], first);
					if (i + l < g)
						out += srch_ham(seq, m, last, path[i + l]);
					if (i > 0 && i + l < g)
						out -= srch_ham(seq, m, path[i - 1], path[i + l]);
					memcpy(bp, path, (size_t)i * sizeof(int));
					memcpy(bp + i, path + i + l,
					       (size_t)(g - i - l) * sizeof(int));
					for (int j = 0; j <= g - l; j++) {
						int in = 0;

						if (j == i)
							continue;
						if (j > 0)
							in += srch_ham(seq, m, bp[j - 1], first);
						if (j < g - l)
							in += srch_ham(seq, m, last, bp[j]);
						if (j > 0 && j < g - l)
							in -= srch_ham(seq, m, bp[j - 1], bp[j]);
						if (in >= out)
							continue;
						memmove(bp + j + l, bp + j,
							(size_t)(g - l - j) * sizeof(int));
						memcpy(bp + j, path + i, (size_t)l * sizeof(int));
						memcpy(path, bp, (size_t)g * sizeof(int));
						better = true;
						break;
					}
				}
		}
		len = srch_path_len(seq, m, path, g);
		if (best < 0 || len < best)
			best = len;
		if (g > 64 && start + 1 >= 8)
			break; /* large chains: eight starts */
	}
	free(seq);
	free(cnt);
	free(path);
	free(bp);
	free(used);
	return best;
}

/* succ[(t, r)] = the ToR the rings' links from ToR t at rank r go to most (-1: none). */
static void srch_successors(const struct srch *s, const int *rings, int n_rings, int *succ,
			    int *tally)
{
	int tors = s->d->tors;

	memset(tally, 0, (size_t)tors * s->m * tors * sizeof(int));
	for (int r = 0; r < n_rings; r++)
		for (int i = 0; i + 1 < s->m; i++) {
			int a = ocs_ring_node_tor(s->d, rings[(size_t)r * s->m + i]);
			int b = ocs_ring_node_tor(s->d, rings[(size_t)r * s->m + i + 1]);

			tally[((size_t)a * s->m + i) * tors + b]++;
		}
	for (int x = 0; x < tors * s->m; x++) {
		succ[x] = -1;
		for (int b = 0, most = 0; b < tors; b++)
			if (tally[(size_t)x * tors + b] > most) {
				most = tally[(size_t)x * tors + b];
				succ[x] = b;
			}
	}
}

struct srch_result {
	int pairs, pairs_chained; /* the fewest pairs; the pairs of the best-chained set */
	int crossings, chained;	  /* hbd_ft_order's and srch_order()'s, best-chained set */
	long first_iter; /* the first iteration whose pairs allow `allow` crossings, -1 none */
	double seconds;
};

/* Scratch of srch_chain(). */
struct srch_buf {
	int *rings, *out, *succ, *tally;
	uint8_t *seen; /* by position: taken by a ring */
	size_t n_seen; /* its size */
};

/*
 * The crossings of lab's rings: round 0 takes any cut with the most rings,
 * each next round the cut with the fewest links off those the last
 * round's rings took most from each (ToR, rank); the round that chains
 * best (srch_order) counts. *ft gets hbd_ft_order's crossings for it.
 * -EINVAL when a traced ring is invalid, on a faulty node or on a node
 * another ring has, or when there are too few.
 */
static int srch_chain(struct srch *s, const uint8_t *lab, struct srch_buf *w, int *ft)
{
	int best = -1;

	for (int round = 0; round < SRCH_ROUNDS; round++) {
		int n_rings = srch_rings(s, lab, w->rings), chained;

		memset(w->seen, 0, w->n_seen);
		for (int r = 0; r < n_rings && n_rings >= 0; r++) {
			const int *ring = w->rings + (size_t)r * s->m;

			if (!hbd_ring_valid(s->d, ring, s->m))
				n_rings = -1;
			for (int i = 0; i < s->m && n_rings >= 0; i++) {
				int pos = ocs_ring_position(s->d, ring[i]);

				if (!s->ok[pos] || w->seen[pos]++)
					n_rings = -1; /* a faulty node, or one used twice */
			}
		}
		if (n_rings < s->need) {
			best = -EINVAL;
			break;
		}
		chained = srch_order(s, w->rings, n_rings);
		if (best < 0 || chained < best) {
			struct hbd_cut c = {.d = s->d,
					    .n = s->n,
					    .m = s->m,
					    .rings = w->rings,
					    .n_rings = n_rings};

			best = chained;
			if (ft && hbd_ft_order(&c, s->need, w->out) == 0)
				*ft = (int)lround(hbd_cross_tor_share(s->d, w->out, s->need, s->m) *
						  (double)(s->need - 1) * s->m);
		}
		srch_successors(s, w->rings, n_rings, w->succ, w->tally);
		s->succ = w->succ;
	}
	s->succ = NULL;
	return best;
}

/* Closes 1 to 3 random pairs of lab, or gives 1 to 3 random ToRs one random rank. */
static void srch_perturb(struct srch *s, uint8_t *lab)
{
	int kind = (int)(bench_rnd(&s->rng) % 2), k = 1 + (int)(bench_rnd(&s->rng) % 3);

	for (int q = 0; q < k; q++) {
		int t = (int)(bench_rnd(&s->rng) % (uint64_t)s->d->tors);
		int r = (int)(bench_rnd(&s->rng) % (uint64_t)s->m);

		if (kind == 0)
			lab[t] &= (uint8_t) ~(1 << r);
		else
			lab[t] = (uint8_t)(1 << r);
	}
}

/*
 * `iters` iterations from the set best (value *best_v): perturb the current
 * set, repair, prune, value it (its pairs, or with `chain` its crossings,
 * srch_chain()); keep it when no worse than the current set (or, 3 times
 * in 100, anyway), go back to the best when the current one is 4 worse.
 * res->first_iter: the first iteration whose pairs allow `allow`
 * crossings (pairs only). 0 or -EINVAL from srch_chain().
 */
static int srch_iterate(struct srch *s, long iters, bool chain, int allow, uint8_t *best,
			int *best_v, struct srch_buf *w, struct srch_result *res)
{
	int tors = s->d->tors, cur_v = *best_v, rc = 0;
	uint8_t *lab = malloc((size_t)tors), *cur = malloc((size_t)tors);
	int *order = malloc((size_t)tors * s->m * sizeof(int));

	memcpy(cur, best, (size_t)tors);
	for (long it = 1; it <= iters; it++) {
		int v;

		memcpy(lab, cur, (size_t)tors);
		srch_perturb(s, lab);
		srch_repair(s, lab);
		srch_prune(s, lab, order);
		v = chain ? srch_chain(s, lab, w, NULL) : srch_pairs(s, lab);
		if (v < 0) {
			rc = v;
			break;
		}
		if (v <= cur_v || bench_rnd(&s->rng) % 100 < 3) {
			memcpy(cur, lab, (size_t)tors);
			cur_v = v;
		}
		if (v < *best_v) {
			*best_v = v;
			memcpy(best, lab, (size_t)tors);
			if (!chain && res->first_iter < 0 && v - s->m <= allow)
				res->first_iter = it;
		}
		if (cur_v > *best_v + 3) {
			memcpy(cur, best, (size_t)tors);
			cur_v = *best_v;
		}
	}
	free(lab);
	free(cur);
	free(order);
	return rc;
}

/*
 * The search: the starts, `iters` iterations for few pairs, then
 * `chain_iters` for few chained crossings from the set with the fewest
 * pairs.
 */
static int srch_run(struct srch *s, int iters, int chain_iters, int allow, struct srch_result *res)
{
	int tors = s->d->tors, all = tors * s->m;
	uint8_t *lab = malloc((size_t)tors), *best = malloc((size_t)tors);
	int *order = malloc((size_t)all * sizeof(int));
	struct srch_buf w = {malloc((size_t)s->n * s->m * sizeof(int)),
			     malloc((size_t)s->n * sizeof(int)),
			     malloc((size_t)all * sizeof(int)),
			     malloc((size_t)all * tors * sizeof(int)),
			     malloc((size_t)s->n),
			     (size_t)s->n};
	int best_p = all + 1, best_c, rc;
	double t0 = bench_now_s();

	res->first_iter = -1;
	for (int start = 0; start <= 2 * s->m; start++) {
		for (int t = 0; t < tors; t++)
			lab[t] = (uint8_t)(1
					   << (start == 0 ? t % s->m : (t + start - 1) / 2 % s->m));
		srch_repair(s, lab);
		srch_prune(s, lab, order);
		if (srch_pairs(s, lab) < best_p) {
			best_p = srch_pairs(s, lab);
			memcpy(best, lab, (size_t)tors);
		}
	}
	if (best_p - s->m <= allow)
		res->first_iter = 0;
	srch_iterate(s, iters, false, allow, best, &best_p, &w, res);
	res->pairs = best_p;
	best_c = srch_chain(s, best, &w, NULL);
	rc = best_c < 0 ? best_c
			: srch_iterate(s, chain_iters, true, allow, best, &best_c, &w, res);
	if (rc == 0) {
		res->pairs_chained = srch_pairs(s, best);
		res->chained = srch_chain(s, best, &w, &res->crossings);
		rc = res->chained < 0 ? res->chained : 0;
	}
	res->seconds = bench_now_s() - t0;
	free(lab);
	free(best);
	free(order);
	free(w.rings);
	free(w.out);
	free(w.succ);
	free(w.tally);
	free(w.seen);
	return rc;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static double median_int(int *v, int n)
{
	qsort(v, (size_t)n, sizeof(int), cmp_int);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static int bench_shape(const struct ocs_ring_domain *d, int pct, int sets, int iters,
		       int chain_iters)
{
	int n = ocs_ring_nodes(d), tp = 32, m = tp / d->gpus_per_node, failed = 0;
	double target = pct == 85 ? 1.25 : pct == 90 ? 1.5 : 0;
	struct srch s = {.d = d, .n = n, .m = m, .k = d->k_hops};
	struct hbd_request req = {.orch = HBD_ORCH_FAT_TREE, .tp = tp};
	uint8_t *use = malloc((size_t)n);
	int *perm = malloc((size_t)n * sizeof(int));
	int *fl = malloc((size_t)sets * sizeof(int)), *pl = malloc((size_t)sets * sizeof(int));
	int *lo = malloc((size_t)sets * sizeof(int)), *cr = malloc((size_t)sets * sizeof(int));
	int *ch = malloc((size_t)sets * sizeof(int));
	uint64_t seed = 4242;
	int denom;

	while ((1 << s.bits) < m)
		s.bits++;
	s.ns = 1 << (s.bits * s.k);
	req.gpus = (int64_t)(pct / 100.0 * (double)ocs_ring_gpus(d)) / tp * tp;
	s.need = (int)(req.gpus / tp);
	denom = (s.need - 1) * m;
	if (s.ns > SRCH_MAX_STATES) {
		fprintf(stderr, "bench_hbd_search: %d states, more than %d\n", s.ns,
			SRCH_MAX_STATES);
		return 1;
	}
	s.ok = malloc((size_t)n);
	s.a = malloc((size_t)s.ns * sizeof(int32_t));
	s.b = malloc((size_t)s.ns * sizeof(int32_t));
	s.from = malloc((size_t)n * s.ns * sizeof(uint16_t));
	s.act = malloc((size_t)n);
	s.fill = malloc((size_t)n * sizeof(int));
	printf("== %d ToRs x %d nodes, %d%% scale (%d rings of %d), %d sets, %d iterations\n",
	       d->tors, d->nodes_per_tor, pct, s.need, m, sets, iters);
	printf("%-4s %-6s %-6s %-8s %-6s %-8s %-9s %-7s %-8s %-9s %s\n", "set", "floor", "allow",
	       "planner", "pairs", "pairs-m", "first_it", "pairs'", "ordered", "chained",
	       "seconds");
	for (int set = 0; set < sets; set++) {
		struct hbd_plan p;
		struct srch_result res;
		int floor_c, allow, rc;

		bench_draw_faults(use, perm, n, 0.05, &seed);
		req.seed = bench_rnd(&seed);
		if (hbd_plan(d, use, &req, &p, NULL) != 0) {
			fprintf(stderr, "bench_hbd_search: set %d: the planner placed nothing\n",
				set);
			failed = 1;
			continue;
		}
		floor_c = (int)lround(bench_share_floor(d, use, s.need, m) * denom);
		allow = (int)(target * floor_c + 1e-9);
		pl[set] = (int)lround(p.cross_tor_share * denom);
		hbd_plan_clear(&p);
		for (int node = 0; node < n; node++)
			s.ok[ocs_ring_position(d, node)] = use[node] == HBD_NODE_FREE;
		s.rng = 77 + (uint64_t)set;
		rc = srch_run(&s, iters, chain_iters, allow, &res);
		if (rc != 0) {
			fprintf(stderr, "bench_hbd_search: set %d: the search's rings: %s\n", set,
				strerror(-rc));
			failed = 1;
			continue;
		}
		fl[set] = floor_c;
		lo[set] = res.pairs - m;
		cr[set] = res.crossings;
		ch[set] = res.chained;
		printf("%-4d %-6d %-6d %-8d %-6d %-8d %-9ld %-7d %-8d %-9d %.1f\n", set, floor_c,
		       allow, pl[set], res.pairs, res.pairs - m, res.first_iter, res.pairs_chained,
		       res.crossings, res.chained, res.seconds);
		fflush(stdout);
	}
	if (!failed) {
		double f = median_int(fl, sets), a = median_int(pl, sets), l = median_int(lo, sets),
		       c = median_int(cr, sets), h = median_int(ch, sets);

		printf("medians (crossings, share): floor %.1f %.2f%%, planner %.1f %.2f%% (%.2f "
		       "x), "
		       "search: pairs-m %.1f %.2f%% (%.2f x), ordered %.1f %.2f%% (%.2f x), "
		       "chained %.1f %.2f%% (%.2f x); target %.2f x\n",
		       f, 100 * f / denom, a, 100 * a / denom, a / f, l, 100 * l / denom, l / f, c,
		       100 * c / denom, c / f, h, 100 * h / denom, h / f, target);
	}
	free(s.ok);
	free(s.a);
	free(s.b);
	free(s.from);
	free(s.act);
	free(s.fill);
	free(use);
	free(perm);
	free(fl);
	free(pl);
	free(lo);
	free(cr);
	free(ch);
	return failed;
}

int main(int argc, char **argv)
{
	static const struct ocs_ring_domain paper = {64, 16, 8, 3, 3, 8, true};
	static const struct ocs_ring_domain deep = {16, 64, 8, 3, 3, 4, true};
	const char *shape = argc > 1 ? argv[1] : "both";
	int pct = argc > 2 ? atoi(argv[2]) : 90, sets = argc > 3 ? atoi(argv[3]) : 10,
	    iters = argc > 4 ? atoi(argv[4]) : 1500, chain_iters = argc > 5 ? atoi(argv[5]) : 300,
	    failed = 0;

	if ((strcmp(shape, "both") && strcmp(shape, "64x16") && strcmp(shape, "16x64")) ||
	    pct < 1 || pct > 100 || sets < 1 || iters < 0 || chain_iters < 0) {
		fprintf(stderr, "usage: bench_hbd_search [64x16|16x64|both] [scale%%] [sets] "
				"[iters] [chain_iters]\n");
		return 2;
	}
	if (strcmp(shape, "16x64"))
		failed |= bench_shape(&paper, pct, sets, iters, chain_iters);
	if (strcmp(shape, "64x16"))
		failed |= bench_shape(&deep, pct, sets, iters, chain_iters);
	return failed;
}
