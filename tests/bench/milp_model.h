/*
 * milp_model.h - a solver-neutral mixed-integer linear program for the
 * benchmarks: the model is written once (columns with bounds, kind and cost;
 * rows as sparse coefficients between two bounds) and then handed to GLPK
 * and, when the build found it, to CBC, so both solve exactly the same
 * model. Test-only code (tests/bench), not part of the daemon.
 *
 * Always minimises. Indices are 0-based in this API; the GLPK back end
 * shifts them to GLPK's 1-based ones. An unbounded side is -INFINITY or
 * INFINITY (math.h).
 *
 * Rows are built term by term: milp_term() adds a coefficient to the row
 * under construction, milp_row() closes it with its bounds. Errors (out of
 * memory, a column index out of range or twice in one row, NaN or crossed
 * bounds, a non-finite coefficient or cost) are sticky: the model is marked
 * broken, later calls do nothing, every solve returns -1 and milp_error()
 * says what went wrong first, so builders need not check each call.
 *
 * Not thread-safe: one model per thread. The solve functions only read the
 * model, so one model may be solved by several back ends in turn.
 */
#ifndef OCSD_MILP_MODEL_H
#define OCSD_MILP_MODEL_H

#include <stddef.h>

enum milp_kind {
	MILP_CONTINUOUS,
	MILP_INTEGER, /* a binary is an integer column with bounds [0, 1] */
};

struct milp;

struct milp_result {
	int has_solution;   /* an integer-feasible solution was found */
	int proven_optimal; /* the solver proved it optimal (gap 0) */
	double objective;   /* of the best solution; meaningful if has_solution */
	double seconds;	    /* wall-clock time of the solve call */
	double *x;	    /* column values, n_cols long, NULL without a
			       solution; caller frees with milp_result_clear */
};

/* Returns an empty model, NULL if out of memory. Caller frees. */
struct milp *milp_new(void);
/* Accepts NULL. */
void milp_free(struct milp *m);

/* Adds a column and returns its index (-1 once the model is broken). */
int milp_col(struct milp *m, enum milp_kind kind, double lb, double ub, double cost);
/* Adds coef * column to the row under construction. */
void milp_term(struct milp *m, int col, double coef);
/* Number of terms in the row under construction. */
int milp_row_len(const struct milp *m);
/* Closes the row under construction as lb <= sum <= ub. */
void milp_row(struct milp *m, double lb, double ub);

/* NULL while the model is sound, else the first error (names the call,
 * the row or column and the values). Owned by the model. */
const char *milp_error(const struct milp *m);

int milp_n_cols(const struct milp *m);
int milp_n_rows(const struct milp *m);
size_t milp_n_nonzeros(const struct milp *m);

/*
 * Largest violation of x against the model: bounds and rows measured
 * relative to (1 + the magnitude of the terms), integrality absolute.
 * An independent check of a back end's solution (and of the translation
 * to it). Returns INFINITY for a broken model or a NULL x.
 */
double milp_max_violation(const struct milp *m, const double *x);

/* Solves with GLPK (branch and cut, presolve on, no terminal output) within
 * time_limit_s of wall time. Returns 0 (see out) or -1 if the model is
 * broken or the solver failed to start. */
int milp_solve_glpk(const struct milp *m, double time_limit_s, struct milp_result *out);

/* CBC's version string when the build linked CBC (milp_solve_cbc works),
 * else NULL. Static storage. */
const char *milp_cbc_version(void);
/* Solves with CBC (single thread, log off, wall-clock time limit);
 * returns -1 when CBC is not built in, as milp_solve_glpk otherwise. */
int milp_solve_cbc(const struct milp *m, double time_limit_s, struct milp_result *out);

/* Frees out->x; accepts NULL. */
void milp_result_clear(struct milp_result *out);

#endif
