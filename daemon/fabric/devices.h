/*
 * devices.h - every per-device fact of the daemon in one place: a device's
 * name and id, its two southbound handles (the one transactions use and the
 * one reconciliation uses, so neither waits for the other), its NETCONF
 * session as the reconciliation passes see it (state, last error, since
 * when), its health from the last read, and whether it is drained (stored
 * in the state store, restored at start). Its configured cross-connects are
 * the device's sorted run of the fabric state (fabric_state.h, the one
 * index), which dev_xcs() exposes.
 *
 * It also holds the one read-back routine that startup recovery and
 * periodic reconciliation share: dev_read() reads a device's running
 * cross-connects, dev_compare() compares them with what the fabric state
 * (optionally with a stored intent's change applied) says the device
 * should hold.
 *
 * It keeps the ports each device last reported FAILED or DISABLED
 * (dev_note_info) and hands them to the planner as ports out of service
 * (dev_out_of_service): on a polatis device port health is not part of a
 * transaction's read-back (southbound/sb_txn.c), so this is how a failed
 * port keeps new circuits off it.
 *
 * Threading: everything runs on the event-loop thread except dev_read(),
 * which blocks on the network and may run on any thread, one at a time per
 * (device, role); it only reads the handle and the connect timeout, which
 * do not change after start-up. The ports down in particular are written
 * (dev_note_info, after a reconciliation pass) and read (dev_out_of_service,
 * when a plan task is made) on the loop thread only; the planner gets a copy.
 */
#ifndef OCSD_DEVICES_H
#define OCSD_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"
#include "sb_device.h"
#include "store.h"

struct devices;
struct fs_state;
struct st_intent;
struct st_store;

struct dev_deps {
	const struct ocs_fabric *fabric;
	struct fs_state *fs;	  /* what the devices should hold */
	struct st_store *store;	  /* drain state */
	const char *const *names; /* by device id, copied */
	int n_devices;
	int connect_timeout_ms; /* dev_read()'s connect deadline */
	int64_t now_ms;		/* wall clock at start: when sessions began CONNECTING */
};

/* Caller frees with dev_free() (accepts NULL; frees the handles it was given). */
struct devices *dev_new(const struct dev_deps *deps);
void dev_free(struct devices *devs);

int dev_count(const struct devices *devs);
const char *dev_name(const struct devices *devs, int id);
/* Device id by name (binary search), -1 when there is none. */
int dev_find(const struct devices *devs, const char *name);

/* ---- southbound handles ---- */

/* Which of a device's two sessions. */
enum dev_role {
	DEV_ROLE_TXN,	/* transactions (and recovery, before any transaction) */
	DEV_ROLE_RECON, /* reconciliation passes */
};

/* Takes ownership of handle (freed by dev_free; replaces and frees a previous one). */
void dev_set_handle(struct devices *devs, int id, enum dev_role role, struct sb_device *handle);
/* The handle, NULL when none was set or id is out of range. */
struct sb_device *dev_handle(const struct devices *devs, int id, enum dev_role role);

/* ---- session state and health (what the last reconciliation read found) ---- */

/*
 * A device's session as the reconciliation passes see it (their own
 * handles, which stay connected between passes):
 *
 *   CONNECTING --read ok--> CONNECTED --read fails--> DISCONNECTED (error)
 *        \                      ^                          |
 *         `--read fails--> DISCONNECTED <----read ok-------'
 *
 * A read that succeeds on a session that did not stay up (connected false)
 * also leaves it DISCONNECTED. since_ms is when the state last changed
 * (start-up for CONNECTING).
 */
enum dev_session {
	DEV_SESSION_CONNECTING,
	DEV_SESSION_CONNECTED,
	DEV_SESSION_DISCONNECTED,
};

enum dev_health {
	DEV_HEALTH_UNKNOWN,	/* not read yet */
	DEV_HEALTH_HEALTHY,	/* the last read succeeded */
	DEV_HEALTH_UNREACHABLE, /* the last read failed */
};

struct dev_status {
	enum dev_session session;
	const char *session_error; /* "" when up; valid until the next dev_note_read() */
	int64_t since_ms;	   /* wall clock */
	enum dev_health health;
	bool drained;
	/* what the device says of itself (dev_note_info; "" until it said, or
	 * when its model says nothing) and how many of ocsd's ports it reports
	 * FAILED or DISABLED */
	const struct sb_product *product;
	int ports_down;
};

/* -ENOENT when id is out of range. */
int dev_status(const struct devices *devs, int id, struct dev_status *out);
/*
 * Records the outcome of a read: ok, whether the session is up after it,
 * and why not (error; "unreadable" when empty). Returns true when anything
 * a client sees (session, error, health) changed: publish a device event.
 */
bool dev_note_read(struct devices *devs, int id, bool ok, bool connected, const char *error,
		   int64_t now_ms);
/*
 * Records what a read found the device saying of itself (sb_device_read_info:
 * product, ports FAILED or DISABLED, which replace the device's ports down).
 * Returns true when what ListDevices shows changed (product, the number of
 * ports down): publish a device event. Out of memory for the ports down, it
 * records nothing and returns false (the next pass tries again).
 */
bool dev_note_info(struct devices *devs, int id, const struct sb_device_info *info);
/*
 * The planner's view of port health: each of ocsd's ports that a device's
 * last info read found FAILED or DISABLED (on either side), as a port out
 * of service (lc_options.out_of_service: group, device and the port in
 * `in`), appended to *out (*n entries, grown with realloc; *out unchanged
 * on failure). Ports beyond the fabric's k-ocs are left out. 0 or -ENOMEM.
 */
int dev_out_of_service(const struct devices *devs, struct ocs_xc **out, size_t *n);
/* Devices whose last read failed. */
int dev_unreachable(const struct devices *devs);

/* ---- drain ---- */

/* Stores the drain state first, then applies it. 0, -ENOENT, or the store's -errno (unchanged). */
int dev_set_drained(struct devices *devs, int id, bool drained);
/* Applies the drain state stored by an earlier run (devices no longer configured are skipped). */
int dev_restore_drained(struct devices *devs);
bool dev_drained(const struct devices *devs, int id);
int dev_n_drained(const struct devices *devs);
/*
 * The drained flag of every device by id (dev_count() entries), for a
 * planner snapshot to copy; valid until the next drain change.
 */
const bool *dev_drained_mask(const struct devices *devs);

/* ---- cross-connects and read-back ---- */

/* The device's configured cross-connects sorted by input (fabric state run, O(1)). */
const struct st_circuit *dev_xcs(const struct devices *devs, int id, size_t *n);

/* What one read found: sorted by (in, out); the arrays belong to the struct. */
struct dev_readback {
	bool ok;
	struct sb_xc *xcs; /* NULL when !ok */
	size_t n;
	char error[sizeof(((struct sb_error *)0)->message) + 32]; /* "" when ok */
	/* with_info reads only: what the device says of itself, when its model
	 * says anything and that read succeeded too (has_info) */
	bool has_info;
	struct sb_device_info info;
	/* dev_read_bundles only (transceivers): the node's bundles, sorted by
	 * bundle (NULL when !ok), and whether the node says it is down */
	struct sb_bundle_state *bundles;
	size_t n_bundles;
	bool node_faulty;
};

/*
 * Connects the role's handle if needed (until now + the connect timeout)
 * and reads the device's running cross-connects. Blocking; callable from
 * a worker thread. Returns 0 (out->ok) or a negative errno with out->error
 * saying why. Clear out with dev_readback_clear() either way.
 */
int dev_read(const struct devices *devs, int id, enum dev_role role, struct dev_readback *out);
/*
 * dev_read(), then, when the device's model says anything of itself
 * (sb_device_read_info), that too into out->info (has_info; a failure of
 * that second read leaves has_info false and the first read's result
 * stands). The reconciliation passes read with it.
 */
int dev_read_with_info(const struct devices *devs, int id, enum dev_role role,
		       struct dev_readback *out);
/*
 * A transceiver's bundles (SB_MODEL_TRANSCEIVER), configuration and state
 * (peer node, path status, the node's fault), from running, as dev_read()
 * reads cross-connects: the role's handle connected if needed, blocking,
 * callable from a worker thread. The handle is claimed for the read
 * (sb_device_claim): the fault listener's read after a subscription and
 * the reconciliation share the DEV_ROLE_RECON handle of a node. 0 (out->ok)
 * or a negative errno with out->error saying why.
 */
int dev_read_bundles(const struct devices *devs, int id, enum dev_role role,
		     struct dev_readback *out);
void dev_readback_clear(struct dev_readback *rb);

/* How a read compares with the expected content; the arrays belong to the struct. */
struct dev_diff {
	struct sb_xc *unowned; /* on the device, not expected */
	size_t n_unowned;
	struct sb_xc *missing; /* expected, not on the device */
	size_t n_missing;
};

/*
 * Compares a device's cross-connects got (any order) with what it should
 * hold: its fabric-state run, with change applied when not NULL (its
 * removals matched by device and input, then its additions on this
 * device). O((n + m) log(n + m)) for this device only. 0 or -ENOMEM.
 * Clear *out with dev_diff_clear(); equal when both lists are empty.
 */
int dev_compare(const struct devices *devs, int id, const struct st_intent *change,
		const struct sb_xc *got, size_t n_got, struct dev_diff *out);
bool dev_diff_equal(const struct dev_diff *d);
void dev_diff_clear(struct dev_diff *d);

#endif
