/*
 * jobs_faults.c - node faults of OCSTrx ring domains, for the job manager
 * (jobs.h: jm_mark_node, jm_retry_repairs): a fault is stored, or stored
 * with the repair of the ring that holds the node in one transaction
 * (the fast path), and a healed node is queued for its reset to loopback.
 * A node of a live ring whose bundles drifted (reconcile.h) is programmed
 * back by a repair of its job with no ring change (jm_reprogram_nodes).
 * The repairs and resets themselves are queued and finished by the state
 * machine in jobs.c (jm_queue_repairs, jm_queue_reset, the transaction's
 * end); this file only calls into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jobs_internal.h"
#include "log.h"

void jm_retry_repairs(struct jm *jm)
{
	jm->reset.repair_failed = false;
	jm_queue_reset(jm);
	for (size_t i = 0; i < jm->n_jobs; i++)
		if (jm->jobs[i]->repair_failed) {
			jm->jobs[i]->repair_failed = false;
			jm_queue_repairs(jm, jm->jobs[i]);
		}
	jm_pump(jm);
}

/*
 * The fast path of a fault: when the job holding the node can be repaired
 * at once (no transaction running, the job ACTIVE and idle), the fault is
 * stored with the repair's intent in one SQLite transaction, committed
 * while the devices prepare (txn_driver.c). 0 (a commit that fails then rolls the
 * repair back and stops writes, through the outcome), or -errno with
 * nothing stored and nothing changed (the caller takes the ordinary path
 * then).
 */
static int repair_at_once(struct jm *jm, struct job_rt *j, int node, const char *source,
			  int64_t loop_us)
{
	struct st_fault fault = {node, source, jm_now_ms(jm)};
	const struct rg_ring *ring;
	enum rg_change kind;
	char why[400];
	int failed = -1, rc;

	if (jm->txn_job || jm->stopping || jm->not_serving || j->pub.state != JM_ACTIVE ||
	    j->queued || j->repair)
		return -EBUSY;
	rg_set_faulty(jm->d.rings, node, true, source, fault.since_ms);
	ring = jr_broken_ring(jm->d.rings, j->pub.id, &failed);
	jp_change_clear(&j->change);
	rc = ring ? jr_repair_change(jm->d.rings, jm_drained_nodes(jm), ring, failed, &j->pub.ring,
				     fault.since_ms, &j->change, &kind)
		  : -EINVAL;
	if (rc == 0) {
		int index = ring->index;

		j->fault_loop_us = loop_us;
		j->fault_planned_us = clk_mono_us(jm->d.clock);
		j->repair = true;
		jm->txn_job = j;
		j->in_txn = true;
		rc = jm_start_ring_txn(jm, j, false, &fault, why, sizeof(why));
		if (rc == 0) {
			log_msg(LOG_NOTICE, "job %s: ring %d lost node %d: %s", j->pub.id, index,
				failed, st_ring_change_name(kind));
			return 0;
		}
		jm->txn_job = NULL;
		j->in_txn = false;
		j->repair = false;
	}
	jp_change_clear(&j->change);
	rg_set_faulty(jm->d.rings, node, false, NULL, 0);
	return rc;
}

int jm_mark_node(struct jm *jm, int node, bool faulty, const char *source, int64_t received_us,
		 const char **affected_job, struct err_info *err)
{
	int64_t loop_us = clk_mono_us(jm->d.clock); /* the repair's profile */
	const struct rg_ring *holder;
	struct job_rt *j = NULL;
	int rc;

	*affected_job = NULL;
	if (!jm->d.rings) {
		err_set(err, ERR_PRECONDITION, "node", "the fabric is not an ocstrx-ring");
		return -1;
	}
	if (node < 0 || node >= rg_nodes(jm->d.rings)) {
		err_set(err, ERR_INVALID, "node", "%d is not a node of the domain (0..%d)", node,
			rg_nodes(jm->d.rings) - 1);
		return -1;
	}
	if (jm->not_serving) {
		err_set(err, ERR_UNAVAILABLE, "", "%s; nothing changed", jm->not_serving_reason);
		return -1;
	}
	holder = rg_holder(jm->d.rings, node);
	j = holder ? jm_job_find(jm, holder->job_id) : NULL;
	if (faulty && !rg_faulty(jm->d.rings, node) && j) {
		j->fault_us = received_us;
		j->repair_failed = false;
		if (repair_at_once(jm, j, node, source, loop_us) == 0) {
			if (jm->d.events.node_changed)
				jm->d.events.node_changed(jm->d.events.ctx, node, true, source);
			*affected_job = j->pub.id;
			return 0;
		}
	}
	if (rg_faulty(jm->d.rings, node) != faulty) {
		rc = st_fault_set(jm->d.store, node, faulty, source, jm_now_ms(jm));
		if (rc) {
			err_set(err, ERR_UNAVAILABLE, "",
				"cannot store the node's condition (%s); %s",
				st_strerror(jm->d.store, rc), st_changed_note(rc));
			return -1;
		}
		rg_set_faulty(jm->d.rings, node, faulty, source, jm_now_ms(jm));
		if (jm->d.events.node_changed)
			jm->d.events.node_changed(jm->d.events.ctx, node, faulty, source);
		if (!faulty && !rg_holder(jm->d.rings, node) &&
		    jm->n_reset < (size_t)rg_nodes(jm->d.rings)) {
			jm->reset_nodes[jm->n_reset++] = node;
			jm_queue_reset(jm);
			jm_pump(jm);
		}
	}
	if (faulty && j) {
		*affected_job = j->pub.id;
		j->fault_us = received_us;
		j->fault_loop_us = loop_us;
		j->repair_failed = false; /* a new fault report: try again */
		jm_queue_repairs(jm, j);
		jm_pump(jm);
	}
	return 0;
}

/* Whether j's change sets node's bundles already. */
static bool change_has_node(const struct job_rt *j, int node)
{
	for (size_t i = 0; i < j->change.n_bundles; i++)
		if (j->change.bundles[i].node == node)
			return true;
	return false;
}

/*
 * Adds node's settings to j's drift repair, which is set up first (its
 * rings as they are, queued ahead of other work) unless it is queued
 * already. 0 or -ENOMEM (j's change as it was).
 */
static int add_drift_node(struct jm *jm, struct job_rt *j, int node)
{
	size_t per = (size_t)rg_domain(jm->d.rings)->bundles;
	struct hbd_bundle *b;

	if (!j->repair) {
		size_t n = 0;
		const struct rg_ring *rings = rg_job_rings(jm->d.rings, j->pub.id, &n);

		jp_change_clear(&j->change);
		j->change.rings = rg_rings_dup(rings, n);
		if (!j->change.rings)
			return -ENOMEM;
		j->change.n_rings = n;
	}
	b = realloc(j->change.bundles, (j->change.n_bundles + per) * sizeof(*b));
	if (!b)
		goto oom;
	j->change.bundles = b;
	if (rg_node_bundles(jm->d.rings, node, b + j->change.n_bundles) != 0)
		goto oom;
	j->change.n_bundles += per;
	if (!j->repair) {
		j->repair = true;
		j->drift_repair = true;
		j->fault_us = 0;
		jm_enqueue_first(jm, j);
	}
	return 0;
oom:
	if (!j->repair)
		jp_change_clear(&j->change);
	return -ENOMEM;
}

void jm_reprogram_nodes(struct jm *jm, const int *nodes, size_t n, bool *queued)
{
	for (size_t i = 0; i < n; i++) {
		const struct rg_ring *holder =
			jm->d.rings ? rg_holder(jm->d.rings, nodes[i]) : NULL;
		struct job_rt *j = holder ? jm_job_find(jm, holder->job_id) : NULL;
		/* a drift repair this call queued takes the job's other nodes too */
		bool mine = j && j->drift_repair && j->queued && !j->in_txn;

		queued[i] = false;
		if (!j || jm->stopping || jm->not_serving || j->pub.state != JM_ACTIVE ||
		    (!mine && (j->repair || j->queued || j->in_txn)) ||
		    rg_faulty(jm->d.rings, nodes[i]))
			continue;
		if (mine && change_has_node(j, nodes[i])) {
			queued[i] = true;
			continue;
		}
		if (add_drift_node(jm, j, nodes[i]) != 0)
			continue; /* out of memory: the next pass tries again */
		queued[i] = true;
		log_msg(LOG_WARNING,
			"job %s: node %d of ring %d holds bundles its ring does not say (changed "
			"behind ocsd's back): programming it back",
			j->pub.id, nodes[i], holder->index);
	}
	jm_pump(jm);
}

unsigned long jm_ring_txns(const struct jm *jm)
{
	return jm->ring_txns;
}
