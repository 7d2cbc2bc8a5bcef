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
 *     returns before sb_engine_start); for an overlapped kind (the ring
 *     kind's, kind_ring_txn.c), before any device is confirmed: it is
 *     stored while the devices prepare, and the confirm waits until it is
 *     durable (txn_driver.c, the diagram at the top).
 *  2. No device is confirmed before the decision to commit is stored
 *     (st_intent_decide, on the loop; the verify hook waits for it): on a
 *     replicated store that write is fenced by the leader key, so a replica
 *     that does not lead any more confirms nothing and rolls back.
 *  3. The outcome and the circuit change are stored before done() runs; when
 *     that store write fails, done() says so (store_failed) and the circuit
 *     table in memory is reloaded from the store, which recovery reconciles
 *     with the devices at the next start.
 *  4. One transaction at a time per driver (the caller's rule: -EBUSY).
 *     A wave of several jobs (txn_change.jobs) is one transaction: one
 *     intent naming every job, one decision, one outcome; the outcome names
 *     the devices that failed (faults), by which the job manager splits it.
 *
 * A job kind whose change is more than cross-connects, or whose check,
 * intent or state in memory differ, plugs in through its ops (struct
 * txn_kind_ops below; the kinds' own in jobs/, e.g. the ring kind's in
 * kind_ring_txn.c): the driver runs the gate, the decision, the engine
 * and the outcome the same for every kind. A kind may store its intent
 * while the devices prepare (overlapped: invariant 1 then holds for the
 * confirms, the read-back check waits until the intent is durable).
 *
 * Threading: every function on the loop thread; the engine's threads only
 * run the verify hook (the fabric's check of cross-connects, or a kind's
 * check on copies made at the start; then the decision, posted to the loop
 * and waited for), keep the latest progress in atomics (posted to the
 * loop, one post pending at a time, so a transaction of any size posts a
 * bounded number of times per device step) and post the completion.
 */
#ifndef OCSD_TXN_H
#define OCSD_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "l2check.h"
#include "sb_txn.h"
#include "store.h"

struct clk;
struct devices;
struct dr_table;
struct fs_state;
struct loop;
struct ocs_fabric;
struct sb_engine;
struct txn_kind_ops;

/* How far a running transaction has got (txn_change.progress). */
struct txn_progress {
	int64_t txn_id;
	enum sb_txn_step step; /* PREPARE, COMMIT, VERIFY, CONFIRM; ROLLBACK */
	size_t done;	       /* devices that finished the step */
	size_t total;	       /* devices of the transaction */
};

/* At most one progress call per transaction in this time, but for a step's
 * start and its last device (txn_change.progress). */
#define TXN_PROGRESS_INTERVAL_MS 100

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
	 * A wave (jobs.c): every job whose change this is (jobs[0] is job_id;
	 * NULL, 0: job_id alone). Its intent names them all (st_intent_begin_wave);
	 * additions and links name their own job, a released job has neither.
	 */
	const char *const *jobs;
	size_t n_jobs;
	/*
	 * Job states to store with a CONFIRMED outcome, in the outcome's own
	 * write (st_intent_finish_states; updated_ms set then). NULL, 0: none.
	 * The ids must stay valid until the transaction ends.
	 */
	const struct st_job_state *on_confirm;
	size_t n_on_confirm;
	/*
	 * A job kind's own part of the change (NULL: cross-connects only, as
	 * above): its ops and what they read (the kind's, valid during
	 * txn_start only).
	 */
	const struct txn_kind_ops *kind;
	const void *kind_change;
	/*
	 * How far the transaction has got, on the loop, with txn_start's arg
	 * (NULL: not told). Every step that runs is told, in the order the
	 * steps run, with its last device always (its start, done 0, when
	 * the loop gets to it before a device finished); in between at most
	 * one call per TXN_PROGRESS_INTERVAL_MS. Not called once done() ran.
	 */
	void (*progress)(void *arg, const struct txn_progress *p);
};

enum txn_result {
	TXN_CONFIRMED = 1, /* every device holds the change */
	TXN_REFUSED,	   /* refused before any device was touched (plan check, prepare) */
	TXN_ROLLED_BACK,   /* every device back as it was */
	TXN_FAILED,	   /* a rollback could not be proven: the fabric needs reconciliation */
};

/*
 * A device that failed in a transaction: what a wave's failure is split by
 * (jobs.c). answered: the device refused with an <rpc-error> (an edit of
 * one job may be the cause); otherwise it did not answer (session lost,
 * timeout: every change on it shares the cause). unproven: its rollback
 * could not be proven.
 */
struct txn_device_fault {
	int dev; /* global device id (fabric.h) */
	bool answered;
	bool unproven;
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
	const struct txn_device_fault *faults; /* the devices that failed */
	size_t n_faults;
	bool store_failed;  /* the outcome could not be stored */
	bool states_stored; /* CONFIRMED, and the change's on_confirm states with it */
	const char *store_error;
	int store_rc; /* then why (< 0; on etcd -EPERM: this replica does not lead any more) */
	/* the engine's time (device steps included; a wait of the confirm for the
	 * intent's commit excluded: that is the controller's) and when it
	 * finished (CLOCK_MONOTONIC) */
	int64_t engine_us;
	int64_t finished_us;
	int64_t started_us; /* when the engine was handed the plan (CLOCK_MONOTONIC); 0: never */
};

typedef void (*txn_done_fn)(void *arg, const struct txn_outcome *o);

struct txn_deps {
	const struct ocs_fabric *fabric;
	struct fs_state *fs;
	struct st_store *store;
	struct loop *loop;
	struct sb_engine *engine;
	struct devices *devs; /* transaction handles and per-device circuits */
	/* cross-connects no job owns (drift.h; NULL: none): a touched device
	 * keeps its own (unless the change removes them) and the L2 check sees
	 * the two-way ones of the others */
	struct dr_table *drift;
	/* the check of the whole fabric's cross-connects, of the plan and of
	 * the read-back (NULL: the L2 checker, l2check.h); a kind's, e.g. the
	 * rail-OCS fabric's (kind_rail.c; fabric is then rail_layout_devices()).
	 * Returns the number of violations and the first in *v. */
	int (*check_xcs)(const void *ctx, const struct ocs_xc *xcs, size_t n,
			 struct l2_violation *v);
	const void *check_ctx;
	const struct clk *clock;
	int confirm_timeout_s;
	int connect_timeout_ms;
	int rollback_timeout_ms; /* per device (sb_txn_options); 0: the engine's default */
};

/* The per-device plan of a transaction (both arrays malloc'ed; the driver frees them). */
struct txn_plan {
	struct sb_txn_device *devs;
	int *dev_ids; /* global device id of devs[i] */
	size_t n_devs;
};

/*
 * What differs per job kind, the one place a kind plugs in (the kinds'
 * own in jobs/). Every hook is optional: NULL takes the driver's own, the
 * cross-connects of the change on the circuit table.
 */
struct txn_kind_ops {
	/*
	 * On the loop, in txn_start: the per-device plan of c into p and the
	 * kind's state of the transaction into *state (freed by free_state,
	 * also when build fails). 0 or -ENOMEM.
	 */
	int (*build)(const struct txn_deps *d, const struct txn_change *c, struct txn_plan *p,
		     void **state);
	/* Engine thread: the check of the plan and of the read-back (before the decision). */
	int (*verify)(void *state, const struct txn_plan *p, enum sb_verify_phase phase,
		      const struct sb_device_xcs *devices, size_t n, char *why, size_t why_len);
	/* In txn_start: stores the intent; 0 with *txn_id set, or the store's code. */
	int (*intent)(void *state, const struct txn_deps *d, const struct txn_change *c,
		      const struct txn_plan *p, int64_t *txn_id);
	/*
	 * The intent is stored while the devices prepare (the read-back check
	 * waits until it is durable), and also when no device needs a change
	 * (the kind's state changes all the same).
	 */
	bool overlapped;
	/* On the loop, once a confirmed outcome is stored: the kind's state in
	 * memory takes the change. Nonzero: it did not (why set). */
	int (*apply)(void *state, int64_t txn_id, char *why, size_t why_len);
	/* Appended to the job in the profile's log line (e.g. ", fault repair"). */
	const char *(*profile_note)(const void *state);
	void (*free_state)(void *state);
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
 * is called later on the loop, exactly once (for an overlapped kind also
 * when its intent could not be stored: every device is then rolled back
 * and the outcome says store_failed). Otherwise nothing was touched and
 * done is never called: -EBUSY (a transaction is running), -EIO (the
 * intent could not be stored), -ENOMEM or the engine's error, with why set.
 */
int txn_start(void *driver, const struct txn_change *c, txn_done_fn done, void *arg, char *why,
	      size_t why_len);

#endif
