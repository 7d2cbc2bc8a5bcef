/*
 * rail_api.h - the rail-OCS part of the ocs.v1 API (issue 12): ReplaceGpu,
 * MarkGpu and ListRailPorts served from the rail state (rails.h) and the
 * swaps (gpu_swaps.h), the rail fields of GetFabric and of a Job, and the
 * RailEvent and GpuEvent of Events.Watch. api_fabric.c hands it the decoded,
 * validated requests of a rail-OCS fabric on the loop thread; errors of
 * the swaps go back through api_pb.c's one mapping to gRPC (ra_deps.fail).
 *
 * Ownership: the ra object borrows everything in ra_deps; the server is
 * attached once it exists (ra_attach). Threading: loop thread only.
 */
#ifndef OCSD_RAIL_API_H
#define OCSD_RAIL_API_H

#include "arena.h"
#include "jobs.h"
#include "nb.h"
#include "gpu_swaps.h"

struct devices;
struct mx_registry;
struct ocsd_config;
struct rl_state;

struct ra_deps {
	const struct ocsd_config *cfg;
	struct rl_state *rl;
	struct rsw *rsw;
	struct devices *devs;
	/* answers call with a job manager error (api_pb.c's mapping to gRPC) */
	void (*fail)(struct nb_call *call, const struct err_info *err);
	/* ocsd_rail_swaps_total is registered here (NULL: a follower, no swaps) */
	struct mx_registry *reg;
};

struct ra;

/* NULL on allocation failure; ra_free accepts NULL. */
struct ra *ra_new(const struct ra_deps *deps);
void ra_free(struct ra *ra);
/* The server events are published on (NULL: none yet). */
void ra_attach(struct ra *ra, struct nb_server *server);
/* The swaps, once they exist (created after the API: they publish through it). */
void ra_attach_swaps(struct ra *ra, struct rsw *rsw);
/*
 * Rail jobs and the initial port map (gpu_swaps.h): while its transaction
 * runs, ra_jobs_wait is true and the API holds SubmitJob and PlanJob;
 * settled(ctx) is called when it ended. Once it failed (or was never
 * programmed: fail static), ra_jobs_refused sets err FAILED_PRECONDITION
 * naming the reason and returns true. Followers (no swaps) never wait.
 */
void ra_on_map_settled(struct ra *ra, void (*settled)(void *ctx), void *ctx);
bool ra_jobs_wait(const struct ra *ra);
bool ra_jobs_refused(const struct ra *ra, struct err_info *err);
/* The swaps' events -> RailEvent and GpuEvent (pass as gsw_deps.events). */
struct gsw_events ra_events(struct ra *ra);

void ra_serve_replace(struct ra *ra, struct nb_call *call, const Ocs__V1__ReplaceGpuRequest *req);
void ra_serve_mark(struct ra *ra, struct nb_call *call, const Ocs__V1__MarkGpuRequest *req);
void ra_serve_list_ports(struct ra *ra, struct nb_call *call,
			 const Ocs__V1__ListRailPortsRequest *req);
/* The rail fields of GetFabric (kind, sizes, faulty GPUs). */
void ra_fill_fabric(const struct ra *ra, Ocs__V1__FabricSummary *r);
/* A rail job's GPUs now and its moves into m (allocated in ar). */
void ra_fill_job(const struct ra *ra, struct arena *ar, const struct jm_job *job, Ocs__V1__Job *m);

#endif
