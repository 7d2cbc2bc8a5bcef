/*
 * jobs_txn.c - the device side of the job manager: one all-or-nothing
 * transaction at a time through the southbound engine (intent stored
 * first, outcome stored with the circuit change), and recovery of the
 * transactions a previous run left open. The state machine it serves is
 * drawn in jobs.c.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2check.h"

struct txn {
	struct jm *jm;
	struct job_rt *job;
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
	struct loop_node done_node; /* posts txn_done to the loop */
};

static void free_txn(struct txn *tx)
{
	if (!tx)
		return;
	for (size_t i = 0; i < tx->n_devs; i++)
		free(tx->targets[i]);
	free(tx->targets);
	free(tx->devs);
	free(tx->dev_ids);
	free(tx->others);
	free(tx->removals);
	free(tx->adds);
	free(tx);
}

/*
 * The verify hook (transaction thread): the L2 checker on the whole fabric,
 * i.e. the devices of the plan as given plus every other device as stored.
 */
static int verify_l2(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
		     size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct ocs_fabric *f = tx->jm->f;
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
		int id = tx->dev_ids[devices[i].index];

		for (size_t x = 0; x < devices[i].n; x++)
			all[k++] = (struct ocs_xc){ ocs_fabric_device_group(f, id),
						    ocs_fabric_device_in_group(f, id),
						    devices[i].xcs[x].in, devices[i].xcs[x].out };
	}
	bad = l2_check(f, all, k, &v, 1);
	free(all);
	if (bad)
		snprintf(why, why_len, "%s: %d L2 violation(s), first on group %d device %d %d->%d: %s",
			 phase == SB_VERIFY_PLAN ? "plan" : "read-back", bad, v.xc.group,
			 v.xc.device, v.xc.in, v.xc.out, v.reason);
	return bad ? -EPROTO : 0;
}

bool jm_same_device(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return a->group == b->group && a->device == b->device;
}

/* Builds the per-device targets: stored state minus removals plus additions. */
static int build_txn(struct jm *jm, struct txn *tx)
{
	const struct ocs_fabric *f = jm->f;
	int n_dev = ocs_fabric_devices(f);
	char *touched = calloc((size_t)n_dev, 1);
	size_t n = fs_count(jm->d.fs);

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
		const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;

		if (!touched[ocs_fabric_device_id(f, xc->group, xc->device)])
			tx->others[tx->n_others++] = *xc;
	}
	for (int d = 0, k = 0; d < n_dev; d++) {
		struct ocs_xc key = { ocs_fabric_device_group(f, d), ocs_fabric_device_in_group(f, d),
				      0, 0 };
		size_t cap = fs_device_xcs(jm->d.fs, d) + tx->n_adds + 1, m = 0;
		struct sb_xc *tg;

		if (!touched[d])
			continue;
		tg = malloc(cap * sizeof(*tg));
		if (!tg)
			goto oom;
		for (size_t i = 0; i < n; i++) {
			const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;
			bool removed = false;

			if (!jm_same_device(xc, &key))
				continue;
			for (size_t r = 0; r < tx->n_removals && !removed; r++)
				removed = jm_same_device(&tx->removals[r], xc) &&
					  tx->removals[r].in == xc->in;
			if (!removed)
				tg[m++] = (struct sb_xc){ (uint16_t)xc->in, (uint16_t)xc->out };
		}
		for (size_t a = 0; a < tx->n_adds; a++)
			if (jm_same_device(&tx->adds[a].xc, &key))
				tg[m++] = (struct sb_xc){ (uint16_t)tx->adds[a].xc.in,
							  (uint16_t)tx->adds[a].xc.out };
		tx->targets[k] = tg;
		tx->dev_ids[k] = d;
		tx->devs[k] = (struct sb_txn_device){ jm->d.devices[d], tg, m };
		k++;
	}
	free(touched);
	return 0;
oom:
	free(touched);
	return -ENOMEM;
}

static void txn_done(void *arg);

static void txn_posted(struct loop_node *n)
{
	txn_done(OCSD_CONTAINER_OF(n, struct txn, done_node));
}

static void txn_thread_done(void *arg, const struct sb_txn_result *r)
{
	struct txn *tx = arg;

	/* The result is taken with sb_txn_join() on the loop. */
	loop_post(tx->jm->d.loop, &tx->done_node, txn_posted);
}

static void start_txn(struct jm *jm, struct job_rt *j)
{
	struct txn *tx = calloc(1, sizeof(*tx));
	struct jm_error err;
	char msg[256];
	int rc;

	if (!tx)
		goto oom;
	tx->jm = jm;
	tx->job = j;
	tx->release = j->pub.state == JM_RELEASING;
	if (tx->release) {
		tx->removals = fs_job_xcs(jm->d.fs, j->pub.id, &tx->n_removals);
		if (!tx->removals)
			goto oom;
	} else {
		tx->n_removals = j->n_removals;
		tx->removals = malloc((j->n_removals ? j->n_removals : 1) * sizeof(*tx->removals));
		tx->adds = malloc((j->n_additions ? j->n_additions : 1) * sizeof(*tx->adds));
		if (!tx->removals || !tx->adds)
			goto oom;
		if (j->n_removals)
			memcpy(tx->removals, j->removals,
			       j->n_removals * sizeof(*tx->removals));
		for (size_t i = 0; i < j->n_additions; i++) {
			tx->adds[i].xc = j->additions[i];
			snprintf(tx->adds[i].job_id, sizeof(tx->adds[i].job_id), "%s",
				 j->add_owner ? j->add_owner[i] : j->pub.id);
		}
		tx->n_adds = j->n_additions;
	}
	if (build_txn(jm, tx) != 0)
		goto oom;
	if (tx->n_devs == 0) {
		/* Nothing to change on any device (e.g. an empty release). */
		tx->txn_id = 0;
		jm->txn = tx;
		txn_done(tx);
		return;
	}
	rc = st_intent_begin(jm->d.store, j->pub.id, tx->removals, tx->n_removals, tx->adds,
			     tx->n_adds, tx->release ? NULL : j->plan_links,
			     tx->release ? 0 : j->n_plan_links, jm_now_ms(), &tx->txn_id);
	if (rc) {
		snprintf(msg, sizeof(msg), "cannot store the transaction intent (%s); nothing was "
					   "touched",
			 strerror(-rc));
		jm_set_error(&err, JM_UNAVAILABLE, "", "%s", msg);
		free_txn(tx);
		if (j->pub.state == JM_RELEASING)
			jm_set_state(jm, j, JM_ACTIVE, msg), jm_settle(j, &err);
		else
			jm_fail_job(jm, j, &err);
		return;
	}
	tx->plan = (struct sb_txn_plan){ (uint64_t)tx->txn_id, tx->devs, tx->n_devs };
	tx->hooks = (struct sb_txn_hooks){ NULL, NULL, verify_l2, tx };
	tx->opts = (struct sb_txn_options){ .confirm_timeout_s = jm->d.confirm_timeout_s,
					    .connect_timeout_ms = jm->d.connect_timeout_ms };
	jm->txn = tx;
	rc = sb_engine_start(jm->d.engine, &tx->plan, &tx->hooks, &tx->opts, txn_thread_done, tx,
			     &tx->handle);
	if (rc) {
		jm->txn = NULL;
		st_intent_finish(jm->d.store, tx->txn_id, ST_INTENT_ROLLED_BACK,
				 "the transaction could not start", jm_now_ms());
		jm_set_error(&err, JM_UNAVAILABLE, "", "the transaction could not start (%s)",
			  strerror(-rc));
		free_txn(tx);
		jm_fail_job(jm, j, &err);
		jm_pump(jm);
	}
	return;
oom:
	free_txn(tx);
	jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	jm_fail_job(jm, j, &err);
}

static void txn_done(void *arg)
{
	struct txn *tx = arg;
	struct jm *jm = tx->jm;
	struct job_rt *j = tx->job;
	struct sb_txn_result r = { .outcome = SB_TXN_COMMITTED };
	struct jm_error err = { 0 };
	const char **names = NULL;
	enum st_intent_state outcome;

	if (tx->handle && sb_txn_join(tx->handle, &r) != 0)
		r.outcome = SB_TXN_FAILED;
	switch (r.outcome) {
	case SB_TXN_COMMITTED:
		outcome = ST_INTENT_CONFIRMED;
		break;
	case SB_TXN_REFUSED:
	case SB_TXN_ROLLED_BACK:
		outcome = ST_INTENT_ROLLED_BACK;
		jm_set_error(&err, JM_UNAVAILABLE, "",
			  "devices: %s; every device was rolled back, nothing changed", r.message);
		break;
	case SB_TXN_FAILED:
	default:
		outcome = ST_INTENT_FAILED;
		jm_set_error(&err, JM_INTERNAL, "",
			  "devices: %s; a rollback could not be proven (%zu device(s)): the "
			  "fabric needs reconciliation",
			  r.message, r.n_rollback_failures);
		break;
	}
	if (tx->txn_id &&
	    st_intent_finish(jm->d.store, tx->txn_id, outcome, r.message, jm_now_ms()) != 0)
		fprintf(stderr, "<3>transaction %lld: cannot store its outcome; recovery will "
				"resolve it\n",
			(long long)tx->txn_id);
	if (outcome == ST_INTENT_CONFIRMED &&
	    fs_apply(jm->d.fs, tx->removals, tx->n_removals, tx->adds, tx->n_adds) != 0)
		fs_load(jm->d.fs, jm->d.store);
	if (outcome == ST_INTENT_CONFIRMED) {
		if (tx->release) { /* the store dropped the job's links with the intent */
			free(j->plan_links);
			j->plan_links = NULL;
			j->n_plan_links = 0;
		}
		jm_apply_links(jm, j);
	}
	if (jm->d.events.transaction_done && tx->txn_id) {
		struct jm_txn_summary sum = { (uint64_t)tx->txn_id, j->pub.id, (int)r.outcome,
					      NULL, 0, r.message, r.total_ms,
					      r.n_rollback_failures };

		names = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*names));
		for (size_t i = 0; names && i < tx->n_devs; i++)
			names[i] = sb_device_name(tx->devs[i].dev);
		sum.devices = names;
		sum.n_devices = names ? tx->n_devs : 0;
		jm->d.events.transaction_done(jm->d.events.ctx, &sum);
		free(names);
	}
	jm->txn = NULL;
	if (tx->release) {
		if (outcome == ST_INTENT_CONFIRMED) {
			jm_set_state(jm, j, JM_RELEASED, NULL);
			jm_settle(j, NULL);
		} else {
			jm_set_state(jm, j, outcome == ST_INTENT_ROLLED_BACK ? JM_ACTIVE : JM_FAILED,
				  err.message);
			jm_settle(j, &err);
		}
	} else if (outcome == ST_INTENT_CONFIRMED) {
		jm_set_state(jm, j, JM_ACTIVE, NULL);
		if (j->release_requested) {
			jm_set_state(jm, j, JM_RELEASING, NULL);
			jm_push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j);
		}
		jm_settle(j, NULL);
	} else {
		jm_fail_job(jm, j, &err);
	}
	sb_txn_result_clear(&r);
	free_txn(tx);
	jm_pump(jm);
}

/* Starts the next queued transaction when none is running. */
void jm_pump(struct jm *jm)
{
	while (!jm->stopping && !jm->txn && jm->n_queue > 0) {
		struct job_rt *j = jm->queue[0];

		memmove(jm->queue, jm->queue + 1, (jm->n_queue - 1) * sizeof(*jm->queue));
		jm->n_queue--;
		if (j->pub.state == JM_PROGRAMMING && j->plan_gen != fs_generation(jm->d.fs)) {
			jm_start_planning(jm, j); /* planned on circuits that changed since */
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING || j->pub.state == JM_RELEASING)
			start_txn(jm, j);
	}
}


/* ---- recovery ---- */

/* Sorted (in, out) pairs of one device: what the store says it should hold. */
static struct sb_xc *device_view(struct jm *jm, int group, int device,
				 const struct ocs_xc *removals, size_t n_removals,
				 const struct st_circuit *adds, size_t n_adds, size_t *n)
{
	size_t cap = fs_count(jm->d.fs) + n_adds + 1;
	struct sb_xc *out = malloc(cap * sizeof(*out));
	struct ocs_xc key = { group, device, 0, 0 };

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < fs_count(jm->d.fs); i++) {
		const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;
		bool removed = false;

		if (!jm_same_device(xc, &key))
			continue;
		for (size_t r = 0; r < n_removals && !removed; r++)
			removed = jm_same_device(&removals[r], xc) && removals[r].in == xc->in;
		if (!removed)
			out[(*n)++] = (struct sb_xc){ (uint16_t)xc->in, (uint16_t)xc->out };
	}
	for (size_t a = 0; a < n_adds; a++)
		if (jm_same_device(&adds[a].xc, &key))
			out[(*n)++] = (struct sb_xc){ (uint16_t)adds[a].xc.in, (uint16_t)adds[a].xc.out };
	return out;
}

static int sbxc_cmp(const void *a, const void *b)
{
	const struct sb_xc *x = a, *y = b;

	return x->in != y->in ? x->in - y->in : x->out - y->out;
}

/* Whether the device holds exactly `want` (order-insensitive). */
static bool holds(const struct sb_xc_state *got, size_t n_got, struct sb_xc *want, size_t n_want)
{
	if (n_got != n_want)
		return false;
	qsort(want, n_want, sizeof(*want), sbxc_cmp);
	for (size_t i = 0; i < n_got; i++)
		if (got[i].in != want[i].in || got[i].out != want[i].out)
			return false;
	return true;
}

/*
 * Resolves one transaction a previous run left open. Confirmed commits are
 * tied to the session that made them, so the devices of a run that died
 * reverted when its sessions closed; every touched device is read back. All at the target:
 * the transaction had been confirmed; all at the pre-image: rolled back;
 * anything else: failed, and the difference is reported as drift.
 */
static int resolve_intent(void *arg, const struct st_intent *in)
{
	struct jm *jm = arg;
	const struct ocs_fabric *f = jm->f;
	int n_dev = ocs_fabric_devices(f);
	char *touched = calloc((size_t)n_dev, 1);
	bool all_target = true, all_pre = true;
	enum st_intent_state outcome;
	char detail[512] = "";

	if (!touched)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_removals; i++)
		touched[ocs_fabric_device_id(f, in->removals[i].group, in->removals[i].device)] = 1;
	for (size_t i = 0; i < in->n_additions; i++)
		touched[ocs_fabric_device_id(f, in->additions[i].xc.group,
					     in->additions[i].xc.device)] = 1;
	for (int d = 0; d < n_dev; d++) {
		struct sb_device *dev = jm->d.devices[d];
		int g = ocs_fabric_device_group(f, d), k = ocs_fabric_device_in_group(f, d);
		struct sb_xc_state *got = NULL;
		struct sb_xc *pre, *target;
		size_t n_got = 0, n_pre, n_target;
		struct sb_error e = { 0 };

		if (!touched[d])
			continue;
		pre = device_view(jm, g, k, NULL, 0, NULL, 0, &n_pre);
		target = device_view(jm, g, k, in->removals, in->n_removals, in->additions,
				     in->n_additions, &n_target);
		if (!pre || !target ||
		    sb_device_connect_until(dev, sb_now_ms() + jm->d.connect_timeout_ms, &e) != 0 ||
		    sb_device_read_xcs(dev, false, SB_DS_RUNNING, &got, &n_got, &e) != 0) {
			all_target = all_pre = false;
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "%s unreadable (%s); ", sb_device_name(dev), e.message);
		} else {
			bool at_target = holds(got, n_got, target, n_target);
			bool at_pre = holds(got, n_got, pre, n_pre);

			all_target &= at_target;
			all_pre &= at_pre;
			if (!at_target && !at_pre)
				snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
					 "%s holds neither the old nor the new configuration; ",
					 sb_device_name(dev));
		}
		free(got);
		free(pre);
		free(target);
	}
	free(touched);
	if (all_target && !all_pre) {
		outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, sizeof(detail), "recovered after restart: devices hold the target");
	} else if (all_pre) {
		outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, sizeof(detail), "recovered after restart: devices back at the "
						 "pre-image");
	} else {
		outcome = ST_INTENT_FAILED;
	}
	fprintf(stderr, "<5>transaction %lld of job %s left open: %s, %s\n",
		(long long)in->txn_id, in->job_id, st_intent_state_name(outcome), detail);
	if (st_intent_finish(jm->d.store, in->txn_id, outcome, detail, jm_now_ms()) != 0)
		return -EIO;
	if (outcome == ST_INTENT_CONFIRMED)
		return fs_apply(jm->d.fs, in->removals, in->n_removals, in->additions,
				in->n_additions);
	return 0;
}

int jm_recover(struct jm *jm)
{
	int rc = st_intent_list_open(jm->d.store, resolve_intent, jm);

	/* after the intents: those finished as confirmed carried links */
	if (rc == 0)
		rc = jm_load_links(jm);
	if (rc)
		return rc;
	for (size_t i = 0; i < jm->n_jobs; i++) {
		struct job_rt *j = jm->jobs[i];
		size_t n_xcs = 0;
		struct ocs_xc *xcs;

		switch (j->pub.state) {
		case JM_PENDING:
		case JM_PLANNING:
		case JM_PROGRAMMING:
			/* Accepted work: if its transaction landed, it is active. */
			xcs = fs_job_xcs(jm->d.fs, j->pub.id, &n_xcs);
			free(xcs);
			if (n_xcs)
				jm_set_state(jm, j, JM_ACTIVE, NULL);
			else if (j->pub.n_demand || j->pub.workload)
				jm_start_planning(jm, j);
			else
				jm_set_state(jm, j, JM_FAILED, "its request could not be read back after "
							    "a restart");
			break;
		case JM_RELEASING:
			jm_push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j);
			break;
		default:
			break;
		}
	}
	jm_pump(jm);
	return 0;
}
