/*
 * replica.c - the store backend and its metrics (replica.h).
 */
#include "replica.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "leader.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "store_etcd.h"

struct replica {
	struct st_store *store;
	struct st_etcd *se; /* etcd only; owned by store */
	struct leader *leader;
	struct rp_opts opts;
	char prefix[512];
	bool etcd;
	struct mx_family *m_store_errors, *m_etcd_seconds, *m_etcd_failures;
	struct mx_family *m_leader, *m_leader_changes;
	char describe[1024];
};

/* etcd request latencies: loopback answers in about a millisecond, a
 * cluster under load or a failover in hundreds. */
static const double etcd_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				     0.05,   0.1,   0.25,   0.5,   1,	 2.5};

int rp_check(const struct rp_opts *o, char *err, size_t err_len)
{
	bool etcd = o->store && strcmp(o->store, "etcd") == 0;

	if (o->store && !etcd && strcmp(o->store, "sqlite") != 0) {
		snprintf(err, err_len, "--store: '%s' is not sqlite or etcd", o->store);
		return -EINVAL;
	}
	if (etcd && !o->etcd_endpoints) {
		snprintf(err, err_len, "--store etcd needs --etcd-endpoints URL[,URL..]");
		return -EINVAL;
	}
	if (!etcd &&
	    (o->etcd_endpoints || o->etcd_prefix || o->etcd_ca || o->etcd_cert || o->etcd_key)) {
		snprintf(err, err_len, "--etcd-* options need --store etcd");
		return -EINVAL;
	}
	if ((o->replica_id || o->advertise) && (!etcd || !o->replica_id || !o->advertise)) {
		snprintf(err, err_len,
			 "--replica-id and --advertise go together, with --store etcd");
		return -EINVAL;
	}
	if (o->leader_ttl_s < 0 || o->leader_ttl_s > 60) {
		snprintf(err, err_len, "--leader-ttl-s: %d is not 1..60", o->leader_ttl_s);
		return -EINVAL;
	}
	return 0;
}

static void on_store_error(void *ctx, int rc)
{
	struct replica *rp = ctx;

	(void)rc;
	/* out of memory loses one count, nothing else */
	(void)mx_add(rp->m_store_errors, (const char *[]){rp->etcd ? "etcd" : "sqlite"}, 1);
}

static void on_etcd_request(void *ctx, const char *op, double seconds, int rc)
{
	struct replica *rp = ctx;

	(void)mx_observe(rp->m_etcd_seconds, (const char *[]){op}, seconds);
	if (rc)
		(void)mx_add(rp->m_etcd_failures, (const char *[]){op}, 1);
}

static int register_metrics(struct replica *rp, struct mx_registry *reg)
{
	const char *const backend[] = {"backend", NULL};
	const char *const op[] = {"op", NULL};

	rp->m_store_errors = mx_counter(reg, "ocsd_store_errors_total",
					"State store writes that failed to begin or commit (the "
					"disk, a lock or etcd refused them).",
					backend);
	rp->m_etcd_seconds =
		mx_histogram(reg, "ocsd_etcd_request_duration_seconds",
			     "etcd requests of the etcd store by operation, "
			     "endpoints tried in turn included.",
			     op, etcd_bounds, sizeof(etcd_bounds) / sizeof(etcd_bounds[0]));
	rp->m_etcd_failures = mx_counter(reg, "ocsd_etcd_request_failures_total",
					 "etcd requests that no endpoint answered or that "
					 "etcd refused, by operation.",
					 op);
	rp->m_leader =
		mx_gauge(reg, "ocsd_leader",
			 "1 while this replica leads (always 1 without --replica-id).", NULL);
	rp->m_leader_changes = mx_counter(reg, "ocsd_leader_changes_total",
					  "Times this replica became the leader.", NULL);
	if (!rp->m_store_errors || !rp->m_etcd_seconds || !rp->m_etcd_failures || !rp->m_leader ||
	    !rp->m_leader_changes || mx_set(rp->m_leader, NULL, rp->opts.replica_id ? 0 : 1) != 0 ||
	    mx_add(rp->m_leader_changes, NULL, 0) != 0)
		return -ENOMEM;
	/* the series exists from the start (rate() needs its zero) */
	return mx_add(rp->m_store_errors, (const char *[]){rp->etcd ? "etcd" : "sqlite"}, 0);
}

static int open_etcd(struct replica *rp, const struct rp_opts *o, const char *fabric_name,
		     char *err, size_t err_len)
{
	struct st_etcd_opts eo = {.etcd = {.endpoints = o->etcd_endpoints,
					   .ca_file = o->etcd_ca,
					   .cert_file = o->etcd_cert,
					   .key_file = o->etcd_key,
					   .timeout_ms = o->etcd_timeout_ms},
				  .prefix = o->etcd_prefix};
	int rc;

	if (o->etcd_prefix)
		snprintf(rp->prefix, sizeof(rp->prefix), "%s", o->etcd_prefix);
	else
		snprintf(rp->prefix, sizeof(rp->prefix), "/ocsd/%s/", fabric_name);
	eo.prefix = rp->prefix;
	rc = st_etcd_open(&eo, &rp->store, &rp->se, err, err_len);
	if (rc)
		return rc;
	etcd_set_observer(st_etcd_client(rp->se), on_etcd_request, rp);
	snprintf(rp->describe, sizeof(rp->describe), "etcd %s prefix %s (entry %llu)",
		 o->etcd_endpoints, eo.prefix, (unsigned long long)st_etcd_seq(rp->se));
	return 0;
}

int rp_open(const struct rp_opts *o, const char *state_dir, const char *fabric_name,
	    struct mx_registry *reg, struct replica **out, char *err, size_t err_len)
{
	struct replica *rp;
	int rc = rp_check(o, err, err_len);

	*out = NULL;
	if (rc)
		return rc;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->etcd = o->store && strcmp(o->store, "etcd") == 0;
	rp->opts = *o;
	rc = register_metrics(rp, reg);
	if (rc) {
		snprintf(err, err_len, "out of memory");
	} else if (rp->etcd) {
		rc = open_etcd(rp, o, fabric_name, err, err_len);
	} else {
		char path[900];

		snprintf(path, sizeof(path), "%s/ocsd.db", state_dir);
		snprintf(rp->describe, sizeof(rp->describe), "sqlite %s", path);
		rc = st_open(path, &rp->store, err, err_len);
	}
	if (rc) {
		rp_free(rp);
		return rc;
	}
	st_set_error_observer(rp->store, on_store_error, rp);
	*out = rp;
	return 0;
}

/* On the keep-alive thread: this replica may no longer touch a device. */
static void on_leader_lost(void *ctx, const char *why)
{
	(void)ctx;
	log_msg(LOG_CRIT,
		"leadership lost (%s): exiting at once; unconfirmed device commits "
		"revert by themselves and the new leader recovers",
		why);
	_exit(1);
}

int rp_lead(struct replica *rp, char *err, size_t err_len)
{
	const struct rp_opts *o = &rp->opts;
	struct etcd_opts eo = {.endpoints = o->etcd_endpoints,
			       .ca_file = o->etcd_ca,
			       .cert_file = o->etcd_cert,
			       .key_file = o->etcd_key,
			       .timeout_ms = o->etcd_timeout_ms};
	struct ld_opts lo = {.replica_id = o->replica_id,
			     .advertise = o->advertise,
			     .prefix = rp->prefix,
			     .ttl_s = o->leader_ttl_s};
	char who[600] = "";
	int rc;

	if (!o->replica_id)
		return 0;
	rc = ld_new(&eo, &lo, &rp->leader, err, err_len);
	if (rc)
		return rc;
	(void)ld_current(rp->leader, who, sizeof(who));
	log_msg(LOG_NOTICE, "replica %s: standby until it leads (leader now: %s)", o->replica_id,
		*who ? who : "none");
	rc = ld_campaign(rp->leader, -1, NULL, on_leader_lost, rp);
	if (rc) {
		snprintf(err, err_len, "leader election: %s", strerror(-rc));
		return rc;
	}
	rc = st_etcd_set_fence(rp->se, ld_key(rp->leader), strlen(ld_key(rp->leader)),
			       ld_revision(rp->leader));
	if (rc == 0 && (rc = st_etcd_sync(rp->se)) != 0)
		snprintf(err, err_len, "%s", st_etcd_last_error(rp->se));
	else if (rc)
		snprintf(err, err_len, "out of memory");
	if (rc)
		return rc;
	(void)mx_set(rp->m_leader, NULL, 1);
	(void)mx_add(rp->m_leader_changes, NULL, 1);
	log_msg(LOG_NOTICE, "replica %s leads (leader key revision %lld, log entry %llu)",
		o->replica_id, (long long)ld_revision(rp->leader),
		(unsigned long long)st_etcd_seq(rp->se));
	return 0;
}

int rp_fence(void *ctx, char *why, size_t why_len)
{
	struct replica *rp = ctx;

	return rp->leader ? ld_check(rp->leader, why, why_len) : 0;
}

void rp_free(struct replica *rp)
{
	if (!rp)
		return;
	/* a clean stop hands over at once instead of after the lease's TTL */
	if (rp->leader)
		(void)ld_resign(rp->leader);
	ld_free(rp->leader);
	st_close(rp->store);
	free(rp);
}

struct st_store *rp_store(struct replica *rp)
{
	return rp->store;
}

const char *rp_store_name(const struct replica *rp)
{
	return rp->etcd ? "etcd" : "sqlite";
}

const char *rp_describe(const struct replica *rp)
{
	return rp->describe;
}
