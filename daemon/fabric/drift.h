/*
 * drift.h - cross-connects found on the devices that no job owns, and what
 * ocsd does about them (issue 14 #2, fail static): circuits ocsd does not
 * own are never touched without an operator's word.
 *
 *  - The table: per device, the unowned cross-connects the last read found
 *    (reconciliation passes and the start-up check fill it), and whether
 *    the device was read at all when it had to be (a start on an empty
 *    store: a device that could not be read is unverified until a pass
 *    reads it).
 *  - The planner's view (dr_planner_view): unowned cross-connects that form
 *    clean two-way circuits, clear of every stored one, are pinned like
 *    circuits of a job (their ports are occupied); a device holding any
 *    other unowned cross-connect (one-way, colliding with a stored one, not
 *    cabled), or not verified yet, takes no new circuit (as if drained).
 *  - The transaction's view (txn_driver.c): a device's unowned cross-connects stay
 *    in its target, so a transaction touching the device keeps them, but
 *    for those recovery expects to revert (dr_expect_revert).
 *  - What the operator decides about them at start: adopt.h.
 *
 * Ring domains have no cross-connects: their drift is a transceiver bundle
 * whose setting differs from what the ring state says its node holds
 * (struct dr_nodes, issue 28 #3), filled by the reconciliation passes.
 *
 * Threading: the loop thread only.
 */
#ifndef OCSD_DRIFT_H
#define OCSD_DRIFT_H

#include <stdbool.h>
#include <stddef.h>

#include "fabric.h"
#include "sb_device.h"

struct fs_state;

struct dr_table;

/* Caller frees with dr_free() (accepts NULL). f must outlive the table. */
struct dr_table *dr_new(const struct ocs_fabric *f);
void dr_free(struct dr_table *t);

/*
 * What a read of device id found: unowned and missing cross-connects
 * (copied; any order). The device is verified from then on. 0 or -ENOMEM
 * (unchanged).
 */
int dr_set(struct dr_table *t, int id, const struct sb_xc *unowned, size_t n,
	   const struct sb_xc *missing, size_t n_missing);
/* The device could not be read when it had to be: no new circuit until it is. */
void dr_set_unverified(struct dr_table *t, int id);
/*
 * Cross-connects recovery found to be another session's unconfirmed commit
 * of a transaction never decided (recovery.c: a paused leader's, on
 * devices it could not fence): they revert by themselves, at the confirm
 * timeout or when that session ends, so a transaction does not keep them
 * in its target as it keeps other unowned ones (dr_reverting); writing
 * them back would make them permanent, owned by no job. A mark lasts while
 * reads of its device (dr_set) still find its cross-connect. 0 or -ENOMEM.
 */
int dr_expect_revert(struct dr_table *t, const struct ocs_xc *xcs, size_t n);
bool dr_reverting(const struct dr_table *t, int id, const struct sb_xc *x);
/* A transaction that left them out committed on device id: its marked ones are gone. */
void dr_reverted(struct dr_table *t, int id);
/* Drops these cross-connects from the table (adopted or cleared). */
void dr_forget(struct dr_table *t, const struct ocs_xc *xcs, size_t n);

/* Every unowned cross-connect (malloc'd, caller frees; NULL with *n 0 when none or ENOMEM). */
struct ocs_xc *dr_unowned(const struct dr_table *t, size_t *n);
/* A device's unowned and missing cross-connects (valid until the next change). */
const struct sb_xc *dr_device_unowned(const struct dr_table *t, int id, size_t *n);
const struct sb_xc *dr_device_missing(const struct dr_table *t, int id, size_t *n);
bool dr_device_unverified(const struct dr_table *t, int id);
/*
 * The other half of x's two-way circuit through the wiring (whether or not
 * any device holds it); false when x cannot have one (one port not cabled,
 * a loop back into its own spine port).
 */
bool dr_partner(const struct dr_table *t, const struct ocs_xc *x, struct ocs_xc *p);
bool dr_is_unowned(const struct dr_table *t, const struct ocs_xc *x);
/* Unowned cross-connects in all, and devices not verified. */
size_t dr_count(const struct dr_table *t);
int dr_unverified(const struct dr_table *t);

/*
 * The planner's view: blockers (malloc'd, caller frees) are the unowned
 * cross-connects that form clean two-way circuits clear of the stored ones
 * (fs); blocked[device id] (dev_count entries, caller's) is set for every
 * device that must take no new circuit. 0 or -ENOMEM.
 */
int dr_planner_view(const struct dr_table *t, const struct fs_state *fs, struct ocs_xc **blockers,
		    size_t *n_blockers, bool *blocked);
/*
 * The unowned cross-connects of the devices not touched (touched[id]) that
 * are half of a two-way unowned circuit: what the L2 check of a
 * transaction sees besides the stored circuits. Malloc'd; 0 or -ENOMEM.
 */
int dr_paired_untouched(const struct dr_table *t, const char *touched, struct ocs_xc **out,
			size_t *n);

/* ---- ring domains: bundles that differ from the ring state ---- */

/* One bundle as the last pass found it, against what its node should hold. */
struct dr_bundle {
	int node;
	struct sb_bundle expected; /* rings.h: its ring's setting, or loopback */
	struct sb_bundle found;	   /* as read from running (absent: loopback) */
	int32_t found_peer;	   /* the node its selected path reaches; -1: none */
	bool fresh;		   /* the pass before did not find it so */
};

struct dr_nodes;

/* Caller frees with dr_nodes_free() (accepts NULL). */
struct dr_nodes *dr_nodes_new(int n_nodes);
void dr_nodes_free(struct dr_nodes *t);
/* What a read of node found (copied; n 0: it agrees). 0, -EINVAL or -ENOMEM (unchanged). */
int dr_nodes_set(struct dr_nodes *t, int node, const struct dr_bundle *b, size_t n);
/* A node's differing bundles (valid until the next change of that node). */
const struct dr_bundle *dr_nodes_get(const struct dr_nodes *t, int node, size_t *n);
int dr_nodes_count(const struct dr_nodes *t);
/* Differing bundles in all. */
size_t dr_nodes_total(const struct dr_nodes *t);
/* "loopback" or "external <distance> <up|down>" into buf. */
const char *dr_bundle_setting(const struct sb_bundle *b, char *buf, size_t len);

#endif
