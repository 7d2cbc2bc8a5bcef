/*
 * keepalive.h - the background keepalive of the devices' transaction
 * sessions (issue 13 "warm start", issue 14 finding 6): every interval one
 * executor task walks every device (one task for all of them, never a
 * thread per device) and calls sb_device_keepalive() on its transaction
 * handle: a live session gets no RPC, a session whose device went away
 * (restarted, killed, TCP keepalive gave up) is replaced with the device's
 * backoff, and a device without a session is connected. So a dead session
 * is replaced before a transaction needs it, off the transaction's path.
 * A device a transaction is using is skipped (the transaction checks it).
 *
 * What a pass finds is reported on the loop through the reconciliation's
 * device_read event (reconcile.h): ListDevices and Watch say DISCONNECTED
 * (with the connect error) while a device's session cannot be opened and
 * CONNECTED once it is up again, without waiting for a reconciliation
 * pass. Reconnects are counted in ocsd_device_reconnects_total{device}.
 *
 * Rollbacks not proven. A transaction whose rollback could not be proven
 * (a device unreachable until the rollback's deadline: ROLLBACK NOT PROVEN,
 * intent FAILED) is settled here once its devices answer again, the way
 * start-up recovery settles open intents: when no transaction runs, the
 * pass reads back every device the oldest failed intent touched (only
 * devices whose session is up) and, on the loop, compares them with the
 * circuit table (the pre-image: a failed intent never reached it) and with
 * the intent applied. All at the pre-image: the intent becomes ROLLED_BACK
 * ("rollback proven after the devices came back"). All at the target, for
 * the release of a job that still holds the circuits it removes or the
 * submission (additions only) of a failed job (jm_may_take_effect): the
 * intent becomes CONFIRMED ("took effect") and is applied to the circuit
 * table, as a confirmed transaction would have been. Either way the job
 * follows what was proven (jm_unproven_settled; jobs.c, "release not
 * proven"): a release at the target is RELEASED, at the pre-image the job
 * still holds its circuits and a release runs again. Anything else (the
 * target of another intent, or neither) leaves it FAILED with what was
 * found, for the reconciliation's drift report and the operator, and it is
 * not read again in this run. A device read back other than the circuit
 * table said has its transaction session's image forgotten (sb_device.h):
 * the next transaction reads it again instead of editing from a stale one. Circuit intents only
 * (ring domains: recovery).
 *
 * Threading: ka_new, ka_free on the loop thread; the pass runs on the
 * executor and posts its findings back (one loop_post per pass).
 */
#ifndef OCSD_KEEPALIVE_H
#define OCSD_KEEPALIVE_H

#include <stdatomic.h>

#include "reconcile.h"

struct devices;
struct exec;
struct fs_state;
struct jm;
struct loop;
struct mx_registry;
struct ocs_fabric;
struct st_store;

struct ka_deps {
	struct loop *loop;
	struct exec *exec;
	struct devices *devs;	    /* the transaction handles are walked */
	struct recon_events events; /* device_read: what each visited device's session is */
	struct mx_registry *reg;    /* ocsd_device_reconnects_total is registered here */
	unsigned interval_ms;	    /* between passes; a pass spends at most this long */
	/* settling failed intents (NULL store: not done, e.g. ring domains) */
	const struct ocs_fabric *fabric;
	struct fs_state *fs;
	struct st_store *store;
	struct jm *jm; /* jm_busy(): no settling while a transaction runs; told the outcome */
	/* the engine's count of failed transactions (sb_engine_counters()->failed):
	 * when it moves, the store is asked for failed intents */
	const atomic_uint_least64_t *failed;
};

struct ka;

/*
 * Starts the timer (the first pass one interval from now). NULL when out of
 * memory. Free with ka_free() (accepts NULL), which stops the timer and
 * waits for a running pass.
 */
struct ka *ka_new(const struct ka_deps *deps);
void ka_free(struct ka *k);

#endif
