/*
 * adopt.c - implementation of adopt.h. The devices are read one after the
 * other on the transaction handles (warm start connected them already);
 * an adoption is store writes only (the devices do not change), a clear is
 * one transaction of the driver (txn_driver.h), waited for here by running what
 * the loop was posted until its outcome arrives.
 */
#include "adopt.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "log.h"
#include "sb_device.h"
#include "loop.h"
#include "store.h"
#include "txn_driver.h"

/* The pseudo-job a start-up clear's intent is stored under (no job row). */
#define ADOPT_CLEAR_JOB "ocsd-clear-at-start"

/* Connects, in parallel, the devices that are not connected yet. */
static void connect_devices(const struct adopt_deps *d)
{
	int n = dev_count(d->devs);
	struct sb_device **h = calloc((size_t)n + 1, sizeof(*h));
	size_t k = 0;

	for (int id = 0; h && id < n; id++)
		if (!sb_device_connected(dev_handle(d->devs, id, DEV_ROLE_TXN)))
			h[k++] = dev_handle(d->devs, id, DEV_ROLE_TXN);
	if (h && k && d->connect_ms > 0)
		(void)sb_device_connect_many(h, k, k < 32 ? (int)k : 32,
					     sb_now_ms() + d->connect_ms, NULL);
	free(h);
}

/*
 * Reads every connected device into the drift table (the others are
 * unverified, so that the start never waits a connect timeout per
 * device); the first unowned cross-connect goes into first.
 */
static int read_devices(const struct adopt_deps *d, char *first, size_t first_len)
{
	connect_devices(d);
	for (int id = 0; id < dev_count(d->devs); id++) {
		struct dev_readback rb = {0};
		struct dev_diff diff = {0};
		int rc = 0;

		if (!sb_device_connected(dev_handle(d->devs, id, DEV_ROLE_TXN))) {
			log_msg(LOG_WARNING,
				"empty state store: %s is not connected: it gets no new circuits "
				"until a reconciliation pass reads it",
				dev_name(d->devs, id));
			dr_set_unverified(d->drift, id);
		} else if (dev_read(d->devs, id, DEV_ROLE_TXN, &rb) != 0) {
			log_msg(LOG_WARNING,
				"empty state store: %s could not be read (%s): it gets no new "
				"circuits until a reconciliation pass reads it",
				dev_name(d->devs, id), rb.error);
			dr_set_unverified(d->drift, id);
		} else if ((rc = dev_compare(d->devs, id, NULL, rb.xcs, rb.n, &diff)) == 0) {
			rc = dr_set(d->drift, id, diff.unowned, diff.n_unowned, diff.missing,
				    diff.n_missing);
			if (rc == 0 && diff.n_unowned && !first[0])
				snprintf(first, first_len, "%s %u->%u", dev_name(d->devs, id),
					 diff.unowned[0].in, diff.unowned[0].out);
		}
		dev_diff_clear(&diff);
		dev_readback_clear(&rb);
		if (rc)
			return rc;
	}
	return 0;
}

/* Records the two-way unowned circuits as job ADOPT_START_JOB's. */
static int adopt_all(const struct adopt_deps *d, char *why, size_t why_len)
{
	size_t n = 0, n_blk = 0, k = 0;
	struct ocs_xc *all = dr_unowned(d->drift, &n), *blk = NULL;
	bool *blocked = calloc((size_t)dev_count(d->devs) + 1, sizeof(*blocked));
	struct st_circuit *adds = NULL;
	bool row_stored;
	int rc = all && blocked && d->request
			 ? dr_planner_view(d->drift, d->fs, &blk, &n_blk, blocked)
			 : -ENOMEM;

	/* The planner's blockers are exactly the clean two-way circuits. */
	if (rc == 0 && !(adds = calloc(n_blk + 1, sizeof(*adds))))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n_blk; i++, k++) {
		adds[k].xc = blk[i];
		snprintf(adds[k].job_id, sizeof(adds[k].job_id), "%s", ADOPT_START_JOB);
	}
	if (rc == 0 && k == 0) {
		log_msg(LOG_WARNING,
			"--adopt-existing: the %zu cross-connect(s) found are one-way or collide: "
			"nothing adopted, they stay drift (clear them)",
			n);
		goto out;
	}
	/* the job manager's own writes (jm_adopt's), before it runs */
	if (rc == 0)
		rc = jm_adopt_store(
			d->store, d->fs,
			&(struct jm_adoption){.id = ADOPT_START_JOB,
					      .raw = d->request,
					      .raw_len = d->request_len,
					      .adds = adds,
					      .n = k,
					      .note = "adopted at start (--adopt-existing): the "
						      "devices held them",
					      .active = true,
					      .now_ms = d->now_ms},
			&row_stored);
	if (rc == 0) {
		dr_forget(d->drift, blk, n_blk);
		log_msg(LOG_NOTICE,
			"--adopt-existing: %zu circuit(s) (%zu cross-connects) adopted as job %s "
			"(release it to free their ports); %zu one-way or colliding "
			"cross-connect(s) left as drift",
			k / 2, k, ADOPT_START_JOB, n - k);
	} else {
		snprintf(why, why_len, "--adopt-existing: cannot store the adopted circuits: %s",
			 strerror(-rc));
	}
out:
	free(adds);
	free(blk);
	free(blocked);
	free(all);
	return rc;
}

struct clear_wait {
	bool done;
	bool confirmed;
	char message[400];
};

static void clear_done(void *arg, const struct txn_outcome *o)
{
	struct clear_wait *w = arg;

	w->confirmed = o->result == TXN_CONFIRMED && !o->store_failed;
	snprintf(w->message, sizeof(w->message), "%s",
		 o->store_failed ? o->store_error
		 : o->message	 ? o->message
				 : "");
	w->done = true;
}

/* Removes every unowned cross-connect in one transaction. */
static int clear_all(const struct adopt_deps *d, char *why, size_t why_len)
{
	size_t n = 0;
	struct ocs_xc *all = dr_unowned(d->drift, &n);
	struct txn_change c = {.job_id = ADOPT_CLEAR_JOB, .removals = all, .n_removals = n};
	struct clear_wait w = {0};
	struct timespec ms = {0, 1000000};
	char err[300] = "";
	int rc;

	if (!all)
		return -ENOMEM;
	rc = txn_start(d->txn, &c, clear_done, &w, err, sizeof(err));
	while (rc == 0 && !w.done) {
		nanosleep(&ms, NULL);
		loop_run_posted(d->loop);
	}
	if (rc == 0 && w.confirmed) {
		dr_forget(d->drift, all, n);
		log_msg(LOG_NOTICE,
			"--clear-existing: %zu cross-connect(s) removed from the devices", n);
	} else {
		snprintf(why, why_len,
			 "--clear-existing: the devices were not cleared (%s); they hold what they "
			 "held",
			 rc ? err : w.message);
		rc = -EIO;
	}
	free(all);
	return rc;
}

int adopt_start_check(const struct adopt_deps *d, enum adopt_mode mode, char *why, size_t why_len)
{
	bool empty = false;
	char first[128] = "";
	size_t n;
	int rc = st_is_empty(d->store, &empty);

	if (rc) {
		snprintf(why, why_len, "state store: %s", strerror(-rc));
		return rc;
	}
	if (!empty)
		return 0;
	rc = read_devices(d, first, sizeof(first));
	if (rc) {
		snprintf(why, why_len, "reading the devices: %s", strerror(-rc));
		return rc;
	}
	n = dr_count(d->drift);
	if (n == 0)
		return 0;
	if (mode == ADOPT_START_ADOPT)
		return adopt_all(d, why, why_len);
	if (mode == ADOPT_START_CLEAR)
		return clear_all(d, why, why_len);
	snprintf(why, why_len,
		 "the state store is empty but the devices hold %zu cross-connect(s) no job owns "
		 "(first: %s): ocsd does not start on circuits it does not know; start it with "
		 "--adopt-existing to record them as job %s (release that job to free the "
		 "ports), or with --clear-existing to remove them from the devices",
		 n, first, ADOPT_START_JOB);
	return -EEXIST;
}

/* ---- on a running ocsd ---- */

/* The stored cross-connect on x's input or output port of its device, or NULL. */
static const struct st_circuit *stored_on(const struct ocs_fabric *f, const struct fs_state *fs,
					  const struct ocs_xc *x)
{
	size_t n = 0;
	const struct st_circuit *run =
		fs_device_circuits(fs, ocs_fabric_device_id(f, x->group, x->device), &n);

	for (size_t i = 0; i < n; i++)
		if (run[i].xc.in == x->in || run[i].xc.out == x->out)
			return &run[i];
	return NULL;
}

static void name_xc(const struct ocs_fabric *f, const struct devices *devs, const struct ocs_xc *x,
		    char *out, size_t len)
{
	snprintf(out, len, "%s %d->%d",
		 dev_name(devs, ocs_fabric_device_id(f, x->group, x->device)), x->in, x->out);
}

/* Whether x (with its other half p when has_p) can be adopted or cleared; err when not. */
static bool selectable(const struct ocs_fabric *f, const struct dr_table *t,
		       const struct fs_state *fs, const struct devices *devs,
		       const struct ocs_xc *x, bool clear, struct ocs_xc *p, bool *has_p,
		       struct err_info *err)
{
	const struct st_circuit *c;
	char a[96], b[96];

	*has_p = dr_partner(t, x, p);
	name_xc(f, devs, x, a, sizeof(a));
	if (*has_p)
		name_xc(f, devs, p, b, sizeof(b));
	if (!clear && !(*has_p && dr_is_unowned(t, p))) {
		err_set(err, ERR_PRECONDITION, "scope",
			"%s is one-way (%s%s is not on the devices): it cannot be adopted; "
			"clear it",
			a, *has_p ? "its other half " : "it has no other half", *has_p ? b : "");
		return false;
	}
	if (clear && *has_p && fs_contains(fs, p)) {
		err_set(err, ERR_PRECONDITION, "scope",
			"%s is the other half of a circuit of a job (%s): never clear half of "
			"a job's circuit; release the job",
			a, b);
		return false;
	}
	/* its ports (the input alone for a clear: removals go by input) */
	if ((c = stored_on(f, fs, x)) && (!clear || c->xc.in == x->in)) {
		err_set(err, ERR_PRECONDITION, "scope",
			"%s collides with job %s's cross-connect %d->%d on that device; "
			"release the job first",
			a, c->job_id, c->xc.in, c->xc.out);
		return false;
	}
	if (!clear && (c = stored_on(f, fs, p))) {
		err_set(err, ERR_PRECONDITION, "scope",
			"%s collides with job %s's cross-connect %d->%d on that device; "
			"release the job first",
			b, c->job_id, c->xc.in, c->xc.out);
		return false;
	}
	*has_p = *has_p && dr_is_unowned(t, p);
	return true;
}

int adopt_select(const struct dr_table *t, const struct fs_state *fs, const struct devices *devs,
		 const struct ocs_fabric *f, const struct adopt_scope *scope, bool clear,
		 struct ocs_xc **out, size_t *n, struct err_info *err)
{
	size_t cap = 2 * dr_count(t) + 2, k = 0;
	struct ocs_xc *sel = malloc(cap * sizeof(*sel));
	int first = scope->device < 0 ? 0 : scope->device;
	int last = scope->device < 0 ? dev_count(devs) - 1 : scope->device;

	*out = NULL;
	*n = 0;
	if (!sel) {
		err_set(err, ERR_INTERNAL, "", "out of memory");
		return -1;
	}
	for (int id = first; id <= last; id++) {
		size_t m = 0;
		const struct sb_xc *u = dr_device_unowned(t, id, &m);

		for (size_t i = 0; i < m; i++) {
			struct ocs_xc x = {ocs_fabric_device_group(f, id),
					   ocs_fabric_device_in_group(f, id), u[i].in, u[i].out};
			struct ocs_xc p;
			bool has_p;

			if (scope->has_ports && (u[i].in != scope->in || u[i].out != scope->out))
				continue;
			if (!selectable(f, t, fs, devs, &x, clear, &p, &has_p, err)) {
				free(sel);
				return -1;
			}
			sel[k++] = x;
			if (has_p)
				sel[k++] = p;
		}
	}
	if (k == 0) {
		free(sel);
		if (scope->has_ports)
			err_set(err, ERR_NOT_FOUND, "scope.in_port",
				"%s holds no unowned cross-connect %d->%d (ListDrift lists them)",
				dev_name(devs, scope->device), scope->in, scope->out);
		else
			err_set(err, ERR_NOT_FOUND, "scope.device",
				"no unowned cross-connect%s%s (ListDrift lists them)",
				scope->device < 0 ? "" : " on ",
				scope->device < 0 ? "" : dev_name(devs, scope->device));
		return -1;
	}
	qsort(sel, k, sizeof(*sel), ocs_xc_cmp_in_out);
	*n = 0;
	for (size_t i = 0; i < k; i++)
		if (*n == 0 || ocs_xc_cmp_in_out(&sel[i], &sel[*n - 1]) != 0)
			sel[(*n)++] = sel[i];
	*out = sel;
	return 0;
}
