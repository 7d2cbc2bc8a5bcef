/*
 * reconcile.c - implementation of reconcile.h.
 *
 * A pass: a coordinator thread starts up to RECON_THREADS readers that take
 * devices from a shared counter and read each one's running datastore; the
 * coordinator posts the pass back to the loop, which compares the reads
 * with the fabric state (unless it changed meanwhile) and reports.
 */
#include "reconcile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabric.h"
#include "fabric_state.h"
#include "jobs.h"
#include "loop.h"
#include "sb_device.h"

#define RECON_THREADS 8

struct dev_read {
	struct sb_xc_state *got; /* NULL when unreadable */
	size_t n_got;
	bool ok;
	char error[sizeof(((struct sb_error *)0)->message) + 32];
};

struct recon {
	struct recon_deps d;
	bool running;       /* loop thread only */
	pthread_t thread;   /* the coordinator of the running pass */
	struct dev_read *reads;
	atomic_int next;    /* next device to read */
	atomic_bool stop;   /* shutting down: read no further device */
	struct timespec started;
	unsigned long generation; /* fs generation when the pass started */
};

struct recon *recon_new(const struct recon_deps *deps)
{
	struct recon *r = calloc(1, sizeof(*r));

	if (r)
		r->d = *deps;
	return r;
}

static void *reader(void *arg)
{
	struct recon *r = arg;
	int i;

	while (!atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->d.n_devices) {
		struct sb_device *dev = r->d.devices[i];
		struct sb_error e = { 0 };

		r->reads[i].ok =
			sb_device_connect_until(dev, sb_now_ms() + r->d.connect_timeout_ms, &e) == 0 &&
			sb_device_read_xcs(dev, false, SB_DS_RUNNING, &r->reads[i].got,
					   &r->reads[i].n_got, &e) == 0;
		if (!r->reads[i].ok)
			snprintf(r->reads[i].error, sizeof(r->reads[i].error), "%s: %s",
				 e.operation[0] ? e.operation : "read", e.message);
	}
	return NULL;
}

static void pass_done(void *arg);

static void *coordinator(void *arg)
{
	struct recon *r = arg;
	pthread_t th[RECON_THREADS];
	int n = r->d.n_devices < RECON_THREADS ? r->d.n_devices : RECON_THREADS, started = 0;

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

static bool read_has(const struct dev_read *rd, int in, int out)
{
	for (size_t i = 0; i < rd->n_got; i++)
		if (rd->got[i].in == in && rd->got[i].out == out)
			return true;
	return false;
}

static void pass_done(void *arg)
{
	struct recon *r = arg;
	const struct ocs_fabric *f = r->d.fabric;
	struct recon_report rep = { 0 };
	struct timespec now;

	pthread_join(r->thread, NULL);
	/* The readers are done: the handles are the loop's again. */
	for (int d = 0; d < r->d.n_devices && r->d.events.device_read && !atomic_load(&r->stop); d++)
		r->d.events.device_read(r->d.events.ctx, d, r->reads[d].ok,
					sb_device_connected(r->d.devices[d]), r->reads[d].error);
	rep.discarded = fs_generation(r->d.fs) != r->generation || jm_busy(r->d.jm);
	for (int d = 0; d < r->d.n_devices && !rep.discarded; d++) {
		struct dev_read *rd = &r->reads[d];
		int g = ocs_fabric_device_group(f, d), k = ocs_fabric_device_in_group(f, d);
		const char *name = sb_device_name(r->d.devices[d]);

		if (!rd->ok) {
			rep.unreachable++;
			continue;
		}
		/* Expected but absent. */
		for (size_t i = 0; i < fs_count(r->d.fs); i++) {
			const struct ocs_xc *xc = &fs_at(r->d.fs, i)->xc;

			if (xc->group == g && xc->device == k && !read_has(rd, xc->in, xc->out)) {
				rep.missing++;
				if (r->d.events.drift)
					r->d.events.drift(r->d.events.ctx, name, xc->in, xc->out, true);
			}
		}
		/* Present but owned by no job. */
		for (size_t i = 0; i < rd->n_got; i++) {
			struct ocs_xc xc = { g, k, rd->got[i].in, rd->got[i].out };

			if (!fs_contains(r->d.fs, &xc)) {
				rep.unowned++;
				if (r->d.events.drift)
					r->d.events.drift(r->d.events.ctx, name, xc.in, xc.out, false);
			}
		}
	}
	for (int d = 0; d < r->d.n_devices; d++)
		free(r->reads[d].got);
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
	r->reads = calloc((size_t)r->d.n_devices + 1, sizeof(*r->reads));
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
