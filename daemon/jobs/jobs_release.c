/*
 * jobs_release.c - the release of a job (jobs.h: jm_release) and the
 * settling of a FAILED job's unproven transaction once the devices answer
 * again (jm_may_take_effect, jm_unproven_settled, for keepalive.h). The
 * state machine in jobs.c (whose opening comment draws both) runs the
 * release transaction and its end; this file only calls into it.
 */
#include <stdio.h>
#include <string.h>

#include "fabric_state.h"
#include "jobs_internal.h"
#include "log.h"

void jm_release(struct jm *jm, const char *id, jm_answer_fn answer, void *ctx)
{
	struct job_rt *j = jm_job_find(jm, id);
	struct err_info err = {0};

	if (j && j->unstored) {
		/* submitted in this turn of the loop: stored first (or refused) */
		jm_store_new_jobs(jm);
		j = jm_job_find(jm, id);
	}
	if (!j) {
		err_set(&err, ERR_NOT_FOUND, "id", "no job %s", id);
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (j->pub.state == JM_RELEASED) {
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return;
	}
	if (jm_refuse_write(jm, answer, ctx))
		return;
	if (jm_add_waiter(j, answer, ctx, false) != 0) {
		err_set(&err, ERR_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	j->waiters->release = true;
	switch (j->pub.state) {
	case JM_PENDING:
	case JM_PLANNING:
	case JM_FAILED:
		if (!j->pub.holding) {
			/* Nothing of the job is on the devices (a FAILED apply
			 * rolled back), or nothing was proven there (its intent
			 * is settled by the keepalive: drift then). */
			jm_set_state(jm, j, JM_RELEASED, NULL);
			jm_settle(j, NULL);
			return;
		}
		/* holding: a real release, as for an ACTIVE job */
		jm_set_state(jm, j, JM_RELEASING, NULL);
		jm_enqueue(jm, j);
		break;
	case JM_PROGRAMMING:
		j->release_requested = true; /* after its transaction */
		break;
	case JM_ACTIVE:
		jm_set_state(jm, j, JM_RELEASING, NULL);
		jm_enqueue(jm, j);
		break;
	case JM_RELEASING:
	case JM_RELEASED:
		break;
	}
	jm_pump(jm);
}

/* ---- unproven transactions settled (keepalive.h) ---- */

/* The circuit owning the input of xc in the table, or NULL. */
static const struct st_circuit *owner_at(const struct jm *jm, const struct ocs_xc *xc)
{
	size_t n = 0;
	const struct st_circuit *run = fs_device_circuits(
		jm->d.fs, ocs_fabric_device_id(jm->f, xc->group, xc->device), &n);

	for (size_t i = 0; i < n; i++)
		if (run[i].xc.in == xc->in)
			return &run[i];
	return NULL;
}

bool jm_may_take_effect(const struct jm *jm, const struct st_intent *in)
{
	const struct job_rt *j = jm_job_find(jm, in->job_id);
	struct err_info err;

	if (!j || j->pub.state != JM_FAILED || j->queued || j->in_txn || j->kind->rings ||
	    !jm->d.fs)
		return false;
	if (j->pub.holding) {
		/* its release: removals of its own circuits only */
		if (in->n_additions || !in->n_removals)
			return false;
		for (size_t i = 0; i < in->n_removals; i++) {
			const struct st_circuit *c = owner_at(jm, &in->removals[i]);

			if (!c || c->xc.out != in->removals[i].out || strcmp(c->job_id, j->pub.id))
				return false;
		}
		return true;
	}
	/* its submission: additions of its own on free inputs only, while its
	 * GPUs and leaves are still nobody else's (they were free while it
	 * was FAILED holding nothing) */
	if (in->n_removals || !in->n_additions)
		return false;
	for (size_t i = 0; i < in->n_additions; i++)
		if (strcmp(in->additions[i].job_id, j->pub.id) ||
		    owner_at(jm, &in->additions[i].xc))
			return false;
	return jm_gpus_free(jm, j->pub.id, j->pub.gpus, j->pub.n_gpus, j->pub.workload, &err) &&
	       jl_leaves_free(jm->f, jm->live, jm->n_live, j->pub.id, j->pub.demand,
			      j->pub.n_demand, j->pub.workload, &err);
}

void jm_unproven_settled(struct jm *jm, const struct st_intent *in, bool took_effect)
{
	struct job_rt *j = jm_job_find(jm, in->job_id);
	char reason[sizeof(j->pub.reason)];
	size_t n;

	if (!j || j->pub.state != JM_FAILED || j->queued || j->in_txn || j->kind->rings)
		return;
	n = jm_held_count(jm, j);
	if (took_effect) {
		jm_set_holding(jm, j, false);
		int rc = n ? jm_reload_links(jm) : 0;

		if (rc != 0)
			jm_store_failed(jm,
					"cannot reload the leaf-spine links after a "
					"transaction settled",
					rc);
		snprintf(reason, sizeof(reason),
			 "transaction %lld took effect after all (read back once the devices "
			 "answered again)",
			 (long long)in->txn_id);
		jm_set_state(jm, j, n ? JM_ACTIVE : JM_RELEASED, reason);
	} else if (j->pub.holding) {
		snprintf(reason, sizeof(reason),
			 "release of job %s did not take effect (transaction %lld rolled back, "
			 "proven once the devices answered again); it still holds its %zu "
			 "cross-connect(s): release it again",
			 j->pub.id, (long long)in->txn_id, n);
		jm_set_state(jm, j, JM_FAILED, reason);
	} else {
		snprintf(reason, sizeof(reason),
			 "%.300s (transaction %lld rolled back, proven once the devices answered "
			 "again)",
			 j->pub.reason, (long long)in->txn_id);
		jm_set_state(jm, j, JM_FAILED, reason);
	}
	log_msg(LOG_NOTICE, "job %s: %s", j->pub.id, j->pub.reason);
}
