/*
 * api_events.c - what the daemon reports as it happens: job, transaction
 * (outcome and progress), ring, node, drift, cabling and device events to
 * Events.Watch (northbound nb_server_publish), and the metrics of
 * transactions, plans, repairs, reconciliation passes and miswired fibre. The job manager's events
 * (api_job_events), the reconciliation's (api_recon_events) and the
 * circuit repair's (api_repair_events) arrive here on the loop thread.
 *
 * Return values left unchecked here, and why that is safe:
 *  - nb_server_publish() returns the sequence number stamped on the event;
 *    a subscriber too far behind is ended by the northbound itself.
 *  - mx_add(), mx_set() and mx_observe() fail only when a new label series
 *    cannot be allocated: one metric sample is lost, no daemon state.
 */
#include "api_internal.h"
#include "arena.h"
#include "cabling.h"
#include "clock.h"
#include "devices.h"
#include "drift.h"
#include "log.h"
#include "metrics.h"
#include "rings.h"
#include "store.h"

/* ---- transaction outcomes, each mapped once ---- */

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

void api_publish_device(struct api *api, Ocs__V1__Device *d)
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

/* ---- events ---- */

static void ev_job(void *ctx, const struct jm_job *job)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__JobEvent je = OCS__V1__JOB_EVENT__INIT;

	if (!api->server)
		return;
	je.job_id = (char *)job->id;
	je.state = api_job_state_pb(job->state);
	je.reason = (char *)job->reason;
	ev.kind_case = OCS__V1__EVENT__KIND_JOB;
	ev.job = &je;
	nb_server_publish(api->server, &ev);
}

static void ev_txn(void *ctx, const char *const *jobs, size_t n_jobs, const struct txn_outcome *o)
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
	te.outcome = txn_result_pb(o->result);
	te.devices = (char **)o->devices;
	te.n_devices = o->n_devices;
	te.reason = (char *)o->message;
	ev.kind_case = OCS__V1__EVENT__KIND_TRANSACTION;
	ev.transaction = &te;
	/* one event per job: a watcher of one job sees its own outcome */
	for (size_t i = 0; i < n_jobs; i++) {
		te.job_id = (char *)jobs[i];
		nb_server_publish(api->server, &ev);
	}
}

static Ocs__V1__TransactionStep txn_step_pb(enum sb_txn_step s)
{
	switch (s) {
	case SB_STEP_PREPARE:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_PREPARE;
	case SB_STEP_COMMIT:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_COMMIT;
	case SB_STEP_VERIFY:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_VERIFY;
	case SB_STEP_CONFIRM:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_CONFIRM;
	case SB_STEP_ROLLBACK:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_ROLLBACK;
	default:
		return OCS__V1__TRANSACTION_STEP__TRANSACTION_STEP_UNSPECIFIED;
	}
}

/* Throttled by the driver already (txn_driver.h, TXN_PROGRESS_INTERVAL_MS);
 * only watchers that ask for progress receive it (nb_server.c). */
void api_publish_progress(struct nb_server *server, const char *const *jobs, size_t n_jobs,
			  const struct txn_progress *p)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__ProgressEvent pe = OCS__V1__PROGRESS_EVENT__INIT;

	if (!server)
		return;
	pe.transaction_id = (uint64_t)p->txn_id;
	pe.job_ids = (char **)jobs;
	pe.n_job_ids = n_jobs;
	pe.step = txn_step_pb(p->step);
	pe.devices_done = (uint32_t)p->done;
	pe.devices_total = (uint32_t)p->total;
	ev.kind_case = OCS__V1__EVENT__KIND_PROGRESS;
	ev.progress = &pe;
	nb_server_publish(server, &ev);
}

static void ev_progress(void *ctx, const char *const *jobs, size_t n_jobs,
			const struct txn_progress *p)
{
	struct api *api = ctx;

	api_publish_progress(api->server, jobs, n_jobs, p);
}

static void ev_wave(void *ctx, size_t n_jobs, const int64_t *waited_us)
{
	struct api *api = ctx;

	mx_add(api->m_waves, NULL, 1);
	mx_observe(api->m_wave_jobs, NULL, (double)n_jobs);
	for (size_t i = 0; i < n_jobs; i++)
		mx_observe(api->m_wave_wait_seconds, NULL, (double)waited_us[i] / 1e6);
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
	bool repair = now->last_change == RG_EXTENDED || now->last_change == RG_BYPASSED ||
		      now->last_change == RG_REPLACED || now->last_change == RG_LOST;

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
	re.ring = api_build_ring(&ar, now);
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

	api_publish_condition(api->server, false, node, faulty, source);
}

struct jm_events api_job_events(struct api *api)
{
	return (struct jm_events){.ctx = api,
				  .job_changed = ev_job,
				  .transaction_done = ev_txn,
				  .transaction_progress = ev_progress,
				  .wave_started = ev_wave,
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

void api_drift_bundle(Ocs__V1__DriftBundle *db, const struct dr_bundle *b, const char *device,
		      const char *job_id, char *want, char *got, size_t len)
{
	ocs__v1__drift_bundle__init(db);
	db->device = (char *)device;
	db->node = b->node;
	db->bundle = b->found.bundle;
	db->expected = (char *)dr_bundle_setting(&b->expected, want, len);
	db->found = (char *)dr_bundle_setting(&b->found, got, len);
	db->found_peer = b->found_peer;
	db->job_id = (char *)(job_id ? job_id : "");
}

static void ev_bundle_drift(void *ctx, const struct dr_bundle *b, const char *device,
			    const char *job_id, bool reprogramming)
{
	struct api *api = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__DriftEvent de = OCS__V1__DRIFT_EVENT__INIT;
	Ocs__V1__DriftBundle db = OCS__V1__DRIFT_BUNDLE__INIT;
	char want[32], got[32];

	api_drift_bundle(&db, b, device, job_id, want, got, sizeof(want));
	if (b->fresh || reprogramming)
		log_msg(LOG_WARNING,
			"drift: node %d bundle %u holds %s (reaches node %d) where %s is expected "
			"(%s%s)%s",
			b->node, b->found.bundle, got, (int)b->found_peer, want,
			job_id ? "a ring of job " : "in no ring", job_id ? job_id : "",
			!job_id		? ": reported, not changed"
			: reprogramming ? ": programming it back"
					: ": its job is busy; tried again at the next pass");
	if (!api->server || api->drift_published++ >= API_MAX_DRIFT_EVENTS)
		return;
	de.device = (char *)device;
	de.bundle = &db;
	ev.kind_case = OCS__V1__EVENT__KIND_DRIFT;
	ev.drift = &de;
	nb_server_publish(api->server, &ev);
}

/*
 * A device that became unreachable, or reachable again, is logged once per
 * change (not at every pass): the journal says when and why, as the Watch
 * event and ListDevices do. A device first read healthy is not logged.
 */
static void log_reachability(const struct api *api, int id, enum dev_health was)
{
	struct dev_status now;

	if (dev_status(api->d.devs, id, &now) != 0 || now.health == was)
		return;
	if (now.health == DEV_HEALTH_UNREACHABLE)
		log_msg(LOG_WARNING, "device %s unreachable: %s", dev_name(api->d.devs, id),
			now.session_error);
	else if (was == DEV_HEALTH_UNREACHABLE)
		log_msg(LOG_NOTICE, "device %s reachable again", dev_name(api->d.devs, id));
}

static void ev_device_read(void *ctx, int id, bool ok, bool connected, const char *error,
			   const struct sb_device_info *info)
{
	struct api *api = ctx;
	struct arena ar = {0};
	struct dev_status was = {.health = DEV_HEALTH_UNKNOWN};
	(void)dev_status(api->d.devs, id, &was);
	bool changed = dev_note_read(api->d.devs, id, ok, connected, error, clk_wall_ms(NULL));

	log_reachability(api, id, was.health);
	if (info)
		changed |= dev_note_info(api->d.devs, id, info);
	if (!changed)
		return;
	api_publish_device(api, api_build_device(api, &ar, id));
	ar_free_all(&ar);
}

void api_cabling_gauge(struct api *api)
{
	mx_set(api->m_cabling, NULL, api->d.cabling ? (double)cab_miswired(api->d.cabling) : 0);
}

/* A fibre found miswired, or no longer (cabling.h): logged, a CablingEvent
 * and the gauge (the table holds the change already). */
static void ev_cabling(void *ctx, const struct cab_entry *e, bool miswired)
{
	struct api *api = ctx;
	const char *side = e->egress ? "egress" : "ingress";
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__CablingEvent ce = OCS__V1__CABLING_EVENT__INIT;

	if (miswired)
		log_msg(LOG_WARNING,
			"device %s port %u (%s): the device reports its fibre reaching \"%s\", the "
			"fabric file's wiring says \"%s\": miswired, kept out of every plan until "
			"it is fixed or an operator clears it",
			dev_name(api->d.devs, e->device), e->port, side, e->reported,
			e->expected[0] ? e->expected : "(not cabled)");
	else
		log_msg(LOG_NOTICE, "device %s port %u (%s): no longer reported miswired",
			dev_name(api->d.devs, e->device), e->port, side);
	api_cabling_gauge(api);
	if (!api->server)
		return;
	ce.device = (char *)dev_name(api->d.devs, e->device);
	ce.port = e->port;
	ce.side = (char *)side;
	ce.expected = (char *)e->expected;
	ce.reported = (char *)e->reported;
	ce.miswired = miswired;
	ev.kind_case = OCS__V1__EVENT__KIND_CABLING;
	ev.cabling = &ce;
	nb_server_publish(api->server, &ev);
}

static void ev_recon_done(void *ctx, const struct recon_report *r)
{
	struct api *api = ctx;

	api->drift_published = 0;
	if (r->discarded)
		return; /* the fabric changed meanwhile: the next pass will tell */
	mx_set(api->m_drift, (const char *[]){"unowned"}, (double)r->unowned);
	mx_set(api->m_drift, (const char *[]){"missing"}, (double)r->missing);
	mx_set(api->m_drift_bundles, (const char *[]){"in_ring"}, (double)r->bundles_in_rings);
	mx_set(api->m_drift_bundles, (const char *[]){"idle"}, (double)r->bundles_idle);
	mx_set(api->m_unreachable, NULL, (double)r->unreachable);
	mx_observe(api->m_recon_seconds, NULL, r->duration_s);
	if (api->d.rings && (r->bundles_in_rings || r->bundles_idle || r->unreachable))
		log_msg(LOG_WARNING,
			"reconciliation: %zu bundle(s) differ on nodes of live rings (%zu "
			"node(s) being programmed back), %zu on nodes in no ring, %zu node(s) "
			"unreachable",
			r->bundles_in_rings, r->reprogrammed, r->bundles_idle, r->unreachable);
	else if (r->unowned || r->missing || r->unreachable)
		log_msg(LOG_WARNING,
			"reconciliation: %zu unowned and %zu missing cross-connect(s), %zu "
			"device(s) unreachable",
			r->unowned, r->missing, r->unreachable);
}

struct recon_events api_recon_events(struct api *api)
{
	return (struct recon_events){.ctx = api,
				     .drift = ev_drift,
				     .bundle_drift = ev_bundle_drift,
				     .device_read = ev_device_read,
				     .cabling = ev_cabling,
				     .done = ev_recon_done};
}

static void ev_repair(void *ctx, const char *outcome, size_t n)
{
	struct api *api = ctx;

	mx_add(api->m_circuit_repairs, &outcome, (double)n);
}

struct rep_events api_repair_events(struct api *api)
{
	return (struct rep_events){api, ev_repair};
}
