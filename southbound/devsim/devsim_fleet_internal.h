/*
 * devsim_fleet_internal.h - what the two files of the simulated fleet
 * (devsim_fleet.h) share: the fleet and device structs behind the opaque
 * handles, and the calls the RPC handlers make into the devices' state,
 * rules and notifications. Not for use outside devsim_fleet.c and
 * devsim_fleet_rpc.c.
 *
 * Files:
 *
 *   devsim_fleet.c      the fleet, its devices' state (running, candidate,
 *                       state data like hardware), the rules a validate or
 *                       commit checks, notifications, sessions that end
 *   devsim_fleet_rpc.c  what each NETCONF operation does to a device, with
 *                       the fault knobs of its step
 *
 * Calls go one way, devsim_fleet_rpc.c --> devsim_fleet.c. Prefix fleet_.
 */
#ifndef DEVSIM_FLEET_INTERNAL_H
#define DEVSIM_FLEET_INTERNAL_H

#include <libyang/libyang.h>
#include <nc_server.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "devsim_fault.h"
#include "devsim_fleet.h"

#define MAX_SUBSCRIBERS 8
#define MAX_KILLED	8 /* killed sessions remembered per device */

struct devsim_fleet {
	const struct ly_ctx *ctx; /* borrowed */
	enum devsim_model model;
	int ports;     /* per device; polatis: N, ports 1..2N */
	int base_port; /* the first device's TCP port: polatis serial numbers */
	int switch_us;
	bool bidirectional;
	/* ocs-transceiver: the ring domain (solvers/fabric.h numbering) */
	int node_base, ring_tors, ring_nodes_per_tor, ring_k, bundles;
	bool ring_closed;
	atomic_bool *faulty;  /* per device: its node is faulty (read by every device) */
	const char *ietf_dir; /* borrowed: IETF modules served by get-schema */
	struct devsim_device *devs;
	int count;
};

struct devsim_device {
	const struct devsim_fleet *fleet; /* the settings every device shares */
	int index;			  /* in the fleet */
	uint32_t node;			  /* ocs-transceiver: the node served */
	pthread_mutex_t mu;		  /* guards every field below */
	struct lyd_node *running;
	struct lyd_node *candidate;
	bool candidate_dirty;	   /* false: candidate is a copy of running */
	bool candidate_valid;	   /* candidate passed <validate> since its last edit */
	uint32_t lock_running_sid; /* 0 = unlocked */
	uint32_t lock_candidate_sid;
	/* pending confirmed commit */
	bool cc_active;
	struct lyd_node *cc_backup; /* running before the confirmed commit */
	uint32_t cc_sid;
	char *cc_persist; /* persist id, NULL when not persistent */
	int64_t cc_deadline_ms;
	/* ocs-switch: per input port, current output (-1 none) and when it was
	 * set; ocs-transceiver: per bundle, the selected path (path_code()) and
	 * when it was selected, and the node it reaches (peer, -1 none);
	 * polatis: per ocsd port k (ingress 1+k), the ocsd port of its egress
	 * (egress N+1+cur_out[k]), -1 none */
	int *cur_out;
	int64_t *since_us;
	int *peer;
	bool *disabled; /* polatis: per port id 1..2N, taken out by port-set-state */
	struct devsim_faults faults;
	struct nc_session *subscribers[MAX_SUBSCRIBERS];
	int n_subscribers;
	bool fault_spread; /* set-faults failed the node: the peers must hear of it */
	/* sessions ended by <kill-session>, the last MAX_KILLED: an RPC of one
	 * that was already read (a hung one) must not run after the kill */
	uint32_t killed[MAX_KILLED];
	unsigned n_killed;
};

/* A deep copy of a datastore tree (NULL for NULL or out of memory). */
struct lyd_node *fleet_dup_tree(const struct lyd_node *tree);

/*
 * set-faults replaced the knobs `before` of an ocs-switch (device mutex
 * held): every port that fail-port now fails sends port-state-change
 * `failed`, every port it no longer fails sends `up` (the light is back:
 * how a rail OCS reports a GPU fault and its end). A port named twice is
 * reported once; a port failed before and after is not reported again.
 */
void fleet_notify_failed_ports(struct devsim_device *d, const struct devsim_faults *before);

/* loss-of-light for a bundle of the device's node (device mutex held). */
void fleet_notify_loss_of_light(struct devsim_device *d, int bundle);

/* node-fault for the device's node with its present state (device mutex held). */
void fleet_notify_node_fault(struct devsim_device *d);

/*
 * A port's state to every subscriber (device mutex held): ocs-switch
 * port-state-change (port, failed or up); polatis port-power-alarm (failed)
 * or port-power-clear for ingress 1+port, with its label.
 */
void fleet_notify_port_state(struct devsim_device *d, int port, bool failed);

/*
 * polatis port-set-state (mutex held): every port-enab and port-disab
 * must be a port 1..2N, and none both; then all are applied, else none.
 */
struct nc_server_reply *fleet_port_set_state(struct devsim_device *d, const struct lyd_node *rpc);

/* Builds running + state data of a polatis device (ports: port-config, opm-power, product). */
struct lyd_node *fleet_polatis_state(struct devsim_device *d, bool with_ports);

/* Sends event (takes ownership) to every subscriber of d (mutex held). */
void fleet_notify_subscribers(struct devsim_device *d, struct lyd_node *event);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t fleet_now_ms(void);

/* Whether the device's knobs fail port (fail-port). */
bool fleet_port_failed(const struct devsim_device *d, int port);

/*
 * refuse-port (mutex held): 0 when the edit that turns datastore `before`
 * into `after` sets no connection on a refused port (creates none with
 * input or output P, re-points none that had output P; removals pass);
 * else -1 with the message of the <rpc-error> in msg.
 */
int fleet_refused_edit(const struct devsim_device *d, const struct lyd_node *before,
		       const struct lyd_node *after, char *msg, size_t msg_len);

/* An <rpc-error> reply: tag, message (or NULL), error-path (or NULL). */
struct nc_server_reply *fleet_reply_err(const struct devsim_fleet *f, NC_ERR tag, const char *msg,
					const char *path);

/* lock-denied naming the holding session (0: the candidate is dirty). */
struct nc_server_reply *fleet_reply_lock_denied(const struct devsim_fleet *f, uint32_t holder);

/* Running back to the copy taken before the confirmed commit (mutex held). */
void fleet_revert_confirmed_commit(struct devsim_device *d);

/* Installs a new running tree (takes ownership) and updates switch timing. */
void fleet_set_running(struct devsim_device *d, struct lyd_node *tree);

/* Builds running + state data of an ocs-switch device. */
struct lyd_node *fleet_switch_state(struct devsim_device *d, bool with_ports);

/* Builds running + state data of an ocs-transceiver agent. */
struct lyd_node *fleet_transceiver_state(struct devsim_device *d);

/*
 * Full validation of a datastore copy: YANG constraints, then device rules.
 * 0, or -EINVAL (-EEXIST: a polatis egress taken by two pairs) with the
 * message and the error-path.
 */
int fleet_validate_tree(const struct devsim_device *d, const struct lyd_node *tree, char *msg,
			size_t msg_len, char *path, size_t path_len);

/*
 * The peers' side of a node fault: every other device whose selected path
 * reaches `node` sends loss-of-light for that bundle. Called with no device
 * mutex held; takes one at a time.
 */
void fleet_node_fault_spread(const struct devsim_fleet *f, const struct devsim_device *from);

#endif
