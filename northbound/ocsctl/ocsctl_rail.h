/*
 * ocsctl_rail.h - ocsctl's rail-OCS commands (issue 12): `gpu replace GPU`
 * (ReplaceGpu), `gpu fail|heal GPU` (MarkGpu) and `rail-ports [--hb S]
 * [--rail R] [--job ID]` (ListRailPorts, every page), each printed as a
 * table or, with --json, as the response message. ocsctl.c parses the
 * command line and hands over its RPC routine (which prints a refusal and
 * returns ocsctl's exit code), so these commands behave like the others.
 */
#ifndef OCSCTL_RAIL_H
#define OCSCTL_RAIL_H

#include <stdbool.h>
#include <stdint.h>

#include "nb.h"

struct ocsctl_rail {
	bool json;
	/* one RPC: 0, or the exit code after printing why (ocsctl_rpc.c's rpc_call()) */
	int (*call)(void *x, enum nb_method m, const ProtobufCMessage *req, void *resp_out);
	void *x;
};

/* sub: "replace", "fail" or "heal". Returns ocsctl's exit code. */
int ocsctl_gpu(const struct ocsctl_rail *c, const char *sub, int64_t gpu);
/* Watch's text line of a RailEvent (after "SEQ TIME "). */
void ocsctl_rail_event(const Ocs__V1__RailEvent *ev);
/* Filters: server, rail < 0 and job NULL mean none. Returns ocsctl's exit code. */
int ocsctl_rail_ports(const struct ocsctl_rail *c, int server, int rail, const char *job);

#endif
