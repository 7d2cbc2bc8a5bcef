/*
 * recovery.h - start-up recovery of the transactions a previous run left
 * open: every device an open intent touched is read back and the intent is
 * recorded as confirmed (the devices hold the target: the circuit table is
 * updated), rolled back (they hold the old state) or failed (anything
 * else: reconciliation reports the drift). In a ring domain the touched
 * nodes' bundles are read back against the intent's settings (target) and
 * what the stored rings say each node holds (the old state).
 *
 * An intent whose commit was decided (st_intent_decide: the previous run
 * was sending the confirms) is finished instead: the devices that reverted
 * get the target again in one transaction of recovery's own engine, and
 * the intent is confirmed once every device holds it (rolled back or failed
 * if that transaction fails, as the devices then say).
 *
 * Confirmed commits are tied to the NETCONF session that made them, so the
 * devices of a run that died reverted when its sessions closed; a frozen
 * run is covered by the confirm timeout.
 *
 * Runs on the loop thread before the job manager resumes its jobs
 * (jm_recover) and before any transaction; it blocks while it reads and
 * programs devices (start-up only).
 */
#ifndef OCSD_RECOVERY_H
#define OCSD_RECOVERY_H

struct clk;
struct devices;
struct fs_state;
struct ocs_fabric;
struct rg_state;
struct st_store;

struct recov_deps {
	const struct ocs_fabric *fabric;
	struct st_store *store;
	struct fs_state *fs;
	struct devices *devs; /* read-back through the transaction handles */
	const struct clk *clock;
	/* ring domains: the ring state loaded from the store (the pre-image of
	 * every node), given the job's rings when an intent was confirmed */
	struct rg_state *rings;
};

/* Resolves every open intent. 0, or -errno when the store failed (then ocsd must not start). */
int recov_resolve_open(const struct recov_deps *d);

#endif
