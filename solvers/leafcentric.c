/*
 * leafcentric.c - leaf-centric and pod-centric planning and the whole
 * planning call (see leafcentric.h for the method and the symbols); the
 * validations of a request and the usage helper are in
 * leafcentric_request.c.
 *
 * Internally the demand is a list of pairs (a < b, sorted) and each pair's
 * `links` units are numbered consecutively; a method writes one spine index
 * per unit (-1 = not placed yet). A shared pass then enforces spine port
 * capacity and leaf uplink totals (moving units off full spines to the
 * spine that raises contention least, or reporting them unplaced); where
 * contention is left, the leaf-centric planner repairs it (relieve_*,
 * swap_unplaced); then every output list is built.
 *
 * Live jobs' leaf-spine usage (w->pre) enters as the starting load of every
 * (leaf, spine): the colourings block the slots it fills, and every figure
 * counts it. Without usage, w->pre is NULL and the code paths are the ones
 * of plain planning.
 *
 * About 1,100 lines: the unit model, the methods, the capacity pass, the
 * contention repair and the outputs all read and write struct work and
 * struct placed, one plan's state, and call each other both ways (the
 * repair moves units with unit_move() and place_leftover() of the capacity
 * pass, and choose_spines() runs the repair), so a file cut between them
 * would be a call cycle and would publish both structs in a header. Kept
 * in one file.
 */
#include "leafcentric.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgecolor.h"
#include "fit.h"

/* tau = 1: defect moves allowed per unit first fit and Kempe chains left over. */
#define LC_WALK_STEPS 200
/*
 * Contention repair: walks tried per overloaded unit before it stays, and
 * walk steps allowed per plan: LC_RELIEF_STEPS_PER_UNIT per demand unit on
 * top of one full walk (bounds the time on instances that cannot be freed).
 */
#define LC_RELIEF_TRIES		 2
#define LC_RELIEF_STEPS_PER_UNIT 1
/*
 * Around usage (tau >= 2): colouring turns tried while the plan is
 * contended, at most LC_USAGE_TURNS and at most LC_USAGE_TURN_UNITS demand
 * units coloured over all turns after the first.
 */
#define LC_USAGE_TURNS	    6
#define LC_USAGE_TURN_UNITS 65536

/* ---- the unit model ---- */

struct work {
	const struct ocs_fabric *f;
	int N, H, P, lpp, tau;
	size_t n_pairs, n_units;
	int *a, *b, *links; /* pairs, a < b, sorted */
	size_t *off;	    /* first unit of each pair; off[n_pairs] = n_units */
	int *cap;	    /* free OCS-facing ports of spine (pod, h): [pod * H + h] */
	/* With usage only (else NULL): */
	int *pre;	   /* live jobs' leaf-spine load U: [leaf * H + h] */
	long pre_overload; /* U beyond tau, summed over (leaf, spine) */
};

static int pod_of_leaf(const struct work *w, int leaf)
{
	return ocs_fabric_leaf_pod(w->f, leaf);
}

/*
 * Sorts pairs (a < b, leaves 0..nl-1) by (a, b) in linear time: a counting
 * sort on a, then insertion sort of each (short) bucket on b. Returns the
 * sorted copy (caller frees) or NULL.
 */
static struct lc_demand *sort_pairs(const struct lc_demand *d, size_t n, int nl)
{
	size_t *start = calloc((size_t)nl + 1, sizeof(*start));
	struct lc_demand *out = malloc((n ? n : 1) * sizeof(*out));

	if (!start || !out) {
		free(start);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		start[d[i].a + 1]++;
	for (int l = 0; l < nl; l++)
		start[l + 1] += start[l];
	for (size_t i = 0; i < n; i++)
		out[start[d[i].a]++] = d[i];
	for (size_t lo = 0, l = 0; l < (size_t)nl; l++) {
		for (size_t i = lo + 1; i < start[l]; i++) {
			struct lc_demand x = out[i];
			size_t j = i;

			for (; j > lo && out[j - 1].b > x.b; j--)
				out[j] = out[j - 1];
			out[j] = x;
		}
		lo = start[l];
	}
	free(start);
	return out;
}

static void work_free(struct work *w)
{
	free(w->a);
	free(w->b);
	free(w->links);
	free(w->off);
	free(w->cap);
	free(w->pre);
}

/* Usage: fills w->pre and w->pre_overload. */
static int apply_usage(struct work *w, const struct lc_leaf_usage *usage, size_t n_usage)
{
	w->pre = calloc((size_t)w->N * (size_t)w->H, sizeof(int));
	if (!w->pre)
		return -ENOMEM;
	for (size_t i = 0; i < n_usage; i++)
		w->pre[(size_t)usage[i].leaf * w->H + usage[i].spine] += usage[i].links;
	for (size_t i = 0; i < (size_t)w->N * w->H; i++)
		w->pre_overload += w->pre[i] > w->tau ? w->pre[i] - w->tau : 0;
	return 0;
}

static int work_init(struct work *w, const struct ocs_fabric *f, const struct lc_demand *demand,
		     size_t n_demand, const struct ocs_xc *pinned, size_t n_pinned,
		     const struct lc_leaf_usage *usage, size_t n_usage)
{
	struct lc_demand *d = malloc((n_demand ? n_demand : 1) * sizeof(*d)), *sorted;
	unsigned char *busy;
	size_t n = 0;

	memset(w, 0, sizeof(*w));
	w->f = f;
	w->N = ocs_fabric_leaves(f);
	w->H = ocs_fabric_spines_per_pod(f);
	w->P = f->pods;
	w->lpp = ocs_fabric_leaves_per_pod(f);
	w->tau = f->tau;
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n_demand; i++) {
		if (demand[i].links == 0)
			continue;
		d[n] = demand[i];
		if (d[n].a > d[n].b) {
			d[n].a = demand[i].b;
			d[n].b = demand[i].a;
		}
		n++;
	}
	sorted = sort_pairs(d, n, w->N);
	free(d);
	if (!sorted)
		return -ENOMEM;
	d = sorted;
	w->n_pairs = n;
	w->a = malloc((n ? n : 1) * sizeof(int));
	w->b = malloc((n ? n : 1) * sizeof(int));
	w->links = malloc((n ? n : 1) * sizeof(int));
	w->off = malloc((n + 1) * sizeof(size_t));
	w->cap = malloc((size_t)w->P * (size_t)w->H * sizeof(int));
	busy = calloc((size_t)w->P * (size_t)f->k_spine, 1);
	if (!w->a || !w->b || !w->links || !w->off || !w->cap || !busy ||
	    (n_usage && apply_usage(w, usage, n_usage))) {
		free(d);
		free(busy);
		work_free(w);
		return -ENOMEM;
	}
	w->off[0] = 0;
	for (size_t i = 0; i < n; i++) {
		w->a[i] = d[i].a;
		w->b[i] = d[i].b;
		w->links[i] = d[i].links;
		w->off[i + 1] = w->off[i] + (size_t)d[i].links;
	}
	w->n_units = w->off[n];
	free(d);
	for (int h = 0; h < w->H; h++) {
		memset(busy, 0, (size_t)w->P * (size_t)f->k_spine);
		rz_busy_spine_ports(f, h, pinned, n_pinned, busy);
		for (int p = 0; p < w->P; p++) {
			int c = f->k_spine;

			for (int k = 0; k < f->k_spine; k++)
				c -= busy[(size_t)p * f->k_spine + k];
			w->cap[p * w->H + h] = c;
		}
	}
	free(busy);
	return 0;
}

/* ---- spine choice methods: each fills unit_h ---- */

/* splitmix64, for retries and the repair walk (fixed seeds: plans are reproducible) */
static uint64_t lc_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * Usage in the Euler method: leaf a has one sending and one receiving slot
 * per spine (a load of 2: tau for tau = 2, the fallback bound for tau = 1).
 * Where live jobs use the link, max(tau, 2) - U[a][h] slots stay (0..2);
 * where one stays, it goes to sending or receiving so that the leaf's
 * sending and receiving slots cover its out- and in-degree in the
 * orientation (always possible when the leaf has uplinks left for its
 * demand, tau <= 2; otherwise the colouring leaves units out, and so
 * chooses the links a full leaf drops).
 */
static int block_euler_slots(const struct work *w, const int *fwd, int turn, struct ec_graph *g)
{
	int *deg_out = calloc((size_t)w->N, sizeof(int)),
	    *deg_in = calloc((size_t)w->N, sizeof(int));
	int full_slots = w->tau > 2 ? w->tau : 2;

	if (!deg_out || !deg_in) {
		free(deg_out);
		free(deg_in);
		return -ENOMEM;
	}
	for (size_t p = 0; p < w->n_pairs; p++) {
		deg_out[w->a[p]] += fwd[p];
		deg_in[w->b[p]] += fwd[p];
		deg_out[w->b[p]] += w->links[p] - fwd[p];
		deg_in[w->a[p]] += w->links[p] - fwd[p];
	}
	for (int a = 0; a < w->N; a++) {
		const int *pre = &w->pre[(size_t)a * w->H];
		int both = 0, single = 0, send, k = 0, need_out, need_in, slack;

		for (int h = 0; h < w->H; h++) {
			int slots = full_slots - pre[h];

			both += slots >= 2;
			single += slots == 1;
		}
		if (both == w->H)
			continue;
		/* Singles that send: enough for the out-degree, the rest split evenly. */
		need_out = deg_out[a] > both ? deg_out[a] - both : 0;
		need_in = deg_in[a] > both ? deg_in[a] - both : 0;
		slack = single - need_out - need_in;
		send = need_out + (slack > 0 ? slack / 2 : 0);
		send = send > single ? single : send;
		/* Rotate by leaf (and turn) so that singles do not all send on the low spines. */
		for (int t = 0; t < w->H; t++) {
			int h = (a + t + turn) % w->H, slots = full_slots - pre[h];

			if (slots >= 2)
				continue;
			if (slots <= 0 || k >= send)
				ec_block(g, a, h); /* no sending slot */
			if (slots <= 0 || k < send)
				ec_block(g, w->N + a, h); /* no receiving slot */
			k += slots == 1;
		}
	}
	free(deg_out);
	free(deg_in);
	return 0;
}

/*
 * Euler orientation L = A + A^T, then an equitable H-colouring of A. Turn 0
 * colours pairs in order; other turns (retries around usage) start at
 * another pair and split single slots from another spine.
 */
static int assign_euler(const struct work *w, int turn, int *unit_h)
{
	int *fwd = malloc((w->n_pairs ? w->n_pairs : 1) * sizeof(int));
	struct ec_graph g;
	uint64_t rng = 0x6575u + (uint64_t)turn; /* fixed seeds: plans are reproducible */
	size_t first = turn && w->n_pairs ? (size_t)lc_next(&rng) % w->n_pairs : 0;
	int rc;

	if (!fwd)
		return -ENOMEM;
	rc = ec_orient_balanced(w->N, w->n_pairs, w->a, w->b, w->links, fwd);
	if (rc == 0)
		rc = ec_init(&g, 2 * w->N, w->H, (int)w->n_units);
	if (rc) {
		free(fwd);
		return rc;
	}
	if (w->pre && block_euler_slots(w, fwd, turn, &g)) {
		ec_release(&g);
		free(fwd);
		return -ENOMEM;
	}
	/*
	 * Sender a is vertex a, receiver b is vertex N + b; edge ids are unit
	 * ids. Turn 0 colours each edge as it is added, other turns afterwards
	 * from another pair on.
	 */
	for (size_t p = 0; p < w->n_pairs; p++) {
		for (int t = 0; t < w->links[p]; t++) {
			int from = t < fwd[p] ? w->a[p] : w->b[p],
			    to = t < fwd[p] ? w->b[p] : w->a[p];
			int e = ec_add_edge(&g, from, w->N + to);

			if (turn == 0)
				ec_color(&g, e, true, 0);
		}
	}
	for (size_t k = 0; turn && k < w->n_pairs; k++) {
		size_t p = (first + k) % w->n_pairs;

		for (size_t u = w->off[p]; u < w->off[p + 1]; u++)
			ec_color(&g, (int)u, true, 0);
	}
	/* Blocked slots can defeat Kempe chains: random walks for what is left. */
	for (int e = 0; w->pre && e < g.ne; e++)
		if (g.color[e] < 0)
			ec_color_walk(&g, e, LC_WALK_STEPS, &rng);
	/* Edge ids are unit ids; Kempe swaps may have moved earlier colours. */
	for (size_t u = 0; u < w->n_units; u++)
		unit_h[u] = g.color[u];
	ec_release(&g);
	free(fwd);
	return 0;
}

/*
 * tau = 1: colour the leaf multigraph itself (a spine neither leaf uses yet),
 * repairing with Kempe chains and then bounded random walks over the
 * colouring (ec_color_walk). Returns how many units stayed without a spine
 * (-1 on allocation failure).
 */
static long assign_greedy(const struct work *w, int *unit_h)
{
	struct ec_graph g;
	uint64_t rng = 0x6c63u; /* fixed seed: plans are reproducible */
	long left = 0;

	if (ec_init(&g, w->N, w->H, (int)w->n_units))
		return -1;
	/* Links that live jobs already fill (tau = 1: one path each) are taken. */
	for (int a = 0; w->pre && a < w->N; a++)
		for (int h = 0; h < w->H; h++)
			if (w->pre[(size_t)a * w->H + h] >= w->tau)
				ec_block(&g, a, h);
	for (size_t p = 0; p < w->n_pairs; p++)
		for (int t = 0; t < w->links[p]; t++)
			ec_color(&g, ec_add_edge(&g, w->a[p], w->b[p]), true, 2 * w->H);
	/* What first fit and Kempe chains left: random walks over the colouring. */
	for (int e = 0; e < g.ne; e++)
		if (g.color[e] < 0 && !ec_color_walk(&g, e, LC_WALK_STEPS, &rng))
			left++;
	/* Edge ids are unit ids; colours may have moved in later repairs. */
	for (size_t u = 0; u < w->n_units; u++)
		unit_h[u] = g.color[u];
	ec_release(&g);
	return left;
}

struct pod_pair_ref {
	int i, j;
	size_t pair;
};

static int cmp_pod_pair(const void *x, const void *y)
{
	const struct pod_pair_ref *a = x, *b = y;

	if (a->i != b->i)
		return a->i < b->i ? -1 : 1;
	if (a->j != b->j)
		return a->j < b->j ? -1 : 1;
	return (a->pair > b->pair) - (a->pair < b->pair);
}

/* Pod-centric: spread each pod pair's total over the spines, blind to leaves. */
static int assign_podcentric(const struct work *w, int *unit_h)
{
	struct pod_pair_ref *r = malloc((w->n_pairs ? w->n_pairs : 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	for (size_t p = 0; p < w->n_pairs; p++)
		r[p] = (struct pod_pair_ref){pod_of_leaf(w, w->a[p]), pod_of_leaf(w, w->b[p]), p};
	qsort(r, w->n_pairs, sizeof(*r), cmp_pod_pair);
	for (size_t lo = 0, hi; lo < w->n_pairs; lo = hi) {
		int next = (r[lo].i + r[lo].j) % w->H;

		for (hi = lo; hi < w->n_pairs && r[hi].i == r[lo].i && r[hi].j == r[lo].j; hi++) {
			size_t p = r[hi].pair;

			for (int t = 0; t < w->links[p]; t++) {
				unit_h[w->off[p] + (size_t)t] = next;
				next = (next + 1) % w->H;
			}
		}
	}
	free(r);
	return 0;
}

/* ---- capacity, contention, outputs ---- */

struct placed {
	int *unit_h;
	int *load;	 /* [leaf * H + h] */
	int *spine_used; /* [pod * H + h] */
	int *total;	 /* each leaf's links, usage included */
	size_t unplaced_units;
	int max_load;
};

static void placed_free(struct placed *s)
{
	free(s->unit_h);
	free(s->load);
	free(s->spine_used);
	free(s->total);
}

static int placed_init(struct placed *s, const struct work *w)
{
	memset(s, 0, sizeof(*s));
	s->unit_h = malloc((w->n_units ? w->n_units : 1) * sizeof(int));
	s->load = calloc((size_t)w->N * (size_t)w->H, sizeof(int));
	s->spine_used = calloc((size_t)w->P * (size_t)w->H, sizeof(int));
	s->total = calloc((size_t)w->N, sizeof(int));
	if (!s->unit_h || !s->load || !s->spine_used || !s->total) {
		placed_free(s);
		return -ENOMEM;
	}
	for (size_t u = 0; u < w->n_units; u++)
		s->unit_h[u] = -1;
	if (w->pre) {
		memcpy(s->load, w->pre, (size_t)w->N * (size_t)w->H * sizeof(int));
		for (size_t i = 0; i < (size_t)w->N * w->H; i++)
			s->total[i / (size_t)w->H] += w->pre[i];
	}
	return 0;
}

static void update_max_load(const struct work *w, struct placed *s)
{
	s->max_load = 0;
	for (size_t i = 0; i < (size_t)w->N * w->H; i++)
		if (s->load[i] > s->max_load)
			s->max_load = s->load[i];
}

static void unit_move(const struct work *w, struct placed *s, size_t p, int h, int delta)
{
	int pa = pod_of_leaf(w, w->a[p]), pb = pod_of_leaf(w, w->b[p]);

	s->load[(size_t)w->a[p] * w->H + h] += delta;
	s->load[(size_t)w->b[p] * w->H + h] += delta;
	s->total[w->a[p]] += delta;
	s->total[w->b[p]] += delta;
	s->spine_used[pa * w->H + h] += delta;
	s->spine_used[pb * w->H + h] += delta;
}

/*
 * Puts unplaced unit u of pair p on the spine with a free port at both
 * pods where the higher of the two leaves' loads is lowest, if both leaves
 * have an uplink left (their totals, usage included, under k_leaf).
 * Returns whether it did.
 */
static bool place_best(const struct work *w, struct placed *s, size_t p, size_t u)
{
	int pa = pod_of_leaf(w, w->a[p]), pb = pod_of_leaf(w, w->b[p]);
	int best = -1, best_score = 0;

	if (s->total[w->a[p]] >= w->f->k_leaf || s->total[w->b[p]] >= w->f->k_leaf)
		return false;
	for (int c = 0; c < w->H; c++) {
		int la = s->load[(size_t)w->a[p] * w->H + c];
		int lb = s->load[(size_t)w->b[p] * w->H + c];
		int score = (la > lb ? la : lb) * 4 * w->tau + la + lb;

		if (s->spine_used[pa * w->H + c] >= w->cap[pa * w->H + c] ||
		    s->spine_used[pb * w->H + c] >= w->cap[pb * w->H + c])
			continue;
		if (best < 0 || score < best_score) {
			best = c;
			best_score = score;
		}
	}
	s->unit_h[u] = best;
	if (best >= 0)
		unit_move(w, s, p, best, +1);
	return best >= 0;
}

/*
 * Keeps every spine within its free ports and every leaf within its
 * k_leaf uplinks: units on an overfull spine, units past a leaf's uplinks
 * (pairs in (a, b) order) and units without a spine go to place_best();
 * none left = unplaced (-1).
 */
static void enforce_capacity(const struct work *w, struct placed *s)
{
	for (size_t p = 0; p < w->n_pairs; p++) {
		for (size_t u = w->off[p]; u < w->off[p + 1]; u++) {
			if (s->unit_h[u] < 0)
				continue;
			if (s->total[w->a[p]] >= w->f->k_leaf || s->total[w->b[p]] >= w->f->k_leaf)
				s->unit_h[u] = -1;
			else
				unit_move(w, s, p, s->unit_h[u], +1);
		}
	}
	s->unplaced_units = 0;
	for (size_t p = 0; p < w->n_pairs; p++) {
		int pa = pod_of_leaf(w, w->a[p]), pb = pod_of_leaf(w, w->b[p]);

		for (size_t u = w->off[p]; u < w->off[p + 1]; u++) {
			int h = s->unit_h[u];

			if (h >= 0 && s->spine_used[pa * w->H + h] <= w->cap[pa * w->H + h] &&
			    s->spine_used[pb * w->H + h] <= w->cap[pb * w->H + h])
				continue;
			if (h >= 0) {
				unit_move(w, s, p, h, -1);
				s->unit_h[u] = -1;
			}
			if (!place_best(w, s, p, u))
				s->unplaced_units++;
		}
	}
	update_max_load(w, s);
}

/* Gives units left unplaced another place_best() (after moves freed ports). */
static void place_leftover(const struct work *w, struct placed *s)
{
	s->unplaced_units = 0;
	for (size_t p = 0; p < w->n_pairs; p++)
		for (size_t u = w->off[p]; u < w->off[p + 1]; u++)
			if (s->unit_h[u] < 0 && !place_best(w, s, p, u))
				s->unplaced_units++;
	update_max_load(w, s);
}

/* ---- repair of contention left over ---- */

/* One move of a repair walk: the unit and its spine before the move. */
struct relief_move {
	size_t unit;
	int h;
};

struct relief {
	const struct work *w;
	struct placed *s;
	size_t *pair_of;    /* unit -> pair */
	size_t *leaf_start; /* units at each leaf: leaf_units[leaf_start[l] ..] */
	size_t *leaf_units;
	struct relief_move *log; /* the walk's moves, to undo it */
	int n_log;
	uint64_t rng;
	long steps_left; /* walk steps this plan may still take */
};

static void put_unit(const struct relief *r, size_t u, int h)
{
	int *uh = &r->s->unit_h[u];

	if (*uh >= 0)
		unit_move(r->w, r->s, r->pair_of[u], *uh, -1);
	*uh = h;
	if (h >= 0)
		unit_move(r->w, r->s, r->pair_of[u], h, +1);
}

static void set_unit(struct relief *r, size_t u, int h)
{
	r->log[r->n_log].unit = u;
	r->log[r->n_log++].h = r->s->unit_h[u];
	put_unit(r, u, h);
}

static bool has_room(const struct relief *r, int leaf, int h)
{
	return r->s->load[(size_t)leaf * r->w->H + h] < r->w->tau;
}

static bool has_port(const struct relief *r, int leaf, int h)
{
	int q = pod_of_leaf(r->w, leaf) * r->w->H + h;

	return r->s->spine_used[q] < r->w->cap[q];
}

/* A unit other than `skip` on spine h at leaf q, or SIZE_MAX. */
static size_t unit_at(const struct relief *r, int q, int h, size_t skip)
{
	for (size_t i = r->leaf_start[q]; i < r->leaf_start[q + 1]; i++) {
		size_t u = r->leaf_units[i];

		if (u != skip && r->s->unit_h[u] == h)
			return u;
	}
	return SIZE_MAX;
}

/*
 * Moves unit u (on a link loaded beyond tau) to a spine with room at both
 * leaves and a free port at both pods. Where only one leaf x has room at a
 * spine, u goes there anyway and a unit of the other leaf y on that spine
 * is lifted off to be moved in turn (y's load and its pod's ports stay as
 * they were): a walk of at most LC_WALK_STEPS. A walk that does not end in
 * room is undone, so no load ever grows. Returns whether u was relieved.
 */
static bool relieve_unit(struct relief *r, size_t u)
{
	const struct work *w = r->w;
	size_t cur = u, last = SIZE_MAX;

	r->n_log = 0;
	set_unit(r, cur, -1);
	for (int step = 0; step <= LC_WALK_STEPS && r->steps_left-- > 0; step++) {
		size_t p = r->pair_of[cur];
		uint64_t rnd = lc_next(&r->rng);
		int start = (int)(rnd % (uint64_t)w->H);
		bool moved = false;

		for (int k = 0; k < w->H; k++) {
			int c = (start + k) % w->H;

			if (has_room(r, w->a[p], c) && has_room(r, w->b[p], c) &&
			    has_port(r, w->a[p], c) && has_port(r, w->b[p], c)) {
				set_unit(r, cur, c);
				return true;
			}
		}
		for (int t = 0; t < 2 * w->H && !moved && step < LC_WALK_STEPS; t++) {
			int c = (start + t / 2) % w->H;
			int side = (int)(((rnd >> 32) + (uint64_t)t) & 1);
			int x = side ? w->b[p] : w->a[p], y = side ? w->a[p] : w->b[p];
			size_t v, pv;

			if (!has_room(r, x, c) || has_room(r, y, c))
				continue;
			v = unit_at(r, y, c, last);
			if (v == SIZE_MAX)
				continue;
			/* v frees a port at its other leaf's pod: enough when that is x's. */
			pv = r->pair_of[v];
			if (!has_port(r, x, c) &&
			    pod_of_leaf(w, w->a[pv] == y ? w->b[pv] : w->a[pv]) !=
				    pod_of_leaf(w, x))
				continue;
			set_unit(r, v, -1);
			set_unit(r, cur, c);
			last = cur;
			cur = v;
			moved = true;
		}
		if (!moved)
			break;
	}
	while (r->n_log > 0) {
		r->n_log--;
		put_unit(r, r->log[r->n_log].unit, r->log[r->n_log].h);
	}
	return false;
}

/* A spine where both leaves of pair p have room and both pods a port, or -1. */
static int free_spine(const struct relief *r, size_t p)
{
	const struct work *w = r->w;

	for (int c = 0; c < w->H; c++)
		if (has_room(r, w->a[p], c) && has_room(r, w->b[p], c) && has_port(r, w->a[p], c) &&
		    has_port(r, w->b[p], c))
			return c;
	return -1;
}

/*
 * Unit u sits on an overloaded link at a leaf x whose uplinks are all used
 * (usage included), so some link of x is unplaced anyway: if an unplaced
 * unit v of x fits contention-free once u gives its uplink back, v takes
 * it and u becomes the unplaced one. As many links stay unplaced, and
 * contention drops. Returns whether it swapped.
 */
static bool swap_unplaced(struct relief *r, size_t u)
{
	const struct work *w = r->w;
	size_t p = r->pair_of[u];
	int h = r->s->unit_h[u];

	for (int side = 0; side < 2; side++) {
		int x = side ? w->b[p] : w->a[p];

		if (r->s->total[x] < w->f->k_leaf)
			continue;
		put_unit(r, u, -1);
		for (size_t i = r->leaf_start[x]; i < r->leaf_start[x + 1]; i++) {
			size_t v = r->leaf_units[i], pv = r->pair_of[v];
			int y = w->a[pv] == x ? w->b[pv] : w->a[pv], c;

			if (r->s->unit_h[v] >= 0 || r->s->total[y] >= w->f->k_leaf)
				continue;
			c = free_spine(r, pv);
			if (c >= 0) {
				put_unit(r, v, c);
				return true;
			}
		}
		put_unit(r, u, h);
	}
	return false;
}

/*
 * Contention left over after a method (tau = 1 beyond the greedy, usage,
 * pinned ports): walks every unit on an overloaded link (relieve_unit),
 * then, around usage, swaps overloaded units for unplaced ones at full
 * leaves (swap_unplaced).
 * Runs only when some link is over tau, so plans without contention pay
 * nothing.
 */
static int relieve_contention(const struct work *w, struct placed *s)
{
	struct relief r = {.w = w,
			   .s = s,
			   .rng = 0x7265u,
			   .steps_left =
				   LC_WALK_STEPS + LC_RELIEF_STEPS_PER_UNIT * (long)w->n_units};
	size_t *fill;

	if (s->max_load <= w->tau || w->n_units == 0)
		return 0;
	r.pair_of = malloc(w->n_units * sizeof(*r.pair_of));
	r.leaf_start = calloc((size_t)w->N + 1, sizeof(*r.leaf_start));
	r.leaf_units = malloc(2 * w->n_units * sizeof(*r.leaf_units));
	r.log = malloc((2 * LC_WALK_STEPS + 4) * sizeof(*r.log));
	fill = malloc(((size_t)w->N + 1) * sizeof(*fill));
	if (!r.pair_of || !r.leaf_start || !r.leaf_units || !r.log || !fill) {
		free(r.pair_of);
		free(r.leaf_start);
		free(r.leaf_units);
		free(r.log);
		free(fill);
		return -ENOMEM;
	}
	for (size_t p = 0; p < w->n_pairs; p++) {
		r.leaf_start[w->a[p] + 1] += (size_t)w->links[p];
		r.leaf_start[w->b[p] + 1] += (size_t)w->links[p];
		for (size_t u = w->off[p]; u < w->off[p + 1]; u++)
			r.pair_of[u] = p;
	}
	for (int l = 0; l < w->N; l++)
		r.leaf_start[l + 1] += r.leaf_start[l];
	memcpy(fill, r.leaf_start, ((size_t)w->N + 1) * sizeof(*fill));
	for (size_t p = 0; p < w->n_pairs; p++) {
		for (size_t u = w->off[p]; u < w->off[p + 1]; u++) {
			r.leaf_units[fill[w->a[p]]++] = u;
			r.leaf_units[fill[w->b[p]]++] = u;
		}
	}
	/* Units placed after the walks freed ports get one more round. */
	for (int round = 0; round < 2 && s->max_load > w->tau; round++) {
		size_t unplaced = s->unplaced_units;

		for (size_t u = 0; u < w->n_units; u++) {
			size_t p = r.pair_of[u];
			int h = s->unit_h[u];

			if (h < 0 || (s->load[(size_t)w->a[p] * w->H + h] <= w->tau &&
				      s->load[(size_t)w->b[p] * w->H + h] <= w->tau))
				continue;
			for (int t = 0; t < LC_RELIEF_TRIES && r.steps_left > 0; t++)
				if (relieve_unit(&r, u))
					break;
		}
		place_leftover(w, s);
		if (s->unplaced_units == unplaced)
			break;
	}
	for (size_t u = 0; w->pre && s->unplaced_units && u < w->n_units; u++) {
		size_t p = r.pair_of[u];
		int h = s->unit_h[u];

		if (h >= 0 && (s->load[(size_t)w->a[p] * w->H + h] > w->tau ||
			       s->load[(size_t)w->b[p] * w->H + h] > w->tau))
			swap_unplaced(&r, u);
	}
	/* A swap gives an uplink back at u's other leaf: room for units left out. */
	place_leftover(w, s);
	free(r.pair_of);
	free(r.leaf_start);
	free(r.leaf_units);
	free(r.log);
	free(fill);
	return 0;
}

enum method { METHOD_LEAF, METHOD_POD };

/* Links loaded beyond tau, summed over every (leaf, spine). */
static long overload(const struct work *w, const struct placed *s)
{
	long sum = 0;

	for (size_t i = 0; i < (size_t)w->N * w->H; i++)
		sum += s->load[i] > w->tau ? s->load[i] - w->tau : 0;
	return sum;
}

/*
 * Whether the plan loads some link beyond tau that the live jobs' usage did
 * not already: contention this plan adds (or could still avoid).
 */
static bool adds_overload(const struct work *w, const struct placed *s)
{
	return w->pre ? overload(w, s) > w->pre_overload : s->max_load > w->tau;
}

/* Fewer unplaced units, then less overload, then a lower maximum. */
static bool better(const struct work *w, const struct placed *x, const struct placed *y)
{
	long ox = overload(w, x), oy = overload(w, y);

	if (x->unplaced_units != y->unplaced_units)
		return x->unplaced_units < y->unplaced_units;
	if (ox != oy)
		return ox < oy;
	return x->max_load < y->max_load;
}

/* Runs a method (and for tau = 1 the fallback) and enforces capacity. */
static int choose_spines(const struct work *w, enum method m, struct placed *s)
{
	struct placed alt;
	long left;
	int rc = placed_init(s, w);

	if (rc)
		return rc;
	if (m == METHOD_POD) {
		rc = assign_podcentric(w, s->unit_h);
		if (rc == 0)
			enforce_capacity(w, s);
		return rc;
	}
	if (w->tau != 1) {
		rc = assign_euler(w, 0, s->unit_h);
		if (rc == 0) {
			enforce_capacity(w, s);
			rc = relieve_contention(w, s);
		}
		/* Around usage, colouring order matters: a few more turns, keep the best. */
		for (int turn = 1; rc == 0 && w->pre && turn < LC_USAGE_TURNS &&
				   (size_t)turn * w->n_units <= LC_USAGE_TURN_UNITS + w->n_units &&
				   adds_overload(w, s);
		     turn++) {
			rc = placed_init(&alt, w);
			if (rc)
				break;
			rc = assign_euler(w, turn, alt.unit_h);
			if (rc == 0) {
				enforce_capacity(w, &alt);
				rc = relieve_contention(w, &alt);
			}
			if (rc == 0 && better(w, &alt, s)) {
				placed_free(s);
				*s = alt;
			} else {
				placed_free(&alt);
			}
		}
		return rc;
	}
	left = assign_greedy(w, s->unit_h);
	if (left < 0)
		return -ENOMEM;
	enforce_capacity(w, s);
	if (left == 0 && s->unplaced_units == 0 && !adds_overload(w, s))
		return 0;
	rc = placed_init(&alt, w);
	if (rc)
		return rc;
	rc = assign_euler(w, 0, alt.unit_h);
	if (rc) {
		placed_free(&alt);
		return rc;
	}
	enforce_capacity(w, &alt);
	if (w->pre ? better(w, &alt, s)
		   : alt.unplaced_units < s->unplaced_units ||
			     (alt.unplaced_units == s->unplaced_units &&
			      alt.max_load < s->max_load)) {
		placed_free(s);
		*s = alt;
	} else {
		placed_free(&alt);
	}
	return relieve_contention(w, s);
}

static int cmp_int(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;

	return (a > b) - (a < b);
}

/*
 * Fills assignment (pair by pair, pairs sorted by (a, b)), unplaced, and the
 * topology sorted by (i, j, h): pairs come in order of pod i = pod(a), so
 * each pod's circuits are summed in a dense [pod j][h] table and emitted
 * before the next pod starts.
 */
static int build_outputs(const struct work *w, const struct placed *s, struct lc_plan *r)
{
	int *per_h = calloc((size_t)w->H, sizeof(int));
	int *dense = calloc((size_t)w->P * (size_t)w->H, sizeof(int));
	int *touched = malloc((size_t)w->P * sizeof(int));
	bool *is_touched = calloc((size_t)w->P, sizeof(bool));
	int n_touched = 0;

	r->assignment = malloc((w->n_units ? w->n_units : 1) * sizeof(*r->assignment));
	r->topology = malloc((w->n_units ? w->n_units : 1) * sizeof(*r->topology));
	r->unplaced = malloc((w->n_pairs ? w->n_pairs : 1) * sizeof(*r->unplaced));
	if (!per_h || !dense || !touched || !is_touched || !r->assignment || !r->topology ||
	    !r->unplaced) {
		free(per_h);
		free(dense);
		free(touched);
		free(is_touched);
		return -ENOMEM;
	}
	for (size_t p = 0; p <= w->n_pairs; p++) {
		int pa = p < w->n_pairs ? pod_of_leaf(w, w->a[p]) : -1, pb, none = 0;

		if (p > 0 && pa != pod_of_leaf(w, w->a[p - 1])) {
			/* Pod i = pod(a[p - 1]) is complete: emit its row of the topology. */
			int i = pod_of_leaf(w, w->a[p - 1]);

			qsort(touched, (size_t)n_touched, sizeof(int), cmp_int);
			for (int t = 0; t < n_touched; t++) {
				int j = touched[t];

				for (int h = 0; h < w->H; h++) {
					int *c = &dense[(size_t)j * w->H + h];

					if (*c)
						r->topology[r->n_topology++] =
							(struct rz_circuits){i, j, h, *c};
					*c = 0;
				}
				is_touched[j] = false;
			}
			n_touched = 0;
		}
		if (p == w->n_pairs)
			break;
		pb = pod_of_leaf(w, w->b[p]);
		for (size_t u = w->off[p]; u < w->off[p + 1]; u++) {
			if (s->unit_h[u] >= 0)
				per_h[s->unit_h[u]]++;
			else
				none++;
		}
		for (int h = 0; h < w->H; h++) {
			if (!per_h[h])
				continue;
			r->assignment[r->n_assignment++] =
				(struct lc_spine_links){w->a[p], w->b[p], h, per_h[h]};
			dense[(size_t)pb * w->H + h] += per_h[h];
			per_h[h] = 0;
		}
		if (!is_touched[pb]) {
			is_touched[pb] = true;
			touched[n_touched++] = pb;
		}
		if (none)
			r->unplaced[r->n_unplaced++] = (struct lc_demand){w->a[p], w->b[p], none};
	}
	free(per_h);
	free(dense);
	free(touched);
	free(is_touched);
	r->max_contention = (double)s->max_load / w->tau;
	for (int a = 0; a < w->N; a++) {
		for (int h = 0; h < w->H; h++) {
			if (s->load[(size_t)a * w->H + h] > w->tau) {
				r->contended_leaves++;
				break;
			}
		}
	}
	return 0;
}

/*
 * Realizes r's topology around `busy` (n_busy: the pinned cross-connects,
 * existing first unless replan, then the ports out of service): the
 * configuration is the kept existing ones, then the new ones.
 */
static int realize_plan(const struct ocs_fabric *f, const struct ocs_xc *existing,
			size_t n_existing, const struct ocs_xc *busy, size_t n_busy, bool replan,
			struct lc_plan *r)
{
	size_t n_keep = replan ? 0 : n_existing;
	struct rz_result *z;
	struct ocs_xc *sorted;
	int rc = rz_realize(f, r->topology, r->n_topology, busy, n_busy, replan ? existing : NULL,
			    replan ? n_existing : 0, &z);

	if (rc)
		return rc;
	r->n_xcs = n_keep + z->n_xcs;
	r->xcs = malloc((r->n_xcs ? r->n_xcs : 1) * sizeof(*r->xcs));
	sorted = n_existing ? malloc((r->n_xcs ? r->n_xcs : 1) * sizeof(*sorted)) : NULL;
	r->moved = malloc((n_existing ? n_existing : 1) * sizeof(*r->moved));
	if (!r->xcs || (n_existing && !sorted) || !r->moved) {
		free(sorted);
		rz_result_free(z);
		return -ENOMEM;
	}
	if (n_keep)
		memcpy(r->xcs, existing, n_keep * sizeof(*existing));
	if (z->n_xcs)
		memcpy(r->xcs + n_keep, z->xcs, z->n_xcs * sizeof(*z->xcs));
	if (n_existing) {
		memcpy(sorted, r->xcs, r->n_xcs * sizeof(*sorted));
		qsort(sorted, r->n_xcs, sizeof(*sorted), ocs_xc_cmp_in_out);
	}
	for (size_t i = 0; i < n_existing; i++)
		if (!bsearch(&existing[i], sorted, r->n_xcs, sizeof(*sorted), ocs_xc_cmp_in_out))
			r->moved[r->n_moved++] = existing[i];
	r->changed_existing = r->n_moved;
	r->unrealized = z->unrealized;
	r->n_unrealized = z->n_unrealized;
	r->unrealized_circuits = z->unrealized_circuits;
	r->unrealized_before_repair = z->unrealized_before_repair;
	z->unrealized = NULL;
	free(sorted);
	rz_result_free(z);
	return 0;
}

/* Topology order: (i, j, h). */
static int cmp_topology(const void *x, const void *y)
{
	const struct rz_circuits *a = x, *b = y;

	if (a->i != b->i)
		return a->i < b->i ? -1 : 1;
	if (a->j != b->j)
		return a->j < b->j ? -1 : 1;
	return (a->h > b->h) - (a->h < b->h);
}

/*
 * Takes the exact search's placement as the plan: its assignment, the
 * topology it makes, the configuration (pinned first, then the new
 * cross-connects), nothing unplaced, unrealized or moved, and every
 * contention figure over the usage and the new links.
 */
static int adopt_fit(const struct ocs_fabric *f, struct fit_result *fr,
		     const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
		     struct lc_plan *r)
{
	int H = ocs_fabric_groups(f), N = ocs_fabric_leaves(f), max = 0;
	int *load = calloc((size_t)N * (size_t)H + 1, sizeof(int));
	struct ocs_xc *xcs = malloc((n_existing + fr->n_xcs + 1) * sizeof(*xcs));
	struct rz_circuits *topo = malloc((fr->n_assignment + 1) * sizeof(*topo));
	size_t n_topo = 0;

	if (!load || !xcs || !topo) {
		free(load);
		free(xcs);
		free(topo);
		return -ENOMEM;
	}
	if (n_existing)
		memcpy(xcs, existing, n_existing * sizeof(*xcs));
	if (fr->n_xcs)
		memcpy(xcs + n_existing, fr->xcs, fr->n_xcs * sizeof(*xcs));
	for (size_t x = 0; x < fr->n_assignment; x++) {
		const struct lc_spine_links *l = &fr->assignment[x];
		int i = ocs_fabric_leaf_pod(f, l->a), j = ocs_fabric_leaf_pod(f, l->b);

		topo[n_topo++] = (struct rz_circuits){i < j ? i : j, i < j ? j : i, l->h, l->links};
		load[(size_t)l->a * H + l->h] += l->links;
		load[(size_t)l->b * H + l->h] += l->links;
	}
	qsort(topo, n_topo, sizeof(*topo), cmp_topology);
	{
		size_t n = 0;

		for (size_t x = 0; x < n_topo; x++) {
			if (n && !cmp_topology(&topo[n - 1], &topo[x]))
				topo[n - 1].circuits += topo[x].circuits;
			else
				topo[n++] = topo[x];
		}
		n_topo = n;
	}
	for (size_t u = 0; u < opt->n_usage; u++)
		load[(size_t)opt->usage[u].leaf * H + opt->usage[u].spine] += opt->usage[u].links;
	r->contended_leaves = 0;
	for (int a = 0; a < N; a++) {
		bool over = false;

		for (int h = 0; h < H; h++) {
			int v = load[(size_t)a * H + h];

			max = v > max ? v : max;
			over |= v > f->tau;
		}
		r->contended_leaves += over;
	}
	free(load);
	free(r->assignment);
	free(r->topology);
	free(r->xcs);
	free(r->unrealized);
	r->assignment = fr->assignment;
	r->n_assignment = fr->n_assignment;
	fr->assignment = NULL;
	r->topology = topo;
	r->n_topology = n_topo;
	r->xcs = xcs;
	r->n_xcs = n_existing + fr->n_xcs;
	r->n_unplaced = 0;
	r->unrealized = NULL;
	r->n_unrealized = r->unrealized_circuits = r->unrealized_before_repair = 0;
	r->n_moved = r->changed_existing = 0;
	r->max_contention = (double)max / f->tau;
	r->contention_free = r->max_contention <= 1.0;
	return 0;
}

/*
 * Sets r->fit: LC_FIT_PLACED when the heuristic's plan fits (fit.h: all
 * placed and realized, no uplink the plan loads over tau); else, on the
 * pinned leaf-centric path with realization, the exact search decides, and
 * its placement replaces the plan when it finds one.
 */
static int judge_fit(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
		     const struct ocs_xc *existing, size_t n_existing, const struct ocs_xc *busy,
		     size_t n_busy, const struct lc_options *opt, enum method m, struct lc_plan *r)
{
	struct fit_request q = {f, demand, n_demand, busy, n_busy, opt->usage, opt->n_usage, 0};
	struct fit_result fr;
	int leaf, spine, load, rc;
	int over = fit_overload(f, r->assignment, r->n_assignment, opt->replan ? NULL : opt->usage,
				opt->replan ? 0 : opt->n_usage, &leaf, &spine, &load);

	if (over < 0)
		return over;
	if (!over && !r->n_unplaced && !r->unrealized_circuits) {
		r->fit = LC_FIT_PLACED;
		return 0;
	}
	r->fit = LC_FIT_UNCHECKED;
	if (m != METHOD_LEAF || opt->replan || !opt->realize || opt->heuristic_only)
		return 0;
	rc = fit_place(&q, &fr);
	if (rc)
		return rc;
	r->fit = fr.fit;
	r->limit = fr.limit;
	r->fit_steps = fr.steps;
	memcpy(r->why, fr.why, sizeof(r->why));
	if (fr.fit == LC_FIT_PLACED)
		rc = adopt_fit(f, &fr, existing, n_existing, opt, r);
	fit_result_clear(&fr);
	return rc;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Whether a port out of service names no device port of the fabric. */
static bool out_of_range(const struct ocs_fabric *f, const struct ocs_xc *oos, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (oos[i].group < 0 || oos[i].group >= ocs_fabric_groups(f) || oos[i].device < 0 ||
		    oos[i].device >= ocs_fabric_devices(f) / ocs_fabric_groups(f) ||
		    oos[i].in < 0 || oos[i].in >= f->k_ocs)
			return true;
	return false;
}

static int plan_with(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
		     const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
		     enum method m, struct lc_plan **out)
{
	static const struct lc_options defaults;
	struct lc_plan *r;
	struct work w;
	struct placed s;
	double t0 = now_ms(), t1;
	int rc;

	*out = NULL;
	if (!opt)
		opt = &defaults;
	if (ocs_fabric_validate(f, NULL, 0) ||
	    lc_validate(f, demand, n_demand, existing, n_existing, NULL, 0) ||
	    lc_validate_usage(f, opt->usage, opt->n_usage, NULL, 0) ||
	    out_of_range(f, opt->out_of_service, opt->n_out_of_service))
		return -EINVAL;
	/* what no new circuit may use: the pinned ones, then the ports out of service */
	const struct ocs_xc *busy = opt->replan ? NULL : existing;
	size_t n_busy = opt->replan ? 0 : n_existing;
	struct ocs_xc *busy_all = NULL;

	if (opt->n_out_of_service) {
		busy_all = malloc((n_busy + opt->n_out_of_service) * sizeof(*busy_all));
		if (!busy_all)
			return -ENOMEM;
		if (n_busy)
			memcpy(busy_all, busy, n_busy * sizeof(*busy_all));
		for (size_t i = 0; i < opt->n_out_of_service; i++) {
			busy_all[n_busy + i] = opt->out_of_service[i];
			busy_all[n_busy + i].out = opt->out_of_service[i].in;
		}
		busy = busy_all;
		n_busy += opt->n_out_of_service;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		free(busy_all);
		return -ENOMEM;
	}
	rc = work_init(&w, f, demand, n_demand, busy, n_busy, opt->usage, opt->n_usage);
	if (rc) {
		free(busy_all);
		free(r);
		return rc;
	}
	rc = choose_spines(&w, m, &s);
	if (rc == 0)
		rc = build_outputs(&w, &s, r);
	r->contention_free = rc == 0 && r->max_contention <= 1.0 && r->n_unplaced == 0;
	placed_free(&s);
	work_free(&w);
	t1 = now_ms();
	r->plan_ms = t1 - t0;
	if (rc == 0 && opt->realize) {
		rc = realize_plan(f, existing, n_existing, busy, n_busy, opt->replan, r);
		if (rc == 0)
			rc = judge_fit(f, demand, n_demand, existing, n_existing, busy, n_busy, opt,
				       m, r);
		r->realize_ms = now_ms() - t1;
	} else if (rc == 0) {
		rc = judge_fit(f, demand, n_demand, existing, n_existing, busy, n_busy, opt, m, r);
	}
	free(busy_all);
	if (rc) {
		lc_plan_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int lc_plan(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
	    const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
	    struct lc_plan **out)
{
	return plan_with(f, demand, n_demand, existing, n_existing, opt, METHOD_LEAF, out);
}

int pc_plan(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
	    const struct ocs_xc *existing, size_t n_existing, const struct lc_options *opt,
	    struct lc_plan **out)
{
	return plan_with(f, demand, n_demand, existing, n_existing, opt, METHOD_POD, out);
}

void lc_plan_free(struct lc_plan *p)
{
	if (!p)
		return;
	free(p->assignment);
	free(p->topology);
	free(p->unplaced);
	free(p->xcs);
	free(p->unrealized);
	free(p->moved);
	free(p);
}
