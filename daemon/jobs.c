/*
 * jobs.c - implementation of jobs.h: the job table, requests and planning
 * (the device side, transactions and recovery, is in jobs_txn.c).
 *
 * Job state machine (all transitions on the loop thread):
 *
 *   submit --> PENDING --(stored)--> PLANNING --(plan on pool)--> plan_done
 *   plan_done: stale snapshot ............ PLANNING again (re-plan)
 *              demand does not fit ........ FAILED  (nothing touched)
 *              fits ....................... PROGRAMMING, queued
 *   pump (one transaction at a time):
 *              snapshot changed since plan  PLANNING again
 *              intent stored, sb_engine_start
 *   txn_done:  committed .................. ACTIVE   (or RELEASED)
 *              rolled back / refused ...... FAILED   (release: stays ACTIVE)
 *              rollback unproven .......... FAILED, intent FAILED (reconcile)
 *   release:   ACTIVE --> RELEASING, queued --> txn --> RELEASED
 *              PENDING/PLANNING/FAILED --> RELEASED at once (nothing on devices)
 *
 * A parallelism demand (planner delta-fast or a baseline) is first planned
 * into a leaf demand on the pool (delta_plan_job(): pod-level circuits
 * shared out to the leaves of the job's GPUs) before the job exists; a
 * refused spec creates no job. The job then keeps that leaf demand and
 * goes the leaf-centric way above, so a re-plan on a stale snapshot never
 * searches again. A job restored from the store has only its request: its
 * first plan searches again (deterministic for a seed without a time
 * budget), in the same pool task as the leaf-centric plan.
 *
 * Drains: a drained device gets no new circuits. Pinned plans see blockers
 * on its free ports; a plan allowed to move other jobs' circuits (replan)
 * that puts a new cross-connect on a drained device is discarded and the
 * job planned pinned instead.
 *
 * Invariants:
 *  1. At most one transaction runs; its intent is in the store before
 *     sb_engine_start() and its outcome is stored before the next starts.
 *  2. A plan is applied only if the circuits did not change since its
 *     snapshot (fs_generation), so plans never overlap.
 *  3. Every plan passes l2_check() on the whole fabric before it is queued,
 *     and the transaction re-checks the read-back state with it.
 *  4. A job with waiters is answered exactly once per waiter, when it
 *     settles (ACTIVE, RELEASED, FAILED) or is refused.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l2check.h"
#include "pool.h"


/* A plan whose snapshot went stale this often in a row is refused. */
#define JM_MAX_REPLANS 16

static const char *const state_names[] = {
	[JM_PENDING] = "PENDING",   [JM_PLANNING] = "PLANNING", [JM_PROGRAMMING] = "PROGRAMMING",
	[JM_ACTIVE] = "ACTIVE",     [JM_RELEASING] = "RELEASING", [JM_RELEASED] = "RELEASED",
	[JM_FAILED] = "FAILED",
};

const char *jm_state_name(enum jm_state s)
{
	return s >= JM_PENDING && s <= JM_FAILED ? state_names[s] : "UNKNOWN";
}

static enum jm_state state_parse(const char *s)
{
	for (int i = JM_PENDING; i <= JM_FAILED; i++)
		if (s && strcmp(s, state_names[i]) == 0)
			return (enum jm_state)i;
	return JM_FAILED;
}

int64_t jm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 4, 5))) void jm_set_error(struct jm_error *e,
							    enum jm_status status,
							    const char *field, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

static void free_figures(struct jm_figures *fig)
{
	free(fig->unplaced);
	free(fig->moved_jobs);
	memset(fig, 0, sizeof(*fig));
}

static void free_job(struct job_rt *j)
{
	if (!j)
		return;
	free(j->pub.raw);
	free(j->pub.demand);
	jm_workload_free(j->pub.workload);
	free_figures(&j->pub.figures);
	free(j->removals);
	free(j->additions);
	free(j->add_owner);
	free(j->links);
	free(j->plan_links);
	free(j);
}

struct job_rt *jm_find_job(const struct jm *jm, const char *id)
{
	for (size_t i = 0; i < jm->n_jobs; i++)
		if (strcmp(jm->jobs[i]->pub.id, id) == 0)
			return jm->jobs[i];
	return NULL;
}

const struct jm_job *jm_find(const struct jm *jm, const char *id)
{
	struct job_rt *j = jm_find_job(jm, id);

	return j ? &j->pub : NULL;
}

size_t jm_count(const struct jm *jm)
{
	return jm->n_jobs;
}

const struct jm_job *jm_at(const struct jm *jm, size_t i)
{
	return i < jm->n_jobs ? &jm->jobs[i]->pub : NULL;
}

bool jm_busy(const struct jm *jm)
{
	return jm->txn != NULL;
}

void jm_set_drained(struct jm *jm, int device_id, bool drained)
{
	if (device_id < 0 || device_id >= jm->d.cfg->n_devices || jm->drained[device_id] == drained)
		return;
	jm->drained[device_id] = drained;
	jm->n_drained += drained ? 1 : -1;
}

bool jm_drained(const struct jm *jm, int device_id)
{
	return device_id >= 0 && device_id < jm->d.cfg->n_devices && jm->drained[device_id];
}

void jm_stop(struct jm *jm)
{
	jm->stopping = true;
}

int jm_push_ptr(void ***arr, size_t *n, size_t *cap, void *p)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void **a = realloc(*arr, ncap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*arr = a;
		*cap = ncap;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

/* ---- answering and state changes ---- */

static int add_waiter(struct job_rt *j, jm_answer_fn fn, void *ctx, bool created)
{
	struct waiter *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct waiter){ fn, ctx, created, j->waiters };
	j->waiters = w;
	return 0;
}

/* Answers every waiter of j (err NULL: success). */
void jm_settle(struct job_rt *j, const struct jm_error *err)
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

/* Moves j to state (persisted) and tells the event stream. */
void jm_set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason)
{
	j->pub.state = state;
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", reason ? reason : "");
	j->pub.updated_ms = jm_now_ms();
	if (st_job_set_state(jm->d.store, j->pub.id, jm_state_name(state), reason,
			     j->pub.updated_ms) != 0)
		fprintf(stderr, "<3>job %s: cannot store state %s\n", j->pub.id,
			jm_state_name(state));
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
}

void jm_fail_job(struct jm *jm, struct job_rt *j, const struct jm_error *err)
{
	char reason[sizeof(err->field) + sizeof(err->message) + 4];

	snprintf(reason, sizeof(reason), "%s%s%s", err->field, err->field[0] ? ": " : "",
		 err->message);
	jm_set_state(jm, j, JM_FAILED, reason);
	jm_settle(j, err);
}

/* ---- planning ---- */

struct plan_task {
	struct pool_task pt; /* runs plan_work, then plan_done */
	struct jm *jm;
	char job_id[72];
	bool dry;
	jm_answer_fn answer; /* dry runs and new workload submissions */
	void *ctx;
	struct ocs_fabric f;
	char planner[32];
	bool replan;
	struct lc_demand *demand;
	size_t n_demand;
	/* The configured cross-connects (n_configured, first) and the drain
	 * blockers after them (n_existing in all). */
	struct ocs_xc *existing;
	size_t n_existing, n_configured;
	bool *drained; /* by device id, NULL when nothing is drained */
	/* Leaf-spine links other live jobs load (planned around, pinned path). */
	struct lc_leaf_usage *usage;
	size_t n_usage;
	unsigned long gen;
	/*
	 * A global re-plan (replan) plans every job holding circuits: names[0]
	 * is this job, names[k] the others; conf_owner the owner of each
	 * configured cross-connect; others the other jobs' demands.
	 */
	char (*names)[72];
	size_t n_names;
	int *conf_owner;
	struct lc_demand *others;
	int *others_owner;
	size_t n_others;
	/* A workload whose leaf demand is planned first (NULL: demand given);
	 * ga_only: a new submission, only that (the request is in sub). */
	struct jm_workload *wl;
	bool ga_only;
	struct {
		char *id, *key;
		void *raw;
		size_t raw_len;
		bool allow_move;
	} sub;
	/* results */
	int delta_rc;
	struct delta_error delta_err;
	bool has_delta;
	struct jm_delta_figures delta;
	bool report_search; /* the search's time goes into this plan's metric */
	bool drain_fallback; /* the replan touched a drained device */
	bool owner_fallback; /* the replan's circuits could not be attributed */
	int *xc_owner;       /* per plan->xcs after a global re-plan: index into names */
	bool *xc_reowned;    /* a kept cross-connect that changes owner */
	bool *moved_owner;   /* per name: some of its circuits move */
	int *assign_owner;   /* per plan->assignment after a global re-plan: index into names */
	/* A shared (leaf, spine) uplink the plan loads beyond tau (leaf -1: none). */
	int over_leaf, over_spine, over_load;
	size_t n_new_global; /* new cross-connects of a global re-plan */
	int rc;
	struct lc_plan *plan;
	int l2_violations;
	char l2_reason[200];
};

/* The workload's leaf demand (worker side): t->demand and t->delta. */
static void plan_workload(struct plan_task *t)
{
	struct lc_demand *d = NULL;
	size_t n = 0;

	t->delta_rc = jm_plan_workload(&t->f, t->planner, t->wl, pool_solver_pool(t->jm->d.pool), &d,
				       &n, &t->delta, &t->delta_err);
	if (t->delta_rc == 0) {
		free(t->demand);
		t->demand = d;
		t->n_demand = n;
		t->has_delta = true;
	}
}

static int run_planner(struct plan_task *t, const struct lc_demand *demand, size_t n_demand,
		       bool replan, size_t n_existing)
{
	/* a global re-plan plans every job holding circuits: no usage is left */
	struct lc_options opt = { .realize = true,
				  .replan = replan,
				  .usage = replan ? NULL : t->usage,
				  .n_usage = replan ? 0 : t->n_usage };

	if (strcmp(t->planner, "pod-centric") == 0)
		return pc_plan(&t->f, demand, n_demand, t->existing, n_existing, &opt, &t->plan);
	return lc_plan(&t->f, demand, n_demand, t->existing, n_existing, &opt, &t->plan);
}

static int xc_cmp(const void *a, const void *b);

/* Whether a replan puts a cross-connect that is not configured on a drained device. */
static bool touches_drained(const struct plan_task *t)
{
	struct ocs_xc *conf;
	bool hit = false;

	if (!t->drained)
		return false;
	conf = malloc((t->n_configured ? t->n_configured : 1) * sizeof(*conf));
	if (!conf)
		return true; /* cannot tell: plan pinned */
	memcpy(conf, t->existing, t->n_configured * sizeof(*conf));
	qsort(conf, t->n_configured, sizeof(*conf), xc_cmp);
	for (size_t i = 0; i < t->plan->n_xcs && !hit; i++) {
		const struct ocs_xc *xc = &t->plan->xcs[i];
		int id = ocs_fabric_device_id(&t->f, xc->group, xc->device);

		hit = id >= 0 && t->drained[id] &&
		      !bsearch(xc, conf, t->n_configured, sizeof(*conf), xc_cmp);
	}
	free(conf);
	return hit;
}

/*
 * A global re-plan of this job's demand and every other job's (worker
 * side): the plan, and who owns each of its cross-connects. Returns
 * false when the plan cannot be used as is (the caller plans pinned).
 */
static bool global_replan(struct plan_task *t)
{
	size_t n = t->n_demand + t->n_others;
	struct lc_demand *all = malloc((n ? n : 1) * sizeof(*all));
	int *leaf_owner = malloc((size_t)ocs_fabric_leaves(&t->f) * sizeof(*leaf_owner));
	bool ok = false;

	if (!all || !leaf_owner)
		goto out;
	for (int l = 0; l < ocs_fabric_leaves(&t->f); l++)
		leaf_owner[l] = -1;
	for (size_t i = 0; i < n; i++) {
		all[i] = i < t->n_demand ? t->demand[i] : t->others[i - t->n_demand];
		int o = i < t->n_demand ? 0 : t->others_owner[i - t->n_demand];

		if ((leaf_owner[all[i].a] >= 0 && leaf_owner[all[i].a] != o) ||
		    (leaf_owner[all[i].b] >= 0 && leaf_owner[all[i].b] != o))
			goto out; /* two jobs on one leaf: cannot tell their circuits apart */
		leaf_owner[all[i].a] = leaf_owner[all[i].b] = o;
	}
	t->rc = run_planner(t, all, n, true, t->n_configured);
	if (t->rc)
		goto out;
	if (touches_drained(t)) {
		t->drain_fallback = true;
		goto out;
	}
	t->assign_owner = malloc((t->plan->n_assignment ? t->plan->n_assignment : 1) *
				 sizeof(*t->assign_owner));
	if (!t->assign_owner) {
		t->owner_fallback = true;
		goto out;
	}
	for (size_t i = 0; i < t->plan->n_assignment; i++)
		t->assign_owner[i] = leaf_owner[t->plan->assignment[i].a];
	t->xc_owner = malloc((t->plan->n_xcs ? t->plan->n_xcs : 1) * sizeof(*t->xc_owner));
	t->xc_reowned = malloc((t->plan->n_xcs ? t->plan->n_xcs : 1) * sizeof(*t->xc_reowned));
	t->moved_owner = calloc(t->n_names + 1, sizeof(*t->moved_owner));
	if (!t->xc_owner || !t->xc_reowned || !t->moved_owner ||
	    jm_attribute_owners(&t->f, t->plan, leaf_owner, t->existing, t->conf_owner,
				t->n_configured, t->xc_owner, t->xc_reowned) != 0) {
		t->owner_fallback = true;
		goto out;
	}
	/* Jobs whose circuits move: owners of dropped or re-owned cross-connects. */
	for (size_t i = 0; i < t->plan->n_xcs; i++)
		if (t->xc_reowned[i])
			t->moved_owner[t->xc_owner[i]] = true;
	qsort(t->plan->moved, t->plan->n_moved, sizeof(*t->plan->moved), xc_cmp);
	for (size_t c = 0; c < t->n_configured; c++)
		if (bsearch(&t->existing[c], t->plan->moved, t->plan->n_moved,
			    sizeof(*t->plan->moved), xc_cmp))
			t->moved_owner[t->conf_owner[c]] = true;
	ok = true;
out:
	if (!ok) {
		free(t->xc_owner);
		free(t->xc_reowned);
		free(t->assign_owner);
		t->xc_owner = NULL;
		t->xc_reowned = NULL;
		t->assign_owner = NULL;
		if (t->rc == 0) {
			lc_plan_free(t->plan);
			t->plan = NULL;
		}
	}
	free(all);
	free(leaf_owner);
	return ok;
}

/*
 * With other jobs on the demand's leaves (pinned path): the first (leaf,
 * spine) uplink that the plan loads and that, with the other jobs' links,
 * carries more than tau (worker side; over_leaf -1 when there is none).
 * Only the plan's own links count: an uplink other jobs already overload
 * (a pod-centric job's) does not refuse a plan that adds nothing there.
 */
static void find_overload(struct plan_task *t)
{
	struct lc_leaf_usage *mine = NULL;
	size_t n_mine = 0;

	t->over_leaf = -1;
	if (!t->n_usage || !t->plan || strcmp(t->planner, "pod-centric") == 0 ||
	    lc_usage_from_assignment(t->plan->assignment, t->plan->n_assignment, &mine,
				     &n_mine) != 0)
		return;
	/* both lists are sorted by (leaf, spine), one entry per pair: walk them together */
	for (size_t i = 0, u = 0; i < n_mine && t->over_leaf < 0; i++) {
		int load = mine[i].links;

		while (u < t->n_usage &&
		       (t->usage[u].leaf < mine[i].leaf ||
			(t->usage[u].leaf == mine[i].leaf && t->usage[u].spine < mine[i].spine)))
			u++;
		if (u < t->n_usage && t->usage[u].leaf == mine[i].leaf &&
		    t->usage[u].spine == mine[i].spine)
			load += t->usage[u].links;
		if (load > t->f.tau) {
			t->over_leaf = mine[i].leaf;
			t->over_spine = mine[i].spine;
			t->over_load = load;
		}
	}
	free(mine);
}

static void plan_work(struct pool_task *pt)
{
	struct plan_task *t = OCSD_CONTAINER_OF(pt, struct plan_task, pt);
	struct l2_violation v;

	if (t->wl && t->n_demand == 0) {
		plan_workload(t);
		if (t->delta_rc || t->ga_only)
			return;
	}
	/* A global re-plan pins nothing (the blockers would only look like
	 * circuits); when it touches a drained device or its circuits cannot be
	 * attributed to their jobs, the job is planned pinned instead. */
	if (!t->replan || (!global_replan(t) && t->rc == 0)) {
		t->rc = run_planner(t, t->demand, t->n_demand, false, t->n_existing);
		if (t->rc == 0)
			find_overload(t);
	}
	if (t->rc == 0) {
		t->l2_violations = l2_check(&t->f, t->plan->xcs, t->plan->n_xcs, &v, 1);
		if (t->l2_violations)
			snprintf(t->l2_reason, sizeof(t->l2_reason),
				 "group %d device %d %d->%d: %s", v.xc.group, v.xc.device, v.xc.in,
				 v.xc.out, v.reason);
	}
}

static void free_task(struct plan_task *t)
{
	lc_plan_free(t->plan);
	free(t->demand);
	free(t->existing);
	free(t->drained);
	free(t->names);
	free(t->conf_owner);
	free(t->others);
	free(t->others_owner);
	free(t->xc_owner);
	free(t->xc_reowned);
	free(t->assign_owner);
	free(t->usage);
	free(t->moved_owner);
	jm_workload_free(t->wl);
	free(t->sub.id);
	free(t->sub.key);
	free(t->sub.raw);
	free(t);
}

static int xc_cmp(const void *a, const void *b)
{
	const struct ocs_xc *x = a, *y = b;

	if (x->group != y->group)
		return x->group - y->group;
	if (x->device != y->device)
		return x->device - y->device;
	if (x->in != y->in)
		return x->in - y->in;
	return x->out - y->out;
}

/* Cross-connects of `set` that are not in sorted `base` (malloc'd). */
static struct ocs_xc *difference(const struct ocs_xc *set, size_t n_set, const struct ocs_xc *base,
				 size_t n_base, size_t *n_out)
{
	struct ocs_xc *out = malloc((n_set ? n_set : 1) * sizeof(*out));

	*n_out = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n_set; i++)
		if (!bsearch(&set[i], base, n_base, sizeof(*base), xc_cmp))
			out[(*n_out)++] = set[i];
	return out;
}

static void fill_figures(struct jm_figures *fig, const struct plan_task *t, size_t n_new)
{
	int requested = 0, unplaced = 0;

	free_figures(fig);
	snprintf(fig->planner, sizeof(fig->planner), "%s", t->planner);
	for (size_t i = 0; i < t->n_demand; i++)
		requested += t->demand[i].links;
	for (size_t i = 0; i < t->plan->n_unplaced; i++)
		unplaced += t->plan->unplaced[i].links;
	fig->links_requested = requested;
	fig->links_placed = requested - unplaced;
	/* A circuit is two one-way cross-connects, whatever the wiring. */
	fig->circuits_new = (int)(n_new / 2);
	fig->circuits_moved = (int)(t->plan->changed_existing / 2);
	fig->max_contention = t->plan->max_contention;
	fig->plan_us = (int64_t)((t->plan->plan_ms + t->plan->realize_ms) * 1000.0);
	fig->has_delta = t->has_delta;
	fig->delta = t->delta;
	for (size_t k = 1; t->moved_owner && k < t->n_names; k++) {
		char (*m)[72];

		if (!t->moved_owner[k])
			continue;
		m = realloc(fig->moved_jobs, (fig->n_moved_jobs + 1) * sizeof(*m));
		if (!m)
			break;
		fig->moved_jobs = m;
		snprintf(fig->moved_jobs[fig->n_moved_jobs++], sizeof(*m), "%s", t->names[k]);
	}
	if (t->has_delta)
		fig->plan_us += (int64_t)(t->delta.plan_ms * 1000.0);
	if (t->plan->n_unplaced) {
		fig->unplaced = malloc(t->plan->n_unplaced * sizeof(*fig->unplaced));
		if (fig->unplaced) {
			memcpy(fig->unplaced, t->plan->unplaced,
			       t->plan->n_unplaced * sizeof(*fig->unplaced));
			fig->n_unplaced = t->plan->n_unplaced;
		}
	}
}

/* Why a plan cannot be applied, or NULL when it can. */
static bool plan_refusal(const struct plan_task *t, struct jm_error *err)
{
	if (t->delta_rc) {
		char field[128];

		jm_delta_field(t->delta_err.field, field, sizeof(field));
		if (t->delta_rc == -EINVAL)
			jm_set_error(err, JM_INVALID, field, "%s", t->delta_err.reason);
		else if (t->delta_rc == -ENOSPC)
			jm_set_error(err, JM_EXHAUSTED, field, "%s; nothing was touched",
				     t->delta_err.reason);
		else
			jm_set_error(err, JM_INTERNAL, "", "DELTA planner failed: %s",
				     strerror(-t->delta_rc));
		return true;
	}
	/* A parallelism job's leaf demand is the search's, not the caller's. */
	const char *demand_field = t->has_delta ? "parallelism" : "leaf_demand";

	if (t->rc == -EINVAL) {
		jm_set_error(err, t->has_delta ? JM_INTERNAL : JM_INVALID, demand_field,
			     "the planner refused the %sdemand",
			     t->has_delta ? "planned leaf " : "");
		return true;
	}
	if (t->rc) {
		jm_set_error(err, JM_INTERNAL, "", "planner failed: %s", strerror(-t->rc));
		return true;
	}
	if (t->l2_violations) {
		jm_set_error(err, JM_INTERNAL, "",
			  "the plan failed the L2 symmetry check (%d violations, first: %s); "
			  "nothing was touched",
			  t->l2_violations, t->l2_reason);
		return true;
	}
	if (t->plan && (t->plan->n_unplaced || t->plan->unrealized_circuits)) {
		int links = 0;
		const struct lc_demand *u = t->plan->unplaced;

		for (size_t i = 0; i < t->plan->n_unplaced; i++)
			links += u[i].links;
		if (t->plan->n_unplaced)
			jm_set_error(err, JM_EXHAUSTED, demand_field,
				  "%d link(s) in %zu leaf pair(s) do not fit on the free spine "
				  "ports%s (first: leaves %d-%d, %d link(s))%s; nothing was touched",
				  links, t->plan->n_unplaced,
				  t->n_usage ? " or the uplinks other jobs leave on shared leaves" : "",
				  u[0].a, u[0].b, u[0].links,
				  t->drain_fallback ? ", and moving other jobs' circuits would have "
						      "needed a drained device" : "");
		else
			jm_set_error(err, JM_EXHAUSTED, demand_field,
				  "%zu circuit(s) found no free OCS ports (first: pods %d-%d in "
				  "group %d)%s; nothing was touched",
				  t->plan->unrealized_circuits, t->plan->unrealized[0].i,
				  t->plan->unrealized[0].j, t->plan->unrealized[0].h,
				  t->drain_fallback ? ", and moving other jobs' circuits would have "
						      "needed a drained device" : "");
		return true;
	}
	if (t->plan && t->over_leaf >= 0) {
		jm_set_error(err, JM_EXHAUSTED, demand_field,
			     "leaf %d is shared with other jobs: its uplinks to spine %d would carry %d "
			     "links (tau %d), which polarizes routing; nothing was touched",
			     t->over_leaf, t->over_spine, t->over_load, t->f.tau);
		return true;
	}
	return false;
}

/* The plan's leaf-spine links become j's plan links (loop side). 0 or -ENOMEM. */
static int take_plan_links(struct jm *jm, struct job_rt *j, const struct plan_task *t)
{
	const struct lc_plan *p = t->plan;

	(void)jm;
	free(j->plan_links);
	j->n_plan_links = 0;
	j->plan_links = malloc((p->n_assignment ? p->n_assignment : 1) * sizeof(*j->plan_links));
	if (!j->plan_links)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_assignment; i++) {
		const struct lc_spine_links *l = &p->assignment[i];
		const char *owner = t->assign_owner ? t->names[t->assign_owner[i]] : j->pub.id;
		struct st_link *out = &j->plan_links[j->n_plan_links++];

		snprintf(out->job_id, sizeof(out->job_id), "%s", owner);
		out->a = l->a;
		out->b = l->b;
		out->h = l->h;
		out->links = l->links;
	}
	return 0;
}

static void submit_planned(struct plan_task *t);

/*
 * The transaction of a global re-plan (loop side, the fabric unchanged
 * since the snapshot): new cross-connects with their owners, dropped ones,
 * and kept ones that change owner (removed and added again: the devices do
 * not change, the circuit table does). 0 or -ENOMEM.
 */
static int take_global_plan(struct jm *jm, struct job_rt *j, struct plan_task *t)
{
	const struct lc_plan *p = t->plan;
	size_t n = p->n_xcs ? p->n_xcs : 1;

	j->additions = malloc(n * sizeof(*j->additions));
	j->add_owner = malloc(n * sizeof(*j->add_owner));
	j->removals = malloc((p->n_moved + n) * sizeof(*j->removals));
	j->n_additions = j->n_removals = 0;
	t->n_new_global = 0;
	if (!j->additions || !j->add_owner || !j->removals)
		return -ENOMEM;
	for (size_t x = 0; x < p->n_xcs; x++) {
		bool configured = fs_contains(jm->d.fs, &p->xcs[x]);

		if (configured && !t->xc_reowned[x])
			continue;
		if (configured)
			j->removals[j->n_removals++] = p->xcs[x];
		else
			t->n_new_global++;
		j->additions[j->n_additions] = p->xcs[x];
		snprintf(j->add_owner[j->n_additions++], sizeof(*j->add_owner), "%s",
			 t->names[t->xc_owner[x]]);
	}
	for (size_t m = 0; m < p->n_moved; m++)
		if (fs_contains(jm->d.fs, &p->moved[m]))
			j->removals[j->n_removals++] = p->moved[m];
	return 0;
}

static void plan_done(struct pool_task *pt)
{
	struct plan_task *t = OCSD_CONTAINER_OF(pt, struct plan_task, pt);
	struct jm *jm = t->jm;
	struct job_rt *j;
	struct jm_error err = { 0 };
	size_t n_new = 0;
	struct ocs_xc *added = NULL;
	int rc = 0;

	if (t->ga_only) {
		submit_planned(t);
		return;
	}
	if (t->rc == 0 && t->plan && jm->d.events.plan_finished)
		jm->d.events.plan_finished(jm->d.events.ctx, t->planner,
					   (t->plan->plan_ms + t->plan->realize_ms +
					    (t->report_search ? t->delta.plan_ms : 0)) /
						   1000.0);
	if (t->drain_fallback)
		fprintf(stderr,
			"<5>%s %s: the plan moving other jobs' circuits needed a drained device; "
			"planned without moving them\n",
			t->dry ? "dry run of" : "job", t->job_id);
	if (t->rc == 0 && t->plan)
		qsort(t->existing, t->n_existing, sizeof(*t->existing), xc_cmp);
	if (t->rc == 0 && t->plan && !t->l2_violations)
		added = difference(t->plan->xcs, t->plan->n_xcs, t->existing, t->n_existing, &n_new);
	if (t->dry) {
		struct jm_job shadow = { 0 };
		bool refused = plan_refusal(t, &err);

		if (t->plan && (!refused || err.status == JM_EXHAUSTED)) {
			/* A dry run reports what does not fit as figures, not as an error. */
			fill_figures(&shadow.figures, t, n_new);
			t->answer(t->ctx, NULL, &shadow, false, added, n_new);
			free_figures(&shadow.figures);
		} else {
			t->answer(t->ctx, &err, NULL, false, NULL, 0);
		}
		free(added);
		free_task(t);
		return;
	}
	j = jm_find_job(jm, t->job_id);
	if (!j || j->pub.state != JM_PLANNING) {
		free(added);
		free_task(t); /* released while planning */
		return;
	}
	if (t->has_delta && t->delta_rc == 0 && j->pub.n_demand == 0) {
		/* Keep what the search found: re-plans start from it. */
		free(j->pub.demand);
		j->pub.demand = t->demand;
		j->pub.n_demand = t->n_demand;
		t->demand = malloc((t->n_demand ? t->n_demand : 1) * sizeof(*t->demand));
		if (t->demand)
			memcpy(t->demand, j->pub.demand, t->n_demand * sizeof(*t->demand));
		else
			t->n_demand = 0;
		j->pub.figures.has_delta = true;
		j->pub.figures.delta = t->delta;
	}
	if (t->gen != fs_generation(jm->d.fs) && t->rc == 0 && t->plan &&
	    ++j->replans <= JM_MAX_REPLANS) {
		free(added);
		free_task(t);
		jm_start_planning(jm, j); /* the snapshot went stale: plan again */
		return;
	}
	if (t->gen != fs_generation(jm->d.fs) && t->rc == 0 && t->plan) {
		jm_set_error(&err, JM_UNAVAILABLE, "",
			  "the fabric changed during each of %d plans; try again", JM_MAX_REPLANS);
	} else if (!plan_refusal(t, &err) && !added) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	}
	if (err.status != JM_OK) {
		if (t->rc == 0 && t->plan)
			fill_figures(&j->pub.figures, t, n_new);
		free(added);
		free_task(t);
		jm_fail_job(jm, j, &err);
		return;
	}
	free(j->additions);
	free(j->removals);
	free(j->add_owner);
	j->add_owner = NULL;
	j->removals = NULL;
	j->n_removals = 0;
	if (t->xc_owner) {
		/* A global re-plan: each cross-connect goes to the job it serves. */
		free(added);
		rc = take_global_plan(jm, j, t);
		n_new = t->n_new_global;
	} else {
		j->additions = added;
		j->n_additions = n_new;
		if (t->plan->n_moved) {
			/* Only what is configured is removed (drain blockers never were). */
			j->removals = malloc(t->plan->n_moved * sizeof(*j->removals));
			rc = j->removals ? 0 : -ENOMEM;
			for (size_t i = 0; j->removals && i < t->plan->n_moved; i++)
				if (fs_contains(jm->d.fs, &t->plan->moved[i]))
					j->removals[j->n_removals++] = t->plan->moved[i];
		}
	}
	if (rc == 0)
		rc = take_plan_links(jm, j, t);
	if (rc == 0)
		fill_figures(&j->pub.figures, t, n_new);
	j->plan_gen = t->gen;
	free_task(t);
	if (rc == 0) {
		jm_set_state(jm, j, JM_PROGRAMMING, NULL);
		rc = jm_push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j);
	}
	if (rc) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		jm_fail_job(jm, j, &err);
		return;
	}
	jm_pump(jm);
}

/*
 * Copies the inputs of a plan of job `self` for the pool (the worker sees
 * nothing else). With a workload and no demand the worker plans the leaf
 * demand first; delta: the figures of the search that made the given
 * demand, or NULL.
 */
static struct plan_task *new_task(struct jm *jm, const char *self, const char *planner,
				  bool replan, const struct lc_demand *demand, size_t n_demand,
				  const struct jm_workload *wl, const struct jm_figures *delta)
{
	struct plan_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->pt.work = plan_work;
	t->pt.done = plan_done;
	t->jm = jm;
	t->over_leaf = -1;
	if (jm_others_usage(jm, self, &t->usage, &t->n_usage) != 0) {
		free_task(t);
		return NULL;
	}
	t->f = *jm->f;
	snprintf(t->planner, sizeof(t->planner), "%s", planner);
	t->replan = replan;
	if (delta && delta->has_delta) {
		t->has_delta = true;
		t->delta = delta->delta;
	}
	if (wl && n_demand == 0) {
		t->report_search = true;
		t->wl = jm_workload_dup(wl);
		if (!t->wl) {
			free_task(t);
			return NULL;
		}
	}
	t->demand = malloc((n_demand ? n_demand : 1) * sizeof(*demand));
	t->existing = fs_snapshot(jm->d.fs, &t->n_existing);
	t->n_configured = t->n_existing;
	t->gen = fs_generation(jm->d.fs);
	if (t->existing && jm->n_drained > 0) {
		t->drained = malloc((size_t)jm->d.cfg->n_devices * sizeof(*t->drained) + 1);
		if (!t->drained) {
			free_task(t);
			return NULL;
		}
		memcpy(t->drained, jm->drained, (size_t)jm->d.cfg->n_devices * sizeof(*t->drained));
	}
	if (t->existing && jm->n_drained > 0) {
		/* Drained devices: blockers the planner must treat as pinned. */
		size_t n_blk = 0;
		struct ocs_xc *blk = fs_drain_blockers(jm->d.fs, jm->drained, &n_blk);
		struct ocs_xc *all = blk ? realloc(t->existing,
						   (t->n_existing + n_blk + 1) * sizeof(*all))
					 : NULL;

		if (!all) {
			free(blk);
			free_task(t);
			return NULL;
		}
		memcpy(all + t->n_existing, blk, n_blk * sizeof(*blk));
		t->existing = all;
		t->n_existing += n_blk;
		free(blk);
	}
	if (!t->demand || !t->existing) {
		free_task(t);
		return NULL;
	}
	if (n_demand)
		memcpy(t->demand, demand, n_demand * sizeof(*demand));
	t->n_demand = n_demand;
	return t;
}

/*
 * The inputs of a global re-plan (allow_moving_other_jobs): every job that
 * owns configured cross-connects, with its demand. When one's demand is
 * not known (a parallelism job restored from the store, not planned since)
 * its circuits could not be planned again: the job is planned pinned.
 * 0 or -ENOMEM.
 */
static int prepare_replan(struct jm *jm, struct plan_task *t, const char *self)
{
	size_t n_others = 0, at = 0;

	t->names = malloc((jm->n_jobs + 1) * sizeof(*t->names));
	t->conf_owner = malloc((t->n_configured ? t->n_configured : 1) * sizeof(*t->conf_owner));
	if (!t->names || !t->conf_owner)
		return -ENOMEM;
	snprintf(t->names[0], sizeof(*t->names), "%s", self);
	t->n_names = 1;
	for (size_t i = 0; i < t->n_configured; i++) {
		const char *owner = fs_at(jm->d.fs, i)->job_id;
		size_t k = i && !strcmp(owner, t->names[t->conf_owner[i - 1]]) ? (size_t)t->conf_owner[i - 1]
										  : 0;

		while (k < t->n_names && strcmp(t->names[k], owner) != 0)
			k++;
		if (k == t->n_names) {
			const struct job_rt *o = jm_find_job(jm, owner);

			if (!o || o->pub.n_demand == 0 || k > jm->n_jobs) {
				fprintf(stderr,
					"<5>job %s: the demand of job %s is not known yet; planned "
					"without moving other jobs' circuits\n",
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
		const struct job_rt *o = jm_find_job(jm, t->names[k]);

		for (size_t d = 0; d < o->pub.n_demand; d++) {
			t->others[at] = o->pub.demand[d];
			t->others_owner[at++] = (int)k;
		}
	}
	t->n_others = at;
	return 0;
}

void jm_start_planning(struct jm *jm, struct job_rt *j)
{
	struct plan_task *t = new_task(jm, j->pub.id, j->pub.planner, j->pub.allow_move,
				       j->pub.demand, j->pub.n_demand, j->pub.workload,
				       &j->pub.figures);
	struct jm_error err;
	int rc;

	if (j->pub.state != JM_PLANNING)
		jm_set_state(jm, j, JM_PLANNING, NULL);
	if (t && t->replan && prepare_replan(jm, t, j->pub.id) != 0) {
		free_task(t);
		t = NULL;
	}
	if (!t) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		jm_fail_job(jm, j, &err);
		return;
	}
	snprintf(t->job_id, sizeof(t->job_id), "%s", j->pub.id);
	t->report_search |= j->search_unreported;
	j->search_unreported = false;
	rc = pool_submit(jm->d.pool, &t->pt);
	if (rc) {
		free_task(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			  strerror(-rc));
		jm_fail_job(jm, j, &err);
	}
}

/* ---- requests ---- */

static bool takes_workload(const char *p)
{
	enum delta_planner kind;

	return p && delta_planner_parse(p, &kind) == 0;
}

/* Checks a spec against the fabric; field names follow the API's JobSpec. */
static bool check_spec(struct jm *jm, const struct jm_spec *spec, struct jm_error *err)
{
	struct lc_problem p;
	const char *planner = spec->planner && *spec->planner ? spec->planner : NULL;

	if (spec->workload && planner && !takes_workload(planner)) {
		jm_set_error(err, JM_INVALID, "options.planner",
			     "\"%s\" does not plan a parallelism spec (delta-fast, prop-alloc, "
			     "sqrt-alloc, iter-halve)",
			     planner);
		return false;
	}
	if (!spec->workload && planner && strcmp(planner, "leaf-centric") != 0 &&
	    strcmp(planner, "pod-centric") != 0) {
		jm_set_error(err, JM_INVALID, "options.planner",
			     "\"%s\" does not plan a leaf demand (leaf-centric, pod-centric)",
			     planner);
		return false;
	}
	if (spec->workload && spec->n_demand == 0)
		return jm_leaves_free(jm, spec->id ? spec->id : "", NULL, 0, spec->workload, err);
	if (spec->n_demand == 0) {
		jm_set_error(err, JM_INVALID, "leaf_demand.pairs", "the job asks for no links");
		return false;
	}
	if (lc_validate(jm->f, spec->demand, spec->n_demand, NULL, 0, &p, 1) > 0) {
		const char *idx = strchr(p.field, '[');

		if (spec->workload) {
			/* A planned demand the planner does not take: a bug, not the caller's. */
			jm_set_error(err, JM_INTERNAL, "", "the planned leaf demand is invalid: %s",
				     p.reason);
			return false;
		}
		jm_set_error(err, JM_INVALID, "", "%s", p.reason);
		snprintf(err->field, sizeof(err->field), "leaf_demand.pairs%s", idx ? idx : "");
		return false;
	}
	return jm_leaves_free(jm, spec->id ? spec->id : "", spec->demand, spec->n_demand,
			   spec->workload, err);
}

static const char *default_planner(const struct jm_spec *spec)
{
	if (spec->planner && *spec->planner)
		return spec->planner;
	return spec->workload ? "delta-fast" : "leaf-centric";
}

static void copy_spec(struct job_rt *j, const struct jm_spec *spec)
{
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", spec->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s",
		 spec->idempotency_key ? spec->idempotency_key : "");
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s", default_planner(spec));
	j->pub.allow_move = spec->allow_moving_other_jobs;
}

/*
 * The part of a submission that concerns a job that already exists (or an
 * idempotency key in use). Returns true when the request was answered or
 * attached to the job.
 */
static bool submit_existing(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct job_rt *j = jm_find_job(jm, spec->id);
	struct jm_error err = { 0 };

	if (!j && spec->idempotency_key && *spec->idempotency_key) {
		for (size_t i = 0; i < jm->n_jobs && !j; i++)
			if (strcmp(jm->jobs[i]->pub.key, spec->idempotency_key) == 0) {
				jm_set_error(&err, JM_EXISTS, "idempotency_key",
					  "already used by job %s", jm->jobs[i]->pub.id);
				answer(ctx, &err, NULL, false, NULL, 0);
				return true;
			}
	}
	if (!j)
		return false;
	if (j->pub.raw_len != spec->raw_len || memcmp(j->pub.raw, spec->raw, spec->raw_len) != 0) {
		jm_set_error(&err, JM_EXISTS, "id", "job %s exists with a different request (state %s)",
			     spec->id, jm_state_name(j->pub.state));
		answer(ctx, &err, NULL, false, NULL, 0);
		return true;
	}
	if (j->pub.state == JM_FAILED || j->pub.state == JM_RELEASED) {
		/* The same request again: run it again. */
		if (!jm_leaves_free(jm, j->pub.id, j->pub.demand, j->pub.n_demand, j->pub.workload,
				 &err)) {
			answer(ctx, &err, NULL, false, NULL, 0);
			return true;
		}
		if (add_waiter(j, answer, ctx, false) != 0)
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
	if (add_waiter(j, answer, ctx, false) != 0)
		goto oom;
	return true;
oom:
	jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
	return true;
}

/* Creates, stores and plans a new job whose spec passed check_spec(). */
static void create_job(struct jm *jm, const struct jm_spec *spec, const struct plan_task *ga,
		       jm_answer_fn answer, void *ctx)
{
	struct jm_error err = { 0 };
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
	if (!j->pub.raw || !j->pub.demand || (spec->workload && !j->pub.workload)) {
		free_job(j);
		goto oom;
	}
	memcpy(j->pub.raw, spec->raw, spec->raw_len);
	j->pub.raw_len = spec->raw_len;
	memcpy(j->pub.demand, spec->demand, spec->n_demand * sizeof(*j->pub.demand));
	j->pub.n_demand = spec->n_demand;
	if (ga && ga->has_delta) {
		j->pub.figures.has_delta = true;
		j->pub.figures.delta = ga->delta;
		j->search_unreported = true; /* reported with the job's first plan */
	}
	j->pub.state = JM_PENDING;
	j->pub.created_ms = j->pub.updated_ms = jm_now_ms();
	row = (struct st_job){ j->pub.id, j->pub.key[0] ? j->pub.key : NULL, "PENDING", NULL,
			       j->pub.raw, j->pub.raw_len, j->pub.created_ms, j->pub.updated_ms };
	/* Durable before anything else happens: nothing accepted is lost. */
	rc = st_job_put(jm->d.store, &row);
	if (rc || jm_push_ptr((void ***)&jm->jobs, &jm->n_jobs, &jm->cap_jobs, j) != 0) {
		jm_set_error(&err, JM_UNAVAILABLE, "", "cannot store the job (%s); nothing changed",
			  strerror(rc ? -rc : ENOMEM));
		free_job(j);
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (add_waiter(j, answer, ctx, true) != 0)
		goto oom;
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	jm_start_planning(jm, j);
	return;
oom:
	jm_set_error(&err, JM_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
}

/* Plans a new submission's workload on the pool (ga_only), then submit_planned(). */
static void submit_workload(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer,
			    void *ctx)
{
	struct jm_error err = { 0 };
	struct plan_task *t = new_task(jm, spec->id, default_planner(spec),
				       spec->allow_moving_other_jobs, NULL, 0, spec->workload, NULL);
	int rc;

	if (t) {
		t->ga_only = true;
		t->answer = answer;
		t->ctx = ctx;
		t->sub.id = strdup(spec->id);
		t->sub.key = strdup(spec->idempotency_key ? spec->idempotency_key : "");
		t->sub.raw = malloc(spec->raw_len ? spec->raw_len : 1);
		t->sub.raw_len = spec->raw_len;
		t->sub.allow_move = spec->allow_moving_other_jobs;
	}
	if (!t || !t->sub.id || !t->sub.key || !t->sub.raw) {
		if (t)
			free_task(t);
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	memcpy(t->sub.raw, spec->raw, spec->raw_len);
	snprintf(t->job_id, sizeof(t->job_id), "%s", spec->id);
	rc = pool_submit(jm->d.pool, &t->pt);
	if (rc) {
		free_task(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			     strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
	}
}

/* A new submission's workload was planned: refuse it, or create the job with its demand. */
static void submit_planned(struct plan_task *t)
{
	struct jm *jm = t->jm;
	struct jm_error err = { 0 };
	struct jm_spec spec = { t->sub.id, t->sub.key,	     t->planner, t->sub.allow_move,
				t->demand, t->n_demand,	     t->wl,	 t->sub.raw,
				t->sub.raw_len };

	if (plan_refusal(t, &err)) {
		t->answer(t->ctx, &err, NULL, false, NULL, 0);
	} else if (jm->stopping) {
		/* Nothing was stored: the caller may submit again to the next run. */
		jm_set_error(&err, JM_UNAVAILABLE, "", "ocsd is shutting down; nothing changed");
		t->answer(t->ctx, &err, NULL, false, NULL, 0);
	} else if (!submit_existing(jm, &spec, t->answer, t->ctx)) {
		/* Still new (the same request may have been submitted meanwhile). */
		if (check_spec(jm, &spec, &err))
			create_job(jm, &spec, t, t->answer, t->ctx);
		else
			t->answer(t->ctx, &err, NULL, false, NULL, 0);
	}
	free_task(t);
}

void jm_submit(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	struct jm_error err = { 0 };

	if (submit_existing(jm, spec, answer, ctx))
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
	const char *planner = default_planner(spec);
	struct jm_error err = { 0 };
	struct plan_task *t;
	int rc;

	if (!check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t = new_task(jm, spec->id, planner, spec->allow_moving_other_jobs, spec->demand,
		     spec->n_demand, spec->workload, NULL);
	if (t && t->replan && prepare_replan(jm, t, spec->id) != 0) {
		free_task(t);
		t = NULL;
	}
	if (!t) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t->dry = true;
	t->answer = answer;
	t->ctx = ctx;
	rc = pool_submit(jm->d.pool, &t->pt);
	if (rc) {
		free_task(t);
		jm_set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			  strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
	}
}

void jm_release(struct jm *jm, const char *id, jm_answer_fn answer, void *ctx)
{
	struct job_rt *j = jm_find_job(jm, id);
	struct jm_error err = { 0 };

	if (!j) {
		jm_set_error(&err, JM_NOT_FOUND, "id", "no job %s", id);
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	switch (j->pub.state) {
	case JM_RELEASED:
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return;
	case JM_PENDING:
	case JM_PLANNING:
	case JM_FAILED:
		/* Nothing of the job is on the devices (a FAILED apply rolled back). */
		jm_set_state(jm, j, JM_RELEASED, NULL);
		jm_settle(j, NULL);
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return;
	case JM_PROGRAMMING:
		/* Let the transaction finish, then release. */
		j->release_requested = true;
		break;
	case JM_ACTIVE:
		jm_set_state(jm, j, JM_RELEASING, NULL);
		if (jm_push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j) != 0) {
			jm_set_state(jm, j, JM_ACTIVE, NULL);
			jm_set_error(&err, JM_INTERNAL, "", "out of memory");
			answer(ctx, &err, NULL, false, NULL, 0);
			return;
		}
		break;
	case JM_RELEASING:
		break;
	}
	if (add_waiter(j, answer, ctx, false) != 0) {
		jm_set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	jm_pump(jm);
}

/* ---- start-up and recovery ---- */

struct load_ctx {
	struct jm *jm;
	int rc;
};

/* The demand of a stored job is re-read from its request by the API layer;
 * here only what the job manager needs is kept (see jm_new). */
static int load_job(void *arg, const struct st_job *row)
{
	struct load_ctx *lc = arg;
	struct job_rt *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", row->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s", row->idempotency_key ? row->idempotency_key : "");
	j->pub.state = state_parse(row->state);
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", row->reason ? row->reason : "");
	j->pub.created_ms = row->created_ms;
	j->pub.updated_ms = row->updated_ms;
	if (row->request_len) {
		j->pub.raw = malloc(row->request_len);
		if (!j->pub.raw) {
			free_job(j);
			return -ENOMEM;
		}
		memcpy(j->pub.raw, row->request, row->request_len);
		j->pub.raw_len = row->request_len;
	}
	if (jm_push_ptr((void ***)&lc->jm->jobs, &lc->jm->n_jobs, &lc->jm->cap_jobs, j) != 0) {
		free_job(j);
		return -ENOMEM;
	}
	return 0;
}

int jm_new(const struct jm_deps *deps, struct jm **out, char *err, size_t err_len)
{
	struct jm *jm = calloc(1, sizeof(*jm));
	struct load_ctx lc = { jm, 0 };
	int rc;

	*out = NULL;
	if (!jm)
		return -ENOMEM;
	jm->d = *deps;
	jm->f = &deps->cfg->fabric;
	jm->drained = calloc((size_t)deps->cfg->n_devices + 1, sizeof(*jm->drained));
	if (!jm->drained) {
		free(jm);
		return -ENOMEM;
	}
	rc = st_job_list(deps->store, load_job, &lc);
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
	jm_set_error(&err, JM_UNAVAILABLE, "", "ocsd is shutting down");
	for (size_t i = 0; i < jm->n_jobs; i++) {
		jm_settle(jm->jobs[i], &err);
		free_job(jm->jobs[i]);
	}
	free(jm->jobs);
	free(jm->queue);
	free(jm->drained);
	free(jm);
}

int jm_set_demand(struct jm *jm, const char *id, const char *planner, bool allow_move,
		  const struct lc_demand *demand, size_t n, const struct jm_workload *workload)
{
	struct job_rt *j = jm_find_job(jm, id);

	if (!j)
		return -ENOENT;
	jm_workload_free(j->pub.workload);
	j->pub.workload = NULL;
	if (workload) {
		j->pub.workload = jm_workload_dup(workload);
		if (!j->pub.workload)
			return -ENOMEM;
	}
	free(j->pub.demand);
	j->pub.demand = malloc((n ? n : 1) * sizeof(*demand));
	if (!j->pub.demand)
		return -ENOMEM;
	if (n)
		memcpy(j->pub.demand, demand, n * sizeof(*demand));
	j->pub.n_demand = n;
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 planner && *planner ? planner : workload ? "delta-fast" : "leaf-centric");
	j->pub.allow_move = allow_move;
	return 0;
}


