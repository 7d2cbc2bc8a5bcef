/*
 * fabric_state.c - implementation of fabric_state.h: a growing array of
 * owned cross-connects, kept in (group, device, in) order so look-ups and
 * per-device views are binary searches and contiguous runs.
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
	unsigned long generation;
};

static int xc_cmp(const struct ocs_xc *a, const struct ocs_xc *b)
{
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	if (a->in != b->in)
		return a->in < b->in ? -1 : 1;
	return 0;
}

static int circuit_cmp(const void *a, const void *b)
{
	return xc_cmp(&((const struct st_circuit *)a)->xc, &((const struct st_circuit *)b)->xc);
}

struct fs_state *fs_new(const struct ocs_fabric *f)
{
	struct fs_state *fs = calloc(1, sizeof(*fs));

	if (fs)
		fs->f = f;
	return fs;
}

void fs_free(struct fs_state *fs)
{
	if (!fs)
		return;
	free(fs->items);
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
	qsort(fs->items, fs->n, sizeof(*fs->items), circuit_cmp);
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

int fs_apply(struct fs_state *fs, const struct ocs_xc *removals, size_t n_removals,
	     const struct st_circuit *additions, size_t n_additions)
{
	size_t w = 0;

	if (reserve(fs, fs->n + n_additions) != 0)
		return -ENOMEM;
	for (size_t i = 0; i < n_removals; i++) {
		size_t at = lower_bound(fs, &removals[i]);

		if (at < fs->n && xc_cmp(&fs->items[at].xc, &removals[i]) == 0)
			fs->items[at].xc.group = -1; /* marked; compacted below */
	}
	for (size_t r = 0; r < fs->n; r++)
		if (fs->items[r].xc.group >= 0)
			fs->items[w++] = fs->items[r];
	fs->n = w;
	for (size_t i = 0; i < n_additions; i++)
		fs->items[fs->n++] = additions[i];
	qsort(fs->items, fs->n, sizeof(*fs->items), circuit_cmp);
	fs->generation++;
	return 0;
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

size_t fs_device_xcs(const struct fs_state *fs, int device_id)
{
	struct ocs_xc key = { ocs_fabric_device_group(fs->f, device_id),
			      ocs_fabric_device_in_group(fs->f, device_id), 0, 0 };
	size_t at = lower_bound(fs, &key), n = 0;

	while (at + n < fs->n && fs->items[at + n].xc.group == key.group &&
	       fs->items[at + n].xc.device == key.device)
		n++;
	return n;
}

/* The cross-connect carrying light out of spine port sp, if configured. */
static const struct st_circuit *find_from(const struct fs_state *fs, struct ocs_spine_port sp)
{
	struct ocs_device_port tx = ocs_fabric_tx_port(fs->f, sp);
	struct ocs_xc key = { sp.h, tx.device, tx.port, 0 };
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

struct fs_circuit *fs_circuits(const struct fs_state *fs, const char *job_id, int device_id,
			       int pod, size_t *n)
{
	struct fs_circuit *out = malloc((fs->n ? fs->n : 1) * sizeof(*out));

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < fs->n; i++) {
		const struct st_circuit *c = &fs->items[i], *back;
		struct ocs_spine_port a, b;
		struct fs_circuit fc;
		int dev_ab, dev_ba;

		if (ocs_fabric_input_owner(fs->f, c->xc.group,
					   (struct ocs_device_port){ c->xc.device, c->xc.in }, &a) ||
		    ocs_fabric_output_owner(fs->f, c->xc.group,
					    (struct ocs_device_port){ c->xc.device, c->xc.out }, &b))
			continue; /* uncabled: the L2 checker reports it */
		back = find_from(fs, b);
		/* Each circuit once: from its smaller end, or alone when one-way. */
		if (back && back != c && port_less(b, a))
			continue;
		fc = (struct fs_circuit){ a, b, c->xc, { -1, -1, -1, -1 }, false, c->job_id };
		if (back) {
			fc.xc_ba = back->xc;
			fc.complete = true;
		}
		if (job_id && strcmp(c->job_id, job_id) != 0)
			continue;
		if (pod >= 0 && a.pod != pod && b.pod != pod)
			continue;
		dev_ab = ocs_fabric_device_id(fs->f, fc.xc_ab.group, fc.xc_ab.device);
		dev_ba = back ? ocs_fabric_device_id(fs->f, fc.xc_ba.group, fc.xc_ba.device) : -1;
		if (device_id >= 0 && dev_ab != device_id && dev_ba != device_id)
			continue;
		out[(*n)++] = fc;
	}
	return out;
}
