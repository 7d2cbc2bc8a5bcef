/*
 * sb_txn.h - all-or-nothing transactions across many OCS devices.
 *
 * A transaction takes, for every device it touches, the complete set of
 * cross-connects (a switch) or bundles (a transceiver) the device must hold
 * afterwards, and either gets every device there or leaves every device as
 * it was (proven by reading each device back). Switches (ocs-switch) and
 * transceivers (ocs-transceiver) go through the same steps and may be mixed
 * in one plan. The state machine, its diagram and its invariants are in
 * sb_txn.c. In short:
 *   0. plan check: the caller's verify callback (the independent L2
 *      checker of solvers/) runs on the plan; a refused plan touches no
 *      device. The persist_intent hook runs next.
 *   1. prepare all: lock candidate, read the pre-image, one edit-config,
 *      validate;
 *   2. commit all: confirmed commit with a timeout, bound to the session
 *      (the dead-man switch: revert when the session or the timeout ends);
 *   3. verify all: read back configuration and connection state until
 *      every intended connection is `connected` (a transceiver: every
 *      external path `active`, and a `failed` one fails at once); run the
 *      verify callback on what was read;
 *   4. confirm all. Any failure before 4 rolls every device back (cancel
 *      the confirmed commit, or a compensating edit from the pre-image) and
 *      reads every device back again. persist_outcome runs last.
 *
 * Threads: an engine runs on an executor (sb_exec.h): the caller's, passed
 * to sb_engine_new_on() the way hiredis takes the caller's loop (the
 * daemon passes its one executor), or a small pool of its own from
 * sb_engine_new() for tools and tests. It creates no thread per
 * transaction. Each step runs its devices as coroutines of a loop
 * (sb_exec.h) inside one executor task (or a few: devices_per_loop), so
 * every device's RPC is out before the first reply is read, replies are
 * read as their sockets become readable, and every RPC keeps the device's
 * deadline (sb_device.h); the rollback, and a device that must connect
 * first, run one task per device (so does every step with
 * thread_per_device). The last task of a step starts the next (no task
 * waits for another); a loop task occupies its executor thread for its
 * step.
 * sb_engine_start() queues the transaction and returns; `done` is called
 * from an executor thread, and sb_txn_join() returns the result.
 * sb_engine_run() blocks the calling thread until the outcome is known: it
 * must not be called from a task of the engine's own executor. Several
 * transactions may run at once on one engine if they touch disjoint
 * devices (a device is used by one transaction at a time: the caller
 * guarantees it). Hooks and the verify callback are called from executor
 * threads, never from two threads at once for one transaction. Counters
 * are atomics.
 */
#ifndef OCS_SB_TXN_H
#define OCS_SB_TXN_H

#include "sb_device.h"
#include "sb_exec.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One device of a plan and the complete set it must hold afterwards: the
 * cross-connects of an ocs-switch device (target), or every bundle of an
 * ocs-transceiver device's node (bundles; target/n_target unused). The
 * device's model (sb_device_model) says which.
 */
struct sb_txn_device {
	struct sb_device *dev;	    /* not owned */
	const struct sb_xc *target; /* not owned; inputs unique */
	size_t n_target;
	const struct sb_bundle *bundles; /* not owned; bundle ids unique */
	size_t n_bundles;
};

struct sb_txn_plan {
	uint64_t id;			     /* the caller's transaction id (intent log key) */
	const struct sb_txn_device *devices; /* not owned */
	size_t n_devices;
};

enum sb_verify_phase {
	SB_VERIFY_PLAN = 0, /* before any device is touched: the targets */
	SB_VERIFY_READBACK, /* step 3: what the devices report */
};

/*
 * Plan device `index` as the verify callback sees it: cross-connects of a
 * switch (xcs), bundles of a transceiver (bundles: in the PLAN phase the
 * targets with peer_node -1 and status UNKNOWN; in READBACK what the device
 * reported, every external path active).
 */
struct sb_device_xcs {
	size_t index; /* into plan->devices */
	const struct sb_xc *xcs;
	size_t n;
	const struct sb_bundle_state *bundles;
	size_t n_bundles;
};

/*
 * Returns 0 when the cross-connects pass (no one-way circuit, ...);
 * otherwise non-zero with a reason in `why`. Devices outside the plan are
 * the caller's business (it knows the rest of the fabric).
 */
typedef int (*sb_verify_fn)(void *arg, enum sb_verify_phase phase,
			    const struct sb_device_xcs *devices, size_t n, char *why,
			    size_t why_len);

enum sb_txn_step {
	SB_STEP_NONE = 0,
	SB_STEP_PLAN,
	SB_STEP_PREPARE,
	SB_STEP_COMMIT,
	SB_STEP_VERIFY,
	SB_STEP_CONFIRM,
	SB_STEP_ROLLBACK,
	SB_STEP_COUNT,
};
const char *sb_txn_step_name(enum sb_txn_step s);

enum sb_txn_outcome {
	SB_TXN_COMMITTED = 0, /* every device holds its target, confirmed */
	SB_TXN_REFUSED,	      /* plan check or intent hook refused: no device touched */
	SB_TXN_ROLLED_BACK,   /* a step failed; every device read back at its pre-image */
	SB_TXN_FAILED,	      /* a rollback could not be proven on some device */
};
const char *sb_txn_outcome_name(enum sb_txn_outcome o);

enum sb_dev_outcome {
	SB_DEV_UNTOUCHED = 0,
	SB_DEV_CONFIRMED,   /* holds the target */
	SB_DEV_ROLLED_BACK, /* read back at its pre-image */
	SB_DEV_ROLLBACK_FAILED,
};

struct sb_txn_device_result {
	enum sb_dev_outcome outcome;
	enum sb_strategy strategy;
	enum sb_txn_step failed_step;	/* SB_STEP_NONE when this device did not fail */
	struct sb_error error;		/* the failure, when failed_step is set */
	struct sb_error rollback_error; /* when outcome is SB_DEV_ROLLBACK_FAILED */
	/* the rollback found running different from the session's last verified
	 * image (changed behind ocsd's back): no compensating edit was made from
	 * it, the image is forgotten, reconcile the device */
	bool stale_image;
	/* step 1 lost the session and ran again, once, on a fresh one (sb_txn.c R1) */
	bool prepare_retried;
};

struct sb_txn_result {
	enum sb_txn_outcome outcome;
	enum sb_txn_step failed_step;	      /* first step that failed */
	char message[320];		      /* human summary */
	struct sb_txn_device_result *devices; /* n_devices entries, plan order */
	size_t n_devices;
	size_t n_failed_devices;
	size_t n_rollback_failures;
	int64_t step_ms[SB_STEP_COUNT];
	int64_t total_ms;
};

/* Frees what a result owns (not the struct itself). Accepts NULL. */
void sb_txn_result_clear(struct sb_txn_result *r);

struct sb_txn_hooks {
	/* before step 1; non-zero refuses the transaction (nothing touched) */
	int (*persist_intent)(void *arg, const struct sb_txn_plan *plan);
	/* after the outcome is known (not called for a refused plan) */
	void (*persist_outcome)(void *arg, const struct sb_txn_plan *plan,
				const struct sb_txn_result *result);
	sb_verify_fn verify; /* NULL skips the L2 checks (tests of the engine only) */
	/*
	 * Before the rollback's first compensating edit of a device (any
	 * thread of the engine; may be called once per device, concurrently):
	 * non-zero (why filled) means no compensating edit may be sent, and
	 * the device's rollback fails at once with that reason (ROLLBACK NOT
	 * PROVEN). NULL: always allowed. The daemon refuses when it cannot
	 * withdraw the transaction's stored decision to commit (it does not
	 * lead any more: the new leader finishes that decision, txn_driver.c).
	 */
	int (*compensate)(void *arg, char *why, size_t why_len);
	/*
	 * How far the transaction has got (NULL: no calls): once as a device
	 * step starts (done 0) and once as each device finishes it (done 1 ..
	 * total, total = the plan's devices). Steps: PREPARE, COMMIT, VERIFY,
	 * CONFIRM, and ROLLBACK when one runs, in the order they run. Called
	 * from the engine's threads (with thread_per_device, or devices handed
	 * off from a loop, several at once for the engine), but the calls of
	 * one transaction are serialised under a lock of the transaction, so
	 * each sees `done` rise by one: the hook must be thread-safe across
	 * transactions, must not block and must not call the engine.
	 */
	void (*progress)(void *arg, enum sb_txn_step step, size_t done, size_t total);
	void *arg;
};

struct sb_txn_options {
	int confirm_timeout_s;	 /* dead-man switch [30] */
	int verify_timeout_ms;	 /* wait for `connected` in step 3 [2000] */
	int connect_timeout_ms;	 /* per device, including backoff retries [3000] */
	int rollback_timeout_ms; /* per device, retries included [10000] */
	/*
	 * How a step's device work runs (sb_txn.c, "Threads"): by default one
	 * coroutine per device in a loop of coroutines (sb_exec.h) per
	 * executor task, at most devices_per_loop devices per loop [0: every
	 * device of the plan in one loop]; thread_per_device: one executor
	 * task per device instead, each blocking on its own RPCs [false].
	 */
	int devices_per_loop;
	bool thread_per_device;
};

struct sb_txn_counters {
	atomic_uint_least64_t started;
	atomic_uint_least64_t committed;
	atomic_uint_least64_t refused;
	atomic_uint_least64_t rolled_back;
	atomic_uint_least64_t failed;
	atomic_uint_least64_t device_failures;
	atomic_uint_least64_t rollback_failures;
	atomic_uint_least64_t prepare_retries; /* devices whose step 1 ran again (R1) */
};

struct sb_engine;
struct sb_txn_handle;

/*
 * An engine on the caller's executor (copied; what it points to must
 * outlive the engine). Free with sb_engine_free(). 0, -EINVAL, -ENOMEM.
 */
int sb_engine_new_on(const struct sb_executor *x, struct sb_engine **out);
/* An engine on a pool of its own of `threads` threads (1..1024). */
int sb_engine_new(int threads, struct sb_engine **out);
/* No transaction may be running; stops the engine's own pool. Accepts NULL. */
void sb_engine_free(struct sb_engine *e);
const struct sb_txn_counters *sb_engine_counters(const struct sb_engine *e);

/*
 * Runs one transaction to its outcome. opts may be NULL (defaults). Fills
 * *result (caller clears it with sb_txn_result_clear). Returns 0 when the
 * engine ran (whatever the outcome), -EINVAL for a malformed plan (empty,
 * duplicate device, duplicate input, port > 4095, duplicate bundle, an
 * external path without a distance or a loopback with one, the other
 * model's set on a device) with nothing touched.
 */
int sb_engine_run(struct sb_engine *e, const struct sb_txn_plan *plan,
		  const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		  struct sb_txn_result *result);

/*
 * Same, as tasks on the engine's executor: returns at once (-EINVAL for a
 * malformed plan or -ENOMEM, with nothing started). plan, its arrays and
 * hooks must stay valid until done() is called / sb_txn_join() returns
 * (opts is copied). done may be NULL; it runs on an executor thread, after
 * which *out may be joined.
 */
int sb_engine_start(struct sb_engine *e, const struct sb_txn_plan *plan,
		    const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		    void (*done)(void *arg, const struct sb_txn_result *r), void *done_arg,
		    struct sb_txn_handle **out);
/* Waits for the transaction; moves its result into *result; frees h. Returns 0. */
int sb_txn_join(struct sb_txn_handle *h, struct sb_txn_result *result);

#endif
