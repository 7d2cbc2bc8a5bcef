/*
 * daemon_status.c - the status page on the metrics listener
 * (daemon/status/): "/", "/status.js", "/status.css", "/state.json" and
 * "/topology.svg", each a GET on the loop thread. A request fills an
 * sp_snapshot from the daemon's memory (jobs, the fabric state's circuits,
 * devices, drift (a ring domain's: its bundles), rings, rails, the
 * replica's role), renders it and frees
 * it; nothing is cached and nothing is written. Secrets never enter the
 * snapshot (no password, no key file, no device address).
 *
 * A follower (od->jm NULL) shows its view (fw_jm, fw_parts): the jobs,
 * circuits, rings, rail faults and drains of its store copy, and its
 * leader. It reads no device, so its devices show session and health
 * "unknown" and no drift.
 *
 * Recent events are not kept in a log of their own: they are the last
 * changes the state already records (a job's state, a ring's change, a
 * device session's), newest SP_MAX_EVENTS.
 */
#include "daemon_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "clock.h"
#include "devices.h"
#include "drift.h"
#include "fabric_state.h"
#include "follower.h"
#include "jobs.h"
#include "metrics_http.h"
#include "rails.h"
#include "replica.h"
#include "rings.h"
#include "status.h"
#include "store.h"
#include "strmap.h"

#define OD_EVENT_TEXT 200
#define OD_SETTING    32 /* dr_bundle_setting(): "external 255 down" */

/* Where a snapshot is read from: the leader's (or a standalone ocsd's)
 * own state, or a follower's view. */
struct od_src {
	struct jm *jm;
	struct fs_state *fs;
	struct rg_state *rings;
	struct rl_state *rl;
	struct devices *devs;
	bool follower; /* devs holds drains only: no session, health or drift */
};

/* A snapshot and what it points into, freed together by snap_free(). */
struct od_snap {
	struct sp_snapshot s;
	struct sp_circuit *circuits;
	int *faulty_nodes;
	struct sp_bundle_drift *bundle_drift;
	char (*settings)[2][OD_SETTING]; /* each bundle_drift's expected and found */
	int64_t *faulty_gpus;
	size_t ring_job; /* add_ring_gpus(): the job it found last (a guess, checked) */
	struct sp_event events[SP_MAX_EVENTS];
	char event_text[SP_MAX_EVENTS][OD_EVENT_TEXT];
	char leader[400];
	struct dev_status *st;
};

static void snap_free(struct od_snap *x)
{
	if (!x)
		return;
	free(x->s.jobs);
	free(x->s.devices);
	free(x->s.rings);
	free(x->circuits);
	free(x->faulty_nodes);
	free(x->bundle_drift);
	free(x->settings);
	free(x->faulty_gpus);
	free(x->st);
	free(x);
}

static const char *session_name(enum dev_session s)
{
	return s == DEV_SESSION_CONNECTED      ? "connected"
	       : s == DEV_SESSION_DISCONNECTED ? "disconnected"
					       : "connecting";
}

static const char *health_name(enum dev_health h)
{
	return h == DEV_HEALTH_HEALTHY	     ? "healthy"
	       : h == DEV_HEALTH_UNREACHABLE ? "unreachable"
					     : "unknown";
}

/* Keeps the SP_MAX_EVENTS newest: replaces the oldest once full. */
static void add_event(struct od_snap *x, int64_t at_ms, const char *fmt, const char *a,
		      const char *b)
{
	size_t slot = x->s.n_events;

	if (at_ms <= 0)
		return;
	if (slot == SP_MAX_EVENTS) {
		slot = 0;
		for (size_t i = 1; i < SP_MAX_EVENTS; i++)
			if (x->events[i].at_ms < x->events[slot].at_ms)
				slot = i;
		if (x->events[slot].at_ms >= at_ms)
			return;
	} else {
		x->s.n_events++;
	}
	snprintf(x->event_text[slot], OD_EVENT_TEXT, fmt, a, b);
	x->events[slot] = (struct sp_event){at_ms, x->event_text[slot]};
}

static int cmp_event(const void *a, const void *b)
{
	const struct sp_event *x = a, *y = b;

	return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
}

static void fill_role(const struct od *od, struct od_snap *x)
{
	struct rp_status st;

	x->s.role = "standalone";
	x->s.leader = "";
	if (!od->rp)
		return;
	rp_status(od->rp, &st);
	if (st.role[0])
		x->s.role = od->phase == OD_PHASE_FOLLOWER ? "follower" : st.role;
	if (st.leader_id[0] || st.leader_address[0])
		snprintf(x->leader, sizeof(x->leader), "%s %s", st.leader_id, st.leader_address);
	x->s.leader = x->leader;
}

static int fill_devices(const struct od *od, const struct od_src *src, struct od_snap *x)
{
	const struct ocsd_config *cfg = od->cfg;
	size_t n = (size_t)cfg->n_devices;

	x->s.devices = calloc(n ? n : 1, sizeof(*x->s.devices));
	x->st = calloc(n ? n : 1, sizeof(*x->st));
	if (!x->s.devices || !x->st)
		return -ENOMEM;
	x->s.n_devices = n;
	for (size_t i = 0; i < n; i++) {
		struct sp_device *d = &x->s.devices[i];
		size_t n_unowned = 0, n_missing = 0, n_bundles = 0;

		d->name = cfg->devices[i].name;
		d->group = cfg->kind == CFG_LEAF_SPINE_OCS
				   ? ocs_fabric_device_group(&cfg->fabric, (int)i)
				   : -1;
		d->session = src->devs && !src->follower ? "connecting" : "unknown";
		d->health = "unknown";
		d->error = "";
		if (src->devs && dev_status(src->devs, (int)i, &x->st[i]) == 0) {
			d->drained = x->st[i].drained;
			if (src->follower) /* it reads no device: unknown, not "connecting" */
				continue;
			d->session = session_name(x->st[i].session);
			d->health = health_name(x->st[i].health);
			d->error = x->st[i].session_error ? x->st[i].session_error : "";
			add_event(x, x->st[i].since_ms, "device %s: session %s", d->name,
				  d->session);
		}
		if (od->drift) {
			dr_device_unowned(od->drift, (int)i, &n_unowned);
			dr_device_missing(od->drift, (int)i, &n_missing);
		}
		dr_nodes_get(od->node_drift, (int)i, &n_bundles); /* device i: node i's agent */
		d->drift = n_unowned + n_missing + n_bundles;
	}
	return 0;
}

/* Jobs, and their circuits from the fabric state bucketed by job in one pass. */
static int fill_jobs(const struct od *od, const struct od_src *src, struct od_snap *x)
{
	const struct ocs_fabric *f = &od->cfg->fabric;
	struct jm *jm = src->jm;
	size_t n = jm ? jm_count(jm) : 0, n_xcs = src->fs ? fs_count(src->fs) : 0;
	size_t *next = NULL;
	struct strmap index = {0};
	int rc = -ENOMEM;

	x->s.jobs = calloc(n ? n : 1, sizeof(*x->s.jobs));
	x->circuits = calloc(n_xcs ? n_xcs : 1, sizeof(*x->circuits));
	next = calloc(n ? n : 1, sizeof(*next));
	if (!x->s.jobs || !x->circuits || !next)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct jm_job *job = jm_at(jm, i);
		struct sp_job *j = &x->s.jobs[x->s.n_jobs];

		if (!job)
			continue;
		j->id = job->id;
		j->state = jm_state_name(job->state);
		j->reason = job->reason;
		j->n_gpus = job->n_gpus;
		if (strmap_put(&index, job->id, (void *)(x->s.n_jobs + 1)) != 0)
			goto out;
		add_event(x, job->updated_ms, "job %s: %s", job->id, j->state);
		x->s.n_jobs++;
	}
	/* Count, place each job's run, then fill. */
	for (size_t i = 0; i < n_xcs; i++) {
		size_t k = (size_t)strmap_get(&index, fs_at(src->fs, i)->job_id);

		if (k)
			x->s.jobs[k - 1].n_circuits++;
	}
	for (size_t j = 0, at = 0; j < x->s.n_jobs; j++) {
		x->s.jobs[j].circuits = x->circuits + at;
		at += x->s.jobs[j].n_circuits;
	}
	for (size_t i = 0; i < n_xcs; i++) {
		const struct st_circuit *c = fs_at(src->fs, i);
		size_t k = (size_t)strmap_get(&index, c->job_id);
		struct sp_circuit *out;
		struct ocs_spine_port a, b;
		struct ocs_device_port in = {c->xc.device, c->xc.in}, o = {c->xc.device, c->xc.out};
		bool pods = od->cfg->kind == CFG_LEAF_SPINE_OCS &&
			    ocs_fabric_input_owner(f, c->xc.group, in, &a) == 0 &&
			    ocs_fabric_output_owner(f, c->xc.group, o, &b) == 0;

		if (!k)
			continue;
		out = &x->s.jobs[k - 1].circuits[next[k - 1]++];
		*out = (struct sp_circuit){ocs_fabric_device_id(f, c->xc.group, c->xc.device),
					   c->xc.in, c->xc.out, pods ? a.pod : -1,
					   pods ? b.pod : -1};
	}
	rc = 0;
out:
	strmap_clear(&index);
	free(next);
	return rc;
}

/*
 * A ring job has no placement: its GPUs are its rings' nodes'. The rings
 * of a job come one after the other, so the last job found is tried first.
 */
static void add_ring_gpus(struct od_snap *x, const char *job_id, size_t gpus)
{
	static const size_t none = (size_t)-1;
	size_t *last = &x->ring_job;

	if (!job_id)
		return;
	if (*last == none || *last >= x->s.n_jobs || strcmp(x->s.jobs[*last].id, job_id) != 0) {
		*last = none;
		for (size_t j = 0; j < x->s.n_jobs && *last == none; j++)
			if (strcmp(x->s.jobs[j].id, job_id) == 0)
				*last = j;
	}
	if (*last != none)
		x->s.jobs[*last].n_gpus += gpus;
}

static int fill_rings(const struct od *od, const struct od_src *src, struct od_snap *x)
{
	const struct ocs_ring_domain *d = &od->cfg->ring;
	struct rg_state *rings = src->rings;
	size_t n = rings ? rg_count(rings) : 0;
	int nodes = rings ? rg_nodes(rings) : 0;

	x->s.nodes = nodes;
	x->s.closed = d->closed;
	x->s.rings = calloc(n ? n : 1, sizeof(*x->s.rings));
	x->faulty_nodes = calloc(nodes > 0 ? (size_t)nodes : 1, sizeof(*x->faulty_nodes));
	if (!x->s.rings || !x->faulty_nodes)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct rg_ring *r = rg_at(rings, i);
		struct sp_ring *s = &x->s.rings[x->s.n_rings];

		if (!r)
			continue;
		*s = (struct sp_ring){r->job_id,
				      r->index,
				      r->nodes,
				      r->m > 0 ? (size_t)r->m : 0,
				      st_ring_change_name(r->last_change),
				      r->failed_node};
		if (r->last_change != RG_PLACED)
			add_event(x, r->changed_ms, "ring of job %s: %s", r->job_id, s->change);
		x->s.n_rings++;
		add_ring_gpus(x, r->job_id, (size_t)s->n_nodes * (size_t)d->gpus_per_node);
	}
	for (int v = 0; v < nodes; v++)
		if (rg_faulty(rings, v))
			x->faulty_nodes[x->s.n_faulty_nodes++] = v;
	x->s.faulty_nodes = x->faulty_nodes;
	return 0;
}

/* A ring domain's bundles that differ from the rings, as the last pass
 * found them (a follower reads no node: none). */
static int fill_bundle_drift(const struct od *od, const struct od_src *src, struct od_snap *x)
{
	size_t total = od->node_drift && !src->follower ? dr_nodes_total(od->node_drift) : 0;

	x->bundle_drift = calloc(total ? total : 1, sizeof(*x->bundle_drift));
	x->settings = calloc(total ? total : 1, sizeof(*x->settings));
	if (!x->bundle_drift || !x->settings)
		return -ENOMEM;
	for (int v = 0; total && v < dr_nodes_count(od->node_drift); v++) {
		size_t n;
		const struct dr_bundle *b = dr_nodes_get(od->node_drift, v, &n);
		const struct rg_ring *holder = src->rings ? rg_holder(src->rings, v) : NULL;

		for (size_t i = 0; i < n && x->s.n_bundle_drift < total; i++) {
			size_t k = x->s.n_bundle_drift++;

			x->bundle_drift[k] = (struct sp_bundle_drift){
				b[i].node,
				b[i].found.bundle,
				holder ? holder->job_id : "",
				dr_bundle_setting(&b[i].expected, x->settings[k][0], OD_SETTING),
				dr_bundle_setting(&b[i].found, x->settings[k][1], OD_SETTING),
				b[i].found_peer};
		}
	}
	x->s.bundle_drift = x->bundle_drift;
	return 0;
}

static int fill_rails(const struct od *od, const struct od_src *src, struct od_snap *x)
{
	const struct ocs_rail_fabric *r = &od->cfg->rail;
	int64_t gpus = (int64_t)r->servers * r->rails;
	int n = src->rl ? rl_n_faulty(src->rl) : 0;

	x->s.servers = r->servers;
	x->s.rails = r->rails;
	x->faulty_gpus = calloc(n > 0 ? (size_t)n : 1, sizeof(*x->faulty_gpus));
	if (!x->faulty_gpus)
		return -ENOMEM;
	for (int64_t g = 0; n > 0 && g < gpus && x->s.n_faulty_gpus < (size_t)n; g++)
		if (rl_faulty(src->rl, g))
			x->faulty_gpus[x->s.n_faulty_gpus++] = g;
	x->s.faulty_gpus = x->faulty_gpus;
	return 0;
}

/* NULL on allocation failure. */
static struct od_snap *snap_take(const struct od *od)
{
	struct od_snap *x = calloc(1, sizeof(*x));
	struct od_src src = {od->jm, od->fs, od->rings, od->rl, od->devs, false};
	int rc;

	if (!x)
		return NULL;
	x->s.kind = od->cfg->kind == CFG_OCSTRX_RING ? SP_RING
		    : od->cfg->kind == CFG_RAIL_OCS  ? SP_RAIL
						     : SP_LEAF_SPINE;
	x->s.name = od->cfg->name;
	x->s.now_ms = clk_wall_ms(NULL);
	x->s.events = x->events;
	if (od->cfg->kind == CFG_LEAF_SPINE_OCS) {
		x->s.pods = od->cfg->fabric.pods;
		x->s.groups = ocs_fabric_groups(&od->cfg->fabric);
	}
	if (!od->jm && od->fw) {
		struct fw_parts p;

		fw_parts(od->fw, &p);
		src = (struct od_src){fw_jm(od->fw), p.fs, p.rings, p.rl, p.devs, true};
	}
	fill_role(od, x);
	rc = fill_devices(od, &src, x);
	rc = rc ? rc : fill_jobs(od, &src, x);
	rc = rc ? rc : fill_rings(od, &src, x);
	rc = rc ? rc : fill_bundle_drift(od, &src, x);
	rc = rc ? rc : fill_rails(od, &src, x);
	if (rc) {
		snap_free(x);
		return NULL;
	}
	qsort(x->events, x->s.n_events, sizeof(x->events[0]), cmp_event);
	return x;
}

/* Renders the snapshot with render and appends it to out. */
static int serve_rendered(void *ctx, struct evbuffer *out,
			  char *(*render)(const struct sp_snapshot *, size_t *))
{
	struct od_snap *x = snap_take(ctx);
	size_t len = 0;
	char *text = x ? render(&x->s, &len) : NULL;
	int rc = text && evbuffer_add(out, text, len) == 0 ? 0 : -ENOMEM;

	free(text);
	snap_free(x);
	return rc;
}

static int serve_state(void *ctx, struct evbuffer *out, const char **type)
{
	*type = "application/json";
	return serve_rendered(ctx, out, sp_state_json);
}

static int serve_svg(void *ctx, struct evbuffer *out, const char **type)
{
	*type = "image/svg+xml";
	return serve_rendered(ctx, out, sp_topology_svg);
}

static int serve_text(struct evbuffer *out, const char *text)
{
	return evbuffer_add(out, text, strlen(text)) == 0 ? 0 : -ENOMEM;
}

static int serve_page(void *ctx, struct evbuffer *out, const char **type)
{
	(void)ctx;
	*type = "text/html; charset=utf-8";
	return serve_text(out, sp_status_html);
}

static int serve_js(void *ctx, struct evbuffer *out, const char **type)
{
	(void)ctx;
	*type = "text/javascript; charset=utf-8";
	return serve_text(out, sp_status_js);
}

static int serve_css(void *ctx, struct evbuffer *out, const char **type)
{
	(void)ctx;
	*type = "text/css; charset=utf-8";
	return serve_text(out, sp_status_css);
}

int od_start_status(struct od *od)
{
	static const struct {
		const char *path;
		mh_handler handler;
	} routes[] = {
		{"/", serve_page},
		{"/status.js", serve_js},
		{"/status.css", serve_css},
		{"/state.json", serve_state},
		{"/topology.svg", serve_svg},
	};

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (mh_route(od->http, routes[i].path, routes[i].handler, od) != 0)
			return -ENOMEM;
	return 0;
}
