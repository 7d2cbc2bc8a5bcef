/*
 * sb_txn.c - the transaction engine (API and threading in sb_txn.h): the
 * engine, the driver that runs a transaction's steps over its devices, and
 * the owner's side (start, join, run). What one device does in each step
 * is in sb_txn_dev.c; what the two share, in sb_txn_internal.h.
 *
 * Transaction state machine (one per sb_engine_run call):
 *
 *     NEW --plan check / intent hook refuse--> REFUSED            (no I/O)
 *      |
 *      v
 *   PREPARING --any device fails--> ABORTING (discard + unlock all,
 *      | all prepared                 read back) ----------------+
 *      v                                                         |
 *   COMMITTING --any fails--+                                    |
 *      | all committed      |                                    |
 *      v                    v                                    v
 *   VERIFYING --fails--> ROLLING_BACK (cancel-commit or      ROLLED_BACK
 *      | read-back ok       ^   compensating edit, then        (every device
 *      | + L2 check ok      |   read every device back) ---->  proven at its
 *      v                    |                         \         pre-image)
 *   CONFIRMING --fails------+                          \
 *      | all confirmed                                  +--> FAILED (some
 *      v                                                     rollback not proven)
 *   COMMITTED
 *
 * Per device: IDLE -> LOCKED -> EDITED -> COMMITTED(unconfirmed) ->
 * VERIFIED -> CONFIRMED, or from any of them -> ROLLED_BACK / ROLLBACK_FAILED.
 *
 * Per model, only what a device holds differs; the steps, the diagram and
 * the invariants are the same:
 *   ocs-switch       the cross-connects (sb_xc); the edit removes inputs
 *                    the target drops, then adds or changes the rest; read
 *                    back until every connection is `connected` (`failed`
 *                    or `invalid` fails at once).
 *   ocs-transceiver  the bundles of the device's node (sb_bundle); the edit
 *                    replaces the node's entry with the target, and so does
 *                    the compensating edit with the pre-image; read back
 *                    until every selected path is `active`; a `failed`
 *                    path (peer down, loss of light) or a faulty node fails
 *                    at once. The verify callback gets the bundles with the
 *                    peer-node each one reaches.
 *   polatis          like ocs-switch: cross-connects (sb_xc) written as
 *                    Polatis pairs ingress -> egress through the device's
 *                    port map; the read-back asks for the pairs alone and
 *                    a pair present reads `connected`: the model has no
 *                    status per pair, and port health is not part of I4
 *                    here. It reaches ocsd through the device's own
 *                    reports (the info read and port-power alarms,
 *                    sb_model.c), which keep failed ports out of plans,
 *                    as a peer controller's Polatis driver reads its flow
 *                    rules from the pairs alone (southbound/README.md).
 * What a model writes and reads comes from its entry in sb_model.h. Which
 * of the paths below a device takes comes from the capabilities of its
 * <hello> (sb_device_strategy), never from its model: a Polatis switch
 * offers :writable-running without :candidate, so it takes the
 * writable-running path, as any device of any model would.
 *
 * RPCs per device and why each one is needed ([validate] only when
 * sb_device_should_validate(); k read-backs, usually 1 when the device's
 * config gives its switch time, since the first one waits for it):
 *
 *   confirmed-commit (candidate + :confirmed-commit:1.1), 6-7 + k - 1
 *   (one more on a fresh session):
 *     lock candidate      I6; a granted lock means candidate == running, so
 *                         no discard-changes (RFC 6241 7.5)
 *     [get-config]        the pre-image, only on a fresh session or after
 *                         sb_device_forget_image(); otherwise the session's
 *                         last verified image (S1)
 *     edit-config         the one edit, pre-image -> target (removals first)
 *     [validate]          I2 made cheap to undo: a device that would refuse
 *                         its commit does so before any device switches light;
 *                         sent in one write with the edit (P1 below)
 *     commit confirmed    the change, reverted by the device if ocsd dies (I3)
 *     get x k             I4: every connection `connected`, nothing else held
 *     commit              confirms (only the committing session can)
 *     unlock              I6
 *   candidate only, 6-7 + k - 1: lock, get-config (always: the rollback is a
 *     compensating edit, which must come from running as read now), edit,
 *     [validate], commit, get x k, unlock.
 *   writable-running only, 5 + k - 1: lock running, get-config (as above),
 *     edit running at commit time, get x k, unlock.
 *     What this path guarantees when ocsd dies mid-transaction, and what
 *     it cannot (there is no dead-man switch on such a device):
 *      W1. Dead before the commit step: nothing was written anywhere; the
 *          lock on running ends with the session.
 *      W2. Dead after some devices' edit of running: those devices hold
 *          the target for good and the others the pre-image. The device
 *          cannot revert by itself, so it is on the next start: the
 *          intent was stored before any device was touched (I1), and
 *          recovery reads every device it names back; a transaction never
 *          decided whose devices all hold the target or the pre-image is
 *          rolled back there by a compensating edit from the pre-image
 *          (daemon/txn/recovery.c), so the job ends with nothing changed.
 *      W3. What no protocol on such a device can give: between the death
 *          and the next start (or a replica's takeover) the devices that
 *          were edited carry light the store does not yet own; and a
 *          device without :rollback-on-error (which ocsd asks for where
 *          offered) may apply part of an edit it then refuses (RFC 6241
 *          stop-on-error): while ocsd lives the read-back and the
 *          compensating edit cover that, after its death recovery does.
 *   Rollback adds: cancel-commit (unconfirmed), discard-changes, get-config
 *     (the proof), and when running is not the pre-image a compensating
 *     edit + commit + get-config.
 *
 * Pipelined pairs (issue 13): RFC 6241 lets a client send several <rpc>s
 * before their replies; the server answers them in order and runs each as
 * if it had come alone. sb_device sends a pair in one write and reads both
 * replies in order (message-ids checked, sb_wire.h); a failed first RPC
 * does not stop the second, which was already sent, so a pair is safe only
 * when the second RPC is harmless whatever the first one's outcome:
 *  P1. edit-config + validate (when validate is sent): one round trip
 *      instead of two. validate only checks the candidate and changes no
 *      datastore. If the edit is refused (or only partly applied), the
 *      validate answer is read and ignored, the device fails prepare with
 *      the edit's error as before, and the rollback discards the candidate
 *      under our lock (d->edited is set before the pair is sent). If the
 *      session drops on either, nothing was committed: R1's retry starts
 *      over from the lock. A hung edit holds the validate behind it: the
 *      deadline covers both and the session is dropped as before.
 * Pairs refused, and why:
 *  - lock + edit-config (or + get-config + edit): a refused lock means
 *    another session holds the candidate, or left it modified; the edit
 *    would then merge our changes into that foreign candidate.
 *  - validate + commit: I2 - no device may commit before every device has
 *    validated; pipelining would commit a device whose neighbours may still
 *    refuse, switching light briefly for nothing.
 *  - commit (confirming) + unlock: the same two RPCs when the confirm
 *    succeeds, but when it is refused (the device lost or never took our
 *    confirmed commit, or refuses the confirm) the unlock would release the
 *    candidate lock while that confirmed commit may still be pending and
 *    before the rollback's cancel-commit and discard: another manager could
 *    lock and edit the candidate in that window, and the rollback would
 *    need a new lock for its compensating edit (I6 holds the lock through
 *    the rollback). Saving one round trip after the light has switched does
 *    not pay for that window; it stays two round trips.
 *  - commit confirmed + get: safe (get only reads; its answer is ignored
 *    when the commit fails, and I4 still waits for every device's read-back
 *    before any confirm), but useless on a device that takes any time to
 *    switch: a get answered right behind the commit finds the connections
 *    still pending and costs a second read (the first get waits for
 *    switch_us instead). It would pay only with switch_us 0, which no real
 *    OCS or transceiver has; not done.
 *  - lock + get-config on a fresh session would be safe (get-config reads
 *    only, its answer is ignored when the lock fails) but happens once per
 *    session; not done, to keep one pipelined path.
 *
 * Pre-images from the session's image (sb_device.h: sb_device_image_*):
 *  S1. The image is what running held when this session last proved it by
 *      a read: a pre-image read, a read-back equal to the target that was
 *      then confirmed, a rollback proven by a read. A reconnect drops it;
 *      so does sb_device_forget_image() (reconciliation saw drift).
 *  S2. A stale image (the device changed behind ocsd's back) never feeds a
 *      compensating edit: when the rollback reads running neither at the
 *      image nor at our target, the image is forgotten, the device result
 *      says stale_image, and no edit is sent; an unconfirmed device has
 *      undone our commit itself (cancel-commit or the session's end), a
 *      confirmed one fails its rollback with that reason (reconcile it).
 *  S3. Most drift fails the transaction before any confirm: the edit is
 *      built from the image, so an entry added, removed or changed behind
 *      ocsd's back that the edit does not rewrite shows in the read-back,
 *      which must equal the target exactly. Drift confined to entries the
 *      edit rewrites is overwritten by the transaction and invisible to
 *      it; a compensating edit after a failed confirm elsewhere would then
 *      restore the image's value there. Only the reconciliation's
 *      sb_device_forget_image() closes that window. A transceiver's edit
 *      replaces its node's entry, so there the read-back sees no drift at
 *      all and S2 and the reconciliation are what catch it.
 *  S4. A confirmed-commit device whose commit was never confirmed (no
 *      confirm sent) and whose committing session is gone (R2: the device
 *      reverted that commit when it ended) gets no compensating edit even
 *      when running shows the target: it is another session's (a new
 *      leader that fenced ours off and programmed the same target,
 *      daemon/txn/recovery.c), not ours.
 *
 * Invariants (each one is exercised by tests/integration/test_sb_txn*.c):
 *  I1. No device receives any RPC before the plan passed the verify
 *      callback (SB_VERIFY_PLAN) and persist_intent returned 0.
 *  I2. No device commits before every device of the plan prepared.
 *  I3. On a device with :confirmed-commit every commit of step 2 is a
 *      confirmed commit with the timeout and without persist, so it
 *      belongs to the session: if ocsd dies (or gives up on a hung RPC and
 *      closes the session) the device reverts at once, and if the peer
 *      falls silent it reverts when the timeout expires.
 *  I4. No device is confirmed before every device was read back holding
 *      exactly its target with every connection `connected` (every path
 *      `active`) and the verify
 *      callback passed on what was read (SB_VERIFY_READBACK).
 *  I5. After any failure every device the transaction touched is rolled
 *      back and read back (retrying until rollback_timeout_ms while a stale
 *      session of ours, stuck in a hung RPC, still holds the candidate
 *      lock). Devices already confirmed get a compensating edit from their
 *      pre-image, unless hooks.compensate refuses it (the daemon: the
 *      transaction's decision to commit can no longer be withdrawn, its
 *      replica being deposed; the new leader finishes it), which fails
 *      that device's rollback at once. The outcome is ROLLED_BACK only when
 *      every read-back equals the pre-image, FAILED otherwise, with the
 *      device and the reason in the result. Nothing is only logged.
 *  I6. Running is never locked across a confirmed commit; the candidate
 *      lock taken in step 1 is released on every path (or dies with the
 *      session).
 *  I7. persist_outcome runs exactly once for every transaction that got
 *      past the plan check, after the last device I/O.
 *
 * Dead sessions (issue 14 finding 6: a device that restarted under an idle
 * session):
 *  R1. Before a device's first RPC of a transaction its session is checked
 *      without an RPC (sb_device_connect: the socket closed or failed) and
 *      replaced when dead. A session lost during step 1 anyway is retried
 *      once, from the lock, on a fresh session (prepare_retried in the
 *      device's result; one discard-changes after the lock): nothing was
 *      committed there, and the lost session's lock ended with it.
 *  R2. Never after a commit was sent: from step 2 on a lost session is a
 *      failure and the transaction rolls back (a confirmed commit belongs
 *      to the session that made it; the device reverts it when that
 *      session ends, and the rollback reads it back on a new one).
 *  R3. When the rollback cannot reach a device before rollback_timeout_ms,
 *      the outcome is FAILED (ROLLBACK NOT PROVEN) with the device in the
 *      result: ocsd cannot prove what a device it cannot read holds. On a
 *      confirmed-commit device it has reverted by itself (the session
 *      ended, or the confirm timeout passed); the caller must read it
 *      again once it is back (the daemon settles the transaction's intent
 *      then, see daemon/README.md).
 *  R4. A device without :confirmed-commit whose session was lost after
 *      our edit of running (or our plain commit) was sent: that change is
 *      for good once it lands, and an RPC of the lost session may still be
 *      running there. The rollback takes the datastore's lock before it
 *      reads (the stale session holds it until it ends; refused
 *      meanwhile, retried until rollback_timeout_ms), so the read it
 *      proves the rollback with is final (tests/integration/
 *      test_daemon_polatis.py, the late edit: before, a hung edit landed
 *      after a rollback "proven" on running still at the pre-image).
 *
 * Threads: continuations, not waits. Everything runs as tasks on the
 * engine's executor (sb_exec.h) and no task ever waits for another, so the
 * executor cannot deadlock whatever its thread count. sb_engine_start()
 * submits the transaction's first task (plan check, intent hook). Steps 1-4
 * submit one task per slice of devices (every device in one slice unless
 * opts.devices_per_loop; loop_slice): the task runs its devices' step
 * functions as coroutines of one loop (sb_exec_loop) on its thread. Each
 * coroutine is the same blocking code as before: it sends its RPC, and
 * where it would wait for the reply (sb_wire's read, sb_exec_wait_fd) or
 * sleep (the switch time, the read-back polls: sb_exec_sleep_until_us) it
 * yields, so all the slice's RPCs leave before the first reply is read and
 * one epoll wake-up serves every reply that has arrived: no thread
 * hand-off per device and round trip (issue 13, fourth pass). The steps,
 * the RPCs, their order per device, their deadlines and every invariant
 * above are those of the per-device code; only who waits changed.
 *
 *     step k:  slice task ── loop ──┬─ dev 0: lock ..wait.. reply ─ edit+validate ..
 *                                   ├─ dev 1: lock ..wait.. reply ─ ...
 *                                   └─ dev n: ...        (one epoll for all)
 *              a device that must connect (or whose claim a keepalive
 *              holds) ── wants_thread ──> hand_off() ──> its own task,
 *                                                        blocking as before
 *              last slice / task to end ──> step_done() ──> step k+1
 *
 * Blocking that does not go through the two yields blocks the whole loop:
 * a connect. So prepare hands a device without a live session (and one a
 * keepalive holds) to a task of its own (the job sets wants_thread and
 * returns, the coroutine calls hand_off; `remaining` counts the task
 * before the coroutine ends), and the rollback - reconnects, retries
 * with sleeps until rollback_timeout_ms - keeps a task per device. A
 * session found dead by sb_device_connect()'s idle check, and R1's retry
 * after a session lost in prepare, reconnect inside the loop (rare;
 * the other devices' replies wait in their sockets meanwhile, and are
 * read even if their deadline passed during it: only a wait times out).
 * opts.thread_per_device runs every step as one task per device, each
 * dev_ctx's embedded task, which every device task decrements from
 * `remaining`; the last one runs step_done(), which applies the diagram
 * above and submits the next step, the rollback, or ends the transaction
 * (persist_outcome, then the owner's callback). So hooks run on whichever
 * executor thread finished a step, one at a time per transaction; the
 * progress hook on whichever thread ran a device's step as it ends
 * (report_progress), serialised by a lock of the transaction.
 * sb_engine_run() is sb_engine_start() plus a wait on a condition
 * variable, for callers outside the executor.
 */
#include "sb_txn.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sb_exec.h"
#include "sb_model.h"
#include "sb_txn_internal.h"

/* ---- engine ------------------------------------------------------------ */

int sb_engine_new_on(const struct sb_executor *x, struct sb_engine **out)
{
	if (!x || !x->submit)
		return -EINVAL;
	struct sb_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->x = *x;
	pthread_mutex_init(&e->loops_mu, NULL);
	*out = e;
	return 0;
}

int sb_engine_new(int threads, struct sb_engine **out)
{
	struct sb_exec_pool *p;
	int rc = sb_exec_pool_new(threads, &p);
	if (rc)
		return rc;
	struct sb_executor x = sb_exec_pool_executor(p);
	if ((rc = sb_engine_new_on(&x, out))) {
		sb_exec_pool_free(p);
		return rc;
	}
	(*out)->own = p;
	return 0;
}

void sb_engine_free(struct sb_engine *e)
{
	if (!e)
		return;
	sb_exec_pool_free(e->own);
	for (int i = 0; i < e->n_spare; i++)
		sb_exec_loop_free(e->spare[i]);
	pthread_mutex_destroy(&e->loops_mu);
	free(e);
}

/* A loop for one slice of a step: a spare one, or a new one (NULL: none to be had). */
static struct sb_exec_loop *take_loop(struct sb_engine *e)
{
	struct sb_exec_loop *l = NULL;
	pthread_mutex_lock(&e->loops_mu);
	if (e->n_spare)
		l = e->spare[--e->n_spare];
	pthread_mutex_unlock(&e->loops_mu);
	if (!l && sb_exec_loop_new(&l))
		l = NULL;
	return l;
}

static void put_loop(struct sb_engine *e, struct sb_exec_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&e->loops_mu);
	if (e->n_spare < SPARE_LOOPS) {
		e->spare[e->n_spare++] = l;
		l = NULL;
	}
	pthread_mutex_unlock(&e->loops_mu);
	sb_exec_loop_free(l);
}

const struct sb_txn_counters *sb_engine_counters(const struct sb_engine *e)
{
	return &e->counters;
}

/* ---- names -------------------------------------------------------------- */

const char *sb_txn_step_name(enum sb_txn_step s)
{
	static const char *const names[SB_STEP_COUNT] = {"none",   "plan",    "prepare", "commit",
							 "verify", "confirm", "rollback"};
	return (s >= 0 && s < SB_STEP_COUNT) ? names[s] : "?";
}

const char *sb_txn_outcome_name(enum sb_txn_outcome o)
{
	switch (o) {
	case SB_TXN_COMMITTED:
		return "committed";
	case SB_TXN_REFUSED:
		return "refused";
	case SB_TXN_ROLLED_BACK:
		return "rolled-back";
	case SB_TXN_FAILED:
		return "failed";
	}
	return "?";
}

void sb_txn_result_clear(struct sb_txn_result *r)
{
	if (!r)
		return;
	free(r->devices);
	memset(r, 0, sizeof(*r));
}

/* ---- one transaction ------------------------------------------------------ */

/* One executor task of a step that runs devices [first, first + n) in a loop. */
struct loop_slice {
	struct sb_exec_task task;
	struct txn *t;
	size_t first, n;
};

static void step_done(struct txn *t);

/*
 * The progress hook (sb_txn.h): a step started (device_done false, done 0)
 * or one more device finished it. Under progress_mu, so that the hook sees
 * done rise by one even when devices finish on several threads at once.
 */
static void report_progress(struct txn *t, bool device_done)
{
	const struct sb_txn_hooks *h = t->hooks;
	size_t done;

	if (!h || !h->progress)
		return;
	pthread_mutex_lock(&t->progress_mu);
	done = device_done ? ++t->progress_done : (t->progress_done = 0);
	h->progress(h->arg, t->step, done, t->plan->n_devices);
	pthread_mutex_unlock(&t->progress_mu);
}

/* A device task or loop slice of the step has ended; the last one moves the transaction on. */
static void step_task_done(struct txn *t)
{
	/* the others must not touch t afterwards (it may be finished and freed) */
	if (atomic_fetch_sub(&t->remaining, 1) == 1)
		step_done(t);
}

static void dev_task_run(struct sb_exec_task *x)
{
	struct dev_ctx *d = (struct dev_ctx *)x; /* task is the first member */
	struct txn *t = d->t;

	d->in_loop = false;
	t->step_fn(d);
	report_progress(t, true);
	step_task_done(t);
}

/*
 * Moves the rest of a device's step from its loop to an executor task of
 * its own (a blocking connect or claim). Called as the coroutine ends: its
 * slice still counts in `remaining`, so the step cannot end before the
 * task does.
 */
static void hand_off(struct dev_ctx *d)
{
	struct txn *t = d->t;
	struct sb_executor x = t->e->x;
	d->in_loop = false;
	d->wants_thread = false;
	atomic_fetch_add(&t->remaining, 1);
	d->task.run = dev_task_run;
	x.submit(x.ctx, &d->task);
}

static void dev_coro_run(void *arg)
{
	struct dev_ctx *d = arg;
	d->t->step_fn(d);
	if (d->wants_thread) /* the job would block the loop (sb_txn_internal.h) */
		hand_off(d);
	else
		report_progress(d->t, true);
}

/* A slice of the step: its devices as coroutines of one loop on this executor thread. */
static void slice_run(struct sb_exec_task *x)
{
	struct loop_slice *s = (struct loop_slice *)x; /* task is the first member */
	struct txn *t = s->t;
	struct dev_ctx *devs = t->devs + s->first;
	struct sb_exec_loop *l = take_loop(t->e);
	bool looped = false;
	for (size_t i = 0; l && i < s->n; i++) {
		devs[i].in_loop = true;
		if (sb_exec_loop_add(l, dev_coro_run, &devs[i]))
			break;
		looped = i + 1 == s->n;
	}
	if (!looped || sb_exec_loop_run(l)) {
		/* no loop to be had (out of memory): one device after the other */
		sb_exec_loop_free(l);
		l = NULL;
		for (size_t i = 0; i < s->n; i++) {
			devs[i].in_loop = false;
			t->step_fn(&devs[i]);
			report_progress(t, true);
		}
	}
	put_loop(t->e, l);
	step_task_done(t);
}

/* Runs fn on every device in parallel; step_done() follows the last one. */
static void launch_step(struct txn *t, enum sb_txn_step step, void (*fn)(void *))
{
	size_t n = t->plan->n_devices;
	struct dev_ctx *devs = t->devs;
	struct sb_executor x = t->e->x;

	t->step = step;
	t->step_fn = fn;
	t->t_step = sb_now_ms();
	atomic_store(&t->remaining, n);
	for (size_t i = 0; i < n; i++)
		devs[i].ok = true;
	report_progress(t, false);
	/* the rollback (retries, reconnects, sleeps) keeps a task per device */
	if (t->n_slices && step != SB_STEP_ROLLBACK) {
		struct loop_slice *slices = t->slices;
		size_t n_slices = t->n_slices;
		atomic_store(&t->remaining, n_slices);
		/* Only locals after the first submit: the last task may end t. */
		for (size_t i = 0; i < n_slices; i++)
			x.submit(x.ctx, &slices[i].task);
		return;
	}
	/* Only locals after the first submit: the last task may end t. */
	for (size_t i = 0; i < n; i++) {
		devs[i].task.run = dev_task_run;
		x.submit(x.ctx, &devs[i].task);
	}
}

static size_t failed_devices(const struct txn *t)
{
	size_t failed = 0;
	for (size_t i = 0; i < t->plan->n_devices; i++)
		failed += !t->devs[i].ok;
	return failed;
}

static int check_plan(const struct sb_txn_plan *plan)
{
	if (!plan || !plan->devices || plan->n_devices == 0)
		return -EINVAL;
	for (size_t i = 0; i < plan->n_devices; i++) {
		const struct sb_txn_device *a = &plan->devices[i];
		if (!a->dev || (a->n_target && !a->target) || (a->n_bundles && !a->bundles))
			return -EINVAL;
		bool trx = sb_model(sb_device_model(a->dev))->bundles;
		if (trx ? a->n_target != 0 : a->n_bundles != 0)
			return -EINVAL; /* the other model's set */
		for (size_t x = 0; x < a->n_bundles; x++) {
			const struct sb_bundle *b = &a->bundles[x];
			if (b->path > 1 || b->dir > 1 || (b->path == 1) != (b->distance > 0))
				return -EINVAL;
			for (size_t y = x + 1; y < a->n_bundles; y++)
				if (b->bundle == a->bundles[y].bundle)
					return -EINVAL;
		}
		for (size_t j = i + 1; j < plan->n_devices; j++)
			if (plan->devices[j].dev == a->dev)
				return -EINVAL;
		for (size_t x = 0; x < a->n_target; x++) {
			if (a->target[x].in > 4095 || a->target[x].out > 4095)
				return -EINVAL;
			for (size_t y = x + 1; y < a->n_target; y++)
				if (a->target[x].in == a->target[y].in)
					return -EINVAL;
		}
	}
	return 0;
}

static int verify_cb(struct txn *t, const struct sb_txn_hooks *hooks, enum sb_verify_phase phase,
		     char *why, size_t why_len)
{
	if (!hooks || !hooks->verify)
		return 0;
	size_t n = t->plan->n_devices;
	struct sb_device_xcs *v = calloc(n, sizeof(*v));
	if (!v) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	/* the PLAN phase shows a transceiver's targets as states: no peer, no status */
	size_t n_plan_b = 0;
	for (size_t i = 0; phase == SB_VERIFY_PLAN && i < n; i++)
		n_plan_b += t->devs[i].n_target_b;
	struct sb_bundle_state *plan_b = calloc(n_plan_b ? n_plan_b : 1, sizeof(*plan_b));
	if (!plan_b) {
		free(v);
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		struct dev_ctx *d = &t->devs[i];
		v[i].index = i;
		v[i].xcs = phase == SB_VERIFY_PLAN ? d->target : d->readback;
		v[i].n = phase == SB_VERIFY_PLAN ? d->n_target : d->n_readback;
		if (phase == SB_VERIFY_READBACK) {
			v[i].bundles = d->readback_b;
			v[i].n_bundles = d->n_readback_b;
			continue;
		}
		v[i].bundles = plan_b + used;
		v[i].n_bundles = d->n_target_b;
		for (size_t k = 0; k < d->n_target_b; k++)
			plan_b[used++] =
				(struct sb_bundle_state){.set = d->target_b[k], .peer_node = -1};
	}
	int rc = hooks->verify(hooks->arg, phase, v, n, why, why_len);
	free(plan_b);
	free(v);
	return rc;
}

static void finish_result(struct txn *t, struct sb_txn_result *r)
{
	for (size_t i = 0; i < r->n_devices; i++) {
		struct sb_txn_device_result *dr = &r->devices[i];
		r->n_failed_devices += dr->failed_step != SB_STEP_NONE;
		r->n_rollback_failures += dr->outcome == SB_DEV_ROLLBACK_FAILED;
	}
	struct sb_txn_counters *c = &t->e->counters;
	atomic_fetch_add(&c->device_failures, r->n_failed_devices);
	atomic_fetch_add(&c->rollback_failures, r->n_rollback_failures);
	switch (r->outcome) {
	case SB_TXN_COMMITTED:
		atomic_fetch_add(&c->committed, 1);
		break;
	case SB_TXN_REFUSED:
		atomic_fetch_add(&c->refused, 1);
		break;
	case SB_TXN_ROLLED_BACK:
		atomic_fetch_add(&c->rolled_back, 1);
		break;
	case SB_TXN_FAILED:
		atomic_fetch_add(&c->failed, 1);
		break;
	}
}

/* First device error of a step, for the summary. */
static const struct sb_txn_device_result *first_failure(const struct sb_txn_result *r,
							enum sb_txn_step step)
{
	for (size_t i = 0; i < r->n_devices; i++)
		if (r->devices[i].failed_step == step)
			return &r->devices[i];
	return NULL;
}

static void roll_back_all(struct txn *t, enum sb_txn_step failed)
{
	t->r->failed_step = failed;
	launch_step(t, SB_STEP_ROLLBACK, sbt_job_rollback);
}

/* After the rollback step: the outcome and its summary. */
static void rollback_done(struct txn *t)
{
	struct sb_txn_result *r = t->r;
	enum sb_txn_step failed = r->failed_step;
	r->step_ms[SB_STEP_ROLLBACK] = sb_now_ms() - t->t_step;
	bool proven = true;
	for (size_t i = 0; i < r->n_devices; i++) {
		struct dev_ctx *d = &t->devs[i];
		if (d->touched && r->devices[i].outcome != SB_DEV_ROLLED_BACK)
			proven = false;
	}
	r->outcome = proven ? SB_TXN_ROLLED_BACK : SB_TXN_FAILED;
	const struct sb_txn_device_result *f = first_failure(r, failed);
	size_t nf = 0;
	for (size_t i = 0; i < r->n_devices; i++)
		nf += r->devices[i].failed_step != SB_STEP_NONE;
	snprintf(r->message, sizeof(r->message), "%s failed on %zu device(s)%s%.60s%s%s: %.160s%s",
		 sb_txn_step_name(failed), nf, f ? ", first " : "", f ? f->error.device : "",
		 f ? " " : "", f ? f->error.operation : "", f ? f->error.message : "",
		 proven ? "; every device rolled back" : "; ROLLBACK NOT PROVEN on some device");
}

/* The outcome is known: counters, persist_outcome (unless refused), owner. */
static void txn_end(struct txn *t, bool persist)
{
	struct sb_txn_result *r = t->r;
	finish_result(t, r);
	r->total_ms = sb_now_ms() - t->t_start;
	if (persist && t->hooks && t->hooks->persist_outcome)
		t->hooks->persist_outcome(t->hooks->arg, t->plan, r);
	r->total_ms = sb_now_ms() - t->t_start;
	for (size_t i = 0; i < t->plan->n_devices; i++) {
		if (t->devs[i].claimed)
			sb_device_unclaim(t->devs[i].dev);
		free((void *)t->devs[i].target);
		free(t->devs[i].pre);
		free(t->devs[i].readback);
		free(t->devs[i].target_b);
		free(t->devs[i].pre_b);
		free(t->devs[i].readback_b);
	}
	free(t->devs);
	t->devs = NULL;
	free(t->slices);
	t->slices = NULL;
	t->finished(t);
}

/* The last device task of a step finished: the diagram's next arrow. */
static void step_done(struct txn *t)
{
	struct sb_txn_result *r = t->r;
	size_t failed = failed_devices(t);
	char why[256] = "";

	switch (t->step) {
	case SB_STEP_PREPARE:
	case SB_STEP_COMMIT:
		r->step_ms[t->step] = sb_now_ms() - t->t_step;
		if (failed)
			roll_back_all(t, t->step);
		else if (t->step == SB_STEP_PREPARE)
			launch_step(t, SB_STEP_COMMIT, sbt_job_commit);
		else
			launch_step(t, SB_STEP_VERIFY, sbt_job_verify);
		return;
	case SB_STEP_VERIFY:
		if (!failed && verify_cb(t, t->hooks, SB_VERIFY_READBACK, why, sizeof(why))) {
			r->step_ms[SB_STEP_VERIFY] = sb_now_ms() - t->t_step;
			/* the checker judges the fabric, not one device: blame the first */
			sbt_fail_dev_msg(&t->devs[0], SB_STEP_VERIFY, "l2-check", -EPROTO, why);
			roll_back_all(t, SB_STEP_VERIFY);
			return;
		}
		r->step_ms[SB_STEP_VERIFY] = sb_now_ms() - t->t_step;
		if (failed)
			roll_back_all(t, SB_STEP_VERIFY);
		else
			launch_step(t, SB_STEP_CONFIRM, sbt_job_confirm);
		return;
	case SB_STEP_CONFIRM:
		r->step_ms[SB_STEP_CONFIRM] = sb_now_ms() - t->t_step;
		if (failed) {
			roll_back_all(t, SB_STEP_CONFIRM);
			return;
		}
		r->outcome = SB_TXN_COMMITTED;
		for (size_t i = 0; i < r->n_devices; i++)
			r->devices[i].outcome = SB_DEV_CONFIRMED;
		snprintf(r->message, sizeof(r->message), "committed on %zu device(s)",
			 r->n_devices);
		txn_end(t, true);
		return;
	case SB_STEP_ROLLBACK:
		rollback_done(t);
		txn_end(t, true);
		return;
	default: /* no device step runs in the other states */
		return;
	}
}

/* The first task: step 0, the plan passes the independent checker and the
 * intent is saved; then step 1 starts. */
static void txn_begin(struct sb_exec_task *x)
{
	struct txn *t = (struct txn *)((char *)x - offsetof(struct txn, start));
	struct sb_txn_result *r = t->r;
	const struct sb_txn_hooks *hooks = t->hooks;
	char why[256] = "";
	int64_t t0 = sb_now_ms();

	if (verify_cb(t, hooks, SB_VERIFY_PLAN, why, sizeof(why))) {
		r->outcome = SB_TXN_REFUSED;
		r->failed_step = SB_STEP_PLAN;
		snprintf(r->message, sizeof(r->message), "plan refused by the checker: %s", why);
	} else if (hooks && hooks->persist_intent && hooks->persist_intent(hooks->arg, t->plan)) {
		r->outcome = SB_TXN_REFUSED;
		r->failed_step = SB_STEP_PLAN;
		snprintf(r->message, sizeof(r->message), "the intent could not be persisted");
	}
	r->step_ms[SB_STEP_PLAN] = sb_now_ms() - t0;
	if (r->outcome == SB_TXN_REFUSED)
		txn_end(t, false);
	else
		launch_step(t, SB_STEP_PREPARE, sbt_job_prepare);
}

/*
 * Checks the plan and builds the transaction into t (t->e, finished and r
 * set by the caller); on success the caller submits t->start.
 */
static int txn_setup(struct txn *t, const struct sb_txn_plan *plan,
		     const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts)
{
	struct sb_txn_result *r = t->r;
	memset(r, 0, sizeof(*r));
	if (check_plan(plan))
		return -EINVAL;
	t->t_start = sb_now_ms();
	t->plan = plan;
	t->hooks = hooks;
	if (opts)
		t->opts = *opts;
	if (t->opts.confirm_timeout_s <= 0)
		t->opts.confirm_timeout_s = 30;
	if (t->opts.verify_timeout_ms <= 0)
		t->opts.verify_timeout_ms = 2000;
	if (t->opts.connect_timeout_ms <= 0)
		t->opts.connect_timeout_ms = 3000;
	if (t->opts.rollback_timeout_ms <= 0)
		t->opts.rollback_timeout_ms = 10000;
	size_t n = plan->n_devices;
	r->n_devices = n;
	r->devices = calloc(n, sizeof(*r->devices));
	t->devs = calloc(n, sizeof(*t->devs));
	if (!r->devices || !t->devs) {
		free(t->devs);
		t->devs = NULL;
		sb_txn_result_clear(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct dev_ctx *d = &t->devs[i];
		d->t = t;
		d->index = i;
		d->dev = plan->devices[i].dev;
		d->n_target = plan->devices[i].n_target;
		d->target = malloc((d->n_target ? d->n_target : 1) * sizeof(struct sb_xc));
		d->trx = sb_model(sb_device_model(d->dev))->bundles;
		d->n_target_b = plan->devices[i].n_bundles;
		d->target_b =
			malloc((d->n_target_b ? d->n_target_b : 1) * sizeof(struct sb_bundle));
		if (!d->target || !d->target_b) {
			for (size_t k = 0; k <= i; k++) {
				free((void *)t->devs[k].target);
				free(t->devs[k].target_b);
			}
			free(t->devs);
			t->devs = NULL;
			sb_txn_result_clear(r);
			return -ENOMEM;
		}
		if (d->n_target)
			memcpy((void *)d->target, plan->devices[i].target,
			       d->n_target * sizeof(struct sb_xc));
		qsort((void *)d->target, d->n_target, sizeof(struct sb_xc), sb_xc_cmp);
		if (d->n_target_b)
			memcpy(d->target_b, plan->devices[i].bundles,
			       d->n_target_b * sizeof(struct sb_bundle));
		qsort(d->target_b, d->n_target_b, sizeof(struct sb_bundle), sb_bundle_cmp);
		d->res = &r->devices[i];
	}
	if (!t->opts.thread_per_device) {
		size_t per = t->opts.devices_per_loop > 0 ? (size_t)t->opts.devices_per_loop : n;
		size_t k = (n + per - 1) / per;
		t->slices = calloc(k, sizeof(*t->slices));
		/* without memory for them, every step runs a task per device */
		for (size_t i = 0; t->slices && i < k; i++) {
			t->slices[i] = (struct loop_slice){.task.run = slice_run,
							   .t = t,
							   .first = i * per,
							   .n = i + 1 < k ? per : n - i * per};
		}
		t->n_slices = t->slices ? k : 0;
	}
	atomic_fetch_add(&t->e->counters.started, 1);
	t->start.run = txn_begin;
	return 0;
}

/* ---- the owner's side: a handle, a callback, and the blocking form -------- */

struct sb_txn_handle {
	struct txn t;
	struct sb_txn_result result;
	void (*done)(void *arg, const struct sb_txn_result *r);
	void *done_arg;
	pthread_mutex_t mu; /* guards finished */
	pthread_cond_t cv;
	bool finished;
};

static void handle_finished(struct txn *t)
{
	struct sb_txn_handle *h = (struct sb_txn_handle *)t; /* t is the first member */
	if (h->done)
		h->done(h->done_arg, &h->result);
	pthread_mutex_lock(&h->mu);
	h->finished = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

int sb_engine_start(struct sb_engine *e, const struct sb_txn_plan *plan,
		    const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		    void (*done)(void *arg, const struct sb_txn_result *r), void *done_arg,
		    struct sb_txn_handle **out)
{
	struct sb_txn_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->t.e = e;
	h->t.r = &h->result;
	h->t.finished = handle_finished;
	h->done = done;
	h->done_arg = done_arg;
	int rc = txn_setup(&h->t, plan, hooks, opts);
	if (rc) {
		free(h);
		return rc;
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	pthread_mutex_init(&h->t.progress_mu, NULL);
	*out = h;
	e->x.submit(e->x.ctx, &h->t.start);
	return 0;
}

int sb_txn_join(struct sb_txn_handle *h, struct sb_txn_result *result)
{
	pthread_mutex_lock(&h->mu);
	while (!h->finished)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
	*result = h->result;
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->t.progress_mu);
	free(h);
	return 0;
}

int sb_engine_run(struct sb_engine *e, const struct sb_txn_plan *plan,
		  const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		  struct sb_txn_result *r)
{
	struct sb_txn_handle *h;
	int rc = sb_engine_start(e, plan, hooks, opts, NULL, NULL, &h);
	if (rc) {
		memset(r, 0, sizeof(*r));
		return rc;
	}
	return sb_txn_join(h, r);
}
