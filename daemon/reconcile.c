/*
 * reconcile.c - implementation of reconcile.h.
 *
 * A pass: a coordinator thread starts up to RECON_THREADS readers that take
 * devices from a shared counter and read each one's running datastore; the
 * coordinator posts the pass back to the loop, which compares each read
 * with the device's run of the fabric state (dev_compare; unless the state
 * changed meanwhile) and reports.
 */
#include "reconcile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "fabric_state.h"
#include "jobs.h"
#include "loop.h"
#include "sb_device.h"

#define RECON_THREADS 8

struct recon {
	struct recon_deps d;
	bool running;       /* loop thread only */
	pthread_t thread;   /* the coordinator of the running pass */
	struct dev_readback *reads; /* by device id */
	int n_devices;
	atomic_int next;    /* next device to read */
	atomic_bool stop;   /* shutting down: read no further device */
	struct timespec started;
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

static void *reader(void *arg)
{
	struct recon *r = arg;
	int i;

	while (!atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->n_devices)
		dev_read(r->d.devs, i, DEV_ROLE_RECON, &r->reads[i]);
	return NULL;
}

static void pass_done(void *arg);

static void *coordinator(void *arg)
{
	struct recon *r = arg;
	pthread_t th[RECON_THREADS];
	int n = r->n_devices < RECON_THREADS ? r->n_devices : RECON_THREADS, started = 0;

	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, reader, r) == 0)
			started++;
	if (started == 0)
		reader(r);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	while (loop_post(r->d.loop, pass_done, r) == -ENOMEM)
		;
	return NULL;
}

static void pass_done(void *arg)
{
	struct recon *r = arg;
	struct recon_report rep = { 0 };
	struct timespec now;

	pthread_join(r->thread, NULL);
	/* The readers are done: the handles are the loop's again. */
	for (int d = 0; d < r->n_devices && r->d.events.device_read && !atomic_load(&r->stop); d++)
		r->d.events.device_read(r->d.events.ctx, d, r->reads[d].ok,
					sb_device_connected(dev_handle(r->d.devs, d, DEV_ROLE_RECON)),
					r->reads[d].error);
	rep.discarded = fs_generation(r->d.fs) != r->generation || jm_busy(r->d.jm);
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
	for (int d = 0; d < r->n_devices; d++)
		dev_readback_clear(&r->reads[d]);
	free(r->reads);
	r->reads = NULL;
	clock_gettime(CLOCK_MONOTONIC, &now);
	rep.duration_s = (double)(now.tv_sec - r->started.tv_sec) +
			 (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
	r->running = false;
	if (r->d.events.done)
		r->d.events.done(r->d.events.ctx, &rep);
}

int recon_start(struct recon *r)
{
	if (r->running)
		return -EBUSY;
	r->reads = calloc((size_t)r->n_devices + 1, sizeof(*r->reads));
	if (!r->reads)
		return -ENOMEM;
	atomic_store(&r->next, 0);
	clock_gettime(CLOCK_MONOTONIC, &r->started);
	r->generation = fs_generation(r->d.fs);
	r->running = true;
	if (pthread_create(&r->thread, NULL, coordinator, r) != 0) {
		r->running = false;
		free(r->reads);
		r->reads = NULL;
		return -EAGAIN;
	}
	return 0;
}

void recon_free(struct recon *r)
{
	if (!r)
		return;
	if (r->running) {
		/* The coordinator posts pass_done to the loop; run it here. */
		atomic_store(&r->stop, true);
		struct timespec ms = { 0, 1000000 };

		while (r->running) {
			nanosleep(&ms, NULL);
			loop_run_posted(r->d.loop);
		}
	}
	free(r);
}
