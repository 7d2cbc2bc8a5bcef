/*
 * ocsctl_servers.h - which ocsd replica ocsctl talks to (issue 15 #3).
 *
 * `--server A,B,C` names one or more replicas. Calls go to the first one
 * that can be reached; a replica that answers a call with
 * "UNAVAILABLE: not the leader; leader is HOST:PORT" (a follower refusing
 * a write) sends the call on to HOST:PORT, at most OCSCTL_SERVERS_MAX_HOPS
 * redirects per call. A redirect to an address already tried in the same
 * call is a loop: it is not followed, and the next listed server is tried.
 * Reads are answered by whichever replica answers first (followers serve
 * them), writes end up on the leader. Once a server has answered, later
 * calls go to it first. When no server takes a call, the trail names every
 * server tried and why (ocsctl_servers_trail()).
 *
 * Every server gets a channel of its own with the same client options
 * (the same CA, client certificate and key); gRPC checks each server's
 * certificate against the host of its own address.
 *
 * Not thread-safe: one per thread, like nb_client.
 */
#ifndef OCSCTL_SERVERS_H
#define OCSCTL_SERVERS_H

#include <stdbool.h>
#include <stddef.h>

#include "nb_client.h"

#define OCSCTL_SERVERS_MAX	16 /* addresses in one --server list */
#define OCSCTL_SERVERS_MAX_HOPS 4  /* redirects followed per call */

struct ocsctl_servers;

/*
 * list: "HOST:PORT[,HOST:PORT..]" (spaces around commas are ignored);
 * opts: the client options of every server (opts->target is ignored; the
 * struct and its strings must outlive the result). Returns NULL with the
 * reason in err (an empty or over-long list, an empty address).
 */
struct ocsctl_servers *ocsctl_servers_new(const char *list, const struct nb_client_opts *opts,
					  char *err, size_t err_len);
void ocsctl_servers_free(struct ocsctl_servers *s);

/* The deadline of the calls that follow, in ms (connecting keeps the
 * opts->timeout_ms given to ocsctl_servers_new). */
void ocsctl_servers_set_timeout(struct ocsctl_servers *s, int timeout_ms);

/*
 * Connects to the first listed server that can be reached: 0, or -1 with
 * st filled in (unreachable; the trail names every server and why). A
 * client that cannot be built (unreadable TLS files) is -1 with
 * st->unreachable false and st->message saying why.
 */
int ocsctl_servers_connect(struct ocsctl_servers *s, struct nb_client_status *st);

/*
 * nb_client_unary() on the current server, following redirects and moving
 * on to the next listed server when one cannot be reached (see the top of
 * this file). 0 and *resp (caller frees) on OK. Otherwise -1 and st: the
 * answer of the server that took the call (any refusal but a redirect), or
 * when none took it, UNAVAILABLE with st->unreachable set when no server
 * answered at all; then ocsctl_servers_trail() tells the story.
 */
int ocsctl_servers_unary(struct ocsctl_servers *s, const char *path, const ProtobufCMessage *req,
			 const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
			 struct nb_client_status *st);

/* The connected client (after a successful connect or call), for streams;
 * owned by s. */
struct nb_client *ocsctl_servers_client(struct ocsctl_servers *s);
/* The address of the server in use, or after a failure the one tried
 * last (owned by s). */
const char *ocsctl_servers_current(const struct ocsctl_servers *s);
/* How many addresses the --server list has. */
size_t ocsctl_servers_listed(const struct ocsctl_servers *s);
/*
 * After a failed connect or call that no server took: one line per server
 * tried, "ADDRESS: why" (ADDRESS followed by "(leader according to X)"
 * when reached through a redirect); "" otherwise. Owned by s, valid until
 * the next call.
 */
const char *ocsctl_servers_trail(const struct ocsctl_servers *s);

#endif
