/*
 * jobs_recover.c - the job manager's start-up, shutdown and recovery:
 * jm_new loads the stored jobs and their plan figures, the API layer
 * gives each stored job back its request (jm_set_demand, jm_set_gpus,
 * jm_set_ring), and jm_recover, run after recovery.c settled the open
 * intents, loads the leaf-spine links and resumes the accepted work
 * (planned again, queued, found ACTIVE, or FAILED still holding its
 * circuits: jobs.c, "release not proven"). jm_free answers every waiter
 * that the job goes on at the next start (issue 14 #7).
 */
#include "jobs_internal.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fabric_state.h"
#include "jobs_util.h"
#include "log.h"

/* The demand of a stored job is re-read from its request by the API layer
 * (jm_set_demand); here only what the job manager needs is kept. */
static int job_from_row(struct jm *jm, const struct st_job *row, struct job_rt **out)
{
	struct job_rt *j = calloc(1, sizeof(*j));

	*out = NULL;
	if (!j)
		return -ENOMEM;
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", row->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s",
		 row->idempotency_key ? row->idempotency_key : "");
	if (!jm_state_parse(row->state, &j->pub.state)) {
		j->pub.state = JM_FAILED;
		snprintf(j->pub.reason, sizeof(j->pub.reason), "unknown stored state \"%s\"",
			 row->state ? row->state : "");
	} else {
		snprintf(j->pub.reason, sizeof(j->pub.reason), "%s",
			 row->reason ? row->reason : "");
	}
	j->pub.created_ms = row->created_ms;
	j->pub.updated_ms = row->updated_ms;
	j->seq = row->seq;
	j->kind = jm->d.gpus_check ? &jm_kind_rail : &jm_kind_leaf;
	if (row->request_len) {
		j->pub.raw = malloc(row->request_len);
		if (!j->pub.raw) {
			jm_job_free(j);
			return -ENOMEM;
		}
		memcpy(j->pub.raw, row->request, row->request_len);
		j->pub.raw_len = row->request_len;
	}
	*out = j;
	return 0;
}

static int load_job(void *arg, const struct st_job *row)
{
	struct jm *jm = arg;
	struct job_rt *j;
	int rc = job_from_row(jm, row, &j);

	if (rc)
		return rc;
	if (jm_table_add(jm, j) != 0) {
		jm_job_free(j);
		return -ENOMEM;
	}
	jm_track_live(jm, j, false);
	return 0;
}

/* j's plan figures from their stored text (a text that does not decode is skipped). */
static int set_figures(struct job_rt *j, const char *text)
{
	struct jm_figures fig;
	int rc = jm_figures_decode(text, &fig);

	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		log_msg(LOG_WARNING, "job %s: its stored plan figures do not decode; not shown",
			j->pub.id);
		return 0;
	}
	jm_figures_clear(&j->pub.figures);
	j->pub.figures = fig;
	return 0;
}

static int load_figures(void *arg, const char *job_id, const char *text)
{
	struct job_rt *j = jm_job_find(arg, job_id);

	return j ? set_figures(j, text) : 0;
}

int jm_follow_job(struct jm *jm, const char *id, const struct st_job *row, const char *figures)
{
	struct job_rt *old = jm_job_find(jm, id), *j = NULL;
	int rc;

	if (!row) {
		if (old)
			jm_table_drop(jm, old);
		return 0;
	}
	rc = job_from_row(jm, row, &j);
	if (rc == 0 && figures)
		rc = set_figures(j, figures);
	if (rc == 0 && old && old->seq == j->seq) {
		rc = jm_table_replace(jm, old, j);
	} else if (rc == 0) {
		/* new, or deleted and stored again: its place is the store's order */
		if (old)
			jm_table_drop(jm, old);
		rc = jm_table_insert(jm, j);
		if (rc == 0)
			jm_track_live(jm, j, false);
	}
	if (rc)
		jm_job_free(j);
	return rc;
}

int jm_new(const struct jm_deps *deps, struct jm **out, char *err, size_t err_len)
{
	struct jm *jm = calloc(1, sizeof(*jm));
	int rc;

	*out = NULL;
	if (!jm)
		return -ENOMEM;
	jm->d = *deps;
	jm->f = &deps->cfg->fabric;
	jm->max_wave = deps->max_wave_jobs ? deps->max_wave_jobs : JM_MAX_WAVE_JOBS;
	jm->gather_us = JM_GATHER_MAX_US / 2; /* until a transaction tells */
	jm->wave = calloc(jm->max_wave, sizeof(*jm->wave));
	jm->settling = calloc(jm->max_wave, sizeof(*jm->settling));
	jm->waited = calloc(jm->max_wave, sizeof(*jm->waited));
	jm->fates = calloc(jm->max_wave, sizeof(*jm->fates));
	jm->names = calloc(jm->max_wave, sizeof(*jm->names));
	jm->rows = calloc(jm->max_wave, sizeof(*jm->rows));
	jm->next_states = calloc(jm->max_wave, sizeof(*jm->next_states));
	if (!jm->wave || !jm->settling || !jm->waited || !jm->fates || !jm->names || !jm->rows ||
	    !jm->next_states) {
		jm_free(jm);
		return -ENOMEM;
	}
	if (deps->rings) {
		jm->reset.kind = &jm_kind_ring;
		jm->reset.pub.state = JM_ACTIVE;
		jm->reset.pub.is_ring = true;
		snprintf(jm->reset.pub.id, sizeof(jm->reset.pub.id), "%s", JM_RESET_JOB);
		jm->reset_nodes = malloc((size_t)(rg_nodes(deps->rings) + 1) * sizeof(int));
		if (!jm->reset_nodes) {
			free(jm);
			return -ENOMEM;
		}
	}
	rc = st_job_list(deps->store, load_job, jm);
	if (rc == 0)
		rc = st_figures_list(deps->store, load_figures, jm);
	if (rc) {
		snprintf(err, err_len, "cannot load jobs from the store: %s", strerror(-rc));
		jm_free(jm);
		return rc;
	}
	*out = jm;
	return 0;
}

void jm_free(struct jm *jm)
{
	struct err_info err;

	if (!jm)
		return;
	/* jobs submitted in the last turn of the loop: stored, not planned (the
	 * next start plans them) */
	jm->stopping = true;
	jm_store_new_jobs(jm);
	for (size_t i = 0; i < jm->n_jobs; i++) {
		struct job_rt *j = jm->jobs[i];

		/*
		 * Every job in the table was stored before anyone waited on it
		 * (create_job); one that has not settled resumes at the next
		 * start (jm_recover), so "nothing changed" (UNAVAILABLE) would be
		 * untrue: its callers learn that it goes on (issue 14 #7).
		 */
		err_set(&err, ERR_ABORTED, "",
			"ocsd is shutting down: job %s is stored (%s) and is carried out "
			"when ocsd starts again; GetJob tells its outcome then%s",
			j->pub.id, jm_state_name(j->pub.state),
			j->release_requested ? " (a release asked for while it was "
					       "programmed is not kept: release it again)"
					     : "");
		jm_settle(j, &err);
		jm_job_free(j);
	}
	strmap_clear(&jm->by_id);
	strmap_clear(&jm->by_key);
	jp_change_clear(&jm->reset.change);
	rg_rings_free(jm->reset.prev_rings, jm->reset.n_prev_rings);
	free(jm->reset_nodes);
	if (jm->yield)
		jm->yield->jm = NULL; /* the loop frees it when it runs it */
	if (jm->store_new)
		jm->store_new->jm = NULL;
	if (jm->gather_ev)
		event_free(jm->gather_ev);
	if (jm->reset_ev)
		event_free(jm->reset_ev);
	free(jm->wave);
	free(jm->settling);
	free(jm->waited);
	free(jm->fates);
	free(jm->names);
	free(jm->rows);
	free(jm->next_states);
	free(jm->jobs);
	free(jm->live);
	free(jm);
}

int jm_set_demand(struct jm *jm, const char *id, const char *planner, bool allow_move,
		  const struct lc_demand *demand, size_t n, const struct jm_workload *workload)
{
	struct job_rt *j = jm_job_find(jm, id);
	struct lc_demand *d;

	if (!j)
		return -ENOENT;
	d = malloc((n ? n : 1) * sizeof(*demand));
	if (!d)
		return -ENOMEM;
	jm_workload_free(j->pub.workload);
	j->pub.workload = NULL;
	if (workload) {
		j->pub.workload = jm_workload_dup(workload);
		if (!j->pub.workload) {
			free(d);
			return -ENOMEM;
		}
	}
	free(j->pub.demand);
	j->pub.demand = d;
	if (n)
		memcpy(j->pub.demand, demand, n * sizeof(*demand));
	j->pub.n_demand = n;
	j->kind = jm_kind_of(workload);
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 planner && *planner ? planner : ocs_planner_default(j->kind->demand)->name);
	j->pub.allow_move = allow_move;
	return 0;
}

int jm_set_gpus(struct jm *jm, const char *id, const int64_t *gpus, size_t n)
{
	struct job_rt *j = jm_job_find(jm, id);

	return j ? jm_copy_gpus(&j->pub, gpus, n) : -ENOENT;
}

int jm_set_ring(struct jm *jm, const char *id, const struct jm_ring_request *req)
{
	struct job_rt *j = jm_job_find(jm, id);

	if (!j)
		return -ENOENT;
	j->pub.is_ring = true;
	j->pub.ring = *req;
	j->kind = &jm_kind_ring;
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 req->orchestration[0] ? req->orchestration : "dcn-free");
	return 0;
}

int jm_recover(struct jm *jm)
{
	int rc;

	/* after recovery: intents finished as confirmed carried links */
	rc = jm_reload_links(jm);
	if (rc)
		return rc;
	for (size_t i = 0; i < jm->n_jobs; i++) {
		struct job_rt *j = jm->jobs[i];
		size_t n_xcs = 0;
		struct ocs_xc *xcs;

		switch (j->pub.state) {
		case JM_PENDING:
		case JM_PLANNING:
		case JM_PROGRAMMING:
			if (j->kind->rings) {
				/* Accepted work: if its transaction landed, it is active. */
				rg_job_rings(jm->d.rings, j->pub.id, &n_xcs);
				if (n_xcs)
					jm_set_state(jm, j, JM_ACTIVE, NULL);
				else
					jm_start_planning(jm, j);
				break;
			}
			if (j->kind->gpus_only) {
				jm_start_planning(jm, j); /* nothing on devices: programmed again */
				break;
			}
			/* Accepted work: if its transaction landed, it is active. */
			xcs = fs_job_xcs(jm->d.fs, j->pub.id, &n_xcs);
			if (!xcs)
				return -ENOMEM;
			free(xcs);
			if (n_xcs)
				jm_set_state(jm, j, JM_ACTIVE, NULL);
			else if (j->pub.n_demand || j->pub.workload)
				jm_start_planning(jm, j);
			else
				jm_set_state(jm, j, JM_FAILED,
					     "its request could not be read back after "
					     "a restart");
			break;
		case JM_RELEASING:
			jm_enqueue(jm, j);
			break;
		case JM_FAILED:
			/* Its release did not take effect: it holds what the table
			 * says it owns until a release does (jobs.c). */
			if (j->kind->rings)
				rg_job_rings(jm->d.rings, j->pub.id, &n_xcs);
			else if ((xcs = fs_job_xcs(jm->d.fs, j->pub.id, &n_xcs)) != NULL)
				free(xcs);
			else
				return -ENOMEM;
			if (n_xcs)
				jm_set_holding(jm, j, true);
			break;
		default:
			break;
		}
	}
	/* Faults stored while a repair was cut short (or reported while down). */
	for (size_t i = 0; i < jm->n_jobs; i++)
		jm_queue_repairs(jm, jm->jobs[i]);
	jm_pump(jm);
	return 0;
}
