/*
 * delta_bounds.c - time windows (Alg. 4) and per-link capacity bounds
 * (Alg. 2) for DELTA; the reasoning is in delta_bounds.h.
 *
 * The transitive closure is computed per direction: for every task, a bitset
 * over the tasks of that direction that it reaches (reverse topological
 * order, OR of the successors' sets), so memory stays n * n_dir / 8 bytes.
 */
#include "delta_bounds.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_MWIS_MAX 30
/* Above this many closure words (128 MiB) a direction falls back to the
 * plain flow sum per window: still an upper bound, only looser. */
#define CLOSURE_WORDS_MAX ((size_t)1 << 24)

int delta_time_windows(const struct delta_problem *p, double *est, double *lct, double *t_up_ms)
{
	int n = delta_problem_n_tasks(p), n_links = delta_problem_n_links(p);
	const struct delta_task *tasks = delta_problem_tasks(p);
	const struct delta_dep *deps = delta_problem_deps(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *topo = delta_problem_topo_order(p);
	double bpms = delta_problem_bytes_per_ms(p);
	double *dir_volume = calloc(2 * (size_t)n_links, sizeof(double));
	double *late_finish = malloc((size_t)n * sizeof(double));

	if (!dir_volume || !late_finish) {
		free(dir_volume);
		free(late_finish);
		return -ENOMEM;
	}
	for (int t = 0; t < n; t++) {
		int l = delta_problem_task_link(p, t);
		dir_volume[2 * l + (tasks[t].src_pod == links[l].a ? 0 : 1)] +=
			tasks[t].volume_bytes;
	}
	/* Forward: EST with tau, and the latest possible finish with V_dir / B. */
	double t_up = 0;
	for (int k = 0; k < n; k++) {
		int t = topo[k], n_in;
		const int *in = delta_problem_in_deps(p, t, &n_in);
		double e = tasks[t].release_ms, late = tasks[t].release_ms;
		for (int j = 0; j < n_in; j++) {
			const struct delta_dep *d = &deps[in[j]];
			double tau = tasks[d->pre].volume_bytes / (tasks[d->pre].flows * bpms);
			e = fmax(e, est[d->pre] + tau + d->delay_ms);
			late = fmax(late, late_finish[d->pre] + d->delay_ms);
		}
		int l = delta_problem_task_link(p, t);
		est[t] = e;
		late_finish[t] =
			late + dir_volume[2 * l + (tasks[t].src_pod == links[l].a ? 0 : 1)] / bpms;
		t_up = fmax(t_up, late_finish[t]);
	}
	/* Backward: LCT from T_up. */
	for (int t = 0; t < n; t++)
		lct[t] = t_up;
	for (int k = n - 1; k >= 0; k--) {
		int v = topo[k], n_in;
		const int *in = delta_problem_in_deps(p, v, &n_in);
		double tau = tasks[v].volume_bytes / (tasks[v].flows * bpms);
		for (int j = 0; j < n_in; j++) {
			const struct delta_dep *d = &deps[in[j]];
			lct[d->pre] = fmin(lct[d->pre], lct[v] - tau - d->delay_ms);
		}
	}
	*t_up_ms = t_up;
	free(dir_volume);
	free(late_finish);
	return 0;
}

struct mwis {
	int n;
	const int *w;
	uint64_t adj[EXACT_MWIS_MAX];
	long best;
};

static long mask_weight(const struct mwis *m, uint64_t mask)
{
	long s = 0;
	for (int i = 0; i < m->n; i++)
		if (mask & ((uint64_t)1 << i))
			s += m->w[i];
	return s;
}

static void mwis_search(struct mwis *m, uint64_t cand, long cur)
{
	if (cur > m->best)
		m->best = cur;
	if (!cand || cur + mask_weight(m, cand) <= m->best)
		return;
	int v = __builtin_ctzll(cand);
	uint64_t bit = (uint64_t)1 << v;
	mwis_search(m, cand & ~bit & ~m->adj[v], cur + m->w[v]);
	mwis_search(m, cand & ~bit, cur);
}

/* reach(a, b): a reaches b or b reaches a, using per-direction bitsets. */
static int related(const uint64_t *desc, size_t words, const int *pos, int a, int b)
{
	int pa = pos[a], pb = pos[b];
	return ((desc[(size_t)a * words + (size_t)pb / 64] >> (pb % 64)) & 1) ||
	       ((desc[(size_t)b * words + (size_t)pa / 64] >> (pa % 64)) & 1);
}

static long window_bound(const struct delta_problem *p, const int *act, int n_act,
			 const uint64_t *desc, size_t words, const int *pos, int *scratch)
{
	const struct delta_task *tasks = delta_problem_tasks(p);
	if (n_act <= EXACT_MWIS_MAX) {
		struct mwis m = {.n = n_act, .w = scratch, .best = 0};
		for (int i = 0; i < n_act; i++) {
			scratch[i] = tasks[act[i]].flows;
			m.adj[i] = 0;
			for (int j = 0; j < n_act; j++)
				if (i != j && related(desc, words, pos, act[i], act[j]))
					m.adj[i] |= (uint64_t)1 << j;
		}
		uint64_t all = n_act == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n_act) - 1);
		mwis_search(&m, all, 0);
		return m.best;
	}
	/* Chain cover: act is in topological order; scratch holds chain tails
	 * and their heaviest weights (2 ints per chain). */
	int chains = 0;
	for (int i = 0; i < n_act; i++) {
		int t = act[i], c;
		for (c = 0; c < chains; c++) {
			int tail = scratch[2 * c];
			if ((desc[(size_t)tail * words + (size_t)pos[t] / 64] >> (pos[t] % 64)) & 1)
				break;
		}
		if (c == chains) {
			chains++;
			scratch[2 * c + 1] = 0;
		}
		scratch[2 * c] = t;
		if (tasks[t].flows > scratch[2 * c + 1])
			scratch[2 * c + 1] = tasks[t].flows;
	}
	long sum = 0;
	for (int c = 0; c < chains; c++)
		sum += scratch[2 * c + 1];
	return sum;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Bound for one direction: its tasks in topological order are dir_tasks. */
static int direction_bound(const struct delta_problem *p, const int *dir_tasks, int n_dir,
			   const double *est, const double *lct, int *pos,
			   const atomic_bool *cancel, long *bound)
{
	int n = delta_problem_n_tasks(p);
	const struct delta_dep *deps = delta_problem_deps(p);
	const int *topo = delta_problem_topo_order(p);
	size_t words = ((size_t)n_dir + 63) / 64;
	int closure = (size_t)n * words <= CLOSURE_WORDS_MAX;
	uint64_t *desc = calloc(closure ? (size_t)n * words : 1, sizeof(uint64_t));
	double *cuts = malloc(2 * (size_t)n_dir * sizeof(double));
	int *act = malloc((size_t)n_dir * sizeof(int));
	int *scratch = malloc(2 * ((size_t)n_dir + EXACT_MWIS_MAX) * sizeof(int));
	int rc = 0;

	if (!desc || !cuts || !act || !scratch) {
		free(desc);
		free(cuts);
		free(act);
		free(scratch);
		return -ENOMEM;
	}
	for (int i = 0; i < n_dir; i++)
		pos[dir_tasks[i]] = i;
	for (int k = n - 1; k >= 0 && closure; k--) {
		int u = topo[k], n_out;
		const int *out = delta_problem_out_deps(p, u, &n_out);
		uint64_t *du = desc + (size_t)u * words;
		for (int j = 0; j < n_out; j++) {
			int v = deps[out[j]].post;
			const uint64_t *dv = desc + (size_t)v * words;
			for (size_t w = 0; w < words; w++)
				du[w] |= dv[w];
			if (pos[v] >= 0)
				du[pos[v] / 64] |= (uint64_t)1 << (pos[v] % 64);
		}
	}
	int n_cuts = 0;
	for (int i = 0; i < n_dir; i++) {
		cuts[n_cuts++] = est[dir_tasks[i]];
		cuts[n_cuts++] = lct[dir_tasks[i]];
	}
	qsort(cuts, (size_t)n_cuts, sizeof(double), cmp_double);
	*bound = 0;
	for (int k = 0; k + 1 < n_cuts; k++) {
		if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
			rc = -ECANCELED;
			break;
		}
		if (cuts[k + 1] == cuts[k])
			continue;
		double mid = (cuts[k] + cuts[k + 1]) / 2;
		int n_act = 0;
		long sum = 0;
		for (int i = 0; i < n_dir; i++) {
			int t = dir_tasks[i];
			if (est[t] <= mid && mid < lct[t]) {
				act[n_act++] = t;
				sum += delta_problem_tasks(p)[t].flows;
			}
		}
		if (sum <= *bound)
			continue;
		if (!closure) {
			*bound = sum;
			continue;
		}
		long b = window_bound(p, act, n_act, desc, words, pos, scratch);
		if (b > *bound)
			*bound = b;
	}
	for (int i = 0; i < n_dir; i++)
		pos[dir_tasks[i]] = -1;
	free(desc);
	free(cuts);
	free(act);
	free(scratch);
	return rc;
}

int delta_bounds(const struct delta_problem *p, int *xbar)
{
	return delta_bounds_until(p, xbar, NULL);
}

int delta_bounds_until(const struct delta_problem *p, int *xbar, const atomic_bool *cancel)
{
	int n = delta_problem_n_tasks(p), n_links = delta_problem_n_links(p);
	const struct delta_task *tasks = delta_problem_tasks(p);
	const struct delta_link *links = delta_problem_links(p);
	const int *topo = delta_problem_topo_order(p);
	double *est = malloc((size_t)n * sizeof(double));
	double *lct = malloc((size_t)n * sizeof(double));
	int *pos = malloc((size_t)n * sizeof(int));
	int *dir_tasks = malloc((size_t)n * sizeof(int));
	double t_up;
	int rc = -ENOMEM;

	if (!est || !lct || !pos || !dir_tasks || delta_time_windows(p, est, lct, &t_up))
		goto out;
	for (int t = 0; t < n; t++)
		pos[t] = -1;
	rc = 0;
	for (int l = 0; l < n_links && rc == 0; l++) {
		xbar[l] = 1;
		for (int dir = 0; dir < 2 && rc == 0; dir++) {
			int src = dir == 0 ? links[l].a : links[l].b, n_dir = 0;
			for (int k = 0; k < n; k++) {
				int t = topo[k];
				if (delta_problem_task_link(p, t) == l && tasks[t].src_pod == src &&
				    tasks[t].volume_bytes > 0)
					dir_tasks[n_dir++] = t;
			}
			long b = 0;
			if (n_dir > 0)
				rc = direction_bound(p, dir_tasks, n_dir, est, lct, pos, cancel,
						     &b);
			if (b > xbar[l])
				xbar[l] = b > 1000000 ? 1000000 : (int)b;
		}
	}
out:
	free(est);
	free(lct);
	free(pos);
	free(dir_tasks);
	return rc;
}
