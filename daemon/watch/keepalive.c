/*
 * keepalive.c - implementation of keepalive.h.
 *
 * The timer (loop thread) starts a pass unless one runs. The pass (one
 * executor task) visits devices from where the previous pass stopped and
 * stops after a full round or once it spent interval_ms (connects to
 * unreachable devices may each take their RPC deadline), then posts
 * done_node. On the loop each visited device's finding goes to
 * events.device_read and the reconnects it made to the counter.
 *
 * Settling: on_timer picks the oldest failed circuit intent not given up
 * (copied into `settle`, with the devices it touched and the circuit
 * table's generation); the pass reads those devices whose keepalive found
 * a session up, holding each one's claim; pass_done compares and settles
 * (or keeps the intent for the next pass while a device is unreadable;
 * discards the reads if the circuit table changed or a transaction runs),
 * applying an intent found at its target to the circuit table when the
 * job manager agrees (jm_may_take_effect), and tells the job manager.
 *
 * Ownership: `found`, `settle` and `reads` belong to the pass from on_timer
 * until pass_done runs on the loop; `running` and `given_up` are the loop's.
 */
#include "keepalive.h"

#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "devices.h"
#include "executor.h"
#include "fabric_state.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "sb_device.h"
#include "store.h"

struct ka_found {
	bool visited;
	int rc; /* sb_device_keepalive(): 0 up, -EBUSY in use, else down */
	uint64_t reconnects;
	char error[sizeof(((struct sb_error *)0)->message) + 32];
};

struct ka {
	struct ka_deps d;
	struct event *timer;
	struct mx_family *m_reconnects;
	struct exec_task task;
	struct loop_node done_node;
	struct ka_found *found;	   /* by device id */
	uint64_t *reconnects_seen; /* by device id: sb_device_reconnects() at the last visit */
	int n_devices;
	int next;	  /* the device the next pass starts with (pass only) */
	bool running;	  /* loop thread only */
	atomic_bool stop; /* shutting down: visit no further device */
	/* the failed intent this pass settles (settling: txn_id != 0) */
	struct st_intent settle;
	int *settle_devs; /* device ids it touched */
	int n_settle_devs;
	struct dev_readback *reads; /* by index into settle_devs */
	unsigned long generation;   /* fs_generation() when it was picked */
	int64_t *given_up;	    /* failed intents not read again in this run */
	size_t n_given_up;
	/* the store is asked for failed intents only when one may be there:
	 * at start, after a transaction ended failed, and while one is left */
	bool look_for_failed;
	uint64_t failed_seen; /* the engine's `failed` counter when last asked */
};

static void settle_clear(struct ka *k)
{
	for (int j = 0; k->reads && j < k->n_settle_devs; j++)
		dev_readback_clear(&k->reads[j]);
	free(k->reads);
	free(k->settle_devs);
	st_intent_clear(&k->settle);
	k->reads = NULL;
	k->settle_devs = NULL;
	k->n_settle_devs = 0;
}

static bool given_up(const struct ka *k, int64_t txn_id)
{
	for (size_t i = 0; i < k->n_given_up; i++)
		if (k->given_up[i] == txn_id)
			return true;
	return false;
}

static void give_up(struct ka *k, int64_t txn_id)
{
	int64_t *g = realloc(k->given_up, (k->n_given_up + 1) * sizeof(*g));

	if (!g)
		return; /* read again next pass: costs reads, loses nothing */
	g[k->n_given_up++] = txn_id;
	k->given_up = g;
}

/* st_intent_list_failed: takes the first circuit intent not given up. */
static int pick_failed(void *ctx, const struct st_intent *in)
{
	struct ka *k = ctx;
	const struct ocs_fabric *f = k->d.fabric;
	int n_dev = ocs_fabric_devices(f);
	char *touched;

	if (k->settle.txn_id || in->has_rings || in->n_bundles || given_up(k, in->txn_id))
		return 0;
	touched = calloc((size_t)n_dev + 1, 1);
	k->settle_devs = calloc((size_t)n_dev + 1, sizeof(*k->settle_devs));
	k->settle = (struct st_intent){.txn_id = in->txn_id, .state = in->state};
	snprintf(k->settle.job_id, sizeof(k->settle.job_id), "%s", in->job_id);
	k->settle.removals = malloc((in->n_removals + 1) * sizeof(*in->removals));
	k->settle.additions = malloc((in->n_additions + 1) * sizeof(*in->additions));
	if (!touched || !k->settle_devs || !k->settle.removals || !k->settle.additions) {
		free(touched);
		settle_clear(k);
		return 0;
	}
	if (in->n_removals)
		memcpy(k->settle.removals, in->removals, in->n_removals * sizeof(*in->removals));
	if (in->n_additions)
		memcpy(k->settle.additions, in->additions,
		       in->n_additions * sizeof(*in->additions));
	k->settle.n_removals = in->n_removals;
	k->settle.n_additions = in->n_additions;
	for (size_t i = 0; i < in->n_removals; i++)
		touched[ocs_fabric_device_id(f, in->removals[i].group, in->removals[i].device)] = 1;
	for (size_t i = 0; i < in->n_additions; i++)
		touched[ocs_fabric_device_id(f, in->additions[i].xc.group,
					     in->additions[i].xc.device)] = 1;
	for (int d = 0; d < n_dev; d++)
		if (touched[d])
			k->settle_devs[k->n_settle_devs++] = d;
	free(touched);
	return 0;
}

/*
 * Loop: the reads of the failed intent, compared like recovery does. Returns
 * without a decision while a device was not read (next pass).
 */
static void settle_done(struct ka *k)
{
	bool all_pre = true, all_target = true, taken = false;
	char detail[512] = "";
	int rc;

	for (int j = 0; j < k->n_settle_devs; j++)
		if (!k->reads[j].ok)
			return;
	if (fs_generation(k->d.fs) != k->generation || jm_busy(k->d.jm))
		return; /* the circuit table moved meanwhile: read again */
	for (int j = 0; j < k->n_settle_devs; j++) {
		int d = k->settle_devs[j];
		struct dev_diff to_pre = {0}, to_target = {0};

		if (dev_compare(k->d.devs, d, NULL, k->reads[j].xcs, k->reads[j].n, &to_pre) != 0 ||
		    dev_compare(k->d.devs, d, &k->settle, k->reads[j].xcs, k->reads[j].n,
				&to_target) != 0) {
			dev_diff_clear(&to_pre);
			return; /* out of memory: next pass */
		}
		all_pre &= dev_diff_equal(&to_pre);
		all_target &= dev_diff_equal(&to_target);
		/* not what the circuit table says: the transaction session's image
		 * of it (its next pre-image, sb_device.h) is stale; read again */
		if (!dev_diff_equal(&to_pre))
			sb_device_forget_image(dev_handle(k->d.devs, d, DEV_ROLE_TXN));
		if (!dev_diff_equal(&to_pre))
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "%s holds %s; ", dev_name(k->d.devs, d),
				 dev_diff_equal(&to_target)
					 ? "the target"
					 : "neither the old nor the new configuration");
		dev_diff_clear(&to_pre);
		dev_diff_clear(&to_target);
	}
	if (all_pre) {
		snprintf(detail, sizeof(detail),
			 "rollback proven after the devices came back: every device read back at "
			 "the pre-image");
		rc = st_intent_settle(k->d.store, k->settle.txn_id, ST_INTENT_ROLLED_BACK, detail,
				      clk_wall_ms(NULL));
		if (rc == 0)
			jm_unproven_settled(k->d.jm, &k->settle, false);
	} else if ((taken = all_target && jm_may_take_effect(k->d.jm, &k->settle))) {
		snprintf(detail, sizeof(detail),
			 "took effect: every device read back at the target after the devices "
			 "came back; applied to the circuit table");
		rc = st_intent_settle(k->d.store, k->settle.txn_id, ST_INTENT_CONFIRMED, detail,
				      clk_wall_ms(NULL));
		if (rc == 0 &&
		    fs_apply(k->d.fs, k->settle.removals, k->settle.n_removals, k->settle.additions,
			     k->settle.n_additions) != 0 &&
		    fs_load(k->d.fs, k->d.store) != 0)
			log_msg(LOG_CRIT,
				"transaction %lld: the circuit table in memory could not "
				"be updated nor reloaded",
				(long long)k->settle.txn_id);
		if (rc == 0)
			jm_unproven_settled(k->d.jm, &k->settle, true);
		else
			give_up(k, k->settle.txn_id);
	} else {
		snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
			 "read back after the devices came back%s",
			 all_target ? ": the job failed but its circuits are on the devices, see "
				      "drift"
				    : ", see drift");
		rc = st_intent_settle(k->d.store, k->settle.txn_id, ST_INTENT_FAILED, detail,
				      clk_wall_ms(NULL));
		give_up(k, k->settle.txn_id);
	}
	log_msg(all_pre || taken ? LOG_NOTICE : LOG_WARNING, "transaction %lld of job %s: %s%s",
		(long long)k->settle.txn_id, k->settle.job_id, detail,
		rc ? " (the store could not record it)" : "");
}

static void pass_done(struct loop_node *n)
{
	struct ka *k = OCSD_CONTAINER_OF(n, struct ka, done_node);

	for (int i = 0; i < k->n_devices && !atomic_load(&k->stop); i++) {
		struct ka_found *f = &k->found[i];
		const char *name = dev_name(k->d.devs, i);

		if (f->reconnects && k->m_reconnects)
			(void)mx_add(k->m_reconnects, &name, (double)f->reconnects);
		/* in use, or backing off (no attempt: what was reported stands) */
		if (!f->visited || f->rc == -EBUSY || f->rc == -EAGAIN)
			continue;
		if (k->d.events.device_read)
			k->d.events.device_read(k->d.events.ctx, i, f->rc == 0, f->rc == 0,
						f->error, NULL);
	}
	if (k->settle.txn_id && !atomic_load(&k->stop))
		settle_done(k);
	settle_clear(k);
	k->running = false;
}

static void pass_run(struct exec_task *t)
{
	struct ka *k = OCSD_CONTAINER_OF(t, struct ka, task);
	int64_t until = sb_now_ms() + (int64_t)k->d.interval_ms;

	for (int seen = 0; seen < k->n_devices && !atomic_load(&k->stop); seen++) {
		int i = k->next;
		struct sb_device *h = dev_handle(k->d.devs, i, DEV_ROLE_TXN);
		struct ka_found *f = &k->found[i];
		struct sb_error err = {0};

		k->next = (k->next + 1) % k->n_devices;
		if (!h)
			continue;
		f->rc = sb_device_keepalive(h, &err);
		f->visited = true;
		/* the keepalive's reconnects and the transactions' since the last visit */
		f->reconnects = sb_device_reconnects(h) - k->reconnects_seen[i];
		k->reconnects_seen[i] += f->reconnects;
		snprintf(f->error, sizeof(f->error), "%s%s%s", err.operation,
			 err.operation[0] ? ": " : "", f->rc ? err.message : "");
		if (f->rc == 0)
			f->error[0] = '\0';
		if (sb_now_ms() >= until)
			break;
	}
	/* the failed intent's devices, each read under its claim if its session is up */
	for (int j = 0; j < k->n_settle_devs && !atomic_load(&k->stop); j++) {
		int d = k->settle_devs[j];
		struct sb_device *h = dev_handle(k->d.devs, d, DEV_ROLE_TXN);

		if (!k->found[d].visited || k->found[d].rc != 0 || !h || !sb_device_try_claim(h))
			continue;
		(void)dev_read(k->d.devs, d, DEV_ROLE_TXN, &k->reads[j]);
		sb_device_unclaim(h);
	}
	loop_post(k->d.loop, &k->done_node, pass_done);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct ka *k = arg;

	(void)fd;
	(void)what;
	if (k->running || k->n_devices == 0)
		return;
	for (int i = 0; i < k->n_devices; i++)
		k->found[i] = (struct ka_found){0};
	if (k->d.failed && atomic_load(k->d.failed) != k->failed_seen) {
		k->failed_seen = atomic_load(k->d.failed);
		k->look_for_failed = true;
	}
	if (k->look_for_failed && k->d.store && k->d.fs && !jm_busy(k->d.jm)) {
		(void)st_intent_list_failed(k->d.store, pick_failed, k);
		k->look_for_failed = k->settle.txn_id != 0;
		k->reads = k->n_settle_devs ? calloc((size_t)k->n_settle_devs, sizeof(*k->reads))
					    : NULL;
		if (!k->reads)
			settle_clear(k);
		k->generation = fs_generation(k->d.fs);
	}
	k->running = true;
	k->task.run = pass_run;
	exec_submit(k->d.exec, &k->task);
}

struct ka *ka_new(const struct ka_deps *deps)
{
	static const char *const device_label[] = {"device", NULL};
	struct ka *k = calloc(1, sizeof(*k));
	struct timeval tv;

	if (!k)
		return NULL;
	k->d = *deps;
	k->n_devices = dev_count(deps->devs);
	k->look_for_failed = true;
	k->failed_seen = deps->failed ? atomic_load(deps->failed) : 0;
	k->found = calloc((size_t)k->n_devices + 1, sizeof(*k->found));
	k->reconnects_seen = calloc((size_t)k->n_devices + 1, sizeof(*k->reconnects_seen));
	if (deps->reg)
		k->m_reconnects = mx_counter(
			deps->reg, "ocsd_device_reconnects_total",
			"Transaction sessions to a device opened again after its first one "
			"(by the keepalive or a transaction).",
			device_label);
	k->timer = event_new(loop_base(deps->loop), -1, EV_PERSIST, on_timer, k);
	tv = (struct timeval){(time_t)(deps->interval_ms / 1000),
			      (suseconds_t)(deps->interval_ms % 1000) * 1000};
	if (!k->found || !k->reconnects_seen || !k->timer || event_add(k->timer, &tv) != 0) {
		ka_free(k);
		return NULL;
	}
	return k;
}

void ka_free(struct ka *k)
{
	if (!k)
		return;
	if (k->timer)
		event_free(k->timer);
	if (k->running) {
		/* The pass posts pass_done to the loop; run it here. */
		struct timespec ms = {0, 1000000};

		atomic_store(&k->stop, true);
		while (k->running) {
			nanosleep(&ms, NULL);
			loop_run_posted(k->d.loop);
		}
	}
	settle_clear(k);
	free(k->given_up);
	free(k->reconnects_seen);
	free(k->found);
	free(k);
}
