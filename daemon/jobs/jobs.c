/*
 * jobs.c - implementation of jobs.h: the job state machine. Only the job
 * manager's files change a job's state: this one runs the machine below,
 * jobs_submit.c takes the requests that start a job (submit, dry-run
 * plan), jobs_table.c stores and publishes each change (jm_set_state),
 * jobs_recover.c resumes the stored jobs at start-up, jobs_external.c
 * enters adopted circuits as ACTIVE jobs, jobs_release.c takes releases
 * and settles unproven intents, jobs_faults.c takes node faults.
 * Why this file is over 1,000 lines: its parts (planning, transactions,
 * ring repairs) call one another both ways (a plan's end starts a
 * transaction, a transaction's end plans again or queues a repair), so
 * they stay together; what only calls into them is carved out
 * (jobs_submit.c, whose searched submissions come back through the task's
 * continuation, jobs_release.c, jobs_faults.c). The stages it drives
 * (planning in jobs_plan.c with the job's kind, the transaction driver
 * txn_driver.c) only return results to it.
 *
 * Job state machine (all transitions on the loop thread):
 *
 *   submit --> PENDING --(stored, with the others of this turn of the
 *              loop)--> PLANNING --(its turn: plans run one at a time, in
 *              arrival order; plan on pool)--> plan_done
 *   plan_done: stale snapshot ............ PLANNING again (re-plan)
 *              refused / does not fit .... FAILED  (nothing touched)
 *              fits ....................... admitted (its circuits reserved;
 *                                           still PLANNING), then with the
 *                                           others admitted before the wave
 *                                           (one write): PROGRAMMING, queued
 *   jm_pump (one transaction at a time; leaf and parallelism jobs in waves,
 *            the queued ones at its head up to max_wave, jobs_wave.c):
 *              snapshot changed since plan  PLANNING again
 *              intent not stored .......... FAILED (release: stays ACTIVE)
 *              started .................... (transaction running)
 *   txn end:   confirmed .................. ACTIVE   (release: RELEASED)
 *              rolled back / refused ...... FAILED   (release: as before it)
 *              rollback unproven .......... FAILED   (release: FAILED, holding)
 *              a wave's, not confirmed .... per job (jw_split): queued again
 *                                           at once (off the failed devices),
 *                                           queued again alone (on a device
 *                                           that refused), or the outcome
 *                                           above (on a device that did not
 *                                           answer or is unproven)
 *   release:   ACTIVE, FAILED holding --> RELEASING, queued --> transaction
 *                  --> RELEASED
 *              PENDING/PLANNING/FAILED not holding --> RELEASED at once
 *                  (nothing of it on the devices, or nothing proven there:
 *                  see "unproven" below)
 *              PROGRAMMING: released after its transaction
 *
 * Release not proven (FAILED, holding). A release whose rollback could not
 * be proven changed nothing in the circuit table (an intent reaches it only
 * confirmed), so the job still owns every cross-connect it had there, and
 * the devices may hold them or not. The job says so: FAILED (its last
 * operation failed and its circuits are not proven, so a scheduler must not
 * run work on them as if it were ACTIVE) with pub.holding set and a reason
 * naming how many cross-connects it still holds (GetJob lists them). While
 * it holds them it stays live: its GPUs, leaves and ports are nobody
 * else's, a resubmission of it is refused, retention keeps it, and a
 * release runs a real release transaction (its targets are the circuit
 * table without the job, whatever the devices hold now). A release that
 * rolls back leaves it FAILED holding again. At a restart a FAILED job that
 * owns circuits in the table is holding again (jm_recover).
 *
 * Unproven intents settled (keepalive.h), for a FAILED job with no
 * transaction queued or running:
 *
 *   FAILED holding --devices at the pre-image--> FAILED holding (reason:
 *                                                rollback proven; release again)
 *                  --devices at the target-----> RELEASED (circuits dropped
 *                                                from the table)
 *   FAILED (submit) --at the pre-image---------> FAILED (reason: proven)
 *                   --at the target (additions-> ACTIVE (the circuits it
 *                     only)                      added are entered as its own)
 *
 * Anything else (devices at neither, a job that moved on meanwhile) leaves
 * the intent FAILED for the drift report and the operator, as before.
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
 *  1. At most one transaction runs (a wave's is one transaction); its
 *     intent is stored before any device is touched (a ring transaction's:
 *     before any device is confirmed, while the devices prepare) and its
 *     outcome before the next starts (txn_driver.c).
 *  2. Plans never overlap. Leaf plans run one at a time, each on the
 *     circuits plus those of the plans admitted ahead (reserved until
 *     their transaction ends: jobs_wave.c), and a plan is applied only if
 *     the circuits did not change since its snapshot other than by the
 *     confirmed waves of admitted plans (the epoch, current_gen).
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
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "devices.h"
#include "cabling.h"
#include "drift.h"
#include "fabric_state.h"
#include "jobs_util.h"
#include "kind_txn.h"
#include "log.h"
#include "loop.h"

/* A plan whose snapshot went stale this often in a row is refused. */
#define JM_MAX_REPLANS 16

/* ---- planning ---- */

/* Ring domains: drained nodes (device id = node), NULL when none is. */
const bool *jm_drained_nodes(const struct jm *jm)
{
	return jm->d.devs && dev_n_drained(jm->d.devs) ? dev_drained_mask(jm->d.devs) : NULL;
}

/*
 * What a plan's snapshot is compared with: the ring state's generation, or
 * the epoch of the circuits (jobs_internal.h): it moves when the circuit
 * table changed other than by a wave's confirmed plans, which every later
 * plan already kept clear of (they were admitted).
 */
static unsigned long current_gen(struct jm *jm)
{
	if (jm->d.rings)
		return rg_generation(jm->d.rings);
	if (fs_generation(jm->d.fs) != jm->fs_seen) {
		jm->epoch++;
		jm->fs_seen = fs_generation(jm->d.fs);
	}
	return jm->epoch;
}

/*
 * The inputs of a global re-plan (allow_moving_other_jobs): every job that
 * owns configured cross-connects, with its demand. When one's demand is
 * not known (a parallelism job restored from the store, not planned since)
 * its circuits could not be planned again, and those of a FAILED job that
 * holds them wait for its release, not a move: the job is planned pinned.
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
			const struct job_rt *o = jm_job_find(jm, owner);

			if (!o || o->pub.n_demand == 0 || o->pub.holding || k > jm->n_live) {
				log_msg(LOG_NOTICE,
					"job %s: the demand of job %s is not known yet, or its "
					"circuits wait for a release; planned without moving other "
					"jobs' circuits",
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
		const struct job_rt *o = jm_job_find(jm, t->names[k]);

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
 * that take no new circuit, drained or blocked by drift (drift.h). The
 * ports of miswired fibre are the task's out of service (new_task).
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

/*
 * The circuits of the plans admitted ahead (not yet on the devices, or not
 * yet confirmed) appended to *xcs: a new plan keeps clear of them as of
 * circuits no job owns, so no two plans of a wave collide. 0 or -ENOMEM.
 */
static int add_admitted(const struct jm *jm, const char *self, struct ocs_xc **xcs, size_t *n)
{
	struct ocs_xc *adm = NULL, *all;
	size_t n_adm = 0;

	if (jw_admitted_xcs(jm->live, jm->n_live, self, &adm, &n_adm) != 0)
		return -ENOMEM;
	if (!n_adm)
		return 0;
	all = realloc(*xcs, (*n + n_adm) * sizeof(*all));
	if (!all) {
		free(adm);
		return -ENOMEM;
	}
	memcpy(all + *n, adm, n_adm * sizeof(*all));
	*xcs = all;
	*n += n_adm;
	free(adm);
	return 0;
}

struct jp_task *jm_new_task(struct jm *jm, const struct jm_kind *kind, const char *self,
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
			jr_mask_drained(jm->d.rings, jm_drained_nodes(jm), use);

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
	if (drift_view(jm, &unowned, &n_unowned, &blocked) != 0 ||
	    add_admitted(jm, self ? self : "", &unowned, &n_unowned) != 0) {
		free(unowned);
		free(blocked);
		return NULL;
	}
	t = jp_task_new(kind, jm->f, jm->d.fs, unowned, n_unowned, blocked, jm->d.cfg->n_devices,
			self, planner, replan, demand, n_demand, wl, delta);
	free(unowned);
	free(blocked);
	if (!t)
		return NULL;
	/*
	 * Ports out of service: the miswired ones not cleared, then the ones
	 * the devices report FAILED or DISABLED (their last info read; on
	 * polatis no transaction's read-back sees them). Both tables are the
	 * loop thread's, as this is; the task gets its own copy. A port in
	 * both is listed twice, which the planner takes as once.
	 */
	if ((jm->d.cabling &&
	     cab_out_of_service(jm->d.cabling, &t->out_of_service, &t->n_out_of_service) != 0) ||
	    (jm->d.devs &&
	     dev_out_of_service(jm->d.devs, &t->out_of_service, &t->n_out_of_service) != 0)) {
		jp_task_free(t);
		return NULL;
	}
	t->gen = current_gen(jm);
	t->fs_gen = fs_generation(jm->d.fs);
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

/*
 * Whether j's plan may start now. Leaf plans run one at a time, in arrival
 * order, each on the state the plans admitted ahead leave (invariant 2); a
 * plan that may move other jobs' circuits also waits until every admitted
 * plan is on the devices (it plans every job's circuits again, which a
 * reservation would hide from it).
 */
static bool plan_may_start(struct jm *jm, const struct job_rt *j)
{
	return !jm->planning_seq && !(j->pub.allow_move && jw_any_admitted(jm->live, jm->n_live));
}

static void start_plan(struct jm *jm, struct job_rt *j);

/* Starts the waiting plans, in arrival order, while none is under way. */
static void plan_next(struct jm *jm)
{
	while (!jm->stopping && !jm->planning_seq && jm->plan_head) {
		struct job_rt *j = jm->plan_head;

		if (j->pub.state == JM_PLANNING && !plan_may_start(jm, j))
			return; /* a re-plan waits for the admitted plans' waves */
		jm->plan_head = j->next_planning;
		if (!jm->plan_head)
			jm->plan_tail = NULL;
		j->next_planning = NULL;
		j->plan_waiting = false;
		if (j->pub.state == JM_PLANNING)
			start_plan(jm, j); /* else released while waiting */
	}
}

void jm_start_planning(struct jm *jm, struct job_rt *j)
{
	if (j->kind->gpus_only || j->kind->rings ||
	    (!j->plan_waiting && !jm->plan_head && plan_may_start(jm, j))) {
		start_plan(jm, j);
		return;
	}
	/* its turn comes (plan_next) */
	j->admitted = false;
	if (j->pub.state != JM_PLANNING)
		jm_set_state(jm, j, JM_PLANNING, NULL);
	if (!j->plan_waiting) {
		j->plan_waiting = true;
		if (jm->plan_tail)
			jm->plan_tail->next_planning = j;
		else
			jm->plan_head = j;
		jm->plan_tail = j;
	}
}

/* Plans j now (PLANNING), or fails it. */
static void start_plan(struct jm *jm, struct job_rt *j)
{
	struct jp_task *t;
	struct err_info err;
	int rc;

	j->admitted = false; /* a plan it had is dropped */

	if (j->kind->gpus_only) {
		/* Nothing to plan (rail jobs): an empty change set, programmed in turn. */
		jp_change_clear(&j->change);
		j->plan_gen = current_gen(jm);
		jm_set_state(jm, j, JM_PROGRAMMING, NULL);
		jm_enqueue(jm, j);
		jm_pump(jm);
		return;
	}
	t = jm_new_task(jm, j->kind, j->pub.id, j->pub.planner, j->pub.allow_move, j->pub.demand,
			j->pub.n_demand, j->pub.workload, &j->pub.figures,
			j->pub.is_ring ? &j->pub.ring : NULL);
	if (j->pub.state != JM_PLANNING)
		jm_set_state(jm, j, JM_PLANNING, NULL);
	if (!t) {
		err_set(&err, ERR_INTERNAL, "", "out of memory");
		jm_fail_job(jm, j, &err);
		return;
	}
	t->report_search |= j->search_unreported;
	j->search_unreported = false;
	t->seq = j->plan_seq = ++jm->plan_seq;
	if (!j->kind->rings) {
		jm->planning_seq = t->seq;
		jm->planning_light = !t->pool.heavy;
	}
	rc = jm->d.plan_submit(jm->d.plan_ctx, &t->pool);
	if (rc) {
		if (jm->planning_seq == t->seq)
			jm->planning_seq = 0;
		jp_task_free(t);
		err_set(&err, ERR_EXHAUSTED, "", "the planner queue is full (%s); try again",
			strerror(-rc));
		jm_fail_job(jm, j, &err);
	}
}

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
		if (!t->refused || t->err.status == ERR_EXHAUSTED)
			t->answer(t->ctx, NULL, &shadow, false, NULL, 0);
		else
			t->answer(t->ctx, &t->err, NULL, false, NULL, 0);
		return;
	}
	if (t->plan && (!t->refused || t->err.status == ERR_EXHAUSTED)) {
		/* A dry run reports what does not fit as figures, not as an error. */
		shadow.figures = t->fig;
		t->answer(t->ctx, NULL, &shadow, false, t->added, t->n_added);
	} else {
		t->answer(t->ctx, &t->err, NULL, false, NULL, 0);
	}
}

/*
 * A refusal that moving other jobs' circuits would lift (t->movers, still
 * valid: the snapshot is current): its message names those jobs, at most
 * four, and says that the re-plan policy is what may move them.
 */
static void name_movers(const struct jm *jm, struct jp_task *t)
{
	char names[200] = "";
	size_t at = 0, n_jobs = 0;
	const char *shown[4] = {0};
	static const char touched[] = "; nothing was touched";
	char *tail;

	for (size_t m = 0; m < t->n_movers; m++) {
		const char *id = fs_at(jm->d.fs, t->movers[m])->job_id;
		bool seen = false;

		for (size_t k = 0; k < n_jobs && k < 4 && !seen; k++)
			seen = !strcmp(shown[k], id);
		if (seen)
			continue;
		if (n_jobs < 4) {
			shown[n_jobs] = id;
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       n_jobs ? ", " : "", id);
			if (at >= sizeof(names))
				at = sizeof(names) - 1;
		}
		n_jobs++;
	}
	if (n_jobs > 4)
		snprintf(names + at, sizeof(names) - at, " and %zu more", n_jobs - 4);
	/* the hint goes before the closing "; nothing was touched" */
	tail = strstr(t->err.message, touched);
	if (tail)
		*tail = '\0';
	err_append(&t->err,
		   "; it would fit on ports that the circuits of job%s %s hold: moving them is "
		   "the re-plan's business (submit with allow_moving_other_jobs)%s",
		   n_jobs > 1 ? "s" : "", names, tail ? touched : "");
}

static void plan_settle(struct jm *jm, struct jp_task *t);

/* A plan ended (loop thread): its job goes on, then the next plan starts. */
static void plan_done(struct pool_task *pt)
{
	struct jp_task *t = OCSD_CONTAINER_OF(pt, struct jp_task, pool);
	struct jm *jm = t->owner;

	if (!t->dry && !t->search_only && t->seq == jm->planning_seq)
		jm->planning_seq = 0;
	plan_settle(jm, t);
	plan_next(jm);
	jm_pump(jm); /* a wave that waited for this plan */
}

/* What a plan's end does to its job (t is freed). */
static void plan_settle(struct jm *jm, struct jp_task *t)
{
	struct job_rt *j;
	struct err_info err = {0};
	bool planned = t->kind->rings ? !t->refused : !t->kind_rc && t->rc == 0 && t->plan;

	if (t->dry || t->search_only)
		jm_answering_del(jm, t);
	if (t->kind_rc == -ECANCELED && jm->stopping) {
		/* stopped by jm_stop, not by its caller: nothing was stored */
		err_set(&t->kind_err, ERR_UNAVAILABLE, "",
			"ocsd is shutting down; nothing changed");
		t->err = t->kind_err;
	}

	if (t->search_only) {
		t->searched(jm, t); /* jobs_submit.c's continuation */
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
	if (t->refused && t->n_movers && !t->kind->rings && t->fs_gen == fs_generation(jm->d.fs))
		name_movers(jm, t);
	if (t->dry) {
		answer_dry_run(t);
		jp_task_free(t);
		return;
	}
	j = jm_job_find(jm, t->job_id);
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
		/* the snapshot went stale: plan again, ahead of the waiting plans */
		if (j->kind->rings || plan_may_start(jm, j))
			start_plan(jm, j);
		else
			jm_start_planning(jm, j);
		return;
	}
	if (t->gen != current_gen(jm) && planned)
		err_set(&err, ERR_UNAVAILABLE, "",
			"the fabric changed during each of %d plans; try again", JM_MAX_REPLANS);
	else if (t->refused)
		err = t->err;
	if (planned || (t->kind->rings && t->fig.has_ring)) {
		jm_figures_clear(&j->pub.figures);
		j->pub.figures = t->fig;
		t->fig = (struct jm_figures){0};
	}
	if (err.status != ERR_OK) {
		jp_task_free(t);
		jm_fail_job(jm, j, &err);
		return;
	}
	jp_change_clear(&j->change);
	j->change = t->change;
	t->change = (struct jp_change){0};
	j->plan_gen = t->gen;
	jp_task_free(t);
	/* admitted: later plans keep clear of its circuits until its wave ends
	 * (stored with the others admitted before the wave: jobs_batch.c) */
	if (jb_admit(jm, j) == 0)
		jm_pump(jm);
}

/* ---- resets of healed nodes ---- */
/*
 * Queues the reset of the healed nodes on the list (healthy, in no ring)
 * to loopback, ahead of queued work, unless one is queued or running.
 */
static void queue_reset_now(struct jm *jm)
{
	struct job_rt *r = &jm->reset;
	const struct ocs_ring_domain *d;
	struct hbd_bundle *b;
	size_t n = 0;

	if (!jm->d.rings || !jm->n_reset || r->repair || r->queued || r->in_txn || r->repair_failed)
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
	jm_enqueue_first(jm, r);
}

static void on_reset_timer(evutil_socket_t fd, short what, void *arg)
{
	struct jm *jm = arg;

	(void)fd;
	(void)what;
	queue_reset_now(jm);
	jm_pump(jm);
}

/*
 * The reset of healed nodes is housekeeping: it waits JM_RESET_DELAY_US
 * for a ring transaction of a job to carry it (absorb_resets: a fault's
 * repair then never waits behind a reset transaction of its own), and is
 * queued alone after that. Without a loop (or a timer) it is queued at once.
 */
void jm_queue_reset(struct jm *jm)
{
	struct timeval tv = {0, JM_RESET_DELAY_US};

	if (!jm->d.rings || !jm->n_reset)
		return;
	if (jm->d.loop && !jm->reset_ev)
		jm->reset_ev = evtimer_new(loop_base(jm->d.loop), on_reset_timer, jm);
	if (!jm->reset_ev ||
	    (!evtimer_pending(jm->reset_ev, NULL) && evtimer_add(jm->reset_ev, &tv) != 0))
		queue_reset_now(jm);
}

/*
 * A ring transaction of job j (not the reset's) carries the healed nodes
 * waiting for their reset: their loopback settings are appended to j's
 * change, from j->absorbed_at on (nodes faulty again, held by a ring, or
 * set by the change itself are left out; the last stay on the list).
 * restore_resets puts them back on the list when the transaction does not
 * go through. Out of memory: they wait for their own transaction.
 */
static bool change_sets_node(const struct job_rt *j, int node)
{
	for (size_t i = 0; i < j->absorbed_at; i++)
		if (j->change.bundles[i].node == node)
			return true;
	for (size_t r = 0; r < j->change.n_rings; r++)
		for (int k = 0; k < j->change.rings[r].m; k++)
			if (j->change.rings[r].nodes[k] == node)
				return true;
	return false;
}

static void absorb_resets(struct jm *jm, struct job_rt *j)
{
	const struct ocs_ring_domain *d = rg_domain(jm->d.rings);
	size_t per = (size_t)d->bundles, keep = 0;
	struct hbd_bundle *b;

	j->absorbed_at = j->change.n_bundles;
	if (j == &jm->reset || !jm->n_reset)
		return;
	b = realloc(j->change.bundles, (j->change.n_bundles + jm->n_reset * per) * sizeof(*b));
	if (!b)
		return;
	j->change.bundles = b;
	for (size_t i = 0; i < jm->n_reset; i++) {
		int node = jm->reset_nodes[i];

		if (rg_faulty(jm->d.rings, node) || rg_holder(jm->d.rings, node))
			continue; /* as queue_reset_now */
		if (change_sets_node(j, node)) {
			jm->reset_nodes[keep++] = node;
			continue;
		}
		hbd_idle_bundles(d, node, &b[j->change.n_bundles]);
		j->change.n_bundles += per;
	}
	jm->n_reset = keep;
}

static void restore_resets(struct jm *jm, struct job_rt *j)
{
	for (size_t i = j->absorbed_at; i < j->change.n_bundles; i++)
		if (j->change.bundles[i].bundle == 0 && jm->n_reset < (size_t)rg_nodes(jm->d.rings))
			jm->reset_nodes[jm->n_reset++] = j->change.bundles[i].node;
	j->change.n_bundles = j->absorbed_at;
	jm_queue_reset(jm);
}

/* ---- transactions ---- */

static void txn_done(void *arg, const struct txn_outcome *o);

/*
 * Starts a ring job's transaction: its plan, a repair (j->change set by
 * queue_repair) or its release (every node back to loopback). The rings as
 * they were are kept for the ring events. -errno with why set when it did
 * not start.
 */
int jm_start_ring_txn(struct jm *jm, struct job_rt *j, bool release, const struct st_fault *fault,
		      char *why, size_t why_len)
{
	struct txn_change c = {0};
	struct krt_change k;
	size_t n_prev = 0;
	const struct rg_ring *prev = rg_job_rings(jm->d.rings, j->pub.id, &n_prev);
	int rc;

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
			j->change.rings[i].changed_ms = jm_now_ms(jm);
	absorb_resets(jm, j);
	jm->ring_txns++;
	k = (struct krt_change){.rings = jm->d.rings,
				.job_rings = j->change.rings,
				.n_rings = j->change.n_rings,
				.bundles = j->change.bundles,
				.n_bundles = j->change.n_bundles,
				.fault = fault};
	c = (struct txn_change){.job_id = j->pub.id,
				.release = release,
				.kind = &krt_ops,
				.kind_change = &k,
				.progress = jm_txn_progress};
	rc = jm->d.txn_start(jm->d.txn_ctx, &c, txn_done, jm, why, why_len);
	if (rc)
		restore_resets(jm, j);
	return rc;
}

void jm_txn_progress(void *arg, const struct txn_progress *p)
{
	struct jm *jm = arg;
	const char **ids;
	size_t n = 0;

	if (!jm->d.events.transaction_progress)
		return;
	if (jm->external.running) {
		const char *id = jm->external.job_id;

		jm->d.events.transaction_progress(jm->d.events.ctx, &id, 1, p);
		return;
	}
	if (!jm->txn_job)
		return;
	ids = malloc((jm->n_wave ? jm->n_wave : 1) * sizeof(*ids));
	if (!ids)
		return; /* one progress report lost; the next one tells */
	for (; n < jm->n_wave; n++)
		ids[n] = jm->wave[n]->pub.id;
	if (!n)
		ids[n++] = jm->txn_job->pub.id;
	jm->d.events.transaction_progress(jm->d.events.ctx, ids, n, p);
	free(ids);
}

/* The cross-connects (ring jobs: rings) j owns in the circuit table (the ring state). */
size_t jm_held_count(const struct jm *jm, const struct job_rt *j)
{
	size_t n = 0;

	if (j->kind->rings) {
		(void)rg_job_rings(jm->d.rings, j->pub.id, &n);
		return n;
	}
	for (size_t i = 0; i < fs_count(jm->d.fs); i++)
		n += strcmp(fs_at(jm->d.fs, i)->job_id, j->pub.id) == 0;
	return n;
}

/*
 * A release whose outcome this replica could not store because it is not
 * the leader any more (the fence refused the write): its intent may be
 * decided, and then the new leader finishes it (recovery.c), so "nothing
 * changed" would not be true. Its waiters are told who settles it, as
 * jm_fail_job tells a submission's.
 */
static void release_deposed(struct job_rt *j)
{
	struct err_info err;

	err_set(&err, ERR_UNAVAILABLE, "",
		"not the leader any more: the release of job %s stays in the store and the "
		"new leader settles it; ask the leader (GetJob)",
		j->pub.id);
	jm_settle_failed_release(j, &err);
}

/*
 * j's release did not take effect: j keeps what it holds. Unproven (or
 * already holding): FAILED holding, with a reason saying what it holds;
 * else ACTIVE again (rolled back: nothing changed). The releasers get the
 * reason.
 */
static void release_failed(struct jm *jm, struct job_rt *j, bool unproven,
			   const struct err_info *why)
{
	struct err_info err = *why;
	size_t n = jm_held_count(jm, j);

	if (!unproven && !j->pub.holding) {
		if (jm_set_state(jm, j, JM_ACTIVE, why->message) == -EPERM)
			release_deposed(j);
		else
			jm_settle_failed_release(j, why);
		return;
	}
	jm_set_holding(jm, j, n > 0);
	if (n)
		err_set(&err, why->status, why->field,
			"release of job %s did not take effect: %s; it still holds its %zu "
			"%s%s: release it again",
			j->pub.id, why->message, n, j->kind->rings ? "ring(s)" : "cross-connect(s)",
			unproven ? " (what the devices hold is settled once they answer again)"
				 : "");
	/* FAILED: a submission waiting on it fails too (the job is not ACTIVE) */
	if (jm_set_state(jm, j, JM_FAILED, err.message) == -EPERM)
		release_deposed(j);
	else
		jm_settle(j, &err);
}

/*
 * Starts j's transaction alone: a ring job's, a repair, a rail job's (no
 * circuits of its own). Leaf and parallelism jobs go in waves (start_wave).
 */
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
			       .n_links = j->change.n_links,
			       .progress = jm_txn_progress};
	struct ocs_xc *mine = NULL;
	struct err_info err;
	char why[400] = "";
	int rc;

	if (j->kind->rings) {
		jm->txn_job = j;
		j->in_txn = true;
		rc = jm_start_ring_txn(jm, j, release, NULL, why, sizeof(why));
		if (rc == 0)
			return;
		jm->txn_job = NULL;
		j->in_txn = false;
		err_set(&err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "", "%s", why);
		if (j->repair) {
			log_msg(LOG_ERR, "job %s: the ring repair could not start: %s", j->pub.id,
				why);
			j->repair = false;
			j->repair_failed = !j->drift_repair; /* drift: the next pass tries again */
			j->drift_repair = false;
			jp_change_clear(&j->change);
		} else if (release) {
			release_failed(jm, j, false, &err);
		} else {
			jm_fail_job(jm, j, &err);
		}
		return;
	}
	if (release) {
		size_t n = 0;

		mine = fs_job_xcs(jm->d.fs, j->pub.id, &n);
		c = (struct txn_change){.job_id = j->pub.id,
					.release = true,
					.removals = mine,
					.n_removals = n,
					.progress = jm_txn_progress};
		if (!mine) {
			err_set(&err, ERR_INTERNAL, "", "out of memory");
			release_failed(jm, j, false, &err);
			return;
		}
	}
	jm->txn_job = j;
	j->in_txn = true;
	rc = jm->d.txn_start(jm->d.txn_ctx, &c, txn_done, jm, why, sizeof(why));
	free(mine);
	if (rc == 0)
		return;
	jm->txn_job = NULL;
	j->in_txn = false;
	err_set(&err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "", "%s", why);
	if (release) {
		release_failed(jm, j, false, &err);
	} else {
		jm_fail_job(jm, j, &err);
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

/*
 * Where a fault repair's time went (issue 28 #5), from the notification
 * reaching ocsd (its listener thread) to every changed node confirmed:
 * to the loop, the repair computed on it, the transaction's start, the
 * engine (the devices' time) and the engine's waits for the intent's
 * commit and the decision (the controller's, like the stages before).
 */
static void log_repair_profile(const struct jm *jm, struct job_rt *j, const struct txn_outcome *o)
{
	int64_t now = clk_mono_us(jm->d.clock);

	if (j->fault_us && j->fault_loop_us && j->fault_planned_us && o->started_us &&
	    o->result == TXN_CONFIRMED)
		log_msg(LOG_INFO,
			"job %s: fault repair profile: %lld us from the notification to every "
			"node confirmed: to the loop %lld, repair computed %lld, to the engine "
			"%lld, engine %lld (the devices), engine waited %lld for the store; "
			"outcome on the loop %lld us later",
			j->pub.id, (long long)(o->finished_us - j->fault_us),
			(long long)(j->fault_loop_us - j->fault_us),
			(long long)(j->fault_planned_us - j->fault_loop_us),
			(long long)(o->started_us - j->fault_planned_us), (long long)o->engine_us,
			(long long)(o->finished_us - o->started_us - o->engine_us),
			(long long)(now - o->finished_us));
	j->fault_loop_us = j->fault_planned_us = 0;
}

/* The end of a ring repair (or node reset): the job stays ACTIVE whatever happened. */
static void repair_done(struct jm *jm, struct job_rt *j, const struct txn_outcome *o)
{
	bool drift = j->drift_repair;
	char nodes[160] = "";

	log_repair_profile(jm, j, o);
	j->repair = false;
	j->drift_repair = false;
	/* a drift repair's nodes, for its log line: each node's bundles are
	 * consecutive, then come the resets it carried */
	for (size_t i = 0; drift && i < j->absorbed_at && i < j->change.n_bundles; i++)
		if (i == 0 || j->change.bundles[i].node != j->change.bundles[i - 1].node)
			snprintf(nodes + strlen(nodes), sizeof(nodes) - strlen(nodes), "%s%d",
				 i ? ", " : "", j->change.bundles[i].node);
	if (j == &jm->reset && o->result != TXN_CONFIRMED) {
		/* the nodes go back on the list, tried again by jm_retry_repairs */
		for (size_t i = 0; i < j->change.n_bundles; i++)
			if (j->change.bundles[i].bundle == 0 &&
			    jm->n_reset < (size_t)rg_nodes(jm->d.rings))
				jm->reset_nodes[jm->n_reset++] = j->change.bundles[i].node;
	}
	jp_change_clear(&j->change);
	if (drift && o->result == TXN_CONFIRMED)
		log_msg(LOG_NOTICE, "job %s: node(s) %s programmed back to their ring's settings",
			j->pub.id, nodes);
	else if (drift)
		/* not a fault: the next reconciliation pass finds it and tries again */
		log_msg(LOG_ERR, "job %s: node(s) %s could not be programmed back (%s)", j->pub.id,
			nodes, o->message ? o->message : "");
	if (o->result == TXN_CONFIRMED) {
		publish_rings(jm, j, false, true, o);
		jm_queue_repairs(jm, j); /* another of its rings may hold a faulty node */
	} else if (!drift) {
		j->repair_failed = true;
		log_msg(LOG_ERR,
			"job %s: the ring repair was not applied (%s): its ring keeps the "
			"faulty node until the next fault report or restart",
			j->pub.id, o->message ? o->message : "");
	}
	jm_pump(jm);
}

/*
 * The end of j's transaction, alone or in a wave: its leaf-spine links and
 * its transaction event (a ring job's were handled by txn_done), then its
 * state and its waiters.
 */
static void settle_txn(struct jm *jm, struct job_rt *j, const struct txn_outcome *o)
{
	bool release = j->pub.state == JM_RELEASING;
	struct err_info err = {0};

	j->alone = false;
	if (!j->kind->rings && o->result == TXN_CONFIRMED &&
	    jl_apply(jm->live, jm->n_live, j, release ? NULL : j->change.links,
		     release ? 0 : j->change.n_links) != 0)
		/* the store has the links: the next start loads them */
		jm_store_failed(jm, "out of memory while applying a plan's leaf-spine links",
				-ENOMEM);
	jp_change_clear(&j->change);
	if (o->result == TXN_ROLLED_BACK || o->result == TXN_REFUSED)
		/* said once: the driver's message usually says it already */
		err_set(&err, ERR_UNAVAILABLE, "", "devices: %s%s; nothing changed", o->message,
			strstr(o->message, "rolled back") ? "" : "; every device was rolled back");
	else if (o->result == TXN_FAILED)
		err_set(&err, ERR_INTERNAL, "",
			"devices: %s; a rollback could not be proven (%zu device(s)): the "
			"fabric needs reconciliation",
			o->message, o->rollback_failures);
	if (release && o->result == TXN_CONFIRMED) {
		jm_set_holding(jm, j, false);
		jm_set_state(jm, j, JM_RELEASED, NULL);
		jm_settle(j, NULL);
	} else if (release) {
		release_failed(jm, j, o->result == TXN_FAILED, &err);
	} else if (o->result == TXN_CONFIRMED) {
		jm_set_state(jm, j, JM_ACTIVE, NULL);
		if (j->release_requested) {
			/* Released during programming: every waiter (the submitter
			 * too) is answered when the release settles, with the job's
			 * final state, never with RELEASING. */
			jm_set_state(jm, j, JM_RELEASING, NULL);
			jm_enqueue(jm, j);
		} else {
			jm_settle(j, NULL);
		}
	} else {
		jm_fail_job(jm, j, &err);
	}
	if (j->kind->rings && j->pub.state == JM_ACTIVE)
		jm_queue_repairs(jm, j); /* a node failed while it was programmed */
}

/* The end of a transaction started alone (start_txn). */
static void txn_done(void *arg, const struct txn_outcome *o)
{
	struct jm *jm = arg;
	struct job_rt *j = jm->txn_job;
	bool release = j->pub.state == JM_RELEASING;
	const char *id = j->pub.id;

	jm->txn_job = NULL;
	j->in_txn = false;
	if (o->store_failed)
		jm_store_failed(jm, o->store_error, o->store_rc);
	if (jm->d.events.transaction_done && o->txn_id)
		jm->d.events.transaction_done(jm->d.events.ctx, &id, 1, o);
	if (j->kind->rings && o->result != TXN_CONFIRMED)
		restore_resets(jm, j); /* the healed nodes it carried */
	if (j->kind->rings && j->repair) {
		repair_done(jm, j, o);
		return;
	}
	if (j->kind->rings && o->result == TXN_CONFIRMED)
		publish_rings(jm, j, release, false, o);
	settle_txn(jm, j, o);
	jm_pump(jm);
}

/* ---- waves (jobs_wave.c: one transaction for every job waiting) ---- */

/* Fails or refuses every job of a wave that did not start (nothing was touched). */
static void wave_not_started(struct jm *jm, struct job_rt *const *wave, size_t n,
			     const struct err_info *err)
{
	for (size_t k = 0; k < n; k++) {
		wave[k]->in_txn = false;
		if (wave[k]->pub.state == JM_RELEASING)
			release_failed(jm, wave[k], false, err);
		else
			jm_fail_job(jm, wave[k], err);
	}
}

static void wave_done(void *arg, const struct txn_outcome *o);

/*
 * Starts the wave of the n jobs in jm->wave: one change set, one intent,
 * one device transaction. The jobs it could not start are failed (their
 * own outcome: nothing was touched).
 */
static void run_wave(struct jm *jm, size_t n)
{
	struct jw_change w;
	struct txn_change c;
	struct err_info err;
	char why[400] = "";
	int64_t now = clk_mono_us(jm->d.clock);
	int rc;

	if (jw_change_build(jm->wave, n, jm->d.fs, &w) != 0) {
		err_set(&err, ERR_INTERNAL, "", "out of memory");
		wave_not_started(jm, jm->wave, n, &err);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		jm->wave[k]->in_txn = true;
		jm->waited[k] = now - jm->wave[k]->queued_us;
		/* stored with a CONFIRMED outcome, in its write (txn_change.on_confirm) */
		jm->rows[k] = (struct st_job_state){
			jm->wave[k]->pub.id,
			jm_state_name(jm->wave[k]->pub.state == JM_RELEASING ? JM_RELEASED
									     : JM_ACTIVE),
			NULL, 0};
	}
	c = (struct txn_change){.job_id = w.jobs[0],
				.release = n == 1 && jm->wave[0]->pub.state == JM_RELEASING,
				.removals = w.removals,
				.n_removals = w.n_removals,
				.additions = w.additions,
				.n_additions = w.n_additions,
				.links = w.links,
				.n_links = w.n_links,
				.jobs = w.jobs,
				.n_jobs = w.n_jobs,
				.on_confirm = jm->rows,
				.n_on_confirm = n,
				.progress = jm_txn_progress};
	jm->n_wave = n;
	jm->txn_job = jm->wave[0];
	jm->held = false;
	jm->wave_fs_gen = fs_generation(jm->d.fs);
	if (jm->d.events.wave_started)
		jm->d.events.wave_started(jm->d.events.ctx, n, jm->waited);
	/* may end at once (nothing to change on any device): wave_done first */
	rc = jm->d.txn_start(jm->d.txn_ctx, &c, wave_done, jm, why, sizeof(why));
	jw_change_clear(&w);
	if (rc == 0)
		return;
	jm->txn_job = NULL;
	jm->n_wave = 0;
	err_set(&err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "", "%s", why);
	wave_not_started(jm, jm->wave, n, &err);
}

static void on_gather_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	jm_pump(arg);
}

/* Pumps again after us; false without a loop (or memory). */
static bool gather_timer(struct jm *jm, int64_t us)
{
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};

	if (!jm->d.loop)
		return false;
	if (!jm->gather_ev)
		jm->gather_ev = evtimer_new(loop_base(jm->d.loop), on_gather_timer, jm);
	return jm->gather_ev && evtimer_add(jm->gather_ev, &tv) == 0;
}

/*
 * Whether a wave about to form waits for the rest of its burst
 * (jobs_batch.c, jb_gather: the plans pending, a burst's gap, one yield of
 * the loop, at most one transaction's time). True: wait; plan_done, the
 * timer or the yield pumps again.
 */
static bool wave_waits(struct jm *jm)
{
	int64_t us = 0;

	switch (jb_gather(jm, &us)) {
	case JB_PLANS:
		return true;
	case JB_GAP:
		if (gather_timer(jm, us))
			return true;
		return jb_post_once(jm, &jm->yield, jm_pump); /* no timer: a yield */
	case JB_YIELD:
		return jb_post_once(jm, &jm->yield, jm_pump);
	case JB_GO:
	default:
		return false;
	}
}

/*
 * Takes the queued leaf and parallelism jobs at the head of the queue, in
 * order, up to max_wave (a job to run alone: by itself), into a wave and
 * starts it. A job planned on circuits that changed since (the epoch moved)
 * is planned again instead.
 */
static void start_wave(struct jm *jm)
{
	size_t n = 0;

	while (jm->queue_head && n < jm->max_wave) {
		struct job_rt *j = jm->queue_head;
		bool alone = j->alone && !j->repair;

		if (j->kind->rings || j->kind->gpus_only || j->repair || (n && alone))
			break;
		jm_dequeue(jm);
		if (j->pub.state == JM_PROGRAMMING && j->plan_gen != current_gen(jm)) {
			j->alone = false;
			jm_start_planning(jm, j); /* planned on circuits that changed since */
			continue;
		}
		if (j->pub.state != JM_PROGRAMMING && j->pub.state != JM_RELEASING)
			continue;
		jm->wave[n++] = j;
		if (alone)
			break;
	}
	if (n)
		run_wave(jm, n);
}

/*
 * A wave's transaction ended. Confirmed: every job takes its outcome.
 * Otherwise a wave of several jobs splits (jw_split): the jobs off the
 * failed devices are queued first and go again as a wave, the jobs on a
 * device that refused go again each alone, and the jobs on a device that
 * did not answer, or was not proven rolled back, fail with the wave's
 * outcome. A job alone takes the outcome as its own.
 */
static void wave_done(void *arg, const struct txn_outcome *o)
{
	struct jm *jm = arg;
	size_t n = jm->n_wave, n_again = 0, n_alone = 0, n_fail = 0;
	struct job_rt **wave = jm->settling;

	memcpy(wave, jm->wave, n * sizeof(*wave));
	jm->n_wave = 0;
	jm->txn_job = NULL;
	for (size_t k = 0; k < n; k++)
		wave[k]->in_txn = false;
	if (o->result == TXN_CONFIRMED && jm->fs_seen == jm->wave_fs_gen &&
	    fs_generation(jm->d.fs) == jm->wave_fs_gen + 1)
		/* the wave's own change alone (one fs_apply): every later plan kept
		 * clear of it; anything else moves the epoch (current_gen) */
		jm->fs_seen = fs_generation(jm->d.fs);
	if (o->store_failed)
		jm_store_failed(jm, o->store_error, o->store_rc);
	if (o->total_ms > 0)
		jm->gather_us = o->total_ms * 1000 < JM_GATHER_MIN_US	? JM_GATHER_MIN_US
				: o->total_ms * 1000 > JM_GATHER_MAX_US ? JM_GATHER_MAX_US
									: o->total_ms * 1000;
	if (n > 1 && o->result != TXN_CONFIRMED && !o->store_failed) {
		enum jw_fate *fate = jm->fates;

		jw_split(jm->f, wave, n, jm->d.fs, o, fate);
		/* they waited a transaction already: the next wave gathers nothing */
		jm->held = true;
		jm->hold_since_us = clk_mono_us(jm->d.clock) - jm->gather_us;
		/* queued first, in wave order: AGAIN jobs, then each ALONE job */
		for (size_t k = n; k-- > 0;)
			if (fate[k] == JW_ALONE) {
				wave[k]->alone = true;
				jm_enqueue_first(jm, wave[k]);
				n_alone++;
			}
		for (size_t k = n; k-- > 0;)
			if (fate[k] == JW_AGAIN) {
				jm_enqueue_first(jm, wave[k]);
				n_again++;
			}
		for (size_t k = 0; k < n; k++)
			if (fate[k] == JW_FAIL)
				jm->names[n_fail++] = wave[k]->pub.id;
		log_msg(LOG_NOTICE,
			"transaction %llu of a wave of %zu jobs did not go through (%s): %zu go "
			"again at once, %zu each alone, %zu failed with it",
			(unsigned long long)o->txn_id, n, o->message, n_again, n_alone, n_fail);
		if (jm->d.events.transaction_done && o->txn_id)
			jm->d.events.transaction_done(jm->d.events.ctx, jm->names, n_fail, o);
		for (size_t k = 0; k < n; k++)
			if (fate[k] == JW_FAIL)
				settle_txn(jm, wave[k], o);
	} else {
		size_t n_pre = 0;

		for (size_t k = 0; k < n; k++)
			jm->names[k] = wave[k]->pub.id;
		if (jm->d.events.transaction_done && o->txn_id)
			jm->d.events.transaction_done(jm->d.events.ctx, jm->names, n, o);
		/* a confirmed wave's ACTIVE and RELEASED went with its outcome
		 * (on_confirm, run_wave): its jobs' own writes of them are skipped */
		for (size_t k = 0; o->result == TXN_CONFIRMED && !o->store_failed && k < n; k++)
			if (wave[k]->pub.state == JM_RELEASING || !wave[k]->release_requested) {
				jm->wave[n_pre] = wave[k]; /* free until the next wave forms */
				jm->next_states[n_pre++] = wave[k]->pub.state == JM_RELEASING
								   ? JM_RELEASED
								   : JM_ACTIVE;
			}
		if (o->states_stored)
			jm_mark_prestored(jm->wave, jm->next_states, n_pre);
		else
			jm_prestore_states(jm, jm->wave, jm->next_states, n_pre);
		for (size_t k = 0; k < n; k++)
			settle_txn(jm, wave[k], o);
	}
	jm_pump(jm);
	plan_next(jm); /* a re-plan may have waited for this wave */
}

/* ---- ring repairs ---- */

/*
 * Queues the repair of the first ring of j (ACTIVE, no transaction of its
 * own queued or running) that holds a faulty node, ahead of all other
 * work. The repair is computed here, on the loop (hbd_repair is a bypass-extend
 * or one ring's re-placement: microseconds), so that the reaction to a
 * fault does not wait behind the planner queue.
 */
void jm_queue_repairs(struct jm *jm, struct job_rt *j)
{
	const struct rg_ring *ring;
	enum rg_change kind;
	int failed = -1, rc;

	if (!jm->d.rings || !j->kind->rings || j->pub.state != JM_ACTIVE || j->repair ||
	    j->queued || j->in_txn || j->repair_failed)
		return;
	ring = jr_broken_ring(jm->d.rings, j->pub.id, &failed);
	if (!ring)
		return;
	jp_change_clear(&j->change);
	rc = jr_repair_change(jm->d.rings, jm_drained_nodes(jm), ring, failed, &j->pub.ring,
			      jm_now_ms(jm), &j->change, &kind);
	if (rc) {
		log_msg(LOG_ERR, "job %s: cannot repair ring %d after node %d failed: %s",
			j->pub.id, ring->index, failed, strerror(-rc));
		jp_change_clear(&j->change);
		j->repair_failed = true;
		return;
	}
	log_msg(LOG_NOTICE, "job %s: ring %d lost node %d: %s", j->pub.id, ring->index, failed,
		st_ring_change_name(kind));
	j->fault_planned_us = clk_mono_us(jm->d.clock);
	j->repair = true;
	jm_enqueue_first(jm, j);
}

/*
 * Starts the next queued transaction when none is running: a repair or a
 * ring or rail job alone, else a wave of the leaf and parallelism jobs at
 * the head of the queue.
 */
void jm_pump(struct jm *jm)
{
	while (!jm->stopping && !jm->txn_job && !jm->external.running &&
	       (jm->queue_head || jm->admit_head)) {
		struct job_rt *j = jm->queue_head;

		if (!j || (!j->repair && !j->kind->rings && !j->kind->gpus_only)) {
			if (wave_waits(jm))
				return;
			if (jm->admit_head)
				jb_store_admitted(jm); /* one write for the wave's plans */
			if (jm->queue_head)
				start_wave(jm);
			continue;
		}
		jm_dequeue(jm);
		if (j->repair) {
			start_txn(jm, j);
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING && j->plan_gen != current_gen(jm)) {
			jm_start_planning(jm, j); /* planned on circuits that changed since */
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING || j->pub.state == JM_RELEASING)
			start_txn(jm, j);
	}
}
