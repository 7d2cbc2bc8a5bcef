/*
 * api_internal.h - what the files of the API (api.h) share: struct api
 * itself, the protobuf messages built from daemon state (api_pb.c), the
 * Fabric service's RPCs (api_fabric.c) and the device event (api_events.c).
 * Not for use outside the API; everything here runs on the event-loop
 * thread.
 *
 * Call graph (no file calls back into one that calls it; checked by the
 * callgraph test):
 *
 *   api.c --> api_fabric.c --> api_events.c
 *     |            |               |
 *     `------------+---------------+--> api_pb.c
 *
 * api.c owns struct api (api_new/api_free), the hand-off from gRPC threads
 * and the Jobs service; the handler table there names every serve function.
 */
#ifndef OCSD_API_INTERNAL_H
#define OCSD_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "jobs.h"
#include "nb.h"

struct api_req;
struct arena;
struct dr_bundle;
struct event;
struct mx_family;
struct ocs_xc;
struct fs_circuit;
struct rg_ring;

struct api {
	struct api_deps d;
	struct jm *jm;
	struct nb_server *server;
	bool stopping;
	struct mx_family *m_rpcs, *m_rpc_seconds, *m_plan_seconds, *m_txns, *m_txn_seconds;
	struct mx_family *m_rollbacks, *m_rollback_failures, *m_drift, *m_unreachable;
	struct mx_family *m_drift_bundles;
	struct mx_family *m_cabling; /* ocsd_cabling_miswired_ports */
	struct mx_family *m_waves, *m_wave_jobs, *m_wave_wait_seconds;
	struct mx_family *m_recon_seconds;
	struct mx_family *m_circuit_repairs;		  /* leaf-spine: repair.h */
	struct mx_family *m_repairs, *m_reaction_seconds; /* ring domains */
	size_t drift_published;				  /* in the current pass */
	/* While plans whose caller may go away wait: every API_CANCEL_CHECK_MS,
	 * the ones whose call was cancelled (or passed its deadline) stop. */
	struct event *cancel_check;
	/* Job requests waiting for the rail port map, oldest first (api.c: hold). */
	struct api_req *held, *held_tail;
	int n_held;
};

/* ---- api_pb.c: messages built in a per-request arena (NULL when it runs out) ---- */

Ocs__V1__JobState api_job_state_pb(enum jm_state s);
/* Answers call with r, or INTERNAL "out of memory building the reply" when failed. */
void api_reply(struct nb_call *call, const ProtobufCMessage *r, bool failed);
/* Answers call with status, field and a message, mapped to gRPC as api_fail maps an error. */
__attribute__((format(printf, 4, 5))) void api_failf(struct nb_call *call, enum err_status status,
						     const char *field, const char *fmt, ...);
/* The cross-connect's device name (static config string, "?" when unknown). */
const char *api_device_name(const struct api *api, const struct ocs_xc *xc);
Ocs__V1__Circuit **api_build_circuits(struct api *api, struct arena *ar,
				      const struct fs_circuit *cs, size_t n);
/* A Ring message (allocated in ar; NULL when it runs out). */
Ocs__V1__Ring *api_build_ring(struct arena *ar, const struct rg_ring *r);
Ocs__V1__Ring **api_build_rings(struct arena *ar, const struct rg_ring *r, size_t n);
/*
 * A node's (gpu false: NodeEvent) or a GPU's (GpuEvent) condition and who
 * set it, to Events.Watch (nothing without a server).
 */
void api_publish_condition(struct nb_server *server, bool gpu, int64_t id, bool faulty,
			   const char *source);
/*
 * A Device message: its session, health, drain and what it says of itself
 * (NULL: unknown id or out of memory).
 */
Ocs__V1__Device *api_build_device(struct api *api, struct arena *ar, int id);

/* ---- api_events.c ---- */

/*
 * A ProgressEvent to Events.Watch: a running transaction's step and
 * devices done, naming the jobs it serves (nothing without a server).
 */
void api_publish_progress(struct nb_server *server, const char *const *jobs, size_t n_jobs,
			  const struct txn_progress *p);

/* A DeviceEvent to Events.Watch (nothing without a server or a device). */
void api_publish_device(struct api *api, Ocs__V1__Device *d);
/* ocsd_cabling_miswired_ports from the cabling table, as it is now. */
void api_cabling_gauge(struct api *api);

/* ---- api_fabric.c: the Fabric service, served on the loop (msg: its request) ---- */

void api_serve_get_fabric(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_devices(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_circuits(struct api *api, struct nb_call *call, const void *msg);
void api_serve_drain_device(struct api *api, struct nb_call *call, const void *msg);
void api_serve_undrain_device(struct api *api, struct nb_call *call, const void *msg);
void api_serve_mark_node(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_rings(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_drift(struct api *api, struct nb_call *call, const void *msg);
/* db from b (device: the node's agent; job_id NULL: in no ring); want and
 * got are the caller's buffers of len bytes for the two settings. */
void api_drift_bundle(Ocs__V1__DriftBundle *db, const struct dr_bundle *b, const char *device,
		      const char *job_id, char *want, char *got, size_t len);
void api_serve_adopt(struct api *api, struct nb_call *call, const void *msg);
void api_serve_clear(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_cabling(struct api *api, struct nb_call *call, const void *msg);
void api_serve_clear_cabling(struct api *api, struct nb_call *call, const void *msg);
/* Rail-OCS fabrics only (rail_api.c). */
void api_serve_replace_gpu(struct api *api, struct nb_call *call, const void *msg);
void api_serve_mark_gpu(struct api *api, struct nb_call *call, const void *msg);
void api_serve_list_rail_ports(struct api *api, struct nb_call *call, const void *msg);

#endif
