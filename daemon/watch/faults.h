/*
 * faults.h - faults as the devices report them: one notification listener
 * (southbound/sb_notif.h, one thread for every device's subscription
 * session) whose notifications are posted to the loop. In an OCSTrx ring
 * domain node-fault notifications are handed to the job manager
 * (jm_mark_node), which stores the fault and repairs the ring holding the
 * node; on a rail-OCS fabric port-state-change notifications (a GPU-side
 * port losing light is a GPU fault) are handed to the port_state callback
 * (gpu_swaps.c), and nothing is read after a subscription (reconciliation
 * reads those devices).
 *
 * After each (re)subscription the node is read (its `faulty` state, on the
 * device's reconciliation handle, as an executor task) so that a fault
 * sent while the session was down is not missed; that read and a lost
 * session are what ListDevices reports for the node (dev_note_read), ring
 * domains having no reconciliation pass. A node reporting itself
 * healthy again is logged only: it stays out of every plan until an
 * operator marks it healthy (MarkNode), as issue 11 asks.
 *
 * Threading: flt_start/flt_stop/flt_free on the loop thread; the
 * listener's callback only copies and posts.
 */
#ifndef OCSD_FAULTS_H
#define OCSD_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sb_device.h"

struct devices;
struct exec;
struct jm;
struct loop;
struct faults;

struct flt_deps {
	struct loop *loop;
	struct exec *exec;    /* the reads after a (re)subscription */
	struct jm *jm;	      /* ring domains; NULL with port_state */
	struct devices *devs; /* the node's reconciliation handle (node id = device id) */
	struct sb_driver *driver;
	/* Rail-OCS fabrics: a port of device `device` changed its oper-state
	 * (loop thread; received_us when the listener parsed it). */
	void (*port_state)(void *ctx, int device, int port, bool up, int64_t received_us);
	void *port_ctx;
};

/*
 * Subscribes to every node (configs[i] is node i's device, n nodes) and
 * starts the listener. 0 with *out, or -errno (nothing left running).
 */
int flt_start(const struct flt_deps *d, const struct sb_device_config *configs, int n,
	      struct faults **out);
/* Nodes whose notification subscription is up (for the ocsd_nodes_subscribed gauge). */
size_t flt_subscribed(const struct faults *f);
/* Stops the listener; notifications and reads still under way are dropped. Accepts NULL. */
void flt_stop(struct faults *f);
/* Frees after the loop and the executor finished (they may still hold its nodes). Accepts NULL. */
void flt_free(struct faults *f);

#endif
