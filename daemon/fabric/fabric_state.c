/*
 * fabric_state.c - implementation of fabric_state.h: a growing array of
 * owned cross-connects, kept in (group, device, in) order, i.e. the sorted
 * cross-connects of device 0, then of device 1, ... (device ids follow
 * (group, device) order). A table of where each device's run starts makes
 * every per-device view a contiguous run found in O(1), and a look-up a
 * binary search within one device's run.
 */
#include "fabric_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fs_state {
	const struct ocs_fabric *f;
	struct st_circuit *items; /* sorted by (group, device, in) */
	size_t n;
	size_t cap;
	/* [device id]: the device's run is items[start, end) */
	size_t *start, *end;
	int n_devices;
	unsigned long generation;
};

/* A device input carries at most one cross-connect: (group, device, in) is the key. */
static int xc_cmp(const struct ocs_xc *a, const struct ocs_xc *b)
{
	return ocs_xc_cmp_in(a, b);
}

static int circuit_cmp(const void *a, const void *b)
{
	return xc_cmp(&((const struct st_circuit *)a)->xc, &((const struct st_circuit *)b)->xc);
}

struct fs_state *fs_new(const struct ocs_fabric *f)
{
	struct fs_state *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->f = f;
	fs->n_devices = ocs_fabric_devices(f);
	fs->start = calloc((size_t)fs->n_devices + 1, sizeof(*fs->start));
	fs->end = calloc((size_t)fs->n_devices + 1, sizeof(*fs->end));
	if (!fs->start || !fs->end) {
		fs_free(fs);
		return NULL;
	}
	return fs;
}

/*
 * Rebuilds where each device's run starts and ends after a change:
 * O(n + devices). A cross-connect naming no device of the fabric belongs to
 * no run.
 */
static void index_devices(struct fs_state *fs)
{
	memset(fs->start, 0, (size_t)fs->n_devices * sizeof(*fs->start));
	memset(fs->end, 0, (size_t)fs->n_devices * sizeof(*fs->end));
	for (size_t i = 0; i < fs->n; i++) {
		int id = ocs_fabric_device_id(fs->f, fs->items[i].xc.group, fs->items[i].xc.device);

		if (fs->items[i].xc.group < 0 || fs->items[i].xc.device < 0 ||
		    fs->items[i].xc.device >= ocs_fabric_devices_per_group(fs->f) || id < 0 ||
		    id >= fs->n_devices)
			continue;
		if (fs->end[id] == 0)
			fs->start[id] = i;
		fs->end[id] = i + 1;
	}
}

void fs_free(struct fs_state *fs)
{
	if (!fs)
		return;
	free(fs->items);
	free(fs->start);
	free(fs->end);
	free(fs);
}

static int reserve(struct fs_state *fs, size_t n)
{
	size_t cap = fs->cap ? fs->cap : 64;
	struct st_circuit *p;

	if (n <= fs->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	p = realloc(fs->items, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	fs->items = p;
	fs->cap = cap;
	return 0;
}

static int load_one(void *ctx, const struct st_circuit *c)
{
	struct fs_state *fs = ctx;

	if (reserve(fs, fs->n + 1) != 0)
		return -ENOMEM;
	fs->items[fs->n++] = *c;
	return 0;
}

int fs_load(struct fs_state *fs, struct st_store *st)
{
	int rc;

	fs->n = 0;
	rc = st_circuit_list(st, NULL, load_one, fs);
	if (fs->n > 1)
		qsort(fs->items, fs->n, sizeof(*fs->items), circuit_cmp);
	index_devices(fs);
	fs->generation++;
	return rc;
}

size_t fs_count(const struct fs_state *fs)
{
	return fs->n;
}

const struct st_circuit *fs_at(const struct fs_state *fs, size_t i)
{
	return i < fs->n ? &fs->items[i] : NULL;
}

unsigned long fs_generation(const struct fs_state *fs)
{
	return fs->generation;
}

struct ocs_xc *fs_snapshot(const struct fs_state *fs, size_t *n)
{
	struct ocs_xc *out = malloc((fs->n ? fs->n : 1) * sizeof(*out));

	if (!out)
		return NULL;
	for (size_t i = 0; i < fs->n; i++)
		out[i] = fs->items[i].xc;
	*n = fs->n;
	return out;
}

/* Index of the first item not below key. */
static size_t lower_bound(const struct fs_state *fs, const struct ocs_xc *key)
{
	size_t lo = 0, hi = fs->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (xc_cmp(&fs->items[mid].xc, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Removals are binary searches, additions are sorted and merged in from the
 * back: O(n + k log k) for k changes, no re-sort of the whole fabric.
 */
int fs_apply(struct fs_state *fs, const struct ocs_xc *removals, size_t n_removals,
	     const struct st_circuit *additions, size_t n_additions)
{
	struct st_circuit *adds = malloc((n_additions ? n_additions : 1) * sizeof(*adds));
	/* Found first, dropped after: marking in place would unsort the searched array. */
	unsigned char *gone = calloc(fs->n + 1, 1);
	size_t w = 0, r, a;

	if (!adds || !gone || reserve(fs, fs->n + n_additions) != 0) {
		free(adds);
		free(gone);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_removals; i++) {
		size_t at = lower_bound(fs, &removals[i]);

		if (at < fs->n && xc_cmp(&fs->items[at].xc, &removals[i]) == 0)
			gone[at] = 1;
	}
	for (r = 0; r < fs->n; r++)
		if (!gone[r])
			fs->items[w++] = fs->items[r];
	free(gone);
	if (n_additions)
		memcpy(adds, additions, n_additions * sizeof(*adds));
	if (n_additions > 1)
		qsort(adds, n_additions, sizeof(*adds), circuit_cmp);
	/* Merge from the back: items[0, w) and adds[0, k) into items[0, w + k). */
	r = w;
	a = n_additions;
	fs->n = w + n_additions;
	for (size_t out = fs->n; a > 0; out--) {
		if (r > 0 && circuit_cmp(&fs->items[r - 1], &adds[a - 1]) > 0)
			fs->items[out - 1] = fs->items[--r];
		else
			fs->items[out - 1] = adds[--a];
	}
	free(adds);
	index_devices(fs);
	fs->generation++;
	return 0;
}

bool fs_contains(const struct fs_state *fs, const struct ocs_xc *xc)
{
	size_t at = lower_bound(fs, xc);

	return at < fs->n && xc_cmp(&fs->items[at].xc, xc) == 0 && fs->items[at].xc.out == xc->out;
}

struct ocs_xc *fs_job_xcs(const struct fs_state *fs, const char *job_id, size_t *n)
{
	struct ocs_xc *out = malloc((fs->n ? fs->n : 1) * sizeof(*out));

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < fs->n; i++)
		if (strcmp(fs->items[i].job_id, job_id) == 0)
			out[(*n)++] = fs->items[i].xc;
	return out;
}

const struct st_circuit *fs_device_circuits(const struct fs_state *fs, int device_id, size_t *n)
{
	if (device_id < 0 || device_id >= fs->n_devices) {
		*n = 0;
		return fs->items;
	}
	*n = fs->end[device_id] - fs->start[device_id];
	return fs->items + fs->start[device_id];
}

size_t fs_device_xcs(const struct fs_state *fs, int device_id)
{
	size_t n;

	(void)fs_device_circuits(fs, device_id, &n); /* only the count is wanted */
	return n;
}

size_t fs_group_xcs(const struct fs_state *fs, int group)
{
	int per = ocs_fabric_devices_per_group(fs->f);
	size_t n = 0;

	for (int k = 0; k < per; k++)
		n += fs_device_xcs(fs, ocs_fabric_device_id(fs->f, group, k));
	return n;
}

/* The cross-connect carrying light out of spine port sp, if configured. */
static const struct st_circuit *find_from(const struct fs_state *fs, struct ocs_spine_port sp)
{
	struct ocs_device_port tx = ocs_fabric_tx_port(fs->f, sp);
	struct ocs_xc key = {sp.h, tx.device, tx.port, 0};
	size_t at = lower_bound(fs, &key);

	if (at < fs->n && xc_cmp(&fs->items[at].xc, &key) == 0)
		return &fs->items[at];
	return NULL;
}

static bool port_less(struct ocs_spine_port a, struct ocs_spine_port b)
{
	if (a.pod != b.pod)
		return a.pod < b.pod;
	return a.k < b.k;
}

/*
 * Appends the circuit c starts to out when c is its canonical cross-connect
 * (each circuit once: from its smaller end, or alone when one-way) and it
 * passes the filters.
 */
static void add_circuit(const struct fs_state *fs, const struct st_circuit *c, const char *job_id,
			int device_id, int pod, struct fs_circuit *out, size_t *n)
{
	const struct st_circuit *back;
	struct ocs_spine_port a, b;
	struct fs_circuit fc;
	int dev_ab, dev_ba;

	if (ocs_fabric_input_owner(fs->f, c->xc.group,
				   (struct ocs_device_port){c->xc.device, c->xc.in}, &a) ||
	    ocs_fabric_output_owner(fs->f, c->xc.group,
				    (struct ocs_device_port){c->xc.device, c->xc.out}, &b))
		return; /* uncabled: the L2 checker reports it */
	back = find_from(fs, b);
	if (back && back != c && port_less(b, a))
		return;
	fc = (struct fs_circuit){a, b, c->xc, {-1, -1, -1, -1}, false, c->job_id};
	if (back) {
		fc.xc_ba = back->xc;
		fc.complete = true;
	}
	if (job_id && strcmp(c->job_id, job_id) != 0)
		return;
	if (pod >= 0 && a.pod != pod && b.pod != pod)
		return;
	dev_ab = ocs_fabric_device_id(fs->f, fc.xc_ab.group, fc.xc_ab.device);
	dev_ba = back ? ocs_fabric_device_id(fs->f, fc.xc_ba.group, fc.xc_ba.device) : -1;
	if (device_id >= 0 && dev_ab != device_id && dev_ba != device_id)
		return;
	out[(*n)++] = fc;
}

/*
 * Devices whose cross-connects may start a circuit touching device_id: the
 * device itself and the devices receiving for the spine ports cabled to its
 * inputs (a circuit from x elsewhere comes back through device_id only if x
 * sends to the spine port device_id receives from). Marks them in
 * near[device in group].
 */
static void near_devices(const struct fs_state *fs, int device_id, bool *near)
{
	int h = ocs_fabric_device_group(fs->f, device_id);
	int k = ocs_fabric_device_in_group(fs->f, device_id);

	near[k] = true;
	for (int p = 0; p < ocs_fabric_device_ports_used(fs->f); p++) {
		struct ocs_spine_port sp;

		if (ocs_fabric_input_owner(fs->f, h, (struct ocs_device_port){k, p}, &sp) == 0)
			near[ocs_fabric_rx_port(fs->f, sp).device] = true;
	}
}

struct fs_circuit *fs_circuits(const struct fs_state *fs, const char *job_id, int device_id,
			       int pod, size_t *n)
{
	struct fs_circuit *out = malloc((fs->n ? fs->n : 1) * sizeof(*out));
	int per = ocs_fabric_devices_per_group(fs->f);
	bool *near;

	*n = 0;
	if (!out)
		return NULL;
	if (device_id < 0 || device_id >= fs->n_devices) {
		for (size_t i = 0; device_id < 0 && i < fs->n; i++)
			add_circuit(fs, &fs->items[i], job_id, device_id, pod, out, n);
		return out;
	}
	/* One device: only the runs of the devices its circuits can start on. */
	near = calloc((size_t)per, sizeof(*near));
	if (!near) {
		free(out);
		return NULL;
	}
	near_devices(fs, device_id, near);
	for (int k = 0; k < per; k++) {
		size_t nr;
		const struct st_circuit *run;

		if (!near[k])
			continue;
		run = fs_device_circuits(
			fs,
			ocs_fabric_device_id(fs->f, ocs_fabric_device_group(fs->f, device_id), k),
			&nr);
		for (size_t i = 0; i < nr; i++)
			add_circuit(fs, &run[i], job_id, device_id, pod, out, n);
	}
	free(near);
	return out;
}

/*
 * Port usage of the devices drain blockers look at, filled from a device's
 * run the first time the device is looked at (not from the whole fabric).
 */
struct port_use {
	const struct fs_state *fs;
	int ports;			   /* cabled ports per device */
	unsigned char *loaded;		   /* [device id] */
	unsigned char *in_used, *out_used; /* [device id * ports + port] */
};

static void load_device(struct port_use *u, int id)
{
	const struct st_circuit *run;
	size_t n;

	if (u->loaded[id])
		return;
	u->loaded[id] = 1;
	run = fs_device_circuits(u->fs, id, &n);
	for (size_t i = 0; i < n; i++) {
		if (run[i].xc.in < u->ports)
			u->in_used[(size_t)id * u->ports + run[i].xc.in] = 1;
		if (run[i].xc.out < u->ports)
			u->out_used[(size_t)id * u->ports + run[i].xc.out] = 1;
	}
}

static bool port_free(struct port_use *u, int h, struct ocs_device_port dp, bool input)
{
	int id = ocs_fabric_device_id(u->fs->f, h, dp.device);
	const unsigned char *used = input ? u->in_used : u->out_used;

	load_device(u, id);
	return dp.port < u->ports && !used[(size_t)id * u->ports + dp.port];
}

static void use_port(struct port_use *u, int h, struct ocs_device_port dp, bool input)
{
	int id = ocs_fabric_device_id(u->fs->f, h, dp.device);

	load_device(u, id);
	(input ? u->in_used : u->out_used)[(size_t)id * u->ports + dp.port] = 1;
}

static bool group_drained(const struct ocs_fabric *f, int h, const bool *drained)
{
	for (int k = 0; k < ocs_fabric_devices_per_group(f); k++)
		if (drained[ocs_fabric_device_id(f, h, k)])
			return true;
	return false;
}

struct ocs_xc *fs_drain_blockers(const struct fs_state *fs, const bool *drained, size_t *n)
{
	return fs_drain_blockers_around(fs, drained, NULL, 0, n);
}

struct ocs_xc *fs_drain_blockers_around(const struct fs_state *fs, const bool *drained,
					const struct ocs_xc *taken, size_t n_taken, size_t *n)
{
	const struct ocs_fabric *f = fs->f;
	size_t cells = (size_t)ocs_fabric_devices(f) * ocs_fabric_device_ports_used(f);
	struct port_use u = {fs, ocs_fabric_device_ports_used(f),
			     calloc((size_t)ocs_fabric_devices(f) + 1, 1), calloc(cells + 1, 1),
			     calloc(cells + 1, 1)};
	size_t n_ports = (size_t)f->pods * f->k_spine, cap = 16;
	struct ocs_spine_port *cand = malloc((n_ports ? n_ports : 1) * sizeof(*cand));
	struct ocs_xc *out = malloc(cap * sizeof(*out));

	*n = 0;
	if (!u.loaded || !u.in_used || !u.out_used || !cand || !out)
		goto oom;
	for (size_t i = 0; i < n_taken; i++) {
		struct ocs_device_port in = {taken[i].device, taken[i].in};
		struct ocs_device_port o = {taken[i].device, taken[i].out};

		if (taken[i].in < u.ports && taken[i].out < u.ports) {
			use_port(&u, taken[i].group, in, true);
			use_port(&u, taken[i].group, o, false);
		}
	}
	for (int h = 0; h < ocs_fabric_groups(f); h++) {
		size_t nc = 0;

		if (!group_drained(f, h, drained))
			continue;
		/* Free spine ports whose light passes a drained device. */
		for (int p = 0; p < f->pods; p++) {
			for (int k = 0; k < f->k_spine; k++) {
				struct ocs_spine_port sp = {p, h, k};
				struct ocs_device_port tx = ocs_fabric_tx_port(f, sp);
				struct ocs_device_port rx = ocs_fabric_rx_port(f, sp);

				if ((drained[ocs_fabric_device_id(f, h, tx.device)] ||
				     drained[ocs_fabric_device_id(f, h, rx.device)]) &&
				    port_free(&u, h, tx, true) && port_free(&u, h, rx, false))
					cand[nc++] = sp;
			}
		}
		/* Pair them into two-way circuits between different pods. */
		for (size_t a = 0; a < nc; a++) {
			struct ocs_device_port ta = ocs_fabric_tx_port(f, cand[a]);
			struct ocs_device_port ra = ocs_fabric_rx_port(f, cand[a]);

			if (!port_free(&u, h, ta, true) || !port_free(&u, h, ra, false))
				continue;
			for (size_t b = a + 1; b < nc; b++) {
				struct ocs_device_port tb = ocs_fabric_tx_port(f, cand[b]);
				struct ocs_device_port rb = ocs_fabric_rx_port(f, cand[b]);

				if (cand[b].pod == cand[a].pod || tb.device != ra.device ||
				    ta.device != rb.device || !port_free(&u, h, tb, true) ||
				    !port_free(&u, h, rb, false))
					continue;
				if (*n + 2 > cap) {
					struct ocs_xc *p2 = realloc(out, (cap *= 2) * sizeof(*out));

					if (!p2)
						goto oom;
					out = p2;
				}
				out[(*n)++] = (struct ocs_xc){h, ta.device, ta.port, rb.port};
				out[(*n)++] = (struct ocs_xc){h, tb.device, tb.port, ra.port};
				use_port(&u, h, ta, true);
				use_port(&u, h, rb, false);
				use_port(&u, h, tb, true);
				use_port(&u, h, ra, false);
				break;
			}
		}
	}
	free(cand);
	free(u.loaded);
	free(u.in_used);
	free(u.out_used);
	return out;
oom:
	free(cand);
	free(u.loaded);
	free(u.in_used);
	free(u.out_used);
	free(out);
	*n = 0;
	return NULL;
}
