/*
 * api_fabric.c - the Fabric service of the ocs.v1 API, served on the loop
 * from the fabric state, the devices, the ring and rail state and the
 * drift and cabling tables: GetFabric, ListDevices, ListCircuits,
 * DrainDevice, UndrainDevice, MarkNode, ListRings, ListDrift,
 * AdoptCrossConnects, ClearCrossConnects, ListCabling, ClearCabling, and
 * the rail RPCs handed to rail_api.c. Requests
 * reach these functions through api.c's handler table.
 *
 * Return values left unchecked here, and why that is safe:
 *  - nb_call_reply() and api_fail[f]() always answer the call (a reply that
 *    cannot be sent is replaced by an error status); their result only says
 *    which happened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt.h"
#include "api_internal.h"
#include "arena.h"
#include "cabling.h"
#include "clock.h"
#include "config.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "log.h"
#include "rail_api.h"
#include "replica.h"
#include "rings.h"

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

/* The devices whose last check found them healthy (GetFabric). */
static int32_t devices_connected(const struct api *api)
{
	int32_t n = 0;

	for (int i = 0; i < api->d.cfg->n_devices; i++) {
		struct dev_status ds;

		if (dev_status(api->d.devs, i, &ds) == 0)
			n += ds.health == DEV_HEALTH_HEALTHY;
	}
	return n;
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
	/* the nodes' agents, as the keepalive and the node reads found them */
	r.devices_connected = devices_connected(api);
	nb_call_reply(call, &r.base);
	ar_free_all(&ar);
}

void api_serve_get_fabric(struct api *api, struct nb_call *call, const void *msg)
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
		r.devices_connected = devices_connected(api);
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
	r.devices_connected = devices_connected(api);
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

void api_serve_mark_node(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__MarkNodeRequest *req = msg;
	Ocs__V1__MarkNodeResponse r = OCS__V1__MARK_NODE_RESPONSE__INIT;
	bool faulty = req->condition == OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY;
	struct err_info err = {0};
	const char *job = NULL;
	char *jobs[1];

	if (jm_mark_node(api->jm, req->node, faulty, "operator", clk_mono_us(NULL), &job, &err) !=
	    0) {
		api_fail(call, &err);
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

void api_serve_list_rings(struct api *api, struct nb_call *call, const void *msg)
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
		if (has && (r.rings[r.n_rings] = api_build_ring(&ar, g)) != NULL)
			r.n_rings++;
	}
	api_reply(call, &r.base, ar.failed);
	ar_free_all(&ar);
}

/* ---- Rail-OCS fabrics (rail_api.c) ---- */

void api_serve_replace_gpu(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_replace(api->d.rail, call, msg);
}

void api_serve_mark_gpu(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_mark(api->d.rail, call, msg);
}

void api_serve_list_rail_ports(struct api *api, struct nb_call *call, const void *msg)
{
	ra_serve_list_ports(api->d.rail, call, msg);
}

static int find_device(const struct api *api, const char *name)
{
	return dev_find(api->d.devs, name);
}

void api_serve_list_devices(struct api *api, struct nb_call *call, const void *msg)
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
		r.devices[r.n_devices] = api_build_device(api, &ar, i);
		if (r.devices[r.n_devices])
			r.n_devices++;
	}
	api_reply(call, &r.base, ar.failed);
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

void api_serve_list_circuits(struct api *api, struct nb_call *call, const void *msg)
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
			api_failf(call, ERR_NOT_FOUND, "device", "no device %s", req->device);
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
		r.circuits = api_build_circuits(api, &ar, cs, n);
		r.n_circuits = r.circuits ? n : 0;
	}
	api_reply(call, &r.base, !cs || ar.failed);
	free(cs);
	ar_free_all(&ar);
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
		api_failf(call, ERR_NOT_FOUND, "device", "no device %s", name);
		return;
	}
	jobs = jobs_on_device(api, &ar, id, &n_jobs);
	if (drain && n_jobs && !force) {
		api_failf(call, ERR_PRECONDITION, "force",
			  "%s holds circuits of %zu running job(s) (first: %s); they stay in "
			  "place, set force to drain anyway",
			  name, n_jobs, jobs[0]);
		ar_free_all(&ar);
		return;
	}
	rc = dev_set_drained(api->d.devs, id, drain);
	if (rc) {
		api_failf(call, ERR_UNAVAILABLE, "",
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

		r.device = api_build_device(api, &ar, id);
		r.affected_jobs = jobs;
		r.n_affected_jobs = n_jobs;
		api_publish_device(api, r.device);
		nb_call_reply(call, &r.base);
	} else {
		Ocs__V1__UndrainDeviceResponse r = OCS__V1__UNDRAIN_DEVICE_RESPONSE__INIT;

		r.device = api_build_device(api, &ar, id);
		api_publish_device(api, r.device);
		nb_call_reply(call, &r.base);
	}
	ar_free_all(&ar);
}

void api_serve_drain_device(struct api *api, struct nb_call *call, const void *msg)
{
	serve_drain(api, call, msg, true);
}

void api_serve_undrain_device(struct api *api, struct nb_call *call, const void *msg)
{
	serve_drain(api, call, msg, false);
}

/* ---- what no job owns (issue 14 #2, drift.h and adopt.h) ---- */

/* Ring domains: every differing bundle of the nodes (one: that node's agent only). */
static void list_node_drift(struct api *api, struct nb_call *call, int one)
{
	Ocs__V1__ListDriftResponse r = OCS__V1__LIST_DRIFT_RESPONSE__INIT;
	size_t total = 0, n;
	struct arena ar = {0};

	for (int d = 0; d < dr_nodes_count(api->d.node_drift); d++)
		if (one < 0 || d == one)
			total += (dr_nodes_get(api->d.node_drift, d, &n), n);
	r.bundles = ar_alloc(&ar, (total + 1) * sizeof(*r.bundles));
	for (int d = 0; d < dr_nodes_count(api->d.node_drift) && !ar.failed; d++) {
		const struct dr_bundle *b = dr_nodes_get(api->d.node_drift, d, &n);
		const struct rg_ring *holder = rg_holder(api->d.rings, d);

		for (size_t i = 0; (one < 0 || d == one) && i < n; i++) {
			Ocs__V1__DriftBundle *db = ar_alloc(&ar, sizeof(*db));
			char *want = ar_alloc(&ar, 32), *got = ar_alloc(&ar, 32);

			if (!db || !want || !got)
				break;
			api_drift_bundle(db, &b[i], dev_name(api->d.devs, d),
					 holder ? holder->job_id : NULL, want, got, 32);
			r.bundles[r.n_bundles++] = db;
		}
	}
	api_reply(call, &r.base, ar.failed);
	ar_free_all(&ar);
}

void api_serve_list_drift(struct api *api, struct nb_call *call, const void *msg)
{
	const char *name = ((const Ocs__V1__ListDriftRequest *)msg)->device;
	int one = name[0] ? find_device(api, name) : -1;
	Ocs__V1__ListDriftResponse r = OCS__V1__LIST_DRIFT_RESPONSE__INIT;
	size_t total = 0, k = 0, n;
	struct arena ar = {0};

	if (name[0] && one < 0) {
		api_failf(call, ERR_NOT_FOUND, "device", "no device %s", name);
		return;
	}
	if (api->d.node_drift) {
		list_node_drift(api, call, one);
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
	api_reply(call, &r.base, ar.failed);
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
		api_failf(call, ERR_NOT_FOUND, "scope.device", "no device %s", s->device);
		return false;
	}
	out->has_ports = s->has_ports;
	out->in = s->in_port;
	out->out = s->out_port;
	return true;
}

void *api_adopted_request(const char *id, size_t *len)
{
	Ocs__V1__JobSpec spec = OCS__V1__JOB_SPEC__INIT;
	uint8_t *raw;

	spec.id = (char *)id;
	*len = ocs__v1__job_spec__get_packed_size(&spec);
	raw = malloc(*len + 1);
	if (raw)
		ocs__v1__job_spec__pack(&spec, raw);
	return raw;
}

void api_serve_adopt(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__AdoptCrossConnectsRequest *q = msg;
	Ocs__V1__AdoptCrossConnectsResponse r = OCS__V1__ADOPT_CROSS_CONNECTS_RESPONSE__INIT;
	struct adopt_scope scope;
	struct err_info err;
	struct ocs_xc *xcs = NULL;
	struct fs_circuit *cs = NULL;
	struct arena ar = {0};
	char id[NB_ID_MAX_LEN + 1];
	void *raw;
	size_t n = 0, raw_len;

	if (!drift_scope(api, call, q->scope, &scope))
		return;
	if (q->job_id[0])
		snprintf(id, sizeof(id), "%s", q->job_id);
	else
		snprintf(id, sizeof(id), "adopted-%lld", (long long)(clk_wall_ms(NULL) / 1000));
	raw = api_adopted_request(id, &raw_len); /* the request GetJob hands back */
	if (!raw) {
		api_failf(call, ERR_INTERNAL, "", "out of memory");
		return;
	}
	if (adopt_select(api->d.drift, api->d.fs, api->d.devs, &api->d.cfg->fabric, &scope, false,
			 &xcs, &n, &err) != 0 ||
	    jm_adopt(api->jm, id, raw, raw_len, xcs, n, &err) != 0) {
		free(xcs);
		free(raw);
		api_fail(call, &err);
		return;
	}
	free(raw);
	dr_forget(api->d.drift, xcs, n);
	free(xcs);
	log_job(LOG_NOTICE, id, nb_call_peer(call), "adopted %zu cross-connect(s) as job %s", n,
		id);
	cs = fs_circuits(api->d.fs, id, -1, -1, &n);
	r.job_id = id;
	r.circuits = cs ? api_build_circuits(api, &ar, cs, n) : NULL;
	r.n_circuits = r.circuits ? n : 0;
	api_reply(call, &r.base, !cs || ar.failed);
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
			c->device = (char *)api_device_name(api, &cc->xcs[i]);
			c->in_port = cc->xcs[i].in;
			c->out_port = cc->xcs[i].out;
			r.cross_connects[r.n_cross_connects++] = c;
		}
		api_reply(cc->call, &r.base, ar.failed);
	} else if (o->result == TXN_FAILED) {
		api_failf(cc->call, ERR_INTERNAL, "",
			  "devices: %s; a rollback could not be proven: the fabric needs "
			  "reconciliation",
			  o->message);
	} else {
		api_failf(cc->call, ERR_UNAVAILABLE, "", "devices: %s; nothing changed",
			  o->message);
	}
	ar_free_all(&ar);
	free(cc->xcs);
	free(cc);
}

void api_serve_clear(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ClearCrossConnectsRequest *q = msg;
	struct clear_call *cc;
	struct adopt_scope scope;
	struct err_info err;
	struct txn_change c;
	char why[400] = "";
	int rc;

	if (!drift_scope(api, call, q->scope, &scope))
		return;
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		api_failf(call, ERR_INTERNAL, "", "out of memory");
		return;
	}
	*cc = (struct clear_call){api, call, NULL, 0};
	if (adopt_select(api->d.drift, api->d.fs, api->d.devs, &api->d.cfg->fabric, &scope, true,
			 &cc->xcs, &cc->n, &err) != 0) {
		free(cc);
		api_fail(call, &err);
		return;
	}
	c = (struct txn_change){.job_id = "ocsd-clear", .removals = cc->xcs, .n_removals = cc->n};
	rc = jm_external_txn(api->jm, &c, clear_done, cc, why, sizeof(why));
	if (rc) {
		api_failf(call, rc == -ENOMEM ? ERR_INTERNAL : ERR_UNAVAILABLE, "",
			  "%s; nothing changed", why);
		free(cc->xcs);
		free(cc);
	}
}

/* ---- miswired fibre (issue 23, cabling.h) ---- */

/* A MiswiredPort message of entry e (allocated in ar; NULL when it runs out). */
static Ocs__V1__MiswiredPort *build_miswired(struct api *api, struct arena *ar,
					     const struct cab_entry *e)
{
	Ocs__V1__MiswiredPort *m = ar_alloc(ar, sizeof(*m));

	if (!m)
		return NULL;
	ocs__v1__miswired_port__init(m);
	m->device = (char *)dev_name(api->d.devs, e->device);
	m->port = e->port;
	m->side = e->egress ? "egress" : "ingress";
	m->expected = ar_strdup(ar, e->expected);
	m->reported = ar_strdup(ar, e->reported);
	m->cleared = e->cleared;
	return m;
}

void api_serve_list_cabling(struct api *api, struct nb_call *call, const void *msg)
{
	const char *name = ((const Ocs__V1__ListCablingRequest *)msg)->device;
	int one = name[0] ? find_device(api, name) : -1;
	Ocs__V1__ListCablingResponse r = OCS__V1__LIST_CABLING_RESPONSE__INIT;
	const struct cab_entry *e = NULL;
	struct arena ar = {0};
	size_t n = 0;

	if (name[0] && one < 0) {
		api_failf(call, ERR_NOT_FOUND, "device", "no device %s", name);
		return;
	}
	if (api->d.cabling)
		e = cab_list(api->d.cabling, &n);
	r.ports = ar_alloc(&ar, (n + 1) * sizeof(*r.ports));
	for (size_t i = 0; r.ports && i < n; i++) {
		if (one >= 0 && e[i].device != one)
			continue;
		if (!(r.ports[r.n_ports] = build_miswired(api, &ar, &e[i])))
			break;
		r.n_ports++;
		r.miswired += !e[i].cleared;
	}
	api_reply(call, &r.base, ar.failed);
	ar_free_all(&ar);
}

void api_serve_clear_cabling(struct api *api, struct nb_call *call, const void *msg)
{
	const Ocs__V1__ClearCablingRequest *q = msg;
	Ocs__V1__ClearCablingResponse r = OCS__V1__CLEAR_CABLING_RESPONSE__INIT;
	int id = find_device(api, q->device);
	const struct cab_entry *e;
	struct arena ar = {0};
	size_t n;

	if (id < 0) {
		api_failf(call, ERR_NOT_FOUND, "device", "no device %s", q->device);
		return;
	}
	if (!api->d.cabling || cab_clear(api->d.cabling, id, (uint16_t)q->port) != 0) {
		api_failf(call, ERR_NOT_FOUND, "port",
			  "device %s port %d is not reported miswired (ocsctl cabling lists "
			  "the ports that are)",
			  q->device, q->port);
		return;
	}
	log_job(LOG_NOTICE, NULL, nb_call_peer(call),
		"device %s port %d: miswiring report cleared by an operator; planned on again",
		q->device, q->port);
	api_cabling_gauge(api);
	e = cab_list(api->d.cabling, &n);
	r.ports = ar_alloc(&ar, 3 * sizeof(*r.ports));
	for (size_t i = 0; r.ports && i < n && r.n_ports < 2; i++)
		if (e[i].device == id && e[i].port == q->port &&
		    (r.ports[r.n_ports] = build_miswired(api, &ar, &e[i])) != NULL)
			r.n_ports++;
	api_reply(call, &r.base, ar.failed);
	ar_free_all(&ar);
}
