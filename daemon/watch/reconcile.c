/*
 * reconcile.c - implementation of reconcile.h.
 *
 * A pass: up to RECON_READERS reader tasks on the daemon's executor take
 * devices from a shared counter and read each one's running datastore; the
 * last reader to finish posts the pass back to the loop (a node embedded in
 * struct recon), which compares each read with the device's run of the
 * fabric state (dev_compare; unless the state changed meanwhile) and
 * reports. No thread is created.
 */
#include "reconcile.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "executor.h"
#include "jobs.h"
#include "loop.h"
#include "repair.h"
#include "sb_device.h"

#define RECON_READERS 8

struct recon;

struct recon_reader {
	struct exec_task task;
	struct recon *r;
};

struct recon {
	struct recon_deps d;
	bool running; /* loop thread only */
	struct recon_reader readers[RECON_READERS];
	atomic_int readers_left; /* of the running pass; the last one posts done_node */
	struct loop_node done_node;
	struct dev_readback *reads; /* by device id */
	int n_devices;
	atomic_int next;	  /* next device to read */
	atomic_bool stop;	  /* shutting down: read no further device */
	int64_t started_us;	  /* monotonic, when the pass began */
	unsigned long generation; /* fs generation when the pass started */
};

struct recon *recon_new(const struct recon_deps *deps)
{
	struct recon *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->d = *deps;
	r->n_devices = dev_count(deps->devs);
	return r;
}

static void pass_done(struct loop_node *n);

/*
 * Reads one device per turn and resubmits itself while devices are left,
 * so that a thread helping in exec_wait() is held for one read only.
 */
static void reader_run(struct exec_task *t)
{
	struct recon *r = OCSD_CONTAINER_OF(t, struct recon_reader, task)->r;
	int i;

	if (!atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->n_devices) {
		/* dev_read() fills reads[i] in any case (ok false with the error) */
		(void)dev_read_with_info(r->d.devs, i, DEV_ROLE_RECON, &r->reads[i]);
		exec_submit(r->d.exec, t);
		return;
	}
	if (atomic_fetch_sub(&r->readers_left, 1) == 1)
		loop_post(r->d.loop, &r->done_node, pass_done);
}

static void pass_done(struct loop_node *n)
{
	struct recon *r = OCSD_CONTAINER_OF(n, struct recon, done_node);
	struct recon_report rep = {0};

	/* The readers are done: the handles are the loop's again. */
	for (int d = 0; d < r->n_devices && !atomic_load(&r->stop); d++) {
		const struct dev_readback *rd = &r->reads[d];

		if (r->d.events.device_read)
			r->d.events.device_read(
				r->d.events.ctx, d, rd->ok,
				sb_device_connected(dev_handle(r->d.devs, d, DEV_ROLE_RECON)),
				rd->error, rd->has_info ? &rd->info : NULL);
		/* the far ends the device reports, against the wiring (at rest or not:
		 * the fibre does not move with the circuits) */
		if (rd->has_info && r->d.cabling)
			(void)cab_set(r->d.cabling, d, &rd->info, r->d.events.cabling,
				      r->d.events.ctx);
	}
	rep.discarded = fs_generation(r->d.fs) != r->generation || jm_busy(r->d.jm) ||
			(r->d.busy && r->d.busy(r->d.busy_ctx));
	for (int d = 0; d < r->n_devices && !rep.discarded; d++) {
		struct dev_readback *rd = &r->reads[d];
		const char *name = dev_name(r->d.devs, d);
		struct dev_diff diff;

		if (!rd->ok) {
			rep.unreachable++;
			continue;
		}
		if (dev_compare(r->d.devs, d, NULL, rd->xcs, rd->n, &diff) != 0) {
			rep.unreachable++; /* out of memory: this device is not compared */
			continue;
		}
		/* Drift: the transaction session's image of the device (its next
		 * pre-image, sb_device.h) is stale; it is read again at next use. */
		if (diff.n_missing || diff.n_unowned)
			sb_device_forget_image(dev_handle(r->d.devs, d, DEV_ROLE_TXN));
		/* What the planner and the transactions keep clear of (drift.h);
		 * out of memory keeps the device's previous record. */
		if (r->d.drift)
			(void)dr_set(r->d.drift, d, diff.unowned, diff.n_unowned, diff.missing,
				     diff.n_missing);
		if (r->d.repair)
			rep_device(r->d.repair, d, diff.missing, diff.n_missing, diff.unowned,
				   diff.n_unowned);
		/* Expected but absent, then present but owned by no job. */
		rep.missing += diff.n_missing;
		rep.unowned += diff.n_unowned;
		for (size_t i = 0; r->d.events.drift && i < diff.n_missing; i++)
			r->d.events.drift(r->d.events.ctx, name, diff.missing[i].in,
					  diff.missing[i].out, true);
		for (size_t i = 0; r->d.events.drift && i < diff.n_unowned; i++)
			r->d.events.drift(r->d.events.ctx, name, diff.unowned[i].in,
					  diff.unowned[i].out, false);
		dev_diff_clear(&diff);
	}
	if (r->d.repair && !rep.discarded && !atomic_load(&r->stop))
		rep_pass_done(r->d.repair);
	for (int d = 0; d < r->n_devices; d++)
		dev_readback_clear(&r->reads[d]);
	free(r->reads);
	r->reads = NULL;
	rep.duration_s = (double)(clk_mono_us(NULL) - r->started_us) / 1e6;
	r->running = false;
	if (r->d.events.done)
		r->d.events.done(r->d.events.ctx, &rep);
}

int recon_start(struct recon *r)
{
	int n = r->n_devices < RECON_READERS ? r->n_devices : RECON_READERS;

	if (r->running)
		return -EBUSY;
	r->reads = calloc((size_t)r->n_devices + 1, sizeof(*r->reads));
	if (!r->reads)
		return -ENOMEM;
	atomic_store(&r->next, 0);
	r->started_us = clk_mono_us(NULL);
	r->generation = fs_generation(r->d.fs);
	r->running = true;
	if (n == 0) {
		loop_post(r->d.loop, &r->done_node, pass_done);
		return 0;
	}
	atomic_store(&r->readers_left, n);
	for (int i = 0; i < n; i++) {
		r->readers[i] = (struct recon_reader){.task.run = reader_run, .r = r};
		exec_submit(r->d.exec, &r->readers[i].task);
	}
	return 0;
}

void recon_free(struct recon *r)
{
	if (!r)
		return;
	if (r->running) {
		/* The last reader posts pass_done to the loop; run it here. */
		atomic_store(&r->stop, true);
		struct timespec ms = {0, 1000000};

		while (r->running) {
			nanosleep(&ms, NULL);
			loop_run_posted(r->d.loop);
		}
	}
	free(r);
}
