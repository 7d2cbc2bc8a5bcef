/*
 * rail_swap.c - the rail-OCS port map, its cross-connects and L2 check, and
 * the GPU swap (cases 1 and 2 of the Rail-only paper's section IV-C), as
 * declared in rail_swap.h. Only the group of the failed GPU is looked at:
 * a swap never leaves its OCS group.
 */
#include "rail_swap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rail_port_map_init(struct rail_port_map *m, const struct ocs_rail_fabric *r)
{
	int64_t n = ocs_rail_rail_ports(r);

	m->n_ports = 0;
	m->gpu = malloc((size_t)(n > 0 ? n : 1) * sizeof(*m->gpu));
	if (!m->gpu)
		return -ENOMEM;
	m->n_ports = n;
	for (int64_t p = 0; p < n; p++)
		m->gpu[p] =
			ocs_rail_gpu_id(r, ocs_rail_port_server(r, p), ocs_rail_port_rail(r, p));
	return 0;
}

void rail_port_map_clear(struct rail_port_map *m)
{
	if (!m)
		return;
	free(m->gpu);
	m->gpu = NULL;
	m->n_ports = 0;
}

/* The group a rail port's switch-side port is on. */
static int port_group(const struct ocs_rail_fabric *r, int64_t rail_port)
{
	return ocs_rail_server_group(r, ocs_rail_port_server(r, rail_port));
}

/* True when every entry is RAIL_NONE or a GPU of the port's own group. */
static bool map_fits(const struct ocs_rail_fabric *r, const struct rail_port_map *m)
{
	if (m->n_ports != ocs_rail_rail_ports(r))
		return false;
	for (int64_t p = 0; p < m->n_ports; p++) {
		int64_t g = m->gpu[p];

		if (g == RAIL_NONE)
			continue;
		if (g < 0 || g >= ocs_rail_gpus(r) ||
		    ocs_rail_server_group(r, ocs_rail_gpu_server(r, g)) != port_group(r, p))
			return false;
	}
	return true;
}

static int switch_port_of(const struct ocs_rail_fabric *r, int64_t rail_port)
{
	return ocs_rail_switch_port(r, ocs_rail_port_server(r, rail_port),
				    ocs_rail_port_rail(r, rail_port));
}

/* Appends the two cross-connects of the join of gpu and rail_port. */
static void add_join(const struct ocs_rail_fabric *r, int64_t gpu, int64_t rail_port,
		     struct ocs_xc *xcs, size_t *n)
{
	int group = port_group(r, rail_port);
	int gp = ocs_rail_gpu_port(r, gpu), sp = switch_port_of(r, rail_port);

	xcs[(*n)++] = (struct ocs_xc){.group = group, .device = 0, .in = gp, .out = sp};
	xcs[(*n)++] = (struct ocs_xc){.group = group, .device = 0, .in = sp, .out = gp};
}

int rail_port_map_xcs(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
		      struct ocs_xc **out, size_t *n_out)
{
	struct ocs_xc *xcs;
	size_t n = 0;

	*out = NULL;
	*n_out = 0;
	if (!map_fits(r, m))
		return -EINVAL;
	xcs = malloc((size_t)(2 * m->n_ports + 1) * sizeof(*xcs));
	if (!xcs)
		return -ENOMEM;
	for (int64_t p = 0; p < m->n_ports; p++)
		if (m->gpu[p] != RAIL_NONE)
			add_join(r, m->gpu[p], p, xcs, &n);
	qsort(xcs, n, sizeof(*xcs), ocs_xc_cmp_in_out);
	if (n == 0) {
		free(xcs);
		xcs = NULL;
	}
	*out = xcs;
	*n_out = n;
	return 0;
}

/* True when xc is on an existing device and both ports exist. */
static bool xc_in_range(const struct ocs_rail_fabric *r, const struct ocs_xc *x)
{
	int ports = ocs_rail_device_ports(r);

	return x->group >= 0 && x->group < ocs_rail_groups(r) && x->device == 0 && x->in >= 0 &&
	       x->in < ports && x->out >= 0 && x->out < ports;
}

/*
 * Per device, the output each input is joined to (-1 = none), as flat
 * arrays over groups * device ports; -2 marks an input used twice.
 */
static int *outputs_by_input(const struct ocs_rail_fabric *r, const struct ocs_xc *xcs, size_t n)
{
	size_t ports = (size_t)ocs_rail_device_ports(r), total = ports * ocs_rail_groups(r);
	int *out = malloc(total * sizeof(*out));

	if (!out)
		return NULL;
	for (size_t i = 0; i < total; i++)
		out[i] = -1;
	for (size_t i = 0; i < n; i++) {
		if (!xc_in_range(r, &xcs[i]))
			continue;
		size_t at = (size_t)xcs[i].group * ports + (size_t)xcs[i].in;
		out[at] = out[at] == -1 ? xcs[i].out : -2;
	}
	return out;
}

int rail_port_map_from_xcs(const struct ocs_rail_fabric *r, const struct ocs_xc *xcs, size_t n,
			   struct rail_port_map *m)
{
	int *out = outputs_by_input(r, xcs, n);
	int ports = ocs_rail_device_ports(r), gpu_side = ocs_rail_gpu_side_ports(r);

	if (!out)
		return -ENOMEM;
	for (int64_t p = 0; p < m->n_ports; p++) {
		int group = port_group(r, p), sp = switch_port_of(r, p);
		int gp = out[(size_t)group * ports + sp];

		m->gpu[p] = RAIL_NONE;
		if (gp >= 0 && gp < gpu_side && out[(size_t)group * ports + gp] == sp) {
			struct ocs_rail_port_owner o;

			if (ocs_rail_port_owner(r, group, gp, &o) == 0)
				m->gpu[p] = o.gpu;
		}
	}
	free(out);
	return 0;
}

__attribute__((format(printf, 5, 6))) static void violation(struct rail_violation *out, int max_out,
							    int *count, const struct ocs_xc *xc,
							    const char *fmt, ...)
{
	if (*count < max_out) {
		va_list ap;

		out[*count].xc = *xc;
		va_start(ap, fmt);
		vsnprintf(out[*count].reason, sizeof(out[*count].reason), fmt, ap);
		va_end(ap);
	}
	(*count)++;
}

int rail_check_xcs(const struct ocs_rail_fabric *r, const struct ocs_xc *xcs, size_t n,
		   struct rail_violation *out, int max_out)
{
	int ports = ocs_rail_device_ports(r), gpu_side = ocs_rail_gpu_side_ports(r);
	int *by_in = outputs_by_input(r, xcs, n);
	uint8_t *out_used;
	int count = 0;

	if (!by_in)
		return -ENOMEM;
	out_used = calloc((size_t)ports * ocs_rail_groups(r), 1);
	if (!out_used) {
		free(by_in);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ocs_xc *x = &xcs[i];

		if (!xc_in_range(r, x)) {
			violation(out, max_out, &count, x, "no such device or port");
			continue;
		}
		size_t base = (size_t)x->group * ports;
		if (by_in[base + x->in] == -2) {
			violation(out, max_out, &count, x, "input %d has two cross-connects",
				  x->in);
			continue;
		}
		if (out_used[base + x->out]++) {
			violation(out, max_out, &count, x, "output %d has two cross-connects",
				  x->out);
			continue;
		}
		if ((x->in < gpu_side) == (x->out < gpu_side)) {
			violation(out, max_out, &count, x, "joins two %s-side ports",
				  x->in < gpu_side ? "GPU" : "switch");
			continue;
		}
		if (by_in[base + x->out] != x->in)
			violation(out, max_out, &count, x,
				  "one-way circuit: no cross-connect from %d back to %d", x->out,
				  x->in);
	}
	free(by_in);
	free(out_used);
	return count;
}

const char *rail_swap_kind_name(enum rail_swap_kind kind)
{
	switch (kind) {
	case RAIL_SWAP_NONE:
		return "none";
	case RAIL_SWAP_IDLE_GPU:
		return "idle-gpu";
	case RAIL_SWAP_SPARE_SERVER:
		return "spare-server";
	case RAIL_SWAP_REFUSED:
		return "refused";
	}
	return NULL;
}

static int change_cmp(const void *a, const void *b)
{
	const struct rail_port_change *x = a, *y = b;

	return (x->rail_port > y->rail_port) - (x->rail_port < y->rail_port);
}

/* The rail port (of the GPU's group) that gpu is joined to, or RAIL_NONE. */
static int64_t port_of_gpu(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
			   int64_t gpu)
{
	int group = ocs_rail_server_group(r, ocs_rail_gpu_server(r, gpu));
	int64_t first = (int64_t)group * ocs_rail_switch_side_ports(r);

	for (int64_t p = first; p < first + ocs_rail_switch_side_ports(r); p++)
		if (m->gpu[p] == gpu)
			return p;
	return RAIL_NONE;
}

static bool idle(const uint8_t *flags, int64_t gpu)
{
	return !(flags[gpu] & (RAIL_GPU_FAULTY | RAIL_GPU_HELD));
}

/*
 * Case 1 candidate: an idle GPU of the server other than the failed one;
 * one joined to no rail port first (its move darkens nothing), then the
 * lowest rail. RAIL_NONE when there is none.
 */
static int64_t idle_gpu_of(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
			   const uint8_t *flags, int server, int64_t failed)
{
	int64_t joined_candidate = RAIL_NONE;

	for (int rail = 0; rail < r->rails; rail++) {
		int64_t g = ocs_rail_gpu_id(r, server, rail);

		if (g == failed || !idle(flags, g))
			continue;
		if (port_of_gpu(r, m, g) == RAIL_NONE)
			return g;
		if (joined_candidate == RAIL_NONE)
			joined_candidate = g;
	}
	return joined_candidate;
}

/* True when server s can take over a port set: see "idle spare" in rail_swap.h. */
static bool idle_spare(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
		       const uint8_t *flags, int s)
{
	for (int rail = 0; rail < r->rails; rail++) {
		int64_t g = ocs_rail_gpu_id(r, s, rail);

		if (!idle(flags, g) || port_of_gpu(r, m, g) != RAIL_NONE)
			return false;
	}
	return true;
}

/* The configured spares of the group first, then its other servers. */
static int spare_of(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
		    const uint8_t *flags, int group, int failed_server)
{
	int a = ocs_rail_active_per_group(r);

	for (int k = 0; k < r->servers_per_ocs; k++) {
		int s = ocs_rail_server_id(r, group, (a + k) % r->servers_per_ocs);

		if (s != failed_server && idle_spare(r, m, flags, s))
			return s;
	}
	return -1;
}

static int alloc_result(struct rail_swap_result *out, size_t xcs, size_t changes)
{
	out->removals = malloc(xcs * sizeof(*out->removals));
	out->additions = malloc(xcs * sizeof(*out->additions));
	out->changes = malloc(changes * sizeof(*out->changes));
	if (!out->removals || !out->additions || !out->changes) {
		rail_swap_result_clear(out);
		return -ENOMEM;
	}
	return 0;
}

static void sort_result(struct rail_swap_result *out)
{
	qsort(out->removals, out->n_removals, sizeof(*out->removals), ocs_xc_cmp_in_out);
	qsort(out->additions, out->n_additions, sizeof(*out->additions), ocs_xc_cmp_in_out);
	qsort(out->changes, out->n_changes, sizeof(*out->changes), change_cmp);
}

/* Case 1: idle GPU h takes over rail port p of the failed GPU. */
static int swap_idle_gpu(const struct ocs_rail_fabric *r, const struct rail_port_map *m, int64_t p,
			 int64_t h, struct rail_swap_result *out)
{
	int64_t h_port = port_of_gpu(r, m, h);

	if (alloc_result(out, 4, 2) != 0)
		return -ENOMEM;
	out->kind = RAIL_SWAP_IDLE_GPU;
	out->idle_gpu = h;
	add_join(r, out->failed_gpu, p, out->removals, &out->n_removals);
	out->changes[out->n_changes++] =
		(struct rail_port_change){.rail_port = p, .old_gpu = out->failed_gpu, .new_gpu = h};
	if (h_port != RAIL_NONE) {
		add_join(r, h, h_port, out->removals, &out->n_removals);
		out->changes[out->n_changes++] = (struct rail_port_change){
			.rail_port = h_port, .old_gpu = h, .new_gpu = RAIL_NONE};
	}
	add_join(r, h, p, out->additions, &out->n_additions);
	sort_result(out);
	return 0;
}

/* Case 2: every port of the set of rail port p moves to spare server sp. */
static int swap_spare_server(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
			     int64_t p, int sp, struct rail_swap_result *out)
{
	int set_server = ocs_rail_port_server(r, p);

	if (alloc_result(out, 2 * (size_t)r->rails, (size_t)r->rails) != 0)
		return -ENOMEM;
	out->kind = RAIL_SWAP_SPARE_SERVER;
	out->spare_server = sp;
	for (int rail = 0; rail < r->rails; rail++) {
		int64_t q = ocs_rail_port_id(r, set_server, rail);
		int64_t g = ocs_rail_gpu_id(r, sp, rail);

		if (m->gpu[q] != RAIL_NONE)
			add_join(r, m->gpu[q], q, out->removals, &out->n_removals);
		add_join(r, g, q, out->additions, &out->n_additions);
		out->changes[out->n_changes++] = (struct rail_port_change){
			.rail_port = q, .old_gpu = m->gpu[q], .new_gpu = g};
	}
	sort_result(out);
	return 0;
}

int rail_swap(const struct ocs_rail_fabric *r, const struct rail_port_map *m,
	      const uint8_t *gpu_flags, int64_t failed_gpu, struct rail_swap_result *out)
{
	int64_t p, h;
	int sp;

	memset(out, 0, sizeof(*out));
	out->idle_gpu = RAIL_NONE;
	out->spare_server = -1;
	out->failed_gpu = failed_gpu;
	out->server = -1;
	out->group = -1;
	if (failed_gpu < 0 || failed_gpu >= ocs_rail_gpus(r) || !map_fits(r, m))
		return -EINVAL;
	out->server = ocs_rail_gpu_server(r, failed_gpu);
	out->group = ocs_rail_server_group(r, out->server);
	p = port_of_gpu(r, m, failed_gpu);
	if (p == RAIL_NONE) {
		out->kind = RAIL_SWAP_NONE;
		return 0;
	}
	h = idle_gpu_of(r, m, gpu_flags, out->server, failed_gpu);
	if (h != RAIL_NONE)
		return swap_idle_gpu(r, m, p, h, out);
	sp = spare_of(r, m, gpu_flags, out->group, out->server);
	if (sp >= 0)
		return swap_spare_server(r, m, p, sp, out);
	out->kind = RAIL_SWAP_REFUSED;
	snprintf(out->reason, sizeof(out->reason),
		 "no idle GPU in server %d and no idle spare in group %d", out->server, out->group);
	return 0;
}

void rail_swap_apply(struct rail_port_map *m, const struct rail_swap_result *res)
{
	for (size_t i = 0; i < res->n_changes; i++)
		m->gpu[res->changes[i].rail_port] = res->changes[i].new_gpu;
}

void rail_swap_result_clear(struct rail_swap_result *res)
{
	if (!res)
		return;
	free(res->removals);
	free(res->additions);
	free(res->changes);
	res->removals = res->additions = NULL;
	res->changes = NULL;
	res->n_removals = res->n_additions = res->n_changes = 0;
}
