/*
 * txn_driver.h - the transaction driver: takes one change set (cross-connects to
 * remove and to add, with their owners, and the leaf-spine links that come
 * with it), stores its intent, runs it as one all-or-nothing transaction on
 * the southbound engine, stores the outcome together with the circuit-table
 * change, and reports one outcome through one callback on the loop thread.
 *
 * It never touches job state: the job manager (jobs.c) turns the outcome
 * into state changes. The job manager sees the driver only as the function
 * pointer jm_deps.txn_start (txn_start() here), so that tests can drive the
 * job manager with a fake engine.
 *
 *   txn_start --> intent stored --> sb_engine_start ... read back right
 *       |               |                --> (loop) decision stored --> confirm
 *       |               |                    `-- refused: roll back  --> (loop) outcome
 *       |               `-- store refused: -EIO, nothing                 stored, circuits
 *       |                   was touched                                  applied (confirmed),
 *       `-- nothing to change on any device: done() at once,             done() called
 *           TXN_CONFIRMED
 *
 * Invariants:
 *  1. The intent is in the store before any device is touched (st_intent_begin
 *     returns before sb_engine_start); for a ring transaction, before any
 *     device is confirmed: it is stored while the devices prepare, and the
 *     confirm waits until it is durable (txn_driver.c, the diagram at the top).
 *  2. No device is confirmed before the decision to commit is stored
 *     (st_intent_decide, on the loop; the verify hook waits for it): on a
 *     replicated store that write is fenced by the leader key, so a replica
 *     that does not lead any more confirms nothing and rolls back.
 *  3. The outcome and the circuit change are stored before done() runs; when
 *     that store write fails, done() says so (store_failed) and the circuit
 *     table in memory is reloaded from the store, which recovery reconciles
 *     with the devices at the next start.
 *  4. One transaction at a time per driver (the caller's rule: -EBUSY).
 *
 * In a ring domain the change is rings and bundle settings instead: the
 * intent is stored with st_ring_intent_begin (overlapped with the devices'
 * prepare steps, invariant 1), and once confirmed the ring state (rings.h)
 * takes the job's new rings.
 *
 * Threading: every function on the loop thread; the engine's threads only
 * run the verify hook (the L2 checker, or the ring check on copies made at
 * the start; then the decision, posted to the loop and waited for) and post
 * the completion.
 */
#ifndef OCSD_TXN_H
#define OCSD_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct clk;
struct devices;
struct dr_table;
struct fs_state;
struct hbd_bundle;
struct loop;
struct ocs_fabric;
struct ocs_rail_fabric;
struct rg_ring;
struct rg_state;
struct sb_engine;

/* One change set (not owned by the driver: copied by txn_start). */
struct txn_change {
	const char *job_id;
	bool release; /* removes the job's circuits and links */
	const struct ocs_xc *removals;
	size_t n_removals;
	const struct st_circuit *additions; /* with their owners */
	size_t n_additions;
	const struct st_link *links; /* stored with the intent, become the jobs' when confirmed */
	size_t n_links;
	/*
	 * OCSTrx ring domains (ring set; no cross-connects then): every ring
	 * job_id has afterwards (none for a release) and the settings of every
	 * bundle that changes. Each touched node gets the complete set of its
	 * bundles (what the ring state says it holds, with these applied); a
	 * faulty node is never touched. The verify hook checks on every node
	 * that each external path reaches the planned neighbour, a healthy node
	 * of job_id's rings, and never another job's ring or a faulty node.
	 */
	bool ring;
	const struct rg_ring *rings;
	size_t n_rings;
	const struct hbd_bundle *bundles;
	size_t n_bundles;
	/* a repair started by a fault not stored yet: stored with the intent */
	const struct st_fault *fault;
	/* rail-OCS fabrics: a GPU swap, stored with the intent (st_rail_intent_begin) */
	const struct st_rail_swap *rail_swap;
};

enum txn_result {
	TXN_CONFIRMED = 1, /* every device holds the change */
	TXN_REFUSED,	   /* refused before any device was touched (plan check, prepare) */
	TXN_ROLLED_BACK,   /* every device back as it was */
	TXN_FAILED,	   /* a rollback could not be proven: the fabric needs reconciliation */
};

/* What a transaction did (valid during the done callback only). */
struct txn_outcome {
	enum txn_result result;
	uint64_t txn_id; /* 0 when no device needed a change */
	const char *message;
	size_t rollback_failures;
	int64_t total_ms;
	const char *const *devices; /* names of the devices touched */
	size_t n_devices;
	bool store_failed; /* the outcome could not be stored */
	const char *store_error;
	int store_rc; /* then why (< 0; on etcd -EPERM: this replica does not lead any more) */
	/* the engine's time (device steps included; a wait of the confirm for the
	 * intent's commit excluded: that is the controller's) and when it
	 * finished (CLOCK_MONOTONIC) */
	int64_t engine_us;
	int64_t finished_us;
};

typedef void (*txn_done_fn)(void *arg, const struct txn_outcome *o);

struct txn_deps {
	const struct ocs_fabric *fabric;
	struct fs_state *fs;
	struct st_store *store;
	struct loop *loop;
	struct sb_engine *engine;
	struct devices *devs;	/* transaction handles and per-device circuits */
	struct rg_state *rings; /* ring domains: the ring state, updated when confirmed */
	/* cross-connects no job owns (drift.h; NULL: none): a touched device
	 * keeps its own (unless the change removes them) and the L2 check sees
	 * the two-way ones of the others */
	struct dr_table *drift;
	/* rail-OCS fabrics (fabric is then rail_layout_devices()): the plan and
	 * read-back check is rail_check_xcs on every device (rail_swap.h) */
	const struct ocs_rail_fabric *rail;
	const struct clk *clock;
	int confirm_timeout_s;
	int connect_timeout_ms;
	int rollback_timeout_ms; /* per device (sb_txn_options); 0: the engine's default */
};

struct txn_driver;

/* Caller frees with txn_driver_free() (accepts NULL; no transaction may be running). */
struct txn_driver *txn_driver_new(const struct txn_deps *deps);
void txn_driver_free(struct txn_driver *d);
/*
 * On the loop thread, when the phase ends (SIGTERM, the lead lost): the
 * running transaction's decision will not be taken, so the engine stops
 * waiting for it at once (no confirm; the transaction rolls back) instead
 * of after half the confirm timeout. Accepts NULL and an idle driver.
 */
void txn_driver_withdraw(struct txn_driver *d);

/*
 * Starts change c on driver (a struct txn_driver *). 0: done(arg, outcome)
 * is called later on the loop, exactly once (for a ring transaction also
 * when its intent could not be stored: every device is then rolled back
 * and the outcome says store_failed). Otherwise nothing was touched and
 * done is never called: -EBUSY (a transaction is running), -EIO (the
 * intent could not be stored), -ENOMEM or the engine's error, with why set.
 */
int txn_start(void *driver, const struct txn_change *c, txn_done_fn done, void *arg, char *why,
	      size_t why_len);

#endif
