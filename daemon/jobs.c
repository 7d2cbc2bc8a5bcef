/*
 * jobs.c - implementation of jobs.h.
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
#include "jobs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "fabric_state.h"
#include "l2check.h"
#include "loop.h"
#include "pool.h"
#include "sb_txn.h"
#include "store.h"

/* A plan whose snapshot went stale this often in a row is refused. */
#define JM_MAX_REPLANS 16

struct waiter {
	jm_answer_fn fn;
	void *ctx;
	bool created;
	struct waiter *next;
};

struct job_rt {
	struct jm_job pub;
	struct waiter *waiters;
	bool release_requested;
	int replans;
	/* The accepted plan, between plan_done and its transaction. */
	unsigned long plan_gen;
	struct ocs_xc *removals;
	size_t n_removals;
	struct ocs_xc *additions;
	size_t n_additions;
};

struct txn;

struct jm {
	struct jm_deps d;
	const struct ocs_fabric *f;
	struct job_rt **jobs;
	size_t n_jobs, cap_jobs;
	struct job_rt **queue; /* waiting for a transaction, FIFO */
	size_t n_queue, cap_queue;
	struct txn *txn; /* the running transaction */
	bool stopping;   /* no new transaction starts */
	bool *drained;   /* by device id: no new circuits there */
	int n_drained;
};

static void pump(struct jm *jm);

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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 4, 5))) static void set_error(struct jm_error *e,
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
	memset(fig, 0, sizeof(*fig));
}

static void free_job(struct job_rt *j)
{
	if (!j)
		return;
	free(j->pub.raw);
	free(j->pub.demand);
	free_figures(&j->pub.figures);
	free(j->removals);
	free(j->additions);
	free(j);
}

static struct job_rt *find_job(const struct jm *jm, const char *id)
{
	for (size_t i = 0; i < jm->n_jobs; i++)
		if (strcmp(jm->jobs[i]->pub.id, id) == 0)
			return jm->jobs[i];
	return NULL;
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

static int push_ptr(void ***arr, size_t *n, size_t *cap, void *p)
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

/* Moves j to state (persisted) and tells the event stream. */
static void set_state(struct jm *jm, struct job_rt *j, enum jm_state state, const char *reason)
{
	j->pub.state = state;
	snprintf(j->pub.reason, sizeof(j->pub.reason), "%s", reason ? reason : "");
	j->pub.updated_ms = now_ms();
	if (st_job_set_state(jm->d.store, j->pub.id, jm_state_name(state), reason,
			     j->pub.updated_ms) != 0)
		fprintf(stderr, "<3>job %s: cannot store state %s\n", j->pub.id,
			jm_state_name(state));
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
}

static void fail_job(struct jm *jm, struct job_rt *j, const struct jm_error *err)
{
	char reason[sizeof(err->field) + sizeof(err->message) + 4];

	snprintf(reason, sizeof(reason), "%s%s%s", err->field, err->field[0] ? ": " : "",
		 err->message);
	set_state(jm, j, JM_FAILED, reason);
	settle(j, err);
}

/* ---- planning ---- */

struct plan_task {
	struct jm *jm;
	char job_id[72];
	bool dry;
	jm_answer_fn answer; /* dry runs */
	void *ctx;
	struct ocs_fabric f;
	char planner[32];
	bool replan;
	struct lc_demand *demand;
	size_t n_demand;
	struct ocs_xc *existing;
	size_t n_existing;
	unsigned long gen;
	/* results */
	int rc;
	struct lc_plan *plan;
	int l2_violations;
	char l2_reason[200];
};

static void plan_work(void *arg)
{
	struct plan_task *t = arg;
	struct lc_options opt = { .realize = true, .replan = t->replan };
	struct l2_violation v;

	if (strcmp(t->planner, "pod-centric") == 0)
		t->rc = pc_plan(&t->f, t->demand, t->n_demand, t->existing, t->n_existing, &opt,
				&t->plan);
	else
		t->rc = lc_plan(&t->f, t->demand, t->n_demand, t->existing, t->n_existing, &opt,
				&t->plan);
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
	if (t->rc == -EINVAL) {
		set_error(err, JM_INVALID, "leaf_demand", "the planner refused the demand");
		return true;
	}
	if (t->rc) {
		set_error(err, JM_INTERNAL, "", "planner failed: %s", strerror(-t->rc));
		return true;
	}
	if (t->l2_violations) {
		set_error(err, JM_INTERNAL, "",
			  "the plan failed the L2 symmetry check (%d violations, first: %s); "
			  "nothing was touched",
			  t->l2_violations, t->l2_reason);
		return true;
	}
	if (t->plan->n_unplaced || t->plan->unrealized_circuits) {
		int links = 0;
		const struct lc_demand *u = t->plan->unplaced;

		for (size_t i = 0; i < t->plan->n_unplaced; i++)
			links += u[i].links;
		if (t->plan->n_unplaced)
			set_error(err, JM_EXHAUSTED, "leaf_demand",
				  "%d link(s) in %zu leaf pair(s) do not fit on the free spine "
				  "ports (first: leaves %d-%d, %d link(s)); nothing was touched",
				  links, t->plan->n_unplaced, u[0].a, u[0].b, u[0].links);
		else
			set_error(err, JM_EXHAUSTED, "leaf_demand",
				  "%zu circuit(s) found no free OCS ports (first: pods %d-%d in "
				  "group %d); nothing was touched",
				  t->plan->unrealized_circuits, t->plan->unrealized[0].i,
				  t->plan->unrealized[0].j, t->plan->unrealized[0].h);
		return true;
	}
	return false;
}

static void start_planning(struct jm *jm, struct job_rt *j);

static void plan_done(void *arg)
{
	struct plan_task *t = arg;
	struct jm *jm = t->jm;
	struct job_rt *j;
	struct jm_error err = { 0 };
	size_t n_new = 0;
	struct ocs_xc *added = NULL;

	if (t->rc == 0 && jm->d.events.plan_finished)
		jm->d.events.plan_finished(jm->d.events.ctx, t->planner,
					   (t->plan->plan_ms + t->plan->realize_ms) / 1000.0);
	if (t->rc == 0)
		qsort(t->existing, t->n_existing, sizeof(*t->existing), xc_cmp);
	if (t->rc == 0 && !t->l2_violations)
		added = difference(t->plan->xcs, t->plan->n_xcs, t->existing, t->n_existing, &n_new);
	if (t->dry) {
		struct jm_job shadow = { 0 };

		if (!plan_refusal(t, &err) || err.status == JM_EXHAUSTED) {
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
	j = find_job(jm, t->job_id);
	if (!j || j->pub.state != JM_PLANNING) {
		free(added);
		free_task(t); /* released while planning */
		return;
	}
	if (t->gen != fs_generation(jm->d.fs) && t->rc == 0 && ++j->replans <= JM_MAX_REPLANS) {
		free(added);
		free_task(t);
		start_planning(jm, j); /* the snapshot went stale: plan again */
		return;
	}
	if (t->gen != fs_generation(jm->d.fs) && t->rc == 0) {
		set_error(&err, JM_UNAVAILABLE, "",
			  "the fabric changed during each of %d plans; try again", JM_MAX_REPLANS);
	} else if (!plan_refusal(t, &err) && !added) {
		set_error(&err, JM_INTERNAL, "", "out of memory");
	}
	if (err.status != JM_OK) {
		if (t->rc == 0)
			fill_figures(&j->pub.figures, t, n_new);
		free(added);
		free_task(t);
		fail_job(jm, j, &err);
		return;
	}
	fill_figures(&j->pub.figures, t, n_new);
	free(j->additions);
	free(j->removals);
	j->additions = added;
	j->n_additions = n_new;
	j->removals = NULL;
	j->n_removals = 0;
	if (t->plan->n_moved) {
		/* Only what is configured is removed (drain blockers never were). */
		j->removals = malloc(t->plan->n_moved * sizeof(*j->removals));
		for (size_t i = 0; j->removals && i < t->plan->n_moved; i++)
			if (fs_contains(jm->d.fs, &t->plan->moved[i]))
				j->removals[j->n_removals++] = t->plan->moved[i];
	}
	j->plan_gen = t->gen;
	free_task(t);
	set_state(jm, j, JM_PROGRAMMING, NULL);
	if (push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j) != 0) {
		set_error(&err, JM_INTERNAL, "", "out of memory");
		fail_job(jm, j, &err);
		return;
	}
	pump(jm);
}

/* Copies the inputs of a plan for the pool (the worker sees nothing else). */
static struct plan_task *new_task(struct jm *jm, const char *planner, bool replan,
				  const struct lc_demand *demand, size_t n_demand)
{
	struct plan_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->jm = jm;
	t->f = *jm->f;
	snprintf(t->planner, sizeof(t->planner), "%s", planner);
	t->replan = replan;
	t->demand = malloc((n_demand ? n_demand : 1) * sizeof(*demand));
	t->existing = fs_snapshot(jm->d.fs, &t->n_existing);
	t->gen = fs_generation(jm->d.fs);
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
	memcpy(t->demand, demand, n_demand * sizeof(*demand));
	t->n_demand = n_demand;
	return t;
}

static void start_planning(struct jm *jm, struct job_rt *j)
{
	struct plan_task *t = new_task(jm, j->pub.planner, j->pub.allow_move, j->pub.demand,
				       j->pub.n_demand);
	struct jm_error err;
	int rc;

	if (j->pub.state != JM_PLANNING)
		set_state(jm, j, JM_PLANNING, NULL);
	if (!t) {
		set_error(&err, JM_INTERNAL, "", "out of memory");
		fail_job(jm, j, &err);
		return;
	}
	snprintf(t->job_id, sizeof(t->job_id), "%s", j->pub.id);
	rc = pool_submit(jm->d.pool, plan_work, plan_done, t);
	if (rc) {
		free_task(t);
		set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			  strerror(-rc));
		fail_job(jm, j, &err);
	}
}

/* ---- transactions ---- */

struct txn {
	struct jm *jm;
	struct job_rt *job;
	bool release;
	int64_t txn_id;
	struct ocs_xc *removals;
	size_t n_removals;
	struct st_circuit *adds;
	size_t n_adds;
	/* the southbound plan */
	struct sb_txn_device *devs;
	int *dev_ids; /* global device id of devs[i] */
	struct sb_xc **targets;
	size_t n_devs;
	struct ocs_xc *others; /* cross-connects on devices outside the plan */
	size_t n_others;
	struct sb_txn_plan plan;
	struct sb_txn_hooks hooks;
	struct sb_txn_options opts;
	struct sb_txn_handle *handle;
};

static void free_txn(struct txn *tx)
{
	if (!tx)
		return;
	for (size_t i = 0; i < tx->n_devs; i++)
		free(tx->targets[i]);
	free(tx->targets);
	free(tx->devs);
	free(tx->dev_ids);
	free(tx->others);
	free(tx->removals);
	free(tx->adds);
	free(tx);
}

/*
 * The verify hook (transaction thread): the L2 checker on the whole fabric,
 * i.e. the devices of the plan as given plus every other device as stored.
 */
static int verify_l2(void *arg, enum sb_verify_phase phase, const struct sb_device_xcs *devices,
		     size_t n, char *why, size_t why_len)
{
	struct txn *tx = arg;
	const struct ocs_fabric *f = tx->jm->f;
	size_t total = tx->n_others, k = 0;
	struct l2_violation v;
	struct ocs_xc *all;
	int bad;

	for (size_t i = 0; i < n; i++)
		total += devices[i].n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	memcpy(all, tx->others, tx->n_others * sizeof(*all));
	k = tx->n_others;
	for (size_t i = 0; i < n; i++) {
		int id = tx->dev_ids[devices[i].index];

		for (size_t x = 0; x < devices[i].n; x++)
			all[k++] = (struct ocs_xc){ ocs_fabric_device_group(f, id),
						    ocs_fabric_device_in_group(f, id),
						    devices[i].xcs[x].in, devices[i].xcs[x].out };
	}
	bad = l2_check(f, all, k, &v, 1);
	free(all);
	if (bad)
		snprintf(why, why_len, "%s: %d L2 violation(s), first on group %d device %d %d->%d: %s",
			 phase == SB_VERIFY_PLAN ? "plan" : "read-back", bad, v.xc.group,
			 v.xc.device, v.xc.in, v.xc.out, v.reason);
	return bad ? -EPROTO : 0;
}

static bool same_device(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return a->group == b->group && a->device == b->device;
}

/* Builds the per-device targets: stored state minus removals plus additions. */
static int build_txn(struct jm *jm, struct txn *tx)
{
	const struct ocs_fabric *f = jm->f;
	int n_dev = ocs_fabric_devices(f);
	char *touched = calloc((size_t)n_dev, 1);
	size_t n = fs_count(jm->d.fs);

	if (!touched)
		return -ENOMEM;
	for (size_t i = 0; i < tx->n_removals; i++)
		touched[ocs_fabric_device_id(f, tx->removals[i].group, tx->removals[i].device)] = 1;
	for (size_t i = 0; i < tx->n_adds; i++)
		touched[ocs_fabric_device_id(f, tx->adds[i].xc.group, tx->adds[i].xc.device)] = 1;
	for (int d = 0; d < n_dev; d++)
		tx->n_devs += touched[d];
	tx->devs = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->devs));
	tx->dev_ids = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->dev_ids));
	tx->targets = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*tx->targets));
	tx->others = malloc((n ? n : 1) * sizeof(*tx->others));
	if (!tx->devs || !tx->dev_ids || !tx->targets || !tx->others)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;

		if (!touched[ocs_fabric_device_id(f, xc->group, xc->device)])
			tx->others[tx->n_others++] = *xc;
	}
	for (int d = 0, k = 0; d < n_dev; d++) {
		struct ocs_xc key = { ocs_fabric_device_group(f, d), ocs_fabric_device_in_group(f, d),
				      0, 0 };
		size_t cap = fs_device_xcs(jm->d.fs, d) + tx->n_adds + 1, m = 0;
		struct sb_xc *tg;

		if (!touched[d])
			continue;
		tg = malloc(cap * sizeof(*tg));
		if (!tg)
			goto oom;
		for (size_t i = 0; i < n; i++) {
			const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;
			bool removed = false;

			if (!same_device(xc, &key))
				continue;
			for (size_t r = 0; r < tx->n_removals && !removed; r++)
				removed = same_device(&tx->removals[r], xc) &&
					  tx->removals[r].in == xc->in;
			if (!removed)
				tg[m++] = (struct sb_xc){ (uint16_t)xc->in, (uint16_t)xc->out };
		}
		for (size_t a = 0; a < tx->n_adds; a++)
			if (same_device(&tx->adds[a].xc, &key))
				tg[m++] = (struct sb_xc){ (uint16_t)tx->adds[a].xc.in,
							  (uint16_t)tx->adds[a].xc.out };
		tx->targets[k] = tg;
		tx->dev_ids[k] = d;
		tx->devs[k] = (struct sb_txn_device){ jm->d.devices[d], tg, m };
		k++;
	}
	free(touched);
	return 0;
oom:
	free(touched);
	return -ENOMEM;
}

static void txn_done(void *arg);

static void txn_thread_done(void *arg, const struct sb_txn_result *r)
{
	struct txn *tx = arg;

	/* The result is taken with sb_txn_join() on the loop. */
	while (loop_post(tx->jm->d.loop, txn_done, tx) == -ENOMEM)
		;
}

static void start_txn(struct jm *jm, struct job_rt *j)
{
	struct txn *tx = calloc(1, sizeof(*tx));
	struct jm_error err;
	char msg[256];
	int rc;

	if (!tx)
		goto oom;
	tx->jm = jm;
	tx->job = j;
	tx->release = j->pub.state == JM_RELEASING;
	if (tx->release) {
		tx->removals = fs_job_xcs(jm->d.fs, j->pub.id, &tx->n_removals);
		if (!tx->removals)
			goto oom;
	} else {
		tx->n_removals = j->n_removals;
		tx->removals = malloc((j->n_removals ? j->n_removals : 1) * sizeof(*tx->removals));
		tx->adds = malloc((j->n_additions ? j->n_additions : 1) * sizeof(*tx->adds));
		if (!tx->removals || !tx->adds)
			goto oom;
		if (j->n_removals)
			memcpy(tx->removals, j->removals,
			       j->n_removals * sizeof(*tx->removals));
		for (size_t i = 0; i < j->n_additions; i++) {
			tx->adds[i].xc = j->additions[i];
			snprintf(tx->adds[i].job_id, sizeof(tx->adds[i].job_id), "%s", j->pub.id);
		}
		tx->n_adds = j->n_additions;
	}
	if (build_txn(jm, tx) != 0)
		goto oom;
	if (tx->n_devs == 0) {
		/* Nothing to change on any device (e.g. an empty release). */
		tx->txn_id = 0;
		jm->txn = tx;
		txn_done(tx);
		return;
	}
	rc = st_intent_begin(jm->d.store, j->pub.id, tx->removals, tx->n_removals, tx->adds,
			     tx->n_adds, now_ms(), &tx->txn_id);
	if (rc) {
		snprintf(msg, sizeof(msg), "cannot store the transaction intent (%s); nothing was "
					   "touched",
			 strerror(-rc));
		set_error(&err, JM_UNAVAILABLE, "", "%s", msg);
		free_txn(tx);
		if (j->pub.state == JM_RELEASING)
			set_state(jm, j, JM_ACTIVE, msg), settle(j, &err);
		else
			fail_job(jm, j, &err);
		return;
	}
	tx->plan = (struct sb_txn_plan){ (uint64_t)tx->txn_id, tx->devs, tx->n_devs };
	tx->hooks = (struct sb_txn_hooks){ NULL, NULL, verify_l2, tx };
	tx->opts = (struct sb_txn_options){ jm->d.confirm_timeout_s, 0, jm->d.connect_timeout_ms };
	jm->txn = tx;
	rc = sb_engine_start(jm->d.engine, &tx->plan, &tx->hooks, &tx->opts, txn_thread_done, tx,
			     &tx->handle);
	if (rc) {
		jm->txn = NULL;
		st_intent_finish(jm->d.store, tx->txn_id, ST_INTENT_ROLLED_BACK,
				 "the transaction could not start", now_ms());
		set_error(&err, JM_UNAVAILABLE, "", "the transaction could not start (%s)",
			  strerror(-rc));
		free_txn(tx);
		fail_job(jm, j, &err);
		pump(jm);
	}
	return;
oom:
	free_txn(tx);
	set_error(&err, JM_INTERNAL, "", "out of memory");
	fail_job(jm, j, &err);
}

static void txn_done(void *arg)
{
	struct txn *tx = arg;
	struct jm *jm = tx->jm;
	struct job_rt *j = tx->job;
	struct sb_txn_result r = { .outcome = SB_TXN_COMMITTED };
	struct jm_error err = { 0 };
	const char **names = NULL;
	enum st_intent_state outcome;

	if (tx->handle && sb_txn_join(tx->handle, &r) != 0)
		r.outcome = SB_TXN_FAILED;
	switch (r.outcome) {
	case SB_TXN_COMMITTED:
		outcome = ST_INTENT_CONFIRMED;
		break;
	case SB_TXN_REFUSED:
	case SB_TXN_ROLLED_BACK:
		outcome = ST_INTENT_ROLLED_BACK;
		set_error(&err, JM_UNAVAILABLE, "",
			  "devices: %s; every device was rolled back, nothing changed", r.message);
		break;
	case SB_TXN_FAILED:
	default:
		outcome = ST_INTENT_FAILED;
		set_error(&err, JM_INTERNAL, "",
			  "devices: %s; a rollback could not be proven (%zu device(s)): the "
			  "fabric needs reconciliation",
			  r.message, r.n_rollback_failures);
		break;
	}
	if (tx->txn_id &&
	    st_intent_finish(jm->d.store, tx->txn_id, outcome, r.message, now_ms()) != 0)
		fprintf(stderr, "<3>transaction %lld: cannot store its outcome; recovery will "
				"resolve it\n",
			(long long)tx->txn_id);
	if (outcome == ST_INTENT_CONFIRMED &&
	    fs_apply(jm->d.fs, tx->removals, tx->n_removals, tx->adds, tx->n_adds) != 0)
		fs_load(jm->d.fs, jm->d.store);
	if (jm->d.events.transaction_done && tx->txn_id) {
		struct jm_txn_summary sum = { (uint64_t)tx->txn_id, j->pub.id, (int)r.outcome,
					      NULL, 0, r.message, r.total_ms,
					      r.n_rollback_failures };

		names = calloc(tx->n_devs ? tx->n_devs : 1, sizeof(*names));
		for (size_t i = 0; names && i < tx->n_devs; i++)
			names[i] = sb_device_name(tx->devs[i].dev);
		sum.devices = names;
		sum.n_devices = names ? tx->n_devs : 0;
		jm->d.events.transaction_done(jm->d.events.ctx, &sum);
		free(names);
	}
	jm->txn = NULL;
	if (tx->release) {
		if (outcome == ST_INTENT_CONFIRMED) {
			set_state(jm, j, JM_RELEASED, NULL);
			settle(j, NULL);
		} else {
			set_state(jm, j, outcome == ST_INTENT_ROLLED_BACK ? JM_ACTIVE : JM_FAILED,
				  err.message);
			settle(j, &err);
		}
	} else if (outcome == ST_INTENT_CONFIRMED) {
		set_state(jm, j, JM_ACTIVE, NULL);
		if (j->release_requested) {
			set_state(jm, j, JM_RELEASING, NULL);
			push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j);
		}
		settle(j, NULL);
	} else {
		fail_job(jm, j, &err);
	}
	sb_txn_result_clear(&r);
	free_txn(tx);
	pump(jm);
}

/* Starts the next queued transaction when none is running. */
static void pump(struct jm *jm)
{
	while (!jm->stopping && !jm->txn && jm->n_queue > 0) {
		struct job_rt *j = jm->queue[0];

		memmove(jm->queue, jm->queue + 1, (jm->n_queue - 1) * sizeof(*jm->queue));
		jm->n_queue--;
		if (j->pub.state == JM_PROGRAMMING && j->plan_gen != fs_generation(jm->d.fs)) {
			start_planning(jm, j); /* planned on circuits that changed since */
			continue;
		}
		if (j->pub.state == JM_PROGRAMMING || j->pub.state == JM_RELEASING)
			start_txn(jm, j);
	}
}

/* ---- requests ---- */

static bool valid_planner(const char *p)
{
	return !p || !*p || strcmp(p, "leaf-centric") == 0 || strcmp(p, "pod-centric") == 0;
}

static bool holds_leaves(enum jm_state s)
{
	return s == JM_PENDING || s == JM_PLANNING || s == JM_PROGRAMMING || s == JM_ACTIVE ||
	       s == JM_RELEASING;
}

static bool job_uses_leaf(const struct jm_job *job, int leaf)
{
	for (size_t i = 0; i < job->n_demand; i++)
		if (job->demand[i].a == leaf || job->demand[i].b == leaf)
			return true;
	return false;
}

/*
 * A job owns the leaves of its demand: their uplinks carry only its
 * cross-pod links, which is what lets the planner guarantee no routing
 * polarization. A leaf held by another live job is refused here.
 */
static bool leaves_free(const struct jm *jm, const char *self, const struct lc_demand *demand,
			size_t n, struct jm_error *err)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < jm->n_jobs; k++) {
			const struct jm_job *other = &jm->jobs[k]->pub;
			int leaf = -1;

			if (strcmp(other->id, self) == 0 || !holds_leaves(other->state))
				continue;
			if (job_uses_leaf(other, demand[i].a))
				leaf = demand[i].a;
			else if (job_uses_leaf(other, demand[i].b))
				leaf = demand[i].b;
			if (leaf < 0)
				continue;
			set_error(err, JM_EXHAUSTED, "",
				  "leaf %d is held by job %s (%s): a job's leaves carry only its own "
				  "cross-pod links",
				  leaf, other->id, jm_state_name(other->state));
			snprintf(err->field, sizeof(err->field), "leaf_demand.pairs[%zu]", i);
			return false;
		}
	}
	return true;
}

/* Checks a spec against the fabric; field names follow the API's JobSpec. */
static bool check_spec(struct jm *jm, const struct jm_spec *spec, struct jm_error *err)
{
	struct lc_problem p;

	if (!valid_planner(spec->planner)) {
		set_error(err, JM_INVALID, "options.planner",
			  "\"%s\" is not a planner of this fabric (leaf-centric, pod-centric)",
			  spec->planner);
		return false;
	}
	if (spec->n_demand == 0) {
		set_error(err, JM_INVALID, "leaf_demand.pairs", "the job asks for no links");
		return false;
	}
	if (lc_validate(jm->f, spec->demand, spec->n_demand, NULL, 0, &p, 1) > 0) {
		const char *idx = strchr(p.field, '[');

		set_error(err, JM_INVALID, "", "%s", p.reason);
		snprintf(err->field, sizeof(err->field), "leaf_demand.pairs%s", idx ? idx : "");
		return false;
	}
	return leaves_free(jm, spec->id ? spec->id : "", spec->demand, spec->n_demand, err);
}

static void copy_spec(struct job_rt *j, const struct jm_spec *spec)
{
	const char *planner = spec->planner && *spec->planner ? spec->planner : "leaf-centric";

	snprintf(j->pub.id, sizeof(j->pub.id), "%s", spec->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s",
		 spec->idempotency_key ? spec->idempotency_key : "");
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s", planner);
	j->pub.allow_move = spec->allow_moving_other_jobs;
}

void jm_submit(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	struct job_rt *j = find_job(jm, spec->id);
	struct jm_error err = { 0 };
	struct st_job row;
	int rc;

	if (!j && spec->idempotency_key && *spec->idempotency_key) {
		for (size_t i = 0; i < jm->n_jobs && !j; i++)
			if (strcmp(jm->jobs[i]->pub.key, spec->idempotency_key) == 0) {
				set_error(&err, JM_EXISTS, "idempotency_key",
					  "already used by job %s", jm->jobs[i]->pub.id);
				answer(ctx, &err, NULL, false, NULL, 0);
				return;
			}
	}
	if (j) {
		bool same = j->pub.raw_len == spec->raw_len &&
			    memcmp(j->pub.raw, spec->raw, spec->raw_len) == 0;

		if (!same) {
			set_error(&err, JM_EXISTS, "id",
				  "job %s exists with a different request (state %s)", spec->id,
				  jm_state_name(j->pub.state));
			answer(ctx, &err, NULL, false, NULL, 0);
			return;
		}
		if (j->pub.state == JM_FAILED || j->pub.state == JM_RELEASED) {
			/* The same request again: run it again. */
			if (!leaves_free(jm, j->pub.id, j->pub.demand, j->pub.n_demand, &err)) {
				answer(ctx, &err, NULL, false, NULL, 0);
				return;
			}
			if (add_waiter(j, answer, ctx, false) != 0)
				goto oom;
			j->replans = 0;
			j->release_requested = false;
			start_planning(jm, j);
			return;
		}
		if (j->pub.state == JM_ACTIVE) {
			answer(ctx, NULL, &j->pub, false, NULL, 0);
			return;
		}
		/* In progress: answered when it settles. */
		if (add_waiter(j, answer, ctx, false) != 0)
			goto oom;
		return;
	}
	if (!check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		goto oom;
	copy_spec(j, spec);
	j->pub.raw = malloc(spec->raw_len ? spec->raw_len : 1);
	j->pub.demand = malloc(spec->n_demand * sizeof(*j->pub.demand));
	if (!j->pub.raw || !j->pub.demand) {
		free_job(j);
		goto oom;
	}
	memcpy(j->pub.raw, spec->raw, spec->raw_len);
	j->pub.raw_len = spec->raw_len;
	memcpy(j->pub.demand, spec->demand, spec->n_demand * sizeof(*j->pub.demand));
	j->pub.n_demand = spec->n_demand;
	j->pub.state = JM_PENDING;
	j->pub.created_ms = j->pub.updated_ms = now_ms();
	row = (struct st_job){ j->pub.id, j->pub.key[0] ? j->pub.key : NULL, "PENDING", NULL,
			       j->pub.raw, j->pub.raw_len, j->pub.created_ms, j->pub.updated_ms };
	/* Durable before anything else happens: nothing accepted is lost. */
	rc = st_job_put(jm->d.store, &row);
	if (rc || push_ptr((void ***)&jm->jobs, &jm->n_jobs, &jm->cap_jobs, j) != 0) {
		set_error(&err, JM_UNAVAILABLE, "", "cannot store the job (%s); nothing changed",
			  strerror(rc ? -rc : ENOMEM));
		free_job(j);
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	if (add_waiter(j, answer, ctx, true) != 0)
		goto oom;
	if (jm->d.events.job_changed)
		jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
	start_planning(jm, j);
	return;
oom:
	set_error(&err, JM_INTERNAL, "", "out of memory");
	answer(ctx, &err, NULL, false, NULL, 0);
}

void jm_plan(struct jm *jm, const struct jm_spec *spec, jm_answer_fn answer, void *ctx)
{
	const char *planner = spec->planner && *spec->planner ? spec->planner : "leaf-centric";
	struct jm_error err = { 0 };
	struct plan_task *t;
	int rc;

	if (!check_spec(jm, spec, &err)) {
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t = new_task(jm, planner, spec->allow_moving_other_jobs, spec->demand, spec->n_demand);
	if (!t) {
		set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	t->dry = true;
	t->answer = answer;
	t->ctx = ctx;
	rc = pool_submit(jm->d.pool, plan_work, plan_done, t);
	if (rc) {
		free_task(t);
		set_error(&err, JM_EXHAUSTED, "", "the planner queue is full (%s); try again",
			  strerror(-rc));
		answer(ctx, &err, NULL, false, NULL, 0);
	}
}

void jm_release(struct jm *jm, const char *id, jm_answer_fn answer, void *ctx)
{
	struct job_rt *j = find_job(jm, id);
	struct jm_error err = { 0 };

	if (!j) {
		set_error(&err, JM_NOT_FOUND, "id", "no job %s", id);
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
		set_state(jm, j, JM_RELEASED, NULL);
		settle(j, NULL);
		answer(ctx, NULL, &j->pub, false, NULL, 0);
		return;
	case JM_PROGRAMMING:
		/* Let the transaction finish, then release. */
		j->release_requested = true;
		break;
	case JM_ACTIVE:
		set_state(jm, j, JM_RELEASING, NULL);
		if (push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j) != 0) {
			set_state(jm, j, JM_ACTIVE, NULL);
			set_error(&err, JM_INTERNAL, "", "out of memory");
			answer(ctx, &err, NULL, false, NULL, 0);
			return;
		}
		break;
	case JM_RELEASING:
		break;
	}
	if (add_waiter(j, answer, ctx, false) != 0) {
		set_error(&err, JM_INTERNAL, "", "out of memory");
		answer(ctx, &err, NULL, false, NULL, 0);
		return;
	}
	pump(jm);
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
	if (push_ptr((void ***)&lc->jm->jobs, &lc->jm->n_jobs, &lc->jm->cap_jobs, j) != 0) {
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
	set_error(&err, JM_UNAVAILABLE, "", "ocsd is shutting down");
	for (size_t i = 0; i < jm->n_jobs; i++) {
		settle(jm->jobs[i], &err);
		free_job(jm->jobs[i]);
	}
	free(jm->jobs);
	free(jm->queue);
	free(jm->drained);
	free(jm);
}

int jm_set_demand(struct jm *jm, const char *id, const char *planner, bool allow_move,
		  const struct lc_demand *demand, size_t n)
{
	struct job_rt *j = find_job(jm, id);

	if (!j)
		return -ENOENT;
	free(j->pub.demand);
	j->pub.demand = malloc((n ? n : 1) * sizeof(*demand));
	if (!j->pub.demand)
		return -ENOMEM;
	memcpy(j->pub.demand, demand, n * sizeof(*demand));
	j->pub.n_demand = n;
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
		 planner && *planner ? planner : "leaf-centric");
	j->pub.allow_move = allow_move;
	return 0;
}

/* Sorted (in, out) pairs of one device: what the store says it should hold. */
static struct sb_xc *device_view(struct jm *jm, int group, int device,
				 const struct ocs_xc *removals, size_t n_removals,
				 const struct st_circuit *adds, size_t n_adds, size_t *n)
{
	size_t cap = fs_count(jm->d.fs) + n_adds + 1;
	struct sb_xc *out = malloc(cap * sizeof(*out));
	struct ocs_xc key = { group, device, 0, 0 };

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < fs_count(jm->d.fs); i++) {
		const struct ocs_xc *xc = &fs_at(jm->d.fs, i)->xc;
		bool removed = false;

		if (!same_device(xc, &key))
			continue;
		for (size_t r = 0; r < n_removals && !removed; r++)
			removed = same_device(&removals[r], xc) && removals[r].in == xc->in;
		if (!removed)
			out[(*n)++] = (struct sb_xc){ (uint16_t)xc->in, (uint16_t)xc->out };
	}
	for (size_t a = 0; a < n_adds; a++)
		if (same_device(&adds[a].xc, &key))
			out[(*n)++] = (struct sb_xc){ (uint16_t)adds[a].xc.in, (uint16_t)adds[a].xc.out };
	return out;
}

static int sbxc_cmp(const void *a, const void *b)
{
	const struct sb_xc *x = a, *y = b;

	return x->in != y->in ? x->in - y->in : x->out - y->out;
}

/* Whether the device holds exactly `want` (order-insensitive). */
static bool holds(const struct sb_xc_state *got, size_t n_got, struct sb_xc *want, size_t n_want)
{
	if (n_got != n_want)
		return false;
	qsort(want, n_want, sizeof(*want), sbxc_cmp);
	for (size_t i = 0; i < n_got; i++)
		if (got[i].in != want[i].in || got[i].out != want[i].out)
			return false;
	return true;
}

/*
 * Resolves one transaction a previous run left open: any confirmed commit
 * still pending on a device is cancelled (the devices go back to the
 * pre-image), then every touched device is read back. All at the target:
 * the transaction had been confirmed; all at the pre-image: rolled back;
 * anything else: failed, and the difference is reported as drift.
 */
static int resolve_intent(void *arg, const struct st_intent *in)
{
	struct jm *jm = arg;
	const struct ocs_fabric *f = jm->f;
	int n_dev = ocs_fabric_devices(f);
	char *touched = calloc((size_t)n_dev, 1);
	bool all_target = true, all_pre = true;
	enum st_intent_state outcome;
	char persist[32], detail[512] = "";

	if (!touched)
		return -ENOMEM;
	snprintf(persist, sizeof(persist), "ocsd-%lld", (long long)in->txn_id);
	for (size_t i = 0; i < in->n_removals; i++)
		touched[ocs_fabric_device_id(f, in->removals[i].group, in->removals[i].device)] = 1;
	for (size_t i = 0; i < in->n_additions; i++)
		touched[ocs_fabric_device_id(f, in->additions[i].xc.group,
					     in->additions[i].xc.device)] = 1;
	for (int d = 0; d < n_dev; d++) {
		struct sb_device *dev = jm->d.devices[d];
		int g = ocs_fabric_device_group(f, d), k = ocs_fabric_device_in_group(f, d);
		struct sb_xc_state *got = NULL;
		struct sb_xc *pre, *target;
		size_t n_got = 0, n_pre, n_target;
		struct sb_error e = { 0 };

		if (!touched[d])
			continue;
		pre = device_view(jm, g, k, NULL, 0, NULL, 0, &n_pre);
		target = device_view(jm, g, k, in->removals, in->n_removals, in->additions,
				     in->n_additions, &n_target);
		if (!pre || !target ||
		    sb_device_connect_until(dev, sb_now_ms() + jm->d.connect_timeout_ms, &e) != 0 ||
		    (sb_device_cancel_commit(dev, persist, NULL), false) ||
		    sb_device_read_xcs(dev, false, SB_DS_RUNNING, &got, &n_got, &e) != 0) {
			all_target = all_pre = false;
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "%s unreadable (%s); ", sb_device_name(dev), e.message);
		} else {
			bool at_target = holds(got, n_got, target, n_target);
			bool at_pre = holds(got, n_got, pre, n_pre);

			all_target &= at_target;
			all_pre &= at_pre;
			if (!at_target && !at_pre)
				snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
					 "%s holds neither the old nor the new configuration; ",
					 sb_device_name(dev));
		}
		free(got);
		free(pre);
		free(target);
	}
	free(touched);
	if (all_target && !all_pre) {
		outcome = ST_INTENT_CONFIRMED;
		snprintf(detail, sizeof(detail), "recovered after restart: devices hold the target");
	} else if (all_pre) {
		outcome = ST_INTENT_ROLLED_BACK;
		snprintf(detail, sizeof(detail), "recovered after restart: devices back at the "
						 "pre-image");
	} else {
		outcome = ST_INTENT_FAILED;
	}
	fprintf(stderr, "<5>transaction %lld of job %s left open: %s, %s\n",
		(long long)in->txn_id, in->job_id, st_intent_state_name(outcome), detail);
	if (st_intent_finish(jm->d.store, in->txn_id, outcome, detail, now_ms()) != 0)
		return -EIO;
	if (outcome == ST_INTENT_CONFIRMED)
		return fs_apply(jm->d.fs, in->removals, in->n_removals, in->additions,
				in->n_additions);
	return 0;
}

int jm_recover(struct jm *jm)
{
	int rc = st_intent_list_open(jm->d.store, resolve_intent, jm);

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
			/* Accepted work: if its transaction landed, it is active. */
			xcs = fs_job_xcs(jm->d.fs, j->pub.id, &n_xcs);
			free(xcs);
			if (n_xcs)
				set_state(jm, j, JM_ACTIVE, NULL);
			else if (j->pub.n_demand)
				start_planning(jm, j);
			else
				set_state(jm, j, JM_FAILED, "its request could not be read back after "
							    "a restart");
			break;
		case JM_RELEASING:
			push_ptr((void ***)&jm->queue, &jm->n_queue, &jm->cap_queue, j);
			break;
		default:
			break;
		}
	}
	pump(jm);
	return 0;
}
