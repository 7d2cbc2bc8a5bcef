/*
 * txn_driver.c - implementation of txn_driver.h: a change set becomes per-device target
 * configurations (what the circuit table says each touched device holds,
 * minus the removals, plus the additions), checked by the independent L2
 * checker on the whole fabric before any device is touched and again on
 * what the devices report back.
 *
 * Every transaction passes the confirm gate: once the devices read back
 * right, and before the first confirm, the verify hook (engine thread)
 * hands st_intent_decide() to the loop, which owns the store, and waits for
 * its answer. The decision is the transaction's outcome written before the
 * confirms: on etcd it is one etcd transaction that also compares the
 * leader key's create revision (store_etcd.c), so a replica that does not
 * lead any more cannot store it (-EPERM) and sends no confirm; on SQLite it
 * is a local commit (synchronous=FULL). If it fails, every device is rolled
 * back. Recovery finishes a decided intent and rolls an undecided one back
 * (recovery.h).
 *
 * An overlapped kind's transaction (txn_kind_ops.overlapped: the ring
 * kind's, kind_ring_txn.c) stores its intent (for a ring repair, with the
 * fault that started it) WHILE the devices prepare, instead of before: the
 * SQLite commit (synchronous=FULL, an fsync of a few ms) was the largest part of the
 * controller's share of a fault reaction. The loop starts the engine, then
 * commits; the verify hook of the read-back waits until the commit is
 * durable (the gate) before it asks for the decision:
 *
 *   loop:    txn_start --engine start--> commit intent+fault --> gate open ... decide
 *                            |                 (fsync)              |         ^   |
 *   engine:                  `-> lock, edit, validate, confirmed commit,      |   |
 *                                read back --> verify: wait for the gate      |   |
 *                                              --> post the decision ---------'   |
 *                                              --> wait for it <------------------'
 *                                              --> confirm (decided) or
 *                                                  roll back (not stored)
 *
 * Every other transaction stores its intent (st_intent_begin, or a kind's
 * txn_kind_ops.intent) before the engine starts, then passes the same
 * decision. Whatever else differs per job kind (the targets, the check,
 * the state in memory a confirmed change goes to) is the kind's ops.
 *
 * Why nothing is lost: before the confirm nothing on a device is final.
 * Every device holds the change under a confirmed commit bound to the
 * engine's session, so if ocsd dies before the decision is durable, no
 * confirm was sent and every device reverts (at once when its session
 * drops, by the confirmed-commit timeout at the latest); the store still
 * says what the devices hold after the revert. The fault that started the
 * repair is not lost either: the node's `faulty` state on its agent is
 * sticky and is read again after the restart's resubscription
 * (faults.h). If the intent's commit fails, the gate says so: the verify
 * hook refuses, every device is rolled back and the outcome reports the
 * store failure (the job manager then stops serving writes). So the order
 * that matters is kept: the intent, then the decision, are durable before
 * any change becomes final, i.e. before the first confirm. On a replicated
 * store a commit returns once the changeset is in etcd (store.c,
 * st_write_commit): the intent's wait is overlapped too.
 *
 * Why the gate cannot deadlock (the engine thread waits for the loop):
 *  1. The loop never waits for an engine thread while that thread may be in
 *     the verify hook: it joins a transaction (sb_txn_join) only after the
 *     engine posted its end, and the daemon stops its loop only once no
 *     transaction runs (it drains first), before exec_sb_free() waits for
 *     the engine's tasks.
 *  2. The loop thread never runs engine tasks (only executor threads help
 *     in exec_wait()), and the engine holds no lock the loop takes while it
 *     waits: gate_mu is held for flag changes only, never across the store
 *     write, and the loop uses the transactions' device handles only at
 *     start-up, before any transaction (recovery, adoption, the rail port
 *     map; the keepalive reads on the executor, under a claim it only tries).
 *  3. A phase that ends withdraws the decision (txn_driver_withdraw,
 *     before it waits for the engine: the loop takes no decision then).
 *     Should the loop still be gone (stopped without draining), the engine
 *     withdraws a decision not picked up within half the confirm timeout,
 *     the loop writes nothing for a withdrawn one (the node is still run,
 *     by loop_free() at the latest, before the transaction's end is), and
 *     the transaction rolls back.
 */
#include "txn_driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "l2check.h"
#include "log.h"
#include "loop.h"
#include "sb_txn.h"

struct txn_driver {
	struct txn_deps d;
	struct txn *running;
};

struct txn {
	struct txn_driver *drv;
	txn_done_fn done;
	void *done_arg;
	char job_id[128];
	bool release;
	int64_t txn_id;
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *adds;
	size_t n_adds;
	struct st_job_state *on_confirm; /* txn_change.on_confirm, copied */
	size_t n_on_confirm;
	/* the southbound plan: devices and targets (a kind's own: kind_state) */
	struct txn_plan p;
	struct sb_xc **targets;
	struct ocs_xc *others; /* cross-connects on devices outside the plan */
	size_t n_others;
	struct sb_txn_plan plan;
	struct sb_txn_hooks hooks;
	struct sb_txn_options opts;
	struct sb_txn_handle *handle;
	struct loop_node done_node; /* posts on_loop_done to the loop */
	int64_t started_us, finished_us;
	/* a job kind's ops (txn_driver.h; NULL: cross-connects only) and its state */
	const struct txn_kind_ops *kind;
	void *kind_state;
	/* the gate (see the diagram above): 0 while the intent is being
	 * stored, 1 when it is durable, -errno when it could not be stored */
	pthread_mutex_t gate_mu;
	pthread_cond_t gate_cv;
	int gate;
	char intent_error[200]; /* why the intent could not be stored */
	/* the confirm gate's decision (diagram above), under gate_mu: posted to
	 * the loop, being written there, withdrawn by the engine thread that
	 * stopped waiting (the loop then writes nothing), or done with the
	 * store's answer in decide_rc */
	enum { DECIDE_NONE, DECIDE_POSTED, DECIDE_WRITING, DECIDE_WITHDRAWN, DECIDE_DONE } decide;
	bool no_decision; /* txn_driver_withdraw: no decision is taken any more */
	int decide_rc;
	char decide_error[200];
	struct loop_node decide_node; /* posts on_loop_decide to the loop */
	/* the profile (CLOCK_MONOTONIC us): the intent's commit of an overlapped
	 * kind and the verify hook's waits for it and for the decision */
	int64_t intent_us, gate_wait_us, decide_wait_us;
	/* the withdrawal of the stored decision before a compensating edit
	 * (compensate()), under gate_mu like the decision; one for all the
	 * transaction's devices */
	enum {
		UNDECIDE_NONE,
		UNDECIDE_POSTED,
		UNDECIDE_WRITING,
		UNDECIDE_WITHDRAWN,
		UNDECIDE_DONE
	} undecide;
	int undecide_rc;
	char undecide_error[160]; /* the store's reason, written on the loop */
	struct loop_node undecide_node;
	/* progress (txn_change.progress): the engine's threads keep each
	 * step's latest count and the steps started (bits), and post
	 * progress_node when it is not pending already; the loop tells the
	 * owner, throttled (told_*: what it told last) */
	void (*progress)(void *arg, const struct txn_progress *p);
	atomic_size_t step_done[SB_STEP_COUNT];
	atomic_uint steps_started;
	atomic_bool progress_posted;
	struct loop_node progress_node;
	enum sb_txn_step told_step;
	size_t told_done;
	int64_t told_us;
};

struct txn_driver *txn_driver_new(const struct txn_deps *deps)
{
	struct txn_driver *d = calloc(1, sizeof(*d));

	if (d)
		d->d = *deps;
	return d;
}

void txn_driver_free(struct txn_driver *d)
{
	free(d);
}

void txn_driver_withdraw(struct txn_driver *d)
{
	struct txn *tx = d ? d->running : NULL;

	if (!tx)
		return;
	pthread_mutex_lock(&tx->gate_mu);
	tx->no_decision = true;
	if (tx->decide == DECIDE_POSTED)
		tx->decide = DECIDE_WITHDRAWN; /* the loop writes nothing for it */
	if (tx->undecide == UNDECIDE_POSTED)
		tx->undecide = UNDECIDE_WITHDRAWN;
	pthread_cond_broadcast(&tx->gate_cv);
	pthread_mutex_unlock(&tx->gate_mu);
}

static void free_txn(struct txn *tx)
{
	if (!tx)
		return;
	for (size_t i = 0; tx->targets && i < tx->p.n_devs; i++)
		free(tx->targets[i]);
	free(tx->targets);
	if (tx->kind && tx->kind->free_state)
		tx->kind->free_state(tx->kind_state);
	free(tx->p.devs);
	free(tx->p.dev_ids);
	free(tx->others);
	free(tx->removals);
	free(tx->adds);
	free(tx->on_confirm);
	pthread_mutex_destroy(&tx->gate_mu);
	pthread_cond_destroy(&tx->gate_cv);
	free(tx);
}

/*
 * The verify hook (engine thread): the fabric's check (the L2 checker
 * unless txn_deps.check_xcs says otherwise) on the whole fabric, i.e. the
 * devices of the plan as given plus every other device as stored.
 */
static int verify_xcs(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
		      size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct ocs_fabric *f = tx->drv->d.fabric;
	size_t total = tx->n_others, k = 0;
	struct l2_violation v;
	struct ocs_xc *all;
	int bad;

	for (size_t i = 0; i < n; i++)
		total += devices[i].n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	memcpy(all, tx->others, tx->n_others * sizeof(*all));
	k = tx->n_others;
	for (size_t i = 0; i < n; i++) {
		int id = tx->p.dev_ids[devices[i].index];

		for (size_t x = 0; x < devices[i].n; x++)
			all[k++] = (struct ocs_xc){ocs_fabric_device_group(f, id),
						   ocs_fabric_device_in_group(f, id),
						   devices[i].xcs[x].in, devices[i].xcs[x].out};
	}
	if (tx->drv->d.check_xcs)
		bad = tx->drv->d.check_xcs(tx->drv->d.check_ctx, all, k, &v);
	else
		bad = l2_check(f, all, k, &v, 1);
	free(all);
	if (bad)
		snprintf(why, why_len,
			 "%s: %d L2 violation(s), first on group %d device %d %d->%d: %s",
			 phase == SB_VERIFY_PLAN ? "plan" : "read-back", bad, v.xc.group,
			 v.xc.device, v.xc.in, v.xc.out, v.reason);
	return bad ? -EPROTO : 0;
}

/* Loop thread: stores the decision the confirm gate waits for (unless withdrawn). */
static void on_loop_decide(struct loop_node *n)
{
	struct txn *tx = OCSD_CONTAINER_OF(n, struct txn, decide_node);
	struct st_store *store = tx->drv->d.store;
	int rc;

	pthread_mutex_lock(&tx->gate_mu);
	if (tx->decide == DECIDE_WITHDRAWN) {
		pthread_mutex_unlock(&tx->gate_mu);
		return;
	}
	tx->decide = DECIDE_WRITING;
	pthread_mutex_unlock(&tx->gate_mu);
	rc = st_intent_decide(store, tx->txn_id, clk_wall_ms(tx->drv->d.clock));
	pthread_mutex_lock(&tx->gate_mu);
	if (rc == -EPERM)
		snprintf(tx->decide_error, sizeof(tx->decide_error),
			 "not the leader any more (%s): no confirm", st_strerror(store, rc));
	else if (rc)
		snprintf(tx->decide_error, sizeof(tx->decide_error),
			 "cannot store the decision to commit transaction %lld (%s): no confirm",
			 (long long)tx->txn_id, st_strerror(store, rc));
	tx->decide_rc = rc;
	tx->decide = DECIDE_DONE;
	pthread_cond_broadcast(&tx->gate_cv);
	pthread_mutex_unlock(&tx->gate_mu);
}

/* Loop thread: withdraws the stored decision compensate() waits for (unless withdrawn). */
static void on_loop_undecide(struct loop_node *n)
{
	struct txn *tx = OCSD_CONTAINER_OF(n, struct txn, undecide_node);
	int rc;

	pthread_mutex_lock(&tx->gate_mu);
	if (tx->undecide == UNDECIDE_WITHDRAWN) {
		pthread_mutex_unlock(&tx->gate_mu);
		return;
	}
	tx->undecide = UNDECIDE_WRITING;
	pthread_mutex_unlock(&tx->gate_mu);
	rc = st_intent_undecide(tx->drv->d.store, tx->txn_id);
	pthread_mutex_lock(&tx->gate_mu);
	if (rc)
		snprintf(tx->undecide_error, sizeof(tx->undecide_error), "%s",
			 rc == -EPERM ? "not the leader any more"
				      : st_strerror(tx->drv->d.store, rc));
	tx->undecide_rc = rc;
	tx->undecide = UNDECIDE_DONE;
	pthread_cond_broadcast(&tx->gate_cv);
	pthread_mutex_unlock(&tx->gate_mu);
}

/*
 * hooks.compensate (engine threads): a compensating edit undoes what a
 * device may hold for good. Before the decision to commit was stored that
 * is the transaction's own business. After it, the store says "commit",
 * and whoever recovers the intent finishes it (recovery.c): a replica
 * deposed while its confirms were under way (paused, its sessions killed
 * by the new leader's recovery) would undo the target the new leader has
 * just made durable. So the decision is withdrawn first, by a store write
 * that on etcd is fenced like every other: a replica that does not lead
 * any more cannot, and then sends no compensating edit (its rollback
 * fails: ROLLBACK NOT PROVEN, and the new leader's recovery settles the
 * devices). Asked by the first device; the others wait for its answer.
 */
static int compensate(void *arg, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct txn_deps *d = &tx->drv->d;
	int wait_ms = (d->confirm_timeout_s > 0 ? d->confirm_timeout_s : 30) * 500;
	struct timespec until;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ms / 1000 + 1;
	pthread_mutex_lock(&tx->gate_mu);
	if (tx->decide != DECIDE_DONE || tx->decide_rc != 0) {
		pthread_mutex_unlock(&tx->gate_mu);
		return 0; /* never decided: nothing to withdraw */
	}
	if (tx->undecide == UNDECIDE_NONE) {
		tx->undecide = tx->no_decision ? UNDECIDE_WITHDRAWN : UNDECIDE_POSTED;
		if (tx->undecide == UNDECIDE_POSTED)
			loop_post(d->loop, &tx->undecide_node, on_loop_undecide);
	}
	while (tx->undecide == UNDECIDE_POSTED || tx->undecide == UNDECIDE_WRITING) {
		if (tx->undecide == UNDECIDE_WRITING)
			pthread_cond_wait(&tx->gate_cv, &tx->gate_mu);
		else if (pthread_cond_timedwait(&tx->gate_cv, &tx->gate_mu, &until) == ETIMEDOUT &&
			 tx->undecide == UNDECIDE_POSTED)
			tx->undecide = UNDECIDE_WITHDRAWN;
	}
	rc = tx->undecide == UNDECIDE_DONE ? tx->undecide_rc : -ECANCELED;
	if (rc)
		snprintf(why, why_len,
			 "the decision to commit transaction %lld stands (%s): no compensating "
			 "edit; whoever leads finishes it",
			 (long long)tx->txn_id,
			 rc == -ECANCELED ? "ocsd stopped leading or is stopping"
					  : tx->undecide_error);
	pthread_mutex_unlock(&tx->gate_mu);
	return rc;
}

/*
 * The confirm gate (engine thread): hands st_intent_decide to the loop and
 * waits for its answer. 0: decided, the confirms may go; else the store's
 * code (why set) and no confirm. A decision the loop has not picked up
 * within half the confirm timeout is withdrawn (only a stopped loop is that
 * late; a confirm after the timeout would find every device reverted).
 */
static int decide(struct txn *tx, char *why, size_t why_len)
{
	const struct txn_deps *d = &tx->drv->d;
	int wait_ms = (d->confirm_timeout_s > 0 ? d->confirm_timeout_s : 30) * 500;
	int64_t t0 = clk_mono_us(d->clock);
	struct timespec until;
	bool post;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&tx->gate_mu);
	post = !tx->no_decision;
	tx->decide = post ? DECIDE_POSTED : DECIDE_WITHDRAWN;
	pthread_mutex_unlock(&tx->gate_mu);
	if (post)
		loop_post(d->loop, &tx->decide_node, on_loop_decide);
	pthread_mutex_lock(&tx->gate_mu);
	while (tx->decide == DECIDE_POSTED || tx->decide == DECIDE_WRITING) {
		/* once the loop writes, the store's own timeouts bound the wait */
		if (tx->decide == DECIDE_WRITING)
			pthread_cond_wait(&tx->gate_cv, &tx->gate_mu);
		else if (pthread_cond_timedwait(&tx->gate_cv, &tx->gate_mu, &until) == ETIMEDOUT &&
			 tx->decide == DECIDE_POSTED)
			tx->decide = DECIDE_WITHDRAWN;
	}
	if (tx->decide == DECIDE_WITHDRAWN && tx->no_decision) {
		rc = -ECANCELED;
		snprintf(why, why_len,
			 "ocsd stopped leading or is stopping before the decision to commit was "
			 "stored: no confirm");
	} else if (tx->decide == DECIDE_WITHDRAWN) {
		rc = -ETIMEDOUT;
		snprintf(why, why_len,
			 "the decision to commit was not stored within %d ms (the event loop did "
			 "not take it): no confirm",
			 wait_ms);
	} else {
		rc = tx->decide_rc;
		if (rc)
			snprintf(why, why_len, "%s", tx->decide_error);
	}
	pthread_mutex_unlock(&tx->gate_mu);
	tx->decide_wait_us = clk_mono_us(d->clock) - t0;
	return rc;
}

/*
 * The verify hook: the kind's checks, then, once the devices read back
 * right and only then, the confirm gate's decision: the confirms that
 * follow are sent only once the store holds it (on etcd, in the same etcd
 * transaction as the proof that this replica still leads).
 */
/*
 * An overlapped kind's read-back check waits until its intent is durable
 * (the gate, diagram at the top). 0, or the intent's failure with why set.
 */
static int wait_gate(struct txn *tx, char *why, size_t why_len)
{
	int64_t t0 = clk_mono_us(tx->drv->d.clock);
	int gate;

	pthread_mutex_lock(&tx->gate_mu);
	while (!tx->gate)
		pthread_cond_wait(&tx->gate_cv, &tx->gate_mu);
	gate = tx->gate;
	pthread_mutex_unlock(&tx->gate_mu);
	tx->gate_wait_us = clk_mono_us(tx->drv->d.clock) - t0;
	if (gate < 0) {
		snprintf(why, why_len, "%s", tx->intent_error);
		return gate;
	}
	return 0;
}

static int verify_gated(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
			size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	int rc = 0;

	if (tx->kind && tx->kind->overlapped && phase == SB_VERIFY_READBACK)
		rc = wait_gate(tx, why, why_len);
	if (rc == 0 && tx->kind && tx->kind->verify)
		rc = tx->kind->verify(tx->kind_state, &tx->p, phase, devices, n, why, why_len);
	else if (rc == 0)
		rc = verify_xcs(arg, phase, devices, n, why, why_len);
	if (rc == 0 && phase == SB_VERIFY_READBACK)
		rc = decide(tx, why, why_len);
	return rc;
}

static bool same_device(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return a->group == b->group && a->device == b->device;
}

/*
 * Adds to what the L2 check sees besides the touched devices the unowned
 * two-way circuits of the untouched ones (drift.h). 0 or -ENOMEM.
 */
static int add_unowned_others(struct txn_driver *drv, const char *touched, struct txn *tx)
{
	struct ocs_xc *u = NULL, *all;
	size_t n = 0;

	if (dr_paired_untouched(drv->d.drift, touched, &u, &n) != 0)
		return -ENOMEM;
	all = n ? realloc(tx->others, (tx->n_others + n) * sizeof(*all)) : tx->others;
	if (!all) {
		free(u);
		return -ENOMEM;
	}
	tx->others = all;
	memcpy(tx->others + tx->n_others, u, n * sizeof(*u));
	tx->n_others += n;
	free(u);
	return 0;
}

/* Builds the per-device targets: stored state minus removals plus additions,
 * plus the unowned cross-connects of the device that it does not remove. */
static int build_targets(struct txn_driver *drv, struct txn *tx)
{
	const struct ocs_fabric *f = drv->d.fabric;
	struct fs_state *fs = drv->d.fs;
	int n_dev = ocs_fabric_devices(f);
	char *touched = calloc((size_t)n_dev, 1);
	size_t n = fs_count(fs);

	if (!touched)
		return -ENOMEM;
	for (size_t i = 0; i < tx->n_removals; i++)
		touched[ocs_fabric_device_id(f, tx->removals[i].group, tx->removals[i].device)] = 1;
	for (size_t i = 0; i < tx->n_adds; i++)
		touched[ocs_fabric_device_id(f, tx->adds[i].xc.group, tx->adds[i].xc.device)] = 1;
	for (int d = 0; d < n_dev; d++)
		tx->p.n_devs += touched[d];
	tx->p.devs = calloc(tx->p.n_devs ? tx->p.n_devs : 1, sizeof(*tx->p.devs));
	tx->p.dev_ids = calloc(tx->p.n_devs ? tx->p.n_devs : 1, sizeof(*tx->p.dev_ids));
	tx->targets = calloc(tx->p.n_devs ? tx->p.n_devs : 1, sizeof(*tx->targets));
	tx->others = malloc((n ? n : 1) * sizeof(*tx->others));
	if (!tx->p.devs || !tx->p.dev_ids || !tx->targets || !tx->others)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct ocs_xc *xc = &fs_at(fs, i)->xc;

		if (!touched[ocs_fabric_device_id(f, xc->group, xc->device)])
			tx->others[tx->n_others++] = *xc;
	}
	if (drv->d.drift && add_unowned_others(drv, touched, tx) != 0)
		goto oom;
	for (int d = 0, k = 0; d < n_dev; d++) {
		struct ocs_xc key = {ocs_fabric_device_group(f, d),
				     ocs_fabric_device_in_group(f, d), 0, 0};
		size_t n_run, m = 0, n_unowned = 0;
		const struct st_circuit *run = dev_xcs(drv->d.devs, d, &n_run);
		const struct sb_xc *unowned;
		struct sb_xc *tg;

		if (!touched[d])
			continue;
		unowned = dr_device_unowned(drv->d.drift, d, &n_unowned);
		tg = malloc((n_run + n_unowned + tx->n_adds + 1) * sizeof(*tg));
		if (!tg)
			goto oom;
		for (size_t i = 0; i < n_run; i++) { /* this device's run only */
			const struct ocs_xc *xc = &run[i].xc;
			bool removed = false;

			for (size_t r = 0; r < tx->n_removals && !removed; r++)
				removed = same_device(&tx->removals[r], xc) &&
					  tx->removals[r].in == xc->in;
			if (!removed)
				tg[m++] = (struct sb_xc){(uint16_t)xc->in, (uint16_t)xc->out};
		}
		/* Fail static: what no job owns stays unless the change removes
		 * it, or it is another session's commit that reverts by itself */
		for (size_t i = 0; i < n_unowned; i++) {
			bool removed = dr_reverting(drv->d.drift, d, &unowned[i]);

			for (size_t r = 0; r < tx->n_removals && !removed; r++)
				removed = same_device(&tx->removals[r], &key) &&
					  tx->removals[r].in == unowned[i].in;
			if (!removed)
				tg[m++] = unowned[i];
		}
		for (size_t a = 0; a < tx->n_adds; a++)
			if (same_device(&tx->adds[a].xc, &key))
				tg[m++] = (struct sb_xc){(uint16_t)tx->adds[a].xc.in,
							 (uint16_t)tx->adds[a].xc.out};
		tx->targets[k] = tg;
		tx->p.dev_ids[k] = d;
		tx->p.devs[k] =
			(struct sb_txn_device){.dev = dev_handle(drv->d.devs, d, DEV_ROLE_TXN),
					       .target = tg,
					       .n_target = m};
		k++;
	}
	free(touched);
	return 0;
oom:
	free(touched);
	return -ENOMEM;
}

/* Copies c into tx (the caller's arrays may go away once txn_start returns). */
static int copy_change(struct txn *tx, const struct txn_change *c)
{
	snprintf(tx->job_id, sizeof(tx->job_id), "%s", c->job_id);
	tx->release = c->release;
	tx->removals = malloc((c->n_removals ? c->n_removals : 1) * sizeof(*tx->removals));
	tx->adds = malloc((c->n_additions ? c->n_additions : 1) * sizeof(*tx->adds));
	if (!tx->removals || !tx->adds)
		return -ENOMEM;
	if (c->n_removals)
		memcpy(tx->removals, c->removals, c->n_removals * sizeof(*tx->removals));
	if (c->n_additions)
		memcpy(tx->adds, c->additions, c->n_additions * sizeof(*tx->adds));
	tx->n_removals = c->n_removals;
	tx->n_adds = c->n_additions;
	if (c->n_on_confirm) {
		tx->on_confirm = malloc(c->n_on_confirm * sizeof(*tx->on_confirm));
		if (!tx->on_confirm)
			return -ENOMEM;
		memcpy(tx->on_confirm, c->on_confirm, c->n_on_confirm * sizeof(*tx->on_confirm));
		tx->n_on_confirm = c->n_on_confirm;
	}
	return 0;
}

static void finish(struct txn *tx, const struct sb_txn_result *r);

static void on_loop_done(struct loop_node *n)
{
	struct txn *tx = OCSD_CONTAINER_OF(n, struct txn, done_node);
	struct sb_txn_result r = {.outcome = SB_TXN_COMMITTED};

	if (sb_txn_join(tx->handle, &r) != 0)
		r.outcome = SB_TXN_FAILED;
	finish(tx, &r);
	sb_txn_result_clear(&r);
}

/* Engine thread: hand the completion to the loop; the result is joined there. */
static void on_engine_done(void *arg, const struct sb_txn_result *r)
{
	struct txn *tx = arg;

	(void)r;
	tx->finished_us = clk_mono_us(tx->drv->d.clock);
	loop_post(tx->drv->d.loop, &tx->done_node, on_loop_done);
}

/* On the loop: tells the owner where step stands, unless told already or throttled. */
static void tell_progress(struct txn *tx, enum sb_txn_step step, size_t done, bool step_over)
{
	int64_t now = clk_mono_us(tx->drv->d.clock);
	size_t total = tx->p.n_devs;
	bool same_step = step == tx->told_step;

	if (same_step && done == tx->told_done)
		return;
	if (same_step && !step_over && done < total &&
	    now - tx->told_us < TXN_PROGRESS_INTERVAL_MS * 1000)
		return;
	tx->told_step = step;
	tx->told_done = done;
	tx->told_us = now;
	tx->progress(tx->done_arg,
		     &(struct txn_progress){
			     .txn_id = tx->txn_id, .step = step, .done = done, .total = total});
}

/* On the loop: every step started since the last call, in order; a step
 * followed by another is over (its last device is told). */
static void on_loop_progress(struct loop_node *n)
{
	struct txn *tx = OCSD_CONTAINER_OF(n, struct txn, progress_node);
	unsigned steps;

	atomic_store(&tx->progress_posted, false);
	steps = atomic_load(&tx->steps_started);
	for (int s = tx->told_step > SB_STEP_PREPARE ? (int)tx->told_step : SB_STEP_PREPARE;
	     s < SB_STEP_COUNT; s++)
		if (steps & (1u << s))
			tell_progress(tx, (enum sb_txn_step)s, atomic_load(&tx->step_done[s]),
				      (steps >> (s + 1)) != 0);
}

/* Engine threads (the calls of one transaction one at a time, sb_txn.h):
 * the latest count of the step, posted unless a post is pending. */
static void engine_progress(void *arg, enum sb_txn_step step, size_t done, size_t total)
{
	struct txn *tx = arg;

	(void)total;
	if (step <= SB_STEP_PLAN || step >= SB_STEP_COUNT)
		return;
	atomic_store(&tx->step_done[step], done);
	atomic_fetch_or(&tx->steps_started, 1u << step);
	if (!atomic_exchange(&tx->progress_posted, true))
		loop_post(tx->drv->d.loop, &tx->progress_node, on_loop_progress);
}

/* Hands tx's plan to the engine: 0, or the engine's -errno with nothing touched. */
static int start_engine(struct txn_driver *drv, struct txn *tx)
{
	/* plan.id keys the engine's persist hooks, which the driver does not use:
	 * 0 for an overlapped kind, whose intent is stored after the start */
	tx->plan = (struct sb_txn_plan){(uint64_t)tx->txn_id, tx->p.devs, tx->p.n_devs};
	tx->hooks = (struct sb_txn_hooks){.verify = verify_gated,
					  .compensate = compensate,
					  .progress = tx->progress ? engine_progress : NULL,
					  .arg = tx};
	tx->started_us = clk_mono_us(drv->d.clock);
	tx->opts = (struct sb_txn_options){.confirm_timeout_s = drv->d.confirm_timeout_s,
					   .connect_timeout_ms = drv->d.connect_timeout_ms,
					   .rollback_timeout_ms = drv->d.rollback_timeout_ms};
	return sb_engine_start(drv->d.engine, &tx->plan, &tx->hooks, &tx->opts, on_engine_done, tx,
			       &tx->handle);
}

/* Stores tx's intent: the kind's way, or the cross-connects' (st_intent_begin). */
static int store_intent(struct txn_driver *drv, struct txn *tx, const struct txn_change *c)
{
	if (tx->kind && tx->kind->intent)
		return tx->kind->intent(tx->kind_state, &drv->d, c, &tx->p, &tx->txn_id);
	if (c->n_jobs > 1)
		return st_intent_begin_wave(drv->d.store, c->jobs, c->n_jobs, tx->removals,
					    tx->n_removals, tx->adds, tx->n_adds, c->links,
					    c->n_links, clk_wall_ms(drv->d.clock), &tx->txn_id);
	return st_intent_begin(drv->d.store, tx->job_id, tx->removals, tx->n_removals, tx->adds,
			       tx->n_adds, c->release ? NULL : c->links,
			       c->release ? 0 : c->n_links, clk_wall_ms(drv->d.clock), &tx->txn_id);
}

/*
 * An overlapped kind's transaction on devices: the engine first, then the
 * intent (e.g. with a fault) stored while the devices prepare; the gate tells the
 * verify hook how the commit went (diagram at the top). 0: done() will be
 * called, also when the intent could not be stored (the devices are then
 * rolled back and the outcome says store_failed). Otherwise the engine's
 * -errno, nothing touched and nothing stored.
 */
static int start_overlapped(struct txn_driver *drv, struct txn *tx, const struct txn_change *c,
			    char *why, size_t why_len)
{
	int64_t t0;
	int rc = start_engine(drv, tx);

	if (rc) {
		snprintf(why, why_len, "the transaction could not start (%s); nothing was touched",
			 strerror(-rc));
		return rc;
	}
	t0 = clk_mono_us(drv->d.clock);
	rc = store_intent(drv, tx, c);
	tx->intent_us = clk_mono_us(drv->d.clock) - t0;
	if (rc)
		snprintf(tx->intent_error, sizeof(tx->intent_error),
			 "cannot store the transaction intent (%s): no device was confirmed",
			 st_strerror(drv->d.store, rc));
	pthread_mutex_lock(&tx->gate_mu);
	tx->gate = rc ? (rc < 0 ? rc : -EIO) : 1;
	pthread_cond_broadcast(&tx->gate_cv);
	pthread_mutex_unlock(&tx->gate_mu);
	return 0;
}

int txn_start(void *driver, const struct txn_change *c, txn_done_fn done, void *arg, char *why,
	      size_t why_len)
{
	struct txn_driver *drv = driver;
	struct txn *tx;
	bool overlapped;
	int rc;

	if (drv->running) {
		snprintf(why, why_len, "a transaction is running");
		return -EBUSY;
	}
	tx = calloc(1, sizeof(*tx));
	if (tx) {
		pthread_condattr_t ca;

		tx->kind = c->kind;
		pthread_mutex_init(&tx->gate_mu, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&tx->gate_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (!tx || copy_change(tx, c) != 0 ||
	    (tx->kind && tx->kind->build ? tx->kind->build(&drv->d, c, &tx->p, &tx->kind_state)
					 : build_targets(drv, tx)) != 0) {
		free_txn(tx);
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	tx->drv = drv;
	tx->done = done;
	tx->done_arg = arg;
	tx->progress = c->progress;
	drv->running = tx;
	overlapped = tx->kind && tx->kind->overlapped;
	if (tx->p.n_devs == 0 && !overlapped) {
		/* Nothing to change on any device (e.g. releasing a job without circuits). */
		struct sb_txn_result r = {.outcome = SB_TXN_COMMITTED};

		finish(tx, &r);
		return 0;
	}
	if (overlapped && tx->p.n_devs > 0) {
		rc = start_overlapped(drv, tx, c, why, why_len);
		if (rc) {
			drv->running = NULL;
			free_txn(tx);
		}
		return rc;
	}
	rc = store_intent(drv, tx, c);
	if (rc) {
		snprintf(why, why_len,
			 "cannot store the transaction intent (%s); nothing was touched",
			 st_strerror(drv->d.store, rc));
		drv->running = NULL;
		free_txn(tx);
		return -EIO;
	}
	if (tx->p.n_devs == 0) {
		/* An overlapped kind's change on no device (e.g. a lost ring of
		 * faulty nodes): stored, nothing to program. */
		struct sb_txn_result r = {.outcome = SB_TXN_COMMITTED};

		finish(tx, &r);
		return 0;
	}
	rc = start_engine(drv, tx);
	if (rc) {
		/* Nothing was touched: the intent is closed as rolled back. A failure to
		 * store that leaves it open, and recovery finds the devices unchanged. */
		int st = st_intent_finish(drv->d.store, tx->txn_id, ST_INTENT_ROLLED_BACK,
					  "the transaction could not start",
					  clk_wall_ms(drv->d.clock));

		snprintf(why, why_len, "the transaction could not start (%s)%s", strerror(-rc),
			 st ? "; its intent stays open until the next start" : "");
		drv->running = NULL;
		free_txn(tx);
		return rc;
	}
	return 0;
}

/* Stores the outcome with the circuit change, then reports it (loop thread). */
static void finish(struct txn *tx, const struct sb_txn_result *r)
{
	struct txn_driver *drv = tx->drv;
	struct txn_outcome o = {0};
	enum st_intent_state state;
	const char **names = NULL;
	struct txn_device_fault *faults = NULL;
	char store_error[256] = "";
	bool own_apply;

	switch (r->outcome) {
	case SB_TXN_COMMITTED:
		o.result = TXN_CONFIRMED;
		state = ST_INTENT_CONFIRMED;
		/* the targets left out what was expected to revert (build_targets) */
		for (size_t i = 0; drv->d.drift && i < tx->p.n_devs; i++)
			dr_reverted(drv->d.drift, tx->p.dev_ids[i]);
		break;
	case SB_TXN_REFUSED:
		o.result = TXN_REFUSED;
		state = ST_INTENT_ROLLED_BACK;
		break;
	case SB_TXN_ROLLED_BACK:
		o.result = TXN_ROLLED_BACK;
		state = ST_INTENT_ROLLED_BACK;
		break;
	case SB_TXN_FAILED:
	default:
		o.result = TXN_FAILED;
		state = ST_INTENT_FAILED;
		break;
	}
	if (tx->txn_id) {
		int64_t now = clk_wall_ms(drv->d.clock);
		int rc;

		for (size_t i = 0; i < tx->n_on_confirm; i++)
			tx->on_confirm[i].updated_ms = now;
		rc = st_intent_finish_states(drv->d.store, tx->txn_id, state, r->message, now,
					     tx->on_confirm, tx->n_on_confirm);
		o.states_stored = rc == 0 && state == ST_INTENT_CONFIRMED && tx->n_on_confirm;
		if (rc) {
			o.store_failed = true;
			o.store_rc = rc;
			snprintf(store_error, sizeof(store_error),
				 "cannot store the outcome of transaction %lld (%s)",
				 (long long)tx->txn_id, strerror(-rc));
		}
	}
	if (tx->gate < 0) {
		o.store_failed = true;
		o.store_rc = tx->gate;
		snprintf(store_error, sizeof(store_error), "%s", tx->intent_error);
	}
	own_apply = tx->kind && tx->kind->apply;
	if (own_apply && o.result == TXN_CONFIRMED && !o.store_failed &&
	    tx->kind->apply(tx->kind_state, tx->txn_id, store_error, sizeof(store_error)) != 0) {
		o.store_failed = true;
		o.store_rc = -ENOMEM;
	}
	if (!own_apply && o.result == TXN_CONFIRMED && !o.store_failed &&
	    fs_apply(drv->d.fs, tx->removals, tx->n_removals, tx->adds, tx->n_adds) != 0 &&
	    fs_load(drv->d.fs, drv->d.store) != 0) {
		o.store_failed = true;
		o.store_rc = -ENOMEM;
		snprintf(store_error, sizeof(store_error),
			 "cannot apply transaction %lld to the circuit table in memory, nor reload "
			 "it from the store",
			 (long long)tx->txn_id);
	}
	if (!own_apply && o.store_failed && fs_load(drv->d.fs, drv->d.store) != 0)
		snprintf(store_error + strlen(store_error),
			 sizeof(store_error) - strlen(store_error),
			 "; the circuit table could not be reloaded");
	names = calloc(tx->p.n_devs ? tx->p.n_devs : 1, sizeof(*names));
	for (size_t i = 0; names && i < tx->p.n_devs; i++)
		names[i] = sb_device_name(tx->p.devs[i].dev);
	faults = calloc(r->n_devices ? r->n_devices : 1, sizeof(*faults));
	for (size_t i = 0; faults && i < r->n_devices && i < tx->p.n_devs; i++) {
		const struct sb_txn_device_result *dr = &r->devices[i];

		if (dr->failed_step == SB_STEP_NONE && dr->outcome != SB_DEV_ROLLBACK_FAILED)
			continue;
		faults[o.n_faults++] = (struct txn_device_fault){
			.dev = tx->p.dev_ids[i],
			.answered = dr->failed_step == SB_STEP_NONE || dr->error.code == -EREMOTEIO,
			.unproven = dr->outcome == SB_DEV_ROLLBACK_FAILED};
	}
	o.faults = faults;
	o.txn_id = (uint64_t)tx->txn_id;
	o.message = r->message;
	o.rollback_failures = r->n_rollback_failures;
	o.total_ms = r->total_ms;
	o.devices = names;
	o.n_devices = names ? tx->p.n_devs : 0;
	o.store_error = store_error;
	o.finished_us = tx->finished_us ? tx->finished_us : clk_mono_us(drv->d.clock);
	o.started_us = tx->started_us;
	/* the devices' time: a wait for the intent or the decision is the controller's */
	o.engine_us = tx->finished_us ? tx->finished_us - tx->started_us - tx->gate_wait_us -
						tx->decide_wait_us
				      : 0;
	if (tx->kind && tx->kind->overlapped && tx->handle)
		log_msg(LOG_INFO,
			"transaction %lld (job %s%s) profile: intent commit %lld us (overlapped), "
			"verify "
			"waited %lld us for it, engine %lld us (prepare %lld, commit %lld, verify "
			"%lld, confirm %lld ms)",
			(long long)tx->txn_id, tx->job_id,
			tx->kind->profile_note ? tx->kind->profile_note(tx->kind_state) : "",
			(long long)tx->intent_us, (long long)tx->gate_wait_us,
			(long long)o.engine_us, (long long)r->step_ms[SB_STEP_PREPARE],
			(long long)r->step_ms[SB_STEP_COMMIT],
			(long long)r->step_ms[SB_STEP_VERIFY],
			(long long)r->step_ms[SB_STEP_CONFIRM]);
	drv->running = NULL;
	tx->done(tx->done_arg, &o);
	free(names);
	free(faults);
	free_txn(tx);
}
