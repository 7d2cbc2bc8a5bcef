/*
 * api.h - the daemon's side of the ocs.v1 gRPC API: the northbound
 * handlers (called on gRPC threads) post every request to the event loop,
 * where it is served from the job manager and the fabric state; answers
 * and events go back through the northbound library. Structured errors of
 * the job manager are mapped to gRPC status codes here, once.
 *
 * Threading: api_handlers() callbacks run on gRPC threads and only post;
 * everything else runs on the loop thread.
 */
#ifndef OCSD_API_H
#define OCSD_API_H

#include <stdbool.h>

#include "nb.h"
#include "reconcile.h"
#include "repair.h"

struct api;
struct devices;
struct cab_table;
struct dr_nodes;
struct dr_table;
struct ra;
struct fs_state;
struct jm;
struct err_info;
struct loop;
struct mx_registry;
struct rg_state;
struct ocsd_config;
struct replica;
struct st_store;

struct api_deps {
	const struct ocsd_config *cfg;
	struct loop *loop;
	struct fs_state *fs;
	struct devices *devs;	     /* sessions, health and drain of every device */
	struct rg_state *rings;	     /* ring domains: rings and node conditions; NULL otherwise */
	struct dr_table *drift;	     /* leaf-spine: cross-connects no job owns (drift.h) */
	struct dr_nodes *node_drift; /* ring domains: bundles that differ from the rings */
	struct cab_table *cabling;   /* miswired fibre the devices report (cabling.h) */
	struct ra *rail;	     /* rail-OCS fabrics: rail_api.h; NULL otherwise */
	struct mx_registry *reg;     /* RPC and plan metrics are registered here */
	const char *version;
	const char *store;  /* the store backend's name (GetFabric) */
	struct replica *rp; /* writes refused while it says so; GetFabric's replica
			     * fields (NULL: writes always taken, no replica fields) */
};

/* Caller frees with api_free() (accepts NULL). */
struct api *api_new(const struct api_deps *deps);
void api_free(struct api *api);
/* The job manager and the server, once they exist (set before serving). */
void api_attach(struct api *api, struct jm *jm, struct nb_server *server);
/* The handler table for nb_server_config. */
struct nb_handlers api_handlers(struct api *api);
/* Fabric limits for request validation. */
struct nb_limits api_limits(const struct ocsd_config *cfg);
/* answers call with a job manager error, mapped to gRPC (ra_deps.fail) */
void api_fail(struct nb_call *call, const struct err_info *err);
/* Job manager events -> Events.Watch (pass as jm_deps.events). */
struct jm_events api_job_events(struct api *api);
/* Reconciliation results -> DriftEvents and drift metrics (recon_deps.events). */
struct recon_events api_recon_events(struct api *api);
/* Circuit repairs -> ocsd_circuit_repairs_total (rep_deps.events). */
struct rep_events api_repair_events(struct api *api);
/*
 * The request GetJob hands back for a job adopted from the devices
 * (jm_adopt, adopt.h): a JobSpec naming only id. malloc'd (caller frees),
 * *len its size; NULL out of memory.
 */
void *api_adopted_request(const char *id, size_t *len);
/* Restores drained devices (dev_restore_drained) and decodes the stored request of every job. */
int api_restore_jobs(struct api *api);
/* Decodes the stored request of job id (a follower's job that changed). 0 or -ENOMEM. */
int api_restore_job(struct api *api, const char *id);
/*
 * The follower phase's state, refreshed from the store copy (follower.h):
 * the API serves from these from now on (jm as api_attach; the server
 * stays). The caller frees the previous ones afterwards.
 */
void api_follow(struct api *api, struct jm *jm, struct fs_state *fs, struct devices *devs,
		struct rg_state *rings, struct ra *rail);
/* Marks the API as stopping: new requests get UNAVAILABLE. */
void api_stopping(struct api *api);

#endif
