/*
 * rings.c - implementation of rings.h: the ring records, job by job, and
 * per node its holder (index into the records, rebuilt on every change:
 * O(nodes + ring nodes), a few microseconds for the 1,024-node domain) and
 * its condition.
 */
#include "rings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

struct rg_state {
	const struct ocs_ring_domain *d;
	int n_nodes;
	struct rg_ring *rings; /* job by job, each job's rings by index */
	size_t n_rings, cap_rings;
	int *holder;  /* per node: index into rings, -1 when free */
	bool *faulty; /* per node */
	size_t n_faulty;
	unsigned long gen;
};

struct rg_ring *rg_rings_dup(const struct rg_ring *rings, size_t n)
{
	struct rg_ring *out = calloc(n ? n : 1, sizeof(*out));

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		out[i] = rings[i];
		out[i].nodes = malloc((size_t)(rings[i].m ? rings[i].m : 1) * sizeof(int));
		if (!out[i].nodes) {
			rg_rings_free(out, i);
			return NULL;
		}
		if (rings[i].m)
			memcpy(out[i].nodes, rings[i].nodes, (size_t)rings[i].m * sizeof(int));
	}
	return out;
}

void rg_rings_free(struct rg_ring *rings, size_t n)
{
	if (!rings)
		return;
	for (size_t i = 0; i < n; i++)
		free(rings[i].nodes);
	free(rings);
}

struct rg_state *rg_new(const struct ocs_ring_domain *d)
{
	struct rg_state *rg = calloc(1, sizeof(*rg));

	if (!rg)
		return NULL;
	rg->d = d;
	rg->n_nodes = ocs_ring_nodes(d);
	rg->holder = malloc((size_t)(rg->n_nodes + 1) * sizeof(*rg->holder));
	rg->faulty = calloc((size_t)rg->n_nodes + 1, sizeof(*rg->faulty));
	if (!rg->holder || !rg->faulty) {
		rg_free(rg);
		return NULL;
	}
	for (int i = 0; i < rg->n_nodes; i++)
		rg->holder[i] = -1;
	return rg;
}

void rg_free(struct rg_state *rg)
{
	if (!rg)
		return;
	rg_rings_free(rg->rings, rg->n_rings);
	free(rg->holder);
	free(rg->faulty);
	free(rg);
}

static void reindex(struct rg_state *rg)
{
	for (int i = 0; i < rg->n_nodes; i++)
		rg->holder[i] = -1;
	for (size_t r = 0; r < rg->n_rings; r++)
		for (int k = 0; k < rg->rings[r].m; k++) {
			int node = rg->rings[r].nodes[k];

			if (node >= 0 && node < rg->n_nodes)
				rg->holder[node] = (int)r;
		}
	rg->gen++;
}

int rg_set_job_rings(struct rg_state *rg, const char *job_id, const struct rg_ring *rings, size_t n)
{
	struct rg_ring *copy = rg_rings_dup(rings, n);
	size_t kept = 0;

	if (!copy)
		return -ENOMEM;
	if (rg->n_rings + n > rg->cap_rings) {
		size_t cap = (rg->n_rings + n) * 2 + 16;
		struct rg_ring *p = realloc(rg->rings, cap * sizeof(*p));

		if (!p) {
			rg_rings_free(copy, n);
			return -ENOMEM;
		}
		rg->rings = p;
		rg->cap_rings = cap;
	}
	for (size_t i = 0; i < rg->n_rings; i++) {
		if (strcmp(rg->rings[i].job_id, job_id) == 0)
			free(rg->rings[i].nodes);
		else
			rg->rings[kept++] = rg->rings[i];
	}
	rg->n_rings = kept;
	for (size_t i = 0; i < n; i++) {
		snprintf(copy[i].job_id, sizeof(copy[i].job_id), "%s", job_id);
		rg->rings[rg->n_rings++] = copy[i];
	}
	free(copy); /* the records moved; their node arrays are the state's now */
	reindex(rg);
	return 0;
}

const struct rg_ring *rg_job_rings(const struct rg_state *rg, const char *job_id, size_t *n)
{
	size_t first = 0, count = 0;

	for (size_t i = 0; i < rg->n_rings; i++)
		if (strcmp(rg->rings[i].job_id, job_id) == 0) {
			if (!count)
				first = i;
			count++;
		}
	*n = count;
	return count ? &rg->rings[first] : NULL;
}

size_t rg_count(const struct rg_state *rg)
{
	return rg->n_rings;
}

const struct rg_ring *rg_at(const struct rg_state *rg, size_t i)
{
	return i < rg->n_rings ? &rg->rings[i] : NULL;
}

size_t rg_active(const struct rg_state *rg)
{
	size_t n = 0;

	for (size_t i = 0; i < rg->n_rings; i++)
		n += rg->rings[i].m > 0;
	return n;
}

const struct ocs_ring_domain *rg_domain(const struct rg_state *rg)
{
	return rg->d;
}

int rg_nodes(const struct rg_state *rg)
{
	return rg->n_nodes;
}

unsigned long rg_generation(const struct rg_state *rg)
{
	return rg->gen;
}

const struct rg_ring *rg_holder(const struct rg_state *rg, int node)
{
	if (node < 0 || node >= rg->n_nodes || rg->holder[node] < 0)
		return NULL;
	return &rg->rings[rg->holder[node]];
}

void rg_set_faulty(struct rg_state *rg, int node, bool faulty, const char *source, int64_t since_ms)
{
	/* who said so and when are kept by the store (st_fault_list); the API reports conditions */
	(void)source;
	(void)since_ms;
	if (node < 0 || node >= rg->n_nodes)
		return;
	if (rg->faulty[node] != faulty)
		rg->n_faulty += faulty ? 1 : (size_t)-1;
	rg->faulty[node] = faulty;
	rg->gen++;
}

bool rg_faulty(const struct rg_state *rg, int node)
{
	return node >= 0 && node < rg->n_nodes && rg->faulty[node];
}

size_t rg_n_faulty(const struct rg_state *rg)
{
	return rg->n_faulty;
}

uint8_t *rg_use_snapshot(const struct rg_state *rg, const char *except_job)
{
	uint8_t *use = malloc((size_t)rg->n_nodes + 1);

	if (!use)
		return NULL;
	for (int i = 0; i < rg->n_nodes; i++) {
		const struct rg_ring *h = rg_holder(rg, i);

		if (rg->faulty[i])
			use[i] = HBD_NODE_FAULTY;
		else if (h && (!except_job || strcmp(h->job_id, except_job) != 0))
			use[i] = HBD_NODE_BUSY;
		else
			use[i] = HBD_NODE_FREE;
	}
	return use;
}

int rg_node_bundles(const struct rg_state *rg, int node, struct hbd_bundle *out)
{
	const struct rg_ring *h = rg_holder(rg, node);
	struct hbd_bundle *all;
	int k, rc;

	if (node < 0 || node >= rg->n_nodes)
		return -EINVAL;
	if (!h) {
		hbd_idle_bundles(rg->d, node, out);
		return 0;
	}
	all = malloc((size_t)h->m * (size_t)rg->d->bundles * sizeof(*all));
	if (!all)
		return -ENOMEM;
	rc = hbd_ring_bundles(rg->d, h->nodes, h->m, all);
	for (k = 0; rc == 0 && h->nodes[k] != node; k++)
		;
	if (rc == 0)
		memcpy(out, &all[(size_t)k * (size_t)rg->d->bundles],
		       (size_t)rg->d->bundles * sizeof(*out));
	free(all);
	return rc;
}

/* ---- loading ---- */

static int load_ring(void *arg, const struct rg_ring *r)
{
	struct rg_state *rg = arg;
	size_t n = 0;
	const struct rg_ring *have = rg_job_rings(rg, r->job_id, &n);
	struct rg_ring *all = malloc((n + 1) * sizeof(*all));
	int rc;

	if (!all)
		return -ENOMEM;
	if (n)
		memcpy(all, have, n * sizeof(*all));
	all[n] = *r;
	rc = rg_set_job_rings(rg, r->job_id, all, n + 1);
	free(all);
	return rc;
}

static int load_fault(void *arg, int node, const char *source, int64_t since_ms)
{
	rg_set_faulty(arg, node, true, source, since_ms);
	return 0;
}

int rg_load(struct rg_state *rg, struct st_store *st)
{
	int rc = st_ring_list(st, load_ring, rg);

	return rc ? rc : st_fault_list(st, load_fault, rg);
}
