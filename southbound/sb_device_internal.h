/*
 * sb_device_internal.h - what the two files of the device driver
 * (sb_device.h) share: the driver and device structs behind the opaque
 * handles, and the two calls the RPC file makes into the session file. Not
 * installed, and not for use outside sb_device.c and sb_device_rpc.c.
 *
 * Files:
 *
 *   sb_device.c      the driver, device handles, the session (connect,
 *                    host keys, capabilities, strategy, backoff, drop),
 *                    the verified image, claims and the keepalive
 *   sb_device_rpc.c  the RPCs on a session: building their XML, sending
 *                    them over sb_wire and reading their replies
 *
 * Calls go one way, sb_device_rpc.c --> sb_device.c.
 */
#ifndef OCSD_SB_DEVICE_INTERNAL_H
#define OCSD_SB_DEVICE_INTERNAL_H

#include <libyang/libyang.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sb_device.h"

/*
 * Session setup slots. libnetconf2's context check at every connect extends
 * the context it is given, so a context serves one setup at a time; with
 * one, a device that was slow to answer it held every other device's
 * connect for its whole setup deadline. Each slot is an identical, frozen
 * context with its mutex and its guard (sb_guard.h): a connect takes any
 * free slot, so one device stuck in its setup holds one slot, not all.
 */
#define SB_SETUP_SLOTS 4

struct sb_setup_slot {
	struct ly_ctx *ctx;
	pthread_mutex_t mu;	/* held for the setup (may extend ctx) */
	struct sb_guard *guard; /* the setup's deadline, armed under mu */
};

struct sb_driver {
	struct sb_setup_slot slots[SB_SETUP_SLOTS];
	atomic_uint next_slot; /* where the next connect starts looking */
	/* TLS connects are made one at a time, under this mutex (taken before a
	 * slot's): the guard finds a TLS connect's socket as the one that
	 * appeared since its arm (sb_guard.h). (libnetconf2 2.0 keeps the TLS
	 * client options per thread, so they do not need it.) */
	pthread_mutex_t tls_mu;
	struct sb_driver_counters counters;
};

struct sb_device {
	struct sb_driver *drv;
	struct sb_device_config cfg;
	struct nc_session *session;
	struct sb_wire *wire; /* ocsd's RPC traffic on the session (sb_wire.h), made at first use */
	struct sb_capabilities caps;
	enum sb_strategy strategy;
	int backoff_ms;		 /* current reconnect delay, 0 after a success */
	int64_t next_attempt_ms; /* no connect before this time */
	char hostkey_error[320];
	int fd; /* the SSH session's socket, -1 otherwise */
	/* settings staged by sb_device_set_config() from any thread, taken by
	 * the device's next connect (guarded by staged_mu) */
	pthread_mutex_t staged_mu;
	bool staged;
	struct sb_device_config staged_cfg;
	/* who uses the device (sb_device_claim): a transaction, or a keepalive pass */
	pthread_mutex_t claim_mu;
	pthread_cond_t claim_cv;
	bool claimed; /* guarded by claim_mu */
	bool ever_connected;
	atomic_uint_least64_t reconnects; /* sessions opened after the first */
	/* the last verified image of running in this session (sb_device.h) */
	bool image_known;
	atomic_bool image_forget;  /* set by sb_device_forget_image() from any thread */
	struct sb_xc *image;	   /* switch: cross-connects, sorted */
	struct sb_bundle *image_b; /* transceiver: bundles, sorted */
	size_t n_image;
};

/* Fills *err (when not NULL) for dev and op; returns code. */
int sbd_set_err(struct sb_error *err, const struct sb_device *dev, const char *op, int code,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Ends the device's session (and forgets its image); out_of_step: without
 * <close-session>, its socket shut down first (sb_device.c says why).
 */
void sbd_drop_session(struct sb_device *dev, bool out_of_step);

#endif
