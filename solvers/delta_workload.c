/*
 * delta_workload.c - the workload model behind DELTA: from a parallelism
 * spec to the 1F1B schedule and the reduced inter-pod communication DAG
 * (placement model and symmetry reduction: delta_workload.h).
 *
 * Symbols: h hidden size, f FFN size (per expert), m FFN matrices (2 GELU,
 * 3 gated), V vocabulary, E experts, k top-k (k = 1 for dense), b
 * micro-batch size, s sequence length, M micro-batches, L_s layers of stage
 * s (L / PP), TP/PP/DP/EP/ETP degrees, w = lcm(TP, EP*ETP) stage width,
 * c co-located units, S pod sets, bytes per value beta (2, bf16).
 *
 * Compute (per GPU, per micro-batch; Narayanan et al., "Efficient
 * Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
 * SC'21, section 5.1; with m = 2, f = 4h, k = 1 this is their
 * 24bsh^2(1 + s/6h) per layer):
 *   forward FLOPs per layer = 2bs(4h^2) + 4bs^2h + 2bs*m*h*f*k
 *     (QKV and output projections, attention scores and values, FFN; MoE
 *      tokens each visit k experts, Fedus et al., Switch Transformers, 2021)
 *   logits on the last stage = 2bshV
 *   backward = 2 x forward (Kaplan et al., "Scaling Laws", 2020: 6N per
 *     token in total); no activation recomputation
 *   time = FLOPs / (TP * peak * efficiency); TP and the experts of a stage
 *     split the work evenly over the stage's GPUs.
 * Intra-pod communication (folded into the DAG's delays):
 *   TP: 2 all-reduces of b*s*h*beta per layer forward, 2 backward
 *     (Shoeybi et al., Megatron-LM, 2019), ring all-reduce time
 *     2(TP-1)/TP * size / intra bandwidth (Patarasuk and Yuan, 2009);
 *   EP: 2 all-to-alls per MoE layer forward and backward, each GPU sending
 *     (EP-1)/EP of its k*b*s*h*beta / TP routed tokens;
 *   PP between stages in one pod: b*s*h*beta / TP per GPU at intra speed.
 * Inter-pod tasks:
 *   PP (activations forward, gradients backward, per micro-batch and stage
 *     boundary): every GPU of the stage sends its 1/TP slice of its
 *     replica's activations (Megatron's scatter-gather optimisation, SC'21
 *     section 4.1): F = c*w flows, V = c*(w/TP)*b*s*h*beta.
 *   DP (once per stage, after its last backward): hierarchical all-reduce,
 *     intra-pod reduce-scatter among co-located replicas, then a ring over
 *     the S pod sets in which the stage's c*w GPUs each send 2(S-1)/S of
 *     their shard: F = c*w, V = 2(S-1)/S * P_s * grad_bytes, with P_s the
 *     stage's parameters (4h^2 + m*h*f per dense layer, 4h^2 + E*m*h*f per
 *     MoE layer, plus V*h embedding on the first and V*h output layer on the
 *     last stage). Intra-pod phases are not modelled.
 * Schedule: 1F1B (Narayanan et al. SC'21, section 2.2): stage s runs
 * min(PP-s-1, M) warm-up forwards, then alternates one forward and one
 * backward, then drains the remaining backwards. Sends are asynchronous:
 * a stage does not wait for its own send to finish.
 *
 * Reduction (DELTA paper section III-A): the full DAG of compute, intra-pod
 * and inter-pod nodes is walked in topological order; every inter-pod task
 * depends on the nearest inter-pod tasks before it with delta = the longest
 * chain of intra-pod work in between; work before any inter-pod task
 * becomes the task's release time (the paper's virtual task at t = 0).
 */
#include "delta_workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void delta_workload_defaults(struct delta_workload_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->ffn_matrices = 2;
	spec->ep = 1;
	spec->etp = 1;
	spec->micro_batch = 1;
	spec->gpu_tflops = 989; /* H100 SXM dense BF16 */
	spec->efficiency = 0.5;
	spec->intra_pod_gbps = 3600; /* 450 GB/s NVLink per GPU */
	spec->bytes_per_value = 2;
	spec->grad_bytes = 2;
	spec->replicas_per_pod_set = 1;
}

void delta_workload_free(struct delta_workload *w)
{
	if (!w)
		return;
	free(w->task_names);
	free(w->task_stages);
	free(w->port_budget);
	free(w->tasks);
	free(w->deps);
	free(w->links);
	free(w);
}

static long gcd(long a, long b)
{
	while (b) {
		long t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static int positive(struct delta_error *err, const char *field, long v)
{
	if (v >= 1)
		return 0;
	return delta_error_set(err, field, "must be >= 1, got %ld", v);
}

static int validate(const struct delta_workload_spec *q, int *dp_out, struct delta_error *err)
{
	if (positive(err, "model.layers", q->layers) || positive(err, "model.hidden", q->hidden) ||
	    positive(err, "model.ffn", q->ffn) || positive(err, "model.heads", q->heads) ||
	    positive(err, "model.vocab", q->vocab) || positive(err, "parallelism.tp", q->tp) ||
	    positive(err, "parallelism.pp", q->pp) || positive(err, "parallelism.ep", q->ep) ||
	    positive(err, "parallelism.expert_tp", q->etp) ||
	    positive(err, "training.seq_len", q->seq_len) ||
	    positive(err, "training.micro_batch", q->micro_batch) ||
	    positive(err, "training.micro_batches", q->micro_batches) ||
	    positive(err, "hardware.bytes_per_value", q->bytes_per_value) ||
	    positive(err, "hardware.grad_bytes", q->grad_bytes) ||
	    positive(err, "placement.gpus_per_pod_per_replica", q->gpus_per_pod_per_replica) ||
	    positive(err, "placement.replicas_per_pod_set", q->replicas_per_pod_set))
		return -EINVAL;
	if (q->ffn_matrices != 2 && q->ffn_matrices != 3)
		return delta_error_set(err, "model.ffn_matrices", "must be 2 or 3, got %d",
				       q->ffn_matrices);
	if (q->hidden % q->heads)
		return delta_error_set(err, "model.heads", "%d heads do not divide hidden size %d",
				       q->heads, q->hidden);
	if (q->heads % q->tp)
		return delta_error_set(err, "parallelism.tp", "TP %d does not divide %d heads",
				       q->tp, q->heads);
	if (q->experts < 0)
		return delta_error_set(err, "model.experts", "must be >= 0");
	if (q->experts > 0 && (q->top_k < 1 || q->top_k > q->experts))
		return delta_error_set(err, "model.top_k", "must be in 1..%d (experts), got %d",
				       q->experts, q->top_k);
	if (q->experts == 0 && (q->ep > 1 || q->etp > 1))
		return delta_error_set(err, "parallelism.ep",
				       "EP/expert-TP need model.experts > 0");
	if (q->experts > 0 && q->experts % q->ep)
		return delta_error_set(err, "parallelism.ep", "EP %d does not divide %d experts",
				       q->ep, q->experts);
	if (q->layers % q->pp)
		return delta_error_set(err, "parallelism.pp", "PP %d does not divide %d layers",
				       q->pp, q->layers);
	if (q->micro_batches < q->pp)
		return delta_error_set(err, "training.micro_batches",
				       "1F1B needs at least PP = %d micro-batches, got %d", q->pp,
				       q->micro_batches);
	if (!(q->gpu_tflops > 0) || !isfinite(q->gpu_tflops))
		return delta_error_set(err, "hardware.gpu_tflops", "must be > 0");
	if (!(q->efficiency > 0 && q->efficiency <= 1))
		return delta_error_set(err, "hardware.efficiency", "must be in (0, 1]");
	if (!(q->bandwidth_gbps > 0) || !isfinite(q->bandwidth_gbps))
		return delta_error_set(err, "bandwidth_gbps", "must be > 0, got %g",
				       q->bandwidth_gbps);
	if (!(q->intra_pod_gbps > 0) || !isfinite(q->intra_pod_gbps))
		return delta_error_set(err, "hardware.intra_pod_gbps", "must be > 0");
	int dp = q->dp;
	long tp_pp = (long)q->tp * q->pp;
	if (dp == 0) {
		if (q->gpus < 1)
			return delta_error_set(err, "parallelism.dp",
					       "give DP or placement.gpus to derive it");
		if (q->gpus % tp_pp)
			return delta_error_set(err, "parallelism.tp",
					       "TP*PP = %ld does not divide the job's %d GPUs",
					       tp_pp, q->gpus);
		dp = (int)(q->gpus / tp_pp);
	} else if (dp < 0) {
		return delta_error_set(err, "parallelism.dp", "must be >= 1, got %d", dp);
	} else if (q->gpus > 0 && (long)q->gpus != tp_pp * dp) {
		return delta_error_set(err, "placement.gpus",
				       "TP*PP*DP = %ld but the placement has %d GPUs", tp_pp * dp,
				       q->gpus);
	}
	long ep_group = (long)q->ep * q->etp;
	long w = q->tp / gcd(q->tp, ep_group) * ep_group;
	if (((long)q->tp * dp) % w)
		return delta_error_set(err, "parallelism.ep",
				       "EP*expert-TP = %ld does not fit the %ld GPUs of a stage "
				       "(TP*DP) together with TP %d",
				       ep_group, (long)q->tp * dp, q->tp);
	if (q->gpus_per_pod_per_replica % w)
		return delta_error_set(err, "placement.gpus_per_pod_per_replica",
				       "%d is not a multiple of the stage width %ld "
				       "(TP and EP groups must stay inside a pod)",
				       q->gpus_per_pod_per_replica, w);
	long units = (long)q->tp * dp / w;
	if (units % q->replicas_per_pod_set)
		return delta_error_set(err, "placement.replicas_per_pod_set",
				       "%d does not divide the %ld pipeline replicas",
				       q->replicas_per_pod_set, units);
	if (q->first_pod < 0)
		return delta_error_set(err, "placement.first_pod", "must be >= 0");
	long set_pods =
		((long)q->pp * w + q->gpus_per_pod_per_replica - 1) / q->gpus_per_pod_per_replica;
	long sets = units / q->replicas_per_pod_set;
	if (set_pods < 2 && sets < 2)
		return delta_error_set(err, "placement.gpus_per_pod_per_replica",
				       "the whole job fits in one pod: no inter-pod traffic");
	if (q->fabric_pods > 0 && q->first_pod + sets * set_pods > q->fabric_pods)
		return delta_error_set(err, "placement.pods",
				       "the job needs pods %d..%ld but the fabric has %d pods",
				       q->first_pod, q->first_pod + sets * set_pods - 1,
				       q->fabric_pods);
	*dp_out = dp;
	return 0;
}

/* Full-DAG node kinds. */
enum { N_FWD, N_BWD, N_ACT, N_GRAD, N_DP };

struct node {
	int preds[2];
	int n_preds;
	double dur_ms; /* local nodes */
	int task;      /* inter-pod task index, or -1 for local work */
};

struct frontier_entry {
	int task; /* -1: the virtual start */
	double delay_ms;
};

struct frontier {
	struct frontier_entry *v;
	int n, cap;
};

static int frontier_add(struct frontier *f, int task, double delay)
{
	for (int i = 0; i < f->n; i++)
		if (f->v[i].task == task) {
			if (delay > f->v[i].delay_ms)
				f->v[i].delay_ms = delay;
			return 0;
		}
	if (f->n == f->cap) {
		int cap = f->cap ? 2 * f->cap : 4;
		struct frontier_entry *v = realloc(f->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = (struct frontier_entry){task, delay};
	return 0;
}

/*
 * A local node reachable from many inter-pod tasks through intra-pod work
 * (a stage's op chain collects every earlier receive) would give every
 * later task a dependency on each of them: quadratic in M. Past this many
 * entries the node gets a zero-volume "sync" task instead (it finishes at
 * its start, so the schedule is unchanged) and later nodes depend on it.
 */
#define FRONTIER_MAX 6

struct builder {
	const struct delta_workload_spec *q;
	struct delta_workload *w;
	struct node *nodes;
	int n_nodes;
	int max_tasks, max_deps, n_deps;
	int pp, M;
	int *stage_pod;
	double *fwd_ms, *bwd_ms;
	double pp_local_ms;
	double pp_flows, pp_volume;
	double *dp_volume;
	int marker_src, marker_dst; /* a link that zero-volume sync tasks use */
	int *node_stage;
};

static int node_id(const struct builder *b, int kind, int mb, int s)
{
	int pp = b->pp, M = b->M;
	switch (kind) {
	case N_FWD:
		return mb * pp + s;
	case N_BWD:
		return M * pp + mb * pp + s;
	case N_ACT:
		return 2 * M * pp + mb * (pp - 1) + s;
	case N_GRAD:
		return 2 * M * pp + M * (pp - 1) + mb * (pp - 1) + s;
	default:
		return 2 * M * pp + 2 * M * (pp - 1) + s;
	}
}

static void add_pred(struct builder *b, int node, int pred)
{
	struct node *n = &b->nodes[node];
	n->preds[n->n_preds++] = pred;
}

static int new_task(struct builder *b, int node, int src, int dst, double flows, double volume,
		    const char *name, int stage_src, int stage_dst)
{
	struct delta_workload *w = b->w;
	int t = w->dag.n_tasks++;
	w->tasks[t] = (struct delta_task){src, dst, (int)flows, volume, 0};
	w->task_stages[t][0] = stage_src;
	w->task_stages[t][1] = stage_dst;
	snprintf(w->task_names[t], sizeof(w->task_names[t]), "%s", name);
	b->nodes[node].task = t;
	return t;
}

static void stage_times(struct builder *b)
{
	const struct delta_workload_spec *q = b->q;
	double h = q->hidden, f = q->ffn, s = q->seq_len, mb = q->micro_batch, V = q->vocab;
	double k = q->experts > 0 ? q->top_k : 1, m = q->ffn_matrices;
	double beta = q->bytes_per_value;
	double rate = q->tp * q->gpu_tflops * 1e12 * q->efficiency / 1e3; /* FLOP per ms */
	double intra = q->intra_pod_gbps * 1e9 / 8 / 1e3;		  /* bytes per ms */
	double layer_flops =
		2 * mb * s * 4 * h * h + 4 * mb * s * s * h + 2 * mb * s * m * h * f * k;
	double act = mb * s * h * beta;
	double tp_ms = q->tp > 1 ? 2 * (2.0 * (q->tp - 1) / q->tp) * act / intra : 0;
	double ep_ms = q->ep > 1 ? 2 * ((double)(q->ep - 1) / q->ep) * k * act / q->tp / intra : 0;
	int Ls = q->layers / q->pp;
	int w = b->w->stage_width;
	int sets = b->w->pod_sets;
	double c = q->replicas_per_pod_set;

	for (int st = 0; st < b->pp; st++) {
		double fl = Ls * layer_flops + (st == b->pp - 1 ? 2 * mb * s * h * V : 0);
		b->fwd_ms[st] = fl / rate + Ls * (tp_ms + ep_ms);
		b->bwd_ms[st] = 2 * fl / rate + Ls * (tp_ms + ep_ms);
		double params = Ls * (4 * h * h + (q->experts > 0 ? q->experts : 1) * m * h * f);
		if (st == 0)
			params += V * h;
		if (st == b->pp - 1)
			params += V * h;
		b->dp_volume[st] = sets > 1 ? 2.0 * (sets - 1) / sets * params * q->grad_bytes : 0;
	}
	b->pp_local_ms = act / q->tp / intra;
	b->pp_flows = c * w;
	b->pp_volume = c * ((double)w / q->tp) * act;
}

/* Creates nodes, their predecessors and the inter-pod tasks. */
static int build_nodes(struct builder *b)
{
	int pp = b->pp, M = b->M;
	char name[48];
	double dp_flows = b->pp_flows;
	int G = b->w->set_pods;

	for (int i = 0; i < b->n_nodes; i++)
		b->nodes[i].task = -1;
	for (int s = 0; s < pp; s++) {
		int warm = pp - s - 1 < M ? pp - s - 1 : M, prev = -1;
		/* 1F1B order of stage s. */
		for (int i = 0; i < 2 * M; i++) {
			int kind, mb;
			if (i < warm) {
				kind = N_FWD, mb = i;
			} else if (i < 2 * M - warm) {
				int j = i - warm;
				kind = (j % 2 == 0) ? N_FWD : N_BWD;
				mb = kind == N_FWD ? warm + j / 2 : j / 2;
			} else {
				kind = N_BWD, mb = M - warm + (i - (2 * M - warm));
			}
			int id = node_id(b, kind, mb, s);
			b->node_stage[id] = s;
			b->nodes[id].dur_ms = kind == N_FWD ? b->fwd_ms[s] : b->bwd_ms[s];
			if (prev >= 0)
				add_pred(b, id, prev);
			prev = id;
		}
		for (int mb = 0; mb < M; mb++) {
			if (s > 0)
				add_pred(b, node_id(b, N_FWD, mb, s), node_id(b, N_ACT, mb, s - 1));
			if (s < pp - 1) {
				add_pred(b, node_id(b, N_BWD, mb, s), node_id(b, N_GRAD, mb, s));
				int act = node_id(b, N_ACT, mb, s),
				    grad = node_id(b, N_GRAD, mb, s);
				add_pred(b, act, node_id(b, N_FWD, mb, s));
				add_pred(b, grad, node_id(b, N_BWD, mb, s + 1));
				int a = b->stage_pod[s], c = b->stage_pod[s + 1];
				if (a != c) {
					snprintf(name, sizeof(name), "fwd mb%d s%d>s%d", mb, s,
						 s + 1);
					new_task(b, act, a, c, b->pp_flows, b->pp_volume, name, s,
						 s + 1);
					snprintf(name, sizeof(name), "bwd mb%d s%d>s%d", mb, s + 1,
						 s);
					new_task(b, grad, c, a, b->pp_flows, b->pp_volume, name,
						 s + 1, s);
				} else {
					b->nodes[act].dur_ms = b->pp_local_ms;
					b->nodes[grad].dur_ms = b->pp_local_ms;
				}
			}
		}
		int dp = node_id(b, N_DP, 0, s);
		add_pred(b, dp, node_id(b, N_BWD, M - 1, s));
		if (b->w->pod_sets > 1) {
			snprintf(name, sizeof(name), "dp s%d", s);
			new_task(b, dp, b->stage_pod[s], G + b->stage_pod[s], dp_flows,
				 b->dp_volume[s], name, s, s);
		}
	}
	return 0;
}

/* Walks the full DAG in topological order and emits the reduced deps. */
static int reduce(struct builder *b)
{
	int n = b->n_nodes, rc = -ENOMEM;
	int *indeg = calloc((size_t)n, sizeof(int));
	int *queue = malloc((size_t)n * sizeof(int));
	int *succ_start = calloc((size_t)n + 1, sizeof(int));
	int *succ = malloc(2 * (size_t)n * sizeof(int));
	int *fill = calloc((size_t)n, sizeof(int));
	struct frontier *fr = calloc((size_t)n, sizeof(*fr));
	struct delta_workload *w = b->w;

	if (!indeg || !queue || !succ_start || !succ || !fill || !fr)
		goto out;
	for (int v = 0; v < n; v++)
		for (int k = 0; k < b->nodes[v].n_preds; k++) {
			succ_start[b->nodes[v].preds[k] + 1]++;
			indeg[v]++;
		}
	for (int v = 0; v < n; v++)
		succ_start[v + 1] += succ_start[v];
	for (int v = 0; v < n; v++)
		for (int k = 0; k < b->nodes[v].n_preds; k++) {
			int u = b->nodes[v].preds[k];
			succ[succ_start[u] + fill[u]++] = v;
		}
	int head = 0, tail = 0;
	for (int v = 0; v < n; v++)
		if (indeg[v] == 0)
			queue[tail++] = v;
	while (head < tail) {
		int v = queue[head++];
		struct node *nd = &b->nodes[v];
		if (nd->n_preds == 0 && frontier_add(&fr[v], -1, 0))
			goto out;
		for (int k = 0; k < nd->n_preds; k++) {
			int u = nd->preds[k];
			struct node *pu = &b->nodes[u];
			if (pu->task >= 0) {
				/* dur_ms is 0 for inter-pod tasks, the op's time for a sync marker
				 */
				if (frontier_add(&fr[v], pu->task, pu->dur_ms))
					goto out;
			} else {
				for (int i = 0; i < fr[u].n; i++)
					if (frontier_add(&fr[v], fr[u].v[i].task,
							 fr[u].v[i].delay_ms + pu->dur_ms))
						goto out;
			}
		}
		if (nd->task < 0 && fr[v].n > FRONTIER_MAX) {
			char name[48];
			int mk = w->dag.n_tasks;
			if (mk == b->max_tasks) {
				int cap = 2 * b->max_tasks;
				struct delta_task *t = realloc(w->tasks, (size_t)cap * sizeof(*t));
				if (!t)
					goto out;
				w->tasks = t;
				char(*nm)[48] = realloc(w->task_names, (size_t)cap * sizeof(*nm));
				if (!nm)
					goto out;
				w->task_names = nm;
				int(*ts)[2] = realloc(w->task_stages, (size_t)cap * sizeof(*ts));
				if (!ts)
					goto out;
				w->task_stages = ts;
				b->max_tasks = cap;
			}
			w->dag.n_tasks++;
			w->tasks[mk] = (struct delta_task){b->marker_src, b->marker_dst, 1, 0, 0};
			w->task_stages[mk][0] = w->task_stages[mk][1] = -1;
			snprintf(name, sizeof(name), "sync s%d #%d", b->node_stage[v], v);
			snprintf(w->task_names[mk], sizeof(w->task_names[mk]), "%s", name);
			nd->task = mk; /* its own work (dur_ms) follows the marker */
		}
		if (nd->task >= 0) {
			for (int i = 0; i < fr[v].n; i++) {
				if (fr[v].v[i].task < 0) {
					w->tasks[nd->task].release_ms = fr[v].v[i].delay_ms;
					continue;
				}
				if (b->n_deps == b->max_deps) {
					int cap = 2 * b->max_deps;
					struct delta_dep *d =
						realloc(w->deps, (size_t)cap * sizeof(*d));
					if (!d)
						goto out;
					w->deps = d;
					b->max_deps = cap;
				}
				w->deps[b->n_deps++] = (struct delta_dep){fr[v].v[i].task, nd->task,
									  fr[v].v[i].delay_ms};
			}
		}
		for (int k = succ_start[v]; k < succ_start[v + 1]; k++)
			if (--indeg[succ[k]] == 0)
				queue[tail++] = succ[k];
		/* Frontiers of nodes whose successors are all done are no longer needed;
		 * keep it simple and free everything at the end. */
	}
	rc = tail == n ? 0 : -EINVAL; /* cannot happen: the schedule is acyclic */
out:
	if (fr)
		for (int v = 0; v < n; v++)
			free(fr[v].v);
	free(fr);
	free(indeg);
	free(queue);
	free(succ_start);
	free(succ);
	free(fill);
	return rc;
}

static int build_links(struct builder *b)
{
	struct delta_workload *w = b->w;
	int G = w->set_pods, n = 0;
	w->links = calloc((size_t)G * G + (size_t)G, sizeof(*w->links));
	if (!w->links)
		return -ENOMEM;
	for (int s = 0; s + 1 < b->pp; s++) {
		int a = b->stage_pod[s], c = b->stage_pod[s + 1];
		if (a == c)
			continue;
		int lo = a < c ? a : c, hi = a < c ? c : a, dup = 0;
		for (int l = 0; l < n; l++)
			dup |= w->links[l].a == lo && w->links[l].b == hi;
		if (!dup)
			w->links[n++] = (struct delta_link){lo, hi, 1, 1};
	}
	if (w->pod_sets > 1)
		for (int i = 0; i < G; i++)
			w->links[n++] = (struct delta_link){i, G + i, w->pod_sets > 2 ? 2 : 1, 0};
	w->dag.n_links = n;
	w->dag.links = w->links;
	return 0;
}

int delta_workload_build(const struct delta_workload_spec *q, struct delta_workload **out,
			 struct delta_error *err)
{
	int dp = 0, rc;
	*out = NULL;
	rc = validate(q, &dp, err);
	if (rc)
		return rc;
	struct delta_workload *w = calloc(1, sizeof(*w));
	struct builder b = {.q = q, .w = w, .pp = q->pp, .M = q->micro_batches};
	if (!w)
		return delta_error_set(err, "memory", "out of memory");
	long ep_group = (long)q->ep * q->etp;
	w->stage_width = (int)(q->tp / gcd(q->tp, ep_group) * ep_group);
	w->set_pods = (q->pp * w->stage_width + q->gpus_per_pod_per_replica - 1) /
		      q->gpus_per_pod_per_replica;
	w->pod_sets = (int)((long)q->tp * dp / w->stage_width / q->replicas_per_pod_set);
	w->first_pod = q->first_pod;
	w->replicas_per_pod_set = q->replicas_per_pod_set;
	w->stages = q->pp;
	w->gpus_per_pod_per_replica = q->gpus_per_pod_per_replica;
	int G = w->set_pods, pods = w->pod_sets > 1 ? 2 * G : G;

	b.n_nodes = 2 * b.M * b.pp + 2 * b.M * (b.pp - 1) + b.pp;
	b.max_tasks = 2 * b.M * (b.pp - 1) + b.pp;
	b.max_deps = 4 * b.max_tasks + 16;
	b.nodes = calloc((size_t)b.n_nodes, sizeof(*b.nodes));
	b.stage_pod = malloc((size_t)b.pp * sizeof(int));
	b.fwd_ms = malloc((size_t)b.pp * sizeof(double));
	b.bwd_ms = malloc((size_t)b.pp * sizeof(double));
	b.dp_volume = malloc((size_t)b.pp * sizeof(double));
	b.node_stage = calloc((size_t)b.n_nodes, sizeof(int));
	w->tasks = calloc((size_t)b.max_tasks, sizeof(*w->tasks));
	w->task_names = calloc((size_t)b.max_tasks, sizeof(*w->task_names));
	w->task_stages = calloc((size_t)b.max_tasks, sizeof(*w->task_stages));
	w->deps = malloc((size_t)b.max_deps * sizeof(*w->deps));
	w->port_budget = calloc((size_t)pods, sizeof(int));
	rc = -ENOMEM;
	if (!b.nodes || !b.node_stage || !b.stage_pod || !b.fwd_ms || !b.bwd_ms || !b.dp_volume ||
	    !w->tasks || !w->task_names || !w->task_stages || !w->deps || !w->port_budget)
		goto fail;
	for (int s = 0; s < b.pp; s++) {
		b.stage_pod[s] = s * w->stage_width / q->gpus_per_pod_per_replica;
		/* U[p]: the job's GPUs in the pod (the paper's fairness rule). */
		w->port_budget[b.stage_pod[s]] += q->replicas_per_pod_set * w->stage_width;
	}
	stage_times(&b);
	b.marker_src = 0;
	b.marker_dst = G;
	for (int s = b.pp - 2; s >= 0 && w->pod_sets == 1; s--)
		if (b.stage_pod[s] != b.stage_pod[s + 1]) {
			b.marker_src = b.stage_pod[s];
			b.marker_dst = b.stage_pod[s + 1];
		}
	w->compute_fwd_ms = b.fwd_ms[0];
	if (build_nodes(&b) || reduce(&b) || build_links(&b))
		goto fail;
	w->dag.pods = pods;
	w->dag.port_budget = w->port_budget;
	w->dag.bandwidth_gbps = q->bandwidth_gbps;
	w->dag.tasks = w->tasks;
	w->dag.deps = w->deps;
	w->dag.n_deps = b.n_deps;
	rc = 0;
	*out = w;
fail:
	free(b.nodes);
	free(b.stage_pod);
	free(b.fwd_ms);
	free(b.bwd_ms);
	free(b.dp_volume);
	free(b.node_stage);
	if (rc) {
		delta_workload_free(w);
		return delta_error_set(err, "memory", "out of memory");
	}
	return 0;
}

long delta_workload_gpus(const struct delta_workload *w)
{
	return (long)w->pod_sets * w->stages * w->replicas_per_pod_set * w->stage_width;
}

int delta_workload_gpu_pod(const struct delta_workload *w, long rank)
{
	long per_set = (long)w->stages * w->replicas_per_pod_set * w->stage_width;
	int k = (int)(rank / per_set);
	int s = (int)(rank % per_set / ((long)w->replicas_per_pod_set * w->stage_width));
	return w->first_pod + k * w->set_pods + s * w->stage_width / w->gpus_per_pod_per_replica;
}

int delta_workload_expand_max(const struct delta_workload *w, const struct delta_problem *p)
{
	return delta_problem_n_links(p) * w->pod_sets;
}

int delta_workload_expand(const struct delta_workload *w, const struct delta_problem *p,
			  const int *x, struct delta_pod_circuits *out)
{
	const struct delta_link *links = delta_problem_links(p);
	int G = w->set_pods, S = w->pod_sets, n = 0;
	for (int l = 0; l < delta_problem_n_links(p); l++) {
		int ring = links[l].b >= G;
		for (int k = 0; k < S; k++) {
			int i, j;
			if (ring) {
				if (S == 2 && k == 1)
					break; /* the two directions of one pair */
				i = w->first_pod + k * G + links[l].a;
				j = w->first_pod + ((k + 1) % S) * G + links[l].a;
			} else {
				i = w->first_pod + k * G + links[l].a;
				j = w->first_pod + k * G + links[l].b;
			}
			out[n++] = (struct delta_pod_circuits){i < j ? i : j, i < j ? j : i, x[l]};
		}
	}
	return n;
}
