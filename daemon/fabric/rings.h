/*
 * rings.h - the ring state of an OCSTrx ring domain (InfinitePOD): the one
 * index of who holds which node that the planner snapshots, the API,
 * transactions and recovery read.
 *
 *   per node:  its condition (healthy or faulty; who said so and when
 *              are the store's, st_fault_list), the job and ring holding
 *              it, and so the bundle settings it should hold
 *              (solvers/hbd_ring.h: its ring's, or every bundle on
 *              loopback);
 *   per job:   its rings, in ring order, with how each came to be (placed,
 *              bypass-extended, re-placed, lost) and the node whose failure
 *              changed it.
 *
 * It mirrors the store (rings and node_faults tables, store.h): rg_load at
 * start, then the transaction driver sets a job's rings once their
 * transaction is confirmed and stored, and the job manager sets a node's
 * condition once it is stored. Nothing here touches the store or devices.
 *
 * Ownership: the state owns its rings and their node arrays; pointers it
 * hands out stay valid until the next change. Threading: loop thread only.
 */
#ifndef OCSD_RINGS_H
#define OCSD_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "hbd_ring.h"
#include "store.h" /* the ring records: enum rg_change, struct rg_ring */

/* Deep copies n rings (NULL on allocation failure; n 0 gives a non-NULL empty array). */
struct rg_ring *rg_rings_dup(const struct rg_ring *rings, size_t n);
/* Frees rings made by rg_rings_dup or filled with owned nodes (accepts NULL). */
void rg_rings_free(struct rg_ring *rings, size_t n);

struct rg_state;

/* Empty state for domain d (kept by pointer). NULL on allocation failure. */
struct rg_state *rg_new(const struct ocs_ring_domain *d);
void rg_free(struct rg_state *rg);
/* Loads rings and node faults from the store. 0 or -errno. */
int rg_load(struct rg_state *rg, struct st_store *st);

const struct ocs_ring_domain *rg_domain(const struct rg_state *rg);
int rg_nodes(const struct rg_state *rg);
/* +1 on every change of who holds a node or of a node's condition. */
unsigned long rg_generation(const struct rg_state *rg);

/*
 * Replaces the rings of job_id with rings (copied; n 0 removes them). A
 * lost ring (m 0) is kept as a record and holds no node. 0 or -ENOMEM
 * (then nothing changed).
 */
int rg_set_job_rings(struct rg_state *rg, const char *job_id, const struct rg_ring *rings,
		     size_t n);
/* The rings of job_id (NULL, *n 0 when it has none). */
const struct rg_ring *rg_job_rings(const struct rg_state *rg, const char *job_id, size_t *n);
/* Every ring record, job by job. */
size_t rg_count(const struct rg_state *rg);
const struct rg_ring *rg_at(const struct rg_state *rg, size_t i);
/* Rings that hold nodes (not lost). */
size_t rg_active(const struct rg_state *rg);

/* The ring holding node (NULL when it is free or faulty and in no ring). */
const struct rg_ring *rg_holder(const struct rg_state *rg, int node);

/* Node conditions. source: "device" or "operator" (the caller stored both; only the condition is
 * kept here). */
void rg_set_faulty(struct rg_state *rg, int node, bool faulty, const char *source,
		   int64_t since_ms);
bool rg_faulty(const struct rg_state *rg, int node);
size_t rg_n_faulty(const struct rg_state *rg);

/*
 * The planner's view (hbd_node_use per node, malloc'd, caller frees):
 * faulty nodes HBD_NODE_FAULTY, nodes held by a ring of a job other than
 * except_job (NULL: any job) HBD_NODE_BUSY, the others free.
 */
uint8_t *rg_use_snapshot(const struct rg_state *rg, const char *except_job);

/*
 * The settings node should hold now (d->bundles entries): its ring's
 * bundles, or every bundle on loopback. 0 or -EINVAL.
 */
int rg_node_bundles(const struct rg_state *rg, int node, struct hbd_bundle *out);

#endif
