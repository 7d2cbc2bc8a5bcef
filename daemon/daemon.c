/*
 * daemon.c - the leader phase's start-up and every phase's teardown, each
 * in the order it needs (daemon_internal.h; od_run in daemon_phases.c):
 * the job manager, its API and gRPC server, recovery, the start-up check
 * of the devices, reconciliation, keepalive, faults, retention; signals,
 * systemd notifications, the watchdog and the state directory's lock.
 *
 * Return values left unchecked here, and why that is safe: sd_notify() (a
 * notification systemd does not get is only a status line lost; outside
 * systemd it does nothing) and mx_add() (see api_events.c).
 */
#include "daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "adopt.h"
#include "api.h"
#include "cabling.h"
#include "clock.h"
#include "config.h"
#include "devices.h"
#include "drift.h"
#include "executor.h"
#include "executor_sb.h"
#include "fabric_state.h"
#include "faults.h"
#include "follower.h"
#include "jobs.h"
#include "kind_txn.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "metrics_http.h"
#include "pool.h"
#include "rail_api.h"
#include "rails.h"
#include "gpu_swaps.h"
#include "reconcile.h"
#include "repair.h"
#include "keepalive.h"
#include "recovery.h"
#include "rings.h"
#include "sb_txn.h"
#include "store.h"
#include "txn_driver.h"

/*
 * Retention: a pass every minute, in batches of at most this many rows (one
 * transaction each: 9 to 60 ms for 100 jobs with their intents on the
 * 2-core test machine), the next batch on the next loop turn while more is due.
 */
#define OD_PRUNE_INTERVAL_S 60
#define OD_PRUNE_BATCH	    100
/* What evsignal_new() makes: a signal event that stays. */
#define SIG_EVENT (EV_SIGNAL | EV_PERSIST)

/* ---- signals and systemd ---- */

/* Stops the loop once no transaction is running (checked every 50 ms). */
static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;

	if (od->jm && jm_busy(od->jm))
		return;
	loop_stop(od->loop);
}

/* No new job is taken, no new call accepted. */
static void stop_serving(struct od *od)
{
	if (od->jm)
		jm_stop(od->jm);
	if (od->server)
		nb_server_shutdown(od->server);
}

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
	struct od *od = arg;
	struct timeval tick = {0, 50000};

	od->stopping = true;
	if (od->drain)
		return;
	log_msg(LOG_NOTICE, "signal %d: stopping after the running transaction", (int)sig);
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	if (od->api)
		api_stopping(od->api);
	stop_serving(od);
	if (od_add_event(od, &od->drain, -1, EV_PERSIST, on_drain_tick, &tick) != 0)
		loop_stop(od->loop);
}

static void on_recon_timer(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;
	int rc = recon_start(od->recon);

	if (rc && rc != -EBUSY)
		log_msg(LOG_WARNING, "reconciliation could not start: %s", strerror(-rc));
}

static int start_reconciliation(struct od *od)
{
	struct recon_deps rd = {.loop = od->loop,
				.exec = od->exec,
				.fs = od->fs,
				.jm = od->jm,
				.devs = od->devs,
				.drift = od->drift,
				.cabling = od->cabling,
				.events = api_recon_events(od->api),
				.busy = od->rsw ? gsw_busy : NULL,
				.busy_ctx = od->rsw,
				.rings = od->rings,
				.node_drift = od->node_drift};
	struct timeval tv = {(time_t)od->opts->reconcile_interval_s, 0};
	struct rep_deps pd = {.devs = od->devs, .jm = od->jm, .events = api_repair_events(od->api)};

	/* Rail-OCS fabrics: no job owns a cross-connect (the rail port map's
	 * owner is no job), so there is nothing to repair. Ring domains: a
	 * drifted node of a live ring is programmed back by the job manager. */
	if (!od->rsw && !od->rings && !(od->repair = rep_new(&pd)))
		return -ENOMEM;
	rd.repair = od->repair;
	od->recon = recon_new(&rd);
	if (!od->recon)
		return -ENOMEM;
	if (od->opts->reconcile_interval_s &&
	    od_add_event(od, &od->recon_timer, -1, EV_PERSIST, on_recon_timer, &tv) != 0)
		return -ENOMEM;
	/* Report drift left from before the start at once. */
	on_recon_timer(-1, 0, od);
	return 0;
}

/*
 * Called with each job id the retention deleted from the store, once that
 * is committed. This is where the job manager is to drop the job from
 * memory; until it does, a deleted job stays listed until the next start.
 */
static void od_job_pruned(void *ctx, const char *job_id)
{
	struct od *od = ctx;
	int rc = od->jm ? jm_forget(od->jm, job_id) : 0;

	/* The store prunes only finished jobs, which the job manager can drop. */
	if (rc && rc != -ENOENT)
		log_msg(LOG_WARNING,
			"retention: job %s was deleted from the store but is in use: %s", job_id,
			strerror(-rc));
	/* Out of memory loses one count of a metric, nothing of the store. */
	(void)mx_add(od->m_pruned, NULL, 1);
}

/*
 * One retention batch (st_prune). A failed batch deleted nothing and loses
 * nothing: it is logged and tried again at the next pass.
 */
static void on_prune_timer(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;
	const struct od_options *o = od->opts;
	struct timeval next = {OD_PRUNE_INTERVAL_S, 0};
	int64_t keep_ms = o->retention_days ? (int64_t)o->retention_days * 86400 * 1000 : INT64_MAX;
	size_t n = 0;
	int rc;

	rc = st_prune(od->store, clk_wall_ms(NULL), keep_ms,
		      o->retention_jobs ? o->retention_jobs : SIZE_MAX, OD_PRUNE_BATCH, &n,
		      od_job_pruned, od);
	if (rc)
		log_msg(LOG_WARNING, "retention: cannot delete finished jobs: %s", strerror(-rc));
	if (n == OD_PRUNE_BATCH)
		next.tv_sec = 0; /* more is due */
	if (event_add(od->prune_timer, &next) != 0)
		log_msg(LOG_ERR, "retention: cannot re-arm its timer; finished jobs are kept");
}

/* The first retention pass runs as soon as the loop does. */
int od_start_retention(struct od *od)
{
	struct timeval now = {0, 0};

	return od_add_event(od, &od->prune_timer, -1, 0, on_prune_timer, &now);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

static int start_watchdog(struct od *od)
{
	uint64_t usec = 0;
	struct timeval tv;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	/* Ping at half the period: a stuck loop misses two pings and is restarted. */
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	return od_add_event(od, &od->watchdog, -1, EV_PERSIST, on_watchdog, &tv);
}

int od_add_event(struct od *od, struct event **ev, evutil_socket_t fd, short what,
		 event_callback_fn cb, const struct timeval *tv)
{
	*ev = event_new(loop_base(od->loop), fd, what, cb, od);
	return *ev && event_add(*ev, tv) == 0 ? 0 : -ENOMEM;
}

int od_start_signals(struct od *od)
{
	if (od_add_event(od, &od->sig_term, SIGTERM, SIG_EVENT, on_stop_signal, NULL) != 0 ||
	    od_add_event(od, &od->sig_int, SIGINT, SIG_EVENT, on_stop_signal, NULL) != 0 ||
	    od_add_event(od, &od->sig_hup, SIGHUP, SIG_EVENT, od_on_reload, NULL) != 0)
		return -ENOMEM;
	return start_watchdog(od);
}

struct api_deps od_api_deps(const struct od *od)
{
	return (struct api_deps){.cfg = od->cfg,
				 .loop = od->loop,
				 .reg = od->reg,
				 .version = OCSD_VERSION,
				 .store = rp_store_name(od->rp),
				 .rp = od->rp};
}

/* Frees *ev (if any) and forgets it. */
static void free_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

/* What the loop was posted, run now (while a phase is torn down). */
static void run_posted(struct od *od)
{
	if (od->loop)
		loop_run_posted(od->loop);
}

/* Circuits kept for a start that did not take them, and the notes they wanted. */
static void drop_handover(struct od *od)
{
	if (!od->fs_handover)
		return;
	fw_fs_drop(od->fs_handover, od->store);
	od->fs_handover = NULL;
}

/*
 * Ends the running phase: everything start_leader or start_follower made,
 * in the order a stop needs (the loop, the metrics endpoint, the signals
 * and the store stay for the next phase). Every pointer is NULL afterwards
 * but fs_handover: a follower phase ending for a takeover keeps its view's
 * circuits for the leader's start (fw_take_fs), which takes them.
 */
void od_phase_teardown(struct od *od)
{
	enum rp_role next = od->rp ? rp_role(od->rp) : RP_FOLLOWER;

	drop_handover(od);
	/* a follower that takes the lead starts from its view's circuits */
	if (od->fw && (next == RP_RECOVERING || next == RP_LEADER))
		od->fs_handover = fw_take_fs(od->fw);
	od->phase = OD_PHASE_NONE;
	/* every call answered from here on is refused (the loop still answers
	 * the ones the server drains below, while their objects go) */
	if (od->api)
		api_stopping(od->api);
	free_event(&od->recon_timer);
	free_event(&od->prune_timer);
	free_event(&od->repair_timer);
	recon_free(od->recon);
	ka_free(od->ka);
	flt_stop(od->faults); /* no more faults reach the job manager */
	stop_serving(od);
	/* Drain the pool first: completions still arrive on the loop (and
	 * whatever they submit is refused). */
	if (od->pool)
		pool_stop(od->pool);
	/* Then a transaction in progress: it ends (rolled back if need be) and
	 * posts its outcome, which the job manager takes below. The loop takes
	 * no decision to confirm from here on: the engine need not wait for one. */
	txn_driver_withdraw(od->txn);
	txn_driver_withdraw(od->rail_txn);
	exec_sb_free(od->exec_sb);
	run_posted(od);
	/* Answers every caller still waiting, then the server can finish. */
	jm_free(od->jm);
	run_posted(od);
	rep_free(od->repair); /* its transaction's outcome was taken above */
	gsw_free(od->rsw);    /* answers requests still waiting */
	txn_driver_free(od->txn);
	txn_driver_free(od->rail_txn);
	nb_server_destroy(od->server);
	run_posted(od);
	fw_free(od->fw); /* the follower's view, once its server is gone */
	sb_engine_free(od->engine);
	dev_free(od->devs); /* and the device handles, before their driver */
	fs_free(od->fs);
	dr_free(od->drift);
	dr_nodes_free(od->node_drift);
	cab_free(od->cabling);
	api_free(od->api);
	ra_free(od->ra);
	rl_free(od->rl);
	free_event(&od->drain);
	/* every user stopped; what its draining tasks post runs here, before the
	 * fault listener and the rings they may name go */
	pool_free(od->pool);
	exec_free(od->exec);
	run_posted(od);
	flt_free(od->faults);
	rg_free(od->rings);
	od->recon = NULL;
	od->repair = NULL;
	od->ka = NULL;
	od->faults = NULL;
	od->jm = NULL;
	od->server = NULL;
	od->exec_sb = NULL;
	od->rsw = NULL;
	od->txn = od->rail_txn = NULL;
	od->fw = NULL;
	od->engine = NULL;
	od->devs = NULL;
	od->fs = NULL;
	od->drift = NULL;
	od->node_drift = NULL;
	od->cabling = NULL;
	od->api = NULL;
	od->ra = NULL;
	od->rl = NULL;
	od->pool = NULL;
	od->exec = NULL;
	od->rings = NULL;
}

void od_teardown(struct od *od)
{
	od_phase_teardown(od);
	od_warm_join(od);
	for (int i = 0; od->warm && i < od->cfg->n_devices; i++)
		sb_device_free(od->warm[i]);
	free(od->warm);
	sb_driver_free(od->driver); /* after every device handle */
	rp_stop(od->rp);	    /* no role change reaches the loop any more */
	mh_stop(od->http);
	free_event(&od->sig_term);
	free_event(&od->sig_int);
	free_event(&od->sig_hup);
	free_event(&od->watchdog);
	free_event(&od->replica_tick);
	loop_free(od->loop);
	mx_registry_free(od->reg);
	rp_free(od->rp);
	if (od->state_lock >= 0)
		close(od->state_lock); /* releases the flock, last */
	cfg_free(od->cfg);
	memset(od->password, 0, sizeof(od->password));
}

/* jm_deps.plan_submit over the solver pool. */
static int submit_plan(void *pool, struct pool_task *t)
{
	return pool_submit(pool, t);
}

static void on_repair_timer(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;

	if (od->rsw)
		gsw_retry(od->rsw);
	else if (od->jm)
		jm_retry_repairs(od->jm);
}

/*
 * Ring domains: the node-fault listener, one subscription per node on the
 * driver of the transaction handles, and a timer that tries again every
 * second the ring repairs whose transaction failed.
 */
static int start_faults(struct od *od)
{
	struct sb_device_config *dc = calloc((size_t)od->cfg->n_devices + 1, sizeof(*dc));
	struct flt_deps fd = {od->loop, od->exec,   od->rsw ? NULL : od->jm,
			      od->devs, od->driver, od->rsw ? gsw_port_state : NULL,
			      od->rsw};
	int rc = dc ? 0 : -ENOMEM;

	for (int i = 0; rc == 0 && i < od->cfg->n_devices; i++)
		rc = od_device_settings(od->cfg, i, od->password, &dc[i]);
	if (rc == 0)
		rc = flt_start(&fd, dc, od->cfg->n_devices, &od->faults);
	if (rc == 0) {
		struct timeval second = {1, 0};

		rc = od_add_event(od, &od->repair_timer, -1, EV_PERSIST, on_repair_timer, &second);
	}
	for (int i = 0; dc && i < od->cfg->n_devices; i++)
		memset(dc[i].password, 0, sizeof(dc[i].password));
	free(dc);
	if (rc)
		log_msg(LOG_ERR, "node faults: cannot start the notification listener: %s",
			strerror(-rc));
	return rc;
}

/*
 * Fail static on an empty or lost store (adopt.h): cross-connects on the
 * devices that no stored job explains are adopted, cleared, or ocsd does
 * not start. 0 or -errno (logged).
 */
static int check_existing(struct od *od)
{
	struct adopt_deps d = {
		.fabric = &od->cfg->fabric,
		.store = od->store,
		.fs = od->fs,
		.devs = od->devs,
		.loop = od->loop,
		.txn = od->txn,
		.drift = od->drift,
		.now_ms = clk_wall_ms(NULL),
		/* the warm start tried already; else try once, in parallel */
		.connect_ms = od->opts->warm_start_ms ? 0 : (int)od->cfg->access.rpc_timeout_ms};
	enum adopt_mode mode = od->opts->adopt_existing	  ? ADOPT_START_ADOPT
			       : od->opts->clear_existing ? ADOPT_START_CLEAR
							  : ADOPT_START_REFUSE;
	char why[600] = "";
	void *request = api_adopted_request(ADOPT_START_JOB, &d.request_len);
	int rc;

	d.request = request;
	rc = adopt_start_check(&d, mode, why, sizeof(why));
	free(request);
	if (rc)
		log_msg(LOG_ERR, "%s", why);
	return rc;
}

/* nb_server_destroy's drain: the loop thread destroys the server, and
 * answers the calls handed out, through what their handlers posted. */
static void drain_posted(void *ctx)
{
	loop_run_posted(ctx);
}

/* The gRPC server over od->api (both phases). 0 or -errno (logged). */
int od_start_server(struct od *od)
{
	const struct od_options *o = od->opts;
	struct nb_server_config sc = {0};
	struct nb_error nerr = {0};
	size_t n;
	int rc;

	sc.listen_addr = od->listen[0] ? od->listen : o->listen;
	sc.insecure = o->insecure;
	sc.tls_ca_file = o->tls_ca;
	sc.tls_cert_file = o->tls_cert;
	sc.tls_key_file = o->tls_key;
	sc.limits = api_limits(od->cfg);
	sc.handlers = api_handlers(od->api);
	sc.drain = drain_posted;
	sc.drain_ctx = od->loop;
	rc = nb_server_create(&sc, &od->server, &nerr);
	if (rc) {
		log_msg(LOG_ERR, "gRPC server: %s%s%s", nerr.field, nerr.field[0] ? ": " : "",
			nerr.message);
		return rc;
	}
	/* port 0 picks a port once: the next phases listen on the same one */
	n = strlen(o->listen);
	if (!od->listen[0] && n >= 2 && strcmp(o->listen + n - 2, ":0") == 0 &&
	    n + 8 < sizeof(od->listen))
		snprintf(od->listen, sizeof(od->listen), "%.*s:%d", (int)(n - 2), o->listen,
			 nb_server_port(od->server));
	return 0;
}

/* Job manager, API and gRPC server (every kind of fabric). */
int od_start_jobs(struct od *od)
{
	const struct od_options *o = od->opts;
	struct api_deps ad = od_api_deps(od);
	struct jm_deps jd = {0};
	char err[256];
	int rc;

	/* A follower that took the lead: its view's circuits, brought up to the
	 * copy (rp_take_lead caught it up with etcd since). */
	if (od->fs_handover) {
		od->fs = od->fs_handover;
		od->fs_handover = NULL;
		if (fw_fs_catch_up(od->fs, od->store) != 0) {
			fs_free(od->fs);
			od->fs = NULL;
		} else {
			log_msg(LOG_INFO,
				"leader: %zu cross-connects taken over from the follower's "
				"view",
				fs_count(od->fs));
		}
	}
	/* A ring domain has no circuits: no fabric state (rings.h instead). A
	 * rail-OCS fabric's port map is circuits (rails.h). */
	if (od->cfg->kind != CFG_OCSTRX_RING && !od->fs &&
	    (!(od->fs = fs_new(&od->cfg->fabric)) || fs_load(od->fs, od->store) != 0)) {
		log_msg(LOG_ERR, "cannot load the circuits from the state store");
		return -EIO;
	}
	if (od->fs && !(od->drift = dr_new(&od->cfg->fabric)))
		return -ENOMEM;
	/* the cabling check knows the wiring of leaf-spine-OCS fabrics only */
	if (!(od->cabling = cab_new(od->cfg->kind == CFG_LEAF_SPINE_OCS ? &od->cfg->fabric : NULL)))
		return -ENOMEM;
	if (od->cfg->kind == CFG_OCSTRX_RING) {
		od->rings = rg_new(&od->cfg->ring);
		if (!od->rings || (rc = rg_load(od->rings, od->store)) != 0) {
			log_msg(LOG_ERR, "cannot load the rings from the state store");
			return -EIO;
		}
		if (!(od->node_drift = dr_nodes_new(rg_nodes(od->rings))))
			return -ENOMEM;
	}
	rc = od_new_devices(od);
	if (rc)
		return rc;
	if (od->cfg->kind == CFG_RAIL_OCS) {
		struct ra_deps rd = {od->cfg, NULL, NULL, od->devs, api_fail, od->reg};

		rd.rl = od->rl = rl_new(&od->cfg->rail);
		od->ra = od->rl ? ra_new(&rd) : NULL;
		if (!od->ra)
			return -ENOMEM;
	}
	ad.fs = od->fs;
	ad.drift = od->drift;
	ad.node_drift = od->node_drift;
	ad.cabling = od->cabling;
	ad.rings = od->rings;
	ad.rail = od->ra;
	ad.devs = od->devs;
	od->api = api_new(&ad);
	if (!od->api)
		return -ENOMEM;
	rc = od_start_southbound(od);
	if (rc)
		return rc;
	od_warm_start(od);
	{
		/* the ring kind's intents (kind_ring_txn.c): -EINVAL outside a ring domain */
		struct recov_kind kinds[] = {{krt_owns, krt_resolve, od->rings}};
		struct recov_deps rd = {.fabric = &od->cfg->fabric,
					.store = od->store,
					.fs = od->fs,
					.devs = od->devs,
					.kinds = kinds,
					.n_kinds = 1,
					.drift = od->drift};
		struct txn_deps td = {.fabric = &od->cfg->fabric,
				      .fs = od->fs,
				      .store = od->store,
				      .loop = od->loop,
				      .engine = od->engine,
				      .devs = od->devs,
				      .drift = od->drift,
				      .check_xcs = od->rl ? krl_check_xcs : NULL,
				      .check_ctx = &od->cfg->rail,
				      .clock = NULL,
				      .confirm_timeout_s = (int)od->cfg->access.confirm_timeout_s,
				      .connect_timeout_ms = (int)od->cfg->access.rpc_timeout_ms,
				      .rollback_timeout_ms =
					      (int)od->cfg->access.rollback_timeout_ms};

		rc = recov_resolve_open(&rd);
		if (rc) {
			log_msg(LOG_ERR, "recovery of open transactions failed: %s", strerror(-rc));
			return rc;
		}
		od->txn = txn_driver_new(&td);
		if (!od->txn)
			return -ENOMEM;
		/* rail-OCS fabrics: the swaps adopt or program the initial port
		 * map themselves (gpu_swaps.h) */
		if (od->fs && !od->rl && (rc = check_existing(od)) != 0)
			return rc;
		if (od->rl) {
			/* The swaps' own driver: rail jobs program nothing (kind_rail.c),
			 * so the jobs' driver never touches a device. */
			struct gsw_deps sd = {.cfg = od->cfg,
					      .store = od->store,
					      .fs = od->fs,
					      .rl = od->rl,
					      .devs = od->devs,
					      .txn_start = txn_start,
					      .events = ra_events(od->ra)};

			sd.txn_ctx = od->rail_txn = txn_driver_new(&td);
			od->rsw = od->rail_txn ? gsw_new(&sd) : NULL;
			if (!od->rsw)
				return -ENOMEM;
			ra_attach_swaps(od->ra, od->rsw);
		}
	}
	jd = (struct jm_deps){.cfg = od->cfg,
			      .store = od->store,
			      .fs = od->fs,
			      .clock = NULL,
			      .plan_submit = submit_plan,
			      .plan_ctx = od->pool,
			      .solver_pool = pool_solver_pool(od->pool),
			      .txn_start = txn_start,
			      .txn_ctx = od->txn,
			      .devs = od->devs,
			      .drift = od->drift,
			      .cabling = od->cabling,
			      .rings = od->rings,
			      .gpus_check = od->rl ? rl_check_job_gpus : NULL,
			      .gpus_check_ctx = od->rl,
			      .max_wave_jobs = od->opts->max_wave_jobs,
			      .loop = od->loop,
			      .events = api_job_events(od->api)};
	rc = jm_new(&jd, &od->jm, err, sizeof(err));
	if (rc) {
		log_msg(LOG_ERR, "jobs: %s", err);
		return rc;
	}
	api_attach(od->api, od->jm, NULL);
	if (od->rsw)
		gsw_attach(od->rsw, od->jm);
	if ((rc = api_restore_jobs(od->api)) != 0 || (od->rsw && (rc = gsw_start(od->rsw)) != 0) ||
	    (rc = jm_recover(od->jm)) != 0) {
		log_msg(LOG_ERR, "recovery failed: %s", strerror(-rc));
		return rc;
	}
	if ((rc = od_start_server(od)) != 0)
		return rc;
	api_attach(od->api, od->jm, od->server);
	if (o->keepalive_interval_ms) {
		struct ka_deps kd = {.loop = od->loop,
				     .exec = od->exec,
				     .devs = od->devs,
				     .events = api_recon_events(od->api),
				     .reg = od->reg,
				     .interval_ms = o->keepalive_interval_ms,
				     .fabric = &od->cfg->fabric,
				     .fs = od->rings ? NULL : od->fs,
				     .store = od->store,
				     .jm = od->jm,
				     .failed = &sb_engine_counters(od->engine)->failed};

		/* after recovery: from here on transactions claim the handles they use */
		od->ka = ka_new(&kd);
		if (!od->ka)
			return -ENOMEM;
	}
	/* Ring domains and rail-OCS fabrics are watched through notifications
	 * too; every fabric is reconciled (ring domains: bundles, reconcile.h). */
	if ((od->rings || od->rsw) && (rc = start_faults(od)) != 0)
		return rc;
	return start_reconciliation(od);
}

/*
 * Takes DIR/ocsd.lock with an exclusive flock() for ocsd's lifetime, so that
 * no second ocsd runs on the same state directory (its store, its devices'
 * circuits). The file holds the owner's pid for the message a second ocsd
 * prints. The lock goes with the process (kill -9 included). 0 or -errno.
 */
int od_lock_state_dir(struct od *od, const char *dir)
{
	char path[PATH_MAX], pid[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/ocsd.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int rc = -errno;

		log_msg(LOG_ERR, "state store: cannot open the lock file %s: %s", path,
			strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
		if (rc == -EBUSY)
			log_msg(LOG_ERR,
				"state directory %s is in use by another ocsd (pid %s, lock %s): "
				"two "
				"daemons on one store would program the same ports; stop it or use "
				"another --state-dir",
				dir, pid[0] ? pid : "unknown", path);
		else
			log_msg(LOG_ERR, "state store: cannot lock %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_msg(LOG_WARNING, "state directory %s: cannot write the pid into %s", dir, path);
	od->state_lock = fd;
	return 0;
}
