/*
 * jobs_wave.c - waves (issue 24): many jobs' changes in one device
 * transaction, each job still all-or-nothing. What jobs.c asks of it:
 * which queued job may join a wave, the circuits of admitted plans that
 * later plans keep clear of (the reservation), the change set of a wave
 * (every job's circuits and links with their owner, one intent), and how
 * a failed wave splits into the jobs that go again at once, the jobs that
 * go again alone and the jobs that fail. Pure: reads the jobs and the
 * circuit table, changes neither (jobs.c applies the answers).
 *
 * A wave's life (jobs.c drives it, the diagram of its states is there):
 *
 *   plan_done: the plan is admitted (its circuits reserved) --> queued
 *   jm_pump: the queued waveable jobs, up to max_wave, in queue order
 *            --> one txn_change --> one intent, one device transaction
 *   txn end: confirmed --> every job ACTIVE / RELEASED
 *            failed    --> jw_split: AGAIN (off the failed devices: queued
 *                          first, a wave again), ALONE (on a device that
 *                          refused: each in a transaction of its own),
 *                          FAIL (on a device that did not answer or whose
 *                          rollback is unproven: the job's own outcome)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"
#include "jobs_internal.h"

bool jw_waveable(const struct job_rt *j)
{
	return !j->kind->rings && !j->kind->gpus_only && !j->repair && !j->alone &&
	       (j->pub.state == JM_PROGRAMMING || j->pub.state == JM_RELEASING);
}

int jw_admitted_xcs(struct job_rt *const *live, size_t n_live, const char *self,
		    struct ocs_xc **out, size_t *n_out)
{
	size_t n = 0, at = 0;

	*out = NULL;
	*n_out = 0;
	for (size_t k = 0; k < n_live; k++)
		if (live[k]->admitted && strcmp(live[k]->pub.id, self) != 0)
			n += live[k]->change.n_additions;
	if (n == 0)
		return 0;
	*out = malloc(n * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t k = 0; k < n_live; k++) {
		const struct job_rt *o = live[k];

		if (!o->admitted || strcmp(o->pub.id, self) == 0)
			continue;
		for (size_t i = 0; i < o->change.n_additions; i++)
			(*out)[at++] = o->change.additions[i].xc;
	}
	*n_out = at;
	return 0;
}

bool jw_any_admitted(struct job_rt *const *live, size_t n_live)
{
	for (size_t k = 0; k < n_live; k++)
		if (live[k]->admitted)
			return true;
	return false;
}

void jw_change_clear(struct jw_change *c)
{
	free(c->jobs);
	free(c->removals);
	free(c->additions);
	free(c->links);
	*c = (struct jw_change){0};
}

/* Appends n items of size sz from src to *dst (holding *n_dst, room for cap). */
static void append(void *dst, size_t *n_dst, const void *src, size_t n, size_t sz)
{
	if (n)
		memcpy((char *)dst + *n_dst * sz, src, n * sz);
	*n_dst += n;
}

int jw_change_build(struct job_rt *const *wave, size_t n, const struct fs_state *fs,
		    struct jw_change *c)
{
	size_t n_rem = 0, n_add = 0, n_links = 0;
	struct ocs_xc **mine = calloc(n + 1, sizeof(*mine));
	size_t *n_mine = calloc(n + 1, sizeof(*n_mine));
	int rc = 0;

	*c = (struct jw_change){0};
	if (!mine || !n_mine) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const struct job_rt *j = wave[k];

		if (j->pub.state == JM_RELEASING) {
			/* a release: every cross-connect the job owns, nothing added */
			mine[k] = fs_job_xcs(fs, j->pub.id, &n_mine[k]);
			if (!mine[k]) {
				rc = -ENOMEM;
				goto out;
			}
			n_rem += n_mine[k];
			continue;
		}
		n_rem += j->change.n_removals;
		n_add += j->change.n_additions;
		n_links += j->change.n_links;
	}
	c->jobs = malloc(n * sizeof(*c->jobs));
	c->removals = malloc((n_rem ? n_rem : 1) * sizeof(*c->removals));
	c->additions = malloc((n_add ? n_add : 1) * sizeof(*c->additions));
	c->links = malloc((n_links ? n_links : 1) * sizeof(*c->links));
	if (!c->jobs || !c->removals || !c->additions || !c->links) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const struct job_rt *j = wave[k];

		c->jobs[k] = j->pub.id;
		if (j->pub.state == JM_RELEASING) {
			append(c->removals, &c->n_removals, mine[k], n_mine[k], sizeof(*mine[k]));
			continue;
		}
		append(c->removals, &c->n_removals, j->change.removals, j->change.n_removals,
		       sizeof(*c->removals));
		append(c->additions, &c->n_additions, j->change.additions, j->change.n_additions,
		       sizeof(*c->additions));
		append(c->links, &c->n_links, j->change.links, j->change.n_links,
		       sizeof(*c->links));
	}
	c->n_jobs = n;
out:
	for (size_t k = 0; mine && k < n; k++)
		free(mine[k]);
	free(mine);
	free(n_mine);
	if (rc)
		jw_change_clear(c);
	return rc;
}

/* The fault of device dev in o, or NULL when it did not fail. */
static const struct txn_device_fault *fault_of(const struct txn_outcome *o, int dev)
{
	for (size_t i = 0; i < o->n_faults; i++)
		if (o->faults[i].dev == dev)
			return &o->faults[i];
	return NULL;
}

/* Folds the fault of xc's device (if any) into *fate. */
static void weigh(const struct ocs_fabric *f, const struct txn_outcome *o, const struct ocs_xc *xc,
		  enum jw_fate *fate)
{
	const struct txn_device_fault *d =
		fault_of(o, ocs_fabric_device_id(f, xc->group, xc->device));

	if (!d)
		return;
	if (d->unproven || !d->answered)
		*fate = JW_FAIL;
	else if (*fate == JW_AGAIN)
		*fate = JW_ALONE;
}

void jw_split(const struct ocs_fabric *f, struct job_rt *const *wave, size_t n,
	      const struct fs_state *fs, const struct txn_outcome *o, enum jw_fate *fate)
{
	for (size_t k = 0; k < n; k++) {
		const struct job_rt *j = wave[k];

		/* no device to blame (the plan check refused the whole): each alone */
		fate[k] = o->n_faults ? JW_AGAIN : JW_ALONE;
		if (!o->n_faults)
			continue;
		if (j->pub.state == JM_RELEASING) {
			/* the circuit table is as it was: the job's own cross-connects */
			for (size_t i = 0; i < fs_count(fs) && fate[k] != JW_FAIL; i++)
				if (strcmp(fs_at(fs, i)->job_id, j->pub.id) == 0)
					weigh(f, o, &fs_at(fs, i)->xc, &fate[k]);
			continue;
		}
		for (size_t i = 0; i < j->change.n_removals && fate[k] != JW_FAIL; i++)
			weigh(f, o, &j->change.removals[i], &fate[k]);
		for (size_t i = 0; i < j->change.n_additions && fate[k] != JW_FAIL; i++)
			weigh(f, o, &j->change.additions[i].xc, &fate[k]);
	}
}
