/*
 * fit.h - the exact placement search behind lc_plan() (issue 30): one
 * job's leaf demand next to the circuits of live jobs, each link on a
 * circuit of its own, or a proof that no such placement exists and the
 * limit that binds.
 *
 * The heuristic planner (leafcentric.h) chooses spines from leaf and pod
 * counts and realizes afterwards; around pinned ports that can fail while
 * room exists (a group picked where the free ports of two pods sit on
 * different device pairs, another group left unused). This search decides
 * the question itself, on the free ports:
 *
 *   a placement puts every link of pair (a, b) on a group h and on one free
 *   spine port of pod(a) and one of pod(b) in h that the wiring joins into
 *   a circuit (fabric.h: tx and rx of each end on one device), each port
 *   used once, and keeps load(leaf, h) = usage + the job's links <= tau
 *   wherever the job adds a link (polarization-free for the job's links;
 *   an uplink other jobs alone overload is no reason to refuse).
 *
 * Method: first the necessary conditions that name a limit, in this order
 * (each is a proof when it fails): a leaf's room over all spines; a pair's
 * spines with room at both leaves; a pod's free ports in the groups its
 * leaves reach; a pair's groups with a free port at both pods; a pair's
 * groups where those ports can be joined (same device, or device pair for
 * cross wiring). Then a complete depth-first search: the pair with the
 * fewest options per link left next, options ordered by the room they
 * leave, ports that the wiring cannot tell apart tried once, groups alike
 * opened in order, the links of one pair in non-decreasing order (so no
 * placement is searched twice), and counts that prove a dead end (room of
 * leaves, pods, pod pairs, devices, odd sets of leaves) re-checked at every
 * step. When a short first search decides nothing, parts of the demand are
 * searched (a part without a placement proves the whole has none), then
 * the whole again. It stops after max_steps units of work: LC_FIT_GAVE_UP
 * says so, never a guess.
 *
 * Pure function, no globals: thread-safe.
 */
#ifndef OCS_FIT_H
#define OCS_FIT_H

#include <stddef.h>

#include "fabric.h"
#include "leafcentric.h"

/* Option evaluations a search may make when the caller does not say. */
#define FIT_DEFAULT_STEPS 4000000L

struct fit_request {
	const struct ocs_fabric *f;
	const struct lc_demand *demand; /* validated (lc_validate) */
	size_t n_demand;
	const struct ocs_xc *pinned; /* their ports are busy */
	size_t n_pinned;
	const struct lc_leaf_usage *usage; /* other jobs' (leaf, spine) links */
	size_t n_usage;
	long max_steps; /* 0: FIT_DEFAULT_STEPS */
};

struct fit_result {
	enum lc_fit fit; /* PLACED, NONE or GAVE_UP */
	enum lc_limit limit;
	char why[512]; /* NONE, GAVE_UP: in words, naming leaves, pods, groups */
	long steps;
	/* PLACED: the placement. Sorted by (a, b, h). */
	struct lc_spine_links *assignment;
	size_t n_assignment;
	struct ocs_xc *xcs; /* the new cross-connects (two per link) */
	size_t n_xcs;
};

/* Returns 0 and fills *out (clear it with fit_result_clear), or -ENOMEM. */
int fit_place(const struct fit_request *q, struct fit_result *out);
void fit_result_clear(struct fit_result *r);

/*
 * The first (leaf, spine) that an assignment loads and that carries more
 * than tau links with the usage: returns 1 and *leaf, *spine, *load, or 0
 * when there is none; -ENOMEM.
 */
int fit_overload(const struct ocs_fabric *f, const struct lc_spine_links *assignment,
		 size_t n_assignment, const struct lc_leaf_usage *usage, size_t n_usage, int *leaf,
		 int *spine, int *load);

#endif
