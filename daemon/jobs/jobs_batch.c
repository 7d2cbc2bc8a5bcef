/*
 * jobs_batch.c - the group commit of a burst (issue 24): what lets a
 * scheduler's burst of jobs cost a handful of store writes and one wave
 * instead of four writes and one transaction per job. The new jobs of one
 * turn of the loop are stored in one write (jb_store_new), the plans
 * admitted before a wave store their figures and PROGRAMMING in one write
 * (jb_admit, jb_store_admitted), and a wave about to form is told whether
 * to wait for the rest of its burst (jb_gather). jobs.c decides when each
 * runs and does the planning, pumping and timers; this file only calls
 * below it (jobs_table.c, the store), so the call graph stays one way.
 *
 * Without a loop (the unit tests' virtual time) nothing is deferred: each
 * job is stored and admitted at once, as before issue 24.
 */
#include <errno.h>
#include <stdlib.h>

#include "clock.h"
#include "jobs_internal.h"
#include "jobs_util.h"

/* A posted callback runs (unless the job manager was freed meanwhile). */
static void post_run(struct loop_node *n)
{
	struct jm_post *p = OCSD_CONTAINER_OF(n, struct jm_post, node);
	struct jm *jm = p->jm;
	void (*fn)(struct jm * jm) = p->fn;

	if (jm)
		*p->slot = NULL;
	free(p);
	if (jm)
		fn(jm);
}

bool jb_post_once(struct jm *jm, struct jm_post **slot, void (*fn)(struct jm *jm))
{
	if (*slot)
		return true;
	if (!jm->d.loop)
		return false;
	*slot = calloc(1, sizeof(**slot));
	if (!*slot)
		return false;
	**slot = (struct jm_post){.jm = jm, .fn = fn, .slot = slot};
	loop_post(jm->d.loop, &(*slot)->node, post_run);
	return true;
}

struct job_rt *jb_store_new(struct jm *jm)
{
	size_t n = 0, k = 0;
	struct job_rt *j, *head = jm->new_head, *next, *ok = NULL, **tail = &ok;
	struct st_job *rows;
	struct err_info err = {0};
	int rc;

	for (j = head; j; j = j->next_new)
		n++;
	jm->new_head = jm->new_tail = NULL;
	if (!n)
		return NULL;
	/*
	 * Stored as PLANNING, the state each takes a moment later (PENDING is
	 * published first, the store already one step ahead: nothing published
	 * can be lost), so one write for the burst; stopping, they are stored
	 * PENDING and planned at the next start.
	 */
	rows = malloc(n * sizeof(*rows));
	for (j = head; rows && j; j = j->next_new, k++)
		rows[k] = (struct st_job){.id = j->pub.id,
					  .idempotency_key = j->pub.key[0] ? j->pub.key : NULL,
					  .state = jm->stopping ? "PENDING" : "PLANNING",
					  .request = j->pub.raw,
					  .request_len = j->pub.raw_len,
					  .created_ms = j->pub.created_ms,
					  .updated_ms = j->pub.updated_ms};
	rc = rows ? st_job_put_many(jm->d.store, rows, n) : -ENOMEM;
	free(rows);
	if (rc)
		err_set(&err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "",
			"cannot store the job (%s); %s", st_strerror(jm->d.store, rc),
			st_changed_note(rc));
	for (j = head; j; j = next) {
		next = j->next_new;
		j->next_new = NULL;
		j->unstored = false;
		if (rc) {
			/* never seen by anyone but its waiters: forget it again */
			jm_settle(j, &err);
			jm->n_state[j->pub.state]--;
			jm->n_state[JM_RELEASED]++;
			j->pub.state = JM_RELEASED;
			(void)jm_forget(jm, j->pub.id); /* finished, no waiters, not queued */
			continue;
		}
		jm_track_live(jm, j, false);
		if (jm->d.events.job_changed)
			jm->d.events.job_changed(jm->d.events.ctx, &j->pub);
		if (jm->stopping)
			continue;
		j->prestored = true; /* its PLANNING is in the store */
		j->prestored_state = JM_PLANNING;
		*tail = j;
		tail = &j->next_new;
	}
	return ok;
}

int jb_admit(struct jm *jm, struct job_rt *j)
{
	struct err_info err;

	j->admitted = true;
	j->queued_us = clk_mono_us(jm->d.clock);
	if (!jm->d.loop) {
		if (jm_store_figures(jm, j, &err) != 0) {
			jm_fail_job(jm, j, &err);
			return -1;
		}
		jm_set_state(jm, j, JM_PROGRAMMING, NULL);
		jm_enqueue(jm, j);
		return 0;
	}
	j->admit_pending = true;
	j->next_admit = NULL;
	if (jm->admit_tail)
		jm->admit_tail->next_admit = j;
	else
		jm->admit_head = j;
	jm->admit_tail = j;
	jm->n_admit++;
	return 0;
}

void jb_store_admitted(struct jm *jm)
{
	size_t n = 0;
	struct job_rt *j = jm->admit_head, *next;
	struct st_job_state *rows = calloc(jm->n_admit + 1, sizeof(*rows));
	char **texts = calloc(jm->n_admit + 1, sizeof(*texts));
	struct err_info err = {0};
	int rc = rows && texts ? 0 : -ENOMEM;

	jm->admit_head = jm->admit_tail = NULL;
	jm->n_admit = 0;
	for (struct job_rt *a = j; rc == 0 && a; a = a->next_admit) {
		if (a->pub.state != JM_PLANNING || !a->admitted)
			continue;
		texts[n] = jm_figures_encode(&a->pub.figures);
		rows[n] = (struct st_job_state){a->pub.id, jm_state_name(JM_PROGRAMMING), NULL,
						jm_now_ms(jm)};
		rc = texts[n++] ? 0 : -ENOMEM;
	}
	if (rc == 0 && n)
		rc = st_figures_put_states(jm->d.store, (const char *const *)texts, rows, n);
	if (rc)
		err_set(&err, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "",
			"cannot store the plan's figures (%s); %s", st_strerror(jm->d.store, rc),
			st_changed_note(rc));
	for (; j; j = next) {
		next = j->next_admit;
		j->next_admit = NULL;
		j->admit_pending = false;
		if (j->pub.state != JM_PLANNING || !j->admitted)
			continue; /* released or planned again meanwhile */
		if (rc) {
			jm_fail_job(jm, j, &err);
			continue;
		}
		j->prestored = true;
		j->prestored_state = JM_PROGRAMMING;
		jm_set_state(jm, j, JM_PROGRAMMING, NULL);
		jm_enqueue(jm, j);
	}
	for (size_t k = 0; texts && k < n; k++)
		free(texts[k]);
	free(texts);
	free(rows);
}

/*
 * The leaf plans pending now that a wave may wait for: the one under way
 * and those waiting their turn, up to the first that cannot start before
 * the wave (a re-plan waits for the admitted plans). 0 when a DELTA
 * search is among them (seconds: not worth a wait).
 */
static size_t light_plans_pending(const struct jm *jm)
{
	size_t n = jm->planning_seq ? 1 : 0;

	if (jm->planning_seq && !jm->planning_light)
		return 0;
	for (const struct job_rt *j = jm->plan_head; j; j = j->next_planning) {
		if (j->pub.state != JM_PLANNING)
			continue;
		if (j->pub.allow_move)
			break;
		if (j->pub.workload && j->pub.n_demand == 0)
			return 0;
		n++;
	}
	return n;
}

enum jb_gather jb_gather(struct jm *jm, int64_t *wait_us)
{
	int64_t now;

	if (jm->n_queued + jm->n_admit >= jm->max_wave)
		return JB_GO;
	now = clk_mono_us(jm->d.clock);
	if (!jm->held) {
		jm->held = true;
		jm->hold_since_us = now;
		jm->yielded = false;
	}
	if (now - jm->hold_since_us >= jm->gather_us)
		return JB_GO;
	if (light_plans_pending(jm))
		return JB_PLANS;
	if (jm->arrival_us - jm->prev_arrival_us < JM_BURST_GAP_US &&
	    now - jm->arrival_us < JM_BURST_GAP_US) {
		*wait_us = jm->arrival_us + JM_BURST_GAP_US - now;
		return JB_GAP;
	}
	if (jm->yielded)
		return JB_GO;
	jm->yielded = true;
	return JB_YIELD;
}
