/*
 * ocsctl_rail.c - implementation of ocsctl_rail.h.
 */
#include "ocsctl_rail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocs_json.h"
#include "pbjson.h"

#define EXIT_OK	     0
#define EXIT_REFUSED 1

static int print_json(const ProtobufCMessage *m)
{
	json_t *v = pbjson_write(m);
	char *text = v ? ocs_json_dumps(v, true) : NULL;

	json_decref(v);
	if (!text) {
		fprintf(stderr, "ocsctl: cannot print the answer as JSON\n");
		return EXIT_REFUSED;
	}
	printf("%s\n", text);
	free(text);
	return EXIT_OK;
}

static const char *swap_kind(Ocs__V1__RailSwapKind k)
{
	switch (k) {
	case OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_NONE:
		return "none";
	case OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_IDLE_GPU:
		return "idle-gpu";
	case OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_SPARE_SERVER:
		return "spare-server";
	case OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_REFUSED:
		return "refused";
	default:
		return "unspecified";
	}
}

/* "gpu 5 (server 1, group 0): spare-server 2, transaction 7" and one line per move. */
static void print_swap(const Ocs__V1__RailSwap *s)
{
	if (!s)
		return;
	printf("gpu %lld (server %d, group %d): %s", (long long)s->failed_gpu, s->server, s->group,
	       swap_kind(s->kind));
	if (s->kind == OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_IDLE_GPU)
		printf(" (gpu %lld took over)", (long long)s->idle_gpu);
	if (s->kind == OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_SPARE_SERVER)
		printf(" (server %d took over)", s->spare_server);
	if (s->transaction_id)
		printf(", transaction %llu", (unsigned long long)s->transaction_id);
	if (s->reason && s->reason[0])
		printf(": %s", s->reason);
	printf("\n");
	for (size_t i = 0; i < s->n_moves; i++) {
		const Ocs__V1__GpuMove *m = s->moves[i];

		printf("  rail port %lld: gpu %lld -> %lld%s%s\n", (long long)m->rail_port,
		       (long long)m->old_gpu, (long long)m->new_gpu, m->job_id[0] ? ", job " : "",
		       m->job_id);
	}
}

void ocsctl_rail_event(const Ocs__V1__RailEvent *ev)
{
	const Ocs__V1__RailSwap *s = ev->swap;

	if (!s) {
		printf("rail (no swap)\n");
		return;
	}
	printf("rail gpu %lld %s", (long long)s->failed_gpu, swap_kind(s->kind));
	if (s->kind == OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_IDLE_GPU)
		printf(" idle_gpu=%lld", (long long)s->idle_gpu);
	if (s->kind == OCS__V1__RAIL_SWAP_KIND__RAIL_SWAP_KIND_SPARE_SERVER)
		printf(" spare_server=%d", s->spare_server);
	for (size_t i = 0; i < s->n_moves; i++)
		printf("%s%lld:%lld->%lld", i ? "," : " moves=", (long long)s->moves[i]->rail_port,
		       (long long)s->moves[i]->old_gpu, (long long)s->moves[i]->new_gpu);
	printf(" source=%s", ev->source);
	if (ev->reaction_us || ev->devices_us)
		printf(" reaction_us=%lld devices_us=%lld", (long long)ev->reaction_us,
		       (long long)ev->devices_us);
	printf("%s%s\n", s->reason[0] ? ": " : "", s->reason);
}

int ocsctl_gpu(const struct ocsctl_rail *c, const char *sub, int64_t gpu)
{
	ProtobufCMessage *resp = NULL;
	const Ocs__V1__RailSwap *swap;
	int rc;

	if (strcmp(sub, "replace") == 0) {
		Ocs__V1__ReplaceGpuRequest req = OCS__V1__REPLACE_GPU_REQUEST__INIT;

		req.gpu = gpu;
		rc = c->call(c->x, NB_FABRIC_REPLACE_GPU, &req.base, &resp);
		swap = rc ? NULL : ((Ocs__V1__ReplaceGpuResponse *)resp)->swap;
	} else {
		Ocs__V1__MarkGpuRequest req = OCS__V1__MARK_GPU_REQUEST__INIT;

		req.gpu = gpu;
		req.condition = strcmp(sub, "fail") == 0
					? OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY
					: OCS__V1__GPU_CONDITION__GPU_CONDITION_HEALTHY;
		rc = c->call(c->x, NB_FABRIC_MARK_GPU, &req.base, &resp);
		swap = rc ? NULL : ((Ocs__V1__MarkGpuResponse *)resp)->swap;
		if (rc == 0 && !c->json)
			printf("gpu %lld: %s\n", (long long)gpu,
			       strcmp(sub, "fail") == 0 ? "faulty" : "healthy");
	}
	if (rc)
		return rc;
	if (c->json)
		rc = print_json(resp);
	else
		print_swap(swap);
	protobuf_c_message_free_unpacked(resp, NULL);
	return rc;
}

static const char *condition(Ocs__V1__GpuCondition c)
{
	return c == OCS__V1__GPU_CONDITION__GPU_CONDITION_FAULTY    ? "faulty"
	       : c == OCS__V1__GPU_CONDITION__GPU_CONDITION_HEALTHY ? "healthy"
								    : "-";
}

int ocsctl_rail_ports(const struct ocsctl_rail *c, int server, int rail, const char *job)
{
	Ocs__V1__ListRailPortsRequest req = OCS__V1__LIST_RAIL_PORTS_REQUEST__INIT;
	Ocs__V1__ListRailPortsResponse *r = NULL;
	json_t *all = json_array(), *faulty = NULL;
	char *token = NULL;
	int rc = EXIT_OK;
	bool header = false;

	req.has_server = server >= 0;
	req.server = server >= 0 ? server : 0;
	req.has_rail = rail >= 0;
	req.rail = rail >= 0 ? rail : 0;
	req.job_id = (char *)(job ? job : "");
	do {
		req.page_token = token ? token : "";
		rc = c->call(c->x, NB_FABRIC_LIST_RAIL_PORTS, &req.base, &r);
		free(token);
		token = NULL;
		if (rc)
			break;
		if (!header && !c->json) {
			printf("%-9s %-6s %-4s %-14s %-6s %-6s %-8s %-9s %s\n", "RAIL_PORT",
			       "SERVER", "RAIL", "DEVICE", "SWITCH", "GPU", "GPU_PORT", "CONDITION",
			       "JOB");
			header = true;
		}
		for (size_t i = 0; i < r->n_ports; i++) {
			const Ocs__V1__RailPort *p = r->ports[i];

			if (c->json)
				json_array_append_new(all, pbjson_write(&p->base));
			else
				printf("%-9lld %-6d %-4d %-14s %-6d %-6lld %-8d %-9s %s\n",
				       (long long)p->rail_port, p->server, p->rail, p->device,
				       p->switch_port, (long long)p->gpu, p->gpu_port,
				       condition(p->gpu_condition), p->job_id[0] ? p->job_id : "-");
		}
		if (!faulty) {
			faulty = json_array();
			for (size_t i = 0; faulty && i < r->n_faulty_gpus; i++)
				json_array_append_new(faulty, json_integer(r->faulty_gpus[i]));
			if (!c->json && r->n_faulty_gpus) {
				printf("faulty gpus:");
				for (size_t i = 0; i < r->n_faulty_gpus; i++)
					printf(" %lld", (long long)r->faulty_gpus[i]);
				printf("\n");
			}
		}
		if (r->next_page_token && r->next_page_token[0])
			token = strdup(r->next_page_token);
		protobuf_c_message_free_unpacked(&r->base, NULL);
	} while (token);
	if (rc == EXIT_OK && c->json) {
		json_t *top = json_object();
		char *text;

		json_object_set_new(top, "ports", all);
		json_object_set_new(top, "faulty_gpus", faulty ? faulty : json_array());
		all = faulty = NULL;
		text = ocs_json_dumps(top, true);
		json_decref(top);
		if (text)
			printf("%s\n", text);
		else
			rc = EXIT_REFUSED;
		free(text);
	}
	json_decref(all);
	json_decref(faulty);
	return rc;
}
