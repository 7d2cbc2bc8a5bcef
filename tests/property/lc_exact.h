/*
 * lc_exact.h - an exact feasibility check, independent of the planner, for
 * placing one job's leaf demand around pinned circuits (issue 30): does a
 * placement exist that puts every link of every pair on one OCS group and
 * one concrete circuit of that group, without moving a pinned
 * cross-connect, and without loading any (leaf, group) uplink past tau
 * together with the other live jobs' usage?
 *
 * The rules, from solvers/fabric.h alone:
 *   - a spine port is busy when its transmit device input or its receive
 *     device output is used by a pinned cross-connect; a free spine port
 *     serves at most one new circuit;
 *   - a circuit of group h joins spine port A of one pod and B of the
 *     other: the cross-connects tx(A) -> rx(B) and tx(B) -> rx(A), each on
 *     one device (device of tx(A) = device of rx(B), and the other way);
 *     which port pairs qualify is derived from the wiring functions, never
 *     from a list of the three wirings;
 *   - for every (leaf, h) the job loads: usage + new links <= tau.
 *
 * Two deciders that share only the free-port marking:
 *   lcx_solve_ilp     an integer program (tests/bench/milp_model.h, GLPK):
 *                     any size the solver finishes within its time limit;
 *   lcx_solve_search  exhaustive backtracking for tiny jobs (a handful of
 *                     links): every split of each pair's links over the
 *                     groups, then every port choice per group, with the
 *                     allowed port pairs found through the inverse wiring
 *                     functions instead of the forward ones.
 * They must agree wherever both decide. A feasible answer comes with a
 * witness, which lcx_check_witness() verifies with l2check.h.
 *
 * Test-only code (tests/property, tests/bench). Not thread-safe (GLPK).
 */
#ifndef OCSD_LC_EXACT_H
#define OCSD_LC_EXACT_H

#include <stddef.h>

#include "fabric.h"

/* Leaves a and b (different pods) need `links` circuits between them. */
struct lcx_pair {
	int a, b;
	int links;
};

struct lcx_instance {
	const struct ocs_fabric *f; /* valid */
	const struct lcx_pair *pairs;
	size_t n_pairs;
	const struct ocs_xc *pinned; /* the configuration so far */
	size_t n_pinned;
	const int *usage; /* [leaf * H + h]: the other jobs' links; NULL = none */
};

enum lcx_answer {
	LCX_FEASIBLE,
	LCX_INFEASIBLE,
	LCX_UNDECIDED, /* time or step limit reached */
};

/* One circuit of a placement: pair index, group, the spine port at a's pod
 * and the one at b's pod. */
struct lcx_circuit {
	int pair;
	int h;
	struct ocs_spine_port at_a, at_b;
};

struct lcx_result {
	enum lcx_answer answer;
	struct lcx_circuit *witness; /* with LCX_FEASIBLE; caller frees (lcx_result_clear) */
	size_t n_witness;
	long steps;	/* search nodes visited (lcx_solve_search) */
	double seconds; /* solver time (lcx_solve_ilp) */
};

const char *lcx_answer_name(enum lcx_answer a);

/*
 * Decides the instance with GLPK within time_limit_s. Returns 0 and *out,
 * or -1 when the model cannot be built or solved (out of memory).
 */
int lcx_solve_ilp(const struct lcx_instance *in, double time_limit_s, struct lcx_result *out);

/*
 * Decides the instance by exhaustive search, visiting at most max_steps
 * nodes (then LCX_UNDECIDED). Meant for jobs of a few links. Returns 0 and
 * *out, or -1 when out of memory.
 */
int lcx_solve_search(const struct lcx_instance *in, long max_steps, struct lcx_result *out);

/*
 * Checks a placement against the rules above: each pair's links all placed,
 * every circuit between the pair's pods in its group on free ports, the
 * new cross-connects with the pinned ones clean under l2_check(), and the
 * (leaf, group) bound. Returns the number of problems (0 = a placement);
 * writes the first into msg.
 */
int lcx_check_witness(const struct lcx_instance *in, const struct lcx_circuit *w, size_t n,
		      char *msg, size_t msg_len);

/* Accepts a zeroed result. */
void lcx_result_clear(struct lcx_result *r);

#endif
