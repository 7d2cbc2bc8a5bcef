/*
 * delta_workload.h - builds DELTA's reduced inter-pod communication DAG
 * (delta_dag.h) from a parallelism spec: model shape, TP/PP/DP/EP/expert-TP,
 * sequence length and micro-batches, GPU speed, NIC bandwidth and the job's
 * placement on pods. The formulas and their sources are in the top comment
 * of delta_workload.c.
 *
 * Placement model. A placement unit is one pipeline whose stages are
 * w = lcm(TP, EP * ETP) GPUs wide (so every TP and EP group is whole); the
 * job has TP * DP / w units. `gpus_per_pod_per_replica` (g, a multiple of w)
 * GPUs of a unit share a pod: stage s sits in pod floor(s * w / g) of the
 * unit's G = ceil(PP * w / g) pods. `replicas_per_pod_set` (c) units are
 * placed identically on the same G pods (a pod set); the job uses
 * S = units / c pod sets, set k on pods first_pod + k*G .. + G-1. TP and EP
 * stay inside a pod; PP crosses pods where consecutive stages sit in
 * different pods; DP crosses pods between pod sets (a ring over the S sets,
 * after an intra-pod reduce-scatter among the co-located replicas).
 *
 * DP-replica symmetry. Units placed identically run identical schedules:
 * co-located ones merge into one task (flows and volume add up), and the S
 * pod sets are isomorphic, so the DAG holds one pod set only. The DP ring
 * edge of pod i (to the same pod of the next set) becomes a link to a
 * "ring peer" pod G + i whose circuits cost 2 ports at pod i (its ring in-
 * and out-edge; 1 when S = 2) and none at the peer. delta_workload_expand()
 * maps a plan back to every real pod pair; job-wide ports are S times the
 * reduced plan's.
 *
 * Ownership: delta_workload_build() returns an object the caller frees with
 * delta_workload_free(); its `dag` points into it. Pure, thread-safe.
 */
#ifndef OCS_DELTA_WORKLOAD_H
#define OCS_DELTA_WORKLOAD_H

#include "delta_dag.h"

struct delta_workload_spec {
	/* model */
	int layers;
	int hidden; /* h */
	int ffn;    /* f: FFN (per expert) hidden size */
	int heads;
	int vocab;
	int experts; /* 0: dense; else every layer is MoE */
	int top_k;
	int ffn_matrices; /* 2 (GELU MLP) or 3 (gated, SwiGLU); default 2 */
	/* parallelism */
	int tp, pp, dp; /* dp 0: derived from gpus */
	int ep, etp;	/* default 1 */
	/* training */
	int seq_len;
	int micro_batch;   /* sequences per micro-batch */
	int micro_batches; /* per iteration */
	/* hardware */
	double gpu_tflops;     /* peak dense TFLOP/s per GPU */
	double efficiency;     /* achieved fraction of peak, (0, 1] */
	double bandwidth_gbps; /* B: NIC and OCS port bandwidth */
	double intra_pod_gbps; /* per-GPU bandwidth inside a pod (NVLink/EPS) */
	int bytes_per_value;   /* activations, default 2 (bf16) */
	int grad_bytes;	       /* per gradient value in DP sync, default 2 */
	/* placement */
	int gpus;		      /* total GPUs of the job; 0: tp*pp*dp */
	int gpus_per_pod_per_replica; /* g */
	int replicas_per_pod_set;     /* c, default 1 */
	int first_pod;		      /* default 0 */
	int fabric_pods;	      /* pods in the fabric; 0: unchecked */
};

/* Fills the defaults named above; model and parallelism fields are 0. */
void delta_workload_defaults(struct delta_workload_spec *spec);

struct delta_workload {
	struct delta_dag dag;	/* the reduced DAG (one pod set) */
	char (*task_names)[48]; /* n_tasks names, e.g. "fwd mb3 s1>s2" */
	int (*task_stages)[2];	/* src and dst stage per task; DP: s, s; sync: -1, -1 */
	int pod_sets;		/* S */
	int set_pods;		/* G */
	int first_pod;
	int stage_width;	      /* w */
	int stages;		      /* PP */
	int replicas_per_pod_set;     /* c */
	int gpus_per_pod_per_replica; /* g: stage s sits in set pod s * w / g */
	double compute_fwd_ms;	      /* forward time of one stage's micro-batch (first stage) */
	/* storage behind dag */
	int *port_budget;
	struct delta_task *tasks;
	struct delta_dep *deps;
	struct delta_link *links;
};

/*
 * Validates the spec and builds the DAG. Returns 0, -EINVAL with err naming
 * the field ("parallelism.tp", "placement.gpus_per_pod_per_replica", ...),
 * or -ENOMEM. Caller frees *out with delta_workload_free().
 */
int delta_workload_build(const struct delta_workload_spec *spec, struct delta_workload **out,
			 struct delta_error *err);
void delta_workload_free(struct delta_workload *w);

/*
 * GPUs of the job in rank order: index ((k * PP + s) * c + u) * w + r is
 * lane r of stage s of co-located replica u in pod set k (S * PP * c * w in
 * all). delta_leaves.h takes an explicit list in this order.
 */
long delta_workload_gpus(const struct delta_workload *w);
/* Real pod that GPU index `rank` (in the order above) must sit in. */
int delta_workload_gpu_pod(const struct delta_workload *w, long rank);

/* Circuits between two real pods. */
struct delta_pod_circuits {
	int i, j; /* i < j */
	int circuits;
};

/*
 * Maps a plan x over the reduced problem's links (p must come from w->dag)
 * to real pod pairs. Fills out (caller-provided, room for
 * delta_workload_expand_max() entries) and returns the count.
 */
int delta_workload_expand_max(const struct delta_workload *w, const struct delta_problem *p);
int delta_workload_expand(const struct delta_workload *w, const struct delta_problem *p,
			  const int *x, struct delta_pod_circuits *out);

#endif
