/*
 * repair.h - the safety net under reconciliation: cross-connects of a live
 * (ACTIVE) job that the devices lack are programmed again, or the job is
 * told (a device that lost its configuration, an operator's edit behind
 * ocsd's back, a replica that wrote while it should not have).
 *
 * Reconciliation hands over what each compared device lacks and holds
 * unowned (rep_device), then ends the pass (rep_pass_done; only passes
 * compared at rest, never one discarded because a transaction ran). A job
 * whose cross-connects were missing in two compared passes in a row gets
 * them back: one all-or-nothing transaction of no job (jm_external_txn,
 * run between the jobs' transactions, its intent stored like any other
 * under REP_JOB) that removes and adds again exactly the missing owned
 * cross-connects, so the devices' targets are what the circuit table says
 * and the table itself does not change. A missing cross-connect is left
 * alone, and its job told, when its device cannot be touched without
 * touching what no job owns (invariant 6: an unowned cross-connect holds
 * one of its ports) or is drained; every other cross-connect of that
 * device waits with it (a transaction writes a device's whole target).
 *
 *   missing in a pass --(missing again in the next)--> due
 *   due --(not backing off, no transaction of ours running)--> repairing
 *   repairing --confirmed--> whole (its job's note cleared)
 *             `-refused, rolled back, failed--> told, backing off 2 s,
 *                                               4 s, ... 2 min, due again
 *   blocked (unowned on a port, drained) --> told at every change, retried
 *                                            when the next pass no longer
 *                                            finds it blocked
 *
 * The job is told through its reason (GetJob's `reason`, a JobEvent on
 * Watch with state ACTIVE: jm_note); the note is cleared once nothing of
 * it is missing. Every attempt is logged and counted (events.outcome).
 *
 * Threading: the loop thread only.
 */
#ifndef OCSD_REPAIR_H
#define OCSD_REPAIR_H

#include <stddef.h>

#include "sb_device.h"

struct clk;
struct devices;
struct dr_table;
struct jm;

/* The name repair transactions are stored and reported under (TransactionEvent.job_id). */
#define REP_JOB "ocsd-repair"

struct rep_events {
	void *ctx;
	/*
	 * One attempt: outcome "repaired" (n cross-connects put back),
	 * "failed" (the transaction did not go through) or "blocked" (n
	 * could not be tried: a port held by an unowned cross-connect, a
	 * drained device).
	 */
	void (*outcome)(void *ctx, const char *outcome, size_t n);
};

struct rep_deps {
	struct devices *devs; /* owners (dev_xcs), names, drain */
	struct jm *jm;
	const struct clk *clock; /* NULL: the system clock */
	struct rep_events events;
};

struct rep;

/* Caller frees with rep_free() (accepts NULL; no repair may be running). */
struct rep *rep_new(const struct rep_deps *deps);
void rep_free(struct rep *r);
/*
 * One device of a compared pass: the cross-connects it lacks (expected by
 * the circuit table) and those it holds that no job owns. Copied.
 */
void rep_device(struct rep *r, int device, const struct sb_xc *missing, size_t n_missing,
		const struct sb_xc *unowned, size_t n_unowned);
/* The end of a compared pass: starts the repair that is due, tells the jobs. */
void rep_pass_done(struct rep *r);

#endif
