/*
 * ocsctl_out.c - ocsctl's output: aligned tables and key/value blocks for
 * people, JSON (the response message itself) with --json, and the text
 * forms of the API's messages that several commands print (circuits,
 * rings, plan figures, a job, an event of watch). Prints to stdout; an
 * allocation that fails ends ocsctl (exit 2).
 */
#define _GNU_SOURCE /* vasprintf */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ocs_json.h"
#include "ocsctl_internal.h"
#include "ocsctl_rail.h"
#include "pbjson.h"

char *out_fmt(const char *f, ...)
{
	va_list ap;
	char *s;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s) {
		fputs("ocsctl: out of memory\n", stderr);
		exit(EXIT_USAGE);
	}
	return s;
}

/* Adds a row of t->cols strings (takes ownership). */
void out_table_add(struct out_table *t, char **row)
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->cells = realloc(t->cells, t->cap * (size_t)t->cols * sizeof(char *));
		if (!t->cells) {
			fputs("ocsctl: out of memory\n", stderr);
			exit(EXIT_USAGE);
		}
	}
	memcpy(&t->cells[t->rows * (size_t)t->cols], row, (size_t)t->cols * sizeof(char *));
	t->rows++;
}

/* -o and --no-headers (out_table_options); ocsctl is single-threaded. */
static const char *out_cols;
static bool out_no_headers;
static bool out_bad_column; /* -o named a column a table lacks: said once, exit 2 */

void out_table_options(const char *cols, bool no_headers)
{
	out_cols = cols;
	out_no_headers = no_headers;
}

void out_table_header(struct out_table *t, char **row)
{
	out_table_add(t, row);
	t->header = true;
}

/* The columns of t to print, in order, into pick (at most 16): every one,
 * or those -o names. Returns how many, or -1 on a name t lacks (said on
 * stderr; ocsctl then prints no further table and exits 2 through main,
 * so that its gRPC clients are freed before the process ends). */
static int out_pick(const struct out_table *t, int *pick)
{
	char names[256];
	int n = 0;

	if (!t->header || !out_cols) {
		for (int c = 0; c < t->cols && c < 16; c++)
			pick[n++] = c;
		return n;
	}
	snprintf(names, sizeof(names), "%s", out_cols);
	for (char *save = NULL, *w = strtok_r(names, ",", &save); w;
	     w = strtok_r(NULL, ",", &save)) {
		int c = 0;

		while (c < t->cols && strcasecmp(w, t->cells[c]) != 0)
			c++;
		if (c == t->cols || n == 16) {
			out_bad_column = true;
			fprintf(stderr,
				"ocsctl: -o: no column '%s' in this table; its columns:", w);
			for (int k = 0; k < t->cols; k++)
				fprintf(stderr, "%s %s", k ? "," : "", t->cells[k]);
			fputs("\n", stderr);
			return -1;
		}
		pick[n++] = c;
	}
	return n;
}

void out_table_print(struct out_table *t)
{
	size_t width[16] = {0};
	int pick[16], n = out_bad_column ? -1 : out_pick(t, pick);
	size_t first = t->header && out_no_headers ? 1 : 0;

	if (n < 0)
		first = t->rows; /* nothing printed; the cells freed below */
	for (size_t r = first; r < t->rows; r++)
		for (int c = 0; c < n; c++) {
			size_t len = strlen(t->cells[r * (size_t)t->cols + (size_t)pick[c]]);

			if (len > width[c])
				width[c] = len;
		}
	for (size_t r = first; r < t->rows; r++) {
		for (int c = 0; c < n; c++) {
			const char *s = t->cells[r * (size_t)t->cols + (size_t)pick[c]];

			if (c == n - 1)
				printf("%s\n", s);
			else
				printf("%-*s  ", (int)width[c], s);
		}
	}
	for (size_t i = 0; i < t->rows * (size_t)t->cols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->rows = t->cap = 0;
}

bool out_failed(void)
{
	return out_bad_column;
}

/* "JOB_STATE_ACTIVE" -> "active": the enum's prefix is its value 0's name
 * minus "UNSPECIFIED". */
char *out_enum_short(const ProtobufCEnumDescriptor *d, int value)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, value);
	const ProtobufCEnumValue *zero = protobuf_c_enum_descriptor_get_value(d, 0);
	size_t prefix = 0;
	char *s;

	if (!v)
		return out_fmt("%d", value);
	if (zero && strlen(zero->name) > 11 &&
	    strcmp(zero->name + strlen(zero->name) - 11, "UNSPECIFIED") == 0 &&
	    strncmp(v->name, zero->name, strlen(zero->name) - 11) == 0)
		prefix = strlen(zero->name) - 11;
	s = out_fmt("%s", v->name + prefix);
	for (char *p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return s;
}

char *out_time_text(int64_t unix_ms)
{
	time_t t = (time_t)(unix_ms / 1000);
	struct tm tm;
	char buf[32];

	if (unix_ms <= 0)
		return out_fmt("-");
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return out_fmt("%s.%03dZ", buf, (int)(unix_ms % 1000));
}

/* Prints v (NULL: building it failed) and a newline; returns an exit code. */
int out_print_json_value(const json_t *v, bool pretty)
{
	char *text = v ? ocs_json_dumps(v, pretty) : NULL;

	if (!text) {
		fprintf(stderr, "ocsctl: cannot print the answer as JSON (out of memory, or "
				"a string that is not UTF-8)\n");
		return EXIT_REFUSED;
	}
	printf("%s\n", text);
	free(text);
	return EXIT_OK;
}

int out_print_json(const ProtobufCMessage *m, bool pretty)
{
	json_t *v = pbjson_write(m);
	int rc = out_print_json_value(v, pretty);

	json_decref(v);
	return rc;
}

/* Adds to t a "name value" row for each scalar field of m whose number n
 * has bit n set in want (fields numbered 64 and up: always). */
void out_kv_rows(struct out_table *t, const ProtobufCMessage *m, uint64_t want)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = (const char *)m + f->offset;
		char *row[2];

		if (f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_MESSAGE ||
		    (f->id < 64 && !(want >> f->id & 1)))
			continue;
		row[0] = out_fmt("%s", f->name);
		switch (f->type) {
		case PROTOBUF_C_TYPE_INT32:
			row[1] = out_fmt("%d", *(const int32_t *)p);
			break;
		case PROTOBUF_C_TYPE_INT64:
			row[1] = out_fmt("%lld", (long long)*(const int64_t *)p);
			break;
		case PROTOBUF_C_TYPE_UINT64:
			row[1] = out_fmt("%llu", (unsigned long long)*(const uint64_t *)p);
			break;
		case PROTOBUF_C_TYPE_DOUBLE:
			row[1] = out_fmt("%g", *(const double *)p);
			break;
		case PROTOBUF_C_TYPE_BOOL:
			row[1] = out_fmt("%s", *(const protobuf_c_boolean *)p ? "yes" : "no");
			break;
		case PROTOBUF_C_TYPE_ENUM:
			row[1] = out_enum_short(f->descriptor, *(const int *)p);
			break;
		case PROTOBUF_C_TYPE_STRING:
			row[1] = out_fmt("%s", *(char *const *)p);
			break;
		default:
			row[1] = out_fmt("?");
			break;
		}
		out_table_add(t, row);
	}
}

void out_print_kv_pick(const ProtobufCMessage *m, uint64_t want)
{
	struct out_table t = {.cols = 2};

	out_kv_rows(&t, m, want);
	out_table_print(&t);
}

/* Bits lo..hi (field numbers) set. */
uint64_t out_ids(unsigned lo, unsigned hi)
{
	return (hi >= 63 ? ~(uint64_t)0 : ((uint64_t)1 << (hi + 1)) - 1) &
	       ~(((uint64_t)1 << lo) - 1);
}

void out_circuits_table(Ocs__V1__Circuit **cs, size_t n)
{
	struct out_table t = {.cols = 5};
	char *head[5] = {out_fmt("JOB"), out_fmt("GROUP"), out_fmt("A (POD:PORT)"),
			 out_fmt("B (POD:PORT)"), out_fmt("CROSS-CONNECTS")};

	out_table_header(&t, head);
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Circuit *c = cs[i];
		char *xcs = out_fmt("%s", "");
		char *row[5];

		for (size_t k = 0; k < c->n_cross_connects; k++) {
			char *next = out_fmt(
				"%s%s%s %d->%d", xcs, k ? ", " : "", c->cross_connects[k]->device,
				c->cross_connects[k]->in_port, c->cross_connects[k]->out_port);

			free(xcs);
			xcs = next;
		}
		row[0] = out_fmt("%s", c->job_id);
		row[1] = out_fmt("%d", c->group);
		row[2] = out_fmt("%d:%d", c->pod_a, c->port_a);
		row[3] = out_fmt("%d:%d", c->pod_b, c->port_b);
		row[4] = xcs;
		out_table_add(&t, row);
	}
	out_table_print(&t);
}

void out_print_figures(const Ocs__V1__PlanFigures *fig)
{
	if (!fig)
		return;
	/* The DELTA figures (fields 10 on) only for DAG-aware plans. */
	if (fig->ring) { /* a ring plan: its own figures and how long planning took */
		struct out_table t = {.cols = 2};

		out_kv_rows(&t, &fig->ring->base, ~(uint64_t)0);
		out_kv_rows(&t, &fig->base, out_ids(7, 7));
		out_table_print(&t);
	} else if (fig->makespan_ms > 0 || fig->ports_used > 0) {
		out_print_kv_pick(&fig->base, out_ids(1, 15));
	} else {
		out_print_kv_pick(&fig->base, out_ids(1, 9));
	}
	for (size_t i = 0; i < fig->n_unplaced; i++)
		printf("unplaced               leaves %d-%d: %d links\n", fig->unplaced[i]->a,
		       fig->unplaced[i]->b, fig->unplaced[i]->links);
	for (size_t i = 0; i < fig->n_moved_jobs; i++)
		printf("moved job              %s\n", fig->moved_jobs[i]);
}

/* "3,4,5" (or "-" when empty); caller frees. */
static char *nodes_text(const int32_t *nodes, size_t n)
{
	char *s = out_fmt("%s", n ? "" : "-");

	for (size_t i = 0; i < n; i++) {
		char *next = out_fmt("%s%s%d", s, i ? "," : "", nodes[i]);

		free(s);
		s = next;
	}
	return s;
}

/* Whether the ring's last change was a node failure (failed_node is set). */
static bool ring_failed(const Ocs__V1__Ring *r)
{
	return r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_BYPASS_EXTENDED ||
	       r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_BYPASSED ||
	       r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_REPLACED ||
	       r->last_change == OCS__V1__RING_CHANGE__RING_CHANGE_LOST;
}

void out_rings_table(Ocs__V1__Ring **rs, size_t n)
{
	struct out_table t = {.cols = 6};
	char *head[6] = {out_fmt("JOB"),    out_fmt("RING"),   out_fmt("NODES"),
			 out_fmt("CHANGE"), out_fmt("FAILED"), out_fmt("REASON")};

	out_table_header(&t, head);
	for (size_t i = 0; i < n; i++) {
		const Ocs__V1__Ring *r = rs[i];
		char *row[6] = {out_fmt("%s", r->job_id),
				out_fmt("%d", r->index),
				nodes_text(r->nodes, r->n_nodes),
				out_enum_short(&ocs__v1__ring_change__descriptor, r->last_change),
				ring_failed(r) ? out_fmt("%d", r->failed_node) : out_fmt("-"),
				out_fmt("%s", r->reason[0] ? r->reason : "-")};

		out_table_add(&t, row);
	}
	out_table_print(&t);
}

/* A ring request in words: "tp 8, 32 GPUs, fat-tree". Caller frees. */
static char *ring_request_text(const Ocs__V1__RingRequest *q)
{
	const char *orch = q->orchestration[0] ? q->orchestration : "dcn-free";

	if (q->gpus > 0)
		return out_fmt("tp %d, %lld GPUs, %s", q->tp, (long long)q->gpus, orch);
	if (q->rings > 0)
		return out_fmt("tp %d, %d rings, %s", q->tp, q->rings, orch);
	return out_fmt("tp %d, the whole domain, %s", q->tp, orch);
}

/* The GPUs a job holds: its placement's, or for a ring job what its rings
 * hold (the request's until it is planned). */
long long out_job_gpus(const Ocs__V1__Job *j)
{
	const Ocs__V1__JobSpec *s = j->spec;

	if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && s->ring) {
		if (j->figures && j->figures->ring)
			return j->figures->ring->gpus_placed;
		return s->ring->gpus > 0 ? s->ring->gpus : (long long)s->ring->rings * s->ring->tp;
	}
	return s && s->placement ? (long long)s->placement->n_gpus : 0;
}

void out_print_job(const Ocs__V1__Job *job)
{
	const Ocs__V1__JobSpec *s = job->spec;
	struct out_table t = {.cols = 2};
	char *row[2];

	row[0] = out_fmt("id");
	row[1] = out_fmt("%s", s ? s->id : "");
	out_table_add(&t, row);
	row[0] = out_fmt("state");
	row[1] = out_enum_short(&ocs__v1__job_state__descriptor, job->state);
	out_table_add(&t, row);
	if (job->reason[0]) {
		row[0] = out_fmt("reason");
		row[1] = out_fmt("%s", job->reason);
		out_table_add(&t, row);
	}
	row[0] = out_fmt("gpus");
	row[1] = out_fmt("%lld", out_job_gpus(job));
	out_table_add(&t, row);
	if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_RING && s->ring) {
		row[0] = out_fmt("ring");
		row[1] = ring_request_text(s->ring);
	} else if (s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_PARALLELISM && s->parallelism) {
		const Ocs__V1__ParallelismSpec *q = s->parallelism;

		row[0] = out_fmt("parallelism");
		row[1] = out_fmt("tp %d, pp %d, dp %d%s, %d micro-batches, %g Gb/s", q->tp, q->pp,
				 q->dp, q->dp ? "" : " (from the GPUs)", q->micro_batches,
				 q->bandwidth_gbps);
	} else {
		row[0] = out_fmt("leaf pairs");
		row[1] = out_fmt("%zu",
				 s && s->demand_case == OCS__V1__JOB_SPEC__DEMAND_LEAF_DEMAND &&
						 s->leaf_demand
					 ? s->leaf_demand->n_pairs
					 : 0);
	}
	out_table_add(&t, row);
	row[0] = out_fmt("created");
	row[1] = out_time_text(job->created_unix_ms);
	out_table_add(&t, row);
	row[0] = out_fmt("updated");
	row[1] = out_time_text(job->updated_unix_ms);
	out_table_add(&t, row);
	out_table_print(&t);
	if (job->figures) {
		printf("\n");
		out_print_figures(job->figures);
	}
	if (job->n_circuits) {
		printf("\n");
		out_circuits_table(job->circuits, job->n_circuits);
	}
	if (job->n_rings) {
		printf("\n");
		out_rings_table(job->rings, job->n_rings);
	}
}

/*
 * rings --json: {"rings": [{"job_id", "ring", "nodes": [..], ...}]}, the
 * ring number under "ring" (the proto's Ring.index), then every other
 * field of Ring as pbjson writes it.
 */
json_t *out_rings_json(const Ocs__V1__ListRingsResponse *r)
{
	json_t *list = json_array(), *top = json_object();

	if (!list || !top || json_object_set_new(top, "rings", list)) {
		json_decref(list);
		json_decref(top);
		return NULL;
	}
	for (size_t i = 0; i < r->n_rings; i++) {
		json_t *all = pbjson_write(&r->rings[i]->base), *ring = json_object();
		const char *key;
		json_t *value;
		bool ok = all && ring &&
			  !json_object_set(ring, "job_id", json_object_get(all, "job_id")) &&
			  !json_object_set_new(ring, "ring", json_integer(r->rings[i]->index)) &&
			  !json_object_set(ring, "nodes", json_object_get(all, "nodes"));

		json_object_foreach(all, key, value)
		{
			if (ok && !json_object_get(ring, key) && strcmp(key, "index") != 0)
				ok = !json_object_set(ring, key, value);
		}
		json_decref(all);
		if (!ok || json_array_append_new(list, ring)) {
			json_decref(ring);
			json_decref(top);
			return NULL;
		}
	}
	return top;
}

/* "ring JOB#K bypass_extended nodes=1,3,4 was=1,2,3 failed=2 reaction_us=.. devices_us=.." */
static void print_ring_event(const Ocs__V1__RingEvent *ev)
{
	const Ocs__V1__Ring *r = ev->ring;
	char *change, *nodes, *old;

	if (!r) {
		printf("ring (no ring)\n");
		return;
	}
	change = out_enum_short(&ocs__v1__ring_change__descriptor, r->last_change);
	nodes = nodes_text(r->nodes, r->n_nodes);
	old = nodes_text(ev->old_nodes, ev->n_old_nodes);
	printf("ring %s#%d %s nodes=%s", r->job_id, r->index, change, nodes);
	if (ev->n_old_nodes)
		printf(" was=%s", old);
	if (ring_failed(r))
		printf(" failed=%d", r->failed_node);
	if (ev->reaction_us || ev->devices_us)
		printf(" reaction_us=%lld devices_us=%lld", (long long)ev->reaction_us,
		       (long long)ev->devices_us);
	printf("%s%s\n", r->reason[0] ? ": " : "", r->reason);
	free(change);
	free(nodes);
	free(old);
}

void out_print_event(const Ocs__V1__Event *e)
{
	char *when = out_time_text(e->time_unix_ms), *a = NULL, *b = NULL;

	printf("%llu  %s  ", (unsigned long long)e->seq, when);
	switch (e->kind_case) {
	case OCS__V1__EVENT__KIND_JOB:
		a = out_enum_short(&ocs__v1__job_state__descriptor, e->job->state);
		printf("job %s %s%s%s\n", e->job->job_id, a, e->job->reason[0] ? ": " : "",
		       e->job->reason);
		break;
	case OCS__V1__EVENT__KIND_DEVICE:
		a = out_enum_short(&ocs__v1__session_state__descriptor, e->device->session);
		b = out_enum_short(&ocs__v1__device_health__descriptor, e->device->health);
		printf("device %s session=%s health=%s drained=%s%s%s\n", e->device->device, a, b,
		       e->device->drained ? "yes" : "no",
		       e->device->session_error[0] ? " error=" : "", e->device->session_error);
		break;
	case OCS__V1__EVENT__KIND_TRANSACTION:
		a = out_enum_short(&ocs__v1__transaction_outcome__descriptor,
				   e->transaction->outcome);
		printf("transaction %llu job %s %s (%zu devices)%s%s\n",
		       (unsigned long long)e->transaction->transaction_id, e->transaction->job_id,
		       a, e->transaction->n_devices, e->transaction->reason[0] ? ": " : "",
		       e->transaction->reason);
		break;
	case OCS__V1__EVENT__KIND_DRIFT:
		if (e->drift->bundle)
			printf("drift node %d bundle %d: %s, its ring says %s%s%s\n",
			       e->drift->bundle->node, e->drift->bundle->bundle,
			       e->drift->bundle->found, e->drift->bundle->expected,
			       e->drift->bundle->job_id[0] ? "; job " : " (no ring)",
			       e->drift->bundle->job_id);
		else
			printf("drift %s %d->%d %s\n", e->drift->device, e->drift->in_port,
			       e->drift->out_port,
			       e->drift->missing ? "missing" : "not owned by any job");
		break;
	case OCS__V1__EVENT__KIND_CABLING:
		printf("cabling %s port %d %s: %s (reported \"%s\", wiring \"%s\")\n",
		       e->cabling->device, e->cabling->port, e->cabling->side,
		       e->cabling->miswired ? "miswired" : "no longer miswired",
		       e->cabling->reported, e->cabling->expected);
		break;
	case OCS__V1__EVENT__KIND_RING:
		print_ring_event(e->ring);
		break;
	case OCS__V1__EVENT__KIND_NODE:
		a = out_enum_short(&ocs__v1__node_condition__descriptor, e->node->condition);
		printf("node %d %s%s%s\n", e->node->node, a, e->node->source[0] ? " source=" : "",
		       e->node->source);
		break;
	case OCS__V1__EVENT__KIND_RAIL:
		ocsctl_rail_event(e->rail);
		break;
	case OCS__V1__EVENT__KIND_GPU:
		a = out_enum_short(&ocs__v1__gpu_condition__descriptor, e->gpu->condition);
		printf("gpu %lld %s%s%s\n", (long long)e->gpu->gpu, a,
		       e->gpu->source[0] ? " source=" : "", e->gpu->source);
		break;
	default:
		printf("(unknown event)\n");
		break;
	}
	free(when);
	free(a);
	free(b);
}
