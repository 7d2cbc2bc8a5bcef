/*
 * delta_ga.c - DELTA-Fast genetic algorithm (see delta_ga.h for the
 * algorithm and its guarantees).
 *
 * Layout: a population is one int array of N_pop * L circuit counts (L =
 * links) plus a fitness per individual. Fitness evaluation is the only
 * parallel step: eval_one() writes the fitness slot of its own index.
 */
#include "delta_ga.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "delta_baselines.h"
#include "delta_bounds.h"

struct fitness {
	double makespan_ms; /* INFINITY for an invalid plan */
	long ports;
};

static int fitness_less(struct fitness a, struct fitness b)
{
	double scale = fmax(1.0, fmax(fabs(a.makespan_ms), fabs(b.makespan_ms)));
	if (isinf(a.makespan_ms) || isinf(b.makespan_ms)) {
		if (isinf(a.makespan_ms) != isinf(b.makespan_ms))
			return !isinf(a.makespan_ms);
		return a.ports < b.ports;
	}
	if (fabs(a.makespan_ms - b.makespan_ms) > 1e-9 * scale)
		return a.makespan_ms < b.makespan_ms;
	return a.ports < b.ports;
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int rng_int(uint64_t *s, int lo, int hi) /* inclusive */
{
	if (hi <= lo)
		return lo;
	return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

void delta_ga_defaults(struct delta_ga_params *params)
{
	memset(params, 0, sizeof(*params));
	params->seed = 1;
	params->population = 32;
	params->elites = 2;
	params->tournament = 3;
	params->crossover_rate = 0.9;
	params->mutation_rate = 0;
	params->max_generations = 100000;
	params->stall_generations = 200;
	params->trim_ports = 1;
}

struct ga {
	const struct delta_problem *p;
	const int *xbar;
	int L, pods;
	const struct delta_link *links;
	const int *budget;
	long *used;	 /* pods */
	int *order;	 /* L, scratch for random edge order */
	long *remaining; /* pods, Alg. 5 lookahead */
	int *cand;	 /* L, Alg. 6 reducible edges */
};

static long plan_ports(const struct ga *g, const int *x)
{
	long s = 0;
	for (int l = 0; l < g->L; l++)
		s += (long)x[l] * (g->links[l].cost_a + g->links[l].cost_b);
	return s;
}

/* Alg. 5 FeasibleRandomInit, with per-end port costs. */
static void random_init(struct ga *g, uint64_t *rng, int *x)
{
	for (int q = 0; q < g->pods; q++) {
		g->used[q] = 0;
		g->remaining[q] = 0;
	}
	for (int l = 0; l < g->L; l++) {
		g->order[l] = l;
		g->remaining[g->links[l].a] += g->links[l].cost_a;
		g->remaining[g->links[l].b] += g->links[l].cost_b;
	}
	for (int l = g->L - 1; l > 0; l--) { /* Fisher-Yates */
		int k = rng_int(rng, 0, l), s = g->order[l];
		g->order[l] = g->order[k];
		g->order[k] = s;
	}
	for (int k = 0; k < g->L; k++) {
		const struct delta_link *e = &g->links[g->order[k]];
		long limit = g->xbar[g->order[k]];
		g->remaining[e->a] -= e->cost_a;
		g->remaining[e->b] -= e->cost_b;
		if (e->cost_a > 0) {
			long r = g->budget[e->a] - g->used[e->a] - g->remaining[e->a];
			limit = limit < r / e->cost_a ? limit : r / e->cost_a;
		}
		if (e->cost_b > 0) {
			long r = g->budget[e->b] - g->used[e->b] - g->remaining[e->b];
			limit = limit < r / e->cost_b ? limit : r / e->cost_b;
		}
		if (limit < 1)
			limit = 1;
		int v = rng_int(rng, 1, (int)limit);
		x[g->order[k]] = v;
		g->used[e->a] += (long)v * e->cost_a;
		g->used[e->b] += (long)v * e->cost_b;
	}
}

/* Alg. 6 RepairTopo; returns 1 when x fits every budget afterwards. */
static int repair(struct ga *g, uint64_t *rng, int *x)
{
	for (int l = 0; l < g->L; l++) {
		if (x[l] > g->xbar[l])
			x[l] = g->xbar[l];
		if (x[l] < 1)
			x[l] = 1;
	}
	delta_ports_used(g->p, x, g->used);
	for (;;) {
		int n_over = 0, pick = -1;
		for (int q = 0; q < g->pods; q++)
			if (g->used[q] > g->budget[q])
				n_over++;
		if (n_over == 0)
			return 1;
		int nth = rng_int(rng, 0, n_over - 1);
		for (int q = 0; q < g->pods; q++)
			if (g->used[q] > g->budget[q] && nth-- == 0) {
				pick = q;
				break;
			}
		int n_cand = 0;
		for (int l = 0; l < g->L; l++) {
			const struct delta_link *e = &g->links[l];
			int cost = e->a == pick ? e->cost_a : e->b == pick ? e->cost_b : 0;
			if (cost > 0 && x[l] > 1)
				g->cand[n_cand++] = l;
		}
		if (n_cand == 0)
			return 0;
		int l = g->cand[rng_int(rng, 0, n_cand - 1)];
		x[l]--;
		g->used[g->links[l].a] -= g->links[l].cost_a;
		g->used[g->links[l].b] -= g->links[l].cost_b;
	}
}

/*
 * Fitness cache: plans seen before (children often repeat a parent) are not
 * simulated again. Open addressing on an FNV-1a hash of x; it stops growing
 * at CACHE_MAX entries. Only the main thread touches it, so the pooled and
 * serial runs see the same hits.
 */
#define CACHE_MAX (1u << 20)

struct cache {
	int *keys;
	struct fitness *vals;
	unsigned char *used;
	size_t cap, n;
	int L;
};

static size_t cache_hash(const int *x, int L)
{
	uint64_t h = 1469598103934665603ULL;
	for (int l = 0; l < L; l++) {
		h ^= (uint32_t)x[l];
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

static size_t cache_slot(const struct cache *c, const int *x)
{
	size_t i = cache_hash(x, c->L) & (c->cap - 1);
	while (c->used[i] && memcmp(c->keys + i * (size_t)c->L, x, (size_t)c->L * sizeof(int)))
		i = (i + 1) & (c->cap - 1);
	return i;
}

static int cache_get(const struct cache *c, const int *x, struct fitness *out)
{
	if (!c->cap)
		return 0;
	size_t i = cache_slot(c, x);
	if (!c->used[i])
		return 0;
	*out = c->vals[i];
	return 1;
}

static void cache_free(struct cache *c)
{
	free(c->keys);
	free(c->vals);
	free(c->used);
}

/* Best effort: on allocation failure the cache just stops growing. */
static void cache_put(struct cache *c, const int *x, struct fitness f)
{
	if (c->n >= CACHE_MAX)
		return;
	if (2 * (c->n + 1) > c->cap) {
		struct cache big = {.cap = c->cap ? 2 * c->cap : 1024, .L = c->L};
		big.keys = malloc(big.cap * (size_t)c->L * sizeof(int));
		big.vals = malloc(big.cap * sizeof(*big.vals));
		big.used = calloc(big.cap, 1);
		if (!big.keys || !big.vals || !big.used) {
			cache_free(&big);
			return;
		}
		for (size_t i = 0; i < c->cap; i++)
			if (c->used[i])
				cache_put(&big, c->keys + i * (size_t)c->L, c->vals[i]);
		cache_free(c);
		*c = big;
	}
	size_t i = cache_slot(c, x);
	if (!c->used[i]) {
		c->used[i] = 1;
		memcpy(c->keys + i * (size_t)c->L, x, (size_t)c->L * sizeof(int));
		c->n++;
	}
	c->vals[i] = f;
}

struct eval_job {
	const struct delta_problem *p;
	const int *xs;
	int L;
	struct fitness *fit;
	const struct ga *g;
	const int *which; /* individuals to evaluate */
};

static void eval_one(void *arg, size_t i)
{
	struct eval_job *job = arg;
	size_t k = (size_t)job->which[i];
	struct delta_sim_result r;
	const int *x = job->xs + k * (size_t)job->L;
	int rc = delta_simulate(job->p, x, &r, NULL, NULL);
	job->fit[k].makespan_ms = rc == 0 ? r.makespan_ms : INFINITY;
	job->fit[k].ports = plan_ports(job->g, x);
}

/* Fills fit[from..N-1]: cached plans directly, the rest on the pool. */
static long evaluate(const struct delta_problem *p, const struct ocs_pool *pool, struct ga *g,
		     struct cache *cache, const int *xs, struct fitness *fit, int from, int N,
		     int *which)
{
	int n_miss = 0;
	for (int k = from; k < N; k++)
		if (!cache_get(cache, xs + (size_t)k * g->L, &fit[k]))
			which[n_miss++] = k;
	struct eval_job job = {.p = p, .xs = xs, .L = g->L, .fit = fit, .g = g, .which = which};
	ocs_pool_run(pool, eval_one, &job, (size_t)n_miss);
	for (int i = 0; i < n_miss; i++)
		cache_put(cache, xs + (size_t)which[i] * g->L, fit[which[i]]);
	return n_miss;
}

static int tournament(uint64_t *rng, const struct fitness *fit, int n, int size)
{
	int best = rng_int(rng, 0, n - 1);
	for (int k = 1; k < size; k++) {
		int c = rng_int(rng, 0, n - 1);
		if (fitness_less(fit[c], fit[best]) ||
		    (!fitness_less(fit[best], fit[c]) && c < best))
			best = c;
	}
	return best;
}

static int check_params(const struct delta_ga_params *q, struct delta_error *err)
{
	if (q->population < 4)
		return delta_error_set(err, "population", "must be >= 4, got %d", q->population);
	if (q->elites < 0 || q->elites >= q->population)
		return delta_error_set(err, "elites", "must be in 0..population-1, got %d",
				       q->elites);
	if (q->tournament < 1)
		return delta_error_set(err, "tournament", "must be >= 1, got %d", q->tournament);
	if (!(q->crossover_rate >= 0 && q->crossover_rate <= 1))
		return delta_error_set(err, "crossover_rate", "must be in 0..1");
	if (!(q->mutation_rate >= 0 && q->mutation_rate <= 1))
		return delta_error_set(err, "mutation_rate", "must be in 0..1");
	if (q->max_generations < 0)
		return delta_error_set(err, "max_generations", "must be >= 0, got %d",
				       q->max_generations);
	if (q->stall_generations < 1)
		return delta_error_set(err, "stall_generations", "must be >= 1, got %d",
				       q->stall_generations);
	if (!(q->time_budget_ms >= 0))
		return delta_error_set(err, "time_budget_ms", "must be >= 0");
	if (q->time_budget_ms > 0 && !q->clock_ms)
		return delta_error_set(err, "time_budget_ms", "needs a clock from the caller");
	return 0;
}

/* Sorts population indices by fitness (ties: lower index first). */
static void rank(const struct fitness *fit, int n, int *idx)
{
	for (int i = 0; i < n; i++)
		idx[i] = i;
	for (int i = 1; i < n; i++) { /* insertion sort: small n, stable */
		int v = idx[i], j = i - 1;
		while (j >= 0 && fitness_less(fit[v], fit[idx[j]])) {
			idx[j + 1] = idx[j];
			j--;
		}
		idx[j + 1] = v;
	}
}

/* Greedy fewest-ports pass at (at most) the best makespan. */
static long trim_ports(const struct delta_problem *p, int L, int *x, struct fitness *best)
{
	long evals = 0;
	struct delta_sim_result r;
	int changed = 1;
	while (changed) {
		changed = 0;
		for (int l = 0; l < L; l++) {
			while (x[l] > 1) {
				x[l]--;
				evals++;
				int rc = delta_simulate(p, x, &r, NULL, NULL);
				double scale = fmax(1.0, best->makespan_ms);
				if (rc == 0 && r.makespan_ms <= best->makespan_ms + 1e-9 * scale) {
					changed = 1;
					continue;
				}
				x[l]++;
				break;
			}
		}
	}
	return evals;
}

int delta_fast(const struct delta_problem *p, const struct delta_ga_params *params,
	       const int *xbar_in, const struct ocs_pool *pool, int *x,
	       struct delta_sim_result *result, struct delta_ga_stats *stats,
	       struct delta_error *err)
{
	int rc = check_params(params, err);
	if (rc)
		return rc;
	rc = delta_check_min_ports(p, err);
	if (rc)
		return rc;

	int L = delta_problem_n_links(p), pods = delta_problem_pods(p);
	int N = params->population;
	struct ga g = {.p = p,
		       .L = L,
		       .pods = pods,
		       .links = delta_problem_links(p),
		       .budget = delta_problem_port_budget(p)};
	int *xbar = malloc((size_t)L * sizeof(int));
	int *pop = malloc((size_t)N * L * sizeof(int));
	int *next = malloc((size_t)N * L * sizeof(int));
	struct fitness *fit = malloc((size_t)N * sizeof(*fit));
	struct fitness *next_fit = malloc((size_t)N * sizeof(*fit));
	int *idx = malloc((size_t)N * sizeof(int));
	int *best_x = malloc((size_t)L * sizeof(int));
	int *which = malloc((size_t)N * sizeof(int));
	struct cache cache = {.L = L};
	g.used = malloc((size_t)pods * sizeof(long));
	g.remaining = malloc((size_t)pods * sizeof(long));
	g.order = malloc((size_t)L * sizeof(int));
	g.cand = malloc((size_t)L * sizeof(int));
	struct delta_ga_stats st = {0};
	uint64_t rng = params->seed;
	double t0 = params->clock_ms ? params->clock_ms(params->clock_ctx) : 0;
	double pm = params->mutation_rate > 0 ? params->mutation_rate : 1.0 / L;

	rc = -ENOMEM;
	if (!xbar || !pop || !next || !fit || !next_fit || !idx || !best_x || !which || !g.used ||
	    !g.remaining || !g.order || !g.cand)
		goto out;
	if (xbar_in)
		memcpy(xbar, xbar_in, (size_t)L * sizeof(int));
	else if ((rc = delta_bounds_until(p, xbar, params->cancel)) != 0) {
		if (rc == -ECANCELED)
			st.stopped_by_cancel = 1;
		if (stats)
			*stats = st;
		goto out;
	}
	g.xbar = xbar;

	/* Initial population: repaired baselines, then Alg. 5. */
	int n_init = 0;
	for (int b = DELTA_PROP_ALLOC; b <= DELTA_ITER_HALVE && n_init < N; b++) {
		int *xi = pop + (size_t)n_init * L;
		if (delta_baseline_plan(p, (enum delta_baseline)b, xi, NULL) == 0 &&
		    repair(&g, &rng, xi))
			n_init++;
	}
	for (; n_init < N; n_init++)
		random_init(&g, &rng, pop + (size_t)n_init * L);
	st.evaluations += evaluate(p, pool, &g, &cache, pop, fit, 0, N, which);
	rank(fit, N, idx);
	struct fitness best = fit[idx[0]];
	memcpy(best_x, pop + (size_t)idx[0] * L, (size_t)L * sizeof(int));

	int stall = 0;
	for (int gen = 1; gen <= params->max_generations; gen++) {
		if (params->time_budget_ms > 0 &&
		    params->clock_ms(params->clock_ctx) - t0 >= params->time_budget_ms) {
			st.stopped_by_time = 1;
			break;
		}
		if (params->cancel && atomic_load_explicit(params->cancel, memory_order_relaxed)) {
			st.stopped_by_cancel = 1;
			break;
		}
		int n_new = 0;
		for (; n_new < params->elites; n_new++) {
			memcpy(next + (size_t)n_new * L, pop + (size_t)idx[n_new] * L,
			       (size_t)L * sizeof(int));
			next_fit[n_new] = fit[idx[n_new]];
		}
		for (; n_new < N; n_new++) {
			int *child = next + (size_t)n_new * L;
			int a = tournament(&rng, fit, N, params->tournament);
			int b = tournament(&rng, fit, N, params->tournament);
			const int *pa = pop + (size_t)a * L, *pb = pop + (size_t)b * L;
			int cross = rng_unit(&rng) < params->crossover_rate;
			for (int l = 0; l < L; l++)
				child[l] = cross && (rng_next(&rng) & 1) ? pb[l] : pa[l];
			for (int l = 0; l < L; l++) {
				if (rng_unit(&rng) >= pm)
					continue;
				if (rng_next(&rng) & 1)
					child[l] += (rng_next(&rng) & 1) ? 1 : -1;
				else
					child[l] = rng_int(&rng, 1, xbar[l]);
			}
			if (!repair(&g, &rng, child))
				random_init(&g, &rng, child);
		}
		int *swap = pop;
		pop = next;
		next = swap;
		struct fitness *fswap = fit;
		fit = next_fit;
		next_fit = fswap;
		st.evaluations += evaluate(p, pool, &g, &cache, pop, fit, params->elites, N, which);
		st.generations = gen;
		rank(fit, N, idx);
		if (fitness_less(fit[idx[0]], best)) {
			best = fit[idx[0]];
			memcpy(best_x, pop + (size_t)idx[0] * L, (size_t)L * sizeof(int));
			st.best_generation = gen;
			stall = 0;
		} else if (++stall >= params->stall_generations) {
			break;
		}
	}
	st.ports_before_trim = best.ports;
	if (params->trim_ports && !st.stopped_by_cancel && !isinf(best.makespan_ms))
		st.evaluations += trim_ports(p, L, best_x, &best);
	memcpy(x, best_x, (size_t)L * sizeof(int));
	rc = delta_simulate(p, x, result, NULL, NULL);
	if (rc == -EDOM)
		rc = delta_error_set(err, "tasks", "no plan lets every task finish");
	if (stats)
		*stats = st;
out:
	free(xbar);
	free(pop);
	free(next);
	free(fit);
	free(next_fit);
	free(idx);
	free(best_x);
	free(which);
	cache_free(&cache);
	free(g.used);
	free(g.remaining);
	free(g.order);
	free(g.cand);
	return rc;
}
