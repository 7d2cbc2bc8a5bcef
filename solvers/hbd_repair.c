/*
 * hbd_repair.c - the repair of a TP ring after one of its nodes failed
 * (hbd_ring.h, "fault bypass"): the bypass that joins the failed node's two
 * ring neighbours directly when they are within K of each other, else a
 * re-placement of the whole ring by the same orchestration, else "lost";
 * and, for a re-placement, exactly the bundles whose setting changes.
 *
 * Built on the planner's public calls only (hbd_plan, hbd_ring_bundles,
 * hbd_idle_bundles, hbd_ring_valid): a bypass is valid exactly when the
 * ring without the node obeys the physical model.
 */
#include "hbd_ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hbd_repair_kind_name(enum hbd_repair_kind k)
{
	switch (k) {
	case HBD_REPAIR_BYPASS:
		return "bypass";
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
 * nodes): new ring nodes take their new settings, old ring nodes that are
 * no longer in a ring go back to idle; `failed` is left alone.
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

/* The ring without rank j (whose neighbours are within K); its settings give the two changes. */
static int bypass(const struct ocs_ring_domain *d, const int *ring, int m, int j,
		  struct hbd_repair *out)
{
	size_t nb = (size_t)d->bundles;
	struct hbd_bundle *set;
	int rc;

	out->kind = HBD_REPAIR_BYPASS;
	out->m = m - 1;
	out->nodes = malloc((size_t)(m - 1) * sizeof(int));
	out->changes = malloc(2 * sizeof(*out->changes));
	set = malloc((size_t)(m - 1) * nb * sizeof(*set));
	if (!out->nodes || !out->changes || !set) {
		free(set);
		return -ENOMEM;
	}
	memcpy(out->nodes, ring, (size_t)j * sizeof(int));
	memcpy(out->nodes + j, ring + j + 1, (size_t)(m - j - 1) * sizeof(int));
	rc = hbd_ring_bundles(d, out->nodes, m - 1, set);
	if (rc == 0) {
		/* Ranks j-1 and j of the new ring are the failed node's two neighbours. */
		out->changes[0] = set[(size_t)(j - 1) * nb + HBD_BUNDLE_UP];
		out->changes[1] = set[(size_t)j * nb + HBD_BUNDLE_DOWN];
		out->n_changes = 2;
	}
	free(set);
	return rc;
}

int hbd_repair(const struct ocs_ring_domain *d, const uint8_t *use, const int *ring, int m,
	       int failed, const struct hbd_request *req, struct hbd_repair *out)
{
	struct hbd_request one;
	struct hbd_plan plan = {0};
	struct hbd_error err = {0};
	struct hbd_bundle *old_set = NULL;
	uint8_t *u = NULL;
	int j = -1, n, rc;

	memset(out, 0, sizeof(*out));
	if (!d || !use || !req || !hbd_ring_valid(d, ring, m) || (m >= 2 && d->bundles < 2) ||
	    d->gpus_per_node < 1 || req->tp != m * d->gpus_per_node)
		return -EINVAL;
	for (int i = 0; i < m; i++)
		if (ring[i] == failed)
			j = i;
	if (j < 0)
		return -EINVAL;
	/* The ring without the node keeps every other gap and its span shrinks. */
	if (j > 0 && j + 1 < m && hbd_ring_valid(d, (const int[]){ring[j - 1], ring[j + 1]}, 2)) {
		rc = bypass(d, ring, m, j, out);
		goto done;
	}
	/* No bypass: a new ring of m nodes, which may reuse this ring's healthy nodes. */
	n = ocs_ring_nodes(d);
	u = malloc((size_t)n);
	old_set = malloc((size_t)m * (size_t)d->bundles * sizeof(*old_set));
	rc = -ENOMEM;
	if (!u || !old_set)
		goto done;
	memcpy(u, use, (size_t)n);
	for (int i = 0; i < m; i++)
		u[ring[i]] = ring[i] == failed ? HBD_NODE_FAULTY : HBD_NODE_FREE;
	one = *req;
	one.gpus = req->tp;
	rc = hbd_plan(d, u, &one, &plan, &err);
	if (rc == -ENOSPC) {
		out->kind = HBD_REPAIR_LOST;
		snprintf(out->reason, sizeof(out->reason),
			 "node %d is at the %s and no ring of %d healthy free nodes is left",
			 failed,
			 j == 0 || j + 1 == m ? "end of its ring"
					      : "middle, its neighbours too far apart",
			 m);
		rc = 0;
		goto done;
	}
	if (rc)
		goto done;
	out->kind = HBD_REPAIR_REPLACE;
	out->m = m;
	out->nodes = plan.nodes;
	plan.nodes = NULL;
	snprintf(out->reason, sizeof(out->reason), "node %d: %s", failed,
		 j == 0 || j + 1 == m ? "an end node of the ring has no bypass"
				      : "its ring neighbours are more than K apart");
	rc = hbd_ring_bundles(d, ring, m, old_set);
	if (rc == 0)
		rc = replace_changes(d, ring, old_set, out->nodes, m, failed, out);
done:
	hbd_plan_clear(&plan);
	free(u);
	free(old_set);
	if (rc)
		hbd_repair_clear(out);
	return rc;
}
