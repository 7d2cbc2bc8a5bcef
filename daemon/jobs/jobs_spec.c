/*
 * jobs_spec.c - a job request's checks and what a job takes from it: the
 * kind and planner a spec names, the GPUs no other live job may hold
 * (issue 14 #9), the spec checked against the fabric (errors name the
 * field of the API's JobSpec). Called by the requests in jobs.c and by
 * start-up (jobs_recover.c); reads the live jobs, changes none.
 */
#include "jobs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_util.h"

const struct jm_kind *jm_kind_of(const struct jm_workload *wl)
{
	return wl ? &jm_kind_parallelism : &jm_kind_leaf;
}

const struct jm_kind *jm_spec_kind(const struct jm_spec *spec)
{
	return spec->ring ? &jm_kind_ring : spec->rail ? &jm_kind_rail : jm_kind_of(spec->workload);
}

const char *jm_planner_of(const struct jm_spec *spec)
{
	if (spec->ring)
		return spec->ring->orchestration[0] ? spec->ring->orchestration : "dcn-free";
	if (spec->rail)
		return "";
	if (spec->planner && *spec->planner)
		return spec->planner;
	return ocs_planner_default(jm_kind_of(spec->workload)->demand)->name;
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
bool jm_gpus_free(const struct jm *jm, const char *self, const int64_t *gpus, size_t n,
		  const struct jm_workload *wl, struct err_info *err)
{
	const int64_t *mine = gpus_of(gpus, n, wl, &n);
	int64_t *sorted;

	if (n == 0 || jm->n_live == 0)
		return true;
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted) {
		err_set(err, ERR_INTERNAL, "", "out of memory");
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
			err_set(err, ERR_PRECONDITION, "",
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
int jm_copy_gpus(struct jm_job *job, const int64_t *gpus, size_t n)
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
bool jm_check_spec(struct jm *jm, const struct jm_spec *spec, struct err_info *err)
{
	const struct jm_kind *kind = jm_spec_kind(spec);
	const char *planner = spec->planner && *spec->planner ? spec->planner : NULL;
	const struct ocs_planner *p = planner ? ocs_planner_find(planner) : NULL;

	if (kind->rings)
		return kind->check(jm->d.cfg, spec, err);
	if (kind->gpus_only)
		return kind->check(jm->d.cfg, spec, err) &&
		       (!jm->d.gpus_check ||
			jm->d.gpus_check(jm->d.gpus_check_ctx, spec->gpus, spec->n_gpus, err)) &&
		       jm_gpus_free(jm, spec->id ? spec->id : "", spec->gpus, spec->n_gpus, NULL,
				    err);
	if (jm->d.gpus_check) {
		err_set(err, ERR_PRECONDITION, spec->workload ? "parallelism" : "leaf_demand",
			"the fabric is a rail-ocs: a job is its GPUs (placement.gpus)");
		return false;
	}
	if (jm->d.rings) {
		err_set(err, ERR_PRECONDITION, spec->workload ? "parallelism" : "leaf_demand",
			"the fabric is an ocstrx-ring: jobs ask for rings (ring)");
		return false;
	}
	if (planner && (!p || p->demand != kind->demand)) {
		char list[200];

		planner_list(kind, list, sizeof(list));
		err_set(err, ERR_INVALID, "options.planner", "\"%s\" does not plan %s (%s)",
			planner, kind->demand_name, list);
		return false;
	}
	if (!kind->check(jm->d.cfg, spec, err))
		return false;
	if (!jm_gpus_free(jm, spec->id ? spec->id : "", spec->gpus, spec->n_gpus, spec->workload,
			  err))
		return false;
	return jl_leaves_free(jm->f, jm->live, jm->n_live, spec->id ? spec->id : "", spec->demand,
			      spec->n_demand, spec->workload, err);
}

void jm_copy_spec(struct job_rt *j, const struct jm_spec *spec)
{
	snprintf(j->pub.id, sizeof(j->pub.id), "%s", spec->id);
	snprintf(j->pub.key, sizeof(j->pub.key), "%s",
		 spec->idempotency_key ? spec->idempotency_key : "");
	snprintf(j->pub.planner, sizeof(j->pub.planner), "%s", jm_planner_of(spec));
	j->pub.allow_move = spec->allow_moving_other_jobs;
	j->kind = jm_spec_kind(spec);
	j->pub.is_ring = spec->ring != NULL;
	if (spec->ring) {
		j->pub.ring = *spec->ring;
		snprintf(j->pub.planner, sizeof(j->pub.planner), "%s",
			 spec->ring->orchestration[0] ? spec->ring->orchestration : "dcn-free");
	}
}
