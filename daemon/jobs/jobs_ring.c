/*
 * jobs_ring.c - the change sets of ring jobs (OCSTrx ring domains), for
 * the job manager: a plan's rings and bundle settings, a release (every
 * node of the job back to loopback), and the repair of a ring after one of
 * its nodes failed (hbd_repair: bypass-extend, re-place or lost). Pure functions
 * of the ring state they are given; jobs.c decides when they run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_internal.h"

int jr_request(const struct jm_ring_request *r, const struct ocs_ring_domain *d,
	       struct hbd_request *out)
{
	memset(out, 0, sizeof(*out));
	out->tp = r->tp;
	out->gpus = r->gpus ? r->gpus : (int64_t)r->rings * r->tp;
	out->seed = r->seed ? r->seed : 1;
	(void)d;
	if (!r->orchestration[0]) {
		out->orch = HBD_ORCH_DCN_FREE;
		return 0;
	}
	return hbd_orch_parse(r->orchestration, &out->orch);
}

/* Appends n settings to c->bundles. 0 or -ENOMEM. */
static int add_bundles(struct jp_change *c, const struct hbd_bundle *b, size_t n)
{
	struct hbd_bundle *p = realloc(c->bundles, (c->n_bundles + n + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	c->bundles = p;
	memcpy(&p[c->n_bundles], b, n * sizeof(*b));
	c->n_bundles += n;
	return 0;
}

int jr_plan_change(const struct ocs_ring_domain *d, const struct hbd_plan *p, struct jp_change *c)
{
	size_t per_ring = (size_t)p->m * (size_t)d->bundles;
	struct hbd_bundle *b = malloc((per_ring ? per_ring : 1) * sizeof(*b));
	int rc = 0;

	c->rings = calloc((size_t)p->n_rings + 1, sizeof(*c->rings));
	if (!b || !c->rings) {
		free(b);
		return -ENOMEM;
	}
	for (int k = 0; rc == 0 && k < p->n_rings; k++) {
		struct rg_ring *r = &c->rings[k];

		r->index = k;
		r->m = p->m;
		r->last_change = RG_PLACED;
		r->failed_node = -1;
		r->nodes = malloc((size_t)p->m * sizeof(int));
		if (!r->nodes) {
			rc = -ENOMEM;
			break;
		}
		c->n_rings++;
		memcpy(r->nodes, &p->nodes[(size_t)k * (size_t)p->m], (size_t)p->m * sizeof(int));
		rc = hbd_ring_bundles(d, r->nodes, r->m, b);
		if (rc == 0)
			rc = add_bundles(c, b, per_ring);
	}
	free(b);
	return rc;
}

/* Idle settings of every healthy node of ring. 0 or -ENOMEM. */
static int idle_ring(const struct rg_state *rg, const struct rg_ring *ring, struct jp_change *c)
{
	const struct ocs_ring_domain *d = rg_domain(rg);
	struct hbd_bundle *b = malloc((size_t)d->bundles * sizeof(*b));
	int rc = b ? 0 : -ENOMEM;

	for (int k = 0; rc == 0 && k < ring->m; k++) {
		if (rg_faulty(rg, ring->nodes[k]))
			continue; /* never program a faulty node */
		hbd_idle_bundles(d, ring->nodes[k], b);
		rc = add_bundles(c, b, (size_t)d->bundles);
	}
	free(b);
	return rc;
}

int jr_release_change(const struct rg_state *rg, const char *job_id, struct jp_change *c)
{
	size_t n = 0;
	const struct rg_ring *rings = rg_job_rings(rg, job_id, &n);
	int rc = 0;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = idle_ring(rg, &rings[i], c);
	return rc;
}

const struct rg_ring *jr_broken_ring(const struct rg_state *rg, const char *job_id, int *failed)
{
	size_t n = 0;
	const struct rg_ring *rings = rg_job_rings(rg, job_id, &n);

	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < rings[i].m; k++)
			if (rg_faulty(rg, rings[i].nodes[k])) {
				*failed = rings[i].nodes[k];
				return &rings[i];
			}
	return NULL;
}

void jr_mask_drained(const struct rg_state *rg, const bool *drained, uint8_t *use)
{
	for (int i = 0; drained && i < rg_nodes(rg); i++)
		if (drained[i] && use[i] == HBD_NODE_FREE)
			use[i] = HBD_NODE_BUSY;
}

int jr_repair_change(const struct rg_state *rg, const bool *drained, const struct rg_ring *ring,
		     int failed, const struct jm_ring_request *req, int64_t now_ms,
		     struct jp_change *c, enum rg_change *kind)
{
	const struct ocs_ring_domain *d = rg_domain(rg);
	size_t n = 0;
	const struct rg_ring *rings = rg_job_rings(rg, ring->job_id, &n);
	uint8_t *use = rg_use_snapshot(rg, NULL);
	struct hbd_request hr;
	struct hbd_repair r = {0};
	struct rg_ring *mine;
	int rc;

	memset(c, 0, sizeof(*c));
	if (!use)
		return -ENOMEM;
	jr_mask_drained(rg, drained, use);
	if (jr_request(req, d, &hr) != 0)
		hr.orch = HBD_ORCH_DCN_FREE;
	/* the ring as it is now: a repair keeps its size (only an older ocsd's bypass shrank one)
	 */
	hr.tp = ring->m * d->gpus_per_node;
	rc = hbd_repair(d, use, ring->nodes, ring->m, failed, &hr, &r);
	free(use);
	if (rc)
		return rc;
	c->rings = rg_rings_dup(rings, n);
	if (!c->rings) {
		hbd_repair_clear(&r);
		return -ENOMEM;
	}
	c->n_rings = n;
	mine = &c->rings[ring - rings];
	mine->failed_node = failed;
	mine->changed_ms = now_ms;
	mine->reason[0] = '\0';
	if (r.kind == HBD_REPAIR_LOST) {
		*kind = RG_LOST;
		mine->last_change = RG_LOST;
		snprintf(mine->reason, sizeof(mine->reason), "%s", r.reason);
		rc = idle_ring(rg, ring, c); /* its healthy nodes go back to loopback */
		mine->m = 0;
	} else {
		int *nodes = malloc((size_t)r.m * sizeof(int));

		*kind = r.kind == HBD_REPAIR_EXTEND ? RG_EXTENDED : RG_REPLACED;
		mine->last_change = *kind;
		rc = nodes ? 0 : -ENOMEM;
		if (nodes) {
			memcpy(nodes, r.nodes, (size_t)r.m * sizeof(int));
			free(mine->nodes);
			mine->nodes = nodes;
			mine->m = r.m;
		}
		for (size_t i = 0; rc == 0 && i < r.n_changes; i++)
			if (!rg_faulty(rg, r.changes[i].node))
				rc = add_bundles(c, &r.changes[i], 1);
	}
	hbd_repair_clear(&r);
	return rc;
}
