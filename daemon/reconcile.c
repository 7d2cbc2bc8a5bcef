/*
 * reconcile.c - implementation of reconcile.h.
 *
 * A pass: up to RECON_READERS reader tasks on the daemon's executor take
 * devices from a shared counter and read each one's running datastore; the
 * last reader to finish posts the pass back to the loop (a node embedded in
 * struct recon), which compares the reads with the fabric state (unless it
 * changed meanwhile) and reports. No thread is created.
 */
#include "reconcile.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabric.h"
#include "fabric_state.h"
#include "exec.h"
#include "jobs.h"
#include "loop.h"
#include "sb_device.h"

#define RECON_READERS 8

struct dev_read {
	struct sb_xc_state *got; /* NULL when unreadable */
	size_t n_got;
	bool ok;
	char error[sizeof(((struct sb_error *)0)->message) + 32];
};

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

static void pass_done(struct loop_node *n);

/*
 * Reads one device per turn and resubmits itself while devices are left,
 * so that a thread helping in exec_wait() is held for one read only.
 */
static void reader_run(struct exec_task *t)
{
	struct recon *r = OCSD_CONTAINER_OF(t, struct recon_reader, task)->r;
	int i;

	if (!atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->d.n_devices) {
		struct sb_device *dev = r->d.devices[i];
		struct sb_error e = { 0 };

		r->reads[i].ok =
			sb_device_connect_until(dev, sb_now_ms() + r->d.connect_timeout_ms, &e) == 0 &&
			sb_device_read_xcs(dev, false, SB_DS_RUNNING, &r->reads[i].got,
					   &r->reads[i].n_got, &e) == 0;
		if (!r->reads[i].ok)
			snprintf(r->reads[i].error, sizeof(r->reads[i].error), "%s: %s",
				 e.operation[0] ? e.operation : "read", e.message);
		exec_submit(r->d.exec, t);
		return;
	}
	if (atomic_fetch_sub(&r->readers_left, 1) == 1)
		loop_post(r->d.loop, &r->done_node, pass_done);
}

static bool read_has(const struct dev_read *rd, int in, int out)
{
	for (size_t i = 0; i < rd->n_got; i++)
		if (rd->got[i].in == in && rd->got[i].out == out)
			return true;
	return false;
}

static void pass_done(struct loop_node *n)
{
	struct recon *r = OCSD_CONTAINER_OF(n, struct recon, done_node);
	const struct ocs_fabric *f = r->d.fabric;
	struct recon_report rep = { 0 };
	struct timespec now;

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
	int n = r->d.n_devices < RECON_READERS ? r->d.n_devices : RECON_READERS;

	if (r->running)
		return -EBUSY;
	r->reads = calloc((size_t)r->d.n_devices + 1, sizeof(*r->reads));
	if (!r->reads)
		return -ENOMEM;
	atomic_store(&r->next, 0);
	clock_gettime(CLOCK_MONOTONIC, &r->started);
	r->generation = fs_generation(r->d.fs);
	r->running = true;
	if (n == 0) {
		loop_post(r->d.loop, &r->done_node, pass_done);
		return 0;
	}
	atomic_store(&r->readers_left, n);
	for (int i = 0; i < n; i++) {
		r->readers[i] = (struct recon_reader){ .task.run = reader_run, .r = r };
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
		struct timespec ms = { 0, 1000000 };

		while (r->running) {
			nanosleep(&ms, NULL);
			loop_run_posted(r->d.loop);
		}
	}
	free(r);
}
