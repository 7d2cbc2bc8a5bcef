/*
 * cabling.c - implementation of cabling.h: the miswired ports of every
 * device in one array sorted by (device, port, egress), replaced device by
 * device as reconciliation reads them.
 */
#include "cabling.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cab_table {
	const struct ocs_fabric *f;
	struct cab_entry *e; /* sorted by (device, port, egress) */
	size_t n, cap;
	size_t n_cleared;
};

struct cab_table *cab_new(const struct ocs_fabric *f)
{
	struct cab_table *t = calloc(1, sizeof(*t));

	if (t)
		t->f = f;
	return t;
}

void cab_free(struct cab_table *t)
{
	if (!t)
		return;
	free(t->e);
	free(t);
}

void cab_expected(const struct ocs_fabric *f, int id, uint16_t port, bool egress, char *buf,
		  size_t len)
{
	int h = ocs_fabric_device_group(f, id);
	struct ocs_device_port dp = {ocs_fabric_device_in_group(f, id), port};
	struct ocs_spine_port sp;
	int rc = egress ? ocs_fabric_output_owner(f, h, dp, &sp)
			: ocs_fabric_input_owner(f, h, dp, &sp);

	if (rc)
		snprintf(buf, len, "%s", ""); /* not cabled */
	else
		snprintf(buf, len, "pod%d-spine%d-port%d", sp.pod, sp.h, sp.k);
}

/* Where device id's entries are: [*first, *end). */
static void device_range(const struct cab_table *t, int id, size_t *first, size_t *end)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->e[mid].device < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = lo;
	while (lo < t->n && t->e[lo].device == id)
		lo++;
	*end = lo;
}

/* The old entry of (port, egress) among old[0..n), or NULL. */
static const struct cab_entry *find_old(const struct cab_entry *old, size_t n, uint16_t port,
					bool egress)
{
	for (size_t i = 0; i < n; i++)
		if (old[i].port == port && old[i].egress == egress)
			return &old[i];
	return NULL;
}

int cab_set(struct cab_table *t, int id, const struct sb_device_info *info, cab_change_fn fn,
	    void *ctx)
{
	struct cab_entry *now = NULL, *old = NULL;
	size_t n_now = 0, first, end, n_old;

	if (!t->f)
		return 0;
	now = calloc(info->n_ports + 1, sizeof(*now));
	if (!now)
		return -ENOMEM;
	for (size_t i = 0; i < info->n_ports; i++) {
		const struct sb_port_info *p = &info->ports[i];
		struct cab_entry e = {.device = id, .port = p->port, .egress = p->egress};

		if (!p->peer[0])
			continue; /* nothing recorded on the device */
		cab_expected(t->f, id, p->port, p->egress, e.expected, sizeof(e.expected));
		if (!strcmp(e.expected, p->peer))
			continue;
		snprintf(e.reported, sizeof(e.reported), "%s", p->peer);
		now[n_now++] = e;
	}
	device_range(t, id, &first, &end);
	n_old = end - first;
	old = n_old ? malloc(n_old * sizeof(*old)) : NULL;
	if (n_old && !old) {
		free(now);
		return -ENOMEM;
	}
	if (n_old)
		memcpy(old, &t->e[first], n_old * sizeof(*old));
	/* a clearance holds while the device reports the same text */
	for (size_t i = 0; i < n_now; i++) {
		const struct cab_entry *o = find_old(old, n_old, now[i].port, now[i].egress);

		now[i].cleared = o && o->cleared && !strcmp(o->reported, now[i].reported);
	}
	if (t->n - n_old + n_now > t->cap) {
		size_t cap = (t->n - n_old + n_now) * 2 + 8;
		struct cab_entry *g = realloc(t->e, cap * sizeof(*g));

		if (!g) {
			free(old);
			free(now);
			return -ENOMEM;
		}
		t->e = g;
		t->cap = cap;
	}
	if (t->n > end && n_now != n_old)
		memmove(&t->e[first + n_now], &t->e[end], (t->n - end) * sizeof(*t->e));
	if (n_now)
		memcpy(&t->e[first], now, n_now * sizeof(*now));
	t->n = t->n - n_old + n_now;
	for (size_t i = 0; i < n_old; i++)
		t->n_cleared -= old[i].cleared;
	for (size_t i = 0; i < n_now; i++)
		t->n_cleared += now[i].cleared;
	for (size_t i = 0; fn && i < n_now; i++) {
		const struct cab_entry *o = find_old(old, n_old, now[i].port, now[i].egress);

		if (!o || strcmp(o->reported, now[i].reported))
			fn(ctx, &now[i], true);
	}
	for (size_t i = 0; fn && i < n_old; i++)
		if (!find_old(now, n_now, old[i].port, old[i].egress))
			fn(ctx, &old[i], false);
	free(old);
	free(now);
	return 0;
}

const struct cab_entry *cab_list(const struct cab_table *t, size_t *n)
{
	*n = t->n;
	return t->e;
}

size_t cab_miswired(const struct cab_table *t)
{
	return t->n - t->n_cleared;
}

int cab_clear(struct cab_table *t, int id, uint16_t port)
{
	size_t first, end;
	bool any = false;

	device_range(t, id, &first, &end);
	for (size_t i = first; i < end; i++) {
		if (t->e[i].port != port)
			continue;
		any = true;
		t->n_cleared += !t->e[i].cleared;
		t->e[i].cleared = true;
	}
	return any ? 0 : -ENOENT;
}

/* Entry i takes its port out of service: not cleared, and not taken by the entry before it. */
static bool pinned(const struct cab_table *t, size_t i)
{
	const struct cab_entry *e = &t->e[i], *p = i ? &t->e[i - 1] : NULL;

	return !e->cleared && !(p && p->device == e->device && p->port == e->port && !p->cleared);
}

int cab_out_of_service(const struct cab_table *t, struct ocs_xc **out, size_t *n)
{
	size_t k = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < t->n; i++)
		k += pinned(t, i);
	if (!k)
		return 0;
	*out = malloc(k * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		const struct cab_entry *e = &t->e[i];

		if (pinned(t, i))
			(*out)[(*n)++] = (struct ocs_xc){
				ocs_fabric_device_group(t->f, e->device),
				ocs_fabric_device_in_group(t->f, e->device), e->port, e->port};
	}
	return 0;
}
