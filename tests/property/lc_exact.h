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
 * The check calls nothing of the planner: leafcentric.h is included for
 * the generator's struct lc_demand alone. Test-only code (tests/property,
 * tests/bench). Not thread-safe (GLPK).
 */
#ifndef OCSD_LC_EXACT_H
#define OCSD_LC_EXACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "leafcentric.h" /* struct lc_demand, for the generator only */

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

/*
 * Instances of test_fit_property and bench_planner section 8 (lc_gen.h's
 * random numbers, deterministic for a seed). A fabric of the wiring and
 * tau given: 2..6 pods, 2..6 groups, k_spine 2..8 (even), k_ocs = pods *
 * ports per pod. A job of `links` links among 2..6 random leaves, each
 * pair of different pods, no leaf over k_leaf: malloc'ed, *n pairs (a <
 * b, each pair once; caller frees), NULL when the leaves drawn are all of
 * one pod.
 */
struct ocs_fabric lcx_gen_fabric(enum ocs_wiring w, int tau, uint64_t *seed);
struct lc_demand *lcx_gen_job(const struct ocs_fabric *f, int links, uint64_t *seed, size_t *n);
/*
 * A sequence: lcx_gen_events() events (20..60), each a release of a random
 * live job when lcx_gen_release() (30%) and there is one, else the arrival
 * of a job of lcx_gen_links() links (70% small: 1..3; 30% mid-size: 4..16).
 */
int lcx_gen_events(uint64_t *seed);
bool lcx_gen_release(uint64_t *seed);
int lcx_gen_links(uint64_t *seed);

#endif
