/*
 * api.c - implementation of api.h: request hand-off to the loop, protobuf
 * <-> job manager conversions, replies built in a per-request arena.
 *
 * Return values left unchecked here, and why that is safe:
 *  - nb_call_reply() and nb_call_fail() always answer the call (a reply that
 *    cannot be sent is replaced by an error status); their result only says
 *    which happened.
 *  - nb_server_publish() returns the sequence number stamped on the event;
 *    a subscriber too far behind is ended by the northbound itself.
 *  - mx_add(), mx_set() and mx_observe() fail only when a new label series
 *    cannot be allocated: one metric sample is lost, no daemon state.
 */
#include "api.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt.h"
#include "arena.h"
#include "clock.h"
#include "config.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "planners.h"
#include "rail_api.h"
#include "replica.h"
#include "rings.h"
#include "store.h"

struct api {
	struct api_deps d;
	struct jm *jm;
	struct nb_server *server;
	bool stopping;
	struct mx_family *m_rpcs, *m_rpc_seconds, *m_plan_seconds, *m_txns, *m_txn_seconds;
	struct mx_family *m_rollbacks, *m_rollback_failures, *m_drift, *m_unreachable;
	struct mx_family *m_recon_seconds;
	struct mx_family *m_repairs, *m_reaction_seconds; /* ring domains */
	size_t drift_published;				  /* in the current pass */
	/* While plans whose caller may go away wait: every API_CANCEL_CHECK_MS,
	 * the ones whose call was cancelled (or passed its deadline) stop. */
	struct event *cancel_check;
};

#define API_CANCEL_CHECK_MS 100

/* Who a job manager answer goes to (freed by the answer). */
struct api_call {
	struct api *api;
	struct nb_call *call;
	char job_id[NB_ID_MAX_LEN + 1]; /* for the log line of the answer ("" none) */
};

static struct api_call *new_call(struct api *api, struct nb_call *call)
{
	struct api_call *ac = malloc(sizeof(*ac));

	if (ac)
		*ac = (struct api_call){api, call, ""};
	else
		nb_call_fail(call, NB_INTERNAL, "", "out of memory");
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
};

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
	api->m_unreachable = mx_gauge(deps->reg, "ocsd_devices_unreachable",
				      "Devices the last reconciliation could not read.", NULL);
	api->m_recon_seconds = mx_histogram(deps->reg, "ocsd_reconcile_duration_seconds",
					    "Time to read back every device.", NULL,
					    mx_latency_buckets_s, mx_latency_buckets_n);
	api->m_repairs = mx_counter(deps->reg, "ocsd_ring_repairs_total",
				    "OCSTrx rings repaired after a node fault, by kind.",
				    (const char *const[]){"kind", NULL});
	api->m_reaction_seconds = mx_histogram(
		deps->reg, "ocsd_fault_reaction_seconds",
		"From a node fault reaching ocsd to the repaired ring confirmed on every node.",
		NULL, mx_latency_buckets_s, mx_latency_buckets_n);
	if (!api->m_drift || !api->m_unreachable || !api->m_recon_seconds || !api->m_repairs ||
	    !api->m_reaction_seconds) {
		api_free(api);
		return NULL;
	}
	/* Counters exist from the start, at 0. */
	mx_add(api->m_rollbacks, NULL, 0);
	mx_add(api->m_rollback_failures, NULL, 0);
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
}

/* ---- the daemon's enums in the API, each mapped once ---- */

static Ocs__V1__JobState job_state_pb(enum jm_state s)
{
	switch (s) {
	case JM_PENDING:
		return OCS__V1__JOB_STATE__JOB_STATE_PENDING;
	case JM_PLANNING:
		return OCS__V1__JOB_STATE__JOB_STATE_PLANNING;
	case JM_PROGRAMMING:
		return OCS__V1__JOB_STATE__JOB_STATE_PROGRAMMING;
	case JM_ACTIVE:
		return OCS__V1__JOB_STATE__JOB_STATE_ACTIVE;
	case JM_RELEASING:
		return OCS__V1__JOB_STATE__JOB_STATE_RELEASING;
	case JM_RELEASED:
		return OCS__V1__JOB_STATE__JOB_STATE_RELEASED;
	case JM_FAILED:
		return OCS__V1__JOB_STATE__JOB_STATE_FAILED;
	}
	return OCS__V1__JOB_STATE__JOB_STATE_UNSPECIFIED;
}

/* The `outcome` label of the transaction metrics. */
static const char *txn_result_label(enum txn_result r)
{
	switch (r) {
	case TXN_CONFIRMED:
		return "committed";
	case TXN_REFUSED:
		return "refused";
	case TXN_ROLLED_BACK:
		return "rolled_back";
	case TXN_FAILED:
		return "failed";
	}
	return "failed";
}

static Ocs__V1__TransactionOutcome txn_result_pb(enum txn_result r)
{
	switch (r) {
	case TXN_CONFIRMED:
		return OCS__V1__TRANSACTION_OUTCOME__TRANSACTION_OUTCOME_COMMITTED;
	case TXN_REFUSED:
	case TXN_ROLLED_BACK:
		return OCS__V1__TRANSACTION_OUTCOME__TRANSACTION_OUTCOME_ROLLED_BACK;
	case TXN_FAILED:
		return OCS__V1__TRANSACTION_OUTCOME__TRANSACTION_OUTCOME_ROLLBACK_FAILED;
	}
	return OCS__V1__TRANSACTION_OUTCOME__TRANSACTION_OUTCOME_UNSPECIFIED;
}

static enum nb_code map_status(enum jm_status s)
{
	switch (s) {
	case JM_OK:
		return NB_OK;
	case JM_INVALID:
		return NB_INVALID_ARGUMENT;
	case JM_NOT_FOUND:
		return NB_NOT_FOUND;
	case JM_EXISTS:
		return NB_ALREADY_EXISTS;
	case JM_EXHAUSTED:
		return NB_RESOURCE_EXHAUSTED;
	case JM_PRECONDITION:
		return NB_FAILED_PRECONDITION;
	case JM_UNAVAILABLE:
		return NB_UNAVAILABLE;
	case JM_ABORTED:
		return NB_ABORTED;
	case JM_CANCELLED:
		return NB_CANCELLED;
	case JM_INTERNAL:
		break;
	}
	return NB_INTERNAL;
}

static void fail_jm(struct nb_call *call, const struct jm_error *err)
{
	nb_call_fail(call, map_status(err->status), err->field, "%s", err->message);
}

void api_fail(struct nb_call *call, const struct jm_error *err)
{
	fail_jm(call, err);
}

/* ---- building replies ---- */

static const char *device_name(const struct api *api, const struct ocs_xc *xc)
{
	int id = ocs_fabric_device_id(&api->d.cfg->fabric, xc->group, xc->device);

	return id >= 0 && id < api->d.cfg->n_devices ? api->d.cfg->devices[id].name : "?";
}

static Ocs__V1__CrossConnect *build_xc(struct api *api, struct arena *ar, const struct ocs_xc *xc)
{
	Ocs__V1__CrossConnect *m = ar_alloc(ar, sizeof(*m));

	if (!m)
		return NULL;
	ocs__v1__cross_connect__init(m);
	m->device = (char *)device_name(api, xc);
	m->in_port = xc->in;
	m->out_port = xc->out;
	return m;
}

static Ocs__V1__Circuit **build_circuits(struct api *api, struct arena *ar,
					 const struct fs_circuit *cs, size_t n)
{
	Ocs__V1__Circuit **out = ar_alloc(ar, (n ? n : 1) * sizeof(*out));

	for (size_t i = 0; out && i < n; i++) {
		Ocs__V1__Circuit *c = ar_alloc(ar, sizeof(*c));
		Ocs__V1__CrossConnect **xcs = ar_alloc(ar, 2 * sizeof(*xcs));

		if (!c || !xcs)
			return NULL;
		ocs__v1__circuit__init(c);
		c->job_id = ar_strdup(ar, cs[i].job_id ? cs[i].job_id : "");
		c->group = cs[i].a.h;
		c->pod_a = cs[i].a.pod;
		c->port_a = cs[i].a.k;
		c->pod_b = cs[i].b.pod;
		c->port_b = cs[i].b.k;
		xcs[0] = build_xc(api, ar, &cs[i].xc_ab);
		c->n_cross_connects = 1;
		if (cs[i].complete) {
			xcs[1] = build_xc(api, ar, &cs[i].xc_ba);
			c->n_cross_connects = 2;
		}
		c->cross_connects = xcs;
		out[i] = c;
	}
	return out;
}

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

static Ocs__V1__RingChange ring_change_pb(enum rg_change c)
{
	switch (c) {
	case RG_PLACED:
		return OCS__V1__RING_CHANGE__RING_CHANGE_PLACED;
	case RG_BYPASSED:
		return OCS__V1__RING_CHANGE__RING_CHANGE_BYPASSED;
	case RG_REPLACED:
		return OCS__V1__RING_CHANGE__RING_CHANGE_REPLACED;
	case RG_LOST:
		return OCS__V1__RING_CHANGE__RING_CHANGE_LOST;
	case RG_RELEASED:
		return OCS__V1__RING_CHANGE__RING_CHANGE_RELEASED;
	}
	return OCS__V1__RING_CHANGE__RING_CHANGE_UNSPECIFIED;
}

/* A Ring message (allocated in ar; NULL when it runs out). */
static Ocs__V1__Ring *build_ring(struct arena *ar, const struct rg_ring *r)
{
	Ocs__V1__Ring *m = ar_alloc(ar, sizeof(*m));
	int32_t *nodes = ar_alloc(ar, (size_t)(r->m ? r->m : 1) * sizeof(*nodes));

	if (!m || !nodes)
		return NULL;
	ocs__v1__ring__init(m);
	m->job_id = ar_strdup(ar, r->job_id);
	m->index = r->index;
	for (int k = 0; k < r->m; k++)
		nodes[k] = r->nodes[k];
	m->nodes = nodes;
	m->n_nodes = (size_t)r->m;
	m->last_change = ring_change_pb(r->last_change);
	m->failed_node = r->failed_node;
	m->reason = ar_strdup(ar, r->reason);
	return m;
}

static Ocs__V1__Ring **build_rings(struct arena *ar, const struct rg_ring *r, size_t n)
{
	Ocs__V1__Ring **v = ar_alloc(ar, (n ? n : 1) * sizeof(*v));

	for (size_t i = 0; v && i < n; i++)
		if (!(v[i] = build_ring(ar, &r[i])))
			return NULL;
	return v;
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
	m->state = job_state_pb(job->state);
	m->reason = ar_strdup(ar, job->reason);
	m->figures = build_figures(ar, &job->figures);
	m->created_unix_ms = job->created_ms;
	m->updated_unix_ms = job->updated_ms;
	if (job->is_ring && api->d.rings) {
		const struct rg_ring *rings = rg_job_rings(api->d.rings, job->id, &n);

		m->rings = build_rings(ar, rings, n);
		m->n_rings = m->rings ? n : 0;
		return ar->failed ? NULL : m;
	}
	if (api->d.rail) {
		ra_fill_job(api->d.rail, ar, job, m);
		return ar->failed ? NULL : m;
	}
	cs = fs_circuits(api->d.fs, job->id, -1, -1, &n);
	if (cs) {
		m->circuits = build_circuits(api, ar, cs, n);
		m->n_circuits = m->circuits ? n : 0;
		free(cs);
	}
	return ar->failed ? NULL : m;
}

/* ---- Jobs ---- */

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

static void answer_job(struct api *api, struct nb_call *call, const struct jm_error *err,
		       const struct jm_job *job, bool created, bool submit)
{
	struct arena ar = {0};
	Ocs__V1__JobSpec *spec = NULL;
	Ocs__V1__Job *m;

	if (err) {
		fail_jm(call, err);
		return;
	}
	m = build_job(api, &ar, job, &spec);
	if (!m) {
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
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

static void answer_submit(void *ctx, const struct jm_error *err, const struct jm_job *job,
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

static void answer_other(void *ctx, const struct jm_error *err, const struct jm_job *job,
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
	struct api_call *ac;

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

static void answer_plan(void *ctx, const struct jm_error *err, const struct jm_job *job,
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
		fail_jm(call, err);
		return;
	}
	if (job->is_ring) {
		r.figures = build_figures(&ar, &job->figures);
		r.rings = build_rings(&ar, job->plan_rings, job->n_plan_rings);
		r.n_rings = r.rings ? job->n_plan_rings : 0;
		if (ar.failed)
			nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
		else
			nb_call_reply(call, &r.base);
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
		r.circuits = build_circuits(api, &ar, cs, n);
		r.n_circuits = r.circuits ? n : 0;
	}
	if (!cs || ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	free(cs);
	free(adds);
	fs_free(tmp);
	ar_free_all(&ar);
}

static void serve_plan(struct api *api, struct nb_call *call, const void *msg)
{
	serve_spec(api, call, msg, jm_plan, answer_plan);
}

static void answer_release(void *ctx, const struct jm_error *err, const struct jm_job *job,
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
	struct jm_error err = {JM_NOT_FOUND, "id", ""};

	if (!job) {
		snprintf(err.message, sizeof(err.message), "no job %s", req->id);
		fail_jm(call, &err);
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
		    req->state != job_state_pb(job->state))
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
	if (!cand || !specs || ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	for (size_t i = 0; specs && i < page; i++)
		if (specs[i])
			ocs__v1__job_spec__free_unpacked(specs[i], NULL);
	free(specs);
	free(cand);
	ar_free_all(&ar);
}

/* ---- Fabric ---- */

/*
 * GetFabric's replica fields (41-46) and the store's name, from the
 * replica's status (replica.h); the strings live in ar.
 */
static void fill_replica(struct api *api, struct arena *ar, Ocs__V1__FabricSummary *r)
{
	struct rp_status st;

	r->store = (char *)api->d.store;
	if (!api->d.rp)
		return;
	rp_status(api->d.rp, &st);
	r->replica_id = ar_strdup(ar, st.replica_id);
	r->role = ar_strdup(ar, st.role);
	r->leader_id = ar_strdup(ar, st.leader_id);
	r->leader_address = ar_strdup(ar, st.leader_address);
	r->store_problem = ar_strdup(ar, st.store_problem);
	r->replicas =
		ar_alloc(ar, (size_t)(st.n_replicas ? st.n_replicas : 1) * sizeof(*r->replicas));
	for (int i = 0; r->replicas && i < st.n_replicas; i++) {
		Ocs__V1__Replica *m = ar_alloc(ar, sizeof(*m));

		if (!m)
			break;
		ocs__v1__replica__init(m);
		m->id = ar_strdup(ar, st.replicas[i].id);
		m->address = ar_strdup(ar, st.replicas[i].address);
		m->leader = strcmp(st.replicas[i].id, st.leader_id) == 0;
		r->replicas[r->n_replicas++] = m;
	}
	if (!r->replica_id || !r->role || !r->leader_id || !r->leader_address ||
	    !r->store_problem) {
		/* out of memory: the summary without its replica fields */
		r->replica_id = r->role = r->leader_id = r->leader_address = r->store_problem = "";
		r->n_replicas = 0;
	}
}

/* GetFabric for a ring domain: its sizes and how its nodes are used. */
static void serve_get_ring_fabric(struct api *api, struct nb_call *call)
{
	const struct ocs_ring_domain *d = &api->d.cfg->ring;
	Ocs__V1__FabricSummary r = OCS__V1__FABRIC_SUMMARY__INIT;
	uint8_t *use = rg_use_snapshot(api->d.rings, NULL);
	struct arena ar = {0};

	r.kind = (char *)cfg_kind_name(api->d.cfg->kind);
	r.wiring = "";
	r.gpus = ocs_ring_gpus(d);
	r.devices = api->d.cfg->n_devices;
	r.devices_drained = dev_n_drained(api->d.devs);
	r.jobs_active = (int)jm_count_state(api->jm, JM_ACTIVE);
	r.version = (char *)api->d.version;
	fill_replica(api, &ar, &r);
	r.nodes = ocs_ring_nodes(d);
	r.tors = d->tors;
	r.nodes_per_tor = d->nodes_per_tor;
	r.gpus_per_node = d->gpus_per_node;
	r.k_hops = d->k_hops;
	r.bundles = d->bundles;
	r.closed = d->closed;
	r.rings_active = (int32_t)rg_active(api->d.rings);
	r.nodes_faulty = (int32_t)rg_n_faulty(api->d.rings);
	for (int i = 0; use && i < r.nodes; i++)
		r.nodes_busy += use[i] == HBD_NODE_BUSY;
	free(use);
	/* devices_connected: ring domains have no reconciliation pass; a node's
	 * session is known from its transactions only */
	nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

static void serve_get_fabric(struct api *api, struct nb_call *call, const void *msg)
{
	const struct ocs_fabric *f = &api->d.cfg->fabric;
	Ocs__V1__FabricSummary r = OCS__V1__FABRIC_SUMMARY__INIT;
	int64_t cabled;
	int active = (int)jm_count_state(api->jm, JM_ACTIVE);
	struct arena ar = {0};

	if (api->d.rings) {
		serve_get_ring_fabric(api, call);
		return;
	}
	if (api->d.rail) {
		r.kind = (char *)cfg_kind_name(api->d.cfg->kind);
		r.devices = api->d.cfg->n_devices;
		for (int i = 0; i < api->d.cfg->n_devices; i++) {
			struct dev_status ds;

			if (dev_status(api->d.devs, i, &ds) == 0)
				r.devices_connected += ds.health == DEV_HEALTH_HEALTHY;
		}
		r.devices_drained = dev_n_drained(api->d.devs);
		r.jobs_active = active;
		r.circuits_active = (int32_t)(fs_count(api->d.fs) / 2);
		r.ocs_ports_used = (int64_t)fs_count(api->d.fs);
		r.ocs_ports_free = (int64_t)ocs_fabric_devices(f) * f->k_ocs - r.ocs_ports_used;
		r.version = (char *)api->d.version;
		fill_replica(api, &ar, &r);
		ra_fill_fabric(api->d.rail, &r);
		nb_call_reply(call, &r.base);
		ar_free_all(&ar);
		return;
	}
	cabled = (int64_t)ocs_fabric_devices(f) * ocs_fabric_device_ports_used(f);

	r.wiring = (char *)ocs_wiring_name(f->wiring);
	r.pods = f->pods;
	r.k_leaf = f->k_leaf;
	r.k_spine = f->k_spine;
	r.tau = f->tau;
	r.k_ocs = f->k_ocs;
	r.groups = ocs_fabric_groups(f);
	r.leaves = ocs_fabric_leaves(f);
	r.gpus = ocs_fabric_gpus(f);
	r.devices = api->d.cfg->n_devices;
	for (int i = 0; i < api->d.cfg->n_devices; i++) {
		struct dev_status ds;

		if (dev_status(api->d.devs, i, &ds) == 0)
			r.devices_connected += ds.health == DEV_HEALTH_HEALTHY;
	}
	r.devices_drained = dev_n_drained(api->d.devs);
	r.circuits_active = (int32_t)(fs_count(api->d.fs) / 2);
	r.jobs_active = active;
	r.ocs_ports_used = (int64_t)fs_count(api->d.fs);
	r.ocs_ports_free = cabled - r.ocs_ports_used;
	r.version = (char *)api->d.version;
	fill_replica(api, &ar, &r);
	r.kind = (char *)cfg_kind_name(api->d.cfg->kind);
	nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

/* ---- Rings (OCSTrx ring domains) ---- */

static void serve_mark_node(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__MarkNodeRequest *req = msg;
	Ocs__V1__MarkNodeResponse r = OCS__V1__MARK_NODE_RESPONSE__INIT;
	bool faulty = req->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY;
	struct jm_error err = {0};
	const char *job = NULL;
	char *jobs[1];

	if (jm_mark_node(api->jm, req->node, faulty, "operator", clk_mono_us(NULL), &job, &err) !=
	    0) {
		fail_jm(call, &err);
		return;
	}
	r.node = req->node;
	r.condition = req->condition;
	if (job) {
		jobs[0] = (char *)job;
		r.affected_jobs = jobs;
		r.n_affected_jobs = 1;
	}
	nb_call_reply(call, &r.base);
}

static void serve_list_rings(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ListRingsRequest *req = msg;
	Ocs__V1__ListRingsResponse r = OCS__V1__LIST_RINGS_RESPONSE__INIT;
	size_t n = api->d.rings ? rg_count(api->d.rings) : 0;
	struct arena ar = {0};

	r.rings = ar_alloc(&ar, (n ? n : 1) * sizeof(*r.rings));
	for (size_t i = 0; r.rings && i < n; i++) {
		const struct rg_ring *g = rg_at(api->d.rings, i);
		bool has = !req->has_node;

		if (req->job_id && req->job_id[0] && strcmp(req->job_id, g->job_id) != 0)
			continue;
		for (int k = 0; !has && k < g->m; k++)
			has = g->nodes[k] == req->node;
		if (has && (r.rings[r.n_rings] = build_ring(&ar, g)) != NULL)
			r.n_rings++;
	}
	if (ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

/* ---- Rail-OCS fabrics (rail_api.c) ---- */

static void serve_replace_gpu(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_replace(api->d.rail, call, msg);
}

static void serve_mark_gpu(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_mark(api->d.rail, call, msg);
}

static void serve_list_rail_ports(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_list_ports(api->d.rail, call, msg);
}

static int find_device(const struct api *api, const char *name)
{
	return dev_find(api->d.devs, name);
}

static Ocs__V1__SessionState session_pb(enum dev_session s)
{
	switch (s) {
	case DEV_SESSION_CONNECTED:
		return OCS__V1__SESSION_STATE__SESSION_STATE_CONNECTED;
	case DEV_SESSION_DISCONNECTED:
		return OCS__V1__SESSION_STATE__SESSION_STATE_DISCONNECTED;
	case DEV_SESSION_CONNECTING:
	default:
		return OCS__V1__SESSION_STATE__SESSION_STATE_CONNECTING;
	}
}

static Ocs__V1__DeviceHealth health_pb(enum dev_health h)
{
	switch (h) {
	case DEV_HEALTH_HEALTHY:
		return OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_HEALTHY;
	case DEV_HEALTH_UNREACHABLE:
		return OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_UNREACHABLE;
	case DEV_HEALTH_UNKNOWN:
	default:
		return OCS__V1__DEVICE_HEALTH__DEVICE_HEALTH_UNSPECIFIED;
	}
}

static Ocs__V1__Device *build_device(struct api *api, struct arena *ar, int id)
{
	const struct ocs_fabric *f = &api->d.cfg->fabric;
	const struct cfg_device *cd = &api->d.cfg->devices[id];
	Ocs__V1__Device *m = ar_alloc(ar, sizeof(*m));
	char addr[300];
	size_t used = 0;
	struct dev_status ds;

	if (!m || dev_status(api->d.devs, id, &ds) != 0)
		return NULL;
	dev_xcs(api->d.devs, id, &used);
	ocs__v1__device__init(m);
	snprintf(addr, sizeof(addr), "%s:%u", cd->address, cd->port);
	m->name = (char *)cd->name;
	/* a ring domain's devices are its nodes' agents: one group, index = node */
	m->group = api->d.rings ? 0 : ocs_fabric_device_group(f, id);
	m->index = api->d.rings ? id : ocs_fabric_device_in_group(f, id);
	m->address = ar_strdup(ar, addr);
	/* Session and health: what the last reconciliation pass found. */
	m->session = session_pb(ds.session);
	m->session_error = ar_strdup(ar, ds.session_error);
	m->session_since_unix_ms = ds.since_ms;
	m->health = health_pb(ds.health);
	m->drained = ds.drained;
	m->ports_total = f->k_ocs;
	m->ports_used = (int32_t)used;
	m->circuits = (int32_t)used;
	return m;
}

static void serve_list_devices(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ListDevicesRequest *req = msg;
	Ocs__V1__ListDevicesResponse r = OCS__V1__LIST_DEVICES_RESPONSE__INIT;
	struct arena ar = {0};
	int n = api->d.cfg->n_devices;

	r.devices = ar_alloc(&ar, (size_t)(n ? n : 1) * sizeof(*r.devices));
	for (int i = 0; r.devices && i < n; i++) {
		if (req->has_group &&
		    (api->d.rings ? 0 : ocs_fabric_device_group(&api->d.cfg->fabric, i)) !=
			    req->group)
			continue;
		r.devices[r.n_devices] = build_device(api, &ar, i);
		if (r.devices[r.n_devices])
			r.n_devices++;
	}
	if (ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

static struct nb_circuit_key circuit_key(const struct fs_circuit *c)
{
	return (struct nb_circuit_key){c->a.h, c->a.pod, c->a.k, c->b.pod, c->b.k};
}

static int cmp_circuit(const void *a, const void *b)
{
	struct nb_circuit_key x = circuit_key(a), y = circuit_key(b);

	return nb_circuit_key_cmp(&x, &y);
}

/*
 * Keeps the page of cs (n circuits, filtered) after req's token, in key
 * order, at the front of cs; sets *next to the token for the rest, if any.
 */
static void page_circuits(const Ocs__V1__ListCircuitsRequest *req, struct fs_circuit *cs, size_t *n,
			  char *token, size_t token_len, char **next)
{
	size_t page = nb_page_size(NB_FABRIC_LIST_CIRCUITS, req->page_size), kept = 0;
	struct nb_circuit_key after;
	bool resume = nb_circuits_token_after(req->page_token, &after);

	for (size_t i = 0; i < *n; i++) {
		struct nb_circuit_key k = circuit_key(&cs[i]);

		if (!resume || nb_circuit_key_cmp(&k, &after) > 0)
			cs[kept++] = cs[i];
	}
	qsort(cs, kept, sizeof(*cs), cmp_circuit);
	if (kept > page) {
		struct nb_circuit_key last = circuit_key(&cs[page - 1]);

		nb_circuits_token(&last, token, token_len);
		*next = token;
		kept = page;
	}
	*n = kept;
}

static void serve_list_circuits(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ListCircuitsRequest *req = msg;
	Ocs__V1__ListCircuitsResponse r = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT;
	int device = -1;
	struct fs_circuit *cs;
	struct arena ar = {0};
	char token[NB_PAGE_TOKEN_MAX_LEN + 1];
	size_t n = 0;

	if (req->device && *req->device) {
		device = find_device(api, req->device);
		if (device < 0) {
			nb_call_fail(call, NB_NOT_FOUND, "device", "no device %s", req->device);
			return;
		}
	}
	/* a ring domain has no circuits (no fabric state): an empty list */
	cs = api->d.fs ? fs_circuits(api->d.fs, req->job_id && *req->job_id ? req->job_id : NULL,
				     device, req->has_pod ? req->pod : -1, &n)
		       : calloc(1, sizeof(*cs));
	if (cs)
		page_circuits(req, cs, &n, token, sizeof(token), &r.next_page_token);
	if (cs) {
		r.circuits = build_circuits(api, &ar, cs, n);
		r.n_circuits = r.circuits ? n : 0;
	}
	if (!cs || ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	free(cs);
	ar_free_all(&ar);
}

static void publish_device(struct api *api, Ocs__V1__Device *d)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__DeviceEvent de = OCS__V1__DEVICE_EVENT__INIT;

	if (!api->server || !d)
		return;
	de.device = d->name;
	de.session = d->session;
	de.health = d->health;
	de.drained = d->drained;
	de.session_error = d->session_error;
	ev.kind_case = OCS__V1__EVENT__KIND_DEVICE;
	ev.device = &de;
	nb_server_publish(api->server, &ev);
}

/* Jobs holding circuits on device id (arena strings). */
static char **jobs_on_device(struct api *api, struct arena *ar, int id, size_t *n)
{
	size_t nc = 0;
	struct fs_circuit *cs = api->d.fs ? fs_circuits(api->d.fs, NULL, id, -1, &nc) : NULL;
	char **names = ar_alloc(ar, (nc ? nc : 1) * sizeof(*names));

	*n = 0;
	for (size_t i = 0; cs && names && i < nc; i++) {
		bool seen = false;

		for (size_t k = 0; k < *n && !seen; k++)
			seen = strcmp(names[k], cs[i].job_id) == 0;
		if (!seen)
			names[(*n)++] = ar_strdup(ar, cs[i].job_id);
	}
	free(cs);
	return names;
}

static void serve_drain(struct api *api, struct nb_call *call, const void *msg, bool drain)
{
	const char *name = drain ? ((const Ocs__V1__DrainDeviceRequest *)msg)->device
				 : ((const Ocs__V1__UndrainDeviceRequest *)msg)->device;
	bool force = drain && ((const Ocs__V1__DrainDeviceRequest *)msg)->force;
	int id = find_device(api, name);
	struct arena ar = {0};
	char **jobs;
	size_t n_jobs = 0;
	int rc;

	if (id < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device %s", name);
		return;
	}
	jobs = jobs_on_device(api, &ar, id, &n_jobs);
	if (drain && n_jobs && !force) {
		nb_call_fail(call, NB_FAILED_PRECONDITION, "force",
			     "%s holds circuits of %zu running job(s) (first: %s); they stay in "
			     "place, set force to drain anyway",
			     name, n_jobs, jobs[0]);
		ar_free_all(&ar);
		return;
	}
	rc = dev_set_drained(api->d.devs, id, drain);
	if (rc) {
		nb_call_fail(call, NB_UNAVAILABLE, "",
			     "cannot store the drain state (%s); nothing "
			     "changed",
			     strerror(-rc));
		ar_free_all(&ar);
		return;
	}
	log_job(LOG_NOTICE, NULL, nb_call_peer(call), "device %s %s%s (%zu running job(s) on it)",
		name, drain ? "drained" : "undrained", force ? " (forced)" : "", n_jobs);
	if (drain) {
		Ocs__V1__DrainDeviceResponse r = OCS__V1__DRAIN_DEVICE_RESPONSE__INIT;

		r.device = build_device(api, &ar, id);
		r.affected_jobs = jobs;
		r.n_affected_jobs = n_jobs;
		publish_device(api, r.device);
		nb_call_reply(call, &r.base);
	} else {
		Ocs__V1__UndrainDeviceResponse r = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;

		r.device = build_device(api, &ar, id);
		publish_device(api, r.device);
		nb_call_reply(call, &r.base);
	}
	ar_free_all(&ar);
}

static void serve_drain_device(struct api *api, struct nb_call *call, const void *msg)
{
	serve_drain(api, call, msg, true);
}

static void serve_undrain_device(struct api *api, struct nb_call *call, const void *msg)
{
	serve_drain(api, call, msg, false);
}

/* ---- what no job owns (issue 14 #2, drift.h and adopt.h) ---- */

static void serve_list_drift(struct api *api, struct nb_call *call, const void *msg)
{
	const char *name = ((const Ocs__V1__ListDriftRequest *)msg)->device;
	int one = name[0] ? find_device(api, name) : -1;
	Ocs__V1__ListDriftResponse r = OCS__V1__LIST_DRIFT_RESPONSE__INIT;
	size_t total = 0, k = 0, n;
	struct arena ar = {0};

	if (name[0] && one < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "device", "no device %s", name);
		return;
	}
	for (int d = 0; d < dev_count(api->d.devs); d++) {
		if (one >= 0 && d != one)
			continue;
		(void)dr_device_unowned(api->d.drift, d, &n);
		total += n;
		(void)dr_device_missing(api->d.drift, d, &n);
		total += n;
		r.n_unverified_devices += dr_device_unverified(api->d.drift, d);
	}
	r.cross_connects = ar_alloc(&ar, (total + 1) * sizeof(*r.cross_connects));
	r.unverified_devices = ar_alloc(&ar, (r.n_unverified_devices + 1) * sizeof(char *));
	r.n_unverified_devices = 0;
	for (int d = 0; d < dev_count(api->d.devs) && !ar.failed; d++) {
		if (one >= 0 && d != one)
			continue;
		for (int missing = 0; missing < 2; missing++) {
			const struct sb_xc *x = missing ? dr_device_missing(api->d.drift, d, &n)
							: dr_device_unowned(api->d.drift, d, &n);

			for (size_t i = 0; i < n && !ar.failed; i++) {
				Ocs__V1__DriftCrossConnect *c = ar_alloc(&ar, sizeof(*c));

				if (!c)
					break;
				ocs__v1__drift_cross_connect__init(c);
				c->device = (char *)dev_name(api->d.devs, d);
				c->in_port = x[i].in;
				c->out_port = x[i].out;
				c->missing = missing;
				r.cross_connects[k++] = c;
			}
		}
		if (dr_device_unverified(api->d.drift, d))
			r.unverified_devices[r.n_unverified_devices++] =
				(char *)dev_name(api->d.devs, d);
	}
	r.n_cross_connects = k;
	if (ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

/* The request's scope as adopt.h's; false when the device is unknown (answered). */
static bool drift_scope(struct api *api, struct nb_call *call, const Ocs__V1__DriftScope *s,
			struct adopt_scope *out)
{
	*out = (struct adopt_scope){.device = -1};
	if (!s)
		return true;
	if (s->device[0] && (out->device = find_device(api, s->device)) < 0) {
		nb_call_fail(call, NB_NOT_FOUND, "scope.device", "no device %s", s->device);
		return false;
	}
	out->has_ports = s->has_ports;
	out->in = s->in_port;
	out->out = s->out_port;
	return true;
}

static void serve_adopt(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__AdoptCrossConnectsRequest *q = msg;
	Ocs__V1__AdoptCrossConnectsResponse r = OCS__V1__ADOPT_CROSS_CONNECTS_RESPONSE__INIT;
	struct adopt_scope scope;
	struct jm_error err;
	struct ocs_xc *xcs = NULL;
	struct fs_circuit *cs = NULL;
	struct arena ar = {0};
	Ocs__V1__JobSpec spec = OCS__V1__JOB_SPEC__INIT; /* the request GetJob hands back */
	char id[NB_ID_MAX_LEN + 1];
	uint8_t *raw;
	size_t n = 0, raw_len;

	if (!drift_scope(api, call, q->scope, &scope))
		return;
	if (q->job_id[0])
		snprintf(id, sizeof(id), "%s", q->job_id);
	else
		snprintf(id, sizeof(id), "adopted-%lld", (long long)(clk_wall_ms(NULL) / 1000));
	spec.id = id;
	raw_len = ocs__v1__job_spec__get_packed_size(&spec);
	raw = malloc(raw_len + 1);
	if (!raw) {
		nb_call_fail(call, NB_INTERNAL, "", "out of memory");
		return;
	}
	ocs__v1__job_spec__pack(&spec, raw);
	if (adopt_select(api->d.drift, api->d.fs, api->d.devs, &api->d.cfg->fabric, &scope, false,
			 &xcs, &n, &err) != 0 ||
	    jm_adopt(api->jm, id, raw, raw_len, xcs, n, &err) != 0) {
		free(xcs);
		free(raw);
		fail_jm(call, &err);
		return;
	}
	free(raw);
	dr_forget(api->d.drift, xcs, n);
	free(xcs);
	log_job(LOG_NOTICE, id, nb_call_peer(call), "adopted %zu cross-connect(s) as job %s", n,
		id);
	cs = fs_circuits(api->d.fs, id, -1, -1, &n);
	r.job_id = id;
	r.circuits = cs ? build_circuits(api, &ar, cs, n) : NULL;
	r.n_circuits = r.circuits ? n : 0;
	if (!cs || ar.failed)
		nb_call_fail(call, NB_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, &r.base);
	free(cs);
	ar_free_all(&ar);
}

/* A clear waiting for its transaction. */
struct clear_call {
	struct api *api;
	struct nb_call *call;
	struct ocs_xc *xcs;
	size_t n;
};

static void clear_done(void *arg, const struct txn_outcome *o)
{
	struct clear_call *cc = arg;
	struct api *api = cc->api;
	Ocs__V1__ClearCrossConnectsResponse r = OCS__V1__CLEAR_CROSS_CONNECTS_RESPONSE__INIT;
	struct arena ar = {0};

	if (o->result == TXN_CONFIRMED) {
		dr_forget(api->d.drift, cc->xcs, cc->n);
		log_job(LOG_NOTICE, NULL, nb_call_peer(cc->call),
			"cleared %zu unowned cross-connect(s) from the devices", cc->n);
		r.cross_connects = ar_alloc(&ar, (cc->n + 1) * sizeof(*r.cross_connects));
		for (size_t i = 0; r.cross_connects && i < cc->n; i++) {
			Ocs__V1__CrossConnect *c = ar_alloc(&ar, sizeof(*c));

			if (!c)
				break;
			ocs__v1__cross_connect__init(c);
			c->device = (char *)device_name(api, &cc->xcs[i]);
			c->in_port = cc->xcs[i].in;
			c->out_port = cc->xcs[i].out;
			r.cross_connects[r.n_cross_connects++] = c;
		}
		if (ar.failed)
			nb_call_fail(cc->call, NB_INTERNAL, "", "out of memory building the reply");
		else
			nb_call_reply(cc->call, &r.base);
	} else if (o->result == TXN_FAILED) {
		nb_call_fail(cc->call, NB_INTERNAL, "",
			     "devices: %s; a rollback could not be proven: the fabric needs "
			     "reconciliation",
			     o->message);
	} else {
		nb_call_fail(cc->call, NB_UNAVAILABLE, "", "devices: %s; nothing changed",
			     o->message);
	}
	ar_free_all(&ar);
	free(cc->xcs);
	free(cc);
}

static void serve_clear(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ClearCrossConnectsRequest *q = msg;
	struct clear_call *cc;
	struct adopt_scope scope;
	struct jm_error err;
	struct txn_change c;
	char why[400] = "";
	int rc;

	if (!drift_scope(api, call, q->scope, &scope))
		return;
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		nb_call_fail(call, NB_INTERNAL, "", "out of memory");
		return;
	}
	*cc = (struct clear_call){api, call, NULL, 0};
	if (adopt_select(api->d.drift, api->d.fs, api->d.devs, &api->d.cfg->fabric, &scope, true,
			 &cc->xcs, &cc->n, &err) != 0) {
		free(cc);
		fail_jm(call, &err);
		return;
	}
	c = (struct txn_change){.job_id = "ocsd-clear", .removals = cc->xcs, .n_removals = cc->n};
	rc = jm_external_txn(api->jm, &c, clear_done, cc, why, sizeof(why));
	if (rc) {
		nb_call_fail(call, rc == -ENOMEM ? NB_INTERNAL : NB_UNAVAILABLE, "",
			     "%s; nothing changed", why);
		free(cc->xcs);
		free(cc);
	}
}

/* ---- hand-off from gRPC threads ---- */

static void dispatch(struct loop_node *n)
{
	struct api_req *r = OCSD_CONTAINER_OF(n, struct api_req, node);
	char why[800];

	/* a follower, or a leader whose etcd cannot be reached (replica.h) */
	if (r->write && r->api->d.rp && rp_write_refusal(r->api->d.rp, why, sizeof(why)) != 0)
		nb_call_fail(r->call, NB_UNAVAILABLE, "", "%s", why);
	else if (r->api->stopping || !r->api->jm)
		nb_call_fail(r->call, NB_UNAVAILABLE, "", "ocsd is shutting down");
	else
		r->serve(r->api, r->call, r->msg);
	free(r);
}

static void post(struct api *api, struct nb_call *call, const void *msg,
		 void (*serve)(struct api *, struct nb_call *, const void *), bool write)
{
	struct api_req *r = malloc(sizeof(*r));

	if (!r) {
		nb_call_fail(call, NB_UNAVAILABLE, "", "out of memory");
		return;
	}
	*r = (struct api_req){api, call, msg, serve, write, {NULL, NULL}};
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

HANDLER(h_list_drift, Ocs__V1__ListDriftRequest, serve_list_drift)
WRITE_HANDLER(h_adopt, Ocs__V1__AdoptCrossConnectsRequest, serve_adopt)
WRITE_HANDLER(h_clear, Ocs__V1__ClearCrossConnectsRequest, serve_clear)
HANDLER(h_get_fabric, Ocs__V1__GetFabricRequest, serve_get_fabric)
HANDLER(h_list_devices, Ocs__V1__ListDevicesRequest, serve_list_devices)
HANDLER(h_list_circuits, Ocs__V1__ListCircuitsRequest, serve_list_circuits)
WRITE_HANDLER(h_drain_device, Ocs__V1__DrainDeviceRequest, serve_drain_device)
WRITE_HANDLER(h_undrain_device, Ocs__V1__UndrainDeviceRequest, serve_undrain_device)
WRITE_HANDLER(h_mark_node, Ocs__V1__MarkNodeRequest, serve_mark_node)
HANDLER(h_list_rings, Ocs__V1__ListRingsRequest, serve_list_rings)
WRITE_HANDLER(h_replace_gpu, Ocs__V1__ReplaceGpuRequest, serve_replace_gpu)
WRITE_HANDLER(h_mark_gpu, Ocs__V1__MarkGpuRequest, serve_mark_gpu)
HANDLER(h_list_rail_ports, Ocs__V1__ListRailPortsRequest, serve_list_rail_ports)
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
		.submit_job = h_submit_job,
		.plan_job = h_plan_job,
		.release_job = h_release_job,
		.get_job = h_get_job,
		.list_jobs = h_list_jobs,
		.call_done = h_call_done,
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

/* ---- events ---- */

static void ev_job(void *ctx, const struct jm_job *job)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__JobEvent je = OCS__V1__JOB_EVENT__INIT;

	if (!api->server)
		return;
	je.job_id = (char *)job->id;
	je.state = job_state_pb(job->state);
	je.reason = (char *)job->reason;
	ev.kind_case = OCS__V1__EVENT__KIND_JOB;
	ev.job = &je;
	nb_server_publish(api->server, &ev);
}

static void ev_txn(void *ctx, const char *job_id, const struct txn_outcome *o)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__TransactionEvent te = OCS__V1__TRANSACTION_EVENT__INIT;
	const char *label = txn_result_label(o->result);

	mx_add(api->m_txns, &label, 1);
	mx_observe(api->m_txn_seconds, &label, (double)o->total_ms / 1000.0);
	if (o->result == TXN_ROLLED_BACK || o->result == TXN_FAILED)
		mx_add(api->m_rollbacks, NULL, 1);
	mx_add(api->m_rollback_failures, NULL, (double)o->rollback_failures);
	if (!api->server)
		return;
	te.transaction_id = o->txn_id;
	te.job_id = (char *)job_id;
	te.outcome = txn_result_pb(o->result);
	te.devices = (char **)o->devices;
	te.n_devices = o->n_devices;
	te.reason = (char *)o->message;
	ev.kind_case = OCS__V1__EVENT__KIND_TRANSACTION;
	ev.transaction = &te;
	nb_server_publish(api->server, &ev);
}

static void ev_plan(void *ctx, const char *planner, double seconds)
{
	struct api *api = ctx;

	mx_observe(api->m_plan_seconds, &planner, seconds);
}

/* The job manager serves no more writes (it logged the reason, and every
 * write it refuses carries it): health says so, so that load balancers and
 * operators see it. */
static void ev_store_failed(void *ctx, const char *reason)
{
	struct api *api = ctx;

	(void)reason;
	if (api->server)
		nb_server_set_health(
			api->server, "",
			GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
}

static void ev_ring(void *ctx, const struct rg_ring *now, const int *old, int n_old,
		    int64_t reaction_us, int64_t devices_us)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__RingEvent re = OCS__V1__RING_EVENT__INIT;
	struct arena ar = {0};
	int32_t *olds = ar_alloc(&ar, (size_t)(n_old > 0 ? n_old : 1) * sizeof(*olds));
	bool repair = now->last_change == RG_BYPASSED || now->last_change == RG_REPLACED ||
		      now->last_change == RG_LOST;

	if (repair) {
		const char *kind = st_ring_change_name(now->last_change);

		mx_add(api->m_repairs, &kind, 1);
		if (now->last_change != RG_LOST && reaction_us > 0)
			mx_observe(api->m_reaction_seconds, NULL, (double)reaction_us / 1e6);
	}
	if (!api->server || !olds) {
		ar_free_all(&ar);
		return;
	}
	re.ring = build_ring(&ar, now);
	if (now->last_change == RG_RELEASED && re.ring)
		re.ring->n_nodes = 0; /* released: it holds no node now */
	for (int i = 0; i < n_old; i++)
		olds[i] = old[i];
	re.old_nodes = olds;
	re.n_old_nodes = n_old > 0 ? (size_t)n_old : 0;
	re.reaction_us = reaction_us;
	re.devices_us = devices_us;
	ev.kind_case = OCS__V1__EVENT__KIND_RING;
	ev.ring = &re;
	if (re.ring)
		nb_server_publish(api->server, &ev);
	ar_free_all(&ar);
}

static void ev_node(void *ctx, int node, bool faulty, const char *source)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__NodeEvent ne = OCS__V1__NODE_EVENT__INIT;

	if (!api->server)
		return;
	ne.node = node;
	ne.condition = faulty ? OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY
			      : OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY;
	ne.source = (char *)source;
	ev.kind_case = OCS__V1__EVENT__KIND_NODE;
	ev.node = &ne;
	nb_server_publish(api->server, &ev);
}

struct jm_events api_job_events(struct api *api)
{
	return (struct jm_events){.ctx = api,
				  .job_changed = ev_job,
				  .transaction_done = ev_txn,
				  .plan_finished = ev_plan,
				  .store_failed = ev_store_failed,
				  .ring_changed = ev_ring,
				  .node_changed = ev_node};
}

/* At most this many DriftEvents per pass; the metric counts them all. */
#define API_MAX_DRIFT_EVENTS 256

static void ev_drift(void *ctx, const char *device, int in, int out, bool missing)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__DriftEvent de = OCS__V1__DRIFT_EVENT__INIT;

	if (!api->server || api->drift_published++ >= API_MAX_DRIFT_EVENTS)
		return;
	de.device = (char *)device;
	de.in_port = in;
	de.out_port = out;
	de.missing = missing;
	ev.kind_case = OCS__V1__EVENT__KIND_DRIFT;
	ev.drift = &de;
	nb_server_publish(api->server, &ev);
}

static void ev_device_read(void *ctx, int id, bool ok, bool connected, const char *error)
{
	struct api *api = ctx;
	struct arena ar = {0};

	if (!dev_note_read(api->d.devs, id, ok, connected, error, clk_wall_ms(NULL)))
		return;
	publish_device(api, build_device(api, &ar, id));
	ar_free_all(&ar);
}

static void ev_recon_done(void *ctx, const struct recon_report *r)
{
	struct api *api = ctx;

	api->drift_published = 0;
	if (r->discarded)
		return; /* the fabric changed meanwhile: the next pass will tell */
	mx_set(api->m_drift, (const char *[]){"unowned"}, (double)r->unowned);
	mx_set(api->m_drift, (const char *[]){"missing"}, (double)r->missing);
	mx_set(api->m_unreachable, NULL, (double)r->unreachable);
	mx_observe(api->m_recon_seconds, NULL, r->duration_s);
	if (r->unowned || r->missing || r->unreachable)
		log_msg(LOG_WARNING,
			"reconciliation: %zu unowned and %zu missing cross-connect(s), %zu "
			"device(s) unreachable",
			r->unowned, r->missing, r->unreachable);
}

struct recon_events api_recon_events(struct api *api)
{
	return (struct recon_events){api, ev_drift, ev_device_read, ev_recon_done};
}

int api_restore_jobs(struct api *api)
{
	int rc = dev_restore_drained(api->d.devs);

	if (rc)
		return rc;
	for (size_t i = 0; i < jm_count(api->jm); i++) {
		const struct jm_job *job = jm_at(api->jm, i);
		Ocs__V1__JobSpec *pb = ocs__v1__job_spec__unpack(NULL, job->raw_len, job->raw);
		struct jm_spec spec;
		struct nb_error err;

		if (!pb)
			continue; /* jm_recover fails jobs without a demand */
		rc = spec_from_pb(api, pb, &spec, &err);
		if (rc == 0 && spec.ring) {
			rc = jm_set_ring(api->jm, job->id, spec.ring);
			free_spec(&spec);
		} else if (rc == 0 && spec.rail) {
			/* a rail job is its GPUs (the swaps' moves are applied by railswap.c) */
			rc = jm_set_gpus(api->jm, job->id, spec.gpus, spec.n_gpus);
			free_spec(&spec);
		} else if (rc == 0) {
			rc = jm_set_demand(api->jm, job->id, spec.planner,
					   spec.allow_moving_other_jobs, spec.demand, spec.n_demand,
					   spec.workload);
			if (rc == 0)
				rc = jm_set_gpus(api->jm, job->id, spec.gpus, spec.n_gpus);
			free_spec(&spec);
		}
		ocs__v1__job_spec__free_unpacked(pb, NULL);
		if (rc == -ENOMEM)
			return rc;
	}
	return 0;
}
