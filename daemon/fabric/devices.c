/*
 * devices.c - implementation of devices.h: one record per device id, a
 * name index sorted for binary search, the drain flags as a mask the
 * planners copy, and the read-back comparison as a merge of two sorted
 * lists.
 *
 * Session state machine (drawn in devices.h, implemented by
 * dev_note_read()). Invariants:
 *  1. session is CONNECTED only after a read that succeeded on a session
 *     that stayed up; session_error is "" exactly then.
 *  2. since_ms changes only when session changes.
 *  3. health is UNKNOWN until the first read, then HEALTHY or UNREACHABLE
 *     after the last read's outcome.
 */
#include "devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"
#include "store.h"

struct dev_rec {
	char *name;
	struct sb_device *handle[2]; /* by enum dev_role; owned */
	enum dev_session session;
	char session_error[360];
	int64_t since_ms;
	enum dev_health health;
	struct sb_product product; /* dev_note_info */
	int ports_down;		   /* sides FAILED or DISABLED (ListDevices) */
	uint16_t *down;		   /* the ports they are on, sorted, each once (the planner's) */
	size_t n_down;
};

/* The name index: entries sorted by name (name borrowed from the record). */
struct dev_name_id {
	const char *name;
	int id;
};

struct devices {
	struct dev_deps d;
	struct dev_rec *recs;	     /* [device id] */
	struct dev_name_id *by_name; /* sorted by name */
	bool *drained;		     /* [device id] */
	int n_drained;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(((const struct dev_name_id *)a)->name, ((const struct dev_name_id *)b)->name);
}

struct devices *dev_new(const struct dev_deps *deps)
{
	struct devices *devs = calloc(1, sizeof(*devs));
	size_t n;

	if (!devs)
		return NULL;
	devs->d = *deps;
	devs->d.names = NULL;
	n = deps->n_devices > 0 ? (size_t)deps->n_devices : 0;
	devs->recs = calloc(n + 1, sizeof(*devs->recs));
	devs->by_name = calloc(n + 1, sizeof(*devs->by_name));
	devs->drained = calloc(n + 1, sizeof(*devs->drained));
	if (!devs->recs || !devs->by_name || !devs->drained) {
		dev_free(devs);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		struct dev_rec *r = &devs->recs[i];

		r->name = strdup(deps->names[i]);
		if (!r->name) {
			dev_free(devs);
			return NULL;
		}
		r->session = DEV_SESSION_CONNECTING;
		r->since_ms = deps->now_ms;
		devs->by_name[i] = (struct dev_name_id){r->name, (int)i};
	}
	qsort(devs->by_name, n, sizeof(*devs->by_name), cmp_names);
	return devs;
}

void dev_free(struct devices *devs)
{
	if (!devs)
		return;
	for (int i = 0; devs->recs && i < devs->d.n_devices; i++) {
		sb_device_free(devs->recs[i].handle[DEV_ROLE_TXN]);
		sb_device_free(devs->recs[i].handle[DEV_ROLE_RECON]);
		free(devs->recs[i].name);
		free(devs->recs[i].down);
	}
	free(devs->recs);
	free(devs->by_name);
	free(devs->drained);
	free(devs);
}

static bool valid(const struct devices *devs, int id)
{
	return id >= 0 && id < devs->d.n_devices;
}

int dev_count(const struct devices *devs)
{
	return devs->d.n_devices;
}

const char *dev_name(const struct devices *devs, int id)
{
	return valid(devs, id) ? devs->recs[id].name : "?";
}

int dev_find(const struct devices *devs, const char *name)
{
	struct dev_name_id key = {name, -1};
	const struct dev_name_id *hit =
		bsearch(&key, devs->by_name, (size_t)devs->d.n_devices, sizeof(key), cmp_names);

	return hit ? hit->id : -1;
}

void dev_set_handle(struct devices *devs, int id, enum dev_role role, struct sb_device *handle)
{
	if (!valid(devs, id)) {
		sb_device_free(handle);
		return;
	}
	if (devs->recs[id].handle[role] != handle)
		sb_device_free(devs->recs[id].handle[role]);
	devs->recs[id].handle[role] = handle;
}

struct sb_device *dev_handle(const struct devices *devs, int id, enum dev_role role)
{
	return valid(devs, id) ? devs->recs[id].handle[role] : NULL;
}

/* ---- session state and health ---- */

int dev_status(const struct devices *devs, int id, struct dev_status *out)
{
	const struct dev_rec *r;

	if (!valid(devs, id))
		return -ENOENT;
	r = &devs->recs[id];
	*out = (struct dev_status){r->session,	      r->session_error, r->since_ms,  r->health,
				   devs->drained[id], &r->product,	r->ports_down};
	return 0;
}

static bool port_down(const struct sb_port_info *p)
{
	return p->status == SB_PORT_STATUS_FAILED || p->status == SB_PORT_STATUS_DISABLED;
}

bool dev_note_info(struct devices *devs, int id, const struct sb_device_info *info)
{
	struct dev_rec *r;
	uint16_t *ports = NULL;
	size_t n_ports = 0;
	int down = 0;
	bool changed;

	if (!valid(devs, id))
		return false;
	r = &devs->recs[id];
	for (size_t i = 0; i < info->n_ports; i++)
		down += port_down(&info->ports[i]);
	if (down && !(ports = malloc((size_t)down * sizeof(*ports))))
		return false;
	/* info->ports is sorted by (port, egress): a port down on both sides once */
	for (size_t i = 0; i < info->n_ports; i++)
		if (port_down(&info->ports[i]) &&
		    (!n_ports || ports[n_ports - 1] != info->ports[i].port))
			ports[n_ports++] = info->ports[i].port;
	changed = down != r->ports_down || memcmp(&r->product, &info->product, sizeof(r->product));
	r->product = info->product;
	r->ports_down = down;
	free(r->down);
	r->down = ports;
	r->n_down = n_ports;
	return changed;
}

int dev_out_of_service(const struct devices *devs, struct ocs_xc **out, size_t *n)
{
	const struct ocs_fabric *f = devs->d.fabric;
	size_t k = 0;
	struct ocs_xc *grown;

	for (int id = 0; id < devs->d.n_devices; id++)
		k += devs->recs[id].n_down;
	if (!k || !f)
		return 0;
	grown = realloc(*out, (*n + k) * sizeof(**out));
	if (!grown)
		return -ENOMEM;
	*out = grown;
	for (int id = 0; id < devs->d.n_devices; id++)
		for (size_t i = 0; i < devs->recs[id].n_down; i++)
			if (devs->recs[id].down[i] < f->k_ocs)
				grown[(*n)++] = (struct ocs_xc){ocs_fabric_device_group(f, id),
								ocs_fabric_device_in_group(f, id),
								devs->recs[id].down[i],
								devs->recs[id].down[i]};
	return 0;
}

bool dev_note_read(struct devices *devs, int id, bool ok, bool connected, const char *error,
		   int64_t now_ms)
{
	struct dev_rec *r;
	enum dev_session next;
	enum dev_health health = ok ? DEV_HEALTH_HEALTHY : DEV_HEALTH_UNREACHABLE;
	const char *why = ok ? "" : error && *error ? error : "unreadable";
	bool changed;

	if (!valid(devs, id))
		return false;
	r = &devs->recs[id];
	next = ok && connected ? DEV_SESSION_CONNECTED : DEV_SESSION_DISCONNECTED;
	changed = r->health != health || r->session != next || strcmp(r->session_error, why) != 0;
	if (r->session != next)
		r->since_ms = now_ms;
	r->session = next;
	r->health = health;
	snprintf(r->session_error, sizeof(r->session_error), "%s", why);
	return changed;
}

int dev_unreachable(const struct devices *devs)
{
	int n = 0;

	for (int i = 0; i < devs->d.n_devices; i++)
		n += devs->recs[i].health == DEV_HEALTH_UNREACHABLE;
	return n;
}

/* ---- drain ---- */

static void apply_drain(struct devices *devs, int id, bool drained)
{
	if (devs->drained[id] == drained)
		return;
	devs->drained[id] = drained;
	devs->n_drained += drained ? 1 : -1;
}

int dev_set_drained(struct devices *devs, int id, bool drained)
{
	int rc;

	if (!valid(devs, id))
		return -ENOENT;
	rc = st_drain_set(devs->d.store, devs->recs[id].name, drained);
	if (rc)
		return rc;
	apply_drain(devs, id, drained);
	return 0;
}

static int restore_one(void *ctx, const char *name)
{
	struct devices *devs = ctx;
	int id = dev_find(devs, name);

	if (id >= 0)
		apply_drain(devs, id, true);
	return 0;
}

int dev_restore_drained(struct devices *devs)
{
	return st_drain_list(devs->d.store, restore_one, devs);
}

bool dev_drained(const struct devices *devs, int id)
{
	return valid(devs, id) && devs->drained[id];
}

int dev_n_drained(const struct devices *devs)
{
	return devs->n_drained;
}

const bool *dev_drained_mask(const struct devices *devs)
{
	return devs->drained;
}

/* ---- cross-connects and read-back ---- */

const struct st_circuit *dev_xcs(const struct devices *devs, int id, size_t *n)
{
	if (!devs->d.fs) { /* a ring domain: no cross-connects */
		*n = 0;
		return NULL;
	}
	return fs_device_circuits(devs->d.fs, id, n);
}

int dev_read(const struct devices *devs, int id, enum dev_role role, struct dev_readback *out)
{
	struct sb_device *h = dev_handle(devs, id, role);
	struct sb_xc_state *got = NULL;
	struct sb_error e = {0};
	size_t n = 0;
	int rc;

	*out = (struct dev_readback){0};
	if (!h) {
		snprintf(out->error, sizeof(out->error), "no session handle");
		return -ENOENT;
	}
	rc = sb_device_connect_until(h, sb_now_ms() + devs->d.connect_timeout_ms, &e);
	if (rc == 0)
		rc = sb_device_read_xcs(h, false, SB_DS_RUNNING, &got, &n, &e);
	if (rc == 0) {
		out->xcs = malloc((n ? n : 1) * sizeof(*out->xcs));
		if (!out->xcs) {
			rc = -ENOMEM;
			snprintf(e.message, sizeof(e.message), "out of memory");
		}
	}
	if (rc) {
		free(got);
		snprintf(out->error, sizeof(out->error), "%s: %s",
			 e.operation[0] ? e.operation : "read", e.message);
		return rc < 0 ? rc : -EIO;
	}
	for (size_t i = 0; i < n; i++)
		out->xcs[i] = (struct sb_xc){got[i].in, got[i].out};
	free(got);
	if (n > 1)
		qsort(out->xcs, n, sizeof(*out->xcs), sb_xc_cmp);
	out->n = n;
	out->ok = true;
	return 0;
}

int dev_read_with_info(const struct devices *devs, int id, enum dev_role role,
		       struct dev_readback *out)
{
	struct sb_error e = {0};
	int rc = dev_read(devs, id, role, out);

	if (rc == 0)
		out->has_info =
			sb_device_read_info(dev_handle(devs, id, role), &out->info, &e) == 0;
	return rc;
}

int dev_read_bundles(const struct devices *devs, int id, enum dev_role role,
		     struct dev_readback *out)
{
	struct sb_device *h = dev_handle(devs, id, role);
	struct sb_error e = {0};
	int rc;

	*out = (struct dev_readback){0};
	if (!h) {
		snprintf(out->error, sizeof(out->error), "no session handle");
		return -ENOENT;
	}
	sb_device_claim(h);
	rc = sb_device_connect_until(h, sb_now_ms() + devs->d.connect_timeout_ms, &e);
	if (rc == 0)
		rc = sb_device_read_bundles(h, true, SB_DS_RUNNING, &out->bundles, &out->n_bundles,
					    &out->node_faulty, &e);
	sb_device_unclaim(h);
	if (rc) {
		snprintf(out->error, sizeof(out->error), "%s: %s",
			 e.operation[0] ? e.operation : "read", e.message);
		return rc < 0 ? rc : -EIO;
	}
	out->ok = true;
	return 0;
}

void dev_readback_clear(struct dev_readback *rb)
{
	if (!rb)
		return;
	free(rb->xcs);
	rb->xcs = NULL;
	rb->n = 0;
	free(rb->bundles);
	rb->bundles = NULL;
	rb->n_bundles = 0;
	sb_device_info_clear(&rb->info);
	rb->has_info = false;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/*
 * The inputs whose cross-connect change removes on device (g, k), sorted
 * (malloc'd; caller frees). NULL only on allocation failure.
 */
static int *removed_inputs(const struct st_intent *change, int g, int k, size_t *n)
{
	size_t cap = change ? change->n_removals : 0;
	int *in = malloc((cap ? cap : 1) * sizeof(*in));

	*n = 0;
	if (!in)
		return NULL;
	for (size_t r = 0; r < cap; r++)
		if (change->removals[r].group == g && change->removals[r].device == k)
			in[(*n)++] = change->removals[r].in;
	if (*n > 1)
		qsort(in, *n, sizeof(*in), int_cmp);
	return in;
}

/* What device id should hold, sorted by (in, out) (malloc'd; caller frees). */
static struct sb_xc *expected(const struct devices *devs, int id, const struct st_intent *change,
			      size_t *n)
{
	int g = ocs_fabric_device_group(devs->d.fabric, id);
	int k = ocs_fabric_device_in_group(devs->d.fabric, id);
	size_t n_run, n_rm, cap;
	const struct st_circuit *run = fs_device_circuits(devs->d.fs, id, &n_run);
	int *rm = removed_inputs(change, g, k, &n_rm);
	struct sb_xc *out;

	cap = n_run + (change ? change->n_additions : 0) + 1;
	out = malloc(cap * sizeof(*out));
	*n = 0;
	if (!out || !rm) {
		free(rm);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n_run; i++)
		if (!bsearch(&run[i].xc.in, rm, n_rm, sizeof(*rm), int_cmp))
			out[(*n)++] =
				(struct sb_xc){(uint16_t)run[i].xc.in, (uint16_t)run[i].xc.out};
	for (size_t a = 0; change && a < change->n_additions; a++) {
		const struct ocs_xc *xc = &change->additions[a].xc;

		if (xc->group == g && xc->device == k)
			out[(*n)++] = (struct sb_xc){(uint16_t)xc->in, (uint16_t)xc->out};
	}
	free(rm);
	/* The run is sorted by input; additions and equal inputs need a sort. */
	if (*n > 1)
		qsort(out, *n, sizeof(*out), sb_xc_cmp);
	return out;
}

int dev_compare(const struct devices *devs, int id, const struct st_intent *change,
		const struct sb_xc *got, size_t n_got, struct dev_diff *out)
{
	size_t n_want = 0, i = 0, j = 0;
	struct sb_xc *want = expected(devs, id, change, &n_want);
	struct sb_xc *have = malloc((n_got ? n_got : 1) * sizeof(*have));

	*out = (struct dev_diff){0};
	out->unowned = malloc((n_got ? n_got : 1) * sizeof(*out->unowned));
	out->missing = malloc((n_want ? n_want : 1) * sizeof(*out->missing));
	if (!want || !have || !out->unowned || !out->missing) {
		free(want);
		free(have);
		dev_diff_clear(out);
		return -ENOMEM;
	}
	if (n_got)
		memcpy(have, got, n_got * sizeof(*have));
	if (n_got > 1)
		qsort(have, n_got, sizeof(*have), sb_xc_cmp);
	/* Merge the two sorted lists. */
	while (i < n_got || j < n_want) {
		int c = i == n_got ? 1 : j == n_want ? -1 : sb_xc_cmp(&have[i], &want[j]);

		if (c < 0)
			out->unowned[out->n_unowned++] = have[i++];
		else if (c > 0)
			out->missing[out->n_missing++] = want[j++];
		else
			i++, j++;
	}
	free(want);
	free(have);
	return 0;
}

bool dev_diff_equal(const struct dev_diff *d)
{
	return d->n_unowned == 0 && d->n_missing == 0;
}

void dev_diff_clear(struct dev_diff *d)
{
	if (!d)
		return;
	free(d->unowned);
	free(d->missing);
	*d = (struct dev_diff){0};
}
