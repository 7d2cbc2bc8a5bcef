/*
 * lc_gen.c - instance generators for planner tests and benchmarks (see
 * lc_gen.h). Demand is built unit by unit on a dense per-leaf budget, then
 * merged into one entry per unordered pair.
 */
#include "lc_gen.h"

#include <stdlib.h>
#include <string.h>

const char *lc_gen_shape_name(enum lc_gen_shape s)
{
	static const char *names[] = {"random", "saturated", "heavy", "skewed"};

	return s < LC_GEN_SHAPES ? names[s] : "?";
}

uint64_t lc_gen_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int lc_gen_below(uint64_t *state, int n)
{
	return (int)(lc_gen_next(state) % (uint64_t)n);
}

static int cmp_demand(const void *x, const void *y)
{
	const struct lc_demand *a = x, *b = y;

	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return (a->b > b->b) - (a->b < b->b);
}

struct units {
	struct lc_demand *v;
	size_t n, cap;
	int *left; /* uplinks each leaf still has */
};

static int add(struct units *u, int a, int b, int links)
{
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 64;
		struct lc_demand *v = realloc(u->v, cap * sizeof(*v));

		if (!v)
			return -1;
		u->v = v;
		u->cap = cap;
	}
	u->v[u->n++] = (struct lc_demand){a < b ? a : b, a < b ? b : a, links};
	u->left[a] -= links;
	u->left[b] -= links;
	return 0;
}

/* Rounds of random cross-pod matchings over the leaves that still have uplinks. */
static int saturate(const struct ocs_fabric *f, struct units *u, const int *pool, int n_pool,
		    uint64_t *seed)
{
	int *s = malloc((size_t)(n_pool ? n_pool : 1) * sizeof(*s));

	if (!s)
		return -1;
	for (int round = 0; round < f->k_leaf + 2; round++) {
		int n = 0;

		for (int i = 0; i < n_pool; i++)
			if (u->left[pool[i]] > 0)
				s[n++] = pool[i];
		for (int i = n - 1; i > 0; i--) {
			int j = lc_gen_below(seed, i + 1), t = s[i];

			s[i] = s[j];
			s[j] = t;
		}
		for (int i = 0; i + 1 < n; i += 2) {
			for (int tries = 0; tries < 64; tries++) {
				int j = lc_gen_below(seed, n), t;

				if (ocs_fabric_leaf_pod(f, s[i]) !=
				    ocs_fabric_leaf_pod(f, s[i + 1]))
					break;
				t = s[i + 1];
				s[i + 1] = s[j];
				s[j] = t;
			}
			if (ocs_fabric_leaf_pod(f, s[i]) != ocs_fabric_leaf_pod(f, s[i + 1]) &&
			    u->left[s[i]] > 0 && u->left[s[i + 1]] > 0 &&
			    add(u, s[i], s[i + 1], 1)) {
				free(s);
				return -1;
			}
		}
	}
	free(s);
	return 0;
}

struct lc_demand *lc_gen_demand(const struct ocs_fabric *f, enum lc_gen_shape shape,
				const unsigned char *allowed, int max_fill, uint64_t *seed,
				size_t *n)
{
	int nl = ocs_fabric_leaves(f), n_pool = 0,
	    fill = max_fill > 0 && max_fill < f->k_leaf ? max_fill : f->k_leaf;
	int *pool = malloc((size_t)nl * sizeof(*pool));
	struct units u = {0};
	size_t w = 0;
	int rc = 0;

	u.left = malloc((size_t)nl * sizeof(*u.left));
	*n = 0;
	if (!pool || !u.left)
		goto fail;
	for (int l = 0; l < nl; l++) {
		u.left[l] = fill;
		if (!allowed || allowed[l])
			pool[n_pool++] = l;
	}
	if (n_pool < 2)
		goto done;
	switch (shape) {
	case LC_GEN_SATURATED:
		rc = saturate(f, &u, pool, n_pool, seed);
		break;
	case LC_GEN_RANDOM:
	case LC_GEN_HEAVY:
	case LC_GEN_SKEWED: {
		int tries = n_pool * fill;

		for (int t = 0; t < tries && rc == 0; t++) {
			int a = pool[lc_gen_below(seed, n_pool)],
			    b = pool[lc_gen_below(seed, n_pool)];
			int links = 1;

			if (shape == LC_GEN_SKEWED && lc_gen_below(seed, 2))
				a = pool[lc_gen_below(seed, n_pool < 4 ? n_pool : 4)];
			if (ocs_fabric_leaf_pod(f, a) == ocs_fabric_leaf_pod(f, b))
				continue;
			links = u.left[a] < u.left[b] ? u.left[a] : u.left[b];
			if (links <= 0)
				continue;
			if (shape != LC_GEN_HEAVY || lc_gen_below(seed, 3) == 0)
				links = 1 + lc_gen_below(seed, links);
			if (shape == LC_GEN_RANDOM && lc_gen_below(seed, 2))
				links = 1;
			rc = add(&u, a, b, links);
		}
		break;
	}
	default:
		break;
	}
	if (rc)
		goto fail;
	if (u.n)
		qsort(u.v, u.n, sizeof(*u.v), cmp_demand);
	for (size_t i = 0; i < u.n; i++) {
		if (w && u.v[w - 1].a == u.v[i].a && u.v[w - 1].b == u.v[i].b)
			u.v[w - 1].links += u.v[i].links;
		else
			u.v[w++] = u.v[i];
	}
	/* Shuffle so the planner never relies on sorted input. */
	for (size_t i = w; i > 1; i--) {
		size_t j = lc_gen_next(seed) % i;
		struct lc_demand t = u.v[i - 1];

		u.v[i - 1] = u.v[j];
		u.v[j] = t;
	}
done:
	free(pool);
	free(u.left);
	*n = w;
	if (!u.v)
		u.v = malloc(sizeof(*u.v));
	return u.v;
fail:
	free(pool);
	free(u.left);
	free(u.v);
	return NULL;
}
