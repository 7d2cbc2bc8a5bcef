/*
 * l2check.h - the independent L2 symmetry checker for leaf-spine-OCS fabrics.
 *
 * Given the fabric's wiring (fabric.h) and a full set of OCS cross-connects,
 * it follows the light from every spine port through the device it is cabled
 * to and the cross-connect there, to the spine port that receives it, and
 * refuses anything that is not a clean two-way circuit. The daemon runs it
 * before every push; the planner's tests run it on every plan.
 *
 * It deliberately shares no code with the planner or the realization
 * (only fabric.h), so a bug there cannot hide itself here.
 *
 * Pure function, no globals: thread-safe.
 */
#ifndef OCS_L2CHECK_H
#define OCS_L2CHECK_H

#include <stddef.h>

#include "fabric.h"

/* One refused cross-connect and why (NUL-terminated English sentence). */
struct l2_violation {
	struct ocs_xc xc;
	char reason[160];
};

/*
 * Traces every light path through the wiring and the given cross-connects.
 * Returns the number of violations (0 = every circuit is two-way and well
 * formed), writing up to max_out of them to out (out may be NULL when
 * max_out is 0). Violations: group, device or port out of range or not
 * cabled to a spine, two cross-connects on one input or one output of a
 * device, a one-way circuit (spine port A reaches B but B does not reach A),
 * a loop back into the same spine port. Returns -ENOMEM if it cannot
 * allocate its working memory. The fabric must be valid.
 */
int l2_check(const struct ocs_fabric *f, const struct ocs_xc *xcs, size_t n_xcs,
	     struct l2_violation *out, int max_out);

#endif
