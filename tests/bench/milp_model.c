/*
 * milp_model.c - the solver-neutral MILP of milp_model.h: storage (columns
 * and rows in compressed sparse row form), an independent solution checker,
 * and the GLPK and CBC back ends that load the same storage into each
 * solver. CBC is compiled in only when the build defines OCSD_HAVE_CBC
 * (tests/bench/CMakeLists.txt does when pkg-config finds cbc).
 */
#include "milp_model.h"

#include "bench_clock.h"

#include <float.h>
#include <glpk.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef OCSD_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

struct milp {
	int broken;
	char error[128]; /* why it broke, for milp_error */
	int n_cols, cap_cols;
	double *col_lb, *col_ub, *cost;
	unsigned char *integer;
	int n_rows, cap_rows;
	size_t *row_start; /* n_rows + 1 entries; row i is [start[i], start[i+1]) */
	double *row_lb, *row_ub;
	size_t nnz, cap_nnz; /* nnz counts the open row's terms too */
	int *idx;
	double *val;
};

/* Reallocates *p to n elements of elem bytes; -1 (p untouched) if out of
 * memory. */
static int resize(void *p, size_t n, size_t elem)
{
	void *q = realloc(*(void **)p, n * elem);
	if (!q)
		return -1;
	*(void **)p = q;
	return 0;
}

/* Marks the model broken with the first reason given. */
static void fail(struct milp *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct milp *m, const char *fmt, ...)
{
	if (m->broken)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->error, sizeof(m->error), fmt, ap);
	va_end(ap);
	m->broken = 1;
}

/* lb <= ub, neither NaN, and not both on the same infinite side. */
static int bad_bounds(double lb, double ub)
{
	return isnan(lb) || isnan(ub) || lb > ub || lb == INFINITY || ub == -INFINITY;
}

static size_t next_cap(size_t cap)
{
	return cap ? 2 * cap : 64;
}

struct milp *milp_new(void)
{
	struct milp *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->row_start = calloc(1, sizeof(size_t));
	if (!m->row_start) {
		free(m);
		return NULL;
	}
	return m;
}

void milp_free(struct milp *m)
{
	if (!m)
		return;
	free(m->col_lb);
	free(m->col_ub);
	free(m->cost);
	free(m->integer);
	free(m->row_start);
	free(m->row_lb);
	free(m->row_ub);
	free(m->idx);
	free(m->val);
	free(m);
}

int milp_col(struct milp *m, enum milp_kind kind, double lb, double ub, double cost)
{
	if (m->broken)
		return -1;
	if (bad_bounds(lb, ub) || !isfinite(cost)) {
		fail(m, "milp_col: column %d: bounds [%g, %g] or cost %g invalid", m->n_cols, lb,
		     ub, cost);
		return -1;
	}
	if (m->n_cols == m->cap_cols) {
		size_t n = next_cap((size_t)m->cap_cols);
		if (resize(&m->col_lb, n, sizeof(double)) ||
		    resize(&m->col_ub, n, sizeof(double)) || resize(&m->cost, n, sizeof(double)) ||
		    resize(&m->integer, n, 1)) {
			fail(m, "milp_col: out of memory at column %d", m->n_cols);
			return -1;
		}
		m->cap_cols = (int)n;
	}
	int j = m->n_cols++;
	m->col_lb[j] = lb;
	m->col_ub[j] = ub;
	m->cost[j] = cost;
	m->integer[j] = kind == MILP_INTEGER;
	return j;
}

void milp_term(struct milp *m, int col, double coef)
{
	if (m->broken)
		return;
	if (col < 0 || col >= m->n_cols || !isfinite(coef)) {
		fail(m, "milp_term: row %d: column %d (of %d) or coefficient %g invalid", m->n_rows,
		     col, m->n_cols, coef);
		return;
	}
	if (m->nnz == m->cap_nnz) {
		size_t n = next_cap(m->cap_nnz);
		if (resize(&m->idx, n, sizeof(int)) || resize(&m->val, n, sizeof(double))) {
			fail(m, "milp_term: out of memory at row %d", m->n_rows);
			return;
		}
		m->cap_nnz = n;
	}
	m->idx[m->nnz] = col;
	m->val[m->nnz] = coef;
	m->nnz++;
}

int milp_row_len(const struct milp *m)
{
	return (int)(m->nnz - m->row_start[m->n_rows]);
}

void milp_row(struct milp *m, double lb, double ub)
{
	if (m->broken)
		return;
	if (bad_bounds(lb, ub)) {
		fail(m, "milp_row: row %d: bounds [%g, %g] invalid", m->n_rows, lb, ub);
		return;
	}
	/* GLPK refuses a column twice in a row (it aborts the process). */
	for (size_t e = m->row_start[m->n_rows]; e < m->nnz; e++)
		for (size_t f = m->row_start[m->n_rows]; f < e; f++)
			if (m->idx[e] == m->idx[f]) {
				fail(m, "milp_row: row %d: column %d appears twice", m->n_rows,
				     m->idx[e]);
				return;
			}
	if (m->n_rows == m->cap_rows) {
		size_t n = next_cap((size_t)m->cap_rows);
		/* row_start holds one more entry than there are rows */
		if (resize(&m->row_start, n + 1, sizeof(size_t)) ||
		    resize(&m->row_lb, n, sizeof(double)) ||
		    resize(&m->row_ub, n, sizeof(double))) {
			fail(m, "milp_row: out of memory at row %d", m->n_rows);
			return;
		}
		m->cap_rows = (int)n;
	}
	m->row_lb[m->n_rows] = lb;
	m->row_ub[m->n_rows] = ub;
	m->row_start[++m->n_rows] = m->nnz;
}

const char *milp_error(const struct milp *m)
{
	return m->broken ? m->error : NULL;
}

int milp_n_cols(const struct milp *m)
{
	return m->n_cols;
}

int milp_n_rows(const struct milp *m)
{
	return m->n_rows;
}

size_t milp_n_nonzeros(const struct milp *m)
{
	return m->row_start[m->n_rows];
}

static double viol(double v, double lb, double ub, double scale)
{
	double d = 0;
	if (v < lb)
		d = lb - v;
	if (v > ub)
		d = v - ub;
	return d / (1 + scale);
}

double milp_max_violation(const struct milp *m, const double *x)
{
	if (m->broken || !x)
		return INFINITY;
	double worst = 0;
	for (int j = 0; j < m->n_cols; j++) {
		worst = fmax(worst, viol(x[j], m->col_lb[j], m->col_ub[j], fabs(x[j])));
		if (m->integer[j])
			worst = fmax(worst, fabs(x[j] - round(x[j])));
	}
	for (int i = 0; i < m->n_rows; i++) {
		double act = 0, mag = 0;
		for (size_t e = m->row_start[i]; e < m->row_start[i + 1]; e++) {
			act += m->val[e] * x[m->idx[e]];
			mag += fabs(m->val[e] * x[m->idx[e]]);
		}
		worst = fmax(worst, viol(act, m->row_lb[i], m->row_ub[i], mag));
	}
	return worst;
}

/* GLPK's bound type for [lb, ub] with infinite sides. */
static int glpk_type(double lb, double ub)
{
	if (isinf(lb) && isinf(ub))
		return GLP_FR;
	if (isinf(ub))
		return GLP_LO;
	if (isinf(lb))
		return GLP_UP;
	return lb == ub ? GLP_FX : GLP_DB;
}

static double finite_or_0(double v)
{
	return isinf(v) ? 0 : v;
}

int milp_solve_glpk(const struct milp *m, double time_limit_s, struct milp_result *out)
{
	memset(out, 0, sizeof(*out));
	if (m->broken)
		return -1;
	size_t ne = milp_n_nonzeros(m);
	int *ia = malloc((ne + 1) * sizeof(int)), *ja = malloc((ne + 1) * sizeof(int));
	double *ar = malloc((ne + 1) * sizeof(double));
	glp_prob *lp = glp_create_prob();
	if (!ia || !ja || !ar) {
		free(ia);
		free(ja);
		free(ar);
		glp_delete_prob(lp);
		return -1;
	}
	glp_set_obj_dir(lp, GLP_MIN);
	if (m->n_cols)
		glp_add_cols(lp, m->n_cols);
	if (m->n_rows)
		glp_add_rows(lp, m->n_rows);
	for (int j = 0; j < m->n_cols; j++) {
		glp_set_col_kind(lp, j + 1, m->integer[j] ? GLP_IV : GLP_CV);
		glp_set_col_bnds(lp, j + 1, glpk_type(m->col_lb[j], m->col_ub[j]),
				 finite_or_0(m->col_lb[j]), finite_or_0(m->col_ub[j]));
		glp_set_obj_coef(lp, j + 1, m->cost[j]);
	}
	for (int i = 0; i < m->n_rows; i++) {
		glp_set_row_bnds(lp, i + 1, glpk_type(m->row_lb[i], m->row_ub[i]),
				 finite_or_0(m->row_lb[i]), finite_or_0(m->row_ub[i]));
		for (size_t e = m->row_start[i]; e < m->row_start[i + 1]; e++) {
			ia[e + 1] = i + 1;
			ja[e + 1] = m->idx[e] + 1;
			ar[e + 1] = m->val[e];
		}
	}
	/* glp_load_matrix rejects duplicate (row, column) pairs; the builders
	 * never repeat a column within a row. */
	glp_load_matrix(lp, (int)ne, ia, ja, ar);
	free(ia);
	free(ja);
	free(ar);

	glp_iocp parm;
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.tm_lim = (int)(time_limit_s * 1000);
	double t0 = bench_now_s();
	int rc = glp_intopt(lp, &parm);
	out->seconds = bench_now_s() - t0;
	int status = glp_mip_status(lp);
	out->proven_optimal = rc == 0 && status == GLP_OPT;
	out->has_solution = status == GLP_OPT || status == GLP_FEAS;
	if (out->has_solution) {
		out->objective = glp_mip_obj_val(lp);
		out->x = malloc((size_t)(m->n_cols ? m->n_cols : 1) * sizeof(double));
		for (int j = 0; out->x && j < m->n_cols; j++)
			out->x[j] = glp_mip_col_val(lp, j + 1);
	}
	glp_delete_prob(lp);
	return 0;
}

#ifdef OCSD_HAVE_CBC
const char *milp_cbc_version(void)
{
	return Cbc_getVersion();
}

/* CBC's infinity is COIN_DBL_MAX (DBL_MAX). */
static double cbc_bound(double v)
{
	return isinf(v) ? (v < 0 ? -DBL_MAX : DBL_MAX) : v;
}

int milp_solve_cbc(const struct milp *m, double time_limit_s, struct milp_result *out)
{
	memset(out, 0, sizeof(*out));
	if (m->broken)
		return -1;
	Cbc_Model *cbc = Cbc_newModel();
	if (!cbc)
		return -1;
	char name[32];
	for (int j = 0; j < m->n_cols; j++) {
		snprintf(name, sizeof(name), "c%d", j);
		Cbc_addCol(cbc, name, cbc_bound(m->col_lb[j]), cbc_bound(m->col_ub[j]), m->cost[j],
			   (char)m->integer[j], 0, NULL, NULL);
	}
	/* A row bounded on both sides becomes an equality or two one-sided
	 * rows; a free row adds nothing. */
	for (int i = 0; i < m->n_rows; i++) {
		int nz = (int)(m->row_start[i + 1] - m->row_start[i]);
		const int *cols = m->idx + m->row_start[i];
		const double *coefs = m->val + m->row_start[i];
		double lb = m->row_lb[i], ub = m->row_ub[i];
		snprintf(name, sizeof(name), "r%d", i);
		if (!isinf(lb) && lb == ub) {
			Cbc_addRow(cbc, name, nz, cols, coefs, 'E', lb);
			continue;
		}
		if (!isinf(lb))
			Cbc_addRow(cbc, name, nz, cols, coefs, 'G', lb);
		if (!isinf(ub)) {
			snprintf(name, sizeof(name), "r%du", i);
			Cbc_addRow(cbc, name, nz, cols, coefs, 'L', ub);
		}
	}
	Cbc_setObjSense(cbc, 1); /* minimise */
	Cbc_setLogLevel(cbc, 0);
	Cbc_setParameter(cbc, "timeMode", "elapsed");
	Cbc_setMaximumSeconds(cbc, time_limit_s);
	double t0 = bench_now_s();
	Cbc_solve(cbc);
	out->seconds = bench_now_s() - t0;
	const double *best = Cbc_bestSolution(cbc);
	out->proven_optimal = Cbc_isProvenOptimal(cbc) && best;
	out->has_solution = best != NULL;
	if (best) {
		out->objective = Cbc_getObjValue(cbc);
		out->x = malloc((size_t)(m->n_cols ? m->n_cols : 1) * sizeof(double));
		if (out->x)
			memcpy(out->x, best, (size_t)m->n_cols * sizeof(double));
	}
	Cbc_deleteModel(cbc);
	return 0;
}
#else
const char *milp_cbc_version(void)
{
	return NULL;
}

int milp_solve_cbc(const struct milp *m, double time_limit_s, struct milp_result *out)
{
	(void)m;
	(void)time_limit_s;
	memset(out, 0, sizeof(*out));
	return -1;
}
#endif

void milp_result_clear(struct milp_result *out)
{
	if (!out)
		return;
	free(out->x);
	out->x = NULL;
}
