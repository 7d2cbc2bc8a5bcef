/*
 * fit.c - the exact placement search (see fit.h for the problem and the
 * method).
 *
 * State: every spine port of every group, busy or free (busy[(h * P + pod)
 * * K + k]), the free count per (group, pod), and the room each of the
 * job's leaves has left per spine (tau - usage - the job's links so far).
 * The wiring enters through one table: which spine port k' of another pod
 * port k can form a circuit with (both cross-connects on one device,
 * fabric.h), the same for every pod pair and group. Ports with the same
 * partners are interchangeable (dual wiring's two ports on one device):
 * each such class is tried once, through its lowest free port.
 *
 * An option of a pair is (group h, class at pod i, class at pod j), with
 * the key (rank(h) * K + ci) * K + cj, where rank(h) is the order in which
 * the search opened group h (unopened groups rank after every opened one);
 * the links of one pair take non-decreasing keys, and of groups alike at
 * the start (same free ports, same room) the lowest unopened one is opened
 * first, so a placement is reached by one path only, and the two rules
 * never exclude each other's canonical placement.
 *
 * Counts checked at every step (bounds_hold), each a necessary condition:
 * per pair, leaf and pod, links left <= room left; per connected part of
 * what is left, per triangle, and per part without one of its leaves, at
 * most half the uplink ends its leaves can take per spine (odd sets); per
 * pod pair, per group the smaller side; per group, what its devices can
 * still join (straight: half the pods with port k free; cross: the smaller
 * parity of each device pair; dual: half the free ports of a device).
 */
#include "fit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many pairs the next pair is taken in a fixed order (fewest
 * options at the start first) instead of rescanning every pair per step. */
#define FIT_SCAN_PAIRS 64

struct pair {
	int a, b;   /* job leaf indices */
	int i, j;   /* pods */
	int la, lb; /* leaf ids */
	int need, left;
	long last; /* key of the pair's last placed link, -1 before the first */
};

/* A placed link: its pair, group and spine ports, and the pair's key before. */
struct link {
	int p, h, ki, kj;
	long prev_last;
};

struct option {
	int h, ki, kj;
	long key, score;
};

struct search {
	const struct ocs_fabric *f;
	int P, H, K, tau;
	unsigned char *busy; /* [(h * P + pod) * K + k] */
	int *nfree;	     /* [h * P + pod] */
	/* The job's leaves: ids, pods, room per spine, links still to place. */
	int n_jl;
	int *jl_leaf, *jl_pod, *room, *jl_left;
	int *jl_total; /* uplinks still free over all spines (k_leaf - usage - links) */
	/* odd-set bound: components of what is left, per root: links left,
	 * links they can still take, and the ends they can take at one spine */
	int *uf, *comp_need, *comp_room, *comp_h, *less_room;
	/* Triangles of the demand (three leaves pairwise joined): pair indices. */
	size_t (*tri)[3];
	size_t n_tri;
	/* Pairs by pod pair: pairs pp_pairs[pp_off[g] .. pp_off[g + 1]); stamp
	 * marks the leaves counted once per pod pair. */
	size_t *pp_off, *pp_pairs, n_pp;
	int *stamp, stamp_now;
	int *pod_left; /* [pod] */
	/* Port classes: cls[k] the lowest port with k's partners; members of
	 * class c at mem[mem_off[c] .. mem_off[c + 1]); partner classes of c at
	 * pcl[pcl_off[c] .. pcl_off[c + 1]). */
	int *cls, *mem_off, *mem, *pcl_off, *pcl;
	/* Groups: links placed in each, the rank it was opened at (-1: not
	 * yet), and the next lower group it cannot be told from (-1: none). */
	int *g_links, *g_rank, *g_twin;
	int next_rank;
	struct pair *pairs;
	size_t n_pairs;
	size_t *order; /* fixed order when n_pairs > FIT_SCAN_PAIRS */
	struct link *links;
	size_t n_links, total;
	long steps, max_steps;
	size_t deepest; /* most links placed at once, and the pair then stuck */
	int stuck_pair;
};

static unsigned char *port_at(struct search *s, int h, int pod, int k)
{
	return &s->busy[((size_t)h * (size_t)s->P + (size_t)pod) * (size_t)s->K + (size_t)k];
}

static int *room_at(struct search *s, int jl, int h)
{
	return &s->room[(size_t)jl * (size_t)s->H + (size_t)h];
}

static int *nfree_at(struct search *s, int h, int pod)
{
	return &s->nfree[(size_t)h * (size_t)s->P + (size_t)pod];
}

/* The lowest free port of class c at (h, pod), or -1. */
static int lowest_free(struct search *s, int h, int pod, int c)
{
	for (int m = s->mem_off[c]; m < s->mem_off[c + 1]; m++)
		if (!*port_at(s, h, pod, s->mem[m]))
			return s->mem[m];
	return -1;
}

/* Whether spine ports k at pod i and k2 at pod j form a circuit (fabric.h). */
static bool joins(const struct ocs_fabric *f, int i, int j, int k, int k2)
{
	struct ocs_spine_port A = {i, 0, k}, B = {j, 0, k2};

	return ocs_fabric_tx_port(f, A).device == ocs_fabric_rx_port(f, B).device &&
	       ocs_fabric_tx_port(f, B).device == ocs_fabric_rx_port(f, A).device;
}

/* The partner table and the classes; pods 0 and 1 stand for any two. */
static int build_classes(struct search *s)
{
	int K = s->K;
	unsigned char *ok = calloc((size_t)K * (size_t)K, 1);
	int n = 0;

	s->cls = malloc((size_t)K * sizeof(int));
	s->mem_off = calloc((size_t)K + 1, sizeof(int));
	s->mem = malloc((size_t)K * sizeof(int));
	s->pcl_off = calloc((size_t)K + 1, sizeof(int));
	s->pcl = malloc((size_t)K * (size_t)K * sizeof(int) + 1);
	if (!ok || !s->cls || !s->mem_off || !s->mem || !s->pcl_off || !s->pcl) {
		free(ok);
		return -ENOMEM;
	}
	for (int k = 0; k < K; k++)
		for (int k2 = 0; k2 < K; k2++)
			ok[(size_t)k * K + k2] = joins(s->f, 0, 1, k, k2);
	for (int k = 0; k < K; k++) {
		s->cls[k] = k;
		for (int c = 0; c < k; c++) {
			if (s->cls[c] == c &&
			    !memcmp(&ok[(size_t)k * K], &ok[(size_t)c * K], (size_t)K)) {
				s->cls[k] = c;
				break;
			}
		}
	}
	/* members of each class, by class, lowest first */
	for (int c = 0; c < K; c++) {
		s->mem_off[c] = n;
		for (int k = c; k < K; k++)
			if (s->cls[k] == c)
				s->mem[n++] = k;
	}
	s->mem_off[K] = n;
	n = 0;
	for (int c = 0; c < K; c++) {
		s->pcl_off[c] = n;
		if (s->cls[c] != c)
			continue;
		for (int k2 = 0; k2 < K; k2++)
			if (ok[(size_t)c * K + k2] && s->cls[k2] == k2)
				s->pcl[n++] = k2;
	}
	s->pcl_off[K] = n;
	free(ok);
	return 0;
}

/*
 * The options of pair p in key order, at most max written to out (out may
 * be NULL); stops counting at `stop`. Each evaluation is a step.
 */
static size_t pair_options(struct search *s, size_t p, struct option *out, size_t stop)
{
	struct pair *q = &s->pairs[p];
	size_t n = 0;
	int K = s->K;

	for (int h = 0; h < s->H && n < stop; h++) {
		/* an unopened group ranks after every opened one */
		long rank = s->g_rank[h] >= 0 ? s->g_rank[h] : s->H + h;

		if (s->jl_total[q->a] <= 0 || s->jl_total[q->b] <= 0 || *room_at(s, q->a, h) <= 0 ||
		    *room_at(s, q->b, h) <= 0 || !*nfree_at(s, h, q->i) || !*nfree_at(s, h, q->j) ||
		    (q->last >= 0 && rank < q->last / ((long)K * K)) ||
		    (s->g_rank[h] < 0 && s->g_twin[h] >= 0 && s->g_rank[s->g_twin[h]] < 0))
			continue;
		for (int ci = 0; ci < K && n < stop; ci++) {
			int ki;

			if (s->cls[ci] != ci || (ki = lowest_free(s, h, q->i, ci)) < 0)
				continue;
			for (int x = s->pcl_off[ci]; x < s->pcl_off[ci + 1] && n < stop; x++) {
				int cj = s->pcl[x], kj;
				long key = (rank * K + ci) * K + cj;

				s->steps++;
				if (key < q->last || (kj = lowest_free(s, h, q->j, cj)) < 0)
					continue;
				if (out)
					out[n] = (struct option){h, ki, kj, key, 0};
				n++;
			}
		}
	}
	return n;
}

/*
 * At most how many circuits pods i and j can still form in group h (up to
 * `enough`): the smaller of the free ports at either pod that have a free
 * partner at the other.
 */
static int circuits_possible(struct search *s, int h, int i, int j, int enough)
{
	int at[2] = {0, 0};

	s->steps += s->K;

	for (int side = 0; side < 2; side++) {
		int me = side ? j : i, other = side ? i : j;

		for (int k = 0; k < s->K && at[side] < enough; k++) {
			int c = s->cls[k];

			if (*port_at(s, h, me, k))
				continue;
			for (int x = s->pcl_off[c]; x < s->pcl_off[c + 1]; x++) {
				if (lowest_free(s, h, other, s->pcl[x]) >= 0) {
					at[side]++;
					break;
				}
			}
		}
	}
	return at[0] < at[1] ? at[0] : at[1];
}

/* A leaf's share in a set at spine h: room, total room and links in the set. */
static int share(struct search *s, int x, int h, int in_set)
{
	int m = *room_at(s, x, h);

	m = s->jl_total[x] < m ? s->jl_total[x] : m;
	m = in_set < m ? in_set : m;
	return m > 0 ? m : 0;
}

static int uf_root(int *uf, int x)
{
	while (uf[x] != x)
		x = uf[x] = uf[uf[x]];
	return x;
}

/*
 * Odd sets: the links left inside a connected part C of the demand take two
 * uplink ends of one spine each, so per spine at most half of what C's
 * leaves can still take there (a leaf takes at most its room and the links
 * it has left). Catches odd cycles that every single-leaf count passes.
 */
static bool odd_sets_hold(struct search *s)
{
	for (int x = 0; x < s->n_jl; x++) {
		s->uf[x] = x;
		s->comp_need[x] = 0;
	}
	for (size_t p = 0; p < s->n_pairs; p++) {
		const struct pair *q = &s->pairs[p];
		int ra, rb;

		if (!q->left)
			continue;
		ra = uf_root(s->uf, q->a);
		rb = uf_root(s->uf, q->b);
		if (ra != rb) {
			s->uf[ra] = rb;
			s->comp_need[rb] += s->comp_need[ra];
		}
		s->comp_need[rb] += q->left;
	}
	for (int x = 0; x < s->n_jl; x++) {
		s->uf[x] = uf_root(s->uf, x);
		s->comp_room[x] = 0;
		s->less_room[x] = 0;
	}
	for (int h = 0; h < s->H; h++) {
		for (int x = 0; x < s->n_jl; x++)
			s->comp_h[x] = 0;
		for (int x = 0; x < s->n_jl; x++)
			s->comp_h[s->uf[x]] += share(s, x, h, s->jl_left[x]);
		for (int x = 0; x < s->n_jl; x++) {
			if (s->uf[x] == x)
				s->comp_room[x] += s->comp_h[x] / 2;
			/* the part without leaf x (odd when the part is even) */
			s->less_room[x] +=
				(s->comp_h[s->uf[x]] - share(s, x, h, s->jl_left[x])) / 2;
		}
	}
	s->steps += 2L * s->n_jl * s->H;
	for (int x = 0; x < s->n_jl; x++) {
		int r = s->uf[x];

		if ((r == x && s->comp_need[x] > s->comp_room[x]) ||
		    s->comp_need[r] - s->jl_left[x] > s->less_room[x])
			return false;
	}
	return true;
}

/*
 * At most how many circuits group h can still take among the pods where
 * the job has leaves with room: a circuit takes two ports of one device
 * (straight: port k at two pods; dual: two of device m's ports) or one
 * port of each parity of a device pair (cross).
 */
static int device_bound(struct search *s, int h)
{
	int n = 0, units = s->f->wiring == OCS_WIRING_STRAIGHT ? s->K : s->K / 2;

	s->steps += (long)s->P * s->K;
	for (int u = 0; u < units; u++) {
		int f[2] = {0, 0};

		for (int x = 0; x < s->n_jl; x++) {
			int pod = s->jl_pod[x];

			if ((x > 0 && s->jl_pod[x - 1] == pod) || !*nfree_at(s, h, pod))
				continue; /* one look per pod (job leaves are sorted by pod) */
			if (s->f->wiring == OCS_WIRING_STRAIGHT) {
				f[0] += !*port_at(s, h, pod, u);
			} else {
				f[0] += !*port_at(s, h, pod, 2 * u);
				f[1] += !*port_at(s, h, pod, 2 * u + 1);
			}
		}
		if (s->f->wiring == OCS_WIRING_CROSS)
			n += f[0] < f[1] ? f[0] : f[1];
		else
			n += (f[0] + f[1]) / 2;
	}
	return n;
}

/* The odd-set count on every triangle of the demand (see odd_sets_hold). */
static bool triangles_hold(struct search *s)
{
	for (size_t t = 0; t < s->n_tri; t++) {
		const struct pair *q[3] = {&s->pairs[s->tri[t][0]], &s->pairs[s->tri[t][1]],
					   &s->pairs[s->tri[t][2]]};
		int need = q[0]->left + q[1]->left + q[2]->left, have = 0;
		int leaf[3] = {q[0]->a, q[0]->b,
			       q[1]->a == q[0]->a || q[1]->a == q[0]->b ? q[1]->b : q[1]->a};

		if (!need)
			continue;
		for (int h = 0; h < s->H && have < need; h++) {
			int ends = 0;

			for (int v = 0; v < 3; v++) {
				int in_set = 0;

				for (int e = 0; e < 3; e++)
					if (q[e]->a == leaf[v] || q[e]->b == leaf[v])
						in_set += q[e]->left;
				ends += share(s, leaf[v], h, in_set);
			}
			have += ends / 2;
		}
		s->steps += s->H;
		if (have < need)
			return false;
	}
	return true;
}

/*
 * Pod pairs: the links left between pods i and j take, per group, one free
 * port at each, and uplink room of the leaves that have them.
 */
static bool pod_pairs_hold(struct search *s)
{
	for (size_t g = 0; g < s->n_pp; g++) {
		const struct pair *first = &s->pairs[s->pp_pairs[s->pp_off[g]]];
		int need = 0, have = 0;

		for (size_t x = s->pp_off[g]; x < s->pp_off[g + 1]; x++)
			need += s->pairs[s->pp_pairs[x]].left;
		for (int h = 0; h < s->H && need && have < need; h++) {
			int side[2] = {0, 0};

			s->stamp_now++;
			for (size_t x = s->pp_off[g]; x < s->pp_off[g + 1]; x++) {
				const struct pair *q = &s->pairs[s->pp_pairs[x]];
				int end[2] = {q->a, q->b};

				if (!q->left)
					continue;
				for (int e = 0; e < 2; e++) {
					int v = end[e];

					if (s->stamp[v] == s->stamp_now)
						continue;
					s->stamp[v] = s->stamp_now;
					side[s->jl_pod[v] != first->i] +=
						share(s, v, h, s->jl_left[v]);
				}
			}
			side[0] = *nfree_at(s, h, first->i) < side[0] ? *nfree_at(s, h, first->i)
								      : side[0];
			side[1] = *nfree_at(s, h, first->j) < side[1] ? *nfree_at(s, h, first->j)
								      : side[1];
			have += side[0] < side[1] ? side[0] : side[1];
		}
		s->steps += s->H;
		if (have < need)
			return false;
	}
	return true;
}

/* Necessary conditions on what is left: every leaf, pod and pair has room. */
static bool bounds_hold(struct search *s)
{
	/* this check's work counts against the bound like option evaluations */
	s->steps += (long)(s->n_pairs + (size_t)s->n_jl) * s->H;
	for (size_t p = 0; p < s->n_pairs; p++) {
		const struct pair *q = &s->pairs[p];
		int have = 0;

		for (int h = 0; h < s->H && have < q->left; h++) {
			int m = *room_at(s, q->a, h);

			m = *room_at(s, q->b, h) < m ? *room_at(s, q->b, h) : m;
			if (m > 0)
				m = circuits_possible(s, h, q->i, q->j, m);
			have += m;
		}
		if (have < q->left)
			return false;
	}
	for (int x = 0; x < s->n_jl; x++) {
		int room = 0;

		for (int h = 0; h < s->H && room < s->jl_left[x]; h++)
			room += *room_at(s, x, h) > 0 ? *room_at(s, x, h) : 0;
		if (room < s->jl_left[x] || s->jl_total[x] < s->jl_left[x])
			return false;
	}
	if (!odd_sets_hold(s) || !triangles_hold(s) || !pod_pairs_hold(s))
		return false;
	/* each link takes two port ends of one group, at two pods */
	{
		long ends = 0;

		for (int h = 0; h < s->H; h++) {
			long g = 0;

			for (int x = 0; x < s->n_jl;) {
				int pod = s->jl_pod[x], r = 0;

				for (; x < s->n_jl && s->jl_pod[x] == pod; x++)
					r += *room_at(s, x, h) > 0 && s->jl_total[x] > 0
						     ? *room_at(s, x, h)
						     : 0;
				g += r < *nfree_at(s, h, pod) ? r : *nfree_at(s, h, pod);
			}
			g /= 2;
			ends += g < device_bound(s, h) ? g : device_bound(s, h);
		}
		if (ends < (long)(s->total - s->n_links))
			return false;
	}
	for (int x = 0; x < s->n_jl; x++) {
		int pod = s->jl_pod[x], have = 0;

		if (!s->pod_left[pod] || (x > 0 && s->jl_pod[x - 1] == pod))
			continue; /* job leaves are sorted by leaf, so by pod */
		for (int h = 0; h < s->H && have < s->pod_left[pod]; h++) {
			int r = 0;

			for (int y = x; y < s->n_jl && s->jl_pod[y] == pod; y++)
				r += *room_at(s, y, h) > 0 ? *room_at(s, y, h) : 0;
			have += r < *nfree_at(s, h, pod) ? r : *nfree_at(s, h, pod);
		}
		if (have < s->pod_left[pod])
			return false;
	}
	return true;
}

static void take(struct search *s, size_t p, const struct option *o, bool on)
{
	struct pair *q = &s->pairs[p];
	int d = on ? -1 : 1;

	if (on && s->g_links[o->h]++ == 0)
		s->g_rank[o->h] = s->next_rank++;
	if (!on && --s->g_links[o->h] == 0) {
		s->g_rank[o->h] = -1;
		s->next_rank--;
	}
	*port_at(s, o->h, q->i, o->ki) = on;
	*port_at(s, o->h, q->j, o->kj) = on;
	*nfree_at(s, o->h, q->i) += d;
	*nfree_at(s, o->h, q->j) += d;
	*room_at(s, q->a, o->h) += d;
	*room_at(s, q->b, o->h) += d;
	s->jl_left[q->a] += d;
	s->jl_left[q->b] += d;
	s->jl_total[q->a] += d;
	s->jl_total[q->b] += d;
	s->pod_left[q->i] += d;
	s->pod_left[q->j] += d;
	q->left += d;
}

/* More room left after the option first, then the lower key. */
static int cmp_option(const void *x, const void *y)
{
	const struct option *a = x, *b = y;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return (a->key > b->key) - (a->key < b->key);
}

/* The pair to place a link of next (fewest options), or SIZE_MAX when one has none. */
static size_t next_pair(struct search *s, size_t *n_opts)
{
	size_t best = SIZE_MAX, best_n = SIZE_MAX;

	if (s->order) {
		for (size_t o = 0; o < s->n_pairs; o++) {
			size_t p = s->order[o];

			if (s->pairs[p].left) {
				*n_opts = pair_options(s, p, NULL, SIZE_MAX);
				if (!*n_opts)
					s->stuck_pair = (int)p;
				return *n_opts ? p : SIZE_MAX;
			}
		}
		return SIZE_MAX;
	}
	size_t best_left = 1;

	/* fewest options per link left, every pair checked for none */
	for (size_t p = 0; p < s->n_pairs; p++) {
		size_t n, left = (size_t)s->pairs[p].left;

		if (!left)
			continue;
		n = pair_options(s, p, NULL,
				 best == SIZE_MAX ? SIZE_MAX : best_n * left / best_left + 1);
		if (n == 0) {
			s->stuck_pair = (int)p;
			return SIZE_MAX;
		}
		if (best == SIZE_MAX || n * best_left < best_n * left) {
			best = p;
			best_n = n;
			best_left = left;
		}
	}
	*n_opts = best == SIZE_MAX ? 0 : pair_options(s, best, NULL, SIZE_MAX);
	return best;
}

/* 1 found (the links stay taken), 0 none below this point, -1 out of steps, -ENOMEM. */
static int dfs(struct search *s)
{
	size_t n_opts = 0, p;
	struct option *opts;
	int rc = 0;

	if (s->n_links == s->total)
		return 1;
	if (++s->steps > s->max_steps)
		return -1;
	if (s->n_links > s->deepest || s->deepest == 0)
		s->deepest = s->n_links;
	if (!bounds_hold(s))
		return 0;
	p = next_pair(s, &n_opts);
	if (p == SIZE_MAX)
		return s->steps > s->max_steps ? -1 : 0;
	opts = malloc(n_opts * sizeof(*opts));
	if (!opts)
		return -ENOMEM;
	pair_options(s, p, opts, n_opts);
	for (size_t o = 0; o < n_opts; o++) {
		const struct pair *q = &s->pairs[p];
		int h = opts[o].h;

		opts[o].score = (long)*room_at(s, q->a, h) + *room_at(s, q->b, h) +
				*nfree_at(s, h, q->i) + *nfree_at(s, h, q->j);
	}
	qsort(opts, n_opts, sizeof(*opts), cmp_option);
	for (size_t o = 0; o < n_opts && rc == 0; o++) {
		struct link *l = &s->links[s->n_links++];

		*l = (struct link){(int)p, opts[o].h, opts[o].ki, opts[o].kj, s->pairs[p].last};
		take(s, p, &opts[o], true);
		s->pairs[p].last =
			(((long)s->g_rank[opts[o].h] * s->K) + s->cls[opts[o].ki]) * s->K +
			s->cls[opts[o].kj];
		rc = dfs(s);
		if (rc == 1)
			break;
		take(s, p, &opts[o], false);
		s->pairs[p].last = l->prev_last;
		s->n_links--;
	}
	free(opts);
	return rc;
}

/* ---- words for a refusal ---- */

/* Appends "v0,v1,..." of n values (at most 16, then ",..."). */
static void list_ints(char *buf, size_t len, const int *v, int n)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int x = 0; x < n && at < len; x++) {
		if (x == 16) {
			snprintf(buf + at, len - at, ",...");
			return;
		}
		at += (size_t)snprintf(buf + at, len - at, "%s%d", x ? "," : "", v[x]);
	}
}

/* The set {x : mark[x]} of n as "0,2,3" ("none" when empty). */
static void list_set(char *buf, size_t len, const bool *mark, int n)
{
	int v[64], m = 0;

	for (int x = 0; x < n && m < 64; x++)
		if (mark[x])
			v[m++] = x;
	if (!m)
		snprintf(buf, len, "none");
	else
		list_ints(buf, len, v, m);
}

static const char *device_word(const struct ocs_fabric *f)
{
	return f->wiring == OCS_WIRING_CROSS ? "device pair" : "device";
}

/* The pre-checks of fit.h; true (limit and why set) when one proves there is no placement. */
static bool refuse_early(struct search *s, const int *usage, enum lc_limit *limit, char *why,
			 size_t len)
{
	int H = s->H;
	int *v = malloc(((size_t)H + (size_t)s->K) * sizeof(int));
	bool *g1 = calloc((size_t)H, sizeof(bool)), *g2 = calloc((size_t)H, sizeof(bool));
	char l1[80], l2[80], l3[80];
	bool done = false;

	if (!v || !g1 || !g2)
		goto out; /* no words then: the search decides */
	/* 1. a leaf's room over all spines */
	for (int x = 0; x < s->n_jl && !done; x++) {
		int room = 0;

		for (int h = 0; h < H; h++) {
			room += *room_at(s, x, h);
			v[h] = usage[(size_t)x * H + h];
		}
		if (s->jl_total[x] < room)
			room = s->jl_total[x] > 0 ? s->jl_total[x] : 0;
		if (room >= s->jl_left[x])
			continue;
		list_ints(l1, sizeof(l1), v, H);
		*limit = LC_LIMIT_LEAF_UPLINKS;
		snprintf(why, len,
			 "the uplinks of leaf %d: the job needs %d and %d are free (other jobs' "
			 "links on its uplinks to spines 0-%d: %s, at most %d each and %d in all)",
			 s->jl_leaf[x], s->jl_left[x], room, H - 1, l1, s->tau, s->f->k_leaf);
		done = true;
	}
	/* 2. a pair's spines with room at both leaves */
	for (size_t p = 0; p < s->n_pairs && !done; p++) {
		const struct pair *q = &s->pairs[p];
		int common = 0;
		bool *ra = g1, *rb = g2;

		for (int h = 0; h < H; h++) {
			ra[h] = *room_at(s, q->a, h) > 0;
			rb[h] = *room_at(s, q->b, h) > 0;
			common += ra[h] && rb[h] ? (*room_at(s, q->a, h) < *room_at(s, q->b, h)
							    ? *room_at(s, q->a, h)
							    : *room_at(s, q->b, h))
						 : 0;
		}
		if (common >= q->need)
			continue;
		list_set(l1, sizeof(l1), ra, H);
		list_set(l2, sizeof(l2), rb, H);
		*limit = LC_LIMIT_LEAF_UPLINKS;
		snprintf(why, len,
			 "the uplinks of leaves %d and %d: %d link(s) need a spine with a free "
			 "uplink at both, and there is room for %d (leaf %d has free uplinks to "
			 "spines %s, leaf %d to spines %s)",
			 q->la, q->lb, q->need, common, q->la, l1, q->lb, l2);
		done = true;
	}
	/* 3. a pod's free ports in the groups its leaves can use */
	for (int x = 0; x < s->n_jl && !done; x++) {
		int pod = s->jl_pod[x], have = 0;

		if (x > 0 && s->jl_pod[x - 1] == pod)
			continue;
		for (int h = 0; h < H; h++) {
			int r = 0;

			for (int y = x; y < s->n_jl && s->jl_pod[y] == pod; y++)
				r += *room_at(s, y, h);
			have += r < *nfree_at(s, h, pod) ? r : *nfree_at(s, h, pod);
			v[h] = *nfree_at(s, h, pod);
		}
		if (have >= s->pod_left[pod])
			continue;
		list_ints(l1, sizeof(l1), v, H);
		*limit = LC_LIMIT_POD_PORTS;
		snprintf(why, len,
			 "the ports of pod %d: the job needs %d and %d are free in the groups its "
			 "leaves can use (free ports per group 0-%d: %s, of %d)",
			 pod, s->pod_left[pod], have, H - 1, l1, s->K);
		done = true;
	}
	/* 4, 5. a pair's groups with a free port at both pods, and a circuit there */
	for (size_t p = 0; p < s->n_pairs && !done; p++) {
		const struct pair *q = &s->pairs[p];
		int first = -1;

		for (int h = 0; h < H; h++) {
			g1[h] = *room_at(s, q->a, h) > 0 && *room_at(s, q->b, h) > 0;
			g2[h] = g1[h] && *nfree_at(s, h, q->i) && *nfree_at(s, h, q->j);
			if (g2[h] && first < 0)
				first = h;
		}
		if (first < 0) {
			list_set(l1, sizeof(l1), g1, H);
			for (int h = 0; h < H; h++)
				v[h] = *nfree_at(s, h, q->i);
			list_ints(l2, sizeof(l2), v, H);
			for (int h = 0; h < H; h++)
				v[h] = *nfree_at(s, h, q->j);
			list_ints(l3, sizeof(l3), v, H);
			*limit = LC_LIMIT_POD_PORTS;
			snprintf(why, len,
				 "the ports of pods %d and %d: leaves %d and %d can use groups %s, "
				 "and none has a free port at both pods (free per group: pod %d "
				 "%s, pod %d %s)",
				 q->i, q->j, q->la, q->lb, l1, q->i, l2, q->j, l3);
			done = true;
			break;
		}
		if (pair_options(s, p, NULL, 1))
			continue;
		{
			int ni = 0, nj = 0;

			for (int k = 0; k < s->K; k++) {
				if (!*port_at(s, first, q->i, k))
					v[ni++] = k;
			}
			list_ints(l2, sizeof(l2), v, ni);
			for (int k = 0; k < s->K; k++) {
				if (!*port_at(s, first, q->j, k))
					v[nj++] = k;
			}
			list_ints(l3, sizeof(l3), v, nj);
			list_set(l1, sizeof(l1), g2, H);
		}
		*limit = LC_LIMIT_DEVICE_PORTS;
		snprintf(why, len,
			 "the ports of each %s: pods %d and %d have free ports in group(s) %s, but "
			 "never on one %s (group %d: pod %d ports %s, pod %d ports %s)",
			 device_word(s->f), q->i, q->j, l1, device_word(s->f), first, q->i, l2,
			 q->j, l3);
		done = true;
	}
out:
	free(v);
	free(g1);
	free(g2);
	return done;
}

/* ---- setup and results ---- */

static void search_free(struct search *s)
{
	free(s->busy);
	free(s->nfree);
	free(s->jl_leaf);
	free(s->jl_pod);
	free(s->room);
	free(s->jl_left);
	free(s->jl_total);
	free(s->uf);
	free(s->comp_need);
	free(s->comp_room);
	free(s->comp_h);
	free(s->less_room);
	free(s->tri);
	free(s->pp_off);
	free(s->pp_pairs);
	free(s->stamp);
	free(s->pod_left);
	free(s->cls);
	free(s->mem_off);
	free(s->mem);
	free(s->pcl_off);
	free(s->pcl);
	free(s->pairs);
	free(s->order);
	free(s->g_links);
	free(s->g_rank);
	free(s->g_twin);
	free(s->links);
}

/* Whether groups g and h are alike: the same free ports at every pod, the
 * same room at every leaf of the job. */
static bool same_group(struct search *s, int g, int h)
{
	if (memcmp(port_at(s, g, 0, 0), port_at(s, h, 0, 0), (size_t)s->P * (size_t)s->K))
		return false;
	for (int x = 0; x < s->n_jl; x++)
		if (*room_at(s, x, g) != *room_at(s, x, h))
			return false;
	return true;
}

static int cmp_int(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;

	return (a > b) - (a < b);
}

static int job_leaf(const struct search *s, int leaf)
{
	const int *at = bsearch(&leaf, s->jl_leaf, (size_t)s->n_jl, sizeof(int), cmp_int);

	return at ? (int)(at - s->jl_leaf) : -1;
}

/* A pair's pod pair as a sort key: (lower pod, higher pod, pair index). */
struct pod_key {
	int lo, hi;
	size_t p;
};

static int cmp_pod_key(const void *x, const void *y)
{
	const struct pod_key *a = x, *b = y;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return (a->p > b->p) - (a->p < b->p);
}

/*
 * The pod pairs and the triangles of the demand (triangles only for up to
 * FIT_SCAN_PAIRS pairs, through a pair matrix).
 */
static int index_pairs(struct search *s)
{
	size_t n = s->n_pairs, cap = 0;
	int J = s->n_jl;
	struct pod_key *k = malloc((n + 1) * sizeof(*k));

	s->pp_off = malloc((n + 2) * sizeof(size_t));
	s->pp_pairs = malloc((n + 1) * sizeof(size_t));
	s->stamp = calloc((size_t)J + 1, sizeof(int));
	if (!k || !s->pp_off || !s->pp_pairs || !s->stamp) {
		free(k);
		return -ENOMEM;
	}
	for (size_t p = 0; p < n; p++) {
		const struct pair *q = &s->pairs[p];

		k[p] = (struct pod_key){q->i < q->j ? q->i : q->j, q->i < q->j ? q->j : q->i, p};
	}
	qsort(k, n, sizeof(*k), cmp_pod_key);
	for (size_t p = 0; p < n; p++) {
		s->pp_pairs[p] = k[p].p;
		if (!p || k[p].lo != k[p - 1].lo || k[p].hi != k[p - 1].hi)
			s->pp_off[s->n_pp++] = p;
	}
	free(k);
	s->pp_off[s->n_pp] = n;
	if (n > FIT_SCAN_PAIRS)
		return 0;
	{
		long *m = malloc((size_t)J * (size_t)J * sizeof(long) + 1);

		if (!m)
			return -ENOMEM;
		for (size_t x = 0; x < (size_t)J * (size_t)J; x++)
			m[x] = -1;
		for (size_t p = 0; p < n; p++) {
			m[(size_t)s->pairs[p].a * J + s->pairs[p].b] = (long)p;
			m[(size_t)s->pairs[p].b * J + s->pairs[p].a] = (long)p;
		}
		for (int x = 0; x < J; x++)
			for (int y = x + 1; y < J; y++)
				for (int z = y + 1; z < J && m[(size_t)x * J + y] >= 0; z++) {
					size_t *t;

					if (m[(size_t)y * J + z] < 0 || m[(size_t)x * J + z] < 0)
						continue;
					if (s->n_tri == cap) {
						size_t(*v)[3] =
							realloc(s->tri, (2 * cap + 8) * sizeof(*v));

						if (!v) {
							free(m);
							return -ENOMEM;
						}
						s->tri = v;
						cap = 2 * cap + 8;
					}
					t = s->tri[s->n_tri++];
					t[0] = (size_t)m[(size_t)x * J + y];
					t[1] = (size_t)m[(size_t)y * J + z];
					t[2] = (size_t)m[(size_t)x * J + z];
				}
		free(m);
		return 0;
	}
}
/* Fills everything but the classes; *usage_out: other jobs' links per (job leaf, h). */
static int search_init(struct search *s, const struct fit_request *q, int **usage_out)
{
	const struct ocs_fabric *f = q->f;
	int *usage;

	s->f = f;
	s->P = f->pods;
	s->H = ocs_fabric_groups(f);
	s->K = f->k_spine;
	s->tau = f->tau;
	s->max_steps = q->max_steps > 0 ? q->max_steps : FIT_DEFAULT_STEPS;
	s->stuck_pair = -1;
	s->busy = calloc((size_t)s->H * (size_t)s->P * (size_t)s->K, 1);
	s->nfree = malloc((size_t)s->H * (size_t)s->P * sizeof(int));
	s->jl_leaf = malloc((2 * q->n_demand + 1) * sizeof(int));
	s->pairs = malloc((q->n_demand + 1) * sizeof(*s->pairs));
	s->pod_left = calloc((size_t)s->P, sizeof(int));
	if (!s->busy || !s->nfree || !s->jl_leaf || !s->pairs || !s->pod_left)
		return -ENOMEM;
	for (size_t d = 0; d < q->n_demand; d++) {
		s->jl_leaf[s->n_jl++] = q->demand[d].a;
		s->jl_leaf[s->n_jl++] = q->demand[d].b;
	}
	qsort(s->jl_leaf, (size_t)s->n_jl, sizeof(int), cmp_int);
	{
		int n = 0;

		for (int x = 0; x < s->n_jl; x++)
			if (!n || s->jl_leaf[n - 1] != s->jl_leaf[x])
				s->jl_leaf[n++] = s->jl_leaf[x];
		s->n_jl = n;
	}
	s->jl_pod = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->jl_left = calloc((size_t)s->n_jl + 1, sizeof(int));
	s->jl_total = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->uf = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->comp_need = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->comp_room = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->comp_h = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->less_room = malloc(((size_t)s->n_jl + 1) * sizeof(int));
	s->room = malloc(((size_t)s->n_jl * (size_t)s->H + 1) * sizeof(int));
	usage = calloc((size_t)s->n_jl * (size_t)s->H + 1, sizeof(int));
	*usage_out = usage;
	if (!s->jl_pod || !s->jl_left || !s->jl_total || !s->uf || !s->comp_need || !s->comp_room ||
	    !s->comp_h || !s->less_room || !s->room || !usage)
		return -ENOMEM;
	for (int x = 0; x < s->n_jl; x++)
		s->jl_pod[x] = ocs_fabric_leaf_pod(f, s->jl_leaf[x]);
	for (size_t u = 0; u < q->n_usage; u++) {
		int x = job_leaf(s, q->usage[u].leaf);

		if (x >= 0)
			usage[(size_t)x * s->H + q->usage[u].spine] += q->usage[u].links;
	}
	for (size_t r = 0; r < (size_t)s->n_jl * (size_t)s->H; r++)
		s->room[r] = usage[r] < s->tau ? s->tau - usage[r] : 0;
	for (int x = 0; x < s->n_jl; x++) {
		s->jl_total[x] = f->k_leaf;
		for (int h = 0; h < s->H; h++)
			s->jl_total[x] -= usage[(size_t)x * s->H + h];
	}
	for (size_t d = 0; d < q->n_demand; d++) {
		struct pair *p = &s->pairs[s->n_pairs++];

		*p = (struct pair){.a = job_leaf(s, q->demand[d].a),
				   .b = job_leaf(s, q->demand[d].b),
				   .la = q->demand[d].a,
				   .lb = q->demand[d].b,
				   .need = q->demand[d].links,
				   .left = q->demand[d].links,
				   .last = -1};
		p->i = s->jl_pod[p->a];
		p->j = s->jl_pod[p->b];
		s->jl_left[p->a] += p->need;
		s->jl_left[p->b] += p->need;
		s->pod_left[p->i] += p->need;
		s->pod_left[p->j] += p->need;
		s->total += (size_t)p->need;
	}
	if (index_pairs(s) != 0)
		return -ENOMEM;
	for (int h = 0; h < s->H; h++) {
		unsigned char *b = port_at(s, h, 0, 0);

		rz_busy_spine_ports(f, h, q->pinned, q->n_pinned, b);
		for (int pod = 0; pod < s->P; pod++) {
			int n = 0;

			for (int k = 0; k < s->K; k++)
				n += !*port_at(s, h, pod, k);
			*nfree_at(s, h, pod) = n;
		}
	}
	s->links = malloc((s->total + 1) * sizeof(*s->links));
	s->g_links = calloc((size_t)s->H + 1, sizeof(int));
	s->g_rank = calloc((size_t)s->H + 1, sizeof(int));
	s->g_twin = calloc((size_t)s->H + 1, sizeof(int));
	if (!s->links || !s->g_links || !s->g_rank || !s->g_twin)
		return -ENOMEM;
	for (int h = 0; h < s->H; h++) {
		s->g_rank[h] = -1;
		s->g_twin[h] = -1;
		for (int g = h - 1; g >= 0 && s->g_twin[h] < 0; g--)
			if (same_group(s, g, h))
				s->g_twin[h] = g;
	}
	return build_classes(s);
}

static int cmp_link_pair(const void *x, const void *y)
{
	const struct lc_spine_links *a = x, *b = y;

	if (a->a != b->a)
		return (a->a > b->a) - (a->a < b->a);
	if (a->b != b->b)
		return (a->b > b->b) - (a->b < b->b);
	return (a->h > b->h) - (a->h < b->h);
}

static int write_result(struct search *s, struct fit_result *out)
{
	const struct ocs_fabric *f = s->f;
	size_t n = 0;

	out->assignment = malloc((s->n_links + 1) * sizeof(*out->assignment));
	out->xcs = malloc((2 * s->n_links + 1) * sizeof(*out->xcs));
	if (!out->assignment || !out->xcs)
		return -ENOMEM;
	for (size_t x = 0; x < s->n_links; x++) {
		const struct link *l = &s->links[x];
		const struct pair *q = &s->pairs[l->p];
		int a = q->la < q->lb ? q->la : q->lb, b = q->la < q->lb ? q->lb : q->la;
		struct ocs_spine_port A = {q->i, l->h, l->ki}, B = {q->j, l->h, l->kj};
		struct ocs_device_port ta = ocs_fabric_tx_port(f, A), rb = ocs_fabric_rx_port(f, B);
		struct ocs_device_port tb = ocs_fabric_tx_port(f, B), ra = ocs_fabric_rx_port(f, A);

		out->assignment[x] = (struct lc_spine_links){a, b, l->h, 1};
		out->xcs[out->n_xcs++] = (struct ocs_xc){l->h, ta.device, ta.port, rb.port};
		out->xcs[out->n_xcs++] = (struct ocs_xc){l->h, tb.device, tb.port, ra.port};
	}
	qsort(out->assignment, s->n_links, sizeof(*out->assignment), cmp_link_pair);
	for (size_t x = 0; x < s->n_links; x++) {
		if (n && !cmp_link_pair(&out->assignment[n - 1], &out->assignment[x]))
			out->assignment[n - 1].links++;
		else
			out->assignment[n++] = out->assignment[x];
	}
	out->n_assignment = n;
	return 0;
}

/* A pair and how many options it had at the start. */
struct counted {
	size_t n, p;
};

static int cmp_counted(const void *x, const void *y)
{
	const struct counted *a = x, *b = y;

	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return (a->p > b->p) - (a->p < b->p);
}

/* Fixed order for many pairs: fewest options at the start first. */
static int fix_order(struct search *s)
{
	struct counted *c;

	if (s->n_pairs <= FIT_SCAN_PAIRS)
		return 0;
	s->order = malloc(s->n_pairs * sizeof(*s->order));
	c = malloc(s->n_pairs * sizeof(*c));
	if (!s->order || !c) {
		free(c);
		return -ENOMEM;
	}
	for (size_t p = 0; p < s->n_pairs; p++)
		c[p] = (struct counted){pair_options(s, p, NULL, SIZE_MAX), p};
	qsort(c, s->n_pairs, sizeof(*c), cmp_counted);
	for (size_t p = 0; p < s->n_pairs; p++)
		s->order[p] = c[p].p;
	free(c);
	return 0;
}

/*
 * One search over q within budget steps: 1 placed (the placement in out),
 * 0 proven none (limit and why in out), -1 out of steps, or -ENOMEM.
 * Adds the steps made to *steps.
 */
static int search_once(const struct fit_request *q, long budget, struct fit_result *out,
		       long *steps)
{
	struct search s = {0};
	int *usage = NULL, rc;

	rc = search_init(&s, q, &usage);
	s.max_steps = budget;
	if (rc)
		goto done;
	if (refuse_early(&s, usage, &out->limit, out->why, sizeof(out->why)))
		goto done; /* rc 0: proven */
	rc = fix_order(&s);
	if (rc == 0)
		rc = dfs(&s);
	*steps += s.steps;
	if (rc == 1) {
		int w = write_result(&s, out);

		rc = w ? w : 1;
	} else if (rc == 0 || rc == -1) {
		const struct pair *st = s.stuck_pair >= 0 ? &s.pairs[s.stuck_pair] : NULL;

		out->limit = rc == 0 ? LC_LIMIT_TOGETHER : LC_LIMIT_NONE;
		snprintf(out->why, sizeof(out->why),
			 "%s %zu link(s) together; the furthest attempt placed %zu, then leaves "
			 "%d and %d found no free circuit",
			 rc == 0 ? "each link fits alone, but no placement holds all"
				 : "the search found no placement of all",
			 s.total, s.deepest, st ? st->la : -1, st ? st->lb : -1);
	}
done:
	free(usage);
	search_free(&s);
	return rc;
}

/* The demand entries of q that touch leaf `leaf` (-1: any) and pod `pod` (-1: any). */
static size_t part_of(const struct fit_request *q, int leaf, int pod, struct lc_demand *out)
{
	size_t n = 0;

	for (size_t d = 0; d < q->n_demand; d++) {
		const struct lc_demand *x = &q->demand[d];

		if ((leaf < 0 || x->a == leaf || x->b == leaf) &&
		    (pod < 0 || ocs_fabric_leaf_pod(q->f, x->a) == pod ||
		     ocs_fabric_leaf_pod(q->f, x->b) == pod))
			out[n++] = *x;
	}
	return n;
}

/*
 * A proof from a part: a demand that does not fit has no placement when a
 * part of it has none. Tries each pair of several links, the pairs at each
 * leaf, at each pod, then at both leaves of each pair, each within budget steps, until *steps
 * reaches `until`. 1 when a part proves it (out says which), 0 when none does, -ENOMEM.
 */
static int prove_by_parts(const struct fit_request *q, long budget, long until,
			  struct fit_result *out, long *steps)
{
	struct lc_demand *part = malloc((q->n_demand + 1) * sizeof(*part));
	int N = ocs_fabric_leaves(q->f), rc = 0;

	if (!part)
		return -ENOMEM;
	for (int round = 0; round < 4 && rc == 0; round++) {
		int n_keys = round == 1 ? N : round == 2 ? q->f->pods : (int)q->n_demand;

		for (int key = 0; key < n_keys && rc == 0 && *steps < until; key++) {
			struct fit_request sub = *q;
			struct fit_result r = {0};
			char what[96];
			size_t n;

			if (round == 0) {
				part[0] = q->demand[key];
				n = part[0].links > 1;
				snprintf(what, sizeof(what),
					 "the %d links between leaves %d and %d", part[0].links,
					 part[0].a, part[0].b);
			} else if (round == 3) {
				int a = q->demand[key].a, b = q->demand[key].b;

				n = 0;
				for (size_t d = 0; d < q->n_demand; d++)
					if (q->demand[d].a == a || q->demand[d].b == a ||
					    q->demand[d].a == b || q->demand[d].b == b)
						part[n++] = q->demand[d];
				snprintf(what, sizeof(what), "the job's links at leaves %d and %d",
					 a, b);
			} else {
				n = part_of(q, round == 1 ? key : -1, round == 2 ? key : -1, part);
				snprintf(what, sizeof(what), "the job's links at %s %d",
					 round == 1 ? "leaf" : "pod", key);
			}
			if (n < (round == 0 ? 1u : 2u) || n == q->n_demand)
				continue;
			sub.demand = part;
			sub.n_demand = n;
			rc = search_once(&sub, budget, &r, steps);
			if (rc == 0) {
				out->limit = LC_LIMIT_TOGETHER;
				snprintf(out->why, sizeof(out->why),
					 "%s cannot all be placed, though each fits alone", what);
				rc = 1;
			} else {
				rc = rc < -1 ? rc : 0;
			}
			fit_result_clear(&r);
		}
	}
	free(part);
	return rc;
}

int fit_place(const struct fit_request *q, struct fit_result *out)
{
	long budget = q->max_steps > 0 ? q->max_steps : FIT_DEFAULT_STEPS;
	int rc;

	*out = (struct fit_result){.fit = LC_FIT_NONE};
	/* a short look first: most demands are placed or refused right away */
	rc = search_once(q, budget / 8, out, &out->steps);
	if (rc == -1 && q->n_demand > 1 && q->n_demand <= FIT_SCAN_PAIRS) {
		fit_result_clear(out);
		rc = prove_by_parts(q, budget / 8, out->steps + budget / 2, out, &out->steps);
		if (rc == 1)
			rc = 0;
		else if (rc == 0)
			rc = -1;
	}
	if (rc == -1) {
		fit_result_clear(out);
		rc = search_once(q, budget - out->steps, out, &out->steps);
	}
	if (rc == 1)
		out->fit = LC_FIT_PLACED;
	else if (rc == -1)
		out->fit = LC_FIT_GAVE_UP;
	if (rc < -1)
		fit_result_clear(out);
	return rc < -1 ? rc : 0;
}

void fit_result_clear(struct fit_result *r)
{
	free(r->assignment);
	free(r->xcs);
	r->assignment = NULL;
	r->xcs = NULL;
	r->n_assignment = r->n_xcs = 0;
}

int fit_overload(const struct ocs_fabric *f, const struct lc_spine_links *assignment,
		 size_t n_assignment, const struct lc_leaf_usage *usage, size_t n_usage, int *leaf,
		 int *spine, int *load)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f);
	int *mine = calloc((size_t)N * (size_t)H + 1, sizeof(int));
	int *all = calloc((size_t)N * (size_t)H + 1, sizeof(int));
	int found = 0;

	if (!mine || !all) {
		free(mine);
		free(all);
		return -ENOMEM;
	}
	for (size_t x = 0; x < n_assignment; x++) {
		mine[(size_t)assignment[x].a * H + assignment[x].h] += assignment[x].links;
		mine[(size_t)assignment[x].b * H + assignment[x].h] += assignment[x].links;
	}
	for (size_t u = 0; u < n_usage; u++)
		all[(size_t)usage[u].leaf * H + usage[u].spine] += usage[u].links;
	for (size_t r = 0; r < (size_t)N * H && !found; r++) {
		if (mine[r] && mine[r] + all[r] > f->tau) {
			*leaf = (int)(r / (size_t)H);
			*spine = (int)(r % (size_t)H);
			*load = mine[r] + all[r];
			found = 1;
		}
	}
	free(mine);
	free(all);
	return found;
}
