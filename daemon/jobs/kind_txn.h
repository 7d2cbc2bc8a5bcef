/*
 * kind_txn.h - the job kinds' own parts of a transaction, plugged into the
 * driver through its ops (txn_driver.h, struct txn_kind_ops) and into
 * recovery (recovery.h, struct recov_kind): the ring kind's in
 * kind_ring_txn.c, the rail-OCS fabric's in kind_rail.c. For the callers
 * that hand the driver a change of such a kind or set a driver up.
 */
#ifndef OCSD_KIND_TXN_H
#define OCSD_KIND_TXN_H

#include <stdbool.h>
#include <stddef.h>

#include "recovery.h"
#include "txn_driver.h"

struct hbd_bundle;
struct rg_ring;
struct rg_state;

/*
 * A ring job's change (txn_change.kind_change with kind &krt_ops): every
 * ring the job has afterwards (none for a release) and the settings of
 * every bundle that changes. Each touched node gets the complete set of its
 * bundles (what the ring state says it holds, with these applied); a faulty
 * node is never touched. The check verifies on every node that each
 * external path reaches the planned neighbour, a healthy node of the job's
 * rings, and never another job's ring or a faulty node. Once confirmed, the
 * ring state takes the job's new rings.
 */
struct krt_change {
	struct rg_state *rings; /* the ring state (rings.h) */
	const struct rg_ring *job_rings;
	size_t n_rings;
	const struct hbd_bundle *bundles;
	size_t n_bundles;
	/* a repair started by a fault not stored yet: stored with the intent */
	const struct st_fault *fault;
};

/* The ring kind's ops: overlapped (its intent is stored while the nodes prepare). */
extern const struct txn_kind_ops krt_ops;
/* Its recovery of ring intents; ctx: the ring state (NULL outside ring domains: -EINVAL). */
bool krt_owns(const struct st_intent *in);
int krt_resolve(void *ctx, const struct recov_deps *rd, const struct st_intent *in);

/* A GPU swap (txn_change.kind_change with kind &krl_swap_ops): stored with its intent. */
extern const struct txn_kind_ops krl_swap_ops;
/* The rail-OCS fabric's check of cross-connects (txn_deps.check_xcs; ctx: its
 * struct ocs_rail_fabric): rail_check_xcs (rail_swap.h). */
int krl_check_xcs(const void *ctx, const struct ocs_xc *xcs, size_t n, struct l2_violation *v);

#endif
