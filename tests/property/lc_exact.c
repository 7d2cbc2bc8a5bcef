/*
 * lc_exact.c - the exact feasibility check of one job's placement around
 * pinned circuits (see lc_exact.h): the free-port marking both deciders
 * share, the integer program, the exhaustive search and the witness check.
 *
 * The integer program (minimise the links left out, 0 = feasible):
 *   x[p][h]  integer  links of pair p on group h (only where both leaves
 *                     have room at h and the pods have an allowed port pair)
 *   s[p]     integer  links of pair p left out (the cost)
 *   y[q][h][c] binary port pair c of pod pair q (lower pod first) in group
 *                     h carries a circuit
 *   sum_h x[p][h] + s[p] = links(p)
 *   sum_{p at leaf} x[p][h] <= max(0, tau - usage[leaf][h])
 *   sum_{p of q} x[p][h] = sum_c y[q][h][c]
 *   sum_{c using spine port A} y[q][h][c] <= 1
 *   sum_{p within S} x[p][h] <= floor(room(S, h) / 2) for sets S of the
 *                     job's leaves (implied, but GLPK proves colourings
 *                     impossible slowly without them; see odd_set_cuts)
 * This is the model "one binary per (pair, group, port pair)" with the
 * port choice shared by the pairs of a pod pair: any placement maps onto
 * it and back (hand the chosen port pairs of (q, h) to q's pairs in any
 * order), so it decides the same question with far fewer symmetric
 * solutions for the solver to rule out. The slack keeps the program
 * feasible, so "proven optimal with cost > 0" is a proof of infeasibility
 * and a time-out is told apart from it.
 */
#include "lc_exact.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2check.h"
#include "lc_gen.h"
#include "milp_model.h"

const char *lcx_answer_name(enum lcx_answer a)
{
	switch (a) {
	case LCX_FEASIBLE:
		return "feasible";
	case LCX_INFEASIBLE:
		return "infeasible";
	case LCX_UNDECIDED:
		return "undecided";
	}
	return "?";
}

void lcx_result_clear(struct lcx_result *r)
{
	if (!r)
		return;
	free(r->witness);
	r->witness = NULL;
	r->n_witness = 0;
}

/* What both deciders need: sizes, busy spine ports, room per (leaf, group). */
struct ctx {
	const struct lcx_instance *in;
	const struct ocs_fabric *f;
	int P, H, K, N;
	unsigned char *busy; /* [(pod * H + h) * K + k] */
	int *room;	     /* [leaf * H + h] = max(0, tau - usage) */
	/* Allowed free port pairs per (lower pod, higher pod, group): k at the
	 * lower pod, k' at the higher one, as a flat list of 2 ints each. */
	int *pp;   /* [((lo * P + hi) * H + h) * K * K * 2 ...] */
	int *n_pp; /* [(lo * P + hi) * H + h] */
	long steps, max_steps;
};

static void ctx_free(struct ctx *c)
{
	free(c->busy);
	free(c->room);
	free(c->pp);
	free(c->n_pp);
}

static size_t qh(const struct ctx *c, int lo, int hi, int h)
{
	return ((size_t)lo * c->P + hi) * c->H + h;
}

static bool port_free(const struct ctx *c, int pod, int h, int k)
{
	return !c->busy[((size_t)pod * c->H + h) * c->K + k];
}

static int ctx_init(struct ctx *c, const struct lcx_instance *in)
{
	const struct ocs_fabric *f = in->f;

	memset(c, 0, sizeof(*c));
	c->in = in;
	c->f = f;
	c->P = f->pods;
	c->H = ocs_fabric_groups(f);
	c->K = f->k_spine;
	c->N = ocs_fabric_leaves(f);
	c->busy = calloc((size_t)c->P * c->H * c->K, 1);
	c->room = malloc((size_t)c->N * c->H * sizeof(int));
	c->n_pp = calloc((size_t)c->P * c->P * c->H, sizeof(int));
	c->pp = malloc((size_t)c->P * c->P * c->H * c->K * c->K * 2 * sizeof(int));
	if (!c->busy || !c->room || !c->n_pp || !c->pp) {
		ctx_free(c);
		return -1;
	}
	for (size_t i = 0; i < in->n_pinned; i++) {
		const struct ocs_xc *x = &in->pinned[i];
		struct ocs_spine_port s;

		if (ocs_fabric_input_owner(f, x->group, (struct ocs_device_port){x->device, x->in},
					   &s) == 0)
			c->busy[((size_t)s.pod * c->H + s.h) * c->K + s.k] = 1;
		if (ocs_fabric_output_owner(f, x->group,
					    (struct ocs_device_port){x->device, x->out}, &s) == 0)
			c->busy[((size_t)s.pod * c->H + s.h) * c->K + s.k] = 1;
	}
	for (int l = 0; l < c->N; l++)
		for (int h = 0; h < c->H; h++) {
			int u = in->usage ? in->usage[l * c->H + h] : 0;

			c->room[l * c->H + h] = u >= f->tau ? 0 : f->tau - u;
		}
	return 0;
}

static int pod_of(const struct ctx *c, int leaf)
{
	return ocs_fabric_leaf_pod(c->f, leaf);
}

/*
 * Forward derivation (the integer program's): A = (lo, h, k) and
 * B = (hi, h, k') form a circuit when tx(A) and rx(B) share a device and
 * so do tx(B) and rx(A).
 */
static void allowed_forward(struct ctx *c, int lo, int hi, int h)
{
	size_t q = qh(c, lo, hi, h);
	int *out = c->pp + q * c->K * c->K * 2;

	c->n_pp[q] = 0;
	for (int k = 0; k < c->K; k++)
		for (int k2 = 0; k2 < c->K; k2++) {
			struct ocs_spine_port A = {lo, h, k}, B = {hi, h, k2};

			if (!port_free(c, lo, h, k) || !port_free(c, hi, h, k2))
				continue;
			if (ocs_fabric_tx_port(c->f, A).device !=
				    ocs_fabric_rx_port(c->f, B).device ||
			    ocs_fabric_tx_port(c->f, B).device !=
				    ocs_fabric_rx_port(c->f, A).device)
				continue;
			out[2 * c->n_pp[q]] = k;
			out[2 * c->n_pp[q] + 1] = k2;
			c->n_pp[q]++;
		}
}

/*
 * Inverse derivation (the search's): from A's transmit device, every
 * output port of that device whose owner is a free port B of pod hi; kept
 * when some input of the device A receives from is owned by B.
 */
static void allowed_inverse(struct ctx *c, int lo, int hi, int h)
{
	size_t q = qh(c, lo, hi, h);
	int *out = c->pp + q * c->K * c->K * 2;

	c->n_pp[q] = 0;
	for (int k = 0; k < c->K; k++) {
		struct ocs_spine_port A = {lo, h, k};
		int d = ocs_fabric_tx_port(c->f, A).device,
		    back = ocs_fabric_rx_port(c->f, A).device;

		if (!port_free(c, lo, h, k))
			continue;
		for (int o = 0; o < c->f->k_ocs; o++) {
			struct ocs_spine_port B, B2;
			bool joined = false;

			if (ocs_fabric_output_owner(c->f, h, (struct ocs_device_port){d, o}, &B) ||
			    B.pod != hi || B.h != h || !port_free(c, hi, h, B.k))
				continue;
			for (int i = 0; i < c->f->k_ocs && !joined; i++)
				joined = ocs_fabric_input_owner(c->f, h,
								(struct ocs_device_port){back, i},
								&B2) == 0 &&
					 B2.pod == B.pod && B2.k == B.k && B2.h == h;
			if (!joined)
				continue;
			out[2 * c->n_pp[q]] = k;
			out[2 * c->n_pp[q] + 1] = B.k;
			c->n_pp[q]++;
		}
	}
}

/* Sorts each pod pair's (k, k') list so both derivations list alike. */
static int cmp_pp(const void *x, const void *y)
{
	const int *a = x, *b = y;

	return a[0] != b[0] ? a[0] - b[0] : a[1] - b[1];
}

static void derive_all(struct ctx *c, bool inverse)
{
	for (int lo = 0; lo < c->P; lo++)
		for (int hi = lo + 1; hi < c->P; hi++)
			for (int h = 0; h < c->H; h++) {
				size_t q = qh(c, lo, hi, h);

				if (inverse)
					allowed_inverse(c, lo, hi, h);
				else
					allowed_forward(c, lo, hi, h);
				qsort(c->pp + q * c->K * c->K * 2, (size_t)c->n_pp[q],
				      2 * sizeof(int), cmp_pp);
			}
}

/* The circuit of pair p on port pair (k at the lower pod, k2 at the higher). */
static struct lcx_circuit circuit_of(const struct ctx *c, int p, int h, int k, int k2)
{
	const struct lcx_pair *d = &c->in->pairs[p];
	int pa = pod_of(c, d->a), pb = pod_of(c, d->b);
	struct ocs_spine_port lo = {pa < pb ? pa : pb, h, k}, hi = {pa < pb ? pb : pa, h, k2};

	return (struct lcx_circuit){p, h, pa < pb ? lo : hi, pa < pb ? hi : lo};
}

/* ------------------------------------------------------------------------
 * The integer program. */

/*
 * Valid inequalities that spare GLPK the colouring proofs it is slow at:
 * in one group the links among a set S of leaves use two units of room
 * each, so they number at most floor(room(S) / 2). Only sets with an odd
 * room cut the LP (a triangle of leaves with room 1 each: 1 link, not
 * 1.5); tried for every set of 3 or more of the job's leaves when it has
 * at most 10.
 */
static void odd_set_cuts(const struct ctx *c, struct milp *m, const int *xcol)
{
	const struct lcx_instance *in = c->in;
	int leaves[10], n = 0;

	for (size_t p = 0; p < in->n_pairs; p++)
		for (int e = 0; e < 2; e++) {
			int l = e ? in->pairs[p].b : in->pairs[p].a, i = 0;

			while (i < n && leaves[i] != l)
				i++;
			if (i == n && n == 10)
				return;
			if (i == n)
				leaves[n++] = l;
		}
	for (unsigned set = 0; set < 1u << n; set++) {
		if (__builtin_popcount(set) < 3)
			continue;
		for (int h = 0; h < c->H; h++) {
			int room = 0;

			for (int i = 0; i < n; i++)
				if (set & 1u << i)
					room += c->room[leaves[i] * c->H + h];
			if (room % 2 == 0)
				continue;
			for (size_t p = 0; p < in->n_pairs; p++) {
				bool a = false, b = false;

				for (int i = 0; i < n; i++) {
					a |= (set & 1u << i) && leaves[i] == in->pairs[p].a;
					b |= (set & 1u << i) && leaves[i] == in->pairs[p].b;
				}
				if (a && b && xcol[p * c->H + h] >= 0)
					milp_term(m, xcol[p * c->H + h], 1);
			}
			if (milp_row_len(m))
				milp_row(m, -INFINITY, room / 2);
		}
	}
}

int lcx_solve_ilp(const struct lcx_instance *in, double time_limit_s, struct lcx_result *out)
{
	struct ctx c;
	struct milp *m;
	struct milp_result r = {0};
	int *xcol, *scol, *ycol, rc = -1;
	size_t n_q;
	int total = 0;

	memset(out, 0, sizeof(*out));
	if (ctx_init(&c, in))
		return -1;
	derive_all(&c, false);
	n_q = (size_t)c.P * c.P * c.H;
	m = milp_new();
	xcol = malloc((in->n_pairs * c.H + 1) * sizeof(int));
	scol = malloc((in->n_pairs + 1) * sizeof(int));
	ycol = malloc(n_q * sizeof(int));
	if (!m || !xcol || !scol || !ycol)
		goto done;
	for (size_t q = 0; q < n_q; q++)
		ycol[q] = -1;
	for (size_t p = 0; p < in->n_pairs; p++) {
		const struct lcx_pair *d = &in->pairs[p];
		int pa = pod_of(&c, d->a), pb = pod_of(&c, d->b);

		total += d->links;
		scol[p] = milp_col(m, MILP_INTEGER, 0, d->links, 1);
		for (int h = 0; h < c.H; h++) {
			int ra = c.room[d->a * c.H + h], rb = c.room[d->b * c.H + h];
			int ub = d->links < ra ? d->links : ra;
			size_t q = qh(&c, pa < pb ? pa : pb, pa < pb ? pb : pa, h);

			ub = ub < rb ? ub : rb;
			xcol[p * c.H + h] = -1;
			if (ub <= 0 || c.n_pp[q] == 0)
				continue;
			xcol[p * c.H + h] = milp_col(m, MILP_INTEGER, 0, ub, 0);
			if (ycol[q] < 0) /* the pod pair's port pairs in h, once */
				for (int e = 0; e < c.n_pp[q]; e++) {
					int col = milp_col(m, MILP_INTEGER, 0, 1, 0);

					if (e == 0)
						ycol[q] = col;
				}
		}
	}
	/* Each pair's links, placed or left out. */
	for (size_t p = 0; p < in->n_pairs; p++) {
		milp_term(m, scol[p], 1);
		for (int h = 0; h < c.H; h++)
			if (xcol[p * c.H + h] >= 0)
				milp_term(m, xcol[p * c.H + h], 1);
		milp_row(m, in->pairs[p].links, in->pairs[p].links);
	}
	/* Room per (leaf, group). */
	for (int l = 0; l < c.N; l++)
		for (int h = 0; h < c.H; h++) {
			for (size_t p = 0; p < in->n_pairs; p++)
				if ((in->pairs[p].a == l || in->pairs[p].b == l) &&
				    xcol[p * c.H + h] >= 0)
					milp_term(m, xcol[p * c.H + h], 1);
			if (milp_row_len(m))
				milp_row(m, -INFINITY, c.room[l * c.H + h]);
		}
	odd_set_cuts(&c, m, xcol);
	/* Circuits of a pod pair in a group = its chosen port pairs. */
	for (int lo = 0; lo < c.P; lo++)
		for (int hi = lo + 1; hi < c.P; hi++)
			for (int h = 0; h < c.H; h++) {
				size_t q = qh(&c, lo, hi, h);

				if (ycol[q] < 0)
					continue;
				for (size_t p = 0; p < in->n_pairs; p++) {
					int pa = pod_of(&c, in->pairs[p].a),
					    pb = pod_of(&c, in->pairs[p].b);

					if (((pa == lo && pb == hi) || (pa == hi && pb == lo)) &&
					    xcol[p * c.H + h] >= 0)
						milp_term(m, xcol[p * c.H + h], 1);
				}
				for (int e = 0; e < c.n_pp[q]; e++)
					milp_term(m, ycol[q] + e, -1);
				milp_row(m, 0, 0);
			}
	/* A spine port serves at most one circuit. */
	for (int pod = 0; pod < c.P; pod++)
		for (int h = 0; h < c.H; h++)
			for (int k = 0; k < c.K; k++) {
				for (int other = 0; other < c.P; other++) {
					int lo = pod < other ? pod : other,
					    hi = pod < other ? other : pod;
					size_t q = qh(&c, lo, hi, h);
					const int *list = c.pp + q * c.K * c.K * 2;

					if (other == pod || ycol[q] < 0)
						continue;
					for (int e = 0; e < c.n_pp[q]; e++)
						if (list[2 * e + (pod == lo ? 0 : 1)] == k)
							milp_term(m, ycol[q] + e, 1);
				}
				if (milp_row_len(m))
					milp_row(m, -INFINITY, 1);
			}
	if (milp_error(m) || milp_solve_glpk(m, time_limit_s, &r))
		goto done;
	rc = 0;
	out->seconds = r.seconds;
	if (r.has_solution && r.objective < 0.5) {
		out->answer = LCX_FEASIBLE;
		out->witness = malloc(((size_t)total + 1) * sizeof(*out->witness));
		if (!out->witness) {
			rc = -1;
			goto done;
		}
		/* Hand each (q, h)'s chosen port pairs to q's pairs in turn. */
		for (size_t p = 0; p < in->n_pairs; p++)
			for (int h = 0; h < c.H; h++) {
				int pa = pod_of(&c, in->pairs[p].a),
				    pb = pod_of(&c, in->pairs[p].b);
				size_t q = qh(&c, pa < pb ? pa : pb, pa < pb ? pb : pa, h);
				const int *list = c.pp + q * c.K * c.K * 2;
				long v =
					xcol[p * c.H + h] >= 0 ? lround(r.x[xcol[p * c.H + h]]) : 0;

				for (int e = 0; e < c.n_pp[q] && v > 0; e++)
					if (r.x[ycol[q] + e] > 0.5) {
						r.x[ycol[q] + e] = 0; /* taken */
						out->witness[out->n_witness++] =
							circuit_of(&c, (int)p, h, list[2 * e],
								   list[2 * e + 1]);
						v--;
					}
			}
	} else {
		out->answer = r.proven_optimal ? LCX_INFEASIBLE : LCX_UNDECIDED;
	}
done:
	milp_result_clear(&r);
	milp_free(m);
	free(xcol);
	free(scol);
	free(ycol);
	ctx_free(&c);
	return rc;
}

/* ------------------------------------------------------------------------
 * The exhaustive search: every split of the links over the groups (level
 * 1), then per group every choice of port pairs for its circuits (level 2,
 * port pairs of one pod pair taken in increasing order: a set, not a
 * sequence).
 */
struct search {
	struct ctx *c;
	int *x;		     /* [p * H + h] links of pair p on group h */
	int *load;	     /* [leaf * H + h] the job's links */
	int *need_q;	     /* level 2: the circuits of the group, pod pair per circuit */
	int *chosen;	     /* level 2: port pair index per circuit */
	int *chosen_h;	     /* [h * total + t] the solution's port pair per circuit */
	unsigned char *used; /* [pod * K + k] within the group */
	int total;
	bool stopped;
};

static bool step(struct search *s)
{
	if (++s->c->steps > s->c->max_steps)
		s->stopped = true;
	return !s->stopped;
}

/* Level 2: circuits t.. of the group's list, n in all. */
static bool ports_for(struct search *s, int h, int t, int n)
{
	struct ctx *c = s->c;
	int q, lo, hi, start = 0;
	const int *list;

	if (t == n)
		return true;
	if (!step(s))
		return false;
	q = s->need_q[t];
	lo = q / c->P;
	hi = q % c->P;
	list = c->pp + qh(c, lo, hi, h) * c->K * c->K * 2;
	if (t > 0 && s->need_q[t - 1] == q)
		start = s->chosen[t - 1] + 1;
	for (int e = start; e < c->n_pp[qh(c, lo, hi, h)]; e++) {
		unsigned char *A = &s->used[lo * c->K + list[2 * e]],
			      *B = &s->used[hi * c->K + list[2 * e + 1]];

		if (*A || *B)
			continue;
		*A = *B = 1;
		s->chosen[t] = e;
		if (ports_for(s, h, t + 1, n))
			return true;
		*A = *B = 0;
		if (s->stopped)
			return false;
	}
	return false;
}

/* Level 2 for every group of the split in s->x. */
static bool groups_fit(struct search *s)
{
	struct ctx *c = s->c;
	const struct lcx_instance *in = c->in;

	for (int h = 0; h < c->H; h++) {
		int n = 0;

		/* Circuits grouped by pod pair, so the order rule applies. */
		for (int q = 0; q < c->P * c->P; q++)
			for (size_t p = 0; p < in->n_pairs; p++) {
				int pa = pod_of(c, in->pairs[p].a), pb = pod_of(c, in->pairs[p].b);

				if ((pa < pb ? pa : pb) * c->P + (pa < pb ? pb : pa) != q)
					continue;
				for (int i = 0; i < s->x[p * c->H + h]; i++)
					s->need_q[n++] = q;
			}
		memset(s->used, 0, (size_t)c->P * c->K);
		if (!ports_for(s, h, 0, n))
			return false;
		memcpy(s->chosen_h + (size_t)h * s->total, s->chosen, (size_t)n * sizeof(int));
	}
	return true;
}

/* Level 1: pair p's links from group h on, `left` of them still to place. */
static bool split(struct search *s, size_t p, int h, int left)
{
	struct ctx *c = s->c;
	const struct lcx_instance *in = c->in;
	const struct lcx_pair *d;
	int a, b, most;

	if (!step(s))
		return false;
	if (p == in->n_pairs)
		return groups_fit(s);
	d = &in->pairs[p];
	if (left == 0)
		return split(s, p + 1, 0, p + 1 < in->n_pairs ? in->pairs[p + 1].links : 0);
	if (h == c->H)
		return false;
	a = d->a * c->H + h;
	b = d->b * c->H + h;
	most = left;
	most = most < c->room[a] - s->load[a] ? most : c->room[a] - s->load[a];
	most = most < c->room[b] - s->load[b] ? most : c->room[b] - s->load[b];
	for (int v = most; v >= 0; v--) {
		s->x[p * c->H + h] = v;
		s->load[a] += v;
		s->load[b] += v;
		if (split(s, p, h + 1, left - v))
			return true;
		s->load[a] -= v;
		s->load[b] -= v;
		s->x[p * c->H + h] = 0;
		if (s->stopped)
			return false;
	}
	return false;
}

int lcx_solve_search(const struct lcx_instance *in, long max_steps, struct lcx_result *out)
{
	struct ctx c;
	struct search s = {.c = &c};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (ctx_init(&c, in))
		return -1;
	c.max_steps = max_steps;
	derive_all(&c, true);
	for (size_t p = 0; p < in->n_pairs; p++)
		s.total += in->pairs[p].links;
	s.x = calloc(in->n_pairs * c.H + 1, sizeof(int));
	s.load = calloc((size_t)c.N * c.H, sizeof(int));
	s.need_q = malloc(((size_t)s.total + 1) * sizeof(int));
	s.chosen = malloc(((size_t)s.total + 1) * sizeof(int));
	s.chosen_h = malloc(((size_t)s.total * c.H + 1) * sizeof(int));
	s.used = malloc((size_t)c.P * c.K);
	if (!s.x || !s.load || !s.need_q || !s.chosen || !s.chosen_h || !s.used)
		goto done;
	rc = 0;
	if (split(&s, 0, 0, in->n_pairs ? in->pairs[0].links : 0)) {
		out->answer = LCX_FEASIBLE;
		out->witness = malloc(((size_t)s.total + 1) * sizeof(*out->witness));
		if (!out->witness) {
			rc = -1;
			goto done;
		}
		/* Replay groups_fit's circuit order to name each circuit's pair. */
		for (int h = 0; h < c.H; h++) {
			int t = 0;

			for (int q = 0; q < c.P * c.P; q++)
				for (size_t p = 0; p < in->n_pairs; p++) {
					int pa = pod_of(&c, in->pairs[p].a),
					    pb = pod_of(&c, in->pairs[p].b);
					int lo = pa < pb ? pa : pb, hi = pa < pb ? pb : pa;
					const int *list = c.pp + qh(&c, lo, hi, h) * c.K * c.K * 2;

					if (lo * c.P + hi != q)
						continue;
					for (int i = 0; i < s.x[p * c.H + h]; i++, t++) {
						int e = s.chosen_h[(size_t)h * s.total + t];

						out->witness[out->n_witness++] =
							circuit_of(&c, (int)p, h, list[2 * e],
								   list[2 * e + 1]);
					}
				}
		}
	} else {
		out->answer = s.stopped ? LCX_UNDECIDED : LCX_INFEASIBLE;
	}
	out->steps = c.steps;
done:
	free(s.x);
	free(s.load);
	free(s.need_q);
	free(s.chosen);
	free(s.chosen_h);
	free(s.used);
	ctx_free(&c);
	return rc;
}

/* ------------------------------------------------------------------------
 * The witness check: from fabric.h and l2check.h only. */

int lcx_check_witness(const struct lcx_instance *in, const struct lcx_circuit *w, size_t n,
		      char *msg, size_t msg_len)
{
	struct ctx c;
	int problems = 0, *placed, *load;
	struct ocs_xc *all;
	size_t n_all = in->n_pinned;

#define PROBLEM(...)                                                                               \
	do {                                                                                       \
		if (problems++ == 0)                                                               \
			snprintf(msg, msg_len, __VA_ARGS__);                                       \
	} while (0)

	if (msg_len)
		msg[0] = 0;
	if (ctx_init(&c, in))
		return 1;
	placed = calloc(in->n_pairs + 1, sizeof(int));
	load = calloc((size_t)c.N * c.H, sizeof(int));
	all = malloc((in->n_pinned + 2 * n + 1) * sizeof(*all));
	if (!placed || !load || !all) {
		PROBLEM("out of memory");
		goto done;
	}
	if (in->n_pinned)
		memcpy(all, in->pinned, in->n_pinned * sizeof(*all));
	for (size_t i = 0; i < n; i++) {
		const struct lcx_circuit *x = &w[i];
		const struct lcx_pair *d;
		struct ocs_device_port ta, ra, tb, rb;

		if (x->pair < 0 || (size_t)x->pair >= in->n_pairs || x->h < 0 || x->h >= c.H ||
		    x->at_a.k < 0 || x->at_a.k >= c.K || x->at_b.k < 0 || x->at_b.k >= c.K) {
			PROBLEM("circuit %zu out of range", i);
			continue;
		}
		d = &in->pairs[x->pair];
		if (x->at_a.pod != pod_of(&c, d->a) || x->at_b.pod != pod_of(&c, d->b) ||
		    x->at_a.h != x->h || x->at_b.h != x->h)
			PROBLEM("circuit %zu is not between the pods of pair %d in group %d", i,
				x->pair, x->h);
		if (!port_free(&c, x->at_a.pod, x->h, x->at_a.k) ||
		    !port_free(&c, x->at_b.pod, x->h, x->at_b.k))
			PROBLEM("circuit %zu uses a busy spine port", i);
		ta = ocs_fabric_tx_port(c.f, x->at_a);
		ra = ocs_fabric_rx_port(c.f, x->at_a);
		tb = ocs_fabric_tx_port(c.f, x->at_b);
		rb = ocs_fabric_rx_port(c.f, x->at_b);
		if (ta.device != rb.device || tb.device != ra.device)
			PROBLEM("circuit %zu crosses devices", i);
		all[n_all++] = (struct ocs_xc){x->h, ta.device, ta.port, rb.port};
		all[n_all++] = (struct ocs_xc){x->h, tb.device, tb.port, ra.port};
		placed[x->pair]++;
		load[d->a * c.H + x->h]++;
		load[d->b * c.H + x->h]++;
	}
	for (size_t p = 0; p < in->n_pairs; p++)
		if (placed[p] != in->pairs[p].links)
			PROBLEM("pair %zu: %d of %d links placed", p, placed[p],
				in->pairs[p].links);
	for (int i = 0; i < c.N * c.H; i++)
		if (load[i] > 0 && load[i] > c.room[i])
			PROBLEM("leaf %d group %d: %d new links, room for %d", i / c.H, i % c.H,
				load[i], c.room[i]);
	if (l2_check(c.f, all, n_all, NULL, 0) != 0)
		PROBLEM("the configuration with the witness fails l2_check");
#undef PROBLEM
done:
	free(placed);
	free(load);
	free(all);
	ctx_free(&c);
	return problems;
}

/* ------------------------------------------------------------------------
 * Instances for the tests that use the check. */

/*
 * A job of `links` links among 2..6 random leaves, pairs of different
 * pods, no leaf over k_leaf; NULL when the leaves drawn are of one pod.
 */
struct lc_demand *lcx_gen_job(const struct ocs_fabric *f, int links, uint64_t *seed, size_t *n)
{
	int N = ocs_fabric_leaves(f), m = 2 + lc_gen_below(seed, 5), leaves[6];
	int *uplinks = calloc((size_t)N, sizeof(int));
	struct lc_demand *d = malloc((size_t)links * sizeof(*d));

	*n = 0;
	for (int i = 0; i < m; i++)
		leaves[i] = lc_gen_below(seed, N);
	for (int l = 0, tries = 0; l < links && tries < 50 * links; tries++) {
		int i = lc_gen_below(seed, m), j = lc_gen_below(seed, m);
		int a = leaves[i] < leaves[j] ? leaves[i] : leaves[j],
		    b = leaves[i] < leaves[j] ? leaves[j] : leaves[i];
		size_t e = 0;

		if (ocs_fabric_leaf_pod(f, a) == ocs_fabric_leaf_pod(f, b) ||
		    uplinks[a] >= f->k_leaf || uplinks[b] >= f->k_leaf)
			continue;
		while (e < *n && !(d[e].a == a && d[e].b == b))
			e++;
		if (e == *n)
			d[(*n)++] = (struct lc_demand){a, b, 0};
		d[e].links++;
		uplinks[a]++;
		uplinks[b]++;
		l++;
	}
	free(uplinks);
	if (*n == 0) {
		free(d);
		return NULL;
	}
	return d;
}

struct ocs_fabric lcx_gen_fabric(enum ocs_wiring w, int tau, uint64_t *seed)
{
	int H = 2 + lc_gen_below(seed, 5);
	struct ocs_fabric f = {.pods = 2 + lc_gen_below(seed, 5),
			       .k_leaf = H * tau,
			       .k_spine = 2 * (1 + lc_gen_below(seed, 4)),
			       .tau = tau,
			       .wiring = w};

	f.k_ocs = f.pods * ocs_fabric_ports_per_pod(&f);
	return f;
}

int lcx_gen_events(uint64_t *seed)
{
	return 20 + lc_gen_below(seed, 41);
}

bool lcx_gen_release(uint64_t *seed)
{
	return lc_gen_below(seed, 100) < 30;
}

int lcx_gen_links(uint64_t *seed)
{
	bool mid = lc_gen_below(seed, 100) < 30;

	return mid ? 4 + lc_gen_below(seed, 13) : 1 + lc_gen_below(seed, 3);
}
