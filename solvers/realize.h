/*
 * realize.h - realization: a logical topology (circuits between pods in
 * each OCS group) -> cross-connects on every OCS device, for the three
 * wirings of fabric.h, honouring L2 symmetry (ALGORITHMS.md section 2).
 *
 *   cross, dual  the group's circuits are oriented along Euler trails and
 *                split into k_spine/2 matchings (bipartite edge colouring);
 *                matching m fills device pair (2m, 2m+1) (cross) or device m
 *                (dual). Always complete when no port is pinned.
 *   straight     each device holds a symmetric matching of pods: every
 *                matching above is a set of paths and cycles, alternated
 *                over devices 2m and 2m+1; the edge an odd cycle leaves
 *                over is placed by Kempe-chain recolouring across devices;
 *                what still does not fit is reported as unrealized.
 *
 * Pinned cross-connects (running jobs) keep their ports: new circuits use
 * only spine ports neither end of which is touched by a pinned one.
 * Preferred cross-connects (a global re-plan) are reused where the new
 * topology asks for the same circuit on the same ports.
 *
 * Pure function, no globals: thread-safe. Caller frees with rz_result_free().
 */
#ifndef OCS_REALIZE_H
#define OCS_REALIZE_H

#include <stddef.h>

#include "fabric.h"

/* Circuits between pods i < j through OCS group h (one per spine port pair). */
struct rz_circuits {
	int i, j, h;
	int circuits;
};

struct rz_result {
	struct ocs_xc *xcs; /* the new cross-connects (pinned ones not repeated) */
	size_t n_xcs;
	struct rz_circuits *unrealized; /* circuits that found no ports */
	size_t n_unrealized;
	size_t unrealized_circuits;	 /* sum of unrealized[].circuits */
	size_t unrealized_before_repair; /* circuits left before Kempe repair */
};

/*
 * Realizes the topology (entries with i != j, 0 <= i, j < pods, 0 <= h < H,
 * circuits >= 0; i > j is accepted and means the same pair). pinned and
 * prefer may be NULL with count 0; pinned cross-connects must be cabled
 * (l2_check clean). Returns 0 and *out, -EINVAL for an out-of-range entry,
 * or -ENOMEM.
 */
int rz_realize(const struct ocs_fabric *f, const struct rz_circuits *topo, size_t n_topo,
	       const struct ocs_xc *pinned, size_t n_pinned, const struct ocs_xc *prefer,
	       size_t n_prefer, struct rz_result **out);
void rz_result_free(struct rz_result *r);

/*
 * Spine ports of group h made unusable by the pinned cross-connects: writes
 * busy[pod * k_spine + k] = 1 for every spine port whose transmit input or
 * receive output is used (busy has pods * k_spine entries, zeroed by the
 * caller). Uncabled cross-connects are ignored.
 */
void rz_busy_spine_ports(const struct ocs_fabric *f, int h, const struct ocs_xc *pinned,
			 size_t n_pinned, unsigned char *busy);

#endif
