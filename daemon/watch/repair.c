/*
 * repair.c - implementation of repair.h: per compared pass, the missing
 * cross-connects of live jobs (owners from each device's run, dev_xcs) and
 * the devices a repair must not touch; at the end of the pass, one repair
 * transaction for every job that was missing cross-connects in the pass
 * before too, and a note to each job whose cross-connects stay missing.
 */
#include "repair.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "devices.h"
#include "jobs.h"
#include "log.h"

#define REP_BACKOFF_FIRST_US 2000000LL
#define REP_BACKOFF_MAX_US   120000000LL
#define REP_NOTE_XCS	     8 /* cross-connects a note names; the rest are counted */

struct rep_note {
	char job[128]; /* a job whose reason says what is missing */
};

struct rep {
	struct rep_deps d;
	/* this pass: the missing owned cross-connects, and per device why it
	 * may not be touched ("" when it may) */
	struct st_circuit *cur;
	size_t n_cur, cap_cur;
	char (*blocked)[160];
	int n_devices;
	/* jobs missing cross-connects in the previous compared pass */
	char (*prev)[128];
	size_t n_prev;
	/* jobs told (their reason set by us) */
	struct rep_note *notes;
	size_t n_notes;
	/* the repair transaction */
	bool running;
	struct st_circuit *inflight;
	size_t n_inflight;
	int failures;
	int64_t next_us; /* no attempt before (backing off) */
};

struct rep *rep_new(const struct rep_deps *deps)
{
	struct rep *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->d = *deps;
	r->n_devices = dev_count(deps->devs);
	r->blocked = calloc((size_t)r->n_devices + 1, sizeof(*r->blocked));
	if (!r->blocked) {
		free(r);
		return NULL;
	}
	return r;
}

void rep_free(struct rep *r)
{
	if (!r)
		return;
	free(r->cur);
	free(r->blocked);
	free(r->prev);
	free(r->notes);
	free(r->inflight);
	free(r);
}

static bool job_active(const struct rep *r, const char *id)
{
	const struct jm_job *j = jm_find(r->d.jm, id);

	return j && j->state == JM_ACTIVE;
}

void rep_device(struct rep *r, int device, const struct sb_xc *missing, size_t n_missing,
		const struct sb_xc *unowned, size_t n_unowned)
{
	size_t n_run;
	const struct st_circuit *run;
	const char *name;

	if (device < 0 || device >= r->n_devices || n_missing == 0)
		return;
	run = dev_xcs(r->d.devs, device, &n_run);
	name = dev_name(r->d.devs, device);
	if (r->n_cur + n_missing > r->cap_cur) {
		size_t cap = (r->n_cur + n_missing) * 2;
		struct st_circuit *p = realloc(r->cur, cap * sizeof(*p));

		if (!p)
			return; /* out of memory: this device is not repaired this pass */
		r->cur = p;
		r->cap_cur = cap;
	}
	if (dev_drained(r->d.devs, device))
		snprintf(r->blocked[device], sizeof(r->blocked[device]),
			 "device %s is drained: not repaired until it is undrained", name);
	for (size_t i = 0; i < n_missing; i++) {
		const struct st_circuit *owner = NULL;

		for (size_t k = 0; k < n_run && !owner; k++)
			if (run[k].xc.in == missing[i].in && run[k].xc.out == missing[i].out)
				owner = &run[k];
		if (!owner)
			continue;
		/* Invariant 6: a port the cross-connect needs holds one no job owns. */
		for (size_t u = 0; u < n_unowned && !r->blocked[device][0]; u++)
			if (unowned[u].in == missing[i].in || unowned[u].out == missing[i].out)
				snprintf(r->blocked[device], sizeof(r->blocked[device]),
					 "%s %u->%u, which no job owns, holds a port of %s %u->%u: "
					 "not repaired (fail static; clear or adopt it)",
					 name, unowned[u].in, unowned[u].out, name, missing[i].in,
					 missing[i].out);
		r->cur[r->n_cur++] = *owner;
	}
}

static bool in_prev(const struct rep *r, const char *job)
{
	for (size_t i = 0; i < r->n_prev; i++)
		if (strcmp(r->prev[i], job) == 0)
			return true;
	return false;
}

static int device_of(const struct rep *r, const struct ocs_xc *xc)
{
	size_t n;

	for (int d = 0; d < r->n_devices; d++) {
		const struct st_circuit *run = dev_xcs(r->d.devs, d, &n);

		if (n && run[0].xc.group == xc->group && run[0].xc.device == xc->device)
			return d;
	}
	return -1;
}

/*
 * Sets job's reason to text ("" clears it) and remembers it. False when
 * the job was told that already (nothing sent).
 */
static bool tell(struct rep *r, const char *job, const char *text)
{
	size_t i;

	const struct jm_job *j = jm_find(r->d.jm, job);

	for (i = 0; i < r->n_notes && strcmp(r->notes[i].job, job) != 0; i++)
		;
	/* (a state change since may have replaced the note: the job's reason counts) */
	if (i < r->n_notes && j && strcmp(j->reason, text) == 0)
		return false;
	if (i == r->n_notes && !text[0])
		return false; /* never told: nothing to clear */
	if (jm_note(r->d.jm, job, text) != 0)
		text = ""; /* not ACTIVE any more: its state says the rest */
	if (!text[0]) {
		if (i < r->n_notes)
			r->notes[i] = r->notes[--r->n_notes];
		return true;
	}
	if (i == r->n_notes) {
		struct rep_note *p = realloc(r->notes, (r->n_notes + 1) * sizeof(*p));

		if (!p)
			return false;
		r->notes = p;
		snprintf(r->notes[r->n_notes++].job, sizeof(p->job), "%s", job);
	}
	log_job(LOG_WARNING, job, NULL, "%s", text);
	return true;
}

/*
 * Tells job which of its cross-connects (those of xcs it owns) are missing,
 * and why they stay so. How many (0 when it was told that already).
 */
static size_t tell_missing(struct rep *r, const char *job, const struct st_circuit *xcs, size_t n,
			   const char *why)
{
	char text[512];
	size_t len, count = 0;

	for (size_t i = 0; i < n; i++)
		count += strcmp(xcs[i].job_id, job) == 0;
	len = (size_t)snprintf(text, sizeof(text), "%zu cross-connect(s) missing on the devices (",
			       count);
	for (size_t i = 0, k = 0; i < n && len < sizeof(text); i++) {
		int d;

		if (strcmp(xcs[i].job_id, job) != 0)
			continue;
		if (k++ == REP_NOTE_XCS) {
			len += (size_t)snprintf(text + len, sizeof(text) - len, ", ...");
			break;
		}
		d = device_of(r, &xcs[i].xc);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s %d->%d",
					k > 1 ? ", " : "", d >= 0 ? dev_name(r->d.devs, d) : "?",
					xcs[i].xc.in, xcs[i].xc.out);
	}
	if (len < sizeof(text))
		snprintf(text + len, sizeof(text) - len, "): %s", why);
	return tell(r, job, text) ? count : 0;
}

static int64_t backoff_us(int failures)
{
	int64_t us = REP_BACKOFF_FIRST_US;

	for (int i = 1; i < failures && us < REP_BACKOFF_MAX_US; i++)
		us *= 2;
	return us < REP_BACKOFF_MAX_US ? us : REP_BACKOFF_MAX_US;
}

/* Each job that owns one of xcs is told why they are missing (once per job). */
static void tell_jobs(struct rep *r, const struct st_circuit *xcs, size_t n, const char *why)
{
	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(xcs[k].job_id, xcs[i].job_id) == 0;
		if (!seen)
			tell_missing(r, xcs[i].job_id, xcs, n, why);
	}
}

static void failed(struct rep *r, const struct st_circuit *xcs, size_t n, const char *why)
{
	char text[400];
	int64_t wait = backoff_us(++r->failures);

	r->next_us = clk_mono_us(r->d.clock) + wait;
	snprintf(text, sizeof(text),
		 "the repair did not go through (%s); next try in %" PRId64 " s", why,
		 wait / 1000000);
	log_msg(LOG_WARNING,
		"circuit repair of %zu cross-connect(s) failed: %s; next try in %" PRId64 " s", n,
		why, wait / 1000000);
	if (r->d.events.outcome)
		r->d.events.outcome(r->d.events.ctx, "failed", n);
	tell_jobs(r, xcs, n, text);
}

static void repair_done(void *arg, const struct txn_outcome *o)
{
	struct rep *r = arg;

	r->running = false;
	if (o->result == TXN_CONFIRMED) {
		log_msg(LOG_NOTICE,
			"circuit repair: %zu missing cross-connect(s) programmed again "
			"(transaction %" PRIu64 ", %zu device(s))",
			r->n_inflight, o->txn_id, o->n_devices);
		r->failures = 0;
		r->next_us = 0;
		if (r->d.events.outcome)
			r->d.events.outcome(r->d.events.ctx, "repaired", r->n_inflight);
	} else {
		char why[300];

		snprintf(why, sizeof(why), "transaction %" PRIu64 ": %s", o->txn_id,
			 o->message && o->message[0] ? o->message : "not confirmed");
		failed(r, r->inflight, r->n_inflight, why);
	}
	free(r->inflight);
	r->inflight = NULL;
	r->n_inflight = 0;
}

/* Starts the repair of xcs (every one of a live job, on a device it may touch). */
static void start_repair(struct rep *r, struct st_circuit *xcs, size_t n)
{
	struct ocs_xc *removals = malloc(n * sizeof(*removals));
	struct txn_change c = {.job_id = REP_JOB};
	char why[300] = "";
	int rc;

	if (!removals) {
		free(xcs);
		return;
	}
	/* Removed and added again: the touched devices' targets are their runs
	 * as stored (txn_driver.c), the circuit table ends as it was. */
	for (size_t i = 0; i < n; i++)
		removals[i] = xcs[i].xc;
	c.removals = removals;
	c.n_removals = n;
	c.additions = xcs;
	c.n_additions = n;
	for (size_t i = 0; i < n; i++) {
		int d = device_of(r, &xcs[i].xc);

		log_job(LOG_NOTICE, xcs[i].job_id, NULL,
			"circuit repair: programming %s %d->%d again (missing on the device)",
			d >= 0 ? dev_name(r->d.devs, d) : "?", xcs[i].xc.in, xcs[i].xc.out);
	}
	r->inflight = xcs;
	r->n_inflight = n;
	r->running = true;
	rc = jm_external_txn(r->d.jm, &c, repair_done, r, why, sizeof(why));
	free(removals);
	if (rc == 0)
		return;
	r->running = false;
	r->inflight = NULL;
	r->n_inflight = 0;
	if (rc == -EBUSY) {
		free(xcs); /* a transaction runs: the next compared pass tries again */
		return;
	}
	failed(r, xcs, n, why[0] ? why : strerror(-rc));
	free(xcs);
}

void rep_pass_done(struct rep *r)
{
	struct st_circuit *due = malloc((r->n_cur ? r->n_cur : 1) * sizeof(*due));
	struct st_circuit *blocked = malloc((r->n_cur ? r->n_cur : 1) * sizeof(*blocked));
	char(*now)[128] = calloc(r->n_cur + 1, sizeof(*now));
	size_t n_due = 0, n_blocked = 0, n_now = 0;

	if (!due || !blocked || !now)
		goto out;
	/* Jobs whose cross-connects are all there again: their note goes. */
	for (size_t i = r->n_notes; i-- > 0;) {
		bool missing = false;

		for (size_t k = 0; k < r->n_cur && !missing; k++)
			missing = strcmp(r->cur[k].job_id, r->notes[i].job) == 0;
		if (!missing)
			(void)tell(r, r->notes[i].job, "");
	}
	for (size_t i = 0; i < r->n_cur; i++) {
		const struct st_circuit *x = &r->cur[i];
		bool known = false;
		int d;

		if (!job_active(r, x->job_id))
			continue;
		for (size_t k = 0; k < n_now && !known; k++)
			known = strcmp(now[k], x->job_id) == 0;
		if (!known)
			snprintf(now[n_now++], sizeof(*now), "%s", x->job_id);
		if (!in_prev(r, x->job_id))
			continue; /* first seen missing: the next pass decides */
		d = device_of(r, &x->xc);
		if (d >= 0 && r->blocked[d][0])
			blocked[n_blocked++] = *x;
		else
			due[n_due++] = *x;
	}
	free(r->prev);
	r->prev = now;
	r->n_prev = n_now;
	now = NULL;
	/* Blocked ones: each job is told why (once per change of the text). */
	for (size_t i = 0; i < n_blocked; i++) {
		int d = device_of(r, &blocked[i].xc);
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(blocked[k].job_id, blocked[i].job_id) == 0;
		if (!seen && d >= 0) {
			size_t n = tell_missing(r, blocked[i].job_id, blocked, n_blocked,
						r->blocked[d]);

			if (n && r->d.events.outcome)
				r->d.events.outcome(r->d.events.ctx, "blocked", n);
		}
	}
	if (n_due && !r->running && clk_mono_us(r->d.clock) >= r->next_us) {
		start_repair(r, due, n_due);
		due = NULL;
	}
out:
	free(due);
	free(blocked);
	free(now);
	r->n_cur = 0;
	for (int d = 0; d < r->n_devices; d++)
		r->blocked[d][0] = '\0';
}
