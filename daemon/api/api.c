/*
 * api.c - implementation of api.h: the API's life (api_new, api_attach,
 * api_follow), request hand-off from gRPC threads to the loop and the
 * handler table, the Jobs service (protobuf <-> job manager conversions,
 * replies built in a per-request arena), the fabric limits and the jobs'
 * requests decoded at start. The Fabric service is in api_fabric.c, the
 * events in api_events.c, the shared messages in api_pb.c (api_internal.h).
 *
 * Return values left unchecked here, and why that is safe:
 *  - nb_call_reply() and api_fail[f]() always answer the call (a reply that
 *    cannot be sent is replaced by an error status); their result only says
 *    which happened.
 *  - mx_add() and mx_observe() fail only when a new label series cannot be
 *    allocated: one metric sample is lost, no daemon state.
 */
#include "api.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "arena.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "planners.h"
#include "rail_api.h"
#include "replica.h"
#include "rings.h"

#define API_CANCEL_CHECK_MS 100
/* Job requests held while a rail fabric's initial port map is programmed (rail_api.h). */
#define API_MAX_HELD 1024

/* Who a job manager answer goes to (freed by the answer). */
struct api_call {
	struct api *api;
	struct nb_call *call;
	char job_id[NB_ID_MAX_LEN + 1]; /* for the log line of the answer ("" none) */
};

/* Jobs per wave (ocsd_wave_jobs): powers of two up to well past JM_MAX_WAVE_JOBS. */
static const double wave_jobs_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

static struct api_call *new_call(struct api *api, struct nb_call *call)
{
	struct api_call *ac = malloc(sizeof(*ac));

	if (ac)
		*ac = (struct api_call){api, call, ""};
	else
		api_failf(call, ERR_INTERNAL, "", "out of memory");
	return ac;
}

/* A request travelling from a gRPC thread to the loop. */
struct api_req {
	struct api *api;
	struct nb_call *call;
	const void *msg;
	void (*serve)(struct api *api, struct nb_call *call, const void *msg);
	bool write; /* changes state or devices: only the leader serves it */
	struct loop_node node;
	struct api_req *next_held; /* api->held */
};

static void release_held(void *ctx);

struct api *api_new(const struct api_deps *deps)
{
	struct api *api = calloc(1, sizeof(*api));
	const char *const rpc_labels[] = {"method", "code", NULL};
	const char *const planner_label[] = {"planner", NULL};
	const char *const outcome_label[] = {"outcome", NULL};

	if (!api)
		return NULL;
	api->d = *deps;
	api->m_rpcs = mx_counter(deps->reg, "ocsd_rpc_requests_total",
				 "gRPC requests by method and status code.", rpc_labels);
	api->m_rpc_seconds = mx_histogram(deps->reg, "ocsd_rpc_duration_seconds",
					  "gRPC request latency by method and status code.",
					  rpc_labels, mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_plan_seconds =
		mx_histogram(deps->reg, "ocsd_plan_duration_seconds",
			     "Planning and realization time by planner.", planner_label,
			     mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_txns = mx_counter(deps->reg, "ocsd_transactions_total",
				 "Device transactions by outcome.", outcome_label);
	api->m_txn_seconds =
		mx_histogram(deps->reg, "ocsd_transaction_duration_seconds",
			     "Device transaction time, prepare to confirm or rollback.",
			     outcome_label, mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_rollbacks = mx_counter(deps->reg, "ocsd_rollbacks_total",
				      "Transactions rolled back on every device.", NULL);
	api->m_rollback_failures = mx_counter(deps->reg, "ocsd_rollback_failures_total",
					      "Devices whose rollback could not be proven.", NULL);
	if (!api->m_rpcs || !api->m_rpc_seconds || !api->m_plan_seconds || !api->m_txns ||
	    !api->m_txn_seconds || !api->m_rollbacks || !api->m_rollback_failures) {
		free(api);
		return NULL;
	}
	api->m_drift = mx_gauge(deps->reg, "ocsd_drift_cross_connects",
				"Cross-connects found by the last reconciliation that no job owns "
				"(unowned) or that a job owns but the device lacks (missing).",
				(const char *const[]){"kind", NULL});
	api->m_drift_bundles = mx_gauge(
		deps->reg, "ocsd_drift_bundles",
		"Ring domains: transceiver bundles the last reconciliation found differing from "
		"the ring state, on nodes of live rings (in_ring: programmed back at once) and "
		"on nodes in no ring (idle: reported, never changed).",
		(const char *const[]){"node", NULL});
	api->m_cabling = mx_gauge(
		deps->reg, "ocsd_cabling_miswired_ports",
		"Device ports (a Polatis ingress or egress port each) whose reported far end "
		"differs from the fabric file's wiring, not cleared by an operator: no circuit "
		"is placed on them.",
		NULL);
	api->m_unreachable = mx_gauge(deps->reg, "ocsd_devices_unreachable",
				      "Devices the last reconciliation could not read.", NULL);
	api->m_recon_seconds = mx_histogram(deps->reg, "ocsd_reconcile_duration_seconds",
					    "Time to read back every device.", NULL,
					    mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_circuit_repairs = mx_counter(
		deps->reg, "ocsd_circuit_repairs_total",
		"Cross-connects of live jobs found missing on the devices: programmed again "
		"(repaired), a repair that did not go through (failed), or not tried (blocked).",
		(const char *const[]){"outcome", NULL});
	api->m_repairs = mx_counter(deps->reg, "ocsd_ring_repairs_total",
				    "OCSTrx rings repaired after a node fault, by kind.",
				    (const char *const[]){"kind", NULL});
	api->m_reaction_seconds = mx_histogram(
		deps->reg, "ocsd_fault_reaction_seconds",
		"From a node fault reaching ocsd to the repaired ring confirmed on every node.",
		NULL, mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_waves = mx_counter(deps->reg, "ocsd_wave_transactions_total",
				  "Device transactions of waves (one for every job waiting: "
				  "jobs.c), each of one or more jobs.",
				  NULL);
	api->m_wave_jobs = mx_histogram(
		deps->reg, "ocsd_wave_jobs", "Jobs in each wave's device transaction.", NULL,
		wave_jobs_buckets, sizeof(wave_jobs_buckets) / sizeof(wave_jobs_buckets[0]));
	api->m_wave_wait_seconds =
		mx_histogram(deps->reg, "ocsd_wave_wait_seconds",
			     "Time a job waited for its wave, from queued to its transaction's "
			     "start.",
			     NULL, mx_latency_buckets_s, mx_latency_buckets_n);
	if (!api->m_drift || !api->m_drift_bundles || !api->m_cabling || !api->m_unreachable ||
	    !api->m_recon_seconds || !api->m_repairs || !api->m_reaction_seconds ||
	    !api->m_circuit_repairs || !api->m_waves || !api->m_wave_jobs ||
	    !api->m_wave_wait_seconds) {
		api_free(api);
		return NULL;
	}
	/* Counters exist from the start, at 0. */
	mx_add(api->m_rollbacks, NULL, 0);
	for (int i = 0; i < 3; i++)
		mx_add(api->m_circuit_repairs,
		       &(const char *[]){"repaired", "failed", "blocked"}[i], 0);
	mx_add(api->m_rollback_failures, NULL, 0);
	mx_add(api->m_waves, NULL, 0);
	api_cabling_gauge(api);
	if (deps->rail)
		ra_on_map_settled(deps->rail, release_held, api);
	return api;
}

void api_free(struct api *api)
{
	if (!api)
		return;
	if (api->cancel_check)
		event_free(api->cancel_check);
	free(api);
}

void api_attach(struct api *api, struct jm *jm, struct nb_server *server)
{
	api->jm = jm;
	api->server = server;
	if (api->d.rail)
		ra_attach(api->d.rail, server);
	if (server && jm && !jm_serving(jm, NULL))
		nb_server_set_health(
			server, "",
			GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
}

/* jm_cancel_gone's question: did the client of this call go away? */
static bool call_gone(void *ctx)
{
	return nb_call_cancelled(((const struct api_call *)ctx)->call);
}

static void on_cancel_check(evutil_socket_t fd, short what, void *arg);

static void arm_cancel_check(struct api *api)
{
	struct timeval tv = {0, API_CANCEL_CHECK_MS * 1000};

	if (!api->cancel_check)
		api->cancel_check = evtimer_new(loop_base(api->d.loop), on_cancel_check, api);
	/* Without the timer a gone caller's plan runs to its end: no worse than before. */
	if (api->cancel_check && !evtimer_pending(api->cancel_check, NULL))
		(void)evtimer_add(api->cancel_check, &tv);
}

static void on_cancel_check(evutil_socket_t fd, short what, void *arg)
{
	struct api *api = arg;

	(void)fd;
	(void)what;
	if (!api->jm)
		return;
	jm_cancel_gone(api->jm, call_gone);
	if (jm_answering(api->jm))
		arm_cancel_check(api);
}

void api_follow(struct api *api, struct jm *jm, struct fs_state *fs, struct devices *devs,
		struct rg_state *rings, struct ra *rail)
{
	api->d.fs = fs;
	api->d.devs = devs;
	api->d.rings = rings;
	api->d.rail = rail;
	api_attach(api, jm, api->server);
}

void api_stopping(struct api *api)
{
	api->stopping = true;
	release_held(api); /* answered UNAVAILABLE, before the server goes */
}

/* ---- Jobs ---- */

static Ocs__V1__PlanFigures *build_figures(struct arena *ar, const struct jm_figures *fig)
{
	Ocs__V1__PlanFigures *m = ar_alloc(ar, sizeof(*m));
	Ocs__V1__LeafPair **un =
		ar_alloc(ar, (fig->n_unplaced ? fig->n_unplaced : 1) * sizeof(*un));

	if (!m || !un)
		return NULL;
	ocs__v1__plan_figures__init(m);
	m->planner = ar_strdup(ar, fig->planner);
	m->links_requested = fig->links_requested;
	m->links_placed = fig->links_placed;
	m->circuits_new = fig->circuits_new;
	m->circuits_moved = fig->circuits_moved;
	m->max_contention = fig->max_contention;
	m->plan_duration_us = fig->plan_us;
	if (fig->has_delta) {
		m->makespan_ms = fig->delta.makespan_ms;
		m->critical_comm_ms = fig->delta.critical_comm_ms;
		m->nct = fig->delta.nct;
		m->ports_used = fig->delta.ports_used;
		m->ports_saved = fig->delta.ports_saved;
		m->generations = fig->delta.generations;
	}
	if (fig->has_ring) {
		Ocs__V1__RingFigures *rf = ar_alloc(ar, sizeof(*rf));

		if (!rf)
			return NULL;
		ocs__v1__ring_figures__init(rf);
		rf->orchestration = ar_strdup(ar, fig->ring.orchestration);
		rf->rings = fig->ring.rings;
		rf->nodes_per_ring = fig->ring.nodes_per_ring;
		rf->gpus_placed = fig->ring.gpus_placed;
		rf->gpus_wasted = fig->ring.gpus_wasted;
		rf->cross_tor_share = fig->ring.cross_tor_share;
		rf->constraints_kept = fig->ring.constraints_kept;
		rf->constraints_total = fig->ring.constraints_total;
		m->ring = rf;
	}
	for (size_t i = 0; i < fig->n_unplaced; i++) {
		un[i] = ar_alloc(ar, sizeof(**un));
		if (!un[i])
			return NULL;
		ocs__v1__leaf_pair__init(un[i]);
		un[i]->a = fig->unplaced[i].a;
		un[i]->b = fig->unplaced[i].b;
		un[i]->links = fig->unplaced[i].links;
	}
	m->unplaced = un;
	m->n_unplaced = fig->n_unplaced;
	if (fig->n_moved_jobs) {
		m->moved_jobs = ar_alloc(ar, fig->n_moved_jobs * sizeof(*m->moved_jobs));
		for (size_t i = 0; m->moved_jobs && i < fig->n_moved_jobs; i++)
			m->moved_jobs[i] = ar_strdup(ar, fig->moved_jobs[i]);
		m->n_moved_jobs = m->moved_jobs ? fig->n_moved_jobs : 0;
	}
	return m;
}

/*
 * A Job message. The spec is decoded from the stored request; *spec_out
 * must be freed with ocs__v1__job_spec__free_unpacked() after the reply.
 */
static Ocs__V1__Job *build_job(struct api *api, struct arena *ar, const struct jm_job *job,
			       Ocs__V1__JobSpec **spec_out)
{
	Ocs__V1__Job *m = ar_alloc(ar, sizeof(*m));
	struct fs_circuit *cs;
	size_t n = 0;

	*spec_out = NULL;
	if (!m)
		return NULL;
	ocs__v1__job__init(m);
	*spec_out = ocs__v1__job_spec__unpack(NULL, job->raw_len, job->raw);
	m->spec = *spec_out;
	m->state = api_job_state_pb(job->state);
	m->reason = ar_strdup(ar, job->reason);
	m->figures = build_figures(ar, &job->figures);
	m->created_unix_ms = job->created_ms;
	m->updated_unix_ms = job->updated_ms;
	if (job->is_ring && api->d.rings) {
		const struct rg_ring *rings = rg_job_rings(api->d.rings, job->id, &n);

		m->rings = api_build_rings(ar, rings, n);
		m->n_rings = m->rings ? n : 0;
		return ar->failed ? NULL : m;
	}
	if (api->d.rail) {
		ra_fill_job(api->d.rail, ar, job, m);
		return ar->failed ? NULL : m;
	}
	cs = fs_circuits(api->d.fs, job->id, -1, -1, &n);
	if (cs) {
		m->circuits = api_build_circuits(api, ar, cs, n);
		m->n_circuits = m->circuits ? n : 0;
		free(cs);
	}
	return ar->failed ? NULL : m;
}

/* The workload of a parallelism spec: 0 fields take their defaults. */
static struct jm_workload *workload_from_pb(const struct api *api, const Ocs__V1__JobSpec *pb)
{
	const Ocs__V1__ParallelismSpec *q = pb->parallelism;
	const Ocs__V1__Placement *pl = pb->placement;
	struct jm_workload *w = calloc(1, sizeof(*w));
	struct delta_workload_spec *d;

	if (!w)
		return NULL;
	w->n_gpus = pl ? pl->n_gpus : 0;
	w->gpus = malloc((w->n_gpus ? w->n_gpus : 1) * sizeof(*w->gpus));
	if (!w->gpus) {
		free(w);
		return NULL;
	}
	for (size_t i = 0; i < w->n_gpus; i++)
		w->gpus[i] = pl->gpus[i]->gpu;
	d = &w->spec;
	delta_workload_defaults(d);
	d->layers = q->layers;
	d->hidden = q->hidden;
	d->ffn = q->ffn;
	d->heads = q->heads;
	d->vocab = q->vocab;
	d->experts = q->experts;
	d->top_k = q->top_k;
	if (q->ffn_matrices)
		d->ffn_matrices = q->ffn_matrices;
	d->tp = q->tp;
	d->pp = q->pp;
	d->dp = q->dp;
	if (q->ep)
		d->ep = q->ep;
	if (q->expert_tp)
		d->etp = q->expert_tp;
	d->seq_len = q->seq_len;
	if (q->micro_batch)
		d->micro_batch = q->micro_batch;
	d->micro_batches = q->micro_batches;
	if (q->gpu_tflops > 0)
		d->gpu_tflops = q->gpu_tflops;
	if (q->efficiency > 0)
		d->efficiency = q->efficiency;
	d->bandwidth_gbps = q->bandwidth_gbps;
	if (q->intra_pod_gbps > 0)
		d->intra_pod_gbps = q->intra_pod_gbps;
	if (q->bytes_per_value)
		d->bytes_per_value = q->bytes_per_value;
	if (q->grad_bytes)
		d->grad_bytes = q->grad_bytes;
	d->gpus = (int)w->n_gpus;
	d->gpus_per_pod_per_replica = q->gpus_per_pod_per_replica;
	if (q->replicas_per_pod_set)
		d->replicas_per_pod_set = q->replicas_per_pod_set;
	d->first_pod = q->first_pod;
	d->fabric_pods = api->d.cfg->fabric.pods;
	delta_ga_defaults(&w->ga);
	if (q->seed)
		w->ga.seed = q->seed;
	if (q->max_generations)
		w->ga.max_generations = q->max_generations;
	if (q->stall_generations)
		w->ga.stall_generations = q->stall_generations;
	/* Every search ends within the ceiling (issue 14 #8), asked or not. */
	w->ga.time_budget_ms =
		q->time_budget_ms ? q->time_budget_ms : NB_PARALLELISM_MAX_TIME_BUDGET_MS;
	return w;
}

/* placement.gpus as a malloc'd array (NULL with *n 0 when none; NULL with
 * *n set on ENOMEM). */
static int64_t *placement_gpus(const Ocs__V1__JobSpec *pb, size_t *n)
{
	int64_t *gpus;

	*n = pb->placement ? pb->placement->n_gpus : 0;
	if (*n == 0)
		return NULL;
	gpus = malloc(*n * sizeof(*gpus));
	for (size_t i = 0; gpus && i < *n; i++)
		gpus[i] = pb->placement->gpus[i]->gpu;
	return gpus;
}

/* Converts a JobSpec; demand and workload are malloc'd (free_spec()). */
static int spec_from_pb(const struct api *api, const Ocs__V1__JobSpec *pb, struct jm_spec *spec,
			struct nb_error *err)
{
	struct lc_demand *demand;
	struct jm_workload *wl = NULL;
	struct jm_ring_request *ring = NULL;
	bool is_ring = pb->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && pb->ring;
	bool par = pb->demand_case == OCS__V1__JOB_SPEC__DEMAND_PARALLELISM && pb->parallelism;
	size_t n = pb->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND && pb->leaf_demand
			   ? pb->leaf_demand->n_pairs
			   : 0;
	size_t len = protobuf_c_message_get_packed_size(&pb->base), n_gpus;
	uint8_t *raw;
	int64_t *gpus;

	if (pb->demand_case != OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND && !par && !is_ring &&
	    !api->d.rail) {
		err->code = NB_INVALID_ARGUMENT;
		snprintf(err->field, sizeof(err->field), "demand");
		snprintf(err->message, sizeof(err->message),
			 "a leaf_demand, a parallelism spec or a ring request is required");
		return -EINVAL;
	}
	demand = malloc((n ? n : 1) * sizeof(*demand));
	raw = malloc(len ? len : 1);
	gpus = placement_gpus(pb, &n_gpus);
	if (par)
		wl = workload_from_pb(api, pb);
	if (is_ring && (ring = calloc(1, sizeof(*ring))) != NULL) {
		ring->tp = pb->ring->tp;
		ring->gpus = pb->ring->gpus;
		ring->rings = pb->ring->rings;
		snprintf(ring->orchestration, sizeof(ring->orchestration), "%s",
			 pb->ring->orchestration ? pb->ring->orchestration : "");
		ring->seed = pb->ring->seed;
	}
	if (!demand || !raw || (par && !wl) || (is_ring && !ring) || (n_gpus && !gpus)) {
		free(demand);
		free(raw);
		free(ring);
		free(gpus);
		jm_workload_free(wl);
		err->code = NB_INTERNAL;
		snprintf(err->message, sizeof(err->message), "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		demand[i] = (struct lc_demand){pb->leaf_demand->pairs[i]->a,
					       pb->leaf_demand->pairs[i]->b,
					       pb->leaf_demand->pairs[i]->links};
	protobuf_c_message_pack(&pb->base, raw);
	*spec = (struct jm_spec){.id = pb->id,
				 .idempotency_key = pb->idempotency_key,
				 .planner = pb->options ? pb->options->planner : NULL,
				 .allow_moving_other_jobs =
					 pb->options && pb->options->allow_moving_other_jobs,
				 .demand = demand,
				 .n_demand = n,
				 .workload = wl,
				 .ring = ring,
				 .raw = raw,
				 .raw_len = len,
				 .gpus = gpus,
				 .n_gpus = n_gpus,
				 .rail = api->d.rail != NULL};
	return 0;
}

static void free_spec(struct jm_spec *spec)
{
	free((void *)spec->ring);
	free((void *)spec->demand);
	jm_workload_free((struct jm_workload *)spec->workload);
	free((void *)spec->raw);
	free((void *)spec->gpus);
}

static void answer_job(struct api *api, struct nb_call *call, const struct err_info *err,
		       const struct jm_job *job, bool created, bool submit)
{
	struct arena ar = {0};
	Ocs__V1__JobSpec *spec = NULL;
	Ocs__V1__Job *m;

	if (err) {
		api_fail(call, err);
		return;
	}
	m = build_job(api, &ar, job, &spec);
	if (!m) {
		api_failf(call, ERR_INTERNAL, "", "out of memory building the reply");
	} else if (submit) {
		Ocs__V1__SubmitJobResponse r = OCS__V1__SUBMIT_JOB_RESPONSE__INIT;

		r.job = m;
		r.created = created;
		nb_call_reply(call, &r.base);
	} else if (nb_call_method(call) == NB_JOBS_RELEASE_JOB) {
		Ocs__V1__ReleaseJobResponse r = OCS__V1__RELEASE_JOB_RESPONSE__INIT;

		r.job = m;
		nb_call_reply(call, &r.base);
	} else {
		Ocs__V1__GetJobResponse r = OCS__V1__GET_JOB_RESPONSE__INIT;

		r.job = m;
		nb_call_reply(call, &r.base);
	}
	if (spec)
		ocs__v1__job_spec__free_unpacked(spec, NULL);
	ar_free_all(&ar);
}

static void answer_submit(void *ctx, const struct err_info *err, const struct jm_job *job,
			  bool created, const struct ocs_xc *xcs, size_t n)
{
	struct api_call *ac = ctx;

	if (err)
		log_job(LOG_WARNING, ac->job_id, nb_call_peer(ac->call),
			"job not submitted: %s%s%s", err->field, err->field[0] ? ": " : "",
			err->message);
	else
		log_job(job->state == JM_FAILED ? LOG_WARNING : LOG_NOTICE, job->id,
			nb_call_peer(ac->call), "job %s%s%s%s", jm_state_name(job->state),
			created ? "" : " (submitted before)", job->reason[0] ? ": " : "",
			job->reason);
	answer_job(ac->api, ac->call, err, job, created, true);
	free(ac);
}

static void answer_other(void *ctx, const struct err_info *err, const struct jm_job *job,
			 bool created, const struct ocs_xc *xcs, size_t n)
{
	struct api_call *ac = ctx;

	answer_job(ac->api, ac->call, err, job, created, false);
	free(ac);
}

/* Decodes a JobSpec and hands it to jm_submit or jm_plan (same signature). */
static void serve_spec(struct api *api, struct nb_call *call, const void *msg,
		       void (*run)(struct jm *, const struct jm_spec *, jm_answer_fn, void *),
		       jm_answer_fn answer)
{
	struct jm_spec spec;
	struct nb_error err = {0};
	struct err_info refusal = {0};
	struct api_call *ac;

	if (api->d.rail && ra_jobs_refused(api->d.rail, &refusal)) {
		if (run == jm_submit)
			log_job(LOG_WARNING, ((const Ocs__V1__JobSpec *)msg)->id,
				nb_call_peer(call), "job not submitted: %s: %s", refusal.field,
				refusal.message);
		api_fail(call, &refusal);
		return;
	}
	if (spec_from_pb(api, msg, &spec, &err) != 0) {
		if (run == jm_submit)
			log_job(LOG_WARNING, ((const Ocs__V1__JobSpec *)msg)->id,
				nb_call_peer(call), "job not submitted: %s%s%s", err.field,
				err.field[0] ? ": " : "", err.message);
		nb_call_fail_error(call, &err);
		return;
	}
	ac = new_call(api, call);
	if (ac && run == jm_submit) {
		snprintf(ac->job_id, sizeof(ac->job_id), "%s", ((const Ocs__V1__JobSpec *)msg)->id);
		log_job(LOG_INFO, ac->job_id, nb_call_peer(call), "job submitted (planner %s)",
			spec.planner && spec.planner[0] ? spec.planner : "default");
	}
	if (ac) {
		run(api->jm, &spec, answer, ac);
		if (jm_answering(api->jm))
			arm_cancel_check(api);
	}
	free_spec(&spec);
}

static void serve_submit(struct api *api, struct nb_call *call, const void *msg)
{
	serve_spec(api, call, msg, jm_submit, answer_submit);
}

static void answer_plan(void *ctx, const struct err_info *err, const struct jm_job *job,
			bool created, const struct ocs_xc *xcs, size_t n_xcs)
{
	struct api_call *ac = ctx;
	struct nb_call *call = ac->call;
	struct api *api = ac->api;
	Ocs__V1__PlanJobResponse r = OCS__V1__PLAN_JOB_RESPONSE__INIT;
	struct fs_state *tmp = NULL;
	struct fs_circuit *cs = NULL;
	struct st_circuit *adds = NULL;
	struct arena ar = {0};
	size_t n = 0;

	free(ac);
	if (err) {
		api_fail(call, err);
		return;
	}
	if (job->is_ring) {
		r.figures = build_figures(&ar, &job->figures);
		r.rings = api_build_rings(&ar, job->plan_rings, job->n_plan_rings);
		r.n_rings = r.rings ? job->n_plan_rings : 0;
		api_reply(call, &r.base, ar.failed);
		ar_free_all(&ar);
		return;
	}
	/* Pair the plan's cross-connects into circuits, as for running jobs. */
	tmp = fs_new(&api->d.cfg->fabric);
	adds = calloc(n_xcs ? n_xcs : 1, sizeof(*adds));
	if (tmp && adds) {
		for (size_t i = 0; i < n_xcs; i++)
			adds[i].xc = xcs[i];
		if (fs_apply(tmp, NULL, 0, adds, n_xcs) == 0)
			cs = fs_circuits(tmp, NULL, -1, -1, &n);
	}
	r.figures = build_figures(&ar, &job->figures);
	if (cs) {
		r.circuits = api_build_circuits(api, &ar, cs, n);
		r.n_circuits = r.circuits ? n : 0;
	}
	api_reply(call, &r.base, !cs || ar.failed);
	free(cs);
	free(adds);
	fs_free(tmp);
	ar_free_all(&ar);
}

static void serve_plan(struct api *api, struct nb_call *call, const void *msg)
{
	serve_spec(api, call, msg, jm_plan, answer_plan);
}

static void answer_release(void *ctx, const struct err_info *err, const struct jm_job *job,
			   bool created, const struct ocs_xc *xcs, size_t n)
{
	struct api_call *ac = ctx;

	if (err)
		log_job(LOG_WARNING, ac->job_id, nb_call_peer(ac->call), "job not released: %s%s%s",
			err->field, err->field[0] ? ": " : "", err->message);
	else
		log_job(LOG_NOTICE, job->id, nb_call_peer(ac->call), "job %s after release%s%s",
			jm_state_name(job->state), job->reason[0] ? ": " : "", job->reason);
	answer_other(ctx, err, job, created, xcs, n);
}

static void serve_release(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ReleaseJobRequest *req = msg;
	struct api_call *ac = new_call(api, call);

	if (!ac)
		return;
	snprintf(ac->job_id, sizeof(ac->job_id), "%s", req->id);
	log_job(LOG_INFO, req->id, nb_call_peer(call), "job release requested");
	jm_release(api->jm, req->id, answer_release, ac);
}

static void serve_get_job(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__GetJobRequest *req = msg;
	const struct jm_job *job = jm_find(api->jm, req->id);
	struct err_info err = {ERR_NOT_FOUND, "id", ""};

	if (!job) {
		snprintf(err.message, sizeof(err.message), "no job %s", req->id);
		api_fail(call, &err);
		return;
	}
	answer_job(api, call, NULL, job, false, false);
}

static int cmp_job_id(const void *a, const void *b)
{
	const struct jm_job *const *x = a, *const *y = b;

	return strcmp((*x)->id, (*y)->id);
}

/*
 * The page of jobs after the token, in id order (issue 14 #5): the jobs
 * that pass the filter are sorted by id, and only the page is built, so a
 * page costs a scan of the ids whatever the number of jobs.
 */
static void serve_list_jobs(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ListJobsRequest *req = msg;
	Ocs__V1__ListJobsResponse r = OCS__V1__LIST_JOBS_RESPONSE__INIT;
	size_t n = jm_count(api->jm), n_cand = 0;
	size_t page = nb_page_size(NB_JOBS_LIST_JOBS, req->page_size);
	const char *after = nb_jobs_token_after(req->page_token);
	const struct jm_job **cand = malloc((n ? n : 1) * sizeof(*cand));
	Ocs__V1__JobSpec **specs = calloc(page, sizeof(*specs));
	char token[NB_PAGE_TOKEN_MAX_LEN + 1];
	struct arena ar = {0};

	for (size_t i = 0; cand && i < n; i++) {
		const struct jm_job *job = jm_at(api->jm, i);

		if (req->state != OCS__V1__JOB_STATE__JOB_STATE_UNSPECIFIED &&
		    req->state != api_job_state_pb(job->state))
			continue;
		if (after && strcmp(job->id, after) <= 0)
			continue;
		cand[n_cand++] = job;
	}
	if (cand)
		qsort(cand, n_cand, sizeof(*cand), cmp_job_id);
	if (n_cand < page)
		page = n_cand;
	r.jobs = ar_alloc(&ar, (page ? page : 1) * sizeof(*r.jobs));
	for (size_t i = 0; cand && specs && r.jobs && i < page; i++) {
		r.jobs[r.n_jobs] = build_job(api, &ar, cand[i], &specs[i]);
		if (r.jobs[r.n_jobs])
			r.n_jobs++;
	}
	if (cand && page < n_cand) {
		nb_jobs_token(cand[page - 1]->id, token, sizeof(token));
		r.next_page_token = token;
	}
	api_reply(call, &r.base, !cand || !specs || ar.failed);
	for (size_t i = 0; specs && i < page; i++)
		if (specs[i])
			ocs__v1__job_spec__free_unpacked(specs[i], NULL);
	free(specs);
	free(cand);
	ar_free_all(&ar);
}

/* ---- hand-off from gRPC threads ---- */

static struct api_req *hold(struct api_req *r);

/* A job request on a rail fabric whose initial port map is being programmed. */
static bool waits_for_rails(const struct api_req *r)
{
	return (r->serve == serve_submit || r->serve == serve_plan) && r->api->d.rail &&
	       ra_jobs_wait(r->api->d.rail);
}

static void dispatch(struct loop_node *n)
{
	struct api_req *r = OCSD_CONTAINER_OF(n, struct api_req, node);
	char why[800];

	/* a follower, or a leader whose etcd cannot be reached (replica.h) */
	if (r->write && r->api->d.rp && rp_write_refusal(r->api->d.rp, why, sizeof(why)) != 0)
		api_failf(r->call, ERR_UNAVAILABLE, "", "%s", why);
	else if (r->api->stopping || !r->api->jm)
		api_failf(r->call, ERR_UNAVAILABLE, "", "ocsd is shutting down");
	else if (waits_for_rails(r))
		r = hold(r);
	else
		r->serve(r->api, r->call, r->msg);
	free(r);
}

/*
 * A job request that came while the rail port map is programmed waits for
 * it (its request stays valid until the call is answered: nb.h), in order;
 * release_held serves them once it ended, or refuses them when ocsd stops.
 * Returns NULL when r waits, else r, answered (the caller frees it).
 */
static struct api_req *hold(struct api_req *r)
{
	struct api *api = r->api;

	if (api->n_held >= API_MAX_HELD) {
		api_failf(r->call, ERR_UNAVAILABLE, "",
			  "the rail port map is being programmed and %d job requests wait for it "
			  "already; try again",
			  API_MAX_HELD);
		return r;
	}
	if (api->n_held == 0)
		log_msg(LOG_INFO, "job requests wait until the rail port map is programmed");
	r->next_held = NULL;
	*(api->held_tail ? &api->held_tail->next_held : &api->held) = r;
	api->held_tail = r;
	api->n_held++;
	return NULL;
}

static void release_held(void *ctx)
{
	struct api *api = ctx;
	struct api_req *r = api->held, *next;

	api->held = api->held_tail = NULL;
	api->n_held = 0;
	for (; r; r = next) {
		next = r->next_held;
		dispatch(&r->node);
	}
}

static void post(struct api *api, struct nb_call *call, const void *msg,
		 void (*serve)(struct api *, struct nb_call *, const void *), bool write)
{
	struct api_req *r = malloc(sizeof(*r));

	if (!r) {
		api_failf(call, ERR_UNAVAILABLE, "", "out of memory");
		return;
	}
	*r = (struct api_req){api, call, msg, serve, write, {NULL, NULL}, NULL};
	loop_post(api->d.loop, &r->node, dispatch);
}

#define HANDLER(name, type, serve_fn)                                                              \
	static void name(void *ctx, struct nb_call *call, const type *req)                         \
	{                                                                                          \
		post(ctx, call, req, serve_fn, false);                                             \
	}
/* A write (or a plan, which needs the leader's planners and state). */
#define WRITE_HANDLER(name, type, serve_fn)                                                        \
	static void name(void *ctx, struct nb_call *call, const type *req)                         \
	{                                                                                          \
		post(ctx, call, req, serve_fn, true);                                              \
	}

HANDLER(h_list_drift, Ocs__V1__ListDriftRequest, api_serve_list_drift)
WRITE_HANDLER(h_adopt, Ocs__V1__AdoptCrossConnectsRequest, api_serve_adopt)
WRITE_HANDLER(h_clear, Ocs__V1__ClearCrossConnectsRequest, api_serve_clear)
HANDLER(h_get_fabric, Ocs__V1__GetFabricRequest, api_serve_get_fabric)
HANDLER(h_list_devices, Ocs__V1__ListDevicesRequest, api_serve_list_devices)
HANDLER(h_list_circuits, Ocs__V1__ListCircuitsRequest, api_serve_list_circuits)
WRITE_HANDLER(h_drain_device, Ocs__V1__DrainDeviceRequest, api_serve_drain_device)
WRITE_HANDLER(h_undrain_device, Ocs__V1__UndrainDeviceRequest, api_serve_undrain_device)
WRITE_HANDLER(h_mark_node, Ocs__V1__MarkNodeRequest, api_serve_mark_node)
HANDLER(h_list_rings, Ocs__V1__ListRingsRequest, api_serve_list_rings)
WRITE_HANDLER(h_replace_gpu, Ocs__V1__ReplaceGpuRequest, api_serve_replace_gpu)
WRITE_HANDLER(h_mark_gpu, Ocs__V1__MarkGpuRequest, api_serve_mark_gpu)
HANDLER(h_list_rail_ports, Ocs__V1__ListRailPortsRequest, api_serve_list_rail_ports)
HANDLER(h_list_cabling, Ocs__V1__ListCablingRequest, api_serve_list_cabling)
WRITE_HANDLER(h_clear_cabling, Ocs__V1__ClearCablingRequest, api_serve_clear_cabling)
WRITE_HANDLER(h_submit_job, Ocs__V1__JobSpec, serve_submit)
WRITE_HANDLER(h_plan_job, Ocs__V1__JobSpec, serve_plan)
WRITE_HANDLER(h_release_job, Ocs__V1__ReleaseJobRequest, serve_release)
HANDLER(h_get_job, Ocs__V1__GetJobRequest, serve_get_job)
HANDLER(h_list_jobs, Ocs__V1__ListJobsRequest, serve_list_jobs)

struct rpc_done {
	struct api *api;
	enum nb_method method;
	enum nb_code code;
	uint64_t duration_us;
	struct loop_node node;
};

static void record_rpc(struct loop_node *n)
{
	struct rpc_done *d = OCSD_CONTAINER_OF(n, struct rpc_done, node);
	const char *labels[] = {nb_method_name(d->method), nb_code_name(d->code)};

	mx_add(d->api->m_rpcs, labels, 1);
	mx_observe(d->api->m_rpc_seconds, labels, (double)d->duration_us / 1e6);
	free(d);
}

static void h_call_done(void *ctx, enum nb_method method, enum nb_code code, uint64_t duration_us)
{
	struct rpc_done *d = malloc(sizeof(*d));

	if (!d)
		return;
	*d = (struct rpc_done){ctx, method, code, duration_us, {NULL, NULL}};
	loop_post(((struct api *)ctx)->d.loop, &d->node, record_rpc);
}

/* From gRPC's threads, under the server's lock (nb.h): a leader whose
 * lease may have ended does not serve writes, even before it noticed. */
static bool h_serving_now(void *ctx, const char *service)
{
	struct api *api = ctx;

	return !api->d.rp || strcmp(service, "ocs.v1.Jobs") != 0 || rp_leads_surely(api->d.rp);
}

struct nb_handlers api_handlers(struct api *api)
{
	return (struct nb_handlers){
		.ctx = api,
		.get_fabric = h_get_fabric,
		.list_devices = h_list_devices,
		.list_circuits = h_list_circuits,
		.drain_device = h_drain_device,
		.undrain_device = h_undrain_device,
		.mark_node = h_mark_node,
		.list_rings = h_list_rings,
		.list_drift = h_list_drift,
		.adopt_cross_connects = h_adopt,
		.clear_cross_connects = h_clear,
		.replace_gpu = api->d.rail ? h_replace_gpu : NULL,
		.mark_gpu = api->d.rail ? h_mark_gpu : NULL,
		.list_rail_ports = api->d.rail ? h_list_rail_ports : NULL,
		.list_cabling = h_list_cabling,
		.clear_cabling = h_clear_cabling,
		.submit_job = h_submit_job,
		.plan_job = h_plan_job,
		.release_job = h_release_job,
		.get_job = h_get_job,
		.list_jobs = h_list_jobs,
		.call_done = h_call_done,
		.serving_now = h_serving_now,
	};
}

_Static_assert(OCS_PLANNER_COUNT <= NB_PLANNERS_MAX, "nb_limits holds every planner");

struct nb_limits api_limits(const struct ocsd_config *cfg)
{
	const struct ocs_fabric *f = &cfg->fabric;
	struct nb_limits l = {0};
	const struct ocs_planner *p;

	if (cfg->kind == CFG_OCSTRX_RING) {
		l.kind = NB_FABRIC_OCSTRX_RING;
		l.groups = 1; /* ListDevices: every node's agent is in group 0 */
		l.ring = (struct nb_ring_limits){ocs_ring_nodes(&cfg->ring),
						 cfg->ring.gpus_per_node};
	} else if (cfg->kind == CFG_RAIL_OCS) {
		l.kind = NB_FABRIC_RAIL_OCS;
		l.groups = ocs_rail_groups(&cfg->rail); /* one device per OCS group */
		l.rail = (struct nb_rail_limits){cfg->rail.servers, cfg->rail.rails};
	} else {
		l.pods = f->pods;
		l.leaves_per_pod = ocs_fabric_leaves_per_pod(f);
		l.gpus_per_leaf = f->k_leaf;
		l.groups = ocs_fabric_groups(f);
	}

	/* Every planner ocsd serves, from the solvers' catalogue (static names). */
	for (size_t i = 0; (p = ocs_planner_at(i)) != NULL; i++)
		l.planners[l.n_planners++] = (struct nb_planner){
			.name = p->name,
			.takes_parallelism = p->demand == OCS_PLANNER_PARALLELISM,
		};
	return l;
}

int api_restore_job(struct api *api, const char *id)
{
	const struct jm_job *job = jm_find(api->jm, id);
	Ocs__V1__JobSpec *pb = job ? ocs__v1__job_spec__unpack(NULL, job->raw_len, job->raw) : NULL;
	struct jm_spec spec;
	struct nb_error err;
	int rc;

	if (!pb)
		return 0; /* jm_recover fails jobs without a demand */
	rc = spec_from_pb(api, pb, &spec, &err);
	if (rc == 0 && spec.ring) {
		rc = jm_set_ring(api->jm, id, spec.ring);
		free_spec(&spec);
	} else if (rc == 0 && spec.rail) {
		/* a rail job is its GPUs (the swaps' moves are applied by gpu_swaps.c) */
		rc = jm_set_gpus(api->jm, id, spec.gpus, spec.n_gpus);
		free_spec(&spec);
	} else if (rc == 0) {
		rc = jm_set_demand(api->jm, id, spec.planner, spec.allow_moving_other_jobs,
				   spec.demand, spec.n_demand, spec.workload);
		if (rc == 0)
			rc = jm_set_gpus(api->jm, id, spec.gpus, spec.n_gpus);
		free_spec(&spec);
	}
	ocs__v1__job_spec__free_unpacked(pb, NULL);
	return rc == -ENOMEM ? rc : 0;
}

int api_restore_jobs(struct api *api)
{
	int rc = dev_restore_drained(api->d.devs);

	for (size_t i = 0; rc == 0 && i < jm_count(api->jm); i++)
		rc = api_restore_job(api, jm_at(api->jm, i)->id);
	return rc;
}
