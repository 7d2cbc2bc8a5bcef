/*
 * jobs_links.c - how jobs share leaves (the job manager's half that knows
 * the leaf-spine links of plans, see "Shared leaves" in daemon/README.md):
 * which leaves a job stands on, the usage the other live jobs load there,
 * and the committed links of every job, kept in step with the store.
 * Loop thread only, like the rest of the job manager.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_internal.h"
#include "leafcentric.h"

bool jm_holds_leaves(enum jm_state s)
{
	return s == JM_PENDING || s == JM_PLANNING || s == JM_PROGRAMMING || s == JM_ACTIVE ||
	       s == JM_RELEASING;
}

/*
 * The leaves a job owns: those of its leaf demand, and for a workload
 * every leaf holding one of its GPUs (known before the search, and a
 * superset of the leaves of the demand it finds).
 */
static bool job_uses_leaf(const struct jm *jm, const struct jm_job *job, int leaf)
{
	for (size_t i = 0; i < job->n_demand; i++)
		if (job->demand[i].a == leaf || job->demand[i].b == leaf)
			return true;
	for (size_t i = 0; job->workload && i < job->workload->n_gpus; i++)
		if (ocs_fabric_gpu_leaf(jm->f, job->workload->gpus[i]) == leaf)
			return true;
	return false;
}

/*
 * The live job other than self on leaf whose leaf-spine links are not
 * known (circuits committed by an ocsd that did not store links), or NULL.
 */
static const struct jm_job *unshared_owner(const struct jm *jm, const char *self, int leaf)
{
	for (size_t k = 0; k < jm->n_jobs; k++) {
		const struct job_rt *o = jm->jobs[k];

		if (strcmp(o->pub.id, self) != 0 && o->n_links == 0 &&
		    (o->pub.state == JM_ACTIVE || o->pub.state == JM_RELEASING) &&
		    job_uses_leaf(jm, &o->pub, leaf))
			return &o->pub;
	}
	return NULL;
}

/*
 * Jobs may share leaves: each is planned around the leaf-spine links the
 * others load (contention over tau on a shared uplink is refused when the
 * plan is made). Only a job whose links are not known keeps its leaves to
 * itself, since nothing could be planned around it.
 */
bool jm_leaves_free(const struct jm *jm, const char *self, const struct lc_demand *demand,
			size_t n, const struct jm_workload *wl, struct jm_error *err)
{
	size_t count = wl ? wl->n_gpus : n;

	for (size_t i = 0; i < count; i++) {
		int leaves[2], n_leaves = 0;

		if (wl) {
			leaves[n_leaves++] = ocs_fabric_gpu_leaf(jm->f, wl->gpus[i]);
		} else {
			leaves[n_leaves++] = demand[i].a;
			leaves[n_leaves++] = demand[i].b;
		}
		for (int l = 0; l < n_leaves; l++) {
			const struct jm_job *other = unshared_owner(jm, self, leaves[l]);

			if (!other)
				continue;
			jm_set_error(err, JM_EXHAUSTED, "",
				     "leaf %d is held by job %s (%s), whose leaf-spine links were "
				     "stored by an older ocsd: its leaves cannot be shared",
				     leaves[l], other->id, jm_state_name(other->state));
			snprintf(err->field, sizeof(err->field),
				 wl ? "placement.gpus[%zu]" : "leaf_demand.pairs[%zu]", i);
			return false;
		}
	}
	return true;
}

/*
 * The leaf-spine usage of every live job but self (committed links only:
 * a job still planning adds its links when it commits, which moves the
 * fabric generation and re-plans anyone planned without them). 0 or -ENOMEM.
 */
int jm_others_usage(const struct jm *jm, const char *self, struct lc_leaf_usage **out,
			size_t *n_out)
{
	size_t n = 0, at = 0;
	struct lc_spine_links *all;
	int rc;

	*out = NULL;
	*n_out = 0;
	for (size_t k = 0; k < jm->n_jobs; k++)
		if (strcmp(jm->jobs[k]->pub.id, self) != 0 && jm_holds_leaves(jm->jobs[k]->pub.state))
			n += jm->jobs[k]->n_links;
	if (n == 0)
		return 0;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t k = 0; k < jm->n_jobs; k++) {
		const struct job_rt *o = jm->jobs[k];

		if (strcmp(o->pub.id, self) == 0 || !jm_holds_leaves(o->pub.state))
			continue;
		for (size_t i = 0; i < o->n_links; i++)
			all[at++] = (struct lc_spine_links){ o->links[i].a, o->links[i].b,
							     o->links[i].h, o->links[i].links };
	}
	rc = lc_usage_from_assignment(all, n, out, n_out);
	free(all);
	return rc;
}

void jm_apply_links(struct jm *jm, struct job_rt *j)
{
	/* every other job the plan names (a global re-plan) gets its entries */
	for (size_t k = 0; k < jm->n_jobs; k++) {
		struct job_rt *o = jm->jobs[k];
		size_t n = 0;
		struct st_link *mine;

		if (o == j)
			continue;
		for (size_t i = 0; i < j->n_plan_links; i++)
			n += strcmp(j->plan_links[i].job_id, o->pub.id) == 0;
		if (n == 0 || !(mine = malloc(n * sizeof(*mine))))
			continue;
		n = 0;
		for (size_t i = 0; i < j->n_plan_links; i++)
			if (strcmp(j->plan_links[i].job_id, o->pub.id) == 0)
				mine[n++] = j->plan_links[i];
		free(o->links);
		o->links = mine;
		o->n_links = n;
	}
	/* j's own entries (none after a release) */
	size_t n = 0;

	for (size_t i = 0; i < j->n_plan_links; i++)
		if (strcmp(j->plan_links[i].job_id, j->pub.id) == 0)
			j->plan_links[n++] = j->plan_links[i];
	free(j->links);
	j->links = n ? j->plan_links : NULL;
	j->n_links = n;
	if (!n)
		free(j->plan_links);
	j->plan_links = NULL;
	j->n_plan_links = 0;
}

static int load_link(void *arg, const struct st_link *l)
{
	struct jm *jm = arg;
	struct job_rt *j = jm_find_job(jm, l->job_id);
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

int jm_load_links(struct jm *jm)
{
	for (size_t i = 0; i < jm->n_jobs; i++) {
		free(jm->jobs[i]->links);
		jm->jobs[i]->links = NULL;
		jm->jobs[i]->n_links = 0;
	}
	return st_link_list(jm->d.store, load_link, jm);
}
