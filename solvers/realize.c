/*
 * realize.c - logical topology -> cross-connects (see realize.h).
 *
 * Per OCS group h the circuits form a multigraph on pods. Colours stand for
 * spine ports through the slot model of edgecolor.h:
 *   straight      vertex = pod, colour d = spine port d (= device d)
 *   cross, dual   vertex p = pod p sending, P + p = pod p receiving,
 *                 colour m = device pair (2m, 2m+1) / dual device m; the
 *                 sender uses spine port 2m, the receiver spine port 2m+1
 * A coloured edge becomes a circuit between two spine ports A and B, i.e.
 * the cross-connects tx(A) -> rx(B) and tx(B) -> rx(A), with every device
 * port taken from fabric.h.
 */
#include "realize.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "edgecolor.h"

/* Defect moves allowed per circuit that Kempe chains alone could not place. */
#define RZ_WALK_STEPS 400

struct xc_list {
	struct ocs_xc *v;
	size_t n, cap;
};

static int xc_push(struct xc_list *l, struct ocs_xc xc)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct ocs_xc *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = xc;
	return 0;
}

struct rz_list {
	struct rz_circuits *v;
	size_t n, cap;
};

static int rz_push(struct rz_list *l, struct rz_circuits c)
{
	if (l->n && l->v[l->n - 1].i == c.i && l->v[l->n - 1].j == c.j && l->v[l->n - 1].h == c.h) {
		l->v[l->n - 1].circuits += c.circuits;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct rz_circuits *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = c;
	return 0;
}

void rz_busy_spine_ports(const struct ocs_fabric *f, int h, const struct ocs_xc *pinned,
			 size_t n_pinned, unsigned char *busy)
{
	for (size_t i = 0; i < n_pinned; i++) {
		struct ocs_spine_port sp;

		if (pinned[i].group != h)
			continue;
		if (ocs_fabric_input_owner(f, h,
					   (struct ocs_device_port){pinned[i].device, pinned[i].in},
					   &sp) == 0)
			busy[(size_t)sp.pod * (size_t)f->k_spine + (size_t)sp.k] = 1;
		if (ocs_fabric_output_owner(
			    f, h, (struct ocs_device_port){pinned[i].device, pinned[i].out}, &sp) ==
		    0)
			busy[(size_t)sp.pod * (size_t)f->k_spine + (size_t)sp.k] = 1;
	}
}

/* One group's work: the pairs it must join and the colouring state. */
struct group_job {
	const struct ocs_fabric *f;
	int h, pods;
	bool straight;
	int *pi, *pj, *cnt, *fwd; /* pairs of pods and remaining circuits */
	size_t n_pairs;
	struct ec_graph g;   /* the final colouring (straight or bipartite) */
	struct ec_graph bip; /* straight only: the matchings of the oriented graph */
};

/* Slot (vertex, colour) of spine port k of pod p. */
static void port_slot(const struct group_job *j, int pod, int k, int *v, int *c)
{
	if (j->straight) {
		*v = pod;
		*c = k;
	} else {
		*v = k % 2 ? j->pods + pod : pod;
		*c = k / 2;
	}
}

/* The spine ports that a coloured edge joins. */
static void edge_ports(const struct group_job *j, int e, struct ocs_spine_port *a,
		       struct ocs_spine_port *b)
{
	int u = j->g.eu[e], v = j->g.ev[e], c = j->g.color[e];

	if (j->straight) {
		*a = (struct ocs_spine_port){u, j->h, c};
		*b = (struct ocs_spine_port){v, j->h, c};
	} else {
		*a = (struct ocs_spine_port){u, j->h, 2 * c};
		*b = (struct ocs_spine_port){v - j->pods, j->h, 2 * c + 1};
	}
}

static int pod_of(const struct group_job *j, int v)
{
	return v >= j->pods ? v - j->pods : v;
}

/* Remaining circuits of the pair joining pods a and b (either order), or NULL. */
static int *pair_count(struct group_job *j, int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;
	size_t l = 0, r = j->n_pairs;

	while (l < r) { /* pairs are sorted by (i, j) */
		size_t m = (l + r) / 2;

		if (j->pi[m] < lo || (j->pi[m] == lo && j->pj[m] < hi))
			l = m + 1;
		else
			r = m;
	}
	return l < j->n_pairs && j->pi[l] == lo && j->pj[l] == hi ? &j->cnt[l] : NULL;
}

/* Pre-colours the circuits a global re-plan can keep where they are. */
static void reuse_preferred(struct group_job *j, const struct ocs_xc *prefer, size_t n_prefer)
{
	for (size_t i = 0; i < n_prefer; i++) {
		struct ocs_spine_port a, b;
		int va, ca, vb, cb, *left, e;

		if (prefer[i].group != j->h ||
		    ocs_fabric_input_owner(j->f, j->h,
					   (struct ocs_device_port){prefer[i].device, prefer[i].in},
					   &a) != 0 ||
		    ocs_fabric_output_owner(
			    j->f, j->h, (struct ocs_device_port){prefer[i].device, prefer[i].out},
			    &b) != 0 ||
		    a.pod == b.pod)
			continue;
		/* One representative cross-connect per circuit. */
		if (j->straight ? (a.k != b.k || a.pod > b.pod) : (a.k % 2 || b.k != a.k + 1))
			continue;
		left = pair_count(j, a.pod, b.pod);
		if (!left || *left == 0)
			continue;
		port_slot(j, a.pod, a.k, &va, &ca);
		port_slot(j, b.pod, b.k, &vb, &cb);
		e = ec_add_edge(&j->g, va, vb);
		if (ec_set(&j->g, e, ca))
			(*left)--;
		else
			j->g.ne--; /* ports taken by a pinned or an earlier reused circuit */
	}
}

/*
 * Straight wiring without pinned or reused ports: split the oriented graph
 * into matchings, then alternate each matching's paths and cycles over
 * devices 2m and 2m+1. Edges an odd cycle cannot take stay uncoloured.
 */
static void straight_by_matchings(struct group_job *j)
{
	int P = j->pods, M = j->bip.nc;
	bool *seen = calloc((size_t)j->g.ne + 1, sizeof(*seen));

	if (!seen)
		return; /* every edge stays for the Kempe pass */
	for (int e = 0; e < j->bip.ne; e++)
		ec_color(&j->bip, e, true, 0);
	for (int m = 0; m < M; m++) {
		/* Paths first (from a pod with one edge of colour m), then cycles. */
		for (int pass = 0; pass < 2; pass++) {
			for (int s = 0; s < P; s++) {
				int out = j->bip.slot[(size_t)s * M + m];
				int in = j->bip.slot[(size_t)(P + s) * M + m];
				int cur = s, prev = -1, parity = 0;

				if (pass == 0 && (out >= 0) == (in >= 0))
					continue;
				for (;;) {
					int o = j->bip.slot[(size_t)cur * M + m];
					int i = j->bip.slot[(size_t)(P + cur) * M + m];
					int e = o >= 0 && o != prev && !seen[o]	  ? o
						: i >= 0 && i != prev && !seen[i] ? i
										  : -1;

					if (e < 0)
						break;
					seen[e] = true;
					ec_set(&j->g, e, 2 * m + parity);
					parity ^= 1;
					cur = pod_of(j, j->bip.eu[e]) == cur
						      ? pod_of(j, j->bip.ev[e])
						      : pod_of(j, j->bip.eu[e]);
					prev = e;
				}
			}
		}
	}
	free(seen);
}

/*
 * Colours one group's circuits into j->g (allocated here): reused circuits
 * first, then the rest in balanced orientation, then Kempe repair. Adds the
 * circuits left before repair to *before_repair; returns 0 or -ENOMEM.
 */
static int color_group(struct group_job *j, const unsigned char *busy, bool reuse,
		       const struct ocs_xc *prefer, size_t n_prefer, size_t *before_repair)
{
	int P = j->pods, K = j->f->k_spine, total = 0, rc;
	uint64_t rng = 0x6f637364u + (uint64_t)j->h; /* fixed seed: plans are reproducible */
	bool any_busy = false, simple;
	size_t pre;

	for (size_t p = 0; p < j->n_pairs; p++)
		total += j->cnt[p];
	rc = ec_init(&j->g, j->straight ? P : 2 * P, j->straight ? K : K / 2, total);
	if (rc)
		return rc;
	for (int p = 0; p < P; p++) {
		for (int k = 0; k < K; k++) {
			int v, c;

			if (!busy[(size_t)p * K + k])
				continue;
			any_busy = true;
			port_slot(j, p, k, &v, &c);
			ec_block(&j->g, v, c);
		}
	}
	if (reuse)
		reuse_preferred(j, prefer, n_prefer);
	pre = (size_t)j->g.ne;
	simple = j->straight && !any_busy && pre == 0;
	if (simple && (rc = ec_init(&j->bip, 2 * P, K / 2, total)))
		return rc;
	rc = ec_orient_balanced(P, j->n_pairs, j->pi, j->pj, j->cnt, j->fwd);
	if (rc)
		return rc;
	for (size_t p = 0; p < j->n_pairs; p++) {
		for (int t = 0; t < j->cnt[p]; t++) {
			int a = t < j->fwd[p] ? j->pi[p] : j->pj[p];
			int b = t < j->fwd[p] ? j->pj[p] : j->pi[p];

			ec_add_edge(&j->g, a, j->straight ? b : P + b);
			if (simple)
				ec_add_edge(&j->bip, a, P + b);
		}
	}
	if (simple) {
		straight_by_matchings(j);
	} else {
		for (int e = (int)pre; e < j->g.ne; e++)
			ec_color(&j->g, e, !j->straight && !any_busy && pre == 0, 0);
	}
	for (int e = (int)pre; e < j->g.ne; e++)
		*before_repair += j->g.color[e] < 0;
	for (int e = (int)pre; e < j->g.ne; e++)
		if (j->g.color[e] < 0)
			ec_color(&j->g, e, true, 0);
	for (int e = 0; e < j->g.ne; e++)
		if (j->g.color[e] < 0)
			ec_color_walk(&j->g, e, RZ_WALK_STEPS, &rng);
	/* Cross and dual: a circuit the chosen direction cannot take may fit reversed. */
	for (int e = (int)pre; e < j->g.ne && !j->straight; e++) {
		if (j->g.color[e] < 0) {
			int u = j->g.eu[e];

			j->g.eu[e] = j->g.ev[e] - P;
			j->g.ev[e] = u + P;
			if (!ec_color(&j->g, e, true, 0)) {
				j->g.ev[e] = j->g.eu[e] + P;
				j->g.eu[e] = u;
			}
		}
	}
	return 0;
}

static int uncoloured(const struct ec_graph *g)
{
	int n = 0;

	for (int e = 0; e < g->ne; e++)
		n += g->color[e] < 0;
	return n;
}

static int realize_group(struct group_job *j, const struct ocs_xc *pinned, size_t n_pinned,
			 const struct ocs_xc *prefer, size_t n_prefer, struct xc_list *xcs,
			 struct rz_list *unreal, size_t *before_repair)
{
	const struct ocs_fabric *f = j->f;
	unsigned char *busy = calloc((size_t)j->pods * (size_t)f->k_spine, 1);
	int *cnt0 = malloc((j->n_pairs ? j->n_pairs : 1) * sizeof(int));
	size_t before = 0;
	int rc;

	if (!busy || !cnt0) {
		free(busy);
		free(cnt0);
		return -ENOMEM;
	}
	memcpy(cnt0, j->cnt, j->n_pairs * sizeof(int));
	rz_busy_spine_ports(f, j->h, pinned, n_pinned, busy);
	rc = color_group(j, busy, n_prefer > 0, prefer, n_prefer, &before);
	if (rc == 0 && n_prefer && uncoloured(&j->g)) {
		/* Reuse is only a preference: without it, is more realized? */
		struct ec_graph kept = j->g;
		size_t before2 = 0;

		memset(&j->g, 0, sizeof(j->g));
		ec_release(&j->bip);
		memcpy(j->cnt, cnt0, j->n_pairs * sizeof(int));
		rc = color_group(j, busy, false, NULL, 0, &before2);
		if (rc == 0 && uncoloured(&j->g) < uncoloured(&kept)) {
			ec_release(&kept);
			before = before2;
		} else {
			ec_release(&j->g);
			j->g = kept;
		}
	}
	free(busy);
	free(cnt0);
	if (rc)
		return rc;
	*before_repair += before;
	for (int e = 0; e < j->g.ne; e++) {
		struct ocs_spine_port a, b;
		struct ocs_device_port ta, rb, tb, ra;
		int pa = pod_of(j, j->g.eu[e]), pb = pod_of(j, j->g.ev[e]);

		if (j->g.color[e] < 0) {
			rc = rz_push(unreal, (struct rz_circuits){pa < pb ? pa : pb,
								  pa < pb ? pb : pa, j->h, 1});
			if (rc)
				return rc;
			continue;
		}
		edge_ports(j, e, &a, &b);
		ta = ocs_fabric_tx_port(f, a);
		rb = ocs_fabric_rx_port(f, b);
		tb = ocs_fabric_tx_port(f, b);
		ra = ocs_fabric_rx_port(f, a);
		rc = xc_push(xcs, (struct ocs_xc){j->h, ta.device, ta.port, rb.port});
		if (rc == 0)
			rc = xc_push(xcs, (struct ocs_xc){j->h, tb.device, tb.port, ra.port});
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_circuits(const void *x, const void *y)
{
	const struct rz_circuits *a = x, *b = y;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	if (a->i != b->i)
		return a->i < b->i ? -1 : 1;
	if (a->j != b->j)
		return a->j < b->j ? -1 : 1;
	return 0;
}

/*
 * Sorts by (h, i, j): a stable counting sort on h, so input already ordered
 * by (i, j) (as planners emit it) needs nothing more; any group that is not
 * ordered yet is sorted on its own.
 */
static int sort_by_group(struct rz_circuits *v, size_t n, int H)
{
	size_t *start = calloc((size_t)H + 1, sizeof(*start));
	struct rz_circuits *tmp = malloc((n ? n : 1) * sizeof(*tmp));

	if (!start || !tmp) {
		free(start);
		free(tmp);
		return -ENOMEM;
	}
	for (size_t t = 0; t < n; t++)
		start[v[t].h + 1]++;
	for (int h = 0; h < H; h++)
		start[h + 1] += start[h];
	for (size_t t = 0; t < n; t++)
		tmp[start[v[t].h]++] = v[t];
	memcpy(v, tmp, n * sizeof(*v));
	for (size_t lo = 0, h = 0; h < (size_t)H; h++) {
		for (size_t t = lo + 1; t < start[h]; t++) {
			if (cmp_circuits(&v[t - 1], &v[t]) > 0) {
				qsort(v + lo, start[h] - lo, sizeof(*v), cmp_circuits);
				break;
			}
		}
		lo = start[h];
	}
	free(start);
	free(tmp);
	return 0;
}

void rz_result_free(struct rz_result *r)
{
	if (!r)
		return;
	free(r->xcs);
	free(r->unrealized);
	free(r);
}

int rz_realize(const struct ocs_fabric *f, const struct rz_circuits *topo, size_t n_topo,
	       const struct ocs_xc *pinned, size_t n_pinned, const struct ocs_xc *prefer,
	       size_t n_prefer, struct rz_result **out)
{
	int P = f->pods, H = ocs_fabric_groups(f);
	struct rz_circuits *sorted = malloc((n_topo ? n_topo : 1) * sizeof(*sorted));
	size_t n_sorted = 0;
	struct xc_list xcs = {0};
	struct rz_list unreal = {0};
	struct rz_result *r = calloc(1, sizeof(*r));
	int rc = 0;

	*out = NULL;
	if (!sorted || !r) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t t = 0; t < n_topo; t++) {
		struct rz_circuits c = topo[t];

		if (c.i < 0 || c.i >= P || c.j < 0 || c.j >= P || c.i == c.j || c.h < 0 ||
		    c.h >= H || c.circuits < 0 || c.circuits > f->k_spine) {
			rc = -EINVAL;
			goto fail;
		}
		if (c.i > c.j) {
			int x = c.i;

			c.i = c.j;
			c.j = x;
		}
		if (c.circuits)
			sorted[n_sorted++] = c;
	}
	rc = sort_by_group(sorted, n_sorted, H);
	if (rc)
		goto fail;
	for (size_t lo = 0, hi; lo < n_sorted; lo = hi) {
		struct group_job j = {.f = f,
				      .h = sorted[lo].h,
				      .pods = P,
				      .straight = f->wiring == OCS_WIRING_STRAIGHT};
		size_t np = 0;
		long total = 0;

		for (hi = lo; hi < n_sorted && sorted[hi].h == sorted[lo].h; hi++)
			total += sorted[hi].circuits;
		if (2 * total > (long)P * f->k_spine) {
			rc = -EINVAL;
			goto fail;
		}
		j.pi = malloc((hi - lo) * sizeof(int));
		j.pj = malloc((hi - lo) * sizeof(int));
		j.cnt = malloc((hi - lo) * sizeof(int));
		j.fwd = malloc((hi - lo) * sizeof(int));
		if (j.pi && j.pj && j.cnt && j.fwd) {
			for (size_t t = lo; t < hi; t++) {
				if (np && j.pi[np - 1] == sorted[t].i &&
				    j.pj[np - 1] == sorted[t].j) {
					j.cnt[np - 1] += sorted[t].circuits;
					continue;
				}
				j.pi[np] = sorted[t].i;
				j.pj[np] = sorted[t].j;
				j.cnt[np++] = sorted[t].circuits;
			}
			j.n_pairs = np;
			rc = realize_group(&j, pinned, n_pinned, prefer, n_prefer, &xcs, &unreal,
					   &r->unrealized_before_repair);
		} else {
			rc = -ENOMEM;
		}
		ec_release(&j.g);
		ec_release(&j.bip);
		free(j.pi);
		free(j.pj);
		free(j.cnt);
		free(j.fwd);
		if (rc)
			goto fail;
	}
	if (unreal.n)
		qsort(unreal.v, unreal.n, sizeof(*unreal.v), cmp_circuits);
	/* Merge equal neighbours left by the per-edge pushes. */
	{
		size_t w = 0;

		for (size_t t = 0; t < unreal.n; t++) {
			if (w && cmp_circuits(&unreal.v[w - 1], &unreal.v[t]) == 0)
				unreal.v[w - 1].circuits += unreal.v[t].circuits;
			else
				unreal.v[w++] = unreal.v[t];
		}
		unreal.n = w;
	}
	for (size_t t = 0; t < unreal.n; t++)
		r->unrealized_circuits += (size_t)unreal.v[t].circuits;
	r->xcs = xcs.v;
	r->n_xcs = xcs.n;
	r->unrealized = unreal.v;
	r->n_unrealized = unreal.n;
	free(sorted);
	*out = r;
	return 0;
fail:
	free(sorted);
	free(xcs.v);
	free(unreal.v);
	free(r);
	return rc;
}
