/*
 * ocsctl_fabric.c - ocsctl's fabric commands (the Fabric service and the
 * event stream): status, fabric, devices, circuits, drain and undrain,
 * drift, adopt and clear (issue 14 #2), cabling and cabling clear (issue
 * 23), rings, node fail|heal, and watch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_internal.h"
#include "ocsctl_internal.h"
#include "pbjson.h"

static bool ring_domain(const Ocs__V1__FabricSummary *f)
{
	return strcmp(f->kind, "ocstrx-ring") == 0;
}

/*
 * status's replica rows (issue 15 #6), none when ocsd runs alone (no
 * replica id): "replica a (follower)", "leader b at HOST:PORT" and
 * "replicas a HOST:PORT, b HOST:PORT (leader)"; then "store problem" when
 * the store refuses writes.
 */
static void replica_rows(struct out_table *t, const Ocs__V1__FabricSummary *f)
{
	char *row[2];

	if (f->replica_id[0]) {
		char *list = out_fmt("%s", f->n_replicas ? "" : "-");

		row[0] = out_fmt("replica");
		row[1] = out_fmt("%s (%s)", f->replica_id, f->role[0] ? f->role : "unknown role");
		out_table_add(t, row);
		row[0] = out_fmt("leader");
		if (f->leader_id[0] || f->leader_address[0])
			row[1] = out_fmt("%s at %s", f->leader_id[0] ? f->leader_id : "?",
					 f->leader_address[0] ? f->leader_address : "?");
		else
			row[1] = out_fmt("none known");
		out_table_add(t, row);
		for (size_t i = 0; i < f->n_replicas; i++) {
			const Ocs__V1__Replica *r = f->replicas[i];
			char *next = out_fmt("%s%s%s %s%s", list, i ? ", " : "", r->id, r->address,
					     r->leader ? " (leader)" : "");

			free(list);
			list = next;
		}
		row[0] = out_fmt("replicas");
		row[1] = list;
		out_table_add(t, row);
	}
	if (f->store_problem[0]) {
		row[0] = out_fmt("store problem");
		row[1] = out_fmt("%s", f->store_problem);
		out_table_add(t, row);
	}
}

int fabric_cmd_status(struct ctx *x)
{
	Grpc__Health__V1__HealthCheckRequest hreq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	Ocs__V1__GetFabricRequest freq = OCS__V1__GET_FABRIC_REQUEST__INIT;
	Grpc__Health__V1__HealthCheckResponse *health = NULL;
	Ocs__V1__FabricSummary *f = NULL;
	int rc = rpc_call(x, NB_HEALTH_CHECK, &hreq.base, &health);

	if (rc == EXIT_OK)
		rc = rpc_call(x, NB_FABRIC_GET_FABRIC, &freq.base, &f);
	if (rc != EXIT_OK) {
		rpc_free_msg(health);
		return rc;
	}
	if (x->o.json) {
		json_t *v = json_pack(
			"{s:s, s:o, s:o}", "server", ocsctl_servers_current(x->servers), "health",
			pbjson_write(&health->base), "fabric", pbjson_write(&f->base));

		rc = out_print_json_value(v, true);
		json_decref(v);
	} else {
		struct out_table t = {.cols = 2};
		char *row[2];

		row[0] = out_fmt("server"); /* the one that answered */
		row[1] = out_fmt("%s", ocsctl_servers_current(x->servers));
		out_table_add(&t, row);
		row[0] = out_fmt("health");
		row[1] = out_enum_short(
			&grpc__health__v1__health_check_response__serving_status__descriptor,
			health->status);
		out_table_add(&t, row);
		row[0] = out_fmt("version");
		row[1] = out_fmt("%s", f->version);
		out_table_add(&t, row);
		row[0] = out_fmt("store");
		row[1] = out_fmt("%s", f->store);
		out_table_add(&t, row);
		replica_rows(&t, f);
		row[0] = out_fmt("fabric");
		if (ring_domain(f))
			row[1] = out_fmt(
				"ocstrx-ring, %d nodes (%d ToRs x %d), %lld GPUs, K=%d, %s, "
				"%d devices",
				f->nodes, f->tors, f->nodes_per_tor, (long long)f->gpus, f->k_hops,
				f->closed ? "closed ring" : "open line", f->devices);
		else
			row[1] = out_fmt("%d pods, %d leaves, %lld GPUs, %s wiring, %d OCS groups, "
					 "%d devices",
					 f->pods, f->leaves, (long long)f->gpus, f->wiring,
					 f->groups, f->devices);
		out_table_add(&t, row);
		row[0] = out_fmt("devices");
		row[1] = out_fmt("%d connected, %d drained", f->devices_connected,
				 f->devices_drained);
		out_table_add(&t, row);
		row[0] = out_fmt("jobs");
		row[1] = out_fmt("%d active", f->jobs_active);
		out_table_add(&t, row);
		if (ring_domain(f)) {
			row[0] = out_fmt("rings");
			row[1] = out_fmt("%d active", f->rings_active);
			out_table_add(&t, row);
			row[0] = out_fmt("nodes");
			row[1] = out_fmt("%d busy, %d faulty, %d free", f->nodes_busy,
					 f->nodes_faulty,
					 f->nodes - f->nodes_busy - f->nodes_faulty);
			out_table_add(&t, row);
		} else {
			row[0] = out_fmt("circuits");
			row[1] = out_fmt("%d active", f->circuits_active);
			out_table_add(&t, row);
			row[0] = out_fmt("ocs ports");
			row[1] = out_fmt("%lld used, %lld free", (long long)f->ocs_ports_used,
					 (long long)f->ocs_ports_free);
			out_table_add(&t, row);
		}
		out_table_print(&t);
	}
	rpc_free_msg(health);
	rpc_free_msg(f);
	return rc;
}

int fabric_cmd_fabric(struct ctx *x)
{
	Ocs__V1__GetFabricRequest req = OCS__V1__GET_FABRIC_REQUEST__INIT;
	Ocs__V1__FabricSummary *f;
	int rc = rpc_call(x, NB_FABRIC_GET_FABRIC, &req.base, &f);

	if (rc)
		return rc;
	if (x->o.json)
		rc = out_print_json(&f->base, true);
	else if (ring_domain(f)) /* kind, the ring domain's fields and those of both kinds */
		out_print_kv_pick(&f->base, out_ids(9, 12) | out_ids(14, 14) | out_ids(17, 28));
	else if (strcmp(f->kind, "rail-ocs") == 0) /* sizes, usage, then the rail fields */
		out_print_kv_pick(&f->base, out_ids(6, 7) | out_ids(9, 18) | out_ids(29, 34));
	else /* a leaf-spine fabric, or a server that predates kind */
		out_print_kv_pick(&f->base, out_ids(1, 18));
	rpc_free_msg(f);
	return rc;
}

/*
 * What a device says it is, in one column: "vendor model, s/n SERIAL, sw
 * SOFTWARE" with the parts it gives, "-" when it says nothing.
 */
static char *device_product(const Ocs__V1__Device *d)
{
	char *p = out_fmt("%s%s%s", d->vendor, d->vendor[0] && d->model[0] ? " " : "", d->model);

	if (d->serial[0]) {
		char *q = out_fmt("%s%ss/n %s", p, p[0] ? ", " : "", d->serial);

		free(p);
		p = q;
	}
	if (d->software[0]) {
		char *q = out_fmt("%s%ssw %s", p, p[0] ? ", " : "", d->software);

		free(p);
		p = q;
	}
	if (!p[0]) {
		free(p);
		p = out_fmt("-");
	}
	return p;
}

int fabric_cmd_devices(struct ctx *x)
{
	Ocs__V1__ListDevicesRequest req = OCS__V1__LIST_DEVICES_REQUEST__INIT;
	Ocs__V1__ListDevicesResponse *r;
	struct out_table t = {.cols = 13};
	int rc;

	if (x->o.group >= 0) {
		req.has_group = true;
		req.group = x->o.group;
	}
	rc = rpc_call(x, NB_FABRIC_LIST_DEVICES, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
		rpc_free_msg(r);
		return rc;
	}
	char *head[13] = {out_fmt("NAME"),	 out_fmt("GROUP"),    out_fmt("INDEX"),
			  out_fmt("ADDRESS"),	 out_fmt("SESSION"),  out_fmt("SINCE"),
			  out_fmt("HEALTH"),	 out_fmt("DRAINED"),  out_fmt("PORTS"),
			  out_fmt("PORTS DOWN"), out_fmt("CIRCUITS"), out_fmt("PRODUCT"),
			  out_fmt("LAST ERROR")};
	out_table_header(&t, head);
	for (size_t i = 0; i < r->n_devices; i++) {
		const Ocs__V1__Device *d = r->devices[i];
		char *row[13] = {out_fmt("%s", d->name),
				 out_fmt("%d", d->group),
				 out_fmt("%d", d->index),
				 out_fmt("%s", d->address),
				 out_enum_short(&ocs__v1__session_state__descriptor, d->session),
				 out_time_text(d->session_since_unix_ms),
				 out_enum_short(&ocs__v1__device_health__descriptor, d->health),
				 out_fmt("%s", d->drained ? "yes" : "no"),
				 out_fmt("%d/%d", d->ports_used, d->ports_total),
				 out_fmt("%d", d->ports_down),
				 out_fmt("%d", d->circuits),
				 device_product(d),
				 out_fmt("%s", d->session_error[0] ? d->session_error : "-")};

		out_table_add(&t, row);
	}
	out_table_print(&t);
	rpc_free_msg(r);
	return EXIT_OK;
}

int fabric_cmd_circuits(struct ctx *x)
{
	Ocs__V1__ListCircuitsRequest req = OCS__V1__LIST_CIRCUITS_REQUEST__INIT;
	Ocs__V1__ListCircuitsResponse all = OCS__V1__LIST_CIRCUITS_RESPONSE__INIT, *r = &all;
	struct rpc_pages pg = {0};
	int rc;

	if (x->o.job)
		req.job_id = (char *)x->o.job;
	if (x->o.device)
		req.device = (char *)x->o.device;
	if (x->o.pod >= 0) {
		req.has_pod = true;
		req.pod = x->o.pod;
	}
	rc = rpc_follow_pages(x, NB_FABRIC_LIST_CIRCUITS, &req.base, &req.page_token, &pg);
	if (rc) {
		rpc_pages_free(&pg);
		return rc;
	}
	all.circuits = (Ocs__V1__Circuit **)pg.items;
	all.n_circuits = pg.n_items;
	if (x->o.json)
		rc = out_print_json(&r->base, true);
	else
		out_circuits_table(r->circuits, r->n_circuits);
	rpc_pages_free(&pg);
	return rc;
}

int fabric_cmd_drain(struct ctx *x, const char *device, bool drain)
{
	int rc;

	if (drain) {
		Ocs__V1__DrainDeviceRequest req = OCS__V1__DRAIN_DEVICE_REQUEST__INIT;
		Ocs__V1__DrainDeviceResponse *r;

		req.device = (char *)device;
		req.force = x->o.force;
		rc = rpc_call(x, NB_FABRIC_DRAIN_DEVICE, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json) {
			rc = out_print_json(&r->base, true);
		} else {
			printf("device %s: drained\n", device);
			for (size_t i = 0; i < r->n_affected_jobs; i++)
				printf("running job with circuits on it: %s\n",
				       r->affected_jobs[i]);
		}
		rpc_free_msg(r);
	} else {
		Ocs__V1__UndrainDeviceRequest req = OCS__V1__UNDRAIN_DEVICE_REQUEST__INIT;
		Ocs__V1__UndrainDeviceResponse *r;

		req.device = (char *)device;
		rc = rpc_call(x, NB_FABRIC_UNDRAIN_DEVICE, &req.base, &r);
		if (rc)
			return rc;
		if (x->o.json)
			rc = out_print_json(&r->base, true);
		else
			printf("device %s: undrained\n", device);
		rpc_free_msg(r);
	}
	return rc;
}

/* ---- drift (issue 14 #2) ---- */

/* Ring domains: one row per bundle that differs from the ring state. */
static void print_drift_bundles(const Ocs__V1__ListDriftResponse *r)
{
	struct out_table t = {.cols = 6};
	char *head[6] = {out_fmt("NODE"),  out_fmt("BUNDLE"),  out_fmt("EXPECTED"),
			 out_fmt("FOUND"), out_fmt("REACHES"), out_fmt("ACTION")};

	out_table_header(&t, head);
	for (size_t i = 0; i < r->n_bundles; i++) {
		const Ocs__V1__DriftBundle *b = r->bundles[i];
		char *row[6] = {out_fmt("%d", b->node),
				out_fmt("%d", b->bundle),
				out_fmt("%s", b->expected),
				out_fmt("%s", b->found),
				b->found_peer >= 0 ? out_fmt("%d", b->found_peer) : out_fmt("-"),
				b->job_id[0] ? out_fmt("reprogram (job %s)", b->job_id)
					     : out_fmt("report (no ring)")};

		out_table_add(&t, row);
	}
	out_table_print(&t);
}

int fabric_cmd_drift(struct ctx *x)
{
	Ocs__V1__ListDriftRequest req = OCS__V1__LIST_DRIFT_REQUEST__INIT;
	Ocs__V1__ListDriftResponse *r;
	struct out_table t = {.cols = 4};
	int rc;

	if (x->o.device)
		req.device = (char *)x->o.device;
	rc = rpc_call(x, NB_FABRIC_LIST_DRIFT, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
		rpc_free_msg(r);
		return rc;
	}
	if (r->n_bundles) {
		print_drift_bundles(r);
		rpc_free_msg(r);
		return rc;
	}
	char *head[4] = {out_fmt("DEVICE"), out_fmt("IN"), out_fmt("OUT"), out_fmt("DRIFT")};
	out_table_header(&t, head);
	for (size_t i = 0; i < r->n_cross_connects; i++) {
		const Ocs__V1__DriftCrossConnect *c = r->cross_connects[i];
		char *row[4] = {out_fmt("%s", c->device), out_fmt("%d", c->in_port),
				out_fmt("%d", c->out_port),
				out_fmt("%s", c->missing ? "missing" : "unowned")};

		out_table_add(&t, row);
	}
	out_table_print(&t);
	for (size_t i = 0; i < r->n_unverified_devices; i++)
		printf("not verified since an empty-store start (no new circuits): %s\n",
		       r->unverified_devices[i]);
	rpc_free_msg(r);
	return rc;
}

static Ocs__V1__DriftScope *drift_scope(const struct ctx *x, Ocs__V1__DriftScope *s)
{
	ocs__v1__drift_scope__init(s);
	if (x->o.device)
		s->device = (char *)x->o.device;
	s->has_ports = x->o.has_ports;
	s->in_port = x->o.in_port;
	s->out_port = x->o.out_port;
	return s;
}

int fabric_cmd_adopt(struct ctx *x)
{
	Ocs__V1__AdoptCrossConnectsRequest req = OCS__V1__ADOPT_CROSS_CONNECTS_REQUEST__INIT;
	Ocs__V1__AdoptCrossConnectsResponse *r;
	Ocs__V1__DriftScope scope;
	int rc;

	req.scope = drift_scope(x, &scope);
	if (x->o.job)
		req.job_id = (char *)x->o.job;
	rc = rpc_call(x, NB_FABRIC_ADOPT_CROSS_CONNECTS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
	} else {
		printf("adopted %zu circuit(s) as job %s (job release %s frees them)\n",
		       r->n_circuits, r->job_id, r->job_id);
		out_circuits_table(r->circuits, r->n_circuits);
	}
	rpc_free_msg(r);
	return rc;
}

int fabric_cmd_clear(struct ctx *x)
{
	Ocs__V1__ClearCrossConnectsRequest req = OCS__V1__CLEAR_CROSS_CONNECTS_REQUEST__INIT;
	Ocs__V1__ClearCrossConnectsResponse *r;
	Ocs__V1__DriftScope scope;
	int rc;

	req.scope = drift_scope(x, &scope);
	rc = rpc_call(x, NB_FABRIC_CLEAR_CROSS_CONNECTS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
	} else {
		printf("cleared %zu cross-connect(s)\n", r->n_cross_connects);
		for (size_t i = 0; i < r->n_cross_connects; i++)
			printf("%s %d->%d\n", r->cross_connects[i]->device,
			       r->cross_connects[i]->in_port, r->cross_connects[i]->out_port);
	}
	rpc_free_msg(r);
	return rc;
}

/* ---- cabling (issue 23) ---- */

int fabric_cmd_cabling(struct ctx *x)
{
	Ocs__V1__ListCablingRequest req = OCS__V1__LIST_CABLING_REQUEST__INIT;
	Ocs__V1__ListCablingResponse *r;
	struct out_table t = {.cols = 6};
	int rc;

	if (x->o.device)
		req.device = (char *)x->o.device;
	rc = rpc_call(x, NB_FABRIC_LIST_CABLING, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
		rpc_free_msg(r);
		return rc;
	}
	char *head[6] = {out_fmt("DEVICE"),   out_fmt("PORT"),	   out_fmt("SIDE"),
			 out_fmt("EXPECTED"), out_fmt("REPORTED"), out_fmt("CLEARED")};
	out_table_header(&t, head);
	for (size_t i = 0; i < r->n_ports; i++) {
		const Ocs__V1__MiswiredPort *p = r->ports[i];
		char *row[6] = {out_fmt("%s", p->device),
				out_fmt("%d", p->port),
				out_fmt("%s", p->side),
				out_fmt("%s", p->expected[0] ? p->expected : "(not cabled)"),
				out_fmt("%s", p->reported),
				out_fmt("%s", p->cleared ? "yes" : "no")};

		out_table_add(&t, row);
	}
	out_table_print(&t);
	printf("%d miswired port(s) kept out of every plan\n", r->miswired);
	rpc_free_msg(r);
	return rc;
}

int fabric_cmd_cabling_clear(struct ctx *x, const char *device, long port)
{
	Ocs__V1__ClearCablingRequest req = OCS__V1__CLEAR_CABLING_REQUEST__INIT;
	Ocs__V1__ClearCablingResponse *r;
	int rc;

	req.device = (char *)device;
	req.port = (int32_t)port;
	rc = rpc_call(x, NB_FABRIC_CLEAR_CABLING, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json)
		rc = out_print_json(&r->base, true);
	else
		printf("device %s port %ld: cleared (%zu report(s)); planners use it again\n",
		       device, port, r->n_ports);
	rpc_free_msg(r);
	return rc;
}

int fabric_cmd_rings(struct ctx *x)
{
	Ocs__V1__ListRingsRequest req = OCS__V1__LIST_RINGS_REQUEST__INIT;
	Ocs__V1__ListRingsResponse *r;
	int rc;

	if (x->o.job)
		req.job_id = (char *)x->o.job;
	if (x->o.node >= 0) {
		req.has_node = true;
		req.node = x->o.node;
	}
	rc = rpc_call(x, NB_FABRIC_LIST_RINGS, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		json_t *v = out_rings_json(r);

		rc = out_print_json_value(v, true);
		json_decref(v);
	} else {
		out_rings_table(r->rings, r->n_rings);
	}
	rpc_free_msg(r);
	return rc;
}

int fabric_cmd_node(struct ctx *x, long node, bool fail)
{
	Ocs__V1__MarkNodeRequest req = OCS__V1__MARK_NODE_REQUEST__INIT;
	Ocs__V1__MarkNodeResponse *r;
	int rc;

	req.node = (int32_t)node;
	req.condition = fail ? OCS__V1__NODE_CONDITION__NODE_CONDITION_FAULTY
			     : OCS__V1__NODE_CONDITION__NODE_CONDITION_HEALTHY;
	rc = rpc_call(x, NB_FABRIC_MARK_NODE, &req.base, &r);
	if (rc)
		return rc;
	if (x->o.json) {
		rc = out_print_json(&r->base, true);
	} else {
		char *cond = out_enum_short(&ocs__v1__node_condition__descriptor, r->condition);

		printf("node %d: %s\n", r->node, cond);
		for (size_t i = 0; i < r->n_affected_jobs; i++)
			printf("ring repaired for job %s\n", r->affected_jobs[i]);
		free(cond);
	}
	rpc_free_msg(r);
	return rc;
}

int fabric_cmd_watch(struct ctx *x)
{
	Ocs__V1__WatchRequest req = OCS__V1__WATCH_REQUEST__INIT;
	/* Any replica serves Watch: the one connected to. */
	struct nb_client *client = ocsctl_servers_client(x->servers);
	struct nb_client_status st;
	long seen = 0;

	if (nb_client_stream_open(client, nb_method_path(NB_EVENTS_WATCH), &req.base, &st))
		return rpc_report_failure(x, &st);
	for (;;) {
		Ocs__V1__Event *e;
		int rc = nb_client_stream_next(client, &ocs__v1__event__descriptor,
					       (ProtobufCMessage **)&e, &st);

		if (rc != 0) {
			nb_client_stream_close(client);
			return rpc_report_failure(x, &st);
		}
		if (x->o.json && out_print_json(&e->base, false) != EXIT_OK) {
			rpc_free_msg(e);
			nb_client_stream_close(client);
			return EXIT_REFUSED;
		}
		if (!x->o.json)
			out_print_event(e);
		rpc_free_msg(e);
		if (fflush(stdout) == EOF || ferror(stdout)) {
			/* SIGPIPE is ignored: a reader that went away (watch | head)
			 * had enough, like --count; another failure is reported */
			int werr = errno;
			if (werr != EPIPE)
				fprintf(stderr, "ocsctl: cannot write the events: %s\n",
					strerror(werr));
			nb_client_stream_close(client);
			return werr == EPIPE ? EXIT_OK : EXIT_REFUSED;
		}
		if (x->o.count && ++seen >= x->o.count)
			break;
	}
	nb_client_stream_close(client);
	return EXIT_OK;
}
