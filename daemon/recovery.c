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
#include "store.h"

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
