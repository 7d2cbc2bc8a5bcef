/*
 * fabric.c - derived indexing and structural validation of the fabric
 * models declared in fabric.h. Every wiring rule of ARCHITECTURE.md
 * section 1 is implemented here and nowhere else.
 */
#include "fabric.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const wiring_names[] = {
	[OCS_WIRING_STRAIGHT] = "straight",
	[OCS_WIRING_DUAL] = "dual",
	[OCS_WIRING_CROSS] = "cross",
};

const char *ocs_wiring_name(enum ocs_wiring w)
{
	if ((unsigned)w >= sizeof(wiring_names) / sizeof(wiring_names[0]))
		return NULL;
	return wiring_names[w];
}

int ocs_wiring_parse(const char *name, enum ocs_wiring *out)
{
	for (unsigned i = 0; i < sizeof(wiring_names) / sizeof(wiring_names[0]); i++) {
		if (name && strcmp(name, wiring_names[i]) == 0) {
			*out = (enum ocs_wiring)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Three-way comparison of two ints without overflow. */
static int int_cmp(int a, int b)
{
	return (a > b) - (a < b);
}

int ocs_xc_cmp_in(const void *a, const void *b)
{
	const struct ocs_xc *x = a, *y = b;

	if (x->group != y->group)
		return int_cmp(x->group, y->group);
	if (x->device != y->device)
		return int_cmp(x->device, y->device);
	return int_cmp(x->in, y->in);
}

int ocs_xc_cmp_in_out(const void *a, const void *b)
{
	const struct ocs_xc *x = a, *y = b;
	int c = ocs_xc_cmp_in(x, y);

	return c ? c : int_cmp(x->out, y->out);
}

/* Collects problems for the validators: counts all, stores the first max. */
struct problem_list {
	struct ocs_fabric_problem *items;
	int max;
	int count;
};

__attribute__((format(printf, 3, 4))) static void problem(struct problem_list *pl,
							  const char *field, const char *fmt, ...)
{
	if (pl->count < pl->max) {
		va_list ap;
		struct ocs_fabric_problem *p = &pl->items[pl->count];

		p->field = field;
		va_start(ap, fmt);
		vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
		va_end(ap);
	}
	pl->count++;
}

/* Upper bound on any single size, so that derived products fit in int. */
#define OCS_SIZE_MAX 65536

static bool size_ok(struct problem_list *pl, const char *field, int v, int min)
{
	if (v < min || v > OCS_SIZE_MAX) {
		problem(pl, field, "must be between %d and %d (got %d)", min, OCS_SIZE_MAX, v);
		return false;
	}
	return true;
}

int ocs_fabric_validate(const struct ocs_fabric *f, struct ocs_fabric_problem *problems,
			int max_problems)
{
	struct problem_list pl = {problems, max_problems, 0};
	bool sizes = true;

	sizes &= size_ok(&pl, "pods", f->pods, 2);
	sizes &= size_ok(&pl, "k-leaf", f->k_leaf, 1);
	sizes &= size_ok(&pl, "k-spine", f->k_spine, 1);
	sizes &= size_ok(&pl, "tau", f->tau, 1);
	sizes &= size_ok(&pl, "k-ocs", f->k_ocs, 2);
	if (!ocs_wiring_name(f->wiring)) {
		problem(&pl, "wiring", "must be straight, dual or cross");
		return pl.count;
	}
	if (!sizes)
		return pl.count;

	if (f->k_leaf % f->tau != 0)
		problem(&pl, "k-leaf", "must be divisible by tau (%d)", f->tau);
	if (f->k_spine % f->tau != 0)
		problem(&pl, "k-spine", "must be divisible by tau (%d)", f->tau);
	if (f->wiring != OCS_WIRING_STRAIGHT && f->k_spine % 2 != 0)
		problem(&pl, "k-spine", "must be even for %s wiring (got %d)",
			ocs_wiring_name(f->wiring), f->k_spine);
	if (f->wiring == OCS_WIRING_DUAL && f->k_ocs < 2 * f->pods)
		problem(&pl, "k-ocs",
			"dual wiring needs two ports per pod on every device: %d pods need %d, "
			"devices have %d",
			f->pods, 2 * f->pods, f->k_ocs);
	else if (f->k_ocs < f->pods)
		problem(&pl, "k-ocs",
			"every device needs one port per pod: %d pods need %d, devices have %d",
			f->pods, f->pods, f->k_ocs);
	if (pl.count == 0 && (int64_t)f->pods * (f->k_spine / f->tau) * f->k_leaf > INT32_MAX)
		problem(&pl, "pods", "fabric has more than %d GPUs", INT32_MAX);
	return pl.count;
}

int ocs_fabric_spines_per_pod(const struct ocs_fabric *f)
{
	return f->k_leaf / f->tau;
}

int ocs_fabric_groups(const struct ocs_fabric *f)
{
	return ocs_fabric_spines_per_pod(f);
}

int ocs_fabric_leaves_per_pod(const struct ocs_fabric *f)
{
	return f->k_spine / f->tau;
}

int ocs_fabric_leaves(const struct ocs_fabric *f)
{
	return f->pods * ocs_fabric_leaves_per_pod(f);
}

int ocs_fabric_spines(const struct ocs_fabric *f)
{
	return f->pods * ocs_fabric_spines_per_pod(f);
}

int64_t ocs_fabric_gpus(const struct ocs_fabric *f)
{
	return (int64_t)ocs_fabric_leaves(f) * f->k_leaf;
}

int ocs_fabric_ports_per_pod(const struct ocs_fabric *f)
{
	return f->wiring == OCS_WIRING_DUAL ? 2 : 1;
}

int ocs_fabric_devices_per_group(const struct ocs_fabric *f)
{
	return f->k_spine / ocs_fabric_ports_per_pod(f);
}

int ocs_fabric_devices(const struct ocs_fabric *f)
{
	return ocs_fabric_groups(f) * ocs_fabric_devices_per_group(f);
}

int ocs_fabric_device_ports_used(const struct ocs_fabric *f)
{
	return f->pods * ocs_fabric_ports_per_pod(f);
}

int64_t ocs_fabric_ocs_ports_total(const struct ocs_fabric *f)
{
	return (int64_t)ocs_fabric_devices(f) * f->k_ocs;
}

int64_t ocs_fabric_spine_ocs_ports_total(const struct ocs_fabric *f)
{
	return (int64_t)ocs_fabric_spines(f) * f->k_spine;
}

int ocs_fabric_leaf_pod(const struct ocs_fabric *f, int leaf)
{
	return leaf / ocs_fabric_leaves_per_pod(f);
}

int ocs_fabric_leaf_index_in_pod(const struct ocs_fabric *f, int leaf)
{
	return leaf % ocs_fabric_leaves_per_pod(f);
}

int ocs_fabric_leaf_id(const struct ocs_fabric *f, int pod, int index_in_pod)
{
	return pod * ocs_fabric_leaves_per_pod(f) + index_in_pod;
}

int ocs_fabric_spine_id(const struct ocs_fabric *f, int pod, int h)
{
	return pod * ocs_fabric_spines_per_pod(f) + h;
}

int ocs_fabric_spine_pod(const struct ocs_fabric *f, int spine)
{
	return spine / ocs_fabric_spines_per_pod(f);
}

int ocs_fabric_spine_group(const struct ocs_fabric *f, int spine)
{
	return spine % ocs_fabric_spines_per_pod(f);
}

int ocs_fabric_gpu_leaf(const struct ocs_fabric *f, int64_t gpu)
{
	return (int)(gpu / f->k_leaf);
}

int ocs_fabric_device_id(const struct ocs_fabric *f, int group, int device)
{
	return group * ocs_fabric_devices_per_group(f) + device;
}

int ocs_fabric_device_group(const struct ocs_fabric *f, int device_id)
{
	return device_id / ocs_fabric_devices_per_group(f);
}

int ocs_fabric_device_in_group(const struct ocs_fabric *f, int device_id)
{
	return device_id % ocs_fabric_devices_per_group(f);
}

struct ocs_device_port ocs_fabric_tx_port(const struct ocs_fabric *f, struct ocs_spine_port sp)
{
	switch (f->wiring) {
	case OCS_WIRING_DUAL:
		return (struct ocs_device_port){sp.k / 2, 2 * sp.pod + sp.k % 2};
	case OCS_WIRING_STRAIGHT:
	case OCS_WIRING_CROSS:
	default:
		return (struct ocs_device_port){sp.k, sp.pod};
	}
}

struct ocs_device_port ocs_fabric_rx_port(const struct ocs_fabric *f, struct ocs_spine_port sp)
{
	switch (f->wiring) {
	case OCS_WIRING_DUAL:
		return (struct ocs_device_port){sp.k / 2, 2 * sp.pod + sp.k % 2};
	case OCS_WIRING_CROSS:
		return (struct ocs_device_port){sp.k ^ 1, sp.pod};
	case OCS_WIRING_STRAIGHT:
	default:
		return (struct ocs_device_port){sp.k, sp.pod};
	}
}

/* Device port -> spine port for the ports that carry the same index both ways. */
static int port_owner(const struct ocs_fabric *f, int h, int device, int port,
		      struct ocs_spine_port *sp)
{
	if (h < 0 || h >= ocs_fabric_groups(f) || device < 0 ||
	    device >= ocs_fabric_devices_per_group(f) || port < 0 ||
	    port >= ocs_fabric_device_ports_used(f))
		return -ENOENT;
	if (f->wiring == OCS_WIRING_DUAL)
		*sp = (struct ocs_spine_port){port / 2, h, 2 * device + port % 2};
	else
		*sp = (struct ocs_spine_port){port, h, device};
	return 0;
}

int ocs_fabric_input_owner(const struct ocs_fabric *f, int h, struct ocs_device_port in,
			   struct ocs_spine_port *sp)
{
	return port_owner(f, h, in.device, in.port, sp);
}

int ocs_fabric_output_owner(const struct ocs_fabric *f, int h, struct ocs_device_port out,
			    struct ocs_spine_port *sp)
{
	int rc = port_owner(f, h, out.device, out.port, sp);

	if (rc == 0 && f->wiring == OCS_WIRING_CROSS)
		sp->k ^= 1;
	return rc;
}

/* ---- OCSTrx ring domain ---- */

int ocs_ring_validate(const struct ocs_ring_domain *r, struct ocs_fabric_problem *problems,
		      int max_problems)
{
	struct problem_list pl = {problems, max_problems, 0};
	bool sizes = true;

	sizes &= size_ok(&pl, "tors", r->tors, 1);
	sizes &= size_ok(&pl, "nodes-per-tor", r->nodes_per_tor, 1);
	sizes &= size_ok(&pl, "gpus-per-node", r->gpus_per_node, 1);
	sizes &= size_ok(&pl, "k-hops", r->k_hops, 1);
	sizes &= size_ok(&pl, "bundles", r->bundles, 1);
	sizes &= size_ok(&pl, "tors-per-agg", r->tors_per_agg, 1);
	if (!sizes)
		return pl.count;
	if ((int64_t)r->tors * r->nodes_per_tor > OCS_SIZE_MAX)
		problem(&pl, "tors", "domain has more than %d nodes", OCS_SIZE_MAX);
	else if (r->k_hops >= r->tors * r->nodes_per_tor)
		problem(&pl, "k-hops", "must be below the number of nodes (%d)",
			r->tors * r->nodes_per_tor);
	if (r->tors % r->tors_per_agg != 0)
		problem(&pl, "tors-per-agg", "must divide tors (%d)", r->tors);
	/*
	 * A node in the middle of a ring joins its lower neighbour through its
	 * DOWN bundle and its upper one through its UP bundle (hbd_ring.h), and
	 * a bundle serves a pair of GPUs (InfinitePOD 4.2).
	 */
	if (r->bundles < 2)
		problem(&pl, "bundles",
			"must be at least 2 (got %d): a node in the middle of a ring uses a DOWN "
			"and an UP bundle",
			r->bundles);
	else if (r->bundles > r->gpus_per_node)
		problem(&pl, "bundles", "a node has one bundle per GPU at most (%d)",
			r->gpus_per_node);
	return pl.count;
}

int64_t ocs_ring_gpus(const struct ocs_ring_domain *r)
{
	return (int64_t)ocs_ring_nodes(r) * r->gpus_per_node;
}

int ocs_ring_node_agg(const struct ocs_ring_domain *r, int node)
{
	return ocs_ring_node_tor(r, node) / r->tors_per_agg;
}

int ocs_ring_agg_domains(const struct ocs_ring_domain *r)
{
	return r->tors / r->tors_per_agg;
}

int ocs_ring_distance(const struct ocs_ring_domain *r, int node_a, int node_b)
{
	int d = ocs_ring_position(r, node_a) - ocs_ring_position(r, node_b);

	if (d < 0)
		d = -d;
	if (r->closed && ocs_ring_nodes(r) - d < d)
		d = ocs_ring_nodes(r) - d;
	return d;
}

bool ocs_ring_adjacent(const struct ocs_ring_domain *r, int node_a, int node_b)
{
	int d = ocs_ring_distance(r, node_a, node_b);

	return d >= 1 && d <= r->k_hops;
}

/* ---- Rail-OCS ---- */

int ocs_rail_validate(const struct ocs_rail_fabric *r, struct ocs_fabric_problem *problems,
		      int max_problems)
{
	struct problem_list pl = {problems, max_problems, 0};
	bool sizes = true;

	sizes &= size_ok(&pl, "servers", r->servers, 1);
	sizes &= size_ok(&pl, "rails", r->rails, 1);
	sizes &= size_ok(&pl, "servers-per-ocs", r->servers_per_ocs, 1);
	sizes &= size_ok(&pl, "spare-servers-per-ocs", r->spare_servers_per_ocs, 0);
	if (!sizes)
		return pl.count;
	if (r->spare_servers_per_ocs >= r->servers_per_ocs)
		problem(&pl, "spare-servers-per-ocs",
			"must be below servers-per-ocs (%d): a group needs an active server",
			r->servers_per_ocs);
	if (r->servers % r->servers_per_ocs != 0)
		problem(&pl, "servers-per-ocs", "must divide servers (%d)", r->servers);
	if (pl.count == 0 &&
	    (int64_t)(2 * r->servers_per_ocs - r->spare_servers_per_ocs) * r->rails > OCS_SIZE_MAX)
		problem(&pl, "servers-per-ocs",
			"a device would need %lld ports (GPU side and switch side), more than %d",
			(long long)(2 * r->servers_per_ocs - r->spare_servers_per_ocs) * r->rails,
			OCS_SIZE_MAX);
	if (pl.count == 0 && (int64_t)r->servers * r->rails > INT32_MAX)
		problem(&pl, "servers", "fabric has more than %d GPUs", INT32_MAX);
	return pl.count;
}

int ocs_rail_groups(const struct ocs_rail_fabric *r)
{
	return r->servers / r->servers_per_ocs;
}

int ocs_rail_active_per_group(const struct ocs_rail_fabric *r)
{
	return r->servers_per_ocs - r->spare_servers_per_ocs;
}

int ocs_rail_active_servers(const struct ocs_rail_fabric *r)
{
	return ocs_rail_groups(r) * ocs_rail_active_per_group(r);
}

int ocs_rail_spare_servers(const struct ocs_rail_fabric *r)
{
	return ocs_rail_groups(r) * r->spare_servers_per_ocs;
}

int64_t ocs_rail_gpus(const struct ocs_rail_fabric *r)
{
	return (int64_t)r->servers * r->rails;
}

int64_t ocs_rail_active_gpus(const struct ocs_rail_fabric *r)
{
	return (int64_t)ocs_rail_active_servers(r) * r->rails;
}

int64_t ocs_rail_spare_gpus(const struct ocs_rail_fabric *r)
{
	return (int64_t)ocs_rail_spare_servers(r) * r->rails;
}

int64_t ocs_rail_rail_ports(const struct ocs_rail_fabric *r)
{
	return ocs_rail_active_gpus(r);
}

int ocs_rail_gpu_side_ports(const struct ocs_rail_fabric *r)
{
	return r->servers_per_ocs * r->rails;
}

int ocs_rail_switch_side_ports(const struct ocs_rail_fabric *r)
{
	return ocs_rail_active_per_group(r) * r->rails;
}

int ocs_rail_device_ports(const struct ocs_rail_fabric *r)
{
	return ocs_rail_gpu_side_ports(r) + ocs_rail_switch_side_ports(r);
}

int ocs_rail_server_group(const struct ocs_rail_fabric *r, int server)
{
	return server / r->servers_per_ocs;
}

int ocs_rail_server_in_group(const struct ocs_rail_fabric *r, int server)
{
	return server % r->servers_per_ocs;
}

int ocs_rail_server_id(const struct ocs_rail_fabric *r, int group, int index_in_group)
{
	return group * r->servers_per_ocs + index_in_group;
}

bool ocs_rail_is_spare_server(const struct ocs_rail_fabric *r, int server)
{
	return server >= 0 && server < r->servers &&
	       ocs_rail_server_in_group(r, server) >= ocs_rail_active_per_group(r);
}

int ocs_rail_gpu_rail(const struct ocs_rail_fabric *r, int64_t gpu)
{
	return (int)(gpu % r->rails);
}

int ocs_rail_gpu_server(const struct ocs_rail_fabric *r, int64_t gpu)
{
	return (int)(gpu / r->rails);
}

int64_t ocs_rail_gpu_id(const struct ocs_rail_fabric *r, int server, int rail)
{
	return (int64_t)server * r->rails + rail;
}

int ocs_rail_gpu_port(const struct ocs_rail_fabric *r, int64_t gpu)
{
	return ocs_rail_server_in_group(r, ocs_rail_gpu_server(r, gpu)) * r->rails +
	       ocs_rail_gpu_rail(r, gpu);
}

int ocs_rail_switch_port(const struct ocs_rail_fabric *r, int server, int rail)
{
	if (ocs_rail_is_spare_server(r, server))
		return -ENOENT;
	return ocs_rail_gpu_side_ports(r) + ocs_rail_server_in_group(r, server) * r->rails + rail;
}

int64_t ocs_rail_port_id(const struct ocs_rail_fabric *r, int server, int rail)
{
	if (ocs_rail_is_spare_server(r, server))
		return -ENOENT;
	return (int64_t)ocs_rail_server_group(r, server) * ocs_rail_switch_side_ports(r) +
	       ocs_rail_server_in_group(r, server) * r->rails + rail;
}

int ocs_rail_port_server(const struct ocs_rail_fabric *r, int64_t port_id)
{
	int per_group = ocs_rail_switch_side_ports(r);

	return ocs_rail_server_id(r, (int)(port_id / per_group),
				  (int)(port_id % per_group) / r->rails);
}

int ocs_rail_port_rail(const struct ocs_rail_fabric *r, int64_t port_id)
{
	return (int)(port_id % r->rails);
}

int ocs_rail_port_owner(const struct ocs_rail_fabric *r, int group, int port,
			struct ocs_rail_port_owner *owner)
{
	int gpu_side = ocs_rail_gpu_side_ports(r);

	if (group < 0 || group >= ocs_rail_groups(r) || port < 0 ||
	    port >= ocs_rail_device_ports(r))
		return -ENOENT;
	if (port < gpu_side) {
		owner->is_gpu = true;
		owner->gpu = ocs_rail_gpu_id(r, ocs_rail_server_id(r, group, port / r->rails),
					     port % r->rails);
		owner->rail_port = -1;
	} else {
		owner->is_gpu = false;
		owner->gpu = -1;
		owner->rail_port = (int64_t)group * ocs_rail_switch_side_ports(r) + port - gpu_side;
	}
	return 0;
}
