/*
 * test_planner_edgecolor.c - unit tests of the planner's combinatorial
 * engine (solvers/edgecolor.c): balanced orientation of random multigraphs,
 * complete bipartite colouring (Konig) with Kempe repair for any number of
 * colours, which is the equitable split of A into H parts the leaf-centric
 * planner needs, blocked slots never moved, the odd cycle a straight device
 * cannot take, and random-walk repair that never loses an edge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "edgecolor.h"

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void test_orientation_is_balanced(void **state)
{
	uint64_t seed = 7;

	for (int round = 0; round < 300; round++) {
		int nv = 2 + (int)(next(&seed) % 30);
		size_t n = next(&seed) % 80;
		int *u = malloc((n + 1) * sizeof(int)), *v = malloc((n + 1) * sizeof(int));
		int *cnt = malloc((n + 1) * sizeof(int)), *fwd = malloc((n + 1) * sizeof(int));
		int *out = calloc((size_t)nv, sizeof(int)), *in = calloc((size_t)nv, sizeof(int));

		for (size_t i = 0; i < n; i++) {
			u[i] = (int)(next(&seed) % (uint64_t)nv);
			v[i] = (u[i] + 1 + (int)(next(&seed) % (uint64_t)(nv - 1))) % nv;
			cnt[i] = 1 + (int)(next(&seed) % 5);
		}
		assert_int_equal(ec_orient_balanced(nv, n, u, v, cnt, fwd), 0);
		for (size_t i = 0; i < n; i++) {
			assert_true(fwd[i] >= 0 && fwd[i] <= cnt[i]);
			out[u[i]] += fwd[i];
			in[v[i]] += fwd[i];
			out[v[i]] += cnt[i] - fwd[i];
			in[u[i]] += cnt[i] - fwd[i];
		}
		for (int x = 0; x < nv; x++)
			assert_true(abs(out[x] - in[x]) <= 1);
		free(u);
		free(v);
		free(cnt);
		free(fwd);
		free(out);
		free(in);
	}
}

/* Random bipartite multigraphs of maximum degree <= nc colour completely, any nc. */
static void test_bipartite_colours_completely(void **state)
{
	uint64_t seed = 11;

	for (int round = 0; round < 400; round++) {
		int side = 1 + (int)(next(&seed) % 12), nc = 1 + (int)(next(&seed) % 16);
		int *deg = calloc(2 * (size_t)side, sizeof(int));
		struct ec_graph g;

		assert_int_equal(ec_init(&g, 2 * side, nc, side * nc), 0);
		for (int t = 0; t < 4 * side * nc; t++) {
			int a = (int)(next(&seed) % (uint64_t)side);
			int b = side + (int)(next(&seed) % (uint64_t)side);

			if (deg[a] == nc || deg[b] == nc)
				continue;
			deg[a]++;
			deg[b]++;
			ec_add_edge(&g, a, b);
		}
		for (int e = 0; e < g.ne; e++)
			assert_true(ec_color(&g, e, true, 0));
		/* Proper: at every vertex, each colour at most once; slots agree. */
		for (int e = 0; e < g.ne; e++) {
			int c = g.color[e];

			assert_true(c >= 0 && c < nc);
			assert_int_equal(g.slot[(size_t)g.eu[e] * nc + c], e);
			assert_int_equal(g.slot[(size_t)g.ev[e] * nc + c], e);
		}
		/*
		 * Equitable split into nc parts: every vertex's count per colour is
		 * within floor/ceil of degree/nc (a full vertex has every colour
		 * once), and m parallel copies of an edge get m distinct colours.
		 */
		for (int x = 0; x < 2 * side; x++) {
			int used = 0;

			for (int c = 0; c < nc; c++)
				used += g.slot[(size_t)x * nc + c] >= 0;
			assert_int_equal(used, deg[x]);
		}
		for (int e = 0; e < g.ne; e++)
			for (int f = e + 1; f < g.ne; f++)
				if (g.eu[e] == g.eu[f] && g.ev[e] == g.ev[f])
					assert_int_not_equal(g.color[e], g.color[f]);
		ec_release(&g);
		free(deg);
	}
}

static void test_blocked_slots_stay(void **state)
{
	struct ec_graph g;
	int e;

	/* Path 0-1, 1-2 with 2 colours; colour 0 blocked at vertex 2. */
	assert_int_equal(ec_init(&g, 3, 2, 4), 0);
	ec_block(&g, 2, 0);
	e = ec_add_edge(&g, 0, 1);
	assert_true(ec_set(&g, e, 1));
	e = ec_add_edge(&g, 1, 2);
	/* Needs colour 1 at 2 (0 is blocked): Kempe swaps edge 0-1 to colour 0. */
	assert_true(ec_color(&g, e, true, 0));
	assert_int_equal(g.color[1], 1);
	assert_int_equal(g.color[0], 0);
	assert_int_equal(g.slot[2 * 2 + 0], EC_BLOCKED);
	/* A third edge 2-0 closes a triangle: no proper 2-colouring exists. */
	e = ec_add_edge(&g, 2, 0);
	assert_false(ec_color(&g, e, true, 0));
	assert_int_equal(g.color[e], -1);
	ec_release(&g);
	ec_release(NULL);
}

static void test_odd_cycle_needs_third_colour(void **state)
{
	struct ec_graph g;

	assert_int_equal(ec_init(&g, 5, 2, 5), 0);
	for (int i = 0; i < 5; i++)
		ec_add_edge(&g, i, (i + 1) % 5);
	for (int i = 0; i < 4; i++)
		assert_true(ec_color(&g, i, true, 0));
	assert_false(ec_color(&g, 4, true, 0));
	ec_release(&g);
	assert_int_equal(ec_init(&g, 5, 3, 5), 0);
	for (int i = 0; i < 5; i++) {
		ec_add_edge(&g, i, (i + 1) % 5);
		assert_true(ec_color(&g, i, true, 0));
	}
	ec_release(&g);
}

/*
 * Multigraphs built as the union of nc random matchings (so nc colours are
 * enough, like a straight device set with a realizable topology), coloured
 * from scratch in a shuffled order: whatever first fit and Kempe chains
 * leave, the walks place most of, keeping the colouring proper and blocked
 * slots untouched, and never losing an edge.
 */
static void test_walk_keeps_colouring_proper(void **state)
{
	uint64_t seed = 23, rng = 5;
	long left_before = 0, left_after = 0;

	for (int round = 0; round < 300; round++) {
		int nv = 2 * (2 + (int)(next(&seed) % 10)), nc = 2 + (int)(next(&seed) % 8);
		int *perm = malloc((size_t)nv * sizeof(int));
		int *eu = malloc((size_t)nv * nc * sizeof(int)),
		    *ev = malloc((size_t)nv * nc * sizeof(int));
		int n = 0, before = 0, after = 0;
		struct ec_graph g;

		/* Colour 0 is blocked at vertex 0: matching 0 leaves vertex 0 out. */
		for (int c = 0; c < nc; c++) {
			for (int i = 0; i < nv; i++)
				perm[i] = i;
			for (int i = nv - 1; i > 0; i--) {
				int j = (int)(next(&seed) % (uint64_t)(i + 1)), t = perm[i];

				perm[i] = perm[j];
				perm[j] = t;
			}
			for (int i = 0; i + 1 < nv; i += 2) {
				if (c == 0 && (perm[i] == 0 || perm[i + 1] == 0))
					continue;
				eu[n] = perm[i];
				ev[n++] = perm[i + 1];
			}
		}
		for (int i = n - 1; i > 0; i--) {
			int j = (int)(next(&seed) % (uint64_t)(i + 1)), t = eu[i];

			eu[i] = eu[j];
			eu[j] = t;
			t = ev[i];
			ev[i] = ev[j];
			ev[j] = t;
		}
		assert_int_equal(ec_init(&g, nv, nc, n), 0);
		ec_block(&g, 0, 0);
		for (int e = 0; e < n; e++)
			before += !ec_color(&g, ec_add_edge(&g, eu[e], ev[e]), true, 0);
		for (int e = 0; e < g.ne; e++)
			if (g.color[e] < 0)
				ec_color_walk(&g, e, 300, &rng);
		for (int e = 0; e < g.ne; e++) {
			int c = g.color[e];

			after += c < 0;
			if (c < 0)
				continue;
			assert_int_equal(g.slot[(size_t)g.eu[e] * nc + c], e);
			assert_int_equal(g.slot[(size_t)g.ev[e] * nc + c], e);
		}
		assert_int_equal(g.slot[0], EC_BLOCKED);
		assert_true(after <= before);
		left_before += before;
		left_after += after;
		ec_release(&g);
		free(perm);
		free(eu);
		free(ev);
	}
	assert_true(left_before > 0);
	assert_true(left_after * 10 < left_before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orientation_is_balanced),
		cmocka_unit_test(test_bipartite_colours_completely),
		cmocka_unit_test(test_blocked_slots_stay),
		cmocka_unit_test(test_odd_cycle_needs_third_colour),
		cmocka_unit_test(test_walk_keeps_colouring_proper),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
