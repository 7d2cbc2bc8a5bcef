/*
 * jobs_external.c - what no job owns (issue 14 #2): circuits found on the
 * devices adopted as a job of their own (jm_adopt, stored ACTIVE with a
 * confirmed intent, no device touched; its store writes, jm_adopt_store,
 * also serve the start-up adoption of adopt.c), and the transactions that are no
 * job's (clearing unowned cross-connects), run one at a time with the
 * jobs' (jm_external_txn).
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"
#include "jobs_util.h"

int jm_adopt_store(struct st_store *store, struct fs_state *fs, const struct jm_adoption *a,
		   bool *row_stored)
{
	/* st_job_put only reads the row */
	struct st_job row = {.id = (char *)a->id,
			     .state = "PROGRAMMING",
			     .request = (void *)a->raw,
			     .request_len = a->raw_len,
			     .created_ms = a->now_ms,
			     .updated_ms = a->now_ms};
	struct jm_figures fig = {0};
	char *text;
	int64_t txn_id = 0;
	int rc;

	*row_stored = false;
	/* Stored PROGRAMMING first: recovery finds an intent left open
	 * confirmed (the devices hold them) and the job ACTIVE. */
	rc = st_job_put(store, &row);
	if (rc)
		return rc;
	*row_stored = true;
	snprintf(fig.planner, sizeof(fig.planner), "adopted");
	fig.circuits_new = (int)(a->n / 2);
	text = jm_figures_encode(&fig);
	if (!text || st_figures_put(store, a->id, text) != 0)
		rc = -EIO;
	free(text);
	if (rc == 0)
		rc = st_intent_begin(store, a->id, NULL, 0, a->adds, a->n, NULL, 0, a->now_ms,
				     &txn_id);
	if (rc == 0)
		rc = st_intent_finish(store, txn_id, ST_INTENT_CONFIRMED, a->note, a->now_ms);
	if (rc == 0 && a->active)
		rc = st_job_set_state(store, a->id, "ACTIVE", NULL, a->now_ms);
	if (rc == 0)
		rc = fs_apply(fs, NULL, 0, a->adds, a->n);
	return rc;
}

int jm_adopt(struct jm *jm, const char *id, const void *raw, size_t raw_len,
	     const struct ocs_xc *xcs, size_t n, struct err_info *err)
{
	struct job_rt *j;
	struct st_circuit *adds;
	struct jm_adoption a = {.id = id,
				.raw = raw,
				.raw_len = raw_len,
				.n = n,
				.note = "adopted: the devices held these cross-connects"};
	bool row_stored;
	int rc;

	if (jm->not_serving || jm->stopping) {
		err_set(err, ERR_UNAVAILABLE, "", "%s; nothing changed",
			jm->stopping ? "ocsd is shutting down" : jm->not_serving_reason);
		return -1;
	}
	if (jm_job_find(jm, id)) {
		err_set(err, ERR_EXISTS, "job_id", "job %s exists; name a new job", id);
		return -1;
	}
	j = calloc(1, sizeof(*j));
	a.adds = adds = calloc(n + 1, sizeof(*adds));
	if (!j || !adds || !(j->pub.demand = malloc(sizeof(*j->pub.demand))) ||
	    !(j->pub.raw = malloc(raw_len ? raw_len : 1))) {
		free(adds);
		jm_job_free(j);
		err_set(err, ERR_INTERNAL, "", "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		adds[i].xc = xcs[i];
		snprintf(adds[i].job_id, sizeof(adds[i].job_id), "%s", id);
	}
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", id);
	if (raw_len)
		memcpy(j->pub.raw, raw, raw_len);
	j->pub.raw_len = raw_len;
	snprintf(j->pub.planner, sizeof(j->pub.planner), "adopted");
	snprintf(j->pub.figures.planner, sizeof(j->pub.figures.planner), "adopted");
	j->pub.figures.circuits_new = (int)(n / 2);
	j->kind = &jm_kind_leaf;
	j->pub.state = JM_PROGRAMMING;
	j->pub.created_ms = j->pub.updated_ms = a.now_ms = jm_now_ms(jm);
	rc = jm_table_add(jm, j);
	if (rc) {
		free(adds);
		jm_job_free(j);
		err_set(err, ERR_INTERNAL, "", "out of memory");
		return -1;
	}
	jm_track_live(jm, j, false);
	rc = jm_adopt_store(jm->d.store, jm->d.fs, &a, &row_stored);
	free(adds);
	if (rc && !row_stored) {
		err_set(err, ERR_UNAVAILABLE, "", "cannot store the job (%s); %s",
			st_strerror(jm->d.store, rc), st_changed_note(rc));
		/* never seen by anyone: forget it again (as create_job does) */
		jm->n_state[j->pub.state]--;
		jm->n_state[JM_RELEASED]++;
		j->pub.state = JM_RELEASED;
		jm_track_live(jm, j, true);
		(void)jm_forget(jm, j->pub.id);
		return -1;
	}
	if (rc) {
		err_set(err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "",
			"cannot store the adopted circuits (%s); %s", strerror(rc < 0 ? -rc : rc),
			st_changed_note(rc));
		/* a row may be stored: it holds no circuit, so it is simply failed */
		jm_set_state(jm, j, JM_FAILED, err->message);
		return -1;
	}
	jm_set_state(jm, j, JM_ACTIVE, NULL);
	return 0;
}

static void external_done(void *arg, const struct txn_outcome *o)
{
	struct jm *jm = arg;

	jm->external.running = false;
	if (o->store_failed)
		jm_store_failed(jm, o->store_error, o->store_rc);
	if (jm->d.events.transaction_done && o->txn_id) {
		const char *id = jm->external.job_id;

		jm->d.events.transaction_done(jm->d.events.ctx, &id, 1, o);
	}
	jm->external.done(jm->external.arg, o);
	jm_pump(jm);
}

int jm_external_txn(struct jm *jm, const struct txn_change *c, txn_done_fn done, void *arg,
		    char *why, size_t why_len)
{
	struct txn_change told;
	int rc;

	if (jm->not_serving) {
		snprintf(why, why_len, "%s", jm->not_serving_reason);
		return -EIO;
	}
	if (jm->stopping) {
		snprintf(why, why_len, "ocsd is shutting down");
		return -ESHUTDOWN;
	}
	if (jm->txn_job || jm->external.running) {
		snprintf(why, why_len, "a transaction is running; try again");
		return -EBUSY;
	}
	jm->external.running = true;
	jm->external.done = done;
	jm->external.arg = arg;
	snprintf(jm->external.job_id, sizeof(jm->external.job_id), "%s", c->job_id);
	told = *c;
	told.progress = jm_txn_progress; /* named by external.job_id */
	rc = jm->d.txn_start(jm->d.txn_ctx, &told, external_done, jm, why, why_len);
	if (rc)
		jm->external.running = false;
	return rc;
}

int jm_note(struct jm *jm, const char *id, const char *note)
{
	struct job_rt *j = jm_job_find(jm, id);

	if (!j || j->pub.state != JM_ACTIVE)
		return -ENOENT;
	if (strcmp(j->pub.reason, note) == 0)
		return 0;
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", note);
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	return 0;
}
