/*
 * devsim_server.h - ocs-devsim's NETCONF sessions: threads that accept
 * sessions on the devices' endpoints, bind each session to the device whose
 * port it reached, and serve its RPCs through devsim_fleet_rpc(); and a
 * timer thread that reverts expired confirmed commits.
 *
 * The caller sets up libnetconf2's server (nc_server_init, endpoints) first;
 * devsim_server_start() installs the process-global RPC callback, which
 * finds everything it needs through the session's data. One server per
 * process (libnetconf2 has one RPC callback). devsim_server_start() and
 * devsim_server_stop() are called from one thread, the one that created the
 * server.
 */
#ifndef OCS_DEVSIM_SERVER_H
#define OCS_DEVSIM_SERVER_H

#include "devsim_fleet.h"

#include <stdint.h>

struct devsim_server;

/*
 * A server for the devices of fleet (borrowed, outlives the server); device
 * I listens on base_port + I. `workers` threads serve RPCs. NULL when out of
 * memory.
 */
struct devsim_server *devsim_server_new(struct devsim_fleet *fleet, uint16_t base_port,
					int workers);
/* Starts every thread. 0, or -errno (no thread left running). */
int devsim_server_start(struct devsim_server *srv);
/* Stops and joins the threads and ends every session. No-op when not started. */
void devsim_server_stop(struct devsim_server *srv);
/* Stops the server if needed and frees it; accepts NULL. */
void devsim_server_free(struct devsim_server *srv);

#endif
