/*
 * replica.c - the store backend and its metrics (replica.h).
 */
#include "replica.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "store.h"
#include "store_etcd.h"

struct replica {
	struct st_store *store;
	bool etcd;
	struct mx_family *m_store_errors, *m_etcd_seconds, *m_etcd_failures;
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
	if (!rp->m_store_errors || !rp->m_etcd_seconds || !rp->m_etcd_failures)
		return -ENOMEM;
	/* the series exists from the start (rate() needs its zero) */
	return mx_add(rp->m_store_errors, (const char *[]){rp->etcd ? "etcd" : "sqlite"}, 0);
}

static int open_etcd(struct replica *rp, const struct rp_opts *o, const char *fabric_name,
		     char *err, size_t err_len)
{
	char prefix[512];
	struct st_etcd_opts eo = {.etcd = {.endpoints = o->etcd_endpoints,
					   .ca_file = o->etcd_ca,
					   .cert_file = o->etcd_cert,
					   .key_file = o->etcd_key,
					   .timeout_ms = o->etcd_timeout_ms},
				  .prefix = o->etcd_prefix};
	struct st_etcd *se;
	int rc;

	if (!eo.prefix) {
		snprintf(prefix, sizeof(prefix), "/ocsd/%s/", fabric_name);
		eo.prefix = prefix;
	}
	rc = st_etcd_open(&eo, &rp->store, &se, err, err_len);
	if (rc)
		return rc;
	etcd_set_observer(st_etcd_client(se), on_etcd_request, rp);
	snprintf(rp->describe, sizeof(rp->describe), "etcd %s prefix %s (entry %llu)",
		 o->etcd_endpoints, eo.prefix, (unsigned long long)st_etcd_seq(se));
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

void rp_free(struct replica *rp)
{
	if (!rp)
		return;
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
