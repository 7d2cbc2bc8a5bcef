/*
 * ocsctl_rpc.c - ocsctl's calls: one RPC on the --server list
 * (ocsctl_servers.c picks the replica), why a call failed and the exit
 * code that says so, and every page of a paged list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_internal.h"
#include "ocsctl_internal.h"

/* Prints why a call failed; when no server of the --server list took it,
 * every server tried and why. */
int rpc_report_failure(const struct ctx *x, const struct nb_client_status *st)
{
	const char *trail = ocsctl_servers_trail(x->servers);

	if (trail[0]) {
		fprintf(stderr, "ocsctl: %s:\n%s", st->message, trail);
		return st->unreachable ? EXIT_UNREACHABLE : EXIT_REFUSED;
	}
	if (st->unreachable) {
		fprintf(stderr, "ocsctl: cannot reach %s: %s\n", ocsctl_servers_current(x->servers),
			st->message);
		return EXIT_UNREACHABLE;
	}
	fprintf(stderr, "ocsctl: %s: %s\n", nb_code_name((enum nb_code)st->code), st->message);
	return EXIT_REFUSED;
}

/* One RPC; on failure prints why and returns the exit code. */
int rpc_call(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out)
{
	const struct nb_method_info *info = nb_method_info(m);
	struct nb_client_status st;

	int rc = ocsctl_servers_unary(x->servers, info->path, req, info->response,
				      (ProtobufCMessage **)resp_out, &st);

	/* the line a waiting command showed goes before its answer */
	prog_stop(x->progress, rc == 0);
	x->progress = NULL;
	if (rc)
		return rpc_report_failure(x, &st);
	return EXIT_OK;
}

void rpc_free_msg(void *m)
{
	protobuf_c_message_free_unpacked(m, NULL);
}

void rpc_pages_free(struct rpc_pages *pg)
{
	for (size_t i = 0; i < pg->n_msgs; i++)
		rpc_free_msg(pg->msgs[i]);
	free(pg->msgs);
	free(pg->items);
}

/* Calls m until the last page; *token is the request's page_token field. */
int rpc_follow_pages(struct ctx *x, enum nb_method m, const ProtobufCMessage *req, char **token,
		     struct rpc_pages *pg)
{
	for (;;) {
		ProtobufCMessage *r, **msgs;
		void **items, **page;
		size_t n;
		char *next;
		int rc = rpc_call(x, m, req, &r);

		if (rc)
			return rc;
		if (m == NB_JOBS_LIST_JOBS) {
			Ocs__V1__ListJobsResponse *j = (void *)r;

			page = (void **)j->jobs;
			n = j->n_jobs;
			next = j->next_page_token;
		} else if (m == NB_FABRIC_LIST_RAIL_PORTS) {
			Ocs__V1__ListRailPortsResponse *p = (void *)r;

			page = (void **)p->ports;
			n = p->n_ports;
			next = p->next_page_token;
		} else {
			Ocs__V1__ListCircuitsResponse *c = (void *)r;

			page = (void **)c->circuits;
			n = c->n_circuits;
			next = c->next_page_token;
		}
		msgs = realloc(pg->msgs, (pg->n_msgs + 1) * sizeof(*msgs));
		items = msgs ? realloc(pg->items, (pg->n_items + n + 1) * sizeof(*items)) : NULL;
		if (msgs)
			pg->msgs = msgs;
		if (items)
			pg->items = items;
		if (!msgs || !items) {
			rpc_free_msg(r);
			fprintf(stderr, "ocsctl: out of memory\n");
			return EXIT_REFUSED;
		}
		pg->msgs[pg->n_msgs++] = r;
		if (n)
			memcpy(pg->items + pg->n_items, page, n * sizeof(*page));
		pg->n_items += n;
		if (!next || !*next)
			return EXIT_OK;
		*token = next; /* lives in the page kept above */
	}
}
