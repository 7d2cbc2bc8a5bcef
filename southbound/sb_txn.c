/*
 * sb_txn.c - the transaction engine (API and threading in sb_txn.h).
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
 *      exactly its target with every connection `connected` and the verify
 *      callback passed on what was read (SB_VERIFY_READBACK).
 *  I5. After any failure every device the transaction touched is rolled
 *      back and read back (retrying until rollback_timeout_ms while a stale
 *      session of ours, stuck in a hung RPC, still holds the candidate
 *      lock). Devices already confirmed get a compensating edit from their
 *      pre-image. The outcome is ROLLED_BACK only when every read-back
 *      equals the pre-image, FAILED otherwise, with the device and the
 *      reason in the result. Nothing is only logged.
 *  I6. Running is never locked across a confirmed commit; the candidate
 *      lock taken in step 1 is released on every path (or dies with the
 *      session).
 *  I7. persist_outcome runs exactly once for every transaction that got
 *      past the plan check, after the last device I/O.
 */
#include "sb_txn.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- pool: fixed threads, one FIFO of jobs, a latch per step ----------- */

struct latch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t remaining;
};

struct job {
	void (*fn)(void *arg);
	void *arg;
	struct latch *latch;
};

struct sb_engine {
	pthread_mutex_t mu; /* guards queue, head, len, stop */
	pthread_cond_t cv;
	struct job *queue;
	size_t cap, head, len;
	bool stop;
	pthread_t *threads;
	int n_threads;
	struct sb_txn_counters counters;
};

static void latch_done(struct latch *l)
{
	pthread_mutex_lock(&l->mu);
	if (--l->remaining == 0)
		pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

static void *pool_main(void *arg)
{
	struct sb_engine *e = arg;
	for (;;) {
		pthread_mutex_lock(&e->mu);
		while (!e->len && !e->stop)
			pthread_cond_wait(&e->cv, &e->mu);
		if (!e->len && e->stop) {
			pthread_mutex_unlock(&e->mu);
			break;
		}
		struct job j = e->queue[e->head];
		e->head = (e->head + 1) % e->cap;
		e->len--;
		pthread_mutex_unlock(&e->mu);
		j.fn(j.arg);
		latch_done(j.latch);
	}
	return NULL;
}

static int pool_submit(struct sb_engine *e, void (*fn)(void *), void *arg, struct latch *l)
{
	pthread_mutex_lock(&e->mu);
	if (e->len == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 256;
		struct job *q = malloc(cap * sizeof(*q));
		if (!q) {
			pthread_mutex_unlock(&e->mu);
			return -ENOMEM;
		}
		for (size_t i = 0; i < e->len; i++)
			q[i] = e->queue[(e->head + i) % e->cap];
		free(e->queue);
		e->queue = q;
		e->cap = cap;
		e->head = 0;
	}
	e->queue[(e->head + e->len) % e->cap] = (struct job){fn, arg, l};
	e->len++;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int sb_engine_new(int threads, struct sb_engine **out)
{
	if (threads < 1 || threads > 1024)
		return -EINVAL;
	struct sb_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->threads = calloc((size_t)threads, sizeof(pthread_t));
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&e->threads[i], NULL, pool_main, e))
			break;
		e->n_threads++;
	}
	if (e->n_threads == 0) {
		sb_engine_free(e);
		return -EAGAIN;
	}
	*out = e;
	return 0;
}

void sb_engine_free(struct sb_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < e->n_threads; i++)
		pthread_join(e->threads[i], NULL);
	free(e->threads);
	free(e->queue);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
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

struct txn;

struct dev_ctx {
	struct txn *t;
	size_t index;
	struct sb_device *dev;
	const struct sb_xc *target;
	size_t n_target;
	struct sb_xc *pre; /* running before the transaction (pre-image) */
	size_t n_pre;
	bool have_pre;
	bool touched;         /* received at least one RPC of this transaction */
	bool locked;          /* holds the candidate (or running) lock */
	bool edited;          /* the candidate holds the change */
	bool maybe_committed; /* a commit (or running edit) was sent */
	bool confirmed;
	struct sb_xc *readback;
	size_t n_readback;
	bool ok; /* the current step succeeded */
	struct sb_txn_device_result *res;
};

struct txn {
	struct sb_engine *e;
	const struct sb_txn_plan *plan;
	struct sb_txn_options opts;
	struct dev_ctx *devs;
};

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

static void fail_dev_msg(struct dev_ctx *d, enum sb_txn_step step, const char *op, int code,
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

static void job_prepare(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	int64_t deadline = sb_now_ms() + d->t->opts.connect_timeout_ms;
	d->ok = true;
	/* a device we could not reach got no RPC: nothing to roll back there */
	if (sb_device_connect_until(d->dev, deadline, &err))
		return fail_dev(d, SB_STEP_PREPARE, &err);
	d->touched = true;
	d->res->strategy = sb_device_strategy(d->dev);
	enum sb_datastore ds = uses_candidate(d) ? SB_DS_CANDIDATE : SB_DS_RUNNING;
	if (sb_device_lock(d->dev, ds, &err))
		return fail_dev(d, SB_STEP_PREPARE, &err);
	d->locked = true;
	/* no discard-changes: a lock on the candidate is only granted when it
	 * holds no uncommitted changes (RFC 6241 7.5), so it equals running */
	if (read_running(d, &d->pre, &d->n_pre, &err))
		return fail_dev(d, SB_STEP_PREPARE, &err);
	d->have_pre = true;
	if (!uses_candidate(d))
		return; /* writable-running devices are edited at commit time */
	d->edited = true;
	if (sb_device_edit_xcs(d->dev, SB_DS_CANDIDATE, d->pre, d->n_pre, d->target, d->n_target,
			       &err))
		return fail_dev(d, SB_STEP_PREPARE, &err);
	if (sb_device_should_validate(d->dev) && sb_device_validate(d->dev, &err))
		return fail_dev(d, SB_STEP_PREPARE, &err);
}

static void job_commit(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	d->ok = true;
	d->maybe_committed = true;
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
		rc = sb_device_edit_xcs(d->dev, SB_DS_RUNNING, d->pre, d->n_pre, d->target,
					d->n_target, &err);
		break;
	}
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
				 "read-back differs from the intent: %u -> %u expected, device holds "
				 "%s (%zu cross-connects read, %zu intended; commit without effect?)",
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

static void job_verify(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	int64_t deadline = sb_now_ms() + d->t->opts.verify_timeout_ms;
	long poll_ms = 2; /* doubles up to 8 ms: switching takes 1..25 ms */
	d->ok = true;
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
			return fail_dev_msg(d, SB_STEP_VERIFY, "get", -ENOMEM, "out of memory");
		if (!same_xcs(d->readback, d->n_readback, d->target, d->n_target)) {
			char msg[240];
			describe_difference(d, msg, sizeof(msg));
			return fail_dev_msg(d, SB_STEP_VERIFY, "get", -EPROTO, msg);
		}
		if (broken) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%zu cross-connects failed or invalid", broken);
			return fail_dev_msg(d, SB_STEP_VERIFY, "get", -EIO, msg);
		}
		if (!pending)
			return;
		if (sb_now_ms() >= deadline) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%zu cross-connects still pending after %d ms", pending,
				 d->t->opts.verify_timeout_ms);
			return fail_dev_msg(d, SB_STEP_VERIFY, "get", -ETIMEDOUT, msg);
		}
		struct timespec ts = {0, poll_ms * 1000000};
		nanosleep(&ts, NULL);
		if (poll_ms < 8)
			poll_ms *= 2;
	}
}

static void job_confirm(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	d->ok = true;
	/* only the committing session may confirm: if it is gone, the device
	 * has reverted by itself and the transaction rolls back */
	if (sb_device_strategy(d->dev) == SB_STRATEGY_CONFIRMED &&
	    sb_device_commit(d->dev, 0, NULL, NULL, &err))
		return fail_dev(d, SB_STEP_CONFIRM, &err);
	d->confirmed = true;
	if (d->locked && sb_device_unlock(d->dev, uses_candidate(d) ? SB_DS_CANDIDATE : SB_DS_RUNNING,
					  &err))
		sb_device_disconnect(d->dev); /* closing the session releases the lock */
	d->locked = false;
}

/*
 * One attempt to bring a device back to its pre-image and prove it.
 * Returns 0 when proven, or an error that may clear up (a stale session of
 * ours still holding the candidate lock until its hung RPC ends).
 */
static int rollback_once(struct dev_ctx *d, struct sb_error *err)
{
	if (!sb_device_connected(d->dev))
		d->locked = false; /* the lock died with the session */
	int64_t deadline = sb_now_ms() + d->t->opts.connect_timeout_ms;
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
	struct sb_xc *now = NULL;
	size_t n = 0;
	if ((rc = read_running(d, &now, &n, err)))
		return rc;
	bool same = same_xcs(now, n, d->pre, d->n_pre);
	free(now);
	if (!same) {
		/* compensating edit from the pre-image */
		if (!d->locked) {
			if ((rc = sb_device_lock(d->dev, ds, err)))
				return rc;
			d->locked = true;
		}
		if (ds == SB_DS_CANDIDATE && (rc = sb_device_discard(d->dev, err)))
			return rc;
		if ((rc = sb_device_replace_xcs(d->dev, ds, d->pre, d->n_pre, err)))
			return rc;
		if (ds == SB_DS_CANDIDATE && (rc = sb_device_commit(d->dev, 0, NULL, NULL, err)))
			return rc;
		if ((rc = read_running(d, &now, &n, err)))
			return rc;
		same = same_xcs(now, n, d->pre, d->n_pre);
		free(now);
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
	if (d->locked && sb_device_unlock(d->dev, ds, err))
		sb_device_disconnect(d->dev);
	d->locked = false;
	return 0;
}

static void job_rollback(void *arg)
{
	struct dev_ctx *d = arg;
	struct sb_error err = {0};
	if (!d->touched)
		return;
	int64_t deadline = sb_now_ms() + d->t->opts.rollback_timeout_ms;
	while (rollback_once(d, &err)) {
		if (sb_now_ms() >= deadline) {
			d->res->outcome = SB_DEV_ROLLBACK_FAILED;
			d->res->rollback_error = err;
			return;
		}
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
	d->res->outcome = SB_DEV_ROLLED_BACK;
}

/* Runs fn on every device in parallel; returns how many failed (d->ok). */
static size_t run_step(struct txn *t, void (*fn)(void *))
{
	size_t n = t->plan->n_devices;
	struct latch l = {.remaining = n};
	pthread_mutex_init(&l.mu, NULL);
	pthread_cond_init(&l.cv, NULL);
	for (size_t i = 0; i < n; i++) {
		t->devs[i].ok = true;
		if (pool_submit(t->e, fn, &t->devs[i], &l)) {
			fn(&t->devs[i]); /* out of memory: run inline */
			latch_done(&l);
		}
	}
	pthread_mutex_lock(&l.mu);
	while (l.remaining)
		pthread_cond_wait(&l.cv, &l.mu);
	pthread_mutex_unlock(&l.mu);
	pthread_cond_destroy(&l.cv);
	pthread_mutex_destroy(&l.mu);
	size_t failed = 0;
	for (size_t i = 0; i < n; i++)
		failed += !t->devs[i].ok;
	return failed;
}

static int check_plan(const struct sb_txn_plan *plan)
{
	if (!plan || !plan->devices || plan->n_devices == 0)
		return -EINVAL;
	for (size_t i = 0; i < plan->n_devices; i++) {
		const struct sb_txn_device *a = &plan->devices[i];
		if (!a->dev || (a->n_target && !a->target))
			return -EINVAL;
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
	for (size_t i = 0; i < n; i++) {
		struct dev_ctx *d = &t->devs[i];
		v[i].index = i;
		v[i].xcs = phase == SB_VERIFY_PLAN ? d->target : d->readback;
		v[i].n = phase == SB_VERIFY_PLAN ? d->n_target : d->n_readback;
	}
	int rc = hooks->verify(hooks->arg, phase, v, n, why, why_len);
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

static void roll_back_all(struct txn *t, struct sb_txn_result *r, enum sb_txn_step failed)
{
	int64_t t0 = sb_now_ms();
	r->failed_step = failed;
	run_step(t, job_rollback);
	r->step_ms[SB_STEP_ROLLBACK] = sb_now_ms() - t0;
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

int sb_engine_run(struct sb_engine *e, const struct sb_txn_plan *plan,
		  const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		  struct sb_txn_result *r)
{
	memset(r, 0, sizeof(*r));
	if (check_plan(plan))
		return -EINVAL;
	int64_t t_start = sb_now_ms();
	struct txn t = {.e = e, .plan = plan};
	if (opts)
		t.opts = *opts;
	if (t.opts.confirm_timeout_s <= 0)
		t.opts.confirm_timeout_s = 30;
	if (t.opts.verify_timeout_ms <= 0)
		t.opts.verify_timeout_ms = 2000;
	if (t.opts.connect_timeout_ms <= 0)
		t.opts.connect_timeout_ms = 3000;
	if (t.opts.rollback_timeout_ms <= 0)
		t.opts.rollback_timeout_ms = 10000;
	size_t n = plan->n_devices;
	r->n_devices = n;
	r->devices = calloc(n, sizeof(*r->devices));
	t.devs = calloc(n, sizeof(*t.devs));
	if (!r->devices || !t.devs) {
		free(t.devs);
		sb_txn_result_clear(r);
		return -ENOMEM;
	}
	atomic_fetch_add(&e->counters.started, 1);
	for (size_t i = 0; i < n; i++) {
		struct dev_ctx *d = &t.devs[i];
		d->t = &t;
		d->index = i;
		d->dev = plan->devices[i].dev;
		d->n_target = plan->devices[i].n_target;
		d->target = malloc((d->n_target ? d->n_target : 1) * sizeof(struct sb_xc));
		if (d->target) {
			memcpy((void *)d->target, plan->devices[i].target,
			       d->n_target * sizeof(struct sb_xc));
			qsort((void *)d->target, d->n_target, sizeof(struct sb_xc), sb_xc_cmp);
		}
		d->res = &r->devices[i];
	}

	/* step 0: the plan passes the independent checker, the intent is saved */
	char why[256] = "";
	int64_t t0 = sb_now_ms();
	if (verify_cb(&t, hooks, SB_VERIFY_PLAN, why, sizeof(why))) {
		r->outcome = SB_TXN_REFUSED;
		r->failed_step = SB_STEP_PLAN;
		snprintf(r->message, sizeof(r->message), "plan refused by the checker: %s", why);
	} else if (hooks && hooks->persist_intent && hooks->persist_intent(hooks->arg, plan)) {
		r->outcome = SB_TXN_REFUSED;
		r->failed_step = SB_STEP_PLAN;
		snprintf(r->message, sizeof(r->message), "the intent could not be persisted");
	}
	r->step_ms[SB_STEP_PLAN] = sb_now_ms() - t0;
	if (r->outcome == SB_TXN_REFUSED) {
		finish_result(&t, r);
		goto out_no_hook;
	}

	/* steps 1..4 */
	t0 = sb_now_ms();
	size_t failed = run_step(&t, job_prepare);
	r->step_ms[SB_STEP_PREPARE] = sb_now_ms() - t0;
	if (failed) {
		roll_back_all(&t, r, SB_STEP_PREPARE);
		goto out;
	}
	t0 = sb_now_ms();
	failed = run_step(&t, job_commit);
	r->step_ms[SB_STEP_COMMIT] = sb_now_ms() - t0;
	if (failed) {
		roll_back_all(&t, r, SB_STEP_COMMIT);
		goto out;
	}
	t0 = sb_now_ms();
	failed = run_step(&t, job_verify);
	if (!failed && verify_cb(&t, hooks, SB_VERIFY_READBACK, why, sizeof(why))) {
		r->step_ms[SB_STEP_VERIFY] = sb_now_ms() - t0;
		/* the checker judges the fabric, not one device: blame the first */
		fail_dev_msg(&t.devs[0], SB_STEP_VERIFY, "l2-check", -EPROTO, why);
		roll_back_all(&t, r, SB_STEP_VERIFY);
		goto out;
	}
	r->step_ms[SB_STEP_VERIFY] = sb_now_ms() - t0;
	if (failed) {
		roll_back_all(&t, r, SB_STEP_VERIFY);
		goto out;
	}
	t0 = sb_now_ms();
	failed = run_step(&t, job_confirm);
	r->step_ms[SB_STEP_CONFIRM] = sb_now_ms() - t0;
	if (failed) {
		roll_back_all(&t, r, SB_STEP_CONFIRM);
		goto out;
	}
	r->outcome = SB_TXN_COMMITTED;
	for (size_t i = 0; i < n; i++)
		r->devices[i].outcome = SB_DEV_CONFIRMED;
	snprintf(r->message, sizeof(r->message), "committed on %zu device(s)", n);
out:
	finish_result(&t, r);
	r->total_ms = sb_now_ms() - t_start;
	if (hooks && hooks->persist_outcome)
		hooks->persist_outcome(hooks->arg, plan, r);
out_no_hook:
	r->total_ms = sb_now_ms() - t_start;
	for (size_t i = 0; i < n; i++) {
		free((void *)t.devs[i].target);
		free(t.devs[i].pre);
		free(t.devs[i].readback);
	}
	free(t.devs);
	return 0;
}

/* ---- asynchronous form ---------------------------------------------------- */

struct sb_txn_handle {
	pthread_t thread;
	struct sb_engine *e;
	const struct sb_txn_plan *plan;
	const struct sb_txn_hooks *hooks;
	const struct sb_txn_options *opts;
	void (*done)(void *arg, const struct sb_txn_result *r);
	void *done_arg;
	struct sb_txn_result result;
	int rc;
};

static void *txn_thread(void *arg)
{
	struct sb_txn_handle *h = arg;
	h->rc = sb_engine_run(h->e, h->plan, h->hooks, h->opts, &h->result);
	if (h->done)
		h->done(h->done_arg, &h->result);
	return NULL;
}

int sb_engine_start(struct sb_engine *e, const struct sb_txn_plan *plan,
		    const struct sb_txn_hooks *hooks, const struct sb_txn_options *opts,
		    void (*done)(void *arg, const struct sb_txn_result *r), void *done_arg,
		    struct sb_txn_handle **out)
{
	struct sb_txn_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	*h = (struct sb_txn_handle){.e = e, .plan = plan, .hooks = hooks, .opts = opts,
				    .done = done, .done_arg = done_arg};
	if (pthread_create(&h->thread, NULL, txn_thread, h)) {
		free(h);
		return -EAGAIN;
	}
	*out = h;
	return 0;
}

int sb_txn_join(struct sb_txn_handle *h, struct sb_txn_result *result)
{
	pthread_join(h->thread, NULL);
	int rc = h->rc;
	*result = h->result;
	free(h);
	return rc;
}
