/*
 * leafcentric.h - the leaf-centric planner of LumosCore (ALGORITHMS.md
 * section 1), its pod-centric baseline, and the whole planning call the
 * daemon and ocsplan make: leaf demand (+ pinned cross-connects, + the
 * leaf-spine usage of live jobs) -> spine assignment, logical topology,
 * contention, cross-connects.
 *
 * Symbols: L[a][b] = links leaf a needs to leaf b (the demand), H =
 * k_leaf/tau spines per pod = OCS groups, L[a][b][h] = links of the pair
 * through spine h, C[i][j][h] = circuits between pods i and j in group h,
 * contention of leaf a at spine h = sum_b L[a][b][h] / tau.
 *
 * Leaf-centric method: orient every demand unit along Euler trails
 * (L = A + A^T, rows and columns of A balanced), colour the bipartite
 * multigraph A with H colours so that every leaf sends and receives at most
 * ceil(.../H) units per colour (for valid demand: at most one, an exact
 * equitable split for any H, not only powers of two), and L[a][b][h] =
 * A^h[a][b] + A^h[b][a]. tau = 2: contention <= 1 always without usage
 * (when pinned ports leave a spine short, units move and contention is
 * reported). tau = 1: a greedy colouring of the leaf multigraph with Kempe
 * and random-walk repair first (contention-free whenever every leaf uses
 * at most k_leaf/2 uplinks, and often beyond), else the better of it and
 * the Euler method (contention <= 2 unless a full spine forces a unit
 * elsewhere), always reported. Contention left over is
 * then repaired where possible: a unit on an overloaded (leaf, spine) link
 * moves to a spine with room at both leaves, displacing another unit of
 * the same plan along a bounded walk if needed (undone if it fails).
 * No spine ever carries more circuits than it has free OCS-facing ports;
 * demand that cannot be placed is returned in `unplaced`.
 *
 * Leaf-spine usage (options.usage): live jobs sharing leaves with the new
 * demand already load some (leaf, spine) links, U[a][h]. Every contention
 * figure (max_contention, contended_leaves, contention_free) is then over
 * the combined load U[a][h] + sum_b L[a][b][h], and the new demand is
 * planned around U so that U + new <= tau wherever it can: the colourings
 * treat the used part of each (leaf, spine) link as taken (blocked slots;
 * tau = 2 splits a half-used link's free slot between sending and
 * receiving to match the leaf's orientation), then the repair walk above.
 *
 * Convention for what does not fit, the same as for pinned ports: a hard
 * limit puts demand in `unplaced` (no spine with a free OCS port at both
 * pods, or a leaf whose uplinks are all used: U's total at the leaf plus
 * the new links may not pass k_leaf; a full leaf drops first the links
 * the colouring found no free slot for, then in (a, b) pair order); a soft
 * limit is reported, never hidden: demand that
 * fits its leaves' totals but finds no spine with room at both leaves is
 * placed where contention is lowest and max_contention, contended_leaves
 * and contention_free (false) say so. A daemon that must not polarize
 * refuses plans with contention_free false (being over the combined load,
 * it is false too when live jobs are contended among themselves).
 *
 * A contention-free plan around U is not always possible (leaf a free
 * only at spine 0, leaf b only at spine 1), and deciding whether one
 * exists is hard in general: with usage the planner is best effort
 * (tau >= 2: the colouring is retried in up to 6 turns, fewer for large
 * demands, while the plan adds contention; then the repair walk). Measured
 * (bench_planner sections 5 and 6): contention-free when two jobs use
 * 37.5% of every leaf each; on near-tight instances it found a
 * contention-free plan in each of the 61 that GLPK proves have one; when
 * two jobs fill every leaf exactly (where such a plan almost never exists)
 * 20 to 47% of leaves stay contended (planned blind to the usage: 87 to
 * 96%); over random job sequences (section 7) every contended plan that
 * placed all its links was one GLPK proves unavoidable.
 *
 * Exact placement next to live jobs (issue 30): with realization on, the
 * leaf-centric method and no re-plan, a plan
 * that does not fit (enum lc_fit: something unplaced or unrealized, or an
 * uplink it loads over tau) goes to the exact search of fit.h, which
 * decides on the free ports themselves: its placement replaces the plan,
 * or fit says LC_FIT_NONE with the limit that binds (leaf uplinks, pod
 * ports, device ports, or the links together), or LC_FIT_GAVE_UP after
 * FIT_DEFAULT_STEPS (at most about 50 ms on the development machine;
 * about one refusal in 6,000 in test_fit_property, on mid-size jobs over
 * nearly full leaves).
 *
 * Pinned cross-connects (running jobs) keep their spine ports; the new
 * demand is planned on the free ports only and changed_existing is 0. With
 * options.replan the existing cross-connects are not pinned: the demand is
 * planned on the whole fabric, the realization reuses existing circuits
 * where it can and `moved` lists the existing cross-connects it drops.
 *
 * All functions are pure (deterministic apart from the measured plan_ms and
 * realize_ms, no I/O, no globals) and thread-safe. Results are owned by
 * the caller: free with lc_plan_free().
 */
#ifndef OCS_LEAFCENTRIC_H
#define OCS_LEAFCENTRIC_H

#include <stdbool.h>
#include <stddef.h>

#include "fabric.h"
#include "realize.h"

/* Sparse leaf demand: leaves a != b of different pods need `links` paths. */
struct lc_demand {
	int a, b;
	int links;
};

/* L[a][b][h] for a < b: links of the pair routed through spine h. */
struct lc_spine_links {
	int a, b, h;
	int links;
};

/*
 * Leaf-spine links already in use at leaf `leaf` towards spine `spine` (an
 * OCS group index 0..H-1): sum_b L[leaf][b][spine] over the live jobs' plans
 * (lc_usage_from_assignment() computes it from their assignments).
 */
struct lc_leaf_usage {
	int leaf, spine;
	int links;
};

struct lc_options {
	bool realize; /* also compute cross-connects */
	bool replan;  /* existing cross-connects are not pinned (global re-plan) */
	/*
	 * Pinned leaf-spine usage of live jobs (NULL / 0: none). Entries for
	 * the same (leaf, spine) add up. Borrowed for the call only.
	 */
	const struct lc_leaf_usage *usage;
	size_t n_usage;
	/*
	 * The heuristic alone: no exact placement search when it does not fit
	 * (lc_plan.fit is then LC_FIT_PLACED or LC_FIT_UNCHECKED). For
	 * bench_planner section 8, which measures what the search adds, and
	 * test_lc_property, which tests the heuristic itself.
	 */
	bool heuristic_only;
	/*
	 * Device ports out of service (NULL / 0: none): each entry names a
	 * device port in `in` (`out` ignored). Both spine ports its input and
	 * its output are cabled to are busy for placement, the exact search
	 * and realization alike, so no new circuit and no re-plan uses them;
	 * they are neither validated as circuits nor part of the plan.
	 * Miswired fibre is the daemon's case (daemon/fabric/cabling.h).
	 * Borrowed for the call only.
	 */
	const struct ocs_xc *out_of_service;
	size_t n_out_of_service;
};

/*
 * Whether the demand fits around the pinned cross-connects and the usage
 * as a daemon that must not polarize needs it: every link placed and
 * realized, and no (leaf, spine) that the plan loads carrying more than
 * tau links with the usage (uplinks other jobs alone overload do not
 * count).
 */
enum lc_fit {
	LC_FIT_PLACED,	  /* it fits: the plan is such a placement */
	LC_FIT_NONE,	  /* proven: no placement exists around the pinned ones */
	LC_FIT_GAVE_UP,	  /* the exact search stopped at its step bound */
	LC_FIT_UNCHECKED, /* not searched (pod-centric, re-plan, heuristic_only,
			     no realization) and the heuristic's plan does not fit */
};

/* The limit that binds when nothing fits (lc_plan.limit). */
enum lc_limit {
	LC_LIMIT_NONE,
	LC_LIMIT_LEAF_UPLINKS, /* a leaf's uplinks to the spines (tau per spine) */
	LC_LIMIT_POD_PORTS,    /* a pod's free spine ports in the groups its leaves reach */
	LC_LIMIT_DEVICE_PORTS, /* free ports exist at both pods, on no common device (pair) */
	LC_LIMIT_TOGETHER,     /* each link fits alone; together they do not */
};

/* One problem found in a request: the field ("demand[17]") and why. */
struct lc_problem {
	char field[48];
	char reason[160];
};

struct lc_plan {
	struct lc_spine_links *assignment; /* sorted by (a, b, h) */
	size_t n_assignment;
	struct rz_circuits *topology; /* C[i][j][h] for i < j, sorted by (i, j, h) */
	size_t n_topology;
	double max_contention;	 /* max over leaf a, spine h of sum_b L[a][b][h] / tau */
	size_t contended_leaves; /* leaves with contention above 1 at some spine */
	/* max_contention <= 1 and nothing unplaced: the demand fits as asked. */
	bool contention_free;
	struct lc_demand *unplaced; /* demand no spine had room for (a < b) */
	size_t n_unplaced;
	/* With options.realize: the complete configuration (pinned ones first). */
	struct ocs_xc *xcs;
	size_t n_xcs;
	struct rz_circuits *unrealized;
	size_t n_unrealized;
	size_t unrealized_circuits;
	size_t unrealized_before_repair;
	size_t changed_existing; /* existing cross-connects not kept */
	struct ocs_xc *moved;	 /* those existing cross-connects */
	size_t n_moved;
	double plan_ms, realize_ms;
	enum lc_fit fit;
	enum lc_limit limit; /* with LC_FIT_NONE */
	char why[512];	     /* fit != LC_FIT_PLACED: what binds, in words */
	long fit_steps;	     /* steps of the exact search (0: not run) */
};

/*
 * Checks a request against the fabric (which must be valid): leaves in
 * range and of different pods, links >= 1, each unordered pair at most once,
 * no leaf over its k_leaf uplinks; existing cross-connects in range, cabled,
 * each port used once and forming two-way circuits. Fields are named
 * "demand[i]" and "existing[i]". Returns how many problems there are,
 * writing up to max_out (out may be NULL when max_out is 0).
 */
int lc_validate(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
		const struct ocs_xc *existing, size_t n_existing, struct lc_problem *out,
		int max_out);

/*
 * Checks leaf-spine usage against the fabric (fields "leaf_spine_usage[i]"):
 * leaf in 0..leaves-1, spine in 0..H-1, links >= 0, and no leaf's usage
 * totalling more than its k_leaf uplinks. Usage above tau at one spine is
 * accepted (live jobs may be contended). usage may be NULL only when
 * n_usage is 0. Same return convention as lc_validate().
 */
int lc_validate_usage(const struct ocs_fabric *f, const struct lc_leaf_usage *usage, size_t n_usage,
		      struct lc_problem *out, int max_out);

/*
 * Leaf-spine usage of a plan: every assignment entry {a, b, h, links} adds
 * links to (a, h) and to (b, h). Concatenate the assignments of several
 * plans (or their usage lists) to add them up. Writes *out sorted by
 * (leaf, spine), one entry per pair with links > 0 (caller frees with
 * free(); never NULL on success) and *n_out. Returns 0, -EINVAL for a
 * negative links count or index, or -ENOMEM.
 */
int lc_usage_from_assignment(const struct lc_spine_links *assignment, size_t n_assignment,
			     struct lc_leaf_usage **out, size_t *n_out);

/*
 * Plans the demand leaf-centrically (lc_plan) or pod-centrically (pc_plan,
 * the baseline). The request must pass lc_validate() and opt->usage
 * lc_validate_usage() (opt may be NULL: no realization, no re-plan, no
 * usage). The pod-centric baseline stays blind to leaves: usage only
 * limits each leaf's total and enters its contention figures. Returns 0
 * and *out, -EINVAL for a request that does not validate, or -ENOMEM.
 */
int lc_plan(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
	    const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
	    struct lc_plan **out);
int pc_plan(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
	    const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
	    struct lc_plan **out);
void lc_plan_free(struct lc_plan *p);

#endif
