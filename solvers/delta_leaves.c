/*
 * delta_leaves.c - pod-level DELTA plan -> leaf-level demand (see
 * delta_leaves.h).
 */
#include "delta_leaves.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pair_weight {
	int a, b; /* leaves, a < b */
	long weight;
	int links;
};

struct acc {
	struct pair_weight *v;
	size_t n, cap;
};

static int acc_add(struct acc *s, int a, int b, long weight)
{
	if (a > b) {
		int t = a;
		a = b;
		b = t;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].a == a && s->v[i].b == b) {
			s->v[i].weight += weight;
			return 0;
		}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct pair_weight *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct pair_weight){a, b, weight, 0};
	return 0;
}

static int cmp_pair(const void *x, const void *y)
{
	const struct pair_weight *p = x, *q = y;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return (p->b > q->b) - (p->b < q->b);
}

/*
 * Global GPU of lane r of stage s of co-located replica u in pod set k:
 * from the caller's list, or the default (the first GPUs of each pod, by
 * stage, replica, lane).
 */
static long gpu_of(const struct ocs_fabric *f, const struct delta_workload *w, const int64_t *gpus,
		   int k, int s, int u, int r)
{
	long rank = (((long)k * w->stages + s) * w->replicas_per_pod_set + u) * w->stage_width + r;
	if (gpus)
		return (long)gpus[rank];
	int g = w->gpus_per_pod_per_replica, sw = w->stage_width;
	int first_stage = (s * sw / g) * g / sw;
	long local = ((long)(s - first_stage) * w->replicas_per_pod_set + u) * sw + r;
	return (long)delta_workload_gpu_pod(w, rank) * ocs_fabric_leaves_per_pod(f) * f->k_leaf +
	       local;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int delta_check_gpu_ids(const struct ocs_fabric *f, const struct delta_workload *w,
			const int64_t *gpus, struct delta_error *err)
{
	long n = delta_workload_gpus(w);
	char field[64];
	for (long i = 0; i < n; i++) {
		snprintf(field, sizeof(field), "placement.gpu_ids[%ld]", i);
		if (gpus[i] < 0 || gpus[i] >= ocs_fabric_gpus(f))
			return delta_error_set(
				err, field, "GPU %lld is not in the fabric (0..%lld)",
				(long long)gpus[i], (long long)ocs_fabric_gpus(f) - 1);
		int pod = ocs_fabric_leaf_pod(f, ocs_fabric_gpu_leaf(f, gpus[i]));
		if (pod != delta_workload_gpu_pod(w, i))
			return delta_error_set(
				err, field,
				"GPU %lld sits in pod %d, the spec puts rank %ld in pod %d",
				(long long)gpus[i], pod, i, delta_workload_gpu_pod(w, i));
	}
	int64_t *sorted = malloc((size_t)n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, gpus, (size_t)n * sizeof(*sorted));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_i64);
	int rc = 0;
	for (long i = 1; i < n && rc == 0; i++)
		if (sorted[i] == sorted[i - 1])
			rc = delta_error_set(err, "placement.gpu_ids", "GPU %lld is listed twice",
					     (long long)sorted[i]);
	free(sorted);
	return rc;
}

int delta_leaf_demand(const struct ocs_fabric *f, const struct delta_workload *w,
		      const struct delta_problem *p, const int *x, const int64_t *gpus,
		      struct delta_leaf_links **out, size_t *n_out, long *unplaced,
		      struct delta_error *err)
{
	int G = w->set_pods, S = w->pod_sets, c = w->replicas_per_pod_set, sw = w->stage_width;
	long pod_gpus = (long)ocs_fabric_leaves_per_pod(f) * f->k_leaf;
	const struct delta_link *links = delta_problem_links(p);
	int n_links = delta_problem_n_links(p), rc = -ENOMEM;
	struct acc all = {0}, one = {0};
	int *leaf_used = calloc((size_t)ocs_fabric_leaves(f), sizeof(int));
	unsigned char *seen = NULL;

	*out = NULL;
	*n_out = 0;
	*unplaced = 0;
	if (w->first_pod + (long)S * G > f->pods) {
		free(leaf_used);
		return delta_error_set(err, "placement.pods",
				       "the job needs pods %d..%ld but the fabric has %d",
				       w->first_pod, w->first_pod + (long)S * G - 1, f->pods);
	}
	if ((long)c * w->gpus_per_pod_per_replica > pod_gpus) {
		free(leaf_used);
		return delta_error_set(err, "placement.replicas_per_pod_set",
				       "%ld GPUs per pod but the fabric's pods have %ld",
				       (long)c * w->gpus_per_pod_per_replica, pod_gpus);
	}
	if (!leaf_used)
		return -ENOMEM;
	if (gpus && (rc = delta_check_gpu_ids(f, w, gpus, err)) != 0) {
		free(leaf_used);
		return rc;
	}
	rc = -ENOMEM;
	int n_tasks = delta_problem_n_tasks(p);
	const struct delta_task *tasks = delta_problem_tasks(p);
	seen = malloc((size_t)n_tasks + 1);
	if (!seen)
		goto fail;
	for (int l = 0; l < n_links; l++) {
		int ring = links[l].b >= G;
		for (int k = 0; k < S; k++) {
			if (ring && S == 2 && k == 1)
				break; /* one real pod pair for both ring directions */
			int next = (k + 1) % S;
			one.n = 0;
			memset(seen, 0, (size_t)n_tasks);
			/* Distinct stage pairs on this link: fwd/bwd of one boundary
			 * join the same GPU pairs. */
			for (int t = 0; t < n_tasks; t++) {
				if (delta_problem_task_link(p, t) != l ||
				    tasks[t].volume_bytes == 0 || seen[t])
					continue;
				int s0 = w->task_stages[t][0], s1 = w->task_stages[t][1];
				if (s0 < 0)
					continue;
				for (int t2 = t; t2 < n_tasks; t2++) {
					int a0 = w->task_stages[t2][0], a1 = w->task_stages[t2][1];
					if ((a0 == s0 && a1 == s1) || (a0 == s1 && a1 == s0))
						seen[t2] = 1;
				}
				int lo = s0 < s1 ? s0 : s1, hi = s0 < s1 ? s1 : s0;
				for (int u = 0; u < c; u++)
					for (int r = 0; r < sw; r++) {
						long ga = gpu_of(f, w, gpus, k, lo, u, r);
						long gb = gpu_of(f, w, gpus, ring ? next : k, hi, u,
								 r);
						if (acc_add(&one, ocs_fabric_gpu_leaf(f, ga),
							    ocs_fabric_gpu_leaf(f, gb), 1))
							goto fail;
					}
			}
			/* D'Hondt over the leaf pairs of this pod pair. */
			for (int circuit = 0; circuit < x[l]; circuit++) {
				int best = -1;
				for (size_t i = 0; i < one.n; i++) {
					struct pair_weight *q = &one.v[i];
					if (leaf_used[q->a] >= f->k_leaf ||
					    leaf_used[q->b] >= f->k_leaf)
						continue;
					if (best < 0 || q->weight * (one.v[best].links + 1) >
								one.v[best].weight * (q->links + 1))
						best = (int)i;
				}
				if (best < 0) {
					(*unplaced)++;
					continue;
				}
				one.v[best].links++;
				leaf_used[one.v[best].a]++;
				leaf_used[one.v[best].b]++;
			}
			for (size_t i = 0; i < one.n; i++) {
				if (one.v[i].links == 0)
					continue;
				if (acc_add(&all, one.v[i].a, one.v[i].b, 0))
					goto fail;
				for (size_t j = 0; j < all.n; j++)
					if (all.v[j].a == one.v[i].a && all.v[j].b == one.v[i].b)
						all.v[j].links += one.v[i].links;
			}
		}
	}
	qsort(all.v, all.n, sizeof(*all.v), cmp_pair);
	*out = malloc((all.n ? all.n : 1) * sizeof(**out));
	if (!*out)
		goto fail;
	for (size_t i = 0; i < all.n; i++)
		(*out)[i] = (struct delta_leaf_links){all.v[i].a, all.v[i].b, all.v[i].links};
	*n_out = all.n;
	rc = 0;
fail:
	free(all.v);
	free(one.v);
	free(leaf_used);
	free(seen);
	return rc;
}
