/*
 * devsim_fleet.h - the devices ocs-devsim simulates and what NETCONF does to
 * them: datastores, locks, edit-config, validate, (confirmed) commit,
 * get/get-config, get-schema, notifications, the fault knobs, and state data
 * that behaves like hardware. Nothing here knows about sockets or threads:
 * devsim_server.c hands each RPC of a session to the device the session is
 * bound to.
 *
 * Thread-safety: every device has one mutex that guards all of its state;
 * the functions below take it themselves, and a thread holds at most one
 * device mutex at a time, so there is no lock order to respect. The fleet's
 * own settings are read-only after devsim_fleet_new().
 */
#ifndef OCS_DEVSIM_FLEET_H
#define OCS_DEVSIM_FLEET_H

#include "devsim_opts.h"
#include "devsim_wire.h"

#include <libyang/libyang.h>
#include <nc_server.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct devsim_fleet;
struct devsim_device;

/*
 * The libyang context every device of a run shares: ietf-netconf (with
 * :confirmed-commit unless confirmed_commit is false), the NETCONF
 * monitoring and RFC 5277 notification modules from ietf_dir (and yuma's
 * derived directories), and the built-in ocs-switch, ocs-transceiver and
 * ocs-devsim modules. Also sets libyang's logging for the process: messages
 * stored, not printed, the last one only (ly_errmsg() gives it). 0, or
 * -EINVAL after writing why to err. The caller frees *out with
 * ly_ctx_destroy().
 */
int devsim_fleet_context(const char *ietf_dir, bool confirmed_commit, struct ly_ctx **out,
			 FILE *err);
/*
 * The same for a model: ocs-switch and ocs-transceiver get the context
 * above; polatis gets ietf-netconf with :writable-running only (no
 * candidate, validate or confirmed commit), the optical-switch and
 * polatis-switch modules and ocs-devsim, and not the ocs-* device modules.
 */
int devsim_fleet_context_model(const char *ietf_dir, enum devsim_model model, bool confirmed_commit,
			       struct ly_ctx **out, FILE *err);

/*
 * opts->count devices of opts->model with opts->ports ports (polatis:
 * 2 x opts->ports), each with the
 * start faults of opts that concern it. ctx (borrowed, outlives the fleet)
 * holds the modules of the model; opts is read during the call, except
 * opts->ietf_dir, which must outlive the fleet. NULL when out of memory.
 */
struct devsim_fleet *devsim_fleet_new(const struct ly_ctx *ctx, const struct devsim_opts *opts);
/* Frees every device; accepts NULL. No session may use the fleet any more. */
void devsim_fleet_free(struct devsim_fleet *fleet);

int devsim_fleet_count(const struct devsim_fleet *fleet);
/* Device index (0 <= index < count); the fleet owns it. */
struct devsim_device *devsim_fleet_device(struct devsim_fleet *fleet, int index);

/*
 * Answers one RPC of session s on device d: the fault knobs of the RPC's
 * step first (hang, drop: shuts socket fd down, refuse), then the
 * operation. *wire says what the knobs garble, trickle and endless do to
 * the reply on its way out (devsim_wire.h). The caller (libnetconf2) frees
 * the reply.
 */
struct nc_server_reply *devsim_fleet_rpc(struct devsim_device *d, const struct lyd_node *rpc,
					 struct nc_session *s, int fd,
					 struct devsim_wire_fault *wire);
/*
 * The operation of one RPC on device d for session id sid, without a
 * NETCONF session and without the fault knobs: what ocs-devsim does with
 * an RPC's content, callable from a harness (tests/fuzz/fuzz_devsim_edit.c).
 * create-subscription is refused (there is no session to notify). The
 * caller frees the reply (nc_server_reply_free()).
 */
struct nc_server_reply *devsim_fleet_rpc_sid(struct devsim_device *d, const struct lyd_node *rpc,
					     uint32_t sid);
/*
 * Device d's running (or candidate) datastore printed as XML, for checks
 * from outside (tests, the fuzz harness); "" when empty, NULL when out of
 * memory. Caller frees.
 */
char *devsim_fleet_datastore_xml(struct devsim_device *d, bool candidate);
/* Session s of device d ended: releases its locks, reverts its unconfirmed commit unless
 * persistent. */
void devsim_fleet_session_ended(struct devsim_device *d, struct nc_session *s);
/*
 * <kill-session> of session sid on device d (RFC 6241 7.9; the server ends
 * the session itself, devsim_server.c): what the session's end does at
 * once (locks released, its unconfirmed commit reverted unless
 * persistent), and every RPC of sid still running or arriving later is
 * refused, as an operation of a terminated session.
 */
void devsim_fleet_session_killed(struct devsim_device *d, uint32_t sid);
/* Reverts every confirmed commit whose timeout has passed. */
void devsim_fleet_expire_commits(struct devsim_fleet *fleet);

#endif
