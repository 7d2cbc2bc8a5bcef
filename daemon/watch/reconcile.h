/*
 * reconcile.h - periodic drift detection: reads every device's running
 * cross-connects and compares them with what the state store says the
 * devices should hold. A cross-connect on a device that no job owns
 * (`unowned`) or one a job owns that the device lacks (`missing`) is drift:
 * it is reported (event and metric). What no job owns is never touched
 * (fail static); what a live job owns and the devices lack is handed to
 * the circuit repair (repair.h), which programs it again or tells the job.
 *
 * A pass uses its own device sessions (handles separate from the ones
 * transactions use, so neither waits for the other); device reads
 * (dev_read) run on executor tasks, the comparison (dev_compare, one
 * device's sorted run against its sorted read) on the loop. A pass during
 * which a
 * transaction ran, or the circuits changed, is discarded: store and devices
 * are only compared at rest.
 *
 * Ring domains (deps.rings set) have bundles instead of cross-connects: a
 * pass reads every node's bundles and compares them with what the ring
 * state says the node holds (its ring's settings, or loopback; faulty
 * nodes are not compared). What differs goes into the node drift table
 * (drift.h, struct dr_nodes) and out as events. A node of a live ring is
 * programmed back at once (jm_reprogram_nodes: an active path pointing into
 * another job's ring or nowhere); a node in no ring is reported, never
 * changed. A pass during which a ring transaction ran is discarded.
 *
 * Threading: recon_start()/recon_free() on the loop thread only.
 */
#ifndef OCSD_RECONCILE_H
#define OCSD_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>

#include "cabling.h"

struct cab_table;
struct devices;
struct dr_bundle;
struct dr_nodes;
struct dr_table;
struct exec;
struct fs_state;
struct jm;
struct loop;
struct rep;
struct rg_state;

struct recon_report {
	bool discarded; /* the fabric changed during the pass: nothing compared */
	size_t unowned;
	size_t missing;
	size_t unreachable; /* devices that could not be read */
	/* ring domains: bundles that differ, on nodes of live rings and on
	 * nodes in no ring, and the nodes being programmed back */
	size_t bundles_in_rings;
	size_t bundles_idle;
	size_t reprogrammed;
	double duration_s;
};

struct recon_events {
	void *ctx;
	/* One drifted cross-connect (called for each, on the loop). */
	void (*drift)(void *ctx, const char *device, int in, int out, bool missing);
	/*
	 * Whether each device could be read (called for each, on the loop):
	 * connected tells whether its session is up after the pass; error is
	 * why not ("" when it is); info what it says of itself (NULL when
	 * its model says nothing, or that read failed).
	 */
	void (*device_read)(void *ctx, int device_id, bool ok, bool connected, const char *error,
			    const struct sb_device_info *info);
	/*
	 * Ring domains: one bundle that differs (called for each, on the loop),
	 * on the node's agent `device`; job_id: the job whose live ring holds
	 * the node (NULL: in no ring), reprogramming: its node is being
	 * programmed back (false: the job had a transaction queued or running;
	 * the next pass tries again).
	 */
	void (*bundle_drift)(void *ctx, const struct dr_bundle *b, const char *device,
			     const char *job_id, bool reprogramming);
	/* A port found miswired (true) or no longer (false): cabling.h. */
	void (*cabling)(void *ctx, const struct cab_entry *e, bool miswired);
	void (*done)(void *ctx, const struct recon_report *r);
};

struct recon_deps {
	struct loop *loop;
	struct exec *exec; /* runs the device reads */
	struct fs_state *fs;
	struct jm *jm;
	struct devices *devs; /* read through their DEV_ROLE_RECON handles */
	struct dr_table
		*drift; /* gets each compared device's unowned cross-connects (NULL: none) */
	/* Gets what each device read says of its ports' far ends (NULL: none). */
	struct cab_table *cabling;
	struct recon_events events;
	/* Leaf-spine fabrics: gets what each compared pass found missing (NULL: none). */
	struct rep *repair;
	/* Rail-OCS fabrics: true while a swap's transaction runs (its own
	 * driver, gpu_swaps.h): a pass ending then is discarded like one ending
	 * during a job's transaction. NULL: none. */
	bool (*busy)(void *ctx);
	void *busy_ctx;
	/* Ring domains: the ring state the nodes' bundles are compared with,
	 * and the table that gets what differs (both NULL on switch fabrics). */
	struct rg_state *rings;
	struct dr_nodes *node_drift;
};

struct recon;

/* Caller frees with recon_free() (accepts NULL; waits for a running pass). */
struct recon *recon_new(const struct recon_deps *deps);
void recon_free(struct recon *r);
/* Starts a pass. 0, -EBUSY while a pass is running, or -ENOMEM. */
int recon_start(struct recon *r);

#endif
