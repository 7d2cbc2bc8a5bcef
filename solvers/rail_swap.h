/*
 * rail_swap.h - GPU swap on a rail-OCS fabric (issue 12 section 2, the
 * Rail-only paper's section IV-C): the port map of a rail-OCS fabric (which
 * GPU each rail-switch port is joined to), the cross-connects that realize
 * it, an L2 check of a device's cross-connects, and the swap that answers a
 * failed GPU:
 *   case 1  a healthy idle GPU of the failed GPU's server takes over the
 *           failed GPU's rail port; the failed GPU is joined to nothing;
 *   case 2  no such GPU: every rail port of the server's port set moves to
 *           a healthy idle spare server of the same OCS group (GPU r of the
 *           spare takes rail port r), all of them or none;
 *   refusal neither is possible: nothing changes, and the reason names the
 *           server and the group.
 *
 * Terms (numbering in fabric.h):
 *   rail port   a rail-switch port of an active server, by its rail port id
 *   join        GPU port g and switch port w of the group's device joined
 *               by the two one-way cross-connects g -> w and w -> g
 *   port set    the R rail ports of one original active server; the GPUs
 *               joined to a set's ports belong to one server (case 1 stays
 *               in the server, case 2 moves whole sets)
 *   idle GPU    healthy and not held by a job
 *   idle spare  a server of the group with no GPU joined to any rail port,
 *               every GPU healthy and none held by a job (the configured
 *               spares first, then servers that lost their ports and were
 *               healed)
 * Cross-connects are struct ocs_xc with group = OCS group (= device id),
 * device = 0 (one device per group), in and out = device port numbers.
 *
 * Pure C, no I/O, no globals: plain structs in and out, so the daemon can
 * run a swap on a worker thread over a copied port map and GPU flags. Every
 * function is thread-safe on arguments that are not being modified.
 */
#ifndef OCS_RAIL_SWAP_H
#define OCS_RAIL_SWAP_H

#include <stddef.h>
#include <stdint.h>

#include "fabric.h"

#define RAIL_NONE (-1) /* no GPU / no rail port */

/* Which GPU each rail port is joined to. */
struct rail_port_map {
	int64_t n_ports; /* = ocs_rail_rail_ports() */
	int64_t *gpu;	 /* gpu[rail port id]: the joined GPU, or RAIL_NONE; owned by the map */
};

/*
 * The initial map of a valid fabric: GPU r of every active server joined to
 * its own rail port r. Returns 0 or -ENOMEM. Free with rail_port_map_clear().
 */
int rail_port_map_init(struct rail_port_map *m, const struct ocs_rail_fabric *r);
/* Frees the map's array and empties it; NULL is fine. */
void rail_port_map_clear(struct rail_port_map *m);

/*
 * The cross-connects that realize map m: two per joined rail port, sorted
 * by ocs_xc_cmp_in_out(). *out is malloc'ed (caller frees; NULL when there
 * are none). Returns 0, -EINVAL when the map does not fit the fabric (wrong
 * size, a GPU of another group), or -ENOMEM.
 */
int rail_port_map_xcs(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
		      struct ocs_xc **out, size_t *n_out);

/*
 * Reads a port map back from devices' cross-connects (every device's, in
 * any order): rail port w is joined to GPU g when both g -> w and w -> g
 * are there. Cross-connects that are not such a join are ignored here:
 * rail_check_xcs() reports them. m must be initialised for the fabric (its
 * contents are replaced). Returns 0 or -ENOMEM.
 */
int rail_port_map_from_xcs(const struct ocs_rail_fabric *r, const struct ocs_xc *xcs, size_t n,
			   struct rail_port_map *m);

/* One refused cross-connect and why. */
struct rail_violation {
	struct ocs_xc xc;
	char reason[128];
};

/*
 * L2 check of a rail-OCS fabric's cross-connects: every cross-connect on an
 * existing device and port, joining a GPU-side port to a switch-side port,
 * at most one per input and per output, and its reverse present (no one-way
 * circuit). Returns the number of violations (0 = clean), writing up to
 * max_out to out, or -ENOMEM.
 */
int rail_check_xcs(const struct ocs_rail_fabric *r, const struct ocs_xc *xcs, size_t n,
		   struct rail_violation *out, int max_out);

/* Per-GPU flags the caller keeps (indexed by GPU id, ocs_rail_gpus() of them). */
enum {
	RAIL_GPU_FAULTY = 1, /* marked faulty; stays out until marked healthy */
	RAIL_GPU_HELD = 2,   /* a job holds it (jobs hold only GPUs joined to rail ports) */
};

enum rail_swap_kind {
	RAIL_SWAP_NONE,		/* the failed GPU serves no rail port: nothing to move */
	RAIL_SWAP_IDLE_GPU,	/* case 1 */
	RAIL_SWAP_SPARE_SERVER, /* case 2 */
	RAIL_SWAP_REFUSED,	/* neither possible; nothing changes */
};

/* "none", "idle-gpu", "spare-server", "refused". */
const char *rail_swap_kind_name(enum rail_swap_kind kind);

/* One rail port whose GPU changes: old_gpu or new_gpu may be RAIL_NONE. */
struct rail_port_change {
	int64_t rail_port;
	int64_t old_gpu;
	int64_t new_gpu;
};

/*
 * The answer of rail_swap(). The arrays are malloc'ed and owned by the
 * result (rail_swap_result_clear() frees them); each is sorted (cross-
 * connects by ocs_xc_cmp_in_out(), changes by rail port). Removals come off
 * the devices and additions go on in one transaction; a job holding the
 * old_gpu of a change with a new_gpu is told that new GPU.
 */
struct rail_swap_result {
	enum rail_swap_kind kind;
	int64_t failed_gpu;
	int server;	  /* the failed GPU's server */
	int group;	  /* its OCS group (= device) */
	int64_t idle_gpu; /* case 1: the GPU that took over; else RAIL_NONE */
	int spare_server; /* case 2: the server that took over; else -1 */
	char reason[160]; /* refusal: "no idle GPU in server 3 and no idle spare in group 0" */
	struct ocs_xc *removals;
	size_t n_removals;
	struct ocs_xc *additions;
	size_t n_additions;
	struct rail_port_change *changes;
	size_t n_changes;
};

/*
 * Answers the failure of failed_gpu on port map m with GPU flags
 * gpu_flags (the failed GPU counts as faulty whatever its flag). Fills *out
 * (whose previous contents are not freed: clear it first) and returns 0 for
 * every kind, refusals included; -EINVAL for an unknown GPU or a map that
 * does not fit the fabric; -ENOMEM (nothing allocated then). m is not
 * changed: rail_swap_apply() does that once the devices confirmed.
 */
int rail_swap(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
	      const uint8_t *gpu_flags, int64_t failed_gpu, struct rail_swap_result *out);

/* Applies the changes of a swap to the port map it was computed on. */
void rail_swap_apply(struct rail_port_map *m, const struct rail_swap_result *res);

/* Frees the result's arrays and empties it; NULL is fine. */
void rail_swap_result_clear(struct rail_swap_result *res);

#endif
