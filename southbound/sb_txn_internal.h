/*
 * sb_txn_internal.h - what the two files of the transaction engine
 * (sb_txn.h) share: the engine behind struct sb_engine, one transaction
 * (struct txn) and one device of it (struct dev_ctx), and the few
 * functions one file calls in the other. Not installed, and not for use
 * outside sb_txn.c and sb_txn_dev.c.
 *
 * Files:
 *
 *   sb_txn.c      the engine, the transaction driver (the steps, the state
 *                 machine and invariants at its top) and the owner's side
 *   sb_txn_dev.c  what one device does in each step (the sbt_job_*)
 *
 * Calls go one way, sb_txn.c --> sb_txn_dev.c: the driver runs the jobs
 * and fails device 0 when the L2 check refuses (sbt_fail_dev_msg). A job
 * never calls the driver back: one running as a coroutine of a slice's
 * loop that would block (a connect, a claim a keepalive holds) sets
 * dev_ctx.wants_thread and returns, and the driver, which owns the
 * scheduling of a step, moves it to an executor task of its own.
 */
#ifndef OCSD_SB_TXN_INTERNAL_H
#define OCSD_SB_TXN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sb_exec.h"
#include "sb_txn.h"

/* ---- the engine (sb_txn.c; the device jobs count into its counters) ---- */

#define SPARE_LOOPS 8

struct sb_engine {
	struct sb_executor x;
	struct sb_exec_pool *own; /* the engine's own pool, or NULL */
	struct sb_txn_counters counters;
	/* loops (and their stacks) kept between steps; loops_mu guards both */
	pthread_mutex_t loops_mu;
	struct sb_exec_loop *spare[SPARE_LOOPS];
	int n_spare;
};

/* ---- one transaction ------------------------------------------------------ */

struct loop_slice;

struct txn;

struct dev_ctx {
	struct sb_exec_task task; /* runs t->step_fn on this device */
	struct txn *t;
	size_t index;
	struct sb_device *dev;
	const struct sb_xc *target;
	size_t n_target;
	struct sb_xc *pre; /* running before the transaction (pre-image) */
	size_t n_pre;
	bool have_pre;
	bool pre_cached;      /* the pre-image is the session's last verified image, not read now */
	int64_t committed_us; /* when the commit was answered (CLOCK_MONOTONIC) */
	bool claimed;	      /* holds the device's claim (sb_device_claim) until txn_end */
	bool touched;	      /* received at least one RPC of this transaction */
	bool locked;	      /* holds the candidate (or running) lock */
	bool edited;	      /* the candidate holds the change */
	bool maybe_committed; /* a commit (or running edit) was sent */
	uint64_t commit_session; /* sb_device_reconnects() when it was sent */
	bool confirm_sent;	 /* the confirming commit was sent */
	bool confirmed;
	struct sb_xc *readback;
	size_t n_readback;
	/* a transceiver (ocs-transceiver) device: the same roles for bundles */
	bool trx;
	struct sb_bundle *target_b; /* sorted by bundle */
	size_t n_target_b;
	struct sb_bundle *pre_b;
	size_t n_pre_b;
	struct sb_bundle_state *readback_b;
	size_t n_readback_b;
	bool ok;	   /* the current step succeeded */
	bool in_loop;	   /* the current step runs as a coroutine of a slice's loop */
	bool wants_thread; /* set by a job in a loop that must block: the driver hands it off */
	struct sb_txn_device_result *res;
};

struct txn {
	struct sb_engine *e;
	const struct sb_txn_plan *plan;
	const struct sb_txn_hooks *hooks;
	struct sb_txn_options opts;
	struct dev_ctx *devs;
	struct sb_txn_result *r;
	struct sb_exec_task start; /* the first task: txn_begin() */
	enum sb_txn_step step;	   /* the step whose device tasks run */
	void (*step_fn)(void *dev_ctx);
	atomic_size_t remaining;   /* tasks of the step still running (devices or slices) */
	struct loop_slice *slices; /* the loop tasks of a step, n_slices of them */
	size_t n_slices;
	int64_t t_start, t_step;
	/* hooks->progress: the devices that finished the step, guarded by
	 * progress_mu (the hook's calls of one transaction are serialised) */
	pthread_mutex_t progress_mu;
	size_t progress_done;
	/* The owner's continuation, called last; the txn is the owner's again. */
	void (*finished)(struct txn *t);
};

/* ---- sb_txn_dev.c: the device jobs (t->step_fn, one call per device) ---- */

/* Step 1: connect, lock, pre-image, edit (+ validate); R1's one retry. */
void sbt_job_prepare(void *arg);
/* Step 2: the (confirmed) commit, or the edit of a writable-running device. */
void sbt_job_commit(void *arg);
/* Step 3: read back until the target is in place and switched. */
void sbt_job_verify(void *arg);
/* Step 4: the confirming commit; the target becomes the session's image. */
void sbt_job_confirm(void *arg);
/* Back to the pre-image and proven, retried until rollback_timeout_ms. */
void sbt_job_rollback(void *arg);
/* Fails d in step (the first failure is kept) with an error made of op, code and msg. */
void sbt_fail_dev_msg(struct dev_ctx *d, enum sb_txn_step step, const char *op, int code,
		      const char *msg);

#endif
