/*
 * bench_hbd_draw.h - what the TP-ring benchmarks (bench_hbd.c,
 * bench_hbd_search.c) share, so that they see the same fault sets and the
 * same floor: the generator, the fault draw and the capacity floor under
 * the cross-ToR share.
 */
#ifndef OCSD_BENCH_HBD_DRAW_H
#define OCSD_BENCH_HBD_DRAW_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hbd_ring.h"

static inline uint64_t bench_rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Exactly round(ratio * n) faulty nodes, uniformly at random; the rest free. */
static inline void bench_draw_faults(uint8_t *use, int *perm, int n, double ratio, uint64_t *s)
{
	int faults = (int)lround(ratio * n);

	for (int i = 0; i < n; i++) {
		perm[i] = i;
		use[i] = HBD_NODE_FREE;
	}
	for (int i = 0; i < faults; i++) {
		int j = i + (int)(bench_rnd(s) % (uint64_t)(n - i)), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
		use[perm[i]] = HBD_NODE_FAULTY;
	}
}

static inline int bench_cmp_int_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x < y) - (x > y);
}

/*
 * A floor under the cross-ToR share of any plan of `rings` rings of m nodes
 * on the free nodes of use, from ToR capacities alone (no placement rule):
 * rank i of the rings visits D_i distinct ToRs, so consecutive rings change
 * ToR at rank i at least D_i - 1 times. A ToR with h free nodes holds rank i
 * of at most h rings, so D_i >= the fewest ToRs (fullest first) that hold
 * `rings` nodes; and sum D_i >= the fewest ToRs that hold all rings * m
 * nodes (a ToR counts once per rank it serves).
 */
static inline double bench_share_floor(const struct ocs_ring_domain *d, const uint8_t *use,
				       int rings, int m)
{
	int *free_per_tor = calloc((size_t)d->tors, sizeof(int));
	int per_rank = 0, all = 0;
	int64_t held = 0, sum_d;

	if (rings < 2)
		return 0.0;
	for (int node = 0; node < ocs_ring_nodes(d); node++)
		free_per_tor[ocs_ring_node_tor(d, node)] += use[node] == HBD_NODE_FREE;
	qsort(free_per_tor, (size_t)d->tors, sizeof(int), bench_cmp_int_desc);
	for (int t = 0; t < d->tors && held < (int64_t)rings * m; t++) {
		held += free_per_tor[t];
		all++;
		if (per_rank == 0 && held >= rings)
			per_rank = all;
	}
	free(free_per_tor);
	sum_d = (int64_t)m * per_rank > all ? (int64_t)m * per_rank : all;
	return (double)(sum_d - m) / ((double)(rings - 1) * m);
}

#endif
