/*
 * hbd_ring.h - TP-ring orchestration and fault bypass on an OCSTrx ring
 * domain (InfinitePOD, sections 4.2-4.3 and appendix D, Algs. 2-5).
 *
 * The domain model (node numbering, deployment order, K-hop adjacency) is
 * the one of fabric.h (struct ocs_ring_domain). This module plans on top of
 * it: which nodes form each TP ring of a job, in which order, and how every
 * transceiver bundle of those nodes is set.
 *
 * The physical model every function here assumes (documented for operators
 * in southbound/yang/ocs-transceiver.yang and the southbound README):
 *   - a ring is an ordered list of m nodes that is monotone in deployment
 *     order: each node sits 1..K positions above the one before it (around
 *     the circle when the domain is closed, so a ring may wrap);
 *   - bundle HBD_BUNDLE_DOWN of a node faces lower positions, bundle
 *     HBD_BUNDLE_UP higher ones; each has a loopback path and K external
 *     paths (distance 1..K in its direction), exactly one of them active;
 *     bundles 2.. are idle and stay on loopback;
 *   - node i of a ring joins node i-1 through its DOWN bundle and node i+1
 *     through its UP bundle; the first node's DOWN bundle and the last
 *     node's UP bundle are on loopback, which closes the ring. A node that
 *     is in no ring has every bundle on loopback.
 * A node in the middle of a ring whose two neighbours are at the same
 * distance d reaches them through different bundles (d down, d up). Both
 * neighbours can never sit on the same side: that would need two active
 * paths on one bundle, which is why rings are monotone.
 *
 * Pure C, no I/O, no globals, no threads: every function is thread-safe on
 * inputs nobody modifies. Deterministic for a given seed.
 */
#ifndef OCS_HBD_RING_H
#define OCS_HBD_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"

enum hbd_orch {
	HBD_ORCH_DCN_FREE = 0, /* Alg. 2: components of the K-hop graph, optimal ring count */
	HBD_ORCH_FAT_TREE,     /* Algs. 4-5: binary search over the kept constraints */
	HBD_ORCH_GREEDY,       /* the paper's baseline: random free nodes, seeded */
};

/* "dcn-free", "fat-tree", "greedy"; NULL for an invalid value. */
const char *hbd_orch_name(enum hbd_orch o);
/* 0, or -EINVAL for an unknown name. */
int hbd_orch_parse(const char *name, enum hbd_orch *out);

/* What a node is to a plan (one byte per node id, 0 .. ocs_ring_nodes()-1). */
enum hbd_node_use {
	HBD_NODE_FREE = 0,
	HBD_NODE_BUSY,	 /* held by another job's ring */
	HBD_NODE_FAULTY, /* failed, out of every plan until healed */
};

struct hbd_request {
	int tp;	      /* GPUs per TP group: a multiple of gpus_per_node (m = tp / gpus_per_node) */
	int64_t gpus; /* GPUs wanted, a multiple of tp; 0 = the whole domain (all rings that fit) */
	enum hbd_orch orch;
	uint64_t seed; /* greedy only */
};

/* A refusal or bad input: the field it concerns and a sentence. */
struct hbd_error {
	const char *field; /* "job.tp", "busy_nodes[3]", ...; NULL when not a field */
	char reason[200];
};

struct hbd_plan {
	int m;	     /* nodes per ring */
	int n_rings; /* rings placed */
	int *nodes;  /* n_rings * m node ids; ring k is nodes[k*m .. k*m+m-1], in ring order */
	int64_t gpus_placed;
	int64_t gpus_wasted;	/* whole-domain requests only: healthy free GPUs left unusable */
	double cross_tor_share; /* ALGORITHMS.md / issue 11 definition; 0 for one ring */
	int constraints_kept;	/* fat-tree: constraints honoured by the binary search */
	int constraints_total;	/* fat-tree: constraints there are (0 for other orchestrations) */
	int64_t plan_us;	/* filled by callers that time the call (the solver has no clock) */
	/* on refusal (-ENOSPC): rings the job needed and rings that exist */
	int rings_needed;
	int rings_available;
};

/* Frees what a plan owns (not the struct). Accepts NULL. */
void hbd_plan_clear(struct hbd_plan *p);

/*
 * Plans the rings of one job. use: ocs_ring_nodes(d) entries. Returns 0
 * with *out filled (caller clears it), -EINVAL for a bad request (err
 * names the field: tp not a multiple of gpus_per_node, gpus not a multiple
 * of tp, ...), -ENOSPC when the job cannot be placed (rings_needed and
 * rings_available set, err says so), -ENOMEM.
 */
int hbd_plan(const struct ocs_ring_domain *d, const uint8_t *use, const struct hbd_request *req,
	     struct hbd_plan *out, struct hbd_error *err);

/*
 * The cross-ToR share of rings (n_rings rings of m nodes, ring k at
 * nodes[k*m]): over consecutive rings k, k+1 and ranks i, the fraction of
 * node pairs (ring k node i, ring k+1 node i) under different ToRs. 0 for
 * fewer than two rings.
 */
double hbd_cross_tor_share(const struct ocs_ring_domain *d, const int *nodes, int n_rings, int m);

/* ---- bundle settings ---------------------------------------------------- */

#define HBD_BUNDLE_DOWN 0
#define HBD_BUNDLE_UP	1

enum hbd_path {
	HBD_PATH_LOOPBACK = 0,
	HBD_PATH_EXTERNAL,
};

enum hbd_dir {
	HBD_DIR_UP = 0, /* towards higher positions */
	HBD_DIR_DOWN,
};

/* One bundle of one node as it must be set. */
struct hbd_bundle {
	int node;
	uint8_t bundle;
	uint8_t path;	  /* enum hbd_path */
	uint8_t distance; /* external: 1..K; loopback: 0 */
	uint8_t dir;	  /* enum hbd_dir; loopback: HBD_DIR_UP */
	int peer;	  /* external: the node reached; loopback: -1 */
};

/*
 * The settings of every bundle of the m nodes of one ring (m * d->bundles
 * entries, node by node in ring order, bundle by bundle). -EINVAL when
 * the ring breaks the physical model above (a gap outside 1..K, a repeated
 * node, fewer than 2 bundles for a ring of 2 or more nodes).
 */
int hbd_ring_bundles(const struct ocs_ring_domain *d, const int *ring, int m,
		     struct hbd_bundle *out);

/* The settings of an idle node: every bundle on loopback (d->bundles entries). */
void hbd_idle_bundles(const struct ocs_ring_domain *d, int node, struct hbd_bundle *out);

/* Whether ring (m nodes) obeys the model: distinct nodes, monotone, gaps within 1..K. */
bool hbd_ring_valid(const struct ocs_ring_domain *d, const int *ring, int m);

/* ---- fault bypass ------------------------------------------------------- */

/*
 * A repair never shrinks a ring: a TP group cannot run on fewer GPUs than
 * its TP size. In this order:
 *   extend:  the ring skips the failed node and takes in one healthy free
 *            node where the K-hop rule allows it (in the failed node's gap,
 *            at either end, or, failing those, between two other ranks);
 *            only the bundles that change are reprogrammed;
 *   replace: a new ring of m healthy free nodes (the ring's own healthy
 *            nodes included), by the job's orchestration;
 *   lost:    neither exists; the ring is broken (the caller puts its
 *            healthy nodes back to loopback and tells the job).
 */
enum hbd_repair_kind {
	HBD_REPAIR_EXTEND = 0, /* the ring without the node plus one healthy free node */
	HBD_REPAIR_REPLACE,    /* a new ring of the same size on healthy free nodes */
	HBD_REPAIR_LOST,       /* neither is possible: the ring is broken */
};

/* "bypass-extend", "replace", "lost" */
const char *hbd_repair_kind_name(enum hbd_repair_kind k);

struct hbd_repair {
	enum hbd_repair_kind kind;
	int m;	    /* nodes in the repaired ring: always the ring's m (0 when lost) */
	int *nodes; /* the repaired ring, in ring order (NULL when lost) */
	int added;  /* extend: the node taken in; -1 otherwise */
	/* every bundle whose setting changes, on every node (old ring nodes set
	 * back to idle included, the failed node excluded); nothing else */
	struct hbd_bundle *changes;
	size_t n_changes;
	char reason[200]; /* lost (and replace): why no extension or no ring */
};

void hbd_repair_clear(struct hbd_repair *r);

/*
 * Repairs ring (m nodes, in ring order) after node `failed` of it failed.
 * use: the domain as it is, `failed` already HBD_NODE_FAULTY and the
 * ring's other nodes HBD_NODE_BUSY; only HBD_NODE_FREE nodes are taken in
 * (a re-placement may also reuse the ring's own healthy nodes). Extend,
 * else replace with the same orchestration (req: its tp, which must be
 * m * gpus_per_node, and orchestration; gpus is ignored), else lost.
 * 0 with *out filled, -EINVAL (failed not in ring, ring invalid), -ENOMEM.
 */
int hbd_repair(const struct ocs_ring_domain *d, const uint8_t *use, const int *ring, int m,
	       int failed, const struct hbd_request *req, struct hbd_repair *out);

#endif
