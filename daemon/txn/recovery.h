/*
 * recovery.h - start-up recovery of the transactions a previous run left
 * open: every device an open intent touched is read back and the intent is
 * recorded as confirmed (the devices hold the target: the circuit table is
 * updated), rolled back (they hold the old state) or failed (anything
 * else: reconciliation reports the drift). An intent of a job kind with
 * its own (recov_kind: the ring kind's in kind_ring_txn.c reads the
 * touched nodes' bundles back) is resolved by that kind, with the helpers
 * below.
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

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

struct clk;
struct devices;
struct dr_table;
struct fs_state;
struct ocs_fabric;
struct recov_deps;
struct sb_txn_device;

/* How long recovery waits for a device's session (start-up only). */
#define RECOV_CONNECT_MS 5000

/* A job kind that resolves intents of its own (registered in recov_deps). */
struct recov_kind {
	bool (*owns)(const struct st_intent *in);
	/* As recov_resolve_open for one intent: its outcome stored, the kind's state updated. */
	int (*resolve)(void *ctx, const struct recov_deps *rd, const struct st_intent *in);
	void *ctx;
};

struct recov_deps {
	const struct ocs_fabric *fabric;
	struct st_store *store;
	struct fs_state *fs;
	struct devices *devs; /* read-back through the transaction handles */
	const struct clk *clock;
	/* the kinds with intents of their own; any other intent is one of circuits */
	const struct recov_kind *kinds;
	size_t n_kinds;
	/* where a paused leader's commit that reverts by itself is marked (NULL: none) */
	struct dr_table *drift;
};

/* Resolves every open intent. 0, or -errno when the store failed (then ocsd must not start). */
int recov_resolve_open(const struct recov_deps *d);

/*
 * For a kind's resolve. Fences the devices touched[0..n) for the recovery
 * of in, together (recovery.c says why and how: their candidate locks
 * taken, the holders' sessions killed only when every touched device
 * answered); fenced[d] true for each lock held. recov_unfence releases
 * what it took (fenced[0..n)).
 */
void recov_fence(const struct recov_deps *rd, const struct st_intent *in, const bool *touched,
		 bool *fenced, int n);
void recov_unfence(const struct recov_deps *rd, bool *fenced, int n);
/* Whether device d's commit can still be an unconfirmed one (a confirmed-commit device). */
bool recov_holds_unconfirmed(const struct recov_deps *rd, int d);
/* What reading back the devices an open intent touched showed. */
struct recov_seen {
	bool all_target; /* every device at the target, proven (fenced, or not unconfirmed) */
	bool all_pre;	 /* every device at the pre-image */
	bool all_read;	 /* every device read */
	bool all_known;	 /* every device at the target or the pre-image */
	int unconfirmed; /* devices showing the target without the fence's proof */
};

/*
 * The one rule for an open intent's outcome, for every kind: into
 * *outcome and detail (devices named `unit`, e.g. "device"; `pre` says
 * they are back as before, e.g. "devices back at the pre-image"). true:
 * no outcome yet, the intent is decided and every device was read, so the
 * caller finishes it (recov_finish_decided) and that gives the outcome.
 * FAILED leaves detail as the read-back wrote it.
 */
bool recov_verdict(const struct st_intent *in, const struct recov_seen *s, const char *unit,
		   const char *pre, enum st_intent_state *outcome, char *detail, size_t len);
/*
 * Logs the outcome of open intent in (what: "transaction", "ring
 * transaction") and stores it. 0 or -EIO.
 */
int recov_record(const struct recov_deps *rd, const struct st_intent *in, const char *what,
		 enum st_intent_state outcome, const char *detail);
/*
 * Finishes decided intent in on devs (n, not empty: the devices that do not
 * hold the target, with their targets) in one transaction of recovery's
 * own engine, which confirms only once a note on the intent is stored (the
 * recovery gate, recovery.c); returns the outcome to record (detail says
 * why).
 */
enum st_intent_state recov_finish_decided(const struct recov_deps *rd, const struct st_intent *in,
					  const struct sb_txn_device *devs, size_t n, bool all_pre,
					  char *detail, size_t len);

#endif
