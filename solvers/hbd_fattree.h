/*
 * hbd_fattree.h - internal to the TP-ring planner (hbd_ring.c, hbd_fattree.c,
 * hbd_label.c and hbd_extend.c, not part of the solver API): the working
 * memory of a cut and the fat-tree pieces hbd_ring.c calls, i.e. the
 * ordering of a job's rings, the rank-aligned cut, the block labelling and
 * its extension, the block re-cut and the constraint count of a plan. Calls
 * go one way, hbd_ring.c -> the others (and the property test, which checks
 * the block re-cut, the labelling and its extension on their own). Pure,
 * like hbd_ring.h.
 */
#ifndef OCS_HBD_FATTREE_H
#define OCS_HBD_FATTREE_H

#include <stdint.h>

#include "fabric.h"

/*
 * Working memory of one hbd_plan() call, allocated once and owned by it: free[pos] says
 * whether position pos may be used, pos_list holds the free positions of
 * the range being cut, rings receives the cut rings (node ids, m apiece).
 */
struct hbd_cut {
	const struct ocs_ring_domain *d;
	int n, m;
	uint8_t *free;
	int *pos_list;
	int *rings;
	int n_rings;
	uint64_t *prng;	 /* greedy: random offsets inside components; NULL otherwise */
	int skip_budget; /* fat-tree: free nodes the cut may still leave out to open windows */
	int label_first; /* block labelling: a position no labelled ring crosses */
	int label_w;	 /* block labelling: the most rings a block's pattern holds */
};

/*
 * Chooses `need` of the c->n_rings rings of c, those of the largest groups
 * of rings with the same ToR sequence first, and writes them to out (need *
 * m node ids, caller's) as a chain of groups along short Hamming steps (in
 * plain ToR order when m * tors is above 2^24). 0 or -ENOMEM.
 */
int hbd_ft_order(const struct hbd_cut *c, int need, int *out);

/*
 * The rank-aligned cut of the free positions c->free (overwrites c->rings):
 * writes need rings, ordered by hbd_ft_order(), to out and returns 1; 0 when
 * the open line holds fewer than need rings or the domain is too large for
 * its tables (nodes * m above 2^24); -ENOMEM.
 */
int hbd_ft_aligned_cut(struct hbd_cut *c, int64_t need, int *out);

/*
 * The same cut as a fill: need rings on the free positions c->free, priced
 * by the (ToR, rank) pairs rings placed before it use (placed[tor * m +
 * rank]: their nodes there) instead of the aligned pairs, so the rings it
 * adds open as few new pairs as it can. Leaves them in c->rings (n_rings,
 * line order, unordered) and returns 1; 0 when they do not fit; -ENOMEM.
 */
int hbd_ft_aligned_fill(struct hbd_cut *c, int64_t need, const int *placed);

/*
 * The block re-cut: rings (n_rings of c->m node ids, disjoint spans on the
 * open line, c->free the free positions) re-cut block by block where an
 * exact re-cut of a block uses fewer distinct (ToR, rank) pairs; the same
 * ring count, every ring still on free nodes within K hops. 1 when some
 * ring changed, 0 when none did or the spans overlap (rings left as they
 * are), -ENOMEM.
 */
int hbd_ft_polish(const struct hbd_cut *c, int *rings, int n_rings);

/*
 * The block labelling (hbd_label.c): every ToR serves one rank, in blocks of
 * patterns of at most max_w rings each tiling the ToR circle, the tiling
 * with the most rings. Writes its rings to c->rings (c->n_rings, node ids,
 * in tiling order), takes their positions out of c->free, sets
 * c->label_first (a block's first position) and c->label_w (the most
 * rings a chosen pattern holds); returns how many rings the tiling counted
 * (c->n_rings is that many), 0 where no pattern fits (K above 6, fewer
 * ToRs than a pattern's length), -ENOMEM.
 */
int hbd_ft_label_cut(struct hbd_cut *c, int max_w);

/*
 * The block labelling extended (hbd_extend.c): c holds the labelling's
 * rings (c->n_rings, node ids, as hbd_ft_label_cut() left them) and its
 * free set; opens (ToR, rank) pairs beyond the labelling's, at most
 * max_pairs in all, each one that lets more rings fit, until need fit.
 * Then writes every ring the open pairs hold to c->rings (c->n_rings >=
 * need, node ids), takes their nodes out of c->free and returns 1; 0 (c
 * untouched) when max_pairs are not enough or the line is too large for
 * its tables; -ENOMEM.
 */
int hbd_ft_label_extend(struct hbd_cut *c, int64_t need, int max_pairs);

/*
 * *kept = the constraints of Algs. 4-5 that rings (n_rings of m nodes)
 * honour: segments no ring crosses plus aggregation domains whose rings all
 * sit in one segment on a ToR window. 0 or -ENOMEM.
 */
int hbd_ft_constraints_honoured(const struct ocs_ring_domain *d, const int *rings, int n_rings,
				int m, int *kept);

#endif
