/*
 * keepalive.h - the background keepalive of the devices' transaction
 * sessions (issue 13 "warm start", issue 14 finding 6): every interval one
 * executor task walks every device (one task for all of them, never a
 * thread per device) and calls sb_device_keepalive() on its transaction
 * handle: a live session gets no RPC, a session whose device went away
 * (restarted, killed, TCP keepalive gave up) is replaced with the device's
 * backoff, and a device without a session is connected. So a dead session
 * is replaced before a transaction needs it, off the transaction's path.
 * A device a transaction is using is skipped (the transaction checks it).
 *
 * What a pass finds is reported on the loop through the reconciliation's
 * device_read event (reconcile.h): ListDevices and Watch say DISCONNECTED
 * (with the connect error) while a device's session cannot be opened and
 * CONNECTED once it is up again, without waiting for a reconciliation
 * pass. Reconnects are counted in ocsd_device_reconnects_total{device}.
 *
 * Threading: ka_new, ka_free on the loop thread; the pass runs on the
 * executor and posts its findings back (one loop_post per pass).
 */
#ifndef OCSD_KEEPALIVE_H
#define OCSD_KEEPALIVE_H

#include "reconcile.h"

struct devices;
struct exec;
struct loop;
struct mx_registry;

struct ka_deps {
	struct loop *loop;
	struct exec *exec;
	struct devices *devs;	    /* the transaction handles are walked */
	struct recon_events events; /* device_read: what each visited device's session is */
	struct mx_registry *reg;    /* ocsd_device_reconnects_total is registered here */
	unsigned interval_ms;	    /* between passes; a pass spends at most this long */
};

struct ka;

/*
 * Starts the timer (the first pass one interval from now). NULL when out of
 * memory. Free with ka_free() (accepts NULL), which stops the timer and
 * waits for a running pass.
 */
struct ka *ka_new(const struct ka_deps *deps);
void ka_free(struct ka *k);

#endif
