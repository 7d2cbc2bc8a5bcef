/*
 * jobs_links.c - how jobs share leaves (see "Shared leaves" in
 * daemon/README.md): which leaves a job stands on, the usage the other
 * live jobs load there, and the committed links of every job. Works on the
 * job manager's array of live jobs, which it is given; calls nothing of
 * the job manager. Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_internal.h"
#include "jobs_util.h"
#include "leafcentric.h"

bool jl_holds_leaves(enum jm_state s)
{
	return s == JM_PENDING || s == JM_PLANNING || s == JM_PROGRAMMING || s == JM_ACTIVE ||
	       s == JM_RELEASING;
}

/*
 * The leaves a job owns: those of its leaf demand, and for a workload
 * every leaf holding one of its GPUs (known before the search, and a
 * superset of the leaves of the demand it finds).
 */
static bool job_uses_leaf(const struct ocs_fabric *f, const struct jm_job *job, int leaf)
{
	for (size_t i = 0; i < job->n_demand; i++)
		if (job->demand[i].a == leaf || job->demand[i].b == leaf)
			return true;
	for (size_t i = 0; job->workload && i < job->workload->n_gpus; i++)
		if (ocs_fabric_gpu_leaf(f, job->workload->gpus[i]) == leaf)
			return true;
	return false;
}

/*
 * The live job other than self on leaf whose leaf-spine links are not
 * known (circuits committed by an ocsd that did not store links), or NULL.
 */
static const struct jm_job *unshared_owner(const struct ocs_fabric *f, struct job_rt *const *live,
					   size_t n_live, const char *self, int leaf)
{
	for (size_t k = 0; k < n_live; k++) {
		const struct job_rt *o = live[k];

		if (strcmp(o->pub.id, self) != 0 && o->n_links == 0 &&
		    (o->pub.state == JM_ACTIVE || o->pub.state == JM_RELEASING) &&
		    job_uses_leaf(f, &o->pub, leaf))
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
bool jl_leaves_free(const struct ocs_fabric *f, struct job_rt *const *live, size_t n_live,
		    const char *self, const struct lc_demand *demand, size_t n,
		    const struct jm_workload *wl, struct err_info *err)
{
	size_t count = wl ? wl->n_gpus : n;

	for (size_t i = 0; i < count; i++) {
		int leaves[2], n_leaves = 0;

		if (wl) {
			leaves[n_leaves++] = ocs_fabric_gpu_leaf(f, wl->gpus[i]);
		} else {
			leaves[n_leaves++] = demand[i].a;
			leaves[n_leaves++] = demand[i].b;
		}
		for (int l = 0; l < n_leaves; l++) {
			const struct jm_job *other =
				unshared_owner(f, live, n_live, self, leaves[l]);

			if (!other)
				continue;
			err_set(err, ERR_EXHAUSTED, "",
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
 * The leaf-spine usage of every live job but self: its committed links,
 * and those of its admitted plan (jobs_wave.c: a plan ahead of self in a
 * wave, not yet confirmed). A job still planning adds nothing: plans run
 * one at a time, and each is admitted before the next starts.
 */
int jl_others_usage(struct job_rt *const *live, size_t n_live, const char *self,
		    struct lc_leaf_usage **out, size_t *n_out)
{
	size_t n = 0, at = 0;
	struct lc_spine_links *all;
	int rc;

	*out = NULL;
	*n_out = 0;
	for (size_t k = 0; k < n_live; k++)
		if (strcmp(live[k]->pub.id, self) != 0)
			n += live[k]->n_links + (live[k]->admitted ? live[k]->change.n_links : 0);
	if (n == 0)
		return 0;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t k = 0; k < n_live; k++) {
		const struct job_rt *o = live[k];

		if (strcmp(o->pub.id, self) == 0)
			continue;
		for (size_t i = 0; i < o->n_links; i++)
			all[at++] = (struct lc_spine_links){o->links[i].a, o->links[i].b,
							    o->links[i].h, o->links[i].links};
		for (size_t i = 0; o->admitted && i < o->change.n_links; i++)
			all[at++] = (struct lc_spine_links){
				o->change.links[i].a, o->change.links[i].b, o->change.links[i].h,
				o->change.links[i].links};
	}
	rc = lc_usage_from_assignment(all, n, out, n_out);
	free(all);
	return rc;
}

/* The entries of links that belong to job id (malloc'd; NULL with *n 0 when none). */
static int links_of(const struct st_link *links, size_t n_links, const char *id,
		    struct st_link **out, size_t *n)
{
	size_t k = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < n_links; i++)
		k += strcmp(links[i].job_id, id) == 0;
	if (k == 0)
		return 0;
	*out = malloc(k * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < n_links; i++)
		if (strcmp(links[i].job_id, id) == 0)
			(*out)[(*n)++] = links[i];
	return 0;
}

int jl_apply(struct job_rt *const *live, size_t n_live, struct job_rt *j,
	     const struct st_link *links, size_t n_links)
{
	struct st_link **mine = calloc(n_live + 1, sizeof(*mine));
	size_t *n_mine = calloc(n_live + 1, sizeof(*n_mine));
	int rc = mine && n_mine ? 0 : -ENOMEM;

	/* Everything is computed first, so that nothing changes on failure. */
	for (size_t k = 0; rc == 0 && k < n_live; k++)
		if (live[k] != j)
			rc = links_of(links, n_links, live[k]->pub.id, &mine[k], &n_mine[k]);
	if (rc == 0)
		rc = links_of(links, n_links, j->pub.id, &mine[n_live], &n_mine[n_live]);
	for (size_t k = 0; k <= n_live && mine && n_mine; k++) {
		struct job_rt *o = k < n_live ? live[k] : j;

		if (rc != 0 || (k < n_live && (o == j || n_mine[k] == 0))) {
			free(mine[k]);
			continue;
		}
		/* a job the plan names gets its entries; j its own or none */
		free(o->links);
		o->links = mine[k];
		o->n_links = n_mine[k];
	}
	free(mine);
	free(n_mine);
	return rc;
}
