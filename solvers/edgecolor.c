/*
 * edgecolor.c - balanced orientation and slot edge colouring with Kempe
 * chain repair (see edgecolor.h).
 */
#include "edgecolor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ec_init(struct ec_graph *g, int nv, int nc, int max_edges)
{
	size_t slots = (size_t)nv * (size_t)nc;
	size_t me = max_edges > 0 ? (size_t)max_edges : 1;

	memset(g, 0, sizeof(*g));
	g->nv = nv;
	g->nc = nc;
	g->cap_edges = (int)me;
	g->slot = malloc((slots ? slots : 1) * sizeof(*g->slot));
	g->eu = malloc(me * sizeof(*g->eu));
	g->ev = malloc(me * sizeof(*g->ev));
	g->color = malloc(me * sizeof(*g->color));
	g->path = malloc(me * sizeof(*g->path));
	if (!g->slot || !g->eu || !g->ev || !g->color || !g->path) {
		ec_release(g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < slots; i++)
		g->slot[i] = EC_FREE;
	return 0;
}

void ec_release(struct ec_graph *g)
{
	if (!g)
		return;
	free(g->slot);
	free(g->eu);
	free(g->ev);
	free(g->color);
	free(g->path);
	memset(g, 0, sizeof(*g));
}

static int *slot_at(struct ec_graph *g, int v, int c)
{
	return &g->slot[(size_t)v * (size_t)g->nc + (size_t)c];
}

void ec_block(struct ec_graph *g, int v, int c)
{
	*slot_at(g, v, c) = EC_BLOCKED;
}

int ec_add_edge(struct ec_graph *g, int u, int v)
{
	int e = g->ne++;

	g->eu[e] = u;
	g->ev[e] = v;
	g->color[e] = -1;
	return e;
}

bool ec_set(struct ec_graph *g, int e, int c)
{
	int *su = slot_at(g, g->eu[e], c), *sv = slot_at(g, g->ev[e], c);

	if (*su != EC_FREE || *sv != EC_FREE)
		return false;
	*su = e;
	*sv = e;
	g->color[e] = c;
	return true;
}

void ec_unset(struct ec_graph *g, int e)
{
	int c = g->color[e];

	if (c < 0)
		return;
	*slot_at(g, g->eu[e], c) = EC_FREE;
	*slot_at(g, g->ev[e], c) = EC_FREE;
	g->color[e] = -1;
}

/*
 * Follows the alpha/beta chain that starts at v with its alpha edge into
 * g->path and swaps it, so that alpha becomes free at v. Refuses (returns
 * false, nothing changed) when the chain ends at u (an odd cycle through the
 * new edge) or would have to move next to a blocked slot.
 */
static bool kempe_swap(struct ec_graph *g, int u, int v, int alpha, int beta)
{
	int x = v, col = alpha, len = 0;

	for (;;) {
		int e = *slot_at(g, x, col);

		if (e == EC_FREE)
			break;
		if (e == EC_BLOCKED || len >= g->ne)
			return false;
		g->path[len++] = e;
		x = g->eu[e] == x ? g->ev[e] : g->eu[e];
		col = col == alpha ? beta : alpha;
	}
	if (x == u)
		return false;
	for (int i = 0; i < len; i++)
		ec_unset(g, g->path[i]);
	/*
	 * Edges alternate alpha, beta, ...: the i-th takes the other colour.
	 * ec_set cannot fail here: the chain was maximal and its slots were
	 * just freed, so its result carries no information.
	 */
	for (int i = 0; i < len; i++)
		ec_set(g, g->path[i], i % 2 == 0 ? beta : alpha);
	return true;
}

bool ec_color(struct ec_graph *g, int e, bool kempe, int max_pairs)
{
	int u = g->eu[e], v = g->ev[e], tries = 0;

	for (int c = 0; c < g->nc; c++)
		if (ec_set(g, e, c))
			return true;
	if (!kempe)
		return false;
	/* Try from both ends: alpha free at one end, beta free at the other. */
	for (int side = 0; side < 2; side++) {
		int a = side ? v : u, b = side ? u : v;

		for (int alpha = 0; alpha < g->nc; alpha++) {
			if (*slot_at(g, a, alpha) != EC_FREE)
				continue;
			for (int beta = 0; beta < g->nc; beta++) {
				if (beta == alpha || *slot_at(g, b, beta) != EC_FREE)
					continue;
				if (max_pairs > 0 && tries++ >= max_pairs)
					return false;
				if (kempe_swap(g, a, b, alpha, beta) && ec_set(g, e, alpha))
					return true;
			}
		}
	}
	return false;
}

static uint64_t walk_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * Recolours the alternating chain at vertex a that starts with a's gamma
 * edge and continues with alpha (a colour free at a): afterwards a misses
 * gamma instead of alpha. Chains never create or remove uncoloured edges.
 */
static bool third_colour_swap(struct ec_graph *g, int a, uint64_t r)
{
	int alpha = -1, start = (int)(r % (uint64_t)g->nc);

	for (int k = 0; k < g->nc && alpha < 0; k++)
		if (*slot_at(g, a, (start + k) % g->nc) == EC_FREE)
			alpha = (start + k) % g->nc;
	if (alpha < 0)
		return false;
	start = (int)((r >> 16) % (uint64_t)g->nc);
	for (int k = 0; k < g->nc; k++) {
		int gamma = (start + k) % g->nc;

		if (gamma != alpha && *slot_at(g, a, gamma) >= 0 &&
		    kempe_swap(g, -1, a, gamma, alpha))
			return true;
	}
	return false;
}

bool ec_color_walk(struct ec_graph *g, int e, int max_steps, uint64_t *rng)
{
	int cur = e, last = -1;

	for (int step = 0;; step++) {
		uint64_t r;
		bool moved = false;

		if (ec_color(g, cur, true, 8))
			return true;
		if (step == max_steps || g->nc == 0)
			return false;
		r = walk_next(rng);
		/*
		 * Half the steps bring a third colour in at one end; the other
		 * half move the defect along: cur takes a colour free at one end
		 * and the edge holding it at the other end becomes the defect.
		 */
		if ((r >> 40) & 1) {
			if (third_colour_swap(g, (r >> 41) & 1 ? g->ev[cur] : g->eu[cur], r))
				continue;
		}
		for (int t = 0; t < 2 && !moved; t++) {
			int side = (int)((r + (uint64_t)t) & 1);
			int a = side ? g->ev[cur] : g->eu[cur], b = side ? g->eu[cur] : g->ev[cur];
			int start = (int)((r >> 8) % (uint64_t)g->nc);

			for (int k = 0; k < g->nc && !moved; k++) {
				int c = (start + k) % g->nc, f = *slot_at(g, b, c);

				if (*slot_at(g, a, c) != EC_FREE || f < 0 || f == last)
					continue;
				ec_unset(g, f);
				ec_set(g, cur, c);
				last = cur;
				cur = f;
				moved = true;
			}
		}
		if (!moved)
			return false;
	}
}

int ec_orient_balanced(int nv, size_t n, const int *u, const int *v, const int *cnt, int *fwd)
{
	/* Odd leftovers: at most one simple edge per pair, plus one dummy edge per odd vertex. */
	int dummy = nv, nvx = nv + 1;
	size_t max_e = n + (size_t)nv;
	int *deg = calloc((size_t)nvx, sizeof(*deg));
	int *start = calloc((size_t)nvx + 1, sizeof(*start));
	int *next = malloc((size_t)nvx * sizeof(*next));
	int *adj = malloc(2 * max_e * sizeof(*adj) + 1);
	int *ea = malloc(max_e * sizeof(*ea) + 1), *eb = malloc(max_e * sizeof(*eb) + 1);
	long *epair = malloc(max_e * sizeof(*epair) + 1);
	bool *used = calloc(max_e + 1, sizeof(*used));
	size_t ne = 0;
	int rc = 0;

	if (!deg || !start || !next || !adj || !ea || !eb || !epair || !used) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		fwd[i] = cnt[i] / 2;
		if (cnt[i] % 2) {
			ea[ne] = u[i];
			eb[ne] = v[i];
			epair[ne++] = (long)i;
			deg[u[i]]++;
			deg[v[i]]++;
		}
	}
	for (int x = 0; x < nv; x++) {
		if (deg[x] % 2) {
			ea[ne] = x;
			eb[ne] = dummy;
			epair[ne++] = -1;
			deg[x]++;
			deg[dummy]++;
		}
	}
	for (int x = 0; x < nvx; x++)
		start[x + 1] = start[x] + deg[x];
	memcpy(next, start, (size_t)nvx * sizeof(*next));
	for (size_t e = 0; e < ne; e++) {
		adj[next[ea[e]]++] = (int)e;
		adj[next[eb[e]]++] = (int)e;
	}
	memcpy(next, start, (size_t)nvx * sizeof(*next));
	/*
	 * Every degree is even now, so a walk along unused edges can only get
	 * stuck where it started: each walk is a closed trail, and orienting
	 * every edge the way it is walked keeps in = out at every vertex.
	 */
	for (int s = 0; s < nvx; s++) {
		for (;;) {
			int x = s;

			while (next[s] < start[s + 1] && used[adj[next[s]]])
				next[s]++;
			if (next[s] == start[s + 1])
				break;
			for (;;) {
				int e, y;

				while (next[x] < start[x + 1] && used[adj[next[x]]])
					next[x]++;
				if (next[x] == start[x + 1])
					break;
				e = adj[next[x]++];
				used[e] = true;
				y = ea[e] == x ? eb[e] : ea[e];
				if (epair[e] >= 0 && x == u[epair[e]])
					fwd[epair[e]]++;
				x = y;
			}
		}
	}
out:
	free(deg);
	free(start);
	free(next);
	free(adj);
	free(ea);
	free(eb);
	free(epair);
	free(used);
	return rc;
}
