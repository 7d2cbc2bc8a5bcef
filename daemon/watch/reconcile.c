/*
 * reconcile.c - implementation of reconcile.h.
 *
 * A pass: up to RECON_READERS reader tasks on the daemon's executor take
 * devices from a shared counter and read each one's running datastore; the
 * last reader to finish posts the pass back to the loop (a node embedded in
 * struct recon), which compares each read with the device's run of the
 * fabric state (dev_compare; unless the state changed meanwhile) and
 * reports. No thread is created. Ring domains read bundles instead
 * (dev_read_bundles) and compare them with the ring state (compare_node).
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
#include "rings.h"
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
	unsigned long generation; /* fs (ring domains: ring state) generation at the start */
	unsigned long ring_txns;  /* ring domains: jm_ring_txns() at the start */
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
		if (r->d.rings)
			(void)dev_read_bundles(r->d.devs, i, DEV_ROLE_RECON, &r->reads[i]);
		else
			(void)dev_read_with_info(r->d.devs, i, DEV_ROLE_RECON, &r->reads[i]);
		exec_submit(r->d.exec, t);
		return;
	}
	if (atomic_fetch_sub(&r->readers_left, 1) == 1)
		loop_post(r->d.loop, &r->done_node, pass_done);
}

/* Bundle b of a node as read (absent: loopback), with the node it reaches. */
static struct sb_bundle found_bundle(const struct dev_readback *rd, uint8_t b, int32_t *peer)
{
	struct sb_bundle key = {b, 0, 0, 0};
	const struct sb_bundle_state *st = rd->n_bundles
						   ? bsearch(&key, rd->bundles, rd->n_bundles,
							     sizeof(*rd->bundles), sb_bundle_cmp)
						   : NULL;

	*peer = st ? st->peer_node : -1;
	return st ? st->set : key;
}

/*
 * Ring domains: node d's bundles as read against what the ring state says
 * it holds (rg_node_bundles). A node either side calls faulty is not
 * compared: it is never programmed. What differs replaces the node's entry
 * in the node drift table (fresh unless the previous pass found the bundle
 * holding the same) and is counted. 0, or -ENOMEM: the node keeps its
 * previous entry.
 */
static int compare_node(struct recon *r, int d, const struct dev_readback *rd,
			struct recon_report *rep)
{
	const struct rg_state *rg = r->d.rings;
	int nb = rg_domain(rg)->bundles;
	bool skip = rg_faulty(rg, d) || rd->node_faulty;
	struct hbd_bundle *want = malloc(((size_t)nb + 1) * sizeof(*want));
	struct dr_bundle *diff = malloc(((size_t)nb + rd->n_bundles + 1) * sizeof(*diff));
	const struct dr_bundle *prev;
	size_t n = 0, n_prev;
	int rc = -ENOMEM;

	if (!want || !diff || rg_node_bundles(rg, d, want) != 0)
		goto out;
	for (int b = 0; b < nb && !skip; b++) {
		struct dr_bundle x = {
			.node = d,
			.expected = {want[b].bundle, want[b].path, want[b].distance, want[b].dir}};

		x.found = found_bundle(rd, (uint8_t)b, &x.found_peer);
		if (!sb_bundle_equal(&x.expected, &x.found))
			diff[n++] = x;
	}
	/* bundles the domain does not have belong on loopback */
	for (size_t i = 0; i < rd->n_bundles && !skip; i++)
		if (rd->bundles[i].set.bundle >= nb && rd->bundles[i].set.path != 0)
			diff[n++] =
				(struct dr_bundle){.node = d,
						   .expected = {rd->bundles[i].set.bundle, 0, 0, 0},
						   .found = rd->bundles[i].set,
						   .found_peer = rd->bundles[i].peer_node};
	prev = dr_nodes_get(r->d.node_drift, d, &n_prev);
	for (size_t i = 0; i < n; i++) {
		diff[i].fresh = true;
		for (size_t k = 0; k < n_prev && diff[i].fresh; k++)
			diff[i].fresh = !sb_bundle_equal(&prev[k].found, &diff[i].found);
	}
	if ((rc = dr_nodes_set(r->d.node_drift, d, diff, n)) != 0)
		goto out;
	if (n) /* the transaction session's image of the node is stale (as for a switch) */
		sb_device_forget_image(dev_handle(r->d.devs, d, DEV_ROLE_TXN));
	if (rg_holder(rg, d))
		rep->bundles_in_rings += n;
	else
		rep->bundles_idle += n;
out:
	free(want);
	free(diff);
	return rc;
}

/*
 * Ring domains, once every node is compared (compared[d]): the nodes of
 * live rings that differ are programmed back (jm_reprogram_nodes: one
 * transaction per job), then every differing bundle is published.
 */
static void ring_pass_end(struct recon *r, const bool *compared, struct recon_report *rep)
{
	int *nodes = malloc(((size_t)r->n_devices + 1) * sizeof(*nodes));
	bool *queued = calloc((size_t)r->n_devices + 1, sizeof(*queued));
	bool *back = calloc((size_t)r->n_devices + 1, sizeof(*back));
	size_t n_nodes = 0, n;

	for (int d = 0; nodes && queued && back && d < r->n_devices; d++)
		if (compared[d] && rg_holder(r->d.rings, d) &&
		    (dr_nodes_get(r->d.node_drift, d, &n), n))
			nodes[n_nodes++] = d;
	if (n_nodes) /* (none when out of memory: the next pass tries again) */
		jm_reprogram_nodes(r->d.jm, nodes, n_nodes, queued);
	for (size_t i = 0; i < n_nodes; i++) {
		back[nodes[i]] = queued[i];
		rep->reprogrammed += queued[i];
	}
	for (int d = 0; r->d.events.bundle_drift && d < r->n_devices; d++) {
		const struct dr_bundle *b =
			compared[d] ? dr_nodes_get(r->d.node_drift, d, &n) : NULL;
		const struct rg_ring *holder = rg_holder(r->d.rings, d);

		for (size_t i = 0; b && i < n; i++)
			r->d.events.bundle_drift(r->d.events.ctx, &b[i], dev_name(r->d.devs, d),
						 holder ? holder->job_id : NULL, back && back[d]);
	}
	free(nodes);
	free(queued);
	free(back);
}

/* Whether the circuits or rings changed, or a transaction ran, since the pass began. */
static bool changed_meanwhile(const struct recon *r)
{
	if (jm_busy(r->d.jm) || (r->d.busy && r->d.busy(r->d.busy_ctx)))
		return true;
	if (r->d.rings)
		return rg_generation(r->d.rings) != r->generation ||
		       jm_ring_txns(r->d.jm) != r->ring_txns;
	return fs_generation(r->d.fs) != r->generation;
}

static void pass_done(struct loop_node *n)
{
	struct recon *r = OCSD_CONTAINER_OF(n, struct recon, done_node);
	struct recon_report rep = {0};
	bool *compared; /* ring domains: nodes compared in this pass */

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
	rep.discarded = changed_meanwhile(r);
	compared = r->d.rings && !rep.discarded
			   ? calloc((size_t)r->n_devices + 1, sizeof(*compared))
			   : NULL;
	for (int d = 0; d < r->n_devices && !rep.discarded; d++) {
		struct dev_readback *rd = &r->reads[d];
		const char *name = dev_name(r->d.devs, d);
		struct dev_diff diff;

		if (!rd->ok) {
			rep.unreachable++;
			continue;
		}
		if (r->d.rings) {
			if (!compared || compare_node(r, d, rd, &rep) != 0)
				rep.unreachable++; /* out of memory: this node is not compared */
			else
				compared[d] = true;
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
	if (compared && !atomic_load(&r->stop))
		ring_pass_end(r, compared, &rep);
	free(compared);
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
	r->generation = r->d.rings ? rg_generation(r->d.rings) : fs_generation(r->d.fs);
	r->ring_txns = r->d.rings ? jm_ring_txns(r->d.jm) : 0;
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
