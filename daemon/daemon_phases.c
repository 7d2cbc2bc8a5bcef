/*
 * daemon_phases.c - od_run (daemon.h): the process's start-up (the fabric
 * file, the state lock, loop, metrics, store backend, signals), then the
 * phases a replica's role calls for, one after the other on the same loop
 * (a follower phase, a leader phase: roles in replica.c, docs/replicas.md),
 * and the health the gRPC server reports for them.
 *
 * sd_notifyf()'s result is left unchecked (daemon.c says why).
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-daemon.h>

#include "api.h"
#include "clock.h"
#include "executor.h"
#include "follower.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "metrics_http.h"
#include "pool.h"

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

	return od_add_event(od, &od->replica_tick, -1, EV_PERSIST, on_replica_tick, &tv);
}

/* A follower: the store copy's view, the gRPC server refusing writes. */
static int start_follower(struct od *od)
{
	struct api_deps ad = od_api_deps(od);
	struct fw_deps fd = {od->cfg, od->store, rp_etcd(od->rp), od->loop, NULL};
	int rc;

	if (rp_catch_up(od->rp) < 0)
		log_msg(LOG_WARNING, "follower: etcd does not answer: serving the copy as it is");
	fd.api = od->api = api_new(&ad);
	if (!od->api)
		return -ENOMEM;
	if ((rc = fw_new(&fd, &od->fw)) != 0)
		return rc;
	if ((rc = od_start_server(od)) != 0)
		return rc;
	api_attach(od->api, fw_jm(od->fw), od->server);
	od->phase = OD_PHASE_FOLLOWER;
	update_health(od);
	rp_set_campaign(od->rp, true);
	od_warm_for_takeover(od);
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
	if ((rc = od_start_jobs(od)) != 0)
		return rc;
	if ((rc = od_start_retention(od)) != 0) {
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
		od_log_config_errors(opts->config_path, &errs);
		cfg_errors_clear(&errs);
		return OD_EXIT_CONFIG;
	}
	if (od_lock_state_dir(&od, opts->state_dir) != 0)
		goto out;
	od.loop = loop_new();
	od.reg = mx_registry_new();
	if (!od.loop || !od.reg || od_register_metrics(&od) != 0) {
		log_msg(LOG_ERR, "out of memory at start-up");
		goto out;
	}
	if (rp_open(&opts->replica, opts->state_dir, od.cfg->name, od.reg, &od.rp, err,
		    sizeof(err)) != 0) {
		log_msg(LOG_ERR, "state store: %s", err);
		goto out;
	}
	od.store = rp_store(od.rp);
	od.http = mh_start(loop_base(od.loop), opts->metrics_listen, od.reg, od_sample_metrics, &od,
			   err, sizeof(err));
	if (!od.http) {
		log_msg(LOG_ERR, "metrics endpoint: %s", err);
		goto out;
	}
	if (od_start_status(&od) != 0) {
		log_msg(LOG_ERR, "status page: out of memory");
		goto out;
	}
	if (od_start_signals(&od) != 0) {
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
		od_phase_teardown(&od);
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
