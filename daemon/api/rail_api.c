/*
 * rail_api.c - implementation of rail_api.h: requests in, rail_swap
 * results and the port map out as ocs.v1 messages, built in per-reply
 * arenas.
 */
#include "rail_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "clock.h"
#include "config.h"
#include "devices.h"
#include "metrics.h"
#include "rails.h"

struct ra {
	struct ra_deps d;
	struct nb_server *server;
	struct mx_family *m_swaps;  /* NULL without a registry */
	void (*settled)(void *ctx); /* ra_on_map_settled */
	void *settled_ctx;
};

/* Who a swap's answer goes to (freed by the answer). */
struct ra_call {
	struct ra *ra;
	struct nb_call *call;
	int64_t gpu;
	bool mark;
	Ocs__V1__GpuCondition condition;
};

struct ra *ra_new(const struct ra_deps *deps)
{
	static const enum rail_swap_kind kinds[] = {RAIL_SWAP_IDLE_GPU, RAIL_SWAP_SPARE_SERVER,
						    RAIL_SWAP_REFUSED};
	struct ra *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return NULL;
	ra->d = *deps;
	if (!deps->reg)
		return ra;
	ra->m_swaps = mx_counter(deps->reg, "ocsd_rail_swaps_total",
				 "Rail-OCS GPU swaps confirmed on the devices, by kind, and faulty "
				 "GPUs no swap could take off their rail port (refused).",
				 (const char *const[]){"kind", NULL});
	/* every kind's series exists from the start, at 0 (rate() needs it) */
	for (size_t i = 0; ra->m_swaps && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *kind = rail_swap_kind_name(kinds[i]);

		if (mx_add(ra->m_swaps, &kind, 0) != 0)
			ra->m_swaps = NULL;
	}
	if (!ra->m_swaps) {
		free(ra);
		return NULL;
	}
	return ra;
}

void ra_free(struct ra *ra)
{
	free(ra);
}

void ra_attach(struct ra *ra, struct nb_server *server)
{
	ra->server = server;
}

void ra_attach_swaps(struct ra *ra, struct rsw *rsw)
{
	ra->d.rsw = rsw;
}

void ra_on_map_settled(struct ra *ra, void (*settled)(void *ctx), void *ctx)
{
	ra->settled = settled;
	ra->settled_ctx = ctx;
}

bool ra_jobs_wait(const struct ra *ra)
{
	return ra->d.rsw && gsw_starting(ra->d.rsw);
}

bool ra_jobs_refused(const struct ra *ra, struct err_info *err)
{
	const char *why;

	if (!ra->d.rsw || gsw_ready(ra->d.rsw, &why))
		return false;
	err_set(err, ERR_PRECONDITION, "placement.gpus",
		"the rail port map is not on the devices: %s", why);
	return true;
}

static Ocs__V1__RailSwapKind swap_kind_pb(enum rail_swap_kind k)
{
	switch (k) {
	case RAIL_SWAP_NONE:
		return OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_NONE;
	case RAIL_SWAP_IDLE_GPU:
		return OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_IDLE_GPU;
	case RAIL_SWAP_SPARE_SERVER:
		return OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_SPARE_SERVER;
	case RAIL_SWAP_REFUSED:
		return OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_REFUSED;
	}
	return OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_UNSPECIFIED;
}

/* A swap as a RailSwap (rep NULL: the GPU served no rail port, nothing moved). */
static Ocs__V1__RailSwap *build_swap(const struct ra *ra, struct arena *ar,
				     const struct gsw_report *rep, int64_t gpu)
{
	Ocs__V1__RailSwap *m = ar_alloc(ar, sizeof(*m));
	const struct ocs_rail_fabric *r = &ra->d.cfg->rail;

	if (!m)
		return NULL;
	ocs__v1__rail_swap__init(m);
	m->failed_gpu = gpu;
	m->kind = OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_NONE;
	m->server = ocs_rail_gpu_server(r, gpu);
	m->group = ocs_rail_server_group(r, m->server);
	m->idle_gpu = RAIL_NONE;
	m->spare_server = -1;
	m->reason = "";
	if (!rep)
		return m;
	m->kind = swap_kind_pb(rep->res->kind);
	m->idle_gpu = rep->res->idle_gpu;
	m->spare_server = rep->res->spare_server;
	m->reason = ar_strdup(ar, rep->res->reason);
	m->transaction_id = rep->txn_id;
	m->moves = ar_alloc(ar, (rep->n_moves ? rep->n_moves : 1) * sizeof(*m->moves));
	for (size_t i = 0; m->moves && i < rep->n_moves; i++) {
		Ocs__V1__GpuMove *g = ar_alloc(ar, sizeof(*g));

		if (!g)
			break;
		ocs__v1__gpu_move__init(g);
		g->rail_port = rep->moves[i].rail_port;
		g->old_gpu = rep->moves[i].old_gpu;
		g->new_gpu = rep->moves[i].new_gpu;
		g->job_id = ar_strdup(ar, rep->moves[i].job_id);
		m->moves[m->n_moves++] = g;
	}
	m->devices = ar_alloc(ar, (rep->n_devices ? rep->n_devices : 1) * sizeof(*m->devices));
	for (size_t i = 0; m->devices && i < rep->n_devices; i++)
		m->devices[m->n_devices++] = ar_strdup(ar, rep->devices[i]);
	return ar->failed ? NULL : m;
}

static void answer_swap(void *ctx, const struct err_info *err, const struct gsw_report *rep)
{
	struct ra_call *rc = ctx;
	struct ra *ra = rc->ra;
	struct arena ar = {0};
	Ocs__V1__RailSwap *swap;

	if (err) {
		ra->d.fail(rc->call, err);
		free(rc);
		return;
	}
	swap = build_swap(ra, &ar, rep, rc->gpu);
	if (!swap) {
		api_failf(rc->call, ERR_INTERNAL, "", "out of memory building the reply");
	} else if (rc->mark) {
		Ocs__V1__MarkGpuResponse r = OCS__V1__MARK_GPU_RESPONSE__INIT;

		r.gpu = rc->gpu;
		r.condition = rc->condition;
		r.swap = swap;
		nb_call_reply(rc->call, &r.base);
	} else {
		Ocs__V1__ReplaceGpuResponse r = OCS__V1__REPLACE_GPU_RESPONSE__INIT;

		r.swap = swap;
		nb_call_reply(rc->call, &r.base);
	}
	ar_free_all(&ar);
	free(rc);
}

static struct ra_call *new_call(struct ra *ra, struct nb_call *call, int64_t gpu)
{
	struct ra_call *rc = calloc(1, sizeof(*rc));

	if (!rc) {
		api_failf(call, ERR_INTERNAL, "", "out of memory");
		return NULL;
	}
	*rc = (struct ra_call){.ra = ra, .call = call, .gpu = gpu};
	return rc;
}

void ra_serve_replace(struct ra *ra, struct nb_call *call, const Ocs__V1__ReplaceGpuRequest *req)
{
	struct ra_call *rc = new_call(ra, call, req->gpu);

	if (rc)
		gsw_replace(ra->d.rsw, req->gpu, nb_role_name(nb_call_role(call)), answer_swap, rc);
}

void ra_serve_mark(struct ra *ra, struct nb_call *call, const Ocs__V1__MarkGpuRequest *req)
{
	struct ra_call *rc = new_call(ra, call, req->gpu);
	bool faulty = req->condition == OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY;

	if (!rc)
		return;
	rc->mark = true;
	rc->condition = req->condition;
	gsw_mark(ra->d.rsw, req->gpu, faulty, "operator", clk_mono_us(NULL), answer_swap, rc);
}

static Ocs__V1__GpuCondition condition_pb(const struct ra *ra, int64_t gpu)
{
	return rl_faulty(ra->d.rl, gpu) ? OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY
					: OCS__V1__GPU_CONDITION__GPU_CONDITION_HEALTHY;
}

void ra_serve_list_ports(struct ra *ra, struct nb_call *call,
			 const Ocs__V1__ListRailPortsRequest *req)
{
	const struct ocs_rail_fabric *r = &ra->d.cfg->rail;
	const struct rail_port_map *map = rl_map(ra->d.rl);
	Ocs__V1__ListRailPortsResponse resp = OCS__V1__LIST_RAIL_PORTS_RESPONSE__INIT;
	int64_t n_gpus = ocs_rail_gpus(r), after = -1, last = -1;
	size_t page = nb_page_size(NB_FABRIC_LIST_CIRCUITS, req->page_size);
	const char **holder = malloc((size_t)n_gpus * sizeof(*holder));
	const char *job = req->job_id ? req->job_id : "";
	char token[NB_PAGE_TOKEN_MAX_LEN + 1];
	struct arena ar = {0};
	bool more = false;

	if (!holder || gsw_holders(ra->d.rsw, holder) != 0) {
		free(holder);
		api_failf(call, ERR_INTERNAL, "", "out of memory");
		return;
	}
	if (req->page_token && req->page_token[0])
		nb_rail_ports_token_after(req->page_token, &after);
	resp.ports = ar_alloc(&ar, (page < (size_t)map->n_ports ? page : (size_t)map->n_ports + 1) *
					   sizeof(*resp.ports));
	for (int64_t p = after + 1; resp.ports && p < map->n_ports; p++) {
		int server = ocs_rail_port_server(r, p), rail = ocs_rail_port_rail(r, p);
		int64_t g = map->gpu[p];
		const char *held = g >= 0 && g < n_gpus && holder[g] ? holder[g] : "";
		Ocs__V1__RailPort *m;

		if ((req->has_server && server != req->server) ||
		    (req->has_rail && rail != req->rail) || (job[0] && strcmp(job, held) != 0))
			continue;
		if (resp.n_ports == page) {
			more = true;
			break;
		}
		m = ar_alloc(&ar, sizeof(*m));
		if (!m)
			break;
		ocs__v1__rail_port__init(m);
		m->rail_port = p;
		m->server = server;
		m->rail = rail;
		m->group = ocs_rail_server_group(r, server);
		m->device = (char *)dev_name(ra->d.devs, m->group);
		m->switch_port = ocs_rail_switch_port(r, server, rail);
		m->gpu = g;
		m->gpu_server = g >= 0 ? ocs_rail_gpu_server(r, g) : -1;
		m->gpu_port = g >= 0 ? ocs_rail_gpu_port(r, g) : -1;
		m->job_id = (char *)held;
		m->gpu_condition = g >= 0 ? condition_pb(ra, g)
					  : OCS__V1__GPU_CONDITION__GPU_CONDITION_UNSPECIFIED;
		resp.ports[resp.n_ports++] = m;
		last = p;
	}
	resp.faulty_gpus =
		ar_alloc(&ar, (size_t)(rl_n_faulty(ra->d.rl) + 1) * sizeof(*resp.faulty_gpus));
	for (int64_t g = 0; resp.faulty_gpus && g < n_gpus; g++)
		if (rl_faulty(ra->d.rl, g))
			resp.faulty_gpus[resp.n_faulty_gpus++] = g;
	resp.next_page_token = "";
	if (more) {
		nb_rail_ports_token(last, token, sizeof(token));
		resp.next_page_token = token;
	}
	api_reply(call, &resp.base, ar.failed);
	ar_free_all(&ar);
	free(holder);
}

void ra_fill_fabric(const struct ra *ra, Ocs__V1__FabricSummary *r)
{
	const struct ocs_rail_fabric *f = &ra->d.cfg->rail;

	r->wiring = "";
	r->gpus = ocs_rail_gpus(f);
	r->groups = ocs_rail_groups(f);
	r->servers = f->servers;
	r->rails = f->rails;
	r->servers_per_ocs = f->servers_per_ocs;
	r->spare_servers_per_ocs = f->spare_servers_per_ocs;
	r->rail_ports = ocs_rail_rail_ports(f);
	r->gpus_faulty = rl_n_faulty(ra->d.rl);
	r->k_ocs = ocs_rail_device_ports(f);
}

void ra_fill_job(const struct ra *ra, struct arena *ar, const struct jm_job *job, Ocs__V1__Job *m)
{
	size_t n = 0;
	struct st_rail_job_move *moves = gsw_job_moves(ra->d.rsw, job->id, &n);

	m->gpus = ar_alloc(ar, (job->n_gpus ? job->n_gpus : 1) * sizeof(*m->gpus));
	for (size_t i = 0; m->gpus && i < job->n_gpus; i++)
		m->gpus[m->n_gpus++] = job->gpus[i];
	m->gpu_moves = ar_alloc(ar, (n ? n : 1) * sizeof(*m->gpu_moves));
	for (size_t i = 0; m->gpu_moves && i < n; i++) {
		Ocs__V1__GpuMove *g = ar_alloc(ar, sizeof(*g));

		if (!g)
			break;
		ocs__v1__gpu_move__init(g);
		g->rail_port = moves[i].rail_port;
		g->old_gpu = moves[i].old_gpu;
		g->new_gpu = moves[i].new_gpu;
		g->job_id = ar_strdup(ar, job->id);
		m->gpu_moves[m->n_gpu_moves++] = g;
	}
	free(moves);
}

/* ---- events ---- */

static void ev_swapped(void *ctx, const struct gsw_report *rep)
{
	struct ra *ra = ctx;
	Ocs__V1__Event ev = OCS__V1__EVENT__INIT;
	Ocs__V1__RailEvent re = OCS__V1__RAIL_EVENT__INIT;
	struct arena ar = {0};
	const char *kind = rail_swap_kind_name(rep->res->kind);

	/* out of memory loses one count, nothing else */
	(void)mx_add(ra->m_swaps, &kind, 1);
	if (!ra->server)
		return;
	re.swap = build_swap(ra, &ar, rep, rep->res->failed_gpu);
	re.source = (char *)rep->source;
	re.reaction_us = rep->reaction_us;
	re.devices_us = rep->devices_us;
	ev.kind_case = OCS__V1__EVENT__KIND_RAIL;
	ev.rail = &re;
	if (re.swap)
		nb_server_publish(ra->server, &ev);
	ar_free_all(&ar);
}

static void ev_gpu(void *ctx, int64_t gpu, bool faulty, const char *source)
{
	struct ra *ra = ctx;

	api_publish_condition(ra->server, true, gpu, faulty, source);
}

static void ev_progress(void *ctx, const char *const *jobs, size_t n_jobs,
			const struct txn_progress *p)
{
	struct ra *ra = ctx;

	api_publish_progress(ra->server, jobs, n_jobs, p);
}

static void ev_map_settled(void *ctx)
{
	struct ra *ra = ctx;

	if (ra->settled)
		ra->settled(ra->settled_ctx);
}

struct gsw_events ra_events(struct ra *ra)
{
	return (struct gsw_events){.ctx = ra,
				   .swapped = ev_swapped,
				   .gpu_changed = ev_gpu,
				   .progress = ev_progress,
				   .map_settled = ev_map_settled};
}
