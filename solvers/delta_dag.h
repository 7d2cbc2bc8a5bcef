/*
 * delta_dag.h - the reduced inter-pod communication DAG that the DELTA
 * planner works on (ALGORITHMS.md section 3, DELTA paper section III), and
 * its compiled, validated form `struct delta_problem` shared by the
 * simulator, the bounds, the genetic algorithm and the baselines.
 *
 * Symbols (DELTA paper):
 *   m = (i, j, F, V)   task: src pod i, dst pod j, F flows, V bytes
 *   (m_pre, m, delta)  dependency: m starts delta ms after m_pre finishes
 *   B                  per-flow (NIC) and per-circuit bandwidth
 *   x[i][j] = x[j][i]  circuits between pods i and j (one decision per link)
 *   U[p]               port budget of pod p
 *   Xbar               per-link capacity upper bound (delta_bounds.h)
 *
 * Links. The decision variables are the links: unordered pod pairs that
 * carry at least one task. By default each circuit of a link uses one port
 * at each end. A workload model may instead pass explicit links with other
 * per-end port costs: the DP-replica symmetry reduction (delta_workload.h)
 * uses a "ring peer" pod standing for the next replica's pod, whose circuits
 * cost 2 ports at the real pod (the ring's in- and out-edge) and 0 at the
 * peer (it is accounted for by its own replica).
 *
 * Ownership: struct delta_dag only borrows its arrays; delta_problem_new()
 * copies everything it needs, so the caller may free the DAG afterwards.
 * A problem is immutable once built: every function taking a const problem
 * is thread-safe.
 */
#ifndef OCS_DELTA_DAG_H
#define OCS_DELTA_DAG_H

#include <stddef.h>

struct delta_task {
	int src_pod;
	int dst_pod;
	int flows;	     /* F >= 1 */
	double volume_bytes; /* V >= 0; 0 finishes at its start */
	double release_ms;   /* earliest start (>= 0); explicit DAGs use 0 */
};

struct delta_dep {
	int pre;  /* task index */
	int post; /* task index */
	double delay_ms;
};

struct delta_link {
	int a, b;   /* pods, a < b */
	int cost_a; /* ports per circuit at pod a (>= 0) */
	int cost_b; /* ports per circuit at pod b (>= 0) */
};

struct delta_dag {
	int pods;
	const int *port_budget; /* U[p], `pods` entries, >= 0 */
	double bandwidth_gbps;	/* B > 0 */
	int n_tasks;
	const struct delta_task *tasks;
	int n_deps;
	const struct delta_dep *deps;
	int n_links; /* 0: one link per pod pair used, cost 1 */
	const struct delta_link *links;
};

/* A problem found while validating an input: which field and why. */
struct delta_error {
	char field[64]; /* e.g. "tasks[3].flows", "deps", "parallelism.tp" */
	char reason[192];
};

/* Fills err (may be NULL) and returns -EINVAL; printf-style reason. */
int delta_error_set(struct delta_error *err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct delta_problem;

/*
 * Validates and compiles a DAG: field ranges, dependency cycles ("deps"),
 * links covering every task's pod pair. Returns NULL with err filled on a
 * bad input or on allocation failure (field "memory"). Caller frees with
 * delta_problem_free().
 *
 * Callers build a problem with delta_problem_new() (delta_sim.h): it calls
 * this, runs the ideal schedule on the result and records its critical time
 * with delta_problem_set_ideal_critical_ms(), which every simulation divides
 * by. Kept there so that the DAG does not call the simulator that reads it.
 */
struct delta_problem *delta_problem_compile(const struct delta_dag *dag, struct delta_error *err);
/* For delta_problem_new() only, before the problem is shared. */
void delta_problem_set_ideal_critical_ms(struct delta_problem *p, double ms);
void delta_problem_free(struct delta_problem *p);

int delta_problem_pods(const struct delta_problem *p);
int delta_problem_n_tasks(const struct delta_problem *p);
const struct delta_task *delta_problem_tasks(const struct delta_problem *p);
int delta_problem_n_deps(const struct delta_problem *p);
const struct delta_dep *delta_problem_deps(const struct delta_problem *p);
int delta_problem_n_links(const struct delta_problem *p);
const struct delta_link *delta_problem_links(const struct delta_problem *p);
const int *delta_problem_port_budget(const struct delta_problem *p);
/* Link index of a task (the unordered pair of its pods). */
int delta_problem_task_link(const struct delta_problem *p, int task);
/* Tasks in a topological order (n_tasks entries). */
const int *delta_problem_topo_order(const struct delta_problem *p);
/* Dependencies leaving / entering task t: indices into the deps array. */
const int *delta_problem_out_deps(const struct delta_problem *p, int t, int *n);
const int *delta_problem_in_deps(const struct delta_problem *p, int t, int *n);
/* Critical-path communication time under the ideal network (delta_sim.h). */
double delta_problem_ideal_critical_ms(const struct delta_problem *p);
/* B in bytes per millisecond (B_gbps * 1e9 / 8 / 1e3). */
double delta_problem_bytes_per_ms(const struct delta_problem *p);

/*
 * Ports pod p uses under the plan x (one entry per link): sum of
 * x[link] * cost at p. Fills used[pods]; returns the total over all pods.
 */
long delta_ports_used(const struct delta_problem *p, const int *x, long *used);
/* Sum of U[p]: the ports available to the job. */
long delta_ports_available(const struct delta_problem *p);
/* True when every pod stays within its budget under x. */
int delta_plan_within_budget(const struct delta_problem *p, const int *x);

#endif
