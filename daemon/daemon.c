/*
 * daemon.c - implementation of daemon.h: start-up, signals, systemd
 * notifications, the watchdog and the state-derived metrics.
 */
#include "daemon.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "config.h"
#include "loop.h"
#include "metrics.h"
#include "metrics_http.h"
#include "pool.h"
#include "store.h"

#define OD_EXIT_OK 0
#define OD_EXIT_FAILURE 1
#define OD_EXIT_CONFIG 2
/* Planner jobs that may wait for a worker before requests are refused. */
#define OD_SOLVER_QUEUE_MAX 1024

struct od {
	const struct od_options *opts;
	struct ocsd_config *cfg;
	struct st_store *store;
	struct loop *loop;
	struct pool *pool;
	struct mx_registry *reg;
	struct mh_server *http;
	struct event *sig_term, *sig_int, *sig_hup, *watchdog;
	struct mx_family *m_jobs, *m_xcs, *m_ports, *m_reloads;
};

/* Log lines carry sd-daemon priority prefixes, which journald understands. */
__attribute__((format(printf, 2, 3))) static void od_log(const char *prio, const char *fmt, ...)
{
	va_list ap;

	fputs(prio, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void log_config_errors(const char *path, const struct cfg_errors *errs)
{
	od_log(SD_ERR, "%s: invalid fabric file (%d error%s)", path, errs->count,
	       errs->count == 1 ? "" : "s");
	for (int i = 0; i < errs->count; i++)
		od_log(SD_ERR, "%s: %s", errs->items[i].path, errs->items[i].message);
}

/* ---- metrics derived from the store ---- */

static int count_job_state(void *ctx, const struct st_job *job)
{
	struct mx_family *fam = ctx;
	const char *labels[] = { job->state };

	mx_add(fam, labels, 1);
	return 0;
}

struct port_count {
	const struct ocs_fabric *f;
	long *used_per_group;
	long total;
};

static int count_xc(void *ctx, const struct st_circuit *c)
{
	struct port_count *pc = ctx;

	pc->total++;
	if (pc->used_per_group && c->xc.group >= 0 && c->xc.group < ocs_fabric_groups(pc->f))
		pc->used_per_group[c->xc.group]++;
	return 0;
}

static void refresh_metrics(void *arg)
{
	struct od *od = arg;
	const struct ocs_fabric *f = &od->cfg->fabric;
	bool leaf_spine = od->cfg->kind == CFG_LEAF_SPINE_OCS;
	struct port_count pc = { f, NULL, 0 };
	static const char *const states[] = { "PENDING",   "PLANNING", "PROGRAMMING", "ACTIVE",
					      "RELEASING", "RELEASED", "FAILED" };

	mx_clear(od->m_jobs);
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		mx_set(od->m_jobs, &states[i], 0);
	st_job_list(od->store, count_job_state, od->m_jobs);

	if (leaf_spine)
		pc.used_per_group = calloc((size_t)ocs_fabric_groups(f), sizeof(long));
	st_circuit_list(od->store, NULL, count_xc, &pc);
	mx_set(od->m_xcs, NULL, (double)pc.total);
	if (pc.used_per_group) {
		/* Each cross-connect occupies one input and one output port. */
		long cabled = (long)ocs_fabric_devices_per_group(f) * ocs_fabric_device_ports_used(f);

		for (int h = 0; h < ocs_fabric_groups(f); h++) {
			char group[16];
			const char *used[] = { group, "used" }, *free_[] = { group, "free" };

			snprintf(group, sizeof(group), "%d", h);
			mx_set(od->m_ports, used, (double)pc.used_per_group[h]);
			mx_set(od->m_ports, free_, (double)(cabled - pc.used_per_group[h]));
		}
		free(pc.used_per_group);
	}
}

static int register_metrics(struct od *od)
{
	const char *const version_label[] = { "version", "fabric", NULL };
	const char *const state_label[] = { "state", NULL };
	const char *const port_labels[] = { "group", "state", NULL };
	const char *const result_label[] = { "result", NULL };
	struct mx_family *info, *start;
	struct timespec now;

	info = mx_gauge(od->reg, "ocsd_build_info", "ocsd version and fabric name.", version_label);
	start = mx_gauge(od->reg, "ocsd_start_time_seconds", "Unix time ocsd started.", NULL);
	od->m_jobs = mx_gauge(od->reg, "ocsd_jobs", "Jobs by lifecycle state.", state_label);
	od->m_xcs = mx_gauge(od->reg, "ocsd_cross_connects",
			     "One-way cross-connects the state store says the devices hold.", NULL);
	od->m_ports = mx_gauge(od->reg, "ocsd_ocs_input_ports",
			       "Cabled OCS input ports per group, used and free.", port_labels);
	od->m_reloads = mx_counter(od->reg, "ocsd_config_reloads_total",
				   "Fabric file reloads (SIGHUP) by result.", result_label);
	if (!info || !start || !od->m_jobs || !od->m_xcs || !od->m_ports || !od->m_reloads)
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &now);
	mx_set(info, (const char *[]){ OCSD_VERSION, od->cfg->name }, 1);
	mx_set(start, NULL, (double)now.tv_sec);
	return 0;
}

/* ---- signals and systemd ---- */

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
	struct od *od = arg;

	od_log(SD_NOTICE, "signal %d: stopping", (int)sig);
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	loop_stop(od->loop);
}

/* The parts of a fabric that live circuits and device sessions depend on. */
static bool same_shape(const struct ocsd_config *a, const struct ocsd_config *b)
{
	if (a->kind != b->kind || a->n_devices != b->n_devices)
		return false;
	switch (a->kind) {
	case CFG_LEAF_SPINE_OCS:
		return memcmp(&a->fabric, &b->fabric, sizeof(a->fabric)) == 0;
	case CFG_OCSTRX_RING:
		return memcmp(&a->ring, &b->ring, sizeof(a->ring)) == 0;
	case CFG_RAIL_OCS:
		return memcmp(&a->rail, &b->rail, sizeof(a->rail)) == 0;
	}
	return false;
}

static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct od *od = arg;
	struct cfg_errors errs = { 0 };
	struct ocsd_config *next = NULL;
	const char *result = "applied";

	sd_notify(0, "RELOADING=1\nSTATUS=reloading the fabric file");
	if (cfg_load_file(od->opts->config_path, &next, &errs) != 0) {
		log_config_errors(od->opts->config_path, &errs);
		od_log(SD_WARNING, "reload refused: keeping the running configuration");
		result = "invalid";
	} else if (!same_shape(od->cfg, next)) {
		od_log(SD_WARNING, "reload refused: the fabric's shape changed (pods, ports, wiring "
				   "or device count); restart ocsd to change it");
		result = "refused";
	} else {
		cfg_free(od->cfg);
		od->cfg = next;
		next = NULL;
		od_log(SD_NOTICE, "reloaded %s", od->opts->config_path);
	}
	mx_add(od->m_reloads, &result, 1);
	cfg_free(next);
	cfg_errors_clear(&errs);
	sd_notify(0, "READY=1\nSTATUS=running");
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

static void od_teardown(struct od *od)
{
	/* Drain the pool first: completions still arrive on the loop. */
	pool_free(od->pool);
	mh_stop(od->http);
	if (od->sig_term)
		event_free(od->sig_term);
	if (od->sig_int)
		event_free(od->sig_int);
	if (od->sig_hup)
		event_free(od->sig_hup);
	if (od->watchdog)
		event_free(od->watchdog);
	loop_free(od->loop);
	mx_registry_free(od->reg);
	st_close(od->store);
	cfg_free(od->cfg);
}

int od_run(const struct od_options *opts)
{
	struct od od = { .opts = opts };
	struct cfg_errors errs = { 0 };
	char path[PATH_MAX], err[512];
	int rc = OD_EXIT_FAILURE;

	if (cfg_load_file(opts->config_path, &od.cfg, &errs) != 0) {
		log_config_errors(opts->config_path, &errs);
		cfg_errors_clear(&errs);
		return OD_EXIT_CONFIG;
	}
	snprintf(path, sizeof(path), "%s/ocsd.db", opts->state_dir);
	if (st_open(path, &od.store, err, sizeof(err)) != 0) {
		od_log(SD_ERR, "state store: %s", err);
		goto out;
	}
	od.loop = loop_new();
	od.reg = mx_registry_new();
	if (!od.loop || !od.reg || register_metrics(&od) != 0) {
		od_log(SD_ERR, "out of memory at start-up");
		goto out;
	}
	od.pool = pool_new(od.loop, opts->solver_threads, OD_SOLVER_QUEUE_MAX);
	if (!od.pool) {
		od_log(SD_ERR, "cannot start the solver pool");
		goto out;
	}
	od.http = mh_start(loop_base(od.loop), opts->metrics_listen, od.reg, refresh_metrics, &od,
			   err, sizeof(err));
	if (!od.http) {
		od_log(SD_ERR, "metrics endpoint: %s", err);
		goto out;
	}
	if (add_signal(&od, &od.sig_term, SIGTERM, on_stop_signal) != 0 ||
	    add_signal(&od, &od.sig_int, SIGINT, on_stop_signal) != 0 ||
	    add_signal(&od, &od.sig_hup, SIGHUP, on_reload) != 0 || start_watchdog(&od) != 0) {
		od_log(SD_ERR, "cannot install signal handlers or the watchdog");
		goto out;
	}
	od_log(SD_NOTICE, "ocsd %s: fabric \"%s\" (%s, %d devices), state %s, metrics on %s (port %d), "
			  "%u solver threads",
	       OCSD_VERSION, od.cfg->name, cfg_kind_name(od.cfg->kind), od.cfg->n_devices, path,
	       opts->metrics_listen, mh_port(od.http), pool_workers(od.pool));
	sd_notifyf(0, "READY=1\nSTATUS=running fabric %s", od.cfg->name);
	rc = loop_run(od.loop) == 0 ? OD_EXIT_OK : OD_EXIT_FAILURE;
out:
	od_teardown(&od);
	return rc;
}
