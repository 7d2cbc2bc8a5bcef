/*
 * faults.h - node faults of an OCSTrx ring domain as the devices report
 * them: one notification listener (southbound/sb_notif.h, one thread for
 * every node's subscription session) whose node-fault notifications are
 * posted to the loop and handed to the job manager (jm_mark_node), which
 * stores the fault and repairs the ring holding the node.
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

#include <stddef.h>

#include "sb_device.h"

struct devices;
struct exec;
struct jm;
struct loop;
struct faults;

struct flt_deps {
	struct loop *loop;
	struct exec *exec; /* the reads after a (re)subscription */
	struct jm *jm;
	struct devices *devs; /* the node's reconciliation handle (node id = device id) */
	struct sb_driver *driver;
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
