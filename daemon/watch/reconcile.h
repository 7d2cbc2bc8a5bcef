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
 * Threading: recon_start()/recon_free() on the loop thread only.
 */
#ifndef OCSD_RECONCILE_H
#define OCSD_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>

#include "cabling.h"

struct cab_table;
struct devices;
struct dr_table;
struct exec;
struct fs_state;
struct jm;
struct loop;
struct rep;

struct recon_report {
	bool discarded; /* the fabric changed during the pass: nothing compared */
	size_t unowned;
	size_t missing;
	size_t unreachable; /* devices that could not be read */
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
};

struct recon;

/* Caller frees with recon_free() (accepts NULL; waits for a running pass). */
struct recon *recon_new(const struct recon_deps *deps);
void recon_free(struct recon *r);
/* Starts a pass. 0, -EBUSY while a pass is running, or -ENOMEM. */
int recon_start(struct recon *r);

#endif
