/*
 * recovery.c - implementation of recovery.h.
 */
#include "recovery.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "log.h"
#include "sb_device.h"
#include "sb_txn.h"
#include "store.h"

static int resolve_circuit_intent(const struct recov_deps *rd, const struct st_intent *in);

/* At most this many threads program devices when a decided intent is finished. */
#define RECOV_ENGINE_THREADS 8

/*
 * Whether device d's commit can still be an unconfirmed one: its strategy
 * is a confirmed commit (the dead-man switch). A device without it commits
 * for good, so what it holds is final whoever sent it.
 */
bool recov_holds_unconfirmed(const struct recov_deps *rd, int d)
{
	const struct sb_device *h = dev_handle(rd->devs, d, DEV_ROLE_TXN);

	return h && sb_device_strategy(h) == SB_STRATEGY_CONFIRMED;
}

/*
 * The fence (docs/replicas.md, "A paused leader"). A previous leader that
 * was paused, not dead, still holds its device sessions, and a commit of
 * its that was never confirmed stays on a device until that session ends
 * or its confirm timeout passes: what the device shows then proves
 * nothing. ocsd's own protocol holds the candidate lock from before the
 * commit until after the confirm (sb_txn.c I6), so on a confirmed-commit
 * device "recovery holds the lock" proves that no commit of ocsd's is
 * pending there, and "another session holds it" says one may be. So
 * before it reads a confirmed-commit device an open intent touched,
 * recovery takes the device's candidate lock; when another session holds
 * it (lock-denied names it in error-info), that session is ended with
 * <kill-session> (RFC 6241 7.9: its locks are released and its
 * unconfirmed commit reverts) and the lock taken again. What the device
 * holds under the lock is then final. Kills are confined to this: the
 * recovery of an open intent of ocsd's, on the devices it touched, each
 * one logged. A device not fenced (the lock still refused, the kill
 * refused) keeps proving nothing: its target is never taken for done.
 *
 * Chosen over confirmed commits with persist/persist-id derived from the
 * transaction id (a successor could then confirm or cancel the pending
 * commit itself): those outlive their session, so the immediate revert
 * when ocsd dies (I3) and the rollback path would change.
 */
#define RECOV_FENCE_TRIES 3

/*
 * The recovery gate. Recovery reads and writes devices on behalf of the
 * leader it may no longer be: a replica deposed while it recovers (paused,
 * its lease gone) goes on until its next store write fails, and meanwhile
 * its successor may have finished the same intent and moved on (a job
 * released, its circuits removed). So before each act that changes what a
 * device holds, recovery writes a note on the intent (st_intent_note: on
 * etcd a log entry fenced by the leader key), and acts only once it is
 * stored:
 *  G1. before it kills a session that holds a device's lock (the holder
 *      may be its successor's);
 *  G2. before recovery's own engine confirms (or, on a device without
 *      :confirmed-commit, commits for good): the note is the engine's
 *      verify callback at the read-back (SB_VERIFY_READBACK), as the
 *      confirm gate is for a transaction (txn_driver.c). A refused note
 *      fails the read-back: confirmed commits are cancelled.
 * A pause between the note and the act leaves the intent open in the store
 * (its outcome is written after), so the successor recovers it itself and
 * fences the devices first: the act is then either done or undone for it,
 * never on top of its later work. What stays open is W3 of sb_txn.c: a
 * device without :confirmed-commit, edited before the pause.
 */
static int recov_note(const struct recov_deps *rd, const struct st_intent *in, const char *what,
		      char *why, size_t why_len)
{
	static atomic_uint notes; /* makes each note new (st_intent_note) */
	char note[256];
	int rc;

	snprintf(note, sizeof(note), "recovery (note %u, %lld ms): %s", atomic_fetch_add(&notes, 1),
		 (long long)clk_wall_ms(rd->clock), what);
	rc = st_intent_note(rd->store, in->txn_id, note);
	if (rc)
		snprintf(why, why_len,
			 "the store refused recovery's note on transaction %lld (%s): this replica "
			 "may not lead any more, so recovery does not %s",
			 (long long)in->txn_id, st_strerror(rd->store, rc), what);
	return rc;
}

/*
 * Tries device h's candidate lock: true when taken; else *holder gets the
 * session that holds it when the device named one (lock-denied), 0 when
 * the lock failed otherwise (why in *err).
 */
static bool try_lock(struct sb_device *h, uint32_t *holder, struct sb_error *err)
{
	*err = (struct sb_error){0};
	*holder = 0;
	if (sb_device_lock(h, SB_DS_CANDIDATE, err) == 0)
		return true;
	if (err->code == -EREMOTEIO)
		*holder = err->session_id;
	return false;
}

/*
 * Fences the devices an open intent touched, all together. A previous
 * leader's unconfirmed commit spans the devices of its transaction, and
 * their circuits pair up across devices (a pair's two directions on two
 * devices, L2 symmetry): killing its session on some of them and not on
 * the others would leave one direction of a pair standing until the
 * confirm timeout. So every touched device is connected first (in
 * parallel) and its lock tried; sessions are killed only when every one of
 * them answered, its lock taken or refused naming the holder, and then the
 * kills go out one after another over the open sessions (milliseconds
 * apart). When any touched device is unreachable, or refuses the lock
 * without naming a holder, no session is killed: the holder's commit stays
 * on every device alike and reverts on all of them together (at its
 * confirm timeout or the end of its session), and the devices not fenced
 * keep proving nothing. Kills and relocks are tried RECOV_FENCE_TRIES
 * times.
 */
void recov_fence(const struct recov_deps *rd, const struct st_intent *in, const bool *touched,
		 bool *fenced, int n)
{
	struct sb_device **hs = calloc((size_t)n + 1, sizeof(*hs));
	struct sb_error *errs = calloc((size_t)n + 1, sizeof(*errs));
	uint32_t *holder = calloc((size_t)n + 1, sizeof(*holder));
	int *ids = calloc((size_t)n + 1, sizeof(*ids));
	char unfenceable[512] = ""; /* why no session may be killed */
	size_t k = 0;

	if (!hs || !errs || !holder || !ids) {
		snprintf(unfenceable, sizeof(unfenceable), "out of memory");
		goto out;
	}
	for (int d = 0; d < n; d++) {
		if (!touched[d])
			continue;
		ids[k] = d;
		hs[k] = dev_handle(rd->devs, d, DEV_ROLE_TXN);
		if (!hs[k])
			snprintf(unfenceable, sizeof(unfenceable), "%.64s has no session",
				 dev_name(rd->devs, d));
		else
			k++;
	}
	sb_device_connect_many(hs, k, RECOV_ENGINE_THREADS, sb_now_ms() + RECOV_CONNECT_MS, errs);
	for (size_t i = 0; i < k; i++) {
		struct sb_error err = {0};

		if (errs[i].code != 0)
			snprintf(unfenceable, sizeof(unfenceable), "%.64s is unreachable (%.320s)",
				 sb_device_name(hs[i]), errs[i].message);
		else if (sb_device_strategy(hs[i]) == SB_STRATEGY_CONFIRMED &&
			 !(fenced[ids[i]] = try_lock(hs[i], &holder[ids[i]], &err)) &&
			 !holder[ids[i]])
			snprintf(unfenceable, sizeof(unfenceable),
				 "%.64s refuses its lock (%.320s)", sb_device_name(hs[i]),
				 err.message);
	}
	for (int t = 0; t < RECOV_FENCE_TRIES && !unfenceable[0]; t++) {
		char why[400];
		bool any = false;

		for (size_t i = 0; i < k; i++)
			any |= holder[ids[i]] != 0;
		if (!any)
			break;
		if (recov_note(rd, in, "kill the sessions holding the devices' locks (G1)", why,
			       sizeof(why)) != 0) {
			snprintf(unfenceable, sizeof(unfenceable), "%s", why);
			break;
		}
		for (size_t i = 0; i < k; i++) {
			uint32_t *who = &holder[ids[i]];
			struct sb_error err = {0};

			if (!*who)
				continue;
			log_msg(LOG_WARNING,
				"transaction %lld of job %s left open: %s: kill-session %u, which "
				"holds the candidate lock and may hold an unconfirmed commit of a "
				"previous leader",
				(long long)in->txn_id, in->job_id, sb_device_name(hs[i]), *who);
			if (sb_device_kill_session(hs[i], *who, &err) != 0) {
				log_msg(LOG_WARNING,
					"transaction %lld of job %s left open: %s: kill-session %u "
					"failed: %s",
					(long long)in->txn_id, in->job_id, sb_device_name(hs[i]),
					*who, err.message);
				*who = 0;
			}
		}
		for (size_t i = 0; i < k; i++) {
			struct sb_error err = {0};

			if (holder[ids[i]])
				fenced[ids[i]] = try_lock(hs[i], &holder[ids[i]], &err);
		}
	}
out:
	if (unfenceable[0])
		log_msg(LOG_WARNING,
			"transaction %lld of job %s left open: no session killed on its devices, "
			"since %s: what they hold may be another session's unconfirmed commit, "
			"which reverts on all of them alike",
			(long long)in->txn_id, in->job_id, unfenceable);
	for (size_t i = 0; i < k; i++)
		if (touched[ids[i]] && !fenced[ids[i]] &&
		    sb_device_strategy(hs[i]) == SB_STRATEGY_CONFIRMED && errs[i].code == 0)
			log_msg(LOG_WARNING,
				"transaction %lld of job %s left open: %s: not fenced: what it "
				"holds "
				"may be another session's unconfirmed commit",
				(long long)in->txn_id, in->job_id, sb_device_name(hs[i]));
	free(ids);
	free(holder);
	free(errs);
	free(hs);
}

/* Releases the locks recov_fence() took (n devices, fenced[d]). */
void recov_unfence(const struct recov_deps *rd, bool *fenced, int n)
{
	for (int d = 0; d < n; d++) {
		struct sb_error err = {0};

		if (fenced[d] &&
		    sb_device_unlock(dev_handle(rd->devs, d, DEV_ROLE_TXN), SB_DS_CANDIDATE, &err))
			sb_device_disconnect(dev_handle(rd->devs, d, DEV_ROLE_TXN));
		fenced[d] = false;
	}
}

static int resolve_intent(void *arg, const struct st_intent *in)
{
	const struct recov_deps *rd = arg;

	for (size_t i = 0; i < rd->n_kinds; i++)
		if (rd->kinds[i].owns(in))
			return rd->kinds[i].resolve(rd->kinds[i].ctx, rd, in);
	return resolve_circuit_intent(rd, in);
}

/*
 * The target of device d for intent in, from what it holds (rb): every
 * cross-connect whose input the intent neither removes nor adds on d (so
 * an unowned one stays, as a transaction keeps it), then the intent's
 * additions on d. Caller frees *out. 0 or -ENOMEM.
 */
static int roll_forward_target(const struct recov_deps *rd, const struct st_intent *in, int d,
			       const struct dev_readback *rb, struct sb_xc **out, size_t *n_out)
{
	const struct ocs_fabric *f = rd->fabric;
	struct sb_xc *t = malloc((rb->n + in->n_additions + 1) * sizeof(*t));
	size_t n = 0;

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < rb->n; i++) {
		bool replaced = false;

		for (size_t r = 0; r < in->n_removals && !replaced; r++)
			replaced = ocs_fabric_device_id(f, in->removals[r].group,
							in->removals[r].device) == d &&
				   in->removals[r].in == rb->xcs[i].in;
		for (size_t a = 0; a < in->n_additions && !replaced; a++)
			replaced = ocs_fabric_device_id(f, in->additions[a].xc.group,
							in->additions[a].xc.device) == d &&
				   in->additions[a].xc.in == rb->xcs[i].in;
		if (!replaced)
			t[n++] = rb->xcs[i];
	}
	for (size_t a = 0; a < in->n_additions; a++)
		if (ocs_fabric_device_id(f, in->additions[a].xc.group,
					 in->additions[a].xc.device) == d)
			t[n++] = (struct sb_xc){(uint16_t)in->additions[a].xc.in,
						(uint16_t)in->additions[a].xc.out};
	qsort(t, n, sizeof(*t), sb_xc_cmp);
	*out = t;
	*n_out = n;
	return 0;
}

/* The recovery gate's G2, as recovery's engine's verify callback. */
struct recov_gate {
	const struct recov_deps *rd;
	const struct st_intent *in;
};

static int gate_verify(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
		       size_t n, char *why, size_t why_len)
{
	const struct recov_gate *g = arg;

	(void)devices;
	(void)n;
	if (phase != SB_VERIFY_READBACK)
		return 0;
	/* engine thread: the recovering thread waits in sb_engine_run, so the
	 * store is used by one thread at a time */
	return recov_note(g->rd, g->in, "confirm what it programmed (G2)", why, why_len) ? -1 : 0;
}

/*
 * Programs devs (n: each device's target) in one transaction of a small
 * engine of recovery's own, for intent in, behind the recovery gate; *r
 * gets the result (caller clears it). 0 or the engine's -errno.
 */
static int program(const struct recov_deps *rd, const struct st_intent *in,
		   const struct sb_txn_device *devs, size_t n, struct sb_txn_result *r)
{
	struct sb_txn_plan plan = {(uint64_t)in->txn_id, devs, n};
	struct recov_gate g = {rd, in};
	struct sb_txn_hooks hooks = {.verify = gate_verify, .arg = &g};
	struct sb_engine *engine = NULL;
	int rc = sb_engine_new(n < RECOV_ENGINE_THREADS ? (int)n : RECOV_ENGINE_THREADS, &engine);

	if (rc == 0)
		rc = sb_engine_run(engine, &plan, &hooks, NULL, r);
	sb_engine_free(engine);
	return rc;
}

/*
 * Finishes a decided intent (st_intent_decide: its commit was decided and
 * the confirms were being sent when the previous run ended): devs (n, not
 * empty), the devices that do not hold the target (reverted: their confirm
 * was never sent) with their targets, get them in one transaction of a
 * small engine of recovery's own. Returns the outcome to record: CONFIRMED
 * when they hold the target now, else ROLLED_BACK when every device was
 * and is back at the pre-image (all_pre), FAILED otherwise; detail says
 * why.
 */
enum st_intent_state recov_finish_decided(const struct recov_deps *rd, const struct st_intent *in,
					  const struct sb_txn_device *devs, size_t n, bool all_pre,
					  char *detail, size_t len)
{
	struct sb_txn_result r = {0};
	int rc = program(rd, in, devs, n, &r);
	enum st_intent_state outcome = all_pre ? ST_INTENT_ROLLED_BACK : ST_INTENT_FAILED;

	if (rc == 0 && r.outcome == SB_TXN_COMMITTED) {
		outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, len,
			 "recovered after restart: decided, finished on %zu device(s) that had "
			 "reverted",
			 n);
	} else {
		snprintf(detail, len,
			 "recovered after restart: decided, but %zu device(s) that had reverted "
			 "could not be programmed again (%s)",
			 n, rc ? strerror(-rc) : r.message);
	}
	sb_txn_result_clear(&r);
	return outcome;
}

/* The target of device d (roll_forward_target, roll_back_target). */
typedef int (*target_fn)(const struct recov_deps *rd, const struct st_intent *in, int d,
			 const struct dev_readback *rb, struct sb_xc **out, size_t *n_out);

/* The devices recovery programs, each with its target (device_targets()). */
struct dev_targets {
	struct sb_txn_device *devs;
	struct sb_xc **targets;
	size_t n;
};

static void dev_targets_clear(struct dev_targets *t)
{
	for (size_t i = 0; t->targets && i < t->n; i++)
		free(t->targets[i]);
	free(t->targets);
	free(t->devs);
}

/* Every touched device but those `done` says hold what they must, with fn's target. */
static int device_targets(const struct recov_deps *rd, const struct st_intent *in,
			  const struct dev_readback *rbs, const bool *touched, const bool *done,
			  target_fn fn, struct dev_targets *t)
{
	int n_dev = ocs_fabric_devices(rd->fabric);
	int rc;

	t->n = 0;
	t->devs = calloc((size_t)n_dev + 1, sizeof(*t->devs));
	t->targets = calloc((size_t)n_dev + 1, sizeof(*t->targets));
	rc = t->devs && t->targets ? 0 : -ENOMEM;
	for (int d = 0; rc == 0 && d < n_dev; d++) {
		if (!touched[d] || done[d])
			continue;
		rc = fn(rd, in, d, &rbs[d], &t->targets[t->n], &t->devs[t->n].n_target);
		t->devs[t->n].dev = dev_handle(rd->devs, d, DEV_ROLE_TXN);
		t->devs[t->n].target = t->targets[t->n];
		t->n++;
	}
	return rc;
}

/* recov_finish_decided for an intent of circuits: the devices not at_target. */
static enum st_intent_state roll_forward(const struct recov_deps *rd, const struct st_intent *in,
					 const struct dev_readback *rbs, const bool *touched,
					 const bool *at_target, bool all_pre, char *detail,
					 size_t len)
{
	struct dev_targets t;
	enum st_intent_state outcome = ST_INTENT_FAILED;

	if (device_targets(rd, in, rbs, touched, at_target, roll_forward_target, &t) == 0)
		outcome = recov_finish_decided(rd, in, t.devs, t.n, all_pre, detail, len);
	else
		snprintf(detail, len, "recovered after restart: decided, out of memory");
	dev_targets_clear(&t);
	return outcome;
}

/*
 * The pre-image of device d for intent in, from what it holds (rb, the
 * target): every cross-connect but the intent's additions on d and what
 * they replaced, then the cross-connects the intent removed from d. Caller
 * frees *out. 0 or -ENOMEM.
 */
static int roll_back_target(const struct recov_deps *rd, const struct st_intent *in, int d,
			    const struct dev_readback *rb, struct sb_xc **out, size_t *n_out)
{
	const struct ocs_fabric *f = rd->fabric;
	struct sb_xc *t = malloc((rb->n + in->n_removals + 1) * sizeof(*t));
	size_t n = 0;

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < rb->n; i++) {
		bool ours = false;

		for (size_t a = 0; a < in->n_additions && !ours; a++)
			ours = ocs_fabric_device_id(f, in->additions[a].xc.group,
						    in->additions[a].xc.device) == d &&
			       in->additions[a].xc.in == rb->xcs[i].in;
		for (size_t r = 0; r < in->n_removals && !ours; r++)
			ours = ocs_fabric_device_id(f, in->removals[r].group,
						    in->removals[r].device) == d &&
			       in->removals[r].in == rb->xcs[i].in;
		if (!ours)
			t[n++] = rb->xcs[i];
	}
	for (size_t r = 0; r < in->n_removals; r++)
		if (ocs_fabric_device_id(f, in->removals[r].group, in->removals[r].device) == d)
			t[n++] = (struct sb_xc){(uint16_t)in->removals[r].in,
						(uint16_t)in->removals[r].out};
	qsort(t, n, sizeof(*t), sb_xc_cmp);
	*out = t;
	*n_out = n;
	return 0;
}

/*
 * An undecided intent whose devices all hold the target or the pre-image,
 * some of each, none with a commit that may be unconfirmed: the previous
 * run died between devices that commit for good (no :confirmed-commit:
 * writable-running or candidate-only devices, sb_txn.c W2). The decision
 * was never taken, so the devices at the target (not at_pre) get their
 * pre-image back in one transaction of recovery's own engine. ROLLED_BACK
 * when it commits, FAILED otherwise; detail says which.
 */
static enum st_intent_state roll_back(const struct recov_deps *rd, const struct st_intent *in,
				      const struct dev_readback *rbs, const bool *touched,
				      const bool *at_pre, char *detail, size_t len)
{
	struct dev_targets t;
	struct sb_txn_result r = {0};
	enum st_intent_state outcome = ST_INTENT_FAILED;
	int rc = device_targets(rd, in, rbs, touched, at_pre, roll_back_target, &t);

	if (rc == 0)
		rc = program(rd, in, t.devs, t.n, &r);
	if (rc == 0 && r.outcome == SB_TXN_COMMITTED) {
		outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, len,
			 "recovered after restart: never decided; %zu device(s) that had committed "
			 "for good were written back to the pre-image",
			 t.n);
	} else {
		snprintf(detail, len,
			 "recovered after restart: never decided, but %zu device(s) that had "
			 "committed for good could not be written back (%s)",
			 t.n, rc ? strerror(-rc) : r.message);
	}
	sb_txn_result_clear(&r);
	dev_targets_clear(&t);
	return outcome;
}

bool recov_verdict(const struct st_intent *in, const struct recov_seen *s, const char *unit,
		   const char *pre, enum st_intent_state *outcome, char *detail, size_t len)
{
	if (!in->decided && s->unconfirmed > 0 && s->all_read && s->all_known) {
		/* Never decided, so never confirmed: the commit these devices show
		 * is another run's unconfirmed one (a paused or deposed leader's,
		 * whose session is still open) and reverts at its confirm timeout. */
		*outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, len,
			 "recovered: never decided, so never confirmed; %d %s(s) still show "
			 "another run's unconfirmed commit, which reverts by itself at its "
			 "confirm timeout",
			 s->unconfirmed, unit);
	} else if (s->all_target && (!s->all_pre || in->decided)) {
		*outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, len, "recovered after restart: %ss hold the target", unit);
	} else if (in->decided && s->all_read) {
		return true;
	} else if (s->all_pre) {
		*outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, len, "recovered after restart: %s", pre);
	} else {
		*outcome = ST_INTENT_FAILED;
	}
	return false;
}

int recov_record(const struct recov_deps *rd, const struct st_intent *in, const char *what,
		 enum st_intent_state outcome, const char *detail)
{
	log_msg(LOG_NOTICE, "%s %lld of job %s left open%s: %s, %s", what, (long long)in->txn_id,
		in->job_id, in->decided ? " (decided)" : "", st_intent_state_name(outcome), detail);
	if (st_intent_finish(rd->store, in->txn_id, outcome, detail, clk_wall_ms(rd->clock)) != 0)
		return -EIO;
	return 0;
}

/*
 * An undecided intent whose commit devices still show without the fence's
 * proof (unproven[d]): that commit was never confirmed and reverts by
 * itself, so its additions there are marked in the drift table, where a
 * reconciliation pass would find them unowned, for no transaction to keep
 * them (dr_expect_revert).
 */
static void expect_revert(const struct recov_deps *rd, const struct st_intent *in,
			  const bool *unproven)
{
	const struct ocs_fabric *f = rd->fabric;

	for (size_t a = 0; rd->drift && a < in->n_additions; a++) {
		const struct ocs_xc *x = &in->additions[a].xc;

		if (unproven[ocs_fabric_device_id(f, x->group, x->device)] &&
		    dr_expect_revert(rd->drift, x, 1) != 0)
			log_msg(LOG_WARNING,
				"transaction %lld of job %s left open: out of memory marking its "
				"unconfirmed commit: a transaction may keep it",
				(long long)in->txn_id, in->job_id);
	}
}

/*
 * Resolves one transaction a previous run left open. Confirmed commits are
 * tied to the session that made them, so the devices of a run that died
 * reverted when its sessions closed. A run that did not die (a leader
 * paused and deposed) still holds its sessions, and its unconfirmed commit
 * shows on the devices: every touched confirmed-commit device is fenced
 * first (recov_fence: its lock taken, the holder's session killed, so
 * that commit reverts), then every touched device is read back. All at the
 * target: the transaction had been confirmed. A decided intent
 * (st_intent_decide) is finished: devices that reverted, and any that
 * showed the target without the fence's proof, get the target again under
 * recovery's own sessions (roll_forward), so it is confirmed there. An
 * undecided one whose devices are all at the pre-image: rolled back. An
 * undecided one some unfenced device of which still shows a commit: since
 * a confirm is sent only after the decision is stored (txn_driver.c), it was
 * never confirmed and is rolled back; that commit reverts at its confirm
 * timeout. An undecided one whose devices hold some the target and the
 * others the pre-image, with no such commit: rolled back (roll_back).
 * Anything else (a device unreadable, or holding neither): failed, and
 * the difference is reported as drift.
 */
static int resolve_circuit_intent(const struct recov_deps *rd, const struct st_intent *in)
{
	const struct ocs_fabric *f = rd->fabric;
	int n_dev = ocs_fabric_devices(f);
	bool *touched = calloc((size_t)n_dev + 1, sizeof(*touched));
	bool *at_target = calloc((size_t)n_dev + 1, sizeof(*at_target));
	bool *fenced = calloc((size_t)n_dev + 1, sizeof(*fenced));
	bool *at_pre_d = calloc((size_t)n_dev + 1, sizeof(*at_pre_d));
	bool *unproven_d = calloc((size_t)n_dev + 1, sizeof(*unproven_d));
	struct dev_readback *rbs = calloc((size_t)n_dev + 1, sizeof(*rbs));
	struct recov_seen seen = {true, true, true, true, 0};
	enum st_intent_state outcome;
	char detail[512] = "";
	int rc = 0;

	if (!touched || !at_target || !fenced || !at_pre_d || !unproven_d || !rbs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < in->n_removals; i++)
		touched[ocs_fabric_device_id(f, in->removals[i].group, in->removals[i].device)] =
			true;
	for (size_t i = 0; i < in->n_additions; i++)
		touched[ocs_fabric_device_id(f, in->additions[i].xc.group,
					     in->additions[i].xc.device)] = true;
	recov_fence(rd, in, touched, fenced, n_dev);
	for (int d = 0; d < n_dev; d++) {
		struct dev_diff to_pre = {0}, to_target = {0};

		if (!touched[d])
			continue;
		/* The routine of devices.h: read back, compare with before and after. */
		if (dev_read(rd->devs, d, DEV_ROLE_TXN, &rbs[d]) != 0 ||
		    dev_compare(rd->devs, d, NULL, rbs[d].xcs, rbs[d].n, &to_pre) != 0 ||
		    dev_compare(rd->devs, d, in, rbs[d].xcs, rbs[d].n, &to_target) != 0) {
			seen.all_target = seen.all_pre = seen.all_read = false;
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "%s unreadable (%s); ", dev_name(rd->devs, d),
				 rbs[d].ok ? "out of memory" : rbs[d].error);
		} else {
			bool at_pre = dev_diff_equal(&to_pre);
			bool shows_target = dev_diff_equal(&to_target);
			/* shown by a commit that may be unconfirmed: not proven */
			bool unproven = shows_target && !at_pre && recov_holds_unconfirmed(rd, d) &&
					!fenced[d];

			seen.unconfirmed += unproven;
			unproven_d[d] = unproven;
			/* a decided intent: roll_forward programs it under our session */
			at_target[d] = shows_target && !(unproven && in->decided);
			at_pre_d[d] = at_pre;
			seen.all_target &= at_target[d];
			seen.all_pre &= at_pre;
			if (!shows_target && !at_pre) {
				seen.all_known = false;
				snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
					 "%s holds neither the old nor the new configuration; ",
					 dev_name(rd->devs, d));
			}
		}
		dev_diff_clear(&to_pre);
		dev_diff_clear(&to_target);
	}
	recov_unfence(rd, fenced, n_dev); /* before roll_forward's engine locks them */
	if (!in->decided && seen.unconfirmed > 0)
		expect_revert(rd, in, unproven_d);
	if (!in->decided && seen.all_read && seen.all_known && !seen.all_target && !seen.all_pre &&
	    !seen.unconfirmed)
		outcome = roll_back(rd, in, rbs, touched, at_pre_d, detail, sizeof(detail));
	else if (recov_verdict(in, &seen, "device", "devices back at the pre-image", &outcome,
			       detail, sizeof(detail)))
		outcome = roll_forward(rd, in, rbs, touched, at_target, seen.all_pre, detail,
				       sizeof(detail));
	rc = recov_record(rd, in, "transaction", outcome, detail);
	if (rc == 0 && outcome == ST_INTENT_CONFIRMED)
		rc = fs_apply(rd->fs, in->removals, in->n_removals, in->additions, in->n_additions);
out:
	for (int d = 0; rbs && d < n_dev; d++)
		dev_readback_clear(&rbs[d]);
	free(rbs);
	free(unproven_d);
	free(at_pre_d);
	free(fenced);
	free(at_target);
	free(touched);
	return rc;
}

int recov_resolve_open(const struct recov_deps *d)
{
	return st_intent_list_open(d->store, resolve_intent, (void *)d);
}
