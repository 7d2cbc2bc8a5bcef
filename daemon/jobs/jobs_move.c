/*
 * jobs_move.c - who owns each cross-connect of a global re-plan
 * (allow_moving_other_jobs): the planner re-plans the whole demand of every
 * job holding circuits plus the new job's, and returns one configuration;
 * the job manager must know which job each cross-connect serves, so that
 * every job keeps (possibly moved) circuits of its own and a release
 * removes exactly its own.
 *
 * A job owns its leaves, so every leaf pair of the plan's spine assignment
 * L[a][b][h] belongs to one job, and the circuits of pods i, j in OCS group
 * h are exactly the links of the leaf pairs between those pods through
 * spine h, in each direction. Configured cross-connects the plan keeps stay
 * with their owner while it still needs circuits there; the others (new
 * ones, and kept ones whose owner needs fewer there now) go to the jobs
 * still short of circuits there. Any mismatch is refused, and the caller
 * plans without moving other jobs.
 *
 * Pure and thread-safe (runs on a solver worker).
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct need {
	int i, j, h; /* pods i < j, group h */
	int owner;
	int left[2]; /* circuits still to attribute: [0] i -> j, [1] j -> i */
};

struct owned_xc {
	struct ocs_xc xc;
	int owner;
};

static int owned_cmp(const void *a, const void *b)
{
	return ocs_xc_cmp_in_out(&((const struct owned_xc *)a)->xc,
				 &((const struct owned_xc *)b)->xc);
}

static struct need *find_need(struct need *needs, size_t n, int i, int j, int h, int owner)
{
	for (size_t k = 0; k < n; k++)
		if (needs[k].i == i && needs[k].j == j && needs[k].h == h &&
		    (owner < 0 || needs[k].owner == owner))
			return &needs[k];
	return NULL;
}

/* The first need at (i, j, h) with circuits left in direction dir (any owner). */
static struct need *find_short(struct need *needs, size_t n, int i, int j, int h, int dir)
{
	for (size_t k = 0; k < n; k++)
		if (needs[k].i == i && needs[k].j == j && needs[k].h == h && needs[k].left[dir] > 0)
			return &needs[k];
	return NULL;
}

/* Pods and direction of a one-way cross-connect; -ENOENT when uncabled. */
static int xc_pods(const struct ocs_fabric *f, const struct ocs_xc *xc, int *i, int *j, int *dir)
{
	struct ocs_spine_port from, to;

	if (ocs_fabric_input_owner(f, xc->group, (struct ocs_device_port){xc->device, xc->in},
				   &from) != 0 ||
	    ocs_fabric_output_owner(f, xc->group, (struct ocs_device_port){xc->device, xc->out},
				    &to) != 0 ||
	    from.pod == to.pod)
		return -ENOENT;
	*i = from.pod < to.pod ? from.pod : to.pod;
	*j = from.pod < to.pod ? to.pod : from.pod;
	*dir = from.pod < to.pod ? 0 : 1;
	return 0;
}

int jm_attribute_owners(const struct ocs_fabric *f, const struct lc_plan *plan,
			const int *leaf_owner, const struct ocs_xc *conf, const int *conf_owner,
			size_t n_conf, int *owner, bool *reowned)
{
	struct need *needs = malloc((plan->n_assignment ? plan->n_assignment : 1) * sizeof(*needs));
	struct owned_xc *sorted = malloc((n_conf ? n_conf : 1) * sizeof(*sorted));
	size_t n_needs = 0;
	int rc = -EINVAL;

	if (!needs || !sorted) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < plan->n_assignment; k++) {
		const struct lc_spine_links *l = &plan->assignment[k];
		int pa = ocs_fabric_leaf_pod(f, l->a), pb = ocs_fabric_leaf_pod(f, l->b);
		int o = leaf_owner[l->a];
		int i = pa < pb ? pa : pb, j = pa < pb ? pb : pa;
		struct need *nd;

		if (o < 0 || leaf_owner[l->b] != o || pa == pb)
			goto out;
		nd = find_need(needs, n_needs, i, j, l->h, o);
		if (!nd) {
			nd = &needs[n_needs++];
			*nd = (struct need){i, j, l->h, o, {0, 0}};
		}
		nd->left[0] += l->links;
		nd->left[1] += l->links;
	}
	for (size_t k = 0; k < n_conf; k++)
		sorted[k] = (struct owned_xc){conf[k], conf_owner[k]};
	qsort(sorted, n_conf, sizeof(*sorted), owned_cmp);
	/* Kept cross-connects stay with their owner while it needs them. */
	for (size_t x = 0; x < plan->n_xcs; x++) {
		struct owned_xc key = {plan->xcs[x], 0};
		const struct owned_xc *kept =
			bsearch(&key, sorted, n_conf, sizeof(*sorted), owned_cmp);
		struct need *nd;
		int i, j, dir;

		owner[x] = -1;
		reowned[x] = false;
		if (xc_pods(f, &plan->xcs[x], &i, &j, &dir) != 0)
			goto out;
		if (!kept)
			continue;
		nd = find_need(needs, n_needs, i, j, plan->xcs[x].group, kept->owner);
		if (nd && nd->left[dir] > 0) {
			nd->left[dir]--;
			owner[x] = kept->owner;
		} else {
			reowned[x] = true;
		}
	}
	/* The rest go to whoever is still short there. */
	for (size_t x = 0; x < plan->n_xcs; x++) {
		struct need *nd;
		int i, j, dir;

		if (owner[x] >= 0)
			continue;
		if (xc_pods(f, &plan->xcs[x], &i, &j, &dir) != 0)
			goto out;
		nd = find_short(needs, n_needs, i, j, plan->xcs[x].group, dir);
		if (!nd)
			goto out;
		nd->left[dir]--;
		owner[x] = nd->owner;
	}
	for (size_t k = 0; k < n_needs; k++)
		if (needs[k].left[0] || needs[k].left[1])
			goto out;
	rc = 0;
out:
	free(needs);
	free(sorted);
	return rc;
}
