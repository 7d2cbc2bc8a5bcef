/*
 * daemon.c - implementation of daemon.h: start-up, signals, systemd
 * notifications, the watchdog and the metrics sampled from the in-memory
 * state before each scrape; with replicas, the phases a role calls for
 * (od_run: a follower phase, a leader phase, one after the other on the
 * same loop; roles in replica.c, docs/replicas.md).
 *
 * Return values left unchecked here, and why that is safe: sd_notify() (a
 * notification systemd does not get is only a status line lost; outside
 * systemd it does nothing), mx_set()/mx_add() (see api_events.c), and fclose() of a
 * file opened for reading.
 */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "adopt.h"
#include "api.h"
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

#define OD_EXIT_OK	0
#define OD_EXIT_FAILURE 1
#define OD_EXIT_CONFIG	2
/* Planner jobs that may wait for a worker before requests are refused. */
#define OD_SOLVER_QUEUE_MAX 1024
/*
 * Retention: a pass every minute, in batches of at most this many rows (one
 * transaction each: 9 to 60 ms for 100 jobs with their intents on the
 * 2-core test machine), the next batch on the next loop turn while more is due.
 */
#define OD_PRUNE_INTERVAL_S 60
#define OD_PRUNE_BATCH	    100

/*
 * What runs between two role changes (replica.c draws the roles): a
 * follower serves reads from the store copy and refuses writes, a leader
 * is the whole daemon. Without --replica-id ocsd is always a leader.
 */
enum od_phase { OD_PHASE_NONE, OD_PHASE_FOLLOWER, OD_PHASE_LEADER };

struct od {
	const struct od_options *opts;
	struct ocsd_config *cfg;
	struct replica *rp; /* the store backend; owns store */
	struct st_store *store;
	struct loop *loop;
	struct exec *exec; /* the one executor: planners, device I/O, reconciliation */
	struct exec_sb *exec_sb;
	struct pool *pool;
	struct mx_registry *reg;
	struct mh_server *http;
	struct event *sig_term, *sig_int, *sig_hup, *watchdog, *drain;
	struct event *replica_tick; /* rp_beat, and on_replica_change now and then */
	unsigned ticks;
	struct sb_driver *driver;
	struct devices *devs; /* every device's handles, session, health and drain */
	struct sb_engine *engine;
	struct txn_driver *txn;
	struct fs_state *fs;
	struct dr_table *drift; /* cross-connects no job owns (leaf-spine fabrics) */
	struct api *api;
	struct jm *jm;
	struct nb_server *server;
	struct recon *recon;
	struct event *recon_timer;
	struct rep *repair; /* circuits of live jobs missing on the devices (leaf-spine) */
	struct ka *ka;	    /* the transaction sessions' keepalive */
	struct event *prune_timer;
	struct mx_family *m_jobs, *m_xcs, *m_ports, *m_reloads, *m_devices, *m_contention;
	struct mx_family *m_pruned;
	struct mx_family *m_rings, *m_faulty, *m_subscribed;
	struct rg_state *rings;	     /* ring domains: the rings and faulty nodes */
	struct faults *faults;	     /* ring domains: the node-fault listener */
	struct event *repair_timer;  /* ring domains: repairs that did not go through, again;
				      * rail-OCS fabrics: swaps of faulty GPUs, again */
	struct rl_state *rl;	     /* rail-OCS fabrics: port map and GPU conditions */
	struct rsw *rsw;	     /* rail-OCS fabrics: the GPU swaps */
	struct ra *ra;		     /* rail-OCS fabrics: their API */
	struct txn_driver *rail_txn; /* rail-OCS fabrics: the swaps' transactions */
	char password[128];	     /* the password-file's secret the devices use ("" none) */
	int state_lock;		     /* DIR/ocsd.lock, flock()ed for ocsd's lifetime (-1 none) */
	/* replicas (docs/replicas.md): the phase running now, and why it ends */
	enum od_phase phase;
	struct fw *fw;	  /* the follower phase's view of the store copy */
	bool stopping;	  /* SIGTERM/SIGINT: no further phase */
	bool restart;	  /* the leader phase starts again (its store failed, etcd is back) */
	char listen[300]; /* --listen with port 0: the port the first phase got */
	struct sb_device **warm; /* a follower's: the transaction sessions a takeover starts with */
};

static void log_config_errors(const char *path, const struct cfg_errors *errs)
{
	log_msg(LOG_ERR, "%s: invalid fabric file (%d error%s)", path, errs->count,
		errs->count == 1 ? "" : "s");
	for (int i = 0; i < errs->count; i++)
		log_msg(LOG_ERR, "%s: %s", errs->items[i].path, errs->items[i].message);
}

/* ---- metrics derived from the in-memory state (no scrape reads the store) ---- */

/*
 * Before each scrape: job counts by state from the job manager's counters
 * and the worst contention of its live jobs, cross-connects and
 * input ports per group from the fabric state's per-device runs, devices
 * by state from devices.c.
 */
static void sample_metrics(void *arg)
{
	struct od *od = arg;
	const struct ocs_fabric *f = &od->cfg->fabric;
	static const enum jm_state states[] = {JM_PENDING,   JM_PLANNING, JM_PROGRAMMING, JM_ACTIVE,
					       JM_RELEASING, JM_RELEASED, JM_FAILED};
	enum { N_STATES = sizeof(states) / sizeof(states[0]) };

	mx_clear(od->m_jobs);
	for (size_t s = 0; od->jm && s < N_STATES; s++) {
		const char *label = jm_state_name(states[s]);

		mx_set(od->m_jobs, &label, (double)jm_count_state(od->jm, states[s]));
	}
	if (od->jm)
		mx_set(od->m_contention, NULL, jm_max_contention(od->jm));
	if (od->devs) {
		int drained = dev_n_drained(od->devs);

		mx_set(od->m_devices, (const char *[]){"in_service"},
		       (double)(dev_count(od->devs) - drained));
		mx_set(od->m_devices, (const char *[]){"drained"}, (double)drained);
		mx_set(od->m_devices, (const char *[]){"unreachable"},
		       (double)dev_unreachable(od->devs));
	}
	mx_set(od->m_xcs, NULL, od->fs ? (double)fs_count(od->fs) : 0);
	if (od->rings) {
		mx_set(od->m_rings, NULL, (double)rg_active(od->rings));
		mx_set(od->m_faulty, NULL, (double)rg_n_faulty(od->rings));
		mx_set(od->m_subscribed, NULL, (double)flt_subscribed(od->faults));
	}
	if (od->fs) {
		/* Each cross-connect occupies one input and one output port. */
		long cabled =
			(long)ocs_fabric_devices_per_group(f) * ocs_fabric_device_ports_used(f);

		for (int h = 0; h < ocs_fabric_groups(f); h++) {
			char group[16];
			const char *used[] = {group, "used"}, *free_[] = {group, "free"};
			long n = (long)fs_group_xcs(od->fs, h);

			snprintf(group, sizeof(group), "%d", h);
			mx_set(od->m_ports, used, (double)n);
			mx_set(od->m_ports, free_, (double)(cabled - n));
		}
	}
}

static int register_metrics(struct od *od)
{
	const char *const version_label[] = {"version", "fabric", NULL};
	const char *const state_label[] = {"state", NULL};
	const char *const port_labels[] = {"group", "state", NULL};
	const char *const result_label[] = {"result", NULL};
	struct mx_family *info, *start;

	info = mx_gauge(od->reg, "ocsd_build_info", "ocsd version and fabric name.", version_label);
	start = mx_gauge(od->reg, "ocsd_start_time_seconds", "Unix time ocsd started.", NULL);
	od->m_jobs = mx_gauge(od->reg, "ocsd_jobs", "Jobs by lifecycle state.", state_label);
	od->m_xcs = mx_gauge(od->reg, "ocsd_cross_connects",
			     "One-way cross-connects the state store says the devices hold.", NULL);
	od->m_ports = mx_gauge(od->reg, "ocsd_ocs_input_ports",
			       "Cabled OCS input ports per group, used and free.", port_labels);
	od->m_reloads = mx_counter(od->reg, "ocsd_config_reloads_total",
				   "Fabric file re-reads (SIGHUP) by result.", result_label);
	od->m_devices = mx_gauge(od->reg, "ocsd_devices",
				 "Devices by state (in_service + drained = all; unreachable: "
				 "the last reconciliation could not read them).",
				 state_label);
	od->m_contention =
		mx_gauge(od->reg, "ocsd_active_plan_max_contention",
			 "Largest leaf-spine contention over the plans of active jobs.", NULL);
	od->m_pruned = mx_counter(od->reg, "ocsd_jobs_pruned_total",
				  "Finished jobs deleted by the retention.", NULL);
	od->m_rings = mx_gauge(od->reg, "ocsd_rings_active",
			       "OCSTrx ring domains: rings holding nodes.", NULL);
	od->m_faulty = mx_gauge(od->reg, "ocsd_nodes_faulty",
				"OCSTrx ring domains: nodes marked faulty.", NULL);
	od->m_subscribed = mx_gauge(od->reg, "ocsd_nodes_subscribed",
				    "OCSTrx ring domains: nodes whose fault notifications ocsd "
				    "receives (subscription up).",
				    NULL);
	if (!info || !start || !od->m_jobs || !od->m_xcs || !od->m_ports || !od->m_reloads ||
	    !od->m_devices || !od->m_contention || !od->m_pruned || !od->m_rings || !od->m_faulty ||
	    !od->m_subscribed)
		return -ENOMEM;
	mx_set(info, (const char *[]){OCSD_VERSION, od->cfg->name}, 1);
	mx_set(start, NULL, (double)(clk_wall_ms(NULL) / 1000));
	return 0;
}

/* ---- signals and systemd ---- */

/* Stops the loop once no transaction is running (checked every 50 ms). */
static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;

	if (od->jm && jm_busy(od->jm))
		return;
	loop_stop(od->loop);
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
	if (od->jm)
		jm_stop(od->jm);
	if (od->server)
		nb_server_shutdown(od->server);
	od->drain = event_new(loop_base(od->loop), -1, EV_PERSIST, on_drain_tick, od);
	if (!od->drain || event_add(od->drain, &tick) != 0)
		loop_stop(od->loop);
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* What a re-read fabric file changes. */
enum cfg_change {
	CHANGE_NONE,
	CHANGE_ACCESS,	/* only how devices are reached: applied live */
	CHANGE_RESTART, /* the fabric itself: takes effect at the next start */
};

static enum cfg_change config_change(const struct ocsd_config *a, const struct ocsd_config *b)
{
	const struct cfg_access *x = &a->access, *y = &b->access;
	bool access = false;

	/* planners, stored circuits and the transaction engine depend on these */
	if (a->kind != b->kind || a->n_devices != b->n_devices || strcmp(a->name, b->name) != 0 ||
	    memcmp(&a->fabric, &b->fabric, sizeof(a->fabric)) != 0 ||
	    memcmp(&a->ring, &b->ring, sizeof(a->ring)) != 0 ||
	    memcmp(&a->rail, &b->rail, sizeof(a->rail)) != 0 ||
	    x->confirm_timeout_s != y->confirm_timeout_s ||
	    x->rollback_timeout_ms != y->rollback_timeout_ms)
		return CHANGE_RESTART;
	for (int i = 0; i < a->n_devices; i++) {
		const struct cfg_device *p = &a->devices[i], *q = &b->devices[i];

		if (p->id != q->id || strcmp(p->name, q->name) != 0)
			return CHANGE_RESTART;
		access |= strcmp(p->address, q->address) != 0 || p->port != q->port ||
			  strcmp(p->host_key_sha256, q->host_key_sha256) != 0;
	}
	access |= x->transport != y->transport || strcmp(x->username, y->username) != 0 ||
		  !same_str(x->password_file, y->password_file) ||
		  !same_str(x->private_key_file, y->private_key_file) ||
		  !same_str(x->certificate_file, y->certificate_file) ||
		  !same_str(x->ca_file, y->ca_file) ||
		  x->accept_any_host_key != y->accept_any_host_key ||
		  x->rpc_timeout_ms != y->rpc_timeout_ms || x->switch_time_us != y->switch_time_us;
	return access ? CHANGE_ACCESS : CHANGE_NONE;
}

static int read_secret(const char *path, char *out, size_t size);
static int device_settings(const struct ocsd_config *cfg, int i, const char *password,
			   struct sb_device_config *dc);

/*
 * Applies new device access settings (addresses, ports, host keys,
 * credentials, rpc-timeout, switch time) of next, whose fabric equals the running one:
 * every device handle stages them (sb_device_set_config: a transaction in
 * progress keeps its sessions; each device reconnects with the new settings
 * when it is next used), then the running configuration takes them over.
 */
static int apply_access(struct od *od, struct ocsd_config *next, const char *password)
{
	struct cfg_access old = od->cfg->access;
	int rc = 0;

	for (int i = 0; (od->devs || od->warm) && i < next->n_devices && !rc; i++) {
		struct sb_device_config dc;

		rc = device_settings(next, i, password, &dc);
		if (!rc && od->warm && od->warm[i])
			rc = sb_device_set_config(od->warm[i], &dc);
		if (!rc && od->devs)
			rc = sb_device_set_config(dev_handle(od->devs, i, DEV_ROLE_TXN), &dc);
		if (!rc && od->devs)
			rc = sb_device_set_config(dev_handle(od->devs, i, DEV_ROLE_RECON), &dc);
		memset(dc.password, 0, sizeof(dc.password));
	}
	if (rc)
		return rc;
	/* the running configuration owns the new file names; next frees the old */
	od->cfg->access = next->access;
	next->access = old;
	memcpy(od->cfg->devices, next->devices, (size_t)next->n_devices * sizeof(*next->devices));
	memcpy(od->password, password, sizeof(od->password));
	return 0;
}

/*
 * SIGHUP: re-reads and validates the fabric file. How devices are reached
 * (addresses, ports, host keys, credentials, including a changed password
 * file content, rpc-timeout) is applied at once; anything else (the fabric's
 * shape, device names, confirm-timeout) takes effect at the next start,
 * since the planners, the stored circuits and the transactions depend on it.
 */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct od *od = arg;
	struct cfg_errors errs = {0};
	struct ocsd_config *next = NULL;
	const char *result = "unchanged";
	char password[sizeof(od->password)] = "";
	enum cfg_change change = CHANGE_NONE;
	int rc = 0;

	sd_notify(0, "RELOADING=1\nSTATUS=re-reading the fabric file");
	if (cfg_load_file(od->opts->config_path, &next, &errs) != 0) {
		log_config_errors(od->opts->config_path, &errs);
		log_msg(LOG_WARNING, "%s is invalid: the running configuration stays",
			od->opts->config_path);
		result = "invalid";
	} else if ((change = config_change(od->cfg, next)) == CHANGE_RESTART) {
		log_msg(LOG_WARNING,
			"%s changes the fabric, a device name or confirm-timeout-s: the change "
			"takes effect when ocsd restarts (nothing was applied)",
			od->opts->config_path);
		result = "restart_needed";
	} else if (next->access.password_file &&
		   (rc = read_secret(next->access.password_file, password, sizeof(password))) !=
			   0) {
		log_msg(LOG_WARNING,
			"devices: cannot read password-file %s (%s; it must be a regular "
			"file whose first line is the password): the running configuration "
			"stays",
			next->access.password_file, strerror(-rc));
		result = "invalid";
	} else if (change == CHANGE_NONE && (!od->devs || strcmp(password, od->password) == 0)) {
		log_msg(LOG_NOTICE, "%s is unchanged", od->opts->config_path);
	} else if ((rc = apply_access(od, next, password)) != 0) {
		log_msg(LOG_WARNING,
			"devices: cannot apply the new access settings (%s): the "
			"running configuration stays",
			strerror(-rc));
		result = "invalid";
	} else {
		log_msg(LOG_NOTICE,
			"%s: new device access settings applied; each device "
			"reconnects with them when it is next used",
			od->opts->config_path);
		result = "applied";
	}
	memset(password, 0, sizeof(password));
	mx_add(od->m_reloads, &result, 1);
	cfg_free(next);
	cfg_errors_clear(&errs);
	sd_notify(0, "READY=1\nSTATUS=running");
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
				.events = api_recon_events(od->api),
				.busy = od->rsw ? gsw_busy : NULL,
				.busy_ctx = od->rsw};
	struct timeval tv = {(time_t)od->opts->reconcile_interval_s, 0};
	struct rep_deps pd = {.devs = od->devs, .jm = od->jm, .events = api_repair_events(od->api)};

	/* Rail-OCS fabrics: no job owns a cross-connect (the rail port map's
	 * owner is no job), so there is nothing to repair. */
	if (!od->rsw && !(od->repair = rep_new(&pd)))
		return -ENOMEM;
	rd.repair = od->repair;
	od->recon = recon_new(&rd);
	if (!od->recon)
		return -ENOMEM;
	if (od->opts->reconcile_interval_s) {
		od->recon_timer =
			event_new(loop_base(od->loop), -1, EV_PERSIST, on_recon_timer, od);
		if (!od->recon_timer || event_add(od->recon_timer, &tv) != 0)
			return -ENOMEM;
	}
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
static int start_retention(struct od *od)
{
	struct timeval now = {0, 0};

	od->prune_timer = event_new(loop_base(od->loop), -1, 0, on_prune_timer, od);
	return od->prune_timer && event_add(od->prune_timer, &now) == 0 ? 0 : -ENOMEM;
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
	od->watchdog = event_new(loop_base(od->loop), -1, EV_PERSIST, on_watchdog, od);
	if (!od->watchdog || event_add(od->watchdog, &tv) != 0)
		return -ENOMEM;
	return 0;
}

static int add_signal(struct od *od, struct event **ev, int sig,
		      void (*cb)(evutil_socket_t, short, void *))
{
	*ev = evsignal_new(loop_base(od->loop), sig, cb, od);
	return *ev && event_add(*ev, NULL) == 0 ? 0 : -ENOMEM;
}

/*
 * Ends the running phase: everything start_leader or start_follower made,
 * in the order a stop needs (the loop, the metrics endpoint, the signals
 * and the store stay for the next phase). Every pointer is NULL afterwards.
 */
static void phase_teardown(struct od *od)
{
	od->phase = OD_PHASE_NONE;
	/* every call answered from here on is refused (the loop still answers
	 * the ones the server drains below, while their objects go) */
	if (od->api)
		api_stopping(od->api);
	if (od->recon_timer)
		event_free(od->recon_timer);
	if (od->prune_timer)
		event_free(od->prune_timer);
	if (od->repair_timer)
		event_free(od->repair_timer);
	recon_free(od->recon);
	ka_free(od->ka);
	flt_stop(od->faults); /* no more faults reach the job manager */
	if (od->jm)
		jm_stop(od->jm);
	if (od->server)
		nb_server_shutdown(od->server);
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
	if (od->loop)
		loop_run_posted(od->loop);
	/* Answers every caller still waiting, then the server can finish. */
	jm_free(od->jm);
	if (od->loop)
		loop_run_posted(od->loop);
	rep_free(od->repair); /* its transaction's outcome was taken above */
	gsw_free(od->rsw);    /* answers requests still waiting */
	txn_driver_free(od->txn);
	txn_driver_free(od->rail_txn);
	nb_server_destroy(od->server);
	if (od->loop)
		loop_run_posted(od->loop);
	fw_free(od->fw); /* the follower's view, once its server is gone */
	sb_engine_free(od->engine);
	dev_free(od->devs); /* and the device handles, before their driver */
	fs_free(od->fs);
	dr_free(od->drift);
	api_free(od->api);
	ra_free(od->ra);
	rl_free(od->rl);
	if (od->drain)
		event_free(od->drain);
	/* every user stopped; what its draining tasks post runs here, before the
	 * fault listener and the rings they may name go */
	pool_free(od->pool);
	exec_free(od->exec);
	if (od->loop)
		loop_run_posted(od->loop);
	flt_free(od->faults);
	rg_free(od->rings);
	od->recon_timer = od->prune_timer = od->repair_timer = od->drain = NULL;
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
	od->api = NULL;
	od->ra = NULL;
	od->rl = NULL;
	od->pool = NULL;
	od->exec = NULL;
	od->rings = NULL;
}

static void od_teardown(struct od *od)
{
	phase_teardown(od);
	for (int i = 0; od->warm && i < od->cfg->n_devices; i++)
		sb_device_free(od->warm[i]);
	free(od->warm);
	sb_driver_free(od->driver); /* after every device handle */
	rp_stop(od->rp);	    /* no role change reaches the loop any more */
	mh_stop(od->http);
	if (od->sig_term)
		event_free(od->sig_term);
	if (od->sig_int)
		event_free(od->sig_int);
	if (od->sig_hup)
		event_free(od->sig_hup);
	if (od->watchdog)
		event_free(od->watchdog);
	if (od->replica_tick)
		event_free(od->replica_tick);
	loop_free(od->loop);
	mx_registry_free(od->reg);
	rp_free(od->rp);
	if (od->state_lock >= 0)
		close(od->state_lock); /* releases the flock, last */
	cfg_free(od->cfg);
	memset(od->password, 0, sizeof(od->password));
}

/* Reads the first line of a secret file (password). 0 or -errno. */
static int read_secret(const char *path, char *out, size_t size)
{
	/* Not blocking (a FIFO would wait for a writer, on the event loop when
	 * SIGHUP reads it): only a regular file is read. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *f;
	size_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd); /* read-only: nothing to flush */
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		(void)close(fd); /* read-only: nothing to flush */
		return -ENOMEM;
	}
	if (!fgets(out, (int)size, f)) {
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	n = strcspn(out, "\r\n");
	out[n] = '\0';
	return n ? 0 : -EINVAL;
}

/* Copies src when it fits (with its NUL); false otherwise. */
static bool copy_fits(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* The southbound settings of device i of cfg; password: the password-file's secret. */
static int device_settings(const struct ocsd_config *cfg, int i, const char *password,
			   struct sb_device_config *dc)
{
	const struct cfg_access *a = &cfg->access;
	const struct cfg_device *d = &cfg->devices[i];

	memset(dc, 0, sizeof(*dc));
	/* config.c bounds names, addresses and user names to these sizes. */
	if (!copy_fits(dc->name, sizeof(dc->name), d->name) ||
	    !copy_fits(dc->host, sizeof(dc->host), d->address) ||
	    !copy_fits(dc->username, sizeof(dc->username), a->username) ||
	    !copy_fits(dc->password, sizeof(dc->password), password)) {
		log_msg(LOG_ERR, "device %s: a name, address, user or password is too long",
			d->name);
		return -ENAMETOOLONG;
	}
	dc->port = d->port;
	dc->transport = a->transport == CFG_TRANSPORT_TLS ? SB_TRANSPORT_TLS : SB_TRANSPORT_SSH;
	if (a->private_key_file && dc->transport == SB_TRANSPORT_SSH) {
		snprintf(dc->privkey_path, sizeof(dc->privkey_path), "%s", a->private_key_file);
		snprintf(dc->pubkey_path, sizeof(dc->pubkey_path), "%s.pub", a->private_key_file);
	}
	dc->hostkey_policy = a->accept_any_host_key ? SB_HOSTKEY_ACCEPT_ANY : SB_HOSTKEY_PINNED;
	snprintf(dc->hostkey_sha256, sizeof(dc->hostkey_sha256), "%s", d->host_key_sha256);
	if (dc->transport == SB_TRANSPORT_TLS) {
		snprintf(dc->tls_cert, sizeof(dc->tls_cert), "%s",
			 a->certificate_file ? a->certificate_file : "");
		snprintf(dc->tls_key, sizeof(dc->tls_key), "%s",
			 a->private_key_file ? a->private_key_file : "");
		snprintf(dc->tls_ca, sizeof(dc->tls_ca), "%s", a->ca_file ? a->ca_file : "");
	}
	dc->rpc_timeout_ms = (int)a->rpc_timeout_ms;
	dc->switch_us = (int)a->switch_time_us;
	if (cfg->kind == CFG_OCSTRX_RING) {
		/* one transceiver agent per node; device i serves node i */
		dc->model = SB_MODEL_TRANSCEIVER;
		dc->node = (uint32_t)d->id;
	}
	return 0;
}

/* One southbound handle per configured device for role (no I/O yet). */
static int open_devices(struct od *od, enum dev_role role)
{
	const struct cfg_access *a = &od->cfg->access;
	int rc;

	if (a->password_file && !od->password[0] &&
	    (rc = read_secret(a->password_file, od->password, sizeof(od->password))) != 0) {
		log_msg(LOG_ERR,
			"devices: cannot read password-file %s: %s (it must be a regular file "
			"whose first line is the password)",
			a->password_file, strerror(-rc));
		return rc;
	}
	for (int i = 0; i < od->cfg->n_devices; i++) {
		struct sb_device_config dc;
		struct sb_device *h = NULL;

		rc = device_settings(od->cfg, i, od->password, &dc);
		if (!rc && role == DEV_ROLE_TXN && od->warm && od->warm[i]) {
			h = od->warm[i]; /* connected while following: the devices take it over */
			od->warm[i] = NULL;
		} else if (!rc) {
			rc = sb_device_new(od->driver, &dc, &h);
		}
		memset(dc.password, 0, sizeof(dc.password));
		if (!rc)
			dev_set_handle(od->devs, i, role, h);
		if (rc) {
			log_msg(LOG_ERR, "device %s: %s", od->cfg->devices[i].name, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/*
 * Sizing the one executor: room for the planner tasks (--solver-threads,
 * default one per core) plus the device I/O tasks (one per device, at most
 * 64; reconciliation reads share them), so that neither kind waits for
 * threads the other blocks.
 */
static unsigned od_solver_tasks(const struct od_options *opts)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (opts->solver_threads)
		return opts->solver_threads;
	return n > 0 ? (unsigned)n : 1;
}

static unsigned od_io_tasks(const struct od *od)
{
	return od->cfg->n_devices < 64 ? (unsigned)od->cfg->n_devices : 64;
}

/* The NETCONF driver, two sets of device handles and the transaction engine. */
static int start_southbound(struct od *od)
{
	/* one driver for the process (libnetconf2's client state), kept across phases */
	int rc = od->driver ? 0 : sb_driver_new(NULL, &od->driver);

	if (rc) {
		log_msg(LOG_ERR, "devices: cannot set up the NETCONF driver: %s", strerror(-rc));
		return rc;
	}
	if ((rc = open_devices(od, DEV_ROLE_TXN)) != 0 ||
	    (rc = open_devices(od, DEV_ROLE_RECON)) != 0)
		return rc;
	od->exec_sb = exec_sb_new(od->exec, od_io_tasks(od));
	if (!od->exec_sb)
		return -ENOMEM;
	struct sb_executor x = exec_sb_executor(od->exec_sb);

	rc = sb_engine_new_on(&x, &od->engine);
	if (rc)
		log_msg(LOG_ERR, "cannot start the transaction engine: %s", strerror(-rc));
	return rc;
}

/*
 * Warm start (issue 13): connects every device's transaction session in
 * parallel, for at most --warm-start-ms, before recovery and READY, so that
 * neither recovery nor the first transaction pays for the handshakes. A
 * device still down afterwards is connected at first use, as before.
 */
static void warm_start(struct od *od)
{
	int n = od->cfg->n_devices;
	struct sb_device **h = calloc((size_t)n + 1, sizeof(*h));
	int64_t t0 = sb_now_ms();
	size_t up;

	if (!h || !od->opts->warm_start_ms || n == 0) {
		free(h);
		return;
	}
	for (int i = 0; i < n; i++)
		h[i] = dev_handle(od->devs, i, DEV_ROLE_TXN);
	up = sb_device_connect_many(h, (size_t)n, n < 32 ? n : 32,
				    t0 + (int64_t)od->opts->warm_start_ms, NULL);
	log_msg(LOG_INFO, "warm start: %zu of %d devices connected in %lld ms", up, n,
		(long long)(sb_now_ms() - t0));
	free(h);
}

/* The per-device records (devices.c); their handles come with start_southbound(). */
static int new_devices(struct od *od)
{
	const char **names = calloc((size_t)od->cfg->n_devices + 1, sizeof(*names));
	struct dev_deps dd;

	if (!names)
		return -ENOMEM;
	for (int i = 0; i < od->cfg->n_devices; i++)
		names[i] = od->cfg->devices[i].name;
	dd = (struct dev_deps){&od->cfg->fabric,   od->fs,
			       od->store,	   names,
			       od->cfg->n_devices, (int)od->cfg->access.rpc_timeout_ms,
			       clk_wall_ms(NULL)};
	od->devs = dev_new(&dd);
	free(names);
	return od->devs ? 0 : -ENOMEM;
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
		rc = device_settings(od->cfg, i, od->password, &dc[i]);
	if (rc == 0)
		rc = flt_start(&fd, dc, od->cfg->n_devices, &od->faults);
	if (rc == 0) {
		struct timeval second = {1, 0};

		od->repair_timer =
			event_new(loop_base(od->loop), -1, EV_PERSIST, on_repair_timer, od);
		rc = od->repair_timer && event_add(od->repair_timer, &second) == 0 ? 0 : -ENOMEM;
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
	int rc = adopt_start_check(&d, mode, why, sizeof(why));

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
static int start_server(struct od *od)
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
static int start_jobs(struct od *od)
{
	const struct od_options *o = od->opts;
	struct api_deps ad = {.cfg = od->cfg,
			      .loop = od->loop,
			      .reg = od->reg,
			      .version = OCSD_VERSION,
			      .store = rp_store_name(od->rp),
			      .rp = od->rp};
	struct jm_deps jd = {0};
	char err[256];
	int rc;

	/* A ring domain has no circuits: no fabric state (rings.h instead). A
	 * rail-OCS fabric's port map is circuits (rails.h). */
	if (od->cfg->kind != CFG_OCSTRX_RING &&
	    (!(od->fs = fs_new(&od->cfg->fabric)) || fs_load(od->fs, od->store) != 0)) {
		log_msg(LOG_ERR, "cannot load the circuits from the state store");
		return -EIO;
	}
	if (od->fs && !(od->drift = dr_new(&od->cfg->fabric)))
		return -ENOMEM;
	if (od->cfg->kind == CFG_OCSTRX_RING) {
		od->rings = rg_new(&od->cfg->ring);
		if (!od->rings || (rc = rg_load(od->rings, od->store)) != 0) {
			log_msg(LOG_ERR, "cannot load the rings from the state store");
			return -EIO;
		}
	}
	rc = new_devices(od);
	if (rc)
		return rc;
	if (od->cfg->kind == CFG_RAIL_OCS) {
		struct ra_deps rd = {od->cfg, NULL, NULL, od->devs, api_fail};

		rd.rl = od->rl = rl_new(&od->cfg->rail);
		od->ra = od->rl ? ra_new(&rd) : NULL;
		if (!od->ra)
			return -ENOMEM;
	}
	ad.fs = od->fs;
	ad.drift = od->drift;
	ad.rings = od->rings;
	ad.rail = od->ra;
	ad.devs = od->devs;
	od->api = api_new(&ad);
	if (!od->api)
		return -ENOMEM;
	rc = start_southbound(od);
	if (rc)
		return rc;
	warm_start(od);
	{
		struct recov_deps rd = {&od->cfg->fabric, od->store, od->fs,
					od->devs,	  NULL,	     od->rings};
		struct txn_deps td = {.fabric = &od->cfg->fabric,
				      .fs = od->fs,
				      .store = od->store,
				      .loop = od->loop,
				      .engine = od->engine,
				      .devs = od->devs,
				      .rings = od->rings,
				      .drift = od->drift,
				      .rail = od->rl ? &od->cfg->rail : NULL,
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
			      .rings = od->rings,
			      .gpus_check = od->rl ? rl_check_job_gpus : NULL,
			      .gpus_check_ctx = od->rl,
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
	if ((rc = start_server(od)) != 0)
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
	/* Reconciliation reads cross-connects: ring domains are read back by
	 * recovery and by each transaction, and watched through notifications. */
	if (od->rings)
		return start_faults(od);
	if (od->rsw && (rc = start_faults(od)) != 0)
		return rc;
	return start_reconciliation(od);
}

/*
 * Takes DIR/ocsd.lock with an exclusive flock() for ocsd's lifetime, so that
 * no second ocsd runs on the same state directory (its store, its devices'
 * circuits). The file holds the owner's pid for the message a second ocsd
 * prints. The lock goes with the process (kill -9 included). 0 or -errno.
 */
static int lock_state_dir(struct od *od, const char *dir)
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

/*
 * grpc.health.v1: "" stays SERVING on every live replica; "ocs.v1.Jobs" is
 * SERVING only on a leader that takes writes (its etcd answers, its job
 * manager serves).
 */
static void update_health(struct od *od)
{
	char why[800];
	bool serving = od->phase == OD_PHASE_LEADER && !od->stopping &&
		       rp_write_refusal(od->rp, why, sizeof(why)) == 0 && od->jm &&
		       jm_serving(od->jm, NULL);

	if (od->server)
		nb_server_set_health(
			od->server, "ocs.v1.Jobs",
			serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
				: GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
}

/*
 * rp_start's on_change, on the loop: the role, the leader, the replicas or
 * etcd's health changed. Ends the phase when the role calls for the other
 * one (od_run starts it), or a leader whose store failed once etcd answers
 * again (it starts again as after a crash: recovery sets the store right).
 */
static void on_replica_change(void *ctx)
{
	struct od *od = ctx;
	enum rp_role role = rp_role(od->rp);
	char why[800];
	bool store_ok = rp_write_refusal(od->rp, why, sizeof(why)) == 0;
	int rc;

	if (od->phase == OD_PHASE_NONE)
		return;
	update_health(od);
	if (od->stopping)
		return;
	if (od->phase == OD_PHASE_FOLLOWER && role == RP_RECOVERING) {
		loop_stop(od->loop);
	} else if (od->phase == OD_PHASE_LEADER && role == RP_FOLLOWER) {
		log_msg(LOG_WARNING, "not the leader any more: ending the leader phase");
		if (od->api)
			api_stopping(od->api);
		loop_stop(od->loop);
	} else if (od->phase == OD_PHASE_FOLLOWER && (rc = rp_catch_up(od->rp)) > 0) {
		fw_refresh(od->fw); /* the copy opened while etcd was down is loaded */
	} else if (od->phase == OD_PHASE_LEADER && store_ok && od->jm &&
		   !jm_serving(od->jm, NULL) && rp_etcd(od->rp)) {
		log_msg(LOG_NOTICE,
			"the state store answers again: starting again as after a crash");
		od->restart = true;
		if (od->api)
			api_stopping(od->api);
		loop_stop(od->loop);
	}
}

static void on_replica_check(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	on_replica_change(arg);
}

/* Ticks per on_replica_change of the tick: every half second. */
#define OD_TICKS_PER_CHECK (500 / RP_BEAT_MS)

/*
 * Every RP_BEAT_MS, on the loop, in every phase: the loop is alive
 * (rp_beat), and every half second the role and the store are looked at
 * as after a change: a leader whose store write failed while the replica's
 * thread saw etcd answer (a member killed under one write) has no change
 * to wait for, and starts again as after a crash.
 */
static void on_replica_tick(evutil_socket_t fd, short what, void *arg)
{
	struct od *od = arg;

	(void)fd;
	(void)what;
	rp_beat(od->rp);
	if (++od->ticks % OD_TICKS_PER_CHECK == 0)
		on_replica_change(od);
}

static int start_replica_tick(struct od *od)
{
	struct timeval tv = {0, RP_BEAT_MS * 1000};

	od->replica_tick = event_new(loop_base(od->loop), -1, EV_PERSIST, on_replica_tick, od);
	return od->replica_tick && event_add(od->replica_tick, &tv) == 0 ? 0 : -ENOMEM;
}

/*
 * A follower connects the transaction sessions a takeover starts with
 * (warm start, before its server serves): the leader phase takes them
 * over (open_devices), so the failover does not wait for 16 SSH
 * handshakes. Nothing is sent on them but NETCONF's hello. A failure
 * only leaves the leader phase to connect them itself.
 */
static void warm_for_takeover(struct od *od)
{
	int n = od->cfg->n_devices;
	int64_t t0 = sb_now_ms();
	size_t up;

	if (!od->opts->warm_start_ms || n == 0 || !od->opts->replica.replica_id)
		return;
	if (od->cfg->access.password_file && !od->password[0] &&
	    read_secret(od->cfg->access.password_file, od->password, sizeof(od->password)) != 0)
		return; /* the leader phase says why */
	if (!od->warm && !(od->warm = calloc((size_t)n, sizeof(*od->warm))))
		return;
	if (!od->driver && sb_driver_new(NULL, &od->driver) != 0)
		return;
	for (int i = 0; i < n; i++) {
		struct sb_device_config dc;

		if (!od->warm[i] && device_settings(od->cfg, i, od->password, &dc) == 0)
			(void)sb_device_new(od->driver, &dc, &od->warm[i]); /* NULL: made later */
		memset(dc.password, 0, sizeof(dc.password));
		if (!od->warm[i])
			return;
	}
	up = sb_device_connect_many(od->warm, (size_t)n, n < 32 ? n : 32,
				    t0 + (int64_t)od->opts->warm_start_ms, NULL);
	log_msg(LOG_INFO, "follower: %zu of %d devices' sessions ready for a takeover in %lld ms",
		up, n, (long long)(sb_now_ms() - t0));
}

/* A follower: the store copy's view, the gRPC server refusing writes. */
static int start_follower(struct od *od)
{
	struct api_deps ad = {.cfg = od->cfg,
			      .loop = od->loop,
			      .reg = od->reg,
			      .version = OCSD_VERSION,
			      .store = rp_store_name(od->rp),
			      .rp = od->rp};
	struct fw_deps fd = {od->cfg, od->store, rp_etcd(od->rp), od->loop, NULL};
	int rc;

	if (rp_catch_up(od->rp) < 0)
		log_msg(LOG_WARNING, "follower: etcd does not answer: serving the copy as it is");
	fd.api = od->api = api_new(&ad);
	if (!od->api)
		return -ENOMEM;
	if ((rc = fw_new(&fd, &od->fw)) != 0)
		return rc;
	warm_for_takeover(od);
	if ((rc = start_server(od)) != 0)
		return rc;
	api_attach(od->api, fw_jm(od->fw), od->server);
	od->phase = OD_PHASE_FOLLOWER;
	update_health(od);
	rp_set_campaign(od->rp, true);
	return 0;
}

/* The leader: the whole daemon, started exactly as after a crash. */
static int start_leader(struct od *od)
{
	char err[600];
	int rc;

	rp_set_campaign(od->rp, false);
	if ((rc = rp_take_lead(od->rp, err, sizeof(err))) != 0) {
		log_msg(LOG_ERR, "replica: cannot take the lead: %s", err);
		return rc;
	}
	od->exec = exec_new(od_solver_tasks(od->opts) + od_io_tasks(od));
	od->pool = od->exec ? pool_new(od->loop, od->exec, od_solver_tasks(od->opts),
				       OD_SOLVER_QUEUE_MAX)
			    : NULL;
	if (!od->pool) {
		log_msg(LOG_ERR, "cannot start the solver pool");
		return -ENOMEM;
	}
	if ((rc = start_jobs(od)) != 0)
		return rc;
	if ((rc = start_retention(od)) != 0) {
		log_msg(LOG_ERR, "cannot start the retention timer");
		return rc;
	}
	od->phase = OD_PHASE_LEADER;
	rp_leading(od->rp);
	update_health(od);
	return 0;
}

int od_run(const struct od_options *opts)
{
	struct od od = {.opts = opts, .state_lock = -1};
	struct cfg_errors errs = {0};
	char err[512];
	int rc = OD_EXIT_FAILURE;
	bool ready = false;

	if (cfg_load_file(opts->config_path, &od.cfg, &errs) != 0) {
		log_config_errors(opts->config_path, &errs);
		cfg_errors_clear(&errs);
		return OD_EXIT_CONFIG;
	}
	if (lock_state_dir(&od, opts->state_dir) != 0)
		goto out;
	od.loop = loop_new();
	od.reg = mx_registry_new();
	if (!od.loop || !od.reg || register_metrics(&od) != 0) {
		log_msg(LOG_ERR, "out of memory at start-up");
		goto out;
	}
	if (rp_open(&opts->replica, opts->state_dir, od.cfg->name, od.reg, &od.rp, err,
		    sizeof(err)) != 0) {
		log_msg(LOG_ERR, "state store: %s", err);
		goto out;
	}
	od.store = rp_store(od.rp);
	od.http = mh_start(loop_base(od.loop), opts->metrics_listen, od.reg, sample_metrics, &od,
			   err, sizeof(err));
	if (!od.http) {
		log_msg(LOG_ERR, "metrics endpoint: %s", err);
		goto out;
	}
	if (add_signal(&od, &od.sig_term, SIGTERM, on_stop_signal) != 0 ||
	    add_signal(&od, &od.sig_int, SIGINT, on_stop_signal) != 0 ||
	    add_signal(&od, &od.sig_hup, SIGHUP, on_reload) != 0 || start_watchdog(&od) != 0) {
		log_msg(LOG_ERR, "cannot install signal handlers or the watchdog");
		goto out;
	}
	if (rp_start(od.rp, od.loop, on_replica_change, &od) != 0)
		goto out;
	if (start_replica_tick(&od) != 0) {
		log_msg(LOG_ERR, "cannot start the replica's timer");
		goto out;
	}
	/* one phase after the other, until a stop signal (docs/replicas.md) */
	for (;;) {
		enum rp_role role = rp_role(od.rp);
		bool lead = role == RP_RECOVERING || role == RP_LEADER;
		int64_t t0 = clk_mono_us(NULL);
		int phase_rc = lead ? start_leader(&od) : start_follower(&od);

		od.restart = false;
		/* the first phase's line is the start line below (tests read its ports) */
		if (phase_rc == 0 && ready && lead)
			log_msg(LOG_NOTICE,
				"leader: serving writes on gRPC %s (port %d), %lld ms after taking "
				"the lead",
				opts->listen, nb_server_port(od.server),
				(long long)((clk_mono_us(NULL) - t0) / 1000));
		else if (phase_rc == 0 && ready)
			log_msg(LOG_NOTICE,
				"follower: serving reads from the store copy on gRPC %s (port %d)",
				opts->listen, nb_server_port(od.server));
		if (phase_rc == 0 && !ready) {
			log_msg(LOG_NOTICE,
				"ocsd %s: fabric \"%s\" (%s, %d devices), state %s, metrics on %s "
				"(port %d), gRPC on %s (port %d%s), %s",
				OCSD_VERSION, od.cfg->name, cfg_kind_name(od.cfg->kind),
				od.cfg->n_devices, rp_describe(od.rp), opts->metrics_listen,
				mh_port(od.http), opts->listen,
				od.server ? nb_server_port(od.server) : 0,
				opts->insecure ? ", insecure" : "", lead ? "leader" : "follower");
			sd_notifyf(0, "READY=1\nSTATUS=running fabric %s", od.cfg->name);
			ready = true;
		}
		if (phase_rc == 0) {
			struct timeval now = {0, 0};

			/* a change while the phase started: looked at once the loop runs
			 * (a loop_stop before loop_run would be lost) */
			if (event_base_once(loop_base(od.loop), -1, EV_TIMEOUT, on_replica_check,
					    &od, &now) != 0)
				phase_rc = -ENOMEM;
			else
				phase_rc = loop_run(od.loop) == 0 ? 0 : -EIO;
		}
		phase_teardown(&od);
		if (lead && !od.restart)
			rp_follow(od.rp);
		if (od.stopping) {
			rc = phase_rc == 0 ? OD_EXIT_OK : OD_EXIT_FAILURE;
			break;
		}
		/* a replica whose leader phase failed follows again; else ocsd stops */
		if (phase_rc != 0 && !(lead && opts->replica.replica_id))
			break;
	}
out:
	od_teardown(&od);
	return rc;
}
