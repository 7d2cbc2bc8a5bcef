/*
 * jobs_submit.c - the requests that start a job (jobs.h): a submission
 * (jm_submit: a job that exists answered or run again, a new one checked,
 * created and stored with the others of this turn of the loop, then
 * planned; a parallelism spec first searched on the pool, the job created
 * when the search is done) and a dry run (jm_plan, answered from the
 * pool). The state machine that takes the job from there is jobs.c's.
 *
 * Calls go one way: into jobs.c (jm_start_planning, jm_new_task,
 * jm_held_count) and below it; a search's end reaches this file through
 * the task's continuation (jp_task.searched), not by name.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jobs_util.h"
#include "strmap.h"

/*
 * The part of a submission that concerns a job that already exists (or an
 * idempotency key in use). Returns true when the request was answered or
 * attached to the job.
 */
static bool submit_existing(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct job_rt *j = jm_job_find(jm, spec->id);
	struct err_info err = {0};

	if (!j && spec->idempotency_key && *spec->idempotency_key) {
		const struct job_rt *other = strmap_get(&jm->by_key, spec->idempotency_key);

		if (other) {
			err_set(&err, ERR_EXISTS, "idempotency_key", "already used by job %s",
				other->pub.id);
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
	}
	if (!j)
		return false;
	if (j->pub.raw_len != spec->raw_len || memcmp(j->pub.raw, spec->raw, spec->raw_len) != 0) {
		err_set(&err, ERR_EXISTS, "id", "job %s exists with a different request (state %s)",
			spec->id, jm_state_name(j->pub.state));
		answer(ctx, &err, NULL, false, NULL, 0);
		return true;
	}
	if (j->pub.state == JM_FAILED && j->pub.holding) {
		err_set(&err, ERR_PRECONDITION, "id",
			"job %s still holds %zu %s from a release that did not take effect; "
			"release it first",
			j->pub.id, jm_held_count(jm, j),
			j->kind->rings ? "ring(s)" : "cross-connect(s)");
		answer(ctx, &err, NULL, false, NULL, 0);
		return true;
	}
	if (j->pub.state == JM_FAILED || j->pub.state == JM_RELEASED) {
		/* The same request again: run it again. */
		if (jm_refuse_write(jm, answer, ctx))
			return true;
		if (j->kind->gpus_only && jm->d.gpus_check &&
		    !jm->d.gpus_check(jm->d.gpus_check_ctx, j->pub.gpus, j->pub.n_gpus, &err)) {
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
		if (!j->kind->rings &&
		    (!jm_gpus_free(jm, j->pub.id, j->pub.gpus, j->pub.n_gpus, j->pub.workload,
				   &err) ||
		     !jl_leaves_free(jm->f, jm->live, jm->n_live, j->pub.id, j->pub.demand,
				     j->pub.n_demand, j->pub.workload, &err))) {
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
		if (jm_add_waiter(j, answer, ctx, false) != 0)
			goto oom;
		j->replans = 0;
		j->release_requested = false;
		jm_start_planning(jm, j);
		return true;
	}
	if (j->pub.state == JM_ACTIVE) {
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return true;
	}
	/* In progress: answered when it settles. */
	if (jm_add_waiter(j, answer, ctx, false) != 0)
		goto oom;
	return true;
oom:
	err_set(&err, ERR_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
	return true;
}

void jm_store_new_jobs(struct jm *jm)
{
	struct job_rt *next;

	for (struct job_rt *j = jb_store_new(jm); j; j = next) {
		next = j->next_new;
		j->next_new = NULL;
		jm_start_planning(jm, j);
	}
}

/* Creates, stores and plans a new job whose spec passed jm_check_spec(). */
static void create_job(struct jm *jm, const struct jm_spec *spec, const struct jp_task *search,
		       jm_answer_fn answer, void *ctx)
{
	struct err_info err = {0};
	struct job_rt *j = calloc(1, sizeof(*j));

	if (!j)
		goto oom;
	jm_copy_spec(j, spec);
	j->pub.raw = malloc(spec->raw_len ? spec->raw_len : 1);
	j->pub.demand = malloc((spec->n_demand ? spec->n_demand : 1) * sizeof(*j->pub.demand));
	if (spec->workload)
		j->pub.workload = jm_workload_dup(spec->workload);
	if (!j->pub.raw || !j->pub.demand || (spec->workload && !j->pub.workload) ||
	    jm_add_waiter(j, answer, ctx, true) != 0) {
		jm_job_free(j);
		goto oom;
	}
	if (spec->raw_len)
		memcpy(j->pub.raw, spec->raw, spec->raw_len);
	j->pub.raw_len = spec->raw_len;
	if (jm_copy_gpus(&j->pub, spec->gpus, spec->n_gpus) != 0) {
		free(j->waiters);
		jm_job_free(j);
		goto oom;
	}
	if (spec->n_demand)
		memcpy(j->pub.demand, spec->demand, spec->n_demand * sizeof(*j->pub.demand));
	j->pub.n_demand = spec->n_demand;
	if (search && search->has_delta) {
		j->pub.figures.has_delta = true;
		j->pub.figures.delta = search->delta;
		j->search_unreported = true; /* reported with the job's first plan */
	}
	j->pub.state = JM_PENDING;
	j->pub.created_ms = j->pub.updated_ms = jm_now_ms(jm);
	if (jm_table_add(jm, j) != 0) {
		free(j->waiters);
		jm_job_free(j);
		goto oom;
	}
	jm->prev_arrival_us = jm->arrival_us;
	jm->arrival_us = clk_mono_us(jm->d.clock);
	/* Durable before anything else happens: nothing accepted is lost. The
	 * jobs submitted in the same turn of the loop are stored together. */
	j->unstored = true;
	if (jm->new_tail)
		jm->new_tail->next_new = j;
	else
		jm->new_head = j;
	jm->new_tail = j;
	if (!jb_post_once(jm, &jm->store_new, jm_store_new_jobs))
		jm_store_new_jobs(jm);
	return;
oom:
	err_set(&err, ERR_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
}

/*
 * Hands t (a search or a dry run, answered when it is done) to the planner
 * pool and keeps it among the answering tasks; when the queue is full, t
 * is freed and answer told so.
 */
static void submit_answering(struct jm *jm, struct jp_task *t, jm_answer_fn answer, void *ctx)
{
	struct err_info err = {0};
	int rc = jm->d.plan_submit(jm->d.plan_ctx, &t->pool);

	if (rc) {
		jp_task_free(t);
		err_set(&err, ERR_EXHAUSTED, "", "the planner queue is full (%s); try again",
			strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	jm_answering_add(jm, t);
}

static void submit_searched(void *owner, struct jp_task *t);

/* Searches a new submission's workload on the pool, then submit_searched(). */
static void submit_workload(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct err_info err = {0};
	struct jp_task *t =
		jm_new_task(jm, &jm_kind_parallelism, spec->id, jm_planner_of(spec),
			    spec->allow_moving_other_jobs, NULL, 0, spec->workload, NULL, NULL);

	if (t) {
		t->search_only = true;
		t->searched = submit_searched;
		t->answer = answer;
		t->ctx = ctx;
		t->sub.id = strdup(spec->id);
		t->sub.key = strdup(spec->idempotency_key ? spec->idempotency_key : "");
		t->sub.raw = malloc(spec->raw_len ? spec->raw_len : 1);
		t->sub.raw_len = spec->raw_len;
		t->sub.allow_move = spec->allow_moving_other_jobs;
	}
	if (!t || !t->sub.id || !t->sub.key || !t->sub.raw) {
		jp_task_free(t);
		err_set(&err, ERR_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (spec->raw_len)
		memcpy(t->sub.raw, spec->raw, spec->raw_len);
	submit_answering(jm, t, answer, ctx);
}

/* A new submission's workload was searched: refuse it, or create the job with its demand. */
static void submit_searched(void *owner, struct jp_task *t)
{
	struct jm *jm = owner;
	struct err_info err = {0};
	struct jm_spec spec = {.id = t->sub.id,
			       .idempotency_key = t->sub.key,
			       .planner = t->planner,
			       .allow_moving_other_jobs = t->sub.allow_move,
			       .demand = t->demand,
			       .n_demand = t->n_demand,
			       .workload = t->wl,
			       .raw = t->sub.raw,
			       .raw_len = t->sub.raw_len};

	if (t->kind_rc) {
		t->answer(t->ctx, &t->kind_err, NULL, false, NULL, 0);
	} else if (jm->stopping) {
		/* Nothing was stored: the caller may submit again to the next run. */
		err_set(&err, ERR_UNAVAILABLE, "", "ocsd is shutting down; nothing changed");
		t->answer(t->ctx, &err, NULL, false, NULL, 0);
	} else if (jm_refuse_write(jm, t->answer, t->ctx)) {
		return;
	} else if (!submit_existing(jm, &spec, t->answer, t->ctx)) {
		/* Still new (the same request may have been submitted meanwhile). */
		if (jm_check_spec(jm, &spec, &err))
			create_job(jm, &spec, t, t->answer, t->ctx);
		else
			t->answer(t->ctx, &err, NULL, false, NULL, 0);
	}
}

void jm_submit(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	struct err_info err = {0};

	if (submit_existing(jm, spec, answer, ctx) || jm_refuse_write(jm, answer, ctx))
		return;
	if (!jm_check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (spec->workload && spec->n_demand == 0)
		submit_workload(jm, spec, answer, ctx);
	else
		create_job(jm, spec, NULL, answer, ctx);
}

void jm_plan(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	struct err_info err = {0};
	struct jp_task *t;

	if (!jm_check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (jm_spec_kind(spec)->gpus_only) {
		/* A rail job plans nothing: the dry run is its check. */
		struct jm_job shadow = {0};

		snprintf(shadow.planner, sizeof(shadow.planner), "%s", jm_planner_of(spec));
		answer(ctx, NULL, &shadow, false, NULL, 0);
		return;
	}
	t = jm_new_task(jm, jm_spec_kind(spec), spec->id, jm_planner_of(spec),
			spec->allow_moving_other_jobs, spec->demand, spec->n_demand, spec->workload,
			NULL, spec->ring);
	if (!t) {
		err_set(&err, ERR_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t->dry = true;
	t->answer = answer;
	t->ctx = ctx;
	submit_answering(jm, t, answer, ctx);
}
