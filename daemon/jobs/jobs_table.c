/*
 * jobs_table.c - the job manager's table and its primitive state changes:
 * the jobs by id and idempotency key, the live jobs, the intrusive queue
 * of transactions, the waiters answered when a job settles, and
 * jm_set_state, which stores every state change before it is published
 * (invariants 5 to 7 of jobs.c). The state machine that decides the
 * changes is jobs.c, which calls this file, never the other way round.
 * Loop thread only.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jobs_util.h"
#include "log.h"

int64_t jm_now_ms(const struct jm *jm)
{
	return clk_wall_ms(jm->d.clock);
}

void jm_job_free(struct job_rt *j)
{
	if (!j)
		return;
	rg_rings_free(j->prev_rings, j->n_prev_rings);
	free(j->pub.raw);
	free(j->pub.gpus);
	free(j->pub.demand);
	jm_workload_free(j->pub.workload);
	jm_figures_clear(&j->pub.figures);
	jp_change_clear(&j->change);
	free(j->links);
	free(j);
}

struct job_rt *jm_job_find(const struct jm *jm, const char *id)
{
	return strmap_get(&jm->by_id, id);
}

const struct jm_job *jm_find(const struct jm *jm, const char *id)
{
	struct job_rt *j = jm_job_find(jm, id);

	return j ? &j->pub : NULL;
}

size_t jm_count(const struct jm *jm)
{
	return jm->n_jobs;
}

size_t jm_count_state(const struct jm *jm, enum jm_state s)
{
	return s >= JM_PENDING && s <= JM_FAILED ? jm->n_state[s] : 0;
}

double jm_max_contention(const struct jm *jm)
{
	double worst = 0;

	for (size_t i = 0; i < jm->n_live; i++)
		if (jm->live[i]->pub.state == JM_ACTIVE &&
		    jm->live[i]->pub.figures.max_contention > worst)
			worst = jm->live[i]->pub.figures.max_contention;
	return worst;
}

int64_t jm_state_age_ms(const struct jm *jm, enum jm_state s)
{
	int64_t now = jm_now_ms(jm), oldest = 0;

	/* updated_ms is the time of the job's last state change (jm_set_state) */
	for (size_t i = 0; i < jm->n_live; i++)
		if (jm->live[i]->pub.state == s && now - jm->live[i]->pub.updated_ms > oldest)
			oldest = now - jm->live[i]->pub.updated_ms;
	return oldest;
}

const struct jm_job *jm_at(const struct jm *jm, size_t i)
{
	return i < jm->n_jobs ? &jm->jobs[i]->pub : NULL;
}

bool jm_busy(const struct jm *jm)
{
	return jm->txn_job != NULL || jm->external.running;
}

bool jm_serving(const struct jm *jm, const char **reason)
{
	if (reason)
		*reason = jm->not_serving_reason;
	return !jm->not_serving;
}

void jm_stop(struct jm *jm)
{
	jm->stopping = true;
	/* Searches and dry runs still running answer nobody now: they stop at
	 * their next check, so that shutdown does not wait for them to end. */
	for (struct jp_task *t = jm->answering; t; t = t->next_answering)
		atomic_store(&t->cancel, true);
}

/* ---- the table ---- */

/* Adds j to the table and the indexes, with room in `live` for it. 0 or -ENOMEM. */
int jm_table_add(struct jm *jm, struct job_rt *j)
{
	if (jm->n_jobs == jm->cap_jobs) {
		size_t cap = jm->cap_jobs ? jm->cap_jobs * 2 : 64;
		struct job_rt **jobs = realloc(jm->jobs, cap * sizeof(*jobs));
		struct job_rt **live;

		if (!jobs)
			return -ENOMEM;
		jm->jobs = jobs;
		live = realloc(jm->live, cap * sizeof(*live));
		if (!live)
			return -ENOMEM;
		jm->live = live;
		jm->cap_jobs = cap;
	}
	if (strmap_put(&jm->by_id, j->pub.id, j) != 0)
		return -ENOMEM;
	if (j->pub.key[0] && strmap_put(&jm->by_key, j->pub.key, j) != 0) {
		strmap_del(&jm->by_id, j->pub.id);
		return -ENOMEM;
	}
	jm->jobs[jm->n_jobs++] = j;
	jm->n_state[j->pub.state]++;
	return 0;
}

/* A job is live while it stands on its leaves, or holds circuits after a failed release. */
static bool job_is_live(const struct job_rt *j)
{
	return jl_holds_leaves(j->pub.state) || j->pub.holding;
}

/* Keeps `live` in step with j's state (never allocates: invariant 6). */
void jm_track_live(struct jm *jm, struct job_rt *j, bool was_live)
{
	bool is_live = job_is_live(j);

	if (is_live && !was_live) {
		j->live_at = jm->n_live;
		jm->live[jm->n_live++] = j;
	} else if (!is_live && was_live) {
		struct job_rt *last = jm->live[--jm->n_live];

		jm->live[j->live_at] = last;
		last->live_at = j->live_at;
	}
}

int jm_forget(struct jm *jm, const char *id)
{
	struct job_rt *j = jm_job_find(jm, id);

	if (!j)
		return -ENOENT;
	if ((j->pub.state != JM_RELEASED && j->pub.state != JM_FAILED) || j->pub.holding ||
	    j->waiters || j->queued)
		return -EBUSY;
	if (j->admit_pending) {
		/* released while its admission waited for the wave: off the list */
		struct job_rt **p = &jm->admit_head, *prev = NULL;

		while (*p != j) {
			prev = *p;
			p = &(*p)->next_admit;
		}
		*p = j->next_admit;
		if (jm->admit_tail == j)
			jm->admit_tail = prev;
		jm->n_admit--;
	}
	if (j->plan_waiting) {
		/* released while waiting for its turn to plan: off the list */
		struct job_rt **p = &jm->plan_head, *prev = NULL;

		while (*p != j) {
			prev = *p;
			p = &(*p)->next_planning;
		}
		*p = j->next_planning;
		if (jm->plan_tail == j)
			jm->plan_tail = prev;
	}
	jm_table_drop(jm, j);
	return 0;
}

/* Off the live list, if it is on it (its state says so: jm_track_live). */
static void untrack_live(struct jm *jm, struct job_rt *j)
{
	struct job_rt *last;

	if (!job_is_live(j))
		return;
	last = jm->live[--jm->n_live];
	jm->live[j->live_at] = last;
	last->live_at = j->live_at;
}

void jm_table_drop(struct jm *jm, struct job_rt *j)
{
	size_t i;

	for (i = 0; i < jm->n_jobs && jm->jobs[i] != j; i++)
		;
	memmove(&jm->jobs[i], &jm->jobs[i + 1], (jm->n_jobs - i - 1) * sizeof(*jm->jobs));
	jm->n_jobs--;
	jm->n_state[j->pub.state]--;
	untrack_live(jm, j);
	strmap_del(&jm->by_id, j->pub.id);
	if (j->pub.key[0] && strmap_get(&jm->by_key, j->pub.key) == j)
		strmap_del(&jm->by_key, j->pub.key);
	jm_job_free(j);
}

int jm_table_insert(struct jm *jm, struct job_rt *j)
{
	size_t lo = 0, hi, at;
	int rc = jm_table_add(jm, j); /* at the end, room made */

	if (rc)
		return rc;
	hi = jm->n_jobs - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (jm->jobs[mid]->seq < j->seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	at = lo;
	memmove(&jm->jobs[at + 1], &jm->jobs[at], (jm->n_jobs - 1 - at) * sizeof(*jm->jobs));
	jm->jobs[at] = j;
	return 0;
}

int jm_table_replace(struct jm *jm, struct job_rt *old, struct job_rt *j)
{
	size_t i;

	if (strmap_put(&jm->by_id, j->pub.id, j) != 0)
		return -ENOMEM;
	if (j->pub.key[0] && strmap_put(&jm->by_key, j->pub.key, j) != 0) {
		(void)strmap_put(&jm->by_id, old->pub.id, old); /* present: cannot fail */
		return -ENOMEM;
	}
	if (old->pub.key[0] && strcmp(old->pub.key, j->pub.key) != 0 &&
	    strmap_get(&jm->by_key, old->pub.key) == old)
		strmap_del(&jm->by_key, old->pub.key);
	for (i = 0; i < jm->n_jobs && jm->jobs[i] != old; i++)
		;
	jm->jobs[i] = j;
	jm->n_state[old->pub.state]--;
	jm->n_state[j->pub.state]++;
	untrack_live(jm, old);
	jm_track_live(jm, j, false);
	jm_job_free(old);
	return 0;
}

static int load_link(void *arg, const struct st_link *l)
{
	struct jm *jm = arg;
	struct job_rt *j = jm_job_find(jm, l->job_id);
	struct st_link *g;

	if (!j)
		return 0; /* a job the store no longer has */
	g = realloc(j->links, (j->n_links + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	j->links = g;
	j->links[j->n_links++] = *l;
	return 0;
}

int jm_reload_links(struct jm *jm)
{
	for (size_t i = 0; i < jm->n_jobs; i++) {
		free(jm->jobs[i]->links);
		jm->jobs[i]->links = NULL;
		jm->jobs[i]->n_links = 0;
	}
	return st_link_list(jm->d.store, load_link, jm);
}

/* ---- the queue of transactions (intrusive: never fails) ---- */

/* A repair goes ahead of every queued job (never fails either). */
void jm_enqueue_first(struct jm *jm, struct job_rt *j)
{
	if (j->queued)
		return;
	j->queued = true;
	jm->n_queued++;
	j->queued_us = clk_mono_us(jm->d.clock);
	j->next_queued = jm->queue_head;
	jm->queue_head = j;
	if (!jm->queue_tail)
		jm->queue_tail = j;
}

void jm_enqueue(struct jm *jm, struct job_rt *j)
{
	if (j->queued)
		return;
	j->queued = true;
	jm->n_queued++;
	if (!j->admitted) /* an admitted plan waits since its admission */
		j->queued_us = clk_mono_us(jm->d.clock);
	j->next_queued = NULL;
	if (jm->queue_tail)
		jm->queue_tail->next_queued = j;
	else
		jm->queue_head = j;
	jm->queue_tail = j;
}

struct job_rt *jm_dequeue(struct jm *jm)
{
	struct job_rt *j = jm->queue_head;

	if (!j)
		return NULL;
	jm->queue_head = j->next_queued;
	if (!jm->queue_head)
		jm->queue_tail = NULL;
	jm->n_queued--;
	j->queued = false;
	j->next_queued = NULL;
	return j;
}

/* ---- answering and state changes ---- */

int jm_add_waiter(struct job_rt *j, jm_answer_fn fn, void *ctx, bool created)
{
	struct waiter *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct waiter){fn, ctx, created, false, j->waiters};
	j->waiters = w;
	return 0;
}

/* Answers every waiter of j (err NULL: success). */
void jm_settle(struct job_rt *j, const struct err_info *err)
{
	struct waiter *w = j->waiters;

	j->waiters = NULL;
	while (w) {
		struct waiter *next = w->next;

		w->fn(w->ctx, err, &j->pub, w->created, NULL, 0);
		free(w);
		w = next;
	}
}

/*
 * A release requested during programming failed: the submitters' job
 * became ACTIVE (their request succeeded), only the releasers get err.
 */
void jm_settle_failed_release(struct job_rt *j, const struct err_info *err)
{
	struct waiter *w = j->waiters;

	j->waiters = NULL;
	while (w) {
		struct waiter *next = w->next;

		w->fn(w->ctx, w->release ? err : NULL, &j->pub, w->created, NULL, 0);
		free(w);
		w = next;
	}
}

/*
 * Invariant 5: no further writes; the daemon reports why, saying what
 * happens next (daemon.c): a deposed replica (the fence refused the write)
 * ends its leader phase and follows; on etcd, once etcd answers again, the
 * leader phase starts again as after a crash; on SQLite only a restart
 * does, and that needs an operator.
 */
void jm_store_failed(struct jm *jm, const char *what, int rc)
{
	int level = LOG_CRIT;

	if (jm->not_serving)
		return;
	jm->not_serving = true;
	if (rc == -EPERM && st_replicated(jm->d.store)) {
		level = LOG_WARNING;
		snprintf(jm->not_serving_reason, sizeof(jm->not_serving_reason),
			 "the state store refused a write (%s): this replica is not the leader "
			 "any more; it serves no writes and follows the new leader",
			 what);
	} else if (st_replicated(jm->d.store)) {
		level = LOG_ERR;
		snprintf(jm->not_serving_reason, sizeof(jm->not_serving_reason),
			 "the state store failed (%s): ocsd serves no writes until etcd answers "
			 "again, then starts again as after a crash",
			 what);
	} else {
		snprintf(jm->not_serving_reason, sizeof(jm->not_serving_reason),
			 "the state store failed (%s): ocsd serves no writes until it is restarted",
			 what);
	}
	log_msg(level, "%s", jm->not_serving_reason);
	if (jm->d.events.store_failed)
		jm->d.events.store_failed(jm->d.events.ctx, jm->not_serving_reason);
}

/*
 * Moves j to state, stored first (invariant 5). The change is made in
 * memory even when the store refuses it, since what it records already
 * happened (a plan refused, devices changed); the job manager then stops
 * serving writes and recovery sets the store right at the next start.
 * Returns the store's answer (0, or why it refused: -EPERM when this
 * replica is not the leader any more).
 */
int jm_set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason)
{
	bool was_live = job_is_live(j);
	int rc;

	jm->n_state[j->pub.state]--;
	jm->n_state[state]++;
	j->pub.state = state;
	if (state != JM_PROGRAMMING && state != JM_PLANNING)
		j->admitted = false; /* its reservation ends with its transaction */
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", reason ? reason : "");
	j->pub.updated_ms = jm_now_ms(jm);
	/* a wave's outcome stored its jobs' states in one write (jm_prestore_states) */
	rc = j->prestored && j->prestored_state == state && !reason
		     ? 0
		     : st_job_set_state(jm->d.store, j->pub.id, jm_state_name(state), reason,
					j->pub.updated_ms);
	j->prestored = false;
	jm_track_live(jm, j, was_live);
	if (rc) {
		char what[200];

		snprintf(what, sizeof(what), "job %s: cannot store state %s: %s", j->pub.id,
			 jm_state_name(state), st_strerror(jm->d.store, rc));
		jm_store_failed(jm, what, rc);
	}
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	return rc;
}

void jm_mark_prestored(struct job_rt *const *jobs, const enum jm_state *states, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		jobs[k]->prestored = true;
		jobs[k]->prestored_state = states[k];
	}
}

void jm_prestore_states(struct jm *jm, struct job_rt *const *jobs, const enum jm_state *states,
			size_t n)
{
	int64_t now = jm_now_ms(jm);

	for (size_t k = 0; k < n; k++)
		jm->rows[k] =
			(struct st_job_state){jobs[k]->pub.id, jm_state_name(states[k]), NULL, now};
	if (n < 2 || st_job_set_states(jm->d.store, jm->rows, n) != 0)
		return; /* each job's own write tells */
	jm_mark_prestored(jobs, states, n);
}

void jm_set_holding(struct jm *jm, struct job_rt *j, bool holding)
{
	bool was_live = job_is_live(j);

	j->pub.holding = holding;
	jm_track_live(jm, j, was_live);
}

/*
 * Fails j and answers its waiters with err. When the store refuses FAILED
 * because this replica is not the leader any more, the job stays accepted
 * in the store and the new leader runs it (jm_recover): its waiters are
 * told that, never err's "nothing changed", which would not be true.
 */
void jm_fail_job(struct jm *jm, struct job_rt *j, const struct err_info *err)
{
	char reason[sizeof(err->field) + sizeof(err->message) + 4];
	struct err_info deposed;

	snprintf(reason, sizeof(reason), "%s%s%s", err->field, err->field[0] ? ": " : "",
		 err->message);
	if (jm_set_state(jm, j, JM_FAILED, reason) == -EPERM) {
		err_set(&deposed, ERR_UNAVAILABLE, "",
			"not the leader any more: job %s stays accepted in the store and the "
			"new leader runs it; ask the leader (GetJob)",
			j->pub.id);
		jm_settle(j, &deposed);
		return;
	}
	jm_settle(j, err);
}

/* The refusal every write gets once the store failed; true when refused. */
bool jm_refuse_write(const struct jm *jm, jm_answer_fn answer, void *ctx)
{
	struct err_info err;

	if (!jm->not_serving)
		return false;
	err_set(&err, ERR_UNAVAILABLE, "", "%s; nothing changed", jm->not_serving_reason);
	answer(ctx, &err, NULL, false, NULL, 0);
	return true;
}

/*
 * Stores the figures of the plan j is about to be programmed with, so that
 * they outlive a restart (issue 14 #14). Before any device is touched: a
 * failed write refuses the job (UNAVAILABLE, nothing changed). 0 or -1
 * with err set.
 */
int jm_store_figures(struct jm *jm, struct job_rt *j, struct err_info *err)
{
	char *text = jm_figures_encode(&j->pub.figures);
	struct st_job_state next = {j->pub.id, jm_state_name(JM_PROGRAMMING), NULL, jm_now_ms(jm)};
	int rc = text ? st_figures_put_states(jm->d.store, (const char *const *)&text, &next, 1)
		      : -ENOMEM;

	free(text);
	if (rc == 0) {
		/* its jm_set_state(PROGRAMMING) writes nothing more */
		j->prestored = true;
		j->prestored_state = JM_PROGRAMMING;
		return 0;
	}
	err_set(err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "",
		"cannot store the plan's figures (%s); %s", strerror(-rc), st_changed_note(rc));
	return -1;
}

/* The list of tasks whose caller may go away (jm_cancel_gone). */
void jm_answering_add(struct jm *jm, struct jp_task *t)
{
	t->next_answering = jm->answering;
	jm->answering = t;
}

void jm_answering_del(struct jm *jm, struct jp_task *t)
{
	for (struct jp_task **p = &jm->answering; *p; p = &(*p)->next_answering) {
		if (*p == t) {
			*p = t->next_answering;
			return;
		}
	}
}

void jm_cancel_gone(struct jm *jm, bool (*gone)(void *ctx))
{
	for (struct jp_task *t = jm->answering; t; t = t->next_answering)
		if (!atomic_load(&t->cancel) && gone(t->ctx)) {
			atomic_store(&t->cancel, true);
			log_msg(LOG_INFO, "%s %s: the caller went away; its planning stops",
				t->dry ? "dry run of" : "search for job", t->job_id);
		}
}

bool jm_answering(const struct jm *jm)
{
	return jm->answering != NULL;
}
