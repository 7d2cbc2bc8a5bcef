/*
 * status_json.c - /state.json from a snapshot (status.h), with jansson:
 * strings are escaped by it, and a string that is not UTF-8 goes out with
 * each byte that is not part of a valid sequence as '?' (as the SVG
 * writes it) rather than failing the whole page.
 */
#include "status.h"
#include "status_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* A JSON string of s ("" for NULL); NULL only on allocation failure. */
static json_t *str(const char *s)
{
	json_t *j;
	char *copy;

	if (!s)
		s = "";
	j = json_string(s);
	if (j)
		return j;
	copy = strdup(s);
	if (!copy)
		return NULL;
	for (unsigned char *p = (unsigned char *)copy; *p;) {
		size_t n = sp_utf8_len(p);

		if (n == 0)
			*p = '?';
		p += n ? n : 1;
	}
	j = json_string(copy);
	free(copy);
	return j;
}

/* json_object_set_new that remembers a failure in *ok. */
static void put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, key, v) != 0)
		*ok = false;
}

static void push(json_t *a, json_t *v, bool *ok)
{
	if (!v || json_array_append_new(a, v) != 0)
		*ok = false;
}

static json_t *fabric_json(const struct sp_snapshot *s, bool *ok)
{
	static const char *const kinds[] = {"leaf-spine-ocs", "ocstrx-ring", "rail-ocs"};
	json_t *f = json_object();

	if (!f) {
		*ok = false;
		return NULL;
	}
	put(f, "name", str(s->name), ok);
	put(f, "kind", str(kinds[s->kind]), ok);
	switch (s->kind) {
	case SP_LEAF_SPINE:
		put(f, "pods", json_integer(s->pods), ok);
		put(f, "groups", json_integer(s->groups), ok);
		break;
	case SP_RING:
		put(f, "nodes", json_integer(s->nodes), ok);
		put(f, "closed", json_boolean(s->closed), ok);
		break;
	case SP_RAIL:
		put(f, "servers", json_integer(s->servers), ok);
		put(f, "rails", json_integer(s->rails), ok);
		break;
	}
	return f;
}

static json_t *job_json(const struct sp_snapshot *s, const struct sp_job *j, bool list, bool *ok)
{
	json_t *o = json_object(), *cs = json_array();

	if (!o || !cs) {
		json_decref(o);
		json_decref(cs);
		*ok = false;
		return NULL;
	}
	put(o, "id", str(j->id), ok);
	put(o, "state", str(j->state), ok);
	put(o, "reason", str(j->reason), ok);
	put(o, "gpus", json_integer((json_int_t)j->n_gpus), ok);
	put(o, "n_circuits", json_integer((json_int_t)j->n_circuits), ok);
	if (!list) {
		json_decref(cs);
		return o;
	}
	for (size_t i = 0; *ok && i < j->n_circuits; i++) {
		const struct sp_circuit *c = &j->circuits[i];
		json_t *co = json_object();
		bool known = c->device >= 0 && (size_t)c->device < s->n_devices;

		if (!co) {
			*ok = false;
			break;
		}
		put(co, "device", str(known ? s->devices[c->device].name : "?"), ok);
		put(co, "in", json_integer(c->in), ok);
		put(co, "out", json_integer(c->out), ok);
		if (c->pod_in >= 0 && c->pod_out >= 0)
			put(co, "pods", json_pack("[ii]", c->pod_in, c->pod_out), ok);
		push(cs, co, ok);
	}
	put(o, "circuits", cs, ok);
	return o;
}

static json_t *device_json(const struct sp_device *d, bool *ok)
{
	json_t *o = json_object();

	if (!o) {
		*ok = false;
		return NULL;
	}
	put(o, "name", str(d->name), ok);
	put(o, "group", json_integer(d->group), ok);
	put(o, "session", str(d->session), ok);
	put(o, "health", str(d->health), ok);
	put(o, "error", str(d->error), ok);
	put(o, "drained", json_boolean(d->drained), ok);
	put(o, "drift", json_integer((json_int_t)d->drift), ok);
	return o;
}

static json_t *ring_json(const struct sp_ring *r, bool *ok)
{
	json_t *o = json_object(), *nodes = json_array();

	if (!o || !nodes) {
		json_decref(o);
		json_decref(nodes);
		*ok = false;
		return NULL;
	}
	put(o, "job", str(r->job), ok);
	put(o, "index", json_integer(r->index), ok);
	for (size_t i = 0; i < r->n_nodes; i++)
		push(nodes, json_integer(r->nodes[i]), ok);
	put(o, "nodes", nodes, ok);
	put(o, "change", str(r->change), ok);
	put(o, "failed_node", json_integer(r->failed_node), ok);
	return o;
}

static json_t *bundle_drift_json(const struct sp_bundle_drift *b, bool *ok)
{
	json_t *o = json_object();

	if (!o) {
		*ok = false;
		return NULL;
	}
	put(o, "node", json_integer(b->node), ok);
	put(o, "bundle", json_integer(b->bundle), ok);
	put(o, "job", str(b->job), ok);
	put(o, "expected", str(b->expected), ok);
	put(o, "found", str(b->found), ok);
	put(o, "found_peer", json_integer(b->found_peer), ok);
	return o;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* [[pod a, pod b, circuits], ...] over every circuit with both pods, a <= b. */
static json_t *pod_pairs_json(const struct sp_snapshot *s, size_t total, bool *ok)
{
	uint64_t *keys = malloc((total ? total : 1) * sizeof(*keys));
	json_t *pairs = json_array();
	size_t n = 0;

	if (!keys || !pairs) {
		free(keys);
		json_decref(pairs);
		*ok = false;
		return NULL;
	}
	for (size_t j = 0; j < s->n_jobs; j++)
		for (size_t i = 0; i < s->jobs[j].n_circuits; i++) {
			const struct sp_circuit *c = &s->jobs[j].circuits[i];
			uint32_t a = (uint32_t)c->pod_in, b = (uint32_t)c->pod_out;

			if (c->pod_in < 0 || c->pod_out < 0)
				continue;
			keys[n++] = a < b ? (uint64_t)a << 32 | b : (uint64_t)b << 32 | a;
		}
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (size_t i = 0, run; *ok && i < n; i += run) {
		for (run = 1; i + run < n && keys[i + run] == keys[i]; run++)
			;
		push(pairs,
		     json_pack("[IIi]", (json_int_t)(keys[i] >> 32),
			       (json_int_t)(keys[i] & 0xffffffffu), (int)run),
		     ok);
	}
	free(keys);
	return pairs;
}

char *sp_state_json(const struct sp_snapshot *s, size_t *len)
{
	json_t *root = json_object(), *jobs = json_array(), *devs = json_array();
	json_t *rings = json_array(), *faulty = json_array(), *gpus = json_array();
	json_t *events = json_array(), *bundles = json_array();
	bool ok = root && jobs && devs && rings && faulty && gpus && events && bundles;
	size_t drift = 0, total = 0;
	bool list;
	char *text = NULL;

	put(root, "fabric", fabric_json(s, &ok), &ok);
	put(root, "role", str(s->role), &ok);
	put(root, "leader", str(s->leader), &ok);
	put(root, "now_ms", json_integer(s->now_ms), &ok);
	for (size_t i = 0; i < s->n_jobs; i++)
		total += s->jobs[i].n_circuits;
	list = total <= SP_MAX_JSON_CIRCUITS;
	put(root, "circuits_listed", json_boolean(list), &ok);
	if (!list)
		put(root, "pod_pairs", pod_pairs_json(s, total, &ok), &ok);
	for (size_t i = 0; ok && i < s->n_jobs; i++)
		push(jobs, job_json(s, &s->jobs[i], list, &ok), &ok);
	for (size_t i = 0; ok && i < s->n_devices; i++) {
		push(devs, device_json(&s->devices[i], &ok), &ok);
		drift += s->devices[i].drift;
	}
	for (size_t i = 0; ok && i < s->n_rings; i++)
		push(rings, ring_json(&s->rings[i], &ok), &ok);
	for (size_t i = 0; ok && i < s->n_faulty_nodes; i++)
		push(faulty, json_integer(s->faulty_nodes[i]), &ok);
	for (size_t i = 0; ok && i < s->n_bundle_drift; i++)
		push(bundles, bundle_drift_json(&s->bundle_drift[i], &ok), &ok);
	for (size_t i = 0; ok && i < s->n_faulty_gpus; i++)
		push(gpus, json_integer(s->faulty_gpus[i]), &ok);
	for (size_t i = 0; ok && i < s->n_events; i++)
		push(events,
		     json_pack("{s:I,s:o}", "at_ms", (json_int_t)s->events[i].at_ms, "text",
			       str(s->events[i].text)),
		     &ok);
	/* on a ring domain each node's device counts its bundles in bundle_drift */
	put(root, "drift_total", json_integer((json_int_t)drift), &ok);
	put(root, "bundle_drift", bundles, &ok);
	put(root, "jobs", jobs, &ok);
	put(root, "devices", devs, &ok);
	put(root, "rings", rings, &ok);
	put(root, "faulty_nodes", faulty, &ok);
	put(root, "faulty_gpus", gpus, &ok);
	put(root, "events", events, &ok);
	if (ok)
		text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (text && len)
		*len = strlen(text);
	return text;
}
