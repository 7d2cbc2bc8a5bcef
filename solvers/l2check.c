/*
 * l2check.c - the independent L2 symmetry checker (see l2check.h).
 *
 * Every cabled device port of a group is owned by exactly one spine port
 * (fabric.h: ocs_fabric_input_owner / output_owner), so the checker keeps two
 * dense tables per group, indexed by (device, port) for the ports the pods
 * use: which cross-connect occupies each input and each output. A spine port
 * A whose light enters input x, crosses to output y owned by spine port B,
 * is answered only if B's own transmit port (ocs_fabric_tx_port) carries a
 * cross-connect whose output is owned by A.
 */
#include "l2check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct l2_ctx {
	const struct ocs_fabric *f;
	struct l2_violation *out;
	int max_out;
	int count;
};

static void report(struct l2_ctx *c, const struct ocs_xc *xc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(struct l2_ctx *c, const struct ocs_xc *xc, const char *fmt, ...)
{
	if (c->count < c->max_out) {
		va_list ap;

		c->out[c->count].xc = *xc;
		va_start(ap, fmt);
		vsnprintf(c->out[c->count].reason, sizeof(c->out[c->count].reason), fmt, ap);
		va_end(ap);
	}
	c->count++;
}

/* Index of (group, device, port) in the dense per-fabric tables. */
static size_t slot(const struct ocs_fabric *f, int group, int device, int port)
{
	size_t dpg = (size_t)ocs_fabric_devices_per_group(f);
	size_t used = (size_t)ocs_fabric_device_ports_used(f);

	return ((size_t)group * dpg + (size_t)device) * used + (size_t)port;
}

static bool same_port(struct ocs_spine_port a, struct ocs_spine_port b)
{
	return a.pod == b.pod && a.h == b.h && a.k == b.k;
}

/* Range and cabling of one cross-connect; true when both ends are cabled. */
static bool xc_cabled(struct l2_ctx *c, const struct ocs_xc *xc, struct ocs_spine_port *from,
		      struct ocs_spine_port *to)
{
	const struct ocs_fabric *f = c->f;

	if (xc->group < 0 || xc->group >= ocs_fabric_groups(f)) {
		report(c, xc, "group %d out of range 0..%d", xc->group, ocs_fabric_groups(f) - 1);
		return false;
	}
	if (xc->device < 0 || xc->device >= ocs_fabric_devices_per_group(f)) {
		report(c, xc, "device %d out of range 0..%d", xc->device,
		       ocs_fabric_devices_per_group(f) - 1);
		return false;
	}
	if (xc->in < 0 || xc->in >= f->k_ocs || xc->out < 0 || xc->out >= f->k_ocs) {
		report(c, xc, "port in %d / out %d out of range 0..%d", xc->in, xc->out,
		       f->k_ocs - 1);
		return false;
	}
	if (ocs_fabric_input_owner(f, xc->group, (struct ocs_device_port){ xc->device, xc->in },
				   from) != 0) {
		report(c, xc, "input port %d is not cabled to any spine", xc->in);
		return false;
	}
	if (ocs_fabric_output_owner(f, xc->group, (struct ocs_device_port){ xc->device, xc->out },
				    to) != 0) {
		report(c, xc, "output port %d is not cabled to any spine", xc->out);
		return false;
	}
	return true;
}

int l2_check(const struct ocs_fabric *f, const struct ocs_xc *xcs, size_t n_xcs,
	     struct l2_violation *out, int max_out)
{
	struct l2_ctx c = { f, out, out ? max_out : 0, 0 };
	size_t n_slots = (size_t)ocs_fabric_groups(f) * (size_t)ocs_fabric_devices_per_group(f) *
			 (size_t)ocs_fabric_device_ports_used(f);
	/* by_in[slot] / by_out[slot]: index of the cross-connect + 1, 0 when free. */
	size_t *by_in = calloc(n_slots ? n_slots : 1, sizeof(*by_in));
	size_t *by_out = calloc(n_slots ? n_slots : 1, sizeof(*by_out));
	bool *ok = calloc(n_xcs ? n_xcs : 1, sizeof(*ok));

	if (!by_in || !by_out || !ok) {
		free(by_in);
		free(by_out);
		free(ok);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_xcs; i++) {
		const struct ocs_xc *xc = &xcs[i];
		struct ocs_spine_port from, to;
		size_t si, so;

		if (!xc_cabled(&c, xc, &from, &to))
			continue;
		si = slot(f, xc->group, xc->device, xc->in);
		so = slot(f, xc->group, xc->device, xc->out);
		ok[i] = true;
		if (by_in[si]) {
			report(&c, xc, "input port %d of device %d already carries a cross-connect",
			       xc->in, xc->device);
			ok[i] = false;
		} else {
			by_in[si] = i + 1;
		}
		if (by_out[so]) {
			report(&c, xc, "output port %d of device %d already carries a cross-connect",
			       xc->out, xc->device);
			ok[i] = false;
		} else {
			by_out[so] = i + 1;
		}
	}
	for (size_t i = 0; i < n_xcs; i++) {
		const struct ocs_xc *xc = &xcs[i];
		struct ocs_spine_port a, b, back;
		struct ocs_device_port b_tx;
		size_t j;

		if (!ok[i])
			continue;
		ocs_fabric_input_owner(f, xc->group, (struct ocs_device_port){ xc->device, xc->in },
				       &a);
		ocs_fabric_output_owner(f, xc->group,
					(struct ocs_device_port){ xc->device, xc->out }, &b);
		if (same_port(a, b)) {
			report(&c, xc, "spine port (pod %d, spine %d, port %d) loops back to itself",
			       a.pod, a.h, a.k);
			continue;
		}
		b_tx = ocs_fabric_tx_port(f, b);
		j = by_in[slot(f, xc->group, b_tx.device, b_tx.port)];
		if (j == 0) {
			report(&c, xc,
			       "one-way circuit: pod %d port %d reaches pod %d port %d, which "
			       "sends nowhere",
			       a.pod, a.k, b.pod, b.k);
			continue;
		}
		ocs_fabric_output_owner(f, xc->group,
					(struct ocs_device_port){ xcs[j - 1].device, xcs[j - 1].out },
					&back);
		if (!same_port(back, a))
			report(&c, xc,
			       "one-way circuit: pod %d port %d reaches pod %d port %d, which "
			       "answers pod %d port %d",
			       a.pod, a.k, b.pod, b.k, back.pod, back.k);
	}
	free(by_in);
	free(by_out);
	free(ok);
	return c.count;
}
