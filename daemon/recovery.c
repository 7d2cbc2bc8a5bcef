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
#include "fabric_state.h"
#include "sb_device.h"
#include "store.h"

static bool same_device(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return a->group == b->group && a->device == b->device;
}

/* Sorted (in, out) pairs of one device: what the store says it should hold. */
static struct sb_xc *device_view(const struct rec_deps *rd, int group, int device,
				 const struct ocs_xc *removals, size_t n_removals,
				 const struct st_circuit *adds, size_t n_adds, size_t *n)
{
	size_t cap = fs_count(rd->fs) + n_adds + 1;
	struct sb_xc *out = malloc(cap * sizeof(*out));
	struct ocs_xc key = { group, device, 0, 0 };

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < fs_count(rd->fs); i++) {
		const struct ocs_xc *xc = &fs_at(rd->fs, i)->xc;
		bool removed = false;

		if (!same_device(xc, &key))
			continue;
		for (size_t r = 0; r < n_removals && !removed; r++)
			removed = same_device(&removals[r], xc) && removals[r].in == xc->in;
		if (!removed)
			out[(*n)++] = (struct sb_xc){ (uint16_t)xc->in, (uint16_t)xc->out };
	}
	for (size_t a = 0; a < n_adds; a++)
		if (same_device(&adds[a].xc, &key))
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
	const struct rec_deps *rd = arg;
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
		struct sb_device *dev = rd->devices[d];
		int g = ocs_fabric_device_group(f, d), k = ocs_fabric_device_in_group(f, d);
		struct sb_xc_state *got = NULL;
		struct sb_xc *pre, *target;
		size_t n_got = 0, n_pre, n_target;
		struct sb_error e = { 0 };

		if (!touched[d])
			continue;
		pre = device_view(rd, g, k, NULL, 0, NULL, 0, &n_pre);
		target = device_view(rd, g, k, in->removals, in->n_removals, in->additions,
				     in->n_additions, &n_target);
		if (!pre || !target ||
		    sb_device_connect_until(dev, sb_now_ms() + rd->connect_timeout_ms, &e) != 0 ||
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
