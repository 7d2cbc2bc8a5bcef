/*
 * jobs.c - implementation of jobs.h: the job table and the job state
 * machine. This file is the only code that changes a job's state; the
 * stages it drives (planning in jobs_plan.c with the job's kind, the
 * transaction driver txn.c) only return results to it.
 *
 * Job state machine (all transitions on the loop thread):
 *
 *   submit --> PENDING --(stored)--> PLANNING --(plan on pool)--> plan_done
 *   plan_done: stale snapshot ............ PLANNING again (re-plan)
 *              refused / does not fit .... FAILED  (nothing touched)
 *              fits ....................... PROGRAMMING, queued
 *   pump (one transaction at a time):
 *              snapshot changed since plan  PLANNING again
 *              intent not stored .......... FAILED (release: stays ACTIVE)
 *              started .................... (transaction running)
 *   txn_done:  confirmed .................. ACTIVE   (release: RELEASED)
 *              rolled back / refused ...... FAILED   (release: stays ACTIVE)
 *              rollback unproven .......... FAILED   (release: FAILED)
 *   release:   ACTIVE --> RELEASING, queued --> transaction --> RELEASED
 *              PENDING/PLANNING/FAILED --> RELEASED at once (nothing on devices)
 *              PROGRAMMING: released after its transaction
 *
 * Drains (devices.c holds the flags): a drained device gets no new
 * circuits. Pinned plans see blockers on its free ports; a plan allowed to
 * move other jobs' circuits that puts a new cross-connect on a drained
 * device is discarded and the job planned pinned instead (jobs_plan.c).
 *
 * A parallelism spec is first searched into a leaf demand on the pool
 * (kind_parallelism.c, search_only) before the job exists: a refused spec
 * creates no job. The job then keeps that leaf demand, so a re-plan on a
 * stale snapshot never searches again. A job restored from the store has
 * only its request: its first plan searches again (deterministic for a
 * seed without a time budget), in the same pool task as its leaf plan.
 *
 * Ring jobs (OCSTrx ring domains, kind_ring.c) follow the same machine on
 * the ring state (rings.h) instead of the circuits: the plan is a set of
 * rings and bundle settings, its snapshot the ring state's generation. A
 * node fault (jm_mark_node) is stored first; then the ring holding it is
 * repaired (jobs_ring.c) in a transaction queued ahead of everything else,
 * while its job stays ACTIVE:
 *
 *   ACTIVE --fault--> (repair queued first) --txn--> ACTIVE, RingEvent
 *                                              `--> rolled back: logged, the
 *                                                   ring keeps the node until
 *                                                   the next fault or restart
 *
 * Invariants:
 *  1. At most one transaction runs; its intent is stored before any device
 *     is touched (a ring transaction's: before any device is confirmed,
 *     while the devices prepare) and its outcome before the next starts
 *     (txn.c).
 *  2. A plan is applied only if the circuits did not change since its
 *     snapshot (fs_generation), so plans never overlap.
 *  3. Every plan passes l2_check() on the whole fabric before it is queued,
 *     and the transaction re-checks the read-back state with it.
 *  4. A job with waiters is answered exactly once per waiter, when it
 *     settles (ACTIVE, RELEASED, FAILED) or is refused.
 *  5. Every state change is stored before it is published. A store write
 *     that fails where the operation can still be refused refuses it
 *     (UNAVAILABLE, nothing changed); where it cannot (the devices already
 *     changed), the job manager stops serving writes (jm_serving) and tells
 *     the daemon, which reports NOT_SERVING with the reason.
 *  6. No state change allocates: the queue is intrusive and the live-job
 *     array has room for every job, reserved when the job is created.
 *  7. Job lookups by id and by idempotency key are hash lookups; work per
 *     plan grows with the live jobs, not with the finished ones.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "jobs_util.h"
#include "log.h"

/* A plan whose snapshot went stale this often in a row is refused. */
#define JM_MAX_REPLANS 16

struct jm {
	struct jm_deps d;
	const struct ocs_fabric *f;
	struct job_rt **jobs; /* every job, in creation order */
	size_t n_jobs, cap_jobs;
	struct job_rt **live; /* jobs that hold leaves (jl_holds_leaves); room for n_jobs */
	size_t n_live;
	struct strmap by_id, by_key;
	size_t n_state[JM_FAILED + 1];		/* jobs in each state (metrics, without a scan) */
	struct job_rt *queue_head, *queue_tail; /* waiting for a transaction, FIFO */
	struct job_rt *txn_job;			/* the job whose transaction runs */
	bool stopping;				/* no new transaction starts */
	struct jp_task *answering; /* dry runs and searches before a job exists (cancellable) */
	struct {
		bool running; /* a transaction of no job (jm_external_txn) */
		txn_done_fn done;
		void *arg;
		char job_id[72]; /* the name its intent is stored under */
	} external;
	unsigned long plan_seq; /* last plan started */
	bool not_serving;	/* a store write failed: no further writes */
	char not_serving_reason[600];
	/*
	 * Ring domains: nodes marked healthy again whose bundles still hold
	 * what they had when they failed (a faulty node is never programmed),
	 * set back to loopback by transactions of this pseudo job (never in
	 * the table; id JM_RESET_JOB), queued like a repair.
	 */
	struct job_rt reset;
	int *reset_nodes;
	size_t n_reset, cap_reset;
};

#define JM_RESET_JOB "ocsd-node-reset"

static int64_t now_ms(const struct jm *jm)
{
	return clk_wall_ms(jm->d.clock);
}

static void free_job(struct job_rt *j)
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

static struct job_rt *find_job(const struct jm *jm, const char *id)
{
	return strmap_get(&jm->by_id, id);
}

const struct jm_job *jm_find(const struct jm *jm, const char *id)
{
	struct job_rt *j = find_job(jm, id);

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
}

/* ---- the table ---- */

/* Adds j to the table and the indexes, with room in `live` for it. 0 or -ENOMEM. */
static int table_add(struct jm *jm, struct job_rt *j)
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

/* Keeps `live` in step with j's state (never allocates: invariant 6). */
static void track_live(struct jm *jm, struct job_rt *j, bool was_live)
{
	bool is_live = jl_holds_leaves(j->pub.state);

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
	struct job_rt *j = find_job(jm, id);
	size_t i;

	if (!j)
		return -ENOENT;
	if ((j->pub.state != JM_RELEASED && j->pub.state != JM_FAILED) || j->waiters || j->queued)
		return -EBUSY;
	for (i = 0; i < jm->n_jobs && jm->jobs[i] != j; i++)
		;
	memmove(&jm->jobs[i], &jm->jobs[i + 1], (jm->n_jobs - i - 1) * sizeof(*jm->jobs));
	jm->n_jobs--;
	jm->n_state[j->pub.state]--;
	strmap_del(&jm->by_id, j->pub.id);
	if (j->pub.key[0] && strmap_get(&jm->by_key, j->pub.key) == j)
		strmap_del(&jm->by_key, j->pub.key);
	free_job(j);
	return 0;
}

/* ---- the queue of transactions (intrusive: never fails) ---- */

/* A repair goes ahead of every queued job (never fails either). */
static void enqueue_first(struct jm *jm, struct job_rt *j)
{
	if (j->queued)
		return;
	j->queued = true;
	j->next_queued = jm->queue_head;
	jm->queue_head = j;
	if (!jm->queue_tail)
		jm->queue_tail = j;
}

static void enqueue(struct jm *jm, struct job_rt *j)
{
	if (j->queued)
		return;
	j->queued = true;
	j->next_queued = NULL;
	if (jm->queue_tail)
		jm->queue_tail->next_queued = j;
	else
		jm->queue_head = j;
	jm->queue_tail = j;
}

static struct job_rt *dequeue(struct jm *jm)
{
	struct job_rt *j = jm->queue_head;

	if (!j)
		return NULL;
	jm->queue_head = j->next_queued;
	if (!jm->queue_head)
		jm->queue_tail = NULL;
	j->queued = false;
	j->next_queued = NULL;
	return j;
}

/* ---- answering and state changes ---- */

static int add_waiter(struct job_rt *j, jm_answer_fn fn, void *ctx, bool created)
{
	struct waiter *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct waiter){fn, ctx, created, false, j->waiters};
	j->waiters = w;
	return 0;
}

/* Answers every waiter of j (err NULL: success). */
static void settle(struct job_rt *j, const struct jm_error *err)
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
static void settle_failed_release(struct job_rt *j, const struct jm_error *err)
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

/* Invariant 5: no further writes; the daemon reports why. */
static void store_failed(struct jm *jm, const char *what)
{
	if (jm->not_serving)
		return;
	jm->not_serving = true;
	snprintf(jm->not_serving_reason, sizeof(jm->not_serving_reason),
		 "the state store failed (%s): ocsd serves no writes until it is restarted", what);
	log_msg(LOG_CRIT, "%s", jm->not_serving_reason);
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
static int set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason)
{
	bool was_live = jl_holds_leaves(j->pub.state);
	int rc;

	jm->n_state[j->pub.state]--;
	jm->n_state[state]++;
	j->pub.state = state;
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", reason ? reason : "");
	j->pub.updated_ms = now_ms(jm);
	rc = st_job_set_state(jm->d.store, j->pub.id, jm_state_name(state), reason,
			      j->pub.updated_ms);
	track_live(jm, j, was_live);
	if (rc) {
		char what[200];

		snprintf(what, sizeof(what), "job %s: cannot store state %s: %s", j->pub.id,
			 jm_state_name(state), st_strerror(jm->d.store, rc));
		store_failed(jm, what);
	}
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	return rc;
}

/*
 * Fails j and answers its waiters with err. When the store refuses FAILED
 * because this replica is not the leader any more, the job stays accepted
 * in the store and the new leader runs it (jm_recover): its waiters are
 * told that, never err's "nothing changed", which would not be true.
 */
static void fail_job(struct jm *jm, struct job_rt *j, const struct jm_error *err)
{
	char reason[sizeof(err->field) + sizeof(err->message) + 4];
	struct jm_error deposed;

	snprintf(reason, sizeof(reason), "%s%s%s", err->field, err->field[0] ? ": " : "",
		 err->message);
	if (set_state(jm, j, JM_FAILED, reason) == -EPERM) {
		jm_set_error(&deposed, JM_UNAVAILABLE, "",
			     "not the leader any more: job %s stays accepted in the store and the "
			     "new leader runs it; ask the leader (GetJob)",
			     j->pub.id);
		settle(j, &deposed);
		return;
	}
	settle(j, err);
}

/* The refusal every write gets once the store failed; true when refused. */
static bool refuse_write(const struct jm *jm, jm_answer_fn answer, void *ctx)
{
	struct jm_error err;

	if (!jm->not_serving)
		return false;
	jm_set_error(&err, JM_UNAVAILABLE, "", "%s; nothing changed", jm->not_serving_reason);
	answer(ctx, &err, NULL, false, NULL, 0);
	return true;
}

/* ---- planning ---- */

static const struct jm_kind *kind_of(const struct jm_workload *wl)
{
	return wl ? &jm_kind_parallelism : &jm_kind_leaf;
}

static const struct jm_kind *spec_kind(const struct jm_spec *spec)
{
	return spec->ring ? &jm_kind_ring : spec->rail ? &jm_kind_rail : kind_of(spec->workload);
}

/* Ring domains: drained nodes (device id = node), NULL when none is. */
static const bool *drained_nodes(const struct jm *jm)
{
	return jm->d.devs && dev_n_drained(jm->d.devs) ? dev_drained_mask(jm->d.devs) : NULL;
}

/* What a plan's snapshot is compared with: the ring state or the circuits. */
static unsigned long current_gen(const struct jm *jm)
{
	return jm->d.rings ? rg_generation(jm->d.rings) : fs_generation(jm->d.fs);
}

/*
 * The inputs of a global re-plan (allow_moving_other_jobs): every job that
 * owns configured cross-connects, with its demand. When one's demand is
 * not known (a parallelism job restored from the store, not planned since)
 * its circuits could not be planned again: the job is planned pinned.
 * 0 or -ENOMEM.
 */
static int prepare_replan(struct jm *jm, struct jp_task *t, const char *self)
{
	size_t n_others = 0, at = 0;

	t->names = malloc((jm->n_live + 2) * sizeof(*t->names));
	t->conf_owner = malloc((t->n_configured ? t->n_configured : 1) * sizeof(*t->conf_owner));
	if (!t->names || !t->conf_owner)
		return -ENOMEM;
	snprintf(t->names[0], sizeof(*t->names), "%s", self);
	t->n_names = 1;
	for (size_t i = 0; i < t->n_configured; i++) {
		const char *owner = fs_at(jm->d.fs, i)->job_id;
		size_t k = i && !strcmp(owner, t->names[t->conf_owner[i - 1]])
				   ? (size_t)t->conf_owner[i - 1]
				   : 0;

		while (k < t->n_names && strcmp(t->names[k], owner) != 0)
			k++;
		if (k == t->n_names) {
			const struct job_rt *o = find_job(jm, owner);

			if (!o || o->pub.n_demand == 0 || k > jm->n_live) {
				log_msg(LOG_NOTICE,
					"job %s: the demand of job %s is not known yet; planned "
					"without moving other jobs' circuits",
					self, owner);
				t->replan = false;
				return 0;
			}
			memcpy(t->names[k], o->pub.id, sizeof(*t->names));
			t->n_names++;
			n_others += o->pub.n_demand;
		}
		t->conf_owner[i] = (int)k;
	}
	t->others = malloc((n_others ? n_others : 1) * sizeof(*t->others));
	t->others_owner = malloc((n_others ? n_others : 1) * sizeof(*t->others_owner));
	if (!t->others || !t->others_owner)
		return -ENOMEM;
	for (size_t k = 1; k < t->n_names; k++) {
		const struct job_rt *o = find_job(jm, t->names[k]);

		for (size_t d = 0; d < o->pub.n_demand; d++) {
			t->others[at] = o->pub.demand[d];
			t->others_owner[at++] = (int)k;
		}
	}
	t->n_others = at;
	return 0;
}

static void plan_done(struct pool_task *pt);
static void plan_work(struct pool_task *pt)
{
	jp_work(OCSD_CONTAINER_OF(pt, struct jp_task, pool));
}

/*
 * What a plan must keep clear of besides the configured circuits: the
 * unowned two-way circuits found on the devices (pinned) and the devices
 * that take no new circuit, drained or blocked by drift (drift.h).
 * *blocked is NULL when no device is. 0 or -ENOMEM (nothing allocated).
 */
static int drift_view(const struct jm *jm, struct ocs_xc **unowned, size_t *n_unowned,
		      bool **blocked)
{
	int n = jm->d.cfg->n_devices;
	bool any = false;

	*unowned = NULL;
	*n_unowned = 0;
	*blocked = calloc((size_t)n + 1, sizeof(**blocked));
	if (!*blocked)
		return -ENOMEM;
	if (dev_n_drained(jm->d.devs))
		memcpy(*blocked, dev_drained_mask(jm->d.devs), (size_t)n * sizeof(**blocked));
	if (jm->d.drift && dr_planner_view(jm->d.drift, jm->d.fs, unowned, n_unowned, *blocked)) {
		free(*blocked);
		*blocked = NULL;
		return -ENOMEM;
	}
	for (int i = 0; i < n && !any; i++)
		any = (*blocked)[i];
	if (!any) {
		free(*blocked);
		*blocked = NULL;
	}
	return 0;
}

/* A task planning for `self` with everything it reads copied. NULL on ENOMEM. */
static struct jp_task *new_task(struct jm *jm, const struct jm_kind *kind, const char *self,
				const char *planner, bool replan, const struct lc_demand *demand,
				size_t n_demand, const struct jm_workload *wl,
				const struct jm_figures *delta, const struct jm_ring_request *ring)
{
	struct jp_task *t;
	struct ocs_xc *unowned = NULL;
	size_t n_unowned = 0;
	bool *blocked = NULL;

	if (kind->rings) {
		uint8_t *use = rg_use_snapshot(jm->d.rings, self);

		if (use)
			jr_mask_drained(jm->d.rings, drained_nodes(jm), use);

		t = use ? jp_ring_task_new(kind, &jm->d.cfg->ring, use, rg_generation(jm->d.rings),
					   self, ring)
			: NULL;
		if (t) {
			t->pool.work = plan_work;
			t->pool.done = plan_done;
			t->owner = jm;
			t->clock = jm->d.clock;
		}
		return t;
	}
	if (drift_view(jm, &unowned, &n_unowned, &blocked) != 0)
		return NULL;
	t = jp_task_new(kind, jm->f, jm->d.fs, unowned, n_unowned, blocked, jm->d.cfg->n_devices,
			self, planner, replan, demand, n_demand, wl, delta);
	free(unowned);
	free(blocked);
	if (!t)
		return NULL;
	t->pool.work = plan_work;
	t->pool.done = plan_done;
	/* A DELTA search may take seconds: the pool keeps room for leaf plans. */
	t->pool.heavy = wl && n_demand == 0;
	t->owner = jm;
	t->clock = jm->d.clock;
	t->solver_pool = jm->d.solver_pool;
	if (jl_others_usage(jm->live, jm->n_live, self ? self : "", &t->usage, &t->n_usage) != 0 ||
	    (t->replan && prepare_replan(jm, t, self ? self : "") != 0)) {
		jp_task_free(t);
		return NULL;
	}
	return t;
}

static void pump(struct jm *jm);

static void start_planning(struct jm *jm, struct job_rt *j)
{
	struct jp_task *t;
	struct jm_error err;
	int rc;

	if (j->kind->gpus_only) {
		/* Nothing to plan (rail jobs): an empty change set, programmed in turn. */
		jp_change_clear(&j->change);
		j->plan_gen = current_gen(jm);
		set_state(jm, j, JM_PROGRAMMING, NULL);
		enqueue(jm, j);
		pump(jm);
		return;
	}
	t = new_task(jm, j->kind, j->pub.id, j->pub.planner, j->pub.allow_move, j->pub.demand,
		     j->pub.n_demand, j->pub.workload, &j->pub.figures,
		     j->pub.is_ring ? &j->pub.ring : NULL);
	if (j->pub.state != JM_PLANNING)
		set_state(jm, j, JM_PLANNING, NULL);
	if (!t) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		fail_job(jm, j, &err);
		return;
	}
	t->report_search |= j->search_unreported;
	j->search_unreported = false;
	t->seq = j->plan_seq = ++jm->plan_seq;
	rc = jm->d.plan_submit(jm->d.plan_ctx, &t->pool);
	if (rc) {
		jp_task_free(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			     strerror(-rc));
		fail_job(jm, j, &err);
	}
}

static void submit_searched(struct jm *jm, struct jp_task *t);

static void report_plan_time(struct jm *jm, const struct jp_task *t)
{
	if (t->kind->rings) {
		if (t->fig.has_ring && jm->d.events.plan_finished)
			jm->d.events.plan_finished(jm->d.events.ctx, t->fig.ring.orchestration,
						   (double)t->fig.plan_us / 1e6);
		return;
	}
	if (t->rc == 0 && t->plan && jm->d.events.plan_finished)
		jm->d.events.plan_finished(jm->d.events.ctx, t->planner,
					   (t->plan->plan_ms + t->plan->realize_ms +
					    (t->report_search ? t->delta.plan_ms : 0)) /
						   1000.0);
}

static void answer_dry_run(struct jp_task *t)
{
	struct jm_job shadow = {0};

	if (t->kind->rings) {
		shadow.is_ring = true;
		shadow.ring = t->ring;
		shadow.figures = t->fig;
		shadow.plan_rings = t->change.rings;
		shadow.n_plan_rings = t->change.n_rings;
		if (!t->refused || t->err.status == JM_EXHAUSTED)
			t->answer(t->ctx, NULL, &shadow, false, NULL, 0);
		else
			t->answer(t->ctx, &t->err, NULL, false, NULL, 0);
		return;
	}
	if (t->plan && (!t->refused || t->err.status == JM_EXHAUSTED)) {
		/* A dry run reports what does not fit as figures, not as an error. */
		shadow.figures = t->fig;
		t->answer(t->ctx, NULL, &shadow, false, t->added, t->n_added);
	} else {
		t->answer(t->ctx, &t->err, NULL, false, NULL, 0);
	}
}

/*
 * Stores the figures of the plan j is about to be programmed with, so that
 * they outlive a restart (issue 14 #14). Before any device is touched: a
 * failed write refuses the job (UNAVAILABLE, nothing changed). 0 or -1
 * with err set.
 */
static int store_figures(struct jm *jm, struct job_rt *j, struct jm_error *err)
{
	char *text = jm_figures_encode(&j->pub.figures);
	int rc = text ? st_figures_put(jm->d.store, j->pub.id, text) : -ENOMEM;

	free(text);
	if (rc == 0)
		return 0;
	jm_set_error(err, rc == -ENOMEM ? JM_INTERNAL : JM_UNAVAILABLE, "",
		     "cannot store the plan's figures (%s); nothing changed", strerror(-rc));
	return -1;
}

/* The list of tasks whose caller may go away (jm_cancel_gone). */
static void answering_add(struct jm *jm, struct jp_task *t)
{
	t->next_answering = jm->answering;
	jm->answering = t;
}

static void answering_del(struct jm *jm, struct jp_task *t)
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

static void plan_done(struct pool_task *pt)
{
	struct jp_task *t = OCSD_CONTAINER_OF(pt, struct jp_task, pool);
	struct jm *jm = t->owner;
	struct job_rt *j;
	struct jm_error err = {0};
	bool planned = t->kind->rings ? !t->refused : !t->kind_rc && t->rc == 0 && t->plan;

	if (t->dry || t->search_only)
		answering_del(jm, t);

	if (t->search_only) {
		submit_searched(jm, t);
		jp_task_free(t);
		return;
	}
	report_plan_time(jm, t);
	if (t->unowned_fallback)
		log_msg(LOG_NOTICE,
			"%s %s: the plan moving other jobs' circuits needed ports of circuits no "
			"job owns; planned without moving them",
			t->dry ? "dry run of" : "job", t->job_id);
	if (t->drain_fallback)
		log_msg(LOG_NOTICE,
			"%s %s: the plan moving other jobs' circuits needed a drained device; "
			"planned without moving them",
			t->dry ? "dry run of" : "job", t->job_id);
	if (t->dry) {
		answer_dry_run(t);
		jp_task_free(t);
		return;
	}
	j = find_job(jm, t->job_id);
	if (!j || j->pub.state != JM_PLANNING || j->plan_seq != t->seq) {
		/* released while planning, or planned again since */
		jp_task_free(t);
		return;
	}
	if (t->has_delta && !t->kind_rc && j->pub.n_demand == 0 && t->n_demand) {
		/* Keep what the search found: re-plans start from it. */
		struct lc_demand *d = malloc(t->n_demand * sizeof(*d));

		if (d) {
			memcpy(d, t->demand, t->n_demand * sizeof(*d));
			free(j->pub.demand);
			j->pub.demand = d;
			j->pub.n_demand = t->n_demand;
			j->pub.figures.has_delta = true;
			j->pub.figures.delta = t->delta;
		}
	}
	if (t->gen != current_gen(jm) && planned && ++j->replans <= JM_MAX_REPLANS) {
		jp_task_free(t);
		start_planning(jm, j); /* the snapshot went stale: plan again */
		return;
	}
	if (t->gen != current_gen(jm) && planned)
		jm_set_error(&err, JM_UNAVAILABLE, "",
			     "the fabric changed during each of %d plans; try again",
			     JM_MAX_REPLANS);
	else if (t->refused)
		err = t->err;
	if (planned || (t->kind->rings && t->fig.has_ring)) {
		jm_figures_clear(&j->pub.figures);
		j->pub.figures = t->fig;
		t->fig = (struct jm_figures){0};
	}
	if (err.status != JM_OK) {
		jp_task_free(t);
		fail_job(jm, j, &err);
		return;
	}
	if (store_figures(jm, j, &err) != 0) {
		jp_task_free(t);
		fail_job(jm, j, &err);
		return;
	}
	jp_change_clear(&j->change);
	j->change = t->change;
	t->change = (struct jp_change){0};
	j->plan_gen = t->gen;
	jp_task_free(t);
	set_state(jm, j, JM_PROGRAMMING, NULL);
	enqueue(jm, j);
	pump(jm);
}

/* ---- transactions ---- */

static void txn_done(void *arg, const struct txn_outcome *o);

/*
 * Starts a ring job's transaction: its plan, a repair (j->change set by
 * queue_repair) or its release (every node back to loopback). The rings as
 * they were are kept for the ring events. -errno with why set when it did
 * not start.
 */
static int start_ring_txn(struct jm *jm, struct job_rt *j, bool release,
			  const struct st_fault *fault, char *why, size_t why_len)
{
	struct txn_change c = {0};
	size_t n_prev = 0;
	const struct rg_ring *prev = rg_job_rings(jm->d.rings, j->pub.id, &n_prev);

	if (release) {
		jp_change_clear(&j->change);
		if (jr_release_change(jm->d.rings, j->pub.id, &j->change) != 0) {
			snprintf(why, why_len, "out of memory");
			return -ENOMEM;
		}
	}
	rg_rings_free(j->prev_rings, j->n_prev_rings);
	j->prev_rings = rg_rings_dup(prev, n_prev);
	j->n_prev_rings = j->prev_rings ? n_prev : 0;
	if (!j->prev_rings) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < j->change.n_rings; i++)
		if (!j->change.rings[i].changed_ms)
			j->change.rings[i].changed_ms = now_ms(jm);
	c = (struct txn_change){.job_id = j->pub.id,
				.release = release,
				.ring = true,
				.rings = j->change.rings,
				.n_rings = j->change.n_rings,
				.bundles = j->change.bundles,
				.n_bundles = j->change.n_bundles,
				.fault = fault};
	return jm->d.txn_start(jm->d.txn_ctx, &c, txn_done, jm, why, why_len);
}

/* Starts j's transaction: its plan's change set, or the removal of its circuits. */
static void start_txn(struct jm *jm, struct job_rt *j)
{
	bool release = j->pub.state == JM_RELEASING;
	struct txn_change c = {.job_id = j->pub.id,
			       .release = release,
			       .removals = j->change.removals,
			       .n_removals = j->change.n_removals,
			       .additions = j->change.additions,
			       .n_additions = j->change.n_additions,
			       .links = j->change.links,
			       .n_links = j->change.n_links};
	struct ocs_xc *mine = NULL;
	struct jm_error err;
	char why[400] = "";
	int rc;

	if (j->kind->rings) {
		jm->txn_job = j;
		rc = start_ring_txn(jm, j, release, NULL, why, sizeof(why));
		if (rc == 0)
			return;
		jm->txn_job = NULL;
		jm_set_error(&err, rc == -ENOMEM ? JM_INTERNAL : JM_UNAVAILABLE, "", "%s", why);
		if (j->repair) {
			log_msg(LOG_ERR, "job %s: the ring repair could not start: %s", j->pub.id,
				why);
			j->repair = false;
			j->repair_failed = true;
			jp_change_clear(&j->change);
		} else if (release) {
			set_state(jm, j, JM_ACTIVE, why);
			settle(j, &err);
		} else {
			fail_job(jm, j, &err);
		}
		return;
	}
	if (release) {
		size_t n = 0;

		mine = fs_job_xcs(jm->d.fs, j->pub.id, &n);
		c = (struct txn_change){
			.job_id = j->pub.id, .release = true, .removals = mine, .n_removals = n};
		if (!mine) {
			jm_set_error(&err, JM_INTERNAL, "", "out of memory");
			set_state(jm, j, JM_ACTIVE, err.message);
			settle(j, &err);
			return;
		}
	}
	jm->txn_job = j;
	rc = jm->d.txn_start(jm->d.txn_ctx, &c, txn_done, jm, why, sizeof(why));
	free(mine);
	if (rc == 0)
		return;
	jm->txn_job = NULL;
	jm_set_error(&err, rc == -ENOMEM ? JM_INTERNAL : JM_UNAVAILABLE, "", "%s", why);
	if (release) {
		set_state(jm, j, JM_ACTIVE, why);
		settle(j, &err);
	} else {
		fail_job(jm, j, &err);
	}
}

/* Ring events for every ring of j that changed in its confirmed transaction. */
static void publish_rings(struct jm *jm, struct job_rt *j, bool release, bool repair,
			  const struct txn_outcome *o)
{
	size_t n = 0;
	const struct rg_ring *now = rg_job_rings(jm->d.rings, j->pub.id, &n);
	int64_t reaction = repair && j->fault_us ? o->finished_us - j->fault_us : 0;

	if (!jm->d.events.ring_changed)
		return;
	if (release) {
		for (size_t i = 0; i < j->n_prev_rings; i++) {
			struct rg_ring r = j->prev_rings[i];

			r.last_change = RG_RELEASED;
			jm->d.events.ring_changed(jm->d.events.ctx, &r, r.nodes, r.m, 0, 0);
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct rg_ring *old = NULL;

		for (size_t k = 0; k < j->n_prev_rings && !old; k++)
			if (j->prev_rings[k].index == now[i].index)
				old = &j->prev_rings[k];
		if (old && old->m == now[i].m && old->last_change == now[i].last_change &&
		    (old->m == 0 ||
		     !memcmp(old->nodes, now[i].nodes, (size_t)old->m * sizeof(int))))
			continue; /* unchanged */
		jm->d.events.ring_changed(jm->d.events.ctx, &now[i], old ? old->nodes : NULL,
					  old ? old->m : 0, reaction, repair ? o->engine_us : 0);
	}
}

static void queue_repairs(struct jm *jm, struct job_rt *j);
static void queue_reset(struct jm *jm);

/* The end of a ring repair (or node reset): the job stays ACTIVE whatever happened. */
static void repair_done(struct jm *jm, struct job_rt *j, const struct txn_outcome *o)
{
	j->repair = false;
	if (j == &jm->reset && o->result != TXN_CONFIRMED) {
		/* the nodes go back on the list, tried again by jm_retry_repairs */
		for (size_t i = 0; i < j->change.n_bundles; i++)
			if (j->change.bundles[i].bundle == 0 &&
			    jm->n_reset < (size_t)rg_nodes(jm->d.rings))
				jm->reset_nodes[jm->n_reset++] = j->change.bundles[i].node;
	}
	jp_change_clear(&j->change);
	if (o->result == TXN_CONFIRMED) {
		publish_rings(jm, j, false, true, o);
		queue_repairs(jm, j); /* another of its rings may hold a faulty node */
	} else {
		j->repair_failed = true;
		log_msg(LOG_ERR,
			"job %s: the ring repair was not applied (%s): its ring keeps the "
			"faulty node until the next fault report or restart",
			j->pub.id, o->message ? o->message : "");
	}
	pump(jm);
}

static void txn_done(void *arg, const struct txn_outcome *o)
{
	struct jm *jm = arg;
	struct job_rt *j = jm->txn_job;
	bool release = j->pub.state == JM_RELEASING;
	struct jm_error err = {0};

	jm->txn_job = NULL;
	if (j->kind->rings && o->store_failed)
		store_failed(jm, o->store_error);
	if (j->kind->rings && jm->d.events.transaction_done && o->txn_id)
		jm->d.events.transaction_done(jm->d.events.ctx, j->pub.id, o);
	if (j->kind->rings && j->repair) {
		repair_done(jm, j, o);
		return;
	}
	if (j->kind->rings && o->result == TXN_CONFIRMED)
		publish_rings(jm, j, release, false, o);
	if (j->kind->rings) {
		/* what follows is the generic part; store and events are done */
		jp_change_clear(&j->change);
		goto settle_state;
	}
	if (o->store_failed)
		store_failed(jm, o->store_error);
	if (o->result == TXN_CONFIRMED &&
	    jl_apply(jm->live, jm->n_live, j, release ? NULL : j->change.links,
		     release ? 0 : j->change.n_links) != 0)
		/* the store has the links: the next start loads them */
		store_failed(jm, "out of memory while applying a plan's leaf-spine links");
	jp_change_clear(&j->change);
	if (jm->d.events.transaction_done && o->txn_id)
		jm->d.events.transaction_done(jm->d.events.ctx, j->pub.id, o);
settle_state:
	if (o->result == TXN_ROLLED_BACK || o->result == TXN_REFUSED)
		/* said once: the driver's message usually says it already */
		jm_set_error(&err, JM_UNAVAILABLE, "", "devices: %s%s; nothing changed", o->message,
			     strstr(o->message, "rolled back") ? ""
							       : "; every device was rolled back");
	else if (o->result == TXN_FAILED)
		jm_set_error(&err, JM_INTERNAL, "",
			     "devices: %s; a rollback could not be proven (%zu device(s)): the "
			     "fabric needs reconciliation",
			     o->message, o->rollback_failures);
	if (release && o->result == TXN_CONFIRMED) {
		set_state(jm, j, JM_RELEASED, NULL);
		settle(j, NULL);
	} else if (release) {
		set_state(jm, j, o->result == TXN_FAILED ? JM_FAILED : JM_ACTIVE, err.message);
		if (o->result == TXN_FAILED)
			settle(j, &err);
		else
			settle_failed_release(j, &err);
	} else if (o->result == TXN_CONFIRMED) {
		set_state(jm, j, JM_ACTIVE, NULL);
		if (j->release_requested) {
			/* Released during programming: every waiter (the submitter
			 * too) is answered when the release settles, with the job's
			 * final state, never with RELEASING. */
			set_state(jm, j, JM_RELEASING, NULL);
			enqueue(jm, j);
		} else {
			settle(j, NULL);
		}
	} else {
		fail_job(jm, j, &err);
	}
	if (j->kind->rings && j->pub.state == JM_ACTIVE)
		queue_repairs(jm, j); /* a node failed while it was programmed */
	pump(jm);
}

/* ---- ring repairs ---- */

/*
 * Queues the repair of the first ring of j (ACTIVE, no transaction of its
 * own queued or running) that holds a faulty node, ahead of all other
 * work. The repair is computed here, on the loop (hbd_repair is a bypass
 * or one ring's re-placement: microseconds), so that the reaction to a
 * fault does not wait behind the planner queue.
 */
static void queue_repairs(struct jm *jm, struct job_rt *j)
{
	const struct rg_ring *ring;
	enum rg_change kind;
	int failed = -1, rc;

	if (!jm->d.rings || !j->kind->rings || j->pub.state != JM_ACTIVE || j->repair ||
	    j->queued || jm->txn_job == j || j->repair_failed)
		return;
	ring = jr_broken_ring(jm->d.rings, j->pub.id, &failed);
	if (!ring)
		return;
	jp_change_clear(&j->change);
	rc = jr_repair_change(jm->d.rings, drained_nodes(jm), ring, failed, &j->pub.ring,
			      now_ms(jm), &j->change, &kind);
	if (rc) {
		log_msg(LOG_ERR, "job %s: cannot repair ring %d after node %d failed: %s",
			j->pub.id, ring->index, failed, strerror(-rc));
		jp_change_clear(&j->change);
		j->repair_failed = true;
		return;
	}
	log_msg(LOG_NOTICE, "job %s: ring %d lost node %d: %s", j->pub.id, ring->index, failed,
		st_ring_change_name(kind));
	j->repair = true;
	enqueue_first(jm, j);
}

/*
 * Queues the reset of the healed nodes on the list (healthy, in no ring)
 * to loopback, ahead of queued work, unless one is queued or running.
 */
static void queue_reset(struct jm *jm)
{
	struct job_rt *r = &jm->reset;
	const struct ocs_ring_domain *d;
	struct hbd_bundle *b;
	size_t n = 0;

	if (!jm->d.rings || !jm->n_reset || r->repair || r->queued || jm->txn_job == r ||
	    r->repair_failed)
		return;
	d = rg_domain(jm->d.rings);
	b = malloc(jm->n_reset * (size_t)d->bundles * sizeof(*b));
	if (!b)
		return; /* tried again by jm_retry_repairs */
	for (size_t i = 0; i < jm->n_reset; i++) {
		int node = jm->reset_nodes[i];

		if (rg_faulty(jm->d.rings, node) || rg_holder(jm->d.rings, node))
			continue; /* failed again, or a ring programs it anyway */
		hbd_idle_bundles(d, node, &b[n]);
		n += (size_t)d->bundles;
	}
	jm->n_reset = 0;
	if (!n) {
		free(b);
		return;
	}
	jp_change_clear(&r->change);
	r->change.bundles = b;
	r->change.n_bundles = n;
	r->repair = true;
	r->fault_us = 0;
	enqueue_first(jm, r);
}

void jm_retry_repairs(struct jm *jm)
{
	jm->reset.repair_failed = false;
	queue_reset(jm);
	for (size_t i = 0; i < jm->n_jobs; i++)
		if (jm->jobs[i]->repair_failed) {
			jm->jobs[i]->repair_failed = false;
			queue_repairs(jm, jm->jobs[i]);
		}
	pump(jm);
}

/*
 * The fast path of a fault: when the job holding the node can be repaired
 * at once (no transaction running, the job ACTIVE and idle), the fault is
 * stored with the repair's intent in one SQLite transaction, committed
 * while the devices prepare (txn.c). 0 (a commit that fails then rolls the
 * repair back and stops writes, through the outcome), or -errno with
 * nothing stored and nothing changed (the caller takes the ordinary path
 * then).
 */
static int repair_at_once(struct jm *jm, struct job_rt *j, int node, const char *source)
{
	struct st_fault fault = {node, source, now_ms(jm)};
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
	rc = ring ? jr_repair_change(jm->d.rings, drained_nodes(jm), ring, failed, &j->pub.ring,
				     fault.since_ms, &j->change, &kind)
		  : -EINVAL;
	if (rc == 0) {
		int index = ring->index;

		j->repair = true;
		jm->txn_job = j;
		rc = start_ring_txn(jm, j, false, &fault, why, sizeof(why));
		if (rc == 0) {
			log_msg(LOG_NOTICE, "job %s: ring %d lost node %d: %s", j->pub.id, index,
				failed, st_ring_change_name(kind));
			return 0;
		}
		jm->txn_job = NULL;
		j->repair = false;
	}
	jp_change_clear(&j->change);
	rg_set_faulty(jm->d.rings, node, false, NULL, 0);
	return rc;
}

int jm_mark_node(struct jm *jm, int node, bool faulty, const char *source, int64_t received_us,
		 const char **affected_job, struct jm_error *err)
{
	const struct rg_ring *holder;
	struct job_rt *j = NULL;
	int rc;

	*affected_job = NULL;
	if (!jm->d.rings) {
		jm_set_error(err, JM_PRECONDITION, "node", "the fabric is not an ocstrx-ring");
		return -1;
	}
	if (node < 0 || node >= rg_nodes(jm->d.rings)) {
		jm_set_error(err, JM_INVALID, "node", "%d is not a node of the domain (0..%d)",
			     node, rg_nodes(jm->d.rings) - 1);
		return -1;
	}
	if (jm->not_serving) {
		jm_set_error(err, JM_UNAVAILABLE, "", "%s; nothing changed",
			     jm->not_serving_reason);
		return -1;
	}
	holder = rg_holder(jm->d.rings, node);
	j = holder ? find_job(jm, holder->job_id) : NULL;
	if (faulty && !rg_faulty(jm->d.rings, node) && j) {
		j->fault_us = received_us;
		j->repair_failed = false;
		if (repair_at_once(jm, j, node, source) == 0) {
			if (jm->d.events.node_changed)
				jm->d.events.node_changed(jm->d.events.ctx, node, true, source);
			*affected_job = j->pub.id;
			return 0;
		}
	}
	if (rg_faulty(jm->d.rings, node) != faulty) {
		rc = st_fault_set(jm->d.store, node, faulty, source, now_ms(jm));
		if (rc) {
			jm_set_error(err, JM_UNAVAILABLE, "",
				     "cannot store the node's condition (%s); nothing changed",
				     st_strerror(jm->d.store, rc));
			return -1;
		}
		rg_set_faulty(jm->d.rings, node, faulty, source, now_ms(jm));
		if (jm->d.events.node_changed)
			jm->d.events.node_changed(jm->d.events.ctx, node, faulty, source);
		if (!faulty && !rg_holder(jm->d.rings, node) &&
		    jm->n_reset < (size_t)rg_nodes(jm->d.rings)) {
			jm->reset_nodes[jm->n_reset++] = node;
			queue_reset(jm);
			pump(jm);
		}
	}
	if (faulty && j) {
		*affected_job = j->pub.id;
		j->fault_us = received_us;
		j->repair_failed = false; /* a new fault report: try again */
		queue_repairs(jm, j);
		pump(jm);
	}
	return 0;
}

int jm_set_ring(struct jm *jm, const char *id, const struct jm_ring_request *req)
{
	struct job_rt *j = find_job(jm, id);

	if (!j)
		return -ENOENT;
	j->pub.is_ring = true;
	j->pub.ring = *req;
	j->kind = &jm_kind_ring;
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 req->orchestration[0] ? req->orchestration : "dcn-free");
	return 0;
}

/* Starts the next queued transaction when none is running. */
static void pump(struct jm *jm)
{
	while (!jm->stopping && !jm->txn_job && !jm->external.running && jm->queue_head) {
		struct job_rt *j = dequeue(jm);

		if (j->repair) {
			start_txn(jm, j);
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING && j->plan_gen != current_gen(jm)) {
			start_planning(jm, j); /* planned on circuits that changed since */
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING || j->pub.state == JM_RELEASING)
			start_txn(jm, j);
	}
}

/* ---- requests ---- */

static const char *planner_of(const struct jm_spec *spec)
{
	if (spec->ring)
		return spec->ring->orchestration[0] ? spec->ring->orchestration : "dcn-free";
	if (spec->rail)
		return "";
	if (spec->planner && *spec->planner)
		return spec->planner;
	return ocs_planner_default(kind_of(spec->workload)->demand)->name;
}

/* The catalogue's planners of a kind, for messages: "leaf-centric, pod-centric". */
static void planner_list(const struct jm_kind *kind, char *out, size_t len)
{
	const struct ocs_planner *p;
	size_t at = 0;

	out[0] = '\0';
	for (size_t i = 0; (p = ocs_planner_at(i)) != NULL && at < len; i++)
		if (p->demand == kind->demand)
			at += (size_t)snprintf(out + at, len - at, "%s%s", at ? ", " : "", p->name);
}

static int cmp_gpu(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* A job's GPUs: its placement's, or its workload's. */
static const int64_t *gpus_of(const int64_t *gpus, size_t n, const struct jm_workload *wl,
			      size_t *n_out)
{
	*n_out = n ? n : wl ? wl->n_gpus : 0;
	return n ? gpus : wl ? wl->gpus : NULL;
}

/*
 * A GPU belongs to one live job at a time (issue 14 #9): refused with
 * FAILED_PRECONDITION naming the first GPU that a live job other than self
 * holds, and that job. Work grows with the live jobs' GPUs only.
 */
static bool gpus_free(const struct jm *jm, const char *self, const int64_t *gpus, size_t n,
		      const struct jm_workload *wl, struct jm_error *err)
{
	const int64_t *mine = gpus_of(gpus, n, wl, &n);
	int64_t *sorted;

	if (n == 0 || jm->n_live == 0)
		return true;
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted) {
		jm_set_error(err, JM_INTERNAL, "", "out of memory");
		return false;
	}
	memcpy(sorted, mine, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_gpu);
	for (size_t k = 0; k < jm->n_live; k++) {
		const struct jm_job *o = &jm->live[k]->pub;
		size_t n_o;
		const int64_t *theirs = gpus_of(o->gpus, o->n_gpus, o->workload, &n_o);

		if (strcmp(o->id, self) == 0)
			continue;
		for (size_t g = 0; g < n_o; g++) {
			size_t at;

			if (!bsearch(&theirs[g], sorted, n, sizeof(*sorted), cmp_gpu))
				continue;
			for (at = 0; mine[at] != theirs[g]; at++)
				;
			jm_set_error(err, JM_PRECONDITION, "",
				     "gpu %lld is held by job %s (%s); release it first",
				     (long long)theirs[g], o->id, jm_state_name(o->state));
			snprintf(err->field, sizeof(err->field), "placement.gpus[%zu].gpu", at);
			free(sorted);
			return false;
		}
	}
	free(sorted);
	return true;
}

/* Copies gpus into job->gpus (none: a workload's stay where they are). 0 or -ENOMEM. */
static int copy_gpus(struct jm_job *job, const int64_t *gpus, size_t n)
{
	int64_t *copy = NULL;

	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, gpus, n * sizeof(*copy));
	}
	free(job->gpus);
	job->gpus = copy;
	job->n_gpus = n;
	return 0;
}

/* Checks a spec against the fabric; field names follow the API's JobSpec. */
static bool check_spec(struct jm *jm, const struct jm_spec *spec, struct jm_error *err)
{
	const struct jm_kind *kind = spec_kind(spec);
	const char *planner = spec->planner && *spec->planner ? spec->planner : NULL;
	const struct ocs_planner *p = planner ? ocs_planner_find(planner) : NULL;

	if (kind->rings)
		return kind->check(jm->d.cfg, spec, err);
	if (kind->gpus_only)
		return kind->check(jm->d.cfg, spec, err) &&
		       (!jm->d.gpus_check ||
			jm->d.gpus_check(jm->d.gpus_check_ctx, spec->gpus, spec->n_gpus, err)) &&
		       gpus_free(jm, spec->id ? spec->id : "", spec->gpus, spec->n_gpus, NULL, err);
	if (jm->d.gpus_check) {
		jm_set_error(err, JM_PRECONDITION, spec->workload ? "parallelism" : "leaf_demand",
			     "the fabric is a rail-ocs: a job is its GPUs (placement.gpus)");
		return false;
	}
	if (jm->d.rings) {
		jm_set_error(err, JM_PRECONDITION, spec->workload ? "parallelism" : "leaf_demand",
			     "the fabric is an ocstrx-ring: jobs ask for rings (ring)");
		return false;
	}
	if (planner && (!p || p->demand != kind->demand)) {
		char list[200];

		planner_list(kind, list, sizeof(list));
		jm_set_error(err, JM_INVALID, "options.planner", "\"%s\" does not plan %s (%s)",
			     planner, kind->demand_name, list);
		return false;
	}
	if (!kind->check(jm->d.cfg, spec, err))
		return false;
	if (!gpus_free(jm, spec->id ? spec->id : "", spec->gpus, spec->n_gpus, spec->workload, err))
		return false;
	return jl_leaves_free(jm->f, jm->live, jm->n_live, spec->id ? spec->id : "", spec->demand,
			      spec->n_demand, spec->workload, err);
}

static void copy_spec(struct job_rt *j, const struct jm_spec *spec)
{
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", spec->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s",
		 spec->idempotency_key ? spec->idempotency_key : "");
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s", planner_of(spec));
	j->pub.allow_move = spec->allow_moving_other_jobs;
	j->kind = spec_kind(spec);
	j->pub.is_ring = spec->ring != NULL;
	if (spec->ring) {
		j->pub.ring = *spec->ring;
		snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
			 spec->ring->orchestration[0] ? spec->ring->orchestration : "dcn-free");
	}
}

/*
 * The part of a submission that concerns a job that already exists (or an
 * idempotency key in use). Returns true when the request was answered or
 * attached to the job.
 */
static bool submit_existing(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct job_rt *j = find_job(jm, spec->id);
	struct jm_error err = {0};

	if (!j && spec->idempotency_key && *spec->idempotency_key) {
		const struct job_rt *other = strmap_get(&jm->by_key, spec->idempotency_key);

		if (other) {
			jm_set_error(&err, JM_EXISTS, "idempotency_key", "already used by job %s",
				     other->pub.id);
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
	}
	if (!j)
		return false;
	if (j->pub.raw_len != spec->raw_len || memcmp(j->pub.raw, spec->raw, spec->raw_len) != 0) {
		jm_set_error(&err, JM_EXISTS, "id",
			     "job %s exists with a different request (state %s)", spec->id,
			     jm_state_name(j->pub.state));
		answer(ctx, &err, NULL, false, NULL, 0);
		return true;
	}
	if (j->pub.state == JM_FAILED || j->pub.state == JM_RELEASED) {
		/* The same request again: run it again. */
		if (refuse_write(jm, answer, ctx))
			return true;
		if (j->kind->gpus_only && jm->d.gpus_check &&
		    !jm->d.gpus_check(jm->d.gpus_check_ctx, j->pub.gpus, j->pub.n_gpus, &err)) {
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
		if (!j->kind->rings &&
		    (!gpus_free(jm, j->pub.id, j->pub.gpus, j->pub.n_gpus, j->pub.workload, &err) ||
		     !jl_leaves_free(jm->f, jm->live, jm->n_live, j->pub.id, j->pub.demand,
				     j->pub.n_demand, j->pub.workload, &err))) {
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
		if (add_waiter(j, answer, ctx, false) != 0)
			goto oom;
		j->replans = 0;
		j->release_requested = false;
		start_planning(jm, j);
		return true;
	}
	if (j->pub.state == JM_ACTIVE) {
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return true;
	}
	/* In progress: answered when it settles. */
	if (add_waiter(j, answer, ctx, false) != 0)
		goto oom;
	return true;
oom:
	jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
	return true;
}

/* Creates, stores and plans a new job whose spec passed check_spec(). */
static void create_job(struct jm *jm, const struct jm_spec *spec, const struct jp_task *search,
		       jm_answer_fn answer, void *ctx)
{
	struct jm_error err = {0};
	struct st_job row;
	struct job_rt *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		goto oom;
	copy_spec(j, spec);
	j->pub.raw = malloc(spec->raw_len ? spec->raw_len : 1);
	j->pub.demand = malloc((spec->n_demand ? spec->n_demand : 1) * sizeof(*j->pub.demand));
	if (spec->workload)
		j->pub.workload = jm_workload_dup(spec->workload);
	if (!j->pub.raw || !j->pub.demand || (spec->workload && !j->pub.workload) ||
	    add_waiter(j, answer, ctx, true) != 0) {
		free_job(j);
		goto oom;
	}
	if (spec->raw_len)
		memcpy(j->pub.raw, spec->raw, spec->raw_len);
	j->pub.raw_len = spec->raw_len;
	if (copy_gpus(&j->pub, spec->gpus, spec->n_gpus) != 0) {
		free(j->waiters);
		free_job(j);
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
	j->pub.created_ms = j->pub.updated_ms = now_ms(jm);
	if (table_add(jm, j) != 0) {
		free(j->waiters);
		free_job(j);
		goto oom;
	}
	row = (struct st_job){j->pub.id,	 j->pub.key[0] ? j->pub.key : NULL,
			      "PENDING",	 NULL,
			      j->pub.raw,	 j->pub.raw_len,
			      j->pub.created_ms, j->pub.updated_ms};
	/* Durable before anything else happens: nothing accepted is lost. */
	rc = st_job_put(jm->d.store, &row);
	if (rc) {
		jm_set_error(&err, JM_UNAVAILABLE, "", "cannot store the job (%s); nothing changed",
			     st_strerror(jm->d.store, rc));
		free(j->waiters);
		j->waiters = NULL;
		/* never seen by anyone: forget it again */
		jm->n_state[j->pub.state]--;
		jm->n_state[JM_RELEASED]++;
		j->pub.state = JM_RELEASED;
		(void)jm_forget(jm, j->pub.id); /* cannot fail: finished, no waiters, not queued */
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	track_live(jm, j, false);
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	start_planning(jm, j);
	return;
oom:
	jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
}

/* Searches a new submission's workload on the pool, then submit_searched(). */
static void submit_workload(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct jm_error err = {0};
	struct jp_task *t =
		new_task(jm, &jm_kind_parallelism, spec->id, planner_of(spec),
			 spec->allow_moving_other_jobs, NULL, 0, spec->workload, NULL, NULL);
	int rc;

	if (t) {
		t->search_only = true;
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
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (spec->raw_len)
		memcpy(t->sub.raw, spec->raw, spec->raw_len);
	rc = jm->d.plan_submit(jm->d.plan_ctx, &t->pool);
	if (rc) {
		jp_task_free(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			     strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	answering_add(jm, t);
}

/* A new submission's workload was searched: refuse it, or create the job with its demand. */
static void submit_searched(struct jm *jm, struct jp_task *t)
{
	struct jm_error err = {0};
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
		jm_set_error(&err, JM_UNAVAILABLE, "", "ocsd is shutting down; nothing changed");
		t->answer(t->ctx, &err, NULL, false, NULL, 0);
	} else if (refuse_write(jm, t->answer, t->ctx)) {
		return;
	} else if (!submit_existing(jm, &spec, t->answer, t->ctx)) {
		/* Still new (the same request may have been submitted meanwhile). */
		if (check_spec(jm, &spec, &err))
			create_job(jm, &spec, t, t->answer, t->ctx);
		else
			t->answer(t->ctx, &err, NULL, false, NULL, 0);
	}
}

void jm_submit(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	struct jm_error err = {0};

	if (submit_existing(jm, spec, answer, ctx) || refuse_write(jm, answer, ctx))
		return;
	if (!check_spec(jm, spec, &err)) {
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
	struct jm_error err = {0};
	struct jp_task *t;
	int rc;

	if (!check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (spec_kind(spec)->gpus_only) {
		/* A rail job plans nothing: the dry run is its check. */
		struct jm_job shadow = {0};

		snprintf(shadow.planner, sizeof(shadow.planner), "%s", planner_of(spec));
		answer(ctx, NULL, &shadow, false, NULL, 0);
		return;
	}
	t = new_task(jm, spec_kind(spec), spec->id, planner_of(spec), spec->allow_moving_other_jobs,
		     spec->demand, spec->n_demand, spec->workload, NULL, spec->ring);
	if (!t) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t->dry = true;
	t->answer = answer;
	t->ctx = ctx;
	rc = jm->d.plan_submit(jm->d.plan_ctx, &t->pool);
	if (rc) {
		jp_task_free(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			     strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	answering_add(jm, t);
}

void jm_release(struct jm *jm, const char *id, jm_answer_fn answer, void *ctx)
{
	struct job_rt *j = find_job(jm, id);
	struct jm_error err = {0};

	if (!j) {
		jm_set_error(&err, JM_NOT_FOUND, "id", "no job %s", id);
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (j->pub.state == JM_RELEASED) {
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return;
	}
	if (refuse_write(jm, answer, ctx))
		return;
	if (add_waiter(j, answer, ctx, false) != 0) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	j->waiters->release = true;
	switch (j->pub.state) {
	case JM_PENDING:
	case JM_PLANNING:
	case JM_FAILED:
		/* Nothing of the job is on the devices (a FAILED apply rolled back). */
		set_state(jm, j, JM_RELEASED, NULL);
		settle(j, NULL);
		return;
	case JM_PROGRAMMING:
		j->release_requested = true; /* after its transaction */
		break;
	case JM_ACTIVE:
		set_state(jm, j, JM_RELEASING, NULL);
		enqueue(jm, j);
		break;
	case JM_RELEASING:
	case JM_RELEASED:
		break;
	}
	pump(jm);
}

/* ---- what no job owns (issue 14 #2) ---- */

int jm_adopt(struct jm *jm, const char *id, const void *raw, size_t raw_len,
	     const struct ocs_xc *xcs, size_t n, struct jm_error *err)
{
	struct job_rt *j;
	struct st_circuit *adds;
	struct st_job row;
	int64_t txn_id = 0;
	int rc;

	if (jm->not_serving || jm->stopping) {
		jm_set_error(err, JM_UNAVAILABLE, "", "%s; nothing changed",
			     jm->stopping ? "ocsd is shutting down" : jm->not_serving_reason);
		return -1;
	}
	if (find_job(jm, id)) {
		jm_set_error(err, JM_EXISTS, "job_id", "job %s exists; name a new job", id);
		return -1;
	}
	j = calloc(1, sizeof(*j));
	adds = calloc(n + 1, sizeof(*adds));
	if (!j || !adds || !(j->pub.demand = malloc(sizeof(*j->pub.demand))) ||
	    !(j->pub.raw = malloc(raw_len ? raw_len : 1))) {
		free(adds);
		free_job(j);
		jm_set_error(err, JM_INTERNAL, "", "out of memory");
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
	j->pub.created_ms = j->pub.updated_ms = now_ms(jm);
	row = (struct st_job){j->pub.id,  NULL,		  "PROGRAMMING",     NULL,
			      j->pub.raw, j->pub.raw_len, j->pub.created_ms, j->pub.created_ms};
	rc = table_add(jm, j);
	if (rc) {
		free(adds);
		free_job(j);
		jm_set_error(err, JM_INTERNAL, "", "out of memory");
		return -1;
	}
	track_live(jm, j, false);
	/* Stored PROGRAMMING first: recovery finds an intent left open
	 * confirmed (the devices hold them) and the job ACTIVE. */
	rc = st_job_put(jm->d.store, &row);
	if (rc) {
		free(adds);
		jm_set_error(err, JM_UNAVAILABLE, "", "cannot store the job (%s); nothing changed",
			     strerror(-rc));
		/* never seen by anyone: forget it again (as create_job does) */
		jm->n_state[j->pub.state]--;
		jm->n_state[JM_RELEASED]++;
		j->pub.state = JM_RELEASED;
		track_live(jm, j, true);
		(void)jm_forget(jm, j->pub.id);
		return -1;
	}
	if (store_figures(jm, j, err) != 0)
		rc = -EIO;
	if (rc == 0)
		rc = st_intent_begin(jm->d.store, id, NULL, 0, adds, n, NULL, 0, now_ms(jm),
				     &txn_id);
	if (rc == 0)
		rc = st_intent_finish(jm->d.store, txn_id, ST_INTENT_CONFIRMED,
				      "adopted: the devices held these cross-connects", now_ms(jm));
	if (rc == 0)
		rc = fs_apply(jm->d.fs, NULL, 0, adds, n);
	free(adds);
	if (rc) {
		jm_set_error(err, rc == -ENOMEM ? JM_INTERNAL : JM_UNAVAILABLE, "",
			     "cannot store the adopted circuits (%s); nothing changed",
			     strerror(rc < 0 ? -rc : rc));
		/* a row may be stored: it holds no circuit, so it is simply failed */
		set_state(jm, j, JM_FAILED, err->message);
		return -1;
	}
	set_state(jm, j, JM_ACTIVE, NULL);
	return 0;
}

static void external_done(void *arg, const struct txn_outcome *o)
{
	struct jm *jm = arg;

	jm->external.running = false;
	if (o->store_failed)
		store_failed(jm, o->store_error);
	if (jm->d.events.transaction_done && o->txn_id)
		jm->d.events.transaction_done(jm->d.events.ctx, jm->external.job_id, o);
	jm->external.done(jm->external.arg, o);
	pump(jm);
}

int jm_external_txn(struct jm *jm, const struct txn_change *c, txn_done_fn done, void *arg,
		    char *why, size_t why_len)
{
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
	rc = jm->d.txn_start(jm->d.txn_ctx, c, external_done, jm, why, why_len);
	if (rc)
		jm->external.running = false;
	return rc;
}

/* ---- start-up and recovery ---- */

/* The demand of a stored job is re-read from its request by the API layer
 * (jm_set_demand); here only what the job manager needs is kept. */
static int load_job(void *arg, const struct st_job *row)
{
	struct jm *jm = arg;
	struct job_rt *j = calloc(1, sizeof(*j));

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
	j->kind = jm->d.gpus_check ? &jm_kind_rail : &jm_kind_leaf;
	if (row->request_len) {
		j->pub.raw = malloc(row->request_len);
		if (!j->pub.raw) {
			free_job(j);
			return -ENOMEM;
		}
		memcpy(j->pub.raw, row->request, row->request_len);
		j->pub.raw_len = row->request_len;
	}
	if (table_add(jm, j) != 0) {
		free_job(j);
		return -ENOMEM;
	}
	track_live(jm, j, false);
	return 0;
}

/* The stored figures of a job's plan (a text that does not decode is skipped). */
static int load_figures(void *arg, const char *job_id, const char *text)
{
	struct jm *jm = arg;
	struct job_rt *j = find_job(jm, job_id);
	struct jm_figures fig;
	int rc;

	if (!j)
		return 0;
	rc = jm_figures_decode(text, &fig);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		log_msg(LOG_WARNING, "job %s: its stored plan figures do not decode; not shown",
			job_id);
		return 0;
	}
	jm_figures_clear(&j->pub.figures);
	j->pub.figures = fig;
	return 0;
}

static int load_link(void *arg, const struct st_link *l)
{
	struct jm *jm = arg;
	struct job_rt *j = find_job(jm, l->job_id);
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

int jm_new(const struct jm_deps *deps, struct jm **out, char *err, size_t err_len)
{
	struct jm *jm = calloc(1, sizeof(*jm));
	int rc;

	*out = NULL;
	if (!jm)
		return -ENOMEM;
	jm->d = *deps;
	jm->f = &deps->cfg->fabric;
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
	struct jm_error err;

	if (!jm)
		return;
	for (size_t i = 0; i < jm->n_jobs; i++) {
		struct job_rt *j = jm->jobs[i];

		/*
		 * Every job in the table was stored before anyone waited on it
		 * (create_job); one that has not settled resumes at the next
		 * start (jm_recover), so "nothing changed" (UNAVAILABLE) would be
		 * untrue: its callers learn that it goes on (issue 14 #7).
		 */
		jm_set_error(&err, JM_ABORTED, "",
			     "ocsd is shutting down: job %s is stored (%s) and is carried out "
			     "when ocsd starts again; GetJob tells its outcome then%s",
			     j->pub.id, jm_state_name(j->pub.state),
			     j->release_requested ? " (a release asked for while it was "
						    "programmed is not kept: release it again)"
						  : "");
		settle(j, &err);
		free_job(j);
	}
	strmap_clear(&jm->by_id);
	strmap_clear(&jm->by_key);
	jp_change_clear(&jm->reset.change);
	rg_rings_free(jm->reset.prev_rings, jm->reset.n_prev_rings);
	free(jm->reset_nodes);
	free(jm->jobs);
	free(jm->live);
	free(jm);
}

int jm_set_demand(struct jm *jm, const char *id, const char *planner, bool allow_move,
		  const struct lc_demand *demand, size_t n, const struct jm_workload *workload)
{
	struct job_rt *j = find_job(jm, id);
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
	j->kind = kind_of(workload);
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 planner && *planner ? planner : ocs_planner_default(j->kind->demand)->name);
	j->pub.allow_move = allow_move;
	return 0;
}

int jm_set_gpus(struct jm *jm, const char *id, const int64_t *gpus, size_t n)
{
	struct job_rt *j = find_job(jm, id);

	return j ? copy_gpus(&j->pub, gpus, n) : -ENOENT;
}

int jm_recover(struct jm *jm)
{
	int rc;

	/* after recovery: intents finished as confirmed carried links */
	for (size_t i = 0; i < jm->n_jobs; i++) {
		free(jm->jobs[i]->links);
		jm->jobs[i]->links = NULL;
		jm->jobs[i]->n_links = 0;
	}
	rc = st_link_list(jm->d.store, load_link, jm);
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
					set_state(jm, j, JM_ACTIVE, NULL);
				else
					start_planning(jm, j);
				break;
			}
			if (j->kind->gpus_only) {
				start_planning(jm, j); /* nothing on devices: programmed again */
				break;
			}
			/* Accepted work: if its transaction landed, it is active. */
			xcs = fs_job_xcs(jm->d.fs, j->pub.id, &n_xcs);
			if (!xcs)
				return -ENOMEM;
			free(xcs);
			if (n_xcs)
				set_state(jm, j, JM_ACTIVE, NULL);
			else if (j->pub.n_demand || j->pub.workload)
				start_planning(jm, j);
			else
				set_state(jm, j, JM_FAILED,
					  "its request could not be read back after "
					  "a restart");
			break;
		case JM_RELEASING:
			enqueue(jm, j);
			break;
		default:
			break;
		}
	}
	/* Faults stored while a repair was cut short (or reported while down). */
	for (size_t i = 0; i < jm->n_jobs; i++)
		queue_repairs(jm, jm->jobs[i]);
	pump(jm);
	return 0;
}
