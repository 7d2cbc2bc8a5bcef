/*
 * sb_txn_dev.c - what one device does in each step of a transaction: the
 * device jobs the driver in sb_txn.c runs on every device of the plan
 * (prepare: connect, lock, pre-image, edit, validate; commit; read-back
 * verify of cross-connects or bundles; confirm; rollback with proof and
 * the stale-image checks), and their helpers. Each job works on its own
 * struct dev_ctx and records its outcome there (ok, and the device's
 * result); it never moves the transaction on.
 *
 * The state machine, the invariants (I*, P1, R1-R3, S1-S4) and the
 * threading these jobs rely on are drawn at the top of sb_txn.c, where the
 * driver applies them.
 */
#include "sb_txn_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sb_exec.h"

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Same set of (in, out)? Both arrays sorted by input. */
static bool same_xcs(const struct sb_xc *a, size_t na, const struct sb_xc *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (a[i].in != b[i].in || a[i].out != b[i].out)
			return false;
	return true;
}

static const struct sb_xc *find_target(const struct dev_ctx *d, uint16_t in)
{
	for (size_t i = 0; i < d->n_target; i++)
		if (d->target[i].in == in)
			return &d->target[i];
	return NULL;
}

static struct sb_xc *states_to_xcs(const struct sb_xc_state *s, size_t n)
{
	struct sb_xc *x = malloc((n ? n : 1) * sizeof(*x));
	if (!x)
		return NULL;
	for (size_t i = 0; i < n; i++)
		x[i] = (struct sb_xc){s[i].in, s[i].out};
	return x;
}

static void fail_dev(struct dev_ctx *d, enum sb_txn_step step, const struct sb_error *err)
{
	d->ok = false;
	if (d->res->failed_step == SB_STEP_NONE) {
		d->res->failed_step = step;
		d->res->error = *err;
	}
}

void sbt_fail_dev_msg(struct dev_ctx *d, enum sb_txn_step step, const char *op, int code,
		      const char *msg)
{
	struct sb_error err = {.code = code};
	snprintf(err.device, sizeof(err.device), "%s", sb_device_name(d->dev));
	snprintf(err.operation, sizeof(err.operation), "%s", op);
	snprintf(err.message, sizeof(err.message), "%s", msg);
	fail_dev(d, step, &err);
}

static bool uses_candidate(const struct dev_ctx *d)
{
	return sb_device_strategy(d->dev) != SB_STRATEGY_RUNNING;
}

/* Reads running (configuration) into a sorted sb_xc array. */
static int read_running(struct dev_ctx *d, struct sb_xc **out, size_t *n, struct sb_error *err)
{
	struct sb_xc_state *s = NULL;
	int rc = sb_device_read_xcs(d->dev, false, SB_DS_RUNNING, &s, n, err);
	if (rc)
		return rc;
	*out = states_to_xcs(s, *n);
	free(s);
	return *out ? 0 : -ENOMEM;
}

/* Same bundle settings? Both arrays sorted by bundle. */
static bool same_bundles(const struct sb_bundle *a, size_t na, const struct sb_bundle *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!sb_bundle_equal(&a[i], &b[i]))
			return false;
	return true;
}

/* Reads a transceiver's running bundles (configuration) into a sorted array. */
static int read_running_bundles(struct dev_ctx *d, struct sb_bundle **out, size_t *n,
				struct sb_error *err)
{
	struct sb_bundle_state *s = NULL;
	int rc = sb_device_read_bundles(d->dev, false, SB_DS_RUNNING, &s, n, NULL, err);
	if (rc)
		return rc;
	*out = malloc((*n ? *n : 1) * sizeof(**out));
	for (size_t i = 0; *out && i < *n; i++)
		(*out)[i] = s[i].set;
	free(s);
	return *out ? 0 : -ENOMEM;
}

/* Records what running was proven to hold as the session's image: the pre-image or the target. */
static void remember(struct dev_ctx *d, bool target)
{
	if (d->trx)
		sb_device_set_image_bundles(d->dev, target ? d->target_b : d->pre_b,
					    target ? d->n_target_b : d->n_pre_b);
	else
		sb_device_set_image_xcs(d->dev, target ? d->target : d->pre,
					target ? d->n_target : d->n_pre);
}

/*
 * The pre-image: the cross-connects of a switch, the bundles of a
 * transceiver. On a confirmed-commit device it is the session's last
 * verified image when one is known (no RPC): its rollback before the
 * confirm is the device's own cancel-commit, and a stale image is caught
 * (S1-S3 at the top of sb_txn.c). Other devices, whose rollback is always a
 * compensating edit, read running now, and so does a fresh session.
 */
static int read_pre_image(struct dev_ctx *d, struct sb_error *err)
{
	if (sb_device_strategy(d->dev) == SB_STRATEGY_CONFIRMED &&
	    !(d->trx ? sb_device_image_bundles(d->dev, &d->pre_b, &d->n_pre_b)
		     : sb_device_image_xcs(d->dev, &d->pre, &d->n_pre))) {
		d->pre_cached = true;
		return 0;
	}
	int rc = d->trx ? read_running_bundles(d, &d->pre_b, &d->n_pre_b, err)
			: read_running(d, &d->pre, &d->n_pre, err);
	if (!rc)
		remember(d, false);
	return rc;
}

/* Waits until the device's switching time has passed since its commit: earlier polls see `pending`.
 */
static void wait_switch_time(const struct dev_ctx *d)
{
	sb_exec_sleep_until_us(d->committed_us + sb_device_switch_us(d->dev));
}

/* Whether running (read now) equals the pre-image, and whether it equals the target. */
static int running_is_pre_image(struct dev_ctx *d, bool *same, bool *is_target,
				struct sb_error *err)
{
	int rc;
	if (d->trx) {
		struct sb_bundle *now = NULL;
		size_t n = 0;
		if ((rc = read_running_bundles(d, &now, &n, err)))
			return rc;
		*same = same_bundles(now, n, d->pre_b, d->n_pre_b);
		*is_target = same_bundles(now, n, d->target_b, d->n_target_b);
		free(now);
		return 0;
	}
	struct sb_xc *now = NULL;
	size_t n = 0;
	if ((rc = read_running(d, &now, &n, err)))
		return rc;
	*same = same_xcs(now, n, d->pre, d->n_pre);
	*is_target = same_xcs(now, n, d->target, d->n_target);
	free(now);
	return 0;
}

/* The one edit of the transaction, from the pre-image to the target. */
static int edit_to_target(struct dev_ctx *d, enum sb_datastore ds, struct sb_error *err)
{
	if (d->trx)
		return sb_device_edit_bundles(d->dev, ds, d->target_b, d->n_target_b, err);
	return sb_device_edit_xcs(d->dev, ds, d->pre, d->n_pre, d->target, d->n_target, err);
}

/* The compensating edit: back to the pre-image. */
static int edit_to_pre_image(struct dev_ctx *d, enum sb_datastore ds, struct sb_error *err)
{
	if (d->trx)
		return sb_device_edit_bundles(d->dev, ds, d->pre_b, d->n_pre_b, err);
	return sb_device_replace_xcs(d->dev, ds, d->pre, d->n_pre, err);
}

/*
 * One attempt at step 1 on a device: connect (a session found dead while
 * idle is replaced first, sb_device_connect), lock, pre-image, edit,
 * validate. Returns 0, or the failing call's negative errno with err set.
 */
static int prepare_once(struct dev_ctx *d, bool retry, struct sb_error *err)
{
	int64_t deadline = sb_now_ms() + d->t->opts.connect_timeout_ms;
	int rc;
	/* a device we could not reach got no RPC: nothing to roll back there */
	if ((rc = sb_device_connect_until(d->dev, deadline, err)))
		return rc;
	d->touched = true;
	d->res->strategy = sb_device_strategy(d->dev);
	enum sb_datastore ds = uses_candidate(d) ? SB_DS_CANDIDATE : SB_DS_RUNNING;
	if ((rc = sb_device_lock(d->dev, ds, err)))
		return rc;
	d->locked = true;
	/* no discard-changes: a lock on the candidate is only granted when it
	 * holds no uncommitted changes (RFC 6241 7.5), so it equals running;
	 * on a retry one discard anyway, for a server that kept the lost
	 * session's changes */
	if (retry && ds == SB_DS_CANDIDATE && (rc = sb_device_discard(d->dev, err)))
		return rc;
	if ((rc = read_pre_image(d, err)))
		return rc;
	d->have_pre = true;
	if (!uses_candidate(d))
		return 0; /* writable-running devices are edited at commit time */
	d->edited = true;
	if (!sb_device_should_validate(d->dev))
		return edit_to_target(d, SB_DS_CANDIDATE, err);
	/* P1: edit + validate pipelined (one round trip) */
	if (d->trx)
		return sb_device_edit_bundles_validate(d->dev, d->target_b, d->n_target_b, err);
	return sb_device_edit_xcs_validate(d->dev, d->pre, d->n_pre, d->target, d->n_target, err);
}

/*
 * Ends a job running as a coroutine of a slice's loop before it blocks:
 * the driver moves the rest of the step to an executor task of its own
 * (sb_txn.c's dev_coro_run), where the job runs again with in_loop false.
 */
static void ask_for_thread(struct dev_ctx *d)
{
	d->wants_thread = true;
}

/*
 * Step 1. A session lost in the middle (-ECONNRESET: the device restarted,
 * or closed the session) is retried ONCE on a fresh session (R1 at the
 * top): nothing was committed on the device, and the session's end released
 * its lock and discarded its candidate changes, so the attempt starts over
 * from the lock. A deadline (-ETIMEDOUT) is not retried: the hung RPC may
 * still run on the device and hold the lock.
 */
void sbt_job_prepare(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	d->ok = true;
	/* the device is ours until txn_end: a keepalive pass leaves it alone */
	if (!d->claimed) {
		if (d->in_loop && !sb_device_try_claim(d->dev))
			return ask_for_thread(d); /* a keepalive holds it: wait on a thread */
		if (!d->in_loop)
			sb_device_claim(d->dev);
		d->claimed = true;
	}
	/* a connect (with its backoff) would block every device of the loop */
	if (d->in_loop && !sb_device_connected(d->dev))
		return ask_for_thread(d);
	int rc = prepare_once(d, false, &err);
	if (rc == -ECONNRESET) {
		free(d->pre);
		free(d->pre_b);
		d->pre = NULL;
		d->pre_b = NULL;
		d->n_pre = d->n_pre_b = 0;
		d->have_pre = d->pre_cached = d->locked = d->edited = false;
		d->res->prepare_retried = true;
		atomic_fetch_add(&d->t->e->counters.prepare_retries, 1);
		rc = prepare_once(d, true, &err);
	}
	if (rc)
		fail_dev(d, SB_STEP_PREPARE, &err);
}

void sbt_job_commit(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	d->ok = true;
	d->maybe_committed = true;
	d->commit_session = sb_device_reconnects(d->dev);
	int rc;
	switch (sb_device_strategy(d->dev)) {
	case SB_STRATEGY_CONFIRMED:
		/* no persist: the commit belongs to this session, so a session
		 * that dies (ocsd killed, or a hung RPC we gave up on) reverts
		 * the device at once; the timeout covers a silent peer */
		rc = sb_device_commit(d->dev, d->t->opts.confirm_timeout_s, NULL, NULL, &err);
		break;
	case SB_STRATEGY_CANDIDATE:
		rc = sb_device_commit(d->dev, 0, NULL, NULL, &err);
		break;
	default:
		rc = edit_to_target(d, SB_DS_RUNNING, &err);
		break;
	}
	d->committed_us = now_us();
	if (rc)
		fail_dev(d, SB_STEP_COMMIT, &err);
}

/* Names the first intended cross-connect the read-back lacks (or the first extra one). */
static void describe_difference(const struct dev_ctx *d, char *msg, size_t len)
{
	for (size_t i = 0; i < d->n_target; i++) {
		const struct sb_xc *t = &d->target[i];
		const struct sb_xc *got = NULL;
		for (size_t j = 0; j < d->n_readback; j++)
			if (d->readback[j].in == t->in)
				got = &d->readback[j];
		if (!got || got->out != t->out) {
			char have[32] = "nothing";
			if (got)
				snprintf(have, sizeof(have), "%u -> %u", got->in, got->out);
			snprintf(msg, len,
				 "read-back differs from the intent: %u -> %u expected, device "
				 "holds "
				 "%s (%zu cross-connects read, %zu intended; commit without "
				 "effect?)",
				 t->in, t->out, have, d->n_readback, d->n_target);
			return;
		}
	}
	for (size_t j = 0; j < d->n_readback; j++)
		if (!find_target(d, d->readback[j].in)) {
			snprintf(msg, len, "read-back differs from the intent: unexpected %u -> %u",
				 d->readback[j].in, d->readback[j].out);
			return;
		}
	snprintf(msg, len, "read-back differs from the intent");
}

/* Names the first bundle whose read-back differs from the target. */
static void describe_bundle_difference(const struct dev_ctx *d, char *msg, size_t len)
{
	for (size_t i = 0; i < d->n_target_b; i++) {
		const struct sb_bundle *t = &d->target_b[i];
		const struct sb_bundle_state *got = NULL;
		for (size_t j = 0; j < d->n_readback_b; j++)
			if (d->readback_b[j].set.bundle == t->bundle)
				got = &d->readback_b[j];
		if (!got || !sb_bundle_equal(&got->set, t)) {
			snprintf(msg, len,
				 "read-back differs from the intent: bundle %u %s %u %s expected, "
				 "device holds %s (commit without effect?)",
				 t->bundle, t->path ? "external" : "loopback", t->distance,
				 t->dir ? "down" : "up",
				 !got		 ? "nothing"
				 : got->set.path ? "another external path"
						 : "loopback");
			return;
		}
	}
	snprintf(msg, len, "read-back differs from the intent: %zu bundles read, %zu intended",
		 d->n_readback_b, d->n_target_b);
}

/*
 * Step 3 on a transceiver: read back until every bundle holds its target
 * and every selected path is `active`. A `failed` path (the peer is down,
 * loss of light) fails at once: waiting cannot mend it.
 */
static void job_verify_bundles(struct dev_ctx *d)
{
	struct sb_error err = {0};
	int64_t deadline = sb_now_ms() + d->t->opts.verify_timeout_ms;
	long poll_us = 200; /* doubles up to 2 ms: a transceiver switches in under 1 ms */
	wait_switch_time(d);
	for (;;) {
		bool faulty = false;
		free(d->readback_b);
		d->readback_b = NULL;
		if (sb_device_read_bundles(d->dev, true, SB_DS_RUNNING, &d->readback_b,
					   &d->n_readback_b, &faulty, &err))
			return fail_dev(d, SB_STEP_VERIFY, &err);
		size_t pending = 0, broken = 0;
		int first_broken = -1;
		bool same = d->n_readback_b == d->n_target_b;
		for (size_t i = 0; i < d->n_readback_b; i++) {
			const struct sb_bundle_state *b = &d->readback_b[i];
			same = same && sb_bundle_equal(&b->set, &d->target_b[i]);
			pending += b->status == SB_PATH_PENDING;
			if (b->status == SB_PATH_FAILED && first_broken < 0)
				first_broken = b->set.bundle;
			broken += b->status == SB_PATH_FAILED;
		}
		if (!same) {
			char msg[240];
			describe_bundle_difference(d, msg, sizeof(msg));
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -EPROTO, msg);
		}
		if (faulty || broken) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 faulty ? "the node is faulty"
					: "%zu selected path(s) failed (first: bundle %d; peer "
					  "down?)",
				 broken, first_broken);
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -EIO, msg);
		}
		if (!pending)
			return;
		if (sb_now_ms() >= deadline) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%zu path(s) still pending after %d ms", pending,
				 d->t->opts.verify_timeout_ms);
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -ETIMEDOUT, msg);
		}
		sb_exec_sleep_until_us(now_us() + poll_us);
		if (poll_us < 2000)
			poll_us *= 2;
	}
}

void sbt_job_verify(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	int64_t deadline = sb_now_ms() + d->t->opts.verify_timeout_ms;
	long poll_ms = 2; /* doubles up to 8 ms: switching takes 1..25 ms */
	d->ok = true;
	if (d->trx)
		return job_verify_bundles(d);
	wait_switch_time(d);
	for (;;) {
		struct sb_xc_state *s = NULL;
		size_t n = 0;
		if (sb_device_read_xcs(d->dev, true, SB_DS_RUNNING, &s, &n, &err))
			return fail_dev(d, SB_STEP_VERIFY, &err);
		free(d->readback);
		d->readback = states_to_xcs(s, n);
		d->n_readback = n;
		size_t pending = 0, broken = 0;
		for (size_t i = 0; i < n; i++) {
			pending += s[i].status == SB_XC_STATUS_PENDING;
			broken += s[i].status == SB_XC_STATUS_FAILED ||
				  s[i].status == SB_XC_STATUS_INVALID;
		}
		free(s);
		if (!d->readback)
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -ENOMEM, "out of memory");
		if (!same_xcs(d->readback, d->n_readback, d->target, d->n_target)) {
			char msg[240];
			describe_difference(d, msg, sizeof(msg));
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -EPROTO, msg);
		}
		if (broken) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%zu cross-connects failed or invalid", broken);
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -EIO, msg);
		}
		if (!pending)
			return;
		if (sb_now_ms() >= deadline) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%zu cross-connects still pending after %d ms",
				 pending, d->t->opts.verify_timeout_ms);
			return sbt_fail_dev_msg(d, SB_STEP_VERIFY, "get", -ETIMEDOUT, msg);
		}
		sb_exec_sleep_until_us(now_us() + poll_ms * 1000);
		if (poll_ms < 8)
			poll_ms *= 2;
	}
}

void sbt_job_confirm(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	d->ok = true;
	d->confirm_sent = true;
	/* only the committing session may confirm: if it is gone, the device
	 * has reverted by itself and the transaction rolls back */
	if (sb_device_strategy(d->dev) == SB_STRATEGY_CONFIRMED &&
	    sb_device_commit(d->dev, 0, NULL, NULL, &err))
		return fail_dev(d, SB_STEP_CONFIRM, &err);
	d->confirmed = true;
	remember(d, true); /* read back equal to the target and now confirmed */
	if (d->locked &&
	    sb_device_unlock(d->dev, uses_candidate(d) ? SB_DS_CANDIDATE : SB_DS_RUNNING, &err))
		sb_device_disconnect(d->dev); /* closing the session releases the lock */
	d->locked = false;
}

/* S2: a stale pre-image on a confirmed device: the error, never an edit. */
static int stale_image(struct dev_ctx *d, struct sb_error *err)
{
	*err = (struct sb_error){.code = -ESTALE};
	snprintf(err->device, sizeof(err->device), "%s", sb_device_name(d->dev));
	snprintf(err->operation, sizeof(err->operation), "get-config");
	snprintf(err->message, sizeof(err->message),
		 "running differs from the image ocsd verified last (changed behind its "
		 "back?) after the change was confirmed: no compensating edit from a stale "
		 "pre-image; reconcile the device");
	return -ESTALE;
}

/*
 * One attempt to bring a device back to its pre-image and prove it, its
 * connect bounded by the rollback's deadline too (R3: a device that refuses
 * connections fails the rollback at rollback_timeout_ms, not at the longer
 * connect timeout). Returns 0 when proven, or an error that may clear up (a
 * stale session of ours still holding the candidate lock until its hung RPC
 * ends).
 */
static int rollback_once(struct dev_ctx *d, int64_t rollback_deadline, struct sb_error *err)
{
	if (!sb_device_connected(d->dev))
		d->locked = false; /* the lock died with the session */
	int64_t deadline = sb_now_ms() + d->t->opts.connect_timeout_ms;
	if (deadline > rollback_deadline)
		deadline = rollback_deadline;
	int rc = sb_device_connect_until(d->dev, deadline, err);
	if (rc)
		return rc;
	enum sb_datastore ds = uses_candidate(d) ? SB_DS_CANDIDATE : SB_DS_RUNNING;
	if (!d->have_pre) {
		/* failed before reading the pre-image: nothing was edited */
		if (d->locked && sb_device_unlock(d->dev, ds, err))
			sb_device_disconnect(d->dev);
		d->locked = false;
		return 0;
	}
	if (d->maybe_committed && !d->confirmed &&
	    sb_device_strategy(d->dev) == SB_STRATEGY_CONFIRMED)
		sb_device_cancel_commit(d->dev, NULL, err); /* may be gone already: read back */
	if (d->locked && ds == SB_DS_CANDIDATE && (rc = sb_device_discard(d->dev, err)))
		return rc;
	if (d->maybe_committed && !d->locked &&
	    sb_device_strategy(d->dev) != SB_STRATEGY_CONFIRMED) {
		/* R4: the session that sent our edit of running (or our plain
		 * commit) was lost, and such a change is for good once it lands:
		 * an RPC of it still running on the device lands after any read
		 * made now. The datastore's lock waits it out (the stale session
		 * holds it until it ends; refused meanwhile, retried until
		 * rollback_timeout_ms), and what is read under it is final. */
		if ((rc = sb_device_lock(d->dev, ds, err)))
			return rc;
		d->locked = true;
	}
	bool same = false, is_target = false;
	if ((rc = running_is_pre_image(d, &same, &is_target, err)))
		return rc;
	if (!same && d->pre_cached && !is_target) {
		/* S2: running is neither the image ocsd verified last nor our
		 * target, so the device was changed behind ocsd's back: that
		 * image is stale and never feeds a compensating edit. Unconfirmed,
		 * the device has undone our commit itself (cancel-commit, or the
		 * session's end) or never took it: nothing of ours is left. */
		sb_device_forget_image(d->dev);
		d->res->stale_image = true;
		if (d->maybe_committed && d->confirmed)
			return stale_image(d, err);
		if (d->locked && sb_device_unlock(d->dev, ds, err))
			sb_device_disconnect(d->dev);
		d->locked = false;
		return 0;
	}
	if (!same && is_target && d->maybe_committed && !d->confirm_sent &&
	    sb_device_strategy(d->dev) == SB_STRATEGY_CONFIRMED &&
	    sb_device_reconnects(d->dev) != d->commit_session) {
		/* S4: our commit was never confirmed and its session is gone, so
		 * the device reverted it: the target it shows is another
		 * session's (a new leader's, after it fenced ours off). */
		sb_device_forget_image(d->dev);
		d->res->stale_image = true;
		if (d->locked && sb_device_unlock(d->dev, ds, err))
			sb_device_disconnect(d->dev);
		d->locked = false;
		return 0;
	}
	if (!same && d->t->hooks && d->t->hooks->compensate) {
		char why[sizeof(err->message)] = "";

		if ((rc = d->t->hooks->compensate(d->t->hooks->arg, why, sizeof(why)))) {
			*err = (struct sb_error){.code = -EPERM};
			snprintf(err->device, sizeof(err->device), "%s", sb_device_name(d->dev));
			snprintf(err->operation, sizeof(err->operation), "rollback");
			snprintf(err->message, sizeof(err->message), "%s", why);
			return -EPERM;
		}
	}
	if (!same) {
		/* compensating edit from the pre-image */
		if (!d->locked) {
			if ((rc = sb_device_lock(d->dev, ds, err)))
				return rc;
			d->locked = true;
		}
		if (ds == SB_DS_CANDIDATE && (rc = sb_device_discard(d->dev, err)))
			return rc;
		if ((rc = edit_to_pre_image(d, ds, err)))
			return rc;
		if (ds == SB_DS_CANDIDATE && (rc = sb_device_commit(d->dev, 0, NULL, NULL, err)))
			return rc;
		if ((rc = running_is_pre_image(d, &same, &is_target, err)))
			return rc;
		if (!same) {
			*err = (struct sb_error){.code = -EPROTO};
			snprintf(err->device, sizeof(err->device), "%s", sb_device_name(d->dev));
			snprintf(err->operation, sizeof(err->operation), "get-config");
			snprintf(err->message, sizeof(err->message),
				 "running still differs from the pre-image after the compensating "
				 "edit");
			return -EPROTO;
		}
	}
	remember(d, false); /* running read back equal to the pre-image */
	if (d->locked && sb_device_unlock(d->dev, ds, err))
		sb_device_disconnect(d->dev);
	d->locked = false;
	return 0;
}

void sbt_job_rollback(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	if (!d->touched)
		return;
	int64_t deadline = sb_now_ms() + d->t->opts.rollback_timeout_ms;
	int rc;
	while ((rc = rollback_once(d, deadline, &err))) {
		/* a stale image, or a compensating edit refused (hooks.compensate) */
		if (rc == -ESTALE || rc == -EPERM || sb_now_ms() >= deadline) {
			sb_device_forget_image(d->dev); /* what running holds is unknown */
			d->res->outcome = SB_DEV_ROLLBACK_FAILED;
			d->res->rollback_error = err;
			return;
		}
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
	d->res->outcome = SB_DEV_ROLLED_BACK;
}
