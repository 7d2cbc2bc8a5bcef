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
 * A ring transaction stores its intent (and the fault that started it)
 * WHILE the devices prepare, instead of before: the SQLite commit
 * (synchronous=FULL, an fsync of a few ms) was the largest part of the
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
 * Switch (circuit) and rail transactions store the intent before the
 * engine starts, then pass the same decision.
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
#include "rail_swap.h"
#include "rings.h"
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
	/* the southbound plan */
	struct sb_txn_device *devs;
	int *dev_ids; /* global device id of devs[i] */
	struct sb_xc **targets;
	size_t n_devs;
	struct ocs_xc *others; /* cross-connects on devices outside the plan */
	size_t n_others;
	struct sb_txn_plan plan;
	struct sb_txn_hooks hooks;
	struct sb_txn_options opts;
	struct sb_txn_handle *handle;
	struct loop_node done_node; /* posts on_loop_done to the loop */
	int64_t started_us, finished_us;
	/* ring transactions: the job's rings afterwards, per device the
	 * planned settings (hbd), and per node whether an external path may
	 * reach it (a healthy node of this job's new rings) */
	bool ring;
	struct rg_ring *rings;
	size_t n_rings;
	struct sb_bundle **sb_targets;
	struct hbd_bundle **hbd_targets;
	bool *reachable;
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
	/* the profile (CLOCK_MONOTONIC us): the intent's commit of a ring
	 * transaction and the verify hook's waits for it and for the decision */
	int64_t intent_us, gate_wait_us, decide_wait_us;
	bool fault; /* a repair that stores its fault with the intent */
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
	for (size_t i = 0; i < tx->n_devs; i++) {
		free(tx->targets[i]);
		if (tx->sb_targets)
			free(tx->sb_targets[i]);
		if (tx->hbd_targets)
			free(tx->hbd_targets[i]);
	}
	free(tx->targets);
	free(tx->sb_targets);
	free(tx->hbd_targets);
	free(tx->reachable);
	rg_rings_free(tx->rings, tx->n_rings);
	free(tx->devs);
	free(tx->dev_ids);
	free(tx->others);
	free(tx->removals);
	free(tx->adds);
	pthread_mutex_destroy(&tx->gate_mu);
	pthread_cond_destroy(&tx->gate_cv);
	free(tx);
}

/*
 * The verify hook (engine thread): the L2 checker on the whole fabric, i.e.
 * the devices of the plan as given plus every other device as stored.
 */
static int verify_l2(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
		     size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct ocs_fabric *f = tx->drv->d.fabric;
	size_t total = tx->n_others, k = 0;
	struct l2_violation v;
	struct rail_violation rv;
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
		int id = tx->dev_ids[devices[i].index];

		for (size_t x = 0; x < devices[i].n; x++)
			all[k++] = (struct ocs_xc){ocs_fabric_device_group(f, id),
						   ocs_fabric_device_in_group(f, id),
						   devices[i].xcs[x].in, devices[i].xcs[x].out};
	}
	if (tx->drv->d.rail) {
		bad = rail_check_xcs(tx->drv->d.rail, all, k, &rv, 1);
		v = (struct l2_violation){.xc = {0, 0, 0, 0}, .reason = "out of memory"};
		if (bad > 0) {
			v.xc = rv.xc;
			snprintf(v.reason, sizeof(v.reason), "%s", rv.reason);
		}
	} else {
		bad = l2_check(f, all, k, &v, 1);
	}
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
static int verify_rings(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
			size_t n, char *why, size_t why_len);

static int verify_gated(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
			size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	int rc = tx->ring ? verify_rings(arg, phase, devices, n, why, why_len)
			  : verify_l2(arg, phase, devices, n, why, why_len);

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
		tx->n_devs += touched[d];
	tx->devs = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->devs));
	tx->dev_ids = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->dev_ids));
	tx->targets = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->targets));
	tx->others = malloc((n ? n : 1) * sizeof(*tx->others));
	if (!tx->devs || !tx->dev_ids || !tx->targets || !tx->others)
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
		/* Fail static: what no job owns stays unless the change removes it. */
		for (size_t i = 0; i < n_unowned; i++) {
			bool removed = false;

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
		tx->dev_ids[k] = d;
		tx->devs[k] =
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

/*
 * The verify hook of a ring transaction (engine thread, on the copies made
 * at the start): every external path of every node reaches the node the
 * plan says, and that node is a healthy node of this job's new rings.
 */
static int verify_rings(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
			size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct rg_state *rg = tx->drv->d.rings;
	int bundles = rg_domain(rg)->bundles;

	if (phase == SB_VERIFY_READBACK) {
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
	}
	for (size_t i = 0; i < n; i++) {
		int node = tx->dev_ids[devices[i].index];
		const struct hbd_bundle *plan = tx->hbd_targets[devices[i].index];

		for (size_t b = 0; b < devices[i].n_bundles; b++) {
			const struct sb_bundle_state *st = &devices[i].bundles[b];
			int want = st->set.bundle < bundles ? plan[st->set.bundle].peer : -1;
			int got = phase == SB_VERIFY_PLAN ? want : st->peer_node;

			if (phase == SB_VERIFY_READBACK && got != want) {
				snprintf(why, why_len,
					 "read-back: node %d bundle %u reaches node %d, the plan "
					 "says %d",
					 node, st->set.bundle, got, want);
				return -EPROTO;
			}
			if (got >= 0 && (got >= rg_nodes(rg) || !tx->reachable[got])) {
				snprintf(why, why_len,
					 "%s: node %d bundle %u points at node %d, which is faulty "
					 "or "
					 "not in a ring of job %s",
					 phase == SB_VERIFY_PLAN ? "plan" : "read-back", node,
					 st->set.bundle, got, tx->job_id);
				return -EPROTO;
			}
		}
	}
	return 0;
}

/*
 * The per-node targets of a ring transaction: for every node the change
 * names (in order of first mention), every bundle as the ring state has
 * it with the change's settings applied. Faulty nodes are skipped.
 */
static int build_ring_targets(struct txn_driver *drv, struct txn *tx, const struct txn_change *c)
{
	const struct rg_state *rg = drv->d.rings;
	int n_nodes = rg_nodes(rg), bundles = rg_domain(rg)->bundles;
	int *slot = malloc((size_t)(n_nodes + 1) * sizeof(*slot));
	size_t cap = c->n_bundles + 1;

	tx->devs = calloc(cap, sizeof(*tx->devs));
	tx->dev_ids = calloc(cap, sizeof(*tx->dev_ids));
	tx->targets = calloc(cap, sizeof(*tx->targets));
	tx->sb_targets = calloc(cap, sizeof(*tx->sb_targets));
	tx->hbd_targets = calloc(cap, sizeof(*tx->hbd_targets));
	tx->reachable = calloc((size_t)n_nodes + 1, sizeof(*tx->reachable));
	if (!slot || !tx->devs || !tx->dev_ids || !tx->targets || !tx->sb_targets ||
	    !tx->hbd_targets || !tx->reachable)
		goto oom;
	for (int i = 0; i < n_nodes; i++)
		slot[i] = -1;
	for (size_t r = 0; r < c->n_rings; r++)
		for (int k = 0; k < c->rings[r].m; k++) {
			int node = c->rings[r].nodes[k];

			if (node >= 0 && node < n_nodes)
				tx->reachable[node] = !rg_faulty(rg, node);
		}
	for (size_t i = 0; i < c->n_bundles; i++) {
		const struct hbd_bundle *b = &c->bundles[i];
		int node = b->node;

		if (node < 0 || node >= n_nodes || b->bundle >= bundles || rg_faulty(rg, node))
			continue;
		if (slot[node] < 0) {
			size_t k = tx->n_devs++;

			slot[node] = (int)k;
			tx->dev_ids[k] = node;
			tx->hbd_targets[k] = malloc((size_t)bundles * sizeof(struct hbd_bundle));
			tx->sb_targets[k] = malloc((size_t)bundles * sizeof(struct sb_bundle));
			if (!tx->hbd_targets[k] || !tx->sb_targets[k] ||
			    rg_node_bundles(rg, node, tx->hbd_targets[k]) != 0)
				goto oom;
		}
		tx->hbd_targets[slot[node]][b->bundle] = *b;
	}
	for (size_t k = 0; k < tx->n_devs; k++) {
		for (int b = 0; b < bundles; b++) {
			const struct hbd_bundle *h = &tx->hbd_targets[k][b];

			tx->sb_targets[k][b] =
				(struct sb_bundle){h->bundle, h->path, h->distance, h->dir};
		}
		tx->devs[k] = (struct sb_txn_device){
			dev_handle(drv->d.devs, tx->dev_ids[k], DEV_ROLE_TXN), NULL, 0,
			tx->sb_targets[k], (size_t)bundles};
	}
	tx->rings = rg_rings_dup(c->rings, c->n_rings);
	if (!tx->rings)
		goto oom;
	tx->n_rings = c->n_rings;
	free(slot);
	return 0;
oom:
	free(slot);
	return -ENOMEM;
}

/* Stores a ring transaction's intent: its rings and every target setting. */
static int ring_intent(struct txn_driver *drv, struct txn *tx, const struct st_fault *fault)
{
	int bundles = rg_domain(drv->d.rings)->bundles;
	size_t n = tx->n_devs * (size_t)bundles, at = 0;
	struct st_bundle *b = malloc((n ? n : 1) * sizeof(*b));
	int rc;

	if (!b)
		return -ENOMEM;
	for (size_t k = 0; k < tx->n_devs; k++)
		for (int i = 0; i < bundles; i++) {
			const struct hbd_bundle *h = &tx->hbd_targets[k][i];

			b[at++] = (struct st_bundle){tx->dev_ids[k], h->bundle, h->path,
						     h->distance, h->dir};
		}
	rc = st_ring_intent_begin(drv->d.store, tx->job_id, tx->rings, tx->n_rings, b, n, fault,
				  clk_wall_ms(drv->d.clock), &tx->txn_id);
	free(b);
	return rc;
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

/* Hands tx's plan to the engine: 0, or the engine's -errno with nothing touched. */
static int start_engine(struct txn_driver *drv, struct txn *tx)
{
	/* plan.id keys the engine's persist hooks, which the driver does not use:
	 * 0 for a ring transaction, whose intent is stored after the start */
	tx->plan = (struct sb_txn_plan){(uint64_t)tx->txn_id, tx->devs, tx->n_devs};
	tx->hooks = (struct sb_txn_hooks){NULL, NULL, verify_gated, compensate, tx};
	tx->started_us = clk_mono_us(drv->d.clock);
	tx->opts = (struct sb_txn_options){.confirm_timeout_s = drv->d.confirm_timeout_s,
					   .connect_timeout_ms = drv->d.connect_timeout_ms,
					   .rollback_timeout_ms = drv->d.rollback_timeout_ms};
	return sb_engine_start(drv->d.engine, &tx->plan, &tx->hooks, &tx->opts, on_engine_done, tx,
			       &tx->handle);
}

/*
 * A ring transaction on healthy nodes: the engine first, then the intent
 * (and the fault) stored while the devices prepare; the gate tells the
 * verify hook how the commit went (diagram at the top). 0: done() will be
 * called, also when the intent could not be stored (the devices are then
 * rolled back and the outcome says store_failed). Otherwise the engine's
 * -errno, nothing touched and nothing stored.
 */
static int start_overlapped(struct txn_driver *drv, struct txn *tx, const struct st_fault *fault,
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
	tx->fault = fault != NULL;
	rc = ring_intent(drv, tx, fault);
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
	int rc;

	if (drv->running) {
		snprintf(why, why_len, "a transaction is running");
		return -EBUSY;
	}
	tx = calloc(1, sizeof(*tx));
	if (tx) {
		pthread_condattr_t ca;

		tx->ring = c->ring && drv->d.rings;
		pthread_mutex_init(&tx->gate_mu, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&tx->gate_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (!tx || copy_change(tx, c) != 0 ||
	    (tx->ring ? build_ring_targets(drv, tx, c) : build_targets(drv, tx)) != 0) {
		free_txn(tx);
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	tx->drv = drv;
	tx->done = done;
	tx->done_arg = arg;
	drv->running = tx;
	if (tx->n_devs == 0 && !tx->ring) {
		/* Nothing to change on any device (e.g. releasing a job without circuits). */
		struct sb_txn_result r = {.outcome = SB_TXN_COMMITTED};

		finish(tx, &r);
		return 0;
	}
	if (tx->ring && tx->n_devs > 0) {
		rc = start_overlapped(drv, tx, c->fault, why, why_len);
		if (rc) {
			drv->running = NULL;
			free_txn(tx);
		}
		return rc;
	}
	if (tx->ring)
		rc = ring_intent(drv, tx, c->fault);
	else if (c->rail_swap)
		rc = st_rail_intent_begin(drv->d.store, tx->removals, tx->n_removals, tx->adds,
					  tx->n_adds, c->rail_swap, clk_wall_ms(drv->d.clock),
					  &tx->txn_id);
	else
		rc = st_intent_begin(drv->d.store, tx->job_id, tx->removals, tx->n_removals,
				     tx->adds, tx->n_adds, c->release ? NULL : c->links,
				     c->release ? 0 : c->n_links, clk_wall_ms(drv->d.clock),
				     &tx->txn_id);
	if (rc) {
		snprintf(why, why_len,
			 "cannot store the transaction intent (%s); nothing was touched",
			 st_strerror(drv->d.store, rc));
		drv->running = NULL;
		free_txn(tx);
		return -EIO;
	}
	if (tx->n_devs == 0) {
		/* A ring change on no healthy node (e.g. a lost ring of faulty nodes):
		 * stored, nothing to program. */
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
	char store_error[256] = "";

	switch (r->outcome) {
	case SB_TXN_COMMITTED:
		o.result = TXN_CONFIRMED;
		state = ST_INTENT_CONFIRMED;
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
		int rc = st_intent_finish(drv->d.store, tx->txn_id, state, r->message,
					  clk_wall_ms(drv->d.clock));

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
	if (tx->ring && o.result == TXN_CONFIRMED && !o.store_failed &&
	    rg_set_job_rings(drv->d.rings, tx->job_id, tx->rings, tx->n_rings) != 0) {
		o.store_failed = true;
		o.store_rc = -ENOMEM;
		snprintf(store_error, sizeof(store_error),
			 "cannot apply transaction %lld to the ring state in memory",
			 (long long)tx->txn_id);
	}
	if (!tx->ring && o.result == TXN_CONFIRMED && !o.store_failed &&
	    fs_apply(drv->d.fs, tx->removals, tx->n_removals, tx->adds, tx->n_adds) != 0 &&
	    fs_load(drv->d.fs, drv->d.store) != 0) {
		o.store_failed = true;
		o.store_rc = -ENOMEM;
		snprintf(store_error, sizeof(store_error),
			 "cannot apply transaction %lld to the circuit table in memory, nor reload "
			 "it from the store",
			 (long long)tx->txn_id);
	}
	if (!tx->ring && o.store_failed && fs_load(drv->d.fs, drv->d.store) != 0)
		snprintf(store_error + strlen(store_error),
			 sizeof(store_error) - strlen(store_error),
			 "; the circuit table could not be reloaded");
	names = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*names));
	for (size_t i = 0; names && i < tx->n_devs; i++)
		names[i] = sb_device_name(tx->devs[i].dev);
	o.txn_id = (uint64_t)tx->txn_id;
	o.message = r->message;
	o.rollback_failures = r->n_rollback_failures;
	o.total_ms = r->total_ms;
	o.devices = names;
	o.n_devices = names ? tx->n_devs : 0;
	o.store_error = store_error;
	o.finished_us = tx->finished_us ? tx->finished_us : clk_mono_us(drv->d.clock);
	/* the devices' time: a wait for the intent or the decision is the controller's */
	o.engine_us = tx->finished_us ? tx->finished_us - tx->started_us - tx->gate_wait_us -
						tx->decide_wait_us
				      : 0;
	if (tx->ring && tx->handle)
		log_msg(LOG_INFO,
			"transaction %lld (job %s%s) profile: intent commit %lld us (overlapped), "
			"verify "
			"waited %lld us for it, engine %lld us (prepare %lld, commit %lld, verify "
			"%lld, confirm %lld ms)",
			(long long)tx->txn_id, tx->job_id, tx->fault ? ", fault repair" : "",
			(long long)tx->intent_us, (long long)tx->gate_wait_us,
			(long long)o.engine_us, (long long)r->step_ms[SB_STEP_PREPARE],
			(long long)r->step_ms[SB_STEP_COMMIT],
			(long long)r->step_ms[SB_STEP_VERIFY],
			(long long)r->step_ms[SB_STEP_CONFIRM]);
	drv->running = NULL;
	tx->done(tx->done_arg, &o);
	free(names);
	free_txn(tx);
}
