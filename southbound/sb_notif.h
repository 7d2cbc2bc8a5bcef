/*
 * sb_notif.h - the notification listener: one NETCONF subscription session
 * per device (RFC 5277 create-subscription on the NETCONF stream), all of
 * them received on ONE thread that polls the sessions' file descriptors,
 * so a 1,024-node transceiver domain costs one thread, not 1,024.
 *
 * The listener has sessions of its own, separate from the devices' RPC
 * sessions (sb_device.h), so a transaction in progress never sees a
 * notification and a notification is never delayed behind an RPC. It
 * parses ocs-transceiver's node-fault and loss-of-light and ocs-switch's
 * port-state-change (how a rail OCS reports a GPU fault: its GPU-side port
 * lost light); anything else is delivered as SB_NOTIF_OTHER with its name. A session that ends is
 * reported (SB_NOTIF_LOST) and reconnected with exponential backoff
 * (the device config's backoff_min_ms / backoff_max_ms); each successful
 * subscription is reported (SB_NOTIF_SUBSCRIBED), so the caller knows that
 * notifications sent in between may have been missed and reads the device.
 *
 * Threads: sb_listener_new/add/start/free are called by the owner, one
 * thread at a time; add only before start. The callback runs on the
 * listener's thread, one notification at a time, and must not block (it
 * copies what it needs and posts it to its own loop). free stops the
 * thread and closes every session.
 */
#ifndef OCS_SB_NOTIF_H
#define OCS_SB_NOTIF_H

#include "sb_device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sb_notif_kind {
	SB_NOTIF_NODE_FAULT,	/* ocs-transceiver node-fault: node, faulty */
	SB_NOTIF_LOSS_OF_LIGHT, /* ocs-transceiver loss-of-light: node, bundle */
	SB_NOTIF_PORT_STATE,	/* ocs-switch port-state-change: port, port_up */
	SB_NOTIF_SUBSCRIBED,	/* the source's subscription is up (again) */
	SB_NOTIF_LOST,		/* the source's session ended; reconnecting */
	SB_NOTIF_OTHER,		/* any other notification: see name */
};

struct sb_notif {
	size_t source; /* the caller's number for the device (sb_listener_add) */
	enum sb_notif_kind kind;
	uint32_t node;	     /* NODE_FAULT, LOSS_OF_LIGHT */
	bool faulty;	     /* NODE_FAULT */
	uint8_t bundle;	     /* LOSS_OF_LIGHT */
	uint16_t port;	     /* PORT_STATE */
	bool port_up;	     /* PORT_STATE: oper-state up (true) or down/failed */
	int64_t received_us; /* CLOCK_MONOTONIC, taken as soon as it was parsed */
	const char *name;    /* the notification's name ("node-fault", ...); valid
				during the callback only; NULL for SUBSCRIBED/LOST */
};

/* Called on the listener thread; must not block. n is valid during the call only. */
typedef void (*sb_notif_fn)(void *arg, const struct sb_notif *n);

struct sb_listener;

/*
 * A listener on drv's context (drv must outlive it). 0, -ENOMEM. Free with
 * sb_listener_free().
 */
int sb_listener_new(struct sb_driver *drv, sb_notif_fn fn, void *arg, struct sb_listener **out);
/*
 * Adds a device (cfg copied; its address, credentials, timing, model and
 * port map are used: the model says which notifications mean faults). source: the caller's number,
 * passed back in every sb_notif. Before sb_listener_start() only. 0, -EBUSY (started), -EINVAL,
 * -ENOMEM.
 */
int sb_listener_add(struct sb_listener *l, const struct sb_device_config *cfg, size_t source);
/*
 * Starts the thread: it connects every device, subscribes, receives, and
 * reconnects with backoff. Returns at once (connection failures show as
 * retries, never as an error here). 0, -EALREADY, -errno of pthread_create.
 */
int sb_listener_start(struct sb_listener *l);
/* Stops the thread, closes every session, frees. Accepts NULL. */
void sb_listener_free(struct sb_listener *l);

#endif
