/*
 * delta_leaves.c - pod-level DELTA plan -> leaf-level demand (see
 * delta_leaves.h).
 */
#include "delta_leaves.h"

#include <errno.h>
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

/* Global GPU of (pod, stage, co-located replica u, lane r). */
static long gpu_of(const struct ocs_fabric *f, const struct delta_workload *w, int pod, int stage,
		   int u, int r)
{
	int g = w->gpus_per_pod_per_replica, sw = w->stage_width;
	int first_stage = (stage * sw / g) * g / sw;
	long local = ((long)(stage - first_stage) * w->replicas_per_pod_set + u) * sw + r;
	return (long)pod * ocs_fabric_leaves_per_pod(f) * f->k_leaf + local;
}

int delta_leaf_demand(const struct ocs_fabric *f, const struct delta_workload *w,
		      const struct delta_problem *p, const int *x, struct delta_leaf_links **out,
		      size_t *n_out, long *unplaced, struct delta_error *err)
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
			int pod_a = w->first_pod + k * G + links[l].a;
			int pod_b = ring ? w->first_pod + next * G + links[l].a
					 : w->first_pod + k * G + links[l].b;
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
						/* lo's pod is links[l].a unless the boundary runs b
						 * -> a */
						int pa = pod_a, pb = pod_b;
						if (!ring &&
						    (lo * sw / w->gpus_per_pod_per_replica) !=
							    links[l].a) {
							pa = pod_b;
							pb = pod_a;
						}
						long ga = gpu_of(f, w, pa, lo, u, r);
						long gb = gpu_of(f, w, pb, hi, u, r);
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
