/*
 * follower.c - a follower's read-only view of the store copy (follower.h).
 *
 * A view is every object the API reads: the fabric state (leaf-spine and
 * rail fabrics), the rings (ring domains), the rail port map and its API
 * (rail-OCS fabrics), the device records (drains; no session: a follower
 * never connects to a device) and a job manager that only holds the job
 * table (no planner, no transaction driver: the API refuses every write
 * before it reaches it).
 *
 * A refresh applies what the copy's new log entries changed (issue 31):
 * the store notes the keys of the rows each applied changeset touches
 * (st_touched), and on a leaf-spine fabric each touched circuit and job is
 * read again from the copy into the view (fs_apply, jm_follow_job, the
 * job's request decoded again), so a refresh costs in proportion to the
 * change, not to the state. Anything else (a snapshot loaded, drains,
 * ring and rail tables, a fabric of another kind, out of memory) builds a
 * whole new view instead, swaps it into the API and frees the old one.
 * Either way the jobs whose state changed are published, and since reads
 * run on the loop thread too, a read always sees one consistent copy.
 * Ownership: the fw owns its current view; the API borrows it until the
 * next api_follow.
 */
#include "follower.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <event2/event.h>

#include "api.h"
#include "clock.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "rail_api.h"
#include "rails.h"
#include "rings.h"
#include "store_etcd.h"
#include "store_repl.h"

/* Log entries that arrive within this many ms are taken in one refresh. */
#define FW_REFRESH_MS 20

struct fw_view {
	struct fs_state *fs;
	struct rg_state *rings;
	struct rl_state *rl;
	struct ra *ra;
	struct devices *devs;
	struct jm *jm;
};

struct fw {
	struct fw_deps d;
	struct fw_view v;
	struct event *refresh;
	bool incremental;  /* a leaf-spine fabric: refreshes apply the change */
	bool stale;	   /* a rebuild failed: the view missed changes, rebuild next */
	bool keep_touched; /* fw_take_fs: the store's notes outlive the fw */
	unsigned long applied, rebuilt; /* refreshes of each kind (fw_counts) */
};

static void view_free(struct fw_view *v)
{
	jm_free(v->jm);
	ra_free(v->ra);
	rl_free(v->rl);
	dev_free(v->devs);
	rg_free(v->rings);
	fs_free(v->fs);
	memset(v, 0, sizeof(*v));
}

static int new_devs(const struct fw *fw, struct fw_view *v)
{
	const struct ocsd_config *cfg = fw->d.cfg;
	const char **names = calloc((size_t)cfg->n_devices + 1, sizeof(*names));
	struct dev_deps dd;

	if (!names)
		return -ENOMEM;
	for (int i = 0; i < cfg->n_devices; i++)
		names[i] = cfg->devices[i].name;
	dd = (struct dev_deps){&cfg->fabric,	 v->fs,
			       fw->d.store,	 names,
			       cfg->n_devices,	 (int)cfg->access.rpc_timeout_ms,
			       clk_wall_ms(NULL)};
	v->devs = dev_new(&dd);
	free(names);
	return v->devs ? dev_restore_drained(v->devs) : -ENOMEM;
}

/* The view of the copy as it is now; 0 or -errno (v freed). */
static int view_build(const struct fw *fw, struct fw_view *v)
{
	const struct ocsd_config *cfg = fw->d.cfg;
	struct jm_deps jd = {0};
	char err[256];
	int rc = 0;

	memset(v, 0, sizeof(*v));
	if (cfg->kind == CFG_OCSTRX_RING) {
		v->rings = rg_new(&cfg->ring);
		rc = v->rings ? rg_load(v->rings, fw->d.store) : -ENOMEM;
	} else {
		v->fs = fs_new(&cfg->fabric);
		rc = v->fs ? fs_load(v->fs, fw->d.store) : -ENOMEM;
	}
	if (rc == 0)
		rc = new_devs(fw, v);
	if (rc == 0 && cfg->kind == CFG_RAIL_OCS) {
		struct ra_deps rd = {cfg, NULL, NULL, v->devs, api_fail, NULL};

		rd.rl = v->rl = rl_new(&cfg->rail);
		rc = v->rl ? rl_load_faults(v->rl, fw->d.store) : -ENOMEM;
		if (rc == 0)
			rc = rl_load_map(v->rl, v->fs);
		if (rc == 0 && !(v->ra = ra_new(&rd)))
			rc = -ENOMEM;
	}
	jd = (struct jm_deps){.cfg = cfg,
			      .store = fw->d.store,
			      .fs = v->fs,
			      .devs = v->devs,
			      .rings = v->rings,
			      .gpus_check = v->rl ? rl_check_job_gpus : NULL,
			      .gpus_check_ctx = v->rl,
			      .events = api_job_events(fw->d.api)};
	if (rc == 0 && (rc = jm_new(&jd, &v->jm, err, sizeof(err))) != 0)
		log_msg(LOG_ERR, "follower: %s", err);
	if (rc) {
		log_msg(LOG_ERR, "follower: cannot build the view of the store copy: %s",
			strerror(-rc));
		view_free(v);
	}
	return rc;
}

/* Publishes job as changed (a JobEvent to Events.Watch). */
static void fw_publish(struct fw *fw, const struct jm_job *job)
{
	struct jm_events ev = api_job_events(fw->d.api);

	ev.job_changed(ev.ctx, job);
}

/* Publishes every job of now whose state differs from the one in before. */
static void publish_changes(struct fw *fw, const struct jm *before, const struct jm *now)
{
	for (size_t i = 0; i < jm_count(now); i++) {
		const struct jm_job *job = jm_at(now, i);
		const struct jm_job *old = before ? jm_find(before, job->id) : NULL;

		if (!old || old->state != job->state || strcmp(old->reason, job->reason) != 0)
			fw_publish(fw, job);
	}
}

/* Sorts circuit keys (group, device, in) and drops repeats; the count left. */
static size_t unique_keys(struct ocs_xc *k, size_t n)
{
	size_t w = 0;

	qsort(k, n, sizeof(*k), ocs_xc_cmp_in);
	for (size_t i = 0; i < n; i++)
		if (!w || ocs_xc_cmp_in(&k[w - 1], &k[i]) != 0)
			k[w++] = k[i];
	return w;
}

/* The touched circuits read again: each key's circuit dropped, then the copy's added. */
static int apply_circuits(struct st_store *st, struct fs_state *fs, struct ocs_xc *keys, size_t n)
{
	struct st_circuit *adds;
	size_t k = 0;
	int rc;

	if (!n)
		return 0;
	adds = malloc(n * sizeof(*adds));
	rc = adds ? 0 : -ENOMEM;
	n = unique_keys(keys, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = st_circuit_get(st, &keys[i], &adds[k]);
		if (rc == 0)
			k++;
		else if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0)
		rc = fs_apply(fs, keys, n, adds, k);
	free(adds);
	return rc;
}

/* Job id read again into the job table, its request decoded, a change published. */
static int apply_job(struct fw *fw, const char *id)
{
	const struct jm_job *was = jm_find(fw->v.jm, id), *now;
	enum jm_state state = was ? was->state : JM_PENDING;
	char reason[sizeof(was->reason)] = "";
	struct st_job row;
	char *figures = NULL;
	int rc = st_job_get(fw->d.store, id, &row);

	if (was)
		snprintf(reason, sizeof(reason), "%s", was->reason);
	if (rc == -ENOENT)
		return jm_follow_job(fw->v.jm, id, NULL, NULL);
	if (rc)
		return rc;
	rc = st_figures_get(fw->d.store, id, &figures);
	if (rc == 0 || rc == -ENOENT)
		rc = jm_follow_job(fw->v.jm, id, &row, figures);
	free(figures);
	st_job_clear(&row);
	if (rc == 0)
		rc = api_restore_job(fw->d.api, id);
	now = jm_find(fw->v.jm, id);
	if (rc == 0 && now && (!was || state != now->state || strcmp(reason, now->reason) != 0))
		fw_publish(fw, now);
	return rc;
}

/*
 * Brings the current view up to the copy by what changed (t). 0, or -errno
 * (the view may then be half updated: the caller rebuilds it).
 */
static int cmp_id(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int view_apply(struct fw *fw, struct st_touched *t)
{
	int rc = apply_circuits(fw->d.store, fw->v.fs, t->circuits, t->n_circuits);

	/* a job is noted once per row of it (jobs, job_figures) and per entry:
	 * read each once */
	if (t->n_jobs > 1)
		qsort(t->jobs, t->n_jobs, sizeof(*t->jobs), cmp_id);
	for (size_t i = 0; rc == 0 && i < t->n_jobs; i++)
		if (i == 0 || strcmp(t->jobs[i - 1], t->jobs[i]) != 0)
			rc = apply_job(fw, t->jobs[i]);
	return rc;
}

void fw_refresh(struct fw *fw)
{
	struct fw_view v, old;
	struct st_touched t;
	bool applied;

	st_touched_take(fw->d.store, &t);
	applied = fw->incremental && !fw->stale && !t.all && view_apply(fw, &t) == 0;
	st_touched_clear(&t);
	if (applied) {
		fw->applied++;
		return;
	}
	if (view_build(fw, &v) != 0) {
		/* the API keeps the previous view; the next change tries again */
		fw->stale = true;
		return;
	}
	fw->stale = false;
	fw->rebuilt++;
	old = fw->v;
	fw->v = v;
	api_follow(fw->d.api, v.jm, v.fs, v.devs, v.rings, v.ra);
	/* restores the jobs' decoded requests (GetJob's spec) and the drains */
	if (api_restore_jobs(fw->d.api) != 0)
		log_msg(LOG_WARNING, "follower: out of memory restoring the jobs' requests");
	publish_changes(fw, old.jm, v.jm);
	view_free(&old);
}

static void on_refresh(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	fw_refresh(arg);
}

/* st_etcd_follow's on_change: the copy applied entries of the log. */
static void on_copy_changed(void *ctx)
{
	struct fw *fw = ctx;
	struct timeval tv = {0, FW_REFRESH_MS * 1000};

	if (!evtimer_pending(fw->refresh, NULL) && evtimer_add(fw->refresh, &tv) != 0)
		fw_refresh(fw);
}

int fw_new(const struct fw_deps *deps, struct fw **out)
{
	struct fw *fw = calloc(1, sizeof(*fw));
	int rc;

	*out = NULL;
	if (!fw)
		return -ENOMEM;
	fw->d = *deps;
	fw->incremental = deps->cfg->kind == CFG_LEAF_SPINE_OCS;
	if (fw->incremental)
		st_touched_track(deps->store, true); /* from before the first view's reads */
	fw->refresh = evtimer_new(loop_base(deps->loop), on_refresh, fw);
	rc = fw->refresh ? view_build(fw, &fw->v) : -ENOMEM;
	if (rc == 0) {
		api_follow(deps->api, fw->v.jm, fw->v.fs, fw->v.devs, fw->v.rings, fw->v.ra);
		rc = api_restore_jobs(deps->api);
	}
	if (rc == 0 && deps->se)
		rc = st_etcd_follow(deps->se, loop_base(deps->loop), on_copy_changed, fw);
	if (rc) {
		log_msg(LOG_ERR, "follower: cannot follow the store: %s", strerror(-rc));
		fw_free(fw);
		return rc;
	}
	*out = fw;
	return 0;
}

void fw_free(struct fw *fw)
{
	if (!fw)
		return;
	if (fw->d.se)
		st_etcd_unfollow(fw->d.se);
	if (!fw->keep_touched)
		st_touched_track(fw->d.store, false);
	if (fw->refresh)
		event_free(fw->refresh);
	view_free(&fw->v);
	free(fw);
}

struct fs_state *fw_take_fs(struct fw *fw)
{
	struct fs_state *fs;

	fw_refresh(fw); /* the changes of the last FW_REFRESH_MS, if any */
	if (!fw->incremental || fw->stale || !fw->v.fs)
		return NULL;
	fs = fw->v.fs;
	fw->v.fs = NULL; /* the view's job manager only reads it, and goes with the fw */
	fw->keep_touched = true;
	return fs;
}

int fw_fs_catch_up(struct fs_state *fs, struct st_store *st)
{
	struct st_touched t;
	int rc;

	st_touched_take(st, &t);
	rc = t.all ? -EAGAIN : apply_circuits(st, fs, t.circuits, t.n_circuits);
	st_touched_clear(&t);
	st_touched_track(st, false);
	return rc;
}

void fw_fs_drop(struct fs_state *fs, struct st_store *st)
{
	fs_free(fs);
	st_touched_track(st, false);
}

struct jm *fw_jm(struct fw *fw)
{
	return fw->v.jm;
}

void fw_parts(const struct fw *fw, struct fw_parts *out)
{
	*out = (struct fw_parts){fw->v.fs, fw->v.rings, fw->v.rl, fw->v.devs};
}

void fw_counts(const struct fw *fw, unsigned long *applied, unsigned long *rebuilt)
{
	*applied = fw->applied;
	*rebuilt = fw->rebuilt;
}
