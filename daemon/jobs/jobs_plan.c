/*
 * jobs_plan.c - implementation of jobs_plan.h: the snapshot a plan is made
 * on (loop side) and everything after the kind's plan (pool side, pure):
 * the refusal with the field it concerns, or the change set (what to
 * remove, what to add under which job, the leaf-spine links) and the
 * figures. The leaf plan both kinds end in is here too (jp_plan_leaf).
 */
#include "jobs_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"
#include "fit.h"
#include "jobs_internal.h"
#include "jobs_util.h"
#include "l2check.h"

void jp_change_clear(struct jp_change *c)
{
	free(c->removals);
	free(c->additions);
	free(c->links);
	rg_rings_free(c->rings, c->n_rings);
	free(c->bundles);
	*c = (struct jp_change){0};
}

void jp_task_free(struct jp_task *t)
{
	if (!t)
		return;
	lc_plan_free(t->plan);
	free(t->demand);
	free(t->existing);
	free(t->out_of_service);
	free(t->conf_sorted);
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
	free(t->movers);
	free(t->use);
	jm_workload_free(t->wl);
	free(t->sub.id);
	free(t->sub.key);
	free(t->sub.raw);
	jp_change_clear(&t->change);
	free(t->added);
	jm_figures_clear(&t->fig);
	free(t);
}

struct jp_task *jp_ring_task_new(const struct jm_kind *kind, const struct ocs_ring_domain *d,
				 uint8_t *use, unsigned long gen, const char *job_id,
				 const struct jm_ring_request *req)
{
	struct jp_task *t = calloc(1, sizeof(*t));

	if (!t) {
		free(use);
		return NULL;
	}
	t->kind = kind;
	t->domain = *d;
	t->use = use;
	t->gen = gen;
	t->ring = *req;
	snprintf(t->job_id, sizeof(t->job_id), "%s", job_id ? job_id : "");
	snprintf(t->planner, sizeof(t->planner), "%s",
		 req->orchestration[0] ? req->orchestration : "dcn-free");
	return t;
}

struct jp_task *jp_task_new(const struct jm_kind *kind, const struct ocs_fabric *f,
			    const struct fs_state *fs, const struct ocs_xc *unowned,
			    size_t n_unowned, const bool *drained, int n_devices,
			    const char *job_id, const char *planner, bool replan,
			    const struct lc_demand *demand, size_t n_demand,
			    const struct jm_workload *wl, const struct jm_figures *delta)
{
	struct jp_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->kind = kind;
	t->over_leaf = -1;
	t->f = *f;
	snprintf(t->job_id, sizeof(t->job_id), "%s", job_id ? job_id : "");
	snprintf(t->planner, sizeof(t->planner), "%s", planner);
	t->replan = replan;
	if (delta && delta->has_delta) {
		t->has_delta = true;
		t->delta = delta->delta;
	}
	if (wl && n_demand == 0) {
		t->report_search = true;
		t->wl = jm_workload_dup(wl);
		if (!t->wl)
			goto fail;
	}
	t->demand = malloc((n_demand ? n_demand : 1) * sizeof(*demand));
	t->existing = fs_snapshot(fs, &t->n_existing);
	t->n_configured = t->n_existing;
	t->gen = t->fs_gen = fs_generation(fs);
	if (!t->demand || !t->existing)
		goto fail;
	if (n_unowned) {
		struct ocs_xc *all =
			realloc(t->existing, (t->n_existing + n_unowned + 1) * sizeof(*all));

		if (!all)
			goto fail;
		memcpy(all + t->n_existing, unowned, n_unowned * sizeof(*all));
		t->existing = all;
		t->n_existing += n_unowned;
		t->n_unowned = n_unowned;
	}
	if (n_demand)
		memcpy(t->demand, demand, n_demand * sizeof(*demand));
	t->n_demand = n_demand;
	if (drained) {
		/* Drained devices: blockers the planner must treat as pinned. */
		size_t n_blk = 0;
		struct ocs_xc *blk =
			fs_drain_blockers_around(fs, drained, unowned, n_unowned, &n_blk);
		struct ocs_xc *all =
			blk ? realloc(t->existing, (t->n_existing + n_blk + 1) * sizeof(*all))
			    : NULL;

		t->drained = malloc((size_t)n_devices * sizeof(*t->drained) + 1);
		if (!all || !t->drained) {
			free(blk);
			goto fail;
		}
		memcpy(t->drained, drained, (size_t)n_devices * sizeof(*t->drained));
		memcpy(all + t->n_existing, blk, n_blk * sizeof(*blk));
		t->existing = all;
		t->n_existing += n_blk;
		free(blk);
	}
	return t;
fail:
	jp_task_free(t);
	return NULL;
}

/* ---- the leaf plan (pool side) ---- */

static int run_planner(struct jp_task *t, const struct lc_demand *demand, size_t n_demand,
		       bool replan, size_t n_existing)
{
	/* a global re-plan plans every job holding circuits: no usage is left */
	struct lc_options opt = {.realize = true,
				 .replan = replan,
				 .usage = replan ? NULL : t->usage,
				 .n_usage = replan ? 0 : t->n_usage,
				 .out_of_service = t->out_of_service,
				 .n_out_of_service = t->n_out_of_service};

	const struct ocs_planner *p = ocs_planner_find(t->planner);

	if (p && p->id == OCS_PLANNER_POD_CENTRIC)
		return pc_plan(&t->f, demand, n_demand, t->existing, n_existing, &opt, &t->plan);
	return lc_plan(&t->f, demand, n_demand, t->existing, n_existing, &opt, &t->plan);
}

static bool is_configured(const struct jp_task *t, const struct ocs_xc *xc)
{
	return bsearch(xc, t->conf_sorted, t->n_configured, sizeof(*xc), ocs_xc_cmp_in_out) != NULL;
}

/* Whether a replan puts a cross-connect that is not configured on a drained device. */
static bool touches_drained(const struct jp_task *t)
{
	if (!t->drained)
		return false;
	for (size_t i = 0; i < t->plan->n_xcs; i++) {
		const struct ocs_xc *xc = &t->plan->xcs[i];
		int id = ocs_fabric_device_id(&t->f, xc->group, xc->device);

		if (id >= 0 && t->drained[id] && !is_configured(t, xc))
			return true;
	}
	return false;
}

/*
 * Whether a replan puts a new cross-connect on a port an unowned circuit
 * holds (the replan sees only the configured ones; unowned circuits are
 * never moved).
 */
static bool touches_unowned(const struct jp_task *t)
{
	const struct ocs_xc *u = t->existing + t->n_configured;

	for (size_t i = 0; t->n_unowned && i < t->plan->n_xcs; i++) {
		const struct ocs_xc *xc = &t->plan->xcs[i];

		for (size_t k = 0; k < t->n_unowned; k++)
			if (u[k].group == xc->group && u[k].device == xc->device &&
			    (u[k].in == xc->in || u[k].out == xc->out))
				return true;
	}
	return false;
}

/*
 * A global re-plan of this job's demand and every other job's: the plan,
 * and who owns each of its cross-connects. Returns false when the plan
 * cannot be used as is (the caller plans pinned).
 */
static bool global_replan(struct jp_task *t)
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
	if (touches_unowned(t)) {
		t->unowned_fallback = true;
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
	qsort(t->plan->moved, t->plan->n_moved, sizeof(*t->plan->moved), ocs_xc_cmp_in_out);
	for (size_t c = 0; c < t->n_configured; c++)
		if (bsearch(&t->existing[c], t->plan->moved, t->plan->n_moved,
			    sizeof(*t->plan->moved), ocs_xc_cmp_in_out))
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
 * carries more than tau (over_leaf -1 when there is none). Only the plan's
 * own links count: an uplink other jobs already overload (a pod-centric
 * job's) does not refuse a plan that adds nothing there.
 */
static void find_overload(struct jp_task *t)
{
	struct lc_leaf_usage *mine = NULL;
	size_t n_mine = 0;

	t->over_leaf = -1;
	const struct ocs_planner *p = ocs_planner_find(t->planner);

	if (!t->n_usage || !t->plan || (p && p->id == OCS_PLANNER_POD_CENTRIC) ||
	    lc_usage_from_assignment(t->plan->assignment, t->plan->n_assignment, &mine, &n_mine) !=
		    0)
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

/*
 * After a proven refusal: would the job fit if the configured circuits
 * were free (the unowned circuits and drain blockers stay, and so does
 * every leaf's usage)? Then the configured cross-connects on the ports
 * that placement takes are t->movers. Nothing on -ENOMEM: a hint only.
 */
static void find_movers(struct jp_task *t)
{
	struct fit_request q = {&t->f,
				t->demand,
				t->n_demand,
				t->existing + t->n_configured,
				t->n_existing - t->n_configured,
				t->usage,
				t->n_usage,
				0};
	struct fit_result r;
	struct ocs_xc *by_out = NULL;

	if (!t->n_configured || fit_place(&q, &r) != 0)
		return;
	t->movers = malloc(t->n_configured * sizeof(*t->movers));
	by_out = malloc(r.n_xcs * sizeof(*by_out) + 1);
	if (r.fit != LC_FIT_PLACED || !t->movers || !by_out) {
		free(by_out);
		fit_result_clear(&r);
		return;
	}
	/* the placement's device inputs and outputs, each sorted for look-up */
	for (size_t x = 0; x < r.n_xcs; x++)
		by_out[x] = (struct ocs_xc){r.xcs[x].group, r.xcs[x].device, r.xcs[x].out, 0};
	qsort(r.xcs, r.n_xcs, sizeof(*r.xcs), ocs_xc_cmp_in);
	qsort(by_out, r.n_xcs, sizeof(*by_out), ocs_xc_cmp_in);
	for (size_t c = 0; c < t->n_configured; c++) {
		const struct ocs_xc *x = &t->existing[c];
		struct ocs_xc out = {x->group, x->device, x->out, 0};

		if (bsearch(x, r.xcs, r.n_xcs, sizeof(*r.xcs), ocs_xc_cmp_in) ||
		    bsearch(&out, by_out, r.n_xcs, sizeof(*by_out), ocs_xc_cmp_in))
			t->movers[t->n_movers++] = c;
	}
	free(by_out);
	fit_result_clear(&r);
}

void jp_plan_leaf(struct jp_task *t)
{
	struct l2_violation v;

	/* A global re-plan pins nothing (the blockers would only look like
	 * circuits); when it touches a drained device or its circuits cannot be
	 * attributed to their jobs, the job is planned pinned instead. */
	if (!t->replan || (!global_replan(t) && t->rc == 0)) {
		t->rc = run_planner(t, t->demand, t->n_demand, false, t->n_existing);
		if (t->rc == 0)
			find_overload(t);
		if (t->rc == 0 && t->plan->fit == LC_FIT_NONE && !t->replan)
			find_movers(t);
	}
	if (t->rc == 0) {
		t->l2_violations = l2_check(&t->f, t->plan->xcs, t->plan->n_xcs, &v, 1);
		if (t->l2_violations)
			snprintf(t->l2_reason, sizeof(t->l2_reason),
				 "group %d device %d %d->%d: %s", v.xc.group, v.xc.device, v.xc.in,
				 v.xc.out, v.reason);
	}
}

/* ---- after the plan (pool side) ---- */

/* Why a plan cannot be applied (true, err set), or false when it can. */
static bool plan_refusal(const struct jp_task *t, struct err_info *err)
{
	/* A parallelism job's leaf demand is the search's, not the caller's. */
	const char *demand_field = t->has_delta ? "parallelism" : "leaf_demand";
	const char *drain_note = t->drain_fallback ? ", and moving other jobs' circuits would "
						     "have needed a drained device"
						   : "";

	if (t->kind_rc) {
		*err = t->kind_err;
		return true;
	}
	if (t->rc == -EINVAL) {
		err_set(err, t->has_delta ? ERR_INTERNAL : ERR_INVALID, demand_field,
			"the planner refused the %sdemand", t->has_delta ? "planned leaf " : "");
		return true;
	}
	if (t->rc) {
		err_set(err, ERR_INTERNAL, "", "planner failed: %s", strerror(-t->rc));
		return true;
	}
	if (t->l2_violations) {
		err_set(err, ERR_INTERNAL, "",
			"the plan failed the L2 symmetry check (%d violations, first: %s); "
			"nothing was touched",
			t->l2_violations, t->l2_reason);
		return true;
	}
	if (t->plan->fit == LC_FIT_NONE || t->plan->fit == LC_FIT_GAVE_UP) {
		/* the exact search decided (fit.h) */
		if (t->plan->fit == LC_FIT_NONE)
			err_set(err, ERR_EXHAUSTED, demand_field,
				"no placement of the job exists without moving other jobs' "
				"circuits; what binds is %s%s%s; nothing was touched",
				t->plan->why,
				t->drained ? " (the ports of drained devices count as taken)" : "",
				drain_note);
		else
			err_set(err, ERR_EXHAUSTED, demand_field,
				"no placement of the job was found within the search's bound of "
				"%ld steps (%s); nothing was touched",
				t->plan->fit_steps, t->plan->why);
		return true;
	}
	if (t->plan->n_unplaced) {
		int links = 0;
		const struct lc_demand *u = t->plan->unplaced;

		for (size_t i = 0; i < t->plan->n_unplaced; i++)
			links += u[i].links;
		err_set(err, ERR_EXHAUSTED, demand_field,
			"%d link(s) in %zu leaf pair(s) do not fit on the free spine ports%s "
			"(first: leaves %d-%d, %d link(s))%s; nothing was touched",
			links, t->plan->n_unplaced,
			t->n_usage ? " or the uplinks other jobs leave on shared leaves" : "",
			u[0].a, u[0].b, u[0].links, drain_note);
		return true;
	}
	if (t->plan->unrealized_circuits) {
		err_set(err, ERR_EXHAUSTED, demand_field,
			"%zu circuit(s) found no free OCS ports (first: pods %d-%d in group "
			"%d)%s; nothing was touched",
			t->plan->unrealized_circuits, t->plan->unrealized[0].i,
			t->plan->unrealized[0].j, t->plan->unrealized[0].h, drain_note);
		return true;
	}
	if (t->over_leaf >= 0) {
		err_set(err, ERR_EXHAUSTED, demand_field,
			"leaf %d is shared with other jobs: its uplinks to spine %d would carry %d "
			"links (tau %d), which polarizes routing; nothing was touched",
			t->over_leaf, t->over_spine, t->over_load, t->f.tau);
		return true;
	}
	return false;
}

static void fill_figures(struct jm_figures *fig, const struct jp_task *t, size_t n_new)
{
	int requested = 0, unplaced = 0;

	jm_figures_clear(fig);
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
	for (size_t k = 1; t->moved_owner && k < t->n_names; k++) {
		char(*m)[72];

		if (!t->moved_owner[k])
			continue;
		m = realloc(fig->moved_jobs, (fig->n_moved_jobs + 1) * sizeof(*m));
		if (!m)
			break;
		fig->moved_jobs = m;
		snprintf(fig->moved_jobs[fig->n_moved_jobs++], sizeof(*m), "%s", t->names[k]);
	}
	if (t->plan->n_unplaced) {
		fig->unplaced = malloc(t->plan->n_unplaced * sizeof(*fig->unplaced));
		if (fig->unplaced) {
			memcpy(fig->unplaced, t->plan->unplaced,
			       t->plan->n_unplaced * sizeof(*fig->unplaced));
			fig->n_unplaced = t->plan->n_unplaced;
		}
	}
	if (t->kind->figures)
		t->kind->figures(t, fig);
}

/* The plan's cross-connects not configured and not blockers: what a plan adds. */
static int find_added(struct jp_task *t)
{
	struct ocs_xc *existing = malloc((t->n_existing ? t->n_existing : 1) * sizeof(*existing));

	if (!existing)
		return -ENOMEM;
	memcpy(existing, t->existing, t->n_existing * sizeof(*existing));
	qsort(existing, t->n_existing, sizeof(*existing), ocs_xc_cmp_in_out);
	t->added = malloc((t->plan->n_xcs ? t->plan->n_xcs : 1) * sizeof(*t->added));
	if (!t->added) {
		free(existing);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->plan->n_xcs; i++)
		if (!bsearch(&t->plan->xcs[i], existing, t->n_existing, sizeof(*existing),
			     ocs_xc_cmp_in_out))
			t->added[t->n_added++] = t->plan->xcs[i];
	free(existing);
	return 0;
}

static void add_xc(struct jp_change *c, const struct ocs_xc *xc, const char *owner)
{
	struct st_circuit *a = &c->additions[c->n_additions++];

	a->xc = *xc;
	snprintf(a->job_id, sizeof(a->job_id), "%s", owner);
}

/*
 * The change set: for a pinned plan, the new cross-connects (this job's)
 * and the configured ones it moves; for a global re-plan, new
 * cross-connects under their owners, dropped ones, and kept ones that
 * change owner (removed and added again: the devices do not change, the
 * circuit table does). Returns the number of new cross-connects, or -ENOMEM.
 */
static long make_change(struct jp_task *t)
{
	const struct lc_plan *p = t->plan;
	struct jp_change *c = &t->change;
	size_t n = p->n_xcs + 1;
	long n_new = 0;

	c->additions = malloc(n * sizeof(*c->additions));
	c->removals = malloc((p->n_moved + n) * sizeof(*c->removals));
	c->links = malloc((p->n_assignment ? p->n_assignment : 1) * sizeof(*c->links));
	if (!c->additions || !c->removals || !c->links)
		return -ENOMEM;
	if (t->xc_owner) {
		for (size_t x = 0; x < p->n_xcs; x++) {
			bool configured = is_configured(t, &p->xcs[x]);

			if (configured && !t->xc_reowned[x])
				continue;
			if (configured)
				c->removals[c->n_removals++] = p->xcs[x];
			else
				n_new++;
			add_xc(c, &p->xcs[x], t->names[t->xc_owner[x]]);
		}
	} else {
		for (size_t i = 0; i < t->n_added; i++)
			add_xc(c, &t->added[i], t->job_id);
		n_new = (long)t->n_added;
	}
	/* Only what is configured is removed (drain blockers never were). */
	for (size_t m = 0; m < p->n_moved; m++)
		if (is_configured(t, &p->moved[m]))
			c->removals[c->n_removals++] = p->moved[m];
	for (size_t i = 0; i < p->n_assignment; i++) {
		const struct lc_spine_links *l = &p->assignment[i];
		struct st_link *out = &c->links[c->n_links++];

		snprintf(out->job_id, sizeof(out->job_id), "%s",
			 t->assign_owner ? t->names[t->assign_owner[i]] : t->job_id);
		out->a = l->a;
		out->b = l->b;
		out->h = l->h;
		out->links = l->links;
	}
	return n_new;
}

void jp_work(struct jp_task *t)
{
	long n_new;

	if (t->kind->rings) {
		t->kind->plan(t); /* the whole answer: change, figures or refusal */
		return;
	}
	/* The configured cross-connects, sorted: the replan's drain check and
	 * the change set look them up. */
	t->conf_sorted = malloc((t->n_configured ? t->n_configured : 1) * sizeof(*t->conf_sorted));
	if (!t->conf_sorted) {
		t->kind_rc = -ENOMEM;
		err_set(&t->kind_err, ERR_INTERNAL, "", "out of memory");
	} else {
		memcpy(t->conf_sorted, t->existing, t->n_configured * sizeof(*t->existing));
		qsort(t->conf_sorted, t->n_configured, sizeof(*t->conf_sorted), ocs_xc_cmp_in_out);
		t->kind->plan(t);
	}
	if (t->search_only)
		return;
	t->refused = plan_refusal(t, &t->err);
	if (t->kind_rc || t->rc || !t->plan)
		return;
	if (find_added(t) != 0) {
		t->refused = true;
		err_set(&t->err, ERR_INTERNAL, "", "out of memory");
		return;
	}
	n_new = t->l2_violations ? 0 : t->refused ? (long)t->n_added : make_change(t);
	if (n_new < 0) {
		t->refused = true;
		err_set(&t->err, ERR_INTERNAL, "", "out of memory");
		return;
	}
	fill_figures(&t->fig, t, (size_t)n_new);
}
