/*
 * api_pb.c - the daemon's records and enums as ocs.v1 messages, each
 * mapped once: job states, job manager errors to gRPC status (api_fail;
 * api_failf for the API's own: every failure the API answers goes through it),
 * circuits and their cross-connects, rings, devices. Replies are built in a
 * per-request arena (arena.h) that the caller frees after answering. Used
 * by every file of the API (api_internal.h); calls none of them.
 *
 * Return values left unchecked here, and why that is safe:
 *  - nb_call_reply() and nb_call_fail() always answer the call; their result
 *    only says how.
 */
#include <stdarg.h>
#include <stdio.h>

#include "api_internal.h"
#include "arena.h"
#include "config.h"
#include "devices.h"
#include "fabric_state.h"
#include "rings.h"

/* ---- the daemon's enums in the API, each mapped once ---- */

Ocs__V1__JobState api_job_state_pb(enum jm_state s)
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

static enum nb_code map_status(enum err_status s)
{
	switch (s) {
	case ERR_OK:
		return NB_OK;
	case ERR_INVALID:
		return NB_INVALID_ARGUMENT;
	case ERR_NOT_FOUND:
		return NB_NOT_FOUND;
	case ERR_EXISTS:
		return NB_ALREADY_EXISTS;
	case ERR_EXHAUSTED:
		return NB_RESOURCE_EXHAUSTED;
	case ERR_PRECONDITION:
		return NB_FAILED_PRECONDITION;
	case ERR_UNAVAILABLE:
		return NB_UNAVAILABLE;
	case ERR_ABORTED:
		return NB_ABORTED;
	case ERR_CANCELLED:
		return NB_CANCELLED;
	case ERR_INTERNAL:
		break;
	}
	return NB_INTERNAL;
}

void api_fail(struct nb_call *call, const struct err_info *err)
{
	nb_call_fail(call, map_status(err->status), err->field, "%s", err->message);
}

void api_failf(struct nb_call *call, enum err_status status, const char *field, const char *fmt,
	       ...)
{
	struct err_info err = {.status = status};
	va_list ap;

	snprintf(err.field, sizeof(err.field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	api_fail(call, &err);
}

void api_reply(struct nb_call *call, const ProtobufCMessage *r, bool failed)
{
	if (failed)
		api_failf(call, ERR_INTERNAL, "", "out of memory building the reply");
	else
		nb_call_reply(call, r);
}

void api_publish_condition(struct nb_server *server, bool gpu, int64_t id, bool faulty,
			   const char *source)
{
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__NodeEvent ne = OCS__V1__NODE_EVENT__INIT;
	Ocs__V1__GpuEvent ge = OCS__V1__GPU_EVENT__INIT;

	if (!server)
		return;
	if (gpu) {
		ge.gpu = id;
		ge.condition = faulty ? OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY
				      : OCS__V1__GPU_CONDITION__GPU_CONDITION_HEALTHY;
		ge.source = (char *)source;
		ev.kind_case = OCS__V1__EVENT__KIND_GPU;
		ev.gpu = &ge;
	} else {
		ne.node = (int32_t)id;
		ne.condition = faulty ? OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY
				      : OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY;
		ne.source = (char *)source;
		ev.kind_case = OCS__V1__EVENT__KIND_NODE;
		ev.node = &ne;
	}
	nb_server_publish(server, &ev);
}

/* ---- building replies ---- */

const char *api_device_name(const struct api *api, const struct ocs_xc *xc)
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
	m->device = (char *)api_device_name(api, xc);
	m->in_port = xc->in;
	m->out_port = xc->out;
	return m;
}

Ocs__V1__Circuit **api_build_circuits(struct api *api, struct arena *ar,
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
	case RG_EXTENDED:
		return OCS__V1__RING_CHANGE__RING_CHANGE_BYPASS_EXTENDED;
	}
	return OCS__V1__RING_CHANGE__RING_CHANGE_UNSPECIFIED;
}

/* A Ring message (allocated in ar; NULL when it runs out). */
Ocs__V1__Ring *api_build_ring(struct arena *ar, const struct rg_ring *r)
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

Ocs__V1__Ring **api_build_rings(struct arena *ar, const struct rg_ring *r, size_t n)
{
	Ocs__V1__Ring **v = ar_alloc(ar, (n ? n : 1) * sizeof(*v));

	for (size_t i = 0; v && i < n; i++)
		if (!(v[i] = api_build_ring(ar, &r[i])))
			return NULL;
	return v;
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

Ocs__V1__Device *api_build_device(struct api *api, struct arena *ar, int id)
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
	/* What the device says of itself (a Polatis switch's product-information). */
	m->vendor = ar_strdup(ar, ds.product->manufacturer);
	m->model = ar_strdup(ar, ds.product->model);
	m->serial = ar_strdup(ar, ds.product->serial);
	m->software = ar_strdup(ar, ds.product->software);
	m->ports_down = ds.ports_down;
	return m;
}
