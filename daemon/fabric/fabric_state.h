/*
 * fabric_state.h - what the devices of a leaf-spine-OCS fabric should hold:
 * every configured cross-connect with the job that owns it, mirrored from
 * the state store's circuit table, plus the device-level views the job
 * manager needs (per-device target configurations, bidirectional circuits
 * for the API, port usage). It is the one index of cross-connects: each
 * device's are a sorted run (fs_device_circuits) that devices.h exposes per
 * device; look-ups are binary searches.
 *
 * Indexing (group, device, ports) comes from solvers/fabric.h only.
 *
 * Threading: owned by the event-loop thread; not thread-safe. Workers get
 * copies (fs_snapshot()).
 */
#ifndef OCSD_FABRIC_STATE_H
#define OCSD_FABRIC_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "fabric.h"
#include "store.h"

struct fs_state;

/* A bidirectional circuit: spine port a <-> spine port b and its two cross-connects. */
struct fs_circuit {
	struct ocs_spine_port a, b;
	struct ocs_xc xc_ab; /* light from a to b */
	struct ocs_xc xc_ba; /* light from b to a */
	bool complete;	     /* both cross-connects present */
	const char *job_id;  /* owner (valid while the state is unchanged) */
};

/* Caller frees with fs_free() (accepts NULL). f must outlive the state. */
struct fs_state *fs_new(const struct ocs_fabric *f);
void fs_free(struct fs_state *fs);
/* Replaces the contents with the store's circuit table. 0 or -errno. */
int fs_load(struct fs_state *fs, struct st_store *st);

size_t fs_count(const struct fs_state *fs);
/* The i-th cross-connect and its owner. */
const struct st_circuit *fs_at(const struct fs_state *fs, size_t i);
/* Monotonic counter bumped by every change: a plan made at an older value is stale. */
unsigned long fs_generation(const struct fs_state *fs);

/* Every cross-connect, as a malloc'd array the caller frees (for planners). */
struct ocs_xc *fs_snapshot(const struct fs_state *fs, size_t *n);

/*
 * Applies a confirmed change: removes `removals` (matched by group, device,
 * input), then adds `additions`. 0, or -ENOMEM (state unchanged).
 */
int fs_apply(struct fs_state *fs, const struct ocs_xc *removals, size_t n_removals,
	     const struct st_circuit *additions, size_t n_additions);

/* True when exactly this cross-connect (group, device, in, out) is configured. */
bool fs_contains(const struct fs_state *fs, const struct ocs_xc *xc);

/* Cross-connects owned by job_id (malloc'd; caller frees). */
struct ocs_xc *fs_job_xcs(const struct fs_state *fs, const char *job_id, size_t *n);
/*
 * The cross-connects configured on a device (global device id), sorted by
 * input port: a run of the state, valid until the next change; O(1). An id
 * outside the fabric has none.
 */
const struct st_circuit *fs_device_circuits(const struct fs_state *fs, int device_id, size_t *n);
/* Number of cross-connects configured on the device (global device id); O(1). */
size_t fs_device_xcs(const struct fs_state *fs, int device_id);
/* Number of cross-connects configured in an OCS group (its input ports in use). */
size_t fs_group_xcs(const struct fs_state *fs, int group);

/*
 * Pairs cross-connects into bidirectional circuits (malloc'd; caller frees;
 * job_id pointers borrow from the state). Filters: job_id NULL = all,
 * device_id < 0 = all, pod < 0 = all (either end). With a device, only the
 * runs of that device and of the devices its circuits come back through
 * are read, not the whole fabric.
 */
struct fs_circuit *fs_circuits(const struct fs_state *fs, const char *job_id, int device_id,
			       int pod, size_t *n);

/*
 * Blockers for drained devices: cross-connects that occupy every free port
 * pair of the drained devices (drained[device id]), in two-way pairs so a
 * planner treats them like pinned circuits and puts nothing new there. They
 * are never stored or pushed. A port left without a partner (an odd count
 * of free ports) stays unblocked: no circuit can use it alone. Reads only
 * the runs of the devices sharing spine ports with a drained device.
 * Returns a malloc'd array (caller frees), NULL on allocation failure.
 */
struct ocs_xc *fs_drain_blockers(const struct fs_state *fs, const bool *drained, size_t *n);
/* The same around cross-connects that are not stored but occupy ports (taken: drift.h). */
struct ocs_xc *fs_drain_blockers_around(const struct fs_state *fs, const bool *drained,
					const struct ocs_xc *taken, size_t n_taken, size_t *n);

#endif
