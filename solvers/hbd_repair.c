/*
 * hbd_repair.c - the repair of a TP ring after one of its nodes failed
 * (hbd_ring.h, "fault bypass"): a ring keeps its m nodes. First the
 * bypass-extend (the ring skips the failed node and takes in one healthy
 * free node within the K-hop rule), else a re-placement of the whole ring
 * by the same orchestration, else "lost"; either way exactly the bundles
 * whose setting changes.
 *
 * Built on the planner's public calls only (hbd_plan, hbd_ring_bundles,
 * hbd_idle_bundles, hbd_ring_valid): an extension is valid exactly when the
 * ring with the new node in the failed node's stead obeys the physical
 * model.
 */
#include "hbd_ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hbd_repair_kind_name(enum hbd_repair_kind k)
{
	switch (k) {
	case HBD_REPAIR_EXTEND:
		return "bypass-extend";
	case HBD_REPAIR_REPLACE:
		return "replace";
	case HBD_REPAIR_LOST:
		return "lost";
	}
	return NULL;
}

void hbd_repair_clear(struct hbd_repair *r)
{
	if (!r)
		return;
	free(r->nodes);
	free(r->changes);
	r->nodes = NULL;
	r->changes = NULL;
	r->n_changes = 0;
}

static bool bundle_same(const struct hbd_bundle *a, const struct hbd_bundle *b)
{
	return a->path == b->path && a->distance == b->distance && a->dir == b->dir &&
	       a->peer == b->peer;
}

/* A node and where its settings are in a ring's bundle array. */
struct node_slot {
	int node;
	int index;
};

static int slot_cmp(const void *a, const void *b)
{
	const struct node_slot *x = a, *y = b;

	return (x->node > y->node) - (x->node < y->node);
}

static const struct node_slot *slot_find(const struct node_slot *s, int n, int node)
{
	struct node_slot key = {node, 0};

	return bsearch(&key, s, (size_t)n, sizeof(*s), slot_cmp);
}

static struct node_slot *slots_of(const int *ring, int m)
{
	struct node_slot *s = malloc((size_t)m * sizeof(*s));

	if (!s)
		return NULL;
	for (int i = 0; i < m; i++)
		s[i] = (struct node_slot){ring[i], i};
	qsort(s, (size_t)m, sizeof(*s), slot_cmp);
	return s;
}

/* Appends to changes every bundle of `now` (nb settings) that differs from `before`. */
static void diff_node(const struct hbd_bundle *before, const struct hbd_bundle *now, int nb,
		      struct hbd_bundle *changes, size_t *n_changes)
{
	for (int b = 0; b < nb; b++)
		if (!bundle_same(&before[b], &now[b]))
			changes[(*n_changes)++] = now[b];
}

/*
 * The changes from old ring (m nodes, settings old_set) to new ring (m
 * nodes), an extension or a re-placement: new ring nodes take their new
 * settings, old ring nodes that are no longer in a ring go back to idle;
 * `failed` is left alone. Only bundles whose setting differs are listed.
 */
static int replace_changes(const struct ocs_ring_domain *d, const int *old_ring,
			   const struct hbd_bundle *old_set, const int *new_ring, int m, int failed,
			   struct hbd_repair *out)
{
	size_t nb = (size_t)d->bundles;
	struct hbd_bundle *new_set = malloc((size_t)m * nb * sizeof(*new_set));
	struct hbd_bundle *idle = malloc(nb * sizeof(*idle));
	struct node_slot *old_slots = slots_of(old_ring, m), *new_slots = slots_of(new_ring, m);
	int rc = -ENOMEM;

	out->changes = malloc(2 * (size_t)m * nb * sizeof(*out->changes));
	if (!new_set || !idle || !old_slots || !new_slots || !out->changes)
		goto done;
	rc = hbd_ring_bundles(d, new_ring, m, new_set);
	if (rc)
		goto done;
	for (int i = 0; i < m; i++) {
		const struct node_slot *was = slot_find(old_slots, m, new_ring[i]);
		const struct hbd_bundle *before = idle;

		if (was)
			before = old_set + (size_t)was->index * nb;
		else
			hbd_idle_bundles(d, new_ring[i], idle);
		diff_node(before, new_set + (size_t)i * nb, d->bundles, out->changes,
			  &out->n_changes);
	}
	for (int i = 0; i < m; i++) {
		if (old_ring[i] == failed || slot_find(new_slots, m, old_ring[i]))
			continue;
		hbd_idle_bundles(d, old_ring[i], idle);
		diff_node(old_set + (size_t)i * nb, idle, d->bundles, out->changes,
			  &out->n_changes);
	}
done:
	free(new_set);
	free(idle);
	free(old_slots);
	free(new_slots);
	return rc;
}

/* The position t steps from pos (up when t > 0), or -1 off an open line. */
static int step(const struct ocs_ring_domain *d, int pos, int t)
{
	int n = ocs_ring_nodes(d);

	pos += t;
	if (d->closed)
		return ((pos % n) + n) % n;
	return pos >= 0 && pos < n ? pos : -1;
}

/*
 * The best node to take in at slot s of rest (the ring without its failed
 * node, m - 1 ranks): cand becomes rest[0..s) + x + rest[s..). x is a
 * healthy free node 1..K above rank s - 1 (or below rank 0 for s = 0) with
 * which the ring obeys the model; one under the failed node's ToR first,
 * else the nearest. -1 when there is none.
 */
static int extend_at(const struct ocs_ring_domain *d, const uint8_t *use, const int *rest, int m,
		     int s, int failed_tor, int *cand)
{
	int anchor = ocs_ring_position(d, rest[s > 0 ? s - 1 : 0]), dir = s > 0 ? 1 : -1;
	int best = -1;

	memcpy(cand, rest, (size_t)s * sizeof(int));
	memcpy(cand + s + 1, rest + s, (size_t)(m - 1 - s) * sizeof(int));
	for (int t = 1; t <= d->k_hops; t++) {
		int pos = step(d, anchor, dir * t), x;

		if (pos < 0)
			break;
		x = ocs_ring_node_at(d, pos);
		if (use[x] != HBD_NODE_FREE)
			continue;
		cand[s] = x;
		if (!hbd_ring_valid(d, cand, m))
			continue;
		if (best < 0)
			best = x;
		if (ocs_ring_node_tor(d, x) == failed_tor) {
			best = x;
			break;
		}
	}
	cand[s] = best;
	return best;
}

/*
 * The bypass-extend of rank j (m >= 2): the slot of the failed node first
 * (its gap, or the end it held), then either end, then the other gaps (two
 * more bundles change there). Fills out->nodes and out->added; false when
 * no healthy free node fits anywhere.
 */
static bool extend(const struct ocs_ring_domain *d, const uint8_t *use, const int *ring, int m,
		   int j, int *rest, struct hbd_repair *out)
{
	int failed_tor = ocs_ring_node_tor(d, ring[j]);

	memcpy(rest, ring, (size_t)j * sizeof(int));
	memcpy(rest + j, ring + j + 1, (size_t)(m - j - 1) * sizeof(int));
	for (int k = -3; k < m; k++) {
		/* k = -3, -2, -1: slot j, slot 0, slot m - 1; then every slot left */
		int s = k == -3 ? j : k == -2 ? 0 : k == -1 ? m - 1 : k;

		if (k >= 0 && (s == j || s == 0 || s == m - 1))
			continue;
		if (extend_at(d, use, rest, m, s, failed_tor, out->nodes) >= 0) {
			out->added = out->nodes[s];
			return true;
		}
	}
	return false;
}

int hbd_repair(const struct ocs_ring_domain *d, const uint8_t *use, const int *ring, int m,
	       int failed, const struct hbd_request *req, struct hbd_repair *out)
{
	struct hbd_request one;
	struct hbd_plan plan = {0};
	struct hbd_error err = {0};
	struct hbd_bundle *old_set = NULL;
	uint8_t *u = NULL;
	int *rest = NULL;
	int j = -1, n, rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->added = -1;
	if (!d || !use || !req || !hbd_ring_valid(d, ring, m) || (m >= 2 && d->bundles < 2) ||
	    d->gpus_per_node < 1 || req->tp != m * d->gpus_per_node)
		return -EINVAL;
	for (int i = 0; i < m; i++)
		if (ring[i] == failed)
			j = i;
	if (j < 0)
		return -EINVAL;
	n = ocs_ring_nodes(d);
	old_set = malloc((size_t)m * (size_t)d->bundles * sizeof(*old_set));
	out->nodes = malloc((size_t)m * sizeof(int));
	rest = malloc((size_t)m * sizeof(int));
	if (!old_set || !out->nodes || !rest)
		goto done;
	rc = hbd_ring_bundles(d, ring, m, old_set);
	if (rc)
		goto done;
	/* 1. Bypass and extend: the same ring of m nodes, one node swapped in. */
	if (m >= 2 && extend(d, use, ring, m, j, rest, out)) {
		out->kind = HBD_REPAIR_EXTEND;
		out->m = m;
		rc = replace_changes(d, ring, old_set, out->nodes, m, failed, out);
		goto done;
	}
	free(out->nodes);
	out->nodes = NULL;
	/* 2. Re-place: a new ring of m nodes, which may reuse this ring's healthy nodes. */
	u = malloc((size_t)n);
	rc = -ENOMEM;
	if (!u)
		goto done;
	memcpy(u, use, (size_t)n);
	for (int i = 0; i < m; i++)
		u[ring[i]] = ring[i] == failed ? HBD_NODE_FAULTY : HBD_NODE_FREE;
	one = *req;
	one.gpus = req->tp;
	rc = hbd_plan(d, u, &one, &plan, &err);
	if (rc == -ENOSPC) {
		/* 3. Lost. */
		out->kind = HBD_REPAIR_LOST;
		snprintf(out->reason, sizeof(out->reason),
			 "node %d failed: no healthy free node within %d hops extends its ring and "
			 "no ring of %d healthy free nodes is left",
			 failed, d->k_hops, m);
		rc = 0;
		goto done;
	}
	if (rc)
		goto done;
	out->kind = HBD_REPAIR_REPLACE;
	out->m = m;
	out->nodes = plan.nodes;
	plan.nodes = NULL;
	snprintf(out->reason, sizeof(out->reason),
		 "node %d failed: no healthy free node within %d hops extends its ring", failed,
		 d->k_hops);
	rc = replace_changes(d, ring, old_set, out->nodes, m, failed, out);
done:
	hbd_plan_clear(&plan);
	free(u);
	free(rest);
	free(old_set);
	if (rc)
		hbd_repair_clear(out);
	return rc;
}
