/*
 * fabric.h - the fabric model: the three kinds of optical fabric ocsd
 * controls and every piece of derived indexing over them.
 *
 * This is the only place that knows how leaves sit in pods, how spine ports
 * are wired to OCS devices and how transceiver nodes are ordered. Planners,
 * realization, the L2 checker, the southbound and the daemon all ask these
 * functions instead of recomputing an index themselves (ARCHITECTURE.md
 * section 1 is the source of truth for the wiring definitions).
 *
 * Symbols (as in the LumosCore paper):
 *   pods   P       number of pods
 *   k_leaf         spine-facing ports per leaf (also GPU-facing ports per leaf)
 *   k_spine        OCS-facing ports per spine (also leaf-facing ports)
 *   tau            parallel links between a leaf and each spine of its pod
 *   k_ocs          ports per OCS device (inputs = outputs = k_ocs)
 *   H = k_leaf/tau spines per pod = OCS groups
 *   k_spine/tau    leaves per pod
 *
 * Wiring of spine port k (0..k_spine-1) of spine h in pod p into group h:
 *   straight  tx -> device k input p,              rx <- device k output p
 *   dual      tx -> device k/2 input 2p+(k%2),     rx <- device k/2 output 2p+(k%2)
 *   cross     tx -> device k input p,              rx <- device k^1 output p
 *
 * Pure C, no I/O, no globals: every function here is thread-safe on a
 * fabric that is not being modified.
 */
#ifndef OCS_FABRIC_H
#define OCS_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

enum ocs_wiring {
	OCS_WIRING_STRAIGHT = 0,
	OCS_WIRING_DUAL = 1,
	OCS_WIRING_CROSS = 2,
};

/* "straight", "dual", "cross"; NULL for an invalid value. */
const char *ocs_wiring_name(enum ocs_wiring w);
/* Parses a wiring name; returns 0, or -EINVAL for an unknown name. */
int ocs_wiring_parse(const char *name, enum ocs_wiring *out);

/*
 * A three-tier leaf-spine-OCS fabric. Plain parameters: the derived values
 * come from the functions below. Validate with ocs_fabric_validate() before
 * using any other function; they assume a valid fabric.
 */
struct ocs_fabric {
	int pods;
	int k_leaf;
	int k_spine;
	int tau;
	int k_ocs;
	enum ocs_wiring wiring;
};

/* One problem found by a validator: which parameter and why. */
struct ocs_fabric_problem {
	const char *field; /* parameter name as in the config ("k-leaf") */
	char reason[128];
};

/*
 * Checks every structural rule of a leaf-spine-OCS fabric (positive sizes,
 * k_leaf and k_spine divisible by tau, k_spine even for dual and cross, enough
 * OCS ports per device for every pod: P for straight/cross, 2P for dual).
 * Writes up to max_problems problems and returns how many rules were
 * violated in total (0 = valid).
 */
int ocs_fabric_validate(const struct ocs_fabric *f, struct ocs_fabric_problem *problems,
			int max_problems);

/* Derived sizes. */
int ocs_fabric_spines_per_pod(const struct ocs_fabric *f);    /* H = k_leaf / tau */
int ocs_fabric_groups(const struct ocs_fabric *f);	      /* = H */
int ocs_fabric_leaves_per_pod(const struct ocs_fabric *f);    /* k_spine / tau */
int ocs_fabric_leaves(const struct ocs_fabric *f);	      /* P * leaves per pod */
int ocs_fabric_spines(const struct ocs_fabric *f);	      /* P * H */
int64_t ocs_fabric_gpus(const struct ocs_fabric *f);	      /* leaves * k_leaf */
int ocs_fabric_devices_per_group(const struct ocs_fabric *f); /* k_spine, or k_spine/2 for dual */
int ocs_fabric_devices(const struct ocs_fabric *f);	      /* groups * devices per group */
/* Device ports a pod occupies on each device: 1, or 2 for dual wiring. */
int ocs_fabric_ports_per_pod(const struct ocs_fabric *f);
/* Device input ports in use when every spine port is cabled: P * ports per pod. */
int ocs_fabric_device_ports_used(const struct ocs_fabric *f);
int64_t ocs_fabric_ocs_ports_total(const struct ocs_fabric *f);	      /* devices * k_ocs */
int64_t ocs_fabric_spine_ocs_ports_total(const struct ocs_fabric *f); /* spines * k_spine */

/* Leaves are numbered globally: pod p holds p*lpp .. (p+1)*lpp - 1. */
int ocs_fabric_leaf_pod(const struct ocs_fabric *f, int leaf);
int ocs_fabric_leaf_index_in_pod(const struct ocs_fabric *f, int leaf);
int ocs_fabric_leaf_id(const struct ocs_fabric *f, int pod, int index_in_pod);
/* Spines are numbered globally: spine h of pod p is p*H + h. */
int ocs_fabric_spine_id(const struct ocs_fabric *f, int pod, int h);
int ocs_fabric_spine_pod(const struct ocs_fabric *f, int spine);
int ocs_fabric_spine_group(const struct ocs_fabric *f, int spine);
/* GPUs hang off leaves: leaf l holds GPUs l*k_leaf .. (l+1)*k_leaf - 1. */
int ocs_fabric_gpu_leaf(const struct ocs_fabric *f, int64_t gpu);
/* Devices are numbered globally: device d of group h is h*dpg + d. */
int ocs_fabric_device_id(const struct ocs_fabric *f, int group, int device);
int ocs_fabric_device_group(const struct ocs_fabric *f, int device_id);
int ocs_fabric_device_in_group(const struct ocs_fabric *f, int device_id);

/*
 * A spine's OCS-facing port: pod, spine index h (= OCS group) and port k.
 * A device port: device within the group and port number on it.
 */
struct ocs_spine_port {
	int pod;
	int h;
	int k;
};

struct ocs_device_port {
	int device; /* within the group */
	int port;
};

/* Where spine port sp transmits into: the device input port. */
struct ocs_device_port ocs_fabric_tx_port(const struct ocs_fabric *f, struct ocs_spine_port sp);
/* Where spine port sp receives from: the device output port. */
struct ocs_device_port ocs_fabric_rx_port(const struct ocs_fabric *f, struct ocs_spine_port sp);
/*
 * Inverses, within group h. Return 0 and fill *sp, or -ENOENT when the
 * device port is not cabled to any spine (a port beyond what the pods use).
 */
int ocs_fabric_input_owner(const struct ocs_fabric *f, int h, struct ocs_device_port in,
			   struct ocs_spine_port *sp);
int ocs_fabric_output_owner(const struct ocs_fabric *f, int h, struct ocs_device_port out,
			    struct ocs_spine_port *sp);

/*
 * A cross-connect on an OCS device: light entering input port `in` of the
 * device leaves on output port `out`. One-way; a bidirectional circuit is two
 * cross-connects (on one device for straight and dual, on a device pair for
 * cross).
 */
struct ocs_xc {
	int group;
	int device; /* within the group */
	int in;
	int out;
};

/*
 * qsort/bsearch comparators of struct ocs_xc (negative, 0, positive). Both
 * order by group, then device, then input port:
 *   ocs_xc_cmp_in_out  then by output port: equal only for the same
 *                      cross-connect (sets of cross-connects);
 *   ocs_xc_cmp_in      not by output: equal for the cross-connect that
 *                      occupies the same device input (what a device holds
 *                      at an input, whatever its output).
 */
int ocs_xc_cmp_in_out(const void *a, const void *b);
int ocs_xc_cmp_in(const void *a, const void *b);

/* ------------------------------------------------------------------------
 * OCSTrx ring domain (InfinitePOD): nodes under ToRs, each node with GPUs and
 * transceiver bundles that reach nodes up to K apart in deployment order.
 *
 * Nodes are numbered by ToR: node n sits under ToR n / nodes_per_tor at
 * index n % nodes_per_tor. Deployment order (InfinitePOD Alg. 3): nodes with
 * the same index under every ToR form a sub-line, and the sub-lines are
 * joined end to end, so node (tor t, index i) is at position i*tors + t.
 * ToRs are grouped into aggregation domains of tors_per_agg consecutive ToRs.
 */
struct ocs_ring_domain {
	int tors;
	int nodes_per_tor;
	int gpus_per_node;
	int k_hops;	  /* K: external paths reach 1..K positions each way */
	int bundles;	  /* OCSTrx bundles per node */
	int tors_per_agg; /* ToRs per aggregation domain */
	bool closed;	  /* the line is closed into a ring (first joins last) */
};

int ocs_ring_validate(const struct ocs_ring_domain *r, struct ocs_fabric_problem *problems,
		      int max_problems);
int64_t ocs_ring_gpus(const struct ocs_ring_domain *r);
int ocs_ring_node_agg(const struct ocs_ring_domain *r, int node);
int ocs_ring_agg_domains(const struct ocs_ring_domain *r);

/* The planners' inner loops call these: defined here so that they inline. */
static inline int ocs_ring_nodes(const struct ocs_ring_domain *r)
{
	return r->tors * r->nodes_per_tor;
}

static inline int ocs_ring_node_tor(const struct ocs_ring_domain *r, int node)
{
	return node / r->nodes_per_tor;
}

static inline int ocs_ring_position(const struct ocs_ring_domain *r, int node)
{
	return node % r->nodes_per_tor * r->tors + node / r->nodes_per_tor;
}

static inline int ocs_ring_node_at(const struct ocs_ring_domain *r, int position)
{
	return position % r->tors * r->nodes_per_tor + position / r->tors;
}

/*
 * Hop distance in deployment order between two nodes (around the ring when
 * closed); the nodes are joined by an external path when 1 <= distance <= K.
 */
int ocs_ring_distance(const struct ocs_ring_domain *r, int node_a, int node_b);
bool ocs_ring_adjacent(const struct ocs_ring_domain *r, int node_a, int node_b);

/* ------------------------------------------------------------------------
 * Rail-OCS fabric (rail-only networks with optical GPU swap, issue 12):
 * servers are HB domains of `rails` GPUs each; GPU r of a server belongs to
 * rail r. Servers are grouped by `servers_per_ocs` consecutive servers; one
 * OCS device per group sits between the GPUs of its servers and those
 * servers' rail-switch ports. The last `spare_servers_per_ocs` servers of a
 * group are spares: their GPUs are cabled to the device but they own no
 * rail-switch ports. The other servers of the group are active and own one
 * rail port per rail.
 *
 * Numbering (S = servers_per_ocs, A = S - spare_servers_per_ocs, R = rails):
 *   server s        group s / S, index i = s % S in its group; spare when
 *                   i >= A
 *   GPU g           g = s*R + r (server s, rail r), spares included
 *   device          one per group: device id = group id
 *   GPU-side port   of GPU (s, r) on its group's device: i*R + r,
 *                   0 .. S*R - 1
 *   switch-side     rail port r of active server s (index i < A):
 *   port            S*R + i*R + r, S*R .. S*R + A*R - 1
 *   rail port id    global number of rail port (s, r): group*A*R + i*R + r
 * A device has (S + A)*R ports; each port is an input and an output (light
 * enters input p and leaves output q along a cross-connect p -> q). A join
 * of GPU port g and switch port w is a bidirectional circuit: the two
 * one-way cross-connects g -> w and w -> g on the group's device.
 * Initially GPU r of every active server is joined to its own rail port r.
 */
struct ocs_rail_fabric {
	int servers; /* HB domains, spares included */
	int rails;   /* = GPUs per server */
	int servers_per_ocs;
	int spare_servers_per_ocs;
};

/*
 * Checks sizes (positive; spares fewer than servers per OCS), that
 * servers_per_ocs divides servers and that a device's ports and the GPU
 * count fit the limits. Problems name the config member ("servers-per-ocs").
 */
int ocs_rail_validate(const struct ocs_rail_fabric *r, struct ocs_fabric_problem *problems,
		      int max_problems);
int ocs_rail_groups(const struct ocs_rail_fabric *r);		 /* = devices */
int ocs_rail_active_per_group(const struct ocs_rail_fabric *r);	 /* A */
int ocs_rail_active_servers(const struct ocs_rail_fabric *r);	 /* groups * A */
int ocs_rail_spare_servers(const struct ocs_rail_fabric *r);	 /* groups * spares */
int64_t ocs_rail_gpus(const struct ocs_rail_fabric *r);		 /* every GPU, spares included */
int64_t ocs_rail_active_gpus(const struct ocs_rail_fabric *r);	 /* GPUs of active servers */
int64_t ocs_rail_spare_gpus(const struct ocs_rail_fabric *r);	 /* GPUs of spare servers */
int64_t ocs_rail_rail_ports(const struct ocs_rail_fabric *r);	 /* = active GPUs */
int ocs_rail_gpu_side_ports(const struct ocs_rail_fabric *r);	 /* per device: S*R */
int ocs_rail_switch_side_ports(const struct ocs_rail_fabric *r); /* per device: A*R */
int ocs_rail_device_ports(const struct ocs_rail_fabric *r);	 /* per device: (S+A)*R */
int ocs_rail_server_group(const struct ocs_rail_fabric *r, int server);
int ocs_rail_server_in_group(const struct ocs_rail_fabric *r, int server);
int ocs_rail_server_id(const struct ocs_rail_fabric *r, int group, int index_in_group);
bool ocs_rail_is_spare_server(const struct ocs_rail_fabric *r, int server);
int ocs_rail_gpu_rail(const struct ocs_rail_fabric *r, int64_t gpu);
int ocs_rail_gpu_server(const struct ocs_rail_fabric *r, int64_t gpu);
int64_t ocs_rail_gpu_id(const struct ocs_rail_fabric *r, int server, int rail);
/* GPU-side port of a GPU on its group's device. */
int ocs_rail_gpu_port(const struct ocs_rail_fabric *r, int64_t gpu);
/* Switch-side port of rail port `rail` of server `server`; -ENOENT for a spare. */
int ocs_rail_switch_port(const struct ocs_rail_fabric *r, int server, int rail);
/* Rail port id of (server, rail); -ENOENT for a spare server. */
int64_t ocs_rail_port_id(const struct ocs_rail_fabric *r, int server, int rail);
int ocs_rail_port_server(const struct ocs_rail_fabric *r, int64_t port_id);
int ocs_rail_port_rail(const struct ocs_rail_fabric *r, int64_t port_id);

/*
 * What port `port` of the device of group `group` is cabled to: a GPU
 * (is_gpu, gpu) or a rail port (!is_gpu, rail_port id). Returns 0, or
 * -ENOENT for a port number beyond the device's ports.
 */
struct ocs_rail_port_owner {
	bool is_gpu;
	int64_t gpu;
	int64_t rail_port;
};
int ocs_rail_port_owner(const struct ocs_rail_fabric *r, int group, int port,
			struct ocs_rail_port_owner *owner);

#endif
