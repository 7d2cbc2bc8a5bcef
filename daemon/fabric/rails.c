/*
 * rails.c - implementation of rails.h: the port map rebuilt from the
 * circuit table, its inverse (GPU -> rail port) and the GPU conditions, in
 * flat arrays indexed by GPU id.
 */
#include "rails.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_state.h"
#include "error.h"
#include "store.h"

struct rl_state {
	struct ocs_rail_fabric r;
	int64_t n_gpus;
	struct rail_port_map map;
	int64_t *port_of; /* by GPU: its rail port or RAIL_NONE */
	int64_t joined;
	uint8_t *faulty; /* by GPU */
	char (*source)[16];
	int64_t *since_ms;
	int n_faulty;
};

struct rl_state *rl_new(const struct ocs_rail_fabric *r)
{
	struct rl_state *rl = calloc(1, sizeof(*rl));

	if (!rl)
		return NULL;
	rl->r = *r;
	rl->n_gpus = ocs_rail_gpus(r);
	rl->port_of = malloc((size_t)rl->n_gpus * sizeof(*rl->port_of));
	rl->faulty = calloc((size_t)rl->n_gpus, 1);
	rl->source = calloc((size_t)rl->n_gpus, sizeof(*rl->source));
	rl->since_ms = calloc((size_t)rl->n_gpus, sizeof(*rl->since_ms));
	rl->map.n_ports = ocs_rail_rail_ports(r);
	rl->map.gpu = malloc((size_t)rl->map.n_ports * sizeof(*rl->map.gpu));
	if (!rl->port_of || !rl->faulty || !rl->source || !rl->since_ms || !rl->map.gpu) {
		rl_free(rl);
		return NULL;
	}
	for (int64_t g = 0; g < rl->n_gpus; g++)
		rl->port_of[g] = RAIL_NONE;
	for (int64_t p = 0; p < rl->map.n_ports; p++)
		rl->map.gpu[p] = RAIL_NONE;
	return rl;
}

void rl_free(struct rl_state *rl)
{
	if (!rl)
		return;
	rail_port_map_clear(&rl->map);
	free(rl->port_of);
	free(rl->faulty);
	free(rl->source);
	free(rl->since_ms);
	free(rl);
}

int rl_load_map(struct rl_state *rl, const struct fs_state *fs)
{
	size_t n = fs_count(fs), k = 0;
	struct ocs_xc *xcs = malloc((n ? n : 1) * sizeof(*xcs));
	int rc;

	if (!xcs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (strcmp(fs_at(fs, i)->job_id, ST_RAIL_OWNER) == 0)
			xcs[k++] = fs_at(fs, i)->xc;
	rc = rail_port_map_from_xcs(&rl->r, xcs, k, &rl->map);
	free(xcs);
	if (rc)
		return rc;
	rl->joined = 0;
	for (int64_t g = 0; g < rl->n_gpus; g++)
		rl->port_of[g] = RAIL_NONE;
	for (int64_t p = 0; p < rl->map.n_ports; p++) {
		int64_t g = rl->map.gpu[p];

		if (g >= 0 && g < rl->n_gpus) {
			rl->port_of[g] = p;
			rl->joined++;
		}
	}
	return 0;
}

static int load_fault(void *arg, int64_t gpu, const char *source, int64_t since_ms)
{
	struct rl_state *rl = arg;

	if (gpu >= 0 && gpu < rl->n_gpus)
		rl_set_faulty(rl, gpu, true, source ? source : "", since_ms);
	return 0;
}

int rl_load_faults(struct rl_state *rl, struct st_store *st)
{
	return st_rail_fault_list(st, load_fault, rl);
}

const struct rail_port_map *rl_map(const struct rl_state *rl)
{
	return &rl->map;
}

int64_t rl_joined(const struct rl_state *rl)
{
	return rl->joined;
}

int64_t rl_gpu_port(const struct rl_state *rl, int64_t gpu)
{
	return gpu >= 0 && gpu < rl->n_gpus ? rl->port_of[gpu] : RAIL_NONE;
}

bool rl_faulty(const struct rl_state *rl, int64_t gpu)
{
	return gpu >= 0 && gpu < rl->n_gpus && rl->faulty[gpu];
}

const char *rl_fault_source(const struct rl_state *rl, int64_t gpu, int64_t *since_ms)
{
	if (!rl_faulty(rl, gpu))
		return NULL;
	if (since_ms)
		*since_ms = rl->since_ms[gpu];
	return rl->source[gpu];
}

void rl_set_faulty(struct rl_state *rl, int64_t gpu, bool faulty, const char *source,
		   int64_t since_ms)
{
	if (gpu < 0 || gpu >= rl->n_gpus || (bool)rl->faulty[gpu] == faulty)
		return;
	rl->faulty[gpu] = faulty;
	rl->n_faulty += faulty ? 1 : -1;
	snprintf(rl->source[gpu], sizeof(rl->source[gpu]), "%s", faulty && source ? source : "");
	rl->since_ms[gpu] = faulty ? since_ms : 0;
}

int rl_n_faulty(const struct rl_state *rl)
{
	return rl->n_faulty;
}

bool rl_check_job_gpus(void *arg, const int64_t *gpus, size_t n, struct err_info *err)
{
	const struct rl_state *rl = arg;

	for (size_t i = 0; i < n; i++) {
		int64_t g = gpus[i];
		char field[64];

		snprintf(field, sizeof(field), "placement.gpus[%zu].gpu", i);
		if (g < 0 || g >= rl->n_gpus) {
			err_set(err, ERR_INVALID, field,
				"gpu %lld is not a GPU of the fabric (0..%lld)", (long long)g,
				(long long)rl->n_gpus - 1);
			return false;
		}
		if (rl->faulty[g]) {
			err_set(err, ERR_PRECONDITION, field,
				"gpu %lld is faulty (marked by %s); mark it healthy first",
				(long long)g, rl->source[g]);
			return false;
		}
		if (rl->port_of[g] == RAIL_NONE) {
			err_set(err, ERR_PRECONDITION, field,
				"gpu %lld (server %d rail %d) is joined to no rail port: it is "
				"a spare",
				(long long)g, ocs_rail_gpu_server(&rl->r, g),
				ocs_rail_gpu_rail(&rl->r, g));
			return false;
		}
	}
	return true;
}
