/*
 * recovery.c - implementation of recovery.h.
 */
#include "recovery.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "devices.h"
#include "fabric_state.h"
#include "log.h"
#include "rings.h"
#include "sb_device.h"
#include "store.h"

static int resolve_circuit_intent(const struct rec_deps *rd, const struct st_intent *in);

/* How long recovery waits for a node's session (start-up only). */
#define REC_CONNECT_MS 5000

/* Bundles b (n, any order) of node as a full array of `bundles` entries (absent: loopback). */
static void full_bundles(int bundles, const struct sb_bundle *b, size_t n, size_t stride,
			 struct sb_bundle *out)
{
	for (int i = 0; i < bundles; i++)
		out[i] = (struct sb_bundle){(uint8_t)i, 0, 0, 0};
	for (size_t i = 0; i < n; i++) {
		const struct sb_bundle *x =
			(const struct sb_bundle *)((const char *)b + i * stride);

		if (x->bundle < bundles)
			out[x->bundle] = *x;
	}
}

static bool same_bundles(const struct sb_bundle *a, const struct sb_bundle *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!sb_bundle_equal(&a[i], &b[i]))
			return false;
	return true;
}

/*
 * Reads node back (running datastore) and says whether it holds the
 * intent's settings for it (target) and what the ring state says it held
 * before (pre). false when it cannot be read (why in detail).
 */
static bool read_node(const struct rec_deps *rd, const struct st_intent *in, int node,
		      bool *at_target, bool *at_pre, char *detail, size_t len)
{
	int bundles = rg_domain(rd->rings)->bundles;
	struct sb_bundle got[bundles], want[bundles], pre[bundles];
	struct hbd_bundle old[bundles];
	struct sb_bundle_state *st = NULL;
	struct sb_error err = {0};
	size_t n = 0, k = 0;

	struct sb_device *h = dev_handle(rd->devs, node, DEV_ROLE_TXN);

	if (!h || sb_device_connect_until(h, sb_now_ms() + REC_CONNECT_MS, &err) != 0 ||
	    sb_device_read_bundles(h, false, SB_DS_RUNNING, &st, &n, NULL, &err) != 0) {
		snprintf(detail + strlen(detail), len - strlen(detail), "node %d unreadable (%s); ",
			 node, err.message);
		return false;
	}
	full_bundles(bundles, &st[0].set, n, sizeof(*st), got);
	free(st);
	for (int i = 0; i < bundles; i++)
		want[i] = (struct sb_bundle){(uint8_t)i, 0, 0, 0};
	for (size_t i = 0; i < in->n_bundles; i++)
		if (in->bundles[i].node == node && in->bundles[i].bundle < bundles)
			want[in->bundles[i].bundle] =
				(struct sb_bundle){in->bundles[i].bundle, in->bundles[i].path,
						   in->bundles[i].distance, in->bundles[i].dir};
	if (rg_node_bundles(rd->rings, node, old) != 0)
		return false;
	for (k = 0; k < (size_t)bundles; k++)
		pre[k] =
			(struct sb_bundle){old[k].bundle, old[k].path, old[k].distance, old[k].dir};
	*at_target = same_bundles(got, want, bundles);
	*at_pre = same_bundles(got, pre, bundles);
	return true;
}

/* resolve_intent for an intent of a ring domain. */
static int resolve_ring_intent(const struct rec_deps *rd, const struct st_intent *in)
{
	int n_nodes = rg_nodes(rd->rings);
	char *seen = calloc((size_t)n_nodes + 1, 1);
	bool all_target = true, all_pre = true;
	enum st_intent_state outcome;
	char detail[512] = "";

	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_bundles; i++) {
		int node = in->bundles[i].node;
		bool at_target = false, at_pre = false;

		if (node < 0 || node >= n_nodes || seen[node])
			continue;
		seen[node] = 1;
		if (!read_node(rd, in, node, &at_target, &at_pre, detail, sizeof(detail))) {
			all_target = all_pre = false;
			continue;
		}
		all_target &= at_target;
		all_pre &= at_pre;
		if (!at_target && !at_pre)
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "node %d holds neither the old nor the new settings; ", node);
	}
	free(seen);
	if (all_target && !all_pre) {
		outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, sizeof(detail), "recovered after restart: nodes hold the target");
	} else if (all_pre) {
		outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, sizeof(detail),
			 "recovered after restart: nodes back as they were");
	} else {
		outcome = ST_INTENT_FAILED;
	}
	log_msg(LOG_NOTICE, "ring transaction %lld of job %s left open: %s, %s",
		(long long)in->txn_id, in->job_id, st_intent_state_name(outcome), detail);
	if (st_intent_finish(rd->store, in->txn_id, outcome, detail, clk_wall_ms(rd->clock)) != 0)
		return -EIO;
	if (outcome == ST_INTENT_CONFIRMED)
		return rg_set_job_rings(rd->rings, in->job_id, in->rings, in->n_rings);
	return 0;
}

static int resolve_intent(void *arg, const struct st_intent *in)
{
	const struct rec_deps *rd = arg;

	if (in->has_rings)
		return rd->rings ? resolve_ring_intent(rd, in) : -EINVAL;
	return resolve_circuit_intent(rd, in);
}

/*
 * Resolves one transaction a previous run left open. Confirmed commits are
 * tied to the session that made them, so the devices of a run that died
 * reverted when its sessions closed; every touched device is read back. All at the target:
 * the transaction had been confirmed; all at the pre-image: rolled back;
 * anything else: failed, and the difference is reported as drift.
 */
static int resolve_circuit_intent(const struct rec_deps *rd, const struct st_intent *in)
{
	const struct ocs_fabric *f = rd->fabric;
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
		struct dev_readback rb;
		struct dev_diff to_pre = {0}, to_target = {0};

		if (!touched[d])
			continue;
		/* The routine of devices.h: read back, compare with before and after. */
		if (dev_read(rd->devs, d, DEV_ROLE_TXN, &rb) != 0 ||
		    dev_compare(rd->devs, d, NULL, rb.xcs, rb.n, &to_pre) != 0 ||
		    dev_compare(rd->devs, d, in, rb.xcs, rb.n, &to_target) != 0) {
			all_target = all_pre = false;
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "%s unreadable (%s); ", dev_name(rd->devs, d),
				 rb.ok ? "out of memory" : rb.error);
		} else {
			bool at_target = dev_diff_equal(&to_target);
			bool at_pre = dev_diff_equal(&to_pre);

			all_target &= at_target;
			all_pre &= at_pre;
			if (!at_target && !at_pre)
				snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
					 "%s holds neither the old nor the new configuration; ",
					 dev_name(rd->devs, d));
		}
		dev_readback_clear(&rb);
		dev_diff_clear(&to_pre);
		dev_diff_clear(&to_target);
	}
	free(touched);
	if (all_target && !all_pre) {
		outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, sizeof(detail),
			 "recovered after restart: devices hold the target");
	} else if (all_pre) {
		outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, sizeof(detail),
			 "recovered after restart: devices back at the "
			 "pre-image");
	} else {
		outcome = ST_INTENT_FAILED;
	}
	log_msg(LOG_NOTICE, "transaction %lld of job %s left open: %s, %s", (long long)in->txn_id,
		in->job_id, st_intent_state_name(outcome), detail);
	if (st_intent_finish(rd->store, in->txn_id, outcome, detail, clk_wall_ms(rd->clock)) != 0)
		return -EIO;
	if (outcome == ST_INTENT_CONFIRMED)
		return fs_apply(rd->fs, in->removals, in->n_removals, in->additions,
				in->n_additions);
	return 0;
}

int rec_resolve_open(const struct rec_deps *d)
{
	return st_intent_list_open(d->store, resolve_intent, (void *)d);
}
