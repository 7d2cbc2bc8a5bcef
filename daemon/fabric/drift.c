/*
 * drift.c - implementation of drift.h: one sorted array of unowned
 * cross-connects per device. A cross-connect's partner (the other half of
 * its two-way circuit) is found through the wiring (fabric.h): light
 * entering from spine port a leaves to spine port b; the partner carries b
 * back to a.
 */
#include "drift.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"

struct dr_device {
	struct sb_xc *xcs; /* unowned, sorted (sb_xc_cmp) */
	size_t n;
	struct sb_xc *missing; /* any order */
	size_t n_missing;
	struct sb_xc *reverting; /* sorted: expected to revert (dr_expect_revert) */
	size_t n_reverting;
	bool unverified;
};

struct dr_table {
	const struct ocs_fabric *f;
	int n_devices;
	struct dr_device *dev; /* by device id */
};

static bool partner_of(const struct ocs_fabric *f, const struct ocs_xc *x, struct ocs_xc *p);
static bool is_unowned(const struct dr_table *t, const struct ocs_xc *x);

struct dr_table *dr_new(const struct ocs_fabric *f)
{
	struct dr_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->f = f;
	t->n_devices = ocs_fabric_devices(f);
	t->dev = calloc((size_t)t->n_devices + 1, sizeof(*t->dev));
	if (!t->dev) {
		free(t);
		return NULL;
	}
	return t;
}

void dr_free(struct dr_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_devices; i++) {
		free(t->dev[i].xcs);
		free(t->dev[i].missing);
		free(t->dev[i].reverting);
	}
	free(t->dev);
	free(t);
}

int dr_set(struct dr_table *t, int id, const struct sb_xc *unowned, size_t n,
	   const struct sb_xc *missing, size_t n_missing)
{
	struct sb_xc *copy, *miss;
	size_t kept = 0;

	if (id < 0 || id >= t->n_devices)
		return -EINVAL;
	copy = malloc((n ? n : 1) * sizeof(*copy));
	miss = malloc((n_missing ? n_missing : 1) * sizeof(*miss));
	if (!copy || !miss) {
		free(copy);
		free(miss);
		return -ENOMEM;
	}
	if (n)
		memcpy(copy, unowned, n * sizeof(*copy));
	if (n_missing)
		memcpy(miss, missing, n_missing * sizeof(*miss));
	qsort(copy, n, sizeof(*copy), sb_xc_cmp);
	free(t->dev[id].xcs);
	free(t->dev[id].missing);
	t->dev[id].xcs = copy;
	t->dev[id].n = n;
	t->dev[id].missing = miss;
	t->dev[id].n_missing = n_missing;
	t->dev[id].unverified = false;
	/* a mark lasts while the device still shows its cross-connect */
	for (size_t i = 0; i < t->dev[id].n_reverting; i++) {
		const struct sb_xc *x = &t->dev[id].reverting[i];

		if (n && bsearch(x, copy, n, sizeof(*x), sb_xc_cmp))
			t->dev[id].reverting[kept++] = *x;
	}
	t->dev[id].n_reverting = kept;
	return 0;
}

int dr_expect_revert(struct dr_table *t, const struct ocs_xc *xcs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int id = ocs_fabric_device_id(t->f, xcs[i].group, xcs[i].device);
		struct sb_xc key = {(uint16_t)xcs[i].in, (uint16_t)xcs[i].out};
		struct dr_device *d;
		struct sb_xc *grown;

		if (id < 0 || id >= t->n_devices || dr_reverting(t, id, &key))
			continue;
		d = &t->dev[id];
		grown = realloc(d->reverting, (d->n_reverting + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		d->reverting = grown;
		d->reverting[d->n_reverting++] = key;
		qsort(d->reverting, d->n_reverting, sizeof(key), sb_xc_cmp);
	}
	return 0;
}

void dr_reverted(struct dr_table *t, int id)
{
	struct dr_device *d = t && id >= 0 && id < t->n_devices ? &t->dev[id] : NULL;
	size_t kept = 0;

	if (!d || !d->n_reverting)
		return;
	for (size_t i = 0; i < d->n; i++)
		if (!bsearch(&d->xcs[i], d->reverting, d->n_reverting, sizeof(d->xcs[i]),
			     sb_xc_cmp))
			d->xcs[kept++] = d->xcs[i]; /* stays sorted */
	d->n = kept;
	d->n_reverting = 0;
}

bool dr_reverting(const struct dr_table *t, int id, const struct sb_xc *x)
{
	return t && id >= 0 && id < t->n_devices && t->dev[id].n_reverting &&
	       bsearch(x, t->dev[id].reverting, t->dev[id].n_reverting, sizeof(*x), sb_xc_cmp);
}

void dr_set_unverified(struct dr_table *t, int id)
{
	if (id >= 0 && id < t->n_devices)
		t->dev[id].unverified = true;
}

void dr_forget(struct dr_table *t, const struct ocs_xc *xcs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int id = ocs_fabric_device_id(t->f, xcs[i].group, xcs[i].device);
		struct sb_xc key = {(uint16_t)xcs[i].in, (uint16_t)xcs[i].out};
		struct dr_device *d = id >= 0 && id < t->n_devices ? &t->dev[id] : NULL;
		struct sb_xc *hit =
			d && d->n ? bsearch(&key, d->xcs, d->n, sizeof(key), sb_xc_cmp) : NULL;

		if (!hit)
			continue;
		memmove(hit, hit + 1, (size_t)(d->xcs + d->n - hit - 1) * sizeof(*hit));
		d->n--;
	}
}

static struct ocs_xc to_xc(const struct dr_table *t, int id, const struct sb_xc *x)
{
	return (struct ocs_xc){ocs_fabric_device_group(t->f, id),
			       ocs_fabric_device_in_group(t->f, id), x->in, x->out};
}

struct ocs_xc *dr_unowned(const struct dr_table *t, size_t *n)
{
	size_t total = dr_count(t), k = 0;
	struct ocs_xc *out;

	*n = 0;
	if (!total)
		return NULL;
	out = malloc(total * sizeof(*out));
	if (!out)
		return NULL;
	for (int id = 0; id < t->n_devices; id++)
		for (size_t i = 0; i < t->dev[id].n; i++)
			out[k++] = to_xc(t, id, &t->dev[id].xcs[i]);
	*n = k;
	return out;
}

const struct sb_xc *dr_device_unowned(const struct dr_table *t, int id, size_t *n)
{
	*n = 0;
	if (!t || id < 0 || id >= t->n_devices)
		return NULL;
	*n = t->dev[id].n;
	return t->dev[id].xcs;
}

const struct sb_xc *dr_device_missing(const struct dr_table *t, int id, size_t *n)
{
	*n = 0;
	if (!t || id < 0 || id >= t->n_devices)
		return NULL;
	*n = t->dev[id].n_missing;
	return t->dev[id].missing;
}

bool dr_device_unverified(const struct dr_table *t, int id)
{
	return t && id >= 0 && id < t->n_devices && t->dev[id].unverified;
}

size_t dr_count(const struct dr_table *t)
{
	size_t total = 0;

	for (int id = 0; t && id < t->n_devices; id++)
		total += t->dev[id].n;
	return total;
}

int dr_unverified(const struct dr_table *t)
{
	int n = 0;

	for (int id = 0; t && id < t->n_devices; id++)
		n += t->dev[id].unverified;
	return n;
}

bool dr_partner(const struct dr_table *t, const struct ocs_xc *x, struct ocs_xc *p)
{
	return partner_of(t->f, x, p);
}

bool dr_is_unowned(const struct dr_table *t, const struct ocs_xc *x)
{
	return is_unowned(t, x);
}

/* The other half of x's two-way circuit; false when x cannot have one. */
static bool partner_of(const struct ocs_fabric *f, const struct ocs_xc *x, struct ocs_xc *p)
{
	struct ocs_spine_port a, b;
	struct ocs_device_port tb, ra;

	if (ocs_fabric_input_owner(f, x->group, (struct ocs_device_port){x->device, x->in}, &a) ||
	    ocs_fabric_output_owner(f, x->group, (struct ocs_device_port){x->device, x->out}, &b) ||
	    (a.pod == b.pod && a.k == b.k))
		return false;
	tb = ocs_fabric_tx_port(f, b);
	ra = ocs_fabric_rx_port(f, a);
	if (tb.device != ra.device)
		return false;
	*p = (struct ocs_xc){x->group, tb.device, tb.port, ra.port};
	return true;
}

static bool is_unowned(const struct dr_table *t, const struct ocs_xc *x)
{
	int id = ocs_fabric_device_id(t->f, x->group, x->device);
	struct sb_xc key = {(uint16_t)x->in, (uint16_t)x->out};

	return id >= 0 && id < t->n_devices && t->dev[id].n &&
	       bsearch(&key, t->dev[id].xcs, t->dev[id].n, sizeof(key), sb_xc_cmp);
}

/* x has a partner that is unowned too (*p set). */
static bool paired(const struct dr_table *t, const struct ocs_xc *x, struct ocs_xc *p)
{
	return partner_of(t->f, x, p) && is_unowned(t, p);
}

int dr_paired_untouched(const struct dr_table *t, const char *touched, struct ocs_xc **out,
			size_t *n)
{
	size_t k = 0;
	struct ocs_xc p;

	*n = 0;
	*out = malloc((dr_count(t) + 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (int id = 0; id < t->n_devices; id++) {
		for (size_t i = 0; !touched[id] && i < t->dev[id].n; i++) {
			struct ocs_xc x = to_xc(t, id, &t->dev[id].xcs[i]);

			if (paired(t, &x, &p))
				(*out)[k++] = x;
		}
	}
	*n = k;
	return 0;
}

/* Port usage of every device: the stored circuits, then the blockers added. */
struct ports {
	int per_device;
	unsigned char *in, *out; /* [id * per_device + port] */
};

static bool port_free(const struct dr_table *t, const struct ports *u, const struct ocs_xc *x)
{
	int id = ocs_fabric_device_id(t->f, x->group, x->device);

	return x->in < u->per_device && x->out < u->per_device &&
	       !u->in[(size_t)id * u->per_device + x->in] &&
	       !u->out[(size_t)id * u->per_device + x->out];
}

static void use_ports(const struct dr_table *t, struct ports *u, const struct ocs_xc *x)
{
	int id = ocs_fabric_device_id(t->f, x->group, x->device);

	u->in[(size_t)id * u->per_device + x->in] = 1;
	u->out[(size_t)id * u->per_device + x->out] = 1;
}

int dr_planner_view(const struct dr_table *t, const struct fs_state *fs, struct ocs_xc **blockers,
		    size_t *n_blockers, bool *blocked)
{
	size_t cells = (size_t)t->n_devices * (size_t)ocs_fabric_device_ports_used(t->f) + 1;
	struct ports u = {ocs_fabric_device_ports_used(t->f), calloc(cells, 1), calloc(cells, 1)};
	struct ocs_xc *out = malloc((dr_count(t) + 1) * sizeof(*out));
	size_t k = 0;

	*blockers = NULL;
	*n_blockers = 0;
	if (!u.in || !u.out || !out) {
		free(u.in);
		free(u.out);
		free(out);
		return -ENOMEM;
	}
	for (int id = 0; id < t->n_devices; id++) {
		size_t n;
		const struct st_circuit *run = fs_device_circuits(fs, id, &n);

		for (size_t i = 0; i < n; i++)
			if (run[i].xc.in < u.per_device && run[i].xc.out < u.per_device)
				use_ports(t, &u, &run[i].xc);
		if (t->dev[id].unverified)
			blocked[id] = true;
	}
	for (int id = 0; id < t->n_devices; id++) {
		for (size_t i = 0; i < t->dev[id].n; i++) {
			struct ocs_xc x = to_xc(t, id, &t->dev[id].xcs[i]), p;
			int pid;

			if (!paired(t, &x, &p)) {
				blocked[id] = true; /* one-way, a loop or not cabled */
				continue;
			}
			if (ocs_xc_cmp_in_out(&x, &p) > 0)
				continue; /* the pair is taken from its first half */
			pid = ocs_fabric_device_id(t->f, p.group, p.device);
			if (!port_free(t, &u, &x) || !port_free(t, &u, &p)) {
				blocked[id] = blocked[pid] = true; /* collides with a stored one */
				continue;
			}
			use_ports(t, &u, &x);
			use_ports(t, &u, &p);
			out[k++] = x;
			out[k++] = p;
		}
	}
	free(u.in);
	free(u.out);
	*blockers = out;
	*n_blockers = k;
	return 0;
}

/* ---- ring domains ---- */

struct dr_nodes {
	int n_nodes;
	struct dr_node {
		struct dr_bundle *b;
		size_t n;
	} * node;
	size_t total;
};

struct dr_nodes *dr_nodes_new(int n_nodes)
{
	struct dr_nodes *t = calloc(1, sizeof(*t));

	if (!t || !(t->node = calloc((size_t)n_nodes + 1, sizeof(*t->node)))) {
		free(t);
		return NULL;
	}
	t->n_nodes = n_nodes;
	return t;
}

void dr_nodes_free(struct dr_nodes *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_nodes; i++)
		free(t->node[i].b);
	free(t->node);
	free(t);
}

int dr_nodes_set(struct dr_nodes *t, int node, const struct dr_bundle *b, size_t n)
{
	struct dr_bundle *copy = NULL;

	if (node < 0 || node >= t->n_nodes)
		return -EINVAL;
	if (n && !(copy = malloc(n * sizeof(*copy))))
		return -ENOMEM;
	if (n)
		memcpy(copy, b, n * sizeof(*copy));
	t->total = t->total - t->node[node].n + n;
	free(t->node[node].b);
	t->node[node] = (struct dr_node){copy, n};
	return 0;
}

const struct dr_bundle *dr_nodes_get(const struct dr_nodes *t, int node, size_t *n)
{
	*n = 0;
	if (!t || node < 0 || node >= t->n_nodes)
		return NULL;
	*n = t->node[node].n;
	return t->node[node].b;
}

int dr_nodes_count(const struct dr_nodes *t)
{
	return t ? t->n_nodes : 0;
}

size_t dr_nodes_total(const struct dr_nodes *t)
{
	return t ? t->total : 0;
}

const char *dr_bundle_setting(const struct sb_bundle *b, char *buf, size_t len)
{
	if (b->path == 0)
		snprintf(buf, len, "loopback");
	else
		snprintf(buf, len, "external %u %s", b->distance, b->dir ? "down" : "up");
	return buf;
}
