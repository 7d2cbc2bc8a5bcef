/*
 * leafcentric_request.c - the request side of leafcentric.h, apart from
 * planning: lc_validate() (demand pairs, leaf uplink totals, duplicate
 * pairs; the existing cross-connects through the L2 checker),
 * lc_validate_usage() (the leaf-spine usage of live jobs) and
 * lc_usage_from_assignment() (that usage from plans' assignments). It
 * uses only the public types of leafcentric.h; lc_plan() and pc_plan()
 * (leafcentric.c) refuse what these validations refuse.
 */
#include "leafcentric.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2check.h"

struct problems {
	struct lc_problem *out;
	int max_out, count;
};

static void problem(struct problems *p, const char *what, size_t idx, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void problem(struct problems *p, const char *what, size_t idx, const char *fmt, ...)
{
	if (p->count < p->max_out) {
		va_list ap;

		snprintf(p->out[p->count].field, sizeof(p->out[p->count].field), "%s[%zu]", what,
			 idx);
		va_start(ap, fmt);
		vsnprintf(p->out[p->count].reason, sizeof(p->out[p->count].reason), fmt, ap);
		va_end(ap);
	}
	p->count++;
}

static void validate_existing(const struct ocs_fabric *f, const struct ocs_xc *existing,
			      size_t n_existing, struct problems *p)
{
	int room = p->max_out > p->count ? p->max_out - p->count : 0;
	struct l2_violation *v = room ? calloc((size_t)room, sizeof(*v)) : NULL;
	int n = l2_check(f, existing, n_existing, v, v ? room : 0);

	if (n < 0) {
		problem(p, "existing", 0, "cannot check: out of memory");
		free(v);
		return;
	}
	for (int i = 0; i < n; i++) {
		size_t idx = 0;

		if (i >= room || !v) {
			p->count++;
			continue;
		}
		while (idx < n_existing && memcmp(&existing[idx], &v[i].xc, sizeof(v[i].xc)))
			idx++;
		problem(p, "existing", idx, "group %d device %d in %d out %d: %s", v[i].xc.group,
			v[i].xc.device, v[i].xc.in, v[i].xc.out, v[i].reason);
	}
	free(v);
}

int lc_validate(const struct ocs_fabric *f, const struct lc_demand *demand, size_t n_demand,
		const struct ocs_xc *existing, size_t n_existing, struct lc_problem *out,
		int max_out)
{
	struct problems p = {out, out ? max_out : 0, 0};
	int nl = ocs_fabric_leaves(f);
	long *used = calloc((size_t)nl, sizeof(*used));
	/* Pairs (lo, hi) bucketed by lo: start[lo].. in bucket order; mark[hi] = lo + 1. */
	size_t *start = calloc((size_t)nl + 1, sizeof(*start));
	size_t *order = malloc((n_demand ? n_demand : 1) * sizeof(*order));
	bool *pair_ok = calloc(n_demand ? n_demand : 1, sizeof(*pair_ok));
	int *mark = calloc((size_t)nl, sizeof(*mark));
	size_t *first = malloc((size_t)(nl ? nl : 1) * sizeof(*first));

	if (!used || !start || !order || !pair_ok || !mark || !first) {
		problem(&p, "demand", 0, "cannot check: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_demand; i++) {
		const struct lc_demand *d = &demand[i];
		bool ok = true;

		if (d->a < 0 || d->a >= nl) {
			problem(&p, "demand", i, "leaf a = %d out of range 0..%d", d->a, nl - 1);
			ok = false;
		}
		if (d->b < 0 || d->b >= nl) {
			problem(&p, "demand", i, "leaf b = %d out of range 0..%d", d->b, nl - 1);
			ok = false;
		}
		if (d->links < 0) {
			problem(&p, "demand", i, "links = %d is negative", d->links);
			ok = false;
		}
		if (!ok)
			continue;
		if (d->a == d->b) {
			problem(&p, "demand", i, "a and b are the same leaf %d", d->a);
			continue;
		}
		if (ocs_fabric_leaf_pod(f, d->a) == ocs_fabric_leaf_pod(f, d->b)) {
			problem(&p, "demand", i, "leaves %d and %d are both in pod %d", d->a, d->b,
				ocs_fabric_leaf_pod(f, d->a));
			continue;
		}
		pair_ok[i] = true;
		start[(d->a < d->b ? d->a : d->b) + 1]++;
		for (int s = 0; s < 2; s++) {
			int leaf = s ? d->b : d->a;
			bool was_ok = used[leaf] <= f->k_leaf;

			used[leaf] += d->links;
			if (was_ok && used[leaf] > f->k_leaf)
				problem(&p, "demand", i,
					"leaf %d needs %ld uplinks, more than its k_leaf = %d",
					leaf, used[leaf], f->k_leaf);
		}
	}
	for (int l = 0; l < nl; l++)
		start[l + 1] += start[l];
	for (size_t i = 0; i < n_demand; i++)
		if (pair_ok[i])
			order[start[demand[i].a < demand[i].b ? demand[i].a : demand[i].b]++] = i;
	for (int lo = 0, at = 0; lo < nl; lo++) {
		/* start[lo] is now the end of bucket lo; entries keep index order. */
		for (; (size_t)at < start[lo]; at++) {
			const struct lc_demand *d = &demand[order[at]];
			int hi = d->a < d->b ? d->b : d->a;

			if (mark[hi] == lo + 1) {
				problem(&p, "demand", order[at],
					"leaves %d and %d already appear as a pair in demand[%zu]",
					lo, hi, first[hi]);
				continue;
			}
			mark[hi] = lo + 1;
			first[hi] = order[at];
		}
	}
	validate_existing(f, existing, n_existing, &p);
out:
	free(used);
	free(start);
	free(order);
	free(pair_ok);
	free(mark);
	free(first);
	return p.count;
}

int lc_validate_usage(const struct ocs_fabric *f, const struct lc_leaf_usage *usage, size_t n_usage,
		      struct lc_problem *out, int max_out)
{
	struct problems p = {out, out ? max_out : 0, 0};
	int nl = ocs_fabric_leaves(f), H = ocs_fabric_spines_per_pod(f);
	long *total;

	if (n_usage && !usage) {
		problem(&p, "leaf_spine_usage", 0, "missing (NULL with %zu entries)", n_usage);
		return p.count;
	}
	total = calloc((size_t)(nl > 0 ? nl : 1), sizeof(*total));
	if (!total) {
		problem(&p, "leaf_spine_usage", 0, "cannot check: out of memory");
		return p.count;
	}
	for (size_t i = 0; i < n_usage; i++) {
		const struct lc_leaf_usage *u = &usage[i];
		bool ok = true;

		if (u->leaf < 0 || u->leaf >= nl) {
			problem(&p, "leaf_spine_usage", i, "leaf = %d out of range 0..%d", u->leaf,
				nl - 1);
			ok = false;
		}
		if (u->spine < 0 || u->spine >= H) {
			problem(&p, "leaf_spine_usage", i, "spine = %d out of range 0..%d",
				u->spine, H - 1);
			ok = false;
		}
		if (u->links < 0) {
			problem(&p, "leaf_spine_usage", i, "links = %d is negative", u->links);
			ok = false;
		}
		if (ok && total[u->leaf] <= f->k_leaf && (total[u->leaf] += u->links) > f->k_leaf)
			problem(&p, "leaf_spine_usage", i,
				"leaf %d uses %ld uplinks, more than its k_leaf = %d", u->leaf,
				total[u->leaf], f->k_leaf);
	}
	free(total);
	return p.count;
}

static int cmp_usage(const void *x, const void *y)
{
	const struct lc_leaf_usage *a = x, *b = y;

	if (a->leaf != b->leaf)
		return a->leaf < b->leaf ? -1 : 1;
	return (a->spine > b->spine) - (a->spine < b->spine);
}

int lc_usage_from_assignment(const struct lc_spine_links *assignment, size_t n_assignment,
			     struct lc_leaf_usage **out, size_t *n_out)
{
	struct lc_leaf_usage *u;
	size_t n = 0, m = 0;

	*out = NULL;
	*n_out = 0;
	for (size_t i = 0; i < n_assignment; i++) {
		const struct lc_spine_links *s = &assignment[i];

		if (s->a < 0 || s->b < 0 || s->h < 0 || s->links < 0)
			return -EINVAL;
	}
	u = malloc((n_assignment ? 2 * n_assignment : 1) * sizeof(*u));
	if (!u)
		return -ENOMEM;
	for (size_t i = 0; i < n_assignment; i++) {
		const struct lc_spine_links *s = &assignment[i];

		if (s->links == 0)
			continue;
		u[n++] = (struct lc_leaf_usage){s->a, s->h, s->links};
		u[n++] = (struct lc_leaf_usage){s->b, s->h, s->links};
	}
	qsort(u, n, sizeof(*u), cmp_usage);
	for (size_t i = 0; i < n; i++) {
		if (m > 0 && cmp_usage(&u[m - 1], &u[i]) == 0)
			u[m - 1].links += u[i].links;
		else
			u[m++] = u[i];
	}
	*out = u;
	*n_out = m;
	return 0;
}
